"""XA over OpenWire, by the real Classic clients (``ActiveMQXAConnectionFactory``): a Junction
node against the real ActiveMQ Classic and Artemis brokers.

Each test runs against the three; where the peers answer differently the test says what
each answers (the XAException's ``errorCode`` the application sees) and why Junction answers
what it does (docs/openwire.md, "XA transactions"):

* an unknown Xid: Junction and Classic XAER_NOTA (Classic's prepare XAER_RMFAIL); Artemis's
  OpenWire adapter answers with exceptions the client reads no code from, so XAER_RMFAIL;
* the wrong-phase commits (two-phase of a branch never prepared, one-phase of a prepared
  one): Junction XAER_PROTO, the branch left as it was, so it can still finish properly;
  Classic XAER_PROTO for the first and commits the second; Artemis XAER_RMFAIL for both;
* the prepare of a branch that did nothing: XA_OK (Junction and Artemis, the branch is
  prepared) or XA_RDONLY (Classic, the branch is over);
* forget of a prepared branch: XAER_NOTA on a node (no heuristic outcome is ever kept),
  XAER_RMFAIL on Artemis, and Classic rolls it back; a start of it again: refused on a node.

The resource manager is the broker's: a branch prepared over CORE (the Artemis JMS client)
is finished over OpenWire, on a node as on Artemis.

Recovery after kill -9 with consumer acks and sends in the same branches (a branch acked
messages on one queue and sent to another) runs on brokers of the test's own; the refusals
on the module's shared peers with the 5.17 client (both clients share the XAResource code
that reads the answers: ``TransactionContext``).  Recovered lists are filtered to the test's
own Xids, since a shared peer keeps other tests' prepared branches.
"""

from __future__ import annotations

import pytest

from tests.classic import OpenWireClient
from tests.harness import core_acceptor, free_port, wait_for
from tests.integration.test_openwire_peers import Target, bodies, new_name, own_peer, peer_target

pytestmark = pytest.mark.timeout(60)

#: the module's shared peers: Artemis's main acceptor takes OpenWire
ARTEMIS_OPTIONS = {"protocols": "CORE,OPENWIRE"}
USERS = {"admin": ("admin", "admin")}
KINDS = ("classic", "artemis", "junction")

# javax.transaction.xa.XAException codes
XA_OK, XA_RDONLY = 0, 3
XAER_RMFAIL, XAER_NOTA, XAER_PROTO = -7, -4, -6


def _node(request: pytest.FixtureRequest, client: OpenWireClient) -> Target:
    port = free_port()
    node = request.getfixturevalue("broker_factory")(
        "ow-xa", security=True, users=USERS,
        extra_acceptors_xml=f'<acceptor name="openwire">tcp://127.0.0.1:{port}?protocols=OPENWIRE</acceptor>',
    ).start()  # fmt: skip
    return Target("junction", node, "127.0.0.1", port, client)


@pytest.fixture
def client517(openwire_clients, tmp_path) -> OpenWireClient:
    client = openwire_clients("5.17", tmp_path / "openwire-5.17")
    yield client
    client.close()


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, client517: OpenWireClient) -> Target:
    """A shared peer of the module or a node of the test's own, with the 5.17 client."""
    if request.param == "junction":
        return _node(request, client517)
    return peer_target(request.param, request.getfixturevalue(f"{request.param}_module"), client517)


@pytest.fixture(params=KINDS)
def own(request: pytest.FixtureRequest, openwire_client: OpenWireClient) -> Target:
    """A broker of the test's own (for kill -9), with one of the two clients."""
    if request.param == "junction":
        return _node(request, openwire_client)
    return own_peer(request, request.param, openwire_client)


def xid(name: str) -> dict:
    return {"format": 7, "gtrid": name, "bqual": "b"}


def refused(t: Target, *commands: dict) -> dict:
    """Run ``commands`` on a new XA connection; the last must fail: its error."""
    results = t.run([t.connect("xa_connect"), *commands], check=False)
    assert len(results) == len(commands) + 1, results
    assert all(r["ok"] for r in results[:-1]), results
    last = results[-1]
    assert not last["ok"], f"{last['op']} was not refused: {last}"
    return last["error"]


def holding(t: Target, commands: list[dict]):
    """Run ``commands`` on an XA connection kept open afterwards (until the run is killed);
    returns the run once every command has answered."""
    commands = [t.connect("xa_connect"), *commands, {"op": "temp_queue", "id": "idle"},
                {"op": "receive", "temp": "idle", "timeout": 50000}]  # fmt: skip
    run = t.start(commands)
    wait_for(lambda: len(run.results) >= len(commands) - 1, 30, what="the XA branches")
    assert all(r["ok"] for r in run.results), run.results
    return run


def own_xids(result: dict, names) -> list[str]:
    return sorted(x["gtrid"] for x in result["xids"] if x["gtrid"] in names)


def drained(t: Target, queue: str) -> list:
    """The bodies ``queue`` holds, up to a marker sent now (which ends the list)."""
    after = t.run(
        [
            t.connect(),
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 20, "until": "marker"},
        ]
    )
    return bodies(after[2])


# ------------------------------------------------------------------------------ refusals

#: what the application's XAException says (its errorCode) for a call naming an unknown Xid
UNKNOWN_XID = {
    "junction": {"commit": XAER_NOTA, "commit-1pc": XAER_NOTA, "rollback": XAER_NOTA, "prepare": XAER_NOTA,
                 "forget": XAER_NOTA},
    "classic": {"commit": XAER_NOTA, "commit-1pc": XAER_NOTA, "rollback": XAER_NOTA, "prepare": XAER_RMFAIL,
                "forget": XAER_NOTA},
    "artemis": {"commit": XAER_RMFAIL, "commit-1pc": XAER_RMFAIL, "rollback": XAER_RMFAIL,
                "prepare": XAER_RMFAIL, "forget": XAER_RMFAIL},
}  # fmt: skip


def test_unknown_xid_refused(target: Target):
    """Every call naming an Xid the broker does not know is refused; the code the client
    throws is XAER_NOTA on a node (what a transaction manager's recovery takes as "already
    finished"), and the class an XAException on all three."""
    unknown = xid(new_name("unknown"))
    calls = {
        "commit": {"op": "xa_commit", "xid": unknown},
        "commit-1pc": {"op": "xa_commit", "xid": unknown, "onePhase": True},
        "rollback": {"op": "xa_rollback", "xid": unknown},
        "prepare": {"op": "xa_prepare", "xid": unknown},
        "forget": {"op": "xa_forget", "xid": unknown},
    }
    got = {}
    for name, command in calls.items():
        error = refused(target, command)
        assert error["class"] == "javax.transaction.xa.XAException", error
        got[name] = error["xaErrorCode"]
    assert got == UNKNOWN_XID[target.kind]


#: the errorCode of a two-phase commit of a branch never prepared, and of a one-phase commit
#: of a prepared one (None: committed)
WRONG_PHASE = {
    "junction": (XAER_PROTO, XAER_PROTO),
    "classic": (XAER_PROTO, None),
    "artemis": (XAER_RMFAIL, XAER_RMFAIL),
}


def test_wrong_phase_commits_refused_and_the_branch_kept(target: Target):
    """A two-phase commit of a branch that was only ended, and a one-phase commit of a
    prepared one, from a new connection while the first holds its own open.  On a node both
    are XAER_PROTO and change nothing: the ended branch then commits in one phase, the
    prepared one is still in doubt and commits in two; each message arrives once."""
    t = target
    queue = new_name("phase")
    ended, prepared = xid(new_name("ended")), xid(new_name("prepared"))
    run = holding(t, [
        {"op": "xa_start", "xid": ended}, {"op": "send", "queue": queue, "body": "ended"},
        {"op": "xa_end", "xid": ended},
        {"op": "xa_start", "xid": prepared}, {"op": "send", "queue": queue, "body": "prepared"},
        {"op": "xa_end", "xid": prepared}, {"op": "xa_prepare", "xid": prepared},
    ])  # fmt: skip
    try:
        two_phase, one_phase = WRONG_PHASE[t.kind]
        assert refused(t, {"op": "xa_commit", "xid": ended})["xaErrorCode"] == two_phase
        results = t.run([t.connect("xa_connect"), {"op": "xa_commit", "xid": prepared, "onePhase": True}], check=False)
        assert (results[1]["error"]["xaErrorCode"] if not results[1]["ok"] else None) == one_phase
        finish = [{"op": "xa_commit", "xid": ended, "onePhase": True}, {"op": "xa_recover"}]
        if one_phase is not None:  # still prepared: it commits in two phases
            finish.append({"op": "xa_commit", "xid": prepared})
        results = t.run([t.connect("xa_connect"), *finish])
        names = {ended["gtrid"], prepared["gtrid"]}
        assert own_xids(results[2], names) == ([] if one_phase is None else [prepared["gtrid"]])
    finally:
        run.kill()
    assert sorted(drained(t, queue)) == ["ended", "marker", "prepared"]


def test_prepare_of_an_empty_branch(target: Target):
    """A branch that did nothing: a node prepares it (XA_OK, and it is in doubt until
    rolled back), as Artemis does; Classic answers XA_RDONLY and forgets it."""
    t = target
    empty = xid(new_name("empty"))
    commands = [t.connect("xa_connect"), {"op": "xa_start", "xid": empty}, {"op": "xa_end", "xid": empty},
                {"op": "xa_prepare", "xid": empty}, {"op": "xa_recover"}]  # fmt: skip
    if t.kind != "classic":
        commands += [{"op": "xa_rollback", "xid": empty}, {"op": "xa_recover"}]
    results = t.run(commands)
    assert results[3]["vote"] == (XA_RDONLY if t.kind == "classic" else XA_OK)
    assert own_xids(results[4], {empty["gtrid"]}) == ([] if t.kind == "classic" else [empty["gtrid"]])
    if t.kind != "classic":
        assert own_xids(results[6], {empty["gtrid"]}) == []


# ------------------------------------------------------------------------------ acks and sends


def test_xa_acks_and_sends_survive_kill9_then_recovered(own: Target):
    """A consumer's acks and a producer's sends in the same XA branches.  A branch rolled back
    on its own connection: the client redelivers the message itself, once, flagged
    redelivered.  Then two branches each take messages from one queue and send to another,
    are prepared, and the broker is killed (-9).  After the restart, from a new connection,
    ``recover`` lists both; the one committed has consumed its messages and delivered its
    send, the one rolled back gives its message back and delivered nothing: every message
    once."""
    t = own
    source, sink = new_name("xa.in"), new_name("xa.out")
    first, second, undone = xid(new_name("first")), xid(new_name("second")), xid(new_name("undone"))
    t.run([t.connect(), {"op": "send", "queue": source, "body": "m{i}", "count": 4}])
    receive = {"op": "receive", "consumer": "c"}
    run = holding(t, [
        {"op": "consumer", "id": "c", "queue": source},
        {"op": "xa_start", "xid": undone}, {**receive, "count": 1},
        {"op": "xa_end", "xid": undone}, {"op": "xa_rollback", "xid": undone},
        {"op": "xa_start", "xid": first}, {**receive, "count": 2},
        {"op": "send", "queue": sink, "body": "from first"},
        {"op": "xa_end", "xid": first}, {"op": "xa_prepare", "xid": first},
        {"op": "xa_start", "xid": second}, {**receive, "count": 1},
        {"op": "send", "queue": sink, "body": "from second"},
        {"op": "xa_end", "xid": second}, {"op": "xa_prepare", "xid": second},
    ])  # fmt: skip
    got = [r["messages"] for r in run.results if r["op"] == "receive"]
    assert [[m["body"] for m in batch] for batch in got] == [["m0"], ["m0", "m1"], ["m2"]]
    assert [m["redelivered"] for m in got[1]] == [True, False]
    assert [r["vote"] for r in run.results if r["op"] == "xa_prepare"] == [XA_OK, XA_OK]
    t.broker.kill9()
    run.kill()
    t.broker.start()

    names = {first["gtrid"], second["gtrid"], undone["gtrid"]}
    recovered = t.run(
        [
            t.connect("xa_connect"),
            {"op": "xa_recover"},
            {"op": "xa_commit", "xid": first},
            {"op": "xa_rollback", "xid": second},
            {"op": "xa_recover"},
        ]
    )
    assert own_xids(recovered[1], names) == sorted([first["gtrid"], second["gtrid"]])
    assert own_xids(recovered[4], names) == []
    left = drained(t, source)
    assert sorted(left[:-1]) == ["m2", "m3"] and left[-1] == "marker"
    assert drained(t, sink) == ["from first", "marker"]


#: a prepared branch: what forget answers (None: forgotten, rolled back), and what end answers
#: after the client's start of it again (its BEGIN, sent without waiting)
PREPARED_BRANCH = {
    "junction": (XAER_NOTA, XAER_PROTO),
    "classic": (None, None),
    "artemis": (XAER_RMFAIL, None),
}


def test_forget_start_and_end_of_a_prepared_branch(target: Target):
    """A prepared branch is not forgotten on a node (no heuristic outcome is ever kept:
    XAER_NOTA, as Artemis's resource manager answers; Classic rolls it back), nor started
    again: the client hears XAER_DUPID on its exception listener (the BEGIN was not waited
    for) and its END is refused XAER_PROTO.  The branch is still in doubt and rolls back."""
    t = target
    queue = new_name("forget")
    prepared = xid(new_name("prepared"))
    t.run([t.connect("xa_connect"), {"op": "xa_start", "xid": prepared}, {"op": "send", "queue": queue, "body": "p"},
           {"op": "xa_end", "xid": prepared}, {"op": "xa_prepare", "xid": prepared}])  # fmt: skip
    forget, end = PREPARED_BRANCH[t.kind]
    results = t.run([t.connect("xa_connect"), {"op": "xa_forget", "xid": prepared}], check=False)
    assert (None if results[1]["ok"] else results[1]["error"]["xaErrorCode"]) == forget
    steps = [t.connect("xa_connect"), {"op": "xa_start", "xid": prepared}, {"op": "xa_end", "xid": prepared}]
    if t.kind == "junction":  # the listener runs on the client's own thread: wait for it
        steps.insert(2, {"op": "await_exceptions", "count": 1, "timeout": 10000})
    run = t.start(steps)
    results = run.wait(check=False)
    assert (None if results[-1]["ok"] else results[-1]["error"]["xaErrorCode"]) == end
    if t.kind == "junction":
        assert results[2]["exceptions"] == 1, results[2]
        (event,) = [e for e in run.events if e["event"] == "exception"]
        assert event["error"]["message"].endswith("xaErrorCode:-8"), event
    if forget is not None:  # still prepared: it rolls back
        results = t.run([t.connect("xa_connect"), {"op": "xa_recover"}, {"op": "xa_rollback", "xid": prepared}])
        assert own_xids(results[1], {prepared["gtrid"]}) == [prepared["gtrid"]]
    assert drained(t, queue) == ["marker"]


@pytest.mark.parametrize("kind", ["artemis", "junction"])
def test_branch_prepared_over_core_finished_over_openwire(request: pytest.FixtureRequest, kind: str,
                                                          client517: OpenWireClient, jms):
    """The resource manager is the broker's, not a protocol's: a branch the Artemis JMS client
    prepared over CORE is recovered and committed by the Classic client over OpenWire, on a
    node as on Artemis."""
    if kind == "junction":
        ow_port, core_port = free_port(), free_port()
        node = request.getfixturevalue("broker_factory")(
            "ow-core-xa", security=True, users=USERS,
            extra_acceptors_xml=(f'<acceptor name="openwire">tcp://127.0.0.1:{ow_port}?protocols=OPENWIRE</acceptor>'
                                 + core_acceptor(core_port)),
        ).start()  # fmt: skip
        t, core_url = Target("junction", node, "127.0.0.1", ow_port, client517), f"tcp://127.0.0.1:{core_port}"
    else:
        broker = request.getfixturevalue("artemis_module")
        t, core_url = peer_target("artemis", broker, client517), broker.url
    queue = new_name("core.xa")
    branch = xid(new_name("core"))
    jms.run([{"op": "xa_connect", "url": core_url, **t.login}, {"op": "xa_start", "xid": branch},
             {"op": "send", "queue": queue, "body": "over CORE"}, {"op": "xa_end", "xid": branch},
             {"op": "xa_prepare", "xid": branch}])  # fmt: skip
    results = t.run([t.connect("xa_connect"), {"op": "xa_recover"}, {"op": "xa_commit", "xid": branch}])
    assert own_xids(results[1], {branch["gtrid"]}) == [branch["gtrid"]]
    assert drained(t, queue) == ["over CORE", "marker"]


def test_suspend_and_resume_then_one_phase_commit(target: Target):
    """``end(TMSUSPEND)`` and ``start(TMRESUME)`` send END and BEGIN again (OpenWire has no
    flags): the branch goes on, and its one-phase commit delivers what it sent before and
    after, once."""
    t = target
    queue = new_name("resume")
    branch = xid(new_name("resumed"))
    t.run([
        t.connect("xa_connect"),
        {"op": "xa_start", "xid": branch}, {"op": "send", "queue": queue, "body": "before"},
        {"op": "xa_end", "xid": branch, "flags": "suspend"},
        {"op": "xa_start", "xid": branch, "flags": "resume"}, {"op": "send", "queue": queue, "body": "after"},
        {"op": "xa_end", "xid": branch}, {"op": "xa_commit", "xid": branch, "onePhase": True},
    ])  # fmt: skip
    assert drained(t, queue) == ["before", "after", "marker"]
