"""XA transactions with the real Artemis JMS client (XAConnection, XASession, XAResource), the
same scenarios against real Artemis and against a Junction node's CORE acceptor: differential.

Each scenario function takes a target (its CORE URL, the credentials, and for the crash case
a kill -9 and a start) and asserts the outcomes Artemis shows the client: a branch's send and
acknowledgement take effect on a two-phase commit, vanish on a rollback, take effect on a
one-phase commit; a prepared branch's acknowledged message stays out of other consumers'
reach, is listed by ``recover`` from another connection, and survives the node killed with
kill -9, to be committed after the restart, its messages delivered once; a call in a wrong
state throws the ``XAException`` code Artemis gives.  "Nothing else arrived" is proved by a
marker sent last being the only or last message received.
"""

from __future__ import annotations

import itertools

import pytest

from tests import harness
from tests.artemis import JmsClient

pytestmark = pytest.mark.timeout(60)

USER = {"user": "admin", "password": "admin"}
#: Junction's user for the same credentials, with its default role for sending and consuming
USERS = {USER["user"]: (USER["password"], ["amq"])}

# javax.transaction.xa.XAException codes
XAER_NOTA, XAER_PROTO, XAER_RMFAIL, XAER_DUPID, XA_RETRY = -4, -6, -7, -8, 4

_ids = itertools.count(1)


def xid(name: str) -> dict:
    return {"format": 131077, "gtrid": f"gtrid-{name}", "bqual": "bq-1"}


class Target:
    """A broker as the scenarios see it."""

    def __init__(self, url: str, creds: dict, process=None):
        self.url, self.creds, self.process = url, creds, process

    def connect(self) -> dict:
        return {"op": "connect", "url": self.url, **self.creds}

    def xa_connect(self) -> dict:
        return {"op": "xa_connect", "url": self.url, **self.creds}

    def crash_and_restart(self) -> None:
        self.process.kill9()
        self.process.start()


def names(prefix: str) -> tuple[str, str, dict]:
    n = next(_ids)
    return f"{prefix}.in.{n}", f"{prefix}.out.{n}", xid(f"{prefix}-{n}")


def bodies(result: dict) -> list:
    return [m["body"] for m in result["messages"]]


def _prepare_a_branch(target: Target, jms: JmsClient, source: str, sink: str, x: dict) -> None:
    """"before" waits on ``source``; a branch takes it and sends "in-branch" to ``sink``, then is
    prepared; the connection closes."""
    jms.run([target.connect(), {"op": "send", "queue": source, "body": "before"}])
    results = jms.run(
        [
            target.xa_connect(),
            {"op": "xa_start", "xid": x},
            {"op": "receive", "queue": source, "count": 1},
            {"op": "send", "queue": sink, "body": "in-branch"},
            {"op": "xa_end", "xid": x},
            {"op": "xa_prepare", "xid": x},
            {"op": "xa_recover"},
        ]
    )
    assert bodies(results[2]) == ["before"]
    assert results[5]["vote"] == 0  # XA_OK
    assert x in results[6]["xids"]


def _drain(target: Target, jms: JmsClient, queue: str) -> list:
    """Every body on ``queue`` before a marker sent now (the marker included)."""
    results = jms.run(
        [
            target.connect(),
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    return bodies(results[2])


def scenario_two_phase_commit(target: Target, jms: JmsClient) -> None:
    source, sink, x = names("xa2pc")
    _prepare_a_branch(target, jms, source, sink, x)
    assert _drain(target, jms, source) == ["marker"]  # held by the prepared branch
    assert _drain(target, jms, sink) == ["marker"]  # not sent yet
    results = jms.run([target.xa_connect(), {"op": "xa_recover"}, {"op": "xa_commit", "xid": x}, {"op": "xa_recover"}])
    assert x in results[1]["xids"] and x not in results[3]["xids"]
    assert _drain(target, jms, sink) == ["in-branch", "marker"]
    assert _drain(target, jms, source) == ["marker"]  # acknowledged for good


def scenario_rollback(target: Target, jms: JmsClient) -> None:
    source, sink, x = names("xarb")
    _prepare_a_branch(target, jms, source, sink, x)
    results = jms.run([target.xa_connect(), {"op": "xa_rollback", "xid": x}, {"op": "xa_recover"}])
    assert x not in results[2]["xids"]
    assert _drain(target, jms, sink) == ["marker"]  # the send is gone
    assert _drain(target, jms, source) == ["before", "marker"]  # the ack is undone


def scenario_one_phase_commit(target: Target, jms: JmsClient) -> None:
    source, sink, x = names("xa1pc")
    jms.run([target.connect(), {"op": "send", "queue": source, "body": "before"}])
    results = jms.run(
        [
            target.xa_connect(),
            {"op": "xa_start", "xid": x},
            {"op": "receive", "queue": source, "count": 1},
            {"op": "send", "queue": sink, "body": "in-branch"},
            {"op": "xa_end", "xid": x},
            {"op": "xa_commit", "xid": x, "onePhase": True},
            {"op": "xa_recover"},
        ]
    )
    assert bodies(results[2]) == ["before"] and x not in results[6]["xids"]
    assert _drain(target, jms, sink) == ["in-branch", "marker"]
    assert _drain(target, jms, source) == ["marker"]


def scenario_prepared_survives_kill_9(target: Target, jms: JmsClient) -> None:
    source, sink, x = names("xakill")
    _prepare_a_branch(target, jms, source, sink, x)
    target.crash_and_restart()
    results = jms.run([target.xa_connect(), {"op": "xa_recover"}])
    assert x in results[1]["xids"]
    assert _drain(target, jms, source) == ["marker"]  # still held after the restart
    results = jms.run([target.xa_connect(), {"op": "xa_commit", "xid": x}, {"op": "xa_recover"}])
    assert x not in results[2]["xids"]
    assert _drain(target, jms, sink) == ["in-branch", "marker"]  # delivered once
    assert _drain(target, jms, source) == ["marker"]


def _reconnecting(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "reconnectAttempts=-1&retryInterval=100"


class FailoverGaveUp(Exception):
    """The client ended its failover without reconnecting (FAILOVER_FAILED)."""


def scenario_failover_inside_a_branch(target: Target, jms: JmsClient, signal, finish: str) -> list[dict]:
    """The broker is killed (-9) and restarted while the client is inside a branch; the client
    reconnects (``reconnectAttempts``), recreates its session and names the branch
    (SESS_XA_FAILED), so the branch can only roll back: its END throws, its rollback is what the
    transaction manager does next, and neither its send nor its acknowledgement takes effect.
    ``finish``: what the transaction manager calls after END (a prepare, a one-phase commit or
    a rollback), then a rollback.  Returns the outcomes from END on, for the caller to compare."""
    source, sink, x = names("xafail")
    jms.run([target.connect(), {"op": "send", "queue": source, "body": "before"}])
    run = jms.start(
        [
            {**target.xa_connect(), "url": _reconnecting(target.url)},
            {"op": "xa_start", "xid": x},
            {"op": "receive", "queue": source, "count": 1},
            {"op": "send", "queue": sink, "body": "in-branch"},
            {"op": "wait_file", "path": str(signal)},
            {"op": "xa_end", "xid": x, "mayFail": True},
            {"op": finish, "xid": x, "mayFail": True, **({"onePhase": True} if finish == "xa_commit" else {})},
            {"op": "xa_rollback", "xid": x, "mayFail": True},
            {"op": "xa_recover"},
        ]
    )
    harness.wait_for(lambda: len(run.results) >= 4, timeout=30, what="the branch's send")
    assert bodies(run.results[2]) == ["before"]
    target.crash_and_restart()
    # the client has reconnected and recreated its session (naming the branch) before it goes on
    ended = run.wait_event(lambda e: e.get("type") in ("FAILOVER_COMPLETED", "FAILOVER_FAILED"), timeout=40)
    if ended["type"] == "FAILOVER_FAILED":
        run.kill()
        raise FailoverGaveUp(target.url)
    signal.touch()
    results = run.wait()
    assert x not in results[8]["xids"]
    assert _drain(target, jms, sink) == ["marker"]  # the branch's send never happened
    assert _drain(target, jms, source) == ["before", "marker"]  # its acknowledgement neither
    return [
        {k: r[k] for k in ("op", "ok")} | ({"xaErrorCode": r["error"].get("xaErrorCode")} if not r["ok"] else {})
        for r in results[5:9]
    ]


#: name -> (calls before the failing one, the failing call, the XAException code Artemis throws)
WRONG_STATE = {
    "commit-unknown": ([], {"op": "xa_commit", "xid": "X"}, XAER_NOTA),
    "rollback-unknown": ([], {"op": "xa_rollback", "xid": "X"}, XAER_NOTA),
    "prepare-unknown": ([], {"op": "xa_prepare", "xid": "X"}, XAER_NOTA),
    "start-twice": ([{"op": "xa_start", "xid": "X"}, {"op": "xa_end", "xid": "X"}], {"op": "xa_start", "xid": "X"}, XAER_DUPID),
    "prepare-not-ended": ([{"op": "xa_start", "xid": "X"}], {"op": "xa_prepare", "xid": "X"}, XAER_PROTO),
    "commit-2pc-not-prepared": (
        [{"op": "xa_start", "xid": "X"}, {"op": "xa_end", "xid": "X"}],
        {"op": "xa_commit", "xid": "X"},
        XA_RETRY,  # Artemis answers ILLEGAL_STATE, "Transaction is in invalid state ACTIVE"
    ),
    "commit-1pc-prepared": (
        [{"op": "xa_start", "xid": "X"}, {"op": "xa_end", "xid": "X"}, {"op": "xa_prepare", "xid": "X"}],
        {"op": "xa_commit", "xid": "X", "onePhase": True},
        XAER_RMFAIL,  # ILLEGAL_STATE, "Transaction is in invalid state PREPARED"
    ),
    "resume-not-suspended": (
        [{"op": "xa_start", "xid": "X"}, {"op": "xa_end", "xid": "X"}],
        {"op": "xa_start", "xid": "X", "flags": "resume"},
        XAER_PROTO,
    ),
}


def scenario_wrong_state(target: Target, jms: JmsClient, case: str) -> None:
    before, failing, code = WRONG_STATE[case]
    x = xid(f"wrong-{case}-{next(_ids)}")
    steps = [{**c, "xid": x} if "xid" in c else c for c in [*before, failing]]
    results = jms.run([target.xa_connect(), *steps], check=False)
    assert [r["ok"] for r in results] == [True] * (len(steps)) + [False], results
    error = results[-1]["error"]
    assert error.get("xaErrorCode") == code, error
    if code in (XA_RETRY, XAER_RMFAIL):
        assert "Transaction is in invalid state" in error["cause"]
    if "prepared" in case:  # clean up what was left prepared
        jms.run([target.xa_connect(), {"op": "xa_rollback", "xid": x}], check=False)


SCENARIOS = {
    "two_phase_commit": scenario_two_phase_commit,
    "rollback": scenario_rollback,
    "one_phase_commit": scenario_one_phase_commit,
}


# -- the targets ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artemis_xa(artemis_module):
    return Target(artemis_module.url, USER)


def _junction_node(tmp, name):
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp),
        name=name,
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port),
    )
    return node, f"tcp://{harness.LOOPBACK}:{port}"


@pytest.fixture(scope="module")
def junction_xa(tmp_path_factory):
    node, url = _junction_node(tmp_path_factory.mktemp("core-xa"), "core-xa")
    node.start()
    try:
        yield Target(url, USER, node)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


@pytest.fixture(params=["artemis", "junction"])
def target(request):
    return request.getfixturevalue(f"{request.param}_xa")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_xa_outcomes(target, jms: JmsClient, name):
    SCENARIOS[name](target, jms)


@pytest.mark.parametrize("case", sorted(WRONG_STATE))
def test_wrong_state_calls_throw_artemis_codes(target, jms: JmsClient, case):
    scenario_wrong_state(target, jms, case)


def test_prepared_branch_survives_kill_9_on_artemis(artemis_factory, jms: JmsClient):
    broker = artemis_factory("xa-crash").start()
    scenario_prepared_survives_kill_9(Target(broker.url, USER, broker), jms)


def test_prepared_branch_survives_kill_9_on_junction(tmp_path, jms: JmsClient):
    node, url = _junction_node(tmp_path, "core-xa-crash")
    node.start()
    try:
        scenario_prepared_survives_kill_9(Target(url, USER, node), jms)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


_END_AFTER_FAILOVER = {"op": "xa_end", "ok": False, "xaErrorCode": XAER_RMFAIL}
_RECOVER = {"op": "xa_recover", "ok": True}
#: what the real client shows with real Artemis after a failover inside a branch, from END on.
#: The client refuses the END itself (XAER_RMFAIL) after rolling its session back (the branch's
#: work goes; the broker keeps the Xid, rolled back, until an XA rollback); a prepare of that
#: Xid is then ignored by the broker (XA_OK), a one-phase commit refused (ILLEGAL_STATE, which
#: the client throws as XAER_RMFAIL) and the Xid forgotten, a rollback finishes it.
FAILOVER_OUTCOMES = {
    "xa_prepare": [
        _END_AFTER_FAILOVER,
        {"op": "xa_prepare", "ok": True},
        {"op": "xa_rollback", "ok": True},
        _RECOVER,
    ],
    "xa_commit": [
        _END_AFTER_FAILOVER,
        {"op": "xa_commit", "ok": False, "xaErrorCode": XAER_RMFAIL},
        {"op": "xa_rollback", "ok": False, "xaErrorCode": XAER_NOTA},
        _RECOVER,
    ],
    "xa_rollback": [
        _END_AFTER_FAILOVER,
        {"op": "xa_rollback", "ok": True},
        {"op": "xa_rollback", "ok": False, "xaErrorCode": XAER_NOTA},
        _RECOVER,
    ],
}


@pytest.mark.parametrize("finish", ["xa_prepare", "xa_commit", "xa_rollback"])
@pytest.mark.parametrize("peer", ["artemis", "junction"])
def test_failover_inside_a_branch(peer, finish, artemis_factory, tmp_path, jms: JmsClient):
    if peer == "artemis":
        # The reference: now and then (about one run in six here) the real client gives up its
        # reconnection to the restarted real broker (FAILOVER_FAILED, with unlimited
        # reconnectAttempts); such a reference run is made again once, on a new broker.  Junction's
        # runs get no second chance.
        for attempt in (1, 2):
            broker = artemis_factory(f"xa-failover-{attempt}").start()
            try:
                outcomes = scenario_failover_inside_a_branch(
                    Target(broker.url, USER, broker), jms, tmp_path / f"restarted-{attempt}", finish
                )
                break
            except FailoverGaveUp:
                if attempt == 2:
                    raise
    else:
        node, url = _junction_node(tmp_path, "core-xa-failover")
        node.start()
        try:
            outcomes = scenario_failover_inside_a_branch(Target(url, USER, node), jms, tmp_path / "restarted", finish)
        finally:
            code = node.stop()
        assert code == 0, f"the node exited with {code}"
    assert outcomes == FAILOVER_OUTCOMES[finish]
