"""AMQP ids as Artemis writes them for JMS and STOMP, and back (junction.brokercore.amqp_ids)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from junction.brokercore.amqp_convert import to_amqp, to_core
from junction.brokercore.amqp_ids import (
    NATIVE_MESSAGE_ID,
    correlation_id_text,
    id_object,
    message_id_text,
)
from junction.model.message import Message
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.message import Properties

U = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")

#: AMQP value, message-id text, correlation-id text (AMQPMessageIdHelper's forms)
CASES = [
    ("ID:abc", "ID:abc", "ID:abc"),
    ("abc", "ID:AMQP_NO_PREFIX:abc", "abc"),
    ("", "ID:AMQP_NO_PREFIX:", ""),
    ("ID:AMQP_UUID:x", "ID:AMQP_STRING:ID:AMQP_UUID:x", "ID:AMQP_STRING:ID:AMQP_UUID:x"),
    ("ID:AMQP_NO_PREFIX:y", "ID:AMQP_STRING:ID:AMQP_NO_PREFIX:y", "ID:AMQP_STRING:ID:AMQP_NO_PREFIX:y"),
    ("ID:AMQP_OTHER:z", "ID:AMQP_OTHER:z", "ID:AMQP_OTHER:z"),
    ("AMQP_ULONG:1", "ID:AMQP_NO_PREFIX:AMQP_ULONG:1", "AMQP_ULONG:1"),
    (0, "ID:AMQP_ULONG:0", "ID:AMQP_ULONG:0"),
    (2**64 - 1, f"ID:AMQP_ULONG:{2**64 - 1}", f"ID:AMQP_ULONG:{2**64 - 1}"),
    (U, f"ID:AMQP_UUID:{U}", f"ID:AMQP_UUID:{U}"),
    (b"\x00\xab", "ID:AMQP_BINARY:00AB", "ID:AMQP_BINARY:00AB"),
    (b"", "ID:AMQP_BINARY:", "ID:AMQP_BINARY:"),
]


@pytest.mark.parametrize("value, message_id, correlation_id", CASES)
def test_the_text_forms_are_artemis(value, message_id, correlation_id):
    assert message_id_text(value) == message_id
    assert correlation_id_text(value) == correlation_id
    assert id_object(message_id) == value
    assert id_object(correlation_id) == value


@pytest.mark.parametrize(
    "text",
    ["ID:AMQP_ULONG:x", "ID:AMQP_ULONG:-1", f"ID:AMQP_ULONG:{2**64}", "ID:AMQP_UUID:nope", "ID:AMQP_BINARY:ABC",
     "ID:AMQP_BINARY:zz", "ID:AMQP_BINARY:AB CD"],
)
def test_a_typed_text_that_does_not_parse_stays_text(text):
    assert id_object(text) == text


IDS = st.one_of(st.text(), st.integers(0, 2**64 - 1), st.uuids(), st.binary(max_size=16))


@given(IDS)
def test_every_id_reads_back(value):
    assert id_object(message_id_text(value)) == value
    assert id_object(correlation_id_text(value)) == value


#: the broker's clock, as the adapter passes it to the conversion
NOW_MS = 1_700_000_000_000


def _amqp(message_id=None, correlation_id=None) -> bytes:
    return sections_codec.encode_properties(
        Properties(message_id=message_id, correlation_id=correlation_id)
    ) + sections_codec.encode_body_value("x")


def test_to_core_keeps_the_message_id_as_native_message_id():
    message = to_core(_amqp(message_id=7, correlation_id=U), "q", now_ms=NOW_MS)
    assert message.properties[NATIVE_MESSAGE_ID] == "ID:AMQP_ULONG:7"
    assert message.correlation_id == f"ID:AMQP_UUID:{U}"
    assert NATIVE_MESSAGE_ID not in to_core(_amqp(), "q", now_ms=NOW_MS).properties


def test_from_core_the_ids_are_typed_again_and_native_message_id_is_no_property():
    core = Message(
        "q",
        b"x",
        properties={NATIVE_MESSAGE_ID: "ID:AMQP_BINARY:0102", "k": "v"},
        correlation_id="ID:AMQP_ULONG:5",
        message_id=3,
    )
    props = sections_codec.decode_message(to_amqp(core, now_ms=NOW_MS)).properties
    assert props.message_id == b"\x01\x02"
    assert props.correlation_id == 5
    sections = sections_codec.decode_message(to_amqp(core, now_ms=NOW_MS))
    assert dict(sections.application_properties) == {"k": "v"}
    # without one, the message-id is the broker's own id
    plain_core = Message("q", b"x", correlation_id="corr", message_id=3)
    props = sections_codec.decode_message(to_amqp(plain_core, now_ms=NOW_MS)).properties
    assert props.message_id == "ID:3" and props.correlation_id == "corr"
