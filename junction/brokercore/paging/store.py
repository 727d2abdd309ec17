"""One address's page store: Artemis's ``address-full-policy`` PAGE.

When an address holds more than ``max-size-bytes`` in memory and its policy
is PAGE, the broker stops routing new messages into its queues' memory and
appends them (encoded, as opaque payload bytes) to this store instead.  As
consumers free space, the broker *depages*: it :meth:`PageStore.read` s the
oldest records back in order, routes them into the queues, stores them in its
journal, commits the position it reached (a :class:`PagePosition`, in a
journal record of its own), and then calls :meth:`PageStore.consumed`.  From
then on the journal owns those messages and the page store forgets them,
deleting every page file whose records are all consumed.  This follows the
Artemis user manual (``paging.adoc``): one folder per address holding page
files of up to ``page-size-bytes`` each, read in order, and a page file is
removed as soon as everything up to its end has been taken over.

This module is the store itself (:class:`PageStore`) and where it lives: the
address's folder in the paging directory (:func:`address_dir_name`) and, at
startup, finding the folders that hold pages (:func:`find_paged_addresses`).
Its parts are the package's other modules (see :mod:`junction.brokercore.paging`).

Folders
=======

The pages of an address live in ``<paging directory>/<address dir>/``, where
the directory name is :func:`address_dir_name` of the address: every UTF-8
byte outside ``[a-z0-9._-]`` (upper case included, so two addresses never
share a folder on a case-insensitive file system; a leading ``.`` too) is
written ``%XX``; a name longer than :data:`MAX_DIR_NAME_CHARS` is cut and
given a SHA-256 suffix after a ``~`` (which no escaped name contains).  The
address itself is kept in every page header, so :func:`find_paged_addresses`
recovers it even from a hashed folder name.

Writing: group commit on one writer thread
==========================================

With the journal's group-commit writer (:mod:`..journal.groupcommit`, shared
with :mod:`..journal.journal`): :meth:`PageStore.append` runs on the reactor
thread, encodes the record, gives it its position at once and adds it to the
pending batch; one writer thread takes the whole batch, writes it with one
``write`` and, if any record in it asked for ``sync``, one
``fdatasync``, then fires the batch's Deferreds (with each record's
:class:`PagePosition`) through one ``reactor.callFromThread``.  A record with
``sync=False`` fires once written to the OS (or with its batch's sync).
``writer="inline"`` does the same I/O on the reactor thread in a
``callLater(0)``: deterministic tests with a ``Clock``.  ``sync=False`` on the
store turns record fsyncs off (test brokers); page switches and
:meth:`PageStore.stop` still sync.

Before the writer starts a new page it fsyncs the previous one, whatever the
records asked for, and it syncs the directory after creating a page.  So
**only the last page can have a torn tail**; recovery relies on that.

Durability contract with the broker: a durable paged send is confirmed to
its producer only after ``append(..., sync=True)`` fired.  Such a record,
once after the cursor, is read back by every later :meth:`PageStore.load`
exactly once, in order, until the broker moves its cursor past it.

Reading: what is served from where
==================================

:meth:`PageStore.read` returns the next records after the *read cursor* and
advances it; they stay pending (counted by :attr:`PageStore.pending_count`)
until :meth:`PageStore.consumed` (see :mod:`.cursor`).  Records appended but
not yet written are served **from memory** (:mod:`.tail`), so everything
appended is readable at once.  Consequence: a record may be read (and
delivered) before its append Deferred fires; if the store then fails, that
append errbacks although the broker holds the message.  The broker must
therefore confirm a durable send only on the append Deferred (never on
having read the record), exactly as it does for a journalled send.  Older
records are read from the page files (:mod:`.pages`) synchronously on the
reactor thread, at most one chunk (or one record, if bigger) per record
returned, and usually one chunk per call.

Memory (every limit named)
==========================

* the pending write batch: encoded records not yet written.  Appends never
  fail for its size; :attr:`PageStore.writable` turns false above
  :data:`MAX_PENDING_BYTES` (8 MiB) and :meth:`PageStore.wait_writable` fires
  at half of it, for producer flow control;
* the tail cache: at most :data:`TAIL_CACHE_BYTES` (1 MiB) of written
  payloads, dropped first once read;
* the read-ahead: one chunk of :data:`READ_AHEAD_BYTES` (256 KiB), or one
  record when a record is bigger;
* per page file one small object (pages are at most disk / page size);
* per record read and not yet consumed one small tuple (position, offset,
  length): the broker holds those messages themselves anyway, and its own
  read limits (Artemis ``max-read-page-bytes``) bound them;
* :meth:`PageStore.load` reads one page file at a time (at most
  ``page_size_bytes``, or one oversize record's page).

Failure
=======

A write or fsync error (``ENOSPC``, ``EIO`` ...) puts the store in the FAILED
state at once and for good: the Deferreds of that batch, of all queued
batches and of every later append errback with :class:`PageStoreFailedError`
("page store of address 'x' fsync failed on 00000000000000000003.page:
[Errno 5] ...; paged sends are refused"), and :meth:`PageStore.read` raises
it.  An fsync is never retried (after a failed fsync the kernel may have
dropped the dirty pages; see the journal's notes).  Restarting recovers from
what is on disk.  A failure to *remove* a consumed page is not fatal (it only
leaks disk space until the next load deletes it); it is counted in
:meth:`PageStore.stats`.
"""

from __future__ import annotations

import hashlib
import os
from functools import partial
from urllib.parse import unquote

from twisted.internet.defer import Deferred, fail, succeed

from ..journal.files import OSFiles
from ..journal.framing import CRC_SIZE
from ..journal.groupcommit import (
    FAILED,
    LOADED,
    NEW,
    STARTED,
    STOPPED,
    STOPPING,
    GroupCommitWriter,
    default_reactor,
)
from .cursor import ReadCursor
from .errors import (
    PageCorruptionError,
    PageRecordTooLargeError,
    PageStoreClosedError,
    PageStoreFailedError,
    PageStoreStateError,
    PagingError,
)
from .format import (
    MAX_ADDRESS_BYTES,
    MAX_PAGE_NUMBER,
    MAX_PAYLOAD_SIZE,
    MAX_RECORDS_PER_PAGE,
    PAGE_HEADER,
    PAGE_NAME_RE,
    RECORD_OVERHEAD,
    address_bytes,
    decode_page_header,
    encode_page_header,
    encode_page_record,
    page_file_name,
)
from .pages import Page, PageReader, PageSet
from .position import PagePosition
from .recovery import PageRecovery, recover
from .tail import Tail

__all__ = [
    "PageStore",
    "address_dir_name",
    "find_paged_addresses",
    "DEFAULT_PAGE_SIZE",
    "MIN_PAGE_SIZE",
    "MAX_PENDING_BYTES",
    "TAIL_CACHE_BYTES",
    "READ_AHEAD_BYTES",
    "MAX_DIR_NAME_CHARS",
]

# -- limits and defaults (all named) -------------------------------------------

#: Artemis ``page-size-bytes`` default: a page file is closed at this size.
DEFAULT_PAGE_SIZE = 10 * 1024 * 1024
#: Smallest page size accepted (tests use tiny pages; a record that does not
#: fit simply gets a page of its own).
MIN_PAGE_SIZE = 64
#: Encoded records waiting for the writer above which :attr:`PageStore.writable`
#: is false (producer flow control; appends still succeed).
MAX_PENDING_BYTES = 8 * 1024 * 1024
#: Payload bytes of already written records kept in memory for readers (:mod:`.tail`).
TAIL_CACHE_BYTES = 1024 * 1024
#: Bytes read from a page file at once (and kept as read-ahead, :mod:`.pages`).
READ_AHEAD_BYTES = 256 * 1024
#: Longest address folder name before it is cut and hashed (file systems
#: allow 255 bytes; this leaves room and stays readable).
MAX_DIR_NAME_CHARS = 160


# -- the address's folder ------------------------------------------------------------

_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


def address_dir_name(address: str) -> str:
    """The folder name for ``address``'s pages (see the module documentation).

    ``"orders.eu"`` -> ``"orders.eu"``; ``"DLQ"`` -> ``"%44%4C%51"``;
    ``"a/b c"`` -> ``"a%2Fb%20c"``.  Injective: distinct addresses never share
    a folder, even on a case-insensitive file system (hashed long names aside,
    whose collision would need a SHA-256 collision; the header check in
    :meth:`PageStore.load` would still refuse to mix them).
    """
    raw = address_bytes(address)
    out = []
    for i, b in enumerate(raw):
        if b in _SAFE_BYTES and not (i == 0 and b == 0x2E):
            out.append(chr(b))
        else:
            out.append(f"%{b:02X}")
    name = "".join(out)
    if len(name) > MAX_DIR_NAME_CHARS:
        digest = hashlib.sha256(raw).hexdigest()[:32]
        name = f"{name[: MAX_DIR_NAME_CHARS - 33]}~{digest}"
    return name


def _dir_name_to_address(name: str) -> str | None:
    """The address a (non-hashed) folder name stands for, else None."""
    if "~" in name:
        return None
    try:
        address = unquote(name, errors="strict")
    except UnicodeDecodeError:
        return None
    try:
        return address if address_dir_name(address) == name else None
    except ValueError:
        return None


# -- the store -----------------------------------------------------------------------------


class PageStore:
    """Page files of one address in ``directory/<address dir>/``.

    ``directory`` is the paging directory (Artemis ``paging-directory``);
    the address folder is :func:`address_dir_name` of ``address`` and the
    address is also kept in every page header.  ``files`` replaces the file
    layer of the *address folder* (default :class:`..journal.files.OSFiles`
    over it, created by :meth:`load`), e.g. with
    :class:`..journal.files.FaultyFiles`; ``directory`` may then be None.
    ``writer`` is ``"thread"`` (production) or ``"inline"`` (I/O on the
    reactor thread in a ``callLater(0)``; deterministic tests).  ``sync=False``
    turns record fsyncs off (page switches and stop still sync).
    ``max_pending_bytes`` is the flow-control limit of :attr:`writable`
    (default :data:`MAX_PENDING_BYTES`).

    Life cycle: :meth:`load` (synchronous), :meth:`start`, then appends,
    reads and consumes on the reactor thread, :meth:`stop`.
    """

    def __init__(
        self,
        directory,
        address: str,
        *,
        page_size_bytes: int = DEFAULT_PAGE_SIZE,
        reactor=None,
        files=None,
        writer: str = "thread",
        sync: bool = True,
        max_pending_bytes: int = MAX_PENDING_BYTES,
    ):
        if page_size_bytes < MIN_PAGE_SIZE:
            raise ValueError(f"page_size_bytes {page_size_bytes} is below the minimum {MIN_PAGE_SIZE}")
        if writer not in ("thread", "inline"):
            raise ValueError(f"page store writer must be 'thread' or 'inline', not {writer!r}")
        if directory is None and files is None:
            raise ValueError("a page store needs a directory or a file layer")
        self.address = address
        self._header = encode_page_header(0, address)  # validates the address
        self._header_size = len(self._header)
        self.dir_name = address_dir_name(address)
        self.path = (
            os.path.join(os.fspath(directory), self.dir_name) if directory is not None else None
        )
        self._files = files
        self._page_size = page_size_bytes
        self._reactor = reactor if reactor is not None else default_reactor()
        self._inline = writer == "inline"

        self._state = NEW
        self.recovery: PageRecovery | None = None

        # Pages, oldest first (reactor thread).
        self._pages = PageSet()
        self._next_page = 1
        # Records in memory, reading the rest back from the files, and where
        # reading is.
        self._tail = Tail(TAIL_CACHE_BYTES)
        self._reader = PageReader(address, READ_AHEAD_BYTES)
        self._cursor = ReadCursor(address, self._pages, self._tail, self._reader, self._header_size)

        self._pending_count = 0
        self._pending_bytes = 0

        self._stop_watchers: list[Deferred] = []
        # The group-commit writer; its file layer is set by load().
        self._writer = GroupCommitWriter(
            files,
            self._reactor,
            inline=self._inline,
            sync=bool(sync),
            on_batch=self._batch_done,
            make_error=self._failed_error,
            max_pending_bytes=max_pending_bytes,
            thread_name=f"junction-page-writer {address}",
        )

        # Statistics.
        self._records_appended = 0
        self._records_read = 0
        self._records_consumed = 0
        self._pages_created = 0
        self._pages_removed = 0
        self._remove_errors = 0
        self._last_remove_error: str | None = None

    # -- recovery -------------------------------------------------------------------------
    def load(self, cursor: PagePosition | None) -> None:
        """Scan the page files and repair them (see :mod:`.recovery`).

        ``cursor`` is the position the broker last committed as depaged
        (None: nothing ever was).  Synchronous; call once, before
        :meth:`start`.  Raises :class:`PageCorruptionError` on damage in a
        page that is not the last.  The outcome is in :attr:`recovery`.
        """
        if self._state is not NEW:
            raise PageStoreStateError(f"load() must come first (page store is {self._state})")
        if self._files is None:
            self._files = OSFiles(_make_dirs_durable(self.path))
        files = self._writer.files = self._files
        self._reader.files = files
        found = recover(files, self.address, self.path, cursor, self._header_size)
        report = found.report
        for page in found.pages:
            self._pages.add(page)
        self._next_page = found.highest + 1
        reading = self._cursor
        reading.consumed = cursor
        rpos = found.read_position
        reading.position = rpos if rpos is not None else PagePosition(self._next_page, 0)
        reading.offset = found.read_offset if rpos is not None else self._header_size
        self._pending_count = report.records
        self._pending_bytes = report.bytes
        self.recovery = report
        self._state = LOADED

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer.  Call after :meth:`load`.  The first append
        creates a new page (the pages found by :meth:`load` are not appended to)."""
        if self._state is not LOADED:
            raise PageStoreStateError(f"start() needs load() first (page store is {self._state})")
        self._state = STARTED
        self._writer.start()

    def stop(self) -> Deferred:
        """Write and sync everything appended, close the file; fires (None) when done.

        Appends after this errback with :class:`PageStoreClosedError`.  Fires
        even if the final write fails (the store is then FAILED and the
        records' own Deferreds report it).
        """
        if self._state in (NEW, LOADED, STOPPED):
            self._state = STOPPED
            return succeed(None)
        if self._state is FAILED:
            self._writer.abandon_if_inline()
            self._writer.join()  # it ended with the failure
            return succeed(None)
        d = Deferred()
        self._stop_watchers.append(d)
        if self._state is STOPPING:
            return d
        self._state = STOPPING
        self._writer.request_stop()
        if self._inline:
            self.flush()
        return d

    def flush(self) -> None:
        """Inline writer: do the pending I/O now.  Thread writer: nothing."""
        if self._state in (STARTED, STOPPING):
            self._writer.flush()

    # -- appends ---------------------------------------------------------------------------
    def append(self, payload: bytes, *, sync: bool) -> Deferred:
        """Page one record; fires with its :class:`PagePosition` once written
        (and synced, if ``sync`` and the store syncs).

        The record is readable by :meth:`read` at once.  Raises
        :class:`PageRecordTooLargeError` for payloads over
        :data:`MAX_PAYLOAD_SIZE`; errbacks after a failure or stop.
        """
        if self._state is not STARTED:
            return self._refused()
        if not isinstance(payload, bytes):
            payload = bytes(payload)
        n = len(payload)
        if n > MAX_PAYLOAD_SIZE:
            raise PageRecordTooLargeError(
                f"paged record of {n} bytes exceeds the limit of {MAX_PAYLOAD_SIZE} bytes"
            )
        size = RECORD_OVERHEAD + n
        cur = self._pages.current
        if (
            cur is None
            or (cur.count and cur.end + size > self._page_size)
            or cur.count >= MAX_RECORDS_PER_PAGE
        ):
            cur = self._roll()
        position = PagePosition(cur.number, cur.count)
        record = encode_page_record(cur.number, cur.count, payload)
        self._tail.add(position, cur.end, payload)
        cur.count += 1
        cur.end += size
        self._pending_count += 1
        self._pending_bytes += n
        self._records_appended += 1
        d = Deferred()
        self._writer.submit(record, d, position, sync)
        return d

    # -- reading and consuming ------------------------------------------------------------
    def read(self, max_records: int, max_bytes: int) -> list[tuple[PagePosition, bytes]]:
        """The next records after the read cursor, in order; advances the read cursor.

        Returns at most ``max_records`` records and, beyond the first, at most
        ``max_bytes`` payload bytes (the first record is returned whatever its
        size, so a big record can never stall depaging).  The records stay
        pending until :meth:`consumed`.  Records not yet written are served
        from memory (see the module documentation).  Raises
        :class:`PageStoreFailedError` after a failure and
        :class:`PageCorruptionError` if a page file changed under the store.
        """
        self._check_readable()
        out = self._cursor.read(max_records, max_bytes)
        self._records_read += len(out)
        self._tail.trim(self._cursor.position)
        return out

    def consumed(self, position: PagePosition) -> None:
        """Everything up to and including ``position`` now belongs to the
        broker's journal (the broker has durably committed ``position`` as
        its cursor): forget it and delete every page file it completes.

        ``position`` must have been returned by :meth:`read` (ValueError
        otherwise); a position at or before the consumed cursor is ignored.
        The deletion is queued behind the records appended so far.
        """
        if self._state is NEW:
            raise PageStoreStateError("consumed() needs load() first")
        forgotten = self._cursor.consume(position)
        if forgotten is None:
            return
        records, nbytes = forgotten
        self._pending_count -= records
        self._pending_bytes -= nbytes
        self._records_consumed += records
        self._release_pages()

    def rewind(self) -> None:
        """Move the read cursor back to just after the consumed cursor:
        records read but not consumed will be read again."""
        self._cursor.rewind()

    # -- state ---------------------------------------------------------------------------
    @property
    def paging(self) -> bool:
        """Records not yet consumed exist (appended, or found on disk)."""
        return self._pending_count > 0

    @property
    def pending_count(self) -> int:
        """Records not yet consumed (read ones included)."""
        return self._pending_count

    @property
    def pending_bytes(self) -> int:
        """Payload bytes of the records not yet consumed."""
        return self._pending_bytes

    @property
    def consumed_position(self) -> PagePosition | None:
        return self._cursor.consumed

    @property
    def read_position(self) -> PagePosition:
        """The position the next :meth:`read` starts at (or before, if that
        page does not exist: then the next page's first record)."""
        return self._cursor.position

    @property
    def unwritten_bytes(self) -> int:
        """Encoded bytes appended but not yet written."""
        return self._writer.pending_bytes

    @property
    def writable(self) -> bool:
        """False while :attr:`unwritten_bytes` >= the limit: pause producers."""
        return self._writer.writable

    def wait_writable(self) -> Deferred:
        """Fires when unwritten bytes fall to half the limit (at once if writable)."""
        if self._state is not STARTED:
            return succeed(None)
        return self._writer.wait_writable()

    @property
    def failed(self) -> bool:
        return self._state is FAILED

    @property
    def failure(self) -> PageStoreFailedError | None:
        return self._writer.failure

    def stats(self) -> dict:
        """Counters for management and tests."""
        w = self._writer
        pages = self._pages
        reading = self._cursor
        return {
            "address": self.address,
            "directory": self.path,
            "state": self._state,
            "pages": len(pages.order),
            "current_page": pages.current.number if pages.current is not None else None,
            "pending_count": self._pending_count,
            "pending_bytes": self._pending_bytes,
            "consumed_position": reading.consumed,
            "read_position": reading.position,
            "in_flight": len(reading.inflight),
            "unwritten_bytes": w.pending_bytes,
            "cached_bytes": self._tail.cached_bytes,
            "records_appended": self._records_appended,
            "records_read": self._records_read,
            "records_consumed": self._records_consumed,
            "cache_hits": reading.cache_hits,
            "disk_reads": self._reader.disk_reads,
            "disk_read_bytes": self._reader.disk_read_bytes,
            "batches": w.batches,
            "syncs": w.syncs,
            "records_synced": w.records_synced,
            "records_per_sync": w.records_synced / w.syncs if w.syncs else 0.0,
            "bytes_written": w.bytes_written,
            "pages_created": self._pages_created,
            "pages_removed": self._pages_removed,
            "remove_errors": self._remove_errors,
            "last_remove_error": self._last_remove_error,
            "failure": str(w.failure) if w.failure is not None else None,
        }

    # -- internals: reactor side ---------------------------------------------------------
    def _refused(self) -> Deferred:
        if self._state is FAILED:
            return fail(self._writer.failure)
        if self._state in (STOPPING, STOPPED):
            return fail(
                PageStoreClosedError(
                    f"page store of address {self.address!r} is stopped; paged sends are refused"
                )
            )
        raise PageStoreStateError(f"append before start() (page store is {self._state})")

    def _check_readable(self) -> None:
        if self._state is FAILED:
            raise self._writer.failure
        if self._state is NEW:
            raise PageStoreStateError("read() needs load() first")
        if self._state is STOPPED:
            raise PageStoreClosedError(f"page store of address {self.address!r} is stopped")

    def _roll(self) -> Page:
        number = self._next_page
        if number > MAX_PAGE_NUMBER:
            raise PagingError(f"page numbers of address {self.address!r} are exhausted")
        self._next_page += 1
        page = Page(number, page_file_name(number), self._header_size)
        self._pages.add(page)
        self._pages.current = page
        self._pages_created += 1
        self._writer.roll(page.name, encode_page_header(number, self.address))
        if self._cursor.consumed is not None:
            # The page just closed may already be wholly consumed.
            self._release_pages()
        return page

    def _release_pages(self) -> None:
        """Forget (and queue the deletion of) pages whose records are all consumed."""
        dead = []
        for page in self._pages.release(self._cursor.consumed):
            dead.append(page.name)
            self._reader.forget(page.number)
        if not dead:
            return
        self._pages_removed += len(dead)
        if self._state is STARTED:
            # Behind the records appended so far (those of these pages).
            self._writer.enqueue(partial(self._w_remove, dead))
        elif self._state is LOADED:
            for name in dead:
                self._remove_quietly(name)
        # Stopping, stopped or failed: the files stay; the next load() deletes
        # them, since they lie wholly before the cursor.

    def _remove_quietly(self, name: str) -> None:
        try:
            self._files.remove(name)
        except OSError as exc:
            self._remove_errors += 1
            self._last_remove_error = f"{name}: {exc}"

    def _batch_done(self, waiters: list, records: int, nbytes: int, error, stop: bool) -> None:
        """Reactor side of one written batch: account for it, fire its Deferreds."""
        if error is not None:
            self._fail(error, waiters)
            return
        self._tail.written(records, self._pages.pages)
        self._writer.confirm(waiters, nbytes, records)
        self._tail.trim(self._cursor.position)
        if stop:
            self._finish_stop()

    def _failed_error(self, op: str, name: str, exc) -> PageStoreFailedError:
        return PageStoreFailedError(
            f"page store of address {self.address!r}: {op} failed on {name}: {exc}; "
            f"paged sends are refused"
        )

    def _fail(self, error, waiters: list) -> None:
        stopping = self._state is STOPPING
        self._state = FAILED
        self._tail.clear()
        self._writer.fail(error, waiters)
        if stopping or self._stop_watchers:
            self._finish_stop()

    def _finish_stop(self) -> None:
        self._writer.join()
        if self._state is not FAILED:
            self._state = STOPPED
        watchers, self._stop_watchers = self._stop_watchers, []
        for d in watchers:
            d.callback(None)

    # -- internals: the store's own writer operation (writer thread) -----------
    def _w_remove(self, names: list) -> None:
        """Remove consumed pages; a failure only leaks disk space (counted)."""
        for name in names:
            self._writer.doing("remove", name)
            self._remove_quietly(name)


def _make_dirs_durable(path: str) -> str:
    """Create ``path`` (and missing parents) and sync each new entry's parent."""
    path = os.path.abspath(path)
    missing = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    os.makedirs(path, exist_ok=True)
    for created in reversed(missing):
        fd = os.open(os.path.dirname(created), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def find_paged_addresses(directory) -> dict[str, str]:
    """``{address: folder path}`` of every address folder in the paging
    ``directory`` that holds page files, the address read from a page header.

    For the broker at startup: it creates a :class:`PageStore` for each and
    loads it with the cursor from its journal.  When no header of a folder is
    readable (a single page torn at creation), the address comes from the
    folder name; a hashed name then raises :class:`PageCorruptionError`.
    """
    directory = os.fspath(directory)
    result: dict[str, str] = {}
    if not os.path.isdir(directory):
        return result
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if not os.path.isdir(path):
            continue
        pages = sorted(name for name in os.listdir(path) if PAGE_NAME_RE.match(name))
        if not pages:
            continue
        address = None
        for name in pages:
            try:
                with open(os.path.join(path, name), "rb") as f:
                    _page, address, _size = decode_page_header(f.read(PAGE_HEADER.size + MAX_ADDRESS_BYTES + CRC_SIZE))
                break
            except (ValueError, OSError):
                continue
        if address is None:
            address = _dir_name_to_address(entry)
            if address is None:
                raise PageCorruptionError(
                    f"no page file in {path} has a readable header, and the folder name does not "
                    f"give the address",
                    path,
                    0,
                )
        if address in result:
            raise PageCorruptionError(
                f"address {address!r} has page files in two folders: {result[address]} and {path}",
                path,
                0,
            )
        result[address] = path
    return result
