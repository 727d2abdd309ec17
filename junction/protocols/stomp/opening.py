"""Sans-IO: the gateway's side of a STOMP client's opening.

A gateway listener routes a STOMP connection on its first frame, the CONNECT
(or STOMP): who logs in (``login``/``passcode``, checked by the gateway
itself so that USER_NAME and ROLE_NAME keys cannot be spoofed) and its
``client-id``.  :class:`StompOpening` reads exactly that much -- the
:class:`~junction.protocols.opening.Opening` reader for STOMP, with the same
interface as :class:`~junction.protocols.amqp.opening.AmqpOpening`::

    client                          gateway (StompOpening)
    [EOLs] CONNECT ...   -->        authenticate(StompCredentials)
                                    OpeningComplete(client_id, principal, replay)
    (SEND ...)           -->        (kept, untouched, in replay)

The rules are the STOMP connection's own
(:class:`~junction.protocols.stomp.connection.StompConnection`, the table the
broker core runs too): heart-beat EOLs before the CONNECT are read past; any
other first frame is refused with the broker's ERROR (``<COMMAND> before
CONNECT: the first frame must be CONNECT or STOMP``); bytes the codec refuses
get ``malformed frame: <why>``; a refused login gets ``Security Error
occurred: User name [<login>] or password is invalid``.  The gateway does not
negotiate the version: the backend does that with the replayed CONNECT.
Unlike AMQP, nothing is answered at once; the client waits for CONNECTED,
which comes from whoever serves the connection.

What happens next is the router's choice:

* **forward** or **serve locally** -- write :attr:`OpeningComplete.replay`
  (every byte the client sent, exactly as received: the CONNECT, the EOLs
  before it and whatever came behind it in the same read) to the backend,
  which authenticates the client again and answers its CONNECT;
* **refuse** -- :meth:`StompOpening.refuse`: an ERROR with Artemis's text
  (``Connection router <r> is not ready`` / ``rejected this connection``);
* any other end -- :meth:`StompOpening.close_with` (the target cannot be
  reached ...), :meth:`~StompOpening.timed_out` (``no CONNECT frame within
  <t> s``), :meth:`~StompOpening.too_large`.

STOMP has no redirect (:meth:`StompOpening.redirect` raises).  Every ERROR
the gateway writes is the broker core's
(:func:`~junction.protocols.stomp.builders.error_frame`): ``message``,
``receipt-id`` when the CONNECT (or the refused frame) asked for a receipt,
``content-type:text/plain``, the text as the body; where a header cannot be
carried, ``message:connection refused`` instead.

Events (:meth:`StompOpening.receive_data` returns a list of them; it never
raises for what the client sent):

* :class:`OpeningComplete` -- the CONNECT arrived and its login was accepted.
  Stop feeding bytes here; later reads belong to the backend (if fed anyway
  they come back as :class:`~junction.protocols.opening.Passthrough`).
* :class:`OpeningFailed` -- the ERROR is queued: write
  :meth:`StompOpening.data_to_send`, then close.  Bytes fed after it are
  ignored.

:class:`~junction.protocols.errors.LocalProtocolError` is raised only when
this module is misused (an answer after a failure, or twice).

Limits (named): frames are bounded by the codec's
:class:`~junction.protocols.stomp.codec.StompLimits`; the CONNECT frame must
end within ``max_bytes`` octets of the stream (EOLs before it included;
default the frame limit plus :data:`OPENING_SLACK`), so at most ``max_bytes``
octets are held until it is complete, and where a stream fails never depends
on how it was cut into reads.  The passcode is not kept: it goes to
``authenticate`` and is forgotten (the backend gets it again in the replay).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.opening import Complete, Failed, Opening, Passthrough, refusal_description
from junction.protocols.states import TableEnum
from junction.protocols.stomp.builders import login_refused
from junction.protocols.stomp.codec import StompCodec, StompLimits
from junction.protocols.stomp.connection import Action, StompConnection
from junction.protocols.stomp.frames import Frame, HeartBeat

__all__ = [
    "OPENING_SLACK",
    "TRANSITIONS",
    "OpeningComplete",
    "OpeningEvent",
    "OpeningFailed",
    "OpeningInput",
    "OpeningState",
    "Passthrough",
    "StompCredentials",
    "StompOpening",
    "too_large_description",
]

#: Octets a client may send before its CONNECT frame beyond the frame limit
#: (EOLs), in the default ``max_bytes``.
OPENING_SLACK = 64 * 1024


def too_large_description(limit: int) -> str:
    """The ERROR text for more than ``limit`` octets before the CONNECT was complete."""
    return f"more than {limit} bytes before the CONNECT frame was complete"


class OpeningState(TableEnum):
    """Where the opening stands."""

    AWAIT_CONNECT = "AWAIT_CONNECT"  # reading up to the first frame
    COMPLETE = "COMPLETE"  # OpeningComplete returned; bytes pass through
    ANSWERED = "ANSWERED"  # refuse / close_with / timed_out / too_large produced; close
    FAILED = "FAILED"  # OpeningFailed returned; close


class OpeningInput(TableEnum):
    """What the received bytes (or the caller) amounted to; drives :data:`TRANSITIONS`."""

    PARTIAL = "PARTIAL"  # no frame yet (heart-beat EOLs, part of a frame)
    CONNECT = "CONNECT"  # a CONNECT whose login was accepted
    LOGIN_REFUSED = "LOGIN_REFUSED"  # a CONNECT whose login was refused
    BAD_FRAME = "BAD_FRAME"  # another first frame, malformed bytes, too many bytes
    ANSWER = "ANSWER"  # refuse(), close_with(), timed_out() or too_large()
    DATA = "DATA"  # bytes once the opening is over


_S = OpeningState
_I = OpeningInput

#: ``(state, input) -> next state``.  A missing pair is a misuse by the caller.
TRANSITIONS: Mapping[tuple[OpeningState, OpeningInput], OpeningState] = MappingProxyType(
    {
        (_S.AWAIT_CONNECT, _I.PARTIAL): _S.AWAIT_CONNECT,
        (_S.AWAIT_CONNECT, _I.CONNECT): _S.COMPLETE,
        (_S.AWAIT_CONNECT, _I.LOGIN_REFUSED): _S.FAILED,
        (_S.AWAIT_CONNECT, _I.BAD_FRAME): _S.FAILED,
        (_S.AWAIT_CONNECT, _I.ANSWER): _S.ANSWERED,
        (_S.COMPLETE, _I.DATA): _S.COMPLETE,
        (_S.COMPLETE, _I.ANSWER): _S.ANSWERED,
        (_S.ANSWERED, _I.DATA): _S.ANSWERED,
        (_S.FAILED, _I.DATA): _S.FAILED,
    }
)


@dataclass(frozen=True, slots=True, repr=False)
class StompCredentials:
    """What a CONNECT presents: ``login`` and ``passcode`` (None when absent).  The repr hides
    the passcode."""

    login: str | None
    passcode: str | None

    def __repr__(self) -> str:
        passcode = None if self.passcode is None else "***"
        return f"StompCredentials(login={self.login!r}, passcode={passcode})"


@dataclass(frozen=True, slots=True, repr=False)
class OpeningComplete(Complete):
    """The CONNECT arrived and its login was accepted: route on it.

    ``client_id`` and ``host`` are its headers (None when absent), ``login``
    the login it presented, ``principal`` what ``authenticate`` returned.
    ``replay`` is every byte the client sent, exactly as received: write it
    to whoever serves the connection.
    """

    client_id: str | None
    login: str | None
    host: str | None
    principal: object
    replay: bytes

    @property
    def user(self) -> str | None:
        """The login the client presented."""
        return self.login

    def __repr__(self) -> str:
        return (
            f"OpeningComplete(client_id={self.client_id!r}, login={self.login!r}, "
            f"host={self.host!r}, principal={self.principal!r}, replay=<{len(self.replay)} bytes>)"
        )


@dataclass(frozen=True, slots=True)
class OpeningFailed(Failed):
    """The opening failed: write :meth:`StompOpening.data_to_send` (the ERROR), then close.

    ``reason`` is the ERROR's message; ``login_refused`` says the CONNECT's
    login was refused, ``user`` and ``client_id`` are what that CONNECT
    presented (None for the other failures).
    """

    reason: str
    login_refused: bool = False
    user: str | None = None
    client_id: str | None = None

    @property
    def condition(self) -> None:
        """STOMP has no error conditions."""
        return None


OpeningEvent = OpeningComplete | OpeningFailed | Passthrough


class StompOpening(Opening):
    """The gateway's side of one STOMP client's opening (see the module doc).

    ``authenticate`` is called synchronously with the CONNECT's
    :class:`StompCredentials` and returns a principal, or None to refuse.
    ``limits`` bound each frame (the codec's); ``max_bytes`` the stream up to
    the end of the CONNECT.
    """

    TRANSITIONS = TRANSITIONS
    PROTOCOL = "STOMP"

    __slots__ = (
        "_authenticate",
        "_connection",
        "_max_bytes",
        "_state",
        "_buf",
        "_out",
        "_receipt",
        "_failure",
    )

    def __init__(
        self,
        authenticate: Callable[[StompCredentials], object | None],
        *,
        limits: StompLimits | None = None,
        max_bytes: int | None = None,
    ):
        codec = StompCodec(limits, server=True)
        if max_bytes is None:
            max_bytes = codec.limits.max_frame_size + OPENING_SLACK
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive int, not {max_bytes!r}")
        self._authenticate = authenticate
        self._connection = StompConnection(codec)
        self._max_bytes = max_bytes
        self._state = OpeningState.AWAIT_CONNECT
        self._buf = bytearray()  # every byte so far, for the replay
        self._out = bytearray()
        self._receipt: str | None = None  # the CONNECT's receipt header, for the answers
        self._failure: OpeningFailed | None = None

    # -- state ------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Octets held until the CONNECT is complete (never more than ``max_bytes``)."""
        return len(self._buf)

    # -- output -----------------------------------------------------------------------

    def _encode_error(self, message: str, *, detail: str = "", receipt: str | None = None) -> bytes:
        codec = self._connection.codec
        frame = self._connection.error(message, detail=detail, receipt=receipt)
        if frame is None:  # pragma: no cover - the opening's table allows no answer then
            raise LocalProtocolError("the STOMP connection is closed already")
        try:
            return codec.send(frame)
        except LocalProtocolError:  # a header the codec cannot carry (the receipt)
            return codec.send(Frame("ERROR", (("message", "connection refused"),), frame.body))

    def _check_answer(self) -> None:
        if (self._state, OpeningInput.ANSWER) not in TRANSITIONS:
            raise LocalProtocolError(
                f"cannot answer a STOMP client in state {self._state.name}: "
                "only once, and not after a failure"
            )

    def _answer(self, message: str, *, detail: str = "") -> bytes:
        self._check_answer()
        data = bytes(self._out) + self._encode_error(message, detail=detail, receipt=self._receipt)
        self._out.clear()
        self._transition(OpeningInput.ANSWER)
        self._buf = bytearray()
        return data

    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        """The ERROR of Artemis's refusal for router ``status``; write it, then close.

        ``status`` is ``REFUSED_UNAVAILABLE`` ("is not ready") or
        ``REFUSED_USE_ANOTHER`` ("rejected this connection"), a name or a
        ``RouterStatus`` member; ``detail`` becomes the ERROR's body.
        """
        return self._answer(refusal_description(router_name, status), detail=detail)

    def close_with(
        self, condition: str | None, description: str | None = None, info: Mapping | None = None
    ) -> bytes:
        """An ERROR whose message is ``description``; write it, then close.

        STOMP has no error conditions or info: ``condition`` stands in for a
        missing ``description``, ``info`` is not written.
        """
        return self._answer(description or condition or "connection refused")

    def redirect(self, router_name: str, host: str, port: int) -> bytes:
        """STOMP has no redirect: always raises :class:`LocalProtocolError` (forward instead)."""
        raise LocalProtocolError("STOMP has no redirect: forward the connection instead")

    def timed_out(self, seconds: float) -> bytes:
        """The ERROR ``no CONNECT frame within <seconds> s`` (the broker core's words).

        Nothing (and no change) once the CONNECT has arrived.
        """
        self._check_answer()
        try:
            self._connection.timeout(seconds)
        except RemoteProtocolError as exc:
            return self._answer(str(exc))
        return b""  # the CONNECT arrived: nothing to say

    def too_large(self, limit: int) -> bytes:
        """The ERROR ``more than <limit> bytes before the CONNECT frame was complete``."""
        return self._answer(too_large_description(limit))

    # -- input ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[OpeningEvent]:
        """Feed bytes from the client; return the events they complete.

        ``data`` may be any slice of the stream, down to one octet.  Never
        raises for what the client sent; after each call write
        :meth:`data_to_send`.
        """
        state = self._state
        if state is OpeningState.COMPLETE:  # the listener should have stopped feeding
            self._transition(OpeningInput.DATA)
            return [Passthrough(bytes(data))] if data else []
        if state is not OpeningState.AWAIT_CONNECT:
            self._transition(OpeningInput.DATA)
            return []
        if not data:
            return []
        room = self._max_bytes - len(self._buf)
        self._buf += data
        codec = self._connection.codec
        malformed = None
        try:
            events = codec.receive_data(data[:room] if len(data) > room else data)
        except RemoteProtocolError as exc:
            events = getattr(exc, "events", None) or []  # frames before the bad bytes count
            malformed = exc
        for event in events:
            if isinstance(event, HeartBeat):
                continue
            return self._first_frame(event)  # the first frame decides
        if malformed is not None:
            return self._fail(f"malformed frame: {malformed}")
        if len(data) > room:
            return self._fail(too_large_description(self._max_bytes))
        self._transition(OpeningInput.PARTIAL)
        return []

    def _first_frame(self, frame: Frame) -> list[OpeningEvent]:
        connection = self._connection
        try:
            action = connection.receive(frame)
        except RemoteProtocolError as exc:  # not a CONNECT
            return self._fail(str(exc), receipt=frame.get("receipt"))
        if action is not Action.CONNECT:  # pragma: no cover - the table takes only CONNECT first
            raise LocalProtocolError(f"STOMP opening: {frame.command} first gave {action.name}")
        offer = connection.negotiate(frame)
        self._receipt = offer.receipt
        principal = self._authenticate(StompCredentials(offer.login, offer.passcode))
        if principal is None:
            message, detail = login_refused(offer.login)
            self._out += self._encode_error(message, detail=detail, receipt=offer.receipt)
            self._failure = OpeningFailed(message, True, offer.login, offer.client_id)
            self._transition(OpeningInput.LOGIN_REFUSED)
            self._buf = bytearray()
            return [self._failure]
        result = OpeningComplete(offer.client_id, offer.login, offer.host, principal, bytes(self._buf))
        self._transition(OpeningInput.CONNECT)
        self._buf = bytearray()
        return [result]

    def _fail(self, message: str, *, receipt: str | None = None) -> list[OpeningEvent]:
        self._out += self._encode_error(message, receipt=receipt)
        self._failure = OpeningFailed(message)
        self._transition(OpeningInput.BAD_FRAME)
        self._buf = bytearray()
        return [self._failure]
