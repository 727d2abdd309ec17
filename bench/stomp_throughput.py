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

With ``--groups N`` message i carries ``JMSXGroupID: g<i % N>``: the cost of message
grouping on the broker (one consumer, so every group is pinned to it).

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

``--baseline REV``
    runs git revision REV of this repository (exported to a temporary
    directory) and this checkout, each on its own node, every mode in
    ``--rounds`` (5) alternating rounds, and prints both builds' figures and
    the ratios current / baseline with their spread (``bench/baseline.py``;
    docs/performance.md, "Comparing two builds").

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
import os
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

import stomp

try:
    from . import baseline, common  # imported as bench.stomp_throughput from the repository root
except ImportError:  # run as ``python bench/stomp_throughput.py``: bench/ is on sys.path
    import baseline
    import common

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
#: the fields that name a mode in a result row (Junction's and a peer's rows are matched on them)
MODE_KEYS = ("ack", "persistent")


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
    #: TLS: keyword arguments of stomp.py's ``set_ssl`` (``ca_certs`` ...), or None for plain TCP
    ssl: dict | None = None


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
def junction_target(args, deadline: common.Deadline, build=None):
    """Start a Junction broker in a temp dir (harness), yield its Target, stop it.

    ``build``: a ``--baseline`` build (its name becomes the target's), or None for this checkout.
    """
    name = "junction" if build is None else build.name
    with common.junction_broker(args, deadline, build) as broker:
        print(
            f"{name}: STOMP {broker.host}:{broker.stomp_port} pid {broker.pid} dir {broker.dir}",
            file=sys.stderr,
        )
        yield make_target(name, broker.host, broker.stomp_port, broker.pid, args)


def target_context(kind: str, args, deadline: common.Deadline):
    """The context that provides ``kind``: given address, harness, or peer.sh."""
    return common.target_context(
        kind,
        args,
        deadline,
        make_target=make_target,
        junction=junction_target,
        peer_ports=PEER_STOMP_PORTS,
    )


# --------------------------------------------------------------------------- measurement


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

    def raise_if_failed(self) -> None:
        """BenchError with this side's error once its connection has failed."""
        if self.failed.is_set():
            raise common.BenchError(self.error)


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
        self.ack_mode = ack_mode
        self.version = version
        self.conn = None
        self.received = common.Received(n)
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
        if self.received.add(seq, ts, now):
            self.done.set()


def wait_event(
    event: threading.Event, listener: ConnListener, deadline: common.Deadline, what: str
):
    """Wait for ``event`` unless the listener failed or the deadline passed."""
    while not event.is_set():
        if listener.failed.is_set():
            raise common.BenchError(f"{listener.error} (while waiting for {what})")
        left = deadline.remaining()
        if left <= 0:
            raise common.BenchError(f"run deadline reached while waiting for {what}")
        event.wait(min(0.05, left))


def wait_receipt(listener: ConnListener, rid: str, deadline: common.Deadline, what: str) -> None:
    with listener.receipt_cv:
        while rid not in listener.receipts:
            if listener.failed.is_set():
                raise common.BenchError(f"{listener.error} (while waiting for {what})")
            left = deadline.remaining()
            if left <= 0:
                raise common.BenchError(f"run deadline reached while waiting for {what}")
            listener.receipt_cv.wait(min(0.05, left))


def open_connection(
    target: Target, listener: ConnListener, version: str, deadline: common.Deadline
):
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
    if target.ssl is not None:
        conn.set_ssl(for_hosts=[(target.host, target.port)], **target.ssl)
    try:
        conn.connect(target.login, target.passcode, wait=False)
    except stomp.exception.ConnectFailedException as e:
        raise common.BenchError(
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
    deadline = common.Deadline(seconds)
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
                raise common.BenchError(listener.error)
            if deadline.remaining() <= 0:
                raise common.BenchError("consumer deadline reached")
            if chan.poll() and chan.recv()[0] == "abort":
                raise common.BenchError("aborted by the producer side")
        cpu = time.process_time() - cpu0
        chan.send(listener.received.done(cpu))
    except common.BenchError as e:
        chan.send(("error", f"{e}; {listener.received.progress()}"))
    except Exception as e:  # report anything, never leave the parent waiting
        chan.send(("error", f"consumer crashed: {e!r}; {listener.received.progress()}"))
    finally:
        close_connection(conn, listener)


def run_trial(
    target: Target,
    ack_mode: str,
    persistent: bool,
    n: int,
    args,
    deadline: common.Deadline,
    tag: str = "",
) -> dict:
    """One producer/consumer run of ``n`` messages on a fresh queue; returns figures."""
    run_id = uuid.uuid4().hex[:8]
    queue = f"/queue/bench.{run_id}.{ack_mode}.{'p' if persistent else 'np'}{tag}"
    body = b"x" * args.size
    use_receipts = args.receipts == "all" or (args.receipts == "persistent" and persistent)
    prod_l = ProducerListener(args.receipt_window, n)
    prod = None
    consumer = common.ConsumerSide(
        args.clients,
        consumer_main,
        target,
        queue,
        n,
        ack_mode,
        args.stomp_version,
        deadline.remaining(),
    )
    try:
        consumer.recv(deadline, "the consumer to subscribe")
        prod = open_connection(target, prod_l, args.stomp_version, deadline)

        base_headers: dict[str, str] = {}
        if persistent:
            base_headers["persistent"] = "true"
        elif target.send_persistent_false:
            base_headers["persistent"] = "false"

        cpu0 = common.proc_cpu_ticks(target.pid)
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
                    prod_l.raise_if_failed()
                    if deadline.remaining() <= 0:
                        raise common.BenchError(
                            f"run deadline reached with {args.receipt_window} receipts "
                            f"outstanding after {i} sends"
                        )
            headers = dict(base_headers)
            headers["bench-seq"] = str(i)
            if args.groups:
                headers["JMSXGroupID"] = f"g{i % args.groups}"
            if use_receipts:
                headers["receipt"] = f"s-{i}"
            headers["bench-ts"] = str(time.monotonic_ns())
            prod.send(queue, body, headers=headers)
            prod_l.raise_if_failed()
        t_sent = time.monotonic_ns()
        _, t_last, lat_bytes, duplicates, consumer_cpu = consumer.recv(
            deadline, "the last message", check=prod_l.raise_if_failed
        )
        cpu1 = common.proc_cpu_ticks(target.pid)
        client1 = time.process_time()
        # receipts still in flight: give them a moment (bounded) to be counted
        if use_receipts:
            try:
                wait_event(
                    prod_l.all_receipts, prod_l, common.Deadline(deadline.cap(10.0)), "receipts"
                )
            except common.BenchError as e:
                print(f"  note: {e}; {prod_l.send_receipts} of {n} receipts", file=sys.stderr)
    finally:
        close_connection(prod, prod_l)
        consumer.close()

    elapsed = (t_last - t0) / 1e9
    lat = sorted(array.array("q", lat_bytes))
    cpu_us = (
        (cpu1 - cpu0) / common.CLK_TCK * 1e6 / n if cpu0 is not None and cpu1 is not None else None
    )
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
        "p50_ms": common.percentile(lat, 50) / 1e6,
        "p99_ms": common.percentile(lat, 99) / 1e6,
        "broker_cpu_us_per_msg": cpu_us,
        "client_cpu_us_per_msg": client_cpu * 1e6 / n,
        "receipts": prod_l.send_receipts if use_receipts else None,
        "receipts_expected": n if use_receipts else None,
        "duplicates": duplicates,
    }


def row_key(kind: str, mode) -> dict:
    """The first fields of a result row: which target and mode it is."""
    ack_mode, persistent = mode
    return {"target": kind, "ack": ack_mode, "persistent": persistent}


def run_target(kind: str, modes, args, deadline: common.Deadline) -> list[dict]:
    """Start (or find) one target and run every mode on it, warm-up first."""
    with target_context(kind, args, deadline) as target:

        def trial(mode, n: int, tag: str) -> dict:
            ack_mode, persistent = mode
            return run_trial(target, ack_mode, persistent, n, args, deadline, tag)

        return common.run_modes(
            modes, lambda mode: row_key(kind, mode), trial, args, deadline, format_row
        )


# --------------------------------------------------------------------------- output


COLUMNS = (
    ("target", 9),
    ("ack", 17),
    ("persist", 7),
    *common.FIGURE_COLUMNS,
    ("receipts", 12),
)


def format_row(r: dict) -> str:
    head = [
        r["target"].ljust(9),
        r["ack"].ljust(17),
        ("true" if r["persistent"] else "false").ljust(7),
    ]
    if "error" in r:
        return common.error_line(head, r["error"])
    rec = "-" if r["receipts"] is None else f"{r['receipts']}/{r['receipts_expected']}"
    cells = [*common.figure_cells(r), rec]
    line = common.table_row(head, cells, COLUMNS)
    if r.get("duplicates"):
        line += f"  ({r['duplicates']} duplicates)"
    return line


def print_report(results: list[dict], rat: list[dict] | None, args) -> None:
    print(
        f"\nSTOMP throughput: {args.messages:,} x {args.size} B, one producer + one consumer, "
        f"prefetch {args.prefetch}, receipt window {args.receipt_window}, STOMP {args.stomp_version}"
        + (f", paced at {args.rate:g} msg/s" if args.rate > 0 else "")
    )
    print(common.header_line(COLUMNS, left=3))
    for r in results:
        print(format_row(r))
    common.print_ratios(
        rat,
        f"{'ack':17}  {'persist':7}",
        lambda q: f"{q['ack']:17}  {('true' if q['persistent'] else 'false'):7}",
    )
    if args.json:
        common.print_json(json_settings(args), results, rat)
    sys.stdout.flush()


def json_settings(args) -> dict:
    """The run's settings, as the ``--json`` line gives them."""
    return {
        "bench": "stomp_throughput",
        "messages": args.messages,
        "size": args.size,
        "prefetch": args.prefetch,
        "receipt_window": args.receipt_window,
        "warmup": args.warmup,
        "stomp_version": args.stomp_version,
    }


# --------------------------------------------------------------------------- main


def parse_mode(part: str) -> tuple[str, bool]:
    """One ``ACK/PERSISTENT`` mode, e.g. ``client-individual/true``."""
    ack, _, pers = part.strip().partition("/")
    if ack not in ("auto", "client", "client-individual") or pers not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"bad mode {part!r}: want ACK/true|false")
    return (ack, pers == "true")


def parse_modes(text: str):
    """``all`` or a comma list of ``ACK/PERSISTENT`` (e.g. ``auto/false,client-individual/true``)."""
    return common.parse_modes(text, ALL_MODES, parse_mode)


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
    common.add_broker_options(p, "STOMP")
    p.add_argument("--messages", "-n", type=int, default=20_000)
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--modes", type=parse_modes, default="all", help="all or ACK/PERSISTENT,...")
    p.add_argument("--warmup", type=int, default=0, help="messages per mode before measuring")
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument(
        "--rate",
        type=float,
        default=0,
        help="send at most this many msg/s (0: as fast as possible); for latency",
    )
    p.add_argument("--receipt-window", type=int, default=1000)
    p.add_argument("--groups", type=int, default=0,
                   help="message i is in group g<i %% N> (a JMSXGroupID header); 0: ungrouped")
    p.add_argument(
        "--receipts",
        choices=("persistent", "all", "none"),
        default="persistent",
        help="which SENDs carry a receipt (windowed by --receipt-window)",
    )
    common.add_clients_option(p)
    p.add_argument("--stomp-version", choices=("1.1", "1.2"), default="1.2")
    p.add_argument("--user")
    p.add_argument("--password")
    common.add_run_options(p)
    baseline.add_options(p)
    return p


def run_baseline(args) -> int:
    """``--baseline``: this script's modes on two builds (see ``bench/baseline.py``)."""

    def trial(target: Target, mode, n: int, args, deadline: common.Deadline, tag: str) -> dict:
        ack_mode, persistent = mode
        return run_trial(target, ack_mode, persistent, n, args, deadline, tag)

    return baseline.run(
        args,
        sys.modules[__name__],
        name="stomp_throughput",
        trial=trial,
        key_header=f"{'ack':17}  {'persist':7}",
        key_cells=lambda q: f"{q['ack']:17}  {('true' if q['persistent'] else 'false'):7}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.messages <= 0 or args.size <= 0 or args.receipt_window <= 0 or args.prefetch <= 0:
        print(
            "--messages, --size, --receipt-window and --prefetch must be positive", file=sys.stderr
        )
        return 2
    status = baseline.dispatch(args, parser, lambda: run_baseline(args))
    if status is not None:
        return status
    return common.run_benchmark(
        args, "stomp_throughput", run_target, row_key, MODE_KEYS, print_report
    )


if __name__ == "__main__":
    sys.exit(main())
