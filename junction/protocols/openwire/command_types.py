"""OpenWire's type bytes (``CommandTypes``, version 12): commands and data structures.

Every marshalled object -- a top-level command or a structure nested in one --
starts with one of these bytes.  :func:`type_name` names a byte for error
messages, known or not.
"""

from __future__ import annotations

import enum

__all__ = ["CommandType", "type_name"]


class CommandType(enum.IntEnum):
    """The type byte of every OpenWire command and data structure (openwire.md section 3)."""

    NULL = 0
    WIREFORMAT_INFO = 1
    BROKER_INFO = 2
    CONNECTION_INFO = 3
    SESSION_INFO = 4
    CONSUMER_INFO = 5
    PRODUCER_INFO = 6
    TRANSACTION_INFO = 7
    DESTINATION_INFO = 8
    REMOVE_SUBSCRIPTION_INFO = 9
    KEEP_ALIVE_INFO = 10
    SHUTDOWN_INFO = 11
    REMOVE_INFO = 12
    CONTROL_COMMAND = 14
    FLUSH_COMMAND = 15
    CONNECTION_ERROR = 16
    CONSUMER_CONTROL = 17
    CONNECTION_CONTROL = 18
    PRODUCER_ACK = 19
    MESSAGE_PULL = 20
    MESSAGE_DISPATCH = 21
    MESSAGE_ACK = 22
    ACTIVEMQ_MESSAGE = 23
    ACTIVEMQ_BYTES_MESSAGE = 24
    ACTIVEMQ_MAP_MESSAGE = 25
    ACTIVEMQ_OBJECT_MESSAGE = 26
    ACTIVEMQ_STREAM_MESSAGE = 27
    ACTIVEMQ_TEXT_MESSAGE = 28
    ACTIVEMQ_BLOB_MESSAGE = 29
    RESPONSE = 30
    EXCEPTION_RESPONSE = 31
    DATA_RESPONSE = 32
    DATA_ARRAY_RESPONSE = 33
    INTEGER_RESPONSE = 34
    DISCOVERY_EVENT = 40
    JOURNAL_ACK = 50
    JOURNAL_REMOVE = 52
    JOURNAL_TRACE = 53
    JOURNAL_TRANSACTION = 54
    DURABLE_SUBSCRIPTION_INFO = 55
    PARTIAL_COMMAND = 60
    PARTIAL_LAST_COMMAND = 61
    REPLAY = 65
    MESSAGE_DISPATCH_NOTIFICATION = 90
    NETWORK_BRIDGE_FILTER = 91
    BROKER_SUBSCRIPTION_INFO = 92
    ACTIVEMQ_QUEUE = 100
    ACTIVEMQ_TOPIC = 101
    ACTIVEMQ_TEMP_QUEUE = 102
    ACTIVEMQ_TEMP_TOPIC = 103
    MESSAGE_ID = 110
    LOCAL_TRANSACTION_ID = 111
    XA_TRANSACTION_ID = 112
    CONNECTION_ID = 120
    SESSION_ID = 121
    CONSUMER_ID = 122
    PRODUCER_ID = 123
    BROKER_ID = 124


def type_name(type_byte: int) -> str:
    """``NAME(n)`` for a known type byte, ``unknown type n`` otherwise."""
    try:
        return f"{CommandType(type_byte).name}({type_byte})"
    except ValueError:
        return f"unknown type {type_byte}"
