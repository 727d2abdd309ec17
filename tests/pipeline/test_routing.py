"""The routing job on a small hand-written log whose every figure is known.

Gateway ``gw1`` (router ``r1``, key type USER_NAME) makes 20 decisions, one
every 6 s from T0: 8 forwarded to core1, 2 forwarded and 2 redirected to
core2, 4 local (gw1's own core), 4 refused (3 unavailable, 1 no-pool).
Decision times are 10, 20, ..., 200 µs, so percentile_approx (exact below its
accuracy) gives p50 = 100, p90 = 180, p99 = 200.  6 of the 20 are cache hits.
Gateway ``gw2`` (router ``r2``) makes 2 decisions with connection ids that
gw1 also uses, no decision time and no cache flag: its bytes must not mix
with gw1's, and it must not move the percentiles or the hit rate.
Then gw1 refuses a login (a refusal, reason ``unauthenticated``, no key, no
decision time) and serves a readiness probe locally; broker core ``core3``
logs a probe's connection and a client's: probes are counted apart and in
no client figure.
"""

from __future__ import annotations

import pytest

from junction.events.node import UNAUTHENTICATED
from junction.events.schema import Event, encode
from junction.pipeline import routing
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX

#: a whole minute (epoch ms), so one-minute buckets start at T0 and T0 + 60 s
T0 = 1_699_999_980_000.0

# (target, decision, reason, user, cache_hit) of gw1's decisions, in time order
GW1 = [
    ("core1", "forward", None, "alice", False),
    ("core1", "forward", None, "alice", True),
    ("core2", "redirect", None, "bob", False),
    ("local", "local", None, "carol", False),
    (None, "refused", "unavailable", "dave", False),
    ("core1", "forward", None, "alice", True),
    ("core2", "forward", None, "bob", True),
    ("core1", "forward", None, "alice", False),
    ("local", "local", None, "carol", False),
    (None, "refused", "no-pool", "erin", False),
    ("core1", "forward", None, "alice", True),
    ("core2", "redirect", None, "bob", False),
    ("core1", "forward", None, "alice", True),
    ("local", "local", None, "carol", False),
    (None, "refused", "unavailable", "dave", False),
    ("core1", "forward", None, "frank", False),
    ("core2", "forward", None, "bob", True),
    ("core1", "forward", None, "frank", False),
    ("local", "local", None, "carol", False),
    (None, "refused", "unavailable", "dave", False),
]


def _lines():
    lines = []
    for i, (target, decision, reason, user, hit) in enumerate(GW1):
        conn = f"c{i}"
        ts = T0 + i * 6000
        lines.append(Event("connection.routed", ts, "gw1", "id-gw1", {
            "conn": conn, "router": "r1", "key_type": "USER_NAME", "key": user, "transformed_key": user,
            "target": target, "target_node_id": None if target in (None, "local") else f"id-{target}",
            "decision": decision, "reason": reason, "cache_hit": hit, "decision_us": 10.0 * (i + 1),
            "user": user, "client_id": None,
        }))
        if decision != "refused":  # bytes: in = 100 x (i + 1), out = i + 1
            lines.append(Event("connection.closed", ts + 1000, "gw1", "id-gw1", {
                "conn": conn, "bytes_in": 100 * (i + 1), "bytes_out": i + 1, "duration_ms": 1000.0,
                "reason": "client",
            }))
    for i in range(2):  # gw2 reuses the connection ids c0 and c1
        lines.append(Event("connection.routed", T0 + 30_000 + i, "gw2", "id-gw2", {
            "conn": f"c{i}", "router": "r2", "key_type": "CLIENT_ID", "key": "app-9",
            "target": "core3", "target_node_id": "id-core3", "decision": "forward",
        }))
        lines.append(Event("connection.closed", T0 + 31_000 + i, "gw2", "id-gw2", {
            "conn": f"c{i}", "bytes_in": 7, "bytes_out": 5,
        }))
    return [encode(e) for e in lines]


def _login_and_probes():
    """gw1's refused login and local probe, and core3's probe and client connections."""
    probe = INTERNAL_CLIENT_ID_PREFIX + "pool-1"
    gw1 = [
        Event("connection.accepted", T0 + 115_000, "gw1", "id-gw1", {"conn": "c20", "protocol": "STOMP"}),
        Event("connection.routed", T0 + 115_001, "gw1", "id-gw1", {
            "conn": "c20", "router": "r1", "decision": "refused", "reason": UNAUTHENTICATED, "user": "mallory",
        }),
        Event("connection.closed", T0 + 115_002, "gw1", "id-gw1", {"conn": "c20", "bytes_in": 60, "bytes_out": 90}),
        Event("connection.routed", T0 + 116_000, "gw1", "id-gw1", {
            "conn": "p1", "router": "r1", "key_type": "USER_NAME", "key": "pool", "target": "local",
            "decision": "local", "reason": "internal", "decision_us": 9999.0, "cache_hit": False, "client_id": probe,
        }),
        Event("connection.closed", T0 + 116_001, "gw1", "id-gw1", {"conn": "p1", "bytes_in": 5000, "bytes_out": 5000}),
    ]
    core3 = []
    for conn, client_id in (("7", probe), ("8", "app-9")):
        core3.append(Event("connection.accepted", T0 + 30_500, "core3", "id-core3", {
            "conn": conn, "protocol": "AMQP", "client_id": client_id,
        }))
        core3.append(Event("connection.closed", T0 + 31_500, "core3", "id-core3", {"conn": conn}))
    return [encode(e) for e in gw1], [encode(e) for e in core3]


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory):
    events = tmp_path_factory.mktemp("routing-events")
    lines = _lines()
    # two nodes' files, as the writers leave them
    gw1, core3 = _login_and_probes()
    (events / "events-gw1-20231114T221300-0001.jsonl").write_text("\n".join(lines[:-4] + gw1) + "\n")
    (events / "events-gw2-20231114T221300-0001.jsonl").write_text("\n".join(lines[-4:]) + "\n")
    (events / "events-core3-20231114T221300-0001.jsonl").write_text("\n".join(core3) + "\n")
    out = tmp_path_factory.mktemp("routing-out")
    return routing.run(spark, str(events), str(out), bucket="1m", top=3), spark


def _rows(spark, path, *order):
    return [r.asDict() for r in spark.read.parquet(path).orderBy(*order).collect()]


def test_summary_headlines(result):
    res, _ = result
    s = res.summary
    assert res.exit_code == 0 and res.job == "routing"
    assert s["routed"] == 23 and s["closed"] == 20  # the probes' are not counted
    assert s["connections"] == {"client": 24, "probe": 2}
    assert s["bucket_s"] == 60.0
    assert s["decisions"] == {"local": 4, "forward": 12, "redirect": 2, "refused": 5}
    assert s["refusals"] == {"r1:unavailable": 3, "r1:no-pool": 1, "r1:unauthenticated": 1}
    assert s["cache_hit_rate"] == pytest.approx(6 / 20)
    assert s["decision_us"] == {"p50": 100.0, "p90": 180.0, "p99": 200.0, "max": 200.0}
    assert s["routers"]["r1"] == {"decisions": 21, "targets": 3, "skew": pytest.approx(1.5), "busiest": "core1"}
    assert s["routers"]["r2"] == {"decisions": 2, "targets": 1, "skew": pytest.approx(1.0), "busiest": "core3"}
    assert s["hot_keys"] == ["alice", "carol", "bob"]  # carol and bob tie: more bytes in first
    assert res.report.endswith("routing.html")
    with open(res.report, encoding="utf-8") as f:
        page = f.read()
    assert "data:image/png;base64," in page and "no-pool" in page


def test_targets_shares_and_bytes(result):
    res, spark = result
    rows = _rows(spark, res.tables["routing_targets"], "router", "target")
    got = {(r["router"], r["target"]): (r["connections"], r["share"], r["local"], r["forward"], r["redirect"],
                                        r["bytes_in"], r["bytes_out"]) for r in rows}
    core1 = [i for i, g in enumerate(GW1) if g[0] == "core1"]
    core2 = [i for i, g in enumerate(GW1) if g[0] == "core2"]
    local = [i for i, g in enumerate(GW1) if g[0] == "local"]
    assert got == {
        ("r1", "core1"): (8, 0.5, 0, 8, 0, sum(100 * (i + 1) for i in core1), sum(i + 1 for i in core1)),
        ("r1", "core2"): (4, 0.25, 0, 2, 2, sum(100 * (i + 1) for i in core2), sum(i + 1 for i in core2)),
        ("r1", "gw1"): (4, 0.25, 4, 0, 0, sum(100 * (i + 1) for i in local), sum(i + 1 for i in local)),
        ("r2", "core3"): (2, 1.0, 0, 2, 0, 14, 10),
    }
    assert {r["router"]: r["router_skew"] for r in rows} == {"r1": pytest.approx(1.5), "r2": pytest.approx(1.0)}


def test_connections_over_time(result):
    res, spark = result
    rows = _rows(spark, res.tables["routing_by_target_time"], "router", "bucket_start", "target")
    got = [(r["router"], r["bucket_start"].timestamp() * 1000 - T0, r["target"], r["connections"]) for r in rows]
    # events 0-9 fall in the first minute, 10-19 in the second
    assert got == [
        ("r1", 0.0, "core1", 4), ("r1", 0.0, "core2", 2), ("r1", 0.0, "gw1", 2),
        ("r1", 60_000.0, "core1", 4), ("r1", 60_000.0, "core2", 2), ("r1", 60_000.0, "gw1", 2),
        ("r2", 0.0, "core3", 2),
    ]


def test_refusals_and_decision_time(result):
    res, spark = result
    refusals = _rows(spark, res.tables["refusals"], "router", "reason")
    assert [(r["router"], r["reason"], r["refusals"]) for r in refusals] == [
        ("r1", "no-pool", 1), ("r1", "unauthenticated", 1), ("r1", "unavailable", 3),
    ]
    times = {r["router"]: r for r in _rows(spark, res.tables["decision_time"], "router")}
    assert set(times) == {"(all)", "r1", "r2"}
    r1 = times["r1"]
    assert (r1["decisions"], r1["local"], r1["forward"], r1["redirect"], r1["refused"]) == (21, 4, 10, 2, 5)
    assert (r1["p50_us"], r1["p90_us"], r1["p99_us"], r1["max_us"]) == (100.0, 180.0, 200.0, 200.0)
    assert r1["mean_us"] == pytest.approx(105.0)
    assert r1["cache_hits"] == 6 and r1["cache_hit_rate"] == pytest.approx(0.3)
    r2 = times["r2"]
    assert (r2["decisions"], r2["forward"], r2["p50_us"], r2["cache_hit_rate"]) == (2, 2, None, None)
    assert times["(all)"]["decisions"] == 23 and times["(all)"]["p99_us"] == 200.0
    nodes = {(r["node"], r["connection"]): (r["accepted"], r["routed"], r["closed"])
             for r in _rows(spark, res.tables["connections"], "node", "connection")}
    assert nodes == {
        ("core3", "client"): (1, 0, 1), ("core3", "probe"): (1, 0, 1), ("gw1", "client"): (1, 21, 17),
        ("gw1", "probe"): (0, 1, 1), ("gw2", "client"): (0, 2, 2),
    }


def test_hot_keys_with_bytes(result):
    res, spark = result
    rows = _rows(spark, res.tables["hot_keys"], "key")
    got = {r["key"]: (r["router"], r["connections"], r["refused"], r["targets"], r["bytes_in"], r["bytes_out"])
           for r in rows}
    alice = [i for i, g in enumerate(GW1) if g[3] == "alice"]
    bob = [i for i, g in enumerate(GW1) if g[3] == "bob"]
    carol = [i for i, g in enumerate(GW1) if g[3] == "carol"]
    assert got == {  # top 3: alice 6, bob 4, carol 4 (dave's 3 refusals and gw2's app-9 (2) are out)
        "alice": ("r1", 6, 0, 1, sum(100 * (i + 1) for i in alice), sum(i + 1 for i in alice)),
        "bob": ("r1", 4, 0, 1, sum(100 * (i + 1) for i in bob), sum(i + 1 for i in bob)),
        "carol": ("r1", 4, 0, 1, sum(100 * (i + 1) for i in carol), sum(i + 1 for i in carol)),
    }


def test_bucket_choice_and_parsing():
    assert routing.choose_bucket(114) == 2.0
    assert routing.choose_bucket(3600) == 60.0
    assert routing.choose_bucket(0) == 1.0
    assert routing.parse_bucket("5m") == 300.0 and routing.parse_bucket("30") == 30.0
    assert routing.parse_bucket("1h") == 3600.0
    with pytest.raises(ValueError):
        routing.parse_bucket("soon")


def test_no_routed_events_is_a_pipeline_error(spark, tmp_path):
    from junction.pipeline.common import PipelineError

    (tmp_path / "events-n-1.jsonl").write_text(
        encode(Event("connection.closed", T0, "n", "id-n", {"conn": "c1", "bytes_in": 1, "bytes_out": 1})) + "\n"
    )
    with pytest.raises(PipelineError, match="no connection.routed events in .*are connection events enabled"):
        routing.run(spark, str(tmp_path), str(tmp_path / "out"))
