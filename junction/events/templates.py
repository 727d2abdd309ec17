"""Line templates: the JSON lines of compact entries alike, without a dict per line.

Most compact entries of a busy node repeat each other but for a few values:
one consumer's deliveries differ only in their time, message number and
delivery count; one producer's sends in their time, number and size.  For
such an entry :class:`LineTemplates` makes, once, the lines of its events
(with :func:`~junction.events.sink.entry_builder` and ``orjson``, as for any
entry) with those values cut out, and keeps them as ``%`` format strings;
the next entry alike is then one dictionary lookup and one bytes ``%``
for all its lines, about half the CPU of building a dict per line and
encoding it.  The values put into a template are numbers (``ts`` in epoch
milliseconds as ``orjson`` writes it, and integers with ``%d``, a float
refused rather than cut), so a line made this way is the builder's line.  An entry with a carried trace id, or a value of another type than
the template expects, has no template and is encoded the ordinary way.
"""

from __future__ import annotations

import operator
import uuid

import orjson

__all__ = ["LineTemplates", "MAX_TEMPLATES", "VARYING"]

#: the compact-layout values that change from one entry to the next, put into templates
VARYING = ("message_number", "size", "delivery_count")
#: templates kept, at most (one per distinct combination of the other values); beyond, all go
MAX_TEMPLATES = 10_000

_TOKEN = uuid.uuid4().hex  # marks a hole in a template; random, so no value contains it
#: an entry's ``ts`` as the builders write it (epoch ms, the compact entry's seconds * 1000)
_ENTRY_TS = "dumps(entry[1] * 1000.0)"


def _flat_names(layout) -> list[str]:
    """The layout's top-level value names (a context tuple counts as one value)."""
    return ["(context)" if isinstance(name, tuple) else name for name in layout]


class LineTemplates:
    """Templates of one compact entry kind: ``lines(entry)`` -> its lines (bytes), or None.

    ``builders`` make the objects (dicts) of the events the entry stands for,
    ``layout`` is the kind's compact layout and ``node_id`` the node's id
    (``message_id`` is ``<node id>/<number>`` when the entry carries none).
    """

    def __init__(self, builders, layout, node_id: str):
        self.builders = builders
        self.node_prefix = node_id + "/"
        names = _flat_names(layout)
        self._index = {name: 2 + i for i, name in enumerate(names)}  # entry = (kind, ts, *values)
        self._trace_index = self._index["message_trace"]
        static = [2 + i for i, name in enumerate(names) if name not in VARYING]
        self._key = operator.itemgetter(*static)
        self._templates: dict = {}

    def lines(self, entry):
        """The entry's lines (bytes, joined by newlines, without the last) from its template, made
        now if it is the first of its kind; None when it has none (then its lines are made
        the ordinary way)."""
        key = self._key(entry)
        try:
            made = self._templates.get(key)
        except TypeError:  # a value that is not hashable (a list): no template
            return None
        if made is None:
            if len(self._templates) >= MAX_TEMPLATES:
                self._templates.clear()
            made = self._templates[key] = self._make(entry)
        if not made:
            return None
        template, values = made
        try:
            return template % values(entry)
        except (TypeError, AttributeError):  # a value of another type than this template's
            return None

    def _make(self, entry) -> tuple:
        """``(template, values)``: the ``%`` template of the entry's lines and the function
        that picks the values for it out of an entry; () for an entry that cannot have one."""
        made = self._holes(entry)
        if not made:
            return ()
        template, holes = made
        expressions = [_ENTRY_TS if hole == "ts" else self._integer(hole) for hole in holes]
        source = "lambda entry: (" + "".join(f"{expression}, " for expression in expressions) + ")"
        values = eval(source, {"dumps": orjson.dumps})  # noqa: S307 - our own expressions, no input in them
        return template, values

    def row_template(self, entry) -> tuple:
        """``(template, shape)`` for the rows (:data:`~junction.events.sink.ROW`) alike
        ``entry``, the compact entry one of them stands for (the template ends with the
        last line's newline): ``shape`` is the order of
        the values the template takes, ``t`` the row's ts as ``orjson`` writes its
        milliseconds, ``n`` its number, ``x`` its extra (size or delivery count), for
        instance ``"tnx"``; () when the entry cannot have a template (its rows are then
        written the ordinary way)."""
        made = self._holes(entry)
        if not made:
            return ()
        template, holes = made
        letters = {"ts": "t", "message_number": "n", "size": "x", "delivery_count": "x"}
        return template + b"\n", "".join(letters[hole] for hole in holes)

    def _holes(self, entry) -> tuple:
        """``(template, holes)``: the entry's lines with its varying values cut out, and
        the names of those values in the order the template takes them; () when the
        entry carries a trace id or its lines do not have each hole once."""
        if entry[self._trace_index] is not None:
            return ()
        texts, holes = [], []
        for build in self.builders:
            obj = build(entry)
            marks = {"ts": (f'"{_TOKEN}ts"', "%b")}
            obj["ts"] = f"{_TOKEN}ts"
            obj["message_id"] = f"{self.node_prefix}{_TOKEN}n"
            marks["message_number"] = (f"{_TOKEN}n", "%d")
            for name in ("size", "delivery_count"):
                if name in obj and name in self._index:
                    obj[name] = f"{_TOKEN}{name}"
                    marks[name] = (f'"{_TOKEN}{name}"', "%d")
            text = orjson.dumps(obj).decode("utf-8").replace("%", "%%")
            if any(text.count(mark) != 1 for mark, _ in marks.values()):
                return ()
            for name, (mark, spec) in sorted(marks.items(), key=lambda item: text.index(item[1][0])):
                text = text.replace(mark, spec)
                holes.append(name)
            texts.append(text)
        return "\n".join(texts).encode("utf-8"), holes

    def _integer(self, name: str) -> str:
        """The expression of an integer value (``__index__``: a float is refused, not cut)."""
        return f"entry[{self._index[name]}].__index__()"
