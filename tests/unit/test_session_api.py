"""What ServerSession offers protocol adapters beyond send/consume/ack: queries,
temporary queues, producer checks, subscription removal and the BLOCK wait.

The AMQP adapter uses only these (no reaching into the server); a new
protocol adapter uses the same calls.
"""

from __future__ import annotations

import pytest

from junction.brokercore.security import SecurityError
from junction.model import errors
from tests.unit.stomp_fixtures import (
    AddressSettings,
    Broker,
    Recorder,
    RoutingType,
    SecuritySetting,
)

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST


def test_address_query_reads_without_creating():
    b = Broker()
    s = b.session()
    assert s.address_query("orders") is None
    assert "orders" not in b.server.addresses
    b.queue("orders")
    b.queue("orders-fan", "orders", MULTI)
    found = s.address_query("orders")
    assert found.name == "orders" and found.routing_types == frozenset({ANY, MULTI})
    assert not found.auto_created


def test_queue_query_reads_without_creating():
    b = Broker()
    s = b.session()
    assert s.queue_query("jobs") is None
    assert "jobs" not in b.server.queues
    b.queue("jobs", "work", filter="colour = 'red'")
    b.send(s, "work", b"x", properties={"colour": "red"})
    s.create_consumer("work::jobs", Recorder(), credit_messages=0)
    found = s.queue_query("jobs")
    assert (found.name, found.address, found.routing_type, found.filter) == ("jobs", "work", ANY, "colour = 'red'")
    assert found.durable and not found.temporary
    assert (found.consumer_count, found.message_count) == (1, 1)


def test_a_temporary_queue_goes_with_its_session_or_on_request():
    b = Broker()
    s = b.session()
    s.create_temporary_queue("tmp-1", MULTI)
    s.create_temporary_queue("tmp-2", ANY)
    queue = s.queue_query("tmp-1")
    assert queue.temporary and not queue.durable and queue.routing_type == MULTI
    s.delete_temporary_queue("tmp-2")
    assert s.queue_query("tmp-2") is None and s.temporary_queues == {"tmp-1"}
    s.close()
    assert b.server.find_queue("tmp-1") is None


def test_check_producer_refuses_a_missing_address_that_is_not_auto_created():
    b = Broker(address_settings=[AddressSettings(match="#", auto_create_addresses=False)])
    s = b.session()
    with pytest.raises(errors.NonExistentAddressError, match="does not exist"):
        s.check_producer("nowhere")
    b.queue("somewhere")
    s.check_producer("somewhere")
    s.check_producer("somewhere::somewhere")


def test_check_producer_checks_send_and_create_address_permissions():
    b = Broker(
        users={"alice": ("pw", {"writers"})},
        security_settings=[SecuritySetting(match="#", permissions={"send": frozenset({"writers"})})],
    )
    alice = b.session(user="alice")
    alice.principal = b.security.authenticate("alice", "pw")
    b.queue("existing")
    alice.check_producer("existing")
    with pytest.raises(SecurityError):
        alice.check_producer("new-address")  # would be auto-created: createAddress is needed


def test_delete_unused_subscription_leaves_one_in_use_and_removes_an_idle_one():
    b = Broker()
    s = b.session(client_id="c1")
    consumer = s.create_consumer("news", Recorder(), routing_type=MULTI, subscription_queue="c1.sub")
    s.delete_unused_subscription("c1.sub")
    assert s.queue_query("c1.sub") is not None, "a consumer holds it"
    consumer.close()
    s.delete_unused_subscription("c1.sub")
    assert s.queue_query("c1.sub") is None
    s.delete_unused_subscription("c1.sub")  # gone already: nothing to do


def test_sends_blocked_until_the_address_has_room():
    b = Broker(address_settings=[AddressSettings(match="small", max_size_messages=1, address_full_policy="BLOCK")])
    s = b.session()
    b.queue("small")
    b.send(s, "small", b"1")
    assert not s.sends_blocked
    waiting = b.send(s, "small", b"2")
    assert s.sends_blocked and not waiting.called
    told = []
    s.when_unblocked(lambda: told.append(waiting.called))
    rec = Recorder()
    s.create_consumer("small", rec, routing_type=ANY)
    b.run()
    s.acknowledge(rec.refs[0])
    assert told == [True], "told once the waiting send went"
    assert not s.sends_blocked


def test_consumer_credit_set_outright_and_a_ref_avoided():
    b = Broker()
    s = b.session()
    b.queue("q")
    for body in (b"1", b"2"):
        b.send(s, "q", body)
    rec = Recorder()
    consumer = s.create_consumer("q", rec, routing_type=ANY, credit_messages=0, ack_returns_credit=False)
    b.run()
    assert rec.bodies == []
    assert consumer.set_credit(1) == 0
    consumer.deliver_now()  # no reactor turn needed
    assert rec.bodies == [b"1"]
    ref = rec.refs[0]
    consumer.avoid(ref)
    s.cancel(ref, redelivered=False)
    assert consumer.set_credit(5) == 0
    consumer.deliver_now()
    assert rec.bodies == [b"1", b"2"], "the avoided ref is not handed back to this consumer"
