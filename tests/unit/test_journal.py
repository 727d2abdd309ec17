"""Unit tests of the journal: format, recovery, group commit, failures, compaction.

Most tests use the inline writer with a ``Clock`` whose ``callFromThread``
runs the call at once, and the in-memory :class:`FaultyFiles`: fully
deterministic.  The threaded writer is tested with a reactor whose
``callFromThread`` queues calls for the test to run (``pump_until``, with a
deadline, never a sleep), and against real files in ``tmp_path``.
"""

from __future__ import annotations

import errno
import logging
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from junction.brokercore.journal import (
    DuplicateRecordError,
    FaultyFiles,
    Journal,
    JournalClosedError,
    JournalCorruptionError,
    JournalFailedError,
    JournalStateError,
    OSFiles,
    RecordTooLargeError,
    UnknownRecordError,
)
from junction.brokercore.journal import journal as jmod
from junction.brokercore.journal import records as rec
from junction.brokercore.journal.records import FILE_HEADER_SIZE, RECORD_OVERHEAD, Kind
from tests.harness import wait_for
from tests.unit.writer_fixtures import InlineReactor, ThreadReactor, settle

# -- harness ---------------------------------------------------------------


def open_journal(files, reactor=None, **kwargs):
    reactor = reactor or InlineReactor()
    kwargs.setdefault("file_size", 1024)
    kwargs.setdefault("writer", "inline")
    j = Journal(None, reactor=reactor, files=files, **kwargs)
    state = j.load()
    j.start()
    settle(reactor)  # the first segment is created
    return j, state, reactor


def load_state(files, on_corruption="raise", **kwargs):
    j = Journal(None, reactor=InlineReactor(), files=files, writer="inline", **kwargs)
    return j.load(on_corruption)


_outcomes: dict = {}


def outcome(d):
    """The result of a fired Deferred (a Failure's exception is returned).

    The result is taken off the Deferred once (so an expected failure is not
    logged as unhandled) and remembered for later calls.
    """
    if d not in _outcomes:
        box = []
        d.addBoth(box.append)
        assert box, "Deferred has not fired"
        _outcomes[d] = box[0]
    result = _outcomes[d]
    if hasattr(result, "value") and hasattr(result, "trap"):
        return result.value
    return result


def simple(state):
    return {
        rid: (info.user_type, info.payload, list(info.updates))
        for rid, info in state.records.items()
    }


def stop(j, reactor):
    d = j.stop()
    settle(reactor)
    assert d.called
    return d


# -- record format -----------------------------------------------------------


def test_record_round_trip_and_overhead():
    data = rec.encode_file_header(7) + rec.encode_record(Kind.ADD, 7, 0, 42, 3, b"hello")
    assert len(data) == FILE_HEADER_SIZE + RECORD_OVERHEAD + 5
    header = rec.decode_file_header(data)
    assert header == rec.FileHeader(7, 7, 0, False)
    result = rec.scan_records(data, 7)
    assert result.bad_reason is None
    assert [r[:5] for r in result.records] == [(Kind.ADD, 0, 42, 3, b"hello")]


def test_record_from_another_file_is_rejected():
    data = rec.encode_file_header(8) + rec.encode_record(Kind.ADD, 7, 0, 1, 1, b"x")
    result = rec.scan_records(data, 8)
    assert result.records == [] and "belongs to file 7" in result.bad_reason


def test_zero_padding_is_end_of_data_but_garbage_after_it_is_not():
    body = rec.encode_file_header(1) + rec.encode_record(Kind.ADD, 1, 0, 1, 1, b"x")
    assert rec.scan_records(body + bytes(100), 1).bad_reason is None
    bad = rec.scan_records(body + bytes(10) + b"\x01" + bytes(10), 1)
    assert bad.bad_reason and bad.end == len(body)


def test_file_header_errors_are_clear():
    with pytest.raises(rec.FormatError, match="truncated"):
        rec.decode_file_header(b"JNC")
    with pytest.raises(rec.FormatError, match="magic"):
        rec.decode_file_header(bytes(48))
    good = bytearray(rec.encode_file_header(3))
    good[20] ^= 1
    with pytest.raises(rec.FormatError, match="CRC"):
        rec.decode_file_header(bytes(good))


def test_payload_limit_is_enforced():
    with pytest.raises(RecordTooLargeError, match="exceeds the journal limit"):
        rec.encode_record(Kind.ADD, 1, 0, 1, 1, b"x" * (rec.MAX_PAYLOAD_SIZE + 1))


# -- basic behaviour -----------------------------------------------------------


def test_round_trip_updates_and_deletes_inline():
    fs = FaultyFiles()
    j, state, r = open_journal(fs)
    assert state.records == {} and state.next_id == 1
    fired = []
    for rid in (1, 2, 3):
        j.append_add(rid, 1, b"m%d" % rid).addCallback(fired.append)
    j.append_update(2, 7, b"delivery=1")
    j.append_update(2, 7, b"delivery=2")
    j.append_delete(3)
    j.append_add(4, 1, b"first")
    with pytest.raises(DuplicateRecordError, match="record 4: it is live"):
        j.append_add(4, 2, b"replaced")  # ids are never reused while live
    settle(r)
    assert fired == [None, None, None]
    stop(j, r)
    got = simple(load_state(fs.crash()))
    assert got == {
        1: (1, b"m1", []),
        2: (1, b"m2", [(7, b"delivery=1"), (7, b"delivery=2")]),
        4: (1, b"first", []),
    }


def test_round_trip_real_files_threaded_writer(tmp_path):
    r = ThreadReactor()
    j = Journal(tmp_path / "j", file_size=4096, reactor=r)
    assert j.load().records == {}
    j.start()
    ds = [j.append_add(j.next_id(), 1, bytes([i]) * 100) for i in range(100)]
    ds.append(j.append_update(5, 2, b"u"))
    ds.append(j.append_delete(6))
    r.pump_until(lambda: all(d.called for d in ds))
    assert all(outcome(d) is None for d in ds)
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)
    assert j.stats()["files"] >= 3
    names = OSFiles(tmp_path / "j").list()
    assert not [n for n in names if n.endswith(".tmp")], names  # preallocated spare removed
    again = Journal(tmp_path / "j", file_size=4096, reactor=ThreadReactor())
    state = again.load()
    assert len(state.records) == 99 and 6 not in state.records
    assert state.records[5].updates == [(2, b"u")]
    assert state.records[100].payload == bytes([99]) * 100
    assert state.next_id > 100
    assert again.stop().called


def test_transactions_commit_rollback_and_uncommitted_at_crash():
    fs = FaultyFiles()
    j, _state, r = open_journal(fs)
    j.append_add(1, 1, b"keep")
    j.append_add(2, 1, b"doomed")
    j.append_add_tx(100, 10, 1, b"tx-add")
    j.append_update_tx(100, 1, 5, b"tx-update")
    j.append_delete_tx(100, 2)
    d = j.append_commit(100)
    j.append_add_tx(101, 11, 1, b"rolled back")
    j.append_rollback(101)
    j.append_add_tx(102, 12, 1, b"never committed")
    j.append_delete_tx(102, 1)
    settle(r)
    assert outcome(d) is None
    stop(j, r)
    state = load_state(fs.crash())
    assert simple(state) == {1: (1, b"keep", [(5, b"tx-update")]), 10: (1, b"tx-add", [])}
    assert state.dropped_transactions == {102: 2}
    assert state.next_id > 102
    # The restarted journal rolls the dropped transaction back explicitly...
    j2, again, r2 = open_journal(fs.crash())
    assert again.dropped_transactions == {102: 2}
    fs2 = j2._files
    stop(j2, r2)
    third = load_state(fs2.crash())
    assert third.dropped_transactions == {} and simple(third) == simple(state)
    # ...so a late COMMIT with that id (a broker bug) cannot resurrect it.
    j3, _s, r3 = open_journal(fs2.crash(), compact_min_files=1)
    j3.append_commit(102)
    settle(r3)
    fs3 = j3._files
    stop(j3, r3)
    assert simple(load_state(fs3.crash())) == simple(state)


def test_tx_records_spanning_files_commit_in_a_later_file():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512)
    for i in range(20):
        j.append_add_tx(7, 100 + i, 1, b"p" * 40)
    j.append_commit(7)
    settle(r)
    assert j.stats()["files"] > 2
    stop(j, r)
    assert sorted(load_state(fs.crash()).records) == list(range(100, 120))


def test_ids_are_recovered_past_everything_seen_and_reserved():
    fs = FaultyFiles()
    j, state, r = open_journal(fs, file_size=512)
    assert state.next_id == 1
    first = [j.next_id() for _ in range(5)]
    assert first == [1, 2, 3, 4, 5]
    j.append_add(1000, 1, b"x")
    assert j.next_id() == 1001  # never below an id the journal has seen
    j.append_delete(1000)
    settle(r)
    stop(j, r)
    state = load_state(fs.crash())
    assert state.records == {}
    assert state.next_id > 1001
    # An id reserved past the block is never handed out again, even if unused.
    j2, s2, r2 = open_journal(fs.crash(), file_size=512)
    ids = [j2.next_id() for _ in range(jmod.ID_BLOCK_SIZE + 10)]
    settle(r2)
    fs2 = j2._files
    stop(j2, r2)
    assert load_state(fs2.crash()).next_id > ids[-1]


def test_stats_count_syncs_and_records():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 20)
    syncs_before = j.stats()["syncs"]
    for i in range(50):
        j.append_add(i + 1, 1, b"x" * 10)
    settle(r)
    stats = j.stats()
    assert stats["syncs"] == syncs_before + 1  # one batch, one fsync
    assert stats["records_per_sync"] == 50
    assert stats["records"] == 50 and stats["live_records"] == 50
    assert stats["live_bytes"] == 50 * (RECORD_OVERHEAD + 10)
    j.append_delete(1)
    settle(r)
    assert j.stats()["dead_bytes"] == 2 * RECORD_OVERHEAD + 10
    stop(j, r)


def test_sync_false_records_are_written_without_fsync():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 20)
    fsyncs = fs.fsyncs
    d = j.append_add(1, 1, b"a", sync=False)
    settle(r)
    assert outcome(d) is None and fs.fsyncs == fsyncs
    # Written to the OS but not durable: a power cut loses it...
    assert load_state(fs.crash()).records == {}
    # ...while a later sync record makes everything before it durable.
    j.append_add(2, 1, b"b")
    settle(r)
    assert sorted(load_state(fs.crash()).records) == [1, 2]
    stop(j, r)


def test_journal_level_sync_off_never_fsyncs_records():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 20, sync=False)
    fsyncs = fs.fsyncs
    for i in range(5):
        j.append_add(i + 1, 1, b"x")
    settle(r)
    assert fs.fsyncs == fsyncs
    stop(j, r)  # stop syncs
    assert len(load_state(fs.crash()).records) == 5


# -- group commit with the real writer thread -------------------------------------


def test_group_commit_threaded_batches_many_records_per_sync(tmp_path):
    r = ThreadReactor()
    j = Journal(tmp_path, reactor=r)
    j.load()
    j.start()
    ds = [j.append_add(j.next_id(), 1, b"x" * 300) for _ in range(3000)]
    r.pump_until(lambda: all(d.called for d in ds))
    stats = j.stats()
    assert all(outcome(d) is None for d in ds)
    assert stats["records_synced"] >= 3000
    assert stats["syncs"] < 3000
    assert stats["records_per_sync"] > 1
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)


def test_hold_batches_appends_until_release(tmp_path):
    """While held, appends queue up without waking the writer; release wakes it once."""
    r = ThreadReactor()
    j = Journal(tmp_path, reactor=r, preallocate=False)
    j.load()
    j.start()
    writer = j._writer
    wait_for(lambda: writer._idle, 10, interval=0.001, what="the writer thread to wait for work")
    j.hold()
    j.hold()  # holds nest
    ds = [j.append_add(j.next_id(), 1, b"x" * 100) for _ in range(50)]
    j.release()
    assert writer._kick_owed and len(writer._items) == 50  # still held: nothing taken
    assert not any(d.called for d in ds)
    j.release()
    r.pump_until(lambda: all(d.called for d in ds))
    assert all(outcome(d) is None for d in ds)
    assert j.stats()["syncs"] == 1  # one batch, one sync
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)


def test_threaded_writer_with_buffer_timeout_and_rolls(tmp_path):
    r = ThreadReactor()
    j = Journal(tmp_path, file_size=8192, buffer_timeout_ns=200_000, reactor=r)
    j.load()
    j.start()
    ds = []
    for i in range(400):
        ds.append(j.append_add(i + 1, 1, b"y" * 100, sync=(i % 3 == 0)))
    r.pump_until(lambda: all(d.called for d in ds))
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)
    assert len(Journal(tmp_path, file_size=8192, reactor=r).load().records) == 400


def test_buffer_timeout_waits_only_under_concurrency(tmp_path):
    """A 1 s minimum sync interval: a lone sequential producer must not feel it."""
    r = ThreadReactor()
    j = Journal(tmp_path, reactor=r, buffer_timeout_ns=1_000_000_000, preallocate=False)
    j.load()
    j.start()
    started = time.monotonic()
    for i in range(5):
        d = j.append_add(i + 1, 1, b"seq")
        r.pump_until(lambda d=d: d.called, timeout=0.9)  # one wait would take 1 s
    assert time.monotonic() - started < 0.9
    # Concurrent appends (batches of many) do wait, so they share syncs.
    ds = [j.append_add(100 + i, 1, b"c") for i in range(50)]
    r.pump_until(lambda: all(d.called for d in ds))
    syncs = j.stats()["syncs"]
    ds = [j.append_add(200 + i, 1, b"c") for i in range(50)]
    r.pump_until(lambda: all(d.called for d in ds), timeout=10)
    assert j.stats()["syncs"] <= syncs + 2
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)


def test_buffer_timeout_ignores_unsynced_records_of_a_lone_producer(tmp_path):
    """Acks (sync=False) beside one sequential producer's sync records are no
    concurrency: the producer must not wait out a 1 s interval."""
    r = ThreadReactor()
    j = Journal(tmp_path, reactor=r, buffer_timeout_ns=1_000_000_000, preallocate=False)
    j.load()
    j.start()
    started = time.monotonic()
    for i in range(5):
        d = j.append_add(10 + i, 1, b"send")
        if i:
            j.append_update(10 + i - 1, 2, b"ack", sync=False)
        r.pump_until(lambda d=d: d.called, timeout=0.9)  # one wait would take 1 s
    assert time.monotonic() - started < 0.9
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)


# -- recovery: torn tails and corruption ---------------------------------------------


def _journal_with_records(n=6, payload=b"p" * 20, file_size=1 << 16, preallocate=True):
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=file_size, preallocate=preallocate)
    for i in range(n):
        j.append_add(i + 1, 1, payload + bytes([i]))
    settle(r)
    stop(j, r)
    return fs.crash()


def test_torn_tail_at_every_byte_offset_of_the_last_record():
    for preallocate in (False, True):
        base = _journal_with_records(preallocate=preallocate)
        (name,) = base.list()
        data = base.read(name)
        size = RECORD_OVERHEAD + 21
        end = FILE_HEADER_SIZE + 6 * size
        last_start = end - size
        for cut in range(last_start, end):
            for filler in (b"", b"\x00", b"\xa5", b"\xff"):
                torn = data[:cut] + filler * (len(data) - cut if filler else 0)
                fs = base.snapshot()
                fs.set_bytes(name, torn)
                state = load_state(fs)
                assert sorted(state.records) == [1, 2, 3, 4, 5], (cut, filler)
                if cut == last_start and filler in (b"", b"\x00"):
                    assert state.torn_tail is None  # clean end: nothing after record 5
                else:
                    assert state.torn_tail is not None and state.torn_tail.offset == last_start
                    # the tail was truncated away and the repair is durable
                    assert fs.crash().size(name) == last_start
                    assert load_state(fs.crash()).torn_tail is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keep=st.integers(min_value=0, max_value=400), garbage=st.binary(max_size=300))
def test_torn_tail_random_garbage_never_loses_a_complete_earlier_record(keep, garbage):
    base = _journal_with_records(n=10, preallocate=False)
    (name,) = base.list()
    data = base.read(name)
    cut = len(data) - keep if keep < len(data) - FILE_HEADER_SIZE else FILE_HEADER_SIZE
    fs = base.snapshot()
    fs.set_bytes(name, data[:cut] + garbage)
    state = load_state(fs)
    complete = (cut - FILE_HEADER_SIZE) // (RECORD_OVERHEAD + 21)
    assert set(range(1, complete + 1)) <= set(state.records)
    assert set(state.records) <= set(range(1, 11))


def test_crc_flip_in_an_earlier_file_is_reported_clearly():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512)
    for i in range(30):
        j.append_add(i + 1, 1, b"z" * 40)
    settle(r)
    stop(j, r)
    disk = fs.crash()
    first = disk.list()[0]
    data = bytearray(disk.read(first))
    offset = FILE_HEADER_SIZE + (RECORD_OVERHEAD + 40) + 50  # inside the 2nd record
    data[offset] ^= 0x40
    disk.set_bytes(first, bytes(data))
    with pytest.raises(JournalCorruptionError) as info:
        load_state(disk.snapshot())
    message = str(info.value)
    assert first in message and "offset %d" % (FILE_HEADER_SIZE + RECORD_OVERHEAD + 40) in message
    assert "CRC" in message and "on_corruption='skip'" in message
    assert info.value.file == first
    # The operator's explicit choice: skip the damaged record, keep the rest.
    state = load_state(disk.snapshot(), on_corruption="skip")
    assert len(state.corruptions) == 1 and state.corruptions[0].file == first
    assert 2 not in state.records and len(state.records) == 29


def test_crc_flip_in_the_middle_of_the_last_file_is_a_torn_tail_with_a_warning():
    base = _journal_with_records(n=6, preallocate=False)
    (name,) = base.list()
    data = bytearray(base.read(name))
    size = RECORD_OVERHEAD + 21
    data[FILE_HEADER_SIZE + 2 * size + 30] ^= 1  # record 3 of 6
    fs = base.snapshot()
    fs.set_bytes(name, bytes(data))
    state = load_state(fs)
    assert sorted(state.records) == [1, 2]
    assert state.torn_tail.intact_records_after is True
    assert "CRC" in state.torn_tail.reason


def test_last_file_without_an_intact_header_is_removed():
    base = _journal_with_records(n=3)
    fs = base.snapshot()
    fs.set_bytes(jmod.data_name(99), b"JNCJ")  # a file being created at the crash
    state = load_state(fs)
    assert sorted(state.records) == [1, 2, 3]
    assert jmod.data_name(99) in state.removed_files and jmod.data_name(99) not in fs.list()


def test_bad_header_in_an_earlier_file_is_corruption():
    base = _journal_with_records(n=3)
    fs = base.snapshot()
    fs.set_bytes(jmod.data_name(99), rec.encode_file_header(99))
    fs.set_bytes(jmod.data_name(1), b"garbage" * 10)
    with pytest.raises(JournalCorruptionError, match="journal-0000000000000001.jnl"):
        load_state(fs)


def test_restart_after_torn_tail_keeps_appending_cleanly():
    base = _journal_with_records(n=4, preallocate=False)
    (name,) = base.list()
    fs = base.snapshot()
    fs.set_bytes(name, base.read(name)[:-7])
    j, state, r = open_journal(fs)
    assert sorted(state.records) == [1, 2, 3] and state.torn_tail
    j.append_add(50, 1, b"after")
    settle(r)
    stop(j, r)
    again = load_state(fs.crash())
    assert sorted(again.records) == [1, 2, 3, 50] and again.torn_tail is None


def test_confirm_listeners_hear_the_running_count_of_records_after_each_batch():
    """The n-th record appended is confirmed once a listener hears n or more, never before
    its own Deferred fires; a failure is heard as None."""
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16)
    heard = []
    fired_by_then = []
    records: list = []
    counter = j.add_confirm_listener(lambda n: (heard.append(n), fired_by_then.append(len(records))))
    base = counter.records_submitted
    for rid in (1, 2, 3):
        j.append_add(rid, 1, b"m").addCallback(records.append)
    j.append_update(2, 7, b"u", sync=False)
    assert counter.records_submitted == base + 4 and heard == []
    settle(r)
    assert heard and heard[-1] == base + 4 and fired_by_then[-1] == 3  # after the Deferreds
    assert counter.records_confirmed == base + 4
    j.append_add(4, 1, b"m")
    assert counter.records_submitted == base + 5 and heard[-1] == base + 4
    settle(r)
    assert heard[-1] == base + 5 and heard == sorted(heard)
    fs.fail_fsync = errno.EIO
    failed = j.append_add(5, 1, b"lost")
    settle(r)
    assert isinstance(outcome(failed), JournalFailedError)
    assert heard[-1] is None and counter.records_confirmed == base + 5


# -- failures --------------------------------------------------------------------------


def test_fsync_failure_fails_the_journal_for_good():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16)
    ok = j.append_add(1, 1, b"before")
    settle(r)
    assert outcome(ok) is None
    fs.fail_fsync = errno.EIO
    d1 = j.append_add(2, 1, b"lost")
    d2 = j.append_add(3, 1, b"lost too", sync=False)
    j.append_add_tx(9, 4, 1, b"tx")
    settle(r)
    for d in (d1, d2):
        err = outcome(d)
        assert isinstance(err, JournalFailedError)
    message = str(outcome(d1))
    assert (
        "fsync failed" in message
        and "[Errno 5]" in message
        and "durable sends are refused" in message
    )
    assert j.failed and j.failure is outcome(d1)
    fs.fail_fsync = None  # the disk "recovers": the journal must not
    later = j.append_add(5, 1, b"x")
    assert isinstance(outcome(later), JournalFailedError)
    assert isinstance(outcome(j.append_commit(9)), JournalFailedError)
    j.append_add_tx(9, 6, 1, b"ignored")  # no-op, no exception
    assert outcome(j.stop()) is j.failure  # a failed journal never stops cleanly
    assert r.getDelayedCalls() == []
    assert sorted(load_state(fs.crash()).records) == [1]


def test_enospc_on_write_fails_pending_and_later_appends():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 12, preallocate=False)
    j.append_add(1, 1, b"a" * 100)
    settle(r)
    fs.space = 150
    ds = [j.append_add(i, 1, b"b" * 100) for i in range(2, 6)]
    settle(r)
    errors = [outcome(d) for d in ds]
    assert all(isinstance(e, JournalFailedError) for e in errors)
    assert "write failed" in str(errors[0]) and "No space left" in str(errors[0])
    assert isinstance(outcome(j.append_delete(1)), JournalFailedError)
    assert outcome(j.stop()) is j.failure
    assert sorted(load_state(fs.crash()).records) == [1]


def test_failure_while_creating_a_segment():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512)
    settle(r)
    fs.fail_open = errno.EACCES
    ds = [j.append_add(i + 1, 1, b"q" * 100) for i in range(8)]
    settle(r)
    err = outcome(ds[-1])
    assert isinstance(err, JournalFailedError) and "create failed" in str(err)
    assert outcome(j.stop()) is j.failure


def test_short_writes_are_completed():
    fs = FaultyFiles()
    fs.max_write = 7
    j, _s, r = open_journal(fs, file_size=2048)
    for i in range(40):
        j.append_add(i + 1, 1, bytes([i]) * 33)
    settle(r)
    stop(j, r)
    state = load_state(fs.crash())
    assert len(state.records) == 40 and state.records[40].payload == bytes([39]) * 33


def test_fsync_failure_with_threaded_writer(tmp_path):
    fs = FaultyFiles()
    r = ThreadReactor()
    j = Journal(None, file_size=4096, reactor=r, files=fs, preallocate=False)
    j.load()
    j.start()
    first = j.append_add(1, 1, b"ok")
    r.pump_until(lambda: first.called)
    fs.fail_fsync = errno.EIO
    ds = [j.append_add(i + 2, 1, b"x" * 50) for i in range(200)]
    r.pump_until(lambda: all(d.called for d in ds))
    assert all(isinstance(outcome(d), JournalFailedError) for d in ds)
    assert isinstance(outcome(j.append_add(999, 1, b"")), JournalFailedError)
    assert outcome(j.stop()) is j.failure


def _settled_with_an_unsynced_tail(j, r):
    """A synced record and a record written with sync=False: both confirmed, the
    file dirty, so the stop's own last sync is the one left to do."""
    synced = j.append_add(1, 1, b"synced")
    if isinstance(r, ThreadReactor):
        r.pump_until(lambda: synced.called)
    settle(r)
    written = j.append_add(2, 1, b"written, not synced", sync=False)
    if isinstance(r, ThreadReactor):
        r.pump_until(lambda: written.called)
    settle(r)
    assert outcome(synced) is None and outcome(written) is None  # every append settled
    assert not j.failed


def test_a_failed_last_sync_at_stop_is_a_failed_stop(caplog):
    """The fsync failure lands on stop()'s last sync after every append settled: no
    append's Deferred can report it, so the stop must (and the journal logs it)."""
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16)
    _settled_with_an_unsynced_tail(j, r)
    fs.fail_fsync = errno.EIO
    with caplog.at_level(logging.ERROR, logger=jmod.__name__):
        err = outcome(stop(j, r))
    assert isinstance(err, JournalFailedError), err
    assert "fsync failed" in str(err) and "[Errno 5]" in str(err)
    assert j.failed and j.failure is err and j.stats()["state"] == "failed"
    assert [rec.levelno for rec in caplog.records] == [logging.ERROR]
    assert "fsync failed" in caplog.text and "while stopping" in caplog.text
    assert outcome(j.stop()) is err  # asked again: still not clean
    assert isinstance(outcome(j.append_add(3, 1, b"x")), JournalFailedError)
    assert r.getDelayedCalls() == []


def test_a_failed_last_sync_at_stop_is_a_failed_stop_threaded_writer():
    fs = FaultyFiles()
    r = ThreadReactor()
    j = Journal(None, file_size=4096, reactor=r, files=fs)
    j.load()
    j.start()
    _settled_with_an_unsynced_tail(j, r)
    fs.fail_fsync = errno.EIO
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)
    err = outcome(stopped)
    assert isinstance(err, JournalFailedError) and "fsync failed" in str(err)
    assert j.failed and j._writer.thread is None  # the writer thread was joined


def test_a_clean_stop_fires_none_and_logs_nothing(caplog):
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16)
    _settled_with_an_unsynced_tail(j, r)
    with caplog.at_level(logging.DEBUG, logger=jmod.__name__):
        assert outcome(stop(j, r)) is None
    assert not j.failed and caplog.records == []
    assert sorted(load_state(fs.crash()).records) == [1, 2]  # the stop synced the tail


# -- reclaim and compaction -----------------------------------------------------------


def test_oldest_dead_files_are_reclaimed_after_the_deletes_are_durable():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512)
    for i in range(40):
        j.append_add(i + 1, 1, b"m" * 40)
    settle(r)
    files_before = j.stats()["files"]
    assert files_before > 4
    for i in range(30):
        j.append_delete(i + 1)
    settle(r)
    stats = j.stats()
    assert stats["files_removed"] > 0 and stats["files"] < files_before
    # every removal came after an fsync of the deletes that killed the file
    log = fs.log
    first_remove = next(i for i, line in enumerate(log) if " remove " in line)
    assert any(" fsync " in line for line in log[:first_remove])
    stop(j, r)
    state = load_state(fs.crash())
    assert sorted(state.records) == list(range(31, 41))


def test_a_live_record_in_the_oldest_file_pins_the_files_after_it():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=1000)
    for i in range(40):
        j.append_add(i + 1, 1, b"m" * 40)
    for i in range(1, 40):
        j.append_delete(i + 1)  # record 1 stays live
    settle(r)
    assert j.stats()["files_removed"] == 0
    stop(j, r)
    assert sorted(load_state(fs.crash()).records) == [1]


def test_compaction_keeps_exactly_the_live_set():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=1000)
    for i in range(60):
        j.append_add(i + 1, 1, b"c" * 40)
        if i % 10 == 0:
            j.append_update(i + 1, 2, b"upd%d" % i)
    j.append_add_tx(500, 70, 1, b"open tx")  # still open when compacted
    for i in range(60):
        if i % 10:
            j.append_delete(i + 1)
    settle(r)
    before = j.stats()
    done = j.compact()
    settle(r)
    assert outcome(done) is None
    after = j.stats()
    assert after["compactions"] == 1 and after["files"] < before["files"]
    assert after["live_bytes"] == before["live_bytes"]
    assert any(name.endswith(".cjnl") for name in fs.list())
    j.append_commit(500)  # the commit lands after the compacted file
    j.append_delete(11)
    settle(r)
    stop(j, r)
    state = load_state(fs.crash())
    expected = {i + 1 for i in range(60) if i % 10 == 0} - {11} | {70}
    assert set(state.records) == expected
    assert state.records[1].updates == [(2, b"upd0")]
    assert state.records[70].payload == b"open tx"


def test_automatic_compaction_and_repeated_compaction():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=4, compact_percentage=50)
    live = set()
    rid = 0
    for _round in range(8):
        for _ in range(30):
            rid += 1
            j.append_add(rid, 1, b"a" * 30)
            live.add(rid)
        for victim in sorted(live)[1::2][: len(live) // 2]:
            if victim % 7:  # keep a few long-lived records
                j.append_delete(victim)
                live.discard(victim)
        settle(r)
    stats = j.stats()
    assert stats["compactions"] >= 2, stats
    stop(j, r)
    assert set(load_state(fs.crash()).records) == live
    assert len([n for n in fs.list() if n.endswith(".cjnl")]) == 1


def test_compaction_with_threaded_writer(tmp_path):
    r = ThreadReactor()
    j = Journal(tmp_path, file_size=1024, reactor=r, compact_min_files=1000)
    j.load()
    j.start()
    ds = [j.append_add(i + 1, 1, b"t" * 50) for i in range(100)]
    ds += [j.append_delete(i + 1) for i in range(100) if i % 5]
    r.pump_until(lambda: all(d.called for d in ds))
    done = j.compact()
    r.pump_until(lambda: done.called)
    assert outcome(done) is None
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)
    state = Journal(tmp_path, file_size=1024, reactor=r).load()
    assert set(state.records) == {i + 1 for i in range(100) if i % 5 == 0}


def test_stop_during_a_threaded_compaction(tmp_path):
    r = ThreadReactor()
    j = Journal(tmp_path, file_size=1024, reactor=r, compact_min_files=1000)
    j.load()
    j.start()
    ds = [j.append_add(i + 1, 1, b"s" * 50) for i in range(200)]
    ds += [j.append_delete(i + 1) for i in range(200) if i % 3]
    r.pump_until(lambda: all(d.called for d in ds))
    compaction = j.compact()
    stopped = j.stop()
    r.pump_until(lambda: stopped.called and compaction.called)
    assert outcome(compaction) is None  # finished or abandoned, never an error
    state = Journal(tmp_path, file_size=1024, reactor=r).load()
    assert set(state.records) == {i + 1 for i in range(200) if i % 3 == 0}
    assert not [n for n in OSFiles(tmp_path).list() if n.endswith(".tmp")]


def test_threaded_rolls_use_the_preallocated_next_segment():
    fs = FaultyFiles()
    r = ThreadReactor()
    j = Journal(None, file_size=2048, reactor=r, files=fs)
    j.load()
    j.start()
    ds = []
    for i in range(60):
        ds.append(j.append_add(i + 1, 1, b"p" * 100))
        r.pump_until(lambda: all(d.called for d in ds))  # one batch at a time
    stopped = j.stop()
    r.pump_until(lambda: stopped.called)
    renames = [line for line in fs.log if " rename " in line and ".jnl.tmp" in line]
    assert len(renames) >= 2, fs.log
    assert not [n for n in fs.list() if n.endswith(".tmp")]
    assert all(fs.size(n) >= 2048 for n in fs.list())  # zero-filled to the segment size
    assert len(load_state(fs.crash(), file_size=2048).records) == 60


def test_writable_waiters_errback_when_the_journal_fails():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16, max_pending_bytes=100)
    fs.fail_fsync = errno.EIO
    j.append_add(1, 1, b"x" * 200)
    waiter = j.wait_writable()
    settle(r)
    assert isinstance(outcome(waiter), JournalFailedError)
    assert j.pending_bytes == 0
    assert outcome(j.stop()) is j.failure


def test_leftovers_of_an_interrupted_compaction_are_finished_at_load():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=1000)
    for i in range(30):
        j.append_add(i + 1, 1, b"l" * 40)
    for i in range(25):
        j.append_delete(i + 1)
    settle(r)
    before = fs.snapshot()
    j.compact()
    settle(r)
    stop(j, r)
    # Rebuild "renamed but the old files not yet removed": old files + compacted file.
    mixed = before.snapshot()
    (compacted,) = [n for n in fs.list() if n.endswith(".cjnl")]
    mixed.set_bytes(compacted, fs.read(compacted))
    mixed.set_bytes("journal-0000000000000099.cjnl.tmp", b"half written")
    state = load_state(mixed)
    assert set(state.records) == set(range(26, 31))
    assert "journal-0000000000000099.cjnl.tmp" in state.removed_files
    assert not [n for n in mixed.list() if n.endswith(".tmp")]
    covered = [n for n in before.list() if n < compacted.replace(".cjnl", ".jnl~")]
    assert covered and not set(covered) & set(mixed.list())


# -- record ids are not reused while anything refers to them -------------------------


def test_adding_an_id_that_is_live_or_held_by_an_open_transaction_is_refused():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs)

    def refused(append, *args, match="open transaction"):
        records, pending = j.stats()["records"], j.pending_bytes
        with pytest.raises(DuplicateRecordError, match=match):
            append(*args)
        assert (j.stats()["records"], j.pending_bytes) == (records, pending)  # nothing written

    j.append_add(1, 1, b"live")
    refused(j.append_add, 1, 1, b"again", match="record 1: it is live")
    refused(j.append_add_tx, 9, 1, 1, b"again", match="record 1: it is live")
    # Ids that an open transaction adds, updates or deletes (live or not).
    j.append_update_tx(10, 5, 2, b"u")
    j.append_delete_tx(11, 1)
    j.append_add_tx(12, 6, 1, b"tx-add")
    for rid in (5, 6):
        refused(j.append_add, rid, 1, b"x")
        refused(j.append_add_tx, 13, rid, 1, b"x")
    refused(j.append_add_tx, 12, 6, 1, b"x")  # the same transaction too
    refused(j.append_add_tx, 10, 5, 1, b"x")
    # Once the transactions end, the rules for what they did apply.
    j.append_rollback(10)
    j.append_add(5, 1, b"five")  # nothing refers to 5 any more
    j.append_commit(12)
    refused(j.append_add, 6, 1, b"x", match="it is live")
    j.append_commit(11)  # deletes 1
    j.append_add(1, 1, b"re-added")  # deleted, and no open transaction names it
    j.append_delete(6)
    j.append_add_tx(14, 6, 1, b"six again")
    j.append_commit(14)
    settle(r)
    stop(j, r)
    assert simple(load_state(fs.crash())) == {
        1: (1, b"re-added", []),
        5: (1, b"five", []),
        6: (1, b"six again", []),
    }


def test_delete_tx_then_add_of_the_same_id_cannot_resurrect_it():
    """Found by Hypothesis when the journal still accepted re-adds of live ids.

    A DELETE_TX acts at its COMMIT on whatever record of its id is live
    then.  ``ADD(1), DELETE_TX(t, 1), ADD(1)`` (in a newer segment),
    ``COMMIT(t)`` killed the *newer* ADD and left the DELETE_TX's segment
    dead; reclaiming it made recovery replay ``ADD(1)`` and an empty COMMIT,
    so record 1 came back.  The second ADD is now refused, also when a plain
    DELETE has made the id dead while the DELETE_TX is open; after the
    COMMIT the id may be added again, and recovery agrees with the index.
    """
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=1000)
    j.append_add(1, 1, b"x")
    j.append_delete_tx(50, 1)
    for rid in range(100, 120):  # fill segments with dead records
        j.append_add(rid, 1, b"f" * 40)
        j.append_delete(rid)
    assert j.stats()["files"] > 2
    with pytest.raises(DuplicateRecordError, match="record 1: it is live"):
        j.append_add(1, 1, b"x")
    # Not live any more, but the open DELETE_TX would still act on a new ADD.
    j.append_delete(1)
    with pytest.raises(DuplicateRecordError, match="record 1: an open transaction"):
        j.append_add(1, 1, b"x")
    j.append_commit(50)
    settle(r)
    assert j._index.live == {} and j.stats()["files_removed"] > 0
    stop(j, r)
    fs = fs.crash()
    assert load_state(fs).records == {}
    # Deleted and out of every transaction: adding 1 again is allowed and safe.
    j, state, r = open_journal(fs, file_size=512, compact_min_files=1000)
    assert state.records == {}
    j.append_add(1, 1, b"back")
    for rid in range(200, 220):
        j.append_add(rid, 1, b"f" * 40)
        j.append_delete(rid)
    settle(r)
    stop(j, r)
    assert simple(load_state(fs.crash())) == {1: (1, b"back", [])}


def test_journals_written_with_re_adds_still_recover_and_compact():
    """Files from before the id contract was enforced: last ADD wins, as before."""
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512, compact_min_files=1000)
    j.append_add(4, 1, b"first")
    j.append_update(4, 7, b"dropped with the first ADD")
    # What an older journal accepted: a second ADD of live record 4.
    j._append(Kind.ADD.value, 0, 4, 2, b"replaced", True, True)
    for rid in range(100, 130):
        j.append_add(rid, 1, b"o" * 40)
        j.append_delete(rid)
    settle(r)
    stop(j, r)
    fs = fs.crash()
    assert simple(load_state(fs)) == {4: (2, b"replaced", [])}
    j, state, r = open_journal(fs, file_size=512, compact_min_files=1000)
    assert simple(state) == {4: (2, b"replaced", [])}
    with pytest.raises(DuplicateRecordError):
        j.append_add(4, 1, b"x")
    j.append_update(4, 7, b"kept")
    done = j.compact()
    settle(r)
    assert outcome(done) is None and j.stats()["compactions"] == 1
    assert any(name.endswith(".cjnl") for name in fs.list())
    stop(j, r)
    assert simple(load_state(fs.crash())) == {4: (2, b"replaced", [(7, b"kept")])}


# -- the fold and the run-time index agree --------------------------------------------

_ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "add",
                "update",
                "delete",
                "add_tx",
                "update_tx",
                "delete_tx",
                "commit",
                "rollback",
                "compact",
            ]
        ),
        st.integers(1, 4),
        st.integers(1, 2),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=_ops)
@example(ops=[("add", 1, 1), ("update_tx", 1, 1), ("commit", 1, 1)])
@example(ops=[("add", 1, 1), ("delete_tx", 1, 1), ("add", 1, 1), ("commit", 1, 1)])
@example(ops=[("add_tx", 2, 1), ("add", 2, 2), ("commit", 2, 1), ("update", 2, 1)])
# Found when re-adds were accepted: the COMMIT killed the newer ADD(1), the
# segment of the DELETE_TX was reclaimed, and recovery brought record 1 back.
@example(ops=[("add", 1, 1)] * 13 + [("delete_tx", 1, 1), ("add", 1, 1), ("commit", 1, 1)])
@example(
    ops=[("add", 1, 1), ("delete_tx", 1, 1), ("commit", 1, 1)]
    + [("add", 2, 1), ("delete", 2, 1)] * 8
    + [("add", 1, 1), ("compact", 1, 1), ("add", 3, 1), ("delete_tx", 1, 2), ("commit", 1, 2)]
)
def test_index_live_set_matches_the_fold(ops):
    """The run-time index and recovery's fold agree on any sequence of appends.

    The operations are drawn freely; an ADD that breaks the id contract (its
    id is live or an open transaction refers to it) must raise
    :class:`DuplicateRecordError` and write nothing.  A small model of the
    live set and of the open transactions decides which ADDs those are.
    """
    fs = FaultyFiles()
    j, _s, reactor = open_journal(fs, file_size=512, compact_min_files=1000)
    live: set = set()
    txs: dict = {}  # open transaction -> [(op, record id)]
    for op, rid, tx in ops:
        held = rid in live or any(rid == other for t in txs.values() for _op, other in t)
        if op in ("add", "add_tx") and held:
            records = j.stats()["records"]
            with pytest.raises(DuplicateRecordError):
                if op == "add":
                    j.append_add(rid, 1, b"x" * rid)
                else:
                    j.append_add_tx(tx, rid, 1, b"t")
            assert j.stats()["records"] == records
        elif op == "add":
            j.append_add(rid, 1, b"x" * rid)
            live.add(rid)
        elif op == "update" and rid in live:
            j.append_update(rid, 2, b"u")
        elif op == "delete" and rid in live:
            j.append_delete(rid)
            live.discard(rid)
        elif op == "add_tx":
            j.append_add_tx(tx, rid, 1, b"t")
            txs.setdefault(tx, []).append((op, rid))
        elif op == "update_tx":
            j.append_update_tx(tx, rid, 2, b"tu")
            txs.setdefault(tx, []).append((op, rid))
        elif op == "delete_tx":
            j.append_delete_tx(tx, rid)
            txs.setdefault(tx, []).append((op, rid))
        elif op == "commit":
            j.append_commit(tx)
            for tx_op, tx_rid in txs.pop(tx, ()):
                if tx_op == "add_tx":
                    live.add(tx_rid)
                elif tx_op == "delete_tx":
                    live.discard(tx_rid)
        elif op == "rollback":
            j.append_rollback(tx)
            txs.pop(tx, None)
        elif op == "compact":
            done = j.compact()
            settle(reactor)
            assert outcome(done) is None
        assert set(j._index.live) == live
    settle(reactor)
    index_live = set(j._index.live)
    index_bytes = sum(f.live for f in j._index.order)
    open_txs = set(j._index.txs)
    assert open_txs == set(txs)
    stop(j, reactor)
    fresh = Journal(None, reactor=InlineReactor(), files=fs.crash(), writer="inline", file_size=512)
    state = fresh.load()
    assert set(state.records) == index_live
    assert set(state.dropped_transactions) == open_txs
    # Bytes: live records' ADD+UPDATE sizes (open transactions are dropped at load).
    expected = sum(
        RECORD_OVERHEAD
        + len(info.payload)
        + sum(RECORD_OVERHEAD + len(p) for _t, p in info.updates)
        for info in state.records.values()
    )
    assert sum(f.live for f in fresh._index.order) == expected
    assert index_bytes >= expected


# -- flow control, limits, misuse ---------------------------------------------------------


def test_flow_control_pending_bytes_and_wait_writable():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=1 << 16, max_pending_bytes=1000)
    assert j.writable and j.wait_writable().called
    for i in range(10):
        j.append_add(i + 1, 1, b"w" * 100)
    assert j.pending_bytes == 10 * (RECORD_OVERHEAD + 100)
    assert not j.writable
    waiter = j.wait_writable()
    assert not waiter.called
    settle(r)
    assert waiter.called and j.writable and j.pending_bytes == 0
    stop(j, r)


def test_oversize_record_gets_its_own_segment():
    fs = FaultyFiles()
    j, _s, r = open_journal(fs, file_size=512)
    j.append_add(1, 1, b"s")
    j.append_add(2, 1, b"B" * 2000)
    j.append_add(3, 1, b"s")
    settle(r)
    stop(j, r)
    sizes = [fs.size(n) for n in fs.list()]
    assert max(sizes) > 2000
    state = load_state(fs.crash())
    assert state.records[2].payload == b"B" * 2000 and sorted(state.records) == [1, 2, 3]


def test_misuse_is_reported():
    fs = FaultyFiles()
    j = Journal(None, reactor=InlineReactor(), files=fs, writer="inline")
    with pytest.raises(JournalStateError):
        j.append_add(1, 1, b"")
    with pytest.raises(JournalStateError):
        j.start()
    with pytest.raises(JournalStateError):
        j.next_id()
    j.load()
    with pytest.raises(JournalStateError):
        j.load()
    j.start()
    with pytest.raises(UnknownRecordError, match="not live"):
        j.append_update(5, 1, b"")
    with pytest.raises(UnknownRecordError):
        j.append_delete(5)
    with pytest.raises(ValueError, match="user type"):
        j.append_add(1, 256, b"")
    with pytest.raises(ValueError, match="record id"):
        j.append_add(-1, 1, b"")
    with pytest.raises(ValueError, match="file_size"):
        Journal(None, file_size=10, reactor=InlineReactor(), files=fs)
    with pytest.raises(RecordTooLargeError):
        j.append_add(1, 1, b"x" * (rec.MAX_PAYLOAD_SIZE + 1))
    d = j.stop()
    assert d.called and j.stop().called
    assert isinstance(outcome(j.append_add(1, 1, b"")), JournalClosedError)
    assert j._reactor.getDelayedCalls() == []


def test_module_does_not_import_the_global_reactor():
    code = (
        "import sys; import junction.brokercore.journal as j; "
        "assert 'twisted.internet.reactor' not in sys.modules, 'reactor imported'"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=str(__import__("pathlib").Path(__file__).parents[2]),
    )


# -- the fake file layer is checked against the real one --------------------------------


def _exercise(files):
    out = []
    h = files.open("a", create=True)
    out.append(h.write(b"hello world", 0))
    out.append(h.write(b"XY", 20))
    h.fsync()
    out.append(h.size())
    out.append(files.read("a"))
    out.append(files.read("a", 6, 5))
    h.truncate(5)
    out.append(files.read("a"))
    h.close()
    with pytest.raises(FileExistsError):
        files.open("a", create=True)
    with pytest.raises(FileNotFoundError):
        files.open("missing")
    files.rename("a", "b")
    out.append(files.list())
    files.truncate("b", 2)
    out.append(files.size("b"))
    files.open("c", create=True).close()
    files.remove("b")
    files.sync_directory()
    out.append(files.list())
    with pytest.raises(FileNotFoundError):
        files.remove("b")
    return out


def test_faulty_files_behave_like_real_files(tmp_path):
    assert _exercise(FaultyFiles()) == _exercise(OSFiles(tmp_path))


def test_faulty_files_power_loss_model():
    fs = FaultyFiles()
    h = fs.open("f", create=True)
    h.write(b"durable", 0)
    h.fsync()
    h.write(b"-volatile", 7)
    assert fs.crash().list() == []  # the directory entry was never synced
    fs.sync_directory()
    assert fs.crash().read("f") == b"durable"
    assert fs.crash(keep_unsynced=True).read("f") == b"durable-volatile"
    fs.rename("f", "g")
    assert fs.crash().list() == ["f"]
    fs.crash_at_op = fs.ops + 2
    h.write(b"!", 0)
    with pytest.raises(Exception, match="simulated power loss"):
        h.fsync()
    with pytest.raises(Exception, match="after the simulated crash"):
        h.write(b"x", 0)
