"""A node's event log as its parts use it: connections, routing decisions, links.

The gateway's listeners and routers, the broker core's protocol adapters and
the cluster's links each hold the node's :class:`NodeEvents` (or None when
``<junction><events>`` is absent) and call one method per happening; the
methods know the fields of :mod:`junction.events.schema`.  Message events
are the broker core's (:mod:`junction.brokercore.events`).
"""

from __future__ import annotations

import time

__all__ = ["NodeEvents", "close_reason", "UNAUTHENTICATED"]

#: ``connection.routed`` reason of a connection refused because its login failed
UNAUTHENTICATED = "unauthenticated"


def close_reason(reason) -> str | None:
    """How a connection ended, for ``connection.closed`` (None for a clean close)."""
    if reason is None or not hasattr(reason, "getErrorMessage"):
        return None
    from twisted.internet import error

    if reason.check(error.ConnectionDone):
        return None
    return reason.getErrorMessage()


class NodeEvents:
    """One node's event log; ``connections`` and ``topology`` say whether those categories are on."""

    def __init__(self, log, node_id: str, *, clock=time.time):
        self.log = log
        self.node_id = node_id
        self.clock = clock
        self.connections = log.enabled("connection.accepted")
        self.topology = log.enabled("topology.link_up")

    # -- connections ----------------------------------------------------------------
    def connection_accepted(self, conn, *, remote, acceptor, protocol, sni_host=None, user=None, client_id=None) -> None:
        """A connection taken on (a broker core: logged in, with its user and client id; a
        gateway: its protocol known, before any login)."""
        if self.connections:
            self.log.emit(
                "connection.accepted", conn=str(conn), remote=remote, acceptor=acceptor,
                protocol=protocol, sni_host=sni_host, user=user, client_id=client_id,
            )

    def connection_routed(self, conn, **fields) -> None:
        if self.connections:
            self.log.emit("connection.routed", conn=str(conn), **fields)

    def login_refused(self, conn, *, router, user=None, client_id=None) -> None:
        """A gateway refused a connection whose login failed, before any routing: a
        ``connection.routed`` with decision ``refused`` and reason :data:`UNAUTHENTICATED`
        (no key, no target, no decision time), so the routing report counts it."""
        if self.connections:
            self.log.emit(
                "connection.routed", conn=str(conn), router=router, decision="refused",
                reason=UNAUTHENTICATED, user=user, client_id=client_id,
            )

    def connection_closed(self, conn, *, started: float, bytes_in=None, bytes_out=None, reason=None) -> None:
        if self.connections:
            self.log.emit(
                "connection.closed", conn=str(conn), bytes_in=bytes_in, bytes_out=bytes_out,
                duration_ms=round((self.clock() - started) * 1000.0, 3), reason=reason,
            )

    # -- topology ---------------------------------------------------------------------
    def link_up(self, cluster: str, peer_node_id, peer, direction: str) -> None:
        if self.topology:
            self.log.emit("topology.link_up", cluster=cluster, peer_node_id=peer_node_id, peer=peer, direction=direction)

    def link_down(self, cluster: str, peer_node_id, peer, direction: str, reason=None) -> None:
        if self.topology:
            self.log.emit(
                "topology.link_down", cluster=cluster, peer_node_id=peer_node_id, peer=peer,
                direction=direction, reason=reason,
            )
