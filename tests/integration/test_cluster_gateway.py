"""The gateway's discovery and cluster pools: targets learnt from broadcasts and from the cluster.

Three clustered broker cores and one gateway node, all real processes.  The
gateway's connection router has no static connectors: its pool is fed by a
UDP discovery group, or by the members of its own cluster connection, and
clients routed through it reach every core; messages cross the cluster
exactly once.
"""

from __future__ import annotations

import random

import pytest

from tests.clusterkit import (
    CLUSTER_PASSWORD,
    CLUSTER_USER,
    QUEUE_XML,
    StompClient,
    make_cluster,
    wait_linked,
)
from tests.harness import free_port, wait_for

pytestmark = pytest.mark.timeout(120)

def _gateway(broker_factory, pool_xml: str, core_xml: str):
    edge = free_port()
    gateway = broker_factory(
        "gw",
        persistence=False,
        extra_acceptors_xml=f'<acceptor name="edge">tcp://127.0.0.1:{edge}?router=r;routerMode=forward</acceptor>',
        extra_core_xml=core_xml + f"""
    <connection-routers>
      <connection-router name="r">
        <key-type>CLIENT_ID</key-type>
        <policy name="CONSISTENT_HASH"/>
        <pool>
          <username>pool</username><password>pool-secret</password>
          <check-period>200</check-period><quorum-timeout>2000</quorum-timeout>
          {pool_xml}
        </pool>
      </connection-router>
    </connection-routers>""",
    )
    gateway.edge_port = edge
    return gateway


def _targets(gateway) -> dict:
    targets = gateway.status()["routers"]["r"]["targets"]
    return {t["node_id"]: t for t in targets}


def _through_gateway(gateway, client_id: str) -> StompClient:
    class Edge:
        stomp_address = ("127.0.0.1", gateway.edge_port)

    return StompClient(Edge(), client_id=client_id)


def _exactly_once_through(gateway, cores: dict) -> None:
    """Consumers and a producer routed by client id land on different cores; every message arrives once."""
    consumers = {}
    for i in range(12):
        client = _through_gateway(gateway, f"consumer-{i}")
        client.subscribe("/queue/orders")
        consumers[f"consumer-{i}"] = client
    homes = {
        name: sum(1 for c in core.status()["connections"] if (c.get("client_id") or "").startswith("consumer-"))
        for name, core in cores.items()
    }
    assert sum(1 for n in homes.values() if n) >= 2, f"consumers all on one core: {homes}"
    with_consumers = {core.status()["node_id"] for name, core in cores.items() if homes[name]}

    def bindings_known(core) -> bool:
        node_id = core.status()["node_id"]
        seen = {b["node_id"] for b in core.status()["cluster"]["remote_bindings"]
                if b["queue"] == "orders" and b["consumers"] > 0}
        return seen == with_consumers - {node_id}

    for core in cores.values():
        wait_for(lambda c=core: bindings_known(c), 10, what=f"{core.name} knows the remote consumers")
    producer = _through_gateway(gateway, "producer")
    bodies = [f"g{i}" for i in range(120)]
    producer.send_all("/queue/orders", bodies)
    wait_for(lambda: sum(len(c.bodies) for c in consumers.values()) >= 120, 20, what="120 deliveries")
    got = [b for c in consumers.values() for b in c.bodies]
    assert sorted(got) == sorted(bodies)
    for client in [*consumers.values(), producer]:
        client.close()


def test_cluster_connection_pool_targets_the_cluster_members(broker_factory):
    cores = make_cluster(broker_factory, ["a", "b", "c"], extra_core_xml=QUEUE_XML)
    for core in cores.values():
        core.start()
    wait_linked(cores)
    connectors = "".join(
        f'<connector name="{n}">tcp://127.0.0.1:{c.cluster_port}</connector>' for n, c in cores.items()
    )
    gw_port = free_port()
    core_xml = f"""
    <connectors>{connectors}<connector name="gw">tcp://127.0.0.1:{gw_port}</connector></connectors>
    <cluster-user>{CLUSTER_USER}</cluster-user><cluster-password>{CLUSTER_PASSWORD}</cluster-password>
    <cluster-connections>
      <cluster-connection name="my-cluster">
        <connector-ref>gw</connector-ref>
        <retry-interval>100</retry-interval>
        <static-connectors><connector-ref>a</connector-ref></static-connectors>
      </cluster-connection>
    </cluster-connections>"""
    gateway = _gateway(broker_factory, "<cluster-connection>my-cluster</cluster-connection>", core_xml)
    gateway.extra_acceptors_xml += f'<acceptor name="links">tcp://127.0.0.1:{gw_port}?protocols=STOMP</acceptor>'
    gateway.write_config()
    gateway.start()
    ids = {c.status()["node_id"] for c in cores.values()}
    # the gateway linked to a, learnt b and c from a's topology: all three are targets, and ready
    wait_for(lambda: set(_targets(gateway)) == ids and all(t["ready"] for t in _targets(gateway).values()), 20,
             what="three ready targets from the cluster")
    _exactly_once_through(gateway, cores)
    # a core stopped: it leaves the pool
    c_id = cores["c"].status()["node_id"]
    cores["c"].stop()
    wait_for(lambda: set(_targets(gateway)) == ids - {c_id}, 10, what="c gone from the pool")


def test_discovery_group_pool_targets_the_broadcasting_cores(broker_factory):
    group = f"239.255.{random.randint(1, 254)}.{random.randint(1, 254)}"
    port = free_port()
    cores = make_cluster(broker_factory, ["a", "b", "c"], discovery=(group, port), extra_core_xml=QUEUE_XML)
    for core in cores.values():
        core.start()
    wait_linked(cores)
    core_xml = f"""
    <discovery-groups>
      <discovery-group name="dg">
        <local-bind-address>127.0.0.1</local-bind-address>
        <group-address>{group}</group-address><group-port>{port}</group-port>
        <refresh-timeout>2000</refresh-timeout>
      </discovery-group>
    </discovery-groups>"""
    gateway = _gateway(broker_factory, '<discovery-group-ref discovery-group-name="dg"/>', core_xml).start()
    ids = {c.status()["node_id"] for c in cores.values()}
    wait_for(lambda: set(_targets(gateway)) == ids and all(t["ready"] for t in _targets(gateway).values()), 20,
             what="three ready targets from broadcasts")
    _exactly_once_through(gateway, cores)
    b_id = cores["b"].status()["node_id"]
    cores["b"].stop()
    wait_for(lambda: set(_targets(gateway)) == ids - {b_id}, 10, what="b's entry expired after refresh-timeout")
