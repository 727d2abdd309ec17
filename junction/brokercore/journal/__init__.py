"""The broker core's persistent journal (see :mod:`.journal` for the design).

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
"""

from .files import FaultyFiles, OSFiles, SimulatedCrash
from .journal import (
    COMPACT_MIN_FILES,
    COMPACT_PERCENTAGE,
    DEFAULT_BUFFER_TIMEOUT_NS,
    DEFAULT_FILE_SIZE,
    ID_BLOCK_SIZE,
    MAX_PENDING_BYTES,
    MIN_FILE_SIZE,
    Corruption,
    DuplicateRecordError,
    Journal,
    JournalClosedError,
    JournalCorruptionError,
    JournalError,
    JournalFailedError,
    JournalStateError,
    RecordInfo,
    RecoveredState,
    TornTail,
    UnknownRecordError,
)
from .records import MAX_PAYLOAD_SIZE, RECORD_OVERHEAD, Kind, RecordTooLargeError

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
