"""The delivery audit: was every message delivered, once, in order, and how fast?

``junction analyze audit --events DIR --out DIR`` follows every message by its
``message_id`` (the same on every node it passes through) across all nodes'
event files, and reports:

lost
    A ``message.sent`` that (a) has no ``message.acknowledged`` anywhere and
    was neither expired nor dead-lettered anywhere, or (b) lists in ``queues``
    a local queue that never settled it on the sending node: no
    acknowledgement, expiry, dead-lettering or redistribution (a move to
    another node, which then owes the acknowledgement) of it from that queue.
    (b) catches a topic message one of whose subscriptions never acknowledged
    it; queues on other nodes are only covered by (a), since ``queues`` names
    the sending node's queues only.
duplicated
    A (message_id, queue) acknowledged more than once, on any nodes.  A
    redelivery acknowledged once is not a duplicate.
unexpected
    A message id delivered or acknowledged but never sent (no
    ``message.sent`` anywhere): a message from outside the audited nodes, or
    a lost log line.
out of order
    Per (group_id, queue): the first delivery of each message, in time order
    (ties by sent rank), against the sent order -- ``group_seq`` when every
    message of the group has one, else the sent time.  A message is out of
    order when its sent rank is below the highest rank delivered before it:
    a message of its group sent later was delivered first.
expired, dead-lettered
    (message_id, queue) pairs removed by ``message.expired`` /
    ``message.dead_lettered``; accounted for, not lost.
in flight (``--settle SECONDS``)
    A lost message sent in the last SECONDS before the newest event: for
    logs copied from running nodes, whose acknowledgements may not be
    written yet.  Off by default.
latency
    end-to-end: first delivery - sent; acknowledgement: first
    acknowledgement - sent (milliseconds, across nodes, so clock skew between
    nodes shows up in it); p50/p90/p99/max per address with Spark's
    ``percentile_approx`` (see :data:`PERCENTILE_ACCURACY`).

Everything is DataFrame operations.  The events are shuffled once, by
``message_id``; in place, they become one row per (message, queue) -- a
message's ``message.sent`` and forwards meet in its row without a queue --
and then one row per message, which is kept (memory, then disk) for the
tables.  Only bounded samples (the report's examples, per-address and
per-minute figures) reach the driver.  A message group's deliveries are
ordered in one task, so one giant group is one long task.
Exit status 1 when anything is lost or unexpected.
"""

from __future__ import annotations

import argparse
import os

from junction.pipeline.common import JobResult, PipelineError, progress, read_events, write_table
from junction.pipeline.report import Report

__all__ = ["add_arguments", "run", "MESSAGE_KINDS", "TABLES"]

#: the event kinds the audit reads
MESSAGE_KINDS = (
    "message.sent", "message.forwarded", "message.redistributed", "message.delivered",
    "message.acknowledged", "message.expired", "message.dead_lettered",
)
#: the Parquet tables written under --out
TABLES = ("audit_messages", "lost", "duplicated", "unexpected", "out_of_order", "latency_by_address")
#: examples of each problem shown in the report, by default (and at most)
DEFAULT_EXAMPLES = 50
MAX_EXAMPLES = 1_000
#: percentile_approx accuracy: the rank error is at most 1/PERCENTILE_ACCURACY of the count
PERCENTILE_ACCURACY = 10_000
#: latency percentiles reported
PERCENTILES = (0.5, 0.9, 0.99)
#: addresses in the latency plot (the busiest ones) and rows in the latency table
MAX_PLOT_ADDRESSES = 25
MAX_LATENCY_ROWS = 200
#: points of the messages-over-time plot at most: its buckets are the narrowest of
#: TIMELINE_BUCKETS that keep below (the plot shows a rate per minute whatever the bucket)
MAX_TIMELINE_POINTS = 400
TIMELINE_BUCKETS = (
    (1_000, "1 s"), (5_000, "5 s"), (15_000, "15 s"), (60_000, "1 min"), (300_000, "5 min"),
    (900_000, "15 min"), (3_600_000, "1 h"), (21_600_000, "6 h"), (86_400_000, "1 day"), (604_800_000, "1 week"),
)
#: message statuses in audit_messages
STATUSES = ("acknowledged", "lost", "in_flight", "expired", "dead_lettered", "unexpected", "no_sent_event")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The audit's own options."""
    parser.add_argument(
        "--settle", type=float, default=0.0, metavar="SECONDS",
        help="messages sent in the last SECONDS before the newest event are 'in flight', not lost "
             "(for logs copied from running nodes; default: 0)",
    )
    parser.add_argument(
        "--examples", type=int, default=DEFAULT_EXAMPLES, metavar="N",
        help=f"examples of each problem in the report (default: {DEFAULT_EXAMPLES}, at most {MAX_EXAMPLES})",
    )


def run(spark, events: str, out: str, *, settle: float = 0.0, examples: int = DEFAULT_EXAMPLES, **_ignored) -> JobResult:
    """Audit the message events under ``events``; tables and ``audit.html`` under ``out``."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if settle < 0:
        raise PipelineError("--settle must not be negative")
    if not 0 <= examples <= MAX_EXAMPLES:
        raise PipelineError(f"--examples must be between 0 and {MAX_EXAMPLES}")

    with progress(spark, "audit") as shown:
        shown.phase(f"reading events from {events}")
        raw = read_events(spark, events, MESSAGE_KINDS)
        partitions = max(int(spark.conf.get("spark.sql.shuffle.partitions")), raw.rdd.getNumPartitions())
        # the one shuffle of all events: by message, so both aggregations below run in place
        ev = (
            raw.filter(F.col("message_id").isNotNull())
            .select("kind", "ts", "node", "message_id", "address", "queues", "group_id", "group_seq",
                    "queue", "to_node", "user")
            .repartition(partitions, "message_id")
        )
        kind = F.col("kind")

        def flag(name):
            return F.when(kind == name, 1).otherwise(0)

        # -- one row per (message, queue); a message's message.sent and forwards have no queue:
        # they meet in its (message_id, null) row
        settles = kind.isin("message.acknowledged", "message.expired", "message.dead_lettered", "message.redistributed")
        is_sent = kind == "message.sent"
        pairs = ev.groupBy("message_id", "queue").agg(
            # the earliest message.sent, should there be several
            F.min(F.when(is_sent, F.struct("ts", "node", "address", "queues", "group_id", "group_seq", "user")))
            .alias("sent"),
            F.sum(flag("message.sent")).alias("sent_events"),
            F.sum(flag("message.delivered")).alias("deliveries"),
            F.min(F.when(kind == "message.delivered", F.col("ts"))).alias("first_delivery_ts"),
            F.sum(flag("message.acknowledged")).alias("acks"),
            F.min(F.when(kind == "message.acknowledged", F.col("ts"))).alias("first_ack_ts"),
            F.sum(flag("message.expired")).alias("expired"),
            F.sum(flag("message.dead_lettered")).alias("dead_lettered"),
            F.sum(flag("message.redistributed")).alias("redistributed"),
            F.array_sort(F.collect_set(F.when(settles, F.col("node")))).alias("settled_on"),
            F.collect_set(F.when(kind == "message.forwarded", F.col("to_node"))).alias("forwarded_to"),
            F.first(F.when(~is_sent, F.col("address")), ignorenulls=True).alias("address"),
            F.max("ts").alias("last_ts"),
        )
        # -- one row per message ---------------------------------------------------------------
        q = F.col("queue").isNotNull()
        per_message = pairs.groupBy("message_id").agg(
            F.max("sent").alias("s"),
            F.sum("sent_events").alias("sent_events"),
            F.sum(F.when(q, F.col("deliveries"))).alias("deliveries"),
            F.min("first_delivery_ts").alias("first_delivery_ts"),
            F.sum(F.when(q, F.col("acks"))).alias("acks"),
            F.min("first_ack_ts").alias("first_ack_ts"),
            F.sum(F.when(q, F.col("expired"))).alias("expired"),
            F.sum(F.when(q, F.col("dead_lettered"))).alias("dead_lettered"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("forwarded_to")))).alias("forwarded_to"),
            # "queue NUL node" of every queue that settled the message, on every node it did
            F.flatten(F.collect_list(F.when(
                q, F.transform("settled_on", lambda node: F.concat(F.col("queue"), F.lit("\u0000"), node))
            ))).alias("settled"),
            F.array_sort(F.collect_list(F.when(q & (F.col("acks") > 1), F.col("queue")))).alias("duplicated_queues"),
            F.array_sort(F.collect_list(F.when(q & (F.col("deliveries") + F.col("acks") > 0), F.col("queue"))))
            .alias("queues_seen"),
            F.sum(F.when(q & (F.col("expired") > 0), 1).otherwise(0)).alias("expired_queues"),
            F.sum(F.when(q & (F.col("dead_lettered") > 0), 1).otherwise(0)).alias("dead_lettered_queues"),
            F.sum(F.when(q & (F.col("deliveries") > 1) & (F.col("acks") == 1), 1).otherwise(0))
            .alias("redelivered_queues"),
            # per-queue details for the out-of-order check and the duplicated table (kept only where needed)
            F.collect_list(F.when(q & F.col("first_delivery_ts").isNotNull(), F.struct("queue", "first_delivery_ts")))
            .alias("firsts"),
            F.collect_list(F.when(q & (F.col("acks") > 1), F.struct("queue", "acks", "deliveries", "first_ack_ts")))
            .alias("duplicates"),
            F.first("address", ignorenulls=True).alias("address_seen"),
            F.max("last_ts").alias("last_event_ts"),
        )
        joined = per_message.select(
            "*",
            F.col("s.ts").alias("sent_ts"), F.col("s.node").alias("node"), F.col("s.address").alias("address"),
            F.coalesce(F.col("s.queues"), F.array().cast("array<string>")).alias("queues"),
            F.col("s.group_id").alias("group_id"), F.col("s.group_seq").alias("group_seq"),
            F.col("s.user").alias("user"),
        )
        # listed queues that never settled the message on the sending node: lost, rule (b)
        missing = F.filter(
            F.col("queues"),
            lambda queue: ~F.array_contains(F.col("settled"), F.concat(queue, F.lit("\u0000"), F.col("node"))),
        )
        zero = F.lit(0)
        was_sent = F.col("sent_ts").isNotNull()
        base = joined.select(
            "message_id",
            F.coalesce(F.col("address"), F.col("address_seen")).alias("address"),
            "node", "user", "sent_ts", "queues", "group_id", "group_seq", "sent_events", "forwarded_to",
            F.coalesce(F.col("deliveries"), zero).alias("deliveries"),
            F.coalesce(F.col("acks"), zero).alias("acks"),
            F.coalesce(F.col("expired"), zero).alias("expired"),
            F.coalesce(F.col("dead_lettered"), zero).alias("dead_lettered"),
            "first_delivery_ts", "first_ack_ts",
            (F.col("first_delivery_ts") - F.col("sent_ts")).alias("latency_ms"),
            (F.col("first_ack_ts") - F.col("sent_ts")).alias("ack_latency_ms"),
            F.when(was_sent, missing).otherwise(F.array().cast("array<string>")).alias("missing_queues"),
            "duplicated_queues", "queues_seen", "expired_queues", "dead_lettered_queues", "redelivered_queues",
            "last_event_ts",
            F.when(was_sent & F.col("group_id").isNotNull(), F.col("firsts")).alias("firsts"),
            F.when(F.size("duplicates") > 0, F.col("duplicates")).alias("duplicates"),
        ).persist(StorageLevel.MEMORY_AND_DISK)

        never_acked = (F.col("acks") == 0) & (F.col("expired") == 0) & (F.col("dead_lettered") == 0)
        is_lost = was_sent & (never_acked | (F.size("missing_queues") > 0))
        if settle > 0:
            newest = base.agg(F.max("last_event_ts")).first()[0]
            in_flight = F.col("sent_ts") > F.lit(newest - settle * 1000.0)
        else:
            in_flight = F.lit(False)
        status = (
            F.when(~was_sent & ((F.col("deliveries") > 0) | (F.col("acks") > 0)), "unexpected")
            .when(~was_sent, "no_sent_event")
            .when(is_lost & in_flight, "in_flight")
            .when(is_lost, "lost")
            .when(F.col("dead_lettered") > 0, "dead_lettered")
            .when(F.col("expired") > 0, "expired")
            .otherwise("acknowledged")
        )
        messages = base.withColumn("status", status)

        # -- out of order, per (group, queue) ------------------------------------------------
        shown.phase("checking delivery order of message groups")
        # each group message's first delivery on each of its queues
        firsts = (
            base.filter(F.col("firsts").isNotNull())
            .select("message_id", "group_id", "group_seq", "sent_ts", F.explode("firsts").alias("f"))
            .select("message_id", "group_id", "group_seq", "sent_ts", "f.queue", "f.first_delivery_ts")
        )
        by_group = Window.partitionBy("group_id")
        ranked = (
            firsts.withColumn("by_seq", F.min(F.col("group_seq").isNotNull().cast("int")).over(by_group) == 1)
            .withColumn(
                "rank", F.when(F.col("by_seq"), F.col("group_seq").cast("double")).otherwise(F.col("sent_ts"))
            )
        )
        before = (
            Window.partitionBy("group_id", "queue")
            .orderBy("first_delivery_ts", "rank")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        out_of_order = (
            ranked.withColumn("highest_rank_before", F.max("rank").over(before))
            .filter(F.col("rank") < F.col("highest_rank_before"))
            .select(
                "message_id", "group_id", "queue", "group_seq", "sent_ts", "first_delivery_ts",
                F.when(F.col("by_seq"), "group_seq").otherwise("sent_ts").alias("ranked_by"),
                "rank", "highest_rank_before",
            )
        )

        # -- tables --------------------------------------------------------------------------
        shown.phase("writing tables")
        tables: dict[str, str] = {}
        # first the table that reads `base` once: it fills the cache the later ones share
        tables["out_of_order"] = write_table(out_of_order, out, "out_of_order")
        ooo_by_message = out_of_order.groupBy("message_id").agg(
            F.array_sort(F.collect_list("queue")).alias("out_of_order_queues")
        )
        audit_messages = (
            messages.drop("firsts", "duplicates", "last_event_ts")
            .join(ooo_by_message, "message_id", "left")
            .withColumn("out_of_order_queues", F.coalesce("out_of_order_queues", F.array().cast("array<string>")))
            .withColumn("sent_at", (F.col("sent_ts") / 1000.0).cast("timestamp"))
        )
        tables["audit_messages"] = write_table(audit_messages, out, "audit_messages")
        lost = messages.filter(F.col("status") == "lost").select(
            "message_id", "node", "address", "user", "sent_ts", "queues", "missing_queues", "forwarded_to",
            "deliveries", "acks",
            F.when(F.col("acks") == 0, "never acknowledged")
            .otherwise(F.concat(F.lit("not acknowledged on "), F.array_join("missing_queues", ", ")))
            .alias("reason"),
        )
        tables["lost"] = write_table(lost, out, "lost")
        duplicated = (
            base.filter(F.col("duplicates").isNotNull())
            .select("message_id", "address", "sent_ts", "node", F.explode("duplicates").alias("d"))
            .select("message_id", "d.queue", "address", "d.acks", "d.deliveries", "sent_ts", "d.first_ack_ts", "node")
        )
        tables["duplicated"] = write_table(duplicated, out, "duplicated")
        unexpected = messages.filter(F.col("status") == "unexpected").select(
            "message_id", "address", "queues_seen", "deliveries", "acks", "first_delivery_ts", "first_ack_ts"
        )
        tables["unexpected"] = write_table(unexpected, out, "unexpected")
        pct = F.array(*[F.lit(p) for p in PERCENTILES])
        latency = (
            messages.filter(was_sent)
            .groupBy("address")
            .agg(
                F.count(F.lit(1)).alias("messages"),
                F.percentile_approx("latency_ms", pct, PERCENTILE_ACCURACY).alias("e2e"),
                F.max("latency_ms").alias("e2e_max_ms"),
                F.percentile_approx("ack_latency_ms", pct, PERCENTILE_ACCURACY).alias("ack"),
                F.max("ack_latency_ms").alias("ack_max_ms"),
            )
            .select(
                "address", "messages",
                *[F.col("e2e")[i].alias(f"e2e_p{_pname(p)}_ms") for i, p in enumerate(PERCENTILES)],
                "e2e_max_ms",
                *[F.col("ack")[i].alias(f"ack_p{_pname(p)}_ms") for i, p in enumerate(PERCENTILES)],
                "ack_max_ms",
            )
        )
        tables["latency_by_address"] = write_table(latency, out, "latency_by_address")

        # -- figures -------------------------------------------------------------------------
        shown.phase("summing up")
        # every figure from the audit_messages just written: one scan of a few Parquet columns
        written = spark.read.parquet(tables["audit_messages"])
        counts = written.agg(
            F.sum(was_sent.cast("int")).alias("sent"),
            F.sum((was_sent & (F.col("acks") > 0)).cast("int")).alias("acknowledged"),
            *[F.sum((F.col("status") == s).cast("int")).alias(s) for s in STATUSES],
            F.sum(F.when(F.col("sent_events") > 1, 1).otherwise(0)).alias("sent_twice"),
            F.sum(F.size("duplicated_queues")).alias("duplicated"),
            F.sum(F.size("out_of_order_queues")).alias("out_of_order"),
            F.sum("expired_queues").alias("expired"),
            F.sum("dead_lettered_queues").alias("dead_lettered"),
            F.sum("redelivered_queues").alias("redelivered"),
            F.sum("acks").alias("ack_events"),
            F.min("sent_ts").alias("first_sent_ts"),
            F.max("sent_ts").alias("last_sent_ts"),
        ).first()
        summary = {
            key: counts[name] or 0
            for key, name in (
                ("sent", "sent"), ("acknowledged", "acknowledged"), ("lost", "lost"), ("duplicated", "duplicated"),
                ("unexpected", "unexpected"), ("out_of_order", "out_of_order"), ("expired", "expired"),
                ("dead_lettered", "dead_lettered"), ("in_flight", "in_flight"), ("redelivered", "redelivered"),
                ("acknowledgements", "ack_events"), ("sent_more_than_once", "sent_twice"),
                ("no_sent_event", "no_sent_event"),
            )
        }

        shown.phase("writing the report")
        report = Report("Delivery audit", f"events: {events}")
        for label, key in (
            ("sent", "sent"), ("acknowledged", "acknowledged"), ("lost", "lost"), ("duplicated", "duplicated"),
            ("unexpected", "unexpected"), ("out of order", "out_of_order"), ("expired", "expired"),
            ("dead-lettered", "dead_lettered"),
        ):
            report.metric(label, summary[key])
        if settle > 0:
            report.metric(f"in flight (last {settle:g} s)", summary["in_flight"])
        report.section("What was checked", _DEFINITIONS)

        samples = _samples(spark, tables, examples)

        def sample(name):
            return samples.get(name, [])

        shown_note = f"at most {examples} shown, the earliest first; all of them are in the Parquet table"
        report.section("Lost messages")
        report.table(
            f"Lost ({summary['lost']:,})",
            ["message id", "sent at", "node", "address", "user", "queues", "not settled on", "forwarded to", "reason"],
            [
                [r.get("message_id"), _when(r.get("sent_ts")), r.get("node"), r.get("address"), r.get("user"), r.get("queues"),
                 r.get("missing_queues"), r.get("forwarded_to"), r.get("reason")]
                for r in sample("lost")
            ],
            note=shown_note + " (lost).",
        )
        report.section("Duplicated acknowledgements")
        report.table(
            f"Duplicated ({summary['duplicated']:,})",
            ["message id", "queue", "address", "acknowledgements", "deliveries", "sent at", "first ack at"],
            [
                [r.get("message_id"), r.get("queue"), r.get("address"), r.get("acks"), r.get("deliveries"), _when(r.get("sent_ts")),
                 _when(r.get("first_ack_ts"))]
                for r in sample("duplicated")
            ],
            note=shown_note + " (duplicated).",
        )
        report.section("Unexpected messages")
        report.table(
            f"Unexpected ({summary['unexpected']:,})",
            ["message id", "address", "queues", "deliveries", "acknowledgements", "first delivery at"],
            [
                [r.get("message_id"), r.get("address"), r.get("queues_seen"), r.get("deliveries"), r.get("acks"),
                 _when(r.get("first_delivery_ts"))]
                for r in sample("unexpected")
            ],
            note=shown_note + " (unexpected).",
        )
        report.section("Out-of-order deliveries")
        report.table(
            f"Out of order ({summary['out_of_order']:,})",
            ["message id", "group", "queue", "ranked by", "rank", "higher rank delivered before", "sent at",
             "delivered at"],
            [
                [r.get("message_id"), r.get("group_id"), r.get("queue"), r.get("ranked_by"),
                 r.get("group_seq") if r.get("ranked_by") == "group_seq" else _when(r.get("rank")),
                 int(r.get("highest_rank_before")) if r.get("ranked_by") == "group_seq" else _when(r.get("highest_rank_before")),
                 _when(r.get("sent_ts")), _when(r.get("first_delivery_ts"))]
                for r in sample("out_of_order")
            ],
            note=shown_note + " (out_of_order).",
        )

        shown.phase("plotting")
        latency_rows = latency.orderBy(F.desc("messages"), "address").limit(MAX_LATENCY_ROWS).collect()
        report.section(
            "Latency per address",
            "End-to-end: first delivery minus sent time; acknowledgement: first acknowledgement minus sent "
            "time, in milliseconds.  Percentiles are approximate (Spark percentile_approx with accuracy "
            f"{PERCENTILE_ACCURACY:,}: the rank of each is within 1/{PERCENTILE_ACCURACY:,} of the count "
            "of the exact one).  Times come from different nodes' clocks when a message crossed nodes.",
        )
        report.table(
            "Latency per address (busiest first)",
            ["address", "messages"]
            + [f"e2e p{_pname(p)}" for p in PERCENTILES] + ["e2e max"]
            + [f"ack p{_pname(p)}" for p in PERCENTILES] + ["ack max"],
            [
                [r["address"], r["messages"]]
                + [r[f"e2e_p{_pname(p)}_ms"] for p in PERCENTILES] + [r["e2e_max_ms"]]
                + [r[f"ack_p{_pname(p)}_ms"] for p in PERCENTILES] + [r["ack_max_ms"]]
                for r in latency_rows
            ],
            note=f"at most {MAX_LATENCY_ROWS} addresses shown; all in latency_by_address.",
        )
        if latency_rows:
            report.plot("End-to-end latency percentiles per address (ms, log scale)",
                        _latency_figure(latency_rows[:MAX_PLOT_ADDRESSES]))
        first, last = counts["first_sent_ts"], counts["last_sent_ts"]
        if first is not None:
            bucket_ms, bucket_name = _bucket(first, last)
            timeline = (
                messages.filter(was_sent)
                .groupBy(F.floor(F.col("sent_ts") / bucket_ms).alias("bucket"))
                .agg(F.count(F.lit(1)).alias("sent"), F.sum((F.col("status") == "lost").cast("int")).alias("lost"))
                .orderBy("bucket")
                .collect()
            )
            report.plot(
                f"Messages sent per minute, in {bucket_name} buckets (UTC)", _timeline_figure(timeline, bucket_ms)
            )
        path = report.write(os.path.join(out, "audit.html"))
        shown.phase(f"wrote {path}")
        base.unpersist()

    exit_code = 1 if summary["lost"] or summary["unexpected"] else 0
    return JobResult(job="audit", summary=summary, exit_code=exit_code, report=path, tables=tables)


_DEFINITIONS = (
    "Lost: a message.sent with no message.acknowledged anywhere (and not expired or dead-lettered), or "
    "one of the queues listed in its sent event that never settled it on the sending node (no "
    "acknowledgement, expiry, dead-lettering or redistribution there).  Duplicated: a (message, queue) "
    "acknowledged more than once; a redelivery acknowledged once is not a duplicate.  Unexpected: a "
    "message delivered or acknowledged that no node recorded as sent.\n\n"
    "Out of order: per (group, queue), the first delivery of each message in time order against the "
    "sent order (group_seq when every message of the group has one, else the sent time); a message is out "
    "of order when a message of its group sent later was delivered before it.  Expired and dead-lettered "
    "count (message, queue) pairs; they are accounted for, not lost."
)


#: each problem table's examples: the earliest first, by (time column, identifying columns)
_SAMPLE_ORDER = {
    "lost": ("sent_ts", ("message_id",)),
    "duplicated": ("first_ack_ts", ("message_id", "queue")),
    "unexpected": ("first_delivery_ts", ("message_id",)),
    "out_of_order": ("first_delivery_ts", ("message_id", "queue")),
}


def _samples(spark, tables: dict, examples: int) -> dict[str, list[dict]]:
    """Up to ``examples`` rows of each problem table (as dicts), read back in one Spark job."""
    import json

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not examples:
        return {}
    parts = []
    for name, (ts, ids) in _SAMPLE_ORDER.items():
        df = spark.read.parquet(tables[name])
        parts.append(df.select(
            F.lit(name).alias("problem"),
            F.col(ts).cast("double").alias("key_ts"),
            F.concat_ws("\u0000", *[F.col(c) for c in ids]).alias("key_id"),
            F.to_json(F.struct(*df.columns)).alias("row"),
        ))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    order = Window.partitionBy("problem").orderBy(F.col("key_ts").asc_nulls_last(), "key_id")
    rows = (
        union.withColumn("n", F.row_number().over(order))
        .filter(F.col("n") <= examples)
        .orderBy("problem", "n")
        .collect()
    )
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["problem"], []).append(json.loads(row["row"]))
    return out


def _pname(p: float) -> str:
    """0.5 -> "50", 0.99 -> "99", 0.999 -> "99_9"."""
    return f"{p * 100:g}".replace(".", "_")


def _when(ts_ms) -> str | None:
    """Epoch milliseconds as an ISO UTC time with milliseconds."""
    if ts_ms is None:
        return None
    import datetime

    stamp = datetime.datetime.fromtimestamp(ts_ms / 1000.0, tz=datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"


def _bucket(first: float, last: float) -> tuple[int, str]:
    """The narrowest of TIMELINE_BUCKETS giving at most MAX_TIMELINE_POINTS points: (ms, name)."""
    for width, name in TIMELINE_BUCKETS:
        if (last - first) / width < MAX_TIMELINE_POINTS:
            return width, name
    return TIMELINE_BUCKETS[-1]


def _latency_figure(rows):
    import matplotlib.pyplot as plt

    rows = list(reversed(rows))  # busiest at the top
    names = [r["address"] or "(none)" for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4))
    y = range(len(rows))
    for key, label, marker in (
        ("e2e_p50_ms", "p50", "o"), ("e2e_p90_ms", "p90", "s"), ("e2e_p99_ms", "p99", "^"), ("e2e_max_ms", "max", "x")
    ):
        values = [r[key] if r[key] is not None and r[key] > 0 else float("nan") for r in rows]
        ax.scatter(values, list(y), label=label, marker=marker, s=22)
    ax.set_yticks(list(y))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds from sent to first delivery")
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _timeline_figure(rows, bucket_ms: int):
    """Messages sent (and lost) per minute over time; buckets of ``bucket_ms`` scaled to minutes."""
    import datetime

    import matplotlib.pyplot as plt

    scale = 60_000.0 / bucket_ms
    times = [datetime.datetime.fromtimestamp(r["bucket"] * bucket_ms / 1000.0, tz=datetime.timezone.utc) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.plot(times, [r["sent"] * scale for r in rows], label="sent", linewidth=1.2)
    lost = [r["lost"] * scale for r in rows]
    if any(lost):
        ax.plot(times, lost, label="lost", linewidth=1.2, color="#c0392b")
    ax.set_ylabel("messages per minute")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig
