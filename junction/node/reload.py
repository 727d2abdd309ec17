"""``configuration-file-refresh-period``: broker.xml and the users files checked for changes on the clock.

Started last, once the node runs what the file says; stopped first, so no
reload is applied to a node that is stopping.
"""

from __future__ import annotations

from junction.brokercore.config_reload import ConfigReloader
from junction.node.service import NodeService
from junction.node.start_warnings import unimplemented_settings

__all__ = ["ReloadService"]


class ReloadService(NodeService):
    """``node.reloader`` (:class:`ConfigReloader`); an applied reload becomes ``node.config``."""

    name = "reload"

    def startService(self):
        super().startService()
        node = self.node
        node.reloader = ConfigReloader(
            node.config, node.server, reactor=node.reactor, on_applied=self._reloaded, warnings=unimplemented_settings
        )
        node.reloader.start()

    def _reloaded(self, config) -> None:
        """A configuration reload applied: the node and its broker core run ``config`` now."""
        node = self.node
        node.config = config
        node.server.config = config

    def stopService(self):
        super().stopService()
        if self.node.reloader is not None:
            self.node.reloader.stop()
