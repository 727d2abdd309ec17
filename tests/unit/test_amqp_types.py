"""Tests for the AMQP 1.0 type-system codec (junction.protocols.amqp.types).

Hand-written wire bytes pin every format code and the choice of the smallest
encoding (so a bug shared by encoder and decoder cannot hide in a round
trip); Hypothesis covers round trips of nested values, truncation, mutation
and garbage; proton (the C reference implementation) checks interoperability
both ways.
"""

from __future__ import annotations

import enum
import math
import struct
import uuid

import proton
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from junction.protocols.amqp import types as amqp_types
from junction.protocols.amqp.types import (
    MAX_DEPTH,
    MAX_ZERO_WIDTH_ITEMS,
    Array,
    DecodeError,
    Described,
    Scalar,
    Symbol,
    decode,
    encode,
    encode_into,
)
from junction.protocols.amqp.types import atoms as amqp_atoms
from junction.protocols.amqp.types import codes as amqp_codes
from junction.protocols.errors import RemoteProtocolError

U = uuid.UUID("0123456789abcdef0123456789abcdef")


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def same(a, b) -> bool:
    """Equality that also insists on identical types (True is not 1, Symbol is not str)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        b_keys = {k: k for k in b}
        return all(
            k in b_keys and same(k, b_keys[k]) and same(v, b[b_keys[k]]) for k, v in a.items()
        )
    if isinstance(a, Scalar):
        return a.kind == b.kind and same(a.value, b.value)
    if isinstance(a, Described):
        return same(a.descriptor, b.descriptor) and same(a.value, b.value)
    if isinstance(a, Array):
        return a.kind == b.kind and same(a.descriptor, b.descriptor) and same(a.items, b.items)
    return a == b


# ---------------------------------------------------------------------------
# Every format code, by hand
# ---------------------------------------------------------------------------

DECODE_CASES = [
    ("40", None),
    ("41", True),
    ("42", False),
    ("56 01", True),
    ("56 00", False),
    ("50 ff", Scalar("ubyte", 255)),
    ("60 ff fe", Scalar("ushort", 0xFFFE)),
    ("70 00 01 00 00", Scalar("uint", 65536)),
    ("70 00 00 00 07", Scalar("uint", 7)),
    ("52 07", Scalar("uint", 7)),
    ("43", Scalar("uint", 0)),
    ("80 ff ff ff ff ff ff ff ff", Scalar("ulong", 2**64 - 1)),
    ("53 07", Scalar("ulong", 7)),
    ("44", Scalar("ulong", 0)),
    ("51 ff", Scalar("byte", -1)),
    ("61 ff 00", Scalar("short", -256)),
    ("71 ff ff ff 00", Scalar("int", -256)),
    ("54 fe", Scalar("int", -2)),
    ("81 ff ff ff ff ff ff ff 00", -256),
    ("81 7f ff ff ff ff ff ff ff", 2**63 - 1),
    ("55 fe", -2),
    ("72 3f c0 00 00", Scalar("float", 1.5)),
    ("82 3f f8 00 00 00 00 00 00", 1.5),
    ("74 01 02 03 04", Scalar("decimal32", h("01020304"))),
    ("84 01 02 03 04 05 06 07 08", Scalar("decimal64", h("0102030405060708"))),
    ("94" + "0f" * 16, Scalar("decimal128", b"\x0f" * 16)),
    ("73 00 00 20 ac", Scalar("char", "\u20ac")),
    ("73 00 01 f6 00", Scalar("char", "\U0001f600")),
    ("83 00 00 01 8b cf e5 68 7b", Scalar("timestamp", 1700000000123)),
    ("83 ff ff ff ff ff ff ff ff", Scalar("timestamp", -1)),
    ("98 0123456789abcdef0123456789abcdef", U),
    ("a0 03 61 62 63", b"abc"),
    ("a0 00", b""),
    ("b0 00 00 00 03 61 62 63", b"abc"),
    ("a1 02 c3 a9", "\u00e9"),
    ("b1 00 00 00 02 c3 a9", "\u00e9"),
    ("a1 00", ""),
    ("a3 03 66 6f 6f", Symbol("foo")),
    ("b3 00 00 00 03 66 6f 6f", Symbol("foo")),
    ("45", []),
    ("c0 03 02 41 42", [True, False]),
    ("c0 01 00", []),
    ("d0 00 00 00 06 00 00 00 02 41 42", [True, False]),
    ("c1 05 02 a1 01 61 41", {"a": True}),
    ("c1 01 00", {}),
    ("d1 00 00 00 08 00 00 00 02 a1 01 61 41", {"a": True}),
    ("c1 08 04 53 01 40 a3 01 61 45", {Scalar("ulong", 1): None, Symbol("a"): []}),
    ("e0 04 02 50 01 02", Array("ubyte", (1, 2))),
    ("f0 00 00 00 07 00 00 00 02 50 01 02", Array("ubyte", (1, 2))),
    ("e0 08 02 00 a3 01 64 50 01 02", Array("ubyte", (1, 2), Symbol("d"))),
    ("e0 05 02 00 53 07 40", Array("null", (None, None), Scalar("ulong", 7))),
    ("e0 02 03 40", Array("null", (None, None, None))),
    ("e0 02 02 41", Array("boolean", (True, True))),
    ("e0 02 02 42", Array("boolean", (False, False))),
    ("e0 04 02 56 01 00", Array("boolean", (True, False))),
    ("e0 02 02 43", Array("uint", (0, 0))),
    ("e0 02 01 44", Array("ulong", (0,))),
    ("e0 02 02 45", Array("list", ([], []))),
    ("e0 04 02 52 01 ff", Array("uint", (1, 255))),
    ("e0 0a 02 70 00 00 00 01 00 00 01 00", Array("uint", (1, 256))),
    ("e0 04 02 53 01 ff", Array("ulong", (1, 255))),
    ("e0 04 02 54 01 ff", Array("int", (1, -1))),
    ("e0 04 02 55 01 ff", Array("long", (1, -1))),
    ("e0 0a 01 81 ff ff ff ff ff ff ff fe", Array("long", (-2,))),
    ("e0 04 02 51 01 ff", Array("byte", (1, -1))),
    ("e0 06 02 61 00 01 ff ff", Array("short", (1, -1))),
    ("e0 06 02 60 00 01 ff ff", Array("ushort", (1, 65535))),
    ("e0 06 01 72 3f c0 00 00", Array("float", (1.5,))),
    ("e0 0a 01 82 3f f8 00 00 00 00 00 00", Array("double", (1.5,))),
    ("e0 0a 01 83 00 00 00 00 00 00 00 05", Array("timestamp", (5,))),
    ("e0 0a 02 73 00 00 00 61 00 00 20 ac", Array("char", ("a", "\u20ac"))),
    ("e0 06 01 74 01 02 03 04", Array("decimal32", (h("01020304"),))),
    ("e0 0a 01 84 01 02 03 04 05 06 07 08", Array("decimal64", (h("0102030405060708"),))),
    ("e0 12 01 94" + "0f" * 16, Array("decimal128", (b"\x0f" * 16,))),
    ("e0 0a 01 80 ff ff ff ff ff ff ff ff", Array("ulong", (2**64 - 1,))),
    ("e0 06 01 71 ff ff ff fe", Array("int", (-2,))),
    ("e0 12 01 98 0123456789abcdef0123456789abcdef", Array("uuid", (U,))),
    ("e0 06 02 a1 01 61 01 62", Array("string", ("a", "b"))),
    ("e0 08 01 b1 00 00 00 02 c3 a9", Array("string", ("\u00e9",))),
    ("e0 06 02 a3 01 61 01 62", Array("symbol", (Symbol("a"), Symbol("b")))),
    ("e0 05 02 a0 01 00 00", Array("binary", (b"\x00", b""))),
    ("e0 02 00 a1", Array("string", ())),
    ("e0 08 02 c0 01 00 03 01 55 07", Array("list", ([], [7]))),
    ("e0 08 01 c1 05 02 a1 01 61 41", Array("map", ({"a": True},))),
    ("e0 07 01 e0 04 02 50 01 02", Array("array", (Array("ubyte", (1, 2)),))),
    ("00 53 70 45", Described(Scalar("ulong", 0x70), [])),
    ("00 a3 03 66 6f 6f 40", Described(Symbol("foo"), None)),
    ("00 00 53 01 53 02 a1 01 78", Described(Described(Scalar("ulong", 1), Scalar("ulong", 2)), "x")),
]


@pytest.mark.parametrize(("wire", "expected"), DECODE_CASES, ids=[w for w, _ in DECODE_CASES])
def test_decode_by_hand(wire, expected):
    data = h(wire)
    value, end = decode(data)
    assert same(value, expected), (value, expected)
    assert end == len(data)
    # The same bytes inside a larger buffer, at an offset, through a memoryview.
    value, end = decode(memoryview(b"\xff\xff" + data + b"\x40"), 2)
    assert same(value, expected)
    assert end == 2 + len(data)


@pytest.mark.parametrize(("wire", "expected"), DECODE_CASES, ids=[w for w, _ in DECODE_CASES])
def test_decoded_values_round_trip(wire, expected):
    value, _ = decode(h(wire))
    again, end = decode(encode(value))
    assert same(again, value)


def test_every_format_code_is_covered():
    covered = {h(wire)[0] for wire, _ in DECODE_CASES}
    assert covered == set(amqp_codes._CODE_NAMES)
    # Array element constructors too (each code but described).
    elements = set()
    for wire, _ in DECODE_CASES:
        data = h(wire)
        if data[0] == 0xE0 and data[3] != 0x00:
            elements.add(data[3])
    assert elements == set(amqp_codes._CODE_NAMES) - {0x00, 0xB0, 0xB3, 0xD0, 0xD1, 0xF0}


ENCODE_CASES = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (0, "55 00"),
    (127, "55 7f"),
    (-128, "55 80"),
    (128, "81 00 00 00 00 00 00 00 80"),
    (-129, "81 ff ff ff ff ff ff ff 7f"),
    (2**63 - 1, "81 7f ff ff ff ff ff ff ff"),
    (2**63, "80 80 00 00 00 00 00 00 00"),
    (2**64 - 1, "80 ff ff ff ff ff ff ff ff"),
    (1.5, "82 3f f8 00 00 00 00 00 00"),
    ("", "a1 00"),
    ("\u00e9", "a1 02 c3 a9"),
    (b"", "a0 00"),
    (bytearray(b"ab"), "a0 02 61 62"),
    (memoryview(b"ab"), "a0 02 61 62"),
    (Symbol("s"), "a3 01 73"),
    (U, "98 0123456789abcdef0123456789abcdef"),
    ([], "45"),
    ((), "45"),
    ([1], "c0 03 01 55 01"),
    ((True, None), "c0 03 02 41 40"),
    ({}, "c1 01 00"),
    ({"a": 1}, "c1 06 02 a1 01 61 55 01"),
    (Scalar("ubyte", 1), "50 01"),
    (Scalar("ushort", 1), "60 00 01"),
    (Scalar("uint", 0), "43"),
    (Scalar("uint", 255), "52 ff"),
    (Scalar("uint", 256), "70 00 00 01 00"),
    (Scalar("ulong", 0), "44"),
    (Scalar("ulong", 1), "53 01"),
    (Scalar("ulong", 256), "80 00 00 00 00 00 00 01 00"),
    (Scalar("byte", -1), "51 ff"),
    (Scalar("short", -1), "61 ff ff"),
    (Scalar("int", -128), "54 80"),
    (Scalar("int", 127), "54 7f"),
    (Scalar("int", 128), "71 00 00 00 80"),
    (Scalar("float", 1.5), "72 3f c0 00 00"),
    (Scalar("char", "a"), "73 00 00 00 61"),
    (Scalar("timestamp", 5), "83 00 00 00 00 00 00 00 05"),
    (Scalar("decimal32", h("01020304")), "74 01 02 03 04"),
    (Scalar("decimal64", bytes(8)), "84" + "00" * 8),
    (Scalar("decimal128", bytes(16)), "94" + "00" * 16),
    (Described(0x70, []), "00 53 70 45"),
    (Described(Scalar("ulong", 0x70), []), "00 53 70 45"),
    (Described(Symbol("x"), None), "00 a3 01 78 40"),
    (Array("int", (1,)), "e0 06 01 71 00 00 00 01"),
    (Array("int", (Scalar("int", 1),)), "e0 06 01 71 00 00 00 01"),
    (Array("uint", ()), "e0 02 00 70"),
    (Array("boolean", (True, False)), "e0 04 02 56 01 00"),
    (Array("null", (None, None)), "e0 02 02 40"),
    (Array("symbol", ("a",), 7), "e0 07 01 00 53 07 a3 01 61"),
    (Array("list", ([], [1])), "e0 08 02 c0 01 00 03 01 55 01"),
    (Array("map", ({},)), "e0 04 01 c1 01 00"),
    (Array("array", (Array("int", ()),)), "e0 05 01 e0 02 00 71"),
]


@pytest.mark.parametrize(("value", "wire"), ENCODE_CASES, ids=[w for _, w in ENCODE_CASES])
def test_encode_smallest(value, wire):
    assert encode(value).hex() == h(wire).hex()
    out = [b"prefix"]
    encode_into(out, value)
    assert b"".join(out) == b"prefix" + h(wire)


def test_compound_width_boundaries():
    # list8 holds at most 254 octets of elements (size counts the count octet too).
    assert encode([b"x" * 251])[0] == 0xC0  # a0 fb + 251 = 253 octets
    assert encode([b"x" * 252])[0] == 0xC0  # 254 octets: size 255
    assert encode([b"x" * 253])[0] == 0xD0  # 255 octets: size would be 256
    assert encode([None] * 254)[0] == 0xC0
    assert encode([None] * 255)[0] == 0xD0
    assert encode({i: None for i in range(84)})[0] == 0xC1  # 252 octets
    assert encode({i: None for i in range(85)})[0] == 0xD1  # 255 octets
    assert encode("x" * 255)[0] == 0xA1
    assert encode("x" * 256)[:5] == h("b1 00 00 01 00")
    assert encode(b"x" * 256)[:5] == h("b0 00 00 01 00")
    assert encode(Symbol("x" * 256))[:5] == h("b3 00 00 01 00")
    big = encode(Array("string", ("x" * 256,)))
    assert big[0] == 0xF0 and big[9] == 0xB1
    assert encode(Array("long", tuple(range(40))))[0] == 0xF0
    for value in ([b"x" * 253], [None] * 255, {i: None for i in range(85)}, Array("long", tuple(range(40)))):
        assert same(decode(encode(value))[0], value)


def test_subclasses_and_unknown_types():
    class Colour(enum.IntEnum):
        RED = 1

    class Name(str):
        pass

    class Items(list):
        pass

    assert encode(Colour.RED) == encode(1)
    assert encode(Name("a")) == encode("a")
    assert encode(Items([1])) == encode([1])
    for bad in (object(), {1, 2}, 1j, Ellipsis):
        with pytest.raises(TypeError, match=type(bad).__name__):
            encode(bad)
    with pytest.raises(TypeError, match="set"):
        encode([1, {2}])


@pytest.mark.parametrize(
    "value",
    [
        2**64,
        -(2**63) - 1,
        Scalar("ubyte", 256),
        Scalar("ubyte", -1),
        Scalar("ushort", 65536),
        Scalar("uint", -1),
        Scalar("uint", 2**32),
        Scalar("ulong", -1),
        Scalar("ulong", 2**64),
        Scalar("byte", 128),
        Scalar("short", -32769),
        Scalar("int", 2**31),
        Scalar("float", 1e300),
        Scalar("char", "ab"),
        Scalar("timestamp", 2**63),
        Scalar("decimal32", b"123"),
        Scalar("decimal128", b"1" * 15),
        Scalar("long", 1),
        Symbol("\u00e9"),
        "\ud800",
        Array("int", (2**31,)),
        Array("nope", ()),
        Array("null", (1,)),
        Array("int", (Scalar("uint", 1),)),
        Described(-1, None),
    ],
    ids=repr,
)
def test_encode_out_of_range(value):
    with pytest.raises(ValueError):
        encode(value)


@pytest.mark.parametrize(
    "value",
    [
        Array("binary", (5,)),
        Array("string", (5,)),
        Array("symbol", (b"x",)),
        Array("decimal32", (4,)),
        Array("boolean", (1,)),
        Array("uuid", ("x",)),
        Array("array", ([],)),
    ],
    ids=repr,
)
def test_encode_array_items_of_the_wrong_type(value):
    with pytest.raises(TypeError):
        encode(value)


# ---------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ("", "no value at offset 0"),
        ("01", "unknown format code 0x01 at offset 0"),
        ("c0 02 01 ff", "unknown format code 0xff at offset 3"),
        ("56 02", "boolean"),
        ("a1 02 c3 28", "not valid UTF-8"),
        ("a1 03 ed a0 80", "not valid UTF-8"),  # an encoded surrogate
        ("b1 00 00 00 01 ff", "not valid UTF-8"),
        ("c0 04 01 a1 01 ff", "not valid UTF-8"),
        ("a3 01 ff", "not ASCII"),
        ("b3 00 00 00 01 80", "not ASCII"),
        ("73 00 11 00 00", "no code point"),
        ("c1 02 01 41", "odd count"),
        ("c1 05 04 41 40 41 40", "duplicate keys"),
        ("c1 06 04 41 40 55 01 40", "duplicate keys"),
        ("c1 03 02 45 40", "cannot hash"),
        ("c1 05 02 c1 01 00 40", "cannot hash"),
        ("c0 03 01 41 41", "size disagrees"),
        ("c0 02 02 41 41", "count 2 exceeds"),
        ("d0 00 00 00 04 ff ff ff ff", "count 4294967295 exceeds"),
        ("d0 00 00 00 03 00 00 00 00", "truncated list32"),
        ("e0 03 02 50 01", "needs 2 octets, has 1"),
        ("e0 03 02 40 00", "size disagrees"),
        ("f0 00 00 00 05 ff ff ff ff 40", f"MAX_ZERO_WIDTH_ITEMS={MAX_ZERO_WIDTH_ITEMS}"),
        ("e0 03 01 56 02", "boolean octet"),
        ("e0 01 01", "truncated array8"),
        ("e0 02 01 01", "unknown format code 0x01"),
        ("e0 04 01 00 40 50", "described by null"),
        ("e0 07 01 00 53 01 00 53 02", "described twice"),
        ("e0 05 05 a1 01 61 00", "exceeds"),
        ("00 53", "truncated"),
        ("c0 02 01 00 40", "truncated"),
    ],
)
def test_malformed(wire, message):
    with pytest.raises(DecodeError, match=message) as info:
        decode(h(wire))
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, RemoteProtocolError)
    assert info.value.code == "amqp:decode-error"


def test_error_offsets_are_relative_to_the_buffer():
    with pytest.raises(DecodeError) as info:
        decode(h("40 40 40 c0 02 01 ff"), 3)
    assert info.value.offset == 6
    assert "offset 6" in str(info.value)


def test_zero_width_array_at_the_limit():
    wire = b"\xf0" + struct.pack(">II", 5, MAX_ZERO_WIDTH_ITEMS) + b"\x40"
    value, _ = decode(wire)
    assert value == Array("null", (None,) * MAX_ZERO_WIDTH_ITEMS)


def nested(kind: str, depth: int) -> bytes:
    """``depth`` nested compound or described values around a null."""
    data = b"\x40"
    for _ in range(depth):
        if kind == "list":
            data = b"\xd0" + struct.pack(">II", len(data) + 4, 1) + data
        elif kind == "map":
            data = b"\xd1" + struct.pack(">II", len(data) + 5, 2) + b"\x40" + data
        elif kind == "described":
            data = b"\x00\x53\x01" + data
        else:  # array of one array ... of a list
            if data == b"\x40":
                data = b"\xd0" + struct.pack(">II", 4, 0)
                continue
            data = b"\xf0" + struct.pack(">II", len(data) + 4, 1) + data
    return data


@pytest.mark.parametrize("kind", ["list", "map", "described", "array"])
def test_depth_limit(kind):
    value, end = decode(nested(kind, MAX_DEPTH))
    assert end == len(nested(kind, MAX_DEPTH))
    with pytest.raises(DecodeError, match="MAX_DEPTH"):
        decode(nested(kind, MAX_DEPTH + 1))
    # The encoder takes what the decoder does, and refuses one level more.
    assert same(decode(encode(value))[0], value)
    with pytest.raises(ValueError, match="MAX_DEPTH"):
        encode(wrap(kind, value))


def wrap(kind, value):
    if kind == "list":
        return [value]
    if kind == "map":
        return {None: value}
    if kind == "array":
        return Array("array", (value,))
    return Described(1, value)


def test_empty_list_counts_towards_depth():
    deep: list = []
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    assert decode(encode(deep))[0] == deep
    with pytest.raises(ValueError, match="MAX_DEPTH"):
        encode([deep])
    with pytest.raises(DecodeError, match="MAX_DEPTH"):
        data = b"\x45"
        for _ in range(MAX_DEPTH):
            data = bytes((0xC0, len(data) + 1, 1)) + data
        decode(data)


def test_symbol_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(amqp_atoms, "SYMBOL_CACHE_SIZE", 8)
    amqp_atoms._symbols.clear()
    for i in range(50):
        assert decode(encode(Symbol(f"s{i}")))[0] == f"s{i}"
        assert len(amqp_atoms._symbols) <= 8
    amqp_atoms._symbols.clear()


def test_value_types():
    assert repr(Symbol("a")) == "Symbol('a')"
    assert Symbol("a") == "a" and hash(Symbol("a")) == hash("a")
    assert Scalar("uint", 1) != Scalar("ulong", 1)
    assert hash(Scalar("uint", 1)) == hash(Scalar("uint", 1))
    with pytest.raises(AttributeError):
        Scalar("uint", 1).value = 2  # frozen
    assert Array("int", (1,)) == Array("int", (1,), None)


# ---------------------------------------------------------------------------
# Hypothesis: round trips, truncation, mutation, garbage
# ---------------------------------------------------------------------------

LONG = st.integers(-(2**63), 2**63 - 1)
SYMBOLS = st.text(st.characters(max_codepoint=127), max_size=20).map(Symbol)
# Element strategy per AMQP type, as plain values (Array items, Scalar.value).
PLAIN = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": st.integers(0, 2**8 - 1),
    "ushort": st.integers(0, 2**16 - 1),
    "uint": st.integers(0, 2**32 - 1),
    "ulong": st.integers(0, 2**64 - 1),
    "byte": st.integers(-(2**7), 2**7 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": LONG,
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "decimal32": st.binary(min_size=4, max_size=4),
    "decimal64": st.binary(min_size=8, max_size=8),
    "decimal128": st.binary(min_size=16, max_size=16),
    "char": st.characters(),
    "timestamp": LONG,
    "uuid": st.uuids(),
    "binary": st.binary(max_size=300),
    "string": st.text(max_size=30) | st.text(min_size=256, max_size=300),
    "symbol": SYMBOLS,
}
SCALAR_KINDS = sorted(amqp_types.SCALAR_KINDS)
scalars = st.one_of(
    [st.builds(Scalar, st.just(kind), PLAIN[kind]) for kind in SCALAR_KINDS]
)
atoms = st.one_of(
    st.none(),
    st.booleans(),
    LONG,
    PLAIN["double"],
    PLAIN["string"],
    PLAIN["binary"],
    SYMBOLS,
    st.uuids(),
    scalars,
)
descriptors = SYMBOLS | PLAIN["ulong"].map(lambda n: Scalar("ulong", n))


@st.composite
def primitive_arrays(draw):
    kind = draw(st.sampled_from(sorted(PLAIN)))
    items = tuple(draw(st.lists(PLAIN[kind], max_size=8)))
    descriptor = draw(st.none() | descriptors)
    return Array(kind, items, descriptor)


def small_tuples(elements):
    return st.lists(elements, max_size=3).map(tuple)


def compounds(children):
    return st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(atoms, children, max_size=6),
        st.builds(Described, descriptors, children),
        st.builds(Array, st.just("list"), small_tuples(st.lists(children, max_size=3))),
        st.builds(Array, st.just("map"), small_tuples(st.dictionaries(atoms, children, max_size=3))),
        st.builds(Array, st.just("array"), small_tuples(primitive_arrays())),
    )


values = st.recursive(atoms | primitive_arrays(), compounds, max_leaves=25)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(values)
def test_round_trip(value):
    data = encode(value)
    decoded, end = decode(data)
    assert end == len(data)
    assert same(decoded, value), (decoded, value)
    assert encode(decoded) == data


@SETTINGS
@given(values)
def test_every_truncation_is_a_decode_error(value):
    data = encode(value)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:cut])


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_only_decode_error(data):
    try:
        decode(data)
    except DecodeError:
        pass


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values, st.data())
def test_mutations_raise_only_decode_error(value, data):
    wire = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 3))):
        wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode(bytes(wire))
    except DecodeError:
        pass


# ---------------------------------------------------------------------------
# Against proton, both ways
# ---------------------------------------------------------------------------

P = proton.Data
PROTON_SCALAR = {
    "ubyte": proton.ubyte,
    "ushort": proton.ushort,
    "uint": proton.uint,
    "ulong": proton.ulong,
    "byte": proton.byte,
    "short": proton.short,
    "int": proton.int32,
    "float": proton.float32,
    "char": proton.char,
    "timestamp": proton.timestamp,
    "decimal32": lambda raw: proton.decimal32(int.from_bytes(raw, "big")),
    "decimal64": lambda raw: proton.decimal64(int.from_bytes(raw, "big")),
    "decimal128": proton.decimal128,
}
PROTON_ARRAY_TYPE = {
    "null": P.NULL, "boolean": P.BOOL, "ubyte": P.UBYTE, "ushort": P.USHORT, "uint": P.UINT,
    "ulong": P.ULONG, "byte": P.BYTE, "short": P.SHORT, "int": P.INT, "long": P.LONG,
    "float": P.FLOAT, "double": P.DOUBLE, "decimal32": P.DECIMAL32, "decimal64": P.DECIMAL64,
    "decimal128": P.DECIMAL128, "char": P.CHAR, "timestamp": P.TIMESTAMP, "uuid": P.UUID,
    "binary": P.BINARY, "string": P.STRING, "symbol": P.SYMBOL, "list": P.LIST, "map": P.MAP,
    "array": P.ARRAY,
}
KIND_OF_PROTON_TYPE = {code: kind for kind, code in PROTON_ARRAY_TYPE.items()}


class NotForProton(Exception):
    """A value proton's Python binding cannot represent faithfully."""


def to_proton(value):
    if isinstance(value, Symbol):
        return proton.symbol(value)
    if type(value) is int and value > 2**63 - 1:
        return proton.ulong(value)
    if isinstance(value, Scalar):
        return PROTON_SCALAR[value.kind](value.value)
    if isinstance(value, list):
        return [to_proton(v) for v in value]
    if isinstance(value, dict):
        converted = {to_proton(k): to_proton(v) for k, v in value.items()}
        if len(converted) != len(value):  # e.g. False and decimal32(0), an int there
            raise NotForProton(value)
        return converted
    if isinstance(value, Described):
        d = value.descriptor
        return proton.Described(proton.ulong(d) if type(d) is int else to_proton(d), to_proton(value.value))
    if isinstance(value, Array):
        if value.kind in PROTON_SCALAR:
            items = [PROTON_SCALAR[value.kind](v) for v in value.items]
        else:
            items = [to_proton(v) for v in value.items]
        descriptor = proton.UNDESCRIBED if value.descriptor is None else to_proton(value.descriptor)
        return proton.Array(descriptor, PROTON_ARRAY_TYPE[value.kind], *items)
    return value


FROM_PROTON_SCALAR = {
    proton.ubyte: "ubyte", proton.ushort: "ushort", proton.uint: "uint", proton.ulong: "ulong",
    proton.byte: "byte", proton.short: "short", proton.int32: "int", proton.float32: "float",
    proton.char: "char", proton.timestamp: "timestamp",
}


def from_proton(value, *, plain=False):
    """Our value for what proton decoded; ``plain`` gives Array items (bare values)."""
    t = type(value)
    if t in FROM_PROTON_SCALAR:
        kind = FROM_PROTON_SCALAR[t]
        raw = {"char": str, "float": float}.get(kind, int)(value)
        return raw if plain else Scalar(kind, raw)
    for cls, kind, width in (
        (proton.decimal32, "decimal32", 4),
        (proton.decimal64, "decimal64", 8),
        (proton.decimal128, "decimal128", 16),
    ):
        if t is cls:
            raw = bytes(value) if width == 16 else int(value).to_bytes(width, "big")
            return raw if plain else Scalar(kind, raw)
    if t is proton.symbol:
        return Symbol(value)
    if t is memoryview:
        return bytes(value)
    if t is list:
        return [from_proton(v) for v in value]
    if t is dict:
        return {from_proton(k): from_proton(v) for k, v in value.items()}
    if t is proton.Described:
        return Described(from_proton(value.descriptor), from_proton(value.value))
    if t is proton.Array:
        descriptor = None if value.descriptor == proton.UNDESCRIBED else from_proton(value.descriptor)
        return Array(
            KIND_OF_PROTON_TYPE[value.type],
            tuple(from_proton(v, plain=True) for v in value.elements),
            descriptor,
        )
    return value


def proton_encode(value) -> bytes:
    data = proton.Data()
    try:
        data.put_object(to_proton(value))
    except NotForProton:
        assume(False)
    return bytes(data.encode())


def proton_can_read(value) -> bool:
    """False where proton's get_object fails: binary map keys (it builds dicts
    keyed by memoryview) and a described value whose value is described (it
    loses what follows)."""
    if isinstance(value, (list, tuple)):
        return all(proton_can_read(v) for v in value)
    if isinstance(value, dict):
        try:
            if len({to_proton(k) for k in value}) != len(value):
                return False  # keys proton's Python types make equal (False, decimal32(0))
        except NotForProton:
            return False
        return all(
            not isinstance(k, bytes) and proton_can_read(k) and proton_can_read(v)
            for k, v in value.items()
        )
    if isinstance(value, Described):
        return not isinstance(value.value, Described) and proton_can_read(value.value)
    if isinstance(value, Array):
        return proton_can_read(value.items)
    return True


def proton_decode(wire: bytes):
    data = proton.Data()
    assert data.decode(wire) == len(wire)
    data.rewind()
    assert data.next() is not None
    return from_proton(data.get_object())


@SETTINGS
@given(values)
def test_we_decode_what_proton_encodes(value):
    wire = proton_encode(value)
    decoded, end = decode(wire)
    assert end == len(wire)
    assert same(decoded, value), (decoded, value, wire.hex())


@SETTINGS
@given(values)
def test_proton_decodes_what_we_encode(value):
    assume(proton_can_read(value))
    decoded = proton_decode(encode(value))
    assert same(decoded, value), (decoded, value)


PROTON_EXAMPLES = [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 0.0, -0.0, 1e300, float("inf"), "", "h\u00e9llo",
    "x" * 1000, b"", b"\x00" * 1000, Symbol("amqp:accepted:list"), U, [], [None], {}, {"a": [1, {}]},
    Scalar("ubyte", 200), Scalar("ushort", 60000), Scalar("uint", 0), Scalar("uint", 200),
    Scalar("uint", 2**32 - 1), Scalar("ulong", 0), Scalar("ulong", 200), Scalar("ulong", 2**64 - 1),
    Scalar("byte", -128), Scalar("short", -32768), Scalar("int", -(2**31)), Scalar("int", 100),
    Scalar("float", -2.5), Scalar("char", "\U0001f600"), Scalar("timestamp", 1700000000123),
    Scalar("decimal32", h("22500001")), Scalar("decimal64", h("2238000000000001")),
    Scalar("decimal128", bytes(range(16))),
    Described(Scalar("ulong", 0x24), []), Described(Symbol("x-opt"), {"k": 1}),
    Array("int", (1, -2, 3)), Array("symbol", (Symbol("a"), Symbol("b"))),
    Array("string", ("x" * 300,)), Array("list", ([1], [])), Array("map", ({"a": None},)),
    Array("array", (Array("long", (1,)),)), Array("uuid", (U,)), Array("boolean", (True,)),
    Array("null", (None,)), Array("ulong", (2**64 - 1,), Symbol("d")),
    [1] * 300, {str(i): i for i in range(200)},
]


@pytest.mark.parametrize("value", PROTON_EXAMPLES, ids=lambda v: repr(v)[:40])
def test_proton_examples(value):
    assert same(decode(proton_encode(value))[0], value)
    assert same(proton_decode(encode(value)), value)


def test_proton_small_encodings_decode():
    # Proton picks the small forms (smalllong, smallint, smalluint...) on its own.
    for value in (5, Scalar("int", 5), Scalar("uint", 5), Scalar("ulong", 5), Scalar("uint", 0)):
        wire = proton_encode(value)
        assert len(wire) <= 2, wire.hex()
        assert same(decode(wire)[0], value)
