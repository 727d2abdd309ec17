"""The CORE connection's state table (junction.protocols.core.connection) and its answers.

Every state is reached through the public API and every input applied to it
by a packet that is that input there; what happens is compared with the
rules written out here independently of :data:`TRANSITIONS` (``expected``),
so a wrong row of the table -- or a row missing, or one too many -- fails a
test.  The answers' forms per version (junction.protocols.core.responses) are
checked against Artemis's thresholds, and the connection-level answers
against the real broker's bytes.
"""

from __future__ import annotations

import pytest

from junction.protocols.core import (
    CoreCodec,
    CoreLimits,
    Handshake,
    MessageHeaders,
    encode_packet,
    responses,
)
from junction.protocols.core import packets as p
from junction.protocols.core.connection import (
    DEFAULT_TTL_MS,
    REJECTIONS,
    TRANSITIONS,
    Action,
    ChannelInUse,
    ConnectionInput,
    ConnectionState,
    CoreConnection,
    IncompatibleVersion,
    MisplacedPacket,
    UnexpectedPacket,
    UnknownChannel,
    is_fatal,
)
from junction.protocols.core.errors import ExceptionType, MalformedPacket, TooManyChannels
from junction.protocols.core.versions import ACCEPTED_VERSIONS, CURRENT_VERSION
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from tests.unit.test_core_traces import TRACE

S = ConnectionState
I = ConnectionInput  # noqa: E741 - the table's own shorthand
A = Action

NODE = "e8ba12ab-e61b-11f1-8f80-02fc00000001"
SESSION_CHANNEL = 10


def create_session(channel: int = SESSION_CHANNEL, version: int = CURRENT_VERSION, name: str = "s") -> p.CreateSessionV2:
    return p.CreateSessionV2(
        name, channel, version, "guest", "guest", 102400, False, True, True, -1, False, None, None
    )


# -- the rules, written out independently of the table ---------------------------------------------

REJECTED = {
    I.INCOMPATIBLE: (IncompatibleVersion, ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS, True),
    I.SESSION_REJECTED: (ChannelInUse, ExceptionType.SESSION_CREATION_REJECTED, False),
    I.UNKNOWN_CHANNEL: (UnknownChannel, ExceptionType.ILLEGAL_STATE, True),
    I.MISPLACED: (MisplacedPacket, ExceptionType.ILLEGAL_STATE, True),
    I.SERVER_PACKET: (UnexpectedPacket, ExceptionType.UNSUPPORTED_PACKET, True),
}


def expected(state: S, kind: I):
    """("move", next, action) | ("reject", error class, code, fatal) | ("misuse",) | ("unreachable",)."""
    if state is S.CLOSED:
        if kind in (I.SESSION_PACKET, I.CONFIRMATION):
            return ("unreachable",)  # closing closed every session
        return ("move", S.CLOSED, A.IGNORE)
    if kind in (I.ERROR, I.DISCONNECT):
        return ("move", S.CLOSED, A.WRITE)
    if kind is I.CLOSE:
        return ("move", S.CLOSED, A.CLOSE)
    if kind is I.HANDSHAKE:
        return ("move", S.NEW, A.IGNORE) if state is S.NEW else ("misuse",)
    if kind in (I.PING, I.REATTACH_SESSION, I.CHECK_FAILOVER):
        return ("move", state, A.ANSWER)
    if kind is I.SUBSCRIBE_TOPOLOGY:
        return ("move", state, A.TOPOLOGY)
    if kind is I.SUBSCRIBE_TOPOLOGY_V2:
        return ("move", S.ACTIVE, A.TOPOLOGY)
    if kind is I.CREATE_SESSION:
        return ("move", S.ACTIVE, A.CREATE_SESSION)
    if kind in REJECTED:
        return ("reject", *REJECTED[kind])
    assert kind in (I.SESSION_PACKET, I.CONFIRMATION)
    if state is S.NEW:
        return ("unreachable",)  # no session is open before a version is adopted
    return ("move", S.ACTIVE, A.HANDLE if kind is I.SESSION_PACKET else A.IGNORE)


# -- reaching states and applying inputs ---------------------------------------------------------------


def reach(state: S) -> CoreConnection:
    conn = CoreConnection(NODE)
    if state is S.NEW:
        return conn
    assert conn.receive(create_session()) is A.CREATE_SESSION
    conn.open_session()
    if state is S.CLOSED:
        conn.close()
    assert conn.state is state
    return conn


def packet_for(kind: I, state: S):
    """A packet that is ``kind`` on a connection in ``state`` (None: nothing from the client)."""
    return {
        I.HANDSHAKE: Handshake(),
        I.PING: p.Ping(30_000),
        I.SUBSCRIBE_TOPOLOGY: p.SubscribeTopology(False),
        I.SUBSCRIBE_TOPOLOGY_V2: p.SubscribeTopologyV2(False, 135),
        I.CREATE_SESSION: create_session(11),
        # in use once ACTIVE (reach() opened 10); a reserved channel before
        I.SESSION_REJECTED: create_session(SESSION_CHANNEL if state is S.ACTIVE else 3),
        I.REATTACH_SESSION: p.ReattachSession("old", 7),
        I.CHECK_FAILOVER: p.CheckFailover(None),
        I.INCOMPATIBLE: p.SubscribeTopologyV2(False, 128),
        I.SESSION_PACKET: p.SessStart(channel_id=SESSION_CHANNEL),
        I.CONFIRMATION: p.PacketsConfirmed(4, channel_id=SESSION_CHANNEL),
        I.UNKNOWN_CHANNEL: p.SessStart(channel_id=12),
        I.MISPLACED: p.SessStart(channel_id=0),
        I.SERVER_PACKET: p.NullResponse(-1, channel_id=SESSION_CHANNEL),
    }.get(kind)


def apply(conn: CoreConnection, kind: I, state: S):
    """Apply ``kind`` through the method that stands for it; (action, written packet or None)."""
    packet = packet_for(kind, state)
    if packet is not None:
        return conn.receive(packet), None
    if kind is I.ERROR:
        written = conn.error(MalformedPacket("bad", 0))
        return (A.WRITE if written is not None else A.IGNORE), written
    if kind is I.DISCONNECT:
        written = conn.disconnect()
        return (A.WRITE if written is not None else A.IGNORE), written
    assert kind is I.CLOSE
    return conn.close(), None


CASES = [(state, kind) for state in S for kind in I]


@pytest.mark.parametrize(("state", "kind"), CASES, ids=[f"{s.name}-{k.name}" for s, k in CASES])
def test_every_state_and_input(state, kind):
    conn = reach(state)
    want = expected(state, kind)
    if want[0] == "unreachable":
        packet = packet_for(kind, state)
        assert conn.classify(packet) is not kind  # no packet is this input here
        assert (state, kind) not in TRANSITIONS
        return
    packet = packet_for(kind, state)
    if packet is not None:
        assert conn.classify(packet) is kind, "the test's packet must be the input it stands for"
    if want[0] == "misuse":
        with pytest.raises(LocalProtocolError):
            apply(conn, kind, state)
        assert conn.state is state
        return
    if want[0] == "reject":
        _, error_class, code, fatal = want
        with pytest.raises(RemoteProtocolError) as info:
            apply(conn, kind, state)
        error = info.value
        assert isinstance(error, error_class if error_class is not ChannelInUse else (ChannelInUse, TooManyChannels))
        assert error.exception_type == code and is_fatal(error) == fatal
        assert conn.state is state  # the answer the adapter writes next decides
        answer = conn.error(error)
        assert (answer.code, answer.correlation_id) == (code, None)
        assert answer.channel_id == (1 if kind in (I.SESSION_REJECTED,) else packet.channel_id)
        assert conn.state is (S.CLOSED if fatal else state)
        return
    _, nxt, action = want
    got, written = apply(conn, kind, state)
    assert (conn.state, got) == (nxt, action)
    if kind is I.ERROR and written is not None:
        assert written.code == ExceptionType.INTERNAL_ERROR
    if kind is I.DISCONNECT and written is not None:
        assert type(written) is (p.DisconnectV3 if state is S.ACTIVE else p.Disconnect)  # no version: the oldest


def test_the_table_has_no_row_the_rules_do_not_know():
    for (state, kind), _row in TRANSITIONS.items():
        assert expected(state, kind)[0] not in ("misuse", "unreachable"), (state, kind)
    # Rejections keep the state; only ERROR, DISCONNECT and CLOSE reach CLOSED.
    for (state, kind), (nxt, action) in TRANSITIONS.items():
        if action in REJECTIONS:
            assert nxt is state, (state, kind)
        if nxt is S.CLOSED and state is not S.CLOSED:
            assert kind in (I.ERROR, I.DISCONNECT, I.CLOSE), (state, kind)


# -- versions ----------------------------------------------------------------------------------------


def test_subscribe_topology_v2_sets_the_version_every_time():
    conn = CoreConnection(NODE)
    assert conn.version is None
    conn.receive(p.SubscribeTopologyV2(False, 131))
    assert (conn.state, conn.version) == (S.ACTIVE, 131)
    conn.receive(p.SubscribeTopologyV2(False, 136))
    assert conn.version == 136


def test_the_first_create_session_sets_the_version_only_when_none_is_set():
    conn = CoreConnection(NODE)
    conn.receive(create_session(version=133))
    assert conn.version == 133
    conn.open_session()
    conn.receive(create_session(11, version=136))
    assert conn.version == 133
    fresh = CoreConnection(NODE)
    fresh.receive(p.SubscribeTopologyV2(False, 130))
    fresh.receive(create_session(version=136))
    assert fresh.version == 130


def test_an_old_client_s_subscription_sets_no_version_and_gets_the_oldest_topology():
    conn = CoreConnection(NODE)
    assert conn.receive(p.SubscribeTopology(False)) is A.TOPOLOGY
    assert (conn.state, conn.version) == (S.NEW, None)
    assert type(conn.topology(5)) is p.ClusterTopology


@pytest.mark.parametrize("version", [0, 120, 121, 128, 137, 1000, -1])
def test_versions_outside_the_accepted_ones_get_108_and_close(version):
    for packet in (p.SubscribeTopologyV2(False, version), create_session(version=version)):
        conn = CoreConnection(NODE)
        with pytest.raises(IncompatibleVersion) as info:
            conn.receive(packet)
        answer = conn.error(info.value)
        assert answer.code == 108 and answer.channel_id == packet.channel_id
        assert "AMQ229033" in answer.message and str(version) in answer.message
        assert conn.state is S.CLOSED and conn.version is None


def test_accepted_versions_are_artemis_s_compatible_ones_from_the_2_x_message_layout_on():
    assert ACCEPTED_VERSIONS == frozenset(range(129, 137))
    for version in sorted(ACCEPTED_VERSIONS):
        conn = CoreConnection(NODE)
        assert conn.receive(create_session(version=version)) is A.CREATE_SESSION


# -- answers at once -------------------------------------------------------------------------------


def test_ping_is_echoed_and_sets_the_ttl():
    conn = CoreConnection(NODE)
    assert conn.ttl_ms == DEFAULT_TTL_MS
    ping = p.Ping(42_000)
    assert conn.receive(ping) is A.ANSWER
    assert conn.answer(ping) == p.Ping(42_000)
    assert conn.ttl_ms == 42_000


def test_reattach_is_refused_so_the_client_recreates_its_sessions():
    conn = reach(S.ACTIVE)
    request = p.ReattachSession("s", 3)
    assert conn.receive(request) is A.ANSWER
    assert conn.answer(request) == p.ReattachSessionResponse(-1, False)


@pytest.mark.parametrize(
    ("scales_down", "node_id", "ok"),
    [
        # no scale-down policy (every Junction node's CORE acceptor): yes for any node, so the
        # client a router redirected here (naming the router's node) keeps this connection
        (False, None, True),
        (False, NODE, True),
        (False, "another-node", True),
        # a server that scales down: yes only for itself (no node scaled down into it)
        (True, None, True),
        (True, NODE, True),
        (True, "another-node", False),
    ],
)
def test_check_for_failover(scales_down, node_id, ok):
    conn = CoreConnection(NODE, scales_down=scales_down)
    request = p.CheckFailover(node_id)
    assert conn.receive(request) is A.ANSWER
    assert conn.answer(request) == p.CheckFailoverReply(ok)


def test_answer_refuses_what_is_not_answered_at_once():
    with pytest.raises(LocalProtocolError):
        CoreConnection(NODE).answer(p.SessStart(channel_id=10))


# -- sessions and channels -------------------------------------------------------------------------------


def test_open_refuse_and_close_sessions():
    conn = CoreConnection(NODE)
    conn.receive(create_session(10, name="a"))
    assert conn.pending.name == "a"
    assert conn.open_session() == p.CreateSessionResponse(CURRENT_VERSION)
    assert dict(conn.sessions) == {10: "a"} and conn.pending is None
    conn.receive(create_session(11, name="b"))
    refused = conn.refuse_session(ExceptionType.SECURITY_EXCEPTION, "AMQ229031: no")
    assert (refused.code, refused.channel_id, refused.message) == (105, 1, "AMQ229031: no")
    assert dict(conn.sessions) == {10: "a"} and conn.state is S.ACTIVE
    with pytest.raises(LocalProtocolError):
        conn.open_session()  # nothing pending
    assert conn.classify(p.SessStart(channel_id=10)) is I.SESSION_PACKET
    conn.close_session(10)
    assert conn.classify(p.SessStart(channel_id=10)) is I.UNKNOWN_CHANNEL


def test_max_channels_refuses_the_next_session_and_keeps_the_connection():
    conn = CoreConnection(NODE, CoreLimits(max_channels=2))
    for channel in (10, 11):
        conn.receive(create_session(channel))
        conn.open_session()
    with pytest.raises(TooManyChannels) as info:
        conn.receive(create_session(12))
    answer = conn.error(info.value)
    assert (answer.code, answer.channel_id) == (ExceptionType.SESSION_CREATION_REJECTED, 1)
    assert "maximum of 2 sessions" in answer.message
    assert conn.state is S.ACTIVE
    conn.close_session(10)
    assert conn.receive(create_session(12)) is A.CREATE_SESSION


@pytest.mark.parametrize("channel", [0, 1, 2, 3, 4, 9])
def test_a_session_on_a_reserved_channel_is_refused(channel):
    with pytest.raises(ChannelInUse, match=f"channel {channel} is reserved"):
        CoreConnection(NODE).receive(create_session(channel))


@pytest.mark.parametrize(
    ("packet", "kind"),
    [
        (p.Ping(1, channel_id=10), I.MISPLACED),
        (p.SubscribeTopologyV2(False, 136, channel_id=1), I.MISPLACED),
        (p.CheckFailover(None, channel_id=0), I.MISPLACED),
        (p.SessSend(b"", MessageHeaders(), False, channel_id=1), I.MISPLACED),
        (p.SessStart(channel_id=2), I.UNKNOWN_CHANNEL),
        (p.SessStart(channel_id=9), I.UNKNOWN_CHANNEL),
        (p.PacketsConfirmed(1, channel_id=0), I.MISPLACED),
        (p.PacketsConfirmed(1, channel_id=11), I.UNKNOWN_CHANNEL),
        (p.ExceptionMessage(0, "x", channel_id=10), I.SERVER_PACKET),
        (p.Disconnect(None), I.SERVER_PACKET),
        (p.ClusterTopologyV4(False, "n", last=True), I.SERVER_PACKET),
        (p.CreateSessionResponse(136), I.SERVER_PACKET),
    ],
)
def test_channels_and_directions(packet, kind):
    conn = reach(S.ACTIVE)
    assert conn.classify(packet) is kind


def test_a_closed_connection_ignores_everything_and_answers_nothing():
    conn = reach(S.CLOSED)
    assert conn.sessions == {}
    assert conn.receive(p.SessStart(channel_id=10)) is A.IGNORE
    assert conn.error(UnknownChannel("x", 10)) is None
    assert conn.fail(0, "x") is None
    assert conn.disconnect() is None
    with pytest.raises(LocalProtocolError):
        conn.refuse_session(105, "x")


def test_fail_ends_the_connection_with_the_adapter_s_exception():
    conn = reach(S.ACTIVE)
    answer = conn.fail(ExceptionType.NOT_IMPLEMENTED_EXCEPTION, "large messages are not supported", 10)
    assert (answer.code, answer.channel_id, answer.correlation_id) == (213, 10, None)
    assert conn.state is S.CLOSED and conn.sessions == {}


@pytest.mark.parametrize(
    ("version", "form"),
    [(None, p.Disconnect), (124, p.Disconnect), (125, p.DisconnectV2), (130, p.DisconnectV2), (131, p.DisconnectV3), (136, p.DisconnectV3)],
)
def test_disconnect_takes_the_form_the_version_reads(version, form):
    conn = CoreConnection(NODE)
    conn.version = version
    written = conn.disconnect()
    assert type(written) is form and written.node_id == NODE and written.channel_id == 0
    if form is p.DisconnectV3:
        assert written.reason == p.DisconnectReason.SHUT_DOWN and written.target_connector is None
    assert conn.state is S.CLOSED


# -- the forms of the answers, per version ---------------------------------------------------------------


@pytest.mark.parametrize(("version", "form"), [(None, p.ClusterTopology), (121, p.ClusterTopology), (122, p.ClusterTopologyV2), (130, p.ClusterTopologyV2), (131, p.ClusterTopologyV4)])
def test_topology_form(version, form):
    written = responses.topology(version, NODE, 99)
    assert type(written) is form and written.last and written.primary is None and written.backup is None
    if form is not p.ClusterTopology:
        assert written.unique_event_id == 99


@pytest.mark.parametrize(("version", "correlation"), [(None, None), (129, None), (130, -1), (136, -1)])
def test_null_response_form(version, correlation):
    assert responses.null_response(version, 10).correlation_id == correlation
    if correlation is not None:
        assert responses.null_response(version, 10, -7).correlation_id == -7


@pytest.mark.parametrize(
    ("version", "form"),
    [(None, p.SessQueueQueryResponse), (125, p.SessQueueQueryResponse), (126, p.SessQueueQueryResponseV2), (128, p.SessQueueQueryResponseV2), (129, p.SessQueueQueryResponseV3)],
)
def test_queue_query_form(version, form):
    info = responses.QueueInfo("q", "a", consumer_count=2, message_count=3)
    written = responses.queue_query_response(version, 10, info)
    assert type(written) is form and (written.name, written.address, written.consumer_count) == ("q", "a", 2)


@pytest.mark.parametrize(
    ("version", "form"),
    [
        (125, p.SessBindingQueryResponse),
        (126, p.SessBindingQueryResponseV2),
        (127, p.SessBindingQueryResponseV3),
        (129, p.SessBindingQueryResponseV4),
        (134, p.SessBindingQueryResponseV4),
        (135, p.SessBindingQueryResponseV5),
    ],
)
def test_binding_query_form(version, form):
    info = responses.BindingInfo(True, ("q1", "q2"), supports_anycast=True)
    written = responses.binding_query_response(version, 10, info)
    assert type(written) is form and written.queue_names == ("q1", "q2")
    if form is p.SessBindingQueryResponseV5:
        assert (written.supports_multicast, written.supports_anycast) == (False, True)


def test_exception_forms():
    assert responses.exception(101, "x", 10) == p.ExceptionMessage(101, "x", None, channel_id=10)
    assert responses.exception(101, "x", 10, -3).correlation_id == -3


# -- against the real broker's bytes ---------------------------------------------------------------------


def test_the_connection_level_answers_are_the_real_broker_s_bytes():
    """The trace's client opening, fed to a server codec and the connection: the answers at once
    (PING echoes, the topology with the broker's node id and event id, CREATESESSION_RESP) are
    byte for byte what the real broker wrote."""
    client = b"".join(bytes.fromhex(h) for d, h in TRACE if d == "C->S")
    server = [bytes.fromhex(h) for d, h in TRACE if d == "S->C"]
    codec = CoreCodec()
    conn = CoreConnection(NODE)
    written = []
    for event in codec.receive_data(client):
        action = conn.receive(event)
        if action is A.ANSWER:
            written.append(encode_packet(conn.answer(event)))
        elif action is A.TOPOLOGY:
            written.append(encode_packet(conn.topology(1795314303973)))
        elif action is A.CREATE_SESSION:
            written.append(encode_packet(conn.open_session()))
        elif action is A.HANDLE:
            break  # the session's packets are the adapter's (tests/unit/test_core_server.py)
    assert written == server[:4]
