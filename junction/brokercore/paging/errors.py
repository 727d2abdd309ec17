"""The page store's errors: one base class, and one class per way it refuses.

:class:`PageStoreFailedError` is the one a broker meets at run time (a write
or fsync failed, and the store refuses everything after); the others report
a damaged page file or a caller's mistake.
"""

from __future__ import annotations

__all__ = [
    "PagingError",
    "PageStoreFailedError",
    "PageStoreClosedError",
    "PageStoreStateError",
    "PageCorruptionError",
    "PageRecordTooLargeError",
]


class PagingError(Exception):
    """Base class of the page store's errors."""


class PageStoreFailedError(PagingError):
    """A write or sync failed; the store refuses all further work."""


class PageStoreClosedError(PagingError):
    """An append (or read) after :meth:`.store.PageStore.stop`."""


class PageStoreStateError(PagingError):
    """The store was used out of order (append before start, load twice ...)."""


class PageCorruptionError(PagingError):
    """A page file that had been completely written and synced is damaged."""

    def __init__(self, message: str, file: str = "", offset: int = 0):
        super().__init__(message)
        self.file = file
        self.offset = offset


class PageRecordTooLargeError(PagingError, ValueError):
    """A payload exceeds :data:`.format.MAX_PAYLOAD_SIZE`."""
