"""The node's management HTTP API and Prometheus endpoint.

:func:`build_site` returns a :class:`twisted.web.server.Site` the node listens
with on its management port (``management_host:management_port``, 8161 by
default, like the Artemis console).  It serves

``GET /api/health``
    200 ``{"status": "ok", ...}`` or 503 ``{"status": "failing", "problems": [...]}``
    from ``node.healthy()``, so load balancers and orchestrators can probe it.
``GET /api/status``
    ``node.status()`` as JSON: the broker core's figures plus acceptors,
    connections, config path and data directories.
``GET /api/routers`` (and ``/api/routers/NAME/target?key=K``, ``/filters``)
    The connection routers, Artemis's ``ConnectionRouterControl`` as JSON
    (:mod:`junction.management.routers`); ``POST /jolokia/`` is the same
    through a Jolokia-compatible exec/read/write path.
``GET /metrics``
    Prometheus text exposition (format 0.0.4), computed from ``node.status()``
    at scrape time by :class:`NodeCollector` in a registry private to the node,
    so several nodes in one process (tests, the gateway) never share series.

Everything else is a JSON 404; other methods than GET/HEAD are a JSON 405.
The handlers run on the reactor thread and are synchronous: ``status()``
only reads in-memory counters.  Failures inside the node are caught, logged
and answered with a JSON 500 (or, for ``/metrics``, ``junction_up 0``), so a
bug in a status figure never takes the broker down with it.

The *node* is duck-typed: it needs ``healthy() -> (ok, problems)`` and
``status() -> dict``, and should expose ``name`` and ``node_id`` attributes
(read for ``/api/health``; when missing they are taken from ``status()``).
"""

from __future__ import annotations

import datetime
import logging
import math
import re

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from twisted.web.resource import Resource
from twisted.web.server import Site

from junction.management.http import JSON_CONTENT_TYPE, encode_json, respond

__all__ = [
    "build_site",
    "build_registry",
    "NodeCollector",
    "ManagementRoot",
    "HealthResource",
    "StatusResource",
    "MetricsResource",
    "NotFoundResource",
    "METRICS_CONTENT_TYPE",
]

log = logging.getLogger("junction.management")

#: The classic Prometheus text format, which every Prometheus version scrapes.
#: (``prometheus_client.CONTENT_TYPE_LATEST`` may announce a newer format than
#: :func:`generate_latest` writes, depending on the library version.)
METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

#: The endpoints, listed in 404 answers to help someone who mistyped a path.
ENDPOINTS = ("/api/health", "/api/status", "/api/routers", "/api/tls", "/api/queues", "/metrics", "/jolokia/")

_READ_METHODS = (b"GET", b"HEAD")


def build_site(node, reactor=None) -> Site:
    """The management :class:`Site` for *node* (see the module docstring).

    *reactor* is handed to the Site for its connection timeouts and log
    timestamps; ``None`` means the global reactor, imported only then, so
    tests can pass a :class:`twisted.internet.task.Clock`.
    """
    root = ManagementRoot(node, clock=reactor)
    kwargs = {} if reactor is None else {"reactor": reactor}
    site = Site(root, **kwargs)
    # Never send Python tracebacks to HTTP clients; ours go to the log.
    site.displayTracebacks = False
    # No "Starting factory" log lines each time the port opens.
    site.noisy = False
    return site


def build_registry(node) -> CollectorRegistry:
    """A fresh registry holding only a :class:`NodeCollector` for *node*.

    One registry per node rather than the process-global ``REGISTRY``: the
    collector's series are the node's, and two nodes in one process (tests,
    gateway plus broker) must not collide or leak into each other's scrapes.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(node))
    return registry


# -- JSON helpers ---------------------------------------------------------------------
def _request_path(request) -> str:
    """The path the client asked for, as text, for error messages."""
    segments = list(getattr(request, "prepath", [])) + list(getattr(request, "postpath", []))
    return "/" + b"/".join(segments).decode("utf-8", "replace")


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- resources ------------------------------------------------------------------------
class NotFoundResource(Resource):
    """A JSON 404 for any path and method (Twisted's own page is HTML)."""

    isLeaf = True

    def render(self, request):
        return respond(
            request,
            404,
            {"error": f"no such resource: {_request_path(request)}", "endpoints": list(ENDPOINTS)},
        )


class _Endpoint(Resource):
    """A read-only JSON endpoint: GET and HEAD only, trailing slash tolerated.

    Subclasses implement :meth:`get`.  Any exception it lets escape becomes a
    logged JSON 500, so a failure in the node never shows up as a Twisted
    HTML error page or, worse, as an unhandled error in the reactor.
    """

    def __init__(self, node):
        super().__init__()
        self.node = node

    def getChild(self, path, request):
        # "/api/status/" is the same resource as "/api/status"; deeper is a 404.
        if path == b"" and not request.postpath:
            return self
        return NotFoundResource()

    def render(self, request):
        if request.method not in _READ_METHODS:
            request.setHeader(b"Allow", b", ".join(_READ_METHODS))
            method = request.method.decode("ascii", "replace")
            return respond(
                request,
                405,
                {"error": f"method {method} not allowed on {_request_path(request)}; use GET"},
            )
        try:
            return self.get(request)
        except Exception as exc:
            log.exception("management API: %s failed", _request_path(request))
            return respond(request, 500, {"error": _error_text(exc)})

    def get(self, request) -> bytes:
        raise NotImplementedError


class HealthResource(_Endpoint):
    """``/api/health``: 200 when ``node.healthy()`` says so, else 503 with the problems."""

    def get(self, request) -> bytes:
        try:
            result = self.node.healthy()
        except Exception as exc:
            # A health check that cannot run is a failing node, not a server
            # error: probes must see 503 and the reason.
            log.exception("management API: node.healthy() failed")
            return respond(
                request,
                503,
                {"status": "failing", "problems": [f"health check raised {_error_text(exc)}"]},
            )
        if isinstance(result, tuple):
            ok, problems = result
        else:  # tolerate a plain bool
            ok, problems = result, []
        if ok:
            name, node_id = _node_identity(self.node)
            return respond(request, 200, {"status": "ok", "node": name, "node_id": node_id})
        return respond(
            request,
            503,
            {"status": "failing", "problems": [str(p) for p in problems or ["unhealthy"]]},
        )


class StatusResource(_Endpoint):
    """``/api/status``: ``node.status()`` as JSON; a failure in it is a JSON 500."""

    def get(self, request) -> bytes:
        status = self.node.status()
        body = encode_json(status)
        request.setResponseCode(200)
        request.setHeader(b"Content-Type", JSON_CONTENT_TYPE)
        request.setHeader(b"Cache-Control", b"no-store")
        return body


class MetricsResource(_Endpoint):
    """``/metrics``: the node's registry in Prometheus text format."""

    def __init__(self, node, registry: CollectorRegistry):
        super().__init__(node)
        self.registry = registry

    def get(self, request) -> bytes:
        body = generate_latest(self.registry)
        request.setResponseCode(200)
        request.setHeader(b"Content-Type", METRICS_CONTENT_TYPE)
        request.setHeader(b"Cache-Control", b"no-store")
        return body


class _ApiResource(Resource):
    """``/api``: parent of the JSON endpoints; anything unknown under it is a 404."""

    def getChild(self, path, request):
        return NotFoundResource()

    def render(self, request):
        return NotFoundResource().render(request)


class ManagementRoot(Resource):
    """The root of the management site; ``registry`` is the node's metrics registry."""

    def __init__(self, node, registry: CollectorRegistry | None = None, clock=None):
        from junction.management.queues import QueuesResource
        from junction.management.routers import JolokiaResource, RoutersResource
        from junction.management.tls import TLSResource

        super().__init__()
        self.node = node
        self.registry = registry if registry is not None else build_registry(node)
        api = _ApiResource()
        api.putChild(b"health", HealthResource(node))
        api.putChild(b"status", StatusResource(node))
        api.putChild(b"routers", RoutersResource(node, clock))
        api.putChild(b"tls", TLSResource(node))
        api.putChild(b"queues", QueuesResource(node))
        self.putChild(b"api", api)
        self.putChild(b"metrics", MetricsResource(node, self.registry))
        jolokia = JolokiaResource(node, clock)
        self.putChild(b"jolokia", jolokia)
        console = _ApiResource()
        console.putChild(b"jolokia", jolokia)
        self.putChild(b"console", console)

    def getChild(self, path, request):
        return NotFoundResource()

    def render(self, request):
        return NotFoundResource().render(request)


def _node_identity(node) -> tuple[str | None, str | None]:
    """``(name, node_id)`` from the node's attributes, else from its status()."""
    name = getattr(node, "name", None)
    node_id = getattr(node, "node_id", None)
    if callable(name):
        name = None
    if callable(node_id):
        node_id = None
    if name is None or node_id is None:
        try:
            status = node.status()
        except Exception:
            log.exception("management API: node.status() failed while answering /api/health")
            status = {}
        if name is None:
            name = status.get("name")
        if node_id is None:
            node_id = status.get("node_id")
    return name, node_id


# -- metrics --------------------------------------------------------------------------
def _number(value) -> float | None:
    """A sample value, or None for anything that is not a finite-or-inf number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        value = float(value)
        return None if math.isnan(value) else value
    return None


_METRIC_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")

#: Journal statistics that only ever grow (``Journal.stats()``); exported as
#: counters with the ``_total`` suffix Prometheus expects.  Other numeric
#: keys are gauges unless their name already ends in ``_total``.
JOURNAL_COUNTERS = frozenset(
    {"records", "records_synced", "syncs", "batches", "bytes_written", "compactions", "compaction_errors", "files_removed"}
)


def _metric_suffix(key: str) -> str:
    """A journal stats key as a metric-name fragment (``fsync.ms`` -> ``fsync_ms``)."""
    return _METRIC_NAME_BAD.sub("_", str(key)).strip("_").lower()


class NodeCollector:
    """A prometheus_client collector that reads ``node.status()`` at scrape time.

    Nothing is kept between scrapes: every sample is recomputed from the
    status dict, so queues that disappear stop being exported and no counter
    is ever double-kept next to the broker's own.  When ``status()`` raises,
    the error is logged and the scrape carries ``junction_up 0`` only, which
    is what alerting should key on.

    Every series and label is listed in ``docs/management.md``.
    """

    def __init__(self, node):
        self.node = node

    def collect(self):
        try:
            status = self.node.status()
            families = self._families(status)
        except Exception:
            log.exception("metrics: reading node.status() failed")
            yield GaugeMetricFamily("junction_up", "1 when the node answered its status, 0 when reading it failed.", value=0)
            return
        yield from families

    # The families are built in full before anything is yielded, so a
    # malformed status dict fails the whole scrape cleanly (junction_up 0)
    # instead of producing half an exposition.
    def _families(self, status: dict) -> list:
        families = [
            GaugeMetricFamily("junction_up", "1 when the node answered its status, 0 when reading it failed.", value=1)
        ]
        families.extend(self._node_families(status))
        families.extend(self._queue_families(status.get("queues") or []))
        families.extend(self._address_families(status.get("addresses") or []))
        families.extend(self._connection_families(status))
        families.extend(self._journal_families(status))
        families.extend(self._router_families(status))
        families.extend(self._tls_families(status))
        families.extend(self._admission_families(status))
        return families

    @staticmethod
    def _admission_families(status: dict) -> list:
        """Connections refused at accept by an abuse limit, per acceptor and limit."""
        refused = CounterMetricFamily(
            "junction_acceptor_refused",
            "Connections closed at accept by a limit: connectionsAllowedPerAddress, connectionRatePerAddress, handshakesAllowed.",
            labels=["acceptor", "limit"],
        )
        open_sources = GaugeMetricFamily(
            "junction_acceptor_sources", "Source addresses with connections open on the acceptor.", labels=["acceptor"]
        )
        seen = False
        for acceptor in status.get("acceptors") or []:
            name = str(acceptor.get("name"))
            admission = acceptor.get("admission")
            if isinstance(admission, dict):
                seen = True
                open_sources.add_metric([name], _number(admission.get("sources")) or 0)
                for limit in ("connectionsAllowedPerAddress", "connectionRatePerAddress"):
                    refused.add_metric([name, limit], _number((admission.get("refused") or {}).get(limit)) or 0)
            tls = acceptor.get("tls")
            if isinstance(tls, dict) and _number(tls.get("handshakes_allowed")) not in (None, -1):
                seen = True
                refused.add_metric([name, "handshakesAllowed"], _number(tls.get("refused_busy")) or 0)
        return [refused, open_sources] if seen else []

    @staticmethod
    def _tls_families(status: dict) -> list:
        """TLS acceptors: failed and refused handshakes, and when each certificate expires."""
        tls = [(a["name"], a["tls"]) for a in status.get("acceptors") or [] if isinstance(a.get("tls"), dict)]
        if not tls:
            return []
        kinds = CounterMetricFamily(
            "junction_tls_handshakes_failed",
            "TLS handshakes that did not complete: refused (SNI checks), failed (OpenSSL), timed_out (handshake-timeout).",
            labels=["acceptor", "reason"],
        )
        expiry = GaugeMetricFamily(
            "junction_tls_certificate_expiry_timestamp_seconds",
            "When the certificate served for an SNI name ('*': the default) expires, Unix time.",
            labels=["acceptor", "sni"],
        )
        reloads = CounterMetricFamily("junction_tls_reloads", "Certificate reloads done (SIGHUP, POST /api/tls/reload).", labels=["acceptor"])
        for name, entry in tls:
            for reason in ("refused", "failed", "timed_out"):
                kinds.add_metric([name, reason], _number(entry.get(f"handshakes_{reason}")) or 0)
            reloads.add_metric([name], _number(entry.get("reloads")) or 0)
            for cert in entry.get("certificates") or []:
                try:
                    when = datetime.datetime.fromisoformat(cert["not_after"]).timestamp()
                except (KeyError, TypeError, ValueError):
                    continue
                expiry.add_metric([name, str(cert.get("sni"))], when)
        return [kinds, expiry, reloads]

    def _node_families(self, status: dict) -> list:
        out = []
        info = GaugeMetricFamily(
            "junction_info", "Constant 1, labelled with the node's identity.", labels=["node", "node_id", "version"]
        )
        info.add_metric(
            [str(status.get("name") or ""), str(status.get("node_id") or ""), str(status.get("version") or "")], 1
        )
        out.append(info)
        healthy = self._healthy()
        if healthy is not None:
            out.append(GaugeMetricFamily("junction_healthy", "1 when /api/health answers ok, else 0.", value=healthy))
        gauges = (
            ("junction_uptime_seconds", "Seconds since the broker core started.", "uptime_s"),
            ("junction_sessions", "Open protocol sessions on the broker core.", "sessions"),
            ("junction_duplicate_ids", "Entries in the duplicate-detection id cache.", "duplicate_ids"),
            ("junction_persistence_enabled", "1 when the node persists messages to its journal.", "persistence_enabled"),
        )
        for name, help_text, key in gauges:
            value = _number(status.get(key))
            if value is not None:
                out.append(GaugeMetricFamily(name, help_text, value=value))
        out.append(
            GaugeMetricFamily(
                "junction_journal_failed",
                "1 when the journal has failed and durable sends are refused.",
                value=1 if status.get("journal_failed") else 0,
            )
        )
        counters = (
            ("junction_messages_routed", "Messages the node stored to one or more queues since it started.", "messages_routed"),
            ("junction_messages_duplicate", "Sends ignored by duplicate detection since the node started.", "messages_duplicate"),
            ("junction_messages_dead_lettered", "Message references dead-lettered (or dropped for lack of a dead-letter address) since the node started.", "messages_dead_lettered"),
            ("junction_messages_dropped", "Messages dropped: DROP address-full policy, or no queue to route to and no dead-letter route.", "messages_dropped"),
            ("junction_messages_expired", "Message references expired on any queue of the node since it started.", "messages_expired"),
        )
        for name, help_text, key in counters:
            value = _number(status.get(key))
            if value is not None:
                out.append(CounterMetricFamily(name, help_text, value=value))
        return out

    def _healthy(self) -> float | None:
        healthy = getattr(self.node, "healthy", None)
        if healthy is None:
            return None
        try:
            result = healthy()
        except Exception:
            log.exception("metrics: node.healthy() failed")
            return 0.0
        ok = result[0] if isinstance(result, tuple) else result
        return 1.0 if ok else 0.0

    @staticmethod
    def _queue_families(queues: list) -> list:
        labels = ["queue", "address"]
        specs = (
            (GaugeMetricFamily, "junction_queue_messages", "Messages on the queue (waiting, delivering and scheduled).", "message_count"),
            (GaugeMetricFamily, "junction_queue_consumers", "Consumers attached to the queue.", "consumer_count"),
            (GaugeMetricFamily, "junction_queue_delivering", "Messages delivered to consumers and not yet acknowledged.", "delivering_count"),
            (CounterMetricFamily, "junction_queue_messages_added", "Messages added to the queue since the node started.", "messages_added"),
            (CounterMetricFamily, "junction_queue_messages_acknowledged", "Messages acknowledged on the queue since the node started.", "messages_acknowledged"),
            (CounterMetricFamily, "junction_queue_messages_expired", "Messages expired on the queue since the node started.", "messages_expired"),
            (CounterMetricFamily, "junction_queue_messages_killed", "Messages dead-lettered from the queue since the node started.", "messages_killed"),
        )
        out = []
        for kind, name, help_text, key in specs:
            family = kind(name, help_text, labels=labels)
            for queue in queues:
                value = _number(queue.get(key))
                if value is not None:
                    family.add_metric([str(queue.get("name", "")), str(queue.get("address", ""))], value)
            out.append(family)
        return out

    @staticmethod
    def _address_families(addresses: list) -> list:
        labels = ["address"]
        specs = (
            (GaugeMetricFamily, "junction_address_size_bytes", "Bytes of unacknowledged messages routed to the address (what max-size-bytes limits).", "size_bytes"),
            (GaugeMetricFamily, "junction_address_messages", "Unacknowledged message references on the address's queues.", "message_count"),
            (GaugeMetricFamily, "junction_address_blocked_producers", "Sends waiting for space under the BLOCK address-full policy.", "blocked_producers"),
            (GaugeMetricFamily, "junction_address_paging", "1 while messages of the address wait in page files (address-full-policy PAGE).", "paging"),
            (GaugeMetricFamily, "junction_address_paged_messages", "Messages of the address waiting in page files.", "paged_messages"),
            (CounterMetricFamily, "junction_address_paged", "Messages written to the address's page files since the node started.", "paged_total"),
            (CounterMetricFamily, "junction_address_routed", "Message references routed to the address's queues since the node started.", "routed_total"),
        )
        out = []
        for kind, name, help_text, key in specs:
            family = kind(name, help_text, labels=labels)
            for address in addresses:
                value = _number(address.get(key))
                if value is not None:
                    family.add_metric([str(address.get("name", ""))], value)
            out.append(family)
        return out

    @staticmethod
    def _connection_families(status: dict) -> list:
        acceptors = status.get("acceptors") or []
        connections = status.get("connections") or []
        by_acceptor = GaugeMetricFamily(
            "junction_acceptor_connections", "Open connections on the acceptor, as the acceptor counts them.", labels=["acceptor"]
        )
        counts: dict[tuple[str, str], int] = {}
        for acceptor in acceptors:
            name = str(acceptor.get("name", ""))
            # Seed every protocol an acceptor serves with 0 so the series
            # exist (and graph as 0) before the first client connects.
            for protocol in acceptor.get("protocols") or []:
                counts.setdefault((name, str(protocol)), 0)
            value = _number(acceptor.get("connections"))
            if value is not None:
                by_acceptor.add_metric([name], value)
        for conn in connections:
            key = (str(conn.get("acceptor") or "unknown"), str(conn.get("protocol") or "unknown"))
            counts[key] = counts.get(key, 0) + 1
        by_protocol = GaugeMetricFamily(
            "junction_connections", "Open client connections by acceptor and protocol.", labels=["acceptor", "protocol"]
        )
        for (acceptor, protocol), count in sorted(counts.items()):
            by_protocol.add_metric([acceptor, protocol], count)
        return [by_protocol, by_acceptor]

    @staticmethod
    def _router_families(status: dict) -> list:
        """The gateway: each router's pool and targets, each routed acceptor's decisions."""
        routers = status.get("routers")
        routed = [a for a in status.get("acceptors") or [] if a.get("router")]
        if not isinstance(routers, dict) and not routed:
            return []
        ready = GaugeMetricFamily("junction_router_targets_ready", "Targets of the router's pool that are ready.", labels=["router"])
        known = GaugeMetricFamily("junction_router_targets", "Targets in the router's pool.", labels=["router"])
        quorum = GaugeMetricFamily("junction_router_quorum_size", "Ready targets the router needs before it routes.", labels=["router"])
        labels = ["router", "target", "node_id"]
        target_ready = GaugeMetricFamily("junction_router_target_ready", "1 when the target is reachable and active, else 0.", labels=labels)
        target_conns = GaugeMetricFamily("junction_router_target_connections", "Connections on the target as its last readiness check read them.", labels=labels)
        for name, router in (routers or {}).items():
            targets = router.get("targets") or []
            ready.add_metric([str(name)], _number(router.get("ready")) or 0)
            known.add_metric([str(name)], len(targets))
            if _number(router.get("quorum_size")) is not None:
                quorum.add_metric([str(name)], _number(router.get("quorum_size")))
            for target in targets:
                values = [str(name), str(target.get("name") or ""), str(target.get("node_id") or "")]
                target_ready.add_metric(values, 1 if target.get("ready") else 0)
                count = _number(target.get("connection_count"))
                if count is not None:
                    target_conns.add_metric(values, count)
        decisions = CounterMetricFamily(
            "junction_gateway_decisions",
            "Connections on a routed acceptor by outcome (forwarded, redirected, local, refused, ...) since start.",
            labels=["acceptor", "router", "outcome"],
        )
        forwarded = GaugeMetricFamily("junction_gateway_forwarded_connections", "Connections the acceptor is relaying to a target now.", labels=["acceptor", "router"])
        relayed = GaugeMetricFamily("junction_gateway_relayed_connections", "Forwarded connections the relay engine carries (plain TCP both ways), off the reactor.", labels=["acceptor", "router"])
        opening = GaugeMetricFamily("junction_gateway_opening_connections", "Connections on the acceptor still in their opening (before the routing decision).", labels=["acceptor", "router"])
        for acceptor in routed:
            names = [str(acceptor.get("name", "")), str(acceptor.get("router"))]
            for outcome, count in sorted((acceptor.get("decisions") or {}).items()):
                decisions.add_metric([*names, str(outcome)], count)
            forwarded.add_metric(names, _number(acceptor.get("forwarded")) or 0)
            relayed.add_metric(names, _number(acceptor.get("relayed")) or 0)
            opening.add_metric(names, _number(acceptor.get("opening")) or 0)
        return [ready, known, quorum, target_ready, target_conns, decisions, forwarded, relayed, opening]

    @staticmethod
    def _journal_families(status: dict) -> list:
        journal = status.get("journal")
        if not isinstance(journal, dict):
            return []
        # Names this collector already uses; a journal key must not shadow them.
        seen = {"junction_journal_failed"}
        out = []
        for key in sorted(journal, key=str):
            value = _number(journal[key])
            suffix = _metric_suffix(key)
            if value is None or not suffix:
                continue
            counter = suffix.endswith("_total") or suffix in JOURNAL_COUNTERS
            family_name = f"junction_journal_{suffix.removesuffix('_total')}" if counter else f"junction_journal_{suffix}"
            if family_name in seen:
                continue
            seen.add(family_name)
            help_text = f"Journal statistic {key!s} (from status()['journal'])."
            if counter:
                out.append(CounterMetricFamily(family_name, help_text, value=value))
            else:
                out.append(GaugeMetricFamily(family_name, help_text, value=value))
        return out
