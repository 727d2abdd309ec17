"""Queues: ordered message references, consumers with credit, acks and redelivery.

A :class:`Queue` holds :class:`MessageRef` objects (one per queue a message was
routed to) in ten priority lanes, and hands them to :class:`Consumer` objects
round-robin while they have credit.  A delivered reference stays *in flight*
until the consumer acknowledges it (gone), cancels it (back to the head of the
queue with its delivery count raised, after the address's redelivery delay) or
the delivery count reaches ``max-delivery-attempts`` (moved to the dead-letter
address).  This is Artemis's ``QueueImpl`` in miniature; persistence of acks
and delivery counts is the server's job (:mod:`junction.brokercore.storage`),
reached through the ``owner`` callbacks.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from junction.brokercore.exclusive import ExclusiveDispatch
from junction.brokercore.message_groups import (
    GroupSettings,
    group_id_of,
    queue_groups,
    with_first_key,
)
from junction.brokercore.scheduled import SCHEDULED_DELIVERY, ScheduledRefs, delivery_time
from junction.model.message import Message, RoutingType

__all__ = ["MessageRef", "Consumer", "Queue", "QueueDefinition"]

#: Messages a queue examines per delivery pass when consumers have selectors,
#: so a queue full of messages no consumer wants cannot stall the reactor.
MAX_SELECTOR_SCAN = 10_000


@dataclass(slots=True, eq=False, init=False)
class MessageRef:
    """One message on one queue, with its per-queue delivery count."""

    message: Message
    queue: "Queue"
    delivery_count: int
    #: set once the ref has been handed to a consumer and not settled
    consumer: "Consumer | None"
    #: a durable ref whose message record is in the journal
    persisted: bool
    #: the message's encoded size, computed once (credit and address limits)
    size: int
    #: ids of consumers that must not get this ref again (AMQP modified with
    #: undeliverable-here), or None
    avoid: "set | None"
    #: handed over as the first of its group to a consumer (group-first-key): it carries the
    #: key at every later delivery too, as Artemis's GroupFirstMessageReference stays the ref
    group_first: bool

    def __init__(
        self,
        message: Message,
        queue: "Queue",
        delivery_count: int = 0,
        consumer: "Consumer | None" = None,
        persisted: bool = False,
        size: int = -1,
    ):
        self.message = message
        self.queue = queue
        self.delivery_count = delivery_count
        self.consumer = consumer
        self.persisted = persisted
        self.size = size if size >= 0 else message.encoded_size()
        self.avoid = None
        self.group_first = False


@dataclass(frozen=True)
class QueueDefinition:
    """What is persisted about a queue (a bindings record)."""

    name: str
    address: str
    routing_type: RoutingType
    filter: str | None = None
    durable: bool = True
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    exclusive: bool = False
    auto_created: bool = False
    temporary: bool = False
    user: str | None = None
    #: set for durable subscription queues, so they are not auto-deleted
    subscription: bool = False
    #: the queue's own grouping attributes (None: its address settings'), see message_groups
    groups: GroupSettings | None = None


class Consumer:
    """A consumer on a queue, as a protocol session creates it.

    ``deliver(ref)`` is called for each reference handed over; it must not
    re-enter the queue.  ``exclusive``: while it is attached, the queue's
    messages go to it alone (:mod:`~junction.brokercore.exclusive`).  Credit: ``credit_messages``/``credit_bytes`` of
    ``None`` mean unlimited; otherwise each delivery consumes credit and the
    protocol session returns it (:meth:`add_credit`) as the client acks or asks
    for more.  ``paused`` stops deliveries while the connection cannot write
    (transport backpressure).  ``end_batch``, if set, is called after a
    delivery pass that handed this consumer at least one reference, so a
    protocol can write a pass's deliveries together.
    """

    _ids = itertools.count(1)

    def __init__(
        self,
        queue: "Queue",
        deliver,
        *,
        filter=None,
        credit_messages: int | None = None,
        credit_bytes: int | None = None,
        priority: int = 0,
        exclusive: bool = False,
    ):
        self.id = next(self._ids)
        self.queue = queue
        self.deliver = deliver
        self.filter = filter
        self.credit_messages = credit_messages
        self.credit_bytes = credit_bytes
        self.priority = priority
        self.exclusive = exclusive
        self.paused = False
        self.closed = False
        #: refs delivered and not yet acked or cancelled, in delivery order
        self.in_flight: dict[int, MessageRef] = {}
        self.delivered_total = 0
        self.end_batch = None
        #: handed a reference in the delivery pass in progress (see end_batch)
        self.in_batch = False

    def has_credit(self) -> bool:
        if self.paused or self.closed:
            return False
        if self.credit_messages is not None and self.credit_messages <= 0:
            return False
        if self.credit_bytes is not None and self.credit_bytes <= 0:
            return False
        return True

    def accepts(self, message: Message) -> bool:
        return self.filter is None or self.filter.matches(message)

    def take_credit(self, ref: MessageRef) -> None:
        if self.credit_messages is not None:
            self.credit_messages -= 1
        if self.credit_bytes is not None:
            self.credit_bytes -= ref.size

    def add_credit(self, messages: int = 0, size: int = 0) -> None:
        """Return credit; wake the queue only if this consumer was starved."""
        starved = False
        if self.credit_messages is not None:
            starved = self.credit_messages <= 0
            self.credit_messages += messages
        if self.credit_bytes is not None:
            starved = starved or self.credit_bytes <= 0
            self.credit_bytes += size
        if starved and self.has_credit():
            self.queue.deliver_soon()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        if not paused:
            self.queue.deliver_soon()


class Queue:
    """An Artemis queue bound to an address.

    ``owner`` is the server; the queue calls back into it for things that need
    the whole broker: ``owner.acknowledge_ref(ref)`` (persist an ack),
    ``owner.dead_letter(ref, reason)``, ``owner.expire(ref)``,
    ``owner.schedule(delay_s, fn)`` and ``owner.call_soon(fn)``,
    ``owner.now_ms()``, ``owner.queue_settings(queue)``,
    ``owner.update_delivery_count(ref)``, ``owner.queue_emptied(queue)``.
    """

    def __init__(self, definition: QueueDefinition, owner, *, queue_id: int = 0, filter=None):
        self.definition = definition
        self.name = definition.name
        self.id = queue_id
        self.owner = owner
        self.filter = filter
        self._lanes: list[deque] = [deque() for _ in range(10)]
        self._count = 0
        self.consumers: list[Consumer] = []
        #: the consumers do not all have the same priority (see _next_consumer)
        self._prioritised = False
        self._rr = 0
        self._delivery_scheduled = False
        self._delivering = False
        #: (lane, index) where a selector pass stopped at MAX_SELECTOR_SCAN
        self._scan_cursor: tuple[int, int] | None = None
        #: something changed while a capped selector scan was in progress
        self._rescan = False
        #: some ref has consumers to avoid (see avoid); reset when the queue empties
        self._avoiding = False
        #: consumers with an end_batch handed references in the current pass
        self._batch: list[Consumer] = []
        #: exclusive dispatch, while the queue is exclusive or has an exclusive consumer
        self._exclusive: ExclusiveDispatch | None = ExclusiveDispatch(True) if definition.exclusive else None
        self.messages_added = 0
        self.messages_acknowledged = 0
        self.messages_expired = 0
        self.messages_killed = 0
        self.in_flight_count = 0
        self.scheduled_count = 0
        #: references held for their scheduled delivery time (made on first use)
        self._scheduled: ScheduledRefs | None = None
        self.deleted = False
        #: the queue's message groups, None when it does not group (see message_groups);
        #: settled when the queue is made, as Artemis settles a queue's configuration
        self.groups = queue_groups(self, owner.queue_settings(self))

    def reconfigure(self, definition: QueueDefinition) -> None:
        """Take a changed ``exclusive``, ``max-consumers``, ``purge-on-no-consumers`` and
        grouping at run time (Artemis's ``updateQueue`` on a reload): exclusivity is chosen
        again among the consumers attached; the groups table is made anew, so every group
        finds an owner again at its next message, as Artemis's new group map does."""
        self.definition = definition
        exclusive = None
        if definition.exclusive or any(c.exclusive for c in self.consumers):
            exclusive = ExclusiveDispatch(definition.exclusive)
            for consumer in self.consumers:
                exclusive.consumer_added(consumer)
        self._exclusive = exclusive
        self.groups = queue_groups(self, self.owner.queue_settings(self))
        self.deliver_soon()

    # -- introspection --------------------------------------------------------
    @property
    def address(self) -> str:
        return self.definition.address

    @property
    def durable(self) -> bool:
        return self.definition.durable

    @property
    def routing_type(self) -> RoutingType:
        return self.definition.routing_type

    @property
    def message_count(self) -> int:
        """Messages on the queue: waiting, scheduled for redelivery and in flight."""
        return self._count + self.in_flight_count + self.scheduled_count

    @property
    def waiting_count(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} on {self.address!r} {self.message_count} msgs>"

    # -- adding ----------------------------------------------------------------
    def add(self, ref: MessageRef) -> None:
        """Append a reference in priority order and try to deliver it (or hold
        it until its scheduled delivery time, see :mod:`~junction.brokercore.scheduled`)."""
        properties = ref.message.properties
        if properties and SCHEDULED_DELIVERY in properties and self._hold(ref):
            return
        priority = ref.message.priority
        self._lanes[priority if 0 <= priority <= 9 else _lane(priority)].append(ref)
        self._count += 1
        self.messages_added += 1
        # deliver_soon(), inlined
        if self._scan_cursor is not None:
            self._rescan = True
        if not self._delivery_scheduled and not self.deleted:
            self._delivery_scheduled = True
            self.owner.call_soon(self._deliver_pass)

    def _hold(self, ref: MessageRef) -> bool:
        at = delivery_time(ref.message)
        if at <= self.owner.now_ms():
            return False
        if self._scheduled is None:
            self._scheduled = ScheduledRefs(self, self.owner)
        self.scheduled_count += 1
        self._scheduled.hold(ref, at)
        return True

    def take(self, message_id: int) -> MessageRef | None:
        """Take the waiting reference to ``message_id`` out of the queue (None if none
        waits): recovery holds the refs a prepared XA branch acknowledged."""
        for lane in self._lanes:
            for ref in lane:
                if ref.message.message_id == message_id:
                    lane.remove(ref)
                    self._count -= 1
                    return ref
        return None

    def add_head(self, ref: MessageRef) -> None:
        """Put a cancelled reference back at the head of its lane."""
        self._lanes[_lane(ref.message.priority)].appendleft(ref)
        self._count += 1
        self.deliver_soon()

    # -- consumers -------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        if self.groups is not None:
            self.groups.consumer_added()
        self.consumers.append(consumer)
        self._prioritised = len({c.priority for c in self.consumers}) > 1
        if consumer.exclusive and self._exclusive is None:
            self._exclusive = ExclusiveDispatch(False)
        if self._exclusive is not None:
            self._exclusive.consumer_added(consumer)
        self.deliver_soon()
        changed = getattr(self.owner, "consumers_changed", None)
        if changed is not None:
            changed(self)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Remove a consumer and put everything it had in flight back."""
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        if self.groups is not None:
            self.groups.consumer_removed(consumer)
        self._prioritised = len({c.priority for c in self.consumers}) > 1
        exclusive = self._exclusive
        if exclusive is not None:
            exclusive.consumer_removed(consumer, self.consumers)
            if not exclusive.needed(self.consumers):
                self._exclusive = None
        refs = list(consumer.in_flight.values())
        consumer.in_flight.clear()
        # Back at the head in their original order: add_head in reverse.
        for ref in reversed(refs):
            self.in_flight_count -= 1
            ref.consumer = None
            self._return(ref, redelivered=True, delay=False)
        self.deliver_soon()
        changed = getattr(self.owner, "consumers_changed", None)
        if changed is not None:
            changed(self)
        if not self.consumers:
            self.owner.consumers_gone(self)

    # -- delivery --------------------------------------------------------------
    def deliver_soon(self) -> None:
        """Schedule one delivery pass on the reactor (coalesced)."""
        if self._scan_cursor is not None:
            # The resumed scan will not look behind its cursor: look again after.
            self._rescan = True
        self._schedule_pass()

    def _schedule_pass(self) -> None:
        if self._delivery_scheduled or self.deleted:
            return
        self._delivery_scheduled = True
        self.owner.call_soon(self._deliver_pass)

    def _deliver_pass(self) -> None:
        self._delivery_scheduled = False
        self.deliver_now()

    def deliver_now(self) -> None:
        """Hand waiting references to consumers with credit, round-robin."""
        if self._delivering or self.deleted or not self._count:
            if not self._count and not self.in_flight_count:
                self._avoiding = False
            return
        groups = self.groups
        if groups is not None and groups.paused and not groups.may_dispatch(self.in_flight_count):
            return  # group-rebalance-pause-dispatch: the last settlement wakes the queue
        self._delivering = True
        try:
            exclusive = self._exclusive
            if exclusive is not None:
                # one consumer may take each ref: the scanning path asks for it per ref
                if not exclusive.blocked():
                    self._deliver_with_selectors()
            elif self._avoiding or any(c.filter is not None for c in self.consumers):
                self._deliver_with_selectors()
            else:
                self._deliver_simple()
        finally:
            self._delivering = False
            if self._batch:
                self._end_batches()

    def _end_batches(self) -> None:
        batch, self._batch = self._batch, []
        for consumer in batch:
            consumer.in_batch = False
        for consumer in batch:
            consumer.end_batch()

    def _next_consumer(self, message: Message | None = None, avoid=None) -> Consumer | None:
        """The consumer to hand ``message`` to now: the exclusive holder (see
        :mod:`~junction.brokercore.exclusive`), else the next round-robin."""
        if self._exclusive is not None:
            return self._exclusive.choose(self._round_robin, message, avoid)
        return self._round_robin(message, avoid)

    def _round_robin(self, message: Message | None = None, avoid=None) -> Consumer | None:
        """The next consumer with credit (that accepts ``message``), round-robin among
        those of the highest consumer priority that can take it (Artemis's rule: a
        lower-priority consumer gets messages only while no higher one has credit)."""
        consumers = self.consumers
        n = len(consumers)
        prioritised = self._prioritised
        best = None
        best_index = 0
        for i in range(n):
            index = (self._rr + i) % n
            consumer = consumers[index]
            if consumer.has_credit() and (message is None or consumer.accepts(message)):
                if avoid is not None and consumer.id in avoid:
                    continue
                if best is None or consumer.priority > best.priority:
                    best, best_index = consumer, index
                if not prioritised:
                    break
        if best is not None:
            self._rr = best_index + 1
        return best

    def _deliver_simple(self) -> None:
        now = self.owner.now_ms()
        consumers = self.consumers
        groups = self.groups
        lanes = self._lanes
        while self._count:
            for lane in reversed(lanes):  # the head: the highest priority lane's first
                if lane:
                    break
            ref = lane[0]
            if groups is not None:
                group = group_id_of(ref.message)
                if group is not None:
                    # grouped: its owner or, for a new group, the round robin's consumer
                    owner = groups.owner(group)
                    if owner is not None and not owner.has_credit():
                        return  # the head-of-line rule (see message_groups)
                    if not self._deliver_grouped(lane, ref, group, owner, now):
                        return
                    continue
            if len(consumers) == 1:
                # _round_robin() for the usual single consumer
                consumer = consumers[0]
                if not consumer.has_credit():
                    return
                self._rr = 1
            else:
                consumer = self._round_robin()  # not exclusive: deliver_now chose this path
                if consumer is None:
                    return
            lane.popleft()
            self._count -= 1
            expiration = ref.message.expiration
            if expiration and expiration <= now:
                self._expire(ref)
                continue
            # _hand_over(ref, consumer), inlined
            ref.delivery_count += 1
            ref.consumer = consumer
            if consumer.credit_messages is not None:
                consumer.credit_messages -= 1
            if consumer.credit_bytes is not None:
                consumer.credit_bytes -= ref.size
            consumer.in_flight[id(ref)] = ref
            consumer.delivered_total += 1
            self.in_flight_count += 1
            if consumer.end_batch is not None and not consumer.in_batch:
                consumer.in_batch = True
                self._batch.append(consumer)
            consumer.deliver(ref)

    def _deliver_grouped(self, lane, ref: MessageRef, group: str, owner, now: int) -> bool:
        """Hand the head reference ``ref`` of ``lane``, of ``group``, to ``owner`` (which has
        credit) or, with no owner, to the round robin's consumer; False when there is none."""
        rr = self._rr
        consumer = owner if owner is not None else self._next_consumer()
        if consumer is None:
            return False
        del lane[0]
        self._count -= 1
        if ref.message.expiration and ref.message.expiration <= now:
            self._expire(ref)
            return True
        self._hand_grouped(ref, consumer, group, owner, rr)
        return True

    def _hand_grouped(self, ref: MessageRef, consumer: Consumer, group: str, owner, rr: int) -> None:
        """Hand over a reference of ``group`` and update the group's owner (``owner`` was its
        owner before; ``rr`` the round robin's position before a consumer was picked)."""
        groups = self.groups
        pinned = groups.handed_over(group, ref.message, consumer, owner)
        if not pinned:
            self._rr = rr  # the round robin stays (Artemis's consumers.repeat())
        if pinned and groups.first_key is not None:
            ref.group_first = True
        key = groups.first_key if ref.group_first else None
        if key is None:
            self._hand_over(ref, consumer)
            return
        # group-first-key: on this delivery only; every protocol reads ref.message as it is
        # handed the reference, so the flagged copy is in place just for that call
        stored = ref.message
        ref.message = with_first_key(stored, key)
        try:
            self._hand_over(ref, consumer)
        finally:
            ref.message = stored

    def _deliver_with_selectors(self) -> None:
        now = self.owner.now_ms()
        scanned = 0
        # A pass that stops at the scan limit goes on where it stopped on the
        # next reactor turn; restarting at the head every time would never
        # reach a wanted message behind MAX_SELECTOR_SCAN unwanted ones.  What
        # changes meanwhile (deliver_soon sets _rescan) gets a full pass after.
        cursor = self._scan_cursor
        self._scan_cursor = None
        if cursor is None:
            self._rescan = False
            start_lane, start_index = len(self._lanes) - 1, 0
        else:
            start_lane, start_index = cursor
        for lane_no in range(start_lane, -1, -1):
            lane = self._lanes[lane_no]
            index = start_index if lane_no == start_lane else 0
            while index < len(lane):
                if scanned >= MAX_SELECTOR_SCAN:
                    if self._delivery_scheduled:
                        self._rescan = True  # asked for during this pass
                    self._scan_cursor = (lane_no, index)
                    self._schedule_pass()
                    return
                if not self._can_take():
                    return  # credit coming back schedules a full pass
                ref = lane[index]
                scanned += 1
                if ref.message.expiration and ref.message.expiration <= now:
                    del lane[index]
                    self._count -= 1
                    self._expire(ref)
                    continue
                group = None if self.groups is None or self._exclusive is not None else group_id_of(ref.message)
                if group is not None:
                    owner = self.groups.owner(group)
                    if owner is not None:
                        if not owner.has_credit():
                            return  # the head-of-line rule (see message_groups)
                        if not owner.accepts(ref.message) or (ref.avoid is not None and owner.id in ref.avoid):
                            index += 1  # the owner does not want it: it waits
                            continue
                    rr = self._rr
                    consumer = owner if owner is not None else self._next_consumer(ref.message, ref.avoid)
                    if consumer is None:
                        index += 1
                        continue
                    del lane[index]
                    self._count -= 1
                    self._hand_grouped(ref, consumer, group, owner, rr)
                    continue
                consumer = self._next_consumer(ref.message, ref.avoid)
                if consumer is None:
                    index += 1
                    continue
                del lane[index]
                self._count -= 1
                self._hand_over(ref, consumer)
        if cursor is not None and self._rescan:
            self._rescan = False
            self._schedule_pass()

    def _can_take(self) -> bool:
        """Some consumer the queue may hand a reference to has credit."""
        if self._exclusive is not None and self._exclusive.holder is not None:
            return self._exclusive.holder.has_credit()
        return any(c.has_credit() for c in self.consumers)

    def _hand_over(self, ref: MessageRef, consumer: Consumer) -> None:
        ref.delivery_count += 1
        ref.consumer = consumer
        consumer.take_credit(ref)
        consumer.in_flight[id(ref)] = ref
        consumer.delivered_total += 1
        self.in_flight_count += 1
        if consumer.end_batch is not None and not consumer.in_batch:
            consumer.in_batch = True
            self._batch.append(consumer)
        consumer.deliver(ref)

    # -- settlement -------------------------------------------------------------
    def acknowledge(self, ref: MessageRef, tx=None):
        """The consumer is done with the reference: it leaves the queue.

        With ``tx`` (a storage transaction) the journal records of the ack are
        part of that transaction.  Returns the storage Deferred of a
        persisted ack (fires once the ack record reached the OS), else None.
        """
        consumer = ref.consumer
        if consumer is not None and consumer.in_flight.pop(id(ref), None) is not None:
            self.in_flight_count -= 1
        ref.consumer = None
        self.messages_acknowledged += 1
        if self.groups is not None and self.groups.paused and not self.in_flight_count:
            self.deliver_soon()  # the rebalance pause ends (see message_groups)
        stored = self.owner.acknowledge_ref(ref, tx)
        if not (self._count + self.in_flight_count + self.scheduled_count):  # message_count
            self.owner.queue_emptied(self)
        return stored

    def cancel(self, ref: MessageRef, *, redelivered: bool = True, delay: bool = True) -> None:
        """The consumer gives the reference back (NACK, release, rollback)."""
        consumer = ref.consumer
        if consumer is not None and consumer.in_flight.pop(id(ref), None) is not None:
            self.in_flight_count -= 1
        ref.consumer = None
        self._return(ref, redelivered=redelivered, delay=delay)

    def avoid(self, ref: MessageRef, consumer: Consumer) -> None:
        """Never hand ``ref`` to ``consumer`` again (AMQP undeliverable-here).

        The ref waits for another consumer; queues holding such refs take the
        scanning delivery path, which can skip a consumer per ref.
        """
        if ref.avoid is None:
            ref.avoid = set()
        ref.avoid.add(consumer.id)
        self._avoiding = True

    def reject(self, ref: MessageRef) -> None:
        """The consumer refuses the ref for good: dead-letter it (AMQP rejected)."""
        consumer = ref.consumer
        if consumer is not None and consumer.in_flight.pop(id(ref), None) is not None:
            self.in_flight_count -= 1
        ref.consumer = None
        self.messages_killed += 1
        if self.groups is not None and self.groups.paused and not self.in_flight_count:
            self.deliver_soon()  # the rebalance pause ends (see message_groups)
        self.owner.dead_letter(ref, "rejected by the consumer")
        if not self.message_count:
            self.owner.queue_emptied(self)

    def _return(self, ref: MessageRef, *, redelivered: bool, delay: bool) -> None:
        if not redelivered:
            ref.delivery_count = max(0, ref.delivery_count - 1)
        settings = self.owner.queue_settings(self)
        if redelivered and settings.max_delivery_attempts >= 0 and ref.delivery_count >= settings.max_delivery_attempts:
            self.messages_killed += 1
            self.owner.dead_letter(ref, "max-delivery-attempts")
            if not self.message_count:
                self.owner.queue_emptied(self)
            return
        if redelivered:
            self.owner.update_delivery_count(ref)
        wait = _redelivery_delay(settings, ref.delivery_count) if (redelivered and delay) else 0
        if wait > 0:
            self.scheduled_count += 1

            def back():
                self.scheduled_count -= 1
                if self.deleted:
                    # The queue went meanwhile: release the ref as its drained
                    # siblings were, or the address keeps counting it forever.
                    self.owner.acknowledge_ref(ref)
                else:
                    self.add_head(ref)

            self.owner.schedule(wait / 1000.0, back)
        else:
            self.add_head(ref)

    def expire_delivered(self, ref: MessageRef) -> None:
        """A consumer found a delivered reference expired: expire it now."""
        consumer = ref.consumer
        if consumer is not None and consumer.in_flight.pop(id(ref), None) is not None:
            self.in_flight_count -= 1
        ref.consumer = None
        if self.groups is not None and self.groups.paused and not self.in_flight_count:
            self.deliver_soon()  # the rebalance pause ends (see message_groups)
        self._expire(ref)
        if not self.message_count:
            self.owner.queue_emptied(self)

    def _expire(self, ref: MessageRef) -> None:
        self.messages_expired += 1
        self.owner.expire(ref)

    # -- housekeeping -----------------------------------------------------------
    def expire_scan(self) -> int:
        """Move every expired waiting reference to the expiry address."""
        now = self.owner.now_ms()
        expired = 0
        for lane in self._lanes:
            keep = deque()
            while lane:
                ref = lane.popleft()
                if ref.message.expiration and ref.message.expiration <= now:
                    self._count -= 1
                    self._expire(ref)
                    expired += 1
                else:
                    keep.append(ref)
            lane.extend(keep)
        if expired and not self.message_count:
            self.owner.queue_emptied(self)  # an auto-created queue may go now
        return expired

    def drain(self) -> list[MessageRef]:
        """Remove and return every waiting reference, and those held for their
        scheduled time (purge, delete)."""
        refs = [] if self._scheduled is None else self._scheduled.drain()
        for lane in self._lanes:
            refs.extend(lane)
            lane.clear()
        self._count = 0
        return refs

    def waiting(self):
        """Iterate over waiting references, highest priority first (browse)."""
        for lane in reversed(self._lanes):
            yield from lane


def _lane(priority: int) -> int:
    if priority < 0:
        return 0
    if priority > 9:
        return 9
    return priority


def _redelivery_delay(settings, delivery_count: int) -> float:
    """Artemis's redelivery delay in ms: base * multiplier^(n-1), capped."""
    base = settings.redelivery_delay
    if base <= 0:
        return 0
    delay = base * (settings.redelivery_delay_multiplier ** max(0, delivery_count - 1))
    cap = settings.max_redelivery_delay
    if cap is None:
        cap = base * 10
    return min(delay, cap)


@dataclass
class QueueStats:
    """A snapshot for management (see docs/management.md)."""

    name: str
    address: str
    routing_type: str
    durable: bool
    message_count: int
    consumer_count: int
    messages_added: int
    messages_acknowledged: int
    messages_expired: int
    messages_killed: int
    delivering: int
    filter: str | None = None
    temporary: bool = False
    extra: dict = field(default_factory=dict)
