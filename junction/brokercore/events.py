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

from junction.brokercore.message import GROUP_SEQUENCE, plain
from junction.events.schema import KINDS

__all__ = ["TRACE_NATIVE", "MessageEvents", "trace_of", "carry_trace"]

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


def _dup(message):
    dup = message.duplicate_id
    return None if dup is None else _text(dup)


def _group_seq(message):
    value = message.properties.get(GROUP_SEQUENCE)
    if value is None:
        return None
    try:
        return int(plain(value))
    except (TypeError, ValueError):
        return None


#: the fields of each kind in the order :meth:`MessageEvents` builds them (the schema's order,
#: checked when one is made: see ``_put``)
_ORDER = {
    "message.sent": (
        "message_id", "duplicate_id", "address", "queues", "size", "durable", "group_id",
        "group_seq", "conn", "user", "client_id", "routing_type",
    ),
    "message.forwarded": ("message_id", "duplicate_id", "address", "to_node", "size"),
    "message.redistributed": ("message_id", "duplicate_id", "address", "queue", "to_node", "size"),
    "message.delivered": (
        "message_id", "duplicate_id", "address", "queue", "consumer", "conn", "delivery_count", "user", "client_id",
    ),
    "message.acknowledged": ("message_id", "duplicate_id", "address", "queue", "consumer", "conn", "user", "client_id"),
    "message.expired": ("message_id", "duplicate_id", "address", "queue"),
    "message.dead_lettered": ("message_id", "duplicate_id", "address", "queue", "reason"),
}


class MessageEvents:
    """Message events of one node (only built when message events are on).

    The broker core calls these on its hot paths (three per message), so each
    builds one flat tuple, ``(kind, ts, value, ...)`` with the values in the
    schema's field order, and hands it to
    :meth:`junction.events.writer.EventLog.put_entry`: no keyword dict, no
    category test (the category is on, or this object would not exist).  The
    values are str, int, bool, None or tuples of str only (``queues`` is a
    tuple, not a list), so the garbage collector untracks the entry soon
    (see :mod:`junction.events.writer`).
    """

    def __init__(self, log, node_id: str):
        self.log = log
        self.node_id = node_id
        self._sampled = log.sampled
        self._all = log.sample_rate >= 1.0
        self._clock = log.clock
        if all(KINDS.get(kind) == names for kind, names in _ORDER.items()):
            self._put = log.put_entry
        else:  # the schema changed under this module: name the fields (emit checks them)
            self._put = self._put_by_name

    def _put_by_name(self, entry: tuple) -> None:
        self.log.emit(entry[0], **dict(zip(_ORDER[entry[0]], entry[2:], strict=True)))

    def _trace(self, message):
        """The trace id, or None when sampling leaves this message out."""
        raw = message.native.get(TRACE_NATIVE)
        trace = f"{self.node_id}/{message.message_id}" if raw is None else _text(raw)
        if self._all or self._sampled(trace):
            return trace
        return None

    def sent(self, message, queues, connection, user) -> None:
        trace = self._trace(message)
        if trace is None:
            return
        dup = message.duplicate_id
        routing_type = message.routing_type
        if len(queues) == 1:  # the common case, without a list
            name = queues[0].name
            names = () if name.startswith(_SF_PREFIX) else (name,)
        else:
            names = tuple([q.name for q in queues if not q.name.startswith(_SF_PREFIX)])
        self._put(
            (
                "message.sent",
                self._clock() * 1000.0,
                trace,
                None if dup is None else _text(dup),
                message.address,
                names,
                message.encoded_size(),
                message.durable,
                message.group_id,
                _group_seq(message) if message.properties else None,
                None if connection is None else str(connection.id),
                user,
                None if connection is None else connection.client_id,
                None if routing_type is None else routing_type.name,
            )
        )

    def _delivery(self, ref, consumer_id, session):
        """What a delivery's events share: trace, duplicate id, address, queue, consumer,
        conn, user and client id; None when sampling leaves the message out."""
        message = ref.message
        trace = self._trace(message)
        if trace is None:
            return None
        dup = message.duplicate_id
        connection = session.connection
        return (
            trace,
            None if dup is None else _text(dup),
            message.address,
            ref.queue.name,
            None if consumer_id is None else str(consumer_id),
            str(connection.id),
            session.user,
            connection.client_id,
        )

    def delivered(self, ref, consumer_id, session) -> None:
        shared = self._delivery(ref, consumer_id, session)
        if shared is not None:
            trace, dup, address, queue, consumer, conn, user, client_id = shared
            self._put(
                ("message.delivered", self._clock() * 1000.0, trace, dup, address, queue, consumer, conn,
                 ref.delivery_count, user, client_id)
            )

    def delivered_and_acknowledged(self, ref, consumer_id, session) -> None:
        """An auto-acknowledged delivery: ``delivered`` then ``acknowledged``, stamped alike,
        their common values found once."""
        shared = self._delivery(ref, consumer_id, session)
        if shared is not None:
            trace, dup, address, queue, consumer, conn, user, client_id = shared
            ts = self._clock() * 1000.0
            self._put(
                ("message.delivered", ts, trace, dup, address, queue, consumer, conn, ref.delivery_count, user,
                 client_id)
            )
            self._put(("message.acknowledged", ts, *shared))

    def acknowledged(self, ref, consumer_id, session) -> None:
        shared = self._delivery(ref, consumer_id, session)
        if shared is not None:
            self._put(("message.acknowledged", self._clock() * 1000.0, *shared))

    def _entry(self, kind: str, *values) -> None:
        """The rarer kinds: one event, stamped now."""
        self._put((kind, self._clock() * 1000.0, *values))

    def forwarded(self, message, to_node: str) -> None:
        trace = self._trace(message)
        if trace is not None:
            self._entry(
                "message.forwarded", trace, _dup(message), message.address, to_node, message.encoded_size()
            )

    def redistributed(self, message, queue: str, to_node: str) -> None:
        trace = self._trace(message)
        if trace is not None:
            self._entry(
                "message.redistributed",
                trace,
                _dup(message),
                message.address,
                queue,
                to_node,
                message.encoded_size(),
            )

    def expired(self, ref) -> None:
        trace = self._trace(ref.message)
        if trace is not None:
            self._entry("message.expired", trace, _dup(ref.message), ref.message.address, ref.queue.name)

    def dead_lettered(self, ref, reason: str) -> None:
        trace = self._trace(ref.message)
        if trace is not None:
            self._entry(
                "message.dead_lettered", trace, _dup(ref.message), ref.message.address, ref.queue.name, reason
            )
