"""The delivery audit over a kill -9: nothing lost, nothing unexpected, and what is left is in flight.

A real broker writes its events (``<junction><events>``) while a raw STOMP
producer sends durable messages with receipts and a consumer acknowledges
some of them; the broker is SIGKILLed at an acknowledgement receipt, as in
``test_kill9.py``, and started again on the same data directory.  The crash
takes the event log's last moments with it (events not yet handed to the
event writer): sent events of messages the journal had accepted, deliveries
and acknowledgements the journal had recorded.  At start the node writes
``node.started``, ``message.recovered`` for what its journal held and
``message.settled`` for what its journal's newest records settled, so the
audit (run in process on the same files, once the broker stopped cleanly)
must still find every receipted message: acknowledged, or in flight in the
queue the test leaves unconsumed -- 0 lost, 0 unexpected, exit status 0.
"""

from __future__ import annotations

import collections
import random

import pytest

from junction.pipeline import audit
from tests.pipeline.sparkkit import START_TIMEOUT_S
from tests.reliability.test_kill9 import (
    ROUTING,
    Cycle,
    RawStomp,
    _seed,
    check_cycle_before_crash,
    drain_queue,
    fail_on_error,
    pump,
    run_until_kill,
    send_all,
)

pytestmark = pytest.mark.timeout(300)

#: messages of the crash cycle, and where (in SEND receipts) the kill comes
MESSAGES = 2_000
KILL_AT = (500, 1_500)
#: durable messages left unconsumed on another queue: the audit lists them in flight
LEFT = 40
LEFT_QUEUE = "/queue/left"
SEND_TIMEOUT = 20.0


def _leave(broker, count: int) -> set[int]:
    """Send ``count`` durable messages to LEFT_QUEUE with receipts; nobody consumes them."""
    producer = RawStomp(broker, "left")
    receipted: set[int] = set()
    try:
        for seq in range(count):
            producer.send(
                "SEND",
                [("destination", LEFT_QUEUE), ROUTING, ("persistent", "true"), ("receipt", f"l{seq}")],
                f"left={seq}".encode(),
            )
        while len(receipted) < count and not producer.closed:
            for c, f in pump([producer], 0.5):
                fail_on_error(c, f)
                if f.command == "RECEIPT":
                    receipted.add(int(f.headers["receipt-id"][1:]))
    finally:
        producer.close()
    assert len(receipted) == count
    return receipted


def test_an_audit_over_a_kill9_under_receipted_load_finds_nothing_lost_and_lists_what_is_left(
    spark_soon, broker_factory, tmp_path
):
    rng = random.Random(_seed("audit-kill9"))
    events = tmp_path / "events"
    broker = broker_factory("audited", extra_junction_xml=f'<events directory="{events}"/>').start()
    cycle = Cycle(first_seq=0, count=MESSAGES, kill_at=rng.randint(*KILL_AT))
    run_until_kill(broker, cycle, ack_ratio=0.5, label="audit-kill9")  # kill -9, then started again
    check_cycle_before_crash(cycle, "audit-kill9")
    rest = list(range(max(cycle.sent) + 1, MESSAGES))
    receipted, _seconds = send_all(broker, rest, label="audit-kill9-rest")
    drained = drain_queue(broker, label="audit-kill9")
    assert (cycle.receipted | receipted) - cycle.acks_sent <= set(drained.delivered)  # (test_kill9's guarantee)
    _leave(broker, LEFT)
    assert broker.stop() == 0  # a clean stop: the node's last events reach the files

    spark = spark_soon.result(timeout=START_TIMEOUT_S)  # (the tests' session, started with the test)
    result = audit.run(spark, str(events), str(tmp_path / "audit"), examples=5)
    s = result.summary
    print(f"[audit-kill9] kill after {cycle.kill_at} receipts: {s}")
    assert (s["lost"], s["unexpected"]) == (0, 0), s
    assert result.exit_code == 0
    assert s["node_starts"] == 2  # the first start and the one after the kill
    # every receipted message is accounted for: acknowledged (or settled by the journal when its
    # acknowledgement's event went with the crash) or, for the ones left, in flight in their queue
    assert s["in_flight"] == LEFT, s
    in_flight = spark.read.parquet(result.tables["in_flight"]).collect()
    assert len(in_flight) == LEFT and {(r["queue"], r["address"]) for r in in_flight} == {(LEFT_QUEUE, LEFT_QUEUE)}
    statuses = collections.Counter(r["status"] for r in spark.read.parquet(result.tables["audit_messages"]).collect())
    assert set(statuses) <= {"acknowledged", "settled", "in_flight"}, statuses
    assert sum(statuses.values()) >= len(cycle.receipted | receipted) + LEFT, statuses
