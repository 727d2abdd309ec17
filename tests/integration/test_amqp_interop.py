"""Cross-protocol tests: STOMP and AMQP 1.0 clients on one real ``junction run``.

One broker per test (``broker_factory``) with three acceptors:

* ``stomp`` -- ``protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/``;
* ``amqp`` -- ``protocols=AMQP``, plain addresses;
* ``multi`` -- ``protocols=STOMP,AMQP`` on a single port (the multi-protocol
  acceptor sniffs each connection's first bytes), with the same prefixes.

The conversion tests run twice: with each client on its own protocol's
acceptor ("dedicated") and with both on the one shared port ("shared").
Clients are stomp.py 9 (``Connection12``) and python-qpid-proton's
``BlockingConnection``.  No sleeps: the STOMP listener records frames under a
condition that tests wait on with a deadline; proton's blocking receive has a
timeout of its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
import stomp
from proton import Message, symbol, ulong
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection

from tests.harness import BrokerProcess, free_port, wait_for

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 10.0
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}


# --------------------------------------------------------------------------- fixtures


class InteropBroker:
    def __init__(self, broker: BrokerProcess, multi_port: int):
        self.broker = broker
        self.multi_port = multi_port

    def stomp_address(self, via: str) -> tuple[str, int]:
        return (self.broker.host, self.multi_port) if via == "shared" else self.broker.stomp_address

    def amqp_url(self, via: str) -> str:
        return f"amqp://{self.broker.host}:{self.multi_port}" if via == "shared" else self.broker.amqp_url


@pytest.fixture
def interop(broker_factory) -> InteropBroker:
    multi_port = free_port()
    params = ";".join(f"{k}={v}" for k, v in PREFIXES.items())
    broker = broker_factory(
        "interop",
        stomp_acceptor_params=PREFIXES,
        extra_acceptors_xml=(
            f'<acceptor name="multi">tcp://127.0.0.1:{multi_port}?protocols=STOMP,AMQP;{params}</acceptor>'
        ),
    ).start()
    return InteropBroker(broker, multi_port)


class Recorder(stomp.ConnectionListener):
    """Every MESSAGE, RECEIPT and ERROR a stomp.py connection gets; tests wait on it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list = []
        self.receipts: list[str] = []
        self.errors: list = []

    def on_message(self, frame) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame) -> None:
        with self.cond:
            self.receipts.append(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_error(self, frame) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, predicate: Callable[[], object], what: str, timeout: float = TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                assert not self.errors, f"STOMP ERROR: {self.errors[0].headers} {self.errors[0].body!r}"
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
                self.cond.wait(remaining)

    def wait_messages(self, n: int) -> list:
        return self.wait(lambda: self.messages[:n] if len(self.messages) >= n else None, f"{n} MESSAGE frames")

    def wait_receipt(self, receipt: str) -> None:
        self.wait(lambda: receipt in self.receipts, f"RECEIPT {receipt}")


@pytest.fixture
def clients():
    """Makes stomp.py and proton connections and closes them all at teardown."""
    made: list = []

    class Make:
        @staticmethod
        def stomp(address) -> tuple[stomp.Connection12, Recorder]:
            # No automatic content-length: a text body is sent without one
            # (a TEXT message), a binary one with an explicit header.
            conn = stomp.Connection12([address], auto_content_length=False, auto_decode=False, heartbeats=(0, 0))
            recorder = Recorder()
            conn.set_listener("recorder", recorder)
            conn.connect(wait=True)
            made.append(conn)
            return conn, recorder

        @staticmethod
        def amqp(url: str, container: str) -> BlockingConnection:
            reactor = Container()
            reactor.container_id = container
            conn = BlockingConnection(url, timeout=TIMEOUT, container=reactor)
            made.append(conn)
            return conn

    yield Make
    for conn in reversed(made):
        try:
            if isinstance(conn, BlockingConnection):
                conn.close()
            else:
                conn.disconnect()
        except Exception:  # noqa: BLE001 - teardown of a connection the test may have broken
            pass


class Capabilities(LinkOption):
    """Source and target capabilities on a link (``queue`` / ``topic``)."""

    def __init__(self, *names: str):
        self.names = names

    def apply(self, link) -> None:
        for terminus in (link.source, link.target):
            data = terminus.capabilities
            data.put_array(False, data.SYMBOL)
            data.enter()
            for name in self.names:
                data.put_symbol(symbol(name))
            data.exit()


def as_bytes(body) -> bytes:
    assert isinstance(body, (bytes, bytearray, memoryview)), f"not a binary body: {type(body).__name__}"
    return bytes(body)


VIAS = pytest.mark.parametrize("via", ["dedicated", "shared"])

TEXT_BODY = "héllo from STOMP ✓"
BINARY_BODY = bytes(range(256)) + b"\x00\x00end"


# --------------------------------------------------------------------------- STOMP -> AMQP


@VIAS
def test_stomp_message_received_over_amqp_with_headers_intact(interop, clients, via):
    conn, rec = clients.stomp(interop.stomp_address(via))
    text_headers = {
        "persistent": "true",
        "priority": "7",
        "colour": "blue",
        "order-number": "1042",
        "JMSXGroupID": "grp-1",
        "correlation-id": "corr-42",
        "reply-to": "replies",
        "content-type": "text/plain",
    }
    conn.send("/queue/interop.s2a", TEXT_BODY.encode("utf-8"), headers=text_headers)
    binary_headers = {
        "persistent": "false",
        "priority": "2",
        "kind": "blob",
        "JMSXGroupID": "grp-2",
        "correlation-id": "corr-43",
        "content-type": "application/octet-stream",
        "content-length": str(len(BINARY_BODY)),
        "receipt": "sent",
    }
    conn.send("/queue/interop.s2a", BINARY_BODY, headers=binary_headers)
    rec.wait_receipt("sent")

    amqp = clients.amqp(interop.amqp_url(via), "s2a-receiver")
    receiver = amqp.create_receiver("interop.s2a", credit=10)
    text = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    binary = receiver.receive(timeout=TIMEOUT)
    receiver.accept()

    # text (no content-length) -> an amqp-value string
    assert text.body == TEXT_BODY and isinstance(text.body, str)
    assert text.inferred is False  # amqp-value, not a data section
    assert text.properties == {"colour": "blue", "order-number": "1042"}
    assert text.group_id == "grp-1"
    assert text.priority == 7
    assert text.durable is True
    assert text.correlation_id == "corr-42"
    assert text.reply_to == "replies"
    assert text.content_type == "text/plain"
    assert text.address == "interop.s2a"

    # content-length -> a data section, byte for byte
    assert as_bytes(binary.body) == BINARY_BODY
    assert binary.inferred is True  # a data section
    assert binary.properties == {"kind": "blob"}
    assert binary.group_id == "grp-2"
    assert binary.priority == 2
    assert binary.durable is False
    assert binary.correlation_id == "corr-43"
    assert binary.reply_to is None
    assert binary.content_type == "application/octet-stream"

    # Both were accepted (the dispositions go out at the latest with the
    # detach): nothing goes back on the queue, which may go with its consumer.
    receiver.close()
    wait_for(lambda: queue_count(interop.broker, "interop.s2a") in (0, None), TIMEOUT, what="interop.s2a drained")


def queue_count(broker: BrokerProcess, name: str) -> int | None:
    for q in broker.status()["queues"]:
        if q["name"] == name:
            return q["message_count"]
    return None


# --------------------------------------------------------------------------- AMQP -> STOMP


@VIAS
def test_amqp_message_received_over_stomp_with_headers_intact(interop, clients, via):
    amqp = clients.amqp(interop.amqp_url(via), "a2s-sender")
    sender = amqp.create_sender("interop.a2s")
    sender.send(
        Message(
            body="text from AMQP ✓",
            properties={"colour": "red", "count": 7, "ok": True},
            subject="order-created",
            correlation_id="c-1",
            group_id="g-7",
            durable=True,
            priority=6,
        ),
        timeout=TIMEOUT,
    )
    sender.send(
        Message(body=BINARY_BODY, inferred=True, properties={"kind": "blob"}, group_id="g-8", subject="blob"),
        timeout=TIMEOUT,
    )

    conn, rec = clients.stomp(interop.stomp_address(via))
    conn.subscribe("/queue/interop.a2s", id="sub", ack="auto")
    text, binary = rec.wait_messages(2)

    h = text.headers
    assert text.body == "text from AMQP ✓".encode("utf-8")
    assert h["destination"] == "/queue/interop.a2s"
    assert h["colour"] == "red" and h["count"] == "7" and h["ok"] == "true"
    assert h["JMSXGroupID"] == "g-7"
    assert h["type"] == "order-created"
    assert h["correlation-id"] == "c-1"
    assert h["persistent"] == "true"
    assert h["priority"] == "6"
    assert int(h["content-length"]) == len(text.body)

    h = binary.headers
    assert binary.body == BINARY_BODY
    assert int(h["content-length"]) == len(BINARY_BODY)
    assert h["kind"] == "blob"
    assert h["JMSXGroupID"] == "g-8"
    assert h["type"] == "blob"
    assert h["persistent"] == "false"
    assert "correlation-id" not in h


#: AMQP message-id / correlation-id -> the text a STOMP consumer sees (``NATIVE_MESSAGE_ID`` and
#: ``correlation-id``), as Artemis's AMQP-to-core conversion writes them (AMQPMessageIdHelper)
ID_CASES = [
    ("ID:order-1", "ID:order-1", "ID:order-1"),
    ("order-2", "ID:AMQP_NO_PREFIX:order-2", "order-2"),
    ("ID:AMQP_ULONG:7", "ID:AMQP_STRING:ID:AMQP_ULONG:7", "ID:AMQP_STRING:ID:AMQP_ULONG:7"),
    (ulong(42), "ID:AMQP_ULONG:42", "ID:AMQP_ULONG:42"),
    (
        uuid.UUID("12345678-9abc-def0-1234-56789abcdef0"),
        "ID:AMQP_UUID:12345678-9abc-def0-1234-56789abcdef0",
        "ID:AMQP_UUID:12345678-9abc-def0-1234-56789abcdef0",
    ),
    (b"\x01\xab\xff", "ID:AMQP_BINARY:01ABFF", "ID:AMQP_BINARY:01ABFF"),
]


def test_amqp_message_id_reaches_stomp_consumers_as_artemis_maps_it(interop, clients):
    amqp = clients.amqp(interop.amqp_url("dedicated"), "ids-sender")
    sender = amqp.create_sender("interop.ids")
    for n, (value, _, _) in enumerate(ID_CASES):
        sender.send(Message(id=value, correlation_id=value, body=f"m{n}"), timeout=TIMEOUT)
    conn, rec = clients.stomp(interop.stomp_address("dedicated"))
    conn.subscribe("/queue/interop.ids", id="sub", ack="client-individual")
    frames = rec.wait_messages(len(ID_CASES))
    assert [f.body for f in frames] == [f"m{n}".encode() for n in range(len(ID_CASES))]
    for frame, (_, native_id, correlation) in zip(frames, ID_CASES, strict=True):
        h = frame.headers
        assert h["NATIVE_MESSAGE_ID"] == native_id
        assert h["correlation-id"] == correlation
        # message-id is the broker's own id of the message, as for any STOMP consumer
        assert h["message-id"].isdigit()
        conn.ack(h["ack"], receipt=f"ack-{h['message-id']}")
        rec.wait_receipt(f"ack-{h['message-id']}")
    # An AMQP consumer still gets each id exactly as it was sent.
    native = amqp.create_sender("interop.ids-native")
    native.send(Message(id=ulong(9), correlation_id=b"\x00\x01", body="native"), timeout=TIMEOUT)
    receiver = amqp.create_receiver("interop.ids-native", credit=1)
    got = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert got.id == 9  # (proton reads a ulong id back as an int)
    assert bytes(got.correlation_id) == b"\x00\x01"


def test_a_typed_correlation_id_from_stomp_reaches_amqp_typed(interop, clients):
    """The way back, as Artemis's core-to-AMQP conversion reads the text forms."""
    conn, rec = clients.stomp(interop.stomp_address("dedicated"))
    for n, (_, _, correlation) in enumerate(ID_CASES):
        conn.send("/queue/interop.corr", f"c{n}", headers={"correlation-id": correlation})
    conn.send("/queue/interop.corr", "last", headers={"receipt": "sent"})
    rec.wait_receipt("sent")
    amqp = clients.amqp(interop.amqp_url("dedicated"), "corr-receiver")
    receiver = amqp.create_receiver("interop.corr", credit=10)
    for value, _, _ in ID_CASES:
        got = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        assert got.correlation_id == value
        if isinstance(value, (str, uuid.UUID)):  # (proton reads ulong as int, binary as memoryview)
            assert type(got.correlation_id) is type(value)
        assert str(got.id).startswith("ID:")


# --------------------------------------------------------------------------- a topic, both ways


@VIAS
def test_amqp_topic_message_fans_out_to_stomp_and_amqp_subscribers(interop, clients, via):
    conn, rec = clients.stomp(interop.stomp_address(via))
    conn.subscribe("/topic/interop.news", id="news", ack="auto", headers={"receipt": "subscribed"})
    rec.wait_receipt("subscribed")

    consumer = clients.amqp(interop.amqp_url(via), "news-reader")
    receiver = consumer.create_receiver("interop.news", credit=10, options=Capabilities("topic"))
    producer = clients.amqp(interop.amqp_url(via), "news-writer")
    sender = producer.create_sender("interop.news", options=Capabilities("topic"))
    for i in range(3):
        sender.send(Message(body=f"headline {i}", properties={"seq": i}, subject="news"), timeout=TIMEOUT)

    got = []
    for _ in range(3):
        got.append(receiver.receive(timeout=TIMEOUT))
        receiver.accept()
    assert [m.body for m in got] == [f"headline {i}" for i in range(3)]
    assert [m.properties["seq"] for m in got] == [0, 1, 2]

    frames = rec.wait_messages(3)
    assert [f.body for f in frames] == [f"headline {i}".encode() for i in range(3)]
    assert [f.headers["seq"] for f in frames] == ["0", "1", "2"]
    assert all(f.headers["destination"] == "/topic/interop.news" for f in frames)
    assert all(f.headers["type"] == "news" for f in frames)

    # The topic was never turned into a queue of that name (no ANYCAST routing).
    assert queue_count(interop.broker, "interop.news") is None


# --------------------------------------------------------------------------- one port, two protocols


def test_one_port_serves_stomp_and_amqp_clients_at_once(interop, clients):
    conn, rec = clients.stomp(interop.stomp_address("shared"))
    amqp = clients.amqp(interop.amqp_url("shared"), "one-port")
    receiver = amqp.create_receiver("oneport.in", credit=10)  # a session: listed in the status

    status = interop.broker.status()
    by_protocol = {c["protocol"]: c for c in status["connections"] if c["acceptor"] == "multi"}
    assert set(by_protocol) == {"STOMP", "AMQP"}, status["connections"]
    assert by_protocol["AMQP"]["client_id"] == "one-port"  # the container-id
    (multi,) = [a for a in status["acceptors"] if a["name"] == "multi"]
    assert multi["protocols"] == ["AMQP", "STOMP"] and multi["connections"] == 2

    # STOMP -> AMQP and AMQP -> STOMP on the same port, interleaved.
    conn.subscribe("/queue/oneport.out", id="out", ack="auto", headers={"receipt": "subscribed"})
    rec.wait_receipt("subscribed")
    sender = amqp.create_sender("oneport.out")
    for i in range(5):
        conn.send("/queue/oneport.in", f"to amqp {i}".encode(), headers={"i": str(i)})
        sender.send(Message(body=f"to stomp {i}", properties={"i": i}), timeout=TIMEOUT)
    got = []
    for _ in range(5):
        got.append(receiver.receive(timeout=TIMEOUT))
        receiver.accept()
    assert [m.body for m in got] == [f"to amqp {i}" for i in range(5)]
    assert [m.properties["i"] for m in got] == [str(i) for i in range(5)]
    frames = rec.wait_messages(5)
    assert [f.body for f in frames] == [f"to stomp {i}".encode() for i in range(5)]
    assert [f.headers["i"] for f in frames] == [str(i) for i in range(5)]


def test_garbage_on_the_shared_port_is_refused_and_logged(interop, clients):
    import socket

    with socket.create_connection((interop.broker.host, interop.multi_port), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: junction\r\n\r\n")
        sock.settimeout(TIMEOUT)
        assert sock.recv(1024) == b""  # closed without an answer
    wait_for(
        lambda: "sent an unknown protocol" in interop.broker.log_text(),
        TIMEOUT,
        what="the acceptor's log line about the garbage",
    )
    # The port still serves both protocols.
    conn, rec = clients.stomp(interop.stomp_address("shared"))
    amqp = clients.amqp(interop.amqp_url("shared"), "after-garbage")
    sender = amqp.create_sender("after.garbage")
    sender.send(Message(body="fine"), timeout=TIMEOUT)
    conn.subscribe("/queue/after.garbage", id="s", ack="auto")
    (frame,) = rec.wait_messages(1)
    assert frame.body == b"fine"
