"""Plain-text tables for a terminal, shared by every command that prints one.

``junction status`` (:mod:`.status_table`, :mod:`.cluster_table`) and the
board of ``junction up`` (:mod:`.board`) align their columns, cut long names
and write durations and sizes the same way, with these.
"""

from __future__ import annotations

__all__ = ["ELLIPSIS", "MAX_NAME_WIDTH", "cell", "format_bytes", "format_duration", "format_table", "truncate"]

#: Widest a name column gets before names are cut short with an ellipsis.
MAX_NAME_WIDTH = 40
ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"


def truncate(text, width: int = MAX_NAME_WIDTH) -> str:
    """*text* cut to *width* characters, the last one an ellipsis when cut."""
    text = "" if text is None else str(text)
    if width < 1 or len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS


def format_duration(seconds) -> str:
    """``93784.2`` -> ``1d 02:03:04``; under a day ``02:03:04``."""
    try:
        total = int(float(seconds))
    except (TypeError, ValueError):
        return "-"
    total = max(total, 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}d {clock}" if days else clock


def format_bytes(value) -> str:
    """Bytes with a binary unit: ``512 B``, ``1.5 KiB``, ``10.0 MiB``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-" if value is None else str(value)
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)  # unreachable


def cell(value) -> str:
    """A table cell's text: ``-`` for None, ``yes``/``no`` for booleans, whole floats as integers."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_table(headers: list[str], rows: list[list], numeric: set[int] = frozenset()) -> list[str]:
    """Aligned lines for a table: text columns left-aligned, *numeric* ones right.

    Column widths fit the widest cell; the last column is not padded on the
    right so lines carry no trailing blanks.
    """
    cells = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))

    def line(values):
        out = []
        for i, text in enumerate(values):
            out.append(text.rjust(widths[i]) if i in numeric else text.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return [line(headers)] + [line(row) for row in cells]
