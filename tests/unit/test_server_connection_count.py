"""The node's client connections are counted by the broker server, not by each adapter.

Adapters talk to their ``ServerSession`` and the server's connection-level
surface only (``junction/brokercore/session.py``): the count a gateway's
readiness probe reads is :meth:`BrokerServer.connection_count`, never a pass
of the adapter's own over the server's sessions.
"""

from __future__ import annotations

import re
from pathlib import Path

from junction.brokercore.security import Principal
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.brokercore.stomp_server import StompProtocol
from tests.unit.stomp_fixtures import Broker

ROOT = Path(__file__).resolve().parents[2] / "junction"


def test_connection_count_counts_connections_holding_a_session_once_each():
    broker = Broker()
    server = broker.server
    assert server.connection_count() == 0
    one, other = ConnectionInfo("test", "a:1"), ConnectionInfo("test", "b:2")
    first = ServerSession(server, Principal(None), one)
    second = ServerSession(server, Principal(None), one)  # a second session of the same connection
    third = ServerSession(server, Principal(None), other)
    assert server.connection_count() == 2 == len(server.connection_ids())
    first.close()
    assert server.connection_count() == 2
    second.close()
    assert server.connection_count() == 1
    third.close()
    assert server.connection_count() == 0


def test_the_stomp_probe_headers_give_the_server_s_count():
    broker = Broker()
    protocol = StompProtocol(broker.server, reactor=broker.clock)
    ServerSession(broker.server, Principal(None), ConnectionInfo("test", "a:1"))
    broker.server.connection_count = lambda: 41  # the one place the count comes from
    assert dict(protocol._probe_headers())["junction-connections"] == "41"


def test_no_adapter_or_node_service_reads_the_server_s_sessions_itself():
    adapters = sorted((ROOT / "brokercore").glob("stomp_*.py")) + sorted((ROOT / "brokercore").glob("amqp_*.py"))
    assert len(adapters) >= 5
    for path in [*adapters, ROOT / "node" / "routers.py"]:
        assert re.findall(r"server\.sessions\b", path.read_text()) == [], path
