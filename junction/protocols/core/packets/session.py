"""Session packets: consumers, acknowledgements, transactions, flow control, producers, metadata.

All travel on the session's channel (the id the client chose in CREATESESSION,
from 10 up).  What the server answers to each (core.md section 2): a
NULL_RESPONSE when ``requires_response`` is set or the request is blocking
(SESS_COMMIT, SESS_ROLLBACK, SESS_STOP, SESS_CLOSE, SESS_CONSUMER_CLOSE,
SESS_ADD_METADATA2), a QUEUEQUERY_RESP to a SESS_CREATECONSUMER that requires
a response, SESS_PRODUCER_CREDITS (or FAIL_CREDITS) to a credit request,
nothing to the rest.
"""

from __future__ import annotations

from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.packets.base import (
    BOOL,
    INT,
    LONG,
    NULLABLE_SIMPLE_STRING,
    SIMPLE_STRING,
    STRING,
    Packet,
    packet,
    wire,
)

__all__ = [
    "CreateProducer",
    "RemoveProducer",
    "SessAcknowledge",
    "SessAddMetadata",
    "SessAddMetadata2",
    "SessClose",
    "SessCommit",
    "SessConsumerClose",
    "SessCreateConsumer",
    "SessExpired",
    "SessFlowToken",
    "SessForceConsumerDelivery",
    "SessIndividualAcknowledge",
    "SessProducerCredits",
    "SessProducerFailCredits",
    "SessProducerRequestCredits",
    "SessRollback",
    "SessStart",
    "SessStop",
    "SessUniqueAddMetadata",
]


@packet(PacketType.SESS_CREATECONSUMER, "client")
class SessCreateConsumer(Packet):
    """Create consumer ``consumer_id`` on a queue.  ``priority``: clients of version 130+ (else None)."""

    consumer_id: int = wire(LONG)
    queue_name: str = wire(SIMPLE_STRING)
    filter_string: str | None = wire(NULLABLE_SIMPLE_STRING)
    browse_only: bool = wire(BOOL)
    requires_response: bool = wire(BOOL)
    priority: int | None = wire(INT, tail=True)


@packet(PacketType.SESS_ACKNOWLEDGE, "client")
class SessAcknowledge(Packet):
    """Acknowledge every message the consumer was given up to and including ``message_id``."""

    consumer_id: int = wire(LONG)
    message_id: int = wire(LONG)
    requires_response: bool = wire(BOOL)


@packet(PacketType.SESS_INDIVIDUAL_ACKNOWLEDGE, "client")
class SessIndividualAcknowledge(Packet):
    """Acknowledge message ``message_id`` alone."""

    consumer_id: int = wire(LONG)
    message_id: int = wire(LONG)
    requires_response: bool = wire(BOOL)


@packet(PacketType.SESS_EXPIRED, "client")
class SessExpired(Packet):
    """The client found a delivered message expired."""

    consumer_id: int = wire(LONG)
    message_id: int = wire(LONG)


@packet(PacketType.SESS_COMMIT, "client")
class SessCommit(Packet):
    """Commit the session's transaction; ``correlation_id`` from version 132 on (else None)."""

    correlation_id: int | None = wire(LONG, tail=True)


@packet(PacketType.SESS_ROLLBACK, "client")
class SessRollback(Packet):
    """Roll back; ``consider_last_message_as_delivered`` decides the last message's delivery count."""

    consider_last_message_as_delivered: bool = wire(BOOL)


@packet(PacketType.SESS_START, "client")
class SessStart(Packet):
    """Start delivering to the session's consumers."""


@packet(PacketType.SESS_STOP, "client")
class SessStop(Packet):
    """Stop delivering (answered by NULL_RESPONSE once delivery has stopped)."""


@packet(PacketType.SESS_CLOSE, "client")
class SessClose(Packet):
    """Close the session and its channel."""


@packet(PacketType.SESS_FLOWTOKEN, "client")
class SessFlowToken(Packet):
    """Give a consumer ``credits`` bytes more (-1: unlimited; 0: reset)."""

    consumer_id: int = wire(LONG)
    credits: int = wire(INT)


@packet(PacketType.SESS_CONSUMER_CLOSE, "client")
class SessConsumerClose(Packet):
    consumer_id: int = wire(LONG)


@packet(PacketType.SESS_FORCE_CONSUMER_DELIVERY, "client")
class SessForceConsumerDelivery(Packet):
    """``receiveImmediate``: deliver what is there, then a marker message carrying ``sequence``."""

    consumer_id: int = wire(LONG)
    sequence: int = wire(LONG)


@packet(PacketType.SESS_PRODUCER_REQUEST_CREDITS, "client")
class SessProducerRequestCredits(Packet):
    """Ask for ``credits`` bytes of room on an address (the producer window)."""

    credits: int = wire(INT)
    address: str = wire(SIMPLE_STRING)


@packet(PacketType.SESS_PRODUCER_CREDITS, "server")
class SessProducerCredits(Packet):
    """Grant ``credits`` bytes on an address."""

    credits: int = wire(INT)
    address: str = wire(SIMPLE_STRING)


@packet(PacketType.SESS_PRODUCER_FAIL_CREDITS, "server")
class SessProducerFailCredits(Packet):
    """Refuse credits: the address is full and its policy is FAIL."""

    credits: int = wire(INT)
    address: str = wire(SIMPLE_STRING)


@packet(PacketType.CREATE_PRODUCER, "client")
class CreateProducer(Packet):
    """A producer's id (the SESS_SEND ``sender_id``) and its address, if it has one."""

    producer_id: int = wire(INT)
    address: str | None = wire(NULLABLE_SIMPLE_STRING)


@packet(PacketType.REMOVE_PRODUCER, "client")
class RemoveProducer(Packet):
    producer_id: int = wire(INT)


@packet(PacketType.SESS_ADD_METADATA, "client")
class SessAddMetadata(Packet):
    """Session metadata (the JMS client sends its client id as ``jms-client-id``)."""

    key: str = wire(STRING)
    data: str = wire(STRING)


@packet(PacketType.SESS_ADD_METADATA2, "client")
class SessAddMetadata2(Packet):
    """Session metadata, answered with NULL_RESPONSE."""

    key: str = wire(STRING)
    data: str = wire(STRING)
    requires_confirmation: bool = wire(BOOL)


@packet(PacketType.SESS_UNIQUE_ADD_METADATA, "client")
class SessUniqueAddMetadata(SessAddMetadata2):
    """Metadata that must be unique on the server (a JMS client id): a duplicate gets EXCEPTION 114."""
