"""The broker's persistent journal: the :class:`Journal` and its appends.

A journal is a directory of append-only segment files (:mod:`.segments`) of
records (:mod:`.records`) whose meaning is one fold (:mod:`.fold`: what it
stores, and the contract on record ids).  The :class:`Journal` ties the parts
together: it is read back once at startup (:meth:`Journal.load`, see
:mod:`.recovery`), then appends encode records on the reactor thread, account
for them in the run-time index (:mod:`.index`) and hand them to the
group-commit writer (:mod:`.groupcommit`); files that hold nothing live are
removed and mostly dead ones compacted (:mod:`.compaction`).

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
batch held more than one record *that asked for a sync*.  An isolated
append, and a single producer that sends its next message as soon as the
last is confirmed, are never delayed (a plain minimum interval cut such a
producer from ~5,700 to ~1,300 records/s at 500 us, p50 0.11 -> 0.59 ms);
records without sync beside it (a consumer's acks) are not concurrency.  The adaptive batching alone
already exceeds the throughput target; the interval only caps the fsync rate
(at 1/interval) under load, for a disk that suffers from many small syncs.
Default :data:`DEFAULT_BUFFER_TIMEOUT_NS` is 0 (no wait); Artemis's 500 us
(the broker.xml default) is safe to pass.

A record with ``sync=False`` is confirmed once written to the OS; if its batch
also holds a sync record it is confirmed with the batch, after the sync.  The
adaptive writer holds such a record, while nothing pending asks for a sync, up
to ``buffer_timeout_ns`` for a record that does to carry it (as Artemis's
buffer holds it; :mod:`.groupcommit`).

The default writer, ``writer="adaptive"``, is that thread, except for a
*lone* batch (the writer idle, the last sync serving at most one record that
asked for it, and fast): the reactor writes and syncs it itself at the end of
the read that appended it, which saves the two thread hand-offs that cost more
than the sync (:mod:`.groupcommit` has the rule and the measurements);
``writer="thread"`` always hands over.  ``writer="inline"`` does the same I/O
synchronously on the reactor thread, in a ``reactor.callLater(0)`` call after
the appends: deterministic, for tests with a ``Clock``, and for tools.

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
import zlib
from functools import partial

from twisted.internet.defer import Deferred, fail, succeed
from twisted.python.failure import Failure

from .compaction import COMPACT_MIN_FILES, COMPACT_PERCENTAGE, Compactor
from .errors import (
    DuplicateRecordError,
    JournalClosedError,
    JournalFailedError,
    JournalStateError,
    UnknownRecordError,
    failed_error,
)
from .files import OSFiles
from .fold import ADD, ADD_TX, COMMIT, DELETE, DELETE_TX, ID_MARK, ROLLBACK, UPDATE, UPDATE_TX
from .groupcommit import (
    FAILED,
    LOADED,
    NEW,
    STARTED,
    STOPPED,
    STOPPING,
    GroupCommitWriter,
    default_reactor,
)
from .index import FileInfo, Index
from .records import (
    CRC_STRUCT,
    FILE_HEADER_SIZE,
    MAX_ID,
    MAX_PAYLOAD_SIZE,
    MAX_USER_TYPE,
    RECORD_HEADER_STRUCT,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    RecordTooLargeError,
    encode_file_header,
)
from .recovery import RecoveredState, recover
from .segments import DEFAULT_FILE_SIZE, MIN_FILE_SIZE, TMP_SUFFIX, data_name

__all__ = ["Journal", "DEFAULT_BUFFER_TIMEOUT_NS", "MAX_PENDING_BYTES", "ID_BLOCK_SIZE"]

log = logging.getLogger(__name__)

# -- limits and defaults (all named, all documented) ----------------------

#: Minimum interval between the starts of two syncs (Artemis
#: ``journal-buffer-timeout``).  0: adaptive batching only (measured with
#: ``bench/journal.py``, see "Writing" above).
DEFAULT_BUFFER_TIMEOUT_NS = 0
#: The writers a journal can have (see the module documentation, "Writing").
WRITERS = ("adaptive", "thread", "inline")

#: Encoded records waiting for the writer above which :attr:`Journal.writable`
#: is false (producer flow control).  Appends still succeed.
MAX_PENDING_BYTES = 8 * 1024 * 1024
#: Ids reserved per ``ID_MARK`` record.
ID_BLOCK_SIZE = 10_000

# The record encoding of records.encode_record, inlined in Journal._append.
_RECORD_HEADER_PACK = RECORD_HEADER_STRUCT.pack
_CRC_PACK = CRC_STRUCT.pack
_crc32 = zlib.crc32
_MAX_RECORD = RECORD_OVERHEAD + MAX_PAYLOAD_SIZE


class Journal:
    """A journal in ``directory`` (see the module documentation).

    ``files`` replaces the file layer (default :class:`.files.OSFiles` over
    ``directory``), e.g. with :class:`.files.FaultyFiles`.  ``sync=False``
    turns every fsync of records off (data reaches the OS only; segment
    switches and :meth:`stop` still sync): for throw-away test brokers.
    ``writer`` is ``"adaptive"`` (production: the writer thread, lone batches
    on the reactor thread; see :mod:`.groupcommit`), ``"thread"`` (every batch
    on the writer thread) or ``"inline"`` (I/O on the reactor thread in a
    ``callLater(0)``; deterministic tests).
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
        writer: str = "adaptive",
        preallocate: bool = True,
        compact_min_files: int = COMPACT_MIN_FILES,
        compact_percentage: int = COMPACT_PERCENTAGE,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ):
        if file_size < MIN_FILE_SIZE:
            raise ValueError(f"journal file_size {file_size} is below the minimum {MIN_FILE_SIZE}")
        if writer not in WRITERS:
            raise ValueError(f"journal writer must be one of {', '.join(WRITERS)}, not {writer!r}")
        if not 0 <= compact_percentage <= 100:
            raise ValueError("compact_percentage must be 0..100")
        if directory is None and files is None:
            raise ValueError("a journal needs a directory (or a file layer in files=)")
        self.directory = os.fspath(directory) if directory is not None else None
        self._files = files if files is not None else OSFiles(self.directory)
        self._file_size = file_size
        self._reactor = reactor if reactor is not None else default_reactor()
        self._inline = writer == "inline"

        self._state = NEW
        self._index = Index()
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
            make_error=failed_error,
            max_pending_bytes=max_pending_bytes,
            thread_name="junction-journal-writer",
            buffer_timeout_ns=buffer_timeout_ns,
            preallocate=file_size if preallocate else 0,
            prealloc_thread_name="junction-journal-prealloc",
            directory_label=self.directory or "journal directory",
            adaptive=writer == "adaptive",
        )
        self._submit = self._writer.submit
        #: hold() / release(): the writer's own (see GroupCommitWriter.hold).  Every protocol
        #: adapter brackets each read with them, so they are bound here rather than called
        #: through a method of this class: two calls fewer per read.
        self.hold = self._writer.hold
        self.release = self._writer.release
        self._compactor = Compactor(
            self._index,
            self._writer,
            self._files,
            self._reactor,
            inline=self._inline,
            started=self._started,
            swapped=self._reclaim,
            min_files=compact_min_files,
            percentage=compact_percentage,
        )

        # Reactor-side bookkeeping.
        self._stop_d: Deferred | None = None
        self._stop_watchers: list[Deferred] = []

        # Statistics.
        self._records_appended = 0
        self._records_loaded = 0
        self._files_removed = 0

    # -- recovery ----------------------------------------------------------
    def load(self, on_corruption: str = "raise", tail_bytes: int = 0) -> RecoveredState:
        """Read the journal: the live state, repaired (see :mod:`.recovery`).

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
        recovered = recover(self._files, self._index, on_corruption, tail_bytes)
        state = recovered.state
        self._dropped_txs = recovered.dropped_txs
        self._last_id = recovered.last_id
        self._reserved_id = self._last_id
        self._next_seq = recovered.last_seq + 1
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
            self._append(ROLLBACK, tx, 0, 0, b"", False, False)
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
        self._compactor.cancel = True
        self._stop_d = Deferred()
        self._writer.request_stop(self._stop_d)

        def writer_done(_):
            self._writer.join()
            if self._compactor.running:
                return self._compactor.wait()

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
        open transaction refers to it (see :mod:`.fold`).
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
        return self._append(ADD, 0, record_id, user_type, payload, sync, True)

    def append_update(self, record_id: int, user_type: int, payload, sync: bool = True) -> Deferred:
        """Append an update to live record ``record_id`` (UnknownRecordError if not live)."""
        if self._state is not STARTED:
            return self._refused()
        _check_record(record_id, user_type)
        if record_id not in self._index.live:
            raise UnknownRecordError(f"cannot update journal record {record_id}: it is not live")
        return self._append(UPDATE, 0, record_id, user_type, payload, sync, True)

    def append_delete(self, record_id: int, sync: bool = True) -> Deferred:
        """Delete live record ``record_id`` (UnknownRecordError if not live)."""
        if self._state is not STARTED:
            return self._refused()
        if record_id not in self._index.live:
            raise UnknownRecordError(f"cannot delete journal record {record_id}: it is not live")
        return self._append(DELETE, 0, record_id, 0, b"", sync, True)

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
        self._append(ADD_TX, tx_id, record_id, user_type, payload, False, False)

    def append_update_tx(self, tx_id: int, record_id: int, user_type: int, payload) -> None:
        """UPDATE inside transaction ``tx_id`` (see :meth:`append_add_tx`)."""
        if self._tx_refused():
            return
        _check_record(record_id, user_type)
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        self._append(UPDATE_TX, tx_id, record_id, user_type, payload, False, False)

    def append_delete_tx(self, tx_id: int, record_id: int) -> None:
        """DELETE inside transaction ``tx_id`` (see :meth:`append_add_tx`)."""
        if self._tx_refused():
            return
        _check_id(record_id, "record id")
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        self._append(DELETE_TX, tx_id, record_id, 0, b"", False, False)

    def append_commit(self, tx_id: int, sync: bool = True) -> Deferred:
        """Commit ``tx_id``: its records take effect; fires once durable."""
        if self._state is not STARTED:
            return self._refused()
        _check_id(tx_id, "transaction id")
        self._bump_ids(tx_id, 0)
        return self._append(COMMIT, tx_id, 0, 0, b"", sync, True)

    def append_rollback(self, tx_id: int, sync: bool = False) -> Deferred:
        """Discard ``tx_id``.  Not synced by default: a lost rollback is an
        uncommitted transaction, which recovery drops anyway."""
        if self._state is not STARTED:
            return self._refused()
        _check_id(tx_id, "transaction id")
        return self._append(ROLLBACK, tx_id, 0, 0, b"", sync, True)

    def next_id(self) -> int:
        """A new id, larger than every id handed out or seen in the journal."""
        if self._state is NEW:
            raise JournalStateError("next_id() needs load() first")
        self._last_id += 1
        value = self._last_id
        if value > self._reserved_id:
            self._reserved_id = value + ID_BLOCK_SIZE
            if self._state is STARTED:
                self._append(ID_MARK, 0, self._reserved_id, 0, b"", False, False)
        return value

    # -- flow control ----------------------------------------------------------
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
        return self._compactor.request()

    def stats(self) -> dict:
        """Counters for management and benchmarks."""
        order = self._index.order
        live = sum(f.live for f in order)
        dead = sum(f.dead for f in order)
        w = self._writer
        c = self._compactor
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
            "reactor_batches": w.reactor_batches,
            "bytes_written": w.bytes_written,
            "pending_bytes": w.pending_bytes,
            "compactions": c.compactions,
            "compaction_errors": c.errors,
            "last_compaction_error": c.last_error,
            "files_removed": self._files_removed,
        }

    # -- internals: reactor side ---------------------------------------------------
    def _started(self) -> bool:
        return self._state is STARTED

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
        self._index.new_file(FileInfo(name, seq, seq, False))
        self._writer.roll(name, header, name + TMP_SUFFIX, data_name(seq + 1) + TMP_SUFFIX)
        if len(self._index.order) > 1:
            self._index.dead_hint = True  # a closed file may now be reclaimable
            self._compactor.maybe_start()

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
        if self._compactor.running:
            index.dead_hint = True  # retry once the compaction has swapped
            return
        dead = []
        while len(index.order) > 1 and index.order[0].live == 0:
            dead.append(index.pop_oldest().name)
        if dead:
            self._files_removed += len(dead)
            # The writer syncs everything queued before this op first.
            self._writer.enqueue(partial(self._w_remove, dead))

    # -- internals: the journal's own writer operations (writer thread) ---------
    def _w_remove(self, names: list) -> None:
        """Remove reclaimed segments once everything queued before is synced."""
        w = self._writer
        w.sync_if_dirty()
        for name in names:
            w.doing("remove", name)
            self._files.remove(name)
        w.dir_sync()


def _check_id(value: int, what: str) -> None:
    if not 0 <= value <= MAX_ID:
        raise ValueError(f"journal {what} {value} is outside 0..2**64-1")


def _check_record(record_id: int, user_type: int) -> None:
    if not 0 <= record_id <= MAX_ID:
        raise ValueError(f"journal record id {record_id} is outside 0..2**64-1")
    if not 0 <= user_type <= MAX_USER_TYPE:
        raise ValueError(f"journal user type {user_type} is outside 0..{MAX_USER_TYPE}")
