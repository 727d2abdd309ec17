"""The data-gravity planner's key graph, and its communities by Louvain modularity.

Keys are the vertices; an edge's weight is the bytes between two keys (both
directions), which cross brokers when the two live apart.  Pure Python, no
Spark; every step iterates in sorted order, so the same input gives the
same communities.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from junction.pipeline.gravity_limits import (
    LOUVAIN_GAIN_EPS,
    LOUVAIN_MAX_LEVELS,
    LOUVAIN_MAX_SWEEPS,
)

__all__ = ["build_adjacency", "communities", "cross_bytes", "index_graph", "louvain_levels"]


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


def index_graph(keys: Sequence[str], adjacency: Mapping[str, Mapping[str, float]]) -> list[dict[int, float]]:
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


def louvain_levels(graph: list[dict[int, float]]) -> list[list[list[int]]]:
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
    levels = louvain_levels(index_graph(keys, adjacency))
    top = levels[-1] if levels else [[i] for i in range(len(keys))]
    groups = [sorted(keys[i] for i in group) for group in top]
    groups.sort(key=lambda g: g[0])
    return groups

