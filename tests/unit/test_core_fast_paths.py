"""The CORE codec's fast paths (message headers and properties) against its field-by-field reads.

``read_headers`` and ``read_properties`` first try one ``struct`` read per run
of fixed fields and fall back to the field-by-field reads for anything
unexpected.  These tests decode the same bytes both ways (the fast paths
switched off by monkeypatching) and require the same packet or the same error,
type and message, for every truncation and many corruptions of a real-sized
SESS_SEND; and the writers' bytes against a field-by-field reference writer.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.core import message as message_module
from junction.protocols.core import packets as p
from junction.protocols.core import values as values_module
from junction.protocols.core.codec import decode_packet, encode_packet
from junction.protocols.core.encoding import Writer
from junction.protocols.core.errors import CoreProtocolError
from junction.protocols.core.message import MessageHeaders, write_headers
from junction.protocols.core.values import PropertyType, Scalar, _write_value

PROPERTIES = (
    ("bench_ts", 1_795_000_000_123_456_789),
    ("__AMQ_CID", "c2f1b7e0"),
    ("flag", True),
    ("nothing", None),
    ("i", Scalar("int", -5)),
    ("b", Scalar("byte", 7)),
    ("s", Scalar("short", 300)),
    ("f", Scalar("float", 1.5)),
    ("d", 2.25),
    ("c", Scalar("char", "x")),
    ("raw", b"\x00\x01"),
)


def _headers(properties=PROPERTIES, address="bench.queue", user_id=bytes(range(16))) -> MessageHeaders:
    return MessageHeaders(0, address, user_id, 4, True, 0, 1_795_000_000_000, 4, properties)


def _send(headers: MessageHeaders) -> bytes:
    return encode_packet(p.SessSend(bytes(range(64)), headers, True, 7, 1, channel_id=11))


def _outcome(data: bytes):
    try:
        return decode_packet(data)
    except (CoreProtocolError, UnicodeDecodeError) as exc:
        return type(exc), str(exc)


def _both(data: bytes, monkeypatch) -> tuple:
    fast = _outcome(data)
    with monkeypatch.context() as m:
        m.setattr(message_module, "_read_headers_fast", lambda r: None)
        m.setattr(values_module, "_read_properties_fast", lambda r: values_module._SLOW)
        slow = _outcome(data)
    return fast, slow


def _with_length(body: bytes) -> bytes:
    """``body`` (from the type byte on) as one whole packet, its length prefix rewritten."""
    return struct.pack(">i", len(body)) + body


WIRE = [
    _send(_headers()),
    _send(_headers(properties=None, address=None, user_id=None)),
    encode_packet(p.SessReceiveMsg(b"abc", _headers(), 3, 1, channel_id=11)),
]


@pytest.mark.parametrize("wire", WIRE, ids=["all-types", "bare", "receive"])
def test_every_truncation_gives_the_same_error_both_ways(wire, monkeypatch):
    assert _both(wire, monkeypatch)[0] == decode_packet(wire)
    errors = 0
    for cut in range(13, len(wire)):
        fast, slow = _both(_with_length(wire[4:cut]), monkeypatch)
        assert repr(fast) == repr(slow), cut  # repr: a NaN read both ways is still the same
        errors += isinstance(fast, tuple)
    assert errors >= len(wire) - 13 - 12  # all but the cuts of the optional trailer fields


@pytest.mark.parametrize("wire", WIRE, ids=["all-types", "bare", "receive"])
def test_corrupted_bytes_decode_the_same_both_ways(wire, monkeypatch):
    seen_errors = 0
    for pos in range(13, len(wire)):
        for byte in (0x00, 0x01, 0x0A, 0x7F, 0x80, 0xFF):
            mutated = wire[:pos] + bytes([byte]) + wire[pos + 1:]
            fast, slow = _both(mutated, monkeypatch)
            assert repr(fast) == repr(slow), (pos, byte)
            seen_errors += isinstance(fast, tuple)
    assert seen_errors  # the corruptions reached the error paths


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=12),
    st.binary(max_size=8), st.floats(allow_nan=False),
    st.builds(Scalar, st.just("int"), st.integers(-(2**31), 2**31 - 1)),
    st.builds(Scalar, st.just("char"), st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))),
)
_PROPERTIES = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=8), _VALUES), max_size=6).map(tuple))


def _reference_headers(h: MessageHeaders) -> bytes:
    """The headers written one field at a time, in ``CoreMessage.encodeHeadersAndProperties`` order."""
    w = Writer()
    w.write_long(h.message_id)
    w.write_nullable_simple_string(h.address)
    if h.user_id is None:
        w.buf.append(0)
    else:
        w.buf.append(1)
        w.write_raw(h.user_id)
    w.write_byte(h.type)
    w.write_bool(h.durable)
    w.write_long(h.expiration)
    w.write_long(h.timestamp)
    w.write_byte(h.priority)
    if h.properties is None:
        w.buf.append(0)
    else:
        w.buf.append(1)
        w.write_int(len(h.properties))
        for name, value in h.properties:
            w.write_simple_string(name)
            _write_value(w, value)
    return bytes(w.buf)


@settings(max_examples=200, deadline=None)
@given(properties=_PROPERTIES, address=st.none() | st.text(max_size=10),
       user_id=st.none() | st.binary(min_size=16, max_size=16), durable=st.booleans())
def test_headers_are_written_as_field_by_field_and_read_back(properties, address, user_id, durable):
    h = MessageHeaders(12, address, user_id, 3, durable, 5, 6, 9, properties)
    w = Writer()
    write_headers(w, h)
    assert bytes(w.buf) == _reference_headers(h)
    assert decode_packet(_send(h)).headers == h


def test_a_negative_type_byte_is_an_unknown_property_type_both_ways(monkeypatch):
    wire = bytearray(_send(_headers(properties=(("x", None),))))
    assert wire[-14] == PropertyType.NULL
    wire[-14] = 0xF0
    fast, slow = _both(bytes(wire), monkeypatch)
    assert fast == slow
    assert "unknown property type -16" in fast[1]


def test_a_non_boolean_durable_is_refused_as_before():
    with pytest.raises(TypeError, match="boolean field cannot hold 1"):
        write_headers(Writer(), MessageHeaders(0, "a", None, 0, 1, 0, 0, 4, None))
