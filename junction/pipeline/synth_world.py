"""The synthetic log's world: nodes, users, tenants, addresses and queues, fixed by the seed.

Every worker builds the same :class:`World` from the same parameters (a
seeded ``random.Random``), so chunks generated in different processes agree
on it without sharing anything.  Users are active with a Zipf-like skew;
each tenant owns addresses (some topic-like, some grouped), each queue one
consuming user; a user's connections all reach the core CONSISTENT_HASH
picks for it (:func:`rendezvous`).
"""

from __future__ import annotations

import bisect
import json
import random

from junction.pipeline.synth_model import (
    CONNECTION_EVENTS_PER_CONNECTION,
    GROUPED_FRACTION,
    MESSAGES_PER_CONNECTION,
    REDELIVERY_P,
    TOPIC_FRACTION,
    TOPIC_SUBSCRIPTIONS,
    ZIPF_EXPONENT,
)
from junction.routing.policies import murmur3_32

__all__ = ["World", "pick", "rendezvous", "weighted"]

_WORDS = (
    "orders", "billing", "invoices", "payments", "shipments", "inventory", "alerts", "audit",
    "telemetry", "metrics", "clicks", "sessions", "profiles", "carts", "returns", "pricing",
    "quotes", "trades", "fills", "positions", "claims", "tickets", "emails", "sms", "pushes",
    "jobs", "tasks", "builds", "deploys", "logs", "events", "ledger",
)
_SUBSCRIPTIONS = ("audit", "archive", "search", "analytics", "billing", "notify")


class _Queue:
    __slots__ = ("name", "jname", "consumer", "core", "index")

    def __init__(self, name, consumer, core, index):
        self.name = name
        self.jname = json.dumps(name)
        self.consumer = consumer
        self.core = core
        self.index = index


class _Address:
    __slots__ = ("name", "jname", "tenant", "queues", "routing_type", "grouped", "weight")

    def __init__(self, name, tenant, routing_type, grouped, weight):
        self.name = name
        self.jname = json.dumps(name)
        self.tenant = tenant
        self.queues: list[_Queue] = []
        self.routing_type = routing_type
        self.grouped = grouped
        self.weight = weight


def _node_id(rng: random.Random) -> str:
    return "%08x-%04x-%04x-%04x-%012x" % (
        rng.getrandbits(32), rng.getrandbits(16), 0x4000 | rng.getrandbits(12),
        0x8000 | rng.getrandbits(14), rng.getrandbits(48),
    )


def rendezvous(key: str, node_ids: list[str]) -> int:
    """The index of the node CONSISTENT_HASH (MURMUR3) picks for ``key`` (highest score wins)."""
    data = key.encode("utf-8")
    best, best_score, best_id = 0, -1, ""
    for i, node_id in enumerate(node_ids):
        score = murmur3_32(data, murmur3_32(node_id.encode("utf-8")))
        if score > best_score or (score == best_score and node_id > best_id):
            best, best_score, best_id = i, score, node_id
    return best


def _cumulative(weights):
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


class World:
    """Everything fixed by the seed and the shape parameters."""

    def __init__(self, p: dict):
        rng = random.Random(f"world-{p['seed']}")
        self.cores = [f"core{i + 1}" for i in range(p["nodes"])]
        self.core_ids = [_node_id(rng) for _ in self.cores]
        self.gateway = "gateway"
        self.gateway_id = _node_id(rng)
        n_keys, n_tenants = p["keys"], p["tenants"]
        if n_keys < n_tenants:
            raise ValueError("keys must be at least tenants (every tenant needs a user)")
        numbers = rng.sample(range(1000, 1000 + 50 * n_keys), n_keys)
        self.users = [f"user{n}" for n in numbers]
        order = list(range(n_keys))
        rng.shuffle(order)  # activity rank independent of name and tenant
        self.user_weight = [0.0] * n_keys
        for rank, u in enumerate(order):
            self.user_weight[u] = 1.0 / (rank + 1) ** ZIPF_EXPONENT
        self.user_cum = _cumulative(self.user_weight)
        self.tenant_names = [f"tenant{t + 1:02d}" for t in range(n_tenants)]
        # tenant t owns users u with tenant_of[u] == t; a shuffled round robin keeps sizes even
        shuffled = list(range(n_keys))
        rng.shuffle(shuffled)
        self.tenant_of = [0] * n_keys
        self.tenant_users: list[list[int]] = [[] for _ in range(n_tenants)]
        for i, u in enumerate(shuffled):
            self.tenant_of[u] = i % n_tenants
            self.tenant_users[i % n_tenants].append(u)
        self.user_core = [rendezvous(name, self.core_ids) for name in self.users]
        self.user_json = [json.dumps(name) for name in self.users]
        # addresses: word.<number>, tenants mixed over the words
        self.addresses: list[_Address] = []
        self.tenant_addresses: list[list[_Address]] = [[] for _ in range(n_tenants)]
        used = set()
        queue_index = 0
        for t in range(n_tenants):
            for a in range(p["addresses_per_tenant"]):
                while True:
                    name = f"{rng.choice(_WORDS)}.{rng.randrange(100, 1000)}"
                    if name not in used:
                        used.add(name)
                        break
                topic = rng.random() < TOPIC_FRACTION
                grouped = rng.random() < GROUPED_FRACTION
                address = _Address(name, t, "MULTICAST" if topic else "ANYCAST", grouped, 1.0 / (a + 1))
                if topic:
                    subs = rng.sample(_SUBSCRIPTIONS, rng.randint(*TOPIC_SUBSCRIPTIONS))
                    qnames = [f"{name}.{s}" for s in subs]
                else:
                    qnames = [name]
                for qname in qnames:
                    if rng.random() < p["cross_tenant"] and n_tenants > 1:
                        other = rng.choice([x for x in range(n_tenants) if x != t])
                        consumer = rng.choice(self.tenant_users[other])
                    else:
                        consumer = rng.choice(self.tenant_users[t])
                    address.queues.append(_Queue(qname, consumer, self.user_core[consumer], queue_index))
                    queue_index += 1
                self.addresses.append(address)
                self.tenant_addresses[t].append(address)
        self.tenant_address_cum = [_cumulative(a.weight for a in addrs) for addrs in self.tenant_addresses]
        self.n_queues = queue_index
        self.grouped_addresses = [a for a in self.addresses if a.grouped]
        # a rough share of messages that are grouped (weights of grouped addresses)
        # expected shares per message (own tenant's addresses; cross-tenant noise ignored)
        user_total = self.user_cum[-1]
        grouped = queues = remote = 0.0
        for u, weight in enumerate(self.user_weight):
            addrs = self.tenant_addresses[self.tenant_of[u]]
            address_total = sum(a.weight for a in addrs)
            for a in addrs:
                share = weight / user_total * a.weight / address_total
                grouped += share * a.grouped
                queues += share * len(a.queues)
                remote += share * len({q.core for q in a.queues if q.core != self.user_core[u]})
        self.grouped_share = grouped
        # sent + forwards + (delivered + acknowledged) per queue + producer connections' lines,
        # and what faults add (a duplicate or dead-lettering: 2) or take (a loss: ~2, an expiry: 1)
        self.lines_per_message = (
            1.0 + remote + 2.0 * queues + CONNECTION_EVENTS_PER_CONNECTION / MESSAGES_PER_CONNECTION
            + REDELIVERY_P * queues
            + 2.0 * (p["duplicates"] + p["dead_lettered"]) - 2.0 * p["loss"] - p["expired"]
            - (1.0 + remote) * p["unexpected"]
        )

    def truth_tenants(self) -> dict:
        return {
            self.tenant_names[t]: {
                "keys": sorted(self.users[u] for u in self.tenant_users[t]),
                "addresses": sorted(a.name for a in self.tenant_addresses[t]),
                "queues": sorted(q.name for a in self.tenant_addresses[t] for q in a.queues),
            }
            for t in range(len(self.tenant_names))
        }


def pick(cum, r):
    """Index of a weighted choice: ``cum`` cumulative weights, ``r`` uniform in [0, cum[-1])."""
    i = bisect.bisect_right(cum, r)
    return i if i < len(cum) else len(cum) - 1


def weighted(rng, pairs):
    """One value of ``pairs`` (value, weight), drawn with ``rng`` in proportion to its weight."""
    r = rng.random() * sum(w for _, w in pairs)
    for value, w in pairs:
        r -= w
        if r < 0:
            return value
    return pairs[-1][0]

