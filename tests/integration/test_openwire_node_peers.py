"""The OpenWire acceptance scenarios against a Junction node, with both real Classic clients.

The scenario functions of ``test_openwire_peers.py`` (run there against the real Classic and
Artemis brokers) run here unchanged against a node (a real ``junction run``) with an
``OPENWIRE`` acceptor: differential testing, as ``test_core_jms.py`` does for CORE.  The node
announces temporary destinations to advisory consumers (as Classic does), and takes STOMP
queues by bare name with an ANYCAST header (as Artemis does).  The kill -9 scenarios (10,000
synchronous sends; XA branches prepared, then recovered) kill and restart the test's own
node.  Not run here: Artemis's redirect (the node sends no ConnectionControl yet).
"""

from __future__ import annotations

import pytest

from tests.classic import OpenWireClient
from tests.harness import free_port
from tests.integration import test_openwire_peers as peers
from tests.integration.test_openwire_peers import Target

pytestmark = pytest.mark.timeout(60)

USERS = {"admin": ("admin", "admin")}


@pytest.fixture
def junction(broker_factory, openwire_client: OpenWireClient) -> Target:
    port = free_port()
    node = broker_factory(
        "ow-peer", security=True, users=USERS,
        extra_acceptors_xml=f'<acceptor name="openwire">tcp://127.0.0.1:{port}?protocols=OPENWIRE</acceptor>',
    ).start()
    return Target("junction", node, "127.0.0.1", port, openwire_client, temp_advisories=True,
                  stomp_port=node.stomp_port, stomp_queue_prefix="")


@pytest.mark.parametrize("style", ["tcp", "failover"])
def test_url_options_and_queue(junction: Target, style: str):
    peers.test_url_options_and_queue(junction, style)


def test_message_types_with_properties(junction: Target):
    peers.test_message_types_with_properties(junction)


def test_topic_subscribers(junction: Target):
    peers.test_topic_subscribers(junction)


def test_durable_subscriber_across_reconnects(junction: Target):
    peers.test_durable_subscriber_across_reconnects(junction)


def test_selector(junction: Target):
    peers.test_selector(junction)


def test_local_transaction(junction: Target):
    peers.test_local_transaction(junction)


@pytest.mark.parametrize("prefetch", [0, 1000])
def test_prefetch(junction: Target, prefetch: int):
    peers.test_prefetch(junction, prefetch)


def test_temporary_queue_request_reply(junction: Target):
    peers.test_temporary_queue_request_reply(junction)


def test_reply_to_a_temporary_queue_relies_on_advisories(junction: Target):
    peers.test_reply_to_a_temporary_queue_relies_on_advisories(junction)


@pytest.mark.parametrize("prefetch", [1000, 1])
def test_message_groups_two_consumers(junction: Target, prefetch: int):
    peers.test_message_groups_two_consumers(junction, prefetch)


def test_message_group_closed_by_sequence_minus_one(junction: Target):
    peers.test_message_group_closed_by_sequence_minus_one(junction)


def test_exclusive_consumer(junction: Target):
    peers.test_exclusive_consumer(junction)


def test_stomp_to_openwire_and_back(junction: Target):
    peers.test_stomp_to_openwire_and_back(junction)


def test_sync_persistent_sends_survive_kill9(junction: Target):
    peers.test_sync_persistent_sends_survive_kill9(junction)


def test_xa_prepared_survives_kill9_then_recovered(junction: Target):
    peers.test_xa_prepared_survives_kill9_then_recovered(junction)


def test_a_consumer_goes_on_after_a_failover_reconnect(junction: Target):
    peers.test_a_consumer_goes_on_after_a_failover_reconnect(junction)
