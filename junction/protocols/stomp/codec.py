"""Sans-IO STOMP 1.0/1.1/1.2 codec: bytes in, events out; events in, bytes out.

No sockets, no clock, no Twisted (DESIGN.md principle 1).  A Twisted protocol
feeds whatever arrived to :meth:`StompCodec.receive_data`, dispatches the
returned :class:`Frame` / :class:`HeartBeat` events to the session, and writes
what :meth:`StompCodec.send` returns.

Wire syntax accepted (all versions)::

    frame     = command EOL *( header EOL ) EOL body NUL *EOL
    command   = ALPHA *( ALPHA / DIGIT / "_" / "-" )
    header    = name ":" value        ; name non-empty, split at the first colon
    EOL       = LF / CR LF            ; CR LF is 1.2 syntax, accepted in every version

Every EOL received where a frame could start is reported as a
:class:`HeartBeat`.  The body is exactly ``content-length`` octets followed by
a NUL when that header is present (first occurrence wins), otherwise
everything up to the first NUL.  Header text must be UTF-8; values are not
trimmed (STOMP 1.1+ forbids it, and a 1.0 peer that pads with spaces meant
them).  A raw colon inside a value is tolerated, as most brokers do.

Escaping: the codec starts in *pre-CONNECT* mode (no escaping); the session
calls :meth:`StompCodec.set_version` once the version is negotiated, and the
per-version rules of :mod:`.frames` apply to every later frame except CONNECT,
STOMP and CONNECTED.

Limits (:class:`StompLimits`, DESIGN.md principle 5) are checked while bytes
arrive, not after a frame is complete: the bytes held for an incomplete frame
never exceed ``max_frame_size``; a ``content-length`` above the limit is
refused as soon as its header block is read; an over-long command or header
line, too many header lines, a NUL or an invalid command are refused as soon
as they are seen.  Where an error is detected therefore never depends on how
the stream was cut into reads.

Errors: the peer's mistake is a :class:`RemoteProtocolError`; frames completed
before it ride on it as ``events``.  The codec is then dead (it re-raises on any
input) but :meth:`StompCodec.send` still works, for the session's ERROR frame.

Performance (this is the broker's hot path): no per-byte Python loops.  A
read's bytes are parsed in place with ``bytes.find``; a frame's header block is
decoded in one call and split into headers by one regular-expression
``findall``; bodies are single slices.  An incomplete frame is held in a
``bytearray`` and re-parsed only once new bytes can complete it (its
``content-length`` has arrived, a NUL has arrived, or a blank line has), and
only the newly arrived bytes are scanned, so a large frame arriving in small
pieces costs linear, not quadratic, time.  ``bench/stomp_codec.py`` measures it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import itemgetter

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.stomp.frames import (
    CLIENT_COMMANDS,
    HEARTBEAT,
    SERVER_COMMANDS,
    STOMP_VERSIONS,
    UNESCAPED_COMMANDS,
    Event,
    Frame,
    _new,
    _set_body,
    _set_command,
    _set_headers,
    unescape_header,
)

__all__ = ["StompCodec", "StompLimits", "encode_plain"]

_MiB = 1024 * 1024
_KiB = 1024


@dataclass(frozen=True, slots=True)
class StompLimits:
    """Named limits on what a peer may send (all sizes in octets).

    ``max_frame_size``
        Largest frame, counted from the first octet of the command line up to,
        not including, the terminating NUL (so: command, headers and body).
        Default 10 MiB.  Also bounds the bytes held for one incomplete frame,
        i.e. the codec's memory per connection.
    ``max_header_count``
        Most header lines in one frame.  Default 1000.
    ``max_header_length``
        Longest single header line (``name:value``, escaped as on the wire,
        without its EOL).  Default 64 KiB.
    ``max_command_length``
        Longest command line, without its EOL.  Default 64 (the longest real
        command, UNSUBSCRIBE, has 11 characters).
    """

    max_frame_size: int = 10 * _MiB
    max_header_count: int = 1000
    max_header_length: int = 64 * _KiB
    max_command_length: int = 64

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_header_count", "max_header_length",
                     "max_command_length"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"StompLimits.{name} must be a positive int, not {value!r}")


_COMMAND = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
_COMMAND_BYTES = re.compile(rb"[A-Za-z][A-Za-z0-9_\-]*")
# One header line, LF name:value, split at the first colon.  Run with findall
# over the header block (command line first): every line yields one match
# unless it has no colon or an empty name, so counting matches validates.
_HEADER = re.compile(r"\n([^:\n]+):([^\n]*)")
# The first content-length header of a block (no escape sequence can spell any
# character of this name, so the raw text is enough).
_CONTENT_LENGTH = re.compile(r"\ncontent-length:([^\n]*)")
# Octets a command may start with.
_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_KNOWN_COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS


@lru_cache(maxsize=8)
def _known_within(max_command_length: int) -> frozenset[str]:
    """The standard commands that fit max-command-length (no checks needed); once per limit."""
    return frozenset(c for c in _KNOWN_COMMANDS if len(c) <= max_command_length)


# Versions whose headers are escaped (frames.py has the tables).
_ESCAPING_VERSIONS = frozenset({"1.1", "1.2"})


def _bad_header_line(command: str, text: str) -> str:
    for line in text.split("\n")[1:]:
        name, sep, _ = line.partition(":")
        if not sep:
            return f"frame {command} header line {_clip(line)} has no colon"
        if not name:
            return f"frame {command} header line {_clip(line)} has an empty name"
    return f"frame {command} has a malformed header line"  # not reached


def _command_too_long(length: int, limit: int) -> str:
    return f"frame command of {length} bytes exceeds max-command-length {limit}"


def _no_nul_message(command: str, max_frame: int) -> str:
    return (
        f"frame {command} has no NUL terminator within max-frame-size {max_frame} bytes"
    )


def _check_line_lengths(buf: bytes, pos: int, hend: int, max_line: int) -> None:
    """Refuse a header line (after the command line) longer than ``max_line``."""
    for raw in buf[pos:hend].split(b"\n")[1:]:
        length = len(raw) - 1 if raw.endswith(b"\r") else len(raw)
        if length > max_line:
            raise RemoteProtocolError(
                f"frame header line of {length} bytes exceeds max-header-length {max_line}"
            )


_first = itemgetter(0)


def _with_content_length(
    headers: tuple[tuple[str, str], ...], length: str
) -> tuple[tuple[str, str], ...]:
    """``headers`` with the first content-length set to ``length`` and repeats dropped."""
    result = []
    seen = False
    for name, value in headers:
        if name == "content-length":
            if seen:
                continue
            seen = True
            value = length
        result.append((name, value))
    return tuple(result)


def _check_trailing_cr(command: str, name: str, value: str, mode: str) -> None:
    if value[-1:] == "\r":
        raise LocalProtocolError(
            f"{command} frame header {name!r} value ends with a CR, which {mode} cannot "
            f"carry (a reader would take it for part of a CR LF)"
        )


def _clip(raw: bytes | bytearray | str, limit: int = 60) -> str:
    if len(raw) > limit:
        return repr(raw[:limit]) + "..."
    return repr(raw)


def encode_plain(command: str, text: str, count: int, body: bytes) -> bytes | None:
    """The wire bytes of a frame whose header lines need nothing, else None.

    The codec's one fast encoder: :meth:`StompCodec.send` and the builders of
    :mod:`.builders` (MESSAGE, RECEIPT) use it.  ``text`` is the ``count``
    header lines joined by LF, unescaped; the caller frames the body (a
    ``content-length`` line where one is due).  When the only colons and LFs
    are the separators, no name is empty and there is no backslash, CR or
    NUL, every version writes the frame as it is; else None: take the
    checked path of :meth:`StompCodec.send`.
    """
    if (
        text.count(":") == count
        and text.count("\n") == count - 1
        and "\\" not in text
        and "\r" not in text
        and "\0" not in text
        and text[0] != ":"
        and "\n:" not in text
    ):
        return b"".join(((command + "\n" + text + "\n\n").encode(), body, b"\0"))
    return None


class StompCodec:
    """One STOMP connection's framing, as a sans-IO state machine.

    ``limits`` bounds what the peer may send (default :class:`StompLimits()`).
    ``server`` says which side we are: a server serialises every MESSAGE with a
    non-empty body with a ``content-length`` header, as Artemis does, so that
    clients never have to guess where a binary body ends.
    """

    __slots__ = (
        "_limits",
        "_known",
        "_server",
        "_version",
        "_escape",
        "_buf",
        "_error",
        "_pending",
        "_hscan",
        "_hlast",
        "_hlines",
        "_crlf",
    )

    def __init__(self, limits: StompLimits | None = None, server: bool = True):
        self._limits = limits if limits is not None else StompLimits()
        self._known = _known_within(self._limits.max_command_length)
        self._server = bool(server)
        self._version: str | None = None
        self._escape = False
        self._buf = bytearray()
        self._error: RemoteProtocolError | None = None
        # A frame whose header block is parsed but whose body is incomplete:
        # (command, headers, body offset, content-length or None, NUL-scan offset),
        # offsets relative to the start of the buffer (= start of that frame).
        self._pending: tuple | None = None
        # Incomplete header block: how far it has been scanned, where its last
        # LF is (-1: none yet) and how many LFs it holds.  Relative offsets.
        self._hscan = 0
        self._hlast = -1
        self._hlines = 0
        # Whether the last header block ended with CR LF: search for that
        # style first (see _parse).
        self._crlf = False

    # -- state ------------------------------------------------------------

    @property
    def limits(self) -> StompLimits:
        """The limits this codec enforces."""
        return self._limits

    @property
    def server(self) -> bool:
        """True when this codec is the server side of the connection."""
        return self._server

    @property
    def version(self) -> str | None:
        """The negotiated version, or None before :meth:`set_version` (pre-CONNECT mode)."""
        return self._version

    @property
    def buffered(self) -> int:
        """Octets held for an incomplete frame (never more than ``max_frame_size``)."""
        return len(self._buf)

    @property
    def error(self) -> RemoteProtocolError | None:
        """The error that killed the codec, if any."""
        return self._error

    def set_version(self, version: str) -> None:
        """Switch header escaping to the negotiated ``version`` ("1.0", "1.1" or "1.2").

        Applies to every frame parsed or serialised afterwards, and to a frame
        whose headers were read before (unescaped) and whose body has not
        arrived yet: its headers are read again (:meth:`reread`); an escape
        the version does not define kills the codec, and the next
        :meth:`receive_data` raises it, as parsing would have.
        """
        if version not in STOMP_VERSIONS:
            raise LocalProtocolError(f"unknown STOMP version {version!r}")
        was_escaping = self._escape
        self._version = version
        self._escape = version in _ESCAPING_VERSIONS
        pending = self._pending
        if pending is not None and self._escape and not was_escaping and self._error is None:
            command, headers, body_start, clen, bscan = pending
            try:
                headers = self.reread(Frame(command, headers)).headers
            except RemoteProtocolError as exc:
                self._error = exc
                self._buf = bytearray()
                self._pending = None
            else:
                self._pending = (command, headers, body_start, clen, bscan)

    def reread(self, frame: Frame) -> Frame:
        """``frame``, parsed before :meth:`set_version`, as it reads under the version set since.

        A client may pipeline frames behind its CONNECT; those that arrive in
        the same read are parsed before the session has negotiated the
        version, so their headers are not unescaped.  The session passes each
        of them through here once it has set the version, and the same bytes
        mean the same frames however they were cut into reads.  Raises
        :class:`RemoteProtocolError` for an escape sequence the version does
        not define, as parsing would have.
        """
        if not self._escape or frame.command in UNESCAPED_COMMANDS:
            return frame
        headers = frame.headers
        if not any("\\" in name or "\\" in value for name, value in headers):
            return frame
        version = self._version
        pairs = tuple(
            (unescape_header(name, version), unescape_header(value, version)) for name, value in headers
        )
        return Frame(frame.command, pairs, frame.body)

    # -- receiving -----------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer; return the events they complete, in order.

        ``data`` may be any slice of the stream, down to one byte.  Raises
        :class:`RemoteProtocolError` when the peer broke the protocol or a
        limit.  The exception's ``events`` attribute holds the events this call
        completed *before* the offending bytes, so a session can still act on
        what the peer sent correctly (Artemis handles frames one by one, so a
        SEND just before a bad frame is delivered) before it sends ERROR.
        From then on every call raises that same error, with ``events`` empty.
        """
        error = self._error
        if error is not None:
            error.events = []  # type: ignore[attr-defined]
            raise error
        held = self._buf
        events: list[Event] = []
        try:
            if held:
                # An incomplete frame is held: append, and parse only once the
                # new bytes can complete it, so that a large frame arriving in
                # small pieces is neither re-parsed nor copied per piece.
                held += data
                if not self._may_complete(held):
                    return events
                buf = bytes(held)
                held.clear()
            else:
                buf = data if type(data) is bytes else bytes(data)
            pos = self._parse(buf, events)
        except RemoteProtocolError as exc:
            exc.events = events  # type: ignore[attr-defined]
            self._error = exc
            self._buf = bytearray()
            self._pending = None
            raise
        if pos < len(buf):
            held += memoryview(buf)[pos:]
        return events

    def _may_complete(self, held: bytearray) -> bool:
        """Whether the held bytes may now complete an event (False: keep waiting).

        While the answer is no, enforce the limits on what is held, scanning
        only the bytes that arrived since the last call.
        """
        n = len(held)
        pending = self._pending
        if pending is not None:
            command, headers, body_start, clen, bscan = pending
            if clen is not None:
                return n > body_start + clen
            if held.find(b"\0", bscan if bscan > body_start else body_start) >= 0:
                return True
            max_frame = self._limits.max_frame_size
            if n > max_frame:
                raise RemoteProtocolError(_no_nul_message(command, max_frame))
            self._pending = (command, headers, body_start, None, n)
            return False
        first = held[0]
        if first == 10 or first == 13:
            return True  # heart-beats, or a CR that _parse will judge
        hscan = self._hscan
        start = hscan - 2 if hscan > 2 else 0
        if held.find(b"\n\n", start) >= 0 or held.find(b"\n\r\n", start) >= 0:
            return True
        self._check_partial_head(held, 0, n, hscan)
        return False

    def _parse(self, buf: bytes, events: list[Event]) -> int:
        """Append the events ``buf`` completes to ``events``; return the bytes consumed.

        ``buf`` starts at a frame boundary (or at the frame described by
        ``self._pending`` / the partial-head scan state).  What is left after
        the returned offset is an incomplete frame whose state has been saved.
        """
        limits = self._limits
        max_frame = limits.max_frame_size
        max_count = limits.max_header_count
        max_line = limits.max_header_length
        max_command = limits.max_command_length
        # Header blocks up to this size cannot break max-frame-size or
        # max-header-length, so need no detailed check.
        max_head = min(max_frame, max_line)
        version = self._version
        escaping = self._escape
        known = self._known
        unescaped = UNESCAPED_COMMANDS
        letters = _LETTERS
        header_re = _HEADER
        content_length_re = _CONTENT_LENGTH.search
        append = events.append
        new_frame = _new
        set_command = _set_command
        set_headers = _set_headers
        set_body = _set_body
        n = len(buf)
        pos = 0
        pending = self._pending
        self._pending = None
        hscan = self._hscan
        crlf = self._crlf
        partial = False
        try:
            while pos < n:
                if pending is not None:
                    command, headers, body_start, clen, bscan = pending
                    pending = None
                else:
                    first = buf[pos]
                    if first not in letters:
                        if first == 10:  # an EOL between frames: a heart-beat
                            append(HEARTBEAT)
                            pos += 1
                            hscan = 0
                            continue
                        if first == 13:
                            if pos + 1 == n:
                                break  # wait for the LF
                            if buf[pos + 1] == 10:
                                append(HEARTBEAT)
                                pos += 2
                                hscan = 0
                                continue
                        raise RemoteProtocolError(
                            f"expected a frame command, got {_clip(buf[pos:pos + 40])}"
                        )

                    # The header block ends at the first blank line: LF LF or
                    # LF CR LF.  Look first for the style the peer used last;
                    # the other one can only come earlier if the block holds a
                    # CR (or, for LF LF, ends in LF), so that second search is
                    # rare and bounded, and neither search runs past this frame
                    # while the peer is consistent.
                    start = pos + hscan - 2 if hscan > 2 else pos
                    if crlf:
                        hend = buf.find(b"\n\r\n", start)
                        i = buf.find(b"\n\n", start, hend + 2 if hend >= 0 else n)
                        if i >= 0:
                            hend = i
                            body_start = i + 2
                            crlf = False
                        elif hend >= 0:
                            body_start = hend + 3
                        else:
                            partial = True
                            self._check_partial_head(buf, pos, n, hscan)
                            break
                        text = buf[pos:hend].decode()
                    else:
                        hend = buf.find(b"\n\n", start)
                        if hend >= 0:
                            body_start = hend + 2
                            # A CR LF block may end earlier: find its end before
                            # decoding, or bytes of later frames are judged as this
                            # one's header text.
                            if buf.find(b"\r", pos, hend) >= 0:
                                i = buf.find(b"\n\r\n", start, hend + 2)
                                if i >= 0:
                                    hend = i
                                    body_start = i + 3
                                    crlf = True
                            text = buf[pos:hend].decode()
                        else:
                            hend = buf.find(b"\n\r\n", start)
                            if hend < 0:
                                partial = True
                                self._check_partial_head(buf, pos, n, hscan)
                                break
                            body_start = hend + 3
                            crlf = True
                            text = buf[pos:hend].decode()
                    hscan = 0

                    if hend - pos > max_head:  # rare: check the limits in detail
                        if hend - pos > max_frame:
                            raise RemoteProtocolError(
                                f"frame header block of {hend - pos} bytes exceeds "
                                f"max-frame-size {max_frame}"
                            )
                        _check_line_lengths(buf, pos, hend, max_line)
                    if "\0" in text:
                        raise RemoteProtocolError(
                            "NUL octet inside a frame's command or header lines"
                        )
                    if "\r" in text:  # CR LF line ends: drop the CR of each
                        text = text.replace("\r\n", "\n")
                        if text[-1] == "\r":
                            text = text[:-1]
                    nl = text.find("\n")
                    command = text if nl < 0 else text[:nl]
                    if command not in known:  # else: valid and within max-command-length
                        if len(command) > max_command:
                            raise RemoteProtocolError(
                                _command_too_long(len(command), max_command)
                            )
                        if not _COMMAND.fullmatch(command):
                            raise RemoteProtocolError(f"invalid frame command {_clip(command)}")
                    clen = None
                    if nl < 0:
                        headers = ()
                    else:
                        count = text.count("\n")
                        if count > max_count:
                            raise RemoteProtocolError(
                                f"frame {command} has {count} headers, more than "
                                f"max-header-count {max_count}"
                            )
                        pairs = header_re.findall(text)
                        if len(pairs) != count:
                            raise RemoteProtocolError(_bad_header_line(command, text))
                        if escaping and "\\" in text and command not in unescaped:
                            pairs = [
                                (unescape_header(name, version), unescape_header(value, version))
                                for name, value in pairs
                            ]
                        headers = tuple(pairs)
                        match = content_length_re(text)
                        if match is not None:
                            value = match[1]
                            if not (value.isdigit() and value.isascii()):
                                raise RemoteProtocolError(
                                    f"frame {command} has an invalid content-length "
                                    f"{_clip(value)}"
                                )
                            clen = int(value)
                    bscan = 0

                # The body.
                if clen is not None:
                    end = body_start + clen
                    if end - pos > max_frame:
                        if clen > max_frame:
                            raise RemoteProtocolError(
                                f"frame body of {clen} bytes exceeds max-frame-size {max_frame}"
                            )
                        raise RemoteProtocolError(
                            f"frame of {end - pos} bytes (headers and a body of {clen}) "
                            f"exceeds max-frame-size {max_frame}"
                        )
                    if end >= n:
                        pending = (command, headers, body_start, clen, pos)
                        break
                    if buf[end]:
                        raise RemoteProtocolError(
                            f"frame {command} body is not followed by NUL after "
                            f"content-length {clen} bytes"
                        )
                else:
                    end = buf.find(b"\0", pos + bscan if pos + bscan > body_start else body_start)
                    if end < 0:
                        if n - pos > max_frame:
                            raise RemoteProtocolError(_no_nul_message(command, max_frame))
                        pending = (command, headers, body_start, None, n)
                        break
                    if end - pos > max_frame:
                        raise RemoteProtocolError(
                            f"frame of {end - pos} bytes exceeds max-frame-size {max_frame}"
                        )
                frame = new_frame(Frame)
                set_command(frame, command)
                set_headers(frame, headers)
                set_body(frame, buf[body_start:end])
                append(frame)
                pos = end + 1
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(
                f"frame command or headers are not valid UTF-8 ({exc.reason} at byte "
                f"{exc.start} of the header block)"
            ) from None

        self._crlf = crlf
        if not partial:
            self._hscan = 0
        if pending is not None:
            command, headers, body_start, clen, bscan = pending
            self._pending = (command, headers, body_start - pos, clen, bscan - pos)
        return pos

    def _check_partial_head(self, buf: bytes | bytearray, pos: int, n: int, hscan: int) -> None:
        """Limit checks on a frame (at ``pos``) whose header block has not ended yet.

        ``hscan`` is how much of it earlier calls have checked; only the rest
        is scanned.  Raises as soon as the frame, its command line or its
        current header line is over its limit, as soon as it holds a NUL or
        too many header lines, and as soon as its command line is complete but
        not a valid command.
        """
        limits = self._limits
        scan = pos + hscan
        if n - pos > limits.max_frame_size:
            raise RemoteProtocolError(
                f"frame header block of more than {limits.max_frame_size} bytes exceeds "
                f"max-frame-size {limits.max_frame_size}"
            )
        if buf.find(b"\0", scan, n) >= 0:
            raise RemoteProtocolError("NUL octet inside a frame's command or header lines")
        if hscan == 0:
            self._hlast = -1
            self._hlines = 0
        last = buf.rfind(b"\n", scan, n)
        if last >= 0:
            if self._hlast < 0:
                # The command line just ended: judge it now, not at the blank line.
                first_nl = buf.find(b"\n", scan, n)
                line = buf[pos:first_nl]
                if line.endswith(b"\r"):
                    line = line[:-1]
                if len(line) > limits.max_command_length:
                    raise RemoteProtocolError(
                        _command_too_long(len(line), limits.max_command_length)
                    )
                if not _COMMAND_BYTES.fullmatch(line):
                    raise RemoteProtocolError(f"invalid frame command {_clip(bytes(line))}")
            # Every header line completed in this read must be within the limit
            # too, not only the one still open, so the verdict cannot depend on
            # how the stream was cut into reads.
            start = pos + self._hlast + 1 if self._hlast >= 0 else buf.find(b"\n", scan, n) + 1
            nl = buf.find(b"\n", start, last + 1)
            while nl >= 0:
                if nl - start > limits.max_header_length + 1:  # +1: the CR of a CR LF
                    raise RemoteProtocolError(
                        f"frame header line of more than {limits.max_header_length} bytes "
                        f"exceeds max-header-length {limits.max_header_length}"
                    )
                start = nl + 1
                nl = buf.find(b"\n", start, last + 1)
            self._hlines += buf.count(b"\n", scan, last + 1)
            self._hlast = last - pos
        if self._hlast < 0:
            if n - pos > limits.max_command_length + 1:  # +1: the CR of a CR LF
                raise RemoteProtocolError(
                    f"frame command line of more than {limits.max_command_length} bytes "
                    f"exceeds max-command-length {limits.max_command_length}: "
                    f"{_clip(bytes(buf[pos:pos + 40]))}"
                )
        else:
            if n - (pos + self._hlast + 1) > limits.max_header_length + 1:
                raise RemoteProtocolError(
                    f"frame header line of more than {limits.max_header_length} bytes "
                    f"exceeds max-header-length {limits.max_header_length}"
                )
            if self._hlines - 1 > limits.max_header_count:
                raise RemoteProtocolError(
                    f"frame has more than max-header-count {limits.max_header_count} headers"
                )
        self._hscan = n - pos

    # -- sending -------------------------------------------------------------

    def send(self, frame: Frame, *, content_length: bool = False) -> bytes:
        """Serialise ``frame`` for the wire under the current version.

        Headers are escaped per the negotiated version (never for CONNECT,
        STOMP or CONNECTED).  A ``content-length`` header is written when the
        body contains a NUL, when ``content_length`` is true, when the frame
        already has one, and (server side) on every MESSAGE with a non-empty
        body.  The codec owns framing: an existing ``content-length`` keeps its
        position but gets the body's real length, and repeats are dropped; a
        new one goes last.

        ``frame.headers`` is trusted to hold ``(str, str)`` pairs (the
        :class:`Frame` constructor checks anything that is not already a
        tuple).  Raises :class:`LocalProtocolError` for what the wire cannot
        carry: an invalid command, an empty header name, a NUL in a header, or
        (where the version does not escape them) a LF, a colon in a name, or a
        value ending in CR (a reader would take it for a CR LF).
        """
        command = frame.command
        if command not in _KNOWN_COMMANDS and not (
            type(command) is str and _COMMAND.fullmatch(command)
        ):
            raise LocalProtocolError(f"invalid STOMP command {command!r}")
        body = frame.body
        headers = frame.headers
        want_length = (
            content_length
            or (self._server and body and command == "MESSAGE")
            or b"\0" in body
        )
        text = "\n".join(map(":".join, headers))
        if "content-length" in text:
            # Probably a content-length header (or a mention of one): make it
            # the only one and make it right.
            length = str(len(body))
            names = list(map(_first, headers))
            if "content-length" in names:
                if (
                    names.count("content-length") > 1
                    or headers[names.index("content-length")][1] != length
                ):
                    headers = _with_content_length(headers, length)
                    text = "\n".join(map(":".join, headers))
                want_length = False
        if want_length:
            headers = headers + (("content-length", str(len(body))),)
            if text:
                text = text + "\ncontent-length:" + str(len(body))
            else:
                text = "content-length:" + str(len(body))
        if not text:
            return b"".join(((command + "\n\n").encode(), body, b"\0"))
        data = encode_plain(command, text, len(headers), body)
        if data is not None:
            return data
        text = self._checked_header_text(command, headers, text)
        return b"".join(((command + "\n" + text + "\n\n").encode(), body, b"\0"))

    def _checked_header_text(
        self, command: str, headers: tuple[tuple[str, str], ...], text: str
    ) -> str:
        """The header lines of ``headers``, escaped and checked (send's slow path)."""
        names = list(map(_first, headers))
        if "\0" in text:
            raise LocalProtocolError(
                f"{command} frame has a NUL in a header, which STOMP cannot carry"
            )
        if "" in names:
            raise LocalProtocolError(f"{command} frame has a header with an empty name")
        escaped = self._escape and command not in UNESCAPED_COMMANDS
        if not escaped:
            for name in names:
                if ":" in name or "\n" in name:
                    raise LocalProtocolError(
                        f"{command} frame header name {name!r} contains a colon or LF, which "
                        f"{self._mode(command)} cannot escape"
                    )
            if text.count("\n") != len(headers) - 1 or "\r" in text:
                for name, value in headers:
                    if "\n" in value:
                        raise LocalProtocolError(
                            f"{command} frame header {name!r} value contains a LF, which "
                            f"{self._mode(command)} cannot escape"
                        )
                    _check_trailing_cr(command, name, value, self._mode(command))
            return text
        # Escape every name and value in one pass over a NUL-separated string
        # (NUL cannot occur in them, checked above).
        flat = "\0".join(chain.from_iterable(headers))
        flat = flat.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
        if self._version == "1.2":
            flat = flat.replace("\r", "\\r")
        elif "\r" in flat:
            for name, value in headers:
                _check_trailing_cr(command, name, value, self._mode(command))
        items = flat.split("\0")
        return "\n".join(map(":".join, zip(items[::2], items[1::2], strict=True)))

    def _mode(self, command: str) -> str:
        if command in UNESCAPED_COMMANDS:
            return f"an (always unescaped) {command} frame"
        return f"STOMP {self._version}" if self._version else "pre-CONNECT STOMP"

    def heartbeat(self) -> bytes:
        """The bytes of one heart-beat (a single LF)."""
        return b"\n"
