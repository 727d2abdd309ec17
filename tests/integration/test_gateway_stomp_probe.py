"""Routing to targets that serve STOMP alone: real gateway, real cores, another real broker.

Every node is a ``junction run`` process (:class:`tests.harness.BrokerProcess`,
security on, the same users).  The gateway's connectors point at a core's
``stomp`` acceptor, which the harness makes ``protocols=STOMP``: the pool's
readiness probe must speak STOMP there (an AMQP header gets a STOMP ERROR
frame).  The other broker is CoilMQ (a STOMP broker in Python, run as its own
process): its CONNECTED says nothing of Junction, so its node id stands in
from the connector.

What the gateway says about its targets is read from its management API
(``/api/routers``, ``/api/status``) and from ``junction status``; clients are
stomp.py connections to the gateway's routed acceptor.  Nothing is
synchronised by sleeping: waits poll with deadlines.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.harness import BrokerProcess, address_status, free_port, port_open, router_xml, wait_for
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(60)

USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "pool")}
#: seconds any one expected thing may take (the pools check every 200 ms)
TIMEOUT = 15.0

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def make_gateway(broker_factory, connectors: dict, name: str = "gateway") -> BrokerProcess:
    """A gateway whose router ``r`` (CLIENT_ID, FIRST_ELEMENT) pools ``connectors`` (name -> URL)."""
    port = free_port()
    gateway = broker_factory(
        name,
        security=True,
        users=USERS,
        extra_core_xml=router_xml(connectors),
        extra_acceptors_xml=(
            f'<acceptor name="routed">tcp://127.0.0.1:{port}?protocols=STOMP;router=r</acceptor>'
        ),
    )
    gateway.routed_address = ("127.0.0.1", port)
    return gateway.start()


def targets_of(gateway: BrokerProcess, path: str = "/api/routers") -> dict:
    """name -> the target's status, from ``/api/routers`` or ``/api/status``."""
    if path == "/api/routers":
        (router,) = gateway.get_json("/api/routers")["routers"]
        members = router["pool"]["members"]
    else:
        members = gateway.status()["routers"]["r"]["targets"]
    return {t["name"]: t for t in members}


def wait_target(gateway: BrokerProcess, name: str, what: str, predicate) -> dict:
    return wait_for(
        lambda: (t := targets_of(gateway).get(name)) is not None and predicate(t) and t,
        TIMEOUT,
        interval=0.05,
        what=f"target {name} {what}",
    )


def junction_status(gateway: BrokerProcess) -> str:
    """What ``junction status`` prints for the gateway."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(_checkout())
    done = subprocess.run(
        [sys.executable, "-m", "junction", "status", "--url", gateway.mgmt_url],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _checkout():
    from pathlib import Path

    return Path(__file__).resolve().parents[2]


def target_line(text: str, name: str) -> str:
    """The ``Router targets`` row of target ``name`` in ``junction status`` output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Router targets"))
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        if line.split()[1] == name:
            return line
    raise AssertionError(f"no row for {name} in:\n{text}")


def client_to(gateway: BrokerProcess, version: str = "1.2") -> Client:
    return Client(SimpleNamespace(stomp_address=gateway.routed_address), version)


def round_trip(client: Client, destination: str, body: str) -> str:
    """Subscribe, send, and return the body that came back."""
    client.subscribe(destination, "s1")
    client.send(destination, body)
    (message,) = client.rec.wait_messages(1)
    return message.body


# --------------------------------------------------------------------------- a STOMP-only core


def test_a_stomp_only_core_is_ready_and_clients_are_forwarded_to_it(broker_factory):
    core = broker_factory("core", security=True, users=USERS).start()
    gateway = make_gateway(broker_factory, {"core": f"tcp://127.0.0.1:{core.stomp_port}"})
    target = wait_target(gateway, "core", "ready", lambda t: t["ready"])
    assert target["node_id"] == core.status()["node_id"]
    assert target["probe"] == "STOMP" and target["problem"] is None and target["note"] is None
    assert target["connection_count"] == 0

    client = client_to(gateway).connect("app", "app-secret", **{"client-id": "stomp-only-1"})
    try:
        queue = new_id("probe.q")
        assert round_trip(client, queue, "through the gateway") == "through the gateway"
        # forwarded: the client and its queue are on the core, not on the gateway's own core
        assert "stomp-only-1" in {c["client_id"] for c in core.status()["connections"]}
        assert address_status(core, queue) is not None and address_status(gateway, queue) is None
        # the core's CONNECTED counts the forwarded client (the probe leaves itself out)
        wait_target(gateway, "core", "counting the client", lambda t: t["connection_count"] == 1)
    finally:
        client.conn.disconnect()

    row = target_line(junction_status(gateway), "core")
    assert row.split()[2:5] == [core.status()["node_id"], "yes", "STOMP"]


# --------------------------------------------------------------------------- why a target is not ready


def test_the_status_says_why_a_target_is_not_ready(broker_factory):
    """A closed port and a core that refuses the pool's login, next to one that is fine."""
    core = broker_factory("core", security=True, users=USERS).start()
    strict = broker_factory(
        "strict", security=True, users={"app": ("app-secret", "app")}, anonymous_user=None
    ).start()
    closed = free_port()
    gateway = make_gateway(
        broker_factory,
        {
            "up": f"tcp://127.0.0.1:{core.stomp_port}",
            "down": f"tcp://127.0.0.1:{closed}",
            "refusing": f"tcp://127.0.0.1:{strict.stomp_port}",
        },
    )
    wait_target(gateway, "up", "ready", lambda t: t["ready"])
    down = wait_target(gateway, "down", "with a problem", lambda t: t["problem"])
    refusing = wait_target(gateway, "refusing", "with a problem", lambda t: t["problem"])
    assert not down["ready"] and down["problem"] == f"probe failed: connection refused by 127.0.0.1:{closed}"
    assert not refusing["ready"]
    assert refusing["problem"] == (
        "probe failed: STOMP CONNECT refused: Security Error occurred: User name [pool] or password "
        "is invalid (after AMQP: answered the AMQP header with a STOMP ERROR frame, not AMQP)"
    )
    # the same in /api/status, and in junction status's table
    assert targets_of(gateway, "/api/status")["down"]["problem"] == down["problem"]
    text = junction_status(gateway)
    assert target_line(text, "down").split()[2:4] == ["-", "no"]
    assert target_line(text, "down").endswith(down["problem"])
    assert "STOMP CONNECT refused: Security Error occurred" in target_line(text, "refusing")
    assert target_line(text, "up").split()[3:5] == ["yes", "STOMP"]

    # the down target comes up: its problem goes
    core2 = broker_factory("core2", security=True, users=USERS, stomp_port=closed).start()
    ready = wait_target(gateway, "down", "ready", lambda t: t["ready"])
    assert ready["problem"] is None and ready["node_id"] == core2.status()["node_id"]


# --------------------------------------------------------------------------- another broker


@pytest.fixture
def coilmq(tmp_path):
    """A CoilMQ STOMP broker on a free loopback port, stopped at teardown."""
    port = free_port()
    log = open(tmp_path / "coilmq.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coilmq.start", "-b", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: proc.poll() is not None or port_open(port), TIMEOUT, what="CoilMQ listening")
        assert proc.poll() is None, (tmp_path / "coilmq.log").read_text()
        yield SimpleNamespace(port=port, proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def test_another_broker_s_stomp_port_is_ready_and_serves_forwarded_clients(broker_factory, coilmq):
    gateway = make_gateway(broker_factory, {"coil": f"tcp://127.0.0.1:{coilmq.port}"})
    target = wait_target(gateway, "coil", "ready", lambda t: t["ready"])
    assert target["node_id"] == f"tcp://127.0.0.1:{coilmq.port}"  # stands in from the connector
    assert target["connection_count"] is None and target["probe"] == "STOMP"
    assert target["note"].startswith("not a Junction core (coilmq/")
    assert "connection count unknown" in target["note"]

    # CoilMQ refuses STOMP 1.2 unless host names its own host: the client speaks 1.1
    client = client_to(gateway, "1.1").connect("app", "app-secret", **{"client-id": "coil-1"})
    try:
        assert round_trip(client, "/queue/through.coil", "to CoilMQ") == "to CoilMQ"
    finally:
        client.conn.disconnect()

    row = target_line(junction_status(gateway), "coil")
    assert row.split()[2:5] == [f"tcp://127.0.0.1:{coilmq.port}", "yes", "STOMP"]
    assert "not a Junction core (coilmq/" in row
