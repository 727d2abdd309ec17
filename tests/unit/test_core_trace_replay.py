"""The broker's CORE adapter answers the real client as the real broker did.

The client's side of the recorded exchange between the Artemis JMS client and
an Artemis broker (core-traces/proxy2: create a queue, produce, consume,
acknowledge, close; both sides wire version 136) is replayed against
:class:`~junction.brokercore.core_server.CoreProtocol`, packet by packet, in
the order the client wrote it, and each of the broker's answers is compared
with the real broker's, packet by packet.  The only fields allowed to differ
are those that must: the node id and the topology's event id (this node's
own, and its clock's), and the message id the broker gave the message (which the client's
acknowledgement names, so the replay names this broker's).
Everything else -- types, channels, correlation ids, the queue query's 30
fields, the delivered message's body, headers and properties -- is equal,
and so are the bytes once those fields are put back.
"""

from __future__ import annotations

import dataclasses

from junction.protocols.core import decode_packet, encode_packet
from junction.protocols.core import packets as p
from tests.unit.core_fixtures import CoreClient
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_core_traces import TRACE

NODE_ID = "e8ba12ab-e61b-11f1-8f80-02fc00000001"  # the real broker's, in its topology
EVENT_ID = 1795314303973  # the real broker's clock when it announced itself


def _exchange():
    """[(client bytes or None for the handshake, [the broker's packets that answered it])]"""
    steps = []
    for direction, text in TRACE:
        data = bytes.fromhex(text)
        if direction == "C->S":
            steps.append((data, []))
        else:
            steps[-1][1].append(decode_packet(data))
    return steps


def _comparable(packet, message_id: int | None):
    """The packet with the fields that must differ set to the real broker's values."""
    if isinstance(packet, p.ClusterTopologyV4):
        return dataclasses.replace(packet, node_id=NODE_ID, unique_event_id=EVENT_ID)
    if isinstance(packet, p.SessReceiveMsg) and message_id is not None:
        return dataclasses.replace(packet, headers=dataclasses.replace(packet.headers, message_id=message_id))
    return packet


def test_replaying_the_real_client_gets_the_real_broker_s_answers():
    broker = Broker()
    broker.clock.advance(EVENT_ID / 1000.0)  # the node's clock (the topology's event id is its time)
    client = CoreClient(broker, handshake=False)
    steps = _exchange()
    assert steps[0][0] == b"ARTEMIS"
    expected = [x for _, answers in steps for x in answers]
    real_id = next(x.headers.message_id for x in expected if isinstance(x, p.SessReceiveMsg))
    answers = []
    due = 0
    ours = None  # the id this broker gave the message (the client acknowledges it by that id)
    for data, answered in steps:
        if ours is not None and data[4] == p.SessAcknowledge.TYPE:
            ack = decode_packet(data)
            assert ack.message_id == real_id
            data = encode_packet(dataclasses.replace(ack, message_id=ours))
        raw = client.send_raw(data)
        ours = next((x.headers.message_id for x in raw if isinstance(x, p.SessReceiveMsg)), ours)
        got = [_comparable(x, real_id) for x in raw]
        answers.extend(got)
        due += len(answered)
        # Everything the real broker had answered before the client's next packet is here
        # (the real broker answered the opening PINGs only after the subscription: latency),
        # and nothing the real broker did not write.
        assert len(answers) >= due, (data, answers[-3:], expected[:due][-3:])
        assert answers == expected[: len(answers)]
    assert answers == expected
    assert [encode_packet(x) for x in answers] == [encode_packet(x) for x in expected]
    # what the exchange did, in the broker: the queue is there, empty, and nothing is held
    assert [type(x).__name__ for x in answers] == [
        "Ping", "Ping", "ClusterTopologyV4", "CreateSessionResponse", "NullResponse", "SessProducerCredits",
        "SessQueueQueryResponseV3", "SessReceiveMsg", "NullResponse", "NullResponse",
    ]
    queue = broker.server.find_queue("smoke.q")
    assert queue is not None and queue.message_count == 0 and not queue.consumers
    assert not client.closed and broker.server.sessions == set()


def test_the_same_exchange_fed_one_byte_at_a_time():
    broker = Broker()
    broker.clock.advance(EVENT_ID / 1000.0)
    client = CoreClient(broker, handshake=False)
    stream = b"".join(data for data, _ in _exchange())
    got = []
    for i in range(len(stream)):
        got.extend(client.send_raw(stream[i:i + 1]))
    expected = [x for _, answers in _exchange() for x in answers]
    real_id = next(x.headers.message_id for x in expected if isinstance(x, p.SessReceiveMsg))
    assert [_comparable(x, real_id) for x in got] == expected
