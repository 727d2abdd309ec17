"""A large message streamed to a STOMP subscriber, on an in-memory broker whose transport fills up."""

from __future__ import annotations

from twisted.internet.testing import StringTransport

from junction.brokercore.large_messages import NATIVE_KEY, LargeMessageStore, reference
from tests.unit.stomp_fixtures import Broker, Limits

BODY = bytes(range(256)) * 4096  # 1 MiB
#: bytes the fake transport takes before it tells the protocol to pause
BUFFER = 128 * 1024


class _Filling(StringTransport):
    """A transport that pauses its producer once BUFFER bytes wait, until the test drains it."""

    def __init__(self):
        super().__init__()
        self.protocol = None
        #: the buffer is full: the protocol (the producer of writes) was paused
        self.full = False

    def write(self, data):
        super().write(data)
        if len(self.value()) >= BUFFER and not self.full:
            self.full = True
            self.protocol.pauseProducing()

    def drain(self) -> bytes:
        data = self.value()
        self.clear()
        if self.full:
            self.full = False
            self.protocol.resumeProducing()
        return data


def _setup(tmp_path, limits=None):
    broker = Broker(limits=limits)
    store = broker.server.large_messages = LargeMessageStore(str(tmp_path / "large"))
    writer = store.begin()
    writer.append(BODY)
    writer.finish(sync=False)
    broker.queue("big")
    session = broker.session()
    broker.send(session, "big", b"", native={NATIVE_KEY: reference(writer.file_id, len(BODY))})
    client = broker.client()
    assert client.connect("1.2").command == "CONNECTED"
    transport = _Filling()
    transport.protocol = client.protocol
    client.protocol.transport = client.transport = transport
    return broker, client, transport


def test_replies_wait_for_the_body_and_reading_stops_at_the_bound(tmp_path):
    broker, client, transport = _setup(tmp_path, Limits(max_pending_frames=3))
    client.subscribe("big", ack="client-individual")
    broker.run()
    data = transport.value()
    assert data.startswith(b"MESSAGE\n") and len(data) < BUFFER + 64 * 1024  # one chunk past the fill
    for n in range(3):
        client.send_frame("BEGIN", [("transaction", f"t{n}"), ("receipt", f"r{n}")])
    assert b"RECEIPT" not in transport.value()
    assert transport.producerState == "paused"  # three replies held: the client is not read
    out = bytearray()
    for _ in range(len(BODY) // 1024):  # bounded: the body is out long before
        if not (transport.full or transport.value()):
            break
        out += transport.drain()
    assert transport.producerState == "producing"  # read again once the body is out
    frames = client.codec.receive_data(bytes(out))
    assert [f.command for f in frames] == ["MESSAGE", "RECEIPT", "RECEIPT", "RECEIPT"]
    assert frames[0].body == BODY


def test_a_protocol_error_during_the_body_closes_and_the_message_goes_back(tmp_path):
    broker, client, transport = _setup(tmp_path)
    client.subscribe("big", ack="auto")
    broker.run()
    assert transport.value().startswith(b"MESSAGE\n")
    client.send_frame("ACK", [])  # no id: a protocol error, which cannot go inside the body
    assert client.closed
    assert b"ERROR" not in transport.value()
    client.lose()
    queue = broker.server.find_queue("big")
    assert queue.message_count == 1  # auto-ack, but never all written: not acknowledged
