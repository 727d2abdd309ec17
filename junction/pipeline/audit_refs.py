"""The delivery audit's column expressions over restarts and message references.

:mod:`junction.pipeline.audit` follows every message through its references
(a (node, queue) that held it); these build the expressions it needs: the
restarts collected to the driver as a literal map (node id -> its start
times, so "the next restart after this time" is an array lookup), and the
per-queue figures of a message's array of reference structs (fields
``rqueue``, ``delivered``, ``acknowledged``, ``first_delivery_ts``,
``first_ack_ts``).  pyspark is imported where used, as in the jobs.
"""

from __future__ import annotations

from junction.pipeline.common import PipelineError

__all__ = [
    "restarts", "times_map", "run_of", "queue_names", "over_queue", "duplicated_queues", "duplicated_details",
    "firsts",
]


def restarts(raw, most: int):
    """The node.started events, collected: ``(times, rows)``, ``times`` node id -> its
    start times in order, ``rows`` (node_id, index from 1, persistent, queues, paged)."""
    from pyspark.sql import functions as F

    found = (
        raw.filter(F.col("kind") == "node.started")
        .select("node_id", "ts", "persistent", "queues", "paged")
        .limit(most + 1)
        .collect()
    )
    if len(found) > most:
        raise PipelineError(f"more than {most:,} node restarts (node.started) in the events: audit fewer at once")
    times: dict[str, list] = {}
    for row in sorted(found, key=lambda r: (r["node_id"] or "", r["ts"])):
        times.setdefault(row["node_id"] or "", []).append(row)
    rows = [
        (node_id, i + 1, bool(r["persistent"]), list(r["queues"] or []), list(r["paged"] or []))
        for node_id, starts in times.items() for i, r in enumerate(starts)
    ]
    return {node_id: [r["ts"] for r in starts] for node_id, starts in times.items()}, rows


def times_map(times: dict):
    """A literal map node id -> array of times (an empty map of that type when there are none)."""
    from pyspark.sql import functions as F

    if not times:
        return F.create_map().cast("map<string,array<double>>")
    return F.create_map(*[x for node_id, ts in times.items()
                          for x in (F.lit(node_id), F.array(*[F.lit(float(t)) for t in ts]))])


def run_of(times, node, ts):
    """How many of ``node``'s restarts (``times``: :func:`times_map`) came at or before ``ts``."""
    from pyspark.sql import functions as F

    starts = times[node]
    return F.when(starts.isNull(), F.lit(0)).otherwise(F.size(F.filter(starts, lambda t: t <= ts)))


def queue_names(refs):
    """The distinct queue names of ``refs`` (an array of reference structs)."""
    from pyspark.sql import functions as F

    return F.array_distinct(F.filter(F.transform(refs, lambda r: r["rqueue"]), lambda q: q.isNotNull()))


def over_queue(refs, queue, field, how="sum"):
    """``field`` of the references of ``queue`` on every node: their sum (or their minimum)."""
    from pyspark.sql import functions as F

    mine = F.filter(refs, lambda r: r["rqueue"] == queue)
    if how == "min":
        return F.array_min(F.transform(mine, lambda r: r[field]))
    return F.aggregate(mine, F.lit(0).cast("long"), lambda acc, r: acc + r[field].cast("long"))


def duplicated_queues(refs):
    """The queues that acknowledged the message more than once (on any nodes), sorted."""
    from pyspark.sql import functions as F

    refs = F.coalesce(refs, F.array())
    return F.array_sort(F.filter(queue_names(refs), lambda q: over_queue(refs, q, "acknowledged") > 1))


def duplicated_details(refs):
    """(queue, acks, deliveries, first_ack_ts) of each duplicated queue, or null when none."""
    from pyspark.sql import functions as F

    refs = F.coalesce(refs, F.array())
    details = F.transform(duplicated_queues(refs), lambda q: F.struct(
        q.alias("queue"), over_queue(refs, q, "acknowledged").alias("acks"),
        over_queue(refs, q, "delivered").alias("deliveries"),
        over_queue(refs, q, "first_ack_ts", "min").alias("first_ack_ts"),
    ))
    return F.when(F.size(details) > 0, details)


def firsts(refs):
    """(queue, first_delivery_ts) of every queue that delivered the message: its first delivery there."""
    from pyspark.sql import functions as F

    refs = F.coalesce(refs, F.array())
    delivered = F.filter(queue_names(refs), lambda q: over_queue(refs, q, "delivered") > 0)
    return F.transform(delivered, lambda q: F.struct(
        q.alias("queue"), over_queue(refs, q, "first_delivery_ts", "min").alias("first_delivery_ts")
    ))
