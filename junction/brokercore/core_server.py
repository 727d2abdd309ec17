"""The Artemis CORE server: the sans-IO CORE layer adapted to broker sessions.

:class:`CoreProtocol` is a thin Twisted protocol: ``dataReceived`` feeds
:class:`junction.protocols.core.CoreCodec`, and each packet goes where the
connection's state table (:class:`junction.protocols.core.connection.CoreConnection`)
says: PINGs, the topology, REATTACH_SESSION and CHECK_FOR_FAILOVER are
answered at once (the topology of a clustered node is its cluster's members,
kept current for the subscriber: :mod:`~junction.brokercore.core_topology`); a CREATESESSION is authenticated here (``server.security``)
and, accepted, becomes a :class:`~junction.brokercore.core_sessions.CoreSession`
with its own :class:`~junction.brokercore.session.ServerSession`; a session's
packets go to that session.  Each read is handled inside
``server.batch_writes()``, so the journal writes a read's records with one
write and one sync; the clock (the TTL, the wait for the client's version)
is the injected reactor's.

What ends a connection, and only that one: a packet the codec cannot read
(UNSUPPORTED_PACKET for an unknown type, INTERNAL_ERROR for a malformed or
oversized one), a packet on the wrong channel or on a channel with no session,
a server's packet from the client, a version outside 129-136 (108), and a
refused feature in a packet that has no answer of its own (NOT_IMPLEMENTED
213): each is answered with an EXCEPTION naming it, then the connection
closes.  A refused login (SECURITY_EXCEPTION 105, Artemis's AMQ229031 text)
or a refused operation is answered and the connection stays, as with Artemis.
No packet for the client's ``connectionTTL`` (from its PINGs; 60 s until the
first) closes the connection, as Artemis's TTL check does.  Behaviour follows
Artemis's ``CoreProtocolManager`` and ``ActiveMQPacketHandler``.
"""

from __future__ import annotations

import logging

from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from zope.interface import implementer

from junction.brokercore.core_sessions import CoreSession
from junction.brokercore.core_topology import topology_for
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.edge.acceptor import AcceptorFactory, apply_socket_options, prefixes
from junction.edge.tls import peer_subject
from junction.events.node import close_reason
from junction.model.message import RoutingType
from junction.protocols.core import (
    CoreCodec,
    CoreLimits,
    CoreProtocolError,
    ExceptionType,
    encode_packet,
    responses,
)
from junction.protocols.core.connection import Action, ConnectionState, CoreConnection

log = logging.getLogger("junction.core")

__all__ = ["CoreFactory", "CoreProtocol", "DEFAULT_MAX_SESSIONS"]

#: Sessions one connection may have open (``CoreLimits.max_channels``): a JMS
#: connection opens one per JMS session, plus one of its own.
DEFAULT_MAX_SESSIONS = 1000
_MiB = 1024 * 1024

_HANDLE = Action.HANDLE
_IGNORE = Action.IGNORE
_CLOSED = ConnectionState.CLOSED
_NEW = ConnectionState.NEW


@implementer(interfaces.IPushProducer)
class CoreProtocol(Protocol):
    """One CORE connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
        #: the journal batch every read is handled in (the server's one shared bracket)
        self._batch = server.batch_writes()
        self.reactor = reactor if reactor is not None else server.reactor
        self.security = security if security is not None else server.security
        self.acceptor = acceptor
        self.limits = limits
        self.core_limits = CoreLimits(
            max_packet_size=limits.max_frame_size if limits else 10 * _MiB,
            max_channels=DEFAULT_MAX_SESSIONS,
        )
        #: confirmations (answers, PACKETS_CONFIRMED) waiting in every session before reading pauses
        self.max_pending = limits.max_pending_frames if limits else 1000
        self.connect_timeout = (limits.connect_timeout if limits else 10_000) / 1000.0
        self.anycast_prefixes = prefixes(acceptor.anycast_prefix if acceptor else None)
        self.multicast_prefixes = prefixes(acceptor.multicast_prefix if acceptor else None)
        self.codec = CoreCodec(self.core_limits, server=True)
        #: the CORE rules: channels, versions, sessions, the answers at once
        self.connection = CoreConnection(getattr(server, "node_id", None) or "junction", self.core_limits)
        #: session channel -> its session
        self.sessions: dict[int, CoreSession] = {}
        #: who is on the other end, made at the first session (each session's ServerSession shares it)
        self.info: ConnectionInfo | None = None
        #: the transport's write buffer is full: every session's deliveries stop
        self.paused = False
        #: confirmations waiting in all sessions (reading pauses at max_pending)
        self.pending = 0
        self._reading_paused = False
        self._version_timer = None
        self._ttl_timer = None
        #: the TTL the timer runs for (the client's, from its PINGs)
        self._ttl_ms = 0
        self._last_read = 0.0
        self.peer = "?"
        #: when the event log was told of this connection (None: it was not)
        self._accepted_at = None

    # -- Twisted ------------------------------------------------------------------------------
    def connectionMade(self):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        apply_socket_options(self.transport, self.acceptor)
        self.transport.registerProducer(self, True)
        self._last_read = self.reactor.seconds()
        self._version_timer = self.reactor.callLater(self.connect_timeout, self._version_timed_out)
        self._schedule_ttl()

    def dataReceived(self, data: bytes):
        connection = self.connection
        if connection.state is _CLOSED:
            return
        self._last_read = self.reactor.seconds()
        error = None
        try:
            events = self.codec.receive_data(data)
        except CoreProtocolError as exc:
            events = exc.events  # packets completed before the bad bytes are handled first
            error = exc
        with self._batch:
            for event in events:
                try:
                    self._dispatch(event)
                except CoreProtocolError as exc:
                    self._protocol_error(exc)
                except Exception:  # noqa: BLE001 - one bad packet must not take the reactor down
                    log.exception("CORE %s: handling %r failed", self.peer, type(event).__name__)
                    self.fail(ExceptionType.INTERNAL_ERROR, f"internal error handling {type(event).__name__}")
                if connection.state is _CLOSED:
                    return
        if error is not None:
            self._protocol_error(error)

    def _dispatch(self, event) -> None:
        connection = self.connection
        action = connection.receive(event)
        if action is _HANDLE:
            self.sessions[event.channel_id].handle(event)
        elif action is _IGNORE:
            return
        elif action is Action.ANSWER:
            self.write_packet(connection.answer(event))
            if connection.ttl_ms != self._ttl_ms:
                self._ttl_changed()
        elif action is Action.TOPOLOGY:
            self._version_known()
            self._subscribe_topology()
        elif action is Action.CREATE_SESSION:
            self._version_known()
            self._create_session(connection.pending)

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
            if factory.topology is not None:
                factory.topology.unsubscribe(self)
        self.connection.close()
        for timer in (self._version_timer, self._ttl_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._version_timer = self._ttl_timer = None
        # The client failed: what it had in flight is redelivered, as Artemis's close(failed=true).
        for session in list(self.sessions.values()):
            session.close(failed=True)
        self.sessions.clear()
        events = self.server.events
        if events is not None and self._accepted_at is not None:
            events.connection_closed(self.info.id, started=self._accepted_at, reason=close_reason(reason))
            self._accepted_at = None

    # IPushProducer: the transport's write buffer is full / drained.
    def pauseProducing(self):
        self.paused = True
        for session in self.sessions.values():
            session.update_paused()

    def resumeProducing(self):
        self.paused = False
        if self.connection.state is _CLOSED:
            return
        for session in self.sessions.values():
            session.update_paused()

    def stopProducing(self):
        pass

    # -- writing --------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is not None and self.connection.state is not _CLOSED:
            transport.write(data)

    def write_packet(self, packet) -> None:
        self.write(encode_packet(packet))

    def _protocol_error(self, error: CoreProtocolError) -> None:
        """Answer what the client got wrong; close unless it was a refused session."""
        answer = self.connection.error(error)
        if answer is None:
            return
        log.info("CORE %s: %s", self.peer, error)
        self._send_last(answer)

    def fail(self, code: int, message: str, channel_id: int = 0, correlation_id: int | None = None) -> None:
        """End this connection with an EXCEPTION (a refused feature with no answer of its own,
        a failed journal write nobody waits for); the V2 form with ``correlation_id`` when the
        offending request carried one."""
        answer = self.connection.fail(code, message, channel_id)
        if answer is None:
            return
        if correlation_id is not None:
            answer = responses.exception(code, message, channel_id, correlation_id)
        log.info("CORE %s: %s", self.peer, message)
        self._send_last(answer)

    def disconnect(self) -> None:
        """The server ends the connection (shutdown): DISCONNECT in the client's form, then close."""
        packet = self.connection.disconnect()
        if packet is not None:
            self._send_last(packet)

    def _send_last(self, packet) -> None:
        """Write ``packet``; close the transport if the connection is over now."""
        transport = self.transport
        if transport is None:
            return
        transport.write(encode_packet(packet))
        if self.connection.state is _CLOSED:
            for session in self.sessions.values():
                session.update_paused()  # no deliveries into a closing connection
            transport.loseConnection()

    # -- the topology ------------------------------------------------------------------------------
    def _subscribe_topology(self) -> None:
        """SUBSCRIBE_TOPOLOGY: the cluster's members (then its changes), or this node alone."""
        factory = getattr(self, "factory", None)
        feed = factory.cluster_topology() if factory is not None else None
        if feed is None:
            self.write_packet(self.connection.topology(int(self.reactor.seconds() * 1000)))
            return
        for packet in self.connection.cluster_topology(feed.subscribe(self)):
            self.write_packet(packet)

    def topology_changed(self, changes) -> None:
        """The cluster's members changed: tell the client, if it subscribed."""
        for packet in self.connection.topology_changes(changes):
            self.write_packet(packet)

    # -- reading pauses while confirmations pile up ------------------------------------------------
    def pending_changed(self, delta: int) -> None:
        self.pending += delta
        if self.transport is None:
            return
        if not self._reading_paused and self.pending >= self.max_pending:
            self._reading_paused = True
            self.transport.pauseProducing()
        elif self._reading_paused and self.pending < self.max_pending // 2 and self.connection.state is not _CLOSED:
            self._reading_paused = False
            self.transport.resumeProducing()

    # -- sessions ----------------------------------------------------------------------------------
    def _create_session(self, request) -> None:
        connection = self.connection
        principal = None
        if self.security is not None:
            principal = self.security.login(request.username, request.password, peer_subject(self.transport))
            if principal is None:
                subject = peer_subject(self.transport) or "unavailable"
                text = (
                    f"AMQ229031: Unable to validate user from {self.peer}. "
                    f"Username: {request.username}; SSL certificate subject DN: {subject}"
                )
                log.info("CORE %s: %s", self.peer, text)
                self.write_packet(connection.refuse_session(ExceptionType.SECURITY_EXCEPTION, text))
                return
        client_id = getattr(request, "client_id", None)
        if self.info is None:
            self.info, self._accepted_at = ConnectionInfo.accepted(
                self.server, "CORE", self.transport, self.peer, acceptor=self.acceptor,
                client_id=client_id, user=getattr(principal, "user", None),
            )
        elif client_id and not self.info.client_id:
            self.info.client_id = client_id
        answer = connection.open_session()
        channel = request.session_channel_id
        self.sessions[channel] = CoreSession(self, request, ServerSession(self.server, principal, self.info))
        self.write_packet(answer)

    def session_closed(self, session: CoreSession) -> None:
        """``session`` answered its SESS_CLOSE: its channel closes."""
        if self.sessions.get(session.channel) is session:
            del self.sessions[session.channel]
        self.connection.close_session(session.channel)

    def client_id_known(self, client_id: str) -> None:
        """A session's metadata named the JMS client id (``jms-client-id``)."""
        if self.info is not None and not self.info.client_id:
            self.info.client_id = client_id

    # -- addresses -----------------------------------------------------------------------------------
    def unprefixed(self, name: str) -> tuple[str, RoutingType | None]:
        """``name`` without the acceptor's ``anycastPrefix``/``multicastPrefix``, and the routing
        type the prefix names (None without one)."""
        for prefix in self.anycast_prefixes:
            if name.startswith(prefix):
                return name[len(prefix):], RoutingType.ANYCAST
        for prefix in self.multicast_prefixes:
            if name.startswith(prefix):
                return name[len(prefix):], RoutingType.MULTICAST
        return name, None

    # -- time --------------------------------------------------------------------------------------
    def _version_known(self) -> None:
        timer = self._version_timer
        if timer is not None and timer.active():
            timer.cancel()
        self._version_timer = None

    def _version_timed_out(self) -> None:
        self._version_timer = None
        if self.connection.state is _NEW and self.transport is not None:
            self.fail(
                ExceptionType.CONNECTION_TIMEDOUT,
                f"no SUBSCRIBE_TOPOLOGY or CREATESESSION within {self.connect_timeout:g} s",
            )

    def _ttl_changed(self) -> None:
        """A PING named another TTL: time it from now."""
        timer = self._ttl_timer
        if timer is not None and timer.active():
            timer.cancel()
        self._schedule_ttl()

    def _schedule_ttl(self, delay: float | None = None) -> None:
        ttl = self._ttl_ms = self.connection.ttl_ms
        if ttl <= 0:
            self._ttl_timer = self.reactor.callLater(self.connect_timeout, self._ttl_tick)  # look again later
            return
        self._ttl_timer = self.reactor.callLater(ttl / 1000.0 if delay is None else delay, self._ttl_tick)

    def _ttl_tick(self) -> None:
        self._ttl_timer = None
        if self.connection.state is _CLOSED or self.transport is None:
            return
        ttl = self.connection.ttl_ms / 1000.0
        idle = self.reactor.seconds() - self._last_read
        if ttl > 0 and idle >= ttl:
            log.info("CORE %s: nothing received for %.1f s (connection TTL %g s), closing", self.peer, idle, ttl)
            self.connection.close()
            self.transport.loseConnection()
            return
        self._schedule_ttl(None if ttl <= 0 else ttl - idle)


class CoreFactory(AcceptorFactory):
    """Builds a :class:`CoreProtocol` per connection on one acceptor."""

    protocol_class = CoreProtocol

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None):
        super().__init__(server, acceptor=acceptor, limits=limits, reactor=reactor)
        #: the cluster's topology for this acceptor's subscribers (made at the first subscription)
        self.topology = None

    def cluster_topology(self):
        """The :class:`~junction.brokercore.core_topology.CoreTopology` this acceptor's clients
        subscribe to, or None when the node is not clustered."""
        if self.topology is None:
            name = (self.acceptor.params or {}).get("clusterConnection") if self.acceptor is not None else None
            self.topology = topology_for(self.server, self.reactor or self.server.reactor, name)
        return self.topology

    def stopFactory(self):
        if self.topology is not None:
            self.topology.close()
            self.topology = None

    def disconnect_all(self) -> None:
        """Tell every client this acceptor serves that the server goes away (DISCONNECT), and close."""
        for protocol in list(self.connections):
            protocol.disconnect()
