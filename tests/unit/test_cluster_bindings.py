"""The clustered routing choice (pure), the address matcher and the change record file."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from junction.brokercore.cluster.bindings import (
    AddressMatcher,
    RemoteBinding,
    redistribution_target,
    select,
)
from junction.brokercore.cluster.changes import ChangeRecord
from junction.model.filter import parse_filter
from junction.model.message import Message, RoutingType

ANY, MULTI = RoutingType.ANYCAST, RoutingType.MULTICAST


def local_queue(name, rtype=ANY, consumers=0, filter=None):
    consumer = SimpleNamespace(filter=None)
    return SimpleNamespace(
        name=name, routing_type=rtype, filter=parse_filter(filter) if filter else None,
        consumers=[consumer] * consumers,
    )


def address(name, *queues):
    return SimpleNamespace(name=name, queues={q.name: q for q in queues})


def remote(node, queue, rtype=ANY, consumers=0, address_name="orders", connected=True, filters=None):
    return RemoteBinding(
        origin=node, via=node, address=address_name, queue=queue, routing_type=rtype, filter_text=None,
        consumers=consumers, consumer_filters=filters, hops=1, connected=connected,
    )


def where(addr, bindings, mode, n, rtype=ANY, **kw):
    positions, out = {}, []
    for _ in range(n):
        queues, chosen = select(addr, bindings, Message(address=addr.name), rtype, mode, positions, **kw)
        out.append(tuple(sorted([q.name for q in queues] + [f"{b.origin}:{b.queue}" for b in chosen])))
    return out


def test_strict_round_robins_over_every_member():
    addr = address("orders", local_queue("orders"))
    got = where(addr, [remote("b", "orders"), remote("c", "orders")], "STRICT", 6)
    assert sorted(got) == sorted([("orders",), ("b:orders",), ("c:orders",)] * 2)


def test_on_demand_goes_where_consumers_are_and_else_stays():
    addr = address("orders", local_queue("orders"))
    assert set(where(addr, [remote("b", "orders", consumers=1), remote("c", "orders")], "ON_DEMAND", 4)) == {("b:orders",)}
    assert set(where(addr, [remote("b", "orders"), remote("c", "orders")], "ON_DEMAND", 4)) == {("orders",)}
    with_local = address("orders", local_queue("orders", consumers=1))
    assert sorted(where(with_local, [remote("b", "orders", consumers=2)], "ON_DEMAND", 4)) == sorted(
        [("orders",), ("b:orders",)] * 2
    )


def test_on_demand_consumer_filters_decide():
    addr = address("orders", local_queue("orders"))
    picky = remote("b", "orders", consumers=1, filters=("colour = 'red'",))
    assert set(where(addr, [picky], "ON_DEMAND", 2)) == {("orders",)}


@pytest.mark.parametrize("mode", ["OFF", "OFF_WITH_REDISTRIBUTION"])
def test_off_modes_never_forward(mode):
    addr = address("news", local_queue("sub-a", MULTI))
    bindings = [remote("b", "sub-b", MULTI, consumers=1, address_name="news")]
    assert set(where(addr, bindings, mode, 3, rtype=None)) == {("sub-a",)}


def test_a_single_member_group_always_gets_the_message():
    addr = address("news")
    bindings = [remote("b", "sub-1", MULTI, address_name="news"), remote("b", "sub-2", MULTI, address_name="news")]
    assert set(where(addr, bindings, "ON_DEMAND", 2, rtype=None)) == {("b:sub-1", "b:sub-2")}


def test_disconnected_members_are_passed_over_while_others_can_take_it():
    addr = address("orders", local_queue("orders"))
    got = where(addr, [remote("b", "orders"), remote("c", "orders", connected=False)], "STRICT", 6)
    assert set(got) == {("orders",), ("b:orders",)}


def test_local_delivery_preferred():
    addr = address("orders", local_queue("orders", consumers=1))
    got = where(addr, [remote("b", "orders", consumers=5)], "ON_DEMAND", 4, local_preferred=True)
    assert set(got) == {("orders",)}
    idle = address("orders", local_queue("orders"))
    assert set(where(idle, [remote("b", "orders", consumers=5)], "ON_DEMAND", 2, local_preferred=True)) == {("b:orders",)}


def test_redistribution_target_needs_a_matching_remote_consumer():
    queue = local_queue("orders")
    addr = address("orders", queue)
    assert redistribution_target(addr, [remote("b", "orders")], Message(address="orders"), queue) is None
    wanted = remote("c", "orders", consumers=1)
    assert redistribution_target(addr, [remote("b", "orders"), wanted], Message(address="orders"), queue) is wanted


@pytest.mark.parametrize(
    "spec, yes, no",
    [
        ("", ["a", "eu.uk"], []),
        ("eu", ["eu", "eu.uk", "europe"], ["us"]),
        ("!eu", ["us"], ["eu.uk"]),
        ("eu.uk,eu.de", ["eu.uk.x", "eu.de"], ["eu.fr"]),
        ("eu,!eu.uk", ["eu.de"], ["eu.uk.london", "us"]),
    ],
)
def test_address_matcher(spec, yes, no):
    matcher = AddressMatcher(spec)
    assert all(matcher(a) for a in yes) and not any(matcher(a) for a in no)


def _entity(name, kind="admin"):
    return {"queue": name, "address": name, "routing_type": "ANYCAST", "filter": None, "durable": True, "kind": kind}


def test_change_record_persists_last_change_per_entity_and_ignores_a_torn_tail(tmp_path):
    record = ChangeRecord(str(tmp_path))
    record.record("create", _entity("a"))
    record.record("create", _entity("b"))
    record.record("delete", _entity("a"))
    with open(record.path, "ab") as fh:
        fh.write(b"0000dead {\"seq\": 9")  # a crash mid-line
    again = ChangeRecord(str(tmp_path))
    again.load()
    assert [(e["seq"], e["op"], e["entity"]["queue"]) for e in again.all()] == [(2, "create", "b"), (3, "delete", "a")]
    assert again.record("create", _entity("c"))["seq"] == 4


def test_change_record_compacts_superseded_lines(tmp_path):
    record = ChangeRecord(str(tmp_path))
    for i in range(200):
        record.record("create" if i % 2 == 0 else "delete", _entity("same"))
    lines = open(record.path, "rb").read().count(b"\n")
    assert lines < 100
    again = ChangeRecord(str(tmp_path))
    again.load()
    assert [e["seq"] for e in again.all()] == [200]


def test_same_endpoint_knows_localhost_is_127_0_0_1():
    from junction.brokercore.cluster.master import same_endpoint

    def c(host, port=61616):
        return SimpleNamespace(host=host, port=port)

    assert same_endpoint(c("localhost"), c("127.0.0.1"))
    assert not same_endpoint(c("localhost"), c("127.0.0.1", 61617))
    assert not same_endpoint(c("127.0.0.2"), c("127.0.0.1"))


def test_link_snapshots_are_cut_to_fit_a_control_frame():
    from junction.brokercore.cluster.link_server import CHUNK_BYTES, _chunks
    from junction.protocols.cluster import link

    big = [
        link.Binding(id=f"n/q{i}", address="a", queue=f"q{i}", routing_type="ANYCAST", filter="x = '" + "y" * 9000 + "'",
                     consumers=0, consumer_filters=None, hops=0, origin="n", durable=True)
        for i in range(300)
    ]
    chunks = _chunks(big, link.encode_binding)
    assert len(chunks) > 1 and sum(len(c) for c in chunks) == 300
    for chunk in chunks:
        assert len(link.encode_frame(link.Bindings(bindings=tuple(chunk)))) <= link.MAX_CONTROL_BYTES
        assert len(chunk) * 9000 <= CHUNK_BYTES + 9100
