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

import threading

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
        extra_acceptors_xml=f'<acceptor name="core">tcp://{harness.LOOPBACK}:{port}?protocols=CORE</acceptor>',
    )
    node.core_port = port
    return node


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
    node.kill9()
    node.start()
    try:
        results = jms.run(
            [peer.connect(target), {"op": "receive", "queue": "kept", "count": 1, "digest": True}]
        )
        (msg,) = results[1]["messages"]
        assert (msg["size"], msg["sha256"]) == (size, sha256(pattern(size)))
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
