"""Sans-IO client side of the AMQP 1.0 SASL layer: the gateway logs in on a client's behalf.

When the gateway forwards an AMQP connection it has already run SASL with the
client itself (:mod:`junction.protocols.amqp.opening`), so the client's
engine is past SASL and will only replay its AMQP header and Open.  The
backend broker core still expects SASL first.  :class:`SaslClient` runs it
there with the client's own mechanism and credentials, so the backend
authenticates the same user; the client's bytes after SASL are written
unchanged and, once the backend's AMQP header is in, the two connections
are spliced::

    gateway (SaslClient)              backend
    AMQP 3.1.0.0 + sasl-init  -->                  initial_bytes(), pipelined
    client's after_sasl       -->                  (AMQP header, Open, ...), once ready
                              <--     AMQP 3.1.0.0
                              <--     sasl-mechanisms [PLAIN ...]
                              <--     sasl-outcome ok
                              <--     AMQP 0.1.0.0 (consumed)
                                                   SaslClientDone(remaining)
                              <--     open ...  -> to the client

**The backend's AMQP header is consumed here, never passed on.**  The
gateway answered the client's AMQP header with its own as soon as it read
it (:class:`~junction.protocols.amqp.opening.AmqpOpening`), so the client
has had one; a second would be read as a frame and break its engine.  So
:class:`SaslClientDone` comes only once the backend's eight header octets
have arrived (in one read or several, alone or with the Open behind them)
and been checked, and ``remaining`` is what follows them.  A backend that
answers with another header -- another AMQP version (a server that does not
speak the client's version answers with its own and closes, AMQP part 2.2),
the SASL header again, anything else -- is a protocol error
(:class:`RemoteProtocolError`) whose message says what it sent.

The sasl-init is sent without waiting for sasl-mechanisms, which saves a
round trip (Junction's broker cores and proton's server SASL accept it: both
are tested).  The mechanisms offered are still checked when they
arrive: if ours is not among them the exchange fails at once with
:class:`SaslClientFailed` (``code`` None).  The client's opening must be
written to the backend once :attr:`SaslClient.ready` (the outcome is in; from
the start without SASL), or pipelined behind the sasl-init as the gateway
does: the backend sends its AMQP header only once it has read the client's.

Events (:meth:`SaslClient.receive_data` returns a list of them):

* :class:`SaslClientDone` -- sasl-outcome ``ok`` and then the backend's AMQP
  header arrived.  ``remaining`` is whatever the backend sent after the
  header in the same read (its Open, when it came with the header): pass it
  to the client and splice; bytes fed after this come back as
  :class:`~junction.protocols.amqp.sasl.Passthrough`.
* :class:`SaslClientFailed` -- a failing sasl-outcome (``code``: a
  :class:`~junction.protocols.amqp.sasl.SaslCode`, or the raw number when it
  is not one), or ``code`` None: the backend does not offer our mechanism,
  does not speak SASL when we need it, or needs SASL when we have none.
  Close the backend connection and end the client's with an AMQP error
  (:meth:`~junction.protocols.amqp.opening.AmqpOpening.close_with`).

Garbage -- a protocol header that is not AMQP, a frame that is not SASL, a
malformed or oversize frame, a sasl-challenge (only single-step mechanisms
are spoken), frames in the wrong order, a header after the outcome other
than the AMQP 1.0 header -- raises
:class:`~junction.protocols.errors.RemoteProtocolError` carrying the AMQP
condition; the state is then ``FAILED``.

**No SASL** (``mechanism`` None): nothing is sent and the client's opening
goes out at once (:attr:`SaslClient.ready` is True from the start: the
backend speaks only after the client's AMQP header, so waiting would
deadlock).  The backend's first eight octets are still checked: the AMQP
header is consumed and gives :class:`SaslClientDone` with what followed it
as ``remaining``; the SASL header gives :class:`SaslClientFailed` (the
backend requires SASL).

**Credentials** are turned into the sasl-init frame at construction; the
object keeps only that frame, and drops it when :meth:`SaslClient.initial_bytes`
hands it out (once).  The password is never logged or shown in a ``repr``.

Limits: each frame from the backend is at most ``max_frame_size`` octets
(default :data:`~junction.protocols.amqp.sasl.MAX_SASL_FRAME_SIZE`), checked
as soon as its four size octets arrive, so at most ``max_frame_size + 8``
octets are held, and where an error is detected never depends on how the
stream was cut into reads.  The backend sends at most a header and two
frames before the outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NoReturn

from junction.protocols.amqp.sasl import (
    _FRAME_TYPE_SASL,
    _PERFORMATIVE_NAMES,
    _SASL_CHALLENGE,
    _SASL_INIT,
    _SASL_MECHANISMS,
    _SASL_OUTCOME,
    AMQP_HEADER,
    MAX_SASL_FRAME_SIZE,
    MIN_SASL_FRAME_SIZE,
    SASL_HEADER,
    SUPPORTED_MECHANISMS,
    Passthrough,
    SaslCode,
    _clip,
    _encode_frame,
    _performative,
)
from junction.protocols.amqp.types import Array, Scalar, Symbol
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.states import TableEnum

__all__ = [
    "TRANSITIONS",
    "Passthrough",
    "SaslClient",
    "SaslClientDone",
    "SaslClientEvent",
    "SaslClientFailed",
    "SaslClientInput",
    "SaslClientState",
]

_FRAMING_ERROR = "amqp:connection:framing-error"
_DECODE_ERROR = "amqp:decode-error"
_NOT_ALLOWED = "amqp:not-allowed"


class SaslClientState(TableEnum):
    """Where the client side of the exchange stands."""

    AWAIT_HEADER = "AWAIT_HEADER"  # the backend's SASL header
    AWAIT_MECHANISMS = "AWAIT_MECHANISMS"
    AWAIT_OUTCOME = "AWAIT_OUTCOME"
    AWAIT_AMQP_HEADER = "AWAIT_AMQP_HEADER"  # after the outcome (or without SASL): the backend's AMQP header
    DONE = "DONE"
    FAILED = "FAILED"


class SaslClientInput(TableEnum):
    """What the backend's bytes amounted to; drives :data:`TRANSITIONS`."""

    PARTIAL = "PARTIAL"
    SASL_HEADER = "SASL_HEADER"
    AMQP_HEADER = "AMQP_HEADER"
    MECHANISMS = "MECHANISMS"  # offered, ours among them
    NO_MECHANISM = "NO_MECHANISM"  # offered, ours not among them
    OUTCOME_OK = "OUTCOME_OK"
    OUTCOME_FAILED = "OUTCOME_FAILED"
    GARBAGE = "GARBAGE"
    DATA = "DATA"


_S = SaslClientState
_I = SaslClientInput

#: ``(state, input) -> next state``; a missing pair is a bug in this module.
TRANSITIONS: Mapping[tuple[SaslClientState, SaslClientInput], SaslClientState] = MappingProxyType(
    {
        (_S.AWAIT_HEADER, _I.PARTIAL): _S.AWAIT_HEADER,
        (_S.AWAIT_HEADER, _I.SASL_HEADER): _S.AWAIT_MECHANISMS,
        (_S.AWAIT_HEADER, _I.AMQP_HEADER): _S.FAILED,  # the backend has no SASL
        (_S.AWAIT_HEADER, _I.GARBAGE): _S.FAILED,
        (_S.AWAIT_MECHANISMS, _I.PARTIAL): _S.AWAIT_MECHANISMS,
        (_S.AWAIT_MECHANISMS, _I.MECHANISMS): _S.AWAIT_OUTCOME,
        (_S.AWAIT_MECHANISMS, _I.NO_MECHANISM): _S.FAILED,
        (_S.AWAIT_MECHANISMS, _I.GARBAGE): _S.FAILED,
        (_S.AWAIT_OUTCOME, _I.PARTIAL): _S.AWAIT_OUTCOME,
        (_S.AWAIT_OUTCOME, _I.OUTCOME_OK): _S.AWAIT_AMQP_HEADER,
        (_S.AWAIT_OUTCOME, _I.OUTCOME_FAILED): _S.FAILED,
        (_S.AWAIT_OUTCOME, _I.GARBAGE): _S.FAILED,
        (_S.AWAIT_AMQP_HEADER, _I.PARTIAL): _S.AWAIT_AMQP_HEADER,
        (_S.AWAIT_AMQP_HEADER, _I.AMQP_HEADER): _S.DONE,  # consumed, never passed on
        (_S.AWAIT_AMQP_HEADER, _I.SASL_HEADER): _S.FAILED,  # no SASL: the backend requires it
        (_S.AWAIT_AMQP_HEADER, _I.GARBAGE): _S.FAILED,  # another header (after SASL: the SASL one too)
        (_S.DONE, _I.DATA): _S.DONE,
        (_S.FAILED, _I.DATA): _S.FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class SaslClientDone:
    """The backend accepted the login and sent its AMQP header (consumed): pass ``remaining`` on."""

    remaining: bytes


@dataclass(frozen=True, slots=True)
class SaslClientFailed:
    """The backend refused (``code`` from its sasl-outcome) or cannot do our SASL (``code`` None)."""

    code: SaslCode | int | None
    reason: str


SaslClientEvent = SaslClientDone | SaslClientFailed | Passthrough


def _plain_response(username: str, password: str, authzid: str | None) -> bytes:
    """RFC 4616 ``[authzid] NUL authcid NUL passwd``."""
    parts = (authzid or "", username, password)
    for what, part in zip(("authzid", "username", "password"), parts, strict=True):
        if "\0" in part:
            raise ValueError(f"PLAIN {what} may not contain NUL")
    return "\0".join(parts).encode("utf-8")


class SaslClient:
    """The client side of one SASL exchange with a backend (see the module doc).

    ``mechanism`` is PLAIN (``username`` and ``password`` required,
    ``authzid`` optional), ANONYMOUS (``username``, if given, is sent as the
    trace string), EXTERNAL (``authzid``, if given, is the initial response)
    or None (no SASL).  ``hostname`` goes into the sasl-init hostname field.
    ``max_frame_size`` bounds the frames the backend may send.
    """

    __slots__ = (
        "_mechanism",
        "_username",
        "_state",
        "_buf",
        "_initial",
        "_max_frame_size",
        "_error",
        "_offered",
    )

    def __init__(
        self,
        mechanism: str | None,
        *,
        username: str | None = None,
        password: str | None = None,
        authzid: str | None = None,
        hostname: str | None = None,
        max_frame_size: int = MAX_SASL_FRAME_SIZE,
    ):
        if type(max_frame_size) is not int or not (
            MIN_SASL_FRAME_SIZE <= max_frame_size <= 0xFFFFFFFF
        ):
            raise ValueError(
                f"max_frame_size must be an int from {MIN_SASL_FRAME_SIZE} to {0xFFFFFFFF}, "
                f"not {max_frame_size!r}"
            )
        self._mechanism = mechanism
        self._username = username
        self._max_frame_size = max_frame_size
        self._buf = bytearray()
        self._error: RemoteProtocolError | None = None
        self._offered: tuple[str, ...] | None = None
        if mechanism is None:
            self._state = SaslClientState.AWAIT_AMQP_HEADER
            self._initial: bytes | None = b""
            return
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ValueError(
                f"unsupported SASL mechanism {mechanism!r} "
                f"(supported: {', '.join(sorted(SUPPORTED_MECHANISMS))})"
            )
        if mechanism == "PLAIN":
            if username is None or password is None:
                raise ValueError("PLAIN needs a username and a password")
            if not username:
                raise ValueError("PLAIN needs a non-empty username")
            response: bytes | None = _plain_response(username, password, authzid)
        elif mechanism == "ANONYMOUS":
            response = username.encode("utf-8") if username else None
        else:  # EXTERNAL
            response = authzid.encode("utf-8") if authzid else b""
        fields: list = [Symbol(mechanism), response, hostname]
        while fields[-1] is None:
            fields.pop()
        self._initial = SASL_HEADER + _encode_frame(_SASL_INIT, fields)
        self._state = SaslClientState.AWAIT_HEADER

    def __repr__(self) -> str:
        return (
            f"SaslClient(mechanism={self._mechanism!r}, username={self._username!r}, "
            f"state={self._state.name})"
        )

    # -- state ----------------------------------------------------------------------

    @property
    def state(self) -> SaslClientState:
        """Where the exchange stands."""
        return self._state

    @property
    def mechanism(self) -> str | None:
        """The mechanism used (None: no SASL)."""
        return self._mechanism

    @property
    def ready(self) -> bool:
        """The client's opening (its bytes after SASL) may be written to the backend now.

        True once the backend's outcome ``ok`` arrived, and from the start
        when there is no SASL.  (:class:`SaslClientDone` waits for the
        backend's AMQP header, which it sends only once it has the client's.)
        """
        state = self._state
        return state is SaslClientState.DONE or state is SaslClientState.AWAIT_AMQP_HEADER

    @property
    def offered(self) -> tuple[str, ...] | None:
        """The mechanisms the backend offered, once its sasl-mechanisms arrived."""
        return self._offered

    @property
    def error(self) -> RemoteProtocolError | None:
        """The protocol error that failed the exchange, if any."""
        return self._error

    @property
    def buffered(self) -> int:
        """Octets held for an incomplete header or frame (at most ``max_frame_size + 8``)."""
        return len(self._buf)

    def _transition(self, kind: SaslClientInput) -> None:
        try:
            self._state = TRANSITIONS[self._state, kind]
        except KeyError:
            raise LocalProtocolError(
                f"SASL client has no transition from {self._state.name} on {kind.name}"
            ) from None

    # -- output -----------------------------------------------------------------------

    def initial_bytes(self) -> bytes:
        """The SASL header and the sasl-init, to write to the backend first (once).

        Empty when ``mechanism`` is None.  The frame holding the credentials
        is dropped once handed out; a second call raises LocalProtocolError.
        """
        initial = self._initial
        if initial is None:
            raise LocalProtocolError("initial_bytes() was already taken")
        self._initial = None
        return initial

    # -- input ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[SaslClientEvent]:
        """Feed bytes from the backend; return the events they complete.

        ``data`` may be any slice of the stream, down to one octet.  Raises
        :class:`RemoteProtocolError` when the backend broke the protocol
        (the state is then ``FAILED``).
        """
        state = self._state
        if state is SaslClientState.DONE:
            self._transition(SaslClientInput.DATA)
            return [Passthrough(bytes(data))] if data else []
        if state is SaslClientState.FAILED:
            self._transition(SaslClientInput.DATA)
            return []
        if not data:
            return []
        self._buf += data
        try:
            if state is SaslClientState.AWAIT_AMQP_HEADER:
                return self._amqp_header()
            if state is SaslClientState.AWAIT_HEADER:
                return self._sasl_header()
            return self._frames()
        except RemoteProtocolError as exc:
            self._error = exc
            self._buf.clear()
            self._transition(SaslClientInput.GARBAGE)
            raise

    def _header(self) -> bytes | None:
        """The backend's 8-octet protocol header once complete; None while partial."""
        buf = self._buf
        n = len(buf)
        if n < 8:
            if buf[:4] != b"AMQP"[:n]:
                self._bad_header()
            return None
        header = bytes(buf[:8])
        if header not in (SASL_HEADER, AMQP_HEADER):
            self._bad_header()
        return header

    def _bad_header(self) -> NoReturn:
        buf = self._buf
        if buf[:4] == b"AMQP" and len(buf) >= 8:
            what = f"AMQP protocol id {buf[4]} version {buf[5]}.{buf[6]}.{buf[7]}"
        else:
            what = _clip(buf)
        raise RemoteProtocolError(
            f"the backend sent {what}; expected an AMQP protocol header", _FRAMING_ERROR
        )

    def _sasl_header(self) -> list[SaslClientEvent]:
        header = self._header()
        if header is None:
            self._transition(SaslClientInput.PARTIAL)
            return []
        if header == AMQP_HEADER:
            self._buf.clear()
            self._transition(SaslClientInput.AMQP_HEADER)
            return [
                SaslClientFailed(
                    None,
                    f"the backend does not speak SASL (it sent the AMQP header); "
                    f"cannot log in with {self._mechanism}",
                )
            ]
        del self._buf[:8]
        self._transition(SaslClientInput.SASL_HEADER)
        return self._frames()

    def _amqp_header(self) -> list[SaslClientEvent]:
        """The backend's AMQP header, after its outcome (or without SASL): consumed here."""
        buf = self._buf
        n = len(buf)
        if n < 8 and buf[:4] == b"AMQP"[:n]:
            self._transition(SaslClientInput.PARTIAL)
            return []
        header = bytes(buf[:8])
        if header == AMQP_HEADER:
            return self._done()
        if header == SASL_HEADER and self._mechanism is None:
            self._buf.clear()
            self._transition(SaslClientInput.SASL_HEADER)
            return [
                SaslClientFailed(
                    None, "the backend requires SASL, and the client did not authenticate"
                )
            ]
        if header == SASL_HEADER:
            what = "the SASL header again, after its sasl-outcome"
        elif header[:4] == b"AMQP" and n >= 8:
            what = (
                f"AMQP protocol id {buf[4]} version {buf[5]}.{buf[6]}.{buf[7]} "
                "(it does not speak AMQP 1.0)"
            )
        else:
            what = _clip(buf)
        raise RemoteProtocolError(
            f"the backend answered the AMQP 1.0 header (AMQP 0 1.0.0) with {what}", _FRAMING_ERROR
        )

    def _done(self) -> list[SaslClientEvent]:
        """The backend's AMQP header is in: drop it, hand back what followed."""
        remaining = bytes(self._buf[8:])
        self._buf.clear()
        self._transition(SaslClientInput.AMQP_HEADER)
        return [SaslClientDone(remaining)]

    def _frames(self) -> list[SaslClientEvent]:
        """Parse frames while the exchange runs; stop at the outcome."""
        buf = self._buf
        while True:
            n = len(buf)
            if n < 4:
                break
            size = int.from_bytes(buf[:4], "big")
            if size < 8:
                raise RemoteProtocolError(
                    f"SASL frame size {size} from the backend is below the minimum of 8",
                    _FRAMING_ERROR,
                )
            if size > self._max_frame_size:
                raise RemoteProtocolError(
                    f"SASL frame size {size} from the backend exceeds the limit of "
                    f"{self._max_frame_size} octets",
                    _FRAMING_ERROR,
                )
            if n < 5:
                break
            doff = buf[4]
            if doff < 2 or doff * 4 > size:
                raise RemoteProtocolError(
                    f"SASL frame from the backend has invalid data offset {doff} "
                    f"(frame size {size})",
                    _FRAMING_ERROR,
                )
            if n < 6:
                break
            if buf[5] != _FRAME_TYPE_SASL:
                raise RemoteProtocolError(
                    f"expected a SASL frame (type 1) from the backend, got frame type {buf[5]}",
                    _FRAMING_ERROR,
                )
            if n < size:
                break
            body = bytes(buf[doff * 4 : size])
            del buf[:size]
            events = self._frame(body)
            if events:
                return events
            if self._state is SaslClientState.AWAIT_AMQP_HEADER:  # outcome ok: a header follows
                return self._amqp_header()
        self._transition(SaslClientInput.PARTIAL)
        return []

    def _frame(self, body: bytes) -> list[SaslClientEvent]:
        """One complete SASL frame; events when the exchange ended, else []."""
        performative, fields = _performative(body)
        name = _PERFORMATIVE_NAMES.get(performative, "an unknown SASL frame")
        if self._state is SaslClientState.AWAIT_MECHANISMS:
            if performative != _SASL_MECHANISMS:
                raise RemoteProtocolError(
                    f"expected sasl-mechanisms from the backend, got {name}", _NOT_ALLOWED
                )
            offered = self._mechanisms(fields)
            self._offered = offered
            if self._mechanism not in offered:
                self._buf.clear()
                self._transition(SaslClientInput.NO_MECHANISM)
                return [
                    SaslClientFailed(
                        None,
                        f"the backend offers {', '.join(offered) or 'no mechanism'}, "
                        f"not {self._mechanism}",
                    )
                ]
            self._transition(SaslClientInput.MECHANISMS)
            return []
        # AWAIT_OUTCOME
        if performative == _SASL_CHALLENGE:
            raise RemoteProtocolError(
                f"unexpected sasl-challenge from the backend: {self._mechanism} "
                "takes a single step",
                _NOT_ALLOWED,
            )
        if performative != _SASL_OUTCOME:
            raise RemoteProtocolError(
                f"expected sasl-outcome from the backend, got {name}", _NOT_ALLOWED
            )
        code = fields[0] if fields else None
        if type(code) is not Scalar or code.kind != "ubyte":
            raise RemoteProtocolError(
                "sasl-outcome from the backend has no ubyte code", _DECODE_ERROR
            )
        if code.value == SaslCode.OK:
            self._transition(SaslClientInput.OUTCOME_OK)
            return []
        try:
            outcome: SaslCode | int = SaslCode(code.value)
            shown = f"{outcome.name.lower()} ({outcome.value})"
        except ValueError:
            outcome = code.value
            shown = str(outcome)
        self._buf.clear()
        self._transition(SaslClientInput.OUTCOME_FAILED)
        who = f" for user {self._username!r}" if self._username else ""
        return [
            SaslClientFailed(
                outcome,
                f"the backend refused SASL {self._mechanism}{who}: outcome {shown}",
            )
        ]

    @staticmethod
    def _mechanisms(fields: list) -> tuple[str, ...]:
        """sasl-server-mechanisms: one symbol or an array of symbols (mandatory)."""
        value = fields[0] if fields else None
        if type(value) is Symbol:
            return (str(value),)
        if type(value) is Array and value.kind == "symbol" and value.descriptor is None:
            return tuple(str(item) for item in value.items)
        raise RemoteProtocolError(
            "sasl-mechanisms from the backend has no symbol or array of symbols",
            _DECODE_ERROR,
        )
