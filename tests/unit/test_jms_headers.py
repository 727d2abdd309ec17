"""jms_headers: JMS header properties and bodies as Artemis gives them to STOMP and AMQP consumers."""

from __future__ import annotations

import pytest

from junction.brokercore import amqp_convert, core_convert, jms_bodies, jms_headers
from junction.model.message import BodyType, Message, Typed
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.message import Properties
from junction.protocols.amqp.types import Scalar, Symbol
from junction.protocols.core import MessageHeaders, MessageType


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


def test_core_text_raises_where_the_read_runs_past_the_body():
    with pytest.raises(ValueError):
        jms_headers.core_text(b"\x01\x00\x00\x00\x09ab")
    with pytest.raises(ValueError):
        jms_headers.core_text(b"\x01\x00")
    assert jms_headers.core_text(b"") is None and jms_headers.core_text(b"\x00") is None


@pytest.mark.parametrize(
    ("content_type", "body", "kind", "core_body"),
    [
        (None, None, MessageType.BYTES, b""),  # no body section: a BytesMessage, as Artemis
        ("application/octet-stream", None, MessageType.BYTES, b""),
        ("application/x-java-serialized-object", None, MessageType.OBJECT, b""),
        ("text/plain", None, MessageType.TEXT, b"\x00"),  # a null text
        ("application/x-other", None, MessageType.DEFAULT, b""),
        (None, ("amqp-value", None), MessageType.TEXT, b"\x00"),  # amqp-value null: a null text
    ],
)
def test_an_amqp_message_without_a_body_to_a_jms_client(content_type, body, kind, core_body):
    data = sections_codec.encode_properties(Properties(content_type=None if content_type is None else Symbol(content_type)))
    if body is not None:
        data += sections_codec.encode_body_value(None)
    message = amqp_convert.to_core(data, "q", now_ms=1)
    got_body, headers = core_convert.to_core(message)
    assert (headers.type, got_body) == (kind, core_body)


def test_a_jms_message_without_a_body_to_an_amqp_consumer_has_no_body_section():
    message = core_convert.from_core(b"", MessageHeaders(0, "q", None, MessageType.DEFAULT, False, 0, 0, 4, None), "q")
    sections = sections_codec.decode_message(amqp_convert.to_amqp(message, now_ms=1))
    assert not sections.body
    assert sections.message_annotations[Symbol("x-opt-jms-msg-type")] == Scalar("byte", 0)


@pytest.mark.parametrize(
    ("content_type", "charset"),
    [
        ("text/plain", "UTF-8"), ("TEXT/html; charset=iso-8859-1", "ISO-8859-1"),
        ('text/plain; format=flowed; charset="utf-8"', "UTF-8"), ("application/json", "UTF-8"),
        ("application/vnd.x+json", "UTF-8"), ("application/atom+xml", "UTF-8"), ("application/xml-dtd", "UTF-8"),
        ("application/octet-stream", None), ("application/x-java-serialized-object", None), ("text", None),
        ("text/", None), ("", None), (None, None), ("image/png", None),
    ],
)  # fmt: skip
def test_textual_charset_as_artemis_reads_a_content_type(content_type, charset):
    assert jms_headers.textual_charset(content_type) == charset


@pytest.mark.parametrize(
    ("content_type", "body", "kind"),
    [("text/plain", "é".encode(), MessageType.TEXT), ("text/plain", b"\xff", MessageType.BYTES),
     ("text/plain; charset=iso-8859-1", b"a", MessageType.BYTES), ("application/json", b"{}", MessageType.TEXT),
     (None, b"a", MessageType.BYTES)],
)  # fmt: skip
def test_an_amqp_data_section_of_utf8_text_is_a_text_message(content_type, body, kind):
    data = sections_codec.encode_properties(Properties(content_type=None if content_type is None else Symbol(content_type)))
    message = amqp_convert.to_core(data + sections_codec.encode_body_data(body), "q", now_ms=1)
    core_body, headers = core_convert.to_core(message)
    assert headers.type == kind
    if kind == MessageType.TEXT:
        assert jms_headers.core_text(core_body) == body.decode()


def test_a_stomp_frame_with_a_text_content_type_and_content_length_stays_bytes():
    message = Message("q", b"a", BodyType.BYTES, properties={"content-type": "text/plain"})
    assert core_convert.to_core(message)[1].type == MessageType.BYTES
