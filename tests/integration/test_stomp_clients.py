"""Process-level STOMP tests: real stomp.py 9 clients against a ``junction run`` process.

Every test starts its own broker through :mod:`tests.harness` (the
``broker_factory`` fixture), with the acceptor's ``anycastPrefix=/queue/`` and
``multicastPrefix=/topic/`` as an Artemis STOMP acceptor is usually set up,
and talks to it with ``stomp.Connection10`` / ``Connection11`` /
``Connection12`` (or a raw socket where a client must misbehave).

Synchronisation is never a sleep: a :class:`Recorder` listener appends every
frame it gets under a :class:`threading.Condition` and tests wait on
predicates over what it recorded, with a deadline; the management API is
polled with :func:`~tests.harness.wait_for`.  "Nothing else arrived" is
proved by ordering, not by waiting: a marker message sent after the thing
that must not be delivered arrives first (a queue is FIFO for one consumer).
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import stomp
from stomp.exception import ConnectFailedException

from tests.harness import BrokerProcess, queue_status, wait_for, wait_queue

pytestmark = pytest.mark.timeout(60)  # pytest-timeout: a hung client fails one test

VERSIONS = ("1.0", "1.1", "1.2")
ESCAPING_VERSIONS = ("1.1", "1.2")
_CONNECTION_CLASSES = {
    "1.0": stomp.Connection10,
    "1.1": stomp.Connection11,
    "1.2": stomp.Connection12,
}
#: Seconds any single expected event may take.
TIMEOUT = 5.0

PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
DLQ_ADDRESS_XML = (
    '<addresses><address name="DLQ"><anycast><queue name="DLQ"/></anycast></address></addresses>'
)


def dlq_settings(max_delivery_attempts: int) -> str:
    return (
        '<address-setting match="#"><dead-letter-address>DLQ</dead-letter-address>'
        f"<max-delivery-attempts>{max_delivery_attempts}</max-delivery-attempts>"
        "</address-setting>"
    )


_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


# --------------------------------------------------------------------------- listener


class Recorder(stomp.ConnectionListener):
    """Records every frame a connection receives; tests wait on predicates over it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.connected: list = []
        self.messages: list = []
        self.receipts: list[str] = []
        self.errors: list = []
        self.heartbeats = 0
        self.disconnects = 0

    def _add(self, update: Callable[[], None]) -> None:
        with self.cond:
            update()
            self.cond.notify_all()

    def on_connected(self, frame) -> None:
        self._add(lambda: self.connected.append(frame))

    def on_message(self, frame) -> None:
        self._add(lambda: self.messages.append(frame))

    def on_receipt(self, frame) -> None:
        self._add(lambda: self.receipts.append(frame.headers.get("receipt-id")))

    def on_error(self, frame) -> None:
        self._add(lambda: self.errors.append(frame))

    def on_heartbeat(self) -> None:
        def bump() -> None:
            self.heartbeats += 1

        self._add(bump)

    def on_disconnected(self) -> None:
        def bump() -> None:
            self.disconnects += 1

        self._add(bump)

    def wait(
        self, predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = "condition"
    ):
        """Wait (on the condition, not polling) until ``predicate()`` is truthy; return it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"timed out after {timeout:g} s waiting for {what}; "
                        f"messages={[m.body for m in self.messages]!r} "
                        f"receipts={self.receipts!r} errors={[e.headers for e in self.errors]!r} "
                        f"disconnects={self.disconnects}"
                    )
                self.cond.wait(remaining)

    def wait_messages(self, n: int, timeout: float = TIMEOUT) -> list:
        """The first ``n`` MESSAGE frames (waits until there are that many)."""
        self.wait(lambda: len(self.messages) >= n, timeout, f"{n} messages")
        with self.cond:
            return list(self.messages[:n])

    def wait_receipt(self, receipt: str, timeout: float = TIMEOUT) -> None:
        self.wait(lambda: receipt in self.receipts, timeout, f"RECEIPT {receipt}")

    def wait_error(self, timeout: float = TIMEOUT):
        self.wait(lambda: self.errors, timeout, "an ERROR frame")
        return self.errors[0]

    def wait_disconnected(self, timeout: float = TIMEOUT) -> None:
        self.wait(lambda: self.disconnects, timeout, "the connection to close")

    def bodies(self) -> list:
        with self.cond:
            return [m.body for m in self.messages]


# --------------------------------------------------------------------------- client wrapper


class Client:
    """A stomp.py connection of one version plus its :class:`Recorder`.

    Every request that can carry a receipt does (unless told otherwise), and
    the call returns once the RECEIPT is in: the broker has processed it.
    """

    def __init__(
        self,
        broker: BrokerProcess,
        version: str,
        *,
        heartbeats: tuple[int, int] = (0, 0),
        auto_decode: bool = True,
    ) -> None:
        self.version = version
        kwargs = {} if version == "1.0" else {"heartbeats": heartbeats}
        self.conn = _CONNECTION_CLASSES[version](
            [broker.stomp_address], auto_decode=auto_decode, reconnect_attempts_max=1, **kwargs
        )
        self.rec = Recorder()
        self.conn.set_listener("recorder", self.rec)

    def connect(self, login: str | None = None, passcode: str | None = None, **headers) -> Client:
        self.conn.connect(login, passcode, wait=True, headers=headers or None)
        # stomp.py marks the transport connected before it runs the listeners'
        # on_connected: wait until the Recorder has the CONNECTED frame too
        self.rec.wait(lambda: self.rec.connected, what="CONNECTED at the recorder")
        return self

    @property
    def connected(self) -> bool:
        return self.conn.is_connected()

    def send(
        self,
        destination: str,
        body,
        *,
        receipt: bool = True,
        content_type: str | None = None,
        **headers,
    ) -> None:
        rid = new_id("send") if receipt else None
        if rid:
            headers["receipt"] = rid
        self.conn.send(destination, body, content_type=content_type, headers=headers)
        if rid:
            self.rec.wait_receipt(rid)

    def subscribe(self, destination: str, sub_id: str, ack: str = "auto", **headers) -> None:
        rid = new_id("sub")
        headers["receipt"] = rid
        self.conn.subscribe(destination, sub_id, ack=ack, headers=headers)
        self.rec.wait_receipt(rid)

    def ack(self, msg, transaction: str | None = None) -> None:
        """ACK ``msg`` the way this version spells it; waits for the receipt."""
        rid = new_id("ack")
        h = msg.headers
        if self.version == "1.0":
            self.conn.ack(h["message-id"], transaction=transaction, receipt=rid)
        elif self.version == "1.1":
            self.conn.ack(h["message-id"], h["subscription"], transaction=transaction, receipt=rid)
        else:
            self.conn.ack(h["ack"], transaction=transaction, receipt=rid)
        self.rec.wait_receipt(rid)

    def nack(self, msg) -> None:
        """NACK ``msg``: 1.1 by message-id + subscription, 1.2 by the ``ack`` header."""
        rid = new_id("nack")
        h = msg.headers
        if self.version == "1.1":
            self.conn.nack(h["message-id"], h["subscription"], receipt=rid)
        elif self.version == "1.2":
            self.conn.nack(h["ack"], receipt=rid)
        else:
            raise AssertionError("STOMP 1.0 has no NACK")
        self.rec.wait_receipt(rid)

    def begin(self) -> str:
        rid = new_id("begin")
        tx = self.conn.begin(new_id("tx"), headers={"receipt": rid})
        self.rec.wait_receipt(rid)
        return tx

    def commit(self, tx: str) -> None:
        rid = new_id("commit")
        self.conn.commit(tx, headers={"receipt": rid})
        self.rec.wait_receipt(rid)

    def abort(self, tx: str) -> None:
        rid = new_id("abort")
        self.conn.abort(tx, headers={"receipt": rid})
        self.rec.wait_receipt(rid)

    def disconnect(self) -> None:
        """DISCONNECT with a receipt; returns once the broker confirmed it and the socket closed."""
        if not self.conn.is_connected():
            return
        rid = new_id("bye")
        self.conn.disconnect(receipt=rid)
        self.rec.wait_receipt(rid)

    def close_quietly(self) -> None:
        try:
            if self.conn.is_connected():
                self.conn.disconnect(receipt=new_id("bye"))
        except Exception:
            pass
        try:
            self.conn.transport.disconnect_socket()
        except Exception:
            pass


@pytest.fixture
def clients() -> Iterator[Callable[..., Client]]:
    """``clients(broker, version, **Client_kwargs)``: a Client, closed at teardown."""
    made: list[Client] = []

    def make(broker: BrokerProcess, version: str, **kwargs) -> Client:
        c = Client(broker, version, **kwargs)
        made.append(c)
        return c

    yield make
    for c in reversed(made):
        c.close_quietly()


@pytest.fixture
def make_broker(broker_factory) -> Callable[..., BrokerProcess]:
    """A started broker with the STOMP prefixes and a DLQ; keyword arguments override."""

    def make(name: str = "stomp", max_delivery_attempts: int = 10, **kwargs) -> BrokerProcess:
        kwargs.setdefault("stomp_acceptor_params", PREFIXES)
        kwargs.setdefault("address_settings_xml", dlq_settings(max_delivery_attempts))
        kwargs["extra_core_xml"] = DLQ_ADDRESS_XML + kwargs.get("extra_core_xml", "")
        return broker_factory(name, **kwargs).start()

    return make


@pytest.fixture
def sbroker(make_broker) -> BrokerProcess:
    return make_broker()


def well_behaved_roundtrip(client: Client, destination: str, body: str) -> None:
    """``client`` (subscribed to ``destination`` in auto mode) sends ``body`` and gets it back."""
    before = len(client.rec.messages)
    client.send(destination, body)
    got = client.rec.wait_messages(before + 1)[before]
    assert got.body == body


# --------------------------------------------------------------------------- raw socket client


class RawStomp:
    """A plain socket speaking hand-written STOMP, for clients that misbehave."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(broker.stomp_address, timeout=TIMEOUT)
        self.buf = b""
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("raw STOMP client: nothing more arrived in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_frame(self, timeout: float = TIMEOUT) -> tuple[str, dict, bytes]:
        """The next frame (heart-beat EOLs skipped) as ``(command, headers, body)``."""
        deadline = time.monotonic() + timeout
        while True:
            self.buf = self.buf.lstrip(b"\r\n")
            end = self.buf.find(b"\0")
            if end >= 0:
                raw, self.buf = self.buf[:end], self.buf[end + 1 :]
                head, _, body = raw.partition(b"\n\n")
                lines = head.decode("utf-8").split("\n")
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers.setdefault(k, v)
                return lines[0], headers, body
            if not self._fill(deadline):
                raise EOFError(f"connection closed; unparsed bytes {self.buf!r}")

    def wait_closed(self, timeout: float = TIMEOUT) -> None:
        """Read (and keep) everything until the broker closes the connection."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            self._fill(deadline)

    def connect(self, version: str, heart_beat: str = "0,0") -> dict:
        self.send(
            f"CONNECT\naccept-version:{version}\nhost:localhost\nheart-beat:{heart_beat}\n\n\0".encode()
        )
        command, headers, _ = self.read_frame()
        assert command == "CONNECTED", (command, headers)
        return headers

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_clients() -> Iterator[Callable[[BrokerProcess], RawStomp]]:
    made: list[RawStomp] = []

    def make(broker: BrokerProcess) -> RawStomp:
        r = RawStomp(broker)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


# =========================================================================== tests


# --------------------------------------------------------------------------- connect, receipts


@pytest.mark.parametrize("version", VERSIONS)
def test_connect_wait_and_receipts(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    assert c.connected
    connected = c.rec.connected[0]
    assert connected.headers["version"] == version
    assert connected.headers.get("session")

    # a RECEIPT for SUBSCRIBE, for SEND and for DISCONNECT, each with its own id
    c.subscribe("/queue/receipts", "s1")
    c.send("/queue/receipts", "hello")
    [msg] = c.rec.wait_messages(1)
    assert msg.body == "hello"
    assert msg.headers["destination"] == "/queue/receipts"
    assert msg.headers["subscription"] == "s1"
    assert msg.headers["message-id"]
    c.disconnect()
    assert len(c.rec.receipts) == 3 and len(set(c.rec.receipts)) == 3
    assert not c.rec.errors


@pytest.mark.parametrize("version", VERSIONS)
def test_send_receipt_means_message_is_queued(sbroker, clients, version):
    """A SEND's RECEIPT comes after the message is on its queue (management agrees)."""
    c = clients(sbroker, version).connect()
    # a queue exists before the first send only once something made it: subscribe-free
    # anycast send auto-creates address and queue
    for i in range(3):
        c.send("/queue/counted", f"m{i}")
    q = queue_status(sbroker, "counted")
    assert q is not None, sbroker.status()["queues"]
    assert q["routing_type"] == "ANYCAST"
    assert q["message_count"] == 3
    assert q["messages_added"] == 3


@pytest.mark.parametrize("version", VERSIONS)
def test_queue_each_message_to_one_consumer_round_robin(sbroker, clients, version):
    a = clients(sbroker, version).connect()
    b = clients(sbroker, version).connect()
    a.subscribe("/queue/rr", "sa")
    b.subscribe("/queue/rr", "sb")
    producer = clients(sbroker, version).connect()
    sent = [f"m{i}" for i in range(10)]
    for body in sent:
        producer.send("/queue/rr", body)

    def all_arrived():
        return len(a.rec.messages) + len(b.rec.messages) >= len(sent)

    # the predicate spans two recorders, so poll it (either condition alone may never fire)
    wait_for(all_arrived, TIMEOUT, what="all 10 messages across both consumers")
    got_a, got_b = a.rec.bodies(), b.rec.bodies()
    # each message to exactly one consumer, none lost, none duplicated
    assert sorted(got_a + got_b) == sorted(sent)
    assert not set(got_a) & set(got_b)
    # round robin between two equal consumers: an even split, each in send order
    assert len(got_a) == len(got_b) == 5, (got_a, got_b)
    assert got_a == [m for m in sent if m in got_a]
    assert got_b == [m for m in sent if m in got_b]
    assert {m.headers["destination"] for m in a.rec.messages + b.rec.messages} == {"/queue/rr"}


@pytest.mark.parametrize("version", VERSIONS)
def test_topic_every_subscriber_gets_every_message(sbroker, clients, version):
    subs = [clients(sbroker, version).connect() for _ in range(3)]
    for i, s in enumerate(subs):
        s.subscribe("/topic/news", f"t{i}")
    producer = clients(sbroker, version).connect()
    sent = [f"n{i}" for i in range(5)]
    for body in sent:
        producer.send("/topic/news", body)
    for s in subs:
        msgs = s.rec.wait_messages(len(sent))
        assert [m.body for m in msgs] == sent
        assert {m.headers["destination"] for m in msgs} == {"/topic/news"}
    # one subscription queue per subscriber on a multicast address
    queues = [q for q in sbroker.status()["queues"] if q["address"] == "news"]
    assert len(queues) == 3
    assert {q["routing_type"] for q in queues} == {"MULTICAST"}


@pytest.mark.parametrize("version", VERSIONS)
def test_topic_subscription_ends_with_its_connection(sbroker, clients, version):
    """A non-durable topic subscription's queue goes away with it: unacked messages are not kept."""
    sub = clients(sbroker, version).connect()
    sub.subscribe("/topic/gone", "s", ack="client")
    producer = clients(sbroker, version).connect()
    producer.send("/topic/gone", "unacked")
    sub.rec.wait_messages(1)
    assert len([q for q in sbroker.status()["queues"] if q["address"] == "gone"]) == 1
    sub.disconnect()
    wait_for(
        lambda: not [q for q in sbroker.status()["queues"] if q["address"] == "gone"],
        TIMEOUT,
        what="the subscription queue to be deleted",
    )
    late = clients(sbroker, version).connect()
    late.subscribe("/topic/gone", "s")
    producer.send("/topic/gone", "marker")
    assert [m.body for m in late.rec.wait_messages(1)] == ["marker"]


@pytest.mark.parametrize("version", VERSIONS)
def test_topic_wildcard_subscription(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    c.subscribe("/topic/news.*", "one-word")
    c.subscribe("/topic/news.#", "any-words")
    producer = clients(sbroker, version).connect()
    producer.send("/topic/news.sport", "sport")
    producer.send("/topic/news.sport.football", "football")
    producer.send("/topic/weather", "rain")
    producer.send("/topic/news.politics", "politics")
    msgs = c.rec.wait_messages(5)
    by_sub: dict[str, list] = {}
    for m in msgs:
        by_sub.setdefault(m.headers["subscription"], []).append(m)
    assert [m.body for m in by_sub["one-word"]] == ["sport", "politics"]
    assert [m.body for m in by_sub["any-words"]] == ["sport", "football", "politics"]
    # the MESSAGE names the concrete destination, not the wildcard
    assert [m.headers["destination"] for m in by_sub["any-words"]] == [
        "/topic/news.sport",
        "/topic/news.sport.football",
        "/topic/news.politics",
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_body(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    c.subscribe("/queue/empty", "s")
    c.send("/queue/empty", "")
    c.send("/queue/empty", "", **{"content-length": "0"})
    msgs = c.rec.wait_messages(2)
    assert [m.body for m in msgs] == ["", ""]


def test_crlf_line_endings_1_2(sbroker, clients, raw_clients):
    consumer = clients(sbroker, "1.2").connect()
    consumer.subscribe("/queue/crlf", "s")
    raw = raw_clients(sbroker)
    raw.send(b"CONNECT\r\naccept-version:1.2\r\nhost:x\r\n\r\n\0")
    assert raw.read_frame()[0] == "CONNECTED"
    raw.send(b"SEND\r\ndestination:/queue/crlf\r\nx-h:v\r\nreceipt:r\r\n\r\nbody\0")
    command, headers, _ = raw.read_frame()
    assert command == "RECEIPT", (command, headers)
    [msg] = consumer.rec.wait_messages(1)
    assert msg.body == "body"
    assert msg.headers["x-h"] == "v"  # no stray CR in the value


@pytest.mark.parametrize("version", VERSIONS)
def test_repeated_header_first_value_wins(sbroker, clients, raw_clients, version):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/rep", "s")
    raw = raw_clients(sbroker)
    raw.connect(version)
    raw.send(b"SEND\ndestination:/queue/rep\nfoo:first\nfoo:second\nreceipt:r\n\nbody\0")
    assert raw.read_frame()[0] == "RECEIPT"
    [msg] = consumer.rec.wait_messages(1)
    assert msg.headers["foo"] == "first"


# --------------------------------------------------------------------------- transactions


@pytest.mark.parametrize("version", VERSIONS)
def test_transaction_commit_delivers(sbroker, clients, version):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/tx", "s")
    producer = clients(sbroker, version).connect()
    tx = producer.begin()
    for i in range(3):
        producer.send("/queue/tx", f"tx{i}", transaction=tx)
    # not delivered before COMMIT: a later non-transactional message overtakes them
    producer.send("/queue/tx", "marker")
    assert consumer.rec.wait_messages(1)[0].body == "marker"
    assert consumer.rec.bodies() == ["marker"]
    producer.commit(tx)
    msgs = consumer.rec.wait_messages(4)
    assert [m.body for m in msgs] == ["marker", "tx0", "tx1", "tx2"]


@pytest.mark.parametrize("version", VERSIONS)
def test_transaction_abort_discards(sbroker, clients, version):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/txa", "s")
    producer = clients(sbroker, version).connect()
    tx = producer.begin()
    producer.send("/queue/txa", "doomed-1", transaction=tx)
    producer.send("/queue/txa", "doomed-2", transaction=tx)
    producer.abort(tx)
    producer.send("/queue/txa", "after-abort")
    assert consumer.rec.wait_messages(1)[0].body == "after-abort"
    # a second transaction on the same connection works and delivers only its own message
    tx2 = producer.begin()
    producer.send("/queue/txa", "committed", transaction=tx2)
    producer.commit(tx2)
    assert [m.body for m in consumer.rec.wait_messages(2)] == ["after-abort", "committed"]
    wait_queue(sbroker, "txa", message_count=0, messages_added=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_ack_in_aborted_transaction_is_redelivered(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    producer.send("/queue/txack", "payload")
    consumer = clients(sbroker, version).connect()
    ack_mode = "client" if version == "1.0" else "client-individual"
    consumer.subscribe("/queue/txack", "s", ack=ack_mode)
    [first] = consumer.rec.wait_messages(1)
    assert "redelivered" not in first.headers
    tx = consumer.begin()
    consumer.ack(first, transaction=tx)
    consumer.abort(tx)
    # the rolled-back ack puts the message back: it comes again, marked redelivered
    second = consumer.rec.wait_messages(2)[1]
    assert second.body == "payload"
    assert second.headers.get("redelivered") == "true"
    consumer.ack(second)
    wait_queue(sbroker, "txack", message_count=0, delivering_count=0, messages_acknowledged=1)


@pytest.mark.parametrize("version", VERSIONS)
def test_ack_in_committed_transaction_consumes(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    producer.send("/queue/txack2", "payload")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/txack2", "s", ack="client")
    [msg] = consumer.rec.wait_messages(1)
    tx = consumer.begin()
    consumer.ack(msg, transaction=tx)
    wait_queue(sbroker, "txack2", message_count=1)  # not yet: the ack is in the transaction
    consumer.commit(tx)
    wait_queue(sbroker, "txack2", message_count=0, messages_acknowledged=1)
    consumer.disconnect()
    # nothing comes back to a new connection
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/txack2", "s2")
    producer.send("/queue/txack2", "marker")
    assert [m.body for m in again.rec.wait_messages(1)] == ["marker"]


# --------------------------------------------------------------------------- ack modes


@pytest.mark.parametrize("version", VERSIONS)
def test_auto_ack_consumes_on_delivery(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for i in range(4):
        producer.send("/queue/auto", f"a{i}")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/auto", "s", ack="auto")
    msgs = consumer.rec.wait_messages(4)
    assert [m.body for m in msgs] == ["a0", "a1", "a2", "a3"]
    # auto mode: MESSAGE frames carry no ack header (1.2) and need no ACK
    assert all("ack" not in m.headers for m in msgs)
    wait_queue(sbroker, "auto", message_count=0, delivering_count=0, messages_acknowledged=4)
    consumer.disconnect()
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/auto", "s")
    producer.send("/queue/auto", "marker")
    assert [m.body for m in again.rec.wait_messages(1)] == ["marker"]


@pytest.mark.parametrize("version", VERSIONS)
def test_client_ack_is_cumulative_and_unacked_are_redelivered(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for i in range(1, 6):
        producer.send("/queue/cum", f"c{i}")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/cum", "s", ack="client")
    msgs = consumer.rec.wait_messages(5)
    assert [m.body for m in msgs] == ["c1", "c2", "c3", "c4", "c5"]
    if version == "1.2":
        assert all(m.headers.get("ack") for m in msgs)
    consumer.ack(msgs[2])  # acks c1, c2 and c3
    wait_queue(sbroker, "cum", message_count=2, delivering_count=2, messages_acknowledged=3)
    consumer.disconnect()
    # c4 and c5 were never acked: they go to the next consumer, marked redelivered
    wait_queue(sbroker, "cum", message_count=2, delivering_count=0, consumer_count=0)
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/cum", "s", ack="client")
    redelivered = again.rec.wait_messages(2)
    assert [m.body for m in redelivered] == ["c4", "c5"]
    assert all(m.headers.get("redelivered") == "true" for m in redelivered)
    producer.send("/queue/cum", "marker")
    assert again.rec.wait_messages(3)[2].body == "marker"
    again.ack(again.rec.messages[2])
    wait_queue(sbroker, "cum", message_count=0, messages_acknowledged=6)


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_client_individual_ack_acks_only_that_message(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for i in range(1, 6):
        producer.send("/queue/ind", f"i{i}")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/ind", "s", ack="client-individual")
    msgs = consumer.rec.wait_messages(5)
    consumer.ack(msgs[1])  # i2
    consumer.ack(msgs[3])  # i4
    wait_queue(sbroker, "ind", message_count=3, delivering_count=3, messages_acknowledged=2)
    consumer.disconnect()
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/ind", "s", ack="client-individual")
    redelivered = again.rec.wait_messages(3)
    assert [m.body for m in redelivered] == ["i1", "i3", "i5"]
    assert all(m.headers.get("redelivered") == "true" for m in redelivered)


@pytest.mark.parametrize("version", VERSIONS)
def test_ack_of_unknown_message_is_an_error(sbroker, clients, version):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/unk", "s", ack="client")
    bystander = clients(sbroker, version).connect()
    bystander.subscribe("/queue/bystander", "b")
    well_behaved_roundtrip(bystander, "/queue/bystander", "before")
    if version == "1.0":
        consumer.conn.ack("no-such-id")
    elif version == "1.1":
        consumer.conn.ack("no-such-id", "s")
    else:
        consumer.conn.ack("no-such-id")
    err = consumer.rec.wait_error()
    assert "no-such-id" in err.headers["message"]
    consumer.rec.wait_disconnected()
    well_behaved_roundtrip(bystander, "/queue/bystander", "after")


@pytest.mark.parametrize("version", VERSIONS)
def test_acked_messages_stay_acked_after_kill_9(make_broker, clients, version):
    """An ACK's RECEIPT means the ack is journalled: a crash right after cannot undo it."""
    broker = make_broker()
    producer = clients(broker, version).connect()
    for i in range(5):
        producer.send("/queue/crash", f"d{i}", persistent="true")
    consumer = clients(broker, version).connect()
    ack_mode = "client" if version == "1.0" else "client-individual"
    consumer.subscribe("/queue/crash", "s", ack=ack_mode)
    msgs = consumer.rec.wait_messages(5)
    if version == "1.0":
        consumer.ack(msgs[1])  # cumulative: d0, d1
        expected = ["d2", "d3", "d4"]
    else:
        consumer.ack(msgs[0])
        consumer.ack(msgs[3])
        expected = ["d1", "d2", "d4"]
    broker.restart(kill=True)
    wait_queue(broker, "crash", message_count=3)
    again = clients(broker, version).connect()
    again.subscribe("/queue/crash", "s")
    assert [m.body for m in again.rec.wait_messages(3)] == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_unsubscribe_stops_delivery(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    c.subscribe("/queue/unsub", "s")
    well_behaved_roundtrip(c, "/queue/unsub", "first")
    rid = new_id("unsub")
    if version == "1.0":
        c.conn.unsubscribe(id="s", headers={"receipt": rid})
    else:
        c.conn.unsubscribe("s", headers={"receipt": rid})
    c.rec.wait_receipt(rid)
    c.send("/queue/unsub", "kept")
    wait_queue(sbroker, "unsub", message_count=1, consumer_count=0)
    c.subscribe("/queue/unsub", "s2")
    [_, kept] = c.rec.wait_messages(2)
    assert kept.body == "kept" and kept.headers["subscription"] == "s2"


@pytest.mark.parametrize("version", VERSIONS)
def test_two_subscriptions_on_one_connection(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    c.subscribe("/topic/dup", "one")
    c.subscribe("/topic/dup", "two")
    c.send("/topic/dup", "fan")
    msgs = c.rec.wait_messages(2)
    assert sorted(m.headers["subscription"] for m in msgs) == ["one", "two"]
    assert {m.body for m in msgs} == {"fan"}


@pytest.mark.parametrize("version", VERSIONS)
def test_expired_message_is_not_delivered(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    now_ms = int(time.time() * 1000)
    producer.send("/queue/exp", "stale", expires=str(now_ms - 60_000))
    producer.send("/queue/exp", "fresh", expires=str(now_ms + 600_000))
    producer.send("/queue/exp", "forever", expires="0")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/exp", "s")
    msgs = consumer.rec.wait_messages(2)
    assert [m.body for m in msgs] == ["fresh", "forever"]
    assert msgs[0].headers["expires"] == str(now_ms + 600_000)
    wait_queue(sbroker, "exp", message_count=0, messages_expired=1)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("destination", ["/queue/burst", "/topic/burst"])
def test_burst_without_receipts_arrives_complete_and_in_order(
    sbroker, clients, version, destination
):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe(destination, "s")
    producer = clients(sbroker, version).connect()
    n = 2000
    for i in range(n - 1):
        producer.send(destination, f"b{i}", receipt=False)
    producer.send(destination, f"b{n - 1}")  # its receipt orders after all the others
    msgs = consumer.rec.wait_messages(n, timeout=20.0)
    assert [m.body for m in msgs] == [f"b{i}" for i in range(n)]


@pytest.mark.parametrize("version", VERSIONS)
def test_client_ack_is_cumulative_per_subscription_only(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    producer.send("/queue/ca", "a1")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/ca", "sa", ack="client")
    consumer.subscribe("/queue/cb", "sb", ack="client")
    consumer.rec.wait_messages(1)
    producer.send("/queue/cb", "b1")
    consumer.rec.wait_messages(2)
    producer.send("/queue/ca", "a2")
    msgs = consumer.rec.wait_messages(3)
    assert [m.body for m in msgs] == ["a1", "b1", "a2"]
    consumer.ack(msgs[2])  # a1 and a2; b1 belongs to another subscription
    wait_queue(sbroker, "ca", message_count=0)
    wait_queue(sbroker, "cb", message_count=1, delivering_count=1)
    consumer.disconnect()
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/cb", "sb")
    [b1] = again.rec.wait_messages(1)
    assert b1.body == "b1" and b1.headers.get("redelivered") == "true"


@pytest.mark.parametrize("version", VERSIONS)
def test_unacked_messages_of_a_dropped_connection_are_redelivered(
    sbroker, clients, raw_clients, version
):
    producer = clients(sbroker, version).connect()
    producer.send("/queue/drop", "m1")
    producer.send("/queue/drop", "m2")
    raw = raw_clients(sbroker)
    raw.connect(version)
    raw.send(b"SUBSCRIBE\nid:s\ndestination:/queue/drop\nack:client\n\n\0")
    assert raw.read_frame()[2] == b"m1"
    assert raw.read_frame()[2] == b"m2"
    raw.close()  # no DISCONNECT, no ACK: the socket just goes away
    wait_queue(sbroker, "drop", consumer_count=0, delivering_count=0, message_count=2)
    again = clients(sbroker, version).connect()
    again.subscribe("/queue/drop", "s")
    msgs = again.rec.wait_messages(2)
    assert [m.body for m in msgs] == ["m1", "m2"]
    assert all(m.headers.get("redelivered") == "true" for m in msgs)


@pytest.mark.parametrize("version", VERSIONS)
def test_higher_priority_is_delivered_first(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for body, priority in [("low", "1"), ("normal", "4"), ("urgent", "9"), ("high", "7")]:
        producer.send("/queue/prio", body, priority=priority)
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/prio", "s")
    msgs = consumer.rec.wait_messages(4)
    assert [m.body for m in msgs] == ["urgent", "high", "normal", "low"]
    assert [m.headers["priority"] for m in msgs] == ["9", "7", "4", "1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_trickled_byte_by_byte(sbroker, clients, raw_clients, version):
    """A frame split across many TCP segments (NULs in the body) is reassembled."""
    consumer = clients(sbroker, version, auto_decode=False).connect()
    consumer.subscribe("/queue/trickle", "s")
    raw = raw_clients(sbroker)
    raw.connect(version)
    raw.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = b"\0a\0\n\n\0" + bytes(range(256))
    frame = (
        b"SEND\ndestination:/queue/trickle\nreceipt:t1\ncontent-length:"
        + str(len(body)).encode()
        + b"\n\n"
        + body
        + b"\0"
    )
    for i in range(len(frame)):
        raw.send(frame[i : i + 1])
    command, headers, _ = raw.read_frame()
    assert (command, headers.get("receipt-id")) == ("RECEIPT", "t1")
    [msg] = consumer.rec.wait_messages(1)
    assert msg.body == body


@pytest.mark.parametrize("version", VERSIONS)
def test_pipelined_frames_in_one_write(sbroker, clients, raw_clients, version):
    """CONNECT..DISCONNECT in one TCP write: every receipt comes, in order, nothing is lost."""
    raw = raw_clients(sbroker)
    frames = [
        f"CONNECT\naccept-version:{version}\nhost:x\n\n\0",
        "SUBSCRIBE\nid:s\ndestination:/queue/pipe\nreceipt:r-sub\n\n\0",
        "SEND\ndestination:/queue/pipe\n\none\0",
        "SEND\ndestination:/queue/pipe\n\ntwo\0",
        "SEND\ndestination:/queue/pipe\nreceipt:r-send\n\nthree\0",
        "DISCONNECT\nreceipt:r-bye\n\n\0",
    ]
    raw.send("".join(frames).encode())
    got = []
    while True:
        try:
            got.append(raw.read_frame())
        except EOFError:
            break
    commands = [f[0] for f in got]
    assert commands[0] == "CONNECTED", got
    receipts = [f[1]["receipt-id"] for f in got if f[0] == "RECEIPT"]
    assert receipts == ["r-sub", "r-send", "r-bye"], got
    assert "ERROR" not in commands, got
    assert commands[-1] == "RECEIPT", got  # the DISCONNECT receipt is the last frame
    delivered = [f[2] for f in got if f[0] == "MESSAGE"]
    # auto-ack MESSAGEs the client got are consumed; the rest must still be queued
    assert delivered == [b"one", b"two", b"three"][: len(delivered)]
    wait_queue(sbroker, "pipe", message_count=3 - len(delivered), consumer_count=0)
    if len(delivered) < 3:
        c = clients(sbroker, version).connect()
        c.subscribe("/queue/pipe", "s")
        rest = c.rec.wait_messages(3 - len(delivered))
        assert [m.body for m in rest] == ["one", "two", "three"][len(delivered) :]


# --------------------------------------------------------------------------- NACK, DLQ


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_nack_redelivers_then_dead_letters(make_broker, clients, version):
    broker = make_broker(max_delivery_attempts=2)
    producer = clients(broker, version).connect()
    producer.send("/queue/work", "poison", **{"x-tag": "p1"})
    consumer = clients(broker, version).connect()
    consumer.subscribe("/queue/work", "s", ack="client-individual")
    [first] = consumer.rec.wait_messages(1)
    consumer.nack(first)
    second = consumer.rec.wait_messages(2)[1]
    assert second.body == "poison"
    assert second.headers.get("redelivered") == "true"
    consumer.nack(second)  # delivery attempt 2 of 2: dead-lettered
    wait_queue(broker, "DLQ", message_count=1)
    wait_queue(broker, "work", message_count=0, delivering_count=0)
    assert broker.status()["messages_dead_lettered"] == 1

    # not delivered a third time: the marker is next on the queue
    producer.send("/queue/work", "marker")
    assert consumer.rec.wait_messages(3)[2].body == "marker"

    dlq = clients(broker, version).connect()
    dlq.subscribe("/queue/DLQ", "d")
    [dead] = dlq.rec.wait_messages(1)
    assert dead.body == "poison"
    assert dead.headers["_AMQ_ORIG_ADDRESS"] == "work"
    assert dead.headers["x-tag"] == "p1"


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_client_mode_nack_is_cumulative_and_keeps_order(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for i in range(1, 4):
        producer.send("/queue/nackc", f"k{i}")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/nackc", "s", ack="client")
    msgs = consumer.rec.wait_messages(3)
    consumer.nack(msgs[1])  # k1 and k2 back to the queue, in order
    again = consumer.rec.wait_messages(5)[3:]
    assert [m.body for m in again] == ["k1", "k2"]
    consumer.ack(msgs[2])  # cumulative: everything delivered before k3 (k1, k2), and k3
    wait_queue(sbroker, "nackc", messages_acknowledged=1)


def test_nack_is_not_stomp_1_0(sbroker, clients):
    c = clients(sbroker, "1.0").connect()
    c.subscribe("/queue/n10", "s", ack="client")
    c.send("/queue/n10", "x")
    [msg] = c.rec.wait_messages(1)
    c.conn.send_frame("NACK", {"message-id": msg.headers["message-id"]})
    err = c.rec.wait_error()
    assert "NACK" in err.headers["message"]
    c.rec.wait_disconnected()


# --------------------------------------------------------------------------- message-id


@pytest.mark.parametrize("version", VERSIONS)
def test_message_id_is_the_same_across_a_redelivery_and_a_reconnect(sbroker, clients, version):
    """The message's own id, as Artemis: not a number the connection gave its delivery."""
    producer = clients(sbroker, version).connect()
    producer.send("/queue/mid", "first")
    producer.send("/queue/mid", "second")
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/mid", "s", ack="client-individual" if version != "1.0" else "client")
    first, second = consumer.rec.wait_messages(2)
    ids = {m.body: m.headers["message-id"] for m in (first, second)}
    assert ids["first"] != ids["second"]
    if version != "1.0":
        consumer.nack(first)  # redelivered on the same connection
        again = consumer.rec.wait_messages(3)[2]
        assert again.body == "first" and again.headers["redelivered"] == "true"
        assert again.headers["message-id"] == ids["first"]
        if version == "1.2":
            assert again.headers["ack"] == first.headers["ack"]  # <consumer id>,<message id>
    consumer.disconnect()  # nothing acknowledged: both go to the next connection
    later = clients(sbroker, version).connect()
    well_behaved_roundtrip_on(later, "/queue/mid-other")  # this connection has had a delivery
    later.subscribe("/queue/mid", "s2", ack="client")
    redelivered = later.rec.wait_messages(3)[1:]
    assert {m.body: m.headers["message-id"] for m in redelivered} == ids
    assert all(m.headers["redelivered"] == "true" for m in redelivered)
    later.ack(redelivered[1])  # cumulative: both
    wait_queue(sbroker, "mid", message_count=0, messages_acknowledged=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_two_connections_get_the_same_message_id_for_a_topic_message(sbroker, clients, version):
    subscribers = [clients(sbroker, version).connect() for _ in range(2)]
    well_behaved_roundtrip_on(subscribers[0], "/queue/warm-up")  # one connection has had more deliveries
    for i, c in enumerate(subscribers):
        c.subscribe("/topic/mid", f"sub-{i}")
    producer = clients(sbroker, version).connect()
    for body in ("t1", "t2"):
        producer.send("/topic/mid", body)
    got = [subscribers[0].rec.wait_messages(3)[1:], subscribers[1].rec.wait_messages(2)]
    assert [[m.body for m in msgs] for msgs in got] == [["t1", "t2"], ["t1", "t2"]]
    assert [m.headers["message-id"] for m in got[0]] == [m.headers["message-id"] for m in got[1]]
    assert got[0][0].headers["message-id"] != got[0][1].headers["message-id"]


def test_message_id_survives_a_restart(make_broker, clients):
    """A durable message keeps its id in the journal: the same message-id after a kill -9."""
    broker = make_broker()
    producer = clients(broker, "1.2").connect()
    producer.send("/queue/mid-restart", "kept", persistent="true")
    consumer = clients(broker, "1.2").connect()
    consumer.subscribe("/queue/mid-restart", "s", ack="client-individual")
    [before] = consumer.rec.wait_messages(1)
    broker.restart(kill=True)
    again = clients(broker, "1.2").connect()
    well_behaved_roundtrip_on(again, "/queue/mid-warm-up")  # not this connection's first delivery
    again.subscribe("/queue/mid-restart", "s", ack="client-individual")
    after = again.rec.wait_messages(2)[1]
    assert after.body == "kept" and after.headers["message-id"] == before.headers["message-id"]
    again.ack(after)
    wait_queue(broker, "mid-restart", message_count=0)


def well_behaved_roundtrip_on(client: Client, destination: str) -> None:
    """``client`` subscribes to ``destination`` and gets one message there (and nothing else yet)."""
    client.subscribe(destination, new_id("warm-up"))
    well_behaved_roundtrip(client, destination, "warm-up")


def _topic_queues(broker: BrokerProcess, address: str) -> list[dict]:
    return [q for q in broker.status()["queues"] if q["address"] == address]


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_ack_and_nack_with_two_subscriptions_to_one_message_on_one_connection(sbroker, clients, version):
    """Both subscriptions get the same message-id; each ACK or NACK settles its own delivery."""
    c = clients(sbroker, version).connect()
    c.subscribe("/topic/pair", "one", ack="client-individual")
    c.subscribe("/topic/pair", "two", ack="client-individual")
    clients(sbroker, version).connect().send("/topic/pair", "m")
    msgs = c.rec.wait_messages(2)
    by_sub = {m.headers["subscription"]: m for m in msgs}
    assert set(by_sub) == {"one", "two"}
    assert by_sub["one"].headers["message-id"] == by_sub["two"].headers["message-id"]
    if version == "1.2":
        assert by_sub["one"].headers["ack"] != by_sub["two"].headers["ack"]
    c.nack(by_sub["one"])  # back to subscription one only
    again = c.rec.wait_messages(3)[2]
    assert again.headers["subscription"] == "one" and again.headers["redelivered"] == "true"
    c.ack(by_sub["two"])
    wait_for(
        lambda: sorted((q["message_count"], q["delivering_count"]) for q in _topic_queues(sbroker, "pair"))
        == [(0, 0), (1, 1)],
        TIMEOUT,
        what="subscription two's copy acknowledged, one's redelivered and out",
    )
    c.ack(again)
    wait_for(
        lambda: [q["message_count"] for q in _topic_queues(sbroker, "pair")] == [0, 0],
        TIMEOUT,
        what="both copies acknowledged",
    )
    assert not c.rec.errors


# --------------------------------------------------------------------------- selectors


@pytest.mark.parametrize("version", VERSIONS)
def test_selector_on_queue_subscription(sbroker, clients, version):
    red = clients(sbroker, version).connect()
    red.subscribe("/queue/paint", "r", selector="color = 'red'")
    producer = clients(sbroker, version).connect()
    for i, color in enumerate(["red", "blue", "red", "green", "red"]):
        producer.send("/queue/paint", f"{color}-{i}", color=color)
    msgs = red.rec.wait_messages(3)
    assert [m.body for m in msgs] == ["red-0", "red-2", "red-4"]
    assert {m.headers["color"] for m in msgs} == {"red"}
    # the others stay on the queue for a consumer whose selector matches them
    wait_queue(sbroker, "paint", message_count=2)
    other = clients(sbroker, version).connect()
    other.subscribe("/queue/paint", "o", selector="color IN ('blue', 'green')")
    assert [m.body for m in other.rec.wait_messages(2)] == ["blue-1", "green-3"]
    # and red never saw them: the next red message is red's 4th
    producer.send("/queue/paint", "red-5", color="red")
    assert red.rec.wait_messages(4)[3].body == "red-5"


@pytest.mark.parametrize("version", VERSIONS)
def test_selector_on_numeric_header(sbroker, clients, version):
    c = clients(sbroker, version).connect()
    c.subscribe("/topic/prices", "p", selector="symbol = 'X' AND JMSPriority > 5")
    producer = clients(sbroker, version).connect()
    producer.send("/topic/prices", "low", symbol="X", priority="2")
    producer.send("/topic/prices", "other", symbol="Y", priority="9")
    producer.send("/topic/prices", "high", symbol="X", priority="9")
    [msg] = c.rec.wait_messages(1)
    assert msg.body == "high"
    assert msg.headers["priority"] == "9"


# --------------------------------------------------------------------------- durable subscriptions


def _durable(broker, clients, version, client_id="c1"):
    c = clients(broker, version).connect(**{"client-id": client_id})
    c.subscribe("/topic/x", "d", **{"durable-subscription-name": "sub1"})
    return c


@pytest.mark.parametrize("version", VERSIONS)
def test_durable_subscription_keeps_messages_while_away(sbroker, clients, version):
    sub = _durable(sbroker, clients, version)
    publisher = clients(sbroker, version).connect()
    publisher.send("/topic/x", "online")
    assert sub.rec.wait_messages(1)[0].body == "online"
    sub.disconnect()

    for i in range(3):
        publisher.send("/topic/x", f"away-{i}")
    # a non-durable subscriber that was also away gets nothing: topics keep nothing for it
    durable_q = [q for q in sbroker.status()["queues"] if q["address"] == "x"]
    assert len(durable_q) == 1, durable_q
    assert durable_q[0]["message_count"] == 3
    assert durable_q[0]["consumer_count"] == 0
    assert durable_q[0]["durable"] is True

    back = _durable(sbroker, clients, version)
    msgs = back.rec.wait_messages(3)
    assert [m.body for m in msgs] == ["away-0", "away-1", "away-2"]
    assert {m.headers["destination"] for m in msgs} == {"/topic/x"}


@pytest.mark.parametrize("version", VERSIONS)
def test_durable_subscription_survives_restart(make_broker, clients, version):
    broker = make_broker()
    sub = _durable(broker, clients, version)
    sub.disconnect()
    publisher = clients(broker, version).connect()
    publisher.send("/topic/x", "p1", persistent="true")
    publisher.send("/topic/x", "volatile", persistent="false")
    publisher.send("/topic/x", "p2", persistent="true")
    publisher.disconnect()

    broker.restart()

    back = _durable(broker, clients, version)
    publisher = clients(broker, version).connect()
    publisher.send("/topic/x", "marker", persistent="true")
    msgs = back.rec.wait_messages(3)
    # the persistent messages came back from the journal, the non-persistent one did not
    assert [m.body for m in msgs] == ["p1", "p2", "marker"]
    assert [m.headers["persistent"] for m in msgs] == ["true"] * 3


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_durable_subscription_is_unique_per_client_id(sbroker, clients, version):
    """Two clients with different client-ids and the same subscription name: two queues."""
    a = _durable(sbroker, clients, version, client_id="ca")
    b = _durable(sbroker, clients, version, client_id="cb")
    publisher = clients(sbroker, version).connect()
    publisher.send("/topic/x", "both")
    assert a.rec.wait_messages(1)[0].body == "both"
    assert b.rec.wait_messages(1)[0].body == "both"
    assert len([q for q in sbroker.status()["queues"] if q["address"] == "x"]) == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_durable_unsubscribe_deletes_the_subscription(sbroker, clients, version):
    sub = _durable(sbroker, clients, version)
    rid = new_id("unsub")
    sub.conn.send_frame(
        "UNSUBSCRIBE", {"id": "d", "durable-subscription-name": "sub1", "receipt": rid}
    )
    sub.rec.wait_receipt(rid)
    wait_for(
        lambda: not [q for q in sbroker.status()["queues"] if q["address"] == "x"],
        TIMEOUT,
        what="the durable subscription queue to be deleted",
    )
    sub.disconnect()
    publisher = clients(sbroker, version).connect()
    publisher.send("/topic/x", "nobody-keeps-this")
    back = _durable(sbroker, clients, version)
    publisher.send("/topic/x", "marker")
    assert [m.body for m in back.rec.wait_messages(1)] == ["marker"]


@pytest.mark.parametrize("version", VERSIONS)
def test_durable_subscription_without_client_id_is_refused(sbroker, clients, version):
    bystander = _bystander(sbroker, clients, version)
    c = clients(sbroker, version).connect()
    c.conn.subscribe("/topic/x", "d", headers={"durable-subscription-name": "nameless"})
    err = c.rec.wait_error()
    assert "client-id" in err.headers["message"], err.headers
    c.rec.wait_disconnected()
    assert not [q for q in sbroker.status()["queues"] if q["address"] == "x"]
    well_behaved_roundtrip(bystander, "/queue/bystander", "after")


# --------------------------------------------------------------------------- heart-beats


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_heartbeating_client_stays_connected_while_idle(sbroker, clients, version):
    c = clients(sbroker, version, heartbeats=(1000, 1000)).connect()
    assert c.rec.connected[0].headers["heart-beat"] == "1000,1000"
    c.subscribe("/queue/hb", "s")
    start = time.monotonic()
    # idle: only heart-beats flow; the broker sends one a second
    c.rec.wait(lambda: c.rec.heartbeats >= 4, timeout=8.0, what="4 broker heart-beats")
    idle = time.monotonic() - start
    assert idle > 3.0, idle
    assert c.connected
    assert c.rec.disconnects == 0 and not c.rec.errors
    well_behaved_roundtrip(c, "/queue/hb", "still here")


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_no_heartbeats_when_not_asked_for(sbroker, clients, version):
    c = clients(sbroker, version, heartbeats=(0, 0)).connect()
    assert c.rec.connected[0].headers.get("heart-beat", "0,0") == "0,0"
    # client wants beats every 200 ms, sends none: the broker promises 200 and expects nothing
    hb = clients(sbroker, version, heartbeats=(0, 200)).connect()
    assert hb.rec.connected[0].headers["heart-beat"] == "200,0"
    hb.rec.wait(lambda: hb.rec.heartbeats >= 3, timeout=3.0, what="3 broker heart-beats")
    assert c.rec.heartbeats == 0
    assert hb.connected


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_silent_client_is_disconnected_after_heartbeat_ttl(sbroker, clients, raw_clients, version):
    bystander = clients(sbroker, version).connect()
    bystander.subscribe("/queue/bys", "b")
    raw = raw_clients(sbroker)
    start = time.monotonic()
    connected = raw.connect(version, heart_beat="500,0")
    # the broker does not want to send beats (client asked for 0) but expects ours every 500 ms
    assert connected["heart-beat"] == "0,500"
    # now silence: the broker must close within its TTL (2 x 500 ms) plus slack;
    # an ERROR frame first is allowed (Artemis just closes), anything else is not
    try:
        command, headers, _ = raw.read_frame(timeout=6.0)
    except EOFError:
        pass
    else:
        assert command == "ERROR", (command, headers)
        assert headers.get("message")
    raw.wait_closed(timeout=6.0 - (time.monotonic() - start))
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 6.0, elapsed
    well_behaved_roundtrip(bystander, "/queue/bys", "unaffected")


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_raw_client_sending_heartbeats_stays_connected(sbroker, raw_clients, version):
    raw = raw_clients(sbroker)
    raw.connect(version, heart_beat="200,0")
    start = time.monotonic()
    deadline = start + 1.5  # 3x the broker's 400 ms TTL
    while time.monotonic() < deadline:
        raw.send(b"\n")
        # wait one client interval; a broker that closed us shows up as EOF right here
        raw.sock.settimeout(0.2)
        try:
            chunk = raw.sock.recv(4096)
        except TimeoutError:
            continue
        assert chunk, "broker closed a connection that was sending heart-beats"
        raw.buf += chunk
    raw.send(b"SUBSCRIBE\nid:s\ndestination:/queue/rawhb\n\n\0")
    raw.send(b"SEND\ndestination:/queue/rawhb\nreceipt:r\n\nalive\0")
    frames = [raw.read_frame(), raw.read_frame()]
    commands = sorted(f[0] for f in frames)
    assert commands == ["MESSAGE", "RECEIPT"], frames
    assert [f[2] for f in frames if f[0] == "MESSAGE"] == [b"alive"]


# --------------------------------------------------------------------------- bodies


BINARY = bytes(range(256)) * 4 + b"\0\0\0end\0"


@pytest.mark.parametrize("version", VERSIONS)
def test_binary_body_with_content_length_arrives_intact(sbroker, clients, version):
    consumer = clients(sbroker, version, auto_decode=False).connect()
    consumer.subscribe("/queue/bin", "s")
    producer = clients(sbroker, version, auto_decode=False).connect()
    producer.send("/queue/bin", BINARY, content_type="application/octet-stream")
    producer.send("/queue/bin", b"\0")  # a body that is a single NUL
    producer.send("/queue/bin", b"after")
    msgs = consumer.rec.wait_messages(3)
    assert msgs[0].body == BINARY
    assert int(msgs[0].headers["content-length"]) == len(BINARY)
    assert msgs[0].headers["content-type"] == "application/octet-stream"
    assert msgs[1].body == b"\0"
    assert msgs[2].body == b"after"


@pytest.mark.parametrize("version", VERSIONS)
def test_utf8_text_body_arrives_intact(sbroker, clients, version):
    text = "grüße, 日本語, emoji \U0001f389, nbsp\u00a0, rtl \u05e9\u05dc\u05d5\u05dd"
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/utf8", "s")
    producer = clients(sbroker, version).connect()
    producer.send("/queue/utf8", text, content_type="text/plain; charset=utf-8")
    [msg] = consumer.rec.wait_messages(1)
    assert msg.body == text
    assert msg.headers["content-type"] == "text/plain; charset=utf-8"
    assert int(msg.headers["content-length"]) == len(text.encode("utf-8"))


@pytest.mark.parametrize("version", VERSIONS)
def test_utf16_body_arrives_intact(sbroker, clients, version):
    body = "UTF-16 \u00e9\u4e2d".encode("utf-16")
    consumer = clients(sbroker, version, auto_decode=False).connect()
    consumer.subscribe("/queue/utf16", "s")
    producer = clients(sbroker, version, auto_decode=False).connect()
    producer.send("/queue/utf16", body, content_type="text/plain; charset=utf-16")
    [msg] = consumer.rec.wait_messages(1)
    assert msg.body == body
    assert msg.body.decode("utf-16") == "UTF-16 \u00e9\u4e2d"


@pytest.mark.parametrize("version", VERSIONS)
def test_large_body_arrives_intact(sbroker, clients, version):
    body = bytes(range(256)) * 4096  # 1 MiB
    consumer = clients(sbroker, version, auto_decode=False).connect()
    consumer.subscribe("/queue/large", "s")
    producer = clients(sbroker, version, auto_decode=False).connect()
    producer.send("/queue/large", body)
    [msg] = consumer.rec.wait_messages(1, timeout=10.0)
    assert len(msg.body) == len(body)
    assert msg.body == body


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_headers_pass_through(sbroker, clients, version):
    custom = {
        "transformation": "jms-map-xml",
        "consumerWindowSize": "-1",
        "x-app-Trace": "abc 123",
        "JMSXGroupID": "group-1",
        "empty": "",
        "spaces": "  padded  ",
    }
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/hdr", "s")
    producer = clients(sbroker, version).connect()
    producer.send("/queue/hdr", "body", **custom)
    [msg] = consumer.rec.wait_messages(1)
    for key, value in custom.items():
        assert msg.headers.get(key) == value, (key, msg.headers)


@pytest.mark.parametrize("version", VERSIONS)
def test_standard_headers_pass_through(sbroker, clients, version):
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/std", "s")
    producer = clients(sbroker, version).connect()
    producer.send(
        "/queue/std",
        "body",
        **{
            "correlation-id": "corr-1",
            "reply-to": "/queue/replies",
            "type": "Order",
            "priority": "7",
        },
    )
    [msg] = consumer.rec.wait_messages(1)
    assert msg.headers["correlation-id"] == "corr-1"
    assert msg.headers["reply-to"] == "/queue/replies"
    assert msg.headers["type"] == "Order"
    assert msg.headers["priority"] == "7"
    assert int(msg.headers["timestamp"]) > 0


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
def test_header_escaping(sbroker, clients, version):
    values = {
        "colon": "a:b:c",
        "newline": "line1\nline2",
        "both": "key:value\nnext:one",
        "backslash": "C:\\path\\to",
        "all": "x\\y:z\n",
    }
    if version == "1.2":
        values["cr"] = "carriage\rreturn"
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/esc", "s")
    producer = clients(sbroker, version).connect()
    producer.send("/queue/esc", "body", **values)
    [msg] = consumer.rec.wait_messages(1)
    for key, value in values.items():
        assert msg.headers.get(key) == value, (key, msg.headers.get(key))


def test_header_escaping_on_the_wire_1_2(sbroker, raw_clients):
    """The broker's own 1.2 encoding, seen raw (stomp.py would unescape leniently)."""
    raw = raw_clients(sbroker)
    raw.connect("1.2")
    raw.send(b"SUBSCRIBE\nid:s\ndestination:/queue/wire\nreceipt:r1\n\n\0")
    assert raw.read_frame()[0] == "RECEIPT"
    # header name "k:ey", value "v:a<LF>l\\ue<CR>", escaped as 1.2 requires
    raw.send(b"SEND\ndestination:/queue/wire\nk\\cey:v\\ca\\nl\\\\ue\\r\n\nbody\0")
    command, headers, body = raw.read_frame()  # read_frame does not unescape
    assert command == "MESSAGE" and body == b"body", (command, headers, body)
    assert headers.get("k\\cey") == "v\\ca\\nl\\\\ue\\r", headers


@pytest.mark.parametrize("version", VERSIONS)
def test_headers_from_1_2_producer_reach_older_consumers(sbroker, clients, version):
    """A colon in a header value is legal in every version's MESSAGE."""
    consumer = clients(sbroker, version).connect()
    consumer.subscribe("/queue/xver", "s")
    producer = clients(sbroker, "1.2").connect()
    producer.send("/queue/xver", "body", url="http://example.com:8080/x")
    [msg] = consumer.rec.wait_messages(1)
    assert msg.headers["url"] == "http://example.com:8080/x"


# --------------------------------------------------------------------------- errors isolated to one connection


def _bystander(broker, clients, version="1.2", destination="/queue/bystander") -> Client:
    c = clients(broker, version).connect()
    c.subscribe(destination, "b")
    well_behaved_roundtrip(c, destination, "before")
    return c


GARBAGE = {
    "binary-garbage": b"\x01\x02\xff\xfe not a frame at all \x00",
    "lowercase-command": b"send\ndestination:/queue/bad\n\nbody\0",
    "bad-escape": b"SEND\ndestination:/queue/bad\nbad:a\\tb\n\nbody\0",
    "header-without-colon": b"SEND\ndestination:/queue/bad\nnocolonhere\n\nbody\0",
    "bad-content-length": b"SEND\ndestination:/queue/bad\ncontent-length:abc\n\nbody\0",
    "content-length-past-nul": b"SEND\ndestination:/queue/bad\ncontent-length:2\n\nbody\0",
}


@pytest.mark.parametrize("version", ESCAPING_VERSIONS)
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_malformed_frame_closes_only_that_connection(sbroker, clients, raw_clients, version, kind):
    bystander = _bystander(sbroker, clients)
    watcher = clients(sbroker, "1.2").connect()
    watcher.subscribe("/queue/bad", "w")
    raw = raw_clients(sbroker)
    raw.connect(version)
    raw.send(GARBAGE[kind])
    command, headers, body = raw.read_frame()
    assert command == "ERROR", (command, headers, body)
    assert headers.get("message"), headers
    raw.wait_closed()
    well_behaved_roundtrip(bystander, "/queue/bystander", "after")
    # the malformed SEND delivered nothing
    watcher.send("/queue/bad", "marker")
    assert watcher.rec.wait_messages(1)[0].body == "marker"


def test_frame_before_connect_is_an_error(sbroker, clients, raw_clients):
    bystander = _bystander(sbroker, clients)
    raw = raw_clients(sbroker)
    raw.send(b"SEND\ndestination:/queue/early\n\nbody\0")
    command, headers, _ = raw.read_frame()
    assert command == "ERROR"
    assert "CONNECT" in headers["message"]
    raw.wait_closed()
    well_behaved_roundtrip(bystander, "/queue/bystander", "after")


def test_unsupported_version_is_refused(sbroker, raw_clients):
    raw = raw_clients(sbroker)
    raw.send(b"CONNECT\naccept-version:2.0,3.1\nhost:x\n\n\0")
    command, headers, _ = raw.read_frame()
    assert command == "ERROR"
    assert headers.get("version") == "1.0,1.1,1.2"
    raw.wait_closed()


@pytest.mark.parametrize("version", VERSIONS)
def test_oversized_frame_closes_only_that_connection(make_broker, clients, version):
    broker = make_broker(extra_junction_xml='<limits max-frame-size="64KiB"/>')
    bystander = _bystander(broker, clients, version)
    watcher = clients(broker, version, auto_decode=False).connect()
    watcher.subscribe("/queue/big", "w")
    # just under the limit is fine
    ok = b"o" * (32 * 1024)
    watcher.send("/queue/big", ok)
    assert watcher.rec.wait_messages(1)[0].body == ok

    offender = clients(broker, version, auto_decode=False).connect()
    offender.conn.send("/queue/big", b"x" * (100 * 1024), headers={"receipt": "big"})
    err = offender.rec.wait_error()
    assert err.headers.get("message")
    offender.rec.wait_disconnected()
    assert "big" not in offender.rec.receipts

    well_behaved_roundtrip(bystander, "/queue/bystander", "after")
    watcher.send("/queue/big", b"marker")
    assert watcher.rec.wait_messages(2)[1].body == b"marker"


def _secure_broker(make_broker, **kwargs) -> BrokerProcess:
    return make_broker(
        security=True,
        users={"alice": ("secret", ["amq"]), "bob": ("hunter2", ["reader"])},
        **kwargs,
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "login,passcode", [("alice", "wrong"), ("mallory", "secret"), (None, None)]
)
def test_wrong_credentials_are_refused(make_broker, clients, version, login, passcode):
    broker = _secure_broker(make_broker, anonymous_user=None)
    good = clients(broker, version).connect("alice", "secret")
    good.subscribe("/queue/bystander", "b")
    well_behaved_roundtrip(good, "/queue/bystander", "before")

    bad = clients(broker, version)
    with pytest.raises(ConnectFailedException):
        bad.connect(login, passcode)
    err = bad.rec.wait_error()
    message = err.headers.get("message", "")
    assert "invalid" in message.lower() or "security" in message.lower(), message
    bad.rec.wait_disconnected()
    assert not bad.connected
    assert not bad.rec.connected

    well_behaved_roundtrip(good, "/queue/bystander", "after")


@pytest.mark.parametrize("version", VERSIONS)
def test_connect_headers_are_taken_literally(make_broker, clients, version):
    """CONNECT is never escaped: a passcode with ':' and '\\c' is compared as written."""
    password = "pa:ss\\cword"
    broker = make_broker(
        security=True,
        # the harness writes passwords raw; in a .properties value "\\\\" is one backslash
        users={"carol": (password.replace("\\", "\\\\"), ["amq"])},
    )
    c = clients(broker, version).connect("carol", password)
    assert c.connected and not c.rec.errors
    c.subscribe("/queue/carol", "s")
    well_behaved_roundtrip(c, "/queue/carol", "ok")
    conns = broker.status()["connections"]
    assert [x["user"] for x in conns] == ["carol"]


SECURITY_SETTINGS = """
<security-settings>
  <security-setting match="#">
    <permission type="send" roles="amq"/>
    <permission type="consume" roles="amq,reader"/>
    <permission type="browse" roles="amq,reader"/>
    <permission type="createAddress" roles="amq,reader"/>
    <permission type="createDurableQueue" roles="amq,reader"/>
    <permission type="createNonDurableQueue" roles="amq,reader"/>
    <permission type="deleteNonDurableQueue" roles="amq,reader"/>
    <permission type="deleteAddress" roles="amq"/>
    <permission type="deleteDurableQueue" roles="amq"/>
  </security-setting>
</security-settings>
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_unauthorized_send_is_refused(make_broker, clients, version):
    broker = _secure_broker(make_broker, extra_core_xml=SECURITY_SETTINGS)
    alice = clients(broker, version).connect("alice", "secret")
    alice.subscribe("/queue/secure", "a")
    well_behaved_roundtrip(alice, "/queue/secure", "before")

    bob = clients(broker, version).connect("bob", "hunter2")
    bob.conn.send("/queue/secure", "forbidden", headers={"receipt": "bob-send"})
    err = bob.rec.wait_error()
    message = err.headers["message"]
    assert "SEND" in message and "bob" in message and "secure" in message, message
    assert err.headers.get("receipt-id") == "bob-send"
    bob.rec.wait_disconnected()

    # the forbidden message went nowhere; alice is unaffected
    well_behaved_roundtrip(alice, "/queue/secure", "after")
    assert alice.rec.bodies() == ["before", "after"]
    assert queue_status(broker, "secure")["messages_added"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_unauthorized_consume_is_refused(make_broker, clients, version):
    private = """
  <security-setting match="private.#">
    <permission type="send" roles="amq"/>
    <permission type="consume" roles="amq"/>
    <permission type="createAddress" roles="amq,reader"/>
    <permission type="createDurableQueue" roles="amq,reader"/>
    <permission type="createNonDurableQueue" roles="amq,reader"/>
    <permission type="deleteNonDurableQueue" roles="amq,reader"/>
  </security-setting>
</security-settings>"""
    settings = SECURITY_SETTINGS.replace("</security-settings>", private)
    broker = _secure_broker(make_broker, extra_core_xml=settings)
    alice = clients(broker, version).connect("alice", "secret")
    alice.send("/queue/private.box", "secret stuff")
    alice.subscribe("/queue/ok", "a")
    bob = clients(broker, version).connect("bob", "hunter2")
    bob.conn.subscribe("/queue/private.box", "b", headers={"receipt": "bob-sub"})
    err = bob.rec.wait_error()
    message = err.headers["message"]
    assert "CONSUME" in message and "bob" in message, message
    bob.rec.wait_disconnected()
    assert not bob.rec.messages
    wait_queue(broker, "private.box", message_count=1, messages_acknowledged=0)
    well_behaved_roundtrip(alice, "/queue/ok", "alice unaffected")


@pytest.mark.parametrize("version", VERSIONS)
def test_reader_may_consume_what_it_may_not_send(make_broker, clients, version):
    broker = _secure_broker(make_broker, extra_core_xml=SECURITY_SETTINGS)
    alice = clients(broker, version).connect("alice", "secret")
    alice.send("/queue/inbox", "for bob")
    bob = clients(broker, version).connect("bob", "hunter2")
    bob.subscribe("/queue/inbox", "b")
    assert bob.rec.wait_messages(1)[0].body == "for bob"
    assert not bob.rec.errors


# --------------------------------------------------------------------------- management cross-check


@pytest.mark.parametrize("version", VERSIONS)
def test_management_counts_follow_sends_and_acks(sbroker, clients, version):
    producer = clients(sbroker, version).connect()
    for i in range(6):
        producer.send("/queue/mgmt", f"m{i}", persistent="true")
    q = wait_queue(sbroker, "mgmt", message_count=6)
    assert q["messages_added"] == 6 and q["consumer_count"] == 0 and q["durable"] is True
    assert q["routing_type"] == "ANYCAST"

    consumer = clients(sbroker, version).connect()
    ack_mode = "client" if version == "1.0" else "client-individual"
    consumer.subscribe("/queue/mgmt", "s", ack=ack_mode)
    msgs = consumer.rec.wait_messages(6)
    wait_queue(sbroker, "mgmt", message_count=6, delivering_count=6, consumer_count=1)
    if version == "1.0":
        consumer.ack(msgs[3])  # cumulative: m0..m3
    else:
        for m in msgs[:4]:
            consumer.ack(m)
    wait_queue(
        sbroker,
        "mgmt",
        message_count=2,
        delivering_count=2,
        messages_acknowledged=4,
        consumer_count=1,
    )
    conns = sbroker.status()["connections"]
    assert len([c for c in conns if c["protocol"] == "STOMP"]) == 2
    assert sum(c["consumers"] for c in conns) == 1

    consumer.disconnect()
    wait_queue(sbroker, "mgmt", message_count=2, delivering_count=0, consumer_count=0)
    wait_for(
        lambda: len(sbroker.status()["connections"]) == 1,
        TIMEOUT,
        what="the consumer's connection to leave the status",
    )


def test_management_sees_client_id(sbroker, clients):
    c = clients(sbroker, "1.2").connect(**{"client-id": "mgmt-client"})
    assert c.connected
    conns = sbroker.status()["connections"]
    assert [x["client_id"] for x in conns] == ["mgmt-client"]
