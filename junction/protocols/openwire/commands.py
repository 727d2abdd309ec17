"""OpenWire's commands other than the messages (:mod:`.messages`) and WireFormatInfo (:mod:`.wireformat`).

One frozen dataclass per type byte, fields in wire order after BaseCommand's
``command_id`` and ``response_required`` (openwire.md section 5, checked
against ActiveMQ's v12 marshallers: which object fields go through the
marshalling cache and which are plain nested objects is theirs).  Also the
data structures only brokers exchange (network bridges, the journal, the
discovery agent), so that a frame of any type the real marshallers know
decodes: the connection, not the codec, decides what a client may send.
"""

from __future__ import annotations

from junction.protocols.openwire.command_types import CommandType as T
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
from junction.protocols.openwire.structures import (
    DESTINATION_TYPES,
    TRANSACTION_ID_TYPES,
    BrokerId,
    ConnectionId,
    ConsumerId,
    Destination,
    MessageId,
    ProducerId,
    SessionId,
)

__all__ = [
    "BrokerInfo",
    "BrokerSubscriptionInfo",
    "ConnectionControl",
    "ConnectionError",
    "ConnectionInfo",
    "ConsumerControl",
    "ConsumerInfo",
    "ControlCommand",
    "DataArrayResponse",
    "DataResponse",
    "DestinationInfo",
    "DiscoveryEvent",
    "ExceptionResponse",
    "FlushCommand",
    "IntegerResponse",
    "JournalQueueAck",
    "JournalTopicAck",
    "JournalTrace",
    "JournalTransaction",
    "KeepAliveInfo",
    "LastPartialCommand",
    "NetworkBridgeFilter",
    "PartialCommand",
    "ProducerInfo",
    "RemoveInfo",
    "RemoveSubscriptionInfo",
    "ReplayCommand",
    "Response",
    "SessionInfo",
    "ShutdownInfo",
    "SubscriptionInfo",
    "TransactionInfo",
    "TransactionType",
    "DestinationOperation",
    "LAST_DELIVERED_UNKNOWN",
    "LAST_DELIVERED_UNSET",
]

_DEST = DESTINATION_TYPES
_TXID = TRANSACTION_ID_TYPES

#: ``RemoveInfo.last_delivered_sequence_id`` when the client set none / does not know.
LAST_DELIVERED_UNSET = -1
LAST_DELIVERED_UNKNOWN = -2


class TransactionType:
    """``TransactionInfo.type``."""

    BEGIN = 0
    PREPARE = 1
    COMMIT_ONE_PHASE = 2
    COMMIT_TWO_PHASE = 3
    ROLLBACK = 4
    RECOVER = 5
    FORGET = 6
    END = 7


class DestinationOperation:
    """``DestinationInfo.operation_type``."""

    ADD = 0
    REMOVE = 1


@structure(T.BROKER_INFO)
class BrokerInfo(Command):
    broker_id: BrokerId | None = wire(cached(T.BROKER_ID))
    broker_url: str | None = wire(STRING)
    peer_broker_infos: tuple | None = wire(array(T.BROKER_INFO))
    broker_name: str | None = wire(STRING)
    slave_broker: bool = wire(BOOL, False)
    master_broker: bool = wire(BOOL, False)
    fault_tolerant_configuration: bool = wire(BOOL, False)
    duplex_connection: bool = wire(BOOL, False)
    network_connection: bool = wire(BOOL, False)
    connection_id: int = wire(LONG, 0)
    broker_upload_url: str | None = wire(STRING)
    network_properties: str | None = wire(STRING)


@structure(T.CONNECTION_INFO)
class ConnectionInfo(Command):
    connection_id: ConnectionId | None = wire(cached(T.CONNECTION_ID))
    client_id: str | None = wire(STRING)
    password: str | None = wire(STRING)
    user_name: str | None = wire(STRING)
    broker_path: tuple | None = wire(array(T.BROKER_ID))
    broker_master_connector: bool = wire(BOOL, False)
    manageable: bool = wire(BOOL, False)
    client_master: bool = wire(BOOL, True)
    fault_tolerant: bool = wire(BOOL, False)
    failover_reconnect: bool = wire(BOOL, False)
    client_ip: str | None = wire(STRING)

    def __repr__(self) -> str:  # never print the password
        return (f"ConnectionInfo(command_id={self.command_id}, connection_id={self.connection_id!r}, "
                f"client_id={self.client_id!r}, user_name={self.user_name!r}, password=***)")


@structure(T.SESSION_INFO)
class SessionInfo(Command):
    session_id: SessionId | None = wire(cached(T.SESSION_ID))


@structure(T.CONSUMER_INFO)
class ConsumerInfo(Command):
    consumer_id: ConsumerId | None = wire(cached(T.CONSUMER_ID))
    browser: bool = wire(BOOL, False)
    destination: Destination | None = wire(cached(*_DEST))
    prefetch_size: int = wire(INT, 0)
    maximum_pending_message_limit: int = wire(INT, 0)
    dispatch_async: bool = wire(BOOL, False)
    selector: str | None = wire(STRING)
    client_id: str | None = wire(STRING)
    subscription_name: str | None = wire(STRING)
    no_local: bool = wire(BOOL, False)
    exclusive: bool = wire(BOOL, False)
    retroactive: bool = wire(BOOL, False)
    priority: int = wire(BYTE, 0)
    broker_path: tuple | None = wire(array(T.BROKER_ID))
    additional_predicate: Structure | None = wire(nested(T.NETWORK_BRIDGE_FILTER))
    network_subscription: bool = wire(BOOL, False)
    optimized_acknowledge: bool = wire(BOOL, False)
    no_range_acks: bool = wire(BOOL, False)
    network_consumer_path: tuple | None = wire(array(T.CONSUMER_ID))


@structure(T.PRODUCER_INFO)
class ProducerInfo(Command):
    producer_id: ProducerId | None = wire(cached(T.PRODUCER_ID))
    destination: Destination | None = wire(cached(*_DEST))
    broker_path: tuple | None = wire(array(T.BROKER_ID))
    dispatch_async: bool = wire(BOOL, False)
    window_size: int = wire(INT, 0)


@structure(T.TRANSACTION_INFO)
class TransactionInfo(Command):
    connection_id: ConnectionId | None = wire(cached(T.CONNECTION_ID))
    transaction_id: Structure | None = wire(cached(*_TXID))
    type: int = wire(BYTE, 0)


@structure(T.DESTINATION_INFO)
class DestinationInfo(Command):
    connection_id: ConnectionId | None = wire(cached(T.CONNECTION_ID))
    destination: Destination | None = wire(cached(*_DEST))
    operation_type: int = wire(BYTE, 0)
    timeout: int = wire(LONG, 0)
    broker_path: tuple | None = wire(array(T.BROKER_ID))


@structure(T.REMOVE_SUBSCRIPTION_INFO)
class RemoveSubscriptionInfo(Command):
    connection_id: ConnectionId | None = wire(cached(T.CONNECTION_ID))
    subscription_name: str | None = wire(STRING)
    client_id: str | None = wire(STRING)


@structure(T.KEEP_ALIVE_INFO)
class KeepAliveInfo(Command):
    pass


@structure(T.SHUTDOWN_INFO)
class ShutdownInfo(Command):
    pass


@structure(T.REMOVE_INFO)
class RemoveInfo(Command):
    """Removes what ``object_id`` names: a connection, session, consumer or producer."""

    object_id: Structure | None = wire(cached())
    last_delivered_sequence_id: int = wire(LONG, LAST_DELIVERED_UNKNOWN)


@structure(T.CONTROL_COMMAND)
class ControlCommand(Command):
    command: str | None = wire(STRING)


@structure(T.FLUSH_COMMAND)
class FlushCommand(Command):
    pass


@structure(T.CONNECTION_ERROR)
class ConnectionError(Command):  # noqa: A001 - OpenWire's own name
    exception: JavaThrowable | None = wire(THROWABLE)
    connection_id: ConnectionId | None = wire(nested(T.CONNECTION_ID))


@structure(T.CONSUMER_CONTROL)
class ConsumerControl(Command):
    destination: Destination | None = wire(nested(*_DEST))
    close: bool = wire(BOOL, False)
    consumer_id: ConsumerId | None = wire(nested(T.CONSUMER_ID))
    prefetch: int = wire(INT, 0)
    flush: bool = wire(BOOL, False)
    start: bool = wire(BOOL, False)
    stop: bool = wire(BOOL, False)


@structure(T.CONNECTION_CONTROL)
class ConnectionControl(Command):
    close: bool = wire(BOOL, False)
    exit: bool = wire(BOOL, False)
    fault_tolerant: bool = wire(BOOL, False)
    resume: bool = wire(BOOL, False)
    suspend: bool = wire(BOOL, False)
    connected_brokers: str | None = wire(STRING, "")
    reconnect_to: str | None = wire(STRING, "")
    rebalance_connection: bool = wire(BOOL, False)
    token: bytes | None = wire(BYTES)


@structure(T.RESPONSE)
class Response(Command):
    correlation_id: int = wire(INT, 0)


@structure(T.EXCEPTION_RESPONSE)
class ExceptionResponse(Response):
    exception: JavaThrowable | None = wire(THROWABLE)


@structure(T.DATA_RESPONSE)
class DataResponse(Response):
    data: Structure | None = wire(nested())


@structure(T.DATA_ARRAY_RESPONSE)
class DataArrayResponse(Response):
    data: tuple | None = wire(array())


@structure(T.INTEGER_RESPONSE)
class IntegerResponse(Response):
    result: int = wire(INT, 0)


@structure(T.DISCOVERY_EVENT)
class DiscoveryEvent(Structure):
    service_name: str | None = wire(STRING)
    broker_name: str | None = wire(STRING)


@structure(T.JOURNAL_ACK)
class JournalTopicAck(Structure):
    destination: Destination | None = wire(nested(*_DEST))
    message_id: MessageId | None = wire(nested(T.MESSAGE_ID))
    message_sequence_id: int = wire(LONG, 0)
    subscription_name: str | None = wire(STRING)
    client_id: str | None = wire(STRING)
    transaction_id: Structure | None = wire(nested(*_TXID))


@structure(T.JOURNAL_REMOVE)
class JournalQueueAck(Structure):
    destination: Destination | None = wire(nested(*_DEST))
    message_ack: Structure | None = wire(nested(T.MESSAGE_ACK))


@structure(T.JOURNAL_TRACE)
class JournalTrace(Structure):
    message: str | None = wire(STRING)


@structure(T.JOURNAL_TRANSACTION)
class JournalTransaction(Structure):
    transaction_id: Structure | None = wire(nested(*_TXID))
    type: int = wire(BYTE, 0)
    was_prepared: bool = wire(BOOL, False)


@structure(T.DURABLE_SUBSCRIPTION_INFO)
class SubscriptionInfo(Structure):
    client_id: str | None = wire(STRING)
    destination: Destination | None = wire(cached(*_DEST))
    selector: str | None = wire(STRING)
    subscription_name: str | None = wire(STRING)
    subscribed_destination: Destination | None = wire(nested(*_DEST))
    no_local: bool = wire(BOOL, False)


@structure(T.PARTIAL_COMMAND)
class PartialCommand(Structure):
    command_id: int = wire(INT, 0)
    data: bytes | None = wire(BYTES)


@structure(T.PARTIAL_LAST_COMMAND)
class LastPartialCommand(PartialCommand):
    pass


@structure(T.REPLAY)
class ReplayCommand(Command):
    first_nak_number: int = wire(INT, 0)
    last_nak_number: int = wire(INT, 0)


@structure(T.NETWORK_BRIDGE_FILTER)
class NetworkBridgeFilter(Structure):
    network_broker_id: BrokerId | None = wire(cached(T.BROKER_ID))
    message_ttl: int = wire(INT, 0)
    consumer_ttl: int = wire(INT, 0)


@structure(T.BROKER_SUBSCRIPTION_INFO)
class BrokerSubscriptionInfo(Command):
    broker_id: BrokerId | None = wire(nested(T.BROKER_ID))
    broker_name: str | None = wire(STRING)
    subscription_infos: tuple | None = wire(array(T.DURABLE_SUBSCRIPTION_INFO))
