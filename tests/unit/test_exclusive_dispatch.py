"""Exclusive dispatch on a broker queue (protocol-neutral): an exclusive queue's messages go
to one consumer while it lives, as do a queue's while an exclusive consumer is attached;
when that consumer leaves, what it held comes back and the next one takes over."""

from __future__ import annotations

from junction.brokercore.queue import Consumer
from junction.model.message import Message
from tests.unit.stomp_fixtures import Broker


def _consumer(queue, got, *, credit=None, priority=0, exclusive=False, filter=None):
    consumer = Consumer(queue, got.append, credit_messages=credit, priority=priority,
                        exclusive=exclusive, filter=filter)
    queue.add_consumer(consumer)
    return consumer


def _send(broker, count, start=0, **properties):
    session = broker.session()
    for i in range(start, start + count):
        session.submit(Message(address="q", body=b"%d" % i, properties=dict(properties)), None)
    broker.run()


def _bodies(refs):
    return [int(r.message.body) for r in refs]


def test_an_exclusive_consumer_gets_everything_though_it_came_second():
    broker = Broker()
    queue = broker.queue("q")
    plain, exclusive = [], []
    _consumer(queue, plain)
    _consumer(queue, exclusive, exclusive=True)
    _send(broker, 6)
    assert (_bodies(plain), _bodies(exclusive)) == ([], [0, 1, 2, 3, 4, 5])


def test_without_credit_the_exclusive_consumer_makes_the_rest_wait():
    broker = Broker()
    queue = broker.queue("q")
    plain, exclusive = [], []
    _consumer(queue, plain)
    holder = _consumer(queue, exclusive, exclusive=True, credit=2)
    _send(broker, 5)
    assert (_bodies(plain), _bodies(exclusive)) == ([], [0, 1])
    assert queue.waiting_count == 3
    holder.add_credit(1)
    broker.run()
    assert (_bodies(plain), _bodies(exclusive)) == ([], [0, 1, 2])


def test_when_the_exclusive_consumer_leaves_the_others_share_the_rest_nothing_lost():
    broker = Broker()
    queue = broker.queue("q")
    plain1, plain2, exclusive = [], [], []
    _consumer(queue, plain1)
    _consumer(queue, plain2)
    holder = _consumer(queue, exclusive, exclusive=True, credit=3)
    _send(broker, 8)
    assert _bodies(exclusive) == [0, 1, 2] and not plain1 and not plain2
    for ref in exclusive[:2]:
        queue.acknowledge(ref)
    queue.remove_consumer(holder)  # its third is back, first in line
    broker.run()
    assert sorted(_bodies(plain1) + _bodies(plain2)) == [2, 3, 4, 5, 6, 7]
    assert plain1 and plain2  # shared again
    assert _bodies(plain1)[0] == 2 or _bodies(plain2)[0] == 2
    assert queue._exclusive is None  # no exclusive consumer left: the usual dispatch


def test_the_next_exclusive_consumer_takes_over():
    broker = Broker()
    queue = broker.queue("q")
    plain, first, second = [], [], []
    _consumer(queue, plain)
    one = _consumer(queue, first, exclusive=True)
    _consumer(queue, second, exclusive=True)
    _send(broker, 3)
    queue.acknowledge(first[0])
    queue.remove_consumer(one)  # 1 and 2 unacknowledged: back first, to the next holder
    _send(broker, 2, start=3)
    assert (_bodies(plain), _bodies(first), _bodies(second)) == ([], [0, 1, 2], [1, 2, 3, 4])


def test_a_later_exclusive_consumer_takes_over_only_with_a_higher_priority():
    broker = Broker()
    queue = broker.queue("q")
    first, equal, higher = [], [], []
    _consumer(queue, first, exclusive=True, priority=4)
    _consumer(queue, equal, exclusive=True, priority=4)
    _send(broker, 2)
    _consumer(queue, higher, exclusive=True, priority=5)
    _send(broker, 2, start=2)
    assert (_bodies(first), _bodies(equal), _bodies(higher)) == ([0, 1], [], [2, 3])


def test_a_message_the_holder_does_not_select_waits_for_it_to_leave():
    broker = Broker()
    queue = broker.queue("q")
    plain, exclusive = [], []
    _consumer(queue, plain)
    holder = _consumer(queue, exclusive, exclusive=True, filter=_RedOnly())
    _send(broker, 1, colour="blue")
    _send(broker, 1, start=1, colour="red")
    assert (_bodies(plain), _bodies(exclusive)) == ([], [1])
    queue.acknowledge(exclusive[0])
    queue.remove_consumer(holder)
    broker.run()
    assert _bodies(plain) == [0]


class _RedOnly:
    def matches(self, message):
        return message.properties.get("colour") == "red"


def test_an_exclusive_queue_keeps_to_the_first_consumer_it_chose():
    broker = Broker()
    queue = broker.queue("q", exclusive=True)
    a, b = [], []
    first = _consumer(queue, a)
    _consumer(queue, b)
    _send(broker, 5)
    assert (_bodies(a), _bodies(b)) == ([0, 1, 2, 3, 4], [])
    for ref in a:
        queue.acknowledge(ref)
    queue.remove_consumer(first)
    _send(broker, 2, start=5)
    assert _bodies(b) == [5, 6]
    assert queue._exclusive is not None  # the queue stays exclusive with no exclusive consumer


def test_an_exclusive_queue_chooses_by_consumer_priority():
    broker = Broker()
    queue = broker.queue("q", exclusive=True)
    low, high = [], []
    _consumer(queue, low, priority=1)
    _consumer(queue, high, priority=7)
    _send(broker, 3)
    assert (_bodies(low), _bodies(high)) == ([], [0, 1, 2])


def test_a_queue_that_is_not_exclusive_shares_round_robin():
    broker = Broker()
    queue = broker.queue("q")
    a, b = [], []
    _consumer(queue, a)
    _consumer(queue, b)
    _send(broker, 4)
    assert (_bodies(a), _bodies(b)) == ([0, 2], [1, 3])


# -- where the attribute comes from: broker.xml and the address setting ---------------------------


def test_a_declared_queue_takes_its_attribute_else_the_address_setting():
    from junction.config.model import AddressConfig, AddressSettings, QueueConfig
    from junction.model.message import RoutingType

    any_ = RoutingType.ANYCAST

    def declared(name, **attributes):
        given = frozenset(k.replace("_", "-") for k in attributes)
        return AddressConfig(name, frozenset({any_}), (QueueConfig(name, any_, given=given, **attributes),))

    broker = Broker(
        address_settings=[AddressSettings(match="excl.#", default_exclusive_queue=True)],
        addresses=[declared("plain.given", exclusive=True), declared("excl.default"),
                   declared("excl.not", exclusive=False), declared("plain.default")],
    )
    exclusive = {name: broker.server.find_queue(name).definition.exclusive
                 for name in ("plain.given", "excl.default", "excl.not", "plain.default")}
    assert exclusive == {"plain.given": True, "excl.default": True, "excl.not": False, "plain.default": False}
    # what auto-create-queues makes, and a subscription's queue, take the address setting
    session = broker.session(client_id="c")
    a, b = [], []
    session.create_consumer("excl.auto", lambda sc, ref: a.append(ref), routing_type=any_)
    session.create_consumer("excl.auto", lambda sc, ref: b.append(ref), routing_type=any_)
    assert broker.server.find_queue("excl.auto").definition.exclusive is True
    topic = session.create_consumer("excl.topic", lambda sc, ref: None, routing_type=RoutingType.MULTICAST)
    assert topic.queue.definition.exclusive is True
    for i in range(3):
        session.submit(Message(address="excl.auto", body=b"%d" % i), any_)
    broker.run()
    assert (_bodies(a), _bodies(b)) == ([0, 1, 2], [])
