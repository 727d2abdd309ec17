"""Writing events to rotated JSON Lines files, off the reactor's hot path.

:meth:`EventLog.emit` only appends to a bounded in-memory queue (a deque
append: cheap and thread-safe); a writer thread takes what has gathered,
encodes it and writes it in one call, every :data:`FLUSH_INTERVAL_S` or as
soon as :data:`BATCH_EVENTS` wait.  Files are named
``events-<node>-<UTC time>-<n>.jsonl`` and rotated when they reach
``max_file_bytes`` or are ``max_file_age_s`` old; the oldest are deleted
beyond ``max_files``.  When the queue is full (the disk cannot keep up) new
events are dropped and counted, never blocking the broker; the count is
written as a log line and shown in the node's status.

Encoding is the writer's main cost (the broker core emits three events per
message), so it does not go through a generic JSON encoder: each kind gets a
line encoder compiled from :data:`~junction.events.schema.KINDS` and
:data:`~junction.events.schema.FIELD_TYPES` (:func:`line_encoder`) that writes
the constant parts (keys, kind, node) as they are and only encodes the
values, byte for byte as :func:`~junction.events.schema.encode` would.
Hot emitters (the broker core's message events) queue one flat tuple per
event, ``(kind, ts, value, ...)`` with the values in the kind's field order
(:meth:`EventLog.put_entry`), not keyword arguments: one allocation, and,
when the values are plain (str, int, float, bool, None, tuples of str), one
the garbage collector untracks in its young generations, so the events
waiting for the writer do not reach its oldest one and make its full
collections more frequent (as queued dicts and lists did).

Message events may be sampled (``sample_rate`` 0..1): whether a message's
events are written is decided from its id, so a sampled message has all its
events (sent, delivered, acknowledged) or none.
"""

from __future__ import annotations

import json.encoder
import logging
import os
import threading
import time
import zlib
from collections import deque

from junction.events.schema import (
    _ENCODER,
    FIELD_TYPES,
    KINDS,
    SCHEMA_VERSION,
    Event,
    SchemaError,
    category_of,
    encode,
)

log = logging.getLogger("junction.events")

#: events waiting to be written, at most; beyond, new ones are dropped (and counted)
MAX_QUEUED_EVENTS = 100_000
#: events the writer takes in one go
BATCH_EVENTS = 5_000
#: seconds between the writer's looks at the queue
FLUSH_INTERVAL_S = 0.2
#: defaults of <junction><events> (bytes, seconds, files)
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_FILE_AGE_S = 3600.0
DEFAULT_MAX_FILES = 100

# -- line encoders ------------------------------------------------------------------------
# What they write is exactly what schema.encode writes (its JSONEncoder: separators "," and
# ":", ensure_ascii off, NaN refused, str() of anything else): plain str, int, float, bool and
# None values and lists of str are written here, any other value goes to that encoder.

#: first item of a queued event that ``emit`` made: ``(_FIELDS, kind, ts, fields)``
_FIELDS = object()

_json_str = json.encoder.encode_basestring  # the encoder's own string escaping (ensure_ascii off)
_generic = _ENCODER.encode
_INF = float("inf")

#: a value of each field type as a Python expression of the value ``{a}``
_VALUE_EXPR = {
    "string": "(_s({a}) if {a}.__class__ is str else 'null' if {a} is None else _g({a}))",
    "long": "(_i({a}) if {a}.__class__ is int else 'null' if {a} is None else _g({a}))",
    "double": (
        "(_f({a}) if {a}.__class__ is float and -_INF < {a} < _INF "
        "else 'null' if {a} is None else _g({a}))"
    ),
    "boolean": "('true' if {a} is True else 'false' if {a} is False else 'null' if {a} is None else _g({a}))",
    "array<string>": "_l({a})",
}


def _str_list(value) -> str:
    if value.__class__ is tuple or value.__class__ is list:  # (json writes a tuple as a list)
        try:
            return "[" + ",".join(map(_json_str, value)) + "]"
        except TypeError:  # not all str
            pass
    return "null" if value is None else _generic(value)


def line_encoder(kind: str, node: str, node_id: str):
    """``encode(entry)`` -> the JSON line (no newline) of one ``kind`` event of this node.

    ``entry`` is ``(kind, ts, value, ...)`` with a value for each of the kind's
    fields in :data:`KINDS` order (ValueError otherwise).  The line is the one
    :func:`junction.events.schema.encode` makes of
    ``Event(kind, ts, node, node_id, dict(zip(KINDS[kind], entry[2:])))``.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise SchemaError(f"unknown event kind {kind!r}")
    names = [f"a{i}" for i in range(len(spec))]
    parts = [
        repr('{"v":%s,"kind":%s,"ts":' % (_generic(SCHEMA_VERSION), _json_str(kind))),
        _VALUE_EXPR["double"].format(a="ts"),
        repr(',"node":%s,"node_id":%s' % (_generic(node), _generic(node_id))),
    ]
    for name, arg in zip(spec, names, strict=True):
        parts.append(repr("," + _json_str(name) + ":"))
        parts.append(_VALUE_EXPR.get(FIELD_TYPES.get(name), "_g({a})").format(a=arg))
    unpack = f"    (_, ts, {''.join(n + ', ' for n in names)}) = entry\n"
    source = f"def encode(entry):\n{unpack}    return ''.join(({', '.join(parts)}, '}}'))\n"
    namespace = {
        "_s": _json_str, "_i": int.__repr__, "_f": float.__repr__, "_g": _generic,
        "_l": _str_list, "_INF": _INF,
    }
    exec(compile(source, f"<event line encoder {kind}>", "exec"), namespace)
    return namespace["encode"]


class EventLog:
    """One node's event files.  ``start()``, ``emit(...)`` from any thread, ``stop()``."""

    def __init__(
        self,
        directory: str,
        node: str,
        node_id: str,
        *,
        categories=("connection", "message", "topology"),
        sample_rate: float = 1.0,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_file_age_s: float = DEFAULT_MAX_FILE_AGE_S,
        max_files: int = DEFAULT_MAX_FILES,
        max_queued: int = MAX_QUEUED_EVENTS,
        clock=time.time,
    ):
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be between 0 and 1")
        self.directory = directory
        self.node = node
        self.node_id = node_id
        self.categories = frozenset(categories)
        self.sample_rate = sample_rate
        self._sample_below = int(sample_rate * 0xFFFFFFFF)
        self.max_file_bytes = max_file_bytes
        self.max_file_age_s = max_file_age_s
        self.max_files = max_files
        self.clock = clock
        self._queue: deque = deque()
        self._max_queued = max_queued
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._file = None
        self._file_path = None
        self._file_bytes = 0
        self._file_opened = 0.0
        self._sequence = 0
        #: kind -> its line encoder (:func:`line_encoder`), made on first use
        self._encoders: dict = {}
        self.written = 0
        self.dropped = 0
        self.failed: str | None = None

    # -- producing (any thread) -----------------------------------------------------
    def enabled(self, kind: str) -> bool:
        return category_of(kind) in self.categories

    def sampled(self, message_id) -> bool:
        """Whether the events of message ``message_id`` are written (the same answer every time)."""
        if self._sample_below >= 0xFFFFFFFF:
            return True
        return zlib.crc32(str(message_id).encode()) <= self._sample_below

    def emit(self, kind: str, **fields) -> None:
        """Queue one event (dropped and counted when the queue is full or the log failed)."""
        if category_of(kind) not in self.categories:
            return
        self.put_entry((_FIELDS, kind, self.clock() * 1000.0, fields))

    def put(self, kind: str, values: tuple) -> None:
        """Queue one event whose category the caller knows is on, its fields' values
        in :data:`KINDS` order (see :meth:`put_entry`)."""
        self.put_entry((kind, self.clock() * 1000.0, *values))

    def put_entry(self, entry: tuple) -> None:
        """Queue ``(kind, ts, value, ...)``: an event whose category the caller knows is
        on, stamped ``ts`` (epoch ms, ``clock() * 1000``), with a value for each of the
        kind's fields in :data:`KINDS` order: the cheapest form, for hot paths.
        Dropped and counted when the queue is full or the log failed.
        """
        queue = self._queue
        if len(queue) >= self._max_queued or self.failed:
            self.dropped += 1
            return
        queue.append(entry)
        if len(queue) >= BATCH_EVENTS and not self._wake.is_set():
            self._wake.set()

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name=f"events-{self.node}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, close the file, end the thread."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            try:
                while self._queue:
                    self._write_batch()
                self._rotate_if_old()
            except OSError as exc:
                self.failed = f"{self._file_path}: {exc}"
                log.error("event log %s failed: %s; events are dropped from now on", self.directory, exc)
                self._queue.clear()
            if self._stopping and not self._queue:
                self._close()
                return

    # -- files --------------------------------------------------------------------------
    def _encode(self, entry: tuple) -> str:
        """One queued event's line; SchemaError (or ValueError) when it is not one of the schema."""
        if entry[0] is _FIELDS:  # from emit: (_FIELDS, kind, ts, fields)
            _, kind, ts, fields = entry
            spec = KINDS.get(kind)
            if spec is None or not fields.keys() <= set(spec):  # refused as encode refuses them
                return encode(Event(kind, ts, self.node, self.node_id, fields))  # raises SchemaError
            entry = (kind, ts, *map(fields.get, spec))
        kind = entry[0]
        encoder = self._encoders.get(kind)
        if encoder is None:
            encoder = self._encoders[kind] = line_encoder(kind, self.node, self.node_id)
        return encoder(entry)

    def _write_batch(self) -> None:
        lines: list = []
        append, popleft, encoders = lines.append, self._queue.popleft, self._encoders
        for _ in range(min(BATCH_EVENTS, len(self._queue))):
            entry = popleft()
            try:
                encoder = encoders.get(entry[0])
                append(self._encode(entry) if encoder is None else encoder(entry))
            except (SchemaError, ValueError, TypeError) as exc:  # a writer bug: say it, keep the rest
                log.error("event not written: %s: %s", entry[1] if entry[0] is _FIELDS else entry[0], exc)
        if not lines:
            return
        try:
            data = ("\n".join(lines) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            data = None  # a line that is not UTF-8 (lone surrogates): line by line below
        if data is not None and self._file is not None and self._file_bytes + len(data) <= self.max_file_bytes:
            self._file.write(data)
            self._file.flush()
            self._file_bytes += len(data)
            self.written += len(lines)
            return
        # lines go to the current file until it would pass max_file_bytes (a longer line alone)
        chunk: list = []
        size = 0
        for line in lines:
            try:
                data = (line + "\n").encode("utf-8")
            except UnicodeEncodeError as exc:
                log.error("event not written: %s", exc)
                continue
            if self._file is None or (self._file_bytes + size + len(data) > self.max_file_bytes and self._file_bytes + size):
                self._flush(chunk, size)
                chunk, size = [], 0
                self._open_next()
            chunk.append(data)
            size += len(data)
        self._flush(chunk, size)

    def _flush(self, chunk: list, size: int) -> None:
        if not chunk:
            return
        self._file.write(b"".join(chunk))
        self._file.flush()
        self._file_bytes += size
        self.written += len(chunk)

    def _rotate_if_old(self) -> None:
        if self._file is not None and self.clock() - self._file_opened >= self.max_file_age_s:
            self._close()

    def _open_next(self) -> None:
        self._close()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock()))
        self._sequence += 1
        name = f"events-{_safe(self.node)}-{stamp}-{self._sequence:04d}.jsonl"
        self._file_path = os.path.join(self.directory, name)
        self._file = open(self._file_path, "ab")
        self._file_bytes = 0
        self._file_opened = self.clock()
        self._prune()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _prune(self) -> None:
        prefix = f"events-{_safe(self.node)}-"
        files = sorted(f for f in os.listdir(self.directory) if f.startswith(prefix) and f.endswith(".jsonl"))
        for name in files[: max(0, len(files) - self.max_files)]:
            try:
                os.remove(os.path.join(self.directory, name))
            except OSError:
                pass

    def status(self) -> dict:
        return {
            "directory": self.directory,
            "file": self._file_path,
            "categories": sorted(self.categories),
            "sample_rate": self.sample_rate,
            "queued": len(self._queue),
            "written": self.written,
            "dropped": self.dropped,
            "failed": self.failed,
        }


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "node"


__all__ = ["EventLog", "MAX_QUEUED_EVENTS", "BATCH_EVENTS", "FLUSH_INTERVAL_S"]
