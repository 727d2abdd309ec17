"""The STOMP 1.0/1.1/1.2 server: the sans-IO codec adapted to a broker session.

:class:`StompProtocol` is a thin Twisted protocol (twisted ``web/_http2.py``
style): ``dataReceived`` feeds :class:`junction.protocols.stomp.StompCodec`,
each frame is dispatched to a handler that calls the
:class:`junction.brokercore.session.ServerSession` API, and the frames the
handlers produce are written back.  Behaviour follows Artemis's STOMP support
with ActiveMQ Classic's meaning of ``activemq.prefetchSize`` (a message count;
``consumer-window-size`` is Artemis's byte window) and an auto-ack consumer
that never stalls.

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
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.brokercore.stomp_acks import AckNotFound, find, joined, release
from junction.edge.acceptor import (
    AcceptorFactory,
    apply_socket_options,
    prefixes,
    proxy_details,
)
from junction.edge.tls import peer_subject
from junction.events.node import close_reason
from junction.model import errors
from junction.model.message import BodyType, Message, RoutingType, Typed, plain
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.stomp import Frame, HeartBeat, StompCodec, StompLimits

log = logging.getLogger("junction.stomp")

# Enum members as constants (an Enum.MEMBER lookup is a descriptor call in 3.11).
_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST
_BYTES = BodyType.BYTES
_TEXT = BodyType.TEXT

SUPPORTED_VERSIONS = ("1.0", "1.1", "1.2")
#: Heart-beat tolerance: the connection dies after this many missed client
#: intervals (Artemis ``heartBeatToConnectionTtlModifier`` default 2.0).
DEFAULT_TTL_MODIFIER = 2.0
#: MESSAGE bytes a delivery pass gathers before writing them (see StompProtocol._out).
MAX_BATCH_BYTES = 16 * 1024
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


class StompError(Exception):
    """A request the client got wrong: answered with ERROR, then the connection closes."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class _Subscription:
    __slots__ = ("id", "destination", "ack", "consumer", "prefix", "pending", "durable_name")

    def __init__(self, sub_id, destination, ack, prefix, durable_name):
        self.id = sub_id
        self.destination = destination
        self.ack = ack
        self.prefix = prefix
        self.consumer = None
        #: message id (text) -> ref for client / client-individual acks, in delivery order
        self.pending: dict = {}
        self.durable_name = durable_name


class _Pending:
    """One entry in the ordered confirmation queue.

    ``frame`` is what to write once the entry is done: a :class:`Frame`, its
    serialised bytes (a RECEIPT built in advance) or None.
    """

    __slots__ = ("done", "frame", "close_after")

    def __init__(self, frame=None, done=False, close_after=False):
        self.done = done
        self.frame = frame
        self.close_after = close_after


@implementer(interfaces.IPushProducer)
class StompProtocol(Protocol):
    """One STOMP connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
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
        self.session: ServerSession | None = None
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
        self._closing = False
        #: DISCONNECT received: later frames are ignored, deliveries stopped
        self._disconnecting = False
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
        if self._closing:
            return
        self._last_read = self.reactor.seconds()
        malformed = None
        try:
            events = self.codec.receive_data(data)
        except RemoteProtocolError as exc:
            # Frames completed before the bad one in this read still count.
            events = getattr(exc, "events", None) or []
            malformed = exc
        with self.server.batch_writes():
            self._handle(events)
        if malformed is not None:
            self._fail(f"malformed frame: {malformed}")

    def _handle(self, events) -> None:
        handlers = self._handlers
        for event in events:
            if self._closing or self._disconnecting:
                return
            if isinstance(event, HeartBeat):
                continue
            try:
                # _dispatch(event), with the connected case inline
                handler = handlers.get(event.command) if self.session is not None else None
                if handler is not None:
                    handler(self, event)
                else:
                    self._dispatch(event)
            except StompError as exc:
                self._fail(str(exc), detail=exc.detail, frame=event)
                return
            except _security_error_types() as exc:
                self._fail(f"Security Error occurred: {exc}", frame=event)
                return
            except errors.BrokerError as exc:
                self._fail(f"{exc}", frame=event)
                return

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        self._closing = True
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

    # IPushProducer: the transport's write buffer is full / drained.
    def pauseProducing(self):
        if self.session is not None:
            self.session.set_paused(True)

    def resumeProducing(self):
        # A connection on its way out stays paused (see _stop_deliveries).
        if self.session is not None and not (self._closing or self._disconnecting):
            self.session.set_paused(False)

    def stopProducing(self):
        pass

    # -- writing ------------------------------------------------------------------------
    def _write(self, frame: Frame) -> None:
        if self._out:
            self._end_batch()
        if self.transport is None:
            return
        self.transport.write(self.codec.send(frame))
        self._last_write = self.reactor.seconds()

    def _write_bytes(self, data: bytes) -> None:
        """Write a frame already serialised (as the codec would have)."""
        if self._out:
            self._end_batch()
        if self.transport is None:
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
        if self._closing:
            return
        self._stop_deliveries()
        headers = [("message", message.replace("\n", " ")[:1000])]
        if receipt is None and isinstance(frame, Frame):
            receipt = frame.get("receipt")
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        body = (detail or message).encode("utf-8")
        headers.append(("content-type", "text/plain"))
        log.info("STOMP connection %s: %s", self._peer(), message)
        self._write(Frame("ERROR", tuple(headers), body))
        self._closing = True
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
                elif frame.command == "ERROR":
                    self._fail(
                        frame.get("message"),
                        detail=frame.body.decode("utf-8", "replace"),
                        receipt=frame.get("receipt-id"),
                    )
                    return
                else:
                    self._write(frame)
            if entry.close_after:
                self._stop_deliveries()
                self._closing = True
                if self.transport is not None:
                    self.transport.loseConnection()
                return
        if self._reading_paused and len(queue) < self.max_pending // 2 and not self._closing:
            self._reading_paused = False
            self.transport.resumeProducing()

    def _confirm_after(self, d, receipt: str | None, *, what: str):
        # The RECEIPT is built now; it is written only once ``d`` fires.
        entry = _Pending(None if receipt is None else self._receipt_frame(receipt))
        self._enqueue(entry)
        d.addCallbacks(self._confirmed, self._confirm_failed, callbackArgs=(entry,), errbackArgs=(entry, receipt, what))

    def _confirmed(self, _, entry: _Pending) -> None:
        entry.done = True
        if not self._closing:
            self._flush()

    def _confirm_failed(self, failure, entry: _Pending, receipt: str | None, what: str) -> None:
        entry.done = True
        exc = failure.value
        message = f"{what} failed: {exc}"
        headers = [("message", message)]
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        entry.frame = Frame("ERROR", tuple(headers), message.encode("utf-8"))
        if not self._closing:
            self._flush()

    def _receipt_frame(self, receipt: str):
        """A RECEIPT for ``receipt``: its wire bytes when nothing needs escaping
        or checking (what the codec would write), else the Frame for the codec."""
        if _plain_value(receipt):
            return b"RECEIPT\nreceipt-id:" + receipt.encode() + b"\n\n\0"
        return Frame("RECEIPT", (("receipt-id", receipt),))

    def _receipt(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self._enqueue(_Pending(self._receipt_frame(receipt), done=True))

    # -- dispatch -----------------------------------------------------------------------------
    def _dispatch(self, frame: Frame) -> None:
        command = frame.command
        if self.session is None:
            if command in ("CONNECT", "STOMP"):
                self._on_connect(frame)
                return
            raise StompError(f"{command} before CONNECT: the first frame must be CONNECT or STOMP")
        handler = self._handlers.get(command)
        if handler is None:
            raise StompError(f"Unknown STOMP command {command}")
        handler(self, frame)

    # -- CONNECT ------------------------------------------------------------------------------
    def _on_connect(self, frame: Frame) -> None:
        if self._connect_timer is not None and self._connect_timer.active():
            self._connect_timer.cancel()
        self._connect_timer = None
        accepted = frame.get("accept-version") or "1.0"
        offered = {v.strip() for v in accepted.split(",")}
        common = [v for v in SUPPORTED_VERSIONS if v in offered]
        if not common:
            self._write(
                Frame(
                    "ERROR",
                    (("version", ",".join(SUPPORTED_VERSIONS)), ("content-type", "text/plain"),
                     ("message", f"Supported protocol versions are {','.join(SUPPORTED_VERSIONS)}")),
                    f"Supported protocol versions are {','.join(SUPPORTED_VERSIONS)}\n".encode(),
                )
            )
            self._closing = True
            self.transport.loseConnection()
            return
        version = common[-1]
        if version != "1.0" and frame.command == "CONNECT" and frame.get("host") is None:
            pass  # Artemis accepts a missing host; so do we.
        login = frame.get("login")
        passcode = frame.get("passcode")
        principal = None
        if self.security is not None:
            principal = self.security.login(login, passcode, peer_subject(self.transport))
            if principal is None:
                raise StompError(
                    f"Security Error occurred: User name [{login}] or password is invalid",
                    "Authentication failed: check login and passcode",
                )
        self.version = version
        self.codec.set_version(version)
        client_id = frame.get("client-id")
        peer = self._peer()
        proxy_address, proxy_version = proxy_details(self.transport)
        info = ConnectionInfo(
            "STOMP",
            peer,
            client_id=client_id,
            acceptor=self.acceptor.name if self.acceptor else None,
            proxy_address=proxy_address,
            proxy_version=proxy_version,
        )
        self.session = ServerSession(self.server, principal, info)
        self.session_id = f"{self.server.node_id[:8]}-{info.id}"
        events = self.server.events
        if events is not None:
            self._accepted_at = events.clock()
            events.connection_accepted(
                info.id, remote=peer, acceptor=info.acceptor, protocol="STOMP", user=self.session.user, client_id=client_id
            )
        headers = [("version", version), ("session", self.session_id), ("server", f"Junction/{__version__}")]
        if client_id is not None and client_id.startswith(ROUTER_PROBE_CLIENT_ID_PREFIX):
            headers += self._probe_headers()
        if version != "1.0":
            cx, cy = _heart_beat(frame.get("heart-beat"))
            # We send every cy ms if the client wants beats; we expect the client's every cx.
            headers.append(("heart-beat", f"{cy},{cx}"))
            self._start_heartbeats(send_ms=cy, recv_ms=cx)
        self._write(Frame("CONNECTED", tuple(headers)))

    def _probe_headers(self) -> list:
        """What a gateway pool's STOMP readiness probe reads (junction/gateway/stomp_probe.py).

        Said only to a connection whose client-id has the routers' internal
        prefix, so every other client's CONNECTED is unchanged and the count
        (one pass over the sessions) is paid only by probes.  As in the AMQP
        Open properties: the node id, active, and the node's client
        connections now -- the distinct connections holding a session, every
        acceptor and protocol, this one included.
        """
        live = len({s.connection.id for s in self.server.sessions})
        return [
            ("junction-node-id", str(getattr(self.server, "node_id", None) or "junction")),
            ("junction-active", "true"),
            ("junction-connections", str(live)),
        ]

    def _connect_timed_out(self):
        self._connect_timer = None
        if self.session is None and not self._closing:
            self._fail(f"no CONNECT frame within {self.connect_timeout:g} s")

    def _start_heartbeats(self, *, send_ms: int, recv_ms: int) -> None:
        if send_ms > 0:
            self._send_interval = send_ms / 1000.0
            self._send_timer = self.reactor.callLater(self._send_interval, self._heartbeat_tick)
        if recv_ms > 0:
            self._recv_ttl = recv_ms / 1000.0 * self.ttl_modifier
            self._recv_timer = self.reactor.callLater(self._recv_ttl, self._ttl_tick)

    def _heartbeat_tick(self):
        self._send_timer = None
        if self._closing or self.transport is None:
            return
        now = self.reactor.seconds()
        if now - self._last_write >= self._send_interval * 0.9:
            self._end_batch()
            self.transport.write(self.codec.heartbeat())
            self._last_write = now
        self._send_timer = self.reactor.callLater(self._send_interval, self._heartbeat_tick)

    def _ttl_tick(self):
        self._recv_timer = None
        if self._closing:
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
                            priority = _int_header(key, value, 0, 9)
                        except StompError as exc:
                            error = exc
                elif key == "expires":
                    if error is None:
                        try:
                            expiration = _int_header(key, value, 0, None)
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
                continue
            if key not in properties:
                properties[key] = value
        address, rtype, _prefix = self._resolve_destination(
            "SEND", destination, destination_type, properties.get("subscription-type")
        )
        if error is not None:
            raise error
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
            int(self.reactor.seconds() * 1000),
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

    # -- SUBSCRIBE / UNSUBSCRIBE ---------------------------------------------------------------------
    def _on_subscribe(self, frame: Frame) -> None:
        address, rtype, prefix = self._destination(frame)
        sub_id = frame.get("id")
        if sub_id is None:
            if self.version == "1.0":
                sub_id = frame.get("destination")
            else:
                raise StompError("SUBSCRIBE needs an id header in STOMP 1.1 and 1.2")
        if sub_id in self.subscriptions:
            raise StompError(f"subscription id {sub_id} is already in use on this connection")
        ack = frame.get("ack", "auto")
        if ack not in ("auto", "client", "client-individual"):
            raise StompError(f"ack mode {ack!r} is not auto, client or client-individual")
        durable_name = (
            frame.get("durable-subscription-name")
            or frame.get("durable-subscriber-name")
            or frame.get("activemq.subscriptionName")
        )
        if durable_name and rtype is None:
            rtype = RoutingType.MULTICAST
        credit_messages = None
        credit_bytes = None
        prefetch = frame.get("activemq.prefetchSize")
        if prefetch is not None:
            n = _int_header("activemq.prefetchSize", prefetch, -1, None)
            if n > 0:
                credit_messages = n
        window = frame.get("consumer-window-size") or frame.get("consumerWindowSize")
        if window is not None:
            n = _int_header("consumer-window-size", window, -1, None)
            if n == 0:
                credit_messages = 1 if credit_messages is None else min(credit_messages, 1)
            elif n > 0:
                credit_bytes = n
        sub = _Subscription(sub_id, frame.get("destination"), ack, prefix, durable_name)
        self.subscriptions[sub_id] = sub
        try:
            sub.consumer = self.session.create_consumer(
                address,
                self._deliver_callback(sub),
                routing_type=rtype,
                selector=frame.get("selector"),
                subscription_name=durable_name,
                auto_ack=(ack == "auto"),
                credit_messages=credit_messages,
                credit_bytes=credit_bytes,
                on_batch_end=self._end_batch,
            )
        except BaseException:
            del self.subscriptions[sub_id]
            raise
        self._receipt(frame)

    def _on_unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.get("id")
        if sub_id is None and self.version == "1.0":
            sub_id = frame.get("destination")
        if sub_id is None:
            raise StompError("UNSUBSCRIBE needs an id header")
        sub = self.subscriptions.pop(sub_id, None)
        durable_name = frame.get("durable-subscription-name") or frame.get("durable-subscriber-name") or frame.get(
            "activemq.subscriptionName"
        )
        if sub is None and not durable_name:
            raise StompError(f"no subscription with id {sub_id} on this connection")
        if sub is not None:
            for mid in sub.pending:
                release(self._holders, mid, sub)
            sub.pending.clear()
            sub.consumer.close()
        if durable_name:
            self.session.unsubscribe_durable(durable_name)
        self._receipt(frame)

    def _deliver_callback(self, sub: _Subscription):
        client_ack = sub.ack != "auto"
        # What every MESSAGE of this subscription starts with, and whether it
        # carries a 1.2 ack header (see _message_frame for the layout).
        head = f"subscription:{sub.id}\nmessage-id:"
        ack_header = self.version == "1.2" and client_ack
        destination = sub.destination
        if destination is None or "#" in destination or "*" in destination:
            destination = None  # per message: the prefix and the message's address
        pending = sub.pending
        holders = self._holders
        message_bytes = self._message_bytes
        out = self._out  # written by _end_batch when the delivery pass ends

        def deliver(server_consumer, ref):
            mid = str(ref.message.message_id)
            if client_ack:
                pending[mid] = ref
                held = holders.setdefault(mid, sub)
                if held is not sub:
                    holders[mid] = joined(held, sub)
            # 1.2's ack header, as Artemis writes it: <consumer id>,<message id>
            ack = f"{server_consumer.id},{mid}" if ack_header else None
            data = message_bytes(sub, ref, mid, head, ack, destination)
            out.append(data)
            self._out_size += len(data)
            if self._out_size >= MAX_BATCH_BYTES:
                self._end_batch()

        return deliver

    def _message_bytes(self, sub: _Subscription, ref, mid: str, head: str, ack: str | None, destination) -> bytes:
        """The wire bytes of ``codec.send(self._message_frame(sub, ref, mid, ack))``, built directly.

        The header text is laid out as the codec lays out the frame's headers;
        when it passes the codec's own no-escaping test (no colon or LF but
        the separators, no backslash, CR or NUL, no empty name) the codec would
        write exactly ``MESSAGE``, that text and the body, and every header
        is carriable in any version.  Anything else takes the codec's path.
        """
        message = ref.message
        if destination is None:
            destination = sub.prefix + message.address
        count = 8
        if ack is not None:
            text = (
                f"{head}{mid}\nack:{ack}\npersistent:{'true' if message.durable else 'false'}"
                f"\npriority:{message.priority}\ntimestamp:{message.timestamp}\nexpires:{message.expiration}"
            )
            count = 9
        else:
            text = (
                f"{head}{mid}\npersistent:{'true' if message.durable else 'false'}"
                f"\npriority:{message.priority}\ntimestamp:{message.timestamp}\nexpires:{message.expiration}"
            )
        parts = [text]
        if ref.delivery_count > 1:
            parts.append("\nredelivered:true")
            count += 1
        parts.append("\ndestination:")
        parts.append(destination)
        if message.correlation_id is not None:
            parts.append("\ncorrelation-id:")
            parts.append(message.correlation_id)
            count += 1
        if message.reply_to is not None:
            parts.append("\nreply-to:")
            parts.append(message.reply_to)
            count += 1
        for key, value in message.properties.items():
            if key == "content-length":
                continue
            parts.append("\ntype:" if key == "JMSType" else "\n" + key + ":")
            parts.append(value if value.__class__ is str else _header_value(value))
            count += 1
        body = message.body
        if body:
            parts.append("\ncontent-length:")
            parts.append(str(len(body)))
        else:
            count -= 1
        text = "".join(parts)
        if (
            text.count(":") == count
            and text.count("\n") == count - 1
            and "\\" not in text
            and "\r" not in text
            and "\0" not in text
            and text[0] != ":"
            and "\n:" not in text
        ):
            return b"".join((("MESSAGE\n" + text + "\n\n").encode(), body, b"\0"))
        return self.codec.send(self._message_frame(sub, ref, mid, ack))

    def _message_frame(self, sub: _Subscription, ref, mid: str, ack: str | None = None) -> Frame:
        message = ref.message
        destination = sub.destination
        if destination is None or "#" in destination or "*" in destination:
            destination = sub.prefix + message.address
        # Headers this connection produced itself (ids it sent, numbers) are
        # always writable; the rest came from a producer and are checked.
        headers = [
            ("subscription", sub.id),
            ("message-id", mid),
        ]
        if ack is not None:
            headers.append(("ack", ack))
        headers.append(("persistent", "true" if message.durable else "false"))
        headers.append(("priority", str(message.priority)))
        headers.append(("timestamp", str(message.timestamp)))
        headers.append(("expires", str(message.expiration)))
        if ref.delivery_count > 1:
            headers.append(("redelivered", "true"))
        extra = [("destination", destination)]
        if message.correlation_id is not None:
            extra.append(("correlation-id", message.correlation_id))
        if message.reply_to is not None:
            extra.append(("reply-to", message.reply_to))
        for key, value in message.properties.items():
            if key == "JMSType":
                extra.append(("type", _header_value(value)))
            elif key != "content-length":
                extra.append((key, _header_value(value)))
        version = self.version
        for name, value in extra:
            if _carriable(name, value, version):
                headers.append((name, value))
            else:
                # A message from a newer-version (or other-protocol) producer
                # can carry headers this version cannot write: leave them out
                # rather than fail the delivery.
                log.debug("STOMP %s MESSAGE: leaving out header %r", version, name)
        return Frame("MESSAGE", tuple(headers), message.body)

    # -- ACK / NACK -----------------------------------------------------------------------------------
    def _ack_target(self, frame: Frame):
        """The refs an ACK or NACK settles (one, or a cumulative run in ``client`` mode)."""
        if self.version == "1.2":
            given = frame.get("id")
            if given is None:
                raise StompError(f"{frame.command} needs an id header (the MESSAGE's ack header) in STOMP 1.2")
        else:
            given = frame.get("message-id")
            if given is None:
                raise StompError(f"{frame.command} needs a message-id header")
        holders = self._holders
        try:
            sub, mid = find(holders, self.subscriptions, given, frame.get("subscription"))
        except AckNotFound as exc:
            raise StompError(f"{frame.command}: {exc}") from None
        pending = sub.pending
        if sub.ack != "client":
            release(holders, mid, sub)
            return [pending.pop(mid)]
        # client: every delivery of this subscription up to this one, in order
        mids = []
        for pending_mid in pending:
            mids.append(pending_mid)
            if pending_mid == mid:
                break
        for m in mids:
            release(holders, m, sub)
        return [pending.pop(m) for m in mids]

    def _on_ack(self, frame: Frame) -> None:
        refs = self._ack_target(frame)
        txid = frame.get("transaction")
        tx = self._transaction(txid) if txid is not None else None
        last = None
        for ref in refs:
            stored = self.session.acknowledge(ref, tx)
            if stored is not None:
                if last is not None:
                    last.addErrback(self._ack_failed)
                last = stored
        receipt = frame.get("receipt")
        if last is None:
            self._receipt(frame)
        elif receipt is None and last.called and not self._confirm:
            last.addErrback(self._ack_failed)  # already written; nothing to order
        else:
            # This RECEIPT, and every later one (a DISCONNECT's too), proves the
            # ack is written: a process crash cannot bring the message back.
            self._confirm_after(last, receipt, what="ACK")

    def _ack_failed(self, failure) -> None:
        """An unreceipted ACK could not be stored: tell the client, close."""
        self._fail(f"ACK failed: {failure.value}")

    def _on_nack(self, frame: Frame) -> None:
        if self.version == "1.0":
            raise StompError("NACK is not part of STOMP 1.0")
        refs = self._ack_target(frame)
        # Each cancel puts its ref back at the head of the queue: go backwards
        # so a cumulative NACK redelivers in the original order.
        for ref in reversed(refs):
            self.session.cancel(ref)
        self._receipt(frame)

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
        receipt = frame.get("receipt")
        frame_out = Frame("RECEIPT", (("receipt-id", receipt),)) if receipt is not None else None
        self._disconnecting = True
        self._stop_deliveries()
        self._enqueue(_Pending(frame_out, done=True, close_after=True))

    def _on_connect_again(self, frame: Frame) -> None:
        raise StompError("already connected: CONNECT may only be sent once")

    _handlers = {
        "SEND": _on_send,
        "SUBSCRIBE": _on_subscribe,
        "UNSUBSCRIBE": _on_unsubscribe,
        "ACK": _on_ack,
        "NACK": _on_nack,
        "BEGIN": _on_begin,
        "COMMIT": _on_commit,
        "ABORT": _on_abort,
        "DISCONNECT": _on_disconnect,
        "CONNECT": _on_connect_again,
        "STOMP": _on_connect_again,
    }


class StompFactory(AcceptorFactory):
    """Builds a :class:`StompProtocol` per connection on one acceptor."""

    protocol_class = StompProtocol


#: Acceptor URL parameters the STOMP acceptor acts on; node.py warns about the rest.
STOMP_ACCEPTOR_PARAMS = frozenset(
    {
        "protocols",
        "protocol",
        "anycastPrefix",
        "multicastPrefix",
        "stompMaxFramePayloadLength",
        "heartBeatToConnectionTtlModifier",
        "connectionsAllowed",
        "tcpNoDelay",
        "tcpSendBufferSize",
        "tcpReceiveBufferSize",
        "sslEnabled",
        "useEpoll",  # Twisted's default reactor on Linux is epoll already
    }
)


def _heart_beat(value: str | None) -> tuple[int, int]:
    if not value:
        return 0, 0
    try:
        cx, cy = (int(part.strip()) for part in value.split(","))
    except ValueError:
        raise StompError(f"heart-beat header must be two integers 'cx,cy', not {value!r}") from None
    if cx < 0 or cy < 0:
        raise StompError(f"heart-beat values must not be negative: {value!r}")
    return cx, cy


def _int_header(name: str, value: str, low: int | None, high: int | None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise StompError(f"header {name} must be an integer, not {value!r}") from None
    if (low is not None and n < low) or (high is not None and n > high):
        raise StompError(f"header {name} value {n} is out of range")
    return n


def _plain_value(value: str) -> bool:
    """A header value the codec writes as it is in every version (no escape, no check)."""
    return not (":" in value or "\n" in value or "\r" in value or "\\" in value or "\0" in value)


def _carriable(name: str, value: str, version: str | None) -> bool:
    """Whether STOMP ``version`` can write this header (the codec's rules)."""
    if not name or "\0" in name or "\0" in value:
        return False
    if version == "1.2":
        return True
    if version == "1.1":
        return not value.endswith("\r")  # 1.1 escapes LF and colon, not CR
    return not (":" in name or "\n" in name or "\n" in value or value.endswith("\r"))


def _header_value(value) -> str:
    value = plain(value) if isinstance(value, Typed) else value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
