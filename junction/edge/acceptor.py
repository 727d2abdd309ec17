"""One acceptor serving several protocols on one port, Artemis style.

An acceptor with ``protocols=STOMP,AMQP`` cannot know what a connection
speaks until its first bytes arrive.  :class:`ProtocolSwitch` holds them (at
most :data:`junction.protocols.detect.MAX_SNIFF_BYTES`, for at most the
connect timeout), asks :func:`junction.protocols.detect.detect`, then hands
the transport and the bytes to a protocol built by that protocol's own
factory, which from then on owns the connection.  Unknown bytes close the
connection with a log line saying what arrived.

An acceptor with ``proxyProtocolEnabled=true`` (Artemis's parameter) is
wrapped in a :class:`ProxyProtocolFactory`: every connection must start with
a PROXY protocol header (v1 or v2, :mod:`junction.protocols.proxy`), read
within the same connect timeout, and the protocol behind it (the sniffing
:class:`ProtocolSwitch` or a single protocol) is given a transport whose
``getPeer()`` is the client named by the header, plus the bytes that came
after the header.  ``proxyTrustedSources=`` (Junction's) closes connections
from any other source address before reading anything.
"""

from __future__ import annotations

import ipaddress
import logging

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.protocol import Factory, Protocol
from zope.interface import directlyProvides, providedBy

from junction.edge import sockets
from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, UNKNOWN, describe, detect
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.proxy import ProxyHeaderReader, proxy_enabled

log = logging.getLogger("junction.acceptor")

#: seconds a connection may take to send enough bytes to tell its protocol
DEFAULT_SNIFF_TIMEOUT = 10.0


class _HandOver(Protocol):
    """A connection's first protocol: reads a bounded opening under a timer, then hands over.

    ``target`` is the protocol the transport was handed to (None until then).
    """

    timer = None
    target = None

    def _stop_timer(self):
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None

    def connectionLost(self, reason=None):
        self._stop_timer()
        if self.target is not None:  # pragma: no cover - the target gets it directly
            self.target.connectionLost(reason)


class ProtocolSwitch(_HandOver):
    """Sniffs the first bytes, then becomes the protocol they name."""

    def __init__(self, factory: "MultiProtocolFactory"):
        self.switch_factory = factory
        self.buffer = b""

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
        # The transport delivers to the new protocol from now on (through any wrapper).
        sockets.replace_receiver(self.transport, protocol, self)
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
    """Artemis's tcpNoDelay (default true) and socket buffer sizes from the acceptor's URL."""
    sockets.apply_socket_options(transport, acceptor.params if acceptor is not None else {})


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

    def factory_for(self, name: str | None):
        """The factory serving protocol ``name`` here (None: not served): for a connection
        whose protocol is known already (the gateway sniffed it), so it is not sniffed again."""
        return self.factories.get(name)

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


# -- PROXY protocol ---------------------------------------------------------------------------
#: Junction's acceptor parameter: the source addresses (IPs or CIDRs) allowed to connect
PROXY_TRUSTED_PARAM = "proxyTrustedSources"


def parse_trusted_sources(value: str | None) -> tuple:
    """``proxyTrustedSources``: a comma list of IPs or CIDRs (v4 and v6); ValueError if bad.

    An empty or missing value is ``()`` (no restriction).
    """
    networks = []
    for item in (s.strip() for s in (value or "").split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or CIDR network") from None
    return tuple(networks)


def _host_in(host, networks) -> bool:
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        mapped = address.ipv4_mapped
        return any(address in n or mapped in n for n in networks)
    return any(address in n for n in networks)


def _twisted_address(host: str, port: int):
    if ":" in host:
        return IPv6Address("TCP", host, port)
    return IPv4Address("TCP", host, port)


class ProxiedTransport:
    """The transport a protocol behind a PROXY header sees.

    Everything is the real transport's, except ``getPeer()`` / ``getHost()``,
    which answer the header's source / destination (for a ``PROXY``
    command over TCP4/TCP6; otherwise the real addresses), and three
    attributes for logs and management: ``proxy_header`` (the
    :class:`~junction.protocols.proxy.ProxyHeader`), ``proxy_address`` (the
    proxy's ``host:port``, i.e. the real socket peer) and ``proxy_version``
    (``"V1"``/``"V2"``).  Setting an attribute (``transport.protocol = ...``
    on a hand-over) sets it on the real transport.
    """

    def __init__(self, transport, header, trusted: bool = False):
        object.__setattr__(self, "_transport", transport)
        object.__setattr__(self, "proxy_header", header)
        #: the header came from a source in proxyTrustedSources: what it says of the
        #: client's certificate may log the client in (see junction.edge.tls.peer_subject)
        object.__setattr__(self, "proxy_trusted", trusted)
        object.__setattr__(self, "proxy_address", _peer(transport))
        object.__setattr__(self, "proxy_version", header.version_name)
        if header.has_address:
            peer = _twisted_address(*header.source)
            host = _twisted_address(*header.destination)
        else:
            peer, host = transport.getPeer(), transport.getHost()
        object.__setattr__(self, "_peer", peer)
        object.__setattr__(self, "_host", host)
        directlyProvides(self, providedBy(transport))

    def __getattr__(self, name):
        return getattr(self._transport, name)

    def __setattr__(self, name, value):
        setattr(self._transport, name, value)

    def getPeer(self):
        return self._peer

    def getHost(self):
        return self._host

    def __repr__(self) -> str:
        return f"<ProxiedTransport {self._peer} via {self.proxy_address} over {self._transport!r}>"


def proxy_details(transport) -> tuple:
    """``(proxy_address, proxy_version)`` of a connection that came through PROXY, else ``(None, None)``."""
    return getattr(transport, "proxy_address", None), getattr(transport, "proxy_version", None)


class ProxyHeaderProtocol(_HandOver):
    """Reads the PROXY header, then hands the connection to the wrapped factory's protocol.

    No header (anything that cannot start one), a malformed one, or none
    complete within the timeout: the connection is closed with one log line
    saying who connected and what arrived.  The bytes after the header
    (from the same read or later ones) go to the wrapped protocol unchanged.
    """

    def __init__(self, factory: "ProxyProtocolFactory"):
        self.proxy_factory = factory
        self.reader = ProxyHeaderReader()
        self.received = b""

    def connectionMade(self):
        self.timer = self.proxy_factory.reactor.callLater(self.proxy_factory.timeout, self._timed_out)

    def dataReceived(self, data: bytes):
        if self.target is not None:  # pragma: no cover - the transport talks to the target now
            self.target.dataReceived(data)
            return
        if self.transport is None or getattr(self.transport, "disconnecting", False):
            return
        self.received = (self.received + data)[:MAX_SNIFF_BYTES]
        try:
            header = self.reader.receive_data(data)
        except RemoteProtocolError as exc:
            self._refuse(f"sent no valid PROXY protocol header ({exc})")
            return
        if header is None:
            return
        self._stop_timer()
        transport = ProxiedTransport(self.transport, header, trusted=bool(self.proxy_factory.trusted))
        protocol = self.proxy_factory.wrapped.buildProtocol(transport.getPeer())
        if protocol is None:
            self.transport.loseConnection()
            return
        self.target = protocol
        # The real transport delivers to the new protocol from now on (through any wrapper).
        sockets.replace_receiver(self.transport, protocol, self)
        protocol.makeConnection(transport)
        if header.remaining:
            protocol.dataReceived(header.remaining)

    def _refuse(self, why: str) -> None:
        self._stop_timer()
        log.info(
            "acceptor %s: connection from %s %s: %s",
            self.proxy_factory.acceptor_name,
            _peer(self.transport),
            why,
            describe(self.received),
        )
        self.transport.loseConnection()

    def _timed_out(self):
        self.timer = None
        if self.target is None:
            self._refuse(f"sent no complete PROXY protocol header within {self.proxy_factory.timeout:g} s")


class ProxyProtocolFactory(Factory):
    """Wraps an acceptor's factory so that every connection must start with a PROXY header.

    ``wrapped`` builds the protocol behind the header (given the client's
    address from the header).  ``timeout``: seconds for the header to
    arrive (the acceptor's connect timeout).  ``trusted``: networks
    (:func:`parse_trusted_sources`) the connection's source address must be
    in, checked before anything is read; empty means any source.
    """

    def __init__(self, wrapped, *, reactor, acceptor_name: str = "?", timeout: float = DEFAULT_SNIFF_TIMEOUT, trusted=()):
        self.wrapped = wrapped
        self.reactor = reactor
        self.acceptor_name = acceptor_name
        self.timeout = timeout
        self.trusted = tuple(trusted)

    @property
    def connections(self) -> set:
        return getattr(self.wrapped, "connections", set())

    def buildProtocol(self, addr):
        if self.trusted and not _host_in(getattr(addr, "host", None), self.trusted):
            log.warning(
                "acceptor %s: connection from %s refused: not in proxyTrustedSources (%s)",
                self.acceptor_name,
                f"{getattr(addr, 'host', addr)}:{getattr(addr, 'port', '?')}",
                ",".join(str(n) for n in self.trusted),
            )
            return None
        protocol = ProxyHeaderProtocol(self)
        protocol.factory = self
        return protocol


def wrap_proxy_protocol(factory, acceptor, *, reactor, timeout: float):
    """``factory`` wrapped in a :class:`ProxyProtocolFactory` if ``acceptor`` asks for it, else itself."""
    params = getattr(acceptor, "params", None) or {}
    if not proxy_enabled(params):
        return factory
    return ProxyProtocolFactory(
        factory,
        reactor=reactor,
        acceptor_name=getattr(acceptor, "name", "?"),
        timeout=timeout,
        trusted=parse_trusted_sources(params.get(PROXY_TRUSTED_PARAM)),
    )
