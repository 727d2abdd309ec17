"""OpenWire consumers on a broker node: prefetch, dispatch, acks and pulls, as Artemis serves them.

A ConsumerInfo opens a :class:`~junction.brokercore.session.ServerConsumer`
whose message credit is the consumer's prefetch (a window of deliveries not
yet acknowledged, nor counted by a DELIVERED ack); a prefetch of 0 gives
credit only for each MessagePull.  Destinations map as Artemis maps them: a
queue is the ANYCAST queue of that name, a topic a MULTICAST address with a
temporary queue per consumer, or for a durable subscriber the queue
``clientId.subscriptionName`` (each part's ``\\`` doubled and ``.`` escaped).
``noLocal`` adds Artemis's selector ``__AMQ_CID<>'<client id>'``.
Consumers of ``ActiveMQ.Advisory.*`` topics (every connection opens one) are
answered and given nothing: this node publishes no advisories.

Acks (MessageAck.ackType) act on the consumer's deliveries from the oldest
up to ``lastMessageId`` (STANDARD) or on that one only (INDIVIDUAL):

* STANDARD, INDIVIDUAL, UNMATCHED -- acknowledged (in the transaction when
  the ack names one: held until the commit, given back to the consumer's
  deliveries on a rollback, since the client redelivers them itself);
* DELIVERED -- credit only: the window opens, nothing is acknowledged;
* POISON -- to the dead-letter address;
* EXPIRED -- to the expiry address;
* REDELIVERED -- ignored.

Every buffer is bounded: a consumer's deliveries by its prefetch (the credit),
a transaction's held acks by the deliveries they name.
"""

from __future__ import annotations

from collections import OrderedDict

from junction.brokercore.large_bodies import in_memory
from junction.brokercore.openwire_convert import to_openwire
from junction.model import errors
from junction.model.filter.expression import FilterError, parse_filter
from junction.model.message import RoutingType
from junction.protocols.openwire.commands import DestinationInfo, DestinationOperation
from junction.protocols.openwire.messages import AckType, ActiveMQMessage, MessageDispatch
from junction.protocols.openwire.structures import ActiveMQTopic, MessageId, ProducerId

__all__ = ["ADVISORY_PREFIX", "OpenWireConsumers", "subscription_queue_name"]

#: Topics of Classic's advisory messages; their consumers are answered and fed nothing.
ADVISORY_PREFIX = "ActiveMQ.Advisory."
#: Messages one browser's snapshot shows at most (the rest of a longer queue is not shown;
#: the same bound as CORE's browsers).
MAX_BROWSE_SNAPSHOT = 100_000
#: The prefetch a queue consumer gets when it names none (``ActiveMQPrefetchPolicy``).
DEFAULT_QUEUE_PREFETCH = 1000


def _escape(part: str) -> str:
    return part.replace("\\", "\\\\").replace(".", "\\.")


def subscription_queue_name(client_id: str, subscription: str) -> str:
    """The queue of a durable topic subscription, as Artemis names it."""
    return f"{_escape(client_id)}.{_escape(subscription)}"


class _Consumer:
    """One OpenWire consumer: its ServerConsumer and its unacknowledged deliveries."""

    __slots__ = ("info", "prefetch", "server_consumer", "delivered", "credited", "pull_timer")

    def __init__(self, info):
        self.info = info
        #: the prefetch now: the ConsumerInfo's, until a ConsumerControl changes it
        self.prefetch = info.prefetch_size
        self.server_consumer = None
        #: broker sequence id -> ref, oldest first (bounded by the prefetch)
        self.delivered: OrderedDict = OrderedDict()
        #: broker sequence ids whose credit a DELIVERED ack gave back already
        self.credited: set = set()
        self.pull_timer = None


class OpenWireConsumers:
    """The consumer half of :class:`~junction.brokercore.openwire_server.OpenWireProtocol`."""

    def __init__(self) -> None:
        self.consumers: dict = {}
        #: the consumers of advisory topics: consumer id -> ConsumerInfo
        self.advisories: dict = {}
        #: this connection's temporary destinations: name -> destination
        self.temporaries: dict = {}
        self._advisory_sequence = 0

    def address_of(self, name: str, routing: RoutingType) -> tuple[str, RoutingType]:
        """The address a destination name means: the acceptor's prefixes decide, else its JMS type."""
        for prefix in self.anycast_prefixes:
            if name.startswith(prefix):
                return name[len(prefix):], RoutingType.ANYCAST
        for prefix in self.multicast_prefixes:
            if name.startswith(prefix):
                return name[len(prefix):], RoutingType.MULTICAST
        return name, routing

    # -- ConsumerInfo ------------------------------------------------------------------------------
    def on_consumer(self, info) -> None:
        destination = info.destination
        name = destination.physical_name if destination is not None else None
        if not name:
            self.connection.discard(info.consumer_id)
            raise errors.BrokerError("a consumer needs a destination")
        if destination.is_topic and name.startswith(ADVISORY_PREFIX):
            self.advisories[info.consumer_id] = info
            self.respond(info)
            for peer in self.peers():  # the temporary destinations that exist now
                for temporary in peer.temporaries.values():
                    self.advise(info, temporary, DestinationOperation.ADD)
            return
        name, routing = self.address_of(name, RoutingType.MULTICAST if destination.is_topic else RoutingType.ANYCAST)
        if info.browser:
            return self._browse(info, name)
        state = _Consumer(info)
        prefetch = info.prefetch_size
        selector = info.selector or None
        if info.no_local:
            local = f"__AMQ_CID<>'{(self.client_id or '').replace(chr(39), chr(39) * 2)}'"
            selector = f"({selector}) AND {local}" if selector else local
        kwargs = dict(selector=selector, credit_messages=max(0, prefetch), ack_returns_credit=False,
                      priority=info.priority)
        if routing is RoutingType.ANYCAST and info.exclusive:
            kwargs["exclusive"] = True  # Classic's exclusive consumer (a topic's queue is the consumer's own)
        try:
            if routing is RoutingType.MULTICAST:
                if info.subscription_name:
                    queue = subscription_queue_name(self.client_id or "", info.subscription_name)
                    existing = self.server.find_queue(queue)
                    if existing is not None and existing.consumers:
                        raise errors.BrokerError("Cannot create a subscriber on the durable subscription "
                                                 "since it already has subscriber(s)")
                    kwargs["subscription_queue"] = queue
                sc = self.session.create_consumer(name, self._deliver_to(state),
                                                  routing_type=RoutingType.MULTICAST, **kwargs)
            else:
                sc = self.session.create_consumer(name, self._deliver_to(state),
                                                  routing_type=RoutingType.ANYCAST, **kwargs)
        except Exception:
            self.connection.discard(info.consumer_id)
            raise
        state.server_consumer = sc
        self.consumers[info.consumer_id] = state
        self.respond(info)

    def _browse(self, info, name: str) -> None:
        """A QueueBrowser: the queue's waiting messages shown (none taken), then the end marker.

        A snapshot, as CORE's browsers take one: at most ``MAX_BROWSE_SNAPSHOT`` messages,
        those the selector matches; the browser's acks change nothing.
        """
        queue = self.server.find_queue(name)
        if queue is None:
            self.connection.discard(info.consumer_id)
            raise errors.NonExistentQueueError(f"AMQ229017: Queue {name} does not exist")
        self.session.check("browse", queue.address, queue.name)
        try:
            matches = parse_filter(info.selector).matches if info.selector else None
        except FilterError as exc:
            self.connection.discard(info.consumer_id)
            raise errors.InvalidFilterError(f"invalid selector {info.selector!r}: {exc}") from exc
        self.respond(info)
        shown = 0
        for ref in queue.waiting():
            if shown >= MAX_BROWSE_SNAPSHOT:
                break
            if matches is not None and not matches(ref.message):
                continue
            shown += 1
            self.write(MessageDispatch(
                consumer_id=info.consumer_id, destination=info.destination,
                message=to_openwire(in_memory(ref.message, self.server), node_id=self._node(),
                                    destination=info.destination,
                                    consumer_id=info.consumer_id, redelivery_counter=ref.delivery_count),
                redelivery_counter=ref.delivery_count))
        self.write(MessageDispatch(consumer_id=info.consumer_id, destination=None, message=None))

    def _deliver_to(self, state: _Consumer):
        def deliver(sc, ref) -> None:
            message = ref.message
            dispatch = MessageDispatch(
                consumer_id=state.info.consumer_id,
                destination=state.info.destination,
                message=to_openwire(in_memory(message, self.server), node_id=self._node(),
                                    destination=state.info.destination,
                                    consumer_id=state.info.consumer_id,
                                    redelivery_counter=max(0, ref.delivery_count - 1)),
                redelivery_counter=max(0, ref.delivery_count - 1),
            )
            state.delivered[message.message_id] = ref
            if state.pull_timer is not None and state.pull_timer.active():
                state.pull_timer.cancel()
            state.pull_timer = None
            self.write(dispatch)
        return deliver

    def _node(self) -> str:
        return str(getattr(self.server, "node_id", None) or "junction")

    # -- acks ------------------------------------------------------------------------------------------
    def _range(self, state: _Consumer, ack) -> list:
        """The deliveries an ack names: the oldest up to its last id (or that one only)."""
        last = ack.last_message_id.broker_sequence_id if ack.last_message_id is not None else None
        if last is None or last not in state.delivered:
            return []
        if ack.ack_type == AckType.INDIVIDUAL or ack.message_count == 1:
            return [last]
        keys = []
        for key in state.delivered:
            keys.append(key)
            if key == last:
                break
        return keys

    def _credit(self, state: _Consumer, keys) -> None:
        fresh = 0
        for key in keys:
            if key in state.credited:
                state.credited.discard(key)
            else:
                fresh += 1
        if fresh and state.prefetch > 0:
            state.server_consumer.add_credit(fresh)

    def on_ack(self, ack) -> None:
        state = self.consumers.get(ack.consumer_id)
        if state is None or ack.ack_type == AckType.REDELIVERED:
            return self.respond(ack)
        keys = self._range(state, ack)
        kind = ack.ack_type
        if kind == AckType.DELIVERED:
            fresh = [k for k in keys if k not in state.credited]
            state.credited.update(fresh)
            if fresh and state.prefetch > 0:
                state.server_consumer.add_credit(len(fresh))
            return self.respond(ack)
        refs = [state.delivered.pop(k) for k in keys]
        if kind in (AckType.STANDARD, AckType.INDIVIDUAL, AckType.UNMATCHED) and ack.transaction_id is not None:
            held = self._transaction(ack.transaction_id)[1]
            held.extend((state, ref) for ref in refs)
            # credit now, the client's window counts them as consumed
            self._credit(state, keys)
            return self.respond(ack)
        self._credit(state, keys)
        for ref in refs:
            if kind == AckType.POISON:
                self.session.reject(ref)
            elif kind == AckType.EXPIRED:
                self.session.expire(ref)
            else:
                self.session.acknowledge(ref)
        self.respond(ack)

    def ack_in_transaction(self, state: _Consumer, ref) -> bool:
        """A held ack is still good at commit: its consumer is open and the ref is still its."""
        return state.server_consumer is not None and not state.server_consumer.closed and ref.consumer is not None

    def rolled_back(self, held: list) -> None:
        """A rolled-back transaction's acks: the deliveries are the consumer's again (the client redelivers)."""
        for state, ref in held:
            if state.server_consumer is not None and not state.server_consumer.closed and ref.consumer is not None:
                state.delivered[ref.message.message_id] = ref
                state.delivered.move_to_end(ref.message.message_id, last=False)
                # its credit came back with the ack: a second ack gives none
                state.credited.add(ref.message.message_id)

    # -- ConsumerControl ----------------------------------------------------------------------------
    def on_consumer_control(self, control) -> None:
        """A client's ConsumerControl: its consumer's prefetch is now ``prefetch``.

        The failover transport sends one after a reconnect: it re-creates each consumer with a
        prefetch of 0 while the reconnect is under way, then restores the real prefetch this way
        (Classic's ``ConnectionStateTracker``; Artemis's ``updateConsumer`` serves it).  The
        window is the new prefetch less the deliveries it still counts; 0 is pull mode.  The
        command's other flags (close, start, stop, flush) are the broker's to send, not the
        client's: ignored, as Artemis ignores them.
        """
        state = self.consumers.get(control.consumer_id)
        if state is not None and not state.server_consumer.closed:
            prefetch = max(0, control.prefetch)
            state.prefetch = prefetch
            if prefetch == 0:
                state.server_consumer.set_credit(0)
            else:
                if state.pull_timer is not None and state.pull_timer.active():
                    state.pull_timer.cancel()
                state.pull_timer = None
                used = len(state.delivered) - len(state.credited)
                state.server_consumer.set_credit(max(0, prefetch - used))
                state.server_consumer.deliver_now()  # before what the client sent next
        self.respond(control)

    # -- pulls -----------------------------------------------------------------------------------------
    def on_pull(self, pull) -> None:
        state = self.consumers.get(pull.consumer_id)
        if state is None or state.prefetch > 0:
            return self.respond(pull)
        before = len(state.delivered)
        sc = state.server_consumer
        if (sc.consumer.credit_messages or 0) <= 0:
            sc.add_credit(1)
        sc.deliver_now()
        self.respond(pull)
        if len(state.delivered) > before or pull.timeout == 0:
            return
        delay = 0.0 if pull.timeout < 0 else pull.timeout / 1000.0
        if state.pull_timer is not None and state.pull_timer.active():
            state.pull_timer.cancel()
        state.pull_timer = self.reactor.callLater(delay, self._pull_expired, state)

    def _pull_expired(self, state: _Consumer) -> None:
        state.pull_timer = None
        if state.server_consumer.closed or self._closing:
            return
        state.server_consumer.set_credit(0)
        self.write(MessageDispatch(consumer_id=state.info.consumer_id, destination=None, message=None))

    # -- removal ---------------------------------------------------------------------------------------
    def remove_consumer(self, consumer_id) -> None:
        if consumer_id in self.advisories:
            del self.advisories[consumer_id]
            return
        state = self.consumers.pop(consumer_id, None)
        if state is None:
            return
        if state.pull_timer is not None and state.pull_timer.active():
            state.pull_timer.cancel()
        if state.server_consumer is not None:
            state.server_consumer.close()

    def remove_session_consumers(self, session_id) -> None:
        for consumer_id in [c for c in list(self.consumers) + list(self.advisories) if c.session() == session_id]:
            self.remove_consumer(consumer_id)

    def close_consumers(self) -> None:
        for consumer_id in list(self.consumers) + list(self.advisories):
            self.remove_consumer(consumer_id)
        if self.session is not None:
            for destination in list(self.temporaries.values()):
                self.remove_temporary(destination)
        self.temporaries.clear()

    # -- temporary destinations, subscriptions ------------------------------------------------------------
    def add_temporary(self, destination) -> None:
        name = destination.physical_name
        if destination.is_topic:
            self.session.create_address(name, {RoutingType.MULTICAST})
        else:
            self.session.create_temporary_queue(name, RoutingType.ANYCAST)
        self.temporaries[name] = destination
        self._advise_all(destination, DestinationOperation.ADD)

    def remove_temporary(self, destination) -> None:
        name = destination.physical_name
        if self.temporaries.pop(name, None) is not None:
            self._advise_all(destination, DestinationOperation.REMOVE)
        self._drop_temporary(name)

    # -- advisories: how the other connections learn of a temporary destination ------------------------
    def _advise_all(self, destination, operation: int) -> None:
        for peer in self.peers():
            for info in list(peer.advisories.values()):
                peer.advise(info, destination, operation)

    def advise(self, info, destination, operation: int) -> None:
        """Tell an advisory consumer of a temporary destination (Classic's advisory message)."""
        topic_name = ADVISORY_PREFIX + ("TempTopic" if destination.is_topic else "TempQueue")
        if not any(part == topic_name for part in (info.destination.physical_name or "").split(",")):
            return
        self._advisory_sequence += 1
        topic = ActiveMQTopic(topic_name)
        advisory = ActiveMQMessage(
            destination=topic,
            message_id=MessageId(f"ID:{self._node()}:advisory:{self._advisory_sequence}",
                                 ProducerId(f"ID:{self._node()}:advisory", 1, 1), self._advisory_sequence),
            data_structure=DestinationInfo(destination=destination, operation_type=operation),
        )
        self.write(MessageDispatch(consumer_id=info.consumer_id, destination=topic, message=advisory))

    def _drop_temporary(self, name: str) -> None:
        queue = self.server.find_queue(name)
        if queue is not None and queue.definition.temporary:
            self.session.delete_temporary_queue(name)

    def remove_subscription(self, client_id: str, subscription: str) -> None:
        queue = subscription_queue_name(client_id or "", subscription)
        found = self.server.find_queue(queue)
        if found is None:
            raise errors.NonExistentQueueError(f"durable subscription {queue} does not exist")
        if found.consumers:
            raise errors.BrokerError(f"durable subscription {queue} is in use")
        self.session.delete_unused_subscription(queue)
