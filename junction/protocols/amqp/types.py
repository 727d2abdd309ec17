"""AMQP 1.0 type-system codec (spec part 1), pure Python and sans-IO.

:func:`decode` reads one encoded value from bytes; :func:`encode` and
:func:`encode_into` write one.  No sockets, no Twisted, no proton: the broker
runs this on every message it routes, and the tests check it against proton.

Python mapping (what :func:`decode` returns, what :func:`encode` accepts)::

    null       None                 boolean    bool
    long       int                  double     float
    string     str                  binary     bytes (encode: also bytearray, memoryview)
    symbol     Symbol (a str)       uuid       uuid.UUID
    list       list (encode: also tuple)
    map        dict                 array      Array
    described  Described
    ubyte ushort uint ulong byte short int float char timestamp
    decimal32 decimal64 decimal128
               Scalar(kind, value)  -- the widths plain Python cannot express

``Scalar.value`` is an ``int`` for the integer kinds and ``timestamp``
(milliseconds since the epoch), a ``float`` for ``float``, a one-character
``str`` for ``char`` and the raw big-endian ``bytes`` of the IEEE 754 decimal
for the decimal kinds (4, 8 or 16 octets; nothing here does decimal
arithmetic).  :func:`encode` picks the smallest encoding of each value (``int``
becomes smalllong or long, a plain ``int`` beyond the signed 64-bit range
becomes ulong; ``Scalar("uint", 0)`` becomes uint0, and so on), so that
``decode(encode(v)) == v`` for every ``v`` that :func:`decode` can return.

Arrays: ``Array(kind, items, descriptor=None)``.  ``kind`` is the element
type's name (``"int"``, ``"symbol"``, ``"list"``...), ``items`` a tuple of plain
Python values -- for the :class:`Scalar` kinds the bare ``value`` (``Array("int",
(1, 2))``), for ``symbol`` :class:`Symbol`, for ``array`` nested :class:`Array`.
A ``descriptor`` other than ``None`` says the element constructor is described
(every element is then described by that one descriptor).

Errors: malformed input raises :class:`DecodeError` (a ``ValueError`` and a
:class:`~junction.protocols.errors.RemoteProtocolError` with the AMQP
condition ``amqp:decode-error``), naming the format code and the offset.
Every length and count is checked against the bytes that remain, so
truncated or forged input never raises ``IndexError`` or ``struct.error`` and
never makes the decoder allocate more than the input justifies.  Encoding a
value of a type with no AMQP mapping raises ``TypeError``; a value out of its
kind's range raises ``ValueError``.

Limits (named constants below):

* :data:`MAX_DEPTH` -- list, map, array and described values nested more
  deeply are refused by both :func:`decode` (``DecodeError``) and
  :func:`encode` (``ValueError``), so neither can exhaust the stack.
* :data:`MAX_ZERO_WIDTH_ITEMS` -- an array whose element constructor takes
  no octets (null, true, uint0, list0...) carries a count no byte limits, so
  that count is capped.
* :data:`SYMBOL_CACHE_SIZE` -- decoded symbols are interned in a cache that
  is emptied when it reaches this size.
* Map keys must be hashable in Python: a decoded map whose key is a list or
  a map (or holds one) is refused with ``DecodeError``, as is a map with two
  keys Python considers equal (``1`` and ``true``, ``1`` and ``1.0``).
* An array element constructor that is described twice over (``0x00``
  descriptor ``0x00`` descriptor code) or described by ``null`` is refused.
* A descriptor that is a negative long is refused: :func:`encode` writes a
  plain ``int`` descriptor as a ulong, so it could not be written back.

Performance: one dispatch table indexed by format code, precompiled
:class:`struct.Struct` methods, no per-byte Python loops (arrays of
fixed-width elements are unpacked by one ``struct`` call), cached
:class:`Scalar` objects for the small values and symbols that recur on every
message.  Internals used by :mod:`.message` (``_PLAIN``, ``_e_str``...) are
not public API.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "MAX_DEPTH",
    "MAX_ZERO_WIDTH_ITEMS",
    "SCALAR_KINDS",
    "SYMBOL_CACHE_SIZE",
    "Array",
    "DecodeError",
    "Described",
    "Scalar",
    "Symbol",
    "decode",
    "encode",
    "encode_into",
]

MAX_DEPTH = 64
"""Deepest nesting of list, map, array and described values accepted."""

MAX_ZERO_WIDTH_ITEMS = 65536
"""Most elements accepted in an array whose elements occupy no octets."""

SYMBOL_CACHE_SIZE = 4096
"""Distinct decoded symbols remembered before the symbol cache is emptied."""

SCALAR_KINDS = frozenset(
    (
        "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "float",
        "char", "timestamp", "decimal32", "decimal64", "decimal128",
    )
)
"""The ``Scalar.kind`` names: AMQP types with no plain Python counterpart."""

_UUID = uuid.UUID
_MAX_CODE_POINT = 0x10FFFF


class Symbol(str):
    """An AMQP symbol: an ASCII name from a constrained domain.

    A ``str`` subclass, so it compares and hashes equal to the plain string;
    only its type tells :func:`encode` to write a symbol instead of a string.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


@dataclass(frozen=True, slots=True)
class Scalar:
    """A value whose AMQP width plain Python cannot express (see module doc).

    ``kind`` is one of :data:`SCALAR_KINDS`; ``Scalar("uint", 5)`` and
    ``Scalar("ulong", 5)`` are different values, as they are on the wire.
    """

    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class Described:
    """A described value: ``descriptor`` says what ``value`` means.

    Decoded descriptors are usually a :class:`Symbol` or
    ``Scalar("ulong", code)``; :func:`encode` also takes a plain ``int`` as a
    ulong descriptor.
    """

    descriptor: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array: ``items`` all of the one element type named ``kind``.

    Items are plain values (see module doc); ``descriptor`` is not ``None``
    when every element is described by it.
    """

    kind: str
    items: tuple
    descriptor: Any = None


class DecodeError(RemoteProtocolError, ValueError):
    """Bytes that are not a valid AMQP encoding; ``offset`` says where."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message, "amqp:decode-error")
        self.offset = offset


# Fast constructors for the frozen dataclasses: their generated __init__
# goes through object.__setattr__ and costs twice as much on the hot path.
_new = object.__new__
_set_kind = Scalar.__dict__["kind"].__set__
_set_value = Scalar.__dict__["value"].__set__
_set_descriptor = Described.__dict__["descriptor"].__set__
_set_described_value = Described.__dict__["value"].__set__


def _scalar(kind: str, value: Any) -> Scalar:
    s = _new(Scalar)
    _set_kind(s, kind)
    _set_value(s, value)
    return s


def _described(descriptor: Any, value: Any) -> Described:
    d = _new(Described)
    _set_descriptor(d, descriptor)
    _set_described_value(d, value)
    return d


# ---------------------------------------------------------------------------
# Format codes
# ---------------------------------------------------------------------------

_CODE_NAMES = {
    0x00: "described",
    0x40: "null", 0x41: "true", 0x42: "false", 0x56: "boolean",
    0x50: "ubyte", 0x60: "ushort", 0x70: "uint", 0x52: "smalluint", 0x43: "uint0",
    0x80: "ulong", 0x53: "smallulong", 0x44: "ulong0",
    0x51: "byte", 0x61: "short", 0x71: "int", 0x54: "smallint",
    0x81: "long", 0x55: "smalllong",
    0x72: "float", 0x82: "double",
    0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128",
    0x73: "char", 0x83: "timestamp", 0x98: "uuid",
    0xA0: "vbin8", 0xB0: "vbin32", 0xA1: "str8-utf8", 0xB1: "str32-utf8",
    0xA3: "sym8", 0xB3: "sym32",
    0x45: "list0", 0xC0: "list8", 0xD0: "list32", 0xC1: "map8", 0xD1: "map32",
    0xE0: "array8", 0xF0: "array32",
}

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


def _code_name(code: int) -> str:
    return f"{_CODE_NAMES.get(code, 'unknown')} (format code 0x{code:02x})"


def _truncated(code: int, pos: int) -> DecodeError:
    return DecodeError(f"truncated {_code_name(code)}: input ends at offset {pos}", pos)


def _too_deep(code: int, pos: int) -> DecodeError:
    return DecodeError(
        f"{_code_name(code)} at offset {pos - 1} nested deeper than MAX_DEPTH={MAX_DEPTH}",
        pos - 1,
    )


# ---------------------------------------------------------------------------
# Decoding
#
# A decoder is called as fn(buf, pos, end, depth) with ``pos`` just after the
# format code, ``end`` the end of the enclosing compound (or of the input)
# and ``depth`` the number of compound/described values around this one; it
# returns (value, offset after the value).  ``buf`` is always ``bytes``.
# ---------------------------------------------------------------------------

_UNPACK_H = struct.Struct(">H").unpack_from
_UNPACK_I = struct.Struct(">I").unpack_from
_UNPACK_Q = struct.Struct(">Q").unpack_from
_UNPACK_II = struct.Struct(">II").unpack_from

_SIGNED8 = tuple(i - 256 if i > 127 else i for i in range(256))
_UBYTES = tuple(_scalar("ubyte", i) for i in range(256))
_BYTES = tuple(_scalar("byte", v) for v in _SIGNED8)
_UINTS = tuple(_scalar("uint", i) for i in range(256))
_ULONGS = tuple(_scalar("ulong", i) for i in range(256))
_INTS = tuple(_scalar("int", v) for v in _SIGNED8)
_SMALL_CACHE = {"uint": _UINTS, "ulong": _ULONGS}

_symbols: dict[bytes, Symbol] = {}


def _unknown_decoder(code: int):
    def decode_unknown(buf, pos, end, depth):
        raise DecodeError(f"unknown format code 0x{code:02x} at offset {pos - 1}", pos - 1)

    return decode_unknown


def _constant_decoder(value):
    def decode_constant(buf, pos, end, depth):
        return value, pos

    return decode_constant


def _d_boolean(buf, pos, end, depth):
    if pos >= end:
        raise _truncated(0x56, pos)
    b = buf[pos]
    if b > 1:
        raise DecodeError(f"boolean (format code 0x56) octet 0x{b:02x} at offset {pos}", pos)
    return b == 1, pos + 1


def _byte_decoder(code: int, table: tuple):
    def decode_byte(buf, pos, end, depth):
        if pos >= end:
            raise _truncated(code, pos)
        return table[buf[pos]], pos + 1

    return decode_byte


def _fixed_decoder(code: int, fmt: str, kind: str | None, small: tuple | None = None):
    """Decoder of a fixed-width number: Scalar(kind, n), or plain n if kind is None."""
    st = struct.Struct(fmt)
    unpack = st.unpack_from
    width = st.size
    if kind is None:
        def decode_plain(buf, pos, end, depth):
            n = pos + width
            if n > end:
                raise _truncated(code, pos)
            return unpack(buf, pos)[0], n

        return decode_plain
    if small is not None:
        def decode_cached(buf, pos, end, depth):
            n = pos + width
            if n > end:
                raise _truncated(code, pos)
            v = unpack(buf, pos)[0]
            if v < 256:
                return small[v], n
            return _scalar(kind, v), n

        return decode_cached

    def decode_scalar(buf, pos, end, depth):
        n = pos + width
        if n > end:
            raise _truncated(code, pos)
        return _scalar(kind, unpack(buf, pos)[0]), n

    return decode_scalar


def _char_decoder(wrap: bool):
    def decode_char(buf, pos, end, depth):
        n = pos + 4
        if n > end:
            raise _truncated(0x73, pos)
        cp = _UNPACK_I(buf, pos)[0]
        if cp > _MAX_CODE_POINT:
            raise DecodeError(f"char (format code 0x73) 0x{cp:x} at offset {pos} is no code point", pos)
        return (_scalar("char", chr(cp)) if wrap else chr(cp)), n

    return decode_char


def _decimal_decoder(code: int, kind: str, width: int, wrap: bool):
    def decode_decimal(buf, pos, end, depth):
        n = pos + width
        if n > end:
            raise _truncated(code, pos)
        return (_scalar(kind, buf[pos:n]) if wrap else buf[pos:n]), n

    return decode_decimal


def _d_uuid(buf, pos, end, depth):
    n = pos + 16
    if n > end:
        raise _truncated(0x98, pos)
    return _UUID(bytes=buf[pos:n]), n


def _d_vbin8(buf, pos, end, depth):
    if pos >= end:
        raise _truncated(0xA0, pos)
    start = pos + 1
    n = start + buf[pos]
    if n > end:
        raise _truncated(0xA0, pos)
    return buf[start:n], n


def _d_vbin32(buf, pos, end, depth):
    start = pos + 4
    if start > end:
        raise _truncated(0xB0, pos)
    n = start + _UNPACK_I(buf, pos)[0]
    if n > end:
        raise _truncated(0xB0, pos)
    return buf[start:n], n


def _utf8(buf, start, n, code):
    try:
        return buf[start:n].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            f"{_code_name(code)} at offset {start} is not valid UTF-8: {exc.reason}", start
        ) from None


def _d_str8(buf, pos, end, depth):
    if pos >= end:
        raise _truncated(0xA1, pos)
    start = pos + 1
    n = start + buf[pos]
    if n > end:
        raise _truncated(0xA1, pos)
    return _utf8(buf, start, n, 0xA1), n


def _d_str32(buf, pos, end, depth):
    start = pos + 4
    if start > end:
        raise _truncated(0xB1, pos)
    n = start + _UNPACK_I(buf, pos)[0]
    if n > end:
        raise _truncated(0xB1, pos)
    return _utf8(buf, start, n, 0xB1), n


def _symbol(buf, start, n, code):
    raw = buf[start:n]
    sym = _symbols.get(raw)
    if sym is None:
        try:
            sym = Symbol(raw.decode("ascii"))
        except UnicodeDecodeError:
            raise DecodeError(f"{_code_name(code)} at offset {start} is not ASCII", start) from None
        if len(_symbols) >= SYMBOL_CACHE_SIZE:
            _symbols.clear()
        _symbols[raw] = sym
    return sym


def _d_sym8(buf, pos, end, depth):
    if pos >= end:
        raise _truncated(0xA3, pos)
    start = pos + 1
    n = start + buf[pos]
    if n > end:
        raise _truncated(0xA3, pos)
    return _symbol(buf, start, n, 0xA3), n


def _d_sym32(buf, pos, end, depth):
    start = pos + 4
    if start > end:
        raise _truncated(0xB3, pos)
    n = start + _UNPACK_I(buf, pos)[0]
    if n > end:
        raise _truncated(0xB3, pos)
    return _symbol(buf, start, n, 0xB3), n


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


def _new_array(kind, items, descriptor):
    a = _new(Array)
    _set_array_kind(a, kind)
    _set_array_items(a, items)
    _set_array_descriptor(a, descriptor)
    return a


_set_array_kind = Array.__dict__["kind"].__set__
_set_array_items = Array.__dict__["items"].__set__
_set_array_descriptor = Array.__dict__["descriptor"].__set__


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


# ---------------------------------------------------------------------------
# Encoding
#
# An encoder is called as fn(out, value, depth) and appends byte chunks to
# the list ``out``; ``depth`` counts the compound/described values around it.
# ---------------------------------------------------------------------------

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
