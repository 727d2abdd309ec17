"""The data-gravity job's Spark side: traffic between keys, and where keys are routed now.

A producer's key is the ``user`` (or ``client_id``, ``--key``) of
``message.sent``; a consumer's is that of its first deliveries
(``message.delivered`` with ``delivery_count`` 1), whose size comes from the
``message.sent`` of the same ``message_id``.  Spark aggregates which keys
touch which addresses (``gravity_key_address``) and the producer-key ->
consumer-key byte matrix (``gravity_pairs``); only these aggregates, bounded
by :data:`~junction.pipeline.gravity_limits.MAX_KEYS` and
:data:`~junction.pipeline.gravity_limits.MAX_PAIRS`, reach the driver.
pyspark is imported inside the functions.
"""

from __future__ import annotations

from junction.pipeline.gravity_limits import MAX_KEYS, MAX_PAIRS
from junction.routing.keys import NULL_KEY

__all__ = ["KINDS_READ", "MAX_TARGETS", "PLACED_DECISIONS", "placements", "traffic"]

#: the event kinds the job reads
KINDS_READ = ("message.sent", "message.delivered", "connection.routed")
#: decisions of connection.routed that name the broker the connection went to
PLACED_DECISIONS = ("local", "forward", "redirect")
#: most distinct routing targets taken to the driver
MAX_TARGETS = 10_000


def traffic(spark, df, events: str, key: str, out: str, shown):
    """Spark: the key/address and key/key tables (written), and the driver's bounded copies."""
    from pyspark.sql import functions as F

    from junction.pipeline.common import PipelineError, write_table

    key_col = F.coalesce(F.col(key), F.lit(NULL_KEY))
    sent = df.filter(F.col("kind") == "message.sent").select(
        "message_id", "address", F.coalesce(F.col("size"), F.lit(0)).alias("size"), key_col.alias("producer")
    )
    delivered = df.filter(
        (F.col("kind") == "message.delivered") & (F.coalesce(F.col("delivery_count"), F.lit(1)) == 1)
    ).select("message_id", "address", key_col.alias("consumer"))
    flows = delivered.join(
        sent.select("message_id", "producer", "size"), "message_id", "inner"
    )
    produced = sent.groupBy(F.col("producer").alias("key"), "address").agg(
        F.count(F.lit(1)).alias("produced_messages"), F.sum("size").alias("produced_bytes")
    )
    consumed = flows.groupBy(F.col("consumer").alias("key"), "address").agg(
        F.count(F.lit(1)).alias("consumed_messages"), F.sum("size").alias("consumed_bytes")
    )
    key_address = produced.join(consumed, ["key", "address"], "full").fillna(
        0, ["produced_messages", "produced_bytes", "consumed_messages", "consumed_bytes"]
    )
    pairs = flows.groupBy("producer", "consumer").agg(
        F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes")
    )
    shown.phase("aggregating traffic per key and address")
    tables = {"gravity_key_address": write_table(key_address, out, "gravity_key_address")}
    shown.phase("aggregating traffic between keys")
    tables["gravity_pairs"] = write_table(pairs, out, "gravity_pairs")

    key_address = spark.read.parquet(tables["gravity_key_address"])
    per_key = key_address.groupBy("key").agg(
        F.sum(F.col("produced_bytes") + F.col("consumed_bytes")).alias("load"),
        F.sum("produced_bytes").alias("produced_bytes"),
        F.sum("consumed_bytes").alias("consumed_bytes"),
        F.sum("produced_messages").alias("produced_messages"),
        F.sum("consumed_messages").alias("consumed_messages"),
        F.count(F.lit(1)).alias("addresses"),
    )
    rows = per_key.limit(MAX_KEYS + 1).collect()
    if not rows:
        raise PipelineError(
            f"no message.sent events in {events}: are message events enabled in <junction><events>? "
            "(the gravity planner needs message.sent and message.delivered)"
        )
    if len(rows) > MAX_KEYS:
        raise PipelineError(
            f"more than {MAX_KEYS:,} distinct {key} keys (MAX_KEYS): the planner partitions keys in "
            "memory, and a local-target-filter of so many keys is no sane configuration; "
            "analyze a subset of the events, or plan with --key client_id/user on fewer keys"
        )
    keys = {row["key"]: row.asDict() for row in rows}
    pair_rows = spark.read.parquet(tables["gravity_pairs"]).limit(MAX_PAIRS + 1).collect()
    if len(pair_rows) > MAX_PAIRS:
        raise PipelineError(
            f"more than {MAX_PAIRS:,} distinct producer/consumer key pairs (MAX_PAIRS); "
            "analyze a subset of the events"
        )
    pair_list = [(r["producer"], r["consumer"], int(r["bytes"] or 0), int(r["messages"])) for r in pair_rows]
    return tables, keys, pair_list, per_key


def placements(df, key: str, per_key):
    """Spark: each traffic key's last routed broker, and each broker's node id (bounded collects).

    A connection routed ``local`` went to the gateway node's own core, named
    by its node; any other decision's target is the target's (connector)
    name.  A broker's node id is ``target_node_id`` (for ``local``, the
    event's own ``node_id`` when that is missing).
    """
    from pyspark.sql import functions as F

    from junction.pipeline.common import PipelineError

    local = F.col("target").isNull() | (F.col("target") == "local")
    routed = df.filter(
        (F.col("kind") == "connection.routed") & F.col("decision").isin(list(PLACED_DECISIONS))
    ).select(
        F.coalesce(F.col(key), F.lit(NULL_KEY)).alias("key"),
        F.when(local, F.col("node")).otherwise(F.col("target")).alias("broker"),
        F.coalesce(F.col("target_node_id"), F.when(local, F.col("node_id"))).alias("broker_node_id"),
        "ts",
    ).filter(F.col("broker").isNotNull())
    target_rows = (
        routed.groupBy("broker")
        .agg(F.max_by("broker_node_id", F.when(F.col("broker_node_id").isNotNull(), F.col("ts"))).alias("node_id"))
        .limit(MAX_TARGETS + 1)
        .collect()
    )
    if len(target_rows) > MAX_TARGETS:
        raise PipelineError(f"more than {MAX_TARGETS:,} distinct routing targets (MAX_TARGETS)")
    node_ids = {r["broker"]: r["node_id"] for r in target_rows if r["node_id"] is not None}
    observed: dict[str, str] = {}
    if target_rows:
        last = routed.groupBy("key").agg(F.max_by("broker", F.struct("ts", "broker")).alias("broker"))
        rows = last.join(per_key.select("key"), "key", "left_semi").collect()  # at most MAX_KEYS
        observed = {r["key"]: r["broker"] for r in rows}
    return observed, node_ids, sorted(r["broker"] for r in target_rows)

