"""The adapter feeding a clustered node's CORE topology (junction.brokercore.core_topology).

Unit tests over a stand-in cluster connection (the real one runs in
tests/integration/test_core_topology.py, with the real client): members become
topology members with the connector each names itself by, changes reach every
subscriber and none after it left, a non-clustered node has no topology, and a
``connector-ref`` on an acceptor without CORE is warned about.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from twisted.internet.task import Clock

from junction.brokercore.core_topology import CoreTopology, topology_for
from junction.config.model import Acceptor, Connector
from junction.protocols.core.topology import MemberDown, MemberUp

NETTY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
OWN = Connector(name="me", scheme="tcp", host="10.0.0.1", port=61616, params={"keyStorePassword": "k"})
PEER = Connector(name="node-b", scheme="tcp", host="10.0.0.2", port=61616)


class StandIn:
    """A cluster connection's surface the adapter uses."""

    name = "my-cluster"

    def __init__(self):
        self.own_connector = OWN
        self.peers: dict = {}
        self.listeners: list = []

    def add_member_listener(self, fn):
        self.listeners.append(fn)
        fn({})

    def remove_member_listener(self, fn):
        self.listeners.remove(fn)

    def announced_members(self):
        return dict(self.peers)

    def change(self, **peers):
        self.peers = peers
        for fn in list(self.listeners):
            fn({})


class Subscriber:
    def __init__(self):
        self.told: list = []

    def topology_changed(self, changes):
        self.told.append(changes)


def manager(acceptors=(), scale_down=None):
    return SimpleNamespace(
        node_id="node-a", config=SimpleNamespace(acceptors=tuple(acceptors), scale_down=scale_down)
    )


def test_members_changes_and_subscribers():
    clock = Clock()
    clock.advance(1.5)
    cc = StandIn()
    feed = CoreTopology(manager(), cc, clock)
    first = Subscriber()
    members = feed.subscribe(first)
    assert [m.node_id for m in members] == ["node-a"]
    own = members[0].primary
    assert (own.name, own.factory_class_name, own.params) == ("me", NETTY, (("host", "10.0.0.1"), ("port", "61616")))
    assert members[0].unique_event_id == 1500

    clock.advance(1)
    cc.change(**{"node-b": (PEER, "g1")})
    assert len(first.told) == 1
    (up,) = first.told[0]
    assert isinstance(up, MemberUp) and up.member.node_id == "node-b" and up.member.unique_event_id == 2500
    assert up.member.primary.get("host") == "10.0.0.2" and up.member.scale_down_group_name == "g1"

    second = Subscriber()
    assert [m.node_id for m in feed.subscribe(second)] == ["node-a", "node-b"]
    feed.unsubscribe(first)
    clock.advance(1)
    cc.change()
    assert second.told == [(MemberDown("node-b", 3500),)]
    assert len(first.told) == 1  # gone: told nothing more

    cc.change()  # nothing changed: nobody is told
    assert len(second.told) == 1
    feed.close()
    assert cc.listeners == [] and feed.subscribers == set()


def test_a_node_without_a_cluster_connection_has_no_topology():
    clock = Clock()
    assert topology_for(SimpleNamespace(cluster=None), clock) is None
    assert topology_for(SimpleNamespace(cluster=SimpleNamespace(connections=[])), clock) is None
    cc = StandIn()
    feed = topology_for(SimpleNamespace(cluster=SimpleNamespace(connections=[cc], **vars(manager()))), clock)
    assert feed is not None and feed.connection is cc


def test_a_connector_ref_on_an_acceptor_without_core_is_warned_about(caplog):
    links_only = Acceptor(name="links", scheme="tcp", host="0.0.0.0", port=61616, protocols=frozenset({"CLUSTER"}))
    with caplog.at_level(logging.WARNING, logger="junction.core"):
        CoreTopology(manager([links_only]), StandIn(), Clock())
    assert "reaches acceptor links, which does not serve CORE" in caplog.text
    caplog.clear()
    everything = Acceptor(name="all", scheme="tcp", host="10.0.0.1", port=61616)
    with caplog.at_level(logging.WARNING, logger="junction.core"):
        CoreTopology(manager([links_only, everything]), StandIn(), Clock())
    assert caplog.text == ""


def test_a_peer_is_announced_by_the_connector_it_names_itself_by():
    from junction.brokercore.cluster.connection import ClusterConnection
    from junction.protocols.cluster.link import Member

    config = SimpleNamespace(name="my-cluster", connector_ref="me", allow_direct_connections_only=True)
    cc = ClusterConnection(SimpleNamespace(connectors={"me": OWN}, node_id="node-a"), config)
    bridge = SimpleNamespace(node_id="node-b", connector=PEER, peer_connector=None, peer_scale_down_group=None)
    cc.by_node["node-b"] = bridge
    told = []
    cc.add_member_listener(told.append)
    assert cc.announced_members() == {"node-b": (PEER, None)}  # not told yet: the connector used

    # the peer's TOPOLOGY names it at the same host and port: this node's connector, unchanged
    cc.members_learned((Member("node-b", "b", "10.0.0.2", 61616),), bridge)
    assert cc.announced_members() == {"node-b": (PEER, None)} and len(told) == 2

    # at another address (reached through an alias, say): announced as the peer names itself
    cc.members_learned((Member("node-b", "b", "b.example", 61617), Member("node-c", "c", "x", 1)), bridge)
    connector, _ = cc.announced_members()["node-b"]
    assert (connector.name, connector.host, connector.port) == ("b.example:61617", "b.example", 61617)
    assert len(told) == 3  # the members' listeners were told
    cc.remove_member_listener(told.append)
    cc.members_learned((Member("node-b", "b", "10.0.0.2", 61616),), bridge)
    assert len(told) == 3


def test_a_cluster_connection_named_by_the_acceptor(caplog):
    first, second = StandIn(), StandIn()
    first.name, second.name = "first", "second"
    server = SimpleNamespace(cluster=SimpleNamespace(connections=[first, second], **vars(manager())))
    assert topology_for(server, Clock(), "second").connection is second
    assert topology_for(server, Clock()).connection is first
    with caplog.at_level(logging.WARNING, logger="junction.core"):
        assert topology_for(server, Clock(), "third").connection is first  # Artemis falls back too
    assert "clusterConnection=third names no cluster connection" in caplog.text
