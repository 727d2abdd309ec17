"""OpenWire messages to and from the broker's message model, as Artemis's converter maps them.

In (:func:`to_model`): the JMS headers are the model's own (persistent ->
``durable``, priority, expiration, timestamp, correlation id, user id); the
destination gives the address and the routing type (a queue ANYCAST, a topic
MULTICAST); ``group_id``/``group_sequence`` become ``_AMQ_GROUP_ID`` and
``JMSXGroupSeq`` (Artemis's ``_AMQ_GROUP_SEQUENCE`` is read back too), the
JMS type ``JMSType``; the client's MessageId is kept (``native``) so the
consumer sees the id the producer saw.  Properties keep their Java width: an
OpenWire ``Int``/``Short``/``Byte``/``Float``/``Char`` becomes
:class:`~junction.model.message.Typed`, a ``Long``/``Double`` the plain
number, as CORE's conversion does.

Bodies (compressed ones inflated): a TextMessage's text is kept as UTF-8
(``BodyType.TEXT``); a BytesMessage's bytes as they are (``BodyType.BYTES``); a
message without a body is ``BodyType.NONE``; a map, stream or object body is
converted to CORE's layout (:mod:`.openwire_bodies`), as CORE's clients write
them, so every protocol reads it.

Out (:func:`to_openwire`): the reverse; a message not produced over OpenWire
gets Artemis's MessageId (``ID:<node>:-1:-1:<id / 2^31-1>`` with sequence
``id % 2^31-1``), so every dispatched message has a unique id.
"""

from __future__ import annotations

import zlib

from junction.brokercore.core_convert import NATIVE_KEY as CORE_NATIVE_KEY
from junction.brokercore.openwire_bodies import (
    from_openwire_body,
    model_value,
    to_openwire_body,
    wire_value,
)
from junction.model.message import BodyType, Message, RoutingType, Typed, plain
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
#: Java's ``Integer.MAX_VALUE``: how Artemis splits a core id into a MessageId.
_INT_MAX = 0x7FFFFFFF
_BODY_CLASSES = {
    ActiveMQMapMessage.TYPE: (ActiveMQMapMessage, BodyType.MAP),
    ActiveMQStreamMessage.TYPE: (ActiveMQStreamMessage, BodyType.STREAM),
    ActiveMQObjectMessage.TYPE: (ActiveMQObjectMessage, BodyType.OBJECT),
}
_CLASS_OF = {body_type: cls for cls, body_type in _BODY_CLASSES.values()}


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
        native[NATIVE_ID] = encode_frame(message.message_id)
    if message.reply_to is not None:
        native[NATIVE_REPLY_TO] = encode_frame(message.reply_to)
    kind = message.TYPE
    if kind == ActiveMQTextMessage.TYPE:
        text = text_of(message)
        body, body_type = (b"" if text is None else text.encode("utf-8")), BodyType.TEXT
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
        body, native[CORE_NATIVE_KEY] = from_openwire_body(body_type, body)
    else:
        body, body_type = b"", BodyType.NONE
    if message.group_id is not None:
        properties[_GROUP_ID] = message.group_id
        properties[GROUP_SEQUENCE_ARTEMIS] = Typed("int", message.group_sequence)
    if message.type is not None:
        properties["JMSType"] = message.type
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


def message_id_of(message: Message, node_id: str) -> MessageId:
    """The MessageId an OpenWire consumer sees: the producer's, else Artemis's made from the core id."""
    kept = message.native.get(NATIVE_ID)
    if kept is not None:
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


def to_openwire(message: Message, *, node_id: str, destination=None, consumer_id=None,
                redelivery_counter: int = 0):
    """The OpenWire message for the model's ``message``."""
    properties = {}
    group_id = group_sequence = None
    for key, value in message.properties.items():
        if key == _GROUP_ID or key == "JMSXGroupID":
            group_id = None if value is None else str(plain(value))
        elif key == GROUP_SEQUENCE_ARTEMIS or key == "JMSXGroupSeq":
            group_sequence = int(plain(value))
        elif key != "JMSType":
            properties[key] = wire_value(value)
    body_type = message.body_type
    converted = to_openwire_body(message) if body_type in _CLASS_OF else None
    if body_type is BodyType.TEXT:
        cls = ActiveMQTextMessage
        try:
            text = message.body.decode("utf-8")
        except UnicodeDecodeError:
            text = message.body.decode("utf-8", "replace")
        content = text_content(text)
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
        user_id=message.user_id,
    )
