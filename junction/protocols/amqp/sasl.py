"""Sans-IO server side of the AMQP 1.0 SASL layer (AMQP 1.0 part 5.3).

The broker's AMQP server runs the qpid-proton engine without its SASL layer
(proton's PyPI wheel has no server-side PLAIN), so SASL is negotiated here, in
front of the engine.  No sockets, no clock, no Twisted: the adapter feeds what
arrived to :meth:`SaslServer.receive_data`, acts on the returned events and
writes what :meth:`SaslServer.data_to_send` returns.

The exchange (part 5.3.2, server side)::

    client                          server
    AMQP 3.1.0.0         -->
                         <--        AMQP 3.1.0.0
                         <--        sasl-mechanisms [PLAIN ANONYMOUS ...]
    sasl-init            -->
                         <--        sasl-outcome (0 ok, 1 auth, 2 sys)
    AMQP 0.1.0.0 + open  -->        (the AMQP layer: the engine's business)

A peer may pipeline: everything after the sasl-init frame, received in the
same call, is handed back in :attr:`SaslAuthenticated.remaining`.  From then
on the server is :attr:`SaslState.DONE` and every call returns one
:class:`Passthrough`; the adapter should feed the engine directly instead.

States (:class:`SaslState`) and what moves between them (:class:`SaslInput`)
are the h11-style table :data:`TRANSITIONS`:

* ``AWAIT_HEADER`` -- waiting for the 8-octet protocol header.  The SASL
  header moves to ``AWAIT_INIT`` (our header and a sasl-mechanisms frame are
  queued).  The plain AMQP header gives :class:`NoSasl` and ``DONE`` when
  ``allow_no_sasl``, else our SASL header is queued, :class:`SaslRequired` is
  returned and the state is ``FAILED`` (part 2.2: answer with the header you
  support, then close).  Anything else -- another protocol id or version, the
  TLS header (TLS is the adapter's business, not ours), HTTP, garbage -- queues
  the SASL header and raises :class:`RemoteProtocolError`; bytes that cannot
  start ``AMQP`` are refused as soon as they arrive.
* ``AWAIT_INIT`` -- waiting for the sasl-init frame.  Success queues
  sasl-outcome ``ok`` and gives :class:`SaslAuthenticated` (``DONE``); an
  unoffered mechanism, a malformed PLAIN response or a refusal by the
  ``authenticate`` callback queues sasl-outcome ``auth`` and gives
  :class:`SaslFailed` (``FAILED``); a callback that raises gives outcome
  ``sys``.  A frame that is malformed, too large, not a SASL frame or not a
  sasl-init raises :class:`RemoteProtocolError` (``FAILED``, nothing queued).
* ``DONE`` -- bytes pass through.  ``FAILED`` -- bytes are ignored; the
  adapter closes the connection once it has written what is queued.

Only single-step mechanisms are supported (PLAIN, ANONYMOUS, EXTERNAL), so
the server never sends sasl-challenge and a sasl-response is a protocol error.

Frame bodies are decoded and encoded by the shared type codec
(:mod:`junction.protocols.amqp.types`); this module reads the frame header and
checks the performative and its fields.  Unknown extra fields of a sasl-init
are ignored, so a client that sends a newer, longer sasl-init is understood.

Limits: a frame's declared size is checked as soon as its first four octets
arrive (at least 8, at most ``max_frame_size``), so at most
``max_frame_size + 8`` octets are ever held; where an error is detected never
depends on how the stream was cut into reads.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NoReturn

from junction.protocols.amqp.types import Array, Described, Scalar, Symbol, decode, encode
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.opening import Passthrough  # bytes after SASL: the AMQP engine's
from junction.protocols.states import TableEnum

__all__ = [
    "AMQP_HEADER",
    "MAX_SASL_FRAME_SIZE",
    "MIN_SASL_FRAME_SIZE",
    "NoSasl",
    "Passthrough",
    "SASL_HEADER",
    "SUPPORTED_MECHANISMS",
    "SaslAuthenticated",
    "SaslCode",
    "SaslCredentials",
    "SaslEvent",
    "SaslFailed",
    "SaslInput",
    "SaslRequired",
    "SaslServer",
    "SaslState",
    "TLS_HEADER",
    "TRANSITIONS",
]

log = logging.getLogger("junction.amqp")

#: Protocol header of the SASL layer (protocol id 3, version 1.0.0).
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
#: Protocol header of the AMQP layer proper (protocol id 0, version 1.0.0).
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
#: Protocol header of the TLS layer (protocol id 2, version 1.0.0).
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

#: Default limit on the size of a SASL frame the peer may send.
MAX_SASL_FRAME_SIZE = 65536
#: The smallest frame size every AMQP peer must accept (part 2.4.1,
#: MIN-MAX-FRAME-SIZE); ``max_frame_size`` may not be lower.
MIN_SASL_FRAME_SIZE = 512

#: Mechanisms this server can run: all complete in one step (no challenge).
SUPPORTED_MECHANISMS: frozenset[str] = frozenset({"PLAIN", "ANONYMOUS", "EXTERNAL"})


class SaslCode(enum.IntEnum):
    """The sasl-outcome codes (part 5.3.3.6)."""

    OK = 0
    AUTH = 1
    SYS = 2
    SYS_PERM = 3
    SYS_TEMP = 4


class SaslState(TableEnum):
    """Where the SASL exchange stands."""

    AWAIT_HEADER = "AWAIT_HEADER"
    AWAIT_INIT = "AWAIT_INIT"
    DONE = "DONE"
    FAILED = "FAILED"


class SaslInput(TableEnum):
    """What the received bytes amounted to; drives :data:`TRANSITIONS`."""

    PARTIAL = "PARTIAL"  # not enough bytes yet to decide anything
    SASL_HEADER = "SASL_HEADER"
    AMQP_HEADER_ALLOWED = "AMQP_HEADER_ALLOWED"  # plain AMQP header, allow_no_sasl
    AMQP_HEADER_REFUSED = "AMQP_HEADER_REFUSED"  # plain AMQP header, SASL required
    BAD_HEADER = "BAD_HEADER"
    INIT_ACCEPTED = "INIT_ACCEPTED"
    INIT_REJECTED = "INIT_REJECTED"
    BAD_FRAME = "BAD_FRAME"
    DATA = "DATA"  # anything once the exchange is over


_S = SaslState
_I = SaslInput

#: ``(state, input) -> next state``.  A pair that is missing is a bug in this
#: module (:class:`LocalProtocolError`), never the peer's fault.
TRANSITIONS: Mapping[tuple[SaslState, SaslInput], SaslState] = MappingProxyType(
    {
        (_S.AWAIT_HEADER, _I.PARTIAL): _S.AWAIT_HEADER,
        (_S.AWAIT_HEADER, _I.SASL_HEADER): _S.AWAIT_INIT,
        (_S.AWAIT_HEADER, _I.AMQP_HEADER_ALLOWED): _S.DONE,
        (_S.AWAIT_HEADER, _I.AMQP_HEADER_REFUSED): _S.FAILED,
        (_S.AWAIT_HEADER, _I.BAD_HEADER): _S.FAILED,
        (_S.AWAIT_INIT, _I.PARTIAL): _S.AWAIT_INIT,
        (_S.AWAIT_INIT, _I.INIT_ACCEPTED): _S.DONE,
        (_S.AWAIT_INIT, _I.INIT_REJECTED): _S.FAILED,
        (_S.AWAIT_INIT, _I.BAD_FRAME): _S.FAILED,
        (_S.DONE, _I.DATA): _S.DONE,
        (_S.FAILED, _I.DATA): _S.FAILED,
    }
)


# -- events -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """What the client presented, as given to the ``authenticate`` callback.

    PLAIN: ``username`` (authcid), ``password`` and ``authzid`` (None when
    empty) parsed from ``initial_response``.  ANONYMOUS: ``initial_response``
    is the optional trace string, as sent.  EXTERNAL: the identity comes from
    the transport (the callback knows the TLS peer); ``authzid`` is the
    initial response when it holds one.  ``hostname`` is the sasl-init
    hostname field, or the server's ``hostname`` argument when it has none.
    """

    mechanism: str
    username: str | None
    password: str | None
    authzid: str | None
    hostname: str | None
    initial_response: bytes | None

    def __repr__(self) -> str:  # never log a password
        password = None if self.password is None else "***"
        response = self.initial_response
        shown = None if response is None else f"<{len(response)} bytes>"
        return (
            f"SaslCredentials(mechanism={self.mechanism!r}, username={self.username!r}, "
            f"password={password}, authzid={self.authzid!r}, hostname={self.hostname!r}, "
            f"initial_response={shown})"
        )


@dataclass(frozen=True, slots=True)
class SaslAuthenticated:
    """sasl-outcome ok is queued: hand ``remaining`` to the AMQP engine."""

    mechanism: str
    principal: object
    hostname: str | None
    remaining: bytes


@dataclass(frozen=True, slots=True)
class SaslFailed:
    """A failing sasl-outcome (``code``) is queued: write it, then close."""

    reason: str
    mechanism: str | None = None
    code: SaslCode = SaslCode.AUTH


@dataclass(frozen=True, slots=True)
class NoSasl:
    """The client skipped SASL and that is allowed: ``remaining`` starts with its AMQP header."""

    remaining: bytes


@dataclass(frozen=True, slots=True)
class SaslRequired:
    """The client skipped SASL, which is not allowed: our SASL header is queued; close."""


SaslEvent = SaslAuthenticated | SaslFailed | NoSasl | SaslRequired | Passthrough


# -- SASL frames ---------------------------------------------------------------

_FRAME_TYPE_SASL = 0x01
_FRAME_TYPE_AMQP = 0x00

_SASL_MECHANISMS = 0x40
_SASL_INIT = 0x41
_SASL_CHALLENGE = 0x42
_SASL_RESPONSE = 0x43
_SASL_OUTCOME = 0x44

_PERFORMATIVE_NAMES = {
    _SASL_MECHANISMS: "sasl-mechanisms",
    _SASL_INIT: "sasl-init",
    _SASL_CHALLENGE: "sasl-challenge",
    _SASL_RESPONSE: "sasl-response",
    _SASL_OUTCOME: "sasl-outcome",
}
_SYMBOL_DESCRIPTORS = {
    f"amqp:{name}:list": code for code, name in _PERFORMATIVE_NAMES.items()
}

_FRAMING_ERROR = "amqp:connection:framing-error"
_DECODE_ERROR = "amqp:decode-error"
_NOT_ALLOWED = "amqp:not-allowed"


def _clip(raw: bytes | bytearray, limit: int = 32) -> str:
    raw = bytes(raw)
    if len(raw) > limit:
        return repr(raw[:limit]) + "..."
    return repr(raw)


def _clip_text(text: str, limit: int = 64) -> str:
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)


def _decode_error(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, _DECODE_ERROR)


def _performative(body: bytes) -> tuple[int | None, list]:
    """Decode a SASL frame body: its performative code (None: unknown) and its fields.

    Malformed encodings raise the codec's ``DecodeError``, a
    :class:`RemoteProtocolError`.
    """
    if not body:
        raise _decode_error("SASL frame has an empty body")
    value, end = decode(body, 0)
    if end != len(body):
        raise _decode_error(f"SASL frame body has {len(body) - end} octets after its value")
    if not isinstance(value, Described):
        raise _decode_error(
            f"SASL frame body is not a described type (starts with 0x{body[0]:02x})"
        )
    descriptor = value.descriptor
    if isinstance(descriptor, Scalar) and descriptor.kind == "ulong":
        code = descriptor.value if descriptor.value in _PERFORMATIVE_NAMES else None
    elif isinstance(descriptor, Symbol):
        code = _SYMBOL_DESCRIPTORS.get(descriptor)
    else:
        raise _decode_error(
            f"SASL frame body has a descriptor of type {type(descriptor).__name__}, "
            "not a ulong or symbol"
        )
    if type(value.value) is not list:
        raise _decode_error(
            f"SASL frame body is not a described list ({type(value.value).__name__})"
        )
    return code, value.value


def _field(fields: list, index: int, kind: type, what: str):
    """Field ``index`` if it has Python type ``kind``; None if null or absent."""
    if index >= len(fields) or fields[index] is None:
        return None
    field = fields[index]
    if type(field) is not kind:
        raise _decode_error(
            f"sasl-init field {what} is a {type(field).__name__}, not a {kind.__name__}"
        )
    return field


def _encode_frame(performative: int, fields: list) -> bytes:
    """A SASL frame: size, doff 2 (no extended header), type SASL, two ignored octets."""
    body = encode(Described(Scalar("ulong", performative), fields))
    return (8 + len(body)).to_bytes(4, "big") + bytes((2, _FRAME_TYPE_SASL, 0, 0)) + body


def _encode_mechanisms(names: Sequence[str]) -> bytes:
    """sasl-mechanisms with sasl-server-mechanisms as an array of symbols."""
    return _encode_frame(_SASL_MECHANISMS, [Array("symbol", tuple(map(Symbol, names)))])


def _encode_outcome(code: SaslCode) -> bytes:
    """sasl-outcome with its code and no additional-data."""
    return _encode_frame(_SASL_OUTCOME, [Scalar("ubyte", int(code))])


def _parse_plain(response: bytes | None) -> tuple[str | None, str, str] | None:
    """RFC 4616 ``[authzid] NUL authcid NUL passwd``, or None when malformed."""
    if response is None:
        return None
    parts = response.split(b"\0")
    if len(parts) != 3 or not parts[1]:
        return None
    try:
        authzid, authcid, passwd = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        return None
    return (authzid or None), authcid, passwd


# -- the state machine ----------------------------------------------------------


class SaslServer:
    """The server side of one connection's SASL exchange.

    ``mechanisms`` are offered in the order given (a subset of
    :data:`SUPPORTED_MECHANISMS`).  ``authenticate`` is called synchronously
    with the client's :class:`SaslCredentials` and returns a truthy principal
    on success, None (or anything falsy) on failure; if it raises, the
    exception is logged and the client gets outcome ``sys``.
    ``allow_no_sasl`` lets a client skip SASL (send the AMQP header first).
    ``max_frame_size`` bounds the SASL frames the client may send (at least
    :data:`MIN_SASL_FRAME_SIZE`).  ``hostname`` stands in for the sasl-init
    hostname field when the client leaves it out (proton does), e.g. the TLS
    SNI name.
    """

    __slots__ = (
        "_mechanisms",
        "_offered",
        "_authenticate",
        "_allow_no_sasl",
        "_max_frame_size",
        "_hostname",
        "_state",
        "_buf",
        "_out",
        "_error",
        "_mechanisms_frame",
    )

    def __init__(
        self,
        mechanisms: Sequence[str],
        authenticate: Callable[[SaslCredentials], object | None],
        *,
        allow_no_sasl: bool = False,
        max_frame_size: int = MAX_SASL_FRAME_SIZE,
        hostname: str | None = None,
    ):
        if isinstance(mechanisms, str):
            raise ValueError("mechanisms must be a sequence of names, not one string")
        mechanisms = tuple(mechanisms)
        if not mechanisms:
            raise ValueError("at least one SASL mechanism must be offered")
        for name in mechanisms:
            if name not in SUPPORTED_MECHANISMS:
                raise ValueError(
                    f"unsupported SASL mechanism {name!r} "
                    f"(supported: {', '.join(sorted(SUPPORTED_MECHANISMS))})"
                )
        if len(set(mechanisms)) != len(mechanisms):
            raise ValueError(f"SASL mechanisms offered twice: {mechanisms!r}")
        if type(max_frame_size) is not int or not (
            MIN_SASL_FRAME_SIZE <= max_frame_size <= 0xFFFFFFFF
        ):
            raise ValueError(
                f"max_frame_size must be an int from {MIN_SASL_FRAME_SIZE} to {0xFFFFFFFF}, "
                f"not {max_frame_size!r}"
            )
        self._mechanisms = mechanisms
        self._offered = frozenset(mechanisms)
        self._authenticate = authenticate
        self._allow_no_sasl = bool(allow_no_sasl)
        self._max_frame_size = max_frame_size
        self._hostname = hostname
        self._state = SaslState.AWAIT_HEADER
        self._buf = bytearray()
        self._out = bytearray()
        self._error: RemoteProtocolError | None = None
        self._mechanisms_frame = _encode_mechanisms(mechanisms)

    # -- state ------------------------------------------------------------

    @property
    def state(self) -> SaslState:
        """Where the exchange stands."""
        return self._state

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """The mechanisms offered, in order."""
        return self._mechanisms

    @property
    def max_frame_size(self) -> int:
        """The largest SASL frame accepted from the client."""
        return self._max_frame_size

    @property
    def error(self) -> RemoteProtocolError | None:
        """The protocol error that failed the exchange, if any."""
        return self._error

    @property
    def buffered(self) -> int:
        """Octets held for an incomplete header or frame (at most ``max_frame_size + 8``)."""
        return len(self._buf)

    def _transition(self, kind: SaslInput) -> None:
        try:
            self._state = TRANSITIONS[self._state, kind]
        except KeyError:
            raise LocalProtocolError(
                f"SASL state machine has no transition from {self._state.name} on {kind.name}"
            ) from None

    # -- output -------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Take the bytes queued for the client (empty when there are none)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    # -- input --------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[SaslEvent]:
        """Feed bytes from the client; return the events they complete.

        ``data`` may be any slice of the stream, down to one octet.  Raises
        :class:`RemoteProtocolError` when the client broke the protocol; the
        state is then ``FAILED`` and whatever is queued (our SASL header
        after a bad protocol header) should be written before closing.
        """
        state = self._state
        if state is SaslState.DONE:  # the adapter should have stopped calling
            return [Passthrough(data if type(data) is bytes else bytes(data))] if data else []
        if state is SaslState.FAILED or not data:
            return []
        buf = self._buf
        buf += data
        try:
            if state is SaslState.AWAIT_HEADER:
                return self._header()
            return self._frames()
        except RemoteProtocolError as exc:
            self._error = exc
            buf.clear()
            if self._state is SaslState.AWAIT_HEADER:
                self._transition(SaslInput.BAD_HEADER)
            else:
                self._transition(SaslInput.BAD_FRAME)
            raise

    def _header(self) -> list[SaslEvent]:
        buf = self._buf
        n = len(buf)
        if n < 8:
            if buf[:4] != b"AMQP"[:n]:
                self._bad_header()
            self._transition(SaslInput.PARTIAL)
            return []
        header = bytes(buf[:8])
        if header == SASL_HEADER:
            del buf[:8]
            self._out += SASL_HEADER
            self._out += self._mechanisms_frame
            self._transition(SaslInput.SASL_HEADER)
            return self._frames()
        if header == AMQP_HEADER:
            if self._allow_no_sasl:
                remaining = bytes(buf)
                buf.clear()
                self._transition(SaslInput.AMQP_HEADER_ALLOWED)
                return [NoSasl(remaining)]
            buf.clear()
            self._out += SASL_HEADER
            self._transition(SaslInput.AMQP_HEADER_REFUSED)
            return [SaslRequired()]
        self._bad_header()

    def _bad_header(self) -> NoReturn:
        buf = self._buf
        self._out += SASL_HEADER
        got = _clip(buf)
        if buf[:4] == b"AMQP" and len(buf) >= 8:
            what = f"protocol id {buf[4]} version {buf[5]}.{buf[6]}.{buf[7]}"
            if bytes(buf[:8]) == TLS_HEADER:
                what += " (TLS, which this port does not negotiate)"
            message = f"unsupported AMQP {what}; expected the SASL header {SASL_HEADER!r}"
        else:
            hint = ""
            if buf[:1] == b"\x16":
                hint = " (a TLS handshake? this port expects AMQP without TLS)"
            elif buf[:1].isalpha():
                hint = " (a text protocol such as HTTP?)"
            message = f"expected an AMQP protocol header, got {got}{hint}"
        raise RemoteProtocolError(message, _FRAMING_ERROR)

    def _frames(self) -> list[SaslEvent]:
        """Parse frames while ``AWAIT_INIT``; stop at the first complete one."""
        buf = self._buf
        n = len(buf)
        if n >= 4:
            size = int.from_bytes(buf[:4], "big")
            if size < 8:
                raise RemoteProtocolError(
                    f"SASL frame size {size} is below the minimum of 8", _FRAMING_ERROR
                )
            if size > self._max_frame_size:
                raise RemoteProtocolError(
                    f"SASL frame size {size} exceeds the limit of {self._max_frame_size} octets",
                    _FRAMING_ERROR,
                )
            if n >= 5:
                doff = buf[4]
                if doff < 2 or doff * 4 > size:
                    raise RemoteProtocolError(
                        f"SASL frame has invalid data offset {doff} (frame size {size})",
                        _FRAMING_ERROR,
                    )
            if n >= 6 and buf[5] != _FRAME_TYPE_SASL:
                kind = "an AMQP frame" if buf[5] == _FRAME_TYPE_AMQP else f"frame type {buf[5]}"
                raise RemoteProtocolError(
                    f"expected a SASL frame (type 1), got {kind}: SASL is not complete",
                    _FRAMING_ERROR,
                )
            if n >= size:
                body = bytes(buf[doff * 4 : size])
                del buf[:size]
                return self._init(body)
        self._transition(SaslInput.PARTIAL)
        return []

    def _init(self, body: bytes) -> list[SaslEvent]:
        performative, fields = _performative(body)
        if performative != _SASL_INIT:
            if performative == _SASL_RESPONSE:
                message = "unexpected sasl-response: no sasl-challenge was sent"
            elif performative is None:
                message = "SASL frame has an unknown descriptor; expected sasl-init"
            else:
                message = (
                    f"unexpected {_PERFORMATIVE_NAMES[performative]} from a client; "
                    "expected sasl-init"
                )
            raise RemoteProtocolError(message, _NOT_ALLOWED)
        mechanism = _field(fields, 0, Symbol, "mechanism")
        response = _field(fields, 1, bytes, "initial-response")
        hostname = _field(fields, 2, str, "hostname")
        if mechanism is None:
            raise _decode_error("sasl-init has no mechanism (a mandatory field)")
        mechanism = str(mechanism)
        if hostname is None:
            hostname = self._hostname

        if mechanism not in self._offered:
            return self._fail(
                f"mechanism {_clip_text(mechanism)} was not offered "
                f"(offered: {', '.join(self._mechanisms)})",
                mechanism,
            )
        username = password = authzid = None
        if mechanism == "PLAIN":
            plain = _parse_plain(response)
            if plain is None:
                return self._fail("malformed PLAIN initial response", mechanism)
            authzid, username, password = plain
        elif mechanism == "EXTERNAL" and response:
            try:
                authzid = response.decode("utf-8")
            except UnicodeDecodeError:
                return self._fail("EXTERNAL authorization identity is not UTF-8", mechanism)
        credentials = SaslCredentials(mechanism, username, password, authzid, hostname, response)
        try:
            principal = self._authenticate(credentials)
        except Exception as exc:
            log.exception("SASL %s authenticator failed for %r", mechanism, credentials)
            return self._fail(
                f"authenticator error: {type(exc).__name__}", mechanism, SaslCode.SYS
            )
        if not principal:
            who = f" for user {_clip_text(username)}" if username is not None else ""
            return self._fail(f"{mechanism} authentication failed{who}", mechanism)
        self._out += _encode_outcome(SaslCode.OK)
        remaining = bytes(self._buf)
        self._buf.clear()
        self._transition(SaslInput.INIT_ACCEPTED)
        return [SaslAuthenticated(mechanism, principal, hostname, remaining)]

    def _fail(
        self, reason: str, mechanism: str | None, code: SaslCode = SaslCode.AUTH
    ) -> list[SaslEvent]:
        self._out += _encode_outcome(code)
        self._buf.clear()
        self._transition(SaslInput.INIT_REJECTED)
        return [SaslFailed(reason, mechanism, code)]
