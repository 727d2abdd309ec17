"""How the broker's state maps onto journal records.

The broker core never writes bytes itself: it asks :class:`JournalStorage` to
record that an address or queue exists, that a durable message was routed to
some durable queues, that a queue acknowledged it, or that a duplicate id was
seen.  The mapping follows Artemis's journal layout:

* a MESSAGE_REFS record per durable message (id = message id) holding the
  message and the ids of the durable queues it was routed to, and an
  ACK_REF update as each queue acknowledges; the record is deleted when the
  last queue acks (a single-queue message costs two records in its life);
* a QUEUE record per durable queue and an ADDRESS record per address created
  at runtime (bindings);
* a DUPLICATE_ID record per remembered duplicate id;
* DELIVERY_COUNT updates, so ``max-delivery-attempts`` survives a restart.

:class:`NullStorage` is used when ``persistence-enabled`` is false.
"""

from __future__ import annotations

import json
import logging
import struct
from dataclasses import dataclass, field

from twisted.internet import defer

from junction.model.message import RoutingType, decode_message, encode_message_into

log = logging.getLogger("junction.storage")

__all__ = ["RecordType", "JournalStorage", "NullStorage", "Recovered", "RecoveredMessage", "WriteBatch", "NO_BATCH"]


class RecordType:
    """``user_type`` values of the broker's journal records (stable on disk)."""

    ADDRESS = 1
    QUEUE = 2
    MESSAGE = 10
    #: a message and the durable queues it was routed to, in one record
    MESSAGE_REFS = 14
    ADD_REF = 11
    ACK_REF = 12
    DELIVERY_COUNT = 13
    DUPLICATE_ID = 20
    #: how far an address's page files have been moved into the journal
    PAGE_CURSOR = 30
    #: a prepared XA transaction branch: its Xid, sends and acks (junction.brokercore.xa)
    XA_PREPARED = 40


_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_REF_COUNT = struct.Struct(">QI")
_ONE_REF = struct.Struct(">IQ")


@dataclass
class RecoveredMessage:
    message: object
    #: queue id -> delivery count, for every queue that has not acked it
    refs: dict = field(default_factory=dict)


@dataclass
class Recovered:
    """Everything the broker needs to rebuild itself after a restart."""

    addresses: dict = field(default_factory=dict)  # record id -> dict
    queues: dict = field(default_factory=dict)  # queue id -> dict
    messages: list = field(default_factory=list)  # RecoveredMessage, by id
    duplicates: list = field(default_factory=list)  # (record id, address, dup id)
    page_cursors: dict = field(default_factory=dict)  # address -> (record id, position bytes)
    #: (message, queue ids) the journal's newest records show settled before the restart
    #: (``load(settled_tail_bytes=...)``): deleted messages, and the acked queues of live ones
    settled: list = field(default_factory=list)
    #: (record id, payload) of every prepared XA branch not yet committed or rolled back
    prepared: list = field(default_factory=list)
    torn_tail: bool = False
    notes: list = field(default_factory=list)


def quiet_failure(d):
    """Consume the failure of a record nobody waits for.

    A journal failure is reported once, by the journal and by the node's
    health check, and every later durable send is refused with it; the
    records written on the side (bindings, acks, duplicate ids) need not
    each log it again.
    """
    if d is not None:
        d.addErrback(_note_failure)
    return d


def _note_failure(failure):
    log.debug("journal record not written: %s", failure.getErrorMessage())
    return None


class WriteBatch:
    """The journal records of one read of protocol input, written as one batch.

    ``with batch:`` holds the journal's writer (``storage.hold()``) and
    releases it on the way out, however the block ends: what the handling of
    the read submitted goes out in one write and one sync, and is confirmed,
    as ever, only once synced.  One instance serves every read of the node
    (it keeps no state of its own; holds nest).
    """

    __slots__ = ("_hold", "_release")

    def __init__(self, storage):
        self._hold = storage.hold
        self._release = storage.release

    def __enter__(self):
        self._hold()
        return self

    def __exit__(self, *exc) -> bool:
        self._release()
        return False


class _NoBatch:
    """:class:`WriteBatch` where nothing is written (``persistence-enabled=false``): the
    bracket costs the adapter's read no call into the storage."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


#: the batch of a node whose storage writes nothing
NO_BATCH = _NoBatch()


def _encode_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def queue_record(defn) -> dict:
    record = {
        "name": defn.name,
        "address": defn.address,
        "routing_type": defn.routing_type.name,
        "filter": defn.filter,
        "durable": defn.durable,
        "max_consumers": defn.max_consumers,
        "purge_on_no_consumers": defn.purge_on_no_consumers,
        "exclusive": defn.exclusive,
        "auto_created": defn.auto_created,
        "user": defn.user,
        "subscription": defn.subscription,
    }
    if defn.groups is not None and defn.groups.to_record():
        record["groups"] = defn.groups.to_record()
    return record


class NullStorage:
    """Storage for ``persistence-enabled=false``: ids only, nothing written."""

    persistent = False

    def __init__(self):
        self._next = 0

    def load(self, settled_tail_bytes: int = 0) -> Recovered:
        return Recovered()

    def start(self):
        return None

    def hold(self) -> None:
        """Nothing to batch."""

    def release(self) -> None:
        """Nothing to batch."""

    def next_id(self) -> int:
        self._next += 1
        return self._next

    def store_address(self, name, routing_types, auto_created) -> int:
        return self.next_id()

    def delete_address(self, record_id) -> None:
        pass

    def store_queue(self, queue_id, defn) -> None:
        pass

    def update_queue(self, queue_id, defn) -> None:
        pass

    def delete_queue(self, queue_id) -> None:
        pass

    def store_message(self, message, queue_ids, sync) -> defer.Deferred:
        return defer.succeed(None)

    def ack(self, message_id, queue_id, remaining, sync=False) -> defer.Deferred:
        return defer.succeed(None)

    def update_delivery_count(self, message_id, queue_id, count) -> None:
        pass

    def store_duplicate(self, address, dup_id) -> int:
        return self.next_id()

    def delete_duplicate(self, record_id) -> None:
        pass

    def store_prepared(self, payload) -> tuple[int, defer.Deferred]:
        return self.next_id(), defer.succeed(None)

    def delete_record(self, record_id, sync=False) -> defer.Deferred:
        return defer.succeed(None)

    def transaction(self):
        return _NullTx(self)

    @property
    def failed(self) -> str | None:
        return None

    def stop(self):
        return defer.succeed(None)

    def stats(self) -> dict:
        return {}


class _NullTx:
    def __init__(self, storage):
        self.storage = storage
        self.after_commit: list = []

    def store_message(self, message, queue_ids):
        pass

    def ack(self, message_id, queue_id, remaining):
        pass

    def set_page_cursor(self, address, position, old_record_id) -> int:
        return 0

    def store_duplicate(self, address, dup_id) -> int:
        return 0

    def delete_record(self, record_id) -> None:
        pass

    def commit(self, sync) -> defer.Deferred:
        for action in self.after_commit:
            action()
        return defer.succeed(None)

    def rollback(self):
        self.after_commit.clear()


class JournalStorage:
    """Broker state on a :class:`junction.brokercore.journal.Journal`."""

    persistent = True

    def __init__(self, journal):
        self.journal = journal
        #: records recovery found dead, deleted once the journal is started
        self._cleanup: list = []
        #: batch the records of one read's worth of protocol input (see
        #: GroupCommitWriter.hold): protocol adapters bracket their handling
        self.hold = journal.hold
        self.release = journal.release

    # -- lifecycle ---------------------------------------------------------------
    def load(self, settled_tail_bytes: int = 0) -> Recovered:
        """The broker's state from the journal.  With ``settled_tail_bytes``, also what
        the newest ``settled_tail_bytes`` of the journal settled (``Recovered.settled``):
        the messages a crash may have removed from the event log's last moments."""
        if settled_tail_bytes:
            state = self.journal.load(tail_bytes=settled_tail_bytes)
        else:
            state = self.journal.load()
        recovered = Recovered(torn_tail=bool(getattr(state, "torn_tail", False)))
        recovered.notes.extend(getattr(state, "notes", []) or [])
        for record_id, record in sorted(state.records.items()):
            user_type, payload, updates = record.user_type, record.payload, record.updates
            if user_type == RecordType.ADDRESS:
                recovered.addresses[record_id] = json.loads(payload)
            elif user_type == RecordType.QUEUE:
                # a changed definition is an update of the record: the last one is current
                queue_updates = [p for t, p in updates if t == RecordType.QUEUE]
                recovered.queues[record_id] = json.loads(queue_updates[-1] if queue_updates else payload)
            elif user_type in (RecordType.MESSAGE, RecordType.MESSAGE_REFS):
                refs: dict = {}
                if user_type == RecordType.MESSAGE_REFS:
                    refs, payload = _split_message_refs(payload)
                message = decode_message(payload)
                acked = _apply_ref_updates(refs, updates)
                if refs:
                    recovered.messages.append(RecoveredMessage(message, refs))
                    if acked and settled_tail_bytes:
                        recovered.settled.append((message, acked))
                else:
                    # every queue acked it but the delete never made it: finish it
                    self._cleanup.append(record_id)
            elif user_type == RecordType.XA_PREPARED:
                recovered.prepared.append((record_id, bytes(payload)))
            elif user_type == RecordType.PAGE_CURSOR:
                address, position = _decode_cursor(payload)
                recovered.page_cursors[address] = (record_id, position)
            elif user_type == RecordType.DUPLICATE_ID:
                address_len = _U64.unpack(payload[:8])[0]
                address = payload[8 : 8 + address_len].decode("utf-8")
                recovered.duplicates.append((record_id, address, payload[8 + address_len :]))
        for _record_id, record in getattr(state, "deleted_recently", ()):
            if record.user_type == RecordType.MESSAGE_REFS:
                refs, message = _split_message_refs(record.payload)
                acked = _apply_ref_updates(refs, record.updates)
                recovered.settled.append((decode_message(message), list(refs) + acked))
            elif record.user_type == RecordType.MESSAGE:
                refs = {}
                acked = _apply_ref_updates(refs, record.updates)
                recovered.settled.append((decode_message(record.payload), list(refs) + acked))
        return recovered

    def start(self):
        self.journal.start()
        for record_id in self._cleanup:
            quiet_failure(self.journal.append_delete(record_id, sync=False))
        self._cleanup.clear()

    def stop(self):
        """Flush and close the journal.  Errbacks with the journal's
        :class:`~junction.brokercore.journal.JournalFailedError` when it failed,
        its last sync at the stop included: the node must not call that a clean stop."""
        return self.journal.stop()

    @property
    def failed(self) -> str | None:
        failure = self.journal.failure
        return None if failure is None else str(failure)

    def stats(self) -> dict:
        return self.journal.stats()

    def next_id(self) -> int:
        return self.journal.next_id()

    # -- bindings ------------------------------------------------------------------
    def store_address(self, name, routing_types, auto_created) -> int:
        record_id = self.journal.next_id()
        payload = _encode_json(
            {"name": name, "routing_types": sorted(rt.name for rt in routing_types), "auto_created": auto_created}
        )
        quiet_failure(self.journal.append_add(record_id, RecordType.ADDRESS, payload, sync=True))
        return record_id

    def delete_address(self, record_id) -> None:
        quiet_failure(self.journal.append_delete(record_id, sync=True))

    def store_queue(self, queue_id, defn) -> None:
        quiet_failure(self.journal.append_add(queue_id, RecordType.QUEUE, _encode_json(queue_record(defn)), sync=True))

    def update_queue(self, queue_id, defn) -> None:
        """A stored queue's changed definition (a reload's attributes): an update of its
        record, whose last update is what :meth:`load` recovers."""
        quiet_failure(self.journal.append_update(queue_id, RecordType.QUEUE, _encode_json(queue_record(defn)), sync=True))

    def delete_queue(self, queue_id) -> None:
        quiet_failure(self.journal.append_delete(queue_id, sync=True))

    # -- messages --------------------------------------------------------------------
    def store_message(self, message, queue_ids, sync) -> defer.Deferred:
        """One MESSAGE_REFS record: the message and the queues that hold it."""
        return self.journal.append_add(
            message.message_id, RecordType.MESSAGE_REFS, _message_refs(message, queue_ids), sync=sync
        )

    def when_stored(self, listener):
        """``listener(mark)`` each time everything up to ``mark`` is as safe as
        :meth:`store_message`'s Deferred says, and ``listener(None)`` if the storage
        fails: for what waits on many records at once (the message events) instead of a
        callback each.  Returns the counter whose ``records_submitted`` is the mark of
        everything stored so far (an attribute: read once per message)."""
        return self.journal.add_confirm_listener(listener)

    def ack(self, message_id, queue_id, remaining, sync=False) -> defer.Deferred:
        if remaining <= 0:
            return self.journal.append_delete(message_id, sync=sync)
        return self.journal.append_update(message_id, RecordType.ACK_REF, _U64.pack(queue_id), sync=sync)

    def update_delivery_count(self, message_id, queue_id, count) -> None:
        quiet_failure(
            self.journal.append_update(
                message_id, RecordType.DELIVERY_COUNT, _REF_COUNT.pack(queue_id, count), sync=False
            )
        )

    def store_duplicate(self, address, dup_id) -> int:
        record_id = self.journal.next_id()
        raw = address.encode("utf-8")
        quiet_failure(
            self.journal.append_add(
                record_id, RecordType.DUPLICATE_ID, _U64.pack(len(raw)) + raw + bytes(dup_id), sync=False
            )
        )
        return record_id

    def delete_duplicate(self, record_id) -> None:
        quiet_failure(self.journal.append_delete(record_id, sync=False))

    def store_prepared(self, payload: bytes) -> tuple[int, defer.Deferred]:
        """One XA_PREPARED record (synced): its record id and the Deferred of the sync."""
        record_id = self.journal.next_id()
        return record_id, self.journal.append_add(record_id, RecordType.XA_PREPARED, payload, sync=True)

    def delete_record(self, record_id, sync=False) -> defer.Deferred:
        return self.journal.append_delete(record_id, sync=sync)

    def transaction(self):
        return _JournalTx(self)


class _JournalTx:
    """Records written as one journal transaction: all or nothing on recovery."""

    def __init__(self, storage: JournalStorage):
        self.journal = storage.journal
        self.tx_id = self.journal.next_id()
        self.used = False
        #: made visible (refs added to queues) once the commit is durable
        self.after_commit: list = []

    def store_message(self, message, queue_ids) -> None:
        self.used = True
        self.journal.append_add_tx(
            self.tx_id, message.message_id, RecordType.MESSAGE_REFS, _message_refs(message, queue_ids)
        )

    def ack(self, message_id, queue_id, remaining) -> None:
        self.used = True
        if remaining <= 0:
            self.journal.append_delete_tx(self.tx_id, message_id)
        else:
            self.journal.append_update_tx(self.tx_id, message_id, RecordType.ACK_REF, _U64.pack(queue_id))

    def store_duplicate(self, address: str, dup_id: bytes) -> int:
        """A duplicate-id record that commits with the message it guards."""
        self.used = True
        record_id = self.journal.next_id()
        raw = address.encode("utf-8")
        self.journal.append_add_tx(
            self.tx_id, record_id, RecordType.DUPLICATE_ID, _U64.pack(len(raw)) + raw + bytes(dup_id)
        )
        return record_id

    def delete_record(self, record_id: int) -> None:
        """Delete a record (a prepared XA branch's) as part of this transaction."""
        self.used = True
        self.journal.append_delete_tx(self.tx_id, record_id)

    def set_page_cursor(self, address: str, position: bytes, old_record_id: int) -> int:
        """Replace the address's page-cursor record within this transaction."""
        self.used = True
        if old_record_id:
            self.journal.append_delete_tx(self.tx_id, old_record_id)
        record_id = self.journal.next_id()
        self.journal.append_add_tx(
            self.tx_id, record_id, RecordType.PAGE_CURSOR, _encode_cursor(address, position)
        )
        return record_id

    def commit(self, sync) -> defer.Deferred:
        if not self.used:
            d = defer.succeed(None)
        else:
            d = self.journal.append_commit(self.tx_id, sync=sync)

        def visible(result):
            for action in self.after_commit:
                action()
            return result

        return d.addCallback(visible)

    def rollback(self) -> None:
        self.after_commit.clear()
        if self.used:
            quiet_failure(self.journal.append_rollback(self.tx_id))


def _split_message_refs(payload) -> tuple[dict, bytes]:
    """A MESSAGE_REFS payload's queue ids (-> delivery count 0) and its encoded message."""
    count = _U32.unpack_from(payload, 0)[0]
    refs = {_U64.unpack_from(payload, 4 + 8 * i)[0]: 0 for i in range(count)}
    return refs, payload[4 + 8 * count :]


def _apply_ref_updates(refs: dict, updates) -> list:
    """A message record's updates applied to ``refs`` (queue id -> delivery count); the ids
    of the queues that acknowledged it."""
    acked = []
    for update_type, update in updates:
        if update_type == RecordType.ADD_REF:
            refs[_U64.unpack(update)[0]] = 0
        elif update_type == RecordType.ACK_REF:
            queue_id = _U64.unpack(update)[0]
            if refs.pop(queue_id, None) is not None:
                acked.append(queue_id)
        elif update_type == RecordType.DELIVERY_COUNT:
            queue_id, count = _REF_COUNT.unpack(update)
            if queue_id in refs:
                refs[queue_id] = count
    return acked


def _message_refs(message, queue_ids) -> bytes:
    """A MESSAGE_REFS payload: u32 count, u64 queue ids, the encoded message."""
    if len(queue_ids) == 1:
        out = [_ONE_REF.pack(1, queue_ids[0])]
    else:
        out = [_U32.pack(len(queue_ids)), *(_U64.pack(q) for q in queue_ids)]
    encode_message_into(out, message)
    return b"".join(out)


def _encode_cursor(address: str, position: bytes) -> bytes:
    raw = address.encode("utf-8")
    return _U64.pack(len(raw)) + raw + bytes(position)


def _decode_cursor(payload: bytes) -> tuple[str, bytes]:
    n = _U64.unpack(payload[:8])[0]
    return payload[8 : 8 + n].decode("utf-8"), bytes(payload[8 + n :])


def routing_types_from(names) -> frozenset:
    return frozenset(RoutingType[name] for name in names)
