"""XA packets: the JMS client's ``XAResource`` calls, one packet each, on the session's channel.

Every branch is named by an :class:`Xid` (``XidCodecSupport``: ``int32
formatId``, then the branch qualifier and the global transaction id, each
``int32 size`` + bytes).  The server answers START, END, COMMIT, PREPARE,
ROLLBACK, JOIN, SUSPEND, RESUME and FORGET with SESS_XA_RESP (an XA return
code, or an XAException's error code and text), INDOUBT_XIDS (``recover``)
with the prepared branches, and the timeout calls with their own responses.
"""

from __future__ import annotations

from dataclasses import dataclass

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.packets.base import (
    BOOL,
    INT,
    LONG,
    NULLABLE_STRING,
    Kind,
    Packet,
    packet,
    wire,
)

__all__ = [
    "SessXAAfterFailed",
    "SessXACommit",
    "SessXAEnd",
    "SessXAForget",
    "SessXAGetInDoubtXids",
    "SessXAGetInDoubtXidsResponse",
    "SessXAGetTimeout",
    "SessXAGetTimeoutResponse",
    "SessXAJoin",
    "SessXAPrepare",
    "SessXAResponse",
    "SessXAResume",
    "SessXARollback",
    "SessXASetTimeout",
    "SessXASetTimeoutResponse",
    "SessXAStart",
    "SessXASuspend",
    "Xid",
]

#: Fewest bytes one Xid takes: three int32s.
_MIN_XID_SIZE = 12


@dataclass(frozen=True, slots=True)
class Xid:
    """A transaction branch (``javax.transaction.xa.Xid``)."""

    format_id: int
    branch_qualifier: bytes
    global_transaction_id: bytes


def read_xid(r: Reader) -> Xid:
    format_id = r.read_int()
    return Xid(format_id, r.read_sized_bytes(), r.read_sized_bytes())


def write_xid(w: Writer, xid: Xid) -> None:
    w.write_int(xid.format_id)
    w.write_sized_bytes(xid.branch_qualifier)
    w.write_sized_bytes(xid.global_transaction_id)


def _read_xids(r: Reader) -> tuple[Xid, ...]:
    count = r.read_count(_MIN_XID_SIZE, "Xid")
    return tuple(read_xid(r) for _ in range(count))


def _write_xids(w: Writer, xids: tuple[Xid, ...]) -> None:
    w.write_int(len(xids))
    for xid in xids:
        write_xid(w, xid)


XID = Kind(read_xid, write_xid)
XIDS = Kind(_read_xids, _write_xids)


@packet(PacketType.SESS_XA_START, "client")
class SessXAStart(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_END, "client")
class SessXAEnd(Packet):
    """End the branch's work: ``failed`` is TMFAIL (else TMSUCCESS)."""

    xid: Xid = wire(XID)
    failed: bool = wire(BOOL)


@packet(PacketType.SESS_XA_COMMIT, "client")
class SessXACommit(Packet):
    xid: Xid = wire(XID)
    one_phase: bool = wire(BOOL)


@packet(PacketType.SESS_XA_PREPARE, "client")
class SessXAPrepare(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_ROLLBACK, "client")
class SessXARollback(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_JOIN, "client")
class SessXAJoin(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_SUSPEND, "client")
class SessXASuspend(Packet):
    """Suspend the session's current branch (TMSUSPEND)."""


@packet(PacketType.SESS_XA_RESUME, "client")
class SessXAResume(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_FORGET, "client")
class SessXAForget(Packet):
    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_FAILED, "client")
class SessXAAfterFailed(Packet):
    """The client marks a branch failed after a failover."""

    xid: Xid = wire(XID)


@packet(PacketType.SESS_XA_RESP, "server")
class SessXAResponse(Packet):
    """An XA call's outcome: ``response_code`` is an XA return code (XA_OK 0, XA_RDONLY 3),
    or with ``error`` an ``XAException`` error code and its text.  ``correlation_id``:
    the V2 form, for 130+ clients."""

    error: bool = wire(BOOL)
    response_code: int = wire(INT)
    message: str | None = wire(NULLABLE_STRING)
    correlation_id: int | None = wire(LONG, tail=True)


@packet(PacketType.SESS_XA_INDOUBT_XIDS, "client")
class SessXAGetInDoubtXids(Packet):
    """``XAResource.recover``: which branches are prepared?"""


@packet(PacketType.SESS_XA_INDOUBT_XIDS_RESP, "server")
class SessXAGetInDoubtXidsResponse(Packet):
    xids: tuple[Xid, ...] = wire(XIDS)


@packet(PacketType.SESS_XA_SET_TIMEOUT, "client")
class SessXASetTimeout(Packet):
    timeout_seconds: int = wire(INT)


@packet(PacketType.SESS_XA_SET_TIMEOUT_RESP, "server")
class SessXASetTimeoutResponse(Packet):
    ok: bool = wire(BOOL)


@packet(PacketType.SESS_XA_GET_TIMEOUT, "client")
class SessXAGetTimeout(Packet):
    pass


@packet(PacketType.SESS_XA_GET_TIMEOUT_RESP, "server")
class SessXAGetTimeoutResponse(Packet):
    timeout_seconds: int = wire(INT)
