"""A connection router: from a connection's handshake values to a target.

:class:`ConnectionRouter` is Artemis's ``ConnectionRouter``
(``reference/artemis-routing.md`` section 1).  :meth:`ConnectionRouter.get_target`
takes the values the gateway learned from a client's opening (client id, SNI
host, source address, user, roles) and decides, in this order:

1. a client id starting with :data:`~junction.routing.keys.INTERNAL_CLIENT_ID_PREFIX` is one of the
   routers' own probe sessions: **local**;
2. the key resolver turns the values into the key (:mod:`junction.routing.keys`);
3. with a policy, a key other than ``"NULL"`` is transformed by it;
4. a key the ``local-target-filter`` matches **in full** (``re.fullmatch``,
   Java's ``Matcher.matches()``): **local**;
5. no policy, or no pool: ``REFUSED_USE_ANOTHER`` -- the key is not for this
   router's targets;
6. a cached node id whose target the pool reports ready (without the quorum
   wait): that target;
7. otherwise the policy selects from the pool's ready targets (which may
   wait for the pool's quorum): a target -> ``OK`` (and the cache learns
   ``key -> node id`` when the target's node id is known); none ->
   ``REFUSED_UNAVAILABLE``.

:meth:`ConnectionRouter.get_target_for_key` is the management API's
``getTarget(key)``: the key is given, so the key filter and the internal
prefix check do not apply; steps 3 to 7 do.

The answer is a Deferred because step 7 may wait for the pool's quorum.
Every other path -- and step 7 when the pool's Deferred has already fired --
gives an already-fired Deferred without touching the reactor, so the
common case costs a few dictionary look-ups and one hash.

Each decision is also described by a :class:`RoutingDecision` (keys before
and after the transform, why, whether the cache answered, when), which
:meth:`ConnectionRouter.route` returns and the ``on_decision`` callback
receives, for the event log.

The local target is the broker core embedded in this process (Artemis's
``LocalTarget``: no connector, the server's node id).  A gateway without a
broker core still gets local decisions for probe sessions and
local-filter matches; its listener decides what to do with them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from twisted.internet import defer
from twisted.logger import Logger

from junction.gateway.cache import RouterCache
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX, NULL_KEY, KeyResolver, SettableFilter
from junction.routing.policies import Policy
from junction.routing.targets import Pool, RouterResult, RouterStatus, Target

__all__ = [
    "REFUSED_UNAVAILABLE",
    "REFUSED_USE_ANOTHER",
    "ConnectionRouter",
    "DecisionReason",
    "RoutingDecision",
]

#: The result for a key this router's targets do not serve.
REFUSED_USE_ANOTHER = RouterResult(RouterStatus.REFUSED_USE_ANOTHER)
#: The result when no target is available for the key.
REFUSED_UNAVAILABLE = RouterResult(RouterStatus.REFUSED_UNAVAILABLE)

_log = Logger()


class DecisionReason(enum.Enum):
    """Which step of the routing algorithm decided."""

    #: a router probe session (client id prefix): local
    INTERNAL = "internal"
    #: the local-target filter matched the key: local
    LOCAL_FILTER = "local-filter"
    #: no policy configured: refused, use another
    NO_POLICY = "no-policy"
    #: no pool configured: refused, use another
    NO_POOL = "no-pool"
    #: the cache named a ready target
    CACHE = "cache"
    #: the policy selected a target
    POLICY = "policy"
    #: the policy selected nothing (no ready target, quorum not met, or by design)
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class RoutingDecision:
    """One routing decision, as the event log records it.

    ``key_raw`` is the key as resolved (after the key filter, before the
    policy's transform), ``key`` the key the router used; both are None for
    an internal probe session.  Times are the router clock's seconds:
    ``started_at`` when the request came in, ``decided_at`` when it was
    answered (later than ``started_at`` only when the pool made it wait).
    """

    router: str
    result: RouterResult
    reason: DecisionReason
    key_raw: str | None
    key: str | None
    cache_hit: bool
    started_at: float
    decided_at: float

    @property
    def elapsed(self) -> float:
        """Seconds the decision took (the pool's quorum wait, mostly)."""
        return self.decided_at - self.started_at


class ConnectionRouter:
    """One ``<connection-router>``: key resolver, filters, policy, pool and cache.

    ``policy``, ``pool`` and ``cache`` are optional, as in Artemis: a router
    with neither policy nor pool only separates local keys (the
    ``local-target-filter``) from the others, which it refuses with
    ``REFUSED_USE_ANOTHER``.  ``local_target`` defaults to a ready local
    :class:`Target` without a node id.  ``clock`` (``seconds()``; the global
    reactor by default) stamps decisions.  ``on_decision`` is called with
    every :class:`RoutingDecision`; its errors are logged, never raised.
    """

    def __init__(
        self,
        name: str,
        *,
        key_resolver: KeyResolver,
        policy: Policy | None = None,
        pool: Pool | None = None,
        cache: RouterCache | None = None,
        local_target: Target | None = None,
        local_target_filter: str | None = None,
        clock=None,
        on_decision: Callable[[RoutingDecision], None] | None = None,
    ):
        if clock is None:
            from twisted.internet import reactor as clock
        self.name = name
        self.key_resolver = key_resolver
        self.policy = policy
        self.pool = pool
        self.cache = cache
        self.local_target = (
            local_target if local_target is not None else Target(local=True, ready=True)
        )
        self.on_decision = on_decision
        self._clock = clock
        self._local_filter = SettableFilter("local-target filter", local_target_filter)

    # -- runtime-settable filters (the management API) ----------------------

    @property
    def local_target_filter(self) -> str | None:
        """The local-target filter's text; None when unset (also after setting "")."""
        return self._local_filter.text

    @local_target_filter.setter
    def local_target_filter(self, pattern: str | None) -> None:
        self._local_filter.set(pattern)

    @property
    def key_filter(self) -> str | None:
        """The key resolver's filter text (Artemis ``TargetKeyFilter``); None when unset."""
        return self.key_resolver.key_filter

    @key_filter.setter
    def key_filter(self, pattern: str | None) -> None:
        self.key_resolver.key_filter = pattern

    # -- routing --------------------------------------------------------------

    def get_target(
        self,
        *,
        client_id: str | None = None,
        sni_host: str | None = None,
        source_address=None,
        username: str | None = None,
        roles: Sequence[str] | None = (),
    ) -> defer.Deferred:
        """A Deferred firing with the :class:`RouterResult` for a connection."""
        return self._result_of(
            self._decide_connection(client_id, sni_host, source_address, username, roles)
        )

    def get_target_for_key(self, key: str) -> defer.Deferred:
        """The management path: a Deferred firing with the :class:`RouterResult` for ``key``."""
        return self._result_of(self._decide_key(key))

    def route(
        self,
        *,
        client_id: str | None = None,
        sni_host: str | None = None,
        source_address=None,
        username: str | None = None,
        roles: Sequence[str] | None = (),
    ) -> defer.Deferred:
        """As :meth:`get_target`, firing with the whole :class:`RoutingDecision`."""
        return _as_deferred(
            self._decide_connection(client_id, sni_host, source_address, username, roles)
        )

    def route_key(self, key: str) -> defer.Deferred:
        """As :meth:`get_target_for_key`, firing with the whole :class:`RoutingDecision`."""
        return _as_deferred(self._decide_key(key))

    @staticmethod
    def _result_of(outcome) -> defer.Deferred:
        if isinstance(outcome, RoutingDecision):
            return defer.succeed(outcome.result)
        return outcome.addCallback(_decision_result)

    def _decide_connection(self, client_id, sni_host, source_address, username, roles):
        """A RoutingDecision, or a Deferred of one (the pool had to be asked)."""
        started = self._clock.seconds()
        try:
            if client_id is not None and client_id.startswith(INTERNAL_CLIENT_ID_PREFIX):
                local = RouterResult(RouterStatus.OK, self.local_target)
                return self._decided(local, DecisionReason.INTERNAL, None, None, started)
            raw = self.key_resolver.resolve(
                client_id=client_id,
                sni_host=sni_host,
                source_address=source_address,
                username=username,
                roles=roles,
            )
            return self._decide(raw, started)
        except Exception:
            return defer.fail()

    def _decide_key(self, key: str):
        started = self._clock.seconds()
        try:
            return self._decide(key, started)
        except Exception:
            return defer.fail()

    def _decide(self, raw: str, started: float):
        policy = self.policy
        key = raw
        if policy is not None and key != NULL_KEY:
            key = policy.transform_key(key)
        local_filter = self._local_filter.pattern
        if local_filter is not None and local_filter.fullmatch(key) is not None:
            local = RouterResult(RouterStatus.OK, self.local_target)
            return self._decided(local, DecisionReason.LOCAL_FILTER, raw, key, started)
        pool = self.pool
        if policy is None or pool is None:
            reason = DecisionReason.NO_POLICY if policy is None else DecisionReason.NO_POOL
            return self._decided(REFUSED_USE_ANOTHER, reason, raw, key, started)
        cache = self.cache
        if cache is not None:
            node_id = cache.get(key)
            if node_id is not None:
                target = pool.get_ready_target(node_id)
                if target is not None:
                    hit = RouterResult(RouterStatus.OK, target)
                    return self._decided(hit, DecisionReason.CACHE, raw, key, started, True)
        return pool.get_targets().addCallback(self._select, policy, raw, key, started)

    def _select(self, targets, policy: Policy, raw: str, key: str, started: float):
        target = policy.select(targets, key)
        if target is None:
            return self._decided(REFUSED_UNAVAILABLE, DecisionReason.UNAVAILABLE, raw, key, started)
        cache = self.cache
        if cache is not None and target.node_id is not None:
            cache.put(key, target.node_id)
        chosen = RouterResult(RouterStatus.OK, target)
        return self._decided(chosen, DecisionReason.POLICY, raw, key, started)

    def _decided(self, result, reason, raw, key, started, cache_hit=False) -> RoutingDecision:
        decision = RoutingDecision(
            self.name, result, reason, raw, key, cache_hit, started, self._clock.seconds()
        )
        observer = self.on_decision
        if observer is not None:
            try:
                observer(decision)
            except Exception:
                _log.failure("router {router}: decision observer failed", router=self.name)
        return decision

    def __repr__(self) -> str:
        policy = None if self.policy is None else self.policy.name
        return f"<ConnectionRouter {self.name} key={self.key_resolver} policy={policy}>"


def _decision_result(decision: RoutingDecision) -> RouterResult:
    return decision.result


def _as_deferred(outcome) -> defer.Deferred:
    if isinstance(outcome, RoutingDecision):
        return defer.succeed(outcome)
    return outcome
