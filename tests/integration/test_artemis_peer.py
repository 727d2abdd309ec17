"""The reference pair: the real Artemis JMS client against the real Artemis broker.

These tests prove the harness of :mod:`tests.artemis` that every CORE test and benchmark
uses to compare Junction with Artemis: a broker instance made by ``artemis create`` on free
loopback ports, scenarios run by ``tests/java/JmsScenario.java`` in a fresh JVM each, the
message types and typed values coming back as sent, durable state kept across a reconnect
and across ``kill -9``, transactions, selectors, errors and timeouts reported.  The same
scenarios, pointed at a Junction node's CORE port, are the differential tests.

One broker serves the module (``artemis_module``; it takes seconds to start), with its
AMQP and STOMP acceptors on; each test uses destinations of its own.  "Nothing else
arrived" is proved by ordering -- a marker sent last is the last message received -- not
by waiting.
"""

from __future__ import annotations

import itertools

import pytest
import stomp

from tests.artemis import ArtemisBroker, JmsClient, JmsRunError
from tests.artemis.jms import b64, pattern, sha256

pytestmark = pytest.mark.timeout(60)

ARTEMIS_OPTIONS = {"amqp": True, "stomp": True}
USER = {"user": "admin", "password": "admin"}
#: a body above the client's minLargeMessageSize (100 KiB): sent as a large message
LARGE = 300 * 1024

_ids = itertools.count(1)


def new_name(prefix: str) -> str:
    return f"{prefix}.{next(_ids)}"


def connect(broker: ArtemisBroker, **extra) -> dict:
    return {"op": "connect", "url": broker.url, **USER, **extra}


def bodies(result: dict) -> list:
    return [m["body"] for m in result["messages"]]


# every JMS message type, with a body of typed values where it has them
TYPED = {
    "s": "text é ✓",
    "t": True,
    "i": {"int": -7},
    "l": {"long": 2**40},
    "sh": {"short": 300},
    "by": {"byte": -3},
    "d": {"double": 2.5},
    "f": {"float": 1.5},
    "c": {"char": "x"},
    "b": {"bytes": b64(b"\x00\x01\xff")},
}
PROPERTIES = {k: v for k, v in TYPED.items() if k not in ("c", "b")}  # no char/bytes properties
MESSAGES = {
    "text": "hello, Artemis ✓",
    "bytes": b64(bytes(range(256))),
    "map": TYPED,
    "stream": list(TYPED.values()),
    "object": {"name": "order", "lines": [{"int": 1}, {"int": 2}], "paid": False},
}


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_queue_round_trips_each_message_type(artemis_module, jms: JmsClient, kind: str):
    """What is sent comes back the same: type, body, typed properties and headers."""
    queue = new_name(f"types.{kind}")
    body = MESSAGES[kind]
    send = {"op": "send", "queue": queue, "type": kind, "body": body, "properties": PROPERTIES}
    send |= {"priority": 7, "correlationId": "corr-1", "jmsType": "kind-" + kind}
    results = jms.run([connect(artemis_module), send, {"op": "receive", "queue": queue}])

    (sent_id,) = results[1]["ids"]
    (m,) = results[2]["messages"]
    assert (m["type"], m["id"], m["destination"]) == (kind, sent_id, f"queue://{queue}")
    assert m["body"] == body
    assert {k: m["properties"][k] for k in PROPERTIES} == PROPERTIES
    assert m["properties"]["JMSXDeliveryCount"] == {"int": 1}
    assert (m["priority"], m["correlationId"], m["jmsType"]) == (7, "corr-1", "kind-" + kind)
    assert m["persistent"] is True and m["redelivered"] is False


def test_large_and_async_sends(artemis_module, jms: JmsClient):
    """A large bytes message arrives whole (compared by digest), and asynchronous sends with
    a CompletionListener all complete, non-persistent ones too."""
    queue = new_name("large")
    results = jms.run(
        [
            connect(artemis_module),
            {"op": "send", "queue": queue, "type": "bytes", "size": LARGE},
            {"op": "send", "queue": queue, "body": "async {i}", "count": 20, "completion": True},
            {"op": "send", "queue": queue, "body": "np", "persistent": False},
            {"op": "receive", "queue": queue, "count": 22, "digest": True},
        ]
    )
    assert results[2]["completed"] is True and results[2]["failed"] == []
    big, *rest = results[4]["messages"]
    assert (big["type"], big["size"], big["sha256"]) == ("bytes", LARGE, sha256(pattern(LARGE)))
    assert [m["sha256"] for m in rest] == [sha256(f"async {i}".encode()) for i in range(20)] + [
        sha256(b"np")
    ]
    assert rest[-1]["persistent"] is False


def test_durable_subscription_kept_across_reconnect(artemis_module, jms: JmsClient):
    """A durable subscription made by one connection (one JVM) keeps what is published while
    no subscriber is connected, for the next connection with the same client ID."""
    topic, sub = new_name("news"), "sub-1"
    client = {"clientId": new_name("client")}
    jms.run(
        [
            connect(artemis_module, **client),
            {"op": "consumer", "id": "c", "topic": topic, "durable": sub},
        ]
    )
    jms.run(
        [
            connect(artemis_module),
            {"op": "send", "topic": topic, "body": "while away {i}", "count": 3},
        ]
    )
    results = jms.run(
        [
            connect(artemis_module, **client),
            {"op": "receive", "topic": topic, "durable": sub, "count": 3},
            {"op": "unsubscribe", "name": sub},
        ]
    )
    assert bodies(results[1]) == [f"while away {i}" for i in range(3)]
    assert {m["destination"] for m in results[1]["messages"]} == {f"topic://{topic}"}


def test_transaction_rolled_back_then_committed(artemis_module, jms: JmsClient):
    """Rolled-back sends never arrive; a rolled-back receive is redelivered, then committed."""
    queue = new_name("tx")
    send = {"op": "send", "queue": queue}
    results = jms.run(
        [
            connect(artemis_module),
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
    assert [m["properties"]["JMSXDeliveryCount"] for m in again["messages"]] == [{"int": 2}] * 2
    assert bodies(last) == ["marker"]  # nothing rolled back or committed twice before it


def test_selector(artemis_module, jms: JmsClient):
    """A consumer with a selector gets only the matching messages; the rest stay, in order."""
    queue = new_name("sel")
    sends = [
        {
            "op": "send",
            "queue": queue,
            "body": f"{colour} {n}",
            "properties": {"colour": colour, "n": n},
        }
        for n, colour in enumerate(["red", "blue", "red", "green", "red"])
    ]
    results = jms.run(
        [
            connect(artemis_module),
            *sends,
            {"op": "receive", "queue": queue, "count": 2, "selector": "colour = 'red' AND n > 0"},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    assert bodies(results[6]) == ["red 2", "red 4"]
    assert bodies(results[8]) == ["red 0", "blue 1", "green 3", "marker"]


def test_scheduled_delivery(artemis_module, jms: JmsClient):
    """A message sent with a delivery delay (``_AMQ_SCHED_DELIVERY``) is held until its time:
    not there 500 ms after the send, there after 1500 ms; one sent without a delay passes it."""
    queue = new_name("sched")
    results = jms.run(
        [
            connect(artemis_module),
            {"op": "send", "queue": queue, "body": "later", "delay": 1500},
            {"op": "send", "queue": queue, "body": "now"},
            {"op": "receive", "queue": queue, "count": 2, "timeout": 500},
            {"op": "receive", "queue": queue, "count": 1, "timeout": 5000},
        ]
    )
    assert bodies(results[3]) == ["now"]  # the held one did not come within 500 ms
    later = results[4]["messages"]
    assert bodies(results[4]) == ["later"]
    assert later[0]["properties"]["_AMQ_SCHED_DELIVERY"]["long"] >= later[0]["timestamp"] + 1500


def test_expired_message_goes_to_the_expiry_queue(artemis_module, jms: JmsClient):
    """A message whose time to live passed before it was consumed is not delivered: the
    client sees it expired (SESS_EXPIRED) and the broker moves it to ``ExpiryQueue``, with
    where it came from."""
    queue, idle = new_name("ttl"), new_name("idle")
    results = jms.run(
        [
            connect(artemis_module),
            {"op": "send", "queue": queue, "body": "stale", "ttl": 300},
            {"op": "receive", "queue": idle, "timeout": 1000},  # the time to live passes
            {"op": "receive", "queue": queue, "timeout": 1000},
            {"op": "receive", "queue": "ExpiryQueue", "count": 10, "timeout": 5000, "selector": f"_AMQ_ORIG_ADDRESS = '{queue}'"},
        ]
    )
    assert results[3]["messages"] == []
    (expired,) = results[4]["messages"]
    assert expired["body"] == "stale"
    assert expired["properties"]["_AMQ_ORIG_QUEUE"] == queue


def test_consumer_priority(artemis_module, jms: JmsClient):
    """Two consumers on one queue, one with ``consumer-priority=5``: while it has credit
    it gets every message; the default-priority one gets none."""
    queue = new_name("prio")
    results = jms.run(
        [
            connect(artemis_module),
            {"op": "send", "queue": queue, "body": "create"},
            {"op": "receive", "queue": queue, "timeout": 5000},
            {"op": "consumer", "id": "low", "queue": queue},
            {"op": "consumer", "id": "high", "queue": f"{queue}?consumer-priority=5"},
            {"op": "send", "queue": queue, "body": "m{i}", "count": 4},
            {"op": "receive", "consumer": "high", "count": 4, "timeout": 5000},
            {"op": "receive", "consumer": "low", "timeout": 500},
        ]
    )
    assert bodies(results[6]) == ["m0", "m1", "m2", "m3"]
    assert results[7]["messages"] == []


def test_message_groups(artemis_module, jms: JmsClient):
    """Two consumers, three groups (``JMSXGroupID``, carried as ``_AMQ_GROUP_ID``) sent in
    turn: each group's messages reach one consumer, in order, though round robin would split
    every group."""
    queue = new_name("groups")
    sent = [f"{g}{i}" for i in range(4) for g in "ABC"]
    results = jms.run(
        [
            connect(artemis_module),
            {"op": "consumer", "id": "c1", "queue": queue},
            {"op": "consumer", "id": "c2", "queue": queue},
            *({"op": "send", "queue": queue, "body": b, "properties": {"JMSXGroupID": b[0]}} for b in sent),
            {"op": "receive", "consumer": "c1", "count": len(sent), "timeout": 1000},
            {"op": "receive", "consumer": "c2", "count": len(sent), "timeout": 1000},
        ]
    )
    got = {"c1": bodies(results[-2]), "c2": bodies(results[-1])}
    assert sorted(got["c1"] + got["c2"]) == sorted(sent)
    for g in "ABC":
        holders = [c for c in got if any(b[0] == g for b in got[c])]
        assert len(holders) == 1, f"group {g} went to {holders}: {got}"
        assert [b for b in got[holders[0]] if b[0] == g] == [b for b in sent if b[0] == g]
    assert all(m["properties"].get("JMSXGroupID") == m["body"][0] for r in results[-2:] for m in r["messages"])


def test_stomp_acceptor_feeds_the_jms_client(artemis_module, jms: JmsClient):
    """The optional acceptors are on their own ports, and Artemis's STOMP-to-JMS rule shows:
    a SEND with a content-length header is a BytesMessage, one without a TextMessage."""
    queue = new_name("from.stomp")
    anycast = {"destination-type": "ANYCAST"}
    for auto_content_length in (True, False):
        conn = stomp.Connection12(
            [(artemis_module.host, artemis_module.stomp_port)],
            auto_content_length=auto_content_length,
        )
        conn.connect(USER["user"], USER["password"], wait=True)
        try:
            conn.send(queue, f"over STOMP {auto_content_length}", headers=anycast)
        finally:
            conn.disconnect()  # waits for its receipt: the SEND before it is done
    results = jms.run([connect(artemis_module), {"op": "receive", "queue": queue, "count": 2}])
    # two connections' messages: the order between them is not the point here
    got = sorted((m["type"], m["body"]) for m in results[1]["messages"])
    assert got == [("bytes", b64(b"over STOMP True")), ("text", "over STOMP False")]
    ports = (artemis_module.core_port, artemis_module.amqp_port, artemis_module.stomp_port)
    assert None not in ports and len(set(ports)) == 3


def test_errors_are_results(artemis_module, jms: JmsClient):
    """A refused login is a failed command with the JMS exception; the run stops there."""
    results = jms.run(
        [
            {"op": "connect", "url": artemis_module.url, "user": "admin", "password": "wrong"},
            {"op": "send", "queue": new_name("never"), "body": "x"},
        ],
        check=False,
    )
    (failed,) = results
    assert failed["ok"] is False
    assert failed["error"]["class"] == "javax.jms.JMSSecurityException"
    with pytest.raises(JmsRunError, match="JMSSecurityException"):
        jms.run([{"op": "connect", "url": artemis_module.url, "user": "nobody", "password": "x"}])


def test_a_run_past_its_deadline_is_killed_with_a_thread_dump(artemis_module, jms: JmsClient):
    queue = new_name("empty")
    with pytest.raises(JmsRunError, match="timed out") as e:
        jms.run(
            [connect(artemis_module), {"op": "receive", "queue": queue, "timeout": 60000}],
            timeout=4,
        )
    assert "Full thread dump" in str(e.value)


def test_kill9_and_restart_keep_durable_messages(artemis_factory, jms: JmsClient):
    """kill -9 then a start on the same instance: every acknowledged durable send is there.
    (An anonymous broker: connections without credentials.)"""
    broker = artemis_factory("crashy", anonymous=True).start()
    queue = new_name("durable")
    run = jms.start(
        [
            {"op": "connect", "url": broker.url},
            {"op": "send", "queue": queue, "body": "m{i}", "count": 5000, "progress": 100},
        ]
    )
    run.wait_event(lambda e: e.get("sent", 0) >= 200, timeout=30)
    broker.kill9()
    results = run.wait(check=False)
    assert results[-1]["ok"] is False  # the connection died under the sends
    acknowledged = results[-1]["sent"]
    assert 200 <= acknowledged < 5000

    broker.start()
    got = jms.run(
        [
            {"op": "connect", "url": broker.url},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 5001, "until": "marker"},
        ]
    )[2]["messages"]
    assert got[-1]["body"] == "marker"
    sent_ids = results[-1]["ids"]
    received_ids = [m["id"] for m in got[:-1]]
    assert received_ids[:acknowledged] == sent_ids  # each acknowledged send, once, in order
    # one more may have been on disk without its acknowledgement reaching the client
    assert len(received_ids) - acknowledged in (0, 1)
    assert broker.starts == 2 and broker.startup_seconds is not None
