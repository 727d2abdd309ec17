"""``junction up``: the shipped appliance, run as a user runs it, with real clients.

The test copies ``etc/appliance`` (the README's run command starts exactly
these files) into its own folder and moves every port to a free one, then
runs ``python -m junction up --etc DIR --no-status`` as a process.  Through
the gateway's STOMP, AMQP and multi-protocol ports real stomp.py,
python-qpid-proton, Artemis JMS (CORE) and ActiveMQ Classic (OpenWire) clients
send and receive (the core sees each client's own
address, sent by the gateway in a PROXY protocol header); a broker core killed with
SIGKILL is restarted by the supervisor and still has what it acknowledged;
SIGTERM stops every node and the supervisor exits 0.  Nothing is
synchronised by sleeping: waits poll the nodes' management APIs with
deadlines.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
from proton import Message
from proton.utils import BlockingConnection

from junction.cli import main as junction_main
from junction.cli.status_table import StatusFetchError, fetch_status
from tests.classic import CLIENTS as CLASSIC_CLIENTS
from tests.harness import REPO_ROOT, free_port, wait_for
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(180)

APPLIANCE = REPO_ROOT / "etc" / "appliance"
#: the ports the shipped files use: gateway 61616/5672/61613/8161, cores 61617-61619/8162-8164,
#: the cores' cluster links 61717-61719
SHIPPED_PORTS = (61616, 5672, 61613, 8161, 61617, 61618, 61619, 8162, 8163, 8164, 61717, 61718, 61719)
TIMEOUT = 30.0


def copy_appliance(folder) -> dict[int, int]:
    """The shipped appliance in *folder* with every port moved; shipped port -> new port.

    Only the shipped files are copied: a ``data`` directory that running the
    appliance from the checkout left behind (journals, event logs) is not.
    """
    ports = {p: free_port() for p in SHIPPED_PORTS}
    for name in os.listdir(APPLIANCE):
        if (APPLIANCE / name).is_file():
            shutil.copy(APPLIANCE / name, folder / name)
    for xml in folder.glob("*.xml"):
        text = xml.read_text()
        for old, new in ports.items():
            text = re.sub(rf"127\.0\.0\.1:{old}\b", f"127.0.0.1:{new}", text)
            text = text.replace(f'port="{old}"', f'port="{new}"')
        xml.write_text(text)
    return ports


def status(port: int) -> dict | None:
    try:
        return fetch_status(f"http://127.0.0.1:{port}", timeout=2)
    except StatusFetchError:
        return None


@pytest.fixture
def appliance(tmp_path):
    yield from run_appliance(tmp_path)


#: users the cluster test adds before the appliance starts (password = name, role amq)
CLUSTER_TEST_USERS = [f"user{i}" for i in range(30)]


@pytest.fixture
def appliance_with_users(tmp_path):
    yield from run_appliance(tmp_path, users=CLUSTER_TEST_USERS)


def run_appliance(tmp_path, users=()):
    folder = tmp_path / "appliance"
    folder.mkdir()
    ports = copy_appliance(folder)
    add_users(folder, users)
    out = open(tmp_path / "up.out", "wb")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "junction", "up", "--etc", str(folder), "--no-status"],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
    )
    world = SimpleNamespace(proc=proc, ports=ports, folder=folder, out=tmp_path / "up.out")
    world.output = lambda: world.out.read_text(errors="replace")
    world.cores = {f"core{i}": ports[8161 + i] for i in (1, 2, 3)}
    try:
        yield world
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()


def wait_all_ready(world) -> dict:
    def ready():
        gw = status(world.ports[8161])
        router = ((gw or {}).get("routers") or {}).get("shard")
        return gw if router and router["ready"] == 3 else None

    return wait_for(ready, TIMEOUT, interval=0.1, what="the gateway's three cores ready")


def holder(world, queue: str) -> str:
    """The one core that has *queue*."""

    def find():
        found = []
        for name, port in world.cores.items():
            s = status(port) or {}
            if any(q["name"] == queue for q in s.get("queues", [])):
                found.append(name)
        return found or None

    found = wait_for(find, TIMEOUT, what=f"queue {queue} on a core")
    assert len(found) == 1, found
    return found[0]


def amqp(port: int) -> BlockingConnection:
    return BlockingConnection(
        f"amqp://127.0.0.1:{port}",
        timeout=TIMEOUT,
        user="admin",
        password="admin",
        allowed_mechs="PLAIN",
        allow_insecure_mechs=True,
    )


def test_the_appliance_serves_real_clients_restarts_a_killed_core_and_stops_cleanly(appliance):
    world = appliance
    wait_all_ready(world)
    out = world.output()
    assert re.search(r"starting core1 \(core\), core2 \(core\), core3 \(core\), gateway \(gateway\)", out)

    # STOMP through the gateway's 61613: the README's example, receipted and acked
    stomp = Client(SimpleNamespace(stomp_address=("127.0.0.1", world.ports[61613])), "1.2").connect("admin", "admin")
    stomp.subscribe("/queue/orders", "1", ack="client-individual")
    stomp.send("/queue/orders", "hello", persistent="true")
    message = stomp.rec.wait_messages(1)[0]
    assert (message.headers["destination"], message.body) == ("/queue/orders", "hello")
    stomp.ack(message)
    core = holder(world, "orders")

    # AMQP through 5672 and through the multi-protocol 61616: the same user, the same core
    for port in (world.ports[5672], world.ports[61616]):
        conn = amqp(port)
        conn.create_sender("kept").send(Message(body=f"via {port}", durable=True))
        conn.close()
    assert holder(world, "kept") == core
    # the core sees the client's own address (PROXY protocol v2 from the gateway), not the gateway's
    [seen] = status(world.cores[core])["connections"]
    host, port = stomp.conn.transport.socket.getsockname()[:2]
    assert (seen["user"], seen["remote"], seen["proxy_version"]) == ("admin", f"{host}:{port}", "V2")
    assert seen["proxy_address"] != seen["remote"]
    [acceptor] = [a for a in status(world.ports[8161])["acceptors"] if a["name"] == "stomp"]
    assert (acceptor["forwarded"], acceptor["relayed"]) == (1, 1)  # the relay engine carries it
    stomp.disconnect()

    # kill -9 the core: the supervisor starts it again, and it kept both messages
    before = status(world.cores[core])
    os.kill(before["pid"], signal.SIGKILL)
    wait_for(lambda: f"{core}: exited (signal KILL)" in world.output(), TIMEOUT, what="the supervisor saw the kill")
    after = wait_for(
        lambda: (s := status(world.cores[core])) and s["pid"] != before["pid"] and s,
        TIMEOUT,
        interval=0.1,
        what=f"{core} restarted",
    )
    assert after["node_id"] == before["node_id"]
    wait_all_ready(world)
    conn = amqp(world.ports[5672])
    receiver = conn.create_receiver("kept", credit=10)
    bodies = sorted(receiver.receive(timeout=TIMEOUT).body for _ in range(2))
    receiver.accept()
    conn.close()
    assert bodies == sorted(f"via {world.ports[p]}" for p in (5672, 61616))
    assert re.search(rf"{core}: restarting in [0-9.]+ s", world.output())

    # SIGTERM: gateway first, then the cores; every node exits and so does junction up
    pids = [status(port)["pid"] for port in (world.ports[8161], *world.cores.values())]
    world.proc.send_signal(signal.SIGTERM)
    assert world.proc.wait(60) == 0
    out = world.output()
    assert out.rstrip().endswith("junction up: stopped")
    assert out.index("gateway: stopped") < min(out.index(f"{c}: stopped") for c in world.cores)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def add_users(folder, names) -> None:
    """Users (password = name, role amq) in the appliance's one users file, as an operator adds
    them: ``junction user add``, the first as a process, the others by its main() in this
    process (30 interpreters started one after the other took up to 84 s on a busy machine)."""
    for n, name in enumerate(names):
        argv = ["user", "add", "--config", str(folder / "gateway.xml"), "--password", name, "--role", "amq", name]
        if n == 0:
            subprocess.run([sys.executable, "-m", "junction", *argv], check=True, capture_output=True,
                           env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            assert junction_main(argv) == 0, argv


def home_core(world, user: str) -> str:
    """The core a user's connections are forwarded to (the gateway routes by user name)."""

    def find():
        for name, port in world.cores.items():
            if any(c["user"] == user for c in (status(port) or {}).get("connections", [])):
                return name
        return None

    return wait_for(find, TIMEOUT, what=f"{user}'s connection on a core")


def test_the_cores_are_a_cluster_messages_reach_consumers_on_every_core_once(appliance_with_users):
    world = appliance_with_users
    # 30 users: the gateway hashes user names over three cores whose node ids are new each run,
    # so all three cores get some of them (a miss has odds of 3 * (2/3)**30, about 1 in 66,000)
    users = CLUSTER_TEST_USERS
    wait_all_ready(world)
    for port in world.cores.values():
        wait_for(lambda p=port: len([b for c in status(p)["cluster"]["connections"] for b in c["bridges"]
                                     if b["state"] == "open"]) == 2, TIMEOUT, what="each core linked to the other two")
    gateway = SimpleNamespace(stomp_address=("127.0.0.1", world.ports[61613]))
    clients, homes = {}, {}
    for user in users:  # until the users seen cover the three cores
        clients[user] = Client(gateway, "1.2").connect(user, user)
        homes[user] = home_core(world, user)
        if len(set(homes.values())) == 3:
            break
    producer = users[0]
    consumers = [u for u in clients if homes[u] != homes[producer]]
    assert len({homes[u] for u in consumers}) == 2, f"the users should spread over the cores: {homes}"
    for user in consumers:
        clients[user].subscribe("/queue/jobs", user)
    for name, port in world.cores.items():
        want = {homes[u] for u in consumers} - {name}
        wait_for(lambda p=port, w=want: {world_core_name(world, b["node_id"]) for b in status(p)["cluster"]["remote_bindings"]
                                         if b["queue"] == "jobs" and b["consumers"] > 0} >= w, TIMEOUT,
                 what=f"{name} knows the remote consumers")
    bodies = [f"job-{i}" for i in range(60)]
    for body in bodies:
        clients[producer].send("/queue/jobs", body, persistent="true")
    wait_for(lambda: sum(len(clients[u].rec.messages) for u in consumers) >= 60, TIMEOUT, what="60 deliveries")
    got = [m.body for u in consumers for m in clients[u].rec.messages]
    assert sorted(got) == sorted(bodies), "every message exactly once"
    assert len({homes[u] for u in consumers if clients[u].rec.messages}) == 2, "both other cores got a share"
    # (counted when the other core confirms it stored a message, which may follow its delivery)
    wait_for(lambda: status(world.cores[homes[producer]])["cluster"]["messages_forwarded"] == 60, TIMEOUT,
             what="60 messages forwarded and confirmed")
    for client in clients.values():
        client.disconnect()


def world_core_name(world, node_id: str) -> str | None:
    for name, port in world.cores.items():
        if (status(port) or {}).get("node_id") == node_id:
            return name
    return None


def test_an_invalid_appliance_is_refused_with_every_problem(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    copy_appliance(folder)
    (folder / "core2.xml").write_text((folder / "core2.xml").read_text().replace("<name>core2</name>", "<name>core1</name>"))
    gateway = (folder / "gateway.xml").read_text()
    (folder / "gateway.xml").write_text(gateway.replace("<key-type>USER_NAME</key-type>", "<key-type>USERNAME</key-type>"))
    result = subprocess.run(
        [sys.executable, "-m", "junction", "up", "--etc", str(folder), "--no-status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
    )
    assert result.returncode == 2
    assert "is not valid" in result.stderr
    assert "node name core1 is also used by" in result.stderr
    assert re.search(r"gateway\.xml:\d+: .*USERNAME", result.stderr)
    assert not (folder / "data").exists()  # nothing was started


def test_a_node_whose_port_is_taken_says_so_and_exits_3(tmp_path):
    folder = tmp_path / "taken"
    folder.mkdir()
    ports = copy_appliance(folder)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports[61617]))
        squatter.listen(1)
        result = subprocess.run(
            [sys.executable, "-m", "junction", "run", "--config", str(folder / "core1.xml")],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        )
    assert result.returncode == 3
    assert f"ERROR junction: could not start: Couldn't listen on 127.0.0.1:{ports[61617]}" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_real_artemis_jms_client_reaches_the_appliance_on_its_multi_protocol_port(appliance, jms):
    """A JMS application pointed at the appliance (CORE on 61616, sniffed) is forwarded to the
    user's core; what it sends there an AMQP consumer reads as Artemis converts it (a JMS
    MapMessage: an AMQP map with ``x-opt-jms-msg-type`` 2)."""
    world = appliance
    wait_all_ready(world)
    url = f"tcp://127.0.0.1:{world.ports[61616]}"
    results = jms.run(
        [
            {"op": "connect", "url": url, "user": "admin", "password": "admin"},
            {"op": "send", "queue": "jms.orders", "body": "order {i}", "count": 3},
            {"op": "receive", "queue": "jms.orders", "count": 2},
            {"op": "send", "queue": "jms.orders", "type": "map", "body": {"id": {"int": 7}}},
        ]
    )
    assert [m["body"] for m in results[2]["messages"]] == ["order 0", "order 1"]
    assert holder(world, "jms.orders") in world.cores  # on one core, the user's
    conn = amqp(world.ports[5672])
    try:
        receiver = conn.create_receiver("jms.orders")
        bodies = []
        for _ in range(2):
            m = receiver.receive(timeout=TIMEOUT)
            bodies.append((m.body, (m.annotations or {}).get("x-opt-jms-msg-type")))
            receiver.accept()
    finally:
        conn.close()
    assert bodies == [("order 2", 5), ({"id": 7}, 2)]
    gw = status(world.ports[8161])
    decisions = {a["name"]: a.get("decisions") for a in gw["acceptors"]}
    assert decisions["all"] == {"forwarded": 1}


def test_the_real_activemq_classic_client_reaches_the_appliance_on_its_multi_protocol_port(appliance, openwire_clients, tmp_path):
    """An ActiveMQ Classic application pointed at the appliance (OpenWire on 61616, sniffed) is
    forwarded to the user's core, with both real clients (Debian's 5.17 and the 6.x): a queue, a
    topic, and a durable subscription that keeps what was published while its subscriber was
    away, across a reconnect through the gateway.  What it sent an AMQP consumer reads there."""
    world = appliance
    wait_all_ready(world)
    url = f"tcp://127.0.0.1:{world.ports[61616]}"
    for name in sorted(CLASSIC_CLIENTS):
        client = openwire_clients(name, tmp_path / f"openwire-{name}")
        try:
            tag = name.replace(".", "")
            connect = {"op": "connect", "url": url, "user": "admin", "password": "admin", "clientId": f"app-{tag}"}
            results = client.run(
                [
                    connect,
                    {"op": "send", "queue": f"ow.orders.{tag}", "body": "order {i}", "count": 3},
                    {"op": "receive", "queue": f"ow.orders.{tag}", "count": 2},
                    {"op": "consumer", "id": "news", "topic": f"ow.news.{tag}"},
                    {"op": "consumer", "id": "away", "topic": f"ow.events.{tag}", "durable": "audit"},
                    {"op": "send", "topic": f"ow.news.{tag}", "body": "news {i}", "count": 2},
                    {"op": "receive", "consumer": "news", "count": 2},
                    {"op": "close_consumer", "id": "away"},
                    {"op": "send", "topic": f"ow.events.{tag}", "body": "while away {i}", "count": 2},
                    {"op": "close"},
                    connect,  # a new connection through the gateway, to the same core
                    {"op": "receive", "topic": f"ow.events.{tag}", "durable": "audit", "count": 2},
                    {"op": "unsubscribe", "name": "audit"},
                ]
            )
        finally:
            client.close()
        first, *_, again, kept, _ = results
        for opened in (first, again):
            assert (opened["remoteAddress"], opened["clientId"], opened["protocolVersion"]) == (
                url, f"app-{tag}", 12), opened
        assert [m["body"] for m in results[2]["messages"]] == ["order 0", "order 1"]
        assert [m["body"] for m in results[6]["messages"]] == ["news 0", "news 1"]
        assert [m["body"] for m in kept["messages"]] == ["while away 0", "while away 1"]
        assert holder(world, f"ow.orders.{tag}") in world.cores  # on one core, the user's
        conn = amqp(world.ports[5672])
        try:
            receiver = conn.create_receiver(f"ow.orders.{tag}")
            m = receiver.receive(timeout=TIMEOUT)
            receiver.accept()
        finally:
            conn.close()
        assert (m.body, (m.annotations or {}).get("x-opt-jms-msg-type")) == ("order 2", 5)
    gw = status(world.ports[8161])
    decisions = {a["name"]: a.get("decisions") for a in gw["acceptors"]}
    assert decisions["all"] == {"forwarded": 2 * len(CLASSIC_CLIENTS)}  # two connections per client
