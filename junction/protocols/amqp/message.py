"""AMQP 1.0 message sections (spec part 3 section 3.2), pure Python and sans-IO.

A message on the wire is a run of described sections, in this order::

    header? delivery-annotations? message-annotations?      <- annotations
    properties? application-properties? body* footer?       <- bare message

:func:`decode_message` splits a transfer's payload into :class:`MessageSections`
and checks the order: at most one of each non-body section, body sections all
of one kind (any number of ``data`` sections, any number of ``amqp-sequence``
sections, or exactly one ``amqp-value``).  A message with no body is accepted.

Besides the decoded fields it keeps two raw spans, so that a broker can pass a
message on without re-encoding what it did not change (the spec requires the
bare message to reach the receiver unaltered, byte for byte):

* :attr:`MessageSections.annotated` -- everything after the header and the
  delivery-annotations (which are per-hop), from the message-annotations, or
  the first later section, to the end.  Prefixed with a fresh
  :func:`encode_header` it is the message to forward.
* :attr:`MessageSections.bare` -- the bare message, from properties (or the
  first later section) to the end, footer included.  Prefixed with a header
  and :func:`encode_annotations` of new message-annotations, it is the
  message to forward when the broker adds annotations of its own.

Field types are checked on the wire: each header and properties field must
be null or have the encoding the spec gives it (``priority`` a ubyte, ``ttl``
a uint, ``message-id`` a ulong, uuid, binary or string, ``content-type`` a
symbol, the times timestamps...), and a list with more fields than the spec
defines is refused.  The fields are returned as plain Python values
(``ttl``, ``delivery_count``, ``group_sequence`` and ulong ids as ``int``, the
two timestamps as ``int`` milliseconds since the epoch); absent or null
header fields take the spec's defaults.  Annotation and footer maps keep
their values as :mod:`.types` decodes them, with symbol keys as
:class:`Symbol` and ulong keys as plain ``int`` (a string key is kept as a
string; a key of another type is refused, as the spec allows only those two).  Application-properties
keys must be strings (a symbol key is refused) and their values simple (no
list, map or array; a described value is accepted).  A violation of any of
these rules is a :class:`DecodeError`.

Limits: those of :mod:`.types` (:data:`~.types.MAX_DEPTH`...), plus
:data:`HEADER_FIELDS` and :data:`PROPERTIES_FIELDS` fields per list, and
:data:`HEADER_CACHE_SIZE` cached header encodings.

The ``encode_*`` functions build sections from the dataclasses, always with
the short ``smallulong`` descriptor (``0x00 0x53 code``) and with trailing
default or null list fields omitted.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from junction.protocols.amqp.types import (
    _DECODERS,
    _ENCODERS,
    _PACK_BB,
    _PACK_BI,
    _PLAIN,
    _UNPACK_II,
    Array,
    DecodeError,
    Scalar,
    Symbol,
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

__all__ = [
    "AMQP_SEQUENCE",
    "AMQP_VALUE",
    "APPLICATION_PROPERTIES",
    "DATA",
    "DEFAULT_PRIORITY",
    "DELIVERY_ANNOTATIONS",
    "FOOTER",
    "HEADER",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "SECTION_SYMBOLS",
    "Header",
    "MessageSections",
    "Properties",
    "decode_message",
    "encode_annotations",
    "encode_application_properties",
    "encode_body_data",
    "encode_body_sequence",
    "encode_body_value",
    "encode_header",
    "encode_message",
    "encode_properties",
]

# Section descriptor codes (domain 0x00000000, the AMQP domain).
HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

SECTION_SYMBOLS = {
    Symbol("amqp:header:list"): HEADER,
    Symbol("amqp:delivery-annotations:map"): DELIVERY_ANNOTATIONS,
    Symbol("amqp:message-annotations:map"): MESSAGE_ANNOTATIONS,
    Symbol("amqp:properties:list"): PROPERTIES,
    Symbol("amqp:application-properties:map"): APPLICATION_PROPERTIES,
    Symbol("amqp:data:binary"): DATA,
    Symbol("amqp:amqp-sequence:list"): AMQP_SEQUENCE,
    Symbol("amqp:amqp-value:*"): AMQP_VALUE,
    Symbol("amqp:footer:map"): FOOTER,
}
"""The symbolic descriptors, accepted by :func:`decode_message` like the codes."""

DEFAULT_PRIORITY = 4
"""The header's priority when absent (spec part 3 section 3.2.1)."""

HEADER_FIELDS = 5
"""Fields of the header list; a longer list is refused."""

PROPERTIES_FIELDS = 13
"""Fields of the properties list; a longer list is refused."""

HEADER_CACHE_SIZE = 1024
"""Distinct header encodings :func:`encode_header` remembers before starting afresh."""

_UINT_MAX = 0xFFFFFFFF
_ULONG_MAX = (1 << 64) - 1

# Position of each section in the spec order; all body sections share one.
_RANK = {
    HEADER: 0, DELIVERY_ANNOTATIONS: 1, MESSAGE_ANNOTATIONS: 2, PROPERTIES: 3,
    APPLICATION_PROPERTIES: 4, DATA: 5, AMQP_SEQUENCE: 5, AMQP_VALUE: 5, FOOTER: 6,
}
_BODY_RANK = 5
_SECTION_NAMES = {
    HEADER: "header", DELIVERY_ANNOTATIONS: "delivery-annotations",
    MESSAGE_ANNOTATIONS: "message-annotations", PROPERTIES: "properties",
    APPLICATION_PROPERTIES: "application-properties", DATA: "data",
    AMQP_SEQUENCE: "amqp-sequence", AMQP_VALUE: "amqp-value", FOOTER: "footer",
}
_PREFIX = {code: bytes((0x00, 0x53, code)) for code in _RANK}
_NOT_SIMPLE = frozenset((list, tuple, dict, Array))
_PACK_BBBBBB = struct.Struct(">BBBBBB").pack
_PACK_BBBBII = struct.Struct(">BBBBII").pack


@dataclass(slots=True)
class Header:
    """The header section: transport-level delivery annotations (spec 3.2.1).

    ``ttl`` is in milliseconds (``None``: no expiry); the others take the
    spec's defaults when absent from the wire.
    """

    durable: bool = False
    priority: int = DEFAULT_PRIORITY
    ttl: int | None = None
    first_acquirer: bool = False
    delivery_count: int = 0


@dataclass(slots=True)
class Properties:
    """The properties section: the bare message's immutable properties (spec 3.2.4).

    ``message_id``/``correlation_id`` are an ``int`` (ulong), ``uuid.UUID``,
    ``bytes`` or ``str``; the two times are ``int`` milliseconds since the
    epoch; ``group_sequence`` an ``int`` (uint).
    """

    message_id: int | uuid.UUID | bytes | str | None = None
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: int | uuid.UUID | bytes | str | None = None
    content_type: Symbol | None = None
    content_encoding: Symbol | None = None
    absolute_expiry_time: int | None = None
    creation_time: int | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None


@dataclass(slots=True)
class MessageSections:
    """A message split into its sections (see the module doc).

    ``body`` is a list of ``(kind, value)``: ``("data", bytes)`` per data
    section, ``("amqp-sequence", list)`` per sequence section, or one
    ``("amqp-value", value)``.  ``annotated`` and ``bare`` are the raw spans
    :func:`decode_message` found, at ``annotated_offset`` and ``bare_offset``
    of its input (empty, at the input's end, when the message has no such
    section); :func:`encode_message` ignores all four.
    """

    header: Header | None = None
    delivery_annotations: dict | None = None
    message_annotations: dict | None = None
    properties: Properties | None = None
    application_properties: dict | None = None
    body: list = field(default_factory=list)
    footer: dict | None = None
    annotated: bytes = b""
    bare: bytes = b""
    annotated_offset: int = 0
    bare_offset: int = 0


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def _truncated(what: str, pos: int) -> DecodeError:
    return DecodeError(f"truncated {what} section: input ends at offset {pos}", pos)


def _descriptor(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Section code and offset after a descriptor that is not a smallulong."""
    descriptor, pos = _DECODERS[buf[pos]](buf, pos + 1, end, 1)
    if type(descriptor) is Scalar and descriptor.kind == "ulong":
        code = descriptor.value
    elif type(descriptor) is Symbol:
        code = SECTION_SYMBOLS.get(descriptor, -1)
    else:
        raise DecodeError(f"section descriptor {descriptor!r} is neither a ulong nor a symbol")
    if code not in _RANK:
        raise DecodeError(f"unknown section descriptor {descriptor!r}")
    return code, pos


def _codes(*codes: int) -> bytes:
    """A 256-octet table: 1 at each format code a field accepts (null always)."""
    table = bytearray(256)
    for code in (0x40, *codes):
        table[code] = 1
    return bytes(table)


_F_BOOLEAN = _codes(0x41, 0x42, 0x56)
_F_UBYTE = _codes(0x50)
_F_UINT = _codes(0x43, 0x52, 0x70)
_F_ID = _codes(0x44, 0x53, 0x80, 0x98, 0xA0, 0xB0, 0xA1, 0xB1)  # ulong uuid binary string
_F_BINARY = _codes(0xA0, 0xB0)
_F_STRING = _codes(0xA1, 0xB1)
_F_SYMBOL = _codes(0xA3, 0xB3)
_F_TIMESTAMP = _codes(0x83)

_HEADER_NAMES = ("durable", "priority", "ttl", "first-acquirer", "delivery-count")
_HEADER_CODES = (_F_BOOLEAN, _F_UBYTE, _F_UINT, _F_BOOLEAN, _F_UINT)
_PROPERTIES_NAMES = (
    "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
    "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
    "reply-to-group-id",
)
_PROPERTIES_CODES = (
    _F_ID, _F_BINARY, _F_STRING, _F_STRING, _F_STRING, _F_ID, _F_SYMBOL, _F_SYMBOL,
    _F_TIMESTAMP, _F_TIMESTAMP, _F_STRING, _F_UINT, _F_STRING,
)


def _fields(
    buf: bytes, pos: int, end: int, what: str, names: tuple, codes: tuple
) -> tuple[list, int]:
    """A section's list fields as plain values, each of a type its field accepts.

    ``names`` and ``codes`` hold each field's name and accepted format codes;
    a field of another type, or more fields than ``names``, is a DecodeError.
    """
    start = pos
    c = buf[pos]
    if c == 0xC0:
        if pos + 3 > end:
            raise _truncated(what, pos)
        lend = pos + 2 + buf[pos + 1]
        count = buf[pos + 2]
        pos += 3
    elif c == 0x45:
        return [], pos + 1
    elif c == 0xD0:
        if pos + 9 > end:
            raise _truncated(what, pos)
        size, count = _UNPACK_II(buf, pos + 1)
        lend = pos + 5 + size
        if size < 4:
            raise _truncated(what, pos)
        pos += 9
    else:
        raise DecodeError(f"{what} section at offset {pos} is not a list (format code 0x{c:02x})", pos)
    if lend > end:
        raise _truncated(what, start)
    if count > len(codes):
        raise DecodeError(f"{what} section at offset {start} has {count} fields", start)
    if count > lend - pos:
        raise _truncated(what, start)
    plain = _PLAIN
    values = []
    append = values.append
    accepted_codes = codes if count == len(codes) else codes[:count]
    try:
        for accepted in accepted_codes:
            c = buf[pos]
            if c == 0x40:
                append(None)
                pos += 1
            elif not accepted[c]:
                raise DecodeError(
                    f"{what} section at offset {start}: {names[len(values)]} has the wrong type "
                    f"(format code 0x{c:02x})",
                    start,
                )
            elif c == 0xA1:
                first = pos + 2
                n = first + buf[pos + 1]
                if n > lend:
                    raise _truncated(what, start)
                append(buf[first:n].decode("utf-8"))
                pos = n
            elif c == 0x41:
                append(True)
                pos += 1
            elif c == 0x42:
                append(False)
                pos += 1
            else:
                value, pos = plain[c](buf, pos + 1, lend, 2)
                append(value)
    except IndexError:
        raise _truncated(what, start) from None
    except UnicodeDecodeError:
        raise DecodeError(f"{what} section at offset {start}: a string is not UTF-8", start) from None
    if pos != lend:
        raise DecodeError(f"{what} section at offset {start}: list size disagrees with content", start)
    return values, pos


def _map(buf: bytes, pos: int, end: int, what: str) -> tuple[dict, int]:
    c = buf[pos]
    if c != 0xC1 and c != 0xD1:
        raise DecodeError(f"{what} section at offset {pos} is not a map (format code 0x{c:02x})", pos)
    return _DECODERS[c](buf, pos + 1, end, 1)


def _annotations(buf: bytes, pos: int, end: int, what: str) -> tuple[dict, int]:
    """An annotations map (also the footer's), ulong keys turned to plain int.

    A key that is neither a symbol nor a ulong (a string is taken as the
    symbol it spells) is refused: :func:`encode_annotations` could not write
    the map back when the broker adds annotations of its own.
    """
    start = pos
    mapping, pos = _map(buf, pos, end, what)
    for key in mapping:
        if type(key) is not Symbol:
            converted = {}
            for k, v in mapping.items():
                t = type(k)
                if t is Scalar and k.kind == "ulong":
                    k = k.value
                elif t is not Symbol and t is not str:
                    raise DecodeError(
                        f"{what} section at offset {start} has a key {k!r} that is neither "
                        "a symbol nor a ulong",
                        start,
                    )
                converted[k] = v
            mapping = converted
            break
    return mapping, pos




_COMPOUND_CODES = _codes(0x45, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0)


def _application_properties(buf: bytes, pos: int, end: int) -> tuple[dict, int]:
    """The application-properties map: string keys, values of simple types.

    Decoded here rather than by the generic map decoder so that key and value
    types are checked by format code before anything is built.
    """
    start = pos
    c = buf[pos]
    if c == 0xC1:
        if pos + 3 > end:
            raise _truncated("application-properties", pos)
        mend = pos + 2 + buf[pos + 1]
        count = buf[pos + 2]
        pos += 3
    elif c == 0xD1:
        if pos + 9 > end:
            raise _truncated("application-properties", pos)
        size, count = _UNPACK_II(buf, pos + 1)
        mend = pos + 5 + size
        if size < 4:
            raise _truncated("application-properties", pos)
        pos += 9
    else:
        raise DecodeError(
            f"application-properties section at offset {pos} is not a map (format code 0x{c:02x})",
            pos,
        )
    if mend > end or count > mend - pos:
        raise _truncated("application-properties", start)
    if count & 1:
        raise DecodeError(f"application-properties at offset {start} has an odd count", start)
    decoders = _DECODERS
    compound = _COMPOUND_CODES
    result = {}
    try:
        for _ in range(count >> 1):
            c = buf[pos]
            if c == 0xA1:
                first = pos + 2
                n = first + buf[pos + 1]
                if n > mend:
                    raise _truncated("application-properties", start)
                key = buf[first:n].decode("utf-8")
                pos = n
            elif c == 0xB1:
                key, pos = decoders[c](buf, pos + 1, mend, 2)
            else:
                raise DecodeError(
                    f"application-properties at offset {start}: a key at offset {pos} is not a "
                    f"string (format code 0x{c:02x})",
                    pos,
                )
            c = buf[pos]
            if c == 0xA1:
                first = pos + 2
                n = first + buf[pos + 1]
                if n > mend:
                    raise _truncated("application-properties", start)
                result[key] = buf[first:n].decode("utf-8")
                pos = n
            elif compound[c] and c != 0x40:
                raise DecodeError(
                    f"application-properties at offset {start}: the value of {key!r} is not of "
                    f"a simple type (format code 0x{c:02x})",
                    pos,
                )
            else:
                result[key], pos = decoders[c](buf, pos + 1, mend, 2)
    except IndexError:
        raise _truncated("application-properties", start) from None
    except UnicodeDecodeError:
        raise DecodeError(
            f"application-properties at offset {start}: a string is not UTF-8", start
        ) from None
    if pos != mend:
        raise DecodeError(
            f"application-properties at offset {start}: map size disagrees with content", start
        )
    if len(result) != count >> 1:
        raise DecodeError(f"application-properties at offset {start} repeats a key", start)
    return result, pos


def _header(buf: bytes, pos: int, end: int) -> tuple[Header, int]:
    f, pos = _fields(buf, pos, end, "header", _HEADER_NAMES, _HEADER_CODES)
    n = len(f)
    if n < HEADER_FIELDS:
        f += [None] * (HEADER_FIELDS - n)
    durable, priority, ttl, first_acquirer, delivery_count = f
    return (
        Header(
            durable or False,
            DEFAULT_PRIORITY if priority is None else priority,
            ttl,
            first_acquirer or False,
            delivery_count or 0,
        ),
        pos,
    )


def _properties(buf: bytes, pos: int, end: int) -> tuple[Properties, int]:
    f, pos = _fields(buf, pos, end, "properties", _PROPERTIES_NAMES, _PROPERTIES_CODES)
    n = len(f)
    if n < PROPERTIES_FIELDS:
        f += [None] * (PROPERTIES_FIELDS - n)
    return Properties(*f), pos


def decode_message(data: bytes | bytearray | memoryview) -> MessageSections:
    """Split an encoded message into its sections; :class:`DecodeError` if malformed."""
    buf = data if type(data) is bytes else bytes(data)
    end = len(buf)
    decoders = _DECODERS
    header = delivery_annotations = message_annotations = properties = None
    application_properties = footer = None
    body: list = []
    body_code = 0
    rank = -1
    annotated_offset = bare_offset = -1
    pos = 0
    while pos < end:
        start = pos
        if buf[pos] != 0x00:
            raise DecodeError(
                f"message section at offset {pos} is not a described value "
                f"(format code 0x{buf[pos]:02x})",
                pos,
            )
        code = -1
        try:
            if buf[pos + 1] == 0x53:
                code = buf[pos + 2]
                pos += 3
            else:
                code, pos = _descriptor(buf, pos + 1, end)
            c = buf[pos]
        except IndexError:
            raise _truncated(_SECTION_NAMES.get(code, "message"), end) from None
        r = _RANK.get(code)
        if r is None:
            raise DecodeError(f"unknown section descriptor 0x{code:02x} at offset {start}", start)
        if r <= rank:
            if r != _BODY_RANK or rank != _BODY_RANK:
                raise DecodeError(
                    f"{_SECTION_NAMES[code]} section at offset {start} is out of order "
                    "or repeated",
                    start,
                )
            if code != body_code or code == AMQP_VALUE:
                raise DecodeError(
                    f"{_SECTION_NAMES[code]} section at offset {start} follows a "
                    f"{_SECTION_NAMES[body_code]} body section",
                    start,
                )
        rank = r
        if annotated_offset < 0 and r >= 2:
            annotated_offset = start
            if r >= 3:
                bare_offset = start
        elif bare_offset < 0 and r >= 3:
            bare_offset = start

        if code == DATA:
            if c != 0xA0 and c != 0xB0:
                raise DecodeError(f"data section at offset {start} is not binary", start)
            value, pos = decoders[c](buf, pos + 1, end, 1)
            body.append(("data", value))
            body_code = code
        elif code == PROPERTIES:
            properties, pos = _properties(buf, pos, end)
        elif code == APPLICATION_PROPERTIES:
            application_properties, pos = _application_properties(buf, pos, end)
        elif code == HEADER:
            header, pos = _header(buf, pos, end)
        elif code == MESSAGE_ANNOTATIONS:
            message_annotations, pos = _annotations(buf, pos, end, "message-annotations")
        elif code == AMQP_VALUE:
            value, pos = decoders[c](buf, pos + 1, end, 1)
            body.append(("amqp-value", value))
            body_code = code
        elif code == AMQP_SEQUENCE:
            if c != 0xC0 and c != 0x45 and c != 0xD0:
                raise DecodeError(f"amqp-sequence section at offset {start} is not a list", start)
            value, pos = decoders[c](buf, pos + 1, end, 1)
            body.append(("amqp-sequence", value))
            body_code = code
        elif code == DELIVERY_ANNOTATIONS:
            delivery_annotations, pos = _annotations(buf, pos, end, "delivery-annotations")
        else:
            footer, pos = _annotations(buf, pos, end, "footer")

    if annotated_offset < 0:
        annotated_offset = end
    if bare_offset < 0:
        bare_offset = end
    return MessageSections(
        header,
        delivery_annotations,
        message_annotations,
        properties,
        application_properties,
        body,
        footer,
        buf if annotated_offset == 0 else buf[annotated_offset:],
        buf if bare_offset == 0 else buf[bare_offset:],
        annotated_offset,
        bare_offset,
    )


# ---------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------

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
