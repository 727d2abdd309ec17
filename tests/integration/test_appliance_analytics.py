"""End to end: traffic through ``junction up`` with stomp.py and proton, then ``junction analyze``.

The shipped appliance writes every node's events into ``data/events`` beside
its configuration.  Real clients go through the gateway: two STOMP users
(whose connections the gateway forwards to their home cores) and an AMQP
client.  Once the appliance has stopped (SIGTERM: each node writes what it
queued and closes its files), ``junction analyze audit`` and ``routing`` run
as a user runs them, as processes, and must report exactly what was sent,
with nothing lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from proton import Message

from tests.harness import REPO_ROOT
from tests.integration.test_appliance import TIMEOUT, amqp, run_appliance, wait_all_ready
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(300)

USERS = ["alice", "bob"]
STOMP_MESSAGES = 30
AMQP_MESSAGES = 20


@pytest.fixture
def appliance(tmp_path):
    yield from run_appliance(tmp_path, users=USERS)


def analyze(job: str, events, out) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), JUNCTION_PROGRESS="0")
    done = subprocess.run(
        [sys.executable, "-m", "junction", "analyze", job, "--events", str(events), "--out", str(out),
         "--master", "local[2]", "--json"],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert done.stdout.strip(), f"junction analyze {job} printed nothing; stderr:\n{done.stderr}"
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_the_audit_and_routing_reports_tell_exactly_what_went_through_the_appliance(appliance, tmp_path):
    world = appliance
    wait_all_ready(world)
    gateway = SimpleNamespace(stomp_address=("127.0.0.1", world.ports[61613]))
    consumer = Client(gateway, "1.2").connect("alice", "alice")
    consumer.subscribe("/queue/audit-stomp", "s1", ack="client-individual")
    producer = Client(gateway, "1.2").connect("bob", "bob")
    for i in range(STOMP_MESSAGES):
        producer.send("/queue/audit-stomp", f"s{i}", persistent="true")  # (waits for its RECEIPT)
    received = consumer.rec.wait_messages(STOMP_MESSAGES, timeout=TIMEOUT)
    for message in received:
        consumer.ack(message)
    assert sorted(m.body for m in received) == sorted(f"s{i}" for i in range(STOMP_MESSAGES))
    conn = amqp(world.ports[5672])
    sender = conn.create_sender("audit-amqp")
    for i in range(AMQP_MESSAGES):
        sender.send(Message(body=f"a{i}", durable=True))
    receiver = conn.create_receiver("audit-amqp", credit=AMQP_MESSAGES)
    bodies = []
    for _ in range(AMQP_MESSAGES):
        bodies.append(receiver.receive(timeout=TIMEOUT).body)
        receiver.accept()
    conn.close()
    assert sorted(bodies) == sorted(f"a{i}" for i in range(AMQP_MESSAGES))
    consumer.disconnect()
    producer.disconnect()
    # the acknowledgements are journaled before the receipts of the DISCONNECTs; stopping the
    # appliance makes every node write what it queued and close its event files
    world.proc.send_signal(signal.SIGTERM)
    assert world.proc.wait(60) == 0, world.output()[-3000:]

    events = world.folder / "data" / "events"
    names = sorted(p.name for p in events.glob("*.jsonl"))
    assert {n.split("-")[1] for n in names} == {"gateway", "core1", "core2", "core3"}, names

    code, audit = analyze("audit", events, tmp_path / "audit")
    figures = audit["summary"]
    assert (figures["sent"], figures["acknowledged"]) == (STOMP_MESSAGES + AMQP_MESSAGES,) * 2, figures
    assert (figures["lost"], figures["duplicated"], figures["unexpected"], figures["out_of_order"]) == (0, 0, 0, 0)
    assert code == 0
    assert os.path.getsize(audit["report"]) > 10_000 and set(audit["tables"]) >= {"lost", "latency_by_address"}

    code, routing = analyze("routing", events, tmp_path / "routing")
    assert code == 0
    figures = routing["summary"]
    # bob and alice over STOMP, admin over AMQP: three connections through the gateway, none refused
    assert figures["routed"] == 3, figures
    assert sum(figures["decisions"].values()) == 3 and figures["decisions"]["refused"] == 0, figures
    assert os.path.getsize(routing["report"]) > 10_000
