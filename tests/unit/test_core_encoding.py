"""CORE field encodings (junction/protocols/core/encoding.py, values.py, message.py).

Exact bytes where Artemis's layout is known (core.md section 1, the traces),
round trips for every encoding, and refusal of every truncation and of the
garbage no Artemis writer produces.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from junction.protocols.core import MalformedPacket, MessageHeaders, Scalar, TransportConfiguration
from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.message import read_headers, read_message, write_headers, write_message
from junction.protocols.core.values import (
    read_properties,
    read_transport,
    write_properties,
    write_transport,
)

FIELDS = {
    "byte": (Writer.write_byte, Reader.read_byte),
    "bool": (Writer.write_bool, Reader.read_bool),
    "short": (Writer.write_short, Reader.read_short),
    "int": (Writer.write_int, Reader.read_int),
    "long": (Writer.write_long, Reader.read_long),
    "float": (Writer.write_float, Reader.read_float),
    "double": (Writer.write_double, Reader.read_double),
    "char": (Writer.write_char, Reader.read_char),
    "sized_bytes": (Writer.write_sized_bytes, Reader.read_sized_bytes),
    "string": (Writer.write_string, Reader.read_string),
    "nullable_string": (Writer.write_nullable_string, Reader.read_nullable_string),
    "simple_string": (Writer.write_simple_string, Reader.read_simple_string),
    "nullable_simple_string": (Writer.write_nullable_simple_string, Reader.read_nullable_simple_string),
    "opt_bool": (Writer.write_opt_bool, Reader.read_opt_bool),
    "opt_int": (Writer.write_opt_int, Reader.read_opt_int),
    "opt_long": (Writer.write_opt_long, Reader.read_opt_long),
    "properties": (write_properties, read_properties),
    "transport": (write_transport, read_transport),
    "headers": (write_headers, read_headers),
}


def encode(kind: str, value) -> bytes:
    w = Writer()
    FIELDS[kind][0](w, value)
    return bytes(w.buf)


def decode(kind: str, data: bytes):
    r = Reader(data)
    value = FIELDS[kind][1](r)
    assert r.remaining == 0, f"{kind} left {r.remaining} bytes of {data.hex()}"
    return value


CONNECTOR = TransportConfiguration(
    "netty", "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory",
    (("host", "127.0.0.1"), ("port", "61616"), ("sslEnabled", False), ("batchDelay", 0),
     ("connectionsAllowed", Scalar("int", -1)), ("$.EP.routerName", "r1")),
)
ALL_PROPERTY_TYPES = (
    ("null", None), ("bool", True), ("byte", Scalar("byte", -128)), ("bytes", b"\x00\xff"),
    ("short", Scalar("short", 32767)), ("int", Scalar("int", -(2**31))), ("long", 2**63 - 1),
    ("float", Scalar("float", 1.5)), ("double", -0.25), ("string", "v\u00e9\U0001F600"),
    ("char", Scalar("char", "\u20ac")), ("", ""),
)

# (kind, value): every encoding, with values at the edges of their ranges.
SAMPLES = [
    ("byte", -128), ("byte", 127), ("bool", True), ("bool", False), ("short", -32768),
    ("int", 2**31 - 1), ("long", -(2**63)), ("float", 3.25), ("double", 1e300), ("char", "\uffff"),
    ("sized_bytes", b""), ("sized_bytes", bytes(range(256))),
    ("string", ""), ("string", "guest"), ("string", "12345678"), ("string", "123456789"),
    ("string", "\u00e9" * 20), ("string", "a\x00b" * 4), ("string", "\u20ac" * 4094),
    ("string", "x" * 4095), ("string", "\U0001F600" * 3), ("string", "\U0001F600" * 5),
    ("string", "\ud800 lone high"), ("string", "lone low \udc00"), ("string", "\U0001F600" * 3000),
    ("nullable_string", None), ("nullable_string", "x" * 100),
    ("simple_string", ""), ("simple_string", "smoke.q"), ("simple_string", "\U0001F600\ud800"),
    ("nullable_simple_string", None), ("nullable_simple_string", "a"),
    ("opt_bool", None), ("opt_bool", False), ("opt_bool", True), ("opt_int", None), ("opt_int", -1),
    ("opt_long", None), ("opt_long", 2**40),
    ("properties", None), ("properties", ()), ("properties", ALL_PROPERTY_TYPES),
    ("properties", (("dup", 1), ("dup", 2))),
    ("transport", TransportConfiguration("a", "b")), ("transport", CONNECTOR),
    ("headers", MessageHeaders()),
    ("headers", MessageHeaders(2**62, "orders", bytes(range(16)), 3, True, 123, 456, 9,
                               (("_AMQ_DUPL_ID", "d-1"), ("JMSXGroupID", "g")))),
]


@pytest.mark.parametrize("kind, value", SAMPLES, ids=lambda v: repr(v)[:40])
def test_every_encoding_round_trips(kind, value):
    data = encode(kind, value)
    assert decode(kind, data) == value
    assert encode(kind, decode(kind, data)) == data


@pytest.mark.parametrize("kind, value", SAMPLES, ids=lambda v: repr(v)[:40])
def test_every_truncation_is_refused(kind, value):
    data = encode(kind, value)
    for cut in range(len(data)):
        with pytest.raises(MalformedPacket):
            decode(kind, data[:cut])


def test_exact_bytes_of_the_traces():
    # core.md section 1: username "guest" as a nullable String, a node id, a SimpleString.
    assert encode("nullable_string", "guest").hex() == "01" "00000005" "0067007500650073" "0074"
    node = "e8ba12ab-e61b-11f1-8f80-02fc00000001"
    assert encode("string", node) == bytes.fromhex("00000024" "0024") + node.encode()
    assert encode("simple_string", "smoke.q").hex() == "0000000e" "73006d006f006b0065002e007100"
    assert encode("properties", (("k", "v"),)).hex() == "01" "00000001" "000000026b00" "0a" "000000027600"


def test_booleans_and_present_flags_as_artemis_writes_and_reads_them():
    assert encode("bool", True) == b"\xff" and encode("bool", False) == b"\x00"
    assert decode("bool", b"\x01") is True and decode("bool", b"\x80") is True
    assert encode("opt_int", 7) == b"\xff\x00\x00\x00\x07" and encode("opt_int", None) == b"\x00"
    # ChannelBufferWrapper writes the flag as 1, BufferHelper as 0xFF: both read as present.
    assert decode("opt_int", b"\x01\x00\x00\x00\x07") == 7
    assert decode("nullable_simple_string", b"\xff\x00\x00\x00\x02a\x00") == "a"


def test_string_tiers_are_artemis_s():
    # Fewer than 9 UTF-16 units: each unit as a big-endian short.
    assert encode("string", "\u00e9\U0001F600") == bytes.fromhex("00000003" "00e9" "d83d" "de00")
    # 9 to 0xFFE units: a u16 size and Artemis's UTF-8, NUL as one byte, each surrogate on its own.
    data = encode("string", "\x00" * 8 + "\U0001F600")
    assert data == bytes.fromhex("0000000a" "000e") + b"\x00" * 8 + bytes.fromhex("eda0bd" "edb880")
    # 0xFFF units and more: the unit count, then a SimpleString (UTF-16LE).
    data = encode("string", "\u00e9" * 0xFFF)
    assert data[:8] == bytes.fromhex("00000fff" "00001ffe") and data[8:10] == b"\xe9\x00"


@pytest.mark.parametrize("data, why", [
    ("ffffffff", "negative String length"),
    ("0000000b 000e 68656c6c6f2063 f09f9880 6f7265", "4-byte sequence"),
    ("00000009 000a c080 6162636465666768", "overlong NUL"),
    ("0000000b 000a 68656c6c6f20636f7265", "unit count disagrees with the UTF-8"),
    ("0000000a 000b 68656c6c6f20636f7265c3", "truncated 2-byte sequence"),
    ("0000000a 000a 68656c6c6f20636f72 80", "stray continuation byte"),
    ("00000fff 00001ffc" + "6100" * 0xFFE, "SimpleString tier size disagrees with the count"),
])
def test_strings_no_artemis_writer_produces_are_refused(data, why):
    with pytest.raises(MalformedPacket):
        decode("string", bytes.fromhex(data.replace(" ", "")))


@pytest.mark.parametrize("kind, data", [
    ("simple_string", "00000003 610062"),
    ("simple_string", "ffffffff"),
    ("sized_bytes", "80000000"),
    ("properties", "01 7fffffff 00000002 6b00 00"),
    ("properties", "01 ffffffff"),
    ("properties", "01 00000001 00000002 6b00 01"),
    ("properties", "01 00000001 00000002 6b00 0c 00"),
    ("transport", "00000000 00000000 00000001 00000000 04 00"),
    ("transport", "00000000 00000000 7fffffff"),
])
def test_garbage_sizes_and_types_are_refused(kind, data):
    with pytest.raises(MalformedPacket):
        decode(kind, bytes.fromhex(data.replace(" ", "")))


def test_user_id_flag_other_than_one_reads_as_none_as_in_artemis():
    data = bytearray(encode("headers", MessageHeaders(address=None)))
    data[9] = 2  # CoreMessage reads the 16 userID bytes only after exactly 1
    assert decode("headers", bytes(data)) == MessageHeaders()


def test_message_body_position_counts_the_packet_header():
    w = Writer()
    write_message(w, b"hello", MessageHeaders())
    assert bytes(w.buf[:4]) == (13 + 5).to_bytes(4, "big")
    assert read_message(Reader(bytes(w.buf))) == (b"hello", MessageHeaders())
    with pytest.raises(MalformedPacket):
        read_message(Reader((12).to_bytes(4, "big") + bytes(w.buf[4 + 5:])))


def test_values_out_of_range_are_not_encoded():
    for kind, value in (("byte", 128), ("int", 2**31), ("properties", (("k", object()),)),
                        ("properties", (("k", Scalar("short", 2**15)),)),
                        ("transport", TransportConfiguration("a", "b", (("k", 1.5),)))):
        with pytest.raises((struct.error, TypeError, ValueError)):
            encode(kind, value)
    with pytest.raises(ValueError):
        Scalar("long", 1)


# -- property-based ------------------------------------------------------------------------

_ints = st.integers(-(2**63), 2**63 - 1)
_values = st.one_of(
    st.none(), st.booleans(), _ints, st.text(), st.binary(max_size=40),
    st.floats(allow_nan=False), st.builds(Scalar, st.just("byte"), st.integers(-128, 127)),
    st.builds(Scalar, st.just("short"), st.integers(-(2**15), 2**15 - 1)),
    st.builds(Scalar, st.just("int"), st.integers(-(2**31), 2**31 - 1)),
    st.builds(Scalar, st.just("float"), st.floats(width=32, allow_nan=False)),
    st.builds(Scalar, st.just("char"), st.characters(max_codepoint=0xFFFF)),
)


@given(st.text(max_size=5000))
def test_any_string_round_trips(text):
    assert decode("string", encode("string", text)) == text
    assert decode("simple_string", encode("simple_string", text)) == text


@given(st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=20), _values), max_size=8).map(tuple)))
def test_any_properties_round_trip(properties):
    data = encode("properties", properties)
    back = decode("properties", data)
    assert encode("properties", back) == data
    assert back == properties


def test_nan_keeps_its_bits_through_a_round_trip():
    data = encode("properties", (("n", math.nan),))
    assert encode("properties", decode("properties", data)) == data


def test_a_repeated_name_reads_as_artemis_s_map_keeps_it():
    headers = MessageHeaders(properties=(("a", 1), ("b", 2), ("a", 3)))
    assert headers.property("a") == 3 and headers.property("c", "none") == "none"
    assert CONNECTOR.get("port") == "61616" and CONNECTOR.get("nope") is None


@given(st.lists(st.integers(0, 0xFFFF), max_size=40), st.sampled_from([0, 1, 2]))
def test_any_utf16_units_round_trip_byte_for_byte_in_every_tier(units, tier):
    # Java Strings are UTF-16 units, lone and reversed surrogates included: whatever a Java
    # writer puts in each of the three tiers reads back and is written again the same.
    if tier == 1:
        units = units + [0x61] * max(0, 9 - len(units))
    elif tier == 2:
        units = units + [0x61] * (0xFFF - len(units))
    n = len(units)
    if n < 9:
        data = struct.pack(f">i{n}H", n, *units)
    elif n < 0xFFF:
        utf8 = "".join(map(chr, units)).encode("utf-8", "surrogatepass")
        data = struct.pack(">iH", n, len(utf8)) + utf8
    else:
        data = struct.pack(">ii", n, 2 * n) + struct.pack(f"<{n}H", *units)
    assert encode("string", decode("string", data)) == data
