"""CORE field encodings: a bounds-checked :class:`Reader` and a :class:`Writer`.

Artemis writes its packets through ``ActiveMQBuffer`` (``ChannelBufferWrapper``),
``UTF8Util``, ``SimpleString`` and ``BufferHelper``; these are the same
layouts, big-endian throughout:

==========================  ==================================================================
field                       bytes
==========================  ==================================================================
byte, short, int, long      1, 2, 4, 8 bytes, signed, big-endian
float, double               IEEE 754, 4 and 8 bytes
char                        one UTF-16 code unit, 2 bytes
bool                        1 byte, written 0xFF (true) / 0x00 (false); any non-zero reads true
String (``writeString``)    ``int32 n`` = its length in UTF-16 units, then by size:
                            n < 9: n units of 2 bytes; n < 0xFFF: ``u16 size`` + "UTF-8"
                            (see below); else a SimpleString (``int32 2n`` + UTF-16LE)
nullable String             byte 0 (null) or 1, then a String
SimpleString                ``int32 size`` + UTF-16LE bytes (low byte first), size even
nullable SimpleString       byte 0 (null) or 1, then a SimpleString
nullable bool/int/long      (``BufferHelper``) a bool present-flag (0xFF), then the value
int-sized bytes             ``int32 size`` + size bytes
==========================  ==================================================================

Artemis's "UTF-8" (``UTF8Util.saveUTF``) encodes each UTF-16 unit on its own: up
to 0x7F in one byte (NUL included, unlike Java's modified UTF-8), up to 0x7FF in
two, else three, so a character outside the BMP is two 3-byte surrogates
(CESU-8).  Python strings here hold characters: a surrogate pair read from the
wire becomes one character, and is written back as the same two units; a lone
surrogate survives both ways.

Reading is as lenient as Artemis where Artemis accepts more than it writes
(any non-zero byte is true, any non-zero null-flag is present) and strict
elsewhere: truncation, a negative size, an odd SimpleString, a String whose
bytes are not what Artemis's writer produces (a 4-byte UTF-8 sequence, an
overlong form, a unit count other than the one announced) are
:class:`~junction.protocols.core.errors.MalformedPacket`.  No size read from the
wire is trusted before it is checked against the bytes that remain, so nothing
is allocated beyond the packet already held.

Writing a value out of its field's range raises ``struct.error`` or
``ValueError``: our bug, turned into ``LocalProtocolError`` by the codec.
"""

from __future__ import annotations

import struct
from array import array
from codecs import utf_16_le_decode as _utf16le

from junction.protocols.core.errors import MalformedPacket

__all__ = ["Reader", "Writer", "STRING_SHORT_LIMIT", "STRING_UTF8_LIMIT", "string_units"]

#: Below this many UTF-16 units a String is written unit by unit (``UTF8Util.writeString``).
STRING_SHORT_LIMIT = 9
#: Below this many units (and from :data:`STRING_SHORT_LIMIT`) a String is written as UTF-8.
STRING_UTF8_LIMIT = 0xFFF

_BYTE = struct.Struct(">b")
_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")

# bytes.decode("utf-16-le") reaches _utf16le through the codec registry and a Python
# wrapper on every call; called directly (final=True) it gives the same result.

_TRUE = b"\xff"
_FALSE = b"\x00"


def string_units(text: str) -> str:
    """``text`` as UTF-16 code units, one character each (a non-BMP character becomes its pair)."""
    if text.isascii() or max(text) <= "\uffff":
        return text
    units = array("H")
    units.frombytes(text.encode("utf-16-le", "surrogatepass"))
    if array("H", b"\x01\x00")[0] != 1:  # a big-endian host
        units.byteswap()
    return "".join(map(chr, units))


def _join_pairs(units: str) -> str:
    """Undo :func:`string_units`: surrogate pairs back into characters, lone ones kept."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class Reader:
    """Reads CORE fields from ``data[pos:end]``; every read checks the bytes remain.

    ``channel_id`` only labels the errors (the channel of the packet being read).
    """

    __slots__ = ("data", "pos", "end", "channel_id")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None, channel_id: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.channel_id = channel_id

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return self.end - self.pos

    def error(self, what: str) -> MalformedPacket:
        """A :class:`MalformedPacket` for ``what``, at the current offset."""
        return MalformedPacket(f"{what} (at body offset {self.pos})", self.channel_id)

    def _take(self, size: int, what: str) -> int:
        pos = self.pos
        if size > self.end - pos:
            raise self.error(f"truncated {what}: needs {size} bytes, {self.end - pos} remain")
        self.pos = pos + size
        return pos

    # -- fixed-size fields ---------------------------------------------------

    def read_byte(self) -> int:
        return _BYTE.unpack_from(self.data, self._take(1, "byte"))[0]

    def read_bool(self) -> bool:
        return self.data[self._take(1, "boolean")] != 0

    def read_short(self) -> int:
        return _SHORT.unpack_from(self.data, self._take(2, "short"))[0]

    def read_int(self) -> int:
        return _INT.unpack_from(self.data, self._take(4, "int"))[0]

    def read_long(self) -> int:
        return _LONG.unpack_from(self.data, self._take(8, "long"))[0]

    def read_float(self) -> float:
        return _FLOAT.unpack_from(self.data, self._take(4, "float"))[0]

    def read_double(self) -> float:
        return _DOUBLE.unpack_from(self.data, self._take(8, "double"))[0]

    def read_char(self) -> str:
        return chr(_USHORT.unpack_from(self.data, self._take(2, "char"))[0])

    def read_raw(self, size: int, what: str = "bytes") -> bytes:
        """``size`` bytes as they are."""
        if size < 0:
            raise self.error(f"negative size {size} of {what}")
        pos = self._take(size, what)
        return bytes(self.data[pos:pos + size])

    def read_sized_bytes(self) -> bytes:
        """``int32 size`` + bytes."""
        return self.read_raw(self.read_int(), "sized bytes")

    def read_count(self, least: int, what: str) -> int:
        """An ``int32`` count of items taking at least ``least`` bytes each, checked against what remains."""
        count = self.read_int()
        if count < 0 or count * least > self.end - self.pos:
            raise self.error(f"{what} count {count} does not fit the {self.end - self.pos} bytes that remain")
        return count

    # -- nullable values (BufferHelper: a boolean present-flag) ---------------

    def read_opt_bool(self) -> bool | None:
        return self.read_bool() if self.read_bool() else None

    def read_opt_int(self) -> int | None:
        return self.read_int() if self.read_bool() else None

    def read_opt_long(self) -> int | None:
        return self.read_long() if self.read_bool() else None

    # -- strings ---------------------------------------------------------------

    def read_simple_string(self) -> str:
        size = self.read_int()
        if size < 0 or size & 1:
            raise self.error(f"SimpleString size {size} is negative or odd")
        pos = self._take(size, "SimpleString")
        return _utf16le(self.data[pos:pos + size], "surrogatepass", True)[0]

    def read_nullable_simple_string(self) -> str | None:
        return self.read_simple_string() if self.read_bool() else None

    def read_string(self) -> str:
        count = self.read_int()
        if count < 0:
            raise self.error(f"String length {count} is negative")
        if count < STRING_SHORT_LIMIT:
            pos = self._take(2 * count, "String")
            return self.data[pos:pos + 2 * count].decode("utf-16-be", "surrogatepass")
        if count < STRING_UTF8_LIMIT:
            size = _USHORT.unpack_from(self.data, self._take(2, "String size"))[0]
            pos = self._take(size, "String")
            raw = self.data[pos:pos + size]
            if raw.isascii():
                if size != count:
                    raise self.error(f"String of {size} ASCII bytes announced {count} characters")
                return raw.decode("ascii")
            try:
                units = raw.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as exc:
                raise self.error(f"String bytes are not Artemis UTF-8: {exc.reason}") from None
            if len(units) != count or max(units) > "\uffff":
                raise self.error(f"String of {len(units)} characters announced {count} UTF-16 units "
                                 "or holds a 4-byte sequence")
            return _join_pairs(units)
        text = self.read_simple_string()
        if len(text.encode("utf-16-le", "surrogatepass")) != 2 * count:
            raise self.error(f"String announced {count} UTF-16 units and holds another number")
        return text

    def read_nullable_string(self) -> str | None:
        return self.read_string() if self.read_bool() else None


class Writer:
    """Appends CORE fields to ``buf`` (a bytearray)."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None):
        self.buf = bytearray() if buf is None else buf

    def write_byte(self, value: int) -> None:
        self.buf += _BYTE.pack(value)

    def write_bool(self, value: bool) -> None:
        if value is True:
            self.buf += _TRUE
        elif value is False:
            self.buf += _FALSE
        else:
            raise TypeError(f"a boolean field cannot hold {value!r}")

    def write_short(self, value: int) -> None:
        self.buf += _SHORT.pack(value)

    def write_int(self, value: int) -> None:
        self.buf += _INT.pack(value)

    def write_long(self, value: int) -> None:
        self.buf += _LONG.pack(value)

    def write_float(self, value: float) -> None:
        self.buf += _FLOAT.pack(value)

    def write_double(self, value: float) -> None:
        self.buf += _DOUBLE.pack(value)

    def write_char(self, value: str) -> None:
        self.buf += _USHORT.pack(ord(value))

    def write_raw(self, value: bytes) -> None:
        self.buf += value

    def write_sized_bytes(self, value: bytes) -> None:
        self.buf += _INT.pack(len(value))
        self.buf += value

    def write_opt_bool(self, value: bool | None) -> None:
        if value is None:
            self.buf += _FALSE
        else:
            self.buf += _TRUE
            self.write_bool(value)

    def write_opt_int(self, value: int | None) -> None:
        if value is None:
            self.buf += _FALSE
        else:
            self.buf += _TRUE + _INT.pack(value)

    def write_opt_long(self, value: int | None) -> None:
        if value is None:
            self.buf += _FALSE
        else:
            self.buf += _TRUE + _LONG.pack(value)

    def write_simple_string(self, value: str) -> None:
        data = value.encode("utf-16-le", "surrogatepass")
        self.buf += _INT.pack(len(data))
        self.buf += data

    def write_nullable_simple_string(self, value: str | None) -> None:
        if value is None:
            self.buf.append(0)
        else:
            self.buf.append(1)
            self.write_simple_string(value)

    def write_string(self, value: str) -> None:
        units = string_units(value)
        count = len(units)
        self.buf += _INT.pack(count)
        if count < STRING_SHORT_LIMIT:
            self.buf += units.encode("utf-16-be", "surrogatepass")
        elif count < STRING_UTF8_LIMIT:
            data = units.encode("utf-8", "surrogatepass")
            self.buf += _USHORT.pack(len(data))
            self.buf += data
        else:
            self.write_simple_string(value)

    def write_nullable_string(self, value: str | None) -> None:
        if value is None:
            self.buf.append(0)
        else:
            self.buf.append(1)
            self.write_string(value)
