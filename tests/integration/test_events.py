"""The event log of real nodes: what stomp.py and proton clients do, as events (``<junction><events>``)."""

from __future__ import annotations

import glob
import json
import os
from types import SimpleNamespace

import pytest
from proton import Message as ProtonMessage
from proton.utils import BlockingConnection

from tests.clusterkit import (
    QUEUE_XML,
    StompClient,
    make_cluster,
    start_all,
    wait_linked,
    wait_remote_binding,
)
from tests.harness import wait_for

EVENTS_XML = '<events directory="{dir}" max-file-age="1000"/>'


def read_events(directory) -> list[dict]:
    events = []
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            events.extend(json.loads(line) for line in f if line.strip())
    return events


def of_kind(events, kind, **match) -> list[dict]:
    return [e for e in events if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())]


def wait_events(directory, predicate, what: str, timeout: float = 15.0) -> list[dict]:
    """Poll the files until ``predicate(events)`` holds (the writer flushes every 0.2 s)."""
    found = []

    def ready():
        found[:] = read_events(directory)
        return predicate(found)

    wait_for(ready, timeout=timeout, what=what)
    return found


def test_stomp_and_amqp_traffic_is_logged_send_to_ack(broker_factory, tmp_path):
    events_dir = tmp_path / "events"
    node = broker_factory(
        "ev", extra_junction_xml=EVENTS_XML.format(dir=events_dir), extra_core_xml=QUEUE_XML,
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
    ).start()
    producer = StompClient(node, client_id="stomp-producer")
    producer.send_all(
        "/queue/orders", [f"m{i}" for i in range(10)], headers={"JMSXGroupID": "g1"}
    )
    consumer = StompClient(node, client_id="stomp-consumer")
    consumer.subscribe("/queue/orders", ack="client-individual")
    frames = consumer.wait(lambda: len(consumer.frames) >= 10 and list(consumer.frames), what="10 messages")
    for frame in frames[:9]:  # the tenth is left unacknowledged: delivered, then given back on close
        consumer.conn.ack(frame.headers["ack"])
    producer.close()
    consumer.close()
    # the STOMP consumer must be gone before the AMQP send, or it may get that message too
    wait_events(events_dir, lambda events: len(of_kind(events, "connection.closed")) >= 2, "2 closed connections")
    amqp = BlockingConnection(f"{node.host}:{node.amqp_port}")
    sender = amqp.create_sender("orders")
    sender.send(ProtonMessage(body="over amqp", durable=True))
    receiver = amqp.create_receiver("orders")
    got = []
    for _ in range(2):
        got.append(receiver.receive(timeout=10))
        receiver.accept()  # (settles the oldest unsettled delivery)
    amqp.close()
    assert sorted(m.body for m in got) == ["m9", "over amqp"]

    def complete(events):
        return (
            len(of_kind(events, "message.acknowledged")) >= 11
            and len(of_kind(events, "connection.closed")) >= 3
        )

    events = wait_events(events_dir, complete, "11 acknowledgements and 3 closed connections")
    node_id = node.status()["node_id"]
    sent = of_kind(events, "message.sent")
    assert len(sent) == 11
    ids = {e["message_id"] for e in sent}
    assert len(ids) == 11 and all(i.startswith(node_id + "/") for i in ids)
    stomp_sent = [e for e in sent if e["client_id"] == "stomp-producer"]
    assert len(stomp_sent) == 10
    assert {(e["address"], tuple(e["queues"]), e["durable"], e["group_id"]) for e in stomp_sent} == {
        ("orders", ("orders",), True, "g1")
    }
    acked = of_kind(events, "message.acknowledged")
    assert sorted(e["message_id"] for e in acked) == sorted(ids)  # each once
    delivered = of_kind(events, "message.delivered")
    # m9 twice: to the STOMP consumer (never acknowledged) and again over AMQP
    m9 = [e for e in delivered if e["client_id"] == "stomp-consumer"][9]["message_id"]
    assert [e["delivery_count"] for e in delivered if e["message_id"] == m9] == [1, 2]
    assert len(delivered) == 12
    accepted = of_kind(events, "connection.accepted")
    assert sorted(e["protocol"] for e in accepted) == ["AMQP", "STOMP", "STOMP"]
    closed = of_kind(events, "connection.closed")
    assert {e["conn"] for e in closed} == {e["conn"] for e in accepted}
    assert all(e["duration_ms"] >= 0 and e["node"] == "ev" and e["v"] == 1 for e in closed)
    # the status counts what the writer process reported, a moment after the lines are in the files
    status = wait_for(
        lambda: (s := node.status()["events"])["written"] >= len(events) and s, 5, what="the writer's count"
    )
    assert status["dropped"] == 0 and status["spool_bytes"] == 0 and status["writer_restarts"] == 0


def test_message_sampling_and_categories(broker_factory, tmp_path):
    events_dir = tmp_path / "events"
    node = broker_factory(
        "ev",
        extra_junction_xml=f'<events directory="{events_dir}" message-sample-rate="0" topology="false"/>',
        extra_core_xml=QUEUE_XML,
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
    ).start()
    client = StompClient(node)
    client.send_all("/queue/orders", ["a", "b"])
    client.close()
    events = wait_events(events_dir, lambda ev: of_kind(ev, "connection.closed"), "the closed connection")
    # no message is sampled; the node's restart marker is not a message's
    assert {e["kind"] for e in events} == {"connection.accepted", "connection.closed", "node.started"}


def test_a_restart_tells_what_the_journal_held_under_the_ids_the_messages_were_sent_with(broker_factory, tmp_path):
    """node.started, then a message.recovered per message the journal held, with its sent id; a
    broker core's connection.accepted names the client."""
    events_dir = tmp_path / "events"
    node = broker_factory(
        "ev", extra_junction_xml=EVENTS_XML.format(dir=events_dir), extra_core_xml=QUEUE_XML,
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
    ).start()
    producer = StompClient(node, client_id="keeper")
    producer.send_all("/queue/orders", ["k0", "k1", "k2"])
    producer.close()
    assert node.stop() == 0
    node.start()
    events = wait_events(
        events_dir, lambda ev: len(of_kind(ev, "node.started")) == 2 and len(of_kind(ev, "message.recovered")) == 3,
        "two starts and three recovered messages",
    )
    first, second = sorted(of_kind(events, "node.started"), key=lambda e: e["ts"])
    assert (first["recovered"], first["persistent"], second["recovered"], second["persistent"]) == (0, True, 3, True)
    assert "orders" in second["queues"] and second["paged"] == []
    recovered = of_kind(events, "message.recovered")
    sent = of_kind(events, "message.sent")
    assert sorted(e["message_id"] for e in recovered) == sorted(e["message_id"] for e in sent)
    assert {(e["queue"], e["address"], e["durable"], e["delivery_count"], e["ts"]) for e in recovered} == {
        ("orders", "orders", True, 0, second["ts"])
    }
    accepted = of_kind(events, "connection.accepted")
    assert [(e["client_id"], e["protocol"], e["user"]) for e in accepted] == [("keeper", "STOMP", None)]


def test_a_paged_message_is_sent_under_the_id_it_is_delivered_with(broker_factory, tmp_path):
    """A send that pages (address-full-policy PAGE) is logged under the message's own id, the one
    its delivery after depaging carries (not the id it had before paging gave it one)."""
    from tests.integration.test_paging import PAGE_SETTINGS, PREFIXES

    events_dir = tmp_path / "events"
    node = broker_factory(
        "ev", extra_junction_xml=EVENTS_XML.format(dir=events_dir), address_settings_xml=PAGE_SETTINGS,
        stomp_acceptor_params=PREFIXES,
    ).start()
    producer = StompClient(node)
    producer.send_all("/queue/paged.events", ["p" * 1024 for _ in range(40)])  # 40 KiB against 16 KiB
    producer.close()
    consumer = StompClient(node)
    consumer.subscribe("/queue/paged.events")
    consumer.wait_count(40)
    consumer.close()
    events = wait_events(events_dir, lambda ev: len(of_kind(ev, "message.acknowledged")) >= 40, "40 acknowledgements")
    sent = {e["message_id"] for e in of_kind(events, "message.sent")}
    assert len(sent) == 40 and sent == {e["message_id"] for e in of_kind(events, "message.delivered")}


def test_a_message_keeps_its_id_across_the_cluster(broker_factory, tmp_path):
    events_dir = tmp_path / "events"
    nodes = start_all(
        make_cluster(
            broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML, extra_junction_xml=EVENTS_XML.format(dir=events_dir)
        )
    )
    wait_linked(nodes)
    a, b = nodes["a"], nodes["b"]
    consumer = StompClient(b, client_id="consumer-on-b")
    consumer.subscribe("/queue/orders")
    wait_remote_binding(a, "orders", consumers=1)
    producer = StompClient(a, client_id="producer-on-a")
    producer.send_all("/queue/orders", [f"x{i}" for i in range(5)])
    assert sorted(consumer.wait_count(5)) == [f"x{i}" for i in range(5)]
    producer.close()
    consumer.close()
    events = wait_events(
        events_dir,
        lambda ev: len(of_kind(ev, "message.forwarded")) >= 5 and len(of_kind(ev, "message.acknowledged")) >= 5,
        "5 forwarded and 5 acknowledged",
    )
    b_id = b.status()["node_id"]
    sent = of_kind(events, "message.sent", node="a")
    assert len(sent) == 5 and all(e["queues"] == [] for e in sent)  # only remote queues wanted them
    ids = {e["message_id"] for e in sent}
    forwarded = of_kind(events, "message.forwarded", node="a")
    assert {e["message_id"] for e in forwarded} == ids and {e["to_node"] for e in forwarded} == {b_id}
    assert {e["message_id"] for e in of_kind(events, "message.delivered", node="b")} == ids
    assert {e["message_id"] for e in of_kind(events, "message.acknowledged", node="b")} == ids
    ups = of_kind(events, "topology.link_up")
    assert {(e["node"], e["direction"]) for e in ups} == {("a", "out"), ("a", "in"), ("b", "out"), ("b", "in")}



def test_the_gateway_logs_its_routing_decisions_and_the_bytes_it_forwarded(broker_factory, tmp_path):
    from stomp.exception import ConnectFailedException

    from tests.integration.test_gateway_stomp import make_core, make_gateway, wait_ready
    from tests.integration.test_stomp_clients import Client

    events_dir = tmp_path / "events"
    core = make_core(broker_factory, "core1").start()
    gateway = make_gateway(
        broker_factory, [core], key="CLIENT_ID", extra_junction_xml=EVENTS_XML.format(dir=events_dir)
    ).start()
    wait_ready(gateway, core1=True)
    core_id = core.status()["node_id"]
    address = SimpleNamespace(stomp_address=gateway.routed_address)
    client = Client(address, "1.2").connect("app", "app-secret", **{"client-id": "tenant-7"})
    client.subscribe("/queue/jobs", "s1")
    client.send("/queue/jobs", "x" * 1000)
    assert client.rec.wait_messages(1)[0].body == "x" * 1000
    client.disconnect()
    core.stop()
    wait_ready(gateway, core1=False)
    refused = Client(address, "1.2")
    with pytest.raises(ConnectFailedException):
        refused.connect("app", "app-secret", **{"client-id": "tenant-8"})
    refused.close_quietly()

    def complete(events):
        return len(of_kind(events, "connection.routed")) == 2 and len(of_kind(events, "connection.closed", node="gateway")) == 2

    events = wait_events(events_dir, complete, "two routing decisions and two closed connections")
    routed = {e["key"]: e for e in of_kind(events, "connection.routed")}
    forwarded, no = routed["tenant-7"], routed["tenant-8"]
    assert (forwarded["router"], forwarded["key_type"], forwarded["transformed_key"]) == ("r", "CLIENT_ID", "tenant-7")
    assert (forwarded["target"], forwarded["decision"], forwarded["reason"]) == ("core1", "forward", "policy")
    assert forwarded["target_node_id"] == core_id and forwarded["cache_hit"] is False
    assert forwarded["user"] == "app" and forwarded["client_id"] == "tenant-7" and forwarded["decision_us"] >= 0
    assert (no["decision"], no["target"], no["reason"]) == ("refused", None, "REFUSED_UNAVAILABLE: unavailable")
    closed = {e["conn"]: e for e in of_kind(events, "connection.closed", node="gateway")}
    carried = closed[forwarded["conn"]]
    # the client sent CONNECT, SUBSCRIBE, SEND (1000 bytes) and DISCONNECT; it got CONNECTED, the MESSAGE...
    assert carried["bytes_in"] > 1000 and carried["bytes_out"] > 1000
    accepted = {e["conn"]: e for e in of_kind(events, "connection.accepted", node="gateway")}
    assert accepted[forwarded["conn"]]["protocol"] == "STOMP" and accepted[forwarded["conn"]]["acceptor"] == "routed"
