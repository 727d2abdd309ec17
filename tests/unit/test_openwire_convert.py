"""OpenWire messages <-> the node's model <-> CORE and AMQP: what each protocol's consumer reads."""

from __future__ import annotations

import zlib

from junction.brokercore import jms_bodies
from junction.brokercore.amqp_convert import to_amqp
from junction.brokercore.core_convert import from_core, to_core
from junction.brokercore.openwire_consumers import subscription_queue_name
from junction.brokercore.openwire_convert import to_model, to_openwire
from junction.model.message import BodyType, Message, RoutingType, Typed
from junction.protocols.core.message import MessageHeaders, MessageType
from junction.protocols.core.values import Scalar
from junction.protocols.openwire.messages import (
    ActiveMQBytesMessage,
    ActiveMQMapMessage,
    ActiveMQMessage,
    ActiveMQObjectMessage,
    ActiveMQStreamMessage,
    ActiveMQTextMessage,
    message_properties,
    properties_content,
    text_content,
    text_of,
)
from junction.protocols.openwire.primitives import (
    Int,
    Long,
    Short,
    decode_primitive_map,
    decode_primitive_stream,
    encode_primitive_map,
    encode_primitive_stream,
)
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ActiveMQTopic,
    MessageId,
    ProducerId,
)

PRODUCER = ProducerId("ID:host-1:1", 1, 1)
MID = MessageId("ID:host-1:1:1:1:5", PRODUCER, 5, 0)


def test_text_properties_group_and_headers_into_the_model_and_back():
    sent = ActiveMQTextMessage(
        destination=ActiveMQQueue("q"), message_id=MID, producer_id=PRODUCER, group_id="g", group_sequence=2,
        persistent=True, priority=7, correlation_id="c", type="t", content=text_content("héllo \U0001f600"),
        marshalled_properties=properties_content({"i": Int(1), "l": Long(2), "h": Short(3), "s": "x"}),
    )
    model = to_model(sent)
    assert (model.address, model.routing_type, model.body, model.body_type) == (
        "q", RoutingType.ANYCAST, "héllo \U0001f600".encode(), BodyType.TEXT)
    assert model.durable and model.priority == 7 and model.correlation_id == "c"
    assert model.properties["_AMQ_GROUP_ID"] == "g" and model.properties["_AMQ_GROUP_SEQUENCE"] == Typed("int", 2)
    assert model.properties["i"] == Typed("int", 1) and model.properties["l"] == 2 and type(model.properties["l"]) is int
    assert model.properties["h"] == Typed("short", 3) and model.properties["JMSType"] == "t"
    model.message_id = 99
    back = to_openwire(model, node_id="n")
    assert isinstance(back, ActiveMQTextMessage) and text_of(back) == "héllo \U0001f600"
    assert back.message_id.producer_id == PRODUCER and back.message_id.producer_sequence_id == 5
    assert back.message_id.broker_sequence_id == 99
    assert (back.group_id, back.group_sequence, back.type) == ("g", 2, "t")
    props = message_properties(back)
    assert type(props["i"]) is Int and type(props["l"]) is Long and type(props["h"]) is Short
    assert "_AMQ_GROUP_ID" not in props and "JMSType" not in props


def test_a_topic_is_multicast_and_a_compressed_body_is_inflated():
    raw = text_content("z" * 5000)
    model = to_model(ActiveMQTextMessage(destination=ActiveMQTopic("t"), content=zlib.compress(raw), compressed=True))
    assert model.routing_type is RoutingType.MULTICAST and model.body == b"z" * 5000
    data = to_model(ActiveMQBytesMessage(destination=ActiveMQQueue("q"), content=zlib.compress(b"abc"), compressed=True))
    assert data.body == b"abc" and data.body_type is BodyType.BYTES
    assert to_model(ActiveMQMessage(destination=ActiveMQQueue("q"))).body_type is BodyType.NONE


def test_a_map_body_is_stored_in_core_layout_so_core_and_amqp_read_it():
    sent = ActiveMQMapMessage(destination=ActiveMQQueue("q"),
                              content=encode_primitive_map({"i": Int(7), "l": Long(1 << 40), "s": "v"}))
    model = to_model(sent)
    body, headers = to_core(model)
    assert headers.type == MessageType.MAP
    assert jms_bodies.core_map(body) == {"i": Scalar("int", 7), "l": 1 << 40, "s": "v"}
    assert to_amqp(model, now_ms=0) is not None
    back = to_openwire(model, node_id="n")
    entries = decode_primitive_map(back.content)
    assert isinstance(back, ActiveMQMapMessage) and entries == {"i": 7, "l": 1 << 40, "s": "v"}
    assert type(entries["i"]) is Int and type(entries["l"]) is Long


def test_stream_and_object_bodies_both_ways():
    stream = to_model(ActiveMQStreamMessage(destination=ActiveMQQueue("q"),
                                            content=encode_primitive_stream([Int(1), "two", False])))
    assert to_core(stream)[1].type == MessageType.STREAM
    assert decode_primitive_stream(to_openwire(stream, node_id="n").content, 10) == [1, "two", False]
    obj = to_model(ActiveMQObjectMessage(destination=ActiveMQQueue("q"), content=b"\xac\xed\x00\x05t"))
    assert to_core(obj)[1].type == MessageType.OBJECT
    back = to_openwire(obj, node_id="n")
    assert isinstance(back, ActiveMQObjectMessage) and back.content == b"\xac\xed\x00\x05t"


def test_a_core_message_gets_artemis_message_id_and_its_type():
    headers = MessageHeaders(address="q", type=MessageType.MAP, durable=True)
    model = from_core(jms_bodies.map_body({"k": "v"}), headers, "q")
    model.message_id = 2 * 0x7FFFFFFF + 5
    out = to_openwire(model, node_id="node")
    assert isinstance(out, ActiveMQMapMessage) and decode_primitive_map(out.content) == {"k": "v"}
    assert out.message_id.text_view == "ID:node:-1:-1:2:5"
    assert (out.message_id.producer_id.value, out.message_id.producer_sequence_id) == (2, 5)
    plain = to_openwire(Message("q", b"raw", message_id=1), node_id="node")
    assert isinstance(plain, ActiveMQBytesMessage) and plain.content == b"raw"


def test_durable_subscription_queue_names_escape_as_artemis_does():
    assert subscription_queue_name("cid", "sub") == "cid.sub"
    assert subscription_queue_name("a.b", "c\\d") == "a\\.b.c\\\\d"
