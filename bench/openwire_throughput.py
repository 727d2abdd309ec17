#!/usr/bin/env python3
"""OpenWire throughput, latency and broker CPU: Junction, ActiveMQ Classic and Artemis.

The real ActiveMQ Classic JMS client (Debian's 5.17, or ``--client 6``;
``tests/java/openwire/OpenWireBench.java``, one JVM per trial: a producer thread and a
consumer thread, each on its own connection, one queue) sends N TextMessages (default 20,000)
of ``--size`` (256) characters to three brokers in one invocation: a Junction node (its
OPENWIRE acceptor, ``python -m junction run`` through ``tests/harness.py``, persistence on),
Debian's ActiveMQ Classic 5.17.2 (``tests/classic/broker.py``, KahaDB) and a real Artemis 2.40
(``tests/artemis/broker.py``, its main acceptor, which takes OpenWire).  Both Java brokers run
with the JVM options they ship with (full JIT, their own collector), not the test harness's
C1-only ones.  Modes:

``sync-persistent``
    PERSISTENT with ``jms.useAsyncSend=false`` (the client's default for persistent sends):
    each send waits for the broker's Response, given once the message is on disk.
``async-persistent``
    PERSISTENT with ``jms.useAsyncSend=true``: the client does not wait.
``non-persistent``
    NON_PERSISTENT (sent without waiting).

Per mode and target: **msg/s** (N over first send -> last receipt, flat out), **p50/p99 ms**
(a second trial paced at ``--rate``, 2,000 msg/s by default: receipt time minus the
``bench_ts`` property, one JVM so one clock), **broker CPU us/msg** (utime+stime of the broker
process and its children from ``/proc``, between the JVM's "ready" and its result, flat-out
trial) and **client CPU us/msg** (the load generator JVM's own CPU time over the same run).

Honest ratios on a small machine: all three brokers are up for the whole run, and every
round runs each mode on every target back to back, the targets' order rotated per round, so
a slow minute of a shared machine falls on all three; each figure is the median of
``--rounds`` (3) rounds.  Before the first round each target gets one unmeasured warm-up trial
per mode of ``--warmup`` messages (the Java brokers' JIT, every broker's caches).  The client
JVM runs on the same machine and costs CPU (its figure is printed): with 2 CPUs the flat-out
rate is the broker's and the client's cost per message together, so the broker CPU per message
is the figure that compares the brokers most directly.

Durability, like with like: all three sync their journal before they answer a synchronous
persistent send, on the same file system (each in a temporary directory).  Junction's journal
(``journal-buffer-timeout`` 500 us, its default) syncs a lone producer's send at once and
spaces syncs by that interval only under concurrent producers; Classic's KahaDB writes and syncs
each batch of what has gathered with no timer; the Artemis instance is made with the test
harness's ``artemis create --no-autotune`` and its ``journal-buffer-timeout`` set to
``--artemis-buffer-timeout-ns`` (100,000 by default: what ``artemis create``'s auto-tuning
sets on a fast disk, instead of the 3.33 ms NIO default that would cap one synchronous
producer near 300 msg/s).

``--baseline REV`` adds a fourth target, ``baseline``: a second Junction node running git
revision REV of this repository (exported by ``bench/baseline.py``, started like the first with
``PYTHONPATH`` to that tree and the same ``PYTHONHASHSEED``), in the same rotated rounds, with
the ratio junction / baseline printed: the way to measure a change of the node against the
build before it in one invocation (``--targets junction`` leaves the Java brokers out).

``--quick`` runs 200 messages, one round, no warm-up, paced latency at 500 msg/s: a smoke
test (tests/integration/test_bench_openwire.py), not a measurement.

Run: ``python bench/openwire_throughput.py`` (``--json`` for one JSON line at the end).
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
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import common  # noqa: E402

MODES = ("sync-persistent", "async-persistent", "non-persistent")
TARGETS = ("junction", "classic", "artemis")
#: JVM options of the load generator (JIT fully on: it runs for seconds, not one scenario)
JVM_OPTIONS = ("-Xmx512m",)
#: the heap of both Java brokers (Debian's service runs Classic with 512M)
BROKER_HEAP = "512M"
BENCH_SOURCE = REPO / "tests" / "java" / "openwire" / "OpenWireBench.java"


class Tools:
    """The client's jars and the compiled load generator (compiled once, in the test cache)."""

    def __init__(self, client: str) -> None:
        from tests.classic import client_jars, compile_scenario

        self.jars = client_jars(client)
        classes = compile_scenario(self.jars, BENCH_SOURCE)
        self.classpath = os.pathsep.join([self.jars.classpath, str(classes)])


@contextmanager
def junction_node(tmp: str, build=None):
    """A Junction node with an OPENWIRE acceptor; yields (url, pid, description).

    ``build`` (a :class:`bench.baseline.Build`): run that build's tree instead of this checkout's.
    """
    from tests import harness

    port = harness.free_port()
    node = harness.BrokerProcess(
        tmp,
        name="bench-openwire",
        security=False,
        persistence=True,
        extra_acceptors_xml=(
            f'<acceptor name="openwire">tcp://{harness.LOOPBACK}:{port}?protocols=OPENWIRE</acceptor>'
        ),
        **({"env": build.env()} if build is not None else {}),
    )
    node.start()
    try:
        if build is not None and build.name == "baseline":
            build.check_imported()
        label = f", {build.label}" if build is not None else ""
        yield f"tcp://{harness.LOOPBACK}:{port}", node.pid, f"journal fdatasync, buffer timeout 500 us{label}"
    finally:
        node.stop()


@contextmanager
def classic_broker(tmp: str):
    """Debian's ActiveMQ Classic (anonymous, KahaDB); yields (url, pid, description)."""
    from tests.classic import ClassicBroker

    broker = ClassicBroker(Path(tmp), "classic", anonymous=True, heap=BROKER_HEAP, jvm_options=())
    broker.start()
    try:
        yield broker.url, broker.proc.pid, "KahaDB, disk syncs on"
    finally:
        broker.stop()


@contextmanager
def artemis_broker(tmp: str, buffer_timeout_ns: int):
    """A real Artemis broker (anonymous allowed); yields (url, pid, journal description)."""
    from tests.artemis.broker import ArtemisBroker
    from tests.artemis.cache import fetch

    broker = ArtemisBroker(fetch(), Path(tmp), anonymous=True, heap=BROKER_HEAP, jvm_options=()).create()
    element = f"<journal-buffer-timeout>{buffer_timeout_ns}</journal-buffer-timeout>"

    def set_timeout(xml: str) -> str:
        xml, n = re.subn(r"<journal-buffer-timeout>\d+</journal-buffer-timeout>", element, xml)
        return xml if n else xml.replace("</core>", element + "</core>", 1)

    broker.edit_broker_xml(set_timeout)
    xml = broker.broker_xml_path.read_text()
    m = re.search(r"<journal-type>(\w+)</journal-type>", xml)
    t = re.search(r"<journal-buffer-timeout>(\d+)</journal-buffer-timeout>", xml)
    broker.start()
    try:
        yield (
            broker.url,
            broker.proc.pid,
            f"journal-type {m.group(1) if m else 'default'}, "
            f"journal-buffer-timeout {t.group(1) if t else 'default'} ns",
        )
    finally:
        broker.stop()


def tree_cpu_ticks(pid: int) -> int | None:
    """utime+stime of ``pid`` and its live descendants (a node's helper processes count)."""
    total = common.proc_cpu_ticks(pid)
    if total is None:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return total
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            total += tree_cpu_ticks(child) or 0
    return total


def trial(tools: Tools, url: str, pid: int, mode: str, n: int, rate: float, args, queue: str) -> dict:
    """One OpenWireBench JVM: its JSON result plus broker and client CPU us/msg."""
    cmd = [
        "java", *JVM_OPTIONS, "-cp", tools.classpath, "OpenWireBench",
        url, queue, str(n), str(args.size), mode, str(rate), str(args.timeout),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready = proc.stdout.readline()
        if "ready" not in ready:
            proc.kill()
            raise common.BenchError(
                f"OpenWireBench did not start: {ready.strip()} {proc.stderr.read()[-2000:]}"
            )
        cpu0 = tree_cpu_ticks(pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        cpu1 = tree_cpu_ticks(pid)
        proc.wait(args.timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = json.loads(line) if line.strip() else {"error": "no result"}
    if "error" in result:
        raise common.BenchError(f"{mode}: {result['error']}")
    result["client_cpu_us_per_msg"] = result["client_cpu_s"] * 1e6 / n
    if cpu0 is not None and cpu1 is not None:
        result["broker_cpu_us_per_msg"] = (cpu1 - cpu0) / common.CLK_TCK * 1e6 / n
    return result


def summarise(flat: list[dict], paced: list[dict]) -> dict:
    """Medians over rounds of one mode on one target."""

    def med(rows, key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return statistics.median(values) if values else None

    return {
        "msgs_per_s": med(flat, "msgs_per_s"),
        "p50_ms": med(paced, "p50_ms"),
        "p99_ms": med(paced, "p99_ms"),
        "broker_cpu_us_per_msg": med(flat, "broker_cpu_us_per_msg"),
        "client_cpu_us_per_msg": med(flat, "client_cpu_us_per_msg"),
    }


def run(tools: Tools, args, targets: list[str]) -> tuple[dict, dict]:
    """Every target up at once; rounds of every mode on every target, order rotated."""
    endpoints, notes = {}, {}
    with ExitStack() as stack:
        for kind in targets:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"junction-bench-ow-{kind}-"))
            if kind == "junction":
                # beside a baseline, with the same PYTHONHASHSEED as its node
                ctx = junction_node(tmp, getattr(args, "current_build", None))
            elif kind == "baseline":
                ctx = junction_node(tmp, args.baseline_build)
            elif kind == "classic":
                ctx = classic_broker(tmp)
            else:
                ctx = artemis_broker(tmp, args.artemis_buffer_timeout_ns)
            url, pid, notes[kind] = stack.enter_context(ctx)
            endpoints[kind] = (url, pid)
            print(f"{kind}: {url} pid {pid} ({notes[kind]})", file=sys.stderr)
        if args.warmup:
            for kind in targets:
                for mode in args.modes:
                    trial(tools, *endpoints[kind], mode, args.warmup, 0, args, f"bench.ow.warm.{mode}")
        flat = {(k, m): [] for k in targets for m in args.modes}
        paced = {(k, m): [] for k in targets for m in args.modes}
        for r in range(args.rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for mode in args.modes:
                for kind in order:
                    q = f"bench.ow.{mode}.{r}"
                    f = trial(tools, *endpoints[kind], mode, args.messages, 0, args, q + ".f")
                    p = trial(tools, *endpoints[kind], mode, args.paced_messages, args.rate, args, q + ".p")
                    flat[kind, mode].append(f)
                    paced[kind, mode].append(p)
                    print(
                        f"  round {r} {kind} {mode}: {f['msgs_per_s']:.0f} msg/s, "
                        f"p50 {p['p50_ms']:.2f} p99 {p['p99_ms']:.2f} ms, "
                        f"broker {common.fmt(f.get('broker_cpu_us_per_msg'), '.0f')} us/msg",
                        file=sys.stderr,
                    )
    results = {k: {m: summarise(flat[k, m], paced[k, m]) for m in args.modes} for k in targets}
    return results, notes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--paced-messages", type=int, default=10_000, help="messages of the paced latency trial")
    p.add_argument("--size", type=int, default=256, help="characters of each TextMessage")
    p.add_argument("--rate", type=float, default=2000.0, help="msg/s of the paced latency trial")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5_000, help="messages of each unmeasured warm-up trial (0: none)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--client", default="5.17", choices=("5.17", "6"), help="the Classic client")
    p.add_argument("--artemis-buffer-timeout-ns", type=int, default=100_000)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one trial may take")
    p.add_argument("--quick", action="store_true", help="200 messages, one round: a smoke test")
    p.add_argument("--baseline", metavar="REV", help="also run git revision REV as target 'baseline'")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.messages, args.paced_messages, args.rounds, args.rate, args.warmup = 200, 200, 1, 500.0, 0
    args.modes = [m.strip() for m in args.modes.split(",")]
    targets = [t.strip() for t in args.targets.split(",")]
    if (
        args.rounds < 1
        or args.messages < 1
        or args.paced_messages < 1
        or any(m not in MODES for m in args.modes)
        or any(t not in TARGETS for t in targets)
    ):
        print("bad --rounds/--messages/--modes/--targets", file=sys.stderr)
        return 2
    tools = Tools(args.client)
    load0 = os.getloadavg()
    with ExitStack() as stack:
        if args.baseline:
            from bench import baseline

            try:
                commit = baseline.resolve(args.baseline)
                tree = stack.enter_context(baseline.exported(commit))
            except baseline.BaselineError as exc:
                print(exc, file=sys.stderr)
                return 2
            args.baseline_build = baseline.Build(baseline.BASELINE, tree, baseline.describe(commit))
            args.current_build = baseline.current_build()
            targets.append("baseline")
        results, notes = run(tools, args, targets)
    load1 = os.getloadavg()
    print(f"\ncommand: {shlex.join([sys.executable, *sys.argv])}")
    print(
        f"OpenWire ({tools.jars.name} client {tools.jars.version}): {args.messages:,} x "
        f"{args.size} chars flat out, latency at {args.rate:g} msg/s ({args.paced_messages:,} msgs), "
        f"median of {args.rounds}, {os.cpu_count()} CPUs, load average {load0[0]:.2f} -> {load1[0]:.2f}"
    )
    for kind, note in notes.items():
        print(f"  {kind}: {note}")
    columns = (("target", 9), ("mode", 17), *common.FIGURE_COLUMNS)
    print(common.header_line(columns, 2))
    for kind, rows in results.items():
        for mode, r in rows.items():
            print(common.table_row([kind.ljust(9), mode.ljust(17)], common.figure_cells(r), columns))
    ratios = {}
    for peer in ("classic", "artemis", "baseline"):
        if "junction" not in results or peer not in results:
            continue
        print(f"\nratio junction / {peer}")
        ratios[peer] = {}
        for mode in args.modes:
            j, o = results["junction"][mode], results[peer][mode]
            ratios[peer][mode] = {k: common.ratio(j[k], o[k]) for k in common.RATIO_METRICS}
            print(
                f"  {mode:17} "
                + "  ".join(f"{k} {common.fmt(v, '.2f')}" for k, v in ratios[peer][mode].items())
            )
    if args.json:
        print(
            json.dumps(
                {
                    "bench": "openwire_throughput",
                    "client": f"{tools.jars.name} {tools.jars.version}",
                    "results": results,
                    "ratios": ratios,
                    "notes": notes,
                    "load": [load0[0], load1[0]],
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
