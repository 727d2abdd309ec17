"""Where the routers place keys now: the gateway's own policies over the targets, and the what-if.

A key without a ``connection.routed`` event is placed by what ``--policy``
would choose, computed with :mod:`junction.routing.policies` itself, so the
numbers are the gateway's; the what-if (``--add-target``/``--remove-target``)
places every key with that policy before and after the change.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from junction.pipeline.gravity_graph import cross_bytes
from junction.pipeline.gravity_limits import DEFAULT_POLICY, POLICY_SEED, PlanError
from junction.routing.keys import NULL_KEY
from junction.routing.policies import (
    MODULO,
    ConsistentHashModuloPolicy,
    LeastConnectionsPolicy,
    Policy,
    PolicyLoadError,
    PolicyPropertyError,
    RoundRobinPolicy,
    UnknownPolicyError,
    create_policy,
)

__all__ = [
    "TargetSpec",
    "WhatIf",
    "counts_by",
    "loads_by",
    "make_policy",
    "policy_placement",
    "shard_of",
    "whatif",
]


@dataclass(frozen=True)
class TargetSpec:
    """What a policy needs of a target (a stand-in for :class:`junction.routing.targets.Target`).

    ``target_identity`` and CONSISTENT_HASH read ``node_id`` (else ``name``),
    LEAST_CONNECTIONS reads ``connection_count``; with the node ids the
    gateways saw, the policy picks what they picked.
    """

    name: str
    node_id: str | None = None
    connection_count: int | None = None
    ready: bool = True
    local: bool = False


def make_policy(name: str, properties: Mapping[str, str] | None = None) -> Policy:
    """The policy ``name`` (as :func:`create_policy`), round robins from a fixed start."""
    try:
        if name == RoundRobinPolicy.name:
            return RoundRobinPolicy(properties, rng=random.Random(POLICY_SEED))
        if name == LeastConnectionsPolicy.name:
            return LeastConnectionsPolicy(properties, rng=random.Random(POLICY_SEED))
        return create_policy(name, properties)
    except (UnknownPolicyError, PolicyPropertyError, PolicyLoadError) as exc:
        raise PlanError(str(exc)) from None


def shard_of(key: str, modulo: int) -> str:
    """The shard CONSISTENT_HASH_MODULO turns ``key`` into (``NULL`` stays ``NULL``, as in the router)."""
    if key == NULL_KEY:
        return NULL_KEY
    return ConsistentHashModuloPolicy({MODULO: str(modulo)}).transform_key(key)


def policy_placement(keys: Iterable[str], targets: Sequence[TargetSpec], policy: Policy) -> dict[str, str]:
    """key -> the name of the target ``policy`` selects for it among ``targets`` (all ready).

    Keys are asked in sorted order (round robins then place repeatably).
    CONSISTENT_HASH_MODULO selects no target itself (each node keeps its own
    shard): shard ``s`` is taken to live on ``targets[s % len(targets)]``, and
    the key ``NULL`` on the first target.
    """
    if not targets:
        raise PlanError("no targets to place keys on")
    placement: dict[str, str] = {}
    modulo = isinstance(policy, ConsistentHashModuloPolicy) and policy.modulo > 0
    for key in sorted(keys):
        if modulo:
            shard = policy.transform_key(key) if key != NULL_KEY else NULL_KEY
            chosen = targets[0] if shard == NULL_KEY else targets[int(shard) % len(targets)]
        else:
            chosen = policy.select(targets, policy.transform_key(key) if key != NULL_KEY else key)
            if chosen is None:
                raise PlanError(f"policy {policy.name} selects no target for key {key!r}")
        placement[key] = chosen.name
    return placement


def loads_by(placement: Mapping[str, str], loads: Mapping[str, float], names: Iterable[str]) -> dict[str, float]:
    result = dict.fromkeys(names, 0.0)
    for key, where in placement.items():
        result[where] = result.get(where, 0.0) + float(loads.get(key, 0) or 0)
    return result


def counts_by(placement: Mapping[str, str], names: Iterable[str]) -> dict[str, int]:
    result = dict.fromkeys(names, 0)
    for where in placement.values():
        result[where] = result.get(where, 0) + 1
    return result


@dataclass
class WhatIf:
    """The current policy with targets added or removed: what moves, and what it costs."""

    targets_before: list[str]
    targets_after: list[str]
    placement_before: dict[str, str]
    placement_after: dict[str, str]
    keys_moved: int
    keys_moved_pct: float
    loads_before: dict[str, float]
    loads_after: dict[str, float]
    keys_before: dict[str, int]
    keys_after: dict[str, int]
    cross_before: float
    cross_after: float


def whatif(
    loads: Mapping[str, float],
    adjacency: Mapping[str, Mapping[str, float]],
    targets: Sequence[TargetSpec],
    policy_name: str = DEFAULT_POLICY,
    properties: Mapping[str, str] | None = None,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
) -> WhatIf:
    """The policy's placement of every key over ``targets``, then with ``add``/``remove`` applied.

    Both placements are the policy's (a fresh policy each time), so the keys
    that move are those the change itself moves, not those a router cache or
    an earlier pool happened to send elsewhere.  Added targets are known by
    their name (no node id yet).
    """
    names = [t.name for t in targets]
    for name in remove:
        if name not in names:
            raise PlanError(f"--remove-target {name}: not one of the targets ({', '.join(names)})")
    for name in add:
        if name in names:
            raise PlanError(f"--add-target {name}: already one of the targets")
    after_targets = [t for t in targets if t.name not in set(remove)] + [TargetSpec(name) for name in add]
    if not after_targets:
        raise PlanError("the what-if leaves no targets")
    keys = sorted(loads)
    before = policy_placement(keys, list(targets), make_policy(policy_name, properties))
    after = policy_placement(keys, after_targets, make_policy(policy_name, properties))
    moved = sum(1 for key in keys if before[key] != after[key])
    names_after = [t.name for t in after_targets]
    return WhatIf(
        targets_before=names,
        targets_after=names_after,
        placement_before=before,
        placement_after=after,
        keys_moved=moved,
        keys_moved_pct=100.0 * moved / len(keys) if keys else 0.0,
        loads_before=loads_by(before, loads, names),
        loads_after=loads_by(after, loads, names_after),
        keys_before=counts_by(before, names),
        keys_after=counts_by(after, names_after),
        cross_before=cross_bytes(adjacency, before),
        cross_after=cross_bytes(adjacency, after),
    )

