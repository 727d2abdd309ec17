"""AMQP settlement through the gateway: a sender asking rcv-settle-mode second.

The world of :mod:`tests.integration.test_gateway_stomp`: a broker core with
a ``gateway-in`` acceptor (``protocols=STOMP,AMQP``) and a gateway whose
``routed`` acceptor forwards AMQP to it (``routerMode=forward``).  The
client is python-qpid-proton's ``BlockingConnection``, whose
``BlockingSender.send`` returns only once the broker has settled the
delivery: with the core answering rcv-settle-mode ``first`` (as Artemis
does) and settling its outcome at once, the send completes through the
gateway as it does directly.
"""

from __future__ import annotations

import pytest
from proton import Delivery, Link, Message

from tests.integration.test_amqp_clients import RcvSettleSecond
from tests.integration.test_gateway_amqp import connect
from tests.integration.test_gateway_stomp import (
    TIMEOUT,
    make_core,
    make_gateway,
    new_id,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


def test_a_sender_asking_rcv_settle_second_completes_its_sends_through_the_gateway(broker_factory):
    core = make_core(broker_factory, "core1").start()
    params = ";routerMode=forward"
    gateway = make_gateway(broker_factory, [core], protocols="STOMP,AMQP", params=params).start()
    wait_ready(gateway, core1=True)
    conn = connect(gateway.routed_address, new_id("settle-second"))
    try:
        queue = new_id("settle-q")
        sender = conn.create_sender(queue, options=RcvSettleSecond())
        assert sender.link.remote_rcv_settle_mode == Link.RCV_FIRST  # the core's answer, passed through
        sent = [sender.send(Message(body=f"s{i}", durable=True)) for i in range(3)]  # each waits for settlement
        assert all(d.settled and d.remote_state == Delivery.ACCEPTED for d in sent)
        receiver = conn.create_receiver(queue, credit=10)
        got = []
        for _ in range(3):
            got.append(receiver.receive(timeout=TIMEOUT).body)
            receiver.accept()
        assert got == ["s0", "s1", "s2"]
    finally:
        conn.close()
