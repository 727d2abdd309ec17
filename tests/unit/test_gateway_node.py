"""A node whose acceptor has ``router=``: routers built and started, a gateway listener in front.

The node runs on a MemoryReactorClock (``listenTCP`` is recorded, nothing
binds).  The AMQP readiness probe is replaced by a recording fake module in
``sys.modules``, so these tests do not depend on the real one.
"""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
from twisted.internet.testing import MemoryReactorClock

from junction.brokercore.stomp_server import StompFactory
from junction.config.loader import parse_config
from junction.gateway.listener import GatewayFactory
from junction.gateway.probe import ProbeResult
from junction.node import Node, unimplemented_settings
from tests.unit.gateway_fixtures import FakeProbe

CONFIG = """<configuration xmlns="urn:activemq">
<core xmlns="urn:activemq:core">
  <persistence-enabled>false</persistence-enabled>
  <security-enabled>false</security-enabled>
  <journal-directory>data/journal</journal-directory>
  <acceptors>
    <acceptor name="plain">tcp://127.0.0.1:0?protocols=STOMP</acceptor>
    <acceptor name="routed">tcp://127.0.0.1:0?protocols=STOMP;router=shard</acceptor>
    <acceptor name="mixed">tcp://127.0.0.1:0?protocols=STOMP,AMQP;router=shard</acceptor>
  </acceptors>
  <connectors>
    <connector name="c1">tcp://127.0.0.1:61001</connector>
    <connector name="c2">tcp://127.0.0.1:61002</connector>
  </connectors>
  <connection-routers>
    <connection-router name="shard">
      <key-type>CLIENT_ID</key-type>
      <policy name="CONSISTENT_HASH"/>
      <cache><persisted>true</persisted></cache>
      <pool>
        <username>prober</username>
        <password>pw</password>
        <check-period>100</check-period>
        <local-target-enabled>true</local-target-enabled>
        <static-connectors><connector-ref>c1</connector-ref><connector-ref>c2</connector-ref></static-connectors>
      </pool>
    </connection-router>
    <connection-router name="local-only">
      <key-type>USER_NAME</key-type>
      <local-target-filter>a.*</local-target-filter>
    </connection-router>
  </connection-routers>
</core>
</configuration>
"""


class RecordingProbe(FakeProbe):
    made: list = []

    def __init__(self, **kwargs):
        super().__init__(connectable=True, active=True)
        self.kwargs = kwargs
        self.closed = False
        RecordingProbe.made.append(self)

    def close(self):
        self.closed = True


@pytest.fixture
def probe_module(monkeypatch):
    RecordingProbe.made = []
    module = types.ModuleType("junction.gateway.multi_probe")
    module.build_readiness_probe = RecordingProbe
    monkeypatch.setitem(sys.modules, "junction.gateway.multi_probe", module)
    return module


@pytest.fixture
def node(tmp_path):
    config = parse_config(CONFIG, file=str(tmp_path / "broker.xml"), base_dir=str(tmp_path), env={})
    config = dataclasses.replace(config, management_port=-1)
    node = Node(config, reactor=MemoryReactorClock())
    yield node
    if node.server is not None:
        node.stop()


def test_router_acceptors_listen_with_the_gateway_in_front_of_the_local_core(node, probe_module, tmp_path):
    node.start()
    assert set(node.routers) == {"shard", "local-only"}
    plain = node.factories["plain"]
    routed = node.factories["routed"]
    mixed = node.factories["mixed"]
    assert isinstance(plain, StompFactory)
    assert isinstance(routed, GatewayFactory) and isinstance(mixed, GatewayFactory)
    assert routed.router is node.routers["shard"].router
    assert isinstance(routed.local_factory, StompFactory)  # local decisions: the embedded core
    assert routed.security is node.server.security
    # every acceptor listens
    assert {f for (_port, f, _backlog, _iface) in node.reactor.tcpServers} == {plain, routed, mixed}
    # the persisted cache lives beside the journal
    assert node.routers_dir == str(tmp_path / "data" / "routers")
    assert (tmp_path / "data" / "routers").is_dir()


def test_each_pool_gets_a_readiness_probe_with_its_credentials_and_the_local_status(node, probe_module):
    node.start()
    (probe,) = RecordingProbe.made  # only "shard" has a pool
    assert probe.kwargs["username"] == "prober" and probe.kwargs["password"] == "pw"
    assert probe.kwargs["reactor"] is node.reactor
    status = probe.kwargs["local_status"]
    assert status() == ProbeResult(active=True, node_id=node.node_id, connection_count=0)
    pool = node.routers["shard"].pool
    local = pool.all_targets[0]
    assert local.local and local.node_id == node.node_id
    assert node.routers["shard"].router.local_target is local
    # the pool runs: the first checks make the (fake) targets ready
    node.reactor.advance(0)
    assert pool.ready_count == 3


def test_status_shows_routers_and_gateway_acceptors(node, probe_module):
    node.start()
    node.reactor.advance(0)
    status = node.status()
    targets = status["routers"]["shard"]["targets"]
    assert [t["name"] for t in targets] == ["local", "c1", "c2"]
    assert status["routers"]["shard"]["ready"] == 3
    routed = next(a for a in status["acceptors"] if a["name"] == "routed")
    assert routed["router"] == "shard"
    assert routed["forwarded"] == 0 and routed["opening"] == 0 and routed["decisions"] == {}


def test_stop_stops_the_routers_and_closes_the_probes(node, probe_module):
    node.start()
    pool = node.routers["shard"].pool
    node.stop()
    assert not pool.started
    assert node.routers == {}
    assert RecordingProbe.made[0].closed


def test_a_pool_without_the_probe_module_fails_the_start_clearly(node, monkeypatch):
    monkeypatch.setitem(sys.modules, "junction.gateway.multi_probe", None)
    with pytest.raises(RuntimeError, match="connection router 'shard': its pool needs the readiness probes"):
        node.start()
    node._unlock()
    node.server.stop()
    node.server = None


def test_start_up_warnings_say_what_is_routed(tmp_path):
    config = parse_config(CONFIG, file="b.xml", env={})
    warnings = [w for w in unimplemented_settings(config) if "connection router" in w]
    # every client protocol protocols= accepts is routed (OPENWIRE the last): nothing to warn of
    assert warnings == []
