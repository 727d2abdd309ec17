"""A large CORE message's body across a cluster link (junction.brokercore.cluster.large_forward).

The process-level behaviour (the real JMS client, two nodes) is in
tests/integration/test_cluster_core_large.py; here the branches it does not reach: an older
peer gets a regular message, a body over the room left in a frame is refused, a node with no
large-messages directory keeps the message regular.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from junction.brokercore.cluster.large_forward import (
    INLINE_KEY,
    TooLarge,
    inline_body,
    store_incoming,
)
from junction.brokercore.core_large import make_message
from junction.brokercore.large_messages import (
    NATIVE_KEY,
    LargeMessageStore,
    parse_reference,
    reference,
)
from junction.model.message import BodyType, decode_message, encode_message
from junction.protocols.core import MessageHeaders, MessageType

TEXT = "héllo ✓ " * 1000
#: CORE's TextMessage body: a nullable SimpleString in UTF-16LE
TEXT_BODY = b"\x01" + (2 * len(TEXT)).to_bytes(4, "big") + TEXT.encode("utf-16-le")


def _node(tmp_path, name: str):
    return SimpleNamespace(large_messages=LargeMessageStore(str(tmp_path / name)))


def _large(node, body: bytes, kind=MessageType.TEXT, durable=True):
    writer = node.large_messages.begin()
    writer.append(body)
    size = writer.finish(sync=False)
    headers = MessageHeaders(address="q", type=kind, durable=durable)
    return make_message(b"", headers, "q", {NATIVE_KEY: reference(writer.file_id, size), "_AMQ_LARGE_SIZE": size})


def _cross(message):
    """The message as the peer decodes it from the frame."""
    return decode_message(encode_message(message))


def test_a_current_peer_stores_the_body_as_a_file_of_its_own(tmp_path):
    a, b = _node(tmp_path, "a"), _node(tmp_path, "b")
    message = _large(a, TEXT_BODY)
    out = message.copy()
    inline_body(a, message, out, room=1 << 20, peer_version=(1, 3))
    assert NATIVE_KEY not in out.native and out.body == TEXT_BODY
    assert NATIVE_KEY in message.native  # the node's own message keeps its file
    received = _cross(out)
    b.large_messages.new_id()  # the peer's ids are its own
    file_id = store_incoming(b, received)
    assert INLINE_KEY not in received.native and received.body == b""
    own_id, size = parse_reference(received.native[NATIVE_KEY])
    assert (own_id, size) == (file_id, len(TEXT_BODY)) and own_id != parse_reference(message.native[NATIVE_KEY])[0]
    with open(b.large_messages.path(own_id), "rb") as f:
        assert f.read() == TEXT_BODY
    assert received.properties["_AMQ_LARGE_SIZE"] == len(TEXT_BODY)


@pytest.mark.parametrize("kind", [MessageType.TEXT, MessageType.BYTES])
def test_an_older_peer_gets_the_message_as_from_a_small_send(tmp_path, kind):
    a = _node(tmp_path, "a")
    body = TEXT_BODY if kind == MessageType.TEXT else bytes(range(256)) * 10
    message = _large(a, body, kind)
    out = message.copy()
    inline_body(a, message, out, room=1 << 20, peer_version=(1, 2))
    received = _cross(out)
    assert NATIVE_KEY not in received.native and INLINE_KEY not in received.native
    assert "_AMQ_LARGE_SIZE" not in received.properties
    if kind == MessageType.TEXT:
        assert (received.body_type, received.body) == (BodyType.TEXT, TEXT.encode("utf-8"))
    else:
        assert (received.body_type, received.body) == (BodyType.BYTES, body)
    assert store_incoming(_node(tmp_path, "b"), received) is None


def test_a_body_over_the_room_in_a_frame_is_refused(tmp_path):
    a = _node(tmp_path, "a")
    message = _large(a, TEXT_BODY)
    out = message.copy()
    with pytest.raises(TooLarge) as raised:
        inline_body(a, message, out, room=len(TEXT_BODY) - 1, peer_version=(1, 3))
    assert raised.value.size == len(TEXT_BODY)
    assert out.native[NATIVE_KEY] == message.native[NATIVE_KEY] and out.body == b""


def test_a_node_without_a_large_messages_directory_keeps_it_regular(tmp_path):
    a = _node(tmp_path, "a")
    message = _large(a, TEXT_BODY)
    out = message.copy()
    inline_body(a, message, out, room=1 << 20, peer_version=(1, 3))
    received = _cross(out)
    assert store_incoming(SimpleNamespace(large_messages=None), received) is None
    assert NATIVE_KEY not in received.native and INLINE_KEY not in received.native
    assert (received.body_type, received.body) == (BodyType.TEXT, TEXT.encode("utf-8"))


def test_a_regular_message_is_left_alone(tmp_path):
    a = _node(tmp_path, "a")
    message = make_message(b"abc", MessageHeaders(address="q", type=MessageType.BYTES), "q", None)
    out = message.copy()
    inline_body(a, message, out, room=10, peer_version=(1, 3))
    assert out.body == b"abc" and store_incoming(a, _cross(out)) is None
