"""XA transactions over OpenWire: TransactionInfo with an XATransactionId, on the node's
protocol-neutral resource manager (:mod:`junction.brokercore.xa`, the one CORE uses).

The Classic client's ``TransactionContext`` (its ``XAResource``) speaks XA with the
connection's TransactionInfo commands, each naming its branch by an XATransactionId:

* ``start`` sends BEGIN without waiting (and again for TMJOIN/TMRESUME, since OpenWire has
  no flags): a new Xid begins a branch; one that is active already goes on (joined or
  resumed, as Classic's broker takes it); a prepared one is refused (XAER_DUPID);
* the session's sends and acks inside the branch carry its XATransactionId: a send is kept
  in the branch, an acknowledged message leaves its consumer for the branch at once (as
  Artemis's ack takes it out of the consumer's deliveries), so a consumer that closes, or a
  connection that drops after the prepare, does not give it back;
* ``end`` sends END (TMSUCCESS, TMSUSPEND and TMFAIL alike) and waits: an active branch is
  answered, an unknown one is XAER_NOTA, a prepared one XAER_PROTO;
* PREPARE is answered with an IntegerResponse (XA_OK) once the branch's record is synced;
  COMMIT_ONE_PHASE / COMMIT_TWO_PHASE once the commit is; ROLLBACK and FORGET at once;
* RECOVER (no Xid) is answered with a DataArrayResponse of the prepared branches' Xids.

A refused call is an ExceptionResponse carrying a ``javax.transaction.xa.XAException`` whose
message ends ``xaErrorCode:<code>`` (as Classic's broker writes it): the client rebuilds the
exception by its class and reads the code back from that marker, so the application gets an
``XAException`` with that ``errorCode``.  (Artemis's OpenWire adapter refuses most of these
calls with exceptions the client cannot read a code from -- it sees XAER_RMFAIL or
XAER_RMERR; Classic's codes are the XA ones, and Junction answers them.)  The wrong-phase
commits are refused with XAER_PROTO and leave the branch as it was: a two-phase commit of a
branch never prepared (Classic's answer; Artemis also rolls the branch back), and a
one-phase commit of a prepared branch (Classic commits it; Artemis refuses it and loses the
branch until a restart; the XA specification says XAER_PROTO).

A branch rolled back by the connection whose consumer acknowledged its messages gives them
back to that consumer's deliveries, not to the queue: the Classic client redelivers them
itself from its own buffer (as after a local transaction's rollback), so a dispatch from the
broker as well would reach it twice.  Rolled back from anywhere else (a recovery on a new
connection), they go back to their queues.

A branch begun on this connection and not prepared rolls back when the connection goes (as
Classic's broker and CORE's sessions do); a prepared one stays with the node, in its journal,
until a connection commits or rolls it back.
"""

from __future__ import annotations

import logging

from junction.brokercore.xa import (
    ACTIVE,
    PREPARED,
    SUSPENDED,
    XA_OK,
    XAER_DUPID,
    XAER_NOTA,
    XAER_PROTO,
    XAER_RMERR,
    XaError,
    XaInvalidState,
    XaRolledBack,
    XaSession,
)
from junction.model import errors
from junction.protocols.openwire.commands import DataArrayResponse, IntegerResponse, TransactionType
from junction.protocols.openwire.structures import XATransactionId

__all__ = ["XA_EXCEPTION", "OpenWireXa", "is_xa", "xid_of"]

log = logging.getLogger("junction.openwire")

#: the class of every refusal: the client rebuilds it and reads the code from its message
XA_EXCEPTION = "javax.transaction.xa.XAException"
#: how the code travels in the message (Classic's ``TransactionContext.xaErrorCodeMarker``)
XA_CODE_MARKER = "xaErrorCode:"
#: XAException.XA_RBCOMMFAIL: a one-phase commit that failed and rolled back
XA_RBCOMMFAIL = 103


def is_xa(txid) -> bool:
    return isinstance(txid, XATransactionId)


def xid_of(txid: XATransactionId) -> tuple:
    """The resource manager's key of an XATransactionId: (format id, gtrid, bqual)."""
    return (txid.format_id, bytes(txid.global_transaction_id or b""), bytes(txid.branch_qualifier or b""))


def transaction_id(xid: tuple) -> XATransactionId:
    format_id, gtrid, bqual = xid
    return XATransactionId(format_id=format_id, global_transaction_id=gtrid, branch_qualifier=bqual)


class _Enlisted:
    """The acks this connection enlisted in one branch: what a send or ack of the branch gets
    in place of a local transaction's held acks (``extend`` is how the ack path hands them
    over).  Each ack goes into the branch now; the pairs (consumer, ref) are kept so that a
    rollback from this connection gives each ref back to its consumer.  Bounded by the
    deliveries the acks name (each consumer's prefetch)."""

    __slots__ = ("owner", "branch", "pairs")

    def __init__(self, owner: OpenWireXa, branch):
        self.owner = owner
        self.branch = branch
        self.pairs: list = []

    def extend(self, pairs) -> None:
        protocol = self.owner.protocol
        session = protocol.session
        for state, ref in pairs:
            if protocol.ack_in_transaction(state, ref):
                session.acknowledge(ref, self.branch.tx)
                self.pairs.append((state, ref))
        self.branch.hold_acks(session)


class OpenWireXa:
    """One OpenWire connection's XA calls (``protocol`` its OpenWireProtocol)."""

    def __init__(self, protocol):
        self.protocol = protocol
        #: the connection's side of the resource manager; no branch is ever its *current* one:
        #: every send and ack names its branch
        self.xa = XaSession(protocol.session)
        #: Xid -> the acks this connection enlisted in that branch (live branches only: at most
        #: the node's ``MAX_BRANCHES``, each bounded by its consumers' prefetches)
        self.enlisted: dict[tuple, _Enlisted] = {}

    # -- sends and acks inside a branch ------------------------------------------------------
    def entry(self, txid: XATransactionId):
        """``(transaction, acks)`` of the active branch a send or an ack names."""
        xid = xid_of(txid)
        branch = self.xa.rm.branches.get(xid)
        if branch is None or branch.state != ACTIVE:
            code = XAER_NOTA if branch is None else XAER_PROTO
            what = "has not been started" if branch is None else f"is {branch.state}"
            raise errors.TransactionError(f"Transaction '{_text(xid)}' {what}. {XA_CODE_MARKER}{code}")
        enlisted = self.enlisted.get(xid)
        if enlisted is None or enlisted.branch is not branch:
            self._forget_finished()
            enlisted = self.enlisted[xid] = _Enlisted(self, branch)
        return branch.tx, enlisted

    def _forget_finished(self) -> None:
        """Drop the acks of branches finished elsewhere or by their timeout: the map holds
        live branches only."""
        branches = self.xa.rm.branches
        for xid, enlisted in list(self.enlisted.items()):
            if branches.get(xid) is not enlisted.branch:
                del self.enlisted[xid]

    # -- TransactionInfo ---------------------------------------------------------------------
    def handle(self, info) -> None:
        """Serve an XA TransactionInfo (or RECOVER); a refusal is the client's XAException."""
        kind = info.type
        handler = self._calls.get(kind)
        if handler is None:
            return self._refuse(info, XaError(XAER_PROTO, f"TransactionInfo type {kind} is not an XA call"))
        xid = xid_of(info.transaction_id) if is_xa(info.transaction_id) else None
        if xid is None and kind != TransactionType.RECOVER:
            return self._refuse(info, XaError(XAER_PROTO, "an XA call without an Xid"))
        try:
            d = handler(self, xid)
        except XaError as exc:
            return self._refuse(info, exc)
        except (XaInvalidState, XaRolledBack) as exc:
            return self._refuse(info, XaError(XAER_PROTO, str(exc)))
        if kind == TransactionType.RECOVER:
            self._answer(info, DataArrayResponse(correlation_id=info.command_id, data=d))
        elif kind == TransactionType.PREPARE:
            self._when(d, info, IntegerResponse(correlation_id=info.command_id, result=XA_OK), XAER_RMERR)
        elif kind in (TransactionType.COMMIT_ONE_PHASE, TransactionType.COMMIT_TWO_PHASE):
            failed = XA_RBCOMMFAIL if kind == TransactionType.COMMIT_ONE_PHASE else XAER_RMERR
            self._when(d, info, None, failed)
        else:
            self.protocol.respond(info)

    def _begin(self, xid):
        branch = self.xa.rm.branches.get(xid)
        if branch is not None and branch.state in (ACTIVE, SUSPENDED):
            branch.state = ACTIVE  # TMJOIN or TMRESUME: the branch goes on
            return None
        if branch is not None:
            raise XaError(XAER_DUPID, f"Cannot start, there is already a xid {_text(xid)}")
        self.xa.start(xid)
        self.xa.current = None  # sends and acks name their branch; none is the connection's
        return None

    def _end(self, xid):
        self.xa.end(xid)

    def _prepare(self, xid):
        branch = self.xa.rm.branches.get(xid)
        owner = branch.tx.session if branch is not None else None
        d = self.xa.prepare(xid)
        if owner is not None and owner is not self.protocol.session and hasattr(owner, "transactions"):
            owner.transactions.discard(branch.tx)  # begun on another connection: no longer its to roll back
        return d

    def _commit(self, xid, one_phase: bool):
        branch = self.xa.rm.branches.get(xid)
        if branch is not None and branch.state == ACTIVE and not one_phase:
            raise XaError(XAER_PROTO, "Cannot do 2 phase commit if the transaction has not been prepared")
        if branch is not None and branch.state == PREPARED and one_phase:
            raise XaError(XAER_PROTO, "Cannot do 1 phase commit of a prepared transaction")
        d = self.xa.commit(xid, one_phase)
        self.enlisted.pop(xid, None)
        return d

    def _rollback(self, xid):
        branch = self.xa.rm.branches.get(xid)
        enlisted = self.enlisted.pop(xid, None)
        if branch is not None and branch.state in (ACTIVE, PREPARED) and enlisted is not None:
            self._give_back(branch, enlisted)
        self.xa.rollback(xid)

    def _give_back(self, branch, enlisted: _Enlisted) -> None:
        """The refs this connection's consumers acknowledged in the branch return to those
        consumers' deliveries (the client redelivers them), unless a consumer has closed."""
        session = self.protocol.session
        back = []
        for state, ref in enlisted.pairs:
            sc = state.server_consumer
            if sc is None or sc.closed or branch.holder.in_flight.pop(id(ref), None) is None:
                continue
            ref.consumer = sc.consumer
            sc.consumer.in_flight[id(ref)] = ref
            session._consumer_of[id(ref)] = sc
            branch.tx.acks.remove(ref)
            back.append((state, ref))
        self.protocol.rolled_back(back)

    def _recover(self, _xid):
        return tuple(transaction_id(xid) for xid in self.xa.in_doubt())

    def _forget(self, xid):
        self.xa.forget(xid)

    _calls = {
        TransactionType.BEGIN: _begin,
        TransactionType.END: _end,
        TransactionType.PREPARE: _prepare,
        TransactionType.COMMIT_ONE_PHASE: lambda self, xid: self._commit(xid, True),
        TransactionType.COMMIT_TWO_PHASE: lambda self, xid: self._commit(xid, False),
        TransactionType.ROLLBACK: _rollback,
        TransactionType.RECOVER: _recover,
        TransactionType.FORGET: _forget,
    }

    # -- answers -------------------------------------------------------------------------------
    def _answer(self, info, answer) -> None:
        if info.response_required:
            self.protocol.write(answer)

    def _when(self, d, info, answer, failed_code: int) -> None:
        """Answer once ``d`` (a journal write) is done; a failure is XAException ``failed_code``."""
        def done(_):
            if answer is None:
                self.protocol.respond(info)
            else:
                self._answer(info, answer)

        def failed(failure):
            log.warning("OpenWire %s: XA call failed: %s", self.protocol.peer, failure.getErrorMessage())
            self._refuse(info, XaError(failed_code, f"the journal write failed: {failure.getErrorMessage()}"))

        if d is None:
            done(None)
        else:
            d.addCallbacks(done, failed)

    def _refuse(self, info, error: XaError) -> None:
        self.protocol.refuse(info, XA_EXCEPTION, f"{error} {XA_CODE_MARKER}{error.code}")

    # -- the connection goes --------------------------------------------------------------------
    def close(self) -> None:
        """Unprepared branches begun here roll back with the session; prepared ones stay."""
        self.enlisted.clear()
        self.xa.close()


def _text(xid: tuple) -> str:
    format_id, gtrid, bqual = xid
    return f"XID:[{format_id},globalId={gtrid.hex()},branchId={bqual.hex()}]"
