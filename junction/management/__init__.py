"""The node's management surface: HTTP API and Prometheus metrics.

:func:`build_site` serves a node's health, status and metrics over HTTP
(``/api/health``, ``/api/status``, ``/metrics``), its routers (``/api/routers``,
Jolokia), TLS (``/api/tls``) and an administrator's queues (``/api/queues``).
``junction status`` fetches ``/api/status`` and renders it as tables
(:mod:`junction.cli.status_table`).  Endpoints and metrics are documented in
``docs/management.md``.
"""

from junction.management.api import build_registry, build_site

__all__ = ["build_site", "build_registry"]
