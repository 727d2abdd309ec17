"""OpenWire's primitive encodings: loose and tight, Java's modified UTF-8, the BooleanStream.

Everything is big-endian Java ``DataOutput`` (openwire.md section 4).  A
:class:`Decoder` reads one frame's body and a :class:`Encoder` writes one, in
either encoding:

* **loose** -- every field in its own bytes: a boolean is one byte, a long
  eight, a string or an object a presence byte and then its bytes;
* **tight** -- the frame starts with a BooleanStream holding every boolean of
  the whole command (the fields' own, and the presence, ASCII and long-size
  bits), then the body bytes; both in field order, nested objects included.
  A long takes 0, 2, 4 or 8 bytes as its two bits say (2 and 4 read back
  unsigned), an ASCII string a ``u16`` length and its raw bytes.

The encoder keeps the bits and the bytes apart and joins them at the end,
which is what Java's two marshalling passes produce.  Strings are Java
``writeUTF``: modified UTF-8 (NUL as ``C0 80``, a character beyond the BMP
as two three-byte surrogates), at most 65,535 bytes.

Every read is bounded by the frame: a length is checked against the bytes
left before anything is allocated, so decoding never holds more than the
frame it reads.  A short read, a negative length, a bad string are
:class:`~.errors.MalformedCommand`.
"""

from __future__ import annotations

import re
import struct

from junction.protocols.errors import LocalProtocolError
from junction.protocols.openwire.errors import MalformedCommand

__all__ = [
    "Decoder",
    "Encoder",
    "decode_mutf8",
    "encode_mutf8",
    "marshal_boolean_stream",
]

_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")
_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")
_LONG = struct.Struct(">q")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")

#: Most bytes ``writeUTF`` writes for one string (its length is a u16).
MAX_UTF_BYTES = 0xFFFF
#: Most bytes of a tight-encoded string (``tightMarshalString1`` refuses ``Short.MAX_VALUE``).
MAX_TIGHT_UTF_BYTES = 0x7FFE
#: Most bytes a BooleanStream holds (its length is a Java short).
MAX_BOOLEAN_STREAM_BYTES = 0x7FFF

#: each byte's eight bits, least significant first, one byte (0 or 1) each: a BooleanStream is
#: spread out once per frame, so that reading a bit is one index
_BITS = tuple(bytes((b >> i) & 1 for i in range(8)) for b in range(256))

_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def _surrogates(match: re.Match) -> str:
    cp = ord(match.group()) - 0x10000
    return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))


def encode_mutf8(text: str) -> bytes:
    """Java's modified UTF-8 of ``text`` (the bytes ``writeUTF`` writes after its length)."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    if not text.isascii():
        text = _ASTRAL.sub(_surrogates, text)
    return text.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def decode_mutf8(data: bytes) -> str:
    """The string Java's ``readUTF`` reads from ``data`` (raises UnicodeDecodeError as Java does).

    Pairs of surrogates become the character they encode; a lone surrogate
    stays (a Java string may hold one).  Four-byte UTF-8 sequences are refused,
    as ``readUTF`` refuses them.
    """
    if data.isascii():
        return data.decode("ascii")
    text = bytes(data).replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    if max(text) > "\uffff":
        raise UnicodeDecodeError("modified-utf-8", bytes(data), 0, len(data), "a four-byte sequence")
    if "\ud800" <= max(text):
        # Join surrogate pairs (Java keeps them as two chars; Python as one character).
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def marshal_boolean_stream(bits: bytearray, count: int) -> bytes:
    """The BooleanStream of ``count`` bits packed in ``bits`` (its length prefix, then the bytes)."""
    n = len(bits)
    if n < 64:
        return bytes((n,)) + bits
    if n < 256:
        return bytes((0xC0, n)) + bits
    if n > MAX_BOOLEAN_STREAM_BYTES:
        raise LocalProtocolError(f"a command of {count} booleans exceeds the BooleanStream's {MAX_BOOLEAN_STREAM_BYTES} bytes")
    return b"\x80" + _SHORT.pack(n) + bits


class Decoder:
    """Reads one frame's body, ``data[pos:end]``, in the loose or the tight encoding.

    ``tight`` decoders read the BooleanStream first (:meth:`start_tight`).
    ``context`` is the codec's per-connection state the structure readers
    need (the negotiated options, the unmarshalling cache, the limits).
    """

    __slots__ = ("data", "pos", "end", "tight", "bits", "bit_pos", "bit_end", "context", "depth")

    def __init__(self, data, pos: int, end: int, tight: bool, context) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.tight = tight
        self.bits = b""
        self.bit_pos = 0
        self.bit_end = 0
        self.context = context
        self.depth = 0

    # -- raw bytes -------------------------------------------------------------------------------

    def take(self, n: int) -> int:
        """Advance over ``n`` bytes; return where they start."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise MalformedCommand(f"the frame ends {pos + n - self.end} bytes before the field it holds")
        self.pos = pos + n
        return pos

    def raw(self, n: int) -> bytes:
        pos = self.take(n)
        return bytes(self.data[pos:pos + n])

    def byte(self) -> int:
        pos = self.take(1)
        b = self.data[pos]
        return b - 256 if b > 127 else b

    def ubyte(self) -> int:
        return self.data[self.take(1)]

    def short(self) -> int:
        return _SHORT.unpack_from(self.data, self.take(2))[0]

    def ushort(self) -> int:
        return _USHORT.unpack_from(self.data, self.take(2))[0]

    def int(self) -> int:
        return _INT.unpack_from(self.data, self.take(4))[0]

    def uint(self) -> int:
        return _UINT.unpack_from(self.data, self.take(4))[0]

    def long(self) -> int:
        return _LONG.unpack_from(self.data, self.take(8))[0]

    def float(self) -> float:
        return _FLOAT.unpack_from(self.data, self.take(4))[0]

    def double(self) -> float:
        return _DOUBLE.unpack_from(self.data, self.take(8))[0]

    def raw_bool(self) -> bool:
        """A boolean byte (``DataInput.readBoolean``: any non-zero byte is true)."""
        return self.data[self.take(1)] != 0

    def utf(self) -> str:
        """``readUTF``: a u16 length and modified UTF-8."""
        n = self.ushort()
        pos = self.take(n)
        try:
            return decode_mutf8(self.data[pos:pos + n])
        except UnicodeDecodeError as exc:
            raise MalformedCommand(f"a string is not valid modified UTF-8: {exc.reason}") from None

    def sized_bytes(self) -> bytes:
        """An int32 length and that many bytes."""
        n = self.int()
        if n < 0:
            raise MalformedCommand(f"a byte array has the negative length {n}")
        return self.raw(n)

    # -- the BooleanStream -------------------------------------------------------------------------

    def start_tight(self) -> None:
        """Read the BooleanStream that opens a tight body (``BooleanStream.unmarshal``)."""
        n = self.ubyte()
        if n == 0xC0:
            n = self.ubyte()
        elif n == 0x80:
            n = self.short()
            if n < 0:
                raise MalformedCommand(f"a BooleanStream has the negative length {n}")
        pos = self.take(n)
        self.bits = b"".join([_BITS[b] for b in self.data[pos:pos + n]])
        self.bit_pos = 0
        self.bit_end = 8 * n

    def bit(self) -> bool:
        i = self.bit_pos
        if i >= self.bit_end:
            raise MalformedCommand("the BooleanStream ends before the fields that need its bits")
        self.bit_pos = i + 1
        return self.bits[i] == 1

    # -- the field encodings -------------------------------------------------------------------------

    def boolean(self) -> bool:
        """A boolean field: one bit (tight) or one byte (loose); also every presence flag."""
        return self.bit() if self.tight else self.raw_bool()

    def varlong(self) -> int:
        """A long field: two bits and 0/2/4/8 bytes (tight), eight bytes (loose)."""
        if not self.tight:
            return self.long()
        if self.bit():
            return self.long() if self.bit() else self.uint()
        return self.ushort() if self.bit() else 0

    def string(self) -> str | None:
        """A nullable string field."""
        return self.tight_string() if self.tight else self.loose_string()

    def loose_string(self) -> str | None:
        return self.utf() if self.raw_bool() else None

    def tight_string(self) -> str | None:
        if not self.bit():
            return None
        if self.bit():
            n = self.short()
            if n < 0:
                raise MalformedCommand(f"an ASCII string has the negative length {n}")
            pos = self.take(n)
            return self.data[pos:pos + n].decode("latin-1")
        return self.utf()

    def byte_array(self) -> bytes | None:
        """A nullable byte array or ByteSequence field."""
        if not self.boolean():
            return None
        return self.sized_bytes()


class Encoder:
    """Writes one body in the loose or the tight encoding; :meth:`frame` joins it up."""

    __slots__ = ("buf", "tight", "bits", "nbits", "context")

    def __init__(self, tight: bool, context) -> None:
        self.buf = bytearray()
        self.tight = tight
        self.bits = bytearray()
        self.nbits = 0
        self.context = context

    def bit(self, value: bool) -> None:
        i = self.nbits
        if i & 7 == 0:
            self.bits.append(0)
        if value:
            self.bits[i >> 3] |= 1 << (i & 7)
        self.nbits = i + 1

    def boolean(self, value: bool) -> None:
        if self.tight:
            self.bit(bool(value))
        else:
            self.buf.append(1 if value else 0)

    def byte(self, value: int) -> None:
        self.buf += struct.pack(">b", value)

    def short(self, value: int) -> None:
        self.buf += _SHORT.pack(value)

    def int(self, value: int) -> None:
        self.buf += _INT.pack(value)

    def long(self, value: int) -> None:
        self.buf += _LONG.pack(value)

    def varlong(self, value: int) -> None:
        if not self.tight:
            self.buf += _LONG.pack(value)
            return
        if value == 0:
            self.bit(False)
            self.bit(False)
        elif value & ~0xFFFF == 0:
            self.bit(False)
            self.bit(True)
            self.buf += _USHORT.pack(value)
        elif value & ~0xFFFFFFFF == 0:
            self.bit(True)
            self.bit(False)
            self.buf += _UINT.pack(value)
        else:
            self.bit(True)
            self.bit(True)
            self.buf += _LONG.pack(value)

    def utf(self, value: str) -> None:
        data = encode_mutf8(value)
        if len(data) > MAX_UTF_BYTES:
            raise LocalProtocolError(f"a string of {len(data)} bytes exceeds writeUTF's {MAX_UTF_BYTES}")
        self.buf += _USHORT.pack(len(data))
        self.buf += data

    def string(self, value: str | None) -> None:
        self.boolean(value is not None)
        if value is None:
            return
        if not isinstance(value, str):
            raise TypeError(f"a string field holds {type(value).__name__}")
        if self.tight:
            ascii_only = value.isascii() and "\x00" not in value
            data = value.encode("ascii") if ascii_only else encode_mutf8(value)
            if len(data) > MAX_TIGHT_UTF_BYTES:
                raise LocalProtocolError(f"a string of {len(data)} bytes exceeds the tight encoding's {MAX_TIGHT_UTF_BYTES}")
            self.bit(ascii_only)
            self.buf += _USHORT.pack(len(data))
            self.buf += data
        else:
            self.utf(value)

    def byte_array(self, value: bytes | None) -> None:
        self.boolean(value is not None)
        if value is not None:
            self.buf += _INT.pack(len(value))
            self.buf += value

    def body(self) -> bytes:
        """The body as it goes on the wire: the BooleanStream (tight) and the bytes."""
        if self.tight:
            return marshal_boolean_stream(self.bits, self.nbits) + self.buf
        return bytes(self.buf)
