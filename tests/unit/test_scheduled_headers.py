"""How STOMP headers, AMQP annotations and AMQP receivers ask for scheduled delivery and
consumer priority (Artemis's rules, read from StompUtils, AMQPMessage, AmqpCoreConverter,
DefaultSenderController and AmqpSupport; the integration test compares with real Artemis)."""

from __future__ import annotations

import pytest
from proton import Message as ProtonMessage
from proton import symbol

from junction.brokercore.amqp_convert import to_amqp, to_core
from junction.brokercore.consumer_priority import receiver_priority, split_parameters
from junction.brokercore.scheduled import SCHEDULED_DELIVERY
from junction.brokercore.scheduled_headers import amqp_delivery_time, stomp_delivery_time
from junction.model.message import Message
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.types import Scalar, Symbol
from junction.protocols.stomp.connection import StompError
from tests.unit.stomp_fixtures import Broker

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    "delay,time,expected",
    [
        (None, None, 0),
        ("1500", None, NOW + 1500),
        (None, str(NOW + 9), NOW + 9),
        ("600000", str(NOW + 9), NOW + 9),  # the time wins
        ("1500", "0", NOW + 1500),  # ... only when above 0
        ("0", None, 0),
        ("-5", "-1", 0),
        ("+7", None, NOW + 7),  # Long.parseLong takes a sign
    ],
)
def test_stomp_headers(delay, time, expected):
    assert stomp_delivery_time(delay, time, NOW) == expected


@pytest.mark.parametrize("value", ["abc", "1.5", " 12", "", "1_000", str(2**63)])
def test_a_stomp_header_that_is_not_a_long_is_an_error(value):
    with pytest.raises(StompError, match="AMQ_SCHEDULED_TIME"):
        stomp_delivery_time(None, value, NOW)


DT, DD = Symbol("x-opt-delivery-time"), Symbol("x-opt-delivery-delay")


@pytest.mark.parametrize(
    "annotations,expected",
    [
        (None, 0),
        ({DD: 1500}, NOW + 1500),
        ({DD: Scalar("int", 700)}, NOW + 700),
        ({DT: NOW + 9}, NOW + 9),
        ({DT: NOW + 9, DD: 600000}, NOW + 9),
        ({DT: 0, DD: 600000}, 0),  # a numeric time wins, whatever its value
        ({DD: -5}, NOW - 5),  # in the past: the queue delivers it at once
        ({DD: "1500"}, 0),  # not a number: ignored
        ({DT: Scalar("timestamp", NOW + 9)}, 0),  # a timestamp is not a Java Number
        ({DT: True}, 0),
    ],
)
def test_amqp_annotations(annotations, expected):
    assert amqp_delivery_time(annotations, NOW) == expected


def test_an_amqp_message_keeps_its_annotations_and_gets_the_property():
    data = ProtonMessage(body="x", annotations={symbol("x-opt-delivery-delay"): 1500}).encode()
    message = to_core(data, "q", now_ms=NOW)
    assert message.properties[SCHEDULED_DELIVERY] == NOW + 1500
    out = sections_codec.decode_message(to_amqp(message, now_ms=NOW))
    assert dict(out.message_annotations) == {DD: 1500}  # as sent: no time added
    assert not out.application_properties


def test_a_scheduled_message_from_another_protocol_reaches_amqp_as_the_annotation():
    message = Message(address="q", body=b"x", properties={SCHEDULED_DELIVERY: NOW + 9, "k": "v"})
    out = sections_codec.decode_message(to_amqp(message, now_ms=NOW))
    annotations = dict(out.message_annotations)
    assert annotations[DT] == NOW + 9
    # besides the JMS type annotations every converted message gets, no other delivery annotation
    assert not {key for key in annotations if str(key).startswith("x-opt-delivery")} - {DT}
    assert dict(out.application_properties) == {"k": "v"}


@pytest.mark.parametrize(
    "address,expected",
    [
        ("q", ("q", {})),
        ("q?consumer-priority=5", ("q", {"consumer-priority": "5"})),
        ("a::q?consumer-priority=-5&foo=bar", ("a::q", {"consumer-priority": "-5", "foo": "bar"})),
        ("q?flag", ("q", {"flag": ""})),
    ],
)
def test_address_parameters(address, expected):
    assert split_parameters(address) == expected


@pytest.mark.parametrize(
    "parameters,properties,expected",
    [
        ({}, None, 0),
        ({"consumer-priority": "5"}, None, 5),
        ({"consumer-priority": "-5"}, {}, -5),
        ({}, {symbol("priority"): 7}, 7),
        ({"consumer-priority": "-5"}, {symbol("priority"): 7}, 7),  # the link property wins
        ({}, {symbol("priority"): 2**32 + 3}, 3),  # Number.intValue()
        ({"foo": "bar"}, {symbol("other"): 1}, 0),
    ],
)
def test_receiver_priority(parameters, properties, expected):
    assert receiver_priority(parameters, properties) == expected


@pytest.mark.parametrize(
    "parameters,properties",
    [
        ({"consumer-priority": "abc"}, None),
        ({"consumer-priority": str(2**31)}, None),  # Integer.valueOf: an int
        ({}, {symbol("priority"): "5"}),
    ],
)
def test_a_priority_that_is_not_an_integer_is_refused(parameters, properties):
    with pytest.raises(ValueError, match="priority"):
        receiver_priority(parameters, properties)


def test_an_application_property_of_that_name_does_not_schedule_an_amqp_message():
    data = ProtonMessage(body="x", properties={"_AMQ_SCHED_DELIVERY": NOW + 9}).encode()
    assert SCHEDULED_DELIVERY not in to_core(data, "q", now_ms=NOW).properties


def test_a_stomp_send_is_held_until_its_time_by_the_brokers_clock():
    broker = Broker()
    client = broker.client()
    client.connect()
    client.subscribe("q", **{"subscription-type": "ANYCAST"})
    broker.run(5)  # the clock at 5 s
    headers = [("destination", "q"), ("destination-type", "ANYCAST")]
    client.send_frame("SEND", [*headers, ("AMQ_SCHEDULED_DELAY", "1000"), ("k", "delay")], b"d")
    client.send_frame("SEND", [*headers, ("AMQ_SCHEDULED_TIME", "5500"), ("k", "time")], b"t")
    client.send_frame("SEND", [*headers, ("k", "plain")], b"p")
    assert [m.get("k") for m in client.messages()] == ["plain"]
    broker.run(0.499)
    assert client.messages() == []
    broker.run(0.001)
    (timed,) = client.messages()
    assert (timed.get("k"), timed.get("_AMQ_SCHED_DELIVERY"), timed.get("AMQ_SCHEDULED_TIME")) == ("time", "5500", None)
    broker.run(0.499)
    assert client.messages() == []
    broker.run(0.001)
    assert [(m.get("k"), m.get("_AMQ_SCHED_DELIVERY")) for m in client.messages()] == [("delay", "6000")]


def test_a_stomp_scheduling_header_that_is_not_a_long_is_an_error_frame_and_a_close():
    client = Broker().client()
    client.connect()
    client.send_frame("SEND", [("destination", "q"), ("AMQ_SCHEDULED_DELAY", "soon"), ("receipt", "r1")], b"x")
    error = client.one("ERROR")
    assert error.get("receipt-id") == "r1" and "AMQ_SCHEDULED_DELAY" in error.get("message")
    assert client.closed
