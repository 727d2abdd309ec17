"""The router cache: Artemis's LocalCacheTest cases, idle expiry, bounds, the file store."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.task import Clock

from junction.gateway import cache as cache_module
from junction.gateway.cache import (
    COMPACT_MIN_DEAD_RECORDS,
    MAX_KEY_CHARS,
    MAX_RECORD_BYTES,
    FileCacheStore,
    RouterCache,
)


class RecordingStore:
    """An in-memory store that counts its writes."""

    def __init__(self, data=None):
        self.data = dict(data or {})
        self.puts = []
        self.deletes = []

    def load(self):
        return dict(self.data)

    def put(self, key, value):
        self.puts.append((key, value))
        self.data[key] = value

    def delete(self, key):
        self.deletes.append(key)
        self.data.pop(key, None)


def persisted_cache(path, clock=None, **kwargs):
    cache = RouterCache(
        "r1", persisted=True, store=FileCacheStore(path), clock=clock or Clock(), **kwargs
    )
    cache.start()
    return cache


# -- Artemis LocalCacheTest --------------------------------------------------------


def test_put_then_get():
    cache = RouterCache("r1")
    cache.start()
    assert cache.get("k") is None
    cache.put("k", "node-1")
    assert cache.get("k") == "node-1"
    assert "k" in cache and len(cache) == 1


def test_entry_expires_after_timeout():
    clock = Clock()
    cache = RouterCache("r1", timeout_ms=500, clock=clock)
    cache.start()
    cache.put("k", "node-1")
    assert cache.get("k") == "node-1"
    clock.advance(1.0)
    assert cache.get("k") is None
    assert len(cache) == 0


def test_persisted_entry_survives_restart(tmp_path):
    path = tmp_path / "routers" / "$.BC.r1.cache"
    cache = persisted_cache(path)
    cache.put("k", "node-1")
    cache.stop()
    restarted = persisted_cache(path)
    assert restarted.get("k") == "node-1"


def test_persisted_expiry_deletes_the_record(tmp_path):
    path = tmp_path / "cache"
    clock = Clock()
    cache = persisted_cache(path, clock, timeout_ms=500)
    cache.put("lazy", "node-1")
    cache.put("swept", "node-2")
    clock.advance(1.0)
    assert cache.get("lazy") is None  # expired on access
    assert cache.expire() == 1  # and by the sweep
    assert FileCacheStore(path).load() == {}
    cache.stop()
    assert persisted_cache(path).get("swept") is None


# -- idle expiry ------------------------------------------------------------------------


def test_expiry_is_idle_time_not_age():
    clock = Clock()
    cache = RouterCache("r1", timeout_ms=500, clock=clock)
    cache.put("k", "node-1")
    for _ in range(10):
        clock.advance(0.4)
        assert cache.get("k") == "node-1"  # each read restarts the idle time
    clock.advance(0.4)
    cache.put("k", "node-1")  # so does a write
    clock.advance(0.4)
    assert cache.get("k") == "node-1"
    clock.advance(0.5)
    assert cache.get("k") is None


def test_sweep_drops_only_idle_entries():
    clock = Clock()
    cache = RouterCache("r1", timeout_ms=1000, clock=clock)
    cache.put("a", "n")
    clock.advance(0.6)
    cache.put("b", "n")
    clock.advance(0.6)
    assert cache.expire() == 1
    assert "a" not in cache and "b" in cache
    clock.advance(0.4)
    assert cache.expire() == 1
    assert len(cache) == 0
    assert cache.expire() == 0


def test_no_timeout_never_expires():
    clock = Clock()
    cache = RouterCache("r1", clock=clock)
    cache.put("k", "n")
    clock.advance(10**9)
    assert cache.expire() == 0
    assert cache.get("k") == "n"
    assert cache.sweep_interval is None


def test_sweep_interval():
    assert RouterCache("r", timeout_ms=500, clock=Clock()).sweep_interval == 1.0
    assert RouterCache("r", timeout_ms=10_000, clock=Clock()).sweep_interval == 5.0
    assert RouterCache("r", timeout_ms=3_600_000, clock=Clock()).sweep_interval == 60.0


def test_cache_id_is_artemis_name():
    assert RouterCache("my-router").cache_id == "$.BC.my-router"


def test_bad_arguments():
    with pytest.raises(ValueError, match="store"):
        RouterCache("r", persisted=True)
    with pytest.raises(ValueError, match="timeout"):
        RouterCache("r", timeout_ms=-1)
    with pytest.raises(ValueError):
        RouterCache("r", max_entries=0)


def test_no_timers_of_its_own():
    clock = Clock()
    cache = RouterCache("r", timeout_ms=500, clock=clock)
    cache.put("k", "n")
    cache.get("k")
    cache.expire()
    assert clock.getDelayedCalls() == []


# -- bounds --------------------------------------------------------------------------


def test_least_recently_used_entry_is_evicted():
    store = RecordingStore()
    cache = RouterCache("r", persisted=True, store=store, max_entries=3)
    cache.start()
    for key in "abc":
        cache.put(key, "n")
    cache.get("a")
    cache.put("d", "n")
    assert "b" not in cache
    assert {"a", "c", "d"} == {k for k in "abcd" if k in cache}
    assert store.deletes == ["b"]  # the stored record goes with it


def test_default_bound_is_named():
    assert RouterCache("r").max_entries == cache_module.MAX_ENTRIES == 1_000_000


def test_reload_beyond_the_bound_keeps_the_newest():
    store = RecordingStore({"a": "1", "b": "2", "c": "3"})
    cache = RouterCache("r", persisted=True, store=store, max_entries=2)
    cache.start()
    assert cache.get("a") is None and cache.get("c") == "3"
    assert store.data == {"b": "2", "c": "3"}


def test_overlong_keys_are_not_cached():
    store = RecordingStore()
    cache = RouterCache("r", persisted=True, store=store)
    cache.start()
    cache.put("x" * (MAX_KEY_CHARS + 1), "n")
    assert len(cache) == 0 and store.puts == []
    cache.put("x" * MAX_KEY_CHARS, "n")
    assert len(cache) == 1


# -- persisted writes ------------------------------------------------------------------


def test_put_writes_only_new_or_changed_values():
    store = RecordingStore()
    cache = RouterCache("r", persisted=True, store=store)
    cache.start()
    cache.put("k", "n1")
    cache.put("k", "n1")
    cache.put("k", "n2")
    cache.put("k", "n2")
    assert store.puts == [("k", "n1"), ("k", "n2")]


def test_expired_unswept_entry_with_same_value_is_not_rewritten():
    clock = Clock()
    store = RecordingStore()
    cache = RouterCache("r", timeout_ms=500, persisted=True, store=store, clock=clock)
    cache.start()
    cache.put("k", "n1")
    clock.advance(1.0)
    cache.put("k", "n1")  # still stored: the record is kept as it is
    assert store.puts == [("k", "n1")] and store.deletes == []
    assert cache.get("k") == "n1"


def test_remove():
    store = RecordingStore()
    cache = RouterCache("r", persisted=True, store=store)
    cache.start()
    cache.put("k", "n")
    cache.remove("k")
    cache.remove("k")
    assert cache.get("k") is None and store.deletes == ["k"]


def test_reloaded_entries_start_their_idle_time_at_reload():
    clock = Clock()
    clock.advance(100)
    store = RecordingStore({"k": "n"})
    cache = RouterCache("r", timeout_ms=500, persisted=True, store=store, clock=clock)
    cache.start()
    clock.advance(0.4)
    assert cache.get("k") == "n"


# -- FileCacheStore -------------------------------------------------------------------


def test_file_store_put_fsyncs(tmp_path, monkeypatch):
    store = FileCacheStore(tmp_path / "c")
    store.load()
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(cache_module.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    store.put("k", "n")
    assert len(synced) == 1
    store.delete("k")
    assert len(synced) == 1  # deletes ride on the next sync


def test_file_store_tolerates_a_torn_last_line(tmp_path):
    path = tmp_path / "c"
    store = FileCacheStore(path)
    store.load()
    store.put("a", "1")
    store.put("b", "2")
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # the crash tore the last record
    store = FileCacheStore(path)
    assert store.load() == {"a": "1"}
    store.put("c", "3")  # appended after a clean line, not glued to the torn one
    store.close()
    assert FileCacheStore(path).load() == {"a": "1", "c": "3"}


def test_file_store_skips_damaged_records(tmp_path):
    path = tmp_path / "c"
    store = FileCacheStore(path)
    store.load()
    for key in "abc":
        store.put(key, key.upper())
    store.close()
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"B"', b'"X"')  # CRC no longer matches
    path.write_bytes(b"".join(lines) + b"garbage\n" + b"x" * (MAX_RECORD_BYTES + 10) + b"\n")
    assert FileCacheStore(path).load() == {"a": "A", "c": "C"}
    assert FileCacheStore(path).load() == {"a": "A", "c": "C"}  # rewritten clean


def test_file_store_compacts_when_dead_records_outnumber_live_ones(tmp_path):
    path = tmp_path / "c"
    store = FileCacheStore(path)
    store.load()
    store.put("keep", "n")
    sizes = []
    for i in range(COMPACT_MIN_DEAD_RECORDS * 3):
        store.put("churn", f"n{i}")
        sizes.append(path.stat().st_size)
        assert store.dead_records <= max(COMPACT_MIN_DEAD_RECORDS, 2)
    assert max(sizes) < 200 * COMPACT_MIN_DEAD_RECORDS
    store.close()
    assert FileCacheStore(path).load() == {
        "keep": "n",
        "churn": f"n{COMPACT_MIN_DEAD_RECORDS * 3 - 1}",
    }


def test_file_store_removes_an_unfinished_compaction(tmp_path):
    path = tmp_path / "c"
    store = FileCacheStore(path)
    store.load()
    store.put("a", "1")
    store.close()
    (tmp_path / "c.tmp").write_bytes(b"half a compaction")
    assert FileCacheStore(path).load() == {"a": "1"}
    assert not (tmp_path / "c.tmp").exists()


def test_file_store_keeps_odd_keys(tmp_path):
    path = tmp_path / "c"
    store = FileCacheStore(path)
    store.load()
    keys = ["", "NULL", "line\nbreak", 'quote"', "ünïcødé", "\U0001f600", "lone\udc80", " "]
    for i, key in enumerate(keys):
        store.put(key, f"n{i}")
    store.close()
    assert FileCacheStore(path).load() == {k: f"n{i}" for i, k in enumerate(keys)}


def test_file_store_needs_load_first(tmp_path):
    with pytest.raises(RuntimeError, match="not loaded"):
        FileCacheStore(tmp_path / "c").put("k", "n")


_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "reload"]), st.sampled_from("abcdef"), st.text(max_size=3)
    ),
    max_size=150,
)


@settings(max_examples=40, deadline=None)
@given(ops=_ops)
def test_file_store_matches_a_dict(ops):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "c")
        store = FileCacheStore(path)
        assert store.load() == {}
        model: dict[str, str] = {}
        for op, key, value in ops:
            if op == "put":
                store.put(key, value)
                model.pop(key, None)
                model[key] = value
            elif op == "delete":
                store.delete(key)
                model.pop(key, None)
            else:
                store.close()
                store = FileCacheStore(path)
                loaded = store.load()
                assert list(loaded.items()) == list(model.items())
        store.close()
        assert FileCacheStore(path).load() == model
