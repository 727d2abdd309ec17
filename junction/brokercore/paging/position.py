"""Where a record is: the :class:`PagePosition`, and the cursor the broker keeps.

A position is (page number, index of the record in its page); positions sort
like the records.  The broker depages records in order and commits the
position it reached, as 13 bytes (:meth:`PagePosition.to_bytes`), in a
journal record of its own; the page store is loaded with that cursor at the
next start (:mod:`.recovery`) and forgets everything up to it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .format import MAX_PAGE_NUMBER, MAX_RECORDS_PER_PAGE

__all__ = ["PagePosition"]

_POSITION = struct.Struct(">BQI")
_POSITION_VERSION = 1


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
