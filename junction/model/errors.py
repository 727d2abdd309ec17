"""Errors the broker core reports to protocol sessions.

Each carries Artemis's error type name (``ActiveMQExceptionType``) in ``kind``
so a protocol adapter can map it to its own wire error, and a message that says
what the client asked for and why it was refused.
"""

from __future__ import annotations


class BrokerError(Exception):
    kind = "INTERNAL_ERROR"


class AddressFullError(BrokerError):
    """An address at its ``max-size-bytes``/``max-size-messages`` refused a message (FAIL).
    ``address`` names it, for adapters that answer with their own text (CORE: AMQ229102)."""

    kind = "ADDRESS_FULL"

    def __init__(self, message: str, address: str | None = None):
        super().__init__(message)
        self.address = address


class NonExistentQueueError(BrokerError):
    kind = "QUEUE_DOES_NOT_EXIST"


class NonExistentAddressError(BrokerError):
    kind = "ADDRESS_DOES_NOT_EXIST"


class QueueExistsError(BrokerError):
    kind = "QUEUE_EXISTS"


class MaxConsumersReachedError(BrokerError):
    kind = "MAX_CONSUMERS_REACHED"


class InvalidRoutingTypeError(BrokerError):
    kind = "INVALID_ROUTING_TYPE"


class InvalidFilterError(BrokerError):
    kind = "INVALID_FILTER_EXPRESSION"


class StorageFailedError(BrokerError):
    """The journal can no longer make records durable; durable sends are refused."""

    kind = "IO_ERROR"


class TransactionError(BrokerError):
    kind = "TRANSACTION_ROLLED_BACK"


class ClusterConfigurationUnavailableError(BrokerError):
    """A change to the cluster's configuration (an administrator's destination, a durable
    subscription) while the master broker that records such changes is unreachable.

    Sending and receiving are unaffected (seed 003's master broker rule)."""
