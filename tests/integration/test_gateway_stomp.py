"""STOMP through the gateway, forwarded, with real processes and real stomp.py clients.

The world: two broker cores and a gateway node, each a ``junction run``
process (:class:`tests.harness.BrokerProcess`), security on everywhere with
the same users.  Each core has, beside the harness's own acceptors, a
multi-protocol acceptor ``gateway-in`` (``protocols=STOMP,AMQP``): the
gateway's connectors point there, so one ``host:port`` serves both the
pool's AMQP readiness probe and the STOMP connections the gateway forwards
(Junction forwards; it needs a port where the client's own protocol is
served -- docs/configuration.md, "Connection routers").  The gateway's
``routed`` acceptor (``protocols=STOMP;router=r``) is where clients connect.

Which core served a client is read from the cores themselves: the queue the
client sent to exists on exactly one of them (``/api/status`` ``queues``),
and the core's ``connections`` show the client id and user the gateway
replayed.  Nothing is synchronised by sleeping: waits poll with deadlines.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
from stomp.exception import ConnectFailedException

from junction.routing.policies import create_policy
from junction.routing.targets import Target
from tests.harness import BrokerProcess, free_port, queue_status, wait_for
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(120)

USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "pool")}
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
#: seconds any one expected thing may take (readiness follows the check period)
TIMEOUT = 15.0

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


# --------------------------------------------------------------------------- the world


def make_core(broker_factory, name: str) -> BrokerProcess:
    port = free_port()
    core = broker_factory(
        name,
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;'
            "anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>"
        ),
    )
    core.gateway_in_port = port
    return core


def make_gateway(
    broker_factory,
    cores: list[BrokerProcess],
    *,
    policy: str = "FIRST_ELEMENT",
    key: str = "CLIENT_ID",
    name: str = "gateway",
    protocols: str = "STOMP",
    extra_junction_xml: str = "",
    params: str = "",
) -> BrokerProcess:
    port = free_port()
    connectors = "".join(
        f'<connector name="{c.name}">tcp://127.0.0.1:{c.gateway_in_port}</connector>' for c in cores
    )
    refs = "".join(f"<connector-ref>{c.name}</connector-ref>" for c in cores)
    routers = f"""
    <connectors>{connectors}</connectors>
    <connection-routers>
      <connection-router name="r">
        <key-type>{key}</key-type>
        <policy name="{policy}"/>
        <pool>
          <username>pool</username>
          <password>pool-secret</password>
          <check-period>200</check-period>
          <quorum-timeout>500</quorum-timeout>
          <static-connectors>{refs}</static-connectors>
        </pool>
      </connection-router>
    </connection-routers>"""
    gateway = broker_factory(
        name,
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_core_xml=routers,
        extra_junction_xml=extra_junction_xml,
        extra_acceptors_xml=(
            f'<acceptor name="routed">tcp://127.0.0.1:{port}?protocols={protocols};router=r;'
            f"anycastPrefix=/queue/;multicastPrefix=/topic/{params}</acceptor>"
        ),
    )
    gateway.routed_address = ("127.0.0.1", port)
    return gateway


def router_targets(gateway: BrokerProcess) -> dict:
    """The gateway's view of its router's targets: name -> target status."""
    return {t["name"]: t for t in gateway.status()["routers"]["r"]["targets"]}


def wait_ready(gateway: BrokerProcess, **expected: bool) -> None:
    """Wait until the gateway's pool says each named target is (not) ready."""

    def check():
        targets = router_targets(gateway)
        return all(targets[name]["ready"] is want for name, want in expected.items()) and targets

    wait_for(check, TIMEOUT, interval=0.05, what=f"gateway targets {expected}")


@pytest.fixture
def world(broker_factory):
    core1 = make_core(broker_factory, "core1").start()
    core2 = make_core(broker_factory, "core2").start()
    return SimpleNamespace(core1=core1, core2=core2, factory=broker_factory)


@pytest.fixture
def clients() -> Iterator[Callable[..., Client]]:
    """``clients(address, version="1.2")``: a stomp.py Client to ``(host, port)``, closed at teardown."""
    made: list[Client] = []

    def make(address, version: str = "1.2") -> Client:
        c = Client(SimpleNamespace(stomp_address=address), version)
        made.append(c)
        return c

    yield make
    for c in reversed(made):
        c.close_quietly()


def holder(cores: list[BrokerProcess], queue: str) -> BrokerProcess:
    """The one core that has ``queue`` (waits for it to appear somewhere)."""

    def find():
        found = [c for c in cores if queue_status(c, queue) is not None]
        return found or None

    found = wait_for(find, TIMEOUT, what=f"queue {queue} on a core")
    assert len(found) == 1, f"queue {queue} on {[c.name for c in found]}"
    return found[0]


def connection_on(core: BrokerProcess, client_id: str):
    """The core's connection with this client id, or None."""
    for conn in core.status()["connections"]:
        if conn["client_id"] == client_id:
            return conn
    return None


# --------------------------------------------------------------------------- the same session, direct and forwarded


def session_scenario(client: Client, queue: str) -> dict:
    """Sends, receives, receipts, acks (individual, cumulative, NACK): what a client sees."""
    dest = f"/queue/{queue}"
    client.subscribe(dest, "s1", ack="client-individual")
    for i in range(5):
        client.send(dest, f"m{i}", priority="4", custom=f"v{i}")
    messages = client.rec.wait_messages(5)
    seen = {
        "bodies": [m.body for m in messages],
        "custom": [m.headers.get("custom") for m in messages],
        "destinations": {m.headers.get("destination") for m in messages},
        "subscriptions": {m.headers.get("subscription") for m in messages},
    }
    client.ack(messages[0])
    client.ack(messages[2])
    client.nack(messages[4])  # no DLQ configured and 10 attempts: redelivered
    again = client.rec.wait_messages(6)[5]
    seen["redelivered"] = again.body
    for m in (messages[1], messages[3], again):
        client.ack(m)
    tx = client.begin()
    client.send(dest, "in-tx", transaction=tx)
    client.commit(tx)
    seen["tx"] = client.rec.wait_messages(7)[6].body
    client.ack(client.rec.messages[6])
    client.disconnect()
    return seen


@pytest.mark.parametrize("route", ["direct", "forwarded"])
def test_a_forwarded_session_behaves_exactly_as_a_direct_one(world, clients, route):
    gateway = make_gateway(world.factory, [world.core1]).start()
    wait_ready(gateway, core1=True)
    address = world.core1.stomp_address if route == "direct" else gateway.routed_address
    queue = new_id(f"same-{route}")
    client_id = new_id("app")
    client = clients(address).connect("app", "app-secret", **{"client-id": client_id})
    # the core authenticated the client itself and sees its client id
    conn = wait_for(lambda: connection_on(world.core1, client_id), TIMEOUT, what="the client on core1")
    assert conn["user"] == "app"
    if route == "forwarded":  # a plain TCP splice: carried by the relay engine, off the reactor
        [routed] = [a for a in gateway.status()["acceptors"] if a["name"] == "routed"]
        assert (routed["forwarded"], routed["relayed"]) == (1, 1)
    seen = session_scenario(client, queue)
    assert seen == {
        "bodies": ["m0", "m1", "m2", "m3", "m4"],
        "custom": ["v0", "v1", "v2", "v3", "v4"],
        "destinations": {f"/queue/{queue}"},
        "subscriptions": {"s1"},
        "redelivered": "m4",
        "tx": "in-tx",
    }
    # everything acknowledged: the auto-created queue is empty, or already auto-deleted
    wait_for(
        lambda: (q := queue_status(world.core1, queue)) is None
        or (q["message_count"] == 0 and q["delivering_count"] == 0),
        TIMEOUT,
        what=f"queue {queue} drained",
    )
    assert queue_status(gateway, queue) is None  # nothing was served by the gateway's own core


def test_a_bad_password_is_refused_by_the_gateway_as_the_broker_would(world, clients):
    gateway = make_gateway(world.factory, [world.core1]).start()
    wait_ready(gateway, core1=True)
    bad = clients(gateway.routed_address)
    with pytest.raises(ConnectFailedException):
        bad.connect("app", "wrong")
    err = bad.rec.wait_error()
    assert err.headers["message"] == "Security Error occurred: User name [app] or password is invalid"
    assert connection_on(world.core1, None) is None  # the core never saw it


# --------------------------------------------------------------------------- FIRST_ELEMENT failover


def connect_and_place(clients, gateway, cores, client_id: str) -> BrokerProcess:
    """Connect through the gateway, send to a queue named after the client; the core holding it."""
    c = clients(gateway.routed_address).connect("app", "app-secret", **{"client-id": client_id})
    c.send(f"/queue/{client_id}", "here")
    where = holder(cores, client_id)
    c.disconnect()
    return where


def test_first_element_moves_new_connections_to_the_next_core_and_back(world, clients):
    core1, core2 = world.core1, world.core2
    cores = [core1, core2]
    gateway = make_gateway(world.factory, cores, policy="FIRST_ELEMENT").start()
    wait_ready(gateway, core1=True, core2=True)
    assert connect_and_place(clients, gateway, cores, new_id("fe")) is core1

    core1.stop()
    wait_ready(gateway, core1=False, core2=True)
    assert connect_and_place(clients, gateway, [core2], new_id("fe")) is core2

    core1.start()
    wait_ready(gateway, core1=True, core2=True)
    assert connect_and_place(clients, gateway, cores, new_id("fe")) is core1

    # with no core ready the router refuses, with Artemis's reason
    core1.stop()
    core2.stop()
    wait_ready(gateway, core1=False, core2=False)
    refused = clients(gateway.routed_address)
    with pytest.raises(ConnectFailedException):
        refused.connect("app", "app-secret", **{"client-id": new_id("fe")})
    assert refused.rec.wait_error().headers["message"] == "Connection router r is not ready"


# --------------------------------------------------------------------------- CONSISTENT_HASH


def test_consistent_hash_sends_each_client_id_to_its_core_every_time(world, clients):
    cores = [world.core1, world.core2]
    gateway = make_gateway(world.factory, cores, policy="CONSISTENT_HASH").start()
    wait_ready(gateway, core1=True, core2=True)
    by_node = {c.status()["node_id"]: c for c in cores}
    # the same choice, computed in-process from the cores' node ids
    policy = create_policy("CONSISTENT_HASH", {})
    targets = [Target(node_id=node_id, ready=True) for node_id in by_node]
    placed = {}
    for _ in range(8):
        client_id = new_id("hash")
        expected = by_node[policy.select(targets, client_id).node_id]
        placed[client_id] = connect_and_place(clients, gateway, cores, client_id)
        assert placed[client_id] is expected, client_id
    # a client id comes back to the same core
    again = next(iter(placed))
    c = clients(gateway.routed_address).connect("app", "app-secret", **{"client-id": again})
    conn = wait_for(lambda: connection_on(placed[again], again), TIMEOUT, what=f"{again} on its core")
    assert conn["user"] == "app"
    c.disconnect()


# --------------------------------------------------------------------------- bad clients


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the gateway sends until it closes the connection (fails on a timeout)."""
    sock.settimeout(TIMEOUT)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_garbage_stalls_floods_and_unrouted_protocols_lose_only_their_own_connection(world, clients):
    gateway = make_gateway(
        world.factory,
        [world.core1],
        protocols="STOMP,AMQP",
        extra_junction_xml='<limits connect-timeout="1000" max-frame-size="64KiB"/>',
    ).start()
    wait_ready(gateway, core1=True)
    good = clients(gateway.routed_address).connect("app", "app-secret", **{"client-id": new_id("good")})
    queue = new_id("bystander")
    good.subscribe(f"/queue/{queue}", "b")
    good.send(f"/queue/{queue}", "before")

    garbage = socket.create_connection(gateway.routed_address)
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
    assert read_until_closed(garbage) == b""  # closed, nothing said: not a protocol we know

    amqp = socket.create_connection(gateway.routed_address)
    amqp.sendall(b"AMQP\x03\x01\x00\x00")  # and no sasl-init: closed at the connect timeout
    assert read_until_closed(amqp).startswith(b"AMQP\x03\x01\x00\x00")  # SASL offered, then closed

    stalled = socket.create_connection(gateway.routed_address)
    stalled.sendall(b"CONNECT\naccept-version:1.2\nlogin:app\n")  # and nothing more
    answer = read_until_closed(stalled)
    assert answer.startswith(b"ERROR\n") and b"message:no CONNECT frame within 1 s" in answer

    flood = socket.create_connection(gateway.routed_address)
    try:
        flood.sendall(b"CONNECT\nlogin:" + b"x" * (1024 * 1024))
    except OSError:
        pass  # the gateway may close before it has read it all
    try:
        answer = read_until_closed(flood)
    except ConnectionResetError:
        answer = None  # closed with our bytes unread: the kernel may reset before the ERROR is read
    assert answer is None or (answer.startswith(b"ERROR\n") and b"malformed frame" in answer)

    for sock in (garbage, amqp, stalled, flood):
        sock.close()
    good.send(f"/queue/{queue}", "after")
    assert good.rec.wait_messages(2)[1].body == "after"
    log = gateway.log_text()
    assert "sent an unknown protocol: b'GET / HTTP/1.1" in log
    assert "no complete opening (SASL and open) within 1 s" in log


# --------------------------------------------------------------------------- many at once


class RawStomp:
    """A minimal STOMP 1.2 client on a plain socket, for many connections at once."""

    def __init__(self, address, client_id: str):
        self.sock = socket.create_connection(address, timeout=TIMEOUT)
        self.buffer = b""
        self.send_frame("CONNECT", {"accept-version": "1.2", "host": "/", "login": "app",
                                    "passcode": "app-secret", "client-id": client_id})

    def send_frame(self, command: str, headers: dict, body: bytes = b"") -> None:
        head = "".join(f"{k}:{v}\n" for k, v in headers.items())
        self.sock.sendall(f"{command}\n{head}\n".encode() + body + b"\0")

    def frame(self) -> tuple[str, dict, bytes]:
        while b"\0" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, "the gateway closed the connection"
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        raw = raw.lstrip(b"\n")
        head, _, body = raw.partition(b"\n\n")
        command, *lines = head.decode().split("\n")
        return command, dict(line.split(":", 1) for line in lines), body


def test_many_forwarded_connections_at_once_each_get_exactly_their_own_messages(world):
    gateway = make_gateway(world.factory, [world.core1]).start()
    wait_ready(gateway, core1=True)
    clients = [RawStomp(gateway.routed_address, new_id("many")) for _ in range(100)]
    for i, c in enumerate(clients):
        assert c.frame()[0] == "CONNECTED"
        c.send_frame("SUBSCRIBE", {"id": "s", "destination": f"/queue/many-{i}", "ack": "auto"})
    [routed] = [a for a in gateway.status()["acceptors"] if a["name"] == "routed"]
    assert (routed["forwarded"], routed["relayed"]) == (100, 100)
    for round_ in range(10):  # interleaved: every connection busy at once
        for i, c in enumerate(clients):
            c.send_frame("SEND", {"destination": f"/queue/many-{i}"}, f"{i}:{round_}".encode())
    for i, c in enumerate(clients):
        bodies = []
        while len(bodies) < 10:
            command, headers, body = c.frame()
            assert command == "MESSAGE", (command, headers, body)
            bodies.append(body.decode())
        assert bodies == [f"{i}:{r}" for r in range(10)]
    for c in clients:
        c.send_frame("DISCONNECT", {"receipt": "bye"})
        assert c.frame()[0] == "RECEIPT"
        c.sock.close()

    def all_closed():
        [routed] = [a for a in gateway.status()["acceptors"] if a["name"] == "routed"]
        return routed["forwarded"] == 0 and routed["relayed"] == 0

    wait_for(all_closed, TIMEOUT, interval=0.05, what="every relayed connection closed")
