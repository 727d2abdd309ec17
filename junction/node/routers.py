"""The node's connection routers (``<connection-routers>``): built and started before the listeners.

Each router's pool gets a readiness probe (AMQP or STOMP to each target, the
node's own broker core in process) and, when its targets come from a
discovery group or a cluster connection, follows that source.  Stopped after
the listeners and the management API, before the cluster.
"""

from __future__ import annotations

from junction.gateway.build import build_router
from junction.gateway.probe import ProbeResult
from junction.node.service import NodeService, log
from junction.routing.targets import Target

__all__ = ["RoutersService"]


class RoutersService(NodeService):
    """``node.routers``: name -> :class:`junction.gateway.build.RouterService`."""

    name = "routers"

    def __init__(self):
        self._probes: list = []

    def startService(self):
        """Build and start every ``<connection-router>`` (once, before the acceptors listen)."""
        super().startService()
        node = self.node
        config = node.config
        if not config.connection_routers:
            return
        connectors = {c.name: c for c in config.connectors}
        for router_config in config.connection_routers:
            probe = None
            if router_config.pool is not None:
                probe = self._router_probe(router_config)
                self._probes.append(probe)
            service = build_router(
                router_config,
                connectors=connectors,
                probe=probe,
                clock=node.reactor,
                # one local target per router: a pool owns its targets' readiness
                local_target=Target(local=True, ready=True, node_id=node.node_id),
                cache_directory=node.routers_dir,
            )
            service.start()
            self._feed_pool(router_config, service.pool)
            node.routers[router_config.name] = service
            log.info(
                "connection router %s: key %s, policy %s, %s",
                router_config.name,
                router_config.key_type,
                router_config.policy.name if router_config.policy else "none",
                _pool_description(router_config.pool),
            )

    def _feed_pool(self, router_config, pool) -> None:
        """Keep a discovery or cluster pool's targets equal to what its source knows."""
        node = self.node
        pool_config = router_config.pool
        if pool is None or pool_config is None:
            return
        if pool_config.discovery_group is not None:
            group = node.discovery_groups.get(pool_config.discovery_group)
            if group is None:
                log.error("connection router %s: discovery group %s is not running", router_config.name, pool_config.discovery_group)
                return

            def sync(*_args):
                pool.sync_entries(
                    {
                        node_id: _announced_connector(entry.connectors[0])
                        for node_id, entry in group.entries.items()
                        if entry.connectors
                    }
                )

            group.add_listener(sync)
            sync()
        elif pool_config.cluster_connection is not None:
            connection = node.cluster.connection_named(pool_config.cluster_connection) if node.cluster else None
            if connection is None:
                log.error(
                    "connection router %s: cluster connection %s is not running",
                    router_config.name, pool_config.cluster_connection,
                )
                return
            connection.add_member_listener(pool.sync_entries)

    def _router_probe(self, router_config):
        """The readiness probe of a router's pool: AMQP or STOMP to each target, as the
        target serves (``probeProtocols=`` on its connector), in-process for the local one."""
        try:
            from junction.gateway.multi_probe import build_readiness_probe
        except ImportError as exc:
            raise RuntimeError(
                f"connection router {router_config.name!r}: its pool needs the readiness "
                f"probes (junction.gateway.multi_probe), which cannot be imported: {exc}"
            ) from exc
        pool = router_config.pool
        return build_readiness_probe(
            username=pool.username,
            password=pool.password,
            reactor=self.node.reactor,
            local_status=self._local_status,
        )

    def _local_status(self, *_target) -> ProbeResult:
        """What a probe of this node's own broker core (the local target) answers."""
        node = self.node
        server = node.server
        active = server is not None and server.started
        return ProbeResult(active=active, node_id=node.node_id, connection_count=self._connection_count())

    def _connection_count(self) -> int:
        """Client connections served by this node's broker core (not the forwarded ones)."""
        server = self.node.server
        if server is None:
            return 0
        return server.connection_count()

    def stopService(self):
        super().stopService()
        node = self.node
        for name, service in node.routers.items():
            try:
                service.stop()
            except Exception:
                log.exception("connection router %s: stopping failed", name)
        for probe in self._probes:
            close = getattr(probe, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("closing probe %r failed", probe)
        self._probes.clear()
        node.routers.clear()


def _pool_description(pool) -> str:
    if pool is None:
        return "no pool"
    if pool.discovery_group is not None:
        return f"targets from discovery group {pool.discovery_group}"
    if pool.cluster_connection is not None:
        return f"targets from cluster connection {pool.cluster_connection}"
    return "targets " + ", ".join(pool.static_connectors)


def _announced_connector(announced):
    """A broadcast connector as a :class:`junction.config.model.Connector` (plain TCP)."""
    from junction.config.model import Connector

    return Connector(
        name=announced.name, scheme="tcp", host=announced.host, port=int(announced.port),
        params=dict(announced.params),
    )
