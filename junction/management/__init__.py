"""The node's management surface: HTTP API, Prometheus metrics and ``junction status``.

:func:`build_site` serves a node's health, status and metrics over HTTP
(``/api/health``, ``/api/status``, ``/metrics``); :mod:`.status_table` fetches
``/api/status`` from a running node and renders it as a plain-text table for
the ``junction status`` command.  Endpoints and metrics are documented in
``docs/management.md``.
"""

from junction.management.api import build_registry, build_site
from junction.management.status_table import StatusFetchError, fetch_status, format_status

__all__ = ["build_site", "build_registry", "fetch_status", "format_status", "StatusFetchError"]
