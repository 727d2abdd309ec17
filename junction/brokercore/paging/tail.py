"""The records of a page store held in memory: the unwritten ones, and the newest written.

Records appended but not yet written are served **from memory**, so a
consumer never waits for the disk and the broker needs no "readable"
notification: everything appended is readable at once.  Written records stay
in a small cache, at most ``cache_limit`` payload bytes
(:data:`.store.TAIL_CACHE_BYTES`, 1 MiB), so a depager that keeps up with the
producers never touches the disk; records before the read cursor leave first,
then the oldest while over the limit.  Older records are read from the page
files (:class:`.pages.PageReader`).

The :class:`Tail` is a suffix of all records appended, in order: positions in
:attr:`Tail.positions`, ``{position: (offset, payload)}`` in
:attr:`Tail.entries`; the last :attr:`Tail.unwritten` of them are not written
yet and never leave it (until the store fails).
"""

from __future__ import annotations

import itertools
from collections import deque

from .format import RECORD_OVERHEAD

__all__ = ["Tail"]


class Tail:
    """The in-memory suffix of a store's records (see the module documentation)."""

    __slots__ = ("positions", "entries", "unwritten", "cached_bytes", "cache_limit")

    def __init__(self, cache_limit: int):
        self.positions: deque = deque()
        self.entries: dict = {}
        #: How many of the last records are not written yet.
        self.unwritten = 0
        #: Payload bytes of the written records held.
        self.cached_bytes = 0
        self.cache_limit = cache_limit

    def add(self, position, offset: int, payload: bytes) -> None:
        """A record just appended (not written yet) at ``offset`` of its page."""
        self.positions.append(position)
        self.entries[position] = (offset, payload)
        self.unwritten += 1

    def payload(self, position) -> bytes | None:
        """The payload at ``position`` if it is held, else None."""
        entry = self.entries.get(position)
        return None if entry is None else entry[1]

    def written(self, records: int, pages: dict) -> None:
        """The writer wrote the oldest ``records`` unwritten records: move their
        pages' written marks (``pages``: number -> :class:`.pages.Page`) and
        count them as cached."""
        if not records:
            return
        positions = self.positions
        start = len(positions) - self.unwritten
        entries = self.entries
        for pos in itertools.islice(positions, start, start + records):
            offset, payload = entries[pos]
            page = pages.get(pos.page)  # None if consumed (read from memory) and released
            if page is not None:
                page.written_count = pos.index + 1
                page.written_end = offset + RECORD_OVERHEAD + len(payload)
            self.cached_bytes += len(payload)
        self.unwritten -= records

    def trim(self, read_position) -> None:
        """Drop written records: those before ``read_position``, then the
        oldest while over the cache limit."""
        positions = self.positions
        written = len(positions) - self.unwritten
        while written > 0:
            pos = positions[0]
            if pos < read_position or self.cached_bytes > self.cache_limit:
                positions.popleft()
                self.cached_bytes -= len(self.entries.pop(pos)[1])
                written -= 1
            else:
                break

    def clear(self) -> None:
        """Forget every record (the store failed)."""
        self.unwritten = 0
        self.positions.clear()
        self.entries.clear()
        self.cached_bytes = 0
