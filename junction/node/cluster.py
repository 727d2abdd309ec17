"""The node's cluster: broadcast and discovery groups, the cluster manager, and its links.

:class:`ClusterService` starts the groups and makes the
:class:`~junction.brokercore.cluster.manager.ClusterManager` before the routers
(a pool may take its targets from a discovery group or a cluster connection)
and the listeners (cluster links arrive on the broker's acceptors).
:class:`ClusterLinksService` starts the manager's bridges once every acceptor
listens.  Both stop after the routers: scale-down first (it needs the links),
then the manager and the groups, before the broker core.
"""

from __future__ import annotations

from twisted.internet import defer

from junction.node.service import NodeService, log

__all__ = ["ClusterLinksService", "ClusterService"]


class ClusterService(NodeService):
    """``node.broadcast_groups``, ``node.discovery_groups`` and ``node.cluster`` (None without a cluster)."""

    name = "cluster"

    def startService(self):
        """Discovery groups, broadcast groups and the cluster manager (its bridges start once acceptors listen)."""
        super().startService()
        node = self.node
        config = node.config
        connectors = {c.name: c for c in config.connectors}
        if config.discovery_groups or config.broadcast_groups:
            from junction.brokercore.cluster.discovery import BroadcastGroup, DiscoveryGroup

            announced = []
            for group_config in config.broadcast_groups:
                group = BroadcastGroup(
                    group_config,
                    [connectors[name] for name in group_config.connector_refs if name in connectors],
                    node.node_id,
                    config.name,
                    reactor=node.reactor,
                )
                announced.extend(group.connectors)
                node.broadcast_groups[group_config.name] = group
            for group_config in config.discovery_groups:
                group = DiscoveryGroup(group_config, node.node_id, reactor=node.reactor, local_connectors=announced)
                group.add_duplicate_node_listener(self._duplicate_node)
                node.discovery_groups[group_config.name] = group
            for group in [*node.discovery_groups.values(), *node.broadcast_groups.values()]:
                # a group that cannot open its socket has logged why and stopped
                group.start().addErrback(lambda _failure: None)
        if config.cluster_connections or config.cluster_credentials_source is not None:
            # A node with cluster credentials but no cluster connection of its own still takes
            # links (the far end of a chain), as an Artemis node does.
            from junction.brokercore.cluster.manager import ClusterManager

            node.cluster = ClusterManager(
                node.server,
                config,
                node_id=node.node_id,
                reactor=node.reactor,
                connectors=connectors,
                discovery_groups=node.discovery_groups,
                data_directory=node.data_dirs["journal"],
            )
            node.server.cluster = node.cluster

    def _duplicate_node(self, announcement, source) -> None:
        """Another node broadcasts this node's id: a copied data directory (said once a minute)."""
        node = self.node
        now = node.reactor.seconds()
        if now - getattr(self, "_duplicate_logged", -1e9) < 60.0:
            return
        self._duplicate_logged = now
        log.error(
            "node %s at %s:%s announces this node's own id %s: one of the two data directories is a copy; "
            "this node will not link to it -- give each node its own journal directory",
            announcement.name, source[0], source[1], node.node_id,
        )

    @defer.inlineCallbacks
    def stopService(self):
        """Scale-down when enabled (every message to a peer), then the manager and the groups."""
        super().stopService()
        node = self.node
        scale_down = node.config.scale_down
        if node.cluster is not None and scale_down is not None and scale_down.enabled:
            try:
                yield node.cluster.scale_down(scale_down)
            except Exception:
                log.exception("scale-down failed; stopping without it")
        stopping = self._stop_cluster()
        if stopping is not None:
            yield stopping

    def _stop_cluster(self):
        node = self.node
        if node.cluster is not None:
            node.cluster.stop()
        stops = []
        for group in list(node.broadcast_groups.values()) + list(node.discovery_groups.values()):
            try:
                d = group.stop()
            except Exception:
                log.exception("stopping %s failed", group)
                continue
            if d is not None:
                stops.append(d)
        node.broadcast_groups.clear()
        node.discovery_groups.clear()
        return defer.DeferredList(stops, consumeErrors=True) if stops else None


class ClusterLinksService(NodeService):
    """The cluster manager's bridges to its peers, started once every acceptor listens (a peer's
    link back finds them).  Closing them is the cluster's: scale-down needs them until the end."""

    name = "links"

    def startService(self):
        super().startService()
        if self.node.cluster is not None:
            self.node.cluster.start()
