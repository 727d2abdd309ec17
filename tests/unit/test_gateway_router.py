"""The connection router: Artemis's ConnectionRouterTest cases and every getTarget step."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher

from junction.gateway.cache import RouterCache
from junction.gateway.router import (
    REFUSED_UNAVAILABLE,
    REFUSED_USE_ANOTHER,
    ConnectionRouter,
    DecisionReason,
    RoutingDecision,
)
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX, KeyResolver, KeyType
from junction.routing.policies import (
    ConsistentHashModuloPolicy,
    FirstElementPolicy,
    Policy,
    create_policy,
)
from junction.routing.targets import Pool, RouterStatus, Target


class FakePool:
    """A :class:`Pool` over a list of targets.

    ``get_targets`` fires at once with the ready targets, or, with
    ``hold=True``, returns a Deferred the test fires with :meth:`release`
    (a pool waiting for its quorum).
    """

    def __init__(self, targets=(), hold=False):
        self.targets = list(targets)
        self.hold = hold
        self.waiting: list[defer.Deferred] = []
        self.get_targets_calls = 0

    def get_targets(self):
        self.get_targets_calls += 1
        if self.hold:
            d = defer.Deferred()
            self.waiting.append(d)
            return d
        return defer.succeed([t for t in self.targets if t.ready])

    def get_ready_target(self, node_id):
        for t in self.targets:
            if t.ready and t.node_id == node_id:
                return t
        return None

    def release(self, targets=None):
        ready = [t for t in self.targets if t.ready] if targets is None else targets
        waiting, self.waiting = self.waiting, []
        for d in waiting:
            d.callback(ready)


def test_fake_pool_has_the_pool_protocols_methods():
    for name in ("get_targets", "get_ready_target"):
        expected = inspect.signature(getattr(Pool, name))
        assert inspect.signature(getattr(FakePool, name)).parameters.keys() == (
            expected.parameters.keys()
        )


class TransformPolicy(Policy):
    """Artemis's test policy: transforms the key so the local filter matches it."""

    name = "TRANSFORM"

    def __init__(self):
        super().__init__()
        self.seen = []

    def transform_key(self, key):
        self.seen.append(key)
        return "FOO" + key[3:]

    def select(self, targets, key):
        return None


def targets(n=3):
    return [
        Target(connector=SimpleNamespace(name=f"c{i}"), node_id=f"node-{i}", ready=True)
        for i in range(n)
    ]


def result_of(d: defer.Deferred):
    """The result of an already-fired Deferred (fails the test if it has not fired)."""
    box = []
    d.addBoth(box.append)
    assert box, "the Deferred has not fired"
    if isinstance(box[0], Exception) or hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0]


def make_router(**kwargs):
    kwargs.setdefault("key_resolver", KeyResolver(KeyType.CLIENT_ID))
    kwargs.setdefault("clock", Clock())
    kwargs.setdefault("local_target", Target(local=True, node_id="me", ready=True))
    return ConnectionRouter("r1", **kwargs)


# -- Artemis ConnectionRouterTest --------------------------------------------------------


def artemis_router(policy=None):
    return make_router(
        key_resolver=KeyResolver(KeyType.CLIENT_ID, "^.{3}"),
        local_target_filter="^FOO.*",
        policy=policy,
    )


def test_local_filter_match_is_local():
    router = artemis_router()
    result = result_of(router.get_target(client_id="FOO_EE", username="user"))
    assert result.status is RouterStatus.OK
    assert result.target is router.local_target


def test_no_pool_refuses_use_another():
    result = result_of(artemis_router().get_target(client_id="BAR_EE", username="user"))
    assert result == REFUSED_USE_ANOTHER
    assert result.target is None and not result.ok


def test_transforming_policy_makes_the_key_local():
    policy = TransformPolicy()
    router = artemis_router(policy)
    result = result_of(router.get_target(client_id="TRANSFORM_TO_FOO_EE", username="user"))
    assert result.target is router.local_target
    assert policy.seen == ["TRA"]  # the key filter ran first


# -- each step of getTarget --------------------------------------------------------------


def test_internal_probe_sessions_are_local_before_anything_else():
    pool = FakePool(targets())
    router = make_router(
        key_resolver=KeyResolver(KeyType.CLIENT_ID, "^nothing-matches$"),
        policy=FirstElementPolicy(),
        pool=pool,
    )
    decision = result_of(router.route(client_id=INTERNAL_CLIENT_ID_PREFIX + "abc"))
    assert decision.result.target is router.local_target
    assert decision.reason is DecisionReason.INTERNAL
    assert decision.key is None and decision.key_raw is None
    assert pool.get_targets_calls == 0


def test_null_key_is_not_transformed():
    policy = TransformPolicy()
    router = make_router(policy=policy, local_target_filter="NULL")
    decision = result_of(router.route())  # no client id: "NULL"
    assert policy.seen == []
    assert decision.key == "NULL" and decision.result.target is router.local_target


def test_local_filter_is_a_full_match():
    router = make_router(local_target_filter="FOO")
    assert result_of(router.get_target(client_id="FOO_EE")) == REFUSED_USE_ANOTHER
    assert result_of(router.get_target(client_id="FOO")).target is router.local_target
    router.local_target_filter = "FOO|BAR.*"
    assert result_of(router.get_target(client_id="BAR_1")).target is router.local_target


def test_no_policy_or_no_pool_refuses_use_another():
    with_pool = make_router(pool=FakePool(targets()))
    decision = result_of(with_pool.route(client_id="x"))
    assert decision.result == REFUSED_USE_ANOTHER and decision.reason is DecisionReason.NO_POLICY
    with_policy = make_router(policy=FirstElementPolicy())
    decision = result_of(with_policy.route(client_id="x"))
    assert decision.result == REFUSED_USE_ANOTHER and decision.reason is DecisionReason.NO_POOL


def test_policy_selects_from_the_pool_and_the_cache_learns():
    ts = targets()
    cache = RouterCache("r1")
    router = make_router(policy=FirstElementPolicy(), pool=FakePool(ts), cache=cache)
    decision = result_of(router.route(client_id="alice"))
    assert decision.result.ok and decision.result.target is ts[0]
    assert decision.reason is DecisionReason.POLICY and not decision.cache_hit
    assert cache.get("alice") == "node-0"


def test_cache_hit_keeps_the_target_while_it_is_ready():
    ts = targets()
    pool = FakePool(ts)
    router = make_router(policy=FirstElementPolicy(), pool=pool, cache=RouterCache("r1"))
    result_of(router.get_target(client_id="alice"))
    pool.targets.reverse()  # the policy would now pick node-2
    decision = result_of(router.route(client_id="alice"))
    assert decision.result.target is ts[0]
    assert decision.cache_hit and decision.reason is DecisionReason.CACHE
    assert pool.get_targets_calls == 1  # the cache path skips the pool's quorum wait


def test_cached_target_not_ready_falls_back_to_the_policy():
    ts = targets()
    cache = RouterCache("r1")
    router = make_router(policy=FirstElementPolicy(), pool=FakePool(ts), cache=cache)
    result_of(router.get_target(client_id="alice"))
    ts[0].ready = False
    decision = result_of(router.route(client_id="alice"))
    assert decision.result.target is ts[1] and not decision.cache_hit
    assert cache.get("alice") == "node-1"


def test_target_without_node_id_is_not_cached():
    target = Target(connector=SimpleNamespace(name="c0"), ready=True)
    cache = RouterCache("r1")
    router = make_router(policy=FirstElementPolicy(), pool=FakePool([target]), cache=cache)
    assert result_of(router.get_target(client_id="alice")).target is target
    assert len(cache) == 0


def test_no_ready_target_refuses_unavailable():
    router = make_router(policy=FirstElementPolicy(), pool=FakePool([]))
    decision = result_of(router.route(client_id="alice"))
    assert decision.result == REFUSED_UNAVAILABLE
    assert decision.reason is DecisionReason.UNAVAILABLE


def test_cache_is_keyed_by_the_transformed_key():
    cache = RouterCache("r1")
    policy = create_policy("CONSISTENT_HASH_MODULO", {"MODULO": "2"})
    policy.select = lambda ts, key: ts[0]  # a modulo policy that does select, for the test
    router = make_router(policy=policy, pool=FakePool(targets()), cache=cache)
    result_of(router.get_target(client_id="AAA"))
    assert cache.get("0") == "node-0" and cache.get("AAA") is None


def test_modulo_sharding_with_local_filter_and_no_pool():
    # AutoClientIDShardClusterTest: MODULO=2, CLIENT_ID key, local filter NULL|<node shard>
    node0 = make_router(
        policy=ConsistentHashModuloPolicy({"MODULO": "2"}), local_target_filter="NULL|0"
    )
    node1 = make_router(
        policy=ConsistentHashModuloPolicy({"MODULO": "2"}), local_target_filter="NULL|1"
    )
    assert result_of(node0.get_target(client_id="AAA")).ok  # AAA -> 0
    assert result_of(node1.get_target(client_id="AAA")) == REFUSED_USE_ANOTHER
    assert result_of(node1.get_target(client_id="BBB")).ok  # BBB -> 1
    assert result_of(node0.get_target(client_id="BBB")) == REFUSED_USE_ANOTHER
    assert result_of(node0.get_target()).ok and result_of(node1.get_target()).ok  # no id: NULL


def test_source_ip_routing_end_to_end():
    ts = targets(5)
    router = make_router(
        key_resolver=KeyResolver(KeyType.SOURCE_IP),
        policy=create_policy("CONSISTENT_HASH", {}),
        pool=FakePool(ts),
    )
    first = result_of(router.route(source_address="/10.1.2.3:40001"))
    again = result_of(router.route(source_address="/10.1.2.3:51515"))
    assert first.key == "10.1.2.3" and again.result.target is first.result.target


# -- the management path ----------------------------------------------------------------


def test_get_target_for_key_skips_the_key_filter_and_the_prefix():
    router = artemis_router()
    assert result_of(router.get_target_for_key("FOO_EE")).target is router.local_target
    assert result_of(router.get_target_for_key("BAR")) == REFUSED_USE_ANOTHER
    internal = INTERNAL_CLIENT_ID_PREFIX + "x"
    assert result_of(router.get_target_for_key(internal)) == REFUSED_USE_ANOTHER
    decision = result_of(router.route_key("XYZ_whole"))
    assert decision.key_raw == "XYZ_whole"  # not cut to three characters


def test_get_target_for_key_applies_transform_cache_and_policy():
    ts = targets()
    cache = RouterCache("r1")
    router = make_router(
        policy=TransformPolicy(), pool=FakePool(ts), cache=cache, local_target_filter="^FOO.*"
    )
    assert result_of(router.get_target_for_key("TRA_x")).target is router.local_target
    router.policy = FirstElementPolicy()
    assert result_of(router.get_target_for_key("admin")).target is ts[0]
    assert result_of(router.route_key("admin")).cache_hit


# -- runtime filters (ConnectionRouterControl) -----------------------------------------


def test_filters_set_at_run_time_and_cleared_with_empty_or_none():
    router = artemis_router()
    assert router.local_target_filter == "^FOO.*"
    assert router.key_filter == "^.{3}"
    router.local_target_filter = "^BAR.*"
    assert result_of(router.get_target(client_id="BAR_EE")).ok
    router.local_target_filter = ""
    assert router.local_target_filter is None
    router.key_filter = None
    assert router.key_filter is None
    router.local_target_filter = "^BAR_EE$"
    assert result_of(router.get_target(client_id="BAR_EE")).ok  # the whole client id now
    router.local_target_filter = None
    assert router.local_target_filter is None


def test_invalid_runtime_filter_is_rejected_and_the_old_one_kept():
    router = artemis_router()
    with pytest.raises(ValueError, match="local-target filter"):
        router.local_target_filter = "("
    with pytest.raises(ValueError, match="key filter"):
        router.key_filter = "("
    assert (router.local_target_filter, router.key_filter) == ("^FOO.*", "^.{3}")


# -- Deferreds, timing, decisions ---------------------------------------------------------


def test_fast_path_is_already_fired_and_schedules_nothing():
    clock = Clock()
    router = make_router(
        clock=clock, policy=FirstElementPolicy(), pool=FakePool(targets()), cache=RouterCache("r")
    )
    for _ in range(3):
        d = router.get_target(client_id="alice")
        assert d.called
    assert clock.getDelayedCalls() == []


def test_waiting_pool_answers_later_and_the_decision_says_how_long():
    clock = Clock()
    clock.advance(1000)
    ts = targets()
    pool = FakePool(ts, hold=True)
    decisions = []
    router = make_router(
        clock=clock, policy=FirstElementPolicy(), pool=pool, on_decision=decisions.append
    )
    d = router.get_target(client_id="alice")
    assert not d.called
    clock.advance(0.25)
    pool.release()
    assert result_of(d).target is ts[0]
    (decision,) = decisions
    assert isinstance(decision, RoutingDecision)
    assert decision.started_at == 1000 and decision.decided_at == 1000.25
    assert decision.elapsed == pytest.approx(0.25)
    assert decision.router == "r1"


def test_pool_quorum_timeout_empty_list_is_unavailable():
    pool = FakePool(targets(), hold=True)
    router = make_router(policy=FirstElementPolicy(), pool=pool)
    d = router.get_target(client_id="alice")
    pool.release([])
    assert result_of(d) == REFUSED_UNAVAILABLE


def test_decision_record_fields():
    decisions = []
    router = make_router(
        key_resolver=KeyResolver(KeyType.USER_NAME, "(?<=^t_).*"),
        policy=FirstElementPolicy(),
        pool=FakePool(targets()),
        cache=RouterCache("r1"),
        on_decision=decisions.append,
    )
    result_of(router.get_target(username="t_acme"))
    result_of(router.get_target(username="t_acme"))
    first, second = decisions
    assert (first.key_raw, first.key, first.cache_hit) == ("acme", "acme", False)
    assert (second.reason, second.cache_hit) == (DecisionReason.CACHE, True)
    with pytest.raises(AttributeError):
        first.key = "other"  # frozen


def test_a_failing_observer_is_logged_not_raised():
    events = []
    globalLogPublisher.addObserver(events.append)
    try:

        def broken(decision):
            raise RuntimeError("observer bug")

        router = make_router(local_target_filter=".*", on_decision=broken)
        assert result_of(router.get_target(client_id="x")).ok
    finally:
        globalLogPublisher.removeObserver(events.append)
    assert any("observer failed" in e.get("log_format", "") for e in events)


def test_policy_errors_fail_the_deferred_not_the_caller():
    class Broken(Policy):
        name = "BROKEN"

        def select(self, targets, key):
            raise RuntimeError("bug")

    router = make_router(policy=Broken(), pool=FakePool(targets()))
    d = router.get_target(client_id="alice")
    with pytest.raises(RuntimeError, match="bug"):
        result_of(d)

    class BrokenTransform(Broken):
        def transform_key(self, key):
            raise RuntimeError("transform bug")

    router = make_router(policy=BrokenTransform(), pool=FakePool(targets()))
    d = router.get_target(client_id="alice")
    with pytest.raises(RuntimeError, match="transform bug"):
        result_of(d)


def test_default_local_target():
    router = ConnectionRouter(
        "r", key_resolver=KeyResolver(), clock=Clock(), local_target_filter=".*"
    )
    target = result_of(router.get_target(source_address="10.0.0.1:1")).target
    assert target.local and target.ready and target.name == "local"
