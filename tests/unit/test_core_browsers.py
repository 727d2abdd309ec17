"""Browse-only CORE consumers (junction.brokercore.core_browsers) against a broker core in
memory: credits, start/stop, the selector, forced delivery, and the messages staying."""

from __future__ import annotations

from junction.brokercore.core_consumers import FORCED_DELIVERY
from junction.protocols.core import ExceptionType, encode_packet
from junction.protocols.core import packets as p
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_core_messaging import (
    CH,
    NULL,
    CoreClient,
    consume,
    create_queue,
    deliveries,
    send,
)

BROWSER = 1


def browser_of(colours=("red", "blue", "red"), selector=None):
    client = CoreClient(Broker())
    client.open()
    create_queue(client)
    for colour in colours:
        send(client, colour.encode(), properties=(("colour", colour),))
    (query,) = client.send(p.SessCreateConsumer(BROWSER, "q", selector, True, True, 0, channel_id=CH))
    assert type(query) is p.SessQueueQueryResponseV3 and query.exists and query.message_count == len(colours)
    return client


def test_a_browser_delivers_under_its_credit_only_while_started():
    client = browser_of()
    assert client.send(p.SessFlowToken(BROWSER, 1, channel_id=CH)) == []  # not started: nothing
    (first,) = deliveries(client.send(p.SessStart(channel_id=CH)))  # one byte of credit: one message
    assert (first.body, first.consumer_id, first.delivery_count) == (b"red", BROWSER, 1)
    # the client returns what it consumed: the credit is positive again
    (second,) = deliveries(client.send(p.SessFlowToken(BROWSER, len(encode_packet(first)), channel_id=CH)))
    assert second.body == b"blue"
    client.send(p.SessStop(channel_id=CH))
    assert client.send(p.SessFlowToken(BROWSER, -1, channel_id=CH)) == []  # stopped: nothing
    (third,) = deliveries(client.send(p.SessStart(channel_id=CH)))
    assert third.body == b"red"
    # exhausted: a forced delivery answers with the marker alone
    (marker,) = client.send(p.SessForceConsumerDelivery(BROWSER, 7, channel_id=CH))
    assert marker.headers.property(FORCED_DELIVERY) == 7 and marker.consumer_id == BROWSER


def test_a_browser_takes_nothing():
    client = browser_of()
    got = deliveries(client.send(p.SessFlowToken(BROWSER, -1, channel_id=CH), p.SessStart(channel_id=CH)))
    assert [x.body for x in got] == [b"red", b"blue", b"red"]
    # its acknowledgement changes nothing; closing it gives nothing back
    assert client.send(p.SessAcknowledge(BROWSER, got[-1].headers.message_id, True, channel_id=CH)) == [NULL]
    assert client.send(p.SessConsumerClose(BROWSER, channel_id=CH)) == [NULL]
    again = deliveries(consume(client))
    assert [x.body for x in again] == [b"red", b"blue", b"red"]
    assert [x.delivery_count for x in again] == [1, 1, 1]


def test_a_browser_with_a_selector():
    client = browser_of(selector="colour = 'red'")
    got = deliveries(client.send(p.SessFlowToken(BROWSER, -1, channel_id=CH), p.SessStart(channel_id=CH)))
    assert [x.body for x in got] == [b"red", b"red"]


def test_a_browser_with_a_bad_selector_is_refused():
    client = CoreClient(Broker())
    client.open()
    create_queue(client)
    (answer,) = client.send(p.SessCreateConsumer(BROWSER, "q", "colour = = 1", True, True, 0, channel_id=CH))
    assert answer.code == ExceptionType.INVALID_FILTER_EXPRESSION
