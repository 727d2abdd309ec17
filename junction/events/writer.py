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

from junction.events.schema import Event, SchemaError, category_of, encode

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
        if len(self._queue) >= self._max_queued or self.failed:
            self.dropped += 1
            return
        self._queue.append((kind, self.clock() * 1000.0, fields))
        if len(self._queue) >= BATCH_EVENTS:
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
    def _write_batch(self) -> None:
        lines = []
        node, node_id = self.node, self.node_id
        for _ in range(min(BATCH_EVENTS, len(self._queue))):
            kind, ts, fields = self._queue.popleft()
            try:
                lines.append(encode(Event(kind, ts, node, node_id, fields)))
            except SchemaError as exc:  # a writer bug: say it, keep the rest
                log.error("event not written: %s", exc)
        # lines go to the current file until it would pass max_file_bytes (a longer line alone)
        chunk: list = []
        size = 0
        for line in lines:
            data = (line + "\n").encode("utf-8")
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
