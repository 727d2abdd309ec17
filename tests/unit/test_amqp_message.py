"""Tests for the AMQP 1.0 message-section codec (junction.protocols.amqp.message).

Proton's ``Message`` is the reference: messages it encodes, with every header
and properties field, many application-property types, annotations and each
body kind, must decode to the expected fields; messages we encode must decode
in proton to the same fields; and the raw ``annotated``/``bare`` spans must
survive a re-prefixed header byte for byte.  Hand-written section sequences
pin the ordering rules; Hypothesis covers round trips and garbage.
"""

from __future__ import annotations

import math
import uuid

import proton
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from junction.protocols.amqp import message as amqp_message
from junction.protocols.amqp.message import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    DATA,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    Header,
    MessageSections,
    Properties,
    decode_message,
    encode_annotations,
    encode_application_properties,
    encode_body_data,
    encode_body_sequence,
    encode_body_value,
    encode_header,
    encode_message,
    encode_properties,
)
from junction.protocols.amqp.message import encoder as amqp_message_encoder
from junction.protocols.amqp.types import (
    MAX_DEPTH,
    Array,
    DecodeError,
    Described,
    Scalar,
    Symbol,
    encode,
)
from tests.unit.test_amqp_types import PLAIN, SYMBOLS, atoms, from_proton, proton_can_read, same
from tests.unit.test_amqp_types import values as amqp_values

U = uuid.UUID("0123456789abcdef0123456789abcdef")
T_MS = 1700000000250  # a timestamp in milliseconds (exact in proton's float seconds)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def plain(value):
    """Our value for a proton value, dict subclasses (AnnotationDict...) included."""
    if isinstance(value, dict):
        value = dict(value)
    return from_proton(value)


def proton_message(data: bytes) -> proton.Message:
    msg = proton.Message()
    msg.decode(data)
    return msg


FIELDS = (
    "durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "user_id",
    "address", "subject", "reply_to", "correlation_id", "content_type", "content_encoding",
    "expiry_time", "creation_time", "group_id", "group_sequence", "reply_to_group_id",
    "instructions", "annotations", "properties", "body", "inferred",
)


CONVERTED = ("instructions", "annotations", "properties", "body", "id", "correlation_id")


def proton_fields(msg: proton.Message) -> dict:
    fields = {}
    for name in FIELDS:
        value = getattr(msg, name)
        fields[name] = plain(value) if name in CONVERTED else value
    return fields


def full_proton_message(body=b"x" * 256, inferred=True, **overrides) -> proton.Message:
    kwargs = dict(
        durable=True,
        priority=7,
        ttl=1.5,
        first_acquirer=True,
        delivery_count=3,
        id="ID:junction-1",
        user_id=b"guest",
        address="/queue/orders",
        subject="subject",
        reply_to="/queue/replies",
        correlation_id=U,
        content_type="application/octet-stream",
        content_encoding="gzip",
        expiry_time=T_MS / 1000 + 60,
        creation_time=T_MS / 1000,
        group_id="group",
        group_sequence=9,
        reply_to_group_id="reply-group",
        instructions={"x-opt-delivery": 1},
        annotations={"x-opt-jms-dest": proton.byte(0), proton.ulong(7): "seven"},
        properties={"customer": "acme", "retries": 3},
    )
    kwargs.update(overrides)
    return proton.Message(body=body, inferred=inferred, **kwargs)


# ---------------------------------------------------------------------------
# Decoding what proton encodes
# ---------------------------------------------------------------------------


def test_decode_every_field_from_proton():
    data = bytes(full_proton_message().encode())
    s = decode_message(data)
    assert s.header == Header(True, 7, 1500, True, 3)
    assert s.properties == Properties(
        message_id="ID:junction-1",
        user_id=b"guest",
        to="/queue/orders",
        subject="subject",
        reply_to="/queue/replies",
        correlation_id=U,
        content_type=Symbol("application/octet-stream"),
        content_encoding=Symbol("gzip"),
        absolute_expiry_time=T_MS + 60000,
        creation_time=T_MS,
        group_id="group",
        group_sequence=9,
        reply_to_group_id="reply-group",
    )
    assert type(s.properties.content_type) is Symbol
    assert same(s.delivery_annotations, {Symbol("x-opt-delivery"): 1})
    assert same(s.message_annotations, {Symbol("x-opt-jms-dest"): Scalar("byte", 0), 7: "seven"})
    assert same(s.application_properties, {"customer": "acme", "retries": 3})
    assert s.body == [("data", b"x" * 256)]
    assert s.footer is None
    # The raw spans: annotated starts at the message annotations, bare at the properties.
    assert data.endswith(s.annotated) and data.endswith(s.bare)
    assert s.annotated.startswith(b"\x00\x53\x72") and s.bare.startswith(b"\x00\x53\x73")
    assert s.annotated_offset == len(data) - len(s.annotated)
    assert s.bare_offset == len(data) - len(s.bare)


@pytest.mark.parametrize(
    "message_id",
    ["ID:1", "", 0, 2**64 - 1, U, b"\x00binary"],
    ids=repr,
)
def test_message_and_correlation_id_types(message_id):
    msg = proton.Message(id=message_id, correlation_id=message_id, body=None)
    s = decode_message(bytes(msg.encode()))
    for value in (s.properties.message_id, s.properties.correlation_id):
        assert same(value, message_id)


APPLICATION_VALUES = {
    "string": ("text", "text"),
    "empty": ("", ""),
    "long": (-(2**40), -(2**40)),
    "small": (3, 3),
    "double": (2.5, 2.5),
    "true": (True, True),
    "false": (False, False),
    "null": (None, None),
    "binary": (b"\x00\xff", b"\x00\xff"),
    "uuid": (U, U),
    "symbol": (proton.symbol("sym"), Symbol("sym")),
    "ubyte": (proton.ubyte(200), Scalar("ubyte", 200)),
    "ushort": (proton.ushort(60000), Scalar("ushort", 60000)),
    "uint": (proton.uint(4000000000), Scalar("uint", 4000000000)),
    "ulong": (proton.ulong(2**64 - 1), Scalar("ulong", 2**64 - 1)),
    "byte": (proton.byte(-3), Scalar("byte", -3)),
    "short": (proton.short(-300), Scalar("short", -300)),
    "int": (proton.int32(-70000), Scalar("int", -70000)),
    "float": (proton.float32(0.5), Scalar("float", 0.5)),
    "char": (proton.char("\u20ac"), Scalar("char", "\u20ac")),
    "timestamp": (proton.timestamp(T_MS), Scalar("timestamp", T_MS)),
    "decimal32": (proton.decimal32(0x22500001), Scalar("decimal32", h("22500001"))),
    "decimal64": (proton.decimal64(1), Scalar("decimal64", h("0000000000000001"))),
    "decimal128": (proton.decimal128(bytes(range(16))), Scalar("decimal128", bytes(range(16)))),
    "described": (proton.Described(proton.symbol("d"), "v"), Described(Symbol("d"), "v")),
    "long string": ("y" * 300, "y" * 300),
}


def test_application_properties_of_many_types():
    props = {key: theirs for key, (theirs, _) in APPLICATION_VALUES.items()}
    s = decode_message(bytes(proton.Message(properties=props, body="b").encode()))
    assert same(s.application_properties, {key: ours for key, (_, ours) in APPLICATION_VALUES.items()})
    # ... and the same mapping, encoded by us, reads back in proton.
    data = encode_application_properties(s.application_properties) + encode_body_value("b")
    assert same(plain(proton_message(data).properties), s.application_properties)


def test_annotations_and_footer():
    annotations = {
        proton.symbol("x-opt-str"): "v",
        proton.symbol("x-opt-list"): [1, "two", None],
        proton.symbol("x-opt-map"): {proton.symbol("k"): proton.uint(1)},
        proton.ulong(42): proton.timestamp(T_MS),
    }
    msg = proton.Message(annotations=annotations, instructions={"x-opt-i": True}, body="b")
    footer = {Symbol("x-opt-hash"): b"\x01\x02", 9: Scalar("uint", 9)}
    data = bytes(msg.encode()) + encode_annotations(FOOTER, footer)
    s = decode_message(data)
    assert same(
        s.message_annotations,
        {
            Symbol("x-opt-str"): "v",
            Symbol("x-opt-list"): [1, "two", None],
            Symbol("x-opt-map"): {Symbol("k"): Scalar("uint", 1)},
            42: Scalar("timestamp", T_MS),
        },
    )
    assert same(s.delivery_annotations, {Symbol("x-opt-i"): True})
    assert same(s.footer, footer)
    assert s.annotated.endswith(encode_annotations(FOOTER, footer))
    assert s.bare.endswith(encode_annotations(FOOTER, footer))
    # Proton reads the message with our footer on it (and ignores the footer).
    assert proton_message(data).body == "b"


@pytest.mark.parametrize(
    ("body", "inferred", "expected"),
    [
        (b"\x00" * 300, True, [("data", b"\x00" * 300)]),
        (b"", True, [("data", b"")]),
        (b"bytes", False, [("amqp-value", b"bytes")]),
        ("text", False, [("amqp-value", "text")]),
        ({"k": [1, 2]}, False, [("amqp-value", {"k": [1, 2]})]),
        ([1, "a", None], False, [("amqp-value", [1, "a", None])]),
        ([1, "a", None], True, [("amqp-sequence", [1, "a", None])]),
        (U, False, [("amqp-value", U)]),
        (5, False, [("amqp-value", 5)]),
        (None, False, []),
    ],
    ids=repr,
)
def test_body_kinds(body, inferred, expected):
    data = bytes(proton.Message(body=body, inferred=inferred).encode())
    s = decode_message(data)
    assert same(s.body, expected)
    # Proton always writes (empty) header and properties sections.
    assert s.header == Header()
    assert s.properties == Properties()


# ---------------------------------------------------------------------------
# Proton decodes what we encode; raw spans survive a new header
# ---------------------------------------------------------------------------


def test_encode_message_reads_back_in_proton():
    original = full_proton_message()
    s = decode_message(bytes(original.encode()))
    data = encode_message(s)
    assert proton_fields(proton_message(data)) == proton_fields(original)
    assert same_sections(decode_message(data), s)


@pytest.mark.parametrize(
    "body,inferred",
    [(b"x" * 256, True), ("text", False), ({"k": "v"}, False), ([1, 2], True), ([1, 2], False), (b"b", False)],
    ids=repr,
)
@pytest.mark.parametrize("new_header", [None, Header(), Header(durable=True, delivery_count=1)], ids=repr)
def test_annotated_with_a_new_header_is_the_same_message(body, inferred, new_header):
    original = full_proton_message(body=body, inferred=inferred)
    s = decode_message(bytes(original.encode()))
    header = new_header if new_header is not None else s.header
    forwarded = proton_message(encode_header(header) + s.annotated)
    expected = proton_fields(original)
    expected["instructions"] = None  # delivery annotations are per hop: dropped
    for name in ("durable", "priority", "first_acquirer", "delivery_count"):
        expected[name] = getattr(header, name)
    expected["ttl"] = 0 if header.ttl is None else header.ttl / 1000
    assert proton_fields(forwarded) == expected
    assert b"x-opt-delivery" not in s.annotated


def test_annotated_and_bare_without_annotations():
    msg = proton.Message(body="b", durable=True)  # header, properties (empty), body
    data = bytes(msg.encode())
    s = decode_message(data)
    assert s.annotated == s.bare == data[s.bare_offset:]
    assert s.bare.startswith(b"\x00\x53\x73")
    assert proton_fields(proton_message(encode_header(s.header) + s.annotated)) == proton_fields(msg)


def test_bare_with_new_annotations():
    original = full_proton_message()
    s = decode_message(bytes(original.encode()))
    annotations = dict(s.message_annotations)
    annotations[Symbol("x-opt-ORIG-ADDRESS")] = "/queue/old"
    forwarded = proton_message(
        encode_header(s.header) + encode_annotations(MESSAGE_ANNOTATIONS, annotations) + s.bare
    )
    expected = proton_fields(original)
    expected["instructions"] = None
    expected["annotations"] = {**expected["annotations"], Symbol("x-opt-ORIG-ADDRESS"): "/queue/old"}
    assert proton_fields(forwarded) == expected


def test_spans_with_only_header_or_nothing():
    s = decode_message(b"")
    assert s == MessageSections(annotated=b"", bare=b"", annotated_offset=0, bare_offset=0)
    data = encode_header(Header(durable=True))
    s = decode_message(data)
    assert (s.annotated, s.bare, s.annotated_offset, s.bare_offset) == (b"", b"", len(data), len(data))
    data = encode_body_value(None)
    s = decode_message(memoryview(data))
    assert s.annotated == s.bare == data and s.annotated_offset == s.bare_offset == 0
    assert type(s.annotated) is bytes


# ---------------------------------------------------------------------------
# Section encodings by hand
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "wire"),
    [
        (Header(), "00 53 70 45"),
        (Header(durable=True), "00 53 70 c0 02 01 41"),
        (Header(priority=9), "00 53 70 c0 04 02 40 50 09"),
        (Header(ttl=0), "00 53 70 c0 04 03 40 40 43"),
        (Header(ttl=1000), "00 53 70 c0 08 03 40 40 70 00 00 03 e8"),
        (Header(first_acquirer=True), "00 53 70 c0 05 04 40 40 40 41"),
        (Header(delivery_count=2), "00 53 70 c0 07 05 40 40 40 40 52 02"),
        (Header(True, 0, 5, True, 300), "00 53 70 c0 0c 05 41 50 00 52 05 41 70 00 00 01 2c"),
    ],
    ids=repr,
)
def test_encode_header(header, wire):
    assert encode_header(header) == h(wire)
    assert decode_message(h(wire)).header == header


def test_encode_header_refuses_bad_values():
    for header in (Header(priority=256), Header(priority=-1), Header(ttl=-1), Header(delivery_count=2**32)):
        with pytest.raises(ValueError):
            encode_header(header)


def test_encode_header_refuses_bad_types():
    for header in (Header(ttl=1.5), Header(delivery_count=2.0), Header(priority="4")):
        with pytest.raises((TypeError, ValueError)):
            encode_header(header)


def test_header_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(amqp_message_encoder, "HEADER_CACHE_SIZE", 4)
    amqp_message_encoder._headers.clear()
    for ttl in range(20):
        assert decode_message(encode_header(Header(ttl=ttl))).header.ttl == ttl
        assert len(amqp_message_encoder._headers) <= 4
    amqp_message_encoder._headers.clear()


def test_encode_properties():
    assert encode_properties(Properties()) == h("00 53 73 45")
    assert encode_properties(Properties(message_id=1)) == h("00 53 73 c0 03 01 53 01")
    assert encode_properties(Properties(to="a", group_sequence=0)) == h(
        "00 53 73 c0 0f 0c 40 40 a1 01 61" + " 40" * 8 + " 43"
    )
    assert encode_properties(Properties(creation_time=5, content_type=Symbol("t"))) == h(
        "00 53 73 c0 15 0a 40 40 40 40 40 40 a3 01 74 40 40 83 00 00 00 00 00 00 00 05"
    )
    long = encode_properties(Properties(subject="s" * 300))
    assert long[3] == 0xD0
    assert decode_message(long).properties.subject == "s" * 300
    # A plain str is accepted for the symbol fields.
    assert encode_properties(Properties(content_type="t")) == encode_properties(
        Properties(content_type=Symbol("t"))
    )


@pytest.mark.parametrize(
    "properties",
    [
        Properties(message_id=1.5),
        Properties(message_id=[1]),
        Properties(user_id="text"),
        Properties(to=b"bytes"),
        Properties(to=Symbol("sym")),
        Properties(content_type=1),
        Properties(creation_time=1.5),
        Properties(group_sequence="1"),
    ],
    ids=repr,
)
def test_encode_properties_refuses_wrong_types(properties):
    with pytest.raises(TypeError):
        encode_properties(properties)


def test_encode_properties_refuses_out_of_range():
    for properties in (Properties(message_id=-1), Properties(group_sequence=2**32)):
        with pytest.raises(ValueError):
            encode_properties(properties)


def test_encode_application_properties():
    assert encode_application_properties({}) == h("00 53 74 c1 01 00")
    assert encode_application_properties({"a": 1}) == h("00 53 74 c1 06 02 a1 01 61 55 01")
    big = encode_application_properties({str(i): i for i in range(100)})
    assert big[3] == 0xD1
    assert decode_message(big).application_properties == {str(i): i for i in range(100)}
    for bad in ({Symbol("k"): 1}, {1: 1}, {None: 1}):
        with pytest.raises(TypeError, match="key"):
            encode_application_properties(bad)
    for bad in ({"k": [1]}, {"k": (1,)}, {"k": {}}, {"k": Array("int", ())}):
        with pytest.raises(TypeError, match="simple"):
            encode_application_properties(bad)


def test_encode_annotations():
    assert encode_annotations(MESSAGE_ANNOTATIONS, {}) == h("00 53 72 c1 01 00")
    assert encode_annotations(DELIVERY_ANNOTATIONS, {"k": 1}) == h("00 53 71 c1 06 02 a3 01 6b 55 01")
    assert encode_annotations(FOOTER, {5: None, Scalar("ulong", 6): None}) == h(
        "00 53 78 c1 07 04 53 05 40 53 06 40"
    )
    with pytest.raises(ValueError):
        encode_annotations(PROPERTIES, {})
    for bad in ({1.5: 1}, {b"k": 1}, {Scalar("uint", 1): 1}, {-1: 1}):
        with pytest.raises((TypeError, ValueError)):
            encode_annotations(MESSAGE_ANNOTATIONS, bad)


def test_encode_bodies():
    assert encode_body_data(b"ab") == h("00 53 75 a0 02 61 62")
    assert encode_body_data(bytearray(b"ab")) == h("00 53 75 a0 02 61 62")
    assert encode_body_value("ab") == h("00 53 77 a1 02 61 62")
    assert encode_body_sequence([]) == h("00 53 76 45")
    assert encode_body_sequence((1,)) == h("00 53 76 c0 03 01 55 01")
    with pytest.raises(TypeError):
        encode_body_data("text")
    with pytest.raises(TypeError):
        encode_body_sequence("text")


def test_body_depth_matches_the_decoder():
    value = None
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert decode_message(encode_body_value(value)).body == [("amqp-value", value)]
    assert decode_message(encode_body_sequence(value)).body == [("amqp-sequence", value)]
    with pytest.raises(ValueError, match="MAX_DEPTH"):
        encode_body_value([value])
    with pytest.raises(ValueError, match="MAX_DEPTH"):
        encode_body_sequence([value])
    with pytest.raises(DecodeError, match="MAX_DEPTH"):
        decode_message(b"\x00\x53\x77" + encode([value]))


def test_encode_message_refuses_bad_bodies():
    for body in (
        [("amqp-value", 1), ("amqp-value", 2)],
        [("data", b""), ("amqp-sequence", [])],
        [("nope", 1)],
    ):
        with pytest.raises(ValueError):
            encode_message(MessageSections(body=body))


# ---------------------------------------------------------------------------
# Section order and malformed messages, by hand
# ---------------------------------------------------------------------------

HDR = encode_header(Header(durable=True))
DA = encode_annotations(DELIVERY_ANNOTATIONS, {"d": 1})
MA = encode_annotations(MESSAGE_ANNOTATIONS, {"m": 1})
PROPS = encode_properties(Properties(message_id="id"))
AP = encode_application_properties({"a": 1})
D1 = encode_body_data(b"one")
D2 = encode_body_data(b"two")
SEQ = encode_body_sequence([1])
VAL = encode_body_value("v")
FTR = encode_annotations(FOOTER, {"f": 1})


@pytest.mark.parametrize(
    "sections",
    [
        [HDR, DA, MA, PROPS, AP, D1, D2, FTR],
        [HDR, D1],
        [D1, D2, D1],
        [SEQ, SEQ, FTR],
        [VAL],
        [MA, VAL, FTR],
        [AP],
        [FTR],
        [DA],
        [],
    ],
    ids=lambda parts: "+".join(p[2:3].hex() for p in parts) or "empty",
)
def test_valid_orders(sections):
    data = b"".join(sections)
    s = decode_message(data)
    assert encode_message(s) == data  # our own encodings re-encode byte for byte


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ([HDR, HDR], "out of order or repeated"),
        ([DA, HDR], "out of order"),
        ([PROPS, MA], "out of order"),
        ([AP, PROPS], "out of order"),
        ([D1, AP], "out of order"),
        ([FTR, D1], "out of order"),
        ([FTR, FTR], "repeated"),
        ([MA, MA], "repeated"),
        ([VAL, VAL], "follows a amqp-value"),
        ([D1, VAL], "follows a data"),
        ([D1, SEQ], "follows a data"),
        ([SEQ, D1], "follows a amqp-sequence"),
        ([VAL, D1], "follows a amqp-value"),
    ],
)
def test_invalid_orders(sections, message):
    with pytest.raises(DecodeError, match=message):
        decode_message(b"".join(sections))


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ("40", "not a described value"),
        ("a1 01 61", "not a described value"),
        ("00 53 79 40", "unknown section descriptor 0x79"),
        ("00 53 6f 45", "unknown section descriptor"),
        ("00 80 00 00 00 01 00 00 00 70 45", "unknown section descriptor"),
        ("00 a3 03 66 6f 6f 45", "unknown section descriptor"),
        ("00 a1 01 61 45", "neither a ulong nor a symbol"),
        ("00 53 70 c1 01 00", "header section at offset 3 is not a list"),
        ("00 53 73 40", "not a list"),
        ("00 53 72 45", "not a map"),
        ("00 53 74 c0 01 00", "not a map"),
        ("00 53 75 a1 01 61", "data section at offset 0 is not binary"),
        ("00 53 76 a0 00", "amqp-sequence section at offset 0 is not a list"),
        ("00 53 70 c0 07 06 40 40 40 40 40 40", "has 6 fields"),
        ("00 53 73 c0 0f 0e" + " 40" * 14, "has 14 fields"),
        ("00 53 70 c0 02 01 55", "durable has the wrong type"),
        ("00 53 70 c0 03 02 40 52", "priority has the wrong type"),
        ("00 53 70 c0 05 03 40 40 55 05", "ttl has the wrong type"),
        ("00 53 73 c0 03 01 55 01", "message-id has the wrong type"),
        ("00 53 73 c0 03 01 a3 00", "message-id has the wrong type"),
        ("00 53 73 c0 04 02 40 a1 00", "user-id has the wrong type"),
        ("00 53 73 c0 05 03 40 40 a3 00", "to has the wrong type"),
        ("00 53 73 c0 09 07 40 40 40 40 40 40 a1 00", "content-type has the wrong type"),
        ("00 53 73 c0 0b 09 40 40 40 40 40 40 40 40 55 00", "absolute-expiry-time has the wrong type"),
        ("00 53 73 c0 06 03 40 40 a1 01 ff", "not UTF-8"),
        ("00 53 73 c0 04 02 40 40 40", "size disagrees"),
        ("00 53 74 c1 04 02 a3 00 40", "is not a string"),
        ("00 53 74 c1 04 02 55 01 40", "is not a string"),
        ("00 53 74 c1 04 02 a1 00 45", "not of a simple type"),
        ("00 53 74 c1 06 02 a1 00 c0 01 00", "not of a simple type"),
        ("00 53 74 c1 06 02 a1 00 c1 01 00", "not of a simple type"),
        ("00 53 74 c1 07 02 a1 00 e0 02 00 40", "not of a simple type"),
        ("00 53 74 c1 07 04 a1 00 40 a1 00 40", "repeats a key"),
        ("00 53 74 c1 03 01 a1 00", "odd count"),
        ("00 53 74 c1 05 02 a1 01 ff 40", "not UTF-8"),
        ("00 53 74 c1 05 02 a1 00 40 40", "size disagrees"),
        ("00 53 72 c1 03 02 45 40", "cannot hash"),
        ("00 53", "truncated"),
        ("00 53 70", "truncated header"),
        ("00 53 75 a0 05 61", "truncated vbin8"),
    ],
)
def test_malformed_messages(wire, message):
    with pytest.raises(DecodeError, match=message):
        decode_message(h(wire))


def test_descriptor_forms():
    body = h("a1 01 76")  # "v"
    for descriptor in ("53 77", "80 00 00 00 00 00 00 00 77", "a3 11" + b"amqp:amqp-value:*".hex()):
        assert decode_message(h("00" + descriptor) + body).body == [("amqp-value", "v")]
    for name, code in amqp_message.SECTION_SYMBOLS.items():
        value = section_value(code)
        by_name = decode_message(b"\x00" + encode(name) + value)
        by_code = decode_message(bytes((0x00, 0x53, code)) + value)
        assert same_sections(by_name, by_code)
        assert by_name != MessageSections()


def section_value(code: int) -> bytes:
    if code in (HEADER, PROPERTIES):
        return b"\x45"
    if code == DATA:
        return b"\xa0\x00"
    if code == AMQP_SEQUENCE:
        return b"\x45"
    if code == AMQP_VALUE:
        return b"\x40"
    return b"\xc1\x01\x00"


def test_every_cut_inside_a_section_is_a_decode_error():
    data = b"".join([HDR, DA, MA, PROPS, AP, D1, D2, FTR])
    boundaries = set()
    offset = 0
    for part in (HDR, DA, MA, PROPS, AP, D1, D2, FTR):
        boundaries.add(offset)
        offset += len(part)
    for cut in range(len(data)):
        if cut in boundaries:
            decode_message(data[:cut])
        else:
            with pytest.raises(DecodeError):
                decode_message(data[:cut])


# ---------------------------------------------------------------------------
# Hypothesis
# ---------------------------------------------------------------------------

UINT = st.integers(0, 2**32 - 1)
TIMESTAMP = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20)
IDS = st.one_of(st.integers(0, 2**64 - 1), st.uuids(), st.binary(max_size=20), TEXT)
headers = st.builds(Header, st.booleans(), st.integers(0, 255), st.none() | UINT, st.booleans(), UINT)
properties = st.builds(
    Properties,
    *(
        st.none() | strategy
        for strategy in (
            IDS, st.binary(max_size=20), TEXT, TEXT, TEXT, IDS, SYMBOLS, SYMBOLS,
            TIMESTAMP, TIMESTAMP, TEXT, UINT, TEXT,
        )
    ),
)
simple_values = atoms | st.builds(Described, SYMBOLS, atoms)
annotation_maps = st.dictionaries(SYMBOLS | st.integers(0, 2**64 - 1), amqp_values, max_size=4)
bodies = st.one_of(
    st.just([]),
    st.lists(PLAIN["binary"].map(lambda b: ("data", b)), min_size=1, max_size=3),
    amqp_values.map(lambda v: [("amqp-value", v)]),
    st.lists(st.lists(atoms, max_size=4).map(lambda v: ("amqp-sequence", v)), min_size=1, max_size=3),
)
sections = st.builds(
    MessageSections,
    header=st.none() | headers,
    delivery_annotations=st.none() | annotation_maps,
    message_annotations=st.none() | annotation_maps,
    properties=st.none() | properties,
    application_properties=st.none() | st.dictionaries(TEXT, simple_values, max_size=5),
    body=bodies,
    footer=st.none() | annotation_maps,
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_sections(a: MessageSections, b: MessageSections) -> bool:
    return all(
        same(getattr(a, name), getattr(b, name))
        for name in (
            "header", "properties", "delivery_annotations", "message_annotations",
            "application_properties", "body", "footer",
        )
    )


@SETTINGS
@given(sections)
def test_round_trip(s):
    data = encode_message(s)
    decoded = decode_message(data)
    assert same_sections(decoded, s)
    assert encode_message(decoded) == data
    # The spans are exact suffixes at the right offsets.
    assert decoded.annotated == data[decoded.annotated_offset:]
    assert decoded.bare == data[decoded.bare_offset:]
    prefix = b""
    if s.header is not None:
        prefix += encode_header(s.header)
    if s.delivery_annotations is not None:
        prefix += encode_annotations(DELIVERY_ANNOTATIONS, s.delivery_annotations)
    assert decoded.annotated_offset == len(prefix)


@SETTINGS
@given(sections)
def test_proton_reads_what_we_encode(s):
    assume(len(s.body) <= 1)  # proton keeps only the last of several body sections
    for mapping in (s.delivery_annotations, s.message_annotations, s.application_properties):
        assume(mapping is None or all(proton_can_read(v) for v in mapping.values()))
    if s.body and s.body[0][0] != "data":
        assume(proton_can_read(s.body[0][1]))
    msg = proton_message(encode_message(s))
    header = s.header or Header()
    assert (msg.durable, msg.priority, msg.first_acquirer, msg.delivery_count) == (
        header.durable, header.priority, header.first_acquirer, header.delivery_count,
    )
    assert round(msg.ttl * 1000) == (header.ttl or 0)
    p = s.properties or Properties()
    assert _same_id(msg.id, p.message_id)
    assert _same_id(msg.correlation_id, p.correlation_id)
    assert (msg.address, msg.subject, msg.reply_to, msg.group_id, msg.reply_to_group_id) == tuple(
        map(_c_string, (p.to, p.subject, p.reply_to, p.group_id, p.reply_to_group_id))
    )
    # proton returns symbol("None") for an absent content type or encoding
    assert (msg.content_type, msg.content_encoding) == tuple(
        "None" if v is None else _c_string(v) for v in (p.content_type, p.content_encoding)
    )
    assert (msg.user_id or None) == (p.user_id or None)
    assert math.isclose(msg.creation_time * 1000, p.creation_time or 0, rel_tol=1e-12, abs_tol=1e-3)
    assert math.isclose(msg.expiry_time * 1000, p.absolute_expiry_time or 0, rel_tol=1e-12, abs_tol=1e-3)
    assert msg.group_sequence % 2**32 == (p.group_sequence or 0)
    assert same(plain(msg.annotations), s.message_annotations and _ulong_keys(s.message_annotations))
    assert same(plain(msg.instructions), s.delivery_annotations and _ulong_keys(s.delivery_annotations))
    assert same(plain(msg.properties), s.application_properties)
    if not s.body:
        assert msg.body is None
    else:
        kind, value = s.body[0]
        assert same(plain(msg.body), value)
        assert msg.inferred == (kind != "amqp-value")


def _ulong_keys(mapping: dict) -> dict:
    """What proton returns for annotations: integer keys are ulongs."""
    return {Scalar("ulong", k) if type(k) is int else k: v for k, v in mapping.items()}


def _c_string(value):
    """Proton keeps these fields as C strings: a NUL ends them."""
    return None if value is None else value.split("\0")[0]


def _same_id(theirs, ours) -> bool:
    """Proton returns a ulong id as ``ulong`` (as plain ``int`` when it is 0)."""
    if type(ours) is int:
        return isinstance(theirs, int) and int(theirs) == ours
    return same(plain(theirs), ours)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_only_decode_error(data):
    try:
        decode_message(data)
    except DecodeError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections, st.data())
def test_mutations_raise_only_decode_error(s, data):
    wire = bytearray(encode_message(s))
    assume(wire)
    for _ in range(data.draw(st.integers(1, 3))):
        wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_message(bytes(wire))
    except DecodeError:
        pass
