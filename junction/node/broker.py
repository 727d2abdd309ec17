"""The broker core of a node: its journal, its security manager and the :class:`BrokerServer`.

Made in the privileged phase (the journal opened, right after the data
directory is locked), so the event log can attach to the server before it
starts; started (recovery, then the start-up warnings) in the normal phase;
stopped after the listeners, routers and cluster are down, with the journal's
last sync: a failure there is the node's ``stop_failure``, which makes
``junction run`` exit with status 1.
"""

from __future__ import annotations

from twisted.internet import defer

from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.wildcard import WildcardSyntax
from junction.config.loader import load_certificate_users
from junction.config.reloading import watch_certificate_users, watch_user_store
from junction.node.service import NodeService, log
from junction.node.start_warnings import unimplemented_settings

__all__ = ["BrokerService"]


class BrokerService(NodeService):
    """``node.journal`` and ``node.server``: made first, started once the event log is on."""

    name = "broker"

    def privilegedStartService(self):
        super().privilegedStartService()
        node = self.node
        config = node.config
        journal_dir = node.data_dirs["journal"]
        if config.persistence_enabled:
            from junction.brokercore.journal import Journal

            node.journal = Journal(
                journal_dir,
                file_size=config.journal_file_size,
                buffer_timeout_ns=config.journal_buffer_timeout,
                sync=config.journal_sync_non_transactional or config.journal_sync_transactional,
                reactor=node.reactor,
            )
        syntax = WildcardSyntax(
            delimiter=config.wildcard_addresses.delimiter,
            any_words=config.wildcard_addresses.any_words,
            single_word=config.wildcard_addresses.single_word,
        )
        # the users, roles and certificate-user files are read again when they change
        if node.user_store is not None and config.security_enabled:
            node.user_store = watch_user_store(config, node.user_store)
        certificate_users = node.certificate_users
        if certificate_users is None:
            certificate_users = load_certificate_users(config)
        if certificate_users is not None and config.security_enabled:
            certificate_users = watch_certificate_users(config, certificate_users)
        security = SecurityManager(
            node.user_store,
            config.security_settings,
            syntax,
            enabled=config.security_enabled,
            anonymous_user=config.anonymous_user,
            cache_size=config.authorization_cache_size,
            authentication_cache_size=config.authentication_cache_size,
            invalidation_interval=config.security_invalidation_interval / 1000,
            clock=node.reactor,
            certificate_users=certificate_users,
        )
        node.server = BrokerServer(
            config, reactor=node.reactor, security=security, journal=node.journal, node_id=node.node_id
        )
        from junction.brokercore.large_messages import LargeMessageStore

        node.server.large_messages = LargeMessageStore(node.data_dirs["large_messages"], reactor=node.reactor)

    def startService(self):
        super().startService()
        node = self.node
        config = node.config
        node.server.start()
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

    @defer.inlineCallbacks
    def stopService(self):
        """The broker core's stop and its journal's last sync; a failure is kept as ``node.stop_failure``."""
        super().stopService()
        node = self.node
        if node.server is not None:
            try:
                yield node.server.stop()
            except Exception as exc:  # the journal failed: records may not be on disk
                node.stop_failure = str(exc)
