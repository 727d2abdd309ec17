"""The broker's CORE adapter moving messages: sends, confirmations, consumers, credits, acks, transactions.

Driven in process with the project's codec as the client (tests/unit/core_fixtures.py);
durable sends over a real journal whose writer syncs when the clock runs it, so
"no NULL_RESPONSE before the fsync" is observable.
"""

from __future__ import annotations

import errno

import pytest

from junction.brokercore.core_consumers import FORCED_DELIVERY
from junction.brokercore.journal import FaultyFiles
from junction.protocols.core import ExceptionType, MessageHeaders, Scalar, encode_packet
from junction.protocols.core import packets as p
from tests.unit.core_fixtures import CoreClient, JournalNode, message
from tests.unit.stomp_fixtures import AddressSettings, Broker

CH = 10


def create_queue(client, name="q", *, durable=True, routing=1, rr=True):
    return client.send(p.CreateQueueV2(name, name, None, durable, False, rr, False, routing, -1, False, channel_id=CH))


def send(client, body=b"hello", address="q", *, durable=False, rr=False, correlation=0, run=True, **fields):
    b, headers = message(body, address, durable=durable, **fields)
    return client.send(p.SessSend(b, headers, rr, correlation, 1, channel_id=CH), run=run)


def consume(client, queue="q", consumer=0, credits=1024 * 1024, *, start=True, filter_string=None):
    got = client.send(p.SessCreateConsumer(consumer, queue, filter_string, False, True, 0, channel_id=CH))
    assert type(got[0]) is p.SessQueueQueryResponseV3 and got[0].exists, got
    packets = [p.SessFlowToken(consumer, credits, channel_id=CH)] if credits is not None else []
    if start:
        packets.append(p.SessStart(channel_id=CH))
    return got[1:] + (client.send(*packets) if packets else [])


def deliveries(packets):
    return [x for x in packets if isinstance(x, p.SessReceiveMsg)]


def ack(client, message_id, consumer=0, *, individual=False, rr=True):
    cls = p.SessIndividualAcknowledge if individual else p.SessAcknowledge
    return client.send(cls(consumer, message_id, rr, channel_id=CH))


NULL = p.NullResponse(-1, channel_id=CH)


# -- sends and their confirmation ----------------------------------------------------------------------


def test_a_durable_send_is_answered_only_after_the_journal_synced(tmp_path):
    node = JournalNode(tmp_path)
    client = CoreClient(node)
    client.open()
    create_queue(client)
    syncs = node.fs.fsyncs
    assert send(client, durable=True, rr=True, correlation=-5, run=False) == [], "no NULL_RESPONSE before the sync"
    assert node.fs.fsyncs == syncs
    node.run()
    assert client.take() == [p.NullResponse(-5, channel_id=CH)]
    assert node.fs.fsyncs > syncs


def test_answers_keep_their_order_behind_a_durable_send(tmp_path):
    node = JournalNode(tmp_path)
    client = CoreClient(node)
    client.open()
    create_queue(client)
    b, durable = message(b"d", durable=True)
    _, plain = message(b"n")
    got = client.send(
        p.SessSend(b, durable, True, -1, 1, channel_id=CH),
        p.SessSend(b"n", plain, True, -2, 1, channel_id=CH),
        p.SessQueueQuery("q", channel_id=CH),
        run=False,
    )
    assert got == [], "the non-durable send's answer waits for the durable one's"
    node.run()
    got = client.take()
    assert [x.correlation_id for x in got[:2]] == [-1, -2] and type(got[2]) is p.SessQueueQueryResponseV3
    assert got[2].message_count == 2


def test_a_failed_sync_answers_io_error_and_refuses_durable_sends(tmp_path):
    fs = FaultyFiles()
    node = JournalNode(tmp_path, fs)
    client = CoreClient(node)
    client.open()
    create_queue(client)
    fs.fail_fsync = errno.EIO
    send(client, durable=True, rr=True, correlation=-3, run=False)
    node.run()
    (answer,) = client.take()
    assert (answer.code, answer.correlation_id) == (ExceptionType.IO_ERROR, -3)
    assert not client.closed
    (answer,) = send(client, durable=True, rr=True, correlation=-4)
    assert (answer.code, answer.correlation_id) == (ExceptionType.IO_ERROR, -4)
    assert "durable sends are refused" in answer.message
    assert send(client, b"memory", rr=True, correlation=-6) == [p.NullResponse(-6, channel_id=CH)]
    # nobody waits on an unanswered durable send: the connection ends rather than lose it silently
    send(client, durable=True, rr=False)
    assert client.closed


def test_a_send_to_an_address_that_cannot_be_created_is_answered_or_logged():
    broker = Broker(address_settings=[AddressSettings(match="#", auto_create_addresses=False, auto_create_queues=False)])
    client = CoreClient(broker)
    client.open()
    (answer,) = send(client, address="nowhere", rr=True, correlation=-9)
    assert (answer.code, answer.correlation_id) == (ExceptionType.ADDRESS_DOES_NOT_EXIST, -9)
    assert send(client, address="nowhere", rr=False) == [] and not client.closed  # as Artemis: logged


def test_the_confirmation_window_sends_packets_confirmed():
    broker = Broker()
    client = CoreClient(broker)
    size = len(encode_packet(p.SessSend(*message(b"x" * 100), False, 0, 1, channel_id=CH)))
    client.open(window=3 * size)
    create_queue(client)  # one command (id 0), answered
    got = []
    for _ in range(3):
        got += send(client, b"x" * 100)
    confirmed = [x for x in got if isinstance(x, p.PacketsConfirmed)]
    assert confirmed == [p.PacketsConfirmed(3, channel_id=CH)]  # commands 0 to 3: the create and 3 sends
    # metadata does not count; an answered failure confirms nothing
    client.send(p.SessAddMetadata2("k", "v", False, channel_id=CH))
    client.send(p.SessQueueQuery("q", channel_id=CH))
    assert [x for x in send(client, b"x" * 100) if isinstance(x, p.PacketsConfirmed)] == []


def test_producer_credits_are_granted():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    got = client.send(p.SessProducerRequestCredits(32768, "q", channel_id=CH))
    assert got == [p.SessProducerCredits(32768, "q", channel_id=CH)]
    assert client.send(p.CreateProducer(1, "q", channel_id=CH), p.RemoveProducer(1, channel_id=CH)) == []


def test_a_message_without_an_address_takes_its_producer_s():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client, "prod")
    client.send(p.CreateProducer(7, "prod", channel_id=CH))
    b, headers = message(address=None)
    assert client.send(p.SessSend(b, headers, True, -1, 7, channel_id=CH)) == [NULL]
    assert broker.server.find_queue("prod").message_count == 1
    (answer,) = client.send(p.SessSend(b, headers, True, -2, 8, channel_id=CH))
    assert answer.code == ExceptionType.ILLEGAL_STATE


# -- queues and addresses --------------------------------------------------------------------------


def test_creating_a_queue_that_exists_gets_artemis_s_text():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    assert create_queue(client, "smoke.q", durable=False) == [NULL]
    (answer,) = create_queue(client, "smoke.q", durable=False)
    # word for word what the real broker answered (core-traces/proxy1)
    assert answer == p.ExceptionMessage(101, "AMQ229019: Queue smoke.q already exists on address smoke.q", channel_id=CH)


def test_queue_and_binding_queries_address_creation_and_deletion():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    (q,) = client.send(p.SessQueueQuery("jobs", channel_id=CH))
    assert not q.exists and q.auto_create_queues and q.default_consumer_window_size == 1024 * 1024
    assert client.send(p.CreateAddress("events", (0,), True, False, channel_id=CH)) == [NULL]
    client.send(p.CreateSharedQueueV2("events", "sub-1", "color = 'red'", True, 0, True, channel_id=CH))
    client.send(p.CreateSharedQueueV2("events", "sub-1", "color = 'red'", True, 0, True, channel_id=CH))  # same: kept
    (b,) = client.send(p.SessBindingQuery("events", channel_id=CH))
    assert type(b) is p.SessBindingQueryResponseV5
    assert (b.exists, b.queue_names, b.supports_multicast, b.supports_anycast) == (True, ("sub-1",), True, False)
    (q,) = client.send(p.SessQueueQuery("sub-1", channel_id=CH))
    assert (q.exists, q.durable, q.routing_type, q.filter_string, q.address) == (True, True, 0, "color = 'red'", "events")
    assert client.send(p.DeleteQueue("sub-1", channel_id=CH)) == [NULL]
    (q,) = client.send(p.SessQueueQuery("sub-1", channel_id=CH))
    assert not q.exists
    (answer,) = client.send(p.DeleteQueue("sub-1", channel_id=CH))
    assert (answer.code, answer.message) == (ExceptionType.QUEUE_DOES_NOT_EXIST, "AMQ229017: Queue sub-1 does not exist")


def test_queue_attributes_junction_lacks_are_refused():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    (answer,) = client.send(
        p.CreateQueueV2("lvq", "lvq", None, True, False, True, False, 1, -1, False, False, True, channel_id=CH)
    )
    assert answer.code == ExceptionType.NOT_IMPLEMENTED_EXCEPTION and "last-value" in answer.message
    assert broker.server.find_queue("lvq") is None


def test_a_temporary_queue_goes_with_its_session():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    client.send(p.CreateQueueV2("tmp", "tmp", None, False, True, True, False, 1, -1, False, channel_id=CH))
    assert broker.server.find_queue("tmp") is not None
    client.send(p.SessClose(channel_id=CH))
    assert broker.server.find_queue("tmp") is None


# -- consumers, credits, deliveries ------------------------------------------------------------------


def test_a_delivery_carries_the_message_as_it_was_sent():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    properties = (
        ("s", "text"), ("l", 2**40), ("i", Scalar("int", -7)), ("b", Scalar("byte", 3)), ("sh", Scalar("short", 300)),
        ("f", Scalar("float", 1.5)), ("d", 2.25), ("c", Scalar("char", "x")), ("t", True), ("n", None), ("by", b"\x00\xff"),
    )
    user_id = bytes(range(16))
    bodies = [
        (0, b"\x00\x00\x00\x0a\x00\x0ahello core"),  # a DEFAULT message's body, as the trace's
        (3, b"\x01\x00\x00\x00\x04h\x00\xe9\x00"),  # TEXT: a nullable SimpleString "hé"
        (3, b"\x00"),  # TEXT: null
        (4, b"\x00\x01\x02"),  # BYTES
        (5, b"\x01\x00\x00\x00\x00"),  # MAP: an empty TypedProperties
        (6, b"\x0a\x00\x00\x00\x00"),  # STREAM
    ]
    for kind, body in bodies:
        headers = MessageHeaders(0, "q", user_id, kind, True, 0, 1_700_000_000_123, 7, properties)
        client.send(p.SessSend(body, headers, True, -1, 1, channel_id=CH))
    got = deliveries(consume(client))
    assert [(x.body, x.headers.type) for x in got] == [(b, k) for k, b in bodies]
    for x in got:
        h = x.headers
        assert (h.address, h.user_id, h.durable, h.timestamp, h.priority, h.properties) == (
            "q", user_id, True, 1_700_000_000_123, 7, properties
        )
        assert x.consumer_id == 0 and x.delivery_count == 1 and h.message_id > 0
    text = broker.server.find_queue("q")  # the model holds a TextMessage's text as UTF-8 for other protocols
    assert text is not None


def test_credits_are_bytes_of_receive_packets():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    for i in range(5):
        send(client, b"m%d" % i)
    size = len(encode_packet(p.SessReceiveMsg(*message(b"m0"), 0, 1, channel_id=CH)))
    assert deliveries(consume(client, credits=None)) == []  # no credit yet: nothing
    got = deliveries(client.send(p.SessFlowToken(0, 1, channel_id=CH)))
    assert len(got) == 1  # one byte of credit: one message, then the credit is negative
    assert deliveries(client.send(p.SessFlowToken(0, size - 1, channel_id=CH))) == []  # back to 0: nothing
    assert len(deliveries(client.send(p.SessFlowToken(0, 2 * size, channel_id=CH)))) == 2
    assert len(deliveries(client.send(p.SessFlowToken(0, -1, channel_id=CH)))) == 2  # unlimited
    assert len(deliveries(send(client, b"more"))) == 1


def test_nothing_is_delivered_before_start_or_after_stop():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    send(client)
    assert deliveries(consume(client, start=False)) == []
    assert client.send(p.SessStop(channel_id=CH)) == [NULL]
    assert deliveries(client.send(p.SessStart(channel_id=CH))) != []
    client.send(p.SessStop(channel_id=CH))
    send(client)
    assert deliveries(client.take()) == []
    assert len(deliveries(client.send(p.SessStart(channel_id=CH)))) == 1


def test_a_consumer_of_a_queue_that_does_not_exist():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    (answer,) = client.send(p.SessCreateConsumer(0, "nope", None, False, True, 0, channel_id=CH))
    assert (answer.code, answer.message) == (100, "AMQ229017: Queue nope does not exist")
    (answer,) = client.send(p.SessCreateConsumer(1, "nope", None, True, True, 0, channel_id=CH))
    assert answer.code == 100


def test_a_consumer_s_filter():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    for color in ("red", "blue", "red"):
        send(client, color.encode(), properties=(("color", color),))
    got = deliveries(consume(client, filter_string="color = 'red'"))
    assert [x.body for x in got] == [b"red", b"red"]


def test_forced_delivery_ends_with_the_marker():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    consume(client, credits=None)
    send(client, b"one")
    client.send(p.SessFlowToken(0, 1, channel_id=CH))
    got = client.send(p.SessForceConsumerDelivery(0, 4, channel_id=CH))
    (marker,) = got
    assert marker.headers.property(FORCED_DELIVERY) == 4 and marker.delivery_count == 0 and marker.body == b""


# -- acknowledgements ----------------------------------------------------------------------------------


def test_acknowledge_is_cumulative_and_individual_acknowledge_is_not():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    for i in range(5):
        send(client, b"m%d" % i)
    ids = [x.headers.message_id for x in deliveries(consume(client))]
    queue = broker.server.find_queue("q")
    assert ack(client, ids[2]) == [NULL]
    assert queue.message_count == 2
    assert ack(client, ids[4], individual=True) == [NULL]
    assert queue.message_count == 1
    (answer,) = ack(client, ids[0])  # acknowledged already
    assert answer.code == ExceptionType.ILLEGAL_STATE and answer.message.startswith("AMQ229027: ")
    assert ack(client, ids[3], rr=False) == [] and queue.message_count == 0


def test_closing_a_consumer_gives_back_what_it_did_not_acknowledge_not_counted_as_delivered():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    for i in range(3):
        send(client, b"m%d" % i)
    ids = [x.headers.message_id for x in deliveries(consume(client))]
    ack(client, ids[0], rr=False)
    assert client.send(p.SessConsumerClose(0, channel_id=CH)) == [NULL]
    got = deliveries(consume(client, consumer=1))
    assert [(x.body, x.delivery_count) for x in got] == [(b"m1", 1), (b"m2", 1)]


def test_a_lost_connection_s_deliveries_come_back_counted():
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    send(client, b"once")
    assert deliveries(consume(client))
    client.lose()
    other = CoreClient(broker)
    other.open()
    (got,) = deliveries(consume(other))
    assert (got.body, got.delivery_count) == (b"once", 2)


def test_pre_acknowledge_needs_no_acks():
    broker = Broker()
    client = CoreClient(broker)
    client.open(pre_ack=True)
    create_queue(client)
    send(client)
    assert deliveries(consume(client))
    assert broker.server.find_queue("q").message_count == 0


# -- local transactions ------------------------------------------------------------------------------


def test_transacted_sends_are_routed_at_commit_and_dropped_at_rollback(tmp_path):
    node = JournalNode(tmp_path)
    client = CoreClient(node)
    client.open(auto_commit_sends=False, auto_commit_acks=False)
    create_queue(client)
    queue = node.server.find_queue("q")
    assert send(client, b"a", durable=True, rr=True, correlation=-1) == [NULL]  # in the transaction: at once
    assert queue.message_count == 0
    got = client.send(p.SessCommit(-2, channel_id=CH), run=False)
    assert got == [] and queue.message_count == 0
    node.run()
    assert client.take() == [p.NullResponse(-2, channel_id=CH)] and queue.message_count == 1
    send(client, b"b", durable=True)
    assert client.send(p.SessRollback(False, channel_id=CH)) == [NULL]
    node.run()
    assert queue.message_count == 1


def test_transacted_acks_commit_and_roll_back():
    broker = Broker()
    client = CoreClient(broker)
    client.open(auto_commit_acks=False)
    create_queue(client)
    for i in range(3):
        send(client, b"m%d" % i)
    queue = broker.server.find_queue("q")
    got = deliveries(consume(client))
    ack(client, got[0].headers.message_id, rr=False)
    assert queue.message_count == 3
    client.send(p.SessCommit(-1, channel_id=CH))
    assert queue.message_count == 2
    ack(client, got[1].headers.message_id, rr=False)
    # rollback: what was acknowledged comes back counted, what was only buffered not, in order
    client.send(p.SessStop(channel_id=CH))
    client.send(p.SessRollback(False, channel_id=CH))
    again = deliveries(client.send(p.SessStart(channel_id=CH)))
    assert [(x.body, x.delivery_count) for x in again] == [(b"m1", 2), (b"m2", 1)]


def test_acks_of_a_consumer_closed_inside_a_transaction_commit_with_it():
    broker = Broker()
    client = CoreClient(broker)
    client.open(auto_commit_acks=False)
    create_queue(client)
    send(client, b"m0")
    send(client, b"m1")
    got = deliveries(consume(client))
    ack(client, got[0].headers.message_id, rr=False)
    client.send(p.SessConsumerClose(0, channel_id=CH))
    queue = broker.server.find_queue("q")
    assert queue.message_count == 2
    client.send(p.SessCommit(-1, channel_id=CH))
    assert queue.message_count == 1  # m0 acknowledged, m1 given back
    assert [x.body for x in deliveries(consume(client, consumer=1))] == [b"m1"]


@pytest.mark.parametrize("rr", [True, False])
def test_an_ack_naming_another_consumer_is_refused(rr):
    broker = Broker()
    client = CoreClient(broker)
    client.open()
    got = client.send(p.SessAcknowledge(42, 1, rr, channel_id=CH))
    if rr:
        assert got[0].code == ExceptionType.ILLEGAL_STATE and "Consumer 42" in got[0].message
    else:
        assert got == [] and not client.closed
