"""The management HTTP API, the Prometheus collector and the ``junction status`` table.

The node under test wraps a real :class:`BrokerServer` running on a
:class:`~twisted.internet.task.Clock` (so ``status()`` has exactly the keys
the broker produces) and adds the node-level keys the management API
documents: ``acceptors``, ``connections``, ``config`` and ``data_dirs``.
Resources are exercised with :class:`DummyRequest`, and once end to end
through the real :class:`Site` over a :class:`StringTransport`; nothing
listens on a port and no reactor runs.
"""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.web.resource import getChildForRequest
from twisted.web.test._util import _render
from twisted.web.test.requesthelper import DummyRequest

from junction.brokercore.queue import Consumer
from junction.brokercore.server import BrokerServer
from junction.cli.status_table import (
    StatusFetchError,
    fetch_status,
    format_status,
    status_url,
)
from junction.cli.tables import ELLIPSIS, truncate
from junction.config.model import AddressConfig, BrokerConfig, QueueConfig
from junction.management import api
from junction.management.api import build_registry, build_site
from junction.model.message import Message, RoutingType

#: The keys BrokerServer.status() returns; the API must pass them through untouched.
SERVER_KEYS = {
    "node_id",
    "name",
    "version",
    "uptime_s",
    "persistence_enabled",
    "journal",
    "journal_failed",
    "addresses",
    "queues",
    "sessions",
    "messages_routed",
    "messages_dropped",
    "messages_duplicate",
    "messages_dead_lettered",
    "messages_expired",
    "duplicate_ids",
    "pid",
}
NODE_KEYS = {"acceptors", "connections", "config", "data_dirs"}


class FakeNode:
    """What the management API needs of a node: healthy(), status(), name, node_id."""

    def __init__(self, server: BrokerServer, *, journal: dict | None = None):
        self.server = server
        self.name = server.config.name
        self.node_id = server.node_id
        self.problems: list[str] = []
        self.fail_status: Exception | None = None
        self.fail_healthy: Exception | None = None
        self.journal = journal

    def healthy(self):
        if self.fail_healthy is not None:
            raise self.fail_healthy
        return (not self.problems, list(self.problems))

    def status(self) -> dict:
        if self.fail_status is not None:
            raise self.fail_status
        status = self.server.status()
        if self.journal is not None:
            status["persistence_enabled"] = True
            status["journal"] = dict(self.journal)
        status["acceptors"] = [
            {"name": "artemis", "protocols": ["CORE", "STOMP"], "host": "0.0.0.0", "port": 61616, "connections": 2},
            {"name": "stomp", "protocols": ["STOMP"], "host": "::1", "port": 61613, "connections": 1},
        ]
        status["connections"] = [
            {"id": "c1", "protocol": "STOMP", "remote": "127.0.0.1:50001", "client_id": "app-1",
             "user": "alice", "acceptor": "artemis", "consumers": 1},
            {"id": "c2", "protocol": "CORE", "remote": "127.0.0.1:50002", "client_id": None,
             "user": None, "acceptor": "artemis", "consumers": 0},
            {"id": "c3", "protocol": "STOMP", "remote": "[::1]:50003", "client_id": "app-2",
             "user": "bob", "acceptor": "stomp", "consumers": 0},
        ]
        status["config"] = "/etc/junction/broker.xml"
        status["data_dirs"] = {"journal": "/var/lib/junction/journal", "bindings": "/var/lib/junction/bindings"}
        return status


LONG_QUEUE = "tmp.reply." + "x" * 60


@pytest.fixture
def server():
    cfg = BrokerConfig(
        name="node-a",
        persistence_enabled=False,
        addresses=(
            AddressConfig("orders", frozenset({RoutingType.ANYCAST}), (QueueConfig("orders", RoutingType.ANYCAST),)),
            AddressConfig(
                "events",
                frozenset({RoutingType.MULTICAST}),
                (QueueConfig("events.audit", RoutingType.MULTICAST), QueueConfig(LONG_QUEUE, RoutingType.MULTICAST)),
            ),
        ),
    )
    clock = Clock()
    srv = BrokerServer(cfg, reactor=clock, node_id="6f1c1e2a-0000-4000-8000-000000000001")
    srv.start()
    for _ in range(5):
        message = Message(address="orders", body=b"x" * 100, routing_type=RoutingType.ANYCAST)
        _, queues = srv.post_office.prepare_route(message)
        srv.post_office.deliver_to_queues(message, queues)
    message = Message(address="events", body=b"e", routing_type=RoutingType.MULTICAST)
    _, queues = srv.post_office.prepare_route(message)
    srv.post_office.deliver_to_queues(message, queues)
    # One consumer given three "orders" messages: one acked, two still delivering.
    orders = srv.find_queue("orders")
    delivered = []
    consumer = Consumer(orders, delivered.append, credit_messages=3)
    orders.add_consumer(consumer)
    clock.advance(0)
    orders.acknowledge(delivered[0])
    yield srv
    srv.stop()


@pytest.fixture
def node(server):
    return FakeNode(server)


# -- helpers ----------------------------------------------------------------------------
def request(site_or_root, path: str, method: bytes = b"GET"):
    """Render *path* on the resource tree; return ``(request, body)``."""
    root = getattr(site_or_root, "resource", site_or_root)
    req = DummyRequest(path.lstrip("/").split("/") if path != "/" else [b""])
    req.postpath = [seg.encode() if isinstance(seg, str) else seg for seg in req.postpath]
    req.method = method
    resource = getChildForRequest(root, req)
    d = _render(resource, req)
    assert d.called, "management resources answer synchronously"
    return req, b"".join(req.written)


def header(req, name: bytes) -> bytes | None:
    values = req.responseHeaders.getRawHeaders(name)
    return values[0] if values else None


def get_json(site, path, method=b"GET"):
    req, body = request(site, path, method)
    assert header(req, b"content-type") == b"application/json"
    return req.responseCode, json.loads(body)


def samples(text: str) -> dict:
    """``{(sample name, frozenset(labels)): value}`` from an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def scrape(site) -> tuple[DummyRequest, str]:
    req, body = request(site, "/metrics")
    assert req.responseCode == 200
    return req, body.decode("utf-8")


# -- /api/health ------------------------------------------------------------------------
def test_health_ok(node):
    code, body = get_json(build_site(node, reactor=Clock()), "/api/health")
    assert code == 200
    assert body == {"status": "ok", "node": "node-a", "node_id": "6f1c1e2a-0000-4000-8000-000000000001"}


def test_health_failing_is_503_with_problems(node):
    node.problems = ["journal failed: disk full", "acceptor artemis not listening"]
    code, body = get_json(build_site(node, reactor=Clock()), "/api/health")
    assert code == 503
    assert body == {"status": "failing", "problems": node.problems}


def test_health_check_raising_is_503(node, caplog):
    node.fail_healthy = RuntimeError("probe exploded")
    with caplog.at_level(logging.ERROR, logger="junction.management"):
        code, body = get_json(build_site(node, reactor=Clock()), "/api/health")
    assert code == 503
    assert body["status"] == "failing"
    assert "probe exploded" in body["problems"][0]
    assert "probe exploded" in caplog.text


def test_health_identity_falls_back_to_status(server):
    class Bare:
        def healthy(self):
            return True, []

        def status(self):
            return server.status()

    code, body = get_json(build_site(Bare(), reactor=Clock()), "/api/health")
    assert code == 200
    assert body["node"] == "node-a" and body["node_id"] == server.node_id


# -- /api/status ------------------------------------------------------------------------
def test_status_serves_node_status(node):
    code, body = get_json(build_site(node, reactor=Clock()), "/api/status")
    assert code == 200
    assert set(body) == SERVER_KEYS | NODE_KEYS
    assert body["name"] == "node-a"
    queues = {q["name"]: q for q in body["queues"]}
    assert queues["orders"]["message_count"] == 4
    assert queues["orders"]["consumer_count"] == 1
    assert queues["orders"]["delivering_count"] == 2
    assert queues["orders"]["messages_added"] == 5
    assert queues["orders"]["messages_acknowledged"] == 1
    assert queues["events.audit"]["message_count"] == 1
    assert {a["name"] for a in body["acceptors"]} == {"artemis", "stomp"}
    assert set(body["acceptors"][0]) == {"name", "protocols", "host", "port", "connections"}
    assert set(body["connections"][0]) == {"id", "protocol", "remote", "client_id", "user", "acceptor", "consumers"}
    assert body["config"] == "/etc/junction/broker.xml"
    # Round trip: what is served is exactly what the node reported (but uptime).
    expected = node.status()
    body.pop("uptime_s")
    expected.pop("uptime_s")
    assert body == expected


def test_status_trailing_slash_and_head(node):
    site = build_site(node, reactor=Clock())
    code, body = get_json(site, "/api/status/")
    assert code == 200 and body["name"] == "node-a"
    req, _ = request(site, "/api/status", method=b"HEAD")
    assert req.responseCode == 200


def test_status_odd_values_are_serialised(node):
    class Odd(FakeNode):
        def status(self):
            status = super().status()
            status["extra"] = {"types": {RoutingType.ANYCAST}, "raw": b"\xffok"}
            return status

    code, body = get_json(build_site(Odd(node.server), reactor=Clock()), "/api/status")
    assert code == 200
    assert body["extra"] == {"types": ["ANYCAST"], "raw": "\ufffdok"}


def test_status_exception_is_500_and_logged(node, caplog):
    node.fail_status = ValueError("queue table corrupted")
    with caplog.at_level(logging.ERROR, logger="junction.management"):
        code, body = get_json(build_site(node, reactor=Clock()), "/api/status")
    assert code == 500
    assert body == {"error": "ValueError: queue table corrupted"}
    assert "queue table corrupted" in caplog.text
    # The site keeps serving afterwards.
    node.fail_status = None
    assert get_json(build_site(node, reactor=Clock()), "/api/status")[0] == 200


# -- 404 / 405 --------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/", "/nope", "/api", "/api/", "/api/nope", "/api/status/extra", "/metrics/x"])
def test_unknown_paths_are_json_404(node, path):
    code, body = get_json(build_site(node, reactor=Clock()), path)
    assert code == 404
    assert "no such resource" in body["error"]
    assert "/api/status" in body["endpoints"]


@pytest.mark.parametrize("path", ["/api/health", "/api/status", "/metrics"])
@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE"])
def test_wrong_method_is_json_405(node, path, method):
    req, body = request(build_site(node, reactor=Clock()), path, method=method)
    assert req.responseCode == 405
    assert header(req, b"content-type") == b"application/json"
    assert header(req, b"allow") == b"GET, HEAD"
    assert "not allowed" in json.loads(body)["error"]


# -- /metrics ---------------------------------------------------------------------------
def test_metrics_exposition(node):
    req, text = scrape(build_site(node, reactor=Clock()))
    assert header(req, b"content-type") == b"text/plain; version=0.0.4; charset=utf-8"
    got = samples(text)

    def value(name, **labels):
        return got[(name, frozenset(labels.items()))]

    assert value("junction_up") == 1
    assert value("junction_healthy") == 1
    assert value("junction_info", node="node-a", node_id=node.node_id, version=node.status()["version"]) == 1
    assert value("junction_queue_messages", queue="orders", address="orders") == 4
    assert value("junction_queue_consumers", queue="orders", address="orders") == 1
    assert value("junction_queue_delivering", queue="orders", address="orders") == 2
    assert value("junction_queue_messages_added_total", queue="orders", address="orders") == 5
    assert value("junction_queue_messages_acknowledged_total", queue="orders", address="orders") == 1
    assert value("junction_queue_messages_expired_total", queue="orders", address="orders") == 0
    assert value("junction_queue_messages_killed_total", queue="orders", address="orders") == 0
    assert value("junction_queue_messages", queue="events.audit", address="events") == 1
    assert value("junction_queue_messages", queue=LONG_QUEUE, address="events") == 1
    assert value("junction_address_size_bytes", address="orders") == node.status()["addresses"][1]["size_bytes"] > 0
    assert value("junction_address_messages", address="orders") == 4
    assert value("junction_address_blocked_producers", address="orders") == 0
    assert value("junction_address_routed_total", address="events") == 2
    assert value("junction_connections", acceptor="artemis", protocol="STOMP") == 1
    assert value("junction_connections", acceptor="artemis", protocol="CORE") == 1
    assert value("junction_connections", acceptor="stomp", protocol="STOMP") == 1
    assert value("junction_acceptor_connections", acceptor="artemis") == 2
    assert value("junction_messages_routed_total") == 6
    assert value("junction_messages_duplicate_total") == 0
    assert value("junction_messages_dead_lettered_total") == 0
    assert value("junction_messages_dropped_total") == 0
    assert value("junction_messages_expired_total") == 0
    assert value("junction_journal_failed") == 0
    assert value("junction_persistence_enabled") == 0
    assert value("junction_sessions") == 0
    # Persistence off: no journal figures at all.
    assert not [name for name, _ in got if name.startswith("junction_journal_") and name != "junction_journal_failed"]
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["junction_queue_messages"] == "gauge"
    assert families["junction_queue_messages_added"] == "counter"
    assert families["junction_messages_routed"] == "counter"


def test_metrics_connection_series_exist_before_clients(server):
    class Idle(FakeNode):
        def status(self):
            status = super().status()
            status["connections"] = []
            return status

    _, text = scrape(build_site(Idle(server), reactor=Clock()))
    got = samples(text)
    assert got[("junction_connections", frozenset({"acceptor": "artemis", "protocol": "CORE"}.items()))] == 0
    assert got[("junction_connections", frozenset({"acceptor": "stomp", "protocol": "STOMP"}.items()))] == 0


def test_metrics_journal_numeric_keys(server):
    journal = {
        "files": 3,
        "file_size": 10485760,
        "records_total": 1234,
        "fsync.latency-ms": 1.5,
        "compacting": False,
        "directory": "/var/lib/junction/journal",  # not numeric: skipped
        "failed": 7,  # would shadow junction_journal_failed: skipped
        # keys as Journal.stats() names them
        "state": "open",
        "syncs": 10,
        "bytes_written": 4096,
        "live_bytes": 2048,
        "last_compaction_error": None,
    }
    _, text = scrape(build_site(FakeNode(server, journal=journal), reactor=Clock()))
    got = samples(text)
    assert got[("junction_journal_files", frozenset())] == 3
    assert got[("junction_journal_file_size", frozenset())] == 10485760
    assert got[("junction_journal_records_total", frozenset())] == 1234
    assert got[("junction_journal_fsync_latency_ms", frozenset())] == 1.5
    assert got[("junction_journal_compacting", frozenset())] == 0
    assert got[("junction_journal_failed", frozenset())] == 0
    assert got[("junction_persistence_enabled", frozenset())] == 1
    assert not any("directory" in name for name, _ in got)
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["junction_journal_records"] == "counter"
    assert families["junction_journal_files"] == "gauge"
    assert got[("junction_journal_syncs_total", frozenset())] == 10
    assert got[("junction_journal_bytes_written_total", frozenset())] == 4096
    assert got[("junction_journal_live_bytes", frozenset())] == 2048
    assert families["junction_journal_syncs"] == "counter"
    assert families["junction_journal_live_bytes"] == "gauge"
    assert not any("state" in name or "compaction_error" in name for name, _ in got)


def test_metrics_status_failure_reports_down(node, caplog):
    node.fail_status = RuntimeError("boom")
    with caplog.at_level(logging.ERROR, logger="junction.management"):
        _, text = scrape(build_site(node, reactor=Clock()))
    got = samples(text)
    assert got == {("junction_up", frozenset()): 0}
    assert "boom" in caplog.text


def test_metrics_malformed_status_reports_down(server):
    class Broken(FakeNode):
        def status(self):
            status = super().status()
            status["queues"] = [None]  # a bug upstream
            return status

    _, text = scrape(build_site(Broken(server), reactor=Clock()))
    assert samples(text) == {("junction_up", frozenset()): 0}


def test_metrics_reflect_changes_between_scrapes(node, server):
    site = build_site(node, reactor=Clock())
    key = ("junction_queue_messages", frozenset({"queue": "events.audit", "address": "events"}.items()))
    assert samples(scrape(site)[1])[key] == 1
    server.destroy_queue("events.audit")
    assert key not in samples(scrape(site)[1])


def test_registry_is_per_node(server):
    other_cfg = BrokerConfig(name="node-b", persistence_enabled=False)
    other = BrokerServer(other_cfg, reactor=Clock(), node_id="b")
    other.start()
    try:
        text_a = build_registry(FakeNode(server)).collect()
        text_b = build_registry(FakeNode(other)).collect()
        names_a = {s.labels.get("node") for f in text_a for s in f.samples if f.name == "junction_info"}
        names_b = {s.labels.get("node") for f in text_b for s in f.samples if f.name == "junction_info"}
        assert names_a == {"node-a"} and names_b == {"node-b"}
    finally:
        other.stop()


# -- the real Site, over an in-memory transport ------------------------------------------
def http_exchange(site, raw: bytes) -> tuple[int, dict, bytes]:
    """Feed one raw HTTP/1.0 request to the Site; parse the raw response."""
    proto = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
    transport = StringTransport(hostAddress=IPv4Address("TCP", "127.0.0.1", 8161),
                                peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    proto.makeConnection(transport)
    proto.dataReceived(raw)
    head, _, body = transport.value().partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    code = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    proto.connectionLost(None)
    return code, headers, body


def test_site_end_to_end(node):
    site = build_site(node, reactor=Clock())
    code, headers, body = http_exchange(site, b"GET /api/status HTTP/1.0\r\nHost: x\r\n\r\n")
    assert code == 200
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body)
    assert json.loads(body)["name"] == "node-a"

    code, headers, body = http_exchange(site, b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    assert code == 200 and headers[b"content-type"].startswith(b"text/plain; version=0.0.4")
    assert b"junction_up 1.0" in body

    code, headers, body = http_exchange(site, b"POST /api/health HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
    assert code == 405 and json.loads(body)["error"]

    code, _, body = http_exchange(site, b"GET /favicon.ico HTTP/1.0\r\n\r\n")
    assert code == 404 and json.loads(body)["error"] == "no such resource: /favicon.ico"

    node.fail_status = KeyError("gone")
    code, headers, body = http_exchange(site, b"GET /api/status HTTP/1.0\r\n\r\n")
    assert code == 500 and headers[b"content-type"] == b"application/json"
    assert "gone" in json.loads(body)["error"]


def test_module_does_not_import_the_reactor():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(api))
    top_level_imports = [
        alias.name
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "twisted.internet"
        for alias in stmt.names
    ]
    assert "reactor" not in top_level_imports


# -- junction status --------------------------------------------------------------------
def test_format_status_tables(node):
    text = format_status(node.status())
    assert "node-a (6f1c1e2a-0000-4000-8000-000000000001)" in text
    assert "disabled" in text  # persistence off
    lines = text.splitlines()
    queue_lines = lines[lines.index("Queues (3)") :]
    orders = next(line for line in queue_lines if line.strip().startswith("orders "))
    # name, address, type, messages, consumers, delivering, added, acked
    assert orders.split() == ["orders", "orders", "ANYCAST", "4", "1", "2", "5", "1"]
    audit = next(line for line in queue_lines if line.strip().startswith("events.audit"))
    assert audit.split()[3:] == ["1", "0", "0", "1", "0"]
    # Long names are cut with an ellipsis; the full name does not appear.
    assert LONG_QUEUE not in text
    assert LONG_QUEUE[:39] + ELLIPSIS in text
    # Acceptors with counts, IPv6 bracketed.
    artemis = next(line for line in lines if line.strip().startswith("artemis"))
    assert artemis.split() == ["artemis", "CORE,STOMP", "0.0.0.0:61616", "2"]
    assert "[::1]:61613" in text
    assert "Queues (3)" in text and "Addresses (2)" in text and "Acceptors (2)" in text
    assert not any(line != line.rstrip() for line in lines), "no trailing blanks"


def test_format_status_columns_align(node):
    lines = format_status(node.status()).splitlines()
    start = lines.index("Queues (3)") + 1
    table = lines[start : start + 4]
    header = table[0]
    # Right-aligned numeric columns end at the same offset as their header.
    end = header.index("MESSAGES") + len("MESSAGES")
    for row in table[1:]:
        assert row[end - 1].isdigit() and (len(row) == end or row[end] == " ")


def test_format_status_journal_and_minimal_dict(server):
    node = FakeNode(server, journal={"files": 2, "file_size": 10485760, "records": 12})
    text = format_status(node.status())
    assert "enabled; journal: file_size 10.0 MiB, files 2, records 12" in text
    # A nearly empty dict (older node) still formats.
    minimal = format_status({"name": "n", "uptime_s": 90061})
    assert "n (-)" in minimal and "1d 01:01:01" in minimal and "(none)" in minimal


def test_format_status_full_journal_wraps_and_down_acceptor(node):
    status = node.status()
    status["persistence_enabled"] = True
    status["journal"] = {
        "state": "open", "files": 2, "records": 120, "records_loaded": 0, "live_records": 40,
        "open_transactions": 0, "live_bytes": 3 * 1024 * 1024, "dead_bytes": 512, "syncs": 30,
        "records_synced": 120, "records_per_sync": 4.0, "batches": 30, "bytes_written": 5000,
        "pending_bytes": 0, "compactions": 1, "compaction_errors": 0,
        "last_compaction_error": None, "files_removed": 1,
    }
    status["acceptors"][1]["listening"] = False
    text = format_status(status)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Persistence"))
    journal_lines = [lines[start]] + [line for line in lines[start + 1 : start + 5] if line.startswith(" ")]
    assert len(journal_lines) > 1 and all(len(line) <= 110 for line in journal_lines)
    joined = " ".join(journal_lines)
    assert "live_bytes 3.0 MiB" in joined and "state open" in joined and "syncs 30" in joined
    assert "last_compaction_error" not in joined
    assert "[::1]:61613 (not listening)" in text


def test_truncate():
    assert truncate("short", 10) == "short"
    assert truncate("abcdefghijkl", 5) == "abcd" + ELLIPSIS
    assert len(truncate("x" * 100)) == 40


# -- fetch_status -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "given, expected",
    [
        ("http://127.0.0.1:8161", "http://127.0.0.1:8161/api/status"),
        ("http://127.0.0.1:8161/", "http://127.0.0.1:8161/api/status"),
        ("127.0.0.1:8161", "http://127.0.0.1:8161/api/status"),
        ("http://h:1/api/status", "http://h:1/api/status"),
        ("https://ops.example/junction/", "https://ops.example/junction/api/status"),
    ],
)
def test_status_url(given, expected):
    assert status_url(given) == expected


@pytest.fixture
def http_server():
    """A stdlib HTTP server answering from ``responses[path] = (code, body)``."""
    responses: dict[str, tuple[int, bytes]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code, body = responses.get(self.path, (404, b'{"error": "no such resource"}'))
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", responses
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


def test_fetch_status_ok(http_server, node, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")  # ignored for loopback
    url, responses = http_server
    responses["/api/status"] = (200, json.dumps(node.status()).encode())
    status = fetch_status(url, timeout=5)
    assert status["name"] == "node-a"
    assert "orders" in format_status(status)


def test_fetch_status_error_answer(http_server):
    url, responses = http_server
    responses["/api/status"] = (500, b'{"error": "ValueError: queue table corrupted"}')
    with pytest.raises(StatusFetchError, match="HTTP 500: ValueError: queue table corrupted"):
        fetch_status(url)


def test_fetch_status_not_json(http_server):
    url, responses = http_server
    responses["/api/status"] = (200, b"<html>")
    with pytest.raises(StatusFetchError, match="did not answer JSON"):
        fetch_status(url)


def test_fetch_status_error_is_an_oserror():
    # The CLI handles network trouble with ``except OSError``.
    assert issubclass(StatusFetchError, OSError)


def test_fetch_status_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StatusFetchError, match="cannot reach"):
        fetch_status(f"http://127.0.0.1:{port}", timeout=2)


def test_format_status_shows_router_acceptors_and_targets(node):
    status = node.status()
    status["acceptors"].append(
        {"name": "routed", "protocols": ["AMQP", "STOMP"], "host": "127.0.0.1", "port": 61616,
         "listening": True, "connections": 0, "router": "shard", "forwarded": 3, "opening": 1}
    )
    status["routers"] = {
        "shard": {
            "ready": 1,
            "targets": [
                {"name": "core1", "node_id": "n-1", "ready": True, "connection_count": 7, "local": False, "problem": None},
                {"name": "core2", "node_id": None, "ready": False, "connection_count": 0, "local": False,
                 "problem": "connection refused"},
            ],
        }
    }
    lines = format_status(status).splitlines()
    routed = next(line for line in lines if line.strip().startswith("routed "))
    assert routed.split()[:4] == ["routed", "AMQP,STOMP", "127.0.0.1:61616", "3"]
    assert "shard (3 forwarded, 1 opening)" in routed
    start = lines.index("Router targets (2)")
    core1, core2 = lines[start + 2], lines[start + 3]
    assert core1.split() == ["shard", "core1", "n-1", "yes", "7"]
    assert core2.split()[:5] == ["shard", "core2", "-", "no", "0"] and core2.endswith("connection refused")


def test_metrics_of_a_gateway_s_routers_and_routed_acceptors(node):
    status = node.status()
    status["acceptors"].append(
        {"name": "routed", "protocols": ["STOMP"], "host": "127.0.0.1", "port": 61613, "listening": True,
         "connections": 0, "router": "shard", "forwarded": 3, "relayed": 2, "opening": 1,
         "decisions": {"forwarded": 10, "refused": 2}}
    )
    status["routers"] = {
        "shard": {
            "ready": 1,
            "quorum_size": 1,
            "targets": [
                {"name": "core1", "node_id": "n-1", "ready": True, "connection_count": 7},
                {"name": "core2", "node_id": None, "ready": False, "connection_count": 0},
            ],
        }
    }
    node.status = lambda: status
    _, text = scrape(build_site(node, reactor=Clock()))
    got = samples(text)
    shard = frozenset({"router": "shard"}.items())
    assert got[("junction_router_targets", shard)] == 2
    assert got[("junction_router_targets_ready", shard)] == 1
    assert got[("junction_router_quorum_size", shard)] == 1
    core1 = frozenset({"router": "shard", "target": "core1", "node_id": "n-1"}.items())
    core2 = frozenset({"router": "shard", "target": "core2", "node_id": ""}.items())
    assert got[("junction_router_target_ready", core1)] == 1 and got[("junction_router_target_ready", core2)] == 0
    assert got[("junction_router_target_connections", core1)] == 7
    routed = {"acceptor": "routed", "router": "shard"}
    assert got[("junction_gateway_decisions_total", frozenset({**routed, "outcome": "forwarded"}.items()))] == 10
    assert got[("junction_gateway_decisions_total", frozenset({**routed, "outcome": "refused"}.items()))] == 2
    assert got[("junction_gateway_forwarded_connections", frozenset(routed.items()))] == 3
    assert got[("junction_gateway_opening_connections", frozenset(routed.items()))] == 1
    assert got[("junction_gateway_relayed_connections", frozenset(routed.items()))] == 2
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["junction_gateway_decisions"] == "counter"


def test_metrics_of_a_node_without_routers_have_no_router_series(node):
    _, text = scrape(build_site(node, reactor=Clock()))
    assert "junction_router_" not in text and "junction_gateway_" not in text
