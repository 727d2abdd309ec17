"""Message packets: SESS_SEND and SESS_RECEIVE_MSG, and the large-message ones.

SESS_SEND is the message (:mod:`junction.protocols.core.message`) followed by
the sender's trailer, which grew with the versions: ``bool requiresResponse``
(all), ``long correlationID`` (130+), ``int senderID`` (134+).  Artemis reads
the trailer from the end of the packet by the connection's version; the
message is self-delimiting, so this codec reads it forward and takes the
trailer's form from the 1, 9 or 13 bytes left.  Clients before version 129
lay messages out differently (``SessionSendMessage_1X``); that form is not
read here.

SESS_RECEIVE_MSG is the message followed by ``long consumerID, int
deliveryCount``.

A message above the client's ``minLargeMessageSize`` (100 KiB by default)
travels as SESS_SEND_LARGE (the headers alone) and SESS_SEND_CONTINUATION
chunks; the server delivers one as SESS_RECEIVE_LARGE_MSG and
SESS_RECEIVE_CONTINUATION chunks.
"""

from __future__ import annotations

import struct

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.message import (
    MessageHeaders,
    read_headers,
    read_message,
    write_headers,
    write_message,
)
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.packets.base import BOOL, INT, LONG, Kind, Packet, packet, wire

__all__ = [
    "SessReceiveContinuation",
    "SessReceiveLargeMsg",
    "SessReceiveMsg",
    "SessSend",
    "SessSendContinuation",
    "SessSendLarge",
]

#: SESS_SEND trailer sizes: rr; rr + correlation id; rr + correlation id + sender id.
_SEND_TRAILERS = (1, 9, 13)
#: The longest SESS_SEND trailer: requiresResponse, correlation id, sender id.
_SEND_TRAILER = struct.Struct(">Bqi")
#: SESS_RECEIVE_MSG's trailer: consumer id, delivery count.
_RECEIVE_TRAILER = struct.Struct(">qi")
#: SESS_SEND_CONTINUATION bytes after ``requiresResponse``: none, a correlation id, and a sender id.
_CONTINUATION_TRAILERS = (0, 8, 12)


def _trailer(r: Reader, allowed: tuple[int, ...], what: str) -> int:
    left = r.end - r.pos
    if left not in allowed:
        raise r.error(f"{what} ends with {left} bytes after the message, not one of {allowed}")
    return left


#: ``int32 size`` + bytes.
SIZED_BYTES = Kind(Reader.read_sized_bytes, Writer.write_sized_bytes)
#: The part of a message after its body.
HEADERS = Kind(read_headers, write_headers)


@packet(PacketType.SESS_SEND, "client")
class SessSend(Packet):
    """Send a message.  ``correlation_id``: 130+ clients; ``sender_id`` (the producer): 134+."""

    body: bytes
    headers: MessageHeaders
    requires_response: bool
    correlation_id: int | None = None
    sender_id: int | None = None

    @classmethod
    def decode(cls, r: Reader, channel_id: int) -> Packet:
        body, headers = read_message(r)
        left = _trailer(r, _SEND_TRAILERS, "SESS_SEND")
        if left == 13:  # what 134+ clients send: the trailer's three fields in one read
            requires_response, correlation_id, sender_id = _SEND_TRAILER.unpack_from(r.data, r.pos)
            r.pos += 13
            return cls(body, headers, requires_response != 0, correlation_id, sender_id, channel_id=channel_id)
        requires_response = r.read_bool()
        correlation_id = r.read_long() if left > 1 else None
        sender_id = r.read_int() if left > 9 else None
        return cls(body, headers, requires_response, correlation_id, sender_id, channel_id=channel_id)

    def encode_body(self, w: Writer) -> None:
        write_message(w, self.body, self.headers)
        w.write_bool(self.requires_response)
        if self.correlation_id is not None:
            w.write_long(self.correlation_id)
            if self.sender_id is not None:
                w.write_int(self.sender_id)


@packet(PacketType.SESS_RECEIVE_MSG, "server")
class SessReceiveMsg(Packet):
    """Deliver a message to consumer ``consumer_id`` (its ``delivery_count``-th delivery)."""

    body: bytes
    headers: MessageHeaders
    consumer_id: int
    delivery_count: int

    @classmethod
    def decode(cls, r: Reader, channel_id: int) -> Packet:
        body, headers = read_message(r)
        _trailer(r, (12,), "SESS_RECEIVE_MSG")
        return cls(body, headers, r.read_long(), r.read_int(), channel_id=channel_id)

    def encode_body(self, w: Writer) -> None:
        write_message(w, self.body, self.headers)
        w.buf += _RECEIVE_TRAILER.pack(self.consumer_id, self.delivery_count)


@packet(PacketType.SESS_SEND_LARGE, "client")
class SessSendLarge(Packet):
    """A large message begins: its headers; the body follows in SESS_SEND_CONTINUATION chunks."""

    headers: MessageHeaders = wire(HEADERS)


@packet(PacketType.SESS_SEND_CONTINUATION, "client")
class SessSendContinuation(Packet):
    """A chunk of a large message's body.  The last (``continues`` false) carries the body's size.

    ``correlation_id``: 130+ clients; ``sender_id``: 134+.
    """

    body: bytes
    continues: bool
    message_body_size: int | None
    requires_response: bool
    correlation_id: int | None = None
    sender_id: int | None = None

    @classmethod
    def decode(cls, r: Reader, channel_id: int) -> Packet:
        body = r.read_sized_bytes()
        continues = r.read_bool()
        size = None if continues else r.read_long()
        requires_response = r.read_bool()
        left = _trailer(r, _CONTINUATION_TRAILERS, "SESS_SEND_CONTINUATION")
        correlation_id = r.read_long() if left else None
        sender_id = r.read_int() if left > 8 else None
        return cls(body, continues, size, requires_response, correlation_id, sender_id, channel_id=channel_id)

    def encode_body(self, w: Writer) -> None:
        w.write_sized_bytes(self.body)
        w.write_bool(self.continues)
        if not self.continues:
            w.write_long(self.message_body_size)
        w.write_bool(self.requires_response)
        if self.correlation_id is not None:
            w.write_long(self.correlation_id)
            if self.sender_id is not None:
                w.write_int(self.sender_id)


@packet(PacketType.SESS_RECEIVE_LARGE_MSG, "server")
class SessReceiveLargeMsg(Packet):
    """A large message is delivered: its size and headers; the body follows in continuations."""

    consumer_id: int = wire(LONG)
    delivery_count: int = wire(INT)
    large_message_size: int = wire(LONG)
    headers: MessageHeaders = wire(HEADERS)


@packet(PacketType.SESS_RECEIVE_CONTINUATION, "server")
class SessReceiveContinuation(Packet):
    """A chunk of a large message's body for consumer ``consumer_id``."""

    body: bytes = wire(SIZED_BYTES)
    continues: bool = wire(BOOL)
    consumer_id: int = wire(LONG)
