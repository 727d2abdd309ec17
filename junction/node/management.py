"""The node's management HTTP API (``<junction><management>``): health, status, metrics, changes.

Started once everything it reports on runs (after the listeners and the
cluster's links); stopped right after the listeners, before the routers, so a
health check during shutdown finds it closed rather than half the node gone.
"""

from __future__ import annotations

from twisted.internet import defer

from junction.node.service import NodeService, log

__all__ = ["ManagementService"]


class ManagementService(NodeService):
    """``node.management_port``: the listening port of the API, None when off (port < 0)."""

    name = "management"

    def startService(self):
        super().startService()
        node = self.node
        if node.config.management_port is None or node.config.management_port < 0:
            return
        from junction.management.api import build_site

        site = build_site(node, reactor=node.reactor)
        node.management_port = node.reactor.listenTCP(
            node.config.management_port, site, interface=node.config.management_host
        )
        log.info(
            "management API on http://%s:%d/api/status",
            node.config.management_host,
            node.management_port.getHost().port,
        )

    @defer.inlineCallbacks
    def stopService(self):
        super().stopService()
        node = self.node
        if node.management_port is not None:
            yield defer.maybeDeferred(node.management_port.stopListening)
            node.management_port = None
