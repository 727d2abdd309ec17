"""The delivery audit: a hand-written log with an exact answer for every category, and a synth log
where it must find exactly what truth.json planted.

Both logs go through ONE audit run (a Spark run costs seconds, whatever its size): the hand log's
message ids start with "a/" or "z/", the synth log's with a node id, and the hand log is dated
2024, the synth log 2025, so each test looks at its own log's rows.
"""

from __future__ import annotations

import os

import pytest

from junction.events.schema import Event, encode
from junction.pipeline import audit
from junction.pipeline.synth import generate

A, B = "node-a", "node-b"  # node ids; the nodes are called core-a and core-b
#: the hand log's time 0: 2024-06-01T00:00:00Z, in milliseconds (its times are offsets from it)
T0 = 1_717_200_000_000


def _ev(kind, ts, node_id, **fields):
    return encode(Event(kind, float(T0 + ts), node_id.replace("node", "core"), node_id, fields))


def sent(mid, ts, queues, address="a1", node=A, durable=True, **extra):
    return _ev("message.sent", ts, node, message_id=mid, address=address, queues=queues, size=100,
               durable=durable, user="alice", **extra)


def delivered(mid, ts, queue, count=1, node=A, address="a1"):
    return _ev("message.delivered", ts, node, message_id=mid, address=address, queue=queue, delivery_count=count,
               consumer="c1", conn="9", user="bob")


def acked(mid, ts, queue, node=A, address="a1"):
    return _ev("message.acknowledged", ts, node, message_id=mid, address=address, queue=queue, consumer="c1",
               conn="9", user="bob")


def hand_log():
    """Every category once or twice, each with a known answer (ts in milliseconds)."""
    a = [
        # m1: plain, delivered and acknowledged: e2e 10 ms, ack 20 ms
        sent("a/1", 1000, ["q1"]), delivered("a/1", 1010, "q1"), acked("a/1", 1020, "q1"),
        # m2: redelivered, acknowledged once: NOT a duplicate (e2e 10, ack 60)
        sent("a/2", 1100, ["q1"]), delivered("a/2", 1110, "q1"), delivered("a/2", 1150, "q1", 2),
        acked("a/2", 1160, "q1"),
        # m3: a topic message, one of its three subscriptions never acknowledges it: lost
        sent("a/3", 1200, ["t.s1", "t.s2", "t.s3"], address="t"),
        *[delivered("a/3", 1210, q, address="t") for q in ("t.s1", "t.s2", "t.s3")],
        acked("a/3", 1220, "t.s1", address="t"), acked("a/3", 1230, "t.s2", address="t"),
        # m4: expired, never delivered: not lost
        sent("a/4", 1300, ["q2"], address="a2"),
        _ev("message.expired", 61300, A, message_id="a/4", address="a2", queue="q2"),
        # m5: acknowledged twice on q1: duplicated
        sent("a/5", 1400, ["q1"]), delivered("a/5", 1410, "q1"), acked("a/5", 1420, "q1"),
        delivered("a/5", 1500, "q1", 2), acked("a/5", 1510, "q1"),
        # m7: forwarded to node-b, acknowledged there
        sent("a/7", 1700, [], address="a3"), _ev("message.forwarded", 1701, A, message_id="a/7", to_node=B),
        # m8: forwarded, never acknowledged anywhere: lost
        sent("a/8", 1800, [], address="a3"), _ev("message.forwarded", 1801, A, message_id="a/8", to_node=B),
        # m9: dead-lettered after three deliveries: not lost
        sent("a/9", 1900, ["q2"], address="a2"),
        *[delivered("a/9", 1900 + 10 * n, "q2", n, address="a2") for n in (1, 2, 3)],
        _ev("message.dead_lettered", 1940, A, message_id="a/9", address="a2", queue="q2", reason="max"),
        # m10: redistributed to node-b, acknowledged there: not lost
        sent("a/10", 2000, ["q1"]),
        _ev("message.redistributed", 2005, A, message_id="a/10", address="a1", queue="q1", to_node=B),
        # group g1 (group_seq) on qg: a/12 (seq 2) is delivered before a/11 (seq 1): a/11 out of order
        sent("a/11", 3000, ["qg"], address="g", group_id="g1", group_seq=1),
        sent("a/12", 3010, ["qg"], address="g", group_id="g1", group_seq=2),
        sent("a/13", 3020, ["qg"], address="g", group_id="g1", group_seq=3),
        delivered("a/12", 3100, "qg", address="g"), delivered("a/11", 3110, "qg", address="g"),
        delivered("a/13", 3120, "qg", address="g"),
        delivered("a/12", 3050, "qx", address="g"),  # not one of its sent queues: a queue of its own
        acked("a/12", 3060, "qx", address="g"),
        *[acked(m, 3200, "qg", address="g") for m in ("a/11", "a/12", "a/13")],
        # group g2 (no group_seq: sent order) on qg: a/15 delivered first, so a/14 is out of order
        sent("a/14", 4000, ["qg"], address="g", group_id="g2"),
        sent("a/15", 4010, ["qg"], address="g", group_id="g2"),
        delivered("a/15", 4100, "qg", address="g"), delivered("a/14", 4200, "qg", address="g"),
        acked("a/15", 4300, "qg", address="g"), acked("a/14", 4300, "qg", address="g"),
        # m16: listed q1 here, but only acknowledged on node-b, and not recovered at node-a's
        # restart: lost on the sending node
        sent("a/16", 5000, ["q1"]),
        _ev("topology.link_up", 5001, A, cluster="c", peer_node_id=B, peer="core-b", direction="out"),
        # m17: never delivered, not recovered at the restart: lost
        sent("a/17", 5500, ["q1"]),
        # m18: delivered; its acknowledgement's event went with the crash, the journal shows it settled
        sent("a/18", 5600, ["q1"]), delivered("a/18", 5610, "q1"),
        # m19: not durable, gone with the restart: dropped, not lost
        sent("a/19", 5700, ["q1"], durable=False),
        # m23: durable, but its queue did not survive the restart (not durable): dropped
        sent("a/23", 5850, ["tmp"]),
        # node-a/21: delivered and acknowledged just before the crash, whose sent event the crash
        # lost (not durable: no journal record of it): no sent event, not unexpected
        delivered("node-a/21", 5990, "q1"), acked("node-a/21", 5995, "q1"),
        # the restart (a crash: nothing written between it and the last events above)
        _ev("node.started", 6000, A, recovered=2, settled=1, persistent=True,
            queues=["q1", "q2", "qg", "t.s1", "t.s2", "t.s3"], paged=[]),
        # m3's third subscription still holds it: in flight
        _ev("message.recovered", 6000, A, message_id="a/3", address="t", queue="t.s3", durable=True, delivery_count=1),
        # m20: its sent event went with the crash; recovered, then delivered and acknowledged
        _ev("message.recovered", 6000, A, message_id="a/20", address="a1", queue="q1", durable=True, delivery_count=0),
        _ev("message.settled", 6000, A, message_id="a/18", address="a1", queue="q1"),
        delivered("a/20", 6100, "q1"), acked("a/20", 6110, "q1"),
    ]
    b = [
        # m6: delivered and acknowledged, never sent: unexpected
        delivered("z/6", 1600, "q3", node=B, address="a3"), acked("z/6", 1610, "q3", node=B, address="a3"),
        delivered("a/7", 1720, "q3", node=B, address="a3"), acked("a/7", 1730, "q3", node=B, address="a3"),
        delivered("a/10", 2010, "q1", node=B), acked("a/10", 2020, "q1", node=B),
        delivered("a/16", 5010, "q1", node=B), acked("a/16", 5020, "q1", node=B),
    ]
    return a, b


def _write(folder, name, lines):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


HAND_SUMMARY = {
    "sent": 19, "acknowledged": 12, "lost": 2, "duplicated": 1, "unexpected": 1, "out_of_order": 2,
    "expired": 1, "dead_lettered": 1, "in_flight": 2, "redelivered": 1, "acknowledgements": 18,
    "sent_more_than_once": 0, "no_sent_event": 1, "settled": 1, "dropped": 2, "recovered": 2, "node_starts": 1,
}


def _is_hand(message_id):
    return message_id.startswith(("a/", "z/", "node-a/"))


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """(truth of the synth log, the audit's JobResult, out) for the hand and synth logs together."""
    root = tmp_path_factory.mktemp("audit")
    a, b = hand_log()
    _write(str(root / "events" / "hand"), "events-core-a-20240601T000000-0001.jsonl", a)
    _write(str(root / "events" / "hand" / "b"), "events-core-b-20240601T000000-0001.jsonl", b)
    truth = generate(str(root / "events" / "synth"), 15_000, seed=11, nodes=3, keys=50, tenants=4,
                     addresses_per_tenant=3, groups=8, loss=0.01, duplicates=0.01, reorders=0.02,
                     unexpected=0.005, expired=0.005, dead_lettered=0.005, workers=1)
    out = str(root / "out")
    return truth, audit.run(spark, str(root / "events"), out, examples=5), out


def _rows(spark, result, table, hand=True):
    """The table's rows of the hand log (hand=True) or of the synth log."""
    return [r for r in spark.read.parquet(result.tables[table]).collect() if _is_hand(r["message_id"]) == hand]


def test_headline_figures_are_the_hand_logs_plus_the_synth_logs(audited):
    truth, result, out = audited
    synth = {
        "sent": truth.events_by_kind["message.sent"], "acknowledged": truth.acknowledged, "lost": len(truth.lost),
        "duplicated": len(truth.duplicated), "unexpected": len(truth.unexpected),
        "out_of_order": len(truth.out_of_order), "expired": truth.expired, "dead_lettered": truth.dead_lettered,
        "in_flight": len(truth.in_flight), "redelivered": truth.redelivered,
        "acknowledgements": truth.events_by_kind["message.acknowledged"], "sent_more_than_once": 0,
        "no_sent_event": 0, "settled": 0, "dropped": 0, "node_starts": len(truth.restarts),
    }
    summary = dict(result.summary)
    recovered = summary.pop("recovered")  # (the synth's truth does not count these)
    assert summary == {key: HAND_SUMMARY[key] + synth[key] for key in synth}
    assert recovered > HAND_SUMMARY["recovered"]
    assert min(synth["lost"], synth["in_flight"], synth["duplicated"], synth["unexpected"], synth["out_of_order"]) >= 3
    assert result.exit_code == 1
    assert result.report == os.path.join(out, "audit.html")
    assert sorted(result.tables) == sorted(audit.TABLES)
    assert all(path == os.path.join(out, name) for name, path in result.tables.items())


def test_hand_log_problem_tables(spark, audited):
    _truth, result, _ = audited
    lost = {r["message_id"]: (r["missing_queues"], r["lost_on"], r["reason"]) for r in _rows(spark, result, "lost")}
    assert lost == {
        "a/16": (["q1"], [A], "not recovered on q1 at the restart of node node-a"),
        "a/17": (["q1"], [A], "not recovered on q1 at the restart of node node-a"),
    }
    in_flight = {(r["message_id"], r["held_by"], r["queue"]) for r in _rows(spark, result, "in_flight")}
    assert in_flight == {("a/3", A, "t.s3"), ("a/8", B, None)}
    assert [(r["message_id"], r["queue"], r["acks"], r["deliveries"]) for r in _rows(spark, result, "duplicated")] == [
        ("a/5", "q1", 2, 2)
    ]
    assert [(r["message_id"], r["queues_seen"], r["deliveries"], r["acks"]) for r in _rows(spark, result, "unexpected")] == [
        ("z/6", ["q3"], 1, 1)
    ]
    ooo = sorted(
        (r["message_id"], r["group_id"], r["queue"], r["ranked_by"], r["rank"], r["highest_rank_before"])
        for r in _rows(spark, result, "out_of_order")
    )
    assert ooo == [("a/11", "g1", "qg", "group_seq", 1.0, 2.0), ("a/14", "g2", "qg", "sent_ts", T0 + 4000.0, T0 + 4010.0)]


def test_hand_log_message_statuses_and_latency(spark, audited):
    _truth, result, _ = audited
    messages = {r["message_id"]: r for r in _rows(spark, result, "audit_messages")}
    assert {m: r["status"] for m, r in messages.items()} == {
        "a/1": "acknowledged", "a/2": "acknowledged", "a/3": "in_flight", "a/4": "expired", "a/5": "acknowledged",
        "z/6": "unexpected", "a/7": "acknowledged", "a/8": "in_flight", "a/9": "dead_lettered",
        "a/10": "acknowledged", "a/11": "acknowledged", "a/12": "acknowledged", "a/13": "acknowledged",
        "a/14": "acknowledged", "a/15": "acknowledged", "a/16": "lost", "a/17": "lost", "a/18": "settled",
        "a/19": "dropped", "a/20": "acknowledged", "node-a/21": "no_sent_event", "a/23": "dropped",
    }
    assert (messages["a/3"]["in_flight_queues"], messages["a/8"]["in_flight_queues"]) == (["t.s3"], ["@" + B])
    assert (messages["a/19"]["dropped_queues"], messages["a/23"]["dropped_queues"]) == (["q1"], ["tmp"])
    assert (messages["a/20"]["recovered"], messages["a/18"]["journal_settled"]) == (1, 1)
    assert messages["a/11"]["out_of_order_queues"] == ["qg"] and messages["a/5"]["duplicated_queues"] == ["q1"]
    assert (messages["a/2"]["latency_ms"], messages["a/2"]["ack_latency_ms"], messages["a/2"]["deliveries"]) == (10.0, 60.0, 2)
    assert messages["a/7"]["latency_ms"] == 20.0 and messages["a/7"]["forwarded_to"] == [B]
    latency = {r["address"]: r for r in spark.read.parquet(result.tables["latency_by_address"]).collect()}
    # a1: a/1 (10, 20), a/2 (10, 60), a/5 (10, 20), a/10 (10, 20), a/16 (10, 20), a/18 (10, -), and
    # a/17, a/19, a/23 never delivered (a/20 has no sent event)
    a1 = latency["a1"]
    assert (a1["messages"], a1["e2e_p50_ms"], a1["e2e_max_ms"], a1["ack_p50_ms"], a1["ack_max_ms"]) == (9, 10.0, 10.0, 20.0, 60.0)
    assert latency["a2"]["messages"] == 2 and latency["a2"]["e2e_max_ms"] == 10.0  # a/4 never delivered


def test_report_shows_the_earliest_examples(audited):
    truth, result, _ = audited
    with open(result.report, encoding="utf-8") as f:
        html = f.read()
    for text in ("Delivery audit", f"Lost ({2 + len(truth.lost):,})", f"Unexpected ({1 + len(truth.unexpected):,})",
                 "not recovered on q1 at the restart of node node-a", "z/6", "In flight (", "t.s3", "Latency per address", "Messages sent per minute, in 1 day buckets"):
        assert text in html
    assert html.count("data:image/png;base64,") == 2


def test_synth_log_audit_finds_exactly_the_planted_faults(spark, audited):
    truth, result, _ = audited
    lost = _rows(spark, result, "lost", hand=False)
    assert {r["message_id"] for r in lost} == set(truth.lost)
    assert {(r["message_id"], q) for r in lost for q in r["missing_queues"]} == {tuple(p) for p in truth.lost_pairs}
    in_flight = _rows(spark, result, "in_flight", hand=False)
    assert {r["message_id"] for r in in_flight} - set(truth.lost) == set(truth.in_flight)
    assert {(r["message_id"], r["queue"] or "@" + r["held_by"]) for r in in_flight} == {
        tuple(p) for p in truth.in_flight_pairs
    }
    assert {(r["message_id"], r["queue"]) for r in _rows(spark, result, "duplicated", hand=False)} == {
        tuple(p) for p in truth.duplicated
    }
    assert {r["message_id"] for r in _rows(spark, result, "unexpected", hand=False)} == set(truth.unexpected)
    assert {(r["message_id"], r["group_id"], r["queue"]) for r in _rows(spark, result, "out_of_order", hand=False)} == {
        tuple(p) for p in truth.out_of_order
    }
