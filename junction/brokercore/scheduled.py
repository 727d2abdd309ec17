"""Scheduled delivery: a message that must not be delivered before a given time.

Artemis keeps the time in the message's ``_AMQ_SCHED_DELIVERY`` property (epoch
milliseconds; the JMS client sets it from ``deliveryDelay``, STOMP from the
``AMQ_SCHEDULED_DELAY``/``AMQ_SCHEDULED_TIME`` headers, AMQP from the
``x-opt-delivery-delay``/``x-opt-delivery-time`` annotations).  Every protocol
puts the time in that property, so it is persisted with the message and the
hold survives a restart: recovery puts the reference back through
:meth:`Queue.add <junction.brokercore.queue.Queue.add>`, which holds it again
until its time (or delivers it at once if the time has passed).

A queue keeps its held references in one :class:`ScheduledRefs`: a heap ordered
by (time, arrival), with one timer armed, by the broker's injected clock, for
the earliest.  Its bound is the queue's own: a held reference is a message on
the queue (counted in ``scheduled_count``, so in the address's size and
``message_count``), and the address's ``max-size-bytes`` limits those.
"""

from __future__ import annotations

import heapq
import itertools

from junction.model.message import plain

__all__ = ["SCHEDULED_DELIVERY", "ScheduledRefs", "delivery_time"]

#: Artemis's scheduled-delivery property: epoch milliseconds (a long).
SCHEDULED_DELIVERY = "_AMQ_SCHED_DELIVERY"


def delivery_time(message) -> int:
    """The message's scheduled delivery time in epoch ms, or 0 when none is set."""
    properties = message.properties
    if not properties:
        return 0
    value = plain(properties.get(SCHEDULED_DELIVERY))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


class ScheduledRefs:
    """References of one queue held until their delivery time.

    ``queue`` gets each reference back through ``queue.add`` when it is due;
    ``owner`` is the queue's owner (``now_ms()``, ``schedule(delay_s, fn)``).
    """

    def __init__(self, queue, owner):
        self.queue = queue
        self.owner = owner
        self._heap: list = []
        self._order = itertools.count()
        self._timer = None
        self._timer_at = 0

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, ref, at_ms: int) -> None:
        heapq.heappush(self._heap, (at_ms, next(self._order), ref))
        self._arm()

    def _arm(self) -> None:
        if not self._heap:
            return
        at = self._heap[0][0]
        timer = self._timer
        if timer is not None:
            if self._timer_at <= at and timer.active():
                return
            if timer.active():
                timer.cancel()
        self._timer_at = at
        self._timer = self.owner.schedule(max(0.0, (at - self.owner.now_ms()) / 1000.0), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.owner.now_ms()
        heap = self._heap
        queue = self.queue
        while heap and heap[0][0] <= now:
            _, _, ref = heapq.heappop(heap)
            queue.scheduled_count -= 1
            queue.add(ref)
        self._arm()

    def drain(self) -> list:
        """Take every held reference out (purge, delete), in delivery-time order."""
        refs = [entry[2] for entry in sorted(self._heap)]
        self._heap.clear()
        self.queue.scheduled_count -= len(refs)
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        return refs
