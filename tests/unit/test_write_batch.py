"""Every protocol adapter hands the journal one read's records as one batch.

``BrokerServer.batch_writes()`` holds the journal's writer while an adapter
handles one read (``storage.hold``/``release``), so the records of every
message in the read go out in one write and one sync.  These tests run the
STOMP and AMQP adapters over a real journal whose hold and appends are
watched: each durable message's record is appended inside a hold, every hold
is released when the read is handled, and a durable send is still confirmed
only after its record was synced.
"""

from __future__ import annotations

import proton
import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from junction.brokercore.amqp_server import AmqpFactory
from junction.brokercore.journal import FaultyFiles, Journal
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.stomp_server import StompProtocol
from junction.brokercore.storage import RecordType, WriteBatch
from junction.config.model import BrokerConfig
from junction.protocols.stomp import Frame, StompCodec
from tests.unit.test_amqp_server import AmqpClient, amqp_acceptor
from tests.unit.test_durable_stomp import ACCEPTOR
from tests.unit.test_durable_stomp import Client as StompClient


class _Storage:
    def __init__(self):
        self.calls: list[str] = []

    def hold(self):
        self.calls.append("hold")

    def release(self):
        self.calls.append("release")


def test_a_batch_holds_and_releases_and_nests():
    storage = _Storage()
    batch = WriteBatch(storage)
    with batch:
        with batch:
            storage.calls.append("work")
    assert storage.calls == ["hold", "hold", "work", "release", "release"]


def test_a_batch_is_released_when_the_handling_raises():
    storage = _Storage()
    with pytest.raises(RuntimeError), WriteBatch(storage):
        raise RuntimeError("a handler failed")
    assert storage.calls == ["hold", "release"]


class _Node:
    """A broker node on a real journal (inline writer) whose holds and appends are recorded."""

    def __init__(self, tmp_path):
        self.clock = Clock()
        self.limits = None
        self.fs = FaultyFiles()
        self.config = BrokerConfig(persistence_enabled=True, security_enabled=False, base_dir=str(tmp_path))
        journal = Journal(
            str(tmp_path / "journal"), files=self.fs, writer="inline", reactor=self.clock, preallocate=False
        )
        self.depth = 0
        self.holds = 0
        #: hold depth at each durable message record appended
        self.message_appends: list[int] = []
        hold, release, append_add = journal.hold, journal.release, journal.append_add

        def watched_hold():
            self.depth += 1
            self.holds += 1
            hold()

        def watched_release():
            self.depth -= 1
            release()

        def watched_append_add(record_id, user_type, payload, *, sync):
            if user_type == RecordType.MESSAGE_REFS:
                self.message_appends.append(self.depth)
            return append_add(record_id, user_type, payload, sync=sync)

        journal.hold, journal.release, journal.append_add = watched_hold, watched_release, watched_append_add
        self.server = BrokerServer(
            self.config, reactor=self.clock, security=SecurityManager(None, (), enabled=False), journal=journal
        )
        self.server.start()

    def run(self, seconds: float = 0) -> None:
        self.clock.advance(seconds)


def test_stomp_holds_the_journal_around_each_read(tmp_path):
    node = _Node(tmp_path)
    client = StompClient(node)  # CONNECT, answered
    holds = node.holds
    frames = b"".join(
        client.codec.send(
            client_frame("SEND", {"destination": "/queue/q", "persistent": "true", "receipt": f"r{i}"}, b"m%d" % i)
        )
        for i in range(5)
    )
    syncs = node.fs.fsyncs
    client.protocol.dataReceived(frames)  # five durable SENDs in one read
    assert node.holds == holds + 1, "one hold for the read"
    assert node.depth == 0, "released once the read was handled"
    assert node.message_appends == [1] * 5, "every record appended inside the hold"
    assert client.take() == [], "no RECEIPT before the records are synced"
    received = client.run()
    assert [f.get("receipt-id") for f in received] == [f"r{i}" for i in range(5)]
    assert node.fs.fsyncs > syncs


def test_stomp_holds_the_journal_for_a_read_that_connects_and_sends(tmp_path):
    node = _Node(tmp_path)
    protocol = StompProtocol(node.server, acceptor=ACCEPTOR, reactor=node.clock)
    protocol.makeConnection(StringTransport())
    holds = node.holds
    codec = StompCodec(server=False)
    read = codec.send(client_frame("CONNECT", {"accept-version": "1.2", "host": "x"})) + codec.send(
        client_frame("SEND", {"destination": "/queue/q", "persistent": "true"}, b"first")
    )
    protocol.dataReceived(read)  # no session before this read: the batch is the server's
    assert node.holds == holds + 1 and node.depth == 0
    assert node.message_appends == [1]


def test_amqp_holds_the_journal_around_each_read(tmp_path):
    node = _Node(tmp_path)
    factory = AmqpFactory(node.server, acceptor=amqp_acceptor(), reactor=node.clock)
    client = AmqpClient(node, factory=factory)
    snd = client.sender("q")
    holds = node.holds
    deliveries = []
    for i in range(5):
        message = proton.Message(body=f"m{i}", durable=True)
        deliveries.append(snd.delivery(b"t%d" % i))
        snd.send(message.encode())
        snd.advance()
    out = client.pn.pending()
    data = client.pn.peek(out)
    client.pn.pop(out)
    client.protocol.dataReceived(data)  # five durable transfers in one read
    assert node.holds == holds + 1, "one hold for the read"
    assert node.depth == 0, "released once the read was handled"
    assert node.message_appends == [1] * 5, "every record appended inside the hold"
    client.pump()
    assert all(d.remote_state == proton.Delivery.ACCEPTED for d in deliveries), "accepted once synced"


def client_frame(command, headers, body=b""):
    return Frame(command, tuple(headers.items()), body)


def test_a_node_without_persistence_brackets_reads_without_calling_its_storage(tmp_path):
    from junction.brokercore.storage import NO_BATCH

    config = BrokerConfig(persistence_enabled=False, security_enabled=False, base_dir=str(tmp_path))
    server = BrokerServer(config, reactor=Clock(), security=SecurityManager(None, (), enabled=False))
    batch = server.batch_writes()
    assert batch is NO_BATCH
    with pytest.raises(RuntimeError), batch:  # the handling's error still goes through
        raise RuntimeError("a handler failed")
    persistent = _Node(tmp_path).server.batch_writes()
    assert isinstance(persistent, WriteBatch) and persistent is not NO_BATCH
