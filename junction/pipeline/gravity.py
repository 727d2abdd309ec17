"""The data-gravity planner: which broker each key should live on, and the router config that does it.

Artemis's "data gravity" (``local-target-filter`` routers, each broker
serving an exclusive subset of keys) keeps related addresses and their data on
one broker, so applications connect to their data instead of the data
following them between brokers.  What it does not say is *which* keys belong
together.  This job answers that from the event log:

1. **Traffic** (Spark).  A producer's key is the ``user`` (or ``client_id``,
   ``--key``) of ``message.sent``; a consumer's is that of its first
   deliveries (``message.delivered`` with ``delivery_count`` 1), whose size
   comes from the ``message.sent`` of the same ``message_id``.  Spark
   aggregates which keys touch which addresses (``gravity_key_address``) and
   the producer-key -> consumer-key byte matrix (``gravity_pairs``): the bytes
   that cross brokers when the two keys live on different brokers.  Only
   these aggregates, bounded by ``MAX_KEYS`` and ``MAX_PAIRS``,
   reach the driver.

2. **Partition** (pure Python, :func:`partition`).  Keys are the vertices
   of a graph whose edge weights are the bytes between two keys (both
   directions); a key's load is the bytes it produced plus the bytes it
   consumed.  Communities are found by Louvain modularity (:func:`communities`),
   packed largest-first onto the brokers (each to the broker it is most
   attached to among those it fits in without passing the mean load, else the
   least loaded one it fits in under the balance cap), a community too big for
   any broker is split greedily by affinity, and a Kernighan-Lin/FM style
   refinement then moves and swaps single keys while that lowers the cut and
   keeps every broker under ``balance x mean``.  Every step iterates in
   sorted order and breaks ties explicitly: the same input gives the same plan.

3. **Current placement**: the last target each key was routed to
   (``connection.routed``), else what ``--policy`` (CONSISTENT_HASH by
   default) over ``--targets`` would choose, computed with
   :mod:`junction.routing.policies` itself so the numbers are the gateway's.

4. **Configuration**: ``--form filter`` gives each broker a
   ``<connection-router>`` whose ``<local-target-filter>`` matches exactly its
   keys (one broker, the least loaded, also takes every key the plan does not
   know, unless ``--no-catch-all``); ``--form modulo`` shards keys with
   CONSISTENT_HASH_MODULO (fnv1a-32, the gateway's own numbers) and assigns
   shards to brokers the same way, each broker's filter listing its shards.

5. **Prediction**: cross-broker bytes before (current placement) and after
   (the plan), and a what-if (``--add-target``/``--remove-target``) of the
   current policy: keys moved, load per target, cross traffic after.

The pure functions (:func:`partition`, :func:`plan_gravity`,
:func:`filter_regex`, :func:`whatif`, ...) need no Spark; :func:`run` is the
job.  pyspark and the report are imported inside the functions that use them.

The planner is one module per step, each importing only those before it:
:mod:`~junction.pipeline.gravity_limits` (every limit and default, and
:class:`PlanError`), :mod:`~junction.pipeline.gravity_graph` (the key graph
and its Louvain communities), :mod:`~junction.pipeline.gravity_partition`,
:mod:`~junction.pipeline.gravity_placement` (the policies' placement and the
what-if), :mod:`~junction.pipeline.gravity_routers` (filters and router XML),
:mod:`~junction.pipeline.gravity_plan` (:func:`plan_gravity`: all of it put
together), then the job's own: :mod:`~junction.pipeline.gravity_traffic`
(Spark) and :mod:`~junction.pipeline.gravity_report` (the HTML report).  This
module is the job: its options, :func:`run`, the tables and the routers' XML
it writes.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from junction.pipeline.gravity_limits import (
    CONFIG_FILE,
    DEFAULT_BALANCE,
    DEFAULT_BROKERS,
    DEFAULT_POLICY,
    DEFAULT_ROUTER_NAME,
    FORMS,
    KEY_TYPES,
    MODULO_SHARDS_PER_BROKER,
    REPORT_ROWS,
    PlanError,
)
from junction.pipeline.gravity_placement import make_policy
from junction.pipeline.gravity_plan import plan_gravity
from junction.pipeline.gravity_report import write_report
from junction.pipeline.gravity_traffic import KINDS_READ, placements, traffic

__all__ = ["JOB", "add_arguments", "run"]

JOB = "gravity"

#: the summary lists each broker's filter when they add up to at most this many characters
SUMMARY_FILTER_CHARS = 4_096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gravity job's options."""
    parser.add_argument(
        "--key", choices=tuple(KEY_TYPES), default="user",
        help="what identifies an application: the user (router key type USER_NAME, the default) "
        "or the client id (CLIENT_ID)",
    )
    parser.add_argument(
        "--brokers", type=int, default=None, metavar="N",
        help="brokers to plan for (default: the targets seen in connection.routed events, "
        f"else --targets, else {DEFAULT_BROKERS})",
    )
    parser.add_argument(
        "--balance", type=float, default=DEFAULT_BALANCE, metavar="F",
        help=f"most load a broker may carry, as a multiple of the mean (default {DEFAULT_BALANCE})",
    )
    parser.add_argument(
        "--policy", default=DEFAULT_POLICY, metavar="NAME",
        help="the routers' policy now: places keys without connection.routed events, and runs "
        f"the what-if (default {DEFAULT_POLICY})",
    )
    parser.add_argument(
        "--policy-property", action="append", default=None, metavar="KEY=VALUE",
        help="a <property> of --policy, e.g. HASH=FNV1A (repeatable)",
    )
    parser.add_argument(
        "--targets", default=None, metavar="NAMES",
        help="comma-separated target (broker) names (default: those in connection.routed events, "
        "else broker1..brokerN)",
    )
    parser.add_argument(
        "--form", choices=FORMS, default="filter",
        help="filter: a local-target-filter listing each broker's keys (default); "
        "modulo: CONSISTENT_HASH_MODULO shards, each broker's filter listing its shards",
    )
    parser.add_argument(
        "--modulo", type=int, default=None, metavar="M",
        help=f"shards of --form modulo (default {MODULO_SHARDS_PER_BROKER} per broker)",
    )
    parser.add_argument(
        "--router-name", default=DEFAULT_ROUTER_NAME, metavar="NAME",
        help=f"the <connection-router name> of the generated configuration (default {DEFAULT_ROUTER_NAME})",
    )
    parser.add_argument(
        "--no-catch-all", dest="catch_all", action="store_false",
        help="list only the planned keys: a key no broker lists is refused by all "
        "(default: the least loaded broker also takes unknown keys)",
    )
    parser.add_argument(
        "--add-target", action="append", default=None, metavar="NAME",
        help="what-if: add this target under the current policy (repeatable)",
    )
    parser.add_argument(
        "--remove-target", action="append", default=None, metavar="NAME",
        help="what-if: remove this target under the current policy (repeatable)",
    )
    parser.add_argument(
        "--top", type=int, default=REPORT_ROWS, metavar="N",
        help=f"rows of each table in the report (default {REPORT_ROWS})",
    )


def _policy_properties(items: Sequence[str] | None) -> dict[str, str]:
    properties: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise PlanError(f"--policy-property {item!r}: expected KEY=VALUE")
        properties[name.strip()] = value.strip()
    return properties


def run(spark, events: str, out: str, **options):
    """The gravity job: tables under ``out``, the report ``out/gravity.html`` and the routers' XML.

    Options are :func:`add_arguments`'s (unknown ones, such as the CLI's own,
    are ignored).  Raises PipelineError for no message events or an option the
    planner cannot use; exit code 0 otherwise.
    """
    import os

    from pyspark import StorageLevel
    from pyspark.sql import types as T

    from junction.pipeline.common import (
        JobResult,
        PipelineError,
        progress,
        read_events,
        write_table,
    )

    key = options.get("key") or "user"
    top = int(options.get("top") or REPORT_ROWS)
    try:
        properties = _policy_properties(options.get("policy_property"))
        targets = [t.strip() for t in (options.get("targets") or "").split(",") if t.strip()] or None
        make_policy(options.get("policy") or DEFAULT_POLICY, properties)  # a bad policy fails early
    except PlanError as exc:
        raise PipelineError(str(exc)) from None
    if key not in KEY_TYPES:
        raise PipelineError(f"--key must be {' or '.join(KEY_TYPES)}, not {key!r}")

    with progress(spark, JOB) as shown:
        shown.phase("reading events")
        df = read_events(spark, events, KINDS_READ)
        columns = ["kind", "ts", "node", "node_id", "message_id", "address", "size", "delivery_count",
                   "target", "target_node_id", "decision", "user", "client_id"]
        df = df.select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            tables, keys, pair_rows, per_key = traffic(spark, df, events, key, out, shown)
            shown.phase("finding where keys are routed now")
            observed, node_ids, seen_targets = placements(df, key, per_key)
        finally:
            df.unpersist()

        shown.phase(f"planning {len(keys):,} keys")
        try:
            plan = plan_gravity(
                {k: v["load"] or 0 for k, v in keys.items()},
                [(p, c, b) for p, c, b, _ in pair_rows],
                observed=observed,
                node_ids=node_ids,
                targets=targets or seen_targets or None,
                brokers=options.get("brokers"),
                balance=float(options.get("balance") or DEFAULT_BALANCE),
                policy=options.get("policy") or DEFAULT_POLICY,
                policy_properties=properties,
                form=options.get("form") or "filter",
                modulo=options.get("modulo"),
                key=key,
                router_name=options.get("router_name") or DEFAULT_ROUTER_NAME,
                catch_all=options.get("catch_all", True),
                add_targets=options.get("add_target") or (),
                remove_targets=options.get("remove_target") or (),
            )
        except PlanError as exc:
            raise PipelineError(str(exc)) from None

        shown.phase("writing the plan")
        w = plan.whatif
        plan_schema = T.StructType([
            T.StructField("key", T.StringType()), T.StructField("load", T.DoubleType()),
            T.StructField("current_broker", T.StringType()), T.StructField("current_source", T.StringType()),
            T.StructField("planned_broker", T.StringType()), T.StructField("moved", T.BooleanType()),
            T.StructField("shard", T.StringType()), T.StructField("whatif_target", T.StringType()),
        ])
        plan_rows = [
            (k, plan.loads[k], plan.current[k], plan.current_source[k], plan.planned[k],
             plan.current[k] != plan.planned[k], plan.key_shard.get(k),
             w.placement_after.get(k) if w is not None else None)
            for k in sorted(plan.loads)
        ]
        tables["gravity_plan"] = write_table(spark.createDataFrame(plan_rows, plan_schema), out, "gravity_plan")
        if w is not None:
            whatif_schema = T.StructType([
                T.StructField("target", T.StringType()),
                T.StructField("keys_before", T.LongType()), T.StructField("load_before", T.DoubleType()),
                T.StructField("keys_after", T.LongType()), T.StructField("load_after", T.DoubleType()),
            ])
            whatif_rows = [
                (t, w.keys_before.get(t), w.loads_before.get(t), w.keys_after.get(t), w.loads_after.get(t))
                for t in dict.fromkeys(w.targets_before + w.targets_after)
            ]
            tables["gravity_whatif"] = write_table(
                spark.createDataFrame(whatif_rows, whatif_schema), out, "gravity_whatif"
            )

        config_path = os.path.join(out, CONFIG_FILE)
        os.makedirs(out, exist_ok=True)
        with open(config_path, "w", encoding="utf-8") as f:
            f.write(f"<!-- junction analyze gravity: {len(plan.brokers)} brokers, form {plan.form}, "
                    f"key {plan.key_type}; each broker's <connection-routers> gets its router -->\n")
            for name in plan.brokers:
                f.write("\n" + plan.snippets[name] + "\n")

        shown.phase("writing the report")
        report_path = write_report(
            os.path.join(out, f"{JOB}.html"), events, plan, keys, pair_rows,
            sum(1 for s in plan.current_source.values() if s == "routed"), top,
        )

    summary = {
        "keys": len(plan.loads),
        "pairs": len(pair_rows),
        "bytes": plan.total_bytes,
        "brokers": plan.brokers,
        "form": plan.form,
        "key_type": plan.key_type,
        "balance_cap": plan.cap,
        "cross_before_bytes": plan.cross_before,
        "cross_before_pct": round(plan.pct(plan.cross_before), 3),
        "cross_after_bytes": plan.cross_after,
        "cross_after_pct": round(plan.pct(plan.cross_after), 3),
        "keys_moved": plan.keys_moved,
        "load_before": plan.loads_before,
        "load_after": plan.loads_after,
        "placement_routed": sum(1 for s in plan.current_source.values() if s == "routed"),
        "placement_policy": sum(1 for s in plan.current_source.values() if s == "policy"),
        "router_config": config_path,
        "notes": plan.notes,
    }
    if plan.form == "modulo":
        summary["modulo"] = plan.modulo
    if plan.catch_all is not None:
        summary["catch_all"] = plan.catch_all
    if sum(len(f or "") for f in plan.filters.values()) <= SUMMARY_FILTER_CHARS:
        summary["filters"] = plan.filters
    if w is not None:
        summary["whatif"] = {
            "targets_before": w.targets_before,
            "targets_after": w.targets_after,
            "keys_moved": w.keys_moved,
            "keys_moved_pct": round(w.keys_moved_pct, 3),
            "load_before": w.loads_before,
            "load_after": w.loads_after,
            "cross_before_bytes": w.cross_before,
            "cross_after_bytes": w.cross_after,
        }
    return JobResult(job=JOB, summary=summary, exit_code=0, report=report_path, tables=tables)
