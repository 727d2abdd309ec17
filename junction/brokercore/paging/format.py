"""The page files' on-disk format: names, header, records (pure functions).

Page files are named ``<20-digit page number>.page``; numbers only grow (a
new store continues above every page on disk *and* above the cursor it was
loaded with, so a new record can never sort at or before a committed
cursor).  Layout (integers big-endian)::

    page header
    0     8  magic b"JNCPAGE\\x01"
    8     2  format version (:data:`FORMAT_VERSION`, 1)
    10    2  address length L in UTF-8 bytes (<= :data:`MAX_ADDRESS_BYTES`)
    12    4  reserved, 0
    16    8  page number
    24    L  address, UTF-8
    24+L  4  CRC32 of bytes 0..24+L

    record (:data:`RECORD_OVERHEAD` = 20 bytes + payload)
    0     1  record magic 0xC3
    1     1  flags, reserved, 0
    2     2  reserved, 0
    4     4  low 32 bits of the page number (a record from another page
             never passes as this page's)
    8     4  index of the record in its page (0, 1, 2 ...: a record's
             PagePosition is (page number, index))
    12    4  payload length n (<= :data:`MAX_PAYLOAD_SIZE`, 64 MiB)
    16    n  payload
    16+n  4  CRC32 of bytes 0..16+n

(The header and record CRCs are framed as in the journal's format, by
:mod:`..journal.framing`.)

A page is closed and the next one started when a record would take it past
``page_size_bytes`` (Artemis ``page-size-bytes``, default
:data:`.store.DEFAULT_PAGE_SIZE` 10 MiB); a record bigger than a whole page gets a
page of its own.  Pages are not preallocated: they are written once, read
once and deleted.

Everything here is bytes in, bytes or tuples out: no files, no clock, no
threads.  What a bad header or record means (a torn tail, or corruption) is
decided by recovery (:mod:`.recovery`), which knows whether the page is the
last one.
"""

from __future__ import annotations

import re
import struct

from ..journal.framing import (
    CRC_SIZE,
    MAX_PAYLOAD_SIZE,
    check_sealed,
    crc_matches,
    crc_trailer,
    find_next,
    seal,
)

__all__ = [
    "FORMAT_VERSION",
    "PAGE_MAGIC",
    "RECORD_MAGIC",
    "PAGE_SUFFIX",
    "PAGE_NAME_RE",
    "PAGE_HEADER",
    "RECORD_HEADER",
    "RECORD_OVERHEAD",
    "MAX_PAYLOAD_SIZE",
    "MAX_ADDRESS_BYTES",
    "MAX_RECORDS_PER_PAGE",
    "MAX_PAGE_NUMBER",
    "address_bytes",
    "page_file_name",
    "encode_page_header",
    "decode_page_header",
    "encode_page_record",
    "check_record",
    "find_next_record",
]

# -- limits (all named) ------------------------------------------------------------------

#: Longest address accepted, in UTF-8 bytes (stored in every page header).
MAX_ADDRESS_BYTES = 4096
#: Records per page: the index is 32 bits on disk.
MAX_RECORDS_PER_PAGE = 0xFFFFFFFF
#: Largest page number (the on-disk field is 64 bits).
MAX_PAGE_NUMBER = (1 << 64) - 1

FORMAT_VERSION = 1
PAGE_MAGIC = b"JNCPAGE\x01"
RECORD_MAGIC = 0xC3
PAGE_SUFFIX = ".page"
#: A page file's name; group 1 is its page number.
PAGE_NAME_RE = re.compile(r"^(\d{20})\.page$")

#: The page header's fixed part: 24 bytes, then the address, then a CRC.
PAGE_HEADER = struct.Struct(">8sHHIQ")
#: A record's header: 16 bytes, then the payload, then a CRC.
RECORD_HEADER = struct.Struct(">BBHIII")
#: Bytes a record costs on disk besides its payload (header + CRC).
RECORD_OVERHEAD = RECORD_HEADER.size + CRC_SIZE


def address_bytes(address: str) -> bytes:
    """``address`` in UTF-8, checked (ValueError): non-empty, at most :data:`MAX_ADDRESS_BYTES`."""
    if not isinstance(address, str) or not address:
        raise ValueError("a paged address needs a non-empty name")
    try:
        raw = address.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"address {address!r} is not valid Unicode: {exc}") from None
    if len(raw) > MAX_ADDRESS_BYTES:
        raise ValueError(f"address of {len(raw)} UTF-8 bytes exceeds {MAX_ADDRESS_BYTES}")
    return raw


def page_file_name(page: int) -> str:
    """The name of page file ``page`` in its address folder."""
    return f"{page:020d}{PAGE_SUFFIX}"


def encode_page_header(page: int, address: str) -> bytes:
    """The header that opens page file ``page`` of ``address``."""
    raw = address_bytes(address)
    body = PAGE_HEADER.pack(PAGE_MAGIC, FORMAT_VERSION, len(raw), 0, page) + raw
    return body + crc_trailer(body)


def decode_page_header(data) -> tuple[int, str, int]:
    """``(page number, address, header size)``; ValueError says what is wrong."""
    if len(data) < PAGE_HEADER.size:
        raise ValueError(f"page header truncated ({len(data)} of at least {PAGE_HEADER.size} bytes)")
    magic, version, length, _reserved, page = PAGE_HEADER.unpack_from(data, 0)
    if magic != PAGE_MAGIC:
        raise ValueError(f"not a junction page file (magic {bytes(magic)!r})")
    if length > MAX_ADDRESS_BYTES:
        raise ValueError(f"page header address length {length} exceeds the limit")
    end = PAGE_HEADER.size + length
    if len(data) < end + CRC_SIZE:
        raise ValueError(f"page header truncated ({len(data)} of {end + CRC_SIZE} bytes)")
    if not crc_matches(data, 0, end):
        raise ValueError("page header CRC mismatch")
    if version != FORMAT_VERSION:
        raise ValueError(f"page format version {version} is not supported (this is {FORMAT_VERSION})")
    try:
        address = bytes(data[PAGE_HEADER.size : end]).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("page header address is not UTF-8") from None
    return page, address, end + CRC_SIZE


def encode_page_record(page: int, index: int, payload: bytes) -> bytes:
    """One record (header, payload, CRC) for position ``(page, index)``."""
    head = RECORD_HEADER.pack(RECORD_MAGIC, 0, 0, page & 0xFFFFFFFF, index, len(payload))
    return seal(head, payload)


def check_record(mv: memoryview, pos: int, page32: int, index: int | None):
    """Decode the record at ``pos``: ``(payload_len, end, None)`` or ``(0, 0, reason)``.

    ``index`` None accepts any index (used to look for intact records after
    damage).
    """
    size = len(mv)
    if pos + RECORD_OVERHEAD > size:
        return 0, 0, f"truncated record header ({size - pos} bytes left)"
    magic, _flags, _reserved, rpage, rindex, n = RECORD_HEADER.unpack_from(mv, pos)
    if magic != RECORD_MAGIC:
        return 0, 0, f"bad record magic 0x{magic:02x}"
    if rpage != page32:
        return 0, 0, f"record belongs to page {rpage}, not this one"
    if index is not None and rindex != index:
        return 0, 0, f"record index {rindex} where {index} was expected"
    end, reason = check_sealed(mv, pos, pos + RECORD_HEADER.size, n)
    if reason is not None:
        return 0, 0, reason
    return n, end, None


def find_next_record(data, page32: int, start: int) -> int | None:
    """The offset of the next intact record of the page at or after ``start``, or None."""
    mv = memoryview(data)
    return find_next(data, RECORD_MAGIC, start, lambda pos: check_record(mv, pos, page32, None)[2] is None)
