"""CORE: the codec's packets, both sides, default limits and small ones (junction/protocols/core/).

Knobs: the side (server, which reads the optional ``ARTEMIS`` handshake, or
client), the limits (the defaults, or a ``max_packet_size`` the fuzzer can
reach) and the cutting seed.  Contract (the codec's docstring):

* only :class:`CoreProtocolError` escapes ``receive_data``, its code one the
  connection answers with (UNSUPPORTED_PACKET, INTERNAL_ERROR); after one,
  the codec raises the same error again, with no events;
* :attr:`CoreCodec.buffered` never exceeds ``max_packet_size + 4``, nor holds
  a complete packet;
* the events, and whether the stream is refused and with which code and on
  which channel, do not depend on how it was cut into reads;
* every packet read is written back by :func:`encode_packet` into bytes that
  read back to a packet written the same (equality of bytes, not of values:
  a NaN property is not equal to itself);
* the EXCEPTION the connection answers a refusal with is well-formed.
"""

from __future__ import annotations

from junction.protocols.core import (
    HANDSHAKE,
    CoreCodec,
    CoreLimits,
    CoreProtocolError,
    ExceptionType,
    Handshake,
    MessageHeaders,
    Scalar,
    TransportConfiguration,
    decode_packet,
    encode_packet,
)
from junction.protocols.core import packets as p
from tests.fuzz.common import Input, cuts, same

#: small enough that the fuzzer meets the limit within a few hundred bytes
SMALL = CoreLimits(max_packet_size=120)
LIMITS = (CoreLimits(), SMALL)
SIDES = (True, False)
ANSWERED_WITH = frozenset({ExceptionType.UNSUPPORTED_PACKET, ExceptionType.INTERNAL_ERROR})
KNOBS = 3


def decode_stream(chunks, server: bool, limits: CoreLimits):
    """(events, refusal) for ``chunks`` fed in turn; checks the buffer bound and the dead codec."""
    codec = CoreCodec(limits, server=server)
    events: list = []
    for chunk in chunks:
        try:
            events += codec.receive_data(chunk)
        except CoreProtocolError as exc:
            assert exc.exception_type in ANSWERED_WITH, exc.exception_type
            events += exc.events
            assert codec.buffered == 0
            try:
                codec.receive_data(b"\x00")
            except CoreProtocolError as again:
                assert again is exc and again.events == []
            else:
                raise AssertionError("a dead codec accepted more bytes") from None
            answer = p.ExceptionMessage(exc.exception_type, str(exc), channel_id=exc.channel_id or 0)
            assert decode_packet(codec.send(answer)) == answer
            return events, (exc.exception_type, exc.channel_id)
        held = codec._frames.held()
        assert len(held) <= limits.max_packet_size + 4, (len(held), limits)
        if not codec._handshake and len(held) >= 4:
            assert len(held) < 4 + int.from_bytes(held[:4], "big"), "a complete packet was left held"
    return events, None


def round_trip(packet) -> None:
    """What was read is written back into bytes that read back the same."""
    data = encode_packet(packet)
    again = decode_packet(data)
    assert type(again) is type(packet) and encode_packet(again) == data, (packet, again)


def fuzz_core(data: bytes) -> None:
    inp = Input(data, KNOBS)
    server = inp.knob(0, SIDES)
    limits = inp.knob(1, LIMITS)
    results = {
        name: decode_stream(chunks, server, limits) for name, chunks in cuts(inp.stream, inp.knobs[2])
    }
    same(results, "CORE events")
    for event in results["whole"][0]:
        if not isinstance(event, Handshake):
            round_trip(event)


CONNECTOR = TransportConfiguration(
    "netty", "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory",
    (("host", "127.0.0.1"), ("port", "61616"), ("useEpoll", True), ("batchDelay", 0),
     ("connectionsAllowed", Scalar("int", -1))),
)
HEADERS = MessageHeaders(
    address="orders", user_id=bytes(16), type=3, durable=True, timestamp=1_700_000_000_000,
    properties=(("_AMQ_DUPL_ID", b"d-1"), ("s", "v\u00e9"), ("i", Scalar("int", 1)), ("l", 2),
                ("b", True), ("n", None), ("f", Scalar("float", 0.5)), ("d", 1.5),
                ("c", Scalar("char", "x")), ("y", Scalar("byte", 1)), ("h", Scalar("short", 2))),
)
S = 10
XID = p.Xid(0x1BB0, b"bq", b"gtx")


def seeds() -> list[bytes]:
    """A real client's and a real server's streams, written by the project's encoders."""
    client = [
        p.Ping(60000), p.SubscribeTopologyV2(False, 136),
        p.CreateSessionV2("a-session-name-uuid", S, 136, "guest", "guest", 102400, False, True, True,
                          -1, False, None, "client-1"),
        p.SessAddMetadata2("jms-session", "", True, channel_id=S),
        p.CreateQueueV2("q", "q", None, False, False, True, False, 1, -1, False, channel_id=S),
        p.SessProducerRequestCredits(32768, "q", channel_id=S), p.CreateProducer(1, "q", channel_id=S),
        p.SessSend(b"\x00\x00\x00\x0a\x00\x0ahello core", HEADERS, True, -1, 1, channel_id=S),
        p.SessCreateConsumer(0, "q", "color = 'red'", False, True, 0, channel_id=S),
        p.SessFlowToken(0, 1048576, channel_id=S), p.SessStart(channel_id=S),
        p.SessAcknowledge(0, 6, False, channel_id=S), p.SessCommit(-2, channel_id=S),
        p.SessSendLarge(HEADERS, channel_id=S),
        p.SessSendContinuation(b"chunk", True, None, False, -3, 1, channel_id=S),
        p.SessSendContinuation(b"last", False, 9, True, -4, 1, channel_id=S),
        p.SessXAStart(XID, channel_id=S), p.SessXAEnd(XID, False, channel_id=S),
        p.SessXAPrepare(XID, channel_id=S), p.SessXACommit(XID, False, channel_id=S),
        p.SessXAGetInDoubtXids(channel_id=S),
        p.SessConsumerClose(0, channel_id=S), p.RemoveProducer(1, channel_id=S), p.SessClose(channel_id=S),
    ]
    server = [
        p.Ping(60000),
        p.ClusterTopologyV4(False, "node-uuid", CONNECTOR, None, True, 1, None, None, 136),
        p.CreateSessionResponse(136), p.NullResponse(-1, channel_id=S),
        p.SessProducerCredits(32768, "q", channel_id=S),
        p.SessQueueQueryResponseV3(True, False, False, 1, 1, None, "q", "q", True, False, False, 1, -1,
                                   exclusive=False, last_value=False,
                                   default_consumer_window_size=1048576, channel_id=S),
        p.SessReceiveMsg(b"\x00\x00\x00\x05\x00\x05hello", HEADERS, 0, 1, channel_id=S),
        p.ExceptionMessage(101, "AMQ229019: Queue q already exists on address q", channel_id=S),
        p.SessXAResponse(False, 0, None, -5, channel_id=S),
        p.SessXAGetInDoubtXidsResponse((XID,), channel_id=S),
        p.DisconnectV3("node-uuid", p.DisconnectReason.REDIRECT, "other", CONNECTOR),
    ]
    to_server = HANDSHAKE + b"".join(encode_packet(x) for x in client)
    to_client = b"".join(encode_packet(x) for x in server)
    return [
        bytes((0, 0, 7)) + to_server,
        bytes((0, 1, 3)) + to_server,
        bytes((1, 0, 5)) + to_client,
        bytes((1, 1, 9)) + to_client,
        bytes((0, 0, 1)) + to_server[:7] + b"\x00\x00\x00\x09\x5b" + bytes(8),  # REPLICATION_APPEND
    ]
