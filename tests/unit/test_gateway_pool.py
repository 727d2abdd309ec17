"""Pools, target monitors and the probe contract, on a Clock (no sockets, no sleeps).

The acceptance cases are Artemis's ``StaticPoolTest`` / ``DiscoveryPoolTest``
(via ``PoolTestBase``), see ``reference/artemis-routing.md`` section 6.  In
Artemis a ``MockTarget`` is made connectable and ready and a ``MockTargetProbe``
is checked or not; here :class:`FakeProbe` plays the target's side (connect,
``broker.Active``, ``broker.NodeID``, connection count) and
:class:`FakeExtraProbe` the extra probe.  ``Wait.assertEquals(..., CHECK_TIMEOUT)``
becomes advancing the Clock by check periods.

:class:`TargetProbeContract` is what every probe must do; the fake runs it
here, and the real probe will run it too.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from junction.config.model import Connector
from junction.gateway.pool import (
    DEFAULT_CHECK_PERIOD_MS,
    DEFAULT_QUORUM_SIZE,
    DEFAULT_QUORUM_TIMEOUT_MS,
    PROBE_TIMEOUT,
    QUORUM_POLL_INTERVAL,
    AbstractPool,
    ProbeResult,
    StaticPool,
    TargetMonitor,
)
from junction.gateway.probe import TargetProbe
from junction.routing.targets import Target
from tests.unit.gateway_fixtures import FakeCore, FakeProbe  # noqa: F401 - FakeCore used by tests

MULTIPLE_TARGETS = 10
CHECK_PERIOD = 100  # ms, as PoolTestBase
CHECK_PERIOD_S = CHECK_PERIOD / 1000.0
CHECK_TIMEOUT_S = 10 * CHECK_PERIOD_S


# -- fakes: tests/unit/gateway_fixtures.py (FakeCore, FakeProbe) ----------------------


class FakeExtraProbe:
    """Artemis's ``MockTargetProbe``: passes when ``checked``; counts executions."""

    def __init__(self, checked=False, connection_count=None):
        self.checked = checked
        self.connection_count = connection_count
        self.executions: Counter = Counter()
        self.released: list[Target] = []

    def check(self, target):
        self.executions[target] += 1
        return defer.succeed(
            ProbeResult(active=self.checked, connection_count=self.connection_count)
        )

    def release(self, target) -> None:
        self.released.append(target)

    def clear(self) -> None:
        self.executions.clear()


# -- helpers ----------------------------------------------------------------------------


def connector(i: int) -> Connector:
    return Connector(name=f"node{i}", scheme="tcp", host="127.0.0.1", port=61616 + i)


def make_targets(n: int) -> list[Target]:
    return [Target(connector=connector(i)) for i in range(n)]


def outcome(d: defer.Deferred):
    """The result or Failure a Deferred has already fired with (consumed)."""
    out = []
    d.addBoth(out.append)
    assert out, "the Deferred has not fired"
    return out[0]


def result_of(d: defer.Deferred):
    r = outcome(d)
    if isinstance(r, Failure):
        r.raiseException()
    return r


def advance(clock: Clock, seconds: float, step: float = 0.01) -> None:
    """Advance in small steps, so every periodic call runs at its own time."""
    end = clock.seconds() + seconds
    while clock.seconds() + step < end:
        clock.advance(step)
    clock.advance(max(0.0, end - clock.seconds()))


def targets_after_wait(pool: AbstractPool, clock: Clock) -> list[Target]:
    """``get_targets()``, letting the Clock run through a quorum wait if there is one."""
    d = pool.get_targets()
    waited = 0.0
    while not d.called and waited <= pool.quorum_timeout_ms / 1000.0 + 1:
        clock.advance(0.01)
        waited += 0.01
    return result_of(d)


def immediate(pool: AbstractPool) -> list[Target]:
    """``get_targets()`` that must answer without waiting."""
    return result_of(pool.get_targets())


# -- the probe contract -----------------------------------------------------------------


class TargetProbeContract:
    """What every :class:`~junction.gateway.probe.TargetProbe` must do.

    A subclass provides the probe and the world around it:

    ``make_probe()``
        the probe under test
    ``serving_target(node_id, connection_count)``
        a target whose core is up and active, with that node id and that many
        client connections (the real harness may count the probe's own
        connection: ``expected_count(n)`` says what the probe should report)
    ``passive_target(node_id)``
        a core that answers but is not active (a passive backup)
    ``unreachable_target()``
        nothing listening there
    ``hanging_target()``
        accepts but never answers, or None to skip
    ``local_target(node_id)``
        the embedded broker core as a local target, or None to skip
    ``resolve(d)``
        drive whatever must run until ``d`` fires; its result or Failure
    ``leftovers()``
        delayed calls or connections the probe left behind (must be empty
        after release and cancel)
    """

    def make_probe(self):
        raise NotImplementedError

    def serving_target(self, node_id: str, connection_count: int) -> Target:
        raise NotImplementedError

    def passive_target(self, node_id: str) -> Target:
        raise NotImplementedError

    def unreachable_target(self) -> Target:
        raise NotImplementedError

    def hanging_target(self) -> Target | None:
        return None

    def local_target(self, node_id: str) -> Target | None:
        return None

    def expected_count(self, n: int) -> int:
        return n

    def resolve(self, d: defer.Deferred):
        return outcome(d)

    def leftovers(self) -> list:
        return []

    def setup_method(self, method=None):
        self.probe = self.make_probe()

    # the contract

    def test_is_a_target_probe(self):
        assert isinstance(self.probe, TargetProbe)

    def test_check_returns_a_deferred(self):
        d = self.probe.check(self.serving_target("node-a", 0))
        assert isinstance(d, defer.Deferred)
        self.resolve(d)

    def test_serving_target_is_active_with_its_node_id_and_count(self):
        target = self.serving_target("node-a", 3)
        result = self.resolve(self.probe.check(target))
        assert isinstance(result, ProbeResult)
        assert result.active is True
        assert result.node_id == "node-a"
        assert result.connection_count == self.expected_count(3)

    def test_probe_leaves_the_target_to_the_monitor(self):
        target = self.serving_target("node-a", 1)
        self.resolve(self.probe.check(target))
        assert target.node_id is None and target.ready is False and target.connection_count is None

    def test_passive_target_answers_not_active_instead_of_failing(self):
        result = self.resolve(self.probe.check(self.passive_target("node-b")))
        assert isinstance(result, ProbeResult)
        assert result.active is False
        assert result.node_id == "node-b"

    def test_unreachable_target_fails(self):
        result = self.resolve(self.probe.check(self.unreachable_target()))
        assert isinstance(result, Failure)

    def test_repeated_checks_answer_again(self):
        target = self.serving_target("node-a", 0)
        for _ in range(3):
            assert self.resolve(self.probe.check(target)).active is True

    def test_release_is_idempotent_and_the_next_check_reconnects(self):
        target = self.serving_target("node-a", 0)
        self.resolve(self.probe.check(target))
        self.probe.release(target)
        self.probe.release(target)
        assert self.leftovers() == []
        assert self.resolve(self.probe.check(target)).node_id == "node-a"
        self.probe.release(target)
        assert self.leftovers() == []

    def test_release_of_a_target_never_checked(self):
        self.probe.release(self.serving_target("node-a", 0))
        self.probe.release(self.unreachable_target())
        assert self.leftovers() == []

    def test_cancelling_a_hanging_check_fails_it_and_leaves_nothing(self):
        target = self.hanging_target()
        if target is None:
            pytest.skip("no hanging target in this harness")
        d = self.probe.check(target)
        assert not d.called
        d.cancel()
        result = outcome(d)
        assert isinstance(result, Failure)
        self.probe.release(target)
        assert self.leftovers() == []

    def test_local_target(self):
        target = self.local_target("local-node")
        if target is None:
            pytest.skip("no local target in this harness")
        result = self.resolve(self.probe.check(target))
        assert result.node_id == "local-node"
        assert result.active is True


class TestFakeProbeContract(TargetProbeContract):
    def make_probe(self):
        return FakeProbe()

    def serving_target(self, node_id, connection_count):
        target = make_targets(1)[0]
        self.probe.cores[target] = FakeCore(
            node_id, connectable=True, active=True, connection_count=connection_count
        )
        return target

    def passive_target(self, node_id):
        target = make_targets(1)[0]
        self.probe.cores[target] = FakeCore(node_id, connectable=True, active=False)
        return target

    def unreachable_target(self):
        target = make_targets(1)[0]
        self.probe.cores[target] = FakeCore("nobody", connectable=False)
        return target

    def hanging_target(self):
        target = make_targets(1)[0]
        self.probe.cores[target] = FakeCore("node-h", connectable=True, active=True, hang=True)
        return target

    def local_target(self, node_id):
        target = Target(local=True, node_id=node_id)
        self.probe.cores[target] = FakeCore(node_id, connectable=True, active=True)
        return target

    def leftovers(self):
        return [d for d in self.probe.pending if not d.called] + sorted(
            self.probe.connected, key=id
        )


def test_probe_result_is_frozen_and_defaults_to_unknown():
    r = ProbeResult(active=True)
    assert r.node_id is None and r.connection_count is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.active = False  # type: ignore[misc]


def test_named_constants_are_artemis_s():
    assert PROBE_TIMEOUT == 3.0
    assert QUORUM_POLL_INTERVAL == 0.1
    assert (DEFAULT_CHECK_PERIOD_MS, DEFAULT_QUORUM_SIZE, DEFAULT_QUORUM_TIMEOUT_MS) == (
        5000,
        1,
        3000,
    )


# -- PoolTestBase / StaticPoolTest ------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, MULTIPLE_TARGETS])
def test_pool_targets_ready_only_when_connected_active_and_probe_passes(n):
    """PoolTestBase.testPoolTargets, on a static pool."""
    clock = Clock()
    targets = make_targets(n)
    probe = FakeProbe()  # neither connectable nor active
    extra = FakeExtraProbe(checked=False)
    pool = StaticPool(
        targets, probe=probe, check_period_ms=CHECK_PERIOD, quorum_timeout_ms=0, clock=clock
    )
    pool.add_probe(extra)

    assert immediate(pool) == []
    # (Artemis adds static targets at start; a StaticPool holds them from construction)
    assert pool.all_targets == targets
    assert sum(probe.executions.values()) == 0

    pool.start()
    try:
        clock.advance(0)
        assert immediate(pool) == []
        assert len(pool.all_targets) == n
        for t in targets:
            assert not pool.is_target_ready(t)
            assert extra.executions[t] == 0
        if n == 0:
            return

        probe.set_all(targets, connectable=True)
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == []
        for t in targets:
            assert not pool.is_target_ready(t)
            assert extra.executions[t] == 0  # not active: the extra probe is not reached
            assert t.node_id is not None  # a static target learns its node id on connect

        probe.set_all(targets, active=True)
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == []
        for t in targets:
            assert not pool.is_target_ready(t)
            assert extra.executions[t] > 0

        extra.clear()
        extra.checked = True
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == targets
        for t in targets:
            assert pool.is_target_ready(t)
            assert extra.executions[t] > 0

        # disconnect: the monitor hears of it at once, and the next check agrees
        probe.set_all(targets, connectable=False)
        for t in targets:
            pool.monitor_of(t).mark_not_ready()
        assert immediate(pool) == []
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == []
        assert len(pool.all_targets) == n

        extra.clear()
        probe.set_all(targets, connectable=True)
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == targets
        for t in targets:
            assert pool.is_target_ready(t)
            assert extra.executions[t] > 0

        extra.clear()
        extra.checked = False
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == []
        for t in targets:
            assert not pool.is_target_ready(t)
            assert extra.executions[t] > 0
    finally:
        pool.stop()
    assert clock.getDelayedCalls() == []


def test_pool_quorum_with_multiple_targets():
    """PoolTestBase.testPoolQuorumWithMultipleTargets, with the quorum wait on the Clock."""
    clock = Clock()
    targets = make_targets(MULTIPLE_TARGETS)
    quorum_size = 2
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool(
        targets, probe=probe, check_period_ms=CHECK_PERIOD, quorum_size=quorum_size, clock=clock
    )

    assert immediate(pool) == []  # not started: nothing to wait for
    pool.start()
    try:
        clock.advance(0)
        assert immediate(pool) == targets
        assert len(immediate(pool)) == MULTIPLE_TARGETS

        probe.set_all(targets[: MULTIPLE_TARGETS - quorum_size + 1], active=False)
        advance(clock, CHECK_PERIOD_S)
        assert pool.ready_count == quorum_size - 1
        d = pool.get_targets()
        advance(clock, DEFAULT_QUORUM_TIMEOUT_MS / 1000.0 - 0.05)
        assert not d.called  # still waiting for the quorum
        advance(clock, 0.05)
        assert result_of(d) == []  # the quorum timeout passed: empty
        assert pool.pending_waits == 0

        probe.core(targets[0]).active = True
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == [targets[0], targets[-1]]
        assert len(immediate(pool)) == quorum_size

        pool.quorum_size = quorum_size + 1
        assert targets_after_wait(pool, clock) == []

        probe.core(targets[1]).active = True
        advance(clock, CHECK_PERIOD_S)
        assert immediate(pool) == [targets[0], targets[1], targets[-1]]
        assert len(immediate(pool)) == quorum_size + 1
    finally:
        pool.stop()
    assert clock.getDelayedCalls() == []


# -- DiscoveryPoolTest (entries) --------------------------------------------------------


class FakeDiscovery:
    """Artemis's ``MockDiscoveryService``: entries by node id, fed to the pool."""

    def __init__(self):
        self.entries: dict[str, Connector] = {}
        self._n = 0
        self.pool: AbstractPool | None = None

    def add_entry(self) -> str:
        self._n += 1
        node_id = f"discovered-{self._n}"
        self.entries[node_id] = connector(100 + self._n)
        if self.pool is not None:
            self.pool.add_entry(node_id, self.entries[node_id])
        return node_id

    def remove_entry(self, node_id: str) -> str:
        del self.entries[node_id]
        if self.pool is not None:
            self.pool.remove_entry(node_id)
        return node_id

    def attach(self, pool: AbstractPool) -> None:
        self.pool = pool
        pool.sync_entries(self.entries)


@pytest.mark.parametrize(
    "initial, adding, removing", [(5, 10, 10), (5, 10, 5), (0, 10, 10), (0, 10, 5)]
)
def test_pool_changing_entries(initial, adding, removing):
    """DiscoveryPoolTest.testPoolChangingEntries."""
    clock = Clock()
    probe = FakeProbe()
    extra = FakeExtraProbe(checked=True)
    discovery = FakeDiscovery()
    initial_ids = [discovery.add_entry() for _ in range(initial)]
    pool = StaticPool(
        [], probe=probe, check_period_ms=CHECK_PERIOD, quorum_timeout_ms=0, clock=clock
    )
    pool.add_probe(extra)
    pool.start()
    discovery.attach(pool)
    try:
        probe.set_all(pool.all_targets, connectable=True, active=True)
        advance(clock, CHECK_PERIOD_S)
        assert len(immediate(pool)) == initial
        assert len(pool.all_targets) == initial
        for node_id in initial_ids:
            assert pool.is_target_ready(pool.get_target(node_id))

        added_ids = [discovery.add_entry() for _ in range(adding)]
        assert len(immediate(pool)) == initial
        assert len(pool.all_targets) == initial + adding
        for node_id in initial_ids:
            assert pool.is_target_ready(pool.get_target(node_id))
            assert extra.executions[pool.get_target(node_id)] > 0
        for node_id in added_ids:  # runtime-added entries start not ready, unprobed
            assert not pool.is_target_ready(pool.get_target(node_id))
            assert extra.executions[pool.get_target(node_id)] == 0

        added_targets = [pool.get_target(n) for n in added_ids]
        probe.set_all(added_targets, connectable=True)
        advance(clock, CHECK_PERIOD_S)
        assert len(immediate(pool)) == initial
        for node_id in added_ids:
            assert not pool.is_target_ready(pool.get_target(node_id))
            assert extra.executions[pool.get_target(node_id)] == 0

        probe.set_all(added_targets, active=True)
        advance(clock, CHECK_PERIOD_S)
        assert len(immediate(pool)) == initial + adding
        for node_id in initial_ids + added_ids:
            assert pool.is_target_ready(pool.get_target(node_id))
            assert extra.executions[pool.get_target(node_id)] > 0

        removing_ids = [discovery.remove_entry(t.node_id) for t in pool.all_targets[:removing]]
        assert len(immediate(pool)) == initial + adding - removing
        assert len(pool.all_targets) == initial + adding - removing
        for node_id in initial_ids + added_ids:
            if node_id in removing_ids:
                assert pool.get_target(node_id) is None
                assert pool.get_ready_target(node_id) is None
            else:
                assert pool.is_target_ready(pool.get_target(node_id))
                assert pool.get_ready_target(node_id) is pool.get_target(node_id)
    finally:
        pool.stop()
    assert clock.getDelayedCalls() == []


def test_entry_update_is_remove_then_add_and_starts_not_ready():
    clock = Clock()
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    old = pool.add_entry("n1", connector(1))
    clock.advance(0)
    assert old.ready and pool.get_ready_target("n1") is old

    assert pool.add_entry("n1", connector(1)) is old  # nothing changed: kept
    new = pool.add_entry("n1", connector(2))  # same node, new connector: an update
    assert new is not old and new.connector == connector(2)
    assert not old.ready and not new.ready
    assert pool.all_targets == [new]
    assert pool.get_ready_target("n1") is None
    assert old in probe.released
    clock.advance(0)
    assert pool.get_ready_target("n1") is new

    replaced = pool.update_entry("n1", "n2", connector(3))
    assert (
        pool.get_target("n1") is None and pool.get_target("n2") is replaced and not replaced.ready
    )

    pool.sync_entries({"n2": connector(3), "n3": connector(4)})
    assert pool.get_target("n2") is replaced  # unchanged entries are kept
    assert [t.node_id for t in pool.all_targets] == ["n2", "n3"]
    pool.sync_entries({"n3": connector(4)})
    assert [t.node_id for t in pool.all_targets] == ["n3"]
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_runtime_added_target_starts_not_ready_and_removed_one_is_gone():
    clock = Clock()
    probe = FakeProbe(connectable=True, active=True)
    targets = make_targets(2)
    pool = StaticPool(targets, probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    clock.advance(0)
    assert immediate(pool) == targets

    extra_target = Target(connector=connector(9))
    extra_target.ready = True  # whatever it said before, the pool starts it not ready
    assert pool.add_target(extra_target) is True
    assert pool.add_target(extra_target) is False
    assert not extra_target.ready and probe.executions[extra_target] == 0
    assert immediate(pool) == targets
    clock.advance(0)
    assert immediate(pool) == targets + [extra_target]

    node_id = targets[0].node_id
    assert pool.get_ready_target(node_id) is targets[0]
    assert pool.remove_target(targets[0]) is True
    assert pool.remove_target(targets[0]) is False
    assert pool.get_ready_target(node_id) is None
    assert pool.get_target(node_id) is None
    assert not targets[0].ready
    assert targets[0] in probe.released
    advance(clock, 1)
    assert probe.executions[targets[0]] == 1  # its monitor stopped with it
    pool.stop()
    assert clock.getDelayedCalls() == []


# -- quorum wait ------------------------------------------------------------------------


def test_quorum_wait_returns_as_soon_as_enough_become_ready():
    clock = Clock()
    targets = make_targets(3)
    probe = FakeProbe(connectable=True, active=True)
    probe.set_all(targets[1:], active=False)
    pool = StaticPool(targets, probe=probe, check_period_ms=1000, quorum_size=2, clock=clock)
    pool.start()
    clock.advance(0)
    assert pool.ready_count == 1

    d = pool.get_targets()
    fired_at = []
    d.addCallback(lambda r: fired_at.append(clock.seconds()) or r)
    advance(clock, 0.5)
    assert not d.called
    probe.core(targets[2]).active = True
    advance(clock, 0.45)
    assert not d.called  # the next check is at t=1.0
    advance(clock, 0.05 + QUORUM_POLL_INTERVAL)  # that check makes it ready; the next poll sees it
    assert result_of(d) == [targets[0], targets[2]]
    assert 1.0 <= fired_at[0] <= 1.0 + QUORUM_POLL_INTERVAL + 1e-9
    assert clock.seconds() < DEFAULT_QUORUM_TIMEOUT_MS / 1000.0
    assert pool.pending_waits == 0
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_quorum_wait_polls_every_interval_until_the_deadline():
    clock = Clock()
    pool = StaticPool(
        make_targets(1),
        probe=FakeProbe(),
        check_period_ms=60_000,
        quorum_timeout_ms=250,
        clock=clock,
    )
    pool.start()
    clock.advance(0)
    d = pool.get_targets()
    polls = [c.getTime() for c in clock.getDelayedCalls() if c.getTime() < 60]
    assert polls == [pytest.approx(QUORUM_POLL_INTERVAL)]
    clock.advance(0.1)
    clock.advance(0.1)
    assert not d.called
    assert [c.getTime() for c in clock.getDelayedCalls() if c.getTime() < 60] == [
        pytest.approx(0.25)
    ]
    clock.advance(0.05)
    assert result_of(d) == []
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_quorum_timeout_zero_answers_at_once():
    clock = Clock()
    pool = StaticPool(make_targets(2), probe=FakeProbe(), quorum_timeout_ms=0, clock=clock)
    pool.start()
    clock.advance(0)
    assert immediate(pool) == []
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_get_ready_target_ignores_the_quorum():
    clock = Clock()
    targets = make_targets(3)
    probe = FakeProbe(connectable=True, active=True)
    probe.set_all(targets[1:], active=False)
    pool = StaticPool(targets, probe=probe, quorum_size=3, clock=clock)
    pool.start()
    clock.advance(0)
    assert pool.get_ready_target(targets[0].node_id) is targets[0]
    assert pool.get_ready_target(targets[1].node_id) is None  # known, not ready
    assert pool.get_target(targets[1].node_id) is targets[1]
    assert pool.get_ready_target("no-such-node") is None
    d = pool.get_targets()
    assert not d.called
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    assert pool.pending_waits == 0
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_cancelled_quorum_wait_leaves_no_delayed_call():
    clock = Clock()
    pool = StaticPool(make_targets(1), probe=FakeProbe(), clock=clock)
    pool.start()
    clock.advance(0)
    before = len(clock.getDelayedCalls())
    d = pool.get_targets()
    assert len(clock.getDelayedCalls()) == before + 1
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    assert len(clock.getDelayedCalls()) == before
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_stop_answers_pending_waits_with_nothing():
    clock = Clock()
    pool = StaticPool(make_targets(2), probe=FakeProbe(), clock=clock)
    pool.start()
    waits = [pool.get_targets(), pool.get_targets()]
    pool.stop()
    assert [result_of(d) for d in waits] == [[], []]
    assert clock.getDelayedCalls() == []


# -- monitor: scheduling, failures ------------------------------------------------------


def test_check_period_scheduling():
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([target], probe=probe, clock=clock)  # default check-period 5000 ms
    pool.start()
    assert probe.executions[target] == 0  # the first check runs on the clock's next turn
    clock.advance(0)
    assert probe.executions[target] == 1 and target.ready
    clock.advance(4.999)
    assert probe.executions[target] == 1
    clock.advance(0.001)
    assert probe.executions[target] == 2
    clock.advance(5)
    assert probe.executions[target] == 3
    pool.stop()
    clock.advance(60)
    assert probe.executions[target] == 3
    assert clock.getDelayedCalls() == []


def test_never_two_checks_in_flight_and_timeout_makes_not_ready():
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([target], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    clock.advance(0)
    assert target.ready
    probe.core(target).hang = True
    advance(clock, CHECK_PERIOD_S)
    assert probe.executions[target] == 2  # the hanging one
    advance(clock, PROBE_TIMEOUT - 0.05)
    assert probe.executions[target] == 2  # ticks while it hangs are skipped
    assert target.ready  # still the last answer
    assert pool.monitor_of(target).checking
    advance(clock, 0.05)
    assert not target.ready
    assert pool.status()[0]["problem"] == "probe timed out"
    assert probe.cancelled == [target]  # the probe's call was cancelled
    probe.core(target).hang = False
    advance(clock, CHECK_PERIOD_S)
    assert probe.executions[target] == 3 and target.ready
    pool.stop()
    assert clock.getDelayedCalls() == []


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"explode": True}, "probe failed: probe bug"),
        ({"connectable": False}, "probe failed"),
        ({"garbage": "yes"}, "check failed"),
        ({"active": False}, "not active"),
    ],
)
def test_probe_failures_make_not_ready(change, problem):
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True, connection_count=4)
    pool = StaticPool([target], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    clock.advance(0)
    assert target.ready and target.connection_count == 4
    probe.set_all([target], **change)
    advance(clock, CHECK_PERIOD_S)
    assert not target.ready
    assert pool.status()[0]["problem"].startswith(problem)
    assert targets_after_wait(pool, clock) == []
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_failed_check_forgets_the_connection_count_and_keeps_the_node_id():
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True, connection_count=7)
    pool = StaticPool([target], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    clock.advance(0)
    node_id = target.node_id
    assert node_id is not None and target.connection_count == 7
    probe.core(target).connectable = False
    advance(clock, CHECK_PERIOD_S)
    assert target.connection_count is None and target.node_id == node_id
    pool.stop()


def test_static_target_follows_a_new_node_id_but_an_entry_does_not():
    clock = Clock()
    static = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([static], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    entry = pool.add_entry("entry-node", connector(5))
    clock.advance(0)
    assert static.node_id == "node-1" and static.ready and entry.ready
    probe.core(static).node_id = "node-1-reinstalled"
    probe.core(entry).node_id = "impostor"
    advance(clock, CHECK_PERIOD_S)
    assert static.node_id == "node-1-reinstalled" and static.ready
    assert entry.node_id == "entry-node" and not entry.ready
    assert "impostor" in pool.monitor_of(entry).problem
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_extra_probe_supplies_the_connection_count_and_is_added_at_runtime():
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([target], probe=probe, check_period_ms=CHECK_PERIOD, clock=clock)
    pool.start()
    clock.advance(0)
    assert target.ready and target.connection_count is None
    counter = FakeExtraProbe(checked=True, connection_count=12)
    pool.add_probe(counter)
    assert pool.probes == (probe, counter)
    advance(clock, CHECK_PERIOD_S)
    assert target.connection_count == 12 and counter.executions[target] == 1
    assert pool.remove_probe(counter) is True
    assert pool.remove_probe(probe) is False  # the readiness probe stays
    assert counter.released == [target]
    advance(clock, CHECK_PERIOD_S)
    assert counter.executions[target] == 1 and target.connection_count is None
    pool.stop()


def test_stop_leaves_no_delayed_calls_even_mid_check_and_mid_wait():
    clock = Clock()
    targets = make_targets(3)
    probe = FakeProbe(connectable=True, active=True)
    probe.core(targets[0]).hang = True
    pool = StaticPool(
        targets, probe=probe, check_period_ms=CHECK_PERIOD, quorum_size=3, clock=clock
    )
    pool.start()
    clock.advance(0)
    d = pool.get_targets()
    assert not d.called and pool.monitor_of(targets[0]).checking
    pool.stop()
    assert clock.getDelayedCalls() == []
    assert result_of(d) == []
    assert all(not t.ready for t in targets)
    assert set(probe.released) == set(targets)
    assert probe.cancelled == [targets[0]] and probe.pending[0].called
    assert not pool.started
    # and it starts again
    probe.core(targets[0]).hang = False
    pool.start()
    clock.advance(0)
    assert immediate(pool) == targets
    pool.stop()
    pool.stop()  # idempotent
    assert clock.getDelayedCalls() == []


def test_start_is_idempotent():
    clock = Clock()
    target = make_targets(1)[0]
    probe = FakeProbe(connectable=True, active=True)
    pool = StaticPool([target], probe=probe, clock=clock)
    pool.start()
    pool.start()
    clock.advance(0)
    assert probe.executions[target] == 1
    pool.stop()
    assert clock.getDelayedCalls() == []


# -- local target -----------------------------------------------------------------------


def test_local_target_is_first_always_ready_but_still_probed():
    clock = Clock()
    local = Target(local=True, node_id="local-node")
    targets = make_targets(2)
    probe = FakeProbe(connectable=True, active=True)
    # a local target skips the readiness check: "not active" does not count
    probe.cores[local] = FakeCore("local-node", connectable=True, active=False)
    extra = FakeExtraProbe(checked=True, connection_count=2)
    pool = StaticPool(
        targets, probe=probe, check_period_ms=CHECK_PERIOD, local_target=local, clock=clock
    )
    pool.add_probe(extra)
    assert pool.all_targets == [local] + targets
    pool.start()
    clock.advance(0)
    assert immediate(pool) == [local] + targets
    assert probe.executions[local] == 1 and extra.executions[local] == 1
    assert local.node_id == "local-node" and local.connection_count == 2
    assert pool.get_ready_target("local-node") is local

    # later-added remote targets still come after the local one
    late = Target(connector=connector(7))
    pool.add_target(late)
    clock.advance(0)
    assert immediate(pool) == [local] + targets + [late]

    extra.checked = False  # its probes still count
    advance(clock, CHECK_PERIOD_S)
    assert not local.ready

    assert pool.status()[0] == {
        "name": "local",
        "node_id": "local-node",
        "ready": False,
        "connection_count": 2,
        "local": True,
        "problem": pool.monitor_of(local).problem,
        "probe": None,
        "note": None,
    }
    pool.stop()
    assert clock.getDelayedCalls() == []


def test_status_and_ready_count():
    clock = Clock()
    targets = make_targets(2)
    probe = FakeProbe(connectable=True, active=True, connection_count=5)
    probe.core(targets[0])
    probe.core(targets[1]).active = False
    pool = StaticPool(targets, probe=probe, clock=clock)
    assert pool.ready_count == 0
    pool.start()
    clock.advance(0)
    assert pool.ready_count == 1
    assert pool.status() == [
        {
            "name": "node0",
            "node_id": "node-1",
            "ready": True,
            "connection_count": 5,
            "local": False,
            "problem": None,
            "probe": None,
            "note": None,
        },
        {
            "name": "node1",
            "node_id": "node-2",
            "ready": False,
            "connection_count": 5,
            "local": False,
            "problem": "not active",
            "probe": None,
            "note": None,
        },
    ]
    pool.stop()


def test_connectors_are_wrapped_in_targets():
    pool = StaticPool([connector(1), connector(2)], probe=FakeProbe(), clock=Clock())
    assert [t.name for t in pool.all_targets] == ["node1", "node2"]
    assert all(t.node_id is None and not t.ready and not t.local for t in pool.all_targets)


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"check_period_ms": 0}, "check-period must be greater than 0"),
        ({"check_period_ms": -5}, "check-period must be greater than 0"),
        ({"quorum_size": 0}, "quorum-size must be greater than 0"),
        ({"quorum_size": -1}, "quorum-size must be greater than 0"),
        ({"quorum_size": 1.5}, "quorum-size must be an integer"),
        ({"quorum_timeout_ms": -1}, "quorum-timeout must be 0 ms or more"),
        ({"local_target": Target(connector=None)}, "local_target must be a Target with local=True"),
        ({"probe": None}, "a pool needs a probe"),
    ],
)
def test_validation(kwargs, message):
    args = {"probe": FakeProbe(), "clock": Clock(), **kwargs}
    with pytest.raises(ValueError, match=message):
        StaticPool([], **args)


def test_quorum_setters_validate():
    pool = StaticPool([], probe=FakeProbe(), clock=Clock(), quorum_timeout_ms=0)
    assert (pool.quorum_size, pool.quorum_timeout_ms, pool.check_period_ms) == (1, 0, 5000)
    with pytest.raises(ValueError, match="quorum-size"):
        pool.quorum_size = 0
    with pytest.raises(ValueError, match="quorum-timeout"):
        pool.quorum_timeout_ms = -1
    pool.quorum_size = 4
    pool.quorum_timeout_ms = 10
    assert (pool.quorum_size, pool.quorum_timeout_ms) == (4, 10)


def test_monitor_validates_check_period():
    with pytest.raises(ValueError, match="check-period"):
        TargetMonitor(make_targets(1)[0], [FakeProbe()], check_period_ms=0, clock=Clock())


def test_default_clock_is_the_global_reactor_imported_lazily():
    from twisted.internet import reactor

    pool = StaticPool([], probe=FakeProbe())
    assert pool.clock is reactor
