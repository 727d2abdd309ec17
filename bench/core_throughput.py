#!/usr/bin/env python3
"""Artemis CORE throughput, latency and broker CPU: Junction side by side with real Artemis.

The real Artemis JMS client (``tests/java/CoreBench.java``, one JVM per trial: a producer
thread and a consumer thread, each on its own connection, one queue) sends N messages
(default 20,000) of ``--size`` (256) bytes (a BytesMessage) to a Junction node (its CORE
acceptor, ``python -m junction run`` through ``tests/harness.py``, persistence on) and to a
real Artemis broker (``tests/artemis/broker.py``, ``artemis create`` defaults) in the same
invocation, one broker up at a time, the same message count and size on both.  Modes:

``durable-blocking``
    PERSISTENT with the client's default ``blockOnDurableSend``: each send waits for the
    broker's response, i.e. for the journal to be synced.
``durable-async``
    PERSISTENT, JMS 2.0 asynchronous sends (CompletionListener, confirmation window 1 MiB),
    at most 1,000 unconfirmed.
``non-durable``
    NON_PERSISTENT (the client does not block on them).

Per mode and target: **msg/s** (N over first send -> last receipt, flat out), **p50/p99 ms**
(a second trial paced at ``--rate``, 2,000 msg/s by default: receipt time minus the
``bench_ts`` property, one JVM so one clock) and **broker CPU us/msg** (utime+stime of the
broker process from ``/proc/PID/stat`` between the JVM's "ready" and its result, flat-out
trial).  Each figure is the median of ``--rounds`` (3) trials; the ratios junction / artemis
are printed per mode.

Durability, like with like: both brokers sync their journal (fdatasync) before they answer a
durable send, on the same file system (both run in a temporary directory).  Junction batches
syncs for ``journal-buffer-timeout`` 500 us (its default); the Artemis instance is made with
``artemis create --no-autotune`` (the test harness's options), so it uses the journal type
``create`` picked on this machine (printed: NIO without libaio) and Artemis's default buffer
timeout for it (3.33 ms for NIO), which bounds a single blocking producer at roughly one send
per timeout.  The durable-blocking row therefore compares the two brokers' defaults, not CPU.

``--quick`` runs 200 messages, one round, paced latency at 500 msg/s: a smoke test
(tests/unit/test_bench_core.py), not a measurement.

Run: ``python bench/core_throughput.py`` (add ``--json`` for one JSON line at the end).
Bounded: every JVM is killed after ``--timeout`` (120 s) seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402

MODES = ("durable-blocking", "durable-async", "non-durable")
TARGETS = ("junction", "artemis")
#: JVM options of the load generator (JIT fully on: it runs for seconds, not one scenario)
JVM_OPTIONS = ("-Xmx512m",)


class Tools:
    """The client jar and compiled tests/java classes (fetched/compiled once)."""

    def __init__(self) -> None:
        from tests.artemis.cache import fetch
        from tests.artemis.jms import compile_sources

        self.dist = fetch()
        self.classpath = os.pathsep.join(
            [str(self.dist.client_jar), str(compile_sources(self.dist))]
        )


@contextmanager
def junction_node(tmp: str):
    """A Junction node with a CORE acceptor; yields (url, pid, description)."""
    from tests import harness

    port = harness.free_port()
    node = harness.BrokerProcess(
        tmp,
        name="bench-core",
        security=False,
        persistence=True,
        extra_acceptors_xml=harness.core_acceptor(port),
    )
    node.start()
    try:
        yield f"tcp://{harness.LOOPBACK}:{port}", node.pid, "journal fsync (group commit)"
    finally:
        node.stop()


@contextmanager
def artemis_broker(tmp: str, tools: Tools):
    """A real Artemis broker (anonymous allowed); yields (url, pid, journal type)."""
    from tests.artemis.broker import ArtemisBroker

    broker = ArtemisBroker(tools.dist, Path(tmp), anonymous=True).create()
    m = re.search(r"<journal-type>(\w+)</journal-type>", broker.broker_xml_path.read_text())
    broker.start()
    try:
        yield broker.url, broker.proc.pid, f"journal-type {m.group(1) if m else 'default'}"
    finally:
        broker.stop()


def trial(
    tools: Tools,
    url: str,
    pid: int,
    mode: str,
    n: int,
    size: int,
    rate: float,
    timeout: float,
    queue: str,
) -> dict:
    """One CoreBench JVM: returns its JSON result plus broker CPU us/msg."""
    cmd = [
        "java",
        *JVM_OPTIONS,
        "-cp",
        tools.classpath,
        "CoreBench",
        url,
        queue,
        str(n),
        str(size),
        mode,
        str(rate),
        str(timeout),
    ]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        ready = proc.stdout.readline()
        if "ready" not in ready:
            raise common.BenchError(
                f"CoreBench did not start: {ready.strip() or proc.wait(timeout)}"
            )
        cpu0 = common.proc_cpu_ticks(pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        cpu1 = common.proc_cpu_ticks(pid)
        proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = json.loads(line) if line.strip() else {"error": "no result"}
    if "error" in result:
        raise common.BenchError(f"{mode}: {result['error']}")
    if cpu0 is not None and cpu1 is not None:
        result["broker_cpu_us_per_msg"] = (cpu1 - cpu0) / common.CLK_TCK * 1e6 / n
    return result


def run_target(kind: str, tools: Tools, args) -> tuple[str, dict]:
    """Every mode on one target, ``rounds`` times: medians per mode."""
    rows = {}
    with tempfile.TemporaryDirectory(prefix="junction-bench-core-") as tmp:
        ctx = junction_node(tmp) if kind == "junction" else artemis_broker(tmp, tools)
        with ctx as (url, pid, durability):
            print(f"{kind}: {url} pid {pid} ({durability})", file=sys.stderr)
            for mode in args.modes:
                flat, paced = [], []
                for r in range(args.rounds):
                    q = f"bench.core.{mode}.{r}"
                    flat.append(
                        trial(
                            tools,
                            url,
                            pid,
                            mode,
                            args.messages,
                            args.size,
                            0,
                            args.timeout,
                            q + ".f",
                        )
                    )
                    paced.append(
                        trial(
                            tools,
                            url,
                            pid,
                            mode,
                            args.paced_messages,
                            args.size,
                            args.rate,
                            args.timeout,
                            q + ".p",
                        )
                    )
                cpu = [t["broker_cpu_us_per_msg"] for t in flat if "broker_cpu_us_per_msg" in t]
                rows[mode] = {
                    "msgs_per_s": statistics.median(t["msgs_per_s"] for t in flat),
                    "p50_ms": statistics.median(t["p50_ms"] for t in paced),
                    "p99_ms": statistics.median(t["p99_ms"] for t in paced),
                    "broker_cpu_us_per_msg": statistics.median(cpu) if cpu else None,
                }
                print(f"  {kind} {mode}: {rows[mode]}", file=sys.stderr)
    return durability, rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument(
        "--paced-messages", type=int, default=10_000, help="messages of the paced latency trial"
    )
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--rate", type=float, default=2000.0, help="msg/s of the paced latency trial")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one trial may take")
    p.add_argument("--quick", action="store_true", help="200 messages, one round: a smoke test")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.messages, args.paced_messages, args.rounds, args.rate = 200, 200, 1, 500.0
    args.modes = [m.strip() for m in args.modes.split(",")]
    targets = [t.strip() for t in args.targets.split(",")]
    if (
        args.rounds < 1
        or args.messages < 1
        or any(m not in MODES for m in args.modes)
        or any(t not in TARGETS for t in targets)
    ):
        print("bad --rounds/--messages/--modes/--targets", file=sys.stderr)
        return 2
    tools = Tools()
    results, notes = {}, {}
    for kind in targets:
        notes[kind], results[kind] = run_target(kind, tools, args)
    print(f"\ncommand: {shlex.join([sys.executable, *sys.argv])}")
    print(
        f"CORE throughput: {args.messages:,} x {args.size} B flat out, latency at {args.rate:g} msg/s "
        f"({args.paced_messages:,} msgs), median of {args.rounds}, {os.cpu_count()} CPUs; "
        + "; ".join(f"{k}: {v}" for k, v in notes.items())
    )
    print(f"{'target':9} {'mode':17} {'msg/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu us/msg':>10}")
    for kind, rows in results.items():
        for mode, r in rows.items():
            print(
                f"{kind:9} {mode:17} {r['msgs_per_s']:9.0f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
                f"{common.fmt(r['broker_cpu_us_per_msg'], '.0f'):>10}"
            )
    ratios = {}
    if len(results) == 2:
        print("\nratio junction / artemis")
        for mode in args.modes:
            j, a = results["junction"][mode], results["artemis"][mode]
            ratios[mode] = {k: common.ratio(j[k], a[k]) for k in j}
            print(
                f"  {mode:17} "
                + "  ".join(f"{k} {common.fmt(v, '.2f')}" for k, v in ratios[mode].items())
            )
    if args.json:
        print(
            json.dumps(
                {
                    "bench": "core_throughput",
                    "results": results,
                    "ratios": ratios,
                    "durability": notes,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
