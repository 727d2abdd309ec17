"""Sans-IO: the server side of one STOMP connection, as a state table.

The codec (:mod:`.codec`) turns bytes into frames; this module says what a
server does with each frame in each state of the connection, negotiates the
version and the heart-beats, and builds the server's replies (with
:mod:`.builders`).  No Twisted, no sockets, no clock: the broker core's
adapter (``junction/brokercore/stomp_server.py``) and the gateway's opening
reader (:mod:`.opening`) both drive it::

    AWAIT_CONNECT --CONNECT/STOMP--> CONNECTING --accept()--> CONNECTED
    CONNECTED --DISCONNECT--> DISCONNECTING --close()--> CLOSED
    any state but CLOSED --error()--> CLOSED (an ERROR frame is written)

:data:`TRANSITIONS` is the whole table: ``(state, input) -> (next state,
action)``.  The inputs (:class:`ConnectionInput`) are the client commands,
``OTHER`` (a frame with any other command), ``HEARTBEAT`` (an EOL between
frames) and what the adapter tells: ``CONNECT_TIMEOUT`` (its connect timer
fired), ``ACCEPT`` (:meth:`StompConnection.accept`: the login is accepted),
``ERROR`` (:meth:`StompConnection.error`: the connection ends with an ERROR
frame) and ``CLOSE`` (:meth:`StompConnection.close`: the connection is
closed, after a DISCONNECT or because the transport is gone).  The actions
(:class:`Action`):

* ``CONNECT`` -- the frame is the CONNECT (or STOMP): read it with
  :meth:`StompConnection.negotiate`, authenticate the login, then
  :meth:`~StompConnection.accept` (write the CONNECTED it returns) or
  :meth:`~StompConnection.error`;
* ``HANDLE`` -- the adapter's handler for the command (SEND, SUBSCRIBE ...;
  DISCONNECT moves to DISCONNECTING first);
* ``IGNORE`` -- nothing: a heart-beat, a frame after DISCONNECT or after the
  connection closed, a timer that fired too late;
* ``WRITE`` -- write the frame the method returned (CONNECTED, ERROR);
* ``CLOSE`` -- the connection is closed;
* ``NOT_CONNECTED``, ``ALREADY_CONNECTED``, ``UNKNOWN_COMMAND``,
  ``NO_CONNECT`` -- the client broke a rule: :meth:`StompConnection.receive`
  (or :meth:`~StompConnection.timeout`) raises :class:`StompError` (a
  :class:`~junction.protocols.errors.RemoteProtocolError`) with the text of
  :data:`REJECTIONS`, and the state stays as it was: the adapter answers with
  :meth:`~StompConnection.error`, which closes.

A command the negotiated version does not define (:data:`UNDEFINED_COMMANDS`:
NACK in STOMP 1.0) is rejected the same way, where the table would handle it.
An input the table has no row for is a bug in the caller
(:class:`~junction.protocols.errors.LocalProtocolError`): ``ACCEPT``
outside CONNECTING, a frame fed while CONNECTING (the adapter decides about
the CONNECT before it reads on).

Negotiation (STOMP 1.2 section "Protocol Negotiation", "Heart-beating"):

* version -- the highest of our versions in the CONNECT's ``accept-version``
  (none means 1.0); none in common gets :func:`version_error_frame
  <junction.protocols.stomp.builders.version_error_frame>` and the
  connection closes (:meth:`StompConnection.refuse_version`).  The codec
  escapes headers per the version from :meth:`~StompConnection.accept` on.
  A 1.1/1.2 CONNECT without ``host`` is accepted, as Artemis accepts it.
* heart-beat (1.1 and 1.2) -- the client's ``heart-beat: cx,cy``; we send
  every ``cy`` ms when it is not 0 and expect the client's every ``cx`` ms
  when it is not 0 (:class:`HeartBeats`), and say ``heart-beat: cy,cx`` in
  CONNECTED.  Timers, and how many missed intervals end the connection, are
  the adapter's (it has the clock).  A malformed value is refused by
  :meth:`~StompConnection.accept` (:class:`StompError`), after the version
  is set, so the ERROR is written in the negotiated version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.states import TableEnum
from junction.protocols.stomp.builders import connected_frame, error_frame, version_error_frame
from junction.protocols.stomp.codec import StompCodec
from junction.protocols.stomp.frames import STOMP_VERSIONS, Frame, HeartBeat

__all__ = [
    "REJECTIONS",
    "TRANSITIONS",
    "UNDEFINED_COMMANDS",
    "Accepted",
    "Action",
    "ConnectOffer",
    "ConnectionInput",
    "ConnectionState",
    "HeartBeats",
    "StompConnection",
    "StompError",
    "negotiate_heart_beat",
    "negotiate_version",
]


class StompError(RemoteProtocolError):
    """A frame the client got wrong: answer with an ERROR naming it, then close.

    ``detail``, when given, is the ERROR's body (else the message is).
    """

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class ConnectionState(TableEnum):
    """Where one STOMP connection stands (server side)."""

    AWAIT_CONNECT = "AWAIT_CONNECT"  # nothing but CONNECT (or STOMP) may come first
    CONNECTING = "CONNECTING"  # CONNECT read: the adapter authenticates, then accepts or refuses
    CONNECTED = "CONNECTED"  # CONNECTED written: the session's commands are handled
    DISCONNECTING = "DISCONNECTING"  # DISCONNECT read: later frames are ignored until close
    CLOSED = "CLOSED"  # an ERROR was written, or the connection is gone


class ConnectionInput(TableEnum):
    """What happened: a frame's command, a heart-beat, or what the adapter tells."""

    CONNECT = "CONNECT"
    STOMP = "STOMP"
    SEND = "SEND"
    SUBSCRIBE = "SUBSCRIBE"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    ACK = "ACK"
    NACK = "NACK"
    BEGIN = "BEGIN"
    COMMIT = "COMMIT"
    ABORT = "ABORT"
    DISCONNECT = "DISCONNECT"
    OTHER = "OTHER"  # a frame with any other command (a server's, or an unknown one)
    HEARTBEAT = "HEARTBEAT"  # an EOL between frames
    CONNECT_TIMEOUT = "CONNECT_TIMEOUT"  # the adapter's connect timer fired
    ACCEPT = "ACCEPT"  # accept(): the login is accepted, CONNECTED is written
    ERROR = "ERROR"  # error() / refuse_version(): an ERROR frame ends the connection
    CLOSE = "CLOSE"  # close(): the connection is closed


class Action(TableEnum):
    """What the adapter does for an input (see the module doc)."""

    CONNECT = "CONNECT"
    HANDLE = "HANDLE"
    IGNORE = "IGNORE"
    WRITE = "WRITE"
    CLOSE = "CLOSE"
    NOT_CONNECTED = "NOT_CONNECTED"
    ALREADY_CONNECTED = "ALREADY_CONNECTED"
    UNKNOWN_COMMAND = "UNKNOWN_COMMAND"
    NO_CONNECT = "NO_CONNECT"


#: The rejections' texts (``command``: the frame's; ``seconds``: the connect timeout).
REJECTIONS: Mapping[Action, str] = MappingProxyType(
    {
        Action.NOT_CONNECTED: "{command} before CONNECT: the first frame must be CONNECT or STOMP",
        Action.ALREADY_CONNECTED: "already connected: CONNECT may only be sent once",
        Action.UNKNOWN_COMMAND: "Unknown STOMP command {command}",
        Action.NO_CONNECT: "no CONNECT frame within {seconds:g} s",
    }
)

#: Client commands a version does not define; rejected where the table would handle them.
UNDEFINED_COMMANDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {"1.0": frozenset({"NACK"}), "1.1": frozenset(), "1.2": frozenset()}
)

_S = ConnectionState
_I = ConnectionInput
_A = Action

#: The session's commands: handled once connected.
_SESSION = (_I.SEND, _I.SUBSCRIBE, _I.UNSUBSCRIBE, _I.ACK, _I.NACK, _I.BEGIN, _I.COMMIT, _I.ABORT)
_FRAMES = (_I.CONNECT, _I.STOMP, *_SESSION, _I.DISCONNECT, _I.OTHER)


def _table() -> dict:
    rows: dict = {}
    # Awaiting CONNECT: it (or STOMP, its 1.1+ spelling) is the only frame taken.
    for kind in _FRAMES:
        rows[_S.AWAIT_CONNECT, kind] = (_S.AWAIT_CONNECT, _A.NOT_CONNECTED)
    rows[_S.AWAIT_CONNECT, _I.CONNECT] = (_S.CONNECTING, _A.CONNECT)
    rows[_S.AWAIT_CONNECT, _I.STOMP] = (_S.CONNECTING, _A.CONNECT)
    rows[_S.AWAIT_CONNECT, _I.CONNECT_TIMEOUT] = (_S.AWAIT_CONNECT, _A.NO_CONNECT)
    # Connecting: the adapter decides about the login before it reads on.
    rows[_S.CONNECTING, _I.ACCEPT] = (_S.CONNECTED, _A.WRITE)
    rows[_S.CONNECTING, _I.CONNECT_TIMEOUT] = (_S.CONNECTING, _A.IGNORE)
    # Connected: the session's commands; CONNECT only once; DISCONNECT ends it.
    for kind in _SESSION:
        rows[_S.CONNECTED, kind] = (_S.CONNECTED, _A.HANDLE)
    rows[_S.CONNECTED, _I.DISCONNECT] = (_S.DISCONNECTING, _A.HANDLE)
    rows[_S.CONNECTED, _I.CONNECT] = (_S.CONNECTED, _A.ALREADY_CONNECTED)
    rows[_S.CONNECTED, _I.STOMP] = (_S.CONNECTED, _A.ALREADY_CONNECTED)
    rows[_S.CONNECTED, _I.OTHER] = (_S.CONNECTED, _A.UNKNOWN_COMMAND)
    rows[_S.CONNECTED, _I.CONNECT_TIMEOUT] = (_S.CONNECTED, _A.IGNORE)
    # Disconnecting: nothing more is read; confirmations still pending may end in an ERROR.
    for kind in (*_FRAMES, _I.CONNECT_TIMEOUT):
        rows[_S.DISCONNECTING, kind] = (_S.DISCONNECTING, _A.IGNORE)
    # Every live state: heart-beats prove liveness only; an ERROR or a close ends it.
    for state in (_S.AWAIT_CONNECT, _S.CONNECTING, _S.CONNECTED, _S.DISCONNECTING):
        if state is not _S.CONNECTING:
            rows[state, _I.HEARTBEAT] = (state, _A.IGNORE)
        rows[state, _I.ERROR] = (_S.CLOSED, _A.WRITE)
        rows[state, _I.CLOSE] = (_S.CLOSED, _A.CLOSE)
    # Closed: whatever still arrives or fires is ignored.
    for kind in (*_FRAMES, _I.HEARTBEAT, _I.CONNECT_TIMEOUT, _I.ERROR, _I.CLOSE):
        rows[_S.CLOSED, kind] = (_S.CLOSED, _A.IGNORE)
    return rows


#: ``(state, input) -> (next state, action)``.  A missing pair is the caller's bug.
TRANSITIONS: Mapping[tuple[ConnectionState, ConnectionInput], tuple[ConnectionState, Action]] = (
    MappingProxyType(_table())
)

_COMMAND_INPUTS = {kind.value: kind for kind in _FRAMES if kind is not _I.OTHER}

#: Per state, the commands handled with no change of state (the adapter's fast path).
_IN_PLACE: Mapping[ConnectionState, frozenset[str]] = MappingProxyType(
    {
        state: frozenset(
            kind.value
            for (s, kind), (nxt, action) in TRANSITIONS.items()
            if s is state and nxt is state and action is _A.HANDLE
        )
        for state in ConnectionState
    }
)


# -- negotiation ----------------------------------------------------------------------------


@lru_cache(maxsize=64)  # clients send a handful of distinct values; once per connection
def negotiate_version(accept_version: str | None, versions: tuple[str, ...] = STOMP_VERSIONS) -> str | None:
    """The highest of ``versions`` the client accepts (no ``accept-version``: 1.0), or None."""
    offered = {v.strip() for v in (accept_version or "1.0").split(",")}
    common = [v for v in versions if v in offered]
    return common[-1] if common else None


@dataclass(frozen=True, slots=True)
class HeartBeats:
    """The negotiated heart-beats, in milliseconds (0: none).

    ``send_ms`` -- how often the server sends one (the client's ``cy``);
    ``recv_ms`` -- how often the client said it sends one (its ``cx``).
    """

    send_ms: int
    recv_ms: int

    @property
    def header(self) -> str:
        """The CONNECTED frame's ``heart-beat`` value."""
        return f"{self.send_ms},{self.recv_ms}"


def negotiate_heart_beat(value: str | None) -> HeartBeats:
    """The heart-beats for a CONNECT's ``heart-beat`` header (None or empty: none).

    Raises :class:`StompError` for anything but two non-negative integers
    ``cx,cy``.
    """
    if not value:
        return HeartBeats(0, 0)
    try:
        cx, cy = (int(part.strip()) for part in value.split(","))
    except ValueError:
        raise StompError(f"heart-beat header must be two integers 'cx,cy', not {value!r}") from None
    if cx < 0 or cy < 0:
        raise StompError(f"heart-beat values must not be negative: {value!r}")
    return HeartBeats(send_ms=cy, recv_ms=cx)


@dataclass(frozen=True, slots=True, repr=False)
class ConnectOffer:
    """What a CONNECT frame asks for; ``version`` is the negotiated one (None: none in common).

    ``login``, ``passcode``, ``client-id``, ``host``, ``receipt`` and
    ``heart-beat`` are the frame's headers (None when absent).  The repr never
    shows the passcode.
    """

    version: str | None
    login: str | None
    passcode: str | None
    client_id: str | None
    host: str | None
    receipt: str | None
    heart_beat: str | None

    def __repr__(self) -> str:
        passcode = None if self.passcode is None else "***"
        return (
            f"ConnectOffer(version={self.version!r}, login={self.login!r}, passcode={passcode}, "
            f"client_id={self.client_id!r}, host={self.host!r}, receipt={self.receipt!r}, "
            f"heart_beat={self.heart_beat!r})"
        )


@dataclass(frozen=True, slots=True)
class Accepted:
    """:meth:`StompConnection.accept`'s result: the CONNECTED frame and the heart-beats
    (None in STOMP 1.0, which has none)."""

    frame: Frame
    heart_beats: HeartBeats | None


# -- the connection -------------------------------------------------------------------------


class StompConnection:
    """The server side of one STOMP connection (see the module doc).

    ``codec`` is the connection's codec (one is made, server side, when not
    given): :meth:`accept` sets the negotiated version on it.  ``versions``
    are the versions the server speaks, oldest first.
    """

    __slots__ = ("state", "_codec", "_versions", "_version", "_offer", "_undefined")

    def __init__(self, codec: StompCodec | None = None, *, versions: tuple[str, ...] = STOMP_VERSIONS):
        if versions is not STOMP_VERSIONS:  # the default needs no check (one per connection)
            unknown = [v for v in versions if v not in STOMP_VERSIONS]
            if not versions or unknown:
                raise ValueError(f"versions must be some of {STOMP_VERSIONS}, not {versions!r}")
        #: Where the connection stands (a :class:`ConnectionState`).  Read it; only this
        #: class moves it (a plain attribute, not a property: the broker's adapter reads it
        #: on every read and every frame)
        self.state = ConnectionState.AWAIT_CONNECT
        self._codec = codec if codec is not None else StompCodec(server=True)
        self._versions = tuple(versions)
        self._version: str | None = None
        self._offer: ConnectOffer | None = None
        self._undefined: frozenset[str] = frozenset()

    @property
    def version(self) -> str | None:
        """The negotiated version (None until :meth:`accept`)."""
        return self._version

    @property
    def codec(self) -> StompCodec:
        """The connection's codec."""
        return self._codec

    def handled_in_place(self) -> frozenset[str]:
        """The commands the current state handles without a change of state.

        An adapter may call its handlers for these directly, without
        :meth:`receive`, for as long as :attr:`state` does not change (the
        broker's hot path); the version's :data:`UNDEFINED_COMMANDS` are not
        among them.
        """
        return _IN_PLACE[self.state] - self._undefined

    def _move(self, kind: ConnectionInput) -> Action:
        try:
            nxt, action = TRANSITIONS[self.state, kind]
        except KeyError:
            raise LocalProtocolError(
                f"STOMP connection has no transition from {self.state.name} on {kind.name}"
            ) from None
        self.state = nxt
        return action

    # -- the client's frames ------------------------------------------------------------

    def receive(self, event: Frame | HeartBeat) -> Action:
        """Move on a frame (or heart-beat) from the client; say what to do with it.

        Raises :class:`StompError` for a frame the state or the
        version does not allow (the state is unchanged: answer with
        :meth:`error`).
        """
        if isinstance(event, HeartBeat):
            return self._move(ConnectionInput.HEARTBEAT)
        command = event.command
        kind = _COMMAND_INPUTS.get(command, ConnectionInput.OTHER)
        try:
            nxt, action = TRANSITIONS[self.state, kind]
        except KeyError:
            raise LocalProtocolError(
                f"STOMP connection has no transition from {self.state.name} on {kind.name}"
            ) from None
        if action in REJECTIONS:
            raise StompError(REJECTIONS[action].format(command=command))
        if action is Action.HANDLE and command in self._undefined:
            raise StompError(f"{command} is not part of STOMP {self._version}")
        self.state = nxt
        return action

    def negotiate(self, frame: Frame) -> ConnectOffer:
        """Read the CONNECT (or STOMP) frame :meth:`receive` answered with ``CONNECT``."""
        if self.state is not ConnectionState.CONNECTING:
            raise LocalProtocolError(f"no CONNECT to negotiate in state {self.state.name}")
        get = frame.header_dict().get  # one pass; the first occurrence of a name wins
        offer = ConnectOffer(
            version=negotiate_version(get("accept-version"), self._versions),
            login=get("login"),
            passcode=get("passcode"),
            client_id=get("client-id"),
            host=get("host"),
            receipt=get("receipt"),
            heart_beat=get("heart-beat"),
        )
        self._offer = offer
        return offer

    # -- the adapter's decisions --------------------------------------------------------

    def accept(self, session: str, server: str, extra: Iterable[tuple[str, str]] = ()) -> Accepted:
        """The login is accepted: the CONNECTED frame to write, and the heart-beats.

        ``session`` and ``server`` are its headers' values, ``extra`` more
        headers after them.  The codec speaks the negotiated version from now
        on.  Raises :class:`StompError` for a malformed ``heart-beat`` (the state stays CONNECTING: answer with :meth:`error`).
        """
        offer = self._offer
        if (self.state, ConnectionInput.ACCEPT) not in TRANSITIONS or offer is None or offer.version is None:
            raise LocalProtocolError(
                f"cannot accept a STOMP connection in state {self.state.name} "
                "without a negotiated version"
            )
        version = offer.version
        self._version = version
        self._codec.set_version(version)
        self._undefined = UNDEFINED_COMMANDS[version]
        beats = None if version == "1.0" else negotiate_heart_beat(offer.heart_beat)
        self._move(ConnectionInput.ACCEPT)
        self._offer = None  # the passcode is not kept
        frame = connected_frame(version, session, server, extra, None if beats is None else beats.header)
        return Accepted(frame, beats)

    def refuse_version(self) -> Frame | None:
        """The ERROR for a CONNECT that offers none of our versions; write it, then close."""
        if self._move(ConnectionInput.ERROR) is Action.IGNORE:
            return None
        self._offer = None
        return version_error_frame(self._versions)

    def error(self, message: str, *, detail: str = "", receipt: str | None = None) -> Frame | None:
        """End the connection with an ERROR frame: write it, then close.

        None when the connection is closed already (nothing more is written).
        ``receipt`` is the offending frame's ``receipt`` header, if any.
        """
        if self._move(ConnectionInput.ERROR) is Action.IGNORE:
            return None
        self._offer = None
        return error_frame(message, detail=detail, receipt=receipt)

    def timeout(self, seconds: float) -> Action:
        """The adapter's connect timer fired after ``seconds``.

        Raises :class:`StompError` (``no CONNECT frame within ...``)
        while the CONNECT is still awaited; else returns ``IGNORE``.
        """
        action = self._move(ConnectionInput.CONNECT_TIMEOUT)  # a rejection keeps the state
        if action in REJECTIONS:
            raise StompError(REJECTIONS[action].format(seconds=seconds))
        return action

    def close(self) -> Action:
        """The connection is closed (DISCONNECT done, or the transport gone)."""
        self._offer = None
        return self._move(ConnectionInput.CLOSE)
