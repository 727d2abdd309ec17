"""Large CORE messages across a 2-node Junction cluster, sent and received by the real JMS client.

A large message's body is in a file of its node's large-messages directory; crossing the
cluster link it goes inline and becomes a file of the receiving node's own
(``junction/brokercore/cluster/large_forward.py``).  Node A has a producer, node B the only
consumer of the queue (ON_DEMAND forwarding): the messages arrive whole on B (same size and
digest), B's directory holds their files until they are consumed, A's files are gone once B
acknowledged the messages.  Redistribution and scale-down too: messages left on A's queue
move to B when B's consumer appears, or when A stops with scale-down, and arrive whole (the
latter after B restarted: B's journal names B's files, so its start keeps them).
"""

from __future__ import annotations

import os
from xml.sax.saxutils import escape

import pytest

from tests.artemis import JmsClient
from tests.artemis.jms import pattern, sha256
from tests.clusterkit import (
    CLUSTER_PASSWORD,
    CLUSTER_USER,
    cluster_connection_xml,
    wait_linked,
    wait_remote_binding,
)
from tests.harness import LOOPBACK, free_port, wait_for
from tests.integration.test_core_topology import PASSWORD, USER, USERS

pytestmark = pytest.mark.timeout(60)

A, B = "node-a", "node-b"
QUEUE = "big"
#: a 5 MiB BytesMessage
BYTES_SIZE = 5 * 1024 * 1024
#: a TextMessage of this many characters (twice as many bytes in CORE's UTF-16 body)
TEXT_CHARS = 1024 * 1024
ADDRESSES = f"""
    <addresses>
      <address name="{QUEUE}"><anycast><queue name="{QUEUE}"/></anycast></address>
    </addresses>"""


def _pair(broker_factory, mode: str = "ON_DEMAND", address_settings: str = "", a_xml: str = "") -> dict:
    ports = {A: free_port(), B: free_port()}
    connectors = "".join(f'<connector name="{n}">tcp://{LOOPBACK}:{p}</connector>' for n, p in ports.items())
    nodes = {}
    for name in (A, B):
        core = (
            f"<connectors>{connectors}</connectors>"
            f"<cluster-user>{escape(CLUSTER_USER)}</cluster-user>"
            f"<cluster-password>{escape(CLUSTER_PASSWORD)}</cluster-password>"
            + cluster_connection_xml(name, [n for n in ports if n != name], mode=mode)
            + ADDRESSES + (a_xml if name == A else "")
        )
        node = broker_factory(
            name, security=True, users=USERS, extra_core_xml=core, address_settings_xml=address_settings,
            extra_acceptors_xml=f'<acceptor name="clients">tcp://{LOOPBACK}:{ports[name]}?protocols=CORE,STOMP,AMQP</acceptor>',
        )
        node.url = f"tcp://{LOOPBACK}:{ports[name]}"
        nodes[name] = node
    for node in nodes.values():
        node.start()
    wait_linked(nodes)
    return nodes


def _files(node) -> list:
    return sorted(os.listdir(node.dir / "data" / "large"))


def _connect(node) -> dict:
    return {"op": "connect", "url": node.url, "user": USER, "password": PASSWORD}


def _sends() -> list:
    return [
        {"op": "send", "queue": QUEUE, "type": "bytes", "size": BYTES_SIZE},
        {"op": "send", "queue": QUEUE, "type": "text", "size": TEXT_CHARS},
    ]


def _expected() -> list:
    text = pattern(TEXT_CHARS).decode("latin-1").encode("utf-8")  # the client's digest is of UTF-8
    return [("bytes", BYTES_SIZE, sha256(pattern(BYTES_SIZE))), ("text", len(text), sha256(text))]


def _check(messages: list) -> None:
    assert [(m["type"], m["size"], m["sha256"]) for m in messages] == _expected()


def test_large_messages_forwarded_on_demand_arrive_whole(broker_factory, jms: JmsClient, tmp_path):
    nodes = _pair(broker_factory)
    go = tmp_path / "consume"
    consumer = jms.start([
        _connect(nodes[B]),
        {"op": "consumer", "id": "c", "queue": QUEUE},
        {"op": "wait_file", "path": str(go)},
        {"op": "receive", "consumer": "c", "count": 2, "digest": True},
    ], timeout=50)
    try:
        wait_remote_binding(nodes[A], QUEUE, consumers=1)
        jms.run([_connect(nodes[A]), *_sends()], timeout=40)
        # B stored each message as a large message of its own; A's files went with B's acknowledgement
        wait_for(lambda: len(_files(nodes[B])) == 2, 20, what="B's two large-message files")
        wait_for(lambda: _files(nodes[A]) == [], 10, what="A's large-messages directory empty")
        go.write_text("go")
        results = consumer.wait()
    finally:
        consumer.kill()
    _check(results[3]["messages"])
    wait_for(lambda: _files(nodes[B]) == [], 10, what="B's large-messages directory empty")


def test_large_messages_redistributed_arrive_whole(broker_factory, jms: JmsClient):
    settings = f'<address-setting match="{QUEUE}"><redistribution-delay>0</redistribution-delay></address-setting>'
    nodes = _pair(broker_factory, address_settings=settings)
    jms.run([_connect(nodes[A]), *_sends()], timeout=40)
    assert len(_files(nodes[A])) == 2 and _files(nodes[B]) == []
    results = jms.run([_connect(nodes[B]), {"op": "receive", "queue": QUEUE, "count": 2, "digest": True, "timeout": 20000}], timeout=40)
    _check(results[1]["messages"])
    wait_for(lambda: _files(nodes[A]) == [] and _files(nodes[B]) == [], 10, what="both large-messages directories empty")


def test_large_messages_scaled_down_arrive_whole(broker_factory, jms: JmsClient):
    scale_down = "<ha-policy><primary-only><scale-down><enabled>true</enabled></scale-down></primary-only></ha-policy>"
    nodes = _pair(broker_factory, a_xml=scale_down)
    jms.run([_connect(nodes[A]), *_sends()], timeout=40)
    assert len(_files(nodes[A])) == 2
    assert nodes[A].stop() == 0
    log = nodes[A].stderr_path.read_text()
    assert "confirmed all 2 messages" in log, log[-2000:]
    assert _files(nodes[A]) == [] and len(_files(nodes[B])) == 2
    # B's journal names B's own files: they survive its restart (not orphans)
    kept = _files(nodes[B])
    assert nodes[B].stop() == 0
    nodes[B].start()
    assert _files(nodes[B]) == kept
    results = jms.run([_connect(nodes[B]), {"op": "receive", "queue": QUEUE, "count": 2, "digest": True}], timeout=40)
    _check(results[1]["messages"])
    wait_for(lambda: _files(nodes[B]) == [], 10, what="B's large-messages directory empty")
