"""The event schema (one encoding for writers and pipeline) and the rotated, bounded writer."""

from __future__ import annotations

import json
import os

import pytest

from junction.events import schema
from junction.events.schema import Event, SchemaError, decode, encode
from junction.events.writer import EventLog


def test_every_kind_round_trips_with_its_fields():
    for kind, fields in schema.KINDS.items():
        event = Event(kind, 1234.5, "core1", "id-1", {name: f"{name}-value" for name in fields})
        line = encode(event)
        assert "\n" not in line
        assert decode(line) == event
        obj = json.loads(line)
        assert list(obj)[:5] == list(schema.COMMON_FIELDS) and obj["v"] == schema.SCHEMA_VERSION


def test_missing_fields_are_null_and_unknown_ones_refused():
    event = Event("connection.closed", 1.0, "gw", "id", {"conn": 7})
    assert decode(encode(event)).fields == {"conn": 7, "bytes_in": None, "bytes_out": None, "duration_ms": None, "reason": None}
    with pytest.raises(SchemaError, match="not in the schema"):
        encode(Event("connection.closed", 1.0, "gw", "id", {"colour": "red"}))
    with pytest.raises(SchemaError, match="unknown event kind"):
        encode(Event("message.teleported", 1.0, "gw", "id", {}))


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"kind": "connection.closed", "ts": 1}', "schema version"),
        ('{"v": 99, "kind": "connection.closed", "ts": 1}', "newer than this reader"),
        ('{"v": 1, "kind": "nope", "ts": 1}', "unknown event kind"),
        ('{"v": 1, "kind": "connection.closed", "ts": "soon"}', "ts must be a number"),
    ],
)
def test_bad_lines_say_what_is_wrong(line, problem):
    with pytest.raises(SchemaError, match=problem):
        decode(line)


def test_fields_a_newer_writer_adds_are_ignored():
    line = '{"v": 1, "kind": "connection.closed", "ts": 5, "node": "n", "node_id": "i", "conn": 1, "later": true}'
    assert decode(line).fields["conn"] == 1


def _read_all(directory):
    events = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as fh:
            events += [decode(line) for line in fh.read().splitlines()]
    return events


def test_the_writer_writes_every_event_in_order_and_rotates_by_size(tmp_path):
    log = EventLog(str(tmp_path), "core1", "node-1", max_file_bytes=4096)
    log.start()
    for i in range(300):
        log.emit("message.sent", message_id=i, address="orders", size=10, durable=True)
        if i == 150:  # a line longer than max-file-size: alone in its file
            log.emit("message.sent", message_id="long", address="x" * 5000)
    log.stop()
    events = _read_all(tmp_path)
    assert [e.get("message_id") for e in events] == list(range(151)) + ["long"] + list(range(151, 300))
    sizes = {name: os.path.getsize(tmp_path / name) for name in os.listdir(tmp_path)}
    assert len(sizes) > 2 and sum(sizes.values()) == sum(len(encode(e)) + 1 for e in events)
    assert [size for size in sizes.values() if size > 4096] == [len(encode(events[151])) + 1]
    assert (log.written, log.dropped) == (301, 0)


def test_the_writer_rotates_by_age_and_keeps_max_files(tmp_path):
    from tests.harness import wait_for

    now = [1_000_000.0]
    log = EventLog(str(tmp_path), "gw", "n", max_file_age_s=60, max_files=3, clock=lambda: now[0])
    log.start()
    try:
        for i in range(6):
            log.emit("connection.closed", conn=i)
            wait_for(lambda i=i: log.written == i + 1, 5, what=f"event {i} written")
            now[0] += 61  # the next look at the file finds it too old: the next event opens a new one
            wait_for(lambda: log._file is None, 5, what="the old file closed")
    finally:
        log.stop()
    assert len(os.listdir(tmp_path)) == 3  # six files made, the oldest three deleted
    assert [e.get("conn") for e in _read_all(tmp_path)] == [3, 4, 5]


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path):
    log = EventLog(str(tmp_path), "gw", "n", max_queued=10)  # not started: nothing drains
    for i in range(25):
        log.emit("connection.closed", conn=i)
    assert log.dropped == 15 and log.status()["queued"] == 10


def test_disabled_categories_and_sampling(tmp_path):
    log = EventLog(str(tmp_path), "core", "n", categories=("connection",), sample_rate=0.25)
    log.emit("message.sent", message_id=1)
    assert log.status()["queued"] == 0 and not log.enabled("message.delivered")
    sampled = sum(log.sampled(i) for i in range(20_000))
    assert 4_000 < sampled < 6_000
    assert all(log.sampled(i) == log.sampled(i) for i in range(100))  # the same answer for a message
    assert EventLog(str(tmp_path), "c", "n", sample_rate=1.0).sampled(12345)
    with pytest.raises(ValueError):
        EventLog(str(tmp_path), "c", "n", sample_rate=1.5)


def test_every_field_has_one_type():
    assert set(schema.ALL_FIELDS) == set(schema.FIELD_TYPES)
    assert set(schema.FIELD_TYPES.values()) <= {"string", "long", "double", "boolean", "array<string>"}


def test_the_writers_lines_say_what_encode_writes():
    """The writer encodes with orjson: its lines parse to what encode writes, key order
    included; a value orjson refuses (an integer beyond 64 bits) goes to encode's encoder."""
    from junction.events.writer import _line, entry_builder

    class Text(str):
        pass

    values = [None, True, False, 0, -7, 2**70, 1.5, -0.0, 12.0, 1e16, "", 'q"\\\n\u2028é', Text("sub"), b"raw", ["a", 'b"'], [], ["x", 1], {"k": 1}, ("t",)]
    for kind, spec in schema.KINDS.items():
        build = entry_builder(kind, 'n"ode', "id/1")
        for i in range(len(values)):
            fields = tuple(values[(i + j) % len(values)] for j in range(len(spec)))
            expected = encode(Event(kind, 1795368700552.973, 'n"ode', "id/1", dict(zip(spec, fields, strict=True))))
            line = _line(build((kind, 1795368700552.973, *fields)))
            assert isinstance(line, bytes) and b"\n" not in line
            assert list(json.loads(line).items()) == list(json.loads(expected).items())
    with pytest.raises(ValueError):
        entry_builder("connection.closed", "n", "i")(("connection.closed", 1.0, None))  # too few values
    nan = _line(entry_builder("connection.closed", "n", "i")(("connection.closed", float("nan"), *(None,) * 5)))
    assert json.loads(nan)["ts"] is None  # NaN is written as null (encode refuses it)
    with pytest.raises(UnicodeEncodeError):  # not valid Unicode: neither writes it
        _line(entry_builder("connection.closed", "n", "i")(("connection.closed", 1.0, "\ud800", *(None,) * 4)))


def test_tuples_put_in_field_order_are_written_like_keyword_events(tmp_path):
    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 1.5)
    spec = schema.KINDS["message.acknowledged"]
    log.put("message.acknowledged", tuple(f"{name}-1" for name in spec))
    log.emit("message.acknowledged", **{name: f"{name}-1" for name in spec})
    log.put("message.acknowledged", ("too", "short"))  # a bug in the emitter: logged, not written
    log.start()
    log.stop()
    first, second = _read_all(tmp_path)
    assert first == second == Event("message.acknowledged", 1500.0, "core1", "node-1", {n: f"{n}-1" for n in spec})
    assert (log.written, log.dropped) == (2, 0)
