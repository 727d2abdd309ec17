"""Unit tests of the page store (address-full-policy PAGE): format, order,
page deletion, recovery with a cursor, torn tails, power loss, failures.

Most tests use the inline writer with a ``Clock`` whose ``callFromThread``
runs the call at once, over the in-memory :class:`FaultyFiles` (the
journal's power-loss model): fully deterministic.  The threaded writer is
tested with a reactor whose ``callFromThread`` queues calls for the test
thread to run (``pump_until``, with a deadline, never a sleep), over real
files in ``tmp_path`` and over ``FaultyFiles``.
"""

from __future__ import annotations

import errno
import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from junction.brokercore.journal import FaultyFiles, OSFiles, SimulatedCrash
from junction.brokercore.paging import (
    RECORD_OVERHEAD,
    PageCorruptionError,
    PagePosition,
    PageRecordTooLargeError,
    PageStore,
    PageStoreClosedError,
    PageStoreFailedError,
    PageStoreStateError,
    address_dir_name,
    decode_page_header,
    encode_page_header,
    find_paged_addresses,
    page_file_name,
)
from junction.brokercore.paging import store as paging
from tests.unit.writer_fixtures import InlineReactor, ThreadReactor, settle

ADDRESS = "orders.eu"
HEADER_SIZE = len(encode_page_header(1, ADDRESS))

# -- harness -------------------------------------------------------------------------


def open_store(files, cursor=None, *, reactor=None, page_size=4096, address=ADDRESS, **kwargs):
    store = PageStore(
        None,
        address,
        files=files,
        reactor=reactor if reactor is not None else InlineReactor(),
        writer=kwargs.pop("writer", "inline"),
        page_size_bytes=page_size,
        **kwargs,
    )
    store.load(cursor)
    store.start()
    return store


class Outcome:
    """Records how a Deferred ended."""

    def __init__(self, d):
        self.result = None
        self.failure = None
        self.done = False
        d.addCallbacks(self._ok, self._err)

    def _ok(self, value):
        self.result, self.done = value, True

    def _err(self, failure):
        self.failure, self.done = failure, True


def payload(i: int, size: int = 20) -> bytes:
    head = f"m{i}:".encode()
    return head + bytes((i + k) % 251 for k in range(max(0, size - len(head))))


def read_all(store, chunk: int = 7) -> list:
    out = []
    while True:
        got = store.read(chunk, 1 << 30)
        if not got:
            return out
        out.extend(got)


def page_files(files) -> list[str]:
    return [n for n in files.list() if n.endswith(".page")]


# -- positions, names, format ----------------------------------------------------------


def test_position_orders_and_round_trips_bytes():
    a, b, c = PagePosition(1, 5), PagePosition(2, 0), PagePosition(2, 1)
    assert a < b < c and sorted([c, a, b]) == [a, b, c]
    for p in (a, PagePosition(0, 0), PagePosition(2**64 - 1, 2**32 - 1)):
        data = p.to_bytes()
        assert len(data) == PagePosition.ENCODED_SIZE
        assert PagePosition.from_bytes(data) == p
    with pytest.raises(ValueError):
        PagePosition.from_bytes(b"\x01" * 5)
    with pytest.raises(ValueError):
        PagePosition.from_bytes(b"\x09" + a.to_bytes()[1:])
    with pytest.raises(ValueError):
        PagePosition(-1, 0)
    with pytest.raises(ValueError):
        PagePosition(0, 2**32)


def test_address_dir_names_are_safe_and_distinct():
    assert address_dir_name("orders.eu") == "orders.eu"
    assert address_dir_name("DLQ") == "%44%4C%51"
    assert address_dir_name("a/b c") == "a%2Fb%20c"
    assert address_dir_name("..") == "%2E."
    assert address_dir_name(".hidden") == "%2Ehidden"
    names = ["Orders", "orders", "a%b", "a%25b", "ü", "x" * 500, "x" * 501, "*", "\x00"]
    escaped = [address_dir_name(n) for n in names]
    assert len(set(e.lower() for e in escaped)) == len(names)  # even case-insensitively
    for e in escaped:
        assert "/" not in e and e not in ("", ".", "..") and len(e) <= paging.MAX_DIR_NAME_CHARS
        assert set(e) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-%ABCDEF~")
    for n in ("Orders", "a%b", "ü", "*"):
        assert paging._dir_name_to_address(address_dir_name(n)) == n
    assert paging._dir_name_to_address(address_dir_name("x" * 500)) is None  # hashed
    with pytest.raises(ValueError):
        address_dir_name("")
    with pytest.raises(ValueError):
        address_dir_name("x" * (paging.MAX_ADDRESS_BYTES + 1))


def test_page_header_round_trip_and_damage():
    header = encode_page_header(7, "Ünïcode/addr")
    assert decode_page_header(header) == (7, "Ünïcode/addr", len(header))
    for i in range(len(header)):
        damaged = bytearray(header)
        damaged[i] ^= 0x40
        with pytest.raises(ValueError):
            decode_page_header(bytes(damaged))
    with pytest.raises(ValueError):
        decode_page_header(header[:-1])


# -- append / read / consume -----------------------------------------------------------


def test_round_trip_in_order_from_memory_and_after_write():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor)
    assert not store.paging and store.pending_count == 0
    outcomes = [Outcome(store.append(payload(i), sync=True)) for i in range(10)]
    assert store.paging and store.pending_count == 10
    assert store.pending_bytes == sum(len(payload(i)) for i in range(10))
    # Not written yet, but readable (served from the pending batch).
    assert not any(o.done for o in outcomes)
    first = store.read(4, 1 << 20)
    assert [p for _pos, p in first] == [payload(i) for i in range(4)]
    settle(reactor)
    assert [o.result for o in outcomes] == [PagePosition(1, i) for i in range(10)]
    assert files.fsyncs >= 2  # the page header, then the batch
    rest = store.read(100, 1 << 20)
    assert [p for _pos, p in rest] == [payload(i) for i in range(4, 10)]
    assert store.read(100, 1 << 20) == []
    assert store.pending_count == 10  # read is not consume
    store.consumed(first[-1][0])
    assert store.pending_count == 6
    store.consumed(rest[-1][0])
    assert store.pending_count == 0 and store.pending_bytes == 0 and not store.paging
    # Consuming again, or earlier, is a no-op.
    store.consumed(first[0][0])
    assert store.consumed_position == PagePosition(1, 9)
    done = Outcome(store.stop())
    assert done.done and done.failure is None


def test_read_limits_records_and_bytes_but_always_returns_one():
    store = open_store(FaultyFiles(), page_size=1 << 20)
    for i, size in enumerate([100, 100, 100, 5000, 100]):
        store.append(payload(i, size), sync=False)
    assert len(store.read(2, 1 << 20)) == 2
    got = store.read(10, 150)
    assert [len(p) for _pos, p in got] == [100]
    got = store.read(10, 150)
    assert [len(p) for _pos, p in got] == [5000]  # bigger than max_bytes, still returned
    assert [len(p) for _pos, p in store.read(10, 1 << 20)] == [100]
    assert store.read(0, 1 << 20) == []


def test_consumed_must_be_read_first():
    store = open_store(FaultyFiles())
    store.append(b"a", sync=False)
    store.append(b"b", sync=False)
    with pytest.raises(ValueError, match="not been read"):
        store.consumed(PagePosition(1, 0))
    (pos, _), = store.read(1, 100)
    with pytest.raises(ValueError):
        store.consumed(PagePosition(1, 1))
    store.consumed(pos)
    assert store.pending_count == 1


def test_rewind_rereads_unconsumed_records():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=200)
    for i in range(12):
        store.append(payload(i), sync=True)
    settle(reactor)
    got = store.read(5, 1 << 20)
    store.consumed(got[1][0])
    store.read(4, 1 << 20)
    store.rewind()
    again = read_all(store)
    assert [p for _pos, p in again] == [payload(i) for i in range(2, 12)]


def test_many_pages_are_deleted_as_they_are_consumed():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=200)
    n = 120
    outcomes = [Outcome(store.append(payload(i, 30 + i % 40), sync=i % 3 == 0)) for i in range(n)]
    settle(reactor)
    assert all(o.result is not None for o in outcomes)
    positions = [o.result for o in outcomes]
    assert positions == sorted(positions) and len(set(positions)) == n
    pages = sorted({p.page for p in positions})
    assert len(pages) > 20
    assert page_files(files) == [page_file_name(p) for p in pages]
    # Every closed page respects page_size_bytes (unless a single record).
    for p in pages:
        records = sum(1 for q in positions if q.page == p)
        assert files.size(page_file_name(p)) <= 200 or records == 1
    got = []
    while True:
        batch = store.read(3, 1 << 20)
        if not batch:
            break
        got.extend(batch)
        store.consumed(batch[-1][0])
        settle(reactor)
        last = batch[-1][0]
        remaining = {q.page for q in positions if q > last} | {pages[-1]}
        assert page_files(files) == [page_file_name(p) for p in sorted(remaining)]
    assert [p for _pos, p in got] == [payload(i, 30 + i % 40) for i in range(n)]
    assert [pos for pos, _p in got] == positions
    assert page_files(files) == [page_file_name(pages[-1])]  # the current page stays
    assert store.stats()["pages_removed"] == len(pages) - 1


def test_pages_consumed_from_memory_are_deleted_after_their_records_are_written():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=100)
    for i in range(20):
        store.append(payload(i, 40), sync=False)
    got = read_all(store)
    store.consumed(got[-1][0])
    assert files.list() == []  # nothing written yet
    settle(reactor)
    # The writer wrote all pages, then removed the consumed closed ones.
    assert page_files(files) == [page_file_name(got[-1][0].page)]
    assert not store.paging


def test_a_consumed_current_page_is_deleted_once_the_next_page_starts():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=64)
    store.append(b"", sync=False)
    (pos, _), = store.read(1, 100)
    store.consumed(pos)  # page 1 is current: it stays for now
    settle(reactor)
    assert page_files(files) == [page_file_name(1)]
    store.append(b"", sync=False)  # does not fit: page 2 starts, page 1 goes
    settle(reactor)
    assert page_files(files) == [page_file_name(2)]


def test_a_failed_page_removal_is_counted_not_fatal():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=64)
    for i in range(3):
        store.append(payload(i, 10), sync=True)
    settle(reactor)
    files.remove(page_file_name(1))  # gone behind the store's back
    got = store.read(2, 1 << 20)
    store.consumed(got[-1][0])
    settle(reactor)
    stats = store.stats()
    assert stats["remove_errors"] == 1 and "00000000000000000001.page" in stats["last_remove_error"]
    assert not store.failed and page_files(files) == [page_file_name(3)]
    o = Outcome(store.append(b"more", sync=True))
    settle(reactor)
    assert o.result == PagePosition(4, 0)


def test_consuming_before_start_removes_pages_at_once():
    files = FaultyFiles()
    positions = fill(files, 12)
    store = PageStore(None, ADDRESS, files=files, reactor=InlineReactor(), writer="inline", page_size_bytes=200)
    store.load(None)
    got = read_all(store)
    assert [pos for pos, _p in got] == positions
    store.consumed(positions[-1])
    assert page_files(files) == [] and not store.paging


def test_reads_from_disk_in_chunks_past_the_tail_cache():
    files = FaultyFiles()
    reactor = InlineReactor()
    with mock.patch.object(paging, "TAIL_CACHE_BYTES", 50), mock.patch.object(
        paging, "READ_AHEAD_BYTES", 64
    ):
        store = open_store(files, reactor=reactor, page_size=1000)
        sizes = [1, 10, 200, 3, 90, 0, 500, 7, 64, 44, 1200, 2]
        for i, size in enumerate(sizes):
            store.append(payload(i, size), sync=False)
        settle(reactor)
        got = [p for _pos, p in read_all(store, chunk=2)]
        assert got == [payload(i, size) for i, size in enumerate(sizes)]
        stats = store.stats()
        assert stats["disk_reads"] > 0
        assert stats["cached_bytes"] <= 50 + max(sizes)


def test_record_too_large_and_state_errors():
    files = FaultyFiles()
    store = PageStore(None, ADDRESS, files=files, reactor=InlineReactor(), writer="inline")
    with pytest.raises(PageStoreStateError):
        store.append(b"x", sync=True)
    with pytest.raises(PageStoreStateError):
        store.read(1, 1)
    store.load(None)
    with pytest.raises(PageStoreStateError):
        store.load(None)
    store.start()
    with pytest.raises(PageStoreStateError):
        store.start()
    with mock.patch.object(paging, "MAX_PAYLOAD_SIZE", 10):
        with pytest.raises(PageRecordTooLargeError):
            store.append(b"x" * 11, sync=True)
    assert Outcome(store.stop()).done
    closed = Outcome(store.append(b"x", sync=True))
    assert closed.failure.check(PageStoreClosedError)
    with pytest.raises(PageStoreClosedError):
        store.read(1, 1)
    with pytest.raises(ValueError):
        PageStore(None, ADDRESS, files=files, page_size_bytes=10)
    with pytest.raises(ValueError):
        PageStore(None, ADDRESS, files=files, writer="async")


def test_group_commit_inline_one_sync_per_batch():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=1 << 20)
    store.append(b"first", sync=True)
    settle(reactor)
    before = files.fsyncs
    outcomes = [Outcome(store.append(payload(i), sync=i == 5)) for i in range(50)]
    settle(reactor)
    assert files.fsyncs == before + 1
    assert all(o.result is not None for o in outcomes)
    assert store.stats()["records_per_sync"] > 1


def test_sync_false_records_are_written_but_not_synced():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=1 << 20)
    store.append(b"durable", sync=True)
    settle(reactor)
    before = files.fsyncs
    o = Outcome(store.append(b"fast", sync=False))
    settle(reactor)
    assert o.result == PagePosition(1, 1) and files.fsyncs == before
    crashed = open_store(files.crash())
    assert [p for _pos, p in read_all(crashed)] == [b"durable"]


def test_store_without_sync_still_syncs_page_switches_and_stop():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=100, sync=False)
    for i in range(10):
        store.append(payload(i, 40), sync=True)
    settle(reactor)
    assert Outcome(store.stop()).done
    again = open_store(files.crash())
    assert [p for _pos, p in read_all(again)] == [payload(i, 40) for i in range(10)]


def test_flow_control_writable():
    reactor = InlineReactor()
    store = open_store(FaultyFiles(), reactor=reactor, page_size=1 << 20, max_pending_bytes=1000)
    assert store.writable
    for i in range(20):
        store.append(payload(i, 100), sync=False)
    assert not store.writable and store.unwritten_bytes == 20 * (100 + RECORD_OVERHEAD)
    waiter = Outcome(store.wait_writable())
    assert not waiter.done
    settle(reactor)
    assert waiter.done and waiter.failure is None and store.writable


# -- recovery ----------------------------------------------------------------------------


def fill(files, n, *, page_size=200, sizes=None, sync=True):
    """A stopped store over ``files`` holding n records; their positions."""
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=page_size)
    outcomes = [
        Outcome(store.append(payload(i, sizes[i] if sizes else 30), sync=sync)) for i in range(n)
    ]
    settle(reactor)
    assert Outcome(store.stop()).done
    return [o.result for o in outcomes]


def test_reopen_with_a_cursor_skips_exactly_the_consumed_records():
    files = FaultyFiles()
    n = 40
    positions = fill(files, n)
    assert len({p.page for p in positions}) > 5
    everything = open_store(files.snapshot())
    assert [pos for pos, _p in read_all(everything)] == positions
    for k, cursor in enumerate(positions):
        copy = files.snapshot()
        store = open_store(copy, cursor)
        assert store.pending_count == n - k - 1
        got = read_all(store)
        assert [pos for pos, _p in got] == positions[k + 1 :]
        assert [p for _pos, p in got] == [payload(i, 30) for i in range(k + 1, n)]
        # Pages wholly at or before the cursor are gone.
        kept = {p.page for p in positions[k + 1 :]}
        assert page_files(copy) == [page_file_name(p) for p in sorted(kept)]
        assert store.recovery.records == n - k - 1
        # New records continue after the cursor and after every page.
        o = Outcome(store.append(b"new", sync=True))
        settle(store._reactor)
        assert o.result.page > positions[-1].page and o.result > cursor


def test_cursor_beyond_everything_deletes_all_and_numbers_continue_above_it():
    files = FaultyFiles()
    fill(files, 5)
    store = open_store(files, PagePosition(50, 3))
    assert not store.paging and page_files(files) == []
    o = Outcome(store.append(b"x", sync=True))
    settle(store._reactor)
    assert o.result == PagePosition(51, 0)


def test_cursor_past_the_end_of_its_page_means_all_of_it_is_consumed():
    # The broker depaged records from memory that the crash then lost.
    files = FaultyFiles()
    positions = fill(files, 10, page_size=1 << 20)
    store = open_store(files, PagePosition(positions[-1].page, 25))
    assert store.read(10, 1 << 20) == [] and page_files(files) == []


def test_torn_tail_at_every_byte_of_the_last_record_is_truncated():
    files = FaultyFiles()
    positions = fill(files, 4, page_size=1 << 20, sizes=[10, 20, 30, 40])
    name = page_file_name(positions[-1].page)
    data = files.read(name)
    last_start = len(data) - (40 + RECORD_OVERHEAD)
    for cut in range(last_start, len(data)):
        copy = files.snapshot()
        copy.set_bytes(name, data[:cut])
        store = open_store(copy)
        got = read_all(store)
        assert [p for _pos, p in got] == [payload(i, s) for i, s in enumerate([10, 20, 30])]
        assert copy.size(name) == last_start
        torn = store.recovery.torn_tail
        if cut == last_start:
            assert torn is None
        else:
            assert torn.file == name and torn.offset == last_start
            assert torn.dropped_bytes == cut - last_start and not torn.intact_records_after
        # The truncation was synced: a crash now keeps it.
        assert copy.crash().size(name) == last_start
        # And the next record goes to a new page, in order.
        o = Outcome(store.append(b"after", sync=True))
        settle(store._reactor)
        assert o.result == PagePosition(positions[-1].page + 1, 0)


def test_garbage_in_the_last_record_is_a_torn_tail_at_every_offset():
    files = FaultyFiles()
    positions = fill(files, 3, page_size=1 << 20, sizes=[10, 10, 25])
    name = page_file_name(positions[-1].page)
    data = files.read(name)
    last_start = len(data) - (25 + RECORD_OVERHEAD)
    for i in range(last_start, len(data)):
        copy = files.snapshot()
        damaged = bytearray(data)
        damaged[i] ^= 0x5A
        copy.set_bytes(name, bytes(damaged))
        store = open_store(copy)
        assert [p for _pos, p in read_all(store)] == [payload(0, 10), payload(1, 10)]
        assert store.recovery.torn_tail.offset == last_start


def test_damage_followed_by_intact_records_is_reported():
    files = FaultyFiles()
    positions = fill(files, 3, page_size=1 << 20, sizes=[10, 10, 10])
    name = page_file_name(positions[-1].page)
    data = bytearray(files.read(name))
    data[HEADER_SIZE + 5] ^= 1  # first record damaged, two intact ones follow
    files.set_bytes(name, bytes(data))
    store = open_store(files)
    assert read_all(store) == []
    assert store.recovery.torn_tail.intact_records_after


def test_torn_header_of_the_last_page_removes_it():
    files = FaultyFiles()
    positions = fill(files, 6)
    last = page_file_name(positions[-1].page)
    for cut in range(0, HEADER_SIZE):
        copy = files.snapshot()
        copy.set_bytes(last, files.read(last)[:cut])
        store = open_store(copy)
        assert last not in copy.list()
        expected = [p for p in positions if p.page != positions[-1].page]
        assert [pos for pos, _p in read_all(store)] == expected


def test_crc_error_in_an_earlier_page_raises_a_clear_error():
    files = FaultyFiles()
    positions = fill(files, 30)
    first = page_file_name(positions[0].page)
    data = bytearray(files.read(first))
    offset = HEADER_SIZE + RECORD_OVERHEAD + 30 + 18  # inside the second record
    data[offset] ^= 0xFF
    files.set_bytes(first, bytes(data))
    store = PageStore(None, ADDRESS, files=files, reactor=InlineReactor(), writer="inline")
    with pytest.raises(PageCorruptionError) as info:
        store.load(None)
    assert info.value.file == first
    assert info.value.offset == HEADER_SIZE + RECORD_OVERHEAD + 30
    assert "CRC" in str(info.value) and "corruption" in str(info.value)
    # Past the cursor the damaged page is not even read.
    store = open_store(files, positions[5])
    assert [pos for pos, _p in read_all(store)] == positions[6:]


def test_damaged_header_of_an_earlier_page_raises():
    files = FaultyFiles()
    positions = fill(files, 30)
    first = page_file_name(positions[0].page)
    data = bytearray(files.read(first))
    data[3] ^= 1
    files.set_bytes(first, bytes(data))
    with pytest.raises(PageCorruptionError, match="magic"):
        open_store(files)


def test_a_page_of_another_address_is_refused():
    files = FaultyFiles()
    fill(files, 3)
    store = PageStore(None, "other", files=files, reactor=InlineReactor(), writer="inline")
    with pytest.raises(PageCorruptionError, match="belongs to address 'orders.eu'"):
        store.load(None)


def test_corruption_found_while_reading_raises_and_keeps_what_was_read():
    files = FaultyFiles()
    reactor = InlineReactor()
    # No tail cache and a tiny read-ahead: every record comes from the file.
    with mock.patch.object(paging, "TAIL_CACHE_BYTES", 0), mock.patch.object(
        paging, "READ_AHEAD_BYTES", 1
    ):
        store = open_store(files, reactor=reactor, page_size=1 << 20)
        for i in range(5):
            store.append(payload(i), sync=True)
        settle(reactor)
        name = page_file_name(1)
        data = bytearray(files.read(name))
        third = HEADER_SIZE + 2 * (20 + RECORD_OVERHEAD)
        data[third + 17] ^= 1
        files.set_bytes(name, bytes(data))
        got = store.read(10, 1 << 20)
        assert [p for _pos, p in got] == [payload(0), payload(1)]
        with pytest.raises(PageCorruptionError, match="CRC") as info:
            store.read(10, 1 << 20)
        assert info.value.file == name and info.value.offset == third
        assert store.stats()["cache_hits"] == 0 and store.stats()["disk_reads"] >= 2


# -- power loss ----------------------------------------------------------------------------


def run_workload(files, *, page_size=160):
    """Appends (mixed sync), depaging and consuming with tiny pages, until
    the file system crashes.  Returns (model, confirmed durable, cursor)."""
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=page_size)
    appended = []
    durable = set()
    cursor = None

    def confirm(position, sync):
        if sync:
            durable.add(position)

    try:
        for i in range(60):
            sync = i % 4 != 1
            p = payload(i, 10 + (i * 7) % 50)
            d = store.append(p, sync=sync)
            d.addCallbacks(confirm, lambda f: None, callbackArgs=(sync,))
            appended.append(p)
            if i % 5 == 4:
                settle(reactor)
            if i % 9 == 8 and not store.failed:
                got = store.read(4, 1 << 20)
                if got:
                    store.consumed(got[-1][0])  # the broker's journal commit
                    cursor = got[-1][0]
            if store.failed:
                break
        settle(reactor)
        if not store.failed:
            store.stop()
    except (SimulatedCrash, PageStoreFailedError):
        pass
    return appended, durable, cursor, store


def reference_positions(appended, page_size=160):
    """The positions of ``appended`` (deterministic): from a clean run."""
    reactor = InlineReactor()
    store = open_store(FaultyFiles(), reactor=reactor, page_size=page_size)
    outcomes = [Outcome(store.append(p, sync=True)) for p in appended]
    settle(reactor)
    return [o.result for o in outcomes]


def check_after_crash(files, appended, durable, cursor, label):
    """Prefix consistency: the recovered records after the cursor are a
    prefix of those appended after it, in order, each once, and include
    every record confirmed as synced."""
    positions_all = reference_positions(appended)
    by_position = dict(zip(positions_all, appended, strict=True))
    recovered = open_store(files, cursor)
    got = read_all(recovered)
    positions = [pos for pos, _p in got]
    expected = [p for p in positions_all if cursor is None or p > cursor]
    assert positions == expected[: len(positions)], label
    assert all(by_position[pos] == p for pos, p in got), label
    must = {p for p in durable if cursor is None or p > cursor}
    assert must <= set(positions), (label, sorted(must - set(positions)))
    assert recovered.pending_count == len(got)
    # No page wholly at or before the cursor survives the load.
    for name in page_files(files):
        number = int(name.split(".")[0])
        assert cursor is None or number >= cursor.page, label
    return recovered


def test_power_loss_at_every_operation_loses_only_unsynced_records():
    reference = FaultyFiles()
    run_workload(reference)
    total_ops = reference.ops
    assert total_ops > 100
    kinds = {line.split()[1] for line in reference.log}
    assert {"create", "write", "fsync", "sync_directory", "remove"} <= kinds
    for crash_at in range(1, total_ops + 2):
        files = FaultyFiles()
        files.crash_at_op = crash_at
        appended, durable, cursor, _store = run_workload(files)
        for keep in (False, True):
            check_after_crash(files.crash(keep_unsynced=keep), appended, durable, cursor, (crash_at, keep))


def test_torn_write_keeps_only_a_prefix():
    reference = FaultyFiles()
    run_workload(reference)
    torn_seen = 0
    for n in range(1, reference.writes + 1):
        for keep in (0, 1, 7, RECORD_OVERHEAD + 3):
            files = FaultyFiles()
            files.torn_write = (n, keep)
            appended, durable, cursor, _store = run_workload(files)
            recovered = check_after_crash(
                files.crash(keep_unsynced=True), appended, durable, cursor, (n, keep)
            )
            torn_seen += recovered.recovery.torn_tail is not None
    assert torn_seen > 0


# -- failures --------------------------------------------------------------------------------


def test_fsync_failure_errbacks_pending_and_later_appends():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=1 << 20)
    ok = Outcome(store.append(b"before", sync=True))
    settle(reactor)
    assert ok.result == PagePosition(1, 0)
    files.fail_fsync = errno.EIO
    pending = [Outcome(store.append(payload(i), sync=i == 0)) for i in range(3)]
    settle(reactor)
    for o in pending:
        assert o.failure is not None and o.failure.check(PageStoreFailedError)
    message = str(pending[0].failure.value)
    assert "fsync failed on 00000000000000000001.page" in message
    assert "Errno 5" in message and "orders.eu" in message
    assert store.failed and store.failure is pending[0].failure.value
    later = Outcome(store.append(b"after", sync=False))
    assert later.failure.check(PageStoreFailedError)
    with pytest.raises(PageStoreFailedError):
        store.read(1, 1)
    assert Outcome(store.stop()).done
    # Only the synced record is on disk after a crash.
    recovered = open_store(files.crash())
    assert [p for _pos, p in read_all(recovered)] == [b"before"]


def test_fsync_failure_when_creating_a_page():
    files = FaultyFiles()
    files.fail_fsync = errno.EIO
    store = open_store(files)
    o = Outcome(store.append(b"x", sync=False))  # even a non-sync record
    settle(store._reactor)
    assert o.failure.check(PageStoreFailedError)
    assert "fsync failed on 00000000000000000001.page" in str(o.failure.value)


def test_disk_full_errbacks():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=1 << 20)
    files.space = 200
    outcomes = [Outcome(store.append(payload(i, 50), sync=False)) for i in range(10)]
    settle(reactor)
    assert all(o.failure is not None and o.failure.check(PageStoreFailedError) for o in outcomes)
    assert "No space left" in str(outcomes[0].failure.value)


def test_failure_during_stop_still_fires_stop():
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=1 << 20)
    store.append(b"x", sync=False)
    settle(reactor)
    o = Outcome(store.append(b"y", sync=False))
    files.fail_fsync = errno.EIO
    stopped = Outcome(store.stop())
    assert stopped.done and stopped.failure is None
    assert o.failure is None or o.failure.check(PageStoreFailedError)
    assert store.failed


# -- the threaded writer ------------------------------------------------------------------------


def test_threaded_writer_round_trip_on_real_files(tmp_path):
    reactor = ThreadReactor()
    address = "Orders/EU *"
    store = PageStore(tmp_path, address, reactor=reactor, page_size_bytes=4096)
    store.load(None)
    store.start()
    n = 600
    outcomes = [Outcome(store.append(payload(i, 50 + i % 100), sync=True)) for i in range(n)]
    reactor.pump_until(lambda: all(o.done for o in outcomes))
    assert all(o.failure is None for o in outcomes)
    stats = store.stats()
    assert stats["syncs"] < n  # group commit
    folder = tmp_path / address_dir_name(address)
    assert store.path == str(folder)
    assert len([n for n in os.listdir(folder) if n.endswith(".page")]) > 5
    got = store.read(250, 1 << 30)
    store.consumed(got[-1][0])
    stopped = Outcome(store.stop())
    reactor.pump_until(lambda: stopped.done)
    assert stopped.failure is None and store._writer.thread is None
    assert find_paged_addresses(tmp_path) == {address: str(folder)}
    again = PageStore(tmp_path, address, reactor=ThreadReactor(), page_size_bytes=4096)
    again.load(got[-1][0])
    assert again.pending_count == n - 250
    rest = read_all(again, chunk=33)
    assert [p for _pos, p in rest] == [payload(i, 50 + i % 100) for i in range(250, n)]
    assert Outcome(again.stop()).done


def test_threaded_writer_reads_while_writing_and_deletes_pages(tmp_path):
    reactor = ThreadReactor()
    files = OSFiles(str(tmp_path / "p"))
    store = open_store(files, reactor=reactor, writer="thread", page_size=512)
    got = []
    outcomes = []
    for i in range(400):
        outcomes.append(Outcome(store.append(payload(i, 40), sync=i % 2 == 0)))
        if i % 10 == 9:
            batch = store.read(8, 1 << 20)
            got.extend(batch)
            if batch:
                store.consumed(batch[-1][0])
    reactor.pump_until(lambda: all(o.done for o in outcomes))
    got.extend(read_all(store))
    store.consumed(got[-1][0])
    assert [p for _pos, p in got] == [payload(i, 40) for i in range(400)]
    stopped = Outcome(store.stop())
    reactor.pump_until(lambda: stopped.done)
    assert len(page_files(files)) == 1  # only the last (current) page
    assert not store.paging


def test_threaded_writer_fsync_failure(tmp_path):
    reactor = ThreadReactor()
    files = FaultyFiles()
    store = open_store(files, reactor=reactor, writer="thread")
    first = Outcome(store.append(b"a", sync=True))
    reactor.pump_until(lambda: first.done)
    files.fail_fsync = errno.EIO
    outcomes = [Outcome(store.append(payload(i), sync=True)) for i in range(20)]
    reactor.pump_until(lambda: all(o.done for o in outcomes))
    assert first.failure is None
    assert all(o.failure.check(PageStoreFailedError) for o in outcomes)
    assert Outcome(store.stop()).done
    assert store._writer.thread is None


def test_find_paged_addresses(tmp_path):
    assert find_paged_addresses(tmp_path / "missing") == {}
    for address in ("a.b", "Upper", "x" * 300):
        reactor = InlineReactor()
        store = PageStore(tmp_path, address, reactor=reactor, writer="inline", page_size_bytes=4096)
        store.load(None)
        store.start()
        store.append(b"1", sync=True)
        settle(reactor)
        assert store.stats()["batches"] == 1
    (tmp_path / "stray-file").write_text("not a folder")
    (tmp_path / "empty").mkdir()
    found = find_paged_addresses(tmp_path)
    assert sorted(found) == sorted(["a.b", "Upper", "x" * 300])
    assert found["x" * 300].endswith(address_dir_name("x" * 300))
    # A single page torn at creation: the name comes from the folder name.
    folder = tmp_path / address_dir_name("Upper")
    (folder / page_file_name(1)).write_bytes(b"JNC")
    assert "Upper" in find_paged_addresses(tmp_path)
    # A hashed folder name cannot stand in for an unreadable header.
    hashed = tmp_path / address_dir_name("x" * 300)
    (hashed / page_file_name(1)).write_bytes(b"JNC")
    with pytest.raises(PageCorruptionError, match="readable header"):
        find_paged_addresses(tmp_path)


# -- random interleavings ------------------------------------------------------------------------

_ops = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 120), st.booleans()),
    st.tuples(st.just("append"), st.integers(0, 120), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 6), st.integers(0, 300)),
    st.tuples(st.just("consume"), st.integers(0, 10)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("rewind")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash"), st.booleans()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_ops, max_size=60),
    page_size=st.sampled_from([64, 150, 400, 1 << 16]),
    tail_cache=st.sampled_from([0, 100, 1 << 20]),
    read_ahead=st.sampled_from([1, 64, 1 << 18]),
)
def test_random_interleavings_keep_order_and_exactly_once(ops, page_size, tail_cache, read_ahead):
    with mock.patch.object(paging, "TAIL_CACHE_BYTES", tail_cache), mock.patch.object(
        paging, "READ_AHEAD_BYTES", read_ahead
    ):
        _interleave(ops, page_size)


def _interleave(ops, page_size):
    files = FaultyFiles()
    reactor = InlineReactor()
    store = open_store(files, reactor=reactor, page_size=page_size)
    # The model: records after the cursor, in order: [position or None, payload].
    model: list = []
    read_upto = 0  # model[:read_upto] were read and are not consumed
    cursor = None
    durable: set = set()
    counter = 0

    def on_written(position, entry, sync):
        entry[0] = position
        if sync:
            durable.add(position)

    def reopen(new_files):
        nonlocal store, reactor, files, read_upto
        files = new_files
        reactor = InlineReactor()
        store = open_store(files, cursor, reactor=reactor, page_size=page_size)
        read_upto = 0

    for op in ops:
        kind = op[0]
        if kind == "append":
            counter += 1
            data = payload(counter, op[1])
            entry = [None, data]
            model.append(entry)
            store.append(data, sync=op[2]).addCallback(on_written, entry, op[2])
        elif kind == "read":
            got = store.read(op[1], op[2])
            expected = []
            total = 0
            for _pos, data in model[read_upto:]:
                if len(expected) == op[1] or (expected and total + len(data) > op[2]):
                    break
                expected.append(data)
                total += len(data)
            assert [p for _pos, p in got] == expected
            for k, (pos, _data) in enumerate(got):
                entry = model[read_upto + k]
                assert entry[0] is None or entry[0] == pos
                entry[0] = pos
                assert cursor is None or pos > cursor
            read_upto += len(got)
        elif kind == "consume":
            if read_upto:
                j = op[1] % read_upto
                position = model[j][0]
                store.consumed(position)
                cursor = position
                del model[: j + 1]
                read_upto -= j + 1
        elif kind == "flush":
            settle(reactor)
            # Files: exactly the pages of unconsumed records, plus the current one.
            expected_pages = {e[0].page for e in model if e[0] is not None}
            cur = store.stats()["current_page"]
            if cur is not None:
                expected_pages.add(cur)
            assert page_files(files) == [page_file_name(p) for p in sorted(expected_pages)]
        elif kind == "rewind":
            store.rewind()
            read_upto = 0
        elif kind == "restart":
            settle(reactor)
            assert Outcome(store.stop()).done
            reopen(files)
        elif kind == "crash":
            after = files.crash(keep_unsynced=op[1])
            reopen(after)
            got = read_all(store)
            store.rewind()
            # A prefix of the records after the cursor, holding every durable one.
            assert [p for _pos, p in got] == [e[1] for e in model[: len(got)]]
            for (pos, _p), entry in zip(got, model, strict=False):
                assert entry[0] is None or entry[0] == pos
            lost = model[len(got) :]
            assert not any(e[0] in durable for e in lost if e[0] is not None)
            model = [[pos, p] for pos, p in got]
        assert store.pending_count == len(model)
        assert store.pending_bytes == sum(len(e[1]) for e in model)
        assert store.paging == bool(model)
    # Finally everything left is read back exactly once, in order, after a restart.
    settle(reactor)
    assert Outcome(store.stop()).done
    reopen(files)
    got = read_all(store)
    assert [p for _pos, p in got] == [e[1] for e in model]
    positions = [pos for pos, _p in got]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert cursor is None or not positions or positions[0] > cursor
