"""A job's report: one self-contained HTML file of headline figures, tables and plots.

One file (inline CSS, plots as base64 PNG, no scripts, no external URLs) so a
report can be mailed, attached to a ticket or opened from an air-gapped host
and look the same.  Every text that came from the data is HTML-escaped: keys,
user names and queue names are chosen by clients.
"""

from __future__ import annotations

import base64
import html
import io
import math
import numbers
import os
import time
from typing import Sequence

import matplotlib

matplotlib.use("Agg")

__all__ = ["Report", "format_value"]

#: resolution of embedded plots (dots per inch)
PLOT_DPI = 100
#: significant digits of a float shown in a table or tile
FLOAT_DIGITS = 4

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d2430;
       margin: 2rem auto; max-width: 72rem; padding: 0 1.5rem; line-height: 1.45; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem 0; }
h2 { font-size: 1.2rem; margin: 2.2rem 0 .6rem 0; padding-bottom: .25rem; border-bottom: 1px solid #d8dde5; }
h3 { font-size: 1rem; margin: 1.4rem 0 .4rem 0; }
.subtitle { color: #5b6575; margin: 0 0 1.4rem 0; }
.tiles { display: flex; flex-wrap: wrap; gap: .7rem; margin: 1rem 0 1.5rem 0; }
.tile { border: 1px solid #d8dde5; border-radius: 6px; padding: .55rem .9rem; min-width: 8.5rem; background: #f7f9fb; }
.tile .label { font-size: .78rem; color: #5b6575; text-transform: uppercase; letter-spacing: .03em; }
.tile .value { font-size: 1.35rem; font-weight: 600; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; margin: .4rem 0 1rem 0; font-size: .88rem; }
th, td { border-bottom: 1px solid #e3e7ed; padding: .28rem .7rem; text-align: left; vertical-align: top; }
th { background: #f0f3f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #5b6575; font-size: .85rem; margin: .2rem 0 1rem 0; }
.empty { color: #5b6575; font-style: italic; }
figure { margin: .6rem 0 1.4rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e7ed; }
figcaption { color: #5b6575; font-size: .85rem; }
footer { margin-top: 3rem; color: #8a93a3; font-size: .8rem; }
pre { background: #f7f9fb; border: 1px solid #e3e7ed; padding: .6rem .8rem; overflow-x: auto; font-size: .82rem; }
"""


def format_value(value) -> str:
    """A value as a table or tile shows it: thousands separators, few float digits, "-" for null."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "-"
        if math.isinf(number):
            return "∞" if number > 0 else "-∞"
        if number == int(number) and abs(number) < 1e15:
            return f"{int(number):,}"
        if abs(number) >= 1000:
            return f"{number:,.1f}"
        return f"{number:.{FLOAT_DIGITS}g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return str(value)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Report:
    """Build a report in order (tiles, sections, tables, plots), then :meth:`write` it."""

    def __init__(self, title: str, subtitle: str = ""):
        self.title = title
        self.subtitle = subtitle
        self._metrics: list[tuple[str, str]] = []
        self._body: list[str] = []

    def metric(self, label: str, value) -> Report:
        """A headline tile (shown at the top, in the order added)."""
        self._metrics.append((label, format_value(value)))
        return self

    def section(self, title: str, text: str | None = None) -> Report:
        """A heading, and a paragraph under it when ``text`` is given (blank lines split paragraphs)."""
        self._body.append(f"<h2>{html.escape(title)}</h2>")
        if text:
            for para in text.strip().split("\n\n"):
                self._body.append(f"<p>{html.escape(para.strip())}</p>")
        return self

    def pre(self, title: str, text: str) -> Report:
        """Preformatted text under a small heading (configuration to copy, a command)."""
        self._body.append(f"<h3>{html.escape(title)}</h3><pre>{html.escape(text)}</pre>")
        return self

    def table(self, title: str, columns: list[str], rows: list[Sequence], note: str | None = None) -> Report:
        """A table (numbers right-aligned and formatted, everything escaped); an empty one says so."""
        parts = [f"<h3>{html.escape(title)}</h3>"]
        if note:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        if not rows:
            parts.append('<p class="empty">none</p>')
        else:
            parts.append("<table><thead><tr>")
            parts.extend(f"<th>{html.escape(str(c))}</th>" for c in columns)
            parts.append("</tr></thead><tbody>")
            for row in rows:
                parts.append("<tr>")
                for value in row:
                    cls = ' class="num"' if _is_number(value) else ""
                    parts.append(f"<td{cls}>{html.escape(format_value(value))}</td>")
                parts.append("</tr>")
            parts.append("</tbody></table>")
        self._body.append("".join(parts))
        return self

    def plot(self, title: str, fig) -> Report:
        """Embed a matplotlib Figure as a PNG (then close it, freeing its memory)."""
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        try:
            fig.savefig(buffer, format="png", dpi=PLOT_DPI, bbox_inches="tight")
        finally:
            plt.close(fig)
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        alt = html.escape(title, quote=True)
        self._body.append(
            f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(title)}</figcaption></figure>"
        )
        return self

    def render(self) -> str:
        """The whole HTML document."""
        tiles = "".join(
            f'<div class="tile"><div class="label">{html.escape(label)}</div>'
            f'<div class="value">{html.escape(value)}</div></div>'
            for label, value in self._metrics
        )
        head = f"<h1>{html.escape(self.title)}</h1>"
        if self.subtitle:
            head += f'<p class="subtitle">{html.escape(self.subtitle)}</p>'
        generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(self.title)}</title><style>{_CSS}</style></head><body>"
            f"{head}"
            + (f'<div class="tiles">{tiles}</div>' if tiles else "")
            + "\n".join(self._body)
            + f"<footer>junction analyze, {generated}</footer></body></html>\n"
        )

    def write(self, path: str) -> str:
        """Write the report to ``path`` (its folder is created); the path."""
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.render())
        return path
