"""``bench/gateway.py --baseline REV``: the gateway bench on two builds, and their ratios.

``bench/gateway.py`` runs its measurements on one world (a core and a
gateway) per build, interleaved (see its ``run_all`` and
``bench/baseline.py``); this module runs that under the deadline, times each
build's routing decisions with that build's own ``bench/gateway_routing.py``
(in process there, on that build's ``junction``), and prints each build's
usual report followed by the comparison: per protocol and path, each figure's
medians and the rounds' current / baseline ratios.  Both the cores and the
gateways come from the build under test.

It gets the gateway bench as a module object (``gw``, for its ``run_all``)
rather than importing it, so that a script run as ``__main__`` is not
imported a second time; the report, the trials and the world are modules
of their own.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

try:  # imported as bench.gateway_baseline from the repository root
    from . import baseline, common, gateway_report
    from .gateway_trials import stomp_producer_nodelay
    from .gateway_world import NAME
except ImportError:  # run from a script in bench/: bench/ (and the checkout, for junction) on sys.path
    import baseline
    import common
    import gateway_report
    from gateway_trials import stomp_producer_nodelay
    from gateway_world import NAME

#: per kind of measurement, the figures compared: (row field, label, format)
METRICS = {
    "throughput": (
        ("msgs_per_s", "msg/s", ",.0f"),
        ("p50_ms", "p50 ms", ".2f"),
        ("core_cpu_us_per_msg", "core us/msg", ".1f"),
        ("gateway_cpu_us_per_msg", "gw us/msg", ".1f"),
    ),
    "latency": (
        ("p50_ms", "p50 ms", ".3f"),
        ("p99_ms", "p99 ms", ".3f"),
        ("gateway_cpu_us_per_msg", "gw us/msg", ".1f"),
    ),
    "connections": (
        ("conns_per_s", "conn/s", ",.0f"),
        ("core_cpu_us_per_conn", "core us/conn", ",.0f"),
        ("gateway_cpu_us_per_conn", "gw us/conn", ",.0f"),
    ),
}
#: the kinds of measurement whose rows are kept per build
KINDS = ("throughput", "latency", "connections")


def run(args, gw) -> int:
    """The whole ``--baseline`` run of the gateway bench ``gw``; the exit status.

    ``args`` have passed :func:`baseline.options_problem`.
    """
    commit = args.baseline_commit
    if not args.stomp_nagle:
        stomp_producer_nodelay()

    def run_all(args, deadline: common.Deadline) -> dict:
        with baseline.builds(commit) as builds:
            out = gw.run_all(args, deadline, builds)
            out["routing"] = compared_routing(args, builds, deadline)
        out["builds"] = builds
        return out

    def report(out: dict) -> None:
        summaries = {}
        for b in out["builds"]:
            part = of_build(out, b.name)
            summaries[b.name] = gateway_report.summarize(part)
            print(f"\n===== {b.name}: {b.label}")
            gateway_report.print_report(part, summaries[b.name], args)
        comparison = compare(out)
        print(baseline.header(out["builds"], args.runs, out["loadavg_start"], out["loadavg_end"]))
        print(out["idle_note"])
        for kind, comp in comparison.items():
            print(f"\n{kind}")
            if kind == "routing":
                baseline.print_comparison(
                    comp, f"{'router':8}  {'path':10}", lambda q: f"{q['router']:8}  {q['path']:10}"
                )
            else:
                baseline.print_comparison(
                    comp, f"{'proto':5}  {'path':7}", lambda q: f"{q['protocol']:5}  {q['path']:7}"
                )
        if args.json:
            import json

            record = gateway_report.json_record(
                {k: v for k, v in out.items() if k != "builds"}, summaries, args
            )
            record["builds"] = {b.name: b.label for b in out["builds"]}
            record["comparison"] = comparison
            print(json.dumps(record, separators=(",", ":")))

    return common.run_guarded(NAME, args, run_all, report, gateway_report.failed)


def of_build(out: dict, name: str) -> dict:
    """``out`` as the gateway bench's report reads it, with only build ``name``'s rows.

    Its routing rows are the medians of that build's rounds.
    """
    part = {k: v for k, v in out.items() if k not in (*KINDS, "routing")}
    for kind in KINDS:
        part[kind] = [r for r in out[kind] if r.get("build") == name]
    by_key: dict[tuple, list[float]] = {}
    for r in out["routing"]:
        if r.get("build") == name and "error" not in r:
            by_key.setdefault((r["router"], r["path"]), []).append(r["us"])
    part["routing"] = [
        {
            "router": router,
            "path": path,
            "us": (us := statistics.median(v)),
            "decisions_per_s": 1e6 / us,
        }
        for (router, path), v in by_key.items()
    ]
    return part


def compare(out: dict) -> dict[str, list[dict]]:
    """Per kind: :func:`baseline.compare` of its rows (no gateway CPU on the direct path)."""
    comparison = {}
    for kind, metrics in METRICS.items():
        comp = baseline.compare(out[kind], ("protocol", "path"), metrics, round_key="run")
        comparison[kind] = [
            q for q in comp if not (q["path"] == "direct" and q["metric"].startswith("gateway_"))
        ]
    comparison["routing"] = routing_comparison(out["routing"])
    return comparison


def routing_comparison(rows: list[dict]) -> list[dict]:
    """The routing decisions of the two builds: the ratio of their best rounds.

    A routing decision is a few microseconds of pure CPU in one process, so
    a round's figure is the machine's speed at that moment as much as the
    code's: on a shared machine one round's ratio swung from 0.6 to 1.75
    between runs while each build's own best stayed within 4%.  So the ratio
    reported is current best / baseline best over all the rounds (the
    fastest each build ran, as ``timeit`` reports), and the per-round ratios
    give the spread beside it.
    """
    comp = baseline.compare(rows, ("router", "path"), (("us", "us/decision", ".2f"),), round_key="run")
    best: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if "error" not in r and r.get("us"):
            per = best.setdefault((r["router"], r["path"]), {})
            per[r["build"]] = min(per.get(r["build"], r["us"]), r["us"])
    for q in comp:
        per = best.get((q["router"], q["path"]), {})
        b, c = per.get(baseline.BASELINE), per.get(baseline.CURRENT)
        q["label"] = "best us/dec."
        q["baseline"], q["current"] = b, c
        q["ratio_median"] = c / b if b and c else None
    return comp


def compared_routing(args, builds, deadline: common.Deadline) -> list[dict]:
    """Each build's own ``bench/gateway_routing.py``, ``--runs`` rounds, alternating."""
    rows = []
    for run in range(args.runs):
        for b in baseline.order(builds, run):
            try:
                got = baseline.routing_rows(b, args.routing_keys, args.routing_repeat, deadline)
            except (common.BenchError, OSError, subprocess.SubprocessError) as e:
                got = [{"router": "-", "path": "-", "us": None, "error": str(e)}]
                print(f"  {b.name:8} routing ERROR: {e}", file=sys.stderr)
            for r in got:
                r.update(build=b.name, run=run)
            rows.extend(got)
    return rows
