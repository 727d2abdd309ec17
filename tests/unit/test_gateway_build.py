"""Routers built from broker.xml: keys, policies, pools and caches working together, on a Clock.

The configuration goes through the real loader (``parse_config``); the pool's
readiness probe is :class:`tests.unit.gateway_fixtures.FakeProbe`, which runs
the probe contract.  Cases follow Artemis's RedirectTest / AutoClientIDShard
behaviour (``reference/artemis-routing.md`` section 6) at the router level.
"""

from __future__ import annotations

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from junction.config.loader import parse_config
from junction.gateway.build import build_router
from junction.routing.targets import RouterStatus, Target
from tests.unit.gateway_fixtures import FakeProbe

CONFIG = """<configuration xmlns="urn:activemq">
<core xmlns="urn:activemq:core">
  <connectors>
    <connector name="c1">tcp://127.0.0.1:61001</connector>
    <connector name="c2">tcp://127.0.0.1:61002</connector>
    <connector name="c3">tcp://127.0.0.1:61003</connector>
  </connectors>
  <connection-routers>
    <connection-router name="hash">
      <key-type>CLIENT_ID</key-type>
      <policy name="CONSISTENT_HASH"/>
      <cache><persisted>true</persisted></cache>
      <pool>
        <check-period>100</check-period>
        <static-connectors><connector-ref>c1</connector-ref><connector-ref>c2</connector-ref><connector-ref>c3</connector-ref></static-connectors>
      </pool>
    </connection-router>
    <connection-router name="shard">
      <key-type>CLIENT_ID</key-type>
      <local-target-filter>NULL|0</local-target-filter>
      <policy name="CONSISTENT_HASH_MODULO"><property key="MODULO" value="2"/></policy>
    </connection-router>
    <connection-router name="first">
      <key-type>SOURCE_IP</key-type>
      <policy name="FIRST_ELEMENT"/>
      <pool>
        <check-period>100</check-period>
        <quorum-timeout>0</quorum-timeout>
        <static-connectors><connector-ref>c1</connector-ref><connector-ref>c2</connector-ref></static-connectors>
      </pool>
    </connection-router>
  </connection-routers>
</core>
</configuration>
"""


def result_of(d: defer.Deferred):
    box = []
    d.addBoth(box.append)
    assert box, "the routing decision did not complete"
    if isinstance(box[0], Exception) or hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0]


@pytest.fixture
def config():
    return parse_config(CONFIG, file="broker.xml", env={})


def build(config, name, clock, probe, tmp_path):
    routers = {r.name: r for r in config.connection_routers}
    connectors = {c.name: c for c in config.connectors}
    service = build_router(
        routers[name],
        connectors=connectors,
        probe=probe,
        clock=clock,
        local_target=Target(local=True, ready=True, node_id="local-node"),
        cache_directory=tmp_path / "routers",
    )
    return service


def ready_all(service, probe, clock):
    """Every pool target up with a node id of its connector's name, checked once."""
    for target in service.pool.all_targets:
        core = probe.core(target)
        core.node_id = f"node-{target.name}"
        core.connectable = core.active = True
    clock.advance(0.2)


def test_consistent_hash_router_is_the_same_from_two_gateways_and_caches(config, tmp_path):
    clock_a, clock_b = Clock(), Clock()
    probe_a, probe_b = FakeProbe(), FakeProbe()
    a = build(config, "hash", clock_a, probe_a, tmp_path / "a")
    b = build(config, "hash", clock_b, probe_b, tmp_path / "b")
    a.start()
    b.start()
    ready_all(a, probe_a, clock_a)
    ready_all(b, probe_b, clock_b)
    chosen = {}
    for client in [f"client-{i}" for i in range(50)]:
        ra = result_of(a.router.get_target(client_id=client))
        rb = result_of(b.router.get_target(client_id=client))
        assert ra.status is RouterStatus.OK and rb.status is RouterStatus.OK
        assert ra.target.node_id == rb.target.node_id
        chosen[client] = ra.target.node_id
    assert len(set(chosen.values())) == 3  # 50 keys reach all three targets
    # The persisted cache survives a restart of gateway A.
    a.stop()
    again = build(config, "hash", Clock(), FakeProbe(), tmp_path / "a")
    again.start()
    assert again.cache.get("client-7") == chosen["client-7"]
    again.stop()
    b.stop()
    assert clock_a.getDelayedCalls() == [] and clock_b.getDelayedCalls() == []


def test_modulo_shard_router_keeps_shard_0_and_refuses_the_rest(config, tmp_path):
    service = build(config, "shard", Clock(), FakeProbe(), tmp_path)
    service.start()
    # FNV-1a (Artemis's): AAA -> shard 0, BBB -> shard 1 (reference section 2).
    local = result_of(service.router.get_target(client_id="AAA"))
    assert local.status is RouterStatus.OK and local.target.local
    other = result_of(service.router.get_target(client_id="BBB"))
    assert other.status is RouterStatus.REFUSED_USE_ANOTHER
    # No client id: the NULL key is not transformed and the filter keeps it local.
    assert result_of(service.router.get_target()).target.local
    service.stop()


def test_first_element_moves_on_when_the_first_target_stops_and_back(config, tmp_path):
    clock = Clock()
    probe = FakeProbe()
    service = build(config, "first", clock, probe, tmp_path)
    service.start()
    ready_all(service, probe, clock)
    first, second = service.pool.all_targets
    where = result_of(service.router.get_target(source_address="10.1.2.3:5555"))
    assert where.target is first
    probe.core(first).connectable = False  # the first broker stops
    clock.advance(0.2)
    assert result_of(service.router.get_target(source_address="10.1.2.3:5556")).target is second
    probe.core(first).connectable = True  # and comes back
    clock.advance(0.2)
    assert result_of(service.router.get_target(source_address="10.1.2.3:5557")).target is first
    probe.core(first).connectable = probe.core(second).connectable = False
    clock.advance(0.2)
    refused = result_of(service.router.get_target(source_address="10.1.2.3:5558"))
    assert refused.status is RouterStatus.REFUSED_UNAVAILABLE
    service.stop()
    assert clock.getDelayedCalls() == []
