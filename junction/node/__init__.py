"""One Junction node as Twisted services under one parent (:class:`~junction.node.parent.Node`).

Each service is a module of this package: ``datadir`` (the lock and the node's
id), ``events`` (the event log), ``broker`` (journal, security, broker core),
``cluster`` (groups, cluster manager, its links), ``routers`` (connection
routers), ``listeners`` (every acceptor, the gateway's included),
``management`` (the HTTP API) and ``reload`` (configuration-file-refresh-period);
``parent`` puts them together in their start and stop order.  ``status``,
``admin_queues`` and ``start_warnings`` are what the node says and does for the
management API and at start.
"""

from junction.node.datadir import LOCK_FILE, NODE_ID_FILE, DataDirectoryLocked
from junction.node.listeners import SERVED_PROTOCOLS
from junction.node.parent import ROUTERS_DIRECTORY, Node
from junction.node.start_warnings import unimplemented_settings

__all__ = [
    "LOCK_FILE",
    "NODE_ID_FILE",
    "ROUTERS_DIRECTORY",
    "SERVED_PROTOCOLS",
    "DataDirectoryLocked",
    "Node",
    "unimplemented_settings",
]
