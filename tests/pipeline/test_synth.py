"""The synthetic log generator: lines are the schema's own encoding, and truth.json tells the truth.

No Spark here: the log is checked line by line in Python, and truth.json's
planted faults against an independent reading of the audit's definitions.
"""

from __future__ import annotations

import collections
import json
import os
import re

import pytest

from junction.events import schema
from junction.events.schema import decode, encode
from junction.pipeline import synth
from junction.pipeline.synth import Truth, generate
from junction.pipeline.synth_world import rendezvous

FAULTS = dict(loss=0.01, duplicates=0.01, reorders=0.01, unexpected=0.005, expired=0.005, dead_lettered=0.005)
FILE_NAME = re.compile(r"^events-(gateway|core\d+)-\d{8}T\d{6}-\d{4,}\.jsonl$")


def _read(out):
    events = []
    per_file = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(out, name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        per_file[name] = len(lines)
        for line in lines:
            event = decode(line)
            assert encode(event) == line  # byte for byte what the real writer would write
            events.append(event)
    return events, per_file


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("synth"))
    mp = pytest.MonkeyPatch()
    mp.setattr(synth, "CHUNK_MESSAGES", 1_500)  # several chunks, so several workers
    try:
        truth = generate(out, 20_000, seed=7, nodes=3, keys=60, tenants=4, addresses_per_tenant=3, groups=6,
                         workers=2, rotate_lines=2_500, **FAULTS)
    finally:
        mp.undo()
    events, per_file = _read(out)
    return out, truth, events, per_file


def test_every_line_is_an_encoded_event_and_truth_counts_the_files(log):
    out, truth, events, per_file = log
    assert Truth.load(os.path.join(out, "truth.json")) == truth
    assert truth.events == len(events) == sum(per_file.values())
    assert abs(truth.events - 20_000) < 20_000 * 0.1  # (restarts add their recovered events)
    assert truth.files == sorted(per_file) and all(FILE_NAME.match(n) for n in truth.files)
    assert max(per_file.values()) <= 2_500  # rotated
    assert truth.events_by_kind == dict(sorted(collections.Counter(e.kind for e in events).items()))
    # every kind but the topology's and message.settled (what a crash leaves to the journal to tell)
    assert set(truth.events_by_kind) == {
        k for k in schema.KINDS if not k.startswith("topology.") and k != "message.settled"
    }
    assert truth.messages == truth.events_by_kind["message.sent"] + len(truth.unexpected)
    ids = {e.node: e.node_id for e in events}
    assert ids == truth.nodes
    sent_ids = [e.get("message_id") for e in events if e.kind == "message.sent"]
    assert len(sent_ids) == len(set(sent_ids))
    assert all(mid.split("/")[0] in ids.values() for mid in sent_ids)


def test_routing_is_consistent_and_tenants_partition_the_keys(log):
    _out, truth, events, _ = log
    keys = [k for t in truth.tenants.values() for k in t["keys"]]
    assert len(keys) == len(set(keys)) == 60 and len(truth.tenants) == 4
    cores = [n for n in truth.nodes if n != "gateway"]
    assert all(truth.key_targets[k] == cores[rendezvous(k, [truth.nodes[c] for c in cores])] for k in keys)
    routed = [e for e in events if e.kind == "connection.routed"]
    assert all(e.node == "gateway" and e.get("router") == "shard" and e.get("key_type") == "USER_NAME" for e in routed)
    refused = [e for e in routed if e.get("decision") == "refused"]
    assert dict(collections.Counter(e.get("reason") for e in refused)) == truth.refused
    assert all(e.get("target") == truth.key_targets[e.get("key")] for e in routed if e.get("decision") != "refused")
    assert len(routed) - len(refused) == truth.connections
    assert {e.get("decision") for e in routed} == {"forward", "redirect", "refused"}
    # producers use their own tenant's addresses, apart from the cross-tenant noise
    tenant_of_key = {k: t for t, v in truth.tenants.items() for k in v["keys"]}
    tenant_of_address = {a: t for t, v in truth.tenants.items() for a in v["addresses"]}
    sent = [e for e in events if e.kind == "message.sent"]
    own = sum(tenant_of_key[e.get("user")] == tenant_of_address[e.get("address")] for e in sent)
    assert own / len(sent) > 0.9


def _audit_in_python(events):
    """The audit's definitions, read plainly: the sets truth.json must hold.

    Each (message, node, queue) reference is settled (acknowledged, expired, dead-lettered,
    moved), or, when its node restarted after it was last seen there (sent, recovered,
    delivered) without recovering it, lost; else in flight.  A node a message was forwarded
    or moved to owes it under "@<node id>" until one of its queues shows it."""
    sent, acks, delivered = {}, collections.Counter(), {}
    any_ack, seen, recovered = set(), set(), set()
    last_seen, settled, restarts = {}, set(), collections.defaultdict(list)

    def saw(key, ts):
        last_seen[key] = max(last_seen.get(key, ts), ts)

    for e in events:
        mid, queue = e.get("message_id"), e.get("queue")
        if e.kind == "node.started":
            restarts[e.node_id].append(e.ts)
        elif e.kind == "message.sent":
            sent[mid] = e
            for q in e.get("queues"):
                saw((mid, e.node_id, q), e.ts)
        elif e.kind == "message.forwarded":
            saw((mid, e.get("to_node"), None), e.ts)
        elif e.kind == "message.recovered":
            recovered.add(mid)
            saw((mid, e.node_id, queue), e.ts)
        elif e.kind == "message.acknowledged":
            acks[(mid, queue)] += 1
            any_ack.add(mid)
            settled.add((mid, e.node_id, queue))
            seen.add(mid)
        elif e.kind in ("message.expired", "message.dead_lettered"):
            settled.add((mid, e.node_id, queue))
        elif e.kind == "message.redistributed":
            settled.add((mid, e.node_id, queue))
            saw((mid, e.get("to_node"), None), e.ts)
        elif e.kind == "message.delivered":
            seen.add(mid)
            saw((mid, e.node_id, queue), e.ts)
            if (mid, queue) not in delivered or e.ts < delivered[(mid, queue)]:
                delivered[(mid, queue)] = e.ts
    known = {(m, n) for (m, n, q) in list(last_seen) + list(settled) if q is not None}
    lost_pairs, in_flight_pairs = set(), set()
    for (m, n, q), ts in last_seen.items():
        if (m, n, q) in settled or (q is None and (m, n) in known):
            continue
        pair = (m, q if q is not None else "@" + n)
        if any(t > ts for t in restarts[n]):
            lost_pairs.add(pair)
        else:
            in_flight_pairs.add(pair)
    lost = {m for m, _ in lost_pairs}
    duplicated = {pair for pair, n in acks.items() if n > 1}
    unexpected = seen - set(sent) - recovered
    groups = collections.defaultdict(list)
    for (mid, queue), ts in delivered.items():
        e = sent.get(mid)
        if e is not None and e.get("group_id") is not None:
            groups[(e.get("group_id"), queue)].append((ts, e.get("group_seq"), e.ts, mid))
    out_of_order = set()
    for (gid, queue), rows in groups.items():
        by_seq = all(seq is not None for _, seq, _, _ in rows)
        ranked = sorted((ts, seq if by_seq else sent_ts, mid) for ts, seq, sent_ts, mid in rows)
        high = None
        for _ts, rank, mid in ranked:
            if high is not None and rank < high:
                out_of_order.add((mid, gid, queue))
            high = rank if high is None else max(high, rank)
    acknowledged = sum(m in any_ack for m in sent)
    in_flight = {m for m, _ in in_flight_pairs} - lost
    return lost, lost_pairs, in_flight, in_flight_pairs, duplicated, unexpected, out_of_order, acknowledged


def test_truth_holds_exactly_the_planted_faults(log):
    _out, truth, events, _ = log
    lost, lost_pairs, in_flight, in_flight_pairs, duplicated, unexpected, out_of_order, acknowledged = (
        _audit_in_python(events)
    )
    assert set(truth.lost) == lost and len(truth.lost) == len(lost)
    assert {tuple(p) for p in truth.lost_pairs} == lost_pairs
    assert set(truth.in_flight) == in_flight and {tuple(p) for p in truth.in_flight_pairs} == in_flight_pairs
    assert len(truth.restarts) == 3 * synth.RESTARTS_PER_CORE == truth.events_by_kind["node.started"]
    assert {tuple(p) for p in truth.duplicated} == duplicated
    assert set(truth.unexpected) == unexpected
    assert {tuple(p) for p in truth.out_of_order} == out_of_order
    assert truth.acknowledged == acknowledged
    assert truth.expired == truth.events_by_kind["message.expired"]
    assert truth.dead_lettered == truth.events_by_kind["message.dead_lettered"]
    # every kind of fault was planted, some messages crossed nodes, and groups carry both rankings
    assert min(len(lost), len(lost_pairs), len(in_flight), len(duplicated), len(unexpected), len(out_of_order)) >= 3
    assert truth.events_by_kind["message.recovered"] > 0
    assert truth.forwarded == truth.events_by_kind["message.forwarded"] > 0
    assert truth.redelivered > 0
    group_sent = [e for e in events if e.kind == "message.sent" and e.get("group_id")]
    assert {e.get("group_seq") is None for e in group_sent} == {True, False}
    topic = [e for e in events if e.kind == "message.sent" and len(e.get("queues")) > 1]
    assert topic and all(e.get("routing_type") == "MULTICAST" for e in topic)


def test_the_same_seed_gives_the_same_files_whatever_the_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "CHUNK_MESSAGES", 500)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ta = generate(a, 4_000, seed=3, workers=1, keys=20, tenants=2)
    tb = generate(b, 4_000, seed=3, workers=2, keys=20, tenants=2)
    assert ta.files == tb.files and len(ta.files) > 4
    for name in ta.files:
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            assert fa.read() == fb.read()
    other = generate(str(tmp_path / "c"), 4_000, seed=4, workers=1, keys=20, tenants=2)
    assert other.lost != ta.lost or other.events != ta.events


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="events must be at least 1"):
        generate(str(tmp_path), 0)
    with pytest.raises(ValueError, match="loss must be between 0 and 1"):
        generate(str(tmp_path), 10, loss=2.0)
    with pytest.raises(ValueError, match="keys must be at least tenants"):
        generate(str(tmp_path), 10, keys=2, tenants=3)


def test_truth_json_is_plain_json(log):
    out, truth, _events, _ = log
    with open(os.path.join(out, "truth.json"), encoding="utf-8") as f:
        data = json.load(f)
    assert data["events"] == truth.events and data["seed"] == 7
    assert data["params"]["loss"] == FAULTS["loss"] and data["params"]["events_requested"] == 20_000
