"""Sans-IO: the server side of one CORE connection, as a state table.

The codec (:mod:`.codec`) turns bytes into packets; this module says what a
server does with each packet in each state of the connection: which channel
it belongs to, which version the client speaks, which sessions are open, and
what is answered at once.  No Twisted, no sockets, no clock: the broker
core's adapter (``junction/brokercore/core_server.py``) drives it::

    NEW --SUBSCRIBE_TOPOLOGY_V2 / CREATESESSION--> ACTIVE
    NEW, ACTIVE --error() / disconnect() / close()--> CLOSED

:data:`TRANSITIONS` is the whole table: ``(state, input) -> (next state,
action)``.  An input (:class:`ConnectionInput`) is what a packet is, given
its channel and the connection's channel table (:meth:`CoreConnection.classify`),
or what the adapter tells: ``ERROR`` (:meth:`CoreConnection.error`: an
EXCEPTION ends the connection), ``DISCONNECT`` (:meth:`CoreConnection.disconnect`:
the server ends it, at shutdown) and ``CLOSE`` (:meth:`CoreConnection.close`:
the transport is gone).  The actions (:class:`Action`):

* ``IGNORE`` -- nothing: the handshake, the client's PACKETS_CONFIRMED, what
  arrives after the connection closed;
* ``ANSWER`` -- write what :meth:`CoreConnection.answer` returns: the PING
  echoed, REATTACH_SESSION answered ``reattached=false`` (no session outlives
  its connection here: the client creates new ones), CHECK_FOR_FAILOVER
  (:meth:`CoreConnection.ok_to_failover`);
* ``TOPOLOGY`` -- the connection is subscribed to the topology: write
  :meth:`CoreConnection.topology` (a node that is not clustered: itself
  alone, ``last`` set; the real client waits for it before it creates a
  session) or :meth:`CoreConnection.cluster_topology` (a clustered node: every
  member); later :meth:`CoreConnection.topology_changes` says what to tell
  the subscriber as members join and leave (:mod:`.topology`);
* ``CREATE_SESSION`` -- authenticate the CREATESESSION, then
  :meth:`CoreConnection.open_session` (write the CREATESESSION_RESP it
  returns) or :meth:`CoreConnection.refuse_session` (write its EXCEPTION);
* ``HANDLE`` -- a packet of an open session: the adapter's session handles it;
* ``WRITE`` -- write the EXCEPTION or DISCONNECT the method returned, then close;
* ``CLOSE`` -- the connection is closed;
* the rejections (:data:`REJECTIONS`): :meth:`CoreConnection.receive` raises
  the error (a :class:`~.errors.CoreProtocolError` carrying its exception
  code), the state stays, and the adapter answers with
  :meth:`CoreConnection.error`.  A refused CREATESESSION
  (``SESSION_REJECTED``: a channel in use or reserved, or one session over
  ``CoreLimits.max_channels``) is answered and the connection stays, as
  Artemis answers a refused session; every other rejection closes it.

The rules (core.md sections 1, 3, 5, 8):

* channel 0 carries PING and SUBSCRIBE_TOPOLOGY(_V2); channel 1 CREATESESSION(_V2),
  REATTACH_SESSION and CHECK_FOR_FAILOVER; a session's packets travel on
  the channel its CREATESESSION named (10 and up).  A control packet on
  another channel, or a session's packet on 0 or 1, is ``MISPLACED``
  (ILLEGAL_STATE, 104); a packet on a channel with no session -- or on 2 to 9,
  Artemis's replication, cluster and federation channels, which this server
  does not open -- is ``UNKNOWN_CHANNEL`` (ILLEGAL_STATE too: Artemis drops
  such packets silently, so a client that sent one waits forever; here it
  learns why and the connection ends).  A packet only a server sends
  (responses, deliveries, topology, DISCONNECT) is ``SERVER_PACKET``
  (UNSUPPORTED_PACKET, 1).
* the version: SUBSCRIBE_TOPOLOGY_V2 sets the connection's version (as
  Artemis's does, every time); the first CREATESESSION sets it when none is
  set yet.  A version outside :data:`~.versions.ACCEPTED_VERSIONS` is
  ``INCOMPATIBLE``: EXCEPTION INCOMPATIBLE_CLIENT_SERVER_VERSIONS (108) on
  the packet's channel, then close.  That set is Artemis's compatible list
  (121-136) from version 129 on: clients of 121-128 (Artemis 1.x) lay their
  messages out in the 1.x form, which this package does not read, so they are
  refused up front rather than misread later.  An older client's
  SUBSCRIBE_TOPOLOGY (no version) is answered in the oldest form and sets
  nothing.
* :mod:`.responses` picks each answer's form by the adopted version.
* the client's ``connectionTTL`` arrives in its PINGs (:attr:`CoreConnection.ttl_ms`);
  timing it is the adapter's, which has the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from junction.protocols.core import responses, topology
from junction.protocols.core.codec import CoreLimits, Handshake
from junction.protocols.core.errors import CoreProtocolError, ExceptionType, TooManyChannels
from junction.protocols.core.packet_types import (
    CONNECTION_CHANNEL,
    FIRST_SESSION_CHANNEL,
    SESSION_CREATION_CHANNEL,
    PacketType,
    type_name,
)
from junction.protocols.core.packets import (
    CheckFailover,
    CheckFailoverReply,
    CreateSession,
    CreateSessionResponse,
    DisconnectReason,
    ExceptionMessage,
    Packet,
    Ping,
    ReattachSession,
    ReattachSessionResponse,
)
from junction.protocols.core.versions import ACCEPTED_VERSIONS
from junction.protocols.errors import LocalProtocolError
from junction.protocols.states import TableEnum

__all__ = [
    "DEFAULT_TTL_MS",
    "REJECTIONS",
    "TRANSITIONS",
    "Action",
    "ChannelInUse",
    "ConnectionInput",
    "ConnectionState",
    "CoreConnection",
    "IncompatibleVersion",
    "MisplacedPacket",
    "UnexpectedPacket",
    "UnknownChannel",
    "is_fatal",
]

#: A connection's TTL until the client's first PING names its own (Artemis's
#: ``ActiveMQClient.DEFAULT_CONNECTION_TTL``, which the server assumes too).
DEFAULT_TTL_MS = 60_000


# -- what the client got wrong ---------------------------------------------------------------


class UnknownChannel(CoreProtocolError):
    """A packet on a channel with no session: answered ILLEGAL_STATE, then close."""

    exception_type = ExceptionType.ILLEGAL_STATE


class MisplacedPacket(CoreProtocolError):
    """A packet on a channel it does not belong to: answered ILLEGAL_STATE, then close."""

    exception_type = ExceptionType.ILLEGAL_STATE


class UnexpectedPacket(CoreProtocolError):
    """A packet only a server sends: answered UNSUPPORTED_PACKET, then close."""

    exception_type = ExceptionType.UNSUPPORTED_PACKET


class IncompatibleVersion(CoreProtocolError):
    """A client version this server does not serve: answered 108, then close."""

    exception_type = ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS


class ChannelInUse(CoreProtocolError):
    """A CREATESESSION naming a channel already open or reserved: refused, the connection stays."""

    exception_type = ExceptionType.SESSION_CREATION_REJECTED


#: Errors answered without closing the connection: a refused session.
_NOT_FATAL = (TooManyChannels, ChannelInUse)


def is_fatal(error: CoreProtocolError) -> bool:
    """Whether answering ``error`` ends the connection (all do but a refused CREATESESSION)."""
    return not isinstance(error, _NOT_FATAL)


# -- the table -------------------------------------------------------------------------------


class ConnectionState(TableEnum):
    """Where one CORE connection stands (server side)."""

    NEW = "NEW"  # no version yet: before SUBSCRIBE_TOPOLOGY_V2 or the first CREATESESSION
    ACTIVE = "ACTIVE"  # the client's version adopted: sessions may be open
    CLOSED = "CLOSED"  # an EXCEPTION or DISCONNECT ended it, or the transport is gone


class ConnectionInput(TableEnum):
    """What a packet is (on its channel, given the open sessions), or what the adapter tells."""

    HANDSHAKE = "HANDSHAKE"  # the ARTEMIS bytes (the codec reports them first, or never)
    PING = "PING"  # PING on channel 0
    SUBSCRIBE_TOPOLOGY = "SUBSCRIBE_TOPOLOGY"  # an old client's, naming no version
    SUBSCRIBE_TOPOLOGY_V2 = "SUBSCRIBE_TOPOLOGY_V2"  # naming an accepted version
    CREATE_SESSION = "CREATE_SESSION"  # accepted version, a free channel, under the limit
    SESSION_REJECTED = "SESSION_REJECTED"  # a channel in use or reserved, or over max_channels
    REATTACH_SESSION = "REATTACH_SESSION"
    CHECK_FAILOVER = "CHECK_FAILOVER"
    INCOMPATIBLE = "INCOMPATIBLE"  # SUBSCRIBE_TOPOLOGY_V2 / CREATESESSION naming another version
    SESSION_PACKET = "SESSION_PACKET"  # a client's packet on an open session's channel
    CONFIRMATION = "CONFIRMATION"  # the client's PACKETS_CONFIRMED on an open session's channel
    UNKNOWN_CHANNEL = "UNKNOWN_CHANNEL"  # a packet on a channel with no session
    MISPLACED = "MISPLACED"  # a packet on a channel it does not belong to
    SERVER_PACKET = "SERVER_PACKET"  # a packet only a server sends
    ERROR = "ERROR"  # error(): an EXCEPTION ends the connection
    DISCONNECT = "DISCONNECT"  # disconnect(): the server ends it (shutdown)
    CLOSE = "CLOSE"  # close(): the transport is gone


class Action(TableEnum):
    """What the adapter does for an input (see the module doc)."""

    IGNORE = "IGNORE"
    ANSWER = "ANSWER"
    TOPOLOGY = "TOPOLOGY"
    CREATE_SESSION = "CREATE_SESSION"
    HANDLE = "HANDLE"
    WRITE = "WRITE"
    CLOSE = "CLOSE"
    REFUSE_VERSION = "REFUSE_VERSION"
    REFUSE_SESSION = "REFUSE_SESSION"
    NO_SUCH_CHANNEL = "NO_SUCH_CHANNEL"
    WRONG_CHANNEL = "WRONG_CHANNEL"
    NOT_A_CLIENT_PACKET = "NOT_A_CLIENT_PACKET"


#: The rejections: the error (or errors) each raises.
REJECTIONS: Mapping[Action, type | tuple] = MappingProxyType(
    {
        Action.REFUSE_VERSION: IncompatibleVersion,
        Action.REFUSE_SESSION: (ChannelInUse, TooManyChannels),
        Action.NO_SUCH_CHANNEL: UnknownChannel,
        Action.WRONG_CHANNEL: MisplacedPacket,
        Action.NOT_A_CLIENT_PACKET: UnexpectedPacket,
    }
)

_S = ConnectionState
_I = ConnectionInput
_A = Action

def _table() -> dict:
    rows: dict = {}
    for state in (_S.NEW, _S.ACTIVE):
        rows[state, _I.PING] = (state, _A.ANSWER)
        rows[state, _I.SUBSCRIBE_TOPOLOGY] = (state, _A.TOPOLOGY)
        rows[state, _I.SUBSCRIBE_TOPOLOGY_V2] = (_S.ACTIVE, _A.TOPOLOGY)
        rows[state, _I.CREATE_SESSION] = (_S.ACTIVE, _A.CREATE_SESSION)
        rows[state, _I.SESSION_REJECTED] = (state, _A.REFUSE_SESSION)
        rows[state, _I.REATTACH_SESSION] = (state, _A.ANSWER)
        rows[state, _I.CHECK_FAILOVER] = (state, _A.ANSWER)
        rows[state, _I.INCOMPATIBLE] = (state, _A.REFUSE_VERSION)
        rows[state, _I.UNKNOWN_CHANNEL] = (state, _A.NO_SUCH_CHANNEL)
        rows[state, _I.MISPLACED] = (state, _A.WRONG_CHANNEL)
        rows[state, _I.SERVER_PACKET] = (state, _A.NOT_A_CLIENT_PACKET)
        rows[state, _I.ERROR] = (_S.CLOSED, _A.WRITE)
        rows[state, _I.DISCONNECT] = (_S.CLOSED, _A.WRITE)
        rows[state, _I.CLOSE] = (_S.CLOSED, _A.CLOSE)
    # The handshake comes first or never; sessions exist only once a version is adopted.
    rows[_S.NEW, _I.HANDSHAKE] = (_S.NEW, _A.IGNORE)
    rows[_S.ACTIVE, _I.SESSION_PACKET] = (_S.ACTIVE, _A.HANDLE)
    rows[_S.ACTIVE, _I.CONFIRMATION] = (_S.ACTIVE, _A.IGNORE)
    # Closed: whatever still arrives, or is told, is ignored (no session is open any more).
    for kind in ConnectionInput:
        if kind not in (_I.SESSION_PACKET, _I.CONFIRMATION):
            rows[_S.CLOSED, kind] = (_S.CLOSED, _A.IGNORE)
    return rows


#: ``(state, input) -> (next state, action)``.  A missing pair is the caller's bug.
TRANSITIONS: Mapping[tuple[ConnectionState, ConnectionInput], tuple[ConnectionState, Action]] = (
    MappingProxyType(_table())
)

#: Packet types of channel 0 and of channel 1, and what each is there.
_CONNECTION_TYPES = {
    PacketType.PING: _I.PING,
    PacketType.SUBSCRIBE_TOPOLOGY: _I.SUBSCRIBE_TOPOLOGY,
    PacketType.SUBSCRIBE_TOPOLOGY_V2: _I.SUBSCRIBE_TOPOLOGY_V2,
}
_CREATION_TYPES = {
    PacketType.CREATESESSION: _I.CREATE_SESSION,
    PacketType.CREATESESSION_V2: _I.CREATE_SESSION,
    PacketType.REATTACH_SESSION: _I.REATTACH_SESSION,
    PacketType.CHECK_FOR_FAILOVER: _I.CHECK_FAILOVER,
}
_PACKETS_CONFIRMED = PacketType.PACKETS_CONFIRMED
_EXCEPTION = PacketType.EXCEPTION


# -- the connection ----------------------------------------------------------------------------


class CoreConnection:
    """The server side of one CORE connection (see the module doc).

    ``node_id`` is this server's node id (the topology and DISCONNECT name
    it); ``limits`` bound the sessions (``max_channels``); ``scales_down``:
    this server has a scale-down policy (Artemis's ``HAPolicy.canScaleDown``,
    which changes the answer to CHECK_FOR_FAILOVER).
    """

    __slots__ = (
        "state", "version", "ttl_ms", "subscribed", "_node_id", "_limits", "_sessions", "_pending", "_problem",
        "_scales_down",
    )

    def __init__(self, node_id: str, limits: CoreLimits | None = None, *, scales_down: bool = False):
        #: Where the connection stands (a :class:`ConnectionState`); only this class moves it.
        self.state = ConnectionState.NEW
        #: The client's version, once adopted (None until then).
        self.version: int | None = None
        #: The client's connection TTL in ms, from its PINGs (-1: none).
        self.ttl_ms = DEFAULT_TTL_MS
        #: The client subscribed to the topology (SUBSCRIBE_TOPOLOGY): it is told its changes.
        self.subscribed = False
        self._node_id = node_id
        self._limits = limits if limits is not None else CoreLimits()
        self._scales_down = bool(scales_down)
        #: session channel id -> the session's name
        self._sessions: dict[int, str] = {}
        #: the CREATESESSION being decided (between receive() and open/refuse_session())
        self._pending: CreateSession | None = None
        #: why the packet just classified is rejected (an error to raise)
        self._problem: CoreProtocolError | None = None

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def sessions(self) -> Mapping[int, str]:
        """The open sessions: channel id -> name."""
        return MappingProxyType(self._sessions)

    # -- classifying ------------------------------------------------------------------------------

    def classify(self, event) -> ConnectionInput:
        """What ``event`` (a :class:`~.codec.Handshake` or a packet) is on this connection now.

        Pure but for remembering, for a rejected packet, the error
        :meth:`receive` raises.
        """
        self._problem = None
        if event.__class__ is Handshake:
            return _I.HANDSHAKE
        cls = event.__class__
        kind = cls.TYPE
        channel = event.channel_id
        if cls.SENDER == "server" or kind == _EXCEPTION:
            self._problem = UnexpectedPacket(
                f"{type_name(kind)} is a server's packet, not a client's (channel {channel})", channel
            )
            return _I.SERVER_PACKET
        control = _CONNECTION_TYPES.get(kind)
        if control is not None:
            if channel != CONNECTION_CHANNEL:
                return self._misplaced(kind, channel, CONNECTION_CHANNEL)
            if control is _I.SUBSCRIBE_TOPOLOGY_V2 and event.client_version not in ACCEPTED_VERSIONS:
                return self._incompatible(event.client_version, channel)
            return control
        creation = _CREATION_TYPES.get(kind)
        if creation is not None:
            if channel != SESSION_CREATION_CHANNEL:
                return self._misplaced(kind, channel, SESSION_CREATION_CHANNEL)
            if creation is _I.CREATE_SESSION:
                return self._classify_create(event)
            return creation
        if channel in self._sessions:
            return _I.CONFIRMATION if kind == _PACKETS_CONFIRMED else _I.SESSION_PACKET
        if channel == CONNECTION_CHANNEL or channel == SESSION_CREATION_CHANNEL:
            return self._misplaced(kind, channel, None)
        self._problem = UnknownChannel(
            f"{type_name(kind)} on channel {channel}, where no session is open", channel
        )
        return _I.UNKNOWN_CHANNEL

    def _misplaced(self, kind: int, channel: int, belongs: int | None) -> ConnectionInput:
        where = f"channel {belongs}" if belongs is not None else "a session's channel"
        self._problem = MisplacedPacket(f"{type_name(kind)} on channel {channel}: it belongs on {where}", channel)
        return _I.MISPLACED

    def _incompatible(self, version: int, channel: int) -> ConnectionInput:
        low, high = min(ACCEPTED_VERSIONS), max(ACCEPTED_VERSIONS)
        self._problem = IncompatibleVersion(
            f"AMQ229033: Server and client versions incompatible: the client's is {version}, "
            f"this server serves {low} to {high}",
            channel,
        )
        return _I.INCOMPATIBLE

    def _classify_create(self, request: CreateSession) -> ConnectionInput:
        if request.version not in ACCEPTED_VERSIONS:
            return self._incompatible(request.version, SESSION_CREATION_CHANNEL)
        channel = request.session_channel_id
        if channel < FIRST_SESSION_CHANNEL or channel in self._sessions:
            why = "is reserved" if channel < FIRST_SESSION_CHANNEL else "has a session already"
            self._problem = ChannelInUse(
                f"session {request.name} refused: channel {channel} {why}", SESSION_CREATION_CHANNEL
            )
            return _I.SESSION_REJECTED
        limit = self._limits.max_channels
        if len(self._sessions) >= limit:
            self._problem = TooManyChannels(
                f"session {request.name} refused: this connection has its maximum of {limit} sessions",
                SESSION_CREATION_CHANNEL,
            )
            return _I.SESSION_REJECTED
        return _I.CREATE_SESSION

    # -- the client's packets ---------------------------------------------------------------------

    def receive(self, event) -> Action:
        """Move on a packet (or the handshake) from the client; say what to do with it.

        Raises the :class:`~.errors.CoreProtocolError` a rejection names (the
        state is unchanged: answer with :meth:`error`).
        """
        kind = self.classify(event)
        try:
            nxt, action = TRANSITIONS[self.state, kind]
        except KeyError:
            raise LocalProtocolError(f"CORE connection has no transition from {self.state.name} on {kind.name}") from None
        if action in REJECTIONS:
            problem = self._problem
            if not isinstance(problem, REJECTIONS[action]):
                raise LocalProtocolError(f"CORE connection: {action.name} does not reject {kind.name}")
            raise problem
        if kind is _I.SUBSCRIBE_TOPOLOGY_V2:
            self.version = event.client_version
            self.subscribed = True
        elif kind is _I.SUBSCRIBE_TOPOLOGY:
            self.subscribed = True
        elif kind is _I.CREATE_SESSION:
            if self.version is None:
                self.version = event.version
            self._pending = event
        elif kind is _I.PING:
            self.ttl_ms = event.connection_ttl
        self.state = nxt
        return action

    def answer(self, packet: Packet) -> Packet:
        """The reply to a packet :meth:`receive` said ``ANSWER`` to."""
        cls = packet.__class__
        if cls is Ping:
            return Ping(packet.connection_ttl, channel_id=CONNECTION_CHANNEL)
        if cls is ReattachSession:
            # No session outlives its connection here: the client creates new ones.
            return ReattachSessionResponse(-1, False)
        if cls is CheckFailover:
            return CheckFailoverReply(self.ok_to_failover(packet.node_id))
        raise LocalProtocolError(f"no answer to {packet!r}")

    def ok_to_failover(self, node_id: str | None) -> bool:
        """CHECK_FOR_FAILOVER's answer for a client whose last server was ``node_id``.

        Artemis's (``ActiveMQPacketHandler.handleCheckForFailover``): yes for no
        node, for this node, and for any node when this server has no scale-down
        policy; a server that scales down says yes only for a node that scaled
        down into it, and this package records none.  The client asks it on
        every reconnection to a new server -- after a failover and after a
        router's redirect, naming the node that redirected it -- and gives up
        that server on a no.
        """
        return node_id is None or node_id == self._node_id or not self._scales_down

    def topology(self, unique_event_id: int):
        """The topology to write for ``TOPOLOGY``: this node alone (``unique_event_id``: the
        caller's clock in ms, as Artemis stamps it)."""
        return responses.topology(self.version, self._node_id, unique_event_id)

    def cluster_topology(self, members) -> list:
        """The topology to write for ``TOPOLOGY`` on a clustered node: every member of
        ``members`` (:class:`~.topology.TopologyMember`, this node among them), ``last`` on
        the final one."""
        return topology.announcement(self.version, members)

    def topology_changes(self, changes) -> list:
        """What to write for the cluster's ``changes`` (:class:`~.topology.MemberUp`,
        :class:`~.topology.MemberDown`): nothing unless the client subscribed and the
        connection is open (a client the gateway forwarded never subscribed here: it knows
        only the gateway)."""
        if not self.subscribed or self.state is _S.CLOSED:
            return []
        return topology.change_packets(self.version, changes)

    # -- sessions ---------------------------------------------------------------------------------

    @property
    def pending(self) -> CreateSession | None:
        """The CREATESESSION :meth:`receive` said ``CREATE_SESSION`` to, until it is decided."""
        return self._pending

    def open_session(self) -> CreateSessionResponse:
        """The pending session is accepted: its channel opens; write the answer returned."""
        request = self._take_pending()
        self._sessions[request.session_channel_id] = request.name
        return responses.create_session_response()

    def refuse_session(self, code: int, message: str) -> ExceptionMessage:
        """The pending session is refused (a bad login: SECURITY_EXCEPTION); write the answer
        returned.  The connection stays."""
        self._take_pending()
        return responses.exception(code, message, SESSION_CREATION_CHANNEL)

    def _take_pending(self) -> CreateSession:
        request = self._pending
        if request is None or self.state is _S.CLOSED:
            raise LocalProtocolError("no CREATESESSION is waiting for a decision")
        self._pending = None
        return request

    def close_session(self, channel_id: int) -> None:
        """Session ``channel_id`` closed (SESS_CLOSE): later packets on its channel are unknown."""
        self._sessions.pop(channel_id, None)

    # -- the end ----------------------------------------------------------------------------------

    def error(self, error: CoreProtocolError) -> ExceptionMessage | None:
        """The EXCEPTION answering ``error`` (the codec's or a rejection), on its channel.

        A refused CREATESESSION keeps the connection; any other error ends it
        (write the answer, then close).  None when the connection is closed
        already (nothing more is written).
        """
        if is_fatal(error):
            if not self._end(_I.ERROR):
                return None
        elif self.state is _S.CLOSED:
            return None
        else:
            self._pending = None
        channel = error.channel_id if error.channel_id is not None else CONNECTION_CHANNEL
        return responses.exception(error.exception_type, str(error), channel)

    def fail(self, code: int, message: str, channel_id: int = CONNECTION_CHANNEL) -> ExceptionMessage | None:
        """End the connection with an EXCEPTION of the adapter's (a refused feature in a packet
        that has no answer of its own); None when closed already."""
        if not self._end(_I.ERROR):
            return None
        return responses.exception(code, message, channel_id)

    def disconnect(self, reason: int = DisconnectReason.SHUT_DOWN) -> Packet | None:
        """The server ends the connection: the DISCONNECT to write (the form the version
        reads), then close.  None when closed already."""
        if not self._end(_I.DISCONNECT):
            return None
        return responses.disconnect(self.version, self._node_id, reason)

    def close(self) -> Action:
        """The connection is closed (the transport is gone)."""
        self._pending = None
        self._sessions.clear()
        return self._move(_I.CLOSE)

    def _end(self, kind: ConnectionInput) -> bool:
        """Move on ERROR or DISCONNECT: True when the answer is to be written (WRITE), False when
        the connection was closed already (IGNORE)."""
        action = self._move(kind)
        if action is _A.WRITE:
            return True
        if action is _A.IGNORE:
            return False
        raise LocalProtocolError(f"CORE connection: {kind.name} cannot {action.name}")

    def _move(self, kind: ConnectionInput) -> Action:
        try:
            nxt, action = TRANSITIONS[self.state, kind]
        except KeyError:  # pragma: no cover - every state has these rows
            raise LocalProtocolError(f"CORE connection has no transition from {self.state.name} on {kind.name}") from None
        self.state = nxt
        if nxt is _S.CLOSED:
            self._pending = None
            self._sessions.clear()
        return action

