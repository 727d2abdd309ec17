"""Sans-IO OpenWire codec: bytes in, commands out; commands in, bytes out.

No sockets, no clock, no Twisted.  The adapter feeds what arrived to
:meth:`OpenWireCodec.receive_data` and writes what :meth:`OpenWireCodec.send`
returns; it writes :meth:`OpenWireCodec.initiate` (our WireFormatInfo) first,
at once, as both OpenWire ends do.

The stream (openwire.md sections 1, 2, 4)::

    frame = int32 size           bytes after this field
          | byte type            CommandType
          | [BooleanStream]      tight encoding only
          | body                 the command's fields (.commands, .messages)

Until the peer's WireFormatInfo is read both directions are loose; the
codec then runs :func:`~.wireformat.negotiate` on it and our offer, reports
:class:`Negotiated`, and reads and writes everything after it in the settled
encoding (tight or loose, with or without the marshalling cache, with or
without stack traces) -- including the frames that arrived in the same read.
Only the first WireFormatInfo negotiates; a later one is an ordinary command
(which the connection refuses).  ``SizePrefixDisabled`` is never offered,
so frames always carry their size.

Limits (:class:`OpenWireLimits`) are checked while bytes arrive: a size over
``max_frame_size`` is refused as soon as its four bytes are in, so the bytes
held for an incomplete frame never exceed ``max_frame_size + 4``; a body is
read within its frame, so nothing decoded is larger than the frame; objects
nest at most ``max_depth`` deep.  Our offer carries ``max_frame_size`` as its
``MaxFrameSize``, so the real client refuses itself to send more.

Errors: the peer's mistake is an :class:`~.errors.OpenWireProtocolError`;
the commands decoded before it ride on it as ``events``.  The codec is then
dead (it raises the same error again on any input) but :meth:`send` still
works, for the ExceptionResponse or ConnectionError the adapter answers
with.  Our own mistakes in :meth:`send` are ``LocalProtocolError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from junction.protocols.errors import LocalProtocolError
from junction.protocols.framing import FrameBuffer
from junction.protocols.openwire import commands, messages, structures  # noqa: F401 - they register every type
from junction.protocols.openwire.command_types import CommandType, type_name
from junction.protocols.openwire.encoding import Decoder, Encoder
from junction.protocols.openwire.errors import (
    FrameTooLarge,
    MalformedCommand,
    NegotiationFailed,
    OpenWireProtocolError,
    UnknownType,
)
from junction.protocols.openwire.fast import fast_reader, fast_writer
from junction.protocols.openwire.marshal import (
    DEFAULT_MAX_DEPTH,
    STRUCTURES,
    Structure,
    WireContext,
    read_structure,
    write_structure,
)
from junction.protocols.openwire.wireformat import (
    SERVER_WIRE_FORMAT,
    WireFormat,
    WireFormatInfo,
    negotiate,
)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "Negotiated",
    "OpenWireCodec",
    "OpenWireLimits",
    "decode_frame",
    "encode_frame",
]

#: The frame limit of ActiveMQ Classic's shipped OpenWire connector
#: (``wireFormat.maxFrameSize=104857600`` in its ``activemq.xml``).  The
#: client's own default, and Artemis's, is Java's ``Long.MAX_VALUE``: no
#: limit, which a server holding a frame in memory cannot have.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

_SIZE = struct.Struct(">I")
_WFI = CommandType.WIREFORMAT_INFO


@dataclass(frozen=True, slots=True)
class OpenWireLimits:
    """Named limits on what an OpenWire peer may send.

    ``max_frame_size``
        Largest size prefix (the type byte and the body), in bytes; also the
        ``MaxFrameSize`` we offer.  Default :data:`DEFAULT_MAX_FRAME_SIZE`.
    ``max_depth``
        Most objects nested in one another (a message in a dispatch, its id,
        the id's producer id: 3), and most causes chained to one exception.
        Default 32.
    """

    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_depth: int = DEFAULT_MAX_DEPTH

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_depth"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"OpenWireLimits.{name} must be a positive int, not {value!r}")
        if self.max_frame_size > 0x7FFFFFFF:
            raise ValueError("OpenWireLimits.max_frame_size must fit a Java int")


@dataclass(frozen=True, slots=True)
class Negotiated:
    """The peer's first WireFormatInfo was read: ``settled`` applies from the next frame on."""

    info: WireFormatInfo
    peer: WireFormat
    settled: WireFormat


def _context(fmt: WireFormat | None, limits: OpenWireLimits) -> WireContext:
    if fmt is None:  # before the negotiation: loose, no cache, no stack traces
        return WireContext(max_depth=limits.max_depth)
    return WireContext(fmt.tight_encoding, fmt.stack_trace, fmt.cache_slots, limits.max_depth)


#: (type byte, tight, cache on) -> the straight-line reader / writer of that command in that
#: encoding (None: it has none), made on first use (see :mod:`.fast`)
_FAST_READERS: dict = {}
_FAST_WRITERS: dict = {}


def _fast(table: dict, make, key: tuple):
    try:
        return table[key]
    except KeyError:
        cls = STRUCTURES.get(key[0])
        fn = table[key] = make(cls, key[1], key[2]) if cls is not None else None
        return fn


def _decode(buf, start: int, end: int, ctx: WireContext) -> Structure:
    """The command in ``buf[start:end]`` (its type byte on; the size prefix excluded)."""
    cache = ctx.cache_slots > 0
    key = (buf[start], ctx.tight, cache)
    read = _FAST_READERS.get(key) or _fast(_FAST_READERS, fast_reader, key)
    if read is not None and read.depth <= ctx.max_depth:
        if cache:
            ctx.begin_read()
        try:
            return read(buf, start + 1, end, ctx)
        except Exception:  # noqa: BLE001 - the field-by-field read below decides
            if cache:
                ctx.forget_kept()
    return _decode_fields(buf, start, end, ctx)


def _decode_fields(buf, start: int, end: int, ctx: WireContext) -> Structure:
    """:func:`_decode` field by field (the reference the fast path falls back to)."""
    t = buf[start]
    cls = STRUCTURES.get(t)
    if cls is None:
        if t == CommandType.NULL:
            raise MalformedCommand("a NULL command (type 0) carries nothing to act on")
        raise UnknownType(t, "frame")
    d = Decoder(buf, start + 1, end, ctx.tight, ctx)
    try:
        if ctx.tight:
            d.start_tight()
        command = read_structure(d, cls)
    except OpenWireProtocolError as exc:
        exc.args = (f"{type_name(t)}: {exc.args[0]}",)
        raise
    if d.pos != end:
        raise MalformedCommand(f"{type_name(t)} has {end - d.pos} bytes after its last field")
    return command


def _encode(command: Structure, ctx: WireContext) -> bytes:
    if not isinstance(command, Structure) or STRUCTURES.get(command.TYPE) is not type(command):
        raise LocalProtocolError(f"{command!r} is not an OpenWire command")
    t = command.TYPE
    cache = ctx.cache_slots > 0
    key = (t, ctx.tight, cache)
    write = _FAST_WRITERS.get(key) or _fast(_FAST_WRITERS, fast_writer, key)
    if write is not None:
        if cache:
            ctx.begin()
        try:
            body = write(command, ctx)
        except Exception:  # noqa: BLE001 - the field-by-field write below decides
            if cache:
                ctx.rollback()
        else:
            return _SIZE.pack(len(body) + 1) + bytes((t,)) + body
    return _encode_fields(command, ctx)


def _encode_fields(command: Structure, ctx: WireContext) -> bytes:
    """:func:`_encode` field by field (the reference the fast path falls back to)."""
    e = Encoder(ctx.tight, ctx)
    ctx.begin()
    try:
        write_structure(e, command)
        body = e.body()
    except (struct.error, TypeError, ValueError, OverflowError, AttributeError, LocalProtocolError) as exc:
        ctx.rollback()
        raise LocalProtocolError(f"cannot encode {type(command).__name__}: {exc}") from None
    return _SIZE.pack(len(body) + 1) + bytes((command.TYPE,)) + body


#: The context of loose frames without a cache: it holds no state (nothing is cached, nothing
#: journaled), so every :func:`encode_frame`/:func:`decode_frame` without a format shares it.
_LOOSE = _context(None, OpenWireLimits())


def encode_frame(command: Structure, fmt: WireFormat | None = None) -> bytes:
    """One frame holding ``command``, in ``fmt``'s encoding (default: loose, no cache)."""
    return _encode(command, _LOOSE if fmt is None else _context(fmt, OpenWireLimits()))


def decode_frame(data: bytes, fmt: WireFormat | None = None) -> Structure:
    """The command of one whole frame, size prefix included (for tools and tests)."""
    if len(data) < 5 or _SIZE.unpack_from(data)[0] != len(data) - 4:
        raise MalformedCommand(f"{len(data)} bytes are not one frame")
    return _decode(data, 4, len(data), _LOOSE if fmt is None else _context(fmt, OpenWireLimits()))


class OpenWireCodec:
    """One OpenWire connection's framing and encodings, as a sans-IO state machine.

    ``offer`` is the wire format we propose (default
    :data:`~.wireformat.SERVER_WIRE_FORMAT`; its ``max_frame_size`` becomes
    the limit's); ``limits`` bounds what the peer may send.  The
    negotiation is the same on both ends, so a client codec is the same class.
    """

    __slots__ = ("_limits", "_offer", "_settled", "_ctx", "_frames")

    def __init__(self, offer: WireFormat | None = None, limits: OpenWireLimits | None = None):
        self._limits = limits if limits is not None else OpenWireLimits()
        offer = offer if offer is not None else SERVER_WIRE_FORMAT
        if offer.size_prefix_disabled:
            raise ValueError("SizePrefixDisabled is not supported: frames always carry their size")
        self._offer = replace(offer, max_frame_size=self._limits.max_frame_size)
        self._settled: WireFormat | None = None
        self._ctx = _context(None, self._limits)
        self._frames = FrameBuffer()

    @property
    def limits(self) -> OpenWireLimits:
        return self._limits

    @property
    def offer(self) -> WireFormat:
        """What we offer (what :meth:`initiate` writes)."""
        return self._offer

    @property
    def wire_format(self) -> WireFormat | None:
        """The settled wire format, None until the peer's WireFormatInfo was read."""
        return self._settled

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (at most ``max_frame_size + 4``)."""
        return self._frames.buffered

    @property
    def error(self) -> OpenWireProtocolError | None:
        return self._frames.error

    def initiate(self) -> bytes:
        """Our WireFormatInfo frame: the first bytes either end writes (always loose)."""
        return _encode(self._offer.info(), _context(None, self._limits))

    def receive_data(self, data: bytes) -> list:
        """Feed bytes from the peer; return the commands (and :class:`Negotiated`) they complete.

        ``data`` may be any slice of the stream, down to one byte.  Raises
        :class:`~.errors.OpenWireProtocolError` when the peer broke the
        protocol or a limit; its ``events`` hold what this call completed
        before the offending frame.  From then on every call raises that
        same error, with ``events`` empty.
        """
        return self._frames.feed(data, self._parse, OpenWireProtocolError)

    def _parse(self, buf, events: list) -> int:
        n = len(buf)
        pos = 0
        limit = self._limits.max_frame_size
        while n - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size > limit:
                raise FrameTooLarge(f"Frame size of {size} bytes larger than max allowed {limit} bytes")
            if size == 0:
                raise MalformedCommand("a frame of 0 bytes has no type byte")
            end = pos + 4 + size
            if end > n:
                break
            command = _decode(buf, pos + 4, end, self._ctx)
            if self._settled is None and command.TYPE == _WFI:
                events.append(self._negotiate(command))
            else:
                events.append(command)
            pos = end
        return pos

    def _negotiate(self, info: WireFormatInfo) -> Negotiated:
        peer = WireFormat.from_info(info)
        settled = negotiate(self._offer, peer)
        if settled.size_prefix_disabled:  # pragma: no cover - our offer never asks for it
            raise NegotiationFailed("SizePrefixDisabled cannot be settled")
        self._settled = settled
        self._ctx = _context(settled, self._limits)
        return Negotiated(info, peer, settled)

    def send(self, command: Structure) -> bytes:
        """The frame of ``command`` in the settled encoding.

        Before the negotiation only a WireFormatInfo may go out (the real
        client blocks everything else until it has ours; so does this codec).
        """
        if self._settled is None and getattr(command, "TYPE", None) != _WFI:
            raise LocalProtocolError(f"{type(command).__name__} cannot go out before the wire format is settled")
        frame = _encode(command, self._ctx)
        if self._settled is not None and len(frame) - 4 > self._settled.max_frame_size:
            self._ctx.rollback()
            raise LocalProtocolError(
                f"a {type(command).__name__} of {len(frame) - 4} bytes exceeds the negotiated "
                f"MaxFrameSize {self._settled.max_frame_size}")
        return frame
