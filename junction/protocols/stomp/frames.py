"""STOMP events and header escaping (sans-IO, in the style of h11).

The STOMP codec (:mod:`junction.protocols.stomp.codec`) turns bytes into the
events defined here and back:

* :class:`Frame` -- one complete STOMP frame: command, headers in wire order
  (repeats kept) and body.
* :class:`HeartBeat` -- one end-of-line received between frames.  STOMP 1.1
  and 1.2 use these as heart-beats; a session only needs to know that the peer
  is alive.

Header escaping differs per protocol version, so the rules live here as plain
functions (:func:`escape_header`, :func:`unescape_header`):

* STOMP 1.0 (and the codec before CONNECT has been negotiated): no escaping.
* STOMP 1.1: ``\\n`` (LF), ``\\c`` (colon) and ``\\\\`` (backslash).
* STOMP 1.2: as 1.1 plus ``\\r`` (CR).
* CONNECT, STOMP and CONNECTED frames are never escaped, in any version: the
  1.2 specification says so for CONNECT and CONNECTED so that a 1.0 peer can
  still read them, and STOMP is the 1.1+ spelling of CONNECT.

In 1.1 and 1.2, a backslash followed by anything but the defined escapes
(``\\t``, say, or a lone trailing backslash) is a protocol error: the
specification calls it fatal, and guessing would let two parsers disagree about
a header's value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "CLIENT_COMMANDS",
    "Event",
    "Frame",
    "HEARTBEAT",
    "HeartBeat",
    "SERVER_COMMANDS",
    "STOMP_VERSIONS",
    "UNESCAPED_COMMANDS",
    "escape_header",
    "escapes_headers",
    "unescape_header",
]

#: Protocol versions the codec understands, oldest first (the ``accept-version``
#: and ``version`` header values).
STOMP_VERSIONS: tuple[str, ...] = ("1.0", "1.1", "1.2")

#: Commands a client may send.  The codec parses any syntactically valid
#: command; deciding which ones are allowed is the session's job.
CLIENT_COMMANDS: frozenset[str] = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)

#: Commands a server may send.
SERVER_COMMANDS: frozenset[str] = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})

#: Commands whose headers are never escaped, whatever the negotiated version.
UNESCAPED_COMMANDS: frozenset[str] = frozenset({"CONNECT", "STOMP", "CONNECTED"})

# How many body bytes a Frame's repr shows before eliding the rest (a 10 MiB
# body in a log line helps nobody).
_REPR_BODY_BYTES = 64


@dataclass(frozen=True, slots=True, repr=False)
class Frame:
    """One STOMP frame.

    ``headers`` keeps wire order and repeated names, because STOMP gives the
    *first* occurrence of a repeated header precedence and because unknown
    headers (``transformation``, ``consumerWindowSize`` ...) must pass through
    untouched.  Header names and values are the *unescaped* text.

    For convenience the constructor also accepts a mapping or any iterable of
    ``(name, value)`` pairs for ``headers`` (checked to be pairs of str) and a
    bytearray/memoryview for ``body``, and normalises them to a tuple of pairs
    and ``bytes``.  A tuple of headers is taken as it is, unchecked: that is
    the hot path, and type checkers see the annotation.
    """

    command: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def __post_init__(self) -> None:
        headers = self.headers
        if type(headers) is not tuple:
            if isinstance(headers, Mapping):
                headers = headers.items()
            object.__setattr__(self, "headers", _header_pairs(headers))
        body = self.body
        if type(body) is not bytes:
            if isinstance(body, (bytearray, memoryview)):
                object.__setattr__(self, "body", bytes(body))
            else:
                raise TypeError(f"STOMP frame body must be bytes, not {type(body).__name__}")

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of header ``name``; the first occurrence wins (STOMP 1.1/1.2 rule)."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def header_dict(self) -> dict[str, str]:
        """The headers as a dict, in wire order; for repeated names the first occurrence wins."""
        result: dict[str, str] = {}
        for key, value in self.headers:
            if key not in result:
                result[key] = value
        return result

    def __repr__(self) -> str:
        body = self.body
        if len(body) > _REPR_BODY_BYTES:
            shown = f"{body[:_REPR_BODY_BYTES]!r}...<{len(body)} bytes>"
        else:
            shown = repr(body)
        return f"Frame(command={self.command!r}, headers={self.headers!r}, body={shown})"


# For the parser's fast path: build a Frame from parts already known to be
# well-typed without running __init__/__post_init__.  A frozen dataclass
# refuses plain attribute assignment; the slots' own setters are the cheapest
# way around that (frame = _new(Frame); _set_command(frame, ...); ...).
_new = object.__new__
_set_command = Frame.__dict__["command"].__set__
_set_headers = Frame.__dict__["headers"].__set__
_set_body = Frame.__dict__["body"].__set__


def _header_pairs(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    result = []
    for pair in pairs:
        name, value = pair
        if type(name) is not str or type(value) is not str:
            raise TypeError(f"STOMP header names and values must be str, got {pair!r}")
        result.append((name, value))
    return tuple(result)


@dataclass(frozen=True, slots=True)
class HeartBeat:
    """An end-of-line (``\\n`` or ``\\r\\n``) received between frames.

    STOMP 1.1+ peers send these as heart-beats; any version may pad between
    frames with them.  The event carries nothing: it only proves liveness.
    """


#: The one HeartBeat instance the codec emits (all HeartBeats are equal anyway).
HEARTBEAT = HeartBeat()

#: What :meth:`StompCodec.receive_data` returns a list of.
Event = Frame | HeartBeat


_ESCAPE_TABLES: dict[str, dict[int, str]] = {
    "1.1": str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c"}),
    "1.2": str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"}),
}

_UNESCAPES: dict[str, dict[str, str]] = {
    "1.1": {"\\": "\\", "n": "\n", "c": ":"},
    "1.2": {"\\": "\\", "n": "\n", "c": ":", "r": "\r"},
}

_ESCAPE_SEQUENCE = re.compile(r"\\(.?)", re.DOTALL)

# Longest piece of peer-supplied text quoted in an error message.
_QUOTE_CHARS = 80


def _quote(text: str) -> str:
    if len(text) > _QUOTE_CHARS:
        return repr(text[:_QUOTE_CHARS]) + "..."
    return repr(text)


def escapes_headers(version: str | None, command: str) -> bool:
    """Whether a ``command`` frame's headers are escaped under ``version``.

    ``version`` is None before CONNECT has been negotiated (no escaping).
    """
    return version in _ESCAPE_TABLES and command not in UNESCAPED_COMMANDS


def escape_header(text: str, version: str | None) -> str:
    """Escape one header name or value for the wire under ``version``.

    The text is returned unchanged for 1.0 or None (no escaping).  Whether the
    result is *representable* (no raw LF in 1.0, say) is the codec's check.
    """
    table = _ESCAPE_TABLES.get(version)  # type: ignore[arg-type]
    if table is None:
        return text
    return text.translate(table)


def unescape_header(text: str, version: str | None) -> str:
    """Undo :func:`escape_header` for one header name or value read from the wire.

    Raises :class:`RemoteProtocolError` for an escape sequence the version does
    not define (``\\t``, ``\\r`` in 1.1, a trailing lone backslash).
    """
    table = _UNESCAPES.get(version)  # type: ignore[arg-type]
    if table is None or "\\" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        try:
            return table[match.group(1)]
        except KeyError:
            if match.group(1):
                what = f"undefined escape sequence {match.group(0)!r}"
            else:
                what = "a lone trailing backslash"
            raise RemoteProtocolError(
                f"STOMP {version} header {_quote(text)} contains {what}"
            ) from None

    return _ESCAPE_SEQUENCE.sub(replace, text)
