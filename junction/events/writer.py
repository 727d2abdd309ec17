"""Queueing events off the reactor's hot path, for the event writer process.

:meth:`EventLog.put_entry` (and :meth:`~EventLog.emit`) only append to a
bounded in-memory queue (a deque append: cheap and thread-safe), and the
broker core's hot rows to a bounded ``bytearray`` (below).  A shipper
thread takes what has gathered every :data:`FLUSH_INTERVAL_S` and writes it,
:data:`BATCH_EVENTS` at most to a segment, to the spool; the node's event
writer process (:mod:`junction.events.sink`, started with the log and
started again should it end) encodes the segments and writes the rotated
files at the lowest CPU priority, and reports back what it wrote.  When the
queue or the spool is full new events are dropped and counted, never
blocking the broker; the count is shown in the node's status.  A spool
write error fails the log: events are dropped from then on, and ``failed``
says why (as it does when the writer process cannot write its files).

Hot emitters queue one flat tuple per entry (:meth:`EventLog.put_entry`),
``(kind, ts, value, ...)`` with the values in the kind's field order or as
one of the compact layouts of :data:`junction.events.sink.LAYOUTS`, not
keyword arguments: one allocation, and, when the values are plain (str, int,
float, bool, None, tuples of str), one the garbage collector untracks in its
young generations.  Values ``marshal`` cannot carry (objects, subclasses of
str and int) are converted first, as the encoder would write them.

The hottest, the broker core's ``message.sent``, ``delivered`` and
``acknowledged`` of messages without a carried trace id, duplicate id or
group, are *rows* instead (:data:`junction.events.sink.ROW`): four numbers
packed into :attr:`EventLog.rows`, a ``bytearray``, whose first stands for the
entry's other values (its *static*, in :attr:`EventLog.statics`, made once per
producer or consumer and address).  A row leaves no object behind for the
collector, its segment is its bytes (no ``marshal`` per entry), and the
writer process fills one line template per code.  The emitter appends whole
rows with one ``+=`` and the shipper takes whole rows off the front, each one
step under the interpreter lock.  A segment carries the statics of the codes
its rows use, so a restarted writer process, or the next run of the node
(whose codes mean other things), writes them as they were meant.

Message events may be sampled (``sample_rate`` 0..1): whether a message's
events are written is decided from its id, so a sampled message has all its
events (sent, delivered, acknowledged) or none.
"""

from __future__ import annotations

import logging
import marshal
import os
import subprocess
import sys
import threading
import time
import zlib
from collections import deque

from junction.events.schema import KINDS, Event, SchemaError, category_of, encode
from junction.events.sink import (
    ROW,
    SPOOL_SUFFIX,
    _safe,
    events_in,
    events_of,
    expand_row,
    row_codes,
    rows_events,
    segment,
    spool_segments,
    take_frames,
)

log = logging.getLogger("junction.events")

#: entries waiting to be written, at most, and as many rows; beyond, new ones are dropped (and counted)
MAX_QUEUED_EVENTS = 100_000
#: queued entries the shipper puts in one spool segment, at most, and as many rows
BATCH_EVENTS = 5_000
#: seconds between the shipper's looks at the queue
FLUSH_INTERVAL_S = 0.2
#: seconds the writer process gets to convert what is spooled when the node stops
WRITER_PROCESS_TIMEOUT_S = 10.0
#: seconds between two starts of a writer process that ended on its own
WRITER_RESTART_INTERVAL_S = 5.0
#: default bytes of spooled events waiting for the writer process (``max-spool-size``)
DEFAULT_MAX_SPOOL_BYTES = 1024 * 1024 * 1024
#: defaults of <junction><events> (bytes, seconds, files)
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_FILE_AGE_S = 3600.0
DEFAULT_MAX_FILES = 100

_PLAIN = (str, int, float, bool, type(None), bytes)


def _marshallable(value):
    """``value`` as marshal can carry it and the encoder would write it."""
    cls = value.__class__
    if cls in _PLAIN:
        return value
    if cls is tuple or cls is list:
        return cls(_marshallable(v) for v in value)
    if cls is dict:
        return {str(k): _marshallable(v) for k, v in value.items()}
    if isinstance(value, str):  # a subclass: its text
        return str.__str__(value)
    if isinstance(value, int):  # IntEnum and the like: as orjson writes them
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [_marshallable(v) for v in value]
    return str(value)  # what the encoder's default=str writes


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
        max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES,
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
        #: entries waiting for the shipper; a hot emitter may append to it itself while
        #: ``len(queue) < room`` (what :meth:`put_entry` does)
        self.queue: deque = deque()
        self._max_queued = max_queued
        #: the queue's bound, 0 once the log failed
        self.room = max_queued
        #: rows waiting for the shipper (:data:`~junction.events.sink.ROW`, each appended
        #: whole with one ``+=``), and their bound in bytes, 0 once the log failed: a hot
        #: emitter appends to it itself while ``len(rows) < row_room``
        self.rows = bytearray()
        self.row_room = max_queued * ROW.size
        #: what the rows' codes stand for: code -> static, made by the emitter before the
        #: first row of the code, and the table it had before its last reset: one attribute,
        #: replaced whole at a reset, so the shipper sees both tables of one moment
        self.code_tables: tuple[dict, dict] = ({}, {})
        self._wake = threading.Event()
        #: held while a segment is spooled (the shipper thread, or :meth:`write_now`)
        self._spool_lock = threading.Lock()
        self._stopping = False
        self._stop_deadline: float | None = None
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen | None = None
        #: lines the writer process has written (from its last reply)
        self.written = 0
        self.file_path: str | None = None
        self.failed: str | None = None
        #: CPU seconds of the shipper thread (taking and packing batches) and of the writer process
        self.shipper_cpu_s = 0.0
        self.writer_cpu_s = 0.0
        self._dropped_here = 0  # queue or spool full, or the log failed
        self._dropped_there = 0  # by the writer process (after a write error), from its last reply
        #: the spool: segments of queued events waiting for the writer process
        self.spool_directory = os.path.join(directory, f".spool-{_safe(node)}")
        self.max_spool_bytes = max_spool_bytes
        self._segment = 0
        self._spooled_bytes = 0
        self._converted_bytes = 0
        self._spool_full = False
        self._replies = bytearray()
        self._started_writer = 0.0
        self.writer_restarts = 0
        # the totals of writer processes that ended (a restarted one counts from zero)
        self._written_before = self._dropped_there_before = self._converted_before = 0
        self._writer_cpu_before = 0.0

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
        kind's fields in :data:`KINDS` order, or a compact entry of
        :data:`junction.events.sink.LAYOUTS` (stamped ``clock()``): the cheapest forms, for
        hot paths.  Dropped and counted when the queue is full or the log failed.
        """
        queue = self.queue
        if len(queue) < self.room:  # the bound, or 0 once the log failed
            queue.append(entry)
        else:
            self._dropped_here += events_of(entry)

    @property
    def statics(self) -> dict:
        """The current table of row codes: code -> static."""
        return self.code_tables[0]

    @property
    def previous_statics(self) -> dict:
        """The table of row codes before the last reset (for rows queued under it)."""
        return self.code_tables[1]

    def write_now(self, entries: list) -> None:
        """Spool ``entries`` (as :meth:`put_entry` takes them) now, in segments of
        :data:`BATCH_EVENTS`, rather than through the bounded queue: for a burst known to
        be large and rare, such as the events a node writes at start for every message
        its journal held.  The spool's bound still applies (what finds no room is dropped
        and counted).  Blocks for the writes; call it after :meth:`start`."""
        if self.failed:
            self._dropped_here += events_in(entries)
            return
        for first in range(0, len(entries), BATCH_EVENTS):
            batch = entries[first : first + BATCH_EVENTS]
            try:
                self._spool(batch)
            except OSError as exc:
                self._dropped_here += events_in(entries[first:])
                self._fail(f"cannot spool events: {exc}")
                return

    def drop_rows(self, events: int) -> None:
        """Count ``events`` of rows an emitter found no room for (an emitter appends a row
        itself, ``rows += row``, while ``len(rows) < row_room``)."""
        self._dropped_here += events

    def queued_entries(self) -> list:
        """What waits for the shipper, as entries: the queue's, then each row's compact entry
        (for tests and inspection; the shipper takes them without this)."""
        statics = {**self.previous_statics, **self.statics}
        return [*self.queue, *(expand_row(statics[code], *values) for code, *values in ROW.iter_unpack(bytes(self.rows)))]

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer process and the shipper thread (OSError when either cannot start).

        Spool segments a previous run left (its writer process killed before it
        had converted them) are converted first."""
        os.makedirs(self.spool_directory, exist_ok=True)
        existing = spool_segments(self.spool_directory)
        self._segment = int(existing[-1].split(".")[0]) if existing else 0
        self._start_writer()
        self._thread = threading.Thread(target=self._run, name=f"events-{self.node}", daemon=True)
        self._thread.start()

    def _start_writer(self) -> None:
        self._process = subprocess.Popen(
            [
                sys.executable, "-m", "junction.events.sink", self.directory, self.node, self.node_id,
                str(self.max_file_bytes), repr(float(self.max_file_age_s)), str(self.max_files),
                self.spool_directory,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # a Ctrl-C meant for the node must not end it before the node's last events
        )
        os.set_blocking(self._process.stdin.fileno(), False)
        os.set_blocking(self._process.stdout.fileno(), False)
        self._replies = bytearray()
        self._started_writer = time.monotonic()

    def stop(self, timeout: float = WRITER_PROCESS_TIMEOUT_S) -> None:
        """Spool what is queued, let the writer process convert the spool and end, end the thread.

        A writer process still busy after ``timeout`` is killed: what it had not
        converted stays in the spool for the next start."""
        self._stopping = True
        self._stop_deadline = time.monotonic() + timeout
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout + 5.0)
            self._thread = None
        process, self._process = self._process, None
        if process is not None and process.poll() is None:  # the thread did not get to end it
            process.kill()
            process.wait()

    @property
    def dropped(self) -> int:
        """Events not written: the queue or the spool was full, or the log had failed."""
        return self._dropped_here + self._dropped_there

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_INTERVAL_S)
            self._wake.clear()
            began = time.thread_time()
            batch: list = []
            rows = statics = None
            try:
                while (self.queue or self.rows) and not self.failed:
                    batch = self._take()
                    rows, statics = self._take_rows()
                    self._spool(batch, rows, statics)
                    batch = []
                    rows = statics = None
            except OSError as exc:
                self._dropped_here += events_in(batch) + (0 if rows is None else rows_events(rows, statics))
                self._fail(f"cannot spool events: {exc}")
            self._read_replies()
            self._watch_writer()
            self.shipper_cpu_s += time.thread_time() - began
            if self._stopping and not self.queue and not self.rows:
                break
        self._finish_writer()

    def _take(self, most: int = BATCH_EVENTS) -> list:
        popleft = self.queue.popleft
        return [popleft() for _ in range(min(most, len(self.queue)))]

    def _take_rows(self, most: int = BATCH_EVENTS) -> tuple:
        """``(rows, statics)``: up to ``most`` rows (bytes), taken off the front (the emitter
        only appends whole rows behind), and the statics of their codes (None for a code
        neither table has: more resets than shipments)."""
        rows = self.rows
        end = min(len(rows), most * ROW.size)
        taken = bytes(rows[:end])
        del rows[:end]
        statics, previous = self.code_tables
        codes = {}
        for code in set(row_codes(taken)):
            static = statics.get(code)
            codes[code] = previous.get(code) if static is None else static
        return taken, codes

    def _spool(self, batch: list, rows=None, statics=None) -> None:
        """One batch (entries, and rows with their codes' statics) to a new spool segment
        (renamed into place whole), and a wake-up for the writer process.  Dropped and
        counted when the spool is full."""
        with self._spool_lock:
            self._spool_locked(batch, rows, statics)

    def _spool_locked(self, batch: list, rows=None, statics=None) -> None:
        data = b"" if rows is None else rows
        try:
            payload = segment(batch, statics, data)
        except ValueError:  # a value marshal cannot carry: convert the batch and the statics
            batch = [e for e in map(self._convert, batch) if e is not None]
            statics = None if statics is None else {code: self._convert(s) for code, s in statics.items()}
            payload = segment(batch, statics, data)
        if self.spool_bytes + len(payload) > self.max_spool_bytes:
            self._dropped_here += events_in(batch) + (0 if rows is None else rows_events(rows, statics))
            if not self._spool_full:
                self._spool_full = True
                log.error(
                    "event spool %s is full (%d bytes waiting for the writer process, max-spool-size %d); "
                    "events are dropped until it has room",
                    self.spool_directory, self.spool_bytes, self.max_spool_bytes,
                )
            return
        self._spool_full = False
        self._segment += 1
        path = os.path.join(self.spool_directory, f"{self._segment:016d}")
        with open(path + ".tmp", "wb") as fh:
            fh.write(payload)
        os.rename(path + ".tmp", path + SPOOL_SUFFIX)
        self._spooled_bytes += len(payload)
        try:
            os.write(self._process.stdin.fileno(), b"w")
        except (BlockingIOError, BrokenPipeError):  # already woken, or gone (watched below)
            pass

    @property
    def spool_bytes(self) -> int:
        """Bytes spooled by this run and not yet converted."""
        return max(0, self._spooled_bytes - self._converted_bytes)

    def _read_replies(self) -> None:
        """Take the writer process's status frames that have arrived (never waits)."""
        process = self._process
        try:
            while True:
                data = os.read(process.stdout.fileno(), 65536)
                if not data:
                    break
                self._replies += data
        except BlockingIOError:
            pass
        except OSError:
            return
        try:
            frames = take_frames(self._replies)
        except ValueError as exc:
            self._replies.clear()
            self._fail(f"the event writer process: {exc}")
            return
        for frame in frames:
            self._apply(marshal.loads(frame))

    def _apply(self, reply) -> None:
        written, dropped, failed, file_path, cpu_s, problems, converted = reply
        self.written = self._written_before + written
        self._dropped_there = self._dropped_there_before + dropped
        self.file_path = file_path
        self.writer_cpu_s = self._writer_cpu_before + cpu_s
        self._converted_bytes = self._converted_before + converted
        for problem in problems:
            log.error("%s", problem)
        if failed and not self.failed:
            self._fail(failed)

    def _watch_writer(self) -> None:
        """Start the writer process again if it ended while it should not have (at most once
        every :data:`WRITER_RESTART_INTERVAL_S`): the spool keeps what it had not converted."""
        process = self._process
        if self._stopping or process.poll() is None:
            return
        if time.monotonic() - self._started_writer < WRITER_RESTART_INTERVAL_S:
            return
        self._read_replies()
        log.warning("the event writer process of %s exited with status %s; starting it again", self.directory, process.returncode)
        self.writer_restarts += 1
        self._written_before, self._dropped_there_before = self.written, self._dropped_there
        self._writer_cpu_before, self._converted_before = self.writer_cpu_s, self._converted_bytes
        self._start_writer()

    def _finish_writer(self) -> None:
        """End of input for the writer process: it converts what is spooled and exits."""
        process = self._process
        try:
            process.stdin.close()
        except OSError:
            pass
        deadline = self._stop_deadline or time.monotonic() + WRITER_PROCESS_TIMEOUT_S
        while process.poll() is None and time.monotonic() < deadline:
            self._read_replies()
            time.sleep(0.02)
        if process.poll() is None:
            log.error(
                "the event writer process of %s did not finish in time; killed (the spool keeps the rest for the next start)",
                self.directory,
            )
            process.kill()
            process.wait()
        self._read_replies()
        process.stdout.close()

    def _convert(self, entry: tuple) -> tuple | None:
        try:
            return tuple(_marshallable(v) for v in entry)
        except Exception as exc:  # a value whose str() fails: a bug in its emitter
            log.error("event not written: %s: %s", entry[0], exc)
            return None

    def _fail(self, why: str) -> None:
        """The log failed: say it once, and drop what waits and what comes from now on."""
        self.failed = why
        self.room = 0
        self.row_room = 0
        log.error("event log %s failed: %s; events are dropped from now on", self.directory, why)
        self._dropped_here += events_in(self._take(len(self.queue)))
        rows, statics = self._take_rows(len(self.rows))
        self._dropped_here += rows_events(rows, statics)

    def status(self) -> dict:
        process = self._process
        return {
            "directory": self.directory,
            "file": self.file_path,
            "categories": sorted(self.categories),
            "sample_rate": self.sample_rate,
            "queued": len(self.queue) + len(self.rows) // ROW.size,
            "written": self.written,
            "dropped": self.dropped,
            "failed": self.failed,
            "spool_bytes": self.spool_bytes,
            "writer_pid": None if process is None else process.pid,
            "writer_restarts": self.writer_restarts,
            "writer_cpu_s": round(self.writer_cpu_s, 6),
            "shipper_cpu_s": round(self.shipper_cpu_s, 6),
        }


__all__ = ["EventLog", "MAX_QUEUED_EVENTS", "BATCH_EVENTS", "FLUSH_INTERVAL_S"]
