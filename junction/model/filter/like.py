"""LIKE patterns compiled to matchers with no backtracking (a hostile pattern stays linear-ish)."""

from __future__ import annotations

import re
from typing import Callable

from junction.model.filter.errors import FilterError

_ANY_RUN = object()  # '%'
_ANY_ONE = object()  # '_'


class _Segment:
    """A run of a LIKE pattern between ``%`` wildcards: fixed length, so it is
    matched with ``str`` methods or a quantifier-free regex (no backtracking)."""

    __slots__ = ("length", "literal", "regex")

    def __init__(self, items: list):
        self.length = len(items)
        if any(item is _ANY_ONE for item in items):
            self.literal = None
            source = "".join("." if item is _ANY_ONE else re.escape(item) for item in items)
            self.regex = re.compile(source, re.DOTALL)
        else:
            self.literal = "".join(items)
            self.regex = None

    def match_at(self, s: str, pos: int) -> bool:
        if self.literal is not None:
            return s.startswith(self.literal, pos)
        return self.regex.match(s, pos) is not None

    def find(self, s: str, start: int, end: int) -> int:
        if self.literal is not None:
            return s.find(self.literal, start, end)
        found = self.regex.search(s, start, end)
        return -1 if found is None else found.start()


def _compile_like(pattern: str, escape: str | None, text: str, pos: int) -> Callable[[str], bool]:
    """A matcher for a LIKE pattern.

    The pattern is split at ``%`` into fixed-length segments; the first must
    match at the start, the last at the end, and the middle ones are found
    leftmost-first in order, which is exact for ``%``-only wildcards and
    linear-ish in the input (unlike a backtracking ``.*`` regex, which a
    pattern such as ``'%a%a%a%a%b'`` can make exponential).
    """
    items: list = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            i += 1
            if i >= len(pattern):
                raise FilterError("LIKE pattern ends with its ESCAPE character", text, pos)
            items.append(pattern[i])
        elif c == "%":
            if not items or items[-1] is not _ANY_RUN:
                items.append(_ANY_RUN)
        elif c == "_":
            items.append(_ANY_ONE)
        else:
            items.append(c)
        i += 1
    runs: list[list] = [[]]
    for item in items:
        if item is _ANY_RUN:
            runs.append([])
        else:
            runs[-1].append(item)
    segments = [_Segment(run) for run in runs]
    if len(segments) == 1:
        only = segments[0]
        if only.literal is not None:
            literal = only.literal
            return lambda s: s == literal
        length = only.length
        regex = only.regex
        return lambda s: len(s) == length and regex.match(s) is not None
    first, middle, last = segments[0], segments[1:-1], segments[-1]
    middle = [seg for seg in middle if seg.length]
    min_length = first.length + last.length + sum(seg.length for seg in middle)
    if not middle and first.literal is not None and last.literal is not None:
        prefix, suffix = first.literal, last.literal

        def affix(s: str) -> bool:
            return len(s) >= min_length and s.startswith(prefix) and s.endswith(suffix)

        return affix

    def like(s: str) -> bool:
        n = len(s)
        if n < min_length or not first.match_at(s, 0):
            return False
        end = n - last.length
        if not last.match_at(s, end):
            return False
        at = first.length
        for seg in middle:
            found = seg.find(s, at, end)
            if found < 0:
                return False
            at = found + seg.length
        return True

    return like

