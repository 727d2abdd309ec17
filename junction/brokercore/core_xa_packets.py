"""The XA packets of a CORE session (``xa=true`` at CREATESESSION), against its
:class:`~junction.brokercore.xa.XaSession`.

Each call answers SESS_XA_RESP: XA_OK, or the ``XAException`` code and text of
a refused call (the client throws it as an ``XAException`` with that
``errorCode``) -- except the commit in a wrong phase, an EXCEPTION (ILLEGAL_STATE) as
Artemis answers it, and a prepare or commit of a branch marked rollback-only after a
failover, an EXCEPTION (GENERIC) with Artemis's words; SESS_XA_FAILED (the client names
the branch it failed over in) is confirmed and not answered, as by Artemis; recover answers SESS_XA_INDOUBT_XIDS_RESP, the timeout calls
their own responses.  A prepare and a commit answer once their journal write
is synced, in the session's answer order.
"""

from __future__ import annotations

import logging

from junction.brokercore.core_errors import CoreRefused
from junction.brokercore.xa import XA_OK, XAER_PROTO, XaError, XaInvalidState, XaRolledBack
from junction.protocols.core import ExceptionType, encode_packet
from junction.protocols.core import packets as p

__all__ = ["XaHandlers"]

log = logging.getLogger("junction.core")


def _key(xid: p.Xid) -> tuple:
    return (xid.format_id, xid.global_transaction_id, xid.branch_qualifier)


def _xid(key: tuple) -> p.Xid:
    format_id, gtrid, bqual = key
    return p.Xid(format_id, bqual, gtrid)


class XaHandlers:
    """The XA packets of a :class:`~junction.brokercore.core_sessions.CoreSession`."""

    __slots__ = ()

    def _xa_answer(self, packet, d=None, error: XaError | None = None) -> None:
        if error is None:
            answer = p.SessXAResponse(False, XA_OK, None, channel_id=self.channel)
        else:
            answer = p.SessXAResponse(True, error.code, str(error), channel_id=self.channel)
        self.confirm(packet, encode_packet(answer), d, counted=error is None)

    def _xa_call(self, packet, call) -> None:
        xa = self.xa
        if xa is None:
            self._xa_answer(packet, error=XaError(XAER_PROTO, "the session is not an XA session"))
            return
        try:
            d = call(xa)
        except XaError as exc:
            self._xa_answer(packet, error=exc)
            return
        except XaInvalidState as exc:
            self.tx = xa.tx
            raise CoreRefused(ExceptionType.ILLEGAL_STATE, str(exc)) from None
        except XaRolledBack as exc:
            self.tx = xa.tx
            raise CoreRefused(ExceptionType.GENERIC_EXCEPTION, str(exc)) from None
        self.tx = xa.tx
        self._xa_answer(packet, d)

    def _on_xa_start(self, packet: p.SessXAStart) -> None:
        self._xa_call(packet, lambda xa: xa.start(_key(packet.xid)))

    def _on_xa_end(self, packet: p.SessXAEnd) -> None:
        self._xa_call(packet, lambda xa: xa.end(_key(packet.xid), packet.failed))
        self._transaction_ended()

    def _on_xa_prepare(self, packet: p.SessXAPrepare) -> None:
        self._xa_call(packet, lambda xa: xa.prepare(_key(packet.xid)))

    def _on_xa_commit(self, packet: p.SessXACommit) -> None:
        self._xa_call(packet, lambda xa: xa.commit(_key(packet.xid), packet.one_phase))

    def _on_xa_rollback(self, packet: p.SessXARollback) -> None:
        # As Artemis's rollback: what the session's consumers hold and nobody acknowledged goes back too.
        if self.xa is not None and self.xa.current is None:
            for consumer in self.consumers.values():
                consumer.give_back()
        self._xa_call(packet, lambda xa: xa.rollback(_key(packet.xid)))

    def _on_xa_join(self, packet: p.SessXAJoin) -> None:
        self._xa_call(packet, lambda xa: xa.join(_key(packet.xid)))

    def _on_xa_suspend(self, packet: p.SessXASuspend) -> None:
        self._xa_call(packet, lambda xa: xa.suspend())

    def _on_xa_resume(self, packet: p.SessXAResume) -> None:
        self._xa_call(packet, lambda xa: xa.resume(_key(packet.xid)))

    def _on_xa_forget(self, packet: p.SessXAForget) -> None:
        self._xa_call(packet, lambda xa: xa.forget(_key(packet.xid)))

    def _on_xa_failed(self, packet: p.SessXAAfterFailed) -> None:
        # Artemis's handler: requiresResponse, and no response -- only the confirmation.
        if self.xa is not None:
            try:
                self.xa.failed(_key(packet.xid))
            except XaError as exc:  # the node's branch limit: the client's END then hears XAER_NOTA
                log.warning("CORE session %s: SESS_XA_FAILED refused: %s", self.name, exc)
            self.tx = self.xa.tx
        self.confirm(packet, None)

    def _on_xa_in_doubt(self, packet: p.SessXAGetInDoubtXids) -> None:
        xids = () if self.xa is None else tuple(_xid(key) for key in self.xa.in_doubt())
        self.confirm(packet, encode_packet(p.SessXAGetInDoubtXidsResponse(xids, channel_id=self.channel)))

    def _on_xa_set_timeout(self, packet: p.SessXASetTimeout) -> None:
        ok = self.xa is not None and self.xa.set_timeout(packet.timeout_seconds)
        self.confirm(packet, encode_packet(p.SessXASetTimeoutResponse(ok, channel_id=self.channel)))

    def _on_xa_get_timeout(self, packet: p.SessXAGetTimeout) -> None:
        seconds = 0 if self.xa is None else self.xa.timeout_s
        self.confirm(packet, encode_packet(p.SessXAGetTimeoutResponse(seconds, channel_id=self.channel)))

    HANDLERS = {
        p.SessXAStart: _on_xa_start,
        p.SessXAEnd: _on_xa_end,
        p.SessXAPrepare: _on_xa_prepare,
        p.SessXACommit: _on_xa_commit,
        p.SessXARollback: _on_xa_rollback,
        p.SessXAJoin: _on_xa_join,
        p.SessXASuspend: _on_xa_suspend,
        p.SessXAResume: _on_xa_resume,
        p.SessXAForget: _on_xa_forget,
        p.SessXAAfterFailed: _on_xa_failed,
        p.SessXAGetInDoubtXids: _on_xa_in_doubt,
        p.SessXASetTimeout: _on_xa_set_timeout,
        p.SessXAGetTimeout: _on_xa_get_timeout,
    }
