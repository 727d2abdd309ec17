"""What every part of a node is: a Twisted service whose parent is the :class:`~junction.node.parent.Node`.

The parent holds what the parts share (the config, the reactor, the broker
core, the node id ...) as attributes, as the management API and the tests read
them (``node.server``, ``node.routers``, ``node.listeners`` ...); a part sets
the ones it makes and reads the ones the parts started before it made.
"""

from __future__ import annotations

import logging

from twisted.application.service import Service

__all__ = ["NodeService", "log"]

#: every part logs as the node did before it had parts, so log lines keep their logger name
log = logging.getLogger("junction.node")


class NodeService(Service):
    """A part of a node; ``name`` is its name among the node's services."""

    @property
    def node(self):
        """The :class:`~junction.node.parent.Node` this part belongs to."""
        return self.parent
