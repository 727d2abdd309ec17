"""The error every stage of a filter raises: :class:`FilterError`, with the column of the problem."""

from __future__ import annotations

__all__ = ["FilterError"]


class FilterError(ValueError):
    """A filter expression is invalid.

    ``column`` is the 1-based character position of the problem in ``text``
    (``None`` when the problem has no position); ``reason`` is the message
    without the position.  The message does not repeat the filter text:
    callers usually quote it themselves.
    """

    def __init__(self, reason: str, text: str = "", position: int | None = None):
        self.reason = reason
        self.text = text
        self.column = None if position is None else position + 1
        if self.column is None:
            message = reason
        else:
            message = f"{reason} at column {self.column}"
        super().__init__(message)

