"""Encoding AMQP values: :func:`encode` and :func:`encode_into`, the smallest encoding of each value.

An encoder is called as fn(out, value, depth) and appends byte chunks to the
list ``out``; ``depth`` counts the compound/described values around it.
:data:`_ENCODERS` maps each Python type to its encoder; the message codec
uses the encoders of single types (``_e_str``, ``_encode_ulong``...) directly.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from junction.protocols.amqp.types.codes import _CODE_NAMES
from junction.protocols.amqp.types.values import MAX_DEPTH, Array, Described, Scalar, Symbol

__all__ = ["encode", "encode_into"]

_UUID = uuid.UUID

_PACK_B = struct.Struct(">B").pack
_PACK_BB = struct.Struct(">BB").pack
_PACK_BBB = struct.Struct(">BBB").pack
_PACK_BI = struct.Struct(">BI").pack
_PACK_BII = struct.Struct(">BII").pack
_PACK_BQ = struct.Struct(">BQ").pack
_PACK_Bq = struct.Struct(">Bq").pack
_PACK_Bd = struct.Struct(">Bd").pack
_PACK_Bi = struct.Struct(">Bi").pack
_PACK_I = struct.Struct(">I").pack
_PACK_II = struct.Struct(">II").pack

_SMALLLONG = tuple(_PACK_BB(0x55, i & 0xFF) for i in range(-128, 128))
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_ULONG_MAX = (1 << 64) - 1


def _too_deep_to_encode(value) -> ValueError:
    return ValueError(f"{type(value).__name__} nested deeper than MAX_DEPTH={MAX_DEPTH}")


def _e_none(out, value, depth):
    out.append(b"\x40")


def _e_bool(out, value, depth):
    out.append(b"\x41" if value else b"\x42")


def _e_int(out, value, depth):
    if -128 <= value <= 127:
        out.append(_SMALLLONG[value + 128])
    elif _LONG_MIN <= value <= _LONG_MAX:
        out.append(_PACK_Bq(0x81, value))
    elif 0 <= value <= _ULONG_MAX:
        out.append(_PACK_BQ(0x80, value))
    else:
        raise ValueError(f"int {value} is outside both the long and the ulong range")


def _e_float(out, value, depth):
    out.append(_PACK_Bd(0x82, value))


def _e_str(out, value, depth):
    raw = value.encode("utf-8")
    n = len(raw)
    out.append(_PACK_BB(0xA1, n) if n < 256 else _PACK_BI(0xB1, n))
    out.append(raw)


def _e_binary(out, value, depth):
    if type(value) is not bytes:
        value = bytes(value)
    n = len(value)
    out.append(_PACK_BB(0xA0, n) if n < 256 else _PACK_BI(0xB0, n))
    out.append(value)


def _symbol_bytes(value) -> bytes:
    try:
        return value.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError(f"symbol {value!r} is not ASCII") from None


def _e_symbol(out, value, depth):
    raw = _symbol_bytes(value)
    n = len(raw)
    out.append(_PACK_BB(0xA3, n) if n < 256 else _PACK_BI(0xB3, n))
    out.append(raw)


def _e_uuid(out, value, depth):
    out.append(b"\x98")
    out.append(value.bytes)


def _encoder(value):
    """The encoder for ``value``'s type, including subclasses of mapped types."""
    fn = _ENCODERS.get(type(value))
    if fn is not None:
        return fn
    for cls, fn in _SUBCLASS_ENCODERS:
        if isinstance(value, cls):
            return fn
    raise TypeError(f"cannot encode a {type(value).__qualname__} as AMQP")


def _list_body(value, depth) -> bytes:
    sub: list = []
    encoders = _ENCODERS
    for item in value:
        fn = encoders.get(type(item)) or _encoder(item)
        fn(sub, item, depth)
    return b"".join(sub)


def _e_list(out, value, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep_to_encode(value)
    count = len(value)
    if not count:
        out.append(b"\x45")
        return
    body = _list_body(value, depth + 1)
    size = len(body)
    if size < 255 and count < 256:
        out.append(_PACK_BBB(0xC0, size + 1, count))
    else:
        out.append(_PACK_BII(0xD0, size + 4, count))
    out.append(body)


def _map_body(value, depth) -> bytes:
    sub: list = []
    encoders = _ENCODERS
    for key, item in value.items():
        fn = encoders.get(type(key)) or _encoder(key)
        fn(sub, key, depth)
        fn = encoders.get(type(item)) or _encoder(item)
        fn(sub, item, depth)
    return b"".join(sub)


def _frame_map(out, body: bytes, count: int) -> None:
    """Append map8/map32 framing for ``count`` encoded keys and values, then ``body``."""
    size = len(body)
    if size < 255 and count < 256:
        out.append(_PACK_BBB(0xC1, size + 1, count))
    else:
        out.append(_PACK_BII(0xD1, size + 4, count))
    out.append(body)


def _e_map(out, value, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep_to_encode(value)
    _frame_map(out, _map_body(value, depth + 1), 2 * len(value))


def _encode_ulong(out, value):
    if value == 0:
        out.append(b"\x44")
    elif 0 < value < 256:
        out.append(_PACK_BB(0x53, value))
    elif 0 < value <= _ULONG_MAX:
        out.append(_PACK_BQ(0x80, value))
    else:
        raise ValueError(f"ulong {value} out of range")


def _encode_uint(out, value):
    if value == 0:
        out.append(b"\x43")
    elif 0 < value < 256:
        out.append(_PACK_BB(0x52, value))
    elif 0 < value <= 0xFFFFFFFF:
        out.append(_PACK_BI(0x70, value))
    else:
        raise ValueError(f"uint {value} out of range")


def _encode_int(out, value):
    if -128 <= value <= 127:
        out.append(_PACK_BB(0x54, value & 0xFF))
    else:
        out.append(_PACK_Bi(0x71, value))


def _packer(code: int, fmt: str):
    pack = struct.Struct(">B" + fmt).pack

    def encode_packed(out, value):
        out.append(pack(code, value))

    return encode_packed


def _encode_char(out, value):
    if type(value) is not str or len(value) != 1:
        raise ValueError(f"char value must be a one-character str, not {value!r}")
    out.append(_PACK_BI(0x73, ord(value)))


def _decimal_encoder(code: int, width: int):
    def encode_decimal(out, value):
        if not isinstance(value, (bytes, bytearray)) or len(value) != width:
            raise ValueError(f"{_CODE_NAMES[code]} value must be {width} bytes, not {value!r}")
        out.append(_PACK_B(code))
        out.append(bytes(value))

    return encode_decimal


_SCALAR_ENCODERS = {
    "ubyte": _packer(0x50, "B"),
    "ushort": _packer(0x60, "H"),
    "uint": _encode_uint,
    "ulong": _encode_ulong,
    "byte": _packer(0x51, "b"),
    "short": _packer(0x61, "h"),
    "int": _encode_int,
    "float": _packer(0x72, "f"),
    "char": _encode_char,
    "timestamp": _packer(0x83, "q"),
    "decimal32": _decimal_encoder(0x74, 4),
    "decimal64": _decimal_encoder(0x84, 8),
    "decimal128": _decimal_encoder(0x94, 16),
}


def _e_scalar(out, value, depth):
    fn = _SCALAR_ENCODERS.get(value.kind)
    if fn is None:
        raise ValueError(f"unknown Scalar kind {value.kind!r}")
    try:
        fn(out, value.value)
    except (struct.error, OverflowError) as exc:
        raise ValueError(f"{value.kind} value {value.value!r} cannot be encoded: {exc}") from None


def _encode_descriptor(out, descriptor, depth):
    if type(descriptor) is int:
        _encode_ulong(out, descriptor)
    else:
        (_ENCODERS.get(type(descriptor)) or _encoder(descriptor))(out, descriptor, depth)


def _e_described(out, value, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep_to_encode(value)
    out.append(b"\x00")
    _encode_descriptor(out, value.descriptor, depth + 1)
    item = value.value
    (_ENCODERS.get(type(item)) or _encoder(item))(out, item, depth + 1)


# Arrays ---------------------------------------------------------------------

# kind -> (element format code, struct format character) for fixed widths
_ARRAY_FIXED_KINDS = {
    "ubyte": (0x50, "B"), "ushort": (0x60, "H"), "uint": (0x70, "I"), "ulong": (0x80, "Q"),
    "byte": (0x51, "b"), "short": (0x61, "h"), "int": (0x71, "i"), "long": (0x81, "q"),
    "float": (0x72, "f"), "double": (0x82, "d"), "timestamp": (0x83, "q"),
}
_ARRAY_DECIMALS = {"decimal32": (0x74, 4), "decimal64": (0x84, 8), "decimal128": (0x94, 16)}
_ARRAY_VARIABLE = {  # kind -> (8-bit code, 32-bit code)
    "binary": (0xA0, 0xB0), "string": (0xA1, 0xB1), "symbol": (0xA3, 0xB3),
}
_ARRAY_COMPOUND = {"list": (0xC0, 0xD0), "map": (0xC1, 0xD1), "array": (0xE0, 0xF0)}


def _plain_items(kind, items):
    """Items with any Scalar of the array's kind unwrapped to its value."""
    if any(type(item) is Scalar for item in items):
        result = []
        for item in items:
            if type(item) is Scalar:
                if item.kind != kind:
                    raise ValueError(f"{kind} array holds a Scalar of kind {item.kind!r}")
                item = item.value
            result.append(item)
        return result
    return items


def _check_items(kind, items, types) -> None:
    for item in items:
        if not isinstance(item, types):
            raise TypeError(f"{kind} array holds a {type(item).__qualname__}")


def _array_elements(array, depth) -> tuple[int, bytes]:
    """(element format code, encoded elements without their constructors)."""
    kind = array.kind
    items = array.items
    fixed = _ARRAY_FIXED_KINDS.get(kind)
    if fixed is not None:
        code, fmt = fixed
        try:
            return code, struct.pack(f">{len(items)}{fmt}", *_plain_items(kind, items))
        except (struct.error, OverflowError) as exc:
            raise ValueError(f"{kind} array element cannot be encoded: {exc}") from None
    variable = _ARRAY_VARIABLE.get(kind)
    if variable is not None:
        if kind == "binary":
            _check_items(kind, items, (bytes, bytearray, memoryview))
            raws = [bytes(item) for item in items]
        else:
            _check_items(kind, items, str)
            if kind == "string":
                raws = [item.encode("utf-8") for item in items]
            else:
                raws = [_symbol_bytes(item) for item in items]
        if all(len(raw) < 256 for raw in raws):
            return variable[0], b"".join(bytes((len(raw),)) + raw for raw in raws)
        return variable[1], b"".join(_PACK_I(len(raw)) + raw for raw in raws)
    compound = _ARRAY_COMPOUND.get(kind)
    if compound is not None:
        if depth >= MAX_DEPTH:
            raise _too_deep_to_encode(array)
        parts = []
        for item in items:
            if kind == "list":
                parts.append((len(item), _list_body(item, depth + 1)))
            elif kind == "map":
                parts.append((2 * len(item), _map_body(item, depth + 1)))
            else:
                if type(item) is not Array:
                    raise TypeError(f"array of arrays holds a {type(item).__qualname__}")
                parts.append((len(item.items), _array_body(item, depth + 1)))
        if all(count < 256 and len(body) < 255 for count, body in parts):
            return compound[0], b"".join(
                bytes((len(body) + 1, count)) + body for count, body in parts
            )
        return compound[1], b"".join(
            _PACK_II(len(body) + 4, count) + body for count, body in parts
        )
    decimal = _ARRAY_DECIMALS.get(kind)
    if decimal is not None:
        code, width = decimal
        plain = _plain_items(kind, items)
        _check_items(kind, plain, (bytes, bytearray))
        raws = [bytes(item) for item in plain]
        if any(len(raw) != width for raw in raws):
            raise ValueError(f"{kind} array elements must be {width} bytes")
        return code, b"".join(raws)
    if kind == "boolean":
        _check_items(kind, items, bool)
        return 0x56, bytes(1 if item else 0 for item in items)
    if kind == "char":
        chars = _plain_items(kind, items)
        if any(type(c) is not str or len(c) != 1 for c in chars):
            raise ValueError("char array elements must be one-character str")
        return 0x73, struct.pack(f">{len(chars)}I", *map(ord, chars))
    if kind == "uuid":
        _check_items(kind, items, _UUID)
        return 0x98, b"".join(item.bytes for item in items)
    if kind == "null":
        if any(item is not None for item in items):
            raise ValueError("null array elements must be None")
        return 0x40, b""
    raise ValueError(f"unknown Array kind {kind!r}")


def _array_body(array, depth) -> bytes:
    """An array's element constructor and elements (what follows size and count)."""
    code, elements = _array_elements(array, depth)
    if array.descriptor is None:
        return _PACK_B(code) + elements
    out = [b"\x00"]
    _encode_descriptor(out, array.descriptor, depth)
    out.append(_PACK_B(code))
    out.append(elements)
    return b"".join(out)


def _e_array(out, value, depth):
    if depth >= MAX_DEPTH:
        raise _too_deep_to_encode(value)
    body = _array_body(value, depth + 1)
    count = len(value.items)
    size = len(body)
    if size < 255 and count < 256:
        out.append(_PACK_BBB(0xE0, size + 1, count))
    else:
        out.append(_PACK_BII(0xF0, size + 4, count))
    out.append(body)


_ENCODERS = {
    type(None): _e_none,
    bool: _e_bool,
    int: _e_int,
    float: _e_float,
    str: _e_str,
    Symbol: _e_symbol,
    bytes: _e_binary,
    bytearray: _e_binary,
    memoryview: _e_binary,
    _UUID: _e_uuid,
    list: _e_list,
    tuple: _e_list,
    dict: _e_map,
    Scalar: _e_scalar,
    Described: _e_described,
    Array: _e_array,
}

# Checked in order for subclasses (an IntEnum, a str subclass...): bool
# before int and Symbol before str, as isinstance would otherwise match both.
_SUBCLASS_ENCODERS = (
    (bool, _e_bool),
    (int, _e_int),
    (float, _e_float),
    (Symbol, _e_symbol),
    (str, _e_str),
    ((bytes, bytearray, memoryview), _e_binary),
    (_UUID, _e_uuid),
    ((list, tuple), _e_list),
    (dict, _e_map),
)


def encode_into(out: list, value: Any) -> None:
    """Append the encoding of ``value`` to ``out`` as one or more byte chunks."""
    fn = _ENCODERS.get(type(value)) or _encoder(value)
    fn(out, value, 0)


def encode(value: Any) -> bytes:
    """The smallest AMQP encoding of ``value`` (see the module doc for the mapping)."""
    out: list = []
    fn = _ENCODERS.get(type(value)) or _encoder(value)
    fn(out, value, 0)
    return b"".join(out)
