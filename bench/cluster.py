#!/usr/bin/env python3
"""What a cluster hop costs: STOMP from node A to a consumer on node B, against one node, in one run.

One invocation starts three ``junction run`` processes in a temporary
directory, on free ports on 127.0.0.1 (``tests/harness.py``; security off,
persistence on, each with the queue ``bench`` declared in ``<addresses>``):

* **a** and **b**: a two-node cluster.  Each node's STOMP acceptor
  (``anycastPrefix=/queue/``) is also where the other's cluster link arrives
  (the node tells links apart by their preamble); one cluster connection
  ``bench`` per node, ``ON_DEMAND`` load balancing, the other node as its one
  static connector, ``retry-interval`` 100 ms;
* **lone**: the same node without any cluster configuration.

It waits (polling ``/api/status``, with a deadline) until each cluster node
has one bridge ``open`` and knows the other's ``bench`` queue as a remote
binding, then measures, for non-durable and for durable messages:

* **lone node** -- producer and consumer on the lone node;
* **one node (A->A)** -- producer and consumer both on node A of the cluster
  (B is up and linked, its ``bench`` queue without consumers, so A keeps
  every message);
* **two nodes (A->B)** -- producer on A, consumer on B.  After the consumer's
  SUBSCRIBE is confirmed, the trial waits until A's
  ``cluster.remote_bindings`` shows B's ``bench`` with ``consumers >= 1``
  (before that, ``ON_DEMAND`` would keep the messages on A).  A's ``bench``
  queue has no consumer, so A sends every message to B: stored in A's
  store-and-forward queue, sent over the link, stored on B, acknowledged back.

The clients and the flow are those of ``bench/stomp_throughput.py`` and
``bench/gateway.py``: ``--count`` (20,000) messages of ``--size`` (256) bytes,
one stomp.py producer (TCP_NODELAY set, as ``bench/gateway.py`` does) and one
stomp.py consumer in another process (``ack:auto``,
``activemq.prefetchSize:1000``, SUBSCRIBE confirmed by a receipt before the
first SEND).  Durable messages are sent ``persistent:true`` with a receipt on
every SEND, at most 1000 outstanding; non-durable ones ``persistent:false``
without receipts.  msg/s is the count divided by the time from the first
SEND to the consumer receiving the last distinct message.

Every trial is checked, and fails loudly otherwise: the consumer received
each of the messages exactly once, every receipt came back (durable), the
``bench`` queue of the consumer's node took exactly ``--count`` messages and
the other cluster node's none, and afterwards every ``bench`` and
store-and-forward queue is empty.  The messages A forwarded
(``cluster.messages_forwarded``, counted when B acknowledges them) are
reported per trial and must equal the count across nodes and 0 on one node.

Scenarios alternate (lone, one, two; then two, one, lone; ...) over
``--runs`` (3) rounds after a ``--warmup`` (2,000 messages) of each; the table
gives medians and the ratios to the two baselines measured in the same run:
one node of the cluster, and a node without a cluster.  CPU is each node's
user+system time (``/proc``) from the first SEND to the last message; in
the lone-node rows column A is the lone node.  ``others`` is the cores busy
with anything else over a trial (``/proc/stat`` busy ticks minus the nodes
and the clients, as in ``bench/amqp_throughput.py``): well above 0 means
another program competed for the CPUs.

    .venv/bin/python bench/cluster.py --runs 3
    .venv/bin/python bench/cluster.py --quick     # smoke run, small counts
    .venv/bin/python bench/cluster.py --json      # plus one JSON line at the end

Bounded: ``--timeout`` (600 s) caps the run; a watchdog stops every node and
exits with status 3 past the cap (plus 20 s); every wait polls with a
deadline; the nodes are stopped on any exit (``finally``, Ctrl-C, SIGTERM;
the harness also gives them ``PR_SET_PDEATHSIG``).  The exit status is 1
when a trial failed.

Limits: on a machine with 2 cores the two clients and the nodes share the
CPUs, so across nodes a second broker process competes with the clients; the
ratio measures that too, as two nodes on one host would see it.  CPU is
sampled at CLK_TCK resolution (10 ms).  Under a flooding producer the
latency columns measure queueing, not the idle hop.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

try:  # imported as bench.cluster from the repository root
    from . import common, stomp_throughput
except ImportError:  # run as ``python bench/cluster.py``: bench/ is on sys.path
    import common
    import stomp_throughput

NAME = "cluster bench"
QUEUE = "bench"
DESTINATION = f"/queue/{QUEUE}"
SF_PREFIX = "$.junction.sf."
PREFETCH = 1000
RECEIPT_WINDOW = 1000
#: scenario -> (producer node, consumer node)
SCENARIOS = {"lone": ("lone", "lone"), "one": ("a", "a"), "two": ("a", "b")}
LABELS = {"lone": "lone node", "one": "one node (A->A)", "two": "two nodes (A->B)"}
#: seconds a wait for the cluster's state may take
SETTLE_SECONDS = 30.0
POLL = 0.05

CLUSTER_XML = """
    <connectors><connector name="a">tcp://127.0.0.1:{port_a}</connector><connector name="b">tcp://127.0.0.1:{port_b}</connector></connectors>
    <cluster-user>bench</cluster-user><cluster-password>bench-secret</cluster-password>
    <cluster-connections><cluster-connection name="bench">
      <connector-ref>{me}</connector-ref><retry-interval>100</retry-interval>
      <message-load-balancing>ON_DEMAND</message-load-balancing>
      <static-connectors><connector-ref>{other}</connector-ref></static-connectors>
    </cluster-connection></cluster-connections>"""
ADDRESSES_XML = f'<addresses><address name="{QUEUE}"><anycast><queue name="{QUEUE}"/></anycast></address></addresses>'


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    nodes: dict  # "a", "b", "lone" -> tests.harness.BrokerProcess
    tmp: str


def wait_until(check, what: str, deadline: common.Deadline, seconds: float = SETTLE_SECONDS):
    """Poll ``check()`` (a truthy value, or ``(False, last_seen)``) until truthy, within the deadline."""
    end = common.Deadline(deadline.cap(seconds))
    last = None
    while True:
        try:
            value = check()
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            value = (False, repr(e))
        if value and not (isinstance(value, tuple) and value[0] is False):
            return value
        last = value[1] if isinstance(value, tuple) else value
        if end.remaining() <= 0:
            raise common.BenchError(f"timed out waiting for {what}; last seen: {last}")
        time.sleep(POLL)


def cluster_of(node) -> dict:
    return node.status(timeout=2.0)["cluster"]


def open_bridges(node) -> list:
    return [b for b in cluster_of(node)["connections"][0]["bridges"] if b["state"] == "open"]


def remote_binding(node, queue: str = QUEUE) -> dict | None:
    """``node``'s remote binding of the other node's ``queue``, or None."""
    for b in cluster_of(node)["remote_bindings"]:
        if b["queue"] == queue:
            return b
    return None


def queues_of(node) -> dict:
    return {q["name"]: q for q in node.status(timeout=2.0)["queues"]}


def wait_linked(w: World, deadline: common.Deadline) -> None:
    """Until each cluster node has exactly one open bridge and knows the other's ``bench`` queue."""
    for name in ("a", "b"):
        node = w.nodes[name]

        def linked(node=node):
            if not node.running:
                raise common.BenchError(f"node {node.name} exited\n{node.log_tail(30)}")
            bridges = cluster_of(node)["connections"][0]["bridges"]
            binding = remote_binding(node)
            ok = (
                len(bridges) == 1
                and bridges[0]["state"] == "open"
                and binding is not None
                and binding["connected"]
            )
            return ok or (False, {"bridges": bridges, "remote binding": binding})

        wait_until(linked, f"node {name}: one open bridge and the remote {QUEUE} binding", deadline)


def settle(w: World, deadline: common.Deadline) -> None:
    """Until the world is idle: every ``bench`` and store-and-forward queue empty, no consumers, links open."""

    def idle():
        seen = {}
        for name, node in w.nodes.items():
            if not node.running:
                raise common.BenchError(f"node {node.name} exited\n{node.log_tail(30)}")
            qs = queues_of(node)
            q = qs.get(QUEUE)
            if q is None:
                return (False, f"node {name} has no queue {QUEUE}")
            busy = {
                n: (x["message_count"], x["consumer_count"])
                for n, x in qs.items()
                if (n == QUEUE or n.startswith(SF_PREFIX))
                and (x["message_count"] or (n == QUEUE and x["consumer_count"]))
            }
            if busy:
                seen[name] = busy
        for name in ("a", "b"):
            node = w.nodes[name]
            if len(open_bridges(node)) != 1:
                seen[f"{name} bridges"] = "not open"
            binding = remote_binding(node)
            if binding is None or not binding["connected"] or binding["consumers"]:
                seen[f"{name} remote binding"] = binding
        return (False, seen) if seen else True

    wait_until(idle, "every queue empty and without consumers", deadline)


def log_problems(node) -> list[str]:
    """Lines of the node's logs that say WARNING, ERROR, CRITICAL or Traceback."""
    out = []
    for path in (node.stdout_path, node.stderr_path):
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if any(k in line for k in ("WARNING", "ERROR", "CRITICAL", "Traceback")):
                out.append(line.strip())
    return out


@contextmanager
def world(args, deadline: common.Deadline):
    """Start the two cluster nodes and the lone node in a temp dir, yield a :class:`World`, stop them."""
    h = common.harness()
    tmp = tempfile.mkdtemp(prefix="junction-bench-cluster-")
    ports = {"a": h.free_port(), "b": h.free_port()}
    nodes = {}
    for me, other in (("a", "b"), ("b", "a")):
        nodes[me] = h.BrokerProcess(
            tmp,
            name=me,
            stomp_port=ports[me],
            security=False,
            persistence=True,
            stomp_acceptor_params={"anycastPrefix": "/queue/"},
            extra_core_xml=CLUSTER_XML.format(
                port_a=ports["a"], port_b=ports["b"], me=me, other=other
            )
            + ADDRESSES_XML,
            startup_timeout=deadline.cap(60.0),
        )
    nodes["lone"] = h.BrokerProcess(
        tmp,
        name="lone",
        security=False,
        persistence=True,
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
        extra_core_xml=ADDRESSES_XML,
        startup_timeout=deadline.cap(60.0),
    )
    for name, node in nodes.items():
        common.CLEANUP.push(name, node.stop)
    w = World(nodes, tmp)
    ok = False
    try:
        for node in nodes.values():
            node.start()
        wait_linked(w, deadline)
        settle(w, deadline)
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
        for name in ("lone", "b", "a"):
            common.CLEANUP.run(name)
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"{NAME}: directory kept at {tmp}", file=sys.stderr)


# --------------------------------------------------------------------------- one trial


def target(node) -> stomp_throughput.Target:
    return stomp_throughput.Target(
        node.name,
        node.host,
        node.stomp_port,
        node.pid,
        vhost=node.host,
        prefetch_headers={"activemq.prefetchSize": str(PREFETCH)},
    )


def open_producer(t, listener, deadline):
    """stomp_throughput's connection with TCP_NODELAY, as bench/gateway.py gives its producer."""
    conn = stomp_throughput.open_connection(t, listener, "1.2", deadline)
    sock = getattr(getattr(conn, "transport", None), "socket", None)
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
    return conn


def forwarded(w: World) -> int:
    return cluster_of(w.nodes["a"])["messages_forwarded"]


def added(w: World) -> dict:
    """messages_added of the ``bench`` queue on each node."""
    return {name: queues_of(node)[QUEUE]["messages_added"] for name, node in w.nodes.items()}


def send_messages(prod, prod_l, body, n: int, durable: bool, deadline: common.Deadline) -> None:
    """Send ``n`` messages, each stamped with its sequence number and send time; durable ones
    ``persistent:true`` with a receipt each, at most RECEIPT_WINDOW outstanding."""
    headers0 = {"persistent": "true" if durable else "false"}
    for i in range(n):
        if durable:
            while not prod_l.window.acquire(timeout=0.05):
                prod_l.raise_if_failed()
                if deadline.remaining() <= 0:
                    raise common.BenchError(
                        f"run deadline reached with {RECEIPT_WINDOW} receipts outstanding after {i} sends"
                    )
        headers = dict(headers0)
        headers["bench-seq"] = str(i)
        if durable:
            headers["receipt"] = f"s-{i}"
        headers["bench-ts"] = str(time.monotonic_ns())
        prod.send(DESTINATION, body, headers=headers)
        prod_l.raise_if_failed()


def trial(
    w: World, scenario: str, durable: bool, n: int, args, deadline: common.Deadline, tag: str
) -> dict:
    """One producer/consumer trial of ``n`` messages; figures plus the checks' counts."""
    prod_name, cons_name = SCENARIOS[scenario]
    prod_node, cons_node = w.nodes[prod_name], w.nodes[cons_name]
    measured = ["lone"] if scenario == "lone" else ["a", "b"]
    settle(w, deadline)
    fwd0, added0 = forwarded(w), added(w)
    body = b"x" * args.size
    prod_l = stomp_throughput.ProducerListener(RECEIPT_WINDOW, n)
    prod = None
    consumer = common.ConsumerSide(
        args.clients,
        stomp_throughput.consumer_main,
        target(cons_node),
        DESTINATION,
        n,
        "auto",
        "1.2",
        deadline.remaining(),
    )
    try:
        consumer.recv(deadline, "the consumer to subscribe")
        if scenario == "two":
            a = w.nodes["a"]

            def consumer_known():
                b = remote_binding(a)
                return (b is not None and b["connected"] and b["consumers"] >= 1) or (False, b)

            wait_until(consumer_known, f"node a to see the consumer on b's {QUEUE}", deadline)
        prod = open_producer(target(prod_node), prod_l, deadline)
        cpu0 = {k: common.proc_cpu_ticks(node.pid) for k, node in w.nodes.items()}
        host0 = common.host_busy_ticks()
        client0 = time.process_time()
        t0 = time.monotonic_ns()
        send_messages(prod, prod_l, body, n, durable, deadline)
        _, t_last, lat_bytes, duplicates, consumer_cpu = consumer.recv(
            deadline, "the last message", check=prod_l.raise_if_failed
        )
        cpu1 = {k: common.proc_cpu_ticks(node.pid) for k, node in w.nodes.items()}
        host1 = common.host_busy_ticks()
        client1 = time.process_time()
        t_end = time.monotonic_ns()
        if durable:
            stomp_throughput.wait_event(
                prod_l.all_receipts, prod_l, common.Deadline(deadline.cap(10.0)), "receipts"
            )
    finally:
        stomp_throughput.close_connection(prod, prod_l)
        consumer.close()

    # the checks: exactly n once each, every receipt, routed where expected, nothing left over
    if duplicates:
        raise common.BenchError(f"the consumer received {duplicates} duplicates of {n} messages")
    if durable and prod_l.send_receipts != n:
        raise common.BenchError(f"{prod_l.send_receipts} of {n} receipts came back")
    settle(w, deadline)
    fwd = forwarded(w) - fwd0
    added1 = added(w)
    took = {k: added1[k] - added0[k] for k in added1}
    expected_took = {k: (n if k == cons_name else 0) for k in took}
    if took != expected_took:
        raise common.BenchError(
            f"queue {QUEUE} took {took} messages per node, expected {expected_took}"
        )
    if fwd != (n if scenario == "two" else 0):
        raise common.BenchError(
            f"node a forwarded {fwd} messages, expected {n if scenario == 'two' else 0}"
        )

    elapsed = (t_last - t0) / 1e9
    lat = sorted(array.array("q", lat_bytes))
    node_s = {
        k: (cpu1[k] - cpu0[k]) / common.CLK_TCK
        if cpu0[k] is not None and cpu1[k] is not None
        else None
        for k in measured
    }
    a_s = node_s.get("lone" if scenario == "lone" else "a")
    b_s = node_s.get("b")
    total_s = (
        sum(v for v in node_s.values() if v is not None)
        if all(v is not None for v in node_s.values())
        else None
    )
    client_cpu = (client1 - client0) + (consumer_cpu if args.clients == "process" else 0.0)
    # cores busy with anything else (other programs, the kernel) over the same window, as in
    # bench/amqp_throughput.py: well above 0 means the trial competed for the CPUs
    others = None
    if (
        host0 is not None
        and host1 is not None
        and None not in cpu0.values()
        and None not in cpu1.values()
    ):
        ours = sum(cpu1[k] - cpu0[k] for k in cpu0) / common.CLK_TCK + client_cpu
        others = max(0.0, ((host1 - host0) / common.CLK_TCK - ours) / ((t_end - t0) / 1e9))
    return {
        "scenario": scenario,
        "durable": durable,
        "messages": n,
        "msgs_per_s": n / elapsed if elapsed > 0 else None,
        "elapsed_s": elapsed,
        "p50_ms": common.percentile(lat, 50) / 1e6,
        "p99_ms": common.percentile(lat, 99) / 1e6,
        "a_cpu_us_per_msg": a_s * 1e6 / n if a_s is not None else None,
        "b_cpu_us_per_msg": b_s * 1e6 / n if b_s is not None else None,
        "nodes_cpu_s": total_s,
        "nodes_cpu_us_per_msg": total_s * 1e6 / n if total_s is not None else None,
        "client_cpu_us_per_msg": client_cpu * 1e6 / n,
        "receipts": prod_l.send_receipts if durable else None,
        "forwarded": fwd,
        "other_cores": others,
    }


# --------------------------------------------------------------------------- running


def order(run: int) -> tuple[str, ...]:
    """lone, one, two in even rounds; two, one, lone in odd ones."""
    names = tuple(SCENARIOS)
    return names if run % 2 == 0 else names[::-1]


def echo(row: dict, what: str = "") -> None:
    head = (
        f"  {what}{LABELS[row['scenario']]:17} {'durable' if row['durable'] else 'non-durable':11}"
    )
    if "error" in row:
        print(f"{head} ERROR: {row['error']}", file=sys.stderr)
    else:
        print(
            f"{head} {row['msgs_per_s']:9,.0f} msg/s  "
            f"nodes {common.fmt(row['nodes_cpu_us_per_msg'], '.1f')} us/msg  "
            f"forwarded {row['forwarded']:,}  others {common.fmt(row['other_cores'], '.2f')}",
            file=sys.stderr,
        )


def run_all(args, deadline: common.Deadline) -> dict:
    out: dict = {"trials": [], "loadavg_start": os.getloadavg()[0]}
    with world(args, deadline) as w:
        for durable in (False, True):
            if args.warmup:
                for scenario in SCENARIOS:
                    key = {"scenario": scenario, "durable": durable}
                    row = common.guarded(
                        partial(trial, w, scenario, durable, args.warmup, args, deadline, ".warm"),
                        key,
                        deadline,
                    )
                    if "error" in row:
                        echo(row, "warm-up ")
        for run in range(args.runs):
            for durable in (False, True):
                for scenario in order(run):
                    key = {"scenario": scenario, "durable": durable}
                    row = common.guarded(
                        partial(trial, w, scenario, durable, args.count, args, deadline, ""),
                        key,
                        deadline,
                    )
                    row["run"] = run
                    out["trials"].append(row)
                    echo(row)
        out["node_log_problems"] = {name: log_problems(node) for name, node in w.nodes.items()}
        forwarded_total = forwarded(w)
        out["a_messages_forwarded_total"] = forwarded_total
    out["loadavg_end"] = os.getloadavg()[0]
    return out


# --------------------------------------------------------------------------- summary


FIELDS = (
    "msgs_per_s",
    "p50_ms",
    "p99_ms",
    "a_cpu_us_per_msg",
    "b_cpu_us_per_msg",
    "nodes_cpu_s",
    "nodes_cpu_us_per_msg",
    "client_cpu_us_per_msg",
    "forwarded",
    "other_cores",
)


def summarize(out: dict) -> dict:
    """Per durability and scenario: the medians of the runs, and the ratios to both baselines."""
    s: dict = {}
    for durable in (False, True):
        d: dict = {}
        for scenario in SCENARIOS:
            rows = [
                r
                for r in out["trials"]
                if r["scenario"] == scenario and r["durable"] == durable and "error" not in r
            ]
            m = {}
            for f in FIELDS:
                vals = [r[f] for r in rows if r.get(f) is not None]
                m[f] = statistics.median(vals) if vals else None
            m["runs"] = len(rows)
            d[scenario] = m
        for scenario in SCENARIOS:
            m = d[scenario]
            m["ratio_one"] = common.ratio(m["msgs_per_s"], d["one"]["msgs_per_s"])
            m["ratio_lone"] = common.ratio(m["msgs_per_s"], d["lone"]["msgs_per_s"])
            m["cpu_ratio_one"] = common.ratio(
                m["nodes_cpu_us_per_msg"], d["one"]["nodes_cpu_us_per_msg"]
            )
        s["durable" if durable else "non-durable"] = d
    return s


command_line = common.command_line


def print_report(out: dict, s: dict, args) -> None:
    f = common.fmt
    print(f"\ncommand: {command_line()}")
    print(
        f"STOMP, producer on node A and consumer on node B of a two-node cluster (ON_DEMAND) against "
        f"both on one node; {args.count:,} x {args.size} B, prefetch {PREFETCH}, ack auto; durable: "
        f"persistent, a receipt per SEND, window {RECEIPT_WINDOW}; {os.cpu_count()} CPUs; {args.runs} run(s) "
        f"per scenario, rotated, medians; warm-up {args.warmup}; load average {out['loadavg_start']:.2f} "
        f"at start, {out['loadavg_end']:.2f} at the end"
    )
    print(
        f"\n{'durable':11}  {'scenario':17}  {'msg/s':>9}  {'vs one':>6}  {'vs lone':>7}  {'p50 ms':>7}  "
        f"{'p99 ms':>7}  {'A us/msg':>8}  {'B us/msg':>8}  {'nodes us/msg':>12}  {'nodes CPU s':>11}  "
        f"{'client us/msg':>13}  {'forwarded':>9}  {'others':>6}  runs msg/s"
    )
    for dname, d in s.items():
        for scenario in SCENARIOS:
            m = d[scenario]
            runs = [
                "ERR" if "error" in r else f"{r['msgs_per_s']:,.0f}"
                for r in out["trials"]
                if r["scenario"] == scenario and r["durable"] == (dname == "durable")
            ]
            print(
                f"{dname:11}  {LABELS[scenario]:17}  {f(m['msgs_per_s'], ',.0f'):>9}  "
                f"{f(m['ratio_one'], '.3f'):>6}  {f(m['ratio_lone'], '.3f'):>7}  {f(m['p50_ms'], '.2f'):>7}  "
                f"{f(m['p99_ms'], '.2f'):>7}  {f(m['a_cpu_us_per_msg'], '.1f'):>8}  "
                f"{f(m['b_cpu_us_per_msg'], '.1f'):>8}  {f(m['nodes_cpu_us_per_msg'], '.1f'):>12}  "
                f"{f(m['nodes_cpu_s'], '.2f'):>11}  {f(m['client_cpu_us_per_msg'], '.1f'):>13}  "
                f"{f(m['forwarded'], ',.0f'):>9}  {f(m['other_cores'], '.2f'):>6}  {' '.join(runs)}"
            )
    print(
        "(A us/msg is the lone node's CPU in the lone-node rows; nodes = A + B in the cluster rows; "
        "others: cores busy with anything else during the trial)"
    )
    print(
        "\ntwo nodes (A->B) against the baselines, msg/s (higher is better) and nodes' CPU per message"
    )
    print(
        f"{'durable':11}  {'/ one node of the cluster':>25}  {'/ node without a cluster':>24}  {'CPU / one node':>14}"
    )
    for dname, d in s.items():
        m = d["two"]
        print(
            f"{dname:11}  {f(m['ratio_one'], '.3f'):>25}  {f(m['ratio_lone'], '.3f'):>24}  "
            f"{f(m['cpu_ratio_one'], '.2f'):>14}"
        )
    print(
        f"\nnode a: cluster.messages_forwarded {out['a_messages_forwarded_total']:,} in all (warm-ups included)"
    )
    for name, lines in out["node_log_problems"].items():
        if lines:
            print(f"node {name} log: {len(lines)} WARNING/ERROR line(s); first: {lines[0][:200]}")
        else:
            print(f"node {name} log: no WARNING or ERROR lines")
    print(common.calibration_line())
    for r in out["trials"]:
        if "error" in r:
            print(
                f"error: {LABELS[r['scenario']]} durable={r['durable']} run {r.get('run')}: "
                f"{(r['error'].splitlines() or [''])[0]}"
            )


def print_json(out: dict, s: dict, args) -> None:
    record = {
        "bench": "cluster",
        "command": command_line(),
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "warmup": args.warmup,
        "prefetch": PREFETCH,
        "receipt_window": RECEIPT_WINDOW,
        "cpus": os.cpu_count(),
        "summary": s,
        **out,
    }
    print(json.dumps(record, separators=(",", ":")))


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STOMP from node A to a consumer on node B of a two-node cluster, against one node.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    common.add_trial_options(p, timeout=600.0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = common.trial_options_problem(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    def report(out: dict) -> None:
        s = summarize(out)
        print_report(out, s, args)
        if args.json:
            print_json(out, s, args)

    return common.run_guarded(NAME, args, run_all, report, lambda out: any("error" in r for r in out["trials"]))

if __name__ == "__main__":
    sys.exit(main())
