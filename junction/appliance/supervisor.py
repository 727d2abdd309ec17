"""The appliance supervisor: nodes as child processes, restarted when they die, stopped together.

``junction up`` runs a gateway and the broker cores behind it, each a
``junction run`` process of its own (a crash in one never takes the others
down, and each has its own journal lock and GIL).  The supervisor

* starts the children in order: broker cores first, then gateways, so a
  gateway's first readiness checks find its cores listening;
* restarts a child that exits on its own, after a delay that doubles with
  each quick failure (:data:`RESTART_DELAY_INITIAL` up to
  :data:`RESTART_DELAY_MAX`); a child that ran :data:`STABLE_AFTER` seconds
  starts again from the initial delay, so one crash a day is retried at once
  while a child that cannot start does not spin;
* stops gracefully: gateways first (no new connections are routed to a core
  that is going away), then the cores, each with SIGTERM (the node finishes
  its journal syncs) and SIGKILL after :data:`STOP_TIMEOUT`;
* writes each child's output to its own log file and hands complete lines to
  an observer (the live status table or the console), a partial line being
  held up to :data:`MAX_LINE_BYTES`.

Process spawning is injected (``spawn``, :meth:`twisted.internet.interfaces.IReactorProcess.spawnProcess`'s
signature) and every timer goes through the injected clock, so the restart
and stop sequences are tested on a :class:`~twisted.internet.task.Clock`.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from twisted.internet import defer, error
from twisted.internet.protocol import ProcessProtocol

__all__ = [
    "ChildSpec",
    "ChildState",
    "Child",
    "Supervisor",
    "RESTART_DELAY_INITIAL",
    "RESTART_DELAY_MAX",
    "RESTART_DELAY_FACTOR",
    "STABLE_AFTER",
    "STOP_TIMEOUT",
    "MAX_LINE_BYTES",
    "MAX_ERROR_CHARS",
]

log = logging.getLogger("junction.appliance")

#: seconds before the first restart of a child that exited
RESTART_DELAY_INITIAL = 0.5
#: each quick failure in a row multiplies the delay by this
RESTART_DELAY_FACTOR = 2.0
#: the longest delay between restarts, in seconds
RESTART_DELAY_MAX = 30.0
#: a child up this many seconds counts as healthy: its next restart is quick again
STABLE_AFTER = 10.0
#: seconds from SIGTERM to SIGKILL when stopping a child
STOP_TIMEOUT = 30.0
#: the longest line of child output held in memory; longer ones are cut
MAX_LINE_BYTES = 16 * 1024
#: the most of a child's last error line repeated in the "exited" event
MAX_ERROR_CHARS = 300


class ChildState(enum.Enum):
    STARTING = "starting"  # spawned, not yet known to be up (the observer decides "up")
    RUNNING = "running"
    BACKOFF = "restarting"  # exited; restarts after a delay
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ChildSpec:
    """One node the supervisor runs: its name, role and command line."""

    name: str
    #: "gateway" or "core": gateways start last and stop first
    role: str
    argv: tuple[str, ...]
    #: where the child's stdout and stderr go (appended)
    log_path: str
    cwd: str | None = None
    env: dict | None = None


@dataclass
class Child:
    """A supervised node and what the supervisor knows about it."""

    spec: ChildSpec
    state: ChildState = ChildState.STOPPED
    pid: int | None = None
    started_at: float | None = None
    #: how many times it was started again after exiting on its own
    restarts: int = 0
    #: quick failures in a row (reset after STABLE_AFTER seconds up)
    failures: int = 0
    #: how the last run ended, e.g. "exit 3" or "signal KILL"
    last_exit: str | None = None
    #: when the pending restart is due (clock time), while in BACKOFF
    restart_at: float | None = None
    #: the last ERROR (or CRITICAL) line the current run logged, said when it exits
    last_error: str | None = None
    _process: object = field(default=None, repr=False)
    _timer: object = field(default=None, repr=False)
    _killer: object = field(default=None, repr=False)
    _ended: list = field(default_factory=list, repr=False)
    _log_file: object = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def alive(self) -> bool:
        return self._process is not None


def describe_exit(reason) -> str:
    """``exit N`` or ``signal NAME`` from a processEnded reason."""
    value = getattr(reason, "value", reason)
    sig = getattr(value, "signal", None)
    if sig:
        try:
            return f"signal {signal.Signals(sig).name.removeprefix('SIG')}"
        except ValueError:
            return f"signal {sig}"
    code = getattr(value, "exitCode", None)
    return f"exit {code if code is not None else '?'}"


class _ChildProtocol(ProcessProtocol):
    """Feeds one child's output to the supervisor and reports its end."""

    def __init__(self, supervisor: Supervisor, child: Child):
        self.supervisor = supervisor
        self.child = child
        self._partial = b""

    def childDataReceived(self, fd: int, data: bytes) -> None:
        log_file = self.child._log_file
        if log_file is not None:
            log_file.write(data)
            log_file.flush()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE_BYTES:
            lines.append(self._partial[:MAX_LINE_BYTES] + b"...")
            self._partial = b""
        for line in lines:
            self.supervisor._output(self.child, line.decode("utf-8", "replace").rstrip("\r"))

    def processEnded(self, reason) -> None:
        if self._partial:
            self.supervisor._output(self.child, self._partial.decode("utf-8", "replace"))
            self._partial = b""
        self.supervisor._ended(self.child, reason)


class Supervisor:
    """Runs :class:`ChildSpec` children (see the module docstring).

    ``on_event(child, text)`` hears what happens to children (started,
    exited, restarting, stopped); ``on_output(child, line)`` gets each line a
    child writes.  Both default to logging.
    """

    def __init__(
        self,
        specs: list[ChildSpec],
        *,
        reactor=None,
        spawn: Callable | None = None,
        on_event: Callable[[Child, str], None] | None = None,
        on_output: Callable[[Child, str], None] | None = None,
    ):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.clock = reactor
        self._spawn = spawn if spawn is not None else reactor.spawnProcess
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"child names must be unique: {names}")
        # cores first, gateways last: the start order; stopping is the reverse
        self.children = [Child(s) for s in sorted(specs, key=lambda s: s.role == "gateway")]
        self.on_event = on_event or (lambda child, text: log.info("%s: %s", child.name, text))
        self.on_output = on_output or (lambda child, line: None)
        self.stopping = False

    def child(self, name: str) -> Child:
        for c in self.children:
            if c.name == name:
                return c
        raise KeyError(name)

    # -- starting -------------------------------------------------------------------------
    def start(self) -> None:
        """Start every child, cores first."""
        for child in self.children:
            self._start(child)

    def _start(self, child: Child) -> None:
        child._timer = None
        child.restart_at = None
        if self.stopping:
            return
        spec = child.spec
        if child._log_file is None:
            os.makedirs(os.path.dirname(os.path.abspath(spec.log_path)), exist_ok=True)
            child._log_file = open(spec.log_path, "ab")
        env = dict(os.environ if spec.env is None else spec.env)
        try:
            process = self._spawn(_ChildProtocol(self, child), spec.argv[0], list(spec.argv), env=env, path=spec.cwd)
        except OSError as exc:
            child.last_exit = f"could not start: {exc}"
            self.on_event(child, child.last_exit)
            self._schedule_restart(child)
            return
        child._process = process
        child.last_error = None
        child.pid = getattr(process, "pid", None)
        child.started_at = self.clock.seconds()
        child.state = ChildState.STARTING
        self.on_event(child, f"started, pid {child.pid}")

    def mark_running(self, child: Child) -> None:
        """The observer saw the child answer (its management API): it is up."""
        if child.state is ChildState.STARTING and child.alive:
            child.state = ChildState.RUNNING
            self.on_event(child, "up")

    # -- a child ends ---------------------------------------------------------------------
    def _ended(self, child: Child, reason) -> None:
        child._process = None
        child.pid = None
        child.last_exit = describe_exit(reason)
        if child._killer is not None and child._killer.active():
            child._killer.cancel()
        child._killer = None
        if self.stopping or child.state is ChildState.STOPPING:
            child.state = ChildState.STOPPED
            self.on_event(child, f"stopped ({child.last_exit})")
            self._close_log(child)
            waiters, child._ended = child._ended, []
            for d in waiters:
                d.callback(child)
            return
        why = f": {child.last_error}" if child.last_error else ""
        self.on_event(child, f"exited ({child.last_exit}){why}")
        self._schedule_restart(child)

    def _schedule_restart(self, child: Child) -> None:
        now = self.clock.seconds()
        if child.started_at is not None and now - child.started_at >= STABLE_AFTER:
            child.failures = 0
        child.failures += 1
        delay = min(RESTART_DELAY_MAX, RESTART_DELAY_INITIAL * RESTART_DELAY_FACTOR ** (child.failures - 1))
        child.state = ChildState.BACKOFF
        child.restart_at = now + delay
        self.on_event(child, f"restarting in {delay:g} s")
        child._timer = self.clock.callLater(delay, self._restart, child)

    def _restart(self, child: Child) -> None:
        child.restarts += 1
        self._start(child)

    # -- stopping -------------------------------------------------------------------------
    def stop(self) -> defer.Deferred:
        """Stop everything gracefully: gateways, then cores.  Fires when all have exited."""
        self.stopping = True
        gateways = [c for c in self.children if c.spec.role == "gateway"]
        cores = [c for c in self.children if c.spec.role != "gateway"]
        d = defer.DeferredList([self._stop(c) for c in gateways])
        d.addCallback(lambda _: defer.DeferredList([self._stop(c) for c in cores]))
        d.addCallback(lambda _: None)
        return d

    def _stop(self, child: Child) -> defer.Deferred:
        if child._timer is not None and child._timer.active():
            child._timer.cancel()
        child._timer = None
        child.restart_at = None
        if not child.alive:
            child.state = ChildState.STOPPED
            self._close_log(child)
            return defer.succeed(child)
        d = defer.Deferred()
        child._ended.append(d)
        if child.state is not ChildState.STOPPING:
            child.state = ChildState.STOPPING
            self._signal(child, "TERM")
            child._killer = self.clock.callLater(STOP_TIMEOUT, self._kill, child)
        return d

    def _kill(self, child: Child) -> None:
        child._killer = None
        self.on_event(child, f"did not stop within {STOP_TIMEOUT:g} s: killed")
        self._signal(child, "KILL")

    def _signal(self, child: Child, name: str) -> None:
        try:
            child._process.signalProcess(name)
        except (error.ProcessExitedAlready, OSError):
            pass

    def _close_log(self, child: Child) -> None:
        if child._log_file is not None:
            child._log_file.close()
            child._log_file = None

    def _output(self, child: Child, line: str) -> None:
        for level in (" ERROR ", " CRITICAL "):
            if level in line:  # "<time> ERROR <logger>: <message>", junction run's format
                message = line.split(level, 1)[1]
                child.last_error = message.split(": ", 1)[-1][:MAX_ERROR_CHARS]
                break
        self.on_output(child, line)
