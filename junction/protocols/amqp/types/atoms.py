"""Decoders of the AMQP values that hold no other value: constants, numbers, strings, symbols.

A decoder is called as fn(buf, pos, end, depth) with ``pos`` just after the
format code, ``end`` the end of the enclosing compound (or of the input) and
``depth`` the number of compound/described values around this one; it returns
(value, offset after the value).  ``buf`` is always ``bytes``.  The compound
decoders and the dispatch tables that index all of these by format code are
in :mod:`.decoder`; decoded symbols are interned here, in a cache of at most
:data:`SYMBOL_CACHE_SIZE`.
"""

from __future__ import annotations

import struct
import uuid

from junction.protocols.amqp.types.codes import _code_name, _truncated
from junction.protocols.amqp.types.values import DecodeError, Symbol, _scalar

SYMBOL_CACHE_SIZE = 4096
"""Distinct decoded symbols remembered before the symbol cache is emptied."""

_UUID = uuid.UUID
_MAX_CODE_POINT = 0x10FFFF
_UNPACK_I = struct.Struct(">I").unpack_from

_SIGNED8 = tuple(i - 256 if i > 127 else i for i in range(256))
_UBYTES = tuple(_scalar("ubyte", i) for i in range(256))
_BYTES = tuple(_scalar("byte", v) for v in _SIGNED8)
_UINTS = tuple(_scalar("uint", i) for i in range(256))
_ULONGS = tuple(_scalar("ulong", i) for i in range(256))
_INTS = tuple(_scalar("int", v) for v in _SIGNED8)

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

