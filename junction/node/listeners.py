"""The node's listeners: every acceptor it serves, the broker core's and the gateway's.

This service decides what each acceptor serves -- the protocol table's
adapters for its ``protocols=``, the cluster's links, and for an acceptor with
``router=`` the gateway's listener in front of them (connections kept local
are handed to the factory the broker core would have had) -- and asks
:mod:`junction.edge.stack` for the rest: several protocols on one port, TLS
(``sslEnabled``), the PROXY protocol, the per-source limits, and the port with
its backlog.  Started after the routers and the cluster manager, before the
cluster's links and the management API; stopped first of all but the reload
check: no new connection, the gateway's openings closed, then the relay
engine that carries forwarded connections.
"""

from __future__ import annotations

from twisted.internet import defer

from junction.config.params import acceptor_params_with_effect
from junction.edge.stack import build_stack, listen, serving_factory
from junction.gateway.listener import ROUTED_PROTOCOLS, GatewayFactory
from junction.node.service import NodeService, log
from junction.protocols.registry import load, protocol, protocol_table
from junction.protocols.registry import served as served_protocols

__all__ = ["PROTOCOL_FACTORIES", "SERVED_PROTOCOLS", "ListenersService"]

#: Protocols the broker core serves (the protocol table's entries with an adapter).
SERVED_PROTOCOLS = served_protocols()
#: each served protocol's factory, from the protocol table (the acceptor parameters each
#: acts on are in junction.config.params, under the entry's ``part``)
PROTOCOL_FACTORIES = {entry.name: load(entry.adapter) for entry in protocol_table() if entry.adapter is not None}


def _disconnect_clients(factory) -> None:
    """Tell the clients of an acceptor's protocol factories that the node goes away, where
    the protocol has a word for it (CORE: DISCONNECT with reason SHUT_DOWN, as Artemis's
    graceful stop sends), before the connections are closed."""
    factory = getattr(factory, "wrappedFactory", factory)  # TLS
    for part in getattr(factory, "factories", {None: factory}).values():
        disconnect_all = getattr(getattr(part, "wrappedFactory", part), "disconnect_all", None)
        if disconnect_all is not None:
            disconnect_all()


class ListenersService(NodeService):
    """``node.listeners`` (ports), ``node.factories`` (each acceptor's own factory),
    ``node.tls_factories``, ``node.admission_factories`` and ``node.relay``."""

    name = "listeners"

    def startService(self):
        super().startService()
        for acceptor in self.node.config.acceptors:
            self._listen(acceptor)

    @defer.inlineCallbacks
    def stopService(self):
        """Stop listening, close the gateway's connections, then stop the relay engine."""
        super().stopService()
        node = self.node
        for port in list(node.listeners.values()):
            yield defer.maybeDeferred(port.stopListening)
        node.listeners.clear()
        for factory in node.factories.values():
            if isinstance(factory, GatewayFactory):
                factory.close_all()
            else:
                _disconnect_clients(factory)
        if node.relay is not None:
            node.relay.stop()  # after close_all: their clean closes are done first
            node.relay = None

    def _listen(self, acceptor) -> None:
        node = self.node
        protocols = acceptor.protocols or SERVED_PROTOCOLS
        served = protocols & SERVED_PROTOCOLS
        unserved = protocols - SERVED_PROTOCOLS - {"CLUSTER"}
        if unserved:
            log.warning(
                "acceptor %s: protocols %s are not served by this build yet", acceptor.name, ",".join(sorted(unserved))
            )
        # Cluster links arrive on every broker acceptor of a clustered node, told apart by their
        # preamble; protocols=CLUSTER makes an acceptor for links only.
        links = node.cluster is not None and not acceptor.router
        if "CLUSTER" in protocols and not links:
            log.warning(
                "acceptor %s: protocols=CLUSTER, but this node %s", acceptor.name,
                "routes connections on it (router=)" if acceptor.router else "has no cluster connection or cluster credentials",
            )
        # a gateway listener routes what the protocol table routes, served here or not (a
        # connection its router keeps local is refused when this node does not serve it)
        routed_here = (acceptor.protocols or ROUTED_PROTOCOLS) & ROUTED_PROTOCOLS if acceptor.router else frozenset()
        if not served and not routed_here and not (links and "CLUSTER" in protocols):
            return
        parts = {"LISTENER", "PROXY", "ADMISSION", *(protocol(name).part for name in served)}
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
            name: PROTOCOL_FACTORIES[name](node.server, acceptor=acceptor, limits=node.config.limits, reactor=node.reactor)
            for name in sorted(served)
        }
        if links:
            # Cluster links arrive on the broker's own acceptors, told apart by their preamble
            # (Artemis's cluster connections use its CORE protocol on them the same way).
            from junction.brokercore.cluster.link_server import LinkServerFactory

            factories["CLUSTER"] = LinkServerFactory(node.cluster, acceptor=acceptor, reactor=node.reactor)
        connect_timeout = node.config.limits.connect_timeout / 1000.0
        factory = serving_factory(
            factories, reactor=node.reactor, acceptor_name=acceptor.name, sniff_timeout=connect_timeout
        ) if factories else None
        what = ",".join(sorted(served | ({"cluster links"} if links else set())))
        if acceptor.router:
            factory, what = self._gateway_factory(acceptor, served, factory, routed_here)
        # node.factories keeps the acceptor's own factory (status, stop)
        stack = build_stack(factory, acceptor, reactor=node.reactor, connect_timeout=connect_timeout)
        if stack.tls is not None:
            node.tls_factories[acceptor.name] = stack.tls
        if stack.admission is not None:
            node.admission_factories[acceptor.name] = stack.admission
        port = listen(stack, acceptor, reactor=node.reactor)
        node.listeners[acceptor.name] = port
        node.factories[acceptor.name] = factory
        actual = port.getHost().port
        what += stack.described
        log.info("acceptor %s listening on %s:%d for %s", acceptor.name, acceptor.host, actual, what)

    def _gateway_factory(self, acceptor, served, local_factory, routed):
        """The gateway listener of an acceptor with ``router=``, and what it does, for the log.

        Connections the router keeps local are handed to ``local_factory``
        (the factory the acceptor would have had without ``router=``; None
        when this node serves none of ``routed``, the protocols it routes).
        """
        node = self.node
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
            node.routers[acceptor.router],
            security=node.server.security,
            acceptor=acceptor,
            limits=node.config.limits,
            reactor=node.reactor,
            local_factory=local_factory,
            container_id=node.config.name,
            relay=self._relay_engine(),
        )
        factory.events = node.events
        return factory, f"{','.join(sorted(routed)) or 'nothing'} routed by router {acceptor.router}"

    def _relay_engine(self):
        """The node's relay engine for forwarded connections (one per node, made on first use)."""
        node = self.node
        if node.relay is None:
            from junction.gateway.relay import RelayEngine

            node.relay = RelayEngine(node.reactor)
        return node.relay
