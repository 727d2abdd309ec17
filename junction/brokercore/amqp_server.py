"""The AMQP 1.0 server: the qpid-proton engine adapted to broker sessions.

:class:`AmqpProtocol` is a thin Twisted protocol.  Bytes first go through
:class:`junction.protocols.amqp.sasl.SaslServer` (PLAIN, ANONYMOUS; proton's
wheel has no server-side PLAIN), then into a ``proton.Transport`` in server
mode bound to a ``Connection`` and a ``Collector`` -- proton's engine is the
sans-IO codec here; proton's reactor is never used.  Each read is handled in
one journal batch (:meth:`BrokerServer.batch_writes`).  Engine events are
dispatched to small per-endpoint contexts that call the
:class:`junction.brokercore.session.ServerSession` API: one per AMQP session
and one per link (:mod:`junction.brokercore.amqp_links`), and the transaction
coordinator (:mod:`junction.brokercore.amqp_transactions`).  proton's private
API, which the hot paths need, is confined to
:mod:`junction.brokercore.proton_private`.

Behaviour follows Artemis's AMQP protocol manager: container-id is the client
id; capabilities ``queue``/``topic``, ``shared``/``global`` and the acceptor's
prefixes pick the routing type; durable subscriptions are queues named
``<container-id>.<link-name>``; the anonymous relay routes by ``to``;
selectors arrive as the ``apache.org:selector-filter:string`` source filter.
"""

from __future__ import annotations

import logging

from proton import Collector, Condition, Connection, Endpoint, Terminus, Transport, symbol
from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from zope.interface import implementer

from junction import __version__
from junction.brokercore import proton_private as pn
from junction.brokercore.amqp_large import pump_streams
from junction.brokercore.amqp_links import Receiver, Sender, SessionContext
from junction.brokercore.amqp_terminus import condition_for
from junction.brokercore.amqp_transactions import Coordinator
from junction.brokercore.session import ConnectionInfo
from junction.edge.acceptor import (
    AcceptorFactory,
    apply_socket_options,
    prefixes,
)
from junction.edge.tls import certificate_login, peer_subject
from junction.events.node import close_reason
from junction.protocols.amqp.engine import drain_output
from junction.protocols.amqp.sasl import (
    SUPPORTED_MECHANISMS,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslFailed,
    SaslRequired,
    SaslServer,
)
from junction.protocols.errors import RemoteProtocolError

log = logging.getLogger("junction.amqp")

# The engine's C functions the event dispatch uses, as module globals.
_NULL = pn.NULL
_PN_DELIVERY = pn.PN_DELIVERY
_PN_LINK_FLOW = pn.PN_LINK_FLOW
_peek = pn.collector_peek
_pop = pn.collector_pop
_event_type = pn.event_type
_event_delivery = pn.event_delivery
_event_link = pn.event_link
_delivery_link = pn.delivery_link

#: Artemis defaults for the acceptor parameters of the same names.
DEFAULT_CREDITS = 1000
DEFAULT_LOW_CREDITS = 300
DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_MAX_FRAME_SIZE = 128 * 1024
#: the highest channel number a client may use (channel-max)
DEFAULT_CHANNEL_MAX = 65_535
#: bytes of one message (all its transfers) a client may send; beyond it the
#: link is closed with amqp:link:message-size-exceeded
DEFAULT_MAX_MESSAGE_SIZE = 10 * 1024 * 1024

#: what the broker offers every connection (and what a client may ask to be alone with)
ANONYMOUS_RELAY = symbol("ANONYMOUS-RELAY")
SHARED_SUBS = symbol("SHARED-SUBS")
SOLE_CONNECTION = symbol("sole-connection-for-container")


@implementer(interfaces.IPushProducer)
class AmqpProtocol(Protocol):
    """One AMQP 1.0 connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
        #: the journal batch every read is handled in (the server's one shared bracket)
        self._batch = server.batch_writes()
        self.reactor = reactor if reactor is not None else server.reactor
        self.security = security if security is not None else server.security
        self.acceptor = acceptor
        params = acceptor.params if acceptor is not None else {}
        self.credits = int(params.get("amqpCredits", DEFAULT_CREDITS))
        self.low_credits = int(params.get("amqpLowCredits", DEFAULT_LOW_CREDITS))
        self.idle_timeout = int(params.get("amqpIdleTimeout", DEFAULT_IDLE_TIMEOUT_MS)) / 1000.0
        self.max_frame_size = int(params.get("maxFrameSize", DEFAULT_MAX_FRAME_SIZE))
        self.channel_max = int(params.get("amqpChannelMax", DEFAULT_CHANNEL_MAX))
        self.max_message_size = int(
            params.get("amqpMaxMessageSize", limits.max_frame_size if limits else DEFAULT_MAX_MESSAGE_SIZE)
        )
        self.reject_as_modified = str(params.get("amqpTreatRejectAsUnmodifiedDeliveryFailed", "false")).lower() == "true"
        self.connect_timeout = (limits.connect_timeout if limits else 10_000) / 1000.0
        self.anycast_prefixes = prefixes(acceptor.anycast_prefix if acceptor else None)
        self.multicast_prefixes = prefixes(acceptor.multicast_prefix if acceptor else None)
        anonymous = self.security is None or not self.security.enabled or self.security.anonymous_user is not None
        mechanisms = params.get("saslMechanisms")
        if mechanisms:
            offered = tuple(m.strip().upper() for m in mechanisms.split(",") if m.strip())
        else:
            offered = ("PLAIN", "ANONYMOUS") if anonymous else ("PLAIN",)
        offered = tuple(m for m in offered if m in SUPPORTED_MECHANISMS and (anonymous or m != "ANONYMOUS"))
        if not mechanisms and certificate_login(acceptor, self.security):
            offered = ("EXTERNAL", *offered)  # a client certificate logs in, as with Artemis's CertLogin
        if not offered:
            offered = ("PLAIN",)
        self.sasl = SaslServer(offered, self._authenticate, allow_no_sasl=anonymous)
        self.principal = None
        self.info: ConnectionInfo | None = None
        self.pn_transport = None
        self.pn_connection = None
        self.collector = None
        self.sessions: list[SessionContext] = []
        #: raw pn_link_t * -> link context, for the engine's hot events
        self.links: dict = {}
        #: large deliveries being written (junction.brokercore.amqp_large)
        self.streams: set = set()
        #: dispatching engine events: flush() waits for the end of the batch
        self._processing = False
        self.paused = False
        self._closing = False
        self._opened = False
        self._connect_timer = None
        self._tick_timer = None
        self._flush_scheduled = None
        self.peer = "?"
        #: when the event log was told of this connection (None: it was not)
        self._accepted_at = None

    # -- Twisted --------------------------------------------------------------------
    def connectionMade(self):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        apply_socket_options(self.transport, self.acceptor)
        self.transport.registerProducer(self, True)
        self._connect_timer = self.reactor.callLater(self.connect_timeout, self._connect_timed_out)

    def dataReceived(self, data: bytes):
        if self._closing:
            return
        if self.pn_transport is not None:
            with self._batch:
                self._push(data)
                self._process()
            self.flush()
            return
        try:
            events = self.sasl.receive_data(data)
        except RemoteProtocolError as exc:
            out = self.sasl.data_to_send()
            if out:
                self.transport.write(out)
            log.info("AMQP %s: %s", self.peer, exc)
            self._abort()
            return
        out = self.sasl.data_to_send()
        if out:
            self.transport.write(out)
        for event in events:
            if isinstance(event, SaslAuthenticated):
                self.principal = None if event.principal is _NO_SECURITY else event.principal
                self._start_engine(event.remaining)
            elif isinstance(event, NoSasl):
                principal = self.security.authenticate(None, None) if self.security is not None else None
                self.principal = principal
                self._start_engine(event.remaining)
            elif isinstance(event, Passthrough):
                if self.pn_transport is not None:
                    self._push(event.data)
            elif isinstance(event, (SaslFailed, SaslRequired)):
                log.info("AMQP %s: authentication failed (%s)", self.peer, getattr(event, "reason", "SASL required"))
                self._abort()
                return
        if self.pn_transport is not None:
            self._process()
            self.flush()

    def _authenticate(self, credentials):
        mechanism = credentials.mechanism
        if self.security is None:
            return _NO_SECURITY
        if mechanism == "PLAIN":
            return self.security.authenticate(credentials.username, credentials.password)
        if mechanism == "ANONYMOUS":
            return self.security.authenticate(None, None)
        if mechanism == "EXTERNAL":
            return self.security.authenticate_certificate(peer_subject(self.transport))
        return None

    def _start_engine(self, data: bytes) -> None:
        transport = Transport(Transport.SERVER)
        transport.max_frame_size = self.max_frame_size
        transport.channel_max = self.channel_max
        if self.idle_timeout > 0:
            transport.idle_timeout = self.idle_timeout
        connection = Connection()
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self.pn_transport = transport
        self.pn_connection = connection
        self.collector = collector
        if data:
            self._push(data)

    def _push(self, data: bytes) -> None:
        transport = self.pn_transport
        while data:
            capacity = transport.capacity()
            if capacity <= 0:
                if capacity < 0:
                    return  # the tail is closed: the connection is going
                self._process()
                capacity = transport.capacity()
                if capacity <= 0:
                    return
            chunk = data[:capacity]
            transport.push(chunk)
            data = data[len(chunk):]
            if data:
                self._process()

    def _process(self) -> None:
        """Dispatch the engine's events: deliveries and flow on raw pointers, the rest wrapped."""
        collector = pn.collector_pointer(self.collector)
        handlers = self._handlers
        links = self.links
        # Flushes requested while dispatching wait for the end of the batch.
        outer = self._processing
        self._processing = True
        try:
            self._dispatch(collector, handlers, links)
        finally:
            self._processing = outer

    def _dispatch(self, collector, handlers, links) -> None:
        while True:
            event = _peek(collector)
            if event == _NULL:
                break
            etype = _event_type(event)
            try:
                if etype == _PN_DELIVERY:
                    dlv = _event_delivery(event)
                    ctx = links.get(_delivery_link(dlv))
                    if ctx is not None and not ctx.closed:
                        ctx.on_delivery(dlv)
                elif etype == _PN_LINK_FLOW:
                    ctx = links.get(_event_link(event))
                    if ctx is not None:
                        ctx.on_flow()
                else:
                    handler = handlers.get(etype)
                    if handler is not None:
                        handler(self, pn.wrap_event(event))
            except Exception:  # noqa: BLE001 - one bad endpoint must not kill the reactor
                name = pn.event_type_name(etype)
                log.exception("AMQP %s: handling %s failed", self.peer, name)
                self._fail_connection("amqp:internal-error", f"internal error handling {name}")
            _pop(collector)

    def flush(self) -> None:
        """Write what the engine has produced (once, after the events being dispatched)."""
        transport = self.pn_transport
        if transport is None or self._processing:
            return
        # What was just written may have been the last of it (a close
        # frame): then the head is closed (pending < 0) and the socket goes.
        pending = drain_output(transport, self.transport.write)
        if pending < 0 and not self._closing:
            self._closing = True
            self.transport.loseConnection()
        if self.streams and not self.paused and not self._closing:
            pump_streams(self)
        self._schedule_tick()

    def flush_soon(self) -> None:
        """Flush once at the end of this reactor turn (coalesces a journal batch's outcomes)."""
        if self._flush_scheduled is None and not self._closing:
            self._flush_scheduled = self.reactor.callLater(0, self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = None
        if not self._closing and self.pn_transport is not None:
            self._process()
            self.flush()

    # -- timers -----------------------------------------------------------------------
    def _schedule_tick(self) -> None:
        if not self._opened or self._closing:
            return
        transport = self.pn_transport
        now = self.reactor.seconds()
        deadline = transport.tick(now)
        timer = self._tick_timer
        if timer is not None and timer.active():
            if deadline and timer.getTime() <= deadline:
                return  # fires first and re-arms itself at the next deadline
            timer.cancel()
        self._tick_timer = None
        if deadline:
            self._tick_timer = self.reactor.callLater(max(0.0, deadline - now), self._tick)

    def _tick(self) -> None:
        self._tick_timer = None
        if self._closing or self.pn_transport is None:
            return
        self.pn_transport.tick(self.reactor.seconds())
        self._process()
        self.flush()

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if not self._opened and not self._closing:
            log.info("AMQP %s: no open within %g s, closing", self.peer, self.connect_timeout)
            if self.pn_connection is not None:
                self._fail_connection("amqp:resource-limit-exceeded", f"no open within {self.connect_timeout:g} s")
            # proton holds back a close until the peer's open has arrived,
            # which it never did: drop the connection rather than wait.
            self._abort()

    # -- endpoint events -------------------------------------------------------------
    def _on_connection_open(self, event) -> None:
        conn = event.connection
        if self.info is not None:
            # proton reports a second open frame as another remote open; it
            # is illegal (AMQP 1.0 2.4.1) and must not re-identify the connection.
            self._fail_connection("amqp:illegal-state", "open received on an open connection")
            return
        if self._connect_timer is not None and self._connect_timer.active():
            self._connect_timer.cancel()
        self._connect_timer = None
        container = conn.remote_container or None
        self.info, self._accepted_at = ConnectionInfo.accepted(
            self.server, "AMQP", self.transport, self.peer, acceptor=self.acceptor,
            client_id=container, user=getattr(self.principal, "user", None),
        )
        conn.container = self.server.node_id if getattr(self.server, "node_id", None) else "junction"
        conn.offered_capabilities = [ANONYMOUS_RELAY, SHARED_SUBS]
        # What a gateway pool's readiness probe reads (junction/gateway/amqp_probe.py;
        # Artemis reads broker.NodeID / Active / ConnectionCount over management).
        # Sent only here, after SASL succeeded.  junction:connections counts the
        # node's client connections at this moment, this one included: the
        # distinct connections holding a session (every acceptor, every
        # protocol) plus this acceptor's opened AMQP connections that hold
        # none yet (as this one).  One pass over the sessions, as the
        # management API counts them.
        live = self.server.connection_ids()
        live.update(p.info.id for p in _live_connections(self) if p.info is not None)
        live.add(self.info.id)
        conn.properties = {
            symbol("product"): "Junction",
            symbol("version"): __version__,
            symbol("junction:node-id"): str(getattr(self.server, "node_id", None) or "junction"),
            symbol("junction:active"): True,
            symbol("junction:connections"): len(live),
        }
        desired = conn.remote_desired_capabilities
        desired = set(str(c) for c in (desired or ()))
        if str(SOLE_CONNECTION) in desired and container:
            if any(
                other is not self and other.info is not None and other.info.client_id == container
                for other in _live_connections(self)
            ):
                conn.open()
                conn.condition = Condition(
                    "amqp:invalid-field",
                    f"container-id {container} is already connected",
                    {symbol("invalid-field"): symbol("container-id")},
                )
                conn.close()
                return
        self._opened = True
        conn.open()

    def _on_session_open(self, event) -> None:
        ssn = event.session
        ssn.open()
        if self.info is None:
            return
        ctx = SessionContext(self, ssn)
        ssn.context = ctx
        self.sessions.append(ctx)

    def _on_link_open(self, event) -> None:
        link = event.link
        sctx = getattr(link.session, "context", None)
        if sctx is None:
            return
        try:
            if link.is_sender:
                Sender(self, sctx, link)
            elif link.remote_target.type == Terminus.COORDINATOR:
                Coordinator(self, sctx, link)
            else:
                Receiver(self, sctx, link)
        except Exception as exc:  # noqa: BLE001 - refused with the condition
            name, text = condition_for(exc)
            if name == "amqp:internal-error":
                log.exception("AMQP %s: attach of %s failed", self.peer, link.name)
            else:
                log.info("AMQP %s: attach of %s refused: %s", self.peer, link.name, text)
            self.close_link(link, name, text, refused=True)

    def close_link(self, link, name: str, text: str, *, refused: bool = False) -> None:
        """Close a link with an error condition (refusing an attach if it never opened)."""
        ctx = getattr(link, "context", None)
        if ctx is not None:
            ctx.close(False)
        if refused and not (link.state & Endpoint.LOCAL_ACTIVE):
            # Refusing an attach: attach with a null terminus, then detach.
            if link.is_sender:
                link.source.address = None
            else:
                link.target.address = None
            link.open()
        link.condition = Condition(name, text)
        link.close()

    def _on_link_close(self, event) -> None:
        self._link_ended(event.link, closed=True)

    def _on_link_detach(self, event) -> None:
        self._link_ended(event.link, closed=False)

    def _link_ended(self, link, *, closed: bool) -> None:
        """The client closed (for good) or detached (to resume later) a link: answer in kind."""
        ctx = getattr(link, "context", None)
        if ctx is not None:
            ctx.close(closed)
        if link.state & Endpoint.LOCAL_ACTIVE:
            if closed:
                link.close()
            else:
                link.detach()

    def _on_session_close(self, event) -> None:
        ssn = event.session
        ctx = getattr(ssn, "context", None)
        if ctx is not None:
            ctx.close()
            if ctx in self.sessions:
                self.sessions.remove(ctx)
        if ssn.state & Endpoint.LOCAL_ACTIVE:
            ssn.close()

    def _on_connection_close(self, event) -> None:
        self._close_sessions()
        conn = event.connection
        if conn.state & Endpoint.LOCAL_ACTIVE:
            conn.close()

    def _on_transport_error(self, event) -> None:
        condition = self.pn_transport.condition
        if condition is not None:
            log.info("AMQP %s: %s: %s", self.peer, condition.name, condition.description)

    def _on_transport_tail_closed(self, event) -> None:
        # proton stops reading, with no condition and no close frame, when a
        # frame's body does not decode ("Error dispatching frame"); a peer's
        # close or a framing error close the tail too, and are handled.
        conn = self.pn_connection
        if self._closing or self.pn_transport.condition is not None:
            return
        if conn is not None and conn.state & Endpoint.REMOTE_CLOSED:
            return
        log.info("AMQP %s: a frame that does not decode, closing", self.peer)
        self._fail_connection("amqp:decode-error", "malformed frame: its body does not decode")
        self._abort()  # proton holds the close back if no open arrived

    def _on_transport_closed(self, event) -> None:
        self.flush()
        if not self._closing:
            self._closing = True
            self.transport.loseConnection()

    _handlers = {
        pn.PN_CONNECTION_REMOTE_OPEN: _on_connection_open,
        pn.PN_SESSION_REMOTE_OPEN: _on_session_open,
        pn.PN_LINK_REMOTE_OPEN: _on_link_open,
        pn.PN_LINK_REMOTE_CLOSE: _on_link_close,
        pn.PN_LINK_REMOTE_DETACH: _on_link_detach,
        pn.PN_SESSION_REMOTE_CLOSE: _on_session_close,
        pn.PN_CONNECTION_REMOTE_CLOSE: _on_connection_close,
        pn.PN_TRANSPORT_ERROR: _on_transport_error,
        pn.PN_TRANSPORT_CLOSED: _on_transport_closed,
        pn.PN_TRANSPORT_TAIL_CLOSED: _on_transport_tail_closed,
    }

    # -- helpers ---------------------------------------------------------------------------
    def _fail_connection(self, name: str, text: str) -> None:
        conn = self.pn_connection
        if conn is None:
            self._abort()
            return
        self._close_sessions()
        if not conn.state & Endpoint.LOCAL_ACTIVE and not conn.state & Endpoint.LOCAL_CLOSED:
            conn.open()
        conn.condition = Condition(name, text)
        if not conn.state & Endpoint.LOCAL_CLOSED:
            conn.close()
        self.flush()

    def _abort(self) -> None:
        if not self._closing:
            self._closing = True
            self.transport.loseConnection()

    def _close_sessions(self) -> None:
        for ctx in self.sessions:
            ctx.close()
        self.sessions.clear()

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        self._closing = True
        for timer in (self._connect_timer, self._tick_timer, self._flush_scheduled):
            if timer is not None and timer.active():
                timer.cancel()
        self._connect_timer = self._tick_timer = self._flush_scheduled = None
        events = self.server.events
        if events is not None and self._accepted_at is not None:
            events.connection_closed(self.info.id, started=self._accepted_at, reason=close_reason(reason))
            self._accepted_at = None
        self._close_sessions()
        for stream in list(self.streams):
            stream.abort()
        connection = self.pn_connection
        if connection is not None:
            # proton keeps an endpoint's Python attributes with its C object, and
            # our contexts keep that object alive: a cycle Python's collector
            # cannot see, which held every closed connection in memory.
            for endpoint in _endpoints(connection.link_head(0)) + _endpoints(connection.session_head(0)):
                endpoint.context = None
        if self.pn_transport is not None:
            self.pn_transport.unbind()
        if self.collector is not None:
            self.collector.release()
        self.pn_transport = None

    # IPushProducer: the transport's write buffer is full / drained.
    def pauseProducing(self):
        self.paused = True
        for ctx in self.sessions:
            ctx.session.set_paused(True)

    def resumeProducing(self):
        self.paused = False
        if self._closing:
            return
        for ctx in self.sessions:
            ctx.session.set_paused(False)
        if self.streams:
            self.flush()

    def stopProducing(self):
        pass


def _endpoints(first) -> list:
    """A proton connection's links (or sessions), from the first one ``*_head(0)`` gave."""
    found = []
    while first is not None:
        found.append(first)
        first = first.next(0)
    return found


class _NoSecurity:
    """The principal of a connection to a node without a security manager."""

    def __bool__(self):
        return True


_NO_SECURITY = _NoSecurity()


def _live_connections(protocol: AmqpProtocol):
    factory = getattr(protocol, "factory", None)
    return list(factory.connections) if factory is not None else []


class AmqpFactory(AcceptorFactory):
    """Builds an :class:`AmqpProtocol` per connection on one acceptor."""

    protocol_class = AmqpProtocol
