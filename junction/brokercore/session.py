"""Server sessions: what a protocol connection may do with the broker core.

A protocol adapter (STOMP, AMQP and CORE today; OpenWire later)
authenticates a connection, opens one :class:`ServerSession` for it and then
only calls this API: send, create consumers, acknowledge or cancel
deliveries, run local transactions, create temporary queues, query addresses
and queues, close.  Every operation is authorised here against
``security-settings``, so no protocol can forget a check.  Artemis's
``ServerSessionImpl`` is the model.  A send goes to the node's post office
(:class:`junction.brokercore.postoffice.PostOffice`) in one call.

Besides its sessions, an adapter uses only the server's connection-level
surface: ``reactor`` (the node's clock) and ``security`` (to authenticate),
``node_id``, ``events`` (connection events), :meth:`BrokerServer.connection_ids`
and :meth:`BrokerServer.connection_count` (the node's client connections), and
:meth:`BrokerServer.batch_writes`, which it holds around the handling of
every read so the journal writes a read's records as one batch.
"""

from __future__ import annotations

import itertools
import logging
import uuid

from twisted.internet import defer

from junction.brokercore.queue import Consumer, MessageRef, QueueDefinition
from junction.brokercore.session_queues import AddressQuery, BindingQuery, QueueQuery, SessionQueues
from junction.brokercore.storage import quiet_failure
from junction.edge.acceptor import proxy_details
from junction.model import errors
from junction.model.filter import FilterError, parse_filter
from junction.model.message import Message, RoutingType

log = logging.getLogger("junction.session")

__all__ = [
    "WRITING",
    "AddressQuery",
    "BindingQuery",
    "ConnectionInfo",
    "QueueQuery",
    "ServerConsumer",
    "ServerSession",
    "Transaction",
]


class ConnectionInfo:
    """Who is on the other end of a session (for logs, keys and management)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        protocol: str,
        remote: str,
        *,
        client_id: str | None = None,
        acceptor: str | None = None,
        proxy_address: str | None = None,
        proxy_version: str | None = None,
    ):
        self.id = next(self._ids)
        self.protocol = protocol
        #: the client's ``host:port``: behind a PROXY header, the address the header names
        self.remote = remote
        self.client_id = client_id
        self.acceptor = acceptor
        #: for a connection that came through the PROXY protocol (Artemis's
        #: ``proxyAddress``/``proxyVersion``): the proxy's ``host:port`` as this
        #: core sees it, and ``"V1"``/``"V2"``; None otherwise
        self.proxy_address = proxy_address
        self.proxy_version = proxy_version

    @classmethod
    def accepted(cls, server, protocol: str, transport, remote: str, *, acceptor=None, client_id=None, user=None):
        """A connection an adapter has just taken on (logged in): its info, with the PROXY
        details of ``transport``, and the event log told of it.

        Returns ``(info, accepted_at)``: the event log's time of the acceptance, which the
        adapter gives ``connection_closed`` at the end (None without an event log).
        """
        proxy_address, proxy_version = proxy_details(transport)
        info = cls(
            protocol,
            remote,
            client_id=client_id,
            acceptor=acceptor.name if acceptor else None,
            proxy_address=proxy_address,
            proxy_version=proxy_version,
        )
        events = server.events
        if events is None:
            return info, None
        accepted_at = events.clock()
        events.connection_accepted(
            info.id, remote=remote, acceptor=info.acceptor, protocol=protocol, user=user, client_id=client_id
        )
        return info, accepted_at


#: What a delivery callback returns when it has not written the whole delivery yet (a large
#: body streamed from its file): an auto-ack consumer then acknowledges it at
#: :meth:`ServerConsumer.written`, not when the callback returns.
WRITING = object()


def _call_then_pass(value, fn):
    fn()
    return value


class ServerConsumer:
    """A protocol-level subscription: a :class:`Consumer` on a queue plus session bookkeeping.

    ``on_delivery(server_consumer, ref)`` is the protocol's callback.  With
    ``auto_ack`` the delivery is acknowledged as soon as the callback returns
    (STOMP ``ack:auto``), and credit comes straight back, so a window never
    stalls an auto-ack consumer.  Otherwise the session remembers which
    consumer holds the ref, so that settling it returns this consumer's credit.
    ``on_batch_end()``, if given, is called after each delivery pass that
    delivered to this consumer (a protocol may buffer a pass's frames).
    """

    def __init__(self, session, queue, on_delivery, *, filter=None, auto_ack=False, credit_messages=None, credit_bytes=None, owns_queue=False, on_batch_end=None, ack_returns_credit=True, priority=0, exclusive=False):
        self.session = session
        self.queue = queue
        self.on_delivery = on_delivery
        self.auto_ack = auto_ack
        self.owns_queue = owns_queue
        #: settling a delivery gives its credit back (STOMP windows); an AMQP
        #: link's credit comes only from the client's flow frames
        self.ack_returns_credit = ack_returns_credit
        self.consumer = Consumer(
            queue,
            self._deliver,
            filter=filter,
            credit_messages=credit_messages,
            credit_bytes=credit_bytes,
            priority=priority,
            exclusive=exclusive,
        )
        self.consumer.end_batch = on_batch_end
        self.closed = False
        #: what this consumer's message events share (junction.brokercore.events), made on first use
        self.event_context = None

    @property
    def id(self) -> int:
        return self.consumer.id

    def _deliver(self, ref: MessageRef) -> None:
        session = self.session
        events = session.server.message_events
        if not self.auto_ack:
            if events is not None:
                events.delivered(ref, self, session)
            session._consumer_of[id(ref)] = self
            self.on_delivery(self, ref)
            return
        if self.on_delivery(self, ref) is WRITING:
            return  # acknowledged once written (see written)
        self._auto_acknowledge(ref)

    def written(self, ref: MessageRef) -> None:
        """The delivery of ``ref`` the callback answered :data:`WRITING` for is all written:
        an auto-ack consumer acknowledges it now (so a connection lost half way through a
        large body gives the message back rather than lose it)."""
        if self.auto_ack:
            self._auto_acknowledge(ref)

    def _auto_acknowledge(self, ref: MessageRef) -> None:
        session = self.session
        events = session.server.message_events
        if not self.closed:
            stored = self.queue.acknowledge(ref)
            if stored is not None:
                quiet_failure(stored)
            if events is not None:
                events.delivered_and_acknowledged(ref, self, session)
            if self.ack_returns_credit:
                self.consumer.add_credit(1, ref.size)
        elif events is not None:  # closed while delivering: delivered, never acknowledged
            events.delivered(ref, self, session)

    def in_flight(self):
        return list(self.consumer.in_flight.values())

    def add_credit(self, messages: int = 0, size: int = 0) -> None:
        self.consumer.add_credit(messages, size)

    def set_credit(self, messages: int | None) -> int | None:
        """Set the message credit outright (an AMQP link's credit); returns what it was."""
        consumer = self.consumer
        was = consumer.credit_messages
        consumer.credit_messages = messages
        return was

    def set_byte_credit(self, size: int | None) -> None:
        """Set the byte credit outright (None: unlimited, as CORE's credits -1); deliveries
        resume if it allows them."""
        consumer = self.consumer
        consumer.credit_bytes = size
        if consumer.has_credit():
            self.queue.deliver_soon()

    def recharge(self, ref, size: int) -> None:
        """The delivery of ``ref`` costs ``size`` bytes of credit rather than ``ref.size``.

        For a protocol whose window counts its own bytes on the wire (CORE
        takes each SESS_RECEIVE_MSG's size from the consumer's credits): its
        delivery callback says so once it has encoded the delivery.  The
        credit may go negative; deliveries stop until it is positive again.
        """
        consumer = self.consumer
        if consumer.credit_bytes is not None:
            consumer.credit_bytes += ref.size - size

    def deliver_now(self) -> None:
        """Run a delivery pass of the queue now, not at the end of this reactor turn (AMQP drain)."""
        self.queue.deliver_now()

    def avoid(self, ref) -> None:
        """Never hand ``ref`` to this consumer again (AMQP modified, undeliverable-here)."""
        self.queue.avoid(ref, self.consumer)

    def settled(self, ref) -> None:
        """``ref`` was settled: its credit comes back if this consumer works that way."""
        if self.ack_returns_credit:
            self.consumer.add_credit(1, ref.size)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.queue.remove_consumer(self.consumer)
        self.session.consumers.discard(self)
        if self.owns_queue and not self.queue.consumers:
            self.session.server.destroy_queue(self.queue.name)


class Transaction:
    """A local transaction: sends and acks that take effect together on commit."""

    def __init__(self, session):
        self.session = session
        self.sends: list = []
        self.acks: list = []
        self.done = False
        #: ``hook(storage_tx)`` each, in the commit's journal transaction (a prepared XA
        #: branch deletes its record there: commit and delete are one)
        self.in_commit: list = []

    def commit(self) -> defer.Deferred:
        """Route the sends and apply the acks in one journal transaction."""
        if self.done:
            return defer.fail(errors.TransactionError("transaction already finished"))
        self.done = True
        server = self.session.server
        storage_tx = server.storage.transaction()
        try:
            server.post_office.route_transaction(self.sends, self.session, storage_tx)
            credits = []
            acked = []
            for ref in self.acks:
                owner = self.session._consumer_of.pop(id(ref), None)
                if ref.queue.deleted or ref.consumer is None:
                    continue  # given back meanwhile (consumer closed): nothing to ack
                ref.queue.acknowledge(ref, storage_tx)
                acked.append((owner, ref))
                if owner is not None:
                    credits.append((owner, ref))
            for hook in self.in_commit:
                hook(storage_tx)
        except errors.BrokerError as exc:
            storage_tx.rollback()
            # A failed commit is a rollback: the acked deliveries come back.
            self.done = False
            self.sends.clear()
            self.rollback()
            return defer.fail(exc)
        for owner, ref in credits:
            owner.settled(ref)
        events = server.message_events
        if events is not None and acked:
            session = self.session

            def tell_acked():
                for owner, ref in acked:
                    events.acknowledged(ref, owner, session)

            storage_tx.after_commit.append(tell_acked)
        return storage_tx.commit(server.config.journal_sync_transactional)

    def rollback(self) -> None:
        """Forget the sends; give the acked deliveries back for redelivery."""
        if self.done:
            return
        self.done = True
        # Each cancel puts its ref back at the head of the queue: go backwards
        # so the refs are redelivered in the order they were first delivered.
        for ref in reversed(self.acks):
            if ref.consumer is not None:
                self.session.cancel(ref)
        self.sends.clear()
        self.acks.clear()


class ServerSession(SessionQueues):
    """One connection's view of the broker core (its addresses and queues: :class:`SessionQueues`)."""

    def __init__(self, server, principal, connection: ConnectionInfo):
        self.server = server
        self.principal = principal
        self.connection = connection
        self.consumers: set[ServerConsumer] = set()
        self.temporary_queues: set[str] = set()
        self.transactions: set[Transaction] = set()
        self._consumer_of: dict[int, ServerConsumer] = {}
        self._post_office = server.post_office
        self._send_chain: defer.Deferred | None = None
        #: addresses this session may send to, valid while the security
        #: manager's decisions are (its ``generation``); principals never change
        self._send_granted: set[str] = set()
        self._send_granted_generation = None
        #: deliveries stopped by transport backpressure (see set_paused)
        self.paused = False
        self.closed = False
        #: what this session's message events share (junction.brokercore.events), made on first use
        self.event_context = None
        server.sessions.add(self)

    # -- security -------------------------------------------------------------------
    def check(self, permission: str, address: str, queue: str | None = None) -> None:
        security = self.server.security
        if security is not None:
            security.check(self.principal, permission, address, queue)

    @property
    def user(self) -> str | None:
        return getattr(self.principal, "user", None)

    # -- sending -----------------------------------------------------------------------
    def send(self, message: Message, *, routing_type: RoutingType | None = None, tx: Transaction | None = None) -> defer.Deferred:
        """Send a message; the Deferred fires when it is safe (synced if durable).

        Authorisation and routing errors raise synchronously (a
        :class:`junction.model.errors.BrokerError` or
        ``SecurityError``); storage failures arrive as an errback.
        """
        if tx is not None:
            self._authorise_send(message)
            tx.sends.append((message, routing_type))
            return defer.succeed(None)
        d = self.submit(message, routing_type)
        return defer.succeed(None) if d is None else d

    def _authorise_send(self, message: Message) -> None:
        address_name = message.address
        if "::" in address_name:
            address_name = address_name.split("::", 1)[0]
        security = self.server.security
        if security is not None:
            generation = getattr(security, "generation", None)
            if generation is None or not security.enabled:
                security.check(self.principal, "send", address_name)
            else:
                if generation != self._send_granted_generation:
                    self._send_granted.clear()
                    self._send_granted_generation = generation
                if address_name not in self._send_granted:
                    security.check(self.principal, "send", address_name)
                    self._send_granted.add(address_name)
            if address_name not in self.server.addresses:
                security.check(self.principal, "createAddress", address_name)
        if not message.user_id:
            message.user_id = self.user

    def submit(self, message: Message, routing_type: RoutingType | None = None, *, heading: bool = False) -> defer.Deferred | None:
        """:meth:`send` outside a transaction, for protocol adapters on the hot path.

        Returns None when the message is already safe (nothing was stored, or
        it was not durable): no Deferred to create, fire and wait on.
        Otherwise the Deferred :meth:`send` returns.  ``heading``: this send is
        the one the chain of later sends waits on (:meth:`hold_later_sends`),
        run from its own Deferred: it goes now.
        """
        self._authorise_send(message)
        if self._send_chain is not None and not heading:
            # An earlier send waits for space on a BLOCKed address: keep order.
            d = self._send_chain
            result = defer.Deferred()

            def go(_):
                inner = defer.maybeDeferred(self._post_office.send, message, routing_type, self)
                inner.chainDeferred(result)
                return None

            d.addBoth(go)
            self._send_chain = result
            self._clear_chain_when_done(result)
            return result
        return self._post_office.send(message, routing_type, self)

    def hold_later_sends(self, d: defer.Deferred) -> None:
        """The post office holds a send on a BLOCKed address until ``d`` fires: later sends wait.
        (So does a protocol adapter whose send waits for something first, e.g. a large
        message's file to be synced; it then sends with ``submit(..., heading=True)``.)

        A fresh blocked send heads the chain later sends wait on.  A send that
        runs from the chain (or a retry that blocks again) must not replace
        its tail, or a later send would stop waiting for the sends between.
        """
        if self._send_chain is None:
            self._send_chain = d
            self._clear_chain_when_done(d)

    @property
    def sends_blocked(self) -> bool:
        """Sends of this session wait for space on a BLOCKed address.

        A protocol with producer credit (AMQP) grants no more meanwhile.
        """
        return self._send_chain is not None

    def when_unblocked(self, fn) -> None:
        """Call ``fn()`` once the sends waiting now (see :attr:`sends_blocked`) have gone."""
        self._send_chain.addBoth(_call_then_pass, fn)

    def _clear_chain_when_done(self, d: defer.Deferred) -> None:
        def clear(value):
            if self._send_chain is d:
                self._send_chain = None
            return value

        d.addBoth(clear)

    # -- consuming ---------------------------------------------------------------------
    def create_consumer(
        self,
        destination: str,
        on_delivery,
        *,
        routing_type: RoutingType | None = None,
        selector: str | None = None,
        subscription_name: str | None = None,
        auto_ack: bool = False,
        credit_messages: int | None = None,
        credit_bytes: int | None = None,
        on_batch_end=None,
        ack_returns_credit: bool = True,
        subscription_queue: str | None = None,
        priority: int = 0,
        durable_subscription: bool = True,
        shared_subscription: bool = False,
        exclusive: bool = False,
    ) -> ServerConsumer:
        """Subscribe to an address or queue, Artemis style.

        ANYCAST: consume from the queue named ``destination`` (auto-created).
        MULTICAST: a durable subscription queue ``<client-id>.<subscription>``
        when ``subscription_name`` is given, else a temporary queue that goes
        away with the consumer.  ``address::queue`` names a queue directly.
        ``subscription_queue`` names a subscription queue outright (AMQP's
        naming); with ``durable_subscription=False`` it is a non-durable
        shared subscription, removed when its last consumer leaves.
        ``shared_subscription``: other consumers may share the queue, so a
        changed selector is refused while any are attached.
        ``exclusive``: the queue's messages go to this consumer alone while it is
        attached (:mod:`~junction.brokercore.exclusive`).
        """
        server = self.server
        flt = None
        if selector:
            try:
                flt = parse_filter(selector)
            except FilterError as exc:
                raise errors.InvalidFilterError(f"invalid selector {selector!r}: {exc}") from exc
        owns_queue = False
        consumer_filter = flt
        if "::" in destination:
            address_name, queue_name = destination.split("::", 1)
            queue = server.find_queue(queue_name)
            if queue is None or queue.address != address_name:
                raise errors.NonExistentQueueError(f"queue {queue_name} does not exist on address {address_name}")
            self.check("consume", address_name, queue_name)
        else:
            address = server.addresses.get(destination)
            if routing_type is None:
                if address is not None and len(address.routing_types) == 1:
                    routing_type = next(iter(address.routing_types))
                elif address is not None and RoutingType.ANYCAST in address.routing_types and destination in address.queues:
                    routing_type = RoutingType.ANYCAST
                else:
                    routing_type = server.settings.resolve(destination).default_address_routing_type
            if address is None:
                self.check("createAddress", destination)
            address = server.resolve_address(destination, routing_type)
            if address is None:
                raise errors.NonExistentAddressError(
                    f"address {destination} does not exist and auto-create-addresses is false"
                )
            if routing_type == RoutingType.ANYCAST:
                queue = address.queues.get(destination) or next(iter(address.anycast_queues()), None)
                if queue is None:
                    settings = server.settings.resolve(destination)
                    if not settings.auto_create_queues:
                        raise errors.NonExistentQueueError(
                            f"queue {destination} does not exist and auto-create-queues is false"
                        )
                    self.check("createDurableQueue", destination, destination)
                    # Checked before creating: a refused consumer leaves no queue.
                    self.check("consume", destination, destination)
                    queue = server.create_auto_queue(destination, settings)
                self.check("consume", destination, queue.name)
            elif subscription_name or subscription_queue is not None:
                if subscription_queue is not None:
                    queue_name = subscription_queue
                else:
                    client_id = self.connection.client_id
                    if not client_id:
                        raise errors.BrokerError("a durable subscription needs a client-id on the connection")
                    queue_name = f"{client_id}.{subscription_name}"
                queue = self._subscription_queue(
                    destination, queue_name, selector, durable=durable_subscription, shared=shared_subscription
                )
                consumer_filter = None
                # A non-durable shared subscription goes with its last consumer.
                owns_queue = not durable_subscription
                self.check("consume", destination, queue_name)
            else:
                # A plain subscriber: a temporary queue of its own.
                queue = self._subscription_queue(destination, str(uuid.uuid4()), selector, durable=False, shared=False)
                consumer_filter = None
                owns_queue = True
        max_consumers = queue.definition.max_consumers
        if max_consumers >= 0 and len(queue.consumers) >= max_consumers:
            raise errors.MaxConsumersReachedError(
                f"queue {queue.name} already has its maximum of {max_consumers} consumers"
            )
        consumer = ServerConsumer(
            self,
            queue,
            on_delivery,
            filter=consumer_filter,
            auto_ack=auto_ack,
            credit_messages=credit_messages,
            credit_bytes=credit_bytes,
            owns_queue=owns_queue,
            on_batch_end=on_batch_end,
            ack_returns_credit=ack_returns_credit,
            priority=priority,
            exclusive=exclusive,
        )
        self.consumers.add(consumer)
        # A consumer created while the connection cannot write starts paused too.
        consumer.consumer.paused = self.paused
        queue.add_consumer(consumer.consumer)
        return consumer

    def _subscription_queue(self, address: str, queue_name: str, selector, *, durable: bool, shared: bool):
        """Find or create a subscription queue on a MULTICAST address.

        Checked before the queue is created or replaced: a refused subscriber
        must not leave a queue collecting messages.  A changed selector
        replaces the subscription (Artemis), unless other consumers share it.
        """
        server = self.server
        self.check("consume", address, queue_name)
        queue = server.find_queue(queue_name)
        if queue is not None and (queue.definition.filter or None) != (selector or None):
            if (shared or not durable) and queue.consumers:
                raise errors.BrokerError(f"subscription {queue_name} is in use with a different selector")
            self.check("deleteDurableQueue" if durable else "deleteNonDurableQueue", address, queue_name)
            if durable:
                server.guard_cluster_change(f"change the selector of durable subscription {queue_name}")
            server.destroy_queue(queue_name)
            if durable:
                server.cluster_changed("delete", queue, "subscription")
            queue = None
        if queue is None:
            self.check("createDurableQueue" if durable else "createNonDurableQueue", address, queue_name)
            if durable:
                server.guard_cluster_change(f"create durable subscription {queue_name}")
            queue = server.create_queue(
                QueueDefinition(
                    name=queue_name,
                    address=address,
                    routing_type=RoutingType.MULTICAST,
                    filter=selector or None,
                    durable=durable,
                    subscription=durable,
                    temporary=not durable,
                    exclusive=server.settings.resolve(address).default_exclusive_queue,
                )
            )
            if durable:
                server.cluster_changed("create", queue, "subscription")
        return queue

    def unsubscribe_durable(self, subscription_name: str) -> None:
        """Delete a durable subscription queue (STOMP UNSUBSCRIBE with the name)."""
        queue_name = f"{self.connection.client_id}.{subscription_name}"
        queue = self.server.find_queue(queue_name)
        if queue is None:
            raise errors.NonExistentQueueError(f"durable subscription {queue_name} does not exist")
        self._delete_subscription(queue)

    def delete_unused_subscription(self, queue_name: str) -> None:
        """Delete a durable subscription queue if it exists and nobody consumes from it.

        AMQP: closing (not detaching) a durable subscriber's link unsubscribes.
        Raises ``SecurityError`` or ``ClusterConfigurationUnavailableError``
        when it may not go now.
        """
        queue = self.server.find_queue(queue_name)
        if queue is None or queue.consumers:
            return
        self._delete_subscription(queue)

    def _delete_subscription(self, queue) -> None:
        server = self.server
        self.check("deleteDurableQueue", queue.address, queue.name)
        server.guard_cluster_change(f"remove durable subscription {queue.name}")
        server.destroy_queue(queue.name)
        server.cluster_changed("delete", queue, "subscription")

    # -- settlement ----------------------------------------------------------------------
    def acknowledge(self, ref: MessageRef, tx: Transaction | None = None):
        """The client consumed ``ref``; credit returns to its consumer.

        Returns a Deferred that fires once the ack record reached the OS
        (so a process crash cannot undo it) when the ack was persisted, else
        None.  A protocol that confirms acks (STOMP ACK receipts) waits on it.
        """
        if tx is not None:
            tx.acks.append(ref)
            return None
        owner = self._consumer_of.pop(id(ref), None)
        queue = ref.queue
        if queue.deleted:
            return None
        stored = queue.acknowledge(ref)
        if owner is not None:
            owner.settled(ref)
        events = self.server.message_events
        if events is not None:
            events.acknowledged(ref, owner, self)
        return stored

    def reject(self, ref: MessageRef) -> None:
        """The client refuses ``ref`` for good (AMQP rejected): it goes to the dead-letter address."""
        owner = self._consumer_of.pop(id(ref), None)
        if ref.queue.deleted:
            return
        ref.queue.reject(ref)
        if owner is not None:
            owner.settled(ref)

    def cancel(self, ref: MessageRef, *, redelivered: bool = True) -> None:
        """The client gives ``ref`` back (NACK): redelivered, or dead-lettered at the limit."""
        owner = self._consumer_of.pop(id(ref), None)
        if ref.queue.deleted:
            return
        ref.queue.cancel(ref, redelivered=redelivered)
        if owner is not None:
            owner.settled(ref)

    def expire(self, ref: MessageRef) -> None:
        """The client found ``ref`` expired (CORE's SESS_EXPIRED): it goes to the expiry
        address now, as Artemis does, rather than back to the queue until the next scan."""
        owner = self._consumer_of.pop(id(ref), None)
        if ref.queue.deleted:
            return
        ref.queue.expire_delivered(ref)
        if owner is not None:
            owner.settled(ref)

    def begin(self) -> Transaction:
        tx = Transaction(self)
        self.transactions.add(tx)
        return tx

    def commit(self, tx: Transaction) -> defer.Deferred:
        self.transactions.discard(tx)
        if self._send_chain is not None:
            # An earlier send waits for space on a BLOCKed address: the
            # transaction's sends must not overtake it.
            result = defer.Deferred()

            def go(_):
                tx.commit().chainDeferred(result)
                return None

            self._send_chain.addBoth(go)
            self._send_chain = result
            self._clear_chain_when_done(result)
            return result
        return tx.commit()

    def rollback(self, tx: Transaction) -> None:
        self.transactions.discard(tx)
        tx.rollback()

    # -- flow control -----------------------------------------------------------------------
    def set_paused(self, paused: bool) -> None:
        """Stop or resume deliveries while the connection cannot write."""
        self.paused = paused
        for consumer in self.consumers:
            consumer.consumer.set_paused(paused)

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Roll back open transactions, give back unacked deliveries, drop temp queues."""
        if self.closed:
            return
        self.closed = True
        # Consumers first: closing one gives back everything it has in flight,
        # acked in an open transaction or not, in delivery order.  Rolling the
        # transactions back first would put their refs at the head and the
        # consumers' other refs in front of them.
        for consumer in list(self.consumers):
            consumer.close()
        for tx in list(self.transactions):
            tx.rollback()
        self.transactions.clear()
        for name in list(self.temporary_queues):
            self.server.destroy_queue(name)
        self._consumer_of.clear()
        self.server.sessions.discard(self)
