"""End to end: traffic through ``junction up`` with stomp.py and proton, then the analytics jobs.

The shipped appliance writes every node's events into ``data/events`` beside
its configuration.  Real clients go through the gateway: two STOMP users
(whose connections the gateway forwards to their home cores), an AMQP
client, a producer whose messages nobody consumes, and a login that fails.
Once the appliance has stopped (SIGTERM: each node writes what it queued and
closes its files), the audit and routing jobs run in one Spark session (the
command line around them is tested in ``tests/pipeline/test_cli.py``) and
must report exactly what went through: nothing lost, the unconsumed messages
in flight in their queue, the failed login refused, the gateway's readiness
probes apart from the clients.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import time
from types import SimpleNamespace

import pytest
from proton import Message

from junction.pipeline import audit, routing
from junction.pipeline.common import get_spark
from tests.integration.test_appliance import TIMEOUT, amqp, run_appliance, wait_all_ready
from tests.integration.test_stomp_clients import Client
from tests.pipeline.test_audit import SMALL_INPUT_CONF

pytestmark = pytest.mark.timeout(300)

USERS = ["alice", "bob"]
STOMP_MESSAGES = 10
AMQP_MESSAGES = 10
#: durable messages sent to a queue nobody consumes: in flight for the audit
LEFT = 5


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


def test_the_audit_and_routing_reports_tell_exactly_what_went_through_the_appliance(appliance, tmp_path):
    world = appliance
    began = time.monotonic()
    wait_all_ready(world)
    # the Spark session's JVM starts while the clients run (it takes seconds)
    starting = concurrent.futures.ThreadPoolExecutor(1)
    session = starting.submit(get_spark, "local[2]")
    starting.shutdown(wait=False)
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
    spark = session.result(timeout=120)  # one Spark session for both jobs
    try:
        for key, value in SMALL_INPUT_CONF.items():  # a few hundred events: no generated code
            spark.conf.set(key, value)
        started = time.monotonic()
        check_reports(spark, events, tmp_path)
        print(f"[appliance-analytics] traffic {analysed - began:.1f} s, both jobs {time.monotonic() - started:.1f} s")
    finally:
        spark.stop()


def check_reports(spark, events, tmp_path) -> None:
    audited = audit.run(spark, str(events), str(tmp_path / "audit"))
    figures = audited.summary
    assert (figures["sent"], figures["acknowledged"]) == (STOMP_MESSAGES + AMQP_MESSAGES + LEFT,
                                                         STOMP_MESSAGES + AMQP_MESSAGES), figures
    assert (figures["lost"], figures["duplicated"], figures["unexpected"], figures["out_of_order"]) == (0, 0, 0, 0)
    assert figures["in_flight"] == LEFT and audited.exit_code == 0, figures
    in_flight = spark.read.parquet(audited.tables["in_flight"]).collect()
    assert sorted((r["address"], r["queue"]) for r in in_flight) == [("audit-left", "audit-left")] * LEFT
    assert os.path.getsize(audited.report) > 10_000 and set(audited.tables) >= {"lost", "latency_by_address"}

    routed = routing.run(spark, str(events), str(tmp_path / "routing"))
    figures = routed.summary
    # bob and alice over STOMP, admin over AMQP (three connections), and bob's refused login
    assert figures["routed"] == 4, figures
    assert figures["decisions"]["refused"] == 1 and figures["refusals"] == {"unauthenticated": 1}, figures
    assert figures["decisions"]["forward"] + figures["decisions"]["local"] == 3, figures
    # the gateway's readiness probes reached the three cores: counted, but not as clients
    assert figures["connections"]["probe"] >= 3, figures
    assert os.path.getsize(routed.report) > 10_000
