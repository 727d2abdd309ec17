"""JMS headers and bodies across protocols: what Artemis gives a consumer of another protocol.

A JMS (CORE) client keeps the JMS header fields a STOMP frame or an AMQP properties
section has fields for in message properties of its own: ``JMSCorrelationID``,
``JMSReplyTo`` (``queue://name``, ``topic://name``, ``temp-queue://``,
``temp-topic://``) and ``_AMQ_ROUTING_TYPE`` (the destination's type, a byte); the
model keeps a STOMP or AMQP producer's in ``Message.correlation_id`` and
``Message.reply_to``.  Artemis moves them between the two as follows, and so does the
project's broker core:

* To a STOMP consumer (its ``StompUtils``): ``correlation-id``, ``reply-to`` (the
  property's text as it is) and ``destination-type`` (``ANYCAST`` / ``MULTICAST``)
  headers instead of those properties.
* To an AMQP consumer (its ``CoreAmqpConverter``): the properties section's
  correlation-id and reply-to (the name without its ``queue://`` prefix) with the
  ``x-opt-jms-reply-to`` annotation (0 queue, 1 topic, 2 temporary queue, 3 temporary
  topic), and ``x-opt-jms-dest`` 0; application properties are the message's but
  those a JMS client reserves (:func:`amqp_application_property`).
* To a JMS consumer of a STOMP or AMQP message (its ``StompUtils`` and
  ``AmqpCoreConverter``): ``JMSCorrelationID`` and ``JMSReplyTo`` properties; an AMQP
  reply-to becomes ``queue://<address>`` (``topic://`` and the temporary kinds by its
  ``x-opt-jms-reply-to``), a STOMP one stays as the frame had it.  The group id (a STOMP
  ``JMSXGroupID`` header, AMQP's ``group-id``) is CORE's ``_AMQ_GROUP_ID`` and AMQP's
  ``group-sequence`` CORE's int ``_AMQ_GROUP_SEQUENCE`` (read as a Java int), where the
  JMS client reads ``JMSXGroupID`` and ``JMSXGroupSeq``.

AMQP content-types Artemis reads as text (:func:`textual_charset`) make a data section a
TextMessage for a JMS consumer (:mod:`junction.brokercore.core_convert`).

Bodies to a STOMP consumer (Artemis's ``VersionedStompFrameHandler``): a JMS
BytesMessage (or a message with a ``content-length`` property) is its bytes; every
other JMS type has its CORE body read as one nullable string, whose UTF-8 is the
frame's body -- a TextMessage's text, nothing for an ObjectMessage (its body starts
with a zero byte), a few characters read from a MapMessage's layout.  Where that read
runs past the body (most StreamMessages), Artemis logs it and never delivers the
message (it stays in the consumer's delivering list); the broker core delivers it with
an empty body instead, so the subscriber can acknowledge it.
"""

from __future__ import annotations

from dataclasses import replace

from junction.brokercore.message_groups import GROUP_SEQUENCE_CORE
from junction.model.message import GROUP_ID, GROUP_ID_JMS, GROUP_SEQUENCE, Message, Typed, plain
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.types import Symbol

__all__ = [
    "CONNECTION_ID",
    "CORRELATION_ID",
    "REPLY_TO",
    "amqp_application_property",
    "amqp_reply_to",
    "core_correlation_id",
    "core_reply_to",
    "core_text",
    "foreign_properties",
    "for_stomp",
    "stomp_text",
    "textual_charset",
]

CORRELATION_ID = "JMSCorrelationID"
REPLY_TO = "JMSReplyTo"
#: The JMS client's connection id property (Artemis's CONNECTION_ID_PROPERTY_NAME).
CONNECTION_ID = "__AMQ_CID"
ROUTING_TYPE = "_AMQ_ROUTING_TYPE"
CONTENT_LENGTH = "content-length"
#: The annotation of the reply-to's type (Artemis's AMQPMessageSupport).
JMS_REPLY_TO = Symbol("x-opt-jms-reply-to")

#: ``JMSReplyTo`` prefixes and the ``x-opt-jms-reply-to`` value each means (queue: no prefix).
_DESTINATION_PREFIXES = (("queue://", 0), ("topic://", 1), ("temp-queue://", 2), ("temp-topic://", 3))
#: ``_AMQ_ROUTING_TYPE`` byte -> STOMP ``destination-type``.
_DESTINATION_TYPES = {0: "MULTICAST", 1: "ANYCAST"}
#: Headers :func:`for_stomp` takes out of the properties.
_STOMP_MAPPED = frozenset({CORRELATION_ID, REPLY_TO, ROUTING_TYPE})


def _text(value) -> str | None:
    if value is None:
        return None
    value = plain(value) if isinstance(value, Typed) else value
    if isinstance(value, bytes):
        return None  # a byte[] correlation id has no text form
    return str(value)


def core_correlation_id(message: Message):
    """A JMS client's correlation id: text, or bytes (``setJMSCorrelationIDAsBytes``)."""
    value = message.properties.get(CORRELATION_ID) if message.properties else None
    return plain(value) if isinstance(value, Typed) else value


def core_reply_to(message: Message) -> str | None:
    """A JMS client's reply-to destination, as its text (``queue://name``)."""
    return _text(message.properties.get(REPLY_TO)) if message.properties else None


def amqp_reply_to(destination: str) -> tuple[str, int]:
    """A ``JMSReplyTo`` text as an AMQP reply-to address and its ``x-opt-jms-reply-to``."""
    for prefix, kind in _DESTINATION_PREFIXES:
        if destination.startswith(prefix):
            return destination[len(prefix):], kind
    return destination, 0


def amqp_application_property(name: str) -> bool:
    """Whether a JMS message's property is an AMQP application property (Artemis's
    MessageUtil.getPropertyNames): not a name a JMS client reserves (``JMS...`` other than
    ``JMSX...`` and ``JMS_...``), the client's connection id or the routing type."""
    if name.startswith("JMS") and not name.startswith(("JMSX", "JMS_")):
        return False
    return name != ROUTING_TYPE and not name.startswith(CONNECTION_ID)


def foreign_properties(message: Message, amqp_sections: bytes | None) -> dict:
    """The properties a JMS client is given for a STOMP or AMQP ``message``: its own, with
    ``JMSCorrelationID`` and ``JMSReplyTo`` from the model's fields.  ``amqp_sections`` (an
    AMQP producer's encoded sections, None for STOMP's) give the reply-to's type: its
    ``x-opt-jms-reply-to`` annotation, a queue without one."""
    properties = message.properties
    correlation_id, reply_to = message.correlation_id, message.reply_to
    grouped = bool(properties) and (GROUP_ID_JMS in properties or GROUP_SEQUENCE in properties)
    if correlation_id is None and reply_to is None and not grouped:
        return properties
    properties = dict(properties)
    if grouped:
        _core_group_fields(properties)
    if correlation_id is not None:
        properties[CORRELATION_ID] = correlation_id
    if reply_to is not None:
        if amqp_sections is not None:
            reply_to = _DESTINATION_PREFIXES[_reply_to_type(amqp_sections)][0] + reply_to
        properties[REPLY_TO] = reply_to
    return properties


def _core_group_fields(properties: dict) -> None:
    """``JMSXGroupID`` as CORE's ``_AMQ_GROUP_ID``, an int ``JMSXGroupSeq`` (AMQP's unsigned
    ``group-sequence``) as CORE's signed int ``_AMQ_GROUP_SEQUENCE``, in place; a string
    ``JMSXGroupSeq`` (a STOMP header) stays an ordinary property, as in Artemis."""
    group_id = properties.pop(GROUP_ID_JMS, None)
    if group_id is not None and GROUP_ID not in properties:
        properties[GROUP_ID] = group_id
    sequence = properties.get(GROUP_SEQUENCE)
    if isinstance(sequence, Typed) and sequence.kind == "int" and GROUP_SEQUENCE_CORE not in properties:
        del properties[GROUP_SEQUENCE]
        value = int(sequence.value) & 0xFFFFFFFF
        properties[GROUP_SEQUENCE_CORE] = Typed("int", value - (1 << 32) if value >= 1 << 31 else value)


def _reply_to_type(sections: bytes) -> int:
    """The ``x-opt-jms-reply-to`` annotation of encoded AMQP sections (0, a queue, without
    one or with a value that is no type)."""
    try:
        annotations = sections_codec.decode_message(bytes(sections)).message_annotations or {}
    except ValueError:
        return 0
    value = annotations.get(JMS_REPLY_TO)
    value = getattr(value, "value", value)
    return value if value.__class__ is int and 0 <= value < len(_DESTINATION_PREFIXES) else 0


#: application/* subtypes Artemis takes as text (its AMQPContentTypeSupport)
_TEXTUAL_SUBTYPES = frozenset({"xml", "json", "javascript", "xml-dtd", "ecmascript"})


def textual_charset(content_type: str | None) -> str | None:
    """The charset of an AMQP body with ``content_type`` when that type is textual (``text/*``,
    XML, JSON, JavaScript: UTF-8 unless a charset parameter names another), None when it is
    not (or does not parse), as Artemis's AmqpCoreConverter reads it."""
    if not content_type or "/" not in content_type:
        return None
    kind, _, rest = content_type.partition("/")
    subtype, _, parameters = rest.partition(";")
    kind, subtype = kind.strip().lower(), subtype.strip().lower()
    if not subtype:
        return None
    if kind != "text" and not (
        kind == "application" and (subtype in _TEXTUAL_SUBTYPES or subtype.endswith(("+xml", "+json")))
    ):
        return None
    for parameter in parameters.split(";"):
        name, eq, value = parameter.partition("=")
        if eq and name.strip().lower() == "charset":
            value = value.strip()
            if len(value) > 1 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return value.upper()
    return "UTF-8"


def core_text(core_body: bytes) -> str | None:
    """A CORE body read as one nullable string, as Artemis reads the body of a JMS message
    that is not a BytesMessage for STOMP and AMQP consumers (None: null, or no body).
    Raises ValueError where the read runs past the body."""
    if not core_body or core_body[0] == 0:
        return None
    if len(core_body) < 5:
        raise ValueError("no string length")
    size = int.from_bytes(core_body[1:5], "big", signed=True)
    if size < 0 or size > len(core_body) - 5:
        raise ValueError("the string runs past the body")
    # an odd last byte is no character; a lone surrogate stays one (written as '?')
    return bytes(core_body[5:5 + (size & ~1)]).decode("utf-16-le", "surrogatepass")


def stomp_text(core_body: bytes) -> bytes:
    """The STOMP body of a JMS message that is not a BytesMessage: :func:`core_text` as
    UTF-8, empty for a null one and where the read fails (see the module doc)."""
    try:
        text = core_text(core_body)
    except ValueError:
        return b""  # Artemis: IndexOutOfBoundsException, the message is never delivered
    return b"" if text is None else text.encode("utf-8", "replace")


def for_stomp(message: Message, core_body: bytes | None) -> Message:
    """``message`` (a JMS client's) as a STOMP consumer gets it: ``core_body`` (its body in
    CORE's layout when it is not a BytesMessage's or a text already; else None) converted by
    :func:`stomp_text`, the JMS header properties as STOMP's headers."""
    properties = message.properties
    body = message.body
    if core_body is not None and CONTENT_LENGTH not in properties:
        body = stomp_text(core_body)
    correlation_id = reply_to = None
    if _STOMP_MAPPED.isdisjoint(properties):
        if body is message.body:
            return message
    else:
        properties = {k: v for k, v in properties.items() if k not in _STOMP_MAPPED}
        correlation_id = _text(message.properties.get(CORRELATION_ID))
        reply_to = _text(message.properties.get(REPLY_TO))
        routing = message.properties.get(ROUTING_TYPE)
        destination_type = _DESTINATION_TYPES.get(plain(routing) if isinstance(routing, Typed) else routing)
        if destination_type is not None:
            properties["destination-type"] = destination_type
    return replace(
        message,
        body=body,
        properties=properties,
        correlation_id=correlation_id if correlation_id is not None else message.correlation_id,
        reply_to=reply_to if reply_to is not None else message.reply_to,
    )
