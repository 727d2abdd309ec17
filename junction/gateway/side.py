"""The gateway's side of a protocol: what the listener asks of each protocol it routes.

:class:`~junction.gateway.listener.GatewayProtocol` knows no protocol.  Once a
connection is sniffed, it takes the protocol's entry from the protocol table
(:mod:`junction.protocols.registry`) and the :class:`GatewaySide` the entry
names (``gateway=``; one per listener, made on first use), and asks it for:

* :meth:`GatewaySide.opening` -- the opening reader
  (:class:`~junction.protocols.opening.Opening`) for this connection, with its
  authentication callback (the node's security manager);
* :meth:`GatewaySide.opening_failed` -- the log line and the counter of a
  failed opening;
* :meth:`GatewaySide.login` -- the principal of a complete opening to route
  on (or :data:`ANSWERED` when the side answered and closed instead), and any
  login to redo at the backend on the client's behalf
  (``connection.backend_login``);
* :meth:`GatewaySide.forward_handshake` and :meth:`GatewaySide.local_hand_off`
  -- that login, redone with a forward target or with the local broker core;
* the words of its log lines: :attr:`GatewaySide.client_id_label`,
  :attr:`GatewaySide.awaited`, and :attr:`GatewaySide.error_condition` (the
  condition of the gateway's own errors, where the protocol has conditions).

The defaults suit a protocol whose backend needs nothing redone (the client's
bytes are replayed as they came): a new protocol implements :meth:`opening`
and, where its words differ, the attributes.
"""

from __future__ import annotations

import logging

__all__ = ["ANSWERED", "Anonymous", "FilteredTransport", "GatewaySide", "peer_of"]

log = logging.getLogger("junction.gateway")

#: :meth:`GatewaySide.login`'s answer when the connection was answered and closed
ANSWERED = object()


def peer_of(transport) -> str:
    """``host:port`` (``[v6]:port``) of the transport's peer, for the key and the logs."""
    try:
        peer = transport.getPeer()
        host, port = peer.host, peer.port
    except Exception:  # noqa: BLE001 - a transport without a peer address
        return "?"
    shown = f"[{host}]" if ":" in str(host) else str(host)
    return f"{shown}:{port}"


class FilteredTransport:
    """A client's transport as a local broker core sees it while the side filters what the
    core writes (:meth:`GatewaySide.local_hand_off`): a subclass implements ``write``;
    everything else, attributes set included (``transport.protocol = ...`` on a hand-over),
    is the real transport's (``_transport``)."""

    def __init__(self, transport):
        object.__setattr__(self, "_transport", transport)

    def __getattr__(self, name):
        return getattr(self._transport, name)

    def __setattr__(self, name, value):
        setattr(self._transport, name, value)

    def writeSequence(self, data) -> None:
        self.write(b"".join(data))

    def write(self, data: bytes) -> None:
        raise NotImplementedError


class Anonymous:
    """The principal of a login when the gateway has no security manager."""

    __slots__ = ("user", "roles")

    def __init__(self, user):
        self.user = user
        self.roles = frozenset()


class GatewaySide:
    """One routed protocol on one gateway listener (``factory``, the protocol's ``entry``)."""

    #: what the client id is called in the routing log line
    client_id_label = "client-id"
    #: what did not arrive in time, for the routingTimeout log line
    awaited = "no complete opening"
    #: the condition of the gateway's own errors (None: the protocol has none)
    error_condition: str | None = None

    def __init__(self, factory, entry):
        self.factory = factory
        self.entry = entry
        self.name = entry.name
        #: the largest frame of an opening: the acceptor parameter the entry names
        #: (``frame_size_param``), else ``<limits max-frame-size>``
        name = entry.frame_size_param
        self.max_frame = int(factory.params[name]) if name in factory.params else factory.default_max_frame

    def opening(self, connection):
        """A new opening reader for ``connection`` (a GatewayProtocol)."""
        raise NotImplementedError

    def opening_failed(self, connection, event) -> None:
        """Log and count a failed opening (its answer is written; the listener closes)."""
        factory = self.factory
        if event.login_refused:
            log.info(
                "router %s: %s connection from %s (%s %r): login %r refused: authentication failed",
                factory.router.name,
                self.name,
                connection.peer,
                self.client_id_label,
                event.client_id,
                event.user,
            )
            factory.count("unauthenticated")
        else:
            log.info(
                "acceptor %s (router %s): %s connection from %s: %s",
                factory.acceptor_name,
                factory.router.name,
                self.name,
                connection.peer,
                event.reason,
            )

    def login(self, connection, event):
        """The principal to route a complete opening on, or :data:`ANSWERED`."""
        return event.principal

    def forward_handshake(self, connection):
        """The handshake for :func:`~junction.gateway.forward.connect_and_forward` (None: replay only)."""
        return None

    def local_hand_off(self, connection, transport, buffered: bytes):
        """The transport and bytes the local broker core is given (by default, as they are)."""
        return transport, buffered

    def anonymous(self, user) -> Anonymous:
        return Anonymous(user)
