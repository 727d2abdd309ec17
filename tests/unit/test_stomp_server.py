"""The STOMP server on StringTransport + Clock: frames in, frames out.

What the server writes is parsed with the project's own codec in client mode;
see :mod:`tests.unit.stomp_fixtures`.
"""

from __future__ import annotations

import pytest

from junction.model.message import ORIGINAL_ADDRESS
from tests.unit.stomp_fixtures import (
    AddressSettings,
    Broker,
    Limits,
    RoutingType,
    SecuritySetting,
)

MULTI = RoutingType.MULTICAST


def connected(broker: Broker, version: str = "1.2", **headers):
    client = broker.client()
    answer = client.connect(version, **headers)
    assert answer.command == "CONNECTED", answer
    return client


def error_of(client) -> str:
    frames = client.frames()
    assert frames and frames[-1].command == "ERROR", frames
    assert client.closed
    return frames[-1].get("message")


# -- CONNECT ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "offered, chosen",
    [("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2"), ("1.0,1.1", "1.1"), ("1.1,1.0,1.2", "1.2"), (None, "1.0")],
)
def test_version_negotiation(offered, chosen):
    b = Broker()
    c = b.client()
    answer = c.connect(offered)
    assert answer.command == "CONNECTED"
    assert answer.get("version") == chosen
    assert answer.get("session")
    # 1.0 has no heart-beating
    assert (answer.get("heart-beat") is None) == (chosen == "1.0")
    assert not c.closed


def test_stomp_command_connects_too():
    b = Broker()
    c = b.client()
    answer = c.connect("1.2", command="STOMP")
    assert answer.command == "CONNECTED" and answer.get("version") == "1.2"


def test_no_common_version_is_an_error_with_the_supported_versions():
    b = Broker()
    c = b.client()
    answer = c.connect("2.0,3.1")
    assert answer.command == "ERROR"
    assert answer.get("version") == "1.0,1.1,1.2"
    assert c.closed
    assert c.protocol.session is None


def test_second_connect_is_an_error():
    b = Broker()
    c = connected(b)
    c.send_frame("CONNECT", [("accept-version", "1.2"), ("host", "x")])
    assert "already connected" in error_of(c)


USERS = {
    "alice": ("secret", {"producer", "consumer"}),
    "bob": ("pw", {"consumer"}),
    "carol": ("pw", {"producer"}),
}
_BOTH = frozenset({"producer", "consumer"})
SECURITY = [
    SecuritySetting(
        match="#",
        permissions={
            "send": frozenset({"producer"}),
            "consume": frozenset({"consumer"}),
            "createAddress": _BOTH,
            "createDurableQueue": _BOTH,
            "deleteDurableQueue": _BOTH,
            "createNonDurableQueue": _BOTH,
            "deleteNonDurableQueue": _BOTH,
        },
    )
]


def secure_broker(**kw):
    return Broker(users=USERS, security_settings=SECURITY, **kw)


def test_wrong_credentials_are_refused():
    b = secure_broker()
    c = b.client()
    answer = c.connect("1.2", login="alice", passcode="wrong")
    assert answer.command == "ERROR"
    assert "alice" in answer.get("message") and "invalid" in answer.get("message")
    assert c.closed and c.protocol.session is None
    c2 = b.client()
    assert c2.connect("1.2").command == "ERROR"  # no login, no anonymous user
    assert c2.closed
    c3 = b.client()
    assert c3.connect("1.2", login="alice", passcode="secret").command == "CONNECTED"
    assert c3.protocol.session.user == "alice"


def test_unauthorized_send_is_an_error_naming_the_permission_and_others_go_on():
    b = secure_broker()
    alice = connected(b, login="alice", passcode="secret")
    alice.subscribe("/queue/orders", receipt="s")
    assert alice.one("RECEIPT").get("receipt-id") == "s"
    bob = connected(b, login="bob", passcode="pw")
    bob.send("/queue/orders", b"from bob", receipt="r1")
    frames = bob.frames()
    assert [f.command for f in frames] == ["ERROR"]
    message = frames[0].get("message")
    assert "permission='SEND'" in message and "orders" in message and "bob" in message
    assert frames[0].get("receipt-id") == "r1"
    assert bob.closed
    bob.lose()
    # alice is unaffected
    alice.send("/queue/orders", b"from alice")
    msgs = alice.messages()
    assert [m.body for m in msgs] == [b"from alice"]
    assert not alice.closed


def test_unauthorized_subscribe_is_an_error_and_leaves_no_queue_behind():
    b = secure_broker()
    carol = connected(b, login="carol", passcode="pw")
    queues_before = set(b.server.queues)
    carol.subscribe("/topic/news")
    message = error_of(carol)
    assert "permission='CONSUME'" in message
    carol.lose()
    assert set(b.server.queues) == queues_before


def test_unauthorized_durable_subscribe_creates_no_subscription_queue():
    b = secure_broker()
    carol = connected(b, login="carol", passcode="pw", client_id="c1")
    carol.subscribe("/topic/news", durable_subscription_name="d")
    assert "permission='CONSUME'" in error_of(carol)
    carol.lose()
    assert b.server.find_queue("c1.d") is None


def test_frame_before_connect_is_an_error():
    b = Broker()
    c = b.client()
    c.send_frame("SEND", [("destination", "/queue/x")], b"hi")
    assert "before CONNECT" in error_of(c)
    assert b.server.find_queue("x") is None


def test_unknown_command_is_an_error():
    b = Broker()
    c = connected(b)
    c.send_raw(b"FROB\nfoo:bar\n\n\x00")
    assert "Unknown STOMP command FROB" in error_of(c)


def test_malformed_frame_closes_only_that_connection():
    b = Broker()
    good = connected(b)
    good.subscribe("/queue/q")
    bad = connected(b)
    bad.send_raw(b"SEND\ndestination:/queue/q\nbad:va\\tlue\n\nbody\x00")
    message = error_of(bad)
    assert message.startswith("malformed frame") and "escape" in message
    bad.lose()
    sender = connected(b)
    sender.send("/queue/q", b"still fine")
    assert [m.body for m in good.messages()] == [b"still fine"]


def test_bad_escape_is_allowed_in_stomp_1_0():
    b = Broker()
    c = connected(b, "1.0")
    c.send_raw(b"SEND\ndestination:/queue/q\nbad:va\\tlue\n\nbody\x00")
    assert c.frames() == [] and not c.closed
    assert next(b.server.find_queue("q").waiting()).message.properties["bad"] == "va\\tlue"


def test_oversized_frame_closes_only_that_connection():
    b = Broker(limits=Limits(max_frame_size=1024))
    good = connected(b)
    good.subscribe("/queue/q")
    big = connected(b)
    big.send("/queue/q", b"x" * 2000)
    assert "max-frame-size" in error_of(big)
    big.lose()
    good.send("/queue/q", b"y" * 500)
    assert [m.body for m in good.messages()] == [b"y" * 500]
    assert b.server.find_queue("q").messages_added == 1


# -- SEND, receipts ------------------------------------------------------------------------


def test_send_with_receipt():
    b = Broker()
    c = connected(b)
    c.send("/queue/q", b"hello", receipt="r-1")
    assert c.one("RECEIPT").get("receipt-id") == "r-1"
    q = b.server.find_queue("q")
    assert q.routing_type == RoutingType.ANYCAST
    assert next(q.waiting()).message.body == b"hello"


def block_broker():
    return Broker(address_settings=[AddressSettings(match="small", max_size_messages=1, address_full_policy="BLOCK")])


def test_receipts_wait_for_earlier_sends():
    b = block_broker()
    c = connected(b)
    c.send("/queue/small", b"1")
    c.send("/queue/small", b"2")  # blocked: the address is full
    c.subscribe("/queue/other", "s-other", receipt="sub")
    c.send("/queue/other", b"3", receipt="r3")
    assert c.frames() == []  # nothing may be confirmed before message 2
    consumer = connected(b)
    consumer.subscribe("/queue/small")
    assert [m.body for m in consumer.messages()] == [b"1", b"2"]
    frames = c.frames()
    assert [(f.command, f.get("receipt-id")) for f in frames if f.command == "RECEIPT"] == [
        ("RECEIPT", "sub"),
        ("RECEIPT", "r3"),
    ]
    assert [f.body for f in frames if f.command == "MESSAGE"] == [b"3"]


def test_address_full_fail_is_an_error():
    b = Broker(address_settings=[AddressSettings(match="small", max_size_messages=1, address_full_policy="FAIL")])
    c = connected(b)
    c.send("/queue/small", b"1")
    c.send("/queue/small", b"2", receipt="r")
    frames = c.frames()
    assert frames[-1].command == "ERROR" and "full" in frames[-1].get("message")
    assert frames[-1].get("receipt-id") == "r"
    assert b.server.find_queue("small").message_count == 1


def test_disconnect_receipt_comes_after_earlier_receipted_sends():
    b = block_broker()
    c = connected(b)
    c.send("/queue/small", b"1", receipt="r1")
    c.send("/queue/small", b"2", receipt="r2")  # blocked
    c.send_frame("DISCONNECT", [("receipt", "bye")])
    assert [f.get("receipt-id") for f in c.frames()] == ["r1"]
    assert not c.closed
    consumer = connected(b)
    consumer.subscribe("/queue/small")
    consumer.messages()
    assert [f.get("receipt-id") for f in c.frames("RECEIPT")] == ["r2", "bye"]
    assert c.closed


def test_disconnect_without_receipt_closes():
    b = Broker()
    c = connected(b)
    c.send_frame("DISCONNECT")
    assert c.frames() == [] and c.closed
    c.lose()
    assert c.protocol.session is None and not b.server.sessions


# -- SUBSCRIBE and acks -----------------------------------------------------------------------


def test_subscribe_auto_ack_consumes():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "sub-1", receipt="s")
    assert c.one("RECEIPT").get("receipt-id") == "s"
    c.send("/queue/q", b"a")
    c.send("/queue/q", b"b")
    msgs = c.messages()
    assert [m.body for m in msgs] == [b"a", b"b"]
    for m in msgs:
        assert m.get("subscription") == "sub-1"
        assert m.get("destination") == "/queue/q"
        assert m.get("ack") is None  # nothing to ack in auto mode
        assert m.get("redelivered") is None
    assert len({m.get("message-id") for m in msgs}) == 2
    assert b.server.find_queue("q").message_count == 0


def test_topic_subscription_gets_published_messages():
    b = Broker()
    s1 = connected(b)
    s2 = connected(b)
    s1.subscribe("/topic/news")
    s2.subscribe("/topic/news")
    p = connected(b)
    p.send("/topic/news", b"extra")
    assert [m.body for m in s1.messages()] == [b"extra"]
    assert [m.body for m in s2.messages()] == [b"extra"]
    assert s1.frames() == []


def test_wildcard_topic_subscription():
    b = Broker()
    c = connected(b)
    c.subscribe("/topic/news.#")
    c.send("/topic/news.europe", b"eu")
    c.send("/topic/sport", b"no")
    msgs = c.messages()
    assert [m.body for m in msgs] == [b"eu"]
    assert msgs[0].get("destination") == "/topic/news.europe"


def test_unsubscribe_stops_deliveries_and_drops_the_temporary_queue():
    b = Broker()
    c = connected(b)
    c.subscribe("/topic/news", "t")
    queue_name = next(iter(c.protocol.subscriptions.values())).consumer.queue.name
    c.send_frame("UNSUBSCRIBE", [("id", "t"), ("receipt", "u")])
    assert c.one("RECEIPT").get("receipt-id") == "u"
    assert b.server.find_queue(queue_name) is None
    c.send("/topic/news", b"x")
    assert c.frames() == []


def test_client_ack_is_cumulative():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client")
    for i in range(4):
        c.send("/queue/q", b"%d" % i)
    msgs = c.messages()
    assert len(msgs) == 4
    q = b.server.find_queue("q")
    assert q.message_count == 4
    c.send_frame("ACK", [("id", msgs[2].get("ack")), ("receipt", "a")])
    assert c.one("RECEIPT").get("receipt-id") == "a"
    assert q.message_count == 1  # 0, 1 and 2 acked at once
    # the earlier ones are gone: acking one of them again is an error
    c.send_frame("ACK", [("id", msgs[0].get("ack"))])
    assert "no unacknowledged message" in error_of(c)


def test_client_individual_ack_acks_one():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client-individual")
    for i in range(3):
        c.send("/queue/q", b"%d" % i)
    msgs = c.messages()
    c.send_frame("ACK", [("id", msgs[2].get("ack"))])
    q = b.server.find_queue("q")
    assert q.message_count == 2
    c.send_frame("ACK", [("id", msgs[0].get("ack"))])
    c.send_frame("ACK", [("id", msgs[1].get("ack"))])
    assert q.message_count == 0
    assert not c.closed


def test_unacked_messages_come_back_when_the_connection_goes():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client")
    c.send("/queue/q", b"1")
    c.send("/queue/q", b"2")
    assert len(c.messages()) == 2
    c.lose()
    c2 = connected(b)
    c2.subscribe("/queue/q", "s", ack="client")
    msgs = c2.messages()
    assert [m.body for m in msgs] == [b"1", b"2"]
    assert [m.get("redelivered") for m in msgs] == ["true", "true"]


def test_nack_redelivers_then_dead_letters():
    b = Broker(address_settings=[AddressSettings(match="q", dead_letter_address="DLA", max_delivery_attempts=2)])
    c = connected(b)
    c.subscribe("/queue/DLA", "dlq")
    c.subscribe("/queue/q", "s", ack="client-individual")
    c.send("/queue/q", b"poison", custom="v")
    first = c.one("MESSAGE")
    assert first.get("redelivered") is None
    c.send_frame("NACK", [("id", first.get("ack"))])
    second = c.one("MESSAGE")
    assert second.body == b"poison" and second.get("redelivered") == "true"
    # the message's own id, and the same subscription: the same ids again
    assert second.get("message-id") == first.get("message-id")
    assert second.get("ack") == first.get("ack")
    c.send_frame("NACK", [("id", second.get("ack"))])
    dead = c.one("MESSAGE")
    assert dead.get("subscription") == "dlq"
    assert dead.get("message-id") != first.get("message-id")  # a copy, with an id of its own
    assert dead.body == b"poison"
    assert dead.get(ORIGINAL_ADDRESS) == "q"
    assert dead.get("custom") == "v"
    assert b.server.find_queue("q").message_count == 0


def test_nack_in_client_mode_redelivers_in_order():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client")
    for i in range(3):
        c.send("/queue/q", b"%d" % i)
    msgs = c.messages()
    c.send_frame("NACK", [("id", msgs[2].get("ack"))])
    again = c.messages()
    assert [m.body for m in again] == [b"0", b"1", b"2"]
    assert all(m.get("redelivered") == "true" for m in again)


def test_nack_is_not_stomp_1_0():
    b = Broker()
    c = connected(b, "1.0")
    c.subscribe("/queue/q", "s", ack="client")
    c.send("/queue/q", b"1")
    m = c.one("MESSAGE")
    c.send_frame("NACK", [("message-id", m.get("message-id"))])
    assert "NACK" in error_of(c)


def test_ack_of_unknown_id_is_an_error():
    b = Broker()
    c = connected(b)
    c.send_frame("ACK", [("id", "no-such-id"), ("receipt", "r")])
    frames = c.frames()
    assert frames[-1].command == "ERROR"
    assert "no-such-id" in frames[-1].get("message")
    assert frames[-1].get("receipt-id") == "r"
    assert c.closed


def test_ack_header_forms_per_version():
    b = Broker()
    # 1.0: ACK names the message-id
    c10 = connected(b, "1.0")
    c10.subscribe("/queue/v10", "s", ack="client")
    c10.send("/queue/v10", b"x")
    m = c10.one("MESSAGE")
    assert m.get("ack") is None
    c10.send_frame("ACK", [("message-id", m.get("message-id"))])
    assert b.server.find_queue("v10").message_count == 0 and not c10.closed
    # 1.1: message-id and subscription
    c11 = connected(b, "1.1")
    c11.subscribe("/queue/v11", "s11", ack="client")
    c11.send("/queue/v11", b"x")
    m = c11.one("MESSAGE")
    assert m.get("ack") is None
    c11.send_frame("ACK", [("message-id", m.get("message-id")), ("subscription", "s11")])
    assert b.server.find_queue("v11").message_count == 0 and not c11.closed
    # 1.1 with the wrong subscription is an error
    c11.send("/queue/v11", b"y")
    m = c11.one("MESSAGE")
    c11.send_frame("ACK", [("message-id", m.get("message-id")), ("subscription", "other")])
    assert "subscription other" in error_of(c11)
    # 1.2: the id header carries the MESSAGE's ack header; message-id alone is not enough
    c12 = connected(b, "1.2")
    c12.subscribe("/queue/v12", "s12", ack="client")
    c12.send("/queue/v12", b"x")
    m = c12.one("MESSAGE")
    assert m.get("ack")
    c12.send_frame("ACK", [("id", m.get("ack"))])
    assert b.server.find_queue("v12").message_count == 0 and not c12.closed
    c12.send("/queue/v12", b"y")
    m = c12.one("MESSAGE")
    c12.send_frame("ACK", [("message-id", m.get("message-id"))])
    assert "needs an id header" in error_of(c12)


# -- message-id and ack: the message's own id ------------------------------------------


def test_message_id_is_the_messages_own_id_on_every_connection_and_delivery():
    b = Broker()
    subs = [connected(b, v) for v in ("1.0", "1.1", "1.2")]
    for i, c in enumerate(subs):
        c.subscribe("/topic/news", f"s{i}", ack="client")
    p = connected(b)
    p.send("/topic/news", b"n1")
    p.send("/topic/news", b"n2")
    got = [c.messages() for c in subs]
    assert [[m.body for m in msgs] for msgs in got] == [[b"n1", b"n2"]] * 3
    first_ids = {msgs[0].get("message-id") for msgs in got}
    second_ids = {msgs[1].get("message-id") for msgs in got}
    assert len(first_ids) == 1 and len(second_ids) == 1 and first_ids != second_ids
    # not a per-connection counter: the broker's id of the message
    pending = subs[0].protocol.subscriptions["s0"].pending
    assert [str(ref.message.message_id) for ref in pending.values()] == [m.get("message-id") for m in got[0]]
    # 1.2's ack header is <consumer id>,<message id>, as Artemis writes it
    ack = got[2][0].get("ack")
    consumer_id, _, mid = ack.partition(",")
    assert mid == got[2][0].get("message-id") and int(consumer_id) > 0
    # a redelivery keeps both
    subs[2].send_frame("NACK", [("id", ack)])
    again = subs[2].messages()
    assert again[0].body == b"n1" and again[0].get("redelivered") == "true"
    assert again[0].get("message-id") == got[2][0].get("message-id")
    assert again[0].get("ack") == ack


def test_the_same_message_on_two_subscriptions_of_one_connection():
    b = Broker()
    c = connected(b, "1.1")
    c.subscribe("/topic/dup", "one", ack="client-individual")
    c.subscribe("/topic/dup", "two", ack="client-individual")
    connected(b).send("/topic/dup", b"fan")
    msgs = c.messages()
    assert sorted(m.get("subscription") for m in msgs) == ["one", "two"]
    assert msgs[0].get("message-id") == msgs[1].get("message-id")
    mid = msgs[0].get("message-id")
    queues = {sub.id: sub.consumer.queue for sub in c.protocol.subscriptions.values()}
    # with the subscription named, only that subscription's delivery is acknowledged
    c.send_frame("ACK", [("message-id", mid), ("subscription", "two"), ("receipt", "r2")])
    assert c.one("RECEIPT").get("receipt-id") == "r2"
    assert queues["two"].message_count == 0 and queues["one"].message_count == 1
    # now only one subscription holds it: the bare id is enough
    c.send_frame("ACK", [("message-id", mid), ("receipt", "r1")])
    assert c.one("RECEIPT").get("receipt-id") == "r1"
    assert queues["one"].message_count == 0
    assert not c.protocol._holders


def test_a_bare_message_id_held_by_two_subscriptions_is_an_error_naming_them():
    b = Broker()
    c = connected(b, "1.0")
    c.subscribe("/topic/amb", "one", ack="client")
    c.subscribe("/topic/amb", "two", ack="client")
    connected(b).send("/topic/amb", b"fan")
    m = c.messages()[0]
    c.send_frame("ACK", [("message-id", m.get("message-id"))])
    message = error_of(c)
    assert "subscriptions one, two" in message and "subscription header" in message


def test_stomp_1_2_acks_each_subscription_by_its_ack_header():
    b = Broker()
    c = connected(b, "1.2")
    c.subscribe("/topic/t12", "one", ack="client")
    c.subscribe("/topic/t12", "two", ack="client")
    p = connected(b)
    p.send("/topic/t12", b"a")
    p.send("/topic/t12", b"b")
    msgs = c.messages()
    by_sub = {}
    for m in msgs:
        by_sub.setdefault(m.get("subscription"), []).append(m)
    assert by_sub["one"][1].get("message-id") == by_sub["two"][1].get("message-id")
    assert by_sub["one"][1].get("ack") != by_sub["two"][1].get("ack")
    queues = {sub.id: sub.consumer.queue for sub in c.protocol.subscriptions.values()}
    # cumulative ("client") on one subscription: a and b there, nothing on the other
    c.send_frame("ACK", [("id", by_sub["one"][1].get("ack")), ("receipt", "r")])
    assert c.one("RECEIPT").get("receipt-id") == "r"
    assert queues["one"].message_count == 0 and queues["two"].message_count == 2
    # an ack header naming a consumer that does not hold the message
    other = by_sub["two"][0].get("ack").replace(",", "9,", 1)
    c.send_frame("ACK", [("id", other)])
    assert f"no unacknowledged message with id {other}" in error_of(c)


def test_selector():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "red", selector="color = 'red'")
    c.send("/queue/q", b"1", color="red")
    c.send("/queue/q", b"2", color="blue")
    c.send("/queue/q", b"3", color="red")
    assert [m.body for m in c.messages()] == [b"1", b"3"]
    assert [r.message.body for r in b.server.find_queue("q").waiting()] == [b"2"]


def test_topic_selector():
    b = Broker()
    c = connected(b)
    c.subscribe("/topic/t", "red", selector="color = 'red' AND JMSPriority > 4")
    c.send("/topic/t", b"1", color="red", priority=9)
    c.send("/topic/t", b"2", color="red")
    c.send("/topic/t", b"3", color="blue", priority=9)
    assert [m.body for m in c.messages()] == [b"1"]


def test_invalid_selector_is_an_error():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", selector="color = = 'red'")
    assert "selector" in error_of(c)


# -- flow control ---------------------------------------------------------------------------------


def test_prefetch_size_is_a_message_count():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client-individual", **{"activemq.prefetchSize": 2})
    for i in range(5):
        c.send("/queue/q", b"%d" % i)
    msgs = c.messages()
    assert [m.body for m in msgs] == [b"0", b"1"]
    b.run(10)
    assert c.messages() == []
    c.send_frame("ACK", [("id", msgs[1].get("ack"))])
    more = c.messages()
    assert [m.body for m in more] == [b"2"]
    c.send_frame("ACK", [("id", msgs[0].get("ack"))])
    c.send_frame("ACK", [("id", more[0].get("ack"))])
    assert [m.body for m in c.messages()] == [b"3", b"4"]


def test_prefetch_with_client_mode_returns_credit_for_every_acked_message():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client", **{"activemq.prefetchSize": 3})
    for i in range(6):
        c.send("/queue/q", b"%d" % i)
    msgs = c.messages()
    assert len(msgs) == 3
    c.send_frame("ACK", [("id", msgs[2].get("ack"))])  # cumulative: three credits back
    assert [m.body for m in c.messages()] == [b"3", b"4", b"5"]


def test_consumer_window_size_is_bytes():
    b = Broker()
    c = connected(b)
    body = b"z" * 400
    c.send("/queue/q", body)
    size = next(b.server.find_queue("q").waiting()).size
    for _ in range(5):
        c.send("/queue/q", body)
    c.subscribe("/queue/q", "s", ack="client-individual", consumer_window_size=size * 2)
    msgs = c.messages()
    assert len(msgs) == 2  # exactly two messages fit
    c.send_frame("ACK", [("id", msgs[0].get("ack"))])
    assert len(c.messages()) == 1


def test_auto_ack_never_stalls_with_prefetch():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", **{"activemq.prefetchSize": 1}, consumer_window_size=1)
    for i in range(50):
        c.send("/queue/q", b"%d" % i)
    assert len(c.messages()) == 50
    assert b.server.find_queue("q").message_count == 0


def test_backpressure_pauses_and_resumes_deliveries():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s")
    c.protocol.pauseProducing()
    for i in range(3):
        c.send("/queue/q", b"%d" % i)
    assert c.messages() == []
    c.protocol.resumeProducing()
    assert [m.body for m in c.messages()] == [b"0", b"1", b"2"]


def test_backpressure_also_holds_subscriptions_made_while_paused():
    b = Broker()
    c = connected(b)
    c.send("/queue/q", b"waiting")
    c.protocol.pauseProducing()
    c.subscribe("/queue/q", "s")
    assert c.messages() == []
    c.protocol.resumeProducing()
    assert [m.body for m in c.messages()] == [b"waiting"]


# -- transactions ---------------------------------------------------------------------------------------


def test_transaction_commit_and_abort():
    b = Broker()
    c = connected(b)
    watcher = connected(b)
    watcher.subscribe("/queue/q")
    c.send_frame("BEGIN", [("transaction", "tx1"), ("receipt", "b")])
    assert c.one("RECEIPT").get("receipt-id") == "b"
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "tx1"), ("receipt", "s")], b"1")
    assert c.one("RECEIPT").get("receipt-id") == "s"
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "tx1")], b"2")
    assert watcher.messages() == []
    c.send_frame("COMMIT", [("transaction", "tx1"), ("receipt", "c")])
    assert c.one("RECEIPT").get("receipt-id") == "c"
    assert [m.body for m in watcher.messages()] == [b"1", b"2"]
    c.send_frame("BEGIN", [("transaction", "tx2")])
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "tx2")], b"3")
    c.send_frame("ABORT", [("transaction", "tx2"), ("receipt", "a")])
    assert c.one("RECEIPT").get("receipt-id") == "a"
    assert watcher.messages() == []
    # the transaction is over
    c.send_frame("COMMIT", [("transaction", "tx2")])
    assert "tx2" in error_of(c)


def test_transacted_acks_are_undone_by_abort():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s", ack="client-individual")
    c.send("/queue/q", b"1")
    c.send("/queue/q", b"2")
    msgs = c.messages()
    c.send_frame("BEGIN", [("transaction", "t")])
    for m in msgs:
        c.send_frame("ACK", [("id", m.get("ack")), ("transaction", "t")])
    q = b.server.find_queue("q")
    assert q.message_count == 2
    c.send_frame("ABORT", [("transaction", "t")])
    again = c.messages()
    assert [m.body for m in again] == [b"1", b"2"]
    assert all(m.get("redelivered") == "true" for m in again)
    c.send_frame("BEGIN", [("transaction", "t2")])
    for m in again:
        c.send_frame("ACK", [("id", m.get("ack")), ("transaction", "t2")])
    c.send_frame("COMMIT", [("transaction", "t2"), ("receipt", "done")])
    assert c.one("RECEIPT").get("receipt-id") == "done"
    assert q.message_count == 0


def test_unknown_transaction_is_an_error():
    b = Broker()
    c = connected(b)
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "nope")], b"1")
    assert "nope" in error_of(c)
    assert b.server.find_queue("q") is None


def test_disconnect_aborts_open_transactions():
    b = Broker()
    c = connected(b)
    c.send_frame("BEGIN", [("transaction", "t")])
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "t")], b"lost")
    c.send_frame("DISCONNECT")
    c.lose()
    q = b.server.find_queue("q")
    assert q is None or q.message_count == 0


# -- durable subscriptions -------------------------------------------------------------------------------------


def test_durable_subscription_keeps_messages_while_disconnected():
    b = Broker()
    c = connected(b, client_id="app-1")
    c.subscribe("/topic/news", "d", durable_subscription_name="sub")
    c.send("/topic/news", b"1")
    assert [m.body for m in c.messages()] == [b"1"]
    c.send_frame("DISCONNECT")
    c.lose()
    p = connected(b)
    p.send("/topic/news", b"2")
    p.send("/topic/news", b"3")
    assert b.server.find_queue("app-1.sub").message_count == 2
    c2 = connected(b, client_id="app-1")
    c2.subscribe("/topic/news", "d", durable_subscription_name="sub")
    assert [m.body for m in c2.messages()] == [b"2", b"3"]
    c2.send_frame("UNSUBSCRIBE", [("id", "d"), ("durable-subscription-name", "sub"), ("receipt", "u")])
    assert c2.one("RECEIPT").get("receipt-id") == "u"
    assert b.server.find_queue("app-1.sub") is None
    p.send("/topic/news", b"4")
    assert c2.frames() == []


def test_durable_subscription_without_client_id_is_an_error():
    b = Broker()
    c = connected(b)
    c.subscribe("/topic/news", "d", durable_subscription_name="sub")
    assert "client-id" in error_of(c)


# -- heart-beats and timeouts -----------------------------------------------------------------------------------


def test_server_heart_beats_at_the_negotiated_interval():
    b = Broker()
    c = b.client()
    answer = c.connect("1.2", heart_beat="0,500")
    assert answer.get("heart-beat") == "500,0"
    c.frames()
    assert c.heartbeats == 0
    b.run(0.5)
    c.frames()
    assert c.heartbeats == 1
    for _ in range(4):
        b.run(0.5)
    c.frames()
    assert c.heartbeats == 5
    assert not c.closed  # the client promised nothing, so silence is fine
    b.run(60)
    assert not c.closed


def test_silent_client_is_closed_after_twice_its_interval():
    b = Broker()
    c = b.client()
    answer = c.connect("1.2", heart_beat="1000,0")
    assert answer.get("heart-beat") == "0,1000"
    for _ in range(5):  # heart-beats keep it alive
        b.run(0.9)
        c.send_raw(b"\n")
    assert not c.closed
    b.run(1.99)
    assert not c.closed
    b.run(0.02)
    assert c.closed
    assert "TTL" in c.frames()[-1].get("message")


def test_frames_count_as_liveness():
    b = Broker()
    c = b.client()
    c.connect("1.1", heart_beat="1000,0")
    for i in range(5):
        b.run(1.5)
        c.send("/queue/q", b"%d" % i)
    assert not c.closed


def test_no_connect_within_the_timeout_closes():
    b = Broker(limits=Limits(connect_timeout=2000))
    c = b.client()
    b.run(1.9)
    assert not c.closed
    b.run(0.2)
    assert c.closed
    assert "CONNECT" in c.frames()[-1].get("message")
    ok = b.client()
    b.run(1)
    ok.connect("1.2")
    b.run(5)
    assert not ok.closed


# -- headers and bodies ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_header_escaping_round_trip(version):
    b = Broker()
    c = connected(b, version)
    c.subscribe("/queue/q", "s")
    value = "a:b\nc\\d"
    if version == "1.2":
        value += "\re"
    c.send_frame("SEND", [("destination", "/queue/q"), ("my:key", value)], b"x")
    m = c.one("MESSAGE")
    assert m.get("my:key") == value


def test_unknown_headers_pass_through():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s")
    c.send_frame(
        "SEND",
        [
            ("destination", "/queue/q"),
            ("transformation", "jms-map-json"),
            ("consumerWindowSize", "0"),
            ("content-type", "text/plain;charset=utf-16"),
            ("correlation-id", "corr"),
            ("reply-to", "/queue/replies"),
            ("JMSXGroupID", "g1"),
        ],
        "héllo".encode("utf-16"),
        content_length=True,
    )
    m = c.one("MESSAGE")
    assert m.get("transformation") == "jms-map-json"
    assert m.get("consumerWindowSize") == "0"
    assert m.get("content-type") == "text/plain;charset=utf-16"
    assert m.get("correlation-id") == "corr"
    assert m.get("reply-to") == "/queue/replies"
    assert m.get("JMSXGroupID") == "g1"
    assert m.body.decode("utf-16") == "héllo"


def test_binary_body_with_nuls_and_content_length():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/q", "s")
    body = bytes(range(256)) * 3 + b"\x00\x00"
    c.send_frame("SEND", [("destination", "/queue/q"), ("content-length", str(len(body)))], body)
    m = c.one("MESSAGE")
    assert m.body == body
    assert m.get("content-length") == str(len(body))


def test_message_headers():
    b = Broker()
    b.run(1.0)  # the broker stamps messages by its clock: past the epoch (expires stays ahead)
    c = connected(b)
    c.subscribe("/queue/q", "s")
    c.send("/queue/q", b"x", persistent="true", priority=7, expires=999_999, type="order")
    m = c.one("MESSAGE")
    assert m.get("persistent") == "true"
    assert m.get("priority") == "7"
    assert m.get("expires") == "999999"
    assert m.get("type") == "order"
    assert int(m.get("timestamp")) > 0


def test_expired_message_is_not_delivered():
    b = Broker()
    c = connected(b)
    b.run(10)
    c.send("/queue/q", b"old", expires=b.server.now_ms() + 100)
    c.send("/queue/q", b"new")
    b.run(1)
    c.subscribe("/queue/q", "s")
    assert [m.body for m in c.messages()] == [b"new"]


def test_duplicate_id_header():
    b = Broker()
    c = connected(b)
    c.send("/queue/q", b"1", _AMQ_DUPL_ID="abc")
    c.send("/queue/q", b"2", _AMQ_DUPL_ID="abc", receipt="r")
    assert c.one("RECEIPT").get("receipt-id") == "r"
    assert [r.message.body for r in b.server.find_queue("q").waiting()] == [b"1"]


def test_bad_header_values_are_errors():
    b = Broker()
    c = connected(b)
    c.send("/queue/q", b"x", priority="high")
    assert "priority" in error_of(c)
    c2 = connected(b)
    c2.subscribe("/queue/q", "s", ack="sometimes")
    assert "ack mode" in error_of(c2)
    c3 = connected(b)
    c3.send_frame("SEND", [], b"x")
    assert "destination" in error_of(c3)


def test_duplicate_subscription_id_is_an_error():
    b = Broker()
    c = connected(b)
    c.subscribe("/queue/a", "s")
    c.subscribe("/queue/b", "s")
    assert "already in use" in error_of(c)


# -- connection end ------------------------------------------------------------------------------------------------


def test_no_deliveries_after_an_error():
    b = Broker()
    sub = connected(b)
    sub.subscribe("/queue/q")
    sub.send_raw(b"FROB\n\n\x00")
    assert error_of(sub)
    p = connected(b)
    p.send("/queue/q", b"1")
    # the dying connection must not swallow (auto-ack) messages it will never show
    assert sub.frames() == []
    assert b.server.find_queue("q").message_count == 1
    sub.protocol.resumeProducing()  # a draining transport must not wake it up
    p.send("/queue/q", b"2")
    assert sub.frames() == []
    sub.lose()
    other = connected(b)
    other.subscribe("/queue/q")
    assert [m.body for m in other.messages()] == [b"1", b"2"]


def test_no_deliveries_after_disconnect():
    b = Broker()
    sub = connected(b)
    sub.subscribe("/queue/q")
    sub.send_frame("DISCONNECT", [("receipt", "bye")])
    assert sub.one("RECEIPT").get("receipt-id") == "bye"
    p = connected(b)
    p.send("/queue/q", b"1")
    assert sub.frames() == []
    assert b.server.find_queue("q").message_count == 1


def test_frames_after_disconnect_are_ignored():
    b = block_broker()
    c = connected(b)
    c.send("/queue/small", b"1")
    c.send("/queue/small", b"2", receipt="r2")  # blocked
    c.send_frame("DISCONNECT", [("receipt", "bye")])
    c.send("/queue/late", b"after disconnect")
    consumer = connected(b)
    consumer.subscribe("/queue/small")
    consumer.messages()
    assert [f.get("receipt-id") for f in c.frames("RECEIPT")] == ["r2", "bye"]
    assert b.server.find_queue("late") is None


def test_failed_send_error_keeps_its_receipt_id():
    b = Broker(
        address_settings=[
            AddressSettings(match="small", max_size_messages=1, address_full_policy="BLOCK"),
            AddressSettings(match="failing", max_size_messages=1, address_full_policy="FAIL"),
        ]
    )
    c = connected(b)
    c.send("/queue/failing", b"fills it")
    c.send("/queue/small", b"1")
    c.send("/queue/small", b"2")  # blocked
    c.send("/queue/failing", b"3", receipt="r3")  # waits for 2, then fails
    assert c.frames() == []
    consumer = connected(b)
    consumer.subscribe("/queue/small")
    consumer.messages()
    frames = c.frames()
    assert frames[-1].command == "ERROR"
    assert "full" in frames[-1].get("message")
    assert frames[-1].get("receipt-id") == "r3"
    assert c.closed


def test_too_many_pending_confirmations_pause_reading():
    b = Broker(
        address_settings=[AddressSettings(match="small", max_size_messages=1, address_full_policy="BLOCK")],
        limits=Limits(max_pending_frames=4),
    )
    c = connected(b)
    c.send("/queue/small", b"0")
    for i in range(1, 5):
        c.send("/queue/small", b"%d" % i, receipt="r%d" % i)
    assert c.transport.producerState == "paused"
    consumer = connected(b)
    consumer.subscribe("/queue/small")
    assert len(consumer.messages()) == 5
    assert [f.get("receipt-id") for f in c.frames("RECEIPT")] == ["r1", "r2", "r3", "r4"]
    assert c.transport.producerState == "producing"


# -- versions ---------------------------------------------------------------------------------------------------------


def test_headers_an_older_version_cannot_carry_are_left_out():
    b = Broker()
    old = connected(b, "1.0")
    old.subscribe("/queue/q", "s")
    v11 = connected(b, "1.1")
    v11.subscribe("/topic/t", "s")
    p = connected(b, "1.2")
    p.send_frame("SEND", [("destination", "/queue/q"), ("note", "line1\nline2"), ("a:b", "c"), ("ok", "fine")], b"x")
    m = old.one("MESSAGE")
    assert m.get("ok") == "fine"
    assert m.get("note") is None and m.get("a") is None
    assert b.server.find_queue("q").message_count == 0
    p.send_frame("SEND", [("destination", "/topic/t"), ("cr", "ends with\r"), ("ok", "fine")], b"y")
    m = v11.one("MESSAGE")
    assert m.get("ok") == "fine" and m.get("cr") is None


def test_stomp_1_0_subscription_without_id():
    b = Broker()
    c = connected(b, "1.0")
    c.send_frame("SUBSCRIBE", [("destination", "/queue/q"), ("ack", "client")])
    c.send("/queue/q", b"1")
    m = c.one("MESSAGE")
    assert m.get("subscription") == "/queue/q"
    c.send_frame("ACK", [("message-id", m.get("message-id"))])
    c.send_frame("UNSUBSCRIBE", [("destination", "/queue/q"), ("receipt", "u")])
    assert c.one("RECEIPT").get("receipt-id") == "u"
    assert b.server.find_queue("q") is None  # auto-created, empty, no consumers


def test_subscribe_without_id_is_an_error_in_1_2():
    b = Broker()
    c = connected(b, "1.2")
    c.send_frame("SUBSCRIBE", [("destination", "/queue/q")])
    assert "id header" in error_of(c)


def test_commit_failure_is_an_error_and_routes_nothing():
    b = Broker(address_settings=[AddressSettings(match="nowhere", auto_create_addresses=False)])
    c = connected(b)
    c.send_frame("BEGIN", [("transaction", "t")])
    c.send_frame("SEND", [("destination", "/queue/q"), ("transaction", "t")], b"1")
    c.send_frame("SEND", [("destination", "/queue/nowhere"), ("transaction", "t")], b"2")
    c.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
    frames = c.frames()
    assert frames[-1].command == "ERROR" and "nowhere" in frames[-1].get("message")
    assert frames[-1].get("receipt-id") == "c"
    q = b.server.find_queue("q")
    assert q is None or q.message_count == 0


def test_frames_before_a_malformed_frame_in_the_same_read_are_processed():
    b = Broker()
    c = connected(b)
    c.send_raw(b"SEND\ndestination:/queue/q\n\nfirst\x00SEND\ndestination:/queue/q\nbad\n\nx\x00")
    assert c.frames()[-1].command == "ERROR"
    # the same bytes in two reads route "first"; one read must not differ
    q = b.server.find_queue("q")
    assert q is not None and [r.message.body for r in q.waiting()] == [b"first"]


def test_malformed_heart_beat_header_is_an_error():
    b = Broker()
    c = b.client()
    answer = c.connect("1.2", heart_beat="soon")
    assert answer.command == "ERROR" and "heart-beat" in answer.get("message")
    assert c.closed
