"""OpenWire's data structures: the ids, the destinations, the transaction ids (types 100-124).

Field orders from openwire.md section 5 ("IDs" and "Destinations"); note that
a ProducerId carries its ``value`` before its ``session_id``.  The ids are
the keys the connection tracks sessions, producers and consumers by; each id
knows its parent (:meth:`SessionId.connection`, ...).
"""

from __future__ import annotations

from junction.protocols.openwire.command_types import CommandType as T
from junction.protocols.openwire.marshal import (
    BYTES,
    INT,
    LONG,
    STRING,
    Structure,
    cached,
    structure,
    wire,
)

__all__ = [
    "DESTINATION_TYPES",
    "TRANSACTION_ID_TYPES",
    "ActiveMQQueue",
    "ActiveMQTempQueue",
    "ActiveMQTempTopic",
    "ActiveMQTopic",
    "BrokerId",
    "ConnectionId",
    "ConsumerId",
    "Destination",
    "LocalTransactionId",
    "MessageId",
    "ProducerId",
    "SessionId",
    "XATransactionId",
]

#: The type bytes a destination field accepts.
DESTINATION_TYPES = (T.ACTIVEMQ_QUEUE, T.ACTIVEMQ_TOPIC, T.ACTIVEMQ_TEMP_QUEUE, T.ACTIVEMQ_TEMP_TOPIC)
#: The type bytes a transaction id field accepts.
TRANSACTION_ID_TYPES = (T.LOCAL_TRANSACTION_ID, T.XA_TRANSACTION_ID)


@structure(T.BROKER_ID)
class BrokerId(Structure):
    value: str | None = wire(STRING)


@structure(T.CONNECTION_ID)
class ConnectionId(Structure):
    value: str | None = wire(STRING)


@structure(T.SESSION_ID)
class SessionId(Structure):
    connection_id: str | None = wire(STRING)
    value: int = wire(LONG, 0)

    def connection(self) -> ConnectionId:
        return ConnectionId(self.connection_id)


@structure(T.CONSUMER_ID)
class ConsumerId(Structure):
    connection_id: str | None = wire(STRING)
    session_id: int = wire(LONG, 0)
    value: int = wire(LONG, 0)

    def session(self) -> SessionId:
        return SessionId(self.connection_id, self.session_id)


@structure(T.PRODUCER_ID)
class ProducerId(Structure):
    connection_id: str | None = wire(STRING)
    value: int = wire(LONG, 0)
    session_id: int = wire(LONG, 0)

    def session(self) -> SessionId:
        return SessionId(self.connection_id, self.session_id)


@structure(T.MESSAGE_ID)
class MessageId(Structure):
    text_view: str | None = wire(STRING)
    producer_id: ProducerId | None = wire(cached(T.PRODUCER_ID))
    producer_sequence_id: int = wire(LONG, 0)
    broker_sequence_id: int = wire(LONG, 0)


@structure(T.LOCAL_TRANSACTION_ID)
class LocalTransactionId(Structure):
    value: int = wire(LONG, 0)
    connection_id: ConnectionId | None = wire(cached(T.CONNECTION_ID))


@structure(T.XA_TRANSACTION_ID)
class XATransactionId(Structure):
    format_id: int = wire(INT, 0)
    global_transaction_id: bytes | None = wire(BYTES)
    branch_qualifier: bytes | None = wire(BYTES)


@structure(None)
class Destination(Structure):
    """A queue or topic; ``physical_name`` may be a comma-separated composite."""

    physical_name: str | None = wire(STRING)

    @property
    def is_topic(self) -> bool:
        return self.TYPE in (T.ACTIVEMQ_TOPIC, T.ACTIVEMQ_TEMP_TOPIC)

    @property
    def is_temporary(self) -> bool:
        return self.TYPE in (T.ACTIVEMQ_TEMP_QUEUE, T.ACTIVEMQ_TEMP_TOPIC)


@structure(T.ACTIVEMQ_QUEUE)
class ActiveMQQueue(Destination):
    pass


@structure(T.ACTIVEMQ_TOPIC)
class ActiveMQTopic(Destination):
    pass


@structure(T.ACTIVEMQ_TEMP_QUEUE)
class ActiveMQTempQueue(Destination):
    pass


@structure(T.ACTIVEMQ_TEMP_TOPIC)
class ActiveMQTempTopic(Destination):
    pass
