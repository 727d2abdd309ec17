"""Adding a protocol, as docs/adding-a-protocol.md says: TOY, registered from a test package.

TOY (:mod:`tests.toyproto`) is registered only for these processes: a
``*.dist-info`` with its entry point in the group ``junction.protocols`` on
their ``PYTHONPATH``.  No line of the gateway or the broker core names it.

The world: a core with an acceptor ``gateway-in`` (``protocols=TOY,AMQP``: the
pool's readiness probe speaks AMQP there, the forwarded TOY connections are
sniffed there and served by TOY's broker adapter) and a gateway whose acceptor
``routed`` (``protocols=TOY;router=r``, key CLIENT_ID) is where the toy
client connects, over a raw socket: the point is the bytes.  The client is
sniffed, authenticated and keyed by the gateway, routed and forwarded to the
core, and talks to the core's adapter; the core's own status shows the
connection with the client id and user the gateway replayed.
"""

from __future__ import annotations

import functools
import os
import socket

import pytest

from tests.harness import REPO_ROOT, free_port, wait_for
from tests.integration.test_gateway_stomp import USERS, make_gateway, wait_ready
from tests.toyproto import write_dist_info

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 15.0


@pytest.fixture
def toy_env(tmp_path):
    """The environment of processes that know TOY: the checkout and TOY's registration."""
    registered = write_dist_info(tmp_path / "toy-registration")
    inherited = os.environ.get("PYTHONPATH")
    path = os.pathsep.join([str(REPO_ROOT), str(registered)] + ([inherited] if inherited else []))
    return {"PYTHONPATH": path}


@pytest.fixture
def world(broker_factory, toy_env):
    """A core serving TOY (and AMQP, for the pool's probe) on ``gateway-in``, and a gateway routing TOY."""
    with_toy = functools.partial(broker_factory, env=toy_env)
    core_port = free_port()
    core = with_toy(
        "core1",
        security=True,
        users=USERS,
        extra_acceptors_xml=f'<acceptor name="gateway-in">tcp://127.0.0.1:{core_port}?protocols=TOY,AMQP</acceptor>',
    ).start()
    core.gateway_in_port = core_port
    gateway = make_gateway(with_toy, [core], protocols="TOY").start()
    wait_ready(gateway, core1=True)
    return core, gateway, gateway.routed_address


def read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_a_toy_client_is_sniffed_authenticated_routed_and_forwarded_to_the_core(world):
    core, gateway, address = world
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        sock.sendall(b"TOY LOGIN app app-secret toy-client-1\n")
        assert read_line(sock) == b"TOY WELCOME\n"
        sock.sendall(b"TOY WHO\n")
        answer = read_line(sock).split()
        assert answer[:4] == [b"TOY", b"YOU", b"app", b"toy-client-1"]
        assert answer[4].decode() == core.status()["node_id"]  # the core answered, not the gateway

        def on_core():
            found = [c for c in core.status()["connections"] if c["protocol"] == "TOY"]
            return found

        (connection,) = wait_for(on_core, TIMEOUT, interval=0.05, what="the TOY connection on the core")
        assert (connection["client_id"], connection["user"], connection["acceptor"]) == (
            "toy-client-1", "app", "gateway-in",
        )
    routed = next(a for a in gateway.status()["acceptors"] if a["name"] == "routed")
    assert routed["decisions"] == {"forwarded": 1}


def test_a_bad_toy_login_is_refused_by_the_gateway_in_toy_terms(world):
    core, gateway, address = world
    with socket.create_connection(address, timeout=TIMEOUT) as sock:
        sock.sendall(b"TOY LOGIN app wrong toy-client-2\n")
        assert read_line(sock) == b"TOY ERROR login refused\n"
        assert sock.recv(1) == b""  # closed
    routed = next(a for a in gateway.status()["acceptors"] if a["name"] == "routed")
    assert routed["decisions"] == {"unauthenticated": 1}
    assert not [c for c in core.status()["connections"] if c["protocol"] == "TOY"]


def test_without_its_registration_toy_is_an_unknown_protocol(broker_factory):
    """The control: the same configuration is refused where TOY is not registered."""
    port = free_port()
    broker = broker_factory(
        "plain",
        extra_acceptors_xml=f'<acceptor name="toy">tcp://127.0.0.1:{port}?protocols=TOY</acceptor>',
    )
    with pytest.raises(Exception, match="unknown protocol 'TOY'"):
        broker.start()
