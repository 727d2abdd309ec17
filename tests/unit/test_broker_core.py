"""The broker core (server, queues, sessions) on a Clock, without any protocol.

Behaviour follows Apache ActiveMQ Artemis: routing types, filters, wildcard
routing, address settings (auto-create/delete, redelivery, dead-letter and
expiry addresses, address-full policies), transactions, subscriptions and
consumer credit.
"""

from __future__ import annotations

import pytest

from junction.brokercore import queue as queue_module
from junction.brokercore.server import EXPIRY_SCAN_PERIOD_S
from junction.model import errors
from junction.model.message import (
    ACTUAL_EXPIRY,
    DUPLICATE_ID,
    ORIGINAL_ADDRESS,
    ORIGINAL_QUEUE,
)
from tests.unit.stomp_fixtures import (
    AddressConfig,
    AddressSettings,
    Broker,
    Message,
    QueueConfig,
    Recorder,
    RoutingType,
)

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST


def consume(broker, session, destination, **kw):
    rec = Recorder()
    consumer = session.create_consumer(destination, rec, **kw)
    return consumer, rec


# -- routing -------------------------------------------------------------------------


def test_anycast_round_robin_across_consumers():
    b = Broker()
    s = b.session()
    b.queue("orders")
    _, r1 = consume(b, s, "orders", routing_type=ANY, auto_ack=True)
    _, r2 = consume(b, s, "orders", routing_type=ANY, auto_ack=True)
    for i in range(6):
        b.send(s, "orders", b"m%d" % i)
    b.run()
    assert len(r1.refs) == 3 and len(r2.refs) == 3
    # strictly alternating: every consumer gets every other message
    assert sorted(r1.bodies + r2.bodies) == [b"m%d" % i for i in range(6)]
    assert r1.bodies in ([b"m0", b"m2", b"m4"], [b"m1", b"m3", b"m5"])
    assert b.server.find_queue("orders").message_count == 0


def test_anycast_round_robin_across_queues_of_one_address():
    b = Broker()
    s = b.session()
    q1 = b.queue("q1", "orders")
    q2 = b.queue("q2", "orders")
    for i in range(4):
        b.send(s, "orders", b"m%d" % i)
    assert q1.message_count == 2 and q2.message_count == 2
    assert b.server.messages_routed == 4


def test_multicast_fans_out_to_every_subscription():
    b = Broker()
    s = b.session()
    recs = [consume(b, s, "news", routing_type=MULTI, auto_ack=True)[1] for _ in range(3)]
    for i in range(3):
        b.send(s, "news", b"n%d" % i, routing_type=MULTI)
    b.run()
    for rec in recs:
        assert rec.bodies == [b"n0", b"n1", b"n2"]
    # three distinct subscription queues got a ref each
    assert len({ref.queue.name for rec in recs for ref in rec.refs}) == 3


def test_multicast_queue_filters():
    b = Broker()
    s = b.session()
    red = b.queue("red", "paint", MULTI, filter="color = 'red'")
    everything = b.queue("all", "paint", MULTI)
    b.send(s, "paint", b"1", routing_type=MULTI, properties={"color": "red"})
    b.send(s, "paint", b"2", routing_type=MULTI, properties={"color": "blue"})
    b.send(s, "paint", b"3", routing_type=MULTI)
    assert red.message_count == 1
    assert [r.message.body for r in red.waiting()] == [b"1"]
    assert everything.message_count == 3


def test_anycast_queue_filters_pick_the_queue():
    b = Broker()
    s = b.session()
    big = b.queue("big", "orders", ANY, filter="size > 10")
    small = b.queue("small", "orders", ANY, filter="size <= 10")
    b.send(s, "orders", b"a", properties={"size": 50})
    b.send(s, "orders", b"b", properties={"size": 5})
    b.send(s, "orders", b"c", properties={"size": 99})
    assert [r.message.body for r in big.waiting()] == [b"a", b"c"]
    assert [r.message.body for r in small.waiting()] == [b"b"]


def test_consumer_selectors_split_one_queue():
    b = Broker()
    s = b.session()
    q = b.queue("jobs")
    _, red = consume(b, s, "jobs", routing_type=ANY, selector="color = 'red'", auto_ack=True)
    _, blue = consume(b, s, "jobs", routing_type=ANY, selector="color = 'blue'", auto_ack=True)
    for i, color in enumerate(["red", "blue", "green", "red", "blue"]):
        b.send(s, "jobs", b"%d" % i, properties={"color": color})
    b.run()
    assert red.bodies == [b"0", b"3"]
    assert blue.bodies == [b"1", b"4"]
    # no consumer selects green: it stays on the queue
    assert [r.message.body for r in q.waiting()] == [b"2"]
    _, any_rec = consume(b, s, "jobs", routing_type=ANY, auto_ack=True)
    b.run()
    assert any_rec.bodies == [b"2"]
    assert q.message_count == 0


def test_invalid_selector_is_refused():
    b = Broker()
    s = b.session()
    b.queue("jobs")
    with pytest.raises(errors.InvalidFilterError):
        s.create_consumer("jobs", Recorder(), routing_type=ANY, selector="color = ")


def test_wildcard_routing():
    b = Broker()
    s = b.session()
    everything = b.queue("all-news", "news.#", MULTI)
    one_level = b.queue("one-level", "news.*", MULTI)
    b.send(s, "news.europe", b"eu", routing_type=MULTI)
    b.send(s, "news.europe.uk", b"uk", routing_type=MULTI)
    b.send(s, "sport.europe", b"sport", routing_type=MULTI)
    assert [r.message.body for r in everything.waiting()] == [b"eu", b"uk"]
    assert [r.message.body for r in one_level.waiting()] == [b"eu"]
    # the message keeps the address it was sent to
    assert next(everything.waiting()).message.address == "news.europe"


def test_wildcard_subscription_through_a_session():
    b = Broker()
    s = b.session()
    _, rec = consume(b, s, "news.#", routing_type=MULTI, auto_ack=True)
    b.send(s, "news.europe", b"eu", routing_type=MULTI)
    b.send(s, "weather.europe", b"w", routing_type=MULTI)
    b.run()
    assert rec.bodies == [b"eu"]


def test_fully_qualified_queue_name_targets_one_queue():
    b = Broker()
    s = b.session()
    q1 = b.queue("q1", "orders")
    q2 = b.queue("q2", "orders")
    for _ in range(3):
        b.send(s, "orders::q2")
    assert q1.message_count == 0 and q2.message_count == 3


# -- auto-create / auto-delete --------------------------------------------------------


def test_auto_create_and_auto_delete_of_anycast_queue():
    b = Broker()
    s = b.session()
    b.send(s, "work", b"1")
    assert "work" in b.server.addresses
    q = b.server.find_queue("work")
    assert q is not None and q.definition.auto_created and q.message_count == 1
    consumer, rec = consume(b, s, "work", routing_type=ANY)
    b.run()
    assert rec.bodies == [b"1"]
    s.acknowledge(rec.refs[0])
    # still has a consumer: kept
    assert b.server.find_queue("work") is q
    consumer.close()
    assert b.server.find_queue("work") is None
    assert "work" not in b.server.addresses


def test_auto_delete_disabled_keeps_queue_and_address():
    b = Broker(address_settings=[AddressSettings(match="#", auto_delete_queues=False)])
    s = b.session()
    b.send(s, "work")
    consumer, rec = consume(b, s, "work", routing_type=ANY, auto_ack=True)
    b.run()
    consumer.close()
    assert b.server.find_queue("work") is not None
    assert "work" in b.server.addresses


def test_auto_delete_waits_for_messages_to_be_consumed():
    b = Broker()
    s = b.session()
    b.send(s, "work", b"1")
    b.send(s, "work", b"2")
    consumer, rec = consume(b, s, "work", routing_type=ANY, credit_messages=1)
    b.run()
    consumer.close()  # one message is still waiting
    assert b.server.find_queue("work").message_count == 2


def test_auto_create_disabled_refuses_unknown_addresses():
    b = Broker(address_settings=[AddressSettings(match="#", auto_create_addresses=False)])
    s = b.session()
    with pytest.raises(errors.NonExistentAddressError):
        b.send(s, "nowhere")
    with pytest.raises(errors.NonExistentAddressError):
        s.create_consumer("nowhere", Recorder(), routing_type=ANY)
    assert "nowhere" not in b.server.addresses


def test_auto_create_queues_disabled():
    b = Broker(address_settings=[AddressSettings(match="#", auto_create_queues=False)])
    s = b.session()
    b.send(s, "nowhere")  # address created, but no queue: the message is dropped
    assert b.server.find_queue("nowhere") is None
    assert b.server.messages_dropped == 1
    with pytest.raises(errors.NonExistentQueueError):
        s.create_consumer("nowhere", Recorder(), routing_type=ANY)


def test_configured_addresses_are_deployed():
    b = Broker(
        addresses=[
            AddressConfig(
                name="orders",
                routing_types=frozenset({ANY}),
                queues=(QueueConfig(name="orders", routing_type=ANY),),
            )
        ]
    )
    q = b.server.find_queue("orders")
    assert q is not None and not q.definition.auto_created
    s = b.session()
    consumer, rec = consume(b, s, "orders", routing_type=ANY, auto_ack=True)
    b.send(s, "orders")
    b.run()
    consumer.close()
    assert b.server.find_queue("orders") is q  # configured queues are never auto-deleted


# -- ordering -----------------------------------------------------------------------------


def test_priority_ordering():
    b = Broker()
    s = b.session()
    b.queue("q")
    for body, prio in [(b"low", 1), (b"high", 9), (b"mid-a", 4), (b"mid-b", 4), (b"top", 9)]:
        b.send(s, "q", body, priority=prio)
    _, rec = consume(b, s, "q", routing_type=ANY, auto_ack=True)
    b.run()
    assert rec.bodies == [b"high", b"top", b"mid-a", b"mid-b", b"low"]


# -- redelivery, dead letters -------------------------------------------------------------


def test_redelivery_raises_delivery_count():
    b = Broker()
    s = b.session()
    b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q", b"1")
    b.run()
    assert rec.refs[0].delivery_count == 1
    s.cancel(rec.refs[0])
    b.run()
    assert len(rec.refs) == 2
    assert rec.refs[1] is rec.refs[0] and rec.refs[1].delivery_count == 2


def test_redelivery_delay_and_multiplier():
    b = Broker(
        address_settings=[
            AddressSettings(match="q", redelivery_delay=1000, redelivery_delay_multiplier=2.0, max_delivery_attempts=-1)
        ]
    )
    s = b.session()
    q = b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q")
    b.run()
    s.cancel(rec.refs[-1])  # first redelivery: 1000 ms
    b.run(0.999)
    assert len(rec.refs) == 1
    assert q.message_count == 1  # scheduled messages still count
    b.run(0.001)
    assert len(rec.refs) == 2
    s.cancel(rec.refs[-1])  # second redelivery: 2000 ms
    b.run(1.9)
    assert len(rec.refs) == 2
    b.run(0.1)
    assert len(rec.refs) == 3 and rec.refs[-1].delivery_count == 3


def test_max_delivery_attempts_moves_to_dead_letter_address():
    b = Broker(address_settings=[AddressSettings(match="orders", dead_letter_address="DLA", max_delivery_attempts=3)])
    s = b.session()
    dlq = b.queue("DLQ", "DLA")
    q = b.queue("orders")
    _, rec = consume(b, s, "orders", routing_type=ANY)
    b.send(s, "orders", b"poison", properties={"k": "v"})
    b.run()
    for _ in range(2):
        s.cancel(rec.refs[-1])
        b.run()
    assert len(rec.refs) == 3 and dlq.message_count == 0
    s.cancel(rec.refs[-1])  # third failed delivery
    b.run()
    assert len(rec.refs) == 3
    assert q.message_count == 0
    assert dlq.message_count == 1
    dead = next(dlq.waiting()).message
    assert dead.body == b"poison" and dead.address == "DLA"
    assert dead.properties[ORIGINAL_ADDRESS] == "orders"
    assert dead.properties[ORIGINAL_QUEUE] == "orders"
    assert dead.properties["k"] == "v"
    assert q.messages_killed == 1


def test_dead_letter_resources_auto_created():
    b = Broker(
        address_settings=[
            AddressSettings(
                match="orders", dead_letter_address="DLA", max_delivery_attempts=1, auto_create_dead_letter_resources=True
            )
        ]
    )
    s = b.session()
    b.queue("orders")
    _, rec = consume(b, s, "orders", routing_type=ANY)
    b.send(s, "orders", b"bad")
    b.run()
    s.cancel(rec.refs[0])
    dlq = b.server.find_queue("DLQ.orders")
    assert dlq is not None and dlq.address == "DLA"
    assert [r.message.body for r in dlq.waiting()] == [b"bad"]


def test_no_dead_letter_address_drops_the_message():
    b = Broker(address_settings=[AddressSettings(match="orders", max_delivery_attempts=1)])
    s = b.session()
    q = b.queue("orders")
    _, rec = consume(b, s, "orders", routing_type=ANY)
    b.send(s, "orders", b"bad")
    b.run()
    s.cancel(rec.refs[0])
    b.run()
    assert len(rec.refs) == 1
    assert q.message_count == 0
    assert b.server.messages_dead_lettered == 1
    assert b.server.addresses["orders"].messages == 0
    assert sum(queue.message_count for queue in b.server.queues.values()) == 0


# -- expiry -----------------------------------------------------------------------------------


def test_expired_message_is_not_delivered_but_moved_to_expiry_address():
    b = Broker(address_settings=[AddressSettings(match="q", expiry_address="EXP")])
    s = b.session()
    expq = b.queue("EXPQ", "EXP")
    q = b.queue("q")
    b.run(10)
    b.send(s, "q", b"old", expiration=b.server.now_ms() + 500)
    b.send(s, "q", b"fresh")
    b.run(1)
    _, rec = consume(b, s, "q", routing_type=ANY, auto_ack=True)
    b.run()
    assert rec.bodies == [b"fresh"]
    assert q.message_count == 0 and q.messages_expired == 1
    expired = next(expq.waiting()).message
    assert expired.body == b"old"
    assert expired.properties[ORIGINAL_ADDRESS] == "q"
    assert expired.properties[ORIGINAL_QUEUE] == "q"
    assert expired.expiration == 0  # the copy does not expire again


def test_periodic_expiry_scan():
    b = Broker(address_settings=[AddressSettings(match="q", expiry_address="EXP")])
    s = b.session()
    expq = b.queue("EXPQ", "EXP")
    q = b.queue("q")
    b.send(s, "q", b"short", expiration=1000)
    b.send(s, "q", b"long", expiration=int(EXPIRY_SCAN_PERIOD_S * 1000) * 10)
    b.run(EXPIRY_SCAN_PERIOD_S - 1)
    assert q.message_count == 2  # expired, but nobody looked yet
    b.run(1)
    assert [r.message.body for r in q.waiting()] == [b"long"]
    moved = next(expq.waiting()).message
    assert moved.body == b"short"
    assert moved.properties[ACTUAL_EXPIRY] == int(EXPIRY_SCAN_PERIOD_S * 1000)
    assert b.server.messages_expired == 1


def test_expiry_without_expiry_address_removes_the_message():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    b.send(s, "q", expiration=1)
    b.run(EXPIRY_SCAN_PERIOD_S)
    assert q.message_count == 0
    assert b.server.addresses["q"].messages == 0


def test_expiry_delay_applies_to_messages_without_expiration():
    b = Broker(address_settings=[AddressSettings(match="q", expiry_delay=5000, expiry_address="EXP")])
    s = b.session()
    expq = b.queue("EXPQ", "EXP")
    q = b.queue("q")
    b.run(1)
    b.send(s, "q", b"default")
    b.send(s, "q", b"own", expiration=100_000)
    msgs = {r.message.body: r.message for r in q.waiting()}
    assert msgs[b"default"].expiration == 6000
    assert msgs[b"own"].expiration == 100_000
    b.run(5)
    _, rec = consume(b, s, "q", routing_type=ANY, auto_ack=True)
    b.run()
    assert rec.bodies == [b"own"]
    assert [r.message.body for r in expq.waiting()] == [b"default"]


# -- duplicate detection ---------------------------------------------------------------------------


def test_duplicate_detection():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    other = b.queue("other")
    b.send(s, "q", b"1", properties={DUPLICATE_ID: "abc"})
    b.send(s, "q", b"2", properties={DUPLICATE_ID: "abc"})
    b.send(s, "q", b"3", properties={DUPLICATE_ID: b"abc"})  # same id as bytes
    b.send(s, "q", b"4", properties={DUPLICATE_ID: "xyz"})
    b.send(s, "other", b"5", properties={DUPLICATE_ID: "abc"})  # ids are per address
    assert [r.message.body for r in q.waiting()] == [b"1", b"4"]
    assert other.message_count == 1
    assert b.server.messages_duplicate == 2


# -- address-full policies ------------------------------------------------------------------------


def full_broker(policy: str, **extra):
    return Broker(
        address_settings=[AddressSettings(match="small", max_size_messages=1, address_full_policy=policy, **extra)]
    )


def test_address_full_fail():
    b = full_broker("FAIL")
    s = b.session()
    q = b.queue("small")
    b.send(s, "small", b"1")
    with pytest.raises(errors.AddressFullError):
        b.send(s, "small", b"2")
    assert q.message_count == 1


def test_address_full_drop():
    b = full_broker("DROP")
    s = b.session()
    q = b.queue("small")
    b.send(s, "small", b"1")
    d = b.send(s, "small", b"2")
    assert d.called and d.result is None
    assert [r.message.body for r in q.waiting()] == [b"1"]
    assert b.server.messages_dropped == 1


def test_address_full_max_size_bytes():
    b = Broker(address_settings=[AddressSettings(match="small", max_size_bytes=500, address_full_policy="FAIL")])
    s = b.session()
    q = b.queue("small")
    b.send(s, "small", b"x" * 300)  # the first message is always accepted
    b.send(s, "small", b"x" * 10)
    with pytest.raises(errors.AddressFullError):
        b.send(s, "small", b"x" * 300)
    assert q.message_count == 2


def test_address_full_block_waits_for_an_ack_and_keeps_order():
    b = full_broker("BLOCK")
    s = b.session()
    q = b.queue("small")
    other = b.queue("other")
    d1 = b.send(s, "small", b"1")
    assert d1.called
    d2 = b.send(s, "small", b"2")
    d3 = b.send(s, "other", b"3")  # not full, but must not overtake message 2
    assert not d2.called and not d3.called
    assert q.message_count == 1 and other.message_count == 0
    assert len(b.server.addresses["small"].blocked) == 1
    consumer, rec = consume(b, s, "small", routing_type=ANY)
    b.run()
    assert rec.bodies == [b"1"] and not d2.called
    s.acknowledge(rec.refs[0])
    assert d2.called and d3.called
    b.run()
    assert rec.bodies == [b"1", b"2"]
    assert other.message_count == 1
    # message 3 was routed after message 2
    assert next(other.waiting()).message.message_id > rec.refs[1].message.message_id


def test_address_full_block_many_blocked_sends_stay_in_order():
    b = full_broker("BLOCK")
    s = b.session()
    b.queue("small")
    b.send(s, "small", b"0")
    pending = [b.send(s, "small", b"%d" % i) for i in range(1, 5)]
    _, rec = consume(b, s, "small", routing_type=ANY)
    for _ in range(10):
        b.run()
        for ref in list(rec.refs):
            if ref.consumer is not None:
                s.acknowledge(ref)
    b.run()
    assert rec.bodies == [b"%d" % i for i in range(5)]
    assert all(d.called for d in pending)


# -- transactions --------------------------------------------------------------------------------------


def test_transaction_sends_are_invisible_until_commit():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    tx = s.begin()
    s.send(Message(address="q", body=b"1"), routing_type=ANY, tx=tx)
    s.send(Message(address="q", body=b"2"), routing_type=ANY, tx=tx)
    assert q.message_count == 0
    d = s.commit(tx)
    assert d.called
    assert [r.message.body for r in q.waiting()] == [b"1", b"2"]
    assert s.commit(tx).called  # a finished transaction cannot commit again
    failures = []
    s.commit(tx).addErrback(failures.append)
    assert failures and failures[0].check(errors.TransactionError)


def test_transaction_rollback_discards_sends():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    tx = s.begin()
    s.send(Message(address="q", body=b"1"), routing_type=ANY, tx=tx)
    s.rollback(tx)
    assert q.message_count == 0


def test_transaction_acks_commit_and_rollback():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q", b"1")
    b.send(s, "q", b"2")
    b.run()
    tx = s.begin()
    s.acknowledge(rec.refs[0], tx)
    s.acknowledge(rec.refs[1], tx)
    assert q.message_count == 2  # not yet
    s.rollback(tx)
    b.run()
    # both given back and redelivered
    assert len(rec.refs) == 4
    assert [r.delivery_count for r in rec.refs[2:]] == [2, 2]
    assert [r.message.body for r in rec.refs[2:]] == [b"1", b"2"]
    tx = s.begin()
    for ref in rec.refs[2:]:
        s.acknowledge(ref, tx)
    s.commit(tx)
    assert q.message_count == 0
    assert q.messages_acknowledged == 2


def test_session_close_rolls_back_open_transactions():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q", b"1")
    b.run()
    tx = s.begin()
    s.acknowledge(rec.refs[0], tx)
    s.send(Message(address="q", body=b"never"), routing_type=ANY, tx=tx)
    s.close()
    b.run()
    assert [r.message.body for r in q.waiting()] == [b"1"]
    assert next(q.waiting()).delivery_count == 1


# -- subscriptions ---------------------------------------------------------------------------------------


def test_temporary_subscription_queue_goes_with_the_consumer():
    b = Broker()
    s = b.session()
    consumer, rec = consume(b, s, "news", routing_type=MULTI)
    name = consumer.queue.name
    assert consumer.queue.definition.temporary
    b.send(s, "news", b"1", routing_type=MULTI)
    b.run()
    assert rec.bodies == [b"1"]
    consumer.close()
    assert b.server.find_queue(name) is None
    # The auto-created address went with its last queue (auto-delete-addresses).
    assert "news" not in b.server.addresses
    # later messages go nowhere
    b.send(s, "news", b"2", routing_type=MULTI)
    assert b.server.messages_dropped == 1


def test_temporary_subscription_queue_goes_with_the_session():
    b = Broker()
    s = b.session()
    consumer, _ = consume(b, s, "news", routing_type=MULTI)
    name = consumer.queue.name
    s.close()
    assert b.server.find_queue(name) is None
    assert s not in b.server.sessions


def test_durable_subscription_survives_consumer_close():
    b = Broker()
    s = b.session(client_id="app")
    consumer, rec = consume(b, s, "news", routing_type=MULTI, subscription_name="sub1", auto_ack=True)
    assert consumer.queue.name == "app.sub1"
    consumer.close()
    s.close()
    other = b.session()
    b.send(other, "news", b"while-away", routing_type=MULTI)
    queue = b.server.find_queue("app.sub1")
    assert queue is not None and queue.message_count == 1
    s2 = b.session(client_id="app")
    _, rec2 = consume(b, s2, "news", routing_type=MULTI, subscription_name="sub1", auto_ack=True)
    b.run()
    assert rec2.bodies == [b"while-away"]
    for c in list(s2.consumers):
        c.close()
    s2.unsubscribe_durable("sub1")
    assert b.server.find_queue("app.sub1") is None


def test_durable_subscription_needs_a_client_id():
    b = Broker()
    s = b.session()
    with pytest.raises(errors.BrokerError):
        s.create_consumer("news", Recorder(), routing_type=MULTI, subscription_name="sub1")


def test_durable_subscription_with_changed_selector_is_replaced():
    b = Broker()
    s = b.session(client_id="app")
    c, _ = consume(b, s, "news", routing_type=MULTI, subscription_name="s", selector="a = 1")
    c.close()
    b.send(s, "news", b"old", routing_type=MULTI, properties={"a": 1})
    assert b.server.find_queue("app.s").message_count == 1
    c2, _ = consume(b, s, "news", routing_type=MULTI, subscription_name="s", selector="a = 2")
    assert c2.queue.definition.filter == "a = 2"
    assert c2.queue.message_count == 0


def test_max_consumers():
    b = Broker()
    s = b.session()
    b.queue("q", max_consumers=1)
    first, _ = consume(b, s, "q", routing_type=ANY)
    with pytest.raises(errors.MaxConsumersReachedError):
        s.create_consumer("q", Recorder(), routing_type=ANY)
    first.close()
    consume(b, s, "q", routing_type=ANY)  # room again


def test_default_max_consumers_from_address_settings():
    b = Broker(address_settings=[AddressSettings(match="q", default_max_consumers=1)])
    s = b.session()
    consume(b, s, "q", routing_type=ANY)
    with pytest.raises(errors.MaxConsumersReachedError):
        s.create_consumer("q", Recorder(), routing_type=ANY)


def test_purge_on_no_consumers():
    b = Broker()
    s = b.session()
    q = b.queue("q", purge_on_no_consumers=True)
    c1, rec1 = consume(b, s, "q", routing_type=ANY, credit_messages=1)
    c2, rec2 = consume(b, s, "q", routing_type=ANY, credit_messages=1)
    for i in range(5):
        b.send(s, "q", b"%d" % i)
    b.run()
    assert q.message_count == 5
    c1.close()
    assert q.message_count == 5  # c2 is still there: nothing purged, c1's one goes back
    c2.close()
    assert q.message_count == 0
    assert b.server.addresses["q"].messages == 0
    assert b.server.find_queue("q") is q  # purged, not deleted


# -- credit and flow control --------------------------------------------------------------------------------


def test_message_credit_window():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    consumer, rec = consume(b, s, "q", routing_type=ANY, credit_messages=2)
    for i in range(5):
        b.send(s, "q", b"%d" % i)
    b.run()
    assert rec.bodies == [b"0", b"1"]
    assert q.in_flight_count == 2 and q.waiting_count == 3
    s.acknowledge(rec.refs[0])
    b.run()
    assert rec.bodies == [b"0", b"1", b"2"]
    s.cancel(rec.refs[1])  # a cancel returns credit too (and the message comes back first)
    b.run()
    assert rec.bodies == [b"0", b"1", b"2", b"1"]


def test_byte_credit_window():
    b = Broker()
    s = b.session()
    b.queue("q")
    for _ in range(10):
        b.send(s, "q", b"x" * 200)
    size = next(b.server.find_queue("q").waiting()).size
    # room for two and a half messages: the third overdraws the window, as Artemis does
    consumer, rec = consume(b, s, "q", routing_type=ANY, credit_bytes=size * 5 // 2)
    b.run()
    assert len(rec.refs) == 3
    assert consumer.consumer.credit_bytes < 0
    s.acknowledge(rec.refs[0])  # back to half a message of credit: one more
    b.run()
    assert len(rec.refs) == 4
    b.run()
    assert len(rec.refs) == 4


def test_auto_ack_never_stalls_with_credit():
    b = Broker()
    s = b.session()
    b.queue("q")
    consumer, rec = consume(b, s, "q", routing_type=ANY, auto_ack=True, credit_messages=1)
    for i in range(20):
        b.send(s, "q", b"%d" % i)
    b.run()
    assert len(rec.refs) == 20
    assert consumer.consumer.credit_messages == 1


def test_add_credit_explicitly():
    b = Broker()
    s = b.session()
    b.queue("q")
    consumer, rec = consume(b, s, "q", routing_type=ANY, credit_messages=0)
    b.send(s, "q")
    b.send(s, "q")
    b.run()
    assert rec.refs == []
    consumer.add_credit(1)
    b.run()
    assert len(rec.refs) == 1


def test_pause_and_resume():
    b = Broker()
    s = b.session()
    b.queue("q")
    consumer, rec = consume(b, s, "q", routing_type=ANY, auto_ack=True)
    s.set_paused(True)
    for i in range(3):
        b.send(s, "q", b"%d" % i)
    b.run()
    assert rec.refs == []
    s.set_paused(False)
    b.run()
    assert rec.bodies == [b"0", b"1", b"2"]


def test_closing_a_consumer_returns_in_flight_messages_in_order():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    consumer, rec = consume(b, s, "q", routing_type=ANY)
    for i in range(3):
        b.send(s, "q", b"%d" % i)
    b.run()
    consumer.close()
    assert [r.message.body for r in q.waiting()] == [b"0", b"1", b"2"]
    assert q.in_flight_count == 0
    _, rec2 = consume(b, s, "q", routing_type=ANY, auto_ack=True)
    b.run()
    assert rec2.bodies == [b"0", b"1", b"2"]


def test_session_close_returns_transacted_and_unacked_refs_in_delivery_order():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    for i in range(3):
        b.send(s, "q", b"%d" % i)
    b.run()
    tx = s.begin()
    s.acknowledge(rec.refs[0], tx)  # acked in a transaction that never commits
    s.close()
    assert [r.message.body for r in q.waiting()] == [b"0", b"1", b"2"]


def test_address_limit_counts_a_fanned_out_message_once():
    b = Broker(address_settings=[AddressSettings(match="news", max_size_messages=2, address_full_policy="FAIL")])
    s = b.session()
    for name in ("a", "b", "c"):
        b.queue(name, "news", MULTI)
    b.send(s, "news", b"1", routing_type=MULTI)
    b.send(s, "news", b"2", routing_type=MULTI)  # Artemis: one message so far, there is room
    assert b.server.addresses["news"].messages == 2


def test_auto_created_topic_address_is_deleted_when_its_last_subscription_goes():
    b = Broker()
    s = b.session()
    consumer, _ = consume(b, s, "news", routing_type=MULTI)
    assert b.server.addresses["news"].auto_created
    consumer.close()
    assert "news" not in b.server.addresses


def test_address_full_block_chain_keeps_order_when_a_retried_send_blocks_again():
    b = full_broker("BLOCK")
    s = b.session()
    b.queue("small")
    other = b.queue("other")
    b.send(s, "small", b"1")
    b.send(s, "small", b"2")  # blocked
    b.send(s, "small", b"3")  # waits for 2
    b.send(s, "small", b"4")  # waits for 3
    _, rec = consume(b, s, "small", routing_type=ANY)
    b.run()
    s.acknowledge(rec.refs[0])  # room for 2; 3 blocks again
    b.send(s, "other", b"5")  # must wait for 4
    b.run()
    s.acknowledge(rec.refs[1])  # room for 3; 4 blocks again
    b.run()
    assert other.message_count == 0, "message 5 overtook message 4"
    s.acknowledge(rec.refs[2])
    b.run()
    assert rec.bodies == [b"1", b"2", b"3", b"4"]
    assert other.message_count == 1


def test_commit_waits_for_blocked_sends_of_the_session():
    b = full_broker("BLOCK")
    s = b.session()
    b.queue("small")
    other = b.queue("other")
    b.send(s, "small", b"1")
    blocked = b.send(s, "small", b"2")
    tx = s.begin()
    s.send(Message(address="other", body=b"3"), routing_type=ANY, tx=tx)
    committed = s.commit(tx)
    assert not committed.called
    assert other.message_count == 0, "the transaction overtook an earlier send"
    _, rec = consume(b, s, "small", routing_type=ANY)
    b.run()
    s.acknowledge(rec.refs[0])
    assert blocked.called and committed.called
    assert other.message_count == 1


def test_failed_commit_routes_nothing_and_gives_acks_back():
    b = Broker(address_settings=[AddressSettings(match="nowhere", auto_create_addresses=False)])
    s = b.session()
    q = b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q", b"delivered")
    b.run()
    tx = s.begin()
    s.acknowledge(rec.refs[0], tx)
    s.send(Message(address="q", body=b"first"), routing_type=ANY, tx=tx)
    s.send(Message(address="nowhere", body=b"second"), routing_type=ANY, tx=tx)
    failures = []
    s.commit(tx).addErrback(failures.append)
    assert failures and failures[0].check(errors.NonExistentAddressError)
    b.run()
    # all or nothing: "first" was not routed, and the ack was undone
    assert [r.message.body for r in rec.refs] == [b"delivered", b"delivered"]
    assert rec.refs[1].delivery_count == 2
    assert q.message_count == 1


def test_duplicate_ids_inside_one_transaction():
    b = Broker()
    s = b.session()
    q = b.queue("q")
    tx = s.begin()
    s.send(Message(address="q", body=b"1", properties={DUPLICATE_ID: "d"}), routing_type=ANY, tx=tx)
    s.send(Message(address="q", body=b"2", properties={DUPLICATE_ID: "d"}), routing_type=ANY, tx=tx)
    s.commit(tx)
    assert [r.message.body for r in q.waiting()] == [b"1"]


def test_selector_scan_limit_does_not_starve_later_messages(monkeypatch):
    monkeypatch.setattr(queue_module, "MAX_SELECTOR_SCAN", 5)
    b = Broker()
    s = b.session()
    q = b.queue("q")
    for i in range(12):
        b.send(s, "q", b"skip%d" % i, properties={"want": False})
    b.send(s, "q", b"wanted", properties={"want": True})
    _, rec = consume(b, s, "q", routing_type=ANY, selector="want = TRUE", auto_ack=True)
    b.run()
    assert rec.bodies == [b"wanted"]
    assert q.message_count == 12


def test_selector_scan_sees_messages_that_arrive_during_a_capped_scan(monkeypatch):
    monkeypatch.setattr(queue_module, "MAX_SELECTOR_SCAN", 5)
    b = Broker()
    s = b.session()
    q = b.queue("q")
    for i in range(12):
        b.send(s, "q", b"skip%d" % i, properties={"want": False}, priority=1)
    _, rec = consume(b, s, "q", routing_type=ANY, selector="want = TRUE", auto_ack=True)
    b.run()  # a full (chunked) scan finds nothing
    assert rec.refs == [] and q._scan_cursor is None
    q.deliver_now()  # another scan: its first chunk stops at the limit, cursor in lane 1
    assert q._scan_cursor is not None
    # a wanted message lands in a higher lane, behind the cursor
    b.send(s, "q", b"urgent", properties={"want": True}, priority=9)
    b.run()
    assert rec.bodies == [b"urgent"]
    assert q.message_count == 12


def test_deleting_a_queue_releases_refs_waiting_for_redelivery():
    b = Broker(address_settings=[AddressSettings(match="q", redelivery_delay=5000)])
    s = b.session()
    b.queue("q")
    _, rec = consume(b, s, "q", routing_type=ANY)
    b.send(s, "q")
    b.run()
    s.cancel(rec.refs[0])  # back in 5 s
    assert b.server.addresses["q"].messages == 1
    b.server.destroy_queue("q")
    b.run(5)
    assert rec.refs[1:] == []
    assert b.server.addresses["q"].messages == 0
    assert b.server.addresses["q"].size == 0


def test_auto_created_queue_whose_messages_expired_is_deleted():
    b = Broker()
    s = b.session()
    b.send(s, "work", expiration=1000)
    assert b.server.find_queue("work") is not None
    b.run(EXPIRY_SCAN_PERIOD_S)
    assert b.server.find_queue("work") is None


def test_auto_delete_queues_message_count():
    b = Broker(address_settings=[AddressSettings(match="#", auto_delete_queues_message_count=5)])
    s = b.session()
    b.send(s, "work", b"1")
    b.send(s, "work", b"2")
    consumer, _ = consume(b, s, "work", routing_type=ANY, credit_messages=0)
    consumer.close()  # two messages left, at most five allowed
    assert b.server.find_queue("work") is None


def test_dead_letter_resources_for_an_address_with_a_quote():
    b = Broker(
        address_settings=[
            AddressSettings(match="#", dead_letter_address="DLA", max_delivery_attempts=1, auto_create_dead_letter_resources=True)
        ]
    )
    s = b.session()
    _, rec = consume(b, s, "o'brien", routing_type=ANY)
    b.send(s, "o'brien", b"bad")
    b.run()
    s.cancel(rec.refs[0])
    dlq = b.server.find_queue("DLQ.o'brien")
    assert [r.message.body for r in dlq.waiting()] == [b"bad"]
