"""The connection router's cache: which target node a key went to last.

Artemis's ``LocalCache`` (``reference/artemis-routing.md`` section 4): a map
from routing key to the node id of the target the policy chose, so a key
keeps its target while that target stays ready, even when the pool changes
and the policy would now choose another.  The router consults it before the
policy and fills it after.

* ``timeout_ms`` (``<cache><timeout>``, default 0 = never): an **idle**
  timeout, Caffeine's ``expireAfterAccess``.  An entry neither read nor
  written for that long is gone.  Time is the injected clock's
  ``seconds()``.  Expired entries are dropped lazily when a lookup meets
  them, and in bulk by :meth:`RouterCache.expire`, which the cache's owner
  calls every :attr:`RouterCache.sweep_interval` seconds (the cache starts
  no timers of its own).
* At most ``max_entries`` (:data:`MAX_ENTRIES`) entries; beyond that the
  least recently used one is evicted, so a flood of distinct keys (one per
  source port, say) cannot grow memory without bound.
* Keys longer than :data:`MAX_KEY_CHARS` are not cached (the policy still
  routes them); a key is whatever a client sent, and the stored record of
  one must stay small.
* ``persisted`` (``<cache><persisted>``): entries survive a restart.  Each
  new or changed entry is written to a ``store`` before :meth:`put` returns;
  an entry that expires or is evicted is deleted from it; :meth:`start`
  reloads what the store holds (each reloaded entry's idle time starts at
  the reload).  A ``put`` of the value an entry already has writes nothing.

Artemis persists the entries in the broker's bindings journal, as records
of type 50 (``KEY_VALUE_PAIR_RECORD``) under the map id ``$.BC.<router>``.
Junction's gateway has no journal of its own -- it need not run a broker
core at all -- so the entries go to a small file of their own instead,
:class:`FileCacheStore`; :attr:`RouterCache.cache_id` keeps Artemis's name
for the map (a good file name stem for it).

Everything here runs on the reactor thread, and the file store's writes are
synchronous (with an fsync per new entry): routing decisions that change
the cache are rare compared with messages, and a router that promised a
client a target after a crash must still know it.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import OrderedDict
from typing import Protocol

__all__ = [
    "CACHE_ID_PREFIX",
    "COMPACT_MIN_DEAD_RECORDS",
    "MAX_ENTRIES",
    "MAX_KEY_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_SWEEP_INTERVAL_S",
    "MIN_SWEEP_INTERVAL_S",
    "CacheStore",
    "FileCacheStore",
    "RouterCache",
]

#: Artemis's cache id prefix: the cache of router ``r`` is ``$.BC.r``.
CACHE_ID_PREFIX = "$.BC."

#: Most entries one router's cache holds; the least recently used go first.
#: About 200 bytes each in memory, so ~200 MB at the limit.
MAX_ENTRIES = 1_000_000

#: Longest key (in characters) the cache stores; longer keys are not cached.
MAX_KEY_CHARS = 4096

#: Longest record line :class:`FileCacheStore` reads back (a key of
#: :data:`MAX_KEY_CHARS` characters, each at worst a 6-byte JSON ``\uXXXX``
#: escape, fits with room for the node id); a longer line is treated as corrupt.
MAX_RECORD_BYTES = 64 * 1024

#: :class:`FileCacheStore` compacts when dead records outnumber live ones
#: *and* are at least this many, so a small file is not rewritten on every
#: delete.
COMPACT_MIN_DEAD_RECORDS = 64

#: Bounds of :attr:`RouterCache.sweep_interval`: half the timeout, within these.
MIN_SWEEP_INTERVAL_S = 1.0
MAX_SWEEP_INTERVAL_S = 60.0


class CacheStore(Protocol):
    """Where a persisted cache keeps its entries."""

    def load(self) -> dict[str, str]:
        """Every stored entry, oldest write first."""

    def put(self, key: str, value: str) -> None:
        """Store (or replace) an entry durably before returning."""

    def delete(self, key: str) -> None:
        """Forget an entry (need not be durable at once)."""


class RouterCache:
    """key -> target node id for one connection router (Artemis ``LocalCache``).

    ``clock`` provides ``seconds()`` (a reactor, or a ``Clock`` in tests);
    it defaults to the global reactor and is used only with a timeout.
    ``store`` is required when ``persisted``.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout_ms: int = 0,
        persisted: bool = False,
        store: CacheStore | None = None,
        clock=None,
        max_entries: int = MAX_ENTRIES,
    ):
        if timeout_ms < 0:
            raise ValueError(f"cache timeout must be >= 0 ms, not {timeout_ms}")
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, not {max_entries}")
        if persisted and store is None:
            raise ValueError(f"router {name!r}: a persisted cache needs a store")
        if clock is None and timeout_ms > 0:
            from twisted.internet import reactor as clock
        self.name = name
        self.timeout_ms = timeout_ms
        self.persisted = persisted
        self.max_entries = max_entries
        self._store = store if persisted else None
        self._clock = clock
        self._timeout_s = timeout_ms / 1000.0
        #: key -> (node id, last access time); least recently used first
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.started = False

    @property
    def cache_id(self) -> str:
        """Artemis's id of this cache, ``$.BC.<router name>``."""
        return CACHE_ID_PREFIX + self.name

    @property
    def sweep_interval(self) -> float | None:
        """Seconds between the owner's :meth:`expire` calls; None: no timeout, no sweeps."""
        if self.timeout_ms <= 0:
            return None
        return min(MAX_SWEEP_INTERVAL_S, max(MIN_SWEEP_INTERVAL_S, self._timeout_s / 2))

    def _now(self) -> float:
        return self._clock.seconds() if self._timeout_s > 0 else 0.0

    def _expired(self, touched: float, now: float) -> bool:
        return self._timeout_s > 0 and now - touched >= self._timeout_s

    def start(self) -> None:
        """Reload the stored entries (persisted mode); idle times start now."""
        if self.started:
            return
        self.started = True
        if self._store is None:
            return
        now = self._now()
        for key, value in self._store.load().items():
            self._entries[key] = (value, now)
            self._entries.move_to_end(key)
        self._evict()

    def stop(self) -> None:
        """Close the store, if it can be closed.  The entries stay in memory."""
        self.started = False
        close = getattr(self._store, "close", None)
        if close is not None:
            close()

    def get(self, key: str) -> str | None:
        """The node id cached for ``key``, or None; a hit counts as an access."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._now()
        if self._expired(entry[1], now):
            self._drop(key)
            return None
        self._entries[key] = (entry[0], now)
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: str, node_id: str) -> None:
        """Remember that ``key`` went to ``node_id``; persisted before returning."""
        if len(key) > MAX_KEY_CHARS:
            return
        entry = self._entries.get(key)
        if self._store is not None and (entry is None or entry[0] != node_id):
            # the store holds exactly the keys in memory, so an entry that is
            # expired but not yet swept still has its record: same value, no write
            self._store.put(key, node_id)
        self._entries[key] = (node_id, self._now())
        self._entries.move_to_end(key)
        self._evict()

    def remove(self, key: str) -> None:
        """Forget ``key`` (and its stored record)."""
        if key in self._entries:
            self._drop(key)

    def expire(self) -> int:
        """Drop every entry idle for the timeout or longer; returns how many."""
        if self._timeout_s <= 0:
            return 0
        now = self._now()
        dropped = 0
        # least recently used first: stop at the first live entry
        while self._entries:
            key, (_, touched) = next(iter(self._entries.items()))
            if not self._expired(touched, now):
                break
            self._drop(key)
            dropped += 1
        return dropped

    def _evict(self) -> None:
        while len(self._entries) > self.max_entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        del self._entries[key]
        if self._store is not None:
            self._store.delete(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and not self._expired(entry[1], self._now())

    def __repr__(self) -> str:
        return f"<RouterCache {self.cache_id} entries={len(self._entries)}>"


class FileCacheStore:
    """A persisted router cache's entries in one append-only file.

    One record per line: 8 hex digits of the CRC-32 of the JSON text, a
    space, then the JSON object ``{"k": key, "v": node id}`` (a put) or
    ``{"k": key}`` (a delete), then ``\\n``.  Loading replays the lines in
    order.  A line that fails its CRC, does not parse, is longer than
    :data:`MAX_RECORD_BYTES` or lacks its newline (a write torn by a crash,
    normally the last line) is skipped -- the cache is advisory, so losing
    one record costs at most one key's affinity -- and the file is then
    rewritten clean.

    :meth:`put` writes and fsyncs its record before returning.
    :meth:`delete` only writes (a delete lost in a crash brings back an
    entry whose target the router re-checks with the pool before use), and
    the next put's fsync carries it to disk.  When dead records (replaced or
    deleted entries and the deletes themselves) outnumber live entries, and
    number at least :data:`COMPACT_MIN_DEAD_RECORDS`, the file is rewritten
    with the live entries only: to ``<path>.tmp``, fsynced, renamed over the
    file, and the directory fsynced, so a crash leaves either the old file
    or the new one.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._tmp_path = self.path + ".tmp"
        self._file = None
        self._live: dict[str, str] = {}
        self._records = 0

    # -- reading ----------------------------------------------------------

    def load(self) -> dict[str, str]:
        """Replay the file; returns the live entries, oldest write first."""
        self.close()
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self._tmp_path):  # a compaction that never finished
            os.remove(self._tmp_path)
        live: dict[str, str] = {}
        records = 0
        damaged = False
        try:
            with open(self.path, "rb") as f:
                while True:
                    line = f.readline(MAX_RECORD_BYTES + 1)
                    if not line:
                        break
                    if not line.endswith(b"\n"):
                        damaged = True
                        if len(line) > MAX_RECORD_BYTES:
                            f.readline()  # skip the rest of an overlong line
                        continue
                    record = _decode(line)
                    if record is None:
                        damaged = True
                        continue
                    records += 1
                    key, value = record
                    live.pop(key, None)  # a re-put moves the key to the end
                    if value is not None:
                        live[key] = value
        except FileNotFoundError:
            pass
        self._live = live
        self._records = records
        if damaged:
            self._compact()
        else:
            self._open()
        return dict(live)

    # -- writing ----------------------------------------------------------

    def put(self, key: str, value: str) -> None:
        """Append a put record and fsync it."""
        self._append(key, value)
        self._live.pop(key, None)
        self._live[key] = value
        self._file.flush()
        os.fsync(self._file.fileno())
        self._maybe_compact()

    def delete(self, key: str) -> None:
        """Append a delete record (no fsync); nothing if the key is not stored."""
        if key not in self._live:
            return
        self._append(key, None)
        del self._live[key]
        self._file.flush()
        self._maybe_compact()

    def close(self) -> None:
        """Flush and close the file; :meth:`load` opens it again."""
        if self._file is not None:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            finally:
                self._file.close()
                self._file = None

    @property
    def dead_records(self) -> int:
        """Records in the file that no longer hold a live entry."""
        return self._records - len(self._live)

    def _append(self, key: str, value: str | None) -> None:
        if self._file is None:
            raise RuntimeError(f"cache store {self.path} is not loaded")
        line = _encode(key, value)
        if len(line) > MAX_RECORD_BYTES:
            raise ValueError(f"cache record for a {len(key)}-character key is too long")
        self._file.write(line)
        self._records += 1

    def _maybe_compact(self) -> None:
        dead = self.dead_records
        if dead >= COMPACT_MIN_DEAD_RECORDS and dead > len(self._live):
            self._compact()

    def _compact(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        with open(self._tmp_path, "wb") as f:
            for key, value in self._live.items():
                f.write(_encode(key, value))
            f.flush()
            os.fsync(f.fileno())
        os.replace(self._tmp_path, self.path)
        _fsync_directory(os.path.dirname(self.path) or ".")
        self._records = len(self._live)
        self._open()

    def _open(self) -> None:
        self._file = open(self.path, "ab")  # held open for appends


def _encode(key: str, value: str | None) -> bytes:
    obj = {"k": key} if value is None else {"k": key, "v": value}
    text = json.dumps(obj, separators=(",", ":")).encode("ascii")
    return b"%08x %s\n" % (zlib.crc32(text), text)


def _decode(line: bytes) -> tuple[str, str | None] | None:
    """(key, value or None for a delete), or None for a damaged line."""
    if len(line) < 11 or line[8:9] != b" ":
        return None
    text = line[9:-1]
    try:
        if int(line[:8], 16) != zlib.crc32(text):
            return None
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    key = obj.get("k")
    value = obj.get("v")
    if not isinstance(key, str) or not (value is None or isinstance(value, str)):
        return None
    return key, value


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)
