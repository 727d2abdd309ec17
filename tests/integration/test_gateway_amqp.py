"""AMQP through the gateway, with real processes and python-qpid-proton clients.

The same world as :mod:`tests.integration.test_gateway_stomp`: two broker
cores with a ``gateway-in`` acceptor (``protocols=STOMP,AMQP``) that the
gateway's pool connectors point at, and a gateway node whose ``routed``
acceptor (``protocols=STOMP,AMQP;router=r``) clients connect to.

* ``routerMode=forward``: the gateway authenticates the client (SASL PLAIN),
  redoes SASL with the core on its behalf and passes its Open through; the
  same session runs direct and forwarded and must see exactly the same.
* ``routerMode`` absent (``auto``): AMQP is redirected exactly as Artemis
  does, checked on the wire with the condition proton reports.
* No target ready: ``amqp:connection:forced`` "Connection router r is not ready".
"""

from __future__ import annotations

import pytest
from proton import Message, symbol
from proton.utils import BlockingConnection, ConnectionClosed

from tests.harness import BrokerProcess, wait_for
from tests.integration.test_gateway_stomp import (
    TIMEOUT,
    connection_on,
    make_core,
    make_gateway,
    new_id,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def core1(broker_factory) -> BrokerProcess:
    return make_core(broker_factory, "core1").start()


def amqp_gateway(broker_factory, cores, mode: str | None) -> BrokerProcess:
    params = f";routerMode={mode}" if mode else ""
    return make_gateway(broker_factory, cores, protocols="STOMP,AMQP", params=params).start()


class Client(BlockingConnection):
    """A BlockingConnection that keeps the remote Open's properties and the Close's condition.

    proton frees the connection once ConnectionClosed is raised, so they are
    read when the Close arrives.
    """

    remote_condition = None
    remote_properties = None

    def on_connection_remote_close(self, event) -> None:
        Client.remote_condition = event.connection.remote_condition
        Client.remote_properties = event.connection.remote_properties
        super().on_connection_remote_close(event)


def connect(address, container_id: str, password: str = "app-secret") -> BlockingConnection:
    host, port = address
    Client.remote_condition = Client.remote_properties = None
    return Client(
        f"amqp://{host}:{port}",
        timeout=TIMEOUT,
        container_id=container_id,
        user="app",
        password=password,
        allowed_mechs="PLAIN",
        allow_insecure_mechs=True,
    )


def amqp_scenario(conn: BlockingConnection, queue: str, sender) -> dict:
    """Send, receive, accept: what a client sees (``sender`` is a sender to ``queue``)."""
    for i in range(3):
        sender.send(Message(body=f"m{i}", properties={"n": i}, durable=True))
    receiver = conn.create_receiver(queue, credit=10)
    got = []
    for _ in range(3):
        got.append(receiver.receive(timeout=TIMEOUT))
        receiver.accept()
    seen = {"bodies": [m.body for m in got], "props": [m.properties for m in got]}
    sender.send(Message(body="after"))
    seen["after"] = receiver.receive(timeout=TIMEOUT).body
    receiver.accept()
    receiver.close()
    sender.close()
    return seen


@pytest.mark.parametrize("route", ["direct", "forwarded"])
def test_a_forwarded_amqp_session_behaves_exactly_as_a_direct_one(broker_factory, core1, route):
    gateway = amqp_gateway(broker_factory, [core1], "forward")
    wait_ready(gateway, core1=True)
    address = ("127.0.0.1", core1.gateway_in_port) if route == "direct" else gateway.routed_address
    container_id = new_id(f"amqp-{route}")
    conn = connect(address, container_id)
    try:
        queue = new_id("amqp-q")
        sender = conn.create_sender(queue)  # a session: the core lists the connection
        # the core authenticated the client itself and sees its container id
        seen_conn = wait_for(lambda: connection_on(core1, container_id), TIMEOUT, what="the client on core1")
        assert seen_conn["user"] == "app"
        assert conn.conn.remote_container != gateway.name  # the core's own Open came back
        seen = amqp_scenario(conn, queue, sender)
    finally:
        conn.close()
    assert seen == {
        "bodies": ["m0", "m1", "m2"],
        "props": [{"n": 0}, {"n": 1}, {"n": 2}],
        "after": "after",
    }
    assert connection_on(gateway, container_id) is None  # not served by the gateway's own core


def test_a_bad_password_is_refused_by_the_gateway(broker_factory, core1):
    gateway = amqp_gateway(broker_factory, [core1], "forward")
    wait_ready(gateway, core1=True)
    with pytest.raises(Exception) as failed:  # noqa: PT011 - proton's SASL failure
        connect(gateway.routed_address, new_id("bad"), password="wrong")
    assert "auth" in str(failed.value).lower()


def test_amqp_redirect_is_artemis_on_the_wire(broker_factory, core1):
    gateway = amqp_gateway(broker_factory, [core1], None)  # auto: AMQP is redirected
    wait_ready(gateway, core1=True)
    with pytest.raises(ConnectionClosed) as closed:
        connect(gateway.routed_address, new_id("redir"))
    assert closed.value.condition == "amqp:connection:redirect"
    condition = Client.remote_condition
    assert condition.name == "amqp:connection:redirect"
    port = core1.gateway_in_port
    assert condition.description == f"Connection router r redirected this connection to 127.0.0.1:{port}"
    assert condition.info == {symbol("network-host"): "127.0.0.1", symbol("port"): port}
    assert Client.remote_properties == {symbol("amqp:connection-establishment-failed"): True}


def test_no_target_ready_is_refused_as_not_ready(broker_factory, core1):
    gateway = amqp_gateway(broker_factory, [core1], "forward")
    wait_ready(gateway, core1=True)
    core1.stop()
    wait_ready(gateway, core1=False)
    with pytest.raises(ConnectionClosed):
        connect(gateway.routed_address, new_id("none"))
    condition = Client.remote_condition
    assert condition.name == "amqp:connection:forced"
    assert condition.description == "Connection router r is not ready"
