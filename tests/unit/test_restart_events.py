"""What a broker core tells the delivery audit at a restart.

The journal keeps the records its newest files deleted (``Journal.load(tail_bytes=...)``);
the storage turns them, and the acknowledged queues of messages still held, into
``Recovered.settled``; ``MessageEvents.restarted`` writes ``node.started``,
``message.recovered`` and ``message.settled`` through ``EventLog.write_now``, which is
not bounded by the event queue.
"""

from __future__ import annotations

import os

from junction.brokercore.events import MessageEvents
from junction.brokercore.journal import FaultyFiles, Journal
from junction.brokercore.storage import JournalStorage
from junction.events.schema import decode
from junction.events.writer import EventLog
from junction.model.message import Message, RoutingType
from tests.unit.writer_fixtures import InlineReactor, settle


def _journal(files, reactor=None):
    return Journal(None, reactor=reactor or InlineReactor(), files=files, writer="inline", file_size=4096)


def _message(number: int, trace: bytes | None = None) -> Message:
    message = Message("orders", b"x" * 10, durable=True, routing_type=RoutingType.ANYCAST, message_id=number)
    if trace is not None:
        message.native["junction.trace"] = trace
    return message


def _history(files):
    """A run's journal: m1 acknowledged (deleted) early, then enough records to roll
    files, then m2 acknowledged on queue 7 of its two, m3 (from another node) deleted, m4 held."""
    reactor = InlineReactor()
    journal = _journal(files, reactor)
    journal.load()
    journal.start()
    storage = JournalStorage(journal)
    storage.store_message(_message(1), [7], sync=True)
    storage.ack(1, 7, 0, sync=True)
    for n in range(100, 160):  # older files: stored and deleted long before the crash
        storage.store_message(_message(n), [7], sync=True)
        storage.ack(n, 7, 0)
    storage.store_message(_message(2), [7, 8], sync=True)
    storage.store_message(_message(3, b"other-node/77"), [8], sync=True)
    storage.store_message(_message(4), [7], sync=True)
    storage.ack(2, 7, 1)
    storage.ack(3, 8, 0, sync=True)
    settle(reactor)
    return journal


def _settled(recovered) -> dict:
    return {m.message_id: sorted(queues) for m, queues in recovered.settled}


def test_a_restart_reads_what_the_journals_newest_records_settled():
    files = FaultyFiles()
    _history(files)  # (a crash: never stopped)
    recovered = JournalStorage(_journal(files)).load(settled_tail_bytes=1)  # the newest file alone
    assert {m.message.message_id: sorted(m.refs) for m in recovered.messages} == {2: [8], 4: [7]}
    newest = _settled(recovered)
    assert {2: [7], 3: [8]}.items() <= newest.items()
    assert 1 not in newest and len(newest) < 20  # m1 and most others: in older files
    everything = JournalStorage(_journal(files)).load(settled_tail_bytes=1 << 30)
    assert newest.items() <= _settled(everything).items()  # (older files: reclaimed once all dead)
    assert JournalStorage(_journal(files)).load().settled == []  # not asked for: not kept


def test_restarted_writes_the_marker_then_a_recovered_and_a_settled_event_per_reference(tmp_path):
    files = FaultyFiles()
    _history(files)
    recovered = JournalStorage(_journal(files)).load(settled_tail_bytes=1)
    log = EventLog(str(tmp_path), "core1", "node-1", clock=lambda: 5.0, max_queued=1)  # far fewer than written
    log.start()
    MessageEvents(log, "node-1").restarted(recovered, {7: "orders", 8: "audit"}, persistent=True, paged=["big"])
    log.stop()
    events = []
    for name in sorted(n for n in os.listdir(tmp_path) if n.endswith(".jsonl")):
        with open(tmp_path / name, "rb") as fh:
            events += [decode(line) for line in fh.read().splitlines()]
    assert [(e.kind, e.ts) for e in events][:1] == [("node.started", 5000.0)]
    settled = {(f"node-1/{m.message_id}" if m.message_id != 3 else "other-node/77", {7: "orders", 8: "audit"}[q])
               for m, queues in recovered.settled for q in queues}
    assert {("node-1/2", "orders"), ("other-node/77", "audit")} <= settled  # (the trace id a message carries)
    assert events[0].fields == {"recovered": 2, "settled": len(settled), "persistent": True,
                                "queues": ["audit", "orders"], "paged": ["big"]}
    assert sorted((e.kind, e.get("message_id"), e.get("queue")) for e in events[1:]) == sorted(
        [("message.recovered", "node-1/2", "audit"), ("message.recovered", "node-1/4", "orders")]
        + [("message.settled", m, q) for m, q in settled]
    )
    assert log.dropped == 0
