"""The broker core's persistent journal.

Append-only segment files with a CRC per record, group commit on a writer
thread (a durable send is confirmed only after its record is synced),
transactions, recovery that tolerates a torn tail, reclaiming and compaction
of dead space, and a file layer with a fault-injecting model for tests.

Typical use on a broker node::

    journal = Journal(data_dir, reactor=reactor)
    state = journal.load()          # synchronous, at startup
    journal.start()
    d = journal.append_add(journal.next_id(), USER_TYPE_MESSAGE, payload)
    d.addCallback(lambda _: confirm_to_client())

The modules, each with one job (lower ones first):

* :mod:`.framing`, :mod:`.records` -- the on-disk format (pure functions);
* :mod:`.segments` -- file names and sizes, and the invariant recovery needs;
* :mod:`.files` -- the file layer: the real one and the fault-injecting model;
* :mod:`.errors` -- what a caller can be refused with;
* :mod:`.fold` -- what the records mean, and the contract on record ids;
* :mod:`.index` -- run-time accounting of live and dead bytes per file;
* :mod:`.groupcommit` -- the writer thread and its batches (shared with paging);
* :mod:`.recovery` -- reading the directory back at startup, repairing it;
* :mod:`.compaction` -- folding the oldest segments into one file;
* :mod:`.journal` -- the :class:`Journal` that ties them together.
"""

from .compaction import COMPACT_MIN_FILES, COMPACT_PERCENTAGE
from .errors import (
    DuplicateRecordError,
    JournalClosedError,
    JournalCorruptionError,
    JournalError,
    JournalFailedError,
    JournalStateError,
    UnknownRecordError,
)
from .files import FaultyFiles, OSFiles, SimulatedCrash
from .fold import RecordInfo
from .journal import DEFAULT_BUFFER_TIMEOUT_NS, ID_BLOCK_SIZE, MAX_PENDING_BYTES, Journal
from .records import MAX_PAYLOAD_SIZE, RECORD_OVERHEAD, Kind, RecordTooLargeError
from .recovery import Corruption, RecoveredState, TornTail
from .segments import DEFAULT_FILE_SIZE, MIN_FILE_SIZE

__all__ = [
    "Journal",
    "RecoveredState",
    "RecordInfo",
    "TornTail",
    "Corruption",
    "Kind",
    "JournalError",
    "JournalFailedError",
    "JournalCorruptionError",
    "JournalStateError",
    "JournalClosedError",
    "UnknownRecordError",
    "DuplicateRecordError",
    "RecordTooLargeError",
    "OSFiles",
    "FaultyFiles",
    "SimulatedCrash",
    "DEFAULT_FILE_SIZE",
    "MIN_FILE_SIZE",
    "DEFAULT_BUFFER_TIMEOUT_NS",
    "MAX_PENDING_BYTES",
    "MAX_PAYLOAD_SIZE",
    "RECORD_OVERHEAD",
    "COMPACT_MIN_FILES",
    "COMPACT_PERCENTAGE",
    "ID_BLOCK_SIZE",
]
