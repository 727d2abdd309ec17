"""Rows: the broker core's commonest message events as numbers (junction/events/sink.py).

A row's lines must be exactly the lines of the compact entry it stands for,
whichever way the writer makes them; a row's code must find its static across
table resets, writer restarts and segments left by an earlier run; and every
row the node could not keep or the writer could not write is counted.
"""

from __future__ import annotations

import itertools
import marshal
import os
from types import SimpleNamespace

import orjson
import pytest

from junction.brokercore import events as events_module
from junction.brokercore.events import MessageEvents
from junction.events.sink import (
    ACKNOWLEDGED,
    DELIVERED,
    DELIVERED_AND_ACKNOWLEDGED,
    LAYOUTS,
    ROW,
    ROW_STATICS,
    SENT,
    EventSink,
    entry_builder,
    expand_row,
    read_segment,
    segment,
)
from junction.events.writer import EventLog
from junction.model.message import Message, RoutingType
from tests.unit.test_events import _read_all

NODE_ID = 'id-"%s\\1'
ODD = ['q"%d%%', "caf\u00e9 \u2028", "back\\slash"]
PRODUCERS = [("12", "alice", None), ("1%", 'u"', "c\u00e9")]
CONSUMERS = [("bench", "3", "13", None, None), ('q"1', "%b", "7", "bob", "c-%d")]


def builder_lines(entry) -> bytes:
    kinds, layout = LAYOUTS[entry[0]]
    return b"".join(orjson.dumps(entry_builder(kind, "core1", NODE_ID, layout)(entry)) + b"\n" for kind in kinds)


def statics():
    for address, names_of, durable, routing_type, context in itertools.product(
        ODD, [lambda a: a, lambda a: (a, "other"), lambda a: ()], [True, False], ["ANYCAST", None], PRODUCERS
    ):
        yield (SENT, address, names_of(address), durable, routing_type, context)
    for kind, address, context in itertools.product([DELIVERED, ACKNOWLEDGED, DELIVERED_AND_ACKNOWLEDGED], ODD, CONSUMERS):
        yield (kind, address, context)


def test_every_static_names_the_layout_values_a_row_does_not_carry():
    for static in statics():
        assert len(static) == 1 + len(ROW_STATICS[static[0]])


def test_rows_are_written_as_the_entries_they_stand_for_byte_for_byte(tmp_path):
    table = dict(enumerate(statics()))
    rows = bytearray()
    expected = bytearray()
    for n, (code, static) in enumerate(table.items()):
        for ts, number, extra in [(1795412274.2821584 + n, 10**6 + n, 300), (1795412275.0 + n / 7, n, 0), (2.5, 2**64 - 1, 2**40)]:
            rows += ROW.pack(code, ts, number, extra)
            expected += builder_lines(expand_row(static, ts, number, extra))
    sink = EventSink(str(tmp_path), "core1", NODE_ID, max_file_bytes=1 << 20, max_file_age_s=60, max_files=3)
    assert sink.encode_rows(table, bytes(rows)) == expected
    assert sink.encode_rows(table, bytes(rows)) == expected  # again, every template known
    assert all(made[1] is not None for made in sink._row_templates.values())  # none written the slow way
    entry = expand_row(table[0], 2.5, 7, 300)
    assert entry[2] == 7 and entry[7] == 300 and all(type(v) is int for v in (entry[2], entry[7]))


def test_a_code_means_its_static_in_each_segment(tmp_path):
    """Codes start again with each node run, so a segment an earlier run left may use a code
    for another static: the writer goes by the segment's own statics."""
    sink = EventSink(str(tmp_path), "core1", NODE_ID, max_file_bytes=1 << 20, max_file_age_s=60, max_files=3)
    first = (DELIVERED, "a", CONSUMERS[0])
    second = (ACKNOWLEDGED, "b", CONSUMERS[1])
    row = ROW.pack(5, 1.0, 9, 1)
    assert sink.encode_rows({5: first}, row) == builder_lines(expand_row(first, 1.0, 9, 1))
    assert sink.encode_rows({5: second}, row) == builder_lines(expand_row(second, 1.0, 9, 1))


def test_a_row_without_its_static_is_counted_and_said_and_the_rest_written(tmp_path):
    sink = EventSink(str(tmp_path), "core1", NODE_ID, max_file_bytes=1 << 20, max_file_age_s=60, max_files=3)
    good = (DELIVERED_AND_ACKNOWLEDGED, "a", CONSUMERS[0])
    rows = b"".join(ROW.pack(code, 1.0, code, 1) for code in (1, 2, 3, 4))
    data = sink.encode_rows({1: good, 2: None, 4: (DELIVERED, "too", "many", "values")}, rows)
    assert data == builder_lines(expand_row(good, 1.0, 1, 1))
    assert sink.dropped == 3
    problems = sink.take_problems()
    assert len(problems) == 3 and all(p.startswith("event not written: a row") for p in problems)
    assert "static has 3 values, not 2" in problems[2]
    assert "no static for row code 2" in problems[0] and "no static for row code 3" in problems[1]


def test_segments_old_and_new_are_read_and_a_cut_one_refused():
    entries = [("connection.closed", 1.0, 7, None, None, None, None)]
    assert read_segment(marshal.dumps(entries)) == (entries, None)  # as an earlier version spooled them
    assert segment(entries) == marshal.dumps(entries)
    rows = ROW.pack(0, 1.0, 2, 3)
    assert read_segment(segment(entries, {0: (ACKNOWLEDGED, "a", CONSUMERS[0])}, rows)) == (
        entries, ({0: (ACKNOWLEDGED, "a", CONSUMERS[0])}, rows)
    )
    with pytest.raises(ValueError, match="whole number of rows"):
        read_segment(marshal.dumps((entries, {}, rows[:-1])))
    with pytest.raises(ValueError):
        read_segment(marshal.dumps((entries, {})))


def _message_events(log, node_id="node-1"):
    events = MessageEvents(log, node_id)
    session = SimpleNamespace(connection=SimpleNamespace(id=9, client_id="c-9"), user="alice", event_context=None)
    consumer = SimpleNamespace(id=5, event_context=None)
    return events, session, consumer


def test_rows_queued_before_the_code_table_starts_again_are_written(tmp_path, monkeypatch):
    """The table of codes is bounded: beyond MAX_ROW_CODES it starts again, and the log keeps
    the one before for the rows still queued under it."""
    monkeypatch.setattr(events_module, "MAX_ROW_CODES", 5)
    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 2.0)
    events, session, consumer = _message_events(log)
    queue = SimpleNamespace(name="q")
    for n in range(8):  # a new address each: a new static each time (tables {0-4} and {5-7})
        message = Message(f"a{n}", b"x", durable=True, routing_type=RoutingType.ANYCAST, message_id=n)
        events.sent(message, [queue], session)
    assert sorted(log.statics) == [5, 6, 7] and sorted(log.previous_statics) == [0, 1, 2, 3, 4]
    assert len(events._codes) == 3
    log.start()
    log.stop()
    assert [(e.get("message_id"), e.get("address")) for e in _read_all(tmp_path)] == [
        (f"node-1/{n}", f"a{n}") for n in range(8)
    ]
    assert log.dropped == 0


def test_rows_from_more_than_one_reset_back_are_counted_as_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(events_module, "MAX_ROW_CODES", 2)
    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 2.0)
    events, session, _ = _message_events(log)
    queue = SimpleNamespace(name="q")
    for n in range(7):  # codes 0-6: tables {0,1} {2,3} {4,5} {6}; the shipper has only the last two
        events.sent(Message(f"a{n}", b"x", message_id=n), [queue], session)
    log.start()
    log.stop()
    assert [e.get("address") for e in _read_all(tmp_path)] == ["a4", "a5", "a6"]
    assert log.dropped == 4 and log.written == 3


def test_full_rows_count_each_event_a_row_stands_for(tmp_path):
    log = EventLog(str(tmp_path), "core1", "node-1", max_queued=1)
    events, session, consumer = _message_events(log)
    message = Message("a", b"x", message_id=1)
    ref = SimpleNamespace(message=message, queue=SimpleNamespace(name="a"), delivery_count=1)
    events.delivered_and_acknowledged(ref, consumer, session)
    events.delivered_and_acknowledged(ref, consumer, session)  # no room: two events dropped
    events.delivered(ref, consumer, session)  # one
    events.sent(message, [ref.queue], session)  # one
    assert len(log.rows) == ROW.size and log.dropped == 4 and log.status()["queued"] == 1


def test_a_failed_log_drops_its_rows_and_counts_their_events(tmp_path):
    log = EventLog(str(tmp_path), "core1", "node-1")
    events, session, consumer = _message_events(log)
    message = Message("a", b"x", message_id=1)
    ref = SimpleNamespace(message=message, queue=SimpleNamespace(name="a"), delivery_count=1)
    events.sent(message, [ref.queue], session)
    events.delivered_and_acknowledged(ref, consumer, session)
    log._fail("a test")
    assert log.dropped == 3 and not log.rows and log.status()["queued"] == 0
    events.delivered(ref, consumer, session)
    assert log.dropped == 4 and not log.rows


def test_rows_a_killed_writer_left_in_the_spool_are_written_at_the_next_start(tmp_path):
    """A segment carries the statics of its rows, so a later run (whose codes mean other
    things) writes it as it was meant."""
    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 3.0)
    os.makedirs(log.spool_directory)
    left = {0: (ACKNOWLEDGED, "left", CONSUMERS[0])}
    with open(os.path.join(log.spool_directory, "0000000000000007.frames"), "wb") as fh:
        fh.write(segment([], left, ROW.pack(0, 1.0, 41, 0)))
    events, session, consumer = _message_events(log)
    message = Message("new", b"x", message_id=42)
    events.sent(message, [SimpleNamespace(name="new")], session)  # code 0 again, another static
    log.start()
    log.stop()
    assert [(e.kind, e.get("message_id"), e.get("address")) for e in _read_all(tmp_path)] == [
        ("message.acknowledged", "node-1/41", "left"),
        ("message.sent", "node-1/42", "new"),
    ]
    assert os.listdir(log.spool_directory) == []
