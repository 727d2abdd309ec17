"""Every acceptor parameter the params table lists for a part is read by that part.

``junction/config/params.py`` is the one place that says which part of
Junction acts on which acceptor parameter (the node warns about every other
parameter as having no effect).  Here each (part, parameter) the table lists
is a case: an acceptor URL giving the parameter a value other than its
default is read by the configuration loader, the part is built from that
acceptor as the node builds it (the broker adapter from the protocol table
and its protocol for a connection, the gateway's listener, the TLS settings,
the listener stack), and the value is seen where the part uses it -- and not
seen without the parameter.  A row the table adds for a part that reads
nothing of it has no case, and fails the completeness check; a part that
stops reading its parameter fails its case.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
import trustme
from OpenSSL import SSL
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory
from twisted.internet.testing import MemoryReactorClock, StringTransport

from junction.config.loader import parse_config
from junction.config.model import Limits
from junction.config.params import ACCEPTOR_PARTS, PARAMS
from junction.edge.stack import build_stack, listen_backlog
from junction.node.listeners import PROTOCOL_FACTORIES
from junction.protocols.errors import RemoteProtocolError
from junction.tls.server import parse_server_tls
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_config import core
from tests.unit.test_gateway_listener import Gateway

#: (part, parameter) rows that no code reads, on purpose: accepted without a warning
NOT_READ = {
    ("STOMP", "useEpoll"): "Twisted's reactor on Linux is epoll already",
    ("AMQP", "useEpoll"): "Twisted's reactor on Linux is epoll already",
    ("CORE", "useEpoll"): "Twisted's reactor on Linux is epoll already",
    ("OPENWIRE", "useEpoll"): "Twisted's reactor on Linux is epoll already",
}


@pytest.fixture(scope="module")
def key_store(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pki") / "server.pem"
    trustme.CA().issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


def loaded(params: str):
    """The acceptor ``tcp://127.0.0.1:61613?<params>`` as the configuration loader reads it."""
    url = "tcp://127.0.0.1:61613" + (f"?{params}" if params else "")
    routers = "<connection-routers><connection-router name='r'><key-type>CLIENT_ID</key-type>" \
        "</connection-router></connection-routers>"
    text = core(f"<acceptors><acceptor name='a'>{url}</acceptor></acceptors>{routers}")
    (acceptor,) = parse_config(text, file="b.xml", env={}).acceptors
    return acceptor


class _Socket:
    """Records the options set on it."""

    def __init__(self):
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level, option, value):
        self.options.append((level, option, value))


class _SocketTransport(StringTransport):
    def __init__(self):
        super().__init__()
        self.socket = _Socket()


def _adapter(part: str, params: str):
    """The part's broker adapter for the acceptor (protocols=<part>;params), and its factory."""
    acceptor = loaded(f"protocols={part}" + (f";{params}" if params else ""))
    broker = Broker()
    factory = PROTOCOL_FACTORIES[part](broker.server, acceptor=acceptor, limits=Limits(), reactor=broker.clock)
    return factory, factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))


def adapter(read: Callable[[Any], Any]):
    """Observe ``read(protocol)`` of the part's adapter's protocol for one connection."""
    return lambda part, params: read(_adapter(part, params)[1])


def accepted(part: str, params: str) -> bool:
    """Whether the adapter takes a first connection (connectionsAllowed)."""
    return _adapter(part, params)[1] is not None


def socket_options(part: str, params: str) -> list:
    """The options the adapter's protocol sets on its connection's socket."""
    _factory, protocol = _adapter(part, params)
    transport = _SocketTransport()
    protocol.makeConnection(transport)
    return transport.socket.options


def served_cluster_connection(part: str, params: str) -> str:
    """The cluster connection whose topology the CORE adapter tells its subscribers, on a
    node with two (stand-ins: the adapter reads their names, members and connectors)."""
    factory, _protocol = _adapter(part, params)

    def connection(name):
        return SimpleNamespace(
            name=name, own_connector=None, announced_members=dict,
            add_member_listener=lambda fn: fn({}), remove_member_listener=lambda fn: None,
        )

    factory.server.cluster = SimpleNamespace(
        connections=[connection("first"), connection("second")], node_id="n",
        config=SimpleNamespace(acceptors=(), scale_down=None),
    )
    return factory.cluster_topology().connection.name


def stomp_refuses_a_1000_byte_frame(part: str, params: str) -> bool:
    _factory, protocol = _adapter(part, params)
    try:
        protocol.codec.receive_data(b"SEND\ndestination:q\n\n" + b"x" * 1000 + b"\0")
    except RemoteProtocolError:
        return True
    return False


def model(read: Callable[[Any], Any]):
    """Observe ``read(acceptor)`` of the acceptor the loader read (with protocols=<part> for adapters)."""
    return lambda part, params: read(loaded(params))


def stack(read: Callable[[Any], Any]):
    """Observe ``read(stack)`` of the listener stack built around a factory for the acceptor."""
    return lambda part, params: read(build_stack(Factory(), loaded(params), reactor=MemoryReactorClock(), connect_timeout=3.0))


def tls_settings(read: Callable[[Any], Any]):
    """Observe ``read(ServerTLS)`` of the TLS part's reading of the parameters (paths as given)."""

    def observe(part, params):
        settings, problems = parse_server_tls(dict(p.split("=", 1) for p in params.split(";") if p), lambda p: p)
        assert problems == []
        return read(settings)

    return observe


def gateway(read: Callable[[Any], Any]):
    """Observe ``read(GatewayFactory)`` of a gateway listener with these parameters."""

    def observe(part, params):
        g = Gateway(params=dict(p.split("=", 1) for p in params.split(";") if p), limits=Limits())
        try:
            return read(g.factory)
        finally:
            g.factory.close_all()
            g.stop()

    return observe


def served_over_tls(part: str, params: str) -> bool:
    """Whether the part's connections come through TLS: the stack's TLS layer over its factory."""
    if part in ("STOMP", "AMQP", "CORE", "OPENWIRE"):
        params = f"protocols={part}" + (f";{params}" if params else "")
    acceptor = loaded(params)
    built = build_stack(Factory(), acceptor, reactor=MemoryReactorClock(), connect_timeout=3.0)
    return built.tls is not None and acceptor.tls is not None


@dataclass(frozen=True)
class Case:
    """``observe(part, base;given) == expected``, and ``!= expected`` with ``base`` alone."""

    given: str
    observe: Callable[[str, str], Any]
    expected: Any
    base: str = ""


_TLS = "sslEnabled=true;keyStorePath=/k.pem"
_KEY = "<key store>"  # replaced by the fixture's file
_SERVED = {
    "protocols": lambda part: Case(f"protocols={part}", model(lambda a: a.protocols), frozenset({part})),
    "protocol": lambda part: Case(f"protocol={part}", model(lambda a: a.protocols), frozenset({part})),
    "anycastPrefix": lambda part: Case("anycastPrefix=any.,queue.", adapter(lambda p: p.anycast_prefixes), ("any.", "queue.")),
    "multicastPrefix": lambda part: Case("multicastPrefix=topic.", adapter(lambda p: p.multicast_prefixes), ("topic.",)),
    "connectionsAllowed": lambda part: Case("connectionsAllowed=0", accepted, False),
    "tcpNoDelay": lambda part: Case(
        "tcpNoDelay=false", lambda part, params: (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in socket_options(part, params), False
    ),
    "tcpSendBufferSize": lambda part: Case(
        "tcpSendBufferSize=4096", lambda part, params: (socket.SOL_SOCKET, socket.SO_SNDBUF, 4096) in socket_options(part, params), True
    ),
    "tcpReceiveBufferSize": lambda part: Case(
        "tcpReceiveBufferSize=8192", lambda part, params: (socket.SOL_SOCKET, socket.SO_RCVBUF, 8192) in socket_options(part, params), True
    ),
    "sslEnabled": lambda part: Case(f"sslEnabled=true;keyStorePath={_KEY}", served_over_tls, True),
}

CASES: dict[tuple[str, str], Case] = {
    # the listening socket
    ("LISTENER", "protocols"): Case("protocols=AMQP,STOMP", model(lambda a: a.protocols), frozenset({"AMQP", "STOMP"})),
    ("LISTENER", "backlog"): Case("backlog=64", model(listen_backlog), 64),
    ("LISTENER", "router"): Case("router=r", model(lambda a: a.router), "r"),
    # the gateway's listener
    ("GATEWAY", "routerMode"): Case("routerMode=forward", gateway(lambda f: f.mode), "forward"),
    ("GATEWAY", "routingTimeout"): Case("routingTimeout=1500", gateway(lambda f: f.connect_timeout), 1.5),
    ("GATEWAY", "routingMaxBytes"): Case("routingMaxBytes=5000", gateway(lambda f: f.max_buffered), 5000),
    # the adapters: what both read, then each one's own
    **{(part, name): make(part) for part in ("STOMP", "AMQP", "CORE", "OPENWIRE") for name, make in _SERVED.items()},
    ("STOMP", "stompMaxFramePayloadLength"): Case("stompMaxFramePayloadLength=500", stomp_refuses_a_1000_byte_frame, True),
    ("STOMP", "heartBeatToConnectionTtlModifier"): Case(
        "heartBeatToConnectionTtlModifier=3.5", adapter(lambda p: p.ttl_modifier), 3.5
    ),
    ("CORE", "clusterConnection"): Case("clusterConnection=second", served_cluster_connection, "second"),
    ("AMQP", "maxFrameSize"): Case("maxFrameSize=65536", adapter(lambda p: p.max_frame_size), 65536),
    ("AMQP", "amqpCredits"): Case("amqpCredits=50", adapter(lambda p: p.credits), 50),
    ("AMQP", "amqpLowCredits"): Case("amqpLowCredits=10", adapter(lambda p: p.low_credits), 10),
    ("AMQP", "amqpIdleTimeout"): Case("amqpIdleTimeout=5000", adapter(lambda p: p.idle_timeout), 5.0),
    ("AMQP", "amqpChannelMax"): Case("amqpChannelMax=7", adapter(lambda p: p.channel_max), 7),
    ("AMQP", "amqpMaxMessageSize"): Case("amqpMaxMessageSize=2048", adapter(lambda p: p.max_message_size), 2048),
    ("AMQP", "saslMechanisms"): Case("saslMechanisms=PLAIN", adapter(lambda p: p.sasl.mechanisms), ("PLAIN",)),
    ("AMQP", "amqpTreatRejectAsUnmodifiedDeliveryFailed"): Case(
        "amqpTreatRejectAsUnmodifiedDeliveryFailed=true", adapter(lambda p: p.reject_as_modified), True
    ),
    # TLS: the settings it reads, then the stack's TLS layer
    ("TLS", "sslEnabled"): Case(f"sslEnabled=true;keyStorePath={_KEY}", served_over_tls, True),
    ("TLS", "keyStorePath"): Case(f"{_TLS};keyStorePath=/other.pem", tls_settings(lambda t: t.key_store), "/other.pem", _TLS),
    ("TLS", "keyStorePassword"): Case("keyStorePassword=pw", tls_settings(lambda t: t.key_store_password), "pw", _TLS),
    ("TLS", "keyStoreType"): Case("keyStoreType=PKCS12", tls_settings(lambda t: t.key_store_type), "PKCS12", _TLS),
    ("TLS", "trustStorePath"): Case("trustStorePath=/ca.pem", tls_settings(lambda t: t.trust_store), "/ca.pem", _TLS),
    ("TLS", "trustStorePassword"): Case("trustStorePassword=pw", tls_settings(lambda t: t.trust_store_password), "pw", _TLS),
    ("TLS", "trustStoreType"): Case("trustStoreType=PEM", tls_settings(lambda t: t.trust_store_type), "PEM", _TLS),
    ("TLS", "enabledProtocols"): Case(
        "enabledProtocols=TLSv1.3", tls_settings(lambda t: t.protocols), (SSL.TLS1_3_VERSION, SSL.TLS1_3_VERSION), _TLS
    ),
    ("TLS", "enabledCipherSuites"): Case(
        "enabledCipherSuites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", tls_settings(lambda t: t.ciphers),
        "ECDHE-RSA-AES128-GCM-SHA256", _TLS,
    ),
    ("TLS", "sniHost"): Case("sniHost=.*\\.example\\.test", tls_settings(lambda t: t.sni_host), ".*\\.example\\.test", _TLS),
    ("TLS", "needClientAuth"): Case(
        "needClientAuth=true", tls_settings(lambda t: t.need_client_auth), True, _TLS + ";trustStorePath=/ca.pem"
    ),
    ("TLS", "wantClientAuth"): Case(
        "wantClientAuth=true", tls_settings(lambda t: t.want_client_auth), True, _TLS + ";trustStorePath=/ca.pem"
    ),
    ("TLS", "sniRequired"): Case("sniRequired=true", tls_settings(lambda t: t.sni_required), True, _TLS),
    ("TLS", "sniKeyStorePaths"): Case(
        "sniKeyStorePaths=East.example.test:/east.pem", tls_settings(lambda t: t.sni_key_stores),
        (("east.example.test", "/east.pem"),), _TLS,
    ),
    ("TLS", "handshake-timeout"): Case("handshake-timeout=2.5", tls_settings(lambda t: t.handshake_timeout), 2.5, _TLS),
    ("TLS", "handshakesAllowed"): Case(
        "handshakesAllowed=7", stack(lambda s: s.tls.handshakes_allowed), 7, f"sslEnabled=true;keyStorePath={_KEY}"
    ),
    # the PROXY protocol
    ("PROXY", "proxyProtocolEnabled"): Case("proxyProtocolEnabled=true", stack(lambda s: s.described), " behind the PROXY protocol"),
    ("PROXY", "proxyEnabled"): Case("proxyEnabled=true", stack(lambda s: s.described), " behind the PROXY protocol"),
    ("PROXY", "proxyTrustedSources"): Case(
        "proxyTrustedSources=10.0.0.0/8", stack(lambda s: s.listening.trusted),
        (ipaddress.ip_network("10.0.0.0/8"),), "proxyProtocolEnabled=true",
    ),
    # the per-source limits
    ("ADMISSION", "connectionsAllowedPerAddress"): Case(
        "connectionsAllowedPerAddress=5", stack(lambda s: s.admission and s.admission.per_address), 5
    ),
    ("ADMISSION", "connectionRatePerAddress"): Case(
        "connectionRatePerAddress=2.5", stack(lambda s: s.admission and s.admission.rate), 2.5
    ),
}


def test_every_part_s_parameter_in_the_table_has_a_case_and_only_those():
    listed = {(part, p.name) for p in PARAMS for part in p.acceptor}
    assert {part for part, _name in listed} == ACCEPTOR_PARTS
    assert listed == set(CASES) | set(NOT_READ)
    assert not set(CASES) & set(NOT_READ)


def _params(text: str, key_store: str) -> str:
    return text.replace(_KEY, key_store)


@pytest.mark.parametrize(("part", "name"), sorted(CASES), ids=lambda v: v)
def test_the_part_reads_its_parameter(part, name, key_store):
    case = CASES[part, name]
    base = _params(case.base, key_store)
    given = _params(case.given, key_store)
    assert case.observe(part, f"{base};{given}" if base else given) == case.expected
    assert case.observe(part, base) != case.expected  # the default is not what the parameter gave
