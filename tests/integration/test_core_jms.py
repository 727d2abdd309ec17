"""The real Artemis JMS client against a Junction node's CORE acceptor: the differential half.

``tests/integration/test_artemis_peer.py`` runs each scenario below against the real
Artemis broker; here the very same scenario functions run, unchanged, against a real
``junction run`` node with a ``protocols=CORE`` acceptor, so a Junction node must show the
real client the outcomes Artemis shows it: each JMS message type with its typed body,
properties and headers; a durable subscription kept across connections; transactions
rolled back and committed (redelivery counted); a selector; a refused login.

Left out, and why: the STOMP-acceptor and kill -9 scenarios (the peer's harness; Junction's
own kill -9 tests over CORE are tests/integration/test_core_node.py and, for large messages,
tests/integration/test_core_large.py).
"""

from __future__ import annotations

import time

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.integration import test_artemis_peer as peer

pytestmark = pytest.mark.timeout(60)

#: the peer's user, with Junction's default role for sending and consuming
USERS = {peer.USER["user"]: (peer.USER["password"], ["amq"])}


#: what ``artemis create`` configures for expiry: expired messages go to ``ExpiryQueue``
ARTEMIS_DEFAULT_EXPIRY = {
    "address_settings_xml": '<address-setting match="#"><expiry-address>ExpiryQueue</expiry-address></address-setting>',
    "extra_core_xml": '<addresses><address name="ExpiryQueue"><anycast><queue name="ExpiryQueue"/></anycast></address></addresses>',
}


class _Target:
    """What the peer's scenarios need of a broker: its CORE URL."""

    def __init__(self, port: int):
        self.host, self.core_port = harness.LOOPBACK, port
        self.url = f"tcp://{harness.LOOPBACK}:{port}"


@pytest.fixture(scope="module")
def junction_core(tmp_path_factory):
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path_factory.mktemp("core-jms")),
        name="core",
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port),
        **ARTEMIS_DEFAULT_EXPIRY,
    )
    node.start()
    try:
        yield _Target(port)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def test_large_and_async_sends(junction_core, jms: JmsClient):
    peer.test_large_and_async_sends(junction_core, jms)


@pytest.mark.parametrize("kind", sorted(peer.MESSAGES))
def test_queue_round_trips_each_message_type(junction_core, jms: JmsClient, kind: str):
    peer.test_queue_round_trips_each_message_type(junction_core, jms, kind)


def test_durable_subscription_kept_across_reconnect(junction_core, jms: JmsClient):
    peer.test_durable_subscription_kept_across_reconnect(junction_core, jms)


def test_transaction_rolled_back_then_committed(junction_core, jms: JmsClient):
    peer.test_transaction_rolled_back_then_committed(junction_core, jms)


def test_selector(junction_core, jms: JmsClient):
    peer.test_selector(junction_core, jms)


def test_errors_are_results(junction_core, jms: JmsClient):
    peer.test_errors_are_results(junction_core, jms)


def test_scheduled_delivery(junction_core, jms: JmsClient):
    peer.test_scheduled_delivery(junction_core, jms)


def test_expired_message_goes_to_the_expiry_queue(junction_core, jms: JmsClient):
    peer.test_expired_message_goes_to_the_expiry_queue(junction_core, jms)


def test_consumer_priority(junction_core, jms: JmsClient):
    peer.test_consumer_priority(junction_core, jms)


def test_message_groups(junction_core, jms: JmsClient):
    peer.test_message_groups(junction_core, jms)


def test_scheduled_delivery_survives_a_graceful_restart(broker_factory, jms: JmsClient):
    """The delivery time is kept with the message (its ``_AMQ_SCHED_DELIVERY`` property, in
    the journal): after a restart the message is still held until then, and then delivered."""
    port = harness.free_port()
    node = broker_factory(
        "core-sched",
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port),
    ).start()
    target = _Target(port)
    delay_ms = 8000
    (_, sent) = jms.run(
        [peer.connect(target), {"op": "send", "queue": "sched.restart", "body": "held", "delay": delay_ms}]
    )
    assert sent["sent"] == 1
    sent_at = time.time()
    assert node.stop() == 0
    node.start()
    early = jms.run([peer.connect(target), {"op": "receive", "queue": "sched.restart", "timeout": 0}])[1]
    assert time.time() - sent_at < delay_ms / 1000  # so the empty receive proves the hold
    assert early["messages"] == []
    late = jms.run([peer.connect(target), {"op": "receive", "queue": "sched.restart", "timeout": 15000}])[1]
    assert peer.bodies(late) == ["held"]
    assert time.time() - sent_at >= delay_ms / 1000 - 0.5
