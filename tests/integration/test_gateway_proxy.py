"""The PROXY protocol between the gateway and a broker core, with real processes and clients.

The world: a broker core whose ``gateway-in`` acceptor
(``protocols=STOMP,AMQP``) has ``proxyProtocolEnabled=true``, and a gateway
node whose pool's connector to it has ``proxyProtocolEnabled=true``.  The
gateway writes a PROXY v2 header naming the client before replaying the
client's opening; its readiness probe sends a v2 LOCAL header.  So:

* a stomp.py client through the gateway shows on the core with ``remote`` =
  the client's own socket address and ``proxy_address`` = the gateway's
  connection, ``proxy_version`` = ``V2``;
* the pool still marks the core ready (the probe's LOCAL header is accepted);
* a direct connection to that acceptor without a header is closed and logged
  by the core, while the gateway's connections keep working;
* an AMQP client forwarded (``routerMode=forward``) shows the same way.

Nothing is synchronised by sleeping: waits poll with deadlines.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from proton import Message

from tests.harness import BrokerProcess, free_port, wait_for
from tests.integration.test_gateway_stomp import (
    PREFIXES,
    TIMEOUT,
    USERS,
    connection_on,
    new_id,
    wait_ready,
)
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(120)


def make_proxy_core(broker_factory, name: str) -> BrokerProcess:
    """A core whose ``gateway-in`` acceptor accepts only PROXY-protocol connections."""
    port = free_port()
    core = broker_factory(
        name,
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;'
            "anycastPrefix=/queue/;multicastPrefix=/topic/;proxyProtocolEnabled=true;"
            "proxyTrustedSources=127.0.0.0/8,::1</acceptor>"
        ),
    )
    core.gateway_in_port = port
    return core


def make_proxy_gateway(broker_factory, core: BrokerProcess, *, params: str = "") -> BrokerProcess:
    """A gateway whose pool reaches ``core`` through a connector with ``proxyProtocolEnabled=true``."""
    port = free_port()
    routers = f"""
    <connectors>
      <connector name="{core.name}">tcp://127.0.0.1:{core.gateway_in_port}?proxyProtocolEnabled=true</connector>
    </connectors>
    <connection-routers>
      <connection-router name="r">
        <key-type>CLIENT_ID</key-type>
        <policy name="FIRST_ELEMENT"/>
        <pool>
          <username>pool</username>
          <password>pool-secret</password>
          <check-period>200</check-period>
          <quorum-timeout>500</quorum-timeout>
          <static-connectors><connector-ref>{core.name}</connector-ref></static-connectors>
        </pool>
      </connection-router>
    </connection-routers>"""
    gateway = broker_factory(
        "gateway",
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_core_xml=routers,
        extra_acceptors_xml=(
            f'<acceptor name="routed">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;router=r;'
            f"anycastPrefix=/queue/;multicastPrefix=/topic/{params}</acceptor>"
        ),
    )
    gateway.routed_address = ("127.0.0.1", port)
    return gateway


@pytest.fixture
def world(broker_factory):
    core = make_proxy_core(broker_factory, "core1").start()
    gateway = make_proxy_gateway(broker_factory, core, params=";routerMode=forward").start()
    wait_ready(gateway, core1=True)
    made: list[Client] = []

    def client(address) -> Client:
        c = Client(SimpleNamespace(stomp_address=address), "1.2")
        made.append(c)
        return c

    yield SimpleNamespace(core=core, gateway=gateway, client=client)
    for c in reversed(made):
        c.close_quietly()


def wait_connection(core: BrokerProcess, client_id: str) -> dict:
    return wait_for(lambda: connection_on(core, client_id), TIMEOUT, interval=0.05, what=f"{client_id} on {core.name}")


def local_address(client: Client) -> str:
    """The client's own socket address, ``host:port``, from stomp.py's transport socket."""
    host, port = client.conn.transport.socket.getsockname()[:2]
    return f"{host}:{port}"


def local_ports_connected_to(port: int) -> set:
    """Local ports of this machine's established IPv4 TCP connections to ``port`` (Linux /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp", encoding="ascii") as table:
        next(table)
        for row in table:
            fields = row.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == "01" and int(remote.split(":")[1], 16) == port:
                found.add(int(local.split(":")[1], 16))
    return found


def test_stomp_client_shows_on_the_core_with_its_own_address(world):
    client_id = new_id("proxied")
    c = world.client(world.gateway.routed_address).connect("app", "app-secret", **{"client-id": client_id})
    conn = wait_connection(world.core, client_id)
    assert conn["remote"] == local_address(c)
    assert conn["proxy_version"] == "V2"
    proxy_host, proxy_port = conn["proxy_address"].rsplit(":", 1)
    assert proxy_host == "127.0.0.1"
    assert conn["proxy_address"] != conn["remote"]
    # the gateway's side of the forwarded connection: not the client's socket, not the routed port
    assert int(proxy_port) not in (world.gateway.routed_address[1], c.conn.transport.socket.getsockname()[1])
    # the forwarded connection works end to end
    queue = new_id("q")
    c.subscribe(f"/queue/{queue}", "s1")
    c.send(f"/queue/{queue}", "through the proxy header")
    assert c.rec.wait_messages(1)[0].body == "through the proxy header"
    # the pool's probe (v2 LOCAL) keeps the core ready meanwhile
    wait_ready(world.gateway, core1=True)


def test_a_direct_connection_without_a_header_is_closed_and_logged(world):
    with socket.create_connection(("127.0.0.1", world.core.gateway_in_port), timeout=TIMEOUT) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nlogin:app\npasscode:app-secret\n\n\x00")
        sock.settimeout(TIMEOUT)
        received = b""
        while True:
            chunk = sock.recv(4096)  # closed by the core: b"" (or a reset)
            if not chunk:
                break
            received += chunk
    assert b"CONNECTED" not in received
    wait_for(
        lambda: "sent no valid PROXY protocol header" in world.core.log_text(),
        TIMEOUT,
        interval=0.05,
        what="the core's log line about the connection without a header",
    )
    line = next(ln for ln in world.core.log_text().splitlines() if "sent no valid PROXY protocol header" in ln)
    assert "gateway-in" in line and "127.0.0.1:" in line and "CONNECT" in line
    # the gateway's connections keep working and the pool stays ready
    client_id = new_id("after")
    c = world.client(world.gateway.routed_address).connect("app", "app-secret", **{"client-id": client_id})
    assert wait_connection(world.core, client_id)["remote"] == local_address(c)
    wait_ready(world.gateway, core1=True)


def test_amqp_forwarded_client_shows_its_own_address(world):
    from proton.utils import BlockingConnection

    host, port = world.gateway.routed_address
    container = new_id("amqp-proxied")
    conn = BlockingConnection(
        f"amqp://{host}:{port}",
        timeout=TIMEOUT,
        container_id=container,
        user="app",
        password="app-secret",
        allowed_mechs="PLAIN",
        allow_insecure_mechs=True,
    )
    try:
        queue = new_id("amqpq")
        sender = conn.create_sender(queue)
        info = wait_connection(world.core, container)
        assert info["proxy_version"] == "V2"
        assert info["remote"] != info["proxy_address"]
        assert info["remote"].startswith("127.0.0.1:") and info["proxy_address"].startswith("127.0.0.1:")
        # the remote port is this client's own: a connection from it to the gateway's routed port
        assert int(info["remote"].rsplit(":", 1)[1]) in local_ports_connected_to(port)
        assert int(info["proxy_address"].rsplit(":", 1)[1]) not in local_ports_connected_to(port)
        sender.send(Message(body="amqp through the proxy header"))
        sender.close()
    finally:
        conn.close()
