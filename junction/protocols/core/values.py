"""CORE's compound values: message properties (``TypedProperties``) and connectors
(``TransportConfiguration``), with :class:`Scalar` for the widths Python lacks.

Python mapping of a typed value (a message property, a map-message entry, a
connector parameter)::

    NULL (0)     None                BYTES (4)    bytes
    BOOLEAN (2)  bool                LONG (7)     int
    STRING (10)  str (a SimpleString)  DOUBLE (9)   float
    BYTE (3), SHORT (5), INT (6), FLOAT (8), CHAR (11)
                 Scalar(kind, value): Scalar("int", 5), Scalar("char", "x")

Properties are a tuple of ``(name, value)`` pairs in wire order (Artemis keeps
them in a hash map, so its order is arbitrary; keeping ours makes a decoded
message re-encode to the same bytes), or None when the message has none.  A
name repeated on the wire is kept repeated; Artemis's map keeps the last.

A connector (:class:`TransportConfiguration`) has a name, a factory class and
parameters with their own, narrower type codes (0 boolean, 1 int, 2 long,
3 String); extra properties are parameters whose name starts with
:data:`EXTRA_PROPERTY_PREFIX`, kept in place.
"""

from __future__ import annotations

import struct
from codecs import utf_16_le_decode as _utf16le
from dataclasses import dataclass
from typing import Any

from junction.protocols.core.encoding import Reader, Writer

__all__ = [
    "EXTRA_PROPERTY_PREFIX",
    "SCALAR_KINDS",
    "Properties",
    "PropertyType",
    "Scalar",
    "TransportConfiguration",
    "last_value",
    "read_properties",
    "read_transport",
    "write_properties",
    "write_transport",
]


class PropertyType:
    """The type byte of a ``TypedProperties`` value (Artemis ``DataConstants``)."""

    NULL = 0
    BOOLEAN = 2
    BYTE = 3
    BYTES = 4
    SHORT = 5
    INT = 6
    LONG = 7
    FLOAT = 8
    DOUBLE = 9
    STRING = 10
    CHAR = 11


#: ``Scalar.kind`` names: typed values plain Python cannot tell apart.
SCALAR_KINDS = frozenset({"byte", "short", "int", "float", "char"})


@dataclass(frozen=True, slots=True)
class Scalar:
    """A value of a width plain Python lacks; ``kind`` is one of :data:`SCALAR_KINDS`.

    ``value`` is an int for byte/short/int, a float for float, a one-character
    str (one UTF-16 unit) for char.
    """

    kind: str
    value: Any

    def __post_init__(self) -> None:
        if self.kind not in SCALAR_KINDS:
            raise ValueError(f"Scalar kind {self.kind!r} is not one of {sorted(SCALAR_KINDS)}")


#: Message properties: (name, value) pairs in wire order, or None for none.
Properties = tuple[tuple[str, Any], ...] | None

#: Fewest bytes one property takes (an empty name, its type byte, a NULL value).
_MIN_PROPERTY_SIZE = 5


def _read_value(r: Reader, kind: int) -> Any:
    if kind == PropertyType.STRING:
        return r.read_simple_string()
    if kind == PropertyType.LONG:
        return r.read_long()
    if kind == PropertyType.INT:
        return Scalar("int", r.read_int())
    if kind == PropertyType.BOOLEAN:
        return r.read_bool()
    if kind == PropertyType.NULL:
        return None
    if kind == PropertyType.BYTES:
        return r.read_sized_bytes()
    if kind == PropertyType.DOUBLE:
        return r.read_double()
    if kind == PropertyType.BYTE:
        return Scalar("byte", r.read_byte())
    if kind == PropertyType.SHORT:
        return Scalar("short", r.read_short())
    if kind == PropertyType.FLOAT:
        return Scalar("float", r.read_float())
    if kind == PropertyType.CHAR:
        return Scalar("char", r.read_char())
    r.pos -= 1
    raise r.error(f"unknown property type {kind}")


def _write_value(w: Writer, value: Any) -> None:
    t = type(value)
    if t is str:
        w.buf.append(PropertyType.STRING)
        w.write_simple_string(value)
    elif t is int:
        w.buf.append(PropertyType.LONG)
        w.write_long(value)
    elif t is bool:
        w.buf.append(PropertyType.BOOLEAN)
        w.write_bool(value)
    elif value is None:
        w.buf.append(PropertyType.NULL)
    elif t is bytes or t is bytearray or t is memoryview:
        w.buf.append(PropertyType.BYTES)
        w.write_sized_bytes(bytes(value))
    elif t is float:
        w.buf.append(PropertyType.DOUBLE)
        w.write_double(value)
    elif t is Scalar:
        kind = value.kind
        if kind == "int":
            w.buf.append(PropertyType.INT)
            w.write_int(value.value)
        elif kind == "byte":
            w.buf.append(PropertyType.BYTE)
            w.write_byte(value.value)
        elif kind == "short":
            w.buf.append(PropertyType.SHORT)
            w.write_short(value.value)
        elif kind == "float":
            w.buf.append(PropertyType.FLOAT)
            w.write_float(value.value)
        else:
            w.buf.append(PropertyType.CHAR)
            w.write_char(value.value)
    else:
        raise TypeError(f"no CORE property type for {t.__name__} value {value!r}")


def last_value(pairs, name: str, default: Any = None) -> Any:
    """The value of the last ``(name, value)`` pair named ``name``: what Artemis's map keeps."""
    found = default
    for key, value in pairs or ():
        if key == name:
            found = value
    return found


def read_properties(r: Reader) -> Properties:
    """``TypedProperties``: byte 0 (none) or non-zero, ``int32 count``, count x (SimpleString, type, value).

    Most properties are read by :func:`_read_properties_fast`; anything it does
    not expect (a truncation, a bad size) sends the whole read through the
    field-by-field path below, so errors are the same whichever path met them.
    """
    start = r.pos
    properties = _read_properties_fast(r)
    if properties is not _SLOW:
        return properties
    r.pos = start
    if not r.read_bool():
        return None
    count = r.read_count(_MIN_PROPERTY_SIZE, "property")
    items = []
    for _ in range(count):
        name = r.read_simple_string()
        items.append((name, _read_value(r, r.read_byte())))
    return tuple(items)


_SLOW = object()
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_FLAG_COUNT = struct.Struct(">Bi")
_TYPE_INT32 = struct.Struct(">Bi")
_TYPE_INT64 = struct.Struct(">Bq")


def _read_properties_fast(r: Reader) -> Properties | object:
    """:func:`read_properties` with the common value types read inline (one bounds check each).

    Returns :data:`_SLOW` (``r.pos`` then undefined) where the bytes are not
    a well-formed property set of those types, for the caller to read again
    field by field; other value types are read by :func:`_read_value`, whose
    errors are those of the slow path at the same offset.
    """
    data = r.data
    pos = r.pos
    end = r.end
    if end - pos < 5:
        if pos < end and data[pos] == 0:
            r.pos = pos + 1
            return None
        return _SLOW
    if data[pos] == 0:
        r.pos = pos + 1
        return None
    count = _INT32.unpack_from(data, pos + 1)[0]
    pos += 5
    if count < 0 or count * _MIN_PROPERTY_SIZE > end - pos:
        return _SLOW
    items = []
    append = items.append
    for _ in range(count):
        if end - pos < 5:
            return _SLOW
        size = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if size < 0 or size & 1 or size >= end - pos:
            return _SLOW
        name = _utf16le(data[pos:pos + size], "surrogatepass", True)[0]
        pos += size
        kind = data[pos]
        pos += 1
        if kind == PropertyType.STRING:
            if end - pos < 4:
                return _SLOW
            size = _INT32.unpack_from(data, pos)[0]
            pos += 4
            if size < 0 or size & 1 or size > end - pos:
                return _SLOW
            append((name, _utf16le(data[pos:pos + size], "surrogatepass", True)[0]))
            pos += size
        elif kind == PropertyType.LONG:
            if end - pos < 8:
                return _SLOW
            append((name, _INT64.unpack_from(data, pos)[0]))
            pos += 8
        elif kind == PropertyType.BOOLEAN:
            if pos >= end:
                return _SLOW
            append((name, data[pos] != 0))
            pos += 1
        elif kind == PropertyType.NULL:
            append((name, None))
        else:
            # A byte above 127 is a negative type to Artemis: unknown either way.
            r.pos = pos
            append((name, _read_value(r, kind if kind < 128 else kind - 256)))
            pos = r.pos
    r.pos = pos
    return tuple(items)


def write_properties(w: Writer, properties: Properties) -> None:
    """Write what :func:`read_properties` reads (None as the single byte 0)."""
    if properties is None:
        w.buf.append(0)
        return
    buf = w.buf
    buf += _FLAG_COUNT.pack(1, len(properties))
    for name, value in properties:
        name = name.encode("utf-16-le", "surrogatepass")
        buf += _INT32.pack(len(name))
        buf += name
        t = type(value)
        # The two types nearly every message carries, inline; the rest by _write_value.
        if t is str:
            value = value.encode("utf-16-le", "surrogatepass")
            buf += _TYPE_INT32.pack(PropertyType.STRING, len(value))
            buf += value
        elif t is int:
            buf += _TYPE_INT64.pack(PropertyType.LONG, value)
        else:
            _write_value(w, value)


# -- TransportConfiguration ------------------------------------------------------

#: Name prefix of a connector's extra properties (``TransportConfiguration.EXTRA_PROPERTY_PREFIX``).
EXTRA_PROPERTY_PREFIX = "$.EP."

_TC_BOOLEAN = 0
_TC_INT = 1
_TC_LONG = 2
_TC_STRING = 3
#: Fewest bytes one connector parameter takes (an empty String name, its type, a boolean).
_MIN_PARAM_SIZE = 6


@dataclass(frozen=True, slots=True)
class TransportConfiguration:
    """A connector as CORE sends it (topology members, a DISCONNECT_V3 redirect target).

    ``params`` are ``(name, value)`` pairs in wire order; a value is a bool,
    a str, an int (written as a long) or ``Scalar("int", n)``.  Connectors
    made from URIs carry ``host`` and ``port`` as strings.
    """

    name: str
    factory_class_name: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        """The value of parameter ``name`` (the last occurrence, as Artemis's map keeps)."""
        return last_value(self.params, name, default)


def read_transport(r: Reader) -> TransportConfiguration:
    """``TransportConfiguration.decode``: String name, String factory, int32 n, n x (String, type, value)."""
    name = r.read_string()
    factory = r.read_string()
    count = r.read_count(_MIN_PARAM_SIZE, "connector parameter")
    params = []
    for _ in range(count):
        key = r.read_string()
        kind = r.read_byte()
        if kind == _TC_STRING:
            value: Any = r.read_string()
        elif kind == _TC_INT:
            value = Scalar("int", r.read_int())
        elif kind == _TC_LONG:
            value = r.read_long()
        elif kind == _TC_BOOLEAN:
            value = r.read_bool()
        else:
            r.pos -= 1
            raise r.error(f"unknown connector parameter type {kind}")
        params.append((key, value))
    return TransportConfiguration(name, factory, tuple(params))


def write_transport(w: Writer, tc: TransportConfiguration) -> None:
    """Write what :func:`read_transport` reads."""
    w.write_string(tc.name)
    w.write_string(tc.factory_class_name)
    w.write_int(len(tc.params))
    for key, value in tc.params:
        w.write_string(key)
        t = type(value)
        if t is str:
            w.buf.append(_TC_STRING)
            w.write_string(value)
        elif t is bool:
            w.buf.append(_TC_BOOLEAN)
            w.write_bool(value)
        elif t is int:
            w.buf.append(_TC_LONG)
            w.write_long(value)
        elif t is Scalar and value.kind == "int":
            w.buf.append(_TC_INT)
            w.write_int(value.value)
        else:
            raise TypeError(f"no connector parameter type for {value!r}")
