"""The event schema (one encoding for writers and pipeline) and the rotated, bounded writer."""

from __future__ import annotations

import json
import os

import pytest

from junction.events import schema
from junction.events.schema import Event, SchemaError, decode, encode
from junction.events.sink import DERIVED, LAYOUTS, ROW, EventSink
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


def _jsonl(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".jsonl"))


def _read_all(directory):
    events = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".jsonl")):
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
    sizes = {name: os.path.getsize(tmp_path / name) for name in _jsonl(tmp_path)}
    assert len(sizes) > 2 and sum(sizes.values()) == sum(len(encode(e)) + 1 for e in events)
    assert [size for size in sizes.values() if size > 4096] == [len(encode(events[151])) + 1]
    assert (log.written, log.dropped) == (301, 0)


def test_the_sink_rotates_by_age_and_keeps_max_files(tmp_path):
    now = [1_000_000.0]
    sink = EventSink(str(tmp_path), "gw", "n", max_file_bytes=1 << 20, max_file_age_s=60, max_files=3, clock=lambda: now[0])
    for i in range(6):
        sink.write([("connection.closed", 1.0, i, None, None, None, None)])
        sink.rotate_if_old()
        assert sink.is_open  # not old yet
        now[0] += 61  # the next look at the file finds it too old: the next event opens a new one
        sink.rotate_if_old()
        assert not sink.is_open
    assert len(_jsonl(tmp_path)) == 3  # six files made, the oldest three deleted
    assert [e.get("conn") for e in _read_all(tmp_path)] == [3, 4, 5]
    assert (sink.written, sink.dropped, sink.failed) == (6, 0, None)


def test_the_writer_process_closes_a_file_that_grew_old(tmp_path):
    """The shipper asks the process to look at its file's age while no events come."""
    from tests.harness import wait_for

    log = EventLog(str(tmp_path), "gw", "n", max_file_age_s=0.5)
    log.start()
    try:
        log.emit("connection.closed", conn=1)
        wait_for(lambda: log.written == 1, 5, what="the event written")
        first = log.file_path
        assert first is not None and log.status()["file"] == first
        wait_for(lambda: log.status()["file"] is None, 10, what="the old file closed")
        log.emit("connection.closed", conn=2)
        wait_for(lambda: log.written == 2, 5, what="the second event written")
        assert log.file_path not in (None, first)
    finally:
        log.stop()
    assert len(_jsonl(tmp_path)) == 2 and [e.get("conn") for e in _read_all(tmp_path)] == [1, 2]


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
    from junction.events.sink import _line, entry_builder

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


def _layout_values(layout, value_of):
    return tuple(_layout_values(name, value_of) if isinstance(name, tuple) else value_of(name) for name in layout)


def _flat(layout):
    for name in layout:
        yield from (_flat(name) if isinstance(name, tuple) else (name,))


@pytest.mark.parametrize("carried", [None, "other-node/7"])
@pytest.mark.parametrize("entry_kind", sorted(LAYOUTS))
def test_compact_entries_are_written_as_the_events_they_stand_for(tmp_path, entry_kind, carried):
    """Stamped in seconds; the message's number (or its carried trace id) and one queue's name
    stand for message_id and queues."""
    kinds, layout = LAYOUTS[entry_kind]
    named = {DERIVED[name][0] if name in DERIVED else name for name in _flat(layout)}
    assert all(named >= set(schema.KINDS[kind]) for kind in kinds)  # no field left null

    def value_of(name):
        if name == "message_number":
            return 42
        if name == "message_trace":
            return carried
        if name == "queue_names":
            return "q1"
        return 3 if name in ("delivery_count", "size", "group_seq") else f"{name}-1"

    def field_of(name):
        if name == "message_id":
            return "node-1/42" if carried is None else carried
        return ["q1"] if name == "queues" else value_of(name)

    log = EventLog(str(tmp_path), "core1", "node-1")
    log.put_entry((entry_kind, 2.0, *_layout_values(layout, value_of)))
    log.start()
    log.stop()
    expected = [
        Event(kind, 2000.0, "core1", "node-1", {name: field_of(name) for name in schema.KINDS[kind]}) for kind in kinds
    ]
    assert _read_all(tmp_path) == expected
    with open(os.path.join(tmp_path, _jsonl(tmp_path)[0]), "rb") as fh:  # key order as encode writes it
        assert [list(json.loads(line)) for line in fh.read().splitlines()] == [
            list(json.loads(encode(e))) for e in expected
        ]
    assert (log.written, log.dropped) == (len(kinds), 0)
    full = EventLog(str(tmp_path), "core1", "node-1", max_queued=0)
    full.put_entry((entry_kind, 2.0, *_layout_values(layout, value_of)))
    assert full.dropped == len(kinds)  # each event it stands for is counted


def test_a_compact_sent_entry_names_every_queue_of_a_tuple(tmp_path):
    from junction.events.sink import SENT, entry_builder

    build = entry_builder("message.sent", "core1", "node-1", LAYOUTS[SENT][1])
    values = (SENT, 1.5, 9, None, None, "a", ("q1", "q2"), 5, False, None, None, "MULTICAST", ("c", "u", None))
    assert build(values)["queues"] == ("q1", "q2") and build(values)["ts"] == 1500.0
    assert build((*values[:6], (), *values[7:]))["queues"] == ()


@pytest.mark.parametrize("grouped", [True, False], ids=["entries", "rows"])
def test_the_broker_cores_message_events_name_their_fields(tmp_path, grouped):
    """MessageEvents' compact entries (a duplicate id and a group) and rows (neither)
    against the schema: what a real message's events say."""
    from types import SimpleNamespace

    from junction.brokercore.events import MessageEvents
    from junction.model.message import Message, RoutingType

    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 2.0)
    events = MessageEvents(log, "node-1")
    properties = {"_AMQ_DUPL_ID": b"d-1", "JMSXGroupID": "g", "JMSXGroupSeq": 7} if grouped else {}
    message = Message(
        "orders", b"x" * 10, durable=True, routing_type=RoutingType.ANYCAST, message_id=42, properties=properties
    )
    queue = SimpleNamespace(name="orders")
    connection = SimpleNamespace(id=9, client_id="c-9")
    session = SimpleNamespace(connection=connection, user="alice", event_context=None)
    consumer = SimpleNamespace(id=5, event_context=None)
    ref = SimpleNamespace(message=message, queue=queue, delivery_count=2)
    events.sent(message, [queue], session)
    events.delivered(ref, consumer, session)
    events.acknowledged(ref, None, session)  # an ack that names no consumer
    events.delivered_and_acknowledged(ref, consumer, session)
    assert session.event_context == ("9", "alice", "c-9") and consumer.event_context == ("orders", "5", "9", "alice", "c-9")
    assert (len(log.queue), len(log.rows) // ROW.size) == ((4, 0) if grouped else (0, 4))
    log.start()
    log.stop()
    dup = "d-1" if grouped else None
    common = {"message_id": "node-1/42", "duplicate_id": dup, "address": "orders", "queue": "orders",
              "conn": "9", "user": "alice", "client_id": "c-9"}
    sent = {"message_id": "node-1/42", "duplicate_id": dup, "address": "orders", "queues": ["orders"],
            "size": message.encoded_size(), "durable": True, "group_id": "g" if grouped else None,
            "group_seq": 7 if grouped else None, "conn": "9", "user": "alice", "client_id": "c-9",
            "routing_type": "ANYCAST"}
    assert [(e.kind, e.fields) for e in _read_all(tmp_path)] == [
        ("message.sent", sent),
        ("message.delivered", {**common, "consumer": "5", "delivery_count": 2}),
        ("message.acknowledged", {**common, "consumer": None}),
        ("message.delivered", {**common, "consumer": "5", "delivery_count": 2}),
        ("message.acknowledged", {**common, "consumer": "5"}),
    ]


def test_the_broker_cores_message_events_sample_whole_messages_by_trace_id(tmp_path):
    """Sampled: a message has all its events or none, decided by its trace id, so a message
    carried in from another node (its trace id in the message) is decided as there."""
    from types import SimpleNamespace

    from junction.brokercore.events import TRACE_NATIVE, MessageEvents
    from junction.model.message import Message

    log = EventLog(str(tmp_path), "core1", "node-1", sample_rate=0.5)
    events = MessageEvents(log, "node-1")
    queue = SimpleNamespace(name="q")
    session = SimpleNamespace(connection=None, user=None, event_context=None)
    consumer = SimpleNamespace(id=1, event_context=None)
    chosen = set()
    for n in range(400):
        message = Message("q", b"", message_id=n)
        if n % 2:
            message.native[TRACE_NATIVE] = f"node-0/{n}".encode()
        trace = f"node-0/{n}" if n % 2 else f"node-1/{n}"
        if log.sampled(trace):
            chosen.add(trace)
        ref = SimpleNamespace(message=message, queue=queue, delivery_count=1)
        events.sent(message, [queue], session)
        events.delivered(ref, consumer, session)
        events.acknowledged(ref, consumer, session)
        events.delivered_and_acknowledged(ref, consumer, session)
    assert 100 < len(chosen) < 300
    log.start()
    log.stop()
    by_kind: dict = {}
    for event in _read_all(tmp_path):
        by_kind.setdefault(event.kind, []).append(event.get("message_id"))
    assert set(by_kind) == {"message.sent", "message.delivered", "message.acknowledged"}
    assert len(by_kind["message.sent"]) == len(chosen) and set(by_kind["message.sent"]) == chosen
    assert len(by_kind["message.delivered"]) == len(by_kind["message.acknowledged"]) == 2 * len(chosen)
    assert set(by_kind["message.delivered"]) == set(by_kind["message.acknowledged"]) == chosen


def test_values_marshal_cannot_carry_are_written_as_the_encoder_writes_them(tmp_path):
    import enum

    class Colour(enum.IntEnum):
        RED = 2

    class Text(str):
        pass

    class Thing:
        def __str__(self):
            return "a thing"

    log = EventLog(str(tmp_path), "gw", "n")
    log.emit("connection.closed", conn=Text("c1"), bytes_in=Colour.RED, reason=Thing())
    log.emit("connection.closed", conn="plain", reason=["x", Text("y"), {"k": Colour.RED}])
    log.start()
    log.stop()
    first, second = _read_all(tmp_path)
    assert (first.get("conn"), first.get("bytes_in"), first.get("reason")) == ("c1", 2, "a thing")
    assert second.get("reason") == ["x", "y", {"k": 2}]
    assert (log.written, log.dropped, log.failed) == (2, 0, None)


def test_a_spool_write_error_fails_the_log_and_it_drops_from_then_on(tmp_path, caplog):
    import shutil

    from tests.harness import wait_for

    directory = tmp_path / "events"
    log = EventLog(str(directory), "gw", "n")
    log.start()
    try:
        shutil.rmtree(directory)  # the spool is gone with it
        log.emit("connection.closed", conn=1)
        wait_for(lambda: log.failed is not None, 10, what="the log failed")
        assert "No such file or directory" in log.failed and log.dropped == 1
        log.emit("connection.closed", conn=2)
        assert log.dropped == 2 and log.status()["queued"] == 0
    finally:
        log.stop()
    assert "events are dropped from now on" in caplog.text
    assert log.status()["writer_pid"] is None


def test_a_full_spool_drops_and_counts_and_says_so_once(tmp_path, caplog):
    from tests.harness import wait_for

    log = EventLog(str(tmp_path), "gw", "n", max_spool_bytes=10)  # no batch fits
    log.start()
    try:
        for i in range(3):
            log.emit("connection.closed", conn=i)
            wait_for(lambda i=i: log.dropped == i + 1, 5, what=f"event {i} dropped")
    finally:
        log.stop()
    assert (log.written, log.failed, log.spool_bytes) == (0, None, 0)
    assert caplog.text.count("is full") == 1


def test_a_writer_process_that_dies_is_started_again_and_the_spool_keeps_its_events(tmp_path, caplog, monkeypatch):
    import signal

    from junction.events import writer as writer_module
    from tests.harness import wait_for

    monkeypatch.setattr(writer_module, "WRITER_RESTART_INTERVAL_S", 0.5)  # (5 s: a slow test)
    log = EventLog(str(tmp_path), "gw", "n")
    log.start()
    try:
        log.emit("connection.closed", conn=0)
        wait_for(lambda: log.written == 1, 5, what="the first event written")
        first = log.status()["writer_pid"]
        os.kill(first, signal.SIGKILL)
        for i in range(1, 50):
            log.emit("connection.closed", conn=i)
        wait_for(lambda: log.status()["writer_restarts"] == 1, 15, what="the writer process started again")
        wait_for(lambda: log.written == 50, 10, what="every event written")
        assert log.status()["writer_pid"] != first and log.failed is None and log.dropped == 0
    finally:
        log.stop()
    assert [e.get("conn") for e in _read_all(tmp_path)] == list(range(50))
    assert "starting it again" in caplog.text


def test_what_a_killed_writer_left_in_the_spool_is_written_at_the_next_start(tmp_path):
    import marshal

    log = EventLog(str(tmp_path), "gw", "n")
    os.makedirs(log.spool_directory)
    with open(os.path.join(log.spool_directory, "0000000000000007.frames"), "wb") as fh:
        fh.write(marshal.dumps([("connection.closed", 1.0, "left", None, None, None, None)]))
    log.start()
    log.emit("connection.closed", conn="new")
    log.stop()
    assert [e.get("conn") for e in _read_all(tmp_path)] == ["left", "new"]
    assert os.listdir(log.spool_directory) == []


def test_stop_writes_what_is_queued_and_ends_the_writer_process(tmp_path):
    log = EventLog(str(tmp_path), "gw", "n")
    log.start()
    pid = log.status()["writer_pid"]
    for i in range(12_000):  # more than one frame
        log.emit("connection.closed", conn=i)
    log.stop()
    assert [e.get("conn") for e in _read_all(tmp_path)] == list(range(12_000))
    assert (log.written, log.dropped, log.status()["queued"]) == (12_000, 0, 0)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (and reaped)


def test_the_converter_writes_each_segment_reports_after_it_and_keeps_a_bad_one(tmp_path):
    import io
    import marshal

    from junction.events.sink import Converter, take_frames

    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "0000000000000001.frames").write_bytes(
        marshal.dumps([("connection.closed", 1.0, 7, None, None, None, None), ("nope", 1.0)])
    )
    (spool / "0000000000000002.frames").write_bytes(b"not marshal")
    (spool / "0000000000000003.tmp").write_bytes(b"still being written")
    wake_r, wake_w = os.pipe()
    os.close(wake_w)  # the node is stopping: convert what is there, then end
    replies = io.BytesIO()
    sink = EventSink(str(tmp_path), "gw", "n", max_file_bytes=1 << 20, max_file_age_s=60, max_files=3)
    try:
        Converter(sink, str(spool), wake_r, replies).run()
    finally:
        os.close(wake_r)
    rest = bytearray(replies.getvalue())
    frames = [marshal.loads(frame) for frame in take_frames(rest)]
    assert rest == b""  # nothing cut
    written, dropped, failed, path, cpu_s, problems, converted = frames[0]
    assert (written, dropped, failed) == (1, 0, None) and path.endswith(".jsonl") and cpu_s > 0
    assert problems == ["event not written: nope: unknown event kind 'nope'"]
    assert "0000000000000002.frames is not readable" in frames[1][5][0]
    assert frames[-1][:4] == (1, 0, None, None)  # the end closed the file
    assert sorted(os.listdir(spool)) == ["0000000000000002.frames.bad", "0000000000000003.tmp"]
    assert [e.get("conn") for e in _read_all(tmp_path)] == [7]
    assert not sink.is_open


def test_a_durable_sends_event_waits_for_its_journal_record_and_a_failed_one_has_none(tmp_path):
    """message.sent is queued once the journal batch holding the message's record is
    written and synced (one listener call per batch), and never for a send the journal
    failed: the producer got an ERROR, not a receipt."""
    import errno

    from junction.brokercore.events import MessageEvents
    from junction.brokercore.journal import FaultyFiles
    from tests.unit.test_durable_stomp import Node

    fs = FaultyFiles()
    node = Node(tmp_path, fs)
    log = EventLog(str(tmp_path / "events"), "core1", "node-1", categories=("message",))
    events = node.server.message_events = MessageEvents(log, "node-1", node.server.storage)
    client = node.client()
    sent = lambda: [e for e in log.queued_entries() if e[0] == "sent"]  # noqa: E731
    client.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r1"}, b"one")
    client.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r2"}, b"two")
    assert client.take() == [] and sent() == [], "no receipt and no message.sent before the sync"
    assert events.waiting == 2
    frames = client.run()
    assert [f.command for f in frames] == ["RECEIPT", "RECEIPT"]
    assert [e[2] for e in sent()] == sorted(e[2] for e in sent()) and len(sent()) == 2
    assert events.waiting == 0
    client.write("SEND", {"destination": "/queue/q", "persistent": "false", "receipt": "r3"}, b"three")
    assert len(sent()) == 3  # nothing to wait for: queued at once
    fs.fail_fsync = errno.EIO
    client.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r4"}, b"lost")
    frames = client.run()
    assert [(f.command, f.get("receipt-id")) for f in frames] == [("RECEIPT", "r3"), ("ERROR", "r4")]
    assert len(sent()) == 3 and events.waiting == 0  # the failed send has no event


def test_waiting_sends_are_queued_in_order_as_the_storage_mark_passes_them(tmp_path):
    """Against a fake storage (the real journal is in the test above): rows leave in
    send order, exactly those whose mark is passed, however the marks arrive; full
    rows count the rest as dropped; a failure forgets what waits.  An entry (a message
    with a duplicate id, a group or a carried trace id) waits for its own Deferred."""
    from types import SimpleNamespace

    from twisted.internet import defer

    from junction.brokercore.events import MessageEvents

    listeners = []
    counter = SimpleNamespace(records_submitted=0)
    storage = SimpleNamespace(when_stored=lambda listener: listeners.append(listener) or counter)
    log = EventLog(str(tmp_path), "core1", "node-1", max_queued=8)
    events = MessageEvents(log, "node-1", storage)
    (heard,) = listeners
    numbers = lambda: [row[2] for row in ROW.iter_unpack(log.rows)]  # noqa: E731

    def send(n):
        counter.records_submitted += 1 + n % 3  # other records between sends
        events.put_when_stored(ROW.pack(0, 1.5, n, 100 + n), defer.Deferred())
        return counter.records_submitted

    marks = [send(n) for n in range(6)]
    assert events.waiting == 6 and not log.rows
    heard(marks[0] - 1)
    assert not log.rows
    heard(marks[2])  # the first three
    assert numbers() == [0, 1, 2] and events.waiting == 3
    assert ROW.unpack(log.rows[: ROW.size]) == (0, 1.5, 0, 100)  # the whole row
    heard(marks[2])  # the same again: nothing new
    more = [send(n) for n in range(6, 10)]
    heard(more[1])  # past the rest of the first six and two of the new
    assert numbers() == list(range(8)) and events.waiting == 2
    heard(more[-1] + 5)  # the rows (8) are full: counted as dropped, not queued
    assert numbers() == list(range(8)) and log.dropped == 2 and events.waiting == 0
    send(10)
    heard(None)  # the storage failed: what waits is never queued
    assert events.waiting == 0
    heard(counter.records_submitted)
    assert len(log.rows) == 8 * ROW.size and log.dropped == 2
    done = defer.succeed(None)  # fired already (a refused record fails at once): its own callback
    events.put_when_stored(ROW.pack(0, 1.5, 11, 100), done)
    failed = defer.fail(RuntimeError("refused"))
    events.put_when_stored(ROW.pack(0, 1.5, 12, 100), failed)
    failed.addErrback(lambda _: None)
    assert log.dropped == 3 and events.waiting == 0  # "fired" found the rows full
    entry = ("sent", 1.5, 13, "other/1", None, "a", "a", 1, True, None, None, None, (None, None, None))
    own = defer.Deferred()
    events.put_when_stored(entry, own)
    assert events.waiting == 0 and not log.queue
    own.callback(None)
    assert list(log.queue) == [entry]
