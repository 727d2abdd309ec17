"""Message groups on one node with STOMP and AMQP clients, against real Artemis and a Junction node.

Differential: each scenario runs against a real Artemis broker and a real Junction node with
the same clients (stomp.py, python-qpid-proton) and the outcomes must be the same.  Each one
is built so that dispatch ignoring the groups -- round robin over two consumers -- would split
a group: three groups sent in turn over two consumers.

* STOMP ``JMSXGroupID`` header: each group's messages reach one consumer, in send order;
* a consumer leaves holding unacknowledged messages of its groups: they and the groups' later
  messages go to the other consumer, in order;
* AMQP ``group-id``: each group to one receiver; ``group-sequence`` -1 closes the group, whose
  next messages go round robin to the other receiver;
* ``default-group-first-key``: the first message of each group, and only it, carries the key;
* ``default-group-rebalance``: a joining consumer takes a share of the groups;
* ``default-group-buckets``: ids hashed into buckets as Artemis's ``SimpleString`` hashes them;
* Junction's management API lists a queue's groups and resets them.

Which consumer a group lands on is the round robin's (the same on both brokers) and is not
asserted beyond "one, and another after the close".
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import stomp
from proton import Message, Timeout
from proton.utils import BlockingConnection

from tests import harness
from tests.integration import test_artemis_peer as peer
from tests.integration.test_amqp_interop import Capabilities

pytestmark = pytest.mark.timeout(60)

#: the address settings both brokers get
SETTINGS = {
    "grp.first.#": {"default-group-first-key": "JMSXFirstInGroupID"},
    "grp.rebalance.#": {"default-group-rebalance": "true"},
    "grp.buckets.#": {"default-group-buckets": "7"},
}
ARTEMIS_OPTIONS = {"amqp": True, "stomp": True, "address_settings": SETTINGS}
USERS = {peer.USER["user"]: (peer.USER["password"], ["amq"])}
ANYCAST = {"destination-type": "ANYCAST"}
SUBSCRIBE = {"subscription-type": "ANYCAST"}
GROUPS = ("A", "B", "C")
QUEUE = Capabilities("queue")
DEADLINE_S = 15
_names = itertools.count()


class _Target:
    def __init__(self, name: str, host: str, amqp_port: int, stomp_port: int, core_port: int, node=None):
        self.name, self.host, self.amqp_port, self.stomp_port = name, host, amqp_port, stomp_port
        self.url = f"tcp://{host}:{core_port}"  # the JMS client's
        self.node = node


@pytest.fixture(scope="module")
def artemis_target(artemis_module):
    b = artemis_module
    return _Target("artemis", b.host, b.amqp_port, b.stomp_port, b.core_port)


@pytest.fixture(scope="module")
def junction_target(tmp_path_factory):
    settings = "".join(
        f'<address-setting match="{match}">'
        + "".join(f"<{k}>{v}</{k}>" for k, v in elements.items())
        + "</address-setting>"
        for match, elements in SETTINGS.items()
    )
    core_port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path_factory.mktemp("groups")), name="groups", security=True, users=USERS,
        address_settings_xml=settings, extra_acceptors_xml=harness.core_acceptor(core_port),
    )
    node.start()
    try:
        yield _Target("junction", harness.LOOPBACK, node.amqp_port, node.stomp_port, core_port, node)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def _name(prefix: str) -> str:
    return f"{prefix}.{next(_names)}.{int(time.time() * 1000)}"


# -- STOMP -------------------------------------------------------------------------------------------
class _Inbox(stomp.ConnectionListener):
    """The MESSAGE frames (headers, body) and the receipts of one connection, as they come."""

    def __init__(self) -> None:
        self.messages: list[tuple[dict, str]] = []
        self.receipts: set[str] = set()
        self._lock = threading.Lock()

    def on_message(self, frame) -> None:
        with self._lock:
            self.messages.append((frame.headers, frame.body))

    def on_receipt(self, frame) -> None:
        self.receipts.add(frame.headers.get("receipt-id"))

    def bodies(self) -> list[str]:
        with self._lock:
            return [body for _, body in self.messages]


def _stomp(target: _Target) -> tuple[stomp.Connection12, _Inbox]:
    inbox = _Inbox()
    conn = stomp.Connection12([(target.host, target.stomp_port)])
    conn.set_listener("t", inbox)
    conn.connect(peer.USER["user"], peer.USER["password"], wait=True)
    return conn, inbox


def _subscribe(conn, inbox: _Inbox, queue: str, ack: str = "auto") -> None:
    """Subscribe and wait for the receipt: the consumer exists before anything is sent."""
    receipt = f"sub-{next(_names)}"
    conn.subscribe(queue, id="1", ack=ack, headers={**SUBSCRIBE, "receipt": receipt})
    harness.wait_for(lambda: receipt in inbox.receipts, DEADLINE_S, what=f"the receipt of {receipt}")


def _send_groups(conn, queue: str, items) -> None:
    for body in items:
        conn.send(queue, body, headers={**ANYCAST, "JMSXGroupID": body[0]})


def _by_group(bodies: list[str]) -> dict[str, list[str]]:
    return {g: [b for b in bodies if b[0] == g] for g in GROUPS if any(b[0] == g for b in bodies)}


def stomp_groups(target: _Target) -> dict:
    """Two STOMP consumers, three groups sent in turn: which consumers each group reached,
    and in what order."""
    queue = _name("grp.stomp")
    (c1, in1), (c2, in2), (producer, _) = _stomp(target), _stomp(target), _stomp(target)
    try:
        _subscribe(c1, in1, queue)
        _subscribe(c2, in2, queue)
        sent = [f"{g}{i}" for i in range(10) for g in GROUPS]
        _send_groups(producer, queue, sent)
        harness.wait_for(lambda: len(in1.bodies()) + len(in2.bodies()) >= len(sent), DEADLINE_S, what="30 messages")
    finally:
        for conn in (c1, c2, producer):
            conn.disconnect()
    got = {"c1": _by_group(in1.bodies()), "c2": _by_group(in2.bodies())}
    return {
        g: {"consumers": sorted(c for c in got if g in got[c]),
            "in order": [b for c in got for b in got[c].get(g, [])] == [b for b in sent if b[0] == g]}
        for g in GROUPS
    }


def test_stomp_each_group_to_one_consumer_in_order(artemis_target, junction_target):
    artemis, junction = stomp_groups(artemis_target), stomp_groups(junction_target)
    for g in GROUPS:
        assert len(artemis[g]["consumers"]) == 1 and artemis[g]["in order"], (g, artemis)
    assert junction == artemis


def stomp_owner_leaves(target: _Target) -> dict:
    """Two STOMP consumers (client-individual, nothing acknowledged); the owner of group A
    disconnects: what the other receives of each group, in order."""
    queue = _name("grp.leave")
    (c1, in1), (c2, in2), (producer, _) = _stomp(target), _stomp(target), _stomp(target)
    try:
        _subscribe(c1, in1, queue, ack="client-individual")
        _subscribe(c2, in2, queue, ack="client-individual")
        first = [f"{g}{i}" for i in range(2) for g in GROUPS]
        _send_groups(producer, queue, first)
        harness.wait_for(lambda: len(in1.bodies()) + len(in2.bodies()) >= len(first), DEADLINE_S, what="6 messages")
        leaving, staying = ((c1, in1), (c2, in2)) if "A0" in in1.bodies() else ((c2, in2), (c1, in1))
        held_by_leaver = sorted({b[0] for b in leaving[1].bodies()})
        already = len(staying[1].bodies())
        leaving[0].disconnect()
        later = [f"{g}2" for g in GROUPS]
        _send_groups(producer, queue, later)
        # the stayer gets every message of the leaver's groups again, and all later ones
        expect = already + 2 * len(held_by_leaver) + len(later)
        harness.wait_for(lambda: len(staying[1].bodies()) >= expect, DEADLINE_S, what=f"{expect} messages")
        after = staying[1].messages[already:]
    finally:
        for conn in (c1, c2, producer):
            if conn.is_connected():
                conn.disconnect()
    return {
        "groups of the leaver": held_by_leaver,
        "the stayer then got": _by_group([b for _, b in after]),
    }


def test_stomp_a_leaving_consumer_s_groups_move_in_order(artemis_target, junction_target):
    artemis, junction = stomp_owner_leaves(artemis_target), stomp_owner_leaves(junction_target)
    assert "A" in artemis["groups of the leaver"]
    for g in artemis["groups of the leaver"]:
        assert artemis["the stayer then got"][g] == [f"{g}0", f"{g}1", f"{g}2"], artemis
    assert junction == artemis


def stomp_first_key(target: _Target) -> dict:
    """default-group-first-key on the address: which messages a consumer sees it on."""
    queue = _name("grp.first")
    (c1, in1), (c2, in2), (producer, _) = _stomp(target), _stomp(target), _stomp(target)
    try:
        _subscribe(c1, in1, queue)
        _subscribe(c2, in2, queue)
        sent = [f"{g}{i}" for i in range(3) for g in GROUPS]
        _send_groups(producer, queue, sent)
        harness.wait_for(lambda: len(in1.messages) + len(in2.messages) >= len(sent), DEADLINE_S, what="9 messages")
    finally:
        for conn in (c1, c2, producer):
            conn.disconnect()
    everything = in1.messages + in2.messages
    return {
        "flagged": sorted(b for h, b in everything if "JMSXFirstInGroupID" in h),
        "values": sorted({h["JMSXFirstInGroupID"] for h, _ in everything if "JMSXFirstInGroupID" in h}),
    }


def test_group_first_key_on_each_group_s_first_message(artemis_target, junction_target):
    artemis, junction = stomp_first_key(artemis_target), stomp_first_key(junction_target)
    assert artemis == {"flagged": ["A0", "B0", "C0"], "values": ["true"]}
    assert junction == artemis


def stomp_rebalance(target: _Target) -> dict:
    """default-group-rebalance on the address: groups A, B, C on two consumers, then a third
    joins: where each group's next message goes."""
    queue = _name("grp.rebalance")
    conns = [_stomp(target) for _ in range(4)]
    (c1, in1), (c2, in2), (c3, in3), (producer, _) = conns
    try:
        _subscribe(c1, in1, queue)
        _subscribe(c2, in2, queue)
        _send_groups(producer, queue, ["A0", "B0", "C0"])
        harness.wait_for(lambda: len(in1.bodies()) + len(in2.bodies()) >= 3, DEADLINE_S, what="3 messages")
        before = {"c1": in1.bodies(), "c2": in2.bodies()}
        _subscribe(c3, in3, queue)
        _send_groups(producer, queue, ["A1", "B1", "C1"])
        inboxes = {"c1": in1, "c2": in2, "c3": in3}
        harness.wait_for(lambda: sum(len(i.bodies()) for i in inboxes.values()) >= 6, DEADLINE_S, what="6 messages")
    finally:
        for conn, _ in conns:
            conn.disconnect()
    after = {c: [b for b in inbox.bodies() if b.endswith("1")] for c, inbox in inboxes.items()}
    return {"owners before": sorted(sorted(v) for v in before.values()), "next messages": sorted(map(len, after.values()))}


def test_group_rebalance_spreads_groups_over_a_joining_consumer(artemis_target, junction_target):
    artemis, junction = stomp_rebalance(artemis_target), stomp_rebalance(junction_target)
    # two consumers took A, B, C round robin; after the third joined, one group each
    assert artemis == {"owners before": [["A0", "C0"], ["B0"]], "next messages": [1, 1, 1]}
    assert junction == artemis


#: group ids for the bucket test: ASCII, Latin-1 and CJK (the hash is over UTF-16LE signed bytes)
BUCKET_IDS = ("groupA", "groupB", "groupC", "é-1", "ü-2", "日本", "x", "y", "z", "w", "Ωmega")


def stomp_buckets(target: _Target) -> dict:
    """default-group-buckets 7 on the address, three consumers: which group ids end up
    sharing a consumer (buckets hashed as Artemis does, owners picked round robin)."""
    queue = _name("grp.buckets")
    conns = [_stomp(target) for _ in range(4)]
    producer = conns[3][0]
    try:
        for conn, inbox in conns[:3]:
            _subscribe(conn, inbox, queue)
        for i in range(2):
            for gid in BUCKET_IDS:
                producer.send(queue, f"{gid}|{i}", headers={**ANYCAST, "JMSXGroupID": gid})
        total = 2 * len(BUCKET_IDS)
        harness.wait_for(lambda: sum(len(i.bodies()) for _, i in conns[:3]) >= total, DEADLINE_S, what="the messages")
    finally:
        for conn, _ in conns:
            conn.disconnect()
    shares = [sorted({b.split("|")[0] for b in inbox.bodies()}) for _, inbox in conns[:3]]
    return {"sharing a consumer": sorted(s for s in shares if s)}


def test_group_buckets_hash_as_artemis_does(artemis_target, junction_target):
    artemis, junction = stomp_buckets(artemis_target), stomp_buckets(junction_target)
    # buckets by SimpleString's hash, new buckets' owners round robin over three consumers
    # (Java's String.hashCode would give [groupA y é-1 Ωmega] [groupB x z ü-2 日本] [groupC w])
    assert artemis == {"sharing a consumer": [
        ["groupA", "w", "日本"], ["groupB", "x", "z", "é-1", "ü-2"], ["groupC", "y", "Ωmega"]]}
    assert junction == artemis


# -- AMQP ----------------------------------------------------------------------------------------------
def _amqp(target: _Target) -> BlockingConnection:
    return BlockingConnection(
        f"amqp://{target.host}:{target.amqp_port}", user=peer.USER["user"], password=peer.USER["password"],
        allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=15,
    )


def _drain(receivers: dict, count: int) -> dict[str, list[Message]]:
    """Receive ``count`` messages in all from the receivers (name -> receiver), polling each."""
    got: dict[str, list[Message]] = {name: [] for name in receivers}
    deadline = time.monotonic() + DEADLINE_S
    while sum(map(len, got.values())) < count:
        assert time.monotonic() < deadline, f"only {got} of {count}"
        for name, receiver in receivers.items():
            try:
                got[name].append(receiver.receive(timeout=0.1))
                receiver.accept()
            except Timeout:
                pass
    return got


def amqp_groups(target: _Target) -> dict:
    """Two receivers; three groups by ``group-id``; then group G: a run closed by
    ``group-sequence`` -1, and a second run."""
    queue = _name("grp.amqp")
    conn = _amqp(target)
    try:
        receivers = {r: conn.create_receiver(queue, name=r, credit=10, options=[QUEUE]) for r in ("r1", "r2")}
        sender = conn.create_sender(queue, name="s", options=[QUEUE])
        sent = [f"{g}{i}" for i in range(10) for g in GROUPS]
        for body in sent:
            sender.send(Message(body=body, group_id=body[0], durable=True))
        got = _drain(receivers, len(sent))
        by_group = {
            g: {"receivers": sorted(r for r in got if any(m.body[0] == g for m in got[r])),
                "in order": [m.body for r in got for m in got[r] if m.body[0] == g] == [b for b in sent if b[0] == g]}
            for g in GROUPS
        }
        run1 = [("G1", 1), ("G2", 2), ("G-close", -1)]
        for body, seq in run1:  # group-sequence is a uint: -1 goes as 4294967295 (a Java int -1)
            sender.send(Message(body=body, group_id="G", group_sequence=seq & 0xFFFFFFFF, durable=True))
        first = _drain(receivers, len(run1))
        sender.send(Message(body="G-again", group_id="G", group_sequence=1, durable=True))
        second = _drain(receivers, 1)
    finally:
        conn.close()
    return {
        "groups": by_group,
        "run closed by -1": sorted((r, [m.body for m in ms]) for r, ms in first.items() if ms),
        "the next run went to the other receiver": [r for r, ms in second.items() if ms]
        != [r for r, ms in first.items() if ms],
        "group sequences seen": sorted({m.group_sequence for ms in first.values() for m in ms}),
    }


def test_amqp_group_id_and_sequence_minus_one(artemis_target, junction_target):
    artemis, junction = amqp_groups(artemis_target), amqp_groups(junction_target)
    for g in GROUPS:
        assert len(artemis["groups"][g]["receivers"]) == 1 and artemis["groups"][g]["in order"], artemis
    [(_, run)] = artemis["run closed by -1"]
    assert run == ["G1", "G2", "G-close"]
    assert artemis["the next run went to the other receiver"] is True
    assert [r for r, _ in junction["run closed by -1"]] and junction["groups"] == artemis["groups"]
    assert (junction["the next run went to the other receiver"], junction["group sequences seen"]) == (
        True, artemis["group sequences seen"])
    [(_, run)] = junction["run closed by -1"]
    assert run == ["G1", "G2", "G-close"]


# -- management (Junction's) ------------------------------------------------------------------------
def _api(node, method: str, path: str, *, login: bool = True) -> tuple[int, dict]:
    request = urllib.request.Request(node.mgmt_url + path, method=method)
    if login:
        token = base64.b64encode(f"{peer.USER['user']}:{peer.USER['password']}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_management_lists_and_resets_a_queue_s_groups(junction_target):
    node = junction_target.node
    queue = _name("grp.mgmt")
    (c1, in1), (c2, in2), (producer, _) = _stomp(junction_target), _stomp(junction_target), _stomp(junction_target)
    try:
        _subscribe(c1, in1, queue)
        _subscribe(c2, in2, queue)
        _send_groups(producer, queue, ["A0", "B0", "C0"])
        producer.send(queue, "slash", headers={**ANYCAST, "JMSXGroupID": "x/y"})
        harness.wait_for(lambda: len(in1.bodies()) + len(in2.bodies()) >= 4, DEADLINE_S, what="4 messages")
        code, listed = _api(node, "GET", f"/api/queues/{queue}/groups", login=False)
        assert code == 200 and (listed["grouping"], listed["group_count"], listed["truncated"]) == (True, 4, False)
        owner = {g["group"]: g["consumer"] for g in listed["groups"]}
        assert sorted(owner) == ["A", "B", "C", "x/y"] and owner["A"] == owner["C"] != owner["B"]
        assert _api(node, "GET", f"/api/queues/{queue}", login=False)[1]["group_count"] == 4
        one = _api(node, "GET", f"/api/queues/{queue}/groups/{urllib.parse.quote('x/y', safe='')}", login=False)[1]
        assert one["groups"] == [{"group": "x/y", "consumer": owner["x/y"]}]
        # a reset needs manage: without credentials nothing changes
        assert _api(node, "DELETE", f"/api/queues/{queue}/groups/A", login=False)[0] == 401
        assert _api(node, "DELETE", f"/api/queues/{queue}/groups/A") == (200, {"queue": queue, "reset": "A"})
        listed = _api(node, "GET", f"/api/queues/{queue}/groups")[1]
        assert sorted(g["group"] for g in listed["groups"]) == ["B", "C", "x/y"]
        assert _api(node, "DELETE", f"/api/queues/{queue}/groups") == (200, {"queue": queue, "reset": "all"})
        assert _api(node, "GET", f"/api/queues/{queue}/groups")[1]["groups"] == []
        assert _api(node, "GET", "/api/queues/no.such.queue/groups")[0] == 404
    finally:
        for conn in (c1, c2, producer):
            conn.disconnect()


# -- across protocols ------------------------------------------------------------------------------
def to_jms(target: _Target, jms) -> dict:
    """A STOMP producer's JMSXGroupID header and an AMQP producer's group-id and group-sequence,
    read by the Artemis JMS client (over CORE) as JMSXGroupID and JMSXGroupSeq."""
    queue = _name("grp.cross")
    conn, _ = _stomp(target)
    try:
        conn.send(queue, "from stomp", headers={**ANYCAST, "JMSXGroupID": "S", "receipt": "r1"})
    finally:
        conn.disconnect()
    amqp = _amqp(target)
    try:
        amqp.create_sender(queue, name="s", options=[QUEUE]).send(
            Message(body="from amqp", group_id="Q", group_sequence=5, durable=True))
    finally:
        amqp.close()
    results = jms.run([peer.connect(target), {"op": "receive", "queue": queue, "count": 2, "timeout": 5000}])
    # the STOMP message is a BytesMessage (stomp.py sends a content-length): its body is base64
    return {
        ("from stomp" if m["type"] == "bytes" else m["body"]): {
            k: m["properties"].get(k) for k in ("JMSXGroupID", "JMSXGroupSeq")}
        for m in results[-1]["messages"]
    }


def test_the_group_fields_reach_a_jms_consumer_from_stomp_and_amqp(artemis_target, junction_target, jms):
    artemis, junction = to_jms(artemis_target, jms), to_jms(junction_target, jms)
    assert artemis == {
        "from stomp": {"JMSXGroupID": "S", "JMSXGroupSeq": None},
        "from amqp": {"JMSXGroupID": "Q", "JMSXGroupSeq": {"int": 5}},
    }
    assert junction == artemis
