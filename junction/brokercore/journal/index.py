"""The journal's run-time accounting: which records are live, and where.

Appends update an :class:`Index` on the reactor thread with the fold's rules
(:mod:`.fold`) applied to byte counts instead of payloads: per file
(:class:`FileInfo`) how many of its bytes still matter, per live record where
its ADD and UPDATEs are, per open transaction its records.  From it the
journal refuses ids it must not add again, removes the oldest files once they
hold nothing live (reclaiming) and decides when to compact
(:mod:`.compaction`); recovery (:mod:`.recovery`) fills it while it reads the
files.
"""

from __future__ import annotations

from .fold import ADD, ADD_TX, COMMIT, DELETE, ROLLBACK, TX_KINDS, UPDATE, UPDATE_TX
from .records import FILE_HEADER_SIZE

__all__ = ["FileInfo", "Index"]

#: The size part of a location (``seq << 32 | size``).
_SIZE_MASK = 0xFFFFFFFF


class FileInfo:
    """Run-time accounting of one segment (or compacted file)."""

    __slots__ = ("name", "seq", "first_seq", "compacted", "size", "live", "seqs")

    def __init__(self, name: str, seq: int, first_seq: int, compacted: bool):
        self.name = name
        self.seq = seq
        self.first_seq = first_seq
        self.compacted = compacted
        #: Bytes used, header included.
        self.size = FILE_HEADER_SIZE
        #: Bytes of records that still matter.
        self.live = 0
        #: Sequence numbers whose records now live in this file (a compacted
        #: file answers for every segment it replaced).
        self.seqs = [seq]

    @property
    def dead(self) -> int:
        return self.size - FILE_HEADER_SIZE - self.live


class Index:
    """Live/dead byte accounting, with the fold's rules, on the reactor thread.

    A location is ``seq << 32 | size``: the record of ``size`` bytes in file
    ``seq`` (``size`` < 2**32 by :data:`.records.MAX_PAYLOAD_SIZE`).  A live record
    maps to its one location as a plain int, or to a list once it has
    updates: ints are not tracked by the garbage collector, and with a large
    backlog of live records the collector's passes over one list per record
    cost more CPU than the journal itself.
    """

    __slots__ = ("files", "order", "live", "txs", "tx_refs", "dead_hint")

    def __init__(self):
        self.files: dict[int, FileInfo] = {}
        self.order: list[FileInfo] = []
        self.live: dict[int, int | list] = {}
        self.txs: dict[int, list] = {}
        #: Record id -> how many records of open transactions name it (the
        #: ids :meth:`.journal.Journal.append_add` must refuse).
        self.tx_refs: dict[int, int] = {}
        self.dead_hint = False

    def new_file(self, info: FileInfo) -> None:
        self.files[info.seq] = info
        self.order.append(info)

    def _kill(self, locations) -> None:
        if locations.__class__ is int:
            locations = (locations,)
        files = self.files
        for loc in locations:
            info = files[loc >> 32]
            info.live -= loc & _SIZE_MASK
            if not info.live:
                self.dead_hint = True

    def _attach(self, record_id: int, loc: int) -> bool:
        """Add an update's location to live record ``record_id``, if live."""
        locs = self.live.get(record_id)
        if locs is None:
            return False
        if locs.__class__ is int:
            self.live[record_id] = [locs, loc]
        else:
            locs.append(loc)
        return True

    def apply(self, kind: int, tx_id: int, record_id: int, seq: int, n: int) -> None:
        info = self.files[seq]
        info.size += n
        loc = seq << 32 | n
        if kind == ADD:
            old = self.live.get(record_id)
            if old is not None:
                self._kill(old)
            self.live[record_id] = loc
            info.live += n
        elif kind == UPDATE:
            if self._attach(record_id, loc):
                info.live += n
        elif kind == DELETE:
            locs = self.live.pop(record_id, None)
            if locs is not None:
                self._kill(locs)
        elif kind in TX_KINDS:
            ops = self.txs.get(tx_id)
            if ops is None:
                ops = self.txs[tx_id] = []
            ops.append((kind, record_id, loc))
            refs = self.tx_refs
            refs[record_id] = refs.get(record_id, 0) + 1
            info.live += n
        elif kind == COMMIT:
            ops = self.txs.pop(tx_id, ())
            self._unref(ops)
            for op_kind, rid, op_loc in ops:
                if op_kind == ADD_TX:
                    old = self.live.get(rid)
                    if old is not None:
                        self._kill(old)
                    self.live[rid] = op_loc
                elif op_kind == UPDATE_TX:
                    if not self._attach(rid, op_loc):
                        self._kill(op_loc)
                else:
                    locs = self.live.pop(rid, None)
                    if locs is not None:
                        self._kill(locs)
                    self._kill(op_loc)
        elif kind == ROLLBACK:
            self.drop_tx(tx_id)
        if not info.live:
            self.dead_hint = True

    def _unref(self, ops) -> None:
        refs = self.tx_refs
        for _k, rid, _loc in ops:
            count = refs[rid] - 1
            if count:
                refs[rid] = count
            else:
                del refs[rid]

    def drop_tx(self, tx_id: int) -> None:
        """Forget an open transaction (a ROLLBACK; recovery drops uncommitted ones)."""
        ops = self.txs.pop(tx_id, ())
        self._unref(ops)
        self._kill([op_loc for _k, _r, op_loc in ops])

    def replace_prefix(self, count: int, info: FileInfo) -> list[FileInfo]:
        """Make compacted file ``info`` stand for the oldest ``count`` files.

        Every live location in them has a record of the same size in the
        compacted file (re-encoding keeps sizes), so the live bytes carry
        over exactly and old locations simply alias the new file.
        """
        prefix = self.order[:count]
        info.live = sum(f.live for f in prefix)
        info.seqs = []
        for old in prefix:
            for s in old.seqs:
                self.files[s] = info
                info.seqs.append(s)
        self.order[:count] = [info]
        if not info.live:
            self.dead_hint = True
        return prefix

    def pop_oldest(self) -> FileInfo:
        info = self.order.pop(0)
        for s in info.seqs:
            if self.files.get(s) is info:
                del self.files[s]
        return info
