"""Clusters of real Junction nodes for process-level tests.

:func:`make_cluster` writes one ``broker.xml`` per node with a connector for
every node (its STOMP acceptor, where cluster links arrive too) and one
cluster connection, and returns the :class:`~tests.harness.BrokerProcess`
objects (not started).  :class:`StompClient` is a small stomp.py client that
records what arrives; :func:`wait_linked` polls ``/api/status`` until every
node's bridges are open.  Synchronisation is by polling with deadlines, never
by sleeping.
"""

from __future__ import annotations

import threading
import time
from xml.sax.saxutils import escape

import stomp

from tests.harness import free_port, queue_status, wait_for

CLUSTER_USER = "cluster-admin"
CLUSTER_PASSWORD = "cluster-secret"
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
#: the ANYCAST queue "orders", for a node's <core>
QUEUE_XML = """
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>"""


def cluster_connection_xml(
    me: str,
    peers: list[str],
    *,
    mode: str = "ON_DEMAND",
    max_hops: int = 1,
    allow_direct: bool = False,
    discovery_group: str | None = None,
    extra: str = "",
    name: str = "my-cluster",
) -> str:
    if discovery_group is not None:
        source = f'<discovery-group-ref discovery-group-name="{discovery_group}"/>'
    else:
        refs = "".join(f"<connector-ref>{escape(p)}</connector-ref>" for p in peers)
        source = f'<static-connectors allow-direct-connections-only="{str(allow_direct).lower()}">{refs}</static-connectors>'
    return f"""
    <cluster-connections>
      <cluster-connection name="{name}">
        <connector-ref>{escape(me)}</connector-ref>
        <retry-interval>100</retry-interval>
        <max-retry-interval>500</max-retry-interval>
        <message-load-balancing>{mode}</message-load-balancing>
        <max-hops>{max_hops}</max-hops>
        {extra}
        {source}
      </cluster-connection>
    </cluster-connections>"""


def make_cluster(
    broker_factory,
    names: list[str],
    *,
    mode: str = "ON_DEMAND",
    max_hops: int = 1,
    links: dict | None = None,
    allow_direct: bool = False,
    address_settings_xml: str = "",
    extra_core_xml: str = "",
    extra_cc_xml: str = "",
    discovery: tuple[str, int] | None = None,
    persistence: bool = True,
    credentials: dict | None = None,
    node_xml: dict | None = None,
    tls=None,
    extra_junction_xml: str = "",
) -> dict:
    """One node per name, each with a cluster connection to ``links[name]`` (default: every other node).

    ``discovery`` = (group address, port): broadcast and discover instead of static connectors.
    ``credentials`` maps a node name to (cluster-user, cluster-password) to override the shared ones.
    ``node_xml`` maps a node name to more ``<core>`` XML for that node alone.
    ``tls`` (files from :func:`tests.tlscerts.make_certs`): the links run over TLS, each node's
    cluster acceptor asking for a client certificate from the test CA, each connector
    verifying the peer's certificate and host name and presenting the client certificate.
    ``extra_junction_xml`` goes into every node's ``<junction>``.
    """
    #: each node's cluster links arrive on an acceptor of their own, so a test can cut them alone
    ports = {name: free_port() for name in names}
    connector_tls = acceptor_tls = ""
    if tls is not None:
        connector_tls = escape(
            f"?sslEnabled=true;trustStorePath={tls.ca};verifyHost=true;keyStorePath={tls.client}"
        )
        acceptor_tls = (
            f";sslEnabled=true;keyStorePath={tls.server};trustStorePath={tls.ca};needClientAuth=true"
        )
    connectors = "".join(
        f'<connector name="{n}">tcp://127.0.0.1:{p}{connector_tls}</connector>' for n, p in ports.items()
    )
    nodes = {}
    for name in names:
        peers = [p for p in (links[name] if links is not None else names) if p != name]
        groups = ""
        if discovery is not None:
            group, port = discovery
            groups = f"""
    <broadcast-groups>
      <broadcast-group name="bg">
        <local-bind-address>127.0.0.1</local-bind-address>
        <group-address>{group}</group-address>
        <group-port>{port}</group-port>
        <broadcast-period>200</broadcast-period>
        <connector-ref>{name}</connector-ref>
      </broadcast-group>
    </broadcast-groups>
    <discovery-groups>
      <discovery-group name="dg">
        <local-bind-address>127.0.0.1</local-bind-address>
        <group-address>{group}</group-address>
        <group-port>{port}</group-port>
        <refresh-timeout>2000</refresh-timeout>
      </discovery-group>
    </discovery-groups>"""
        user, password = (credentials or {}).get(name, (CLUSTER_USER, CLUSTER_PASSWORD))
        core = f"""
    <connectors>{connectors}</connectors>
    <cluster-user>{escape(user)}</cluster-user>
    <cluster-password>{escape(password)}</cluster-password>
    {groups}
    {cluster_connection_xml(name, peers, mode=mode, max_hops=max_hops, allow_direct=allow_direct,
                            discovery_group="dg" if discovery is not None else None, extra=extra_cc_xml)
     if peers or discovery is not None else ""}
    {extra_core_xml}
    {(node_xml or {}).get(name, "")}"""
        nodes[name] = broker_factory(
            name,
            extra_acceptors_xml=(
                f'<acceptor name="cluster">tcp://127.0.0.1:{ports[name]}?protocols=STOMP,AMQP;'
                f"anycastPrefix=/queue/;multicastPrefix=/topic/{escape(acceptor_tls)}</acceptor>"
            ),
            extra_core_xml=core,
            address_settings_xml=address_settings_xml,
            stomp_acceptor_params=PREFIXES,
            persistence=persistence,
            extra_junction_xml=extra_junction_xml,
        )
        nodes[name].cluster_port = ports[name]
    return nodes


def start_all(nodes: dict) -> dict:
    for node in nodes.values():
        node.start()
    return nodes


def cluster_status(node) -> dict:
    return node.status().get("cluster") or {}


def open_bridges(node) -> set:
    """Names of the peers this node's bridges are linked to."""
    names = set()
    for connection in cluster_status(node).get("connections", []):
        for bridge in connection["bridges"]:
            if bridge["state"] == "open":
                names.add(bridge["name"])
    return names


def wait_linked(nodes: dict, expected: dict | None = None, timeout: float = 20.0) -> None:
    """Until each node's open bridges are ``expected[name]`` (default: every other node)."""
    for name, node in nodes.items():
        want = set(expected[name]) if expected is not None else set(nodes) - {name}
        wait_for(lambda n=node, w=want: open_bridges(n) == w, timeout, what=f"{name} linked to {sorted(want)}")


def remote_bindings(node, queue: str | None = None) -> list:
    found = cluster_status(node).get("remote_bindings", [])
    return [b for b in found if queue is None or b["queue"] == queue]


def wait_remote_binding(node, queue: str, timeout: float = 10.0, **expected) -> list:
    """Until ``node`` knows a remote binding of ``queue`` whose fields equal ``expected``."""

    def check():
        found = [b for b in remote_bindings(node, queue) if all(b.get(k) == v for k, v in expected.items())]
        return found

    return wait_for(check, timeout, what=f"{node.name}: remote binding {queue} {expected}")


def count_on(node, queue: str) -> int:
    status = queue_status(node, queue)
    return status["message_count"] if status else 0


class StompClient(stomp.ConnectionListener):
    """A stomp.py 1.2 connection that records MESSAGE bodies and RECEIPT ids."""

    def __init__(self, node, *, client_id: str | None = None):
        self.cond = threading.Condition()
        self.bodies: list[str] = []
        self.frames: list = []
        self.receipts: set = set()
        self.errors: list = []
        self.conn = stomp.Connection12([node.stomp_address], heartbeats=(0, 0), auto_content_length=False)
        self.conn.set_listener("recorder", self)
        headers = {"client-id": client_id} if client_id else {}
        self.conn.connect(wait=True, headers=headers)
        self._receipt = 0

    def on_message(self, frame) -> None:
        with self.cond:
            self.bodies.append(frame.body)
            self.frames.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame) -> None:
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_error(self, frame) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, predicate, timeout: float = 10.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"timed out after {timeout:g} s waiting for {what}; got {len(self.bodies)} messages, "
                        f"errors {[e.headers for e in self.errors]}"
                    )
                self.cond.wait(remaining)

    def wait_count(self, n: int, timeout: float = 15.0) -> list:
        self.wait(lambda: len(self.bodies) >= n, timeout, f"{n} messages")
        with self.cond:
            return list(self.bodies)

    def subscribe(self, destination: str, sub_id: str = "1", *, ack: str = "auto", headers=None) -> None:
        """Subscribe and wait for the broker's RECEIPT, so the consumer exists when this returns."""
        self._receipt += 1
        receipt = f"sub-{self._receipt}"
        self.conn.subscribe(destination, id=sub_id, ack=ack, headers={**(headers or {}), "receipt": receipt})
        self.wait(lambda: receipt in self.receipts, 10.0, f"RECEIPT {receipt}")

    def unsubscribe(self, sub_id: str = "1") -> None:
        self._receipt += 1
        receipt = f"unsub-{self._receipt}"
        self.conn.unsubscribe(id=sub_id, headers={"receipt": receipt})
        self.wait(lambda: receipt in self.receipts, 10.0, f"RECEIPT {receipt}")

    def send_all(self, destination: str, bodies, headers=None) -> None:
        """Send every body, each with a receipt; return once all are confirmed."""
        wanted = []
        for body in bodies:
            self._receipt += 1
            receipt = f"send-{self._receipt}"
            wanted.append(receipt)
            self.conn.send(destination, body, headers={**(headers or {}), "receipt": receipt, "persistent": "true"})
        self.wait(lambda: all(r in self.receipts for r in wanted), 20.0, f"{len(wanted)} send receipts")

    def close(self) -> None:
        try:
            self.conn.disconnect()
        except Exception:
            pass


def send_across(sender, receiver, queue: str, body: str) -> list:
    """A consumer of ``queue`` on ``receiver``, once ``sender`` knows of it, gets what a producer on
    ``sender`` sends; returns what it got (the clients are closed)."""
    consumer = StompClient(receiver)
    producer = None
    try:
        consumer.subscribe(f"/queue/{queue}")
        wait_remote_binding(sender, queue, consumers=1)
        producer = StompClient(sender)
        producer.send_all(f"/queue/{queue}", [body])
        return consumer.wait_count(1)
    finally:
        for client in (consumer, producer):
            if client is not None:
                client.close()

