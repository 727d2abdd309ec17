"""A Junction node serving OpenWire, driven by the real ActiveMQ Classic client (5.17).

The client runs scenarios of ``tests/java/openwire/OpenWireScenario.java`` (Debian's client:
:mod:`tests.classic.client` documents the commands); each test starts a real node
(``junction run``) with a ``protocols=OPENWIRE`` acceptor and security on.  Raw-socket cases
send bytes no real client sends (bad input).
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import sys
import time

import pytest

from junction.protocols.openwire.codec import Negotiated, OpenWireCodec
from junction.protocols.openwire.commands import (
    BrokerInfo,
    ConnectionInfo,
    ConsumerControl,
    ConsumerInfo,
    ExceptionResponse,
    KeepAliveInfo,
    ProducerInfo,
    Response,
    SessionInfo,
)
from junction.protocols.openwire.messages import MessageDispatch
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ConnectionId,
    ConsumerId,
    ProducerId,
    SessionId,
)
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT, WireFormat
from tests.harness import free_port, wait_for

USERS = {"app": ("app-secret", "app")}
#: the client of these tests: Debian's 5.17 (test_openwire_node_peers.py runs both)
CLIENT = "5.17"


@pytest.fixture
def ow(openwire_clients, tmp_path):
    client = openwire_clients(CLIENT, tmp_path / "openwire")
    yield client
    client.close()


@pytest.fixture
def node(broker_factory):
    port, multi = free_port(), free_port()
    broker = broker_factory(
        "ow-node", security=True, users=USERS,
        address_settings_xml='<address-setting match="#"><dead-letter-address>DLQ</dead-letter-address>'
                             '<max-delivery-attempts>100</max-delivery-attempts></address-setting>',
        extra_acceptors_xml=f'<acceptor name="openwire">tcp://127.0.0.1:{port}?protocols=OPENWIRE</acceptor>'
                            f'<acceptor name="multi">tcp://127.0.0.1:{multi}</acceptor>',
    ).start()
    broker.ow_port, broker.multi_port = port, multi
    return broker


def connect(node, client_id=None, *, options="", password="app-secret", port=None) -> dict:
    """The scenario's connect command to the node's OpenWire acceptor (``options``: a URL query)."""
    url = f"tcp://127.0.0.1:{port or node.ow_port}{options}"
    command = {"op": "connect", "url": url, "user": "app", "password": password}
    if client_id is not None:
        command["clientId"] = client_id
    return command


def bodies(result: dict) -> list:
    return [m["body"] for m in result["messages"]]


def refusal(results: list) -> tuple[str, str]:
    """The failed last command's exception class and message."""
    assert results[-1]["ok"] is False, results
    error = results[-1]["error"]
    return error["class"], error["message"]


def test_login_is_checked_with_artemis_refusal(ow, node):
    assert ow.run([connect(node), {"op": "close"}])[0]["ok"]
    cls, message = refusal(ow.run([connect(node, password="wrong")], check=False))
    assert cls == "javax.jms.JMSSecurityException"
    assert message.startswith("AMQ229031: Unable to validate user from 127.0.0.1:")
    assert "Username: app;" in message


def test_an_acceptor_without_protocols_sniffs_openwire_beside_the_others(ow, node):
    queue_scenario(ow, node, port=node.multi_port)
    got = _stomp(node.multi_port, until=b"CONNECTED")
    assert got.startswith(b"CONNECTED")


def test_a_client_id_in_use_is_refused_then_reusable(ow, node):
    holder = ow.start([connect(node, "cid-dup"), {"op": "receive", "queue": "ow.release", "timeout": 30000},
                       {"op": "close"}])  # fmt: skip
    wait_for(lambda: holder.results, 30, what="the first connection with the client id")
    assert holder.results[0]["ok"], holder.results
    cls, message = refusal(ow.run([connect(node, "cid-dup")], check=False))
    assert (cls, message) == ("javax.jms.InvalidClientIDException", "AMQ229004: Client ID cid-dup is already in use")
    ow.run([connect(node, "cid-release"), {"op": "send", "queue": "ow.release", "body": "go"}])
    assert bodies(holder.wait()[1]) == ["go"]  # and then it closed, synchronously
    assert ow.run([connect(node, "cid-dup"), {"op": "close"}])[0]["clientId"] == "cid-dup"


def queue_scenario(ow, node, port=None) -> None:
    text = "hello {i} \u00e9\U0001f600"
    results = ow.run([
        connect(node, "cid-q", port=port),
        {"op": "send", "queue": "ow.q1", "body": text, "count": 20, "indexProperty": "i",
         "properties": {"k": "v", "l": {"long": 1 << 40}}},
        {"op": "send", "queue": "ow.q1", "type": "bytes", "body": "AQID"},
        {"op": "receive", "queue": "ow.q1", "count": 21},
        {"op": "receive", "queue": "ow.q1", "timeout": 300},
    ])  # fmt: skip
    got = results[3]["messages"]
    assert [m["body"] for m in got[:20]] == [text.replace("{i}", str(i)) for i in range(20)]
    assert [{k: m["properties"].get(k) for k in ("k", "l", "i")} for m in got[:20]] == [
        {"k": "v", "l": {"long": 1 << 40}, "i": {"long": i}} for i in range(20)
    ]  # the properties sent (the node adds its own: __AMQ_CID, JMSXUserID)
    assert len({m["id"] for m in got}) == 21
    assert (got[20]["type"], got[20]["body"]) == ("bytes", "AQID")
    assert results[4]["messages"] == []  # the queue is empty


def test_queue_send_and_consume_with_properties_and_unique_ids(ow, node):
    queue_scenario(ow, node)


def test_local_transactions_commit_and_rollback(ow, node):
    results = ow.run([
        connect(node, "cid-tx"),
        {"op": "session", "transacted": True},
        {"op": "send", "queue": "ow.tx", "body": "rolled back"},
        {"op": "rollback"},
        {"op": "send", "queue": "ow.tx", "body": "committed"},
        {"op": "commit"},
        {"op": "consumer", "id": "c", "queue": "ow.tx"},
        {"op": "receive", "consumer": "c"},
        {"op": "rollback"},
        {"op": "receive", "consumer": "c"},
        {"op": "commit"},
        {"op": "receive", "consumer": "c", "timeout": 300},
        connect(node, "cid-tx-after"),
        {"op": "receive", "queue": "ow.tx", "timeout": 500},
    ])  # fmt: skip
    first, again = results[7]["messages"], results[9]["messages"]
    assert [(m["body"], m["redelivered"]) for m in first + again] == [("committed", False), ("committed", True)]
    assert results[11]["messages"] == []  # acked by the commit
    assert results[13]["messages"] == []  # the redelivered one was acked for good


def test_topic_subscribers_and_a_durable_subscription(ow, node):
    results = ow.run([
        connect(node, "cid-t"),
        {"op": "consumer", "id": "plain", "topic": "ow.t1"},
        {"op": "consumer", "id": "durable", "topic": "ow.t1", "durable": "sub1"},
        {"op": "send", "topic": "ow.t1", "body": "to all"},
        {"op": "receive", "consumer": "plain"},
        {"op": "receive", "consumer": "durable"},
        {"op": "close_consumer", "id": "durable"},
        {"op": "send", "topic": "ow.t1", "body": "kept"},
        {"op": "receive", "topic": "ow.t1", "durable": "sub1"},
        {"op": "unsubscribe", "name": "sub1"},
    ])  # fmt: skip
    assert bodies(results[4]) == bodies(results[5]) == ["to all"]  # both subscribers
    assert bodies(results[8]) == ["kept"]  # the durable subscription kept a message


def test_prefetch_zero_pulls(ow, node):
    results = ow.run([
        connect(node, "cid-pull"),
        {"op": "session", "ack": "client"},
        {"op": "consumer", "id": "p", "queue": "ow.pull?consumer.prefetchSize=0"},
        {"op": "receive", "consumer": "p", "timeout": 0},
        {"op": "receive", "consumer": "p", "timeout": 200},
        {"op": "send", "queue": "ow.pull", "body": "pulled"},
        {"op": "receive", "consumer": "p"},
        {"op": "acknowledge"},
    ])  # fmt: skip
    assert results[3]["messages"] == results[4]["messages"] == []  # nothing yet, nor within a timeout
    assert bodies(results[6]) == ["pulled"]


def test_browsers_show_without_taking(ow, node):
    results = ow.run([
        connect(node, "cid-browse"),
        {"op": "send", "queue": "ow.browse", "body": "b{i}", "count": 5, "indexProperty": "n"},
        {"op": "browse", "queue": "ow.browse"},
        {"op": "browse", "queue": "ow.browse", "selector": "n = 1 OR n = 3"},
        {"op": "receive", "queue": "ow.browse", "count": 6, "timeout": 1000},
    ])  # fmt: skip
    assert bodies(results[2]) == [f"b{i}" for i in range(5)]
    assert bodies(results[3]) == ["b1", "b3"]
    assert bodies(results[4]) == [f"b{i}" for i in range(5)]


def test_the_client_poison_ack_dead_letters_after_its_redeliveries(ow, node):
    # the client redelivers from its own buffer 6 times (maximumRedeliveries), then POISON
    redeliveries = [c for _ in range(7) for c in ({"op": "receive", "consumer": "c", "timeout": 2000}, {"op": "rollback"})]
    results = ow.run([
        connect(node, "cid-poison", options="?jms.redeliveryPolicy.initialRedeliveryDelay=0"),
        {"op": "session", "transacted": True},
        {"op": "send", "queue": "ow.poison", "body": "bad"},
        {"op": "commit"},
        {"op": "consumer", "id": "c", "queue": "ow.poison"},
        *redeliveries,
        {"op": "receive", "consumer": "c", "timeout": 2000},
        {"op": "close_consumer", "id": "c"},
        {"op": "receive", "queue": "DLQ"},
        {"op": "commit"},
    ])  # fmt: skip
    deliveries = [m for r in results[5:19:2] for m in r["messages"]]
    assert [(m["body"], m["deliveryCount"]) for m in deliveries] == [("bad", {"int": n}) for n in range(1, 8)]
    assert results[19]["messages"] == []  # no eighth delivery
    assert bodies(results[21]) == ["bad"]  # dead-lettered


def test_every_jms_body_type_group_fields_and_compression(ow, node):
    big = "compressible " * 2000
    entries = {"i": {"int": 7}, "l": {"long": 1 << 40}, "s": "text", "b": True, "h": {"short": 3},
               "y": {"byte": 2}, "d": {"double": 1.5}, "f": {"float": 2.5}, "c": {"char": "x"},
               "a": {"bytes": "CQg="}}  # fmt: skip
    stream = [{"int": 1}, "two", False, {"long": 4}]
    results = ow.run([
        connect(node, "cid-bodies", options="?jms.useCompression=true"),
        {"op": "send", "queue": "ow.bodies", "type": "map", "body": entries,
         "properties": {"JMSXGroupID": "g1", "JMSXGroupSeq": {"int": 3}}},
        {"op": "send", "queue": "ow.bodies", "type": "stream", "body": stream},
        {"op": "send", "queue": "ow.bodies", "type": "object", "body": "a serialized object"},
        {"op": "send", "queue": "ow.bodies", "body": big},
        {"op": "send", "queue": "ow.bodies", "type": "message"},
        {"op": "receive", "queue": "ow.bodies", "count": 5},
    ])  # fmt: skip
    got = results[6]["messages"]
    assert [m["type"] for m in got] == ["map", "stream", "object", "text", "message"]
    assert got[0]["body"] == entries
    assert (got[0]["groupId"], got[0]["properties"]["JMSXGroupSeq"]) == ("g1", {"int": 3})
    assert got[1]["body"] == stream
    assert got[2]["body"] == "a serialized object"  # java.lang: trusted by the client's default
    assert got[3]["body"] == big  # compressed by the client, inflated by the node


def test_producer_window_is_opened_by_producer_acks(ow, node):
    # a producer window: without the broker's ProducerAcks the 3rd async send blocks for ever
    results = ow.run([
        connect(node, "cid-window", options="?jms.producerWindowSize=2048"),
        {"op": "send", "queue": "ow.window", "body": "w{i}", "count": 50, "persistent": False},
        {"op": "receive", "queue": "ow.window", "count": 51, "timeout": 1000, "brief": True},
    ])  # fmt: skip
    assert bodies(results[2]) == [f"w{i}" for i in range(50)]


def test_keep_alives_hold_an_idle_connection(ow, node):
    # the client fails a connection that hears nothing for 1 s: the broker's keep-alives keep it
    run = ow.start([
        connect(node, "cid-keepalive",
                options="?wireFormat.maxInactivityDuration=1000&wireFormat.maxInactivityDurationInitalDelay=500"),
        {"op": "receive", "queue": "ow.keepalive.idle", "timeout": 3500},  # the idle period under test
        {"op": "send", "queue": "ow.keepalive", "body": "alive"},
    ])  # fmt: skip
    results = run.wait()
    assert results[1]["messages"] == [] and results[2]["sent"] == 1
    assert not [e for e in run.events if e["event"] in ("exception", "interrupted")], run.events


def test_selectors_no_local_and_temporary_queues(ow, node):
    colors = ("blue", "red", "green", "red")
    first = ow.start([
        connect(node, "cid-sel"),
        {"op": "consumer", "id": "red", "queue": "ow.sel", "selector": "color = 'red'"},
        *({"op": "send", "queue": "ow.sel", "body": c, "properties": {"color": c}} for c in colors),
        {"op": "receive", "consumer": "red", "count": 3, "timeout": 1000},
        {"op": "close_consumer", "id": "red"},
        {"op": "consumer", "id": "local", "topic": "ow.nolocal", "noLocal": True},
        {"op": "send", "topic": "ow.nolocal", "body": "mine"},
        {"op": "receive", "consumer": "local", "timeout": 500},
        {"op": "receive", "consumer": "local", "timeout": 20000},
        {"op": "temp_queue", "id": "t"},
        {"op": "send", "queue": "ow.requests", "body": "ask", "replyToTemp": "t"},
        {"op": "receive", "temp": "t", "timeout": 20000},
    ])  # fmt: skip
    wait_for(lambda: len(first.results) >= 11, 30, what="the noLocal subscriber waiting for another's message")
    ow.run([
        connect(node, "cid-sel-other"),
        {"op": "send", "topic": "ow.nolocal", "body": "theirs"},
        {"op": "serve", "queue": "ow.requests", "timeout": 20000},  # replies on the temporary queue
    ])  # fmt: skip
    results = first.wait()
    assert [(m["body"], m["properties"]["color"]) for m in results[6]["messages"]] == [("red", "red")] * 2
    assert results[10]["messages"] == []  # noLocal: not our own
    assert bodies(results[11]) == ["theirs"]  # noLocal: another connection's
    assert bodies(results[14]) == ["re: ask"]  # the temporary queue, written by the other connection


def _stomp(port: int, *frames: bytes, until: bytes, deadline: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=deadline) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nlogin:app\npasscode:app-secret\n\n\0")
        for frame in frames:
            sock.sendall(frame)
        got = b""
        while until not in got:
            data = sock.recv(65536)
            if not data:
                break
            got += data
        return got


def test_stomp_reads_what_openwire_sent_and_back(ow, node):
    ow.run([connect(node, "cid-cross"), {"op": "send", "queue": "ow.to.stomp", "body": "from openwire \u00e9",
                                         "properties": {"color": "red"}, "correlationId": "corr-1"}])
    got = _stomp(node.stomp_port, b"SUBSCRIBE\nid:1\ndestination:ow.to.stomp\nack:auto\n\n\0",
                 until="from openwire \u00e9".encode())
    assert b"MESSAGE\n" in got and b"color:red" in got and b"correlation-id:corr-1" in got
    _stomp(node.stomp_port, b"SEND\ndestination:ow.from.stomp\ndestination-type:ANYCAST\ncolor:blue\nreceipt:r1\n\nhello stomp\0",
           until=b"RECEIPT")
    [m] = ow.run([connect(node, "cid-cross2"), {"op": "receive", "queue": "ow.from.stomp"}])[1]["messages"]
    assert (m["type"], m["body"], m["properties"]["color"]) == ("text", "hello stomp", "blue")


def _read_until(sock, codec, kind, deadline=5.0):
    sock.settimeout(deadline)
    while True:
        data = sock.recv(65536)
        if not data:
            return None
        for event in codec.receive_data(data):
            if isinstance(event, kind):
                return event


def test_out_of_order_commands_are_answered_and_bad_bytes_close_only_that_connection(node):
    codec = OpenWireCodec(SERVER_WIRE_FORMAT)
    with socket.create_connection(("127.0.0.1", node.ow_port), timeout=5) as bad, \
            socket.create_connection(("127.0.0.1", node.ow_port), timeout=5) as good:
        good.sendall(codec.initiate())
        assert _read_until(good, codec, Negotiated) is not None
        # a SessionInfo before any ConnectionInfo: an ExceptionResponse, then the connection closes
        good.sendall(codec.send(SessionInfo(command_id=1, response_required=True, session_id=SessionId("ID:x", 1))))
        answer = _read_until(good, codec, ExceptionResponse)
        assert answer is not None and answer.correlation_id == 1
        assert answer.exception.class_name == "java.lang.IllegalStateException"
        bad.sendall(struct.pack(">I", 5) + b"\x01garbage-not-a-wireformat")
        bad.settimeout(5)
        while bad.recv(65536):
            pass
    codec = OpenWireCodec(SERVER_WIRE_FORMAT)
    with socket.create_connection(("127.0.0.1", node.ow_port), timeout=5) as again:
        again.sendall(codec.initiate())
        assert _read_until(again, codec, Negotiated) is not None
        again.sendall(codec.send(ConnectionInfo(command_id=1, response_required=True,
                                                connection_id=ConnectionId("ID:raw-1"), client_id="raw",
                                                user_name="app", password="app-secret")))
        answer = _read_until(again, codec, Response)
        assert answer is not None and not isinstance(answer, ExceptionResponse) and answer.correlation_id == 1


def test_a_client_asking_for_the_marshalling_cache_gets_it(node):
    """The real client offers the cache (1,024 slots); the node's offer has it, as Classic's
    broker's does, and what the client sends after reads through it."""
    codec = OpenWireCodec(WireFormat(cache_enabled=True))
    with socket.create_connection(("127.0.0.1", node.ow_port), timeout=5) as sock:
        sock.sendall(codec.initiate())
        negotiated = _read_until(sock, codec, Negotiated)
        assert negotiated.peer.cache_enabled and negotiated.settled.cache_slots == 1024
        connection = ConnectionId("ID:cached-1")
        sock.sendall(codec.send(ConnectionInfo(command_id=1, response_required=True, connection_id=connection,
                                               client_id="cached", user_name="app", password="app-secret")))
        answer = _read_until(sock, codec, Response)
        assert answer is not None and not isinstance(answer, ExceptionResponse)
        sock.sendall(codec.send(SessionInfo(command_id=2, session_id=SessionId(connection.value, 1))))
        # two producers on one queue: the second names it by its slot in the cache only
        queue = ActiveMQQueue("cached-queue")
        for n in (3, 4):
            sent = codec.send(ProducerInfo(command_id=n, response_required=True,
                                           producer_id=ProducerId(connection.value, n, 1), destination=queue))
            assert (b"cached-queue" in sent) == (n == 3)
            sock.sendall(sent)
            answer = _read_until(sock, codec, Response)
            assert answer is not None and not isinstance(answer, ExceptionResponse) and answer.correlation_id == n


def _open(port: int, connection: str, client_id: str, *, failover: bool = False):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    codec = OpenWireCodec(SERVER_WIRE_FORMAT)
    sock.sendall(codec.initiate())
    assert _read_until(sock, codec, Negotiated) is not None
    sock.sendall(codec.send(ConnectionInfo(command_id=1, response_required=True, connection_id=ConnectionId(connection),
                                           client_id=client_id, user_name="app", password="app-secret",
                                           failover_reconnect=failover)))
    return sock, codec, _read_until(sock, codec, Response)


def test_refused_commands_keep_the_connection_and_failover_takes_a_client_id_over(node):
    first, codec, answer = _open(node.ow_port, "ID:raw-a", "shared")
    assert answer.correlation_id == 1 and not isinstance(answer, ExceptionResponse)
    # a producer of a session never registered: refused, the connection stays
    first.sendall(codec.send(ProducerInfo(command_id=2, response_required=True,
                                          producer_id=ProducerId("ID:raw-a", 1, 9))))
    refused = _read_until(first, codec, ExceptionResponse)
    assert refused.correlation_id == 2 and refused.exception.class_name == "java.lang.IllegalStateException"
    first.sendall(codec.send(SessionInfo(command_id=3, response_required=True, session_id=SessionId("ID:raw-a", 9))))
    assert _read_until(first, codec, Response).correlation_id == 3
    # the same client id: refused, unless the client comes back after a failover
    second, _codec2, answer = _open(node.ow_port, "ID:raw-b", "shared")
    assert isinstance(answer, ExceptionResponse) and answer.exception.class_name == "javax.jms.InvalidClientIDException"
    second.close()
    third, _codec3, answer = _open(node.ow_port, "ID:raw-c", "shared", failover=True)
    assert not isinstance(answer, ExceptionResponse)
    first.settimeout(5)
    while first.recv(65536):  # the old connection is ended
        pass
    first.close()
    third.close()


def test_a_command_only_a_broker_sends_ends_only_that_connection(node):
    bad, codec, _ = _open(node.ow_port, "ID:raw-bad", "bad")
    good, good_codec, _ = _open(node.ow_port, "ID:raw-good", "good")
    bad.sendall(codec.send(BrokerInfo(command_id=2, response_required=True)))
    answer = _read_until(bad, codec, ExceptionResponse)
    assert answer.correlation_id == 2 and "only a broker sends" in answer.exception.message
    assert _read_until(bad, codec, Response) is None  # closed after the answer
    good.sendall(good_codec.send(SessionInfo(command_id=2, response_required=True,
                                             session_id=SessionId("ID:raw-good", 1))))
    assert _read_until(good, good_codec, Response).correlation_id == 2
    bad.close()
    good.close()


def _dispatches(sock, codec, until, deadline: float = 5.0) -> list:
    """The MessageDispatches read before a command of type ``until``."""
    got = []
    sock.settimeout(deadline)
    while True:
        data = sock.recv(65536)
        if not data:
            return got
        for event in codec.receive_data(data):
            if isinstance(event, until):
                return got
            if isinstance(event, MessageDispatch):
                got.append(event)


def test_a_consumer_control_from_the_client_restores_its_prefetch(node):
    """What the failover transport does after a reconnect: it re-creates a consumer with a
    prefetch of 0, then sends a ConsumerControl with the real prefetch; the consumer is then
    fed up to that window, less what it holds unacknowledged (before, the node took the
    command for a broker's and closed)."""
    _stomp(node.stomp_port, *(b"SEND\ndestination:ow.control\ndestination-type:ANYCAST\n\nm%d\0" % i
                               for i in range(3)),
           b"SEND\ndestination:ow.control\ndestination-type:ANYCAST\nreceipt:r\n\nm3\0", until=b"RECEIPT")
    sock, codec, _ = _open(node.ow_port, "ID:raw-cc", "cc")
    with sock:
        sock.sendall(codec.send(SessionInfo(command_id=2, response_required=True, session_id=SessionId("ID:raw-cc", 1))))
        assert _read_until(sock, codec, Response).correlation_id == 2
        consumer = ConsumerId("ID:raw-cc", 1, 1)
        sock.sendall(codec.send(ConsumerInfo(command_id=3, response_required=True, consumer_id=consumer,
                                             destination=ActiveMQQueue("ow.control"), prefetch_size=0)))
        answer = _read_until(sock, codec, Response)
        assert answer.correlation_id == 3 and not isinstance(answer, ExceptionResponse)
        # a keep-alive's echo comes after what the node dispatched for the command before it,
        # even when both come in one read: sent together
        sock.sendall(codec.send(ConsumerControl(command_id=4, consumer_id=consumer, prefetch=2,
                                                destination=ActiveMQQueue("ow.control")))
                     + codec.send(KeepAliveInfo(command_id=5, response_required=True)))
        got = _dispatches(sock, codec, until=KeepAliveInfo)
        assert [d.message.content[-2:] for d in got] == [b"m0", b"m1"]  # the window: two, unacknowledged
        assert all(d.consumer_id == consumer for d in got)
        # a window of three counts the two still unacknowledged: one more
        sock.sendall(codec.send(ConsumerControl(command_id=6, consumer_id=consumer, prefetch=3))
                     + codec.send(KeepAliveInfo(command_id=7, response_required=True)))
        assert [d.message.content[-2:] for d in _dispatches(sock, codec, until=KeepAliveInfo)] == [b"m2"]


def test_a_silent_connection_is_closed_after_the_inactivity_duration(node):
    offer = dataclasses.replace(SERVER_WIRE_FORMAT, max_inactivity=500, max_inactivity_initial_delay=100)
    codec = OpenWireCodec(offer)
    with socket.create_connection(("127.0.0.1", node.ow_port), timeout=5) as sock:
        sock.sendall(codec.initiate())
        assert _read_until(sock, codec, Negotiated) is not None
        started = time.monotonic()
        keep_alives = 0
        sock.settimeout(5)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            keep_alives += sum(isinstance(e, KeepAliveInfo) for e in codec.receive_data(data))
        assert 0.4 < time.monotonic() - started < 3
        assert keep_alives >= 1  # written after half the duration in silence


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
