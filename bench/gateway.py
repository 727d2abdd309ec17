#!/usr/bin/env python3
"""The gateway's cost: forwarded against direct, on the same broker core, in one run.

One invocation starts two ``junction run`` processes in a temporary
directory, on free ports on 127.0.0.1 (``tests/harness.py``):

* a **core**: a broker core with security on (users ``app`` and ``pool``) and a
  multi-protocol acceptor ``gateway-in`` (``protocols=STOMP,AMQP``, with the
  ``/queue/`` and ``/topic/`` prefixes), non-persistent unless ``--durable``;
* a **gateway**: a node whose ``<connection-routers>`` has one router ``r``
  (``CLIENT_ID`` key, ``FIRST_ELEMENT``, a pool with the core's ``gateway-in``
  as its one static connector, checked every second) and an acceptor
  ``protocols=STOMP,AMQP;router=r;routerMode=forward`` where clients connect.
  Security is on there too, with the same users: the gateway authenticates
  the client, then forwards its opening to the core, which authenticates it
  again, exactly as in ``tests/integration/test_gateway_stomp.py``.

It waits until the gateway's pool says the core is ready
(``/api/status`` ``routers.r.targets[].ready``), then measures each figure
**direct** (clients connect to the core's ``gateway-in``, the very acceptor
the gateway forwards to) and **gateway** (clients connect to the gateway's
routed acceptor), alternating the two paths (ABBA: direct, gateway, gateway,
direct, ... over ``--runs`` rounds, so a load drift on the machine affects
both alike) after a warm-up of each path:

* **throughput** -- ``--count`` messages (20,000 x ``--size`` 256 B), one
  producer + one consumer in another process: STOMP with stomp.py (``ack:auto``,
  ``activemq.prefetchSize:1000``) and AMQP 1.0 with python-qpid-proton
  (prefetch 1000), through the trial functions of ``bench/stomp_throughput.py``
  and ``bench/amqp_throughput.py`` (so msg/s, p50 and p99 mean exactly what they
  mean there; the stomp.py producer gets TCP_NODELAY, as proton sets it, unless
  ``--stomp-nagle``: with Nagle on, a SEND can wait for a delayed ACK, 40 ms
  p99 outliers on both paths that say nothing about the gateway).  Reported per path as the median of the runs, and the ratio
  gateway / direct.  ``core us/msg`` is the core's CPU over the messages'
  window; ``gw us/msg`` the gateway's CPU over the whole trial (its
  connections' setup included, negligible for 20,000 messages).
* **paced latency** -- ``--latency-count`` (4,000) messages sent at ``--rate``
  (2,000 msg/s): p50 and p99 of send-to-receive; reported as the medians of
  the runs and the latency the gateway *adds* (gateway - direct, ms).
* **new connections per second** -- ``--connections`` (1,000) sequential
  connect + authenticate + disconnect loops with a minimal raw-socket client,
  so the figure is the server side's cost rather than a client library's:
  STOMP ``CONNECT`` (login, passcode, a fresh client-id) -> ``CONNECTED``,
  ``DISCONNECT`` with a receipt -> ``RECEIPT``, close; AMQP SASL header ->
  mechanisms, ``sasl-init`` PLAIN -> outcome ok, AMQP header + ``open`` (a fresh
  container-id) -> header + ``open``, ``close`` -> ``close``, close.  One client,
  one connection at a time: connections/s is 1 / (mean time per loop).  CPU
  per connection of the core and the gateway is reported beside it.
* **routing decisions per second** in process, without any network: the
  routers of ``bench/gateway_routing.py`` (CONSISTENT_HASH miss/hit,
  FIRST_ELEMENT, CONSISTENT_HASH_MODULO with a local-target filter).

With ``--baseline REV`` it does all of this for git revision REV of this
repository (exported to a temporary directory) and for this checkout, each
build with its own core and gateway, every measurement in ``--runs``
alternating rounds of both builds, and prints each build's report and then
the ratios current / baseline with their spread (``bench/gateway_baseline.py``,
``bench/baseline.py``; docs/performance.md, "Comparing two builds").

The bench is a few modules, one job each: ``bench/gateway_world.py`` (the
core and the gateway, started and stopped), ``bench/gateway_trials.py`` (the
message trials and the routing decisions), ``bench/gateway_connections.py``
(the raw-socket connection loops), ``bench/gateway_report.py`` (medians,
ratios, targets, the tables and the JSON line) and this script (the options
and the order of the measurements).

Targets from the gateway issue, printed with whether each was met: throughput
gateway / direct >= 0.95; added p50 <= 0.1 ms at 2,000 msg/s.  They are
checked, not enforced: the exit status is 1 only when a measurement failed.

    .venv/bin/python bench/gateway.py            # the full run (about 2-3 min)
    .venv/bin/python bench/gateway.py --quick    # smoke run, small counts
    .venv/bin/python bench/gateway.py --json     # plus one JSON line at the end

Bounded: ``--timeout`` (600 s) caps the run; a watchdog stops both processes
and exits with status 3 past the cap; every socket wait has a timeout; the
processes are stopped on any exit (``finally``, Ctrl-C, SIGTERM; the harness
also gives them ``PR_SET_PDEATHSIG``).

Limits: on a machine with 2 cores, the clients, the core and the gateway share
the CPUs, so through the gateway one more process competes for them: the
ratios measure that too, as a deployment on the same host would see it.  CPU
is sampled at CLK_TCK resolution (10 ms).  Sequential connection loops measure
latency-bound connection setup, not the most a server could accept in
parallel.  Each connection loop leaves a socket in TIME_WAIT on the client
side: the default counts stay far below the ephemeral port range.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from functools import partial

try:  # imported as bench.gateway from the repository root
    from . import baseline, common, gateway_baseline
    from .gateway_connections import connection_trial
    from .gateway_report import failed, print_json, print_report, summarize
    from .gateway_trials import message_trial, routing_figures, stomp_producer_nodelay
    from .gateway_world import NAME, PATHS, PROTOCOLS, World, world
except ImportError:  # run as ``python bench/gateway.py``: bench/ is on sys.path
    import common

    # the routing figures are timed in this process: on this checkout's junction, not on
    # another checkout that the virtualenv may have installed in editable mode
    sys.path.insert(0, str(common.REPO_ROOT))
    import baseline
    import gateway_baseline
    from gateway_connections import connection_trial
    from gateway_report import failed, print_json, print_report, summarize
    from gateway_trials import message_trial, routing_figures, stomp_producer_nodelay
    from gateway_world import NAME, PATHS, PROTOCOLS, World, world


def order(run: int) -> tuple[str, ...]:
    """ABBA: direct first in even rounds, gateway first in odd ones."""
    return PATHS if run % 2 == 0 else PATHS[::-1]


def echo(kind: str, row: dict) -> None:
    build = f"{row['build']:8} " if "build" in row else ""
    head = f"  {build}{kind:11} {row['protocol']:5} {row['path']:7}"
    if "error" in row:
        print(f"{head} ERROR: {(row['error'].splitlines() or [''])[0]}", file=sys.stderr)
    elif kind == "connections":
        print(
            f"{head} {row['conns_per_s']:9,.0f} conn/s  p50 {row['p50_ms']:.2f} ms", file=sys.stderr
        )
    else:
        print(
            f"{head} {row['msgs_per_s']:9,.0f} msg/s  p50 {row['p50_ms']:.3f} ms  "
            f"p99 {row['p99_ms']:.3f} ms",
            file=sys.stderr,
        )


def run_all(args, deadline: common.Deadline, builds=None) -> dict:
    """Every measurement, on this checkout or (``--baseline``) on each of ``builds``.

    With builds, each has a world (core and gateway) up for the whole run;
    every round runs both, the first of the two alternating between rounds,
    and each world's paths ABBA as without builds.
    """
    out: dict = {
        "throughput": [],
        "latency": [],
        "connections": [],
        "routing": [],
        "rate": args.rate,
        "loadavg_start": os.getloadavg()[0],
    }
    with ExitStack() as stack:
        worlds = [stack.enter_context(world(args, deadline, b)) for b in builds or [None]]
        watch = None
        if builds:
            watch = baseline.TrialWatch({w.build: [w.core.pid, w.gateway.pid] for w in worlds})

        def trial(w: World, fn, key: dict, *fn_args) -> dict:
            call = partial(fn, w, key["protocol"], key["path"], *fn_args)
            if watch is not None:
                call = partial(watch.run, w.build, call)
            row = common.guarded(call, key, deadline)
            if w.build is not None:
                row["build"] = w.build
            return row

        def measured(kind: str, proto: str, fn, *fn_args) -> None:
            """``--runs`` rounds of ``fn(w, proto, path, *fn_args)`` on both paths, ABBA."""
            for run in range(args.runs):
                for w in baseline.order(worlds, run):
                    for path in order(run):
                        row = trial(w, fn, {"protocol": proto, "path": path, "run": run}, *fn_args)
                        row["run"] = run
                        out[kind].append(row)
                        echo(kind, row)

        def warm_up(proto: str, fn, *fn_args) -> None:
            for w in worlds:
                for path in PATHS:
                    row = trial(w, fn, {"protocol": proto, "path": path}, *fn_args)
                    if "error" in row:
                        echo("warm-up", row)

        for proto in PROTOCOLS:
            # warm-up of both paths: the clients' imports, the cores' first queues
            if args.warmup:
                warm_up(proto, message_trial, args.warmup, 0, args, deadline, ".warm")
            measured("throughput", proto, message_trial, args.count, 0, args, deadline, "")
            measured(
                "latency",
                proto,
                message_trial,
                args.latency_count,
                args.rate,
                args,
                deadline,
                ".lat",
            )
        for proto in PROTOCOLS:
            warm_up(proto, connection_trial, 20, deadline)
            measured("connections", proto, connection_trial, args.connections, deadline)
        for w in worlds:
            for b in (w.core, w.gateway):
                if not b.running:
                    raise common.BenchError(f"{b.name} exited during the run\n{b.log_tail(20)}")
    out["loadavg_end"] = os.getloadavg()[0]
    if builds:  # each build times its routing in its own process: bench/gateway_baseline.py
        out["idle_note"], out["idle_build_cpu"] = watch.note(), watch.share
        out["other_cpu"] = watch.others
    else:
        out["routing"] = routing_figures(args.routing_keys, args.routing_repeat)
    return out


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STOMP and AMQP through the gateway (forward) against the same core directly.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--count", "-n", type=int, default=20_000, help="messages per throughput trial")
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--runs", type=int, default=2, help="measured trials per path (interleaved)")
    p.add_argument("--warmup", type=int, default=2000, help="messages per path before measuring")
    p.add_argument("--prefetch", type=int, default=1000, help="consumer prefetch (STOMP and AMQP)")
    p.add_argument("--durable", action="store_true", help="persistence on, durable messages")
    p.add_argument("--rate", type=float, default=2000.0, help="msg/s of the paced latency trials")
    p.add_argument("--latency-count", type=int, default=4000, help="messages per latency trial")
    p.add_argument("--connections", type=int, default=1000, help="connections per trial")
    p.add_argument(
        "--stomp-nagle",
        action="store_true",
        help="leave Nagle on for the stomp.py producer (default: TCP_NODELAY, as proton sets)",
    )
    p.add_argument(
        "--isolate-gateway",
        action="store_true",
        help="pin the gateway to the last CPU and the core and clients to the others (both paths)",
    )
    p.add_argument("--routing-keys", type=int, default=10_000)
    p.add_argument("--routing-repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="smoke run: small counts, one run")
    p.add_argument("--timeout", type=float, default=600.0, help="cap on the whole run, seconds")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    p.add_argument("--keep", action="store_true", help="keep the brokers' directory")
    baseline.add_options(p, rounds=False)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.runs, args.warmup = 2000, 1, 200
        args.latency_count, args.connections = 400, 50
        args.routing_keys, args.routing_repeat = 1000, 1
    if (
        min(args.count, args.size, args.runs, args.prefetch, args.latency_count, args.connections)
        <= 0
    ):
        print("counts, --size, --runs and --prefetch must be positive", file=sys.stderr)
        return 2
    if args.rate <= 0 or args.warmup < 0:
        print("--rate must be positive and --warmup not negative", file=sys.stderr)
        return 2
    status = baseline.dispatch(
        args, parser, lambda: gateway_baseline.run(args, sys.modules[__name__])
    )
    if status is not None:
        return status
    if not args.stomp_nagle:
        stomp_producer_nodelay()

    def report(out: dict) -> None:
        s = summarize(out)
        print_report(out, s, args)
        if args.json:
            print_json(out, s, args)

    return common.run_guarded(NAME, args, run_all, report, failed)


if __name__ == "__main__":
    sys.exit(main())
