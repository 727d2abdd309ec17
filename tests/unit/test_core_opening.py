"""The gateway's side of a CORE client's opening (junction.protocols.core.opening).

The client's bytes are the real Artemis JMS client's (``core-traces``: client
and broker of version 136), and the project's encoder where a test needs a
packet the trace lacks.  What :class:`CoreOpening` writes is checked byte for
byte against layouts written out here by hand from the reference (core.md
section 1, artemis-routing.md section 5) -- not with the codec's writer -- and
read back with the codec.  Every stream is fed whole and one byte at a time
(and Hypothesis cuts it anywhere): the outcome never depends on how it was
cut.  The reader's table is exercised row by row, and every (state, input)
pair outside it is refused.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from junction.protocols.core import (
    CoreCodec,
    CoreLimits,
    ExceptionType,
    Handshake,
    decode_packet,
    encode_packet,
)
from junction.protocols.core import packets as p
from junction.protocols.core.opening import (
    MAX_OPENING_PACKETS,
    NETTY_CONNECTOR_FACTORY,
    OPENING_SLACK,
    PACKET_INPUTS,
    TRANSITIONS,
    CoreCredentials,
    CoreOpening,
    OpeningComplete,
    OpeningFailed,
    OpeningInput,
    OpeningState,
    RedirectTarget,
    netty_connector,
)
from junction.protocols.core.texts import connector_text
from junction.protocols.core.values import Scalar, TransportConfiguration
from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import Complete, Failed, Opening, Passthrough
from junction.routing.targets import RouterStatus

# -- the real client's opening (core-traces/proxy2.txt), packet by packet ---------------------------------

HANDSHAKE = b"ARTEMIS"
PING = bytes.fromhex("000000110a0000000000000000000000000000ea60")
SUBSCRIBE_V2 = bytes.fromhex("0000000e7100000000000000000000000088")
CREATESESSION_V2 = bytes.fromhex(
    "0000006bee000000000000000100000024002465643030366638312d653631622d313166312d393437642d30"
    "3266633030303030303031000000000000000a00000088010000000500670075006500730074010000000500"
    "6700750065007300740001900000ffffffffffff000000"
)
#: the broker's answer to SUBSCRIBE_V2 in the same trace: node e8ba12ab-..., event id 0x1a2011243e5
TRACE_NODE = "e8ba12ab-e61b-11f1-8f80-02fc00000001"
TRACE_EVENT = 0x1A2011243E5
TOPOLOGY_V4 = bytes.fromhex(
    "00000045ef00000000000000000000000024002465386261313261622d653631622d313166312d386638302d"
    "303266633030303030303031000001a2011243e50000ff000000000088"
)
#: the gateway's answer: that topology twice, the first not last (the byte after both null
#: connectors), so the client has the server version before it is released to send its
#: CREATESESSION (CoreOpening's module doc)
LAST_AT = 66
assert TOPOLOGY_V4[LAST_AT] == 0xFF
TOPOLOGY_ANSWER = TOPOLOGY_V4[:LAST_AT] + b"\x00" + TOPOLOGY_V4[LAST_AT + 1 :] + TOPOLOGY_V4
STREAM = HANDSHAKE + PING + PING + SUBSCRIBE_V2 + CREATESESSION_V2
#: what the backend gets: the subscription, answered by the gateway, is left out
REPLAY = HANDSHAKE + PING + PING + CREATESESSION_V2

USERS = {"guest": "guest", "alice": "s3cret"}


class Authenticator:
    """Checks USERS; records every call."""

    def __init__(self):
        self.calls: list[CoreCredentials] = []

    def __call__(self, credentials: CoreCredentials):
        self.calls.append(credentials)
        if credentials.username in USERS and USERS[credentials.username] == credentials.password:
            return f"user:{credentials.username}"
        return None


def make(**kw) -> tuple[CoreOpening, Authenticator]:
    auth = Authenticator()
    kw.setdefault("node_id", TRACE_NODE)
    kw.setdefault("unique_event_id", TRACE_EVENT)
    return CoreOpening(auth, **kw), auth


def feed(chunks, **kw):
    """(events, what was written, the opening, the authenticator) for ``chunks`` in turn."""
    opening, auth = make(**kw)
    events: list = []
    out = b""
    for chunk in chunks:
        events += opening.receive_data(chunk)
        out += opening.data_to_send()
    return events, out, opening, auth


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def cuts(data: bytes):
    return {"whole": [data], "bytewise": bytewise(data)}


def one(events, cls):
    assert len(events) == 1 and isinstance(events[0], cls), events
    return events[0]


def packets(data: bytes) -> list:
    return CoreCodec(server=False).receive_data(data)


def session(version=136, username="alice", password="s3cret", client_id="app-1", v2=True) -> bytes:
    """A CREATESESSION as the real client writes it (version 131+: V2 with the client id)."""
    fields = ("f0a1-session", 10, version, username, password, 102400, False, True, True, -1, False, None)
    return encode_packet(p.CreateSessionV2(*fields, client_id) if v2 else p.CreateSession(*fields))


# -- hand-written layouts (core.md section 1) ------------------------------------------------------------


def j_string(text: str) -> bytes:
    """``writeString`` of an ASCII text: int32 count, then u16 units (< 9) or u16 size + bytes."""
    units = len(text)
    if units < 9:
        return struct.pack(">i", units) + text.encode("utf-16-be")
    return struct.pack(">iH", units, units) + text.encode("ascii")


def j_nullable_string(text) -> bytes:
    return b"\x00" if text is None else b"\x01" + j_string(text)


def j_nullable_simple(text) -> bytes:
    return b"\x00" if text is None else b"\x01" + struct.pack(">i", 2 * len(text)) + text.encode("utf-16-le")


def j_packet(kind: int, channel: int, body: bytes) -> bytes:
    return struct.pack(">ibq", 9 + len(body), kind, channel) + body


def j_exception(code: int, text: str, channel: int) -> bytes:
    """EXCEPTION (20): int32 code, nullable String message; no correlation id."""
    return j_packet(20, channel, struct.pack(">i", code) + j_nullable_string(text))


# -- the real client's opening ---------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_the_real_clients_opening_completes_with_its_bytes_less_the_answered_subscription(cut):
    events, out, opening, auth = feed(cuts(STREAM)[cut])
    done = one(events, OpeningComplete)
    assert (done.client_id, done.username, done.user, done.principal, done.version) == (
        None, "guest", "guest", "user:guest", 136
    )
    assert done.replay == REPLAY
    assert auth.calls == [CoreCredentials("guest", "guest")]
    # the topology, exactly as the real broker wrote it for the same node and event id
    assert out == TOPOLOGY_ANSWER
    assert opening.state is OpeningState.COMPLETE and opening.buffered == 0


def test_the_topology_is_answered_as_soon_as_the_subscription_is_complete():
    opening, _ = make()
    opening.receive_data(HANDSHAKE + PING + PING + SUBSCRIBE_V2[:-1])
    assert opening.data_to_send() == b""
    assert opening.receive_data(SUBSCRIBE_V2[-1:]) == []
    assert opening.data_to_send() == TOPOLOGY_ANSWER  # before any CREATESESSION: the client waits for it
    assert opening.state is OpeningState.AWAIT_SESSION and opening.version == 136


def test_the_server_version_is_known_before_the_topology_releases_the_client():
    """The real client releases its waiting thread on the first ``last`` member and reads the
    server version after it (ActiveMQClientProtocolManager's Channel0Handler); the thread
    names the client id in its CREATESESSION only if the version is there.  So a ``last``
    member may only come after a message that carried the version."""
    opening, _ = make()
    opening.receive_data(HANDSHAKE + SUBSCRIBE_V2)
    sent = packets(opening.data_to_send())
    versions_seen, released_after = [], None
    for packet in sent:
        if packet.last:
            released_after = list(versions_seen)
            break
        versions_seen.append(packet.server_version)
    assert released_after == [136]


def test_the_client_id_of_a_createsession_v2_is_the_routing_key():
    stream = HANDSHAKE + PING + SUBSCRIBE_V2 + session()
    done = one(feed([stream])[0], OpeningComplete)
    assert (done.client_id, done.username, done.principal) == ("app-1", "alice", "user:alice")
    assert done.replay == HANDSHAKE + PING + session()


def test_bytes_behind_the_createsession_are_replayed_later_reads_pass_through():
    behind = encode_packet(p.SessStart(channel_id=10)) + b"\x00\x00"
    events, _out, opening, _auth = feed([HANDSHAKE + SUBSCRIBE_V2 + session() + behind, b"more"])
    done, later = events
    assert done.replay == HANDSHAKE + session() + behind
    assert later == Passthrough(b"more")
    assert opening.receive_data(b"") == []


def test_a_createsession_followed_by_garbage_in_the_same_read_still_completes():
    done = one(feed([HANDSHAKE + session() + b"\xff\xff\xff\xff garbage"])[0], OpeningComplete)
    assert done.replay.endswith(b"garbage")


def test_no_login_goes_to_authenticate_as_none():
    opening = CoreOpening(lambda credentials: ("anonymous", credentials))
    done = one(opening.receive_data(HANDSHAKE + session(username=None, password=None)), OpeningComplete)
    assert done.principal == ("anonymous", CoreCredentials(None, None)) and done.username is None


def test_the_handshake_is_optional_as_in_artemis():
    done = one(feed([SUBSCRIBE_V2 + session()])[0], OpeningComplete)
    assert done.replay == session()


def test_a_createsession_without_subscription_sets_the_version():
    done = one(feed([HANDSHAKE + session(version=133)])[0], OpeningComplete)
    assert done.version == 133


def test_credentials_never_show_the_password():
    assert "s3cret" not in repr(CoreCredentials("alice", "s3cret"))
    done = one(feed([HANDSHAKE + session()])[0], OpeningComplete)
    assert "s3cret" not in repr(done)


# -- what a reconnecting client blocks on ------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_failover_check_and_reattach_are_answered_at_once_and_left_out(cut):
    check = encode_packet(p.CheckFailover(TRACE_NODE))
    reattach = encode_packet(p.ReattachSession("f0a1-session", 7))
    stream = HANDSHAKE + PING + SUBSCRIBE_V2 + check + reattach + session()
    events, out, _opening, _auth = feed(cuts(stream)[cut])
    assert one(events, OpeningComplete).replay == HANDSHAKE + PING + session()
    reply = j_packet(-5, 1, b"\xff")  # CHECK_FOR_FAILOVER_REPLY okToFailover true
    reattached = j_packet(33, 1, struct.pack(">i", -1) + b"\x00")  # REATTACH_SESSION_RESP -1, false
    assert out == TOPOLOGY_ANSWER + reply + reattached


# -- the topology's form follows the client's version -----------------------------------------------------


def _topology_for(subscribe: bytes) -> bytes:
    opening, _ = make(node_id="gw-1", unique_event_id=5)
    assert opening.receive_data(HANDSHAKE + subscribe) == []
    return opening.data_to_send()


_MEMBER = b"\x00" + j_string("gw-1")  # exit false, node id
_PAIR = b"\x00\x00\xff"  # no primary, no backup, last


@pytest.mark.parametrize(
    ("subscribe", "expected"),
    [
        (p.SubscribeTopology(False), j_packet(110, 0, _MEMBER + _PAIR)),
        (p.SubscribeTopologyV2(False, 121), j_packet(110, 0, _MEMBER + _PAIR)),
        (p.SubscribeTopologyV2(False, 122), j_packet(114, 0, _MEMBER + struct.pack(">q", 5) + _PAIR + b"\x00")),
        (p.SubscribeTopologyV2(False, 125),
         j_packet(122, 0, _MEMBER + struct.pack(">q", 5) + _PAIR + b"\x00\x00")),
        (p.SubscribeTopologyV2(False, 131),
         j_packet(-17, 0, _MEMBER + struct.pack(">q", 5) + b"\x00\x00\x00" + b"\x00\x00" + struct.pack(">i", 136))
         + j_packet(-17, 0, _MEMBER + struct.pack(">q", 5) + _PAIR + b"\x00\x00" + struct.pack(">i", 136))),
    ],
    ids=["v1", "121", "122", "125", "131"],
)
def test_the_topology_form_is_the_one_the_clients_version_reads(subscribe, expected):
    assert _topology_for(encode_packet(subscribe)) == expected


# -- refusals at the opening -----------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_a_bad_login_gets_artemis_security_exception(cut):
    stream = HANDSHAKE + PING + SUBSCRIBE_V2 + session(password="wrong")
    events, out, opening, _auth = feed(
        cuts(stream)[cut], remote_address="/10.0.0.5:40000", certificate_subject="CN=app,O=Example"
    )
    failed = one(events, OpeningFailed)
    text = ("AMQ229031: Unable to validate user from /10.0.0.5:40000. Username: alice; "
            "SSL certificate subject DN: CN=app,O=Example")
    assert (failed.reason, failed.exception_type, failed.condition) == (
        text, ExceptionType.SECURITY_EXCEPTION, "SECURITY_EXCEPTION"
    )
    assert failed.login_refused and failed.user == "alice" and failed.client_id == "app-1"
    assert out == TOPOLOGY_ANSWER + j_exception(105, text, 1)  # the CREATESESSION's answer, on channel 1
    assert opening.state is OpeningState.FAILED and opening.failure is failed and opening.buffered == 0
    assert opening.receive_data(session()) == [] and opening.data_to_send() == b""


def test_a_bad_login_without_address_or_certificate_says_null_and_unavailable():
    failed = one(feed([HANDSHAKE + session(username=None, password=None)])[0], OpeningFailed)
    assert failed.reason == (
        "AMQ229031: Unable to validate user from null. Username: null; SSL certificate subject DN: unavailable"
    )


@pytest.mark.parametrize("version", [120, 137, -1])
def test_an_incompatible_version_gets_108_before_the_login_is_checked(version):
    events, out, _opening, auth = feed([HANDSHAKE + session(version=version)])
    failed = one(events, OpeningFailed)
    assert failed.exception_type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS and not failed.login_refused
    assert auth.calls == []
    assert out == j_exception(108, "AMQ229033: Server and client versions incompatible", 1)


@pytest.mark.parametrize("version", [121, 126, 130])
def test_a_client_older_than_2_18_is_not_routed_as_in_artemis(version):
    events, out, _opening, auth = feed([HANDSHAKE + session(version=version, v2=False)])
    failed = one(events, OpeningFailed)
    assert failed.exception_type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS
    assert auth.calls == [CoreCredentials("alice", "s3cret")]  # Artemis validates the user first
    assert out == j_exception(108, "AMQ229033: Server and client versions incompatible", 1)


def test_the_subscriptions_version_is_the_one_routing_checks():
    old_subscription = encode_packet(p.SubscribeTopologyV2(False, 130))
    failed = one(feed([HANDSHAKE + old_subscription + session(version=136)])[0], OpeningFailed)
    assert failed.exception_type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS


def test_a_hornetq_client_is_read_as_core_and_refused_as_too_old():
    stream = b"HORNETQ" + PING + encode_packet(p.SubscribeTopologyV2(False, 126)) + session(version=126, v2=False)
    for chunks in cuts(stream).values():
        events, out, _opening, _auth = feed(chunks)
        assert one(events, OpeningFailed).exception_type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS
        assert [type(x) for x in packets(out)] == [p.ClusterTopologyV3, p.ExceptionMessage]


def test_hornetq_bytes_are_replayed_as_they_came():
    opening, _ = make()
    opening.receive_data(b"HORNETQ" + PING)
    # a HornetQ client that would pass: only to show what is kept
    done = one(opening.receive_data(session()), OpeningComplete)
    assert done.replay == b"HORNETQ" + PING + session()


def test_bytes_that_only_start_like_hornetq_are_read_as_packets():
    events, out, _opening, _auth = feed([b"HORN\x00\x00\x00"])
    failed = one(events, OpeningFailed)
    assert failed.exception_type is ExceptionType.INTERNAL_ERROR  # "HORN" as a length: over the limit
    assert packets(out)[0].code == 0


@pytest.mark.parametrize(
    ("packet", "channel", "text"),
    [
        (p.SessStart(channel_id=10), 10, "SESS_START (67) on channel 10 before CREATESESSION"),
        (p.Ping(60000, channel_id=1), 1, "PING (10) on channel 1 before CREATESESSION"),
        (p.CreateSessionResponse(136), 1, "CREATESESSION_RESP (31) on channel 1 before CREATESESSION"),
        (p.ClusterTopologyV4(False, "n", None, None, True, 1), 0,
         "CLUSTER_TOPOLOGY_V4 (-17) on channel 0 before CREATESESSION"),
    ],
)
def test_any_other_packet_first_is_an_illegal_state(packet, channel, text):
    for chunks in cuts(HANDSHAKE + PING + encode_packet(packet) + session()).values():
        events, out, _opening, auth = feed(chunks)
        failed = one(events, OpeningFailed)
        assert (failed.exception_type, failed.reason, failed.login_refused) == (ExceptionType.ILLEGAL_STATE, text, False)
        assert out == j_exception(104, text, channel) and auth.calls == []


def test_the_codecs_refusals_keep_their_code_and_channel():
    unknown = struct.pack(">ibq", 9, 91, 3)  # REPLICATION_APPEND: not read by the codec
    failed = one(feed([HANDSHAKE + unknown])[0], OpeningFailed)
    assert failed.exception_type is ExceptionType.UNSUPPORTED_PACKET
    (answer,) = packets(feed([HANDSHAKE + unknown])[1])
    assert (answer.code, answer.channel_id) == (1, 3)
    truncated = struct.pack(">ibq", 10, 10, 0) + b"\x00"  # a PING body of one byte
    assert one(feed([HANDSHAKE + truncated])[0], OpeningFailed).exception_type is ExceptionType.INTERNAL_ERROR


def test_a_packet_over_the_limit_is_refused_from_its_length_alone():
    limits = CoreLimits(max_packet_size=100)
    events, out, opening, _auth = feed([HANDSHAKE + struct.pack(">I", 101)], limits=limits)
    failed = one(events, OpeningFailed)
    assert failed.exception_type is ExceptionType.INTERNAL_ERROR and "max-packet-size 100" in failed.reason
    assert opening.buffered == 0 and packets(out)[0].code == 0


def test_more_than_max_bytes_before_the_createsession_is_refused_however_cut():
    limit = 200
    stream = HANDSHAKE + PING * 8 + session()  # 7 + 168 + the session: over 200
    text = "more than 200 bytes before the CREATESESSION was complete"
    for chunks in [*cuts(stream).values(), [stream[:150], stream[150:]]]:
        events, out, opening, _auth = feed(chunks, max_bytes=limit)
        assert one(events, OpeningFailed).reason == text
        assert out == j_exception(0, text, 0) and opening.buffered == 0
    exact = HANDSHAKE + PING * 2 + session()
    done = one(feed([exact + b"behind"], max_bytes=len(exact))[0], OpeningComplete)
    assert done.replay == exact + b"behind"


def test_more_than_max_opening_packets_is_refused():
    stream = HANDSHAKE + PING * MAX_OPENING_PACKETS
    assert feed([stream])[0] == []
    events, out, _opening, _auth = feed([stream + PING])
    text = f"more than {MAX_OPENING_PACKETS} packets before CREATESESSION"
    assert one(events, OpeningFailed).reason == text and out == j_exception(0, text, 0)
    # the CREATESESSION itself is not counted
    assert one(feed([stream + session()])[0], OpeningComplete)


# -- answers once the router has decided -----------------------------------------------------------------


def completed(**kw) -> CoreOpening:
    opening, _ = make(**kw)
    one(opening.receive_data(HANDSHAKE + SUBSCRIBE_V2 + session()), OpeningComplete)
    opening.data_to_send()
    return opening


@pytest.mark.parametrize(
    ("status", "code", "text"),
    [
        ("REFUSED_UNAVAILABLE", 222, "AMQ229238: Connection router r1 not ready"),
        (RouterStatus.REFUSED_UNAVAILABLE, 222, "AMQ229238: Connection router r1 not ready"),
        ("REFUSED_USE_ANOTHER", 119, "AMQ229240: Connection router r1 rejected the connection"),
        (RouterStatus.REFUSED_USE_ANOTHER, 119, "AMQ229240: Connection router r1 rejected the connection"),
    ],
)
def test_refusals_are_artemis_exceptions_answering_the_createsession(status, code, text):
    opening = completed()
    assert opening.refuse("r1", status, detail="not written") == j_exception(code, text, 1)
    assert opening.state is OpeningState.ANSWERED
    with pytest.raises(LocalProtocolError):
        opening.refuse("r1", status)  # only once


def test_refuse_knows_only_the_refusing_statuses():
    with pytest.raises(ValueError):
        completed().refuse("r1", "OK")


def j_connector(name: str, params: list[tuple[str, str]]) -> bytes:
    """TransportConfiguration: String name, String factory, int32 n, n x (String key, 3, String value)."""
    out = j_string(name) + j_string(NETTY_CONNECTOR_FACTORY) + struct.pack(">i", len(params))
    for key, value in params:
        out += j_string(key) + b"\x03" + j_string(value)
    return out


def test_redirect_is_artemis_disconnect_v3_then_the_routing_exception():
    opening = completed(node_id="gw-node")
    connector = TransportConfiguration("c1", NETTY_CONNECTOR_FACTORY, (("host", "127.0.0.1"), ("port", "61617")))
    data = opening.redirect("r1", "127.0.0.1", 61617, connector=connector, target_node_id="core-2")
    disconnect = j_packet(
        -19, 0,
        j_nullable_simple("gw-node") + b"\x00" + j_nullable_simple("core-2") + b"\xff"
        + j_connector("c1", [("host", "127.0.0.1"), ("port", "61617")]),
    )
    text = (
        "AMQ229237: Connection router r1 redirected the connection to TransportConfiguration(name=c1, "
        "factory=org-apache-activemq-artemis-core-remoting-impl-netty-NettyConnectorFactory)"
        "?host=127-0-0-1&port=61617"
    )
    assert data == disconnect + j_exception(222, text, 1)
    first, second = packets(data)
    assert type(first) is p.DisconnectV3 and first.target_connector.get("port") == "61617"
    assert first.reason == p.DisconnectReason.REDIRECT and second.code == ExceptionType.ROUTING_EXCEPTION
    assert opening.state is OpeningState.ANSWERED


def test_redirect_asks_for_the_targets_connector_else_makes_one_of_host_and_port():
    asked = []
    target = RedirectTarget(netty_connector("10.1.1.1", 5672, "core2", (("sslEnabled", "true"),)), "node-2")

    def redirect_target(host, port):
        asked.append((host, port))
        return target if host == "10.1.1.1" else None

    first, _ = packets(completed(redirect_target=redirect_target).redirect("r", "10.1.1.1", 5672))
    assert (first.target_node_id, first.target_connector) == ("node-2", target.connector)
    first, second = packets(completed(redirect_target=redirect_target).redirect("r", "10.9.9.9", 1))
    assert first.target_node_id is None
    assert first.target_connector == TransportConfiguration(
        "10.9.9.9:1", NETTY_CONNECTOR_FACTORY, (("host", "10.9.9.9"), ("port", "1"))
    )
    assert asked == [("10.1.1.1", 5672), ("10.9.9.9", 1)]
    assert "(name=10.9.9.9:1, factory=" in second.message and "?host=10-9-9-9&port=1" in second.message


@pytest.mark.parametrize(
    ("subscribe", "form"),
    [(None, p.Disconnect), (p.SubscribeTopologyV2(False, 125), p.DisconnectV2), (p.SubscribeTopologyV2(False, 131), p.DisconnectV3)],
)
def test_the_disconnect_form_follows_the_version(subscribe, form):
    opening, _ = make()
    if subscribe is not None:
        opening.receive_data(HANDSHAKE + encode_packet(subscribe))
        opening.data_to_send()
    first, second = packets(opening.redirect("r", "h", 1))
    assert type(first) is form and first.node_id == TRACE_NODE
    assert second.channel_id == 0  # before any CREATESESSION: the connection's channel


def test_redirect_checks_its_arguments():
    with pytest.raises(TypeError):
        completed().redirect("r", 1, 1)
    with pytest.raises(ValueError):
        completed().redirect("r", "h", 70000)
    assert CoreOpening.redirects


@pytest.mark.parametrize(
    ("condition", "code"),
    [(None, 0), ("ROUTING_EXCEPTION", 222), (ExceptionType.SECURITY_EXCEPTION, 105), (119, 119),
     ("amqp:connection:forced", 0), (12345, 0)],
)
def test_close_with_writes_the_description_with_the_code_named(condition, code):
    text = "Connection router r1 could not connect to target t (h:1): refused"
    assert completed().close_with(condition, text, {"ignored": 1}) == j_exception(code, text, 1)
    assert packets(completed().close_with(None))[0].message == "connection refused"


def test_timed_out_and_too_large_before_the_createsession():
    opening, _ = make()
    assert opening.receive_data(HANDSHAKE + PING[:5]) == []
    assert opening.timed_out(10) == j_exception(3, "no CREATESESSION within 10 s", 0)
    assert opening.state is OpeningState.ANSWERED and opening.buffered == 0
    text = "more than 4096 bytes before the CREATESESSION was complete"
    assert make()[0].too_large(4096) == j_exception(0, text, 0)


def test_timed_out_after_the_createsession_says_nothing():
    opening = completed()
    assert opening.timed_out(0.5) == b"" and opening.state is OpeningState.COMPLETE


def test_an_answer_writes_what_was_queued_first():
    opening, _ = make()
    opening.receive_data(HANDSHAKE + SUBSCRIBE_V2)
    assert opening.timed_out(1) == TOPOLOGY_ANSWER + j_exception(3, "no CREATESESSION within 1 s", 0)


def test_no_answer_after_a_failure():
    opening, _ = make()
    one(opening.receive_data(encode_packet(p.SessStart(channel_id=10))), OpeningFailed)
    for answer in (lambda: opening.refuse("r", "REFUSED_UNAVAILABLE"), lambda: opening.close_with(None, "x"),
                   lambda: opening.too_large(1), lambda: opening.timed_out(1),
                   lambda: opening.redirect("r", "h", 1)):
        with pytest.raises(LocalProtocolError):
            answer()


def test_limits_are_checked():
    with pytest.raises(ValueError):
        CoreOpening(Authenticator(), max_bytes=0)
    with pytest.raises(TypeError):
        CoreOpening(Authenticator(), node_id=None)
    assert CoreOpening(Authenticator()).max_bytes == CoreLimits().max_packet_size + OPENING_SLACK
    small = CoreOpening(Authenticator(), limits=CoreLimits(max_packet_size=1000))
    assert small.max_bytes == 1000 + OPENING_SLACK and small.limits.max_packet_size == 1000


def test_connector_text_is_javas_with_passwords_masked():
    connector = TransportConfiguration(
        "tls.one", NETTY_CONNECTOR_FACTORY,
        (("host", "a.example"), ("sslEnabled", True), ("trustStorePassword", "x"), ("n", Scalar("int", 3)), ("l", 4)),
    )
    assert connector_text(connector) == (
        "TransportConfiguration(name=tls.one, factory=org-apache-activemq-artemis-core-remoting-impl-netty-"
        "NettyConnectorFactory)?host=a-example&sslEnabled=true&trustStorePassword=****&n=3&l=4"
    )
    assert connector_text(TransportConfiguration("x", "F")).endswith("factory=F)")


# -- the table, row by row ---------------------------------------------------------------------------------


def _await():
    return make()[0]


def _answered():
    opening = _await()
    opening.close_with(None, "bye")
    return opening


def _failed():
    opening = _await()
    opening.receive_data(encode_packet(p.SessStart(channel_id=10)))
    return opening


#: (state, input) -> (how to get there and apply it, the state it must end in)
SCENARIOS = {
    (OpeningState.AWAIT_SESSION, OpeningInput.PARTIAL): (lambda: _await().receive_data(b"ARTE"), OpeningState.AWAIT_SESSION),
    (OpeningState.AWAIT_SESSION, OpeningInput.KEPT): (lambda: _await().receive_data(HANDSHAKE + PING), OpeningState.AWAIT_SESSION),
    (OpeningState.AWAIT_SESSION, OpeningInput.ANSWERED_AT_ONCE): (
        lambda: _await().receive_data(SUBSCRIBE_V2), OpeningState.AWAIT_SESSION
    ),
    (OpeningState.AWAIT_SESSION, OpeningInput.SESSION): (lambda: _await().receive_data(session()), OpeningState.COMPLETE),
    (OpeningState.AWAIT_SESSION, OpeningInput.LOGIN_REFUSED): (
        lambda: _await().receive_data(session(password="x")), OpeningState.FAILED
    ),
    (OpeningState.AWAIT_SESSION, OpeningInput.VERSION_REFUSED): (
        lambda: _await().receive_data(session(version=99)), OpeningState.FAILED
    ),
    (OpeningState.AWAIT_SESSION, OpeningInput.BAD_INPUT): (
        lambda: _await().receive_data(encode_packet(p.SessStop(channel_id=10))), OpeningState.FAILED
    ),
    (OpeningState.AWAIT_SESSION, OpeningInput.ANSWER): (lambda: _await().timed_out(3), OpeningState.ANSWERED),
    (OpeningState.COMPLETE, OpeningInput.DATA): (lambda: completed().receive_data(b"x"), OpeningState.COMPLETE),
    (OpeningState.COMPLETE, OpeningInput.ANSWER): (
        lambda: completed().refuse("r", "REFUSED_UNAVAILABLE"), OpeningState.ANSWERED
    ),
    (OpeningState.ANSWERED, OpeningInput.DATA): (lambda: _answered().receive_data(STREAM), OpeningState.ANSWERED),
    (OpeningState.FAILED, OpeningInput.DATA): (lambda: _failed().receive_data(STREAM), OpeningState.FAILED),
}

#: how to bring a fresh opening into each state
_IN_STATE = {
    OpeningState.AWAIT_SESSION: _await,
    OpeningState.COMPLETE: completed,
    OpeningState.ANSWERED: _answered,
    OpeningState.FAILED: _failed,
}


def test_scenarios_cover_the_table():
    assert set(SCENARIOS) == set(TRANSITIONS)
    assert {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values()) == set(OpeningState)
    for terminal in (OpeningState.ANSWERED, OpeningState.FAILED):
        assert {i for s, i in TRANSITIONS if s is terminal} == {OpeningInput.DATA}
    assert {kind for _channel, kind in PACKET_INPUTS.values()} == {
        OpeningInput.KEPT, OpeningInput.ANSWERED_AT_ONCE, OpeningInput.SESSION
    }


@pytest.mark.parametrize("row", list(SCENARIOS), ids=lambda r: f"{r[0].name}-{r[1].name}")
def test_each_row(row, monkeypatch):
    run, want = SCENARIOS[row]
    seen = []
    real = CoreOpening._transition

    def spy(self, kind):
        seen.append((self.state, kind))
        real(self, kind)

    monkeypatch.setattr(CoreOpening, "_transition", spy)
    run()
    assert seen and seen[-1] == row
    assert TRANSITIONS[row] is want


@pytest.mark.parametrize(
    "pair",
    [(s, i) for s in OpeningState for i in OpeningInput if (s, i) not in TRANSITIONS],
    ids=lambda pair: f"{pair[0].name}-{pair[1].name}",
)
def test_every_pair_outside_the_table_is_a_misuse(pair):
    state, kind = pair
    opening = _IN_STATE[state]()
    assert opening.state is state
    with pytest.raises(LocalProtocolError, match=f"from {state.name} on {kind.name}"):
        opening._transition(kind)
    assert opening.state is state


# -- the common interface ----------------------------------------------------------------------------------


def test_the_core_reader_has_the_common_interface():
    opening = _await()
    assert isinstance(opening, Opening) and opening.redirects
    assert issubclass(OpeningComplete, Complete) and issubclass(OpeningFailed, Failed)
    done = OpeningComplete("c", "u", "p", 136, b"replay")
    assert (done.client_id, done.principal, done.user, done.replay) == ("c", "p", "u", b"replay")
    failed = OpeningFailed("why", ExceptionType.ILLEGAL_STATE)
    assert (failed.condition, failed.login_refused, failed.user, failed.client_id) == ("ILLEGAL_STATE", False, None, None)


# -- any cut, any bytes ------------------------------------------------------------------------------------


def cut(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({c % (len(data) + 1) for c in points} | {0, len(data)})
    return [data[a:b] for a, b in zip(marks, marks[1:], strict=False)]


FULL = (
    HANDSHAKE + PING + PING + SUBSCRIBE_V2 + encode_packet(p.CheckFailover(None))
    + session() + encode_packet(p.SessStart(channel_id=10))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_chunking_never_changes_the_outcome(points):
    whole_events, whole_out, _, _ = feed([FULL])
    events, out, _, _ = feed(cut(FULL, points))
    done, rest = events[0], b"".join(e.data for e in events[1:])
    assert isinstance(done, OpeningComplete) and all(isinstance(e, Passthrough) for e in events[1:])
    assert done.replay + rest == whole_events[0].replay
    assert (done.client_id, done.username, done.version) == ("app-1", "alice", 136)
    assert out == whole_out


@st.composite
def hostile(draw):
    """A good stream with bytes flipped, dropped or inserted, or plain noise."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray(FULL)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        pos = draw(st.integers(min_value=0, max_value=len(data)))
        op = draw(st.sampled_from(["flip", "drop", "insert"]))
        if op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(min_value=0, max_value=255))
        elif op == "drop":
            del data[pos:pos + draw(st.integers(min_value=1, max_value=8))]
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


SMALL = CoreLimits(max_packet_size=150)


def shape(data: bytes) -> list:
    """What was written, an EXCEPTION's message left out."""
    return [(type(x), x.code, x.channel_id) if type(x) is p.ExceptionMessage else x for x in packets(data)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_hostile_bytes_only_ever_give_failed_or_complete(data, points):
    events, out, opening, _auth = feed(cut(data, points), limits=SMALL, max_bytes=300)
    kinds = [type(e) for e in events]
    assert kinds in ([], [OpeningFailed]) or (kinds[0] is OpeningComplete and set(kinds[1:]) <= {Passthrough})
    if opening.state is OpeningState.AWAIT_SESSION:
        assert opening.buffered <= 300
    written = packets(out)  # always well-formed
    if kinds == [OpeningFailed]:
        assert type(written[-1]) is p.ExceptionMessage and written[-1].message == events[0].reason
    whole_events, whole_out, whole_opening, _ = feed([data], limits=SMALL, max_bytes=300)
    assert whole_opening.state is opening.state
    assert [type(e) for e in whole_events][:1] == kinds[:1]
    # the same answers; an error's text may name an offset that depends on the cut (the codec's)
    assert shape(whole_out) == shape(out)
    if kinds[:1] == [OpeningFailed]:
        assert whole_events[0].exception_type is events[0].exception_type
        assert whole_events[0].login_refused == events[0].login_refused


def test_the_replay_reads_back_as_the_clients_packets_in_order():
    done = one(feed([FULL])[0], OpeningComplete)
    read = CoreCodec(server=True).receive_data(done.replay)
    assert [type(x) for x in read] == [Handshake, p.Ping, p.Ping, p.CreateSessionV2, p.SessStart]
    assert decode_packet(CREATESESSION_V2).username == "guest"
