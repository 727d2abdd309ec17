"""``junction status``: fetch a node's ``/api/status`` and print it as tables.

Two pieces the CLI wires together: :func:`fetch_status` (stdlib ``urllib``,
so the command needs no reactor) and :func:`format_status`, which turns the
status dict into aligned plain text for a terminal or a support ticket
(the cluster part is :mod:`junction.cli.cluster_table`).
Both tolerate keys missing from the dict, so the command works against
older or newer nodes whose status has fewer or more fields.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request

from junction.cli.tables import cell, format_bytes, format_duration, format_table, truncate

__all__ = [
    "DEFAULT_URL",
    "StatusFetchError",
    "NotAJunctionNode",
    "check_node",
    "fetch_status",
    "format_status",
    "status_url",
    "route_url",
    "fetch_route",
    "format_route",
]

#: Where a node's management API listens unless broker.xml says otherwise.
DEFAULT_URL = "http://127.0.0.1:8161"


class StatusFetchError(OSError):
    """The node's status could not be read; ``str()`` is a one-line reason for the user.

    An :class:`OSError` so callers that already handle network errors (the
    CLI catches ``OSError``) also handle an error answer or a non-JSON body.
    """


class NotAJunctionNode(StatusFetchError):
    """Something answered at the URL, but not a Junction node's management API.

    Another program has the port (an Artemis console listens on 8161 too), or
    the URL names a node's messaging port.  ``port`` is the URL's port.
    """

    def __init__(self, message: str, port: int | None = None):
        super().__init__(message)
        self.port = port


# -- fetching -------------------------------------------------------------------------
def status_url(url: str) -> str:
    """The ``/api/status`` URL for a management base URL.

    ``http://host:8161``, ``http://host:8161/`` and ``host:8161`` all become
    ``http://host:8161/api/status``; a URL that already ends in
    ``/api/status`` is kept; any other path is taken as a prefix (a node behind
    a reverse proxy at ``https://ops.example/junction``).
    """
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    path = parts.path
    if not path.rstrip("/").endswith("/api/status"):
        path = path.rstrip("/") + "/api/status"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetch_status(url: str = DEFAULT_URL, timeout: float = 5) -> dict:
    """GET the node's status from the management API at *url* and return the dict.

    Raises :class:`StatusFetchError` with a readable reason when the node is
    unreachable, answers with an error (the API's JSON ``error`` text is
    included), or answers with something that is not a JSON object.  Proxy
    settings from the environment are ignored for loopback addresses: a
    corporate ``http_proxy`` must not turn ``junction status`` on the node's
    own host into a proxy error.
    """
    target = status_url(url)
    port = urllib.parse.urlsplit(target).port
    request = urllib.request.Request(target, headers={"Accept": "application/json"})
    handlers = []
    if _is_loopback(urllib.parse.urlsplit(target).hostname):
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    not_junction = f"{target} is not a Junction node's management API"
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read()
            kind = response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        raw = exc.read() if exc.fp is not None else b""
        if not _junction_error(raw):  # a Junction node's errors are JSON objects with an error text
            detail = _error_detail(raw) or exc.reason
            raise NotAJunctionNode(f"{not_junction}: it answered HTTP {exc.code}: {detail}", port) from exc
        raise StatusFetchError(f"{target}: HTTP {exc.code}: {_error_detail(raw)}") from exc
    except urllib.error.URLError as exc:
        raise StatusFetchError(f"cannot reach {target}: {exc.reason}") from exc
    except (http.client.HTTPException, ConnectionResetError) as exc:  # connected, but no HTTP answer
        raise NotAJunctionNode(f"{not_junction}: it did not answer HTTP ({exc!r})", port) from exc
    except OSError as exc:  # timeouts while reading
        raise StatusFetchError(f"cannot read {target}: {exc}") from exc
    try:
        status = json.loads(body)
    except ValueError as exc:
        raise NotAJunctionNode(f"{not_junction}: it did not answer JSON ({kind})", port) from exc
    if not isinstance(status, dict):
        raise NotAJunctionNode(f"{not_junction}: it answered {type(status).__name__}, not a status object", port)
    if not status.get("node_id") or "name" not in status:
        raise NotAJunctionNode(f"{not_junction}: its JSON has no node_id and name", port)
    return status


def _junction_error(body: bytes) -> bool:
    try:
        payload = json.loads(body)
    except ValueError:
        return False
    return isinstance(payload, dict) and bool(payload.get("error") or payload.get("problems"))


def check_node(status: dict, expected: str | None, url: str) -> str | None:
    """None when *status* is the node the caller meant, else why not, in one line.

    *expected* is a node's name or node id (either matches; None accepts any
    Junction node).
    """
    if expected is None or expected in (status.get("name"), status.get("node_id")):
        return None
    return (f"{url} is node {status.get('name')} ({status.get('node_id')}), not {expected}: "
            "another node has this port")


def route_url(url: str, router: str, key: str) -> str:
    """The ``/api/routers/ROUTER/target?key=KEY`` URL for a management base URL.

    The base is read as :func:`status_url` reads it (``host:8161``, a proxy
    prefix, or even a URL ending in ``/api/status`` all work).
    """
    status = urllib.parse.urlsplit(status_url(url))
    base = status.path[: -len("/api/status")]
    path = f"{base}/api/routers/{urllib.parse.quote(router, safe='')}/target"
    query = urllib.parse.urlencode({"key": key})
    return urllib.parse.urlunsplit((status.scheme, status.netloc, path, query, ""))


def fetch_route(url: str, timeout: float = 15) -> tuple[int, dict]:
    """GET a routing answer; ``(HTTP status, JSON object)`` for any JSON answer.

    Error answers (404, 400, the 503 refusal) are returned, not raised, so the
    caller can tell a refusal from a failure; an unreachable node or a body
    that is not a JSON object raises :class:`StatusFetchError`.
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    handlers = []
    if _is_loopback(urllib.parse.urlsplit(url).hostname):
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(request, timeout=timeout) as response:
            code, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, (exc.read() if exc.fp is not None else b"")
    except urllib.error.URLError as exc:
        raise StatusFetchError(f"cannot reach {url}: {exc.reason}") from exc
    except OSError as exc:
        raise StatusFetchError(f"cannot read {url}: {exc}") from exc
    try:
        payload = json.loads(body)
    except ValueError:
        raise StatusFetchError(f"{url}: HTTP {code}: {_error_detail(body)}") from None
    if not isinstance(payload, dict):
        raise StatusFetchError(f"{url}: HTTP {code}: answered {type(payload).__name__}, not an object")
    return code, payload


def format_route(target: dict) -> str:
    """A getTargetAsJSON object as the lines ``junction route`` prints."""
    lines = [f"node id:   {target.get('nodeID') or '-'}", f"local:     {'yes' if target.get('local') else 'no'}"]
    connector = target.get("connector")
    if isinstance(connector, dict):
        params = connector.get("params") or {}
        lines.append(f"connector: {connector.get('name')} {params.get('host', '?')}:{params.get('port', '?')}")
    else:
        lines.append("connector: - (the local broker core)")
    return "\n".join(lines)


def _error_detail(body: bytes) -> str:
    """The ``error`` text of a JSON error body, else the body's first line."""
    try:
        payload = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return text.splitlines()[0][:200] if text else ""
    if isinstance(payload, dict):
        if payload.get("error"):
            return str(payload["error"])
        if payload.get("problems"):
            return "; ".join(str(p) for p in payload["problems"])
    return str(payload)[:200]


# -- formatting -----------------------------------------------------------------------
def _section(title: str, headers, rows, numeric) -> list[str]:
    lines = ["", f"{title} ({len(rows)})"]
    if rows:
        lines.extend("  " + text for text in format_table(headers, rows, numeric))
    else:
        lines.append("  (none)")
    return lines


#: Width the journal figures wrap at (they are a dozen or more key/value pairs).
JOURNAL_WRAP = 90


def _journal_lines(status: dict) -> list[str]:
    """Persistence on/off, then the journal's figures wrapped over a few lines."""
    if not status.get("persistence_enabled"):
        return ["disabled (persistence-enabled=false)"]
    journal = status.get("journal")
    if not isinstance(journal, dict) or not journal:
        return ["enabled"]
    figures = []
    for key in sorted(journal, key=str):
        value = journal[key]
        if isinstance(value, (dict, list)) or value is None:
            continue
        if isinstance(value, float) and not value.is_integer():
            value = round(value, 2)
        shown = format_bytes(value) if "bytes" in str(key) or str(key).endswith("size") else cell(value)
        figures.append(f"{key} {shown}")
    lines = []
    current = "enabled; journal:"
    for figure in figures:
        if len(current) + len(figure) + 2 > JOURNAL_WRAP and current:
            lines.append(current.rstrip(","))
            current = "  " + figure + ","
        else:
            current += " " + figure + ","
    lines.append(current.rstrip(","))
    return lines


def _reload_lines(reload) -> list[tuple[str, str]]:
    """Header lines for a configuration reload that failed or waits for a restart (none when all is well)."""
    if not isinstance(reload, dict):
        return []
    lines = []
    errors = reload.get("errors") or []
    if errors:
        more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
        lines.append(("CONFIG NOT RELOADED", f"{errors[0]}{more} (the running configuration is kept)"))
    if reload.get("restart_needed"):
        lines.append(("Restart needed", "changed in the file: " + ", ".join(map(str, reload["restart_needed"]))))
    for key, what in (("users", "USERS FILE"), ("certificate_users", "CERT USERS FILE")):
        problem = (reload.get(key) or {}).get("error")
        if problem:
            lines.append((f"{what} NOT RELOADED", f"{problem[0]} (the users loaded before are kept)"))
    return lines


def format_status(status: dict) -> str:
    """The status dict from ``/api/status`` as readable, aligned plain text.

    Header lines (node, uptime, persistence and journal, message totals),
    then tables of acceptors, addresses and queues, then, when the status has
    a ``cluster`` key, the "Cluster" section of
    :func:`junction.cli.cluster_table.format_cluster`.  Names longer than
    :data:`~junction.cli.tables.MAX_NAME_WIDTH` end in an ellipsis so a long temporary-queue name
    cannot push every other column off the screen.  Missing keys show as
    ``-`` rather than failing.
    """
    name = status.get("name") or "-"
    node_id = status.get("node_id") or "-"
    header = [("Node", f"{name} ({node_id})")]
    extras = []
    if status.get("version"):
        extras.append(f"version {status['version']}")
    if status.get("pid") is not None:
        extras.append(f"pid {status['pid']}")
    if extras:
        header.append(("", ", ".join(extras)))
    header.append(("Uptime", format_duration(status.get("uptime_s"))))
    if status.get("config"):
        header.append(("Config", str(status["config"])))
    header.extend(_reload_lines(status.get("reload")))
    persistence = _journal_lines(status)
    header.append(("Persistence", persistence[0]))
    header.extend(("", line) for line in persistence[1:])
    if status.get("journal_failed"):
        header.append(("JOURNAL FAILED", f"{status['journal_failed']} (durable sends are refused)"))
    data_dirs = status.get("data_dirs")
    if isinstance(data_dirs, dict) and data_dirs:
        header.append(("Data dirs", ", ".join(f"{k} {v}" for k, v in sorted(data_dirs.items()))))
    connections = status.get("connections")
    header.append(
        (
            "Clients",
            f"{len(connections) if isinstance(connections, list) else '-'} connections, "
            f"{cell(status.get('sessions'))} sessions",
        )
    )
    header.append(
        (
            "Messages",
            "routed {}, duplicate {}, dead-lettered {}, expired {}, dropped {}".format(
                *(
                    cell(status.get(k))
                    for k in (
                        "messages_routed",
                        "messages_duplicate",
                        "messages_dead_lettered",
                        "messages_expired",
                        "messages_dropped",
                    )
                )
            ),
        )
    )
    label_width = max(len(label) for label, _ in header)
    lines = [f"{label.ljust(label_width)}  {value}".rstrip() for label, value in header]

    acceptors = status.get("acceptors") or []
    rows = []
    for acc in acceptors:
        host = acc.get("host") or "*"
        listen = f"[{host}]:{acc.get('port')}" if ":" in str(host) else f"{host}:{acc.get('port')}"
        if acc.get("listening") is False:
            listen += " (not listening)"
        protocols = acc.get("protocols")
        protocols = ",".join(str(p) for p in protocols) if protocols else "all"
        router = acc.get("router")
        if router:
            connections = (acc.get("forwarded") or 0) + (acc.get("connections") or 0)
            router = f"{router} ({acc.get('forwarded', 0)} forwarded, {acc.get('opening', 0)} opening)"
        else:
            connections = acc.get("connections")
        rows.append([truncate(acc.get("name")), protocols, listen, connections, router or ""])
    lines += _section("Acceptors", ["NAME", "PROTOCOLS", "LISTEN", "CONNECTIONS", "ROUTER"], rows, {3})

    routers = status.get("routers")
    if isinstance(routers, dict) and routers:
        rows = []
        for name, router in routers.items():
            for target in router.get("targets") or []:
                # why a target is not ready, or what to know about a ready one
                # (another broker: its node id stands in, its count is unknown)
                why = target.get("problem") if not target.get("ready") else target.get("note")
                rows.append(
                    [
                        truncate(name),
                        truncate(target.get("name")),
                        target.get("node_id"),
                        "yes" if target.get("ready") else "no",
                        target.get("probe") or "",
                        target.get("connection_count"),
                        "local" if target.get("local") else "",
                        why or "",
                    ]
                )
        lines += _section(
            "Router targets",
            ["ROUTER", "TARGET", "NODE ID", "READY", "PROBE", "CONNECTIONS", "LOCAL", "PROBLEM / NOTE"],
            rows,
            {5},
        )

    rows = []
    for addr in status.get("addresses") or []:
        routing = ",".join(str(r) for r in addr.get("routing_types") or []) or "-"
        queues = addr.get("queues")
        rows.append(
            [
                truncate(addr.get("name")),
                routing,
                len(queues) if isinstance(queues, list) else queues,
                addr.get("message_count"),
                format_bytes(addr.get("size_bytes")),
                addr.get("blocked_producers"),
                addr.get("routed_total"),
            ]
        )
    lines += _section(
        "Addresses",
        ["NAME", "ROUTING", "QUEUES", "MESSAGES", "SIZE", "BLOCKED", "ROUTED"],
        rows,
        {2, 3, 4, 5, 6},
    )

    rows = []
    for queue in status.get("queues") or []:
        rows.append(
            [
                truncate(queue.get("name")),
                truncate(queue.get("address")),
                queue.get("routing_type"),
                queue.get("message_count"),
                queue.get("consumer_count"),
                queue.get("delivering_count"),
                queue.get("messages_added"),
                queue.get("messages_acknowledged"),
            ]
        )
    lines += _section(
        "Queues",
        ["NAME", "ADDRESS", "TYPE", "MESSAGES", "CONSUMERS", "DELIVERING", "ADDED", "ACKED"],
        rows,
        {3, 4, 5, 6, 7},
    )
    if isinstance(status.get("cluster"), dict):
        from junction.cli.cluster_table import format_cluster

        lines += format_cluster(status["cluster"])
    return "\n".join(lines)
