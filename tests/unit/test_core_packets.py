"""CORE packets (junction/protocols/core/packets/): every packet round-trips, and refuses what it must.

One sample of every packet the codec reads (its newest form with every field
set, and its older forms where a version appended fields), encoded and
decoded back; every cut of every body either is refused or reads as the older
form; a byte too many and an unknown type are refused with the code the
connection answers with.
"""

from __future__ import annotations

import dataclasses

import pytest

from junction.protocols.core import (
    ExceptionType,
    MalformedPacket,
    MessageHeaders,
    PacketType,
    Scalar,
    TransportConfiguration,
    UnknownPacket,
    decode_packet,
    encode_packet,
)
from junction.protocols.core import packets as p
from junction.protocols.core.packets import PACKETS
from junction.protocols.errors import LocalProtocolError

CONNECTOR = TransportConfiguration(
    "artemis", "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory",
    (("host", "10.0.0.2"), ("port", "61617")),
)
HEADERS = MessageHeaders(
    message_id=77, address="orders", user_id=bytes(range(16)), type=3, durable=True,
    expiration=1_700_000_060_000, timestamp=1_700_000_000_000, priority=7,
    properties=(("_AMQ_DUPL_ID", b"dup-1"), ("count", Scalar("int", 3)), ("flag", True)),
)
QUEUE_ATTRIBUTES = dict(
    exclusive=True, last_value=False, last_value_key="lvq", non_destructive=False,
    consumers_before_dispatch=2, delay_before_dispatch=1000, group_rebalance=True, group_buckets=8,
    auto_delete=True, auto_delete_delay=5000, auto_delete_message_count=0, group_first_key="first",
    ring_size=100, enabled=True, group_rebalance_pause_dispatch=False,
)
XID = p.Xid(0x1BB0, b"branch-1", b"global-transaction-1")
S = 11  # a session channel

SAMPLES = [
    p.Ping(60000),
    p.Disconnect("node-a"),
    p.Disconnect(None),
    p.DisconnectV2("node-a", "node-b"),
    p.DisconnectV3("node-a", p.DisconnectReason.REDIRECT, "node-b", CONNECTOR),
    p.DisconnectV3(None, p.DisconnectReason.SHUT_DOWN, None, None),
    p.DisconnectConsumer(4, channel_id=S),
    p.DisconnectConsumerKill("node-a"),
    p.ExceptionMessage(108, "AMQ229...: incompatible", channel_id=1),
    p.ExceptionMessage(101, None, -3, channel_id=S),
    p.NullResponse(channel_id=S),
    p.NullResponse(-2, channel_id=S),
    p.PacketsConfirmed(1234, channel_id=S),
    p.CreateSession("s-1", 10, 129, "u", "p\u00e9", 102400, True, False, False, 1024, True, "dflt"),
    p.CreateSessionV2("s-2", 12, 136, None, None, 100, False, True, True, -1, False, None, "client-1"),
    p.CreateSessionResponse(136),
    p.ReattachSession("s-1", 99),
    p.ReattachSessionResponse(-1, False),
    p.CheckFailover("node-a"),
    p.CheckFailoverReply(True),
    p.SubscribeTopology(True),
    p.SubscribeTopologyV2(False, 136),
    p.ClusterTopology(False, "node-a", CONNECTOR, None, True),
    p.ClusterTopology(True, "node-a"),
    p.ClusterTopologyV2(False, "node-a", CONNECTOR, CONNECTOR, False, 5, "group"),
    p.ClusterTopologyV2(True, "node-a", unique_event_id=6),
    p.ClusterTopologyV3(False, "node-a", None, CONNECTOR, True, 7, None, "sd-group"),
    p.ClusterTopologyV4(False, "node-a", CONNECTOR, None, True, 8, "g", "sd", 135),
    p.SessCreateConsumer(3, "q", "color = 'red'", True, True, 5, channel_id=S),
    p.SessCreateConsumer(3, "q", None, False, False, channel_id=S),
    p.SessAcknowledge(3, 99, True, channel_id=S),
    p.SessIndividualAcknowledge(3, 98, False, channel_id=S),
    p.SessExpired(3, 97, channel_id=S),
    p.SessCommit(channel_id=S),
    p.SessCommit(-7, channel_id=S),
    p.SessRollback(True, channel_id=S),
    p.SessStart(channel_id=S),
    p.SessStop(channel_id=S),
    p.SessClose(channel_id=S),
    p.SessFlowToken(3, -1, channel_id=S),
    p.SessConsumerClose(3, channel_id=S),
    p.SessForceConsumerDelivery(3, 12, channel_id=S),
    p.SessProducerRequestCredits(65536, "orders", channel_id=S),
    p.SessProducerCredits(65536, "orders", channel_id=S),
    p.SessProducerFailCredits(65536, "orders", channel_id=S),
    p.CreateProducer(2, "orders", channel_id=S),
    p.CreateProducer(2, None, channel_id=S),
    p.RemoveProducer(2, channel_id=S),
    p.SessAddMetadata("jms-session", "", channel_id=S),
    p.SessAddMetadata2("key", "value", True, channel_id=S),
    p.SessUniqueAddMetadata("jms-client-id", "client-1", False, channel_id=S),
    p.CreateQueue("a", "q", "x > 1", True, False, True, channel_id=S),
    p.CreateQueueV2("a", "q", None, True, True, False, True, p.RoutingType.MULTICAST, 10, True,
                    **QUEUE_ATTRIBUTES, channel_id=S),
    p.CreateQueueV2("a", "q", None, True, True, False, True, p.RoutingType.NONE, -1, False, channel_id=S),
    p.CreateSharedQueue("a", "q", None, True, True, channel_id=S),
    p.CreateSharedQueueV2("a", "q", "f", True, p.RoutingType.ANYCAST, True, 5, True,
                          **{k: v for k, v in QUEUE_ATTRIBUTES.items() if k != "exclusive"},
                          exclusive=None, channel_id=S),
    p.CreateSharedQueueV2("a", "q", None, False, p.RoutingType.MULTICAST, False, channel_id=S),
    p.CreateAddress("a", (0, 1), True, False, channel_id=S),
    p.CreateAddress("a", (), False, True, channel_id=S),
    p.DeleteQueue("q", channel_id=S),
    p.SessQueueQuery("q", channel_id=S),
    p.SessQueueQueryResponse(True, True, False, 2, 10, None, "a", "q", channel_id=S),
    p.SessQueueQueryResponseV2(False, False, False, 0, 0, None, None, None, True, channel_id=S),
    p.SessQueueQueryResponseV3(True, True, False, 2, 10, "f", "a", "q", True, False, True, 1, -1,
                               **QUEUE_ATTRIBUTES, default_consumer_window_size=1048576,
                               configuration_managed=True, channel_id=S),
    p.SessQueueQueryResponseV3(True, True, False, 2, 10, "f", "a", "q", True, False, True, 1, -1,
                               channel_id=S),
    p.SessBindingQuery("a", channel_id=S),
    p.SessBindingQueryResponse(True, ("q1", "q2"), channel_id=S),
    p.SessBindingQueryResponseV2(False, (), True, channel_id=S),
    p.SessBindingQueryResponseV3(True, ("q",), True, False, channel_id=S),
    p.SessBindingQueryResponseV4(True, ("q",), True, True, False, -1, True, False, "k", True, 0, -1,
                                 channel_id=S),
    p.SessBindingQueryResponseV5(True, ("q",), True, True, False, -1, None, None, None, None, None,
                                 None, True, False, channel_id=S),
    p.SessBindingQueryResponseV5(True, ("q",), True, True, False, -1, channel_id=S),
    p.SessSend(b"body", HEADERS, True, -5, 2, channel_id=S),
    p.SessSend(b"", MessageHeaders(), False, 0, channel_id=S),
    p.SessSend(b"\x00" * 300, HEADERS, True, channel_id=S),
    p.SessReceiveMsg(b"body", HEADERS, 3, 2, channel_id=S),
    p.SessSendLarge(HEADERS, channel_id=S),
    p.SessSendContinuation(b"chunk", True, None, False, -9, 2, channel_id=S),
    p.SessSendContinuation(b"last", False, 204800, True, -10, channel_id=S),
    p.SessSendContinuation(b"", False, 0, True, channel_id=S),
    p.SessReceiveLargeMsg(3, 1, 204800, HEADERS, channel_id=S),
    p.SessReceiveContinuation(b"chunk", False, 3, channel_id=S),
    p.SessXAStart(XID, channel_id=S),
    p.SessXAEnd(XID, True, channel_id=S),
    p.SessXACommit(XID, False, channel_id=S),
    p.SessXAPrepare(XID, channel_id=S),
    p.SessXARollback(XID, channel_id=S),
    p.SessXAJoin(XID, channel_id=S),
    p.SessXASuspend(channel_id=S),
    p.SessXAResume(XID, channel_id=S),
    p.SessXAForget(XID, channel_id=S),
    p.SessXAAfterFailed(p.Xid(0, b"", b""), channel_id=S),
    p.SessXAResponse(False, 0, None, -4, channel_id=S),
    p.SessXAResponse(True, -7, "XAER_NOTA", channel_id=S),
    p.SessXAGetInDoubtXids(channel_id=S),
    p.SessXAGetInDoubtXidsResponse((XID, p.Xid(1, b"b", b"g")), channel_id=S),
    p.SessXAGetInDoubtXidsResponse((), channel_id=S),
    p.SessXASetTimeout(300, channel_id=S),
    p.SessXASetTimeoutResponse(True, channel_id=S),
    p.SessXAGetTimeout(channel_id=S),
    p.SessXAGetTimeoutResponse(300, channel_id=S),
]


def _id(packet):
    return f"{type(packet).__name__}-{SAMPLES.index(packet)}"


def test_every_packet_class_has_samples():
    assert {type(s) for s in SAMPLES} == set(PACKETS.values())


def test_registry_is_consistent_with_the_type_table():
    for number, cls in PACKETS.items():
        assert cls.TYPE == number and PacketType(number).name
        assert cls.SENDER in ("client", "server", "both")


@pytest.mark.parametrize("packet", SAMPLES, ids=_id)
def test_every_packet_round_trips(packet):
    data = encode_packet(packet)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    assert data[4] == packet.TYPE & 0xFF
    assert int.from_bytes(data[5:13], "big", signed=True) == packet.channel_id
    back = decode_packet(data)
    assert back == packet and type(back) is type(packet)
    assert encode_packet(back) == data


def _reframe(data: bytes, body_end: int) -> bytes:
    cut = data[:body_end]
    return (len(cut) - 4).to_bytes(4, "big") + cut[4:]


@pytest.mark.parametrize("packet", SAMPLES, ids=_id)
def test_a_cut_body_is_refused_or_reads_as_an_older_form(packet):
    data = encode_packet(packet)
    for end in range(13, len(data)):
        try:
            back = decode_packet(_reframe(data, end))
        except MalformedPacket as exc:
            assert exc.exception_type is ExceptionType.INTERNAL_ERROR
            assert exc.channel_id == packet.channel_id
            continue
        # Only the optional tail of a newer version may be missing: those fields read as None.
        assert type(back) is type(packet)
        for f in dataclasses.fields(packet):
            mine, theirs = getattr(packet, f.name), getattr(back, f.name)
            assert theirs == mine or theirs is None, (f.name, end, back)


@pytest.mark.parametrize("packet", SAMPLES, ids=_id)
def test_a_byte_too_many_is_refused(packet):
    data = encode_packet(packet) + b"\x00"
    data = (len(data) - 4).to_bytes(4, "big") + data[4:]
    with pytest.raises(MalformedPacket) as info:
        decode_packet(data)
    assert info.value.channel_id == packet.channel_id


@pytest.mark.parametrize("number", [PacketType.REPLICATION_APPEND, PacketType.CLUSTER_CONNECT,
                                    PacketType.NODE_ANNOUNCE, PacketType.QUORUM_VOTE, 0, 127, -23, -128])
def test_an_unknown_or_unsupported_type_is_unsupported_packet(number):
    data = (9).to_bytes(4, "big") + number.to_bytes(1, "big", signed=True) + (12).to_bytes(8, "big")
    with pytest.raises(UnknownPacket) as info:
        decode_packet(data)
    assert info.value.exception_type is ExceptionType.UNSUPPORTED_PACKET
    assert info.value.code == "UNSUPPORTED_PACKET"
    assert info.value.channel_id == 12


def test_disconnect_v3_redirect_is_artemis_s_layout():
    # artemis-routing.md section 5: nullable SimpleString serverNodeID | byte reason |
    # nullable SimpleString targetNodeID | bool hasConnector | TransportConfiguration.
    tc = TransportConfiguration("t", "F", (("host", "h"), ("port", "61617")))
    body = (
        "01 00000002 6100"                                  # node "a"
        "00"                                                # REDIRECT
        "01 00000002 6200"                                  # target node "b"
        "ff"                                                # has connector
        "00000001 0074 00000001 0046 00000002"              # name "t", factory "F", 2 params
        "00000004 0068006f00730074 03 00000001 0068"        # host = "h" (String)
        "00000004 0070006f00720074 03 00000005 00360031003600310037"  # port = "61617"
    ).replace(" ", "")
    data = bytes.fromhex(f"{len(body) // 2 + 9:08x}" "ed" "0000000000000000" + body)
    packet = p.DisconnectV3("a", p.DisconnectReason.REDIRECT, "b", tc)
    assert encode_packet(packet) == data
    assert decode_packet(data) == packet


def test_send_trailer_forms_follow_the_client_version():
    # V1 (before 130): rr only; V2: + correlation id; V3 (134+): + sender id.
    sizes = {}
    for packet in (p.SessSend(b"x", HEADERS, True), p.SessSend(b"x", HEADERS, True, -1),
                   p.SessSend(b"x", HEADERS, True, -1, 4)):
        sizes[(packet.correlation_id, packet.sender_id)] = len(encode_packet(packet))
        assert decode_packet(encode_packet(packet)) == packet
    assert sorted(sizes.values()) == [sizes[(None, None)], sizes[(None, None)] + 8, sizes[(None, None)] + 12]


@pytest.mark.parametrize("extra", [1, 2, 5, 11, 13])
def test_send_with_a_trailer_of_no_version_is_refused(extra):
    data = bytearray(encode_packet(p.SessSend(b"x", HEADERS, True)))
    data += b"\x00" * extra  # 1 + extra trailer bytes: 2, 3, 6, 12, 14 are no version's
    data[:4] = (len(data) - 4).to_bytes(4, "big")
    with pytest.raises(MalformedPacket):
        decode_packet(bytes(data))


def test_xid_is_artemis_s_layout():
    # XidCodecSupport: int32 formatId, int32 size + branch qualifier, int32 size + global id.
    data = encode_packet(p.SessXAPrepare(p.Xid(7, b"bq", b"gtx"), channel_id=10))
    assert data[13:].hex() == "00000007" "00000002" "6271" "00000003" "677478"


def test_exception_code_names_the_artemis_type():
    assert p.ExceptionMessage(108, "x").exception_type is ExceptionType.INCOMPATIBLE_CLIENT_SERVER_VERSIONS
    assert p.ExceptionMessage(4242, "x").exception_type is None


def test_session_creation_packets_default_to_channel_one():
    assert p.CreateSessionResponse(136).channel_id == 1
    assert encode_packet(p.CreateSessionResponse(136)).hex() == "0000000d1f000000000000000100000088"
    assert p.Ping(1).channel_id == 0


def test_sending_a_value_out_of_range_is_our_error():
    for packet in (p.Ping(2**63), p.SessFlowToken(1, 2**31), p.SessRollback(None),
                   p.SessSend(b"", MessageHeaders(priority=300), False)):
        with pytest.raises(LocalProtocolError):
            encode_packet(packet)
