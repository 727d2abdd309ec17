"""OpenWire's messages (types 23-29) and the commands that carry or settle them.

A message is one command whose fields are the JMS headers, the body
(``content``, raw bytes as the client marshalled them) and the properties
(``marshalled_properties``, a primitive map: :func:`message_properties`).
The message types differ only in how ``content`` is read (openwire.md
section 4); a BlobMessage appends three fields.  JMSXGroupID and JMSXGroupSeq
are the ``group_id``/``group_sequence`` fields, not properties.

:func:`text_of` / :func:`text_content` read and write an
ActiveMQTextMessage's body (``int32`` length and modified UTF-8, -1 for null;
zlib when ``compressed``), bounded by :data:`MAX_INFLATED_SIZE`.
"""

from __future__ import annotations

import struct
import zlib

from junction.protocols.openwire.command_types import CommandType as T
from junction.protocols.openwire.encoding import decode_mutf8, encode_mutf8
from junction.protocols.openwire.errors import MalformedCommand
from junction.protocols.openwire.marshal import (
    BOOL,
    BYTE,
    BYTES,
    INT,
    LONG,
    STRING,
    THROWABLE,
    Command,
    JavaThrowable,
    Structure,
    array,
    cached,
    nested,
    structure,
    wire,
)
from junction.protocols.openwire.primitives import decode_primitive_map, encode_primitive_map
from junction.protocols.openwire.structures import (
    DESTINATION_TYPES,
    TRANSACTION_ID_TYPES,
    ConsumerId,
    Destination,
    MessageId,
    ProducerId,
)

__all__ = [
    "MAX_INFLATED_SIZE",
    "MESSAGE_TYPES",
    "AckType",
    "ActiveMQBlobMessage",
    "ActiveMQBytesMessage",
    "ActiveMQMapMessage",
    "ActiveMQMessage",
    "ActiveMQObjectMessage",
    "ActiveMQStreamMessage",
    "ActiveMQTextMessage",
    "Message",
    "MessageAck",
    "MessageDispatch",
    "MessageDispatchNotification",
    "MessagePull",
    "ProducerAck",
    "message_properties",
    "properties_content",
    "text_content",
    "text_of",
]

_DEST = DESTINATION_TYPES
_TXID = TRANSACTION_ID_TYPES

#: Most bytes a compressed body may inflate to (the frame limit's default, 100 MiB).
MAX_INFLATED_SIZE = 100 * 1024 * 1024


class AckType:
    """``MessageAck.ack_type``."""

    DELIVERED = 0
    POISON = 1
    STANDARD = 2
    REDELIVERED = 3
    INDIVIDUAL = 4
    UNMATCHED = 5
    EXPIRED = 6


@structure(None, marshall_aware=True)
class Message(Command):
    """The fields every message type has (``Message``'s marshaller)."""

    producer_id: ProducerId | None = wire(cached(T.PRODUCER_ID))
    destination: Destination | None = wire(cached(*_DEST))
    transaction_id: Structure | None = wire(cached(*_TXID))
    original_destination: Destination | None = wire(cached(*_DEST))
    message_id: MessageId | None = wire(nested(T.MESSAGE_ID))
    original_transaction_id: Structure | None = wire(cached(*_TXID))
    group_id: str | None = wire(STRING)
    group_sequence: int = wire(INT, 0)
    correlation_id: str | None = wire(STRING)
    persistent: bool = wire(BOOL, False)
    expiration: int = wire(LONG, 0)
    priority: int = wire(BYTE, 4)
    reply_to: Destination | None = wire(nested(*_DEST))
    timestamp: int = wire(LONG, 0)
    type: str | None = wire(STRING)
    content: bytes | None = wire(BYTES)
    marshalled_properties: bytes | None = wire(BYTES)
    data_structure: Structure | None = wire(nested())
    target_consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    compressed: bool = wire(BOOL, False)
    redelivery_counter: int = wire(INT, 0)
    broker_path: tuple | None = wire(array(T.BROKER_ID))
    arrival: int = wire(LONG, 0)
    user_id: str | None = wire(STRING)
    recieved_by_dfbridge: bool = wire(BOOL, False)
    droppable: bool = wire(BOOL, False)
    cluster: tuple | None = wire(array(T.BROKER_ID))
    broker_in_time: int = wire(LONG, 0)
    broker_out_time: int = wire(LONG, 0)
    jmsx_group_first_for_consumer: bool = wire(BOOL, False)


@structure(T.ACTIVEMQ_MESSAGE)
class ActiveMQMessage(Message):
    """A message with no body."""


@structure(T.ACTIVEMQ_BYTES_MESSAGE)
class ActiveMQBytesMessage(Message):
    """``content``: the bytes."""


@structure(T.ACTIVEMQ_MAP_MESSAGE)
class ActiveMQMapMessage(Message):
    """``content``: a primitive map."""


@structure(T.ACTIVEMQ_OBJECT_MESSAGE)
class ActiveMQObjectMessage(Message):
    """``content``: a Java-serialised object."""


@structure(T.ACTIVEMQ_STREAM_MESSAGE)
class ActiveMQStreamMessage(Message):
    """``content``: primitives one after another, each with its type byte."""


@structure(T.ACTIVEMQ_TEXT_MESSAGE)
class ActiveMQTextMessage(Message):
    """``content``: see :func:`text_of`."""


@structure(T.ACTIVEMQ_BLOB_MESSAGE)
class ActiveMQBlobMessage(Message):
    remote_blob_url: str | None = wire(STRING)
    mime_type: str | None = wire(STRING)
    deleted_by_broker: bool = wire(BOOL, False)


#: The type bytes of the message commands.
MESSAGE_TYPES = frozenset(range(T.ACTIVEMQ_MESSAGE, T.ACTIVEMQ_BLOB_MESSAGE + 1))


@structure(T.MESSAGE_DISPATCH)
class MessageDispatch(Command):
    """A message for a consumer; ``message`` None ends a browse."""

    consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    destination: Destination | None = wire(cached(*_DEST))
    message: Message | None = wire(nested(*MESSAGE_TYPES))
    redelivery_counter: int = wire(INT, 0)


@structure(T.MESSAGE_ACK)
class MessageAck(Command):
    destination: Destination | None = wire(cached(*_DEST))
    transaction_id: Structure | None = wire(cached(*_TXID))
    consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    ack_type: int = wire(BYTE, AckType.STANDARD)
    first_message_id: MessageId | None = wire(nested(T.MESSAGE_ID))
    last_message_id: MessageId | None = wire(nested(T.MESSAGE_ID))
    message_count: int = wire(INT, 0)
    poison_cause: JavaThrowable | None = wire(THROWABLE)


@structure(T.MESSAGE_PULL)
class MessagePull(Command):
    consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    destination: Destination | None = wire(cached(*_DEST))
    timeout: int = wire(LONG, 0)
    correlation_id: str | None = wire(STRING)
    message_id: MessageId | None = wire(nested(T.MESSAGE_ID))


@structure(T.MESSAGE_DISPATCH_NOTIFICATION)
class MessageDispatchNotification(Command):
    consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    destination: Destination | None = wire(cached(*_DEST))
    delivery_sequence_id: int = wire(LONG, 0)
    message_id: MessageId | None = wire(nested(T.MESSAGE_ID))


@structure(T.PRODUCER_ACK)
class ProducerAck(Command):
    producer_id: ProducerId | None = wire(nested(T.PRODUCER_ID))
    size: int = wire(INT, 0)


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_INFLATED_SIZE)
    except zlib.error as exc:
        raise MalformedCommand(f"a compressed body does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise MalformedCommand(f"a compressed body inflates beyond {MAX_INFLATED_SIZE} bytes")
    return out


def text_of(message: Message) -> str | None:
    """The text of an ActiveMQTextMessage (None: a null text or no content)."""
    content = message.content
    if content is None:
        return None
    if message.compressed:
        content = _inflate(content)
    if len(content) < 4:
        raise MalformedCommand(f"a text body of {len(content)} bytes has no length")
    (n,) = struct.unpack_from(">i", content)
    if n == -1:
        return None
    if n != len(content) - 4:
        raise MalformedCommand(f"a text body says {n} bytes and holds {len(content) - 4}")
    try:
        return decode_mutf8(content[4:])
    except UnicodeDecodeError as exc:
        raise MalformedCommand(f"a text body is not valid modified UTF-8: {exc.reason}") from None


def text_content(text: str | None) -> bytes:
    """The ``content`` of an ActiveMQTextMessage holding ``text`` (uncompressed)."""
    if text is None:
        return struct.pack(">i", -1)
    data = encode_mutf8(text)
    return struct.pack(">i", len(data)) + data


def message_properties(message: Message) -> dict:
    """The message's properties (an empty dict when it has none)."""
    if message.marshalled_properties is None:
        return {}
    return decode_primitive_map(message.marshalled_properties) or {}


def properties_content(properties: dict | None) -> bytes | None:
    """``marshalled_properties`` for ``properties`` (None when there are none)."""
    return encode_primitive_map(properties) if properties else None
