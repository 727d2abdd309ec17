"""CORE's gateway side (junction.gateway.core_side), alone and behind the real listener.

The side is built the way the listener builds it, ``CoreSide(factory, entry)``,
on a real :class:`~junction.gateway.listener.GatewayFactory` (the routers of
``test_gateway_listener``'s broker.xml, a MemoryReactorClock); its opening is
made for a stand-in connection with the attributes the listener's connection
has (``transport``, ``peer``, ``decision``).  Then the protocol table is given
CORE's row with this side for one test at a time (the table is read through
``registry.protocol_table``; the row itself belongs to the table's owner), and
a CORE client is sniffed, authenticated, keyed and forwarded, redirected,
refused or served locally by the unmodified listener.  The client's bytes are
the real Artemis client's opening (``test_core_opening``) with its login.
"""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

import pytest

from junction.config.model import Connector, Limits
from junction.gateway import listener
from junction.gateway.core_side import CoreSide, core_connector
from junction.gateway.side import GatewaySide
from junction.protocols import registry
from junction.protocols.core import CoreCodec, CoreLimits, ExceptionType, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.opening import (
    NETTY_CONNECTOR_FACTORY,
    CoreOpening,
    OpeningComplete,
    OpeningFailed,
)
from junction.protocols.core.values import TransportConfiguration
from junction.routing.targets import Target
from tests.unit.gateway_fixtures import Wire
from tests.unit.test_gateway_listener import Gateway, LocalFactory

ENTRY = registry.ProtocolEntry(
    "CORE",
    detector="junction.protocols.signatures:core",
    gateway="junction.gateway.core_side:CoreSide",
    redirects=True,
)

PING = encode_packet(p.Ping(60000))
SUBSCRIBE = encode_packet(p.SubscribeTopologyV2(False, 136))


def session(username="alice", password="secret", client_id="app-1", version=136) -> bytes:
    return encode_packet(
        p.CreateSessionV2("s-1", 10, version, username, password, 102400, False, True, True, -1, False, None,
                          client_id)
    )


def opening_bytes(**kw) -> bytes:
    """What the real client sends up to its CREATESESSION (its first read is ARTEMIS and the PINGs)."""
    return b"ARTEMIS" + PING + PING + SUBSCRIBE + session(**kw)


#: what the backend is given for opening_bytes(): the subscription, answered by the gateway, left out
def replay(**kw) -> bytes:
    return b"ARTEMIS" + PING + PING + session(**kw)


def written(data: bytes) -> list:
    return CoreCodec(server=False).receive_data(data)


@pytest.fixture
def gateways():
    """``gateways(router, **kw)``: a :class:`Gateway`, closed at teardown with no timer left."""
    made: list[Gateway] = []

    def make(*args, **kwargs) -> Gateway:
        made.append(Gateway(*args, **kwargs))
        return made[-1]

    yield make
    for g in made:
        g.factory.close_all()
        g.stop()
        assert not [call for call in g.reactor.getDelayedCalls() if call.active()]


def connection(transport=None, decision=None):
    """What the side reads of the listener's connection."""
    return SimpleNamespace(transport=transport or Wire(), peer="10.0.0.5:40000", decision=decision)


# -- the side ------------------------------------------------------------------------------------------


def test_the_side_is_a_gateway_side_overriding_only_the_opening_and_its_words():
    assert issubclass(CoreSide, GatewaySide)
    own = {name for name in vars(CoreSide) if not name.startswith("__")}
    assert own == {"client_id_label", "awaited", "error_condition", "opening"}
    for hook in ("login", "forward_handshake", "local_hand_off", "opening_failed"):
        assert getattr(CoreSide, hook) is getattr(GatewaySide, hook)  # nothing is redone at the backend
    assert CoreSide.awaited == "no CREATESESSION"
    assert ExceptionType[CoreSide.error_condition] is ExceptionType.ROUTING_EXCEPTION


def test_the_opening_authenticates_with_the_nodes_security_and_names_the_gateway_by_its_node_id(gateways):
    g = gateways()
    g.reactor.advance(12.5)
    side = CoreSide(g.factory, ENTRY)
    opening = side.opening(connection())
    assert isinstance(opening, CoreOpening)
    assert opening.limits == CoreLimits(max_packet_size=Limits().max_frame_size)
    assert opening.max_bytes == g.factory.max_buffered and opening.node_id == "gw-node"
    (done,) = opening.receive_data(opening_bytes())
    topology = written(opening.data_to_send())
    assert topology == [p.ClusterTopologyV4(False, "gw-node", None, None, last, 12500, None, None, 136)
                        for last in (False, True)]
    assert isinstance(done, OpeningComplete)
    assert (done.principal.user, done.principal.roles, done.client_id) == ("alice", frozenset({"admin"}), "app-1")


def test_a_refused_login_names_the_client_as_the_broker_core_would(gateways):
    g = gateways()
    opening = CoreSide(g.factory, ENTRY).opening(connection())
    (failed,) = opening.receive_data(opening_bytes(password="wrong"))
    assert isinstance(failed, OpeningFailed) and failed.login_refused
    assert failed.reason == (
        "AMQ229031: Unable to validate user from /10.0.0.5:40000. Username: alice; "
        "SSL certificate subject DN: unavailable"
    )


def test_without_security_the_login_given_is_taken(gateways):
    g = gateways(users=None)
    (done,) = CoreSide(g.factory, ENTRY).opening(connection()).receive_data(opening_bytes(password="anything"))
    assert done.principal.user == "alice"
    g.factory.security = None
    (done,) = CoreSide(g.factory, ENTRY).opening(connection()).receive_data(opening_bytes(username=None))
    assert done.principal.user is None and done.principal.roles == frozenset()


def test_the_frame_size_parameter_the_entry_names_bounds_the_packets(gateways):
    g = gateways(params={"coreMaxFrameSize": "4096"})
    entry = registry.ProtocolEntry("CORE", ENTRY.detector, gateway=ENTRY.gateway, redirects=True,
                                   frame_size_param="coreMaxFrameSize")
    assert CoreSide(g.factory, entry).opening(connection()).limits.max_packet_size == 4096
    assert CoreSide(g.factory, ENTRY).opening(connection()).limits.max_packet_size == Limits().max_frame_size


def test_a_redirect_carries_the_routed_targets_connector_and_node_id(gateways):
    g = gateways()
    connector = Connector("c9", "tcp", "10.1.2.3", 61617,
                          params={"sslEnabled": "true", "trustStorePassword": "secret", "port": "61617"})
    decision = SimpleNamespace(result=SimpleNamespace(target=Target(connector=connector, node_id="node-9")))
    conn = connection(decision=decision)
    opening = CoreSide(g.factory, ENTRY).opening(conn)
    opening.receive_data(opening_bytes())
    opening.data_to_send()
    disconnect, refused = written(opening.redirect("first", "10.1.2.3", 61617))
    expected = TransportConfiguration(
        "c9", NETTY_CONNECTOR_FACTORY, (("host", "10.1.2.3"), ("port", "61617"), ("sslEnabled", "true"))
    )
    assert disconnect == p.DisconnectV3("gw-node", p.DisconnectReason.REDIRECT, "node-9", expected)
    assert refused.code == ExceptionType.ROUTING_EXCEPTION and refused.channel_id == 1
    assert core_connector(connector) == expected  # no password leaves the gateway
    # a decision for another address: a connector of the host and port alone
    other = CoreSide(g.factory, ENTRY).opening(connection(decision=decision))
    other.receive_data(opening_bytes())
    other.data_to_send()
    disconnect, _ = written(other.redirect("first", "10.1.2.4", 1))
    assert disconnect.target_connector.name == "10.1.2.4:1" and disconnect.target_node_id is None


# -- behind the listener ---------------------------------------------------------------------------------


@pytest.fixture
def core_routed(monkeypatch):
    """The protocol table with CORE's row naming this side, for this test only."""
    table = tuple(ENTRY if entry.name == "CORE" else entry for entry in registry.protocol_table())
    monkeypatch.setattr(registry, "_table", table)
    monkeypatch.setattr(listener, "ROUTED_PROTOCOLS", registry.routed())
    monkeypatch.setattr(listener, "REDIRECTING_PROTOCOLS", registry.redirecting())
    return frozenset({"CORE"})


def test_forwarded_with_the_clients_packets_less_the_subscription(gateways, core_routed, caplog):
    g = gateways(protocols=core_routed, params={"routerMode": "forward"})
    g.ready("c1", "c2")
    caplog.set_level(logging.INFO, logger="junction.gateway")
    c = g.client()
    c.send(b"ARTEMIS" + PING + PING + SUBSCRIBE, bytewise=True)
    # answered before the client sends its CREATESESSION: it waits for this
    first, topology = written(c.transport.value())  # the version, then the release
    assert type(topology) is p.ClusterTopologyV4 and topology.node_id == "gw-node" and topology.last
    assert not first.last and first.server_version == topology.server_version
    assert g.reactor.tcpClients == []
    c.send(session())
    assert c.transport.producerState == "paused"
    host, port, target = g.complete_target_connection()
    assert (host, port) == ("127.0.0.1", 61001)  # CLIENT_ID app-1, FIRST_ELEMENT: c1
    assert target.value() == replay()
    assert g.factory.decisions == {"forwarded": 1}
    target.protocol.dataReceived(encode_packet(p.CreateSessionResponse(136)))
    assert written(c.transport.value())[-1] == p.CreateSessionResponse(136)
    assert any(
        "router first: CORE connection from 10.0.0.5:40000 (client-id 'app-1', user 'alice') on acceptor "
        "routed: key 'app-1' -> forward to target c1 (127.0.0.1:61001)" in r.getMessage()
        for r in caplog.records
    )


def test_redirected_by_default_with_disconnect_v3_naming_the_target(gateways, core_routed):
    g = gateways(protocols=core_routed)
    g.ready("c1", "c2")
    c = g.client()
    c.send(opening_bytes(client_id="app-2"))
    assert c.closed and g.reactor.tcpClients == []
    _version, _topology, disconnect, refused = written(c.transport.value())
    connector = TransportConfiguration("c1", NETTY_CONNECTOR_FACTORY, (("host", "127.0.0.1"), ("port", "61001")))
    assert disconnect == p.DisconnectV3("gw-node", p.DisconnectReason.REDIRECT, g.target("c1").node_id, connector)
    assert refused == p.ExceptionMessage(
        222,
        "AMQ229237: Connection router first redirected the connection to TransportConfiguration(name=c1, "
        "factory=org-apache-activemq-artemis-core-remoting-impl-netty-NettyConnectorFactory)"
        "?host=127-0-0-1&port=61001",
        channel_id=1,
    )
    assert g.factory.decisions == {"redirected": 1}


@pytest.mark.parametrize(
    ("router", "code", "text"),
    [
        ("first", 222, "AMQ229238: Connection router first not ready"),
        ("tenants", 119, "AMQ229240: Connection router tenants rejected the connection"),
    ],
)
def test_refusals_answer_the_createsession_as_artemis(gateways, core_routed, router, code, text):
    g = gateways(router, protocols=core_routed)
    c = g.client()
    c.send(opening_bytes())
    assert c.closed
    assert written(c.transport.value())[-1] == p.ExceptionMessage(code, text, channel_id=1)
    assert g.factory.decisions == {"refused": 1}


def test_a_bad_login_is_never_routed(gateways, core_routed):
    g = gateways(protocols=core_routed)
    g.ready("c1")
    c = g.client()
    c.send(opening_bytes(password="wrong"), bytewise=True)
    assert c.closed and g.reactor.tcpClients == []
    answer = written(c.transport.value())[-1]
    assert (answer.code, answer.channel_id) == (ExceptionType.SECURITY_EXCEPTION, 1)
    assert answer.message.startswith("AMQ229031: Unable to validate user from /10.0.0.5:40000. Username: alice;")
    assert g.factory.decisions == {"unauthenticated": 1}


def test_kept_local_the_core_is_given_the_replay(gateways, core_routed):
    g = gateways(protocols=core_routed, local_factory=LocalFactory())
    c = g.client()
    c.send(opening_bytes(client_id="local-7"))
    (local,) = g.local.built
    assert local.made and local.data == replay(client_id="local-7")
    assert g.factory.decisions == {"local": 1}


def test_a_client_without_createsession_in_time_gets_connection_timedout(gateways, core_routed):
    g = gateways(protocols=core_routed)
    c = g.client()
    c.send(b"ARTEMIS" + PING + SUBSCRIBE)
    g.reactor.advance(Limits().connect_timeout / 1000)
    assert c.closed
    assert written(c.transport.value())[-1] == p.ExceptionMessage(3, "no CREATESESSION within 10 s")


def test_an_unreachable_target_answers_with_a_routing_exception(gateways, core_routed):
    g = gateways(protocols=core_routed, params={"routerMode": "forward"})
    g.ready("c1")
    c = g.client()
    c.send(opening_bytes())
    g.fail_target_connection()
    answer = written(c.transport.value())[-1]
    assert (answer.code, answer.channel_id) == (ExceptionType.ROUTING_EXCEPTION, 1)
    assert answer.message.startswith("Connection router first could not connect to target c1 (127.0.0.1:61001)")
    assert c.closed and g.factory.decisions == {"unreachable": 1}


def test_without_the_row_core_is_sniffed_and_closed(gateways, monkeypatch):
    bare = dataclasses.replace(ENTRY, gateway=None, redirects=False)
    table = tuple(bare if entry.name == "CORE" else entry for entry in registry.protocol_table())
    monkeypatch.setattr(registry, "_table", table)
    monkeypatch.setattr(listener, "ROUTED_PROTOCOLS", registry.routed())
    monkeypatch.setattr(listener, "REDIRECTING_PROTOCOLS", registry.redirecting())
    acceptor_protocols = frozenset({"CORE"})
    g = gateways(protocols=acceptor_protocols)
    c = g.client()
    c.send(opening_bytes())
    assert c.closed and c.transport.value() == b"" and g.factory.side("CORE") is None

