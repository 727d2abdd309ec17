"""OpenWire messages <-> the node's model <-> CORE and AMQP: what each protocol's consumer reads."""

from __future__ import annotations

import uuid
import zlib

from junction.brokercore import jms_bodies
from junction.brokercore.amqp_convert import to_amqp
from junction.brokercore.amqp_convert import to_core as amqp_to_model
from junction.brokercore.core_convert import from_core, to_core
from junction.brokercore.openwire_consumers import subscription_queue_name
from junction.brokercore.openwire_convert import to_model, to_openwire
from junction.model.message import BodyType, Message, RoutingType, Typed
from junction.protocols.amqp.message import (
    Properties,
    decode_message,
    encode_body_data,
    encode_body_value,
    encode_properties,
)
from junction.protocols.amqp.types import Symbol
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
    ActiveMQTempQueue,
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


def test_an_openwire_message_is_a_core_message_of_its_jms_type_with_a_uuid_id():
    """As Artemis converts it: CORE's type, a fresh UUID as its JMS id, the correlation id and
    reply-to (typed by its prefix) as a JMS client's properties."""
    sent = ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID, correlation_id="c",
                               reply_to=ActiveMQTopic("r"), content=text_content("t"))
    model = to_model(sent)
    body, headers = to_core(model)
    assert headers.type == MessageType.TEXT and len(headers.user_id) == 16
    props = dict(headers.properties)
    assert (props["JMSCorrelationID"], props["JMSReplyTo"]) == ("c", "topic://r")
    amqp = decode_message(to_amqp(model, now_ms=0))
    assert amqp.properties.message_id == f"ID:{uuid.UUID(bytes=headers.user_id)}"
    assert amqp.properties.reply_to == "r" and amqp.message_annotations[Symbol("x-opt-jms-reply-to")].value == 1
    assert to_model(ActiveMQMessage(destination=ActiveMQQueue("q"))).native["core"][1] == MessageType.DEFAULT
    assert to_core(to_model(ActiveMQMessage(destination=ActiveMQQueue("q"))))[1].type == MessageType.DEFAULT
    # back to OpenWire: the fields, not the properties
    back = to_openwire(model, node_id="n")
    assert (back.correlation_id, back.reply_to) == ("c", ActiveMQTopic("r"))
    assert not {"JMSCorrelationID", "JMSReplyTo"} & set(message_properties(back))


def test_a_null_text_stays_null():
    model = to_model(ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID))
    assert to_openwire(model, node_id="n").content is None
    assert to_core(model)[0] == b"\x00"  # CORE's null string


def test_a_core_message_gives_its_jms_headers_as_fields_and_hides_the_brokers_properties():
    headers = MessageHeaders(address="q", type=MessageType.DEFAULT, properties=(
        ("JMSCorrelationID", "c"), ("JMSReplyTo", "temp-queue://tq"), ("_AMQ_ROUTING_TYPE", Scalar("byte", 1)),
        ("JMSXGroupID", "g"), ("JMSType", "t"), ("__AMQ_CID", "conn"), ("x", Scalar("int", 1))))
    model = from_core(b"", headers, "q")
    model.user_id = "admin"  # the validated user the broker stamps: not an OpenWire user id
    out = to_openwire(model, node_id="n")
    assert type(out) is ActiveMQMessage and out.content is None
    assert (out.correlation_id, out.reply_to, out.group_id, out.type, out.user_id) == (
        "c", ActiveMQTempQueue("tq"), "g", "t", None)
    assert message_properties(out) == {"__AMQ_CID": "conn", "x": 1}


def test_amqp_bodies_reach_an_openwire_consumer_as_the_core_client_reads_them():
    def amqp(body_section: bytes, **props) -> Message:
        data = encode_properties(Properties(reply_to="r", **props)) + body_section
        return amqp_to_model(data, "q", now_ms=1)

    mapped = to_openwire(amqp(encode_body_value({"a": 1})), node_id="n")
    assert isinstance(mapped, ActiveMQMapMessage) and decode_primitive_map(mapped.content) == {"a": 1}
    listed = to_openwire(amqp(encode_body_value(["x", 2])), node_id="n")
    assert isinstance(listed, ActiveMQStreamMessage) and decode_primitive_stream(listed.content, 10) == ["x", 2]
    obj = to_openwire(amqp(encode_body_data(b"\xac\xed\x00\x05t"),
                           content_type=Symbol(jms_bodies.SERIALIZED_CONTENT_TYPE)), node_id="n")
    assert isinstance(obj, ActiveMQObjectMessage) and obj.content == b"\xac\xed\x00\x05t"
    text = to_openwire(amqp(encode_body_value("hé")), node_id="n")
    assert isinstance(text, ActiveMQTextMessage) and text_of(text) == "hé" and text.reply_to == ActiveMQQueue("r")
    none = to_openwire(amqp(b""), node_id="n")
    assert isinstance(none, ActiveMQBytesMessage) and not none.content


def test_a_user_id_goes_back_only_when_the_producer_set_one():
    stamped = to_model(ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID))
    stamped.user_id = "admin"  # the validated user the broker stamps
    assert to_openwire(stamped, node_id="n").user_id is None
    own = to_model(ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID, user_id="me"))
    assert to_openwire(own, node_id="n").user_id == "me"


def test_the_kept_message_id_memo_is_bounded_and_gives_what_the_stored_bytes_decode_to():
    from junction.brokercore import openwire_convert

    sent = ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID, producer_id=PRODUCER,
                               content=text_content("x"))
    model = to_model(sent)
    model.message_id = 7
    # a message stored before (the memo does not know it: journal recovery, another process)
    openwire_convert._KEPT_IDS.clear()
    cold = to_openwire(model, node_id="n")
    model = to_model(sent)
    model.message_id = 7
    assert model.native[openwire_convert.NATIVE_ID] in openwire_convert._KEPT_IDS
    assert to_openwire(model, node_id="n") == cold
    assert cold.message_id.producer_id == PRODUCER and cold.message_id.broker_sequence_id == 7
    for n in range(openwire_convert.KEPT_IDS_LIMIT + 10):
        to_model(ActiveMQTextMessage(destination=ActiveMQQueue("q"), producer_id=PRODUCER,
                                     message_id=MessageId(None, PRODUCER, 1000 + n, 0)))
    assert len(openwire_convert._KEPT_IDS) == openwire_convert.KEPT_IDS_LIMIT
    assert model.native[openwire_convert.NATIVE_ID] not in openwire_convert._KEPT_IDS
    assert to_openwire(model, node_id="n") == cold


def test_a_group_sequence_property_that_is_not_an_int_gives_sequence_zero():
    """A STOMP header or an OpenWire producer's property JMSXGroupSeq may hold anything; the
    OpenWire consumer's message still converts (groupSequence is an int: 0 then)."""
    for value in ("abc", "", Long(2**40), "12"):
        stomp = Message("q", b"x", BodyType.BYTES, routing_type=RoutingType.ANYCAST,
                        properties={"JMSXGroupID": "g", "JMSXGroupSeq": value}, message_id=3)
        out = to_openwire(stomp, node_id="n")
        assert (out.group_id, out.group_sequence) == ("g", 12 if value == "12" else 0)
        sent = ActiveMQTextMessage(destination=ActiveMQQueue("q"), message_id=MID, producer_id=PRODUCER,
                                   content=text_content("x"),
                                   marshalled_properties=properties_content({"JMSXGroupSeq": value}))
        model = to_model(sent)
        model.message_id = 4
        assert to_openwire(model, node_id="n").group_sequence == (12 if value == "12" else 0)
