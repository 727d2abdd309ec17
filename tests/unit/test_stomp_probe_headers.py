"""A broker core's CONNECTED frame tells a gateway's STOMP probe its node id, activeness and load.

On StringTransport + Clock (:mod:`tests.unit.stomp_fixtures`).  The headers
go only to a connection whose ``client-id`` has the routers' internal prefix;
every other client's CONNECTED is exactly what it was.
"""

from __future__ import annotations

import pytest

from junction.brokercore.stomp_server import ROUTER_PROBE_CLIENT_ID_PREFIX
from junction.gateway.stomp_probe import ACTIVE_HEADER, CONNECTIONS_HEADER, NODE_ID_HEADER
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX
from tests.unit.stomp_fixtures import Broker

PROBE_HEADERS = (NODE_ID_HEADER, ACTIVE_HEADER, CONNECTIONS_HEADER)


def test_the_core_and_the_gateway_agree_on_the_prefix():
    assert ROUTER_PROBE_CLIENT_ID_PREFIX == INTERNAL_CLIENT_ID_PREFIX


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_a_probe_connection_is_told_the_node_id_active_and_connections(version):
    b = Broker()
    clients = [b.client() for _ in range(2)]
    for c in clients:
        assert c.connect("1.2", client_id="app").command == "CONNECTED"
    probe = b.client()
    answer = probe.connect(version, client_id=INTERNAL_CLIENT_ID_PREFIX + "abc.1")
    assert answer.command == "CONNECTED"
    assert answer.get(NODE_ID_HEADER) == b.server.node_id
    assert answer.get(ACTIVE_HEADER) == "true"
    assert answer.get(CONNECTIONS_HEADER) == "3"  # two clients and the probe itself


@pytest.mark.parametrize("client_id", [None, "app", "$.artemis.internal.other"])
def test_other_clients_get_no_probe_headers(client_id):
    b = Broker()
    c = b.client()
    headers = {"client_id": client_id} if client_id is not None else {}
    answer = c.connect("1.2", **headers)
    assert answer.command == "CONNECTED"
    assert [name for name, _ in answer.headers] == ["version", "session", "server", "heart-beat"]
