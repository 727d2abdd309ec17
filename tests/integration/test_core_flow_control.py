"""Acceptance: producer flow control with a full address, the real Artemis JMS client against
the real Artemis broker and, unchanged, against a Junction node (the differential).

``max-size-bytes`` bounds what an address holds; ``address-full-policy`` says what a
producer meets beyond it:

- BLOCK: the producer's blocking sends are held (the broker withholds producer credits)
  until a consumer drains the address, and then they complete, every one, in order;
- FAIL: a send to the full address fails, with the error the client shows for Artemis's
  answer (class, error code, message).
"""

from __future__ import annotations

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.integration.test_artemis_peer import new_name

pytestmark = pytest.mark.timeout(60)

#: what an address under test holds at most, in bytes
MAX_SIZE_BYTES = 10 * 1024
#: the body of each message sent, in bytes
BODY_SIZE = 1024
#: messages sent: several times the client's producer window (64 KiB) past the address's size
SENDS = 300
#: the address settings, Artemis's vocabulary: ``{match: {element: value}}``
SETTINGS = {
    "flow.block.#": {"max-size-bytes": str(MAX_SIZE_BYTES), "address-full-policy": "BLOCK"},
    "flow.fail.#": {"max-size-bytes": str(MAX_SIZE_BYTES), "address-full-policy": "FAIL"},
}
#: seconds a held send is watched, to show it stays held (a bounded negative observation)
HELD_FOR_S = 2.0


def connect(broker) -> dict:
    return {"op": "connect", "url": broker.url}


def block_holds_sends_until_drained(broker, jms: JmsClient) -> int:
    """BLOCK: the sends stop short of SENDS while nobody consumes; a consumer drains the
    address, the held sends complete, and every message arrives once, in order.  Returns how
    many sends were acknowledged before the consumer came."""
    queue = new_name("flow.block")
    sender = jms.start(
        [connect(broker), {"op": "send", "queue": queue, "size": BODY_SIZE, "count": SENDS, "progress": 5}]
    )
    sender.wait_event(lambda e: e.get("sent", 0) >= 5, timeout=30)
    held = _held(sender)
    assert held < SENDS, "the sends were not held by the full address"
    got = jms.run([connect(broker), {"op": "receive", "queue": queue, "count": SENDS, "digest": True}])[1]
    results = sender.wait()
    assert results[1]["sent"] == SENDS
    assert [m["id"] for m in got["messages"]] == results[1]["ids"]  # every one, once, in order
    return held


def _held(run) -> int:
    """Watch ``run`` for HELD_FOR_S: its send op must not finish (a bounded negative
    observation: the wait must time out); how many sends it had done."""
    with pytest.raises(TimeoutError):
        harness.wait_for(lambda: len(run.results) > 1 or run.proc.poll() is not None, HELD_FOR_S, interval=0.05)
    return max(e.get("sent", 0) for e in run.events)


def fail_refuses_sends(broker, jms: JmsClient) -> dict:
    """FAIL: sends go through until the address is full, then one fails; its error."""
    queue = new_name("flow.fail")
    results = jms.run(
        [connect(broker), {"op": "send", "queue": queue, "size": BODY_SIZE, "count": SENDS}], check=False
    )
    failed = results[-1]
    assert failed["ok"] is False
    assert 0 < failed["sent"] < SENDS
    return failed


def test_artemis_block(artemis_factory, jms: JmsClient):
    broker = artemis_factory("flow", anonymous=True, address_settings=SETTINGS).start()
    assert block_holds_sends_until_drained(broker, jms) >= 5


def test_artemis_fail(artemis_factory, jms: JmsClient):
    broker = artemis_factory("flow", anonymous=True, address_settings=SETTINGS).start()
    assert_address_full(fail_refuses_sends(broker, jms))


def assert_address_full(failed: dict) -> None:
    """What the client shows for Artemis's ADDRESS_FULL answer (AMQ229102)."""
    error = failed["error"]
    assert error["class"] == "javax.jms.JMSException"
    assert error["message"].startswith("AMQ229102: Address \"flow.fail.") and error["message"].endswith('" is full.')
    assert error["cause"].startswith("org.apache.activemq.artemis.api.core.ActiveMQAddressFullException: AMQ229102")


def _setting(match: str, values: dict) -> str:
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in values.items())
    return f'<address-setting match="{match}">{inner}</address-setting>'


@pytest.fixture
def junction_node(tmp_path):
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path),
        name="flow",
        address_settings_xml="".join(_setting(m, v) for m, v in SETTINGS.items()),
        extra_acceptors_xml=harness.core_acceptor(port),
    )
    node.url = f"tcp://{harness.LOOPBACK}:{port}"
    node.start()
    try:
        yield node
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def test_junction_block(junction_node, jms: JmsClient):
    assert block_holds_sends_until_drained(junction_node, jms) >= 5


def test_junction_fail(junction_node, jms: JmsClient):
    assert_address_full(fail_refuses_sends(junction_node, jms))
