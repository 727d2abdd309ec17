"""One Junction node: the parent of its services (:mod:`twisted.application.service`).

:class:`Node` turns a validated :class:`junction.config.model.BrokerConfig`
into running services, each a child in its own module: the data directory
(locked, the node's id), the event log, the broker core (journal, security,
server), the cluster (groups, manager), the connection routers, the listeners
(every acceptor, the gateway's among them), the cluster's links, the
management API and the reload check.  ``junction run`` is a thin shell around
it; tests build one on any reactor.

The order is a table, because it matters.  :data:`START_ORDER`: the data
directory is locked and the broker core made in the privileged phase, so the
event log can attach to the core before it recovers; the routers and the
cluster manager exist before any acceptor listens; the cluster's links start
once the acceptors listen; the management API opens once there is something
to report.  :data:`STOP_ORDER` is not the reverse: the reload check, then the
listeners (no new connection, the gateway's openings closed, the relay
stopped), the management API, the routers, the cluster (scale-down while its
links still run), the broker core with its journal's last sync, the event log
flushed, and the data directory unlocked last.  Each service is stopped once
the one before it has finished.
"""

from __future__ import annotations

import os

from twisted.application.service import MultiService, Service
from twisted.internet import defer

from junction.node import admin_queues, status
from junction.node.broker import BrokerService
from junction.node.cluster import ClusterLinksService, ClusterService
from junction.node.datadir import DataDirectoryService
from junction.node.events import EventsService
from junction.node.listeners import ListenersService
from junction.node.management import ManagementService
from junction.node.reload import ReloadService
from junction.node.routers import RoutersService
from junction.node.service import log

__all__ = ["ROUTERS_DIRECTORY", "START_ORDER", "STOP_ORDER", "Node"]

#: Where persisted connection-router caches live: ``<router>.cache`` files in
#: this folder beside the journal directory (``data/routers`` by default).
ROUTERS_DIRECTORY = "routers"

#: The node's services in the order they start (privileged phase first, for all, then the rest).
START_ORDER = (
    DataDirectoryService,  # privileged: lock, node id
    EventsService,  # the event log, attached to the broker core before it recovers
    BrokerService,  # privileged: journal, security, server; then recovery and the start-up warnings
    ClusterService,  # groups, cluster manager
    RoutersService,  # connection routers and their pools' probes
    ListenersService,  # every acceptor
    ClusterLinksService,  # the cluster's bridges, once the acceptors listen
    ManagementService,  # the HTTP API
    ReloadService,  # configuration-file-refresh-period
)
#: The order they stop in, each once the one before has finished (see the module docstring).
STOP_ORDER = ("reload", "listeners", "management", "routers", "links", "cluster", "broker", "events", "data")


class Node(MultiService):
    """A node: the parent :class:`MultiService` of the services of :data:`START_ORDER`.

    What the services share lives here, where the management API and the
    tests read it: ``server``, ``journal``, ``node_id``, ``routers``,
    ``listeners``, ``factories``, ``cluster``, ``event_log`` ...
    """

    def __init__(self, config, *, reactor=None, user_store=None, certificate_users=None):
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.user_store = user_store
        #: certificate login (``cert-users-file``); read from the config at start when not given
        self.certificate_users = certificate_users
        self.server = None
        self.listeners: dict = {}
        self.factories: dict = {}
        #: the TLS wrapper of each TLS acceptor (handshake counters, certificate reload)
        self.tls_factories: dict = {}
        #: the per-source limits of each acceptor that sets them (connectionsAllowedPerAddress ...)
        self.admission_factories: dict = {}
        self.management_port = None
        self.journal = None
        #: why :meth:`stop` was not clean (the journal failed, its last sync included), or None
        self.stop_failure: str | None = None
        self.node_id = None
        #: connection routers by name (:class:`junction.gateway.build.RouterService`)
        self.routers: dict = {}
        #: carries forwarded connections off the reactor (junction.gateway.relay)
        self.relay = None
        #: cluster connections, remote bindings (:class:`junction.brokercore.cluster.manager.ClusterManager`)
        self.cluster = None
        #: broadcast and discovery groups by name
        self.broadcast_groups: dict = {}
        self.discovery_groups: dict = {}
        #: ``<junction><events>``: the writer (:class:`junction.events.writer.EventLog`)
        #: and the parts' view of it (:class:`junction.events.node.NodeEvents`); None when off
        self.event_log = None
        self.events = None
        #: ``configuration-file-refresh-period``: broker.xml and the users files checked for changes
        self.reloader = None
        for service_class in START_ORDER:
            service_class().setServiceParent(self)

    @property
    def name(self) -> str:
        return self.config.name

    # -- paths ------------------------------------------------------------------------
    def _path(self, directory: str) -> str:
        if os.path.isabs(directory):
            return directory
        return os.path.normpath(os.path.join(self.config.base_dir or ".", directory))

    @property
    def data_dirs(self) -> dict:
        c = self.config
        return {
            "journal": self._path(c.journal_directory),
            "bindings": self._path(c.bindings_directory),
            "paging": self._path(c.paging_directory),
            "large_messages": self._path(c.large_messages_directory),
        }

    @property
    def routers_dir(self) -> str:
        """Persisted router caches: ``<journal-directory>/../routers``.

        Beside the journal, bindings and paging folders (``data/routers`` with
        the default layout); a journal directory at a file-system root keeps
        them inside it instead, so two nodes never share one.
        """
        journal = self.data_dirs["journal"]
        parent = os.path.dirname(os.path.normpath(journal))
        if not parent or parent == os.path.dirname(parent):
            return os.path.join(journal, ROUTERS_DIRECTORY)
        return os.path.join(parent, ROUTERS_DIRECTORY)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Start everything; raises (with a clear message) if anything cannot start.

        A service that fails leaves those before it running, as they are (the
        caller exits, or stops what there is).
        """
        self.privilegedStartService()
        self.startService()

    def startService(self):
        config = self.config
        journal_dir = self.data_dirs["journal"]
        super().startService()
        log.info(
            "node %s (%s) started: config %s, journal %s, persistence %s",
            config.name,
            self.node_id,
            config.config_path,
            journal_dir,
            "on" if config.persistence_enabled else "off",
        )

    def stop(self):
        """Stop listening, close connections, flush the journal (syncs finish); a Deferred."""
        return self.stopService()

    @defer.inlineCallbacks
    def stopService(self):
        log.info("node %s stopping", self.config.name)
        Service.stopService(self)
        for name in STOP_ORDER:
            yield defer.maybeDeferred(self.getServiceNamed(name).stopService)
        if self.stop_failure is not None:
            log.error("node %s stopped, not cleanly: %s", self.config.name, self.stop_failure)
        else:
            log.info("node %s stopped", self.config.name)

    def _unlock(self) -> None:
        """Release the data directory's lock (what a failed start leaves to its caller)."""
        self.getServiceNamed("data").unlock()

    # -- an administrator's queues (POST/DELETE /api/queues) ---------------------------------
    def create_admin_queue(self, name: str, *, address: str, routing_type: str, filter=None, durable=True) -> dict:
        """Artemis's createQueue (:func:`junction.node.admin_queues.create_admin_queue`)."""
        return admin_queues.create_admin_queue(
            self, name, address=address, routing_type=routing_type, filter=filter, durable=durable
        )

    def delete_admin_queue(self, name: str) -> None:
        """Artemis's destroyQueue (:func:`junction.node.admin_queues.delete_admin_queue`)."""
        admin_queues.delete_admin_queue(self, name)

    # -- management --------------------------------------------------------------------------
    def healthy(self):
        return status.healthy(self)

    def reload_tls(self) -> dict:
        """Read every TLS store again (:func:`junction.node.status.reload_tls`)."""
        return status.reload_tls(self)

    def status(self) -> dict:
        return status.status(self)
