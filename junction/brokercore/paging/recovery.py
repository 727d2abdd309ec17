"""Recovery: scanning an address's page files at startup, repairing them.

:meth:`.store.PageStore.load` calls :func:`recover` once, before the writer
starts, with the cursor the broker last committed (:class:`.position.PagePosition`).

Recovery policy
===============

* Pages wholly before the cursor (all their records at or before it) are
  deleted without being read.
* Every other page is read and checked.  In the **last** page, the first
  invalid record (truncated, bad CRC, garbage) and all after it are a torn
  tail: never confirmed, since a confirmation follows the sync of everything
  before it.  The file is truncated there and synced; the report
  (:attr:`.store.PageStore.recovery`) says whether intact records followed the damage.
  A last page whose header is not intact was being created at the crash and
  is removed.  A page left empty is removed.
* An invalid header or record in any **earlier** page is corruption of
  synced data: :class:`PageCorruptionError` names the file, offset and
  reason, and ``load`` refuses to go on (silently skipping would lose or
  reorder messages).
* Records at or before the cursor are skipped; the read cursor starts just
  after it.  A cursor past the end of the data (records the broker depaged
  from memory that the crash then lost) simply means they are all consumed.

:func:`recover` reads one page file at a time (at most ``page_size_bytes``,
or one oversize record's page).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..journal.files import truncate_durably
from .errors import PageCorruptionError
from .format import PAGE_NAME_RE, check_record, decode_page_header, find_next_record
from .pages import Page
from .position import PagePosition

__all__ = ["PageRecovery", "PageTornTail", "Recovered", "recover"]


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
    """What :meth:`.store.PageStore.load` found and did."""

    #: Page files kept, oldest first.
    pages: list = field(default_factory=list)
    #: Records after the cursor, to be depaged.
    records: int = 0
    #: Their payload bytes.
    bytes: int = 0
    #: Files deleted: wholly consumed, empty, or without an intact header.
    removed_files: list = field(default_factory=list)
    torn_tail: PageTornTail | None = None


class Recovered(NamedTuple):
    """What :func:`recover` hands back to the store."""

    #: The report (:attr:`.store.PageStore.recovery`).
    report: PageRecovery
    #: The pages kept, oldest first.
    pages: list
    #: The first record after the cursor, or None if there is none on disk.
    read_position: PagePosition | None
    #: Its offset in its page file (meaningful with a read position).
    read_offset: int
    #: The highest page number on disk or in the cursor (0 if neither):
    #: new pages are numbered above it.
    highest: int


def recover(files, address: str, path: str | None, cursor: PagePosition | None, store_header_size: int) -> Recovered:
    """Scan and repair the page files of ``address`` in ``files`` (see the recovery policy).

    ``path`` names the folder in messages; ``cursor`` is the position the
    broker last committed as depaged (None: nothing ever was);
    ``store_header_size`` is the size of ``address``'s page header.  Raises
    :class:`PageCorruptionError` on damage in a page that is not the last.
    """
    report = PageRecovery()
    pages: list[Page] = []
    found: dict[int, str] = {}
    for name in files.list():
        m = PAGE_NAME_RE.match(name)
        if m:
            found[int(m.group(1))] = name
    numbers = sorted(found)
    highest = numbers[-1] if numbers else 0
    if cursor is not None:
        highest = max(highest, cursor.page)
    rpos, roffset = None, store_header_size
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
            page_no, found_address, header_size = decode_page_header(mv)
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
                f"page file {name} of address {address!r}: {exc}; the page was "
                f"completely written and synced before a later one was started, so this "
                f"is corruption",
                name,
                0,
            ) from None
        if found_address != address:
            raise PageCorruptionError(
                f"page file {name} in {path or 'the page directory'} belongs to "
                f"address {found_address!r}, not {address!r}",
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
            n, end, bad_reason = check_record(mv, pos, page32, count)
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
                    f"page file {name} of address {address!r} at offset {pos}: "
                    f"{bad_reason}; the page was completely written and synced before a "
                    f"later one was started, so this is corruption, not a torn write. "
                    f"Restore the paging directory from a backup, or move the damaged "
                    f"file away to drop its records",
                    name,
                    pos,
                )
            after = find_next_record(data, page32, pos + 1)
            report.torn_tail = PageTornTail(name, pos, len(mv) - pos, bad_reason, after is not None)
            truncate_durably(files, name, pos)
        del mv, data
        if count == 0 or count - 1 <= skip:
            # Empty, or every record at or before the cursor.
            files.remove(name)
            report.removed_files.append(name)
            continue
        page = Page(number, name, header_size)
        page.count = page.written_count = count
        page.end = page.written_end = pos
        pages.append(page)
        report.pages.append(name)
        if rpos is None:
            if skip >= 0:
                rpos = PagePosition(number, skip + 1)
            else:
                rpos, roffset = PagePosition(number, 0), header_size
    if report.removed_files:
        files.sync_directory()
    return Recovered(report, pages, rpos, roffset, highest)
