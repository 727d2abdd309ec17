"""The read side of a page store: the read cursor, records in flight, the consumed cursor.

:meth:`.store.PageStore.read` returns the next records after the *read
cursor* and advances it; they stay *in flight* until the broker has moved
them into its journal and calls :meth:`.store.PageStore.consumed`, which
moves the *consumed cursor* up to them.  :meth:`.store.PageStore.rewind`
moves the read cursor back to the consumed cursor (e.g. when the broker's
journal write of a depaged batch failed), so the records in flight are read
again.

A record comes from memory while the store's tail holds it (:mod:`.tail`),
else from its page file (:class:`.pages.PageReader`).
"""

from __future__ import annotations

from collections import deque

from .errors import PageCorruptionError
from .format import RECORD_OVERHEAD
from .pages import Page, PageReader, PageSet
from .position import PagePosition
from .tail import Tail

__all__ = ["ReadCursor"]


class ReadCursor:
    """Where ``address``'s store reads next, and what it read and has not forgotten.

    ``position`` and ``offset`` are the read cursor (the next record may be
    on a later page, if that position's page does not exist); ``inflight``
    holds ``(position, offset, payload length)`` of each record read and not
    consumed; ``consumed`` is the consumed cursor (None: nothing ever was).
    """

    __slots__ = (
        "address",
        "pages",
        "tail",
        "reader",
        "header_size",
        "position",
        "offset",
        "inflight",
        "consumed",
        "cache_hits",
    )

    def __init__(self, address: str, pages: PageSet, tail: Tail, reader: PageReader, header_size: int):
        self.address = address
        self.pages = pages
        self.tail = tail
        self.reader = reader
        self.header_size = header_size
        self.position = PagePosition(0, 0)
        self.offset = header_size
        self.inflight: deque = deque()
        self.consumed: PagePosition | None = None
        #: Records served from the tail rather than a page file.
        self.cache_hits = 0

    def read(self, max_records: int, max_bytes: int) -> list[tuple[PagePosition, bytes]]:
        """The next records, in order, advancing the read cursor (see
        :meth:`.store.PageStore.read` for the limits and errors)."""
        out: list[tuple[PagePosition, bytes]] = []
        total = 0
        inflight = self.inflight
        while len(out) < max_records:
            page = self._page()
            if page is None:
                break
            pos = self.position
            offset = self.offset
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
            inflight.append((pos, offset, len(payload)))
            self.offset = offset + RECORD_OVERHEAD + len(payload)
            self.position = PagePosition(pos.page, pos.index + 1)
        return out

    def consume(self, position: PagePosition) -> tuple[int, int] | None:
        """Move the consumed cursor to ``position``: ``(records, payload bytes)``
        it forgot, or None if ``position`` is at or before the consumed cursor.

        ValueError if ``position`` was not read.
        """
        if self.consumed is not None and position <= self.consumed:
            return None
        inflight = self.inflight
        if not inflight or position < inflight[0][0] or position >= self.position:
            raise ValueError(
                f"consumed({position}) of address {self.address!r}: that record has not been "
                f"read (read cursor at {self.position})"
            )
        records = nbytes = 0
        while inflight and inflight[0][0] <= position:
            _pos, _offset, n = inflight.popleft()
            records += 1
            nbytes += n
        self.consumed = position
        return records, nbytes

    def rewind(self) -> None:
        """Move the read cursor back to the first record in flight."""
        if self.inflight:
            pos, offset, _n = self.inflight[0]
            self.position, self.offset = pos, offset
            self.inflight.clear()

    def _page(self) -> Page | None:
        """The page holding the record at the read cursor, moving the cursor
        over finished pages; None if no record is there (yet)."""
        pages = self.pages
        page = pages.pages.get(self.position.page)
        if page is None:
            page = pages.after(self.position.page)
            if page is None:
                return None
            self.position, self.offset = PagePosition(page.number, 0), self.header_size
        while self.position.index >= page.count:
            if page is pages.current:
                return None
            page = pages.after(page.number)
            if page is None:
                return None
            self.position, self.offset = PagePosition(page.number, 0), self.header_size
        return page

    def _fetch(self, page: Page, pos: PagePosition, offset: int) -> bytes:
        payload = self.tail.payload(pos)
        if payload is not None:
            self.cache_hits += 1
            return payload
        # Not in memory, so written (unwritten records never leave the tail).
        return self.reader.read(page, pos.index, offset)
