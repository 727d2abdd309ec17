"""Group commit: the writer that the journal and the page stores share.

An owner (:class:`.journal.Journal`, :class:`junction.brokercore.paging.PageStore`)
encodes records on the reactor thread and hands them to a
:class:`GroupCommitWriter` with :meth:`~GroupCommitWriter.submit`.  The
writer keeps one pending batch under a lock; a single writer thread
repeatedly takes the *whole* batch, writes its records with one ``write``
and, if any record in it asked for ``sync``, one ``fdatasync``, then hands
the batch back to the reactor with one ``reactor.callFromThread`` of the
owner's ``on_batch`` callback, which confirms it (:meth:`~GroupCommitWriter.confirm`
fires the batch's Deferreds) or fails the owner.  While the thread writes
and syncs, new records gather into the next batch, so batches grow with
load by themselves.  ``inline=True`` does the same I/O on the reactor thread
in a ``reactor.callLater(0)`` after the submissions: deterministic, for
tests with a ``Clock``.  The module documentation of :mod:`.journal`
("Writing") has the measurements behind this design.

``adaptive=True`` (the journal's writer) keeps the thread but lets the
reactor do a *lone* batch itself: when the writer thread is idle, the last
synced batch held at most one record that asked for a sync (one producer
waiting for each confirmation, not many) and the last sync took at most
:data:`REACTOR_SYNC_MAX_NS`, the records submitted are written (and synced)
on the reactor thread in a ``callLater(0)`` made at the end of the read that
submitted them (:meth:`~GroupCommitWriter.release`; at the submission when
no read holds the writer).  The reactor runs the calls due in the order they
were made, so the delivery pass the read scheduled runs first: a consumer's
dispatch does not wait for the disk.  Before the sync the reactor sends what
is waiting in its transports' buffers (that dispatch, on a transport without
eager writes), and after the batch's callbacks the confirmations they wrote
(a producer's Response), rather than a poll later.  Handing one record to the
thread and back costs more than the sync itself (two thread switches, the
condition variable, the reactor's waker, the GIL passed back and forth): one
synchronous OpenWire producer went from 1,000-1,250 to 1,500-1,600 msg/s and
the node's CPU per message from 700-770 to 400-440 us
(``bench/openwire_throughput.py``, docs/performance.md); a lone 300-byte
record from 3,700 to 6,200 records/s at 89 instead of 166 us of CPU
(``bench/journal.py``).  Records that asked for no sync (a consumer's
acknowledgement) while nothing pending asks for one are written by the
reactor only after ``buffer_timeout_ns`` (Artemis's ``journal-buffer-timeout``,
which holds such records in its buffer as long), unless a record that asks
for a sync comes first and takes them along: a synchronous producer's next
message usually does, which saves a write and a turn of the reactor per
acknowledgement (OpenWire, one synchronous producer and its consumer:
1.07-1.13x msg/s at 0.93x the node's CPU per message).  A record's order in
the file is kept either way, so whatever is confirmed after it was written
with it or before.  As soon as records of several producers meet in a
batch, or a sync is slow, batches go to the thread again, which overlaps the
disk with the reactor's work.  Operations (a file switch, a compaction's
swap, the stop) always go to the thread.

Besides records the queue carries *operations*: callables run on the
writer thread in queue order (so after every record submitted before them
is written), whose Deferred fires with their batch.  The writer provides
the ones both owners need -- start a new file (:meth:`~GroupCommitWriter.roll`),
finish (:meth:`~GroupCommitWriter.request_stop`) -- and the owners queue
their own (removing files, swapping in a compacted file) with
:meth:`~GroupCommitWriter.enqueue`, using :meth:`~GroupCommitWriter.doing`,
:meth:`~GroupCommitWriter.sync_if_dirty` and :meth:`~GroupCommitWriter.dir_sync`.

Invariants the owners' recovery relies on:

* before the writer moves on to a new file it fsyncs the old one, whatever
  the records asked for, and it syncs the directory after creating a file:
  **only the last file can have a torn tail**;
* a Deferred fires (success) only after its record is written and, if any
  record of its batch asked for it and the owner syncs, synced;
* after a write or fsync error the writer stops for good: the failing batch,
  every queued batch and the flow-control waiters are failed
  (:meth:`~GroupCommitWriter.fail`), and the owner refuses every later
  append.  An fsync is never retried (after a failed fsync Linux may have
  dropped the dirty pages; a retry that "succeeds" proves nothing).

Flow control: encoded records not yet written count in
:attr:`GroupCommitWriter.pending_bytes`; :attr:`~GroupCommitWriter.writable`
is false from ``max_pending_bytes`` on, and
:meth:`~GroupCommitWriter.wait_writable` fires at half of it.

New files can be *preallocated*: zero-filled to ``preallocate`` bytes and
synced before use, so later ``fdatasync`` calls need not update the file
size in the file system's journal.  With the writer thread, a
:class:`Preallocator` thread prepares the next file while the current one
fills (see :meth:`~GroupCommitWriter.roll`).
"""

from __future__ import annotations

import errno
import threading
import time
from contextlib import suppress
from functools import partial

from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

__all__ = [
    "GroupCommitWriter",
    "Preallocator",
    "write_all",
    "zeros",
    "default_reactor",
    "ZERO_CHUNK",
    "NEW",
    "LOADED",
    "STARTED",
    "STOPPING",
    "STOPPED",
    "FAILED",
]

#: Life-cycle states of a store built on the writer (the values appear in stats).
NEW, LOADED, STARTED, STOPPING, STOPPED, FAILED = (
    "new",
    "loaded",
    "started",
    "stopping",
    "stopped",
    "failed",
)

#: Writes of zeros when preallocating a file go in chunks of this size.
ZERO_CHUNK = 1024 * 1024

#: An adaptive writer lets the reactor thread sync a lone batch only while the
#: last sync took at most this long (ns): a slow disk never stalls the reactor
#: for longer than one such sync.
REACTOR_SYNC_MAX_NS = 1_000_000


def default_reactor():
    """The global reactor, imported only when a store is built without one."""
    from twisted.internet import reactor

    return reactor


def write_all(handle, data, offset: int) -> int:
    """Write all of ``data`` at ``offset`` despite short writes; the new offset."""
    view = memoryview(data)
    total = len(view)
    done = 0
    while done < total:
        n = handle.write(view[done:], offset + done)
        if not n or n < 0:
            raise OSError(errno.EIO, "write made no progress")
        done += n
    return offset + total


_ZEROS = b""


def zeros(n: int) -> memoryview:
    """``n`` zero bytes (n <= the zero chunk), without allocating each time."""
    global _ZEROS
    if len(_ZEROS) < n:
        _ZEROS = bytes(max(n, ZERO_CHUNK))
    return memoryview(_ZEROS)[:n]


def _zero_fill(handle, offset: int, size: int) -> int:
    while offset < size:
        offset = write_all(handle, zeros(min(ZERO_CHUNK, size - offset)), offset)
    return offset


def _noop() -> None:
    return None


def _STOP() -> None:
    """The stop operation's marker in the queue (see :meth:`GroupCommitWriter.request_stop`)."""


class Preallocator:
    """Zero-fills the next file on its own thread before the writer needs it.

    Filling a 10 MiB file and syncing it takes ~11 ms; done at the switch
    itself it would stall one batch for that long.  The file is prepared
    under a temporary name (one the owner's recovery deletes); at the switch
    the writer writes the header into it, syncs, renames it and syncs the
    directory (~0.3 ms).  Only one file is prepared ahead.
    """

    def __init__(self, files, file_size: int, thread_name: str):
        self._files = files
        self._file_size = file_size
        self._cond = threading.Condition()
        self._wanted: str | None = None
        self._busy: str | None = None
        self._done: dict[str, BaseException | None] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name=thread_name, daemon=True)
        self._thread.start()

    def request(self, name: str) -> None:
        with self._cond:
            self._wanted = name
            self._cond.notify_all()

    def take(self, name: str) -> bool:
        """True if ``name`` is prepared and now belongs to the caller."""
        with self._cond:
            if self._wanted != name and self._busy != name and name not in self._done:
                return False
            while name not in self._done:
                self._cond.wait()
            return self._done.pop(name) is None

    def stop(self) -> None:
        """Stop the thread and delete a prepared file nobody took."""
        with self._cond:
            self._stopping = True
            self._wanted = None
            self._cond.notify_all()
        self._thread.join()
        for name, error in self._done.items():
            if error is None:
                try:
                    self._files.remove(name)
                except Exception:
                    pass
        self._done.clear()

    def _main(self) -> None:
        while True:
            with self._cond:
                while self._wanted is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                name, self._wanted = self._wanted, None
                self._busy = name
            error = None
            try:
                handle = self._files.open(name, create=True)
                try:
                    _zero_fill(handle, 0, self._file_size)
                    handle.fsync()
                finally:
                    handle.close()
            except Exception as exc:
                error = exc
            with self._cond:
                self._busy = None
                self._done[name] = error
                self._cond.notify_all()


class GroupCommitWriter:
    """One owner's batching writer (see the module documentation).

    ``files`` is the owner's file layer (:mod:`.files`; the attribute
    :attr:`files` may be set until :meth:`start`).  ``on_batch(waiters,
    records, nbytes, error, stop)`` is called on the reactor thread for every
    batch taken: ``waiters`` the batch's ``(Deferred, result)`` pairs,
    ``records``/``nbytes`` the records (and their bytes) written, ``error``
    None or ``(operation, file name, exception)``, ``stop`` whether the batch
    held the stop operation.  It must call :meth:`confirm` (success) or
    :meth:`fail`.  ``make_error(operation, name, exception)`` builds the
    exception every failed Deferred gets.  ``sync=False`` turns record
    fsyncs off (file switches and stop still sync).  ``buffer_timeout_ns``
    is the minimum interval between the starts of two syncs when the last
    synced batch held more than one record that asked for a sync (see
    :mod:`.journal`).
    ``preallocate`` is the size new files are zero-filled to (0: none).
    ``directory_label`` names the directory in errors of a directory sync
    (default: the file being created).  ``adaptive`` (thread writer only):
    lone batches are written on the reactor thread (module documentation).
    """

    def __init__(
        self,
        files,
        reactor,
        *,
        inline: bool,
        sync: bool,
        on_batch,
        make_error,
        max_pending_bytes: int,
        thread_name: str,
        buffer_timeout_ns: int = 0,
        preallocate: int = 0,
        prealloc_thread_name: str = "",
        directory_label: str | None = None,
        adaptive: bool = False,
    ):
        self.files = files
        self._reactor = reactor
        self._inline = inline
        self._sync = sync
        self._on_batch = on_batch
        self._make_error = make_error
        self._max_pending = max_pending_bytes
        self._thread_name = thread_name
        self._buffer_timeout_ns = int(buffer_timeout_ns)
        self._preallocate = preallocate
        self._prealloc_thread_name = prealloc_thread_name or f"{thread_name} prealloc"
        self._directory_label = directory_label
        self._adaptive = adaptive and not inline
        #: IReactorFDSet.getWriters: the descriptors with data to send
        self._get_writers = getattr(reactor, "getWriters", None)

        # Shared with the writer thread, under _cond.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._items: list = []
        self._waiters: list = []
        self._want_sync = False
        #: records asking for a sync in the pending batch (concurrency measure)
        self._sync_records = 0
        self._idle = False
        #: adaptive: the reactor is writing a batch itself (the thread must not)
        self._reactor_busy = False
        #: the writer failed on the reactor thread: the thread ends without a word
        self._dead = False
        #: reactor side: hold() depth, and a wake-up owed at release()
        self._held = 0
        self._kick_owed = False
        self._thread: threading.Thread | None = None
        self._preallocator: Preallocator | None = None
        self._flush_call = None
        #: adaptive: a reactor-side write of the pending batch is scheduled
        self._reactor_owed = False
        #: adaptive: records that asked for no sync wait this long (s) for one that
        #: does (0: each is due at once)
        self._lazy_delay = self._buffer_timeout_ns / 1e9 if self._adaptive else 0
        self._lazy_call = None

        # Writer-thread state.
        self._handle = None
        #: The file being written, and the file the current operation is on.
        self._file = ""
        self._name = ""
        self._op = ""
        self._offset = 0
        self._dirty = False
        self._unsynced_records = 0
        #: Records asking for a sync in the last synced batch: > 1 means
        #: concurrent producers (records without sync, e.g. acks, do not count).
        self._last_batch_records = 0
        self._unsynced_sync_records = 0
        self._last_sync_ns = 0
        #: how long the last sync took (ns), on either thread
        self._last_sync_took_ns = 0

        # Reactor side.
        #: Encoded bytes submitted but not yet written (flow control).
        self.pending_bytes = 0
        #: Records submitted, and records confirmed (written, and synced as
        #: asked): batches are confirmed in the order they were submitted, so
        #: the n-th record submitted is safe once ``records_confirmed >= n``.
        self.records_submitted = 0
        self.records_confirmed = 0
        #: ``listener(records_confirmed)`` after each confirmed batch, on the
        #: reactor; ``listener(None)`` once the writer failed (nothing more
        #: will be confirmed).  For what waits on many records at once.
        self.confirm_listeners: list = []
        self._writable_waiters: list[Deferred] = []
        #: The error every failed Deferred got (None until a failure).
        self.failure: Exception | None = None

        # Statistics (written by the writer).
        self.syncs = 0
        self.records_synced = 0
        self.batches = 0
        self.bytes_written = 0
        #: batches an adaptive writer wrote on the reactor thread
        self.reactor_batches = 0

    # -- life cycle (reactor thread) -------------------------------------------
    def start(self) -> None:
        """Start the writer thread (and the preallocator); inline: nothing."""
        if self._inline:
            return
        if self._preallocate:
            self._preallocator = Preallocator(
                self.files, self._preallocate, self._prealloc_thread_name
            )
        self._thread = threading.Thread(target=self._main, name=self._thread_name, daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the writer thread to end (after a stop or a failure)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def thread(self) -> threading.Thread | None:
        """The writer thread: None inline, before :meth:`start` and once joined."""
        return self._thread

    def flush(self) -> None:
        """Inline writer: do the pending I/O now.  Thread writer: nothing."""
        if self._inline:
            if self._flush_call is not None and self._flush_call.active():
                self._flush_call.cancel()
            self._flush_inline()

    # -- queueing (reactor thread) ---------------------------------------------
    def submit(self, record: bytes, d: Deferred | None, result, sync: bool) -> None:
        """Queue an encoded record; ``d`` (if any) fires with ``result`` once
        it is written (and synced, if ``sync`` and the writer syncs)."""
        self.pending_bytes += len(record)
        self.records_submitted += 1
        with self._lock:
            self._items.append(record)
            if d is not None:
                self._waiters.append((d, result))
            if sync:
                self._want_sync = True
                self._sync_records += 1
            if self._idle:
                if self._reactor_owed:
                    if self._lazy_call is not None and sync:
                        self._lazy_call.cancel()
                        self._lazy_call = None
                        self._flush_on_reactor_soon()
                elif (
                    self._adaptive
                    and self._last_batch_records <= 1
                    and self._last_sync_took_ns <= REACTOR_SYNC_MAX_NS
                    and self.failure is None
                ):
                    self._reactor_owed = True
                    if not self._want_sync and self._lazy_delay:
                        # nothing waits for a sync: let a sync batch carry it (module doc)
                        self._lazy_call = self._reactor.callLater(self._lazy_delay, self._flush_on_reactor)
                    else:
                        self._flush_on_reactor_soon()
                elif self._held:
                    self._kick_owed = True
                else:
                    self._cond.notify()
        if self._inline and self._flush_call is None:
            self._flush_call = self._reactor.callLater(0, self._flush_inline)

    def _flush_on_reactor_soon(self) -> None:
        """A reactor-side write now, or at :meth:`release` while a read holds the writer."""
        if self._held:
            self._kick_owed = True
        else:
            self._reactor.callLater(0, self._flush_on_reactor)

    def hold(self) -> None:
        """Batch what is submitted until :meth:`release`: do not wake the writer yet.

        A protocol adapter holds the writer while it handles one read's worth
        of input, so the records of all the messages in it go out in one
        write and one sync, and the writer thread does not take the GIL in
        the middle of the read (every call into a C library that releases
        the GIL would hand it over).  Holds nest.
        """
        self._held += 1

    def release(self) -> None:
        """End a :meth:`hold`; the writer wakes if anything arrived meanwhile."""
        self._held -= 1
        if self._held or not self._kick_owed:
            return
        self._kick_owed = False
        if self._reactor_owed:
            # Scheduled now, after whatever this read scheduled (a delivery pass):
            # the reactor runs the calls due in the order of their times.
            self._reactor.callLater(0, self._flush_on_reactor)
            return
        with self._lock:
            if self._idle and self._items:
                self._cond.notify()

    def enqueue(self, op, d: Deferred | None = None) -> None:
        """Queue ``op()`` to run on the writer behind everything queued so
        far; ``d`` fires (None) with its batch.  ``op`` returns nothing."""
        with self._lock:
            self._items.append(op)
            if d is not None:
                self._waiters.append((d, None))
            self._cond.notify()
        if self._inline and self._flush_call is None:
            self._flush_call = self._reactor.callLater(0, self._flush_inline)

    def barrier(self, d: Deferred) -> None:
        """``d`` fires once everything queued so far is written and synced as asked."""
        self.enqueue(_noop, d)

    def roll(self, name: str, header: bytes, prepared: str | None = None, next_prepared=None):
        """Queue the switch to new file ``name`` starting with ``header``.

        The current file is synced (if dirty) and closed first.  With the
        preallocator, ``prepared`` is the temporary name under which it may
        have prepared this file, and ``next_prepared`` the one to prepare next.
        """
        self.enqueue(partial(self._w_roll, name, header, prepared, next_prepared))

    def request_stop(self, d: Deferred | None = None) -> None:
        """Queue the end: sync, close the file, stop the preallocator and the
        thread; ``on_batch`` then gets ``stop=True``."""
        self.enqueue(_STOP, d)

    # -- the batch back on the reactor ------------------------------------------
    def confirm(self, waiters: list, nbytes: int, records: int) -> None:
        """A batch of ``records`` was written: fire its Deferreds, tell the
        confirm listeners and, below half the pending limit, fire the
        flow-control waiters."""
        self.pending_bytes -= nbytes
        for d, result in waiters:
            d.callback(result)
        self.records_confirmed += records
        for listener in self.confirm_listeners:
            listener(self.records_confirmed)
        if self._writable_waiters and self.pending_bytes <= self._max_pending // 2:
            ready, self._writable_waiters = self._writable_waiters, []
            for d in ready:
                d.callback(None)

    def fail(self, error, waiters: list, spare: Deferred | None = None):
        """A batch failed with ``error`` (``(op, name, exception)``): fail the
        batch, everything queued and the flow-control waiters (all but
        ``spare``) with :attr:`failure`, drop the queue, release the file
        (inline writer).  The owner sets its FAILED state first."""
        op, name, exc = error
        if self.failure is None:
            self.failure = self._make_error(op, name, exc)
            self.failure.__cause__ = exc if isinstance(exc, BaseException) else None
        with self._lock:
            rest, self._waiters = self._waiters, []
            self._items = []
        self.pending_bytes = 0
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
        failure = Failure(self.failure)
        for d, _result in list(waiters) + rest:
            if d is not spare:
                d.errback(failure)
        for listener in self.confirm_listeners:
            listener(None)
        writable, self._writable_waiters = self._writable_waiters, []
        for d in writable:
            d.errback(failure)
        self.abandon_if_inline()

    def abandon_if_inline(self) -> None:
        """Release the file after a failure (the thread writer does it itself)."""
        if self._inline:
            self._abandon()

    # -- flow control ------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return self.pending_bytes < self._max_pending

    def wait_writable(self) -> Deferred:
        """Fires when pending bytes fall to half the limit (at once if writable)."""
        if self.writable:
            return succeed(None)
        d = Deferred()
        self._writable_waiters.append(d)
        return d

    # -- helpers for the owners' operations (writer thread) -----------------------
    def doing(self, op: str, name: str) -> None:
        """Name the operation about to run, for the error if it fails."""
        self._op, self._name = op, name

    def sync_if_dirty(self) -> None:
        if self._dirty:
            self._fsync()

    def dir_sync(self) -> None:
        label = self._directory_label
        self._op, self._name = "directory sync", label if label is not None else self._name
        self.files.sync_directory()

    # -- internals: the writer ------------------------------------------------------
    def _flush_inline(self) -> None:
        self._flush_call = None
        with self._cond:
            items, self._items = self._items, []
            waiters, self._waiters = self._waiters, []
            want_sync, self._want_sync = self._want_sync, False
            self._sync_records = 0
        if not items:
            return
        self._on_batch(waiters, *self._process(items, want_sync))

    def _send_pending_writes(self) -> None:
        """Before the reactor waits for the disk: send what this turn wrote to
        sockets (a dispatch to a consumer), as the reactor's next turn would."""
        get_writers = self._get_writers
        if get_writers is None:
            return
        for writer in get_writers():
            # A connection being closed is left to the reactor (its doWrite would end
            # it, and only the reactor disconnects).  A failed send too: the
            # descriptor stays registered for writing and the reactor's next turn
            # meets the error and disconnects it.
            if getattr(writer, "disconnecting", False) or getattr(
                writer, "_writeDisconnecting", False
            ):
                continue
            with suppress(Exception):  # the reactor's own call logs it
                writer.doWrite()

    def _flush_on_reactor(self) -> None:
        """Adaptive writer: write the pending batch here, if the thread is idle
        and it holds records only; otherwise wake the thread for it."""
        with self._cond:
            self._reactor_owed = False
            if self._lazy_call is not None:
                if self._lazy_call.active():
                    self._lazy_call.cancel()
                self._lazy_call = None
            if not self._items or self.failure is not None:
                return
            if not self._idle or any(item.__class__ is not bytes for item in self._items):
                self._cond.notify()
                return
            self._reactor_busy = True
            items, self._items = self._items, []
            waiters, self._waiters = self._waiters, []
            want_sync, self._want_sync = self._want_sync, False
            self._unsynced_sync_records += self._sync_records
            self._sync_records = 0
        self._send_pending_writes()
        records, nbytes, error, stop = self._process(items, want_sync)
        self.reactor_batches += 1
        with self._cond:
            self._reactor_busy = False
            if error is not None:
                self._dead = True
            if self._items or error is not None:
                self._cond.notify()
        if error is not None:
            self._abandon()
        self._on_batch(waiters, records, nbytes, error, stop)
        # The confirmations (a producer's Response) go out now, not after the next poll.
        self._send_pending_writes()

    def _main(self) -> None:
        cond = self._cond
        timeout = self._buffer_timeout_ns
        call = self._reactor.callFromThread
        on_batch = self._on_batch
        while True:
            with cond:
                while not self._items or self._reactor_busy or self._dead:
                    if self._dead:
                        return
                    self._idle = True
                    cond.wait()
                self._idle = False
                if timeout and self._want_sync and self._last_batch_records > 1:
                    remaining = self._last_sync_ns + timeout - time.monotonic_ns()
                    if remaining > 0:
                        cond.wait(remaining / 1e9)
                items, self._items = self._items, []
                waiters, self._waiters = self._waiters, []
                want_sync, self._want_sync = self._want_sync, False
                self._unsynced_sync_records += self._sync_records
                self._sync_records = 0
            records, nbytes, error, stop = self._process(items, want_sync)
            call(on_batch, waiters, records, nbytes, error, stop)
            if error is not None or stop:
                if error is not None:
                    self._abandon()
                return

    def _process(self, items: list, want_sync: bool):
        """Write one batch: ``(records written, their bytes, error or None, stopped)``."""
        chunks: list = []
        records = 0
        nbytes = 0
        stop = False
        try:
            for item in items:
                if item.__class__ is bytes:
                    chunks.append(item)
                    continue
                if chunks:
                    nbytes += self._write(chunks)
                    records += len(chunks)
                    chunks = []
                if item is _STOP:
                    self._w_stop()
                    stop = True
                else:
                    item()
            if chunks:
                nbytes += self._write(chunks)
                records += len(chunks)
            if want_sync and self._sync and self._dirty:
                self._fsync()
            self.batches += 1
        except Exception as exc:
            return records, nbytes, (self._op, self._name, exc), True
        return records, nbytes, None, stop

    def _write(self, chunks: list) -> int:
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._op, self._name = "write", self._file
        self._offset = write_all(self._handle, data, self._offset)
        self._dirty = True
        self._unsynced_records += len(chunks)
        self.bytes_written += len(data)
        return len(data)

    def _fsync(self) -> None:
        self._op, self._name = "fsync", self._file
        start = self._last_sync_ns = time.monotonic_ns()
        self._handle.fsync()
        self._last_sync_took_ns = time.monotonic_ns() - start
        self._dirty = False
        self.syncs += 1
        self.records_synced += self._unsynced_records
        self._last_batch_records = self._unsynced_sync_records
        self._unsynced_records = 0
        self._unsynced_sync_records = 0

    def _w_roll(self, name: str, header: bytes, prepared, next_prepared) -> None:
        if self._handle is not None:
            # Invariant: only the last file may have a torn tail.
            self.sync_if_dirty()
            self._handle.close()
            self._handle = None
        files = self.files
        self._file = self._name = name
        pre = self._preallocator
        if prepared is not None and pre is not None and pre.take(prepared):
            self._op = "open"
            handle = self._handle = files.open(prepared)
            self._op = "write"
            write_all(handle, header, 0)
            self._op = "fsync"
            handle.fsync()
            self._op = "rename"
            files.rename(prepared, name)
        else:
            self._op = "create"
            handle = self._handle = files.open(name, create=True)
            self._op = "write"
            _zero_fill(handle, write_all(handle, header, 0), self._preallocate)
            self._op = "fsync"
            handle.fsync()
        self.dir_sync()
        self._name = name
        self._offset = len(header)
        self._dirty = False
        if pre is not None and next_prepared is not None:
            pre.request(next_prepared)

    def _w_stop(self) -> None:
        self.sync_if_dirty()
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._preallocator is not None:
            self._preallocator.stop()
            self._preallocator = None

    def _abandon(self) -> None:
        """After a failure: release the file and the preallocator, quietly."""
        handle, self._handle = self._handle, None
        preallocator, self._preallocator = self._preallocator, None
        if handle is not None:
            with suppress(Exception):
                handle.close()
        if preallocator is not None:
            with suppress(Exception):
                preallocator.stop()
