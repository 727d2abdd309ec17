"""Compaction: replacing the oldest segments by one file that folds to the same state.

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
   :mod:`.fold`) -- was already written when the DELETE_TX was, or is
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

The journal does the reclaiming (it only queues removals to its writer); the
:class:`Compactor` here does the compaction, on the journal's behalf.
"""

from __future__ import annotations

import threading
from functools import partial

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from .errors import JournalCorruptionError
from .fold import ADD, UPDATE, Fold
from .groupcommit import write_all
from .index import FileInfo, Index
from .records import (
    FILE_HEADER_SIZE,
    decode_file_header,
    encode_file_header,
    encode_record,
    scan_records,
)
from .segments import TMP_SUFFIX, compacted_name

__all__ = ["COMPACT_MIN_FILES", "COMPACT_PERCENTAGE", "COMPACT_CHUNK", "Compactor"]

#: Artemis ``journal-compact-min-files``: compaction needs this many closed segments.
COMPACT_MIN_FILES = 10
#: Artemis ``journal-compact-percentage``: compact when closed segments are
#: less than this percent live.
COMPACT_PERCENTAGE = 30
#: The compactor writes its output in chunks of about this size.
COMPACT_CHUNK = 1024 * 1024


class _Cancelled(Exception):
    """The journal stopped (or failed) while a compaction was under way."""


class Compactor:
    """Compacts one journal's closed segments: when, on which thread, and the swap.

    Shares the journal's ``index``, ``writer``, ``files`` and ``reactor``.
    ``started()`` tells whether the journal is STARTED (a compaction that
    finds it stopping or failed is abandoned); ``swapped()`` is called after
    each swap while it is, so that the journal reclaims what became dead.
    ``inline`` builds the compacted file on the reactor thread, as the
    journal's inline writer does its I/O.
    """

    def __init__(
        self,
        index: Index,
        writer,
        files,
        reactor,
        *,
        inline: bool,
        started,
        swapped,
        min_files: int = COMPACT_MIN_FILES,
        percentage: int = COMPACT_PERCENTAGE,
    ):
        self._index = index
        self._writer = writer
        self._files = files
        self._reactor = reactor
        self._inline = inline
        self._started = started
        self._swapped = swapped
        self.min_files = min_files
        self.percentage = percentage
        #: A compaction is in progress (from its barrier to its swap).
        self.running = False
        #: Set when the journal stops: the compacting thread gives up at its next check.
        self.cancel = False
        #: Fired (None, or the error) when the compaction in progress ends.
        self.watchers: list[Deferred] = []
        # Statistics.
        self.compactions = 0
        self.errors = 0
        self.last_error: str | None = None

    def request(self) -> Deferred:
        """Compact all closed segments now; fires when done (:meth:`.journal.Journal.compact`)."""
        d = Deferred()
        self.watchers.append(d)
        if not self.running:
            self._start()
        return d

    def wait(self) -> Deferred:
        """Fires when the compaction in progress ends (call only while :attr:`running`)."""
        waiter = Deferred()
        self.watchers.append(waiter)
        return waiter

    def maybe_start(self) -> None:
        """Start a compaction if the closed segments call for one (see above)."""
        if self.running or not self._started():
            return
        closed = self._index.order[:-1]
        if len(closed) < self.min_files:
            return
        used = sum(f.size - FILE_HEADER_SIZE for f in closed)
        live = sum(f.live for f in closed)
        if used and live * 100 < self.percentage * used:
            self._start()

    def _start(self) -> None:
        """Compact every closed segment: after a barrier, on a thread (or inline)."""
        prefix = list(self._index.order[:-1])
        if not prefix or (len(prefix) == 1 and prefix[0].compacted):
            self._finished(None)
            return
        self.running = True
        self.cancel = False
        barrier = Deferred()
        # Run after everything queued so far: the prefix is then written and synced.
        self._writer.barrier(barrier)
        jobs = [(f.name, f.seq) for f in prefix]
        seq = prefix[-1].seq
        first = prefix[0].first_seq

        def go(_):
            if not self._started():
                self._built(_Cancelled(), len(prefix), seq, first)
            elif self._inline:
                try:
                    outcome = self._build(jobs, seq, first)
                except BaseException as exc:  # noqa: B036 - reported, never raised
                    outcome = exc
                self._built(outcome, len(prefix), seq, first)
            else:
                threading.Thread(
                    target=self._build_on_thread,
                    args=(jobs, seq, first, len(prefix)),
                    name="junction-journal-compactor",
                    daemon=True,
                ).start()

        barrier.addCallbacks(go, lambda f: self._built(f.value, len(prefix), seq, first))

    def _finished(self, error) -> None:
        """The compaction in progress ended (``error`` None, or why it failed)."""
        self.running = False
        if error is not None and not isinstance(error, _Cancelled):
            self.errors += 1
            self.last_error = f"{type(error).__name__}: {error}"
        watchers, self.watchers = self.watchers, []
        for d in watchers:
            if error is None or isinstance(error, _Cancelled):
                d.callback(None)
            else:
                d.errback(Failure(error))

    def _built(self, outcome, count: int, seq: int, first: int) -> None:
        """Reactor side: the compacted file is written; queue the swap."""
        if isinstance(outcome, BaseException):
            self._finished(outcome)
            return
        if not self._started():
            # Stopping or failed: leave the .tmp for the next load() to delete.
            self._finished(_Cancelled())
            return
        name = compacted_name(seq)
        info = FileInfo(name, seq, first, True)
        info.size = outcome
        prefix = self._index.replace_prefix(count, info)
        swapped = Deferred()
        obsolete = [f.name for f in prefix]
        self._writer.enqueue(partial(self._w_swap, name + TMP_SUFFIX, name, obsolete), swapped)

        def done(_):
            self.compactions += 1
            self._finished(None)
            if self._started():
                self._swapped()

        swapped.addCallbacks(done, lambda f: self._finished(f.value))

    def _build_on_thread(self, jobs, seq, first, count) -> None:
        try:
            outcome = self._build(jobs, seq, first)
        except BaseException as exc:  # noqa: B036 - handed to the reactor
            outcome = exc
        try:
            self._reactor.callFromThread(self._built, outcome, count, seq, first)
        except Exception:  # reactor gone; nothing to report to
            pass

    def _build(self, jobs, seq: int, first: int) -> int:
        """Fold files ``jobs`` into ``journal-<seq>.cjnl.tmp`` (synced); its size.

        Runs on the compactor thread (or inline); touches no reactor state.
        """
        files = self._files
        fold = Fold()
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
            if self.cancel:
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
                if chunk_bytes >= COMPACT_CHUNK:
                    offset = write_all(handle, b"".join(chunk), offset)
                    chunk, chunk_bytes = [], 0
                    if self.cancel:
                        raise _Cancelled()

            for record_id, info in fold.records.items():
                put(encode_record(ADD, seq, 0, record_id, info.user_type, info.payload))
                for utype, payload in info.updates:
                    put(encode_record(UPDATE, seq, 0, record_id, utype, payload))
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

    # -- the compactor's writer operation (writer thread) -----------------------
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
