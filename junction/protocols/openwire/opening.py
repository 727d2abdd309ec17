"""Sans-IO: the gateway's side of an OpenWire client's opening.

A gateway routes an OpenWire connection on its ConnectionInfo: it carries the
login (checked by the gateway itself) and the JMS client id, where Artemis's
router takes CLIENT_ID from (``OpenWireConnection.processAddConnection``).
:class:`OpenWireOpening` reads exactly that much, the
:class:`~junction.protocols.opening.Opening` reader for OpenWire.  What the
real client sends first (openwire.md sections 2, 6 and 9)::

    client (ActiveMQ Classic 5.17)              gateway (OpenWireOpening)
    WireFormatInfo (loose)             -->      kept for the replay; our own
                                       <--      WireFormatInfo at once (the client
                                                blocks every command until it has it)
    [ConnectionControl faultTolerant]  -->      kept (a failover: URL sends it first)
    [KeepAliveInfo]                    -->      kept
    ConnectionInfo clientId, login     -->      authenticate(OpenWireCredentials)
                                                OpeningComplete(client_id, principal, replay)
    (it waits for the ConnectionInfo's Response, from whoever serves the connection)

The commands after the WireFormatInfo are read in the settled encoding
(tight, as the real client and Artemis settle it).  What happens next is the
router's choice:

* **forward** or **serve locally** -- write :attr:`OpeningComplete.replay`
  to the backend: every byte the client sent, as received, but for its
  WireFormatInfo, which is replaced by one offering no more than the client
  and the gateway settled on (:func:`replayed_offer`).  A backend settles on
  options from its own offer and that one, so it can only agree with the
  gateway or offer less than the gateway does: Artemis's offer (version 12,
  tight, no cache, stack traces), which the gateway makes, is agreed by
  Artemis, by Junction's node (whose offer has the cache too) and by an
  ActiveMQ Classic broker with its defaults.  The backend answers with its
  own WireFormatInfo, which the client has already had from the gateway:
  whoever splices the streams drops that first frame
  (:func:`first_frame_size` measures it).
* **redirect** -- :meth:`OpenWireOpening.redirect`: a ConnectionControl
  naming the target (``reconnectTo`` and ``connectedBrokers`` with
  ``rebalanceConnection``, as Artemis's ``OpenWireRoutingHandler`` plus the
  ``reconnectTo`` the 5.17 client needs to move), then close.  A client
  follows it only when it connected with a ``failover:`` URL
  (``ConnectionInfo.faultTolerant``); Artemis refuses to redirect any other
  with an IllegalStateException, and so does this reader.
* **refuse** -- :meth:`OpenWireOpening.refuse`: an ExceptionResponse to the
  ConnectionInfo carrying Artemis's router text (Artemis closes without a
  word; the client then only sees the socket close).

A refused login gets ``java.lang.SecurityException`` in an ExceptionResponse
(the client force-closes on it); a command other than those above before the
ConnectionInfo, or bytes the codec refuses, the codec's or the connection's
error, in a ConnectionError.  Each is an :class:`OpeningFailed`: write
:meth:`~OpenWireOpening.data_to_send`, then close.  ``receive_data`` never
raises for what the client sent.

Limits (named): :data:`OPENING_MAX_FRAME_SIZE` bounds each frame before the
login is checked (the real client's opening frames are a few hundred bytes),
``max_bytes`` (default :data:`OPENING_MAX_BYTES`) the stream until the
ConnectionInfo, :data:`MAX_OPENING_COMMANDS` the commands before it.  The
password is not kept: it goes to ``authenticate`` and is forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import Complete, Failed, Opening, Passthrough, refusal_description
from junction.protocols.openwire.codec import (
    Negotiated,
    OpenWireCodec,
    OpenWireLimits,
    encode_frame,
)
from junction.protocols.openwire.commands import (
    ConnectionControl,
    ConnectionError,
    ConnectionInfo,
    ExceptionResponse,
    KeepAliveInfo,
)
from junction.protocols.openwire.errors import OpenWireProtocolError
from junction.protocols.openwire.marshal import JavaThrowable
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT, WireFormat, negotiate
from junction.protocols.states import TableEnum

__all__ = [
    "MAX_OPENING_COMMANDS",
    "NOT_FAULT_TOLERANT",
    "OPENING_MAX_BYTES",
    "OPENING_MAX_FRAME_SIZE",
    "TRANSITIONS",
    "OpenWireCredentials",
    "OpenWireOpening",
    "OpeningComplete",
    "OpeningFailed",
    "OpeningInput",
    "OpeningState",
    "first_frame_size",
    "replayed_offer",
    "unable_to_validate_user",
]

#: Largest frame before the login is checked (the real client's ConnectionInfo is about 100 bytes).
OPENING_MAX_FRAME_SIZE = 64 * 1024
#: Octets a client may send before its ConnectionInfo is complete.
OPENING_MAX_BYTES = 4 * OPENING_MAX_FRAME_SIZE
#: Commands before the ConnectionInfo (the real client sends one or two).
MAX_OPENING_COMMANDS = 32

#: Artemis's refusal of a redirect for a client without a ``failover:`` URL
#: (``OpenWireConnection.processAddConnection``), word for word
NOT_FAULT_TOLERANT = "Client not fault tolerant"

_SECURITY = "java.lang.SecurityException"
_ILLEGAL_STATE = "java.lang.IllegalStateException"
_JMS = "javax.jms.JMSException"


def unable_to_validate_user(address: str | None, user: str | None) -> str:
    """Artemis's AMQ229031 text for a refused login."""
    return (f"AMQ229031: Unable to validate user from {address}. Username: {user}; "
            "SSL certificate subject DN: unavailable")


def replayed_offer(client: WireFormat, settled: WireFormat) -> WireFormat:
    """The WireFormatInfo options a backend gets in the replay: the client's own, with the
    encoding options (and the version and frame size) the client and the gateway settled on,
    so that the backend cannot settle on more than the client reads and writes."""
    return replace(
        client,
        version=settled.version,
        tight_encoding=settled.tight_encoding,
        cache_enabled=settled.cache_enabled,
        cache_size=settled.cache_size,
        stack_trace=settled.stack_trace,
        size_prefix_disabled=settled.size_prefix_disabled,
        max_frame_size=settled.max_frame_size,
    )


def first_frame_size(data: bytes) -> int | None:
    """Octets of the first frame in ``data`` (size prefix included), None while its prefix is incomplete."""
    if len(data) < 4:
        return None
    return 4 + int.from_bytes(data[:4], "big")


class OpeningState(TableEnum):
    AWAIT_CONNECTION = "AWAIT_CONNECTION"  # reading up to the ConnectionInfo
    COMPLETE = "COMPLETE"  # OpeningComplete returned; bytes pass through
    ANSWERED = "ANSWERED"  # refuse / redirect / close_with / timed_out / too_large produced; close
    FAILED = "FAILED"  # OpeningFailed returned; close


class OpeningInput(TableEnum):
    PARTIAL = "PARTIAL"  # no command completed
    KEPT = "KEPT"  # the WireFormatInfo (answered with ours), a ConnectionControl, a KeepAliveInfo
    CONNECTION = "CONNECTION"  # a ConnectionInfo whose login was accepted
    LOGIN_REFUSED = "LOGIN_REFUSED"
    BAD_INPUT = "BAD_INPUT"  # another command, malformed bytes, a limit
    ANSWER = "ANSWER"
    DATA = "DATA"


_S = OpeningState
_I = OpeningInput

#: ``(state, input) -> next state``.  A missing pair is a misuse by the caller.
TRANSITIONS: Mapping = MappingProxyType({
    (_S.AWAIT_CONNECTION, _I.PARTIAL): _S.AWAIT_CONNECTION,
    (_S.AWAIT_CONNECTION, _I.KEPT): _S.AWAIT_CONNECTION,
    (_S.AWAIT_CONNECTION, _I.CONNECTION): _S.COMPLETE,
    (_S.AWAIT_CONNECTION, _I.LOGIN_REFUSED): _S.FAILED,
    (_S.AWAIT_CONNECTION, _I.BAD_INPUT): _S.FAILED,
    (_S.AWAIT_CONNECTION, _I.ANSWER): _S.ANSWERED,
    (_S.COMPLETE, _I.DATA): _S.COMPLETE,
    (_S.COMPLETE, _I.ANSWER): _S.ANSWERED,
    (_S.ANSWERED, _I.DATA): _S.ANSWERED,
    (_S.FAILED, _I.DATA): _S.FAILED,
})


@dataclass(frozen=True, slots=True, repr=False)
class OpenWireCredentials:
    """What a ConnectionInfo presents (None when absent); the repr hides the password."""

    username: str | None
    password: str | None
    client_id: str | None

    def __repr__(self) -> str:
        password = None if self.password is None else "***"
        return f"OpenWireCredentials(username={self.username!r}, password={password}, client_id={self.client_id!r})"


@dataclass(frozen=True, slots=True, repr=False)
class OpeningComplete(Complete):
    """The ConnectionInfo arrived and its login was accepted: route on it.

    ``fault_tolerant`` says the client connected with a ``failover:`` URL
    (only such a client follows a redirect); ``wire_format`` is what the
    gateway and the client settled on; ``replay`` what to write to whoever
    serves the connection.
    """

    client_id: str | None
    username: str | None
    principal: object
    fault_tolerant: bool
    wire_format: WireFormat
    replay: bytes

    @property
    def user(self) -> str | None:
        return self.username

    def __repr__(self) -> str:
        return (f"OpeningComplete(client_id={self.client_id!r}, username={self.username!r}, "
                f"principal={self.principal!r}, fault_tolerant={self.fault_tolerant}, "
                f"replay=<{len(self.replay)} bytes>)")


@dataclass(frozen=True, slots=True)
class OpeningFailed(Failed):
    """The opening failed: write :meth:`OpenWireOpening.data_to_send`, then close.

    ``condition`` is the Java exception class the answer carries.
    """

    reason: str
    condition: str
    login_refused: bool = False
    user: str | None = None
    client_id: str | None = None


class OpenWireOpening(Opening):
    """The gateway's side of one OpenWire client's opening (see the module doc).

    ``authenticate`` is called synchronously with the ConnectionInfo's
    :class:`OpenWireCredentials` and returns a principal, or None to refuse.
    ``offer`` is the wire format the gateway offers (the backend's), its
    ``MaxFrameSize`` included: the client keeps to the settled one for the
    whole connection, so it is the backend's frame limit, not
    :data:`OPENING_MAX_FRAME_SIZE` (which bounds only the frames read here);
    ``remote_address`` the client's, for the text of a refused login.
    """

    TRANSITIONS = TRANSITIONS
    PROTOCOL = "OpenWire"
    redirects = True

    __slots__ = ("_authenticate", "_offer", "_codec", "_max_bytes", "_remote_address", "_state", "_raw", "_commands",
                 "_info", "_out", "_failure", "_redirect_scheme", "_client_offer")

    def __init__(self, authenticate: Callable[[OpenWireCredentials], object | None], *,
                 offer: WireFormat | None = None, max_bytes: int = OPENING_MAX_BYTES,
                 remote_address: str | None = None,
                 redirect_scheme: Callable[[str, int], str] | None = None):
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive int, not {max_bytes!r}")
        self._authenticate = authenticate
        #: the client transport a redirect names for ``(host, port)``: ``tcp``, or ``ssl`` for
        #: a target whose connector has TLS (the client takes its TLS settings from its own JVM)
        self._redirect_scheme = redirect_scheme
        self._offer = offer if offer is not None else SERVER_WIRE_FORMAT
        self._codec = OpenWireCodec(self._offer, OpenWireLimits(max_frame_size=OPENING_MAX_FRAME_SIZE))
        self._max_bytes = max_bytes
        self._remote_address = remote_address
        self._state = _S.AWAIT_CONNECTION
        self._raw = bytearray()
        self._commands = 0
        self._info: ConnectionInfo | None = None
        self._out = bytearray()
        self._failure: OpeningFailed | None = None
        #: what the client's WireFormatInfo offered
        self._client_offer: WireFormat | None = None

    @property
    def buffered(self) -> int:
        return len(self._raw) if self._state is _S.AWAIT_CONNECTION else 0

    @property
    def fault_tolerant(self) -> bool:
        return self._info is not None and self._info.fault_tolerant

    def receive_data(self, data: bytes) -> list:
        if self._state is not _S.AWAIT_CONNECTION:
            self._transition(_I.DATA)
            return [Passthrough(bytes(data))] if self._state is _S.COMPLETE and data else []
        # The codec reads no byte past max_bytes, so where the opening fails never depends on
        # how the stream was cut; the bytes past it are kept for the replay, should the
        # ConnectionInfo end before them.
        room = self._max_bytes - len(self._raw)
        self._raw += data
        try:
            events = self._take(self._codec.receive_data(data[:room] if len(data) > room else data))
        except OpenWireProtocolError as exc:
            events = self._take(exc.events)
            if self._state is _S.AWAIT_CONNECTION:
                events.append(self._fail(_I.BAD_INPUT, str(exc), exc.java_class, exc.command))
            return events
        if self._state is _S.AWAIT_CONNECTION and len(data) > room:
            events.append(self._fail(_I.BAD_INPUT, f"more than {self._max_bytes} bytes before the ConnectionInfo",
                                     "java.io.IOException"))
        return events

    def _take(self, commands: list) -> list:
        for command in commands:
            self._commands += 1
            if self._commands > MAX_OPENING_COMMANDS:
                return [self._fail(_I.BAD_INPUT, f"more than {MAX_OPENING_COMMANDS} commands before the "
                                   "ConnectionInfo", "java.io.IOException")]
            if isinstance(command, Negotiated):
                self._client_offer = command.peer
                self._out += encode_frame(self._offer.info())  # the offer as given, not the opening's limit
                self._transition(_I.KEPT)
            elif isinstance(command, (ConnectionControl, KeepAliveInfo)) and self._codec.wire_format:
                self._transition(_I.KEPT)
            elif isinstance(command, ConnectionInfo) and self._codec.wire_format:
                return [self._connect(command)]
            else:
                what = "before the WireFormatInfo" if self._codec.wire_format is None else "before the ConnectionInfo"
                return [self._fail(_I.BAD_INPUT, f"{type(command).__name__} {what}", _ILLEGAL_STATE, command)]
        self._transition(_I.PARTIAL)
        return []

    def _connect(self, info: ConnectionInfo):
        self._info = info
        user = info.user_name
        principal = self._authenticate(OpenWireCredentials(user, info.password, info.client_id))
        if principal is None:
            return self._fail(_I.LOGIN_REFUSED, unable_to_validate_user(self._remote_address, user), _SECURITY,
                              info, login_refused=True)
        self._transition(_I.CONNECTION)
        settled = self._codec.wire_format
        # as the client settled it with the offer it got (the codec here reads with the opening's limit)
        with_client = negotiate(self._offer, self._client_offer)
        replay = encode_frame(replayed_offer(self._client_offer, with_client).info()) + self._raw[first_frame_size(self._raw):]
        return OpeningComplete(info.client_id, user, principal, info.fault_tolerant, settled, replay)

    def _reply(self, command, java_class: str, message: str) -> bytes:
        exception = JavaThrowable(java_class, message)
        if isinstance(command, ConnectionInfo) and command.response_required:
            answer = ExceptionResponse(correlation_id=command.command_id, exception=exception)
        else:
            answer = ConnectionError(exception=exception)
        if self._codec.wire_format is None:  # nothing but a WireFormatInfo may go before the negotiation
            return b""
        return self._codec.send(answer)

    def _fail(self, kind: OpeningInput, reason: str, java_class: str, command=None, *,
              login_refused: bool = False) -> OpeningFailed:
        self._transition(kind)
        self._out += self._reply(command, java_class, reason)
        info = self._info
        self._failure = OpeningFailed(reason, java_class, login_refused,
                                      info.user_name if info else None, info.client_id if info else None)
        self._raw = bytearray()
        return self._failure

    def _answer(self, command) -> bytes:
        if self._state is _S.FAILED or self._state is _S.ANSWERED:
            raise LocalProtocolError(f"the OpenWire opening was already answered ({self._state.name})")
        self._transition(_I.ANSWER)
        self._raw = bytearray()
        out = bytes(self._out)
        self._out.clear()
        return out + command

    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        text = refusal_description(router_name, status)
        return self._answer(self._reply(self._info, _JMS, f"{text}: {detail}" if detail else text))

    def close_with(self, condition: str | None, description: str | None = None, info=None) -> bytes:
        return self._answer(self._reply(self._info, condition or _JMS, description or ""))

    def redirect(self, router_name: str, host: str, port: int) -> bytes:
        """A ConnectionControl to ``tcp://host:port`` (``ssl://`` when ``redirect_scheme`` says
        so; an IPv6 host in brackets) for a ``failover:`` client; else Artemis's
        IllegalStateException (:data:`NOT_FAULT_TOLERANT`: the real client shows that text)."""
        if not self.fault_tolerant:
            return self._answer(self._reply(self._info, _ILLEGAL_STATE, NOT_FAULT_TOLERANT))
        scheme = self._redirect_scheme(host, port) if self._redirect_scheme is not None else "tcp"
        uri = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        control = ConnectionControl(connected_brokers=uri, reconnect_to=uri, rebalance_connection=True)
        return self._answer(self._codec.send(control))

    def timed_out(self, seconds: float) -> bytes:
        return self._answer(self._reply(self._info, "java.io.IOException",
                                        f"no ConnectionInfo within {seconds:g} s"))

    def too_large(self, limit: int) -> bytes:
        return self._answer(self._reply(self._info, "java.io.IOException",
                                        f"more than {limit} bytes before the ConnectionInfo was complete"))
