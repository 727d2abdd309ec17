"""The event writer process: spooled events in, rotated JSON Lines files out.

A node's :class:`~junction.events.writer.EventLog` queues events as flat
tuples and the hottest as rows (:data:`ROW`); every 0.2 s its shipper thread
writes what gathered to a spool segment (:func:`segment`: the tuples in one
``marshal`` list, about 0.2 µs an entry, and the rows' bytes as they are,
renamed into place whole), and a child process running this module (``python -m
junction.events.sink``) turns the segments into lines, oldest first, and
deletes each once written.  Why a process: encoding is most of what an
event costs (3-5 µs of CPU in a busy node, three events a message), and
in a thread of the node it holds the interpreter lock the reactor needs.
The process runs at niceness :data:`WRITER_NICE` and, where the system
has it (Linux), in the ``SCHED_IDLE`` scheduling class, so it takes only the
CPU time the broker and its clients leave; on a saturated machine the spool
grows on disk (bounded by the node's ``max-spool-size``) and the files catch
up later.  Segments left by a process that was killed are converted by the
next one: a killed writer loses nothing, though it may write the events of
the segment it was working on twice.

:class:`EventSink` is the file side, with no I/O but its files and no
thread, so it is tested in process with a fake clock:

* each kind gets an entry builder compiled from
  :data:`~junction.events.schema.KINDS` (:func:`entry_builder`) that makes
  the event's object with one dict display, and ``orjson.dumps`` writes it
  (C; about 0.9 µs an event against about 3.5 µs for encoders in Python);
  a compact entry like one seen before is written from a line template
  instead (:mod:`junction.events.templates`, about 0.5 µs an event), which
  makes the same bytes;
  the line parses to what :func:`~junction.events.schema.encode` writes (the
  same keys, order and values; orjson may spell a float differently,
  ``1e16`` for ``1e+16``, and writes NaN and the infinities as null where
  ``encode`` refuses them).  A value orjson cannot write (an integer beyond
  64 bits) goes to ``encode``'s own JSON encoder; a string that is not valid
  Unicode is reported and its event not written;
* files are named ``events-<node>-<UTC time>-<n>.jsonl`` and rotated when
  they reach ``max_file_bytes`` or are ``max_file_age_s`` old; the oldest are
  deleted beyond ``max_files``;
* a write error fails the sink: what it could not write and everything
  after is dropped and counted, and ``failed`` says why.

An entry is ``(kind, ts, value, ...)`` with the kind's values in
:data:`~junction.events.schema.KINDS` order, or one of the compact entries
of :data:`LAYOUTS` that the broker core's hot paths queue: the values the
message's events do not share with others of the same producer or consumer,
then one context tuple made once for that producer or consumer, stamped in
epoch seconds, with the message's number in place of its trace id and one
queue's name in place of a list (:data:`DERIVED`).  One entry of an
auto-acknowledged delivery stands for both its events, ``message.delivered``
and ``message.acknowledged``, stamped alike.
A row stands for one compact entry whose static values are in the
segment's statics (:func:`expand_row`); its lines come from one template per
code.

The node talks to the process over two pipes (internal: both ends are in
this package).  Its stdin carries a byte for each new segment (a wake-up)
and its end says the node stops: convert the rest, then end.  Its stdout
carries a status frame (a little-endian u32 length and a ``marshal``
payload) after each segment and each idle look:
``(written, dropped, failed, file, cpu_s, problems, converted_bytes)``,
totals since the process started, the current file, its CPU seconds, and the
messages of what went wrong since the last frame (at most
:data:`MAX_PROBLEMS`), which the node logs.
"""

from __future__ import annotations

import marshal
import os
import re
import select
import struct
import sys
import time

import orjson

from junction.events.schema import _ENCODER, KINDS, SCHEMA_VERSION, SchemaError
from junction.events.templates import LineTemplates

__all__ = [
    "EventSink",
    "SENT",
    "DELIVERED",
    "ACKNOWLEDGED",
    "DELIVERED_AND_ACKNOWLEDGED",
    "LAYOUTS",
    "DERIVED",
    "events_of",
    "events_in",
    "take_frames",
    "MAX_FRAME_BYTES",
    "MAX_PROBLEMS",
    "entry_builder",
    "Converter",
    "ROW",
    "ROW_STATICS",
    "expand_row",
    "segment",
    "read_segment",
    "rows_events",
    "row_codes",
    "spool_segments",
]

#: Compact entries of the broker core's hot paths: entry kind -> (the event kinds it
#: stands for, its layout).  The context tuples at the end are made once per
#: session (a producer's) or consumer and shared by all its entries.  Work the
#: writer can do instead of the reactor is left to it: a compact entry is
#: stamped in epoch *seconds* (the clock's own value), and some of its values
#: stand for a field the writer derives (:data:`DERIVED`).
SENT = "sent"
DELIVERED = "delivered"
ACKNOWLEDGED = "acknowledged"
#: an auto-acknowledged delivery: message.delivered then message.acknowledged, stamped alike
DELIVERED_AND_ACKNOWLEDGED = "delivered+acknowledged"
PRODUCER_CONTEXT = ("conn", "user", "client_id")
CONSUMER_CONTEXT = ("queue", "consumer", "conn", "user", "client_id")
#: the message's number on this node and its carried trace id (text, or None when it
#: has none): ``message_id`` is the carried one, else ``<node id>/<number>``
MESSAGE = ("message_number", "message_trace")
LAYOUTS: dict[str, tuple[tuple[str, ...], tuple]] = {
    SENT: (
        ("message.sent",),
        (*MESSAGE, "duplicate_id", "address", "queue_names", "size", "durable", "group_id", "group_seq",
         "routing_type", PRODUCER_CONTEXT),
    ),
    DELIVERED: (("message.delivered",), (*MESSAGE, "duplicate_id", "address", "delivery_count", CONSUMER_CONTEXT)),
    ACKNOWLEDGED: (("message.acknowledged",), (*MESSAGE, "duplicate_id", "address", CONSUMER_CONTEXT)),
    DELIVERED_AND_ACKNOWLEDGED: (
        ("message.delivered", "message.acknowledged"),
        (*MESSAGE, "duplicate_id", "address", "delivery_count", CONSUMER_CONTEXT),
    ),
}
#: layout values that stand for a schema field: value name -> (field, the field's
#: expression in a builder: ``$name`` is the entry's value of that name, ``node_prefix``
#: the node id and a slash), or (field, None) for a value another's expression uses
DERIVED = {
    "message_number": ("message_id", "node_prefix + str($message_number) if $message_trace is None else $message_trace"),
    "message_trace": ("message_id", None),
    # one queue's name, or a tuple of names
    "queue_names": ("queues", "($queue_names,) if $queue_names.__class__ is str else $queue_names"),
}
#: Rows: the commonest compact entries (no carried trace id, duplicate id or group) as
#: four numbers packed with :data:`ROW` (one ``pack`` and one ``bytearray`` append, no
#: object left for the collector): ``(code, ts, message number, extra)``, ``extra`` the
#: size (``sent``), the delivery count (``delivered``, ``delivered+acknowledged``) or 0
#: (``acknowledged``).  ``code`` stands for the entry's other values, its *static*:
#: ``(entry kind, value, ...)`` with the layout's values named in :data:`ROW_STATICS`,
#: the same for every message of one producer (or consumer) on one address.  A value
#: the row cannot hold (``struct.error``) makes an entry instead.
ROW = struct.Struct("=qdQq")
#: the layout values a row carries itself, and those a row's entry has none of
ROW_VALUES = ("message_number", "size", "delivery_count")
ROW_NONE = ("message_trace", "duplicate_id", "group_id", "group_seq")
ROW_STATICS = {
    kind: tuple(name for name in layout if name not in ROW_VALUES and name not in ROW_NONE)
    for kind, (_, layout) in LAYOUTS.items()
}
#: row codes whose templates the writer process keeps, at most (all go when more come)
MAX_ROW_TEMPLATES = 10_000
#: the largest request or reply frame either side accepts (bytes)
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: problem messages one reply carries, at most (the rest are counted in one more)
MAX_PROBLEMS = 20
#: the name ending of a complete spool segment (one ``marshal`` list of entries)
SPOOL_SUFFIX = ".frames"
#: seconds the writer process waits for a wake-up before it looks at the spool anyway
IDLE_LOOK_S = 1.0
#: the writer process's niceness: it converts with the CPU time the node and others leave
WRITER_NICE = 19

_FRAME = struct.Struct("<I")
_dumps = orjson.dumps
_generic = _ENCODER.encode  # schema.encode's encoder, for what orjson refuses


def entry_builder(kind: str, node: str, node_id: str, layout: tuple | None = None):
    """``build(entry)`` -> the object (a dict) of one ``kind`` event of this node.

    ``entry`` is ``(entry kind, ts, value, ...)`` with the values laid out as
    ``layout`` names them (by default the kind's fields in :data:`KINDS`
    order, stamped in epoch milliseconds); a tuple within ``layout`` stands
    for one value that is a tuple of those fields (a context the emitter made
    once and shares, see :data:`LAYOUTS`).  A given ``layout`` is a compact
    one: stamped in epoch seconds, and its :data:`DERIVED` values make their
    field.  A wrong number of values raises ValueError or TypeError.  The
    object is the one :func:`junction.events.schema.encode` writes for the
    event: its fields in schema order, null where the layout has none; a
    layout field the kind does not have is left out.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise SchemaError(f"unknown event kind {kind!r}")
    args: dict[str, str] = {}

    def pattern(names) -> str:
        parts = []
        for name in names:
            if isinstance(name, tuple):
                parts.append(f"({pattern(name)})")
            else:
                args[name] = arg = f"a{len(args)}"
                parts.append(arg)
        return "".join(part + ", " for part in parts)

    unpack = pattern(spec if layout is None else layout)
    fields = dict(args)
    for name, (field, expression) in DERIVED.items():
        if name in args and expression is not None:
            fields[field] = "(" + re.sub(r"\$(\w+)", lambda m: args[m.group(1)], expression) + ")"
    ts = "ts" if layout is None else "ts * 1000.0"
    items = [f"'v': {SCHEMA_VERSION!r}", f"'kind': {kind!r}", f"'ts': {ts}", f"'node': {node!r}",
             f"'node_id': {node_id!r}"]
    items += [f"{name!r}: {fields.get(name, 'None')}" for name in spec]
    source = f"def build(entry):\n    (_, ts, {unpack}) = entry\n    return {{{', '.join(items)}}}\n"
    namespace: dict = {"node_prefix": node_id + "/"}
    exec(compile(source, f"<event builder {kind}>", "exec"), namespace)
    return namespace["build"]


def events_of(entry) -> int:
    """The events one entry stands for."""
    layout = LAYOUTS.get(entry[0])
    return 1 if layout is None else len(layout[0])


def events_in(entries) -> int:
    """The events ``entries`` stand for."""
    return sum(map(events_of, entries))


def expand_row(static: tuple, ts: float, number: int, extra: int) -> tuple:
    """The compact entry a row stands for (its static's kind and values, the row's numbers)."""
    kind = static[0]
    if len(static) != 1 + len(ROW_STATICS[kind]):
        raise ValueError(f"a {kind} row's static has {len(static) - 1} values, not {len(ROW_STATICS[kind])}")
    fixed = iter(static[1:])
    values = []
    for name in LAYOUTS[kind][1]:
        if name == "message_number":
            values.append(int(number))
        elif name == "size" or name == "delivery_count":
            values.append(int(extra))
        elif name in ROW_NONE:
            values.append(None)
        else:
            values.append(next(fixed))
    return (kind, ts, *values)


def row_events(static) -> int:
    """The events one row of ``static`` stands for."""
    return 1 if static is None else events_of(static)


def row_codes(rows) -> list:
    """The codes of the rows in ``rows`` (bytes), one per row."""
    return memoryview(rows).cast("q")[:: ROW.size // 8].tolist()


def rows_events(rows, statics) -> int:
    """The events the rows (bytes, :data:`ROW`) stand for; ``statics`` maps their codes to
    their statics."""
    codes = row_codes(rows)
    return sum(row_events(statics.get(code)) * codes.count(code) for code in set(codes))


def _line(obj: dict) -> bytes:
    """One event object as its UTF-8 line (without the newline)."""
    try:
        return _dumps(obj, default=str)
    except TypeError:  # orjson.JSONEncodeError: a value orjson refuses; ValueError and
        return _generic(obj).encode("utf-8")  # UnicodeEncodeError when encode refuses it too


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "node"


class EventSink:
    """One node's event files: ``write(entries)``, ``rotate_if_old()``, ``close()``."""

    def __init__(self, directory: str, node: str, node_id: str, *, max_file_bytes: int,
                 max_file_age_s: float, max_files: int, clock=time.time):
        self.directory = directory
        self.node = node
        self.node_id = node_id
        self.max_file_bytes = max_file_bytes
        self.max_file_age_s = max_file_age_s
        self.max_files = max_files
        self.clock = clock
        self.file_path: str | None = None
        self._file = None
        self._file_bytes = 0
        self._file_opened = 0.0
        self._sequence = 0
        #: entry kind -> the builders of its events (:func:`entry_builder`), made on first use
        self._builders: dict = {}
        #: compact entry kind -> its line templates (made with its builders)
        self._templates: dict = {}
        #: row code -> (its static, its row template, the template's shape) (see encode_rows)
        self._row_templates: dict = {}
        self.written = 0
        self.dropped = 0
        self.failed: str | None = None
        #: what went wrong since :meth:`take_problems` (bounded: see :data:`MAX_PROBLEMS`)
        self._problems: list[str] = []
        self._problems_over = 0

    def _problem(self, text: str) -> None:
        if len(self._problems) < MAX_PROBLEMS:
            self._problems.append(text)
        else:
            self._problems_over += 1

    def take_problems(self) -> list[str]:
        problems, self._problems = self._problems, []
        if self._problems_over:
            problems.append(f"and {self._problems_over} more events not written")
            self._problems_over = 0
        return problems

    def write(self, entries, rows=None) -> None:
        """Encode and write ``entries``, then ``rows`` (``(statics, data)``: the statics of
        the rows' codes and the rows' bytes, see :data:`ROW`); dropped and counted
        once the sink has failed."""
        if self.failed:
            self.dropped += events_in(entries) + (0 if rows is None else rows_events(rows[1], rows[0]))
            return
        data = self.encode(entries)
        if rows is not None:
            self.encode_rows(*rows, buf=data)
        written = self.written
        try:
            self._write(data)
        except OSError as exc:
            self.dropped += data.count(b"\n") - (self.written - written)
            self.failed = f"{self.file_path}: {exc}"
            self._problem(f"event log {self.directory} failed: {exc}; events are dropped from now on")
            self.close()

    def encode(self, entries) -> bytearray:
        """``entries`` as lines, in one buffer (each line is appended and freed at once:
        many small objects alive together cost the allocator far more).  A compact entry
        like one seen before is made from its template (:mod:`.templates`)."""
        buf = bytearray()
        builders = self._builders
        templates = self._templates
        for entry in entries:
            try:
                kind = entry[0]
                made = templates.get(kind)
                if made is not None:
                    lines = made.lines(entry)
                    if lines is not None:
                        buf += lines
                        buf += b"\n"
                        continue
                builds = builders.get(kind) or self._builders_of(kind)
                for build in builds:
                    buf += _line(build(entry))
                    buf += b"\n"
            except (SchemaError, ValueError, TypeError, IndexError) as exc:  # a bug in its emitter: say it, keep the rest
                kind = entry[0] if isinstance(entry, tuple) and entry else repr(entry)
                self._problem(f"event not written: {kind}: {exc}")
        return buf

    def encode_rows(self, statics: dict, data: bytes, buf: bytearray | None = None) -> bytearray:
        """The rows in ``data`` as lines, appended to ``buf``: each from its code's row
        template (made once per code and static, :meth:`LineTemplates.row_template
        <junction.events.templates.LineTemplates.row_template>`), or, when its static has
        none, from the compact entry it stands for.  A row whose code ``statics`` does not
        name (or names as None: the node no longer knew it) is counted as dropped."""
        if buf is None:
            buf = bytearray()
        made = self._row_templates
        if len(made) + len(statics) > MAX_ROW_TEMPLATES:
            made.clear()
        for code, static in statics.items():
            known = made.get(code)
            if known is None or known[0] != static:
                made[code] = (static, *self._row_template(static))
        for code, ts, number, extra in ROW.iter_unpack(data):
            known = made.get(code)
            try:
                if known is None or known[0] is None:
                    raise ValueError(f"no static for row code {code}")
                static, template, shape = known
                if shape == "tnx":  # sent, delivered
                    buf += template % (_dumps(ts * 1000.0), number, extra)
                elif shape == "tnxtn":  # delivered+acknowledged
                    stamp = _dumps(ts * 1000.0)
                    buf += template % (stamp, number, extra, stamp, number)
                elif shape == "tn":  # acknowledged
                    buf += template % (_dumps(ts * 1000.0), number)
                else:
                    entry = expand_row(static, ts, number, extra)
                    for build in self._builders.get(entry[0]) or self._builders_of(entry[0]):
                        buf += _line(build(entry))
                        buf += b"\n"
            except (SchemaError, ValueError, TypeError, IndexError, KeyError) as exc:
                self.dropped += 1 if known is None else row_events(known[0])
                self._problem(f"event not written: a row: {exc}")
        return buf

    def _row_template(self, static) -> tuple:
        """``(template, shape)`` of the rows of ``static`` (:meth:`LineTemplates.row_template
        <junction.events.templates.LineTemplates.row_template>`), or ``(None, None)``."""
        try:
            entry = expand_row(static, 0.0, 0, 0)
            kind = entry[0]
            if kind not in self._templates:
                self._builders_of(kind)
            made = self._templates[kind].row_template(entry)
        except (SchemaError, ValueError, TypeError, IndexError, KeyError):
            return (None, None)  # its rows fail one by one in encode_rows, and say why
        return made or (None, None)

    def _builders_of(self, entry_kind) -> tuple:
        """The builders of the events one entry of ``entry_kind`` stands for (and, for a
        compact kind, its templates)."""
        kinds, layout = LAYOUTS.get(entry_kind, ((entry_kind,), None))
        builds = tuple(entry_builder(kind, self.node, self.node_id, layout) for kind in kinds)
        self._builders[entry_kind] = builds
        if layout is not None:
            self._templates[entry_kind] = LineTemplates(builds, layout, self.node_id)
        return builds

    def _write(self, data: bytearray) -> None:
        """Write whole lines, in as many files as :attr:`max_file_bytes` needs (a longer
        line alone in its file)."""
        view = memoryview(data)
        start = 0
        try:
            while start < len(data):
                room = self.max_file_bytes - self._file_bytes if self._file is not None else 0
                end = len(data)
                if end - start > room:  # what fits, in whole lines
                    end = data.rfind(b"\n", start, start + room) + 1
                    if end <= start:  # not one line fits
                        if self._file is None or self._file_bytes:
                            self._open_next()
                            continue
                        end = data.index(b"\n", start) + 1  # an empty file takes one longer line
                chunk = view[start:end]
                self._file.write(chunk)
                self._file.flush()
                self._file_bytes += len(chunk)
                self.written += data.count(b"\n", start, end)
                start = end
        finally:
            view.release()

    def rotate_if_old(self) -> None:
        if self._file is not None and self.clock() - self._file_opened >= self.max_file_age_s:
            self.close()

    def _open_next(self) -> None:
        self.close()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock()))
        self._sequence += 1
        name = f"events-{_safe(self.node)}-{stamp}-{self._sequence:04d}.jsonl"
        self.file_path = os.path.join(self.directory, name)
        self._file = open(self.file_path, "ab")
        self._file_bytes = 0
        self._file_opened = self.clock()
        self._prune()

    def close(self) -> None:
        """Close the current file (the next line opens a new one)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
            self.file_path = None

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def _prune(self) -> None:
        prefix = f"events-{_safe(self.node)}-"
        files = sorted(f for f in os.listdir(self.directory) if f.startswith(prefix) and f.endswith(".jsonl"))
        for name in files[: max(0, len(files) - self.max_files)]:
            try:
                os.remove(os.path.join(self.directory, name))
            except OSError:
                pass


def spool_segments(directory: str) -> list[str]:
    """The spool's complete segments, oldest first (a ``.tmp`` one is still being written)."""
    try:
        return sorted(name for name in os.listdir(directory) if name.endswith(SPOOL_SUFFIX))
    except FileNotFoundError:
        return []


def segment(entries: list, statics: dict | None = None, rows: bytes = b"") -> bytes:
    """A spool segment: ``marshal`` of the entries, or, with rows, of ``(entries, statics,
    rows)`` (the rows' bytes and the statics of their codes)."""
    if not rows:
        return marshal.dumps(entries)
    return marshal.dumps((entries, statics, rows))


def read_segment(payload: bytes) -> tuple:
    """``(entries, rows)`` of a spool segment, ``rows`` None or ``(statics, data)``
    (ValueError, EOFError or TypeError when it is not one)."""
    loaded = marshal.loads(payload)
    if isinstance(loaded, list):
        return loaded, None
    entries, statics, rows = loaded
    if not isinstance(entries, list) or not isinstance(statics, dict) or not isinstance(rows, bytes):
        raise ValueError("not a segment of entries, statics and rows")
    if len(rows) % ROW.size:
        raise ValueError(f"{len(rows)} bytes of rows is not a whole number of rows")
    return entries, (statics, rows)


def write_frame(stream, payload: bytes) -> None:
    stream.write(_FRAME.pack(len(payload)) + payload)
    stream.flush()


def take_frames(buf: bytearray) -> list[bytes]:
    """The complete length-prefixed frames at the start of ``buf``, removed from it
    (a cut frame stays for more bytes); ValueError for one over :data:`MAX_FRAME_BYTES`."""
    frames = []
    while len(buf) >= _FRAME.size:
        (size,) = _FRAME.unpack_from(buf)
        if size > MAX_FRAME_BYTES:
            raise ValueError(f"a frame of {size} bytes is over the limit of {MAX_FRAME_BYTES}")
        end = _FRAME.size + size
        if len(buf) < end:
            break
        frames.append(bytes(buf[_FRAME.size : end]))
        del buf[:end]
    return frames


class Converter:
    """The writer process's loop: spool segments in, lines out, a status frame after each.

    ``wakeups`` is the read end of the node's pipe: a byte says a segment was
    spooled; end of input says the node stops (convert the rest, then end).
    Without wake-ups the spool is looked at every :data:`IDLE_LOOK_S`, and
    the current file's age with it.
    """

    def __init__(self, sink: EventSink, spool_directory: str, wakeups: int, replies):
        self.sink = sink
        self.spool_directory = spool_directory
        self.wakeups = wakeups
        self.replies = replies
        self.converted_bytes = 0
        self.ending = False

    def run(self) -> None:
        try:
            while True:
                for name in spool_segments(self.spool_directory):
                    self.convert(os.path.join(self.spool_directory, name))
                    self.reply()
                if self.ending and not spool_segments(self.spool_directory):
                    return
                if not self.ending:
                    readable, _, _ = select.select([self.wakeups], [], [], IDLE_LOOK_S)
                    if readable and not os.read(self.wakeups, 4096):
                        self.ending = True
                self.sink.rotate_if_old()
                self.reply()
        finally:
            self.sink.close()
            self.reply()

    def convert(self, path: str) -> None:
        """One segment's events to lines, then the segment is deleted."""
        with open(path, "rb") as fh:
            payload = fh.read()
        try:
            entries, rows = read_segment(payload)
        except (ValueError, EOFError, TypeError) as exc:
            self.sink._problem(f"spool segment {path} is not readable ({exc}); kept as {path}.bad")
            os.rename(path, path + ".bad")
            return
        self.sink.write(entries, rows)
        os.remove(path)
        self.converted_bytes += len(payload)

    def reply(self) -> None:
        sink = self.sink
        status = (
            sink.written, sink.dropped, sink.failed, sink.file_path, time.process_time(), sink.take_problems(),
            self.converted_bytes,
        )
        write_frame(self.replies, marshal.dumps(status))


def main(argv: list[str] | None = None) -> int:
    """``python -m junction.events.sink DIRECTORY NODE NODE_ID MAX_FILE_BYTES MAX_FILE_AGE_S MAX_FILES SPOOL``."""
    directory, node, node_id, max_bytes, max_age, max_files, spool = (sys.argv[1:] if argv is None else argv)
    # Nearly everything this process makes is freed by reference counting: collect rarely.
    import gc

    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    os.nice(WRITER_NICE)
    try:  # and, where the system has it, only on a CPU that would be idle otherwise
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    sink = EventSink(
        directory, node, node_id, max_file_bytes=int(max_bytes), max_file_age_s=float(max_age), max_files=int(max_files)
    )
    try:
        Converter(sink, spool, sys.stdin.fileno(), sys.stdout.buffer).run()
    except BrokenPipeError:  # the node is gone
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
