"""Java-typed values and OpenWire's primitive map (``MarshallingSupport``).

A WireFormatInfo's options and a message's properties (``MarshalledProperties``,
a MapMessage's body) travel as a *primitive map*: ``int32 count`` (-1 = null),
then per entry a ``writeUTF`` key, a type byte and the value (openwire.md
sections 2 and 4).  The Java type matters to the reader -- the client casts
``(Long)`` a WireFormatInfo's ``MaxInactivityDuration``; a JMS property read
as ``getIntProperty`` must be an int -- so each number decodes to a subclass
of ``int`` or ``float`` naming its Java type (:class:`Int`, :class:`Long`,
...), which compares and computes as the plain number does.  Writing, a plain
``int`` is an INTEGER when it fits 32 bits and a LONG otherwise, a plain
``float`` a DOUBLE, ``str`` a STRING (BIG_STRING from 8,191 characters, as
Java writes it), ``bytes`` a BYTE_ARRAY, ``dict`` a MAP and ``list``/``tuple``
a LIST.

Limits: at most :data:`MAX_DEPTH` maps and lists inside each other, and a
count bounded by the bytes left (each entry takes at least one byte), so a
hostile count allocates nothing.
"""

from __future__ import annotations

import struct

from junction.protocols.openwire.encoding import Decoder, Encoder, decode_mutf8, encode_mutf8
from junction.protocols.openwire.errors import MalformedCommand

__all__ = [
    "MAX_DEPTH",
    "Byte",
    "Char",
    "Double",
    "Float",
    "Int",
    "Long",
    "Short",
    "decode_primitive_map",
    "decode_primitive_stream",
    "encode_primitive_map",
    "encode_primitive_stream",
]

NULL, BOOLEAN, BYTE, CHAR, SHORT, INTEGER, LONG, DOUBLE, FLOAT, STRING = range(10)
BYTE_ARRAY, MAP, LIST, BIG_STRING = 10, 11, 12, 13

#: Most maps and lists nested in each other in one primitive value.
MAX_DEPTH = 16
#: Characters from which Java writes a string as BIG_STRING (``Short.MAX_VALUE / 4``).
BIG_STRING_CHARS = 0x7FFF // 4


class Byte(int):
    """A Java ``byte``."""


class Short(int):
    """A Java ``short``."""


class Int(int):
    """A Java ``int``."""


class Long(int):
    """A Java ``long``."""


class Float(float):
    """A Java ``float``."""


class Double(float):
    """A Java ``double``."""


class Char(str):
    """A Java ``char`` (one UTF-16 unit)."""


def _read_value(d: Decoder, depth: int):
    t = d.byte()
    if t == NULL:
        return None
    if t == BOOLEAN:
        return d.raw_bool()
    if t == BYTE:
        return Byte(d.byte())
    if t == CHAR:
        return Char(chr(d.ushort()))
    if t == SHORT:
        return Short(d.short())
    if t == INTEGER:
        return Int(d.int())
    if t == LONG:
        return Long(d.long())
    if t == DOUBLE:
        return Double(d.double())
    if t == FLOAT:
        return Float(d.float())
    if t == STRING:
        return d.utf()
    if t == BYTE_ARRAY:
        return d.sized_bytes()
    if t == BIG_STRING:
        n = d.int()
        if n < 0:
            return None
        pos = d.take(n)
        try:
            return decode_mutf8(d.data[pos:pos + n])
        except UnicodeDecodeError as exc:
            raise MalformedCommand(f"a property string is not valid modified UTF-8: {exc.reason}") from None
    if t in (MAP, LIST):
        if depth >= MAX_DEPTH:
            raise MalformedCommand(f"primitive maps and lists nested more than {MAX_DEPTH} deep")
        if t == MAP:
            return _read_map(d, depth + 1)
        n = _count(d, "list")
        return [_read_value(d, depth + 1) for _ in range(n)]
    raise MalformedCommand(f"unknown primitive type {t} in a map")


def _count(d: Decoder, what: str) -> int:
    n = d.int()
    if n > d.end - d.pos:
        raise MalformedCommand(f"a {what} of {n} entries is longer than the {d.end - d.pos} bytes left")
    return n


def _read_map(d: Decoder, depth: int, max_entries: int | None = None) -> dict | None:
    n = _count(d, "map")
    if n < 0:
        return None
    if max_entries is not None and n > max_entries:
        raise MalformedCommand(f"a map of {n} entries exceeds the {max_entries} allowed")
    out = {}
    for _ in range(n):
        key = d.utf()
        out[key] = _read_value(d, depth)
    return out


_INT = struct.Struct(">i")
_USHORT = struct.Struct(">H")
_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")


class _Fallback(Exception):
    """The straight-line map reader or writer leaves this map to the general one."""


def _decode_flat_map(data, max_entries: int | None) -> dict:
    """A map of the common values (null, boolean, int, long, double, short strings) in one loop,
    as :func:`_read_map` reads it; raises (anything) on whatever else, for :func:`_read_map`
    to read or refuse.  Returns only when it consumed ``data`` exactly."""
    n = _INT.unpack_from(data, 0)[0]
    if n < 0 or n > len(data) or (max_entries is not None and n > max_entries):
        raise _Fallback
    pos = 4
    out = {}
    for _ in range(n):
        k = _USHORT.unpack_from(data, pos)[0]
        key = decode_mutf8(data[pos + 2:pos + 2 + k])
        pos += 3 + k
        t = data[pos - 1]
        if t == INTEGER:
            value = Int(_INT.unpack_from(data, pos)[0])
            pos += 4
        elif t == LONG:
            value = Long(_LONG.unpack_from(data, pos)[0])
            pos += 8
        elif t == STRING:
            k = _USHORT.unpack_from(data, pos)[0]
            value = decode_mutf8(data[pos + 2:pos + 2 + k])
            pos += 2 + k
        elif t == BOOLEAN:
            value = data[pos] != 0
            pos += 1
        elif t == NULL:
            value = None
        elif t == DOUBLE:
            value = Double(_DOUBLE.unpack_from(data, pos)[0])
            pos += 8
        else:
            raise _Fallback
        out[key] = value
    if pos != len(data):
        raise _Fallback
    return out


def decode_primitive_map(data: bytes, max_entries: int | None = None) -> dict | None:
    """The map marshalled in ``data`` (all of it), or None for a null map."""
    try:
        return _decode_flat_map(data, max_entries)
    except Exception:  # noqa: BLE001, S110 - the general reader below decides
        pass
    d = Decoder(data, 0, len(data), False, None)
    out = _read_map(d, 0, max_entries)
    if d.pos != d.end:
        raise MalformedCommand(f"{d.end - d.pos} bytes follow a primitive map")
    return out


def _write_value(e: Encoder, value, depth: int) -> None:
    buf = e.buf
    if value is None:
        buf.append(NULL)
    elif isinstance(value, bool):
        buf += bytes((BOOLEAN, 1 if value else 0))
    elif isinstance(value, int):
        if isinstance(value, Byte):
            buf.append(BYTE)
            e.byte(value)
        elif isinstance(value, Short):
            buf.append(SHORT)
            e.short(value)
        elif isinstance(value, Long) or not -0x80000000 <= value <= 0x7FFFFFFF:
            buf.append(LONG)
            e.long(value)
        else:
            buf.append(INTEGER)
            e.int(value)
    elif isinstance(value, float):
        if isinstance(value, Float):
            buf.append(FLOAT)
            buf += struct.pack(">f", value)
        else:
            buf.append(DOUBLE)
            buf += struct.pack(">d", value)
    elif isinstance(value, Char):
        buf.append(CHAR)
        e.short(ord(value) - 0x10000 if ord(value) > 0x7FFF else ord(value))
    elif isinstance(value, str):
        if len(value) < BIG_STRING_CHARS:
            buf.append(STRING)
            e.utf(value)
        else:
            data = encode_mutf8(value)
            buf.append(BIG_STRING)
            e.int(len(data))
            buf += data
    elif isinstance(value, (bytes, bytearray, memoryview)):
        buf.append(BYTE_ARRAY)
        e.int(len(value))
        buf += value
    elif isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise ValueError(f"primitive maps nested more than {MAX_DEPTH} deep")
        buf.append(MAP)
        _write_map(e, value, depth + 1)
    elif isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            raise ValueError(f"primitive lists nested more than {MAX_DEPTH} deep")
        buf.append(LIST)
        e.int(len(value))
        for item in value:
            _write_value(e, item, depth + 1)
    else:
        raise TypeError(f"{type(value).__name__} is not a primitive OpenWire value")


def _write_map(e: Encoder, mapping: dict | None, depth: int) -> None:
    if mapping is None:
        e.int(-1)
        return
    e.int(len(mapping))
    for key, value in mapping.items():
        e.utf(key)
        _write_value(e, value, depth)


def _encode_flat_map(mapping: dict) -> bytes:
    """A map of str keys and the common values (as :func:`_write_value` writes them) in one
    loop; raises :class:`_Fallback` on anything else."""
    buf = bytearray(_INT.pack(len(mapping)))
    for key, value in mapping.items():
        data = encode_mutf8(key)
        if len(data) > 0xFFFF:
            raise _Fallback
        buf += _USHORT.pack(len(data))
        buf += data
        kind = type(value)
        if kind is Int or (kind is int and -0x80000000 <= value <= 0x7FFFFFFF):
            buf.append(INTEGER)
            buf += _INT.pack(value)
        elif kind is Long or kind is int:
            buf.append(LONG)
            buf += _LONG.pack(value)
        elif kind is str and len(value) < BIG_STRING_CHARS:
            data = encode_mutf8(value)
            if len(data) > 0xFFFF:
                raise _Fallback
            buf.append(STRING)
            buf += _USHORT.pack(len(data))
            buf += data
        elif kind is bool:
            buf += bytes((BOOLEAN, 1 if value else 0))
        elif value is None:
            buf.append(NULL)
        else:
            raise _Fallback
    return bytes(buf)


def encode_primitive_map(mapping: dict | None) -> bytes:
    """``mapping`` marshalled as a primitive map (None: the null map, count -1)."""
    if type(mapping) is dict:
        try:
            return _encode_flat_map(mapping)
        except (_Fallback, TypeError, AttributeError, struct.error):
            pass
    e = Encoder(False, None)
    _write_map(e, mapping, 0)
    return bytes(e.buf)


def decode_primitive_stream(data: bytes, max_entries: int) -> list:
    """The values of a StreamMessage body: typed values one after another, as a map's values."""
    d = Decoder(data, 0, len(data), False, None)
    out: list = []
    while d.pos < d.end:
        if len(out) >= max_entries:
            raise MalformedCommand(f"a stream body of more than {max_entries} values")
        out.append(_read_value(d, 0))
    return out


def encode_primitive_stream(values) -> bytes:
    """``values`` as a StreamMessage body."""
    e = Encoder(False, None)
    for value in values:
        _write_value(e, value, 0)
    return bytes(e.buf)
