"""Pools of targets and the monitors that keep their readiness current.

Artemis's ``core/server/routing/pools`` and ``targets/TargetMonitor``, on a
Twisted clock instead of a scheduled executor:

* :class:`TargetMonitor` -- one per target.  Every ``check-period`` it runs the
  pool's probes on the target, one after the other, and sets ``target.ready``
  (reachable, active, every probe passed), ``target.node_id`` (a static target
  learns it on connect) and ``target.connection_count``.  Any failure --
  errback, :data:`~junction.gateway.probe.PROBE_TIMEOUT`, an exception, an
  answer that is not a :class:`~junction.gateway.probe.ProbeResult` -- makes
  the target not ready.  A check still running when the next period comes is
  not doubled: that tick is skipped.
* :class:`AbstractPool` -- the targets (the local target first, then the rest
  in the order they were added), their monitors, the quorum, and the
  node-id-keyed *entries* through which the discovery and cluster pools will
  feed it (an update is a remove then an add; added targets start not ready).
* :class:`StaticPool` -- the ``static-connectors`` pool: a fixed list of
  targets whose node ids are learnt from the probe.

``get_targets()`` answers with a Deferred: at once when ``quorum-size``
targets are ready, else after polling every :data:`QUORUM_POLL_INTERVAL` until
``quorum-timeout``, with the ready targets as soon as there are enough or with
``[]`` at the deadline (which the router turns into REFUSED_UNAVAILABLE).
``get_ready_target(node_id)`` (the cache path) answers at once and ignores the
quorum.

Everything runs on the clock given as ``clock`` (the global reactor when None,
imported only then), and ``stop()`` leaves no delayed call behind.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from twisted.internet import defer
from twisted.python.failure import Failure

from junction.gateway.probe import PROBE_TIMEOUT, ProbeResult, TargetProbe, describe_failure
from junction.routing.targets import Target

__all__ = [
    "PROBE_TIMEOUT",
    "QUORUM_POLL_INTERVAL",
    "DEFAULT_CHECK_PERIOD_MS",
    "DEFAULT_QUORUM_SIZE",
    "DEFAULT_QUORUM_TIMEOUT_MS",
    "ProbeResult",
    "TargetProbe",
    "TargetMonitor",
    "AbstractPool",
    "StaticPool",
    "DynamicPool",
]

log = logging.getLogger("junction.gateway.pool")

#: Seconds between two looks at the ready targets while ``get_targets()``
#: waits for the quorum (Artemis parks 100 ms between looks).
QUORUM_POLL_INTERVAL = 0.1

#: ``<check-period>`` default, ms (Artemis ``PoolConfiguration``).
DEFAULT_CHECK_PERIOD_MS = 5000
#: ``<quorum-size>`` default.
DEFAULT_QUORUM_SIZE = 1
#: ``<quorum-timeout>`` default, ms.
DEFAULT_QUORUM_TIMEOUT_MS = 3000


def _clock_or_reactor(clock):
    if clock is not None:
        return clock
    from twisted.internet import reactor

    return reactor


def _check_check_period(value) -> None:
    if not value > 0:
        raise ValueError(f"check-period must be greater than 0 ms, got {value!r}")


def _check_quorum_size(value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"quorum-size must be an integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"quorum-size must be greater than 0, got {value!r}")


def _check_quorum_timeout(value) -> None:
    if not value >= 0:
        raise ValueError(f"quorum-timeout must be 0 ms or more, got {value!r}")


class TargetMonitor:
    """Keeps one target's ``ready``, ``node_id`` and ``connection_count`` current.

    ``probes`` is read afresh at each check (the pool passes its own list, so a
    probe a policy adds later is run from the next check on).  The first probe
    is the *readiness* probe: its ``active`` is Artemis's ``checkReadiness()``,
    which a local target always passes; the others are extra probes (a result
    with ``active=False`` is a failed probe, for every target).  Probes run in
    order and the first failure ends the check, as in Artemis.

    The first check runs on the clock's next turn after :meth:`start`, then
    one every ``check_period_ms``.  :meth:`stop` cancels the timer and the call
    in flight, marks the target not ready and releases it from every probe.
    """

    def __init__(
        self, target: Target, probes, *, check_period_ms, clock=None, probe_timeout=PROBE_TIMEOUT
    ):
        _check_check_period(check_period_ms)
        self.target = target
        self.check_period_ms = check_period_ms
        self.probe_timeout = probe_timeout
        self._probes = probes
        self._clock = _clock_or_reactor(clock)
        #: a target that came without a node id (static) learns it from the
        #: probe, and follows it if another core answers there later; one that
        #: came with it (discovery, cluster, local) is not ready on a mismatch
        self._learns_node_id = target.node_id is None
        self._running = False
        self._tick_call = None
        #: the probe call in flight, and the generation of the check it belongs
        #: to (so that answers from a check the monitor gave up on are ignored)
        self._pending: defer.Deferred | None = None
        self._generation = 0
        self._checking = False
        self._problem: str | None = None
        #: the protocol the readiness probe's last answer came over (None: none yet,
        #: or the local target, answered in-process); kept while the target is down
        self.protocol: str | None = None
        #: what the readiness probe's last answer says about a ready target (another
        #: broker: node id and count stand in), None when there is nothing to say
        self.note: str | None = None
        #: checks completed (ready or not), for tests and the management API
        self.checks = 0

    @property
    def running(self) -> bool:
        return self._running

    @property
    def checking(self) -> bool:
        """A check is in flight."""
        return self._checking

    @property
    def problem(self) -> str | None:
        """Why the target is not ready after the last check (None when it is)."""
        return self._problem

    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self.target.ready = False
        self._tick_call = self._clock.callLater(0, self._tick)

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self._generation += 1
        if self._tick_call is not None and self._tick_call.active():
            self._tick_call.cancel()
        self._tick_call = None
        pending, self._pending = self._pending, None
        self._checking = False
        if pending is not None:
            pending.cancel()
        self.target.ready = False
        for probe in list(self._probes):
            try:
                probe.release(self.target)
            except Exception:
                log.exception("releasing %r from %r failed", self.target, probe)

    def mark_not_ready(self, reason: str = "disconnected") -> None:
        """The target is known to be gone (its connection dropped) before the next check says so."""
        self._set_ready(False, reason)

    # -- the check loop --------------------------------------------------------------

    def _tick(self) -> None:
        self._tick_call = self._clock.callLater(self.check_period_ms / 1000.0, self._tick)
        if self._checking:
            log.debug("%r: previous check still running, skipping this period", self.target)
            return
        self._checking = True
        self._generation += 1
        self._run_probe(self._generation, list(self._probes), 0, [])

    def _run_probe(self, generation: int, probes: list, index: int, results: list) -> None:
        if index >= len(probes):
            self._finish(generation, results, None)
            return
        d = defer.maybeDeferred(probes[index].check, self.target)
        d.addTimeout(self.probe_timeout, self._clock)
        self._pending = d
        d.addCallbacks(
            self._probed,
            self._probe_failed,
            callbackArgs=(generation, probes, index, results),
            errbackArgs=(generation, results),
        )
        d.addErrback(self._bug, generation)

    def _probed(self, result, generation, probes, index, results) -> None:
        if generation != self._generation:
            return
        self._pending = None
        try:
            if not isinstance(result, ProbeResult):
                raise TypeError(f"probe {probes[index]!r} answered {result!r}, not a ProbeResult")
            results.append(result)
            passed = result.active or (index == 0 and self.target.local)
            if not passed:
                reason = "not active" if index == 0 else f"probe {probes[index]!r} did not pass"
                self._finish(generation, results, reason)
                return
        except Exception as e:
            log.exception("checking %r", self.target)
            self._finish(generation, results, f"check failed: {e}")
            return
        self._run_probe(generation, probes, index + 1, results)

    def _probe_failed(self, failure: Failure, generation, results) -> None:
        if generation != self._generation:
            return
        self._pending = None
        self._finish(generation, results, describe_failure(failure), failure)

    def _bug(self, failure: Failure, generation) -> None:
        """An error in the monitor's own callbacks: logged, and the target is not ready."""
        log.error("monitoring %r: %s", self.target, failure.getTraceback())
        if generation == self._generation and self._running:
            self._pending = None
            self._checking = False
            self._set_ready(False, f"check failed: {failure.getErrorMessage()}")

    def _finish(
        self, generation, results: list, problem: str | None, failure: Failure | None = None
    ) -> None:
        if generation != self._generation:
            return
        self._checking = False
        self.checks += 1
        try:
            node_id = next((r.node_id for r in results if r.node_id is not None), None)
            if node_id is not None and node_id != self.target.node_id:
                if self.target.node_id is None or self._learns_node_id:
                    if self.target.node_id is not None:
                        log.warning("%r: node id changed to %s", self.target, node_id)
                    self.target.node_id = node_id
                elif problem is None:
                    problem = f"answered as node {node_id}, expected {self.target.node_id}"
            if results:
                self.protocol = results[0].protocol or self.protocol
                self.note = results[0].note
            else:
                self.note = None
            if failure is not None:
                self.target.connection_count = None
            else:
                self.target.connection_count = next(
                    (r.connection_count for r in results if r.connection_count is not None), None
                )
        except Exception as e:  # a bug here must not leave the target ready
            log.exception("checking %r", self.target)
            problem = problem or f"check failed: {e}"
        self._set_ready(problem is None, problem)

    def _set_ready(self, ready: bool, problem: str | None) -> None:
        was = self.target.ready
        self.target.ready = ready
        self._problem = None if ready else problem
        if ready and not was:
            log.info("%r is ready", self.target)
        elif was and not ready:
            log.warning("%r is not ready: %s", self.target, problem)
        elif not ready:
            log.debug("%r still not ready: %s", self.target, problem)

    def __repr__(self) -> str:
        return f"<TargetMonitor {self.target!r} running={self._running}>"


class _QuorumWait:
    """One ``get_targets()`` call waiting for the quorum: a bounded poll loop.

    Polls at ``QUORUM_POLL_INTERVAL`` steps from the call, plus a last one at
    the deadline; fires with the ready targets as soon as a poll finds enough,
    with ``[]`` after the last.  Cancelling its Deferred cancels the timer.
    """

    def __init__(self, pool: AbstractPool, timeout_s: float):
        self.pool = pool
        self.clock = pool.clock
        self.start = self.clock.seconds()
        self.timeout_s = timeout_s
        self.polls = 0
        self.final = False
        self.call = None
        self.deferred = defer.Deferred(self._cancelled)
        self._schedule()

    def _schedule(self) -> None:
        self.polls += 1
        offset = self.polls * QUORUM_POLL_INTERVAL
        if offset >= self.timeout_s - 1e-9:
            offset, self.final = self.timeout_s, True
        delay = max(0.0, self.start + offset - self.clock.seconds())
        self.call = self.clock.callLater(delay, self._poll)

    def _poll(self) -> None:
        self.call = None
        ready = self.pool._ready_targets()
        if len(ready) >= self.pool.quorum_size:
            self._fire(ready)
        elif self.final:
            log.info(
                "quorum of %d not reached after %g s: %d ready",
                self.pool.quorum_size,
                self.timeout_s,
                len(ready),
            )
            self._fire([])
        else:
            self._schedule()

    def abort(self) -> None:
        """The pool stopped: nothing is ready any more."""
        self._stop_timer()
        self._fire([])

    def _fire(self, targets) -> None:
        self.pool._waits.discard(self)
        if not self.deferred.called:
            self.deferred.callback(targets)

    def _stop_timer(self) -> None:
        if self.call is not None and self.call.active():
            self.call.cancel()
        self.call = None

    def _cancelled(self, _d) -> None:
        self._stop_timer()
        self.pool._waits.discard(self)


class AbstractPool:
    """What the static, discovery and cluster pools share.

    Targets are kept in pool order: the local target (if any) first, then the
    others in the order they were added.  A target is one
    :class:`~junction.routing.targets.Target` object (identity is the object);
    each has a :class:`TargetMonitor` running while the pool is started.

    Entries (:meth:`add_entry`, :meth:`remove_entry`, :meth:`update_entry`,
    :meth:`sync_entries`) are targets keyed by a node id known in advance, as
    discovery broadcasts and cluster topology give them.  An update is a remove
    then an add, so the new target starts not ready, as in Artemis.
    """

    def __init__(
        self,
        *,
        probe: TargetProbe,
        check_period_ms=DEFAULT_CHECK_PERIOD_MS,
        quorum_size: int = DEFAULT_QUORUM_SIZE,
        quorum_timeout_ms=DEFAULT_QUORUM_TIMEOUT_MS,
        local_target: Target | None = None,
        clock=None,
        probe_timeout: float = PROBE_TIMEOUT,
    ):
        _check_check_period(check_period_ms)
        _check_quorum_size(quorum_size)
        _check_quorum_timeout(quorum_timeout_ms)
        if probe is None:
            raise ValueError("a pool needs a probe")
        if local_target is not None and not (
            isinstance(local_target, Target) and local_target.local
        ):
            raise ValueError(f"local_target must be a Target with local=True, got {local_target!r}")
        self.check_period_ms = check_period_ms
        self.probe_timeout = probe_timeout
        self._quorum_size = quorum_size
        self._quorum_timeout_ms = quorum_timeout_ms
        self.clock = _clock_or_reactor(clock)
        #: the readiness probe first, then extra probes (add_probe)
        self._probes: list = [probe]
        self._monitors: dict[Target, TargetMonitor] = {}
        #: pool order: local target first
        self._order: list[Target] = []
        self._entries: dict[str, Target] = {}
        self._waits: set[_QuorumWait] = set()
        self._started = False
        self.local_target = local_target
        if local_target is not None:
            self.add_target(local_target)

    # -- configuration ----------------------------------------------------------------

    @property
    def quorum_size(self) -> int:
        return self._quorum_size

    @quorum_size.setter
    def quorum_size(self, value: int) -> None:
        _check_quorum_size(value)
        self._quorum_size = value

    @property
    def quorum_timeout_ms(self):
        return self._quorum_timeout_ms

    @quorum_timeout_ms.setter
    def quorum_timeout_ms(self, value) -> None:
        _check_quorum_timeout(value)
        self._quorum_timeout_ms = value

    @property
    def probes(self) -> tuple:
        """The readiness probe, then the extra probes."""
        return tuple(self._probes)

    def add_probe(self, probe: TargetProbe) -> None:
        """Run ``probe`` too on every target from the next check (a policy's probe)."""
        if probe not in self._probes:
            self._probes.append(probe)

    def remove_probe(self, probe: TargetProbe) -> bool:
        """Stop running an extra probe (the readiness probe stays)."""
        if probe is self._probes[0] or probe not in self._probes:
            return False
        self._probes.remove(probe)
        for target in self._order:
            try:
                probe.release(target)
            except Exception:
                log.exception("releasing %r from %r failed", target, probe)
        return True

    # -- lifecycle --------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Start monitoring every target (the first checks run on the clock's next turn)."""
        if self._started:
            return
        self._started = True
        for target in self._order:
            self._monitors[target].start()

    def stop(self) -> None:
        """Stop every monitor (targets become not ready) and answer pending waits with ``[]``.

        The targets stay in the pool, so :meth:`start` can follow.
        """
        if not self._started:
            return
        self._started = False
        for target in self._order:
            self._monitors[target].stop()
        for wait in list(self._waits):
            wait.abort()

    # -- membership -------------------------------------------------------------------

    def add_target(self, target: Target) -> bool:
        """Add a target (not ready until its monitor says so); False if already there."""
        if target in self._monitors:
            return False
        target.ready = False
        monitor = TargetMonitor(
            target,
            self._probes,
            check_period_ms=self.check_period_ms,
            clock=self.clock,
            probe_timeout=self.probe_timeout,
        )
        self._monitors[target] = monitor
        if target.local:
            self._order.insert(sum(1 for t in self._order if t.local), target)
        else:
            self._order.append(target)
        if self._started:
            monitor.start()
        return True

    def remove_target(self, target: Target) -> bool:
        """Remove a target and stop its monitor; False if it was not in the pool."""
        monitor = self._monitors.pop(target, None)
        if monitor is None:
            return False
        self._order.remove(target)
        monitor.stop()
        target.ready = False
        for node_id, entry in list(self._entries.items()):
            if entry is target:
                del self._entries[node_id]
        if target is self.local_target:
            self.local_target = None
        return True

    def add_entry(self, node_id: str, connector) -> Target:
        """A target known by node id (a discovery entry, a cluster member).

        The same node id with another connector is an update (remove, add).
        """
        existing = self._entries.get(node_id)
        if existing is not None:
            if existing.connector == connector:
                return existing
            return self.update_entry(node_id, node_id, connector)
        target = Target(connector=connector, node_id=node_id)
        self._entries[node_id] = target
        self.add_target(target)
        return target

    def remove_entry(self, node_id: str) -> bool:
        target = self._entries.get(node_id)
        if target is None:
            return False
        return self.remove_target(target)

    def update_entry(self, old_node_id: str, node_id: str, connector) -> Target:
        """Artemis's ``entryUpdated``: remove the old entry, then add the new one (not ready)."""
        self.remove_entry(old_node_id)
        target = Target(connector=connector, node_id=node_id)
        self.remove_entry(node_id)
        self._entries[node_id] = target
        self.add_target(target)
        return target

    def sync_entries(self, entries: Mapping[str, object]) -> None:
        """Make the entries equal to ``{node_id: connector}``: removes, adds and updates, diffed by node id."""
        for node_id in [n for n in self._entries if n not in entries]:
            self.remove_entry(node_id)
        for node_id, connector in entries.items():
            self.add_entry(node_id, connector)

    @property
    def entries(self) -> dict[str, Target]:
        return dict(self._entries)

    # -- queries ----------------------------------------------------------------------

    @property
    def all_targets(self) -> list[Target]:
        """Every target, ready or not, in pool order."""
        return list(self._order)

    @property
    def ready_count(self) -> int:
        return sum(1 for t in self._order if t.ready)

    def _ready_targets(self) -> list[Target]:
        return [t for t in self._order if t.ready]

    def monitor_of(self, target: Target) -> TargetMonitor | None:
        return self._monitors.get(target)

    def is_target_ready(self, target: Target) -> bool:
        return target in self._monitors and target.ready

    def get_target(self, node_id: str) -> Target | None:
        """The target with this node id, ready or not (Artemis ``getTarget``)."""
        for target in self._order:
            if target.node_id == node_id:
                return target
        return None

    def get_ready_target(self, node_id: str) -> Target | None:
        """The ready target with this node id, at once and without the quorum (the cache path)."""
        for target in self._order:
            if target.ready and target.node_id == node_id:
                return target
        return None

    def get_targets(self) -> defer.Deferred:
        """A Deferred firing with the ready targets in pool order, or ``[]`` without a quorum.

        Fewer than ``quorum_size`` ready: polls every :data:`QUORUM_POLL_INTERVAL`
        until ``quorum_timeout_ms`` (Artemis does not wait when it is 0, nor
        does a stopped pool, which has nothing ready).  Cancellable.
        """
        ready = self._ready_targets()
        if len(ready) >= self._quorum_size:
            return defer.succeed(ready)
        if not self._started or self._quorum_timeout_ms <= 0:
            return defer.succeed([])
        wait = _QuorumWait(self, self._quorum_timeout_ms / 1000.0)
        self._waits.add(wait)
        return wait.deferred

    @property
    def pending_waits(self) -> int:
        """``get_targets()`` calls still waiting for the quorum."""
        return len(self._waits)

    def status(self) -> list[dict]:
        """One dict per target, in pool order, for the management API.

        ``problem``: why the target is not ready (None when it is); ``probe``:
        the protocol its readiness probe last got an answer over; ``note``:
        what that answer says about a ready target that is not a Junction
        core (its node id stands in, its connection count is unknown).
        """
        out = []
        for target in self._order:
            monitor = self._monitors[target]
            out.append(
                {
                    "name": target.name,
                    "node_id": target.node_id,
                    "ready": target.ready,
                    "connection_count": target.connection_count,
                    "local": target.local,
                    "problem": monitor.problem,
                    "probe": monitor.protocol,
                    "note": monitor.note if target.ready else None,
                }
            )
        return out


class StaticPool(AbstractPool):
    """The ``<static-connectors>`` pool: a fixed list of targets, node ids learnt on connect.

    ``targets`` are :class:`~junction.routing.targets.Target` objects or
    connectors (each wrapped in a new Target).  With ``local_target`` (the
    embedded broker core, ``local-target-enabled``) it comes first.
    """

    def __init__(
        self,
        targets: Iterable,
        *,
        probe: TargetProbe,
        check_period_ms=DEFAULT_CHECK_PERIOD_MS,
        quorum_size: int = DEFAULT_QUORUM_SIZE,
        quorum_timeout_ms=DEFAULT_QUORUM_TIMEOUT_MS,
        local_target: Target | None = None,
        clock=None,
        probe_timeout: float = PROBE_TIMEOUT,
    ):
        super().__init__(
            probe=probe,
            check_period_ms=check_period_ms,
            quorum_size=quorum_size,
            quorum_timeout_ms=quorum_timeout_ms,
            local_target=local_target,
            clock=clock,
            probe_timeout=probe_timeout,
        )
        for item in targets:
            self.add_target(item if isinstance(item, Target) else Target(connector=item))


class DynamicPool(AbstractPool):
    """The ``<discovery-group-ref>`` and ``<cluster-connection>`` pools: targets come and go.

    The node feeds it (:meth:`sync_entries`, node id -> connector) from what a
    discovery group hears or from the members a cluster connection is linked
    to; each new target starts not ready and its monitor probes it as a static
    pool's would.  ``source`` says where the targets come from (status, logs).
    """

    def __init__(self, *, source: str, **kwargs):
        super().__init__(**kwargs)
        self.source = source

