"""AMQP 1.0 types and message sections (junction/protocols/amqp/types/, message/).

``amqp-types`` -- :func:`~junction.protocols.amqp.types.decode` of any bytes:

* only :class:`DecodeError` escapes (condition ``amqp:decode-error``);
* a decoded value encodes, and that encoding is a fixed point
  (``encode(decode(encode(v))) == encode(v)``: the module promises
  ``decode(encode(v)) == v``; comparing bytes keeps NaN out of the way).

``amqp-message`` -- :func:`~junction.protocols.amqp.message.decode_message`:

* only :class:`DecodeError` escapes;
* the raw spans are what they say: ``annotated`` and ``bare`` are the input's
  tail from their offsets, and the annotated span behind a fresh header (what
  a broker forwards) splits again into the same bare message;
* the decoded sections encode, and that encoding is a fixed point.
"""

from __future__ import annotations

import uuid

from junction.protocols.amqp.message import (
    DATA,
    Header,
    MessageSections,
    Properties,
    decode_message,
    encode_header,
    encode_message,
)
from junction.protocols.amqp.types import (
    Array,
    DecodeError,
    Described,
    Scalar,
    Symbol,
    decode,
    encode,
)


def fuzz_types(data: bytes) -> None:
    try:
        value, end = decode(data)
    except DecodeError as exc:
        assert exc.code == "amqp:decode-error", exc.code
        return
    assert 0 < end <= len(data), (end, len(data))
    encoded = encode(value)
    again, end2 = decode(encoded)
    assert end2 == len(encoded)
    assert encode(again) == encoded, (value, encoded, again)


def _sections(s: MessageSections):
    return (s.header, s.delivery_annotations, s.message_annotations, s.properties,
            s.application_properties, s.body, s.footer)


def fuzz_message(data: bytes) -> None:
    try:
        sections = decode_message(data)
    except DecodeError as exc:
        assert exc.code == "amqp:decode-error", exc.code
        return
    assert 0 <= sections.annotated_offset <= sections.bare_offset <= len(data)
    assert sections.annotated == data[sections.annotated_offset:]
    assert sections.bare == data[sections.bare_offset:]
    forwarded = decode_message(encode_header(sections.header or Header()) + sections.annotated)
    assert forwarded.bare == sections.bare
    assert encode_message(MessageSections(*_sections(forwarded)[:1], *_sections(sections)[1:])) \
        == encode_message(MessageSections(sections.header or Header(), *_sections(sections)[1:]))
    encoded = encode_message(sections)
    assert encode_message(decode_message(encoded)) == encoded, (sections, encoded)


_VALUES = [
    None, True, False, 0, 1, -1, 2**40, -(2**40), 2**64 - 1, 1.5, "text", "", "ünï", b"\x00bin",
    Symbol("amqp:accepted:list"), uuid.UUID(int=12345),
    Scalar("ubyte", 7), Scalar("ushort", 700), Scalar("uint", 0), Scalar("uint", 70000),
    Scalar("ulong", 0), Scalar("ulong", 200), Scalar("byte", -3), Scalar("short", -300),
    Scalar("int", -70000), Scalar("float", 0.25), Scalar("char", "é"), Scalar("timestamp", 1700000000000),
    Scalar("decimal32", b"\x00" * 4), Scalar("decimal64", b"\x01" * 8), Scalar("decimal128", b"\x02" * 16),
    [], [1, "a", None], {Symbol("k"): 1, "s": [True]}, {},
    Array("int", (1, 2, 3)), Array("symbol", (Symbol("a"), Symbol("b"))), Array("boolean", (True, False)),
    Array("list", ([], [1])), Array("null", (None, None)), Array("string", ("a", "b"), Symbol("d")),
    Described(Scalar("ulong", 0x10), ["container", "host", Scalar("uint", 65536)]),
    Described(Symbol("x:y"), {"a": b"b"}),
    ["x" * 300, b"y" * 300, list(range(40))], {"n": {"n": {"n": [[[]]]}}},
]


def seeds_types() -> list[bytes]:
    out = [encode(v) for v in _VALUES]
    out.append(encode(_VALUES))
    return out


def seeds_message() -> list[bytes]:
    import proton

    header = Header(durable=True, priority=7, ttl=5000, first_acquirer=True, delivery_count=2)
    props = Properties(message_id="id-1", user_id=b"admin", to="q", subject="s", reply_to="r",
                       correlation_id=uuid.UUID(int=1), content_type=Symbol("text/plain"),
                       content_encoding=Symbol("utf-8"), absolute_expiry_time=1, creation_time=2,
                       group_id="g", group_sequence=3, reply_to_group_id="rg")
    out = [
        encode_message(MessageSections(header, {Symbol("x-da"): 1}, {Symbol("x-opt-a"): "v"}, props,
                                       {"k": 1, "s": "v", "b": True}, [("data", b"hello")],
                                       {Symbol("f"): 0})),
        encode_message(MessageSections(body=[("amqp-value", {"map": [1, 2]})])),
        encode_message(MessageSections(properties=Properties(message_id=7),
                                       body=[("amqp-sequence", [1, 2]), ("amqp-sequence", ["a"])])),
        encode_message(MessageSections(body=[("data", b"a"), ("data", b"b" * 300)])),
        encode_message(MessageSections()),
        bytes((0x00, 0x53, DATA, 0xA0, 0x00)),
        # the long-form descriptors a client may use
        bytes((0x00, 0xA3, 0x12)) + b"amqp:properties:list" + bytes((0x45,)),
        bytes((0x00, 0x80)) + (0x77).to_bytes(8, "big") + bytes((0x40,)),
    ]
    for body in ("text", b"bytes", {"a": 1}, [1, 2], None):
        msg = proton.Message(body=body, id="m", durable=True, priority=5, ttl=2.5,
                             properties={"p": 1, "q": "x"}, annotations={"x-opt-k": "v"},
                             subject="subj", reply_to="rt", correlation_id=9, content_type="ct")
        out.append(bytes(msg.encode()))
    return out
