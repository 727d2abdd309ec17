"""Recovery: reading a journal directory back into its live state, repairing it.

:meth:`.journal.Journal.load` calls :func:`recover` once, at startup, before
the writer starts.  It finishes an interrupted compaction, reads every file
oldest first, folds the records (:class:`.fold.Fold`) into the live state
and fills the journal's run-time index (:class:`.index.Index`) on the way.

Recovery policy
===============

* In the **last** segment, the first invalid record (bad CRC, truncated,
  garbage) and everything after it are a torn tail: a write that a crash
  interrupted, which was never confirmed, because the confirmation of a
  record follows the sync of everything before it.  They are dropped and the
  file is truncated (and synced) there, reported in
  :attr:`RecoveredState.torn_tail`.  If intact records follow the damage
  (possible when a disk persisted the sectors of an unsynced batch out of
  order; or, rarely, bit rot in synced data) the report says so
  (``intact_records_after``), since that cannot be told from a torn tail.
* In any **earlier** segment an invalid record is corruption of data that was
  completely written and synced.  By default ``load()`` refuses to go on and
  raises :class:`JournalCorruptionError` naming the file, offset and reason:
  silently dropping a synced COMMIT or DELETE could resurrect or lose
  messages.  ``load(on_corruption="skip")`` is the operator's explicit
  choice to skip to the next intact record in that file and continue; every
  skipped range is reported in :attr:`RecoveredState.corruptions`.
* A last segment whose header is not intact was being created at the crash
  and holds nothing; it is removed.  Leftovers of an interrupted compaction
  are finished (see below).

Leftovers of a compaction (:mod:`.compaction`): a ``.tmp`` file is
removed (the segments it was built from are intact); a compacted file's
header names the first segment it covers, and every covered segment (or
older compacted file) still there is removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import JournalCorruptionError
from .files import truncate_durably
from .fold import Fold
from .index import FileInfo, Index
from .records import (
    FILE_HEADER_SIZE,
    FormatError,
    decode_file_header,
    find_next_record,
    scan_records,
)
from .segments import FILE_PREFIX, NAME_RE, TMP_SUFFIX

__all__ = ["RecoveredState", "TornTail", "Corruption", "Recovery", "recover"]


@dataclass
class TornTail:
    """The dropped end of the last segment (see the recovery policy above)."""

    file: str
    offset: int
    dropped_bytes: int
    reason: str
    #: Intact records were found after the damage: either an unsynced batch
    #: persisted out of order, or corruption inside synced data.
    intact_records_after: bool = False


@dataclass
class Corruption:
    """A range skipped under ``on_corruption="skip"``."""

    file: str
    offset: int
    skipped_bytes: int
    reason: str


@dataclass
class RecoveredState:
    """What :meth:`.journal.Journal.load` found."""

    #: Live records after the fold: ``{record_id: RecordInfo}``.
    records: dict = field(default_factory=dict)
    #: The first id :meth:`.journal.Journal.next_id` will return.
    next_id: int = 1
    #: Segment files read, oldest first.
    files: list = field(default_factory=list)
    #: Valid records read.
    records_read: int = 0
    torn_tail: TornTail | None = None
    corruptions: list = field(default_factory=list)
    #: Transactions without COMMIT/ROLLBACK, dropped: ``{tx_id: record count}``.
    dropped_transactions: dict = field(default_factory=dict)
    #: UPDATEs of records that were not live (ignored; Artemis logs these).
    orphan_updates: int = 0
    #: Files deleted while recovering: compaction leftovers, covered segments,
    #: a last segment without an intact header.
    removed_files: list = field(default_factory=list)
    #: Records deleted by the newest files (``load(tail_bytes=...)``), as
    #: ``(record_id, RecordInfo)``: what was settled just before the journal was
    #: last written, for a broker whose own record of it a crash may have lost.
    deleted_recently: list = field(default_factory=list)


class Recovery(NamedTuple):
    """What :func:`recover` hands back to the journal."""

    #: The report for the broker.
    state: RecoveredState
    #: Transactions without COMMIT/ROLLBACK: dropped from the index already;
    #: the journal writes a ROLLBACK for each when it starts, so that no later
    #: load or compaction carries them along.
    dropped_txs: list
    #: The highest id seen in a record or reserved by a file header's watermark.
    last_id: int
    #: The highest file sequence found (0 for an empty directory).
    last_seq: int


def recover(files, index: Index, on_corruption: str, tail_bytes: int) -> Recovery:
    """Read and repair the journal in ``files``, filling ``index`` (see the recovery policy).

    ``on_corruption`` is ``"raise"`` or ``"skip"``; with ``tail_bytes``, the
    records deleted by the newest files (the last ones whose sizes add up to
    at least ``tail_bytes``) are kept in :attr:`RecoveredState.deleted_recently`.
    """
    state = RecoveredState()
    removed = state.removed_files
    data_files: dict[int, str] = {}
    compacted: dict[int, tuple[str, int]] = {}
    for name in files.list():
        if name.startswith(FILE_PREFIX) and name.endswith(TMP_SUFFIX):
            files.remove(name)
            removed.append(name)
            continue
        m = NAME_RE.match(name)
        if not m:
            continue
        seq = int(m.group(1))
        if m.group(2) == "jnl":
            data_files[seq] = name
        else:
            try:
                header = decode_file_header(files.read(name, 0, FILE_HEADER_SIZE))
            except FormatError as exc:
                raise JournalCorruptionError(
                    f"journal file {name}: {exc} (a compacted file is synced before it gets "
                    f"its name, so this is corruption)",
                    name,
                    0,
                ) from None
            compacted[seq] = (name, header.first_seq)
    # Finish an interrupted compaction: drop whatever a compacted file covers.
    obsolete = []
    for seq, (_name, first) in compacted.items():
        obsolete += [s for s in data_files if first <= s <= seq]
        for other, (_oname, ofirst) in compacted.items():
            if other != seq and first <= ofirst and other <= seq:
                obsolete.append(("c", other))
    for item in set(obsolete):
        if isinstance(item, tuple):
            name = compacted.pop(item[1])[0]
        else:
            name = data_files.pop(item)
        files.remove(name)
        removed.append(name)
    order = sorted(
        [(seq, name, False) for seq, name in data_files.items()]
        + [(seq, name, True) for seq, (name, _f) in compacted.items()]
    )
    fold = Fold()
    watermark = 0
    last_seq = 0
    tail_from = len(order)
    while tail_bytes > 0 and tail_from > 0:
        tail_from -= 1
        tail_bytes -= files.size(order[tail_from][1])
    for position, (seq, name, is_compacted) in enumerate(order):
        last_seq = max(last_seq, seq)
        is_last = position == len(order) - 1
        if position == tail_from:
            fold.deleted = state.deleted_recently
        data = files.read(name)
        try:
            header = decode_file_header(data)
            if header.seq != seq or header.compacted != is_compacted:
                raise FormatError(
                    f"header says file {header.seq}, compacted={header.compacted}"
                )
        except FormatError as exc:
            if is_last and not is_compacted:
                # Being created at the crash: it holds nothing.
                files.remove(name)
                removed.append(name)
                if len(data):
                    state.torn_tail = TornTail(name, 0, len(data), str(exc))
                break
            raise JournalCorruptionError(f"journal file {name}: {exc}", name, 0) from None
        watermark = max(watermark, header.id_watermark)
        info = FileInfo(name, seq, header.first_seq, is_compacted)
        index.new_file(info)
        state.files.append(name)
        pos = FILE_HEADER_SIZE
        while True:
            result = scan_records(data, seq, pos)
            for kind, tx_id, record_id, user_type, payload, _off, size in result.records:
                fold.apply(kind, tx_id, record_id, user_type, payload)
                index.apply(kind, tx_id, record_id, seq, size)
            state.records_read += len(result.records)
            if result.bad_reason is None:
                break
            bad = result.end
            if is_last and not is_compacted:
                after = find_next_record(data, seq, bad + 1)
                state.torn_tail = TornTail(
                    name, bad, len(data) - bad, result.bad_reason, after is not None
                )
                truncate_durably(files, name, bad)
                break
            where = f"journal file {name} at offset {bad}: {result.bad_reason}"
            if on_corruption == "raise":
                raise JournalCorruptionError(
                    f"{where}; the file was completely written and synced before a later "
                    f"one was started, so this is corruption, not a torn write. Restore the "
                    f"journal from a backup, or load with on_corruption='skip' to drop the "
                    f"damaged records and keep the rest",
                    name,
                    bad,
                )
            nxt = find_next_record(data, seq, bad + 1)
            end = len(data) if nxt is None else nxt
            state.corruptions.append(Corruption(name, bad, end - bad, result.bad_reason))
            if nxt is None:
                break
            info.size += nxt - bad  # count the damage as dead bytes
            pos = nxt
    if removed:
        files.sync_directory()
    state.records = fold.records
    state.orphan_updates = fold.orphan_updates
    state.dropped_transactions = {tx: len(ops) for tx, ops in fold.txs.items()}
    # Uncommitted transactions are gone for good: their bytes are dead, and
    # the journal's start() writes a ROLLBACK for each so that no later load
    # or compaction carries them along.
    dropped_txs = list(index.txs)
    for tx in dropped_txs:
        index.drop_tx(tx)
    last_id = max(fold.max_id, watermark)
    state.next_id = last_id + 1
    return Recovery(state, dropped_txs, last_id, last_seq)
