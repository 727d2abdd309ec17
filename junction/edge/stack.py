"""An acceptor's listener stack: the layers every listener has, whatever it serves.

The node makes the factories that serve the acceptor's protocols (its broker
core's adapters, the cluster's links) and, for an acceptor with ``router=``,
the gateway in front of them; it asks this module for the rest, from the
inside out:

1. :func:`serving_factory` -- one factory for the acceptor: the only one, or
   a :class:`~junction.edge.acceptor.MultiProtocolFactory` that sniffs each
   connection (within the connect timeout) and hands it to the factory of its
   protocol;
2. :func:`build_stack` -- ``sslEnabled``: TLS in front
   (:func:`~junction.edge.tls.wrap_tls`, with ``handshakesAllowed``); then
   ``proxyProtocolEnabled``: a PROXY header read before that, within the
   connect timeout (:func:`~junction.edge.acceptor.wrap_proxy_protocol`);
   then the per-source limits outermost, as they see the socket's own peer
   (:func:`~junction.edge.admission.wrap_admission`);
3. :func:`listen` -- the port, with the acceptor's ``backlog``
   (:func:`listen_backlog`).

Nothing here knows a protocol, a broker core or a router; values come from
the acceptor's URL parameters as the configuration checked them.
"""

from __future__ import annotations

from dataclasses import dataclass

from junction.edge.acceptor import MultiProtocolFactory, wrap_proxy_protocol
from junction.edge.admission import wrap_admission
from junction.edge.tls import wrap_tls

__all__ = ["DEFAULT_BACKLOG", "ListenerStack", "build_stack", "listen", "listen_backlog", "serving_factory"]

#: connections the kernel completes for an acceptor before Junction accepts them (Artemis's
#: ``backlog`` parameter; Netty's default is the system's somaxconn).  Twisted's own default,
#: 50, overflows when clients connect in bursts while the node is busy: the kernel then drops
#: the client's SYN and the client waits a second to retry.
DEFAULT_BACKLOG = 1024


def listen_backlog(acceptor) -> int:
    """The listen backlog of *acceptor*: its ``backlog`` parameter, else :data:`DEFAULT_BACKLOG`."""
    value = int((acceptor.params or {}).get("backlog", -1))
    return value if value > 0 else DEFAULT_BACKLOG


def serving_factory(factories: dict, *, reactor, acceptor_name: str, sniff_timeout: float):
    """The factory of an acceptor serving ``factories`` (protocol name -> factory, at least one)."""
    if len(factories) == 1:
        return next(iter(factories.values()))
    return MultiProtocolFactory(factories, reactor=reactor, acceptor_name=acceptor_name, sniff_timeout=sniff_timeout)


@dataclass
class ListenerStack:
    """What :func:`build_stack` put around an acceptor's own factory.

    ``factory`` is the acceptor's own (for status and stop), ``listening`` the
    outermost layer (what the port serves), ``tls`` and ``admission`` those
    layers when the acceptor has them (else None), ``described`` how the
    layers read in the node's log line (`` over TLS``, `` behind the PROXY
    protocol``).
    """

    factory: object
    listening: object
    tls: object | None = None
    admission: object | None = None
    described: str = ""


def build_stack(factory, acceptor, *, reactor, connect_timeout: float) -> ListenerStack:
    """``factory`` behind TLS, the PROXY protocol and the per-source limits, as ``acceptor`` asks.

    ``connect_timeout`` (seconds) bounds the PROXY header's arrival.
    """
    listening = factory
    tls = None
    described = ""
    if acceptor.tls is not None:
        tls = listening = wrap_tls(
            factory,
            acceptor.tls.build(),
            reactor=reactor,
            acceptor_name=acceptor.name,
            handshakes_allowed=int((acceptor.params or {}).get("handshakesAllowed", -1)),
        )
        described += " over TLS"
    proxied = wrap_proxy_protocol(listening, acceptor, reactor=reactor, timeout=connect_timeout)
    if proxied is not listening:
        described += " behind the PROXY protocol"
    listening = wrap_admission(proxied, acceptor, reactor=reactor)
    admission = listening if listening is not proxied else None
    return ListenerStack(factory, listening, tls, admission, described)


def listen(stack: ListenerStack, acceptor, *, reactor):
    """Listen on the acceptor's host and port with its backlog; the listening port."""
    return reactor.listenTCP(
        acceptor.port, stack.listening, interface=acceptor.host or "0.0.0.0", backlog=listen_backlog(acceptor)
    )
