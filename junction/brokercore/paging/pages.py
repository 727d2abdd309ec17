"""The page files of one store: their accounting, and reading written records back.

A :class:`Page` is the reactor-side account of one page file: how many
records were appended to it and how far the writer has written them; a
:class:`PageSet` holds a store's pages, oldest first, and forgets each once
all its records are consumed.  A
:class:`PageReader` reads records that are written (and no longer in the
store's tail, :mod:`.tail`) from the files, synchronously on the reactor
thread, through one read-ahead chunk of ``read_ahead_bytes``
(:data:`.store.READ_AHEAD_BYTES`, 256 KiB) -- or one record, when a record is
bigger -- so that a depager reading in order usually makes one disk read per
chunk rather than one per record.
"""

from __future__ import annotations

import bisect

from ..journal.framing import CRC_SIZE
from .errors import PageCorruptionError
from .format import MAX_PAYLOAD_SIZE, RECORD_HEADER, RECORD_OVERHEAD, check_record
from .position import PagePosition

__all__ = ["Page", "PageSet", "PageReader"]


class Page:
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


class PageSet:
    """A store's pages by number, their order (oldest first) and the current
    page, which appends go to."""

    __slots__ = ("pages", "order", "current")

    def __init__(self):
        self.pages: dict[int, Page] = {}
        self.order: list[int] = []
        self.current: Page | None = None

    def add(self, page: Page) -> None:
        """``page`` is the newest."""
        self.pages[page.number] = page
        self.order.append(page.number)

    def after(self, number: int) -> Page | None:
        """The first page numbered above ``number``, or None."""
        order = self.order
        i = bisect.bisect_right(order, number)
        if i == len(order):
            return None
        return self.pages[order[i]]

    def release(self, consumed: PagePosition) -> list[Page]:
        """Forget the oldest pages (never the current one) whose records are
        all at or before ``consumed``; the pages forgotten."""
        dead = []
        order = self.order
        while order:
            page = self.pages[order[0]]
            if page is self.current:
                break
            if page.number < consumed.page or (page.number == consumed.page and consumed.index >= page.count - 1):
                order.pop(0)
                del self.pages[page.number]
                dead.append(page)
            else:
                break
        return dead


class PageReader:
    """Reads written records of ``address``'s page files through a read-ahead.

    ``files`` is the file layer of the address folder (set by the store's
    load).  A record that is not what was written -- the file changed under
    the store, or the disk is failing -- raises :class:`PageCorruptionError`.
    """

    __slots__ = ("files", "address", "read_ahead_bytes", "_ra", "disk_reads", "disk_read_bytes")

    def __init__(self, address: str, read_ahead_bytes: int):
        self.files = None
        self.address = address
        self.read_ahead_bytes = read_ahead_bytes
        #: Read-ahead: (page number, file offset, bytes) or None.
        self._ra: tuple[int, int, bytes] | None = None
        # Statistics.
        self.disk_reads = 0
        self.disk_read_bytes = 0

    def read(self, page: Page, index: int, offset: int) -> bytes:
        """The payload of record ``index`` of ``page``, at ``offset`` in its file."""
        if offset + RECORD_OVERHEAD > page.written_end:
            raise self._corrupt(page, offset, "record header lies beyond the written data")
        data, start = self._read_ahead(page, offset, RECORD_OVERHEAD)
        mv = memoryview(data)
        rel = offset - start
        magic, _f, _r, _page32, _index, n = RECORD_HEADER.unpack_from(mv, rel)
        size = RECORD_OVERHEAD + min(n, MAX_PAYLOAD_SIZE + 1)
        if rel + size > len(data):
            if offset + size > page.written_end:
                raise self._corrupt(page, offset, f"record of {size} bytes runs past the written data")
            data, start = self._read_ahead(page, offset, size)
            mv = memoryview(data)
            rel = offset - start
        n, end, reason = check_record(mv, rel, page.number & 0xFFFFFFFF, index)
        if reason is not None:
            raise self._corrupt(page, offset, reason)
        return mv[rel + RECORD_HEADER.size : end - CRC_SIZE].tobytes()

    def forget(self, number: int) -> None:
        """Page ``number`` is gone: drop its read-ahead, if that is what it holds."""
        if self._ra is not None and self._ra[0] == number:
            self._ra = None

    def _read_ahead(self, page: Page, offset: int, need: int) -> tuple[bytes, int]:
        """Bytes of ``page`` covering ``offset .. offset+need``: ``(data, start)``."""
        ra = self._ra
        if ra is not None and ra[0] == page.number and ra[1] <= offset and offset + need <= ra[1] + len(ra[2]):
            return ra[2], ra[1]
        size = min(max(need, self.read_ahead_bytes), page.written_end - offset)
        data = self.files.read(page.name, offset, size)
        self.disk_reads += 1
        self.disk_read_bytes += len(data)
        if len(data) < need:
            raise self._corrupt(page, offset, f"file ends {len(data)} bytes after it, {need} expected")
        self._ra = (page.number, offset, data)
        return data, offset

    def _corrupt(self, page: Page, offset: int, reason: str) -> PageCorruptionError:
        self._ra = None
        return PageCorruptionError(
            f"page file {page.name} of address {self.address!r} at offset {offset}: {reason} "
            f"(the record was written by this broker; the file changed or the disk is failing)",
            page.name,
            offset,
        )
