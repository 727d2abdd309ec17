"""Decoding an AMQP 1.0 message: :func:`decode_message` splits it into sections and raw spans.

Checks the section order and every header and properties field's type on
the wire, and keeps the two raw spans (``annotated``, ``bare``) a broker
forwards without re-encoding (see the package doc).  The generic values
inside are read with the type-system decoders' tables
(:mod:`junction.protocols.amqp.types.decoder`).  The tables the decoder
checks each section against (its code, its rank in the spec order) are
defined here, beside the loop that looks them up for every section.
"""

from __future__ import annotations

from junction.protocols.amqp.message.sections import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    DEFAULT_PRIORITY,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    HEADER_FIELDS,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    PROPERTIES_FIELDS,
    Header,
    MessageSections,
    Properties,
)
from junction.protocols.amqp.types.decoder import _DECODERS, _PLAIN, _UNPACK_II
from junction.protocols.amqp.types.values import DecodeError, Scalar, Symbol

__all__ = ["SECTION_SYMBOLS", "decode_message"]

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
