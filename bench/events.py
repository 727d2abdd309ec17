#!/usr/bin/env python3
"""What the event log costs: STOMP through a node without ``<events>``, with it, and sampled.

Each run starts (up to) four fresh ``junction run`` processes in a
temporary directory, on free ports on 127.0.0.1 (``tests/harness.py``;
security off, persistence on, each with the queue ``bench`` declared in
``<addresses>`` and a STOMP acceptor with ``anycastPrefix=/queue/``):

* **off** -- a node without ``<junction><events>`` (no event log);
* **on** -- the same node with ``<events directory=DIR connection="true"
  message="true" topology="true" message-sample-rate="1.0"/>``: every
  message's ``message.sent``, ``message.delivered`` and
  ``message.acknowledged`` are written (``junction/brokercore/events.py``
  emits them, ``junction/events/writer.py`` queues and spools them, and the
  node's event writer process, ``junction/events/sink.py``, writes them);
* **sampled** -- the same with ``message-sample-rate`` ``--sample-rate``
  (0.1); leave it out with ``--no-sampled``;
* **control** (with ``--control``) -- a second node without ``<events>``,
  exactly like **off**: control/off is the bench's own error (two identical
  nodes measured alike), the yardstick for on/off.

For non-durable and durable messages it measures each scenario with the
clients and the flow of ``bench/stomp_throughput.py`` and ``bench/cluster.py``:
``--count`` (20,000) messages of ``--size`` (256) bytes, one stomp.py
producer (TCP_NODELAY) and one stomp.py consumer in another process
(``ack:auto``, ``activemq.prefetchSize:1000``, SUBSCRIBE confirmed by a
receipt before the first SEND).  Durable messages are sent
``persistent:true`` with a receipt on every SEND, at most 1000 outstanding;
non-durable ones ``persistent:false`` without receipts.  msg/s is the count
divided by the time from the first SEND to the consumer receiving the last
distinct message.

Node CPU is the node's user+system time (``/proc``, all threads) plus its
event writer process's (``junction/events/sink.py``, from the pid in the
node's status) per message, over two windows: from the first SEND to the
last message received (``node us/msg``), and from the first SEND until the
writer has written everything the trial produced (``+drain us/msg``: the
events still queued or spooled when the last message arrived are paid for
after it; the off node is measured over the same kind of wait, so the two
columns compare alike).  ``reactor us/msg`` is the node's main thread alone
(the reactor, where the broker core captures the events) until the last
message; ``writer us/msg`` is the writer process and the node's thread that
spools, over the +drain window (from the node's status).

Every trial is checked, and fails loudly otherwise: the consumer received
each message exactly once, every receipt came back (durable), the ``bench``
queue took exactly ``--count`` messages and is empty afterwards, and on a
node with events ``GET /api/status`` -> ``events`` shows nothing dropped and
no failure.  The trial's events are then read back from the files (the
bytes appended since the trial began) and counted per kind; they must be:

* **on**: exactly ``count`` ``message.sent``, ``message.delivered`` and
  ``message.acknowledged`` (auto-ack: the broker acknowledges on delivery),
  each naming the same ``count`` distinct message ids, with address and
  queue ``bench`` and the trial's durability; 2 ``connection.accepted`` and
  2 ``connection.closed`` (producer and consumer); nothing else; and the
  writer's ``written`` counter grew by exactly the number of lines read;
* **sampled**: the same, except that the messages written are a sample: the
  three kinds name the same ids (a sampled message has all its events), and
  their number is within 6 standard deviations of ``count x rate``;
* **off**: the node's status has no event log.

Scenarios alternate (off, on, sampled; then sampled, on, off; ...) over
``--runs`` (3) rounds, each round in nodes of its own after a ``--warmup``
(2,000 messages, checked the same way) of each: a node process keeps
whatever speed it started with for its life (two identical nodes, started
together, differed by up to 8% in msg/s over a whole invocation), so fresh
nodes per round let the medians average that out rather than carry one
draw into every run.  The table gives medians and the ratios on/off and
sampled/off of the medians, the verdict against the target "events on
cost no more than 10% of broker throughput" (on/off msg/s >= 0.90), and
beside it the median of each round's own on/off.  ``others`` is the cores busy with anything else over a trial
(``/proc/stat`` busy ticks minus the node and the clients, as in
``bench/amqp_throughput.py``): well above 0 means another program competed
for the CPUs.

    .venv/bin/python bench/events.py --runs 3
    .venv/bin/python bench/events.py --quick     # smoke run, small counts
    .venv/bin/python bench/events.py --json      # plus one JSON line at the end

Bounded: ``--timeout`` (900 s) caps the run; a watchdog stops every node and
exits with status 3 past the cap (plus 20 s); every wait polls with a
deadline; the nodes are stopped on any exit (``finally``, Ctrl-C, SIGTERM;
the harness also gives them ``PR_SET_PDEATHSIG``).  The exit status is 1
when a trial failed (a check, not the target: the verdict is printed).

Limits: on a machine with 2 cores the node shares the CPUs with the two
clients, so the event writer thread competes both for the node's GIL and
for a core; the ratio measures that as such a host would see it.  CPU is
sampled at CLK_TCK resolution (10 ms).  Event files go to the temporary
directory's file system (page cache; nothing is fsynced by the writer).
"""

from __future__ import annotations

import argparse
import array
import glob
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

try:  # imported as bench.events from the repository root
    from . import cluster, common, stomp_throughput
except ImportError:  # run as ``python bench/events.py``: bench/ is on sys.path
    import cluster
    import common
    import stomp_throughput

NAME = "events bench"
QUEUE = cluster.QUEUE
DESTINATION = cluster.DESTINATION
PREFETCH = cluster.PREFETCH
RECEIPT_WINDOW = cluster.RECEIPT_WINDOW
ADDRESSES_XML = cluster.ADDRESSES_XML
SCENARIOS = ("off", "on", "sampled")
LABELS = {"off": "events off", "on": "events on", "sampled": "sampled", "control": "control"}
EVENTS_XML = (
    '<events directory="{dir}" connection="true" message="true" topology="true" '
    'message-sample-rate="{rate}"/>'
)
MESSAGE_KINDS = ("message.sent", "message.delivered", "message.acknowledged")
#: the connection events of a trial: its producer and its consumer
CONNECTIONS = 2
#: the writer flushes every 0.2 s; "idle" is no change in its counters over this long
STABLE_S = 0.5
#: the target: events on keep at least this share of the throughput without them
TARGET_RATIO = 0.90


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    nodes: dict  # scenario -> tests.harness.BrokerProcess
    events_dirs: dict  # scenario -> the node's event directory (None: no event log)
    rates: dict  # scenario -> message sample rate (None: no event log)
    tmp: str


def node_ticks(pid: int, writer_pid: int | None) -> int | None:
    """CPU ticks of the node and of its event writer process (if any)."""
    ticks = common.proc_cpu_ticks(pid)
    if ticks is None or writer_pid is None:
        return ticks
    writer = common.proc_cpu_ticks(writer_pid)
    return None if writer is None else ticks + writer


def events_status(node) -> dict | None:
    """The node's ``/api/status`` ``events`` object, or None without an event log."""
    return node.status(timeout=2.0).get("events")


def settle(node, deadline: common.Deadline) -> None:
    """Until the node is idle: ``bench`` empty without consumers, no event queued."""

    def idle():
        if not node.running:
            raise common.BenchError(f"node {node.name} exited\n{node.log_tail(30)}")
        status = node.status(timeout=2.0)
        q = next((x for x in status["queues"] if x["name"] == QUEUE), None)
        if q is None:
            return (False, f"no queue {QUEUE}")
        if q["message_count"] or q["consumer_count"]:
            return (False, {"messages": q["message_count"], "consumers": q["consumer_count"]})
        ev = status.get("events")
        if ev is not None and ev["queued"]:
            return (False, {"events queued": ev["queued"]})
        return True

    cluster.wait_until(idle, f"node {node.name}: {QUEUE} empty, no consumer, no event queued", deadline)


def drain(node, written0: int | None, least: int, deadline: common.Deadline) -> dict | None:
    """Until the node's event writer has written at least ``least`` events since
    ``written0`` and then stayed idle (nothing queued, counters unchanged) for
    :data:`STABLE_S`; its final ``events`` status.  Without an event log: one
    wait of the same length, so that both kinds of node are measured alike.
    """
    end = common.Deadline(deadline.cap(cluster.SETTLE_SECONDS))
    last = None
    while True:
        ev = events_status(node)
        if ev is None:
            time.sleep(STABLE_S)
            return None
        if ev["failed"]:
            raise common.BenchError(f"node {node.name}: the event log failed: {ev['failed']}")
        key = (ev["queued"], ev["written"], ev["dropped"])
        if ev["queued"] == 0 and ev["written"] - written0 >= least and key == last:
            return ev
        last = key
        if end.remaining() <= 0:
            raise common.BenchError(
                f"node {node.name}: timed out waiting for the event writer to write "
                f">= {least} events and go idle; last status {ev}"
            )
        time.sleep(STABLE_S)


def file_sizes(directory: str | None) -> dict[str, int]:
    """Every event file of ``directory`` -> its size now (the trial reads what comes after)."""
    if directory is None:
        return {}
    return {p: os.path.getsize(p) for p in glob.glob(os.path.join(directory, "*.jsonl"))}


def new_events(directory: str, before: dict[str, int]) -> list[dict]:
    """The events appended to ``directory``'s files since ``before`` (:func:`file_sizes`)."""
    now = sorted(glob.glob(os.path.join(directory, "*.jsonl")))
    gone = set(before) - set(now)
    if gone:
        raise common.BenchError(f"event files deleted during the trial: {sorted(gone)}")
    out = []
    for path in now:
        with open(path, "rb") as f:
            f.seek(before.get(path, 0))
            data = f.read()
        if data and not data.endswith(b"\n"):
            raise common.BenchError(f"{path}: the last event line is incomplete")
        for line in data.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise common.BenchError(f"{path}: not JSON: {line[:200]!r}: {e}") from None
    return out


@contextmanager
def world(args, deadline: common.Deadline):
    """Start the nodes of the scenarios in a temp dir, yield a :class:`World`, stop them."""
    h = common.harness()
    tmp = tempfile.mkdtemp(prefix="junction-bench-events-")
    rates = {"off": None, "on": 1.0, "sampled": args.sample_rate, "control": None}
    nodes, dirs = {}, {}
    for scenario in args.scenarios:
        rate = rates[scenario]
        root = args.events_root or os.path.join(tmp, scenario)
        directory = None if rate is None else os.path.join(root, f"events-{scenario}")
        dirs[scenario] = directory
        junction_xml = "" if rate is None else EVENTS_XML.format(dir=directory, rate=f"{rate:g}")
        nodes[scenario] = h.BrokerProcess(
            tmp,
            name=scenario,
            security=False,
            persistence=True,
            stomp_acceptor_params={"anycastPrefix": "/queue/"},
            extra_junction_xml=junction_xml,
            extra_core_xml=ADDRESSES_XML,
            startup_timeout=deadline.cap(60.0),
        )
    for name, node in nodes.items():
        common.CLEANUP.push(name, node.stop)
    w = World(nodes, dirs, {s: rates[s] for s in nodes}, tmp)
    ok = False
    try:
        for scenario, node in nodes.items():
            node.start()
            has_log = events_status(node) is not None
            if has_log != (w.rates[scenario] is not None):
                raise common.BenchError(
                    f"node {scenario}: event log {'present' if has_log else 'absent'} in its "
                    f"status, expected {'present' if not has_log else 'absent'}"
                )
            settle(node, deadline)
        print(
            "; ".join(f"{n}: pid {b.pid}, STOMP 127.0.0.1:{b.stomp_port}" for n, b in nodes.items())
            + f"; dir {tmp}",
            file=sys.stderr,
        )
        yield w
        ok = True
    finally:
        if not ok:
            for node in nodes.values():
                if node.proc is not None:
                    print(node.log_tail(20), file=sys.stderr)
        for name in reversed(list(nodes)):
            common.CLEANUP.run(name)
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
            for directory in dirs.values():
                if directory is not None:
                    shutil.rmtree(directory, ignore_errors=True)
        else:
            print(f"{NAME}: directory kept at {tmp}", file=sys.stderr)


# --------------------------------------------------------------------------- the checks


def check_events(events: list[dict], n: int, rate: float, durable: bool) -> dict:
    """The trial's events against what the writer must have written; their counts per kind."""
    kinds = Counter(e["kind"] for e in events)
    ids = {k: [e["message_id"] for e in events if e["kind"] == k] for k in MESSAGE_KINDS}
    expected_other = {"connection.accepted": CONNECTIONS, "connection.closed": CONNECTIONS}
    other = {k: c for k, c in kinds.items() if k not in MESSAGE_KINDS}
    if other != expected_other:
        raise common.BenchError(f"connection/other events {other}, expected {expected_other}")
    sent = ids["message.sent"]
    if len(set(sent)) != len(sent):
        raise common.BenchError(f"{len(sent) - len(set(sent))} message ids have several message.sent")
    for k in MESSAGE_KINDS[1:]:
        if len(ids[k]) != len(sent) or set(ids[k]) != set(sent):
            raise common.BenchError(
                f"{len(ids[k])} {k} events against {len(sent)} message.sent "
                f"({len(set(ids[k]) ^ set(sent))} ids in only one of them)"
            )
    if rate >= 1.0:
        if len(sent) != n:
            raise common.BenchError(f"{len(sent)} message.sent events written, expected {n}")
    else:
        mean = n * rate
        slack = 6.0 * math.sqrt(n * rate * (1.0 - rate)) + 1.0
        if abs(len(sent) - mean) > slack:
            raise common.BenchError(
                f"{len(sent)} of {n} messages sampled at rate {rate:g}: expected {mean:.0f} +/- {slack:.0f}"
            )
    wrong = [
        e
        for e in events
        if e["kind"] == "message.sent"
        and (e["address"] != QUEUE or e["queues"] != [QUEUE] or e["durable"] is not durable)
    ]
    if wrong:
        raise common.BenchError(f"{len(wrong)} message.sent events name other queues or durability: {wrong[0]}")
    wrong = [e for e in events if e["kind"] in MESSAGE_KINDS[1:] and e["queue"] != QUEUE]
    if wrong:
        raise common.BenchError(f"{len(wrong)} delivery events name another queue: {wrong[0]}")
    return dict(kinds)


# --------------------------------------------------------------------------- one trial


def trial(
    w: World, scenario: str, durable: bool, n: int, args, deadline: common.Deadline, tag: str
) -> dict:
    """One producer/consumer trial of ``n`` messages on the scenario's node; figures and checks."""
    node = w.nodes[scenario]
    directory, rate = w.events_dirs[scenario], w.rates[scenario]
    settle(node, deadline)
    ev0 = events_status(node)
    files0 = file_sizes(directory)
    added0 = cluster.queues_of(node)[QUEUE]["messages_added"]
    body = b"x" * args.size
    prod_l = stomp_throughput.ProducerListener(RECEIPT_WINDOW, n)
    prod = None
    t = cluster.target(node)
    consumer = common.ConsumerSide(
        args.clients,
        stomp_throughput.consumer_main,
        t,
        DESTINATION,
        n,
        "auto",
        "1.2",
        deadline.remaining(),
    )
    try:
        consumer.recv(deadline, "the consumer to subscribe")
        prod = cluster.open_producer(t, prod_l, deadline)
        writer_pid = None if ev0 is None else ev0.get("writer_pid")
        cpu0 = node_ticks(node.pid, writer_pid)
        main0 = common.proc_cpu_ticks(node.pid, node.pid)
        host0 = common.host_busy_ticks()
        client0 = time.process_time()
        t0 = time.monotonic_ns()
        cluster.send_messages(prod, prod_l, body, n, durable, deadline)
        _, t_last, lat_bytes, duplicates, consumer_cpu = consumer.recv(
            deadline, "the last message", check=prod_l.raise_if_failed
        )
        cpu1 = node_ticks(node.pid, writer_pid)
        main1 = common.proc_cpu_ticks(node.pid, node.pid)
        host1 = common.host_busy_ticks()
        client1 = time.process_time()
        t_end = time.monotonic_ns()
        # what the writer still had queued when the last message arrived
        queued_at_end = None if ev0 is None else events_status(node)["queued"]
        if durable:
            stomp_throughput.wait_event(
                prod_l.all_receipts, prod_l, common.Deadline(deadline.cap(10.0)), "receipts"
            )
    finally:
        stomp_throughput.close_connection(prod, prod_l)
        consumer.close()
    # the events the trial must at least have produced: all of them at rate 1, else the connections'
    least = 0 if ev0 is None else 2 * CONNECTIONS + (3 * n if rate >= 1.0 else 0)
    ev1 = drain(node, None if ev0 is None else ev0["written"], least, deadline)
    cpu2 = node_ticks(node.pid, writer_pid)

    # the checks: exactly n once each, every receipt, all through the queue, events as written
    if duplicates:
        raise common.BenchError(f"the consumer received {duplicates} duplicates of {n} messages")
    if durable and prod_l.send_receipts != n:
        raise common.BenchError(f"{prod_l.send_receipts} of {n} receipts came back")
    settle(node, deadline)
    took = cluster.queues_of(node)[QUEUE]["messages_added"] - added0
    if took != n:
        raise common.BenchError(f"queue {QUEUE} took {took} messages, expected {n}")
    kinds: dict = {}
    written = dropped = None
    if ev0 is None:
        if events_status(node) is not None:
            raise common.BenchError(f"node {scenario} has an event log")
    else:
        written = ev1["written"] - ev0["written"]
        dropped = ev1["dropped"] - ev0["dropped"]
        if dropped:
            raise common.BenchError(f"the event log dropped {dropped} events (queue full)")
        events = new_events(directory, files0)
        if len(events) != written:
            raise common.BenchError(
                f"{len(events)} event lines appended to the files, but the writer counted {written}"
            )
        kinds = check_events(events, n, rate, durable)

    elapsed = (t_last - t0) / 1e9
    lat = sorted(array.array("q", lat_bytes))
    node_s = (cpu1 - cpu0) / common.CLK_TCK if cpu0 is not None and cpu1 is not None else None
    drain_s = (cpu2 - cpu0) / common.CLK_TCK if cpu0 is not None and cpu2 is not None else None
    client_cpu = (client1 - client0) + (consumer_cpu if args.clients == "process" else 0.0)
    others = None
    if host0 is not None and host1 is not None and node_s is not None:
        ours = node_s + client_cpu
        others = max(0.0, ((host1 - host0) / common.CLK_TCK - ours) / ((t_end - t0) / 1e9))
    return {
        "scenario": scenario,
        "durable": durable,
        "messages": n,
        "msgs_per_s": n / elapsed if elapsed > 0 else None,
        "elapsed_s": elapsed,
        "p50_ms": common.percentile(lat, 50) / 1e6,
        "p99_ms": common.percentile(lat, 99) / 1e6,
        "node_cpu_us_per_msg": node_s * 1e6 / n if node_s is not None else None,
        "drain_cpu_us_per_msg": drain_s * 1e6 / n if drain_s is not None else None,
        "client_cpu_us_per_msg": client_cpu * 1e6 / n,
        "main_cpu_us_per_msg": (
            (main1 - main0) / common.CLK_TCK * 1e6 / n if main0 is not None and main1 is not None else None
        ),
        "writer_cpu_us_per_msg": (
            None if ev0 is None else (sum(ev1.get(k, 0.0) - ev0.get(k, 0.0) for k in ("writer_cpu_s", "shipper_cpu_s"))) * 1e6 / n
        ),
        "receipts": prod_l.send_receipts if durable else None,
        "events_written": written,
        "events_dropped": dropped,
        "events_queued_at_last_message": queued_at_end,
        "message_sent_events": kinds.get("message.sent") if ev0 is not None else None,
        "event_kinds": kinds,
        "other_cores": others,
    }


# --------------------------------------------------------------------------- running


def order(scenarios: tuple[str, ...], run: int) -> tuple[str, ...]:
    """off, on, sampled in even rounds; sampled, on, off in odd ones."""
    return scenarios if run % 2 == 0 else scenarios[::-1]


def echo(row: dict, what: str = "") -> None:
    head = f"  {what}{LABELS[row['scenario']]:10} {'durable' if row['durable'] else 'non-durable':11}"
    if "error" in row:
        print(f"{head} ERROR: {row['error']}", file=sys.stderr)
    else:
        f = common.fmt
        print(
            f"{head} {row['msgs_per_s']:9,.0f} msg/s  node {f(row['node_cpu_us_per_msg'], '.1f')} "
            f"us/msg (+drain {f(row['drain_cpu_us_per_msg'], '.1f')})  events "
            f"{f(row['events_written'], ',')} (queued at the end {f(row['events_queued_at_last_message'], ',')})"
            f"  others {f(row['other_cores'], '.2f')}",
            file=sys.stderr,
        )


def run_all(args, deadline: common.Deadline) -> dict:
    """Every run in nodes of its own (see the module's docstring), warm-ups first."""
    out: dict = {
        "trials": [], "loadavg_start": os.getloadavg()[0], "node_log_problems": {}, "events_status": {}, "collector": {}
    }
    for run in range(args.runs):
        with world(args, deadline) as w:
            for durable in args.durabilities:
                for scenario in args.scenarios if args.warmup else ():
                    key = {"scenario": scenario, "durable": durable}
                    row = common.guarded(
                        partial(trial, w, scenario, durable, args.warmup, args, deadline, ".warm"),
                        key,
                        deadline,
                    )
                    if "error" in row:
                        row["run"] = "warm-up"
                        out["trials"].append(row)  # a failed check fails the run
                        echo(row, "warm-up ")
                for scenario in order(args.scenarios, run):
                    key = {"scenario": scenario, "durable": durable}
                    row = common.guarded(
                        partial(trial, w, scenario, durable, args.count, args, deadline, ""),
                        key,
                        deadline,
                    )
                    row["run"] = run
                    out["trials"].append(row)
                    echo(row)
            for name, node in w.nodes.items():
                out["node_log_problems"].setdefault(name, []).extend(cluster.log_problems(node))
                full = node.status(timeout=2.0)
                add_collector(out["collector"].setdefault(name, {}), full.get("collector") or {})
                status = full.get("events")
                if status is not None:
                    total = out["events_status"].setdefault(name, {"written": 0, "dropped": 0, "queued": 0, "failed": None})
                    total["written"] += status["written"]
                    total["dropped"] += status["dropped"]
                    total["queued"] += status["queued"]
                    total["failed"] = total["failed"] or status["failed"]
                else:
                    out["events_status"].setdefault(name, None)
    out["loadavg_end"] = os.getloadavg()[0]
    return out


def add_collector(total: dict, status: dict) -> None:
    """Add one node's ``/api/status`` ``collector`` (its collections since start, timed) to ``total``."""
    watched = status.get("watched")
    total["thresholds"] = status.get("thresholds")
    total["nodes"] = total.get("nodes", 0) + 1
    if watched is None:
        return
    for k in ("collections", "pause_s"):
        total[k] = [a + b for a, b in zip(total.get(k, [0, 0, 0]), watched[k], strict=True)]
    total["longest_pause_ms"] = [
        max(a, b) for a, b in zip(total.get("longest_pause_ms", [0.0, 0.0, 0.0]), watched["longest_pause_ms"], strict=True)
    ]


# --------------------------------------------------------------------------- summary


FIELDS = (
    "msgs_per_s",
    "p50_ms",
    "p99_ms",
    "node_cpu_us_per_msg",
    "drain_cpu_us_per_msg",
    "client_cpu_us_per_msg",
    "main_cpu_us_per_msg",
    "writer_cpu_us_per_msg",
    "events_written",
    "message_sent_events",
    "events_queued_at_last_message",
    "other_cores",
)


def measured(out: dict, scenario: str, durable: bool) -> list[dict]:
    return [
        r
        for r in out["trials"]
        if r["scenario"] == scenario and r["durable"] == durable and r.get("run") != "warm-up"
    ]


def summarize(out: dict, args) -> dict:
    """Per durability and scenario: the medians of the runs, and the ratios to ``off``."""
    s: dict = {}
    for durable in args.durabilities:
        d: dict = {}
        for scenario in args.scenarios:
            rows = [r for r in measured(out, scenario, durable) if "error" not in r]
            m = {}
            for f in FIELDS:
                vals = [r[f] for r in rows if r.get(f) is not None]
                m[f] = statistics.median(vals) if vals else None
            m["events_dropped"] = sum(r["events_dropped"] or 0 for r in rows)
            m["runs"] = len(rows)
            d[scenario] = m
        off = d.get("off")
        for scenario in args.scenarios:
            m = d[scenario]
            m["ratio_off"] = common.ratio(m["msgs_per_s"], off and off["msgs_per_s"])
            m["cpu_ratio_off"] = common.ratio(
                m["node_cpu_us_per_msg"], off and off["node_cpu_us_per_msg"]
            )
            m["drain_cpu_ratio_off"] = common.ratio(
                m["drain_cpu_us_per_msg"], off and off["drain_cpu_us_per_msg"]
            )
            m["paired_ratio_off"] = paired_ratio(out, scenario, durable)
        s["durable" if durable else "non-durable"] = d
    return s


def paired_ratio(out: dict, scenario: str, durable: bool) -> float | None:
    """The median over runs of ``scenario``'s msg/s over ``off``'s in the same run (the
    two trials ran back to back, so a slow spell of the machine touches both alike)."""
    by_run = {
        r["run"]: r["msgs_per_s"] for r in measured(out, "off", durable) if "error" not in r and r.get("msgs_per_s")
    }
    ratios = [
        r["msgs_per_s"] / by_run[r["run"]]
        for r in measured(out, scenario, durable)
        if "error" not in r and r.get("msgs_per_s") and r["run"] in by_run
    ]
    return statistics.median(ratios) if ratios else None


def verdicts(s: dict) -> dict:
    """Per durability: whether events on keep >= TARGET_RATIO of the throughput (None: unmeasured)."""
    out = {}
    for dname, d in s.items():
        r = d.get("on", {}).get("ratio_off")
        out[dname] = None if r is None else r >= TARGET_RATIO
    return out


command_line = common.command_line


def print_report(out: dict, s: dict, args) -> None:
    f = common.fmt
    print(f"\ncommand: {command_line()}")
    print(
        "STOMP through one node without <events> (off), with every category at sample rate 1 (on)"
        + (f" and at message-sample-rate {args.sample_rate:g} (sampled)" if "sampled" in args.scenarios else "")
        + f"; {args.count:,} x {args.size} B, one producer, one consumer in another process, prefetch "
        f"{PREFETCH}, ack auto; durable: persistent, a receipt per SEND, window {RECEIPT_WINDOW}; "
        f"{os.cpu_count()} CPUs; {args.runs} run(s) per scenario, rotated, medians; warm-up "
        f"{args.warmup}; load average {out['loadavg_start']:.2f} at start, {out['loadavg_end']:.2f} at the end"
    )
    print(
        f"\n{'durable':11}  {'scenario':10}  {'msg/s':>9}  {'vs off':>6}  {'p50 ms':>7}  {'p99 ms':>7}  "
        f"{'node us/msg':>11}  {'+drain us/msg':>13}  {'CPU vs off':>10}  {'client us/msg':>13}  "
        f"{'reactor us/msg':>14}  {'writer us/msg':>13}  {'events':>7}  {'sent ev':>7}  {'queued@end':>10}  {'dropped':>7}  {'others':>6}  runs msg/s"
    )
    for dname, d in s.items():
        for scenario in args.scenarios:
            m = d[scenario]
            runs = [
                "ERR" if "error" in r else f"{r['msgs_per_s']:,.0f}"
                for r in measured(out, scenario, dname == "durable")
            ]
            has_log = scenario not in ("off", "control")
            print(
                f"{dname:11}  {LABELS[scenario]:10}  {f(m['msgs_per_s'], ',.0f'):>9}  "
                f"{f(m['ratio_off'], '.3f'):>6}  {f(m['p50_ms'], '.2f'):>7}  {f(m['p99_ms'], '.2f'):>7}  "
                f"{f(m['node_cpu_us_per_msg'], '.1f'):>11}  {f(m['drain_cpu_us_per_msg'], '.1f'):>13}  "
                f"{f(m['drain_cpu_ratio_off'], '.2f'):>10}  {f(m['client_cpu_us_per_msg'], '.1f'):>13}  "
                f"{f(m['main_cpu_us_per_msg'], '.1f'):>14}  {f(m['writer_cpu_us_per_msg'], '.1f'):>13}  {f(m['events_written'], ',.0f'):>7}  {f(m['message_sent_events'], ',.0f'):>7}  "
                f"{f(m['events_queued_at_last_message'], ',.0f'):>10}  "
                f"{(str(m['events_dropped']) if has_log else 'n/a'):>7}  "
                f"{f(m['other_cores'], '.2f'):>6}  {' '.join(runs)}"
            )
    print(
        "(node us/msg: the node's CPU from the first SEND to the last message; +drain: until its event "
        "writer had written the trial's events (and as long for the off node); CPU vs off compares "
        "+drain; reactor us/msg: the node's main thread (the reactor) until the last message; writer us/msg: the event writer process and the node's shipper thread, +drain; events: lines written per trial, sent ev: message.sent among them; queued@end: events "
        "not yet written when the last message arrived; others: cores busy with anything else)"
    )
    v = verdicts(s)
    print(f"\ntarget: events on cost no more than 10% of broker throughput (on/off msg/s >= {TARGET_RATIO:.2f})")
    for dname, d in s.items():
        r = d.get("on", {}).get("ratio_off")
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[v[dname]]
        others = (
            f"; sampled/off {f(d['sampled']['ratio_off'], '.3f')}" if "sampled" in d else ""
        )
        if "control" in d:
            others += (
                f"; control/off {f(d['control']['ratio_off'], '.3f')} (runs' own "
                f"{f(d['control']['paired_ratio_off'], '.3f')}: the bench's own error)"
            )
        paired = d.get("on", {}).get("paired_ratio_off")
        print(
            f"  {dname:11}  on/off {f(r, '.3f')}  {verdict}{others}"
            f"  (median of the runs' own on/off: {f(paired, '.3f')})"
        )
    for name, lines in out["node_log_problems"].items():
        if lines:
            print(f"node {name} log: {len(lines)} WARNING/ERROR line(s); first: {lines[0][:200]}")
        else:
            print(f"node {name} log: no WARNING or ERROR lines")
    for name, ev in out["events_status"].items():
        if ev is not None:
            print(
                f"node {name} event log: written {ev['written']:,}, dropped {ev['dropped']:,}, "
                f"queued {ev['queued']:,}, failed {ev['failed']} (warm-ups included)"
            )
    for name, c in out["collector"].items():
        if "pause_s" in c:
            print(
                f"node {name} garbage collector: thresholds {c['thresholds']}, collections per generation "
                f"{c['collections']}, pauses {[round(x, 3) for x in c['pause_s']]} s, longest "
                f"{c['longest_pause_ms']} ms ({c['nodes']} node(s), warm-ups included)"
            )
    print(common.calibration_line())
    for r in out["trials"]:
        if "error" in r:
            print(
                f"error: {LABELS[r['scenario']]} durable={r['durable']} run {r.get('run')}: "
                f"{(r['error'].splitlines() or [''])[0]}"
            )


def print_json(out: dict, s: dict, args) -> None:
    record = {
        "bench": "events",
        "command": command_line(),
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "warmup": args.warmup,
        "sample_rate": args.sample_rate,
        "scenarios": list(args.scenarios),
        "prefetch": PREFETCH,
        "receipt_window": RECEIPT_WINDOW,
        "cpus": os.cpu_count(),
        "target_ratio": TARGET_RATIO,
        "target_met": verdicts(s),
        "summary": s,
        **out,
    }
    print(json.dumps(record, separators=(",", ":")))


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STOMP throughput and node CPU with the event log off, on, and sampled.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    common.add_trial_options(p, timeout=900.0)
    p.add_argument(
        "--sample-rate", type=float, default=0.1, help="message-sample-rate of the sampled node"
    )
    p.add_argument(
        "--sampled",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure a node with sampled message events",
    )
    p.add_argument(
        "--control",
        action="store_true",
        help="also measure a second node without events (control/off: the bench's own error)",
    )
    p.add_argument(
        "--durability",
        choices=("both", "durable", "non-durable"),
        default="both",
        help="which messages to measure",
    )
    p.add_argument(
        "--events-root",
        help="put the event logs here (say, another disk or /dev/shm) instead of beside the journals",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = common.trial_options_problem(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not 0.0 < args.sample_rate < 1.0:
        print("--sample-rate must be between 0 and 1 (exclusive)", file=sys.stderr)
        return 2
    args.scenarios = (SCENARIOS if args.sampled else SCENARIOS[:2]) + (("control",) if args.control else ())
    args.durabilities = {"both": (False, True), "durable": (True,), "non-durable": (False,)}[args.durability]

    def report(out: dict) -> None:
        s = summarize(out, args)
        print_report(out, s, args)
        if args.json:
            print_json(out, s, args)

    return common.run_guarded(
        NAME, args, run_all, report, lambda out: any("error" in r for r in out["trials"])
    )


if __name__ == "__main__":
    sys.exit(main())
