"""Fuzzing the OpenWire codec, as the CORE, STOMP and AMQP codecs are fuzzed.

* random commands of every type, in all four encodings, round-trip through a
  codec under random chunking;
* random bytes, and the real client's frames mutated, truncated and
  extended, never raise anything but the codec's protocol error, and the
  codec never holds more than its frame limit;
* hostile lengths (a byte array of 2 GiB, a map of 2^31 entries, deep
  nesting) are refused without allocating what they claim.
"""

from __future__ import annotations

import struct
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from junction.protocols.openwire.codec import (
    Negotiated,
    OpenWireCodec,
    OpenWireLimits,
    _decode,
    decode_frame,
    encode_frame,
)
from junction.protocols.openwire.command_types import CommandType
from junction.protocols.openwire.errors import MalformedCommand, OpenWireProtocolError
from junction.protocols.openwire.marshal import (
    BOOL,
    BYTE,
    BYTES,
    INT,
    LONG,
    MAGIC,
    STRING,
    STRUCTURES,
    JavaThrowable,
    StackFrame,
    WireContext,
)
from junction.protocols.openwire.messages import ActiveMQTextMessage
from junction.protocols.openwire.primitives import decode_primitive_map
from junction.protocols.openwire.structures import ProducerId
from junction.protocols.openwire.wireformat import WireFormat
from tests.unit.openwire_frames import REAL_FRAMES

MODES = [(tight, cache) for tight in (False, True) for cache in (False, True)]

# Java strings: any UTF-16 units but lone surrogates are fine for the codec; keep them simple.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
NSTR = st.none() | TEXT
INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)

_PRIMITIVES = {
    BOOL: st.booleans(),
    BYTE: st.integers(-128, 127),
    INT: INT32,
    LONG: INT64,
    STRING: NSTR,
    BYTES: st.none() | st.binary(max_size=16),
    MAGIC: st.just(b"ActiveMQ"),
}

THROWABLES = st.recursive(
    st.builds(JavaThrowable, NSTR, NSTR, st.just(()), st.none()),
    lambda inner: st.builds(JavaThrowable, NSTR, NSTR,
                            st.lists(st.builds(StackFrame, NSTR, NSTR, NSTR, INT32), max_size=2).map(tuple),
                            st.none() | inner),
    max_leaves=3,
)


def structures_of(types: frozenset, depth: int):
    """A strategy for any structure whose type byte is in ``types`` (any, when empty)."""
    candidates = sorted(types or (t for t in STRUCTURES if t != CommandType.WIREFORMAT_INFO))
    return st.sampled_from(candidates).flatmap(lambda t: structure_of(STRUCTURES[t], depth))


def field_strategy(kind, depth: int):
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind.shape == "throwable":
        return st.none() | THROWABLES
    if depth >= 2:
        return st.none() if kind.shape != "array" else st.none() | st.just(())
    inner = structures_of(kind.accepts, depth + 1)
    if kind.shape == "array":
        return st.none() | st.lists(st.none() | inner, max_size=2).map(tuple)
    return st.none() | inner


def structure_of(cls, depth: int = 0):
    return st.builds(cls, *[field_strategy(k, depth) for k in cls._KINDS])


ANY_COMMAND = structures_of(frozenset(), 0)


def feed(codec, chunks):
    out = []
    for chunk in chunks:
        out += codec.receive_data(chunk)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(MODES), st.lists(ANY_COMMAND, min_size=1, max_size=4), st.data())
def test_random_commands_round_trip_in_every_encoding(mode, commands, data):
    tight, cache = mode
    offer = WireFormat(tight_encoding=tight, cache_enabled=cache, cache_size=data.draw(st.integers(0, 3)),
                       stack_trace=data.draw(st.booleans()))
    server, client = OpenWireCodec(offer), OpenWireCodec(offer)
    [negotiated] = server.receive_data(client.initiate())
    client.receive_data(server.initiate())
    stream = b"".join(client.send(c) for c in commands)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    chunks = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)], strict=True)]
    got = feed(server, chunks)
    if not negotiated.settled.stack_trace:  # stack frames and causes do not travel: compare without them
        commands = [_strip_traces(c) for c in commands]
    assert got == commands
    assert server.buffered == 0


def _strip_traces(obj):
    import dataclasses

    if isinstance(obj, JavaThrowable):
        return JavaThrowable(obj.class_name, obj.message)
    if isinstance(obj, tuple):
        return tuple(_strip_traces(o) for o in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _strip_traces(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400), st.booleans(), st.sampled_from(MODES))
def test_random_bytes_raise_only_protocol_errors(data, after_negotiation, mode):
    tight, cache = mode
    codec = OpenWireCodec(WireFormat(tight_encoding=tight, cache_enabled=cache),
                          OpenWireLimits(max_frame_size=300))
    if after_negotiation:
        codec.receive_data(OpenWireCodec(WireFormat(tight_encoding=tight, cache_enabled=cache)).initiate())
    try:
        events = codec.receive_data(data)
    except OpenWireProtocolError:
        return
    assert codec.buffered <= 304
    for event in events:
        if not isinstance(event, Negotiated):
            assert encode_frame(event, codec.wire_format and WireFormat(tight_encoding=tight))


def _mode_context(mode: str) -> WireContext:
    return WireContext(mode.startswith("tight"), True, 16383 if mode.endswith("-cache") else 0)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from([(m, bytes.fromhex(h)) for m, n, h in REAL_FRAMES if n != "WFI"]),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.integers(-8, 8), st.booleans())
def test_mutated_real_frames_raise_only_protocol_errors(frame, mutations, resize, fix_size):
    mode, data = frame
    body = bytearray(data[4:])
    for pos, value in mutations:
        body[pos % len(body)] = value
    if resize < 0:
        del body[resize:]
    else:
        body += bytes(resize)
    if not body:
        return
    ctx = _mode_context(mode)
    try:
        _decode(bytes(body), 0, len(body), ctx)
    except OpenWireProtocolError:
        pass
    codec = OpenWireCodec(limits=OpenWireLimits(max_frame_size=4096))
    codec.receive_data(bytes.fromhex(next(h for m, n, h in REAL_FRAMES if n == "WFI")))
    size = len(body) if fix_size else struct.unpack(">I", data[:4])[0]
    try:
        codec.receive_data(struct.pack(">I", size) + bytes(body))
    except OpenWireProtocolError:
        pass
    assert codec.buffered <= 4100


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except MalformedCommand:
        pass
    else:  # pragma: no cover - the test asserts it raises
        raise AssertionError("no error")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_hostile_lengths_allocate_nothing_they_claim():
    # A message whose content claims 2 GiB.
    frame = bytearray(encode_frame(ActiveMQTextMessage(content=b"abcd")))
    at = frame.index(b"\x00\x00\x00\x04abcd")
    frame[at:at + 4] = struct.pack(">i", 0x7FFFFFFF)
    # the codec generates its reader of a command type at the first decode (a one-time cost
    # of about 1 MB, not the frame's): read a good frame of the type first
    decode_frame(encode_frame(ActiveMQTextMessage(content=b"abcd")))
    assert _peak(lambda: decode_frame(bytes(frame))) < 64 * 1024
    # A primitive map claiming 2^31-1 entries.
    assert _peak(lambda: decode_primitive_map(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16)) < 64 * 1024
    # A tight BooleanStream claiming 32767 bytes in a short frame.
    fmt = WireFormat(tight_encoding=True)
    assert _peak(lambda: decode_frame(struct.pack(">IB", 4, 4) + b"\x80\x7f\xff", fmt)) < 64 * 1024


def test_nesting_is_bounded():
    """Message -> data_structure -> Message ... deeper than max_depth is refused, not a RecursionError."""
    msg = ActiveMQTextMessage(producer_id=ProducerId("c", 1, 1))
    for _ in range(40):
        msg = ActiveMQTextMessage(data_structure=msg)
    frame = encode_frame(msg)
    codec = OpenWireCodec()
    codec.receive_data(OpenWireCodec(WireFormat(tight_encoding=False)).initiate())
    try:
        codec.receive_data(frame)
    except MalformedCommand as exc:
        assert "nested more than 32 deep" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("no error")
    shallow = ActiveMQTextMessage(data_structure=ActiveMQTextMessage(data_structure=ActiveMQTextMessage()))
    assert decode_frame(encode_frame(shallow)) == shallow
