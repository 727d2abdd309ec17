"""CORE messages to the broker's :class:`~junction.model.message.Message`, and back.

A CORE client must get back what it sent: the same properties with the same
types, the same body bytes, the same type byte and JMS message id.  What
the model has a field for goes there; what it has not travels in
``Message.native["core"]`` (stored with the message in the journal), a few
bytes::

    byte version (1) | byte type | byte flags | [16 bytes userID, if flag USER_ID]

Fields (core.md section 4): ``durable``, ``priority``, ``expiration`` and
``timestamp`` are the model's own; the address is the message's (or the
producer's, when the message names none); the client's message id (0) is
replaced by the broker's.  ``_AMQ_ROUTING_TYPE`` (the JMS client's
destination type) stays a property and also sets the model's routing type.

Properties: a CORE typed value becomes the model's value of the same width
(:class:`~junction.model.message.Typed` for byte, short, int, float and char,
plain Python for long, double, boolean, string, bytes and null), and back.
A name the client repeated keeps its last value, as Artemis's map does.

Bodies:

* TEXT (a JMS TextMessage): the body is one nullable SimpleString; the model
  keeps the text as UTF-8 (``BodyType.TEXT``), so other protocols read text,
  and it is written back as the same SimpleString (a null text is flagged).
  A TEXT body that is not exactly one such string is kept as it came.
* BYTES and DEFAULT: the bytes, as they are (``BodyType.BYTES``).
* MAP, STREAM, OBJECT, EMBEDDED: the bytes in CORE's layout, flagged
  (``CORE_BODY``), with the model's body type; an AMQP consumer gets them
  converted as Artemis converts them (:mod:`junction.brokercore.jms_bodies`,
  through :func:`core_type`).

A STOMP consumer gets a JMS client's message as Artemis gives it (:func:`stomp_view`,
:mod:`junction.brokercore.jms_headers`): every body but a BytesMessage's read as one
string, the JMS header properties as STOMP headers.

A message from another protocol (no ``native["core"]``) goes to a CORE
client as TEXT when the model says text, BYTES when it says bytes; an AMQP
map body as a MAP message, an AMQP list or sequence as a STREAM message, a
data section with content-type ``application/x-java-serialized-object`` as
an OBJECT message, one with a textual content-type (UTF-8) as a TEXT message,
an amqp-value null as a TEXT message with a null text, no
body at all as a BYTES message (Artemis's AmqpCoreConverter, see
``_no_body``); a DEFAULT message with the model's body bytes otherwise.  Its correlation id and reply-to become the
``JMSCorrelationID`` and ``JMSReplyTo`` properties.
"""

from __future__ import annotations

import struct
import uuid

from junction.brokercore import jms_bodies, jms_headers
from junction.model.message import BodyType, Message, RoutingType, Typed
from junction.protocols.amqp import message as sections_codec
from junction.protocols.core import MessageHeaders, MessageType, Scalar

__all__ = [
    "NATIVE_KEY", "ROUTING_TYPE_PROPERTY", "core_layout", "core_type", "from_core", "jms_message_id", "jms_native",
    "stomp_view", "text_of", "to_core",
]

#: ``Message.native`` key of what only CORE has.
NATIVE_KEY = "core"
#: The JMS client's destination type property: byte 0 MULTICAST, 1 ANYCAST.
ROUTING_TYPE_PROPERTY = "_AMQ_ROUTING_TYPE"

_NATIVE_VERSION = 1
#: ``Message.native`` key of an AMQP producer's sections (amqp_convert.NATIVE_KEY)
_AMQP_KEY = "amqp"
_USER_ID = 0x01  # a 16-byte userID (the JMS message id) follows
_NULL_TEXT = 0x02  # a TEXT message whose text is null
_CORE_BODY = 0x04  # the body is kept in CORE's layout
_NATIVE = struct.Struct(">BbB")

_TEXT = MessageType.TEXT
_BYTES = MessageType.BYTES
_DEFAULT = MessageType.DEFAULT
_INT_BOUNDS = (-(2**63), 2**63 - 1)

#: CORE type -> the model's body type, for bodies kept as they came.
_BODY_TYPES = {
    MessageType.DEFAULT: BodyType.BYTES,
    MessageType.BYTES: BodyType.BYTES,
    MessageType.MAP: BodyType.MAP,
    MessageType.STREAM: BodyType.STREAM,
    MessageType.OBJECT: BodyType.OBJECT,
}
_ROUTING_TYPES = {0: RoutingType.MULTICAST, 1: RoutingType.ANYCAST}
_TYPED = frozenset({"byte", "short", "int", "float", "char"})


def _text_of(body: bytes) -> str | None | bytes:
    """The text of a TEXT body (None: a null text); the body itself when it is not one
    nullable SimpleString."""
    if body[:1] == b"\x00" and len(body) == 1:
        return None
    if len(body) >= 5 and body[0] == 1:
        size = int.from_bytes(body[1:5], "big", signed=True)
        if size >= 0 and size % 2 == 0 and len(body) == 5 + size:
            return body[5:].decode("utf-16-le", "surrogatepass")
    return body


def _text_body(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode("utf-16-le", "surrogatepass")
    return b"\x01" + len(data).to_bytes(4, "big") + data


def _from_core_value(value):
    if value.__class__ is Scalar:
        return Typed(value.kind, value.value)
    return value


def _to_core_value(value):
    cls = value.__class__
    if cls is str or cls is bool or value is None or cls is bytes or cls is float:
        return value
    if cls is int:
        return value if _INT_BOUNDS[0] <= value <= _INT_BOUNDS[1] else str(value)
    if cls is Typed:
        kind = value.kind
        if kind in _TYPED:
            return Scalar(kind, value.value)
        return _to_core_value(value.value)  # long, double: plain
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return str(value)


def from_core(body: bytes, headers: MessageHeaders, address: str) -> Message:
    """The model's message for a CORE message sent to ``address`` (see the module doc)."""
    properties = {}
    pairs = headers.properties
    if pairs:
        for name, value in pairs:
            properties[name] = value if value.__class__ is not Scalar else Typed(value.kind, value.value)
    kind = headers.type
    flags = 0
    if kind == _TEXT:
        text = _text_of(body)
        if text is None:
            flags |= _NULL_TEXT
            body, body_type = b"", BodyType.TEXT
        elif text.__class__ is str:
            body, body_type = text.encode("utf-8", "surrogatepass"), BodyType.TEXT
        else:
            flags |= _CORE_BODY
            body_type = BodyType.BYTES
    else:
        body_type = _BODY_TYPES.get(kind, BodyType.BYTES)
        if kind != _BYTES and kind != _DEFAULT:
            flags |= _CORE_BODY
    user_id = headers.user_id
    native = _NATIVE.pack(_NATIVE_VERSION, kind, flags | (_USER_ID if user_id is not None else 0))
    if user_id is not None:
        native += user_id
    routing = properties.get(ROUTING_TYPE_PROPERTY)
    return Message(
        address,
        body,
        body_type,
        headers.durable,
        headers.priority,
        headers.expiration,
        headers.timestamp,
        None if routing is None else _ROUTING_TYPES.get(getattr(routing, "value", routing)),
        properties,
        native={NATIVE_KEY: native},
    )


def to_core(message: Message) -> tuple[bytes, MessageHeaders]:
    """The body and headers of the CORE message a consumer is given for ``message``."""
    native = message.native.get(NATIVE_KEY) if message.native else None
    body = message.body
    user_id = None
    properties = message.properties
    if native is not None and len(native) >= _NATIVE.size and native[0] == _NATIVE_VERSION:
        _version, kind, flags = _NATIVE.unpack_from(native)
        if flags & _USER_ID:
            user_id = bytes(native[3:19])
        if kind == _TEXT and not flags & _CORE_BODY:
            body = _text_body(None if flags & _NULL_TEXT else body.decode("utf-8", "surrogatepass"))
    else:
        if message.body_type == BodyType.TEXT:
            kind = _TEXT
            body = _text_body(body.decode("utf-8", "replace"))
        else:
            kind, body = _foreign_body(message)
        # another protocol's: its correlation id and reply-to as a JMS client's properties
        properties = jms_headers.foreign_properties(message, message.native.get(_AMQP_KEY))
    pairs = tuple((name, _to_core_value(value)) for name, value in properties.items()) if properties else None
    headers = MessageHeaders(
        message.message_id,
        message.address,
        user_id,
        kind,
        message.durable,
        message.expiration,
        message.timestamp,
        message.priority,
        pairs,
    )
    return body, headers


def core_layout(kind: MessageType) -> bytes:
    """``native[NATIVE_KEY]`` for a body another protocol wrote in CORE's layout (a JMS map,
    stream or object body converted with :mod:`.jms_bodies`), so CORE and AMQP read it."""
    return _NATIVE.pack(_NATIVE_VERSION, kind, _CORE_BODY)


def jms_native(kind: MessageType, user_id: bytes, *, null_text: bool = False) -> bytes:
    """``native[NATIVE_KEY]`` for a JMS message another JMS protocol (OpenWire) sent, as
    Artemis makes a CORE message of it: its CORE ``kind``, the 16-byte ``user_id`` (a CORE
    consumer's JMSMessageID, an AMQP consumer's message-id), a map, stream or object body in
    CORE's layout (the caller converted it), a text kept as UTF-8 (``null_text``: null)."""
    flags = _USER_ID | (_CORE_BODY if kind in _CORE_LAYOUTS else 0) | (_NULL_TEXT if null_text else 0)
    return _NATIVE.pack(_NATIVE_VERSION, kind, flags) + user_id


#: CORE types whose bodies the model keeps in CORE's layout
_CORE_LAYOUTS = frozenset({MessageType.MAP, MessageType.STREAM, MessageType.OBJECT})


def text_of(body: bytes) -> str | None | bytes:
    """The text of a CORE TEXT body (None: a null text); the body itself when it is not one
    nullable SimpleString."""
    return _text_of(body)


def core_type(message: Message) -> MessageType | None:
    """The CORE type a CORE client gave ``message``, None for a message from another protocol."""
    native = message.native.get(NATIVE_KEY) if message.native else None
    if native is None or len(native) < _NATIVE.size or native[0] != _NATIVE_VERSION:
        return None
    return MessageType(native[1]) if native[1] in MessageType._value2member_map_ else None


def stomp_view(message: Message) -> Message:
    """``message`` as a STOMP consumer gets it: a JMS client's converted as Artemis does
    (:func:`junction.brokercore.jms_headers.for_stomp`), any other as it is."""
    native = message.native.get(NATIVE_KEY) if message.native else None
    if native is None or len(native) < _NATIVE.size or native[0] != _NATIVE_VERSION:
        return message
    _version, kind, flags = _NATIVE.unpack_from(native)
    raw = kind != _BYTES and (kind != _TEXT or flags & _CORE_BODY)
    return jms_headers.for_stomp(message, message.body if raw else None)


def jms_message_id(message: Message) -> str | None:
    """A JMS client's message id (``ID:`` and its userID as a UUID), None for another's."""
    native = message.native.get(NATIVE_KEY) if message.native else None
    if native is None or len(native) < _NATIVE.size + 16 or native[0] != _NATIVE_VERSION or not native[2] & _USER_ID:
        return None
    return f"ID:{uuid.UUID(bytes=bytes(native[3:19]))}"


_AMQP_SECTIONS = b"\x00"  # an AMQP body kept as its encoded sections starts with a described type


def _foreign_body(message: Message) -> tuple[MessageType, bytes]:
    """The CORE type and body of a message another protocol sent (see the module doc)."""
    body_type, body = message.body_type, message.body
    if body_type == BodyType.BYTES:
        content_type = _content_type(message)
        if content_type == jms_bodies.SERIALIZED_CONTENT_TYPE:
            return MessageType.OBJECT, jms_bodies.object_body(body)
        if _AMQP_KEY in message.native and jms_headers.textual_charset(content_type) == "UTF-8":
            # an AMQP data section of UTF-8 text (a STOMP frame's content-type does not count)
            try:
                return _TEXT, _text_body(bytes(body).decode("utf-8"))
            except UnicodeDecodeError:
                pass
        return _BYTES, body
    if body_type == BodyType.NONE and not body:
        return _no_body(message)
    if body_type in (BodyType.MAP, BodyType.STREAM) and body[:1] == _AMQP_SECTIONS:
        try:
            return _amqp_jms_body(body_type, body)
        except ValueError:
            pass  # not a map or list after all: the bytes as they are
    return _DEFAULT, body


def _no_body(message: Message) -> tuple[MessageType, bytes]:
    """The CORE type of an AMQP message without a body (Artemis's AmqpCoreConverter): an
    amqp-value null is a TextMessage with a null text; no body section a BytesMessage, an
    ObjectMessage with the serialized content-type, a TextMessage (null) with a textual
    one, a Message with any other."""
    sections = message.native.get(_AMQP_KEY) if message.native else None
    if sections is not None:
        try:
            if sections_codec.decode_message(bytes(sections)).body:
                return _TEXT, _text_body(None)  # an amqp-value null
        except ValueError:
            pass
    content_type = _content_type(message)
    if content_type is None or content_type == "application/octet-stream":
        return _BYTES, b""
    if content_type == jms_bodies.SERIALIZED_CONTENT_TYPE:
        return MessageType.OBJECT, b""
    if jms_headers.textual_charset(content_type) is not None:
        return _TEXT, _text_body(None)
    return _DEFAULT, b""


def _content_type(message: Message) -> str | None:
    value = message.properties.get("content-type") if message.properties else None
    return None if value is None else str(getattr(value, "value", value))


def _amqp_jms_body(body_type: BodyType, body: bytes) -> tuple[MessageType, bytes]:
    sections = sections_codec.decode_message(bytes(body)).body or []
    if body_type == BodyType.MAP:
        (_kind, value), = sections
        if not isinstance(value, dict):
            raise ValueError("not a map")
        return MessageType.MAP, jms_bodies.map_body(value)
    values: list = []
    for _kind, value in sections:
        if not isinstance(value, list):
            raise ValueError("not a list")
        values.extend(value)
    return MessageType.STREAM, jms_bodies.stream_body(values)
