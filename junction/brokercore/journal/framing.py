"""CRC framing shared by the journal's format (:mod:`.records`) and the page
store's (:mod:`junction.brokercore.paging`).

The two formats differ in their fields, but they protect bytes the same way:

* a file header is a body followed by the CRC32 (``zlib.crc32``, big-endian)
  of that body;
* a record is a fixed header that starts with a one-byte record magic and
  ends with the payload length ``n``, then the ``n`` payload bytes, then the
  CRC32 of header and payload: :func:`seal` builds it, :func:`check_sealed`
  checks its length, presence and CRC once the format has checked its own
  header fields, and :func:`find_next` looks for the next intact record
  after damage.

Pure functions of bytes, like the formats themselves.
"""

from __future__ import annotations

import struct
import zlib

__all__ = [
    "CRC_STRUCT",
    "CRC_SIZE",
    "MAX_PAYLOAD_SIZE",
    "crc_trailer",
    "crc_matches",
    "seal",
    "check_sealed",
    "find_next",
]

#: The CRC trailer layout (big-endian CRC32).
CRC_STRUCT = struct.Struct(">I")
CRC_SIZE = CRC_STRUCT.size
#: Largest payload one record may carry (64 MiB), in either format.  Bigger
#: bodies belong in large-message files, as in Artemis; the limit also bounds
#: the memory a corrupt length field can make recovery allocate.
MAX_PAYLOAD_SIZE = 64 * 1024 * 1024

_crc32 = zlib.crc32
_pack_crc = CRC_STRUCT.pack
_unpack_crc = CRC_STRUCT.unpack_from


def crc_trailer(body) -> bytes:
    """The 4 bytes that follow ``body`` to protect it."""
    return _pack_crc(_crc32(body))


def crc_matches(data, start: int, end: int) -> bool:
    """The CRC stored at ``data[end:end+4]`` is that of ``data[start:end]``."""
    return _unpack_crc(data, end)[0] == _crc32(data[start:end])


def seal(head: bytes, payload) -> bytes:
    """A record: ``head``, ``payload``, and the CRC32 of both."""
    return b"".join((head, payload, _pack_crc(_crc32(payload, _crc32(head)))))


def check_sealed(mv: memoryview, pos: int, body_start: int, n: int) -> tuple[int, str | None]:
    """Check the record at ``pos`` whose header ends at ``body_start`` and
    announces ``n`` payload bytes: ``(end, None)``, or ``(0, reason)`` if the
    length exceeds the limit, the record runs past the data or its CRC fails."""
    if n > MAX_PAYLOAD_SIZE:
        return 0, f"record length {n} exceeds the limit"
    body_end = body_start + n
    end = body_end + CRC_SIZE
    if end > len(mv):
        return 0, f"truncated record ({len(mv) - pos} of {end - pos} bytes present)"
    if _unpack_crc(mv, body_end)[0] != _crc32(mv[pos:body_end]):
        return 0, "record CRC mismatch"
    return end, None


def find_next(data, magic: int, start: int, valid_at) -> int | None:
    """The first offset at or after ``start`` holding byte ``magic`` where
    ``valid_at(offset)`` is true (an intact record), or None.

    Used after a bad record: to tell a plain torn tail from damage followed
    by intact records, and to resynchronise.  Cost is linear in the bytes
    searched (the magic byte filters candidates before ``valid_at`` runs).
    """
    raw = data if isinstance(data, bytes) else bytes(data)
    marker = bytes((magic,))
    pos = start
    while True:
        pos = raw.find(marker, pos)
        if pos < 0:
            return None
        if valid_at(pos):
            return pos
        pos += 1
