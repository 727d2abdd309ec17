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
   these aggregates, bounded by :data:`MAX_KEYS` and :data:`MAX_PAIRS`,
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
"""

from __future__ import annotations

import argparse
import heapq
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape as xml_escape

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
    "DEFAULT_BALANCE",
    "DEFAULT_BROKERS",
    "MAX_KEYS",
    "MAX_PAIRS",
    "GravityPlan",
    "PlanError",
    "TargetSpec",
    "WhatIf",
    "add_arguments",
    "balance_cap",
    "build_adjacency",
    "communities",
    "cross_bytes",
    "filter_regex",
    "make_policy",
    "catch_all_regex",
    "modulo_filter_regex",
    "partition",
    "plan_gravity",
    "policy_placement",
    "router_snippet",
    "shard_of",
    "whatif",
    "run",
]

JOB = "gravity"

# -- limits and defaults ---------------------------------------------------------------------

#: most distinct keys the planner takes to the driver (a clear error beyond: the partition is
#: in-memory Python, and a local-target-filter of more keys is not a sane configuration anyway)
MAX_KEYS = 100_000
#: most distinct (producer key, consumer key) pairs taken to the driver (an error beyond)
MAX_PAIRS = 2_000_000
#: brokers to plan for when neither --brokers nor the events nor --targets say
DEFAULT_BROKERS = 3
#: a broker may carry at most this times the mean load (--balance)
DEFAULT_BALANCE = 1.1
#: the policy that places keys without a connection.routed event (--policy)
DEFAULT_POLICY = "CONSISTENT_HASH"
#: the <connection-router name> of the generated snippets (--router-name)
DEFAULT_ROUTER_NAME = "gravity"
#: shards per broker when --form modulo is given no --modulo
MODULO_SHARDS_PER_BROKER = 8
#: a filter listing more keys than this is flagged in the report (each connection is matched
#: against it; --form modulo keeps filters short whatever the number of keys)
MAX_FILTER_KEYS = 5_000
#: Louvain: most aggregation levels, and most sweeps over the vertices within one level
LOUVAIN_MAX_LEVELS = 20
LOUVAIN_MAX_SWEEPS = 50
#: Louvain: a move must gain more than this fraction of the total degree (float noise never moves)
LOUVAIN_GAIN_EPS = 1e-12
#: refinement: most rounds of moves and swaps over every level (each change lowers the cut)
MAX_REFINE_PASSES = 20
#: refinement stops when a round takes less than this fraction of the cut off it
REFINE_MIN_GAIN = 0.001
#: swaps scan the other broker's vertices: only on graphs (Louvain levels, or the keys
#: themselves) of at most this many vertices
MAX_SWAP_VERTICES = 2_000
#: seed of ROUND_ROBIN/LEAST_CONNECTIONS start positions, so their placements are repeatable
POLICY_SEED = 0
#: rows of each table shown in the HTML report (the Parquet tables have them all)
REPORT_ROWS = 20
#: characters of one snippet shown in the report (the whole snippet is in CONFIG_FILE)
REPORT_SNIPPET_CHARS = 20_000

#: --key -> the <key-type> whose values those are
KEY_TYPES = {"user": "USER_NAME", "client_id": "CLIENT_ID"}
FORMS = ("filter", "modulo")

#: relative tolerance of load comparisons (loads are byte counts; sums of floats drift)
_LOAD_EPS = 1e-9


class PlanError(ValueError):
    """An option the planner cannot use (the job turns it into a PipelineError)."""


# -- the key graph ---------------------------------------------------------------------------


def build_adjacency(pairs: Iterable[tuple[str, str, float]]) -> dict[str, dict[str, float]]:
    """The undirected key graph of producer -> consumer byte pairs.

    ``weight(a, b)`` is the bytes ``a`` sent to ``b`` plus those ``b`` sent to
    ``a``: either way they cross brokers when ``a`` and ``b`` are apart.  A
    key's traffic to itself never crosses, so it is no edge.
    """
    adjacency: dict[str, dict[str, float]] = defaultdict(dict)
    for producer, consumer, size in pairs:
        if producer == consumer or not size:
            continue
        adjacency[producer][consumer] = adjacency[producer].get(consumer, 0) + size
        adjacency[consumer][producer] = adjacency[consumer].get(producer, 0) + size
    return dict(adjacency)


def cross_bytes(adjacency: Mapping[str, Mapping[str, float]], placement: Mapping[str, object]) -> float:
    """Bytes between keys placed apart (each undirected edge once): the traffic that crosses brokers."""
    total = 0.0
    for a, neighbours in adjacency.items():
        where = placement.get(a)
        for b, weight in neighbours.items():
            if a < b and placement.get(b) != where:
                total += weight
    return total


def _index_graph(keys: Sequence[str], adjacency: Mapping[str, Mapping[str, float]]) -> list[dict[int, float]]:
    index = {key: i for i, key in enumerate(keys)}
    graph: list[dict[int, float]] = [{} for _ in keys]
    for a, neighbours in adjacency.items():
        i = index[a]
        for b, weight in neighbours.items():
            if b != a and weight:
                graph[i][index[b]] = float(weight)
    return graph


# -- communities (Louvain) -------------------------------------------------------------------


def _louvain_level(graph: list[dict[int, float]], self_loops: list[float]) -> tuple[list[int], bool]:
    """One Louvain local-moving phase: each vertex's community, and whether any vertex moved.

    Vertices are visited in index order and join the neighbouring community
    of the greatest modularity gain (ties: the current one, then the lowest
    community number), so the outcome is deterministic.
    """
    n = len(graph)
    degree = [sum(graph[i].values()) + 2 * self_loops[i] for i in range(n)]
    m2 = sum(degree)
    community = list(range(n))
    if m2 <= 0:
        return community, False
    total = degree[:]
    eps = m2 * LOUVAIN_GAIN_EPS
    moved_any = False
    for _ in range(LOUVAIN_MAX_SWEEPS):
        moved = 0
        for i in range(n):
            own = community[i]
            k_i = degree[i]
            links: dict[int, float] = defaultdict(float)
            for j, weight in graph[i].items():
                links[community[j]] += weight
            total[own] -= k_i
            best, best_gain = own, links.get(own, 0.0) - total[own] * k_i / m2
            for c in sorted(links):
                gain = links[c] - total[c] * k_i / m2
                if gain > best_gain + eps:
                    best, best_gain = c, gain
            total[best] += k_i
            if best != own:
                community[i] = best
                moved += 1
        if not moved:
            break
        moved_any = True
    return community, moved_any


def _louvain_levels(graph: list[dict[int, float]]) -> list[list[list[int]]]:
    """Louvain's hierarchy: per level, the groups of vertex indices, finest first, coarsest last.

    Each level aggregates the previous one's communities into single vertices
    (internal bytes become self-loops) and moves them again, until nothing
    moves.  Empty when no vertex ever moves (no edges, or nothing to gain).
    """
    n = len(graph)
    self_loops = [0.0] * n
    members: list[list[int]] = [[i] for i in range(n)]
    levels: list[list[list[int]]] = []
    for _ in range(LOUVAIN_MAX_LEVELS):
        community, moved = _louvain_level(graph, self_loops)
        if not moved:
            break
        renumber: dict[int, int] = {}
        for c in community:
            renumber.setdefault(c, len(renumber))
        size = len(renumber)
        new_members: list[list[int]] = [[] for _ in range(size)]
        new_graph: list[dict[int, float]] = [defaultdict(float) for _ in range(size)]
        new_self = [0.0] * size
        for i, c in enumerate(community):
            ci = renumber[c]
            new_members[ci].extend(members[i])
            new_self[ci] += self_loops[i]
            for j, weight in graph[i].items():
                cj = renumber[community[j]]
                if cj == ci:
                    new_self[ci] += weight / 2  # seen from both ends
                else:
                    new_graph[ci][cj] += weight
        members, graph, self_loops = new_members, [dict(g) for g in new_graph], new_self
        levels.append([sorted(group) for group in members])
    return levels


def communities(keys: Sequence[str], adjacency: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """The key graph's communities by Louvain modularity: lists of keys, each sorted.

    Modularity finds groups with much more traffic inside than between them
    (tenants, applications), even when light cross-group traffic connects the
    whole graph, which connected components would not split.  Keys without
    edges are communities of one.  Deterministic: vertices are processed in
    the sorted order of their keys.
    """
    keys = sorted(keys)
    levels = _louvain_levels(_index_graph(keys, adjacency))
    top = levels[-1] if levels else [[i] for i in range(len(keys))]
    groups = [sorted(keys[i] for i in group) for group in top]
    groups.sort(key=lambda g: g[0])
    return groups


# -- partition -------------------------------------------------------------------------------


def balance_cap(loads: Iterable[float], bins: int, balance: float) -> float:
    """The most load one broker may carry: ``balance`` times the mean over ``bins`` brokers."""
    return balance * sum(loads) / bins


class _Bins:
    """The brokers' loads and members during packing, and each key's links to each broker."""

    def __init__(self, loads: list[float], graph: list[dict[int, float]], bins: int):
        self.loads = loads
        self.graph = graph
        self.load = [0.0] * bins
        self.count = [0] * bins
        self.where = [-1] * len(loads)
        #: conn[v][b]: bytes between key v and the keys already on broker b
        self.conn: list[dict[int, float]] = [defaultdict(float) for _ in loads]

    def put(self, v: int, b: int) -> None:
        old = self.where[v]
        if old >= 0:
            self.load[old] -= self.loads[v]
            self.count[old] -= 1
        self.where[v] = b
        self.load[b] += self.loads[v]
        self.count[b] += 1
        for u, weight in self.graph[v].items():
            links = self.conn[u]
            if old >= 0:
                links[old] -= weight
            links[b] += weight

    def affinity(self, members: Iterable[int]) -> dict[int, float]:
        found: dict[int, float] = defaultdict(float)
        for v in members:
            for b, weight in self.conn[v].items():
                if weight:
                    found[b] += weight
        return found


def _fits(load: float, extra: float, limit: float) -> bool:
    return load + extra <= limit * (1 + _LOAD_EPS) + _LOAD_EPS


def _grow(state: _Bins, remaining: set[int], room: float, b: int) -> list[int]:
    """A piece of ``remaining`` that fits in ``room``, grown greedily by affinity.

    It starts from the key most attached to broker ``b`` (then the heaviest)
    that fits, and keeps adding the key with the most bytes to the piece so
    far (a max-heap of frontier keys) while one fits.
    """
    loads = state.loads
    seeds = [v for v in remaining if _fits(0.0, loads[v], room)]
    if not seeds:
        return []
    seed = min(seeds, key=lambda v: (-state.conn[v].get(b, 0.0), -loads[v], v))
    piece = [seed]
    taken = {seed}
    used = loads[seed]
    heap: list[tuple[float, int]] = []
    attached: dict[int, float] = defaultdict(float)

    def push(v: int) -> None:
        for u, weight in state.graph[v].items():
            if u in remaining and u not in taken:
                attached[u] += weight
                heapq.heappush(heap, (-attached[u], u))

    push(seed)
    while heap:
        weight, u = heapq.heappop(heap)
        if u in taken or -weight != attached[u]:
            continue  # already in, or a stale entry
        if not _fits(used, loads[u], room):
            continue  # room only shrinks: it never fits later either
        piece.append(u)
        taken.add(u)
        used += loads[u]
        push(u)
    return piece


def _pack(units: list[list[int]], state: _Bins, bins: int, cap: float, mean: float) -> None:
    """Place the communities largest-first; split those that fit nowhere."""
    loads = state.loads
    weight = [(sum(loads[v] for v in unit), unit) for unit in units]
    weight.sort(key=lambda item: (-item[0], -len(item[1]), item[1][0]))
    for unit_load, unit in weight:
        attached = state.affinity(unit)
        under_mean = [b for b in range(bins) if _fits(state.load[b], unit_load, mean)]
        if under_mean:
            best = min(under_mean, key=lambda b: (-attached.get(b, 0.0), state.load[b], state.count[b], b))
        else:
            under_cap = [b for b in range(bins) if _fits(state.load[b], unit_load, cap)]
            best = min(under_cap, key=lambda b: (state.load[b], state.count[b], b)) if under_cap else -1
        if best >= 0:
            for v in unit:
                state.put(v, best)
            continue
        remaining = set(unit)
        while remaining:
            b = min(range(bins), key=lambda i: (state.load[i], state.count[i], i))
            piece = _grow(state, remaining, cap - state.load[b], b)
            if not piece:  # no key of it fits anywhere: the balance is infeasible for it
                piece = [min(remaining, key=lambda v: (-loads[v], v))]
            for v in piece:
                state.put(v, b)
            remaining.difference_update(piece)


def _improve(
    graph: list[dict[int, float]], weights: list[float], where: list[int], bin_load: list[float], cap: float
) -> float:
    """One Kernighan-Lin/FM style pass over a graph's vertices; the bytes it took off the cut.

    ``where`` (each vertex's broker) and ``bin_load`` are updated in place.
    A *move* takes a vertex to the broker it has the most bytes with, when
    that beats its own and the broker stays under ``cap``.  An *eject* (on
    graphs of at most :data:`MAX_SWAP_VERTICES`, where a scan of the other
    broker is affordable) is for a vertex ``v`` whose move to ``b`` the cap
    blocks: it also moves one vertex of ``b`` to any other broker (``v``'s
    own: a KL swap; a third one: a short FM chain), the pair that lowers the
    cut most while every broker stays under ``cap`` (or no fuller than
    before).  Every change lowers the cut, so the passes end.
    """
    n = len(graph)
    conn: list[dict[int, float]] = [defaultdict(float) for _ in range(n)]
    for v in range(n):
        for u, weight in graph[v].items():
            conn[v][where[u]] += weight

    def move(v: int, b: int) -> None:
        a = where[v]
        where[v] = b
        bin_load[a] -= weights[v]
        bin_load[b] += weights[v]
        for u, weight in graph[v].items():
            conn[u][a] -= weight
            conn[u][b] += weight

    def gain(v: int, b: int) -> float:
        return conn[v].get(b, 0.0) - conn[v].get(where[v], 0.0)

    gained = 0.0
    blocked: list[tuple[int, int]] = []
    for v in range(n):
        a = where[v]
        best, best_gain = a, 0.0
        for b in sorted(conn[v]):
            g = gain(v, b)
            if b == a or g <= best_gain + _LOAD_EPS * (1 + best_gain):
                continue
            if _fits(bin_load[b], weights[v], cap):
                best, best_gain = b, g
            else:
                blocked.append((v, b))
        if best != a:
            move(v, best)
            gained += best_gain
    if n > MAX_SWAP_VERTICES:
        return gained
    bins = len(bin_load)
    for v, b in blocked:
        a = where[v]
        g_v = gain(v, b)
        if a == b or g_v <= _LOAD_EPS or _fits(bin_load[b], weights[v], cap):
            continue  # moved since, no longer worth it, or a plain move would do (next pass)
        best, best_gain = None, _LOAD_EPS * (1 + g_v)
        for x in range(n):
            if where[x] != b:
                continue
            w_vx = graph[v].get(x, 0.0)
            new_b = bin_load[b] - weights[x] + weights[v]
            if not (_fits(new_b, 0.0, cap) or new_b <= bin_load[b]):
                continue
            for c in range(bins):
                if c == b:
                    continue
                new_c = bin_load[c] + weights[x] - (weights[v] if c == a else 0.0)
                if not (_fits(new_c, 0.0, cap) or new_c <= bin_load[c]):
                    continue
                # x leaves b after v came: its links to b include v's
                g = g_v + conn[x].get(c, 0.0) - conn[x].get(b, 0.0) - w_vx - (w_vx if c == a else 0.0)
                if g > best_gain:
                    best, best_gain = (x, c), g
        if best is not None:
            move(v, b)
            move(*best)
            gained += best_gain
    return gained


def _improve_level(
    groups: list[list[int]], graph: list[dict[int, float]], loads: list[float], where: list[int],
    bin_load: list[float], cap: float,
) -> float:
    """:func:`_improve` on the graph of ``groups`` (each split by broker): whole groups move.

    Moving a Louvain group at once is what single keys cannot do: half a
    tenant on the wrong broker gains nothing key by key, everything as one.
    """
    pieces: list[list[int]] = []
    for group in groups:
        by_bin: dict[int, list[int]] = defaultdict(list)
        for v in group:
            by_bin[where[v]].append(v)
        pieces.extend(by_bin[b] for b in sorted(by_bin))
    piece_of = [0] * len(where)
    for p, piece in enumerate(pieces):
        for v in piece:
            piece_of[v] = p
    piece_graph: list[dict[int, float]] = [defaultdict(float) for _ in pieces]
    for v, neighbours in enumerate(graph):
        pv = piece_of[v]
        for u, weight in neighbours.items():
            pu = piece_of[u]
            if pu != pv:
                piece_graph[pv][pu] += weight
    piece_where = [where[piece[0]] for piece in pieces]
    before = piece_where[:]
    gained = _improve(
        [dict(g) for g in piece_graph], [sum(loads[v] for v in piece) for piece in pieces], piece_where, bin_load, cap
    )
    for p, piece in enumerate(pieces):
        if piece_where[p] != before[p]:
            for v in piece:
                where[v] = piece_where[p]
    return gained


def partition(
    loads: Mapping[str, float],
    adjacency: Mapping[str, Mapping[str, float]],
    bins: int,
    balance: float = DEFAULT_BALANCE,
) -> dict[str, int]:
    """Each key's broker number in ``range(bins)``: related keys together, loads balanced.

    ``loads``: key -> bytes it produced and consumed; ``adjacency``: the key
    graph (:func:`build_adjacency`).  No broker carries more than ``balance``
    times the mean load unless a single key alone is heavier than that.

    Multilevel: Louvain's top communities are packed largest-first (split by
    affinity when they fit no broker); then, coarse to fine, each Louvain
    level's groups and finally single keys are moved or swapped while that
    lowers the cut under the cap (:func:`_improve`), repeated while a round
    takes more than :data:`REFINE_MIN_GAIN` of the cut off it (at most
    :data:`MAX_REFINE_PASSES` rounds).  Deterministic.
    """
    if bins < 1:
        raise PlanError("the number of brokers must be at least 1")
    if balance < 1:
        raise PlanError(f"the balance tolerance must be at least 1.0 (the mean), not {balance}")
    keys = sorted(set(loads) | set(adjacency))
    if not keys:
        return {}
    key_loads = [float(loads.get(key, 0) or 0) for key in keys]
    graph = _index_graph(keys, adjacency)
    mean = sum(key_loads) / bins
    cap = balance * mean
    levels = _louvain_levels(graph)
    units = levels[-1] if levels else [[i] for i in range(len(keys))]
    state = _Bins(key_loads, graph, bins)
    _pack(units, state, bins, cap, mean)
    where, bin_load = state.where, state.load
    cut = sum(w for v, nb in enumerate(graph) for u, w in nb.items() if u > v and where[u] != where[v])
    for _ in range(MAX_REFINE_PASSES):
        gained = 0.0
        for groups in reversed(levels):
            gained += _improve_level(groups, graph, key_loads, where, bin_load, cap)
        gained += _improve(graph, key_loads, where, bin_load, cap)
        if gained <= REFINE_MIN_GAIN * cut:
            break
        cut -= gained
    return {key: where[i] for i, key in enumerate(keys)}


# -- policies and placements -----------------------------------------------------------------


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


def _loads_by(placement: Mapping[str, str], loads: Mapping[str, float], names: Iterable[str]) -> dict[str, float]:
    result = dict.fromkeys(names, 0.0)
    for key, where in placement.items():
        result[where] = result.get(where, 0.0) + float(loads.get(key, 0) or 0)
    return result


def _counts_by(placement: Mapping[str, str], names: Iterable[str]) -> dict[str, int]:
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
        loads_before=_loads_by(before, loads, names),
        loads_after=_loads_by(after, loads, names_after),
        keys_before=_counts_by(before, names),
        keys_after=_counts_by(after, names_after),
        cross_before=cross_bytes(adjacency, before),
        cross_after=cross_bytes(adjacency, after),
    )


# -- router configuration --------------------------------------------------------------------


def _trie_alternatives(keys: Iterable[str]) -> list[str]:
    """Alternatives matching exactly ``keys``, common prefixes factored out (re.escape'd).

    ``["ab", "ac", "b"]`` -> ``["a(?:b|c)", "b"]``.  Built without recursion
    (keys may be long).  The syntax is common to Python's re and Java's regex.
    """
    end = ""  # a child key no character can be: marks the end of a key
    root: dict = {}
    for key in keys:
        node = root
        for ch in key:
            node = node.setdefault(ch, {})
        node[end] = True
    order: list[dict] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(child for ch, child in node.items() if ch != end)
    done: dict[int, str] = {}
    for node in reversed(order[1:]):  # children before their parents; the root is below
        alternatives = [re.escape(ch) + done[id(child)] for ch, child in sorted(node.items()) if ch != end]
        if not alternatives:
            pattern = ""
        elif end in node:
            pattern = "(?:" + "|".join(alternatives) + ")?"
        elif len(alternatives) == 1:
            pattern = alternatives[0]
        else:
            pattern = "(?:" + "|".join(alternatives) + ")"
        done[id(node)] = pattern
    # the empty key, when it is one, is an empty alternative
    return ([""] if end in root else []) + [
        re.escape(ch) + done[id(child)] for ch, child in sorted(root.items()) if ch != end
    ]


def filter_regex(keys: Iterable[str]) -> str | None:
    """An anchored ``local-target-filter`` matching exactly ``keys`` (None for no keys).

    Keys are literal (re.escape'd); the router matches the whole key
    (``re.fullmatch``, Java's ``matches()``), the anchors say so to a reader.
    """
    keys = sorted(set(keys))
    if not keys:
        return None
    return "^(?:" + "|".join(_trie_alternatives(keys)) + ")$"


def catch_all_regex(other_keys: Iterable[str]) -> str:
    """A filter matching every key except ``other_keys`` (the catch-all broker's).

    A negative lookahead (Python and Java alike): keys no plan knows -- new
    users, or ones without traffic in the log -- stay on this broker instead
    of being refused by every broker.  (A key ending in a line terminator
    right after another broker's key is matched by neither; keys do not.)
    """
    others = sorted(set(other_keys))
    if not others:
        return "(?s)^.*$"
    return "(?s)^(?!(?:" + "|".join(_trie_alternatives(others)) + ")$).*$"


def modulo_filter_regex(shards: Iterable[str]) -> str | None:
    """``^(?:0|3|7)$``: the shard numbers (and ``NULL``) a broker keeps, in numeric order."""
    shards = set(shards)
    if not shards:
        return None
    ordered = ([NULL_KEY] if NULL_KEY in shards else []) + sorted(
        (s for s in shards if s != NULL_KEY), key=int
    )
    return "^(?:" + "|".join(ordered) + ")$"


def _comment(text: str) -> str:
    return "<!-- " + text.replace("--", "- -") + " -->"


def router_snippet(
    broker: str,
    key_type: str,
    local_filter: str | None,
    *,
    router_name: str = DEFAULT_ROUTER_NAME,
    modulo: int | None = None,
    comment: str | None = None,
) -> str:
    """The ``<connection-router>`` element of one broker's configuration.

    No pool: a key the local-target filter does not match is refused with
    "use another", and the client tries the next broker until its own answers
    (the Artemis "data gravity" pattern).  With ``modulo`` the router has a
    CONSISTENT_HASH_MODULO policy, so the filter sees shard numbers.
    """
    lines = [_comment(comment or f"{broker}: the connection router of this broker")]
    lines.append(f'<connection-router name="{xml_escape(router_name, {chr(34): "&quot;"})}">')
    lines.append(f"  <key-type>{key_type}</key-type>")
    if local_filter is None:
        lines.append("  " + _comment("no keys: every connection is refused (use another broker)"))
    else:
        lines.append(f"  <local-target-filter>{xml_escape(local_filter)}</local-target-filter>")
    if modulo is not None:
        lines.append('  <policy name="CONSISTENT_HASH_MODULO">')
        lines.append(f'    <property key="{MODULO}" value="{modulo}"/>')
        lines.append("  </policy>")
    lines.append("</connection-router>")
    return "\n".join(lines)


# -- the plan --------------------------------------------------------------------------------


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
    current_loads = _loads_by(current, loads, current_targets)
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

    loads_after = _loads_by(planned, loads, names)
    keys_after = _counts_by(planned, names)
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
    if heaviest > cap * (1 + _LOAD_EPS):
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
        loads_before=_loads_by(current, loads, all_names),
        loads_after=loads_after,
        keys_before=_counts_by(current, all_names),
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


# -- the job ---------------------------------------------------------------------------------

#: the event kinds the job reads
KINDS_READ = ("message.sent", "message.delivered", "connection.routed")
#: decisions of connection.routed that name the broker the connection went to
PLACED_DECISIONS = ("local", "forward", "redirect")
#: most distinct routing targets taken to the driver
MAX_TARGETS = 10_000
#: the summary lists each broker's filter when they add up to at most this many characters
SUMMARY_FILTER_CHARS = 4_096
#: the file (under out/) with every broker's <connection-router>
CONFIG_FILE = "gravity-routers.xml"


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


def _traffic(spark, df, events: str, key: str, out: str, shown):
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


def _placements(df, key: str, per_key):
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


def _write_report(path: str, events: str, plan: GravityPlan, keys: dict, pairs: list, observed_count: int, top: int):
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
            tables, keys, pair_rows, per_key = _traffic(spark, df, events, key, out, shown)
            shown.phase("finding where keys are routed now")
            observed, node_ids, seen_targets = _placements(df, key, per_key)
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
        report_path = _write_report(
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
