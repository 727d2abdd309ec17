"""A CORE session's consumers: creation, flow credits, deliveries, acknowledgements, close.

:class:`ConsumerHandlers` is mixed into
:class:`~junction.brokercore.core_sessions.CoreSession`; each consumer is a
:class:`CoreConsumer` over a :class:`~junction.brokercore.session.ServerConsumer`
on the queue SESS_CREATECONSUMER names (a CORE consumer always names its
queue: the JMS client creates subscription queues itself).  Behaviour follows
Artemis's ``ServerConsumerImpl`` (core.md section 7):

* credits are bytes: a consumer starts with none; SESS_FLOWTOKEN adds the
  client's window (-1: unlimited; 0: reset to none); each SESS_RECEIVE_MSG
  takes its whole encoded size, and deliveries stop while the credit is not
  positive (it may go negative).  The client returns what it consumed.
* SESS_ACKNOWLEDGE acknowledges every message this consumer delivered up to
  and including the one named (cumulative); SESS_INDIVIDUAL_ACKNOWLEDGE that
  one alone.  A message the consumer does not hold is refused
  (ILLEGAL_STATE, Artemis's AMQ229027) and nothing is acknowledged.  In a
  transacted session the acknowledgements wait for COMMIT.
* closing a consumer gives back what it delivered and was not acknowledged,
  not counted as a delivery (the client never read it), as Artemis's
  ``close(failed=false)``; acknowledgements of a consumer closed within a
  transaction still commit with it.
* SESS_FORCE_CONSUMER_DELIVERY (``receiveNoWait``): what the queue can give
  now is delivered, then a marker message carrying the client's sequence
  (``_hornetq.forced.delivery.seq``), which costs no credit.
* SESS_EXPIRED: the client saw the message expire; it goes to the expiry
  address at once, as Artemis does.

Browse-only consumers (``browseOnly``, the JMS ``QueueBrowser``) are
:class:`~junction.brokercore.core_browsers.CoreBrowser`: they show the queue's
messages and take none.
"""

from __future__ import annotations

from junction.brokercore.core_browsers import CoreBrowser
from junction.brokercore.core_convert import to_core
from junction.brokercore.core_errors import CoreRefused
from junction.brokercore.core_large import deliver_large
from junction.brokercore.core_queues import queue_info
from junction.brokercore.large_messages import NATIVE_KEY
from junction.brokercore.storage import quiet_failure
from junction.model import errors
from junction.protocols.core import ExceptionType, MessageHeaders, encode_packet, responses
from junction.protocols.core import packets as p

__all__ = ["FORCED_DELIVERY", "ConsumerHandlers", "CoreConsumer"]

#: The property of the marker that ends a forced delivery (``ClientConsumerImpl.FORCED_DELIVERY_MESSAGE``).
FORCED_DELIVERY = "_hornetq.forced.delivery.seq"

_SessReceiveMsg = p.SessReceiveMsg


class CoreConsumer:
    """One consumer of a CORE session (see the module doc)."""

    __slots__ = ("core", "id", "queue", "server_consumer", "delivering", "tx_acked", "unlimited")

    def __init__(self, core, consumer_id: int, queue: str, address: str, selector: str | None, priority: int = 0):
        self.core = core
        self.id = consumer_id
        self.queue = queue
        #: message id -> ref, delivered and not acknowledged, in delivery order
        self.delivering: dict = {}
        #: acknowledgements of this consumer waiting in the session's transaction
        self.tx_acked = 0
        self.unlimited = False
        self.server_consumer = core.session.create_consumer(
            f"{address}::{queue}",
            self._deliver,
            selector=selector,
            auto_ack=core.pre_acknowledge,
            credit_bytes=0,
            ack_returns_credit=False,
            priority=priority,  # Artemis's consumer priority (queue?consumer-priority=N)
        )

    def _deliver(self, server_consumer, ref) -> None:
        message = ref.message
        core = self.core
        if NATIVE_KEY in message.native:
            server_consumer.recharge(ref, deliver_large(core, self, ref))
            if not core.pre_acknowledge:
                self.delivering[message.message_id] = ref
            return
        body, headers = to_core(message)
        data = encode_packet(_SessReceiveMsg(body, headers, self.id, ref.delivery_count, channel_id=core.channel))
        server_consumer.recharge(ref, len(data))
        if not core.pre_acknowledge:
            self.delivering[message.message_id] = ref
        core.protocol.write(data)

    def deliver_now(self) -> None:
        """What the queue can give now, delivered (a forced delivery)."""
        self.server_consumer.deliver_now()

    # -- credits ------------------------------------------------------------------------------
    def flow(self, credits: int) -> None:
        server_consumer = self.server_consumer
        if credits == -1:
            self.unlimited = True
            server_consumer.set_byte_credit(None)
        elif credits == 0:
            self.unlimited = False
            server_consumer.set_byte_credit(0)
        elif not self.unlimited:
            server_consumer.add_credit(0, credits)

    # -- settlement -----------------------------------------------------------------------------
    def acknowledge(self, message_id: int, *, individual: bool, tx):
        """Acknowledge ``message_id`` (and, cumulative, every earlier delivery); the Deferred of
        the last journal write, or None when nothing is written."""
        delivering = self.delivering
        if message_id not in delivering:
            raise CoreRefused(
                ExceptionType.ILLEGAL_STATE,
                f"AMQ229027: Could not find reference on consumer ID={self.id}, "
                f"messageId = {message_id} queue = {self.queue}",
            )
        if individual:
            refs = [delivering.pop(message_id)]
        else:
            taken = []  # the deliveries up to this one: the oldest first (usually just this one)
            for key in delivering:
                taken.append(key)
                if key == message_id:
                    break
            refs = [delivering.pop(key) for key in taken]
        session = self.core.session
        last = None
        for ref in refs:
            stored = session.acknowledge(ref, tx)
            if stored is not None:
                if last is not None:
                    quiet_failure(last)
                last = stored
        if tx is not None:
            self.tx_acked += len(refs)
        return last

    def give_back(self) -> None:
        """What this consumer delivered and was not acknowledged goes back to its queue, in
        order, not counted as delivered."""
        refs = list(self.delivering.values())
        self.delivering.clear()
        cancel = self.core.session.cancel
        for ref in reversed(refs):
            cancel(ref, redelivered=False)

    def close(self) -> None:
        self.give_back()
        if self.tx_acked:
            # Its acknowledgements commit (or roll back) with the transaction: keep it, deliver nothing.
            self.server_consumer.set_byte_credit(0)
            self.core.retired.append(self)
        else:
            self.server_consumer.close()



def forced_marker(consumer, sequence: int) -> bytes:
    """The marker that ends a forced delivery of ``consumer`` (a consumer or a browser)."""
    headers = MessageHeaders(0, consumer.queue, properties=((FORCED_DELIVERY, sequence),))
    return encode_packet(_SessReceiveMsg(b"", headers, consumer.id, 0, channel_id=consumer.core.channel))


class ConsumerHandlers:
    """The consumer packets of a :class:`~junction.brokercore.core_sessions.CoreSession`."""

    __slots__ = ()

    def _consumer(self, consumer_id: int) -> CoreConsumer:
        consumer = self.consumers.get(consumer_id)
        if consumer is None:
            raise CoreRefused(ExceptionType.ILLEGAL_STATE, f"AMQ229028: Consumer {consumer_id} doesn't exist on the server")
        return consumer

    def _on_create_consumer(self, packet: p.SessCreateConsumer) -> None:
        name, _ = self.protocol.unprefixed(packet.queue_name)
        if "::" in name:
            name = name.split("::", 1)[1]
        found = self.session.queue_query(name)
        if found is None:
            raise errors.NonExistentQueueError(f"AMQ229017: Queue {name} does not exist")
        if packet.consumer_id in self.consumers:
            raise CoreRefused(ExceptionType.ILLEGAL_STATE, f"consumer {packet.consumer_id} exists already on this session")
        if packet.browse_only:
            self.session.check("browse", found.address, name)
            queue = self.session.server.find_queue(name)
            if queue is None:
                raise errors.NonExistentQueueError(f"AMQ229017: Queue {name} does not exist")
            self.consumers[packet.consumer_id] = CoreBrowser(self, packet.consumer_id, queue, packet.filter_string)
        else:
            self.consumers[packet.consumer_id] = CoreConsumer(
                self, packet.consumer_id, name, found.address, packet.filter_string, packet.priority or 0
            )
        answer = None
        if packet.requires_response:
            # The queue as it is now, this consumer counted: the client recreates it from this after a failover.
            answer = encode_packet(responses.queue_query_response(self.version, self.channel, queue_info(self.session, name)))
        self.confirm(packet, answer)

    def _on_flow(self, packet: p.SessFlowToken) -> None:
        self._consumer(packet.consumer_id).flow(packet.credits)
        self.confirm(packet, None)

    def _on_acknowledge(self, packet) -> None:
        consumer = self._consumer(packet.consumer_id)
        tx = None if self.auto_commit_acks else self.tx
        stored = consumer.acknowledge(packet.message_id, individual=packet.__class__ is p.SessIndividualAcknowledge, tx=tx)
        self.confirm(packet, self.null_response(packet) if packet.requires_response else None, stored)

    def _on_consumer_close(self, packet: p.SessConsumerClose) -> None:
        consumer = self.consumers.pop(packet.consumer_id, None)
        if consumer is not None:
            consumer.close()
        self.confirm(packet, self.null_response(packet))

    def _on_expired(self, packet: p.SessExpired) -> None:
        consumer = self._consumer(packet.consumer_id)
        ref = consumer.delivering.pop(packet.message_id, None)
        if ref is not None:
            self.session.expire(ref)
        self.confirm(packet, None)

    def _on_force_delivery(self, packet: p.SessForceConsumerDelivery) -> None:
        consumer = self._consumer(packet.consumer_id)
        consumer.deliver_now()
        self.protocol.write(forced_marker(consumer, packet.sequence))
        self.confirm(packet, None)

    HANDLERS = {
        p.SessCreateConsumer: _on_create_consumer,
        p.SessFlowToken: _on_flow,
        p.SessAcknowledge: _on_acknowledge,
        p.SessIndividualAcknowledge: _on_acknowledge,
        p.SessConsumerClose: _on_consumer_close,
        p.SessExpired: _on_expired,
        p.SessForceConsumerDelivery: _on_force_delivery,
    }
