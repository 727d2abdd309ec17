"""The straight-line readers and writers (:mod:`junction.protocols.openwire.fast`) agree with
the field-by-field path on everything: the real client's frames, every truncation, corruptions of
every byte, and commands built with edge values.

Agreement means: where the fast path returns, the field-by-field path returns an equal command
(or the same bytes); where the field-by-field path fails, the fast path fails too (and the
codec then gives the field-by-field path's error).
"""

from __future__ import annotations

import pytest

from junction.protocols.errors import LocalProtocolError
from junction.protocols.openwire import codec
from junction.protocols.openwire.codec import _decode, _decode_fields, _encode, _encode_fields
from junction.protocols.openwire.errors import MalformedCommand
from junction.protocols.openwire.fast import fast_reader, fast_writer
from junction.protocols.openwire.marshal import STRUCTURES, WireContext
from junction.protocols.openwire.messages import (
    ActiveMQBytesMessage,
    ActiveMQTextMessage,
    MessageAck,
    MessageDispatch,
    text_content,
)
from junction.protocols.openwire.primitives import (
    Byte,
    Char,
    Float,
    Int,
    Long,
    Short,
    decode_primitive_map,
    encode_primitive_map,
)
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ActiveMQTempTopic,
    ConnectionId,
    ConsumerId,
    LocalTransactionId,
    MessageId,
    ProducerId,
)
from tests.unit.openwire_frames import REAL_FRAMES

MODES = ("tight-nocache", "loose-nocache")
FRAMES = [(mode, name, bytes.fromhex(hx)) for mode, name, hx in REAL_FRAMES if mode in MODES]
HOT = ("TextMessage", "MessageDispatch", "MessageAck", "MapMessage")
CID = "ID:host-40000-1700000000000-1:1"


def frame(mode: str, name: str) -> bytes:
    return next(data for m, n, data in FRAMES if (m, n) == (mode, name))


def ctx(tight: bool = True) -> WireContext:
    return WireContext(tight=tight, stack_trace=True, cache_slots=0)


def outcome(fn, buf, end, tight=True):
    try:
        return "ok", fn(buf, 4, end, ctx(tight))
    except Exception as exc:  # noqa: BLE001 - the outcome is compared, whatever it is
        return "error", (type(exc), str(exc))


_READERS: dict = {}


def fast_outcome(buf, end, tight=True):
    key = (buf[4], tight)
    if key not in _READERS:
        _READERS[key] = fast_reader(STRUCTURES[key[0]], tight) if key[0] in STRUCTURES else None
    read = _READERS[key]
    if read is None:
        return "none", None
    try:
        return "ok", read(buf, 5, end)
    except Exception:  # noqa: BLE001
        return "error", None


def test_the_hot_commands_have_fast_paths_and_take_them():
    for mode, name, data in FRAMES:
        tight = mode.startswith("tight")
        if name in HOT:
            status, command = fast_outcome(data, len(data), tight)
            assert status == "ok", name
            assert command == _decode_fields(data, 4, len(data), ctx(tight)), name
            assert _encode(command, ctx(tight)) == data == _encode_fields(command, ctx(tight)), name
            assert fast_writer(type(command), tight)(command) == data[5:], name


@pytest.mark.parametrize("mode,name,data", FRAMES, ids=[f"{m}-{n}" for m, n, _ in FRAMES])
def test_real_frames_read_and_write_alike(mode, name, data):
    tight = mode.startswith("tight")
    slow = outcome(_decode_fields, data, len(data), tight)
    assert slow[0] == "ok"
    status, command = fast_outcome(data, len(data), tight)
    if status == "ok":
        assert command == slow[1]
    assert _decode(data, 4, len(data), ctx(tight)) == slow[1]
    assert _encode(slow[1], ctx(tight)) == _encode_fields(slow[1], ctx(tight)) == data


def _mutations(data: bytes):
    for i in range(5, len(data)):
        for value in {data[i] ^ 0xFF, data[i] ^ 0x01, data[i] ^ 0x80, 0, 0x7F, 0x80, 0xFF}:
            if value != data[i]:
                yield data[:i] + bytes((value,)) + data[i + 1:]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", HOT)
def test_truncations_and_corruptions_agree(mode, name):
    tight = mode.startswith("tight")
    data = frame(mode, name)
    cases = [(data + b"\x00\x01\x02", n) for n in range(5, len(data) + 3)]  # bytes of a next frame behind
    cases += [(m, len(m)) for m in _mutations(data)]
    fast_returned = 0
    for buf, end in cases:
        slow = outcome(_decode_fields, buf, end, tight)
        status, command = fast_outcome(buf, end, tight)
        if status == "ok":
            fast_returned += 1
            assert slow == ("ok", command), (buf.hex(), end)
        whole = outcome(_decode, buf, end, tight)
        assert whole == slow, (buf.hex(), end)
    assert fast_returned > len(cases) // 4  # corruptions of values still read fast


def _pid(n: int = 1) -> ProducerId:
    return ProducerId(CID, n, 1)


EDGE_LONGS = (0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, -1, -(1 << 63), (1 << 63) - 1)


def built_commands():
    for value in EDGE_LONGS:
        yield ActiveMQTextMessage(
            command_id=7, response_required=True, producer_id=_pid(), destination=ActiveMQQueue("q\u00e9\x00"),
            transaction_id=LocalTransactionId(value, None), message_id=MessageId(None, _pid(), value, value),
            persistent=True, priority=9, timestamp=value, expiration=value, content=text_content("h\U0001F600"),
            marshalled_properties=b"\x00\x00\x00\x00", user_id="\u20ac" * 3, group_id="", type="t",
            reply_to=ActiveMQTempTopic("ID:x:1:1"), correlation_id="c" * 300,
        )
    yield ActiveMQBytesMessage(producer_id=_pid(), destination=ActiveMQQueue("q"), content=b"")
    yield MessageDispatch(consumer_id=ConsumerId(CID, 1, 2), destination=ActiveMQQueue("q"),
                          message=ActiveMQTextMessage(destination=ActiveMQQueue("q"), content=b"x" * 70000),
                          redelivery_counter=3)
    yield MessageDispatch(consumer_id=ConsumerId(CID, 1, 2), destination=None, message=None)
    yield MessageAck(destination=ActiveMQQueue("q"), consumer_id=ConsumerId(CID, 1, 2), ack_type=2,
                     first_message_id=MessageId("ID:t", None, 1, 2), last_message_id=MessageId(None, _pid(), 3, 4),
                     message_count=2)


@pytest.mark.parametrize("tight", [True, False])
@pytest.mark.parametrize("command", list(built_commands()), ids=lambda c: type(c).__name__)
def test_built_commands_write_alike_and_read_back(command, tight):
    data = _encode_fields(command, ctx(tight))
    assert fast_writer(type(command), tight)(command) == data[5:]
    assert _encode(command, ctx(tight)) == data
    read = fast_reader(type(command), tight)
    assert read(data, 5, len(data)) == _decode_fields(data, 4, len(data), ctx(tight)) == command


@pytest.mark.parametrize(
    "command",
    [
        ActiveMQTextMessage(priority=300),  # not a byte
        ActiveMQTextMessage(type=b"bytes"),  # not a string
        ActiveMQTextMessage(group_sequence=1 << 40),  # not an int
        ActiveMQTextMessage(destination=ProducerId("x", 1, 1)),  # not a destination
        ActiveMQTextMessage(correlation_id="\u20ac" * 30000),  # beyond a string's bytes
    ],
)
@pytest.mark.parametrize("tight", [True, False])
def test_what_the_writer_refuses_the_codec_refuses_as_before(command, tight):
    with pytest.raises(Exception):  # noqa: B017 - whatever the fast writer raises, it gives up
        fast_writer(type(command), tight)(command)
    with pytest.raises(LocalProtocolError) as slow:
        _encode_fields(command, ctx(tight))
    with pytest.raises(LocalProtocolError) as whole:
        _encode(command, ctx(tight))
    assert str(whole.value) == str(slow.value)


def test_open_typed_fields_are_left_to_the_field_by_field_path():
    """A message carrying a data structure (an advisory) reads and writes, the slow way."""
    from junction.protocols.openwire.commands import DestinationInfo

    advisory = ActiveMQTextMessage(data_structure=DestinationInfo(destination=ActiveMQQueue("q"), operation_type=0))
    for tight in (True, False):
        data = _encode(advisory, ctx(tight))
        assert data == _encode_fields(advisory, ctx(tight))
        with pytest.raises(Exception):  # noqa: B017
            fast_reader(ActiveMQTextMessage, tight)(data, 5, len(data))
        assert _decode(data, 4, len(data), ctx(tight)) == advisory


CACHE_MODES = ("tight-cache", "loose-cache")


def cache_ctx(tight: bool, slots: int = 16383) -> WireContext:
    return WireContext(tight=tight, stack_trace=True, cache_slots=slots)


def cache_state(c: WireContext) -> tuple:
    return list(c._in), dict(c._out), list(c._out_slots), c._next


@pytest.mark.parametrize("mode", CACHE_MODES)
def test_the_real_clients_cached_frames_read_alike_through_the_cache(mode):
    """The 5.17.2 client's frames with the cache on, in connection order: the hot ones take the
    fast path, and it returns what the field-by-field path does and fills the same slots."""
    tight = mode.startswith("tight")
    frames = [(n, bytes.fromhex(h)) for m, n, h in REAL_FRAMES if m == mode and n != "WFI"]
    fast_ctx, slow_ctx = cache_ctx(tight), cache_ctx(tight)
    taken = set()
    for name, data in frames:
        slow = _decode_fields(data, 4, len(data), slow_ctx)
        read = fast_reader(STRUCTURES[data[4]], tight, cache=True)
        if read is not None:
            fast_ctx.begin_read()
            try:
                command = read(data, 5, len(data), fast_ctx)
            except Exception:  # noqa: BLE001 - a give-up: the codec then reads it the slow way
                fast_ctx.forget_kept()
                command = _decode_fields(data, 4, len(data), fast_ctx)
            else:
                taken.add(name)
            assert command == slow, name
        else:
            _decode_fields(data, 4, len(data), fast_ctx)
        assert cache_state(fast_ctx) == cache_state(slow_ctx), name
    assert set(HOT) <= taken


def _cached_traffic():
    """Commands whose cached fields repeat and alternate, as a connection's do."""
    queues = [ActiveMQQueue("q"), ActiveMQQueue("r"), ActiveMQTempTopic("ID:t-1")]
    consumers = [ConsumerId(CID, 1, 1), ConsumerId(CID, 1, 2)]
    for i in range(12):
        q, c = queues[i % 3], consumers[i % 2]
        pid = ProducerId(CID, 1, i % 2)
        message = ActiveMQTextMessage(producer_id=pid, destination=q, message_id=MessageId(None, pid, 1, i),
                                      transaction_id=LocalTransactionId(7, ConnectionId(CID)) if i % 4 == 0 else None,
                                      content=text_content(f"m{i}"), reply_to=queues[(i + 1) % 3])
        yield MessageDispatch(consumer_id=c, destination=q, message=message, redelivery_counter=i % 3)
        yield MessageAck(destination=q, consumer_id=c, ack_type=2, first_message_id=message.message_id,
                         last_message_id=message.message_id, message_count=1)


@pytest.mark.parametrize("slots", [1, 2, 3, 5, 1024])
@pytest.mark.parametrize("tight", [True, False])
def test_cached_writes_match_the_field_by_field_writer_and_read_back(tight, slots):
    """Through one connection's cache (small ones go round within a frame): the fast writer
    writes the bytes and assigns the slots the field-by-field writer does, the fast reader on
    the other side gets every command back, and both sides' slots agree."""
    fast_out, slow_out = cache_ctx(tight, slots), cache_ctx(tight, slots)
    fast_in, slow_in = cache_ctx(tight, slots), cache_ctx(tight, slots)
    for command in _cached_traffic():
        expected = _encode_fields(command, slow_out)
        fast_out.begin()
        assert fast_writer(type(command), tight, cache=True)(command, fast_out) == expected[5:]
        assert cache_state(fast_out) == cache_state(slow_out)
        fast_in.begin_read()
        assert fast_reader(type(command), tight, cache=True)(expected, 5, len(expected), fast_in) == command
        assert _decode_fields(expected, 4, len(expected), slow_in) == command
        assert cache_state(fast_in) == cache_state(slow_in)


@pytest.mark.parametrize("tight", [True, False])
def test_a_cached_read_that_gives_up_leaves_the_slots_as_they_were(tight):
    """An advisory (an open-typed field the fast reader leaves) after its destination and ids
    went into new slots: the give-up undoes them, and the codec's read fills them once."""
    from junction.protocols.openwire.commands import DestinationInfo

    out = cache_ctx(tight, 4)
    first = ActiveMQTextMessage(producer_id=ProducerId(CID, 1, 1), destination=ActiveMQQueue("a"))
    advisory = ActiveMQTextMessage(producer_id=ProducerId(CID, 1, 9), destination=ActiveMQQueue("b"),
                                   data_structure=DestinationInfo(destination=ActiveMQQueue("q"), operation_type=0))
    frames = [_encode(first, out), _encode(advisory, out)]
    inbound, reference = cache_ctx(tight, 4), cache_ctx(tight, 4)
    _decode(frames[0], 4, len(frames[0]), inbound)
    _decode_fields(frames[0], 4, len(frames[0]), reference)
    before = cache_state(inbound)
    inbound.begin_read()
    with pytest.raises(Exception):  # noqa: B017 - the fast reader gives up on the advisory
        fast_reader(ActiveMQTextMessage, tight, cache=True)(frames[1], 5, len(frames[1]), inbound)
    assert cache_state(inbound) != before  # it had filled slots
    inbound.forget_kept()
    assert cache_state(inbound) == before
    assert _decode(frames[1], 4, len(frames[1]), inbound) == advisory
    assert _decode_fields(frames[1], 4, len(frames[1]), reference) == advisory
    assert cache_state(inbound) == cache_state(reference)


def test_the_codec_takes_the_fast_path_with_and_without_the_cache():
    for mode in ("tight-nocache", "tight-cache"):
        data = bytes.fromhex(next(h for m, n, h in REAL_FRAMES if (m, n) == (mode, "ConsumerInfo")))
        codec._FAST_READERS.clear()
        cache = mode.endswith("-cache")
        _decode(data, 4, len(data), cache_ctx(True) if cache else ctx())
        assert codec._FAST_READERS[data[4], True, cache] is not None


# -- primitive maps (message properties) -----------------------------------------------------------


def _map_fields(data: bytes, max_entries=None):
    """The general reader, as decode_primitive_map ran it before its straight-line loop."""
    from junction.protocols.openwire.encoding import Decoder
    from junction.protocols.openwire.primitives import _read_map

    d = Decoder(data, 0, len(data), False, None)
    out = _read_map(d, 0, max_entries)
    if d.pos != d.end:
        raise MalformedCommand(f"{d.end - d.pos} bytes follow a primitive map")
    return out


def _map_encode_fields(mapping) -> bytes:
    from junction.protocols.openwire.encoding import Encoder
    from junction.protocols.openwire.primitives import _write_map

    e = Encoder(False, None)
    _write_map(e, mapping, 0)
    return bytes(e.buf)


MAPS = [
    {},
    {"bench_seq": Int(4711), "bench_ts": Long(1_795_000_000_123_456_789)},
    {"k": "v", "i": 7, "l": 1 << 40, "b": True, "f": False, "n": None, "d": 1.5, "\u00e9\x00": "\U0001F600"},
    {"big": Int(1 << 40), "neg": -(1 << 63), "s": "x" * 9000, "byte": Byte(3), "short": Short(-2)},
    {"nested": {"a": [1, "b"]}, "bytes": b"\x00\x01", "float": Float(0.5), "char": Char("c")},
]


@pytest.mark.parametrize("mapping", MAPS, ids=range(len(MAPS)))
def test_property_maps_write_and_read_alike(mapping):
    data = _map_encode_fields(mapping)
    assert encode_primitive_map(mapping) == data
    got = decode_primitive_map(data)
    assert got == _map_fields(data) == mapping
    assert [type(v) for v in got.values()] == [type(v) for v in _map_fields(data).values()]


def test_property_map_corruptions_and_limits_agree():
    data = _map_encode_fields(MAPS[2])
    cases = [(data[:n], None) for n in range(len(data))] + [(data, 3), (data, 100)]
    cases += [(data[:i] + bytes((v,)) + data[i + 1:], None) for i in range(len(data)) for v in (0, 1, 0x7F, 0xFF)]
    for buf, limit in cases:
        try:
            want = ("ok", _map_fields(buf, limit))
            want = (want[0], want[1], None if want[1] is None else [type(v) for v in want[1].values()])
        except Exception as exc:  # noqa: BLE001
            want = ("error", type(exc), str(exc))
        try:
            got = ("ok", decode_primitive_map(buf, limit))
            got = (got[0], got[1], None if got[1] is None else [type(v) for v in got[1].values()])
        except Exception as exc:  # noqa: BLE001
            got = ("error", type(exc), str(exc))
        assert repr(got) == repr(want), buf.hex()  # repr: a corrupted double may be NaN


@pytest.mark.parametrize("mapping", [{"k": object()}, {1: "v"}, {"x" * 70000: 1}])
def test_property_maps_the_writer_refuses_are_refused_as_before(mapping):
    with pytest.raises(Exception) as slow:  # noqa: B017 - the general writer's own error
        _map_encode_fields(mapping)
    with pytest.raises(slow.type):
        encode_primitive_map(mapping)
