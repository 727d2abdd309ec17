"""OpenWire messages to and from the broker's message model, as Artemis's converter maps them.

In (:func:`to_model`): the JMS headers are the model's own (persistent ->
``durable``, priority, expiration, timestamp, correlation id, user id); the
destination gives the address and the routing type (a queue ANYCAST, a topic
MULTICAST); ``group_id``/``group_sequence`` become ``_AMQ_GROUP_ID`` and
``_AMQ_GROUP_SEQUENCE`` (``JMSXGroupSeq`` is read back too), the JMS type
``JMSType``, the routing type ``_AMQ_ROUTING_TYPE`` (as the JMS client writes it); the client's MessageId is kept (``native``) so an OpenWire
consumer sees the id the producer saw.  Properties keep their Java width: an
OpenWire ``Int``/``Short``/``Byte``/``Float``/``Char`` becomes
:class:`~junction.model.message.Typed`, a ``Long``/``Double`` the plain
number, as CORE's conversion does.

As Artemis makes a CORE message of it, the message is also what a CORE client
would have sent (so CORE, AMQP and STOMP consumers read it as Artemis's do):
``native["core"]`` names its CORE type (TEXT, BYTES, MAP, STREAM, OBJECT, or
DEFAULT for a plain Message) and a fresh UUID as its JMS id (a CORE consumer's
JMSMessageID, an AMQP consumer's ``ID:<uuid>``), and the correlation id and
reply-to are also the ``JMSCorrelationID`` and ``JMSReplyTo`` properties
(``queue://``, ``topic://``, ``temp-queue://``, ``temp-topic://`` + name).

Bodies (compressed ones inflated): a TextMessage's text is kept as UTF-8
(``BodyType.TEXT``); a BytesMessage's bytes as they are (``BodyType.BYTES``); a
message without a body is ``BodyType.NONE``; a map, stream or object body is
converted to CORE's layout (:mod:`.openwire_bodies`), as CORE's clients write
them, so every protocol reads it.

Out (:func:`to_openwire`): a message an OpenWire producer sent gets its own
fields back; any other is converted from its CORE form
(:func:`~junction.brokercore.core_convert.to_core`, the JMS type and body a
CORE consumer would read), its ``JMSCorrelationID``, ``JMSReplyTo``,
``JMSType`` and group properties becoming the message's fields, the broker's
own properties (``_AMQ...``, ``__HDR_...``) left out and no user id given
(Artemis gives one only from an OpenWire producer).  A message not produced
over OpenWire gets Artemis's MessageId (``ID:<node>:-1:-1:<id / 2^31-1>`` with
sequence ``id % 2^31-1``), so every dispatched message has a unique id.
"""

from __future__ import annotations

import itertools
import os
import struct
import zlib

from junction.brokercore.core_convert import NATIVE_KEY as CORE_NATIVE_KEY
from junction.brokercore.core_convert import ROUTING_TYPE_PROPERTY, core_type, jms_native
from junction.brokercore.core_convert import text_of as core_text_of
from junction.brokercore.core_convert import to_core as core_to_core
from junction.brokercore.jms_headers import CORRELATION_ID, REPLY_TO
from junction.brokercore.openwire_bodies import (
    from_openwire_body,
    model_value,
    openwire_content,
    to_openwire_body,
    wire_value,
)
from junction.model.message import BodyType, Message, RoutingType, Typed, plain
from junction.protocols.core.message import MessageType
from junction.protocols.core.values import Scalar
from junction.protocols.openwire.codec import decode_frame, encode_frame
from junction.protocols.openwire.messages import (
    MAX_INFLATED_SIZE,
    ActiveMQBytesMessage,
    ActiveMQMapMessage,
    ActiveMQMessage,
    ActiveMQObjectMessage,
    ActiveMQStreamMessage,
    ActiveMQTextMessage,
    message_properties,
    properties_content,
    text_content,
    text_of,
)
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ActiveMQTempQueue,
    ActiveMQTempTopic,
    ActiveMQTopic,
    Destination,
    MessageId,
    ProducerId,
)

__all__ = ["GROUP_SEQUENCE_ARTEMIS", "destination_of", "message_id_of", "to_model", "to_openwire"]

#: Artemis's core group sequence property (OpenWire's ``groupSequence``).
GROUP_SEQUENCE_ARTEMIS = "_AMQ_GROUP_SEQUENCE"
_GROUP_ID = "_AMQ_GROUP_ID"
#: ``native`` keys: the producer's MessageId and its JMSReplyTo (loose-marshalled; the
#: model keeps the reply-to's name only, the destination says queue, topic or temporary)
NATIVE_ID = "openwire-id"
NATIVE_REPLY_TO = "openwire-reply-to"
#: ``native`` key present when the producer set the message's user id (JMSXUserID): the
#: broker stamps the validated user on every message, which Artemis gives an OpenWire
#: consumer only when the producer had set one
NATIVE_USER_ID = "openwire-user-id"
#: Bound of :data:`_KEPT_IDS`: the MessageIds of the most recent sends kept decoded. A
#: dispatch usually follows its send closely; an older message decodes its stored id again.
KEPT_IDS_LIMIT = 4096
#: stored MessageId bytes -> the MessageId they encode (filled by :func:`to_model`, read by
#: :func:`message_id_of`): a value-keyed memo, so a hit is always the decode's answer
_KEPT_IDS: dict = {}
#: Java's ``Integer.MAX_VALUE``: how Artemis splits a core id into a MessageId.
_INT_MAX = 0x7FFFFFFF
_BODY_CLASSES = {
    ActiveMQMapMessage.TYPE: (ActiveMQMapMessage, BodyType.MAP),
    ActiveMQStreamMessage.TYPE: (ActiveMQStreamMessage, BodyType.STREAM),
    ActiveMQObjectMessage.TYPE: (ActiveMQObjectMessage, BodyType.OBJECT),
}
_CLASS_OF = {body_type: cls for cls, body_type in _BODY_CLASSES.values()}
#: ``_AMQ_ROUTING_TYPE`` of a topic's and a queue's message (the JMS client's bytes)
_MULTICAST, _ANYCAST = Typed("byte", 0), Typed("byte", 1)
#: OpenWire's message type -> the CORE type Artemis gives it
_CORE_TYPES = {
    ActiveMQTextMessage.TYPE: MessageType.TEXT, ActiveMQBytesMessage.TYPE: MessageType.BYTES,
    ActiveMQMapMessage.TYPE: MessageType.MAP, ActiveMQStreamMessage.TYPE: MessageType.STREAM,
    ActiveMQObjectMessage.TYPE: MessageType.OBJECT, ActiveMQMessage.TYPE: MessageType.DEFAULT,
}  # fmt: skip


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, MAX_INFLATED_SIZE)
    if inflater.unconsumed_tail:
        raise ValueError(f"a compressed body inflates beyond {MAX_INFLATED_SIZE} bytes")
    return out


def address_of(destination) -> tuple[str, RoutingType]:
    """The address and routing type an OpenWire destination names (queue ANYCAST, topic MULTICAST)."""
    return destination.physical_name or "", RoutingType.MULTICAST if destination.is_topic else RoutingType.ANYCAST


def to_model(message, default_destination=None) -> Message:
    """The model's message for an OpenWire message (raises ValueError for a body that does not read)."""
    destination = message.destination or default_destination
    address, routing = address_of(destination)
    properties = {k: model_value(v) for k, v in message_properties(message).items()}
    native: dict = {}
    if message.message_id is not None:
        native[NATIVE_ID] = kept = encode_frame(message.message_id)
        if len(_KEPT_IDS) >= KEPT_IDS_LIMIT:
            del _KEPT_IDS[next(iter(_KEPT_IDS))]  # the oldest (insertion order)
        _KEPT_IDS[kept] = message.message_id
    if message.reply_to is not None:
        native[NATIVE_REPLY_TO] = encode_frame(message.reply_to)
    if message.user_id is not None:
        native[NATIVE_USER_ID] = b""
    kind = message.TYPE
    null_text = False
    if kind == ActiveMQTextMessage.TYPE:
        text = text_of(message)
        null_text = text is None
        body, body_type = (b"" if null_text else text.encode("utf-8")), BodyType.TEXT
    elif kind == ActiveMQBytesMessage.TYPE:
        body = message.content or b""
        if message.compressed and body:
            body = _inflate(body)
        body_type = BodyType.BYTES
    elif kind in _BODY_CLASSES:
        body = message.content or b""
        if message.compressed and body:
            body = _inflate(body)
        body_type = _BODY_CLASSES[kind][1]
        body, _layout = from_openwire_body(body_type, body)
    else:
        body, body_type = b"", BodyType.NONE
    # a CORE message of its JMS type, with a JMS id of its own (Artemis: a fresh UUID)
    native[CORE_NATIVE_KEY] = jms_native(_CORE_TYPES.get(kind, MessageType.DEFAULT), _jms_id(), null_text=null_text)
    if message.group_id is not None:
        properties[_GROUP_ID] = message.group_id
        properties[GROUP_SEQUENCE_ARTEMIS] = Typed("int", message.group_sequence)
    if message.type is not None:
        properties["JMSType"] = message.type
    # the destination's type, as the JMS client (CORE) writes it: STOMP's destination-type
    properties[ROUTING_TYPE_PROPERTY] = _MULTICAST if routing is RoutingType.MULTICAST else _ANYCAST
    # the JMS header fields a CORE consumer reads as properties (Artemis's converter)
    if message.correlation_id is not None:
        properties[CORRELATION_ID] = message.correlation_id
    if message.reply_to is not None:
        properties[REPLY_TO] = qualified_name(message.reply_to)
    reply_to = message.reply_to.physical_name if message.reply_to is not None else None
    return Message(
        address,
        body,
        body_type,
        bool(message.persistent),
        max(0, min(9, message.priority)),
        max(0, message.expiration),
        message.timestamp,
        routing,
        properties,
        message.user_id,
        message.correlation_id,
        reply_to,
        native=native,
    )


#: a JMS id is this process's random first half (a version-4 UUID's bits) and a count:
#: unique without a system call per message (uuid4 makes one)
_ID_PREFIX = bytes([*os.urandom(6), 0x40 | os.urandom(1)[0] & 0x0F, os.urandom(1)[0]])
_id_count = itertools.count(1)
_ID_SECOND_HALF = struct.Struct(">Q")


def _jms_id() -> bytes:
    """A fresh 16-byte JMS id (a UUID's bytes), as Artemis gives a message sent over OpenWire."""
    return _ID_PREFIX + _ID_SECOND_HALF.pack(0x8000000000000000 | next(_id_count))


def message_id_of(message: Message, node_id: str) -> MessageId:
    """The MessageId an OpenWire consumer sees: the producer's, else Artemis's made from the core id."""
    kept = message.native.get(NATIVE_ID)
    if kept is not None:
        found = _KEPT_IDS.get(kept)
        if found is None:
            try:
                found = decode_frame(kept)
            except Exception:  # noqa: BLE001 - a bad stored id falls back to the broker's
                found = None
        if isinstance(found, MessageId):
            return MessageId(found.text_view, found.producer_id, found.producer_sequence_id, message.message_id)
    high, low = divmod(message.message_id, _INT_MAX)
    connection = f"ID:{node_id}:-1"
    producer = ProducerId(connection, high, -1)
    return MessageId(f"{connection}:-1:{high}:{low}", producer, low, message.message_id)


def destination_of(message: Message, queue_routing: RoutingType | None = None):
    """The destination an OpenWire consumer sees for ``message``."""
    routing = message.routing_type if message.routing_type is not None else queue_routing
    cls = ActiveMQTopic if routing is RoutingType.MULTICAST else ActiveMQQueue
    return cls(message.address)


def _reply_to(message: Message):
    name = message.reply_to
    if not name:
        return None
    kept = message.native.get(NATIVE_REPLY_TO)
    if kept is not None:
        try:
            found = decode_frame(kept)
        except Exception:  # noqa: BLE001 - a bad stored destination falls back to a queue
            found = None
        if isinstance(found, Destination) and found.physical_name == name:
            return found
    return ActiveMQQueue(name)


def qualified_name(destination) -> str:
    """A JMS client's ``JMSReplyTo`` text for an OpenWire destination (``queue://name``,
    ``topic://``, ``temp-queue://``, ``temp-topic://``), as Artemis's converter writes it."""
    return _QUALIFIERS.get(destination.TYPE, "queue://") + (destination.physical_name or "")


def destination_named(text: str):
    """The OpenWire destination of a ``JMSReplyTo`` text (a bare name is a queue)."""
    for prefix, cls in _QUALIFIED:
        if text.startswith(prefix):
            return cls(text[len(prefix):])
    return ActiveMQQueue(text)


_QUALIFIED = (
    ("queue://", ActiveMQQueue), ("topic://", ActiveMQTopic),
    ("temp-queue://", ActiveMQTempQueue), ("temp-topic://", ActiveMQTempTopic),
)  # fmt: skip
_QUALIFIERS = {cls.TYPE: prefix for prefix, cls in _QUALIFIED}


def _skipped(key: str) -> bool:
    """Properties an OpenWire consumer is not given (Artemis's converter): the broker's own
    (``_AMQ...``, ``__HDR_...``) and the JMS header fields kept as properties."""
    return key.startswith(("_AMQ", "__HDR_")) or key in _HEADER_PROPERTIES


_HEADER_PROPERTIES = frozenset({REPLY_TO, CORRELATION_ID, "JMSType"})


def to_openwire(message: Message, *, node_id: str, destination=None, consumer_id=None,
                redelivery_counter: int = 0):
    """The OpenWire message for the model's ``message``: one an OpenWire producer sent with its
    own fields, any other as Artemis converts its CORE form (:func:`_from_core`)."""
    if NATIVE_ID not in message.native:
        return _from_core(message, node_id, destination, consumer_id, redelivery_counter)
    properties = {}
    group_id = group_sequence = None
    for key, value in message.properties.items():
        if key == _GROUP_ID or key == "JMSXGroupID":
            group_id = None if value is None else str(plain(value))
        elif key == GROUP_SEQUENCE_ARTEMIS or key == "JMSXGroupSeq":
            group_sequence = _group_sequence(plain(value))
        elif not _skipped(key):
            properties[key] = wire_value(value)
    body_type = message.body_type
    converted = to_openwire_body(message) if body_type in _CLASS_OF else None
    if body_type is BodyType.TEXT:
        cls = ActiveMQTextMessage
        content = None if _null_text(message) else text_content(_utf8(message.body))
    elif converted is not None:
        cls, content = _CLASS_OF[body_type], converted
    elif body_type is BodyType.NONE:
        cls, content = ActiveMQMessage, None
    else:
        cls, content = ActiveMQBytesMessage, message.body
    jms_type = message.properties.get("JMSType")
    return cls(
        destination=destination if destination is not None else destination_of(message),
        message_id=message_id_of(message, node_id),
        group_id=group_id,
        group_sequence=group_sequence or 0,
        correlation_id=message.correlation_id,
        persistent=message.durable,
        expiration=message.expiration,
        priority=message.priority,
        reply_to=_reply_to(message),
        timestamp=message.timestamp,
        type=None if jms_type is None else str(plain(jms_type)),
        content=content,
        marshalled_properties=properties_content(properties),
        target_consumer_id=consumer_id,
        redelivery_counter=redelivery_counter,
        user_id=message.user_id if NATIVE_USER_ID in message.native else None,
    )


def _group_sequence(value) -> int:
    """A group sequence property as OpenWire's ``groupSequence`` (an int): 0 for what is not
    an integer of that width (a producer's ``JMSXGroupSeq`` may hold anything)."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return number if -(2**31) <= number < 2**31 else 0


def _utf8(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace")


def _null_text(message: Message) -> bool:
    native = message.native.get(CORE_NATIVE_KEY)
    # the flag first: it is rarely set, and core_type reads the whole native record
    return (native is not None and len(native) > 2 and bool(native[2] & _CORE_NULL_TEXT)
            and core_type(message) == MessageType.TEXT)


#: CORE's type -> the OpenWire message class
_CORE_CLASSES = {
    MessageType.TEXT: ActiveMQTextMessage, MessageType.BYTES: ActiveMQBytesMessage,
    MessageType.MAP: ActiveMQMapMessage, MessageType.STREAM: ActiveMQStreamMessage,
    MessageType.OBJECT: ActiveMQObjectMessage, MessageType.DEFAULT: ActiveMQMessage,
}  # fmt: skip
#: core_convert's native flag of a null text
_CORE_NULL_TEXT = 0x02


def _from_core(message: Message, node_id: str, destination, consumer_id, redelivery_counter: int):
    """A message another protocol sent, as Artemis gives it to an OpenWire consumer: its CORE
    form (:func:`~junction.brokercore.core_convert.to_core`: the JMS type and body a CORE
    consumer reads, ``JMSCorrelationID`` and ``JMSReplyTo`` properties) converted by its
    OpenWire converter -- the JMS header properties as the message's fields, the broker's own
    properties (``_AMQ...``, ``__HDR_...``) left out, no user id."""
    body, headers = core_to_core(message)
    kind = headers.type
    cls = _CORE_CLASSES.get(kind, ActiveMQBytesMessage)
    if kind == MessageType.TEXT:
        text = core_text_of(body)
        if isinstance(text, bytes):  # not one string: its bytes
            cls, content = ActiveMQBytesMessage, text
        else:
            content = None if text is None else text_content(text)
    elif kind in (MessageType.MAP, MessageType.STREAM, MessageType.OBJECT):
        content = openwire_content(kind, body) if body else None
        if content is None and body:  # not its type's layout: its bytes
            cls, content = ActiveMQBytesMessage, body
    elif kind == MessageType.DEFAULT:
        content = body or None
    else:
        content = body
    properties = {}
    group_id = correlation_id = reply_to = jms_type = None
    group_sequence = 0
    for key, value in headers.properties or ():
        if key == _GROUP_ID or key == "JMSXGroupID":
            group_id = None if value is None else str(plain_core(value))
        elif key == GROUP_SEQUENCE_ARTEMIS or key == "JMSXGroupSeq":
            group_sequence = _group_sequence(plain_core(value))
        elif key == CORRELATION_ID:
            correlation_id = value.decode("utf-8", "replace") if isinstance(value, bytes) else _str(plain_core(value))
        elif key == REPLY_TO:
            reply_to = None if value is None else destination_named(str(plain_core(value)))
        elif key == "JMSType":
            jms_type = None if value is None else str(plain_core(value))
        elif not _skipped(key):
            properties[key] = wire_value(value)
    return cls(
        destination=destination if destination is not None else destination_of(message),
        message_id=message_id_of(message, node_id),
        group_id=group_id,
        group_sequence=group_sequence,
        correlation_id=correlation_id,
        persistent=message.durable,
        expiration=message.expiration,
        priority=message.priority,
        reply_to=reply_to,
        timestamp=message.timestamp,
        type=jms_type,
        content=content,
        marshalled_properties=properties_content(properties),
        target_consumer_id=consumer_id,
        redelivery_counter=redelivery_counter,
    )


def _str(value) -> str | None:
    return None if value is None else str(plain(value))


def plain_core(value):
    """A CORE property value's plain Python value (unwraps a typed one)."""
    return value.value if value.__class__ is Scalar else value
