"""Broker clusters with real nodes on loopback: load balancing, max-hops, redistribution, links.

Each test starts three or four ``junction run`` processes, each in its own
directory with its own ports, linked by cluster connections over static
connectors (or UDP discovery), and checks with stomp.py clients and the
management API where every message lands.
"""

from __future__ import annotations

import pytest

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

def test_on_demand_forwards_only_to_nodes_with_consumers(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], mode="ON_DEMAND", extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    consumer = StompClient(nodes["b"])
    consumer.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    producer = StompClient(nodes["a"])
    bodies = [f"order-{i}" for i in range(30)]
    producer.send_all("/queue/orders", bodies)
    got = consumer.wait_count(30)
    assert sorted(got) == sorted(bodies)
    # c has no consumer: nothing went there; a kept nothing
    assert count_on(nodes["c"], "orders") == 0
    wait_for(lambda: count_on(nodes["a"], "orders") == 0, 5, what="a's queue empty")
    # (a forwarded message counts once b confirms it stored it, which may follow its delivery)
    wait_for(lambda: nodes["a"].status()["cluster"]["messages_forwarded"] == 30, 10, what="30 forwarded")
    # a node with consumers on both sides shares: round-robin between a's and b's consumers
    local = StompClient(nodes["a"])
    local.subscribe("/queue/orders")
    wait_for(lambda: queue_status(nodes["a"], "orders")["consumer_count"] == 1, 5)
    producer.send_all("/queue/orders", [f"more-{i}" for i in range(20)])
    local.wait_count(10)
    consumer.wait_count(40)
    assert len(local.bodies) == 10 and len(consumer.bodies) == 40
    for client in (consumer, producer, local):
        client.close()


def test_strict_round_robins_whatever_the_consumers(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], mode="STRICT", extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    wait_remote_binding(nodes["a"], "orders", consumers=0)
    wait_for(lambda: len(remote_bindings(nodes["a"], "orders")) == 2, 10, what="a knows both remote queues")
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"m{i}" for i in range(30)])
    for name in ("a", "b", "c"):
        wait_for(lambda n=name: count_on(nodes[n], "orders") == 10, 10, what=f"10 messages on {name}")
    producer.close()


def test_off_keeps_every_message_local(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], mode="OFF", extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    consumer = StompClient(nodes["b"])
    consumer.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"m{i}" for i in range(20)])
    assert count_on(nodes["a"], "orders") == 20
    assert consumer.bodies == []
    assert nodes["a"].status()["cluster"]["messages_forwarded"] == 0
    producer.close()
    consumer.close()


def test_chain_with_max_hops_two_reaches_the_far_end(broker_factory):
    # a -> b -> c, one way only (allow-direct-connections-only), as the seed's chain example
    links = {"a": ["b"], "b": ["c"], "c": []}
    nodes = make_cluster(
        broker_factory, ["a", "b", "c"], mode="ON_DEMAND", max_hops=2, links=links, allow_direct=True,
        extra_core_xml=QUEUE_XML,
    )
    # c has no cluster connection peers to link to, but must accept links: give it one to nobody
    start_all(nodes)
    wait_linked(nodes, {"a": ["b"], "b": ["c"], "c": []})
    consumer = StompClient(nodes["c"])
    consumer.subscribe("/queue/orders")
    # a learns c's queue through b, two hops away
    wait_remote_binding(nodes["a"], "orders", consumers=1, hops=2)
    producer = StompClient(nodes["a"])
    bodies = [f"chain-{i}" for i in range(20)]
    producer.send_all("/queue/orders", bodies)
    assert sorted(consumer.wait_count(20)) == sorted(bodies)
    assert count_on(nodes["b"], "orders") == 0
    assert count_on(nodes["a"], "orders") == 0
    assert nodes["b"].status()["cluster"]["messages_received"] >= 20
    producer.close()
    consumer.close()


def test_max_hops_one_does_not_see_past_the_neighbour(broker_factory):
    links = {"a": ["b"], "b": ["c"], "c": []}
    nodes = start_all(make_cluster(
        broker_factory, ["a", "b", "c"], max_hops=1, links=links, allow_direct=True, extra_core_xml=QUEUE_XML,
    ))
    wait_linked(nodes, {"a": ["b"], "b": ["c"], "c": []})
    consumer = StompClient(nodes["c"])
    consumer.subscribe("/queue/orders")
    wait_remote_binding(nodes["b"], "orders", consumers=1)
    # a knows b's queue (no consumers) but not c's
    wait_remote_binding(nodes["a"], "orders", consumers=0, hops=1)
    assert all(b["hops"] == 1 for b in remote_bindings(nodes["a"], "orders"))
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"m{i}" for i in range(10)])
    assert count_on(nodes["a"], "orders") == 10
    assert consumer.bodies == []
    producer.close()
    consumer.close()


def test_a_symmetric_cluster_forms_from_one_connector_each(broker_factory):
    # each node lists only "a"; b and c learn each other from a's topology
    links = {"a": ["b"], "b": ["a"], "c": ["a"]}
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], links=links, extra_core_xml=QUEUE_XML))
    wait_linked(nodes)


def test_redistribution_moves_messages_to_a_node_that_gains_a_consumer(broker_factory):
    settings = '<address-setting match="#"><redistribution-delay>0</redistribution-delay></address-setting>'
    nodes = start_all(make_cluster(
        broker_factory, ["a", "b", "c"], address_settings_xml=settings, extra_core_xml=QUEUE_XML,
    ))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    bodies = [f"r{i}" for i in range(25)]
    producer.send_all("/queue/orders", bodies)
    assert count_on(nodes["a"], "orders") == 25  # no consumer anywhere: they stay where they were sent
    consumer = StompClient(nodes["b"])
    consumer.subscribe("/queue/orders")
    assert sorted(consumer.wait_count(25)) == sorted(bodies)
    wait_for(lambda: count_on(nodes["a"], "orders") == 0, 10, what="a's queue empty")
    assert nodes["a"].status()["cluster"]["messages_redistributed"] == 25
    producer.close()
    consumer.close()


def test_redistribution_delay_is_cancelled_by_a_returning_local_consumer(broker_factory):
    settings = '<address-setting match="#"><redistribution-delay>60000</redistribution-delay></address-setting>'
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], address_settings_xml=settings, extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"d{i}" for i in range(10)])
    remote = StompClient(nodes["b"])
    remote.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    # the delay has started on a; a local consumer arrives and takes everything
    local = StompClient(nodes["a"])
    local.subscribe("/queue/orders")
    local.wait_count(10)
    assert remote.bodies == []
    assert nodes["a"].status()["cluster"]["redistributing"] == []
    for c in (producer, remote, local):
        c.close()


def test_redistribution_off_by_default(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"d{i}" for i in range(10)])
    remote = StompClient(nodes["b"])
    remote.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    # new messages go to b's consumer; the ten stay on a (redistribution-delay -1)
    producer.send_all("/queue/orders", ["after"])
    remote.wait_count(1)
    assert remote.bodies == ["after"]
    assert count_on(nodes["a"], "orders") == 10
    producer.close()
    remote.close()


def test_grouped_messages_are_not_redistributed(broker_factory):
    settings = '<address-setting match="#"><redistribution-delay>0</redistribution-delay></address-setting>'
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], address_settings_xml=settings, extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"g{i}" for i in range(5)], headers={"JMSXGroupID": "g1"})
    producer.send_all("/queue/orders", [f"u{i}" for i in range(5)])
    remote = StompClient(nodes["b"])
    remote.subscribe("/queue/orders")
    got = remote.wait_count(5)
    assert sorted(got) == [f"u{i}" for i in range(5)]
    wait_for(lambda: count_on(nodes["a"], "orders") == 5, 10, what="five grouped messages left on a")
    producer.close()
    remote.close()


def test_a_topic_message_crosses_once_for_several_subscriptions(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b"]))
    wait_linked(nodes)
    subscribers = [StompClient(nodes["b"]) for _ in range(3)]
    for s in subscribers:
        s.subscribe("/topic/news")
    wait_for(lambda: sum(1 for b in remote_bindings(nodes["a"]) if b["address"] == "news") == 3, 10,
             what="a knows the three subscriptions on b")
    local = StompClient(nodes["a"])
    local.subscribe("/topic/news")
    producer = StompClient(nodes["a"])
    bodies = [f"n{i}" for i in range(12)]
    producer.send_all("/topic/news", bodies)
    for s in [*subscribers, local]:
        assert sorted(s.wait_count(12)) == sorted(bodies)
    # one copy per message to b, not three (counted once b confirms it stored it)
    wait_for(lambda: nodes["a"].status()["cluster"]["messages_forwarded"] == 12, 10, what="12 forwarded")
    assert nodes["b"].status()["cluster"]["messages_received"] == 12
    for c in [*subscribers, local, producer]:
        c.close()


def test_wrong_cluster_password_is_refused_with_the_reason(broker_factory):
    nodes = make_cluster(
        broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML,
        credentials={"b": ("cluster-admin", "not-the-password")},
    )
    start_all(nodes)

    def refused():
        for connection in nodes["b"].status()["cluster"]["connections"]:
            for bridge in connection["bridges"]:
                if bridge["problem"] and "refused (auth)" in bridge["problem"]:
                    return bridge
        return None

    wait_for(refused, 10, what="b's bridge refused for its password")
    assert "wrong cluster user or password" in nodes["a"].stderr_path.read_text()
    assert not remote_bindings(nodes["b"])


def _kill_links(node) -> None:
    """Abort every TCP connection to ``node``'s acceptor (the cluster links arriving there)."""
    import subprocess

    subprocess.run(
        ["ss", "-K", "dst", "127.0.0.1", "dport", "=", f":{node.cluster_port}"],
        check=False, capture_output=True,
    )
    subprocess.run(
        ["ss", "-K", "src", "127.0.0.1", "sport", "=", f":{node.cluster_port}"],
        check=False, capture_output=True,
    )


#: link cuts at least, and at most: a cut proves something only when it lands between b storing a
#: forwarded message and a hearing of it, a race; the test cuts until one has (a resend b dropped)
LINK_CUTS = (12, 40)


def test_link_failures_never_lose_or_duplicate(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    consumer = StompClient(nodes["b"])
    consumer.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    producer = StompClient(nodes["a"])
    bodies: list = []
    fewest, most = LINK_CUTS
    for cut in range(most):
        batch = [f"x{i}" for i in range(len(bodies), len(bodies) + 50)]
        bodies += batch
        producer.send_all("/queue/orders", batch)
        # cut a's link to b (and b's to a) while messages are in flight, then let them relink
        _kill_links(nodes["b"])
        wait_linked(nodes)
        if cut + 1 >= fewest and nodes["b"].status()["cluster"]["duplicates_dropped"] > 0:
            break
    got = consumer.wait_count(len(bodies), timeout=30)
    wait_for(lambda: count_on(nodes["a"], "orders") == 0 and count_on(nodes["b"], "orders") == 0, 10,
             what="both queues empty")
    assert len(got) == len(bodies), f"{len(got)} deliveries of {len(bodies)}"
    assert sorted(got) == sorted(bodies)
    # every copy stored for b is released once b confirms it (resends after a cut included)
    wait_for(lambda: [q["message_count"] for q in nodes["a"].status()["queues"]
                      if q["name"].startswith("$.junction.sf.")] == [0], 10, what="a's store-and-forward queue empty")
    assert nodes["b"].status()["cluster"]["duplicates_dropped"] > 0, f"no resend in {most} cuts: the test proved nothing"
    producer.close()
    consumer.close()


def test_a_killed_node_is_skipped_then_rejoins(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], mode="STRICT", extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    wait_for(lambda: len(remote_bindings(nodes["a"], "orders")) == 2, 10)
    nodes["c"].kill9()
    wait_linked({"a": nodes["a"], "b": nodes["b"]}, {"a": ["b"], "b": ["a"]})
    wait_remote_binding(nodes["a"], "orders", connected=False)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"k{i}" for i in range(30)])
    # a disconnected node is passed over (Artemis: only connected bindings are picked first)
    wait_for(lambda: count_on(nodes["a"], "orders") == 15 and count_on(nodes["b"], "orders") == 15, 10,
             what="a and b share while c is down")
    nodes["c"].start()
    wait_linked(nodes)
    wait_for(lambda: len([b for b in remote_bindings(nodes["a"], "orders") if b["connected"]]) == 2, 10)
    producer.send_all("/queue/orders", [f"r{i}" for i in range(30)])
    wait_for(lambda: count_on(nodes["c"], "orders") == 10, 15, what="c gets its share again after restarting")
    assert count_on(nodes["a"], "orders") + count_on(nodes["b"], "orders") == 50
    producer.close()


def test_a_copied_data_directory_is_refused(broker_factory):
    import shutil

    nodes = make_cluster(broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML)
    nodes["a"].start()
    nodes["a"].stop()
    shutil.copytree(nodes["a"].dir / "data", nodes["b"].dir / "data")
    start_all(nodes)

    def refused(node):
        for connection in node.status()["cluster"]["connections"]:
            for bridge in connection["bridges"]:
                if bridge["state"] == "refused":
                    return bridge
        return None

    bridge = wait_for(lambda: refused(nodes["a"]) or refused(nodes["b"]), 10, what="a bridge refusing a copy")
    assert "own id" in bridge["problem"] and "copy" in bridge["problem"]
    assert not remote_bindings(nodes["a"]) and not remote_bindings(nodes["b"])


def test_udp_discovery_forms_the_cluster(broker_factory):
    import random

    group = f"239.255.{random.randint(1, 254)}.{random.randint(1, 254)}"
    from tests.harness import free_port

    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], discovery=(group, free_port()),
                                   extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    status = nodes["a"].status()["cluster"]
    [dg] = status["discovery_groups"]
    assert {e["name"] for e in dg["entries"]} == {"b", "c"}
    assert {b["found_by"] for c in status["connections"] for b in c["bridges"]} <= {"discovery", "announced"}
    assert send_across(nodes["a"], nodes["c"], "orders", "via discovery") == ["via discovery"]


def test_off_with_redistribution_keeps_new_messages_local_but_redistributes(broker_factory):
    settings = '<address-setting match="#"><redistribution-delay>0</redistribution-delay></address-setting>'
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], mode="OFF_WITH_REDISTRIBUTION",
                                   address_settings_xml=settings, extra_core_xml=QUEUE_XML))
    wait_linked(nodes)
    local = StompClient(nodes["a"])
    local.subscribe("/queue/orders", ack="client-individual")  # holds what it gets: no acks
    remote = StompClient(nodes["b"])
    remote.subscribe("/queue/orders")
    wait_remote_binding(nodes["a"], "orders", consumers=1)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/orders", [f"o{i}" for i in range(10)])
    # initial distribution is local only: a's consumer gets all ten, b's none
    local.wait_count(10)
    assert remote.bodies == []
    # the local consumer leaves without acking: the ten go back to a's queue, then to b
    local.close()
    assert sorted(remote.wait_count(10)) == sorted(f"o{i}" for i in range(10))
    producer.close()
    remote.close()


def _scale_down_xml(group: str | None = None) -> str:
    group_xml = f"<group-name>{group}</group-name>" if group else ""
    return f"<ha-policy><primary-only><scale-down><enabled>true</enabled>{group_xml}</scale-down></primary-only></ha-policy>"


def test_scale_down_moves_every_message_in_order_on_a_graceful_stop(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML,
                                   node_xml={"a": _scale_down_xml()}))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    durable = [f"d{i}" for i in range(40)]
    producer.send_all("/queue/orders", durable)
    transient = [f"t{i}" for i in range(40)]
    for body in transient:
        producer.conn.send("/queue/orders", body, headers={"persistent": "false"})
    producer.send_all("/queue/orders", ["last"])
    assert count_on(nodes["a"], "orders") == 81
    # b already holds two of its own: a's go to the back of the queue
    local = StompClient(nodes["b"])
    local.send_all("/queue/orders", ["b0", "b1"])
    producer.close()
    nodes["a"].stop()
    log = nodes["a"].stderr_path.read_text()
    assert "scale-down: b confirmed all 81 messages" in log, log[-2000:]
    assert count_on(nodes["b"], "orders") == 83
    consumer = StompClient(nodes["b"])
    consumer.subscribe("/queue/orders")
    got = consumer.wait_count(83)
    assert got == ["b0", "b1", *durable, *transient, "last"]
    consumer.close()
    local.close()


def test_scale_down_goes_only_to_its_group_and_creates_missing_queues(broker_factory):
    nodes = start_all(make_cluster(broker_factory, ["a", "b", "c"], node_xml={
        "a": _scale_down_xml("east"), "b": _scale_down_xml("west"), "c": _scale_down_xml("east"),
    }))
    wait_linked(nodes)
    producer = StompClient(nodes["a"])
    producer.send_all("/queue/only-on-a", [f"m{i}" for i in range(10)])
    producer.close()
    assert count_on(nodes["a"], "only-on-a") == 10
    nodes["a"].stop()
    assert count_on(nodes["c"], "only-on-a") == 10
    assert queue_status(nodes["b"], "only-on-a") is None


def test_links_over_tls_with_client_certificates(broker_factory, tmp_path):
    from tests.tlscerts import make_certs

    certs = make_certs(tmp_path / "certs")
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], extra_core_xml=QUEUE_XML, tls=certs))
    wait_linked(nodes)
    tls = nodes["b"].status()["acceptors"]
    assert any(a["name"] == "cluster" and a.get("tls") for a in tls)
    assert send_across(nodes["a"], nodes["b"], "orders", "over TLS") == ["over TLS"]


def test_default_cluster_credentials_are_warned_about_at_every_start(broker_factory):
    from junction.config.model import DEFAULT_CLUSTER_PASSWORD, DEFAULT_CLUSTER_USER

    defaults = (DEFAULT_CLUSTER_USER, DEFAULT_CLUSTER_PASSWORD)
    nodes = start_all(make_cluster(broker_factory, ["a", "b"], credentials={"a": defaults, "b": defaults}))
    wait_linked(nodes)  # they work (both use them) ...
    nodes["a"].restart()
    log = nodes["a"].stderr_path.read_text()
    # ... and each start says so
    assert log.count("the cluster user and password are Artemis's defaults") == 2, log[-3000:]
