#!/usr/bin/env python3
"""AMQP 1.0 throughput, latency and broker CPU: Junction side by side with RabbitMQ.

The AMQP 1.0 sibling of ``bench/stomp_throughput.py``.  One
python-qpid-proton producer and one proton consumer, each on its own
connection and each driven by the proton ``Container`` event API (a
``MessagingHandler``, not ``BlockingConnection``; ``bench/amqp_client.py``),
send N messages (default 20,000) with a 256-byte body (one ``data``
section) through one queue.  The consumer's link is attached (the broker's
ATTACH has come back) before the producer starts.  Two modes by default:

``non-durable``
    messages without the ``durable`` header flag, sent unsettled; the
    consumer accepts every message (proton's auto-accept).  The producer is
    bounded only by the link credit the broker grants (``--windowed all``
    applies the window below to this mode too).
``durable``
    header ``durable=True``; the producer counts a message as confirmed when
    the broker's ACCEPTED disposition arrives, with at most ``--window``
    (1000) unsettled sends outstanding: asynchronous like a real throughput
    producer, yet bounded so the broker must keep confirming.

For each mode it reports:

* **msg/s** -- N divided by the time from the producer's first send to the
  consumer receiving the last distinct message;
* **p50 / p99 latency** -- each message carries the application properties
  ``bench-seq`` and ``bench-ts`` (monotonic ns at send); the consumer
  subtracts ``bench-ts`` from the time of receipt.  The consumer runs in its
  own process by default (``--clients process``), so producer and consumer do
  not share a GIL, as two client programs would not; ``CLOCK_MONOTONIC`` is
  system-wide on Linux, so the clocks agree;
* **broker CPU us/msg** -- utime+stime of the broker PID from
  ``/proc/PID/stat`` (all threads of a BEAM are included) just before the
  first send and after the last message, in ``CLK_TCK`` units;
* **client CPU us/msg** -- producer plus consumer process CPU over the same
  window, and **prod/cons %** -- how much of one core each client used over
  the run.  A proton Python client near 100 % is the bottleneck, not the
  broker (there is no broker-less proton producer->consumer baseline here;
  ``../shared/reference/clients.md`` puts that ceiling at about 19,500 msg/s
  on this machine);
* **accepted** -- how many ACCEPTED dispositions the producer got (any
  rejected / released / settled-without-outcome are shown beside it).
* **others** -- cores busy with anything else over the run (``/proc/stat``
  busy ticks minus broker and clients): well above 0 means another program
  competed for the CPUs and the figures are low.

The consumer grants ``--prefetch`` (1000) credit (proton's ``prefetch``,
topped up after every delivery): proton's default of 10 caps throughput at
about a third of what the clients can do.

Targets:

``--target junction``
    starts ``python -m junction run`` in a temporary directory on free ports
    through ``tests/harness.py`` (security off, persistence on; its ``amqp``
    acceptor) and stops it at the end (SIGTERM, then SIGKILL).  The queue
    address is the plain name (e.g. ``bench.amqp.1a2b3c4d.d``), anycast;
    the client authenticates with SASL ANONYMOUS.
``--target rabbitmq``
    starts the peer with ``../shared/peers/peer.sh start rabbitmq``
    (RabbitMQ 3.10 with ``rabbitmq_amqp1_0``, AMQP on ``$RMQ_AMQP_PORT``,
    5772) unless that port is already listening, in which case the running
    peer is used and left running; stops only what it started.  guest/guest
    over SASL PLAIN (vhost ``/``: the plugin uses its default vhost unless
    the open frame's hostname is ``vhost:NAME``).
``--host/--port`` (``--pid`` for CPU figures, ``--address`` for the address)
    use any running broker as is.
``--compare rabbitmq``
    runs Junction, then the peer, in one invocation (one broker up at a time)
    and prints the ratios junction / peer per mode.  ``--host/--port/--pid``
    then describe the peer.

``--baseline REV``
    runs git revision REV of this repository (exported to a temporary
    directory) and this checkout, each on its own node, every mode in
    ``--rounds`` (5) alternating rounds, and prints both builds' figures and
    the ratios current / baseline with their spread (``bench/baseline.py``;
    docs/performance.md, "Comparing two builds").

RabbitMQ 3.10 addresses (checked against the Debian 3.10.8 peer with proton
0.40): ``/queue/NAME`` as a link source or target *declares* queue NAME (and
routes through the default exchange to it); ``/amq/queue/NAME`` refers to an
existing queue only -- attaching to a missing one never completes (the
BlockingConnection probe timed out); a bare ``NAME`` also works as a target
and source (a transient queue).  The queue's durability follows the
*terminus* durability of the attaching link: the default (``none``) declares
a non-durable queue, in which RabbitMQ does not persist even durable
messages, so for RabbitMQ this script attaches both links with terminus
durability ``unsettled-state`` (proton ``Terminus.DELIVERIES``), which
declares a durable queue, as RabbitMQ's STOMP ``/queue/X`` is.  The address
used is ``/queue/{name}`` (``--address`` overrides it; ``{name}`` is replaced
by a fresh queue name per trial, and an address without it is used as is).
Each trial uses a fresh queue, so empty queues named ``bench.amqp.*`` remain
in RabbitMQ afterwards (AMQP 1.0 in 3.10 cannot delete them).

Bounded: the whole run is capped by ``--timeout`` (300 s); every Container
runs a 50 ms timer that checks the run deadline (and the other side's
state), and a watchdog thread stops everything this script started and exits
with status 3 if the run hangs past the cap plus 20 s.

Limits: CPU time is sampled at CLK_TCK resolution (usually 10 ms), so for a
run of about a second the per-message figure is accurate to about +/-1 us;
children of the broker process are not counted; on a machine with few cores
the clients compete with the broker for CPU, which is why the client CPU
columns are printed.  Latency under a saturating producer measures queueing,
not the idle round trip (use ``--rate`` or a small ``--messages`` for that);
in ``non-durable`` mode the producer is bounded only by the credit the
broker grants, so its latency shows how deep the broker lets the queue grow
(RabbitMQ 3.10 takes the whole flood, seconds deep; a broker that grants
credit sparingly keeps it short).  ``others`` near a whole core means a run
to repeat.
"""

from __future__ import annotations

import argparse
import array
import os
import shlex
import sys
import time
import uuid
from contextlib import contextmanager

from proton.reactor import Container

try:  # imported as bench.amqp_throughput from the repository root
    from . import baseline, common
    from .amqp_client import ProducerHandler, Target, consumer_main
except ImportError:  # run as ``python bench/amqp_throughput.py``: bench/ is on sys.path
    import baseline
    import common
    from amqp_client import ProducerHandler, Target, consumer_main

PEER_AMQP_PORTS = {
    "rabbitmq": int(os.environ.get("RMQ_AMQP_PORT", "5772")),
}
#: default address template per target; ``{name}`` is the per-trial queue name
DEFAULT_ADDRESS = {"junction": "{name}", "rabbitmq": "/queue/{name}"}
ALL_MODES = [False, True]  # durable?
#: the fields that name a mode in a result row (Junction's and a peer's rows are matched on them)
MODE_KEYS = ("durable",)


# --------------------------------------------------------------------------- targets


def make_target(kind: str, host: str, port: int, pid: int | None, args) -> Target:
    given = args.address is not None and not (args.compare and kind == "junction")
    address = args.address if given else DEFAULT_ADDRESS.get(kind, "{name}")
    if args.terminus_durable == "auto":
        durable_terminus = kind == "rabbitmq"
    else:
        durable_terminus = args.terminus_durable == "yes"
    if kind == "rabbitmq":
        user, password = args.user or "guest", args.password or "guest"
    else:
        user, password = args.user, args.password
    return Target(kind, host, port, pid, address, user, password, durable_terminus)


@contextmanager
def junction_target(args, deadline: common.Deadline, build=None):
    """Start a Junction broker in a temp dir (harness), yield its Target, stop it.

    ``build``: a ``--baseline`` build (its name becomes the target's), or None for this checkout.
    """
    name = "junction" if build is None else build.name
    with common.junction_broker(args, deadline, build) as broker:
        # the harness waits for the broker as a whole; make sure AMQP is up too
        amqp_deadline = common.Deadline(deadline.cap(10.0))
        while not common.harness().port_open(broker.amqp_port, broker.host):
            if amqp_deadline.remaining() <= 0 or not broker.running:
                raise common.BenchError(f"junction: AMQP port {broker.amqp_port} did not open")
            time.sleep(0.05)
        print(
            f"{name}: AMQP {broker.amqp_url} pid {broker.pid} dir {broker.dir}",
            file=sys.stderr,
        )
        yield make_target(name, broker.host, broker.amqp_port, broker.pid, args)


def target_context(kind: str, args, deadline: common.Deadline):
    """The context that provides ``kind``: given address, harness, or peer.sh."""
    return common.target_context(
        kind,
        args,
        deadline,
        make_target=make_target,
        junction=junction_target,
        peer_ports=PEER_AMQP_PORTS,
    )


# --------------------------------------------------------------------------- measurement


def run_trial(
    target: Target,
    durable: bool,
    n: int,
    args,
    deadline: common.Deadline,
    tag: str = "",
) -> dict:
    """One producer/consumer run of ``n`` messages on a fresh queue; returns figures."""
    run_id = uuid.uuid4().hex[:8]
    address = target.address_for(f"bench.amqp.{run_id}.{'d' if durable else 'nd'}{tag}")
    windowed = args.windowed == "all" or (args.windowed == "durable" and durable)
    consumer = common.ConsumerSide(
        args.clients,
        consumer_main,
        target,
        address,
        n,
        args.prefetch,
        deadline.remaining(),
        args.clients == "thread",
    )
    prod = ProducerHandler(target, address, n, durable, windowed, args, consumer, deadline)
    try:
        consumer.recv(deadline, "the consumer's link to attach")
        Container(prod).run()
        if prod.error is None and (prod.sent < n or prod.t0 is None):
            prod.error = "producer: connection ended early"
        if prod.error is not None:
            raise common.BenchError(f"{prod.error} after {prod.sent} sends")
        _, t_last, lat_bytes, duplicates, consumer_cpu = consumer.recv(deadline, "the last message")
        cpu1 = common.proc_cpu_ticks(target.pid)
        host1 = common.host_busy_ticks()
        client1 = time.process_time()
        t_end = time.monotonic_ns()
    finally:
        consumer.close()
    if prod.note:
        print(f"  note: {prod.note}", file=sys.stderr)

    t0 = prod.t0
    elapsed = (t_last - t0) / 1e9
    lat = sorted(array.array("q", lat_bytes))
    cpu0 = prod.cpu0
    cpu_us = (
        (cpu1 - cpu0) / common.CLK_TCK * 1e6 / n if cpu0 is not None and cpu1 is not None else None
    )
    producer_cpu = client1 - prod.client0
    if args.clients == "thread":  # process_time already covers the consumer thread
        client_cpu = producer_cpu
        producer_cpu -= consumer_cpu
    else:
        client_cpu = producer_cpu + consumer_cpu
    # cores busy with anything else (other programs, the kernel) over the same window:
    # a figure well above 0 means the measurement competed for CPU
    others = None
    if None not in (prod.host0, host1, cpu0, cpu1) and t_end > t0:
        busy = (host1 - prod.host0 - (cpu1 - cpu0)) / common.CLK_TCK - client_cpu
        others = max(0.0, busy / ((t_end - t0) / 1e9))
    missing = {k: v for k, v in prod.outcomes.items() if k != "accepted" and v}
    return {
        "target": target.name,
        "durable": durable,
        "address": address,
        "messages": n,
        "size": args.size,
        "windowed": windowed,
        "msgs_per_s": n / elapsed if elapsed > 0 else None,
        "elapsed_s": elapsed,
        "send_s": (prod.t_sent - t0) / 1e9 if prod.t_sent else None,
        "p50_ms": common.percentile(lat, 50) / 1e6,
        "p99_ms": common.percentile(lat, 99) / 1e6,
        "broker_cpu_us_per_msg": cpu_us,
        "client_cpu_us_per_msg": client_cpu * 1e6 / n,
        "producer_cpu_us_per_msg": producer_cpu * 1e6 / n,
        "consumer_cpu_us_per_msg": consumer_cpu * 1e6 / n,
        "producer_core_pct": 100.0 * producer_cpu / elapsed if elapsed > 0 else None,
        "consumer_core_pct": 100.0 * consumer_cpu / elapsed if elapsed > 0 else None,
        "other_cores": others,
        "accepted": prod.outcomes["accepted"],
        "other_outcomes": missing,
        "unconfirmed": len(prod.outstanding),
        "duplicates": duplicates,
    }


def row_key(kind: str, durable) -> dict:
    """The first fields of a result row: which target and mode it is."""
    return {"target": kind, "durable": durable}


def run_target(kind: str, modes, args, deadline: common.Deadline) -> list[dict]:
    """Start (or find) one target and run every mode on it, warm-up first."""
    with target_context(kind, args, deadline) as target:
        print(
            f"{kind}: {target.url} address {target.address!r}"
            f"{' (durable terminus)' if target.durable_terminus else ''}"
            f"{f' user {target.user}' if target.user else ' (SASL ANONYMOUS)'}",
            file=sys.stderr,
        )

        def trial(durable, n: int, tag: str) -> dict:
            return run_trial(target, durable, n, args, deadline, tag)

        return common.run_modes(
            modes, lambda durable: row_key(kind, durable), trial, args, deadline, format_row
        )


# --------------------------------------------------------------------------- output


COLUMNS = (
    ("target", 9),
    ("durable", 7),
    *common.FIGURE_COLUMNS,
    ("prod/cons us", 12),
    ("prod/cons %", 11),
    ("accepted", 13),
    ("others", 6),
)


def format_row(r: dict) -> str:
    head = [r["target"].ljust(9), ("true" if r["durable"] else "false").ljust(7)]
    if "error" in r:
        return common.error_line(head, r["error"])
    fmt = common.fmt
    cells = [
        *common.figure_cells(r),
        f"{r['producer_cpu_us_per_msg']:.0f}/{r['consumer_cpu_us_per_msg']:.0f}",
        f"{fmt(r['producer_core_pct'], '.0f')}/{fmt(r['consumer_core_pct'], '.0f')}",
        f"{r['accepted']}/{r['messages']}",
        fmt(r.get("other_cores"), ".2f"),
    ]
    line = common.table_row(head, cells, COLUMNS)
    extra = [f"{v} {k}" for k, v in r.get("other_outcomes", {}).items()]
    if r.get("unconfirmed"):
        extra.append(f"{r['unconfirmed']} unconfirmed")
    if r.get("duplicates"):
        extra.append(f"{r['duplicates']} duplicates")
    if extra:
        line += f"  ({', '.join(extra)})"
    return line


def command_line() -> str:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return shlex.join(argv)


def print_report(results: list[dict], rat: list[dict] | None, args) -> None:
    print(f"\ncommand: {command_line()}")
    print(
        f"AMQP 1.0 throughput: {args.messages:,} x {args.size} B, one proton producer + one "
        f"consumer ({args.clients}), prefetch {args.prefetch}, window {args.window} "
        f"({args.windowed}), {os.cpu_count()} CPUs"
        + (f", paced at {args.rate:g} msg/s" if args.rate > 0 else "")
        + (f", warm-up {args.warmup}" if args.warmup else "")
    )
    print(common.header_line(COLUMNS, left=2))
    for r in results:
        print(format_row(r))
    common.print_ratios(
        rat, f"{'durable':7}", lambda q: f"{('true' if q['durable'] else 'false'):7}"
    )
    if args.json:
        common.print_json(json_settings(args), results, rat)
    sys.stdout.flush()


def json_settings(args) -> dict:
    """The run's settings, as the ``--json`` line gives them."""
    return {
        "bench": "amqp_throughput",
        "command": command_line(),
        "messages": args.messages,
        "size": args.size,
        "prefetch": args.prefetch,
        "window": args.window,
        "windowed": args.windowed,
        "warmup": args.warmup,
        "clients": args.clients,
    }


# --------------------------------------------------------------------------- main


def parse_mode(part: str) -> bool:
    """One mode: ``durable`` (True) or ``non-durable`` (False)."""
    part = part.strip()
    if part in ("durable", "true"):
        return True
    if part in ("non-durable", "nondurable", "false"):
        return False
    raise argparse.ArgumentTypeError(f"bad mode {part!r}: want non-durable or durable")


def parse_modes(text: str):
    """``all`` or a comma list of ``non-durable`` / ``durable``."""
    return common.parse_modes(text, ALL_MODES, parse_mode)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="AMQP 1.0 producer/consumer throughput, latency and broker CPU per message.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--target", choices=("junction", "rabbitmq"), default="junction")
    p.add_argument(
        "--compare", choices=("rabbitmq",), help="run junction and this peer; print ratios"
    )
    common.add_broker_options(p, "AMQP")
    p.add_argument(
        "--address",
        help="address template, {name} = fresh queue name per trial "
        "(default: {name} for junction, /queue/{name} for rabbitmq)",
    )
    p.add_argument(
        "--terminus-durable",
        choices=("auto", "yes", "no"),
        default="auto",
        help="attach links with durable termini (auto: yes for rabbitmq, "
        "which then declares a durable queue)",
    )
    p.add_argument("--messages", "-n", type=int, default=20_000)
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--modes", type=parse_modes, default="all", help="all or non-durable,durable")
    p.add_argument("--warmup", type=int, default=0, help="messages per mode before measuring")
    p.add_argument("--prefetch", type=int, default=1000, help="consumer link credit")
    p.add_argument(
        "--rate",
        type=float,
        default=0,
        help="send at most this many msg/s (0: as fast as possible); for latency",
    )
    p.add_argument("--window", type=int, default=1000, help="max unsettled sends outstanding")
    p.add_argument(
        "--windowed",
        choices=("durable", "all", "none"),
        default="durable",
        help="which modes the --window applies to",
    )
    common.add_clients_option(p)
    p.add_argument("--user", help="SASL PLAIN user (rabbitmq default: guest)")
    p.add_argument("--password")
    common.add_run_options(p)
    baseline.add_options(p)
    return p


def run_baseline(args) -> int:
    """``--baseline``: this script's modes on two builds (see ``bench/baseline.py``)."""
    return baseline.run(
        args,
        sys.modules[__name__],
        name="amqp_throughput",
        trial=run_trial,
        key_header=f"{'durable':7}",
        key_cells=lambda q: f"{('true' if q['durable'] else 'false'):7}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.messages <= 0 or args.size <= 0 or args.window <= 0 or args.prefetch <= 0:
        print("--messages, --size, --window and --prefetch must be positive", file=sys.stderr)
        return 2
    status = baseline.dispatch(args, parser, lambda: run_baseline(args))
    if status is not None:
        return status
    print(f"command: {command_line()}", file=sys.stderr)
    return common.run_benchmark(
        args, "amqp_throughput", run_target, row_key, MODE_KEYS, print_report
    )


if __name__ == "__main__":
    sys.exit(main())
