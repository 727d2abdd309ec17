"""What a node says of itself: its health, its status and the reload of its TLS stores.

The management API (:mod:`junction.management.api`) and ``junction status``
read these through :class:`~junction.node.parent.Node`'s methods.
"""

from __future__ import annotations

from junction import collector
from junction.gateway.listener import GatewayFactory
from junction.node.listeners import SERVED_PROTOCOLS
from junction.node.service import log
from junction.tls.client import reload_client_context

__all__ = ["healthy", "reload_tls", "status"]


def healthy(node):
    """``(ok, problems)``: the broker core started, its journal sound, every served acceptor listening."""
    problems = []
    if node.server is None or not node.server.started:
        problems.append("broker core not started")
    elif node.server.storage.failed:
        problems.append(f"journal failed: {node.server.storage.failed}")
    for acceptor in node.config.acceptors:
        if (acceptor.protocols or SERVED_PROTOCOLS) & SERVED_PROTOCOLS and acceptor.name not in node.listeners:
            problems.append(f"acceptor {acceptor.name} is not listening")
    return (not problems, problems)


def reload_tls(node) -> dict:
    """Read every TLS acceptor's and connector's stores again (SIGHUP, ``POST /api/tls/reload``).

    New connections get the new certificates; connections already open keep
    theirs.  An acceptor whose stores cannot be read keeps serving the ones it
    had, and the problem is returned and logged.  Returns ``{"reloaded": [...],
    "failed": {name: problem}}``.
    """
    reloaded, failed = [], {}
    for acceptor in node.config.acceptors:
        factory = node.tls_factories.get(acceptor.name)
        if factory is None:
            continue
        problem = factory.reload(acceptor.tls)
        if problem is None:
            reloaded.append(acceptor.name)
        else:
            failed[acceptor.name] = problem
    for connector in node.config.connectors:
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


def status(node) -> dict:
    """The node's status: the broker core's, its acceptors, connections, routers, cluster, reload and data."""
    status = node.server.status() if node.server is not None else {}
    if node.event_log is not None:
        status["events"] = node.event_log.status()
    status["collector"] = collector.status()
    acceptors = []
    connections = []
    for acceptor in node.config.acceptors:
        port = node.listeners.get(acceptor.name)
        # An AMQP connection may open several sessions: count connections.
        count = len(
            {s.connection.id for s in (node.server.sessions if node.server else ()) if s.connection.acceptor == acceptor.name}
        )
        entry = {
            "name": acceptor.name,
            "protocols": sorted(acceptor.protocols or SERVED_PROTOCOLS),
            "host": acceptor.host,
            "port": port.getHost().port if port is not None else acceptor.port,
            "listening": port is not None,
            "connections": count,
        }
        factory = node.factories.get(acceptor.name)
        if isinstance(factory, GatewayFactory):
            entry["router"] = acceptor.router
            entry["opening"] = len(factory.connections)
            entry["forwarded"] = len(factory.splices)
            # of which the relay engine carries (plain TCP both ways), the rest the reactor
            entry["relayed"] = sum(1 for splice in factory.splices if splice.relayed)
            entry["decisions"] = dict(factory.decisions)
        admission = node.admission_factories.get(acceptor.name)
        if admission is not None:
            entry["admission"] = admission.status()
        tls = node.tls_factories.get(acceptor.name)
        if tls is not None:
            entry["tls"] = tls.status()
        acceptors.append(entry)
    by_connection: dict = {}
    for session in node.server.sessions if node.server else ():
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
    if node.routers:
        status["routers"] = {
            name: {
                "targets": service.pool.status() if service.pool is not None else [],
                "ready": service.pool.ready_count if service.pool is not None else 0,
                "quorum_size": service.pool.quorum_size if service.pool is not None else None,
            }
            for name, service in node.routers.items()
        }
    if node.cluster is not None or node.broadcast_groups or node.discovery_groups:
        cluster = node.cluster.status() if node.cluster is not None else {"node_id": node.node_id}
        cluster["broadcast_groups"] = [g.status() for g in node.broadcast_groups.values()]
        cluster["discovery_groups"] = [g.status() for g in node.discovery_groups.values()]
        status["cluster"] = cluster
    status["config"] = node.config.config_path
    if node.reloader is not None:
        status["reload"] = node.reloader.status()
    status["data_dirs"] = node.data_dirs
    if node.management_port is not None:
        status["management"] = {
            "host": node.config.management_host,
            "port": node.management_port.getHost().port,
        }
    return status
