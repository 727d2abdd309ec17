"""CORE on a gateway listener: the first CREATESESSION is the opening.

The opening reader is :class:`~junction.protocols.core.opening.CoreOpening`:
the handshake, the topology subscription (answered at once with this node as
the only member, since the real client waits for it before it creates a
session), and the CREATESESSION, whose login and JMS client id are the
routing inputs.  Its packets are bounded by the acceptor's frame size (the
entry's ``frame_size_param`` when it names one, else ``<limits
max-frame-size>``: Artemis has no CORE frame-size parameter), the stream up
to the CREATESESSION by the listener's ``routingMaxBytes``.  A bad login gets
Artemis's EXCEPTION 105 (``AMQ229031: Unable to validate user from
/<address>. Username: <user>; SSL certificate subject DN: <dn>``), with the
client's address and certificate as the node's broker core would see them.

* redirect (CORE's native one, ``routerMode`` ``auto`` or ``redirect``):
  DISCONNECT_V3 naming the target's node id and its connector as Artemis
  sends one (:func:`core_connector`), then EXCEPTION 222;
* forward and local: the replay (the client's packets, less those the
  gateway answered) goes to the backend, which authenticates the client
  again and answers its CREATESESSION; nothing is redone on the client's
  behalf;
* refuse and the gateway's own errors: EXCEPTIONs answering the
  CREATESESSION (an unreachable target: ROUTING_EXCEPTION, 222, which the
  client's reconnection retries).

The gateway names itself by its node's id (the router's local target's), in
the topology member and in the DISCONNECT; the topology message's event id
is the reactor's time in milliseconds, as Artemis's is.
"""

from __future__ import annotations

from junction.edge.tls import peer_subject
from junction.gateway.side import GatewaySide
from junction.protocols.core import CoreLimits, ExceptionType, TransportConfiguration
from junction.protocols.core.opening import (
    DEFAULT_NODE_ID,
    CoreCredentials,
    CoreOpening,
    RedirectTarget,
)
from junction.protocols.core.topology import announced_connector

__all__ = ["CoreSide", "core_connector"]


def core_connector(connector) -> TransportConfiguration:
    """A ``<connector>`` as Artemis sends it to a client (a redirect's target): see
    :func:`~junction.protocols.core.topology.announced_connector` (no password parameter
    leaves the gateway)."""
    return announced_connector(connector.name, connector.host, connector.port, getattr(connector, "params", None))


class CoreSide(GatewaySide):
    client_id_label = "client-id"
    awaited = "no CREATESESSION"
    #: an unreachable target answers the CREATESESSION with ROUTING_EXCEPTION (222)
    error_condition = ExceptionType.ROUTING_EXCEPTION.name

    def __init__(self, factory, entry):
        super().__init__(factory, entry)
        self.limits = CoreLimits(max_packet_size=self.max_frame)
        local = getattr(getattr(factory, "router", None), "local_target", None)
        #: the gateway's node id: its node's (the router's local target), else the node's name
        self.node_id = (
            getattr(local, "node_id", None) or getattr(factory, "container_id", None) or DEFAULT_NODE_ID
        )

    def opening(self, connection) -> CoreOpening:
        factory = self.factory
        transport = connection.transport
        subject = peer_subject(transport)

        def authenticate(credentials: CoreCredentials):
            """The principal for the CREATESESSION's login, or None."""
            security = factory.security
            if security is not None:
                return security.login(credentials.username, credentials.password, subject)
            return self.anonymous(credentials.username or None)

        def redirect_target(host: str, port: int) -> RedirectTarget | None:
            """The routed target's connector and node id (the listener's decision on ``connection``)."""
            decision = getattr(connection, "decision", None)
            target = getattr(getattr(decision, "result", None), "target", None)
            connector = getattr(target, "connector", None)
            if connector is None or (str(connector.host), int(connector.port)) != (host, port):
                return None
            return RedirectTarget(core_connector(connector), target.node_id)

        return CoreOpening(
            authenticate,
            limits=self.limits,
            max_bytes=factory.max_buffered,
            node_id=self.node_id,
            unique_event_id=int(factory.reactor.seconds() * 1000),
            remote_address=f"/{connection.peer}",
            certificate_subject=subject,
            redirect_target=redirect_target,
        )
