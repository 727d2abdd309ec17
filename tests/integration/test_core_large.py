"""Large CORE messages with the real Artemis JMS client, against a Junction node and real Artemis.

A 10 MiB bytes message goes in (SESS_SEND_LARGE + continuations) and out
(SESS_RECEIVE_LARGE_MSG + continuations) whole, compared by digest, while the
node's resident memory is sampled from ``/proc``: it must grow far less than
the message (the body is only ever on disk, a chunk at a time in memory).
The same scenario runs against real Artemis.  A confirmed durable large
message survives kill -9; a continuation with no large message begun gets an
EXCEPTION and ends only its own connection.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from junction.protocols.core import ExceptionType
from junction.protocols.core import packets as p
from junction.protocols.core.versions import CURRENT_VERSION
from tests import harness
from tests.artemis import JmsClient
from tests.artemis.jms import pattern, sha256
from tests.integration import test_artemis_peer as peer
from tests.integration.test_core_jms import USERS, _Target
from tests.integration.test_core_node import CH, RawCoreClient

pytestmark = pytest.mark.timeout(60)

#: the acceptance size
BIG = 10 * 1024 * 1024
#: how much the node's RSS may grow while it carries BIG (the body must never be whole in memory)
RSS_GROWTH_BOUND = 4 * 1024 * 1024
_LOGIN = {"user": peer.USER["user"], "password": peer.USER["password"]}


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class _Sampler:
    """The node's peak RSS, sampled every 5 ms on a thread until stopped."""

    def __init__(self, pid: int):
        self.pid = pid
        self.base = _rss(pid)
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


def _node(tmp_path) -> harness.BrokerProcess:
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path),
        name="core",
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port),
    )
    node.core_port = port
    return node


def _files(tmp_path) -> list:
    """The files in the node's large-messages directory (``core/data/large`` in the test layout)."""
    return sorted(os.listdir(tmp_path / "core" / "data" / "large"))


def scenario_10mib(target, jms: JmsClient, queue: str) -> list:
    """Send one 10 MiB bytes message and receive it by digest; the results."""
    return jms.run(
        [
            peer.connect(target),
            {"op": "send", "queue": queue, "type": "bytes", "size": BIG},
            {"op": "send", "queue": queue, "body": "after"},
            {"op": "receive", "queue": queue, "count": 2, "digest": True},
        ],
        timeout=50,
    )


def check_10mib(results: list) -> None:
    big, after = results[3]["messages"]
    assert (big["type"], big["size"], big["sha256"]) == ("bytes", BIG, sha256(pattern(BIG)))
    assert after["sha256"] == sha256(b"after")


def test_10_mib_in_and_out_with_memory_bounded(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        jms.run([peer.connect(_Target(node.core_port)), {"op": "send", "queue": "warm", "body": "x"}])
        sampler = _Sampler(node.pid)
        try:
            results = scenario_10mib(_Target(node.core_port), jms, "big")
        finally:
            growth = sampler.stop()
        check_10mib(results)
        # received and acknowledged: its file is gone from the large-messages directory
        harness.wait_for(lambda: _files(tmp_path) == [], 5, what="the large-messages directory empty")
        assert growth < RSS_GROWTH_BOUND, f"the node's RSS grew {growth} bytes carrying a {BIG}-byte message"
    finally:
        assert node.stop() == 0


def test_10_mib_against_artemis(artemis, jms: JmsClient):
    check_10mib(scenario_10mib(artemis, jms, "big"))


def test_confirmed_large_message_kept_across_kill_9(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    size = 300 * 1024
    target = _Target(node.core_port)
    jms.run([peer.connect(target), {"op": "send", "queue": "kept", "type": "bytes", "size": size}])
    assert len(_files(tmp_path)) == 1
    node.kill9()
    node.start()
    try:
        results = jms.run(
            [peer.connect(target), {"op": "receive", "queue": "kept", "count": 1, "digest": True}]
        )
        (msg,) = results[1]["messages"]
        assert (msg["size"], msg["sha256"]) == (size, sha256(pattern(size)))
        harness.wait_for(lambda: _files(tmp_path) == [], 5, what="the large-messages directory empty")
    finally:
        assert node.stop() == 0


def test_continuation_with_no_large_send_ends_only_its_connection(tmp_path):
    node = _node(tmp_path).start()
    try:
        good, bad = RawCoreClient(node.core_port), RawCoreClient(node.core_port)
        for client in (good, bad):
            assert client.open(**_LOGIN) == p.CreateSessionResponse(CURRENT_VERSION)
        (error,) = bad.request(p.SessSendContinuation(b"x", False, 1, True, 77, 0, channel_id=CH))
        assert isinstance(error, p.ExceptionMessage)
        assert (error.code, error.correlation_id) == (ExceptionType.ILLEGAL_STATE, 77)
        assert bad.closed_by_node()
        assert good.request(p.SessAddMetadata("k", "v", channel_id=CH)) == [p.NullResponse(-1, channel_id=CH)]
        good.close()
        bad.close()
    finally:
        assert node.stop() == 0


def _stomp_receive(address: tuple, destination: str) -> tuple[dict, bytes]:
    """One MESSAGE from ``destination`` over a plain STOMP 1.2 socket: its headers and body."""
    with socket.create_connection(address, timeout=10) as sock:
        user, password = peer.USER["user"], peer.USER["password"]
        sock.sendall(
            f"CONNECT\naccept-version:1.2\nhost:h\nlogin:{user}\npasscode:{password}\n\n\0".encode()
            + f"SUBSCRIBE\nid:0\ndestination:{destination}\nack:auto\n\n\0".encode()
        )
        data = b""
        deadline = time.monotonic() + 10
        while True:
            start = data.find(b"MESSAGE\n")
            if start >= 0:
                head_end = data.find(b"\n\n", start)
                if head_end >= 0:
                    lines = data[start:head_end].decode().split("\n")[1:]
                    headers = dict(line.split(":", 1) for line in lines)
                    length = int(headers["content-length"])
                    body_start = head_end + 2
                    if len(data) >= body_start + length:
                        return headers, data[body_start : body_start + length]
            assert time.monotonic() < deadline, f"no MESSAGE in {data[:300]!r}"
            chunk = sock.recv(1 << 20)
            assert chunk, f"STOMP connection closed: {data[:300]!r}"
            data += chunk


def test_large_message_read_by_a_stomp_consumer(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        size = 300 * 1024
        jms.run([peer.connect(_Target(node.core_port)), {"op": "send", "queue": "to-stomp", "type": "bytes", "size": size}])
        headers, body = _stomp_receive(node.stomp_address, "to-stomp")
        assert body == pattern(size)
        assert headers["_AMQ_LARGE_SIZE"] == str(size)
    finally:
        assert node.stop() == 0
