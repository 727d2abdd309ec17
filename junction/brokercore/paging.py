"""The on-disk page store of one address: Artemis's ``address-full-policy`` PAGE.

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

Files
=====

The pages of an address live in ``<paging directory>/<address dir>/``, where
the directory name is :func:`address_dir_name` of the address: every UTF-8
byte outside ``[a-z0-9._-]`` (upper case included, so two addresses never
share a folder on a case-insensitive file system; a leading ``.`` too) is
written ``%XX``; a name longer than :data:`MAX_DIR_NAME_CHARS` is cut and
given a SHA-256 suffix after a ``~`` (which no escaped name contains).  The
address itself is kept in every page header, so :func:`find_paged_addresses`
recovers it even from a hashed folder name.

Page files are named ``<20-digit page number>.page``; numbers only grow (a
new store continues above every page on disk *and* above the cursor it was
loaded with, so a new record can never sort at or before a committed
cursor).  Layout (integers big-endian)::

    page header
    0     8  magic b"JNCPAGE\\x01"
    8     2  format version (:data:`FORMAT_VERSION`, 1)
    10    2  address length L in UTF-8 bytes (<= :data:`MAX_ADDRESS_BYTES`)
    12    4  reserved, 0
    16    8  page number
    24    L  address, UTF-8
    24+L  4  CRC32 of bytes 0..24+L

    record (:data:`RECORD_OVERHEAD` = 20 bytes + payload)
    0     1  record magic 0xC3
    1     1  flags, reserved, 0
    2     2  reserved, 0
    4     4  low 32 bits of the page number (a record from another page
             never passes as this page's)
    8     4  index of the record in its page (0, 1, 2 ...: a record's
             PagePosition is (page number, index))
    12    4  payload length n (<= :data:`MAX_PAYLOAD_SIZE`, 64 MiB)
    16    n  payload
    16+n  4  CRC32 of bytes 0..16+n

(The header and record CRCs are framed as in the journal's format, by
:mod:`.journal.framing`.)

A page is closed and the next one started when a record would take it past
``page_size_bytes`` (Artemis ``page-size-bytes``, default
:data:`DEFAULT_PAGE_SIZE` 10 MiB); a record bigger than a whole page gets a
page of its own.  Pages are not preallocated: they are written once, read
once and deleted.

Writing: group commit on one writer thread
==========================================

With the journal's group-commit writer (:mod:`.journal.groupcommit`, shared
with :mod:`.journal.journal`): :meth:`PageStore.append` runs on the reactor
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
until :meth:`PageStore.consumed`.  :meth:`PageStore.rewind` moves the read
cursor back to the consumed cursor (e.g. when the broker's journal write
of a depaged batch failed).

Records appended but not yet written are served **from the pending
in-memory batch**, so a consumer never waits for the disk and the broker
needs no "readable" notification: everything appended is readable at once.
Consequence: a record may be read (and delivered) before its append
Deferred fires; if the store then fails, that append errbacks although the
broker holds the message.  The broker must therefore confirm a durable send
only on the append Deferred (never on having read the record), exactly as it
does for a journalled send.  Written records stay in a small *tail cache*
(:data:`TAIL_CACHE_BYTES`), so a depager that keeps up with the producers
never touches the disk; older records are read from the page files in chunks
of :data:`READ_AHEAD_BYTES`.  A read reads from disk synchronously on the
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

Recovery (:meth:`PageStore.load`)
=================================

* Pages wholly before the cursor (all their records at or before it) are
  deleted without being read.
* Every other page is read and checked.  In the **last** page, the first
  invalid record (truncated, bad CRC, garbage) and all after it are a torn
  tail: never confirmed, since a confirmation follows the sync of everything
  before it.  The file is truncated there and synced; the report
  (:attr:`PageStore.recovery`) says whether intact records followed the damage.
  A last page whose header is not intact was being created at the crash and
  is removed.  A page left empty is removed.
* An invalid header or record in any **earlier** page is corruption of
  synced data: :class:`PageCorruptionError` names the file, offset and
  reason, and ``load`` refuses to go on (silently skipping would lose or
  reorder messages).
* Records at or before the cursor are skipped; the read cursor starts just
  after it.  A cursor past the end of the data (records the broker depaged
  from memory that the crash then lost) simply means they are all consumed.

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

import bisect
import hashlib
import itertools
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar
from urllib.parse import unquote

from twisted.internet.defer import Deferred, fail, succeed

from .journal.files import OSFiles, truncate_durably
from .journal.framing import (
    CRC_SIZE,
    MAX_PAYLOAD_SIZE,
    check_sealed,
    crc_matches,
    crc_trailer,
    find_next,
    seal,
)
from .journal.groupcommit import (
    FAILED,
    LOADED,
    NEW,
    STARTED,
    STOPPED,
    STOPPING,
    GroupCommitWriter,
    default_reactor,
)

__all__ = [
    "PageStore",
    "PagePosition",
    "PageRecovery",
    "PageTornTail",
    "PagingError",
    "PageStoreFailedError",
    "PageStoreClosedError",
    "PageStoreStateError",
    "PageCorruptionError",
    "PageRecordTooLargeError",
    "address_dir_name",
    "find_paged_addresses",
    "page_file_name",
    "encode_page_header",
    "decode_page_header",
    "encode_page_record",
    "DEFAULT_PAGE_SIZE",
    "MIN_PAGE_SIZE",
    "MAX_PENDING_BYTES",
    "TAIL_CACHE_BYTES",
    "READ_AHEAD_BYTES",
    "MAX_PAYLOAD_SIZE",
    "MAX_ADDRESS_BYTES",
    "MAX_RECORDS_PER_PAGE",
    "MAX_DIR_NAME_CHARS",
    "RECORD_OVERHEAD",
    "FORMAT_VERSION",
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
#: Payload bytes of already written records kept in memory for readers.
TAIL_CACHE_BYTES = 1024 * 1024
#: Bytes read from a page file at once (and kept as read-ahead).
READ_AHEAD_BYTES = 256 * 1024
#: Longest address accepted, in UTF-8 bytes (stored in every page header).
MAX_ADDRESS_BYTES = 4096
#: Records per page: the index is 32 bits on disk.
MAX_RECORDS_PER_PAGE = 0xFFFFFFFF
#: Longest address folder name before it is cut and hashed (file systems
#: allow 255 bytes; this leaves room and stays readable).
MAX_DIR_NAME_CHARS = 160
#: Largest page number (the on-disk field is 64 bits).
MAX_PAGE_NUMBER = (1 << 64) - 1

FORMAT_VERSION = 1
PAGE_MAGIC = b"JNCPAGE\x01"
RECORD_MAGIC = 0xC3
PAGE_SUFFIX = ".page"
_NAME_RE = re.compile(r"^(\d{20})\.page$")

_HEADER = struct.Struct(">8sHHIQ")  # 24 bytes, then the address, then a CRC
_RECORD = struct.Struct(">BBHIII")  # 16 bytes, then the payload, then a CRC
_POSITION = struct.Struct(">BQI")
_POSITION_VERSION = 1
#: Bytes a record costs on disk besides its payload (header + CRC).
RECORD_OVERHEAD = _RECORD.size + CRC_SIZE


# -- errors ----------------------------------------------------------------------


class PagingError(Exception):
    """Base class of the page store's errors."""


class PageStoreFailedError(PagingError):
    """A write or sync failed; the store refuses all further work."""


class PageStoreClosedError(PagingError):
    """An append (or read) after :meth:`PageStore.stop`."""


class PageStoreStateError(PagingError):
    """The store was used out of order (append before start, load twice ...)."""


class PageCorruptionError(PagingError):
    """A page file that had been completely written and synced is damaged."""

    def __init__(self, message: str, file: str = "", offset: int = 0):
        super().__init__(message)
        self.file = file
        self.offset = offset


class PageRecordTooLargeError(PagingError, ValueError):
    """A payload exceeds :data:`MAX_PAYLOAD_SIZE`."""


# -- positions -----------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class PagePosition:
    """Where a record is: page number and index in the page.  Totally ordered
    like the records themselves.

    :meth:`to_bytes` gives :attr:`ENCODED_SIZE` (13) bytes -- a version byte,
    the page (64 bits) and the index (32 bits), big-endian -- for the broker
    to keep its cursor in a journal record.
    """

    page: int
    index: int

    ENCODED_SIZE: ClassVar[int] = _POSITION.size

    def __post_init__(self):
        if not 0 <= self.page <= MAX_PAGE_NUMBER:
            raise ValueError(f"page number {self.page} is outside 0..2**64-1")
        if not 0 <= self.index <= MAX_RECORDS_PER_PAGE:
            raise ValueError(f"page record index {self.index} is outside 0..2**32-1")

    def to_bytes(self) -> bytes:
        return _POSITION.pack(_POSITION_VERSION, self.page, self.index)

    @classmethod
    def from_bytes(cls, data) -> "PagePosition":
        if len(data) != _POSITION.size:
            raise ValueError(f"a page position is {_POSITION.size} bytes, not {len(data)}")
        version, page, index = _POSITION.unpack(bytes(data))
        if version != _POSITION_VERSION:
            raise ValueError(f"page position format {version} is not supported")
        return cls(page, index)


# -- names ---------------------------------------------------------------------------

_SAFE_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


def address_dir_name(address: str) -> str:
    """The folder name for ``address``'s pages (see the module documentation).

    ``"orders.eu"`` -> ``"orders.eu"``; ``"DLQ"`` -> ``"%44%4C%51"``;
    ``"a/b c"`` -> ``"a%2Fb%20c"``.  Injective: distinct addresses never share
    a folder, even on a case-insensitive file system (hashed long names aside,
    whose collision would need a SHA-256 collision; the header check in
    :meth:`PageStore.load` would still refuse to mix them).
    """
    raw = _address_bytes(address)
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


def _address_bytes(address: str) -> bytes:
    if not isinstance(address, str) or not address:
        raise ValueError("a paged address needs a non-empty name")
    try:
        raw = address.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"address {address!r} is not valid Unicode: {exc}") from None
    if len(raw) > MAX_ADDRESS_BYTES:
        raise ValueError(f"address of {len(raw)} UTF-8 bytes exceeds {MAX_ADDRESS_BYTES}")
    return raw


def page_file_name(page: int) -> str:
    return f"{page:020d}{PAGE_SUFFIX}"


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


# -- the format (pure functions) -------------------------------------------------------


def encode_page_header(page: int, address: str) -> bytes:
    """The header that opens page file ``page`` of ``address``."""
    raw = _address_bytes(address)
    body = _HEADER.pack(PAGE_MAGIC, FORMAT_VERSION, len(raw), 0, page) + raw
    return body + crc_trailer(body)


def decode_page_header(data) -> tuple[int, str, int]:
    """``(page number, address, header size)``; ValueError says what is wrong."""
    if len(data) < _HEADER.size:
        raise ValueError(f"page header truncated ({len(data)} of at least {_HEADER.size} bytes)")
    magic, version, length, _reserved, page = _HEADER.unpack_from(data, 0)
    if magic != PAGE_MAGIC:
        raise ValueError(f"not a junction page file (magic {bytes(magic)!r})")
    if length > MAX_ADDRESS_BYTES:
        raise ValueError(f"page header address length {length} exceeds the limit")
    end = _HEADER.size + length
    if len(data) < end + CRC_SIZE:
        raise ValueError(f"page header truncated ({len(data)} of {end + CRC_SIZE} bytes)")
    if not crc_matches(data, 0, end):
        raise ValueError("page header CRC mismatch")
    if version != FORMAT_VERSION:
        raise ValueError(f"page format version {version} is not supported (this is {FORMAT_VERSION})")
    try:
        address = bytes(data[_HEADER.size : end]).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("page header address is not UTF-8") from None
    return page, address, end + CRC_SIZE


def encode_page_record(page: int, index: int, payload: bytes) -> bytes:
    """One record (header, payload, CRC) for position ``(page, index)``."""
    head = _RECORD.pack(RECORD_MAGIC, 0, 0, page & 0xFFFFFFFF, index, len(payload))
    return seal(head, payload)


def _check_record(mv: memoryview, pos: int, page32: int, index: int | None):
    """Decode the record at ``pos``: ``(payload_len, end, None)`` or ``(0, 0, reason)``.

    ``index`` None accepts any index (used to look for intact records after
    damage).
    """
    size = len(mv)
    if pos + RECORD_OVERHEAD > size:
        return 0, 0, f"truncated record header ({size - pos} bytes left)"
    magic, _flags, _reserved, rpage, rindex, n = _RECORD.unpack_from(mv, pos)
    if magic != RECORD_MAGIC:
        return 0, 0, f"bad record magic 0x{magic:02x}"
    if rpage != page32:
        return 0, 0, f"record belongs to page {rpage}, not this one"
    if index is not None and rindex != index:
        return 0, 0, f"record index {rindex} where {index} was expected"
    end, reason = check_sealed(mv, pos, pos + _RECORD.size, n)
    if reason is not None:
        return 0, 0, reason
    return n, end, None


def _find_next_record(data, page32: int, start: int) -> int | None:
    mv = memoryview(data)
    return find_next(data, RECORD_MAGIC, start, lambda pos: _check_record(mv, pos, page32, None)[2] is None)


# -- recovery report -----------------------------------------------------------------------


@dataclass
class PageTornTail:
    """The dropped end of the last page (see the recovery policy)."""

    file: str
    offset: int
    dropped_bytes: int
    reason: str
    #: Intact records followed the damage (an unsynced batch persisted out of
    #: order, or damage inside synced data: the two cannot be told apart).
    intact_records_after: bool = False


@dataclass
class PageRecovery:
    """What :meth:`PageStore.load` found and did."""

    #: Page files kept, oldest first.
    pages: list = field(default_factory=list)
    #: Records after the cursor, to be depaged.
    records: int = 0
    #: Their payload bytes.
    bytes: int = 0
    #: Files deleted: wholly consumed, empty, or without an intact header.
    removed_files: list = field(default_factory=list)
    torn_tail: PageTornTail | None = None


# -- the store -----------------------------------------------------------------------------


class _Page:
    """Reactor-side accounting of one page file."""

    __slots__ = ("number", "name", "count", "end", "written_count", "written_end")

    def __init__(self, number: int, name: str, header_size: int):
        self.number = number
        self.name = name
        #: Records appended (or found on disk).
        self.count = 0
        #: Offset after the last record appended.
        self.end = header_size
        #: Records (and bytes) the writer reported written.
        self.written_count = 0
        self.written_end = header_size


class PageStore:
    """Page files of one address in ``directory/<address dir>/``.

    ``directory`` is the paging directory (Artemis ``paging-directory``);
    the address folder is :func:`address_dir_name` of ``address`` and the
    address is also kept in every page header.  ``files`` replaces the file
    layer of the *address folder* (default :class:`.journal.files.OSFiles`
    over it, created by :meth:`load`), e.g. with
    :class:`.journal.files.FaultyFiles`; ``directory`` may then be None.
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
        self._pages: dict[int, _Page] = {}
        self._order: list[int] = []
        self._cur: _Page | None = None
        self._next_page = 1

        # Cursors.
        self._consumed: PagePosition | None = None
        self._rpos = PagePosition(0, 0)
        self._roffset = self._header_size
        #: (position, offset, payload length) of records read, not consumed.
        self._inflight: deque = deque()

        # Records in memory: a suffix of all records appended, in order, as
        # positions in _tail and {position: (offset, payload)} in _tail_map;
        # the last _unwritten_records of them are not written yet.
        self._tail: deque = deque()
        self._tail_map: dict[PagePosition, tuple[int, bytes]] = {}
        self._unwritten_records = 0
        self._cache_bytes = 0
        #: Read-ahead: (page number, file offset, bytes) or None.
        self._ra: tuple[int, int, bytes] | None = None

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
        self._disk_reads = 0
        self._disk_read_bytes = 0
        self._cache_hits = 0
        self._pages_created = 0
        self._pages_removed = 0
        self._remove_errors = 0
        self._last_remove_error: str | None = None

    # -- recovery -------------------------------------------------------------------------
    def load(self, cursor: PagePosition | None) -> None:
        """Scan the page files and repair them (see the recovery policy).

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
        report = PageRecovery()
        found: dict[int, str] = {}
        for name in files.list():
            m = _NAME_RE.match(name)
            if m:
                found[int(m.group(1))] = name
        numbers = sorted(found)
        highest = numbers[-1] if numbers else 0
        if cursor is not None:
            highest = max(highest, cursor.page)
        rpos, roffset = None, self._header_size
        for position, number in enumerate(numbers):
            name = found[number]
            is_last = position == len(numbers) - 1
            if cursor is not None and number < cursor.page:
                files.remove(name)
                report.removed_files.append(name)
                continue
            data = files.read(name)
            mv = memoryview(data)
            try:
                page_no, address, header_size = decode_page_header(mv)
                if page_no != number:
                    raise ValueError(f"header says page {page_no}")
            except ValueError as exc:
                if is_last:
                    # Being created at the crash: it holds nothing.
                    files.remove(name)
                    report.removed_files.append(name)
                    if len(data):
                        report.torn_tail = PageTornTail(name, 0, len(data), str(exc))
                    continue
                raise PageCorruptionError(
                    f"page file {name} of address {self.address!r}: {exc}; the page was "
                    f"completely written and synced before a later one was started, so this "
                    f"is corruption",
                    name,
                    0,
                ) from None
            if address != self.address:
                raise PageCorruptionError(
                    f"page file {name} in {self.path or 'the page directory'} belongs to "
                    f"address {address!r}, not {self.address!r}",
                    name,
                    0,
                )
            page32 = number & 0xFFFFFFFF
            skip = -1
            if cursor is not None and number == cursor.page:
                skip = cursor.index
            count = 0
            pos = header_size
            bad_reason = None
            while pos < len(mv):
                n, end, bad_reason = _check_record(mv, pos, page32, count)
                if bad_reason is not None:
                    break
                if count > skip:
                    report.records += 1
                    report.bytes += n
                elif count == skip:
                    roffset = end
                count += 1
                pos = end
            if bad_reason is not None:
                if not is_last:
                    raise PageCorruptionError(
                        f"page file {name} of address {self.address!r} at offset {pos}: "
                        f"{bad_reason}; the page was completely written and synced before a "
                        f"later one was started, so this is corruption, not a torn write. "
                        f"Restore the paging directory from a backup, or move the damaged "
                        f"file away to drop its records",
                        name,
                        pos,
                    )
                after = _find_next_record(data, page32, pos + 1)
                report.torn_tail = PageTornTail(name, pos, len(mv) - pos, bad_reason, after is not None)
                truncate_durably(files, name, pos)
            del mv, data
            if count == 0 or count - 1 <= skip:
                # Empty, or every record at or before the cursor.
                files.remove(name)
                report.removed_files.append(name)
                continue
            page = _Page(number, name, header_size)
            page.count = page.written_count = count
            page.end = page.written_end = pos
            self._pages[number] = page
            self._order.append(number)
            report.pages.append(name)
            if rpos is None:
                if skip >= 0:
                    rpos = PagePosition(number, skip + 1)
                else:
                    rpos, roffset = PagePosition(number, 0), header_size
        if report.removed_files:
            files.sync_directory()
        self._next_page = highest + 1
        self._consumed = cursor
        self._rpos = rpos if rpos is not None else PagePosition(self._next_page, 0)
        self._roffset = roffset if rpos is not None else self._header_size
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
        cur = self._cur
        if (
            cur is None
            or (cur.count and cur.end + size > self._page_size)
            or cur.count >= MAX_RECORDS_PER_PAGE
        ):
            cur = self._roll()
        position = PagePosition(cur.number, cur.count)
        record = encode_page_record(cur.number, cur.count, payload)
        self._tail.append(position)
        self._tail_map[position] = (cur.end, payload)
        cur.count += 1
        cur.end += size
        self._unwritten_records += 1
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
        out: list[tuple[PagePosition, bytes]] = []
        total = 0
        while len(out) < max_records:
            page = self._read_page()
            if page is None:
                break
            pos = self._rpos
            offset = self._roffset
            try:
                payload = self._fetch(page, pos, offset)
            except PageCorruptionError:
                if not out:
                    raise
                break  # return what was read; the next call raises again
            if out and total + len(payload) > max_bytes:
                break
            out.append((pos, payload))
            total += len(payload)
            self._inflight.append((pos, offset, len(payload)))
            self._roffset = offset + RECORD_OVERHEAD + len(payload)
            self._rpos = PagePosition(pos.page, pos.index + 1)
        self._records_read += len(out)
        self._trim_tail()
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
        if self._consumed is not None and position <= self._consumed:
            return
        if not self._inflight or position < self._inflight[0][0] or position >= self._rpos:
            raise ValueError(
                f"consumed({position}) of address {self.address!r}: that record has not been "
                f"read (read cursor at {self._rpos})"
            )
        inflight = self._inflight
        while inflight and inflight[0][0] <= position:
            _pos, _offset, n = inflight.popleft()
            self._pending_count -= 1
            self._pending_bytes -= n
            self._records_consumed += 1
        self._consumed = position
        self._release_pages()

    def rewind(self) -> None:
        """Move the read cursor back to just after the consumed cursor:
        records read but not consumed will be read again."""
        if self._inflight:
            pos, offset, _n = self._inflight[0]
            self._rpos, self._roffset = pos, offset
            self._inflight.clear()

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
        return self._consumed

    @property
    def read_position(self) -> PagePosition:
        """The position the next :meth:`read` starts at (or before, if that
        page does not exist: then the next page's first record)."""
        return self._rpos

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
        return {
            "address": self.address,
            "directory": self.path,
            "state": self._state,
            "pages": len(self._order),
            "current_page": self._cur.number if self._cur is not None else None,
            "pending_count": self._pending_count,
            "pending_bytes": self._pending_bytes,
            "consumed_position": self._consumed,
            "read_position": self._rpos,
            "in_flight": len(self._inflight),
            "unwritten_bytes": w.pending_bytes,
            "cached_bytes": self._cache_bytes,
            "records_appended": self._records_appended,
            "records_read": self._records_read,
            "records_consumed": self._records_consumed,
            "cache_hits": self._cache_hits,
            "disk_reads": self._disk_reads,
            "disk_read_bytes": self._disk_read_bytes,
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

    def _roll(self) -> _Page:
        number = self._next_page
        if number > MAX_PAGE_NUMBER:
            raise PagingError(f"page numbers of address {self.address!r} are exhausted")
        self._next_page += 1
        page = _Page(number, page_file_name(number), self._header_size)
        self._pages[number] = page
        self._order.append(number)
        self._cur = page
        self._pages_created += 1
        self._writer.roll(page.name, encode_page_header(number, self.address))
        if self._consumed is not None:
            # The page just closed may already be wholly consumed.
            self._release_pages()
        return page

    def _read_page(self) -> _Page | None:
        """The page holding the record at the read cursor, moving the cursor
        over finished pages; None if no record is there (yet)."""
        order = self._order
        page = self._pages.get(self._rpos.page)
        if page is None:
            i = bisect.bisect_right(order, self._rpos.page)
            if i == len(order):
                return None
            page = self._pages[order[i]]
            self._rpos, self._roffset = PagePosition(page.number, 0), self._header_size
        while self._rpos.index >= page.count:
            if page is self._cur:
                return None
            i = bisect.bisect_right(order, page.number)
            if i == len(order):
                return None
            page = self._pages[order[i]]
            self._rpos, self._roffset = PagePosition(page.number, 0), self._header_size
        return page

    def _fetch(self, page: _Page, pos: PagePosition, offset: int) -> bytes:
        entry = self._tail_map.get(pos)
        if entry is not None:
            self._cache_hits += 1
            return entry[1]
        # Not in memory, so written (unwritten records never leave the tail).
        return self._read_disk(page, pos.index, offset)

    def _read_disk(self, page: _Page, index: int, offset: int) -> bytes:
        if offset + RECORD_OVERHEAD > page.written_end:
            raise self._corrupt(page, offset, "record header lies beyond the written data")
        data, start = self._read_ahead(page, offset, RECORD_OVERHEAD)
        mv = memoryview(data)
        rel = offset - start
        magic, _f, _r, _page32, _index, n = _RECORD.unpack_from(mv, rel)
        size = RECORD_OVERHEAD + min(n, MAX_PAYLOAD_SIZE + 1)
        if rel + size > len(data):
            if offset + size > page.written_end:
                raise self._corrupt(page, offset, f"record of {size} bytes runs past the written data")
            data, start = self._read_ahead(page, offset, size)
            mv = memoryview(data)
            rel = offset - start
        n, end, reason = _check_record(mv, rel, page.number & 0xFFFFFFFF, index)
        if reason is not None:
            raise self._corrupt(page, offset, reason)
        return mv[rel + _RECORD.size : end - CRC_SIZE].tobytes()

    def _read_ahead(self, page: _Page, offset: int, need: int) -> tuple[bytes, int]:
        """Bytes of ``page`` covering ``offset .. offset+need``: ``(data, start)``."""
        ra = self._ra
        if ra is not None and ra[0] == page.number and ra[1] <= offset and offset + need <= ra[1] + len(ra[2]):
            return ra[2], ra[1]
        size = min(max(need, READ_AHEAD_BYTES), page.written_end - offset)
        data = self._files.read(page.name, offset, size)
        self._disk_reads += 1
        self._disk_read_bytes += len(data)
        if len(data) < need:
            raise self._corrupt(page, offset, f"file ends {len(data)} bytes after it, {need} expected")
        self._ra = (page.number, offset, data)
        return data, offset

    def _corrupt(self, page: _Page, offset: int, reason: str) -> PageCorruptionError:
        self._ra = None
        return PageCorruptionError(
            f"page file {page.name} of address {self.address!r} at offset {offset}: {reason} "
            f"(the record was written by this broker; the file changed or the disk is failing)",
            page.name,
            offset,
        )

    def _trim_tail(self) -> None:
        """Drop written records from the tail: those before the read cursor,
        then the oldest while over :data:`TAIL_CACHE_BYTES`."""
        tail = self._tail
        written = len(tail) - self._unwritten_records
        rpos = self._rpos
        while written > 0:
            pos = tail[0]
            if pos < rpos or self._cache_bytes > TAIL_CACHE_BYTES:
                tail.popleft()
                self._cache_bytes -= len(self._tail_map.pop(pos)[1])
                written -= 1
            else:
                break

    def _release_pages(self) -> None:
        """Forget (and queue the deletion of) pages whose records are all consumed."""
        c = self._consumed
        dead = []
        while self._order:
            page = self._pages[self._order[0]]
            if page is self._cur:
                break
            if page.number < c.page or (page.number == c.page and c.index >= page.count - 1):
                self._order.pop(0)
                del self._pages[page.number]
                dead.append(page.name)
                if self._ra is not None and self._ra[0] == page.number:
                    self._ra = None
            else:
                break
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
        self._mark_written(records)
        self._writer.confirm(waiters, nbytes, records)
        self._trim_tail()
        if stop:
            self._finish_stop()

    def _mark_written(self, records: int) -> None:
        if not records:
            return
        tail = self._tail
        start = len(tail) - self._unwritten_records
        pages = self._pages
        tail_map = self._tail_map
        for pos in itertools.islice(tail, start, start + records):
            offset, payload = tail_map[pos]
            page = pages.get(pos.page)  # None if consumed (read from memory) and released
            if page is not None:
                page.written_count = pos.index + 1
                page.written_end = offset + RECORD_OVERHEAD + len(payload)
            self._cache_bytes += len(payload)
        self._unwritten_records -= records

    def _failed_error(self, op: str, name: str, exc) -> PageStoreFailedError:
        return PageStoreFailedError(
            f"page store of address {self.address!r}: {op} failed on {name}: {exc}; "
            f"paged sends are refused"
        )

    def _fail(self, error, waiters: list) -> None:
        stopping = self._state is STOPPING
        self._state = FAILED
        self._unwritten_records = 0
        self._tail.clear()
        self._tail_map.clear()
        self._cache_bytes = 0
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
        pages = sorted(name for name in os.listdir(path) if _NAME_RE.match(name))
        if not pages:
            continue
        address = None
        for name in pages:
            try:
                with open(os.path.join(path, name), "rb") as f:
                    _page, address, _size = decode_page_header(f.read(_HEADER.size + MAX_ADDRESS_BYTES + 4))
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
