"""Sans-IO: the gateway's side of a CORE client's opening.

A gateway listener routes a CORE connection on its first session: the
CREATESESSION carries the login (checked by the gateway itself, so USER_NAME
and ROLE_NAME keys cannot be spoofed) and, from version 131 (Artemis 2.18) on,
the JMS client id -- where Artemis's router takes CLIENT_ID from
(``ActiveMQPacketHandler.handleCreateSession``).  :class:`CoreOpening` reads
exactly that much, the :class:`~junction.protocols.opening.Opening` reader
for CORE.  What the real client sends first (``core-traces``, client and
broker of version 136), and what the reader does with each::

    client (Artemis JMS client)               gateway (CoreOpening)
    ARTEMIS                          -->      kept for the replay
    PING ttl=60000, twice            -->      kept (the backend echoes them)
    SUBSCRIBE_TOPOLOGY_V2 v=136      -->      left out of the replay, and
                                     <--      CLUSTER_TOPOLOGY_V4 at once: this node,
                                              no connectors, not last, server version 136
                                     <--      the same again, last
    CREATESESSION_V2 login, clientID -->      authenticate(CoreCredentials)
                                              OpeningComplete(client_id, principal, replay)
    (it waits for CREATESESSION_RESP, which comes from whoever serves the connection)

The client does not send its CREATESESSION before a topology message with
``last`` set has arrived (``ServerLocatorImpl.createSessionFactory`` waits up
to its call timeout, 30 s, then fails "Timed out waiting to receive cluster
topology"; in the trace the CREATESESSION follows the topology by 15 ms), so
the gateway answers the subscription itself, as a broker without a cluster
connection does: one member, the gateway's own node id, both connectors null
(the client puts the connector it is connected through in their place), in
the form the client's version reads (V1 below 122, V2 below 125, V3 below
131, else V4).  A V4 goes twice, first not ``last``: the real client
releases the thread that waits for the topology *before* it takes the
server version from the same message
(``ActiveMQClientProtocolManager.Channel0Handler``), and that thread writes
the CREATESESSION with the client id only if the version is already there
(``newCreateSessionPacket``); a busy client loses the race and sends a
CREATESESSION without one, routed as key NULL (by Artemis as well: a real
broker sends one V4).  The first V4 sets the version and releases nothing,
so it is in place when the second, ``last``, releases the thread.  It
answers at once, likewise, the two requests a reconnecting client blocks on
before it recreates its sessions: CHECK_FOR_FAILOVER
(``okToFailover`` true: the gateway is no scale-down target, Artemis's
answer then) and REATTACH_SESSION (``reattached`` false: the gateway holds
no session, so the client recreates it with a CREATESESSION that carries the
login).  PINGs are not answered: the client waits for no echo before its
CREATESESSION, and the backend echoes them from the replay.

The CREATESESSION is checked in Artemis's order: a version outside
:data:`~.versions.COMPATIBLE_VERSIONS` gets EXCEPTION 108 (``AMQ229033``); a
refused login EXCEPTION 105 (``AMQ229031: Unable to validate user from
<address>. Username: <user>; SSL certificate subject DN: <dn>``); a client
older than 131 EXCEPTION 108 again, because Artemis routes only clients of
2.18 and later (``ActiveMQRoutingHandler.route``).  Each is the
CREATESESSION's answer on channel 1, plain (no correlation id), and the
connection is closed.

What happens next is the router's choice:

* **forward** or **serve locally** -- write :attr:`OpeningComplete.replay`
  to the backend: the handshake and every packet the client sent, each
  exactly as received, except those the gateway answered itself (the
  topology subscription, a failover check, a reattach), which the backend
  would answer a second time; then the CREATESESSION and whatever came
  behind it.  The backend authenticates the client again and answers the
  CREATESESSION; its channel version comes from the CREATESESSION, as
  Artemis's does when no subscription named it.  Never subscribed, the
  backend sends the client no topology, so the client keeps the gateway as
  the only member it knows and reconnects there.
* **redirect** -- :meth:`CoreOpening.redirect`: Artemis's
  ``RemotingConnectionImpl.disconnect(REDIRECT, ...)`` then the refused
  CREATESESSION: DISCONNECT_V3 on channel 0 (this node, reason REDIRECT, the
  target's node id, the target's connector), then EXCEPTION 222
  ``AMQ229237: Connection router <r> redirected the connection to
  <connector>`` on channel 1.  The client adopts the connector and
  reconnects there.
* **refuse** -- :meth:`CoreOpening.refuse`: EXCEPTION 222 ``AMQ229238:
  Connection router <r> not ready`` (``REFUSED_UNAVAILABLE``) or 119
  ``AMQ229240: Connection router <r> rejected the connection``
  (``REFUSED_USE_ANOTHER``) on channel 1.
* any other end -- :meth:`CoreOpening.close_with` (the code its
  ``condition`` names), :meth:`~CoreOpening.timed_out` (3
  CONNECTION_TIMEDOUT, ``no CREATESESSION within <t> s``),
  :meth:`~CoreOpening.too_large`.

Answers go on channel 1 once the CREATESESSION has arrived (the client is
blocked on its answer there), on channel 0 before.  Any other packet before
the CREATESESSION, or one on another channel than its own, is refused with
ILLEGAL_STATE (104); bytes the codec refuses with the code it gives
(UNSUPPORTED_PACKET for an unknown type, INTERNAL_ERROR for a malformed or
oversized packet), on the offending packet's channel.

Events (:meth:`CoreOpening.receive_data` returns a list of them; it never
raises for what the client sent):

* :class:`OpeningComplete` -- the CREATESESSION arrived and its login was
  accepted.  Stop feeding bytes here; later reads belong to the backend (if
  fed anyway they come back as :class:`~junction.protocols.opening.Passthrough`).
* :class:`OpeningFailed` -- the EXCEPTION is queued: write
  :meth:`CoreOpening.data_to_send`, then close.  Bytes fed after it are
  ignored.

:class:`~junction.protocols.errors.LocalProtocolError` is raised only when
this module is misused (an answer after a failure, or twice).

Limits (named): each packet is bounded by the codec's
:class:`~.codec.CoreLimits` (``max_packet_size``); the stream up to the end
of the CREATESESSION by ``max_bytes`` (default the packet limit plus
:data:`OPENING_SLACK`), so at most ``max_bytes`` octets are held until it is
complete; the packets before it by :data:`MAX_OPENING_PACKETS`, which also
bounds what the gateway answers.  A stream's outcome never depends on how it
was cut into reads.  The password is not kept: it goes to ``authenticate``
and is forgotten (the backend gets it again in the replay).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from junction.protocols.core.codec import HANDSHAKE, CoreCodec, CoreLimits, Handshake
from junction.protocols.core.errors import CoreProtocolError, ExceptionType
from junction.protocols.core.packet_types import (
    CONNECTION_CHANNEL,
    SESSION_CREATION_CHANNEL,
    PacketType,
    type_name,
)
from junction.protocols.core.packets import (
    CheckFailoverReply,
    ClusterTopology,
    ClusterTopologyV2,
    ClusterTopologyV3,
    ClusterTopologyV4,
    Disconnect,
    DisconnectReason,
    DisconnectV2,
    DisconnectV3,
    ExceptionMessage,
    Packet,
    ReattachSessionResponse,
)
from junction.protocols.core.texts import (
    incompatible_versions,
    router_not_ready,
    router_redirected,
    router_rejected,
    unable_to_validate_user,
)
from junction.protocols.core.values import TransportConfiguration
from junction.protocols.core.versions import CLIENT_ID_VERSION, COMPATIBLE_VERSIONS, CURRENT_VERSION
from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import (
    REFUSED_UNAVAILABLE,
    REFUSED_USE_ANOTHER,
    Complete,
    Failed,
    Opening,
    Passthrough,
)
from junction.protocols.states import TableEnum

__all__ = [
    "DEFAULT_NODE_ID",
    "HORNETQ_HANDSHAKE",
    "MAX_OPENING_PACKETS",
    "NETTY_CONNECTOR_FACTORY",
    "OPENING_SLACK",
    "PACKET_INPUTS",
    "ROUTING_VERSION",
    "TRANSITIONS",
    "CoreCredentials",
    "CoreOpening",
    "OpeningComplete",
    "OpeningEvent",
    "OpeningFailed",
    "OpeningInput",
    "OpeningState",
    "Passthrough",
    "RedirectTarget",
    "netty_connector",
    "too_large_description",
]

#: Octets a client may send before its CREATESESSION beyond one packet of the
#: limit (the handshake, PINGs, the topology subscription), in the default ``max_bytes``.
OPENING_SLACK = 64 * 1024
#: Most packets before the CREATESESSION.  The real client sends three (two
#: PINGs and SUBSCRIBE_TOPOLOGY_V2) and, reconnecting, a CHECK_FOR_FAILOVER and
#: a REATTACH_SESSION; the bound also bounds what the gateway answers at once.
MAX_OPENING_PACKETS = 32
#: The lowest client version Artemis routes (``isVersionSupportRouting``: 2.18.0).
ROUTING_VERSION = CLIENT_ID_VERSION
#: The handshake of HornetQ clients, which Artemis reads as CORE's (the protocol
#: detector says CORE for it too).
HORNETQ_HANDSHAKE = b"HORNETQ"
#: The node id the gateway names itself by when it is given none.
DEFAULT_NODE_ID = "junction-gateway"
#: The connector factory of every TCP connector Artemis sends a client.
NETTY_CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"


def too_large_description(limit: int) -> str:
    """The EXCEPTION text for more than ``limit`` octets before the CREATESESSION was complete."""
    return f"more than {limit} bytes before the CREATESESSION was complete"


def netty_connector(host: str, port: int, name: str | None = None, params=()) -> TransportConfiguration:
    """A TCP connector as Artemis sends it: ``host`` and ``port`` as Strings (as parsed from a
    URI), then ``params`` (name, value) pairs; named ``name``, else ``host:port``."""
    return TransportConfiguration(
        name if name is not None else f"{host}:{port}",
        NETTY_CONNECTOR_FACTORY,
        (("host", host), ("port", str(port)), *params),
    )


class OpeningState(TableEnum):
    """Where the opening stands."""

    AWAIT_SESSION = "AWAIT_SESSION"  # reading up to the CREATESESSION
    COMPLETE = "COMPLETE"  # OpeningComplete returned; bytes pass through
    ANSWERED = "ANSWERED"  # refuse / redirect / close_with / timed_out / too_large produced; close
    FAILED = "FAILED"  # OpeningFailed returned; close


class OpeningInput(TableEnum):
    """What the received bytes (or the caller) amounted to; drives :data:`TRANSITIONS`."""

    PARTIAL = "PARTIAL"  # no packet completed (part of the handshake or of a packet)
    KEPT = "KEPT"  # the handshake or a PING: kept for the replay, not answered
    ANSWERED_AT_ONCE = "ANSWERED_AT_ONCE"  # a topology subscription, failover check or reattach
    SESSION = "SESSION"  # a CREATESESSION whose login was accepted
    LOGIN_REFUSED = "LOGIN_REFUSED"  # a CREATESESSION whose login was refused
    VERSION_REFUSED = "VERSION_REFUSED"  # a CREATESESSION of a version the gateway does not route
    BAD_INPUT = "BAD_INPUT"  # another packet, malformed bytes, a limit
    ANSWER = "ANSWER"  # refuse(), redirect(), close_with(), timed_out() or too_large()
    DATA = "DATA"  # bytes once the opening is over


_S = OpeningState
_I = OpeningInput

#: ``(state, input) -> next state``.  A missing pair is a misuse by the caller.
TRANSITIONS: Mapping[tuple[OpeningState, OpeningInput], OpeningState] = MappingProxyType(
    {
        (_S.AWAIT_SESSION, _I.PARTIAL): _S.AWAIT_SESSION,
        (_S.AWAIT_SESSION, _I.KEPT): _S.AWAIT_SESSION,
        (_S.AWAIT_SESSION, _I.ANSWERED_AT_ONCE): _S.AWAIT_SESSION,
        (_S.AWAIT_SESSION, _I.SESSION): _S.COMPLETE,
        (_S.AWAIT_SESSION, _I.LOGIN_REFUSED): _S.FAILED,
        (_S.AWAIT_SESSION, _I.VERSION_REFUSED): _S.FAILED,
        (_S.AWAIT_SESSION, _I.BAD_INPUT): _S.FAILED,
        (_S.AWAIT_SESSION, _I.ANSWER): _S.ANSWERED,
        (_S.COMPLETE, _I.DATA): _S.COMPLETE,
        (_S.COMPLETE, _I.ANSWER): _S.ANSWERED,
        (_S.ANSWERED, _I.DATA): _S.ANSWERED,
        (_S.FAILED, _I.DATA): _S.FAILED,
    }
)

#: The packets a client may send before its CREATESESSION: type -> (its channel, what it is).
#: Any other packet, or one of these on another channel, is BAD_INPUT.
PACKET_INPUTS: Mapping[int, tuple[int, OpeningInput]] = MappingProxyType(
    {
        PacketType.PING: (CONNECTION_CHANNEL, _I.KEPT),
        PacketType.SUBSCRIBE_TOPOLOGY: (CONNECTION_CHANNEL, _I.ANSWERED_AT_ONCE),
        PacketType.SUBSCRIBE_TOPOLOGY_V2: (CONNECTION_CHANNEL, _I.ANSWERED_AT_ONCE),
        PacketType.CHECK_FOR_FAILOVER: (SESSION_CREATION_CHANNEL, _I.ANSWERED_AT_ONCE),
        PacketType.REATTACH_SESSION: (SESSION_CREATION_CHANNEL, _I.ANSWERED_AT_ONCE),
        PacketType.CREATESESSION: (SESSION_CREATION_CHANNEL, _I.SESSION),
        PacketType.CREATESESSION_V2: (SESSION_CREATION_CHANNEL, _I.SESSION),
    }
)

#: (lowest client version, topology packet) from the newest down: ``ChannelImpl.supports``.
_TOPOLOGY_FORMS = ((131, ClusterTopologyV4), (125, ClusterTopologyV3), (122, ClusterTopologyV2))
_HANDSHAKE_SIZE = len(HANDSHAKE)


@dataclass(frozen=True, slots=True, repr=False)
class CoreCredentials:
    """What a CREATESESSION presents: ``username`` and ``password`` (None when absent).  The
    repr hides the password."""

    username: str | None
    password: str | None

    def __repr__(self) -> str:
        password = None if self.password is None else "***"
        return f"CoreCredentials(username={self.username!r}, password={password})"


@dataclass(frozen=True, slots=True)
class RedirectTarget:
    """Where a redirect sends the client: the target's ``connector`` and ``node_id``."""

    connector: TransportConfiguration
    node_id: str | None = None


@dataclass(frozen=True, slots=True, repr=False)
class OpeningComplete(Complete):
    """The CREATESESSION arrived and its login was accepted: route on it.

    ``client_id`` is its JMS client id (CREATESESSION_V2's; None before
    version 131 or when the client set none), ``username`` the login it
    presented, ``principal`` what ``authenticate`` returned, ``version`` the
    connection's version (the topology subscription's, else the
    CREATESESSION's).  ``replay`` is what to write to whoever serves the
    connection (see the module doc).
    """

    client_id: str | None
    username: str | None
    principal: object
    version: int
    replay: bytes

    @property
    def user(self) -> str | None:
        """The login the client presented."""
        return self.username

    def __repr__(self) -> str:
        return (
            f"OpeningComplete(client_id={self.client_id!r}, username={self.username!r}, "
            f"principal={self.principal!r}, version={self.version}, replay=<{len(self.replay)} bytes>)"
        )


@dataclass(frozen=True, slots=True)
class OpeningFailed(Failed):
    """The opening failed: write :meth:`CoreOpening.data_to_send` (the EXCEPTION), then close.

    ``reason`` is the EXCEPTION's message, ``exception_type`` its code;
    ``login_refused`` says the CREATESESSION's login was refused, ``user``
    and ``client_id`` are what a CREATESESSION presented (None for the
    failures before one).
    """

    reason: str
    exception_type: ExceptionType
    login_refused: bool = False
    user: str | None = None
    client_id: str | None = None

    @property
    def condition(self) -> str:
        """The exception type's name (``SECURITY_EXCEPTION`` ...)."""
        return self.exception_type.name


OpeningEvent = OpeningComplete | OpeningFailed | Passthrough


class CoreOpening(Opening):
    """The gateway's side of one CORE client's opening (see the module doc).

    ``authenticate`` is called synchronously with the CREATESESSION's
    :class:`CoreCredentials` and returns a principal, or None to refuse.
    ``limits`` bound each packet (the codec's); ``max_bytes`` the stream up
    to the end of the CREATESESSION.  ``node_id`` is the gateway's (the
    topology member and DISCONNECT it writes name it), ``unique_event_id``
    the topology message's event id (Artemis's: the time in milliseconds).
    ``remote_address`` and ``certificate_subject`` are the client's, for the
    text of a refused login.  ``redirect_target(host, port)`` gives the
    target's connector and node id for :meth:`redirect` (None: a connector
    made of the host and port alone).
    """

    TRANSITIONS = TRANSITIONS
    PROTOCOL = "CORE"
    redirects = True

    __slots__ = (
        "_authenticate",
        "_codec",
        "_max_bytes",
        "_node_id",
        "_event_id",
        "_remote_address",
        "_certificate_subject",
        "_redirect_target",
        "_state",
        "_raw",
        "_head",
        "_pos",
        "_left_out",
        "_packets",
        "_version",
        "_out",
        "_failure",
    )

    def __init__(
        self,
        authenticate: Callable[[CoreCredentials], object | None],
        *,
        limits: CoreLimits | None = None,
        max_bytes: int | None = None,
        node_id: str = DEFAULT_NODE_ID,
        unique_event_id: int = 0,
        remote_address: str | None = None,
        certificate_subject: str | None = None,
        redirect_target: Callable[[str, int], RedirectTarget | None] | None = None,
    ):
        codec = CoreCodec(limits, server=True)
        if max_bytes is None:
            max_bytes = codec.limits.max_packet_size + OPENING_SLACK
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive int, not {max_bytes!r}")
        if not isinstance(node_id, str):
            raise TypeError(f"node_id must be a str, not {type(node_id).__name__}")
        self._authenticate = authenticate
        self._codec = codec
        self._max_bytes = max_bytes
        self._node_id = node_id
        self._event_id = int(unique_event_id)
        self._remote_address = remote_address
        self._certificate_subject = certificate_subject
        self._redirect_target = redirect_target
        self._state = OpeningState.AWAIT_SESSION
        self._raw = bytearray()  # every byte so far, as received
        self._head: bytearray | None = bytearray()  # the first bytes, while they may be HORNETQ
        self._pos = 0  # where the next packet starts in _raw
        self._left_out: list[tuple[int, int]] = []  # spans of _raw answered here, not replayed
        self._packets = 0
        self._version = 0  # the connection's version (Artemis's channel version): 0 until named
        self._out = bytearray()
        self._failure: OpeningFailed | None = None

    # -- state ------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Octets held until the CREATESESSION is complete (never more than ``max_bytes``)."""
        return len(self._raw)

    @property
    def limits(self) -> CoreLimits:
        """The codec's limits."""
        return self._codec.limits

    @property
    def version(self) -> int:
        """The connection's version: the client's, once a subscription or CREATESESSION named it."""
        return self._version

    @property
    def node_id(self) -> str:
        """The gateway's node id, in what it writes."""
        return self._node_id

    # -- output -----------------------------------------------------------------------

    def _channel(self) -> int:
        """Where the gateway's answers go: channel 1 once the client waits for its CREATESESSION."""
        return SESSION_CREATION_CHANNEL if self._state is OpeningState.COMPLETE else CONNECTION_CHANNEL

    def _check_answer(self) -> None:
        if (self._state, OpeningInput.ANSWER) not in TRANSITIONS:
            raise LocalProtocolError(
                f"cannot answer a CORE client in state {self._state.name}: only once, and not after a failure"
            )

    def _answer(self, *packets: Packet) -> bytes:
        """Queued bytes and ``packets``: the last words, then close."""
        self._check_answer()
        out = self._out
        for answer in packets:
            out += self._codec.send(answer)
        self._transition(OpeningInput.ANSWER)
        self._forget()
        return self.data_to_send()

    def _exception(self, exception_type: ExceptionType, message: str) -> bytes:
        return self._answer(ExceptionMessage(int(exception_type), message, channel_id=self._channel()))

    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        """Artemis's refusal for router ``status``: the EXCEPTION answering the CREATESESSION.

        ``REFUSED_UNAVAILABLE``: ROUTING_EXCEPTION (222) ``AMQ229238: Connection
        router <r> not ready``; ``REFUSED_USE_ANOTHER``: REMOTE_DISCONNECT (119)
        ``AMQ229240: Connection router <r> rejected the connection`` (a name or
        a ``RouterStatus`` member).  ``detail`` is not written: Artemis's
        refusal has the message only.  Write it, then close.
        """
        name = getattr(status, "name", status)
        if name == REFUSED_UNAVAILABLE:
            return self._exception(ExceptionType.ROUTING_EXCEPTION, router_not_ready(router_name))
        if name == REFUSED_USE_ANOTHER:
            return self._exception(ExceptionType.REMOTE_DISCONNECT, router_rejected(router_name))
        raise ValueError(f"status must be {REFUSED_UNAVAILABLE} or {REFUSED_USE_ANOTHER}, not {status!r}")

    def close_with(
        self, condition: object | None, description: str | None = None, info: Mapping | None = None
    ) -> bytes:
        """An EXCEPTION with ``description``; write it, then close.

        ``condition`` names its code: an :class:`~.errors.ExceptionType`, its
        name or its number (None, or a name CORE does not have:
        INTERNAL_ERROR).  ``info`` is not written: CORE has no place for it.
        """
        return self._exception(_exception_type(condition), description or "connection refused")

    def redirect(
        self,
        router_name: str,
        host: str,
        port: int,
        *,
        connector: TransportConfiguration | None = None,
        target_node_id: str | None = None,
    ) -> bytes:
        """Artemis's redirect to ``host:port``: DISCONNECT then the refused CREATESESSION.

        The target's ``connector`` and ``target_node_id`` default to what
        ``redirect_target`` gives, else a connector of ``host`` and ``port``
        alone.  DISCONNECT_V3 (this node, reason REDIRECT, the target's node
        id and connector) on channel 0 for a client of version 131 and later
        (DISCONNECT_V2 from 125, DISCONNECT before: they carry no target),
        then EXCEPTION 222 ``AMQ229237: Connection router <r> redirected the
        connection to <connector>``.  Write them, then close.
        """
        if not isinstance(host, str):
            raise TypeError(f"host must be a str, not {type(host).__name__}")
        if type(port) is not int or not 0 <= port <= 0xFFFF:
            raise ValueError(f"port must be an int from 0 to 65535, not {port!r}")
        self._check_answer()
        if connector is None and self._redirect_target is not None:
            found = self._redirect_target(host, port)
            if found is not None:
                connector, target_node_id = found.connector, found.node_id
        if connector is None:
            connector = netty_connector(host, port)
        version = self._version
        if version >= CLIENT_ID_VERSION:
            disconnect: Packet = DisconnectV3(self._node_id, DisconnectReason.REDIRECT, target_node_id, connector)
        elif version >= 125:
            disconnect = DisconnectV2(self._node_id, None)
        else:
            disconnect = Disconnect(self._node_id)
        refused = ExceptionMessage(
            int(ExceptionType.ROUTING_EXCEPTION), router_redirected(router_name, connector), channel_id=self._channel()
        )
        return self._answer(disconnect, refused)

    def timed_out(self, seconds: float) -> bytes:
        """CONNECTION_TIMEDOUT (3) ``no CREATESESSION within <seconds> s``.

        Nothing (and no change) once the CREATESESSION has arrived.
        """
        self._check_answer()
        if self._state is OpeningState.COMPLETE:
            return b""
        return self._exception(ExceptionType.CONNECTION_TIMEDOUT, f"no CREATESESSION within {seconds:g} s")

    def too_large(self, limit: int) -> bytes:
        """INTERNAL_ERROR (0) ``more than <limit> bytes before the CREATESESSION was complete``."""
        return self._exception(ExceptionType.INTERNAL_ERROR, too_large_description(limit))

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
        if state is not OpeningState.AWAIT_SESSION:
            self._transition(OpeningInput.DATA)
            return []
        if not data:
            return []
        room = self._max_bytes - len(self._raw)
        self._raw += data
        chunk = data[:room] if len(data) > room else data
        error = None
        try:
            events = self._codec.receive_data(self._codec_input(chunk))
        except CoreProtocolError as exc:
            events, error = exc.events, exc
        decided = None
        for event in events:
            decided = self._event(event)
            if decided is not None:
                return decided
        if error is not None:
            channel = error.channel_id if error.channel_id is not None else CONNECTION_CHANNEL
            return self._fail(error.exception_type, str(error), channel)
        if len(data) > room:
            return self._fail(ExceptionType.INTERNAL_ERROR, too_large_description(self._max_bytes))
        if not events:
            self._transition(OpeningInput.PARTIAL)
        return []

    def _codec_input(self, chunk: bytes) -> bytes:
        """``chunk`` as the codec reads it: a HORNETQ handshake is read as CORE's own.

        While the first bytes may still be ``HORNETQ`` they are held back; once
        they are, the codec is given ``ARTEMIS`` in their place (same length,
        so the offsets in the stream agree).
        """
        head = self._head
        if head is None:
            return chunk
        head += chunk
        if len(head) < _HANDSHAKE_SIZE and HORNETQ_HANDSHAKE.startswith(head):
            return b""
        self._head = None
        if head[:_HANDSHAKE_SIZE] == HORNETQ_HANDSHAKE:
            return HANDSHAKE + bytes(head[_HANDSHAKE_SIZE:])
        return bytes(head)

    def _event(self, event) -> list[OpeningEvent] | None:
        """Act on one event of the codec; the events to return when it decided the opening."""
        if type(event) is Handshake:
            self._pos += _HANDSHAKE_SIZE
            self._transition(OpeningInput.KEPT)
            return None
        start = self._pos
        end = start + 4 + int.from_bytes(self._raw[start:start + 4], "big")
        self._pos = end
        self._packets += 1
        expected = PACKET_INPUTS.get(event.TYPE)
        if expected is None or expected[0] != event.channel_id:
            return self._fail(
                ExceptionType.ILLEGAL_STATE,
                f"{type_name(event.TYPE)} on channel {event.channel_id} before CREATESESSION",
                event.channel_id,
            )
        kind = expected[1]
        if kind is OpeningInput.SESSION:
            return self._create_session(event, end)
        if self._packets > MAX_OPENING_PACKETS:
            return self._fail(
                ExceptionType.INTERNAL_ERROR, f"more than {MAX_OPENING_PACKETS} packets before CREATESESSION"
            )
        if kind is OpeningInput.ANSWERED_AT_ONCE:
            for answer in self._answer_at_once(event):
                self._out += self._codec.send(answer)
            self._left_out.append((start, end))
        self._transition(kind)
        return None

    def _answer_at_once(self, request: Packet) -> tuple[Packet, ...]:
        """The answer to a topology subscription, a failover check or a reattach."""
        kind = request.TYPE
        if kind == PacketType.CHECK_FOR_FAILOVER:
            return (CheckFailoverReply(True),)
        if kind == PacketType.REATTACH_SESSION:
            return (ReattachSessionResponse(-1, False),)
        if kind == PacketType.SUBSCRIBE_TOPOLOGY_V2:
            self._version = request.client_version
        form = next((form for lowest, form in _TOPOLOGY_FORMS if self._version >= lowest), None)
        if form is None:
            return (ClusterTopology(False, self._node_id, None, None, True),)
        fields = {"unique_event_id": self._event_id}
        if form is not ClusterTopologyV4:
            return (form(False, self._node_id, None, None, True, **fields),)
        # the version first, with nothing released; then the release (see the module doc)
        fields["server_version"] = CURRENT_VERSION
        return (form(False, self._node_id, None, None, False, **fields),
                form(False, self._node_id, None, None, True, **fields))

    def _create_session(self, request, end: int) -> list[OpeningEvent]:
        """The CREATESESSION, checked in Artemis's order; completes or fails the opening."""
        version = request.version
        client_id = request.client_id if request.TYPE == PacketType.CREATESESSION_V2 else None
        username = request.username
        if version not in COMPATIBLE_VERSIONS:
            return self._refuse_session(ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS, incompatible_versions(),
                                        OpeningInput.VERSION_REFUSED, username, client_id)
        if self._version == 0:
            self._version = version
        principal = self._authenticate(CoreCredentials(username, request.password))
        if principal is None:
            text = unable_to_validate_user(self._remote_address, username, self._certificate_subject)
            return self._refuse_session(ExceptionType.SECURITY_EXCEPTION, text, OpeningInput.LOGIN_REFUSED,
                                        username, client_id)
        if self._version < ROUTING_VERSION:
            return self._refuse_session(ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS, incompatible_versions(),
                                        OpeningInput.VERSION_REFUSED, username, client_id)
        raw = self._raw
        replay = bytearray()
        kept = 0
        for start, stop in self._left_out:
            replay += raw[kept:start]
            kept = stop
        replay += raw[kept:]
        result = OpeningComplete(client_id, username, principal, self._version, bytes(replay))
        self._transition(OpeningInput.SESSION)
        self._forget()
        return [result]

    def _refuse_session(self, exception_type, text, kind, username, client_id) -> list[OpeningEvent]:
        self._out += self._codec.send(ExceptionMessage(int(exception_type), text, channel_id=SESSION_CREATION_CHANNEL))
        self._failure = OpeningFailed(
            text, exception_type, kind is OpeningInput.LOGIN_REFUSED, username, client_id
        )
        self._transition(kind)
        self._forget()
        return [self._failure]

    def _fail(self, exception_type: ExceptionType, text: str, channel: int = CONNECTION_CHANNEL):
        self._out += self._codec.send(ExceptionMessage(int(exception_type), text, channel_id=channel))
        self._failure = OpeningFailed(text, exception_type)
        self._transition(OpeningInput.BAD_INPUT)
        self._forget()
        return [self._failure]

    def _forget(self) -> None:
        """Drop the held bytes once the opening is decided."""
        self._raw = bytearray()
        self._head = None
        self._left_out = []


def _exception_type(condition: object | None) -> ExceptionType:
    """The code ``condition`` names (an ExceptionType, its name or number); INTERNAL_ERROR otherwise."""
    if isinstance(condition, ExceptionType):
        return condition
    if isinstance(condition, int) and not isinstance(condition, bool):
        try:
            return ExceptionType(condition)
        except ValueError:
            return ExceptionType.INTERNAL_ERROR
    if isinstance(condition, str):
        return ExceptionType.__members__.get(condition, ExceptionType.INTERNAL_ERROR)
    return ExceptionType.INTERNAL_ERROR
