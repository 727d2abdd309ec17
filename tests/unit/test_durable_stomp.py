"""Durable STOMP sends over a real journal on the fault-injecting file layer.

A RECEIPT for a persistent SEND must mean the record was fsynced; when the
disk fails, the broker must refuse durable sends with a clear ERROR instead of
confirming them, and keep serving non-durable traffic.
"""

from __future__ import annotations

import errno

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from junction.brokercore.journal import FaultyFiles, Journal
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.stomp_server import StompProtocol
from junction.config.model import Acceptor, BrokerConfig
from junction.protocols.stomp import Frame, StompCodec

ACCEPTOR = Acceptor(
    name="stomp", scheme="tcp", host="127.0.0.1", port=0, anycast_prefix="/queue/", multicast_prefix="/topic/"
)


class Node:
    def __init__(self, tmp_path, fs: FaultyFiles):
        self.clock = Clock()
        self.fs = fs
        self.config = BrokerConfig(persistence_enabled=True, security_enabled=False, base_dir=str(tmp_path))
        self.journal = Journal(str(tmp_path / "journal"), files=fs, writer="inline", reactor=self.clock, preallocate=False)
        self.server = BrokerServer(
            self.config, reactor=self.clock, security=SecurityManager(None, (), enabled=False), journal=self.journal
        )
        self.server.start()

    def client(self):
        return Client(self)


class Client:
    def __init__(self, node: Node):
        self.node = node
        self.protocol = StompProtocol(node.server, acceptor=ACCEPTOR, reactor=node.clock)
        self.transport = StringTransport()
        self.codec = StompCodec(server=False)
        self.frames: list[Frame] = []
        self.protocol.makeConnection(self.transport)
        self.write("CONNECT", {"accept-version": "1.2", "host": "x"})
        assert self.take()[-1].command == "CONNECTED"
        self.codec.set_version("1.2")

    def write(self, command, headers, body=b""):
        self.protocol.dataReceived(self.codec.send(Frame(command, headers, body)))

    def take(self) -> list[Frame]:
        data = self.transport.value()
        self.transport.clear()
        frames = [f for f in self.codec.receive_data(data) if isinstance(f, Frame)]
        self.frames.extend(frames)
        return frames

    def run(self):
        self.node.clock.advance(0)
        self.node.clock.advance(0)
        return self.take()


def test_receipt_for_a_persistent_send_follows_the_fsync(tmp_path):
    fs = FaultyFiles()
    node = Node(tmp_path, fs)
    client = node.client()
    syncs_before = fs.fsyncs
    client.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r1"}, b"hello")
    assert client.take() == [], "no RECEIPT before the journal wrote and synced"
    frames = client.run()
    assert [f.command for f in frames] == ["RECEIPT"]
    assert fs.fsyncs > syncs_before


def test_fsync_failure_refuses_durable_sends_and_keeps_non_durable_ones(tmp_path):
    fs = FaultyFiles()
    node = Node(tmp_path, fs)
    first = node.client()
    fs.fail_fsync = errno.EIO
    first.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r1"}, b"lost?")
    frames = first.run()
    assert [f.command for f in frames] == ["ERROR"], "a failed sync is never confirmed"
    assert frames[0].get("receipt-id") == "r1"
    assert "journal" in frames[0].get("message").lower()
    assert first.transport.disconnecting
    assert node.server.storage.failed

    second = node.client()
    second.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": "r2"}, b"x")
    frames = second.run()
    assert [f.command for f in frames] == ["ERROR"]
    assert "durable sends are refused" in frames[0].get("message")

    third = node.client()
    third.write("SEND", {"destination": "/queue/q", "receipt": "r3"}, b"in memory")
    assert [f.command for f in third.run()] == ["RECEIPT"]


def test_receipted_messages_are_recovered_and_acked_ones_are_not(tmp_path):
    fs = FaultyFiles()
    node = Node(tmp_path, fs)
    producer = node.client()
    for i in range(5):
        producer.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": f"r{i}"}, f"m{i}".encode())
    assert [f.get("receipt-id") for f in producer.run()] == [f"r{i}" for i in range(5)]
    consumer = node.client()
    consumer.write("SUBSCRIBE", {"destination": "/queue/q", "id": "s", "ack": "client-individual"})
    delivered = [f for f in consumer.run() if f.command == "MESSAGE"]
    assert [f.body for f in delivered] == [f"m{i}".encode() for i in range(5)]
    for frame in delivered[:2]:
        consumer.write("ACK", {"id": frame.get("ack"), "receipt": "a" + frame.get("ack")})
    assert [f.command for f in consumer.run()] == ["RECEIPT", "RECEIPT"]

    # A process crash (kill -9): what was written survives, synced or not, so a
    # receipted ACK is never undone.
    restarted = Node(tmp_path, fs.crash(keep_unsynced=True))
    queue = restarted.server.find_queue("q")
    assert [r.message.body for r in queue.waiting()] == [b"m2", b"m3", b"m4"]

    # Power loss: only synced records survive.  Every receipted send is among
    # them; acks are written without their own fsync, so an acked message may
    # come back (at-least-once), never a receipted one go missing.
    fs2 = FaultyFiles()
    node2 = Node(tmp_path / "power", fs2)
    producer = node2.client()
    for i in range(3):
        producer.write("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": f"r{i}"}, f"p{i}".encode())
    assert len(producer.run()) == 3
    after = Node(tmp_path / "power", fs2.crash())
    bodies = [r.message.body for r in after.server.find_queue("q").waiting()]
    assert bodies == [b"p0", b"p1", b"p2"]
