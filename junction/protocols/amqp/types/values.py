"""The values of the AMQP type system, its decode error and its limits.

:class:`Symbol`, :class:`Scalar`, :class:`Described` and :class:`Array` are
what :func:`~junction.protocols.amqp.types.decode` returns and
:func:`~junction.protocols.amqp.types.encode` takes besides plain Python
values (the mapping is in the package doc); :class:`DecodeError` is what
malformed input raises.  The fast constructors at the end build the frozen
dataclasses on the decoders' hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "MAX_DEPTH",
    "MAX_ZERO_WIDTH_ITEMS",
    "SCALAR_KINDS",
    "Array",
    "DecodeError",
    "Described",
    "Scalar",
    "Symbol",
]

MAX_DEPTH = 64
"""Deepest nesting of list, map, array and described values accepted."""

MAX_ZERO_WIDTH_ITEMS = 65536
"""Most elements accepted in an array whose elements occupy no octets."""

SCALAR_KINDS = frozenset(
    (
        "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "float",
        "char", "timestamp", "decimal32", "decimal64", "decimal128",
    )
)
"""The ``Scalar.kind`` names: AMQP types with no plain Python counterpart."""


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



def _new_array(kind, items, descriptor):
    a = _new(Array)
    _set_array_kind(a, kind)
    _set_array_items(a, items)
    _set_array_descriptor(a, descriptor)
    return a


_set_array_kind = Array.__dict__["kind"].__set__
_set_array_items = Array.__dict__["items"].__set__
_set_array_descriptor = Array.__dict__["descriptor"].__set__
