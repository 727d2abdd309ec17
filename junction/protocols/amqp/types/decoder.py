"""Decoding AMQP values: the compound ones (list, map, array, described), the dispatch tables, :func:`decode`.

A decoder is called as fn(buf, pos, end, depth) (see :mod:`.atoms`).  The
compound decoders recurse through :data:`_DECODERS`, which indexes every
decoder by format code; :data:`_PLAIN` is the same table with plain numbers
for the :class:`~.values.Scalar` kinds, which the message codec reads header
and properties fields with.
"""

from __future__ import annotations

import struct
from typing import Any

from junction.protocols.amqp.types.atoms import (
    _BYTES,
    _INTS,
    _SIGNED8,
    _UBYTES,
    _UINTS,
    _ULONGS,
    _byte_decoder,
    _char_decoder,
    _constant_decoder,
    _d_boolean,
    _d_str8,
    _d_str32,
    _d_sym8,
    _d_sym32,
    _d_uuid,
    _d_vbin8,
    _d_vbin32,
    _decimal_decoder,
    _fixed_decoder,
    _unknown_decoder,
)
from junction.protocols.amqp.types.codes import _code_name, _too_deep, _truncated
from junction.protocols.amqp.types.values import (
    MAX_DEPTH,
    MAX_ZERO_WIDTH_ITEMS,
    DecodeError,
    _described,
    _new_array,
)

__all__ = ["decode"]

_UNPACK_II = struct.Struct(">II").unpack_from


def _items(buf, pos, end, count, depth, code, table):
    """Decode ``count`` values from ``pos`` that must fill exactly up to ``end``."""
    if count > end - pos:  # every value takes at least one octet
        raise DecodeError(
            f"{_code_name(code)} count {count} exceeds its {end - pos} octets at offset {pos}", pos
        )
    items = []
    append = items.append
    start = pos
    try:
        for _ in range(count):
            c = buf[pos]
            if c == 0x40:  # null and str8 inline: the commonest fields by far
                append(None)
                pos += 1
            elif c == 0xA1:
                start = pos + 2
                n = start + buf[pos + 1]
                if n > end:
                    raise _truncated(0xA1, pos + 1)
                append(buf[start:n].decode("utf-8"))
                pos = n
            else:
                value, pos = table[c](buf, pos + 1, end, depth)
                append(value)
    except IndexError:
        raise _truncated(code, pos) from None
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"{_code_name(0xA1)} at offset {start} is not valid UTF-8: {exc.reason}", start
        ) from None
    if pos != end:
        raise DecodeError(
            f"{_code_name(code)} size disagrees with its content: content ends at offset {pos}, "
            f"size says {end}",
            pos,
        )
    return items


def _d_list0(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0x45, pos)
    return [], pos


def _d_list8(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xC0, pos)
    if pos + 2 > end:
        raise _truncated(0xC0, pos)
    n = pos + 1 + buf[pos]
    if n > end:
        raise _truncated(0xC0, pos)
    return _items(buf, pos + 2, n, buf[pos + 1], depth + 1, 0xC0, _DECODERS), n


def _d_list32(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xD0, pos)
    if pos + 8 > end:
        raise _truncated(0xD0, pos)
    size, count = _UNPACK_II(buf, pos)
    n = pos + 4 + size
    if n > end or size < 4:
        raise _truncated(0xD0, pos)
    return _items(buf, pos + 8, n, count, depth + 1, 0xD0, _DECODERS), n


def _make_map(items, code, pos):
    if len(items) & 1:
        raise DecodeError(f"{_code_name(code)} at offset {pos} has an odd count {len(items)}", pos)
    it = iter(items)
    try:
        result = dict(zip(it, it, strict=False))
    except TypeError:
        raise DecodeError(
            f"{_code_name(code)} at offset {pos} has a key Python cannot hash (a list or map)", pos
        ) from None
    if len(result) * 2 != len(items):
        raise DecodeError(f"{_code_name(code)} at offset {pos} has duplicate keys", pos)
    return result


def _d_map8(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xC1, pos)
    if pos + 2 > end:
        raise _truncated(0xC1, pos)
    n = pos + 1 + buf[pos]
    if n > end:
        raise _truncated(0xC1, pos)
    if buf[pos + 1] & 1:
        raise DecodeError(f"{_code_name(0xC1)} at offset {pos - 1} has an odd count", pos - 1)
    return _make_map(_items(buf, pos + 2, n, buf[pos + 1], depth + 1, 0xC1, _DECODERS), 0xC1, pos), n


def _d_map32(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xD1, pos)
    if pos + 8 > end:
        raise _truncated(0xD1, pos)
    size, count = _UNPACK_II(buf, pos)
    n = pos + 4 + size
    if n > end or size < 4:
        raise _truncated(0xD1, pos)
    if count & 1:
        raise DecodeError(f"{_code_name(0xD1)} at offset {pos - 1} has an odd count", pos - 1)
    return _make_map(_items(buf, pos + 8, n, count, depth + 1, 0xD1, _DECODERS), 0xD1, pos), n


def _negative_descriptor(descriptor: int, pos: int) -> DecodeError:
    # encode() writes a plain int descriptor as the ulong the spec expects: a
    # negative long one could not be written back (the spec reserves
    # descriptors that are neither ulong nor symbol).
    return DecodeError(f"descriptor {descriptor} before offset {pos} is a negative long", pos)


def _d_described(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0x00, pos)
    depth += 1
    table = _DECODERS
    try:
        descriptor, pos = table[buf[pos]](buf, pos + 1, end, depth)
        if type(descriptor) is int and descriptor < 0:
            raise _negative_descriptor(descriptor, pos)
        value, pos = table[buf[pos]](buf, pos + 1, end, depth)
    except IndexError:
        raise _truncated(0x00, pos) from None
    if pos > end:
        raise _truncated(0x00, end)
    return _described(descriptor, value), pos


# The AMQP type (Array.kind) each format code encodes.
_KIND_OF_CODE = {
    0x40: "null", 0x41: "boolean", 0x42: "boolean", 0x56: "boolean",
    0x50: "ubyte", 0x60: "ushort", 0x70: "uint", 0x52: "uint", 0x43: "uint",
    0x80: "ulong", 0x53: "ulong", 0x44: "ulong",
    0x51: "byte", 0x61: "short", 0x71: "int", 0x54: "int", 0x81: "long", 0x55: "long",
    0x72: "float", 0x82: "double",
    0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128",
    0x73: "char", 0x83: "timestamp", 0x98: "uuid",
    0xA0: "binary", 0xB0: "binary", 0xA1: "string", 0xB1: "string",
    0xA3: "symbol", 0xB3: "symbol",
    0x45: "list", 0xC0: "list", 0xD0: "list", 0xC1: "map", 0xD1: "map",
    0xE0: "array", 0xF0: "array",
}

# Array elements of fixed width: struct format character and octets.
_ARRAY_FIXED = {
    0x50: ("B", 1), 0x60: ("H", 2), 0x70: ("I", 4), 0x52: ("B", 1),
    0x80: ("Q", 8), 0x53: ("B", 1),
    0x51: ("b", 1), 0x61: ("h", 2), 0x71: ("i", 4), 0x54: ("b", 1),
    0x81: ("q", 8), 0x55: ("b", 1),
    0x72: ("f", 4), 0x82: ("d", 8), 0x83: ("q", 8),
}
_ARRAY_CONSTANT = {0x40: None, 0x41: True, 0x42: False, 0x43: 0, 0x44: 0}


def _array(buf, pos, end, count, depth, code):
    """Decode an array's constructor and ``count`` elements, filling up to ``end``."""
    if pos >= end:
        raise _truncated(code, pos)
    start = pos
    c = buf[pos]
    pos += 1
    descriptor = None
    if c == 0x00:
        try:
            descriptor, pos = _DECODERS[buf[pos]](buf, pos + 1, end, depth)
            c = buf[pos]
        except IndexError:
            raise _truncated(code, pos) from None
        if type(descriptor) is int and descriptor < 0:
            raise _negative_descriptor(descriptor, pos)
        if descriptor is None or c == 0x00:
            raise DecodeError(
                f"{_code_name(code)} at offset {start}: element constructor described by null "
                "or described twice (not supported)",
                start,
            )
        pos += 1
        if pos > end:
            raise _truncated(code, end)
    kind = _KIND_OF_CODE.get(c)
    if kind is None:
        raise DecodeError(f"unknown format code 0x{c:02x} at offset {pos - 1}", pos - 1)
    fixed = _ARRAY_FIXED.get(c)
    if fixed is not None:
        fmt, width = fixed
        if count * width != end - pos:
            raise DecodeError(
                f"{_code_name(code)} of {count} {_code_name(c)} at offset {start} needs "
                f"{count * width} octets, has {end - pos}",
                start,
            )
        items = struct.unpack_from(f">{count}{fmt}", buf, pos)
    elif c in _ARRAY_CONSTANT or c == 0x45:
        if pos != end:
            raise DecodeError(f"{_code_name(code)} at offset {start}: size disagrees with content", start)
        if count > MAX_ZERO_WIDTH_ITEMS:
            raise DecodeError(
                f"{_code_name(code)} at offset {start}: {count} zero-width elements exceed "
                f"MAX_ZERO_WIDTH_ITEMS={MAX_ZERO_WIDTH_ITEMS}",
                start,
            )
        if c == 0x45:
            if depth >= MAX_DEPTH:
                raise _too_deep(c, pos)
            items = tuple([] for _ in range(count))
        else:
            items = (_ARRAY_CONSTANT[c],) * count
    elif c == 0x56:
        if count != end - pos:
            raise DecodeError(f"{_code_name(code)} at offset {start}: size disagrees with content", start)
        raw = buf[pos:end]
        if raw and max(raw) > 1:
            raise DecodeError(f"{_code_name(code)} at offset {start}: boolean octet above 1", start)
        items = tuple(map(bool, raw))
    else:
        items = _elements(buf, pos, end, count, depth, code, _PLAIN[c])
    return _new_array(kind, items, descriptor)


def _elements(buf, pos, end, count, depth, code, decode_element):
    """Decode ``count`` array elements sharing one constructor, filling up to ``end``."""
    if count > end - pos:  # every variable-width element takes at least one octet
        raise DecodeError(
            f"{_code_name(code)} count {count} exceeds its {end - pos} octets at offset {pos}", pos
        )
    items = []
    append = items.append
    for _ in range(count):
        value, pos = decode_element(buf, pos, end, depth)
        append(value)
    if pos != end:
        raise DecodeError(
            f"{_code_name(code)} size disagrees with its content: content ends at offset {pos}, "
            f"size says {end}",
            pos,
        )
    return tuple(items)


def _d_array8(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xE0, pos)
    if pos + 2 > end:
        raise _truncated(0xE0, pos)
    n = pos + 1 + buf[pos]
    if n > end:
        raise _truncated(0xE0, pos)
    return _array(buf, pos + 2, n, buf[pos + 1], depth + 1, 0xE0), n


def _d_array32(buf, pos, end, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep(0xF0, pos)
    if pos + 8 > end:
        raise _truncated(0xF0, pos)
    size, count = _UNPACK_II(buf, pos)
    n = pos + 4 + size
    if n > end or size < 4:
        raise _truncated(0xF0, pos)
    return _array(buf, pos + 8, n, count, depth + 1, 0xF0), n


def _build_tables():
    """The dispatch tables: _DECODERS (Scalars) and _PLAIN (plain numbers)."""
    common = {
        0x00: _d_described,
        0x40: _constant_decoder(None),
        0x41: _constant_decoder(True),
        0x42: _constant_decoder(False),
        0x56: _d_boolean,
        0x81: _fixed_decoder(0x81, ">q", None),
        0x55: _byte_decoder(0x55, _SIGNED8),
        0x82: _fixed_decoder(0x82, ">d", None),
        0x98: _d_uuid,
        0xA0: _d_vbin8, 0xB0: _d_vbin32,
        0xA1: _d_str8, 0xB1: _d_str32,
        0xA3: _d_sym8, 0xB3: _d_sym32,
        0x45: _d_list0, 0xC0: _d_list8, 0xD0: _d_list32,
        0xC1: _d_map8, 0xD1: _d_map32,
        0xE0: _d_array8, 0xF0: _d_array32,
    }
    scalars = {
        0x50: _byte_decoder(0x50, _UBYTES),
        0x60: _fixed_decoder(0x60, ">H", "ushort"),
        0x70: _fixed_decoder(0x70, ">I", "uint", _UINTS),
        0x52: _byte_decoder(0x52, _UINTS),
        0x43: _constant_decoder(_UINTS[0]),
        0x80: _fixed_decoder(0x80, ">Q", "ulong", _ULONGS),
        0x53: _byte_decoder(0x53, _ULONGS),
        0x44: _constant_decoder(_ULONGS[0]),
        0x51: _byte_decoder(0x51, _BYTES),
        0x61: _fixed_decoder(0x61, ">h", "short"),
        0x71: _fixed_decoder(0x71, ">i", "int"),
        0x54: _byte_decoder(0x54, _INTS),
        0x72: _fixed_decoder(0x72, ">f", "float"),
        0x73: _char_decoder(True),
        0x83: _fixed_decoder(0x83, ">q", "timestamp"),
        0x74: _decimal_decoder(0x74, "decimal32", 4, True),
        0x84: _decimal_decoder(0x84, "decimal64", 8, True),
        0x94: _decimal_decoder(0x94, "decimal128", 16, True),
    }
    identity = tuple(range(256))
    plain = {
        0x50: _byte_decoder(0x50, identity),
        0x60: _fixed_decoder(0x60, ">H", None),
        0x70: _fixed_decoder(0x70, ">I", None),
        0x52: _byte_decoder(0x52, identity),
        0x43: _constant_decoder(0),
        0x80: _fixed_decoder(0x80, ">Q", None),
        0x53: _byte_decoder(0x53, identity),
        0x44: _constant_decoder(0),
        0x51: _byte_decoder(0x51, _SIGNED8),
        0x61: _fixed_decoder(0x61, ">h", None),
        0x71: _fixed_decoder(0x71, ">i", None),
        0x54: _byte_decoder(0x54, _SIGNED8),
        0x72: _fixed_decoder(0x72, ">f", None),
        0x73: _char_decoder(False),
        0x83: _fixed_decoder(0x83, ">q", None),
        0x74: _decimal_decoder(0x74, "decimal32", 4, False),
        0x84: _decimal_decoder(0x84, "decimal64", 8, False),
        0x94: _decimal_decoder(0x94, "decimal128", 16, False),
    }
    decoders = [_unknown_decoder(code) for code in range(256)]
    plains = list(decoders)
    for code, fn in common.items():
        decoders[code] = plains[code] = fn
    for code, fn in scalars.items():
        decoders[code] = fn
    for code, fn in plain.items():
        plains[code] = fn
    return tuple(decoders), tuple(plains)


_DECODERS, _PLAIN = _build_tables()
"""Decoder per format code; _PLAIN returns plain ints/floats/str/bytes for the
Scalar kinds (the message codec uses it for header and properties fields)."""


def decode(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Any, int]:
    """Decode the value encoded at ``data[pos:]``; return it and the offset after it.

    Raises :class:`DecodeError` if the bytes there are not one valid value.
    Offsets in errors are offsets into ``data``.
    """
    buf = data if type(data) is bytes else bytes(data)
    end = len(buf)
    if not 0 <= pos < end:
        raise DecodeError(f"no value at offset {pos}: input is {end} octets", pos)
    return _DECODERS[buf[pos]](buf, pos + 1, end, 0)

