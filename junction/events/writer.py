"""Writing events to rotated JSON Lines files, off the reactor's hot path.

:meth:`EventLog.put_entry` (and :meth:`~EventLog.emit`) only append to a
bounded in-memory queue (a deque append: cheap and thread-safe); a writer
thread takes what has gathered, encodes it and writes it in one call, every
:data:`FLUSH_INTERVAL_S` or as soon as :data:`BATCH_EVENTS` wait.  Files are
named ``events-<node>-<UTC time>-<n>.jsonl`` and rotated when they reach
``max_file_bytes`` or are ``max_file_age_s`` old; the oldest are deleted
beyond ``max_files``.  When the queue is full (the disk cannot keep up) new
events are dropped and counted, never blocking the broker; the count is
shown in the node's status.

Encoding is the writer's main cost (the broker core writes three events per
message), so it is done in C, by orjson: each kind gets an entry builder
compiled from :data:`~junction.events.schema.KINDS` (:func:`entry_builder`)
that makes the event's object with one dict display, and ``orjson.dumps``
writes it straight into the batch's buffer (about 1.5 µs an event, against
about 3.5 µs for line encoders in Python).  Encoding in the writer thread
rather than where the event happens lets it overlap the reactor's system
calls, which release the GIL (encoding in place measured no cheaper in
total, and it would put the whole cost on the reactor).  The line parses to what :func:`~junction.events.schema.encode`
writes (the same keys, in the same order, the same values; orjson may spell
a float differently, ``1e16`` for ``1e+16``, and writes NaN and the
infinities as null where ``encode`` refuses them).  A value orjson cannot
write (an integer beyond 64 bits) goes to ``encode``'s own JSON encoder; a
string that is not valid Unicode is logged and its event not written.

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

import logging
import os
import threading
import time
import zlib
from collections import deque

import orjson

from junction.events.schema import (
    _ENCODER,
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
#: events waiting that wake the writer before its interval is up (and the most it takes in one go)
BATCH_EVENTS = 5_000
#: seconds between the writer's looks at the queue
FLUSH_INTERVAL_S = 0.2
#: defaults of <junction><events> (bytes, seconds, files)
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_FILE_AGE_S = 3600.0
DEFAULT_MAX_FILES = 100

_dumps = orjson.dumps
_generic = _ENCODER.encode  # schema.encode's encoder, for what orjson refuses


def entry_builder(kind: str, node: str, node_id: str):
    """``build(entry)`` -> the object (a dict) of one ``kind`` event of this node.

    ``entry`` is ``(kind, ts, value, ...)`` with a value for each of the kind's
    fields in :data:`KINDS` order (ValueError otherwise); the object is the one
    :func:`junction.events.schema.encode` writes for
    ``Event(kind, ts, node, node_id, dict(zip(KINDS[kind], entry[2:])))``.
    """
    spec = KINDS.get(kind)
    if spec is None:
        raise SchemaError(f"unknown event kind {kind!r}")
    names = [f"a{i}" for i in range(len(spec))]
    items = [f"'v': {SCHEMA_VERSION!r}", f"'kind': {kind!r}", "'ts': ts", f"'node': {node!r}", f"'node_id': {node_id!r}"]
    items += [f"{name!r}: {arg}" for name, arg in zip(spec, names, strict=True)]
    source = (
        "def build(entry):\n"
        f"    (_, ts, {''.join(n + ', ' for n in names)}) = entry\n"
        f"    return {{{', '.join(items)}}}\n"
    )
    namespace: dict = {}
    exec(compile(source, f"<event builder {kind}>", "exec"), namespace)
    return namespace["build"]


def _line(obj: dict) -> bytes:
    """One event object as its UTF-8 line (without the newline)."""
    try:
        return _dumps(obj, default=str)
    except TypeError:  # orjson.JSONEncodeError: a value orjson refuses; ValueError and
        return _generic(obj).encode("utf-8")  # UnicodeEncodeError when encode refuses it too


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
        #: kind -> its entry builder (:func:`entry_builder`), made on first use
        self._builders: dict = {}
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
        """Queue one event, its fields by name (dropped and counted when the queue is full
        or the log failed; logged and not written when it is not one of the schema)."""
        if category_of(kind) not in self.categories:
            return
        spec = KINDS.get(kind)
        if spec is None or not fields.keys() <= set(spec):
            try:  # refused as encode refuses it
                encode(Event(kind, 0.0, self.node, self.node_id, fields))
            except SchemaError as exc:
                log.error("event not written: %s", exc)
            return
        self.put_entry((kind, self.clock() * 1000.0, *map(fields.get, spec)))

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
                    data = self._encode_batch()
                    written = self.written
                    try:
                        self._write(data)
                    except OSError:
                        self.dropped += data.count(b"\n") - (self.written - written)
                        raise
                self._rotate_if_old()
            except OSError as exc:
                self.failed = f"{self._file_path}: {exc}"
                log.error("event log %s failed: %s; events are dropped from now on", self.directory, exc)
                self.dropped += len(self._queue)
                self._queue.clear()
            if self._stopping and not self._queue:
                self._close()
                return

    # -- files --------------------------------------------------------------------------
    def _encode_batch(self) -> bytearray:
        """Up to :data:`BATCH_EVENTS` queued events as lines, in one buffer (each orjson
        line is appended and freed at once: many small bytes objects alive together cost
        the allocator far more)."""
        buf = bytearray()
        popleft, builders = self._queue.popleft, self._builders
        for _ in range(min(BATCH_EVENTS, len(self._queue))):
            entry = popleft()
            try:
                build = builders.get(entry[0])
                if build is None:
                    build = builders[entry[0]] = entry_builder(entry[0], self.node, self.node_id)
                buf += _line(build(entry))
            except (SchemaError, ValueError, TypeError) as exc:  # a bug in its emitter: say it, keep the rest
                log.error("event not written: %s: %s", entry[0], exc)
                continue
            buf += b"\n"
        return buf

    def _write(self, data: bytearray) -> None:
        """Write whole lines, in as many files as :attr:`max_file_bytes` needs (a longer
        line alone in its file)."""
        view = memoryview(data)
        start = 0
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
        view.release()

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
