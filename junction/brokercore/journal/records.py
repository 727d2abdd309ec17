"""The journal's on-disk format: file headers, records, and a scanner.

Everything here is pure (bytes in, bytes or tuples out): no files, no clock,
no threads, so it is tested exhaustively on byte strings.

File layout
===========

A journal directory holds *segment files*.  Every file starts with a
:data:`FILE_HEADER_SIZE` (48) byte header, then records back to back, then
(when the file was preallocated) zero bytes up to the segment size::

    offset size  field (all integers big-endian)
    0      8     magic  b"JNCJRNL\\x01"
    8      2     format version (:data:`FORMAT_VERSION`, 1)
    10     2     flags: bit 0 = compacted file (holds the folded state of
                 the files first_seq..file_seq, see journal.py)
    12     4     reserved, 0
    16     8     file sequence number (strictly increasing per new file)
    24     8     first sequence covered (== file sequence unless compacted)
    32     8     id watermark: every id the journal had handed out or
                 reserved when the file was created is <= this
    40     4     CRC32 (zlib.crc32) of bytes 0..40
    44     4     reserved, 0

Every record::

    offset size  field
    0      1     record magic :data:`RECORD_MAGIC` (0xA5, doubles as the
                 record format version; a 0 byte here means "no more records")
    1      1     kind (:class:`Kind`)
    2      1     user type (0..255, chosen by the broker: message, queue
                 reference, ack, binding, duplicate id ...)
    3      1     flags, reserved, 0
    4      4     low 32 bits of the sequence number of the file the record was
                 written to: a record copied or left over from another file
                 never passes as belonging to this one
    8      8     transaction id (0 for non-transactional kinds)
    16     8     record id
    24     4     payload length n (<= :data:`MAX_PAYLOAD_SIZE`)
    28     n     payload
    28+n   4     CRC32 of bytes 0..28+n (header and payload)

So a record costs :data:`RECORD_OVERHEAD` (32) bytes plus its payload.  The
CRC framing of headers and records is :mod:`.framing`, shared with the page
store's format.

A scanner reading a file stops at the first position that does not hold a
valid record.  What that means (end of data, torn tail, corruption) is decided
by the journal, which knows whether the file is the last one.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import NamedTuple

from .framing import (
    CRC_STRUCT,
    MAX_PAYLOAD_SIZE,
    check_sealed,
    crc_matches,
    crc_trailer,
    find_next,
    seal,
)

__all__ = [
    "Kind",
    "FILE_MAGIC",
    "FORMAT_VERSION",
    "FILE_HEADER_SIZE",
    "RECORD_MAGIC",
    "RECORD_HEADER_SIZE",
    "RECORD_HEADER_STRUCT",
    "CRC_STRUCT",
    "RECORD_OVERHEAD",
    "MAX_PAYLOAD_SIZE",
    "MAX_USER_TYPE",
    "MAX_ID",
    "FLAG_COMPACTED",
    "FileHeader",
    "FormatError",
    "RecordTooLargeError",
    "ScanResult",
    "encode_record",
    "encode_file_header",
    "decode_file_header",
    "scan_records",
    "find_next_record",
]


class Kind(IntEnum):
    """What a record does.  The numbers are part of the on-disk format."""

    ADD = 1
    UPDATE = 2
    DELETE = 3
    ADD_TX = 4
    UPDATE_TX = 5
    DELETE_TX = 6
    COMMIT = 7
    ROLLBACK = 8
    #: Internal: the id generator reserved every id <= record_id.
    ID_MARK = 9


_MAX_KIND = max(Kind)

FILE_MAGIC = b"JNCJRNL\x01"
FORMAT_VERSION = 1
FLAG_COMPACTED = 0x0001
_FILE_HEADER = struct.Struct(">8sHHIQQQ")
_CRC = CRC_STRUCT
#: Size of a segment file header.
FILE_HEADER_SIZE = 48

#: First byte of every record; a 0 byte at a record position means "end".
RECORD_MAGIC = 0xA5
_RECORD_HEADER = struct.Struct(">BBBBIQQI")
#: The record header layout (public for the journal's inlined encoder).
RECORD_HEADER_STRUCT = _RECORD_HEADER
RECORD_HEADER_SIZE = _RECORD_HEADER.size  # 28
#: Bytes a record costs on disk besides its payload (header + CRC).
RECORD_OVERHEAD = RECORD_HEADER_SIZE + 4
# MAX_PAYLOAD_SIZE (64 MiB, the largest payload of one record) and the CRC
# trailer layout CRC_STRUCT come from .framing, shared with the page store.
#: User types are one byte.
MAX_USER_TYPE = 0xFF
#: Record and transaction ids are unsigned 64-bit.
MAX_ID = (1 << 64) - 1


class FormatError(ValueError):
    """A file header or record is not in this module's format."""


class RecordTooLargeError(ValueError):
    """A payload exceeds :data:`MAX_PAYLOAD_SIZE`."""


class FileHeader(NamedTuple):
    seq: int
    first_seq: int
    id_watermark: int
    compacted: bool


def encode_file_header(
    seq: int, *, first_seq: int | None = None, id_watermark: int = 0, compacted: bool = False
) -> bytes:
    """The 48-byte header that opens segment file number ``seq``."""
    body = _FILE_HEADER.pack(
        FILE_MAGIC,
        FORMAT_VERSION,
        FLAG_COMPACTED if compacted else 0,
        0,
        seq,
        seq if first_seq is None else first_seq,
        id_watermark,
    )
    return body + crc_trailer(body) + b"\x00\x00\x00\x00"


def decode_file_header(data) -> FileHeader:
    """Parse a file header; :class:`FormatError` says precisely what is wrong."""
    if len(data) < FILE_HEADER_SIZE:
        raise FormatError(f"file header truncated ({len(data)} of {FILE_HEADER_SIZE} bytes)")
    body = bytes(data[: _FILE_HEADER.size])
    magic, version, flags, _reserved, seq, first_seq, watermark = _FILE_HEADER.unpack(body)
    if magic != FILE_MAGIC:
        raise FormatError(f"not a junction journal file (magic {magic!r})")
    if not crc_matches(data, 0, _FILE_HEADER.size):
        raise FormatError("file header CRC mismatch")
    if version != FORMAT_VERSION:
        raise FormatError(
            f"journal format version {version} is not supported (this is {FORMAT_VERSION})"
        )
    return FileHeader(seq, first_seq, watermark, bool(flags & FLAG_COMPACTED))


def encode_record(
    kind: int, file_seq: int, tx_id: int, record_id: int, user_type: int, payload
) -> bytes:
    """Encode one record (header, payload, CRC) for file ``file_seq``.

    Hot path: called for every append on the reactor thread.  Argument
    ranges are checked by the journal's public methods; ``struct`` still
    rejects out-of-range integers here.
    """
    n = len(payload)
    if n > MAX_PAYLOAD_SIZE:
        raise RecordTooLargeError(
            f"record payload of {n} bytes exceeds the journal limit of {MAX_PAYLOAD_SIZE} bytes"
        )
    head = _RECORD_HEADER.pack(
        RECORD_MAGIC, kind, user_type, 0, file_seq & 0xFFFFFFFF, tx_id, record_id, n
    )
    return seal(head, payload)


class ScanResult(NamedTuple):
    """What :func:`scan_records` found in one file.

    ``records`` are ``(kind, tx_id, record_id, user_type, payload, offset,
    size)`` tuples in file order.  ``end`` is the offset just after the last
    valid record.  ``bad_reason`` is ``None`` when the records stopped cleanly
    (end of file, or a zero byte followed only by zeros); otherwise it says
    why the bytes at ``end`` are not a valid record.
    """

    records: list
    end: int
    bad_reason: str | None


def _check_at(mv: memoryview, pos: int, seq32: int) -> tuple[tuple | None, str | None]:
    """Decode the record at ``pos``: ``(record, None)`` or ``(None, reason)``."""
    size = len(mv)
    if pos + RECORD_OVERHEAD > size:
        return None, f"truncated record header ({size - pos} bytes left)"
    magic, kind, user_type, _flags, fseq, tx_id, record_id, n = _RECORD_HEADER.unpack_from(mv, pos)
    if magic != RECORD_MAGIC:
        return None, f"bad record magic 0x{magic:02x}"
    if not 1 <= kind <= _MAX_KIND:
        return None, f"unknown record kind {kind}"
    if fseq != seq32:
        return None, f"record belongs to file {fseq}, not this one"
    end, reason = check_sealed(mv, pos, pos + RECORD_HEADER_SIZE, n)
    if reason is not None:
        return None, reason
    payload = mv[pos + RECORD_HEADER_SIZE : end - 4].tobytes()
    return (kind, tx_id, record_id, user_type, payload, pos, end - pos), None


def scan_records(data, file_seq: int, start: int = FILE_HEADER_SIZE) -> ScanResult:
    """Read records from ``data`` (a whole file) starting at ``start``.

    Stops at the end of the data, at a zero byte where a record should begin
    (preallocated space), or at the first invalid record.  A zero byte
    followed by anything but zeros is reported as bad (``bad_reason``).
    """
    mv = memoryview(data)
    size = len(mv)
    seq32 = file_seq & 0xFFFFFFFF
    records = []
    pos = start
    unpack_from = _RECORD_HEADER.unpack_from
    crc_unpack = _CRC.unpack_from
    crc32 = zlib.crc32
    while pos < size:
        if mv[pos] == 0:
            rest = mv[pos:]
            if bytes(rest).count(0) == len(rest):
                return ScanResult(records, pos, None)
            return ScanResult(records, pos, "non-zero bytes after the end-of-data zero byte")
        # Fast path for a well-formed record; _check_at explains failures.
        if pos + RECORD_OVERHEAD <= size:
            magic, kind, user_type, _flags, fseq, tx_id, record_id, n = unpack_from(mv, pos)
            body_end = pos + RECORD_HEADER_SIZE + n
            if (
                magic == RECORD_MAGIC
                and 1 <= kind <= _MAX_KIND
                and fseq == seq32
                and n <= MAX_PAYLOAD_SIZE
                and body_end + 4 <= size
                and crc_unpack(mv, body_end)[0] == crc32(mv[pos:body_end])
            ):
                records.append(
                    (
                        kind,
                        tx_id,
                        record_id,
                        user_type,
                        mv[pos + RECORD_HEADER_SIZE : body_end].tobytes(),
                        pos,
                        body_end + 4 - pos,
                    )
                )
                pos = body_end + 4
                continue
        _record, reason = _check_at(mv, pos, seq32)
        return ScanResult(records, pos, reason or "invalid record")
    return ScanResult(records, pos, None)


def find_next_record(data, file_seq: int, start: int) -> int | None:
    """The offset of the next valid record at or after ``start``, if any.

    Used after a bad record: in the last file to tell a plain torn tail from
    damage followed by intact records, and by the ``skip`` corruption policy
    to resynchronise.  Cost is linear in the bytes searched (the magic byte
    and file number filter candidates before a CRC is computed).
    """
    mv = memoryview(data)
    seq32 = file_seq & 0xFFFFFFFF
    return find_next(data, RECORD_MAGIC, start, lambda pos: _check_at(mv, pos, seq32)[0] is not None)
