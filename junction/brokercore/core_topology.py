"""The cluster's topology for CORE clients: the cluster connection's members, kept current.

A clustered node's CORE acceptors serve its first cluster connection (Artemis's
default cluster connection, which every TCP acceptor of an Artemis node is
bound to: ``ClusterManager.getDefaultConnection``), or the one the acceptor's
``clusterConnection`` parameter names.  A client that subscribes
to the topology is told every member -- this node, and each peer its cluster
connection is linked to -- and then each join and departure
(:mod:`junction.protocols.core.topology` decides the packets).  A node with no
cluster connection announces itself alone, as before.

:class:`CoreTopology` is one acceptor's: it listens to the cluster connection's
members (:meth:`~junction.brokercore.cluster.connection.ClusterConnection.add_member_listener`),
turns them into :class:`~junction.protocols.core.topology.TopologyMember`
values with the connector each member names itself by (its ``connector-ref``),
keeps them in a :class:`~junction.protocols.core.topology.Membership` (bounded
by :data:`~junction.protocols.core.topology.MAX_TOPOLOGY_MEMBERS`), stamped with
the reactor's clock in ms, and tells its subscribed connections each change.
"""

from __future__ import annotations

import logging

from junction.protocols.core.topology import Membership, TopologyMember, announced_connector

log = logging.getLogger("junction.core")

__all__ = ["CoreTopology", "topology_for"]


def topology_for(server, reactor, name: str | None = None) -> CoreTopology | None:
    """A new :class:`CoreTopology` for the node of ``server``, or None when it is not
    clustered (no cluster connection: its clients are told this node alone).

    ``name``: the acceptor's ``clusterConnection`` parameter, the cluster connection to
    serve; without it, or when no cluster connection has that name, the first one (Artemis's
    ``RemotingServiceImpl.lookupClusterConnection`` falls back to the default the same way).
    """
    cluster = getattr(server, "cluster", None)
    connections = getattr(cluster, "connections", None)
    if not connections:
        return None
    chosen = connections[0]
    if name is not None:
        named = [c for c in connections if c.name == name]
        if named:
            chosen = named[0]
        else:
            log.warning(
                "clusterConnection=%s names no cluster connection of this node; its CORE clients are told "
                "the topology of %s", name, chosen.name,
            )
    return CoreTopology(cluster, chosen, reactor)


class CoreTopology:
    """One acceptor's view of its cluster connection's members, and who subscribed to it."""

    def __init__(self, manager, connection, reactor):
        self.manager = manager
        self.connection = connection
        self.reactor = reactor
        self.membership = Membership()
        #: the CORE connections subscribed (each is told every change until it closes)
        self.subscribers: set = set()
        self._warned_limit = False
        scale_down = getattr(manager.config, "scale_down", None)
        #: this node's scale-down group, announced with it (Artemis's ``getScaleDownGroupName``)
        self.scale_down_group = scale_down.group_name if scale_down is not None and scale_down.enabled else None
        _check_connector_ref(manager, connection)
        connection.add_member_listener(self._members_changed)  # called at once too

    def close(self) -> None:
        """Stop listening (the acceptor stopped)."""
        self.connection.remove_member_listener(self._members_changed)
        self.subscribers.clear()

    def subscribe(self, protocol) -> list[TopologyMember]:
        """``protocol`` is told every change from now on; the members to announce to it now."""
        self.subscribers.add(protocol)
        return list(self.membership.members.values())

    def unsubscribe(self, protocol) -> None:
        self.subscribers.discard(protocol)

    def _view(self) -> list[TopologyMember]:
        """This node, then each linked peer, with the connector each names itself by."""
        own = self.connection.own_connector
        members = [TopologyMember(self.manager.node_id, _connector(own), scale_down_group_name=self.scale_down_group)]
        for node_id, (connector, group) in self.connection.announced_members().items():
            members.append(TopologyMember(node_id, _connector(connector), scale_down_group_name=group))
        return members

    def _members_changed(self, _linked=None) -> None:
        changes = self.membership.update(self._view(), int(self.reactor.seconds() * 1000))
        left_out = self.membership.left_out
        if left_out and not self._warned_limit:
            self._warned_limit = True
            log.warning(
                "cluster connection %s: %d members beyond the topology's limit of %d are not announced to "
                "CORE clients", self.connection.name, left_out, len(self.membership.members),
            )
        if not changes:
            return
        for protocol in list(self.subscribers):
            protocol.topology_changed(changes)


def _check_connector_ref(manager, connection) -> None:
    """Warn when the cluster connection's ``connector-ref`` reaches an acceptor of this node
    that does not serve CORE: that connector is what this node's CORE clients are told, and a
    client that uses it (a new connection balanced over the topology, a failover) fails."""
    own = connection.own_connector
    if own is None:
        return
    reached = [
        a for a in getattr(manager.config, "acceptors", ())
        if a.router is None and int(a.port) == int(own.port) and a.host in (own.host, "0.0.0.0", "::", "")
    ]  # fmt: skip
    if reached and not any(not a.protocols or "CORE" in a.protocols for a in reached):
        log.warning(
            "cluster connection %s: its connector-ref %s reaches acceptor %s, which does not serve CORE; "
            "CORE clients are told that connector in the cluster topology (as Artemis tells them its "
            "connector-ref): serve CORE there, or point connector-ref at an acceptor that does",
            connection.name, own.name, reached[0].name,
        )


def _connector(connector):
    """A ``<connector>`` as a topology member's connector (None: the client keeps its own)."""
    if connector is None:
        return None
    return announced_connector(connector.name, connector.host, connector.port, getattr(connector, "params", None))
