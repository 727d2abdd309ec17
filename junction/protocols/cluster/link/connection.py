"""One end of one cluster link: the frame codec and :class:`LinkConnection`, bytes in, events out.

A frame is ``u32 length, u8 type, payload``.  Control frames carry JSON
(:mod:`.fields`); MESSAGE, ACK, NACK, PING and PONG have binary payloads.
:func:`encode_frame` checks an event and encodes it whatever the state;
``_DECODERS`` reads a payload per frame type.  :class:`LinkConnection` cuts
the stream into frames, checks each against the tables of :mod:`.states`
before reading it, and moves along them.

The codec and the connection share this module because they share its
tables on the hot path (``_FRAME_OF``, ``_EVENT_OF`` and the frame layouts):
CPython 3.11 compiles ``name.method(...)`` without its method-call shortcut
when ``name`` was imported, so these stay defined where they are used.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from typing import Any

from junction.protocols.cluster.link.constants import (
    _CLOSED,
    _INVALID,
    _MALFORMED,
    _NOT_A_LINK,
    _NOT_ALLOWED,
    _TOO_LARGE,
    _UNEXPECTED,
    _UNKNOWN_FRAME,
    _VERSION,
    MAGIC,
    MAX_ABORT_REASON_CHARS,
    MAX_ACK_SEQS,
    MAX_CONTROL_BYTES,
    MAX_FRAME_BYTES,
    MAX_MESSAGE_HEADER_BYTES,
    PREAMBLE,
    PREAMBLE_BYTES,
    VERSION,
)
from junction.protocols.cluster.link.events import (
    Ack,
    Binding,
    BindingAdded,
    BindingRemoved,
    Bindings,
    Change,
    ChangeResult,
    Consumers,
    Event,
    FrameType,
    Goodbye,
    Hello,
    MessageFrame,
    Nack,
    Ping,
    Pong,
    Record,
    Refused,
    Topology,
    Welcome,
)
from junction.protocols.cluster.link.fields import (
    _FIELDS,
    _TEXT,
    _check_event,
    _dump,
    _Invalid,
    _is_name,
    _jsonable,
    _load_object,
    _Optional,
    _Record,
    _remote_malformed,
    _shown,
)
from junction.protocols.cluster.link.states import (
    INITIAL_STATES,
    RECEIVE_TRANSITIONS,
    SEND_TRANSITIONS,
    LinkState,
    Role,
)
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

__all__ = ["EVENT_TYPES", "LinkConnection", "encode_frame"]

_HEADER = struct.Struct(">IB")  # frame: length, type
_LENGTH = struct.Struct(">I")
_FRAME_HEADER_BYTES = _HEADER.size
_MESSAGE_FIXED = struct.Struct(">QI")  # seq, routing header length
_SEQ = struct.Struct(">Q")

_FRAME_OF: dict[type, FrameType] = {
    Hello: FrameType.HELLO,
    Welcome: FrameType.WELCOME,
    Refused: FrameType.REFUSED,
    Bindings: FrameType.BINDINGS,
    BindingAdded: FrameType.BINDING_ADDED,
    BindingRemoved: FrameType.BINDING_REMOVED,
    Consumers: FrameType.CONSUMERS,
    Topology: FrameType.TOPOLOGY,
    MessageFrame: FrameType.MESSAGE,
    Ack: FrameType.ACK,
    Nack: FrameType.NACK,
    Ping: FrameType.PING,
    Pong: FrameType.PONG,
    Goodbye: FrameType.GOODBYE,
    Change: FrameType.CHANGE,
    ChangeResult: FrameType.CHANGE_RESULT,
    Record: FrameType.RECORD,
}
_EVENT_OF: dict[int, type] = {int(t): cls for cls, t in _FRAME_OF.items()}
#: Every event class, in frame type order.
EVENT_TYPES: tuple[type, ...] = tuple(_EVENT_OF[t] for t in FrameType)

_ROUTE = _FIELDS[MessageFrame][1][1]
_DUPLICATE_ID = "dup"
_CREATE = "create"


# -- frames --------------------------------------------------------------------------


def _encode_payload(event: Any) -> bytes | list[bytes]:
    cls = type(event)
    if cls is MessageFrame:
        dup = event.duplicate_id
        fields = {
            "route": [list(pair) for pair in event.route],
            _DUPLICATE_ID: None if dup is None else base64.b64encode(dup).decode("ascii"),
        }
        if event.create is not None:
            fields[_CREATE] = _jsonable(event.create)
        header = _dump(fields)
        if len(header) > MAX_MESSAGE_HEADER_BYTES:
            raise LocalProtocolError(
                f"MessageFrame event: routing header of {len(header)} bytes exceeds "
                f"MAX_MESSAGE_HEADER_BYTES {MAX_MESSAGE_HEADER_BYTES}",
                code=_TOO_LARGE,
            )
        return [_MESSAGE_FIXED.pack(event.seq, len(header)), header, event.body]
    if cls is Ack:
        if len(event.seqs) > MAX_ACK_SEQS:
            raise LocalProtocolError(
                f"Ack event: {len(event.seqs)} sequence numbers exceed MAX_ACK_SEQS "
                f"{MAX_ACK_SEQS}; send several Acks",
                code=_TOO_LARGE,
            )
        return struct.pack(f">I{len(event.seqs)}Q", len(event.seqs), *event.seqs)
    if cls is Nack:
        return _SEQ.pack(event.seq) + event.reason.encode("utf-8")
    if cls is Ping or cls is Pong:
        return b""
    return _dump(_jsonable(event))


def encode_frame(event: Event) -> bytes:
    """One frame carrying ``event``, whatever the state (no preamble).

    Raises LocalProtocolError (code ``invalid-event`` or ``frame-too-large``)
    when the event's fields do not hold what the protocol allows.  Adapters use
    :meth:`LinkConnection.send`, which also enforces the state tables.
    """
    cls = type(event)
    frame_type = _FRAME_OF.get(cls)
    if frame_type is None:
        raise LocalProtocolError(f"{_shown(event)} is not a cluster link event", code=_INVALID)
    _check_event(event)
    payload = _encode_payload(event)
    parts = payload if isinstance(payload, list) else [payload]
    length = 1 + sum(len(part) for part in parts)
    limit = _limit(frame_type)
    if length > limit:
        raise LocalProtocolError(
            f"{cls.__name__} event: frame of {length} bytes exceeds the {frame_type.name} "
            f"limit of {limit}",
            code=_TOO_LARGE,
        )
    return b"".join([_HEADER.pack(length, frame_type), *parts])


def _limit(frame_type: int) -> int:
    return MAX_FRAME_BYTES if frame_type == FrameType.MESSAGE else MAX_CONTROL_BYTES


def _take(buf: bytearray, start: int, end: int) -> bytes:
    """``buf[start:end]`` as bytes, copied once."""
    with memoryview(buf) as view:
        return bytes(view[start:end])


def _decode_json(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Any:
    name = frame_type.name
    obj = _load_object(name, _take(buf, start, end))
    try:
        return _Record(_EVENT_OF[frame_type]).from_json(obj, "")
    except _Invalid as exc:
        raise _remote_malformed(name, exc) from None


def _fast_route(value: Any) -> tuple[tuple[str, str], ...] | None:
    """A well-formed route as tuples, quickly (the hot path), else None."""
    if type(value) is not list:
        return None
    for pair in value:
        if type(pair) is not list or len(pair) != 2:
            return None
        if not (_is_name(pair[0]) and _is_name(pair[1])):
            return None
    return tuple(map(tuple, value))


def _decode_message(frame_type: FrameType, buf: bytearray, start: int, end: int) -> MessageFrame:
    fixed = _MESSAGE_FIXED.size
    if end - start < fixed:
        raise RemoteProtocolError(
            f"MESSAGE frame: payload of {end - start} bytes is shorter than its "
            f"{fixed}-byte fixed part",
            code=_MALFORMED,
        )
    seq, header_length = _MESSAGE_FIXED.unpack_from(buf, start)
    if header_length > MAX_MESSAGE_HEADER_BYTES:
        raise RemoteProtocolError(
            f"MESSAGE frame: routing header of {header_length} bytes exceeds "
            f"MAX_MESSAGE_HEADER_BYTES {MAX_MESSAGE_HEADER_BYTES}",
            code=_TOO_LARGE,
        )
    body_start = start + fixed + header_length
    if body_start > end:
        raise RemoteProtocolError(
            f"MESSAGE frame: routing header of {header_length} bytes overruns the "
            f"{end - start}-byte payload",
            code=_MALFORMED,
        )
    header = _load_object("MESSAGE", _take(buf, start + fixed, body_start), "routing header")
    try:
        if "route" not in header:
            raise _Invalid("route", "is missing")
        if _DUPLICATE_ID not in header:
            raise _Invalid(_DUPLICATE_ID, "is missing")
        route = _fast_route(header["route"])
        if route is None:  # something is wrong: let the generic check say what
            route = _ROUTE.from_json(header["route"], "route")
        dup = _Optional(_TEXT).from_json(header[_DUPLICATE_ID], _DUPLICATE_ID)
        if dup is not None:
            try:
                dup = base64.b64decode(dup, validate=True)
            except (binascii.Error, ValueError):
                raise _Invalid(_DUPLICATE_ID, "must be base64 or null") from None
        create = header.get(_CREATE)
        if create is not None:
            create = _Record(Binding).from_json(create, _CREATE)
    except _Invalid as exc:
        raise _remote_malformed("MESSAGE", exc) from None
    return MessageFrame(seq, route, dup, _take(buf, body_start, end), create)


def _decode_ack(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Ack:
    size = end - start
    count = _LENGTH.unpack_from(buf, start)[0] if size >= 4 else -1
    if count < 0 or size != 4 + 8 * count:
        raise RemoteProtocolError(
            f"ACK frame: payload of {size} bytes is not a count and that many u64 "
            "sequence numbers",
            code=_MALFORMED,
        )
    return Ack(struct.unpack_from(f">{count}Q", buf, start + 4))


def _decode_nack(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Nack:
    if end - start < 8:
        raise RemoteProtocolError(
            f"NACK frame: payload of {end - start} bytes is shorter than its sequence number",
            code=_MALFORMED,
        )
    try:
        reason = _take(buf, start + 8, end).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"NACK frame: reason is not valid UTF-8 (byte {exc.start})", code=_MALFORMED
        ) from None
    return Nack(_SEQ.unpack_from(buf, start)[0], reason)


def _decode_empty(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Ping | Pong:
    if end != start:
        raise RemoteProtocolError(
            f"{frame_type.name} frame: payload must be empty, not {end - start} bytes",
            code=_MALFORMED,
        )
    return _EVENT_OF[frame_type]()


_DECODERS: dict[FrameType, Callable[[FrameType, bytearray, int, int], Any]] = {
    t: _decode_json for t in FrameType
} | {
    FrameType.MESSAGE: _decode_message,
    FrameType.ACK: _decode_ack,
    FrameType.NACK: _decode_nack,
    FrameType.PING: _decode_empty,
    FrameType.PONG: _decode_empty,
}


# -- the connection ------------------------------------------------------------------


class LinkConnection:
    """One end of one cluster link, as a sans-IO state machine.

    ``role`` is :attr:`Role.CLIENT` (the bridge that connects) or
    :attr:`Role.SERVER` (the acceptor's side); the strings ``"CLIENT"`` and
    ``"SERVER"`` work too.
    """

    __slots__ = ("_role", "_state", "_buffer", "_error", "_peer_version")

    def __init__(self, role: Role | str):
        self._role = Role(role)
        self._state = INITIAL_STATES[self._role]
        self._buffer = bytearray()
        self._error: RemoteProtocolError | None = None
        self._peer_version: tuple[int, int] | None = None

    @property
    def role(self) -> Role:
        """Which end of the link this is."""
        return self._role

    @property
    def state(self) -> LinkState:
        """The combined state (see :data:`SEND_TRANSITIONS` / :data:`RECEIVE_TRANSITIONS`)."""
        return self._state

    @property
    def closed(self) -> bool:
        """True once a Refused or Goodbye went either way, or after :meth:`abort`."""
        return self._state is LinkState.CLOSED

    @property
    def error(self) -> RemoteProtocolError | None:
        """The error that broke the connection, if any."""
        return self._error

    @property
    def peer_version(self) -> tuple[int, int] | None:
        """A server's view of the client's (major, minor), once its preamble arrived."""
        return self._peer_version

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete preamble or frame."""
        return len(self._buffer)

    # -- sending ------------------------------------------------------------------

    def send(self, event: Event) -> bytes:
        """The bytes that carry ``event`` (the preamble first with a client's Hello).

        Raises LocalProtocolError when this role may not send it in this state,
        when the connection is closed or broken (then only Refused / Goodbye,
        if the tables allow them), or when the event is invalid; the state is
        unchanged then.
        """
        cls = type(event)
        if cls not in _FRAME_OF:
            raise LocalProtocolError(f"{_shown(event)} is not a cluster link event", code=_INVALID)
        state = self._state
        if state is LinkState.CLOSED:
            raise LocalProtocolError(
                f"cannot send {cls.__name__}: the connection is closed", code=_CLOSED
            )
        allowed = SEND_TRANSITIONS[self._role].get(state, {})
        if cls not in allowed:
            raise LocalProtocolError(
                f"a {self._role.value} may not send {cls.__name__} in state {state.value}",
                code=_NOT_ALLOWED,
            )
        if self._error is not None and cls not in (Refused, Goodbye):
            raise LocalProtocolError(
                f"cannot send {cls.__name__}: the connection is broken ({self._error}); "
                "only Refused or Goodbye may be sent",
                code=_NOT_ALLOWED,
            )
        data = encode_frame(event)
        if state is LinkState.IDLE:
            data = PREAMBLE + data
        self._state = allowed[cls]
        if self._state is LinkState.CLOSED:
            self._buffer = bytearray()
        return data

    def abort(self, error: Exception) -> bytes:
        """Close after ``error``: the bytes of the closing frame this state allows, or b"".

        A server before OPEN sends ``Refused`` (code ``"version"`` for a version
        error, else ``"protocol"``); in OPEN, and for a client awaiting WELCOME,
        it is ``Goodbye``.  The reason is the error's text, cut to
        :data:`MAX_ABORT_REASON_CHARS`.  The connection is CLOSED afterwards.
        """
        if self._state is LinkState.CLOSED:
            return b""
        allowed = SEND_TRANSITIONS[self._role].get(self._state, {})
        reason = str(error)[:MAX_ABORT_REASON_CHARS]
        if Refused in allowed:
            code = "version" if getattr(error, "code", None) == _VERSION else "protocol"
            data = encode_frame(Refused(code, reason))
        elif Goodbye in allowed:
            data = encode_frame(Goodbye(reason))
        else:
            data = b""
        self._state = LinkState.CLOSED
        self._buffer = bytearray()
        return data

    # -- receiving ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer (any slice of the stream); return the events completed.

        On a closed connection the bytes are ignored and the answer is ``[]``.
        Raises RemoteProtocolError when the peer broke the protocol; its
        ``events`` attribute holds the events this call completed before the
        offending bytes.  Later calls raise the same error, ``events`` empty.
        """
        if self._state is LinkState.CLOSED:
            return []
        error = self._error
        if error is not None:
            error.events = []  # type: ignore[attr-defined]
            raise error
        self._buffer += data
        events: list[Event] = []
        try:
            self._parse(events)
        except RemoteProtocolError as exc:
            exc.events = events  # type: ignore[attr-defined]
            self._error = exc
            self._buffer = bytearray()
            raise
        if self._state is LinkState.CLOSED:
            self._buffer = bytearray()
        return events

    def _parse(self, events: list[Event]) -> None:
        buf = self._buffer
        pos = 0
        try:
            if self._state is LinkState.AWAITING_PREAMBLE:
                if not self._read_preamble(buf):
                    return
                pos = PREAMBLE_BYTES
            size = len(buf)
            while self._state is not LinkState.CLOSED and size - pos >= 4:
                length = _LENGTH.unpack_from(buf, pos)[0]
                if length > MAX_FRAME_BYTES:
                    raise RemoteProtocolError(
                        f"frame length {length} exceeds MAX_FRAME_BYTES {MAX_FRAME_BYTES}",
                        code=_TOO_LARGE,
                    )
                if length == 0:
                    raise RemoteProtocolError(
                        "frame length 0 leaves no room for the type byte", code=_MALFORMED
                    )
                if size - pos < _FRAME_HEADER_BYTES:
                    return
                frame_type = self._frame_type(buf[pos + 4], length)
                end = pos + 4 + length
                if end > size:
                    return
                event = _DECODERS[frame_type](frame_type, buf, pos + _FRAME_HEADER_BYTES, end)
                pos = end
                self._state = RECEIVE_TRANSITIONS[self._role][self._state][type(event)]
                events.append(event)
        finally:
            if pos:
                del buf[:pos]

    def _frame_type(self, type_byte: int, length: int) -> FrameType:
        """The frame type of a header, once it is known to be welcome here and small enough."""
        cls = _EVENT_OF.get(type_byte)
        if cls is None:
            raise RemoteProtocolError(f"unknown frame type {type_byte}", code=_UNKNOWN_FRAME)
        frame_type = _FRAME_OF[cls]
        if cls not in RECEIVE_TRANSITIONS[self._role].get(self._state, {}):
            sender = "server" if self._role is Role.CLIENT else "client"
            raise RemoteProtocolError(
                f"{frame_type.name} frame from the {sender} is not allowed in state "
                f"{self._state.value}",
                code=_UNEXPECTED,
            )
        limit = _limit(frame_type)
        if length > limit:
            raise RemoteProtocolError(
                f"{frame_type.name} frame length {length} exceeds its limit {limit}",
                code=_TOO_LARGE,
            )
        return frame_type

    def _read_preamble(self, buf: bytearray) -> bool:
        """Check what has arrived of the preamble; True once all of it has (state moves on)."""
        seen = bytes(buf[:PREAMBLE_BYTES])
        magic = seen[: len(MAGIC)]
        if magic != MAGIC[: len(magic)]:
            raise RemoteProtocolError(
                f"not a cluster link: it starts with {_shown(seen)}, not {MAGIC!r}",
                code=_NOT_A_LINK,
            )
        if len(seen) > len(MAGIC) and seen[len(MAGIC)] != VERSION[0]:
            raise RemoteProtocolError(
                f"cluster link major version {seen[len(MAGIC)]} is not supported "
                f"(this node speaks {VERSION[0]}.{VERSION[1]})",
                code=_VERSION,
            )
        if len(seen) < PREAMBLE_BYTES:
            return False
        self._peer_version = (seen[4], seen[5])
        self._state = LinkState.AWAITING_HELLO
        return True
