"""End to end: traffic through ``junction up`` with stomp.py and proton, then the analytics jobs.

The shipped appliance writes every node's events into ``data/events`` beside
its configuration.  Real clients go through the gateway: two STOMP users
(whose connections the gateway forwards to their home cores), an AMQP
client, a producer whose messages nobody consumes, and a login that fails.
Once the appliance has stopped (SIGTERM: each node writes what it queued and
closes its files), the analytics jobs must report exactly what went through:
nothing lost, the unconsumed messages in flight in their queue, the failed
login refused, the gateway's readiness probes apart from the clients.

The audit runs as a user runs it, ``python -m junction analyze audit --json``
in a process of its own, with its own Spark and the product's settings (only
the tests' JVM options come through its environment, see
``tests/pipeline/sparkkit.py``), and must exit 0; the routing job runs at the
same time in this process, on the tests' shared Spark session, which starts
while the clients run.  (The command line's other cases are tested in
``tests/pipeline/test_cli.py``.)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from proton import Message

from junction.pipeline import routing
from tests.harness import REPO_ROOT
from tests.integration.test_appliance import TIMEOUT, amqp, run_appliance, wait_all_ready
from tests.integration.test_stomp_clients import Client
from tests.pipeline.sparkkit import START_TIMEOUT_S, analyze_env

pytestmark = pytest.mark.timeout(300)

USERS = ["alice", "bob"]
STOMP_MESSAGES = 10
AMQP_MESSAGES = 10
#: durable messages sent to a queue nobody consumes: in flight for the audit
LEFT = 5
#: seconds ``junction analyze audit`` may take, its JVM's start included, on a busy machine
AUDIT_TIMEOUT_S = 180


@pytest.fixture
def appliance(tmp_path):
    yield from run_appliance(tmp_path, users=USERS)


def failed_login(port: int) -> bytes:
    """A STOMP CONNECT with a wrong passcode through the gateway: what it answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\nlogin:bob\npasscode:wrong\n\n\0")
        answer = b""
        while b"\0" not in answer:
            data = sock.recv(4096)
            if not data:
                break
            answer += data
    return answer


def test_the_audit_and_routing_reports_tell_exactly_what_went_through_the_appliance(spark_soon, appliance, tmp_path):
    world = appliance
    began = time.monotonic()
    wait_all_ready(world)
    # (the tests' Spark session started with spark_soon, in the background: it takes seconds)
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
    for i in range(LEFT):
        producer.send("/queue/audit-left", f"left{i}", persistent="true")
    assert failed_login(world.ports[61613]).startswith(b"ERROR")
    consumer.disconnect()
    producer.disconnect()
    # the acknowledgements are journaled before the receipts of the DISCONNECTs; stopping the
    # appliance makes every node write what it queued and close its event files
    world.proc.send_signal(signal.SIGTERM)
    assert world.proc.wait(60) == 0, world.output()[-3000:]

    events = world.folder / "data" / "events"
    names = sorted(p.name for p in events.glob("*.jsonl"))
    assert {n.split("-")[1] for n in names} == {"gateway", "core1", "core2", "core3"}, names

    analysed = time.monotonic()
    audit_out = tmp_path / "audit"
    audit_run = subprocess.Popen(
        [sys.executable, "-m", "junction", "analyze", "audit", "--events", str(events), "--out", str(audit_out),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=analyze_env(dict(os.environ, PYTHONPATH=str(REPO_ROOT), JUNCTION_PROGRESS="0")),
    )
    try:
        spark = spark_soon.result(timeout=START_TIMEOUT_S)
        check_routing(spark, events, tmp_path)
        routed = time.monotonic()
        stdout, stderr = audit_run.communicate(timeout=AUDIT_TIMEOUT_S)
    finally:
        if audit_run.poll() is None:
            audit_run.kill()
            audit_run.communicate()
    print(f"[appliance-analytics] traffic {analysed - began:.1f} s, routing (in process) {routed - analysed:.1f} s, "
          f"junction analyze audit {time.monotonic() - analysed:.1f} s")
    check_audit(spark, audit_run.returncode, stdout, stderr, audit_out)


def check_audit(spark, code, stdout, stderr, out) -> None:
    """``junction analyze audit --json``'s exit status 0 and its figures: nothing lost, the
    messages left in flight in their queue."""
    assert code == 0, (code, stdout, stderr[-3000:])
    result = json.loads(stdout)
    figures = result["summary"]
    assert (result["job"], result["exit_code"]) == ("audit", 0)
    assert (figures["sent"], figures["acknowledged"]) == (STOMP_MESSAGES + AMQP_MESSAGES + LEFT,
                                                         STOMP_MESSAGES + AMQP_MESSAGES), figures
    assert (figures["lost"], figures["duplicated"], figures["unexpected"], figures["out_of_order"]) == (0, 0, 0, 0)
    assert figures["in_flight"] == LEFT, figures
    assert set(result["tables"]) >= {"lost", "in_flight", "latency_by_address"}
    assert result["tables"]["in_flight"] == str(out / "in_flight")
    in_flight = spark.read.parquet(result["tables"]["in_flight"]).collect()
    assert sorted((r["address"], r["queue"]) for r in in_flight) == [("audit-left", "audit-left")] * LEFT
    assert result["report"] == str(out / "audit.html") and os.path.getsize(result["report"]) > 10_000
    assert "Traceback" not in stderr


def check_routing(spark, events, tmp_path) -> None:
    routed = routing.run(spark, str(events), str(tmp_path / "routing"))
    figures = routed.summary
    # bob and alice over STOMP, admin over AMQP (three connections), and bob's refused login
    assert figures["routed"] == 4, figures
    assert figures["decisions"]["refused"] == 1 and figures["refusals"] == {"unauthenticated": 1}, figures
    assert figures["decisions"]["forward"] + figures["decisions"]["local"] == 3, figures
    # the gateway's readiness probes reached the three cores: counted, but not as clients
    assert figures["connections"]["probe"] >= 3, figures
    assert os.path.getsize(routed.report) > 10_000
