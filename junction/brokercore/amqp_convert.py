"""AMQP 1.0 messages to and from the broker core's protocol-neutral :class:`Message`.

Inbound, the AMQP sections are read into the model so that any protocol can
consume the message, filters can see its properties and the broker can act on
its header (durability, priority, expiry) and group id.  The encoded bytes from
the message-annotations section onward are kept in ``Message.native["amqp"]``,
so an AMQP consumer receives byte for byte what the producer sent, under a
header the broker writes afresh (delivery count, remaining time to live) -- as
Artemis's ``AMQPStandardMessage`` does.

Outbound, a message that came from another protocol is built from the model:

============================  =============================================
AMQP                          broker core
============================  =============================================
header durable / priority     ``durable`` / ``priority`` (0-9)
header ttl, absolute-expiry   ``expiration`` (epoch ms; ttl wins, as Artemis)
properties user-id            ``user_id``
properties to                 the address (anonymous relay)
properties subject            property ``JMSType`` (STOMP ``type``)
properties message-id         property ``NATIVE_MESSAGE_ID`` (Artemis's text
                              form, junction.brokercore.amqp_ids)
properties reply-to           ``reply_to``
properties correlation-id     ``correlation_id`` (Artemis's text form)
properties content-type       property ``content-type`` (STOMP's header)
properties content-encoding   property ``JMS_AMQP_CONTENT_ENCODING``
properties creation-time      ``timestamp``
properties group-id           property ``JMSXGroupID``
properties group-sequence     property ``JMSXGroupSeq`` (int)
properties reply-to-group-id  property ``JMS_AMQP_REPLY_TO_GROUP_ID``
application-properties        ``properties`` (AMQP widths kept as Typed)
ann. x-opt-delivery-time      property ``_AMQ_SCHED_DELIVERY`` (epoch ms;
                              inbound also x-opt-delivery-delay, see
                              junction.brokercore.scheduled_headers)
body data                     ``BYTES`` body
body amqp-value string        ``TEXT`` body (UTF-8)
body amqp-value binary        ``BYTES`` body
body amqp-value null / none   ``NONE`` body
other bodies                  ``MAP`` / ``STREAM`` / ``OBJECT``, the encoded
                              body sections as the body bytes
============================  =============================================

Other message annotations, delivery annotations and the footer have no neutral
meaning and travel only in the native bytes (delivery annotations are
hop-by-hop and are dropped); the message id travels there too, and as text in
``NATIVE_MESSAGE_ID`` for consumers of other protocols.  Outbound, that
property (or else ``ID:<the broker's message id>``) is the message-id, and a
correlation id written in the typed text form is rebuilt as that type, as
Artemis's core-to-AMQP conversion does.  Properties the broker adds itself (where a
dead-lettered or expired message came from) reach AMQP consumers as message
annotations ``x-opt-ORIG-ADDRESS`` and friends, Artemis's names.
"""

from __future__ import annotations

import uuid

from junction.brokercore import jms_bodies, jms_headers
from junction.brokercore.amqp_ids import (
    NATIVE_MESSAGE_ID,
    correlation_id_text,
    id_object,
    message_id_text,
)
from junction.brokercore.core_convert import core_type, jms_message_id
from junction.brokercore.scheduled import SCHEDULED_DELIVERY, delivery_time
from junction.brokercore.scheduled_headers import DELIVERY_TIME, amqp_delivery_time
from junction.model.message import (
    ACTUAL_EXPIRY,
    GROUP_ID,
    GROUP_ID_JMS,
    GROUP_SEQUENCE,
    ORIGINAL_ADDRESS,
    ORIGINAL_QUEUE,
    BodyType,
    Message,
    Typed,
    plain,
)
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.message import Header, MessageSections, Properties
from junction.protocols.amqp.types import Scalar, Symbol
from junction.protocols.core import MessageType

__all__ = ["to_core", "to_amqp", "NATIVE_KEY", "ConversionError"]

#: ``Message.native`` key of the encoded sections after the header
NATIVE_KEY = "amqp"
JMS_TYPE = "JMSType"
CONTENT_TYPE = "content-type"
CONTENT_ENCODING = "JMS_AMQP_CONTENT_ENCODING"
REPLY_TO_GROUP_ID = "JMS_AMQP_REPLY_TO_GROUP_ID"

#: Properties the broker adds to a message it moves, and the message
#: annotation each becomes for an AMQP consumer (Artemis's names).
_BROKER_ANNOTATIONS = {
    ORIGINAL_ADDRESS: Symbol("x-opt-ORIG-ADDRESS"),
    ORIGINAL_QUEUE: Symbol("x-opt-ORIG-QUEUE"),
    ACTUAL_EXPIRY: Symbol("x-opt-ACTUAL-EXPIRY"),
}
#: CORE's group sequence property (the JMS client's JMSXGroupSeq, OpenWire's groupSequence)
GROUP_SEQUENCE_CORE = "_AMQ_GROUP_SEQUENCE"
#: Properties that are AMQP properties-section fields, not application properties.
_MAPPED = frozenset(
    {JMS_TYPE, CONTENT_TYPE, CONTENT_ENCODING, REPLY_TO_GROUP_ID, GROUP_ID, GROUP_ID_JMS, GROUP_SEQUENCE,
     GROUP_SEQUENCE_CORE, NATIVE_MESSAGE_ID}
)

#: AMQP widths the core model keeps as Typed (the rest become plain values)
_TYPED_KINDS = {"byte": "byte", "short": "short", "int": "int", "float": "float", "char": "char"}
#: core Typed kinds back to AMQP widths (long and double are plain int/float)
_SCALAR_KINDS = {"byte": "byte", "short": "short", "int": "int", "float": "float", "char": "char"}


class ConversionError(ValueError):
    """An AMQP message the broker cannot take (the delivery is rejected with this text)."""


def _property_value(value):
    """An application-property value as the core model holds it."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or cls is float or value is None or cls is bytes:
        return value
    if isinstance(value, Scalar):
        kind = _TYPED_KINDS.get(value.kind)
        if kind is not None:
            return Typed(kind, value.value)
        if value.kind.startswith("decimal"):
            return bytes(value.value)
        return value.value  # unsigned widths, timestamp: the number
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):  # Symbol
        return str(value)
    if isinstance(value, int):
        return int(value)
    raise ConversionError(f"application property value of type {type(value).__name__} is not supported")


def to_core(data: bytes, address: str | None, *, now_ms: int) -> Message:
    """Decode an AMQP message into the core model.

    ``address`` is the link's target address, or None on an anonymous-relay
    link, where the message's ``to`` names it.  ``now_ms`` (epoch
    milliseconds, from the broker's injected clock) stamps the message and
    starts its ``ttl``.
    Raises :class:`ConversionError` (or the codec's ``DecodeError``, a
    ValueError) for a message that cannot be taken.
    """
    sections = sections_codec.decode_message(data)
    header = sections.header
    props = sections.properties
    durable = False
    priority = 4
    expiration = 0
    if header is not None:
        durable = header.durable
        priority = header.priority if header.priority <= 9 else 9
        if header.ttl:
            expiration = now_ms + header.ttl
    properties: dict = {}
    app = sections.application_properties
    if app:
        for key, value in app.items():
            properties[key] = _property_value(value)
    user_id = correlation_id = reply_to = None
    timestamp = now_ms
    if props is not None:
        if address is None:
            address = props.to
        if props.user_id is not None:
            user_id = props.user_id.decode("utf-8", "replace") if isinstance(props.user_id, bytes) else str(props.user_id)
        if props.subject is not None:
            properties[JMS_TYPE] = props.subject
        reply_to = props.reply_to
        if props.message_id is not None:
            properties[NATIVE_MESSAGE_ID] = message_id_text(props.message_id)
        correlation_id = correlation_id_text(props.correlation_id)
        if props.content_type is not None:
            properties[CONTENT_TYPE] = str(props.content_type)
        if props.content_encoding is not None:
            properties[CONTENT_ENCODING] = str(props.content_encoding)
        if not expiration and props.absolute_expiry_time:
            expiration = props.absolute_expiry_time
        if props.creation_time:
            timestamp = props.creation_time
        if props.group_id is not None:
            properties[GROUP_ID_JMS] = props.group_id
        if props.group_sequence is not None:
            properties[GROUP_SEQUENCE] = Typed("int", props.group_sequence & 0xFFFFFFFF)
        if props.reply_to_group_id is not None:
            properties[REPLY_TO_GROUP_ID] = props.reply_to_group_id
    if not address:
        raise ConversionError("the message has no address: the link has no target address and the message no 'to'")
    # Only the annotations schedule an AMQP message (an application property of that name
    # does not, in Artemis either: it stays in the native bytes for AMQP consumers).
    properties.pop(SCHEDULED_DELIVERY, None)
    scheduled = amqp_delivery_time(sections.message_annotations, now_ms)
    if scheduled:
        properties[SCHEDULED_DELIVERY] = scheduled
    body, body_type = _core_body(sections)
    return Message(
        address,
        body,
        body_type,
        durable,
        priority,
        expiration,
        timestamp,
        None,
        properties,
        user_id,
        correlation_id,
        reply_to,
        0,
        {NATIVE_KEY: sections.annotated},
    )


def _core_body(sections: MessageSections) -> tuple[bytes, BodyType]:
    body = sections.body
    if not body:
        return b"", BodyType.NONE
    kind, value = body[0]
    if kind == "data":
        if len(body) == 1:
            return bytes(value), BodyType.BYTES
        return b"".join(bytes(v) for _, v in body), BodyType.BYTES
    if kind == "amqp-value":
        if value is None:
            return b"", BodyType.NONE
        if isinstance(value, str) and not isinstance(value, Symbol):
            return value.encode("utf-8", "surrogatepass"), BodyType.TEXT
        if isinstance(value, (bytes, bytearray)):
            return bytes(value), BodyType.BYTES
        encoded = sections_codec.encode_body_value(value)
        if isinstance(value, dict):
            return encoded, BodyType.MAP
        if isinstance(value, list):
            return encoded, BodyType.STREAM
        return encoded, BodyType.OBJECT
    # amqp-sequence
    return b"".join(sections_codec.encode_body_sequence(v) for _, v in body), BodyType.STREAM


def _header(message: Message, delivery_count: int, now_ms: int) -> bytes:
    ttl = None
    if message.expiration:
        ttl = max(1, message.expiration - now_ms)
        if ttl > 0xFFFFFFFF:
            # ttl is a uint of milliseconds (~49.7 days): an expiry further
            # out (an absolute-expiry-time) is left to the properties section.
            ttl = None
    return sections_codec.encode_header(
        Header(
            durable=message.durable,
            priority=message.priority,
            ttl=ttl,
            first_acquirer=False,
            delivery_count=delivery_count,
        )
    )


def to_amqp(message: Message, delivery_count: int = 0, *, now_ms: int) -> bytes:
    """The AMQP encoding of ``message`` for a consumer.

    ``delivery_count`` is the number of earlier failed deliveries (the AMQP
    header's delivery-count).  ``now_ms`` (epoch milliseconds, from the
    broker's injected clock) turns an expiration into the header's ``ttl``;
    it is not read for a message without one.
    """
    native = message.native.get(NATIVE_KEY)
    if native is not None:
        header = _header(message, delivery_count, now_ms)
        extra = None
        properties = message.properties
        for key in _BROKER_ANNOTATIONS:
            if key in properties:
                if extra is None:
                    extra = {}
                extra[_BROKER_ANNOTATIONS[key]] = plain(properties[key])
        if extra is None:
            return header + bytes(native)
        sections = sections_codec.decode_message(bytes(native))
        annotations = dict(sections.message_annotations or {})
        annotations.update(extra)
        return header + sections_codec.encode_annotations(0x72, annotations) + bytes(sections.bare)
    return _header(message, delivery_count, now_ms) + _from_core(message)


def _from_core(message: Message) -> bytes:
    """The sections after the header for a message from another protocol."""
    props = message.properties
    annotations = {}
    application = {}
    for key, value in props.items():
        if key in _MAPPED or not jms_headers.amqp_application_property(key):
            continue
        if key in _BROKER_ANNOTATIONS:
            annotations[_BROKER_ANNOTATIONS[key]] = plain(value)
            continue
        if key == SCHEDULED_DELIVERY:  # an annotation, as Artemis converts it
            at = delivery_time(message)
            if at > 0:
                annotations[DELIVERY_TIME] = at
            continue
        application[key] = _amqp_value(value)
    group_id = props.get(GROUP_ID_JMS)
    if group_id is None:
        group_id = props.get(GROUP_ID)
    group_sequence = props.get(GROUP_SEQUENCE)
    if group_sequence is None:
        group_sequence = props.get(GROUP_SEQUENCE_CORE)
    if group_sequence is not None:
        try:
            group_sequence = int(plain(group_sequence)) & 0xFFFFFFFF
        except (TypeError, ValueError):
            group_sequence = None
    content_type = props.get(CONTENT_TYPE)
    jms_type, body_section = _jms_body(message)
    if jms_type is None:
        jms_type = _MODEL_JMS_TYPES.get(message.body_type)  # a STOMP producer's (Artemis: a CORE message)
    if jms_type is not None:
        annotations[jms_bodies.JMS_MSG_TYPE] = Scalar("byte", jms_type)
        if jms_type == jms_bodies.JMS_OBJECT:
            content_type = jms_bodies.SERIALIZED_CONTENT_TYPE
    annotations[_JMS_DEST] = _QUEUE
    # a JMS client's JMSReplyTo (CORE's, or OpenWire's converted) names the destination's type
    reply_to = jms_headers.core_reply_to(message)
    if reply_to is None:
        reply_to = message.reply_to
    if reply_to is not None:
        reply_to, reply_to_type = jms_headers.amqp_reply_to(reply_to)
        annotations[_JMS_REPLY_TO] = Scalar("byte", reply_to_type)
    content_encoding = props.get(CONTENT_ENCODING)
    subject = props.get(JMS_TYPE)
    reply_to_group = props.get(REPLY_TO_GROUP_ID)
    native_id = props.get(NATIVE_MESSAGE_ID)
    if native_id is not None:
        message_id = id_object(str(plain(native_id)))
    else:
        message_id = jms_message_id(message)  # a JMS client's own id, as Artemis gives it
        if message_id is None and message.message_id:
            message_id = f"ID:{message.message_id}"
    correlation_id = message.correlation_id
    if correlation_id is None:
        correlation_id = jms_headers.core_correlation_id(message)
        if isinstance(correlation_id, bytes):
            correlation_id = (correlation_id,)  # binary: as it is (below)
    properties = Properties(
        message_id=message_id,
        user_id=message.user_id.encode("utf-8") if message.user_id else None,
        to=message.address,
        subject=None if subject is None else str(plain(subject)),
        reply_to=reply_to,
        correlation_id=_correlation_id(correlation_id),
        content_type=None if content_type is None else Symbol(str(plain(content_type))),
        content_encoding=None if content_encoding is None else Symbol(str(plain(content_encoding))),
        absolute_expiry_time=message.expiration or None,
        creation_time=message.timestamp or None,
        group_id=None if group_id is None else str(plain(group_id)),
        group_sequence=group_sequence,
        reply_to_group_id=None if reply_to_group is None else str(plain(reply_to_group)),
    )
    out = []
    if annotations:
        out.append(sections_codec.encode_annotations(0x72, annotations))
    out.append(sections_codec.encode_properties(properties))
    if application:
        out.append(sections_codec.encode_application_properties(application))
    out.append(_core_body_sections(message) if body_section is None else body_section)
    return b"".join(out)


#: The annotations of the destination's and the reply-to's type (Artemis's AMQPMessageSupport)
_JMS_DEST = Symbol("x-opt-jms-dest")
_JMS_REPLY_TO = jms_headers.JMS_REPLY_TO
#: x-opt-jms-dest of a converted message: Artemis's message names its address without a
#: queue:// or topic:// prefix, which it reads as a queue.
_QUEUE = Scalar("byte", 0)
#: The model's body type -> the x-opt-jms-msg-type of a STOMP producer's message (text
#: without content-length, bytes with it).
_MODEL_JMS_TYPES = {BodyType.TEXT: jms_bodies.JMS_TEXT, BodyType.BYTES: jms_bodies.JMS_BYTES}
#: CORE type -> the x-opt-jms-msg-type of a message a JMS client sent
_JMS_TYPES = {
    MessageType.DEFAULT: jms_bodies.JMS_MESSAGE,
    MessageType.TEXT: jms_bodies.JMS_TEXT,
    MessageType.BYTES: jms_bodies.JMS_BYTES,
    MessageType.MAP: jms_bodies.JMS_MAP,
    MessageType.STREAM: jms_bodies.JMS_STREAM,
    MessageType.OBJECT: jms_bodies.JMS_OBJECT,
}


def _jms_body(message: Message) -> tuple[int | None, bytes | None]:
    """For a message a CORE (JMS) client sent: its x-opt-jms-msg-type and, for a map,
    stream or object, the AMQP body Artemis makes of it (None: the model's body as it is)."""
    kind = core_type(message)
    jms_type = _JMS_TYPES.get(kind)
    if jms_type is None:
        return None, None
    body = message.body
    try:
        if kind == MessageType.MAP:
            entries = jms_bodies.core_map(body)
            return jms_type, sections_codec.encode_body_value({k: jms_bodies.amqp_value(v) for k, v in entries.items()})
        if kind == MessageType.STREAM:
            values = [jms_bodies.amqp_value(v) for v in jms_bodies.core_stream(body)]
            return jms_type, sections_codec.encode_body_sequence(values)
        if kind == MessageType.OBJECT:
            return jms_type, sections_codec.encode_body_data(jms_bodies.core_object(body))
        if kind == MessageType.DEFAULT:
            # a JMS Message: no body section, or the text its body reads as (Artemis's
            # CoreMessageWrapper); a body that reads as none goes as its data section
            text = jms_headers.core_text(body)
            return jms_type, b"" if text is None else sections_codec.encode_body_value(text)
    except (jms_bodies.NotConvertible, ValueError):
        return jms_type, None
    return jms_type, None


def _correlation_id(value):
    """The properties section's correlation-id: a text's typed id (Artemis's AMQPMessageIdHelper),
    a JMS client's byte[] id (wrapped in a tuple above) as binary."""
    if value is None:
        return None
    if value.__class__ is tuple:
        return value[0]
    return id_object(str(plain(value)))


def _amqp_value(value):
    if isinstance(value, Typed):
        kind = _SCALAR_KINDS.get(value.kind)
        if kind is None:  # long, double: plain widths
            return value.value
        return Scalar(kind, value.value)
    return value


def _core_body_sections(message: Message) -> bytes:
    body_type = message.body_type
    body = message.body
    if body_type == BodyType.TEXT:
        try:
            return sections_codec.encode_body_value(body.decode("utf-8"))
        except UnicodeDecodeError:
            return sections_codec.encode_body_data(body)
    if body_type == BodyType.NONE and not body:
        return sections_codec.encode_body_value(None)
    if body_type in (BodyType.MAP, BodyType.STREAM, BodyType.OBJECT) and body[:1] == b"\x00":
        # Encoded AMQP body sections from an earlier conversion.
        return bytes(body)
    return sections_codec.encode_body_data(body)
