"""Sans-IO: the gateway's side of an AMQP 1.0 client's opening.

A gateway listener routes an AMQP connection on what the client says before
any session exists: who it authenticated as (SASL) and its container-id (the
Open frame, Artemis's CLIENT_ID key).  :class:`AmqpOpening` reads exactly that
much, with no Twisted, no sockets and no clock::

    client                          gateway (AmqpOpening)
    AMQP 3.1.0.0         -->
                         <--        AMQP 3.1.0.0 + sasl-mechanisms   (at once)
    sasl-init            -->        authenticate(credentials)
                         <--        sasl-outcome ok
    AMQP 0.1.0.0         -->
                         <--        AMQP 0.1.0.0                     (at once)
    open                 -->        OpeningComplete(container_id, ..., after_sasl)
    (begin, attach ...)  -->        (kept, untouched, in after_sasl)

The SASL layer is :class:`~junction.protocols.amqp.sasl.SaslServer`, so the
client is authenticated by the gateway itself (USER_NAME and ROLE_NAME keys
cannot be spoofed).  Each protocol header is answered as soon as the client's
has been read, as a broker does: the SASL header with ours and the
sasl-mechanisms, the AMQP header after SASL (or instead of it, where
``allow_no_sasl`` lets a client skip SASL) with our AMQP header.  A client
may wait for the server's header before it sends more (several AMQP 1.0
libraries do, by default or with pipelining off), so the gateway must not
wait for the Open to answer.  Our AMQP header is queued exactly once; after
it the gateway sends nothing of its own until the router has decided, and
whatever it writes then (:meth:`~AmqpOpening.redirect`,
:meth:`~AmqpOpening.refuse`, :meth:`~AmqpOpening.close_with`) does not
repeat it.  What happens next is the router's choice:

* **forward** -- the listener connects to the target, redoes SASL there on
  the client's behalf (:class:`~junction.protocols.amqp.sasl_client.SaslClient`
  with :attr:`OpeningComplete.mechanism`, ``username``, ``password``), then
  writes :attr:`OpeningComplete.after_sasl` -- every byte the client sent after
  its SASL exchange, exactly as received, starting with its AMQP header -- and
  splices the two connections.  The backend's SASL exchange and its AMQP
  header are consumed by the SaslClient (the client has had our header
  already; a second one would break its engine); the backend's Open and
  everything after it go to the client, whose engine completes its open
  against the backend.  The same holds when the gateway's own broker core
  serves the connection (the listener's local hand-over).
* **redirect** -- :meth:`AmqpOpening.redirect` gives the bytes Artemis's
  ``AMQPRoutingHandler`` writes: our AMQP header (unless already sent, which
  it is once the client's header was read), an Open whose properties
  are ``{amqp:connection-establishment-failed: true}``, then a Close with
  ``amqp:connection:redirect``, ``"Connection router <r> redirected this
  connection to <host>:<port>"`` and info ``{network-host: <host>, port:
  <int>}``.  Write them, then close.
* **refuse** -- :meth:`AmqpOpening.refuse`: the same Open, then a Close with
  ``amqp:connection:forced`` and ``"Connection router <r> is not ready"``
  (``REFUSED_UNAVAILABLE``) or ``"Connection router <r> rejected this
  connection"`` (``REFUSED_USE_ANOTHER``).
* anything else that must end the connection after SASL (the target cannot
  be reached, the backend refused the forwarded SASL or answered with another
  protocol header) -- :meth:`AmqpOpening.close_with`,
  the same Open then a Close with the condition and description given.

All frames the gateway writes are on channel 0 and name the gateway by the
``container_id`` given to the constructor.

Events (:meth:`AmqpOpening.receive_data` returns a list of them):

* :class:`OpeningComplete` -- SASL passed and the Open arrived.  Stop feeding
  bytes here: later reads belong to the backend (if fed anyway they come back
  as :class:`~junction.protocols.amqp.sasl.Passthrough`, untouched).
* :class:`OpeningFailed` -- the connection must close once
  :meth:`AmqpOpening.data_to_send` has been written.  What is queued says
  why, in the protocol's own terms: a failing sasl-outcome (bad password,
  unoffered mechanism); our SASL header (a bad protocol header, or the plain
  AMQP header when SASL is required); our AMQP header (a wrong AMQP-layer
  header after SASL, AMQP part 2.2); or an Open and a Close carrying the
  error condition, after the AMQP header queued when the client's arrived (a
  malformed first frame, a first frame that is not an Open, an Open too
  large).  Bytes fed after a failure are ignored.

:meth:`~AmqpOpening.receive_data` never raises for anything the client sent:
every protocol error becomes an :class:`OpeningFailed` whose ``condition`` is
the AMQP error condition (``amqp:unauthorized-access``,
``amqp:connection:framing-error``, ``amqp:decode-error``, ``amqp:not-allowed``
...).  :class:`~junction.protocols.errors.LocalProtocolError` is raised only
when this module is misused (:meth:`~AmqpOpening.redirect` before SASL is
over, twice, or after a failure).

**Credentials.**  With PLAIN, :class:`OpeningComplete` carries the client's
``password``: the gateway needs it to redo SASL with the backend.  It is held
in memory only, by the event and the :class:`SaslClient` built from it, until
the backend handshake; :class:`AmqpOpening` drops its own reference when it
returns the event, the event's ``repr`` never shows it, and the listener
should drop the event (keep what it logs or keys on) once the
:class:`~junction.protocols.amqp.sasl_client.SaslClient` has its initial
bytes.  Nothing here logs or writes it anywhere.  (Python cannot wipe a
``str``; what is bounded is how long anything refers to it.)

Limits (named):

* :data:`MAX_OPENING_BYTES` (``max_bytes``) -- the client's Open frame must
  end within this many octets after its SASL exchange (AMQP header and any
  empty frames before it included).  A frame whose declared size would cross
  it fails as soon as its four size octets arrive, so at most ``max_bytes``
  octets are held between reads before the Open is complete, and where the error is found
  never depends on how the stream was cut into reads.  Bytes that arrive in
  the same read as the end of the Open are kept with it in ``after_sasl``
  (the listener stops reading at OpeningComplete, so that is one read at
  most).
* SASL frames are bounded by the SaslServer's ``max_frame_size``
  (``max_sasl_frame_size``, default
  :data:`~junction.protocols.amqp.sasl.MAX_SASL_FRAME_SIZE`).

The Open is only read, never checked beyond what routing needs: a frame
header, a described list with descriptor ``0x10`` (or ``amqp:open:list``), a
string container-id, a string or null hostname, nothing after the list in
the frame body.  The other fields are the backend's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from junction.protocols.amqp.sasl import (
    AMQP_HEADER,
    MAX_SASL_FRAME_SIZE,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslCode,
    SaslCredentials,
    SaslFailed,
    SaslRequired,
    SaslServer,
)
from junction.protocols.amqp.types import Described, Scalar, Symbol, decode, encode
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.opening import (
    Complete,
    Failed,
    Opening,
    redirect_description,
    refusal_description,
)
from junction.protocols.states import TableEnum

__all__ = [
    "CONNECTION_ESTABLISHMENT_FAILED",
    "DEFAULT_CONTAINER_ID",
    "FORCED",
    "MAX_OPENING_BYTES",
    "MIN_OPENING_BYTES",
    "NETWORK_HOST",
    "PORT",
    "REDIRECT",
    "TRANSITIONS",
    "AmqpOpening",
    "OpeningComplete",
    "OpeningEvent",
    "OpeningFailed",
    "OpeningInput",
    "OpeningState",
    "Passthrough",
    "encode_close",
    "encode_open",
]

#: Default limit on the octets of a client's opening after SASL (header + Open).
MAX_OPENING_BYTES = 65536
#: ``max_bytes`` may not be lower: the AMQP header plus one frame of the
#: smallest size every peer must accept before negotiation (MIN-MAX-FRAME-SIZE).
MIN_OPENING_BYTES = 8 + 512

#: The container-id the gateway gives itself in the Opens it writes.
DEFAULT_CONTAINER_ID = "junction-gateway"

#: Open property saying the Open only precedes a Close (AMQP part 2.4.1).
CONNECTION_ESTABLISHMENT_FAILED = Symbol("amqp:connection-establishment-failed")
#: Close conditions of Artemis's AMQPRoutingHandler.
REDIRECT = "amqp:connection:redirect"
FORCED = "amqp:connection:forced"
#: Keys of the redirect condition's info map.
NETWORK_HOST = Symbol("network-host")
PORT = Symbol("port")

_FRAMING_ERROR = "amqp:connection:framing-error"
_NOT_ALLOWED = "amqp:not-allowed"
_DECODE_ERROR = "amqp:decode-error"
_UNAUTHORIZED = "amqp:unauthorized-access"
_INTERNAL_ERROR = "amqp:internal-error"

_FRAME_TYPE_AMQP = 0x00
_OPEN = 0x10
_CLOSE = 0x18
_ERROR = 0x1D
_PERFORMATIVES = {
    0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer",
    0x15: "disposition", 0x16: "detach", 0x17: "end", 0x18: "close",
}
_SYMBOL_PERFORMATIVES = {f"amqp:{name}:list": code for code, name in _PERFORMATIVES.items()}


# -- states ---------------------------------------------------------------------------


class OpeningState(TableEnum):
    """Where the opening stands."""

    SASL = "SASL"  # the SaslServer runs (it answers the SASL header at once)
    AWAIT_HEADER = "AWAIT_HEADER"  # SASL is over (or skipped); waiting for the AMQP header
    AWAIT_OPEN = "AWAIT_OPEN"  # our AMQP header is queued; waiting for the first non-empty frame, the Open
    COMPLETE = "COMPLETE"  # OpeningComplete returned; bytes pass through
    ANSWERED = "ANSWERED"  # redirect / refuse / close_with produced; close
    FAILED = "FAILED"  # OpeningFailed returned; close


class OpeningInput(TableEnum):
    """What the received bytes (or the caller) amounted to; drives :data:`TRANSITIONS`."""

    PARTIAL = "PARTIAL"
    SASL_DONE = "SASL_DONE"
    SASL_FAILED = "SASL_FAILED"
    HEADER = "HEADER"
    BAD_HEADER = "BAD_HEADER"
    EMPTY_FRAME = "EMPTY_FRAME"
    OPEN = "OPEN"
    BAD_FRAME = "BAD_FRAME"
    ANSWER = "ANSWER"  # redirect(), refuse() or close_with()
    DATA = "DATA"  # bytes once the opening is over


_S = OpeningState
_I = OpeningInput

#: ``(state, input) -> next state``.  A missing pair is a bug in this module
#: (:class:`LocalProtocolError`) or a misuse by the caller.
TRANSITIONS: Mapping[tuple[OpeningState, OpeningInput], OpeningState] = MappingProxyType(
    {
        (_S.SASL, _I.PARTIAL): _S.SASL,
        (_S.SASL, _I.SASL_DONE): _S.AWAIT_HEADER,
        (_S.SASL, _I.SASL_FAILED): _S.FAILED,
        (_S.AWAIT_HEADER, _I.PARTIAL): _S.AWAIT_HEADER,
        (_S.AWAIT_HEADER, _I.HEADER): _S.AWAIT_OPEN,  # queues our AMQP header
        (_S.AWAIT_HEADER, _I.BAD_HEADER): _S.FAILED,  # queues our AMQP header (part 2.2)
        (_S.AWAIT_HEADER, _I.ANSWER): _S.ANSWERED,  # our header, then Open + Close
        (_S.AWAIT_OPEN, _I.PARTIAL): _S.AWAIT_OPEN,
        (_S.AWAIT_OPEN, _I.EMPTY_FRAME): _S.AWAIT_OPEN,
        (_S.AWAIT_OPEN, _I.OPEN): _S.COMPLETE,
        (_S.AWAIT_OPEN, _I.BAD_FRAME): _S.FAILED,  # Open + Close (the header went already)
        (_S.AWAIT_OPEN, _I.ANSWER): _S.ANSWERED,  # Open + Close
        (_S.COMPLETE, _I.DATA): _S.COMPLETE,
        (_S.COMPLETE, _I.ANSWER): _S.ANSWERED,  # Open + Close
        (_S.ANSWERED, _I.DATA): _S.ANSWERED,
        (_S.FAILED, _I.DATA): _S.FAILED,
    }
)


# -- events ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, repr=False)
class OpeningComplete(Complete):
    """SASL passed and the client's Open arrived: route on it.

    ``container_id`` and ``hostname`` are the Open's fields (``hostname``
    None when the client sent none).  ``mechanism`` is the SASL mechanism the
    client used (None when it skipped SASL and ``allow_no_sasl`` let it),
    ``principal`` what ``authenticate`` returned (None without SASL),
    ``username``/``password``/``authzid`` the PLAIN credentials (None for
    the other mechanisms; the ``password`` is kept only so the gateway can
    redo SASL with the backend: see the module doc), ``sasl_hostname`` the
    sasl-init hostname (or the ``hostname`` given to :class:`AmqpOpening`,
    e.g. the TLS SNI name).  ``after_sasl`` is every byte the client sent
    after its SASL exchange, exactly as received: its AMQP header, the Open
    and whatever it pipelined behind it.  Replay it to the backend once
    SASL is redone there.

    As every opening reader's :class:`~junction.protocols.opening.Complete`:
    ``client_id`` is the ``container_id``, ``replay`` is ``after_sasl`` and
    ``user`` the ``username``.
    """

    container_id: str
    hostname: str | None
    mechanism: str | None
    principal: object
    username: str | None
    password: str | None
    after_sasl: bytes
    authzid: str | None = None
    sasl_hostname: str | None = None

    @property
    def client_id(self) -> str:
        """The container-id (Artemis's CLIENT_ID key)."""
        return self.container_id

    @property
    def replay(self) -> bytes:
        """What to write to the backend once SASL is redone there: :attr:`after_sasl`."""
        return self.after_sasl

    @property
    def user(self) -> str | None:
        """The PLAIN user name (None for the other mechanisms)."""
        return self.username

    def __repr__(self) -> str:  # never show a password
        password = None if self.password is None else "***"
        return (
            f"OpeningComplete(container_id={self.container_id!r}, hostname={self.hostname!r}, "
            f"mechanism={self.mechanism!r}, principal={self.principal!r}, "
            f"username={self.username!r}, password={password}, "
            f"after_sasl=<{len(self.after_sasl)} bytes>, authzid={self.authzid!r}, "
            f"sasl_hostname={self.sasl_hostname!r})"
        )


@dataclass(frozen=True, slots=True)
class OpeningFailed(Failed):
    """The opening failed: write :meth:`AmqpOpening.data_to_send`, then close.

    ``reason`` says what the client did wrong (for the log); ``condition`` is
    the AMQP error condition (``amqp:unauthorized-access`` for a refused
    login, ``amqp:connection:framing-error``, ``amqp:decode-error``,
    ``amqp:not-allowed`` ...).
    """

    reason: str
    condition: str | None

    @property
    def login_refused(self) -> bool:
        """Whether the client's SASL login was refused (``amqp:unauthorized-access``)."""
        return self.condition == _UNAUTHORIZED

    @property
    def user(self) -> None:
        """Not told: a failed SASL exchange yields no user name."""
        return None

    @property
    def client_id(self) -> None:
        """Not told: the container-id comes in the Open, after SASL."""
        return None


OpeningEvent = OpeningComplete | OpeningFailed | Passthrough


# -- frames ---------------------------------------------------------------------------


def _frame(body: bytes) -> bytes:
    """An AMQP frame on channel 0: size, doff 2, type 0, channel 0, body."""
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body


def encode_open(container_id: str, properties: Mapping | None = None) -> bytes:
    """An Open frame on channel 0 with only ``container_id`` and ``properties`` set."""
    fields: list[Any] = [container_id]
    if properties:
        fields += [None] * 8 + [dict(properties)]
    return _frame(encode(Described(Scalar("ulong", _OPEN), fields)))


def encode_close(
    condition: str | None = None, description: str | None = None, info: Mapping | None = None
) -> bytes:
    """A Close frame on channel 0, with an error when ``condition`` is given."""
    fields: list[Any] = []
    if condition is not None:
        error = [Symbol(condition), description, dict(info) if info else None]
        while error[-1] is None:
            error.pop()
        fields.append(Described(Scalar("ulong", _ERROR), error))
    return _frame(encode(Described(Scalar("ulong", _CLOSE), fields)))


def _clip(raw: bytes | bytearray, limit: int = 32) -> str:
    raw = bytes(raw)
    if len(raw) > limit:
        return repr(raw[:limit]) + "..."
    return repr(raw)


class _Bad(Exception):
    """A client error in the AMQP layer: ``reason`` and the AMQP ``condition``."""

    def __init__(self, reason: str, condition: str):
        super().__init__(reason)
        self.reason = reason
        self.condition = condition


# -- the state machine ----------------------------------------------------------------


class AmqpOpening(Opening):
    """The gateway's side of one AMQP client's opening (see the module doc).

    ``authenticate`` is called synchronously with the client's
    :class:`~junction.protocols.amqp.sasl.SaslCredentials` and returns a
    truthy principal or None (as for :class:`SaslServer`).  ``mechanisms``
    are offered in order.  ``allow_no_sasl`` lets a client skip SASL (then
    ``mechanism`` and ``principal`` are None and the listener decides what
    an unauthenticated client may do).  ``max_bytes`` bounds the opening
    after SASL (:data:`MAX_OPENING_BYTES`); ``max_sasl_frame_size`` bounds
    SASL frames.  ``hostname`` stands in for the sasl-init hostname (the TLS
    SNI name).  ``container_id`` names the gateway in the Opens it writes.

    It is the AMQP :class:`~junction.protocols.opening.Opening` reader.
    """

    TRANSITIONS = TRANSITIONS
    PROTOCOL = "AMQP"

    #: AMQP has a native redirect (Artemis's ``amqp:connection:redirect``).
    redirects = True

    __slots__ = (
        "_sasl",
        "_authenticate",
        "_credentials",
        "_max_bytes",
        "_container_id",
        "_state",
        "_buf",
        "_pos",
        "_out",
        "_header_sent",
        "_mechanism",
        "_principal",
        "_sasl_hostname",
        "_failure",
    )

    def __init__(
        self,
        authenticate: Callable[[SaslCredentials], object | None],
        *,
        mechanisms: Sequence[str] = ("PLAIN", "ANONYMOUS"),
        allow_no_sasl: bool = False,
        max_bytes: int = MAX_OPENING_BYTES,
        max_sasl_frame_size: int = MAX_SASL_FRAME_SIZE,
        hostname: str | None = None,
        container_id: str = DEFAULT_CONTAINER_ID,
    ):
        if type(max_bytes) is not int or not MIN_OPENING_BYTES <= max_bytes <= 0xFFFFFFFF:
            raise ValueError(
                f"max_bytes must be an int from {MIN_OPENING_BYTES} to {0xFFFFFFFF}, "
                f"not {max_bytes!r}"
            )
        if not isinstance(container_id, str):
            raise TypeError(f"container_id must be a str, not {type(container_id).__name__}")
        self._authenticate = authenticate
        self._sasl = SaslServer(
            mechanisms,
            self._check_credentials,
            allow_no_sasl=allow_no_sasl,
            max_frame_size=max_sasl_frame_size,
            hostname=hostname,
        )
        self._credentials: SaslCredentials | None = None
        self._max_bytes = max_bytes
        self._container_id = container_id
        self._state = OpeningState.SASL
        self._buf = bytearray()  # everything after SASL, as received
        self._pos = 0  # where parsing stands in _buf
        self._out = bytearray()
        self._header_sent = False
        self._mechanism: str | None = None
        self._principal: object = None
        self._sasl_hostname: str | None = hostname
        self._failure: OpeningFailed | None = None

    # -- state ----------------------------------------------------------------------

    @property
    def container_id(self) -> str:
        """The gateway's container-id in the Opens it writes."""
        return self._container_id

    @property
    def sasl(self) -> SaslServer:
        """The SASL server (its state, offered mechanisms, error)."""
        return self._sasl

    @property
    def buffered(self) -> int:
        """Octets held: an incomplete SASL frame, or the opening after SASL."""
        return self._sasl.buffered + len(self._buf)

    # -- output -----------------------------------------------------------------------

    def redirect(self, router_name: str, host: str, port: int) -> bytes:
        """The bytes of Artemis's AMQP redirect to ``host:port``; write them, then close.

        Our AMQP header (only before the client's was read: it is never
        sent twice), an Open with
        ``{amqp:connection-establishment-failed: true}``, a Close with
        ``amqp:connection:redirect``, ``"Connection router <r> redirected this
        connection to <host>:<port>"`` and info ``{network-host: host, port:
        int}``.  Anything still queued by :meth:`data_to_send` comes first.
        """
        if not isinstance(host, str):
            raise TypeError(f"host must be a str, not {type(host).__name__}")
        if type(port) is not int or not 0 <= port <= 0xFFFF:
            raise ValueError(f"port must be an int from 0 to 65535, not {port!r}")
        return self.close_with(
            REDIRECT,
            redirect_description(router_name, host, port),
            {NETWORK_HOST: host, PORT: Scalar("int", port)},
        )

    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        """The bytes of Artemis's AMQP refusal; write them, then close.

        ``status`` is ``REFUSED_UNAVAILABLE`` ("is not ready") or
        ``REFUSED_USE_ANOTHER`` ("rejected this connection"), as a string or
        a :class:`~junction.routing.targets.RouterStatus` member.  The
        condition is ``amqp:connection:forced``.  ``detail`` is not written:
        Artemis's refusal has the description only.
        """
        return self.close_with(FORCED, refusal_description(router_name, status))

    def close_with(
        self, condition: str, description: str | None = None, info: Mapping | None = None
    ) -> bytes:
        """End the connection after SASL with an error: the bytes to write, then close.

        Queued bytes, our AMQP header (only before the client's was read:
        it is never sent twice), an Open with
        ``{amqp:connection-establishment-failed: true}`` and a Close with
        ``condition``, ``description`` and ``info``.  Allowed once SASL is
        over (or was skipped) and only once; raises
        :class:`LocalProtocolError` otherwise.
        """
        if (self._state, OpeningInput.ANSWER) not in TRANSITIONS:
            raise LocalProtocolError(
                f"cannot answer an AMQP client in state {self._state.name}: "
                "only once, after SASL and before any failure"
            )
        out = self._out
        if not self._header_sent:
            out += AMQP_HEADER
            self._header_sent = True
        out += encode_open(self._container_id, {CONNECTION_ESTABLISHMENT_FAILED: True})
        out += encode_close(condition, description, info)
        self._transition(OpeningInput.ANSWER)
        self._forget()
        return self.data_to_send()

    # -- input ------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[OpeningEvent]:
        """Feed bytes from the client; return the events they complete.

        ``data`` may be any slice of the stream, down to one octet.  Never
        raises for what the client sent (see the module doc); after each call
        write :meth:`data_to_send`.
        """
        state = self._state
        if state is OpeningState.COMPLETE:  # the listener should have stopped feeding
            self._transition(OpeningInput.DATA)
            return [Passthrough(bytes(data))] if data else []
        if state is OpeningState.ANSWERED or state is OpeningState.FAILED:
            self._transition(OpeningInput.DATA)
            return []
        if not data:
            return []
        if state is OpeningState.SASL:
            data = self._sasl_step(data)
            if data is None:  # SASL goes on, or failed
                return [self._failure] if self._state is OpeningState.FAILED else []
            if not data:
                return []
        self._buf += data
        try:
            return self._parse()
        except _Bad as bad:
            return self._fail_amqp(bad.reason, bad.condition)

    def _check_credentials(self, credentials: SaslCredentials) -> object | None:
        """The SaslServer's callback: remember what the client presented, then ask."""
        principal = self._authenticate(credentials)
        if principal:
            self._credentials = credentials
        return principal

    def _sasl_step(self, data: bytes) -> bytes | None:
        """Feed the SaslServer: the bytes after SASL when it is over, else None."""
        sasl = self._sasl
        try:
            events = sasl.receive_data(data)
        except RemoteProtocolError as exc:
            self._out += sasl.data_to_send()
            self._sasl_failed(str(exc), exc.code or _FRAMING_ERROR)
            return None
        self._out += sasl.data_to_send()
        for event in events:
            if isinstance(event, SaslAuthenticated):
                self._mechanism = event.mechanism
                self._principal = event.principal
                self._sasl_hostname = event.hostname
                self._transition(OpeningInput.SASL_DONE)
                return event.remaining
            if isinstance(event, NoSasl):
                self._transition(OpeningInput.SASL_DONE)
                return event.remaining
            if isinstance(event, SaslFailed):
                condition = _UNAUTHORIZED if event.code == SaslCode.AUTH else _INTERNAL_ERROR
                self._sasl_failed(event.reason, condition)
                return None
            if isinstance(event, SaslRequired):
                self._sasl_failed(
                    "the client sent the AMQP header without SASL, and SASL is required",
                    _UNAUTHORIZED,
                )
                return None
        self._transition(OpeningInput.PARTIAL)
        return None

    def _sasl_failed(self, reason: str, condition: str) -> None:
        self._failure = OpeningFailed(reason, condition)
        self._transition(OpeningInput.SASL_FAILED)
        self._forget()

    def _parse(self) -> list[OpeningEvent]:
        buf = self._buf
        if self._state is OpeningState.AWAIT_HEADER:
            n = len(buf)
            if n < 8:
                if buf != AMQP_HEADER[:n]:
                    return self._bad_header()
                self._transition(OpeningInput.PARTIAL)
                return []
            if buf[:8] != AMQP_HEADER:
                return self._bad_header()
            self._pos = 8
            # answered at once, as a broker does: a client may wait for it before its Open
            self._out += AMQP_HEADER
            self._header_sent = True
            self._transition(OpeningInput.HEADER)
        while True:
            pos = self._pos
            avail = len(buf) - pos
            if avail < 4:
                break
            size = int.from_bytes(buf[pos : pos + 4], "big")
            if size < 8:
                raise _Bad(f"AMQP frame size {size} is below the minimum of 8", _FRAMING_ERROR)
            if pos + size > self._max_bytes:
                raise _Bad(
                    f"AMQP frame of {size} octets at offset {pos} of the opening would end "
                    f"beyond the gateway's opening limit of {self._max_bytes} octets",
                    _FRAMING_ERROR,
                )
            if avail < 5:
                break
            doff = buf[pos + 4]
            if doff < 2 or doff * 4 > size:
                raise _Bad(
                    f"AMQP frame has invalid data offset {doff} (frame size {size})",
                    _FRAMING_ERROR,
                )
            if avail < 6:
                break
            ftype = buf[pos + 5]
            if ftype != _FRAME_TYPE_AMQP:
                kind = "a SASL frame" if ftype == 1 else f"frame type {ftype}"
                raise _Bad(
                    f"expected an AMQP frame (type 0) after SASL, got {kind}", _FRAMING_ERROR
                )
            if avail < size:
                break
            self._pos = pos + size
            if size == doff * 4:  # an empty frame (a heartbeat): nothing to read
                self._transition(OpeningInput.EMPTY_FRAME)
                continue
            return self._open(bytes(buf[pos + doff * 4 : pos + size]))
        self._transition(OpeningInput.PARTIAL)
        return []

    def _open(self, body: bytes) -> list[OpeningEvent]:
        try:
            value, end = decode(body, 0)
        except RemoteProtocolError as exc:
            raise _Bad(f"the client's first AMQP frame is malformed: {exc}", _DECODE_ERROR) from None
        if not isinstance(value, Described):
            raise _Bad(
                f"the client's first AMQP frame is not a performative (starts with 0x{body[0]:02x})",
                _DECODE_ERROR,
            )
        descriptor = value.descriptor
        if isinstance(descriptor, Scalar) and descriptor.kind == "ulong":
            code = descriptor.value
        elif isinstance(descriptor, Symbol):
            code = _SYMBOL_PERFORMATIVES.get(descriptor)
        else:
            code = None
        if code != _OPEN:
            name = _PERFORMATIVES.get(code) if code is not None else None
            shown = repr(descriptor)
            if len(shown) > 64:
                shown = shown[:64] + "..."
            what = name or f"an unknown performative (descriptor {shown})"
            raise _Bad(f"expected an open as the first AMQP frame, got {what}", _NOT_ALLOWED)
        if type(value.value) is not list:
            raise _Bad(f"open is not a described list ({type(value.value).__name__})", _DECODE_ERROR)
        if end != len(body):
            raise _Bad(f"open frame has {len(body) - end} octets after the open", _DECODE_ERROR)
        fields = value.value
        container_id = fields[0] if fields else None
        if type(container_id) is not str:
            what = "missing" if container_id is None else f"a {type(container_id).__name__}"
            raise _Bad(f"open container-id is {what}, not a string", _DECODE_ERROR)
        hostname = fields[1] if len(fields) > 1 else None
        if hostname is not None and type(hostname) is not str:
            raise _Bad(f"open hostname is a {type(hostname).__name__}, not a string", _DECODE_ERROR)

        credentials = self._credentials
        result = OpeningComplete(
            container_id=container_id,
            hostname=hostname,
            mechanism=self._mechanism,
            principal=self._principal,
            username=credentials.username if credentials is not None else None,
            password=credentials.password if credentials is not None else None,
            after_sasl=bytes(self._buf),
            authzid=credentials.authzid if credentials is not None else None,
            sasl_hostname=self._sasl_hostname,
        )
        self._transition(OpeningInput.OPEN)
        self._forget()
        return [result]

    def _bad_header(self) -> list[OpeningEvent]:
        buf = self._buf
        got = bytes(buf[:8])
        if got[:4] == b"AMQP" and len(got) == 8:
            what = f"protocol id {got[4]} version {got[5]}.{got[6]}.{got[7]}"
        else:
            what = _clip(buf)
        reason = f"expected the AMQP header {AMQP_HEADER!r} after SASL, got {what}"
        self._out += AMQP_HEADER  # part 2.2: answer with the header we support, then close
        self._header_sent = True
        self._failure = OpeningFailed(reason, _FRAMING_ERROR)
        self._transition(OpeningInput.BAD_HEADER)
        self._forget()
        return [self._failure]

    def _fail_amqp(self, reason: str, condition: str) -> list[OpeningEvent]:
        out = self._out
        if not self._header_sent:
            out += AMQP_HEADER
            self._header_sent = True
        out += encode_open(self._container_id, {CONNECTION_ESTABLISHMENT_FAILED: True})
        out += encode_close(condition, reason)
        self._failure = OpeningFailed(reason, condition)
        self._transition(OpeningInput.BAD_FRAME)
        self._forget()
        return [self._failure]

    def _forget(self) -> None:
        """Drop the credentials and the held bytes once the opening is decided."""
        self._credentials = None
        self._buf = bytearray()
        self._pos = 0
