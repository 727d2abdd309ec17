"""The data-gravity job's HTML report: the plan, the load per broker, the routers, the heaviest keys.

matplotlib and :mod:`junction.pipeline.report` are imported inside the
functions that use them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from junction.pipeline.gravity_limits import CONFIG_FILE, REPORT_SNIPPET_CHARS
from junction.pipeline.gravity_plan import GravityPlan

__all__ = ["write_report"]


def _pre(report, title: str, text: str) -> None:
    """Preformatted text (configuration) in the report."""
    report.pre(title, text)


def _bars(title: str, names: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], ylabel: str):
    """A grouped bar chart (one group per name, one bar per series)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(names) * len(series) + 2), 3.6))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series):
        ax.bar([x + i * width for x in range(len(names))], values, width, label=label)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(names))])
    ax.set_xticklabels(list(names), rotation=30 if len(names) > 6 else 0, ha="right" if len(names) > 6 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    return fig


def write_report(path: str, events: str, plan: GravityPlan, keys: dict, pairs: list, observed_count: int, top: int):
    from junction.pipeline.report import Report

    report = Report(
        "Junction data gravity",
        f"{events} - key {plan.key_type}, {len(plan.brokers)} brokers, form {plan.form}",
    )
    report.metric("keys", len(plan.loads))
    report.metric("bytes between keys", plan.total_bytes)
    report.metric("cross-broker now", f"{plan.pct(plan.cross_before):.1f}%")
    report.metric("cross-broker planned", f"{plan.pct(plan.cross_after):.1f}%")
    report.metric("keys to move", plan.keys_moved)
    mean = sum(plan.loads.values()) / len(plan.brokers) if plan.brokers else 0
    report.metric("busiest / mean planned", max(plan.loads_after.values(), default=0) / mean if mean else 0)
    if plan.whatif is not None:
        report.metric("what-if keys moved", f"{plan.whatif.keys_moved} ({plan.whatif.keys_moved_pct:.1f}%)")

    grouped = (
        "Keys are grouped by the bytes that flow between them (a producer key and the consumer keys "
        "of its messages) and spread over the brokers"
        if plan.form == "filter" else
        f"Keys fall in {plan.modulo} shards (CONSISTENT_HASH_MODULO); shards are grouped by the bytes "
        "that flow between their keys and spread over the brokers"
    )
    report.section(
        "The plan",
        f"{grouped} so that no broker carries more than "
        f"{plan.cap:,.0f} bytes (the balance cap).  Traffic between keys on different brokers crosses "
        f"brokers: {plan.cross_before:,.0f} bytes now, {plan.cross_after:,.0f} planned "
        f"({plan.pct(plan.cross_before):.1f}% -> {plan.pct(plan.cross_after):.1f}% of "
        f"{plan.total_bytes:,.0f}).\n\n"
        f"Where keys are now: {observed_count} from connection.routed events, "
        f"{len(plan.loads) - observed_count} computed with the policy."
        + ("\n\n" + "\n\n".join(plan.notes) if plan.notes else ""),
    )
    names = list(dict.fromkeys(plan.brokers + sorted(plan.loads_before)))
    total_load = sum(plan.loads.values()) or 1.0
    report.table(
        "Load per broker",
        ["broker", "keys now", "bytes now", "keys planned", "bytes planned", "share planned"],
        [
            [n, plan.keys_before.get(n, 0), plan.loads_before.get(n, 0.0), plan.keys_after.get(n, 0),
             plan.loads_after.get(n, 0.0), f"{100 * plan.loads_after.get(n, 0.0) / total_load:.1f}%"]
            for n in names
        ],
        note="load = bytes produced + bytes consumed by the broker's keys",
    )
    report.plot(
        "Load per broker, now and planned",
        _bars("load per broker", names, [
            ("now", [plan.loads_before.get(n, 0.0) for n in names]),
            ("planned", [plan.loads_after.get(n, 0.0) for n in names]),
        ], "bytes"),
    )
    cross_names = ["now", "planned"] + (["what-if"] if plan.whatif is not None else [])
    cross_values = [plan.cross_before, plan.cross_after] + (
        [plan.whatif.cross_after] if plan.whatif is not None else []
    )
    report.plot("Cross-broker bytes", _bars("cross-broker bytes", cross_names, [("bytes", cross_values)], "bytes"))

    report.section(
        "Router configuration",
        ("Each broker's <connection-router>: a key its local-target-filter matches stays; any other is "
         "refused with 'use another broker', so clients that try the brokers in turn end on theirs. "
         f"Reference the router from each broker's acceptor (router={plan.router_name}).")
        if plan.form == "filter" else
        (f"Each broker's <connection-router>: CONSISTENT_HASH_MODULO turns a key into its shard "
         f"(fnv1a-32 of the key, modulo {plan.modulo}) and the local-target-filter keeps the broker's shards."),
    )
    for name in plan.brokers:
        text = plan.snippets[name]
        if len(text) > REPORT_SNIPPET_CHARS:
            text = text[:REPORT_SNIPPET_CHARS] + f"\n... ({len(plan.snippets[name]):,} characters: see {CONFIG_FILE})"
        _pre(report, name, text)

    by_load = sorted(plan.loads, key=lambda k: (-plan.loads[k], k))[:top]
    report.table(
        f"Heaviest keys (top {top})",
        ["key", "bytes", "produced", "consumed", "addresses", "now", "planned"] + (["shard"] if plan.form == "modulo" else []),
        [
            [k, plan.loads[k], keys.get(k, {}).get("produced_bytes"), keys.get(k, {}).get("consumed_bytes"),
             keys.get(k, {}).get("addresses"), plan.current[k], plan.planned[k]]
            + ([plan.key_shard[k]] if plan.form == "modulo" else [])
            for k in by_load
        ],
    )
    heaviest_pairs = sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))[:top]
    report.table(
        f"Heaviest producer -> consumer pairs (top {top})",
        ["producer", "consumer", "messages", "bytes", "crosses now", "crosses planned"],
        [
            [p, c, m, b, p != c and plan.current[p] != plan.current[c], p != c and plan.planned[p] != plan.planned[c]]
            for p, c, b, m in heaviest_pairs
        ],
    )
    if plan.form == "modulo":
        shard_load: dict[str, float] = defaultdict(float)
        shard_keys: dict[str, int] = defaultdict(int)
        for k, s in plan.key_shard.items():
            shard_load[s] += plan.loads[k]
            shard_keys[s] += 1
        shards = sorted(plan.shard_broker, key=lambda s: (-shard_load.get(s, 0.0), s))[:top]
        report.table(
            f"Shards (top {top} by bytes)",
            ["shard", "broker", "keys", "bytes"],
            [[s, plan.shard_broker[s], shard_keys.get(s, 0), shard_load.get(s, 0.0)] for s in shards],
            note="every key's shard is in the gravity_plan table",
        )
    if plan.whatif is not None:
        w = plan.whatif
        report.section(
            "What-if",
            f"The current policy over {', '.join(w.targets_after)} instead of {', '.join(w.targets_before)}: "
            f"{w.keys_moved} keys move ({w.keys_moved_pct:.1f}%); cross-broker bytes "
            f"{w.cross_before:,.0f} -> {w.cross_after:,.0f}.",
        )
        targets = list(dict.fromkeys(w.targets_before + w.targets_after))
        report.table(
            "Load per target, before and after",
            ["target", "keys before", "bytes before", "keys after", "bytes after"],
            [[t, w.keys_before.get(t), w.loads_before.get(t), w.keys_after.get(t), w.loads_after.get(t)] for t in targets],
        )
        report.plot(
            "What-if: load per target",
            _bars("load per target", targets, [
                ("before", [w.loads_before.get(t, 0.0) for t in targets]),
                ("after", [w.loads_after.get(t, 0.0) for t in targets]),
            ], "bytes"),
        )
    return report.write(path)

