"""The journal's errors: one base class, and one class per way a caller can be refused.

:class:`JournalFailedError` is the one a broker meets at run time (a write or
fsync failed, and the journal refuses everything after); the others report a
damaged directory at :meth:`.journal.Journal.load` or a caller's mistake.
"""

from __future__ import annotations

__all__ = [
    "JournalError",
    "JournalFailedError",
    "JournalCorruptionError",
    "JournalStateError",
    "JournalClosedError",
    "UnknownRecordError",
    "DuplicateRecordError",
    "failed_error",
]


class JournalError(Exception):
    """Base class of the journal's errors."""


class JournalFailedError(JournalError):
    """A write or sync failed; the journal refuses all further work."""


class JournalCorruptionError(JournalError):
    """Recovery found damage in a segment that had been completely written."""

    def __init__(self, message: str, file: str = "", offset: int = 0):
        super().__init__(message)
        self.file = file
        self.offset = offset


class JournalStateError(JournalError):
    """The journal was used out of order (append before start, load twice ...)."""


class JournalClosedError(JournalError):
    """An append after :meth:`Journal.stop`."""


class UnknownRecordError(JournalError, LookupError):
    """UPDATE or DELETE of a record id that is not live."""


class DuplicateRecordError(JournalError):
    """ADD of a record id that is live or that an open transaction refers to.

    Record ids must not be reused while anything refers to them (see
    :mod:`.fold`); take new ids from :meth:`Journal.next_id`.
    """


def failed_error(op: str, name: str, exc) -> JournalFailedError:
    """The error of a failed write, fsync, rename ... (the writer's ``make_error``)."""
    return JournalFailedError(f"journal {op} failed on {name}: {exc}; durable sends are refused")
