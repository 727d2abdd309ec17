"""Connection routers assembled from configuration, with their life cycle.

:func:`build_router` turns one validated
:class:`junction.config.model.ConnectionRouterConfig` into a
:class:`RouterService`: the :class:`~junction.gateway.router.ConnectionRouter`
with its key resolver, policy, pool (static connectors, or a pool the node feeds
from a discovery group or a cluster connection) and cache, ready to :meth:`RouterService.start`
(pool monitors, cache reload and the cache's expiry sweep) and
:meth:`RouterService.stop` (everything cancelled; no delayed call left).

The readiness probe is passed in: it depends on how the gateway reaches a
broker core, which is the listener's business, and tests give a fake one
checked against the same contract.  A persisted cache is a file
``<cache_directory>/<router>.cache`` (see :mod:`.cache`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from twisted.internet import task

from junction.gateway.cache import FileCacheStore, RouterCache
from junction.gateway.pool import DynamicPool, StaticPool
from junction.gateway.router import ConnectionRouter
from junction.routing.keys import KeyResolver, KeyType
from junction.routing.policies import create_policy
from junction.routing.targets import Target

__all__ = ["RouterService", "build_router", "CACHE_FILE_SUFFIX"]

CACHE_FILE_SUFFIX = ".cache"


@dataclass
class RouterService:
    """One configured router and the parts that need starting and stopping."""

    router: ConnectionRouter
    pool: StaticPool | DynamicPool | None = None
    cache: RouterCache | None = None
    clock: object = None
    _sweep: task.LoopingCall | None = field(default=None, repr=False)

    def start(self) -> None:
        if self.cache is not None:
            self.cache.start()
            interval = self.cache.sweep_interval
            if interval is not None:
                self._sweep = task.LoopingCall(self.cache.expire)
                self._sweep.clock = self.clock
                self._sweep.start(interval, now=False)
        if self.pool is not None:
            self.pool.start()

    def stop(self) -> None:
        if self._sweep is not None and self._sweep.running:
            self._sweep.stop()
        self._sweep = None
        if self.pool is not None:
            self.pool.stop()
        if self.cache is not None:
            self.cache.stop()


def build_router(
    config,
    *,
    connectors: dict,
    probe,
    clock=None,
    local_target: Target | None = None,
    cache_directory: str | os.PathLike | None = None,
    on_decision=None,
) -> RouterService:
    """A :class:`RouterService` for ``config`` (already validated by the loader).

    ``connectors`` maps connector names to :class:`junction.config.model.Connector`;
    ``local_target`` is the embedded broker core's target (with its node
    id), used for local decisions and, with ``local-target-enabled``, as a
    pool member.  ``cache_directory`` is required for a persisted cache.
    """
    if clock is None:
        from twisted.internet import reactor as clock
    if local_target is None:
        local_target = Target(local=True, ready=True)
    policy = None
    if config.policy is not None:
        policy = create_policy(config.policy.name, dict(config.policy.properties))
    pool = None
    if config.pool is not None:
        pool_config = config.pool
        settings = dict(
            probe=probe,
            check_period_ms=pool_config.check_period,
            quorum_size=pool_config.quorum_size,
            quorum_timeout_ms=pool_config.quorum_timeout,
            local_target=local_target if pool_config.local_target_enabled else None,
            clock=clock,
        )
        if pool_config.discovery_group is not None:
            pool = DynamicPool(source=f"discovery group {pool_config.discovery_group}", **settings)
        elif pool_config.cluster_connection is not None:
            pool = DynamicPool(source=f"cluster connection {pool_config.cluster_connection}", **settings)
        else:
            pool = StaticPool([connectors[name] for name in pool_config.static_connectors], **settings)
    cache = None
    if config.cache is not None:
        store = None
        if config.cache.persisted:
            if cache_directory is None:
                raise ValueError(f"router {config.name!r}: a persisted cache needs a cache directory")
            os.makedirs(cache_directory, exist_ok=True)
            store = FileCacheStore(os.path.join(os.fspath(cache_directory), config.name + CACHE_FILE_SUFFIX))
        cache = RouterCache(
            config.name,
            timeout_ms=config.cache.timeout,
            persisted=config.cache.persisted,
            store=store,
            clock=clock,
        )
    router = ConnectionRouter(
        config.name,
        key_resolver=KeyResolver(KeyType(config.key_type), config.key_filter),
        policy=policy,
        pool=pool,
        cache=cache,
        local_target=local_target,
        local_target_filter=config.local_target_filter,
        clock=clock,
        on_decision=on_decision,
    )
    return RouterService(router=router, pool=pool, cache=cache, clock=clock)
