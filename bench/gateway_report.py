"""The gateway bench's summary and report: medians per path, ratios, targets, the tables and JSON.

:func:`summarize` turns the rows of every trial into, per protocol, the
medians of each path, the ratios gateway / direct and the latency the
gateway adds, checked against the gateway issue's targets;
:func:`print_report` prints the tables, :func:`json_record` the ``--json``
line.  ``bench/gateway_baseline.py`` prints the same report per build.
"""

from __future__ import annotations

import os
import statistics

try:  # imported as bench.gateway_report from the repository root
    from . import common, gateway_routing
    from .gateway_world import PATHS, PROTOCOLS
except ImportError:  # run from a script in bench/: bench/ (and the checkout, for junction) on sys.path
    import common
    import gateway_routing
    from gateway_world import PATHS, PROTOCOLS

#: the gateway issue's targets
TARGET_THROUGHPUT_RATIO = 0.95
TARGET_ADDED_P50_MS = 0.1
#: a paced trial that reached less than this share of --rate measured queueing, not latency
PACE_KEPT = 0.95


def median_of(rows: list[dict], proto: str, path: str, field: str):
    vals = [
        r[field]
        for r in rows
        if r["protocol"] == proto
        and r["path"] == path
        and "error" not in r
        and r.get(field) is not None
    ]
    return statistics.median(vals) if vals else None


def summarize(out: dict) -> dict:
    """Per protocol: the medians per path, the ratios and the added latencies."""
    s: dict = {}
    for proto in PROTOCOLS:
        d: dict = {}
        for kind, fields in (
            (
                "throughput",
                ("msgs_per_s", "p50_ms", "p99_ms", "core_cpu_us_per_msg", "gateway_cpu_us_per_msg"),
            ),
            ("latency", ("p50_ms", "p99_ms", "core_cpu_us_per_msg", "gateway_cpu_us_per_msg")),
            (
                "connections",
                ("conns_per_s", "p50_ms", "core_cpu_us_per_conn", "gateway_cpu_us_per_conn"),
            ),
        ):
            d[kind] = {
                path: {f: median_of(out[kind], proto, path, f) for f in fields} for path in PATHS
            }
        t = d["throughput"]
        d["throughput_ratio"] = common.ratio(t["gateway"]["msgs_per_s"], t["direct"]["msgs_per_s"])
        lat = d["latency"]
        for q in ("p50", "p99"):
            g, x = lat["gateway"][f"{q}_ms"], lat["direct"][f"{q}_ms"]
            d[f"added_{q}_ms"] = g - x if g is not None and x is not None else None
        c = d["connections"]
        d["connections_ratio"] = common.ratio(
            c["gateway"]["conns_per_s"], c["direct"]["conns_per_s"]
        )
        paced = [
            r["msgs_per_s"]
            for r in out["latency"]
            if r["protocol"] == proto and "error" not in r and r.get("msgs_per_s") is not None
        ]
        d["slowest_paced_msgs_per_s"] = min(paced) if paced else None
        d["pace_kept"] = bool(paced) and min(paced) >= PACE_KEPT * out["rate"]
        d["throughput_met"] = (
            None
            if d["throughput_ratio"] is None
            else d["throughput_ratio"] >= TARGET_THROUGHPUT_RATIO
        )
        d["added_p50_met"] = (
            None
            if d["added_p50_ms"] is None or not d["pace_kept"]
            else d["added_p50_ms"] <= TARGET_ADDED_P50_MS
        )
        s[proto] = d
    return s


command_line = common.command_line


def verdict(met) -> str:
    return "n/a" if met is None else ("met" if met else "NOT met")


def print_report(out: dict, s: dict, args) -> None:
    f = common.fmt
    print(f"\ncommand: {command_line()}")
    print(
        f"gateway (routerMode=forward, FIRST_ELEMENT, one core) vs direct to the same core; "
        f"security on; {'durable' if args.durable else 'non-durable'}; {os.cpu_count()} CPUs; "
        f"{args.runs} run(s) per path, ABBA, medians; warm-up {args.warmup}; "
        f"load average {out['loadavg_start']:.2f} at start, {out['loadavg_end']:.2f} at the end; "
        + ("gateway on a CPU of its own (--isolate-gateway)" if args.isolate_gateway else "no CPU pinning")
    )
    print(
        f"\nthroughput: {args.count:,} x {args.size} B, one producer + one consumer, "
        f"prefetch {args.prefetch}"
    )
    print(
        f"{'proto':5}  {'path':7}  {'msg/s':>9}  {'p50 ms':>7}  {'p99 ms':>7}  "
        f"{'core us/msg':>11}  {'gw us/msg':>9}  runs msg/s"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["throughput"][path]
            runs = [
                "ERR" if "error" in r else f"{r['msgs_per_s']:,.0f}"
                for r in out["throughput"]
                if r["protocol"] == proto and r["path"] == path
            ]
            print(
                f"{proto:5}  {path:7}  {f(m['msgs_per_s'], ',.0f'):>9}  {f(m['p50_ms'], '.2f'):>7}  "
                f"{f(m['p99_ms'], '.2f'):>7}  {f(m['core_cpu_us_per_msg'], '.1f'):>11}  "
                f"{f(m['gateway_cpu_us_per_msg'], '.1f'):>9}  {' '.join(runs)}"
            )
    print(f"\npaced latency: {args.latency_count:,} messages at {args.rate:g} msg/s")
    print(
        f"{'proto':5}  {'path':7}  {'p50 ms':>7}  {'p99 ms':>7}  {'gw us/msg':>9}  "
        f"{'msg/s':>6}  runs p50 ms"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["latency"][path]
            achieved = median_of(out["latency"], proto, path, "msgs_per_s")
            runs = [
                "ERR" if "error" in r else f"{r['p50_ms']:.3f}"
                for r in out["latency"]
                if r["protocol"] == proto and r["path"] == path
            ]
            print(
                f"{proto:5}  {path:7}  {f(m['p50_ms'], '.3f'):>7}  {f(m['p99_ms'], '.3f'):>7}  "
                f"{f(m['gateway_cpu_us_per_msg'], '.1f'):>9}  {f(achieved, ',.0f'):>6}  "
                f"{' '.join(runs)}"
            )
    print(
        f"\nnew connections: {args.connections:,} sequential connect + authenticate + disconnect "
        f"(raw socket client)"
    )
    print(
        f"{'proto':5}  {'path':7}  {'conn/s':>7}  {'p50 ms':>7}  {'core us/conn':>12}  "
        f"{'gw us/conn':>10}"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["connections"][path]
            print(
                f"{proto:5}  {path:7}  {f(m['conns_per_s'], ',.0f'):>7}  {f(m['p50_ms'], '.2f'):>7}  "
                f"{f(m['core_cpu_us_per_conn'], ',.0f'):>12}  "
                f"{f(m['gateway_cpu_us_per_conn'], ',.0f'):>10}"
            )
    print(
        f"\nrouting decisions in process ({args.routing_keys:,} client ids, "
        f"{gateway_routing.TARGETS} ready targets, best of {args.routing_repeat})"
    )
    print(f"{'router':8}  {'path':10}  {'us/decision':>11}  {'decisions/s':>11}")
    for r in out["routing"]:
        print(
            f"{r['router']:8}  {r['path']:10}  {r['us']:11.2f}  {f(r['decisions_per_s'], ',.0f'):>11}"
        )
    print("\ngateway / direct")
    print(f"{'figure':38}  {'STOMP':>8}  {'AMQP':>8}  target")
    rows = [
        (
            "throughput ratio (msg/s)",
            "throughput_ratio",
            ".3f",
            f">= {TARGET_THROUGHPUT_RATIO}",
            "throughput_met",
        ),
        (
            f"added p50 at {args.rate:g} msg/s (ms)",
            "added_p50_ms",
            "+.3f",
            f"<= {TARGET_ADDED_P50_MS} ms",
            "added_p50_met",
        ),
        (f"added p99 at {args.rate:g} msg/s (ms)", "added_p99_ms", "+.3f", "-", None),
        ("new connections ratio (conn/s)", "connections_ratio", ".3f", "-", None),
    ]
    for label, key, spec, target, met in rows:
        cells = [f(s[p][key], spec) for p in PROTOCOLS]
        verdicts = ""
        if met:
            verdicts = "  " + ", ".join(
                f"{p} "
                + (
                    "n/a (pace not kept)"
                    if met == "added_p50_met" and not s[p]["pace_kept"]
                    else verdict(s[p][met])
                )
                for p in PROTOCOLS
            )
        print(f"{label:38}  {cells[0]:>8}  {cells[1]:>8}  {target}{verdicts}")
    for p in PROTOCOLS:
        if not s[p]["pace_kept"] and s[p]["slowest_paced_msgs_per_s"] is not None:
            print(
                f"note: {p} paced trials reached only {s[p]['slowest_paced_msgs_per_s']:,.0f} of "
                f"{args.rate:g} msg/s: their latency is queueing behind busy clients, not the "
                f"gateway's; re-run on a quieter machine or with a lower --rate"
            )
    print(common.calibration_line())
    errors = [r for k in ("throughput", "latency", "connections") for r in out[k] if "error" in r]
    for r in errors:
        print(
            f"error: {r['protocol']} {r['path']} run {r.get('run')}: {r['error'].splitlines()[0]}"
        )


def json_record(out: dict, s, args) -> dict:
    """The ``--json`` line's record: the settings, the summary ``s`` and every row."""
    return {
        "bench": "gateway",
        "command": command_line(),
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "warmup": args.warmup,
        "prefetch": args.prefetch,
        "durable": args.durable,
        "isolate_gateway": args.isolate_gateway,
        "rate": args.rate,
        "latency_count": args.latency_count,
        "connections_per_trial": args.connections,
        "cpus": os.cpu_count(),
        "targets": {
            "throughput_ratio": TARGET_THROUGHPUT_RATIO,
            "added_p50_ms": TARGET_ADDED_P50_MS,
        },
        "summary": s,
        **out,
    }


def print_json(out: dict, s: dict, args) -> None:
    import json

    print(json.dumps(json_record(out, s, args), separators=(",", ":")))


def failed(out: dict) -> bool:
    """Whether a measurement went wrong (exit status 1)."""
    return any("error" in r for k in ("throughput", "latency", "connections") for r in out[k])

