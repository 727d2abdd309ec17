"""The STOMP 1.0/1.1/1.2 server: the sans-IO STOMP layer adapted to a broker session.

:class:`StompProtocol` is a thin Twisted protocol (twisted ``web/_http2.py``
style): ``dataReceived`` feeds :class:`junction.protocols.stomp.StompCodec`,
and each frame goes where the connection's state table
(:class:`junction.protocols.stomp.connection.StompConnection`) says: the
CONNECT to authentication and negotiation, the session's commands to
handlers that call the :class:`junction.brokercore.session.ServerSession`
API (SEND and transactions here, subscriptions, deliveries and acks in
:mod:`junction.brokercore.stomp_subscriptions`), anything the table refuses
to an ERROR.  The frames written back are built by
:mod:`junction.protocols.stomp.builders` and the codec; the clock (connect
timeout, heart-beats, the TTL) is the reactor's.  Behaviour follows Artemis's
STOMP support.

Confirmations are ordered: a RECEIPT (or the ERROR for a failed send) is
written only after everything the client sent before it is confirmed, so a
receipt for a DISCONNECT or a later SEND proves every earlier durable SEND is
on disk.  Errors close only this connection, after an ERROR frame that names
what the client did wrong.
"""

from __future__ import annotations

import logging
from collections import deque

from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from zope.interface import implementer

from junction import __version__
from junction.brokercore.scheduled import SCHEDULED_DELIVERY
from junction.brokercore.scheduled_headers import (
    SCHEDULED_DELAY_HEADER,
    SCHEDULED_TIME_HEADER,
    stomp_delivery_time,
)
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.brokercore.stomp_large import StompStreaming
from junction.brokercore.stomp_subscriptions import StompSubscriptions, _Subscription, int_header
from junction.edge.acceptor import (
    AcceptorFactory,
    apply_socket_options,
    prefixes,
)
from junction.edge.tls import peer_subject
from junction.events.node import close_reason
from junction.model import errors
from junction.model.message import BodyType, Message, RoutingType
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.stomp import Frame, StompCodec, StompLimits
from junction.protocols.stomp.builders import login_refused, receipt_for, security_error
from junction.protocols.stomp.connection import Action, ConnectionState, StompConnection, StompError

log = logging.getLogger("junction.stomp")

# Enum members as constants (an Enum.MEMBER lookup is a descriptor call in 3.11).
_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST
_BYTES = BodyType.BYTES
_TEXT = BodyType.TEXT
_CONNECTED = ConnectionState.CONNECTED
_DISCONNECTING = ConnectionState.DISCONNECTING
_CLOSED = ConnectionState.CLOSED
_HANDLE = Action.HANDLE
_CONNECT = Action.CONNECT

#: Heart-beat tolerance: the connection dies after this many missed client
#: intervals (Artemis ``heartBeatToConnectionTtlModifier`` default 2.0).
DEFAULT_TTL_MODIFIER = 2.0
#: Headers that describe the frame, not the message (not copied to properties).
_SEND_RESERVED = frozenset(
    {
        "destination",
        "transaction",
        "receipt",
        "content-length",
        "persistent",
        "priority",
        "expires",
        "correlation-id",
        "reply-to",
        "type",
        "destination-type",
        "message-id",
        "timestamp",
        SCHEDULED_DELAY_HEADER,
        SCHEDULED_TIME_HEADER,
    }
)
_SECURITY_ERRORS: tuple = ()
#: Client ids of a gateway router's own probe connections start with this
#: (Artemis's ``ConnectionRouter.CLIENT_ID_PREFIX``; the gateway's
#: ``INTERNAL_CLIENT_ID_PREFIX``, which the broker core cannot import).
ROUTER_PROBE_CLIENT_ID_PREFIX = "$.artemis.internal.router.client."


def _security_error_types():
    global _SECURITY_ERRORS
    if not _SECURITY_ERRORS:
        from junction.brokercore.security import SecurityError

        _SECURITY_ERRORS = (SecurityError,)
    return _SECURITY_ERRORS


class _Pending:
    """One entry in the ordered confirmation queue.

    ``frame`` is what to write once the entry is done: a :class:`Frame`, its
    serialised bytes (a RECEIPT built in advance), a :class:`_Failure` or None.
    """

    __slots__ = ("done", "frame", "close_after")

    def __init__(self, frame=None, done=False, close_after=False):
        self.done = done
        self.frame = frame
        self.close_after = close_after


class _Failure:
    """A confirmation that failed: its turn in the queue ends the connection with an ERROR."""

    __slots__ = ("message", "receipt")

    def __init__(self, message: str, receipt: str | None):
        self.message = message
        self.receipt = receipt


@implementer(interfaces.IPushProducer)
class StompProtocol(StompSubscriptions, StompStreaming, Protocol):
    """One STOMP connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
        #: the journal batch every read is handled in (the server's one shared bracket)
        self._batch = server.batch_writes()
        self.reactor = reactor if reactor is not None else server.reactor
        self.security = security if security is not None else server.security
        self.acceptor = acceptor
        params = acceptor.params if acceptor is not None else {}
        self.limits = limits
        stomp_limits = StompLimits(
            max_frame_size=int(params.get("stompMaxFramePayloadLength", limits.max_frame_size if limits else 10 * 1024 * 1024)),
            max_header_count=limits.max_header_count if limits else 1000,
            max_header_length=limits.max_header_length if limits else 64 * 1024,
        )
        self.max_pending = limits.max_pending_frames if limits else 1000
        self.connect_timeout = (limits.connect_timeout if limits else 10_000) / 1000.0
        self.ttl_modifier = float(params.get("heartBeatToConnectionTtlModifier", DEFAULT_TTL_MODIFIER))
        self.anycast_prefixes = prefixes(acceptor.anycast_prefix if acceptor else None)
        self.multicast_prefixes = prefixes(acceptor.multicast_prefix if acceptor else None)
        self.codec = StompCodec(stomp_limits, server=True)
        #: the STOMP rules: what each frame means in each state, negotiation, replies
        self.connection = StompConnection(self.codec)
        #: command -> handler, for the commands CONNECTED handles in place (the hot path)
        self._fast: dict = {}
        self.session: ServerSession | None = None
        #: the negotiated version (the connection's, once CONNECTED)
        self.version = None
        self.subscriptions: dict[str, _Subscription] = {}
        self.transactions: dict = {}
        #: message id -> the subscription(s) holding it unacknowledged (see stomp_acks)
        self._holders: dict = {}
        self._confirm: deque = deque()
        #: MESSAGE frames of the delivery pass in progress, written together
        #: at its end (_end_batch), before anything else is written, or once
        #: they reach MAX_BATCH_BYTES (so transport backpressure still stops a
        #: pass about where it stopped when every frame was its own write)
        self._out: list[bytes] = []
        self._out_size = 0
        self._reading_paused = False
        #: the transport's write buffer is full (IPushProducer)
        self._transport_paused = False
        #: the large MESSAGE body being written (junction.brokercore.stomp_large), or None
        self._stream = None
        self._connect_timer = None
        self._send_timer = None
        self._recv_timer = None
        self._send_interval = 0.0
        self._recv_ttl = 0.0
        self._last_write = 0.0
        self._last_read = 0.0
        self.session_id = None
        #: when the event log was told of this connection (None: it was not)
        self._accepted_at = None

    # -- Twisted -----------------------------------------------------------------------
    def connectionMade(self):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)
        apply_socket_options(self.transport, self.acceptor)
        self.transport.registerProducer(self, True)
        self._connect_timer = self.reactor.callLater(self.connect_timeout, self._connect_timed_out)
        self._last_read = self.reactor.seconds()

    def dataReceived(self, data: bytes):
        if self.connection.state is _CLOSED:
            return
        self._last_read = self.reactor.seconds()
        malformed = None
        try:
            events = self.codec.receive_data(data)
        except RemoteProtocolError as exc:
            # Frames completed before the bad one in this read still count.
            events = getattr(exc, "events", None) or []
            malformed = exc
        with self._batch:
            self._handle(events)
        if malformed is not None:
            self._fail(f"malformed frame: {malformed}")

    def _handle(self, events, reread: bool = False) -> None:
        """Act on the events of one read.  ``reread``: they were parsed before the
        version was negotiated (they came behind the CONNECT): read them again."""
        connection = self.connection
        events = iter(events)
        for event in events:
            try:
                if reread and event.__class__ is Frame:
                    event = self.codec.reread(event)
                # The commands CONNECTED handles in place go straight to their
                # handler; everything else asks the connection's table.
                if connection.state is _CONNECTED and event.__class__ is Frame:
                    handler = self._fast.get(event.command)
                    if handler is not None:
                        handler(self, event)
                        continue
                if self._dispatch(event) is _CONNECT and connection.state is _CONNECTED and not reread:
                    self._handle(events, reread=True)
                    return
            except StompError as exc:
                self._fail(str(exc), detail=exc.detail, frame=event)
                return
            except RemoteProtocolError as exc:  # a frame behind the CONNECT, reread
                self._fail(f"malformed frame: {exc}")
                return
            except _security_error_types() as exc:
                self._fail(security_error(exc), frame=event)
                return
            except errors.BrokerError as exc:
                self._fail(f"{exc}", frame=event)
                return

    def _dispatch(self, event) -> Action:
        """What the connection's table says for ``event`` (raises StompError for what it refuses)."""
        action = self.connection.receive(event)
        if action is _HANDLE:
            self._handlers[event.command](self, event)
        elif action is _CONNECT:
            self._on_connect(event)
        return action

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        self.connection.close()
        for timer in (self._connect_timer, self._send_timer, self._recv_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._connect_timer = self._send_timer = self._recv_timer = None
        if self.session is not None:
            events = self.server.events
            if events is not None and self._accepted_at is not None:
                events.connection_closed(self.session.connection.id, started=self._accepted_at, reason=close_reason(reason))
            self.session.close()
            self.session = None
        self.subscriptions.clear()
        self._holders.clear()
        self._confirm.clear()
        self._out.clear()
        self._out_size = 0
        self._stream_abort()

    # IPushProducer: the transport's write buffer is full / drained.
    def pauseProducing(self):
        self._transport_paused = True
        if self.session is not None:
            self.session.set_paused(True)

    def resumeProducing(self):
        self._transport_paused = False
        if self._stream is not None:
            self._stream_pump()
            if self._stream is not None:
                return
        # A connection on its way out stays paused (see _stop_deliveries).
        state = self.connection.state
        if self.session is not None and not (state is _CLOSED or state is _DISCONNECTING):
            self.session.set_paused(False)

    def stopProducing(self):
        pass

    # -- writing ------------------------------------------------------------------------
    def _write(self, frame: Frame) -> None:
        if self._out:
            self._end_batch()
        if self.transport is None:
            return
        if self._stream is not None:
            self._stream_hold(self.codec.send(frame))
            return
        self.transport.write(self.codec.send(frame))
        self._last_write = self.reactor.seconds()

    def _write_bytes(self, data: bytes) -> None:
        """Write a frame already serialised (as the codec would have)."""
        if self._out:
            self._end_batch()
        if self.transport is None:
            return
        if self._stream is not None:
            self._stream_hold(data)
            return
        self.transport.write(data)
        self._last_write = self.reactor.seconds()

    def _end_batch(self) -> None:
        """Write the MESSAGE frames of a delivery pass, in one write."""
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_size = 0
        if self.transport is None:
            return
        if self._stream is not None:
            self._stream_hold(data)
            return
        self.transport.write(data)
        self._last_write = self.reactor.seconds()

    def _stop_deliveries(self) -> None:
        """No more MESSAGEs: the client will not read them (an auto-ack consumer
        would lose them).  Unacked ones go back when the connection is lost."""
        if self.session is not None:
            self.session.set_paused(True)

    def _fail(
        self, message: str, *, detail: str = "", frame: Frame | None = None, receipt: str | None = None
    ) -> None:
        """ERROR frame naming the problem, then close this connection only."""
        if receipt is None and isinstance(frame, Frame):
            receipt = frame.get("receipt")
        error = self.connection.error(message, detail=detail, receipt=receipt)
        if error is None:  # closed already
            return
        self._stop_deliveries()
        log.info("STOMP connection %s: %s", self._peer(), message)
        if self._stream is not None:
            # An ERROR now would land inside the large body being written: cut it short.
            self._stream_abort()
            if self.transport is not None:
                self.transport.loseConnection()
            return
        self._write(error)
        if self.transport is not None:
            self.transport.loseConnection()

    def _peer(self) -> str:
        try:
            peer = self.transport.getPeer()
            return f"{peer.host}:{peer.port}"
        except Exception:  # pragma: no cover - transports without a peer
            return "?"

    # -- ordered confirmations ---------------------------------------------------------------
    def _enqueue(self, entry: _Pending) -> None:
        queue = self._confirm
        queue.append(entry)
        if len(queue) >= self.max_pending and not self._reading_paused:
            self._reading_paused = True
            self.transport.pauseProducing()
        if queue[0].done or self._reading_paused:  # else _flush() has nothing to do
            self._flush()

    def _flush(self) -> None:
        queue = self._confirm
        while queue and queue[0].done:
            entry = queue.popleft()
            frame = entry.frame
            if frame is not None:
                if frame.__class__ is bytes:
                    self._write_bytes(frame)
                elif frame.__class__ is _Failure:
                    self._fail(frame.message, receipt=frame.receipt)
                    return
                else:
                    self._write(frame)
            if entry.close_after:
                self._stop_deliveries()
                self.connection.close()
                if self._stream is not None:
                    self._stream.close_after = True  # after the large body being written
                elif self.transport is not None:
                    self.transport.loseConnection()
                return
        if self._reading_paused and len(queue) < self.max_pending // 2 and self.connection.state is not _CLOSED:
            self._reading_paused = False
            self.transport.resumeProducing()

    def _confirm_after(self, d, receipt: str | None, *, what: str):
        # The RECEIPT is built now; it is written only once ``d`` fires.
        entry = _Pending(None if receipt is None else self._receipt_frame(receipt))
        self._enqueue(entry)
        d.addCallbacks(self._confirmed, self._confirm_failed, callbackArgs=(entry,), errbackArgs=(entry, receipt, what))

    def _confirmed(self, _, entry: _Pending) -> None:
        entry.done = True
        if self.connection.state is not _CLOSED:
            self._flush()

    def _confirm_failed(self, failure, entry: _Pending, receipt: str | None, what: str) -> None:
        entry.done = True
        entry.frame = _Failure(f"{what} failed: {failure.value}", receipt)
        if self.connection.state is not _CLOSED:
            self._flush()

    #: A RECEIPT for a receipt id: its wire bytes when nothing needs escaping or
    #: checking (what the codec would write), else the Frame for the codec.
    _receipt_frame = staticmethod(receipt_for)

    def _receipt(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self._enqueue(_Pending(receipt_for(receipt), done=True))

    # -- CONNECT ------------------------------------------------------------------------------
    def _on_connect(self, frame: Frame) -> None:
        if self._connect_timer is not None and self._connect_timer.active():
            self._connect_timer.cancel()
        self._connect_timer = None
        connection = self.connection
        offer = connection.negotiate(frame)
        if offer.version is None:
            self._write(connection.refuse_version())
            self.transport.loseConnection()
            return
        principal = None
        if self.security is not None:
            principal = self.security.login(offer.login, offer.passcode, peer_subject(self.transport))
            if principal is None:
                raise StompError(*login_refused(offer.login))
        self.version = offer.version
        client_id = offer.client_id
        info, self._accepted_at = ConnectionInfo.accepted(
            self.server, "STOMP", self.transport, self._peer(), acceptor=self.acceptor,
            client_id=client_id, user=getattr(principal, "user", None),
        )
        self.session = ServerSession(self.server, principal, info)
        self.session_id = f"{self.server.node_id[:8]}-{info.id}"
        probe = client_id is not None and client_id.startswith(ROUTER_PROBE_CLIENT_ID_PREFIX)
        accepted = connection.accept(
            self.session_id, f"Junction/{__version__}", self._probe_headers() if probe else ()
        )
        beats = accepted.heart_beats
        if beats is not None:
            self._start_heartbeats(send_ms=beats.send_ms, recv_ms=beats.recv_ms)
        self._fast = self._fast_handlers(connection.handled_in_place())
        self._write(accepted.frame)

    @classmethod
    def _fast_handlers(cls, commands: frozenset) -> dict:
        """The handlers of ``commands`` (what the connected state handles in place), as a dict
        shared by every connection of the version (made once per set of commands)."""
        fast = cls._fast_by_commands.get(commands)
        if fast is None:
            fast = cls._fast_by_commands[commands] = {command: cls._handlers[command] for command in commands}
        return fast

    #: _fast_handlers' dicts, by set of commands (one per STOMP version: a bounded handful)
    _fast_by_commands: dict = {}

    def _probe_headers(self) -> list:
        """What a gateway pool's STOMP readiness probe reads (junction/gateway/stomp_probe.py).

        Said only to a connection whose client-id has the routers' internal
        prefix, so every other client's CONNECTED is unchanged and the count
        (one pass over the sessions) is paid only by probes.  As in the AMQP
        Open properties: the node id, active, and the node's client
        connections now -- the distinct connections holding a session, every
        acceptor and protocol, this one included.
        """
        live = self.server.connection_count()
        return [
            ("junction-node-id", str(getattr(self.server, "node_id", None) or "junction")),
            ("junction-active", "true"),
            ("junction-connections", str(live)),
        ]

    def _connect_timed_out(self):
        self._connect_timer = None
        try:
            self.connection.timeout(self.connect_timeout)
        except StompError as exc:
            self._fail(str(exc))

    def _start_heartbeats(self, *, send_ms: int, recv_ms: int) -> None:
        if send_ms > 0:
            self._send_interval = send_ms / 1000.0
            self._send_timer = self.reactor.callLater(self._send_interval, self._heartbeat_tick)
        if recv_ms > 0:
            self._recv_ttl = recv_ms / 1000.0 * self.ttl_modifier
            self._recv_timer = self.reactor.callLater(self._recv_ttl, self._ttl_tick)

    def _heartbeat_tick(self):
        self._send_timer = None
        if self.connection.state is _CLOSED or self.transport is None:
            return
        now = self.reactor.seconds()
        if now - self._last_write >= self._send_interval * 0.9 and self._stream is None:
            self._end_batch()
            self.transport.write(self.codec.heartbeat())
            self._last_write = now
        self._send_timer = self.reactor.callLater(self._send_interval, self._heartbeat_tick)

    def _ttl_tick(self):
        self._recv_timer = None
        if self.connection.state is _CLOSED:
            return
        idle = self.reactor.seconds() - self._last_read
        if idle >= self._recv_ttl:
            log.info("STOMP connection %s: no data or heart-beat for %.1f s, closing", self._peer(), idle)
            self._fail(f"connection TTL expired: nothing received for {idle:.1f} s")
            return
        self._recv_timer = self.reactor.callLater(self._recv_ttl - idle, self._ttl_tick)

    # -- destinations ---------------------------------------------------------------------------
    def _destination(self, frame: Frame) -> tuple[str, RoutingType | None, str]:
        return self._resolve_destination(
            frame.command, frame.get("destination"), frame.get("destination-type"), frame.get("subscription-type")
        )

    def _resolve_destination(
        self, command: str, destination: str | None, destination_type: str | None, subscription_type: str | None
    ) -> tuple[str, RoutingType | None, str]:
        """(address, routing type, prefix) a destination header names."""
        if not destination:
            raise StompError(f"{command} needs a destination header")
        for prefix in self.anycast_prefixes:
            if destination.startswith(prefix):
                return destination[len(prefix):], _ANYCAST, prefix
        for prefix in self.multicast_prefixes:
            if destination.startswith(prefix):
                return destination[len(prefix):], _MULTICAST, prefix
        rtype = None
        for header, value in (("destination-type", destination_type), ("subscription-type", subscription_type)):
            if value:
                try:
                    rtype = RoutingType.parse(value)
                except KeyError:
                    raise StompError(f"{header} must be ANYCAST or MULTICAST, not {value!r}") from None
                break
        return destination, rtype, ""

    # -- SEND ---------------------------------------------------------------------------------------
    def _on_send(self, frame: Frame) -> None:
        # One pass over the headers (this is the hot path).  The first
        # occurrence of a header counts, as Frame.get has it, except for the
        # message fields, where a repeat overrides (as it always has here).
        # Errors keep their order: destination first, then priority/expires.
        destination = destination_type = txid = receipt = None
        has_length = False
        properties: dict = {}
        durable = False
        priority = 4
        expiration = 0
        correlation_id = reply_to = None
        error = None
        scheduled_delay = scheduled_time = None
        for key, value in frame.headers:
            if key in _SEND_RESERVED:
                if key == "destination":
                    if destination is None:
                        destination = value
                elif key == "persistent":
                    durable = value.lower() == "true"
                elif key == "receipt":
                    if receipt is None:
                        receipt = value
                elif key == "content-length":
                    has_length = True
                elif key == "transaction":
                    if txid is None:
                        txid = value
                elif key == "priority":
                    if error is None:
                        try:
                            priority = int_header(key, value, 0, 9)
                        except StompError as exc:
                            error = exc
                elif key == "expires":
                    if error is None:
                        try:
                            expiration = int_header(key, value, 0, None)
                        except StompError as exc:
                            error = exc
                elif key == "correlation-id":
                    correlation_id = value
                elif key == "reply-to":
                    reply_to = value
                elif key == "type":
                    properties.setdefault("JMSType", value)
                elif key == "destination-type":
                    if destination_type is None:
                        destination_type = value
                elif key == SCHEDULED_DELAY_HEADER:
                    scheduled_delay = value
                elif key == SCHEDULED_TIME_HEADER:
                    scheduled_time = value
                continue
            if key not in properties:
                properties[key] = value
        address, rtype, _prefix = self._resolve_destination(
            "SEND", destination, destination_type, properties.get("subscription-type")
        )
        if error is not None:
            raise error
        now_ms = int(self.reactor.seconds() * 1000)
        if scheduled_delay is not None or scheduled_time is not None:
            at = stomp_delivery_time(scheduled_delay, scheduled_time, now_ms)
            if at:
                properties[SCHEDULED_DELIVERY] = at
        # Positional, in Message's field order (address, body, body_type,
        # durable, priority, expiration, timestamp, routing_type, properties,
        # user_id, correlation_id, reply_to): a dataclass's __init__ matches
        # a dozen keywords more slowly than it takes the message apart.
        message = Message(
            address,
            frame.body,
            _BYTES if has_length else _TEXT,
            durable,
            priority,
            expiration,
            now_ms,
            None,
            properties,
            None,
            correlation_id,
            reply_to,
        )
        if txid is not None:
            tx = self._transaction(txid)
            self.session.send(message, routing_type=rtype, tx=tx)
            if receipt is not None:
                self._enqueue(_Pending(self._receipt_frame(receipt), done=True))
            return
        d = self.session.submit(message, rtype)
        if d is None:
            # Already safe (not durable, or nothing to store): confirm in order.
            if receipt is not None:
                self._enqueue(_Pending(self._receipt_frame(receipt), done=True))
            elif self._confirm:
                self._enqueue(_Pending(None, done=True))
            return
        if receipt is None and d.called and not self._confirm:
            # Already confirmed and nothing pending before it: nothing to order.
            d.addErrback(self._send_failed_late)
            return
        self._confirm_after(d, receipt, what="SEND")

    def _send_failed_late(self, failure):
        self._fail(f"SEND failed: {failure.value}")


    # -- transactions ----------------------------------------------------------------------------------
    def _transaction(self, txid: str):
        tx = self.transactions.get(txid)
        if tx is None:
            raise StompError(f"transaction {txid} is not active on this connection")
        return tx

    def _on_begin(self, frame: Frame) -> None:
        txid = frame.get("transaction")
        if not txid:
            raise StompError("BEGIN needs a transaction header")
        if txid in self.transactions:
            raise StompError(f"transaction {txid} is already active")
        self.transactions[txid] = self.session.begin()
        self._receipt(frame)

    def _on_commit(self, frame: Frame) -> None:
        txid = frame.get("transaction")
        if not txid:
            raise StompError("COMMIT needs a transaction header")
        tx = self._transaction(txid)
        del self.transactions[txid]
        d = self.session.commit(tx)
        self._confirm_after(d, frame.get("receipt"), what=f"COMMIT of {txid}")

    def _on_abort(self, frame: Frame) -> None:
        txid = frame.get("transaction")
        if not txid:
            raise StompError("ABORT needs a transaction header")
        tx = self._transaction(txid)
        del self.transactions[txid]
        self.session.rollback(tx)
        self._receipt(frame)

    # -- DISCONNECT --------------------------------------------------------------------------------------
    def _on_disconnect(self, frame: Frame) -> None:
        # The table has moved to DISCONNECTING: later frames are ignored.
        receipt = frame.get("receipt")
        self._stop_deliveries()
        self._enqueue(_Pending(receipt_for(receipt) if receipt is not None else None, done=True, close_after=True))

    #: the handlers of the commands the connection's table hands to the adapter
    _handlers = {
        "SEND": _on_send,
        "SUBSCRIBE": StompSubscriptions._on_subscribe,
        "UNSUBSCRIBE": StompSubscriptions._on_unsubscribe,
        "ACK": StompSubscriptions._on_ack,
        "NACK": StompSubscriptions._on_nack,
        "BEGIN": _on_begin,
        "COMMIT": _on_commit,
        "ABORT": _on_abort,
        "DISCONNECT": _on_disconnect,
    }


class StompFactory(AcceptorFactory):
    """Builds a :class:`StompProtocol` per connection on one acceptor."""

    protocol_class = StompProtocol
