"""CORE's exception codes and the errors the CORE codec raises.

:class:`ExceptionType` is Artemis's ``ActiveMQExceptionType``: the ``int32
code`` of an EXCEPTION packet (type 20), which the real client turns back into
its typed exception (``ActiveMQUnsupportedPacketException`` for 1, and so on).

Every error the codec raises for what the peer sent is a
:class:`CoreProtocolError` (a :class:`~junction.protocols.errors.RemoteProtocolError`)
that carries the code the connection answers with, so the adapter writes
``ExceptionMessage(code, str(error))`` and closes that one connection:

=========================  =====================================  ==========================
error                      what the peer did                      answered with
=========================  =====================================  ==========================
:class:`UnknownPacket`     a packet type the codec does not read  UNSUPPORTED_PACKET (1)
:class:`MalformedPacket`   a body that is truncated, too long,    INTERNAL_ERROR (0)
                           holds a value no writer produces, or
                           a length prefix below the header's 9
:class:`PacketTooLarge`    a length prefix over ``max-packet-     INTERNAL_ERROR (0)
                           size``
:class:`TooManyChannels`   a session over ``max-channels``        SESSION_CREATION_REJECTED
                           (raised by the connection)             (112)
=========================  =====================================  ==========================

Why INTERNAL_ERROR for a malformed packet: Artemis has no code for it.  Its
decoder's exception closes the connection without an answer; where a packet
handler meets an exception that is not an ``ActiveMQException`` it answers
``ActiveMQInternalErrorException`` (code 0), so that is the code a real client
already knows for "the server could not handle this packet".
"""

from __future__ import annotations

import enum

from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "CoreProtocolError",
    "ExceptionType",
    "MalformedPacket",
    "PacketTooLarge",
    "TooManyChannels",
    "UnknownPacket",
]


class ExceptionType(enum.IntEnum):
    """Artemis's ``ActiveMQExceptionType``: the code of an EXCEPTION packet."""

    INTERNAL_ERROR = 0
    UNSUPPORTED_PACKET = 1
    NOT_CONNECTED = 2
    CONNECTION_TIMEDOUT = 3
    DISCONNECTED = 4
    UNBLOCKED = 5
    IO_ERROR = 6
    QUEUE_DOES_NOT_EXIST = 100
    QUEUE_EXISTS = 101
    OBJECT_CLOSED = 102
    INVALID_FILTER_EXPRESSION = 103
    ILLEGAL_STATE = 104
    SECURITY_EXCEPTION = 105
    ADDRESS_DOES_NOT_EXIST = 106
    ADDRESS_EXISTS = 107
    INCOMPATIBLE_CLIENT_SERVER_VERSIONS = 108
    LARGE_MESSAGE_ERROR_BODY = 110
    TRANSACTION_ROLLED_BACK = 111
    SESSION_CREATION_REJECTED = 112
    DUPLICATE_ID_REJECTED = 113
    DUPLICATE_METADATA = 114
    TRANSACTION_OUTCOME_UNKNOWN = 115
    ALREADY_REPLICATING = 116
    INTERCEPTOR_REJECTED_PACKET = 117
    INVALID_TRANSIENT_QUEUE_USE = 118
    REMOTE_DISCONNECT = 119
    TRANSACTION_TIMEOUT = 120
    NATIVE_ERROR_INTERNAL = 200
    NATIVE_ERROR_INVALID_BUFFER = 201
    NATIVE_ERROR_NOT_ALIGNED = 202
    NATIVE_ERROR_CANT_INITIALIZE_AIO = 203
    NATIVE_ERROR_CANT_RELEASE_AIO = 204
    NATIVE_ERROR_CANT_OPEN_CLOSE_FILE = 205
    NATIVE_ERROR_CANT_ALLOCATE_QUEUE = 206
    NATIVE_ERROR_PREALLOCATE_FILE = 208
    NATIVE_ERROR_ALLOCATE_MEMORY = 209
    ADDRESS_FULL = 210
    LARGE_MESSAGE_INTERRUPTED = 211
    CLUSTER_SECURITY_EXCEPTION = 212
    NOT_IMPLEMENTED_EXCEPTION = 213
    MAX_CONSUMER_LIMIT_EXCEEDED = 214
    UNEXPECTED_ROUTING_TYPE_FOR_ADDRESS = 215
    INVALID_QUEUE_CONFIGURATION = 216
    DELETE_ADDRESS_ERROR = 217
    NULL_REF = 218
    SHUTDOWN_ERROR = 219
    REPLICATION_TIMEOUT_ERROR = 220
    DIVERT_DOES_NOT_EXIST = 221
    ROUTING_EXCEPTION = 222
    TIMEOUT_EXCEPTION = 223
    GENERIC_EXCEPTION = 999


class CoreProtocolError(RemoteProtocolError):
    """The peer broke the CORE protocol; answer with ``exception_type`` and close.

    ``code`` (the base class's) is the type's name, ``exception_type`` the
    :class:`ExceptionType` whose value goes on the wire.  ``channel_id`` is the
    channel of the offending packet when its header was read (the answer goes
    there), else None.  ``events`` (set by the codec) holds what was decoded
    before the offending bytes.
    """

    exception_type: ExceptionType = ExceptionType.INTERNAL_ERROR

    def __init__(self, message: str, channel_id: int | None = None):
        super().__init__(message, self.exception_type.name)
        self.channel_id = channel_id
        self.events: list = []


class UnknownPacket(CoreProtocolError):
    """A packet type the codec does not read (unknown to Artemis, or not implemented here)."""

    exception_type = ExceptionType.UNSUPPORTED_PACKET


class MalformedPacket(CoreProtocolError):
    """A packet that does not parse: a length below its header, a truncated body, trailing
    bytes, a bad string or value."""

    exception_type = ExceptionType.INTERNAL_ERROR


class PacketTooLarge(CoreProtocolError):
    """A length prefix above ``CoreLimits.max_packet_size``, refused before the body is awaited."""

    exception_type = ExceptionType.INTERNAL_ERROR


class TooManyChannels(CoreProtocolError):
    """A session that would open more channels than ``CoreLimits.max_channels``.

    Raised by the connection, not the codec (only the connection knows which
    channels are open); the CREATESESSION is refused, the connection may stay.
    """

    exception_type = ExceptionType.SESSION_CREATION_REJECTED
