"""The data-gravity planner: the pure partitioner and config generator, then one Spark run.

The pure tests need no Spark: planted tenants are recovered exactly, the
modulo form uses the gateway's own shard numbers, the what-if numbers are
worked out by hand, and every generated local-target-filter matches exactly
its broker's keys (``re.fullmatch``, as the router matches).
"""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from junction.events.schema import Event, encode
from junction.pipeline import gravity
from junction.pipeline.gravity_graph import build_adjacency, communities, cross_bytes
from junction.pipeline.gravity_limits import PlanError
from junction.pipeline.gravity_partition import partition
from junction.pipeline.gravity_placement import (
    TargetSpec,
    make_policy,
    policy_placement,
    shard_of,
    whatif,
)
from junction.pipeline.gravity_plan import plan_gravity
from junction.pipeline.gravity_routers import catch_all_regex, filter_regex
from junction.routing.policies import ConsistentHashPolicy, fnv1a_32
from junction.routing.targets import Target

#: tenant sizes that three brokers can hold one whole tenant pair each: 20+5, 15+10, 12+13
TENANT_SIZES = (20, 5, 15, 10, 12, 13)


def _loads(pairs):
    loads: dict[str, int] = {}
    for p, c, size in pairs:
        loads[p] = loads.get(p, 0) + size
        loads[c] = loads.get(c, 0) + size
    return loads


def _planted(seed=11):
    """6 tenants: each key sends heavily to 3 tenant-mates; 30 light pairs across the whole graph."""
    rng = random.Random(seed)
    tenants = [[f"t{t}-app{i:02d}" for i in range(n)] for t, n in enumerate(TENANT_SIZES)]
    pairs = []
    for keys in tenants:
        for a in keys:
            for b in rng.sample([k for k in keys if k != a], 3):
                pairs.append((a, b, rng.randint(500, 1500)))
    everyone = [k for keys in tenants for k in keys]
    noise = [(rng.choice(everyone), rng.choice(everyone), rng.randint(1, 20)) for _ in range(30)]
    return tenants, pairs, noise


def test_planted_tenants_are_recovered():
    tenants, pairs, noise = _planted()
    loads = _loads(pairs + noise)
    adjacency = build_adjacency(pairs + noise)
    assert communities(sorted(loads), adjacency) == sorted(sorted(t) for t in tenants)

    plan = plan_gravity(loads, pairs + noise, brokers=3)
    assert plan.brokers == ["broker1", "broker2", "broker3"]
    home = {}
    for t, keys in enumerate(tenants):
        assert len({plan.planned[k] for k in keys}) == 1, f"tenant {t} split"
        home[t] = plan.planned[keys[0]]
    tenant_of = {k: t for t, keys in enumerate(tenants) for k in keys}
    # the only traffic left crossing brokers is the noise between tenants now apart
    assert plan.cross_after == sum(
        size for p, c, size in noise if home[tenant_of[p]] != home[tenant_of[c]]
    )
    total = sum(loads.values())
    assert plan.cap == pytest.approx(1.1 * total / 3)
    assert max(plan.loads_after.values()) <= plan.cap
    assert sum(plan.loads_after.values()) == total

    # "now" is CONSISTENT_HASH over broker1..3 (no connection.routed): the plan cuts far less
    hashed = policy_placement(loads, [TargetSpec(f"broker{i}") for i in (1, 2, 3)], make_policy("CONSISTENT_HASH"))
    assert plan.current == hashed and set(plan.current_source.values()) == {"policy"}
    assert plan.cross_before == cross_bytes(adjacency, hashed)
    assert plan.cross_after < plan.cross_before / 10
    assert plan.keys_moved == sum(1 for k in loads if hashed[k] != plan.planned[k])

    # deterministic: the same input, the same plan
    again = plan_gravity(dict(reversed(list(loads.items()))), list(reversed(pairs + noise)), brokers=3)
    assert again.planned == plan.planned and again.filters == plan.filters


def test_balance_cap_splits_a_tenant_too_big_for_one_broker():
    # a ring of 4 keys carries 12/13 of the load: over 2 brokers at 1.1 (cap 1430) it must be split,
    # in two adjacent halves of 1200 (one with b1 and b2, 200: 1400)
    pairs = [("a1", "a2", 300), ("a2", "a3", 300), ("a3", "a4", 300), ("a4", "a1", 300), ("b1", "b2", 100)]
    loads = _loads(pairs)
    bins = partition(loads, build_adjacency(pairs), 2, balance=1.1)
    by_bin = [sum(loads[k] for k, b in bins.items() if b == i) for i in (0, 1)]
    assert max(by_bin) <= 1.1 * sum(loads.values()) / 2
    assert {bins["b1"]} == {bins["b2"]}  # the small tenant stays whole
    # a ring of 4 cut in two halves: 2 edges of 300 cross
    assert cross_bytes(build_adjacency(pairs), bins) == 600


def test_infeasible_balance_is_noted():
    pairs = [("big", "big", 1000), ("y", "z", 10)]  # big: 2000 of 2020, cap 1.1 x 1010
    plan = plan_gravity(_loads(pairs), pairs, brokers=2)
    assert any("no placement can meet --balance" in note for note in plan.notes)


def test_modulo_form_uses_the_gateways_shards():
    assert shard_of("a", 8) == "4"  # fnv1a_32("a") = -468965076 -> 0x640c292c % 8
    assert shard_of("NULL", 8) == "NULL"
    keys = [f"k{i}" for i in range(8)]
    assert [shard_of(k, 4) for k in keys] == ["2", "1", "0", "3", "2", "1", "0", "3"]
    assert all(shard_of(k, 4) == str((fnv1a_32(k) & 0x7FFFFFFF) % 4) for k in keys)
    # shards 0 and 1 talk (k2-k1, k6-k5), shards 2 and 3 talk (k0-k3, k4-k7); one light 0-2 pair
    pairs = [("k2", "k1", 100), ("k6", "k5", 100), ("k0", "k3", 100), ("k4", "k7", 90), ("k2", "k0", 1)]
    plan = plan_gravity(_loads(pairs), pairs, brokers=2, form="modulo", modulo=4)
    assert plan.modulo == 4 and plan.key_shard == {k: shard_of(k, 4) for k in keys}
    assert sorted(plan.filters.values()) == ["^(?:0|1)$", "^(?:NULL|2|3)$"]  # NULL: the lighter broker
    assert plan.cross_after == 1
    for k in keys:
        mine = plan.filters[plan.planned[k]]
        assert re.fullmatch(mine, plan.key_shard[k])
        assert plan.shard_broker[plan.key_shard[k]] == plan.planned[k]
    assert sorted(plan.shard_broker) == ["0", "1", "2", "3"]
    for name, snippet in plan.snippets.items():
        router = ET.fromstring(snippet.split("\n", 1)[1])  # after the comment line
        assert router.find("local-target-filter").text == plan.filters[name]
        assert router.find("policy").get("name") == "CONSISTENT_HASH_MODULO"
        assert router.find("policy/property").attrib == {"key": "MODULO", "value": "4"}
        assert router.find("key-type").text == "USER_NAME"


def test_filters_match_exactly_their_keys():
    tricky = ["alice", "alice2", "al", "a.b", "x+y", "(q)", "back\\slash", "tenant|one", "ünï", "a*", "$HOME",
              "[r]", "dash-ed", "sp ace", "NULL"]
    rng = random.Random(3)
    pairs = [(rng.choice(tricky), rng.choice(tricky), rng.randint(1, 100)) for _ in range(60)]
    loads = _loads(pairs)
    plan = plan_gravity(loads, pairs, brokers=3, key="client_id")
    assert plan.catch_all in plan.brokers
    strangers = ["alic", "alice3", "a", "aXb", "xxy", "q", "", "tenant", "one", "a.b.", "ALICE"]
    for key in loads:
        matching = [b for b in plan.brokers if re.fullmatch(plan.filters[b], key)]
        assert matching == [plan.planned[key]], key
    for key in strangers:  # unknown keys: only the catch-all broker takes them
        assert [b for b in plan.brokers if re.fullmatch(plan.filters[b], key)] == [plan.catch_all], key

    plain = plan_gravity(loads, pairs, brokers=3, key="client_id", catch_all=False)
    for key in loads:
        assert [b for b in plain.brokers if plain.filters[b] and re.fullmatch(plain.filters[b], key)] == [
            plain.planned[key]
        ]
    for key in strangers:
        assert not any(f and re.fullmatch(f, key) for f in plain.filters.values())
    for name, snippet in plain.snippets.items():
        router = ET.fromstring(snippet.split("\n", 1)[1])
        assert router.get("name") == "gravity" and router.find("key-type").text == "CLIENT_ID"
        assert router.find("local-target-filter").text == plain.filters[name]
        assert router.find("policy") is None and router.find("pool") is None


def test_filter_regex_shapes():
    assert filter_regex(["bob", "alice"]) == "^(?:alice|bob)$"
    assert filter_regex(["ab", "ac", "a"]) == "^(?:a(?:b|c)?)$"
    assert filter_regex(["", "x"]) == "^(?:|x)$"
    assert filter_regex([]) is None
    assert catch_all_regex(["a.b"]) == "(?s)^(?!(?:a\\.b)$).*$"
    assert re.fullmatch(catch_all_regex([]), "anything")


def test_whatif_by_hand():
    # FIRST_ELEMENT: every key on the first target; remove it and every key moves to the next
    pairs = [("a", "b", 5), ("b", "c", 7)]
    loads = {"a": 10, "b": 20, "c": 30}
    w = whatif(loads, build_adjacency(pairs), [TargetSpec("t1"), TargetSpec("t2")], "FIRST_ELEMENT",
               remove=["t1"], add=["t3"])
    assert (w.keys_moved, w.keys_moved_pct) == (3, 100.0)
    assert w.targets_after == ["t2", "t3"]
    assert w.loads_before == {"t1": 60.0, "t2": 0.0} and w.loads_after == {"t2": 60.0, "t3": 0.0}
    assert w.keys_before == {"t1": 3, "t2": 0} and w.keys_after == {"t2": 3, "t3": 0}
    assert (w.cross_before, w.cross_after) == (0.0, 0.0)

    # CONSISTENT_HASH (rendezvous): removing t2 moves exactly t2's keys; adding t4 only keys t4 wins
    keys = {f"user{i}": 1 for i in range(300)}
    targets = [TargetSpec(n, f"node-{n}") for n in ("t1", "t2", "t3")]
    removed = whatif(keys, {}, targets, remove=["t2"])
    on_t2 = {k for k, t in removed.placement_before.items() if t == "t2"}
    assert removed.keys_moved == len(on_t2) == removed.keys_before["t2"]
    assert all(removed.placement_after[k] == t for k, t in removed.placement_before.items() if t != "t2")
    added = whatif(keys, {}, targets, add=["t4"])
    assert added.keys_moved == added.keys_after["t4"]
    assert added.keys_moved_pct == pytest.approx(100 * added.keys_after["t4"] / 300)
    assert all(added.placement_after[k] in (t, "t4") for k, t in added.placement_before.items())

    with pytest.raises(PlanError, match="not one of the targets"):
        whatif(loads, {}, [TargetSpec("t1")], remove=["t9"])


def test_policy_placement_is_the_gateways():
    specs = [TargetSpec("core1", "id-1"), TargetSpec("core2", "id-2"), TargetSpec(name="core3")]
    real = [Target(connector=SimpleNamespace(name=s.name), node_id=s.node_id, ready=True) for s in specs]
    keys = [f"k{i}" for i in range(50)]
    policy = ConsistentHashPolicy()
    assert policy_placement(keys, specs, make_policy("CONSISTENT_HASH")) == {
        k: policy.select(real, k).name for k in keys
    }
    # CONSISTENT_HASH_MODULO selects nothing itself: shard s lives on targets[s % n]
    modulo = policy_placement(keys, specs, make_policy("CONSISTENT_HASH_MODULO", {"MODULO": "6"}))
    assert modulo == {k: specs[int(shard_of(k, 6)) % 3].name for k in keys}
    with pytest.raises(PlanError, match="unknown connection-router policy"):
        make_policy("NO_SUCH_POLICY")


# -- one Spark run ------------------------------------------------------------------------------

T0 = 1_700_000_000_000.0


def _event_lines():
    """Tenant A = a1, a2; tenant B = b1, b2; routed so that each tenant is split over core1/core2."""
    events = []

    def add(kind, node, i, **fields):
        events.append(Event(kind, T0 + i, node, f"id-{node}", fields))

    def routed(i, user, target, decision="forward"):
        add("connection.routed", "gw", i, conn=f"c{i}", router="r", key_type="USER_NAME", key=user,
            target=target, target_node_id=None if target is None else f"id-{target}", decision=decision,
            user=user)

    routed(1, "a1", "core2")  # a1 later moves to core1: the last routing counts
    routed(2, "a1", "core1")
    routed(3, "a2", "core2")
    routed(4, "b1", "core1")
    routed(5, "b2", "core2")
    routed(6, "b2", None, "refused")  # no target: ignored
    routed(7, "zed", "core3")  # a target without traffic: still a target

    def sent(i, mid, user, address, size, node="core1"):
        add("message.sent", node, i, message_id=mid, address=address, queues=[address], size=size, user=user)

    def delivered(i, mid, user, address, count=1, node="core1"):
        add("message.delivered", node, i, message_id=mid, address=address, queue=address, delivery_count=count,
            user=user)

    sent(10, "n1/1", "a1", "A.q", 100)
    delivered(11, "n1/1", "a2", "A.q", node="core2")
    delivered(12, "n1/1", "a2", "A.q", count=2, node="core2")  # a redelivery: not counted
    sent(13, "n2/1", "a2", "A.r", 300, node="core2")
    delivered(14, "n2/1", "a1", "A.r", node="core2")
    sent(15, "n1/2", "b1", "B.q", 200)
    delivered(16, "n1/2", "b2", "B.q")
    sent(17, "n2/2", "b2", "B.r", 200, node="core2")
    delivered(18, "n2/2", "b1", "B.r", node="core2")
    sent(19, "n1/3", "a1", "shared", 10)
    delivered(20, "n1/3", "b1", "shared")
    sent(21, "n1/4", "a1", "A.q", 50)  # never delivered: produced bytes only
    delivered(22, "n9/1", "a2", "A.q")  # its message.sent is not in the log: no size, left out
    return [encode(e) for e in events]


def test_spark_run(spark, tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    lines = _event_lines()
    (events / "events-gw-20231114T221320-0001.jsonl").write_text("\n".join(lines[:7]) + "\n")
    (events / "events-core1-20231114T221320-0001.jsonl").write_text("\n".join(lines[7:]) + "\n")
    out = tmp_path / "out"
    res = gravity.run(spark, str(events), str(out), brokers=2, add_target=["core4"])
    s = res.summary
    assert res.exit_code == 0 and res.job == "gravity"
    # loads: a1 = 100+10+50 produced + 300 consumed; a2 = 300 + 100; b1 = 200 + 200+10; b2 = 200 + 200
    assert (s["keys"], s["pairs"], s["bytes"]) == (4, 5, 810.0)
    assert s["placement_routed"] == 4 and s["placement_policy"] == 0
    assert s["brokers"] == ["core1", "core2"]  # the two busiest of the three targets seen
    assert s["cross_before_bytes"] == 800.0  # a1|a2 and b1|b2 apart; a1-b1 together on core1
    assert s["cross_after_bytes"] == 10.0  # only the a1 -> b1 message crosses
    assert s["cross_after_pct"] == round(100 * 10 / 810, 3)
    assert s["keys_moved"] == 2  # tenant A stays with a1 on core1 (most bytes), so a2 and b1 move
    assert s["load_after"] == {"core1": 860.0, "core2": 810.0}
    assert s["catch_all"] == "core2"
    assert s["filters"] == {"core1": "^(?:a(?:1|2))$", "core2": "(?s)^(?!(?:a(?:1|2))$).*$"}
    assert s["whatif"]["targets_after"] == ["core1", "core2", "core3", "core4"]

    def rows(name, *order):
        return [r.asDict() for r in spark.read.parquet(res.tables[name]).orderBy(*order).collect()]

    assert [(r["producer"], r["consumer"], r["messages"], r["bytes"]) for r in rows("gravity_pairs", "producer", "consumer")] == [
        ("a1", "a2", 1, 100), ("a1", "b1", 1, 10), ("a2", "a1", 1, 300), ("b1", "b2", 1, 200), ("b2", "b1", 1, 200),
    ]
    key_address = {(r["key"], r["address"]): (r["produced_messages"], r["produced_bytes"], r["consumed_messages"],
                                               r["consumed_bytes"]) for r in rows("gravity_key_address", "key")}
    assert key_address == {
        ("a1", "A.q"): (2, 150, 0, 0), ("a1", "shared"): (1, 10, 0, 0), ("a1", "A.r"): (0, 0, 1, 300),
        ("a2", "A.q"): (0, 0, 1, 100), ("a2", "A.r"): (1, 300, 0, 0),
        ("b1", "B.q"): (1, 200, 0, 0), ("b1", "B.r"): (0, 0, 1, 200), ("b1", "shared"): (0, 0, 1, 10),
        ("b2", "B.q"): (0, 0, 1, 200), ("b2", "B.r"): (1, 200, 0, 0),
    }
    plan = {r["key"]: (r["load"], r["current_broker"], r["planned_broker"], r["moved"]) for r in rows("gravity_plan", "key")}
    assert plan == {
        "a1": (460.0, "core1", "core1", False), "a2": (400.0, "core2", "core1", True),
        "b1": (410.0, "core1", "core2", True), "b2": (400.0, "core2", "core2", False),
    }
    whatif_rows = rows("gravity_whatif", "target")
    assert [r["target"] for r in whatif_rows] == ["core1", "core2", "core3", "core4"]
    assert sum(r["keys_after"] for r in whatif_rows) == 4 and sum(r["load_after"] for r in whatif_rows) == 1670.0
    assert s["whatif"]["keys_moved"] == sum(1 for r in rows("gravity_plan", "key") if r["whatif_target"] == "core4")
    with open(s["router_config"], encoding="utf-8") as f:
        assert "<local-target-filter>^(?:a(?:1|2))$</local-target-filter>" in f.read()
    with open(res.report, encoding="utf-8") as f:
        page = f.read()
    assert "data:image/png;base64," in page and "&lt;connection-router" in page
