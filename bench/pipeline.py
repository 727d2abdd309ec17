#!/usr/bin/env python3
"""How fast the delivery audit reads event logs: events per second on local[1] and local[2].

One invocation writes a synthetic event log with ``junction analyze synth``'s
generator (:func:`junction.pipeline.synth.generate`: a gateway and three broker
cores, skewed keys, planted tenants, message groups, messages crossing nodes,
injected losses, duplicates and reorderings; ``--events``, 10,000,000 by
default) into a temporary folder, then runs the ``audit`` job
(:func:`junction.pipeline.audit.run`) over it once per Spark master in
``--masters`` (``local[1]`` and ``local[2]``), each in a fresh SparkSession,
rotating the order over ``--runs`` rounds.

For each run it prints the wall time of ``audit.run`` (reading the JSON Lines,
every join and aggregation, writing the Parquet tables and the HTML report;
not the JVM's start, which is timed apart as ``spark start``) and events per
second = events in the log / that time.  The ratio local[2] / local[1] says
how the job scales from one core to two.  Every run is checked, and fails
loudly otherwise: the audit must find exactly the losses, duplicates,
unexpected messages and reorderings that truth.json planted.

    .venv/bin/python bench/pipeline.py                      # 10M events, local[1] and local[2]
    .venv/bin/python bench/pipeline.py --events 200000      # a quick run
    .venv/bin/python bench/pipeline.py --json               # plus one JSON line at the end
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from junction.pipeline import audit  # noqa: E402
from junction.pipeline.common import get_spark  # noqa: E402
from junction.pipeline.synth import generate  # noqa: E402

#: the default log size (the issue's figure)
DEFAULT_EVENTS = 10_000_000
DEFAULT_MASTERS = ("local[1]", "local[2]")


def check(truth, summary: dict) -> list[str]:
    """What the audit got wrong against what the generator planted (empty: all exact)."""
    want = {
        "sent": truth.events_by_kind.get("message.sent", 0),
        "lost": len(truth.lost),
        "duplicated": len(truth.duplicated),
        "unexpected": len(truth.unexpected),
        "out_of_order": len(truth.out_of_order),
        "expired": truth.expired,
        "dead_lettered": truth.dead_lettered,
    }
    return [f"{k}: audit {summary.get(k)} != planted {v}" for k, v in want.items() if summary.get(k) != v]


def run_once(master: str, events_dir: str, out_dir: str, truth) -> dict:
    started = time.perf_counter()
    spark = get_spark(master, app="bench-pipeline")
    spark_start = time.perf_counter() - started
    try:
        t0 = time.perf_counter()
        result = audit.run(spark, events_dir, out_dir)
        seconds = time.perf_counter() - t0
    finally:
        spark.stop()
    problems = check(truth, result.summary)
    if problems:
        raise SystemExit(f"{master}: the audit is wrong: {'; '.join(problems)}")
    return {
        "master": master,
        "seconds": seconds,
        "spark_start_s": spark_start,
        "events_per_s": truth.events / seconds,
        "exit_code": result.exit_code,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS, help="events to generate (default %(default)s)")
    parser.add_argument("--masters", default=",".join(DEFAULT_MASTERS), help="Spark masters, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="rounds over the masters (order rotated)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", help="where to write the log (default: a temporary folder, removed)")
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    args = parser.parse_args(argv)
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    root = args.dir or tempfile.mkdtemp(prefix="bench-pipeline-")
    os.environ.setdefault("JUNCTION_PROGRESS", "0")
    try:
        events_dir = os.path.join(root, "events")
        t0 = time.perf_counter()
        truth = generate(events_dir, args.events, seed=args.seed, keys=2000, tenants=20)
        generated = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(events_dir, f)) for f in os.listdir(events_dir) if f.endswith(".jsonl"))
        print(f"log: {truth.events:,} events, {truth.messages:,} messages, {len(truth.files)} files, "
              f"{size / 1e9:.2f} GB; generated in {generated:.1f} s ({truth.events / generated:,.0f} events/s)")
        print(f"planted: {len(truth.lost)} lost, {len(truth.duplicated)} duplicated, {len(truth.unexpected)} unexpected, "
              f"{len(truth.out_of_order)} out of order")
        rows = []
        for r in range(args.runs):
            order = masters if r % 2 == 0 else list(reversed(masters))
            for master in order:
                row = run_once(master, events_dir, os.path.join(root, f"out-{r}"), truth)
                rows.append(row)
                print(f"  run {r + 1} {master:<10} audit {row['seconds']:7.1f} s  "
                      f"{row['events_per_s']:>10,.0f} events/s  (spark start {row['spark_start_s']:.1f} s)  exact",
                      flush=True)
        medians = {
            m: statistics.median(x["events_per_s"] for x in rows if x["master"] == m) for m in masters
        }
        print()
        print(f"| master | audit events/s (median of {args.runs}) | seconds for {truth.events:,} events |")
        print("|---|---|---|")
        for m in masters:
            print(f"| {m} | {medians[m]:,.0f} | {truth.events / medians[m]:.1f} |")
        if len(masters) == 2:
            print(f"\n{masters[1]} / {masters[0]}: {medians[masters[1]] / medians[masters[0]]:.2f}")
        if args.json:
            print(json.dumps({"events": truth.events, "generated_s": generated, "runs": rows, "medians": medians}))
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
