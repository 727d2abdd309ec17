"""jms_headers: JMS header properties and bodies as Artemis gives them to STOMP and AMQP consumers."""

from __future__ import annotations

import pytest

from junction.brokercore import jms_bodies, jms_headers
from junction.model.message import BodyType, Message, Typed
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.message import Properties
from junction.protocols.amqp.types import Scalar, Symbol


def _simple_string(raw: bytes) -> bytes:
    """A nullable SimpleString of ``raw`` bytes (CORE's layout: not-null, length, bytes)."""
    return b"\x01" + len(raw).to_bytes(4, "big") + raw


@pytest.mark.parametrize(
    ("core_body", "text"),
    [
        (_simple_string("hé ✓".encode("utf-16-le")), "hé ✓".encode()),  # a TextMessage's text
        (b"\x00", b""),  # a null text
        (b"", b""),  # no body
        (jms_bodies.object_body(b"\xac\xed\x00\x05t\x00\x01a"), b""),  # length's first byte 0: null
        # a map of one entry: the count (1) is the byte length: no whole character
        (jms_bodies.map_body({"s": "x"}), b""),
        # a map of five: two characters from the first key's int32 length (0, 2)
        (jms_bodies.map_body({k: 1 for k in "abcde"}), "\x00\u0200".encode()),
        # a stream's first entry type and value read as a length: past the end
        (jms_bodies.stream_body(["text"]), b""),
        (_simple_string(b"a\x00b"), b"a"),  # an odd last byte is no character
        (_simple_string(b"\x00\xd8"), b"?"),  # a lone surrogate: '?' as Java writes it
        (b"\x01\xff\xff\xff\xff", b""),  # a negative length
    ],
)
def test_stomp_text_reads_the_core_body_as_one_nullable_string(core_body, text):
    assert jms_headers.stomp_text(core_body) == text


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("k", True), ("JMSXGroupID", True), ("JMS_AMQP_HEADER", True), ("JMSCorrelationID", False),
        ("JMSReplyTo", False), ("JMSType", False), ("__AMQ_CID", False), ("_AMQ_ROUTING_TYPE", False),
        ("_AMQ_DUPL_ID", True),
    ],
)  # fmt: skip
def test_amqp_application_properties_leave_out_what_a_jms_client_reserves(name, kept):
    assert jms_headers.amqp_application_property(name) is kept


@pytest.mark.parametrize(
    ("destination", "address", "kind"),
    [("queue://q", "q", 0), ("topic://t", "t", 1), ("temp-queue://x", "x", 2), ("temp-topic://y", "y", 3), ("bare", "bare", 0)],
)
def test_amqp_reply_to_strips_the_prefix_into_the_annotation(destination, address, kind):
    assert jms_headers.amqp_reply_to(destination) == (address, kind)


def _jms_message(**properties) -> Message:
    return Message("a", b"body", BodyType.MAP, properties=properties)


def test_for_stomp_maps_the_jms_header_properties_to_headers():
    m = _jms_message(JMSCorrelationID="c", JMSReplyTo="queue://r", _AMQ_ROUTING_TYPE=Typed("byte", 1), k=Typed("int", 3))
    m.message_id = 9
    out = jms_headers.for_stomp(m, jms_bodies.map_body({k: 1 for k in "abcde"}))
    assert out.correlation_id == "c" and out.reply_to == "queue://r"
    assert out.properties == {"k": Typed("int", 3), "destination-type": "ANYCAST"}
    assert out.body == "\x00\u0200".encode() and out.message_id == 9
    assert m.properties["JMSCorrelationID"] == "c" and m.body == b"body"  # the stored message is not changed


def test_for_stomp_keeps_a_message_with_nothing_to_convert():
    m = _jms_message(k="v")
    assert jms_headers.for_stomp(m, None) is m


def test_for_stomp_gives_the_bytes_of_a_message_with_a_content_length_property():
    m = _jms_message(**{"content-length": "4"})
    assert jms_headers.for_stomp(m, b"body").body == b"body"


def test_for_stomp_multicast_and_a_bytes_correlation_id():
    m = _jms_message(JMSCorrelationID=b"\x01", _AMQ_ROUTING_TYPE=Typed("byte", 0))
    out = jms_headers.for_stomp(m, None)
    assert out.correlation_id is None and out.properties == {"destination-type": "MULTICAST"}


def _amqp_sections(annotations: dict | None) -> bytes:
    out = b""
    if annotations is not None:
        out += sections_codec.encode_annotations(0x72, annotations)
    return out + sections_codec.encode_properties(Properties(reply_to="r")) + sections_codec.encode_body_value("x")


@pytest.mark.parametrize(
    ("sections", "reply_to"),
    [
        (None, "r"),  # STOMP's: as the frame had it
        (_amqp_sections(None), "queue://r"),
        (_amqp_sections({Symbol("x-opt-jms-reply-to"): Scalar("byte", 1)}), "topic://r"),
        (_amqp_sections({Symbol("x-opt-jms-reply-to"): Scalar("byte", 3)}), "temp-topic://r"),
        (_amqp_sections({Symbol("x-opt-jms-reply-to"): Scalar("byte", 9)}), "queue://r"),
        (b"\xff not sections", "queue://r"),
    ],
)
def test_foreign_properties_give_a_jms_client_the_correlation_id_and_reply_to(sections, reply_to):
    m = Message("a", b"x", BodyType.TEXT, properties={"k": "v"}, correlation_id="c", reply_to="r")
    assert jms_headers.foreign_properties(m, sections) == {"k": "v", "JMSCorrelationID": "c", "JMSReplyTo": reply_to}
    assert m.properties == {"k": "v"}


def test_foreign_properties_of_a_message_without_those_fields_are_its_own():
    m = Message("a", b"x", BodyType.TEXT, properties={"k": "v"})
    assert jms_headers.foreign_properties(m, None) is m.properties
