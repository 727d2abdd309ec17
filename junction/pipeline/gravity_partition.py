"""The data-gravity planner's partition: keys onto brokers, related keys together, loads balanced.

Louvain's communities (:mod:`junction.pipeline.gravity_graph`) are packed
largest-first onto the brokers (each to the broker it is most attached to
among those it fits in without passing the mean load, else the least loaded
one it fits in under the balance cap); a community too big for any broker is
split greedily by affinity; a Kernighan-Lin/FM style refinement then moves
and swaps groups and single keys while that lowers the cut and keeps every
broker under ``balance x mean``.  Deterministic: sorted order, explicit ties.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping

from junction.pipeline.gravity_graph import index_graph, louvain_levels
from junction.pipeline.gravity_limits import (
    DEFAULT_BALANCE,
    LOAD_EPS,
    MAX_REFINE_PASSES,
    MAX_SWAP_VERTICES,
    REFINE_MIN_GAIN,
    PlanError,
)

__all__ = ["balance_cap", "partition"]


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
    return load + extra <= limit * (1 + LOAD_EPS) + LOAD_EPS


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
            if b == a or g <= best_gain + LOAD_EPS * (1 + best_gain):
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
        if a == b or g_v <= LOAD_EPS or _fits(bin_load[b], weights[v], cap):
            continue  # moved since, no longer worth it, or a plain move would do (next pass)
        best, best_gain = None, LOAD_EPS * (1 + g_v)
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
    graph = index_graph(keys, adjacency)
    mean = sum(key_loads) / bins
    cap = balance * mean
    levels = louvain_levels(graph)
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

