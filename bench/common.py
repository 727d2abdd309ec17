"""Shared plumbing of the benchmark scripts in ``bench/``.

The end-to-end benches (``stomp_throughput.py``, ``amqp_throughput.py``) measure
different protocols with different clients, but around the clients they do the
same things: cap the whole run with a deadline and a watchdog, start a Junction
broker through ``tests/harness.py`` or a peer through ``../shared/peers/peer.sh``
(and stop only what they started), read broker and host CPU ticks from
``/proc``, run the consumer in its own process behind a pipe, run every mode
on every target, take the same command-line options for all that, and print
the same kind of table, ratios and JSON line.  The
micro-benchmarks (``amqp_codec.py``, ``stomp_codec.py``, ``broker_path.py``)
share the calibration loop that tells how fast the machine is right now.

That logic lives here once, so that a fix (say, to the ``/proc/PID/stat``
parser or to the cleanup on a hung run) reaches every bench, and so that the
figures of different benches are measured the same way.  What is specific to a
protocol or a client library stays in its script.

The scripts run as ``python bench/NAME.py`` (``bench/`` is then first on
``sys.path``) and import this module as ``common``; imported as
``bench.NAME`` from the repository root they use ``from . import common``.
This module imports only the standard library; ``tests/harness.py`` is imported
on first use (see :func:`harness`), so the micro-benchmarks do not load it.
"""

from __future__ import annotations

import array
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the peer control script, beside the repository (start / stop / pid NAME)
PEER_SH = REPO_ROOT.parent / "shared" / "peers" / "peer.sh"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: seconds between checks while waiting for the consumer process
POLL = 0.05


class BenchError(RuntimeError):
    """A trial could not complete (broker error, disconnect, deadline)."""


# --------------------------------------------------------------------------- deadline & cleanup


class Deadline:
    """The run's overall time cap; every wait asks it how long is left."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def cap(self, seconds: float) -> float:
        return min(seconds, self.remaining())


class Cleanup:
    """Stop actions for everything this script started, run once (LIFO).

    Used by the normal ``finally`` path and by the watchdog, so a hung run
    still leaves no broker behind.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: list[tuple[str, object]] = []

    def push(self, what: str, fn) -> None:
        with self._lock:
            self._actions.append((what, fn))

    def run(self, what: str | None = None) -> None:
        """Run the action named ``what`` (or all of them, newest first)."""
        while True:
            with self._lock:
                idx = None
                for i in range(len(self._actions) - 1, -1, -1):
                    if what is None or self._actions[i][0] == what:
                        idx = i
                        break
                if idx is None:
                    return
                name, fn = self._actions.pop(idx)
            try:
                fn()
            except Exception as e:  # keep cleaning up the rest
                print(f"cleanup of {name} failed: {e!r}", file=sys.stderr)
            if what is not None:
                return


#: the process's one cleanup list (brokers and peers started by this run)
CLEANUP = Cleanup()


def start_watchdog(seconds: float, name: str) -> threading.Timer:
    """After ``seconds``, stop everything started and exit(3): the hard cap.

    A blocked socket write cannot be interrupted otherwise.  ``name`` is the
    bench's name, for the message.
    """

    def fire() -> None:
        print(f"\n{name}: hard timeout after {seconds:g} s; stopping", file=sys.stderr)
        CLEANUP.run()
        for child in multiprocessing.active_children():
            child.kill()
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(3)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


# --------------------------------------------------------------------------- brokers


def harness():
    """``tests/harness.py`` (``BrokerProcess``, ``port_open``), imported on first use."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from tests import harness as module

    return module


@contextmanager
def junction_broker(args, deadline: Deadline, build=None):
    """Start a Junction broker in a temp dir (harness), yield it, stop it.

    Security off, persistence on, free ports.  The broker directory is removed
    afterwards unless the run failed or ``args.keep`` is set.  On a failure
    after the broker started, the tail of its log is printed (a failed start
    raises an error that already holds it).  ``build`` (a
    ``bench/baseline.py`` Build, for ``--baseline``) names the broker and
    gives its process the ``PYTHONPATH`` of that build's tree; None runs
    this checkout.
    """
    tmp = tempfile.mkdtemp(prefix="junction-bench-")
    broker = harness().BrokerProcess(
        tmp,
        name="bench" if build is None else build.name,
        security=False,
        persistence=True,
        env=None if build is None else build.env(),
        startup_timeout=deadline.cap(60.0),
    )
    what = "junction" if build is None else f"junction {build.name}"
    CLEANUP.push(what, broker.stop)
    started = ok = False
    try:
        broker.start()
        started = True
        yield broker
        ok = True
    finally:
        if started and not ok:
            print(broker.log_tail(30), file=sys.stderr)
        CLEANUP.run(what)
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"junction: broker directory kept at {broker.dir}", file=sys.stderr)


def peer_sh(*argv: str, timeout: float) -> str:
    """Run ``peer.sh ARGV...``; its stdout, or BenchError with its stderr."""
    if not PEER_SH.exists():
        raise BenchError(f"{PEER_SH} not found (expected beside the repository)")
    r = subprocess.run(
        ["bash", str(PEER_SH), *argv],
        capture_output=True,
        text=True,
        timeout=max(1.0, timeout),
        stdin=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        raise BenchError(f"peer.sh {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout.strip()


@contextmanager
def peer_target(kind: str, port: int, make_target, args, deadline: Deadline):
    """Yield a Target for a peer on its peer.sh port: already running, or started here.

    A peer found listening is used and left running; one started here is
    stopped at the end.  ``make_target(kind, host, port, pid, args)`` builds
    the script's Target.
    """
    started = False
    if harness().port_open(port):
        print(f"{kind}: already listening on 127.0.0.1:{port}; using it as is", file=sys.stderr)
    else:
        CLEANUP.push(kind, lambda: peer_sh("stop", kind, timeout=60))
        started = True
        print(peer_sh("start", kind, timeout=deadline.cap(120)), file=sys.stderr)
    try:
        pid = args.pid
        if pid is None:
            try:
                pid = int(peer_sh("pid", kind, timeout=10).split()[0])
            except (BenchError, ValueError, IndexError) as e:
                print(f"{kind}: no pid ({e}); broker CPU will be n/a", file=sys.stderr)
        yield make_target(kind, "127.0.0.1", port, pid, args)
    finally:
        if started:
            CLEANUP.run(kind)


@contextmanager
def given_target(kind: str, make_target, args):
    """A broker that is already running at --host/--port: nothing to start or stop."""
    yield make_target(kind, args.host, args.port, args.pid, args)


def target_context(kind: str, args, deadline: Deadline, *, make_target, junction, peer_ports):
    """The context that provides ``kind``: given address, harness, or peer.sh.

    With ``--compare`` Junction is always started here and ``--host/--port``
    describe the peer; without it they describe the one target.  ``junction``
    is the script's ``(args, deadline)`` context for a Junction target and
    ``peer_ports`` the peers' ports in the script's protocol.
    """
    if args.port is not None and not (args.compare and kind == "junction"):
        return given_target(kind, make_target, args)
    if kind == "junction":
        return junction(args, deadline)
    return peer_target(kind, peer_ports[kind], make_target, args, deadline)


# --------------------------------------------------------------------------- measurement


def proc_cpu_ticks(pid: int | None, thread: int | None = None) -> int | None:
    """utime + stime of ``pid`` in clock ticks (all threads, or only ``thread``), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces; fields restart after its ')'
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)


def host_busy_ticks() -> int | None:
    """CPU ticks all CPUs spent busy (not idle or iowait) since boot, from /proc/stat."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
    return sum(ticks) - ticks[3] - ticks[4]


def percentile(sorted_values: list[int], p: float) -> float | None:
    """Nearest-rank percentile of already-sorted values."""
    if not sorted_values:
        return None
    k = math.ceil(p / 100.0 * len(sorted_values)) - 1
    return sorted_values[max(0, min(len(sorted_values) - 1, k))]


def calibration() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine is right now.

    Printed beside CPU figures so that runs on different machines (or on a
    loaded shared host) can be compared.
    """
    started = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.process_time() - started


def calibration_line() -> str:
    """The micro-benchmarks' closing line: the best of three calibration loops."""
    return (
        f"calibration: 1M-iteration Python loop {min(calibration() for _ in range(3)) * 1e3:.0f} "
        f"ms CPU (compare it between machines before comparing the figures above)"
    )


# --------------------------------------------------------------------------- consumer process


class Received:
    """What a trial's consumer got: each message once by its ``bench-seq``, with its latency.

    The throughput benches stamp every message with ``bench-seq`` (0 .. n-1)
    and ``bench-ts`` (``time.monotonic_ns()`` at send); counting them here
    keeps throughput, duplicates and latencies measured alike for every
    protocol.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = bytearray(n)
        self.distinct = 0
        self.duplicates = 0
        self.latencies = array.array("q")
        #: when the last distinct message arrived (monotonic ns)
        self.t_last: int | None = None

    def add(self, seq: int, ts: int, now: int) -> bool:
        """Count message ``seq`` sent at ``ts``, received at ``now``; True once all have come."""
        if not 0 <= seq < self.n or self.seen[seq]:
            self.duplicates += 1
            return False
        self.seen[seq] = 1
        self.latencies.append(now - ts)
        self.distinct += 1
        if self.distinct == self.n:
            self.t_last = now
            return True
        return False

    def done(self, cpu: float) -> tuple:
        """The consumer's final report: ``("done", t_last_ns, latencies_bytes, duplicates, cpu_s)``."""
        return ("done", self.t_last, self.latencies.tobytes(), self.duplicates, cpu)

    def progress(self) -> str:
        return f"received {self.distinct} of {self.n}"


class ConsumerSide:
    """Runs a consumer function in a child process (default) or a thread.

    A separate process keeps the consumer off the producer's GIL, as two
    separate client programs would be; ``time.monotonic_ns`` is
    CLOCK_MONOTONIC, system-wide on Linux, so latencies stay comparable.

    ``main(*main_args, chan)`` gets its end of a ``multiprocessing`` pipe as
    the last argument; it sends ``("ready",)``, then ``("done", ...)`` or
    ``("error", text)``, and gives up on ``("abort",)``.  In process mode
    ``main`` must be picklable (a module-level function of the script).
    """

    def __init__(self, how: str, main, *main_args) -> None:
        self.how = how
        self.chan, child_end = multiprocessing.Pipe()
        self.pending: tuple | None = None
        fn_args = (*main_args, child_end)
        if how == "process":
            ctx = multiprocessing.get_context("spawn")
            self.worker = ctx.Process(target=main, args=fn_args, daemon=True)
        else:
            self.worker = threading.Thread(target=main, args=fn_args, daemon=True)
        self.worker.start()

    def peek(self) -> tuple | None:
        """The consumer's next message if one has arrived (kept for :meth:`recv`)."""
        if self.pending is None and self.chan.poll():
            self.pending = self.chan.recv()
        return self.pending

    def dead(self) -> bool:
        return not self.worker.is_alive() and self.peek() is None

    def recv(self, deadline: Deadline, what: str, check: Callable[[], None] | None = None):
        """The consumer's next message; BenchError on its error, death or the deadline.

        ``check()``, called while waiting, may raise to give up early (e.g.
        when the producer's connection failed).
        """
        while self.peek() is None:
            if check is not None:
                check()
            if not self.worker.is_alive() and not self.chan.poll():
                raise BenchError(f"consumer exited while waiting for {what}")
            if deadline.remaining() <= 0:
                raise BenchError(f"run deadline reached while waiting for {what}")
            self.chan.poll(POLL)
        msg, self.pending = self.pending, None
        if msg[0] == "error":
            raise BenchError(msg[1])
        return msg

    def close(self) -> None:
        try:
            if self.worker.is_alive():
                self.chan.send(("abort",))
        except OSError:
            pass
        self.worker.join(10)
        if self.how == "process" and self.worker.is_alive():
            self.worker.kill()
            self.worker.join(5)
        self.chan.close()


# --------------------------------------------------------------------------- command line
# The options that the code in this module reads; each script adds them where
# its --help lists them.


def add_broker_options(p, protocol: str) -> None:
    """--host/--port/--pid: measure a broker that is already running (see :func:`given_target`)."""
    p.add_argument("--host", default="127.0.0.1", help="with --port: use a running broker")
    p.add_argument(
        "--port", type=int, help=f"{protocol} port of a running broker (nothing is started)"
    )
    p.add_argument("--pid", type=int, help="PID of that broker, for its CPU time")


def add_clients_option(p) -> None:
    """--clients: where :class:`ConsumerSide` runs the consumer."""
    p.add_argument(
        "--clients",
        choices=("process", "thread"),
        default="process",
        help="consumer in its own process (off the producer's GIL) or a thread",
    )


def add_run_options(p) -> None:
    """--timeout (:func:`run_targets`), --json (:func:`print_json`), --keep (:func:`junction_broker`)."""
    p.add_argument("--timeout", type=float, default=300.0, help="cap on the whole run, seconds")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    p.add_argument("--keep", action="store_true", help="keep the junction broker directory")


def add_trial_options(p, *, timeout: float) -> None:
    """The options of the benches that run rotated trials against nodes (bench/cluster.py,
    bench/events.py): --count, --size, --runs, --warmup, --clients, --quick, --timeout, --json, --keep."""
    p.add_argument("--count", "-n", type=int, default=20_000, help="messages per trial")
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--runs", type=int, default=3, help="measured trials per scenario (rotated)")
    p.add_argument(
        "--warmup", type=int, default=2000, help="messages per scenario before measuring"
    )
    add_clients_option(p)
    p.add_argument("--quick", action="store_true", help="smoke run: 2,000 messages, one run")
    p.add_argument("--timeout", type=float, default=timeout, help="cap on the whole run, seconds")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    p.add_argument("--keep", action="store_true", help="keep the nodes' directory")


def trial_options_problem(args) -> str | None:
    """Apply --quick; what is wrong with the trial options, or None."""
    if args.quick:
        args.count, args.runs, args.warmup = 2000, 1, 200
    if min(args.count, args.size, args.runs) <= 0 or args.warmup < 0:
        return "--count, --size and --runs must be positive and --warmup not negative"
    return None


def parse_modes(text: str, all_modes: list, parse_one) -> list:
    """``--modes``: ``all`` or a comma list of modes, each parsed by ``parse_one(part)``.

    ``parse_one`` raises ``argparse.ArgumentTypeError`` for a mode it does not know.
    """
    if text == "all":
        return all_modes
    return [parse_one(part) for part in text.split(",")]


# --------------------------------------------------------------------------- running


def guarded(fn, key: dict, deadline: Deadline) -> dict:
    """``fn()``'s row, or ``key`` plus the error (the run goes on)."""
    try:
        if deadline.remaining() <= 0:
            raise BenchError("run deadline reached before this trial")
        return fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        return {**key, "error": str(e) or repr(e)}


def run_modes(modes: Iterable, row_key, trial, args, deadline: Deadline, format_row) -> list[dict]:
    """Run ``trial(mode, n, tag)`` for every mode, after ``args.warmup`` untimed messages.

    A mode that fails becomes the row ``row_key(mode)`` plus ``error``, and the
    run goes on; each row is echoed to stderr as it completes.
    """
    results = []
    for mode in modes:
        try:
            if deadline.remaining() <= 0:
                raise BenchError("run deadline reached before this mode")
            if args.warmup:
                trial(mode, args.warmup, ".warm")
            row = trial(mode, args.messages, "")
        except Exception as e:  # this mode failed; report it and go on
            row = row_key(mode)
            row["error"] = str(e) or repr(e)
        results.append(row)
        print(f"  {format_row(row)}", file=sys.stderr)
    return results


def run_targets(kinds: list[str], run_target, row_key, args, name: str) -> dict[str, list[dict]]:
    """Run ``run_target(kind, modes, args, deadline)`` for each target, one after the other.

    Sets up the ``--timeout`` deadline, the watchdog (cap plus 20 s) and
    SIGTERM handling, and always runs the cleanup.  A target that cannot be
    started gets an error row ``row_key(kind, mode)`` for every mode.
    """
    deadline = Deadline(args.timeout)
    watchdog = start_watchdog(args.timeout + 20.0, name)

    def on_term(signum, frame):  # run the finally blocks on SIGTERM too
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    per_target: dict[str, list[dict]] = {}
    try:
        for kind in kinds:
            print(f"== {kind}", file=sys.stderr)
            try:
                per_target[kind] = run_target(kind, args.modes, args, deadline)
            except (
                BenchError,
                TimeoutError,
                RuntimeError,
                OSError,
                subprocess.SubprocessError,
            ) as e:
                print(f"{kind}: {e}", file=sys.stderr)
                failed = f"target failed: {str(e).splitlines()[0] if str(e) else e!r}"
                per_target[kind] = [{**row_key(kind, m), "error": failed} for m in args.modes]
    finally:
        CLEANUP.run()
        watchdog.cancel()
    return per_target


def run_benchmark(args, name: str, run_target, row_key, mode_keys, print_report) -> int:
    """Run ``--target`` (or Junction, then the ``--compare`` peer) and print the report.

    ``print_report(results, ratios, args)`` prints the table; the ratios
    match rows on ``mode_keys``.  Returns the exit status: 1 if any mode
    failed, else 0.
    """
    kinds = ["junction", args.compare] if args.compare else [args.target]
    per_target = run_targets(kinds, run_target, row_key, args, name)
    results = [r for k in kinds for r in per_target.get(k, [])]
    rat = None
    if args.compare:
        rat = ratios(per_target["junction"], per_target[args.compare], mode_keys)
    print_report(results, rat, args)
    return 1 if any("error" in r for r in results) else 0


# --------------------------------------------------------------------------- output

#: the figures ``ratios`` compares between Junction and a peer
RATIO_METRICS = ("msgs_per_s", "p50_ms", "p99_ms", "broker_cpu_us_per_msg")


def fmt(v, spec: str) -> str:
    """``v`` formatted with ``spec``, or ``n/a`` for None."""
    return "n/a" if v is None else format(v, spec)


#: the table columns every throughput bench starts its figures with
FIGURE_COLUMNS = (
    ("msg/s", 9),
    ("p50 ms", 8),
    ("p99 ms", 8),
    ("broker us/msg", 13),
    ("client us/msg", 13),
)


def figure_cells(r: dict) -> list[str]:
    """A result row's cells for :data:`FIGURE_COLUMNS`."""
    return [
        fmt(r["msgs_per_s"], ",.0f"),
        fmt(r["p50_ms"], ".2f"),
        fmt(r["p99_ms"], ".2f"),
        fmt(r["broker_cpu_us_per_msg"], ".1f"),
        fmt(r["client_cpu_us_per_msg"], ".1f"),
    ]


def header_line(columns, left: int) -> str:
    """Column titles: the first ``left`` left-aligned (the row's key), the rest right."""
    return "  ".join(
        name.ljust(w) if i < left else name.rjust(w) for i, (name, w) in enumerate(columns)
    )


def table_row(head: list[str], cells: list[str], columns) -> str:
    """One table line: the (already padded) ``head`` then ``cells`` right-aligned."""
    widths = columns[len(head) :]
    return "  ".join(head + [c.rjust(w) for c, (_n, w) in zip(cells, widths, strict=True)])


def error_line(head: list[str], error: str) -> str:
    """A table line for a failed mode: its key, then the error's first line."""
    first = (error.splitlines() or [""])[0]
    return "  ".join(head) + f"  ERROR: {first}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def ratios(ours: list[dict], peer: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """junction / peer per mode (rows matched on ``keys``), for the metrics both measured."""
    out = []
    index = {tuple(r[k] for k in keys): r for r in peer}
    for r in ours:
        p = index.get(tuple(r[k] for k in keys))
        if p is None or "error" in r or "error" in p:
            continue
        row = {k: r[k] for k in keys}
        row["peer"] = p["target"]
        row.update((m, ratio(r[m], p[m])) for m in RATIO_METRICS)
        out.append(row)
    return out


def print_ratios(rat: list[dict] | None, key_header: str, key_cells) -> None:
    """The ratio table, if there is one; ``key_cells(row)`` formats a row's key."""
    if not rat:
        return
    peer = rat[0]["peer"]
    print(f"\nratios junction / {peer} (msg/s: higher is better; latency, CPU: lower is better)")
    print(f"{key_header}  {'msg/s':>7}  {'p50':>7}  {'p99':>7}  {'broker CPU':>10}")
    for q in rat:
        print(
            f"{key_cells(q)}  "
            f"{fmt(q['msgs_per_s'], '.2f'):>7}  {fmt(q['p50_ms'], '.2f'):>7}  "
            f"{fmt(q['p99_ms'], '.2f'):>7}  {fmt(q['broker_cpu_us_per_msg'], '.2f'):>10}"
        )


def print_json(settings: dict, results: list[dict], rat: list[dict] | None) -> None:
    """The ``--json`` line on stdout: the run's ``settings``, every result row, the ratios."""
    record = {**settings, "results": results, "ratios": rat}
    print(json.dumps(record, separators=(",", ":")))


def run_guarded(name: str, args, run_all, report, failed) -> int:
    """Run ``run_all(args, deadline)`` under the deadline and watchdog, clean up, then report.

    SIGTERM and Ctrl-C end the run through the cleanup (children stopped,
    temporary folders removed).  ``report(out)`` prints the figures;
    ``failed(out)`` says whether a trial went wrong (exit status 1).
    """
    print(f"command: {command_line()}", file=sys.stderr)
    deadline = Deadline(args.timeout)
    watchdog = start_watchdog(args.timeout + 20.0, name)

    def on_term(signum, frame):  # run the finally blocks on SIGTERM too
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    # Ctrl-C ends the run cleanly even when started with SIGINT ignored (``&`` in a script)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        out = run_all(args, deadline)
    except KeyboardInterrupt:
        print(f"\n{name}: interrupted", file=sys.stderr)
        return 130
    except (BenchError, TimeoutError, RuntimeError, OSError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    finally:
        CLEANUP.run()
        watchdog.cancel()
    report(out)
    sys.stdout.flush()
    return 1 if failed(out) else 0


def command_line() -> str:
    """The command that ran this benchmark, as a shell would take it (for docs/performance.md)."""
    import shlex

    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return shlex.join(argv)

