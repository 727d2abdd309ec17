"""AMQP <-> core conversion takes its time from the broker's injected clock, never the wall clock.

``to_core`` stamps a message and starts its ``ttl`` at ``now_ms``; ``to_amqp``
writes the ``ttl`` left at ``now_ms``.  Both require the time: there is no
fallback to ``time.time()``.  The AMQP adapter passes its reactor's time, so
on a :class:`~twisted.internet.task.Clock` the stamps are the clock's.
"""

from __future__ import annotations

import pytest
from proton import Message as ProtonMessage

from junction.brokercore.amqp_convert import to_amqp, to_core
from junction.model.message import Message
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.message.sections import Header
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_amqp_server import AmqpClient, assert_no_leaks

NOW_MS = 1_700_000_000_000


def _amqp_with_ttl(ttl: int) -> bytes:
    return sections_codec.encode_header(Header(ttl=ttl)) + sections_codec.encode_body_value("x")


def test_to_core_stamps_and_starts_the_ttl_at_the_given_time():
    message = to_core(_amqp_with_ttl(5000), "q", now_ms=NOW_MS)
    assert (message.timestamp, message.expiration) == (NOW_MS, NOW_MS + 5000)


def test_to_amqp_writes_the_ttl_left_at_the_given_time():
    message = Message("q", b"x", expiration=NOW_MS + 5000)
    header = sections_codec.decode_message(to_amqp(message, now_ms=NOW_MS + 1000)).header
    assert header.ttl == 4000


def test_the_time_is_never_taken_from_the_wall_clock():
    with pytest.raises(TypeError):
        to_core(_amqp_with_ttl(5000), "q")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        to_amqp(Message("q", b"x", expiration=NOW_MS))  # type: ignore[call-arg]


def test_the_amqp_adapter_stamps_and_expires_by_its_reactor():
    broker = Broker()
    broker.clock.advance(1_000)  # the clock's epoch is far from the wall clock's
    producer = AmqpClient(broker, container="producer")
    message = ProtonMessage(body="hello")
    message.ttl = 5.0
    producer.send(producer.sender("orders"), message)
    (ref,) = broker.server.find_queue("orders").waiting()
    assert (ref.message.timestamp, ref.message.expiration) == (1_000_000, 1_005_000)
    broker.clock.advance(1)
    consumer = AmqpClient(broker, container="consumer")
    ((got, delivery),) = consumer.receive(consumer.receiver("orders", credit=1))
    assert round(got.ttl * 1000) == 4000
    delivery.settle()
    consumer.pump()
    assert_no_leaks(broker, producer, consumer)
