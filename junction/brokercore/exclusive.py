"""Exclusive dispatch: one consumer of a queue gets all of its messages while it lives.

Two ways make a queue exclusive, and both end the same way -- a *holder*, the
one consumer the queue may hand references to:

* the queue's ``exclusive`` attribute (Artemis's exclusive queues: ``<queue
  exclusive="true">`` in ``broker.xml``, the address setting
  ``default-exclusive-queue``, CORE's CREATE_QUEUE): the holder is the first
  consumer the queue chooses as it would without exclusivity (round-robin
  among the highest consumer priority with credit), kept until it leaves
  (Artemis's ``QueueImpl.exclusiveConsumer``);
* an exclusive consumer (ActiveMQ Classic's ``consumer.exclusive=true``, an
  OpenWire ConsumerInfo's ``exclusive``): while any consumer of the queue asks
  for exclusivity, the holder is the one of those with the highest consumer
  priority, the first to come among equals (Classic's ``Queue.addSubscription``
  and ``QueueDispatchSelector``).  A later exclusive consumer takes over only
  with a higher priority.

While there is a holder, a reference it cannot take now (no credit, its
selector does not match, it must avoid it) waits for it: no other consumer
gets it, as on Artemis and Classic.  When the holder leaves, what it had in
flight is back at the head of the queue (:meth:`Queue.remove_consumer
<junction.brokercore.queue.Queue.remove_consumer>`) and the next holder is
chosen by the same rule; with no exclusive consumer left on a queue that is
not exclusive itself, the consumers share the queue again.

A queue keeps an :class:`ExclusiveDispatch` only while it is needed (its
attribute, or an exclusive consumer attached), so a queue without either
dispatches as before.
"""

from __future__ import annotations

__all__ = ["ExclusiveDispatch"]


class ExclusiveDispatch:
    """Who a queue's references go to while it is exclusive (see the module doc)."""

    __slots__ = ("queue_exclusive", "holder")

    def __init__(self, queue_exclusive: bool) -> None:
        #: the queue's own ``exclusive`` attribute
        self.queue_exclusive = queue_exclusive
        #: the consumer every reference goes to, or None (not chosen yet, or none wants it)
        self.holder = None

    def needed(self, consumers) -> bool:
        """Whether the queue must keep this dispatch (else it drops it)."""
        return self.queue_exclusive or any(c.exclusive for c in consumers)

    def consumer_added(self, consumer) -> None:
        """An exclusive consumer becomes the holder if there is none, or if its priority is higher."""
        if not consumer.exclusive:
            return
        holder = self.holder
        if holder is None or not holder.exclusive or consumer.priority > holder.priority:
            self.holder = consumer

    def consumer_removed(self, consumer, consumers) -> None:
        """The holder left: the next is the exclusive consumer of the highest priority, first among
        equals; else none (an exclusive queue then chooses again at its next delivery)."""
        if consumer is not self.holder:
            return
        best = None
        for candidate in consumers:
            if candidate.exclusive and (best is None or candidate.priority > best.priority):
                best = candidate
        self.holder = best

    def choose(self, round_robin, message, avoid):
        """The consumer to hand ``message`` to now, or None (it waits).

        ``round_robin(message, avoid)`` is the queue's choice without exclusivity; an exclusive
        queue with no holder takes it and makes it the holder.
        """
        holder = self.holder
        if holder is None:
            consumer = round_robin(message, avoid)
            if consumer is not None and self.queue_exclusive:
                self.holder = consumer
            return consumer
        if not holder.has_credit():
            return None
        if message is not None and not holder.accepts(message):
            return None
        if avoid is not None and holder.id in avoid:
            return None
        return holder

    def blocked(self) -> bool:
        """The holder can take nothing now: a delivery pass has nothing to do."""
        holder = self.holder
        return holder is not None and not holder.has_credit()
