"""Seed 003's broker-cluster guarantees about destinations, with real nodes on loopback.

Home brokers route to remote consumers and a topic message crosses to a node
once (tests/integration/test_cluster.py); here: local consumers preferred by
a destination setting, an administrator's queues present on every node,
auto-created destinations known to the cluster only once a consumer asks for
them, and temporary destinations known to the cluster while their connection
lives (and dropped when it goes, or when its node stays unreachable past
connection-ttl).
"""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.clusterkit import (
    QUEUE_XML,
    StompClient,
    count_on,
    make_cluster,
    remote_bindings,
    send_across,
    start_all,
    wait_linked,
    wait_remote_binding,
)
from tests.harness import queue_status, wait_for

pytestmark = pytest.mark.timeout(120)

def test_local_delivery_preferred_keeps_messages_with_local_consumers(broker_factory):
    settings = '<address-setting match="orders"><local-delivery-preferred>true</local-delivery-preferred></address-setting>'
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], address_settings_xml=settings, extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    remote = StompClient(nodes["b"])
    remote.subscribe("/queue/orders")
    local = StompClient(nodes["a"])
    local.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"p{i}" for i in range(20)])
    assert len(local.wait_count(20)) == 20
    assert remote.bodies == []  # without the setting ON_DEMAND would have shared them
    local.close()
    wait_for(lambda: queue_status(nodes["a"], "orders")["consumer_count"] == 0, 5)
    producer.send_all("/queue/orders", ["after"])
    assert remote.wait_count(1) == ["after"]
    producer.close()
    remote.close()


def test_an_administrators_queue_exists_on_every_node(broker_factory):
    admin_xml = """
    <addresses>
      <address name="payments"><anycast><queue name="payments"/></anycast></address>
    </addresses>"""
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], node_xml={"a": admin_xml}))
    wait_linked(nodes)
    for name in ("b", "c"):
        status = wait_for(lambda n=name: queue_status(nodes[n], "payments"), 10, what=f"payments on {name}")
        assert status["durable"] and status["routing_type"] == "ANYCAST"
    # it is b's own now: it survives b's restart without a's help
    nodes["a"].stop()
    nodes["b"].stop()
    nodes["b"].start()
    assert queue_status(nodes["b"], "payments") is not None


def test_auto_created_destinations_are_propagated_only_with_a_consumer(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"]))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/made-by-a-producer", ["kept on a"])
    assert count_on(nodes["a"], "made-by-a-producer") == 1
    # the other nodes are not told about a's auto-created queue
    consumer = StompClient(nodes["c"])
    consumer.subscribe("/queue/asked-by-a-consumer")  # auto-created on c, with a consumer: propagated
    wait_remote_binding(nodes["a"], "asked-by-a-consumer", consumers=1)
    assert not remote_bindings(nodes["b"], "made-by-a-producer")
    assert not remote_bindings(nodes["c"], "made-by-a-producer")
    # a producer on a reaches it on c, and a creates no queue of its own for it
    producer.send_all("/queue/asked-by-a-consumer", [f"x{i}" for i in range(5)])
    assert sorted(consumer.wait_count(5)) == [f"x{i}" for i in range(5)]
    assert queue_status(nodes["a"], "asked-by-a-consumer") is None
    producer.close()
    consumer.close()


def _amqp(node) -> BlockingConnection:
    return BlockingConnection(node.amqp_url, timeout=10)


def test_temporary_destinations_live_with_their_connection(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], extra_cc_xml="<connection-ttl>1000</connection-ttl>"))
    wait_linked(nodes)
    # a temporary reply queue on a (an AMQP dynamic receiver)...
    owner = _amqp(nodes["a"])
    receiver = owner.create_receiver(None, dynamic=True)
    temp = receiver.link.remote_source.address
    [binding] = wait_remote_binding(nodes["b"], temp, consumers=1)
    # ...takes a reply sent on b
    sender = _amqp(nodes["b"])
    sender.create_sender(temp).send(Message(body="reply"))
    assert receiver.receive(timeout=10).body == "reply"
    receiver.accept()
    assert queue_status(nodes["b"], temp) is None  # b made no queue of its own for it
    # the connection goes: the temporary queue goes on every node
    owner.close()
    wait_for(lambda: not remote_bindings(nodes["b"], temp), 10, what="the temporary queue gone from b")
    sender.close()

    # a's node crashes: b keeps a's queues but drops its temporary ones after connection-ttl
    owner = _amqp(nodes["a"])
    receiver = owner.create_receiver(None, dynamic=True)
    temp = receiver.link.remote_source.address
    consumer = StompClient(nodes["a"])
    consumer.subscribe("/queue/durable-one")
    wait_remote_binding(nodes["b"], temp, consumers=1)
    wait_remote_binding(nodes["b"], "durable-one", consumers=1)
    nodes["a"].kill9()
    wait_remote_binding(nodes["b"], "durable-one", connected=False)
    wait_for(lambda: not remote_bindings(nodes["b"], temp), 10, what="a's temporary queue dropped after connection-ttl")
    assert remote_bindings(nodes["b"], "durable-one")


def _api(node, method: str, path: str, body=None):
    import json
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{node.mgmt_url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_administrators_queue_created_and_destroyed_through_the_api_follows_on_every_node(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"]))
    wait_linked(nodes)
    assert _api(nodes["b"], "POST", "/api/queues", {"name": "ledger", "routing_type": "ANYCAST"})[0] == 201
    for name in ("a", "c"):
        wait_for(lambda n=name: queue_status(nodes[n], "ledger"), 10, what=f"ledger on {name}")
    assert _api(nodes["b"], "POST", "/api/queues", {"name": "ledger"})[0] == 409
    assert _api(nodes["c"], "DELETE", "/api/queues/ledger")[0] == 200
    for name in ("a", "b"):
        wait_for(lambda n=name: queue_status(nodes[n], "ledger") is None, 10, what=f"ledger gone from {name}")
    assert _api(nodes["c"], "DELETE", "/api/queues/ledger")[0] == 404


def test_the_master_broker_keeps_the_change_record_and_offline_nodes_catch_up(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], extra_cc_xml="<master-broker>a</master-broker>"))
    wait_linked(nodes)
    assert nodes["a"].status()["cluster"]["master"]["is_master"]
    assert _api(nodes["b"], "POST", "/api/queues", {"name": "ledger"})[0] == 201
    wait_for(lambda: queue_status(nodes["c"], "ledger"), 10, what="ledger on c")
    wait_for(lambda: nodes["a"].status()["cluster"]["master"]["record_entries"] == 1, 10, what="recorded by a")

    # c is offline while ledger is destroyed and audit created
    nodes["c"].stop()
    assert _api(nodes["b"], "DELETE", "/api/queues/ledger")[0] == 200
    assert _api(nodes["a"], "POST", "/api/queues", {"name": "audit", "routing_type": "MULTICAST"})[0] == 201
    wait_for(lambda: queue_status(nodes["a"], "ledger") is None, 10, what="ledger gone from a")
    nodes["c"].start()
    wait_linked(nodes)
    wait_for(lambda: queue_status(nodes["c"], "audit") and queue_status(nodes["c"], "ledger") is None, 10,
             what="c caught up from the record")
    assert queue_status(nodes["c"], "audit")["routing_type"] == "MULTICAST"

    # a durable subscription made on c is recorded by the master too
    subscriber = StompClient(nodes["c"], client_id="app")
    subscriber.subscribe("/topic/news", "s1", headers={"durable-subscription-name": "feed"})
    wait_for(lambda: nodes["a"].status()["cluster"]["master"]["record_entries"] == 3, 10,
             what="the subscription recorded by a")
    subscriber.close()

    # the master goes: changes are refused with the reason, messages still flow
    nodes["a"].kill9()
    wait_linked({"b": nodes["b"], "c": nodes["c"]}, {"b": ["c"], "c": ["b"]})
    status, answer = _api(nodes["b"], "POST", "/api/queues", {"name": "refused"})
    assert status == 503 and "master broker" in answer["error"] and "unreachable" in answer["error"]
    refused = StompClient(nodes["b"], client_id="other")
    refused.conn.subscribe("/topic/news", id="s2", headers={"durable-subscription-name": "feed2"})
    error = refused.wait(lambda: refused.errors, what="an ERROR frame")[0]
    assert "master broker" in error.headers.get("message", "") + error.body
    assert send_across(nodes["b"], nodes["c"], "work", "still delivered") == ["still delivered"]
