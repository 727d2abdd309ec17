"""Large CORE messages to STOMP and AMQP consumers: whole, streamed from the file, memory bounded.

The real JMS client sends a large message (32 MiB of bytes, or a TextMessage of
12 Mi characters: a 24 MiB file whose UTF-8 text is about 18 MiB), both over
the 16 MiB a STOMP or AMQP consumer once got empty; a real STOMP client
(stomp.py) or AMQP client (python-qpid-proton) receives it, the body compared
by digest, while the node's resident memory is sampled from ``/proc``: it must
grow far less than the message.  Raw STOMP sockets check what the streaming
must keep: a RECEIPT asked for while the body is held up by a client that does
not read comes after the whole MESSAGE, and a connection lost half way gives
the (auto-ack) message back to a later subscriber, whole.
"""

from __future__ import annotations

import hashlib
import socket
import time

import pytest
import stomp
from proton.utils import BlockingConnection

from tests import harness
from tests.artemis import JmsClient
from tests.artemis.jms import pattern, sha256
from tests.integration import test_artemis_peer as peer
from tests.integration.test_core_jms import _Target
from tests.integration.test_core_large import _files, _node, _Sampler

pytestmark = pytest.mark.timeout(60)

#: bytes of the large BytesMessage, and characters of the large TextMessage
BIG = 32 * 1024 * 1024
TEXT_CHARS = 12 * 1024 * 1024
#: how much the node's RSS may grow while a consumer takes the message
RSS_GROWTH_BOUND = 6 * 1024 * 1024


def _text_utf8(chars: int) -> bytes:
    """The UTF-8 of the JMS scenario's text of ``chars`` characters (pattern() as ISO-8859-1)."""
    return pattern(chars).decode("latin-1").encode("utf-8")


def _send(node, jms: JmsClient, queue: str, kind: str, size: int) -> None:
    jms.run([peer.connect(_Target(node.core_port)), {"op": "send", "queue": queue, "type": kind, "size": size}], timeout=50)


class _Digest(stomp.ConnectionListener):
    """Each MESSAGE's headers and body digest (the body itself is not kept)."""

    def __init__(self):
        self.messages: list = []

    def on_message(self, frame):
        body = bytes(frame.body)
        self.messages.append((frame.headers, len(body), hashlib.sha256(body).hexdigest()))


def _stomp_take(node, queue: str) -> tuple:
    """One MESSAGE from ``queue`` by stomp.py (ack:auto), with the node's RSS growth meanwhile."""
    listener = _Digest()
    conn = stomp.Connection12([node.stomp_address], auto_decode=False)
    # Big reads: stomp.py copies its whole receive buffer on every read holding a NUL (the
    # body has one every 251 bytes), so its default 16 KiB reads are quadratic in the frame.
    conn.transport._Transport__recv_bytes = 8 * 1024 * 1024
    conn.set_listener("t", listener)
    conn.connect(peer.USER["user"], peer.USER["password"], wait=True)
    sampler = _Sampler(node.pid)
    try:
        conn.subscribe(queue, id="1", ack="auto")
        harness.wait_for(lambda: listener.messages, 30, what="the large MESSAGE")
    finally:
        growth = sampler.stop()
        conn.disconnect()
    (message,) = listener.messages
    return message, growth


def test_stomp_consumer_gets_32_mib_bytes_whole(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        _send(node, jms, "big", "bytes", BIG)
        (headers, size, digest), growth = _stomp_take(node, "big")
        assert (size, digest) == (BIG, sha256(pattern(BIG)))
        assert headers["content-length"] == str(BIG)
        assert growth < RSS_GROWTH_BOUND, f"the node's RSS grew {growth} bytes streaming {BIG} bytes"
        # auto-acknowledged once written: its file goes
        harness.wait_for(lambda: _files(tmp_path) == [], 10, what="the large-messages directory empty")
    finally:
        assert node.stop() == 0


def test_stomp_consumer_gets_large_text_as_utf8(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        _send(node, jms, "text", "text", TEXT_CHARS)
        expected = _text_utf8(TEXT_CHARS)
        (_headers, size, digest), growth = _stomp_take(node, "text")
        assert (size, digest) == (len(expected), sha256(expected))
        assert growth < RSS_GROWTH_BOUND, f"the node's RSS grew {growth} bytes streaming a large text"
    finally:
        assert node.stop() == 0


def _amqp(node) -> BlockingConnection:
    return BlockingConnection(
        node.amqp_url, user=peer.USER["user"], password=peer.USER["password"], allowed_mechs="PLAIN", timeout=30
    )


@pytest.mark.parametrize("kind", ["bytes", "text"])
def test_amqp_consumer_gets_large_message_whole(tmp_path, jms: JmsClient, kind):
    node = _node(tmp_path).start()
    try:
        _send(node, jms, "big", kind, BIG if kind == "bytes" else TEXT_CHARS)
        conn = _amqp(node)
        sampler = _Sampler(node.pid)
        try:
            receiver = conn.create_receiver("big")
            message = receiver.receive(timeout=30)
            receiver.accept()
        finally:
            growth = sampler.stop()
        if kind == "bytes":
            assert isinstance(message.body, (bytes, memoryview))
            body, expected = bytes(message.body), pattern(BIG)
        else:
            assert isinstance(message.body, str)
            body, expected = message.body.encode("utf-8"), _text_utf8(TEXT_CHARS)
        assert (len(body), sha256(body)) == (len(expected), sha256(expected))
        assert message.properties["_AMQ_LARGE_SIZE"] > 16 * 1024 * 1024
        conn.close()
        assert growth < RSS_GROWTH_BOUND, f"the node's RSS grew {growth} bytes streaming a large {kind} message"
        harness.wait_for(lambda: _files(tmp_path) == [], 10, what="the large-messages directory empty")
    finally:
        assert node.stop() == 0


def _stomp_socket(node, queue: str, ack: str) -> socket.socket:
    """A raw STOMP 1.2 connection subscribed to ``queue``, with a small receive buffer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(20)
    sock.connect(node.stomp_address)
    user, password = peer.USER["user"], peer.USER["password"]
    sock.sendall(
        f"CONNECT\naccept-version:1.2\nhost:h\nlogin:{user}\npasscode:{password}\n\n\0".encode()
        + f"SUBSCRIBE\nid:0\ndestination:{queue}\nack:{ack}\n\n\0".encode()
    )
    return sock


def _read_until(sock: socket.socket, data: bytearray, size: int) -> None:
    deadline = time.monotonic() + 30
    while len(data) < size:
        assert time.monotonic() < deadline, f"only {len(data)} of {size} bytes"
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(data)} bytes"
        data += chunk


def _message_span(data: bytearray) -> tuple[int, int]:
    """(start of the body, its length) of the first MESSAGE in ``data``."""
    start = data.index(b"MESSAGE\n")
    head_end = data.index(b"\n\n", start)
    headers = dict(line.split(":", 1) for line in data[start:head_end].decode().split("\n")[1:])
    return head_end + 2, int(headers["content-length"])


def test_receipt_asked_during_a_large_body_comes_after_it(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        _send(node, jms, "held", "bytes", BIG)
        sock = _stomp_socket(node, "held", "client-individual")
        data = bytearray()
        _read_until(sock, data, 64 * 1024)  # the body has begun; the rest waits on our reading
        sock.sendall(b"BEGIN\ntransaction:t1\nreceipt:r1\n\n\0")
        body_start, length = _message_span(data)
        assert length == BIG
        end = body_start + length + 1
        _read_until(sock, data, end + len(b"RECEIPT\nreceipt-id:r1\n\n\0"))
        assert hashlib.sha256(data[body_start : end - 1]).hexdigest() == sha256(pattern(BIG))
        assert data[end - 1 : end] == b"\0"
        assert data[end:].lstrip(b"\n").startswith(b"RECEIPT\nreceipt-id:r1\n")
        sock.close()
    finally:
        assert node.stop() == 0


def test_connection_lost_during_a_large_body_loses_nothing(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        _send(node, jms, "cut", "bytes", BIG)
        sock = _stomp_socket(node, "cut", "auto")
        data = bytearray()
        _read_until(sock, data, 1024 * 1024)
        sock.close()  # half way through an auto-ack delivery
        assert len(_files(tmp_path)) == 1
        (headers, size, digest), _growth = _stomp_take(node, "cut")
        assert (size, digest) == (BIG, sha256(pattern(BIG)))
        assert headers["redelivered"] == "true"
        harness.wait_for(lambda: _files(tmp_path) == [], 10, what="the large-messages directory empty")
    finally:
        assert node.stop() == 0
