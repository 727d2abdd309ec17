"""One Junction node: the broker core, its acceptors and its management API.

:class:`Node` turns a validated :class:`junction.config.model.BrokerConfig`
into running services: it locks and identifies the data directory, opens the
journal, recovers the broker core, listens on every acceptor the node serves
itself, and starts the management HTTP API.  ``junction run`` is a thin shell
around it; tests build one on any reactor.
"""

from __future__ import annotations

import fcntl
import logging
import os
import uuid

from twisted.internet import defer

from junction import collector
from junction.brokercore.acceptor import (
    MultiProtocolFactory,
    wrap_proxy_protocol,
)
from junction.brokercore.admission import wrap_admission
from junction.brokercore.amqp_server import AMQP_ACCEPTOR_PARAMS, AmqpFactory
from junction.brokercore.config_reload import ConfigReloader
from junction.brokercore.events import MessageEvents
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.stomp_server import STOMP_ACCEPTOR_PARAMS, StompFactory
from junction.brokercore.wildcard import WildcardSyntax
from junction.config.loader import load_certificate_users
from junction.config.params import acceptor_params_with_effect, param
from junction.config.reloading import watch_certificate_users, watch_user_store
from junction.config.unimplemented import warnings as config_warnings
from junction.events.node import NodeEvents
from junction.events.writer import EventLog
from junction.gateway.build import build_router
from junction.gateway.listener import ROUTED_PROTOCOLS, GatewayFactory
from junction.gateway.probe import ProbeResult
from junction.gateway.targets import Target
from junction.tls.client import reload_client_context
from junction.tls.listener import wrap_tls

log = logging.getLogger("junction.node")

#: Protocols the broker core serves today; the rest arrive with their issues.
SERVED_PROTOCOLS = frozenset({"STOMP", "AMQP"})
#: each served protocol's factory and the acceptor parameters it acts on
PROTOCOL_FACTORIES = {"STOMP": (StompFactory, STOMP_ACCEPTOR_PARAMS), "AMQP": (AmqpFactory, AMQP_ACCEPTOR_PARAMS)}
NODE_ID_FILE = "node.id"
LOCK_FILE = "junction.lock"
#: Where persisted connection-router caches live: ``<router>.cache`` files in
#: this folder beside the journal directory (``data/routers`` by default).
ROUTERS_DIRECTORY = "routers"


#: connections the kernel completes for an acceptor before Junction accepts them (Artemis's
#: ``backlog`` parameter; Netty's default is the system's somaxconn).  Twisted's own default,
#: 50, overflows when clients connect in bursts while the node is busy: the kernel then drops
#: the client's SYN and the client waits a second to retry.
DEFAULT_BACKLOG = 1024


def listen_backlog(acceptor) -> int:
    """The listen backlog of *acceptor*: its ``backlog`` parameter, else :data:`DEFAULT_BACKLOG`."""
    value = param(acceptor.params, "backlog")
    return value if value > 0 else DEFAULT_BACKLOG


class DataDirectoryLocked(RuntimeError):
    """Another process already uses this node's journal directory."""


class Node:
    def __init__(self, config, *, reactor=None, user_store=None, certificate_users=None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.user_store = user_store
        #: certificate login (``cert-users-file``); read from the config at start when not given
        self.certificate_users = certificate_users
        self.server: BrokerServer | None = None
        self.listeners: dict = {}
        self.factories: dict = {}
        #: the TLS wrapper of each TLS acceptor (handshake counters, certificate reload)
        self.tls_factories: dict = {}
        #: the per-source limits of each acceptor that sets them (connectionsAllowedPerAddress ...)
        self.admission_factories: dict = {}
        self.management_port = None
        self._lock_fd = None
        self.journal = None
        #: why :meth:`stop` was not clean (the journal failed, its last sync included), or None
        self.stop_failure: str | None = None
        self.node_id = None
        #: connection routers by name (:class:`junction.gateway.build.RouterService`)
        self.routers: dict = {}
        self._probes: list = []
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
        self.reloader: ConfigReloader | None = None

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
        """Start everything; raises (with a clear message) if anything cannot start."""
        config = self.config
        journal_dir = self.data_dirs["journal"]
        os.makedirs(journal_dir, exist_ok=True)
        self._lock(journal_dir)
        self.node_id = self._node_id(journal_dir)
        if config.persistence_enabled:
            from junction.brokercore.journal import Journal

            self.journal = Journal(
                journal_dir,
                file_size=config.journal_file_size,
                buffer_timeout_ns=config.journal_buffer_timeout,
                sync=config.journal_sync_non_transactional or config.journal_sync_transactional,
                reactor=self.reactor,
            )
        syntax = WildcardSyntax(
            delimiter=config.wildcard_addresses.delimiter,
            any_words=config.wildcard_addresses.any_words,
            single_word=config.wildcard_addresses.single_word,
        )
        # the users, roles and certificate-user files are read again when they change
        if self.user_store is not None and config.security_enabled:
            self.user_store = watch_user_store(config, self.user_store)
        certificate_users = self.certificate_users
        if certificate_users is None:
            certificate_users = load_certificate_users(config)
        if certificate_users is not None and config.security_enabled:
            certificate_users = watch_certificate_users(config, certificate_users)
        security = SecurityManager(
            self.user_store,
            config.security_settings,
            syntax,
            enabled=config.security_enabled,
            anonymous_user=config.anonymous_user,
            cache_size=config.authorization_cache_size,
            authentication_cache_size=config.authentication_cache_size,
            invalidation_interval=config.security_invalidation_interval / 1000,
            clock=self.reactor,
            certificate_users=certificate_users,
        )
        self.server = BrokerServer(
            config, reactor=self.reactor, security=security, journal=self.journal, node_id=self.node_id
        )
        self._start_events()
        self.server.start()
        for _name, line, what in config.ignored:
            log.info("%s:%d: ignored: %s", config.config_path, line, what)
        for problem in unimplemented_settings(config):
            log.warning("%s", problem)
        for connector in config.connectors:
            if connector.tls is not None and connector.tls.trust_all:
                log.warning(
                    "%s:%d: connector %s: trustAll=true accepts any certificate from %s:%s; for testing only",
                    connector.source[0], connector.source[1], connector.name, connector.host, connector.port,
                )
        self._start_cluster()
        self._start_routers()
        for acceptor in config.acceptors:
            self._listen(acceptor)
        if self.cluster is not None:
            self.cluster.start()
        self._start_management()
        self.reloader = ConfigReloader(
            config, self.server, reactor=self.reactor, on_applied=self._reloaded, warnings=unimplemented_settings
        )
        self.reloader.start()
        log.info(
            "node %s (%s) started: config %s, journal %s, persistence %s",
            config.name,
            self.node_id,
            config.config_path,
            journal_dir,
            "on" if config.persistence_enabled else "off",
        )

    # -- events -----------------------------------------------------------------------------
    def _start_events(self) -> None:
        """The event log of ``<junction><events>``, shared by the gateway and the broker core."""
        cfg = self.config.events
        if cfg is None:
            return
        self.event_log = EventLog(
            self._path(cfg.directory),
            self.name,
            self.node_id,
            categories=cfg.categories,
            sample_rate=cfg.message_sample_rate,
            max_file_bytes=cfg.max_file_size,
            max_file_age_s=cfg.max_file_age / 1000.0,
            max_files=cfg.max_files,
            max_spool_bytes=cfg.max_spool_size,
        )
        self.event_log.start()
        self.events = NodeEvents(self.event_log, self.node_id)
        self.server.events = self.events
        if self.event_log.enabled("message.sent"):
            self.server.message_events = MessageEvents(self.event_log, self.node_id, self.server.storage)
        log.info(
            "event log: %s (%s; message sample rate %g)",
            self.event_log.directory, ", ".join(cfg.categories) or "no categories", cfg.message_sample_rate,
        )

    # -- cluster --------------------------------------------------------------------------
    def _start_cluster(self) -> None:
        """Discovery groups, broadcast groups and the cluster manager (its bridges start once acceptors listen)."""
        config = self.config
        connectors = {c.name: c for c in config.connectors}
        if config.discovery_groups or config.broadcast_groups:
            from junction.brokercore.cluster.discovery import BroadcastGroup, DiscoveryGroup

            announced = []
            for group_config in config.broadcast_groups:
                group = BroadcastGroup(
                    group_config,
                    [connectors[name] for name in group_config.connector_refs if name in connectors],
                    self.node_id,
                    config.name,
                    reactor=self.reactor,
                )
                announced.extend(group.connectors)
                self.broadcast_groups[group_config.name] = group
            for group_config in config.discovery_groups:
                group = DiscoveryGroup(group_config, self.node_id, reactor=self.reactor, local_connectors=announced)
                group.add_duplicate_node_listener(self._duplicate_node)
                self.discovery_groups[group_config.name] = group
            for group in [*self.discovery_groups.values(), *self.broadcast_groups.values()]:
                # a group that cannot open its socket has logged why and stopped
                group.start().addErrback(lambda _failure: None)
        if config.cluster_connections or config.cluster_credentials_source is not None:
            # A node with cluster credentials but no cluster connection of its own still takes
            # links (the far end of a chain), as an Artemis node does.
            from junction.brokercore.cluster.manager import ClusterManager

            self.cluster = ClusterManager(
                self.server,
                config,
                node_id=self.node_id,
                reactor=self.reactor,
                connectors=connectors,
                discovery_groups=self.discovery_groups,
                data_directory=self.data_dirs["journal"],
            )
            self.server.cluster = self.cluster

    def _duplicate_node(self, announcement, source) -> None:
        """Another node broadcasts this node's id: a copied data directory (said once a minute)."""
        now = self.reactor.seconds()
        if now - getattr(self, "_duplicate_logged", -1e9) < 60.0:
            return
        self._duplicate_logged = now
        log.error(
            "node %s at %s:%s announces this node's own id %s: one of the two data directories is a copy; "
            "this node will not link to it -- give each node its own journal directory",
            announcement.name, source[0], source[1], self.node_id,
        )

    def _stop_cluster(self):
        if self.cluster is not None:
            self.cluster.stop()
        stops = []
        for group in list(self.broadcast_groups.values()) + list(self.discovery_groups.values()):
            try:
                d = group.stop()
            except Exception:
                log.exception("stopping %s failed", group)
                continue
            if d is not None:
                stops.append(d)
        self.broadcast_groups.clear()
        self.discovery_groups.clear()
        return defer.DeferredList(stops, consumeErrors=True) if stops else None

    # -- connection routers --------------------------------------------------------------
    def _start_routers(self) -> None:
        """Build and start every ``<connection-router>`` (once, before the acceptors listen)."""
        config = self.config
        if not config.connection_routers:
            return
        connectors = {c.name: c for c in config.connectors}
        for router_config in config.connection_routers:
            probe = None
            if router_config.pool is not None:
                probe = self._router_probe(router_config)
                self._probes.append(probe)
            service = build_router(
                router_config,
                connectors=connectors,
                probe=probe,
                clock=self.reactor,
                # one local target per router: a pool owns its targets' readiness
                local_target=Target(local=True, ready=True, node_id=self.node_id),
                cache_directory=self.routers_dir,
            )
            service.start()
            self._feed_pool(router_config, service.pool)
            self.routers[router_config.name] = service
            log.info(
                "connection router %s: key %s, policy %s, %s",
                router_config.name,
                router_config.key_type,
                router_config.policy.name if router_config.policy else "none",
                _pool_description(router_config.pool),
            )

    def _feed_pool(self, router_config, pool) -> None:
        """Keep a discovery or cluster pool's targets equal to what its source knows."""
        pool_config = router_config.pool
        if pool is None or pool_config is None:
            return
        if pool_config.discovery_group is not None:
            group = self.discovery_groups.get(pool_config.discovery_group)
            if group is None:
                log.error("connection router %s: discovery group %s is not running", router_config.name, pool_config.discovery_group)
                return

            def sync(*_args):
                pool.sync_entries(
                    {
                        node_id: _announced_connector(entry.connectors[0])
                        for node_id, entry in group.entries.items()
                        if entry.connectors
                    }
                )

            group.add_listener(sync)
            sync()
        elif pool_config.cluster_connection is not None:
            connection = self.cluster.connection_named(pool_config.cluster_connection) if self.cluster else None
            if connection is None:
                log.error(
                    "connection router %s: cluster connection %s is not running",
                    router_config.name, pool_config.cluster_connection,
                )
                return
            connection.add_member_listener(pool.sync_entries)

    def _router_probe(self, router_config):
        """The readiness probe of a router's pool: AMQP or STOMP to each target, as the
        target serves (``probeProtocols=`` on its connector), in-process for the local one."""
        try:
            from junction.gateway.multi_probe import build_readiness_probe
        except ImportError as exc:
            raise RuntimeError(
                f"connection router {router_config.name!r}: its pool needs the readiness "
                f"probes (junction.gateway.multi_probe), which cannot be imported: {exc}"
            ) from exc
        pool = router_config.pool
        return build_readiness_probe(
            username=pool.username,
            password=pool.password,
            reactor=self.reactor,
            local_status=self._local_status,
        )

    def _local_status(self, *_target) -> ProbeResult:
        """What a probe of this node's own broker core (the local target) answers."""
        server = self.server
        active = server is not None and server.started
        return ProbeResult(active=active, node_id=self.node_id, connection_count=self._connection_count())

    def _connection_count(self) -> int:
        """Client connections served by this node's broker core (not the forwarded ones)."""
        if self.server is None:
            return 0
        return len({s.connection.id for s in self.server.sessions})

    def _stop_routers(self) -> None:
        for name, service in self.routers.items():
            try:
                service.stop()
            except Exception:
                log.exception("connection router %s: stopping failed", name)
        for probe in self._probes:
            close = getattr(probe, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("closing probe %r failed", probe)
        self._probes.clear()
        self.routers.clear()

    # -- acceptors ------------------------------------------------------------------------
    def _listen(self, acceptor) -> None:
        protocols = acceptor.protocols or SERVED_PROTOCOLS
        served = protocols & SERVED_PROTOCOLS
        unserved = protocols - SERVED_PROTOCOLS - {"CLUSTER"}
        if unserved:
            log.warning(
                "acceptor %s: protocols %s are not served by this build yet", acceptor.name, ",".join(sorted(unserved))
            )
        # Cluster links arrive on every broker acceptor of a clustered node, told apart by their
        # preamble; protocols=CLUSTER makes an acceptor for links only.
        links = self.cluster is not None and not acceptor.router
        if "CLUSTER" in protocols and not links:
            log.warning(
                "acceptor %s: protocols=CLUSTER, but this node %s", acceptor.name,
                "routes connections on it (router=)" if acceptor.router else "has no cluster connection or cluster credentials",
            )
        if not served and not (links and "CLUSTER" in protocols):
            return
        parts = {"LISTENER", "PROXY", "ADMISSION", *served}
        if acceptor.router:
            parts.add("GATEWAY")
        if acceptor.tls is not None:
            parts.add("TLS")
        known = acceptor_params_with_effect(parts)
        for key in sorted(set(acceptor.params) - known):
            log.warning(
                "%s:%d: acceptor %s: parameter %s has no effect in Junction yet",
                acceptor.source[0],
                acceptor.source[1],
                acceptor.name,
                key,
            )
        factories = {
            name: PROTOCOL_FACTORIES[name][0](self.server, acceptor=acceptor, limits=self.config.limits, reactor=self.reactor)
            for name in sorted(served)
        }
        if links:
            # Cluster links arrive on the broker's own acceptors, told apart by their preamble
            # (Artemis's cluster connections use its CORE protocol on them the same way).
            from junction.brokercore.cluster.link_server import LinkServerFactory

            factories["CLUSTER"] = LinkServerFactory(self.cluster, acceptor=acceptor, reactor=self.reactor)
        if len(factories) == 1:
            factory = next(iter(factories.values()))
        else:
            factory = MultiProtocolFactory(
                factories,
                reactor=self.reactor,
                acceptor_name=acceptor.name,
                sniff_timeout=self.config.limits.connect_timeout / 1000.0,
            )
        what = ",".join(sorted(served | ({"cluster links"} if links else set())))
        if acceptor.router:
            factory, what = self._gateway_factory(acceptor, served, factory)
        # sslEnabled: TLS in front of the protocols; proxyProtocolEnabled: a PROXY
        # header before that, read within the connect timeout.  self.factories keeps
        # the acceptor's own factory (status, stop).
        listening = factory
        if acceptor.tls is not None:
            listening = wrap_tls(
                factory,
                acceptor.tls.build(),
                reactor=self.reactor,
                acceptor_name=acceptor.name,
                handshakes_allowed=param(acceptor.params, "handshakesAllowed"),
            )
            self.tls_factories[acceptor.name] = listening
            what += " over TLS"
        proxied = wrap_proxy_protocol(
            listening, acceptor, reactor=self.reactor, timeout=self.config.limits.connect_timeout / 1000.0
        )
        if proxied is not listening:
            what += " behind the PROXY protocol"
        # per-source limits see the socket's own peer, so they go outermost
        listening = wrap_admission(proxied, acceptor, reactor=self.reactor)
        if listening is not proxied:
            self.admission_factories[acceptor.name] = listening
        port = self.reactor.listenTCP(
            acceptor.port, listening, interface=acceptor.host or "0.0.0.0", backlog=listen_backlog(acceptor)
        )
        self.listeners[acceptor.name] = port
        self.factories[acceptor.name] = factory
        actual = port.getHost().port
        log.info("acceptor %s listening on %s:%d for %s", acceptor.name, acceptor.host, actual, what)

    def _gateway_factory(self, acceptor, served, local_factory):
        """The gateway listener of an acceptor with ``router=``, and what it does, for the log.

        Connections the router keeps local are handed to ``local_factory``
        (the factory the acceptor would have had without ``router=``).
        """
        routed = served & ROUTED_PROTOCOLS
        not_routed = served - ROUTED_PROTOCOLS
        if not_routed:
            log.warning(
                "acceptor %s: router=%s routes %s; %s connections on it are closed: not routed by "
                "this build yet",
                acceptor.name,
                acceptor.router,
                ",".join(sorted(routed)) or "nothing",
                ",".join(sorted(not_routed)),
            )
        factory = GatewayFactory(
            self.routers[acceptor.router],
            security=self.server.security,
            acceptor=acceptor,
            limits=self.config.limits,
            reactor=self.reactor,
            local_factory=local_factory,
            container_id=self.config.name,
            relay=self._relay_engine(),
        )
        factory.events = self.events
        return factory, f"{','.join(sorted(routed)) or 'nothing'} routed by router {acceptor.router}"

    def _start_management(self) -> None:
        if self.config.management_port is None or self.config.management_port < 0:
            return
        from junction.management.api import build_site

        site = build_site(self, reactor=self.reactor)
        self.management_port = self.reactor.listenTCP(
            self.config.management_port, site, interface=self.config.management_host
        )
        log.info(
            "management API on http://%s:%d/api/status",
            self.config.management_host,
            self.management_port.getHost().port,
        )

    def _relay_engine(self):
        """The node's relay engine for forwarded connections (one per node, made on first use)."""
        if self.relay is None:
            from junction.gateway.relay import RelayEngine

            self.relay = RelayEngine(self.reactor)
        return self.relay

    def _reloaded(self, config) -> None:
        """A configuration reload applied: the node and its broker core run ``config`` now."""
        self.config = config
        self.server.config = config

    @defer.inlineCallbacks
    def stop(self):
        """Stop listening, close connections, flush the journal (syncs finish)."""
        log.info("node %s stopping", self.config.name)
        if self.reloader is not None:
            self.reloader.stop()
        for port in list(self.listeners.values()):
            yield defer.maybeDeferred(port.stopListening)
        self.listeners.clear()
        for factory in self.factories.values():
            if isinstance(factory, GatewayFactory):
                factory.close_all()
        if self.relay is not None:
            self.relay.stop()  # after close_all: their clean closes are done first
            self.relay = None
        if self.management_port is not None:
            yield defer.maybeDeferred(self.management_port.stopListening)
            self.management_port = None
        self._stop_routers()
        scale_down = self.config.scale_down
        if self.cluster is not None and scale_down is not None and scale_down.enabled:
            try:
                yield self.cluster.scale_down(scale_down)
            except Exception:
                log.exception("scale-down failed; stopping without it")
        stopping = self._stop_cluster()
        if stopping is not None:
            yield stopping
        if self.server is not None:
            try:
                yield self.server.stop()
            except Exception as exc:  # the journal failed: records may not be on disk
                self.stop_failure = str(exc)
        if self.event_log is not None:
            # the writer thread writes what is queued and closes the file (a blocking join,
            # bounded by one batch's write, once everything else has stopped)
            self.event_log.stop()
            self.event_log = None
        self._unlock()
        if self.stop_failure is not None:
            log.error("node %s stopped, not cleanly: %s", self.config.name, self.stop_failure)
        else:
            log.info("node %s stopped", self.config.name)

    # -- identity and locking -------------------------------------------------------------
    def _lock(self, directory: str) -> None:
        path = os.path.join(directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirectoryLocked(
                f"the journal directory {directory} is in use by another Junction process"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    @staticmethod
    def _node_id(directory: str) -> str:
        path = os.path.join(directory, NODE_ID_FILE)
        try:
            with open(path) as fh:
                value = fh.read().strip()
            if value:
                return value
        except FileNotFoundError:
            pass
        value = str(uuid.uuid4())
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(value + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return value

    # -- an administrator's queues (POST/DELETE /api/queues) ---------------------------------
    def create_admin_queue(self, name: str, *, address: str, routing_type: str, filter=None, durable=True) -> dict:
        """Artemis's createQueue: an administrator's queue (in a cluster: on every node, recorded by the master)."""
        from junction.brokercore import errors
        from junction.brokercore.message import RoutingType
        from junction.brokercore.queue import QueueDefinition

        server = self.server
        if name in server.queues:
            raise errors.QueueExistsError(f"queue {name} already exists")
        server.guard_cluster_change(f"create queue {name}")
        queue = server.create_queue(
            QueueDefinition(
                name=name, address=address, routing_type=RoutingType[routing_type], filter=filter or None, durable=durable
            )
        )
        server.cluster_changed("create", queue, "admin")
        log.info("queue %s created on %s (%s) by the management API", name, address, routing_type)
        return {"name": name, "address": address, "routing_type": routing_type, "filter": filter, "durable": durable}

    def delete_admin_queue(self, name: str) -> None:
        """Artemis's destroyQueue (in a cluster: everywhere, recorded by the master)."""
        from junction.brokercore import errors
        from junction.brokercore.cluster.link_server import queue_kind

        server = self.server
        queue = server.queues.get(name)
        if queue is None or name.startswith("$.junction."):
            raise errors.NonExistentQueueError(f"queue {name} does not exist")
        kind = queue_kind(queue)
        if kind in ("admin", "subscription"):
            server.guard_cluster_change(f"destroy queue {name}")
        server.destroy_queue(name)
        if kind in ("admin", "subscription"):
            server.cluster_changed("delete", queue, kind)
        log.info("queue %s destroyed by the management API", name)

    # -- management --------------------------------------------------------------------------
    def healthy(self):
        problems = []
        if self.server is None or not self.server.started:
            problems.append("broker core not started")
        elif self.server.storage.failed:
            problems.append(f"journal failed: {self.server.storage.failed}")
        for acceptor in self.config.acceptors:
            if (acceptor.protocols or SERVED_PROTOCOLS) & SERVED_PROTOCOLS and acceptor.name not in self.listeners:
                problems.append(f"acceptor {acceptor.name} is not listening")
        return (not problems, problems)

    def reload_tls(self) -> dict:
        """Read every TLS acceptor's and connector's stores again (SIGHUP, ``POST /api/tls/reload``).

        New connections get the new certificates; connections already open keep
        theirs.  An acceptor whose stores cannot be read keeps serving the ones it
        had, and the problem is returned and logged.  Returns ``{"reloaded": [...],
        "failed": {name: problem}}``.
        """
        reloaded, failed = [], {}
        for acceptor in self.config.acceptors:
            factory = self.tls_factories.get(acceptor.name)
            if factory is None:
                continue
            problem = factory.reload(acceptor.tls)
            if problem is None:
                reloaded.append(acceptor.name)
            else:
                failed[acceptor.name] = problem
        for connector in self.config.connectors:
            if connector.tls is not None:
                problem = reload_client_context(connector.tls)
                if problem is None:
                    reloaded.append(f"connector {connector.name}")
                else:
                    failed[f"connector {connector.name}"] = problem
        for name, problem in failed.items():
            log.error("TLS reload: %s keeps its previous certificates: %s", name, problem)
        log.info("TLS reload: %s", ", ".join(reloaded) or "nothing to reload")
        return {"reloaded": reloaded, "failed": failed}

    def status(self) -> dict:
        status = self.server.status() if self.server is not None else {}
        if self.event_log is not None:
            status["events"] = self.event_log.status()
        status["collector"] = collector.status()
        acceptors = []
        connections = []
        for acceptor in self.config.acceptors:
            port = self.listeners.get(acceptor.name)
            # An AMQP connection may open several sessions: count connections.
            count = len(
                {s.connection.id for s in (self.server.sessions if self.server else ()) if s.connection.acceptor == acceptor.name}
            )
            entry = {
                "name": acceptor.name,
                "protocols": sorted(acceptor.protocols or SERVED_PROTOCOLS),
                "host": acceptor.host,
                "port": port.getHost().port if port is not None else acceptor.port,
                "listening": port is not None,
                "connections": count,
            }
            factory = self.factories.get(acceptor.name)
            if isinstance(factory, GatewayFactory):
                entry["router"] = acceptor.router
                entry["opening"] = len(factory.connections)
                entry["forwarded"] = len(factory.splices)
                # of which the relay engine carries (plain TCP both ways), the rest the reactor
                entry["relayed"] = sum(1 for splice in factory.splices if splice.relayed)
                entry["decisions"] = dict(factory.decisions)
            admission = self.admission_factories.get(acceptor.name)
            if admission is not None:
                entry["admission"] = admission.status()
            tls = self.tls_factories.get(acceptor.name)
            if tls is not None:
                entry["tls"] = tls.status()
            acceptors.append(entry)
        by_connection: dict = {}
        for session in self.server.sessions if self.server else ():
            info = session.connection
            entry = by_connection.get(info.id)
            if entry is None:
                entry = by_connection[info.id] = {
                    "id": info.id,
                    "protocol": info.protocol,
                    "remote": info.remote,
                    "client_id": info.client_id,
                    "user": session.user,
                    "acceptor": info.acceptor,
                    "consumers": 0,
                }
                # as Artemis's listConnections: proxyAddress / proxyVersion
                if getattr(info, "proxy_version", None) is not None:
                    entry["proxy_address"] = info.proxy_address
                    entry["proxy_version"] = info.proxy_version
                connections.append(entry)
            entry["consumers"] += len(session.consumers)
        status["acceptors"] = acceptors
        status["connections"] = connections
        if self.routers:
            status["routers"] = {
                name: {
                    "targets": service.pool.status() if service.pool is not None else [],
                    "ready": service.pool.ready_count if service.pool is not None else 0,
                    "quorum_size": service.pool.quorum_size if service.pool is not None else None,
                }
                for name, service in self.routers.items()
            }
        if self.cluster is not None or self.broadcast_groups or self.discovery_groups:
            cluster = self.cluster.status() if self.cluster is not None else {"node_id": self.node_id}
            cluster["broadcast_groups"] = [g.status() for g in self.broadcast_groups.values()]
            cluster["discovery_groups"] = [g.status() for g in self.discovery_groups.values()]
            status["cluster"] = cluster
        status["config"] = self.config.config_path
        if self.reloader is not None:
            status["reload"] = self.reloader.status()
        status["data_dirs"] = self.data_dirs
        if self.management_port is not None:
            status["management"] = {
                "host": self.config.management_host,
                "port": self.management_port.getHost().port,
            }
        return status


def _pool_description(pool) -> str:
    if pool is None:
        return "no pool"
    if pool.discovery_group is not None:
        return f"targets from discovery group {pool.discovery_group}"
    if pool.cluster_connection is not None:
        return f"targets from cluster connection {pool.cluster_connection}"
    return "targets " + ", ".join(pool.static_connectors)


def _announced_connector(announced):
    """A broadcast connector as a :class:`junction.config.model.Connector` (plain TCP)."""
    from junction.config.model import Connector

    return Connector(
        name=announced.name, scheme="tcp", host=announced.host, port=int(announced.port),
        params=dict(announced.params),
    )


def unimplemented_settings(config) -> list[str]:
    """Settings the config gives that this build reads but does not act on.

    The :class:`~junction.config.specs.Warned` rows of
    :data:`junction.config.unimplemented.UNIMPLEMENTED`, then the protocols a
    connection router does not route yet.
    """
    problems = config_warnings(config)
    routed = ",".join(sorted(ROUTED_PROTOCOLS))
    not_routed = ",".join(sorted({"AMQP", "CORE", "OPENWIRE"} - ROUTED_PROTOCOLS))
    for router in config.connection_routers:
        file, line = router.source
        problems.append(
            f"{file}:{line}: connection router {router.name!r}: routes {routed} connections; "
            f"{not_routed} connections on its acceptors are not routed by this build yet "
            "and are closed"
        )
    return problems
