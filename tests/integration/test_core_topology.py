"""The cluster topology the real Artemis client holds: a 2-node Junction cluster and a 2-node
real Artemis cluster, the same scenario against each.

The client (``tests/java/JmsScenario.java``, op ``topology``: its ServerLocator's members and
their connectors) connects to node A of the cluster.  It must hold both nodes, each with the
connector its cluster connection names (``connector-ref``: the acceptor the client can reach
it on) and no backup; then node B stops and the client's topology drops B (the node announces
B's departure), B starts again and it comes back with a newer event id.  Beside the client, a
raw subscriber on node A (:class:`WireSubscriber`) keeps the packets as they are on the wire,
which must be Artemis's forms: the members in CLUSTER_TOPOLOGY_V4, a departure in
CLUSTER_TOPOLOGY_V2 with ``exit``.  The nodes are configured alike: each has connectors
``node-a`` and ``node-b`` (its clients' acceptor is its ``connector-ref``) and a cluster
connection with static connectors to the other.

The client URL says ``ha=true``: a client without it keeps a member whose departure it was told
(``ServerLocatorImpl.notifyNodeDown`` returns at once when not HA), against the real broker as
against Junction, so only an HA client's topology shows B leave.

Through the gateway (:func:`test_a_client_through_the_gateway_knows_only_the_gateway`), a
client forwarded to a clustered node is told the gateway alone: the gateway answers the
topology subscription itself and leaves it out of what it replays to the node, so the node,
never subscribed, tells the client none of its cluster.
"""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace
from xml.sax.saxutils import escape

import pytest

from junction.protocols.core import HANDSHAKE, CoreCodec, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.opening import NETTY_CONNECTOR_FACTORY
from junction.protocols.core.versions import CURRENT_VERSION
from tests.clusterkit import CLUSTER_PASSWORD, CLUSTER_USER, cluster_connection_xml, wait_linked
from tests.harness import LOOPBACK, free_port, queue_status, wait_for
from tests.integration import test_gateway_routing as routing

pytestmark = pytest.mark.timeout(60)

USERS = routing.USERS
USER = "app"
PASSWORD = USERS[USER][0]
#: the two nodes, as each one's connectors name them
A, B = "node-a", "node-b"
#: seconds the client may take to see a change (the node notices B go within its link's
#: retry interval; Artemis's cluster connection within its own)
CHANGE_TIMEOUT_MS = 20_000
#: seconds one scenario may run: two waits for a change and B's restart
RUN_TIMEOUT_S = 55.0


def cluster_xml(me: str, ports: dict[str, int]) -> str:
    """The cluster elements of ``me``'s ``<core>``, the same for Junction and Artemis."""
    connectors = "".join(f'<connector name="{n}">tcp://{LOOPBACK}:{p}</connector>' for n, p in ports.items())
    peers = [n for n in ports if n != me]
    return (
        f"<connectors>{connectors}</connectors>"
        f"<cluster-user>{escape(CLUSTER_USER)}</cluster-user>"
        f"<cluster-password>{escape(CLUSTER_PASSWORD)}</cluster-password>"
        + cluster_connection_xml(me, peers)
    )


def junction_pair(broker_factory) -> dict:
    """Two Junction nodes, each serving CORE (and STOMP, AMQP, its cluster links) on the
    acceptor its ``connector-ref`` names; not started."""
    ports = {A: free_port(), B: free_port()}
    nodes = {}
    for name in (A, B):
        node = broker_factory(
            name,
            security=True,
            users=USERS,
            extra_acceptors_xml=(
                f'<acceptor name="clients">tcp://{LOOPBACK}:{ports[name]}?protocols=CORE,STOMP,AMQP</acceptor>'
            ),
            extra_core_xml=cluster_xml(name, ports),
        )
        node.gateway_in_port = ports[name]  # what a gateway's connector for it names
        node.client_port = ports[name]
        nodes[name] = node
    return nodes


def artemis_pair(artemis_factory) -> dict:
    """Two real Artemis brokers, each with its main acceptor as its ``connector-ref``; not started."""
    nodes = {name: artemis_factory(name, user=USER, password=PASSWORD) for name in (A, B)}
    ports = {name: b.core_port for name, b in nodes.items()}
    for name, broker in nodes.items():
        broker.extra_core_xml = cluster_xml(name, ports)
        broker.client_port = ports[name]
    return nodes


class WireSubscriber:
    """A raw CORE connection to a node that subscribes to the topology (as the 2.40 client does:
    the handshake, a PING, SUBSCRIBE_TOPOLOGY_V2 naming version 136) and keeps the topology
    packets the node sends, as they are on the wire."""

    def __init__(self, port: int):
        self.sock = socket.create_connection((LOOPBACK, port), timeout=RUN_TIMEOUT_S)
        self.codec = CoreCodec(server=False)
        self.packets: list = []
        self.sock.sendall(HANDSHAKE + encode_packet(p.Ping(60_000)) + encode_packet(p.SubscribeTopologyV2(False, CURRENT_VERSION)))

    def read_until(self, done, timeout: float = 15.0) -> list:
        """Read until ``done(topology packets so far)`` holds (fails on a deadline)."""
        deadline = time.monotonic() + timeout
        while not done(self.packets):
            left = deadline - time.monotonic()
            assert left > 0, f"waited {timeout} s on the wire; got {self.packets}"
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            assert data, f"the node closed the connection; got {self.packets}"
            self.packets.extend(x for x in self.codec.receive_data(data) if isinstance(x, p.ClusterTopology))
        return self.packets

    def close(self) -> None:
        self.sock.close()


def check_wire(packets: list, node_ids: dict, ports: dict) -> None:
    """The topology packets as Artemis's CoreProtocolManager sends them to a 136 client: the
    members in CLUSTER_TOPOLOGY_V4, ``last`` on the final one of the burst; B's departure in
    CLUSTER_TOPOLOGY_V2 with ``exit``; B's return in V4, ``last`` unset, a newer event id."""
    end = next(i for i, x in enumerate(packets) if x.last) + 1
    burst, later = packets[:end], packets[end:]
    assert all(type(x) is p.ClusterTopologyV4 and not x.exit for x in burst), burst
    exits = [x for x in later if x.exit]
    assert exits, later
    # B is in the burst, or (a subscriber faster than the cluster's forming, seen with real
    # Artemis under load) announced up after it and before its exit
    ups = burst + [x for x in later[: later.index(exits[0])] if not x.exit]
    assert {x.node_id for x in burst} <= {node_ids[A], node_ids[B]} and node_ids[A] in {x.node_id for x in burst}
    assert {x.node_id for x in ups} == {node_ids[A], node_ids[B]}
    for x in ups:
        name = A if x.node_id == node_ids[A] else B
        assert (x.primary.name, x.primary.factory_class_name) == (name, NETTY_CONNECTOR_FACTORY)
        assert dict(x.primary.params) == {"host": LOOPBACK, "port": str(ports[name])}, x.primary
        assert x.backup is None and x.server_version == CURRENT_VERSION
    exits = [x for x in later if x.exit]
    assert [(type(x), x.node_id) for x in exits] == [(p.ClusterTopologyV2, node_ids[B])], later
    gone = later.index(exits[0])
    up_b = max(x.unique_event_id for x in ups if x.node_id == node_ids[B])
    assert exits[0].unique_event_id >= up_b
    back = [x for x in later[gone:] if not x.exit and x.node_id == node_ids[B]]
    assert back and all(type(x) is p.ClusterTopologyV4 and not x.last for x in back), later
    assert back[0].unique_event_id > exits[0].unique_event_id


def back_on_the_wire(node_ids):
    """Whether B's return follows its departure in the packets."""

    def done(packets) -> bool:
        gone = [i for i, x in enumerate(packets) if x.exit and x.node_id == node_ids[B]]
        return bool(gone) and any(not x.exit and x.node_id == node_ids[B] for x in packets[gone[0]:])

    return done


def scenario(jms, url: str, stop_b, start_b) -> SimpleNamespace:
    """Connect to ``url`` (node A), see both members, stop B, see A alone, start B, see both."""
    wait = {"op": "topology", "timeout": CHANGE_TIMEOUT_MS}
    run = jms.start(
        [
            {"op": "connect", "url": f"{url}?ha=true", "user": USER, "password": PASSWORD, "watchTopology": True},
            {**wait, "members": 2},
            {**wait, "members": 1},
            {**wait, "members": 2},
        ],
        timeout=RUN_TIMEOUT_S,
    )

    def result(n: int) -> dict:
        found = wait_for(lambda: len(run.results) > n or run.proc.poll() is not None, RUN_TIMEOUT_S, what=f"result {n}")
        assert found and len(run.results) > n, run.wait()
        return run.results[n]

    both = result(1)
    stop_b()
    alone = result(2)
    start_b()
    results = run.wait()
    return SimpleNamespace(both=both, alone=alone, again=results[3], events=list(run.events))


def members(result: dict) -> dict:
    """node id -> (connector name, host, port, backup) of a ``topology`` result."""
    out = {}
    for m in result["members"]:
        primary = m["primary"]
        out[m["nodeId"]] = (primary["name"], primary["params"]["host"], int(primary["params"]["port"]), m["backup"])
    return out


def check(seen: SimpleNamespace, node_ids: dict, ports: dict) -> None:
    """What the client must hold at each step, the same for every cluster."""
    expected = {node_ids[n]: (n, LOOPBACK, ports[n], None) for n in (A, B)}
    assert seen.both["reached"], seen.both
    assert members(seen.both) == expected
    assert seen.alone["reached"], seen.alone
    assert members(seen.alone) == {node_ids[A]: expected[node_ids[A]]}
    assert seen.again["reached"], seen.again
    assert members(seen.again) == expected
    # B came back newer than it left, and its departure was announced (not a lost connection:
    # the client's connection to A stayed up all along)
    before = {m["nodeId"]: m["uniqueEventId"] for m in seen.both["members"]}
    after = {m["nodeId"]: m["uniqueEventId"] for m in seen.again["members"]}
    assert after[node_ids[B]] > before[node_ids[B]]
    downs = [e for e in seen.events if e["event"] == "node_down"]
    assert [e["nodeId"] for e in downs] == [node_ids[B]], seen.events
    assert before[node_ids[B]] <= downs[0]["uniqueEventId"] <= after[node_ids[B]]
    assert not [e for e in seen.events if e["event"] == "exception"], seen.events


def test_junction_cluster_topology(jms, broker_factory):
    nodes = junction_pair(broker_factory)
    for node in nodes.values():
        node.start()
    wait_linked(nodes)
    node_ids = {name: node.status()["node_id"] for name, node in nodes.items()}

    ports = {n: node.client_port for n, node in nodes.items()}
    wire = WireSubscriber(ports[A])
    try:
        seen = scenario(jms, f"tcp://{LOOPBACK}:{ports[A]}", nodes[B].stop, nodes[B].start)
        packets = wire.read_until(back_on_the_wire(node_ids))
    finally:
        wire.close()

    check(seen, node_ids, ports)
    check_wire(packets, node_ids, ports)
    # B kept its node id across the restart (its journal): the same member came back
    assert nodes[B].status()["node_id"] == node_ids[B]


def test_real_artemis_cluster_topology(jms, artemis_factory):
    nodes = artemis_pair(artemis_factory)
    for node in nodes.values():
        node.start()
    node_ids = {name: node.node_id for name, node in nodes.items()}
    assert all(node_ids.values()), node_ids

    ports = {n: node.client_port for n, node in nodes.items()}
    wire = WireSubscriber(ports[A])
    try:
        seen = scenario(jms, nodes[A].url, nodes[B].stop, nodes[B].start)
        packets = wire.read_until(back_on_the_wire(node_ids))
    finally:
        wire.close()

    check(seen, node_ids, ports)
    check_wire(packets, node_ids, ports)


def test_a_client_through_the_gateway_knows_only_the_gateway(jms, broker_factory):
    nodes = junction_pair(broker_factory)
    for node in nodes.values():
        node.start()
    wait_linked(nodes)
    router = routing.router_xml("rfwd", key="CLIENT_ID", pool=[nodes[A]], check_period=200)
    gateway = routing.make_gateway(
        broker_factory, "gateway", [nodes[A]], {"rfwd": router}, protocols={"rfwd": "CORE;routerMode=forward"}
    ).start()
    routing.wait_ready(gateway, "rfwd", **{A: True})
    host, port = gateway.routed["rfwd"]

    results = jms.run(
        [
            {"op": "connect", "url": f"tcp://{host}:{port}?ha=true", "user": USER, "password": PASSWORD},
            {"op": "send", "queue": "through.gateway", "body": "hello"},
            {"op": "topology"},
        ]
    )

    # served by node A (its queue has the message), yet the client knows the gateway alone
    wait_for(lambda: queue_status(nodes[A], "through.gateway"), 10, what="the queue on node A")
    known = results[2]["members"]
    assert len(known) == 1, known
    assert known[0]["nodeId"] == gateway.status()["node_id"]
    params = known[0]["primary"]["params"]
    assert (params["host"], int(params["port"])) == (host, port)  # the connector it came through
