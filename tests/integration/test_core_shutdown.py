"""A node's graceful stop tells every CORE client: DISCONNECT (in the form the client's
version reads: DISCONNECT_V3 with reason SHUT_DOWN and the node's ID for today's client), as
Artemis's graceful stop does, then the connection closes and the node exits 0.  The real JMS
client sees it through its ExceptionListener, against Junction and against Artemis."""

from __future__ import annotations

import pytest

from junction.protocols.core import packets as p
from junction.protocols.core.versions import CURRENT_VERSION
from tests.artemis import JmsClient
from tests.harness import wait_for
from tests.integration.test_artemis_peer import new_name
from tests.integration.test_core_jms import _Target
from tests.integration.test_core_node import RawCoreClient, node  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(60)

_DISCONNECTED = "AMQ219015: The connection was disconnected because of server shutdown"
#: what the client's ExceptionListener reports for DISCONNECT with reason SHUT_DOWN (Artemis's
#: own; without the DISCONNECT the client would see a connection failure instead)
SHUTDOWN_SEEN = {
    "class": "javax.jms.JMSException",
    "message": f"ActiveMQDisconnectedException[errorType=DISCONNECTED message={_DISCONNECTED}]",
    "errorCode": "DISCONNECT",
    "cause": f"org.apache.activemq.artemis.api.core.ActiveMQDisconnectedException: {_DISCONNECTED}",
}


def test_every_core_connection_gets_disconnect_on_stop(node):  # noqa: F811
    clients = [RawCoreClient(port) for port in (node.core_port, node.core_port, node.multi_port)]
    for client in clients:
        assert client.open() == p.CreateSessionResponse(CURRENT_VERSION)
    node_id = clients[0].node_id
    assert node.stop() == 0
    for client in clients:
        (last,) = client.receive(1)
        assert last == p.DisconnectV3(node_id, p.DisconnectReason.SHUT_DOWN, None, None)
        assert client.closed_by_node()
        client.close()


def client_sees_shutdown(broker, stop, jms: JmsClient, user: str, password: str) -> dict:
    """A JMS consumer waiting on a queue; the broker stops; the client's ExceptionListener
    reports the connection's end.  Returns that event's error."""
    run = jms.start(
        [
            {"op": "connect", "url": broker.url, "user": user, "password": password},
            {"op": "send", "queue": new_name("shutdown"), "body": "ready"},
            {"op": "consumer", "id": "c", "queue": new_name("shutdown.empty")},
            {"op": "receive", "consumer": "c", "timeout": 30000},
        ]
    )
    # the consumer made (its CREATECONSUMER answered) before the stop: the client is then only
    # waiting, not inside a blocking call that the stop would fail instead of its ExceptionListener
    wait_for(lambda: len(run.results) >= 3, 30, what="the scenario ready")
    stop()
    event = run.wait_event(lambda e: e.get("event") == "exception", timeout=20)
    run.kill()
    return event["error"]


def test_jms_client_sees_artemis_stop(artemis, jms: JmsClient):
    assert client_sees_shutdown(artemis, artemis.stop, jms, "admin", "admin") == SHUTDOWN_SEEN


def test_jms_client_sees_junction_stop(node, jms: JmsClient):  # noqa: F811
    codes = []
    seen = client_sees_shutdown(_Target(node.core_port), lambda: codes.append(node.stop()), jms, "app", "app-secret")
    assert seen == SHUTDOWN_SEEN
    assert codes == [0]
