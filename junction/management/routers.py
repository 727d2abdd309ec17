"""Connection-router management: REST endpoints and a Jolokia-compatible exec path.

Artemis's ``ConnectionRouterControl`` (``getTarget``, ``getTargetAsJSON``,
``LocalTargetFilter``, ``TargetKeyFilter``) exposed over HTTP; see
``docs/management.md``.  The node is duck-typed: ``node.routers`` maps a
router name to an object with ``.router`` (a ConnectionRouter-like object:
``get_target_for_key(key) -> Deferred[RouterResult]`` and the settable
``local_target_filter`` / ``key_filter`` properties) and optionally ``.pool``
(``status() -> list[dict]``).
"""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.parse

from twisted.internet import defer
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from junction.management.http import authorize_change, respond

log = logging.getLogger("junction.management")

CONNECTOR_FACTORY = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
#: Seconds a management routing query may wait for the router (quorum waits).
TARGET_TIMEOUT = 10.0

_FILTER_FIELDS = {"localTargetFilter": "local_target_filter", "keyFilter": "key_filter"}
_ATTRIBUTES = {"LocalTargetFilter": "local_target_filter", "TargetKeyFilter": "key_filter"}


def _routers(node) -> dict:
    routers = getattr(node, "routers", None)
    return routers if isinstance(routers, dict) else {}


def target_as_json(target, node=None) -> dict:
    """Artemis's ``getTargetAsJSON`` object for a :class:`Target`."""
    node_id = target.node_id
    if node_id is None and target.local and node is not None:
        node_id = getattr(node, "node_id", None)
    connector = None
    if not target.local and target.connector is not None:
        c = target.connector
        params = {"host": str(getattr(c, "host", "")), "port": str(getattr(c, "port", ""))}
        params.update({str(k): str(v) for k, v in (getattr(c, "params", None) or {}).items()})
        connector = {
            "name": getattr(c, "name", target.name),
            "factoryClassName": CONNECTOR_FACTORY,
            "params": params,
            "extraProps": {},
        }
    return {"nodeID": node_id, "local": bool(target.local), "connector": connector}


def router_summary(name, service) -> dict:
    router = service.router
    resolver = getattr(router, "key_resolver", None)
    key_type = getattr(resolver, "key_type", None)
    policy = getattr(router, "policy", None)
    pool = getattr(service, "pool", None)
    pool_info = None
    if pool is not None and hasattr(pool, "status"):
        members = pool.status()
        pool_info = {
            "targets": len(members),
            "ready": sum(1 for m in members if m.get("ready")),
            "members": members,
        }
    return {
        "name": name,
        "key_type": getattr(key_type, "name", key_type),
        "policy": getattr(policy, "name", None) if policy is not None else None,
        "local_target_filter": router.local_target_filter,
        "key_filter": router.key_filter,
        "pool": pool_info,
    }


def lookup(node, key: str, name: str, clock, timeout: float = TARGET_TIMEOUT) -> defer.Deferred:
    """A Deferred of the RouterResult for *key*, bounded by *timeout* seconds."""
    service = _routers(node)[name]
    d = defer.maybeDeferred(service.router.get_target_for_key, key)
    if clock is None:
        from twisted.internet import reactor as clock
    if timeout:
        d.addTimeout(timeout, clock)
    return d


def _status_name(result) -> str:
    return getattr(result.status, "name", str(result.status))


def _write_later(request, code, payload) -> None:
    if getattr(request, "_junction_gone", False):
        return
    body = respond(request, code, payload)
    request.write(body)
    request.finish()


def _watch(request) -> None:
    def gone(_):
        request._junction_gone = True

    request.notifyFinish().addErrback(gone)


class RoutersResource(Resource):
    """``/api/routers``, ``/api/routers/NAME/target`` and ``/api/routers/NAME/filters``."""

    def __init__(self, node, clock=None):
        super().__init__()
        self.node = node
        self.clock = clock

    def getChild(self, path, request):
        if path == b"" and not request.postpath:
            return self
        return _RouterChild(self, urllib.parse.unquote(path.decode("utf-8", "replace")))

    def render(self, request):
        if request.method not in (b"GET", b"HEAD"):
            return respond(request, 405, {"error": "use GET"})
        routers = _routers(self.node)
        try:
            payload = {"routers": [router_summary(n, s) for n, s in routers.items()]}
        except Exception as exc:
            log.exception("management API: /api/routers failed")
            return respond(request, 500, {"error": f"{type(exc).__name__}: {exc}"})
        return respond(request, 200, payload)


class _RouterChild(Resource):
    isLeaf = True

    def __init__(self, parent: RoutersResource, name: str):
        super().__init__()
        self.parent = parent
        self.name = name

    def render(self, request):
        routers = _routers(self.parent.node)
        if self.name not in routers:
            return respond(
                request, 404, {"error": f"no such connection router: {self.name}", "routers": sorted(routers)}
            )
        rest = [p for p in request.postpath if p]
        if rest == [b"target"]:
            if request.method not in (b"GET", b"HEAD"):
                return respond(request, 405, {"error": "use GET"})
            return self._target(request)
        if rest == [b"filters"]:
            if request.method in (b"GET", b"HEAD"):
                return respond(request, 200, self._filters())
            if request.method in (b"PUT", b"POST"):
                refused = authorize_change(request, self.parent.node)
                if refused is not None:
                    return refused
                return self._set_filters(request)
            return respond(request, 405, {"error": "use GET, PUT or POST"})
        if not rest:
            return respond(request, 200, router_summary(self.name, routers[self.name]))
        return respond(request, 404, {"error": f"no such resource under router {self.name}"})

    def _filters(self) -> dict:
        router = _routers(self.parent.node)[self.name].router
        return {"localTargetFilter": router.local_target_filter, "keyFilter": router.key_filter}

    def _set_filters(self, request):
        try:
            body = json.loads(request.content.read() or b"{}")
        except ValueError as exc:
            return respond(request, 400, {"error": f"body is not JSON: {exc}"})
        if not isinstance(body, dict) or not set(body) & set(_FILTER_FIELDS):
            return respond(request, 400, {"error": "expected a JSON object with localTargetFilter and/or keyFilter"})
        for field in body:
            if field not in _FILTER_FIELDS:
                return respond(request, 400, {"error": f"unknown field {field!r}"})
            value = body[field]
            if value is not None and not isinstance(value, str):
                return respond(request, 400, {"error": f"{field} must be a string or null"})
            try:
                re.compile(value or "")
            except re.error as exc:
                return respond(request, 400, {"error": f"invalid {field} regular expression: {exc}"})
        router = _routers(self.parent.node)[self.name].router
        try:
            for field, value in body.items():
                setattr(router, _FILTER_FIELDS[field], value)
        except ValueError as exc:
            return respond(request, 400, {"error": str(exc)})
        return respond(request, 200, self._filters())

    def _target(self, request):
        keys = request.args.get(b"key")
        if not keys:
            return respond(request, 400, {"error": "missing query parameter: key"})
        key = keys[0].decode("utf-8", "replace")
        node = self.parent.node
        _watch(request)
        d = lookup(node, key, self.name, self.parent.clock)

        def done(result):
            if result.ok and result.target is not None:
                _write_later(request, 200, target_as_json(result.target, node))
            else:
                status = _status_name(result)
                _write_later(
                    request,
                    503,
                    {"status": status, "error": f"connection router {self.name} has no target for key {key!r} ({status})"},
                )

        def failed(failure):
            if failure.check(defer.TimeoutError):
                _write_later(request, 504, {"error": f"connection router {self.name} did not answer in time"})
            else:
                log.error("management API: routing key %r on %s failed: %s", key, self.name, failure.getErrorMessage())
                _write_later(request, 500, {"error": failure.getErrorMessage()})

        d.addCallbacks(done, failed)
        d.addErrback(lambda f: log.error("management API: answering failed: %s", f.getErrorMessage()))
        return NOT_DONE_YET


# -- Jolokia ---------------------------------------------------------------------------
_MBEAN_RE = re.compile(r"^org\.apache\.activemq\.artemis:(?P<props>.*)$")


def _mbean_router(mbean: str) -> str | None:
    """The router name in an Artemis connection-router ObjectName, else None."""
    m = _MBEAN_RE.match(mbean or "")
    if not m:
        return None
    props = {}
    for part in re.findall(r'(\w[\w.-]*)=("(?:[^"\\]|\\.)*"|[^,]*)', m.group("props")):
        k, v = part
        props[k] = v[1:-1] if v.startswith('"') else v
    if props.get("component") != "connection-routers" or "name" not in props:
        return None
    return props["name"]


def _split_escaped(path: str) -> list[str]:
    """Jolokia GET-URL parts: split on "/", where "!/" is a literal "/" and "!!" a "!"."""
    parts, current, i = [], [], 0
    while i < len(path):
        ch = path[i]
        if ch == "!" and i + 1 < len(path):
            current.append(path[i + 1])
            i += 2
            continue
        if ch == "/":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _get_form(postpath) -> dict | None:
    """The request object for ``GET /jolokia/exec/MBEAN/OP/ARGS`` or ``/jolokia/read/MBEAN[/ATTR]``."""
    raw = urllib.parse.unquote("/".join(p.decode("utf-8", "replace") for p in postpath))
    parts = _split_escaped(raw.strip("/"))
    if len(parts) >= 3 and parts[0] == "exec":
        return {"type": "exec", "mbean": parts[1], "operation": parts[2], "arguments": parts[3:]}
    if len(parts) in (2, 3) and parts[0] == "read":
        body = {"type": "read", "mbean": parts[1]}
        if len(parts) == 3 and parts[2]:
            body["attribute"] = parts[2]
        return body
    return None


def _jolokia_error(request_body, status, error_type, error):
    return {"request": request_body, "status": status, "error_type": error_type, "error": error,
            "timestamp": int(time.time())}


class JolokiaResource(Resource):
    """``POST /jolokia/`` (and ``/console/jolokia/``): exec, read, write on routers."""

    isLeaf = True

    def __init__(self, node, clock=None):
        super().__init__()
        self.node = node
        self.clock = clock

    def render(self, request):
        if request.method == b"GET" and any(request.postpath):
            body = _get_form(request.postpath)
            if body is None:
                return respond(request, 200, _jolokia_error(None, 400, "java.lang.IllegalArgumentException",
                                                             "expected /jolokia/exec/MBEAN/OPERATION/ARGS... "
                                                             "or /jolokia/read/MBEAN[/ATTRIBUTE]"))
            return self._answer(request, body)
        if request.method != b"POST":
            return respond(request, 405, {"error": "use POST with a Jolokia JSON request"})
        try:
            body = json.loads(request.content.read() or b"null")
        except ValueError as exc:
            return respond(request, 200, _jolokia_error(None, 400, "java.lang.IllegalArgumentException", f"bad JSON: {exc}"))
        if not isinstance(body, dict):
            return respond(request, 200, _jolokia_error(body, 400, "java.lang.IllegalArgumentException",
                                                         "expected one Jolokia request object"))
        return self._answer(request, body)

    def _answer(self, request, body):
        if body.get("type") == "write":
            refused = authorize_change(request, self.node)
            if refused is not None:
                return refused
        _watch(request)
        d = defer.maybeDeferred(self._handle, body)

        def done(payload):
            _write_later(request, 200, payload)

        def failed(failure):
            error_type = "java.util.concurrent.TimeoutException" if failure.check(defer.TimeoutError) else "java.lang.Exception"
            _write_later(request, 200, _jolokia_error(body, 500, error_type, failure.getErrorMessage()))

        d.addCallbacks(done, failed)
        return NOT_DONE_YET

    def _ok(self, body, value):
        return {"request": body, "value": value, "status": 200, "timestamp": int(time.time())}

    def _handle(self, body):
        kind = body.get("type")
        mbean = body.get("mbean", "")
        name = _mbean_router(mbean)
        routers = _routers(self.node)
        if name is None or name not in routers:
            return _jolokia_error(body, 404, "javax.management.InstanceNotFoundException", f"{mbean}")
        router = routers[name].router
        if kind == "read":
            attr = body.get("attribute")
            if attr is None:
                return self._ok(body, {a: getattr(router, p) for a, p in _ATTRIBUTES.items()})
            if attr not in _ATTRIBUTES:
                return _jolokia_error(body, 404, "javax.management.AttributeNotFoundException",
                                      f"No such attribute: {attr}")
            return self._ok(body, getattr(router, _ATTRIBUTES[attr]))
        if kind == "write":
            attr = body.get("attribute")
            if attr not in _ATTRIBUTES:
                return _jolokia_error(body, 404, "javax.management.AttributeNotFoundException",
                                      f"No such attribute: {attr}")
            old = getattr(router, _ATTRIBUTES[attr])
            try:
                setattr(router, _ATTRIBUTES[attr], body.get("value"))
            except (ValueError, TypeError) as exc:
                return _jolokia_error(body, 400, "java.lang.IllegalArgumentException", str(exc))
            return self._ok(body, old)
        if kind == "exec":
            operation = body.get("operation", "")
            op = operation.split("(", 1)[0]
            if op not in ("getTarget", "getTargetAsJSON"):
                return _jolokia_error(body, 404, "java.lang.IllegalArgumentException",
                                      f"No operation {operation} found on MBean {mbean}")
            args = body.get("arguments") or []
            if len(args) != 1:
                return _jolokia_error(body, 400, "java.lang.IllegalArgumentException",
                                      f"{op} takes one argument, the key")
            d = lookup(self.node, str(args[0]), name, self.clock)

            def answer(result):
                if not (result.ok and result.target is not None):
                    return self._ok(body, None)
                value = target_as_json(result.target, self.node)
                return self._ok(body, json.dumps(value) if op == "getTargetAsJSON" else value)

            return d.addCallback(answer)
        return _jolokia_error(body, 400, "java.lang.IllegalArgumentException",
                              f"unsupported request type {kind!r} (exec, read and write are)")
