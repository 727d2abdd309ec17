"""Did-you-mean: the names closest to a misspelt one (:mod:`difflib`), for error messages.

Every "unknown element", "unknown parameter" or "unknown value" message of the
configuration ends with what :func:`suggest` or :func:`suggest_element` finds.
"""

from __future__ import annotations

import difflib

__all__ = ["closest", "suggest", "suggest_element"]


def closest(name: str, candidates, *, upper: bool = False) -> list[str]:
    """The candidates closest to ``name`` (difflib), best first; only those
    nearly as close as the best, so a clear winner is suggested alone."""
    pool = list(dict.fromkeys(candidates))
    key = (lambda c: c.upper()) if upper else (lambda c: c)
    scored = []
    for c in pool:
        ratio = difflib.SequenceMatcher(None, key(name), key(c)).ratio()
        if ratio >= 0.6:
            scored.append((ratio, c))
    scored.sort(key=lambda rc: -rc[0])
    if not scored:
        return []
    best = scored[0][0]
    return [c for r, c in scored[:3] if r >= best - 0.05]


def suggest(name: str, candidates, *, upper: bool = False) -> str:
    match = closest(name, candidates, upper=upper)
    if not match:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in match) + "?"


def suggest_element(name: str, candidates) -> str:
    pool = list(dict.fromkeys(candidates))
    match = closest(name, pool)
    if match:
        return "; did you mean " + " or ".join(f"<{m}>" for m in match) + "?"
    if len(pool) <= 3:
        return "; expected " + " or ".join(f"<{m}>" for m in pool)
    return ""
