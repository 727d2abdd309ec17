"""Sans-IO CORE codec: bytes in, packets out; packets in, bytes out.

No sockets, no clock, no Twisted (DESIGN.md principle 1).  The adapter feeds
whatever arrived to :meth:`CoreCodec.receive_data` and hands the returned
events (:class:`Handshake`, then packets from :mod:`.packets`) to the
connection; it writes what :meth:`CoreCodec.send` returns.

The stream (core.md section 1)::

    "ARTEMIS"                          7 raw bytes, client to server, first
    packet = int32 length              bytes after this field (type + channel + body)
           | byte type                 signed: PacketType
           | long channelID            0 connection, 1 session creation, 10+ sessions
           | body                      the packet's fields (.packets)

The handshake is optional, as Artemis's ``CoreProtocolManager.handshake``
makes it: a server codec takes the seven bytes ``ARTEMIS`` if the stream
starts with them (and reports :class:`Handshake`), else reads packets from the
first byte.  A client codec reads packets only; a client writes
:data:`HANDSHAKE` itself before its first packet.

Every packet is decoded whole, version-independently: each newer variant of
a packet appends fields, and the codec tells them apart by what remains
(see :mod:`.versions`).  A body must be used up exactly: trailing bytes are a
:class:`~.errors.MalformedPacket` (Artemis ignores them; no Artemis writer
produces them).

Limits (:class:`CoreLimits`) are checked while bytes arrive: a length prefix
over ``max_packet_size`` is refused as soon as its four bytes are in, so the
bytes held for an incomplete packet never exceed ``max_packet_size + 4``,
and where an error is detected never depends on how the stream was cut into
reads.

Errors: the peer's mistake is a :class:`~.errors.CoreProtocolError` (a
``RemoteProtocolError``) carrying the CORE exception code to answer with and
the offending packet's channel; packets completed before it ride on it as
``events``.  The codec is then dead (it raises the same error on any input)
but :meth:`CoreCodec.send` still works, for the EXCEPTION and DISCONNECT the
connection answers with.  Our own mistakes in :meth:`CoreCodec.send` (a
value out of its field's range, a field of the wrong type) are
``LocalProtocolError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.errors import (
    CoreProtocolError,
    MalformedPacket,
    PacketTooLarge,
    UnknownPacket,
)
from junction.protocols.core.packet_types import type_name
from junction.protocols.core.packets import PACKETS, Packet
from junction.protocols.errors import LocalProtocolError
from junction.protocols.framing import FrameBuffer

__all__ = [
    "HANDSHAKE",
    "HEADER_SIZE",
    "CoreCodec",
    "CoreLimits",
    "Event",
    "Handshake",
    "decode_packet",
    "encode_packet",
]

_MiB = 1024 * 1024

#: What a CORE client writes first (``ActiveMQClientProtocolManager``'s handshake).
HANDSHAKE = b"ARTEMIS"
#: Length prefix, type and channel id (``PacketImpl.PACKET_HEADERS_SIZE``).
HEADER_SIZE = 13
#: Bytes the length prefix counts at the least: the type and the channel id.
_MIN_LENGTH = HEADER_SIZE - 4

_HEADER = struct.Struct(">ibq")
_TYPE_CHANNEL = struct.Struct(">bq")
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class CoreLimits:
    """Named limits on what a CORE peer may send.

    ``max_packet_size``
        Largest value of a packet's length prefix (its type, channel id and
        body), in bytes.  Default 10 MiB: Artemis's own frame decoder takes
        up to 2 GiB, but a message that is not sent as a large message must
        fit one record of its journal, whose default ``journal-file-size`` is
        10 MiB, so no message Artemis could store is refused.  The real
        client cuts larger messages into chunks of ``minLargeMessageSize``
        (100 KiB).  Also bounds the bytes held for one incomplete packet.
    ``max_channels``
        Most sessions (channels 10 and up) one connection may have open.
        Default 1000.  Artemis sets no limit; a JMS connection opens one per
        JMS session.  Only the connection knows which channels are open, so
        it enforces this (:class:`~.errors.TooManyChannels`, answered with
        SESSION_CREATION_REJECTED).
    """

    max_packet_size: int = 10 * _MiB
    max_channels: int = 1000

    def __post_init__(self) -> None:
        for name in ("max_packet_size", "max_channels"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"CoreLimits.{name} must be a positive int, not {value!r}")
        if self.max_packet_size < _MIN_LENGTH:
            raise ValueError(f"CoreLimits.max_packet_size must be at least {_MIN_LENGTH}")


@dataclass(frozen=True, slots=True)
class Handshake:
    """The client's opening ``ARTEMIS`` bytes were read (a server codec only)."""

    magic: bytes = HANDSHAKE


#: What :meth:`CoreCodec.receive_data` returns a list of.
Event = Handshake | Packet


def _decode(data, start: int, end: int) -> Packet:
    """The packet in ``data[start:end]`` (from its type byte on: the length prefix excluded)."""
    packet_type, channel_id = _TYPE_CHANNEL.unpack_from(data, start)
    cls = PACKETS.get(packet_type)
    if cls is None:
        raise UnknownPacket(f"packet {type_name(packet_type)} on channel {channel_id} is not supported",
                            channel_id)
    r = Reader(data, start + _MIN_LENGTH, end, channel_id)
    try:
        packet = cls.decode(r, channel_id)
    except UnicodeDecodeError as exc:
        raise MalformedPacket(f"{type_name(packet_type)}: a string is not valid: {exc.reason}",
                              channel_id) from None
    if r.pos != end:
        raise MalformedPacket(
            f"{type_name(packet_type)} on channel {channel_id} has {end - r.pos} bytes after its last field",
            channel_id,
        )
    return packet


def decode_packet(data: bytes) -> Packet:
    """One whole packet, length prefix included (for tools and tests; raises as the codec does)."""
    if len(data) < HEADER_SIZE or _LENGTH.unpack_from(data)[0] != len(data) - 4:
        raise MalformedPacket(f"{len(data)} bytes are not one packet")
    return _decode(data, 4, len(data))


def encode_packet(packet: Packet) -> bytes:
    """The wire bytes of ``packet``, header included (raises ``LocalProtocolError`` for bad values)."""
    w = Writer(bytearray(HEADER_SIZE))
    try:
        packet.encode_body(w)
        _HEADER.pack_into(w.buf, 0, len(w.buf) - 4, packet.TYPE, packet.channel_id)
    except (struct.error, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise LocalProtocolError(f"cannot encode {packet!r}: {exc}") from None
    return bytes(w.buf)


class CoreCodec:
    """One CORE connection's framing, as a sans-IO state machine.

    ``limits`` bounds what the peer may send (default :class:`CoreLimits()`);
    ``server`` says which side we are (a server reads the optional handshake).
    """

    __slots__ = ("_limits", "_server", "_handshake", "_frames")

    def __init__(self, limits: CoreLimits | None = None, server: bool = True):
        self._limits = limits if limits is not None else CoreLimits()
        self._server = bool(server)
        # True while a server has not yet seen whether the stream opens with ARTEMIS.
        self._handshake = self._server
        self._frames = FrameBuffer()

    @property
    def limits(self) -> CoreLimits:
        """The limits this codec enforces."""
        return self._limits

    @property
    def server(self) -> bool:
        """True when this codec is the server side of the connection."""
        return self._server

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete packet (at most ``max_packet_size + 4``)."""
        return self._frames.buffered

    @property
    def error(self) -> CoreProtocolError | None:
        """The error that killed the codec, if any."""
        return self._frames.error

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer; return the events they complete, in order.

        ``data`` may be any slice of the stream, down to one byte.  Raises
        :class:`~.errors.CoreProtocolError` when the peer broke the protocol or
        a limit; its ``events`` hold the packets this call completed before
        the offending bytes (Artemis handles packets one by one, so they are
        acted on before the connection answers the error).  From then on every
        call raises that same error, with ``events`` empty.
        """
        return self._frames.feed(data, self._parse, CoreProtocolError)

    def _parse(self, buf, events: list[Event]) -> int:
        """Append the events completed in ``buf``; return how many bytes they took."""
        n = len(buf)
        pos = 0
        if self._handshake:
            if n == 0:
                return 0
            size = min(n, len(HANDSHAKE))
            if buf[:size] == HANDSHAKE[:size]:
                if size < len(HANDSHAKE):
                    return 0  # it may still be the handshake: wait for all seven bytes
                events.append(Handshake())
                pos = len(HANDSHAKE)
            self._handshake = False
        max_length = self._limits.max_packet_size
        append = events.append
        while n - pos >= 4:
            length = _LENGTH.unpack_from(buf, pos)[0]
            if length > max_length:
                raise PacketTooLarge(f"packet of {length} bytes exceeds max-packet-size {max_length}")
            if length < _MIN_LENGTH:
                raise MalformedPacket(f"packet length {length} is shorter than its {_MIN_LENGTH}-byte header")
            end = pos + 4 + length
            if end > n:
                break
            append(_decode(buf, pos + 4, end))
            pos = end
        return pos

    def send(self, packet: Packet) -> bytes:
        """The wire bytes of ``packet`` (see :func:`encode_packet`)."""
        return encode_packet(packet)

    def handshake(self) -> bytes:
        """The bytes a client writes first (:data:`HANDSHAKE`)."""
        return HANDSHAKE
