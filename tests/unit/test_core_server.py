"""The broker's CORE adapter at the connection level: sessions, logins, versions, bad input, time.

Driven in process (tests/unit/core_fixtures.py): the project's codec is the
client, the server a real :class:`BrokerServer` on a Clock.  Bad input gets
the EXCEPTION with its code and closes that connection only -- a bystander
connection keeps working.
"""

from __future__ import annotations

import struct

import pytest

from junction.brokercore.core_server import CoreFactory, CoreProtocol
from junction.config.model import Acceptor, Limits
from junction.protocols.core import ExceptionType, PacketType, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.versions import CURRENT_VERSION
from tests.unit.core_fixtures import ACCEPTOR, CoreClient, create_session, message
from tests.unit.stomp_fixtures import Broker, RoutingType, SecuritySetting

USERS = {"alice": ("secret", {"admin"}), "bob": ("pw", {"reader"})}
SECURITY = (
    SecuritySetting(match="#", permissions={p: frozenset({"admin"}) for p in (
        "send", "consume", "createAddress", "createDurableQueue", "createNonDurableQueue",
        "deleteDurableQueue", "deleteNonDurableQueue",
    )}),
)


def exception(got, code: int, channel: int):
    assert len(got) == 1 and isinstance(got[0], p.ExceptionMessage), got
    assert (got[0].code, got[0].channel_id) == (code, channel), got[0]
    return got[0]


def bystander_works(broker: Broker, queue: str = "still") -> None:
    other = CoreClient(broker)
    other.open()
    assert other.send(p.CreateQueueV2(queue, queue, None, False, False, True, False, 1, -1, False, channel_id=10)) == [
        p.NullResponse(-1, channel_id=10)
    ]
    assert not other.closed


# -- the opening ------------------------------------------------------------------------------


def test_opening_with_and_without_the_handshake():
    broker = Broker()
    for handshake in (True, False):
        client = CoreClient(broker, handshake=handshake)
        assert client.open() == p.CreateSessionResponse(CURRENT_VERSION)
        assert set(client.protocol.sessions) == {10}
        assert client.protocol.info.protocol == "CORE"


def test_a_client_of_version_131_gets_the_forms_it_reads():
    broker = Broker()
    client = CoreClient(broker)
    client.open(version=131)
    got = client.send(p.SessQueueQuery("nope", channel_id=10))
    assert type(got[0]) is p.SessQueueQueryResponseV3 and not got[0].exists
    got = client.send(p.SessBindingQuery("nope", channel_id=10))
    assert type(got[0]) is p.SessBindingQueryResponseV4  # V5 from 135


def test_the_client_id_of_createsession_v2_and_of_the_jms_metadata():
    broker = Broker()
    client = CoreClient(broker)
    client.open(client_id="app-1")
    assert client.protocol.info.client_id == "app-1"
    other = CoreClient(broker)
    other.open()
    assert other.protocol.info.client_id is None
    assert other.send(p.SessAddMetadata2("jms-client-id", "app-2", True, channel_id=10)) == [p.NullResponse(-1, channel_id=10)]
    assert other.protocol.info.client_id == "app-2"


def test_unique_metadata_is_unique_on_the_node():
    broker = Broker()
    a, b = CoreClient(broker), CoreClient(broker)
    a.open()
    b.open()
    assert a.send(p.SessUniqueAddMetadata("jms-client-id", "x", True, channel_id=10)) == [p.NullResponse(-1, channel_id=10)]
    e = exception(b.send(p.SessUniqueAddMetadata("jms-client-id", "x", True, channel_id=10)), 114, 10)
    assert e.message == "AMQ229035: Metadata jms-client-id=x had been set already"
    a.send(p.SessClose(channel_id=10))
    assert b.send(p.SessUniqueAddMetadata("jms-client-id", "x", True, channel_id=10)) == [p.NullResponse(-1, channel_id=10)]


# -- logins ------------------------------------------------------------------------------------


def test_a_bad_login_gets_105_and_the_connection_stays():
    broker = Broker(users=USERS, security_settings=SECURITY)
    client = CoreClient(broker)
    got = client.open(user="alice", password="wrong")
    assert isinstance(got, p.ExceptionMessage) and (got.code, got.channel_id) == (105, 1)
    assert got.message.startswith("AMQ229031: Unable to validate user from 192.168.1.1:54321. ") and "Username: alice" in got.message
    assert not client.closed and client.protocol.sessions == {}
    assert client.send(create_session(user="alice", password="secret")) == [p.CreateSessionResponse(CURRENT_VERSION)]
    assert client.protocol.sessions[10].session.user == "alice"


def test_an_operation_the_user_may_not_do_gets_105():
    broker = Broker(users=USERS, security_settings=SECURITY)
    client = CoreClient(broker)
    client.open(user="bob", password="pw")
    body, headers = message(address="q")
    got = client.send(p.SessSend(body, headers, True, -2, 1, channel_id=10))
    e = exception(got, ExceptionType.SECURITY_EXCEPTION, 10)
    assert e.correlation_id == -2 and "AMQ229032" in e.message and "permission='SEND'" in e.message
    assert not client.closed


def test_xa_sessions_are_accepted():
    broker = Broker()
    client = CoreClient(broker)
    assert client.open(xa=True) == p.CreateSessionResponse(CURRENT_VERSION)


# -- versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [120, 121, 128, 137])
def test_an_incompatible_version_gets_108_and_closes(version):
    broker = Broker()
    for packet in (p.SubscribeTopologyV2(False, version), create_session(version=version)):
        client = CoreClient(broker)
        exception(client.send(packet), ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS, packet.channel_id)
        assert client.closed
        assert client.send(p.Ping(1)) == []  # nothing more is read
    bystander_works(broker)


# -- bad input ------------------------------------------------------------------------------------


def raw_packet(kind: int, channel: int, body: bytes = b"") -> bytes:
    return struct.pack(">ibq", 9 + len(body), kind, channel) + body


@pytest.mark.parametrize(
    ("data", "code", "channel"),
    [
        (raw_packet(-23, 10), ExceptionType.UNSUPPORTED_PACKET, 10),  # a type Artemis does not have
        (raw_packet(PacketType.REPLICATION_APPEND, 2), ExceptionType.UNSUPPORTED_PACKET, 2),  # not read here
        (raw_packet(PacketType.SESS_START, 11), ExceptionType.ILLEGAL_STATE, 11),  # no session on 11
        (raw_packet(PacketType.SESS_START, 3), ExceptionType.ILLEGAL_STATE, 3),  # cluster control
        (raw_packet(PacketType.SESS_START, 0), ExceptionType.ILLEGAL_STATE, 0),  # a session's on channel 0
        (raw_packet(PacketType.PING, 10, b"\0" * 8), ExceptionType.ILLEGAL_STATE, 10),  # PING on a session's
        (raw_packet(PacketType.NULL_RESPONSE, 10, b"\0" * 8), ExceptionType.UNSUPPORTED_PACKET, 10),  # a server's
        (raw_packet(PacketType.SESS_FLOWTOKEN, 10, b"\0" * 5), ExceptionType.INTERNAL_ERROR, 10),  # truncated
        (struct.pack(">i", 10 * 1024 * 1024 + 1) + b"\x47", ExceptionType.INTERNAL_ERROR, 0),  # over max-packet-size
        (struct.pack(">i", 3) + b"\0\0\0", ExceptionType.INTERNAL_ERROR, 0),  # shorter than its header
    ],
)
def test_bad_input_gets_the_exception_with_its_code_and_closes_that_connection_only(data, code, channel):
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    got = client.send_raw(data)
    e = exception(got, code, channel)
    assert e.correlation_id is None and e.message
    assert client.closed
    client.lose()
    assert broker.server.sessions == set()
    bystander_works(broker)


def test_packets_before_the_bad_one_in_the_same_read_are_handled_first():
    broker = Broker()
    client = CoreClient(broker)
    client.open()

    data = encode_packet(p.CreateQueueV2("a", "a", None, False, False, True, False, 1, -1, False, channel_id=10))
    got = client.send_raw(data + raw_packet(-23, 10))
    assert got[0] == p.NullResponse(-1, channel_id=10)
    assert got[1].code == ExceptionType.UNSUPPORTED_PACKET and client.closed
    assert broker.server.find_queue("a") is not None


def test_max_packet_size_follows_the_node_s_max_frame_size():
    broker = Broker()
    client = CoreClient(broker, limits=Limits(max_frame_size=1024))
    client.open()
    body, headers = message(b"x" * 2000)
    got = client.send(p.SessSend(body, headers, False, 0, 1, channel_id=10))
    assert got[0].code == ExceptionType.INTERNAL_ERROR and "max-packet-size 1024" in got[0].message
    assert client.closed


def test_too_many_sessions_are_refused_and_the_connection_stays(monkeypatch):
    monkeypatch.setattr("junction.brokercore.core_server.DEFAULT_MAX_SESSIONS", 2)
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    client.session(11)
    e = exception(client.send(create_session(12)), ExceptionType.SESSION_CREATION_REJECTED, 1)
    assert "maximum of 2 sessions" in e.message and not client.closed
    client.send(p.SessClose(channel_id=11))
    client.session(12)


def test_a_session_channel_in_use_is_refused():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    exception(client.send(create_session(10)), ExceptionType.SESSION_CREATION_REJECTED, 1)
    assert not client.closed


def test_large_messages_with_no_large_messages_directory_are_refused_with_213_and_the_connection_closes():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    _, headers = message()
    e = exception(client.send(p.SessSendLarge(headers, channel_id=10)), ExceptionType.NOT_IMPLEMENTED_EXCEPTION, 10)
    assert "large messages" in e.message and client.closed


def test_xa_calls_on_a_session_not_xa_are_answered_xaer_proto_and_the_connection_stays():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    xid = p.Xid(1, b"b", b"g")
    (got,) = client.send(p.SessXAStart(xid, channel_id=10))
    assert (got.error, got.response_code, got.channel_id) == (True, -6, 10) and not client.closed


def test_scheduled_delivery_is_held_until_its_time():
    """A send with ``_AMQ_SCHED_DELIVERY`` is accepted; its queue holds it (counted, not
    waiting) until that time by the broker's clock, then it waits like any other."""
    broker = Broker()
    queue = broker.queue("q")
    client = CoreClient(broker)
    client.open()
    at = broker.server.now_ms() + 1500
    body, headers = message(properties=(("_AMQ_SCHED_DELIVERY", at),))
    assert client.send(p.SessSend(body, headers, True, -1, 1, channel_id=10)) == [p.NullResponse(-1, channel_id=10)]
    assert (queue.message_count, queue.waiting_count, queue.scheduled_count) == (1, 0, 1)
    broker.run(1.0)
    assert queue.waiting_count == 0
    broker.run(0.6)
    assert (queue.message_count, queue.waiting_count, queue.scheduled_count) == (1, 1, 0)
    body, headers = message(properties=(("_AMQ_SCHED_DELIVERY", 1),))  # a time past: at once
    client.send(p.SessSend(body, headers, True, -1, 1, channel_id=10))
    assert queue.waiting_count == 2


def test_a_purge_takes_scheduled_messages_too():
    broker = Broker()
    queue = broker.queue("q")
    client = CoreClient(broker)
    client.open()
    body, headers = message(properties=(("_AMQ_SCHED_DELIVERY", broker.server.now_ms() + 5000),))
    client.send(p.SessSend(body, headers, True, -1, 1, channel_id=10))
    assert len(queue.drain()) == 1 and queue.message_count == 0
    broker.run(6)
    assert queue.message_count == 0  # the timer went with it


# -- time -----------------------------------------------------------------------------------------


def test_no_version_within_the_connect_timeout_closes():
    broker = Broker()
    client = CoreClient(broker, limits=Limits(connect_timeout=2000))
    client.send(p.Ping(60_000))
    broker.run(1.9)
    assert not client.closed
    broker.run(0.2)
    e = exception(client.take(), ExceptionType.CONNECTION_TIMEDOUT, 0)
    assert "within 2 s" in e.message and client.closed


def test_the_connection_ttl_from_the_client_s_pings():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    client.send(p.Ping(5_000))
    for _ in range(6):  # pings every 4 s keep it open well past the TTL
        broker.run(4)
        assert client.send(p.Ping(5_000)) == [p.Ping(5_000)]
    broker.run(5.1)
    assert client.closed and client.take() == []
    client.lose()
    assert broker.server.sessions == set()


def test_a_ttl_of_minus_one_never_expires():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    client.send(p.Ping(-1))
    broker.run(3600)
    assert not client.closed


# -- the end ---------------------------------------------------------------------------------------


def test_disconnect_all_sends_disconnect_v3_and_closes():
    broker = Broker()
    factory = CoreFactory(broker.server, acceptor=ACCEPTOR, reactor=broker.clock)
    client = CoreClient(broker)
    client.protocol.factory = factory
    factory.connections.add(client.protocol)
    client.open()
    factory.disconnect_all()
    (packet,) = client.take()
    assert type(packet) is p.DisconnectV3 and packet.reason == p.DisconnectReason.SHUT_DOWN
    assert packet.node_id == broker.server.node_id and client.closed


def test_connections_allowed_and_the_factory_s_protocol():
    broker = Broker()
    acceptor = Acceptor(name="c", scheme="tcp", host="127.0.0.1", port=0, params={"connectionsAllowed": "1"})
    factory = CoreFactory(broker.server, acceptor=acceptor, reactor=broker.clock)
    first = factory.buildProtocol(None)
    assert isinstance(first, CoreProtocol)
    factory.connections.add(first)
    assert factory.buildProtocol(None) is None


def test_the_acceptor_s_prefixes():
    broker = Broker()
    acceptor = Acceptor(name="c", scheme="tcp", host="127.0.0.1", port=0, anycast_prefix="queue/", multicast_prefix="topic/")
    client = CoreClient(broker, acceptor=acceptor)
    client.open()
    body, headers = message(address="queue/orders")
    assert client.send(p.SessSend(body, headers, True, -1, 1, channel_id=10)) == [p.NullResponse(-1, channel_id=10)]
    queue = broker.server.find_queue("orders")
    assert queue is not None and queue.message_count == 1
    assert broker.server.addresses["orders"].routing_types == {RoutingType.ANYCAST}


class _Log:
    """An event log that keeps what it is given."""

    def __init__(self):
        self.events: list = []

    def enabled(self, kind) -> bool:
        return True

    def emit(self, kind, **fields) -> None:
        self.events.append((kind, fields))


def test_the_event_log_hears_of_the_connection_once_and_of_its_end():
    from junction.events.node import NodeEvents

    broker = Broker(users=USERS, security_settings=SECURITY)
    log = _Log()
    broker.server.events = NodeEvents(log, broker.server.node_id, clock=broker.clock.seconds)
    client = CoreClient(broker)
    client.open(user="alice", password="wrong")  # refused: not a connection of the node yet
    assert log.events == []
    client.send(create_session(user="alice", password="secret", client_id="app-9"))
    client.session(11, user="alice", password="secret")
    broker.run(2.5)
    client.lose()
    kinds = [(kind, fields.get("protocol"), fields.get("user"), fields.get("client_id")) for kind, fields in log.events]
    assert kinds == [("connection.accepted", "CORE", "alice", "app-9"), ("connection.closed", None, None, None)]
    assert log.events[1][1]["duration_ms"] == 2500.0 and log.events[1][1]["reason"] == "closed"


def test_a_delivery_the_client_found_expired_is_expired_at_once():
    """SESS_EXPIRED: the message goes to the expiry address now, as Artemis does, not back
    to the queue (where it would be delivered again until the next expiry scan)."""
    broker = Broker()
    queue = broker.queue("q")
    client = CoreClient(broker)
    client.open()
    body, headers = message()
    client.send(p.SessSend(body, headers, True, -1, 1, channel_id=10))
    client.send(p.SessCreateConsumer(0, "q", None, False, True, 0, channel_id=10))
    got = client.send(p.SessFlowToken(0, -1, channel_id=10), p.SessStart(channel_id=10))
    (delivery,) = [x for x in got if isinstance(x, p.SessReceiveMsg)]
    again = client.send(p.SessExpired(0, delivery.headers.message_id, channel_id=10))
    assert not [x for x in again if isinstance(x, p.SessReceiveMsg)]
    assert (queue.messages_expired, queue.message_count) == (1, 0)
