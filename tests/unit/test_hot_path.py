"""The shortcuts of the STOMP hot path give exactly what the general path gives.

The broker serialises MESSAGE and RECEIPT frames itself when nothing needs
escaping, remembers point-to-point routes and send permissions, confirms
non-durable sends without a Deferred and writes a delivery pass's MESSAGE
frames in one write.  Each shortcut is checked here against the general path
it stands for, including the cases that must fall back to it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.testing import StringTransport

from junction.brokercore.queue import MessageRef
from junction.brokercore.security import SecurityError
from junction.brokercore.stomp_server import StompProtocol, _Subscription
from junction.config.model import SecuritySetting
from junction.model.message import Message, RoutingType, Typed
from junction.protocols.errors import LocalProtocolError
from junction.protocols.stomp import Frame
from tests.unit.stomp_fixtures import ACCEPTOR, Broker

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST

# Text with everything that needs escaping or checking somewhere.
_TRICKY = st.text(alphabet=st.sampled_from(["a", "b", "é", ":", "\n", "\r", "\\", "\0", " ", "#", "*"]), max_size=6)
# Mostly text that needs nothing, so the shortcut is taken often too.
_TEXT = st.one_of(st.text(alphabet="abcé -_#*.", max_size=6), _TRICKY)
_VALUES = st.one_of(
    _TEXT,
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.builds(Typed, st.sampled_from(["int", "long", "short"]), st.integers(-100, 100)),
)


class _Queue:
    """Enough of a queue for a MessageRef."""

    name = "q"


class _Consumer:
    """Enough of a ServerConsumer for a delivery: its id."""

    id = 3


def _protocol(version: str) -> StompProtocol:
    broker = Broker()
    proto = StompProtocol(broker.server, acceptor=ACCEPTOR, reactor=broker.clock)
    proto.makeConnection(StringTransport())
    proto.dataReceived(f"CONNECT\naccept-version:{version}\nhost:x\n\n\0".encode())
    assert proto.transport.value().startswith(b"CONNECTED")
    return proto


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    ack=st.sampled_from(["auto", "client", "client-individual"]),
    sub_id=st.one_of(st.just("sub-0"), _TEXT.filter(bool)),
    destination=st.one_of(st.none(), st.just("/queue/orders"), st.just("/topic/news.#"), _TEXT),
    address=st.one_of(st.just("orders"), _TEXT),
    body=st.one_of(st.just(b""), st.binary(max_size=8), st.just(b"a\0b")),
    durable=st.booleans(),
    priority=st.integers(0, 9),
    expiration=st.integers(0, 2**45),
    delivery_count=st.integers(1, 3),
    correlation_id=st.one_of(st.none(), _TEXT),
    reply_to=st.one_of(st.none(), _TEXT),
    properties=st.dictionaries(st.one_of(_TEXT, st.sampled_from(["JMSType", "content-length", "type"])), _VALUES, max_size=4),
)
def test_message_bytes_are_what_the_codec_writes(
    version, ack, sub_id, destination, address, body, durable, priority, expiration, delivery_count,
    correlation_id, reply_to, properties,
):
    proto = _protocol(version)
    sub = _Subscription(sub_id, destination, ack, "/topic/", None)
    deliver = proto._deliver_callback(sub)
    message = Message(
        address=address, body=body, durable=durable, priority=priority, expiration=expiration, timestamp=123,
        properties=properties, correlation_id=correlation_id, reply_to=reply_to, message_id=7,
    )
    ref = MessageRef(message, _Queue(), delivery_count=delivery_count)
    ack_header = "3,7" if version == "1.2" and ack != "auto" else None
    try:
        expected = proto.codec.send(proto._message_frame(sub, ref, "7", ack_header))
    except LocalProtocolError as exc:
        with pytest.raises(LocalProtocolError, match=re.escape(str(exc))):
            deliver(_Consumer(), ref)
        return
    deliver(_Consumer(), ref)
    assert proto._out == [expected]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize("receipt", ["r-1", "", "a:b", "a\\b", "line\nbreak", "cr\r", "nul\0", "é", "content-length"])
def test_receipt_bytes_are_what_the_codec_writes(version, receipt):
    proto = _protocol(version)
    built = proto._receipt_frame(receipt)
    frame = Frame("RECEIPT", (("receipt-id", receipt),))
    if isinstance(built, bytes):
        assert built == proto.codec.send(frame)
    else:
        assert built == frame  # the codec serialises (or refuses) it when it is written


# -- routes remembered per address ---------------------------------------------------------


def _waiting(queue) -> list[bytes]:
    return [ref.message.body for ref in queue.waiting()]


def test_a_remembered_route_follows_a_second_queue_on_the_address():
    b = Broker()
    s = b.session()
    first = b.queue("orders")
    for body in (b"1", b"2"):
        b.send(s, "orders", body)
    assert b.server.post_office._anycast_routes, "the point-to-point route is remembered"
    second = b.queue("orders-2", "orders")
    for body in (b"3", b"4", b"5", b"6"):
        b.send(s, "orders", body)
    assert _waiting(first)[:2] == [b"1", b"2"]
    assert len(_waiting(first)) == 4 and len(_waiting(second)) == 2, "round robin over both queues"


def test_a_remembered_route_follows_a_deleted_queue():
    b = Broker()
    s = b.session()
    b.queue("jobs", auto_created=True)
    b.send(s, "jobs", b"1")
    b.server.destroy_queue("jobs")
    b.send(s, "jobs", b"2")  # the queue is auto-created again
    assert _waiting(b.server.find_queue("jobs")) == [b"2"]


def test_a_remembered_route_follows_a_new_wildcard_queue_with_a_filter():
    b = Broker()
    s = b.session()
    plain = b.queue("news.europe")
    b.send(s, "news.europe", b"1")
    everything = b.queue("all-news", "news.#", ANY, filter="colour = 'red'")
    b.send(s, "news.europe", b"red", properties={"colour": "red"})
    b.send(s, "news.europe", b"blue", properties={"colour": "blue"})
    assert _waiting(everything) == [b"red"]
    assert _waiting(plain) == [b"1", b"red", b"blue"]


def test_a_route_to_a_filtered_queue_is_not_remembered():
    b = Broker()
    s = b.session()
    q = b.queue("only-red", filter="colour = 'red'")
    b.send(s, "only-red", b"blue", properties={"colour": "blue"})
    b.send(s, "only-red", b"red", properties={"colour": "red"})
    assert _waiting(q) == [b"red"]
    assert not b.server.post_office._anycast_routes


def test_a_fully_qualified_queue_name_is_never_a_remembered_route():
    b = Broker()
    s = b.session()
    q = b.queue("q1", "addr")
    b.send(s, "addr::q1", b"x")
    b.send(s, "addr::q1", b"y")
    assert _waiting(q) == [b"x", b"y"]
    assert not any("::" in name for name, _ in b.server.post_office._anycast_routes)


# -- sends confirmed without a Deferred ---------------------------------------------------------


def test_submit_returns_none_when_nothing_waits_and_send_still_a_deferred():
    b = Broker()
    s = b.session()
    b.queue("q")
    assert s.submit(Message(address="q", body=b"x")) is None
    d = s.send(Message(address="q", body=b"y"))
    assert d.called and d.result is None
    assert _waiting(b.server.find_queue("q")) == [b"x", b"y"]


def test_receipts_keep_their_order_behind_a_pending_confirmation():
    b = Broker()
    c = b.client()
    c.connect("1.2")
    c.send("/queue/q", b"a")  # no receipt, nothing pending: no entry at all
    c.send("/queue/q", b"b", receipt="r1")
    c.send("/queue/q", b"c")
    c.send("/queue/q", b"d", receipt="r2")
    assert [f.get("receipt-id") for f in c.frames("RECEIPT")] == ["r1", "r2"]
    assert not c.protocol._confirm


# -- send permissions remembered per session ------------------------------------------------------

USERS = {"alice": ("pw", {"producer"})}
PERMISSIONS = {"send": frozenset({"producer"}), "createAddress": frozenset({"producer"}),
               "createDurableQueue": frozenset({"producer"})}


def test_a_remembered_send_permission_is_asked_again_after_the_settings_change():
    b = Broker(users=USERS, security_settings=[SecuritySetting(match="#", permissions=PERMISSIONS)])
    s = b.session(user="alice")
    s.principal = b.security.authenticate("alice", "pw")
    b.queue("q")
    s.send(Message(address="q", body=b"1"))
    assert "q" in s._send_granted
    b.security.settings.add(SecuritySetting(match="q", permissions={}))  # nothing allowed on q
    with pytest.raises(SecurityError):
        s.send(Message(address="q", body=b"2"))
    assert _waiting(b.server.find_queue("q")) == [b"1"]


# -- one write per delivery pass ----------------------------------------------------------------


class _CountingTransport(StringTransport):
    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, data):
        self.writes += 1
        super().write(data)


def test_a_delivery_pass_is_one_write_and_comes_before_later_frames():
    b = Broker()
    consumer = b.client()
    consumer.connect("1.2")
    consumer.subscribe("/queue/q", ack="client-individual", receipt="s")
    assert [f.command for f in consumer.frames()] == ["RECEIPT"]
    transport = _CountingTransport()
    consumer.protocol.transport = transport
    consumer.transport = transport
    producer = b.client()
    producer.connect("1.2")
    producer.send_raw(b"".join(producer.codec.send(Frame("SEND", (("destination", "/queue/q"),), b"m%d" % i))
                               for i in range(5)))
    assert transport.writes == 1
    messages = consumer.messages()
    assert [m.body for m in messages] == [b"m%d" % i for i in range(5)]
    # An ACK with a receipt: the RECEIPT follows, in its own write.
    consumer.send_frame("ACK", (("id", messages[0].get("ack")), ("receipt", "a")))
    assert [f.command for f in consumer.frames()] == ["RECEIPT"]
    assert transport.writes == 2


def test_backpressure_still_stops_a_long_delivery_pass():
    b = Broker()
    consumer = b.client()
    consumer.connect("1.2")
    consumer.subscribe("/queue/q", receipt="s")
    assert [f.command for f in consumer.frames()] == ["RECEIPT"]

    class Pausing(StringTransport):
        """Asks the protocol to pause once 32 KiB are buffered, as a TCP transport would."""

        def write(self, data):
            super().write(data)
            if len(self.value()) > 32 * 1024 and not self.paused:
                self.paused = True
                consumer.protocol.pauseProducing()

    transport = Pausing()
    transport.paused = False
    consumer.protocol.transport = transport
    consumer.transport = transport
    producer = b.client()
    producer.connect("1.2")
    body = b"x" * 1024
    producer.send_raw(b"".join(producer.codec.send(Frame("SEND", (("destination", "/queue/q"),), body))
                               for _ in range(200)))
    first = consumer.messages()
    assert 0 < len(first) < 100, "the pass stopped soon after the transport asked"
    assert b.server.find_queue("q").waiting_count == 200 - len(first)
    consumer.protocol.resumeProducing()
    assert len(first) + len(consumer.messages()) == 200
