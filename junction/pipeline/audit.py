"""The delivery audit: was every message delivered, once, in order, and how fast?

``junction analyze audit --events DIR --out DIR`` follows every message by its
``message_id`` (the same on every node it passes through) across all nodes'
event files, through each *reference* to it: a (node, queue) that held it.
References come from ``message.sent`` (the sending node's ``queues``),
``message.recovered`` (what a restart brought back), deliveries, and forwards
or moves to another node (``message.forwarded``, ``message.redistributed``:
that node owes it, under ``@<node id>`` until one of its queues shows it).
A reference is *settled* by an acknowledgement, expiry, dead-lettering, move
(redistribution), a forward out of a store-and-forward queue, or a restart's
``message.settled`` (the journal's newest records settled it: its own event
may have gone with a crash).  An unsettled reference is *held* unless its
node restarted (``node.started``) after it was last seen there -- sent,
recovered or delivered -- without recovering it: the broker removes a
message from a durable queue only by settling it, so that reference is gone.

lost
    A message accepted (``message.sent``, or recovered) and durable with a
    reference gone at a restart of a node that keeps durable messages
    (``persistent``), from a queue that survived it.  Exit status 1.
in flight
    Not lost, with a reference still held at the end of the logs (in a
    queue, or in an address's page files at a restart): the ``in_flight``
    table names each node and queue.  Not a failure.
dropped
    Gone at a restart that promised nothing: a non-durable message, a node
    without persistence, a queue that did not survive (not durable, deleted).
settled
    Settled only by a restart's ``message.settled``.
duplicated
    A (message_id, queue) acknowledged more than once, on any nodes.  A
    redelivery acknowledged once is not a duplicate.
unexpected
    A message id delivered or acknowledged that no event shows accepted
    (no sent, recovered or settled), unless a crash of the node its id names
    followed its first event within :data:`CRASH_TAIL_S` of that node's last
    event before the restart: the crash may have taken its sent event (a
    non-durable message: a durable one is in the journal, so recovered or
    settled); such a message counts under ``no_sent_event``.  Exit status 1.
out of order
    Per (group_id, queue): the first delivery of each message, in time order
    (ties by sent rank), against the sent order -- ``group_seq`` when every
    message of the group has one, else the sent time.  A message is out of
    order when its sent rank is below the highest rank delivered before it:
    a message of its group sent later was delivered first.
expired, dead-lettered
    (message_id, queue) pairs removed by ``message.expired`` /
    ``message.dead_lettered``; accounted for, not lost.
latency
    end-to-end: first delivery - sent; acknowledgement: first
    acknowledgement - sent (milliseconds, across nodes, so clock skew between
    nodes shows up in it); p50/p90/p99/max per address with Spark's
    ``percentile_approx`` (see :data:`PERCENTILE_ACCURACY`).

Everything is DataFrame operations.  The restarts (``node.started``, at most
:data:`MAX_RESTARTS`) are collected to the driver: each node's start times
become a literal map, so "the next restart after this time" is an array
lookup, not a join.  The events are shuffled once, by ``message_id``; in
place, they become one row per reference (a message's own sent and forwards
in a row of their own), then one row per message, which is kept (memory,
then disk) for the tables.  Only bounded samples (the report's examples,
per-address and per-minute figures) reach the driver.  A message group's
deliveries are ordered in one task, so one giant group is one long task.
Exit status 1 when anything is lost or unexpected.
"""

from __future__ import annotations

import argparse
import os

from junction.pipeline.audit_refs import (
    duplicated_details,
    duplicated_queues,
    firsts,
    restarts,
    run_of,
    times_map,
)
from junction.pipeline.common import JobResult, PipelineError, progress, read_events, write_table
from junction.pipeline.report import Report

__all__ = ["add_arguments", "run", "MESSAGE_KINDS", "TABLES"]

#: the event kinds the audit reads
MESSAGE_KINDS = (
    "message.sent", "message.forwarded", "message.redistributed", "message.delivered",
    "message.acknowledged", "message.expired", "message.dead_lettered", "message.recovered", "message.settled",
)
#: everything the audit reads: the message events and the restarts
READ_KINDS = (*MESSAGE_KINDS, "node.started")
#: node.started events the audit takes, at most (they are collected to the driver)
MAX_RESTARTS = 10_000
#: seconds before a restart in which a node's events may have been lost with it (a crash loses
#: what the node had not yet handed to its event writer: well under a second; generous here)
CRASH_TAIL_S = 10.0
#: the broker core's store-and-forward queues (one per cluster link): a forward settles them
SF_PREFIX = "$.junction.sf."
#: the Parquet tables written under --out
TABLES = ("audit_messages", "lost", "in_flight", "duplicated", "unexpected", "out_of_order", "latency_by_address")
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
STATUSES = (
    "acknowledged", "lost", "in_flight", "expired", "dead_lettered", "settled", "dropped", "unexpected", "no_sent_event",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The audit's own options."""
    parser.add_argument(
        "--examples", type=int, default=DEFAULT_EXAMPLES, metavar="N",
        help=f"examples of each problem in the report (default: {DEFAULT_EXAMPLES}, at most {MAX_EXAMPLES})",
    )


def run(spark, events: str, out: str, *, examples: int = DEFAULT_EXAMPLES, **_ignored) -> JobResult:
    """Audit the message events under ``events``; tables and ``audit.html`` under ``out``."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not 0 <= examples <= MAX_EXAMPLES:
        raise PipelineError(f"--examples must be between 0 and {MAX_EXAMPLES}")

    with progress(spark, "audit") as shown:
        shown.phase(f"reading events from {events}")
        # parsed once and kept: the restarts, the runs' ends and the audit itself read it
        raw = read_events(spark, events, READ_KINDS).select(
            "kind", "ts", "node", "node_id", "message_id", "address", "queues", "group_id", "group_seq", "queue",
            "to_node", "user", "durable", "persistent", "paged",
        ).persist(StorageLevel.MEMORY_AND_DISK)
        times, start_rows = restarts(raw, MAX_RESTARTS)
        starts = spark.createDataFrame(
            start_rows, "start_node string, start_index int, persistent boolean, kept_queues array<string>, "
            "paged array<string>",
        )
        restart_times = times_map(times)
        partitions = max(int(spark.conf.get("spark.sql.shuffle.partitions")), raw.rdd.getNumPartitions())
        kind = F.col("kind")
        ts = F.col("ts")
        # each run's last event per node: how near a restart's crash an event came (CRASH_TAIL_S)
        last_of_run = {}
        if times:
            run_rows = (
                raw.filter(F.col("node_id").isin(list(times)))
                .groupBy("node_id", run_of(restart_times, F.col("node_id"), ts).alias("run"))
                .agg(F.max("ts").alias("last"))
                .collect()
            )
            for r in run_rows:
                last_of_run.setdefault(r["node_id"], {})[r["run"]] = r["last"]
        run_ends = {
            node_id: [last_of_run.get(node_id, {}).get(i) or (t - 1.0) for i, t in enumerate(ts_list)]
            for node_id, ts_list in times.items()
        }
        # the one shuffle of all events: by message, so every aggregation below runs in place
        ev = (
            raw.filter(F.col("message_id").isNotNull())
            .select("kind", "ts", "node", "node_id", "message_id", "address", "queues", "group_id", "group_seq",
                    "queue", "to_node", "user", "durable")
            .repartition(partitions, "message_id")
        )

        # -- the references: one row per (message, node, queue) that held the message, and one
        # per message (node and queue null) for what is the message's own (its sent, its forwards)
        def ref(node, queue, seen, what):
            return F.struct(node.alias("rnode"), queue.alias("rqueue"), seen.alias("seen"), F.lit(what).alias("what"))

        none = F.lit(None).cast("string")
        no_ts = F.lit(None).cast("double")
        node_id, queue = F.col("node_id"), F.col("queue")
        refs = (
            F.when(kind == "message.sent", F.concat(
                F.array(ref(none, none, no_ts, "sent")),
                F.transform(F.coalesce(F.col("queues"), F.array().cast("array<string>")),
                            lambda q: ref(node_id, q, ts, "listed")),
            ))
            .when(kind == "message.forwarded", F.array(ref(none, none, no_ts, "forwarded"),
                                                       ref(F.col("to_node"), none, ts, "owed")))
            .when(kind == "message.redistributed", F.array(ref(node_id, queue, no_ts, "redistributed"),
                                                           ref(F.col("to_node"), none, ts, "owed")))
            .when(kind == "message.recovered", F.array(ref(node_id, queue, ts, "recovered")))
            .when(kind == "message.settled", F.array(ref(node_id, queue, no_ts, "settled")))
            .when(kind == "message.delivered", F.array(ref(node_id, queue, ts, "delivered")))
            .when(kind == "message.acknowledged", F.array(ref(node_id, queue, no_ts, "acknowledged")))
            .when(kind == "message.expired", F.array(ref(node_id, queue, no_ts, "expired")))
            .when(kind == "message.dead_lettered", F.array(ref(node_id, queue, no_ts, "dead_lettered")))
        )
        exploded = ev.select("*", F.explode(refs).alias("r")).select("*", "r.*").drop("r")
        what = F.col("what")

        def count(name, alias=None):
            return F.sum(F.when(what == name, 1).otherwise(0)).alias(alias or name)

        level1 = exploded.groupBy("message_id", "rnode", "rqueue").agg(
            # the earliest message.sent, should there be several
            F.min(F.when(what == "sent", F.struct("ts", "node", "node_id", "address", "queues", "group_id",
                                                   "group_seq", "user", "durable"))).alias("sent"),
            count("sent", "sent_events"), count("recovered"), count("settled"), count("delivered"), count("acknowledged"),
            count("expired"), count("dead_lettered"), count("redistributed"),
            F.array_sort(F.collect_set(F.when(what == "forwarded", F.col("node_id")))).alias("forwarded_from"),
            F.array_sort(F.collect_set(F.when(what == "forwarded", F.col("to_node")))).alias("forwarded_to"),
            F.max("seen").alias("last_seen"),
            F.min(F.when(what == "delivered", ts)).alias("first_delivery_ts"),
            F.min(F.when(what == "acknowledged", ts)).alias("first_ack_ts"),
            F.max(F.when(what == "recovered", F.col("durable").cast("int"))).alias("recovered_durable"),
            F.first(F.when(what != "sent", F.col("address")), ignorenulls=True).alias("address"),
            F.min("ts").alias("first_ts"),
        )
        # each reference's fate: settled, or still held (in flight), or gone at a restart of
        # its node that did not recover it (lost, or dropped when nothing promised it would stay)
        per_message = Window.partitionBy("message_id")
        durable = F.coalesce(
            F.max(F.col("sent.durable").cast("int")).over(per_message),
            F.max("recovered_durable").over(per_message),
            F.lit(0),
        ) == 1
        starts = starts.withColumnRenamed("start_index", "s_index")
        at = F.col("start_index")
        lost_here = F.col("s_index").isNotNull()
        sf = F.col("rqueue").startswith(SF_PREFIX)
        # a reference owed by a node a message was forwarded or moved to (its queue not known) is
        # covered by the references of that node's queues, once it has any
        per_node = Window.partitionBy("message_id", "rnode")
        covered = F.col("rqueue").isNull() & (F.max(F.col("rqueue").isNotNull().cast("int")).over(per_node) == 1)
        held = (
            level1.withColumn("durable", durable)
            .withColumn("covered", covered)
            .withColumn("forwarded_by", F.array_distinct(F.flatten(F.collect_list("forwarded_from").over(per_message))))
            .withColumn("message_address", F.first("address", ignorenulls=True).over(per_message))
            .filter(F.col("rnode").isNotNull() & ~F.col("covered"))
            # the first restart of the reference's node after it was last seen there
            .withColumn("start_index", run_of(restart_times, F.col("rnode"), F.col("last_seen")) + 1)
            .join(F.broadcast(starts), (F.col("rnode") == F.col("start_node")) & (at == F.col("s_index")), "left")
            .withColumn("restart_ts", F.try_element_at(restart_times[F.col("rnode")], at))
        )
        settled_here = (
            (F.col("acknowledged") + F.col("expired") + F.col("dead_lettered") + F.col("redistributed")
             + F.col("settled") > 0)
            | (sf & F.array_contains(F.col("forwarded_by"), F.col("rnode")))
        )
        fate = (
            F.when(settled_here, "settled")
            .when(~lost_here, "in_flight")
            .when(~F.col("persistent") | ~F.col("durable"), "dropped")
            .when(F.col("rqueue").isNotNull() & ~F.array_contains(F.col("kept_queues"), F.col("rqueue")), "dropped")
            .when(F.array_contains(F.col("paged"), F.col("message_address")), "in_flight")
            .otherwise("lost")
        )
        held = held.withColumn("fate", fate).select(
            "message_id", "rnode", "rqueue", "fate", "last_seen", "restart_ts", "delivered", "acknowledged",
            "expired", "dead_lettered", "recovered", "settled", "first_delivery_ts", "first_ack_ts", "first_ts", "address",
        )
        own = level1.filter(F.col("rnode").isNull()).select(
            "message_id", "sent", "sent_events", "forwarded_to", "first_ts", F.col("address").alias("own_address"),
        )
        ref_struct = F.struct("rnode", "rqueue", "fate", "last_seen", "restart_ts", "delivered", "acknowledged",
                              "first_delivery_ts", "first_ack_ts")
        per_ref = held.groupBy("message_id").agg(
            F.collect_list(ref_struct).alias("refs"),
            F.sum("delivered").alias("deliveries"),
            F.sum("acknowledged").alias("acks"),
            F.sum("expired").alias("expired_n"),
            F.sum("dead_lettered").alias("dead_lettered_n"),
            F.sum("recovered").alias("recovered_n"),
            F.sum("settled").alias("settled_n"),
            F.min("first_delivery_ts").alias("first_delivery_ts"),
            F.min("first_ack_ts").alias("first_ack_ts"),
            F.min("first_ts").alias("refs_first_ts"),
            F.first("address", ignorenulls=True).alias("ref_address"),
            F.sum(F.when(F.col("expired") > 0, 1).otherwise(0)).alias("expired_queues"),
            F.sum(F.when(F.col("dead_lettered") > 0, 1).otherwise(0)).alias("dead_lettered_queues"),
            F.sum(F.when((F.col("delivered") > 1) & (F.col("acknowledged") == 1), 1).otherwise(0))
            .alias("redelivered_queues"),
        )
        joined = own.join(per_ref, "message_id", "full")
        zero = F.lit(0)

        def refs_where(condition):
            return F.filter(F.coalesce(F.col("refs"), F.array()), condition)

        def queues_of(refs):
            return F.array_sort(F.transform(refs, lambda r: F.coalesce(r["rqueue"], F.concat(F.lit("@"), r["rnode"]))))

        was_sent = F.col("sent.ts").isNotNull()
        accepted = was_sent | (F.coalesce(F.col("recovered_n"), zero) > 0) | (F.coalesce(F.col("settled_n"), zero) > 0)
        seen = (F.coalesce(F.col("deliveries"), zero) + F.coalesce(F.col("acks"), zero)) > 0
        # a sent event a crash of the message's first node lost: the message was first seen in the
        # last CRASH_TAIL_S of that node's run that ended in a restart
        origin = F.substring_index("message_id", "/", 1)
        first = F.least(F.col("first_ts"), F.col("refs_first_ts"))
        run = run_of(restart_times, origin, first)
        run_end = F.try_element_at(times_map(run_ends)[origin], run + 1)
        crash_tail = run_end.isNotNull() & (first >= run_end - CRASH_TAIL_S * 1000.0)
        lost_refs = refs_where(lambda r: r["fate"] == "lost")
        in_flight_refs = refs_where(lambda r: r["fate"] == "in_flight")
        dropped_refs = refs_where(lambda r: r["fate"] == "dropped")
        base = joined.select(
            "message_id",
            F.coalesce(F.col("sent.address"), F.col("own_address"), F.col("ref_address")).alias("address"),
            F.col("sent.node").alias("node"), F.col("sent.user").alias("user"), F.col("sent.ts").alias("sent_ts"),
            F.coalesce(F.col("sent.queues"), F.array().cast("array<string>")).alias("queues"),
            F.col("sent.group_id").alias("group_id"), F.col("sent.group_seq").alias("group_seq"),
            F.coalesce(F.col("sent_events"), zero).alias("sent_events"),
            F.coalesce(F.col("forwarded_to"), F.array().cast("array<string>")).alias("forwarded_to"),
            F.coalesce(F.col("deliveries"), zero).alias("deliveries"),
            F.coalesce(F.col("acks"), zero).alias("acks"),
            F.coalesce(F.col("expired_n"), zero).alias("expired"),
            F.coalesce(F.col("dead_lettered_n"), zero).alias("dead_lettered"),
            F.coalesce(F.col("recovered_n"), zero).alias("recovered"),
            F.coalesce(F.col("settled_n"), zero).alias("journal_settled"),
            "first_delivery_ts", "first_ack_ts",
            (F.col("first_delivery_ts") - F.col("sent.ts")).alias("latency_ms"),
            (F.col("first_ack_ts") - F.col("sent.ts")).alias("ack_latency_ms"),
            queues_of(lost_refs).alias("missing_queues"),
            F.array_min(F.transform(lost_refs, lambda r: r["restart_ts"])).alias("lost_at_ts"),
            F.array_sort(F.array_distinct(F.transform(lost_refs, lambda r: r["rnode"]))).alias("lost_on"),
            queues_of(in_flight_refs).alias("in_flight_queues"),
            queues_of(dropped_refs).alias("dropped_queues"),
            duplicated_queues(F.col("refs")).alias("duplicated_queues"),
            duplicated_details(F.col("refs")).alias("duplicates"),
            F.array_sort(F.array_distinct(F.transform(
                refs_where(lambda r: r["delivered"] + r["acknowledged"] > 0), lambda r: r["rqueue"]
            ))).alias("queues_seen"),
            F.coalesce(F.col("expired_queues"), zero).alias("expired_queues"),
            F.coalesce(F.col("dead_lettered_queues"), zero).alias("dead_lettered_queues"),
            F.coalesce(F.col("redelivered_queues"), zero).alias("redelivered_queues"),
            F.when(was_sent & F.col("sent.group_id").isNotNull(), firsts(F.col("refs"))).alias("firsts"),
            was_sent.alias("was_sent"), accepted.alias("accepted"), seen.alias("seen"),
            crash_tail.alias("crash_tail"),
            F.coalesce(F.col("refs"), F.array()).alias("refs"),
        ).persist(StorageLevel.MEMORY_AND_DISK)

        c = F.col
        status = (
            F.when(~c("accepted") & c("seen") & ~c("crash_tail"), "unexpected")
            .when(~c("accepted"), "no_sent_event")
            .when(F.size("missing_queues") > 0, "lost")
            .when((F.size("in_flight_queues") > 0) | ((F.size("refs") == 0) & (F.size("forwarded_to") == 0)), "in_flight")
            .when(c("dead_lettered") > 0, "dead_lettered")
            .when(c("expired") > 0, "expired")
            .when(c("acks") > 0, "acknowledged")
            .when(c("journal_settled") > 0, "settled")
            .when(F.size("dropped_queues") > 0, "dropped")
            .otherwise("acknowledged")
        )
        messages = base.withColumn("status", status)
        was_sent = F.col("was_sent")

        # -- out of order, per (group, queue) ------------------------------------------------
        shown.phase("checking delivery order of message groups")
        # each group message's first delivery on each of its queues
        group_firsts = (
            base.filter(F.col("firsts").isNotNull())
            .select("message_id", "group_id", "group_seq", "sent_ts", F.explode("firsts").alias("f"))
            .select("message_id", "group_id", "group_seq", "sent_ts", "f.queue", "f.first_delivery_ts")
        )
        by_group = Window.partitionBy("group_id")
        ranked = (
            group_firsts.withColumn("by_seq", F.min(F.col("group_seq").isNotNull().cast("int")).over(by_group) == 1)
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
            messages.drop("firsts", "duplicates", "refs", "accepted", "seen", "crash_tail")
            .join(ooo_by_message, "message_id", "left")
            .withColumn("out_of_order_queues", F.coalesce("out_of_order_queues", F.array().cast("array<string>")))
            .withColumn("sent_at", (F.col("sent_ts") / 1000.0).cast("timestamp"))
        )
        tables["audit_messages"] = write_table(audit_messages, out, "audit_messages")
        lost = messages.filter(F.col("status") == "lost").select(
            "message_id", "node", "address", "user", "sent_ts", "queues", "missing_queues", "forwarded_to",
            "deliveries", "acks", "lost_on", "lost_at_ts",
            F.concat(
                F.lit("not recovered on "), F.array_join("missing_queues", ", "),
                F.lit(" at the restart of node "), F.array_join("lost_on", ", "),
            ).alias("reason"),
        )
        tables["lost"] = write_table(lost, out, "lost")
        in_flight = (
            messages.filter(F.size("in_flight_queues") > 0)
            .select("message_id", "address", "sent_ts", "node", "deliveries", "acks",
                    F.explode(F.filter("refs", lambda r: r["fate"] == "in_flight")).alias("r"))
            .select("message_id", F.col("r.rnode").alias("held_by"), F.col("r.rqueue").alias("queue"), "address",
                    "sent_ts", F.col("r.delivered").alias("deliveries"), F.col("r.last_seen").alias("last_seen_ts"),
                    F.col("node").alias("sent_by"))
        )
        tables["in_flight"] = write_table(in_flight, out, "in_flight")
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
            F.sum((F.col("recovered") > 0).cast("int")).alias("recovered_messages"),
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
                ("no_sent_event", "no_sent_event"), ("settled", "settled"), ("dropped", "dropped"),
                ("recovered", "recovered_messages"),
            )
        }
        summary["node_starts"] = len(start_rows)

        shown.phase("writing the report")
        report = Report("Delivery audit", f"events: {events}")
        for label, key in (
            ("sent", "sent"), ("acknowledged", "acknowledged"), ("lost", "lost"), ("duplicated", "duplicated"),
            ("unexpected", "unexpected"), ("out of order", "out_of_order"), ("expired", "expired"),
            ("dead-lettered", "dead_lettered"), ("in flight", "in_flight"), ("node starts", "node_starts"),
        ):
            report.metric(label, summary[key])
        report.section("What was checked", _DEFINITIONS)

        samples = _samples(spark, tables, examples)

        def sample(name):
            return samples.get(name, [])

        shown_note = f"at most {examples} shown, the earliest first; all of them are in the Parquet table"
        report.section("Lost messages")
        report.table(
            f"Lost ({summary['lost']:,})",
            ["message id", "sent at", "node", "address", "user", "queues", "not recovered on", "restart at", "reason"],
            [
                [r.get("message_id"), _when(r.get("sent_ts")), r.get("node"), r.get("address"), r.get("user"), r.get("queues"),
                 r.get("missing_queues"), _when(r.get("lost_at_ts")), r.get("reason")]
                for r in sample("lost")
            ],
            note=shown_note + " (lost).",
        )
        report.section("In flight")
        report.table(
            f"In flight ({summary['in_flight']:,} messages)",
            ["message id", "node", "queue", "address", "sent at", "deliveries", "last seen"],
            [
                [r.get("message_id"), r.get("held_by"), r.get("queue"), r.get("address"), _when(r.get("sent_ts")),
                 r.get("deliveries"), _when(r.get("last_seen_ts"))]
                for r in sample("in_flight")
            ],
            note=shown_note + " (in_flight): not acknowledged yet, still held by the node and queue shown "
            "(a queue '@node' is a node the message was forwarded or moved to, its queue not yet known).",
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
        raw.unpersist()

    exit_code = 1 if summary["lost"] or summary["unexpected"] else 0
    return JobResult(job="audit", summary=summary, exit_code=exit_code, report=path, tables=tables)


_DEFINITIONS = (
    "Each message is followed through every (node, queue) that held it: the sending node's queues, "
    "what a restart recovered (message.recovered), where it was delivered, and a node it was forwarded "
    "or moved to.  Settled: acknowledged, expired, dead-lettered, moved, forwarded out of a "
    "store-and-forward queue, or shown settled by the journal at a restart (message.settled).\n\n"
    "Lost: accepted (sent, or recovered) and durable, and gone from a queue at a restart of its node "
    "that did not recover it, with nothing settling it.  In flight: not settled and still held at the "
    "end of the logs, in the queue named (not a failure).  Dropped: gone at a restart that promised "
    "nothing (a non-durable message, a node without persistence, a queue that did not survive).  "
    "Duplicated: a (message, queue) acknowledged more than once; a redelivery acknowledged once is not "
    "a duplicate.  Unexpected: delivered or acknowledged, but no event shows it accepted, and no crash "
    "of the node its id names just after it explains the missing sent event.\n\n"
    "Out of order: per (group, queue), the first delivery of each message in time order against the "
    "sent order (group_seq when every message of the group has one, else the sent time); a message is out "
    "of order when a message of its group sent later was delivered before it.  Expired and dead-lettered "
    "count (message, queue) pairs; they are accounted for, not lost."
)


#: each problem table's examples: the earliest first, by (time column, identifying columns)
_SAMPLE_ORDER = {
    "lost": ("sent_ts", ("message_id",)),
    "in_flight": ("sent_ts", ("message_id", "queue")),
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
