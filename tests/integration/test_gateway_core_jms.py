"""The real Artemis JMS client through the gateway: CORE forwarded.

Two broker cores behind a gateway whose router keys on CLIENT_ID (FIRST_ELEMENT, so the
target is known: the first ready core).  The client connects to the gateway's routed
acceptor only; where its messages land is read from the cores' own status.

Redirected (DISCONNECT_V3): the real client follows it with the options Artemis's own redirect
tests use (``ha=true&reconnectAttempts=10``): it connects to the target the DISCONNECT_V3 names
and asks it CHECK_FOR_FAILOVER about the gateway's node, which a node must answer yes.
"""

from __future__ import annotations

import itertools

import pytest

from tests.harness import free_port, queue_status, wait_for
from tests.integration.test_gateway_stomp import TIMEOUT, make_gateway, wait_ready

pytestmark = pytest.mark.timeout(60)

USERS = {"app": ("app-secret", "amq"), "pool": ("pool-secret", "pool")}
_ids = itertools.count(1)


def new_name(prefix: str) -> str:
    return f"{prefix}.{next(_ids)}"


def make_core(broker_factory, name: str):
    port = free_port()
    core = broker_factory(
        name,
        security=True,
        users=USERS,
        # AMQP beside CORE: the gateway pool's readiness probe speaks AMQP
        extra_acceptors_xml=f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=CORE,AMQP</acceptor>',
    )
    core.gateway_in_port = port
    return core


@pytest.fixture
def cores(broker_factory):
    return [make_core(broker_factory, "core1").start(), make_core(broker_factory, "core2").start()]


def gateway(broker_factory, cores, mode: str):
    gw = make_gateway(broker_factory, cores, protocols="CORE", params=f";routerMode={mode}")
    gw.start()
    wait_ready(gw, core1=True, core2=True)
    return gw


def scenario(url: str, queue: str, client_id: str) -> list:
    return [
        {"op": "connect", "url": url, "user": "app", "password": "app-secret", "clientId": client_id},
        {"op": "send", "queue": queue, "body": "through the gateway {i}", "count": 3},
        {"op": "receive", "queue": queue, "count": 2},
    ]


def left_on(cores, queue: str) -> dict:
    return {c.name: (queue_status(c, queue) or {}).get("message_count") for c in cores}


def test_the_real_client_is_forwarded_to_the_routers_target(broker_factory, cores, jms):
    mode = "forward"
    gw = gateway(broker_factory, cores, mode)
    host, port = gw.routed_address
    queue = new_name(f"gw.{mode}")
    results = jms.run(scenario(f"tcp://{host}:{port}", queue, new_name("client")))
    assert [m["body"] for m in results[2]["messages"]] == [f"through the gateway {i}" for i in range(2)]
    # FIRST_ELEMENT: core1 got the connection, and holds the message left unconsumed
    wait_for(lambda: left_on(cores, queue) == {"core1": 1, "core2": None}, TIMEOUT, what=f"{queue} on core1")


def test_the_real_client_is_redirected_to_the_routers_target(broker_factory, cores, jms):
    mode = "redirect"
    gw = gateway(broker_factory, cores, mode)
    host, port = gw.routed_address
    queue = new_name(f"gw.{mode}")
    # the options Artemis's own redirect tests give the client: HA, so that it follows the
    # DISCONNECT_V3 to the target it names (without them it gives up: AMQ219010)
    url = f"tcp://{host}:{port}?ha=true&reconnectAttempts=10&retryInterval=250"
    results = jms.run(scenario(url, queue, new_name("client")))
    assert [m["body"] for m in results[2]["messages"]] == [f"through the gateway {i}" for i in range(2)]
    # FIRST_ELEMENT: redirected to core1, which holds the message left unconsumed
    wait_for(lambda: left_on(cores, queue) == {"core1": 1, "core2": None}, TIMEOUT, what=f"{queue} on core1")
    routed = next(a for a in gw.status()["acceptors"] if a["name"] == "routed")
    assert routed["decisions"] == {"redirected": 1}  # redirected, not forwarded
