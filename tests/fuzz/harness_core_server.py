"""The broker core's CORE adapter (junction/brokercore/core_server.py) behind the codec.

A client opens a connection the way the real client does (PING,
SUBSCRIBE_TOPOLOGY_V2, CREATESESSION on channel 10), creates a queue, sends
it a message and consumes it (so acknowledgements have something to name);
then the fuzzer's bytes go straight into
:class:`~junction.brokercore.core_server.CoreProtocol` on its
``StringTransport``, whole or in uneven pieces (knob 0), in an auto-commit or a
transacted session (knob 1).  Contract:

* ``dataReceived`` never raises, and the clock's timers fire without raising;
* what the server writes parses, with a client codec, as CORE packets a server
  sends;
* no handler fails unexpectedly: no EXCEPTION says "internal error";
* a connection the server closes got an EXCEPTION last (or a DISCONNECT);
* once the connection is gone no broker session of it remains and no timer of
  it is left on the clock.
"""

from __future__ import annotations

import logging

from junction.protocols.core import CoreCodec, MessageHeaders, encode_packet
from junction.protocols.core import packets as p
from tests.fuzz.common import Input, pieces
from tests.unit.core_fixtures import CoreClient, create_session
from tests.unit.stomp_fixtures import Broker

logging.disable(logging.CRITICAL)

#: a fresh broker core after this many inputs, so what fuzzed queues create does not pile up
BROKER_LIFE = 300
CH = 10

_broker = None
_uses = 0


def broker() -> Broker:
    global _broker, _uses
    _uses += 1
    if _broker is None or _uses > BROKER_LIFE:
        _broker = Broker()
        _uses = 1
    return _broker


def _timers(b: Broker, protocol) -> list:
    return [c for c in b.clock.getDelayedCalls() if getattr(c.func, "__self__", None) is protocol]


def fuzz_core_server(data: bytes) -> None:
    inp = Input(data, 2)
    b = broker()
    client = CoreClient(b)
    transacted = inp.knobs[1] % 2 == 1
    client.send(
        p.Ping(60_000),
        p.SubscribeTopologyV2(False, 136),
        create_session(CH, auto_commit_sends=not transacted, auto_commit_acks=not transacted),
        p.CreateQueueV2("fuzz", "fuzz", None, False, False, True, False, 1, -1, False, channel_id=CH),
        p.SessSend(b"x", MessageHeaders(address="fuzz"), False, 0, 1, channel_id=CH),
        p.SessCreateConsumer(0, "fuzz", None, False, False, 0, channel_id=CH),
        p.SessFlowToken(0, 1 << 20, channel_id=CH),
        p.SessStart(channel_id=CH),
    )
    client.transport.clear()
    protocol = client.protocol
    chunks = [inp.stream] if inp.knobs[0] % 2 == 0 else pieces(inp.stream, inp.knobs[0])
    for chunk in chunks:
        if client.transport.disconnecting:
            break
        protocol.dataReceived(chunk)  # must never raise
        b.run()
    closed = client.transport.disconnecting
    written = CoreCodec(server=False).receive_data(client.transport.value())  # parses
    for packet in written:
        assert packet.SENDER != "client", f"the server wrote a client's packet: {packet!r}"
        if isinstance(packet, p.ExceptionMessage):
            assert not (packet.message or "").startswith("internal error"), packet
    if closed:
        assert written and isinstance(written[-1], (p.ExceptionMessage, p.Disconnect)), written[-3:]
    b.clock.advance(120)  # the TTL (which closes without a word, as Artemis's) and version timers fire
    client.lose()
    assert _timers(b, protocol) == []
    assert not any(s.connection is protocol.info for s in b.server.sessions if protocol.info is not None)


def seeds() -> list[bytes]:
    headers = MessageHeaders(address="fuzz", durable=True, properties=(("k", "v"),))
    streams = [
        encode_packet(p.SessSend(b"hello", headers, True, -1, 1, channel_id=CH)),
        encode_packet(p.SessAcknowledge(0, 1, True, channel_id=CH)) + encode_packet(p.SessCommit(-2, channel_id=CH)),
        encode_packet(p.SessRollback(False, channel_id=CH)) + encode_packet(p.SessConsumerClose(0, channel_id=CH)),
        encode_packet(p.SessQueueQuery("fuzz", channel_id=CH)) + encode_packet(p.SessBindingQuery("fuzz", channel_id=CH)),
        encode_packet(p.CreateSharedQueueV2("t", "s", None, True, 0, True, channel_id=CH)),
        encode_packet(p.SessForceConsumerDelivery(0, 1, channel_id=CH)) + encode_packet(p.SessStop(channel_id=CH)),
        encode_packet(create_session(11)) + encode_packet(p.SessClose(channel_id=CH)),
        encode_packet(p.SessProducerRequestCredits(1024, "fuzz", channel_id=CH)) + encode_packet(p.Ping(-1)),
    ]
    return [bytes((i, i)) + s for i, s in enumerate(streams)]
