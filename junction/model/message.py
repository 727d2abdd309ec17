"""The protocol-neutral message every broker core stores and routes.

Every protocol session converts its wire message to a :class:`Message` on the
way in and back on the way out, so a message produced over one protocol can be
consumed over any other.  The model follows Artemis's ``ICoreMessage``: a small
set of typed headers, a map of typed properties (the JMS/Artemis property names
such as ``_AMQ_GROUP_ID`` and ``_AMQ_DUPL_ID`` live there), and an opaque body
with a ``body_type`` that says how to read it.

Protocol sections that have no neutral meaning (AMQP message annotations,
footer, an ``amqp-value`` body's exact encoding) travel in :attr:`Message.native`
keyed by protocol, so AMQP-to-AMQP stays lossless without the core knowing AMQP.

Property values are ``None``, ``bool``, ``int``, ``float``, ``str`` or
``bytes``.  Where a protocol needs the exact width of a number (JMS byte,
short, int, long; float vs double) it wraps it in :class:`Typed`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "RoutingType",
    "BodyType",
    "Typed",
    "Message",
    "GROUP_ID",
    "GROUP_ID_JMS",
    "GROUP_SEQUENCE",
    "DUPLICATE_ID",
    "encode_message",
    "encode_message_into",
    "decode_message",
    "MessageCodecError",
]

#: Artemis's group id property; STOMP and OpenWire clients set ``JMSXGroupID``.
GROUP_ID = "_AMQ_GROUP_ID"
GROUP_ID_JMS = "JMSXGroupID"
GROUP_SEQUENCE = "JMSXGroupSeq"
#: Artemis's duplicate-detection id property.
DUPLICATE_ID = "_AMQ_DUPL_ID"
#: Where a dead-lettered or expired message came from (Artemis names).
ORIGINAL_ADDRESS = "_AMQ_ORIG_ADDRESS"
ORIGINAL_QUEUE = "_AMQ_ORIG_QUEUE"
ACTUAL_EXPIRY = "_AMQ_ACTUAL_EXPIRY"


class RoutingType(IntEnum):
    """Artemis routing types: point-to-point (ANYCAST) or publish-subscribe."""

    MULTICAST = 0
    ANYCAST = 1

    @classmethod
    def parse(cls, text: str) -> "RoutingType":
        return cls[text.strip().upper()]


class BodyType(IntEnum):
    """How to read :attr:`Message.body` (JMS message types plus raw bytes)."""

    BYTES = 0  # opaque bytes (STOMP without content-type text, JMS BytesMessage)
    TEXT = 1  # UTF-8 text (JMS TextMessage, AMQP amqp-value string)
    MAP = 2  # protocol-encoded map; see native
    STREAM = 3
    OBJECT = 4
    NONE = 5  # no body (JMS Message)


@dataclass(frozen=True, slots=True)
class Typed:
    """A property value that remembers its wire width.

    ``kind`` is one of ``byte``, ``short``, ``int``, ``long``, ``float``,
    ``double``, ``char``.  Comparison and filters use :attr:`value`.
    """

    kind: str
    value: int | float | str


def plain(value):
    """The plain Python value of a property (unwraps :class:`Typed`)."""
    return value.value if isinstance(value, Typed) else value


@dataclass(slots=True, eq=False)
class Message:
    """A message as the broker core stores and routes it.

    ``message_id`` is assigned by the broker node when the message is first
    routed (0 before that) and is unique within the node's journal.
    ``expiration`` and ``timestamp`` are epoch milliseconds; an ``expiration``
    of 0 means never.
    """

    address: str
    body: bytes = b""
    body_type: BodyType = BodyType.BYTES
    durable: bool = False
    priority: int = 4
    expiration: int = 0
    timestamp: int = 0
    routing_type: RoutingType | None = None
    properties: dict = field(default_factory=dict)
    user_id: str | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    message_id: int = 0
    #: Protocol sections with no neutral meaning, keyed by protocol name.
    native: dict = field(default_factory=dict)
    #: :meth:`encoded_size`, computed once the message is routed
    _size: int = field(default=-1, repr=False, compare=False)

    # -- derived -------------------------------------------------------------
    @property
    def group_id(self) -> str | None:
        value = self.properties.get(GROUP_ID)
        if value is None:
            value = self.properties.get(GROUP_ID_JMS)
        return None if value is None else str(plain(value))

    @property
    def duplicate_id(self) -> bytes | None:
        value = self.properties.get(DUPLICATE_ID)
        if value is None:
            return None
        value = plain(value)
        return value if isinstance(value, bytes) else str(value).encode("utf-8")

    def is_expired(self, now_ms: int) -> bool:
        """Expired at ``now_ms`` (epoch milliseconds by the node's clock)."""
        return bool(self.expiration) and now_ms >= self.expiration

    def encoded_size(self) -> int:
        """An estimate of memory and journal cost, used for address limits.

        Remembered after the first call: the broker calls it only once a
        message is complete (routing), and copies start afresh.
        """
        if self._size >= 0:
            return self._size
        size = 64 + len(self.body) + len(self.address)
        for key, value in self.properties.items():
            size += 16 + len(key)
            if value.__class__ is str:
                size += len(value)
                continue
            value = plain(value)
            if isinstance(value, (str, bytes)):
                size += len(value)
        self._size = size
        return size

    def copy(self, **changes) -> "Message":
        """A shallow copy with fresh property and native maps."""
        clone = Message(
            address=self.address,
            body=self.body,
            body_type=self.body_type,
            durable=self.durable,
            priority=self.priority,
            expiration=self.expiration,
            timestamp=self.timestamp,
            routing_type=self.routing_type,
            properties=dict(self.properties),
            user_id=self.user_id,
            correlation_id=self.correlation_id,
            reply_to=self.reply_to,
            message_id=self.message_id,
            native=dict(self.native),
        )
        for key, value in changes.items():
            setattr(clone, key, value)
        return clone


# -- binary encoding, used by the journal and the paging store ---------------
#
# Layout (all integers big-endian):
#   u8 version(=1) | u64 message_id | u8 flags | u8 priority | u8 body_type
#   | i64 expiration | i64 timestamp | str address | nstr user_id
#   | nstr correlation_id | nstr reply_to | u32 nprops | props | u32 nnative
#   | (str key, bytes value)* | bytes body
# flags: bit0 durable, bit1 routing type present, bit2 routing type ANYCAST
# str: u32 length + UTF-8; nstr: u8 present + str; bytes: u32 length + raw
# property: str name | u8 tag | value

MESSAGE_FORMAT_VERSION = 1

_HEADER = struct.Struct(">BQBBBqq")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

_TAG_NONE, _TAG_FALSE, _TAG_TRUE, _TAG_INT, _TAG_FLOAT, _TAG_STR, _TAG_BYTES, _TAG_TYPED, _TAG_BIGINT = range(9)


class MessageCodecError(ValueError):
    """A stored message could not be decoded (corrupt or from a newer version)."""


def _put_str(out: list, text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    out.append(_U32.pack(len(raw)))
    out.append(raw)


def _put_nstr(out: list, text: str | None) -> None:
    if text is None:
        out.append(b"\x00")
    else:
        out.append(b"\x01")
        _put_str(out, text)


def _put_value(out: list, value) -> None:
    if value is None:
        out.append(bytes((_TAG_NONE,)))
    elif value is True:
        out.append(bytes((_TAG_TRUE,)))
    elif value is False:
        out.append(bytes((_TAG_FALSE,)))
    elif isinstance(value, int):
        if -(1 << 63) <= value < (1 << 63):
            out.append(bytes((_TAG_INT,)))
            out.append(_I64.pack(value))
        else:
            out.append(bytes((_TAG_BIGINT,)))
            _put_str(out, str(value))
    elif isinstance(value, float):
        out.append(bytes((_TAG_FLOAT,)))
        out.append(_F64.pack(value))
    elif isinstance(value, str):
        out.append(bytes((_TAG_STR,)))
        _put_str(out, value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out.append(bytes((_TAG_BYTES,)))
        out.append(_U32.pack(len(raw)))
        out.append(raw)
    elif isinstance(value, Typed):
        out.append(bytes((_TAG_TYPED,)))
        _put_str(out, value.kind)
        _put_value(out, value.value)
    else:
        raise TypeError(f"unsupported property value type {type(value).__name__}")


def encode_message(message: Message) -> bytes:
    """Encode a message for the journal or a page file."""
    out: list = []
    encode_message_into(out, message)
    return b"".join(out)


_ANYCAST = RoutingType.ANYCAST  # (an Enum.MEMBER lookup is a descriptor call in 3.11)
#: The fixed header followed by the address's length prefix.
_HEADER_ADDRESS = struct.Struct(">BQBBBqqI")
_STR_TAG = bytes((_TAG_STR,))
_NO_STRINGS = b"\x00\x00\x00"  # user id, correlation id and reply-to all absent


def encode_message_into(out: list, message: Message) -> None:
    """Append the pieces of :func:`encode_message` to ``out`` (one join for a
    whole journal record)."""
    flags = 1 if message.durable else 0
    routing_type = message.routing_type
    if routing_type is not None:
        flags |= 2
        if routing_type == _ANYCAST:
            flags |= 4
    address = message.address.encode("utf-8", "surrogatepass")
    out.append(
        _HEADER_ADDRESS.pack(
            MESSAGE_FORMAT_VERSION,
            message.message_id,
            flags,
            message.priority & 0xFF,
            int(message.body_type),
            message.expiration,
            message.timestamp,
            len(address),
        )
    )
    out.append(address)
    user_id = message.user_id
    correlation_id = message.correlation_id
    reply_to = message.reply_to
    if user_id is None and correlation_id is None and reply_to is None:
        out.append(_NO_STRINGS)
    else:
        _put_nstr(out, user_id)
        _put_nstr(out, correlation_id)
        _put_nstr(out, reply_to)
    properties = message.properties
    pack = _U32.pack
    out.append(pack(len(properties)))
    for key, value in properties.items():
        raw = key.encode("utf-8", "surrogatepass")
        if value.__class__ is str:
            text = value.encode("utf-8", "surrogatepass")
            out += (pack(len(raw)), raw, _STR_TAG, pack(len(text)), text)
        else:
            out.append(pack(len(raw)))
            out.append(raw)
            _put_value(out, value)
    native = message.native
    out.append(pack(len(native)))
    for key, value in native.items():
        _put_str(out, key)
        out.append(pack(len(value)))
        out.append(bytes(value))
    body = message.body
    out.append(pack(len(body)))
    out.append(bytes(body))


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise MessageCodecError("truncated message record")
        chunk = self.data[self.pos : end].tobytes()
        self.pos = end
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def str(self) -> str:
        return self.take(self.u32()).decode("utf-8", "surrogatepass")

    def nstr(self) -> str | None:
        return self.str() if self.u8() else None

    def value(self):
        tag = self.u8()
        if tag == _TAG_NONE:
            return None
        if tag == _TAG_TRUE:
            return True
        if tag == _TAG_FALSE:
            return False
        if tag == _TAG_INT:
            return _I64.unpack(self.take(8))[0]
        if tag == _TAG_BIGINT:
            return int(self.str())
        if tag == _TAG_FLOAT:
            return _F64.unpack(self.take(8))[0]
        if tag == _TAG_STR:
            return self.str()
        if tag == _TAG_BYTES:
            return self.take(self.u32())
        if tag == _TAG_TYPED:
            kind = self.str()
            return Typed(kind, self.value())
        raise MessageCodecError(f"unknown property tag {tag}")


def decode_message(data: bytes) -> Message:
    """Decode what :func:`encode_message` produced."""
    reader = _Reader(data)
    try:
        version, message_id, flags, priority, body_type, expiration, timestamp = _HEADER.unpack(
            reader.take(_HEADER.size)
        )
    except struct.error as exc:  # pragma: no cover - take() raises first
        raise MessageCodecError(str(exc)) from exc
    if version != MESSAGE_FORMAT_VERSION:
        raise MessageCodecError(f"message format version {version} is not supported")
    address = reader.str()
    user_id = reader.nstr()
    correlation_id = reader.nstr()
    reply_to = reader.nstr()
    properties = {}
    for _ in range(reader.u32()):
        key = reader.str()
        properties[key] = reader.value()
    native = {}
    for _ in range(reader.u32()):
        key = reader.str()
        native[key] = reader.take(reader.u32())
    body = reader.take(reader.u32())
    routing_type = None
    if flags & 2:
        routing_type = RoutingType.ANYCAST if flags & 4 else RoutingType.MULTICAST
    try:
        body_kind = BodyType(body_type)
    except ValueError as exc:
        raise MessageCodecError(f"unknown body type {body_type}") from exc
    return Message(
        address=address,
        body=body,
        body_type=body_kind,
        durable=bool(flags & 1),
        priority=priority,
        expiration=expiration,
        timestamp=timestamp,
        routing_type=routing_type,
        properties=properties,
        user_id=user_id,
        correlation_id=correlation_id,
        reply_to=reply_to,
        message_id=message_id,
        native=native,
    )
