"""The large-messages directory store: files written in chunks, read back in chunks, deleted."""

from __future__ import annotations

import os

import pytest

from junction.brokercore.large_messages import LargeMessageStore, parse_reference, reference


def test_written_in_chunks_read_back_in_chunks(tmp_path):
    store = LargeMessageStore(str(tmp_path / "large"))
    writer = store.begin()
    for i in range(5):
        writer.append(bytes([i]) * 1000)
    assert writer.finish(sync=True) == 5000
    chunks = list(store.read_chunks(writer.file_id, 1500))
    assert [len(c) for c in chunks] == [1500, 1500, 1500, 500]
    assert b"".join(chunks) == b"".join(bytes([i]) * 1000 for i in range(5))


def test_ids_continue_after_the_files_on_disk(tmp_path):
    directory = str(tmp_path / "large")
    first = LargeMessageStore(directory)
    a, b = first.begin(), first.begin()
    a.finish(sync=False)
    b.finish(sync=False)
    again = LargeMessageStore(directory)
    assert again.new_id() == b.file_id + 1


def test_delete_abort_and_orphans(tmp_path):
    store = LargeMessageStore(str(tmp_path))
    kept, orphan, aborted = store.begin(), store.begin(), store.begin()
    kept.finish(sync=False)
    orphan.finish(sync=False)
    aborted.append(b"half")
    aborted.abort()
    assert not os.path.exists(store.path(aborted.file_id))
    (tmp_path / "not-ours.txt").write_text("x")
    assert store.remove_orphans({kept.file_id}) == 1
    assert sorted(os.listdir(tmp_path)) == [f"{kept.file_id}.msg", "not-ours.txt"]
    store.delete(kept.file_id)
    store.delete(kept.file_id)  # twice is harmless
    assert not os.path.exists(store.path(kept.file_id))


def test_read_all_is_bounded(tmp_path):
    store = LargeMessageStore(str(tmp_path))
    writer = store.begin()
    writer.append(b"x" * 100)
    writer.finish(sync=False)
    assert store.read_all(writer.file_id, 100) == b"x" * 100
    with pytest.raises(ValueError):
        store.read_all(writer.file_id, 99)


def test_reference_round_trip():
    assert parse_reference(reference(12, 10 * 1024 * 1024)) == (12, 10 * 1024 * 1024)
