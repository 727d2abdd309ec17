"""The gateway listener on in-memory transports and a MemoryReactorClock.

Routers are built from broker.xml by the real loader and ``build_router``;
their pools use :class:`tests.unit.gateway_fixtures.FakeProbe`.  The clock
and the reactor are one ``MemoryReactorClock``: it runs the pools' checks and
the listener's timers, and records the target connections the listener asks
for (``tcpClients``), which the tests complete by hand.  Connections kept
local go to a recording fake factory, or to a real in-memory broker core.
"""

from __future__ import annotations

import logging

import pytest
from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from junction.brokercore.security import SecurityManager
from junction.brokercore.stomp_server import StompFactory
from junction.config.loader import parse_config
from junction.config.model import Acceptor, Limits
from junction.gateway.build import build_router
from junction.gateway.forward import Splice
from junction.gateway.listener import GatewayFactory, GatewayProtocol
from junction.protocols.stomp import Frame, StompCodec
from junction.routing.targets import Target
from tests.unit.gateway_fixtures import FakeProbe, Wire
from tests.unit.stomp_fixtures import Broker, FakeUserStore

CONFIG = """<configuration xmlns="urn:activemq">
<core xmlns="urn:activemq:core">
  <connectors>
    <connector name="c1">tcp://127.0.0.1:61001</connector>
    <connector name="c2">tcp://127.0.0.1:61002</connector>
  </connectors>
  <connection-routers>
    <connection-router name="first">
      <key-type>CLIENT_ID</key-type>
      <local-target-filter>local-.*</local-target-filter>
      <policy name="FIRST_ELEMENT"/>
      <pool>
        <check-period>100</check-period>
        <quorum-timeout>0</quorum-timeout>
        <static-connectors><connector-ref>c1</connector-ref><connector-ref>c2</connector-ref></static-connectors>
      </pool>
    </connection-router>
    <connection-router name="quorum">
      <key-type>CLIENT_ID</key-type>
      <policy name="FIRST_ELEMENT"/>
      <pool>
        <check-period>100</check-period>
        <quorum-size>2</quorum-size>
        <quorum-timeout>1000</quorum-timeout>
        <static-connectors><connector-ref>c1</connector-ref><connector-ref>c2</connector-ref></static-connectors>
      </pool>
    </connection-router>
    <connection-router name="tenants">
      <key-type>USER_NAME</key-type>
      <local-target-filter>tenant-a.*</local-target-filter>
    </connection-router>
    <connection-router name="by-role">
      <key-type>ROLE_NAME</key-type>
      <local-target-filter>alpha</local-target-filter>
    </connection-router>
    <connection-router name="by-ip">
      <key-type>SOURCE_IP</key-type>
      <local-target-filter>10\\.0\\.0\\.7</local-target-filter>
    </connection-router>
  </connection-routers>
</core>
</configuration>
"""

USERS = {
    "alice": ("secret", {"admin"}),
    "tenant-a-bob": ("pw", set()),
    "carol": ("pw", {"zeta", "alpha"}),
}

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\npasscode:secret\nclient-id:app-1\n\n\0"


def connect_frame(command="CONNECT", **headers) -> bytes:
    lines = [command] + [f"{k.replace('_', '-')}:{v}" for k, v in headers.items()]
    return ("\n".join(lines) + "\n\n").encode() + b"\0"


class LocalProtocol(Protocol):
    """What the embedded broker core would be: records what it is given."""

    def __init__(self):
        self.made = False
        self.data = b""

    def connectionMade(self):
        self.made = True

    def dataReceived(self, data):
        self.data += data


class LocalFactory(Factory):
    def __init__(self, refuse=False):
        self.built: list[LocalProtocol] = []
        self.connections: set = set()
        self.refuse = refuse

    def buildProtocol(self, addr):
        if self.refuse:
            return None
        protocol = LocalProtocol()
        self.built.append(protocol)
        return protocol


class Client:
    """One client connection to the gateway listener."""

    def __init__(self, gateway: Gateway, host="10.0.0.5", port=40000):
        self.transport = Wire(host, port)
        self.protocol = gateway.factory.buildProtocol(IPv4Address("TCP", host, port))
        assert self.protocol is not None
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)

    def send(self, data: bytes, bytewise: bool = False) -> None:
        if bytewise:
            for i in range(len(data)):
                self.transport.protocol.dataReceived(data[i : i + 1])
        else:
            self.transport.protocol.dataReceived(data)

    def frames(self) -> list[Frame]:
        return [e for e in StompCodec(server=False).receive_data(self.transport.value()) if isinstance(e, Frame)]

    def error(self) -> Frame:
        frames = self.frames()
        assert frames and frames[-1].command == "ERROR", frames
        assert self.closed
        return frames[-1]

    @property
    def closed(self) -> bool:
        return self.transport.disconnecting


class Gateway:
    """A GatewayFactory for one router of CONFIG, on a MemoryReactorClock."""

    def __init__(
        self,
        router="first",
        *,
        users=USERS,
        protocols=frozenset({"STOMP"}),
        params=None,
        limits=None,
        local_factory="fake",
        container_id=None,
    ):
        self.reactor = MemoryReactorClock()
        self.probe = FakeProbe()
        config = parse_config(CONFIG, file="broker.xml", env={})
        routers = {r.name: r for r in config.connection_routers}
        self.service = build_router(
            routers[router],
            connectors={c.name: c for c in config.connectors},
            probe=self.probe,
            clock=self.reactor,
            local_target=Target(local=True, ready=True, node_id="gw-node"),
        )
        self.service.start()
        if users is None:
            self.security = SecurityManager(None, (), enabled=False)
        else:
            self.security = SecurityManager(FakeUserStore(users), ())
        self.acceptor = Acceptor(
            name="routed",
            scheme="tcp",
            host="127.0.0.1",
            port=0,
            protocols=frozenset(protocols),
            params={"router": router, **(params or {})},
            router=router,
        )
        self.local = LocalFactory() if local_factory == "fake" else local_factory
        self.factory = GatewayFactory(
            self.service,
            security=self.security,
            acceptor=self.acceptor,
            limits=limits if limits is not None else Limits(),
            reactor=self.reactor,
            local_factory=self.local,
            **({"container_id": container_id} if container_id else {}),
        )

    @property
    def pool(self):
        return self.service.pool

    def target(self, name: str) -> Target:
        return next(t for t in self.pool.all_targets if t.name == name)

    def ready(self, *names: str) -> None:
        """Make these targets' cores answer, and let the pool check them."""
        self.probe.set_all([self.target(n) for n in names], connectable=True, active=True)
        self.reactor.advance(0.1)

    def client(self, host="10.0.0.5", port=40000) -> Client:
        return Client(self, host, port)

    def complete_target_connection(self, index: int = -1):
        """Complete a target connection the listener asked for: (host, port, target wire)."""
        host, port, factory, _timeout, _bind = self.reactor.tcpClients[index]
        protocol = factory.buildProtocol(IPv4Address("TCP", host, port))
        wire = Wire(host, port)
        wire.protocol = protocol
        protocol.makeConnection(wire)
        return host, port, wire

    def fail_target_connection(self, index: int = -1, reason=None) -> None:
        factory = self.reactor.tcpClients[index][2]
        factory.clientConnectionFailed(
            self.reactor.connectors[index], Failure(reason or error.ConnectionRefusedError())
        )

    def stop(self) -> None:
        self.service.stop()


@pytest.fixture
def gateways():
    made: list[Gateway] = []

    def make(*args, **kwargs) -> Gateway:
        g = Gateway(*args, **kwargs)
        made.append(g)
        return g

    yield make
    for g in made:
        g.factory.close_all()
        g.stop()
        # every connection is served, closed or refused: no timer left behind
        assert not [c for c in g.reactor.getDelayedCalls() if c.active()]


# -- sniffing and the CONNECT frame --------------------------------------------------------


def test_connect_read_byte_by_byte_then_forwarded_with_every_byte_replayed(gateways, caplog):
    g = gateways()
    g.ready("c1", "c2")
    c = g.client()
    opening = b"\n\r\n" + CONNECT + b"SUBSCRIBE\nid:1\ndestination:q\n\n\0"
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c.send(opening[: len(b"\n\r\n") + len(CONNECT) - 1], bytewise=True)
    assert g.reactor.tcpClients == []  # the frame is not complete yet
    c.send(opening[len(b"\n\r\n") + len(CONNECT) - 1 :])
    assert c.transport.producerState == "paused"  # not read while connecting
    host, port, target = g.complete_target_connection()
    assert (host, port) == ("127.0.0.1", 61001)  # FIRST_ELEMENT: c1
    assert target.value() == opening  # unmodified, every byte
    assert c.transport.producerState == "producing"
    assert isinstance(c.transport.protocol, type(next(iter(g.factory.splices)).client))
    assert g.factory.decisions == {"forwarded": 1}
    assert not g.factory.connections
    # relayed from now on, unparsed
    target.protocol.dataReceived(b"CONNECTED\nversion:1.2\n\n\0")
    assert c.frames()[0].command == "CONNECTED"
    c.send(b"SEND\ndestination:q\n\nhello\0")
    assert target.value().endswith(b"SEND\ndestination:q\n\nhello\0")
    decision = [r.getMessage() for r in caplog.records if "key" in r.getMessage()]
    assert decision == [
        "router first: STOMP connection from 10.0.0.5:40000 (client-id 'app-1', user 'alice') on "
        f"acceptor routed: key 'app-1' -> forward to target c1 (127.0.0.1:61001), node "
        f"{g.target('c1').node_id} [policy]"
    ]


def test_stomp_command_is_an_opening_too(gateways):
    g = gateways()
    g.ready("c1")
    c = g.client()
    c.send(connect_frame("STOMP", accept_version="1.2", login="alice", passcode="secret"))
    assert len(g.reactor.tcpClients) == 1


def test_closing_the_splice_forgets_it(gateways):
    g = gateways()
    g.ready("c1")
    c = g.client()
    c.send(CONNECT)
    _h, _p, target = g.complete_target_connection()
    (splice,) = g.factory.splices
    assert isinstance(splice, Splice)
    splice.client.connectionLost(Failure(error.ConnectionDone()))
    splice.target.connectionLost(Failure(error.ConnectionDone()))
    assert not g.factory.splices


# -- authentication ---------------------------------------------------------------------------


def test_bad_password_gets_the_brokers_security_error(gateways):
    g = gateways()
    g.ready("c1")
    c = g.client()
    c.send(connect_frame(login="alice", passcode="wrong", receipt="r-1"))
    err = c.error()
    assert err.get("message") == "Security Error occurred: User name [alice] or password is invalid"
    assert err.get("receipt-id") == "r-1"
    assert err.get("content-type") == "text/plain"
    assert err.body == b"Authentication failed: check login and passcode"
    assert g.reactor.tcpClients == []  # never routed
    assert g.factory.decisions == {"unauthenticated": 1}


def test_no_login_with_security_on_and_no_anonymous_user_is_refused(gateways):
    g = gateways()
    c = g.client()
    c.send(connect_frame(accept_version="1.2"))
    assert c.error().get("message") == "Security Error occurred: User name [None] or password is invalid"


def test_security_off_routes_on_the_login_given(gateways):
    g = gateways("tenants", users=None)
    c = g.client()
    c.send(connect_frame(login="tenant-a-x", passcode="anything"))
    (local,) = g.local.built
    assert local.made


# -- keys -------------------------------------------------------------------------------------------


def test_user_name_key_is_the_authenticated_user(gateways):
    g = gateways("tenants")
    c = g.client()
    c.send(connect_frame(login="tenant-a-bob", passcode="pw"))
    assert len(g.local.built) == 1


def test_role_name_key_takes_the_first_role_in_sorted_order(gateways):
    g = gateways("by-role")
    c = g.client()
    c.send(connect_frame(login="carol", passcode="pw"))  # roles zeta, alpha -> alpha
    assert len(g.local.built) == 1


def test_source_ip_key_is_the_peer_host(gateways):
    g = gateways("by-ip")
    here = g.client(host="10.0.0.7", port=5555)
    here.send(CONNECT)
    assert len(g.local.built) == 1
    elsewhere = g.client(host="10.0.0.8", port=5555)
    elsewhere.send(CONNECT)
    assert elsewhere.error().get("message") == "Connection router by-ip rejected this connection"


# -- refusals -----------------------------------------------------------------------------------


def test_no_ready_target_is_refused_as_not_ready(gateways, caplog):
    g = gateways()
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c = g.client()
    c.send(connect_frame(login="alice", passcode="secret", client_id="app-1", receipt="9"))
    err = c.error()
    assert err.get("message") == "Connection router first is not ready"
    assert err.get("receipt-id") == "9"
    assert err.body == b"Connection router first is not ready"
    assert g.factory.decisions == {"refused": 1}
    assert any(
        "key 'app-1' -> refused: not ready (REFUSED_UNAVAILABLE) [unavailable]" in r.getMessage()
        for r in caplog.records
    )


def test_a_key_for_no_target_is_refused_as_rejected(gateways):
    g = gateways("tenants")
    c = g.client()
    c.send(CONNECT)  # alice: not tenant-a, and the router has no pool
    assert c.error().get("message") == "Connection router tenants rejected this connection"


def test_waiting_for_the_quorum_then_refused(gateways):
    g = gateways("quorum")
    g.ready("c1")  # one of the two the quorum needs
    c = g.client()
    c.send(CONNECT)
    assert c.frames() == [] and not c.closed
    assert c.transport.producerState == "paused"
    g.reactor.advance(1.0)
    assert c.error().get("message") == "Connection router quorum is not ready"


def test_waiting_for_the_quorum_then_forwarded(gateways):
    g = gateways("quorum")
    g.ready("c1")
    c = g.client()
    c.send(CONNECT)
    g.ready("c2")
    g.reactor.advance(0.1)
    assert len(g.reactor.tcpClients) == 1


def test_a_client_leaving_while_the_router_waits_cancels_the_wait(gateways):
    g = gateways("quorum")
    c = g.client()
    c.send(CONNECT)
    assert g.pool.pending_waits == 1
    c.protocol.connectionLost(Failure(error.ConnectionLost()))
    assert g.pool.pending_waits == 0
    assert not g.factory.connections


# -- local ----------------------------------------------------------------------------------------


def test_local_decision_hands_the_transport_and_every_byte_over(gateways):
    g = gateways()
    c = g.client()
    opening = connect_frame(login="alice", passcode="secret", client_id="local-7") + b"SEND\ndestination:q\n\n\0"
    c.send(opening, bytewise=True)
    (local,) = g.local.built
    assert local.made and local.transport is c.transport
    assert c.transport.protocol is local
    assert local.data == opening
    assert c.transport.producerState == "producing"
    assert g.factory.decisions == {"local": 1}
    assert not g.factory.connections
    c.send(b"more")
    assert local.data.endswith(b"more")


def test_local_decision_served_by_a_real_broker_core(gateways):
    broker = Broker(users={"alice": ("secret", {"admin"})})
    local = StompFactory(broker.server, acceptor=None, limits=Limits(), reactor=broker.clock)
    g = gateways(local_factory=local)
    c = g.client()
    c.send(connect_frame(accept_version="1.2", login="alice", passcode="secret", client_id="local-1"))
    (connected,) = c.frames()
    assert connected.command == "CONNECTED" and connected.get("version") == "1.2"
    assert len(local.connections) == 1
    c.transport.protocol.connectionLost(Failure(error.ConnectionDone()))


def test_local_decision_without_a_local_core_is_rejected(gateways):
    g = gateways(local_factory=None)
    c = g.client()
    c.send(connect_frame(login="alice", passcode="secret", client_id="local-1"))
    assert c.error().get("message") == "Connection router first rejected this connection"


def test_local_factory_refusing_closes(gateways):
    g = gateways(local_factory=LocalFactory(refuse=True))
    c = g.client()
    c.send(connect_frame(login="alice", passcode="secret", client_id="local-1"))
    assert c.closed and c.frames() == []


# -- forward failures --------------------------------------------------------------------------------


def test_target_unreachable_gets_an_error_naming_it_and_the_target_is_marked_not_ready(gateways):
    g = gateways()
    g.ready("c1", "c2")
    c = g.client()
    c.send(connect_frame(login="alice", passcode="secret", client_id="app-2"))
    g.fail_target_connection()
    err = c.error()
    assert err.get("message") == (
        "Connection router first could not connect to target c1 (127.0.0.1:61001): connection refused"
    )
    c1 = g.target("c1")
    assert not c1.ready
    assert g.pool.monitor_of(c1).problem == "forwarding failed: connection refused"
    assert g.factory.decisions == {"unreachable": 1}
    # the next connection goes to the next target until c1's next check
    other = g.client(port=40001)
    other.send(CONNECT)
    assert g.reactor.tcpClients[-1][:2] == ("127.0.0.1", 61002)


def test_a_client_leaving_while_connecting_stops_the_attempt(gateways):
    g = gateways()
    g.ready("c1")
    c = g.client()
    c.send(CONNECT)
    c.protocol.connectionLost(Failure(error.ConnectionLost()))
    assert g.reactor.connectors[-1].stoppedConnecting


# -- bad clients lose only their own connection ---------------------------------------------------------


def test_garbage_is_closed_with_a_log_line_and_nobody_else_notices(gateways, caplog):
    g = gateways()
    g.ready("c1")
    caplog.set_level(logging.INFO, logger="junction.gateway")
    good = g.client(port=1)
    good.send(CONNECT[:20])
    bad = g.client(port=2)
    bad.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert bad.closed and bad.transport.value() == b""
    assert any(
        "connection from 10.0.0.5:2 sent an unknown protocol: b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' (27 bytes)"
        in r.getMessage()
        for r in caplog.records
    )
    good.send(CONNECT[20:])
    assert len(g.reactor.tcpClients) == 1 and not good.closed


def test_a_client_silent_too_long_is_closed(gateways, caplog):
    g = gateways()
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c = g.client()
    c.send(b"CON")
    g.reactor.advance(10)
    assert c.closed and c.transport.value() == b""
    assert any("not enough to tell its protocol" in r.getMessage() for r in caplog.records)


def test_a_client_stalling_mid_connect_gets_an_error(gateways):
    g = gateways()
    g.ready("c1")
    c = g.client()
    other = g.client(port=40001)
    c.send(b"CONNECT\nlogin:alice\n")
    g.reactor.advance(9.9)
    other.send(CONNECT)  # unaffected
    g.reactor.advance(0.1)
    assert c.error().get("message") == "no CONNECT frame within 10 s"
    assert not other.closed and len(g.reactor.tcpClients) == 1


def test_connect_timeout_follows_the_limits(gateways):
    g = gateways(limits=Limits(connect_timeout=500))
    c = g.client()
    c.send(b"CONNECT\n")
    g.reactor.advance(0.5)
    assert c.error().get("message") == "no CONNECT frame within 0.5 s"


def test_an_oversized_connect_is_refused_as_malformed(gateways):
    g = gateways(params={"stompMaxFramePayloadLength": "200"})
    c = g.client()
    c.send(b"CONNECT\nlogin:" + b"a" * 300)
    assert c.error().get("message").startswith("malformed frame: ")


def test_a_first_frame_other_than_connect_is_refused(gateways):
    g = gateways()
    c = g.client()
    c.send(b"CONNECTED\n\n\0")
    assert c.error().get("message") == "CONNECTED before CONNECT: the first frame must be CONNECT or STOMP"


def test_a_protocol_the_acceptor_does_not_serve_is_closed(gateways, caplog):
    g = gateways(protocols=frozenset({"AMQP"}))
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c = g.client()
    c.send(CONNECT)
    assert c.closed and c.transport.value() == b""
    assert any("speaks STOMP, which this acceptor does not serve" in r.getMessage() for r in caplog.records)


def test_bytes_beyond_the_bound_while_routing_close_the_connection(gateways):
    g = gateways("quorum", params={"stompMaxFramePayloadLength": "1000"})
    c = g.client()
    c.send(CONNECT)
    c.send(b"x" * (g.factory.max_buffered + 1))  # a misbehaving transport kept reading
    assert c.closed
    assert g.pool.pending_waits == 0


# -- the listener ------------------------------------------------------------------------------------------


def test_connections_allowed(gateways):
    g = gateways(params={"connectionsAllowed": "1"})
    g.client()
    assert g.factory.buildProtocol(IPv4Address("TCP", "10.0.0.9", 1)) is None


def test_close_all(gateways):
    g = gateways()
    g.ready("c1")
    opening = g.client(port=1)
    forwarded = g.client(port=2)
    forwarded.send(CONNECT)
    _h, _p, target = g.complete_target_connection()
    g.factory.close_all()
    assert opening.closed and forwarded.closed and target.disconnecting


def test_protocol_is_a_gateway_protocol(gateways):
    g = gateways()
    assert isinstance(g.client().protocol, GatewayProtocol)


# -- AMQP ---------------------------------------------------------------------------------------------------

from proton import Endpoint, Event, symbol, ulong  # noqa: E402

from junction.brokercore.amqp_server import AmqpFactory  # noqa: E402
from junction.protocols.amqp.sasl import AMQP_HEADER, SASL_HEADER  # noqa: E402
from tests.unit.test_amqp_opening import (  # noqa: E402
    ProtonClient,
    performative,
    sasl_anonymous,
    sasl_plain,
)
from tests.unit.test_amqp_sasl_client import MECHANISMS, SECURITY, Backend, outcome  # noqa: E402
from tests.unit.test_amqp_sasl_client import USERS as CORE_USERS  # noqa: E402

AMQP = frozenset({"STOMP", "AMQP"})
REMOTE_ACTIVE = Endpoint.REMOTE_ACTIVE


def amqp_client(**kw) -> ProtonClient:
    kw.setdefault("user", "alice")
    kw.setdefault("password", "secret")
    kw.setdefault("container", "app-1")
    return ProtonClient(**kw)


def pump(engine: ProtonClient, c: Client) -> bytes:
    """Move bytes between the proton client engine and the gateway until both are quiet.

    Returns what the gateway wrote to the client meanwhile.
    """
    received = b""
    for _ in range(50):
        out = engine.take()
        if out and not c.closed:
            c.send(out)
        back = c.transport.drain()
        if back:
            received += back
            engine.push(back)
        if not out and not back:
            return received
    raise AssertionError("never quiet")


def assert_refused(engine: ProtonClient, condition: str, description: str, container="junction-gateway"):
    types = engine.event_types()
    assert Event.CONNECTION_REMOTE_OPEN in types and Event.CONNECTION_REMOTE_CLOSE in types
    assert engine.conn.remote_container == container
    assert engine.conn.remote_properties == {symbol("amqp:connection-establishment-failed"): True}
    assert engine.remote_condition.name == condition
    assert engine.remote_condition.description == description


def test_amqp_redirect_is_the_default_and_exactly_artemis(gateways, caplog):
    g = gateways(protocols=AMQP, container_id="gw-node-1")
    g.ready("c1", "c2")
    caplog.set_level(logging.INFO, logger="junction.gateway")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    assert c.closed and g.reactor.tcpClients == []
    assert_refused(
        engine,
        "amqp:connection:redirect",
        "Connection router first redirected this connection to 127.0.0.1:61001",
        container="gw-node-1",
    )
    assert engine.remote_condition.info == {symbol("network-host"): "127.0.0.1", symbol("port"): 61001}
    assert g.factory.decisions == {"redirected": 1}
    assert any(
        "router first: AMQP connection from 10.0.0.5:40000 (container-id 'app-1', user 'alice') on "
        "acceptor routed: key 'app-1' -> redirect to target c1 (127.0.0.1:61001)" in r.getMessage()
        for r in caplog.records
    )


def test_amqp_redirect_mode_explicit(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "redirect"})
    g.ready("c2")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    assert engine.remote_condition.info == {symbol("network-host"): "127.0.0.1", symbol("port"): 61002}


@pytest.mark.parametrize(
    ("router", "ready", "description"),
    [
        ("first", (), "Connection router first is not ready"),
        ("tenants", (), "Connection router tenants rejected this connection"),
    ],
)
def test_amqp_refusals_are_artemis(gateways, router, ready, description):
    g = gateways(router, protocols=AMQP, params={"routerMode": "forward"})
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    assert c.closed
    assert_refused(engine, "amqp:connection:forced", description)
    assert g.factory.decisions == {"refused": 1}


def test_amqp_quorum_unmet_is_not_ready(gateways):
    g = gateways("quorum", protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    assert not c.closed and c.transport.producerState == "paused"
    g.reactor.advance(1.0)
    pump(engine, c)
    assert_refused(engine, "amqp:connection:forced", "Connection router quorum is not ready")


class Core:
    """A real broker core's AMQP connection in memory, fed by a target wire."""

    def __init__(self):
        self.broker = Broker(users=CORE_USERS, security_settings=SECURITY)
        self.backend = Backend(self.broker)

    def relay(self, target) -> None:
        """What the gateway wrote to the target goes to the core, and the core's answer back."""
        for _ in range(20):
            data = target.drain()
            if data:
                self.backend.write(data)
            answer = self.backend.read()
            if answer:
                target.protocol.dataReceived(answer)
            if not data and not answer:
                return


def test_amqp_forward_redoes_sasl_with_the_target_and_passes_the_open_through(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"}, users={"alice": ("s3cret", {"app"})})
    g.ready("c1")
    engine = amqp_client(password="s3cret")
    c = g.client()
    received = pump(engine, c)
    assert received.endswith(AMQP_HEADER)  # answered at once, before the router decided
    assert c.transport.producerState == "paused"
    host, port, target = g.complete_target_connection()
    assert (host, port) == ("127.0.0.1", 61001)
    first = target.value()
    assert first.startswith(SASL_HEADER) and b"PLAIN" in first and b"\0alice\0s3cret" in first
    assert first.count(b"AMQP\x00\x01\x00\x00") == 1  # the client's opening pipelined behind
    assert c.transport.producerState == "paused"  # not spliced before the target's outcome
    core = Core()
    core.relay(target)
    assert g.factory.decisions == {"forwarded": 1} and len(g.factory.splices) == 1
    assert c.transport.producerState == "producing"
    received += pump(engine, c)
    core.relay(target)
    received += pump(engine, c)
    types = engine.event_types()
    assert Event.CONNECTION_REMOTE_OPEN in types and Event.CONNECTION_REMOTE_CLOSE not in types
    assert engine.conn.remote_container != "junction-gateway"  # the core's own open
    assert received.count(AMQP_HEADER) == 1  # the gateway's; the core's was consumed
    assert engine.transport.condition is None
    protocol = core.backend.protocol
    assert protocol.principal.user == "alice"
    assert protocol.info.client_id == "app-1"  # the client's own Open, passed through
    # relayed from now on: the client's close reaches the core, the core's close the client
    engine.conn.close()
    pump(engine, c)
    core.relay(target)
    pump(engine, c)
    assert Event.CONNECTION_REMOTE_CLOSE in engine.event_types()
    assert engine.remote_condition is None


def test_amqp_forward_target_refusing_the_login(gateways):
    # the gateway accepts alice, the core does not know her password
    g = gateways(protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    _h, _p, target = g.complete_target_connection()
    Core().relay(target)
    pump(engine, c)
    assert c.closed and target.disconnecting
    assert_refused(
        engine,
        "amqp:unauthorized-access",
        "Connection router first: target c1 (127.0.0.1:61001) refused the connection: the backend "
        "refused SASL PLAIN for user 'alice': outcome auth (1)",
    )
    assert g.target("c1").ready  # reachable: not marked down for a refused login
    assert g.factory.decisions == {"target-refused": 1}


def test_amqp_forward_target_closing_during_sasl(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    _h, _p, target = g.complete_target_connection()
    target.protocol.dataReceived(SASL_HEADER)
    target.protocol.connectionLost(Failure(error.ConnectionDone()))
    pump(engine, c)
    assert c.closed
    assert_refused(
        engine,
        "amqp:connection:forced",
        "Connection router first: target c1 (127.0.0.1:61001) refused the connection: the target "
        "closed the connection during the handshake",
    )


def test_amqp_forward_target_silent_times_out(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"}, limits=Limits(connect_timeout=500))
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    _h, _p, target = g.complete_target_connection()
    g.reactor.advance(0.5)
    pump(engine, c)
    assert c.closed
    assert engine.remote_condition.description.endswith("no handshake answer within 0.5 s")


def test_amqp_forward_target_unreachable(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1", "c2")
    engine = amqp_client()
    c = g.client()
    pump(engine, c)
    g.fail_target_connection()
    pump(engine, c)
    assert c.closed
    assert_refused(
        engine,
        "amqp:connection:forced",
        "Connection router first could not connect to target c1 (127.0.0.1:61001): connection refused",
    )
    assert not g.target("c1").ready
    assert g.factory.decisions == {"unreachable": 1}


def test_amqp_local_hand_off_gives_the_core_the_login_then_the_opening(gateways):
    g = gateways(protocols=AMQP)
    engine = amqp_client(container="local-1")
    c = g.client()
    pump(engine, c)
    (local,) = g.local.built
    assert local.data.startswith(SASL_HEADER) and b"\0alice\0secret" in local.data
    after_sasl = local.data[local.data.index(b"AMQP\x00\x01\x00\x00") :]
    assert b"local-1" in after_sasl  # the client's header and Open follow the login
    assert c.transport.protocol is local
    assert g.factory.decisions == {"local": 1}


def test_amqp_local_hand_off_to_a_real_broker_core(gateways):
    broker = Broker(users=CORE_USERS, security_settings=SECURITY)
    from tests.unit.test_amqp_server import amqp_acceptor

    local = AmqpFactory(broker.server, acceptor=amqp_acceptor(), limits=broker.limits, reactor=broker.clock)
    g = gateways(protocols=AMQP, local_factory=local, users={"alice": ("s3cret", {"app"})})
    engine = amqp_client(container="local-1", password="s3cret")
    c = g.client()
    received = pump(engine, c)
    broker.run()
    received += pump(engine, c)
    types = engine.event_types()
    assert Event.CONNECTION_REMOTE_OPEN in types and Event.CONNECTION_REMOTE_CLOSE not in types
    assert engine.transport.condition is None
    assert received.count(AMQP_HEADER) == 1  # the gateway's; the core's was consumed
    protocol = c.transport.protocol
    assert protocol.principal.user == "alice"
    assert protocol.transport is c.transport  # the SASL filter is gone once the core's login passed
    protocol.connectionLost(Failure(error.ConnectionDone()))


def test_amqp_local_core_refusing_the_login(gateways):
    broker = Broker(users=CORE_USERS, security_settings=SECURITY)
    from tests.unit.test_amqp_server import amqp_acceptor

    local = AmqpFactory(broker.server, acceptor=amqp_acceptor(), limits=broker.limits, reactor=broker.clock)
    g = gateways(protocols=AMQP, local_factory=local)  # the gateway's alice/secret is not the core's
    engine = amqp_client(container="local-1")
    c = g.client()
    pump(engine, c)
    broker.run()
    pump(engine, c)
    assert c.closed
    assert engine.remote_condition.name == "amqp:unauthorized-access"
    c.transport.protocol.connectionLost(Failure(error.ConnectionDone()))


def test_amqp_bad_password_fails_in_sasl(gateways):
    g = gateways(protocols=AMQP)
    g.ready("c1")
    engine = amqp_client(password="wrong")
    c = g.client()
    pump(engine, c)
    assert c.closed and g.reactor.tcpClients == []
    assert engine.transport.condition is not None  # proton: authentication failed
    assert g.factory.decisions == {"unauthenticated": 1}


def test_amqp_anonymous_is_refused_unless_the_node_allows_it(gateways):
    g = gateways(protocols=AMQP)
    engine = amqp_client(mechs="ANONYMOUS", user=None)
    c = g.client()
    pump(engine, c)
    # only PLAIN is offered: proton gives up (it would close its socket); never routed
    assert engine.transport.condition is not None
    assert g.reactor.tcpClients == [] and g.factory.decisions == {}
    # a hand-made sasl-init for ANONYMOUS is refused
    other = g.client(port=40001)
    other.send(sasl_anonymous())
    assert other.closed and g.factory.decisions == {"unauthenticated": 1}


def test_amqp_anonymous_when_security_is_off(gateways):
    g = gateways("tenants", protocols=AMQP, users=None)
    engine = amqp_client(mechs="ANONYMOUS", user=None)
    c = g.client()
    pump(engine, c)
    # no user, no tenant-a: the key matches no target
    assert_refused(engine, "amqp:connection:forced", "Connection router tenants rejected this connection")


def test_amqp_bad_opening_closes(gateways, caplog):
    g = gateways(protocols=AMQP)
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c = g.client()
    c.send(b"AMQP\x03\x01\x00\x00garbage!")
    assert c.closed
    assert g.factory.decisions == {"bad-opening": 1}
    assert any("AMQP connection from 10.0.0.5:40000 on acceptor routed: opening failed" in r.getMessage()
               for r in caplog.records)


def test_amqp_stalling_in_the_opening_is_closed(gateways):
    g = gateways(protocols=AMQP)
    c = g.client()
    c.send(b"AMQP\x03\x01\x00\x00")
    g.reactor.advance(10)
    assert c.closed and g.factory.decisions == {"timed-out": 1}


def test_stomp_is_forwarded_even_in_redirect_mode(gateways):
    g = gateways(protocols=AMQP, params={"routerMode": "redirect"})
    g.ready("c1")
    c = g.client()
    c.send(CONNECT)
    assert len(g.reactor.tcpClients) == 1


def test_router_mode_is_checked(gateways):
    with pytest.raises(ValueError, match="routerMode"):
        gateways(params={"routerMode": "bounce"})


def test_amqp_local_hand_off_through_a_multi_protocol_core_acceptor(gateways):
    from junction.edge.acceptor import MultiProtocolFactory
    from tests.unit.test_amqp_server import amqp_acceptor

    broker = Broker(users=CORE_USERS, security_settings=SECURITY)
    amqp = AmqpFactory(broker.server, acceptor=amqp_acceptor(), limits=broker.limits, reactor=broker.clock)
    stomp = StompFactory(broker.server, acceptor=None, limits=Limits(), reactor=broker.clock)
    local = MultiProtocolFactory(
        {"AMQP": amqp, "STOMP": stomp}, reactor=broker.clock, acceptor_name="routed", sniff_timeout=10
    )
    g = gateways(protocols=AMQP, local_factory=local, users={"alice": ("s3cret", {"app"})})
    engine = amqp_client(container="local-2", password="s3cret")
    c = g.client()
    pump(engine, c)
    broker.run()
    pump(engine, c)
    types = engine.event_types()
    assert Event.CONNECTION_REMOTE_OPEN in types and Event.CONNECTION_REMOTE_CLOSE not in types
    protocol = c.transport.protocol
    assert protocol.principal.user == "alice" and protocol.info.client_id == "local-2"
    assert protocol.transport is c.transport
    protocol.connectionLost(Failure(error.ConnectionDone()))


# -- AMQP: protocol headers answered at once, the serving core's header consumed ----------------------------

OPEN_FRAME = performative(ulong(0x10), ["waiting-app", "h"])
CORE_OPEN = performative(ulong(0x10), ["backend-core"])
CORE_LOGIN = SASL_HEADER + MECHANISMS + outcome(0)


def frame_body(data: bytes) -> bytes:
    """The body of the one frame ``data`` holds (it must hold exactly one)."""
    assert int.from_bytes(data[:4], "big") == len(data), data
    return data[data[4] * 4 :]


@pytest.mark.parametrize("route", ["forwarded", "local"])
@pytest.mark.parametrize("sasl", [True, False], ids=["sasl", "no-sasl"])
def test_amqp_each_header_is_answered_before_the_client_sends_more(gateways, sasl, route):
    """A client sending one step at a time, byte by byte, waiting for each answer."""
    users = {"alice": ("s3cret", {"app"})} if sasl else None  # no users: security off, SASL optional
    core = (CORE_LOGIN if sasl else b"") + AMQP_HEADER + CORE_OPEN
    if route == "local":  # router by-ip keeps 10.0.0.7 on the local core
        g = gateways("by-ip", protocols=AMQP, users=users, local_factory=ScriptedFactory([core]))
    else:
        g = gateways(protocols=AMQP, params={"routerMode": "forward"}, users=users)
        g.ready("c1")
    c = g.client(host="10.0.0.7" if route == "local" else "10.0.0.5")
    received = b""
    if sasl:
        c.send(SASL_HEADER, bytewise=True)
        answer = c.transport.drain()
        assert answer[:8] == SASL_HEADER and frame_body(answer[8:])[:3] == b"\x00S@"  # sasl-mechanisms
        c.send(sasl_plain("alice", "s3cret"), bytewise=True)
        answer = c.transport.drain()
        assert frame_body(answer) == b"\x00SD\xc0\x03\x01P\x00"  # sasl-outcome ok
        received += answer
    c.send(AMQP_HEADER[:7], bytewise=True)
    assert c.transport.drain() == b""
    c.send(AMQP_HEADER[7:])
    # answered before the client's Open: nothing is routed yet
    assert c.transport.drain() == AMQP_HEADER
    assert g.reactor.tcpClients == [] and not c.closed
    if route == "local":
        c.send(OPEN_FRAME[:-1], bytewise=True)
        assert c.transport.drain() == b""
        c.send(OPEN_FRAME[-1:])  # the core answers at once, in one write
        assert c.transport.protocol.data.endswith(AMQP_HEADER + OPEN_FRAME)  # replayed
        assert c.transport.drain() == CORE_OPEN  # the core's Open, without its header
        assert g.factory.decisions == {"local": 1}
        return
    c.send(OPEN_FRAME, bytewise=True)
    assert c.transport.drain() == b""  # the Open is the serving core's to answer
    _h, _p, target = g.complete_target_connection()
    sent = target.drain()
    assert sent.count(AMQP_HEADER) == 1 and sent.endswith(AMQP_HEADER + OPEN_FRAME)  # replayed
    target.protocol.dataReceived(core)
    assert c.transport.drain() == CORE_OPEN  # the core's Open, without its header
    assert g.factory.decisions == {"forwarded": 1}


def cut(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p for p in points if 0 < p < len(data)})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


_H = len(CORE_LOGIN)
TARGET_CUTS = {
    "byte-by-byte": list(range(1, _H + 8 + len(CORE_OPEN))),
    "header-split": [_H, _H + 3],
    "header-alone": [_H, _H + 8],
    "header-with-the-open": [_H],
    "outcome-header-and-open-at-once": [],
    "open-split": [_H + 11],
}


@pytest.mark.parametrize("cuts", TARGET_CUTS.values(), ids=TARGET_CUTS.keys())
def test_amqp_forward_the_targets_header_is_consumed_however_it_is_cut(gateways, cuts):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    received = pump(engine, c)
    assert received.endswith(AMQP_HEADER)  # the gateway's, before the target answered
    _h, _p, target = g.complete_target_connection()
    target.drain()
    for piece in cut(CORE_LOGIN + AMQP_HEADER + CORE_OPEN, cuts):
        target.protocol.dataReceived(piece)
    received += pump(engine, c)
    assert received.count(AMQP_HEADER) == 1 and received.endswith(AMQP_HEADER + CORE_OPEN)
    assert engine.transport.condition is None  # a second header would be a framing error
    assert engine.conn.state & REMOTE_ACTIVE and engine.conn.remote_container == "backend-core"
    assert g.factory.decisions == {"forwarded": 1}


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (b"AMQP\x00\x02\x00\x00", "with AMQP protocol id 0 version 2.0.0 (it does not speak AMQP 1.0)"),
        (SASL_HEADER, "with the SASL header again, after its sasl-outcome"),
    ],
)
def test_amqp_forward_target_answering_another_header_gets_a_clear_error(gateways, header, why):
    g = gateways(protocols=AMQP, params={"routerMode": "forward"})
    g.ready("c1")
    engine = amqp_client()
    c = g.client()
    received = pump(engine, c)
    _h, _p, target = g.complete_target_connection()
    target.protocol.dataReceived(CORE_LOGIN + header[:3])
    target.protocol.dataReceived(header[3:])
    received += pump(engine, c)
    assert c.closed and target.disconnecting
    assert received.count(AMQP_HEADER) == 1  # Open + Close after the gateway's one header
    assert engine.transport.condition is None
    assert_refused(
        engine,
        "amqp:connection:forced",
        "Connection router first: target c1 (127.0.0.1:61001) refused the connection: protocol error "
        f"from the target: the backend answered the AMQP 1.0 header (AMQP 0 1.0.0) {why}",
    )
    assert g.target("c1").ready and g.factory.decisions == {"target-refused": 1}


class ScriptedCore(Protocol):
    """A local broker core that answers its first read with ``pieces``, one write each."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = pieces
        self.data = b""

    def dataReceived(self, data):
        self.data += data
        pieces, self.pieces = self.pieces, []
        for piece in pieces:
            self.transport.write(piece)


class ScriptedFactory(Factory):
    def __init__(self, pieces: list[bytes]):
        self.pieces = pieces
        self.connections: set = set()

    def buildProtocol(self, addr):
        return ScriptedCore(self.pieces)


@pytest.mark.parametrize("cuts", TARGET_CUTS.values(), ids=TARGET_CUTS.keys())
def test_amqp_local_the_cores_header_is_consumed_however_it_is_written(gateways, cuts):
    local = ScriptedFactory(cut(CORE_LOGIN + AMQP_HEADER + CORE_OPEN, cuts))
    g = gateways(protocols=AMQP, local_factory=local)
    engine = amqp_client(container="local-1")
    c = g.client()
    received = pump(engine, c)
    assert received.count(AMQP_HEADER) == 1 and received.endswith(AMQP_HEADER + CORE_OPEN)
    assert engine.transport.condition is None
    assert engine.conn.state & REMOTE_ACTIVE and engine.conn.remote_container == "backend-core"
    core = c.transport.protocol
    assert isinstance(core, ScriptedCore) and core.transport is c.transport  # the filter is gone


def test_amqp_local_core_answering_another_header_gets_a_clear_error(gateways):
    local = ScriptedFactory([CORE_LOGIN, b"AMQP\x00\x02\x00\x00"])
    g = gateways(protocols=AMQP, local_factory=local)
    engine = amqp_client(container="local-1")
    c = g.client()
    received = pump(engine, c)
    assert c.closed and received.count(AMQP_HEADER) == 1
    assert engine.transport.condition is None
    assert_refused(
        engine,
        "amqp:connection:forced",
        "protocol error from the broker core: the backend answered the AMQP 1.0 header (AMQP 0 1.0.0) "
        "with AMQP protocol id 0 version 2.0.0 (it does not speak AMQP 1.0)",
    )
