"""The cluster topology a clustered node tells its CORE clients (junction.protocols.core.topology).

The expected values are written from Artemis's sources, not from the module:
``CoreProtocolManager.LocalChannelHandler`` (a member up: V4 from 131, V3 from
125, V2 from 122, V1 before; a departure: CLUSTER_TOPOLOGY_V2 with ``exit``
from 122, the V1 exit before), ``Topology.sendTopology`` (a subscriber gets
every member, ``last`` on the final one), ``Topology.sendMemberUp`` (later
ups say ``last=false``), ``ClusterTopologyChangeMessage_V2.encodeRest`` (the
bytes of a departure) and the client's ``Topology.updateMember``/``removeMember``
(event ids of a node must grow for the client to take a change).
"""

from __future__ import annotations

import struct

import pytest

from junction.protocols.core import decode_packet, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.connection import CoreConnection
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.topology import (
    MAX_TOPOLOGY_MEMBERS,
    MemberDown,
    Membership,
    MemberUp,
    TopologyMember,
    announced_connector,
    announcement,
    change_packets,
    member_down,
    member_up,
)
from junction.protocols.core.values import TransportConfiguration

NETTY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
A, B, C = "node-a", "node-b", "node-c"
CONN_A = TransportConfiguration("cluster", NETTY, (("host", "127.0.0.1"), ("port", "61616")))
CONN_B = TransportConfiguration("node-b", NETTY, (("host", "127.0.0.1"), ("port", "61617")))


def member(node_id, connector=CONN_A, **kw):
    return TopologyMember(node_id, connector, **kw)


# -- the forms by version -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "packet_type"),
    [
        (136, PacketType.CLUSTER_TOPOLOGY_V4),
        (131, PacketType.CLUSTER_TOPOLOGY_V4),
        (130, PacketType.CLUSTER_TOPOLOGY_V3),
        (129, PacketType.CLUSTER_TOPOLOGY_V3),
        (125, PacketType.CLUSTER_TOPOLOGY_V3),
        (124, PacketType.CLUSTER_TOPOLOGY_V2),
        (122, PacketType.CLUSTER_TOPOLOGY_V2),
        (121, PacketType.CLUSTER_TOPOLOGY),
        (None, PacketType.CLUSTER_TOPOLOGY),
    ],
)
def test_member_up_takes_the_newest_form_the_version_reads(version, packet_type):
    m = member(B, CONN_B, unique_event_id=1234, scale_down_group_name="g")
    packet = member_up(version, m, last=True)
    assert packet.TYPE == packet_type
    assert (packet.exit, packet.node_id, packet.primary, packet.backup, packet.last) == (False, B, CONN_B, None, True)
    if packet_type != PacketType.CLUSTER_TOPOLOGY:
        assert packet.unique_event_id == 1234
    if packet_type in (PacketType.CLUSTER_TOPOLOGY_V3, PacketType.CLUSTER_TOPOLOGY_V4):
        assert packet.scale_down_group_name == "g"
    if packet_type == PacketType.CLUSTER_TOPOLOGY_V4:
        assert packet.server_version == 136  # the client adopts it
    # and it goes through the codec unchanged
    again = decode_packet(encode_packet(packet))
    assert again == packet


@pytest.mark.parametrize("version", [136, 131, 130, 129, 122])
def test_a_departure_is_the_v2_exit_even_for_v4_readers(version):
    packet = member_down(version, "n1", 5)
    # ClusterTopologyChangeMessage_V2(uniqueEventID, nodeID): exit, nodeID, id, null backup group
    body = b"\xff" + struct.pack(">i", 2) + "n1".encode("utf-16-be") + struct.pack(">q", 5) + b"\x00"
    header = struct.pack(">ibq", 1 + 8 + len(body), PacketType.CLUSTER_TOPOLOGY_V2, 0)
    assert encode_packet(packet) == header + body


def test_a_departure_to_a_client_before_122_is_the_v1_exit():
    packet = member_down(121, "n1", 5)
    assert packet.TYPE == PacketType.CLUSTER_TOPOLOGY and packet.exit and packet.node_id == "n1"


def test_a_subscriber_gets_every_member_and_last_on_the_final_one():
    members = [member(A), member(B, CONN_B), member(C)]
    packets = announcement(136, members)
    assert [x.node_id for x in packets] == [A, B, C]
    assert [x.last for x in packets] == [False, False, True]
    assert [x.primary for x in packets] == [CONN_A, CONN_B, CONN_A]
    assert announcement(136, [member(A)])[0].last is True


def test_changes_are_ups_without_last_and_exits():
    up = MemberUp(member(B, CONN_B, unique_event_id=10))
    packets = change_packets(136, [MemberDown(C, 9), up])
    assert [(x.TYPE, x.exit, x.node_id) for x in packets] == [
        (PacketType.CLUSTER_TOPOLOGY_V2, True, C),
        (PacketType.CLUSTER_TOPOLOGY_V4, False, B),
    ]
    assert packets[0].unique_event_id == 9 and packets[1].unique_event_id == 10
    assert packets[1].last is False  # Topology.sendMemberUp: nodeUP(member, false)


def test_announced_connector_is_artemis_netty_connector_without_passwords():
    connector = announced_connector(
        "node-b", "10.0.0.2", 61617, {"sslEnabled": "true", "trustStorePassword": "secret", "port": "1"}
    )
    assert connector == TransportConfiguration(
        "node-b", NETTY, (("host", "10.0.0.2"), ("port", "61617"), ("sslEnabled", "true"))
    )


# -- the members and their event ids ------------------------------------------------------------------


def test_joins_leaves_and_returns_each_with_a_growing_event_id():
    ms = Membership()
    first = ms.update([member(A), member(B, CONN_B)], now_ms=1000)
    assert first == (MemberUp(member(A, unique_event_id=1000)), MemberUp(member(B, CONN_B, unique_event_id=1000)))
    assert ms.update([member(A), member(B, CONN_B)], now_ms=1500) == ()  # nothing changed
    # B leaves: its exit is newer than its up (the client's removeMember ignores older ones)
    assert ms.update([member(A)], now_ms=1000) == (MemberDown(B, 1001),)
    assert list(ms.members) == [A]
    # B comes back with the clock stepped back: still newer than its exit (updateMember)
    assert ms.update([member(A), member(B, CONN_B)], now_ms=900) == (MemberUp(member(B, CONN_B, unique_event_id=1002)),)
    # later, by the clock
    assert ms.update([member(A)], now_ms=5000) == (MemberDown(B, 5000),)


def test_a_changed_connector_is_announced_again():
    ms = Membership()
    ms.update([member(A), member(B, CONN_A)], now_ms=1)
    changes = ms.update([member(A), member(B, CONN_B)], now_ms=2)
    assert changes == (MemberUp(member(B, CONN_B, unique_event_id=2)),)
    assert ms.members[B].primary == CONN_B


def test_the_member_list_is_bounded():
    assert MAX_TOPOLOGY_MEMBERS == 1000
    ms = Membership(limit=3)
    changes = ms.update([member(f"n{i}") for i in range(5)], now_ms=1)
    assert [c.member.node_id for c in changes] == ["n0", "n1", "n2"]
    assert ms.left_out == 2 and len(ms.members) == 3
    # when one leaves, the next one of the view takes its place
    changes = ms.update([member(f"n{i}") for i in (0, 2, 3, 4)], now_ms=2)
    assert changes == (MemberDown("n1", 2), MemberUp(member("n3", unique_event_id=2)))
    assert ms.left_out == 1
    # the ids of departed nodes are bounded too
    for round_ in range(10):
        ms.update([member(f"x{round_}-{i}") for i in range(3)], now_ms=10 + round_)
    assert len(ms._last_ids) <= 2 * 3
    with pytest.raises(ValueError):
        Membership(limit=0)


# -- the connection: only a subscriber is told --------------------------------------------------------


def test_only_a_subscribed_open_connection_is_told_changes():
    changes = (MemberDown(B, 7),)
    forwarded = CoreConnection(A)  # as through the gateway: the subscription was answered there
    forwarded.receive(p.CreateSessionV2("s", 10, 136, None, None, 102400, False, True, True, -1, False, None, None))
    assert forwarded.topology_changes(changes) == []

    subscriber = CoreConnection(A)
    subscriber.receive(p.SubscribeTopologyV2(False, 136))
    assert subscriber.subscribed
    assert [x.TYPE for x in subscriber.cluster_topology([member(A), member(B, CONN_B)])] == [
        PacketType.CLUSTER_TOPOLOGY_V4, PacketType.CLUSTER_TOPOLOGY_V4,
    ]  # fmt: skip
    assert subscriber.topology_changes(changes) == [member_down(136, B, 7)]
    subscriber.close()
    assert subscriber.topology_changes(changes) == []

    old = CoreConnection(A)  # an old client's subscription names no version: the oldest forms
    old.receive(p.SubscribeTopology(False))
    assert old.subscribed and old.topology_changes(changes)[0].TYPE == PacketType.CLUSTER_TOPOLOGY
