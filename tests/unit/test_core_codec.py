"""The CORE codec's framing (junction/protocols/core/codec.py).

The stream read the same however it is cut into reads; the optional
ARTEMIS handshake; the packet-size limit judged on the length prefix alone;
errors carrying the packets before them and killing the codec; only
CoreProtocolError escaping whatever the bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.core import (
    HANDSHAKE,
    CoreCodec,
    CoreLimits,
    CoreProtocolError,
    ExceptionType,
    Handshake,
    MalformedPacket,
    PacketTooLarge,
    UnknownPacket,
    encode_packet,
)
from junction.protocols.core import packets as p
from tests.unit.test_core_packets import SAMPLES

STREAM = b"".join(encode_packet(s) for s in SAMPLES)


def feed(codec: CoreCodec, chunks) -> list:
    events = []
    for chunk in chunks:
        events += codec.receive_data(chunk)
    return events


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


@pytest.mark.parametrize("server", [True, False])
def test_every_packet_in_one_stream_whole_and_one_byte_at_a_time(server):
    prefix = HANDSHAKE if server else b""
    expected = ([Handshake()] if server else []) + SAMPLES
    assert feed(CoreCodec(server=server), [prefix + STREAM]) == expected
    codec = CoreCodec(server=server)
    assert feed(codec, bytewise(prefix + STREAM)) == expected
    assert codec.buffered == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 400), max_size=60))
def test_any_cut_of_the_stream_gives_the_same_packets(sizes):
    data = HANDSHAKE + STREAM
    chunks, pos = [], 0
    for size in sizes:
        chunks.append(data[pos:pos + size])
        pos += size
    chunks.append(data[pos:])
    assert feed(CoreCodec(), chunks) == [Handshake()] + SAMPLES


def test_handshake_is_optional_as_in_artemis():
    ping = encode_packet(p.Ping(30000))
    assert CoreCodec().receive_data(ping) == [p.Ping(30000)]
    codec = CoreCodec()
    assert codec.receive_data(b"ARTE") == [] and codec.buffered == 4
    assert codec.receive_data(b"MIS" + ping) == [Handshake(), p.Ping(30000)]


def test_bytes_that_only_start_like_the_handshake_are_a_packet_length():
    for chunks in ([b"ARTEMIX" + bytes(20)], bytewise(b"ARTEMIX" + bytes(20))):
        with pytest.raises(PacketTooLarge):
            feed(CoreCodec(), chunks)


def test_a_client_codec_reads_no_handshake():
    with pytest.raises(PacketTooLarge):
        CoreCodec(server=False).receive_data(HANDSHAKE + encode_packet(p.Ping(1)))


def test_oversized_packet_is_refused_from_its_length_prefix_alone():
    limits = CoreLimits(max_packet_size=100)
    # 9 header bytes + int32 size + 78 bytes + bool + long = 100
    at_limit = encode_packet(p.SessReceiveContinuation(b"x" * 78, True, 1, channel_id=10))
    assert len(at_limit) - 4 == 100
    assert CoreCodec(limits, server=False).receive_data(at_limit)[0].channel_id == 10
    over = (101).to_bytes(4, "big")
    codec = CoreCodec(limits, server=False)
    for byte in bytewise(over)[:3]:
        assert codec.receive_data(byte) == []
    with pytest.raises(PacketTooLarge) as info:
        codec.receive_data(over[3:])  # refused at the prefix's 4th byte, no body awaited
    assert info.value.exception_type is ExceptionType.INTERNAL_ERROR
    assert "max-packet-size 100" in str(info.value)


def test_bytes_held_never_exceed_the_limit():
    limits = CoreLimits(max_packet_size=64)
    codec = CoreCodec(limits, server=False)
    data = encode_packet(p.SessProducerCredits(1, "a" * 20, channel_id=10))
    for byte in bytewise(data * 3):
        codec.receive_data(byte)
        assert codec.buffered <= limits.max_packet_size + 4


def test_length_below_the_header_is_refused():
    with pytest.raises(MalformedPacket):
        CoreCodec(server=False).receive_data((8).to_bytes(4, "big") + bytes(8))


def test_an_error_carries_the_packets_before_it_and_kills_the_codec():
    good = encode_packet(p.Ping(1)) + encode_packet(p.SessStart(channel_id=10))
    bad = (9).to_bytes(4, "big") + bytes([91]) + (10).to_bytes(8, "big")  # REPLICATION_APPEND: not read
    codec = CoreCodec(server=False)
    with pytest.raises(UnknownPacket) as info:
        codec.receive_data(good + bad + encode_packet(p.Ping(2)))
    error = info.value
    assert error.events == [p.Ping(1), p.SessStart(channel_id=10)]
    assert error.channel_id == 10 and error.exception_type is ExceptionType.UNSUPPORTED_PACKET
    assert codec.error is error and codec.buffered == 0
    with pytest.raises(UnknownPacket) as again:
        codec.receive_data(encode_packet(p.Ping(3)))
    assert again.value is error and again.value.events == []
    # send still works, for the EXCEPTION the connection answers with
    answer = p.ExceptionMessage(error.exception_type, str(error), channel_id=error.channel_id)
    assert codec.send(answer) == encode_packet(answer)


def test_the_error_is_the_same_however_the_stream_is_cut():
    data = encode_packet(p.Ping(1)) + bytes.fromhex("0000000a" "0a" "0000000000000000" "00")  # PING 1 byte short
    results = []
    for chunks in ([data], bytewise(data)):
        codec = CoreCodec(server=False)
        events = []
        try:
            for chunk in chunks:
                events += codec.receive_data(chunk)
        except CoreProtocolError as exc:
            events += exc.events
            results.append((events, type(exc), exc.channel_id))
    assert results[0] == results[1] == ([p.Ping(1)], MalformedPacket, 0)


def test_limits_are_validated():
    for bad in (dict(max_packet_size=0), dict(max_packet_size=8), dict(max_channels=0),
                dict(max_packet_size="10")):
        with pytest.raises(ValueError):
            CoreLimits(**bad)
    assert CoreLimits().max_packet_size == 10 * 1024 * 1024 and CoreLimits().max_channels == 1000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_only_core_protocol_errors_escape(data, server):
    codec = CoreCodec(CoreLimits(max_packet_size=200), server=server)
    try:
        events = codec.receive_data(data)
    except CoreProtocolError:
        return
    for event in events:
        if not isinstance(event, Handshake):
            assert encode_packet(event)  # what was read can be written
    assert codec.buffered <= 204 + (len(HANDSHAKE) if server else 0)
