"""What a STOMP or AMQP consumer is given for a large CORE message (large_bodies.outgoing)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from junction.brokercore import large_bodies
from junction.brokercore.core_convert import to_core
from junction.brokercore.core_large import make_message
from junction.brokercore.large_bodies import LargeBody, outgoing
from junction.brokercore.large_messages import NATIVE_KEY, LargeMessageStore, reference
from junction.model.message import BodyType
from junction.protocols.core import MessageHeaders, MessageType


def _large(tmp_path, body: bytes, kind: int):
    """A broker message as a large CORE send of ``body`` makes it, and a server holding its file."""
    store = LargeMessageStore(str(tmp_path / "large"))
    writer = store.begin()
    writer.append(body)
    writer.finish(sync=False)
    message = make_message(
        b"", MessageHeaders(address="q", type=kind), "q",
        {NATIVE_KEY: reference(writer.file_id, len(body)), "_AMQ_LARGE_SIZE": len(body)},
    )
    message.message_id = 7
    return message, SimpleNamespace(large_messages=store)


def _text_file(text: str) -> bytes:
    data = text.encode("utf-16-le", "surrogatepass")
    return b"\x01" + len(data).to_bytes(4, "big") + data


def _streamed(body: LargeBody, chunk: int) -> bytes:
    return b"".join(body.chunks(chunk))


def test_bytes_are_the_files_bytes_in_bounded_chunks(tmp_path):
    data = bytes(range(256)) * 1000
    message, server = _large(tmp_path, data, MessageType.BYTES)
    body = outgoing(message, server, decode_jms=False)
    assert isinstance(body, LargeBody) and not body.text
    assert body.size == len(data) and body.message.body == b"" and body.message.body_type == BodyType.BYTES
    assert body.message.message_id == 7 and body.message.properties["_AMQ_LARGE_SIZE"] == len(data)
    assert NATIVE_KEY not in body.message.native
    assert max(len(c) for c in body.chunks(1000)) == 1000
    assert _streamed(body, 1000) == data


@pytest.mark.parametrize("chunk", [1, 3, 4, 7, 4096])
def test_text_is_utf8_converted_chunk_by_chunk_even_across_surrogate_pairs(tmp_path, chunk):
    text = "a\u00e9\u2713\U0001f600" * 50 + "\ud800 lone"  # a lone surrogate passes as CORE lets it
    message, server = _large(tmp_path, _text_file(text), MessageType.TEXT)
    body = outgoing(message, server, decode_jms=True)
    assert isinstance(body, LargeBody) and body.text and body.message.body_type == BodyType.TEXT
    expected = text.encode("utf-8", "surrogatepass")
    assert body.size == len(expected)
    assert _streamed(body, chunk) == expected


def test_a_text_body_that_is_not_one_string_goes_as_its_bytes(tmp_path):
    data = b"\x01\x00\x00\x00\x09abc"  # says 9 bytes of text, has 3
    message, server = _large(tmp_path, data, MessageType.TEXT)
    body = outgoing(message, server, decode_jms=False)
    assert (body.text, body.size, _streamed(body, 2)) == (False, len(data), data)


def test_a_map_for_stomp_is_its_core_bytes_and_for_amqp_decoded_up_to_the_bound(tmp_path, monkeypatch):
    from junction.brokercore.jms_bodies import core_map
    from junction.protocols.core.encoding import Writer
    from junction.protocols.core.values import write_properties

    w = Writer()
    write_properties(w, (("k", "v" * 100),))
    data = bytes(w.buf)
    assert core_map(data) == {"k": "v" * 100}
    message, server = _large(tmp_path, data, MessageType.MAP)
    stomp = outgoing(message, server, decode_jms=False)
    assert isinstance(stomp, LargeBody) and _streamed(stomp, 64) == data
    whole = outgoing(message, server, decode_jms=True)  # under the bound: a regular message, converted
    assert not isinstance(whole, LargeBody)
    assert whole.body == data and whole.body_type == BodyType.MAP
    # above the bound: bytes, CORE's layout, never decoded whole
    monkeypatch.setattr(large_bodies, "MAX_CONVERTED_LARGE", len(data) - 1)
    over = outgoing(message, server, decode_jms=True)
    assert isinstance(over, LargeBody) and _streamed(over, 64) == data
    assert to_core(over.message)[1].type == MessageType.BYTES


def test_a_regular_message_is_given_as_it_is(tmp_path):
    _, server = _large(tmp_path, b"x", MessageType.BYTES)
    message = make_message(b"small", MessageHeaders(address="q", type=MessageType.BYTES), "q", None)
    assert outgoing(message, server, decode_jms=True) is message


def test_in_memory_reads_a_large_message_whole_up_to_the_bound(tmp_path, monkeypatch):
    """For OpenWire, which takes a body in one piece: the message as if it had been sent small."""
    from junction.brokercore.openwire_convert import to_openwire
    from junction.protocols.openwire.messages import ActiveMQTextMessage, text_of

    text = "a\u00e9\u2713" * 1000
    message, server = _large(tmp_path, _text_file(text), MessageType.TEXT)
    whole = large_bodies.in_memory(message, server)
    assert (whole.body, whole.body_type, whole.message_id) == (text.encode(), BodyType.TEXT, 7)
    out = to_openwire(whole, node_id="n")
    assert isinstance(out, ActiveMQTextMessage) and text_of(out) == text
    small = make_message(b"small", MessageHeaders(address="q", type=MessageType.BYTES), "q", None)
    assert large_bodies.in_memory(small, server) is small
    monkeypatch.setattr(large_bodies, "MAX_CONVERTED_LARGE", 10)  # over the bound: no body, logged
    assert large_bodies.in_memory(message, server) is message
