"""One acceptor serving several protocols on one port, Artemis style.

An acceptor with ``protocols=STOMP,AMQP`` cannot know what a connection
speaks until its first bytes arrive.  :class:`ProtocolSwitch` holds them (at
most :data:`junction.protocols.detect.MAX_SNIFF_BYTES`, for at most the
connect timeout), asks :func:`junction.protocols.detect.detect`, then hands
the transport and the bytes to a protocol built by that protocol's own
factory, which from then on owns the connection.  Unknown bytes close the
connection with a log line saying what arrived.
"""

from __future__ import annotations

import logging
import socket

from twisted.internet.protocol import Factory, Protocol

from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, UNKNOWN, describe, detect

log = logging.getLogger("junction.acceptor")

#: seconds a connection may take to send enough bytes to tell its protocol
DEFAULT_SNIFF_TIMEOUT = 10.0


class ProtocolSwitch(Protocol):
    """Sniffs the first bytes, then becomes the protocol they name."""

    def __init__(self, factory: "MultiProtocolFactory"):
        self.switch_factory = factory
        self.buffer = b""
        self.timer = None
        self.target = None

    def connectionMade(self):
        reactor = self.switch_factory.reactor
        self.timer = reactor.callLater(self.switch_factory.sniff_timeout, self._timed_out)

    def dataReceived(self, data: bytes):
        if self.target is not None:  # pragma: no cover - the transport talks to the target now
            self.target.dataReceived(data)
            return
        self.buffer += data
        name = detect(self.buffer[:MAX_SNIFF_BYTES])
        if name == NEED_MORE and len(self.buffer) < MAX_SNIFF_BYTES:
            return
        factory = self.switch_factory.factories.get(name) if name not in (NEED_MORE, UNKNOWN) else None
        if factory is None:
            what = "an unknown protocol" if name in (NEED_MORE, UNKNOWN) else f"{name}, which this acceptor does not serve"
            log.info(
                "acceptor %s: %s from %s sent %s: %s",
                self.switch_factory.acceptor_name,
                "connection",
                _peer(self.transport),
                what,
                describe(self.buffer),
            )
            self._stop_timer()
            self.transport.loseConnection()
            return
        self._stop_timer()
        protocol = factory.buildProtocol(self.transport.getPeer())
        if protocol is None:
            self.transport.loseConnection()
            return
        self.target = protocol
        buffered, self.buffer = self.buffer, b""
        # The transport delivers to the new protocol from now on.
        self.transport.protocol = protocol
        protocol.makeConnection(self.transport)
        protocol.dataReceived(buffered)

    def _timed_out(self):
        self.timer = None
        if self.target is None:
            log.info(
                "acceptor %s: %s sent %s within %g s, not enough to tell its protocol",
                self.switch_factory.acceptor_name,
                _peer(self.transport),
                describe(self.buffer),
                self.switch_factory.sniff_timeout,
            )
            self.transport.loseConnection()

    def _stop_timer(self):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None

    def connectionLost(self, reason=None):
        self._stop_timer()
        if self.target is not None:  # pragma: no cover - the target gets it directly
            self.target.connectionLost(reason)


class AcceptorFactory(Factory):
    """Builds one protocol per connection on an acceptor, up to ``connectionsAllowed``.

    Subclasses name their protocol class; it is built as
    ``protocol_class(server, acceptor=..., limits=..., reactor=...)``.
    """

    protocol_class: type = None  # type: ignore[assignment]

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None):
        self.server = server
        self.acceptor = acceptor
        self.limits = limits
        self.reactor = reactor
        self.connections: set = set()

    def buildProtocol(self, addr):
        allowed = int((self.acceptor.params if self.acceptor else {}).get("connectionsAllowed", -1))
        if 0 <= allowed <= len(self.connections):
            # Artemis connectionsAllowed: refuse (close) beyond the limit.
            log.warning(
                "acceptor %s: connectionsAllowed=%d reached, refusing %s",
                self.acceptor.name,
                allowed,
                getattr(addr, "host", addr),
            )
            return None
        proto = self.protocol_class(self.server, acceptor=self.acceptor, limits=self.limits, reactor=self.reactor)
        proto.factory = self
        return proto


def apply_socket_options(transport, acceptor) -> None:
    """Artemis's tcpNoDelay (default true) and socket buffer sizes."""
    params = acceptor.params if acceptor is not None else {}
    sock = getattr(transport, "socket", None)
    if sock is None:
        return
    try:
        if str(params.get("tcpNoDelay", "true")).lower() == "true":
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for key, option in (("tcpSendBufferSize", socket.SO_SNDBUF), ("tcpReceiveBufferSize", socket.SO_RCVBUF)):
            if key in params and int(params[key]) > 0:
                sock.setsockopt(socket.SOL_SOCKET, option, int(params[key]))
    except (OSError, ValueError) as exc:
        log.warning("could not apply socket options %s: %s", params, exc)


def prefixes(value: str | None) -> tuple:
    """An acceptor's ``anycastPrefix`` / ``multicastPrefix`` comma list."""
    if not value:
        return ()
    return tuple(p for p in (s.strip() for s in value.split(",")) if p)


class MultiProtocolFactory(Factory):
    """The factory of an acceptor that serves several protocols."""

    def __init__(self, factories: dict, *, reactor, acceptor_name: str = "?", sniff_timeout: float = DEFAULT_SNIFF_TIMEOUT):
        self.factories = factories
        self.reactor = reactor
        self.acceptor_name = acceptor_name
        self.sniff_timeout = sniff_timeout

    @property
    def connections(self) -> set:
        found = set()
        for factory in self.factories.values():
            found |= getattr(factory, "connections", set())
        return found

    def buildProtocol(self, addr):
        protocol = ProtocolSwitch(self)
        protocol.factory = self
        return protocol


def _peer(transport) -> str:
    try:
        peer = transport.getPeer()
        return f"{peer.host}:{peer.port}"
    except Exception:  # noqa: BLE001 - only for a log line
        return "?"
