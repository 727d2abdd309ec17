"""Consumer priority on a broker queue (protocol-neutral): a lower-priority consumer gets
messages only while no higher-priority one has credit; equals share round-robin."""

from __future__ import annotations

from junction.brokercore.queue import Consumer
from junction.model.message import Message
from tests.unit.stomp_fixtures import Broker


def _consumers(queue, *priorities, credit=None):
    got = {}
    made = []
    for n, priority in enumerate(priorities):
        got[n] = []
        consumer = Consumer(queue, got[n].append, credit_messages=credit, priority=priority)
        queue.add_consumer(consumer)
        made.append(consumer)
    return made, got


def _send(broker, count):
    session = broker.session()
    for i in range(count):
        session.submit(Message(address="q", body=b"%d" % i), None)
    broker.run()


def test_the_higher_priority_consumer_gets_everything_while_it_has_credit():
    broker = Broker()
    queue = broker.queue("q")
    (low, high), got = _consumers(queue, 0, 5)
    _send(broker, 4)
    assert (len(got[0]), len(got[1])) == (0, 4)


def test_the_lower_priority_consumer_gets_what_the_higher_has_no_credit_for():
    broker = Broker()
    queue = broker.queue("q")
    (low, high), got = _consumers(queue, 0, 5, credit=2)
    _send(broker, 3)
    assert (len(got[0]), len(got[1])) == (1, 2)


def test_equal_priorities_share_round_robin():
    broker = Broker()
    queue = broker.queue("q")
    _, got = _consumers(queue, 3, 3, 1)
    _send(broker, 4)
    assert (len(got[0]), len(got[1]), len(got[2])) == (2, 2, 0)
