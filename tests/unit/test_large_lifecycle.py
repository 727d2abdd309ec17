"""Large-message files on an in-memory broker: each goes with the last reference to it."""

from __future__ import annotations

import os

from junction.brokercore.large_messages import (
    NATIVE_KEY,
    LargeMessageStore,
    parse_reference,
    reference,
)
from tests.unit.stomp_fixtures import AddressSettings, Broker, Recorder, RoutingType

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST


def _broker(tmp_path, **kw) -> Broker:
    b = Broker(**kw)
    b.server.large_messages = LargeMessageStore(str(tmp_path / "large"))
    return b


def _send_large(b: Broker, session, address: str, data: bytes = b"body" * 100, routing_type=ANY) -> int:
    writer = b.server.large_messages.begin()
    writer.append(data)
    writer.finish(sync=False)
    b.send(session, address, b"", routing_type=routing_type, native={NATIVE_KEY: reference(writer.file_id, len(data))})
    b.run()
    return writer.file_id


def _files(tmp_path) -> list:
    return sorted(os.listdir(tmp_path / "large"))


def test_a_dead_lettered_copy_gets_a_file_of_its_own_and_each_goes_with_its_message(tmp_path):
    b = _broker(tmp_path, address_settings=[AddressSettings(
        match="q", dead_letter_address="DLA", max_delivery_attempts=1, auto_create_dead_letter_resources=False,
    )])
    s = b.session()
    b.queue("q")
    dlq = b.queue("DLQ", "DLA")
    rec = Recorder()
    s.create_consumer("q", rec, routing_type=ANY)
    file_id = _send_large(b, s, "q")
    s.cancel(rec.refs[-1])  # the one failed delivery allowed: to the DLA
    b.run()
    (dead,) = list(dlq.waiting())
    copy_id = parse_reference(dead.message.native[NATIVE_KEY])[0]
    assert copy_id != file_id
    assert _files(tmp_path) == [f"{copy_id}.msg"]  # the original went with its message
    dlq_rec = Recorder()
    s.create_consumer("DLA::DLQ", dlq_rec, routing_type=ANY)
    b.run()
    s.acknowledge(dlq_rec.refs[-1])
    b.run()
    assert _files(tmp_path) == []


def test_a_message_on_two_queues_keeps_its_file_until_both_settle(tmp_path):
    b = _broker(tmp_path)
    s = b.session()
    recs = {}
    for name in ("a", "b"):  # two subscriptions: two queues
        recs[name] = Recorder()
        s.create_consumer("topic", recs[name], routing_type=MULTI)
    _send_large(b, s, "topic", routing_type=MULTI)
    s.acknowledge(recs["a"].refs[-1])
    b.run()
    assert len(_files(tmp_path)) == 1
    s.acknowledge(recs["b"].refs[-1])
    b.run()
    assert _files(tmp_path) == []


def test_a_large_message_routed_nowhere_loses_its_file(tmp_path):
    b = _broker(tmp_path)
    s = b.session()
    b.server.create_address("nobody", {MULTI})
    _send_large(b, s, "nobody", routing_type=MULTI)  # no subscription: dropped
    assert _files(tmp_path) == []
