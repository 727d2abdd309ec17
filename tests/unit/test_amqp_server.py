"""The AMQP 1.0 server on StringTransport + Clock, driven by a real proton client engine.

:class:`AmqpProtocol` runs against the in-memory broker of
:mod:`tests.unit.stomp_fixtures` (a :class:`BrokerServer` on a
:class:`~twisted.internet.task.Clock`).  The other end is proton's own client
engine (``proton.Transport()`` + ``Connection``, SASL ANONYMOUS or PLAIN):
:meth:`AmqpClient.pump` moves bytes between the client engine and the
protocol until neither has anything left to say, so what the server wrote is
decoded by the reference implementation, not by our codec.  Hostile input is
written into the protocol directly (:meth:`AmqpClient.inject`); the server's
answer still goes to the client engine, which reports the close condition.

Covered: open/close and the container id, send and receive, the idle timeout
(and a heart-beating client surviving it), the connect timeout, malformed
input of every layer (protocol header, framing, performative encoding,
illegal state transitions) closing only the connection that sent it, a
Hypothesis fuzz of bytes after a valid opening, and the multi-protocol
acceptor (:class:`ProtocolSwitch`) telling STOMP from AMQP from garbage.
No test leaves a delayed call of a protocol behind on the clock.
"""

from __future__ import annotations

import logging

import proton
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from proton import Data, Delivery, Described, Endpoint, Message, symbol, uint, ulong
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from junction.brokercore.amqp_server import AmqpFactory, AmqpProtocol
from junction.brokercore.stomp_server import StompFactory, StompProtocol
from junction.config.model import Acceptor
from junction.edge.acceptor import MultiProtocolFactory, ProtocolSwitch
from junction.protocols.amqp.sasl import AMQP_HEADER, SASL_HEADER
from tests.unit.stomp_fixtures import ACCEPTOR as STOMP_ACCEPTOR
from tests.unit.stomp_fixtures import Broker, Limits, SecuritySetting

REMOTE_CLOSED = Endpoint.REMOTE_CLOSED
REMOTE_ACTIVE = Endpoint.REMOTE_ACTIVE


def amqp_acceptor(**params) -> Acceptor:
    return Acceptor(
        name="amqp",
        scheme="tcp",
        host="127.0.0.1",
        port=0,
        protocols=frozenset({"AMQP"}),
        params={k: str(v) for k, v in params.items()},
    )


_ports = iter(range(40000, 60000))


def new_transport() -> StringTransport:
    return StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", next(_ports)))


def lose(protocol, transport) -> None:
    """Deliver connectionLost as the reactor would, to whatever owns the transport now."""
    owner = getattr(transport, "protocol", None) or protocol
    owner.connectionLost(Failure(ConnectionDone("closed")))


# -- wire helpers (proton's codec) -----------------------------------------------------


def encode(value) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def frame(body: bytes, channel: int = 0, ftype: int = 0, doff: int = 2) -> bytes:
    ext = b"\x00" * (doff * 4 - 8)
    return (8 + len(ext) + len(body)).to_bytes(4, "big") + bytes((doff, ftype)) + channel.to_bytes(2, "big") + ext + body


def performative(code: int, fields: list, channel: int = 0, payload: bytes = b"") -> bytes:
    return frame(encode(Described(ulong(code), fields)) + payload, channel)


OPEN, BEGIN, ATTACH, TRANSFER = 0x10, 0x11, 0x12, 0x14


# -- the proton client ------------------------------------------------------------------


class AmqpClient:
    """One AMQP connection: a proton client engine wired to an AmqpProtocol.

    ``mechs`` None sends no SASL layer at all (the bare AMQP header).
    ``idle_timeout`` (seconds) makes the client advertise one, so the server
    heart-beats it; the client heart-beats the server only when :meth:`tick`
    is called, as a real client's reactor would.
    """

    def __init__(
        self,
        broker: Broker,
        acceptor: Acceptor | None = None,
        *,
        factory=None,
        mechs: str | None = "ANONYMOUS",
        user: str | None = None,
        password: str | None = None,
        container: str = "client-1",
        open: bool = True,
        idle_timeout: float | None = None,
        max_frame_size: int | None = None,
    ):
        self.broker = broker
        if factory is None:
            factory = AmqpFactory(
                broker.server, acceptor=acceptor or amqp_acceptor(), limits=broker.limits, reactor=broker.clock
            )
        self.factory = factory
        self.transport = new_transport()
        self.protocol = factory.buildProtocol(self.transport.getPeer())
        self.transport.protocol = self.protocol
        self.protocol.makeConnection(self.transport)
        self.pn = proton.Transport()  # client mode
        if mechs is not None:
            sasl = self.pn.sasl()
            sasl.allowed_mechs(mechs)
            sasl.allow_insecure_mechs = True  # PLAIN without TLS
        if idle_timeout is not None:
            self.pn.idle_timeout = idle_timeout
        if max_frame_size is not None:
            self.pn.max_frame_size = max_frame_size
        self.conn = proton.Connection()
        self.conn.container = container
        self.conn.hostname = "localhost"
        if user is not None:
            self.conn.user = user
            self.conn.password = password
        self.pn.bind(self.conn)
        self.lost = False
        if open:
            self.conn.open()
        self.pump()

    # -- moving bytes ---------------------------------------------------------------
    @property
    def server_protocol(self):
        return getattr(self.transport, "protocol", self.protocol)

    def _from_server(self) -> bool:
        out = self.transport.value()
        self.transport.clear()
        chunk = b""
        while out and self.pn.capacity() > 0:  # a client that stopped reading drops the rest
            chunk = out[: self.pn.capacity()]
            self.pn.push(chunk)
            out = out[len(chunk):]
        return bool(out) or bool(chunk)

    def pump(self) -> None:
        """Move bytes both ways (running the clock's due calls) until both sides are quiet."""
        for _ in range(10_000):
            moved = False
            pending = self.pn.pending()
            if pending > 0:
                data = bytes(self.pn.peek(pending))
                self.pn.pop(pending)
                if not self.transport.disconnecting:
                    self.server_protocol.dataReceived(data)
                moved = True
            self.broker.run()
            moved = self._from_server() or moved
            if not moved:
                return
        raise AssertionError("the connection never went quiet")

    def inject(self, data: bytes) -> None:
        """Bytes the client engine did not write (hostile input), then the server's answer."""
        self.server_protocol.dataReceived(data)
        self.pump()

    def tick(self) -> None:
        """What a client reactor does on its timer: let proton heart-beat, then pump."""
        self.pn.tick(self.broker.clock.seconds())
        self.pump()

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            lose(self.protocol, self.transport)
            self.broker.run()

    # -- state ----------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """The server asked the transport to close."""
        return self.transport.disconnecting

    @property
    def remote_condition(self):
        return self.conn.remote_condition

    def assert_closed_with(self, name: str, text: str | None = None) -> None:
        assert self.conn.state & REMOTE_CLOSED, f"no close from the server (state {self.conn.state})"
        condition = self.conn.remote_condition
        assert condition is not None, "close without an error condition"
        assert condition.name == name, condition
        if text is not None:
            assert text in condition.description, condition
        assert self.closed, "the server sent close but kept the connection"

    # -- endpoints ------------------------------------------------------------------
    def session(self):
        ssn = self.conn.session()
        ssn.open()
        self.pump()
        assert ssn.state & REMOTE_ACTIVE
        return ssn

    def sender(self, address: str | None, ssn=None, name: str = "sender"):
        ssn = ssn or self.session()
        snd = ssn.sender(name)
        snd.target.address = address
        snd.open()
        self.pump()
        assert snd.state & REMOTE_ACTIVE, snd.remote_condition
        return snd

    def receiver(self, address: str, ssn=None, name: str = "receiver", credit: int = 10):
        ssn = ssn or self.session()
        rcv = ssn.receiver(name)
        rcv.source.address = address
        rcv.open()
        if credit:
            rcv.flow(credit)
        self.pump()
        assert rcv.state & REMOTE_ACTIVE, rcv.remote_condition
        return rcv

    def send(self, snd, message: Message, tag: bytes | None = None):
        dlv = snd.delivery(tag or b"%d" % id(message))
        snd.send(message.encode())
        snd.advance()
        self.pump()
        return dlv

    def receive(self, rcv) -> list[tuple[Message, Delivery]]:
        self.pump()
        out = []
        while True:
            dlv = rcv.current
            if dlv is None or dlv.partial or not dlv.readable:
                return out
            data = rcv.recv(dlv.pending)
            rcv.advance()
            message = Message()
            message.decode(data)
            out.append((message, dlv))


def protocol_timers(broker: Broker) -> list:
    """Delayed calls on the clock that belong to a connection's protocol."""
    kinds = (AmqpProtocol, ProtocolSwitch, StompProtocol)
    return [c for c in broker.clock.getDelayedCalls() if isinstance(getattr(c.func, "__self__", None), kinds)]


def assert_no_leaks(broker: Broker, *clients) -> None:
    for client in clients:
        client.lose()
    assert protocol_timers(broker) == []
    assert not broker.server.sessions, broker.server.sessions


def exchange_works(broker: Broker, address: str = "healthy", body: str = "still fine") -> None:
    """A fresh pair of connections can still send and receive: the server is unaffected."""
    producer = AmqpClient(broker, container="healthy-producer")
    consumer = AmqpClient(broker, container="healthy-consumer")
    rcv = consumer.receiver(address)
    dlv = producer.send(producer.sender(address), Message(body=body))
    assert dlv.remote_state == Delivery.ACCEPTED
    got = consumer.receive(rcv)
    assert [m.body for m, _ in got] == [body]
    for _m, d in got:
        d.update(Delivery.ACCEPTED)
        d.settle()
    consumer.pump()
    producer.lose()
    consumer.lose()


# -- open / close -----------------------------------------------------------------------


def test_open_and_close_with_container_id():
    b = Broker()
    c = AmqpClient(b, container="my-app")
    assert c.conn.state & REMOTE_ACTIVE
    assert c.remote_condition is None
    assert c.conn.remote_container  # the broker names itself
    offered = {str(s) for s in (c.conn.remote_offered_capabilities or ())}
    assert "ANONYMOUS-RELAY" in offered
    assert c.protocol.info.client_id == "my-app"
    assert c.protocol.info.protocol == "AMQP"
    ssn = c.session()
    (session,) = b.server.sessions
    assert session.connection.client_id == "my-app"
    ssn.close()
    c.pump()
    assert not b.server.sessions  # end closes the broker session
    c.conn.close()
    c.pump()
    assert c.conn.state & REMOTE_CLOSED
    assert c.remote_condition is None
    # The close exchange is over: the server drops the connection itself.
    assert c.closed
    assert_no_leaks(b, c)
    assert not c.factory.connections


def test_close_with_open_links_frees_the_broker_session():
    b = Broker()
    c = AmqpClient(b, container="app")
    ssn = c.session()
    c.receiver("q1", ssn=ssn)
    c.sender("q1", ssn=ssn)
    assert len(b.server.sessions) == 1
    assert b.server.find_queue("q1").consumers
    c.conn.close()
    c.pump()
    assert c.conn.state & REMOTE_CLOSED and c.closed
    assert not b.server.sessions
    queue = b.server.find_queue("q1")  # auto-deleted with its last consumer, or idle
    assert queue is None or not queue.consumers
    assert_no_leaks(b, c)


USERS = {"alice": ("secret", {"app"})}
_APP = frozenset({"app"})
SECURITY = [
    SecuritySetting(
        match="#",
        permissions={
            p: _APP
            for p in ("send", "consume", "createAddress", "createDurableQueue", "createNonDurableQueue",
                      "deleteDurableQueue", "deleteNonDurableQueue")
        },
    )
]


def test_sasl_plain_principal_and_refusals():
    b = Broker(users=USERS, security_settings=SECURITY)
    ok = AmqpClient(b, mechs="PLAIN", user="alice", password="secret")
    assert ok.conn.state & REMOTE_ACTIVE
    ok.session()
    (session,) = b.server.sessions
    assert session.user == "alice"
    bad = AmqpClient(b, mechs="PLAIN", user="alice", password="wrong")
    assert bad.closed
    assert not bad.conn.state & REMOTE_ACTIVE
    assert bad.protocol.pn_transport is None  # the AMQP engine never started
    # No anonymous user: ANONYMOUS is not offered (the client finds no common
    # mechanism and gives up; the server drops it at the connect timeout) ...
    anon = AmqpClient(b, mechs="ANONYMOUS")
    assert anon.pn.condition is not None and not anon.conn.state & REMOTE_ACTIVE
    assert anon.protocol.pn_transport is None
    b.clock.advance(b.limits.connect_timeout / 1000 if b.limits else 10.0)
    assert anon.closed
    # ... and the bare AMQP header is refused.
    bare = AmqpClient(b, mechs=None)
    assert bare.closed and not bare.conn.state & REMOTE_ACTIVE
    assert len(b.server.sessions) == 1
    assert_no_leaks(b, ok, bad, anon, bare)


# -- messages ---------------------------------------------------------------------------


def test_send_and_receive_in_memory():
    b = Broker()
    producer = AmqpClient(b, container="producer")
    snd = producer.sender("orders")
    assert snd.credit > 0
    message = Message(
        body="hello",
        durable=True,
        priority=7,
        subject="greeting",
        correlation_id="corr-1",
        properties={"colour": "blue", "n": 42},
    )
    message.group_id = "g1"
    dlv = producer.send(snd, message)
    assert dlv.remote_state == Delivery.ACCEPTED and dlv.settled
    queue = b.server.find_queue("orders")
    assert queue is not None and queue.message_count == 1

    consumer = AmqpClient(b, container="consumer")
    rcv = consumer.receiver("orders", credit=5)
    ((got, rdlv),) = consumer.receive(rcv)
    assert got.body == "hello"
    assert got.durable is True and got.priority == 7
    assert got.subject == "greeting" and got.correlation_id == "corr-1" and got.group_id == "g1"
    assert got.properties == {"colour": "blue", "n": 42}
    assert queue.message_count == 1  # in flight until settled
    rdlv.update(Delivery.ACCEPTED)
    rdlv.settle()
    consumer.pump()
    assert queue.message_count == 0
    # Released goes back on the queue, for the next receiver.
    producer.send(snd, Message(body="again"))
    ((again, adlv),) = consumer.receive(rcv)
    assert again.body == "again"
    adlv.update(Delivery.RELEASED)
    adlv.settle()
    consumer.pump()
    assert queue.message_count == 1
    assert_no_leaks(b, producer, consumer)


def test_binary_and_large_messages_with_a_small_max_frame_size():
    """maxFrameSize limits frames, not messages: the client splits a big transfer."""
    b = Broker()
    acc = amqp_acceptor(maxFrameSize=512)
    producer = AmqpClient(b, acc)
    assert producer.pn.remote_max_frame_size == 512
    snd = producer.sender("big")
    body = bytes(range(256)) * 40  # 10 KiB, about 20 frames
    dlv = producer.send(snd, Message(body=body))
    assert dlv.remote_state == Delivery.ACCEPTED
    consumer = AmqpClient(b, acc)
    rcv = consumer.receiver("big")
    ((got, _),) = consumer.receive(rcv)
    assert got.body == body
    assert_no_leaks(b, producer, consumer)


# -- idle timeout -----------------------------------------------------------------------


def test_idle_timeout_closes_a_silent_connection_with_resource_limit_exceeded():
    b = Broker()
    silent = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=4000))
    # proton advertises half its timeout, so a client heart-beats in time
    assert 0 < silent.pn.remote_idle_timeout <= 4.0
    t0 = b.clock.seconds()
    while not silent.closed:
        b.clock.advance(0.25)
        silent.pump()  # the client never ticks: it sends nothing at all
        assert b.clock.seconds() - t0 <= 4.5, "the idle connection was never closed"
    assert b.clock.seconds() - t0 >= 4.0 - 1e-9, "closed before amqpIdleTimeout"
    silent.assert_closed_with("amqp:resource-limit-exceeded", "idle")
    assert_no_leaks(b, silent)


def test_a_heart_beating_client_stays_open_past_the_idle_timeout():
    b = Broker()
    client = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=4000))
    snd = client.sender("hb")
    for _ in range(80):  # 20 s: five idle timeouts
        b.clock.advance(0.25)
        client.tick()
        assert not client.closed and client.remote_condition is None
    assert client.conn.state & REMOTE_ACTIVE
    assert client.send(snd, Message(body="alive")).remote_state == Delivery.ACCEPTED
    assert_no_leaks(b, client)


def test_idle_timeout_zero_never_closes():
    b = Broker()
    client = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=0))
    assert not client.pn.remote_idle_timeout
    b.clock.advance(3600)
    client.pump()
    assert not client.closed and client.conn.state & REMOTE_ACTIVE
    assert_no_leaks(b, client)


# -- connect timeout --------------------------------------------------------------------


def test_no_bytes_within_the_connect_timeout_closes_the_connection():
    b = Broker(limits=Limits(connect_timeout=2000))
    factory = AmqpFactory(b.server, acceptor=amqp_acceptor(), limits=b.limits, reactor=b.clock)
    transport = new_transport()
    protocol = factory.buildProtocol(transport.getPeer())
    protocol.makeConnection(transport)
    b.clock.advance(1.9)
    assert not transport.disconnecting
    b.clock.advance(0.2)
    assert transport.disconnecting
    assert transport.value() == b""
    lose(protocol, transport)
    assert protocol_timers(b) == [] and not factory.connections


def test_sasl_but_no_open_within_the_connect_timeout_closes_the_connection():
    b = Broker(limits=Limits(connect_timeout=2000))
    c = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=0), open=False)
    assert c.protocol.pn_transport is not None  # SASL is done
    b.clock.advance(1.9)
    c.pump()
    assert not c.closed
    b.clock.advance(0.2)
    c.pump()
    assert c.closed, "a connection that never sent open outlived the connect timeout"
    # proton sends no close before the peer's open: the socket just goes
    assert c.remote_condition is None or c.remote_condition.name == "amqp:resource-limit-exceeded"
    assert_no_leaks(b, c)


def test_an_opened_connection_outlives_the_connect_timeout():
    b = Broker(limits=Limits(connect_timeout=2000))
    c = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=0))
    b.clock.advance(60)
    c.pump()
    assert not c.closed and c.conn.state & REMOTE_ACTIVE
    assert_no_leaks(b, c)


# -- bad input ---------------------------------------------------------------------------


@pytest.fixture
def bystander():
    """A broker with a healthy consumer connection that must not notice the bad one."""
    b = Broker()
    good = AmqpClient(b, container="bystander")
    rcv = good.receiver("bystander-q")
    yield b, good, rcv


def bystander_unaffected(b: Broker, good: AmqpClient, rcv) -> None:
    assert not good.closed and good.conn.state & REMOTE_ACTIVE and good.remote_condition is None
    producer = AmqpClient(b, container="later")
    producer.send(producer.sender("bystander-q"), Message(body="after the bad one"))
    assert [m.body for m, _ in good.receive(rcv)] == ["after the bad one"]
    producer.lose()


@pytest.mark.parametrize(
    "garbage, condition",
    [
        # a frame whose size is below the 8-octet header
        (b"\x00\x00\x00\x04\x02\x00\x00\x00", "amqp:connection:framing-error"),
        # text: its first four octets read as a 1.7 GB frame size, beyond max-frame-size
        (b"hello, this is not AMQP at all\r\n", "amqp:connection:framing-error"),
        # data offset below 2
        (b"\x00\x00\x00\x0c\x01\x00\x00\x00\x00\x00\x00\x00", "amqp:connection:framing-error"),
        # a well-framed body that is no AMQP encoding
        (frame(b"\xff\xff\xff\xff"), "amqp:decode-error"),
        # a described list that is cut short
        (frame(b"\x00\x53\x10\xc0\x10\x05"), "amqp:decode-error"),
    ],
    ids=["short-frame", "text", "bad-doff", "undecodable-body", "truncated-list"],
)
def test_garbage_after_the_opening_closes_only_that_connection(bystander, garbage, condition):
    b, good, rcv = bystander
    bad = AmqpClient(b, container="bad")
    bad.session()
    bad.inject(garbage)
    bad.assert_closed_with(condition)
    bad.lose()
    bystander_unaffected(b, good, rcv)
    assert_no_leaks(b, good)


@pytest.mark.parametrize(
    "garbage",
    [frame(b"\xff\xff\xff\xff"), b"\x00\x00\x00\x04\x02\x00\x00\x00", b"GET / HTTP/1.1\r\n\r\n"],
    ids=["undecodable-body", "short-frame", "http"],
)
def test_garbage_right_after_the_amqp_header_closes_the_connection(garbage):
    """Before any open: the server must still drop the connection (it may not send close)."""
    b = Broker()
    c = AmqpClient(b, mechs=None, open=False)
    assert c.protocol.pn_transport is not None  # bare AMQP header accepted (anonymous)
    c.inject(garbage)
    assert c.closed, "the server kept a connection it stopped reading"
    assert_no_leaks(b, c)
    exchange_works(b)


@pytest.mark.parametrize(
    "header",
    [b"AMQP\x01\x01\x00\x00", b"AMQX\x00\x01\x00\x00", b"AMQP\x00\x02\x00\x00", b"AMQP\x02\x01\x00\x00"],
    ids=["protocol-id-1", "AMQX", "version-2", "tls"],
)
def test_wrong_protocol_header_gets_the_supported_header_then_close(header, caplog):
    b = Broker()
    factory = AmqpFactory(b.server, acceptor=amqp_acceptor(), limits=None, reactor=b.clock)
    transport = new_transport()
    protocol = factory.buildProtocol(transport.getPeer())
    protocol.makeConnection(transport)
    with caplog.at_level(logging.INFO, logger="junction.amqp"):
        protocol.dataReceived(header)
        b.run()
    assert transport.value() == SASL_HEADER
    assert transport.disconnecting
    assert any("127.0.0.1" in r.getMessage() for r in caplog.records)
    protocol.dataReceived(OPEN_FRAME)  # ignored once closing
    assert transport.value() == SASL_HEADER
    lose(protocol, transport)
    assert protocol_timers(b) == [] and not factory.connections


OPEN_FRAME = performative(OPEN, ["x"])


def raw_sasl_anonymous() -> bytes:
    """A client's SASL exchange by hand: the SASL header and a sasl-init for ANONYMOUS."""
    init = encode(Described(ulong(0x41), [symbol("ANONYMOUS"), b"", None]))
    return SASL_HEADER + frame(init, ftype=1)


def test_wrong_amqp_layer_header_after_sasl_is_answered_and_closed():
    b = Broker()
    factory = AmqpFactory(b.server, acceptor=amqp_acceptor(), limits=None, reactor=b.clock)
    transport = new_transport()
    protocol = factory.buildProtocol(transport.getPeer())
    protocol.makeConnection(transport)
    protocol.dataReceived(raw_sasl_anonymous())
    b.run()
    assert protocol.pn_transport is not None  # SASL succeeded
    assert transport.value().startswith(SASL_HEADER)
    transport.clear()
    protocol.dataReceived(b"AMQP\x01\x01\x00\x00")
    b.run()
    # proton answers with the header it speaks, then closes
    assert transport.value().startswith(AMQP_HEADER)
    assert transport.disconnecting
    lose(protocol, transport)
    assert protocol_timers(b) == [] and not factory.connections


def test_frame_larger_than_max_frame_size_is_a_framing_error(bystander):
    b, good, rcv = bystander
    bad = AmqpClient(b, amqp_acceptor(maxFrameSize=512))
    assert bad.pn.remote_max_frame_size == 512
    bad.session()
    big_attach = performative(ATTACH, ["x" * 600, uint(0), False], channel=0)
    assert len(big_attach) > 512
    bad.inject(big_attach)
    bad.assert_closed_with("amqp:connection:framing-error")
    bad.lose()
    assert all(s.connection.client_id == "bystander" for s in b.server.sessions)
    bystander_unaffected(b, good, rcv)
    assert_no_leaks(b, good)


def test_frame_of_exactly_max_frame_size_is_fine():
    b = Broker()
    c = AmqpClient(b, amqp_acceptor(maxFrameSize=512))
    c.session()
    def attach(n: int) -> bytes:
        return performative(ATTACH, ["n" * n, uint(0), False], channel=0)

    exact = attach(400 + 512 - len(attach(400)))
    assert len(exact) == 512
    c.inject(exact)
    assert not c.closed and c.remote_condition is None
    assert_no_leaks(b, c)


def test_transfer_on_a_link_never_attached_closes_the_connection(bystander):
    b, good, rcv = bystander
    bad = AmqpClient(b)
    bad.session()  # channel 0
    bad.inject(performative(TRANSFER, [uint(7), uint(0), b"t1", uint(0)], channel=0, payload=encode(Described(ulong(0x77), "hi"))))
    assert bad.remote_condition is not None
    bad.assert_closed_with(bad.remote_condition.name)
    assert bad.remote_condition.name in ("amqp:invalid-field", "amqp:not-allowed", "amqp:illegal-state")
    assert "handle" in bad.remote_condition.description
    assert b.server.find_queue("x") is None
    bad.lose()
    bystander_unaffected(b, good, rcv)
    assert_no_leaks(b, good)


def test_attach_on_a_channel_without_begin_closes_the_connection(bystander):
    b, good, rcv = bystander
    bad = AmqpClient(b)
    target = Described(ulong(0x29), ["attach-target"])
    bad.inject(performative(ATTACH, ["l1", uint(0), False, None, None, None, target], channel=5))
    assert bad.remote_condition is not None
    bad.assert_closed_with(bad.remote_condition.name)
    assert bad.remote_condition.name in ("amqp:not-allowed", "amqp:illegal-state", "amqp:invalid-field")
    assert "channel" in bad.remote_condition.description
    assert b.server.find_queue("attach-target") is None
    bad.lose()
    bystander_unaffected(b, good, rcv)
    assert_no_leaks(b, good)


def test_a_second_open_closes_the_connection(bystander):
    b, good, rcv = bystander
    bad = AmqpClient(b, container="first")
    bad.session()
    bad.inject(performative(OPEN, ["second"]))
    bad.assert_closed_with("amqp:illegal-state")
    # the connection's identity did not change under its session
    assert bad.protocol.info.client_id == "first"
    bad.lose()
    bystander_unaffected(b, good, rcv)
    assert_no_leaks(b, good)


# -- fuzz --------------------------------------------------------------------------------

_FIELD = st.one_of(
    st.none(),
    st.booleans(),
    st.one_of(st.sampled_from([0, 1, 2]), st.integers(0, 2**32 - 1)).map(uint),  # handles, channels
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=16),
    st.text(max_size=16),
    st.sampled_from([symbol("queue"), symbol("amqp:accepted:list")]),
)


@st.composite
def _frames(draw) -> bytes:
    """A stream of frames: valid framing around performatives with arbitrary fields, or raw bytes."""
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(draw(st.binary(min_size=1, max_size=64)))
        else:
            code = draw(st.integers(0x10, 0x18) | st.sampled_from([0x00, 0x24, 0x25, 0x44, 0x70, 0x77]))
            fields = draw(st.lists(_FIELD, max_size=12))
            channel = draw(st.sampled_from([0, 0, 0, 1, 7, 65535]))
            payload = draw(st.binary(max_size=32)) if code == TRANSFER else b""
            try:
                parts.append(performative(code, fields, channel=channel, payload=payload))
            except Exception:  # proton could not encode that mix: send raw bytes instead  # noqa: BLE001
                parts.append(bytes(draw(st.binary(min_size=1, max_size=16))))
    return b"".join(parts)


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points + [len(data)]:
        if p > last:
            out.append(data[last:p])
            last = p
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(min_size=1, max_size=400), _frames()), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_fuzz_after_a_valid_opening_never_raises_and_isolates_the_connection(data, cuts):
    b = Broker()
    good = AmqpClient(b, amqp_acceptor(amqpIdleTimeout=0), container="good")  # outlives the clock jump
    rcv = good.receiver("fuzz-ok")
    fuzz = AmqpClient(b, container="fuzz")
    ssn = fuzz.session()
    fuzz.sender("fuzz-target", ssn=ssn)  # an attached link on handle 0 for the bytes to hit
    for chunk in _chunked(data, cuts):
        fuzz.protocol.dataReceived(chunk)  # must never raise
        b.run()
    fuzz.pump()
    event("closed" if fuzz.closed else "kept running")
    engine = fuzz.protocol.pn_transport
    if not fuzz.closed:
        # Still running: the engine reads on (it did not silently stop reading).
        assert engine is not None and engine.capacity() >= 0, "connection wedged: input closed, socket kept"
        assert not fuzz.protocol._closing
    b.clock.advance(60)  # timers (idle, connect) fire without raising
    fuzz.pump()
    fuzz.lose()
    assert all(s.connection.client_id == "good" for s in b.server.sessions)
    assert not good.closed and good.remote_condition is None
    producer = AmqpClient(b, container="producer")
    producer.send(producer.sender("fuzz-ok"), Message(body="ok"))
    assert [m.body for m, _ in good.receive(rcv)] == ["ok"]
    assert_no_leaks(b, good, producer)


# -- the multi-protocol acceptor --------------------------------------------------------


def multi_acceptor(b: Broker, protocols=("STOMP", "AMQP"), sniff_timeout: float = 5.0):
    acc = Acceptor(
        name="multi",
        scheme="tcp",
        host="127.0.0.1",
        port=0,
        protocols=frozenset(protocols),
        params={"amqpIdleTimeout": "0"},
        anycast_prefix=STOMP_ACCEPTOR.anycast_prefix,
        multicast_prefix=STOMP_ACCEPTOR.multicast_prefix,
    )
    kinds = {"STOMP": StompFactory, "AMQP": AmqpFactory}
    factories = {name: kinds[name](b.server, acceptor=acc, limits=b.limits, reactor=b.clock) for name in protocols}
    return MultiProtocolFactory(factories, reactor=b.clock, acceptor_name="multi", sniff_timeout=sniff_timeout)


def switch_connection(b: Broker, factory: MultiProtocolFactory):
    transport = new_transport()
    switch = factory.buildProtocol(transport.getPeer())
    transport.protocol = switch
    switch.makeConnection(transport)
    return switch, transport


def deliver(b: Broker, transport, data: bytes) -> None:
    """What the reactor does with bytes: hand them to the transport's current protocol."""
    transport.protocol.dataReceived(data)
    b.run()


STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"


@pytest.mark.parametrize("one_byte_at_a_time", [False, True], ids=["whole", "byte-by-byte"])
def test_switch_hands_stomp_to_a_stomp_protocol(one_byte_at_a_time):
    b = Broker()
    factory = multi_acceptor(b)
    switch, transport = switch_connection(b, factory)
    chunks = [STOMP_CONNECT[i:i + 1] for i in range(len(STOMP_CONNECT))] if one_byte_at_a_time else [STOMP_CONNECT]
    for chunk in chunks:
        deliver(b, transport, chunk)
    assert isinstance(transport.protocol, StompProtocol)
    assert transport.value().startswith(b"CONNECTED\n")
    assert b"version:1.2" in transport.value()
    assert not transport.disconnecting
    assert transport.protocol in factory.connections
    assert switch.timer is None  # the sniff timer is cancelled
    lose(switch, transport)
    b.run()
    assert protocol_timers(b) == [] and not factory.connections


def test_switch_hands_the_amqp_sasl_header_to_an_amqp_protocol():
    b = Broker()
    factory = multi_acceptor(b)
    switch, transport = switch_connection(b, factory)
    deliver(b, transport, SASL_HEADER)
    assert isinstance(transport.protocol, AmqpProtocol)
    out = transport.value()
    assert out.startswith(SASL_HEADER)
    assert b"ANONYMOUS" in out  # the sasl-mechanisms frame follows
    assert not transport.disconnecting
    lose(switch, transport)
    assert protocol_timers(b) == [] and not factory.connections


@pytest.mark.parametrize("one_byte_at_a_time", [False, True], ids=["whole", "byte-by-byte"])
def test_a_full_amqp_exchange_through_the_switch(one_byte_at_a_time):
    b = Broker()
    factory = multi_acceptor(b)

    class SwitchedClient(AmqpClient):
        def pump(self):
            if one_byte_at_a_time and self.transport.protocol is self.protocol:
                # Only the sniffing phase byte by byte: that is what is under test.
                pending = self.pn.pending()
                if pending > 0:
                    data = bytes(self.pn.peek(pending))
                    self.pn.pop(pending)
                    for i in range(len(data)):
                        self.server_protocol.dataReceived(data[i:i + 1])
                        self.broker.run()
                    self._from_server()
            super().pump()

    client = SwitchedClient(b, factory=factory, container="via-switch")
    assert isinstance(client.transport.protocol, AmqpProtocol)
    assert client.conn.state & REMOTE_ACTIVE
    rcv = client.receiver("switched")
    client.send(client.sender("switched"), Message(body="through the switch"))
    assert [m.body for m, _ in client.receive(rcv)] == ["through the switch"]
    client.conn.close()
    client.pump()
    assert client.closed
    client.lose()
    assert protocol_timers(b) == [] and not factory.connections and not b.server.sessions


@pytest.mark.parametrize(
    "garbage",
    [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"\xff" * 80],
    ids=["http", "tls-hello", "binary"],
)
def test_switch_closes_on_garbage_with_a_log_line(garbage, caplog):
    b = Broker()
    factory = multi_acceptor(b)
    switch, transport = switch_connection(b, factory)
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        deliver(b, transport, garbage)
    assert transport.disconnecting
    assert transport.value() == b""
    assert transport.protocol is switch
    lines = [r.getMessage() for r in caplog.records if r.name == "junction.acceptor"]
    assert len(lines) == 1 and "unknown protocol" in lines[0], lines
    assert "127.0.0.1" in lines[0] and repr(garbage[:8])[2:-1] in lines[0]
    assert protocol_timers(b) == []
    lose(switch, transport)
    assert not factory.connections


def test_switch_refuses_a_protocol_the_acceptor_does_not_serve(caplog):
    b = Broker()
    factory = multi_acceptor(b, protocols=("STOMP",))
    switch, transport = switch_connection(b, factory)
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        deliver(b, transport, SASL_HEADER)
    assert transport.disconnecting and transport.value() == b""
    assert any("AMQP, which this acceptor does not serve" in r.getMessage() for r in caplog.records)
    lose(switch, transport)
    assert protocol_timers(b) == []


def test_switch_times_out_a_silent_or_undecided_connection(caplog):
    b = Broker()
    factory = multi_acceptor(b, sniff_timeout=3.0)
    switch, transport = switch_connection(b, factory)
    deliver(b, transport, b"CONN")  # could still be STOMP
    assert not transport.disconnecting
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        b.clock.advance(2.9)
        assert not transport.disconnecting
        b.clock.advance(0.2)
    assert transport.disconnecting
    assert any("not enough to tell its protocol" in r.getMessage() for r in caplog.records)
    lose(switch, transport)
    assert protocol_timers(b) == []
