"""The OpenWire server: ActiveMQ Classic clients on a broker node, as Artemis serves them.

:class:`OpenWireProtocol` is a thin Twisted protocol: ``dataReceived`` feeds
:class:`~junction.protocols.openwire.codec.OpenWireCodec`, and each command
goes where the connection's state table
(:class:`~junction.protocols.openwire.connection.OpenWireConnection`) says:

* the negotiation starts the inactivity monitor (on the reactor's clock) and
  writes a BrokerInfo, Artemis's greeting;
* the ConnectionInfo is authenticated with the node's security (a refusal is
  a ``java.lang.SecurityException`` with Artemis's AMQ229031 text, then the
  connection closes); its client id must not be in use on the node
  (``javax.jms.InvalidClientIDException``) unless the client reconnects
  after a failover (``failoverReconnect``), which takes the id over;
* sends (here) and transactions: a message the client waits for (a
  persistent send outside a transaction) is answered only once the journal
  has it; a producer with a window (``ProducerInfo.windowSize`` > 0) gets a
  ProducerAck for every message it did not wait for, once it is safe;
* consumers, dispatches, acks and pulls: :mod:`.openwire_consumers`;
* XA transactions (a TransactionInfo naming an XATransactionId, RECOVER): :mod:`.openwire_xa`;
* messages to and from the model: :mod:`.openwire_convert`.

What the table refuses is answered with its ``error_reply`` (an
ExceptionResponse to a command that asked for an answer, else a
ConnectionError) and closes the connection when the error is fatal.  What
the broker refuses (security, a missing queue) is answered the same way and
the connection stays.
"""

from __future__ import annotations

import logging
import weakref
import zlib
from dataclasses import replace

from twisted.internet.protocol import Protocol

from junction.brokercore.openwire_consumers import OpenWireConsumers
from junction.brokercore.openwire_convert import to_model
from junction.brokercore.openwire_xa import OpenWireXa, is_xa
from junction.brokercore.session import ConnectionInfo as SessionConnection
from junction.brokercore.session import ServerSession
from junction.edge.acceptor import AcceptorFactory, apply_socket_options, prefixes
from junction.edge.eager import EagerWriter
from junction.edge.tls import peer_subject
from junction.events.node import close_reason
from junction.model import errors
from junction.model.message import DUPLICATE_ID
from junction.protocols.openwire.codec import OpenWireCodec, OpenWireLimits
from junction.protocols.openwire.commands import (
    BrokerInfo,
    ConnectionInfo,
    ConsumerControl,
    ConsumerInfo,
    DestinationInfo,
    DestinationOperation,
    ExceptionResponse,
    KeepAliveInfo,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from junction.protocols.openwire.commands import ConnectionError as OwConnectionError
from junction.protocols.openwire.connection import Action, OpenWireConnection
from junction.protocols.openwire.errors import OpenWireProtocolError
from junction.protocols.openwire.inactivity import (
    InactivityMonitor,
    InactivityTimeout,
    SendKeepAlive,
)
from junction.protocols.openwire.marshal import Command, JavaThrowable
from junction.protocols.openwire.messages import Message as OwMessage
from junction.protocols.openwire.messages import MessageAck, MessagePull, ProducerAck
from junction.protocols.openwire.structures import BrokerId, ConsumerId, ProducerId, SessionId
from junction.protocols.openwire.wireformat import NODE_WIRE_FORMAT

log = logging.getLogger("junction.openwire")

__all__ = ["OpenWireFactory", "OpenWireProtocol"]

#: How long a connection may take to send its WireFormatInfo and ConnectionInfo, in
#: seconds, when the limits name none (the client's own negotiate timeout is 10 s).
DEFAULT_CONNECT_TIMEOUT = 10.0

#: Local transactions one connection may have open at once (a client has one per
#: transacted session); a BEGIN beyond it is refused.
MAX_OPEN_TRANSACTIONS = 1024

#: The least a message counts in a producer window (Classic's ``DEFAULT_MINIMUM_MESSAGE_SIZE``).
MINIMUM_MESSAGE_SIZE = 1024

TX_BEGIN = TransactionType.BEGIN
TX_COMMIT_ONE_PHASE = TransactionType.COMMIT_ONE_PHASE
TX_COMMIT_TWO_PHASE = TransactionType.COMMIT_TWO_PHASE
TX_ROLLBACK = TransactionType.ROLLBACK

_SECURITY = "java.lang.SecurityException"
_JMS_SECURITY = "javax.jms.JMSSecurityException"
_INVALID_CLIENT_ID = "javax.jms.InvalidClientIDException"
_INVALID_DESTINATION = "javax.jms.InvalidDestinationException"
_JMS = "javax.jms.JMSException"
_TX_IN_PROGRESS = "javax.jms.TransactionInProgressException"

#: The client ids in use on each node's OpenWire connections (id -> protocol).
_CLIENT_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _security_errors() -> tuple:
    from junction.brokercore.security import SecurityError

    return (SecurityError,)


def java_class_of(exc: Exception) -> str:
    """The JMS exception class the client rebuilds for a broker error."""
    if isinstance(exc, _security_errors()):
        return _JMS_SECURITY
    if isinstance(exc, (errors.NonExistentQueueError, errors.NonExistentAddressError)):
        return _INVALID_DESTINATION
    return _JMS


def message_id_text(message_id) -> str:
    """A MessageId as the client writes it (``producerId:sequence``)."""
    if message_id.text_view:
        return message_id.text_view
    p = message_id.producer_id
    producer = f"{p.connection_id}:{p.session_id}:{p.value}" if p is not None else "null"
    return f"{producer}:{message_id.producer_sequence_id}"


def message_size(message) -> int:
    """What the client counts a message as in its producer window (``Message.getSize``)."""
    return (MINIMUM_MESSAGE_SIZE + len(message.content or b"")
            + len(message.marshalled_properties or b""))


class OpenWireProtocol(OpenWireConsumers, Protocol):
    """One OpenWire connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
        self._batch = server.batch_writes()
        self.reactor = reactor if reactor is not None else server.reactor
        self.security = security if security is not None else server.security
        self.acceptor = acceptor
        max_frame = getattr(limits, "max_frame_size", None)
        ow_limits = OpenWireLimits(max_frame_size=min(int(max_frame), 0x7FFFFFFF)) if max_frame else OpenWireLimits()
        offer = replace(NODE_WIRE_FORMAT, max_frame_size=ow_limits.max_frame_size)
        self.codec = OpenWireCodec(offer, ow_limits)
        self.connection = OpenWireConnection()
        #: the acceptor's ``anycastPrefix``/``multicastPrefix``: a destination name starting
        #: with one is that routing type's address without it, whatever its JMS type
        self.anycast_prefixes = prefixes(acceptor.anycast_prefix if acceptor else None)
        self.multicast_prefixes = prefixes(acceptor.multicast_prefix if acceptor else None)
        self.connect_timeout = (limits.connect_timeout / 1000.0) if limits is not None else DEFAULT_CONNECT_TIMEOUT
        self.session: ServerSession | None = None
        self.info: SessionConnection | None = None
        self.client_id: str | None = None
        #: open local transactions: the client's LocalTransactionId -> (Transaction, acks held)
        self.transactions: dict = {}
        #: the connection's XA calls (:mod:`.openwire_xa`), from its first
        self.xa: OpenWireXa | None = None
        self.monitor: InactivityMonitor | None = None
        self._timer = None
        self._connect_timer = None
        self._accepted_at = None
        self._closing = False
        #: the transport's writer: frames of a quiet connection leave at once (set on connect)
        self._writer = None
        OpenWireConsumers.__init__(self)

    # -- Twisted ---------------------------------------------------------------------------
    @property
    def peer(self) -> str:
        try:
            peer = self.transport.getPeer()
            return f"{peer.host}:{peer.port}"
        except Exception:  # noqa: BLE001 - transports without a peer
            return "?"

    def connectionMade(self):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)
        apply_socket_options(self.transport, self.acceptor)
        self._writer = EagerWriter(self.transport)
        self._connect_timer = self.reactor.callLater(self.connect_timeout, self._connect_timed_out)
        self.transport.write(self.codec.initiate())

    def dataReceived(self, data: bytes):
        if self._closing:
            return
        if self.monitor is not None:
            self.monitor.received(self.reactor.seconds())
        malformed = None
        try:
            events = self.codec.receive_data(data)
        except OpenWireProtocolError as exc:
            events = getattr(exc, "events", None) or []
            malformed = exc
        with self._batch:
            for event in events:
                if self._closing:
                    return
                self._receive(event)
        if malformed is not None and not self._closing:
            self._fatal(malformed)

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        self._closing = True
        self.connection.close()
        for timer in (self._timer, self._connect_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._timer = self._connect_timer = None
        self._end_session(reason)

    def peers(self) -> list:
        """The node's OpenWire connections that are open (this one included)."""
        return list(_CLIENT_IDS.get(self.server, {}).values())

    def _end_session(self, reason=None) -> None:
        for tx, _acks in self.transactions.values():
            self.session.rollback(tx)
        self.transactions.clear()
        if self.xa is not None:
            self.xa.close()
        self.close_consumers()
        ids = _CLIENT_IDS.get(self.server)
        if ids is not None and self.client_id is not None and ids.get(self.client_id) is self:
            del ids[self.client_id]
        if self.session is not None:
            events = self.server.events
            if events is not None and self._accepted_at is not None:
                events.connection_closed(self.info.id, started=self._accepted_at, reason=close_reason(reason))
            self.session.close()
            self.session = None

    # -- writing -------------------------------------------------------------------------------
    def write(self, command, *, eager: bool = False) -> None:
        """Send ``command``; ``eager``: a reply the client waits for, sent at once
        while the connection is quiet (:mod:`junction.edge.eager`)."""
        if self.transport is None or self._closing:
            return
        writer = self._writer
        if writer is None or not eager:
            self.transport.write(self.codec.send(command))
        else:
            writer.write(self.codec.send(command))
        if self.monitor is not None:
            self.monitor.sent(self.reactor.seconds())

    def respond(self, command) -> None:
        """The plain Response ``command`` asked for, if it asked."""
        answer = self.connection.response(command)
        if answer is not None:
            self.write(answer, eager=True)

    def refuse(self, command, java_class: str, message: str) -> None:
        """Answer ``command`` with an exception; the connection stays."""
        exception = JavaThrowable(java_class, message)
        if isinstance(command, Command) and command.response_required:
            self.write(ExceptionResponse(correlation_id=command.command_id, exception=exception))
        else:
            self.write(OwConnectionError(exception=exception, connection_id=self.connection.connection_id))

    def _fatal(self, error: OpenWireProtocolError) -> None:
        log.info("OpenWire %s: %s", self.peer, error)
        step = self.connection.error(error)
        self.write(step.command)
        self._close()

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.loseConnection()
        self._closing = True

    # -- the table -------------------------------------------------------------------------------
    def _receive(self, command) -> None:
        try:
            step = self.connection.receive(command)
        except OpenWireProtocolError as exc:
            if exc.fatal:
                self._fatal(exc)
            else:
                self.write(self.connection.error_reply(exc))
            return
        action = step.action
        if action is Action.HANDLE:
            try:
                self._handle(command)
            except errors.BrokerError as exc:
                self.refuse(command, java_class_of(exc), str(exc))
            except _security_errors() as exc:
                self.refuse(command, _JMS_SECURITY, str(exc))
            except (ValueError, OpenWireProtocolError, zlib.error) as exc:  # a body or property that does not read
                self.refuse(command, _JMS, str(exc))
        elif action is Action.ACKNOWLEDGE:
            self.respond(command)
        elif action is Action.ECHO:
            self.write(self.connection.keep_alive_echo())
        elif action is Action.NEGOTIATED:
            self._negotiated()
        elif action is Action.OPEN:
            self._open(command)
        elif action is Action.CLOSE:
            self._close()

    def _handle(self, command) -> None:
        handler = self._handlers.get(type(command))
        if handler is None:  # a message: every message class is one
            handler = OpenWireProtocol._on_message
        handler(self, command)

    # -- negotiation, keep-alives ------------------------------------------------------------------
    def _negotiated(self) -> None:
        fmt = self.connection.wire_format
        now = self.reactor.seconds()
        self.monitor = InactivityMonitor(fmt.max_inactivity, fmt.max_inactivity_initial_delay, now)
        node = str(getattr(self.server, "node_id", None) or "junction")
        self.write(BrokerInfo(broker_id=BrokerId(f"ID:{node}"), broker_name=node, broker_url=None))
        self._schedule()

    def _schedule(self) -> None:
        deadline = self.monitor.next_deadline() if self.monitor is not None else None
        if deadline is None or self._closing:
            return
        delay = max(0.0, deadline - self.reactor.seconds())
        self._timer = self.reactor.callLater(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._closing:
            return
        for due in self.monitor.poll(self.reactor.seconds()):
            if isinstance(due, InactivityTimeout):
                log.info("OpenWire %s: %s", self.peer, due.message())
                self._close()
                return
            if isinstance(due, SendKeepAlive):
                self.write(KeepAliveInfo(response_required=False))
        self._schedule()

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if self.session is None and not self._closing:
            log.info("OpenWire %s: no ConnectionInfo within %.1f s, closing", self.peer, self.connect_timeout)
            self._close()

    # -- ConnectionInfo ------------------------------------------------------------------------
    def _open(self, info: ConnectionInfo) -> None:
        principal = None
        if self.security is not None:
            principal = self.security.login(info.user_name, info.password, peer_subject(self.transport))
            if principal is None:
                subject = peer_subject(self.transport) or "unavailable"
                text = (f"AMQ229031: Unable to validate user from {self.peer}. "
                        f"Username: {info.user_name}; SSL certificate subject DN: {subject}")
                return self._refuse_open(info, _SECURITY, text)
        client_id = info.client_id
        if not client_id:
            return self._refuse_open(info, _INVALID_CLIENT_ID, "No clientID specified for connection request")
        ids = _CLIENT_IDS.setdefault(self.server, {})
        holder = ids.get(client_id)
        if holder is not None and holder is not self:
            if not info.failover_reconnect:
                return self._refuse_open(info, _INVALID_CLIENT_ID,
                                         f"AMQ229004: Client ID {client_id} is already in use")
            holder._close()
            holder._end_session()
        ids[client_id] = self
        self.client_id = client_id
        if self._connect_timer is not None and self._connect_timer.active():
            self._connect_timer.cancel()
        self._connect_timer = None
        self.info, self._accepted_at = SessionConnection.accepted(
            self.server, "OPENWIRE", self.transport, self.peer, acceptor=self.acceptor,
            client_id=client_id, user=getattr(principal, "user", None),
        )
        self.session = ServerSession(self.server, principal, self.info)
        self.respond(info)

    def _fault_tolerant(self) -> bool:
        """The client connected through ``failover:`` (it may replay what it sent)."""
        info = self.connection.connection_info
        return self.connection.fault_tolerant or bool(info is not None and info.fault_tolerant)

    def _refuse_open(self, info: ConnectionInfo, java_class: str, text: str) -> None:
        log.info("OpenWire %s: %s", self.peer, text)
        self.write(self.connection.refuse(info, java_class, text))
        self._close()

    # -- sessions, producers, removal ------------------------------------------------------------
    def _on_session(self, info: SessionInfo) -> None:
        self.respond(info)

    def _on_producer(self, info: ProducerInfo) -> None:
        destination = info.destination
        if destination is not None and not destination.is_topic and not destination.is_temporary:
            name = destination.physical_name or ""
            if name not in self.server.addresses:
                settings = self.server.settings.resolve(name)
                if not settings.auto_create_addresses:
                    self.connection.discard(info.producer_id)
                    raise errors.NonExistentAddressError(f"Destination {name} does not exist")
        self.respond(info)

    def _on_remove(self, info: RemoveInfo) -> None:
        object_id = info.object_id
        if isinstance(object_id, ConsumerId):
            self.remove_consumer(object_id)
        elif isinstance(object_id, SessionId):
            self.remove_session_consumers(object_id)
        elif isinstance(object_id, ProducerId):
            pass
        else:  # the connection: its consumers and transactions go, the client may open it again
            for tx, _acks in self.transactions.values():
                self.session.rollback(tx)
            self.transactions.clear()
            self.close_consumers()
        self.respond(info)

    # -- sends ---------------------------------------------------------------------------------------
    def _on_message(self, message: OwMessage) -> None:
        producer = self.connection.producers.get(message.producer_id)
        model = to_model(message, producer.destination if producer is not None else None)
        model.address, model.routing_type = self.address_of(model.address, model.routing_type)
        model.properties.setdefault("__AMQ_CID", self.client_id)
        if self._fault_tolerant() and message.message_id is not None:
            # a send the failover transport replays after a reconnect is a duplicate (Artemis's
            # openwireUseDuplicateDetectionOnFailover, on by default)
            model.properties.setdefault(DUPLICATE_ID, message_id_text(message.message_id))
        if message.destination is None and (producer is None or producer.destination is None):
            raise errors.BrokerError("a message without a destination from a producer without one")
        window = producer.window_size if producer is not None else 0
        if message.transaction_id is not None:
            tx = self._transaction(message.transaction_id)[0]
            self.session.send(model, routing_type=model.routing_type, tx=tx)
            self._produced(message, window)
            self.respond(message)
            return
        d = self.session.submit(model, model.routing_type)
        if d is None:
            self._produced(message, window)
            self.respond(message)
            return
        d.addCallbacks(self._sent, self._send_failed, callbackArgs=(message, window), errbackArgs=(message,))

    def _sent(self, _, message, window) -> None:
        self._produced(message, window)
        self.respond(message)

    def _send_failed(self, failure, message) -> None:
        exc = failure.value
        self.refuse(message, java_class_of(exc) if isinstance(exc, Exception) else _JMS, f"send failed: {exc}")

    def _produced(self, message, window: int) -> None:
        """A producer with a window is told of every message it did not wait for."""
        if window > 0 and not message.response_required:
            self.write(ProducerAck(producer_id=message.producer_id, size=message_size(message)))

    # -- transactions ---------------------------------------------------------------------------------
    def _transaction(self, txid):
        if is_xa(txid):
            return self._xa().entry(txid)
        entry = self.transactions.get(txid)
        if entry is None:
            raise errors.TransactionError(f"Transaction '{txid}' has not been started.")
        return entry

    def _xa(self) -> OpenWireXa:
        if self.xa is None:
            self.xa = OpenWireXa(self)
        return self.xa

    def _on_transaction(self, info: TransactionInfo) -> None:
        txid = info.transaction_id
        kind = info.type
        if is_xa(txid) or kind == TransactionType.RECOVER:
            return self._xa().handle(info)
        if kind == TX_BEGIN:
            if txid in self.transactions:
                raise errors.TransactionError(f"Transaction '{txid}' has already been started.")
            if len(self.transactions) >= MAX_OPEN_TRANSACTIONS:
                raise errors.TransactionError(
                    f"a connection may have at most {MAX_OPEN_TRANSACTIONS} local transactions open")
            self.transactions[txid] = (self.session.begin(), [])
            self.respond(info)
        elif kind in (TX_COMMIT_ONE_PHASE, TX_COMMIT_TWO_PHASE):
            tx, acks = self._transaction(txid)
            del self.transactions[txid]
            for consumer, ref in acks:
                if self.ack_in_transaction(consumer, ref):
                    self.session.acknowledge(ref, tx)
            d = self.session.commit(tx)
            d.addCallbacks(lambda _: self.respond(info), self._commit_failed, errbackArgs=(info,))
        elif kind == TX_ROLLBACK:
            tx, acks = self.transactions.pop(txid, (None, []))
            if tx is not None:
                self.session.rollback(tx)
                self.rolled_back(acks)
            self.respond(info)
        else:
            raise errors.TransactionError(f"TransactionInfo type {kind} is not served for a local transaction")

    def _commit_failed(self, failure, info) -> None:
        self.refuse(info, "javax.jms.TransactionRolledBackException", f"commit failed: {failure.value}")

    # -- temporary destinations, subscriptions ---------------------------------------------------------
    def _on_destination(self, info: DestinationInfo) -> None:
        destination = info.destination
        name = destination.physical_name if destination is not None else None
        if not name:
            raise errors.BrokerError("DestinationInfo names no destination")
        if info.operation_type == DestinationOperation.ADD:
            self.add_temporary(destination)
        else:
            self.remove_temporary(destination)
        self.respond(info)

    def _on_remove_subscription(self, info: RemoveSubscriptionInfo) -> None:
        self.remove_subscription(info.client_id or self.client_id, info.subscription_name or "")
        self.respond(info)

    _handlers = {
        SessionInfo: _on_session,
        ProducerInfo: _on_producer,
        ConsumerInfo: OpenWireConsumers.on_consumer,
        MessageAck: OpenWireConsumers.on_ack,
        MessagePull: OpenWireConsumers.on_pull,
        ConsumerControl: OpenWireConsumers.on_consumer_control,
        TransactionInfo: _on_transaction,
        DestinationInfo: _on_destination,
        RemoveSubscriptionInfo: _on_remove_subscription,
        RemoveInfo: _on_remove,
    }


class OpenWireFactory(AcceptorFactory):
    """Builds an :class:`OpenWireProtocol` per connection on one acceptor."""

    protocol_class = OpenWireProtocol
