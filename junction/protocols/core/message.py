"""The message inside SESS_SEND and SESS_RECEIVE_MSG (Artemis ``CoreMessage``).

A message on the wire, right after the 13-byte packet header::

    int32 endOfBodyPosition | body | long messageID | nullable SimpleString address
    | byte 0/1 userID [+ 16 bytes] | byte type | bool durable | long expiration
    | long timestamp | byte priority | TypedProperties

``endOfBodyPosition`` counts from the packet's type byte (the length prefix
excluded), so the body is ``endOfBodyPosition - 13`` bytes.  The large-message
packets (SESS_SEND_LARGE, SESS_RECEIVE_LARGE_MSG) carry the part after the
body alone: :class:`MessageHeaders`.  The body is kept as bytes: what it means
depends on ``type`` (a TextMessage's is a nullable SimpleString, a
MapMessage's a TypedProperties, a BytesMessage's raw bytes), which is the
broker's business, not the codec's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.values import Properties, last_value, read_properties, write_properties

__all__ = [
    "BODY_POSITION_BASE",
    "DEFAULT_PRIORITY",
    "MessageHeaders",
    "MessageType",
    "read_headers",
    "read_message",
    "write_headers",
    "write_message",
]

#: ``endOfBodyPosition`` of an empty body: the packet header's 13 bytes
#: (``CoreMessage.BUFFER_HEADER_SPACE``); the body is the bytes beyond it.
BODY_POSITION_BASE = 13
#: The JMS default priority, what the client sends unless told otherwise.
DEFAULT_PRIORITY = 4
_USER_ID_SIZE = 16


class MessageType(enum.IntEnum):
    """``Message.type``: how the body is laid out (``Message.DEFAULT_TYPE`` ...)."""

    DEFAULT = 0
    OBJECT = 2
    TEXT = 3
    BYTES = 4
    MAP = 5
    STREAM = 6
    EMBEDDED = 7


@dataclass(frozen=True, slots=True)
class MessageHeaders:
    """What follows a message's body: its id, address, flags and properties.

    ``message_id`` is 0 from a client (the server assigns one); ``user_id`` is
    the 16 bytes of a JMS message id's UUID, or None; ``type`` is the raw
    signed byte (:class:`MessageType` for the known ones).
    """

    message_id: int = 0
    address: str | None = None
    user_id: bytes | None = None
    type: int = MessageType.DEFAULT
    durable: bool = False
    expiration: int = 0
    timestamp: int = 0
    priority: int = DEFAULT_PRIORITY
    properties: Properties = None

    def property(self, name: str, default=None):
        """The value of property ``name`` (its last occurrence, as Artemis keeps)."""
        return last_value(self.properties, name, default)


def read_headers(r: Reader) -> MessageHeaders:
    """``CoreMessage.decodeHeadersAndProperties``."""
    message_id = r.read_long()
    address = r.read_nullable_simple_string()
    # Artemis reads the 16 bytes only after exactly 1 (DataConstants.NOT_NULL).
    user_id = r.read_raw(_USER_ID_SIZE, "userID") if r.read_byte() == 1 else None
    return MessageHeaders(
        message_id,
        address,
        user_id,
        r.read_byte(),
        r.read_bool(),
        r.read_long(),
        r.read_long(),
        r.read_byte(),
        read_properties(r),
    )


def write_headers(w: Writer, h: MessageHeaders) -> None:
    """``CoreMessage.encodeHeadersAndProperties``."""
    w.write_long(h.message_id)
    w.write_nullable_simple_string(h.address)
    if h.user_id is None:
        w.buf.append(0)
    else:
        if len(h.user_id) != _USER_ID_SIZE:
            raise ValueError(f"a message userID is {_USER_ID_SIZE} bytes, not {len(h.user_id)}")
        w.buf.append(1)
        w.write_raw(h.user_id)
    w.write_byte(h.type)
    w.write_bool(h.durable)
    w.write_long(h.expiration)
    w.write_long(h.timestamp)
    w.write_byte(h.priority)
    write_properties(w, h.properties)


def read_message(r: Reader) -> tuple[bytes, MessageHeaders]:
    """``int32 endOfBodyPosition``, the body, the headers: ``(body, headers)``."""
    position = r.read_int()
    if position < BODY_POSITION_BASE:
        r.pos -= 4
        raise r.error(f"message endOfBodyPosition {position} is below {BODY_POSITION_BASE}")
    body = r.read_raw(position - BODY_POSITION_BASE, "message body")
    return body, read_headers(r)


def write_message(w: Writer, body: bytes, headers: MessageHeaders) -> None:
    """Write what :func:`read_message` reads."""
    w.write_int(BODY_POSITION_BASE + len(body))
    w.write_raw(body)
    write_headers(w, headers)
