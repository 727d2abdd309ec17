"""XA over CORE packets against a node with a real journal: SESS_XA_* answered as Artemis
answers them, and a prepared branch surviving a crash (unsynced writes lost) to be recovered
and committed."""

from __future__ import annotations

from junction.brokercore.journal import FaultyFiles
from junction.protocols.core import packets as p
from tests.unit.core_fixtures import CoreClient, JournalNode
from tests.unit.test_core_messaging import CH, consume, create_queue, deliveries, send

XID = p.Xid(7, b"branch", b"global")
OK = p.SessXAResponse(False, 0, None, channel_id=CH)


def _xa(client, packet):
    (answer,) = client.send(packet)
    return answer


def test_send_and_ack_in_a_branch_prepared_survive_a_crash_then_commit(tmp_path):
    fs = FaultyFiles()
    node = JournalNode(tmp_path, fs)
    client = CoreClient(node)
    client.open(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    create_queue(client)
    send(client, b"before", durable=True, rr=True)  # outside a branch: sent at once
    (got,) = deliveries(consume(client))
    assert _xa(client, p.SessXAStart(XID, channel_id=CH)) == OK
    assert client.send(p.SessAcknowledge(0, got.headers.message_id, True, channel_id=CH)) == [
        p.NullResponse(-1, channel_id=CH)
    ]
    send(client, b"in-branch", durable=True)
    assert _xa(client, p.SessXAEnd(XID, False, channel_id=CH)) == OK
    assert _xa(client, p.SessXAPrepare(XID, channel_id=CH)) == OK
    assert client.send(p.SessXAGetInDoubtXids(channel_id=CH)) == [p.SessXAGetInDoubtXidsResponse((XID,), channel_id=CH)]

    # the node dies: what was not synced is lost; a new node starts on the same files
    fs2 = fs.crash()
    node2 = JournalNode(tmp_path, fs2)
    queue = node2.server.find_queue("q")
    assert queue.message_count == 1 and queue.in_flight_count == 1  # "before", held by the branch
    client2 = CoreClient(node2)
    client2.open(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    assert deliveries(consume(client2)) == []  # the acked message stays out of reach
    assert client2.send(p.SessXAGetInDoubtXids(channel_id=CH)) == [p.SessXAGetInDoubtXidsResponse((XID,), channel_id=CH)]
    got = client2.send(p.SessXACommit(XID, False, channel_id=CH))
    assert [x for x in got if isinstance(x, p.SessXAResponse)] == [OK]
    assert [d.body for d in deliveries(got)] == [b"in-branch"]
    assert client2.send(p.SessXAGetInDoubtXids(channel_id=CH)) == [p.SessXAGetInDoubtXidsResponse((), channel_id=CH)]

    # and once more after another crash: the commit and the branch's record are gone together
    node3 = JournalNode(tmp_path, fs2.crash())
    assert node3.server.find_queue("q").message_count == 1  # "in-branch" (not yet acknowledged)
    client3 = CoreClient(node3)
    client3.open(xa=True)
    assert client3.send(p.SessXAGetInDoubtXids(channel_id=CH)) == [p.SessXAGetInDoubtXidsResponse((), channel_id=CH)]


def test_rollback_of_a_recovered_branch_gives_the_message_back(tmp_path):
    fs = FaultyFiles()
    node = JournalNode(tmp_path, fs)
    client = CoreClient(node)
    client.open(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    create_queue(client)
    send(client, b"m", durable=True, rr=True)
    (got,) = deliveries(consume(client))
    _xa(client, p.SessXAStart(XID, channel_id=CH))
    client.send(p.SessAcknowledge(0, got.headers.message_id, True, channel_id=CH))
    _xa(client, p.SessXAEnd(XID, False, channel_id=CH))
    _xa(client, p.SessXAPrepare(XID, channel_id=CH))
    node2 = JournalNode(tmp_path, fs.crash())
    client2 = CoreClient(node2)
    client2.open(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    assert deliveries(consume(client2)) == []
    got = client2.send(p.SessXARollback(XID, channel_id=CH))
    assert [x for x in got if isinstance(x, p.SessXAResponse)] == [OK]
    assert [d.body for d in deliveries(got)] == [b"m"]


def test_wrong_state_calls_answer_the_xaexception_code():
    from tests.unit.stomp_fixtures import Broker

    client = CoreClient(Broker())
    client.open(xa=True, auto_commit_sends=False, auto_commit_acks=False)
    nota = _xa(client, p.SessXACommit(XID, False, channel_id=CH))
    assert (nota.error, nota.response_code) == (True, -4) and "Cannot find xid" in nota.message
    _xa(client, p.SessXAStart(XID, channel_id=CH))
    proto = _xa(client, p.SessXAPrepare(XID, channel_id=CH))  # still the session's branch
    assert (proto.error, proto.response_code) == (True, -6)
    _xa(client, p.SessXAEnd(XID, False, channel_id=CH))
    dupid = _xa(client, p.SessXAStart(XID, channel_id=CH))
    assert (dupid.error, dupid.response_code) == (True, -8)
    assert client.send(p.SessXASetTimeout(42, channel_id=CH)) == [p.SessXASetTimeoutResponse(True, channel_id=CH)]
    assert client.send(p.SessXAGetTimeout(channel_id=CH)) == [p.SessXAGetTimeoutResponse(42, channel_id=CH)]
    assert not client.closed
