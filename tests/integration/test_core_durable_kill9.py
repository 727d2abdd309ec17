"""Acceptance: 10,000 durable blocking sends by the real Artemis JMS client, the broker killed
with ``kill -9`` in the middle of them, started again: every acknowledged send is received
exactly once, in order.

The JMS contract: a blocking persistent send returns once the broker has made the message
durable, so every send the client saw return (the ``progress`` count and the ``ids`` of the
send op) must be there after the crash.  The one send in flight when the broker died may or
may not have been written before its answer was lost: it may arrive once more than the
acknowledged ones, never twice and never in the wrong place.

One scenario function, run against the real Artemis broker (its harness kills it with
SIGKILL) and, unchanged, against a Junction node with a CORE acceptor: the differential.
"""

from __future__ import annotations

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.integration.test_artemis_peer import new_name

pytestmark = pytest.mark.timeout(60)

#: durable messages the client sends: never fewer than 10,000
SENDS = 10_000
#: the client reports every this many acknowledged sends
PROGRESS_EVERY = 100
#: the broker is killed once this many sends are acknowledged: mid-stream
KILL_AFTER = 2_000


def kill9_mid_stream(broker, jms: JmsClient) -> tuple[int, int]:
    """Send SENDS durable messages, SIGKILL ``broker`` after KILL_AFTER acknowledgements,
    start it again, and check that each acknowledged message comes back once, in order.
    ``broker`` has ``url``, ``kill9()`` and ``start()``.  Returns (acknowledged, received)."""
    queue = new_name("durable.kill9")
    run = jms.start(
        [
            {"op": "connect", "url": broker.url},
            {"op": "send", "queue": queue, "body": "m{i}", "count": SENDS, "progress": PROGRESS_EVERY},
        ]
    )
    run.wait_event(lambda e: e.get("sent", 0) >= KILL_AFTER, timeout=40)
    broker.kill9()
    results = run.wait(check=False)
    assert results[-1]["ok"] is False  # the connection died under the sends
    acknowledged, sent_ids = results[-1]["sent"], results[-1]["ids"]
    assert KILL_AFTER <= acknowledged < SENDS and len(sent_ids) == acknowledged

    broker.start()
    got = jms.run(
        [
            {"op": "connect", "url": broker.url},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": SENDS + 1, "until": "marker"},
        ]
    )[2]["messages"]
    assert got[-1]["body"] == "marker"
    received = got[:-1]
    # each acknowledged send, once, in order, with its body
    assert [m["id"] for m in received[:acknowledged]] == sent_ids
    assert [m["body"] for m in received[:acknowledged]] == [f"m{i}" for i in range(acknowledged)]
    # at most the one in flight at the kill, written before its answer was lost
    extra = received[acknowledged:]
    assert len(extra) in (0, 1)
    assert [m["body"] for m in extra] in ([], [f"m{acknowledged}"])
    return acknowledged, len(received)


def test_artemis_keeps_every_acknowledged_send_across_kill9(artemis_factory, jms: JmsClient):
    broker = artemis_factory("crashy", anonymous=True).start()
    kill9_mid_stream(broker, jms)
    assert broker.starts == 2


class _CoreNode:
    """A Junction node with a CORE acceptor, as the scenario sees a broker."""

    def __init__(self, tmp_path):
        port = harness.free_port()
        self.url = f"tcp://{harness.LOOPBACK}:{port}"
        self.process = harness.BrokerProcess(
            str(tmp_path),
            name="crashy",
            extra_acceptors_xml=harness.core_acceptor(port),
        )

    def start(self):
        self.process.start()
        return self

    def kill9(self):
        return self.process.kill9()


def test_junction_keeps_every_acknowledged_send_across_kill9(tmp_path, jms: JmsClient):
    node = _CoreNode(tmp_path).start()
    try:
        kill9_mid_stream(node, jms)
        assert node.process.starts == 2
    finally:
        code = node.process.stop()
    assert code == 0, f"the node exited with {code}"
