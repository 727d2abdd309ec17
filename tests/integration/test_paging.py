"""address-full-policy PAGE through a real node: producers are never held, messages
spill to page files, come back in order, and survive ``kill -9``."""

from __future__ import annotations

import threading
import urllib.request

import pytest
import stomp

from tests.harness import wait_for

pytestmark = pytest.mark.timeout(120)

PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
#: 200 messages of 1 KiB against a 16 KiB limit: most of them must page.
COUNT = 200
BODY = 1024
PAGE_SETTINGS = (
    '<address-setting match="paged.#">'
    "<max-size-bytes>16KiB</max-size-bytes>"
    "<page-size-bytes>64KiB</page-size-bytes>"
    "<address-full-policy>PAGE</address-full-policy>"
    "</address-setting>"
)


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.bodies: list[bytes] = []
        self.errors: list = []

    def on_receipt(self, frame):
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_message(self, frame):
        with self.cond:
            self.bodies.append(frame.body)
            self.cond.notify_all()

    def on_error(self, frame):
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, predicate, timeout=30.0, what="condition"):
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise TimeoutError(f"timed out waiting for {what}")


def connect(broker, listener):
    conn = stomp.Connection12([broker.stomp_address], auto_decode=False)
    conn.set_listener("l", listener)
    conn.connect(wait=True)
    return conn


def body(seq: int) -> bytes:
    return f"{seq:06d}".encode() + b"x" * (BODY - 6)


def paged_address(broker, name):
    for address in broker.status()["addresses"]:
        if address["name"] == name:
            return address
    return None


def produce(broker, destination, count, start=0):
    listener = Listener()
    conn = connect(broker, listener)
    try:
        for seq in range(start, start + count):
            conn.send(destination, body(seq), headers={"persistent": "true"}, receipt=f"r{seq}")
        listener.wait(lambda: len(listener.receipts) == count or listener.errors, what="all receipts")
        assert not listener.errors, listener.errors[0].headers
    finally:
        conn.disconnect()


class Consumer(stomp.ConnectionListener):
    """Acks each message on arrival (client-individual) and records bodies in order."""

    def __init__(self):
        self.cond = threading.Condition()
        self.bodies: list[bytes] = []
        self.conn = None

    def on_message(self, frame):
        self.conn.ack(frame.headers["ack"])
        with self.cond:
            self.bodies.append(frame.body)
            self.cond.notify_all()

    def wait_count(self, n, timeout=60.0):
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.bodies) >= n, timeout):
                raise TimeoutError(f"received {len(self.bodies)} of {n} messages")


def drain(broker, destination, n):
    consumer = Consumer()
    conn = stomp.Connection12([broker.stomp_address], auto_decode=False)
    consumer.conn = conn
    conn.set_listener("c", consumer)
    conn.connect(wait=True)
    conn.subscribe(destination, id="s", ack="client-individual")
    try:
        consumer.wait_count(n)
        return list(consumer.bodies)
    finally:
        conn.disconnect()


def test_full_address_pages_instead_of_blocking_and_delivers_in_order(broker_factory):
    broker = broker_factory("pager", stomp_acceptor_params=PREFIXES, address_settings_xml=PAGE_SETTINGS)
    broker.start()
    produce(broker, "/queue/paged.orders", COUNT)
    address = paged_address(broker, "paged.orders")
    assert address["paging"] is True
    assert address["paged_messages"] > 0
    assert address["size_bytes"] <= 16 * 1024 + BODY * 2  # memory stays near the limit
    metrics = urllib.request.urlopen(broker.mgmt_url + "/metrics", timeout=5).read().decode()
    paged = [line for line in metrics.splitlines() if line.startswith('junction_address_paged_messages{address="paged.orders"}')]
    assert paged and float(paged[0].split()[-1]) == address["paged_messages"]
    bodies = drain(broker, "/queue/paged.orders", COUNT)
    assert [b[:6] for b in bodies] == [f"{i:06d}".encode() for i in range(COUNT)]
    # drained and its consumer gone, the auto-created address may be auto-deleted: not paging either
    wait_for(lambda: not (paged_address(broker, "paged.orders") or {}).get("paging"), 10, what="paging to end")


def test_paged_messages_survive_kill9_exactly_once(broker_factory):
    broker = broker_factory("pager", stomp_acceptor_params=PREFIXES, address_settings_xml=PAGE_SETTINGS)
    broker.start()
    produce(broker, "/queue/paged.audit", COUNT)
    assert paged_address(broker, "paged.audit")["paged_messages"] > 0
    broker.kill9()
    broker.start()
    assert "paged messages waiting" in broker.log_text()
    bodies = drain(broker, "/queue/paged.audit", COUNT)
    seqs = [int(b[:6]) for b in bodies]
    assert seqs == list(range(COUNT)), "every receipted message, in order, exactly once"
    # Nothing more arrives after the last one: a marker sent now is the next delivery.
    produce(broker, "/queue/paged.audit", 1, start=COUNT)
    assert [int(b[:6]) for b in drain(broker, "/queue/paged.audit", 1)] == [COUNT]
