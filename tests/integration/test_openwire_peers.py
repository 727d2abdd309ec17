"""OpenWire acceptance scenarios, run by the real ActiveMQ Classic clients against real peers.

Each scenario is a function of a :class:`Target` -- a broker speaking OpenWire and one of the
two real clients (``openwire_client``: Debian's 5.17, javax.jms; the 6.x, jakarta.jms) -- and
asserts the outcome the JMS contract and both peers give.  Here every scenario runs against
the real ActiveMQ Classic broker (Debian's 5.17.2) and the real Artemis broker (its acceptor
taking OPENWIRE), with both clients: four targets.  A Junction node with an OpenWire acceptor
is one more target: its module builds ``Target("junction", node, host, port, client, ...)``
(``node`` a :class:`tests.harness.BrokerProcess`, which has ``kill9()`` and ``start()``) and
calls these test functions with it, unchanged, as tests/integration/test_core_jms.py does
with test_artemis_peer.py.

The peers agree wherever an assertion is exact; where they legitimately differ, the
assertion is what both guarantee and the test says what differs and why:

* where a non-persistent message comes among persistent ones on a queue (Artemis: by
  priority and arrival; Classic: after them, from a cursor of its own);
* whether another connection may reply to a temporary queue while its client watches the
  advisory topics (Classic announces temporary destinations; Artemis as ``artemis create``
  makes it does not, and the client refuses the send): :attr:`Target.temp_advisories`;
* which of two consumers a message group is pinned to (only the pinning is asserted);
* ``JMSXDeliveryCount`` among the property names (the 6.x client lists it, 5.17 does not):
  the scenarios compare the properties they sent, and the count by ``deliveryCount``;
* the STOMP destination of a queue (``/queue/q`` on Classic; ``q`` with an ANYCAST header on
  Artemis): :attr:`Target.stomp_queue_prefix`;
* whether an exclusive consumer (``consumer.exclusive=true``) gets a queue's messages alone:
  Classic honours it, Artemis's OpenWire adapter never reads ConsumerInfo's ``exclusive`` (its
  queues are exclusive only by their own attribute): :attr:`Target.exclusive_consumers`.

A send replayed by the ``failover:`` transport after a kill -9 is recognised as a duplicate
by both peers: none is allowed.

Shared brokers (one Classic, one Artemis per module; each takes seconds to start) serve the
scenarios, each on destinations of its own; the kill -9 scenarios get brokers of their own.
"Nothing else arrived" is proved by ordering -- a marker sent last is the last message
received -- not by waiting; readiness and progress are polled with deadlines.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
import stomp

from tests.artemis.broker import router_xml
from tests.artemis.jms import JmsRun, b64
from tests.classic import OpenWireClient
from tests.harness import wait_for
from tests.integration import test_artemis_peer as peer

pytestmark = pytest.mark.timeout(60)

#: the module's shared peers: Artemis's main acceptor takes OpenWire (and CORE, for checks
#: with the Artemis client); both run STOMP for cross-protocol tests
ARTEMIS_OPTIONS = {"protocols": "CORE,OPENWIRE", "stomp": True}
CLASSIC_OPTIONS = {"stomp": True}
#: the Artemis peer of the kill -9 tests flushes its journal (with an fsync) at most 0.1 ms
#: after a write, as ``artemis create``'s journal auto-tuning would set it on a fast disk;
#: without auto-tuning the NIO journal waits 3.3 ms, so one producer's synchronous sends
#: run at 300 a second and 10,000 would take over half a minute
ARTEMIS_SYNC_JOURNAL = "<journal-buffer-timeout>100000</journal-buffer-timeout>"
PEERS = ("classic", "artemis")
USER = {"user": "admin", "password": "admin"}
#: the failover transport's reconnect pacing for tests: every 100 ms, no back-off (the client's
#: defaults back off exponentially to 30 s)
FAILOVER_OPTIONS = {
    "randomize": "false", "initialReconnectDelay": "100", "maxReconnectDelay": "500",
    "useExponentialBackOff": "false",
}  # fmt: skip
#: the OpenWire version both clients and both peers speak (v12)
OPENWIRE_VERSION = 12

_ids = itertools.count(1)


def new_name(prefix: str) -> str:
    return f"ow.{prefix}.{next(_ids)}"


@dataclass
class Target:
    """A broker speaking OpenWire, and the real client to talk to it with.

    ``broker`` is what the kill -9 scenarios stop and start (``kill9()``, ``start()``);
    ``host``/``port`` its OpenWire endpoint.
    """

    kind: str  # classic | artemis | junction
    broker: Any
    host: str
    port: int
    client: OpenWireClient
    login: dict = field(default_factory=lambda: dict(USER))
    #: whether the broker tells every connection about temporary destinations (advisory
    #: messages on ActiveMQ.Advisory.TempQueue/TempTopic): Classic does; Artemis as ``artemis
    #: create`` makes it does not (its acceptor's ``supportAdvisory=false``)
    temp_advisories: bool = True
    #: the broker's STOMP port, and what its STOMP destinations of queues start with (Classic:
    #: ``/queue/``; Artemis takes the name bare, with ``destination-type:ANYCAST`` on a SEND
    #: and ``subscription-type:ANYCAST`` on a SUBSCRIBE)
    stomp_port: int | None = None
    stomp_queue_prefix: str = "/queue/"
    #: whether the broker gives an exclusive consumer (ConsumerInfo ``exclusive``) a queue's
    #: messages alone: Classic does; Artemis ignores the flag and shares them round-robin
    exclusive_consumers: bool = True

    def url(self, *, failover: bool = False, wire: dict | None = None, **jms: Any) -> str:
        """The client URL: ``tcp://host:port?wireFormat.x=..&jms.y=..``, or with ``failover``
        ``failover:(tcp://host:port?wireFormat.x=..)?<FAILOVER_OPTIONS>&jms.y=..``."""
        wire_q = "&".join(f"wireFormat.{k}={v}" for k, v in (wire or {}).items())
        jms_q = "&".join(f"jms.{k}={v}" for k, v in jms.items())
        tcp = f"tcp://{self.host}:{self.port}"
        if failover:
            inner = f"{tcp}?{wire_q}" if wire_q else tcp
            outer = "&".join([*(f"{k}={v}" for k, v in FAILOVER_OPTIONS.items()), *filter(None, [jms_q])])
            return f"failover:({inner})?{outer}"
        query = "&".join(filter(None, [wire_q, jms_q]))
        return f"{tcp}?{query}" if query else tcp

    def connect(self, op: str = "connect", *, failover: bool = False, wire: dict | None = None, **jms: Any) -> dict:
        return {"op": op, "url": self.url(failover=failover, wire=wire, **jms), **self.login}

    def run(self, commands: list[dict], **kw: Any) -> list[dict]:
        return self.client.run(commands, **kw)

    def start(self, commands: list[dict], **kw: Any) -> JmsRun:
        return self.client.start(commands, **kw)


def peer_target(kind: str, broker: Any, client: OpenWireClient) -> Target:
    """The target of a real peer (``classic`` or ``artemis``) with ``client``."""
    port = broker.openwire_port if kind == "classic" else broker.core_port
    return Target(
        kind, broker, broker.host, port, client,
        temp_advisories=kind == "classic", stomp_port=broker.stomp_port,
        stomp_queue_prefix="/queue/" if kind == "classic" else "", exclusive_consumers=kind == "classic",
    )  # fmt: skip


@pytest.fixture(params=PEERS)
def target(request: pytest.FixtureRequest, openwire_client: OpenWireClient) -> Target:
    """A shared peer of the module, with one of the two clients."""
    return peer_target(request.param, request.getfixturevalue(f"{request.param}_module"), openwire_client)


@pytest.fixture(params=PEERS)
def own_target(request: pytest.FixtureRequest, openwire_client: OpenWireClient) -> Target:
    """A peer of the test's own (for kill -9), with one of the two clients."""
    return own_peer(request, request.param, openwire_client)


def own_peer(request: pytest.FixtureRequest, kind: str, client: OpenWireClient) -> Target:
    """A new peer (``classic`` or ``artemis``) of the test's own, started, with ``client``."""
    if kind == "classic":
        broker = request.getfixturevalue("classic_factory")("crashy").start()
    else:
        broker = request.getfixturevalue("artemis_factory")(
            "crashy", protocols="CORE,OPENWIRE", extra_core_xml=ARTEMIS_SYNC_JOURNAL
        ).start()
    return peer_target(kind, broker, client)


def bodies(result: dict) -> list:
    return [m["body"] for m in result["messages"]]


#: every JMS message type with a body of typed values, and typed properties: the CORE
#: scenarios' (so the same messages are compared across protocols)
MESSAGES, PROPERTIES = peer.MESSAGES, peer.PROPERTIES


# ------------------------------------------------------------------------------ scenarios


@pytest.mark.parametrize("style", ["tcp", "failover"])
def test_url_options_and_queue(target: Target, style: str):
    """The URL's options reach the client (client ID, prefetch, synchronous sends) and the
    transport (loose encoding without the marshalling cache over ``failover:``, the default
    tight encoding over ``tcp:``); on that connection a queue delivers what was sent, in
    order, each message once, with the IDs the sends were given."""
    queue, client_id = new_name("queue"), new_name("client")
    wire = {"tightEncodingEnabled": "false", "cacheEnabled": "false"} if style == "failover" else {}
    jms = {"clientID": client_id, "prefetchPolicy.all": 7, "useAsyncSend": "false"}
    connect = target.connect(failover=style == "failover", wire=wire, **jms)
    results = target.run(
        [
            connect,
            {"op": "send", "queue": queue, "body": "m{i}", "count": 4},
            {"op": "send", "queue": queue, "body": "np", "persistent": False, "priority": 9},
            {"op": "send", "queue": queue, "body": "last"},
            {"op": "receive", "queue": queue, "count": 6},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    opened = results[0]
    assert opened["clientId"] == client_id
    assert (opened["queuePrefetch"], opened["topicPrefetch"], opened["useAsyncSend"]) == (7, 7, False)
    assert opened["provider"] == target.client.jars.version
    assert opened["protocolVersion"] == OPENWIRE_VERSION
    got = results[4]["messages"]
    # the persistent ones in order; the peers differ in where the non-persistent one comes:
    # Artemis by priority (first), Classic after the persistent ones (a queue's persistent
    # and non-persistent messages are in two cursors, drained one after the other)
    assert [b for b in bodies(results[4]) if b != "np"] == ["m0", "m1", "m2", "m3", "last"]
    assert "np" in bodies(results[4])
    assert bodies(results[6]) == ["marker"]  # nothing more, nothing twice
    by_body = {m["body"]: m for m in got}
    assert [by_body[f"m{i}"]["id"] for i in range(4)] == results[1]["ids"]
    assert (by_body["np"]["persistent"], by_body["np"]["priority"]) == (False, 9)
    assert by_body["m0"]["persistent"] is True and by_body["m0"]["destination"] == f"queue://{queue}"
    assert all(m["redelivered"] is False and m["deliveryCount"] == {"int": 1} for m in got)


def test_message_types_with_properties(target: Target):
    """What is sent comes back the same: type, typed body, typed properties and headers, for
    text, bytes, map, object and stream messages."""
    queue = new_name("types")
    sends = [
        {"op": "send", "queue": queue, "type": kind, "body": body, "properties": PROPERTIES,
         "priority": 7, "correlationId": f"corr-{kind}", "jmsType": f"kind-{kind}"}
        for kind, body in MESSAGES.items()
    ]  # fmt: skip
    # the clients refuse to deserialize an ObjectMessage of a class outside their trusted
    # packages (java.util.HashMap is not one by default): the URL trusts them all
    connect = target.connect(trustAllPackages="true")
    results = target.run([connect, *sends, {"op": "receive", "queue": queue, "count": len(sends)}])
    got = results[-1]["messages"]
    assert [m["type"] for m in got] == list(MESSAGES)
    for m, (kind, body), sent in zip(got, MESSAGES.items(), results[1:-1], strict=True):
        assert m["id"] == sent["ids"][0]
        assert m["body"] == body, kind
        assert {k: m["properties"][k] for k in PROPERTIES} == PROPERTIES, kind
        assert (m["priority"], m["correlationId"], m["jmsType"]) == (7, f"corr-{kind}", f"kind-{kind}")


def test_topic_subscribers(target: Target):
    """Every subscriber of a topic gets every message published while it is subscribed, in
    order; a message published before anyone subscribed reaches no one."""
    topic = new_name("topic")
    results = target.run(
        [
            target.connect(),
            {"op": "send", "topic": topic, "body": "before"},
            {"op": "consumer", "id": "a", "topic": topic},
            {"op": "consumer", "id": "b", "topic": topic},
            {"op": "send", "topic": topic, "body": "m{i}", "count": 3},
            {"op": "receive", "consumer": "a", "count": 3},
            {"op": "receive", "consumer": "b", "count": 3},
        ]
    )
    for r in results[5:7]:
        assert bodies(r) == ["m0", "m1", "m2"]
        assert {m["destination"] for m in r["messages"]} == {f"topic://{topic}"}


def test_durable_subscriber_across_reconnects(target: Target):
    """A durable subscription made by one connection keeps what is published while its
    subscriber is away, for the next connection with the same client ID (set in the URL);
    unsubscribed, it is gone: a new one starts empty."""
    topic, sub, client_id = new_name("news"), "sub-1", new_name("durable")
    durable = {"topic": topic, "durable": sub}
    target.run([target.connect(clientID=client_id), {"op": "consumer", "id": "c", **durable}])
    target.run([target.connect(), {"op": "send", "topic": topic, "body": "away {i}", "count": 3}])
    back = target.run(
        [
            target.connect(clientID=client_id),
            {"op": "receive", **durable, "count": 3},
            {"op": "consumer", "id": "c", **durable},
            {"op": "send", "topic": topic, "body": "live"},
            {"op": "receive", "consumer": "c"},
            {"op": "close_consumer", "id": "c"},
            {"op": "unsubscribe", "name": sub},
        ]
    )
    assert bodies(back[1]) == ["away 0", "away 1", "away 2"]
    assert {m["destination"] for m in back[1]["messages"]} == {f"topic://{topic}"}
    assert bodies(back[4]) == ["live"]
    fresh = target.run(
        [
            target.connect(clientID=client_id),
            {"op": "send", "topic": topic, "body": "unheard"},
            {"op": "consumer", "id": "c", **durable},
            {"op": "send", "topic": topic, "body": "marker"},
            {"op": "receive", "consumer": "c", "count": 5, "until": "marker"},
            {"op": "close_consumer", "id": "c"},
            {"op": "unsubscribe", "name": sub},
        ]
    )
    assert bodies(fresh[4]) == ["marker"]


def test_selector(target: Target):
    """A consumer with a selector gets only the matching messages; the rest stay, in order."""
    queue = new_name("sel")
    sends = [
        {"op": "send", "queue": queue, "body": f"{colour} {n}", "properties": {"colour": colour, "n": n}}
        for n, colour in enumerate(["red", "blue", "red", "green", "red"])
    ]
    results = target.run(
        [
            target.connect(),
            *sends,
            {"op": "receive", "queue": queue, "count": 2, "selector": "colour = 'red' AND n > 0"},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    assert bodies(results[6]) == ["red 2", "red 4"]
    assert bodies(results[8]) == ["red 0", "blue 1", "green 3", "marker"]


def test_local_transaction(target: Target):
    """Rolled-back sends never arrive; a rolled-back receive is redelivered (counted), then
    committed, and is gone."""
    queue = new_name("tx")
    send = {"op": "send", "queue": queue}
    results = target.run(
        [
            target.connect(),
            {"op": "session", "transacted": True},
            {**send, "body": "rolled back {i}", "count": 2},
            {"op": "rollback"},
            {**send, "body": "committed {i}", "count": 2},
            {"op": "commit"},
            {"op": "receive", "queue": queue, "count": 2},
            {"op": "rollback"},
            {"op": "receive", "queue": queue, "count": 2},
            {"op": "commit"},
            {**send, "body": "marker"},
            {"op": "commit"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
            {"op": "commit"},
        ]
    )
    first, again, last = results[6], results[8], results[12]
    assert bodies(first) == bodies(again) == ["committed 0", "committed 1"]
    assert [m["redelivered"] for m in again["messages"]] == [True, True]
    assert [m["deliveryCount"] for m in again["messages"]] == [{"int": 2}] * 2
    assert bodies(last) == ["marker"]  # nothing rolled back or committed twice before it


@pytest.mark.parametrize("prefetch", [0, 1000])
def test_prefetch(target: Target, prefetch: int):
    """Prefetch 0: a consumer gets a message only when it asks (the other consumer, asking,
    gets the next one); prefetch 1000: the first consumer holds every message it was sent, so
    the second gets none while the first has them."""
    queue = new_name(f"prefetch{prefetch}")
    results = target.run(
        [
            target.connect(**{"prefetchPolicy.all": prefetch}),
            {"op": "send", "queue": queue, "body": "m{i}", "count": 10},
            {"op": "session", "ack": "client"},
            {"op": "consumer", "id": "first", "queue": queue},
            {"op": "receive", "consumer": "first"},
            # with prefetch, the broker dispatches the rest to the first consumer asynchronously:
            # the second consumer comes once they are there (prefetch 0: nothing is ever there)
            {"op": "prefetched", "id": "first", "count": 9 if prefetch else 0},
            {"op": "session", "ack": "client"},
            {"op": "consumer", "id": "second", "queue": queue},
            {"op": "receive", "consumer": "second", "timeout": 1000},
            {"op": "receive", "consumer": "first", "count": 10, "timeout": 1000, "acknowledge": True},
        ]
    )
    assert results[0]["queuePrefetch"] == prefetch
    assert results[5]["prefetched"] == (9 if prefetch else 0)
    first = bodies(results[4]) + bodies(results[9])
    second = bodies(results[8])
    if prefetch == 0:
        assert (first, second) == (["m0"] + [f"m{i}" for i in range(2, 10)], ["m1"])
    else:
        assert (first, second) == ([f"m{i}" for i in range(10)], [])


def test_temporary_queue_request_reply(target: Target):
    """Request/reply over a temporary queue: a server on another connection answers each
    request on its JMSReplyTo, correlated by the request's message ID; a temporary topic
    delivers to its own connection's subscriber.

    The server's client does not watch the advisory topics (``jms.watchTopicAdvisories=
    false``): a client that watches them refuses to send to a temporary destination it has
    not heard of by advisory (see the next test)."""
    service = new_name("service")
    server = target.start(
        [
            target.connect(watchTopicAdvisories="false"),
            {"op": "serve", "queue": service, "count": 3, "timeout": 20000},
        ]
    )
    client = target.run(
        [
            target.connect(),
            {"op": "temp_queue", "id": "replies"},
            {"op": "send", "queue": service, "body": "q{i}", "count": 3, "replyToTemp": "replies"},
            {"op": "receive", "temp": "replies", "count": 3, "timeout": 20000},
            {"op": "temp_topic", "id": "tt"},
            {"op": "consumer", "id": "t", "temp": "tt"},
            {"op": "send", "temp": "tt", "body": "to the temp topic"},
            {"op": "receive", "consumer": "t"},
            {"op": "close_consumer", "id": "t"},
            {"op": "delete_temp", "id": "tt"},
        ]
    )
    served = server.wait()[1]["served"]
    temp = client[1]["name"]
    assert temp.startswith("temp-queue://ID:")
    assert [m["body"] for m in served] == ["q0", "q1", "q2"]
    assert {m["replyTo"] for m in served} == {temp}
    replies = client[3]["messages"]
    assert bodies(client[3]) == ["re: q0", "re: q1", "re: q2"]
    assert [m["correlationId"] for m in replies] == client[2]["ids"]
    assert {m["destination"] for m in replies} == {temp}
    assert client[4]["name"].startswith("temp-topic://ID:")
    assert bodies(client[7]) == ["to the temp topic"]


def test_reply_to_a_temporary_queue_relies_on_advisories(target: Target):
    """A client watching the advisory topics (the default) sends to another connection's
    temporary queue only if the broker announced it: Classic announces it and the reply
    arrives; Artemis as ``artemis create`` makes it announces nothing, and the client refuses
    the send itself (InvalidDestinationException "Cannot publish to a deleted
    Destination") -- the difference an application moving from Classic meets."""
    service = new_name("service")
    server = target.start(
        [target.connect(), {"op": "serve", "queue": service, "count": 1, "timeout": 20000}]
    )
    client = target.start(
        [
            target.connect(),
            {"op": "temp_queue", "id": "replies"},
            {"op": "send", "queue": service, "body": "ping", "replyToTemp": "replies"},
            {"op": "receive", "temp": "replies", "timeout": 20000},
        ]
    )
    served = server.wait(check=False)
    if target.temp_advisories:
        assert served[-1]["ok"] is True
        assert bodies(client.wait()[3]) == ["re: ping"]
    else:
        assert served[-1]["ok"] is False
        assert served[-1]["error"]["class"].endswith("jms.InvalidDestinationException")
        assert "deleted Destination" in served[-1]["error"]["message"]
        assert [m["body"] for m in served[-1]["served"]] == ["ping"]
        client.kill()  # its receive waits for the reply that never comes


@pytest.mark.parametrize("prefetch", [1000, 1])
def test_message_groups_two_consumers(target: Target, prefetch: int):
    """Every message of a group (JMSXGroupID) goes to the one consumer the group is pinned
    to, in order, while two consumers compete for the queue.  Three groups sent in turn over
    two consumers: dispatch that ignored the groups (round robin) would split every group;
    with prefetch 1 a group's next message also waits while its consumer holds one.  (Which
    consumer a group is pinned to differs between the peers and is not asserted.)"""
    queue = new_name("groups")
    groups = ["A", "B", "C"]
    results = target.run(
        [
            target.connect(**{"prefetchPolicy.all": prefetch}),
            {"op": "consumer", "id": "c1", "queue": queue},
            {"op": "session"},
            {"op": "consumer", "id": "c2", "queue": queue},
            {"op": "send", "queue": queue, "body": "{i}", "count": 30, "groups": groups},
            {"op": "receive", "consumers": ["c1", "c2"], "count": 30, "timeout": 5000},
        ]
    )
    got = results[5]["messages"]
    assert sorted(int(m["body"]) for m in got) == list(range(30))
    for g, group in enumerate(groups):
        mine = [m for m in got if m["groupId"] == group]
        assert [int(m["body"]) for m in mine] == list(range(g, 30, len(groups))), group
        assert len({m["consumer"] for m in mine}) == 1, f"group {group} went to two consumers"


def test_message_group_closed_by_sequence_minus_one(target: Target):
    """``JMSXGroupSeq`` -1 closes a group after its message: the run that ends with it goes to
    one consumer, and the group's next run picks a consumer anew -- the other one, which the
    round robin has reached meanwhile (on all three peers)."""
    queue = new_name("groupseq")
    runs = [("a1", 1), ("a2", 2), ("a-close", -1), ("b1", 1), ("b2", 2)]
    results = target.run(
        [
            target.connect(),
            {"op": "consumer", "id": "c1", "queue": queue},
            {"op": "session"},
            {"op": "consumer", "id": "c2", "queue": queue},
            *({"op": "send", "queue": queue, "body": body,
               "properties": {"JMSXGroupID": "G", "JMSXGroupSeq": {"int": seq}}} for body, seq in runs),
            {"op": "receive", "consumers": ["c1", "c2"], "count": len(runs), "timeout": 5000},
        ]
    )
    got = results[-1]["messages"]
    by = {m["body"]: m["consumer"] for m in got}
    assert sorted(by) == sorted(body for body, _ in runs)
    assert by["a1"] == by["a2"] == by["a-close"] and by["b1"] == by["b2"]
    assert by["b1"] != by["a1"], by


def test_exclusive_consumer(target: Target):
    """Two consumers of a queue, the second exclusive (``queue?consumer.exclusive=true``, the
    client's destination option, sent as ConsumerInfo ``exclusive``): every message goes to
    the exclusive one while it is open, though it came second; closed, it gives back what it
    held unread, and the other gets the rest, in order.  Nothing is lost or received twice.

    Artemis ignores the flag (its OpenWire adapter never reads it): there the two consumers
    share the messages; the test asserts that difference, and that nothing is lost there either."""
    queue = new_name("exclusive")
    results = target.run(
        [
            target.connect(),
            {"op": "consumer", "id": "plain", "queue": queue},
            {"op": "session"},
            {"op": "consumer", "id": "exclusive", "queue": f"{queue}?consumer.exclusive=true"},
            {"op": "send", "queue": queue, "body": "m{i}", "count": 10},
            {"op": "receive", "consumers": ["plain", "exclusive"], "count": 4, "timeout": 2000},
            {"op": "close_consumer", "id": "exclusive"},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "consumer": "plain", "count": 20, "until": "marker"},
        ]
    )
    first, rest = results[5]["messages"], bodies(results[8])
    received = [m["body"] for m in first] + rest
    assert rest[-1] == "marker"
    assert sorted(received) == sorted([f"m{i}" for i in range(10)] + ["marker"])  # each once
    assert {m["destination"] for m in first} == {f"queue://{queue}"}
    if target.exclusive_consumers:
        assert [(m["consumer"], m["body"]) for m in first] == [("exclusive", f"m{i}") for i in range(4)]
        assert rest == [f"m{i}" for i in range(4, 10)] + ["marker"]
    else:
        assert {m["consumer"] for m in first} == {"plain", "exclusive"}


class _StompInbox(stomp.ConnectionListener):
    """The MESSAGE frames a STOMP connection received (body, headers), as they come."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    def on_message(self, frame) -> None:
        with self._lock:
            self.messages.append((frame.body, dict(frame.headers)))

    def got(self, n: int) -> list[tuple[str, dict]] | None:
        with self._lock:
            return list(self.messages) if len(self.messages) >= n else None


def test_stomp_to_openwire_and_back(target: Target):
    """Cross-protocol on the peer's STOMP port: a STOMP SEND with a content-length is a
    BytesMessage to the OpenWire client, one without a TextMessage (the rule both peers
    follow), with its headers as properties; an OpenWire TextMessage reaches a STOMP
    subscriber as its text, with its JMS headers."""
    to_ow, to_stomp = new_name("from.stomp"), new_name("to.stomp")
    prefix = target.stomp_queue_prefix
    inbox = _StompInbox()
    conn = stomp.Connection12([(target.host, target.stomp_port)], auto_content_length=False)
    conn.set_listener("inbox", inbox)
    conn.connect(target.login["user"], target.login["password"], wait=True)
    try:
        anycast = {"destination-type": "ANYCAST"}
        # subscribed before the OpenWire send: the broker handled this SUBSCRIBE before the
        # SENDs after it, which the OpenWire client receives first
        conn.subscribe(prefix + to_stomp, id="s1", ack="auto", headers={"subscription-type": "ANYCAST"})
        conn.send(prefix + to_ow, "as text", headers={**anycast, "colour": "red"})
        conn.send(prefix + to_ow, b"as bytes", headers={**anycast, "content-length": "8"})
        results = target.run(
            [
                target.connect(),
                {"op": "receive", "queue": to_ow, "count": 2},
                {"op": "send", "queue": to_stomp, "body": "from OpenWire", "correlationId": "c-1",
                 "properties": {"colour": "blue"}},
            ]
        )  # fmt: skip
        (body, headers), = wait_for(lambda: inbox.got(1), 20, what="the STOMP subscriber's MESSAGE")
    finally:
        conn.disconnect()
    text, data = results[1]["messages"]
    assert (text["type"], text["body"], text["properties"]["colour"]) == ("text", "as text", "red")
    assert (data["type"], data["body"]) == ("bytes", b64(b"as bytes"))
    assert body == "from OpenWire"
    assert (headers["correlation-id"], headers["colour"]) == ("c-1", "blue")


# ------------------------------------------------------------------------------ kill -9


def test_xa_prepared_survives_kill9_then_recovered(own_target: Target):
    """XA through ActiveMQXAConnectionFactory: two branches prepared, a third only ended,
    then the broker is killed (-9) with the client still connected.  After the restart
    ``recover`` lists exactly the prepared two; one committed delivers its messages, the
    other rolled back delivers nothing; the unprepared one is gone."""
    t = own_target
    queue = new_name("xa")
    xids = {n: {"format": 7, "gtrid": f"{queue}-{n}", "bqual": "b"} for n in ("commit", "rollback", "lost")}
    branch = []
    for n, count in (("commit", 3), ("rollback", 2)):
        branch += [
            {"op": "xa_start", "xid": xids[n]},
            {"op": "send", "queue": queue, "body": f"{n} {{i}}", "count": count},
            {"op": "xa_end", "xid": xids[n]},
            {"op": "xa_prepare", "xid": xids[n]},
        ]
    branch += [
        {"op": "xa_start", "xid": xids["lost"]},
        {"op": "send", "queue": queue, "body": "lost"},
        {"op": "xa_end", "xid": xids["lost"]},
    ]
    commands = [t.connect("xa_connect"), *branch, {"op": "temp_queue", "id": "idle"}]
    commands.append({"op": "receive", "temp": "idle", "timeout": 50000})  # holds the connection
    run = t.start(commands)
    wait_for(lambda: len(run.results) >= len(commands) - 1, 30, what="the XA branches to be prepared")
    assert [r["vote"] for r in run.results if r["op"] == "xa_prepare"] == [0, 0]  # XA_OK
    t.broker.kill9()
    run.kill()
    t.broker.start()

    recovered = t.run(
        [
            t.connect("xa_connect"),
            {"op": "xa_recover"},
            {"op": "xa_commit", "xid": xids["commit"]},
            {"op": "xa_rollback", "xid": xids["rollback"]},
            {"op": "xa_recover"},
        ]
    )
    assert sorted(x["gtrid"] for x in recovered[1]["xids"]) == [xids["commit"]["gtrid"], xids["rollback"]["gtrid"]]
    assert {(x["format"], x["bqual"]) for x in recovered[1]["xids"]} == {(7, "b")}
    assert recovered[4]["xids"] == []
    after = t.run(
        [
            t.connect(),
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    assert bodies(after[2]) == ["commit 0", "commit 1", "commit 2", "marker"]


def test_a_consumer_goes_on_after_a_failover_reconnect(own_target: Target):
    """A ``failover:`` client's consumer holds two prefetched messages it has not read when
    the broker is killed (-9) and started again.  The client reconnects, drops what it
    held and re-creates its consumers; the consumer gets the two again (nothing it had not
    acknowledged is lost), then what another connection sends after the restart.

    (Re-creating them, the client asks for a prefetch of 0 if it has not finished dropping
    what they held, and restores the prefetch with a ConsumerControl when it has: a race this
    test does not steer -- here the dropping is done first; test_openwire_node.py sends the
    ConsumerControl itself.)"""
    t = own_target
    queue, hold = new_name("resume"), new_name("hold")
    commands = [
        t.connect(failover=True),
        {"op": "consumer", "id": "c", "queue": queue},
        {"op": "send", "queue": queue, "body": "m{i}", "count": 3},
        {"op": "receive", "consumer": "c"},
        {"op": "prefetched", "id": "c", "count": 2},
        {"op": "consumer", "id": "hold", "queue": hold},
        # waits, across the restart, for the word to go on
        {"op": "receive", "consumer": "hold", "timeout": 20000},
        {"op": "receive", "consumer": "c", "count": 5, "timeout": 20000, "until": "after"},
    ]
    run = t.start(commands)
    wait_for(lambda: len(run.results) >= 6, 30, what="two messages prefetched and unread")
    t.broker.kill9()
    t.broker.start()
    t.run([t.connect(), {"op": "send", "queue": queue, "body": "after"}, {"op": "send", "queue": hold, "body": "go"}])
    results = run.wait()
    assert bodies(results[3]) == ["m0"]
    assert results[4]["prefetched"] == 2
    assert bodies(results[6]) == ["go"]
    assert bodies(results[7]) == ["m1", "m2", "after"]
    # reconnected, and the connection is up at the end: once as a rule, at times twice
    # under a loaded machine (seen once with Classic 5.17 in a full run; its broker
    # logged nothing after starting, so the cause is the client's): the messages above are
    # what this test compares
    events = [e["event"] for e in run.events if e["event"] in ("interrupted", "resumed")]
    assert events.count("interrupted") >= 1 and events[-1] == "resumed", events


#: synchronous persistent sends in the kill -9 scenario, and how many are acknowledged
#: before the kill
SYNC_SENDS = 10_000
KILL_AFTER = 3_000


def test_sync_persistent_sends_survive_kill9(own_target: Target):
    """10,000 synchronous persistent sends (``jms.useAsyncSend=false``) over ``failover:``;
    after 3,000 are acknowledged the broker is killed (-9) and started again on the same
    data; the client reconnects and finishes.  Every acknowledged send is there after the
    restart, once, in order (a send replayed by the failover transport is recognised as a
    duplicate by both peers)."""
    t = own_target
    queue = new_name("sync")
    run = t.start(
        [
            t.connect(failover=True, useAsyncSend="false", alwaysSyncSend="true"),
            {"op": "send", "queue": queue, "body": "m{i}", "count": SYNC_SENDS, "progress": 500, "ids": False},
        ]
    )
    run.wait_event(lambda e: e.get("sent", 0) >= KILL_AFTER, timeout=40)
    t.broker.kill9()
    t.broker.start()
    results = run.wait()
    assert results[0]["useAsyncSend"] is False
    assert results[1]["sent"] == SYNC_SENDS  # every send acknowledged, across the restart
    assert any(e["event"] == "interrupted" for e in run.events)
    assert any(e["event"] == "resumed" for e in run.events[1:])  # the reconnect (the first is the connect)

    got = t.run(
        [
            t.connect(**{"prefetchPolicy.all": 1000}),
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": SYNC_SENDS + 10, "until": "marker", "brief": True},
        ]
    )[2]["messages"]
    assert got[-1]["body"] == "marker"
    assert [m["body"] for m in got[:-1]] == [f"m{i}" for i in range(SYNC_SENDS)]


# ------------------------------------------------------------------------------ redirect


def test_artemis_redirects_a_failover_client(artemis_factory, openwire_client: OpenWireClient):
    """The reference for the gateway's native redirect: an Artemis broker whose acceptor
    routes by CLIENT_ID (a ``<connection-router>``, FIRST_ELEMENT of a pool of one) sends a
    ``failover:`` client a ConnectionControl naming the target, and the client lands there
    (its transport's remote address is the target's) and works there: what it sends is on the target.
    A plain ``tcp:`` client, which cannot follow a redirect, is refused with an
    ExceptionResponse carrying java.lang.IllegalStateException "Client not fault tolerant"."""
    b = artemis_factory("b", protocols="CORE,OPENWIRE").start()
    a = artemis_factory("a", router="r", extra_core_xml=router_xml("r", {"b": b.url})).start()
    via_a = peer_target("artemis", a, openwire_client)
    on_b = peer_target("artemis", b, openwire_client)
    queue, client_id = new_name("redirected"), new_name("tenant")
    moved = via_a.run(
        [
            via_a.connect(failover=True, clientID=client_id),
            {"op": "send", "queue": queue, "body": "sent via a"},
            {"op": "info"},
        ]
    )
    # given only a's address, the client is on b from the start: the redirect comes in
    # answer to its ConnectionInfo, which the connection sends while it is being made
    assert moved[0]["remoteAddress"] == moved[2]["remoteAddress"] == f"tcp://{b.host}:{b.core_port}"
    got = on_b.run([on_b.connect(), {"op": "receive", "queue": queue}])
    assert bodies(got[1]) == ["sent via a"]

    refused = via_a.run([via_a.connect(clientID=new_name("tenant"))], check=False)
    assert refused[0]["ok"] is False
    assert refused[0]["error"]["cause"] == "java.lang.IllegalStateException: Client not fault tolerant"
