"""A parsed filter (:class:`Filter`), the blank one (:data:`MATCH_ALL`) and :func:`parse_filter`."""

from __future__ import annotations

from junction.model.filter.errors import FilterError
from junction.model.filter.parser import _Parser
from junction.model.filter.tree import _Eval
from junction.model.message import Message

__all__ = ["MATCH_ALL", "MAX_FILTER_LENGTH", "Filter", "parse_filter"]

#: Longest filter text accepted, in characters.
MAX_FILTER_LENGTH = 10_000

# Artemis prefixes that change how a filter reads; refused with a FilterError.
_UNSUPPORTED_PREFIXES = ("convert_string_expressions:", "hyphenated_props:")


class Filter:
    """A parsed filter expression; immutable and safe to share.

    Two filters are equal when their texts are (after stripping whitespace
    at either end), which lets configuration reloads spot unchanged filters.
    """

    __slots__ = ("text", "_fn", "match_all")

    def __init__(self, text: str, fn: _Eval, match_all: bool = False):
        self.text = text
        self._fn = fn
        #: True for the blank filter: every message matches.
        self.match_all = match_all

    def matches(self, message: Message) -> bool:
        """Whether ``message`` passes the filter (the expression is TRUE)."""
        return self._fn(message) is True

    def evaluate(self, message: Message) -> bool | None:
        """The three-valued result: True, False, or None for UNKNOWN."""
        return self._fn(message)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Filter):
            return NotImplemented
        return self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"

    def __str__(self) -> str:
        return self.text


#: The blank filter; ``parse_filter("")`` and ``parse_filter(None)`` return it.
MATCH_ALL = Filter("", lambda message: True, match_all=True)


def parse_filter(text: str | None) -> Filter:
    """Parse an Artemis filter expression / JMS selector.

    Returns :data:`MATCH_ALL` for ``None`` or blank text.  Raises
    :class:`FilterError` (a ``ValueError``) with the column of the problem for
    anything invalid, including filters over :data:`MAX_FILTER_LENGTH`
    characters or :data:`MAX_NESTING_DEPTH` levels.
    """
    if text is None:
        return MATCH_ALL
    if not isinstance(text, str):
        raise FilterError(f"a filter must be a string, not {type(text).__name__}")
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterError(
            f"filter is {len(text)} characters long; the maximum is {MAX_FILTER_LENGTH}",
            "",
            MAX_FILTER_LENGTH,
        )
    stripped = text.strip()
    if not stripped:
        return MATCH_ALL
    for prefix in _UNSUPPORTED_PREFIXES:
        if stripped.lower().startswith(prefix):
            raise FilterError(
                f"the Artemis '{prefix}' filter prefix is not supported",
                text,
                text.index(stripped[0]),
            )
    return Filter(stripped, _Parser(text).parse())
