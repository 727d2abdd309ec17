"""A Junction node serving OpenWire, driven by the real ActiveMQ Classic client (5.17).

``tests/java/openwire/OwNodeCheck.java`` runs one named check per call with the
Debian client jar and prints ``OK <check> ...``; each test starts a real node
(``junction run``) with a ``protocols=OPENWIRE`` acceptor and security on.
Raw-socket cases send bytes no real client sends (bad input).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import struct
import subprocess
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
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT
from tests.harness import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "tests", "java", "openwire", "OwNodeCheck.java")
#: the Debian ActiveMQ Classic client (libactivemq-java) and what it needs
CLASSPATH = ":".join(f"/usr/share/java/{jar}" for jar in (
    "activemq-client.jar", "geronimo-jms_1.1_spec.jar", "hawtbuf.jar", "slf4j-api.jar",
    "geronimo-j2ee-management-1.1-spec.jar"))
USERS = {"app": ("app-secret", "app")}
TIMEOUT = 50


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    if shutil.which("javac") is None or not os.path.exists("/usr/share/java/activemq-client.jar"):
        pytest.fail("the ActiveMQ Classic client (libactivemq-java) and a JDK are needed")
    out = tmp_path_factory.mktemp("owcheck")
    subprocess.run(["javac", "-d", str(out), "-cp", CLASSPATH, SOURCE], check=True, timeout=TIMEOUT)
    return str(out)


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


def run(classes, node, check, user="app", password="app-secret") -> str:
    url = f"tcp://127.0.0.1:{node.ow_port}"
    done = subprocess.run(["java", "-cp", f"{CLASSPATH}:{classes}", "OwNodeCheck", url, user, password, check],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_login_is_checked_with_artemis_refusal(classes, node):
    assert run(classes, node, "login") == "OK login accepted"
    refused = run(classes, node, "login", password="wrong")
    assert refused.startswith("REFUSED javax.jms.JMSSecurityException AMQ229031: Unable to validate user from 127.0.0.1:")
    assert "Username: app;" in refused


def test_an_acceptor_without_protocols_sniffs_openwire_beside_the_others(classes, node):
    node.ow_port = node.multi_port
    assert run(classes, node, "queue") == "OK queue 20"
    got = _stomp(node.multi_port, until=b"CONNECTED")
    assert got.startswith(b"CONNECTED")


def test_a_client_id_in_use_is_refused_then_reusable(classes, node):
    assert run(classes, node, "clientid") == "OK clientid InvalidClientIDException reusable"


def test_queue_send_and_consume_with_properties_and_unique_ids(classes, node):
    assert run(classes, node, "queue") == "OK queue 20"


def test_local_transactions_commit_and_rollback(classes, node):
    assert run(classes, node, "transacted") == "OK transacted"


def test_topic_subscribers_and_a_durable_subscription(classes, node):
    assert run(classes, node, "topic") == "OK topic"


def test_prefetch_zero_pulls(classes, node):
    assert run(classes, node, "pull") == "OK pull"


def test_browsers_show_without_taking(classes, node):
    assert run(classes, node, "browse") == "OK browse 5 2 5"


def test_the_client_poison_ack_dead_letters_after_its_redeliveries(classes, node):
    # the client redelivers from its own buffer 6 times (maximumRedeliveries), then POISON
    assert run(classes, node, "poison") == "OK poison 7"


def test_every_jms_body_type_group_fields_and_compression(classes, node):
    assert run(classes, node, "bodies") == "OK bodies"


def test_producer_window_is_opened_by_producer_acks(classes, node):
    assert run(classes, node, "window") == "OK window 50"


def test_keep_alives_hold_an_idle_connection(classes, node):
    assert run(classes, node, "keepalive") == "OK keepalive"


def test_selectors_no_local_and_temporary_queues(classes, node):
    assert run(classes, node, "selectors") == "OK selectors 2"


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


def test_stomp_reads_what_openwire_sent_and_back(classes, node):
    assert run(classes, node, "produce-cross") == "OK produce-cross"
    got = _stomp(node.stomp_port, b"SUBSCRIBE\nid:1\ndestination:ow.to.stomp\nack:auto\n\n\0",
                 until="from openwire \u00e9".encode())
    assert b"MESSAGE\n" in got and b"color:red" in got and b"correlation-id:corr-1" in got
    _stomp(node.stomp_port, b"SEND\ndestination:ow.from.stomp\ndestination-type:ANYCAST\ncolor:blue\nreceipt:r1\n\nhello stomp\0",
           until=b"RECEIPT")
    assert run(classes, node, "consume-cross") == "OK consume-cross text:hello stomp blue"


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
