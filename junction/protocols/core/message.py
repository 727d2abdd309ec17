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
import struct
from codecs import utf_16_le_decode as _utf16le
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


#: message ID, the address's present-flag.
_ID_FLAG = struct.Struct(">qB")
_ID_FLAG_SIZE = struct.Struct(">qBi")
_INT32 = struct.Struct(">i")
#: type, durable, expiration, timestamp, priority: the fixed fields after the userID.
_FIXED = struct.Struct(">bBqqb")


def read_headers(r: Reader) -> MessageHeaders:
    """``CoreMessage.decodeHeadersAndProperties``.

    The fixed-width fields are read with one ``struct`` call each run of them
    and one bounds check (:func:`_read_headers_fast`); where that finds the
    bytes short or a size out of range, the headers are read again field by
    field below, which raises the error at the offset Artemis's reader would.
    """
    start = r.pos
    headers = _read_headers_fast(r)
    if headers is not None:
        return headers
    r.pos = start
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


def _read_headers_fast(r: Reader) -> MessageHeaders | None:
    """:func:`read_headers` for well-formed bytes; None (``r.pos`` then undefined) for the slow path."""
    data = r.data
    pos = r.pos
    end = r.end
    if end - pos < 10:
        return None
    message_id, present = _ID_FLAG.unpack_from(data, pos)
    pos += 9
    if present:
        if end - pos < 4:
            return None
        size = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if size < 0 or size & 1 or size >= end - pos:
            return None
        address = _utf16le(data[pos:pos + size], "surrogatepass", True)[0]
        pos += size
    else:
        address = None
    # Artemis reads the 16 bytes only after exactly 1 (DataConstants.NOT_NULL).
    if data[pos] == 1:
        if end - pos < 1 + _USER_ID_SIZE + _FIXED.size:
            return None
        user_id = bytes(data[pos + 1:pos + 1 + _USER_ID_SIZE])
        pos += 1 + _USER_ID_SIZE
    else:
        if end - pos < 1 + _FIXED.size:
            return None
        user_id = None
        pos += 1
    kind, durable, expiration, timestamp, priority = _FIXED.unpack_from(data, pos)
    r.pos = pos + _FIXED.size
    properties = read_properties(r)
    return MessageHeaders(message_id, address, user_id, kind, durable != 0, expiration, timestamp, priority,
                          properties)


def write_headers(w: Writer, h: MessageHeaders) -> None:
    """``CoreMessage.encodeHeadersAndProperties``."""
    buf = w.buf
    if h.address is None:
        buf += _ID_FLAG.pack(h.message_id, 0)
    else:
        address = h.address.encode("utf-16-le", "surrogatepass")
        buf += _ID_FLAG_SIZE.pack(h.message_id, 1, len(address))
        buf += address
    if h.user_id is None:
        buf.append(0)
    else:
        if len(h.user_id) != _USER_ID_SIZE:
            raise ValueError(f"a message userID is {_USER_ID_SIZE} bytes, not {len(h.user_id)}")
        buf.append(1)
        buf += h.user_id
    durable = h.durable
    if durable is not True and durable is not False:
        raise TypeError(f"a boolean field cannot hold {durable!r}")
    buf += _FIXED.pack(h.type, 0xFF if durable else 0, h.expiration, h.timestamp, h.priority)
    write_properties(w, h.properties)


def read_message(r: Reader) -> tuple[bytes, MessageHeaders]:
    """``int32 endOfBodyPosition``, the body, the headers: ``(body, headers)``."""
    data = r.data
    pos = r.pos
    if r.end - pos >= 4:
        size = _INT32.unpack_from(data, pos)[0] - BODY_POSITION_BASE
        if 0 <= size <= r.end - pos - 4:
            r.pos = pos + 4 + size
            return bytes(data[pos + 4:pos + 4 + size]), read_headers(r)
    position = r.read_int()
    if position < BODY_POSITION_BASE:
        r.pos -= 4
        raise r.error(f"message endOfBodyPosition {position} is below {BODY_POSITION_BASE}")
    body = r.read_raw(position - BODY_POSITION_BASE, "message body")
    return body, read_headers(r)


def write_message(w: Writer, body: bytes, headers: MessageHeaders) -> None:
    """Write what :func:`read_message` reads."""
    buf = w.buf
    buf += _INT32.pack(BODY_POSITION_BASE + len(body))
    buf += body
    write_headers(w, headers)
