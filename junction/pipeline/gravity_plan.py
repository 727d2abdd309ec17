"""The whole data-gravity plan from aggregated traffic: placement now, the plan, its config, predictions.

:func:`plan_gravity` puts the planner together -- the key graph, where keys
are now (:mod:`junction.pipeline.gravity_placement`), the partition
(:mod:`junction.pipeline.gravity_partition`, of keys or of CONSISTENT_HASH_MODULO
shards), the routers' configuration (:mod:`junction.pipeline.gravity_routers`)
and the what-if -- into one :class:`GravityPlan`.  Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from junction.pipeline.gravity_graph import build_adjacency, cross_bytes
from junction.pipeline.gravity_limits import (
    DEFAULT_BALANCE,
    DEFAULT_BROKERS,
    DEFAULT_POLICY,
    DEFAULT_ROUTER_NAME,
    FORMS,
    KEY_TYPES,
    LOAD_EPS,
    MAX_FILTER_KEYS,
    MODULO_SHARDS_PER_BROKER,
    PlanError,
)
from junction.pipeline.gravity_partition import balance_cap, partition
from junction.pipeline.gravity_placement import (
    TargetSpec,
    WhatIf,
    counts_by,
    loads_by,
    make_policy,
    policy_placement,
    shard_of,
    whatif,
)
from junction.pipeline.gravity_routers import (
    catch_all_regex,
    filter_regex,
    modulo_filter_regex,
    router_snippet,
)
from junction.routing.keys import NULL_KEY

__all__ = ["GravityPlan", "plan_gravity"]


@dataclass
class GravityPlan:
    """Everything the planner decided and predicted (see :func:`plan_gravity`)."""

    brokers: list[str]
    form: str
    key_type: str
    loads: dict[str, float]
    current: dict[str, str]
    current_source: dict[str, str]
    planned: dict[str, str]
    cap: float
    total_bytes: float
    cross_before: float
    cross_after: float
    loads_before: dict[str, float]
    loads_after: dict[str, float]
    keys_before: dict[str, int]
    keys_after: dict[str, int]
    keys_moved: int
    filters: dict[str, str | None]
    snippets: dict[str, str]
    catch_all: str | None = None
    router_name: str = DEFAULT_ROUTER_NAME
    modulo: int | None = None
    key_shard: dict[str, str] = field(default_factory=dict)
    shard_broker: dict[str, str] = field(default_factory=dict)
    whatif: WhatIf | None = None
    notes: list[str] = field(default_factory=list)

    def pct(self, value: float) -> float:
        """``value`` as a percentage of all bytes between keys."""
        return 100.0 * value / self.total_bytes if self.total_bytes else 0.0


def _broker_names(known: Sequence[str], count: int, current_loads: Mapping[str, float]) -> list[str]:
    """``count`` broker names: the known targets (the busiest when too many), then broker1, broker2..."""
    if len(known) >= count:
        chosen = sorted(known, key=lambda name: (-current_loads.get(name, 0.0), name))[:count]
        return sorted(chosen)
    names = list(known)
    i = 1
    while len(names) < count:
        candidate = f"broker{i}"
        if candidate not in names:
            names.append(candidate)
        i += 1
    return names


def _name_bins(
    bins_of: Mapping[str, int], count: int, names: Sequence[str], current: Mapping[str, str], loads: Mapping[str, float]
) -> dict[int, str]:
    """Broker number -> name, keeping as much load where it is now as possible (greedy matching)."""
    overlap: dict[tuple[int, str], float] = defaultdict(float)
    for key, b in bins_of.items():
        where = current.get(key)
        if where in names:
            overlap[(b, where)] += float(loads.get(key, 0) or 0)
    rank = {name: i for i, name in enumerate(names)}
    mapping: dict[int, str] = {}
    used: set[str] = set()
    for (b, name), _ in sorted(overlap.items(), key=lambda item: (-item[1], item[0][0], rank[item[0][1]])):
        if b not in mapping and name not in used:
            mapping[b] = name
            used.add(name)
    free = [name for name in names if name not in used]
    for b in range(count):
        if b not in mapping:
            mapping[b] = free.pop(0)
    return mapping


def plan_gravity(
    loads: Mapping[str, float],
    pairs: Iterable[tuple[str, str, float]],
    *,
    observed: Mapping[str, str] | None = None,
    node_ids: Mapping[str, str] | None = None,
    targets: Sequence[str] | None = None,
    brokers: int | None = None,
    balance: float = DEFAULT_BALANCE,
    policy: str = DEFAULT_POLICY,
    policy_properties: Mapping[str, str] | None = None,
    form: str = "filter",
    modulo: int | None = None,
    key: str = "user",
    router_name: str = DEFAULT_ROUTER_NAME,
    catch_all: bool = True,
    add_targets: Sequence[str] = (),
    remove_targets: Sequence[str] = (),
) -> GravityPlan:
    """The whole plan from aggregated traffic: placement now, the plan, its config, predictions.

    ``loads``: key -> bytes produced + consumed; ``pairs``: (producer key,
    consumer key, bytes); ``observed``: key -> the broker its connections were
    last routed to; ``node_ids``: broker name -> node id (for the policy's
    hashing); ``targets``: the broker names (default: those observed).  The
    other arguments are the job's options.  Pure: no Spark, no I/O.
    """
    if form not in FORMS:
        raise PlanError(f"unknown form {form!r}: {' or '.join(FORMS)}")
    if key not in KEY_TYPES:
        raise PlanError(f"unknown key {key!r}: {' or '.join(KEY_TYPES)}")
    if brokers is not None and brokers < 1:
        raise PlanError(f"--brokers must be at least 1, not {brokers}")
    observed = dict(observed or {})
    node_ids = dict(node_ids or {})
    pairs = list(pairs)
    adjacency = build_adjacency(pairs)
    loads = {k: float(v or 0) for k, v in loads.items()}
    for k in adjacency:
        loads.setdefault(k, 0.0)
    keys = sorted(loads)
    total_bytes = float(sum(size for _, _, size in pairs))
    notes: list[str] = []

    known = list(dict.fromkeys(targets)) if targets else sorted(set(observed.values()))
    count = brokers or len(known) or DEFAULT_BROKERS
    current_targets = known or [f"broker{i}" for i in range(1, count + 1)]
    specs = [TargetSpec(name, node_ids.get(name)) for name in current_targets]

    current: dict[str, str] = {}
    source: dict[str, str] = {}
    unobserved = [k for k in keys if k not in observed]
    computed = policy_placement(unobserved, specs, make_policy(policy, policy_properties)) if unobserved else {}
    for k in keys:
        if k in observed:
            current[k], source[k] = observed[k], "routed"
        else:
            current[k], source[k] = computed[k], "policy"
    current_loads = loads_by(current, loads, current_targets)
    names = _broker_names(known, count, current_loads)

    key_shard: dict[str, str] = {}
    shard_broker: dict[str, str] = {}
    if form == "filter":
        if modulo is not None:
            raise PlanError("--modulo is for --form modulo")
        bins_of = partition(loads, adjacency, count, balance)
        mapping = _name_bins(bins_of, count, names, current, loads)
        planned = {k: mapping[b] for k, b in bins_of.items()}
    else:
        modulo = modulo if modulo is not None else MODULO_SHARDS_PER_BROKER * count
        if modulo < 1:
            raise PlanError(f"--modulo must be at least 1, not {modulo}")
        if modulo < count:
            notes.append(f"--modulo {modulo} is below the {count} brokers: some brokers get no shard")
        key_shard = {k: shard_of(k, modulo) for k in keys}
        shard_loads: dict[str, float] = {str(s): 0.0 for s in range(modulo)}
        for k in keys:
            shard_loads[key_shard[k]] = shard_loads.get(key_shard[k], 0.0) + loads[k]
        shard_pairs = [(key_shard[p], key_shard[c], size) for p, c, size in pairs]
        shard_bins = partition(shard_loads, build_adjacency(shard_pairs), count, balance)
        bins_of = {k: shard_bins[key_shard[k]] for k in keys}
        mapping = _name_bins(bins_of, count, names, current, loads)
        shard_broker = {s: mapping[b] for s, b in shard_bins.items()}
        planned = {k: shard_broker[key_shard[k]] for k in keys}

    loads_after = loads_by(planned, loads, names)
    keys_after = counts_by(planned, names)
    catch_broker = min(names, key=lambda n: (loads_after[n], keys_after[n], n)) if catch_all else None
    key_type = KEY_TYPES[key]
    filters: dict[str, str | None] = {}
    snippets: dict[str, str] = {}
    for name in names:
        mine = sorted(k for k, where in planned.items() if where == name)
        if form == "filter":
            if name == catch_broker:
                others = [k for k, where in planned.items() if where != name]
                filters[name] = catch_all_regex(others)
                what = f"{len(mine)} keys planned here, and every key no other broker lists"
            else:
                filters[name] = filter_regex(mine)
                what = f"{len(mine)} keys"
            listed = len(planned) - len(mine) if name == catch_broker else len(mine)
            if listed > MAX_FILTER_KEYS:
                notes.append(
                    f"{name}'s local-target-filter lists {listed:,} keys ({len(filters[name] or ''):,} characters), "
                    f"more than MAX_FILTER_KEYS ({MAX_FILTER_KEYS:,}): every connection is matched against it; "
                    "consider --form modulo"
                )
            snippets[name] = router_snippet(
                name, key_type, filters[name], router_name=router_name,
                comment=f"{name}: {what}, {loads_after[name]:,.0f} bytes planned",
            )
        else:
            shards = {s for s, where in shard_broker.items() if where == name}
            if name == catch_broker and NULL_KEY not in shard_broker:
                shards.add(NULL_KEY)  # connections without a key: someone must take them
            filters[name] = modulo_filter_regex(shards)
            snippets[name] = router_snippet(
                name, key_type, filters[name], router_name=router_name, modulo=modulo,
                comment=f"{name}: {len(shards)} of {modulo} shards, {len(mine)} keys, "
                f"{loads_after[name]:,.0f} bytes planned",
            )

    what = None
    if add_targets or remove_targets:
        what = whatif(loads, adjacency, specs, policy, policy_properties, add_targets, remove_targets)

    all_names = list(dict.fromkeys(list(names) + sorted(set(current.values()))))
    cap = balance_cap(loads.values(), count, balance)
    heaviest = max(loads.values(), default=0.0)
    if heaviest > cap * (1 + LOAD_EPS):
        notes.append(
            f"one key alone carries {heaviest:,.0f} bytes, more than the balance cap of "
            f"{cap:,.0f}: no placement can meet --balance {balance}"
        )
    return GravityPlan(
        brokers=list(names),
        form=form,
        key_type=key_type,
        loads=loads,
        current=current,
        current_source=source,
        planned=planned,
        cap=cap,
        total_bytes=total_bytes,
        cross_before=cross_bytes(adjacency, current),
        cross_after=cross_bytes(adjacency, planned),
        loads_before=loads_by(current, loads, all_names),
        loads_after=loads_after,
        keys_before=counts_by(current, all_names),
        keys_after=keys_after,
        keys_moved=sum(1 for k in keys if current[k] != planned[k]),
        filters=filters,
        snippets=snippets,
        catch_all=catch_broker if form == "filter" else None,
        router_name=router_name,
        modulo=modulo if form == "modulo" else None,
        key_shard=key_shard,
        shard_broker=shard_broker,
        whatif=what,
        notes=notes,
    )

