"""OpenWire's map, stream and object bodies <-> CORE's layout, which the node's model keeps.

Artemis's OpenWireMessageConverter stores an OpenWire MapMessage body as CORE's
``TypedProperties``, a StreamMessage body as CORE's stream entries and an
ObjectMessage body as ``int32 length`` + the serialized bytes, so CORE, AMQP and
STOMP consumers read them; this module does the same, on bytes only, with
:mod:`.jms_bodies` for CORE's side.  Values keep their Java width (OpenWire's
``Int``/``Short``/``Byte``/``Float``/``Char`` <-> CORE's typed values).

Limit: :data:`~junction.brokercore.jms_bodies.MAX_ENTRIES` values in one body
(a longer one is not converted: :class:`~junction.brokercore.jms_bodies.NotConvertible`).
"""

from __future__ import annotations

from junction.brokercore import jms_bodies
from junction.brokercore.core_convert import core_layout, core_type
from junction.model.message import BodyType, Message, Typed
from junction.protocols.core.message import MessageType
from junction.protocols.core.values import Scalar
from junction.protocols.openwire.errors import MalformedCommand
from junction.protocols.openwire.primitives import (
    Byte,
    Char,
    Double,
    Float,
    Int,
    Long,
    Short,
    decode_primitive_map,
    decode_primitive_stream,
    encode_primitive_map,
    encode_primitive_stream,
)

__all__ = ["from_openwire_body", "model_value", "openwire_content", "to_openwire_body", "wire_value"]

_TYPED = {Int: "int", Short: "short", Byte: "byte", Float: "float", Char: "char"}
_WIDTH = {"int": Int, "short": Short, "byte": Byte, "float": Float, "char": Char, "long": Long, "double": Double}
#: the model's body type -> CORE's message type, for the bodies kept in CORE's layout
_CORE_TYPES = {BodyType.MAP: MessageType.MAP, BodyType.STREAM: MessageType.STREAM,
               BodyType.OBJECT: MessageType.OBJECT}


def model_value(value):
    """An OpenWire primitive as the model keeps it (:class:`Typed` for the narrow widths)."""
    kind = _TYPED.get(type(value))
    if kind is not None:
        return Typed(kind, str(value) if kind == "char" else (float(value) if kind == "float" else int(value)))
    if isinstance(value, dict):
        return {k: model_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [model_value(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def _core_value(value):
    """An OpenWire primitive as CORE's map or stream value (:class:`Scalar` for the narrow widths)."""
    kind = _TYPED.get(type(value))
    if kind is not None:
        return Scalar(kind, str(value) if kind == "char" else (float(value) if kind == "float" else int(value)))
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)  # a nested map or list: CORE's bodies have none


def wire_value(value):
    """A model (or CORE) value as the OpenWire primitive of its width."""
    if isinstance(value, (Typed, Scalar)):
        cls = _WIDTH.get(value.kind)
        return cls(value.value) if cls is not None else value.value
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, int):
        return Long(value)
    if isinstance(value, float):
        return Double(value)
    return str(value)


def from_openwire_body(body_type: BodyType, content: bytes) -> tuple[bytes, bytes]:
    """A map, stream or object body in CORE's layout, and the model's ``native`` marker for it."""
    try:
        if body_type is BodyType.MAP:
            entries = (decode_primitive_map(content, jms_bodies.MAX_ENTRIES) or {}) if content else {}
            body = jms_bodies.map_body({k: _core_value(v) for k, v in entries.items()})
        elif body_type is BodyType.STREAM:
            values = decode_primitive_stream(content, jms_bodies.MAX_ENTRIES) if content else []
            body = jms_bodies.stream_body([_core_value(v) for v in values])
        else:
            body = jms_bodies.object_body(content)
    except MalformedCommand as exc:
        raise ValueError(f"a {body_type.name.lower()} body does not read: {exc}") from None
    return body, core_layout(_CORE_TYPES[body_type])


def to_openwire_body(message: Message) -> bytes | None:
    """The OpenWire content of a map, stream or object body kept in CORE's layout (None: not one)."""
    kind = core_type(message)
    if kind is None or _CORE_TYPES.get(message.body_type) != kind:
        return None
    return openwire_content(kind, message.body)


def openwire_content(kind: int, body: bytes) -> bytes | None:
    """The OpenWire content of a CORE map, stream or object body (None: another type, or a
    body that does not read as its type)."""
    try:
        if kind == MessageType.MAP:
            return encode_primitive_map({k: wire_value(v) for k, v in jms_bodies.core_map(body).items()})
        if kind == MessageType.STREAM:
            return encode_primitive_stream([wire_value(v) for v in jms_bodies.core_stream(body)])
        if kind == MessageType.OBJECT:
            return jms_bodies.core_object(body)
    except jms_bodies.NotConvertible:
        return None
    return None
