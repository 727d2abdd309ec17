"""Connection-router management: /api/routers, filters, the Jolokia exec path, ``junction route``.

The node is a fake exposing ``routers`` (name -> service with ``.router`` and
``.pool``); the routers are fakes whose ``get_target_for_key`` returns a
Deferred the test controls, so the asynchronous (NOT_DONE_YET) answers and
the timeout are exercised on a :class:`Clock` with no reactor running.
"""

from __future__ import annotations

import json

import pytest
from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from junction import cli
from junction.config.model import Connector
from junction.management.api import build_site
from junction.management.routers import CONNECTOR_FACTORY, TARGET_TIMEOUT
from junction.routing.keys import KeyResolver, KeyType, SettableFilter
from junction.routing.targets import RouterResult, RouterStatus, Target

CONNECTOR = Connector(name="broker-b", scheme="tcp", host="10.0.0.2", port=61617, params={"sslEnabled": "true"})
REMOTE = Target(connector=CONNECTOR, node_id="node-b-id", ready=True)
LOCAL = Target(local=True, ready=True)


class FakePolicy:
    name = "CONSISTENT_HASH"


class FakePool:
    def status(self):
        return [
            {"name": "local", "node_id": None, "ready": True, "connection_count": 0, "local": True, "problem": None},
            {"name": "broker-b", "node_id": "node-b-id", "ready": False, "connection_count": None,
             "local": False, "problem": "connection refused"},
        ]


class FakeRouter:
    def __init__(self):
        self.key_resolver = KeyResolver(KeyType.CLIENT_ID)
        self.policy = FakePolicy()
        self._local = SettableFilter("local-target filter")
        self.answers: dict[str, object] = {}
        self.asked: list[str] = []

    local_target_filter = property(lambda self: self._local.text, lambda self, v: self._local.set(v))
    key_filter = property(
        lambda self: self.key_resolver.key_filter,
        lambda self, v: setattr(self.key_resolver, "key_filter", v),
    )

    def get_target_for_key(self, key):
        self.asked.append(key)
        answer = self.answers.get(key, RouterResult(RouterStatus.REFUSED_USE_ANOTHER))
        if isinstance(answer, defer.Deferred):
            return answer
        return defer.succeed(answer)


class FakeService:
    def __init__(self, router, pool=None):
        self.router = router
        self.pool = pool


class FakeNode:
    name = "gw"
    node_id = "gw-node-id"

    def __init__(self):
        self.routers = {"r": FakeService(FakeRouter(), FakePool())}

    def healthy(self):
        return True, []

    def status(self):
        return {"name": self.name, "node_id": self.node_id}


@pytest.fixture
def node():
    return FakeNode()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def site(node, clock):
    return build_site(node, reactor=clock)


class Exchange:
    """One HTTP/1.0 exchange on the Site whose answer may come later."""

    def __init__(self, site, method: str, path: str, body: bytes | None = None):
        self.proto = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
        self.transport = StringTransport(
            hostAddress=IPv4Address("TCP", "127.0.0.1", 8161), peerAddress=IPv4Address("TCP", "127.0.0.1", 40000)
        )
        self.proto.makeConnection(self.transport)
        raw = f"{method} {path} HTTP/1.0\r\nHost: x\r\n".encode()
        if body is not None:
            raw += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        self.proto.dataReceived(raw + b"\r\n" + (body or b""))

    def answered(self) -> bool:
        return b"\r\n\r\n" in self.transport.value()

    def result(self):
        head, _, body = self.transport.value().partition(b"\r\n\r\n")
        assert head, "no answer yet"
        code = int(head.split(b"\r\n")[0].split()[1])
        self.proto.connectionLost(None)
        return code, json.loads(body)


def call(site, method, path, body=None):
    if isinstance(body, (dict, list)) or body is None and method in ("PUT", "POST"):
        body = json.dumps(body if body is not None else {}).encode()
    return Exchange(site, method, path, body).result()


# -- /api/routers -----------------------------------------------------------------------
def test_routers_listing(site):
    code, body = call(site, "GET", "/api/routers")
    assert code == 200
    [r] = body["routers"]
    assert r["name"] == "r" and r["key_type"] == "CLIENT_ID" and r["policy"] == "CONSISTENT_HASH"
    assert r["local_target_filter"] is None and r["key_filter"] is None
    assert r["pool"]["targets"] == 2 and r["pool"]["ready"] == 1
    assert r["pool"]["members"][1]["problem"] == "connection refused"


def test_routers_listing_without_routers(clock):
    class Plain(FakeNode):
        def __init__(self):
            self.routers = {}

    code, body = call(build_site(Plain(), reactor=clock), "GET", "/api/routers/")
    assert code == 200 and body == {"routers": []}


def test_target_remote_has_artemis_shape(site, node):
    node.routers["r"].router.answers["app-1"] = RouterResult(RouterStatus.OK, REMOTE)
    code, body = call(site, "GET", "/api/routers/r/target?key=app-1")
    assert code == 200
    assert body == {
        "nodeID": "node-b-id",
        "local": False,
        "connector": {
            "name": "broker-b",
            "factoryClassName": CONNECTOR_FACTORY,
            "params": {"host": "10.0.0.2", "port": "61617", "sslEnabled": "true"},
            "extraProps": {},
        },
    }


def test_target_local_has_null_connector_and_node_id(site, node):
    node.routers["r"].router.answers["mine"] = RouterResult(RouterStatus.OK, LOCAL)
    code, body = call(site, "GET", "/api/routers/r/target?key=mine")
    assert code == 200 and body == {"nodeID": "gw-node-id", "local": True, "connector": None}


@pytest.mark.parametrize("status", [RouterStatus.REFUSED_UNAVAILABLE, RouterStatus.REFUSED_USE_ANOTHER])
def test_target_refusal_is_503(site, node, status):
    node.routers["r"].router.answers["k"] = RouterResult(status)
    code, body = call(site, "GET", "/api/routers/r/target?key=k")
    assert code == 503 and body["status"] == status.name and "k" in body["error"]


def test_target_errors(site):
    code, body = call(site, "GET", "/api/routers/nope/target?key=k")
    assert code == 404 and "nope" in body["error"] and body["routers"] == ["r"]
    code, body = call(site, "GET", "/api/routers/r/target")
    assert code == 400 and "key" in body["error"]
    code, body = call(site, "GET", "/api/routers/r/bogus")
    assert code == 404
    code, body = call(site, "GET", "/api/routers/r/")
    assert code == 200 and body["name"] == "r"


def test_router_names_are_percent_decoded(site, node):
    node.routers["my router"] = node.routers.pop("r")
    code, body = call(site, "GET", "/api/routers/my%20router/filters")
    assert code == 200 and body == {"localTargetFilter": None, "keyFilter": None}


def test_target_answers_asynchronously(site, node):
    pending = defer.Deferred()
    node.routers["r"].router.answers["slow"] = pending
    ex = Exchange(site, "GET", "/api/routers/r/target?key=slow")
    assert not ex.answered()
    pending.callback(RouterResult(RouterStatus.OK, REMOTE))
    code, body = ex.result()
    assert code == 200 and body["nodeID"] == "node-b-id"


def test_target_times_out(site, node, clock):
    node.routers["r"].router.answers["stuck"] = defer.Deferred()
    ex = Exchange(site, "GET", "/api/routers/r/target?key=stuck")
    clock.advance(TARGET_TIMEOUT - 0.1)
    assert not ex.answered()
    clock.advance(0.2)
    code, body = ex.result()
    assert code == 504 and "in time" in body["error"]


def test_client_gone_before_answer_is_harmless(site, node):
    pending = defer.Deferred()
    node.routers["r"].router.answers["slow"] = pending
    ex = Exchange(site, "GET", "/api/routers/r/target?key=slow")
    ex.proto.connectionLost(Failure(ConnectionDone()))
    written = ex.transport.value()
    pending.callback(RouterResult(RouterStatus.OK, REMOTE))  # no error, nothing written
    assert ex.transport.value() == written


# -- filters ----------------------------------------------------------------------------
def test_filters_get_set_and_clear(site, node):
    router = node.routers["r"].router
    assert call(site, "GET", "/api/routers/r/filters") == (200, {"localTargetFilter": None, "keyFilter": None})
    code, body = call(site, "PUT", "/api/routers/r/filters", {"localTargetFilter": "local-.*", "keyFilter": "^[a-z]+"})
    assert code == 200 and body == {"localTargetFilter": "local-.*", "keyFilter": "^[a-z]+"}
    assert router.local_target_filter == "local-.*" and router.key_filter == "^[a-z]+"
    code, body = call(site, "POST", "/api/routers/r/filters", {"localTargetFilter": ""})
    assert code == 200 and body == {"localTargetFilter": None, "keyFilter": "^[a-z]+"}
    code, body = call(site, "POST", "/api/routers/r/filters", {"keyFilter": None})
    assert code == 200 and body == {"localTargetFilter": None, "keyFilter": None}


def test_invalid_filter_is_400_and_changes_nothing(site, node):
    router = node.routers["r"].router
    router.local_target_filter = "a.*"
    code, body = call(site, "PUT", "/api/routers/r/filters", {"keyFilter": "ok", "localTargetFilter": "(["})
    assert code == 400 and "localTargetFilter" in body["error"]
    assert router.local_target_filter == "a.*" and router.key_filter is None
    for bad in (b"not json", b"[]", b'{"other": 1}', b'{"keyFilter": 3}'):
        code, _ = Exchange(site, "PUT", "/api/routers/r/filters", bad).result()
        assert code == 400
    code, _ = call(site, "DELETE", "/api/routers/r/filters")
    assert code == 405


# -- Jolokia ----------------------------------------------------------------------------
MBEAN = 'org.apache.activemq.artemis:broker="gw",component=connection-routers,name="r"'


def jolokia(site, request, path="/console/jolokia/"):
    code, body = call(site, "POST", path, request)
    assert code == 200  # Jolokia answers errors inside a 200
    return body


def test_jolokia_get_target_as_json(site, node):
    node.routers["r"].router.answers["app-1"] = RouterResult(RouterStatus.OK, REMOTE)
    request = {"type": "exec", "mbean": MBEAN, "operation": "getTargetAsJSON(java.lang.String)", "arguments": ["app-1"]}
    body = jolokia(site, request)
    assert body["status"] == 200 and body["request"] == request and isinstance(body["timestamp"], int)
    assert isinstance(body["value"], str)
    value = json.loads(body["value"])
    assert value["nodeID"] == "node-b-id" and value["connector"]["params"]["port"] == "61617"


def test_jolokia_get_target_object_and_refusal(site, node):
    node.routers["r"].router.answers["mine"] = RouterResult(RouterStatus.OK, LOCAL)
    request = {"type": "exec", "mbean": MBEAN, "operation": "getTarget(java.lang.String)", "arguments": ["mine"]}
    body = jolokia(site, request, "/jolokia/")
    assert body["value"] == {"nodeID": "gw-node-id", "local": True, "connector": None}
    request["arguments"] = ["other"]
    body = jolokia(site, request)
    assert body["status"] == 200 and body["value"] is None


def test_jolokia_read_and_write_attributes(site, node):
    router = node.routers["r"].router
    body = jolokia(site, {"type": "write", "mbean": MBEAN, "attribute": "LocalTargetFilter", "value": "x.*"})
    assert body["status"] == 200 and body["value"] is None and router.local_target_filter == "x.*"
    body = jolokia(site, {"type": "read", "mbean": MBEAN, "attribute": "LocalTargetFilter"})
    assert body["value"] == "x.*"
    body = jolokia(site, {"type": "read", "mbean": MBEAN})
    assert body["value"] == {"LocalTargetFilter": "x.*", "TargetKeyFilter": None}
    body = jolokia(site, {"type": "write", "mbean": MBEAN, "attribute": "TargetKeyFilter", "value": "(["})
    assert body["status"] == 400 and router.key_filter is None


@pytest.mark.parametrize(
    "request_",
    [
        {"type": "exec", "mbean": MBEAN.replace('"r"', '"nope"'), "operation": "getTarget(java.lang.String)", "arguments": ["k"]},
        {"type": "exec", "mbean": "java.lang:type=Memory", "operation": "gc()"},
        {"type": "exec", "mbean": MBEAN, "operation": "frobnicate()", "arguments": []},
        {"type": "read", "mbean": MBEAN, "attribute": "Nope"},
    ],
)
def test_jolokia_unknown_is_404_inside_200(site, request_):
    body = jolokia(site, request_)
    assert body["status"] == 404 and body["error_type"] and body["error"]


def test_jolokia_needs_post(site):
    code, _ = call(site, "GET", "/jolokia/")
    assert code == 405


def test_jolokia_get_url_form(site, node):
    from urllib.parse import quote

    node.routers["r"].router.answers["a/b"] = RouterResult(RouterStatus.OK, REMOTE)
    node.routers["r"].router.local_target_filter = "x"
    mbean = quote(MBEAN, safe="")
    code, body = call(site, "GET", f"/jolokia/exec/{mbean}/getTargetAsJSON(java.lang.String)/a!/b")
    assert code == 200 and body["status"] == 200 and json.loads(body["value"])["nodeID"] == "node-b-id"
    assert body["request"]["arguments"] == ["a/b"]
    code, body = call(site, "GET", f"/console/jolokia/read/{mbean}/LocalTargetFilter")
    assert body["status"] == 200 and body["value"] == "x"
    code, body = call(site, "GET", "/jolokia/list")
    assert code == 200 and body["status"] == 400


# -- junction route ---------------------------------------------------------------------
@pytest.fixture
def answers(monkeypatch):
    seen = {}

    def fake_fetch(url, timeout=15):
        seen["url"] = url
        return seen["answer"]

    monkeypatch.setattr("junction.cli.status_table.fetch_route", fake_fetch)
    # `junction route` first checks, from its status, which node it reached
    monkeypatch.setattr("junction.cli.status_table.fetch_status",
                        lambda url, timeout=5: {"name": "gw", "node_id": "gw-id"})
    return seen


def test_cli_route_remote(answers, capsys):
    answers["answer"] = (200, {"nodeID": "node-b-id", "local": False, "connector": {
        "name": "broker-b", "factoryClassName": CONNECTOR_FACTORY,
        "params": {"host": "10.0.0.2", "port": "61617"}, "extraProps": {}}})
    assert cli.main(["route", "r", "app 1", "--url", "http://h:8161/"]) == 0
    assert answers["url"] == "http://h:8161/api/routers/r/target?key=app+1"
    out = capsys.readouterr().out
    assert "node-b-id" in out and "broker-b 10.0.0.2:61617" in out and "local:     no" in out
    assert "router:    r on node gw (gw-id)" in out


def test_cli_route_local_and_refusal(answers, capsys):
    answers["answer"] = (200, {"nodeID": "gw", "local": True, "connector": None})
    assert cli.main(["route", "r", "k"]) == 0
    assert "local:     yes" in capsys.readouterr().out
    answers["answer"] = (503, {"status": "REFUSED_UNAVAILABLE", "error": "no target"})
    assert cli.main(["route", "r", "k"]) == 2
    assert "REFUSED_UNAVAILABLE" in capsys.readouterr().err


def test_cli_route_error(answers, capsys):
    answers["answer"] = (404, {"error": "no such connection router: x"})
    assert cli.main(["route", "x", "k"]) == 1
    assert "no such connection router" in capsys.readouterr().err


def test_fetch_route_unreachable():
    from junction.cli.status_table import StatusFetchError, fetch_route

    with pytest.raises(StatusFetchError):
        fetch_route("http://127.0.0.1:9/api/routers/r/target?key=k", timeout=1)


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://h:8161", "http://h:8161/api/routers/r%2Fx/target?key=a%26b"),
        ("h:8161/", "http://h:8161/api/routers/r%2Fx/target?key=a%26b"),
        ("https://ops.example/junction/api/status", "https://ops.example/junction/api/routers/r%2Fx/target?key=a%26b"),
    ],
)
def test_route_url(base, expected):
    from junction.cli.status_table import route_url

    assert route_url(base, "r/x", "a&b") == expected


# -- who may change a router -------------------------------------------------------------
def secured_node():
    """A node whose broker core has security on: admin may manage, app may not."""
    from types import SimpleNamespace

    from junction.brokercore.security import SecurityManager
    from junction.brokercore.wildcard import WildcardSyntax
    from junction.config.model import SecuritySetting
    from tests.unit.test_security import FakeUserStore

    users = FakeUserStore({"admin": ("secret", {"amq"}), "app": ("pw", {"app"})})
    settings = [SecuritySetting("#", {"manage": frozenset({"amq"}), "send": frozenset({"app", "amq"})})]
    node = FakeNode()
    node.server = SimpleNamespace(security=SecurityManager(users, settings, WildcardSyntax()))
    return node


def exchange_as(site, method, path, body, user=None, password=None):
    import base64

    ex = Exchange.__new__(Exchange)
    ex.proto = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
    ex.transport = StringTransport(
        hostAddress=IPv4Address("TCP", "127.0.0.1", 8161), peerAddress=IPv4Address("TCP", "127.0.0.1", 40000)
    )
    ex.proto.makeConnection(ex.transport)
    data = json.dumps(body).encode()
    raw = f"{method} {path} HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    if user is not None:
        raw += "Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode() + "\r\n"
    ex.proto.dataReceived(raw.encode() + b"\r\n" + data)
    head = ex.transport.value().partition(b"\r\n\r\n")[0]
    code, body = ex.result()
    return code, body, head


@pytest.mark.parametrize("how", ["rest", "jolokia"])
def test_changing_a_router_needs_a_user_with_manage_when_security_is_on(clock, how):
    node = secured_node()
    site = build_site(node, reactor=clock)
    router = node.routers["r"].router
    if how == "rest":
        path, body = "/api/routers/r/filters", {"keyFilter": "^[a-z]+"}
    else:
        path, body = "/jolokia/", {"type": "write", "mbean": MBEAN, "attribute": "TargetKeyFilter", "value": "^[a-z]+"}
    code, answer, head = exchange_as(site, "POST", path, body)
    assert code == 401 and b'WWW-Authenticate: Basic realm="junction"' in head
    assert "manage permission on activemq.management" in answer["error"]
    assert exchange_as(site, "POST", path, body, "admin", "wrong")[0] == 401
    code, answer, _ = exchange_as(site, "POST", path, body, "app", "pw")
    assert code == 403 and "user app does not have the manage permission" in answer["error"]
    assert router.key_filter is None  # nothing changed so far
    code, answer, _ = exchange_as(site, "POST", path, body, "admin", "secret")
    assert code == 200 and router.key_filter == "^[a-z]+"
    # reading needs no credentials
    assert call(site, "GET", "/api/routers/r/filters")[0] == 200
    assert jolokia(site, {"type": "read", "mbean": MBEAN, "attribute": "TargetKeyFilter"})["value"] == "^[a-z]+"
