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
message.

Modules: :mod:`.values` (the value classes, :class:`DecodeError`, the
limits), :mod:`.codes` (the format code table), :mod:`.atoms` (decoders of
the values that hold no other value), :mod:`.decoder` (compound values, the
dispatch tables, :func:`decode`), :mod:`.encoder` (:func:`encode`).  This
package's names below are the public face; the internals the message codec
(:mod:`junction.protocols.amqp.message`) uses (``_PLAIN``, ``_e_str``...) are
imported from their modules and are not public API.
"""

from __future__ import annotations

from junction.protocols.amqp.types.atoms import SYMBOL_CACHE_SIZE
from junction.protocols.amqp.types.decoder import decode
from junction.protocols.amqp.types.encoder import encode, encode_into
from junction.protocols.amqp.types.values import (
    MAX_DEPTH,
    MAX_ZERO_WIDTH_ITEMS,
    SCALAR_KINDS,
    Array,
    DecodeError,
    Described,
    Scalar,
    Symbol,
)

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
