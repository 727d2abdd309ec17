"""The journal's adaptive writer (:mod:`junction.brokercore.journal.groupcommit`):
a lone batch written and synced on the reactor thread, everything else on the
writer thread, with the same guarantees.

The reactor is :class:`tests.unit.writer_fixtures.ThreadReactor` (a Clock whose
``callFromThread`` queues for the test thread), the files the fault-injecting
in-memory layer or a wrapper that records which thread synced.
"""

from __future__ import annotations

import errno
import threading
import time

import pytest

from junction.brokercore.journal import Journal, JournalFailedError, groupcommit
from junction.brokercore.journal.files import FaultyFiles
from tests.unit.writer_fixtures import ThreadReactor


class _SyncRecorder:
    """A file layer over FaultyFiles whose handles record the thread of each fsync
    and can be made slow (a disk that takes ``delay`` seconds per sync)."""

    def __init__(self):
        self.fs = FaultyFiles()
        self.sync_threads: list[int] = []
        self.delay = 0.0

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open(self, name, create=False):
        handle = self.fs.open(name, create=create)
        outer = self

        class Handle:
            def __getattr__(self, attr):
                return getattr(handle, attr)

            def fsync(self):
                if outer.delay:
                    time.sleep(outer.delay)  # the slow disk being simulated, not a wait
                outer.sync_threads.append(threading.get_ident())
                handle.fsync()

        return Handle()


def _journal(files, reactor, **kw):
    j = Journal(None, files=files, reactor=reactor, preallocate=False, **kw)
    j.load()
    j.start()
    reactor.pump_until(lambda: j._writer._idle)  # the first file is open
    return j


def _append(j, reactor, n=1, sync=True):
    ds = [j.append_add(j.next_id(), 1, b"m" * 200, sync=sync) for _ in range(n)]
    reactor.pump_until(lambda: all(d.called for d in ds))
    return ds


def _append_id(j, reactor, record_id):
    d = j.append_add(record_id, 1, b"m" * 200, sync=True)
    reactor.pump_until(lambda: d.called)


def _stop(j, reactor):
    stopped = j.stop()
    reactor.pump_until(lambda: stopped.called)


def test_a_lone_producer_is_synced_on_the_reactor_thread():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r)
    me = threading.get_ident()
    before = len(files.sync_threads)
    for _ in range(20):
        _append(j, r)  # one record, confirmed before the next
    assert j.stats()["reactor_batches"] == 20
    assert files.sync_threads[before:] == [me] * 20
    _stop(j, r)
    assert len(Journal(None, files=files.fs.crash(), reactor=r).load().records) == 20


def test_records_of_several_producers_in_one_batch_send_the_next_to_the_thread():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r)
    me = threading.get_ident()
    _append(j, r, n=5)  # five waiting producers: one batch (on the reactor: none before it)
    assert j.stats()["reactor_batches"] == 1
    _append(j, r)  # after a batch of five sync records: the thread's
    assert j.stats()["reactor_batches"] == 1
    assert files.sync_threads[-1] != me
    _append(j, r)  # the thread's batch held one: lone again
    assert j.stats()["reactor_batches"] == 2
    assert files.sync_threads[-1] == me
    _stop(j, r)


def test_records_without_sync_beside_a_lone_producer_do_not_count_as_concurrency():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r)
    previous = j.next_id()
    _append_id(j, r, previous)
    for _ in range(5):
        j.append_delete(previous, sync=False)  # the consumer's ack of the last one
        previous = j.next_id()
        _append_id(j, r, previous)  # in the same batch as the ack
    assert j.stats()["reactor_batches"] == 6
    _stop(j, r)


def test_a_slow_sync_sends_the_next_batches_to_the_thread():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r)
    me = threading.get_ident()
    files.delay = groupcommit.REACTOR_SYNC_MAX_NS / 1e9 * 3
    _append(j, r)  # on the reactor: the slowness is not known yet
    assert files.sync_threads[-1] == me
    _append(j, r)
    _append(j, r)
    assert all(t != me for t in files.sync_threads[-2:])
    files.delay = 0.0
    _append(j, r)  # the thread's last sync was slow: still the thread
    _append(j, r)  # a fast sync again: back on the reactor
    assert files.sync_threads[-1] == me
    _stop(j, r)


def test_a_file_switch_goes_to_the_thread_and_keeps_the_order():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r, file_size=8192)
    ids = []
    for _ in range(120):  # ~26 KiB of records: three file switches among them
        record_id = j.next_id()
        d = j.append_add(record_id, 1, b"x" * 200)
        r.pump_until(lambda d=d: d.called)
        ids.append(record_id)
    assert j.stats()["files"] > 1
    _stop(j, r)
    loaded = Journal(None, files=files.fs.crash(), reactor=r, file_size=8192).load()
    assert sorted(loaded.records) == ids


def test_a_failed_sync_on_the_reactor_fails_the_journal_and_ends_the_thread():
    fs, r = FaultyFiles(), ThreadReactor()
    j = _journal(fs, r)
    _append(j, r)
    fs.fail_fsync = errno.EIO
    d = j.append_add(j.next_id(), 1, b"lost", sync=True)
    r.pump_until(lambda: d.called)
    failures = []
    d.addErrback(failures.append)
    assert failures and failures[0].check(JournalFailedError)
    assert "fsync" in str(failures[0].value)
    assert j.stats()["state"] == "failed"
    later = j.append_add(j.next_id(), 1, b"refused", sync=True)
    refused = []
    later.addErrback(refused.append)
    assert refused and refused[0].check(JournalFailedError)
    stopped = j.stop()
    errors = []
    stopped.addErrback(errors.append)
    assert errors and errors[0].check(JournalFailedError)
    assert j._writer.thread is None  # joined: the thread ended


def test_the_thread_writer_never_syncs_on_the_reactor():
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r, writer="thread")
    me = threading.get_ident()
    for _ in range(5):
        _append(j, r)
    assert j.stats()["reactor_batches"] == 0
    assert me not in files.sync_threads
    _stop(j, r)


class _Writer:
    """A descriptor registered for writing, as the reactor's getWriters returns."""

    def __init__(self, log, name, disconnecting=False):
        self.log, self.name, self.disconnecting = log, name, disconnecting

    def doWrite(self):
        self.log.append(("sent", self.name))


def test_what_the_turn_wrote_is_sent_before_the_sync_and_the_confirmations_after():
    log = []

    class Reactor(ThreadReactor):
        writers: list = []

        def getWriters(self):
            return list(self.writers)

    class Files(_SyncRecorder):
        def open(self, name, create=False):
            handle = super().open(name, create)
            fsync = handle.fsync

            class Handle:
                def __getattr__(self, attr):
                    return getattr(handle, attr)

                def fsync(self):
                    log.append("fsync")
                    fsync()

            return Handle()

    r = Reactor()
    j = _journal(Files(), r)
    r.writers = [_Writer(log, "dispatch"), _Writer(log, "closing", disconnecting=True)]
    log.clear()
    d = j.append_add(j.next_id(), 1, b"m", sync=True)
    d.addCallback(lambda _: log.append("confirmed"))
    r.pump_until(lambda: d.called)
    assert log == [("sent", "dispatch"), "fsync", "confirmed", ("sent", "dispatch")]
    r.writers = []
    _stop(j, r)


@pytest.mark.parametrize("writer", ["adaptive", "thread"])
def test_hold_gives_one_batch_either_way(writer):
    fs, r = FaultyFiles(), ThreadReactor()
    j = _journal(fs, r, writer=writer)
    syncs = j.stats()["syncs"]
    j.hold()
    ds = [j.append_add(j.next_id(), 1, b"y", sync=True) for _ in range(30)]
    assert not any(d.called for d in ds)
    j.release()
    r.pump_until(lambda: all(d.called for d in ds))
    assert j.stats()["syncs"] == syncs + 1
    _stop(j, r)


# -- records without sync wait up to the buffer timeout for a sync to carry them ----------------

TIMEOUT_NS = 500_000


def _buffered_journal():
    """A journal with a buffer timeout and one record stored: (files, reactor, journal, its id)."""
    files, r = _SyncRecorder(), ThreadReactor()
    j = _journal(files, r, buffer_timeout_ns=TIMEOUT_NS)
    record_id = j.next_id()
    _append_id(j, r, record_id)
    return files, r, j, record_id


def test_a_record_without_sync_alone_is_written_after_the_buffer_timeout():
    _files, r, j, record_id = _buffered_journal()
    batches = j.stats()["reactor_batches"]
    d = j.append_delete(record_id, sync=False)
    r.advance(0)
    assert not d.called  # held back, as Artemis's buffer holds it
    r.advance(TIMEOUT_NS / 1e9)
    assert d.called and j.stats()["reactor_batches"] == batches + 1
    _stop(j, r)


def test_a_sync_record_within_the_buffer_timeout_carries_the_ones_before_it():
    files, r, j, previous = _buffered_journal()
    batches, syncs = j.stats()["reactor_batches"], len(files.sync_threads)
    for _ in range(5):
        ack = j.append_delete(previous, sync=False)  # the consumer's ack of the last one
        r.advance(0)
        assert not ack.called
        previous = j.next_id()
        _append_id(j, r, previous)  # the producer's next message: one batch with the ack
        assert ack.called
    assert j.stats()["reactor_batches"] == batches + 5 and len(files.sync_threads) == syncs + 5
    assert r.getDelayedCalls() == []  # no timer left behind
    assert j.stats()["live_records"] == 1  # every ack deleted what it acknowledged
    _stop(j, r)


def test_a_sync_record_in_the_same_hold_takes_the_waiting_record_along():
    _files, r, j, first = _buffered_journal()
    batches = j.stats()["reactor_batches"]
    j.hold()
    ack = j.append_delete(first, sync=False)
    add = j.append_add(j.next_id(), 1, b"m" * 200, sync=True)
    j.release()
    r.pump_until(lambda: add.called)
    assert ack.called and j.stats()["reactor_batches"] == batches + 1
    assert r.getDelayedCalls() == []
    _stop(j, r)
