"""The CORE codec against the bytes of the real Artemis client and broker.

The traces were taken between the Artemis JMS client and an Artemis broker,
both of wire version 136, through a recording proxy: a create-queue, produce,
consume, close sequence (core.md section 3).  The bytes below are the
trace's, packet by packet, in order, as each side wrote them.  Each must
decode to the packet the trace's reading says, through a codec fed the whole
stream and one byte at a time, and encode back to exactly the same bytes.
"""

from __future__ import annotations

import dataclasses

import pytest

from junction.protocols.core import (
    CoreCodec,
    Handshake,
    MessageHeaders,
    decode_packet,
    encode_packet,
)
from junction.protocols.core import packets as p

# (direction, hex) in the order the proxy saw them; the first is the handshake.
TRACE = [
    ("C->S", "415254454d4953"),
    ("C->S", "000000110a0000000000000000000000000000ea60"),
    ("C->S", "000000110a0000000000000000000000000000ea60"),
    ("C->S", "0000000e7100000000000000000000000088"),
    ("S->C", "000000110a0000000000000000000000000000ea60"),
    ("S->C", "000000110a0000000000000000000000000000ea60"),
    ("S->C", (
        "00000045ef00000000000000000000000024002465386261313261622d653631622d313166312d386638302d"
        "303266633030303030303031000001a2011243e50000ff000000000088"
    )),
    ("C->S", (
        "0000006bee000000000000000100000024002465643030366638312d653631622d313166312d393437642d30"
        "3266633030303030303031000000000000000a00000088010000000500670075006500730074010000000500"
        "6700750065007300740001900000ffffffffffff000000"
    )),
    ("S->C", "0000000d1f000000000000000100000088"),
    ("C->S", (
        "00000047f4000000000000000a0000000e73006d006f006b0065002e0071000000000e73006d006f006b0065"
        "002e007100000000ff0001ffffffff00000000000000000000000000000000"
    )),
    ("S->C", "0000001115000000000000000affffffffffffffff"),
    ("C->S", "0000001f4f000000000000000a000080000000000e73006d006f006b0065002e007100"),
    ("S->C", "0000001f50000000000000000a000080000000000e73006d006f006b0065002e007100"),
    ("C->S", "00000020ec000000000000000a00000001010000000e73006d006f006b0065002e007100"),
    ("C->S", (
        "0000006b47000000000000000a0000001d0000000a000a68656c6c6f20636f72650000000000000000010000"
        "000e73006d006f006b0065002e0071000000000000000000000000000001a201124464040100000001000000"
        "026b000a00000002760000000000000000000000000001"
    )),
    ("C->S", (
        "0000002a28000000000000000a00000000000000000000000e73006d006f006b0065002e0071000000ff0000"
        "0000"
    )),
    ("S->C", (
        "0000008cf2000000000000000aff000000000001000000000000000100010000000e73006d006f006b006500"
        "2e007100010000000e73006d006f006b0065002e007100ff000001ffffffffff00ff00ff0010000000ff00ff"
        "00000000ffffffffffffffffffff00ffffffffffff00ff0000000000000000ff000000000000000000ffffff"
        "ffffffffffffffffff00ff00"
    )),
    ("C->S", "0000001546000000000000000a000000000000000000100000"),
    ("C->S", "0000000943000000000000000a"),
    ("S->C", (
        "0000006a4b000000000000000a0000001d0000000a000a68656c6c6f20636f72650000000000000006010000"
        "000e73006d006f006b0065002e0071000000000000000000000000000001a201124464040100000001000000"
        "026b000a000000027600000000000000000000000001"
    )),
    ("C->S", "0000001a29000000000000000a0000000000000000000000000000000600"),
    ("C->S", "000000114a000000000000000a0000000000000000"),
    ("S->C", "0000001115000000000000000affffffffffffffff"),
    ("C->S", "0000000deb000000000000000a00000001"),
    ("C->S", "0000000945000000000000000a"),
    ("S->C", "0000001115000000000000000affffffffffffffff"),
]

# The other trace differs in ids and times, and in that the queue already
# existed: the broker answered CREATE_QUEUE_V2 with this EXCEPTION.
QUEUE_EXISTS = (
    "0000004e14000000000000000a00000065010000003a003a414d513232393031393a20517565756520736d6f"
    "6b652e7120616c726561647920657869737473206f6e206164647265737320736d6f6b652e71"
)

NODE_ID = "e8ba12ab-e61b-11f1-8f80-02fc00000001"
SESSION_NAME = "ed006f81-e61b-11f1-947d-02fc00000001"
SENT_AT = 0x000001A201124464
HELLO_BODY = bytes.fromhex("0000000a000a") + b"hello core"  # a String written into the body
HEADERS = MessageHeaders(
    message_id=0,
    address="smoke.q",
    user_id=None,
    type=0,
    durable=False,
    expiration=0,
    timestamp=SENT_AT,
    priority=4,
    properties=(("k", "v"),),
)

# What each packet of TRACE is, as core.md section 3 reads the trace.
EXPECTED = [
    Handshake(),
    p.Ping(60000),
    p.Ping(60000),
    p.SubscribeTopologyV2(cluster_connection=False, client_version=136),
    p.Ping(60000),
    p.Ping(60000),
    p.ClusterTopologyV4(
        exit=False, node_id=NODE_ID, unique_event_id=0x000001A2011243E5, primary=None, backup=None,
        last=True, backup_group_name=None, scale_down_group_name=None, server_version=136,
    ),
    p.CreateSessionV2(
        name=SESSION_NAME, session_channel_id=10, version=136, username="guest", password="guest",
        min_large_message_size=102400, xa=False, auto_commit_sends=True, auto_commit_acks=True,
        confirmation_window_size=-1, pre_acknowledge=False, default_address=None, client_id=None,
    ),
    p.CreateSessionResponse(server_version=136),
    p.CreateQueueV2(
        address="smoke.q", queue_name="smoke.q", filter_string=None, durable=False, temporary=False,
        requires_response=True, auto_created=False, routing_type=p.RoutingType.ANYCAST,
        max_consumers=-1, purge_on_no_consumers=False, channel_id=10,
    ),
    p.NullResponse(correlation_id=-1, channel_id=10),
    p.SessProducerRequestCredits(credits=32768, address="smoke.q", channel_id=10),
    p.SessProducerCredits(credits=32768, address="smoke.q", channel_id=10),
    p.CreateProducer(producer_id=1, address="smoke.q", channel_id=10),
    p.SessSend(
        body=HELLO_BODY, headers=HEADERS, requires_response=False, correlation_id=0, sender_id=1,
        channel_id=10,
    ),
    p.SessCreateConsumer(
        consumer_id=0, queue_name="smoke.q", filter_string=None, browse_only=False,
        requires_response=True, priority=0, channel_id=10,
    ),
    p.SessQueueQueryResponseV3(
        exists=True, durable=False, temporary=False, consumer_count=1, message_count=1,
        filter_string=None, address="smoke.q", name="smoke.q", auto_create_queues=True,
        auto_created=False, purge_on_no_consumers=False, routing_type=p.RoutingType.ANYCAST,
        max_consumers=-1, exclusive=False, last_value=False, default_consumer_window_size=1048576,
        last_value_key=None, non_destructive=False, consumers_before_dispatch=0,
        delay_before_dispatch=-1, group_rebalance=False, group_buckets=-1, auto_delete=False,
        auto_delete_delay=0, auto_delete_message_count=0, group_first_key=None, ring_size=-1,
        enabled=True, group_rebalance_pause_dispatch=False, configuration_managed=False,
        channel_id=10,
    ),
    p.SessFlowToken(consumer_id=0, credits=1048576, channel_id=10),
    p.SessStart(channel_id=10),
    p.SessReceiveMsg(
        body=HELLO_BODY, headers=dataclasses.replace(HEADERS, message_id=6), consumer_id=0,
        delivery_count=1, channel_id=10,
    ),
    p.SessAcknowledge(consumer_id=0, message_id=6, requires_response=False, channel_id=10),
    p.SessConsumerClose(consumer_id=0, channel_id=10),
    p.NullResponse(correlation_id=-1, channel_id=10),
    p.RemoveProducer(producer_id=1, channel_id=10),
    p.SessClose(channel_id=10),
    p.NullResponse(correlation_id=-1, channel_id=10),
]


def _stream(direction: str) -> bytes:
    return b"".join(bytes.fromhex(h) for d, h in TRACE if d == direction)


def _expected(direction: str) -> list:
    return [e for (d, _), e in zip(TRACE, EXPECTED, strict=True) if d == direction]


def _feed(codec: CoreCodec, chunks) -> list:
    events = []
    for chunk in chunks:
        events += codec.receive_data(chunk)
    assert codec.buffered == 0
    return events


@pytest.mark.parametrize("direction, server", [("C->S", True), ("S->C", False)])
def test_trace_decodes_to_what_it_says_whole_and_bytewise(direction, server):
    stream = _stream(direction)
    expected = _expected(direction)
    assert _feed(CoreCodec(server=server), [stream]) == expected
    assert _feed(CoreCodec(server=server), [stream[i:i + 1] for i in range(len(stream))]) == expected


@pytest.mark.parametrize("index", range(1, len(TRACE)))
def test_each_trace_packet_encodes_to_the_same_bytes(index):
    raw = bytes.fromhex(TRACE[index][1])
    packet = EXPECTED[index]
    assert encode_packet(packet) == raw
    assert decode_packet(raw) == packet


def test_trace_handshake_is_the_seven_raw_bytes():
    assert bytes.fromhex(TRACE[0][1]) == CoreCodec().handshake() == b"ARTEMIS"


def test_queue_exists_exception_of_the_second_trace():
    raw = bytes.fromhex(QUEUE_EXISTS)
    packet = p.ExceptionMessage(
        code=101, message="AMQ229019: Queue smoke.q already exists on address smoke.q", channel_id=10,
    )
    assert decode_packet(raw) == packet
    assert decode_packet(raw).correlation_id is None  # plain EXCEPTION: no correlation tail
    assert encode_packet(packet) == raw
    assert CoreCodec(server=False).receive_data(raw) == [packet]
