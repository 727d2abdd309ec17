"""The routing job: how the gateways' connection routers spread connections, and at what cost.

From ``connection.routed`` (one event per routing decision) and
``connection.closed`` (the connection's bytes, joined on ``(node, conn)``:
a connection id is unique within its node) it answers:

* connections per router and target over time (``routing_by_target_time``;
  time buckets chosen from the data's span, or ``--bucket``);
* each target's share of its router's connections, and the router's skew
  (busiest target / mean target; 1.0 is perfectly even) (``routing_targets``);
* refusals by reason (``refusals``), decisions local/forward/redirect/refused
  and the cache hit rate;
* decision-time percentiles (p50/p90/p99/max of ``decision_us``) per router
  and overall (``decision_time``);
* the hottest keys: most connections, with their bytes in and out (``hot_keys``);
* client and probe connections per node (``connections``).

A connection whose login failed is refused before any routing: the gateway
logs it as a ``connection.routed`` with decision ``refused`` and reason
``unauthenticated`` (no key, no target), so it is counted with the refusals.
The gateways' own readiness probes connect to the broker cores (and may pass
through a gateway, which serves them locally) with a client id starting with
the routers' internal prefix (``$.artemis.internal.router.client.``): they are
counted apart, as probes, and left out of every client figure.

A connection routed ``local`` went to the gateway node's own broker core, so
its target is named by that node (the name a remote target has when it is
the same core reached through a connector, if connectors are named after
nodes); any other target by its connector name.
"""

from __future__ import annotations

import argparse
import math
import os
import re

__all__ = ["JOB", "add_arguments", "choose_bucket", "parse_bucket", "run", "target_column"]

JOB = "routing"

#: the event kinds the job reads
KINDS_READ = ("connection.accepted", "connection.routed", "connection.closed")
#: decisions (schema.DECISIONS) in the order tables show them
DECISIONS = ("local", "forward", "redirect", "refused")
#: an automatic time bucket aims at about this many buckets over the data's span
TARGET_BUCKETS = 60
#: the bucket widths (seconds) an automatic choice picks from: round numbers people read
NICE_BUCKETS_S = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800,
)
#: the decision-time percentiles reported (with the maximum)
PERCENTILES = (0.5, 0.9, 0.99)
#: percentile_approx's accuracy (Spark's default; 1/accuracy is the relative rank error, and
#: a group of fewer values than this is answered exactly)
PERCENTILE_ACCURACY = 10_000
#: hottest keys kept (--top)
DEFAULT_TOP = 20
#: decision-time histogram bins per power of ten of microseconds
HISTOGRAM_BINS_PER_DECADE = 10
#: decision times below this (microseconds) fall in the histogram's first bin (log scale)
HISTOGRAM_FLOOR_US = 0.1
#: routers plotted over time (the busiest); targets per router plotted (the rest as "other")
MAX_PLOT_ROUTERS = 4
MAX_PLOT_TARGETS = 10
#: most (router, bucket, target) points taken to the driver for the time plots
MAX_PLOT_POINTS = 100_000
#: rows of each table shown in the report (the Parquet tables have them all)
REPORT_ROWS = 50
#: the name tables and plots give to the row of all routers together
ALL_ROUTERS = "(all)"

_BUCKET_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_BUCKET_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_bucket(text: str) -> float:
    """``--bucket`` to seconds: ``30`` or ``30s``, ``5m``, ``1h``, ``1d``; ValueError otherwise."""
    match = _BUCKET_RE.match(str(text))
    if not match:
        raise ValueError(f"--bucket {text!r}: expected a number of seconds or e.g. 10s, 5m, 1h, 1d")
    seconds = float(match.group(1)) * _BUCKET_UNITS[match.group(2) or "s"]
    if seconds <= 0:
        raise ValueError(f"--bucket {text!r}: must be positive")
    return seconds


def choose_bucket(span_s: float, target: int = TARGET_BUCKETS) -> float:
    """The smallest round bucket width (:data:`NICE_BUCKETS_S`) giving at most ``target`` buckets."""
    for width in NICE_BUCKETS_S:
        if span_s / width <= target:
            return float(width)
    return float(math.ceil(span_s / target / NICE_BUCKETS_S[-1]) * NICE_BUCKETS_S[-1])


def _format_bucket(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def target_column():
    """The target a routed connection went to: the target's name, or the node's own for ``local``."""
    from pyspark.sql import functions as F

    local = F.col("target").isNull() | (F.col("target") == "local")
    return F.when(F.col("decision") == "refused", F.lit(None)).when(local, F.col("node")).otherwise(F.col("target"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The routing job's options."""
    parser.add_argument(
        "--bucket", default=None, metavar="WIDTH",
        help=f"time bucket of the connections-over-time table, e.g. 10s, 5m, 1h (default: about "
        f"{TARGET_BUCKETS} buckets over the data's span)",
    )
    parser.add_argument(
        "--top", type=int, default=DEFAULT_TOP, metavar="N",
        help=f"hottest keys to list (default {DEFAULT_TOP})",
    )


# -- the report ----------------------------------------------------------------------------------


def _plot_over_time(router: str, points: list, bucket_s: float):
    """Stacked connections per target over time for one router (the biggest targets, then "other")."""
    import datetime as dt

    import matplotlib.pyplot as plt

    totals: dict[str, int] = {}
    for p in points:
        totals[p["target"]] = totals.get(p["target"], 0) + p["connections"]
    ranked = sorted(totals, key=lambda t: (-totals[t], t))
    shown = ranked[:MAX_PLOT_TARGETS]
    buckets = sorted({p["bucket"] for p in points})
    index = {b: i for i, b in enumerate(buckets)}
    series = {t: [0] * len(buckets) for t in shown}
    other = [0] * len(buckets)
    for p in points:
        row = series.get(p["target"], other)
        row[index[p["bucket"]]] += p["connections"]
    xs = [dt.datetime.fromtimestamp(b, dt.timezone.utc) for b in buckets]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    labels = list(shown) + (["other"] if any(other) else [])
    values = [series[t] for t in shown] + ([other] if any(other) else [])
    if len(xs) == 1:
        bottom = 0
        for label, row in zip(labels, values, strict=True):
            ax.bar(xs, row, bottom=bottom, width=bucket_s / 86400 * 0.8, label=label)
            bottom += row[0]
    else:
        ax.stackplot(xs, *values, labels=labels, step="post")
    ax.set_ylabel(f"connections per {_format_bucket(bucket_s)}")
    ax.set_title(f"router {router}: connections per target")
    ax.legend(loc="upper left", fontsize="small", ncol=2)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def _plot_shares(targets: list):
    """Horizontal bars: each target's share of its router's connections."""
    import matplotlib.pyplot as plt

    labels = [f"{t['router']} / {t['target']}" for t in targets]
    shares = [100.0 * t["share"] for t in targets]
    fig, ax = plt.subplots(figsize=(7, max(2.0, 0.32 * len(labels) + 1)))
    ax.barh(range(len(labels)), shares)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("% of the router's connections")
    ax.set_title("share per target")
    fig.tight_layout()
    return fig


def _plot_decision_time(histogram: list[tuple[float, float, int]]):
    """Decision-time histogram (log-spaced bins) with its CDF on a second axis."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    lows = [h[0] for h in histogram]
    widths = [h[1] - h[0] for h in histogram]
    counts = [h[2] for h in histogram]
    ax.bar(lows, counts, width=widths, align="edge", edgecolor="white")
    ax.set_xscale("log")
    ax.set_xlabel("decision time (µs)")
    ax.set_ylabel("decisions")
    total = sum(counts) or 1
    running, cdf = 0, []
    for c in counts:
        running += c
        cdf.append(100.0 * running / total)
    twin = ax.twinx()
    twin.step([h[1] for h in histogram], cdf, where="post", color="tab:red")
    twin.set_ylabel("% of decisions at most (CDF)")
    twin.set_ylim(0, 101)
    ax.set_title("decision time")
    fig.tight_layout()
    return fig


# -- the job ---------------------------------------------------------------------------------------


def run(spark, events: str, out: str, **options):
    """The routing job: tables under ``out`` and the report ``out/routing.html``.

    Options are :func:`add_arguments`'s (others, such as the CLI's own, are
    ignored).  PipelineError (exit 2) when there is no ``connection.routed``
    event; exit code 0 otherwise.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from junction.pipeline.common import (
        JobResult,
        PipelineError,
        progress,
        read_events,
        write_table,
    )
    from junction.pipeline.report import Report

    top = int(options.get("top") or DEFAULT_TOP)
    if top < 1:
        raise PipelineError(f"--top must be at least 1, not {top}")
    bucket_s = None
    if options.get("bucket"):
        try:
            bucket_s = parse_bucket(options["bucket"])
        except ValueError as exc:
            raise PipelineError(str(exc)) from None
    no_routed = (
        f"no connection.routed events in {events}: are connection events enabled in <junction><events>?"
    )

    with progress(spark, JOB) as shown:
        shown.phase("reading events")
        try:
            df = read_events(spark, events, KINDS_READ)
        except PipelineError as exc:
            if str(exc).startswith("no events of kinds"):
                raise PipelineError(no_routed) from None
            raise
        from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX

        columns = ["kind", "ts", "node", "conn", "router", "key_type", "key", "target", "decision", "reason",
                   "cache_hit", "decision_us", "bytes_in", "bytes_out", "client_id"]
        df = df.select(*columns)
        # the gateways' probes: their connections (accepted on a core, or routed by a gateway) by
        # their client id; every event of such a connection is a probe's
        is_probe = F.coalesce(F.col("client_id").startswith(INTERNAL_CLIENT_ID_PREFIX), F.lit(False))
        probes = df.filter(is_probe).select("node", "conn").distinct().withColumn("probe", F.lit(True))
        df = (
            df.join(F.broadcast(probes), ["node", "conn"], "left")
            .withColumn("probe", F.coalesce(F.col("probe"), F.lit(False)))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        routed = None
        try:
            kind = F.col("kind")
            is_routed = (kind == "connection.routed") & ~F.col("probe")
            is_closed = (kind == "connection.closed") & ~F.col("probe")
            stats = df.agg(
                F.sum(F.when(is_routed, 1).otherwise(0)).alias("routed"),
                F.sum(F.when(is_closed, 1).otherwise(0)).alias("closed"),
                F.min(F.when(is_routed, F.col("ts"))).alias("first"),
                F.max(F.when(is_routed, F.col("ts"))).alias("last"),
            ).first()
            by_node = (
                df.groupBy("node", F.when(F.col("probe"), "probe").otherwise("client").alias("connection"))
                .agg(
                    F.sum(F.when(kind == "connection.accepted", 1).otherwise(0)).alias("accepted"),
                    F.sum(F.when(kind == "connection.routed", 1).otherwise(0)).alias("routed"),
                    F.sum(F.when(kind == "connection.closed", 1).otherwise(0)).alias("closed"),
                    F.countDistinct("conn").alias("connections"),
                )
                .orderBy("node", "connection")
            )
            if not stats["routed"]:
                raise PipelineError(no_routed)
            span_s = max(0.0, (stats["last"] - stats["first"]) / 1000.0)
            if bucket_s is None:
                bucket_s = choose_bucket(span_s)

            closed = (
                df.filter(is_closed)
                .groupBy("node", "conn")
                .agg(F.sum("bytes_in").alias("bytes_in"), F.sum("bytes_out").alias("bytes_out"))
            )
            routed = (
                df.filter(is_routed)
                .drop("bytes_in", "bytes_out")
                .withColumn("target", target_column())
                .withColumn("router", F.coalesce(F.col("router"), F.lit("")))
                .join(closed, ["node", "conn"], "left")
                .persist(StorageLevel.MEMORY_AND_DISK)  # five aggregations read it
            )
            tables: dict[str, str] = {}
            tables["connections"] = write_table(by_node, out, "connections")

            shown.phase(f"connections per target per {_format_bucket(bucket_s)}")
            by_time = (
                routed.filter(F.col("target").isNotNull())
                .withColumn("bucket", F.floor(F.col("ts") / 1000.0 / bucket_s) * bucket_s)
                .groupBy("router", "bucket", "target")
                .agg(F.count(F.lit(1)).alias("connections"))
                .select("router", F.timestamp_seconds("bucket").alias("bucket_start"), "bucket", "target", "connections")
            )
            tables["routing_by_target_time"] = write_table(
                by_time.drop("bucket").orderBy("router", "bucket_start", "target"), out, "routing_by_target_time"
            )

            shown.phase("targets, shares and skew")
            per_router = Window.partitionBy("router")
            targets = (
                routed.filter(F.col("target").isNotNull())
                .groupBy("router", "target")
                .agg(
                    F.count(F.lit(1)).alias("connections"),
                    *[F.sum(F.when(F.col("decision") == d, 1).otherwise(0)).alias(d) for d in DECISIONS[:3]],
                    F.sum("bytes_in").alias("bytes_in"),
                    F.sum("bytes_out").alias("bytes_out"),
                )
                .withColumn("share", F.col("connections") / F.sum("connections").over(per_router))
                .withColumn(
                    "router_skew", F.max("connections").over(per_router) / F.avg("connections").over(per_router)
                )
            )
            tables["routing_targets"] = write_table(
                targets.orderBy("router", F.desc("connections"), "target"), out, "routing_targets"
            )

            shown.phase("refusals")
            refusals = (
                routed.filter(F.col("decision") == "refused")
                .groupBy("router", F.coalesce(F.col("reason"), F.lit("(none)")).alias("reason"))
                .agg(F.count(F.lit(1)).alias("refusals"))
            )
            tables["refusals"] = write_table(refusals.orderBy("router", F.desc("refusals"), "reason"), out, "refusals")

            shown.phase("hottest keys")
            hot = (
                routed.filter(F.col("key").isNotNull())
                .groupBy("router", "key_type", "key")
                .agg(
                    F.count(F.lit(1)).alias("connections"),
                    F.sum(F.when(F.col("decision") == "refused", 1).otherwise(0)).alias("refused"),
                    F.countDistinct("target").alias("targets"),
                    F.sum("bytes_in").alias("bytes_in"),
                    F.sum("bytes_out").alias("bytes_out"),
                )
                .orderBy(F.desc("connections"), F.desc_nulls_last("bytes_in"), "router", "key")
                .limit(top)
            )
            tables["hot_keys"] = write_table(hot, out, "hot_keys")

            shown.phase("decision times")
            rollup = routed.rollup("router").agg(
                F.grouping("router").alias("all"),
                F.count(F.lit(1)).alias("decisions"),
                *[F.sum(F.when(F.col("decision") == d, 1).otherwise(0)).alias(d) for d in DECISIONS],
                F.sum(F.when(F.col("cache_hit"), 1).otherwise(0)).alias("cache_hits"),
                F.count("cache_hit").alias("cache_known"),
                F.percentile_approx("decision_us", list(PERCENTILES), PERCENTILE_ACCURACY).alias("pcts"),
                F.max("decision_us").alias("max_us"),
                F.avg("decision_us").alias("mean_us"),
            )
            decision_time = rollup.select(
                F.when(F.col("all") == 1, F.lit(ALL_ROUTERS)).otherwise(F.col("router")).alias("router"),
                "decisions", *DECISIONS, "cache_hits",
                F.try_divide(F.col("cache_hits"), F.col("cache_known")).alias("cache_hit_rate"),
                *[F.col("pcts")[i].alias(f"p{round(p * 100)}_us") for i, p in enumerate(PERCENTILES)],
                "max_us", "mean_us",
            )
            tables["decision_time"] = write_table(
                decision_time.orderBy(F.col("router") != ALL_ROUTERS, "router"), out, "decision_time"
            )

            shown.phase("decision-time histogram")
            us = F.greatest(F.col("decision_us"), F.lit(HISTOGRAM_FLOOR_US))
            histogram_rows = (
                routed.filter(F.col("decision_us").isNotNull())
                .groupBy(F.floor(F.log10(us) * HISTOGRAM_BINS_PER_DECADE).alias("bin"))
                .count()
                .collect()  # a few bins per decade of microseconds: small
            )
        finally:
            if routed is not None:
                routed.unpersist()
            df.unpersist()

        shown.phase("writing the report")
        read = spark.read.parquet
        target_rows = [r.asDict() for r in read(tables["routing_targets"]).orderBy("router", F.desc("connections"), "target").collect()]
        refusal_rows = [r.asDict() for r in read(tables["refusals"]).orderBy(F.desc("refusals"), "router", "reason").collect()]
        hot_rows = [r.asDict() for r in read(tables["hot_keys"]).orderBy(F.desc("connections"), F.desc_nulls_last("bytes_in"), "router", "key").collect()]
        time_rows = [r.asDict() for r in read(tables["decision_time"]).collect()]
        node_rows = [r.asDict() for r in read(tables["connections"]).orderBy("node", "connection").collect()]
        plot_bucket = max(bucket_s, choose_bucket(span_s))
        routers_by_size: dict[str, int] = {}
        for t in target_rows:
            routers_by_size[t["router"]] = routers_by_size.get(t["router"], 0) + t["connections"]
        plotted = sorted(routers_by_size, key=lambda r: (-routers_by_size[r], r))[:MAX_PLOT_ROUTERS]
        points = (
            read(tables["routing_by_target_time"])
            .filter(F.col("router").isin(plotted))
            .groupBy(
                "router", "target",
                (F.floor(F.unix_timestamp("bucket_start") / plot_bucket) * plot_bucket).alias("bucket"),
            )
            .agg(F.sum("connections").alias("connections"))
            .limit(MAX_PLOT_POINTS)
            .collect()
        )

        overall = next(r for r in time_rows if r["router"] == ALL_ROUTERS)
        per_router = [r for r in time_rows if r["router"] != ALL_ROUTERS]
        skews = {t["router"]: t["router_skew"] for t in target_rows}
        report = Report("Junction routing", f"{events} - {span_s:,.0f} s of connection.routed events")
        report.metric("routing decisions", overall["decisions"])
        for d in DECISIONS:
            report.metric(d, overall[d])
        report.metric("cache hit rate", f"{100 * (overall['cache_hit_rate'] or 0):.1f}%")
        report.metric("decision p50 µs", overall["p50_us"])
        report.metric("decision p99 µs", overall["p99_us"])
        report.metric("worst skew", max(skews.values(), default=None))

        report.section(
            "Targets",
            "Share: the target's part of its router's connections (refusals have no target). "
            "Skew: the router's busiest target over its mean target (1 is even; targets that got no "
            "connection are not in the log, so they do not lower the mean). Bytes come from "
            "connection.closed of the same connection.",
        )
        report.table(
            "Connections per target",
            ["router", "target", "connections", "share", "local", "forward", "redirect", "bytes in", "bytes out",
             "router skew"],
            [[t["router"], t["target"], t["connections"], f"{100 * t['share']:.1f}%", t["local"], t["forward"],
              t["redirect"], t["bytes_in"], t["bytes_out"], t["router_skew"]] for t in target_rows[:REPORT_ROWS]],
        )
        if target_rows:
            report.plot("Share of each router's connections", _plot_shares(target_rows[:REPORT_ROWS]))
        for router in plotted:
            mine = [p.asDict() for p in points if p["router"] == router]
            if mine:
                report.plot(f"Connections per target over time, router {router}", _plot_over_time(router, mine, plot_bucket))

        report.section("Decisions")
        report.table(
            "Decisions per router",
            ["router", "decisions", *DECISIONS, "cache hits", "cache hit rate", "p50 µs", "p90 µs", "p99 µs",
             "max µs", "mean µs"],
            [[r["router"], r["decisions"], *[r[d] for d in DECISIONS], r["cache_hits"],
              None if r["cache_hit_rate"] is None else f"{100 * r['cache_hit_rate']:.1f}%",
              r["p50_us"], r["p90_us"], r["p99_us"], r["max_us"], r["mean_us"]] for r in time_rows],
            note=f"percentiles by percentile_approx (accuracy {PERCENTILE_ACCURACY:,}: exact for fewer "
            "decisions than that)",
        )
        report.table(
            "Refusals by reason", ["router", "reason", "refusals"],
            [[r["router"], r["reason"], r["refusals"]] for r in refusal_rows[:REPORT_ROWS]],
        )
        histogram = sorted(
            (10 ** (r["bin"] / HISTOGRAM_BINS_PER_DECADE), 10 ** ((r["bin"] + 1) / HISTOGRAM_BINS_PER_DECADE), r["count"])
            for r in histogram_rows
        )
        if histogram:
            report.plot("Decision time: histogram and CDF", _plot_decision_time(histogram))
        report.section(
            "Connections per node",
            "Client connections, and the gateways' readiness probes (client id "
            f"{INTERNAL_CLIENT_ID_PREFIX}...), which no client figure above counts.  A broker core logs "
            "a connection once it logged in; a gateway once it knows its protocol.",
        )
        report.table(
            "Connections per node", ["node", "connection", "accepted", "routed", "closed"],
            [[r["node"], r["connection"], r["accepted"], r["routed"], r["closed"]] for r in node_rows[:REPORT_ROWS]],
        )
        report.section("Hottest keys")
        report.table(
            f"Keys with the most connections (top {top})",
            ["router", "key type", "key", "connections", "refused", "targets", "bytes in", "bytes out"],
            [[h["router"], h["key_type"], h["key"], h["connections"], h["refused"], h["targets"], h["bytes_in"],
              h["bytes_out"]] for h in hot_rows],
        )
        report_path = report.write(os.path.join(out, f"{JOB}.html"))

    summary = {
        "routed": stats["routed"],
        "closed": stats["closed"],
        "span_s": span_s,
        "bucket_s": bucket_s,
        "decisions": {d: overall[d] for d in DECISIONS},
        "refusals": {
            f"{r['router']}:{r['reason']}" if len(per_router) > 1 else r["reason"]: r["refusals"]
            for r in refusal_rows
        },
        "cache_hit_rate": overall["cache_hit_rate"],
        "decision_us": {
            **{f"p{round(p * 100)}": overall[f"p{round(p * 100)}_us"] for p in PERCENTILES},
            "max": overall["max_us"],
        },
        "routers": {
            r["router"]: {
                "decisions": r["decisions"],
                "targets": sum(1 for t in target_rows if t["router"] == r["router"]),
                "skew": skews.get(r["router"]),
                "busiest": next((t["target"] for t in target_rows if t["router"] == r["router"]), None),
            }
            for r in per_router
        },
        "hot_keys": [h["key"] for h in hot_rows[:5]],
        "connections": {
            kind: sum(r["connections"] for r in node_rows if r["connection"] == kind) for kind in ("client", "probe")
        },
    }
    return JobResult(job=JOB, summary=summary, exit_code=0, report=report_path, tables=tables)
