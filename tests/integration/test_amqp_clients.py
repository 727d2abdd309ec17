"""Process-level AMQP 1.0 tests: python-qpid-proton clients against a ``junction run`` process.

Most tests share one broker per module (:func:`abroker`: the acceptor's
``anycastPrefix=queue://`` / ``multicastPrefix=topic://``, a dead-letter
setting for ``dlq.#``) and keep out of each other's way with unique address,
link and container names.  Tests that restart the broker, need security or a
full address get a broker of their own.

Clients are ``proton.utils.BlockingConnection`` objects; where a test needs
exact control it drives the underlying proton link directly (``link.flow``,
``link.drain``, ``delivery.update``/``settle``) and pumps the connection with
``BlockingConnection.wait(predicate, timeout)``.  The SASL probes run a
``proton.reactor.Container`` with a ``MessagingHandler`` in a thread joined
with a deadline; transactions use ``Container.declare_transaction`` on the
blocking connection's own container.

Synchronisation is never a sleep: tests wait on predicates over what a client
received or over the management API (:func:`~tests.harness.wait_for`), with a
deadline.  "Nothing (else) arrived" is proved by ordering: a session
begin/end round trip (:func:`round_trip`) on the same connection after the
point where the broker would have sent it, or a marker message sent later
arriving first.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from proton import (
    Data,
    Delivery,
    Described,
    Endpoint,
    Handler,
    Link,
    Message,
    Timeout,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import AtMostOnce, Container, DurableSubscription, LinkOption, Selector
from proton.utils import BlockingConnection, LinkDetached

from tests.harness import BrokerProcess, address_status, queue_status, wait_for, wait_queue

pytestmark = pytest.mark.timeout(60)  # pytest-timeout: a hung client fails one test

#: Seconds any single expected event may take.
TIMEOUT = 5.0

PREFIXES = {"anycastPrefix": "queue://", "multicastPrefix": "topic://"}
#: ``dlq.#`` dead-letters to DLQ after 3 attempts, with one auto-created
#: DLQ queue per original address (``DLQ.<address>``), so tests sharing the
#: module broker never see each other's dead letters.
MODULE_SETTINGS = (
    '<address-setting match="dlq.#">'
    "<dead-letter-address>DLQ</dead-letter-address>"
    "<auto-create-dead-letter-resources>true</auto-create-dead-letter-resources>"
    "<max-delivery-attempts>3</max-delivery-attempts>"
    "</address-setting>"
)

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """A name no other test in this process uses (addresses, links, container ids)."""
    return f"{prefix}-{next(_ids)}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- brokers

#: fixture name -> the module broker it returned, for log tails on failure
_module_brokers: dict[str, BrokerProcess] = {}


def _module_broker(tmp_path_factory, fixture: str, **kwargs) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp(fixture), name=fixture, **kwargs)
    _module_brokers[fixture] = b
    try:
        b.start()
        yield b
    finally:
        b.stop()
        _module_brokers.pop(fixture, None)


@pytest.fixture(scope="module")
def abroker(tmp_path_factory) -> Iterator[BrokerProcess]:
    """The shared broker: security off, the AMQP prefixes, the ``dlq.#`` setting."""
    yield from _module_broker(
        tmp_path_factory,
        "abroker",
        amqp_acceptor_params=PREFIXES,
        address_settings_xml=MODULE_SETTINGS,
    )


SASL_USERS = {"alice": ("secret", "amqp"), "guest": ("guest-password", "amqp")}


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    """Security on, users alice and guest, anonymous connections act as guest."""
    yield from _module_broker(
        tmp_path_factory, "secure", security=True, users=SASL_USERS, anonymous_user="guest"
    )


@pytest.fixture(scope="module")
def secure_broker_no_anonymous(tmp_path_factory) -> Iterator[BrokerProcess]:
    """Security on, users alice and guest, no anonymous user."""
    yield from _module_broker(
        tmp_path_factory, "secure-noanon", security=True, users=SASL_USERS, anonymous_user=None
    )


@pytest.fixture(autouse=True)
def _module_broker_logs(request: pytest.FixtureRequest) -> None:
    """Attach the used module brokers' log tails to a failure (see tests/conftest.py)."""
    used = [b for name, b in _module_brokers.items() if name in request.fixturenames]
    if used:
        request.node._junction_brokers = used


# --------------------------------------------------------------------------- clients


@pytest.fixture
def clients() -> Iterator[Callable[..., BlockingConnection]]:
    """``clients(broker, **BlockingConnection_kwargs)``: a connection, closed at teardown."""
    made: list[BlockingConnection] = []

    def make(broker: BrokerProcess, **kwargs) -> BlockingConnection:
        kwargs.setdefault("timeout", TIMEOUT)
        kwargs.setdefault("container_id", unique("client"))
        c = BlockingConnection(broker.amqp_url, **kwargs)
        made.append(c)
        return c

    yield make
    for c in reversed(made):
        close_quietly(c)


def close_quietly(conn: BlockingConnection) -> None:
    try:
        conn.close()
    except Exception:  # already dropped, or the broker is gone
        pass


class Capabilities(LinkOption):
    """Terminus capabilities: the source's for a receiver, the target's for a sender."""

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def apply(self, link: Link) -> None:
        terminus = link.source if link.is_receiver else link.target
        data = terminus.capabilities
        data.put_array(False, Data.SYMBOL)
        data.enter()
        for cap in self.capabilities:
            data.put_symbol(symbol(cap))
        data.exit()


class RcvSettleSecond(LinkOption):
    """rcv-settle-mode second: the receiver settles only after the sender has."""

    def apply(self, link: Link) -> None:
        link.rcv_settle_mode = Link.RCV_SECOND


def take(conn: BlockingConnection, receiver, n: int, timeout: float = TIMEOUT) -> list:
    """The next ``n`` (message, delivery) pairs a Fetcher-backed receiver got (waits for them)."""
    fetcher = receiver.fetcher
    conn.wait(
        lambda: fetcher.has_message >= n,
        timeout=timeout,
        msg=f"{n} messages on {receiver.link.name} (have {fetcher.has_message})",
    )
    return [fetcher.incoming.popleft() for _ in range(n)]


def bodies(pairs: list) -> list:
    return [m.body for m, _ in pairs]


def settle(
    delivery: Delivery,
    state=Delivery.ACCEPTED,
    *,
    failed: bool = False,
    undeliverable: bool = False,
) -> None:
    if failed:
        delivery.local.failed = True
    if undeliverable:
        delivery.local.undeliverable = True
    delivery.update(state)
    delivery.settle()


def accept_all(conn: BlockingConnection, pairs: list) -> None:
    for _, d in pairs:
        settle(d)
    round_trip(conn)  # the dispositions are on the wire and processed


def round_trip(conn: BlockingConnection) -> None:
    """Begin and end a session: the broker has processed everything sent before.

    Also: every frame the broker produced before answering has been read, so
    a delivery it would have sent by then has arrived.
    """
    ssn = conn.conn.session()
    ssn.open()
    conn.wait(lambda: ssn.state & Endpoint.REMOTE_ACTIVE, timeout=TIMEOUT, msg="session begin")
    ssn.close()
    conn.wait(lambda: ssn.state & Endpoint.REMOTE_CLOSED, timeout=TIMEOUT, msg="session end")


def pump(conn: BlockingConnection, seconds: float = 0.02) -> None:
    """Process whatever the connection has for up to ``seconds`` (for juggling two connections)."""
    try:
        conn.wait(lambda: False, timeout=seconds)
    except Timeout:
        pass


def send_all(sender, messages) -> None:
    for m in messages:
        sender.send(m)


def texts(*values) -> list[Message]:
    return [Message(body=v) for v in values]


# --------------------------------------------------------------------------- management


def wait_queue_gone(broker: BrokerProcess, name: str, timeout: float = TIMEOUT) -> None:
    wait_for(lambda: queue_status(broker, name) is None, timeout, what=f"queue {name} to be gone")


def queues_on(broker: BrokerProcess, address: str) -> list[dict]:
    return [q for q in broker.status()["queues"] if q["address"] == address]


# --------------------------------------------------------------------------- container in a thread


def run_container(handler: MessagingHandler, timeout: float = TIMEOUT * 2) -> None:
    """Run a Container for ``handler`` in a thread; fail if it has not finished in time."""
    container = Container(handler)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            container.run()
        except BaseException as e:  # surfaced in the test thread
            errors.append(e)

    t = threading.Thread(target=run, name="proton-container", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        container.stop()
        t.join(TIMEOUT)
        raise AssertionError(f"proton Container did not finish within {timeout:g} s")
    if errors:
        raise errors[0]


class ConnectProbe(MessagingHandler):
    """Connect (with the given SASL settings), record the outcome, close."""

    def __init__(self, url: str, **connect_kwargs) -> None:
        super().__init__()
        self.url = url
        self.connect_kwargs = connect_kwargs
        self.opened = False
        self.offered: list = []
        self.error: str | None = None
        self.error_text: str | None = None

    def on_start(self, event) -> None:
        event.container.connect(self.url, reconnect=False, **self.connect_kwargs)

    def on_connection_opened(self, event) -> None:
        self.opened = True
        self.offered = list(event.connection.remote_offered_capabilities or [])
        event.connection.close()

    def on_transport_error(self, event) -> None:
        cond = event.transport.condition
        if cond is not None and self.error is None:
            self.error, self.error_text = cond.name, cond.description
        super().on_transport_error(event)

    def on_connection_error(self, event) -> None:
        cond = event.connection.remote_condition
        if cond is not None and self.error is None:
            self.error, self.error_text = cond.name, cond.description
        event.connection.close()


def probe(broker: BrokerProcess, **connect_kwargs) -> ConnectProbe:
    p = ConnectProbe(broker.amqp_url, **connect_kwargs)
    run_container(p)
    return p


# --------------------------------------------------------------------------- raw SASL

AMQP_SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def _described(code: int, fields: list) -> bytes:
    d = Data()
    d.put_object(Described(ulong(code), fields))
    return bytes(d.encode())


def _sasl_frame(body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


class RawSasl:
    """A socket speaking the SASL layer by hand: see what the broker offers, try any mechanism."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(broker.amqp_address, timeout=TIMEOUT)
        self.buf = b""

    def _read(self, n: int) -> bytes:
        deadline = time.monotonic() + TIMEOUT
        while len(self.buf) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"connection closed; have {self.buf!r}")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_frame(self) -> Described:
        size, doff, ftype, _channel = struct.unpack(">IBBH", self._read(8))
        assert ftype == 1, f"not a SASL frame (type {ftype})"
        body = self._read(size - 8)[(doff * 4) - 8 :]
        d = Data()
        d.decode(body)
        d.rewind()
        d.next()
        return d.get_object()

    def mechanisms(self) -> set[str]:
        self.sock.sendall(AMQP_SASL_HEADER)
        assert self._read(8) == AMQP_SASL_HEADER
        frame = self.read_frame()
        assert int(frame.descriptor) == 0x40, frame
        value = frame.value[0]
        items = (
            value.elements
            if hasattr(value, "elements")
            else (value if isinstance(value, list) else [value])
        )
        return {str(m) for m in items}

    def init(self, mechanism: str, response: bytes | None) -> int:
        """Send sasl-init; the sasl-outcome code (0 ok, 1 auth)."""
        self.sock.sendall(_sasl_frame(_described(0x41, [symbol(mechanism), response, None])))
        frame = self.read_frame()
        assert int(frame.descriptor) == 0x44, frame
        return int(frame.value[0])

    def close(self) -> None:
        self.sock.close()


# =========================================================================== tests

# --------------------------------------------------------------------------- 1. SASL


def test_sasl_plain_with_the_right_password(secure_broker, clients):
    c = clients(secure_broker, user="alice", password="secret", allowed_mechs="PLAIN")
    address = unique("sasl-ok")
    c.create_sender(address).send(Message(body="authenticated"))
    r = c.create_receiver(address, credit=1)
    assert r.receive(timeout=TIMEOUT).body == "authenticated"
    r.accept()
    users = {x["client_id"]: x["user"] for x in secure_broker.status()["connections"]}
    assert users[c.conn.container] == "alice"


def test_sasl_plain_with_a_wrong_password_is_unauthorized(secure_broker):
    # on the wire: sasl-outcome code auth (1) for a wrong password, ok (0) for the right one
    for response, code in ((b"\0alice\0wrong", 1), (b"\0alice\0secret", 0)):
        raw = RawSasl(secure_broker)
        try:
            assert "PLAIN" in raw.mechanisms()
            assert raw.init("PLAIN", response) == code
        finally:
            raw.close()
    # and what a proton client reports
    p = probe(secure_broker, user="alice", password="wrong", allowed_mechs="PLAIN")
    assert not p.opened
    assert p.error == "amqp:unauthorized-access", (p.error, p.error_text)
    p = probe(secure_broker, user="mallory", password="secret", allowed_mechs="PLAIN")
    assert not p.opened
    assert p.error == "amqp:unauthorized-access", (p.error, p.error_text)


def test_sasl_anonymous_works_with_an_anonymous_user(secure_broker, clients):
    raw = RawSasl(secure_broker)
    try:
        assert {"PLAIN", "ANONYMOUS"} <= raw.mechanisms()
        assert raw.init("ANONYMOUS", b"trace") == 0
    finally:
        raw.close()
    c = clients(secure_broker, allowed_mechs="ANONYMOUS")
    address = unique("sasl-anon")
    c.create_sender(address).send(Message(body="as guest"))
    users = {x["client_id"]: x["user"] for x in secure_broker.status()["connections"]}
    assert users[c.conn.container] == "guest"


def test_sasl_anonymous_refused_without_an_anonymous_user(secure_broker_no_anonymous):
    raw = RawSasl(secure_broker_no_anonymous)
    try:
        offered = raw.mechanisms()
        assert "ANONYMOUS" not in offered and "PLAIN" in offered, offered
        # A client that tries ANONYMOUS anyway is refused (sasl-outcome code auth).
        assert raw.init("ANONYMOUS", b"someone") == 1
    finally:
        raw.close()
    p = probe(secure_broker_no_anonymous, allowed_mechs="ANONYMOUS")
    assert not p.opened
    assert p.error == "amqp:unauthorized-access", (p.error, p.error_text)
    # ...while PLAIN with a right password still works on that broker.
    ok = probe(secure_broker_no_anonymous, user="alice", password="secret", allowed_mechs="PLAIN")
    assert ok.opened, (ok.error, ok.error_text)


# --------------------------------------------------------------------------- 2. connection


def test_container_id_is_the_client_id(abroker, clients):
    cid = unique("my-container")
    c = clients(abroker, container_id=cid)
    c.create_sender(unique("cid"))  # a session exists: the connection is listed
    ids = [x["client_id"] for x in abroker.status()["connections"] if x["protocol"] == "AMQP"]
    assert cid in ids


def test_broker_offers_anonymous_relay(abroker, clients):
    c = clients(abroker)
    offered = {str(s) for s in c.conn.remote_offered_capabilities or ()}
    assert "ANONYMOUS-RELAY" in offered


def test_heartbeating_client_stays_connected_past_its_idle_timeout(abroker, clients):
    # heartbeat=2: the client drops the connection unless a frame arrives
    # every 2 s, so the broker must send empty frames (Transport.tick) while
    # nothing else happens.
    c = clients(abroker, heartbeat=2)
    assert c.conn.transport.remote_idle_timeout > 0  # the broker asks for heartbeats too
    address = unique("hb")
    s = c.create_sender(address)
    r = c.create_receiver(address, credit=1)
    until = time.monotonic() + 6.5
    c.wait(lambda: time.monotonic() >= until, timeout=10, msg="6.5 s of idle connection")
    s.send(Message(body="still here"))
    assert r.receive(timeout=TIMEOUT).body == "still here"
    r.accept()
    assert c.conn.container in [x["client_id"] for x in abroker.status()["connections"]]


# --------------------------------------------------------------------------- 3. addressing


def test_queue_by_plain_address(abroker, clients):
    c = clients(abroker)
    address = unique("plain")
    s = c.create_sender(address)
    send_all(s, texts("a", "b", "c"))
    r = c.create_receiver(address, credit=10)
    pairs = take(c, r, 3)
    assert bodies(pairs) == ["a", "b", "c"]
    accept_all(c, pairs)
    q = wait_queue(abroker, address, message_count=0)
    assert q["routing_type"] == "ANYCAST" and q["address"] == address


def test_queue_capability_consumers_compete(abroker, clients):
    c = clients(abroker)
    address = unique("qcap")
    r1 = c.create_receiver(address, credit=10, name=unique("r1"), options=Capabilities("queue"))
    r2 = c.create_receiver(address, credit=10, name=unique("r2"), options=Capabilities("queue"))
    s = c.create_sender(address, options=Capabilities("queue"))
    sent = [f"m{i}" for i in range(10)]
    send_all(s, texts(*sent))
    c.wait(
        lambda: r1.fetcher.has_message + r2.fetcher.has_message >= 10,
        timeout=TIMEOUT,
        msg="10 messages across two queue receivers",
    )
    round_trip(c)
    a = take(c, r1, r1.fetcher.has_message)
    b = take(c, r2, r2.fetcher.has_message)
    got = bodies(a) + bodies(b)
    assert sorted(got) == sorted(sent) and len(got) == 10  # each message exactly once
    assert a and b  # both consumers of the one queue got some
    accept_all(c, a + b)
    assert [q["routing_type"] for q in queues_on(abroker, address)] == ["ANYCAST"]


def test_topic_capability_every_receiver_gets_every_message(abroker, clients):
    c = clients(abroker)
    address = unique("tcap")
    r1 = c.create_receiver(address, credit=10, name=unique("r1"), options=Capabilities("topic"))
    r2 = c.create_receiver(address, credit=10, name=unique("r2"), options=Capabilities("topic"))
    s = c.create_sender(address, options=Capabilities("topic"))
    send_all(s, texts("t1", "t2", "t3"))
    a, b = take(c, r1, 3), take(c, r2, 3)
    assert bodies(a) == bodies(b) == ["t1", "t2", "t3"]
    accept_all(c, a + b)
    assert address_status(abroker, address)["routing_types"] == ["MULTICAST"]
    subs = queues_on(abroker, address)
    assert len(subs) == 2 and all(q["routing_type"] == "MULTICAST" for q in subs)


def test_acceptor_anycast_prefix(abroker, clients):
    c = clients(abroker)
    name = unique("pq")
    s = c.create_sender("queue://" + name)
    send_all(s, texts("via prefix"))
    # the prefix is stripped: the queue is the plain name, ANYCAST
    q = wait_queue(abroker, name, message_count=1)
    assert q["routing_type"] == "ANYCAST"
    assert address_status(abroker, "queue://" + name) is None
    r = c.create_receiver(name, credit=1, name=unique("plain"))  # same queue, plain name
    pairs = take(c, r, 1)
    assert bodies(pairs) == ["via prefix"]
    accept_all(c, pairs)
    r.close()
    r2 = c.create_receiver("queue://" + name, credit=1, name=unique("prefixed"))
    send_all(c.create_sender(name, name=unique("plain-sender")), texts("second"))
    pairs = take(c, r2, 1)
    assert bodies(pairs) == ["second"]
    accept_all(c, pairs)
    assert [q["name"] for q in queues_on(abroker, name)] == [name]


def test_acceptor_multicast_prefix(abroker, clients):
    c = clients(abroker)
    name = unique("pt")
    r1 = c.create_receiver("topic://" + name, credit=10, name=unique("r1"))
    r2 = c.create_receiver("topic://" + name, credit=10, name=unique("r2"))
    s = c.create_sender("topic://" + name)
    send_all(s, texts("x", "y"))
    a, b = take(c, r1, 2), take(c, r2, 2)
    assert bodies(a) == bodies(b) == ["x", "y"]
    accept_all(c, a + b)
    assert address_status(abroker, name)["routing_types"] == ["MULTICAST"]


# --------------------------------------------------------------------------- 4. credit


def test_no_credit_no_delivery_then_exactly_the_credit_granted(abroker, clients):
    c = clients(abroker)
    address = unique("credit")
    r = c.create_receiver(address, credit=0)
    s = c.create_sender(address)
    send_all(s, texts(*range(5)))
    wait_queue(abroker, address, message_count=5, consumer_count=1)
    round_trip(c)
    assert r.fetcher.has_message == 0 and r.link.queued == 0
    assert queue_status(abroker, address)["delivering_count"] == 0

    r.link.flow(2)
    pairs = take(c, r, 2)
    assert bodies(pairs) == [0, 1]
    round_trip(c)  # a third would have arrived before the round trip's answer
    assert r.fetcher.has_message == 0
    assert r.link.credit == 0
    assert queue_status(abroker, address)["delivering_count"] == 2

    r.link.flow(1)
    more = take(c, r, 1)
    assert bodies(more) == [2]
    round_trip(c)
    assert r.fetcher.has_message == 0
    accept_all(c, pairs + more)
    wait_queue(abroker, address, message_count=2, delivering_count=0)


def test_drain_with_fewer_messages_available(abroker, clients):
    c = clients(abroker)
    address = unique("drain")
    r = c.create_receiver(address, credit=0)
    s = c.create_sender(address)
    send_all(s, texts("d1", "d2", "d3"))
    wait_queue(abroker, address, message_count=3, consumer_count=1)
    r.link.drain(10)
    c.wait(lambda: r.link.credit == 0, timeout=TIMEOUT, msg="the drain to complete")
    # the flow that ends the drain comes after the transfers
    assert r.fetcher.has_message == 3
    assert not r.link.draining()
    pairs = take(c, r, 3)
    assert bodies(pairs) == ["d1", "d2", "d3"]
    accept_all(c, pairs)
    # credit is spent: a new message waits for new credit
    send_all(s, texts("later"))
    wait_queue(abroker, address, message_count=1, delivering_count=0)
    round_trip(c)
    assert r.fetcher.has_message == 0
    r.link.flow(1)
    assert bodies(take(c, r, 1)) == ["later"]


def test_drain_with_nothing_available_ends_at_once(abroker, clients):
    c = clients(abroker)
    address = unique("drain-empty")
    r = c.create_receiver(address, credit=0)
    wait_queue(abroker, address, consumer_count=1)
    r.link.drain(5)
    c.wait(lambda: r.link.credit == 0, timeout=TIMEOUT, msg="an empty drain to complete")
    assert r.fetcher.has_message == 0


# --------------------------------------------------------------------------- 5. settlement


def test_presettled_sender(abroker, clients):
    c = clients(abroker)
    address = unique("presettled-send")
    s = c.create_sender(address, options=AtMostOnce())
    assert s.link.remote_snd_settle_mode == Link.SND_SETTLED
    send_all(s, texts("p1", "p2", "p3"))
    r = c.create_receiver(address, credit=10)
    pairs = take(c, r, 3)
    assert bodies(pairs) == ["p1", "p2", "p3"]
    accept_all(c, pairs)
    wait_queue(abroker, address, message_count=0)


def test_presettled_receiver(abroker, clients):
    c = clients(abroker)
    address = unique("presettled-recv")
    s = c.create_sender(address)
    send_all(s, texts("a", "b"))
    r = c.create_receiver(address, credit=10, options=AtMostOnce())
    assert r.link.remote_snd_settle_mode == Link.SND_SETTLED
    pairs = take(c, r, 2)
    assert bodies(pairs) == ["a", "b"]
    assert all(d.settled for _, d in pairs)  # the broker settled them on sending
    # consumed without any disposition from us
    q = wait_queue(abroker, address, message_count=0, delivering_count=0)
    assert q["messages_acknowledged"] == 2


def test_unsettled_accept(abroker, clients):
    c = clients(abroker)
    address = unique("accept")
    s = c.create_sender(address)
    d = s.send(Message(body="to accept"))
    assert d.remote_state == Delivery.ACCEPTED
    r = c.create_receiver(address, credit=1)
    pairs = take(c, r, 1)
    _, dlv = pairs[0]
    assert not dlv.settled
    wait_queue(abroker, address, message_count=1, delivering_count=1)
    accept_all(c, pairs)
    q = wait_queue(abroker, address, message_count=0, delivering_count=0)
    assert q["messages_acknowledged"] == 1


def test_rcv_settle_second_asked_by_a_sender_is_answered_first(abroker, clients):
    """A sender asking rcv-settle-mode second gets first, as from Artemis, and settled outcomes."""
    c = clients(abroker)
    address = unique("second-in")
    s = c.create_sender(address, options=RcvSettleSecond())
    assert s.link.remote_rcv_settle_mode == Link.RCV_FIRST
    # The broker settles its outcome without waiting for the client to settle first.
    dlv = s.link.send(Message(body="raw", durable=True))
    c.wait(lambda: dlv.settled, timeout=TIMEOUT, msg="the broker to settle its outcome")
    assert dlv.remote_state == Delivery.ACCEPTED
    dlv.settle()
    # So a client that waits for settlement (BlockingSender.send does) completes its sends.
    for body in ("settle second 1", "settle second 2"):
        done = s.send(Message(body=body, durable=True))
        assert done.settled and done.remote_state == Delivery.ACCEPTED
    r = c.create_receiver(address, credit=3)
    pairs = take(c, r, 3)
    assert bodies(pairs) == ["raw", "settle second 1", "settle second 2"]
    accept_all(c, pairs)
    wait_queue(abroker, address, message_count=0, delivering_count=0)


def test_rcv_settle_second_asked_by_a_receiver_is_answered_first(abroker, clients):
    c = clients(abroker)
    address = unique("second-out")
    c.create_sender(address).send(Message(body="x"))
    r = c.create_receiver(address, credit=1, options=RcvSettleSecond())
    assert r.link.remote_rcv_settle_mode == Link.RCV_FIRST  # Artemis offers first only
    [(msg, dlv)] = take(c, r, 1)
    assert msg.body == "x" and not dlv.settled
    dlv.update(Delivery.ACCEPTED)  # an outcome, not settled: the broker settles and acks
    c.wait(lambda: dlv.settled, timeout=TIMEOUT, msg="the broker to settle")
    dlv.settle()
    q = wait_queue(abroker, address, message_count=0, delivering_count=0)
    assert q["messages_acknowledged"] == 1


# --------------------------------------------------------------------------- 6. dispositions


def test_rejected_goes_to_the_dead_letter_address(abroker, clients):
    c = clients(abroker)
    address = unique("dlq.rejected")
    c.create_sender(address).send(Message(body="poison", properties={"k": "v"}))
    r = c.create_receiver(address, credit=1)
    [(msg, dlv)] = take(c, r, 1)
    settle(dlv, Delivery.REJECTED)
    round_trip(c)
    dlq = f"DLQ.{address}"
    wait_queue(abroker, dlq, message_count=1)
    wait_queue(abroker, address, message_count=0)
    d = c.create_receiver(f"DLQ::{dlq}", credit=1, name=unique("dlq"))
    [(dead, dd)] = take(c, d, 1)
    assert dead.body == "poison" and dead.properties == {"k": "v"}
    assert dead.annotations[symbol("x-opt-ORIG-ADDRESS")] == address
    settle(dd)
    round_trip(c)
    assert r.fetcher.has_message == 0  # not redelivered to the original receiver


def test_released_is_redelivered_with_delivery_count_unchanged(abroker, clients):
    c = clients(abroker)
    address = unique("released")
    c.create_sender(address).send(Message(body="again"))
    r = c.create_receiver(address, credit=10)
    [(m1, d1)] = take(c, r, 1)
    assert m1.delivery_count == 0
    settle(d1, Delivery.RELEASED)
    [(m2, d2)] = take(c, r, 1)
    assert m2.body == "again"
    assert m2.delivery_count == 0
    settle(d2)


def test_modified_delivery_failed_increments_delivery_count(abroker, clients):
    c = clients(abroker)
    address = unique("modified-failed")
    c.create_sender(address).send(Message(body="fails"))
    r = c.create_receiver(address, credit=10)
    [(m1, d1)] = take(c, r, 1)
    assert m1.delivery_count == 0
    settle(d1, Delivery.MODIFIED, failed=True)
    [(m2, d2)] = take(c, r, 1)
    assert m2.body == "fails" and m2.delivery_count == 1
    settle(d2, Delivery.MODIFIED, failed=True)
    [(m3, d3)] = take(c, r, 1)
    assert m3.delivery_count == 2
    settle(d3)


def test_modified_undeliverable_here_goes_to_another_receiver(abroker, clients):
    c = clients(abroker)
    address = unique("undeliverable")
    s = c.create_sender(address)
    s.send(Message(body="not for r1"))
    r1 = c.create_receiver(address, credit=10, name=unique("r1"))
    [(m1, d1)] = take(c, r1, 1)
    settle(d1, Delivery.MODIFIED, undeliverable=True)
    # r1 still has credit: were the message redelivered to it, it would come
    # before the answer to r2's attach.
    r2 = c.create_receiver(address, credit=10, name=unique("r2"))
    assert r1.fetcher.has_message == 0
    [(m2, d2)] = take(c, r2, 1)
    assert m2.body == "not for r1"
    assert m2.delivery_count == 0  # undeliverable-here without delivery-failed
    settle(d2)
    round_trip(c)
    wait_queue(abroker, address, message_count=0)
    assert r1.fetcher.has_message == 0


def test_max_delivery_attempts_via_modified_failed_dead_letters(abroker, clients):
    c = clients(abroker)
    address = unique("dlq.attempts")
    c.create_sender(address).send(Message(body="three strikes"))
    r = c.create_receiver(address, credit=10)
    for attempt in range(3):  # max-delivery-attempts is 3 for dlq.#
        [(m, d)] = take(c, r, 1)
        assert m.body == "three strikes" and m.delivery_count == attempt
        settle(d, Delivery.MODIFIED, failed=True)
    round_trip(c)
    dlq = f"DLQ.{address}"
    wait_queue(abroker, dlq, message_count=1)
    wait_queue(abroker, address, message_count=0)
    round_trip(c)
    assert r.fetcher.has_message == 0
    d = c.create_receiver(f"DLQ::{dlq}", credit=1, name=unique("dlq"))
    [(dead, dd)] = take(c, d, 1)
    assert dead.body == "three strikes"
    assert dead.annotations[symbol("x-opt-ORIG-ADDRESS")] == address
    settle(dd)


# --------------------------------------------------------------------------- 7. subscriptions


def durable_receiver(conn, address, name, credit=10):
    return conn.create_receiver(
        address, credit=credit, name=name, options=[DurableSubscription(), Capabilities("topic")]
    )


def test_durable_subscription_keeps_messages_while_detached(abroker, clients):
    cid, name, address = unique("dur-client"), unique("sub"), unique("dur-topic")
    c = clients(abroker, container_id=cid)
    r = durable_receiver(c, address, name)
    queue = f"{cid}.{name}"
    q = wait_queue(abroker, queue, consumer_count=1)
    assert q["durable"] and q["routing_type"] == "MULTICAST" and q["address"] == address
    pub = clients(abroker)
    s = pub.create_sender(address, options=Capabilities("topic"))
    s.send(Message(body="while attached", durable=True))
    pairs = take(c, r, 1)
    assert bodies(pairs) == ["while attached"]
    accept_all(c, pairs)

    r.link.detach()  # detach, not close: the subscription stays
    round_trip(c)
    wait_queue(abroker, queue, consumer_count=0)
    s.send(Message(body="while away 1", durable=True))
    s.send(Message(body="while away 2", durable=True))
    wait_queue(abroker, queue, message_count=2)

    r2 = durable_receiver(c, address, name)
    pairs = take(c, r2, 2)
    assert bodies(pairs) == ["while away 1", "while away 2"]
    accept_all(c, pairs)
    wait_queue(abroker, queue, message_count=0, consumer_count=1)


def test_durable_subscription_survives_a_restart(broker_factory):
    b = broker_factory("dursub").start()
    cid, name, address = unique("dur-client"), unique("sub"), unique("dur-topic")
    queue = f"{cid}.{name}"
    c = BlockingConnection(b.amqp_url, timeout=TIMEOUT, container_id=cid)
    try:
        r = durable_receiver(c, address, name)
        wait_queue(b, queue, consumer_count=1)
        r.link.detach()
        round_trip(c)
        wait_queue(b, queue, consumer_count=0)
        p = BlockingConnection(b.amqp_url, timeout=TIMEOUT)
        try:
            p.create_sender(address, options=Capabilities("topic")).send(
                Message(body="before restart", durable=True)
            )
        finally:
            close_quietly(p)
    finally:
        close_quietly(c)
    wait_queue(b, queue, message_count=1)

    b.restart()
    wait_queue(b, queue, message_count=1, durable=True)
    c = BlockingConnection(b.amqp_url, timeout=TIMEOUT, container_id=cid)
    p = BlockingConnection(b.amqp_url, timeout=TIMEOUT)
    try:
        r = durable_receiver(c, address, name)
        p.create_sender(address, options=Capabilities("topic")).send(
            Message(body="after restart", durable=True)
        )
        pairs = take(c, r, 2)
        assert bodies(pairs) == ["before restart", "after restart"]
        accept_all(c, pairs)
        wait_queue(b, queue, message_count=0)
    finally:
        close_quietly(p)
        close_quietly(c)


def test_closing_a_durable_subscriber_removes_the_subscription(abroker, clients):
    cid, name, address = unique("dur-client"), unique("sub"), unique("dur-topic")
    c = clients(abroker, container_id=cid)
    pub = clients(abroker)
    r = durable_receiver(c, address, name)
    queue = f"{cid}.{name}"
    wait_queue(abroker, queue, consumer_count=1)
    r.close()  # close, not detach: unsubscribe
    wait_queue_gone(abroker, queue)
    s = pub.create_sender(address, options=Capabilities("topic"))
    s.send(Message(body="nobody subscribed", durable=True))
    # a new subscription of the same name starts empty
    r2 = durable_receiver(c, address, name)
    s.send(Message(body="after resubscribe", durable=True))
    pairs = take(c, r2, 1)
    assert bodies(pairs) == ["after resubscribe"]
    accept_all(c, pairs)


def _shared_split(conn_a, ra, conn_b, rb, sender, n: int) -> tuple[list, list]:
    sent = [f"s{i}" for i in range(n)]
    send_all(sender, texts(*sent))

    def have_all():
        for conn in {id(conn_a): conn_a, id(conn_b): conn_b}.values():
            pump(conn)
        return ra.fetcher.has_message + rb.fetcher.has_message >= n

    wait_for(have_all, TIMEOUT, what=f"{n} messages across two shared receivers")
    round_trip(conn_a)
    round_trip(conn_b)
    a = take(conn_a, ra, ra.fetcher.has_message)
    b = take(conn_b, rb, rb.fetcher.has_message)
    got = bodies(a) + bodies(b)
    assert sorted(got) == sorted(sent) and len(got) == n  # each message once across both
    accept_all(conn_a, a)
    accept_all(conn_b, b)
    return bodies(a), bodies(b)


def test_shared_subscription_on_one_container(abroker, clients):
    # Qpid JMS style: one client id, the second consumer's link is "name|2".
    cid, name, address = unique("shared-client"), unique("shsub"), unique("shared-topic")
    c = clients(abroker, container_id=cid)
    caps = Capabilities("topic", "shared")
    ra = c.create_receiver(address, credit=10, name=name, options=caps)
    rb = c.create_receiver(address, credit=10, name=f"{name}|2", options=caps)
    # one subscription queue (a MULTICAST one: a topic subscription), two consumers
    subs = queues_on(abroker, address)
    assert len(subs) == 1, subs
    assert subs[0]["routing_type"] == "MULTICAST" and subs[0]["consumer_count"] == 2, subs
    assert not subs[0]["durable"]
    s = clients(abroker).create_sender(address, options=Capabilities("topic"))
    a, b = _shared_split(c, ra, c, rb, s, 10)
    assert a and b


def test_shared_global_durable_subscription_across_containers(abroker, clients):
    name, address = unique("gsub"), unique("global-topic")
    c1, c2 = clients(abroker), clients(abroker)
    caps = Capabilities("topic", "shared", "global")
    ra = c1.create_receiver(address, credit=10, name=name, options=[caps, DurableSubscription()])
    rb = c2.create_receiver(address, credit=10, name=name, options=[caps, DurableSubscription()])
    # global: one subscription for both containers (the link name names it)
    subs = queues_on(abroker, address)
    assert len(subs) == 1, subs
    q = subs[0]
    assert q["consumer_count"] == 2 and q["durable"] and q["routing_type"] == "MULTICAST", q
    s = clients(abroker).create_sender(address, options=Capabilities("topic"))
    a, b = _shared_split(c1, ra, c2, rb, s, 10)
    assert a and b
    ra.close()
    rb.close()
    wait_queue_gone(abroker, q["name"])  # the last close unsubscribes


# --------------------------------------------------------------------------- 8. dynamic nodes


def test_dynamic_receiver_reply_to_pattern(abroker, clients):
    service, requester = clients(abroker), clients(abroker)
    replies = requester.create_receiver(None, dynamic=True, credit=10)
    address = replies.link.remote_source.address
    assert address  # named by the broker
    q = wait_queue(abroker, address, consumer_count=1)
    assert q["temporary"] and not q["durable"]

    requests = unique("service")
    svc_in = service.create_receiver(requests, credit=10)
    svc_out = service.create_sender(None)  # replies go to each request's reply-to
    requester.create_sender(requests).send(
        Message(body="ping", reply_to=address, correlation_id="c-1")
    )
    [(req, rd)] = take(service, svc_in, 1)
    assert req.reply_to == address
    svc_out.send(Message(body="pong", address=req.reply_to, correlation_id=req.correlation_id))
    settle(rd)
    [(rep, repd)] = take(requester, replies, 1)
    assert rep.body == "pong" and rep.correlation_id == "c-1"
    settle(repd)
    # a sender link attached to the dynamic address reaches it too
    service.create_sender(address, name=unique("direct")).send(Message(body="direct"))
    [(rep, repd)] = take(requester, replies, 1)
    assert rep.body == "direct"
    settle(repd)
    round_trip(requester)

    replies.close()
    wait_queue_gone(abroker, address)


# --------------------------------------------------------------------------- 9. anonymous relay


def test_anonymous_relay_routes_by_to(abroker, clients):
    c = clients(abroker)
    a1, a2 = unique("relay-a"), unique("relay-b")
    r1 = c.create_receiver(a1, credit=10, name=unique("r1"))
    r2 = c.create_receiver(a2, credit=10, name=unique("r2"))
    relay = c.create_sender(None)
    assert relay.link.remote_target.address is None
    for body, to in (("1a", a1), ("1b", a2), ("2a", a1), ("2b", a2)):
        d = relay.send(Message(body=body, address=to))
        assert d.remote_state == Delivery.ACCEPTED
    a, b = take(c, r1, 2), take(c, r2, 2)
    assert bodies(a) == ["1a", "2a"] and bodies(b) == ["1b", "2b"]
    accept_all(c, a + b)
    # a 'to' carrying the acceptor's anycast prefix resolves like a link address
    relay.send(Message(body="prefixed", address="queue://" + a1))
    assert bodies(take(c, r1, 1)) == ["prefixed"]
    # a message with no 'to' on the relay cannot be routed: rejected
    dlv = relay.link.send(Message(body="nowhere"))
    c.wait(lambda: dlv.remote_state, timeout=TIMEOUT, msg="outcome of an address-less send")
    assert dlv.remote_state == Delivery.REJECTED


# --------------------------------------------------------------------------- 10. selectors


def test_selector_only_gets_matching_messages(abroker, clients):
    c = clients(abroker)
    address = unique("selector")
    s = c.create_sender(address)
    r = c.create_receiver(address, credit=10, options=Selector("color = 'red'"))
    for i, color in enumerate(["blue", "red", "green", "red"]):
        s.send(Message(body=f"{color}-{i}", properties={"color": color}))
    pairs = take(c, r, 2)
    assert bodies(pairs) == ["red-1", "red-3"]
    accept_all(c, pairs)
    round_trip(c)
    assert r.fetcher.has_message == 0
    # the others stay for consumers without that selector
    assert wait_queue(abroker, address, message_count=2)
    plain = c.create_receiver(address, credit=10, name=unique("all"))
    rest = take(c, plain, 2)
    assert bodies(rest) == ["blue-0", "green-2"]
    accept_all(c, rest)


def test_invalid_selector_is_refused(abroker, clients):
    c = clients(abroker)
    address = unique("bad-selector")
    with pytest.raises(LinkDetached) as info:
        c.create_receiver(address, credit=10, options=Selector("color = = 'red'"))
    assert info.value.condition == "amqp:invalid-field"
    # the connection is fine afterwards
    s = c.create_sender(address)
    s.send(Message(body="ok"))
    r = c.create_receiver(address, credit=1, name=unique("good"))
    assert r.receive(timeout=TIMEOUT).body == "ok"
    r.accept()


# --------------------------------------------------------------------------- 11. transactions


class TxRecorder(TransactionHandler):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_transaction_declared(self, event) -> None:
        self.events.append("declared")

    def on_transaction_declare_failed(self, event) -> None:
        self.events.append("declare_failed")

    def on_transaction_committed(self, event) -> None:
        self.events.append("committed")

    def on_transaction_commit_failed(self, event) -> None:
        self.events.append("commit_failed")

    def on_transaction_aborted(self, event) -> None:
        self.events.append("aborted")


class Tx:
    """A local transaction declared on a blocking connection's container."""

    def __init__(self, conn: BlockingConnection) -> None:
        self.conn = conn
        self.rec = TxRecorder()
        self.txn = conn.container.declare_transaction(conn.conn, handler=self.rec)
        conn.wait(lambda: self.rec.events, timeout=TIMEOUT, msg="transaction declared")
        assert self.rec.events == ["declared"], self.rec.events

    def send(self, sender, message: Message) -> Delivery:
        dlv = self.txn.send(sender.link, message)
        self.conn.wait(lambda: dlv.remote_state, timeout=TIMEOUT, msg="transactional send outcome")
        return dlv

    def commit(self) -> None:
        self.txn.commit()
        self.conn.wait(lambda: len(self.rec.events) > 1, timeout=TIMEOUT, msg="commit outcome")
        assert self.rec.events[-1] == "committed", self.rec.events

    def abort(self) -> None:
        self.txn.abort()
        self.conn.wait(lambda: len(self.rec.events) > 1, timeout=TIMEOUT, msg="rollback outcome")
        assert self.rec.events[-1] == "aborted", self.rec.events


def test_transactional_sends_appear_on_commit_only(abroker, clients):
    producer, consumer = clients(abroker), clients(abroker)
    address = unique("tx-send")
    r = consumer.create_receiver(address, credit=10)
    wait_queue(abroker, address, consumer_count=1)
    s = producer.create_sender(address)

    tx = Tx(producer)
    for body in ("tx-1", "tx-2"):
        dlv = tx.send(s, Message(body=body))
        assert dlv.remote_state == 0x34  # transactional-state
        assert dlv.remote.data[1].descriptor == ulong(0x24)  # ...carrying accepted
    round_trip(producer)
    assert queue_status(abroker, address)["message_count"] == 0
    round_trip(consumer)
    assert r.fetcher.has_message == 0  # invisible before the commit
    tx.commit()
    pairs = take(consumer, r, 2)
    assert bodies(pairs) == ["tx-1", "tx-2"]
    accept_all(consumer, pairs)

    tx = Tx(producer)
    tx.send(s, Message(body="rolled back"))
    tx.abort()
    s.send(Message(body="marker"))  # outside any transaction
    pairs = take(consumer, r, 1)
    assert bodies(pairs) == ["marker"]  # the rolled-back send never arrives
    accept_all(consumer, pairs)
    wait_queue(abroker, address, message_count=0)


def test_transactional_acceptance_rollback_and_commit(abroker, clients):
    c = clients(abroker)
    address = unique("tx-ack")
    send_all(c.create_sender(address), texts("one", "two"))
    r = c.create_receiver(address, credit=0)
    r.link.flow(2)
    first = take(c, r, 2)
    assert bodies(first) == ["one", "two"]

    tx = Tx(c)
    for _, d in first:
        tx.txn.accept(d)
    round_trip(c)
    assert queue_status(abroker, address)["message_count"] == 2  # not acked before discharge
    tx.abort()
    r.link.flow(2)
    again = take(c, r, 2)
    assert bodies(again) == ["one", "two"]  # redelivered after the rollback

    tx = Tx(c)
    for _, d in again:
        tx.txn.accept(d)
    tx.commit()
    q = wait_queue(abroker, address, message_count=0, delivering_count=0)
    assert q["messages_acknowledged"] == 2
    r.link.flow(5)
    round_trip(c)
    assert r.fetcher.has_message == 0  # committed: gone for good


def test_transactional_acceptance_naming_a_discharged_transaction_is_refused(abroker, clients):
    c = clients(abroker)
    address = unique("tx-gone")
    send_all(c.create_sender(address), texts("one", "two"))
    r = c.create_receiver(address, credit=0)
    r.link.flow(2)
    [(_, d1), (_, d2)] = take(c, r, 2)
    tx = Tx(c)
    stale_id = tx.txn.id
    tx.txn.accept(d1)
    tx.commit()
    wait_queue(abroker, address, message_count=1, delivering_count=1)  # "one" is gone, "two" is out
    # The same (now discharged) transaction names the second acceptance.
    d2.local.data = [stale_id, Described(ulong(0x24), [])]
    d2.update(0x34)
    with pytest.raises(LinkDetached) as detached:
        c.wait(lambda: r.link.state & Endpoint.REMOTE_CLOSED, timeout=TIMEOUT, msg="the link refused")
    assert detached.value.condition == "amqp:transaction:unknown-id"
    assert "unknown transaction id" in r.link.remote_condition.description
    # Not acknowledged, not stuck: "two" is back in the queue for the next receiver.
    wait_queue(abroker, address, message_count=1, delivering_count=0, consumer_count=0)
    again = c.create_receiver(address, credit=1, name=unique("again"))
    [(msg, dlv)] = take(c, again, 1)
    assert msg.body == "two" and msg.delivery_count == 1  # redelivered
    accept_all(c, [(msg, dlv)])
    q = wait_queue(abroker, address, message_count=0, delivering_count=0)
    assert q["messages_acknowledged"] == 2


# --------------------------------------------------------------------------- 12. address full

FULL_SETTINGS = (
    '<address-setting match="block.#"><max-size-bytes>10000</max-size-bytes>'
    "<address-full-policy>BLOCK</address-full-policy></address-setting>"
    '<address-setting match="fail.#"><max-size-bytes>10000</max-size-bytes>'
    "<address-full-policy>FAIL</address-full-policy></address-setting>"
)


@pytest.fixture(scope="module")
def full_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    """Small producer credit (10, topped up below 3) so a withheld grant shows at once."""
    yield from _module_broker(
        tmp_path_factory,
        "full",
        address_settings_xml=FULL_SETTINGS,
        amqp_acceptor_params={"amqpCredits": "10", "amqpLowCredits": "3"},
    )


def test_address_full_block_withholds_credit_until_drained(full_broker, clients):
    c = clients(full_broker)
    address = unique("block.addr")
    s = c.create_sender(address)
    total = 40  # ~40 KB into a 10 KB address
    dlvs: list[Delivery] = []

    def push() -> None:
        while len(dlvs) < total and s.link.credit > 0:
            dlvs.append(s.link.send(Message(body=b"%04d" % len(dlvs) + b"x" * 996)))

    def stalled() -> bool:
        push()
        if s.link.credit > 0 or len(dlvs) >= total:
            return False
        round_trip(c)  # the broker has seen every send: did it grant more?
        return s.link.credit == 0

    wait_for(stalled, TIMEOUT, interval=0.001, what="the producer to be left without credit")
    stalled_at = len(dlvs)
    assert stalled_at < total
    round_trip(c)
    assert s.link.credit == 0 and len(dlvs) == stalled_at
    settled = sum(1 for d in dlvs if d.remote_state)
    assert settled < stalled_at  # at least the held sends have no outcome yet
    addr = address_status(full_broker, address)
    assert addr["blocked_producers"] >= 1 and addr["size_bytes"] <= 11000, addr

    consumer = clients(full_broker)
    r = consumer.create_receiver(address, credit=50)
    got: list = []

    def consume() -> bool:
        push()
        pump(c)
        while r.fetcher.has_message:
            m, d = r.fetcher.incoming.popleft()
            got.append(bytes(m.body[:4]))
            settle(d)
        pump(consumer)
        return len(got) >= total

    wait_for(consume, 20, interval=0.001, what=f"{total} messages through a BLOCKed address")
    assert got == [b"%04d" % i for i in range(total)]  # none lost, none twice, in order
    c.wait(lambda: all(d.remote_state for d in dlvs), timeout=TIMEOUT, msg="all outcomes")
    assert {d.remote_state for d in dlvs} == {Delivery.ACCEPTED}


def test_address_full_fail_rejects_with_resource_limit_exceeded(full_broker, clients):
    c = clients(full_broker)
    address = unique("fail.addr")
    s = c.create_sender(address)
    outcomes = []
    for i in range(15):  # ~15 KB into a 10 KB address
        dlv = s.link.send(Message(body=b"x" * 1000))
        c.wait(lambda d=dlv: d.remote_state, timeout=TIMEOUT, msg=f"outcome of send {i}")
        outcomes.append(dlv)
    states = [d.remote_state for d in outcomes]
    accepted = states.index(Delivery.REJECTED)
    assert accepted >= 5 and all(st == Delivery.ACCEPTED for st in states[:accepted])
    assert all(st == Delivery.REJECTED for st in states[accepted:])
    cond = outcomes[accepted].remote.condition
    assert cond is not None and cond.name == "amqp:resource-limit-exceeded", cond
    # none of the rejected ones were stored
    wait_queue(full_broker, address, message_count=accepted)


# --------------------------------------------------------------------------- 13. durability


def test_accepted_durable_messages_survive_restart_and_kill9(broker_factory):
    b = broker_factory("durable").start()
    address = unique("durable")

    def send(bodies_: list[str], durable: bool = True) -> None:
        c = BlockingConnection(b.amqp_url, timeout=TIMEOUT)
        try:
            s = c.create_sender(address)
            for body in bodies_:
                assert s.send(Message(body=body, durable=durable)).remote_state == Delivery.ACCEPTED
        finally:
            close_quietly(c)

    def receive_all() -> list[str]:
        c = BlockingConnection(b.amqp_url, timeout=TIMEOUT)
        try:
            n = queue_status(b, address)["message_count"]
            r = c.create_receiver(address, credit=max(n, 1))
            pairs = take(c, r, n)
            round_trip(c)
            assert r.fetcher.has_message == 0
            for m, _ in pairs:
                assert m.durable
            accept_all(c, pairs)
            return bodies(pairs)
        finally:
            close_quietly(c)

    durable_1 = [f"graceful-{i}" for i in range(10)]
    send(durable_1[:5])
    send(["not durable"], durable=False)
    send(durable_1[5:])
    b.restart()
    assert receive_all() == durable_1  # the non-durable one did not survive

    durable_2 = [f"crash-{i}" for i in range(10)]
    send(durable_2)
    b.kill9()  # no shutdown: only what was synced before ACCEPTED is there
    b.start()
    assert receive_all() == durable_2


# --------------------------------------------------------------------------- 14. mapping


class RawReceiver(Handler):
    """Keeps each delivery's bytes as they came off the wire, and accepts it."""

    def __init__(self) -> None:
        self.got: list[bytes] = []

    def on_delivery(self, event) -> None:
        dlv, link = event.delivery, event.link
        if dlv.readable and not dlv.partial:
            self.got.append(bytes(link.recv(dlv.pending)))
            link.advance()
            dlv.update(Delivery.ACCEPTED)
            dlv.settle()
            link.flow(1)


def split_sections(raw: bytes) -> list[tuple[int, bytes]]:
    """(descriptor code, encoded bytes) of each section of an encoded message."""
    out, pos = [], 0
    while pos < len(raw):
        d = Data()
        n = d.decode(raw[pos:])
        d.rewind()
        d.next()
        section = d.get_object()
        assert isinstance(section, Described), section
        out.append((int(section.descriptor), raw[pos : pos + n]))
        pos += n
    return out


HEADER, DELIVERY_ANNOTATIONS, FOOTER = 0x70, 0x71, 0x78


def bare_and_annotations(raw: bytes) -> bytes:
    """Everything but the header and delivery annotations, byte for byte."""
    return b"".join(
        b for code, b in split_sections(raw) if code not in (HEADER, DELIVERY_ANNOTATIONS)
    )


def full_message(
    address: str, body, *, inferred: bool = False, message_id=None, correlation_id=None
) -> Message:
    m = Message(
        id=message_id if message_id is not None else uuid.uuid4(),
        user_id=b"mapping-user",
        address=address,
        subject="the subject",
        reply_to="reply-here",
        correlation_id=correlation_id if correlation_id is not None else b"\x00\x01corr",
        content_type="application/x-test",
        content_encoding="identity",
        expiry_time=4102444800.0,  # absolute-expiry-time 2100-01-01
        creation_time=1700000000.123,
        group_id="group-a",
        group_sequence=42,
        reply_to_group_id="reply-group",
        durable=True,
        priority=7,
        ttl=120.0,
        properties={
            "int": int32(-7),
            "long": 1 << 40,
            "float": float32(1.5),
            "double": 2.25,
            "bool": True,
            "string": "text ☃",
            "bytes": b"\x00\xffbin",
            "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "char": char("Z"),
            "timestamp": timestamp(1700000000123),
            "short": short(-300),
            "byte": byte(-5),
            "ubyte": ubyte(200),
            "ushort": ushort(60000),
            "uint": uint(4000000000),
            "ulong": ulong(1 << 63),
            "symbol": symbol("a-symbol"),
            "null": None,
            "decimal32": decimal32(7),
            "decimal64": decimal64(8),
            "decimal128": decimal128(b"\x01" * 16),
        },
        annotations={symbol("x-opt-custom"): "annotation", symbol("x-opt-number"): 42},
        instructions={symbol("x-opt-hop"): "delivery annotation"},
        body=body,
    )
    m.inferred = inferred
    return m


FOOTER_BYTES = _described(FOOTER, {symbol("footer-key"): "footer-value", symbol("n"): ulong(9)})

PROPERTY_FIELDS = (
    "id",
    "user_id",
    "address",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "expiry_time",
    "creation_time",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
)


def _typed(value):
    if isinstance(value, memoryview):
        value = bytes(value)
    return (type(value).__name__, value)


BODIES = {
    "data": (b"\x00\x01\x02 binary data", True),
    "value-string": ("a string ☃", False),
    "value-binary": (b"binary amqp-value", False),
    "value-map": ({"k": [1, "two", None], "n": None, symbol("s"): 1.5}, False),
    "value-list": ([1, "two", [3], {"four": 4}], False),
    "value-null": (None, False),
    "sequence": ([1, "two", None, b"three"], True),
}
IDS = {
    "data": (uuid.uuid4(), b"\x00\x01corr"),
    "value-string": ("string-id", "string-corr"),
    "value-binary": (b"\x01binary-id", uuid.uuid4()),
    "value-map": (ulong(12345), ulong(678)),
    "value-list": ("list-id", "c"),
    "value-null": (ulong(1), b"x"),
    "sequence": (uuid.uuid4(), "seq-corr"),
}


def _roundtrip_raw(broker: BrokerProcess, clients, address: str, payload: bytes) -> bytes:
    """Send ``payload`` as one delivery to ``address``; the bytes a receiver gets back."""
    c = clients(broker)
    raw = RawReceiver()
    # keep the BlockingReceiver referenced: its __del__ unhooks the handler
    receiver = c.create_receiver(address, credit=1, handler=raw, name=unique("raw"))
    s = c.create_sender(address)
    dlv = s.link.delivery(s.link.delivery_tag())
    s.link.send(payload)
    s.link.advance()
    c.wait(lambda: dlv.remote_state, timeout=TIMEOUT, msg="outcome of a raw send")
    assert dlv.remote_state == Delivery.ACCEPTED, dlv.remote.condition
    dlv.settle()
    c.wait(lambda: raw.got, timeout=TIMEOUT, msg="the raw message back")
    assert receiver.link.remote_source.address == address
    return raw.got[0]


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_amqp_to_amqp_is_lossless(abroker, clients, kind):
    address = unique(f"map-{kind}")
    body, inferred = BODIES[kind]
    message_id, correlation_id = IDS[kind]
    sent = full_message(
        address, body, inferred=inferred, message_id=message_id, correlation_id=correlation_id
    )
    payload = bytes(sent.encode()) + FOOTER_BYTES
    received = _roundtrip_raw(abroker, clients, address, payload)

    got = Message()
    got.decode(received)
    for field in PROPERTY_FIELDS:
        assert _typed(getattr(got, field)) == _typed(getattr(sent, field)), field
    # user-id is not checked against the (here absent) authenticated user:
    # the broker passes it through, as Artemis does by default.
    assert got.properties.keys() == sent.properties.keys()
    for key, value in sent.properties.items():
        assert _typed(got.properties[key]) == _typed(value), key
    assert dict(got.annotations) == dict(sent.annotations)
    if isinstance(body, bytes) and not inferred:
        assert bytes(got.body) == body
    else:
        assert got.body == body
    assert got.inferred == sent.inferred
    # header: durable and priority kept, ttl is what remains of it
    assert got.durable and got.priority == 7
    assert 0 < got.ttl <= sent.ttl
    assert got.delivery_count == 0
    # and byte for byte: annotations, properties, application properties,
    # body and footer exactly as sent (delivery annotations are hop-by-hop)
    assert bare_and_annotations(received) == bare_and_annotations(payload)
    codes = [code for code, _ in split_sections(received)]
    assert codes[-1] == FOOTER and DELIVERY_ANNOTATIONS not in codes


def test_absolute_expiry_beyond_a_uint_ttl_is_delivered(abroker, clients):
    # The header ttl is a uint of milliseconds (~49.7 days).  A message with
    # only an absolute-expiry-time a year ahead must still be delivered, its
    # expiry intact (it once broke the queue's delivery pass).
    c = clients(abroker)
    address = unique("far-expiry")
    expiry = round(time.time() + 365 * 86400, 3)
    s = c.create_sender(address)
    s.send(Message(body="next year", expiry_time=expiry))
    s.send(Message(body="after it"))
    r = c.create_receiver(address, credit=10)
    pairs = take(c, r, 2)
    assert bodies(pairs) == ["next year", "after it"]
    assert pairs[0][0].expiry_time == pytest.approx(expiry, abs=0.001)
    accept_all(c, pairs)
    wait_queue(abroker, address, message_count=0)


@pytest.mark.parametrize(
    "sections",
    [
        [(0x75, b"first data section"), (0x75, b""), (0x75, b"third")],
        [(0x76, [1, "a"]), (0x76, []), (0x76, [None, b"b", [2]])],
    ],
    ids=["multiple-data", "multiple-sequences"],
)
def test_multiple_body_sections_are_lossless(abroker, clients, sections):
    address = unique("map-multi")
    head = full_message(address, None)
    encoded = split_sections(bytes(head.encode()))
    # keep everything up to the body, replace the body with several sections
    before_body = b"".join(b for code, b in encoded if code < 0x75)
    body = b"".join(_described(code, value) for code, value in sections)
    payload = before_body + body + FOOTER_BYTES
    received = _roundtrip_raw(abroker, clients, address, payload)
    assert bare_and_annotations(received) == bare_and_annotations(payload)
    codes = [code for code, _ in split_sections(received)]
    assert codes[-(len(sections) + 1) : -1] == [code for code, _ in sections]
