"""The master broker's configuration change record (Sun Message Queue's, seed 003).

The cluster's persistent entities -- administrators' destinations and durable
subscriptions -- may be created or destroyed on any node.  With a master
broker configured, each change is recorded by the master first; every node
linked to it hears of the change at once, and a node that was offline reads
the record when it links again and catches up (creating what it lacks,
destroying what was destroyed meanwhile).  While the master is unreachable
such changes are refused; sending and receiving go on.

The record keeps the last change of each entity (``kind``, queue name) in one
append-only file, one JSON line per change behind a CRC-32, synced before a
change is acknowledged; a torn last line (a crash mid-write) is ignored.  The
file is rewritten without superseded lines once they are most of it.
"""

from __future__ import annotations

import json
import logging
import os
import zlib

log = logging.getLogger("junction.cluster")

#: entities (live or destroyed) the record keeps; changes beyond are refused
MAX_RECORD_ENTRIES = 100_000
#: the record's file, in the master's journal directory
RECORD_FILE = "cluster-change-record"


class ChangeRecordFull(Exception):
    pass


class ChangeRecord:
    """Entity (kind, name) -> the last change ``{"seq", "op", "entity"}``, persisted."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, RECORD_FILE)
        self.entries: dict = {}
        self.seq = 0
        self._lines = 0

    def load(self) -> None:
        self.entries.clear()
        self._lines = 0
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return
        for raw in data.split(b"\n"):
            if not raw:
                continue
            crc, _, body = raw.partition(b" ")
            try:
                if int(crc, 16) != zlib.crc32(body):
                    raise ValueError("CRC mismatch")
                entry = json.loads(body)
            except ValueError:
                log.warning("cluster change record %s: a damaged line was ignored (a torn write?)", self.path)
                continue
            self._apply(entry)
            self._lines += 1

    def _apply(self, entry: dict) -> None:
        entity = entry["entity"]
        self.entries[(entity.get("kind", ""), entity["queue"])] = entry
        self.seq = max(self.seq, int(entry["seq"]))

    def record(self, op: str, entity: dict) -> dict:
        """Append and sync one change; returns its entry (with its sequence number)."""
        key = (entity.get("kind", ""), entity["queue"])
        if key not in self.entries and len(self.entries) >= MAX_RECORD_ENTRIES:
            raise ChangeRecordFull(f"the cluster change record holds {MAX_RECORD_ENTRIES} entities")
        entry = {"seq": self.seq + 1, "op": op, "entity": entity}
        body = json.dumps(entry, separators=(",", ":"), sort_keys=True).encode()
        line = b"%08x %s\n" % (zlib.crc32(body), body)
        with open(self.path, "ab") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self._apply(entry)
        self._lines += 1
        if self._lines > 64 and self._lines > 2 * len(self.entries):
            self._compact()
        return entry

    def _compact(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as fh:
            for entry in sorted(self.entries.values(), key=lambda e: e["seq"]):
                body = json.dumps(entry, separators=(",", ":"), sort_keys=True).encode()
                fh.write(b"%08x %s\n" % (zlib.crc32(body), body))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self.entries)

    def all(self) -> list:
        return sorted(self.entries.values(), key=lambda e: e["seq"])


__all__ = ["ChangeRecord", "ChangeRecordFull", "MAX_RECORD_ENTRIES", "RECORD_FILE"]
