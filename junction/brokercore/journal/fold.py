"""What the journal's records mean: the fold that replays them into the live state.

What it stores
==============

Records ``(kind, tx_id, record_id, user_type, payload)`` in the format of
:mod:`.records`.  The broker chooses ``user_type`` (message, queue reference,
ack, binding, duplicate id ...) and the payload bytes; the journal gives them
meaning only through the kinds:

* ``ADD(id)``    creates live record ``id``;
* ``UPDATE(id)`` appends an update to live record ``id`` (Artemis's
  ``appendUpdateRecord``, e.g. a delivery count); recovery returns a record's
  updates in order;
* ``DELETE(id)`` removes live record ``id``;
* ``ADD_TX`` / ``UPDATE_TX`` / ``DELETE_TX`` do the same inside transaction
  ``tx_id``, taking effect, in their order, only when a ``COMMIT(tx_id)``
  follows; ``ROLLBACK(tx_id)`` discards them; a transaction with neither at
  a crash is dropped (and :meth:`.journal.Journal.start` then writes a ROLLBACK for
  it, so it is not carried into compacted files or reported again).

Record ids are the caller's, and the journal holds it to one contract:
**an id is not added again while anything still refers to it.**
:meth:`.journal.Journal.append_add` and ``append_add_tx`` raise
:class:`.errors.DuplicateRecordError` (and write nothing) for an id that is live, or
that an open transaction adds, updates or deletes (the same transaction
included).  An id whose record was deleted, and which no open transaction
refers to, may be added again: its DELETE (or the COMMIT of its DELETE_TX)
comes before the new ADD in replay order too.  The broker never reuses ids
at all (it takes each from :meth:`.journal.Journal.next_id` and adds it once);
the contract is what makes reclaiming safe (see :mod:`.compaction`).  Files written before the journal enforced it fold an ADD of a live
id as before: the last ADD wins and the old record's updates are dropped.

Replaying all records in order from an empty state gives the live state.
That fold (:class:`Fold`) is the single definition of what the journal
means; recovery (:mod:`.recovery`) applies it to every file and compaction
(:mod:`.compaction`) applies it to a prefix of the files.

The kinds are compared as plain ints (:data:`ADD` ...), which is cheaper on
the hot paths than comparing :class:`.records.Kind` members.
"""

from __future__ import annotations

from typing import NamedTuple

from .records import Kind

__all__ = [
    "ADD",
    "UPDATE",
    "DELETE",
    "ADD_TX",
    "UPDATE_TX",
    "DELETE_TX",
    "COMMIT",
    "ROLLBACK",
    "ID_MARK",
    "TX_KINDS",
    "UNTX",
    "RecordInfo",
    "Fold",
]

ADD, UPDATE, DELETE = Kind.ADD.value, Kind.UPDATE.value, Kind.DELETE.value
ADD_TX, UPDATE_TX, DELETE_TX = Kind.ADD_TX.value, Kind.UPDATE_TX.value, Kind.DELETE_TX.value
COMMIT, ROLLBACK, ID_MARK = Kind.COMMIT.value, Kind.ROLLBACK.value, Kind.ID_MARK.value
#: The kinds that act inside a transaction, at its COMMIT.
TX_KINDS = frozenset((ADD_TX, UPDATE_TX, DELETE_TX))
#: What each of them does at the COMMIT.
UNTX = {ADD_TX: ADD, UPDATE_TX: UPDATE, DELETE_TX: DELETE}


class RecordInfo(NamedTuple):
    """A live record as recovered: its ADD and its updates in order.

    ``updates`` is a list of ``(user_type, payload)``.
    """

    user_type: int
    payload: bytes
    updates: list


class Fold:
    """Replays records into the live state, payloads included.

    Used by recovery and by compaction; :class:`.index.Index` applies the same
    rules to byte counts at run time, and a property test checks they agree.
    """

    __slots__ = ("records", "txs", "max_id", "orphan_updates", "deleted")

    def __init__(self):
        self.records: dict[int, RecordInfo] = {}
        self.txs: dict[int, list] = {}
        self.max_id = 0
        self.orphan_updates = 0
        #: where the live records a DELETE removes go, when set (the newest files'
        #: deletions, see :func:`.recovery.recover`'s ``tail_bytes``)
        self.deleted: list | None = None

    def apply(self, kind: int, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        if record_id > self.max_id:
            self.max_id = record_id
        if tx_id > self.max_id:
            self.max_id = tx_id
        if kind == ADD:
            self.records[record_id] = RecordInfo(user_type, payload, [])
        elif kind == UPDATE:
            info = self.records.get(record_id)
            if info is None:
                self.orphan_updates += 1
            else:
                info.updates.append((user_type, payload))
        elif kind == DELETE:
            info = self.records.pop(record_id, None)
            if info is not None and self.deleted is not None:
                self.deleted.append((record_id, info))
        elif kind in TX_KINDS:
            ops = self.txs.get(tx_id)
            if ops is None:
                ops = self.txs[tx_id] = []
            ops.append((kind, record_id, user_type, payload))
        elif kind == COMMIT:
            for op_kind, rid, utype, data in self.txs.pop(tx_id, ()):
                self.apply(UNTX[op_kind], 0, rid, utype, data)
        elif kind == ROLLBACK:
            self.txs.pop(tx_id, None)
        # ID_MARK: only max_id
