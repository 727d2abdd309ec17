"""OpenWire on a gateway listener: the ConnectionInfo is the opening.

The opening reader is :class:`~junction.protocols.openwire.opening.OpenWireOpening`:
the client's WireFormatInfo (answered at once with the gateway's offer: the
real client sends nothing else until it has it), a ``failover:`` client's
ConnectionControl and KeepAliveInfos, then the ConnectionInfo, whose
``userName``/``password`` the gateway checks itself and whose ``clientId`` is
the CLIENT_ID key.  Its frames before the login are bounded by the opening's
own limits (64 KiB, 256 KiB, 32 commands), the stream also by the
listener's ``routingMaxBytes``.

* redirect (OpenWire's native one, ``routerMode`` ``auto`` or ``redirect``):
  a ConnectionControl with ``reconnectTo`` and ``connectedBrokers`` naming
  the target's connector (``ssl://host:port`` when it has ``sslEnabled=true``,
  where Artemis always writes ``tcp://``; the connector's other parameters are
  the gateway's own TLS stores, not the client's, and are not sent) and
  ``rebalanceConnection``, then close; a client
  whose ConnectionInfo is not ``faultTolerant`` (no ``failover:`` URL) cannot
  follow it and gets Artemis's IllegalStateException instead;
* forward and local: the replay (every byte the client sent) goes to the
  backend, which authenticates the client again and answers its
  ConnectionInfo.  The backend also answers the replayed WireFormatInfo with
  its own, which the client already had from the gateway: that first frame
  is dropped (:class:`_DropWireFormatInfo` when forwarding,
  :class:`_FirstFrameDropped` toward the local broker core);
* refuse and the gateway's own errors: an ExceptionResponse to the
  ConnectionInfo (``javax.jms.JMSException`` with Artemis's router text).

The gateway's offer is Artemis's (version 12, tight, no marshalling cache,
stack traces) with ``MaxFrameSize`` the acceptor's frame size: both ends of a
forwarded connection must read the same bytes alike, so the replay offers a
backend only what the client and the gateway settled on
(:func:`~junction.protocols.openwire.opening.replayed_offer`), which
Artemis's OpenWire acceptor, Junction's node (whose own offer has the cache)
and a Classic broker with its defaults all settle on.
"""

from __future__ import annotations

from dataclasses import replace

from junction.edge.tls import peer_subject
from junction.gateway.forward import ForwardHandshakeError
from junction.gateway.side import FilteredTransport, GatewaySide
from junction.protocols.openwire.opening import (
    OPENING_MAX_BYTES,
    OPENING_MAX_FRAME_SIZE,
    OpenWireCredentials,
    OpenWireOpening,
    first_frame_size,
)
from junction.protocols.openwire.wireformat import MAGIC_BYTES, SERVER_WIRE_FORMAT

__all__ = ["OpenWireSide"]

#: the condition of the gateway's own errors (an unreachable target, a failed handshake)
JMS_EXCEPTION = "javax.jms.JMSException"


class OpenWireSide(GatewaySide):
    client_id_label = "clientId"
    awaited = "no ConnectionInfo"
    error_condition = JMS_EXCEPTION

    def __init__(self, factory, entry):
        super().__init__(factory, entry)
        #: what the gateway offers the client: Artemis's, with the acceptor's frame size
        self.offer = replace(SERVER_WIRE_FORMAT, max_frame_size=self.max_frame)

    def opening(self, connection) -> OpenWireOpening:
        factory = self.factory
        subject = peer_subject(connection.transport)

        def authenticate(credentials: OpenWireCredentials):
            """The principal for the ConnectionInfo's login, or None."""
            security = factory.security
            if security is not None:
                return security.login(credentials.username, credentials.password, subject)
            return self.anonymous(credentials.username or None)

        def redirect_scheme(host: str, port: int) -> str:
            """``ssl`` when the routed target's connector has TLS (``sslEnabled=true``), else ``tcp``."""
            decision = getattr(connection, "decision", None)
            connector = getattr(getattr(getattr(decision, "result", None), "target", None), "connector", None)
            if connector is None or (str(connector.host), int(connector.port)) != (host, port):
                return "tcp"
            return "ssl" if getattr(connector, "tls", None) is not None else "tcp"

        return OpenWireOpening(
            authenticate,
            offer=self.offer,
            max_bytes=min(factory.max_buffered, OPENING_MAX_BYTES),
            remote_address=f"/{connection.peer}",
            redirect_scheme=redirect_scheme,
        )

    def forward_handshake(self, connection):
        """Drop the target's WireFormatInfo: the client has the gateway's already."""
        return _DropWireFormatInfo()

    def local_hand_off(self, connection, transport, buffered: bytes):
        """The local broker core's first frame (its WireFormatInfo) is not written to the client."""
        return _FirstFrameDropped(transport), buffered


#: What a WireFormatInfo frame starts with after its size: its type (1) and magic.
_WFI_OPENING = b"\x01" + MAGIC_BYTES


def _shown(held) -> str:
    """The first bytes a target answered, for an error: text where printable."""
    head = bytes(held[:16])
    return repr(head.decode("latin-1")) if head.isascii() else head.hex(" ")


class _FirstFrame:
    """Collects the first frame a backend writes (its WireFormatInfo), bounded by
    :data:`OPENING_MAX_FRAME_SIZE` (a WireFormatInfo is about 250 bytes)."""

    __slots__ = ("held", "done")

    def __init__(self):
        self.held = bytearray()
        self.done = False

    def feed(self, data: bytes) -> bytes | None:
        """What follows the first frame once it is complete (maybe b""), else None.

        Raises ValueError when the first frame is not a WireFormatInfo: larger than the
        bound, or not its type and magic (a target whose acceptor does not take OPENWIRE
        answers with its own protocol's header, which the error shows)."""
        self.held += data
        held = self.held
        opening = _WFI_OPENING[: len(held) - 4]
        if len(held) > 4 and held[4 : 4 + len(opening)] != opening:
            raise ValueError(
                f"the target does not speak OpenWire (it answered {_shown(held)}): "
                "does its acceptor take OPENWIRE?"
            )
        size = first_frame_size(held) if len(held) > 4 else None  # its type read first
        if size is not None and size - 4 > OPENING_MAX_FRAME_SIZE:
            raise ValueError(
                f"the target does not speak OpenWire (a first frame of {size - 4} bytes, not a "
                f"WireFormatInfo; it answered {_shown(held)}): does its acceptor take OPENWIRE?"
            )
        if size is None or len(self.held) < size:
            return None
        rest = bytes(self.held[size:])
        self.held = bytearray()
        self.done = True
        return rest


class _DropWireFormatInfo:
    """The forwarding handshake (:func:`~junction.gateway.forward.connect_and_forward`):
    writes nothing of its own, drops the target's first frame, passes what follows."""

    def __init__(self):
        self.first = _FirstFrame()

    def start(self) -> bytes:
        return b""

    def feed(self, data: bytes) -> bytes | None:
        try:
            return self.first.feed(data)
        except ValueError as exc:
            raise ForwardHandshakeError("?", str(exc), JMS_EXCEPTION) from None


class _FirstFrameDropped(FilteredTransport):
    """The client's transport as the local broker core sees it: the core's first frame
    (its WireFormatInfo) is dropped, everything after it written as is."""

    def __init__(self, transport):
        super().__init__(transport)
        object.__setattr__(self, "_first", _FirstFrame())

    def write(self, data: bytes) -> None:
        first = self._first
        if first.done:
            self._transport.write(data)
            return
        try:
            rest = first.feed(bytes(data))
        except ValueError:
            self._transport.abortConnection()
            return
        if rest:
            self._transport.write(rest)
