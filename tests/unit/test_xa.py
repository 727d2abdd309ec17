"""XA branches (junction.brokercore.xa) on a Clock: every call in every state, as Artemis
answers it, and what a branch's sends and acks do while it is open, prepared, committed,
rolled back or timed out."""

from __future__ import annotations

import pytest

from junction.brokercore import xa as core_xa
from junction.brokercore.xa import (
    DEFAULT_TIMEOUT_S,
    XaError,
    XaInvalidState,
    XaRolledBack,
    XaSession,
)
from tests.unit.stomp_fixtures import Broker, Message, Recorder, RoutingType

X = (1, b"gtrid-x", b"bq")
Y = (1, b"gtrid-y", b"bq")

# Artemis's XAException codes.
NOTA, PROTO, DUPID, RBTIMEOUT = -4, -6, -8, 106

#: (call, state of X) -> the XAException code (int) or the state X is in afterwards (str),
#: written from Artemis's ServerSessionImpl.xa* / TransactionImpl (not from the module's table).
EXPECTED = {
    ("start", "missing"): "current",
    ("start", "active"): DUPID,
    ("start", "suspended"): DUPID,
    ("start", "prepared"): DUPID,
    ("start", "current"): "current",  # Artemis rolls the current X back and starts X anew
    ("end", "current"): "active",
    ("end", "timed-out"): RBTIMEOUT,
    ("end", "missing"): NOTA,
    ("end", "active"): "active",
    ("end", "suspended"): "active",
    ("end", "prepared"): PROTO,
    ("prepare", "current"): PROTO,
    ("prepare", "missing"): NOTA,
    ("prepare", "active"): "prepared",
    ("prepare", "suspended"): PROTO,
    ("prepare", "prepared"): "prepared",
    ("prepare", "timed-out"): PROTO,  # still the session's branch in Artemis
    ("commit", "timed-out"): PROTO,
    ("commit", "current"): PROTO,
    ("commit", "missing"): NOTA,
    ("commit", "active"): "invalid-state",  # and X is gone: Artemis removed it first
    ("commit", "suspended"): PROTO,
    ("commit", "prepared"): "missing",
    ("commit-1pc", "active"): "missing",
    ("commit-1pc", "prepared"): "invalid-state",
    ("commit-1pc", "missing"): NOTA,
    ("rollback", "current"): PROTO,
    ("rollback", "missing"): NOTA,
    ("rollback", "active"): "missing",
    ("rollback", "suspended"): PROTO,
    ("rollback", "prepared"): "missing",
    ("suspend", "current"): "suspended",
    ("suspend", "missing"): PROTO,
    ("resume", "suspended"): "current",
    ("resume", "missing"): NOTA,
    ("resume", "active"): PROTO,
    ("resume", "prepared"): PROTO,
    ("resume", "busy"): PROTO,
    ("join", "missing"): NOTA,
    ("join", "active"): "current",
    ("join", "suspended"): PROTO,
    ("join", "prepared"): "current",
    ("forget", "missing"): NOTA,
    ("forget", "prepared"): NOTA,
    # SESS_XA_FAILED after a failover (ServerSessionImpl.xaFailed): found or begun anew, the
    # branch is the session's, rollback-only -- unless prepared (or finished): then no branch
    ("failed", "missing"): "current",
    ("failed", "current"): "current",
    ("failed", "active"): "current",
    ("failed", "suspended"): "current",
    ("failed", "timed-out"): "current",
    ("failed", "prepared"): "prepared",
    ("failed", "rolled-back"): "rolled-back",
    # "rolled-back": a rollback-only branch whose prepare rolled it back; TransactionImpl ignores
    # a second prepare (isEffective), refuses a commit, and xaRollback removes it
    ("prepare", "rolled-back"): "rolled-back",
    ("commit", "rolled-back"): "invalid-state",
    ("commit-1pc", "rolled-back"): "invalid-state",
    ("rollback", "rolled-back"): "missing",
}


def _setup(state: str):
    broker = Broker()
    xa = XaSession(broker.session())
    if state == "missing":
        return broker, xa
    if state == "busy":
        xa.start(X)
        xa.suspend()
        xa.start(Y)
        return broker, xa
    xa.start(X)
    if state == "rolled-back":
        xa.end(X)
        xa.failed(X)
        xa.end(X)
        with pytest.raises(XaRolledBack):
            xa.prepare(X)
        return broker, xa
    if state == "timed-out":
        broker.run(DEFAULT_TIMEOUT_S + 1)
    elif state == "suspended":
        xa.suspend()
    elif state != "current":
        xa.end(X)
        if state == "prepared":
            xa.prepare(X)
    return broker, xa


def _state_of(xa: XaSession) -> str:
    if xa.current is not None and xa.current.xid == X:
        return "current"
    branch = xa.rm.branches.get(X)
    return "missing" if branch is None else branch.state


def _call(xa: XaSession, call: str):
    if call == "commit-1pc":
        return xa.commit(X, True)
    if call == "commit":
        return xa.commit(X, False)
    if call == "end":
        return xa.end(X)
    if call == "suspend":
        return xa.suspend()
    return getattr(xa, call)(X)


@pytest.mark.parametrize("call,state", sorted(EXPECTED))
def test_each_call_in_each_state_answers_as_artemis(call, state):
    _broker, xa = _setup(state)
    expected = EXPECTED[call, state]
    if expected == "invalid-state":
        with pytest.raises(XaInvalidState):
            _call(xa, call)
        assert _state_of(xa) == "missing"
    elif isinstance(expected, int):
        with pytest.raises(XaError) as caught:
            _call(xa, call)
        assert caught.value.code == expected
    else:
        _call(xa, call)
        assert _state_of(xa) == expected


def test_start_replaces_the_current_branch():
    """Artemis's xaStart on a session already in a branch rolls that branch back (unless
    prepared) and starts the new one."""
    _broker, xa = _setup("current")
    xa.start(Y)
    assert xa.current.xid == Y
    assert X not in xa.rm.branches


def test_every_table_row_is_checked():
    """A row added to the module's table without an expectation here fails."""
    assert set(core_xa.TABLE) - set(EXPECTED) == set()


def _consumer(broker, session, name):
    rec = Recorder()
    consumer = session.create_consumer(name, rec, routing_type=RoutingType.ANYCAST)
    return consumer, rec


def _sent(broker, session, name, body):
    session.send(Message(address=name, body=body), routing_type=RoutingType.ANYCAST)
    broker.run()


def test_prepared_acks_stay_invisible_then_commit_removes_them():
    broker = Broker()
    broker.queue("q")
    s1 = broker.session()
    _sent(broker, s1, "q", b"m1")
    xa = XaSession(s1)
    consumer, rec = _consumer(broker, s1, "q")
    broker.run()
    assert rec.bodies == [b"m1"]
    xa.start(X)
    s1.acknowledge(rec.refs[0], xa.tx)
    s1.send(Message(address="q", body=b"m2"), routing_type=RoutingType.ANYCAST, tx=xa.tx)
    xa.end(X)
    xa.prepare(X)
    consumer.close()  # the consumer goes: the acked message must not come back
    s2 = broker.session()
    _c2, rec2 = _consumer(broker, s2, "q")
    broker.run()
    assert rec2.bodies == []  # m1 held by the prepared branch, m2 not yet sent
    assert xa.in_doubt() == [X]
    XaSession(s2).commit(X, False)
    broker.run()
    assert rec2.bodies == [b"m2"]
    assert xa.in_doubt() == []


def test_rolled_back_prepared_branch_gives_its_acks_back():
    broker = Broker()
    broker.queue("q")
    s1 = broker.session()
    _sent(broker, s1, "q", b"m1")
    xa = XaSession(s1)
    consumer, rec = _consumer(broker, s1, "q")
    broker.run()
    xa.start(X)
    s1.acknowledge(rec.refs[0], xa.tx)
    s1.send(Message(address="q", body=b"m2"), routing_type=RoutingType.ANYCAST, tx=xa.tx)
    xa.end(X)
    xa.prepare(X)
    consumer.close()
    s2 = broker.session()
    _c2, rec2 = _consumer(broker, s2, "q")
    XaSession(s2).rollback(X)
    broker.run()
    assert rec2.bodies == [b"m1"]  # back for redelivery; m2 never sent


def test_timeout_rolls_back_a_branch_not_prepared():
    broker = Broker()
    broker.queue("q")
    s1 = broker.session()
    xa = XaSession(s1)
    xa.set_timeout(5)
    xa.start(X)
    s1.send(Message(address="q", body=b"m"), routing_type=RoutingType.ANYCAST, tx=xa.tx)
    broker.run(4)
    assert X in xa.rm.branches
    broker.run(2)
    assert X not in xa.rm.branches
    with pytest.raises(XaError) as caught:
        xa.end(X)
    assert caught.value.code == RBTIMEOUT
    broker.run()
    assert broker.server.find_queue("q").message_count == 0


def test_prepared_branch_does_not_time_out():
    broker = Broker()
    xa = XaSession(broker.session())
    xa.set_timeout(5)
    xa.start(X)
    xa.end(X)
    xa.prepare(X)
    broker.run(60)
    assert xa.in_doubt() == [X]


def _failed_over_branch(broker):
    """m1 consumed and acked in branch X, m2 sent in it; then the client fails over: a new
    session names X (SESS_XA_FAILED) and ends it."""
    broker.queue("q")
    s1 = broker.session()
    _sent(broker, s1, "q", b"m1")
    _consumer1, rec = _consumer(broker, s1, "q")
    broker.run()
    xa1 = XaSession(s1)
    xa1.start(X)
    s1.acknowledge(rec.refs[0], xa1.tx)
    s1.send(Message(address="q", body=b"m2"), routing_type=RoutingType.ANYCAST, tx=xa1.tx)
    s1.close()  # the old connection is gone: its session's branch went with it
    broker.run()
    s2 = broker.session()
    xa2 = XaSession(s2)
    xa2.failed(X)
    assert xa2.current is not None and xa2.current.rollback_only
    s2.send(Message(address="q", body=b"m3"), routing_type=RoutingType.ANYCAST, tx=xa2.tx)
    xa2.end(X)
    return s2, xa2


@pytest.mark.parametrize("finish", ["prepare", "commit-1pc", "commit"])
def test_a_branch_failed_over_rolls_back_and_its_prepare_or_commit_is_refused(finish):
    broker = Broker()
    s2, xa2 = _failed_over_branch(broker)
    with pytest.raises(XaRolledBack, match="Failover happened"):
        if finish == "prepare":
            xa2.prepare(X)
        else:
            xa2.commit(X, finish == "commit-1pc")
    if finish == "prepare":
        assert xa2.rm.branches[X].state == "rolled-back"
        xa2.rollback(X)  # the transaction manager's answer to a failed prepare
    assert X not in xa2.rm.branches
    assert xa2.in_doubt() == []
    _c, rec = _consumer(broker, broker.session(), "q")
    broker.run()
    assert rec.bodies == [b"m1"]  # m1 back (never acknowledged for good); m3 never sent
