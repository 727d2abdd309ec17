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

import struct
from bisect import bisect_right

from junction.events.sink import (
    ACKNOWLEDGED,
    DELIVERED,
    DELIVERED_AND_ACKNOWLEDGED,
    ROW,
    SENT,
)
from junction.model.message import (
    DUPLICATE_ID,
    GROUP_ID,
    GROUP_ID_JMS,
    GROUP_SEQUENCE,
    RoutingType,
    plain,
)

__all__ = ["TRACE_NATIVE", "MessageEvents", "trace_of", "carry_trace", "put_after"]

#: Message.native key: the message's trace id (bytes), set when it leaves its first node
TRACE_NATIVE = "junction.trace"
#: queues of the cluster's store-and-forward kind are not named as a message's queues
_SF_PREFIX = "$.junction.sf."
#: row codes (statics) one node keeps, at most: beyond, the table starts again (see
#: :meth:`MessageEvents._new_code`)
MAX_ROW_CODES = 20_000


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
    entry per message), so each does as little as it can.  A message without
    a carried trace id, duplicate id or group (most) makes a *row*
    (:data:`junction.events.sink.ROW`): the clock's seconds, the message's
    number, its size or delivery count, and a code standing for the rest,
    the *static* ``(kind, address, ..., context)``, found in one dictionary
    (:meth:`_new_code` makes a code the first time).  The context tuple of the
    producer's session or the consumer is made on first use and kept there
    (``event_context``).  Other messages make a flat tuple, a compact entry of
    :data:`junction.events.sink.LAYOUTS`, with the message's own values as they
    are (its number and carried trace id, one queue's name, the clock's
    seconds).  The event writer process makes the event's fields from either.
    Rows go straight onto the event log's bounded ``rows`` while it has room;
    entries through :meth:`EventLog.put_entry
    <junction.events.writer.EventLog.put_entry>`.
    """

    def __init__(self, log, node_id: str, storage=None):
        self.log = log
        self.node_id = node_id
        self._sampled = log.sampled
        self._all = log.sample_rate >= 1.0
        self._clock = log.clock
        self._rows = log.rows
        self._pack = ROW.pack
        #: static -> its row code (the log's ``statics`` has the other direction)
        self._codes: dict = {}
        self._next_code = 0
        #: sends waiting for their journal record (see :meth:`put_when_stored`): the storage's
        #: mark after each one's record, and its row; as long as the journal's own backlog
        self._stored = None
        self._waiting_marks: list = []
        self._waiting_rows = bytearray()
        self._waiting_from = 0  # the first still waiting (the marks are cut when half done)
        if storage is not None and hasattr(storage, "when_stored"):
            self._stored = storage.when_stored(self._stored_up_to)

    def put(self, entry) -> None:
        """Queue what :meth:`sent_entry` made: a row, or an entry."""
        if entry.__class__ is bytes:
            rows = self._rows
            if len(rows) < self.log.row_room:
                rows += entry
            else:
                self.log.drop_rows(1)
        else:
            self.log.put_entry(entry)

    def put_when_stored(self, entry, confirmed) -> None:
        """Queue a send's entry once ``confirmed``, its record's Deferred from the
        storage, has fired with success (never, if it fails).  With a storage that tells
        when everything up to a mark is stored, a row waits for that (once per written
        batch) rather than for a callback of its own."""
        stored = self._stored
        if stored is None or confirmed.called or entry.__class__ is not bytes:
            confirmed.addCallback(put_after, self.put, entry)
            return
        self._waiting_marks.append(stored.records_submitted)
        self._waiting_rows += entry

    def _stored_up_to(self, marker) -> None:
        """The storage has stored everything up to ``marker`` (None: it failed, and the
        sends waiting will never be confirmed).  The marks only grow, so the rows to
        queue are a run found by bisection and moved in one step."""
        marks = self._waiting_marks
        waiting = self._waiting_rows
        if marker is None:
            marks.clear()
            del waiting[:]
            self._waiting_from = 0
            return
        start = self._waiting_from
        end = bisect_right(marks, marker, start)
        if end == start:
            return
        size = ROW.size
        rows = self._rows
        run = waiting[start * size : end * size]
        room = self.log.row_room - len(rows)
        if len(run) > room:  # what fits; the rest (sends: one event a row) counted as dropped
            fits = max(0, room // size) * size
            self.log.drop_rows((len(run) - fits) // size)
            del run[fits:]
        rows += run
        if end == len(marks):
            marks.clear()
            del waiting[:]
            end = 0
        elif end > len(marks) // 2:
            del marks[:end]
            del waiting[: end * size]
            end = 0
        self._waiting_from = end

    @property
    def waiting(self) -> int:
        """Sends whose entries wait for their journal record."""
        return len(self._waiting_marks) - self._waiting_from

    def _new_code(self, static: tuple) -> int:
        """A code for ``static``, put in the log's table before any row uses it.  Codes
        are never used twice in one log's life; the tables start again beyond
        :data:`MAX_ROW_CODES` (the log keeps the last one, ``previous_statics``, for rows
        queued under it)."""
        log = self.log
        if len(self._codes) >= MAX_ROW_CODES:
            log.code_tables = ({}, log.code_tables[0])
            self._codes = {}
        code = self._next_code
        self._next_code = code + 1
        log.code_tables[0][code] = static
        self._codes[static] = code
        return code

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
        sampling leaves it out), to :meth:`put` once the producer may be told it is safe:
        a row (:data:`~junction.events.sink.ROW`, bytes) when the message carries no trace
        id, duplicate id or group, else a compact entry."""
        carried = message.native.get(TRACE_NATIVE)
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
        if routing_type is not None:
            routing_type = _ROUTING_TYPE_NAMES[routing_type]
        context = session.event_context
        if context is None:
            context = self._producer_context(session)
        if carried is None and dup is None and group is None and seq is None:
            static = (SENT, message.address, names, message.durable, routing_type, context)
            code = self._codes.get(static)
            if code is None:
                code = self._new_code(static)
            try:
                return self._pack(code, self._clock(), message.message_id, message.encoded_size())
            except struct.error:  # a value a row cannot hold: an entry, below
                pass
        return (
            SENT,
            self._clock(),
            message.message_id,
            None if carried is None else _text(carried),
            dup,
            message.address,
            names,
            message.encoded_size(),
            message.durable,
            group,
            seq,
            routing_type,
            context,
        )

    def sent(self, message, queues, session) -> None:
        """``message.sent`` of a message the producer may be told is safe now."""
        entry = self.sent_entry(message, queues, session)
        if entry is not None:
            self.put(entry)

    def _delivery_method(kind: str, with_count: bool, doc: str):  # noqa: N805 - run in the class body
        """The method of one delivery event ``kind`` (its layout with the delivery count or
        without): a row, or an entry when the message carries a trace id or a duplicate id.
        One function per kind, so a delivery costs one call."""
        events = 2 if kind is DELIVERED_AND_ACKNOWLEDGED else 1

        def method(self, ref, consumer, session) -> None:
            message = ref.message
            carried = message.native.get(TRACE_NATIVE)
            if not self._all and self._trace(message) is None:
                return
            props = message.properties
            dup = props.get(DUPLICATE_ID) if props else None
            context = None if consumer is None else consumer.event_context
            if context is None:
                context = self._consumer_context(ref, consumer, session)
            if carried is None and dup is None:
                static = (kind, message.address, context)
                code = self._codes.get(static)
                if code is None:
                    code = self._new_code(static)
                try:
                    row = self._pack(code, self._clock(), message.message_id, ref.delivery_count if with_count else 0)
                except struct.error:  # a value a row cannot hold: an entry, below
                    row = None
                if row is not None:
                    rows = self._rows
                    if len(rows) < self.log.row_room:
                        rows += row
                    else:
                        self.log.drop_rows(events)
                    return
            if carried is not None:
                carried = _text(carried)
            if dup is not None:
                dup = _text(plain(dup))
            if with_count:
                entry = (kind, self._clock(), message.message_id, carried, dup, message.address, ref.delivery_count, context)
            else:
                entry = (kind, self._clock(), message.message_id, carried, dup, message.address, context)
            self.log.put_entry(entry)

        method.__doc__ = doc
        return method

    delivered = _delivery_method(DELIVERED, True, "``consumer``: the session's ServerConsumer that got the delivery.")
    delivered_and_acknowledged = _delivery_method(
        DELIVERED_AND_ACKNOWLEDGED,
        True,
        "An auto-acknowledged delivery: ``delivered`` then ``acknowledged``, stamped alike, in one "
        "entry (:data:`~junction.events.sink.DELIVERED_AND_ACKNOWLEDGED`).",
    )
    acknowledged = _delivery_method(ACKNOWLEDGED, False, "``consumer``: the ServerConsumer that held the delivery, or None.")
    del _delivery_method

    def restarted(self, recovered, queue_names: dict, *, persistent: bool, paged=()) -> None:
        """What a restart tells the audit, spooled at once (the log's ``write_now``: a
        journal may hold far more messages than the event queue): ``node.started``, then
        ``message.recovered`` for each message reference the journal held (back in its
        queue, with its delivery count), and ``message.settled`` for each reference the
        journal's newest records show settled (``recovered.settled``: acknowledged, expired,
        dead-lettered or moved before the restart, whose own events a crash may have lost).

        ``queue_names`` maps the recovered queues' ids to their names (a reference to a
        queue that no longer exists is left out); ``paged`` names the addresses whose page
        files hold messages (they are in no queue yet).  All are stamped alike, now."""
        now = self._clock() * 1000.0
        entries = []
        for item in recovered.messages:
            message = item.message
            trace = self._trace(message)
            if trace is None:
                continue
            dup = _dup_text(message)
            for queue_id, count in item.refs.items():
                name = queue_names.get(queue_id)
                if name is not None:
                    entries.append(("message.recovered", now, trace, dup, message.address, name, message.durable, count))
        references = len(entries)
        for message, queue_ids in recovered.settled:
            trace = self._trace(message)
            if trace is None:
                continue
            dup = _dup_text(message)
            for queue_id in queue_ids:
                name = queue_names.get(queue_id)
                if name is not None:
                    entries.append(("message.settled", now, trace, dup, message.address, name))
        started = (
            "node.started", now, references, len(entries) - references, persistent,
            sorted(queue_names.values()), sorted(paged),
        )
        self.log.write_now([started, *entries])

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
