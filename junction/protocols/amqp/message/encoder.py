"""Encoding AMQP 1.0 message sections: the ``encode_*`` functions and :func:`encode_message`.

Every section is written with the short ``smallulong`` descriptor and its
trailing default or null list fields omitted; header encodings are cached
(at most :data:`HEADER_CACHE_SIZE`).  The values inside are written with the
type-system encoders (:mod:`junction.protocols.amqp.types.encoder`).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from junction.protocols.amqp.message.sections import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    DEFAULT_PRIORITY,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    PROPERTIES_FIELDS,
    Header,
    MessageSections,
    Properties,
)
from junction.protocols.amqp.types.encoder import (
    _ENCODERS,
    _PACK_BB,
    _PACK_BI,
    _e_binary,
    _e_list,
    _e_scalar,
    _e_str,
    _e_symbol,
    _e_uuid,
    _encode_uint,
    _encode_ulong,
    _encoder,
    _frame_map,
    _PACK_Bq,
    _symbol_bytes,
)
from junction.protocols.amqp.types.values import Array, Scalar, Symbol

__all__ = [
    "HEADER_CACHE_SIZE",
    "encode_annotations",
    "encode_application_properties",
    "body_head",
    "encode_body_data",
    "encode_body_sequence",
    "encode_body_value",
    "encode_header",
    "encode_message",
    "encode_properties",
]

HEADER_CACHE_SIZE = 1024
"""Distinct header encodings :func:`encode_header` remembers before starting afresh."""

_NOT_SIMPLE = frozenset((list, tuple, dict, Array))
_PACK_BBBBBB = struct.Struct(">BBBBBB").pack
_PACK_BBBBII = struct.Struct(">BBBBII").pack

# Every section's descriptor, the short smallulong form.
_PREFIX = {
    code: bytes((0x00, 0x53, code))
    for code in (
        HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES,
        DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER,
    )
}
_HEADER_DEFAULT = b"\x00\x53\x70\x45"
_NULL = b"\x40"
_headers: dict[tuple, bytes] = {}


def _uint_bytes(value: int) -> bytes:
    out: list = []
    _encode_uint(out, value)
    return out[0]


def encode_header(header: Header) -> bytes:
    """The header section; default fields are written as null, trailing ones omitted.

    Encodings are cached (at most :data:`HEADER_CACHE_SIZE`): a broker sends
    the same few headers over and over.
    """
    h = header
    priority, ttl, delivery_count = h.priority, h.ttl, h.delivery_count
    # Types first: the cache would take 2.0 for 2.
    if type(priority) is not int or type(delivery_count) is not int or (
        ttl is not None and type(ttl) is not int
    ):
        raise TypeError(f"header priority, ttl and delivery_count must be int: {h!r}")
    key = (h.durable, priority, ttl, h.first_acquirer, delivery_count)
    encoded = _headers.get(key)
    if encoded is not None:
        return encoded
    if not 0 <= priority <= 255:
        raise ValueError(f"header priority {priority!r} is not a ubyte")
    fields = [
        b"\x41" if h.durable else _NULL,
        _NULL if priority == DEFAULT_PRIORITY else bytes((0x50, priority)),
        _NULL if h.ttl is None else _uint_bytes(h.ttl),
        b"\x41" if h.first_acquirer else _NULL,
        _NULL if not h.delivery_count else _uint_bytes(h.delivery_count),
    ]
    while fields and fields[-1] is _NULL:
        fields.pop()
    if fields:
        body = b"".join(fields)
        encoded = bytes((0x00, 0x53, HEADER, 0xC0, len(body) + 1, len(fields))) + body
    else:
        encoded = _HEADER_DEFAULT
    if len(_headers) >= HEADER_CACHE_SIZE:
        _headers.clear()
    _headers[key] = encoded
    return encoded


def _e_id(out: list, value: Any, depth: int) -> None:
    t = type(value)
    if t is str:
        _e_str(out, value, depth)
    elif t is int:
        _encode_ulong(out, value)
    elif t is bytes:
        _e_binary(out, value, depth)
    elif t is uuid.UUID:
        _e_uuid(out, value, depth)
    else:
        raise TypeError(f"a message or correlation id cannot be a {t.__qualname__}")


def _e_timestamp(out: list, value: int, depth: int) -> None:
    if type(value) is not int:
        raise TypeError(f"a timestamp is an int of milliseconds, not a {type(value).__qualname__}")
    out.append(_PACK_Bq(0x83, value))


def _e_uint_field(out: list, value: int, depth: int) -> None:
    if type(value) is not int:
        raise TypeError(f"expected an int, got a {type(value).__qualname__}")
    _encode_uint(out, value)


def _e_string_field(out: list, value: str, depth: int) -> None:
    if not isinstance(value, str) or type(value) is Symbol:
        raise TypeError(f"expected a str, got a {type(value).__qualname__}")
    _e_str(out, value, depth)


def _e_symbol_field(out: list, value: str, depth: int) -> None:
    if not isinstance(value, str):
        raise TypeError(f"expected a symbol, got a {type(value).__qualname__}")
    _e_symbol(out, value, depth)


def _e_binary_field(out: list, value: bytes, depth: int) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got a {type(value).__qualname__}")
    _e_binary(out, value, depth)


# Per properties field: the encoder, and whether a plain str is written as a
# string (0xA1, inlined below) or a symbol (0xA3) or neither.
_PROPERTY_ENCODERS = (
    _e_id, _e_binary_field, _e_string_field, _e_string_field, _e_string_field, _e_id,
    _e_symbol_field, _e_symbol_field, _e_timestamp, _e_timestamp, _e_string_field,
    _e_uint_field, _e_string_field,
)
_STRING_FIELD = (True, False, True, True, True, True, False, False, False, False, True, False, True)
_SYMBOL_FIELD = (False, False, False, False, False, False, True, True, False, False, False, False, False)


def encode_properties(properties: Properties) -> bytes:
    """The properties section, trailing ``None`` fields omitted."""
    p = properties
    values = (
        p.message_id, p.user_id, p.to, p.subject, p.reply_to, p.correlation_id,
        p.content_type, p.content_encoding, p.absolute_expiry_time, p.creation_time,
        p.group_id, p.group_sequence, p.reply_to_group_id,
    )
    count = PROPERTIES_FIELDS
    while count and values[count - 1] is None:
        count -= 1
    if not count:
        return _PROPERTIES_EMPTY
    sub = [b""]  # the list's framing goes here once its size is known
    append = sub.append
    string_field = _STRING_FIELD
    for i in range(count):
        value = values[i]
        if value is None:
            append(_NULL)
            continue
        t = type(value)
        if t is str and string_field[i]:
            raw = value.encode("utf-8")
            n = len(raw)
            append(_PACK_BB(0xA1, n) if n < 256 else _PACK_BI(0xB1, n))
            append(raw)
        elif t is Symbol and _SYMBOL_FIELD[i]:
            raw = _symbol_bytes(value)
            n = len(raw)
            append(_PACK_BB(0xA3, n) if n < 256 else _PACK_BI(0xB3, n))
            append(raw)
        else:
            _PROPERTY_ENCODERS[i](sub, value, 2)
    size = sum(map(len, sub))
    if size < 255:
        sub[0] = _PACK_BBBBBB(0x00, 0x53, PROPERTIES, 0xC0, size + 1, count)
    else:
        sub[0] = _PACK_BBBBII(0x00, 0x53, PROPERTIES, 0xD0, size + 4, count)
    return b"".join(sub)


_PROPERTIES_EMPTY = bytes((0x00, 0x53, PROPERTIES, 0x45))


def encode_application_properties(mapping: dict) -> bytes:
    """The application-properties section: string keys, simple values only."""
    sub = [b""]  # the map's framing goes here once its size is known
    append = sub.append
    encoders = _ENCODERS
    not_simple = _NOT_SIMPLE
    for key, value in mapping.items():
        if type(key) is str:
            raw = key.encode("utf-8")
            n = len(raw)
            append(_PACK_BB(0xA1, n) if n < 256 else _PACK_BI(0xB1, n))
            append(raw)
        elif isinstance(key, str) and type(key) is not Symbol:
            _e_str(sub, key, 2)
        else:
            raise TypeError(f"application-properties key {key!r} is not a str")
        t = type(value)
        if t is str:
            raw = value.encode("utf-8")
            n = len(raw)
            append(_PACK_BB(0xA1, n) if n < 256 else _PACK_BI(0xB1, n))
            append(raw)
        elif t in not_simple:
            raise TypeError(
                f"application-properties value of {key!r} is a {t.__qualname__}, not a simple type"
            )
        else:
            (encoders.get(t) or _encoder(value))(sub, value, 2)
    size = sum(map(len, sub))
    count = 2 * len(mapping)
    if size < 255 and count < 256:
        sub[0] = _PACK_BBBBBB(0x00, 0x53, APPLICATION_PROPERTIES, 0xC1, size + 1, count)
    else:
        sub[0] = _PACK_BBBBII(0x00, 0x53, APPLICATION_PROPERTIES, 0xD1, size + 4, count)
    return b"".join(sub)


def encode_annotations(kind_code: int, mapping: dict) -> bytes:
    """A delivery-annotations (0x71), message-annotations (0x72) or footer (0x78) section.

    Keys are written as symbols (``Symbol`` or ``str``) or ulongs (``int`` or
    ``Scalar("ulong", n)``), the two key types the spec allows.
    """
    if kind_code not in (DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, FOOTER):
        raise ValueError(f"0x{kind_code:02x} is not an annotations section code")
    sub: list = []
    encoders = _ENCODERS
    for key, value in mapping.items():
        t = type(key)
        if t is Symbol or t is str:
            _e_symbol(sub, key, 2)
        elif t is int:
            _encode_ulong(sub, key)
        elif t is Scalar and key.kind == "ulong":
            _e_scalar(sub, key, 2)
        else:
            raise TypeError(f"annotation key {key!r} is neither a symbol nor a ulong")
        (encoders.get(type(value)) or _encoder(value))(sub, value, 2)
    out = [_PREFIX[kind_code]]
    _frame_map(out, b"".join(sub), 2 * len(mapping))
    return b"".join(out)


def encode_body_data(data: bytes | bytearray | memoryview) -> bytes:
    """One data body section."""
    out = [_PREFIX[DATA]]
    _e_binary_field(out, data, 1)
    return b"".join(out)


def body_head(size: int, *, text: bool) -> bytes:
    """The start of a body section of ``size`` content bytes written after it in pieces (a
    body too large to hold in memory): a data section's (``vbin32``) or, with ``text``, an
    amqp-value string's (``str32-utf8``: ``size`` bytes of UTF-8).  At most 2**32 - 1 bytes."""
    if not 0 <= size <= 0xFFFFFFFF:
        raise ValueError(f"a body section holds at most 2**32 - 1 bytes, not {size}")
    return _PREFIX[AMQP_VALUE if text else DATA] + (b"\xb1" if text else b"\xb0") + size.to_bytes(4, "big")


def encode_body_value(value: Any) -> bytes:
    """The amqp-value body section holding ``value`` (any encodable value)."""
    out = [_PREFIX[AMQP_VALUE]]
    (_ENCODERS.get(type(value)) or _encoder(value))(out, value, 1)  # inside the described
    return b"".join(out)


def encode_body_sequence(items: list | tuple) -> bytes:
    """One amqp-sequence body section holding the list ``items``."""
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"an amqp-sequence body is a list, not a {type(items).__qualname__}")
    out = [_PREFIX[AMQP_SEQUENCE]]
    _e_list(out, items, 1)  # inside the described
    return b"".join(out)


_BODY_ENCODERS = {
    "data": encode_body_data,
    "amqp-value": encode_body_value,
    "amqp-sequence": encode_body_sequence,
}


def encode_message(sections: MessageSections) -> bytes:
    """Encode every section the dataclass holds, in spec order.

    The raw ``annotated``/``bare`` spans are ignored.  ``ValueError`` if the
    body mixes kinds or holds more than one amqp-value.
    """
    s = sections
    out = []
    if s.header is not None:
        out.append(encode_header(s.header))
    if s.delivery_annotations is not None:
        out.append(encode_annotations(DELIVERY_ANNOTATIONS, s.delivery_annotations))
    if s.message_annotations is not None:
        out.append(encode_annotations(MESSAGE_ANNOTATIONS, s.message_annotations))
    if s.properties is not None:
        out.append(encode_properties(s.properties))
    if s.application_properties is not None:
        out.append(encode_application_properties(s.application_properties))
    if s.body:
        first = s.body[0][0]
        if first == "amqp-value" and len(s.body) > 1:
            raise ValueError("a message body holds at most one amqp-value section")
        for kind, value in s.body:
            if kind != first:
                raise ValueError(f"a message body cannot mix {first} and {kind} sections")
            encoder = _BODY_ENCODERS.get(kind)
            if encoder is None:
                raise ValueError(f"unknown body section kind {kind!r}")
            out.append(encoder(value))
    if s.footer is not None:
        out.append(encode_annotations(FOOTER, s.footer))
    return b"".join(out)
