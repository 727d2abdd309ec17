"""The journal's files: segment names and sizes, and the one invariant recovery needs.

Segments are named ``journal-<16-digit sequence>.jnl`` (:func:`data_name`);
each starts with a header (magic, format version, its sequence; see
:mod:`.records`).  A segment holds up to ``file_size`` bytes
(:data:`DEFAULT_FILE_SIZE` 10 MiB, Artemis's ``journal-file-size``); a record
that does not fit in the rest of the current segment starts the next one.  A
record bigger than a whole segment gets a segment of its own (an *oversize
segment*, which simply exceeds ``file_size``); payloads over
:data:`.records.MAX_PAYLOAD_SIZE` (64 MiB) are rejected with
:class:`.records.RecordTooLargeError`.  A compacted file, which stands for a
prefix of the segments, is ``journal-<16-digit sequence>.cjnl``
(:func:`compacted_name`, see :mod:`.compaction`); a file being prepared has
:data:`TMP_SUFFIX` appended until it is complete and synced.

New segments are preallocated by default: filled with zeros to
``file_size`` and synced before use, so later ``fdatasync`` calls need not
update the file size in the file-system journal (measured on ext4: about
90 us instead of 140 us per 4 KiB sync).  Zero-filling 10 MiB costs ~11 ms,
so a background thread (:class:`.groupcommit.Preallocator`) prepares the next segment as
``journal-<seq>.jnl.tmp`` while the current one fills; the switch then only
writes the header, syncs, renames and syncs the directory.  (``posix_fallocate``
is no substitute: ext4 still converts the unwritten extents at each sync.)

Before the writer moves on to a new segment it fsyncs the old one (even for
non-sync records and with ``sync=False``).  So **only the last segment can
ever have a torn tail**; every earlier segment is complete.  Recovery
(:mod:`.recovery`) relies on this invariant.
"""

from __future__ import annotations

import re

__all__ = [
    "DEFAULT_FILE_SIZE",
    "MIN_FILE_SIZE",
    "FILE_PREFIX",
    "DATA_SUFFIX",
    "COMPACTED_SUFFIX",
    "TMP_SUFFIX",
    "NAME_RE",
    "data_name",
    "compacted_name",
]

#: Segment size, Artemis ``journal-file-size`` default.
DEFAULT_FILE_SIZE = 10 * 1024 * 1024
#: Smallest segment size accepted (tests use tiny segments).
MIN_FILE_SIZE = 256

FILE_PREFIX = "journal-"
DATA_SUFFIX = ".jnl"
COMPACTED_SUFFIX = ".cjnl"
TMP_SUFFIX = ".tmp"
#: A segment or compacted file: group 1 its sequence, group 2 ``jnl`` or ``cjnl``.
NAME_RE = re.compile(r"^journal-(\d{16})\.(jnl|cjnl)$")


def data_name(seq: int) -> str:
    """The name of segment ``seq``."""
    return f"{FILE_PREFIX}{seq:016d}{DATA_SUFFIX}"


def compacted_name(seq: int) -> str:
    """The name of the compacted file that ends at segment ``seq``."""
    return f"{FILE_PREFIX}{seq:016d}{COMPACTED_SUFFIX}"
