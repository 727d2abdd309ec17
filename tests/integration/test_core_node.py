"""A real ``junction run`` node serving CORE, talked to over raw sockets with the project's codec.

The node has an acceptor with ``protocols=CORE`` and one with
``protocols=STOMP,CORE`` (sniffed), security on.  The client writes the
packets the real Artemis client writes (core.md section 3): the ``ARTEMIS``
handshake, PING, SUBSCRIBE_TOPOLOGY_V2, CREATESESSION_V2, then a session's
packets, and reads the node's answers with a client-side codec.  Durable
sends are answered once journalled; the node killed with SIGKILL keeps every
message whose send was answered and that was not acknowledged; bad input
closes only the connection that sent it.  (The real Java client's tests come
with the Artemis harness.)
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from junction.protocols.core import (
    HANDSHAKE,
    CoreCodec,
    ExceptionType,
    MessageHeaders,
    encode_packet,
)
from junction.protocols.core import packets as p
from junction.protocols.core.versions import CURRENT_VERSION
from tests.harness import free_port

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 10.0
USERS = {"app": ("app-secret", "app")}
CH = 10


class RawCoreClient:
    """One CORE connection over a socket: packets out with the codec, packets in with a client codec."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.codec = CoreCodec(server=False)
        self.inbox: list = []
        self.sock.sendall(HANDSHAKE)

    def send(self, *packets) -> None:
        self.sock.sendall(b"".join(encode_packet(x) for x in packets))

    def receive(self, count: int = 1, *, timeout: float = TIMEOUT) -> list:
        """The next ``count`` packets (fails on a deadline or when the node closes first)."""
        deadline = time.monotonic() + timeout
        while len(self.inbox) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"waited {timeout} s for {count} packets, got {self.inbox}"
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            assert data, f"the node closed the connection; got {self.inbox}"
            self.inbox.extend(self.codec.receive_data(data))
        got, self.inbox = self.inbox[:count], self.inbox[count:]
        return got

    def request(self, packet, count: int = 1) -> list:
        self.send(packet)
        return self.receive(count)

    def closed_by_node(self) -> bool:
        """Whether the node closed the connection (reads until EOF, within the timeout)."""
        self.sock.settimeout(TIMEOUT)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.inbox.extend(self.codec.receive_data(data))
        except ConnectionResetError:
            return True

    def open(self, user: str = "app", password: str = "app-secret") -> p.Packet:
        self.send(p.Ping(60_000), p.SubscribeTopologyV2(False, CURRENT_VERSION))
        ping, topology = self.receive(2)
        assert ping == p.Ping(60_000)
        assert type(topology) is p.ClusterTopologyV4 and topology.last and topology.server_version == CURRENT_VERSION
        self.node_id = topology.node_id
        (answer,) = self.request(
            p.CreateSessionV2("s", CH, CURRENT_VERSION, user, password, 102400, False, True, True, -1, False, None, None)
        )
        return answer

    def close(self) -> None:
        self.sock.close()


def durable(body: bytes, address: str = "orders", **props) -> tuple:
    headers = MessageHeaders(address=address, durable=True, timestamp=int(time.time() * 1000),
                             properties=tuple(props.items()) or None)
    return body, headers


@pytest.fixture
def node(broker_factory):
    core_port, multi_port = free_port(), free_port()
    broker = broker_factory(
        "core-node",
        security=True,
        users=USERS,
        extra_acceptors_xml=(
            f'<acceptor name="core">tcp://127.0.0.1:{core_port}?protocols=CORE</acceptor>'
            f'<acceptor name="multi">tcp://127.0.0.1:{multi_port}?protocols=STOMP,CORE</acceptor>'
        ),
    ).start()
    broker.core_port, broker.multi_port = core_port, multi_port
    return broker


def test_session_queue_durable_send_consume_ack_and_a_kill_9(node):
    client = RawCoreClient(node.core_port)
    refused = client.open(password="wrong")
    assert (refused.code, refused.channel_id) == (ExceptionType.SECURITY_EXCEPTION, 1)
    assert "AMQ229031" in refused.message
    (answer,) = client.request(
        p.CreateSessionV2("s", CH, CURRENT_VERSION, "app", "app-secret", 102400, False, True, True, -1, False, None, "c-1")
    )
    assert answer == p.CreateSessionResponse(CURRENT_VERSION)
    assert client.node_id == node.status()["node_id"]
    assert client.request(p.CreateQueueV2("orders", "orders", None, True, False, True, False, 1, -1, False, channel_id=CH)) == [
        p.NullResponse(-1, channel_id=CH)
    ]
    for i in range(3):
        body, headers = durable(b"order-%d" % i, n=i)
        assert client.request(p.SessSend(body, headers, True, -(i + 1), 1, channel_id=CH)) == [
            p.NullResponse(-(i + 1), channel_id=CH)
        ]
    (query,) = client.request(p.SessCreateConsumer(0, "orders", None, False, True, 0, channel_id=CH))
    assert (query.exists, query.durable, query.message_count, query.consumer_count) == (True, True, 3, 1)
    client.send(p.SessFlowToken(0, 1024 * 1024, channel_id=CH), p.SessStart(channel_id=CH))
    got = client.receive(3)
    assert [x.body for x in got] == [b"order-0", b"order-1", b"order-2"]
    assert [x.headers.property("n") for x in got] == [0, 1, 2] and all(x.headers.durable for x in got)
    assert client.request(p.SessAcknowledge(0, got[0].headers.message_id, True, channel_id=CH)) == [
        p.NullResponse(-1, channel_id=CH)
    ]
    # the two others were delivered and not acknowledged: a crash must not lose them
    node.kill9()
    assert client.closed_by_node()
    client.close()
    node.start()
    again = RawCoreClient(node.core_port)
    assert again.open() == p.CreateSessionResponse(CURRENT_VERSION)
    (query,) = again.request(p.SessCreateConsumer(0, "orders", None, False, True, 0, channel_id=CH))
    assert query.exists and query.message_count == 2
    again.send(p.SessFlowToken(0, -1, channel_id=CH), p.SessStart(channel_id=CH))
    got = again.receive(2)
    assert [(x.body, x.headers.property("n")) for x in got] == [(b"order-1", 1), (b"order-2", 2)]
    again.request(p.SessAcknowledge(0, got[1].headers.message_id, True, channel_id=CH))
    assert again.request(p.SessClose(channel_id=CH)) == [p.NullResponse(-1, channel_id=CH)]
    again.close()


def test_a_multi_protocol_acceptor_sniffs_core(node):
    client = RawCoreClient(node.multi_port)
    assert client.open() == p.CreateSessionResponse(CURRENT_VERSION)
    (answer,) = client.request(p.SessQueueQuery("nothing", channel_id=CH))
    assert type(answer) is p.SessQueueQueryResponseV3 and not answer.exists
    client.close()


def test_bad_input_closes_only_its_own_connection(node):
    good = RawCoreClient(node.core_port)
    assert good.open() == p.CreateSessionResponse(CURRENT_VERSION)
    bad = RawCoreClient(node.core_port)
    assert bad.open() == p.CreateSessionResponse(CURRENT_VERSION)
    bad.sock.sendall(struct.pack(">ibq", 9, -23, CH))  # a packet type Artemis does not have
    (answer,) = bad.receive(1)
    assert (answer.code, answer.channel_id) == (ExceptionType.UNSUPPORTED_PACKET, CH)
    assert bad.closed_by_node()
    bad.close()
    oversized = RawCoreClient(node.core_port)
    oversized.sock.sendall(struct.pack(">i", 2**31 - 1))
    (answer,) = oversized.receive(1)
    assert answer.code == ExceptionType.INTERNAL_ERROR and "max-packet-size" in answer.message
    assert oversized.closed_by_node()
    oversized.close()
    (answer,) = good.request(p.SessBindingQuery("orders", channel_id=CH))
    assert type(answer) is p.SessBindingQueryResponseV5
    good.close()
