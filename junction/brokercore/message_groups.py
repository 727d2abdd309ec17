"""Message groups of one queue, as Artemis's ``QueueImpl`` keeps them.

Messages with the same group id go to one consumer of the queue, in queue
order, until that consumer goes away or the group is closed.  This module is
the group state and its rules; :class:`~junction.brokercore.queue.Queue` asks
it, at each reference it is about to hand over, which consumer owns the
reference's group (:meth:`QueueGroups.owner`) and tells it where the reference
went (:meth:`QueueGroups.handed_over`).  It knows no protocol: each protocol's
conversion puts the group id and sequence where :func:`group_id_of` and
:func:`group_sequence_of` read them.

The rules (Artemis ``QueueImpl.deliver``/``handleMessageGroup``):

* a reference whose group has an owner is offered to that owner only; while
  the owner has no credit the queue's delivery pass stops there (the
  head-of-line rule: messages behind it wait, grouped or not, as in Artemis);
* a group without an owner takes the consumer the round robin reached, which
  becomes its owner;
* a message with group sequence -1 is delivered (to the owner, or round robin
  when there is none) and then closes the group: its next message picks an
  owner anew;
* a consumer that goes away frees its groups (its unacknowledged deliveries
  return to the queue and each group's next message picks a new owner);
* ``group-rebalance``: a consumer joining forgets every owner, so the groups
  spread again over all the consumers; with ``group-rebalance-pause-dispatch``
  the queue then dispatches nothing until no consumer holds an unacknowledged
  delivery, so two consumers never hold messages of one group at once;
* ``group-first-key``: the delivery that pins a group to a consumer carries the
  boolean property ``<key>=true`` (that delivery only: the stored message is
  untouched);
* ``group-buckets``: -1 (the default) keeps one owner per group id, unbounded
  (:class:`GroupTable`); ``n > 0`` keeps one owner per bucket of ids, at most
  ``n`` entries (:class:`BucketTable`, Artemis's hash); 0 turns grouping off
  (the queue then delivers grouped messages round robin, as ungrouped ones).

Junction's own internal queues (the cluster's store-and-forward queues, named
``$.junction.``) ignore group ids, as Artemis's internal queues do: their one
consumer is a bridge, and the table would only grow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

from junction.model.message import GROUP_ID, GROUP_ID_JMS, GROUP_SEQUENCE, Typed, plain

__all__ = [
    "BUCKET_INT_KEY",
    "GROUP_SEQUENCE_CORE",
    "BucketTable",
    "GroupSettings",
    "GroupTable",
    "QueueGroups",
    "bucket_of",
    "group_id_of",
    "group_sequence_of",
    "queue_groups",
    "resolve_group_settings",
    "simple_string_hash",
    "with_first_key",
]

#: A group id naming a bucket directly: ``_AMQ_GROUP_BUCKET_INT_KEY_<int>`` is bucket
#: ``<int> % n`` (Artemis's ``BucketMessageGroups``; the names management lists buckets by).
BUCKET_INT_KEY = "_AMQ_GROUP_BUCKET_INT_KEY_"
#: Where CORE (and OpenWire's conversion) carry the group sequence, a Java int.  AMQP's
#: ``group-sequence`` arrives as the int property ``JMSXGroupSeq`` (see :func:`group_sequence_of`).
GROUP_SEQUENCE_CORE = "_AMQ_GROUP_SEQUENCE"
#: The names of Junction's internal queues, which never group (see the module docstring).
INTERNAL_QUEUE_PREFIX = "$.junction."
#: ``Integer.parseInt``'s syntax
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


# -- where the group id and sequence are ------------------------------------------------------
def group_id_of(message) -> str | None:
    """The message's group id: ``_AMQ_GROUP_ID`` (CORE; STOMP's ``JMSXGroupID`` header and
    OpenWire's groupID are converted to it), else ``JMSXGroupID`` (AMQP's ``group-id`` and a
    ``JMSXGroupID`` application property); None when it has none."""
    properties = message.properties
    if not properties:
        return None
    value = properties.get(GROUP_ID)
    if value is None:
        value = properties.get(GROUP_ID_JMS)
        if value is None:
            return None
    return str(plain(value))


def group_sequence_of(message) -> int:
    """The message's group sequence as a Java int (0 when absent or unreadable).

    ``_AMQ_GROUP_SEQUENCE`` as CORE reads it (``getIntProperty``: a number, or a string
    ``Integer.parseInt`` takes); else the int property ``JMSXGroupSeq`` where the AMQP
    conversion keeps ``group-sequence`` (an unsigned int read as a Java int, so 4294967295 is
    -1).  A ``JMSXGroupSeq`` *string* (a STOMP header) is not a sequence, as in Artemis.
    """
    properties = message.properties
    if not properties:
        return 0
    value = properties.get(GROUP_SEQUENCE_CORE)
    if value is not None:
        value = plain(value)
        if isinstance(value, str):
            if not _JAVA_INT.match(value):
                return 0
            value = int(value)
            return value if _INT_MIN <= value <= _INT_MAX else 0
    else:
        value = properties.get(GROUP_SEQUENCE)
        if value is None or not (isinstance(value, int) or (isinstance(value, Typed) and value.kind == "int")):
            return 0
        value = plain(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value > _INT_MAX else value


def with_first_key(message, key: str):
    """A copy of ``message`` carrying ``<key>=true``: what the delivery that pins a group
    hands over (Artemis's ``GroupFirstMessageReference``); the stored message is untouched."""
    return replace(message, properties={**message.properties, key: True})


# -- Artemis's hash ------------------------------------------------------------------------------
def simple_string_hash(text: str) -> int:
    """Artemis's ``SimpleString.hashCode``: ``h = 31*h + b`` over the UTF-16LE bytes of
    ``text`` taken as *signed* bytes, as a Java int (not Java's ``String.hashCode``)."""
    h = 0
    for b in text.encode("utf-16-le", "surrogatepass"):
        h = (h * 31 + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h > _INT_MAX else h


def bucket_of(group_id: str, buckets: int) -> int:
    """The bucket of ``group_id`` among ``buckets``: ``(hash & 0x7FFFFFFF) % buckets``, where
    ``_AMQ_GROUP_BUCKET_INT_KEY_<int>`` hashes as the int itself (Java's ``Integer.hashCode``)."""
    key = simple_string_hash(group_id)
    if group_id.startswith(BUCKET_INT_KEY):
        text = group_id[len(BUCKET_INT_KEY):]
        if _JAVA_INT.match(text) and _INT_MIN <= int(text) <= _INT_MAX:
            key = int(text)
    return (key & 0x7FFFFFFF) % buckets


# -- the tables ------------------------------------------------------------------------------------
class GroupTable:
    """group id -> owning consumer, one entry per group (``group-buckets`` -1).

    Unbounded as in Artemis (``SimpleMessageGroups``): an entry lives while its group is open
    -- until its consumer goes, a sequence -1 closes it, a rebalance or a reset.  Bound it
    with ``group-buckets``.
    """

    def __init__(self) -> None:
        self._owners: dict = {}

    def get(self, group_id: str):
        return self._owners.get(group_id)

    def put(self, group_id: str, consumer) -> None:
        self._owners[group_id] = consumer

    def remove(self, group_id: str):
        return self._owners.pop(group_id, None)

    def remove_consumer(self, consumer) -> None:
        for group_id in [g for g, c in self._owners.items() if c is consumer]:
            del self._owners[group_id]

    def clear(self) -> None:
        self._owners.clear()

    def __len__(self) -> int:
        return len(self._owners)

    def to_map(self) -> dict:
        return dict(self._owners)


class BucketTable:
    """bucket -> owning consumer, ``buckets`` entries at most (``group-buckets`` n > 0).

    Groups in one bucket share its owner (Artemis's ``BucketMessageGroups``); an operation on
    a group id acts on its bucket, and :meth:`to_map` names buckets ``_AMQ_GROUP_BUCKET_INT_KEY_<n>``.
    """

    def __init__(self, buckets: int) -> None:
        if buckets < 1:
            raise ValueError(f"group-buckets must be greater than 0 here, not {buckets}")
        self.buckets = buckets
        self._owners: dict[int, object] = {}

    def get(self, group_id: str):
        return self._owners.get(bucket_of(group_id, self.buckets))

    def put(self, group_id: str, consumer) -> None:
        self._owners[bucket_of(group_id, self.buckets)] = consumer

    def remove(self, group_id: str):
        return self._owners.pop(bucket_of(group_id, self.buckets), None)

    def remove_consumer(self, consumer) -> None:
        for bucket in [b for b, c in self._owners.items() if c is consumer]:
            del self._owners[bucket]

    def clear(self) -> None:
        self._owners.clear()

    def __len__(self) -> int:
        return len(self._owners)

    def to_map(self) -> dict:
        return {f"{BUCKET_INT_KEY}{bucket}": c for bucket, c in sorted(self._owners.items())}


# -- settings ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupSettings:
    """A queue's own grouping attributes (``<queue group-buckets=..>``, CORE's CREATE_QUEUE);
    None takes the address settings' ``default-group-*``."""

    buckets: int | None = None
    rebalance: bool | None = None
    rebalance_pause_dispatch: bool | None = None
    first_key: str | None = None

    def to_record(self) -> dict:
        """The attributes given, for the queue's journal record."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_record(cls, record) -> "GroupSettings | None":
        if not record:
            return None
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


class QueueGroups:
    """The grouping state of one queue: its table of owners and its settings.

    ``paused`` is the dispatch pause of ``group-rebalance-pause-dispatch``: set when a
    consumer joins, cleared by :meth:`may_dispatch` once the queue has nothing in flight.
    """

    def __init__(self, buckets: int = -1, *, rebalance: bool = False, pause_dispatch: bool = False,
                 first_key: str | None = None) -> None:
        self.table = GroupTable() if buckets < 0 else BucketTable(buckets)
        self.rebalance = rebalance
        self.pause_dispatch = pause_dispatch
        self.first_key = first_key or None
        self.paused = False

    def owner(self, group_id: str):
        """The consumer ``group_id`` is pinned to, or None."""
        return self.table.get(group_id)

    def handed_over(self, group_id: str, message, consumer, owner) -> bool:
        """A reference of ``group_id`` went to ``consumer`` (``owner`` is what :meth:`owner`
        said before).  Applies sequence -1 and pins a new group; returns whether this delivery
        pinned the group (then it carries ``group-first-key``, and the round robin moves on
        past ``consumer``; otherwise it stays where it was, Artemis's ``consumers.repeat()``)."""
        if group_sequence_of(message) == -1:
            self.table.remove(group_id)
            return False
        if owner is None:
            self.table.put(group_id, consumer)
            return True
        return False

    def consumer_added(self) -> None:
        if self.rebalance:
            if self.pause_dispatch:
                self.paused = True
            self.table.clear()

    def consumer_removed(self, consumer) -> None:
        self.table.remove_consumer(consumer)

    def may_dispatch(self, in_flight: int) -> bool:
        """Whether the queue may dispatch now; a rebalance pause ends when nothing is in flight."""
        if self.paused:
            if in_flight:
                return False
            self.paused = False
        return True

    def reset(self, group_id: str | None = None) -> None:
        """Forget one group's owner (every group's with None): management's reset."""
        if group_id is None:
            self.table.clear()
        else:
            self.table.remove(group_id)


def resolve_group_settings(own: "GroupSettings | None", settings) -> GroupSettings:
    """A queue's grouping settings, every field filled: its own attributes (``own``), else its
    address ``settings``' ``default-group-*`` (Artemis's defaults when those lack one)."""
    own = own or GroupSettings()

    def pick(mine, name, default):
        return getattr(settings, name, default) if mine is None else mine

    return GroupSettings(
        buckets=pick(own.buckets, "default_group_buckets", -1),
        rebalance=pick(own.rebalance, "default_group_rebalance", False),
        rebalance_pause_dispatch=pick(own.rebalance_pause_dispatch, "default_group_rebalance_pause_dispatch", False),
        first_key=pick(own.first_key, "default_group_first_key", None),
    )


def queue_groups(queue, settings) -> QueueGroups | None:
    """The grouping state for ``queue`` under its resolved address ``settings`` (None: the
    queue does not group -- ``group-buckets`` 0, an exclusive or an internal queue)."""
    definition = queue.definition
    if definition.exclusive or definition.name.startswith(INTERNAL_QUEUE_PREFIX):
        return None
    resolved = resolve_group_settings(getattr(definition, "groups", None), settings)
    if resolved.buckets == 0:
        return None
    return QueueGroups(
        resolved.buckets,
        rebalance=resolved.rebalance,
        pause_dispatch=resolved.rebalance_pause_dispatch,
        first_key=resolved.first_key,
    )
