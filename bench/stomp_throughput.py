#!/usr/bin/env python3
"""STOMP throughput, latency and broker CPU: Junction side by side with real peers.

One stomp.py producer and one stomp.py consumer on separate connections send
N messages (default 20,000) of 256 bytes through one queue.  The consumer
subscribes (and gets a RECEIPT for its SUBSCRIBE) before the producer starts.
Four modes by default: ``ack`` auto / client-individual x ``persistent``
false / true.  For each mode it reports:

* **msg/s** -- N divided by the time from the producer's first SEND to the
  consumer receiving the last distinct message;
* **p50 / p99 latency** -- each SEND carries ``bench-ts`` (monotonic ns at
  send); the consumer subtracts it from the time of receipt.  The consumer
  runs in its own process by default (``--clients process``), so producer
  and consumer do not share a GIL, as two client programs would not;
  ``CLOCK_MONOTONIC`` is system-wide on Linux, so the clocks agree;
* **broker CPU us/msg** -- utime+stime of the broker PID from
  ``/proc/PID/stat`` (all threads of a JVM or BEAM are included) before the
  first SEND and after the last message, in ``CLK_TCK`` units;
* **client CPU us/msg** -- producer plus consumer process CPU over the same
  window, to show when the stomp.py clients rather than the broker are the
  bottleneck;
* **receipts** -- persistent messages are sent with ``persistent:true`` and a
  ``receipt`` on every SEND, with at most ``--receipt-window`` (1000)
  outstanding: asynchronous like a real throughput producer, yet bounded so
  the broker must keep confirming.  How many receipts came back is reported.

The consumer asks for a prefetch of ``--prefetch`` (1000) messages:
``activemq.prefetchSize`` (ActiveMQ Classic's meaning, a message count, which
Junction follows) or ``prefetch-count`` for RabbitMQ.  With
``client-individual`` the consumer ACKs every message.

Targets:

``--target junction``
    starts ``python -m junction run`` in a temporary directory on free ports
    through ``tests/harness.py`` (security off, persistence on) and stops it
    at the end (SIGTERM, then SIGKILL).
``--target activemq`` / ``--target rabbitmq``
    starts the peer with ``../shared/peers/peer.sh start NAME`` (relative to
    the repository root) unless its STOMP port is already listening, in which
    case the running peer is used and left running; stops only what it
    started.  Or give ``--host/--port`` (and ``--pid`` for CPU figures) to use
    any running broker as is.
``--compare activemq|rabbitmq``
    runs Junction, then the peer, in one invocation (one broker up at a time)
    and prints the ratios junction / peer per mode.  ``--host/--port/--pid``
    then describe the peer.

RabbitMQ quirks handled: vhost ``/`` in the ``host`` header, guest/guest by
default, and no ``persistent:false`` header (RabbitMQ rejects it; the header
is simply omitted).

Bounded: the whole run is capped by ``--timeout`` (300 s); a watchdog thread
stops everything this script started and exits with status 3 if the run
hangs past the cap (a blocked socket write cannot be interrupted otherwise).

Limits: CPU time is sampled at CLK_TCK resolution (usually 10 ms), so for a
run of about a second the per-message figure is accurate to about +/-1 us;
children of the broker process are not counted; on a machine with few cores
the clients compete with the broker for CPU, which is why the client CPU
column is printed.  Latency under a saturating producer measures queueing,
not the idle round trip (use a small ``--messages`` or a paced test for that).
"""

from __future__ import annotations

import argparse
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
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import stomp

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.harness import BrokerProcess, port_open  # noqa: E402

PEER_SH = REPO_ROOT.parent / "shared" / "peers" / "peer.sh"
PEER_STOMP_PORTS = {
    "activemq": int(os.environ.get("AMQ_STOMP_PORT", "61713")),
    "rabbitmq": int(os.environ.get("RMQ_STOMP_PORT", "61813")),
}
ALL_MODES = [
    ("auto", False),
    ("auto", True),
    ("client-individual", False),
    ("client-individual", True),
]
CLK_TCK = os.sysconf("SC_CLK_TCK")


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


CLEANUP = Cleanup()


def start_watchdog(seconds: float) -> threading.Timer:
    """After ``seconds``, stop everything started and exit(3): the hard cap."""

    def fire() -> None:
        print(f"\nstomp_throughput: hard timeout after {seconds:g} s; stopping", file=sys.stderr)
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


# --------------------------------------------------------------------------- targets


@dataclass
class Target:
    """Where to connect and what the broker expects from a STOMP client."""

    name: str
    host: str
    port: int
    pid: int | None
    vhost: str | None
    login: str | None = None
    passcode: str | None = None
    #: SUBSCRIBE headers asking for the prefetch
    prefetch_headers: dict = field(default_factory=dict)
    #: whether to send ``persistent:false`` for non-persistent mode
    send_persistent_false: bool = True


def make_target(kind: str, host: str, port: int, pid: int | None, args) -> Target:
    if kind == "rabbitmq":
        return Target(
            kind,
            host,
            port,
            pid,
            vhost="/",
            login=args.user or "guest",
            passcode=args.password or "guest",
            prefetch_headers={"prefetch-count": str(args.prefetch)},
            send_persistent_false=False,
        )
    return Target(
        kind,
        host,
        port,
        pid,
        vhost=host,
        login=args.user,
        passcode=args.password,
        prefetch_headers={"activemq.prefetchSize": str(args.prefetch)},
    )


@contextmanager
def junction_target(args, deadline: Deadline):
    """Start a Junction broker in a temp dir (harness), yield its Target, stop it."""
    tmp = tempfile.mkdtemp(prefix="junction-bench-")
    broker = BrokerProcess(
        tmp,
        name="bench",
        security=False,
        persistence=True,
        startup_timeout=deadline.cap(60.0),
    )
    CLEANUP.push("junction", broker.stop)
    ok = False
    try:
        broker.start()
        print(
            f"junction: STOMP {broker.host}:{broker.stomp_port} pid {broker.pid} dir {broker.dir}",
            file=sys.stderr,
        )
        yield make_target("junction", broker.host, broker.stomp_port, broker.pid, args)
        ok = True
    finally:
        if broker.running and not ok:
            print(broker.log_tail(30), file=sys.stderr)
        CLEANUP.run("junction")
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"junction: broker directory kept at {broker.dir}", file=sys.stderr)


def _peer_sh(*argv: str, timeout: float) -> str:
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
def peer_target(kind: str, args, deadline: Deadline):
    """Yield a Target for a peer on its peer.sh port: already running, or started here."""
    port = PEER_STOMP_PORTS[kind]
    started = False
    if port_open(port):
        print(f"{kind}: already listening on 127.0.0.1:{port}; using it as is", file=sys.stderr)
    else:
        CLEANUP.push(kind, lambda: _peer_sh("stop", kind, timeout=60))
        started = True
        print(_peer_sh("start", kind, timeout=deadline.cap(120)), file=sys.stderr)
    try:
        pid = args.pid
        if pid is None:
            try:
                pid = int(_peer_sh("pid", kind, timeout=10).split()[0])
            except (BenchError, ValueError, IndexError) as e:
                print(f"{kind}: no pid ({e}); broker CPU will be n/a", file=sys.stderr)
        yield make_target(kind, "127.0.0.1", port, pid, args)
    finally:
        if started:
            CLEANUP.run(kind)


@contextmanager
def given_target(kind: str, args):
    """A broker that is already running at --host/--port: nothing to start or stop."""
    yield make_target(kind, args.host, args.port, args.pid, args)


def target_context(kind: str, args, deadline: Deadline):
    """The context that provides ``kind``: given address, harness, or peer.sh.

    With ``--compare`` Junction is always started here and ``--host/--port``
    describe the peer; without it they describe the one target.
    """
    if args.port is not None and not (args.compare and kind == "junction"):
        return given_target(kind, args)
    if kind == "junction":
        return junction_target(args, deadline)
    return peer_target(kind, args, deadline)


# --------------------------------------------------------------------------- measurement


def proc_cpu_ticks(pid: int | None) -> int | None:
    """utime + stime of ``pid`` in clock ticks (all threads), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces; fields restart after its ')'
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)


def percentile(sorted_values: list[int], p: float) -> float | None:
    """Nearest-rank percentile of already-sorted values."""
    if not sorted_values:
        return None
    k = math.ceil(p / 100.0 * len(sorted_values)) - 1
    return sorted_values[max(0, min(len(sorted_values) - 1, k))]


class ConnListener(stomp.ConnectionListener):
    """Connection state shared by producer and consumer: CONNECTED, ERROR, loss."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.connected = threading.Event()
        self.failed = threading.Event()
        self.disconnected = threading.Event()
        self.error: str | None = None
        self.receipts: set[str] = set()
        self.receipt_cv = threading.Condition()
        self.closing = False

    def on_connected(self, frame) -> None:
        self.connected.set()

    def on_error(self, frame) -> None:
        msg = frame.headers.get("message", "")
        body = (
            frame.body.decode("utf-8", "replace") if isinstance(frame.body, bytes) else frame.body
        )
        self.error = f"{self.role}: ERROR frame: {msg} {body}".strip()
        self.failed.set()

    def on_disconnected(self) -> None:
        self.disconnected.set()
        if not self.closing and self.error is None:
            self.error = f"{self.role}: connection lost"
            self.failed.set()

    def on_receipt(self, frame) -> None:
        with self.receipt_cv:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.receipt_cv.notify_all()


class ProducerListener(ConnListener):
    """Counts SEND receipts and frees a window slot for each."""

    def __init__(self, window: int, expected: int) -> None:
        super().__init__("producer")
        self.window = threading.Semaphore(window)
        self.expected = expected
        self.send_receipts = 0
        self.all_receipts = threading.Event()

    def on_receipt(self, frame) -> None:
        rid = frame.headers.get("receipt-id", "")
        if rid.startswith("s-"):
            self.send_receipts += 1  # only this (receiver) thread writes it
            self.window.release()
            if self.send_receipts >= self.expected:
                self.all_receipts.set()
        else:
            super().on_receipt(frame)


class ConsumerListener(ConnListener):
    """Records latency per distinct message, ACKs when asked, signals the last one."""

    def __init__(self, n: int, ack_mode: str, version: str) -> None:
        super().__init__("consumer")
        self.n = n
        self.ack_mode = ack_mode
        self.version = version
        self.conn = None
        self.seen = bytearray(n)
        self.distinct = 0
        self.duplicates = 0
        self.latencies: list[int] = []
        self.t_last: int | None = None
        self.done = threading.Event()

    def on_message(self, frame) -> None:
        now = time.monotonic_ns()
        h = frame.headers
        if self.ack_mode != "auto":
            if self.version == "1.2":
                self.conn.ack(h["ack"])
            else:
                self.conn.ack(h["message-id"], h["subscription"])
        try:
            seq = int(h["bench-seq"])
            ts = int(h["bench-ts"])
        except (KeyError, ValueError):
            self.error = f"consumer: message without bench headers: {dict(h)}"
            self.failed.set()
            return
        if not 0 <= seq < self.n or self.seen[seq]:
            self.duplicates += 1
            return
        self.seen[seq] = 1
        self.latencies.append(now - ts)
        self.distinct += 1
        if self.distinct == self.n:
            self.t_last = now
            self.done.set()


def wait_event(event: threading.Event, listener: ConnListener, deadline: Deadline, what: str):
    """Wait for ``event`` unless the listener failed or the deadline passed."""
    while not event.is_set():
        if listener.failed.is_set():
            raise BenchError(f"{listener.error} (while waiting for {what})")
        left = deadline.remaining()
        if left <= 0:
            raise BenchError(f"run deadline reached while waiting for {what}")
        event.wait(min(0.05, left))


def wait_receipt(listener: ConnListener, rid: str, deadline: Deadline, what: str) -> None:
    with listener.receipt_cv:
        while rid not in listener.receipts:
            if listener.failed.is_set():
                raise BenchError(f"{listener.error} (while waiting for {what})")
            left = deadline.remaining()
            if left <= 0:
                raise BenchError(f"run deadline reached while waiting for {what}")
            listener.receipt_cv.wait(min(0.05, left))


def open_connection(target: Target, listener: ConnListener, version: str, deadline: Deadline):
    cls = stomp.Connection12 if version == "1.2" else stomp.Connection11
    conn = cls(
        [(target.host, target.port)],
        heartbeats=(0, 0),
        vhost=target.vhost,
        auto_decode=False,
        timeout=deadline.cap(10.0) or 0.1,
        reconnect_attempts_max=1,
    )
    conn.set_listener("bench", listener)
    try:
        conn.connect(target.login, target.passcode, wait=False)
    except stomp.exception.ConnectFailedException as e:
        raise BenchError(
            f"{listener.role}: cannot connect to {target.host}:{target.port}: {e!r}"
        ) from None
    wait_event(listener.connected, listener, deadline, f"{listener.role} CONNECTED")
    return conn


def close_connection(conn, listener: ConnListener) -> None:
    """DISCONNECT with a receipt, wait briefly for the socket to close, then drop it."""
    if conn is None:
        return
    listener.closing = True
    try:
        if conn.is_connected():
            conn.disconnect()
            listener.disconnected.wait(5.0)
    except Exception:  # the broker may be gone already; closing is best effort
        pass
    try:
        conn.transport.disconnect_socket()
    except Exception:
        pass


def consumer_main(
    target: Target,
    queue: str,
    n: int,
    ack_mode: str,
    version: str,
    seconds: float,
    chan,
) -> None:
    """The consumer side of a trial; runs in a child process (or a thread).

    Talks to the producer side over ``chan`` (a ``multiprocessing`` pipe end):
    sends ``("ready",)`` once its SUBSCRIBE is confirmed, then either
    ``("done", t_last_ns, latencies_bytes, duplicates, cpu_s)`` or
    ``("error", text)``; gives up on ``("abort",)`` or after ``seconds``.
    """
    deadline = Deadline(seconds)
    listener = ConsumerListener(n, ack_mode, version)
    conn = None
    try:
        conn = open_connection(target, listener, version, deadline)
        listener.conn = conn
        sub_headers = dict(target.prefetch_headers)
        sub_headers["receipt"] = "sub-1"
        conn.subscribe(queue, id="1", ack=ack_mode, headers=sub_headers)
        wait_receipt(listener, "sub-1", deadline, "SUBSCRIBE receipt")
        cpu0 = time.process_time()
        chan.send(("ready",))
        while not listener.done.wait(0.05):
            if listener.failed.is_set():
                raise BenchError(listener.error)
            if deadline.remaining() <= 0:
                raise BenchError("consumer deadline reached")
            if chan.poll() and chan.recv()[0] == "abort":
                raise BenchError("aborted by the producer side")
        cpu = time.process_time() - cpu0
        lat = array.array("q", listener.latencies).tobytes()
        chan.send(("done", listener.t_last, lat, listener.duplicates, cpu))
    except BenchError as e:
        chan.send(("error", f"{e}; received {listener.distinct} of {n}"))
    except Exception as e:  # report anything, never leave the parent waiting
        chan.send(("error", f"consumer crashed: {e!r}; received {listener.distinct} of {n}"))
    finally:
        close_connection(conn, listener)


class ConsumerSide:
    """Runs :func:`consumer_main` in a child process (default) or a thread.

    A separate process keeps the consumer off the producer's GIL, as two
    separate client programs would be; ``time.monotonic_ns`` is
    CLOCK_MONOTONIC, system-wide on Linux, so latencies stay comparable.
    """

    def __init__(self, how: str, target: Target, queue, n, ack_mode, version, seconds):
        self.how = how
        self.chan, child_end = multiprocessing.Pipe()
        fn_args = (target, queue, n, ack_mode, version, seconds, child_end)
        if how == "process":
            ctx = multiprocessing.get_context("spawn")
            self.worker = ctx.Process(target=consumer_main, args=fn_args, daemon=True)
        else:
            self.worker = threading.Thread(target=consumer_main, args=fn_args, daemon=True)
        self.worker.start()

    def recv(self, deadline: Deadline, what: str, producer: ConnListener | None = None):
        """The consumer's next message; BenchError on its error, death or the deadline."""
        while not self.chan.poll(0.05):
            if producer is not None and producer.failed.is_set():
                raise BenchError(producer.error)
            if not self.worker.is_alive() and not self.chan.poll():
                raise BenchError(f"consumer exited while waiting for {what}")
            if deadline.remaining() <= 0:
                raise BenchError(f"run deadline reached while waiting for {what}")
        msg = self.chan.recv()
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


def run_trial(
    target: Target,
    ack_mode: str,
    persistent: bool,
    n: int,
    args,
    deadline: Deadline,
    tag: str = "",
) -> dict:
    """One producer/consumer run of ``n`` messages on a fresh queue; returns figures."""
    run_id = uuid.uuid4().hex[:8]
    queue = f"/queue/bench.{run_id}.{ack_mode}.{'p' if persistent else 'np'}{tag}"
    body = b"x" * args.size
    use_receipts = args.receipts == "all" or (args.receipts == "persistent" and persistent)
    prod_l = ProducerListener(args.receipt_window, n)
    prod = None
    consumer = ConsumerSide(
        args.clients, target, queue, n, ack_mode, args.stomp_version, deadline.remaining()
    )
    try:
        consumer.recv(deadline, "the consumer to subscribe")
        prod = open_connection(target, prod_l, args.stomp_version, deadline)

        base_headers: dict[str, str] = {}
        if persistent:
            base_headers["persistent"] = "true"
        elif target.send_persistent_false:
            base_headers["persistent"] = "false"

        cpu0 = proc_cpu_ticks(target.pid)
        client0 = time.process_time()
        t0 = time.monotonic_ns()
        interval_ns = int(1e9 / args.rate) if args.rate > 0 else 0
        for i in range(n):
            if interval_ns:
                # Paced run: latency without queueing behind a flooding producer.
                ahead = t0 + i * interval_ns - time.monotonic_ns()
                if ahead > 0:
                    time.sleep(ahead / 1e9)
            if use_receipts:
                while not prod_l.window.acquire(timeout=0.05):
                    if prod_l.failed.is_set():
                        raise BenchError(prod_l.error)
                    if deadline.remaining() <= 0:
                        raise BenchError(
                            f"run deadline reached with {args.receipt_window} receipts "
                            f"outstanding after {i} sends"
                        )
            headers = dict(base_headers)
            headers["bench-seq"] = str(i)
            if use_receipts:
                headers["receipt"] = f"s-{i}"
            headers["bench-ts"] = str(time.monotonic_ns())
            prod.send(queue, body, headers=headers)
            if prod_l.failed.is_set():
                raise BenchError(prod_l.error)
        t_sent = time.monotonic_ns()
        _, t_last, lat_bytes, duplicates, consumer_cpu = consumer.recv(
            deadline, "the last message", prod_l
        )
        cpu1 = proc_cpu_ticks(target.pid)
        client1 = time.process_time()
        # receipts still in flight: give them a moment (bounded) to be counted
        if use_receipts:
            try:
                wait_event(prod_l.all_receipts, prod_l, Deadline(deadline.cap(10.0)), "receipts")
            except BenchError as e:
                print(f"  note: {e}; {prod_l.send_receipts} of {n} receipts", file=sys.stderr)
    finally:
        close_connection(prod, prod_l)
        consumer.close()

    elapsed = (t_last - t0) / 1e9
    lat = sorted(array.array("q", lat_bytes))
    cpu_us = (cpu1 - cpu0) / CLK_TCK * 1e6 / n if cpu0 is not None and cpu1 is not None else None
    # in thread mode process_time already covers the consumer thread
    client_cpu = (client1 - client0) + (consumer_cpu if args.clients == "process" else 0.0)
    return {
        "target": target.name,
        "ack": ack_mode,
        "persistent": persistent,
        "messages": n,
        "size": args.size,
        "msgs_per_s": n / elapsed if elapsed > 0 else None,
        "elapsed_s": elapsed,
        "send_s": (t_sent - t0) / 1e9,
        "p50_ms": percentile(lat, 50) / 1e6,
        "p99_ms": percentile(lat, 99) / 1e6,
        "broker_cpu_us_per_msg": cpu_us,
        "client_cpu_us_per_msg": client_cpu * 1e6 / n,
        "receipts": prod_l.send_receipts if use_receipts else None,
        "receipts_expected": n if use_receipts else None,
        "duplicates": duplicates,
    }


def run_target(kind: str, modes, args, deadline: Deadline) -> list[dict]:
    """Start (or find) one target and run every mode on it, warm-up first."""
    results = []
    with target_context(kind, args, deadline) as target:
        for ack_mode, persistent in modes:
            row = {"target": kind, "ack": ack_mode, "persistent": persistent}
            try:
                if deadline.remaining() <= 0:
                    raise BenchError("run deadline reached before this mode")
                if args.warmup:
                    run_trial(target, ack_mode, persistent, args.warmup, args, deadline, ".warm")
                row = run_trial(target, ack_mode, persistent, args.messages, args, deadline)
            except Exception as e:  # this mode failed; report it and go on
                row = {"target": kind, "ack": ack_mode, "persistent": persistent}
                row["error"] = str(e) or repr(e)
            results.append(row)
            print(f"  {format_row(row)}", file=sys.stderr)
    return results


# --------------------------------------------------------------------------- output


def _f(v, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


COLUMNS = (
    ("target", 9),
    ("ack", 17),
    ("persist", 7),
    ("msg/s", 9),
    ("p50 ms", 8),
    ("p99 ms", 8),
    ("broker us/msg", 13),
    ("client us/msg", 13),
    ("receipts", 12),
)


def header_line() -> str:
    return "  ".join(
        name.rjust(w) if i > 2 else name.ljust(w) for i, (name, w) in enumerate(COLUMNS)
    )


def format_row(r: dict) -> str:
    head = [
        r["target"].ljust(9),
        r["ack"].ljust(17),
        ("true" if r["persistent"] else "false").ljust(7),
    ]
    if "error" in r:
        first = (r["error"].splitlines() or [""])[0]
        return "  ".join(head) + f"  ERROR: {first}"
    rec = "-" if r["receipts"] is None else f"{r['receipts']}/{r['receipts_expected']}"
    cells = [
        _f(r["msgs_per_s"], ",.0f"),
        _f(r["p50_ms"], ".2f"),
        _f(r["p99_ms"], ".2f"),
        _f(r["broker_cpu_us_per_msg"], ".1f"),
        _f(r["client_cpu_us_per_msg"], ".1f"),
        rec,
    ]
    line = "  ".join(head + [c.rjust(w) for c, (_n, w) in zip(cells, COLUMNS[3:], strict=True)])
    if r.get("duplicates"):
        line += f"  ({r['duplicates']} duplicates)"
    return line


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def ratios(ours: list[dict], peer: list[dict]) -> list[dict]:
    """junction / peer per mode, for the metrics both sides measured."""
    out = []
    index = {(r["ack"], r["persistent"]): r for r in peer}
    for r in ours:
        p = index.get((r["ack"], r["persistent"]))
        if p is None or "error" in r or "error" in p:
            continue
        out.append(
            {
                "ack": r["ack"],
                "persistent": r["persistent"],
                "peer": p["target"],
                "msgs_per_s": ratio(r["msgs_per_s"], p["msgs_per_s"]),
                "p50_ms": ratio(r["p50_ms"], p["p50_ms"]),
                "p99_ms": ratio(r["p99_ms"], p["p99_ms"]),
                "broker_cpu_us_per_msg": ratio(
                    r["broker_cpu_us_per_msg"], p["broker_cpu_us_per_msg"]
                ),
            }
        )
    return out


def print_report(results: list[dict], rat: list[dict] | None, args) -> None:
    print(
        f"\nSTOMP throughput: {args.messages:,} x {args.size} B, one producer + one consumer, "
        f"prefetch {args.prefetch}, receipt window {args.receipt_window}, STOMP {args.stomp_version}"
        + (f", paced at {args.rate:g} msg/s" if args.rate > 0 else "")
    )
    print(header_line())
    for r in results:
        print(format_row(r))
    if rat:
        peer = rat[0]["peer"]
        print(
            f"\nratios junction / {peer} (msg/s: higher is better; latency, CPU: lower is better)"
        )
        print(
            f"{'ack':17}  {'persist':7}  {'msg/s':>7}  {'p50':>7}  {'p99':>7}  {'broker CPU':>10}"
        )
        for q in rat:
            print(
                f"{q['ack']:17}  {('true' if q['persistent'] else 'false'):7}  "
                f"{_f(q['msgs_per_s'], '.2f'):>7}  {_f(q['p50_ms'], '.2f'):>7}  "
                f"{_f(q['p99_ms'], '.2f'):>7}  {_f(q['broker_cpu_us_per_msg'], '.2f'):>10}"
            )
    if args.json:
        print(
            json.dumps(
                {
                    "bench": "stomp_throughput",
                    "messages": args.messages,
                    "size": args.size,
                    "prefetch": args.prefetch,
                    "receipt_window": args.receipt_window,
                    "warmup": args.warmup,
                    "stomp_version": args.stomp_version,
                    "results": results,
                    "ratios": rat,
                },
                separators=(",", ":"),
            )
        )
    sys.stdout.flush()


# --------------------------------------------------------------------------- main


def parse_modes(text: str):
    """``all`` or a comma list of ``ACK/PERSISTENT`` (e.g. ``auto/false,client-individual/true``)."""
    if text == "all":
        return ALL_MODES
    modes = []
    for part in text.split(","):
        ack, _, pers = part.strip().partition("/")
        if ack not in ("auto", "client", "client-individual") or pers not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"bad mode {part!r}: want ACK/true|false")
        modes.append((ack, pers == "true"))
    return modes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STOMP producer/consumer throughput, latency and broker CPU per message.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--target", choices=("junction", "activemq", "rabbitmq"), default="junction")
    p.add_argument(
        "--compare",
        choices=("activemq", "rabbitmq"),
        help="run junction and this peer; print ratios junction/peer",
    )
    p.add_argument("--host", default="127.0.0.1", help="with --port: use a running broker")
    p.add_argument("--port", type=int, help="STOMP port of a running broker (nothing is started)")
    p.add_argument("--pid", type=int, help="PID of that broker, for its CPU time")
    p.add_argument("--messages", "-n", type=int, default=20_000)
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--modes", type=parse_modes, default="all", help="all or ACK/PERSISTENT,...")
    p.add_argument("--warmup", type=int, default=0, help="messages per mode before measuring")
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument(
        "--rate", type=float, default=0, help="send at most this many msg/s (0: as fast as possible); for latency"
    )
    p.add_argument("--receipt-window", type=int, default=1000)
    p.add_argument(
        "--receipts",
        choices=("persistent", "all", "none"),
        default="persistent",
        help="which SENDs carry a receipt (windowed by --receipt-window)",
    )
    p.add_argument(
        "--clients",
        choices=("process", "thread"),
        default="process",
        help="consumer in its own process (off the producer's GIL) or a thread",
    )
    p.add_argument("--stomp-version", choices=("1.1", "1.2"), default="1.2")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--timeout", type=float, default=300.0, help="cap on the whole run, seconds")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    p.add_argument("--keep", action="store_true", help="keep the junction broker directory")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.messages <= 0 or args.size <= 0 or args.receipt_window <= 0 or args.prefetch <= 0:
        print(
            "--messages, --size, --receipt-window and --prefetch must be positive", file=sys.stderr
        )
        return 2
    if args.compare:
        kinds = ["junction", args.compare]
    else:
        kinds = [args.target]
    deadline = Deadline(args.timeout)
    watchdog = start_watchdog(args.timeout + 20.0)

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
                per_target[kind] = [
                    {
                        "target": kind,
                        "ack": a,
                        "persistent": p,
                        "error": f"target failed: {str(e).splitlines()[0] if str(e) else e!r}",
                    }
                    for a, p in args.modes
                ]
    finally:
        CLEANUP.run()
        watchdog.cancel()
    results = [r for k in kinds for r in per_target.get(k, [])]
    rat = ratios(per_target["junction"], per_target[args.compare]) if args.compare else None
    print_report(results, rat, args)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
