"""The broker core's message events: what it tells the event log about messages.

:class:`MessageEvents` turns the core's objects (messages, references,
sessions) into the fields of :mod:`junction.events.schema`, so the rest of
the core calls one method per happening.  The server's ``message_events``
is one, or None when message events are off (or there is no event log), so
the hot paths pay one attribute test.  Connection and link events go through
:class:`junction.events.node.NodeEvents` (the server's ``events``).

A message's ``message_id`` in the events is its *trace id*,
``<node id>/<n>``: the id of the node that first accepted it and that
node's number for it.  It travels with the message in
:attr:`Message.native` (:data:`TRACE_NATIVE`) wherever the message leaves
its first node (forwarded over a cluster link, redistributed, scaled down,
paged, dead-lettered), so every node's events name it alike and the audit
can follow it across the cluster.
"""

from __future__ import annotations

from bisect import bisect_right

from junction.brokercore.message import (
    DUPLICATE_ID,
    GROUP_ID,
    GROUP_ID_JMS,
    GROUP_SEQUENCE,
    RoutingType,
    plain,
)
from junction.events.sink import ACKNOWLEDGED, DELIVERED, DELIVERED_AND_ACKNOWLEDGED, SENT

__all__ = ["TRACE_NATIVE", "MessageEvents", "trace_of", "carry_trace", "put_after"]

#: Message.native key: the message's trace id (bytes), set when it leaves its first node
TRACE_NATIVE = "junction.trace"
#: queues of the cluster's store-and-forward kind are not named as a message's queues
_SF_PREFIX = "$.junction.sf."


def _text(raw) -> str:
    """A carried trace id or duplicate id as text."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return bytes(raw).decode("utf-8", "replace")
    return str(raw)


def trace_of(message, node_id: str) -> str:
    """The message's trace id: carried in from its first node, else this node's."""
    raw = message.native.get(TRACE_NATIVE)
    if raw is not None:
        return _text(raw)
    return f"{node_id}/{message.message_id}"


def carry_trace(message, node_id: str) -> None:
    """Write the trace id into the message itself, before it leaves this node (or its number)."""
    if TRACE_NATIVE not in message.native:
        message.native[TRACE_NATIVE] = f"{node_id}/{message.message_id}".encode()


def put_after(result, put, entry):
    """A Deferred callback: ``put(entry)`` once the producer may be told (result unchanged)."""
    put(entry)
    return result


def _group_seq(value):
    """A ``JMSXGroupSeq`` property value as an int, or None."""
    try:
        return int(plain(value))
    except (TypeError, ValueError):
        return None


def _dup_text(message):
    """The message's duplicate id as text, or None (without the property's bytes round trip)."""
    props = message.properties
    dup = props.get(DUPLICATE_ID) if props else None
    return None if dup is None else _text(plain(dup))


_ROUTING_TYPE_NAMES = {t: t.name for t in RoutingType}


class MessageEvents:
    """Message events of one node (only built when message events are on).

    The broker core calls these on its hot paths (a sent and a delivery
    entry per message), so each builds one flat tuple, a compact entry of
    :data:`junction.events.sink.LAYOUTS`, with as little work as it can: the
    message's own values as they are (its number, not its trace id text; one
    queue's name, not a tuple of one; the clock's seconds), and the context
    tuple of its producer's session or its consumer, made on first use and
    kept there (``event_context``), so that what every entry of a session or
    consumer shares is found once.  The event writer process makes the
    event's fields from that.  The entry goes straight onto the event log's
    queue while it has room (what :meth:`EventLog.put_entry
    <junction.events.writer.EventLog.put_entry>` does, without the call).
    The values are str, int, float, bool, None or tuples of those, so the
    garbage collector untracks the entry soon (see
    :mod:`junction.events.writer`).
    """

    def __init__(self, log, node_id: str, storage=None):
        self.log = log
        self.node_id = node_id
        self._sampled = log.sampled
        self._all = log.sample_rate >= 1.0
        self._clock = log.clock
        self._queue = log.queue
        self.put = log.put_entry
        #: sends waiting for their journal record (see :meth:`put_when_stored`): the storage's
        #: mark after each one's record, and its entry; as long as the journal's own backlog
        self._stored = None
        self._waiting_marks: list = []
        self._waiting_entries: list = []
        self._waiting_from = 0  # the first still waiting (the lists are cut when half is done)
        if storage is not None and hasattr(storage, "when_stored"):
            self._stored = storage.when_stored(self._stored_up_to)

    def put_when_stored(self, entry, confirmed) -> None:
        """Queue a send's entry once ``confirmed``, its record's Deferred from the
        storage, has fired with success (never, if it fails).  With a storage that tells
        when everything up to a mark is stored, the entry waits for that (once per
        written batch) rather than for a callback of its own."""
        stored = self._stored
        if stored is None or confirmed.called:
            confirmed.addCallback(put_after, self.put, entry)
            return
        self._waiting_marks.append(stored.records_submitted)
        self._waiting_entries.append(entry)

    def _stored_up_to(self, marker) -> None:
        """The storage has stored everything up to ``marker`` (None: it failed, and the
        sends waiting will never be confirmed).  The marks only grow, so the entries to
        queue are a run found by bisection and moved in one step."""
        marks = self._waiting_marks
        entries = self._waiting_entries
        if marker is None:
            marks.clear()
            entries.clear()
            self._waiting_from = 0
            return
        start = self._waiting_from
        end = bisect_right(marks, marker, start)
        if end == start:
            return
        queue = self._queue
        if len(queue) + (end - start) <= self.log.room:
            queue.extend(entries[start:end])
        else:
            for entry in entries[start:end]:
                self.put(entry)  # queued while there is room, the rest counted as dropped there
        if end == len(marks):
            marks.clear()
            entries.clear()
            end = 0
        elif end > len(marks) // 2:
            del marks[:end]
            del entries[:end]
            end = 0
        self._waiting_from = end

    @property
    def waiting(self) -> int:
        """Sends whose entries wait for their journal record."""
        return len(self._waiting_entries) - self._waiting_from

    def _trace(self, message):
        """The trace id, or None when sampling leaves this message out."""
        trace = trace_of(message, self.node_id)
        if self._all or self._sampled(trace):
            return trace
        return None

    @staticmethod
    def _producer_context(session) -> tuple:
        """``(conn, user, client_id)`` of a producer's session, made once."""
        context = session.event_context
        if context is None:
            connection = session.connection
            if connection is None:
                context = (None, session.user, None)
            else:
                context = (str(connection.id), session.user, connection.client_id)
            session.event_context = context
        return context

    @staticmethod
    def _consumer_context(ref, consumer, session) -> tuple:
        """``(queue, consumer, conn, user, client_id)`` of a delivery, made once per consumer
        (``consumer`` is the session's ServerConsumer, or None when the ack names none)."""
        if consumer is not None:
            context = consumer.event_context
            if context is not None:
                return context
        connection = session.connection
        context = (
            ref.queue.name,
            None if consumer is None else str(consumer.id),
            None if connection is None else str(connection.id),
            session.user,
            None if connection is None else connection.client_id,
        )
        if consumer is not None:
            consumer.event_context = context
        return context

    def sent_entry(self, message, queues, session):
        """The ``message.sent`` entry of a message routed now, stamped now (None when
        sampling leaves it out), to :meth:`put` once the producer may be told it is safe."""
        carried = message.native.get(TRACE_NATIVE)
        if carried is not None:
            carried = _text(carried)
        if not self._all and self._trace(message) is None:
            return None
        props = message.properties
        dup = group = seq = None
        if props:
            dup = props.get(DUPLICATE_ID)
            if dup is not None:
                dup = _text(plain(dup))
            group = props.get(GROUP_ID)
            if group is None:
                group = props.get(GROUP_ID_JMS)
            if group is not None:
                group = str(plain(group))
            seq = props.get(GROUP_SEQUENCE)
            if seq is not None:
                seq = _group_seq(seq)
        if len(queues) == 1:  # the common case: the name alone
            names = queues[0].name
            if names.startswith(_SF_PREFIX):
                names = ()
        else:
            names = tuple([q.name for q in queues if not q.name.startswith(_SF_PREFIX)])
        routing_type = message.routing_type
        context = session.event_context
        return (
            SENT,
            self._clock(),
            message.message_id,
            carried,
            dup,
            message.address,
            names,
            message.encoded_size(),
            message.durable,
            group,
            seq,
            None if routing_type is None else _ROUTING_TYPE_NAMES[routing_type],
            self._producer_context(session) if context is None else context,
        )

    def sent(self, message, queues, session) -> None:
        """``message.sent`` of a message the producer may be told is safe now."""
        entry = self.sent_entry(message, queues, session)
        if entry is not None:
            self.put(entry)

    def _delivery(self, kind: str, ref, consumer, session, with_count: bool) -> None:
        """A delivery's entry: ``kind``'s layout, with the delivery count or without."""
        message = ref.message
        carried = message.native.get(TRACE_NATIVE)
        if carried is not None:
            carried = _text(carried)
        if not self._all and self._trace(message) is None:
            return
        props = message.properties
        dup = props.get(DUPLICATE_ID) if props else None
        if dup is not None:
            dup = _text(plain(dup))
        context = None if consumer is None else consumer.event_context
        if context is None:
            context = self._consumer_context(ref, consumer, session)
        if with_count:
            entry = (kind, self._clock(), message.message_id, carried, dup, message.address, ref.delivery_count, context)
        else:
            entry = (kind, self._clock(), message.message_id, carried, dup, message.address, context)
        queue = self._queue
        if len(queue) < self.log.room:
            queue.append(entry)
        else:
            self.put(entry)  # counted as dropped there

    def delivered(self, ref, consumer, session) -> None:
        """``consumer``: the session's ServerConsumer that got the delivery."""
        self._delivery(DELIVERED, ref, consumer, session, True)

    def delivered_and_acknowledged(self, ref, consumer, session) -> None:
        """An auto-acknowledged delivery: ``delivered`` then ``acknowledged``, stamped alike,
        in one entry (:data:`~junction.events.sink.DELIVERED_AND_ACKNOWLEDGED`)."""
        self._delivery(DELIVERED_AND_ACKNOWLEDGED, ref, consumer, session, True)

    def acknowledged(self, ref, consumer, session) -> None:
        """``consumer``: the ServerConsumer that held the delivery, or None."""
        self._delivery(ACKNOWLEDGED, ref, consumer, session, False)

    def _entry(self, kind: str, *values) -> None:
        """The rarer kinds: one event, stamped now."""
        self.put((kind, self._clock() * 1000.0, *values))

    def forwarded(self, message, to_node: str) -> None:
        trace = self._trace(message)
        if trace is not None:
            self._entry(
                "message.forwarded", trace, _dup_text(message), message.address, to_node, message.encoded_size()
            )

    def redistributed(self, message, queue: str, to_node: str) -> None:
        trace = self._trace(message)
        if trace is not None:
            self._entry(
                "message.redistributed",
                trace,
                _dup_text(message),
                message.address,
                queue,
                to_node,
                message.encoded_size(),
            )

    def expired(self, ref) -> None:
        trace = self._trace(ref.message)
        if trace is not None:
            self._entry("message.expired", trace, _dup_text(ref.message), ref.message.address, ref.queue.name)

    def dead_lettered(self, ref, reason: str) -> None:
        trace = self._trace(ref.message)
        if trace is not None:
            self._entry(
                "message.dead_lettered", trace, _dup_text(ref.message), ref.message.address, ref.queue.name, reason
            )
