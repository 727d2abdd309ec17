"""JMS map, stream and object bodies: CORE's byte layout <-> AMQP body values.

A CORE client writes a JMS MapMessage body as ``TypedProperties`` (the layout of
message properties), a StreamMessage body as a run of (type byte, value) entries
(strings nullable, in CORE's String layout) and an ObjectMessage body as
``int32 length`` + the Java-serialized bytes.  Artemis converts these for AMQP
consumers (its CoreAmqpConverter) as an amqp-value map, an amqp-sequence list and a
data section with content-type :data:`SERIALIZED_CONTENT_TYPE`, and back (its
AmqpCoreConverter); this module does the same for the project's broker core, on
bytes only (no Twisted, no sockets).

Values keep their width where both sides have it (byte, short, int, float, char);
AMQP's unsigned widths and timestamps become the next wider signed CORE value
(ubyte -> short, ushort -> int, uint/ulong/timestamp -> long), symbols, UUIDs and
other AMQP types their text.

Limit: :data:`MAX_ENTRIES` entries in one map or stream body (a body announcing more
is not converted: the caller keeps its bytes as they are).
"""

from __future__ import annotations

import uuid
from typing import Any

from junction.protocols.amqp.types import Scalar as AmqpScalar
from junction.protocols.amqp.types import Symbol
from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.errors import CoreProtocolError
from junction.protocols.core.values import PropertyType, Scalar, read_properties, write_properties
from junction.protocols.core.values import _read_value as read_value  # the property value layout
from junction.protocols.core.values import _write_value as write_value

__all__ = [
    "JMS_MSG_TYPE",
    "MAX_ENTRIES",
    "SERIALIZED_CONTENT_TYPE",
    "amqp_value",
    "core_map",
    "core_object",
    "core_stream",
    "map_body",
    "object_body",
    "stream_body",
]

#: The message annotation naming the JMS type, and its values (Artemis's AMQPMessageSupport).
JMS_MSG_TYPE = Symbol("x-opt-jms-msg-type")
JMS_MESSAGE, JMS_OBJECT, JMS_MAP, JMS_BYTES, JMS_STREAM, JMS_TEXT = range(6)
#: Content-type of a data section holding a Java-serialized object.
SERIALIZED_CONTENT_TYPE = "application/x-java-serialized-object"
#: Most entries converted in one map or stream body.
MAX_ENTRIES = 65536

_CORE_WIDTHS = frozenset({"byte", "short", "int", "float", "char"})
_WIDER = {"ubyte": "short", "ushort": "int"}


class NotConvertible(ValueError):
    """A body that is not what its type says (kept as it came by the caller)."""


def _read_stream_value(r: Reader, kind: int) -> Any:
    """A stream entry: laid out as a property value, but for its nullable String."""
    if kind == PropertyType.STRING:
        return r.read_nullable_string()
    return read_value(r, kind)


def core_map(body: bytes) -> dict:
    """The entries of a CORE MapMessage body (CORE values)."""
    try:
        r = Reader(bytes(body))
        pairs = read_properties(r) or ()
    except (ValueError, CoreProtocolError) as exc:
        raise NotConvertible(str(exc)) from exc
    if r.remaining or len(pairs) > MAX_ENTRIES:
        raise NotConvertible("not one map of at most MAX_ENTRIES entries")
    return dict(pairs)


def core_stream(body: bytes) -> list:
    """The entries of a CORE StreamMessage body (CORE values)."""
    r = Reader(bytes(body))
    out: list = []
    try:
        while r.remaining:
            if len(out) >= MAX_ENTRIES:
                raise NotConvertible("more than MAX_ENTRIES stream entries")
            out.append(_read_stream_value(r, r.read_byte()))
    except (ValueError, CoreProtocolError) as exc:
        raise NotConvertible(str(exc)) from exc
    return out


def core_object(body: bytes) -> bytes:
    """The serialized bytes of a CORE ObjectMessage body (``int32 length`` + bytes)."""
    if len(body) < 4:
        raise NotConvertible("object body shorter than its length")
    size = int.from_bytes(body[:4], "big", signed=True)
    if size < 0 or size != len(body) - 4:
        raise NotConvertible("object body length does not match")
    return bytes(body[4:])


def amqp_value(value: Any) -> Any:
    """A CORE value as the AMQP value of the same width."""
    if value.__class__ is Scalar:
        return AmqpScalar(value.kind, value.value)
    return value


def _core_value(value: Any) -> Any:
    """An AMQP value as a CORE map or stream value (see the module doc)."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or cls is float or value is None or cls is bytes or cls is Scalar:
        return value
    if isinstance(value, AmqpScalar):
        kind = value.kind
        if kind in _CORE_WIDTHS:
            return Scalar(kind, value.value)
        if kind in _WIDER:
            return Scalar(_WIDER[kind], value.value)
        if kind in ("uint", "ulong", "timestamp"):
            return int(value.value)
        return str(value.value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (str, uuid.UUID)):
        return str(value)
    if isinstance(value, int):
        return int(value)
    return str(value)


def map_body(entries: dict) -> bytes:
    """The CORE MapMessage body for an AMQP map (keys as text)."""
    if len(entries) > MAX_ENTRIES:
        raise NotConvertible("more than MAX_ENTRIES map entries")
    w = Writer()
    write_properties(w, tuple((str(k), _core_value(v)) for k, v in entries.items()))
    return bytes(w.buf)


def stream_body(values: list) -> bytes:
    """The CORE StreamMessage body for an AMQP list."""
    if len(values) > MAX_ENTRIES:
        raise NotConvertible("more than MAX_ENTRIES stream entries")
    w = Writer()
    for value in values:
        value = _core_value(value)
        if value.__class__ is str:
            w.buf.append(PropertyType.STRING)
            w.write_nullable_string(value)
        else:
            # every other entry is laid out as a property value is
            write_value(w, value)
    return bytes(w.buf)


def object_body(serialized: bytes) -> bytes:
    """The CORE ObjectMessage body for Java-serialized bytes."""
    return len(serialized).to_bytes(4, "big") + bytes(serialized)
