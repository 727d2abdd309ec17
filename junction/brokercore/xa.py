"""XA transaction branches, as Artemis's ``ResourceManagerImpl`` and ``ServerSessionImpl.xa*``.

A branch (named by an Xid: format id, global transaction id, branch qualifier)
is a :class:`~junction.brokercore.session.Transaction` -- its sends and its
acknowledgements -- with an XA state.  The node keeps every branch in one
:class:`ResourceManager`, whatever the protocol; a CORE session opened with ``xa=true`` works through
its :class:`XaSession`, which has at most one *current* branch (the one its
sends and acks join).

What each call does in each state is the table :data:`TABLE` (Artemis's
answers, its ``XAException`` codes for a wrong-state call).  A branch is
prepared by writing one ``XA_PREPARED`` journal record (synced) holding its
Xid, its sends (whole messages) and its acks (message id, queue id): after a
crash the node rebuilds the branch from it (:func:`restore_prepared`),
``recover`` lists it, and a commit or rollback finishes it.  Its commit routes
the sends, applies the acks and deletes the record in one journal transaction.
The messages a branch acknowledged stay out of every consumer's reach until
the branch ends (a :class:`Holder` owns them), even across a restart.

A branch not prepared within its timeout (``xa_set_timeout``; Artemis's
``transaction-timeout``, 300 s, by default) is rolled back and forgotten; the
session it was current in hears ``XA_RBTIMEOUT`` on its END.

A client that fails over inside a branch names it on its new session
(:meth:`XaSession.failed`, CORE's ``SESS_XA_FAILED``): as in Artemis, the
branch -- found, or begun anew -- becomes the session's current one, marked
rollback-only, unless it is already prepared.  Its prepare or commit then
rolls it back and is refused (:class:`XaRolledBack`); a rollback finishes it.
"""

from __future__ import annotations

import base64
import json
import logging
import weakref

from junction.brokercore.session import Transaction
from junction.model.message import RoutingType, decode_message, encode_message

log = logging.getLogger("junction.core")

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_BRANCHES",
    "TABLE",
    "Holder",
    "ResourceManager",
    "XaError",
    "XaInvalidState",
    "XaRolledBack",
    "XaSession",
    "restore_prepared",
]

#: Artemis's ``transaction-timeout`` default (300,000 ms): a branch not prepared by then rolls back.
DEFAULT_TIMEOUT_S = 300
#: Branches one node keeps at once (active, suspended and prepared); beyond, XA_START is refused (XAER_RMERR).
MAX_BRANCHES = 10_000

# javax.transaction.xa.XAException / XAResource codes.
XA_OK = 0
XA_RDONLY = 3
XA_RBROLLBACK = 100
XA_RBTIMEOUT = 106
XAER_RMERR = -3
XAER_NOTA = -4
XAER_INVAL = -5
XAER_PROTO = -6
XAER_RMFAIL = -7
XAER_DUPID = -8

# Branch states, as a wrong-state call sees them.
MISSING = "missing"  # no such branch in the resource manager
CURRENT = "current"  # the calling session's current branch
TIMED_OUT = "timed-out"  # the calling session's current branch, rolled back by its timeout
ACTIVE = "active"  # ended (or current in another session)
SUSPENDED = "suspended"
PREPARED = "prepared"
BUSY = "busy"  # (resume) the calling session has a current branch
ROLLED_BACK = "rolled-back"  # rolled back by its prepare (rollback-only) or the session's rollback; kept until its XA rollback

#: (call, state) -> an action (a string: what happens) or an XAException code (an int: refused).
#: Read from Artemis's ``ServerSessionImpl.xa*`` and ``TransactionImpl``; a pair not listed is XAER_PROTO.
#: "invalid-state": refused not with an XAException but with Artemis's ``ActiveMQIllegalStateException``
#: ("Transaction is in invalid state ..."), which its client turns into XAER_RMFAIL (one-phase) or
#: XA_RETRY (two-phase).
TABLE: dict[tuple[str, str], str | int] = {
    ("start", MISSING): "begin",
    ("start", ACTIVE): XAER_DUPID,
    ("start", SUSPENDED): XAER_DUPID,
    ("start", PREPARED): XAER_DUPID,
    ("end", CURRENT): "detach",
    ("end", TIMED_OUT): XA_RBTIMEOUT,
    ("end", MISSING): XAER_NOTA,
    ("end", ACTIVE): "nothing",
    ("end", SUSPENDED): "resume",
    ("prepare", MISSING): XAER_NOTA,
    ("prepare", ACTIVE): "prepare",
    ("prepare", PREPARED): "nothing",
    ("commit", MISSING): XAER_NOTA,
    ("commit-1pc", MISSING): XAER_NOTA,
    ("commit-1pc", ACTIVE): "commit",
    ("commit", PREPARED): "commit",
    ("commit", ACTIVE): "invalid-state",
    ("commit-1pc", PREPARED): "invalid-state",
    ("rollback", MISSING): XAER_NOTA,
    ("rollback", ACTIVE): "rollback",
    ("rollback", PREPARED): "rollback",
    ("suspend", CURRENT): "suspend",
    ("suspend", MISSING): XAER_PROTO,
    ("resume", SUSPENDED): "attach",
    ("resume", MISSING): XAER_NOTA,
    ("resume", BUSY): XAER_PROTO,
    ("join", MISSING): XAER_NOTA,
    ("join", ACTIVE): "attach",
    ("join", PREPARED): "attach",
    ("forget", MISSING): XAER_NOTA,
    # after a failover (``failed``): the branch becomes the session's, rollback-only
    ("failed", MISSING): "begin",
    ("failed", CURRENT): "mark",
    ("failed", ACTIVE): "mark",
    ("failed", SUSPENDED): "mark",
    ("failed", PREPARED): "leave",
    ("failed", ROLLED_BACK): "leave",
    # Artemis's TransactionImpl ignores a prepare of a finished branch, refuses its commit
    ("prepare", ROLLED_BACK): "nothing",
    ("commit", ROLLED_BACK): "invalid-state",
    ("commit-1pc", ROLLED_BACK): "invalid-state",
    ("rollback", ROLLED_BACK): "forget",
}
#: Calls after which Artemis has taken the branch out of its resource manager even when refused
#: (``removeTransaction`` before the state check): a two-phase commit of an unprepared branch.
_REMOVED_WHEN_REFUSED = frozenset(
    {("commit", ACTIVE), ("commit-1pc", PREPARED), ("commit", ROLLED_BACK), ("commit-1pc", ROLLED_BACK)}
)
#: why a branch marked after a failover does not commit (Artemis's words)
FAILOVER_TEXT = "Can't commit as a Failover happened during the operation"

_TEXT = {
    XAER_NOTA: "Cannot find xid in resource manager: {xid}",
    XAER_DUPID: "Cannot start, there is already a xid {xid}",
    XAER_PROTO: "Transaction not in valid state for this call: {xid}",
    XA_RBTIMEOUT: "Cannot end, transaction is rolled back",
    XA_RBROLLBACK: "Transaction is marked rollback only: {xid}",
}


class XaError(Exception):
    """An XA call refused: ``code`` is the XAException error code."""

    def __init__(self, code: int, text: str):
        super().__init__(text)
        self.code = code


class XaInvalidState(Exception):
    """An XA call refused as Artemis's ``TransactionImpl`` refuses it: not an XAException but an
    ILLEGAL_STATE error ("Transaction is in invalid state ACTIVE")."""


class XaRolledBack(Exception):
    """A prepare or commit of a branch marked rollback-only after a failover: the branch is
    rolled back, and the call refused as Artemis refuses it (an ActiveMQException, not an
    XAException: its client throws XAER_RMFAIL)."""


class Holder:
    """Owns the messages a branch acknowledged (in a consumer's place): nobody else gets them
    until the branch commits (they go) or rolls back (they come back for redelivery)."""

    __slots__ = ("in_flight",)

    def __init__(self):
        self.in_flight: dict = {}

    def hold(self, ref) -> None:
        ref.consumer = self
        self.in_flight[id(ref)] = ref


class Branch:
    """One Xid's transaction."""

    __slots__ = ("xid", "tx", "state", "record_id", "timer", "holder", "rollback_only")

    def __init__(self, xid: tuple, tx: Transaction):
        self.xid = xid
        self.tx = tx
        self.state = ACTIVE
        #: the XA_PREPARED journal record, once prepared
        self.record_id = 0
        self.timer = None
        self.holder = Holder()
        #: why it may only roll back (after a failover), or None
        self.rollback_only: str | None = None

    def hold_acks(self, session) -> None:
        """The branch's acknowledged messages leave their consumers for the holder (so a consumer
        closing does not give them back); their credit returns."""
        for ref in self.tx.acks:
            consumer = ref.consumer
            if consumer is None or consumer is self.holder:
                continue
            if consumer.in_flight.pop(id(ref), None) is not None:
                ref.queue.in_flight_count -= 1
            owner = session._consumer_of.pop(id(ref), None)
            if owner is not None:
                owner.settled(ref)
            ref.queue.in_flight_count += 1
            self.holder.hold(ref)


class ResourceManager:
    """The node's XA branches (one per server: :meth:`of`)."""

    _by_server: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, server):
        self.server = server
        self.branches: dict[tuple, Branch] = {}

    @classmethod
    def of(cls, server) -> ResourceManager:
        rm = cls._by_server.get(server)
        if rm is None:
            rm = cls._by_server[server] = cls(server)
        return rm

    def in_doubt(self) -> list[tuple]:
        """The prepared branches' Xids (``recover``)."""
        return [xid for xid, branch in self.branches.items() if branch.state == PREPARED]

    def remove(self, branch: Branch) -> None:
        if self.branches.get(branch.xid) is branch:
            del self.branches[branch.xid]
        if branch.timer is not None and branch.timer.active():
            branch.timer.cancel()
        branch.timer = None


def _xid_text(xid: tuple) -> str:
    format_id, gtrid, bqual = xid
    return f"XidImpl (formatID={format_id}, gtrid={bytes(gtrid).hex()}, bqual={bytes(bqual).hex()})"


def _refuse(code: int, xid: tuple) -> XaError:
    return XaError(code, _TEXT.get(code, "XA call refused for {xid}").format(xid=_xid_text(xid)))


class XaSession:
    """One XA session's side of the calls: which branch is current, and each call's effect.

    ``session`` is its :class:`~junction.brokercore.session.ServerSession`; the CORE session
    reads :attr:`tx` (the current branch's transaction, or None) for its sends and acks.
    """

    def __init__(self, session, *, reactor=None, changed=None):
        self.session = session
        #: called when a timeout takes the current branch away (the CORE session rereads :attr:`tx`)
        self.changed = changed
        self.rm = ResourceManager.of(session.server)
        if reactor is None:
            reactor = session.server.reactor
        self.reactor = reactor
        self.current: Branch | None = None
        #: the current branch rolled back by its timeout (its END answers XA_RBTIMEOUT)
        self.timed_out: Branch | None = None
        self.timeout_s = DEFAULT_TIMEOUT_S

    @property
    def tx(self) -> Transaction | None:
        return None if self.current is None else self.current.tx

    def _state(self, xid: tuple) -> tuple[str, Branch | None]:
        if self.timed_out is not None and self.timed_out.xid == xid:
            return TIMED_OUT, self.timed_out
        current = self.current
        if current is not None and current.xid == xid:
            return CURRENT, current
        branch = self.rm.branches.get(xid)
        if branch is None:
            return MISSING, None
        return branch.state, branch

    def _action(self, call: str, xid: tuple, state: str):
        outcome = TABLE.get((call, state), XAER_PROTO)
        if isinstance(outcome, int):
            raise _refuse(outcome, xid)
        return outcome

    # -- the calls ------------------------------------------------------------------------------
    def start(self, xid: tuple) -> None:
        current = self.current
        if current is not None:
            # Artemis replaces the session's branch (rolled back unless prepared).
            self.current = None
            if current.state != PREPARED:
                self.rm.remove(current)
                self.session.rollback(current.tx)
        self.timed_out = None
        state, _ = self._state(xid)
        self._action("start", xid, state)
        self._begin(xid)

    def _begin(self, xid: tuple) -> Branch:
        if len(self.rm.branches) >= MAX_BRANCHES:
            raise XaError(XAER_RMERR, f"the node keeps at most {MAX_BRANCHES} XA branches")
        branch = Branch(xid, self.session.begin())
        self.rm.branches[xid] = branch
        self.current = branch
        branch.timer = self.reactor.callLater(self.timeout_s, self._expire, branch)
        return branch

    def failed(self, xid: tuple) -> None:
        """The client failed over inside branch ``xid`` (Artemis's ``xaFailed``): it becomes
        this session's current branch, rollback-only -- unless it is prepared or finished,
        when the session has no branch.  No answer goes back."""
        state, branch = self._state(xid)
        if state == TIMED_OUT:
            state, branch = MISSING, None
        action = self._action("failed", xid, state)
        self.timed_out = None
        if action == "leave":
            self.current = None
            return
        if action == "begin":
            branch = self._begin(xid)
        branch.state = ACTIVE
        branch.rollback_only = FAILOVER_TEXT
        self.current = branch

    def end(self, xid: tuple, failed: bool = False) -> None:
        state, branch = self._state(xid)
        action = self._action("end", xid, TIMED_OUT if state == TIMED_OUT else state)
        if action == "detach":  # TMFAIL (``failed``) ends it the same way: Artemis ignores the flag
            self.current = None
            branch.hold_acks(self.session)
        elif action == "resume":
            branch.state = ACTIVE
        if state == TIMED_OUT:
            self.timed_out = None

    def suspend(self) -> None:
        branch = self.current
        if branch is None:
            self._action("suspend", (0, b"", b""), MISSING)
        self.current = None
        branch.hold_acks(self.session)
        branch.state = SUSPENDED

    def resume(self, xid: tuple) -> None:
        state, branch = self._state(xid)
        if self.current is not None:
            state = BUSY
        self._action("resume", xid, state)
        branch.state = ACTIVE
        self.current = branch

    def join(self, xid: tuple) -> None:
        state, branch = self._state(xid)
        if state == CURRENT:
            return
        self._action("join", xid, state)
        self.current = branch

    def prepare(self, xid: tuple):
        """Returns the Deferred of the prepared record's sync (None when nothing is written)."""
        state, branch = self._state(xid)
        action = self._action("prepare", xid, state)
        if action == "nothing":
            return None
        if branch.timer is not None and branch.timer.active():
            branch.timer.cancel()
        branch.timer = None
        if branch.rollback_only is not None:
            # Artemis's TransactionImpl.prepare: rolled back, kept (its rollback finishes it), refused
            self._roll_back(branch)
            branch.state = ROLLED_BACK
            raise XaRolledBack(branch.rollback_only)
        branch.hold_acks(self.session)
        self.session.transactions.discard(branch.tx)  # no longer this session's to roll back on close
        branch.state = PREPARED
        branch.record_id, d = self.session.server.storage.store_prepared(_encode(branch))
        return d

    def commit(self, xid: tuple, one_phase: bool):
        """Returns the Deferred of the commit's journal transaction."""
        call = "commit-1pc" if one_phase else "commit"
        state, branch = self._state(xid)
        if state == ACTIVE and branch.rollback_only is not None:
            # Artemis's xaCommit removes it, then TransactionImpl.commit rolls it back and throws
            self.rm.remove(branch)
            self._roll_back(branch)
            raise XaRolledBack(branch.rollback_only)
        if (call, state) in _REMOVED_WHEN_REFUSED:
            # Artemis has taken it out of its resource manager before refusing: it is finished
            # here, rolled back (Artemis would leave it unreachable until a restart).
            self.rm.remove(branch)
            if state != ROLLED_BACK:
                self._roll_back(branch)
        action = self._action(call, xid, state)
        if action == "invalid-state":
            text = "ROLLEDBACK" if state == ROLLED_BACK else state.upper()
            raise XaInvalidState(f"Transaction is in invalid state {text}")
        self.rm.remove(branch)
        if branch.record_id:
            record_id = branch.record_id
            branch.tx.in_commit.append(lambda storage_tx: storage_tx.delete_record(record_id))
        branch.tx.session = self.session
        self.session.transactions.add(branch.tx)
        return self.session.commit(branch.tx)

    def rollback(self, xid: tuple) -> None:
        state, branch = self._state(xid)
        action = self._action("rollback", xid, state)
        self.rm.remove(branch)
        if action != "forget":  # a branch rolled back already by its prepare
            self._roll_back(branch)

    def roll_back_current(self) -> None:
        """The session's own rollback (not an XA call) inside a branch: as Artemis's
        ``ServerSessionImpl.rollback``, the branch's work is rolled back, the branch stays known
        (``rolled-back``: a prepare is ignored, a rollback removes it) and the session has no
        branch.  The client does this when it ends a branch it failed over in."""
        branch, self.current = self.current, None
        if branch is None:
            return
        if branch.timer is not None and branch.timer.active():
            branch.timer.cancel()
        branch.timer = None
        self._roll_back(branch)
        branch.state = ROLLED_BACK

    def _roll_back(self, branch: Branch) -> None:
        tx = branch.tx
        tx.session = self.session if not self.session.closed else tx.session
        self.session.transactions.discard(tx)
        tx.rollback()
        if branch.record_id:
            record_id, branch.record_id = branch.record_id, 0
            self.session.server.storage.delete_record(record_id, sync=True).addErrback(_note)

    def forget(self, xid: tuple) -> None:
        # No heuristic completions are kept: there is never anything to forget.
        self._action("forget", xid, MISSING)

    def in_doubt(self) -> list[tuple]:
        return self.rm.in_doubt()

    def set_timeout(self, seconds: int) -> bool:
        self.timeout_s = seconds if seconds > 0 else DEFAULT_TIMEOUT_S
        return True

    def _expire(self, branch: Branch) -> None:
        branch.timer = None
        if branch.state == PREPARED or self.rm.branches.get(branch.xid) is not branch:
            return
        log.info("XA branch %s timed out after %d s: rolled back", _xid_text(branch.xid), self.timeout_s)
        self.rm.remove(branch)
        if self.current is branch:
            self.current = None
            self.timed_out = branch
        self._roll_back(branch)
        if self.changed is not None:
            self.changed()

    def close(self) -> None:
        """The session closes (its ServerSession rolls back its transactions): the branches it
        started and did not prepare go with it; prepared branches stay with the node."""
        self.current = None
        session = self.session
        for branch in list(self.rm.branches.values()):
            if branch.state != PREPARED and branch.tx.session is session:
                self.rm.remove(branch)


def _note(failure):
    log.warning("deleting a finished XA branch's record failed: %s", failure.getErrorMessage())


# -- the XA_PREPARED record -------------------------------------------------------------------------
def _encode(branch: Branch) -> bytes:
    format_id, gtrid, bqual = branch.xid
    record = {
        "xid": [format_id, bytes(gtrid).hex(), bytes(bqual).hex()],
        "sends": [
            [base64.b64encode(encode_message(message)).decode("ascii"), None if rt is None else rt.name]
            for message, rt in branch.tx.sends
        ],
        "acks": [[ref.message.message_id, ref.queue.id] for ref in branch.tx.acks if ref.queue.durable],
    }
    return json.dumps(record, separators=(",", ":")).encode("utf-8")


class _RecoveredOwner:
    """The session a recovered branch belongs to until a session commits or rolls it back."""

    def __init__(self, server):
        self.server = server
        self.closed = True
        self._consumer_of: dict = {}

    def cancel(self, ref, *, redelivered: bool = True) -> None:
        if not ref.queue.deleted:
            ref.queue.cancel(ref, redelivered=redelivered)


def restore_prepared(server, records, queues_by_id: dict) -> None:
    """Rebuild the prepared branches the journal holds (``(record id, payload)``), at startup,
    before any client connects: their acknowledged messages are taken out of their queues."""
    rm = ResourceManager.of(server)
    owner = _RecoveredOwner(server)
    for record_id, payload in records:
        record = json.loads(payload)
        format_id, gtrid, bqual = record["xid"]
        xid = (format_id, bytes.fromhex(gtrid), bytes.fromhex(bqual))
        tx = Transaction(owner)
        for encoded, rt in record["sends"]:
            tx.sends.append((decode_message(base64.b64decode(encoded)), None if rt is None else RoutingType[rt]))
        branch = Branch(xid, tx)
        for message_id, queue_id in record["acks"]:
            queue = queues_by_id.get(queue_id)
            ref = None if queue is None else queue.take(message_id)
            if ref is None:
                continue
            queue.in_flight_count += 1
            branch.holder.hold(ref)
            tx.acks.append(ref)
        branch.state = PREPARED
        branch.record_id = record_id
        rm.branches[xid] = branch
    log.info("recovered %d prepared XA transaction(s) from the journal", len(records))
