"""The OpenWire codec: framing, negotiation, both encodings and the cache, against real client bytes.

The real frames (``openwire_frames.py``) were marshalled by the ActiveMQ
Classic 5.17.2 client library itself; each must decode and write back byte
for byte, in all four encodings.
"""

from __future__ import annotations

import struct

import pytest

from junction.protocols.errors import LocalProtocolError
from junction.protocols.openwire.codec import (
    DEFAULT_MAX_FRAME_SIZE,
    Negotiated,
    OpenWireCodec,
    OpenWireLimits,
    decode_frame,
    encode_frame,
)
from junction.protocols.openwire.command_types import CommandType
from junction.protocols.openwire.commands import (
    ConnectionInfo,
    ConsumerInfo,
    ExceptionResponse,
    KeepAliveInfo,
    RemoveInfo,
    SessionInfo,
    TransactionInfo,
)
from junction.protocols.openwire.encoding import (
    Decoder,
    decode_mutf8,
    encode_mutf8,
    marshal_boolean_stream,
)
from junction.protocols.openwire.errors import (
    FrameTooLarge,
    MalformedCommand,
    NegotiationFailed,
    UnknownType,
)
from junction.protocols.openwire.marshal import JavaThrowable, StackFrame, WireContext
from junction.protocols.openwire.messages import (
    ActiveMQMapMessage,
    ActiveMQTextMessage,
    MessageDispatch,
    message_properties,
    text_content,
    text_of,
)
from junction.protocols.openwire.primitives import Int, Long, decode_primitive_map
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ActiveMQTopic,
    ConnectionId,
    ConsumerId,
    LocalTransactionId,
    MessageId,
    ProducerId,
    SessionId,
    XATransactionId,
)
from junction.protocols.openwire.wireformat import (
    MAGIC_BYTES,
    SERVER_WIRE_FORMAT,
    WireFormat,
    WireFormatInfo,
    negotiate,
)
from tests.unit.openwire_frames import REAL_FRAMES

CID = "ID:host-40000-1700000000000-1:1"


def real(mode: str, name: str) -> bytes:
    for m, n, hx in REAL_FRAMES:
        if (m, n) == (mode, name):
            return bytes.fromhex(hx)
    raise KeyError((mode, name))


def mode_format(mode: str) -> WireFormat:
    return WireFormat(tight_encoding=mode.startswith("tight"), cache_enabled=mode.endswith("-cache"),
                      cache_size=0, stack_trace=True)


def connected(server_offer: WireFormat | None = None, client_offer: WireFormat | None = None):
    """A server codec and a client codec that exchanged WireFormatInfos."""
    server = OpenWireCodec(server_offer)
    client = OpenWireCodec(client_offer if client_offer is not None else WireFormat(cache_enabled=True))
    [negotiated] = server.receive_data(client.initiate())
    assert isinstance(negotiated, Negotiated)
    client.receive_data(server.initiate())
    return server, client


# -- the real client's bytes ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["loose-nocache", "tight-nocache", "loose-cache", "tight-cache"])
def test_real_frames_decode_and_write_back_byte_for_byte(mode):
    """Every frame the 5.17.2 marshaller wrote in ``mode``, in order through one connection's cache."""
    frames = [(n, bytes.fromhex(h)) for m, n, h in REAL_FRAMES if m == mode and n != "WFI"]
    assert len(frames) >= 15
    fmt = negotiate(mode_format(mode), mode_format(mode))
    inbound = WireContext(fmt.tight_encoding, True, fmt.cache_slots)
    outbound = WireContext(fmt.tight_encoding, True, fmt.cache_slots)
    from junction.protocols.openwire.codec import _decode, _encode

    for name, data in frames:
        command = _decode(data, 4, len(data), inbound)
        assert _encode(command, outbound) == data, name


def test_real_text_message_fields():
    msg = decode_frame(real("loose-nocache", "TextMessage"))
    assert isinstance(msg, ActiveMQTextMessage)
    assert (msg.command_id, msg.response_required, msg.persistent, msg.priority) == (5, True, True, 4)
    assert msg.producer_id == ProducerId(CID, 1, 1)
    assert msg.destination == ActiveMQQueue("q1")
    assert msg.message_id == MessageId(None, ProducerId(CID, 1, 1), 1, 0)
    assert (msg.group_id, msg.group_sequence, msg.timestamp) == ("g1", 1, 1700000000123)
    assert text_of(msg) == "hello \u00e9\x00\U0001F600"
    props = message_properties(msg)
    assert props == {"k": "v", "i": 7, "l": 1 << 40, "b": True, "d": 1.5}
    assert type(props["i"]) is Int and type(props["l"]) is Long


def test_real_frames_are_the_same_commands_in_every_encoding():
    for name in ("ConnectionInfo", "ConsumerInfo", "TextMessage", "MessageAck", "XATransactionInfo",
                 "ExceptionResponse", "SessionInfoBig", "SessionInfoUint", "ConnectionControl"):
        loose = decode_frame(real("loose-nocache", name), mode_format("loose-nocache"))
        tight = decode_frame(real("tight-nocache", name), mode_format("tight-nocache"))
        assert loose == tight, name


def test_real_connection_info_and_advisory_consumer():
    info = decode_frame(real("tight-nocache", "ConnectionInfo"), mode_format("tight-nocache"))
    assert isinstance(info, ConnectionInfo)
    assert (info.connection_id, info.client_id, info.user_name, info.password) == (
        ConnectionId(CID), "cid1", "user", "secret")
    assert (info.manageable, info.client_master, info.fault_tolerant, info.failover_reconnect) == (
        True, True, True, False)
    assert "secret" not in repr(info)
    adv = decode_frame(real("tight-nocache", "ConsumerInfo"), mode_format("tight-nocache"))
    assert isinstance(adv, ConsumerInfo)
    assert adv.consumer_id == ConsumerId(CID, -1, 1)
    assert adv.destination == ActiveMQTopic("ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic")
    assert (adv.prefetch_size, adv.no_local, adv.dispatch_async) == (1000, True, True)


def test_real_tight_longs_take_their_short_forms():
    """SessionId values: 2^32+5 takes 8 bytes, 2^32-1 four (read back unsigned), 1 two."""
    big = decode_frame(real("tight-nocache", "SessionInfoBig"), mode_format("tight-nocache"))
    assert big.session_id == SessionId(CID, 0x1_0000_0005) and big.command_id == 0x12345
    uint = decode_frame(real("tight-nocache", "SessionInfoUint"), mode_format("tight-nocache"))
    assert uint.session_id == SessionId(CID, 0xFFFF_FFFF) and uint.command_id == -1


def test_real_exception_and_transactions():
    fmt = mode_format("tight-cache")
    er = decode_frame(real("loose-nocache", "ExceptionResponse"), mode_format("loose-nocache"))
    assert isinstance(er, ExceptionResponse) and er.correlation_id == 1
    assert er.exception == JavaThrowable("javax.jms.InvalidClientIDException",
                                         "Broker: b - Client: cid1 already connected",
                                         (StackFrame("org.Foo", "bar", "Foo.java", 42),), None)
    tx = decode_frame(real("loose-nocache", "TransactionInfo"))
    assert isinstance(tx, TransactionInfo)
    assert tx.transaction_id == LocalTransactionId(1, ConnectionId(CID)) and tx.type == 0
    xa = decode_frame(real("loose-nocache", "XATransactionInfo"))
    assert xa.transaction_id == XATransactionId(1, b"\x01\x02\x03", b"\x04") and xa.type == 1
    assert fmt.cache_slots == 16383


def test_real_map_message_body():
    mm = decode_frame(real("loose-nocache", "MapMessage"))
    assert isinstance(mm, ActiveMQMapMessage) and mm.destination == ActiveMQTopic("t1")
    assert decode_primitive_map(mm.content) == {"s": "x", "y": b"\x09"}


def test_real_client_wireformatinfo_negotiates_tight_without_cache():
    info = decode_frame(real("loose-nocache", "WFI"))
    assert isinstance(info, WireFormatInfo) and info.magic == MAGIC_BYTES and info.version == 12
    peer = WireFormat.from_info(info)
    assert (peer.tight_encoding, peer.cache_enabled, peer.cache_size, peer.stack_trace) == (True, True, 1024, True)
    assert (peer.max_inactivity, peer.max_inactivity_initial_delay) == (30_000, 10_000)
    assert dict(peer.extra)["ProviderVersion"] == "5.17.2"
    settled = negotiate(SERVER_WIRE_FORMAT, peer)
    assert (settled.version, settled.tight_encoding, settled.cache_enabled, settled.stack_trace) == (12, True, False, True)


# -- framing ------------------------------------------------------------------------------------------


def test_negotiation_fed_one_byte_at_a_time_then_frames_in_the_settled_encoding():
    codec = OpenWireCodec()
    stream = real("loose-nocache", "WFI") + real("tight-nocache", "ConnectionInfo") + real("tight-nocache", "SessionInfo")
    events = []
    for i in range(len(stream)):
        events += codec.receive_data(stream[i:i + 1])
        assert codec.buffered <= DEFAULT_MAX_FRAME_SIZE + 4
    assert [type(e) for e in events] == [Negotiated, ConnectionInfo, SessionInfo]
    assert codec.wire_format.tight_encoding and not codec.wire_format.cache_enabled
    assert codec.buffered == 0


def test_frames_behind_the_wireformatinfo_in_one_read_use_the_settled_encoding():
    codec = OpenWireCodec()
    events = codec.receive_data(real("loose-nocache", "WFI") + real("tight-nocache", "ConnectionInfo"))
    assert isinstance(events[1], ConnectionInfo) and events[1].client_id == "cid1"


def test_loose_offer_makes_the_client_loose():
    server = OpenWireCodec(WireFormat(tight_encoding=False, stack_trace=False))
    [n] = server.receive_data(real("loose-nocache", "WFI"))
    assert not n.settled.tight_encoding and not n.settled.stack_trace
    assert isinstance(server.receive_data(real("loose-nocache", "ConnectionInfo"))[0], ConnectionInfo)


def test_our_wireformatinfo_has_the_value_types_the_client_casts():
    info = decode_frame(OpenWireCodec().initiate())
    p = info.properties()
    for key in ("MaxInactivityDuration", "MaxInactivityDurationInitalDelay", "MaxFrameSize"):
        assert type(p[key]) is Long, key
    assert type(p["CacheSize"]) is Int
    assert p["MaxFrameSize"] == DEFAULT_MAX_FRAME_SIZE
    assert (p["TightEncodingEnabled"], p["CacheEnabled"], p["StackTraceEnabled"]) == (True, False, True)
    assert p["SizePrefixDisabled"] is False


def test_a_frame_over_the_limit_is_refused_on_its_size_prefix():
    codec = OpenWireCodec(limits=OpenWireLimits(max_frame_size=1000))
    with pytest.raises(FrameTooLarge, match="1001 bytes larger than max allowed 1000") as info:
        codec.receive_data(struct.pack(">I", 1001))
    assert info.value.java_class == "org.apache.activemq.MaxFrameSizeExceededException"
    assert codec.buffered == 0
    with pytest.raises(FrameTooLarge):  # dead from then on
        codec.receive_data(b"")


def test_a_frame_at_the_limit_is_held_until_complete():
    codec = OpenWireCodec(limits=OpenWireLimits(max_frame_size=1000))
    codec.receive_data(struct.pack(">I", 1000) + b"\x01" * 500)
    assert codec.buffered == 504


def test_commands_completed_before_a_bad_frame_ride_on_the_error():
    codec = OpenWireCodec()
    with pytest.raises(UnknownType) as info:
        codec.receive_data(real("loose-nocache", "WFI") + b"\x00\x00\x00\x01\x4d")
    assert [type(e) for e in info.value.events] == [Negotiated]
    assert "unknown type 77" in str(info.value)


@pytest.mark.parametrize("type_byte, expected", [(77, "unknown type 77"), (13, "unknown type 13"),
                                                 (0, "NULL command")])
def test_unknown_type_bytes_name_themselves(type_byte, expected):
    with pytest.raises((UnknownType, MalformedCommand), match=expected):
        OpenWireCodec().receive_data(struct.pack(">IB", 1, type_byte))


def test_an_unknown_nested_type_is_named():
    frame = bytearray(encode_frame(SessionInfo(session_id=SessionId("c", 1))))
    frame[11] = 99  # the nested SessionId's type byte
    with pytest.raises(UnknownType, match=r"SESSION_INFO\(4\): a nested object: unknown type 99"):
        decode_frame(bytes(frame))


def test_a_structure_of_the_wrong_type_is_malformed():
    frame = encode_frame(ConsumerInfo(consumer_id=ConsumerId("c", 1, 1), destination=ActiveMQQueue("q")))
    forged = frame.replace(bytes((100,)) + b"\x01\x00\x01q", bytes((120,)) + b"\x01\x00\x01q")
    with pytest.raises(MalformedCommand, match="CONNECTION_ID.*where a ACTIVEMQ_QUEUE"):
        decode_frame(forged)


def test_truncated_and_trailing_bodies_are_malformed():
    frame = encode_frame(SessionInfo(command_id=3, session_id=SessionId("c", 1)))
    short = struct.pack(">I", len(frame) - 5) + frame[4:-1]
    with pytest.raises(MalformedCommand, match="ends"):
        decode_frame(short)
    long = struct.pack(">I", len(frame) - 3) + frame[4:] + b"\x00"
    with pytest.raises(MalformedCommand, match="1 bytes after its last field"):
        decode_frame(long)


def test_bad_magic_and_old_versions_fail_the_negotiation():
    bad = WireFormatInfo(b"ActiveMX", 12, None)
    with pytest.raises(NegotiationFailed, match="magic"):
        OpenWireCodec().receive_data(encode_frame(bad))
    old = WireFormat(version=11).info()
    with pytest.raises(NegotiationFailed, match="version 11 is not served"):
        OpenWireCodec().receive_data(encode_frame(old))
    newer = OpenWireCodec().receive_data(encode_frame(WireFormat(version=13).info()))
    assert newer[0].settled.version == 12


def test_nothing_but_the_wireformatinfo_goes_out_before_the_negotiation():
    codec = OpenWireCodec()
    with pytest.raises(LocalProtocolError, match="before the wire format is settled"):
        codec.send(KeepAliveInfo())
    assert codec.send(SERVER_WIRE_FORMAT.info())[4] == CommandType.WIREFORMAT_INFO


def test_send_refuses_what_the_peer_would_refuse():
    server = OpenWireCodec()
    client = OpenWireCodec(limits=OpenWireLimits(max_frame_size=200))
    server.receive_data(client.initiate())
    assert server.wire_format.max_frame_size == 200
    big = ActiveMQTextMessage(content=b"x" * 300)
    with pytest.raises(LocalProtocolError, match="exceeds the negotiated MaxFrameSize 200"):
        server.send(big)
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        server.send(SessionInfo(session_id="not an id"))
    with pytest.raises(LocalProtocolError, match="is not an OpenWire command"):
        server.send("not a command")


# -- the encodings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63 * 8, 64 * 8, 255 * 8, 256 * 8, 1599])
@pytest.mark.parametrize("pattern", ["true", "false", "alternate", "alternate2"])
def test_boolean_stream_round_trips_with_a_marker_behind(n, pattern):
    """As ActiveMQ's BooleanStreamTest: 1, 2 and 3-byte length prefixes, then an int intact."""
    value = {"true": lambda i: True, "false": lambda i: False,
             "alternate": lambda i: i % 2 == 0, "alternate2": lambda i: i % 2 == 1}[pattern]
    from junction.protocols.openwire.encoding import Encoder

    e = Encoder(True, None)
    for i in range(n):
        e.bit(value(i))
    data = marshal_boolean_stream(e.bits, e.nbits) + struct.pack(">i", 0x12345678)
    d = Decoder(data, 0, len(data), True, None)
    d.start_tight()
    assert [d.bit() for _ in range(n)] == [value(i) for i in range(n)]
    assert d.int() == 0x12345678 and d.pos == len(data)


@pytest.mark.parametrize("value", [0, 1, 0x7E, 0x7F, 0xFF, 0x7EFF, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x1_0000_0000,
                                   0x7FFFFFFFFFFFFFFF, -1, -(1 << 63)])
@pytest.mark.parametrize("tight", [True, False])
def test_long_ranges_round_trip(value, tight):
    """As NumberRangesWhileMarshallingTest: every size of tight long, negatives in 8 bytes."""
    fmt = WireFormat(tight_encoding=tight)
    cmd = SessionInfo(session_id=SessionId("c", value))
    assert decode_frame(encode_frame(cmd, fmt), fmt) == cmd


def test_tight_long_sizes():
    fmt = WireFormat(tight_encoding=True)
    sizes = [len(encode_frame(RemoveInfo(last_delivered_sequence_id=v), fmt)) for v in (0, 0xFFFF, 0x10000, 1 << 32, -1)]
    assert [s - sizes[0] for s in sizes] == [0, 2, 4, 8, 8]


@pytest.mark.parametrize("text", ["", "plain", "nul\x00inside", "\u00e9t\u00e9", "\u20ac", "\U0001F600", "\ud800 lone"])
def test_modified_utf8(text):
    data = encode_mutf8(text)
    assert b"\x00" not in data and not any(b >= 0xF0 for b in data)
    assert decode_mutf8(data) == text


def test_modified_utf8_refuses_four_byte_sequences():
    with pytest.raises(UnicodeDecodeError):
        decode_mutf8("\U0001F600".encode("utf-8"))


@pytest.mark.parametrize("tight", [True, False])
def test_strings_round_trip_in_both_encodings(tight):
    fmt = WireFormat(tight_encoding=tight)
    for s in (None, "", "ascii", "nul\x00", "\u00e9\U0001F600"):
        cmd = ConnectionInfo(client_id=s, user_name=s)
        assert decode_frame(encode_frame(cmd, fmt), fmt) == cmd


def test_stack_traces_travel_only_when_negotiated():
    exc = JavaThrowable("java.lang.IllegalStateException", "m", (StackFrame("C", "m", "F.java", 1),),
                        JavaThrowable("java.io.IOException", "cause"))
    cmd = ExceptionResponse(correlation_id=4, exception=exc)
    with_traces = WireFormat(stack_trace=True)
    assert decode_frame(encode_frame(cmd, with_traces), with_traces) == cmd
    without = WireFormat(stack_trace=False)
    assert decode_frame(encode_frame(cmd, without), without).exception == JavaThrowable(exc.class_name, "m")


def test_text_bodies():
    assert text_of(ActiveMQTextMessage(content=text_content(None))) is None
    assert text_of(ActiveMQTextMessage(content=bytes.fromhex("0000000568656c6c6f"))) == "hello"  # the trace's
    import zlib

    packed = ActiveMQTextMessage(compressed=True, content=zlib.compress(text_content("z" * 1000)))
    assert text_of(packed) == "z" * 1000
    with pytest.raises(MalformedCommand, match="says 9 bytes"):
        text_of(ActiveMQTextMessage(content=bytes.fromhex("0000000968656c6c6f")))


def test_the_traces_property_map():
    assert decode_primitive_map(bytes.fromhex("00000001" "0001" "6b" "09" "0001" "76")) == {"k": "v"}


# -- the marshalling cache --------------------------------------------------------------------------


@pytest.mark.parametrize("tight", [True, False])
def test_cache_sends_an_object_once_then_its_index(tight):
    offer = WireFormat(tight_encoding=tight, cache_enabled=True)
    server, client = connected(offer, offer)
    dest = ActiveMQQueue("a-long-queue-name-to-see")
    first = client.send(ConsumerInfo(consumer_id=ConsumerId("c", 1, 1), destination=dest))
    second = client.send(ConsumerInfo(consumer_id=ConsumerId("c", 1, 1), destination=dest))
    assert b"a-long-queue-name-to-see" in first and b"a-long-queue-name-to-see" not in second
    assert server.receive_data(first + second)[1].destination == dest


def test_cache_index_naming_nothing_is_malformed():
    offer = WireFormat(tight_encoding=False, cache_enabled=True)
    server, _ = connected(offer, offer)
    body = b"\x00\x00\x00\x01\x00" + b"\x00\x00\x05"  # command id, rr, cached: not new, index 5
    with pytest.raises(MalformedCommand, match="cache index 5 names nothing"):
        server.receive_data(struct.pack(">IB", len(body) + 1, CommandType.SESSION_INFO) + body)


def test_cache_index_outside_the_slots_is_malformed():
    offer = WireFormat(tight_encoding=False, cache_enabled=True, cache_size=4)
    server, _ = connected(offer, offer)
    nested = b"\x01\x79\x01\x00\x01c" + b"\x00" * 8
    body = b"\x00\x00\x00\x01\x00" + b"\x01\x00\x04" + nested
    with pytest.raises(MalformedCommand, match="index 4 is outside the 4 slots"):
        server.receive_data(struct.pack(">IB", len(body) + 1, CommandType.SESSION_INFO) + body)


@pytest.mark.parametrize("tight", [True, False])
@pytest.mark.parametrize("slots", [1, 2, 3])
def test_small_caches_stay_in_step(tight, slots):
    """The slots go round inside one command (a message id's producer id takes the slot its message's
    field just took); the writer must end with what the reader keeps."""
    offer = WireFormat(tight_encoding=tight, cache_enabled=True, cache_size=slots)
    server, client = connected(offer, offer)
    msgs = [ActiveMQTextMessage(producer_id=ProducerId("c", i % 3, 1), destination=ActiveMQQueue(f"q{i % 2}"),
                                message_id=MessageId(None, ProducerId("c", i % 4, 1), i, 0),
                                transaction_id=LocalTransactionId(i % 2, ConnectionId("c")) if i % 3 else None)
            for i in range(12)]
    msgs += [TransactionInfo(connection_id=ConnectionId("c"), transaction_id=LocalTransactionId(i, ConnectionId("c")))
             for i in range(4)]
    data = b"".join(client.send(m) for m in msgs)
    assert server.receive_data(data) == msgs


def test_a_failed_send_leaves_the_cache_as_it_was():
    offer = WireFormat(tight_encoding=False, cache_enabled=True)
    server, client = connected(offer, offer)
    with pytest.raises(LocalProtocolError):
        client.send(MessageDispatch(consumer_id=ConsumerId("c", 1, 1), destination=ActiveMQQueue("q"),
                                    message="not a message"))
    ok = MessageDispatch(consumer_id=ConsumerId("c", 1, 1), destination=ActiveMQQueue("q"))
    assert server.receive_data(client.send(ok)) == [ok]
