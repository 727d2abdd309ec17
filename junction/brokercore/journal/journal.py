"""The broker's persistent journal: append-only segments, group commit, recovery.

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
  a crash is dropped (and :meth:`Journal.start` then writes a ROLLBACK for
  it, so it is not carried into compacted files or reported again).

Record ids are the caller's, and the journal holds it to one contract:
**an id is not added again while anything still refers to it.**
:meth:`Journal.append_add` and :meth:`Journal.append_add_tx` raise
:class:`DuplicateRecordError` (and write nothing) for an id that is live, or
that an open transaction adds, updates or deletes (the same transaction
included).  An id whose record was deleted, and which no open transaction
refers to, may be added again: its DELETE (or the COMMIT of its DELETE_TX)
comes before the new ADD in replay order too.  The broker never reuses ids
at all (it takes each from :meth:`Journal.next_id` and adds it once); the
contract is what makes reclaiming safe (see "Compaction and reclaiming
files").  Files written before the journal enforced it fold an ADD of a live
id as before: the last ADD wins and the old record's updates are dropped.

Replaying all records in order from an empty state gives the live state.
That fold (:class:`_Fold`) is the single definition of what the journal
means; recovery applies it to every file and compaction applies it to a
prefix of the files.

Writing: group commit on one writer thread
==========================================

(The writer, :class:`.groupcommit.GroupCommitWriter`, is shared with the
page store; the journal adds its own writer operations: removing reclaimed
segments and swapping in a compacted file.)

Appends run on the reactor thread: each record is encoded (header, payload,
CRC) and added to an in-memory batch, and the append returns a Deferred.  A
single writer thread repeatedly takes the *whole* pending batch, writes it
with one ``write`` and, if any record in it asked for ``sync``, one
``fdatasync``; then it fires every Deferred of the batch back on the reactor
with one ``reactor.callFromThread``.  While it writes and syncs, new appends
gather into the next batch, so batches grow with load by themselves (one
record per sync when idle, hundreds under load) and the reactor never waits
for the disk (it only takes a lock for the moment of adding to the batch).
Under CPython's GIL the writer typically picks up the next batch when the
reactor thread goes idle (or at the interpreter's switch interval), so a
batch is about what the reactor appended in one turn: with 256 producers
waiting for confirmations, ~220 records per sync.  Throughput is then bound
by the Python work per record (~9-13 us of CPU for append, Deferred and
callback, measured with ``bench/journal.py``), not by the disk.

``buffer_timeout_ns`` (Artemis ``journal-buffer-timeout``) is the *minimum
interval between the starts of two syncs*, applied only under concurrency: a
sync that would follow the previous one sooner first waits for the rest of
the interval, gathering more records -- but only when the previous synced
batch held more than one record.  An isolated append, and a single producer
that sends its next message as soon as the last is confirmed, are never
delayed (a plain minimum interval cut such a producer from ~5,700 to ~1,300
records/s at 500 us, p50 0.11 -> 0.59 ms).  The adaptive batching alone
already exceeds the throughput target; the interval only caps the fsync rate
(at 1/interval) under load, for a disk that suffers from many small syncs.
Default :data:`DEFAULT_BUFFER_TIMEOUT_NS` is 0 (no wait); Artemis's 500 us
(the broker.xml default) is safe to pass.

A record with ``sync=False`` is confirmed once written to the OS; if its batch
also holds a sync record it is confirmed with the batch, after the sync.

``writer="inline"`` does the same I/O synchronously on the reactor thread, in
a ``reactor.callLater(0)`` call after the appends: deterministic, for tests
with a ``Clock``, and for tools.

Flow control: encoded records not yet written count in :attr:`Journal.pending_bytes`.
Appends never fail for being over :data:`MAX_PENDING_BYTES`; instead
:attr:`Journal.writable` turns false and the broker should stop reading from
producers until :meth:`Journal.wait_writable` fires (at half the limit).

Failure: if a write or fsync raises (``ENOSPC``, ``EIO`` ...) the journal
becomes FAILED at once and for good: every Deferred of that batch, of every
later batch and of every later append errbacks with :class:`JournalFailedError`
("journal fsync failed on journal-...jnl: [Errno 5] ...; durable sends are
refused").  It never retries an fsync and never reports success for data
whose sync failed: after a failed fsync, Linux may have dropped the dirty
pages, and a retry that "succeeds" proves nothing (PostgreSQL's fsyncgate).
Restarting the broker recovers from what is really on disk.  The failure is
logged at ERROR once, and :meth:`Journal.stop` of a failed journal errbacks
with the same error -- also when the failure is the stop's own last sync,
after every append had settled (records confirmed as written with
``sync=False`` may then be lost): a stop is reported clean only when
everything appended is on disk.

Files
=====

Segments are named ``journal-<16-digit sequence>.jnl``; each starts with a
header (magic, format version, its sequence).  A segment holds up to
``file_size`` bytes (:data:`DEFAULT_FILE_SIZE` 10 MiB, Artemis's
``journal-file-size``); a record that does not fit in the rest of the current
segment starts the next one.  A record bigger than a whole segment gets a
segment of its own (an *oversize segment*, which simply exceeds
``file_size``); payloads over :data:`.records.MAX_PAYLOAD_SIZE` (64 MiB) are
rejected with :class:`RecordTooLargeError`.

New segments are preallocated by default: filled with zeros to
``file_size`` and synced before use, so later ``fdatasync`` calls need not
update the file size in the file-system journal (measured on ext4: about
90 us instead of 140 us per 4 KiB sync).  Zero-filling 10 MiB costs ~11 ms,
so a background thread (:class:`.groupcommit.Preallocator`) prepares the next segment as
``journal-<seq>.jnl.tmp`` while the current one fills; the switch then only
writes the header, syncs, renames and syncs the directory.  (``posix_fallocate``
is no substitute: ext4 still converts the unwritten extents at each sync.)

Before the writer moves on to a new segment it fsyncs the old one (even for
non-sync records and with ``sync=False``).  So **only the last segment can
ever have a torn tail**; every earlier segment is complete.  Recovery relies
on this invariant.

Recovery policy (:meth:`Journal.load`)
======================================

* In the **last** segment, the first invalid record (bad CRC, truncated,
  garbage) and everything after it are a torn tail: a write that a crash
  interrupted, which was never confirmed, because the confirmation of a
  record follows the sync of everything before it.  They are dropped and the
  file is truncated (and synced) there, reported in
  :attr:`RecoveredState.torn_tail`.  If intact records follow the damage
  (possible when a disk persisted the sectors of an unsynced batch out of
  order; or, rarely, bit rot in synced data) the report says so
  (``intact_records_after``), since that cannot be told from a torn tail.
* In any **earlier** segment an invalid record is corruption of data that was
  completely written and synced.  By default ``load()`` refuses to go on and
  raises :class:`JournalCorruptionError` naming the file, offset and reason:
  silently dropping a synced COMMIT or DELETE could resurrect or lose
  messages.  ``load(on_corruption="skip")`` is the operator's explicit
  choice to skip to the next intact record in that file and continue; every
  skipped range is reported in :attr:`RecoveredState.corruptions`.
* A last segment whose header is not intact was being created at the crash
  and holds nothing; it is removed.  Leftovers of an interrupted compaction
  are finished (see below).

Compaction and reclaiming files
===============================

The journal tracks, per segment, its live bytes: records that still matter
(ADD/UPDATE of live records, records of open transactions).  DELETE, COMMIT,
ROLLBACK and id marks count as dead at once.  Two mechanisms give space back,
and both only ever replace a **prefix** of the sequence of segments with
something that folds to the same state, which is what makes them safe at any
crash point:

1. *Reclaim*: while the oldest segment (never the current one) has no live
   bytes, it is removed.  A record can only kill records written before it:
   a DELETE kills the live record of its id, and a DELETE_TX (or UPDATE_TX)
   acts at its COMMIT on the record of its id live then, which -- because
   the journal refuses to add an id that an open transaction refers to (see
   "What it stores") -- was already written when the DELETE_TX was, or is
   an earlier ADD_TX of the same transaction.  Since nothing is older than
   the oldest segment, its dead content has no effect on any later segment,
   and removing it leaves the fold unchanged.  A DELETE (or a COMMIT) in a
   newer segment that killed one of its records is harmless once the record
   is gone, while the reverse (removing the DELETE first) cannot happen,
   because segments go oldest first.  (Were an id re-added while a
   transaction's DELETE_TX of it is open, the COMMIT would kill the *newer*
   ADD and make the DELETE_TX's older segment dead; removing that segment
   would bring the record back at the next recovery.)  The
   removal is queued to the writer behind all records appended so far and
   runs only after they are synced: the DELETEs that made the file dead are
   durable before the file disappears, so a transaction can never be half
   undone by a crash.
2. *Compaction*: when at least ``compact_min_files`` (10, Artemis
   ``journal-compact-min-files``) closed segments exist and their live bytes
   are under ``compact_percentage`` (30 %, Artemis
   ``journal-compact-percentage``) of their record bytes, a background thread
   folds all closed segments ``first..k`` (read back from disk) into their
   live state and writes it as one *compacted* file
   ``journal-<k>.cjnl`` (live records as ADD + UPDATEs, open transactions as
   their tx records, the id watermark in the header).  Invariant: folding the
   compacted file and then segments ``k+1..`` gives exactly the state of
   folding ``first..`` -- the fold is a left fold, so a prefix may be replaced
   by its result.  (Rewriting live records into the current tail instead
   would move them past later DELETEs and COMMITs of the same ids -- the
   hazards of record resurrection -- and need tombstones kept alive by
   hand; folding a prefix in place has no ordering to get wrong.)  Order of
   steps: write ``journal-<k>.cjnl.tmp`` and fsync
   it; rename it to ``journal-<k>.cjnl`` and sync the directory; remove the
   covered segments; sync the directory.  A crash before the rename leaves a
   ``.tmp`` that recovery deletes (the old segments are intact); after it,
   recovery finds the compacted file's header says it covers ``first..k`` and
   deletes any covered segment still there.  The compacted file may be larger
   than ``file_size``.  Compaction reads whole segments in Python on its own
   thread; on a large journal this competes for the GIL with the reactor for
   a while, which is why it waits for 70 % of the space to be dead.

Ids
===

:meth:`Journal.next_id` hands out increasing ids.  Recovery restarts them
above every id seen (record and transaction ids) and above the *watermark*:
the id generator reserves blocks of :data:`ID_BLOCK_SIZE` ids, writing the
upper bound of the block in an ``ID_MARK`` record and in every new segment
header, so ids handed out but never written are not handed out again even
after the segments that held them were removed.  (So each restart skips up to
:data:`ID_BLOCK_SIZE` ids; ids are 64-bit.)  Ids chosen by the caller rather
than by :meth:`Journal.next_id` also move the generator past them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import zlib
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from twisted.internet.defer import Deferred, fail, succeed
from twisted.python.failure import Failure

from .files import OSFiles, truncate_durably
from .groupcommit import (
    FAILED,
    LOADED,
    NEW,
    STARTED,
    STOPPED,
    STOPPING,
    GroupCommitWriter,
    default_reactor,
    write_all,
)
from .records import (
    CRC_STRUCT,
    FILE_HEADER_SIZE,
    MAX_ID,
    MAX_PAYLOAD_SIZE,
    MAX_USER_TYPE,
    RECORD_HEADER_STRUCT,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    FormatError,
    Kind,
    RecordTooLargeError,
    decode_file_header,
    encode_file_header,
    encode_record,
    find_next_record,
    scan_records,
)

__all__ = [
    "Journal",
    "RecoveredState",
    "RecordInfo",
    "TornTail",
    "Corruption",
    "JournalError",
    "JournalFailedError",
    "JournalCorruptionError",
    "JournalStateError",
    "JournalClosedError",
    "UnknownRecordError",
    "DuplicateRecordError",
    "RecordTooLargeError",
    "DEFAULT_FILE_SIZE",
    "MIN_FILE_SIZE",
    "DEFAULT_BUFFER_TIMEOUT_NS",
    "MAX_PENDING_BYTES",
    "COMPACT_MIN_FILES",
    "COMPACT_PERCENTAGE",
    "ID_BLOCK_SIZE",
]

log = logging.getLogger(__name__)

# -- limits and defaults (all named, all documented) ----------------------

#: Segment size, Artemis ``journal-file-size`` default.
DEFAULT_FILE_SIZE = 10 * 1024 * 1024
#: Smallest segment size accepted (tests use tiny segments).
MIN_FILE_SIZE = 256
#: Minimum interval between the starts of two syncs (Artemis
#: ``journal-buffer-timeout``).  0: adaptive batching only (measured with
#: ``bench/journal.py``, see "Writing" above).
DEFAULT_BUFFER_TIMEOUT_NS = 0
#: Encoded records waiting for the writer above which :attr:`Journal.writable`
#: is false (producer flow control).  Appends still succeed.
MAX_PENDING_BYTES = 8 * 1024 * 1024
#: Artemis ``journal-compact-min-files``: compaction needs this many closed segments.
COMPACT_MIN_FILES = 10
#: Artemis ``journal-compact-percentage``: compact when closed segments are
#: less than this percent live.
COMPACT_PERCENTAGE = 30
#: Ids reserved per ``ID_MARK`` record.
ID_BLOCK_SIZE = 10_000
#: The compactor writes its output in chunks of about this size.
_COMPACT_CHUNK = 1024 * 1024

FILE_PREFIX = "journal-"
DATA_SUFFIX = ".jnl"
COMPACTED_SUFFIX = ".cjnl"
TMP_SUFFIX = ".tmp"
_NAME_RE = re.compile(r"^journal-(\d{16})\.(jnl|cjnl)$")

_ADD, _UPDATE, _DELETE = Kind.ADD.value, Kind.UPDATE.value, Kind.DELETE.value
_ADD_TX, _UPDATE_TX, _DELETE_TX = Kind.ADD_TX.value, Kind.UPDATE_TX.value, Kind.DELETE_TX.value
_COMMIT, _ROLLBACK, _ID_MARK = Kind.COMMIT.value, Kind.ROLLBACK.value, Kind.ID_MARK.value
_TX_KINDS = frozenset((_ADD_TX, _UPDATE_TX, _DELETE_TX))
_UNTX = {_ADD_TX: _ADD, _UPDATE_TX: _UPDATE, _DELETE_TX: _DELETE}

# The record encoding of records.encode_record, inlined in Journal._append.
_RECORD_HEADER_PACK = RECORD_HEADER_STRUCT.pack
_CRC_PACK = CRC_STRUCT.pack
_crc32 = zlib.crc32
_MAX_RECORD = RECORD_OVERHEAD + MAX_PAYLOAD_SIZE

_SIZE_MASK = 0xFFFFFFFF


def data_name(seq: int) -> str:
    return f"{FILE_PREFIX}{seq:016d}{DATA_SUFFIX}"


def compacted_name(seq: int) -> str:
    return f"{FILE_PREFIX}{seq:016d}{COMPACTED_SUFFIX}"


# -- errors ---------------------------------------------------------------


class JournalError(Exception):
    """Base class of the journal's errors."""


class JournalFailedError(JournalError):
    """A write or sync failed; the journal refuses all further work."""


class JournalCorruptionError(JournalError):
    """Recovery found damage in a segment that had been completely written."""

    def __init__(self, message: str, file: str = "", offset: int = 0):
        super().__init__(message)
        self.file = file
        self.offset = offset


class JournalStateError(JournalError):
    """The journal was used out of order (append before start, load twice ...)."""


class JournalClosedError(JournalError):
    """An append after :meth:`Journal.stop`."""


class UnknownRecordError(JournalError, LookupError):
    """UPDATE or DELETE of a record id that is not live."""


class DuplicateRecordError(JournalError):
    """ADD of a record id that is live or that an open transaction refers to.

    Record ids must not be reused while anything refers to them (see the
    module documentation); take new ids from :meth:`Journal.next_id`.
    """


# -- recovery results ------------------------------------------------------


class RecordInfo(NamedTuple):
    """A live record as recovered: its ADD and its updates in order.

    ``updates`` is a list of ``(user_type, payload)``.
    """

    user_type: int
    payload: bytes
    updates: list


@dataclass
class TornTail:
    """The dropped end of the last segment (see the recovery policy)."""

    file: str
    offset: int
    dropped_bytes: int
    reason: str
    #: Intact records were found after the damage: either an unsynced batch
    #: persisted out of order, or corruption inside synced data.
    intact_records_after: bool = False


@dataclass
class Corruption:
    """A range skipped under ``on_corruption="skip"``."""

    file: str
    offset: int
    skipped_bytes: int
    reason: str


@dataclass
class RecoveredState:
    """What :meth:`Journal.load` found."""

    #: Live records after the fold: ``{record_id: RecordInfo}``.
    records: dict = field(default_factory=dict)
    #: The first id :meth:`Journal.next_id` will return.
    next_id: int = 1
    #: Segment files read, oldest first.
    files: list = field(default_factory=list)
    #: Valid records read.
    records_read: int = 0
    torn_tail: TornTail | None = None
    corruptions: list = field(default_factory=list)
    #: Transactions without COMMIT/ROLLBACK, dropped: ``{tx_id: record count}``.
    dropped_transactions: dict = field(default_factory=dict)
    #: UPDATEs of records that were not live (ignored; Artemis logs these).
    orphan_updates: int = 0
    #: Files deleted while recovering: compaction leftovers, covered segments,
    #: a last segment without an intact header.
    removed_files: list = field(default_factory=list)
    #: Records deleted by the newest files (``load(tail_bytes=...)``), as
    #: ``(record_id, RecordInfo)``: what was settled just before the journal was
    #: last written, for a broker whose own record of it a crash may have lost.
    deleted_recently: list = field(default_factory=list)


# -- the fold: the one definition of the journal's meaning -----------------


class _Fold:
    """Replays records into the live state, payloads included.

    Used by recovery and by compaction; :class:`_Index` applies the same
    rules to byte counts at run time, and a property test checks they agree.
    """

    __slots__ = ("records", "txs", "max_id", "orphan_updates", "deleted")

    def __init__(self):
        self.records: dict[int, RecordInfo] = {}
        self.txs: dict[int, list] = {}
        self.max_id = 0
        self.orphan_updates = 0
        #: where the live records a DELETE removes go, when set (see Journal.load's tail_bytes)
        self.deleted: list | None = None

    def apply(self, kind: int, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        if record_id > self.max_id:
            self.max_id = record_id
        if tx_id > self.max_id:
            self.max_id = tx_id
        if kind == _ADD:
            self.records[record_id] = RecordInfo(user_type, payload, [])
        elif kind == _UPDATE:
            info = self.records.get(record_id)
            if info is None:
                self.orphan_updates += 1
            else:
                info.updates.append((user_type, payload))
        elif kind == _DELETE:
            info = self.records.pop(record_id, None)
            if info is not None and self.deleted is not None:
                self.deleted.append((record_id, info))
        elif kind in _TX_KINDS:
            ops = self.txs.get(tx_id)
            if ops is None:
                ops = self.txs[tx_id] = []
            ops.append((kind, record_id, user_type, payload))
        elif kind == _COMMIT:
            for op_kind, rid, utype, data in self.txs.pop(tx_id, ()):
                self.apply(_UNTX[op_kind], 0, rid, utype, data)
        elif kind == _ROLLBACK:
            self.txs.pop(tx_id, None)
        # _ID_MARK: only max_id


class _FileInfo:
    """Run-time accounting of one segment (or compacted file)."""

    __slots__ = ("name", "seq", "first_seq", "compacted", "size", "live", "seqs")

    def __init__(self, name: str, seq: int, first_seq: int, compacted: bool):
        self.name = name
        self.seq = seq
        self.first_seq = first_seq
        self.compacted = compacted
        #: Bytes used, header included.
        self.size = FILE_HEADER_SIZE
        #: Bytes of records that still matter.
        self.live = 0
        #: Sequence numbers whose records now live in this file (a compacted
        #: file answers for every segment it replaced).
        self.seqs = [seq]

    @property
    def dead(self) -> int:
        return self.size - FILE_HEADER_SIZE - self.live


class _Index:
    """Live/dead byte accounting, with the fold's rules, on the reactor thread.

    A location is ``seq << 32 | size``: the record of ``size`` bytes in file
    ``seq`` (``size`` < 2**32 by :data:`MAX_PAYLOAD_SIZE`).  A live record
    maps to its one location as a plain int, or to a list once it has
    updates: ints are not tracked by the garbage collector, and with a large
    backlog of live records the collector's passes over one list per record
    cost more CPU than the journal itself.
    """

    __slots__ = ("files", "order", "live", "txs", "tx_refs", "dead_hint")

    def __init__(self):
        self.files: dict[int, _FileInfo] = {}
        self.order: list[_FileInfo] = []
        self.live: dict[int, int | list] = {}
        self.txs: dict[int, list] = {}
        #: Record id -> how many records of open transactions name it (the
        #: ids :meth:`Journal.append_add` must refuse).
        self.tx_refs: dict[int, int] = {}
        self.dead_hint = False

    def new_file(self, info: _FileInfo) -> None:
        self.files[info.seq] = info
        self.order.append(info)

    def _kill(self, locations) -> None:
        if locations.__class__ is int:
            locations = (locations,)
        files = self.files
        for loc in locations:
            info = files[loc >> 32]
            info.live -= loc & _SIZE_MASK
            if not info.live:
                self.dead_hint = True

    def _attach(self, record_id: int, loc: int) -> bool:
        """Add an update's location to live record ``record_id``, if live."""
        locs = self.live.get(record_id)
        if locs is None:
            return False
        if locs.__class__ is int:
            self.live[record_id] = [locs, loc]
        else:
            locs.append(loc)
        return True

    def apply(self, kind: int, tx_id: int, record_id: int, seq: int, n: int) -> None:
        info = self.files[seq]
        info.size += n
        loc = seq << 32 | n
        if kind == _ADD:
            old = self.live.get(record_id)
            if old is not None:
                self._kill(old)
            self.live[record_id] = loc
            info.live += n
        elif kind == _UPDATE:
            if self._attach(record_id, loc):
                info.live += n
        elif kind == _DELETE:
            locs = self.live.pop(record_id, None)
            if locs is not None:
                self._kill(locs)
        elif kind in _TX_KINDS:
            ops = self.txs.get(tx_id)
            if ops is None:
                ops = self.txs[tx_id] = []
            ops.append((kind, record_id, loc))
            refs = self.tx_refs
            refs[record_id] = refs.get(record_id, 0) + 1
            info.live += n
        elif kind == _COMMIT:
            ops = self.txs.pop(tx_id, ())
            self._unref(ops)
            for op_kind, rid, op_loc in ops:
                if op_kind == _ADD_TX:
                    old = self.live.get(rid)
                    if old is not None:
                        self._kill(old)
                    self.live[rid] = op_loc
                elif op_kind == _UPDATE_TX:
                    if not self._attach(rid, op_loc):
                        self._kill(op_loc)
                else:
                    locs = self.live.pop(rid, None)
                    if locs is not None:
                        self._kill(locs)
                    self._kill(op_loc)
        elif kind == _ROLLBACK:
            self.drop_tx(tx_id)
        if not info.live:
            self.dead_hint = True

    def _unref(self, ops) -> None:
        refs = self.tx_refs
        for _k, rid, _loc in ops:
            count = refs[rid] - 1
            if count:
                refs[rid] = count
            else:
                del refs[rid]

    def drop_tx(self, tx_id: int) -> None:
        """Forget an open transaction (a ROLLBACK; recovery drops uncommitted ones)."""
        ops = self.txs.pop(tx_id, ())
        self._unref(ops)
        self._kill([op_loc for _k, _r, op_loc in ops])

    def replace_prefix(self, count: int, info: _FileInfo) -> list[_FileInfo]:
        """Make compacted file ``info`` stand for the oldest ``count`` files.

        Every live location in them has a record of the same size in the
        compacted file (re-encoding keeps sizes), so the live bytes carry
        over exactly and old locations simply alias the new file.
        """
        prefix = self.order[:count]
        info.live = sum(f.live for f in prefix)
        info.seqs = []
        for old in prefix:
            for s in old.seqs:
                self.files[s] = info
                info.seqs.append(s)
        self.order[:count] = [info]
        if not info.live:
            self.dead_hint = True
        return prefix

    def pop_oldest(self) -> _FileInfo:
        info = self.order.pop(0)
        for s in info.seqs:
            if self.files.get(s) is info:
                del self.files[s]
        return info


class _Cancelled(Exception):
    pass


# -- the journal -----------------------------------------------------------


class Journal:
    """A journal in ``directory`` (see the module documentation).

    ``files`` replaces the file layer (default :class:`.files.OSFiles` over
    ``directory``), e.g. with :class:`.files.FaultyFiles`.  ``sync=False``
    turns every fsync of records off (data reaches the OS only; segment
    switches and :meth:`stop` still sync): for throw-away test brokers.
    ``writer`` is ``"thread"`` (production) or ``"inline"`` (I/O on the
    reactor thread in a ``callLater(0)``; deterministic tests).
    """

    def __init__(
        self,
        directory,
        file_size: int = DEFAULT_FILE_SIZE,
        buffer_timeout_ns: int = DEFAULT_BUFFER_TIMEOUT_NS,
        sync: bool = True,
        reactor=None,
        files=None,
        *,
        writer: str = "thread",
        preallocate: bool = True,
        compact_min_files: int = COMPACT_MIN_FILES,
        compact_percentage: int = COMPACT_PERCENTAGE,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ):
        if file_size < MIN_FILE_SIZE:
            raise ValueError(f"journal file_size {file_size} is below the minimum {MIN_FILE_SIZE}")
        if writer not in ("thread", "inline"):
            raise ValueError(f"journal writer must be 'thread' or 'inline', not {writer!r}")
        if not 0 <= compact_percentage <= 100:
            raise ValueError("compact_percentage must be 0..100")
        if directory is None and files is None:
            raise ValueError("a journal needs a directory (or a file layer in files=)")
        self.directory = os.fspath(directory) if directory is not None else None
        self._files = files if files is not None else OSFiles(self.directory)
        self._file_size = file_size
        self._reactor = reactor if reactor is not None else default_reactor()
        self._inline = writer == "inline"
        self._compact_min_files = compact_min_files
        self._compact_percentage = compact_percentage

        self._state = NEW
        self._index = _Index()
        self._next_seq = 1
        self._last_id = 0
        self._reserved_id = 0
        self._cur_seq = 0
        self._cur_used = 0
        self._dropped_txs: list[int] = []

        self._writer = GroupCommitWriter(
            self._files,
            self._reactor,
            inline=self._inline,
            sync=bool(sync),
            on_batch=self._batch_done,
            make_error=_failed_error,
            max_pending_bytes=max_pending_bytes,
            thread_name="junction-journal-writer",
            buffer_timeout_ns=buffer_timeout_ns,
            preallocate=file_size if preallocate else 0,
            prealloc_thread_name="junction-journal-prealloc",
            directory_label=self.directory or "journal directory",
        )
        self._submit = self._writer.submit

        # Reactor-side bookkeeping.
        self._stop_d: Deferred | None = None
        self._compacting = False
        #: Fired (None, or the error) when the compaction in progress ends.
        self._compaction_watchers: list[Deferred] = []
        self._compaction_cancel = False
        self._stop_watchers: list[Deferred] = []

        # Statistics.
        self._records_appended = 0
        self._records_loaded = 0
        self._compactions = 0
        self._compaction_errors = 0
        self._last_compaction_error: str | None = None
        self._files_removed = 0

    # -- recovery ----------------------------------------------------------
    def load(self, on_corruption: str = "raise", tail_bytes: int = 0) -> RecoveredState:
        """Read the journal: the live state, repaired (see the recovery policy).

        Synchronous; call once, before :meth:`start`.  ``on_corruption`` is
        ``"raise"`` (default: :class:`JournalCorruptionError` on damage in a
        segment that is not the last) or ``"skip"``.  With ``tail_bytes``, the
        records deleted by the newest files (the last ones whose sizes add up to
        at least ``tail_bytes``) are kept in :attr:`RecoveredState.deleted_recently`.
        """
        if self._state is not NEW:
            raise JournalStateError(f"load() must come first (journal is {self._state})")
        if on_corruption not in ("raise", "skip"):
            raise ValueError("on_corruption must be 'raise' or 'skip'")
        files = self._files
        state = RecoveredState()
        removed = state.removed_files
        data_files: dict[int, str] = {}
        compacted: dict[int, tuple[str, int]] = {}
        for name in files.list():
            if name.startswith(FILE_PREFIX) and name.endswith(TMP_SUFFIX):
                files.remove(name)
                removed.append(name)
                continue
            m = _NAME_RE.match(name)
            if not m:
                continue
            seq = int(m.group(1))
            if m.group(2) == "jnl":
                data_files[seq] = name
            else:
                try:
                    header = decode_file_header(files.read(name, 0, FILE_HEADER_SIZE))
                except FormatError as exc:
                    raise JournalCorruptionError(
                        f"journal file {name}: {exc} (a compacted file is synced before it gets "
                        f"its name, so this is corruption)",
                        name,
                        0,
                    ) from None
                compacted[seq] = (name, header.first_seq)
        # Finish an interrupted compaction: drop whatever a compacted file covers.
        obsolete = []
        for seq, (_name, first) in compacted.items():
            obsolete += [s for s in data_files if first <= s <= seq]
            for other, (_oname, ofirst) in compacted.items():
                if other != seq and first <= ofirst and other <= seq:
                    obsolete.append(("c", other))
        for item in set(obsolete):
            if isinstance(item, tuple):
                name = compacted.pop(item[1])[0]
            else:
                name = data_files.pop(item)
            files.remove(name)
            removed.append(name)
        order = sorted(
            [(seq, name, False) for seq, name in data_files.items()]
            + [(seq, name, True) for seq, (name, _f) in compacted.items()]
        )
        fold = _Fold()
        index = self._index
        watermark = 0
        last_seq = 0
        tail_from = len(order)
        while tail_bytes > 0 and tail_from > 0:
            tail_from -= 1
            tail_bytes -= files.size(order[tail_from][1])
        for position, (seq, name, is_compacted) in enumerate(order):
            last_seq = max(last_seq, seq)
            is_last = position == len(order) - 1
            if position == tail_from:
                fold.deleted = state.deleted_recently
            data = files.read(name)
            try:
                header = decode_file_header(data)
                if header.seq != seq or header.compacted != is_compacted:
                    raise FormatError(
                        f"header says file {header.seq}, compacted={header.compacted}"
                    )
            except FormatError as exc:
                if is_last and not is_compacted:
                    # Being created at the crash: it holds nothing.
                    files.remove(name)
                    removed.append(name)
                    if len(data):
                        state.torn_tail = TornTail(name, 0, len(data), str(exc))
                    break
                raise JournalCorruptionError(f"journal file {name}: {exc}", name, 0) from None
            watermark = max(watermark, header.id_watermark)
            info = _FileInfo(name, seq, header.first_seq, is_compacted)
            index.new_file(info)
            state.files.append(name)
            pos = FILE_HEADER_SIZE
            while True:
                result = scan_records(data, seq, pos)
                for kind, tx_id, record_id, user_type, payload, _off, size in result.records:
                    fold.apply(kind, tx_id, record_id, user_type, payload)
                    index.apply(kind, tx_id, record_id, seq, size)
                state.records_read += len(result.records)
                if result.bad_reason is None:
                    break
                bad = result.end
                if is_last and not is_compacted:
                    after = find_next_record(data, seq, bad + 1)
                    state.torn_tail = TornTail(
                        name, bad, len(data) - bad, result.bad_reason, after is not None
                    )
                    truncate_durably(files, name, bad)
                    break
                where = f"journal file {name} at offset {bad}: {result.bad_reason}"
                if on_corruption == "raise":
                    raise JournalCorruptionError(
                        f"{where}; the file was completely written and synced before a later "
                        f"one was started, so this is corruption, not a torn write. Restore the "
                        f"journal from a backup, or load with on_corruption='skip' to drop the "
                        f"damaged records and keep the rest",
                        name,
                        bad,
                    )
                nxt = find_next_record(data, seq, bad + 1)
                end = len(data) if nxt is None else nxt
                state.corruptions.append(Corruption(name, bad, end - bad, result.bad_reason))
                if nxt is None:
                    break
                info.size += nxt - bad  # count the damage as dead bytes
                pos = nxt
        if removed:
            files.sync_directory()
        state.records = fold.records
        state.orphan_updates = fold.orphan_updates
        state.dropped_transactions = {tx: len(ops) for tx, ops in fold.txs.items()}
        # Uncommitted transactions are gone for good: their bytes are dead, and
        # start() writes a ROLLBACK for each so that no later load or
        # compaction carries them along.
        self._dropped_txs = list(index.txs)
        for tx in self._dropped_txs:
            index.drop_tx(tx)
        self._last_id = max(fold.max_id, watermark)
        self._reserved_id = self._last_id
        state.next_id = self._last_id + 1
        self._next_seq = last_seq + 1
        self._records_loaded = state.records_read
        self._state = LOADED
        return state

    # -- life cycle -----------------------------------------------------------
    def start(self) -> None:
        """Open a new segment and start the writer.  Call after :meth:`load`."""
        if self._state is not LOADED:
            raise JournalStateError(f"start() needs load() first (journal is {self._state})")
        self._state = STARTED
        self._reserved_id = self._last_id + ID_BLOCK_SIZE
        self._roll()
        for tx in self._dropped_txs:
            self._append(_ROLLBACK, tx, 0, 0, b"", False, False)
        self._dropped_txs = []
        self._writer.start()

    def stop(self) -> Deferred:
        """Write and sync everything appended, close the files; fires when done.

        Fires (None) only for a clean stop: everything appended is on disk.
        If the journal is FAILED when the stop ends -- the last sync of the
        stop failed, or a write or sync failed earlier -- it errbacks with
        :attr:`failure` instead: records confirmed as written (``sync=False``)
        but never synced may be lost, and the owner must not report a clean
        stop.  Appends after this errback with :class:`JournalClosedError`.
        A compaction in progress is abandoned (its temporary file is deleted,
        or left for the next :meth:`load` to delete).
        """
        if self._state in (NEW, LOADED, STOPPED):
            self._state = STOPPED
            return succeed(None)
        if self._state is FAILED and self._stop_d is None:
            self._writer.abandon_if_inline()
            self._writer.join()  # it ended with the failure
            return fail(self._writer.failure)
        stopped = Deferred()
        self._stop_watchers.append(stopped)
        if self._stop_d is not None:
            return stopped  # already stopping
        self._state = STOPPING
        self._compaction_cancel = True
        self._stop_d = Deferred()
        self._writer.request_stop(self._stop_d)

        def writer_done(_):
            self._writer.join()
            if self._compacting:
                waiter = Deferred()
                self._compaction_watchers.append(waiter)
                return waiter

        def finished(_):
            self._stop_d = None
            failure = self._writer.failure if self._state is FAILED else None
            if failure is None:
                self._state = STOPPED
            watchers, self._stop_watchers = self._stop_watchers, []
            for d in watchers:
                if failure is None:
                    d.callback(None)
                else:
                    d.errback(Failure(failure))

        self._stop_d.addCallback(writer_done)
        self._stop_d.addBoth(finished)
        if self._inline:
            self.flush()
        return stopped

    def flush(self) -> None:
        """Inline writer: do the pending I/O now.  Thread writer: nothing."""
        if self._state in (STARTED, STOPPING):
            self._writer.flush()

    # -- appends (reactor thread) ---------------------------------------------
    def append_add(self, record_id: int, user_type: int, payload, sync: bool = True) -> Deferred:
        """Add live record ``record_id``; fires (None) once durable (or written, sync=False).

        Raises :class:`DuplicateRecordError` if ``record_id`` is live or an
        open transaction refers to it (see the module documentation).
        """
        if self._state is not STARTED:
            return self._refused()
        if not (0 <= record_id <= MAX_ID and 0 <= user_type <= MAX_USER_TYPE):
            _check_record(record_id, user_type)
        index = self._index
        if record_id in index.live or record_id in index.tx_refs:
            self._duplicate(record_id)
        if record_id > self._last_id:
            self._last_id = record_id
        return self._append(_ADD, 0, record_id, user_type, payload, sync, True)

    def append_update(self, record_id: int, user_type: int, payload, sync: bool = True) -> Deferred:
        """Append an update to live record ``record_id`` (UnknownRecordError if not live)."""
        if self._state is not STARTED:
            return self._refused()
        _check_record(record_id, user_type)
        if record_id not in self._index.live:
            raise UnknownRecordError(f"cannot update journal record {record_id}: it is not live")
        return self._append(_UPDATE, 0, record_id, user_type, payload, sync, True)

    def append_delete(self, record_id: int, sync: bool = True) -> Deferred:
        """Delete live record ``record_id`` (UnknownRecordError if not live)."""
        if self._state is not STARTED:
            return self._refused()
        if record_id not in self._index.live:
            raise UnknownRecordError(f"cannot delete journal record {record_id}: it is not live")
        return self._append(_DELETE, 0, record_id, 0, b"", sync, True)

    def append_add_tx(self, tx_id: int, record_id: int, user_type: int, payload) -> None:
        """ADD inside transaction ``tx_id``; effective at :meth:`append_commit`.

        Returns nothing: the commit's Deferred reports the outcome.  After a
        failure or stop this is a no-op (the commit will errback).  Raises
        :class:`DuplicateRecordError`, as :meth:`append_add` does, if
        ``record_id`` is live or an open transaction (``tx_id`` included)
        refers to it.
        """
        if self._tx_refused():
            return
        _check_record(record_id, user_type)
        _check_id(tx_id, "transaction id")
        index = self._index
        if record_id in index.live or record_id in index.tx_refs:
            self._duplicate(record_id)
        self._bump_ids(tx_id, record_id)
        self._append(_ADD_TX, tx_id, record_id, user_type, payload, False, False)

    def append_update_tx(self, tx_id: int, record_id: int, user_type: int, payload) -> None:
        """UPDATE inside transaction ``tx_id`` (see :meth:`append_add_tx`)."""
        if self._tx_refused():
            return
        _check_record(record_id, user_type)
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        self._append(_UPDATE_TX, tx_id, record_id, user_type, payload, False, False)

    def append_delete_tx(self, tx_id: int, record_id: int) -> None:
        """DELETE inside transaction ``tx_id`` (see :meth:`append_add_tx`)."""
        if self._tx_refused():
            return
        _check_id(record_id, "record id")
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        self._append(_DELETE_TX, tx_id, record_id, 0, b"", False, False)

    def append_commit(self, tx_id: int, sync: bool = True) -> Deferred:
        """Commit ``tx_id``: its records take effect; fires once durable."""
        if self._state is not STARTED:
            return self._refused()
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        return self._append(_COMMIT, tx_id, 0, 0, b"", sync, True)

    def append_rollback(self, tx_id: int, sync: bool = False) -> Deferred:
        """Discard ``tx_id``.  Not synced by default: a lost rollback is an
        uncommitted transaction, which recovery drops anyway."""
        if self._state is not STARTED:
            return self._refused()
        _check_id(tx_id, "transaction id")
        return self._append(_ROLLBACK, tx_id, 0, 0, b"", sync, True)

    def next_id(self) -> int:
        """A new id, larger than every id handed out or seen in the journal."""
        if self._state is NEW:
            raise JournalStateError("next_id() needs load() first")
        self._last_id += 1
        value = self._last_id
        if value > self._reserved_id:
            self._reserved_id = value + ID_BLOCK_SIZE
            if self._state is STARTED:
                self._append(_ID_MARK, 0, self._reserved_id, 0, b"", False, False)
        return value

    # -- flow control ----------------------------------------------------------
    def hold(self) -> None:
        """See :meth:`GroupCommitWriter.hold`: batch appends until :meth:`release`."""
        self._writer.hold()

    def release(self) -> None:
        self._writer.release()

    @property
    def pending_bytes(self) -> int:
        """Bytes appended but not yet written (and synced, if asked)."""
        return self._writer.pending_bytes

    @property
    def writable(self) -> bool:
        """False while :attr:`pending_bytes` >= the limit: pause producers."""
        return self._writer.writable

    def wait_writable(self) -> Deferred:
        """Fires when pending bytes fall to half the limit (at once if writable)."""
        if self._state is not STARTED:
            return succeed(None)
        return self._writer.wait_writable()

    @property
    def failed(self) -> bool:
        return self._state is FAILED

    @property
    def failure(self) -> JournalFailedError | None:
        """The error that failed the journal, if any."""
        return self._writer.failure

    def add_confirm_listener(self, listener):
        """``listener(records confirmed so far)`` after each written batch, on the reactor,
        and ``listener(None)`` if the journal fails: one call for a batch of records,
        where a Deferred per record would cost a callback each.  Returns the counter
        (its ``records_submitted``: the n-th record appended is durable, as its Deferred
        would say, once a listener is told n or more)."""
        self._writer.confirm_listeners.append(listener)
        return self._writer

    # -- compaction --------------------------------------------------------------
    def compact(self) -> Deferred:
        """Compact all closed segments now (normally automatic); fires when done."""
        if self._state is not STARTED:
            return self._refused()
        d = Deferred()
        self._compaction_watchers.append(d)
        if not self._compacting:
            self._start_compaction()
        return d

    def stats(self) -> dict:
        """Counters for management and benchmarks."""
        order = self._index.order
        live = sum(f.live for f in order)
        dead = sum(f.dead for f in order)
        w = self._writer
        return {
            "state": self._state,
            "files": len(order),
            "records": self._records_appended,
            "records_loaded": self._records_loaded,
            "live_records": len(self._index.live),
            "open_transactions": len(self._index.txs),
            "live_bytes": live,
            "dead_bytes": dead,
            "syncs": w.syncs,
            "records_synced": w.records_synced,
            "records_per_sync": w.records_synced / w.syncs if w.syncs else 0.0,
            "batches": w.batches,
            "bytes_written": w.bytes_written,
            "pending_bytes": w.pending_bytes,
            "compactions": self._compactions,
            "compaction_errors": self._compaction_errors,
            "last_compaction_error": self._last_compaction_error,
            "files_removed": self._files_removed,
        }

    # -- internals: reactor side ---------------------------------------------------
    def _refused(self) -> Deferred:
        if self._state is FAILED:
            return fail(self._writer.failure)
        if self._state in (STOPPING, STOPPED):
            return fail(JournalClosedError("the journal is stopped; durable sends are refused"))
        raise JournalStateError(f"append before start() (journal is {self._state})")

    def _tx_refused(self) -> bool:
        if self._state is STARTED:
            return False
        if self._state in (FAILED, STOPPING, STOPPED):
            return True
        raise JournalStateError(f"append before start() (journal is {self._state})")

    def _duplicate(self, record_id: int):
        """Raise the :class:`DuplicateRecordError` for adding ``record_id``."""
        if record_id in self._index.live:
            why = "it is live"
        else:
            why = "an open transaction adds, updates or deletes it"
        raise DuplicateRecordError(
            f"cannot add journal record {record_id}: {why} (a record id must not be "
            f"reused while anything refers to it; take new ids from next_id())"
        )

    def _bump_ids(self, a: int, b: int) -> None:
        if a > self._last_id:
            self._last_id = a
        if b > self._last_id:
            self._last_id = b

    def _append(self, kind, tx_id, record_id, user_type, payload, sync, want_deferred):
        """Encode, account and queue one record (the hot path of every append)."""
        n = RECORD_OVERHEAD + len(payload)
        if n > _MAX_RECORD:
            raise RecordTooLargeError(
                f"record payload of {len(payload)} bytes exceeds the journal limit of "
                f"{MAX_PAYLOAD_SIZE} bytes"
            )
        if self._cur_used + n > self._file_size and self._cur_used > FILE_HEADER_SIZE:
            self._roll()
        seq = self._cur_seq
        head = _RECORD_HEADER_PACK(
            RECORD_MAGIC,
            kind,
            user_type,
            0,
            seq & 0xFFFFFFFF,
            tx_id,
            record_id,
            n - RECORD_OVERHEAD,
        )
        record = b"".join((head, payload, _CRC_PACK(_crc32(payload, _crc32(head)))))
        self._cur_used += n
        self._index.apply(kind, tx_id, record_id, seq, n)
        self._records_appended += 1
        d = Deferred() if want_deferred else None
        self._submit(record, d, None, sync)
        return d

    def _roll(self) -> None:
        """Start segment ``_next_seq``; the writer creates it in queue order."""
        seq = self._next_seq
        self._next_seq += 1
        name = data_name(seq)
        header = encode_file_header(seq, id_watermark=self._reserved_id)
        self._cur_seq = seq
        self._cur_used = FILE_HEADER_SIZE
        self._index.new_file(_FileInfo(name, seq, seq, False))
        self._writer.roll(name, header, name + TMP_SUFFIX, data_name(seq + 1) + TMP_SUFFIX)
        if len(self._index.order) > 1:
            self._index.dead_hint = True  # a closed file may now be reclaimable
            self._maybe_compact()

    def _batch_done(self, waiters: list, records: int, nbytes: int, error, _stop) -> None:
        """Reactor side of one written batch: fire its Deferreds."""
        if error is not None:
            self._fail(error, waiters)
            return
        self._writer.confirm(waiters, nbytes, records)
        if self._index.dead_hint and self._state is STARTED:
            self._reclaim()

    def _fail(self, error, waiters: list) -> None:
        self._state = FAILED
        stop_d, self._stop_d = self._stop_d, None
        self._writer.fail(error, waiters, spare=stop_d)
        if stop_d is None:
            log.error("%s", self._writer.failure)
        else:
            log.error("%s (while stopping: what was written since the last good sync "
                      "may not be on disk)", self._writer.failure)
        if stop_d is not None:
            stop_d.callback(None)

    def _reclaim(self) -> None:
        """Queue removal of the oldest segments that hold nothing live."""
        index = self._index
        index.dead_hint = False
        if self._compacting:
            index.dead_hint = True  # retry once the compaction has swapped
            return
        dead = []
        while len(index.order) > 1 and index.order[0].live == 0:
            dead.append(index.pop_oldest().name)
        if dead:
            self._files_removed += len(dead)
            # The writer syncs everything queued before this op first.
            self._writer.enqueue(partial(self._w_remove, dead))

    def _maybe_compact(self) -> None:
        if self._compacting or self._state is not STARTED:
            return
        closed = self._index.order[:-1]
        if len(closed) < self._compact_min_files:
            return
        used = sum(f.size - FILE_HEADER_SIZE for f in closed)
        live = sum(f.live for f in closed)
        if used and live * 100 < self._compact_percentage * used:
            self._start_compaction()

    def _start_compaction(self) -> None:
        prefix = list(self._index.order[:-1])
        if not prefix or (len(prefix) == 1 and prefix[0].compacted):
            self._compaction_finished(None)
            return
        self._compacting = True
        self._compaction_cancel = False
        barrier = Deferred()
        # Run after everything queued so far: the prefix is then written and synced.
        self._writer.barrier(barrier)
        jobs = [(f.name, f.seq) for f in prefix]
        seq = prefix[-1].seq
        first = prefix[0].first_seq

        def go(_):
            if self._state is not STARTED:
                self._compaction_built(_Cancelled(), len(prefix), seq, first)
            elif self._inline:
                try:
                    outcome = self._compact_build(jobs, seq, first)
                except BaseException as exc:  # noqa: B036 - reported, never raised
                    outcome = exc
                self._compaction_built(outcome, len(prefix), seq, first)
            else:
                threading.Thread(
                    target=self._compact_thread,
                    args=(jobs, seq, first, len(prefix)),
                    name="junction-journal-compactor",
                    daemon=True,
                ).start()

        barrier.addCallbacks(go, lambda f: self._compaction_built(f.value, len(prefix), seq, first))

    def _compaction_finished(self, error) -> None:
        """The compaction in progress ended (``error`` None, or why it failed)."""
        self._compacting = False
        if error is not None and not isinstance(error, _Cancelled):
            self._compaction_errors += 1
            self._last_compaction_error = f"{type(error).__name__}: {error}"
        watchers, self._compaction_watchers = self._compaction_watchers, []
        for d in watchers:
            if error is None or isinstance(error, _Cancelled):
                d.callback(None)
            else:
                d.errback(Failure(error))

    def _compaction_built(self, outcome, count: int, seq: int, first: int) -> None:
        """Reactor side: the compacted file is written; queue the swap."""
        if isinstance(outcome, BaseException):
            self._compaction_finished(outcome)
            return
        if self._state is not STARTED:
            # Stopping or failed: leave the .tmp for the next load() to delete.
            self._compaction_finished(_Cancelled())
            return
        name = compacted_name(seq)
        info = _FileInfo(name, seq, first, True)
        info.size = outcome
        prefix = self._index.replace_prefix(count, info)
        swapped = Deferred()
        obsolete = [f.name for f in prefix]
        self._writer.enqueue(partial(self._w_swap, name + TMP_SUFFIX, name, obsolete), swapped)

        def done(_):
            self._compactions += 1
            self._compaction_finished(None)
            if self._state is STARTED:
                self._reclaim()

        swapped.addCallbacks(done, lambda f: self._compaction_finished(f.value))

    def _compact_thread(self, jobs, seq, first, count) -> None:
        try:
            outcome = self._compact_build(jobs, seq, first)
        except BaseException as exc:  # noqa: B036 - handed to the reactor
            outcome = exc
        try:
            self._reactor.callFromThread(self._compaction_built, outcome, count, seq, first)
        except Exception:  # reactor gone; nothing to report to
            pass

    def _compact_build(self, jobs, seq: int, first: int) -> int:
        """Fold files ``jobs`` into ``journal-<seq>.cjnl.tmp`` (synced); its size.

        Runs on the compactor thread (or inline); touches no reactor state.
        """
        files = self._files
        fold = _Fold()
        watermark = 0
        for name, file_seq in jobs:
            data = files.read(name)
            header = decode_file_header(data)
            watermark = max(watermark, header.id_watermark)
            result = scan_records(data, file_seq)
            if result.bad_reason is not None:
                raise JournalCorruptionError(
                    f"journal file {name} at offset {result.end}: {result.bad_reason} "
                    f"(found while compacting; compaction abandoned)",
                    name,
                    result.end,
                )
            for kind, tx_id, record_id, user_type, payload, _off, _size in result.records:
                fold.apply(kind, tx_id, record_id, user_type, payload)
            if self._compaction_cancel:
                raise _Cancelled()
        watermark = max(watermark, fold.max_id)
        tmp = compacted_name(seq) + TMP_SUFFIX
        handle = files.open(tmp, create=True)
        try:
            offset = 0
            chunk = [
                encode_file_header(seq, first_seq=first, id_watermark=watermark, compacted=True)
            ]
            chunk_bytes = FILE_HEADER_SIZE

            def put(record: bytes):
                nonlocal chunk_bytes, offset, chunk
                chunk.append(record)
                chunk_bytes += len(record)
                if chunk_bytes >= _COMPACT_CHUNK:
                    offset = write_all(handle, b"".join(chunk), offset)
                    chunk, chunk_bytes = [], 0
                    if self._compaction_cancel:
                        raise _Cancelled()

            for record_id, info in fold.records.items():
                put(encode_record(_ADD, seq, 0, record_id, info.user_type, info.payload))
                for utype, payload in info.updates:
                    put(encode_record(_UPDATE, seq, 0, record_id, utype, payload))
            for tx_id, ops in fold.txs.items():
                for kind, record_id, utype, payload in ops:
                    put(encode_record(kind, seq, tx_id, record_id, utype, payload))
            if chunk:
                offset = write_all(handle, b"".join(chunk), offset)
            handle.fsync()
        except BaseException:
            handle.close()
            try:
                files.remove(tmp)
            except Exception:
                pass
            raise
        handle.close()
        return offset

    # -- internals: the journal's own writer operations (writer thread) ---------
    def _w_remove(self, names: list) -> None:
        """Remove reclaimed segments once everything queued before is synced."""
        w = self._writer
        w.sync_if_dirty()
        for name in names:
            w.doing("remove", name)
            self._files.remove(name)
        w.dir_sync()

    def _w_swap(self, tmp: str, final: str, obsolete: list) -> None:
        """Give a compacted file its name, then remove the segments it covers."""
        w = self._writer
        w.doing("rename", tmp)
        self._files.rename(tmp, final)
        w.dir_sync()
        for name in obsolete:
            w.doing("remove", name)
            self._files.remove(name)
        w.dir_sync()


def _failed_error(op: str, name: str, exc) -> JournalFailedError:
    return JournalFailedError(f"journal {op} failed on {name}: {exc}; durable sends are refused")


def _check_id(value: int, what: str) -> None:
    if not 0 <= value <= MAX_ID:
        raise ValueError(f"journal {what} {value} is outside 0..2**64-1")


def _check_record(record_id: int, user_type: int) -> None:
    if not 0 <= record_id <= MAX_ID:
        raise ValueError(f"journal record id {record_id} is outside 0..2**64-1")
    if not 0 <= user_type <= MAX_USER_TYPE:
        raise ValueError(f"journal user type {user_type} is outside 0..{MAX_USER_TYPE}")
