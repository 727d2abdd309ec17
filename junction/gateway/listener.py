"""Gateway listeners: the acceptors with ``router=``.

A :class:`GatewayFactory` serves one such acceptor.  Each connection gets a
:class:`GatewayProtocol`, which runs the gateway flow of ``DESIGN.md``:

1. **Sniff** the protocol from the first bytes with
   :func:`junction.protocols.detect.detect`: at most
   :data:`~junction.protocols.detect.MAX_SNIFF_BYTES` bytes, within the
   connect timeout (``<limits connect-timeout>``).  Bytes no protocol starts
   with close the connection with a log line showing what arrived
   (:func:`~junction.protocols.detect.describe`: at most 32 bytes).
2. **Read the opening** with the protocol's opening reader (the
   :class:`~junction.protocols.opening.Opening` interface), which the
   protocol's gateway side makes (:mod:`junction.gateway.side`; the protocol
   table, :mod:`junction.protocols.registry`, names it): bounded by the
   reader's own limits and by the same connect timeout, counted from the
   accept.  Its client id and login are the routing inputs.
3. **Authenticate** the login against the node's users/roles files
   (the reader's callback, :meth:`SecurityManager.authenticate`), so
   USER_NAME and ROLE_NAME keys cannot be spoofed.  A bad login gets the
   broker's own refusal in the protocol's terms, and the connection is closed.
4. **Route**: :meth:`ConnectionRouter.route` with the client id, the source
   address (``host:port``; ``[v6]:port``), the authenticated user and its
   roles (sorted, so "first role" is stable); SNI_HOST is the name a TLS client sent.
5. **Serve** the decision:

   * OK, remote target: **forward** (:func:`~junction.gateway.forward.connect_and_forward`):
     every byte received so far is replayed to the target unmodified, so the
     broker core authenticates the client itself and sees the same client
     id, then the two connections are spliced;
   * OK, local target: **hand over** the transport and the bytes received
     so far to ``local_factory`` (the node's broker core on this acceptor),
     as :mod:`junction.edge.acceptor` hands a sniffed connection over;
   * redirect (``routerMode``, :data:`ROUTER_MODES`; ``auto`` redirects the
     protocols whose entry says ``redirects``, forwards the others): the
     opening reader's redirect to the target's host and port, then close;
   * ``REFUSED_UNAVAILABLE``: ``Connection router <r> is not ready``;
   * ``REFUSED_USE_ANOTHER``: ``Connection router <r> rejected this connection``;
   * the target cannot be reached: ``Connection router <r> could not
     connect to target <name> (<host>:<port>): <why>``, and the target is
     marked not ready until its next check.

   Refusals and errors are the opening reader's (:meth:`Opening.refuse`,
   :meth:`Opening.close_with`): the broker core's own, in the protocol's
   terms; then the connection is closed.  Where the backend must see a login
   again (a SASL exchange, say), the protocol's gateway side redoes it on the client's
   behalf (:meth:`GatewaySide.forward_handshake`,
   :meth:`GatewaySide.local_hand_off`).

Every decision is logged at INFO: router, peer, client id, user, key, the
target or refusal, and which routing step decided.

While the router decides and the target is connected, the client is not
read (``transport.pauseProducing()``); what arrived with the opening is kept
and replayed, so the bytes held per connection are bounded by the opening's
limits plus one read.

Protocols the table lists without a gateway side (CORE, OpenWire, MQTT) are
sniffed but not routed by this build: such a connection is closed with a log
line saying so.
"""

from __future__ import annotations

import itertools
import logging

from twisted.internet import defer
from twisted.internet.protocol import Factory, Protocol

from junction.edge.admission import OffenderLog
from junction.edge.sockets import socket_transport
from junction.edge.tls import tls_sni_host
from junction.events.node import close_reason
from junction.gateway.forward import (
    FORWARD_BUFFER_SIZE,
    ForwardConnectError,
    ForwardHandshakeError,
    apply_socket_options,
    connect_and_forward,
    rebind,
    target_address,
)
from junction.gateway.side import ANSWERED, GatewaySide, peer_of
from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, UNKNOWN, describe, detect
from junction.protocols.opening import Complete, Failed, Opening
from junction.protocols.registry import frame_size_params, load, redirecting, routed
from junction.protocols.registry import protocol as protocol_entry
from junction.routing.targets import RouterStatus

__all__ = [
    "REDIRECTING_PROTOCOLS",
    "ROUTED_PROTOCOLS",
    "ROUTER_MODES",
    "GatewayFactory",
    "GatewayProtocol",
]

log = logging.getLogger("junction.gateway")

#: Protocols whose opening this build reads and routes (forwarded, or served
#: locally).  The others are sniffed and closed with a log line.
ROUTED_PROTOCOLS = routed()

#: Protocols with a native redirect this build writes (the protocol table's
#: entries that say ``redirects``).  The others are always forwarded.
REDIRECTING_PROTOCOLS = redirecting()

#: The acceptor parameter ``routerMode``: how a connection routed to a
#: remote target is served.  ``auto`` (the default, Artemis's behaviour):
#: redirect where the protocol has a native redirect, forward otherwise.
ROUTER_MODES = ("redirect", "forward", "auto")

#: the gateway's connection numbers in the event log
_CONN_IDS = itertools.count(1)

_SNIFFING = "sniffing"
_OPENING = "opening"
_ROUTING = "routing"
_CONNECTING = "connecting"
_FORWARDED = "forwarded"
_LOCAL = "local"
_CLOSED = "closed"


class GatewayFactory(Factory):
    """Serves one acceptor with ``router=``: a :class:`GatewayProtocol` per connection.

    ``router_service`` is a :class:`~junction.gateway.build.RouterService`
    (or a bare :class:`~junction.gateway.router.ConnectionRouter`).
    ``security`` authenticates logins (a
    :class:`~junction.brokercore.security.SecurityManager`; None: every login
    is taken as given, with no roles).  ``acceptor`` is the acceptor's
    config (its ``protocols``, ``connectionsAllowed``, ``tcpNoDelay``, the
    frame-size parameters the protocol table names); ``limits`` the node's
    :class:`~junction.config.model.Limits` (``connect_timeout``,
    ``max_frame_size``, ``max_header_count``, ``max_header_length``).
    ``reactor`` provides ``callLater`` and ``connectTCP``.  ``local_factory``
    serves connections the router keeps local (the node's own factory for
    this acceptor); without it they are refused.

    ``connections`` holds the protocols still in their opening,
    ``splices`` the forwarded connections, ``decisions`` counts outcomes
    (``forwarded``, ``local``, ``refused``, ``failed`` ...).
    """

    noisy = False

    def __init__(
        self,
        router_service,
        *,
        security,
        acceptor,
        limits,
        reactor,
        local_factory=None,
        container_id: str | None = None,
        relay=None,
    ):
        self.router_service = router_service
        #: the node's :class:`~junction.gateway.relay.RelayEngine` (None: the reactor relays)
        self.relay = relay
        self.router = getattr(router_service, "router", router_service)
        self.security = security
        self.acceptor = acceptor
        self.limits = limits
        self.reactor = reactor
        self.local_factory = local_factory
        params = dict(getattr(acceptor, "params", None) or {})
        self.params = params
        self.acceptor_name = getattr(acceptor, "name", "?")
        self.protocols = frozenset(getattr(acceptor, "protocols", None) or ())
        mode = str(params.get("routerMode", "auto")).strip().lower()
        if mode not in ROUTER_MODES:
            raise ValueError(f"acceptor {self.acceptor_name}: routerMode must be one of "
                             f"{', '.join(ROUTER_MODES)}, not {mode!r}")
        #: ``redirect``, ``forward`` or ``auto``
        self.mode = mode
        #: the gateway's own name in the frames it writes (the node name; None: the protocol's default)
        self.container_id = container_id
        #: whether a client may log in without credentials (an anonymous login),
        #: as the node's broker core allows it
        self.anonymous_allowed = (
            security is None
            or not getattr(security, "enabled", True)
            or getattr(security, "anonymous_user", None) is not None
        )
        #: the largest frame an opening may be: the largest of the protocol table's frame-size
        #: parameters this acceptor gives (each side's own: GatewaySide.max_frame), else
        #: <limits max-frame-size> (``default_max_frame``)
        self.default_max_frame = limits.max_frame_size if limits else 10 * 1024 * 1024
        self.max_frame = max_frame = max(
            (int(params[name]) for name in frame_size_params() if name in params), default=self.default_max_frame
        )
        #: seconds from the accept to a complete opening (sniff + opening): the acceptor's
        #: routingTimeout (ms), else <limits connect-timeout>
        timeout_ms = params.get("routingTimeout")
        self.connect_timeout = (
            int(timeout_ms) if timeout_ms not in (None, "") else (limits.connect_timeout if limits else 10_000)
        ) / 1000.0
        #: the most bytes one connection may have sent before it is spliced or
        #: handed over: the acceptor's routingMaxBytes, else its opening plus one more read
        max_bytes = params.get("routingMaxBytes")
        self.max_buffered = (
            int(max_bytes) if max_bytes not in (None, "") else max_frame + MAX_SNIFF_BYTES + FORWARD_BUFFER_SIZE
        )
        self.connections: set[GatewayProtocol] = set()
        self.splices: set = set()
        self.decisions: dict[str, int] = {}
        #: routing timeouts and oversize openings, logged once per source and minute
        self.offenders = OffenderLog(self.reactor)
        #: the node's :class:`junction.events.node.NodeEvents` (None: no event log)
        self.events = None
        self._sides: dict[str, GatewaySide | None] = {}

    def side(self, protocol_name: str | None) -> GatewaySide | None:
        """The gateway side of a routed protocol (made on first use), else None."""
        if protocol_name not in self._sides:
            entry = protocol_entry(protocol_name) if protocol_name else None
            side = None
            if entry is not None and entry.gateway is not None:
                side = load(entry.gateway)(self, entry)
            self._sides[protocol_name] = side
        return self._sides[protocol_name]

    def redirects(self, protocol_name: str | None) -> bool:
        """Whether a connection of this protocol routed to a remote target is redirected."""
        if protocol_name not in REDIRECTING_PROTOCOLS:
            return False
        return self.mode in ("redirect", "auto")

    def count(self, outcome: str) -> None:
        self.decisions[outcome] = self.decisions.get(outcome, 0) + 1

    def close_all(self) -> None:
        """Close every connection of this listener: openings, and forwarded ones (cleanly)."""
        for protocol in list(self.connections):
            protocol._close()
        for splice in list(self.splices):
            splice.close()

    def buildProtocol(self, addr):
        allowed = int(self.params.get("connectionsAllowed", -1))
        if allowed >= 0:
            current = len(self.connections) + len(self.splices)
            current += len(getattr(self.local_factory, "connections", ()) or ())
            if current >= allowed:
                log.warning(
                    "acceptor %s: connectionsAllowed=%d reached, refusing %s",
                    self.acceptor_name,
                    allowed,
                    getattr(addr, "host", addr),
                )
                return None
        protocol = GatewayProtocol(self)
        protocol.factory = self
        return protocol

    def __repr__(self) -> str:
        return f"<GatewayFactory {self.acceptor_name} router={self.router.name}>"


class GatewayProtocol(Protocol):
    """One connection on a gateway listener, until it is forwarded, handed over or closed."""

    def __init__(self, factory: GatewayFactory):
        self.gateway = factory
        self.state = _SNIFFING
        #: every byte received so far, replayed to whoever serves the connection
        self.buffer = bytearray()
        #: bytes received before the routing decision (routingMaxBytes)
        self.received = 0
        self.protocol_name: str | None = None
        #: the protocol's gateway side, once sniffed
        self.side: GatewaySide | None = None
        #: the protocol's opening reader
        self.opening: Opening | None = None
        #: the login the side redoes with the backend on the client's behalf (None: none)
        self.backend_login = None
        self.timer = None
        #: the routing decision or the forward connection in progress
        self.pending: defer.Deferred | None = None
        self.peer = "?"
        self.splice = None
        self.decision = None
        #: this connection's id in the event log ("g<n>": the gateway's own numbers)
        self.conn_id = None
        #: when the event log was told of it (None: not told)
        self.accepted_at = None

    # -- Twisted ------------------------------------------------------------------------
    def connectionMade(self) -> None:
        gateway = self.gateway
        gateway.connections.add(self)
        apply_socket_options(self.transport, gateway.params)
        self.peer = peer_of(self.transport)
        self.timer = gateway.reactor.callLater(gateway.connect_timeout, self._timed_out)

    def dataReceived(self, data: bytes) -> None:
        state = self.state
        if state is _CLOSED or state is _FORWARDED or state is _LOCAL:
            return
        self.received += len(data)
        if self.received > self.gateway.max_buffered and (state is _SNIFFING or state is _OPENING):
            self._too_much(data)
            return
        if state is _OPENING:
            self._feed_opening(data)
            return
        self.buffer += data
        if state is _SNIFFING:
            self._sniff()
        elif len(self.buffer) > self.gateway.max_buffered:
            # routing or connecting: reading is paused, so only a read already
            # under way can land here; never hold more than the bound
            log.info(
                "acceptor %s: %s connection from %s sent %d bytes before it was served; closing it",
                self.gateway.acceptor_name,
                self.protocol_name,
                self.peer,
                len(self.buffer),
            )
            self._close()

    def connectionLost(self, reason=None) -> None:
        if self.state in (_FORWARDED, _LOCAL):  # pragma: no cover - the new protocol gets it
            return
        events = self.gateway.events
        if events is not None and self.accepted_at is not None:
            events.connection_closed(
                self.conn_id, started=self.accepted_at, bytes_in=self.received, bytes_out=None,
                reason=close_reason(reason) or f"not served ({self.state})",
            )
            self.accepted_at = None
        self.state = _CLOSED
        self._stop_timer()
        self.gateway.connections.discard(self)
        pending, self.pending = self.pending, None
        if pending is not None and not pending.called:
            pending.cancel()
        self.buffer = bytearray()

    # -- sniffing ----------------------------------------------------------------------
    def _sniff(self) -> None:
        gateway = self.gateway
        name = detect(bytes(self.buffer[:MAX_SNIFF_BYTES]))
        if name == NEED_MORE and len(self.buffer) < MAX_SNIFF_BYTES:
            return
        if name in (NEED_MORE, UNKNOWN):
            log.info(
                "acceptor %s (router %s): connection from %s sent an unknown protocol: %s",
                gateway.acceptor_name,
                gateway.router.name,
                self.peer,
                describe(bytes(self.buffer)),
            )
            self._close()
            return
        self.protocol_name = name
        if gateway.protocols and name not in gateway.protocols:
            log.info(
                "acceptor %s (router %s): connection from %s speaks %s, which this acceptor does not serve",
                gateway.acceptor_name,
                gateway.router.name,
                self.peer,
                name,
            )
            self._close()
            return
        if name not in ROUTED_PROTOCOLS:  # pragma: no cover - every sniffed protocol but CORE/OpenWire
            log.info(
                "acceptor %s (router %s): %s connection from %s closed: %s connections are not "
                "routed by this build yet (routed: %s)",
                gateway.acceptor_name,
                gateway.router.name,
                name,
                self.peer,
                name,
                ",".join(sorted(ROUTED_PROTOCOLS)),
            )
            self._close()
            return
        self.state = _OPENING
        events = gateway.events
        if events is not None:
            self.conn_id = f"g{next(_CONN_IDS)}"
            self.accepted_at = events.clock()
            events.connection_accepted(
                self.conn_id, remote=self.peer, acceptor=gateway.acceptor_name, protocol=name,
                sni_host=tls_sni_host(self.transport),
            )
        self.side = gateway.side(name)
        self.opening = self.side.opening(self)
        data, self.buffer = bytes(self.buffer), bytearray()
        self._feed_opening(data)

    # -- the opening -------------------------------------------------------------------
    def _feed_opening(self, data: bytes) -> None:
        opening = self.opening
        events = opening.receive_data(data)
        out = opening.data_to_send()
        if out:
            self.transport.write(out)
        for event in events:
            if isinstance(event, Failed):
                self._opening_failed(event)
                return
            if isinstance(event, Complete):
                self._opening_complete(event)
                return

    def _opening_failed(self, event) -> None:
        """The opening failed and its answer is written: log, count, close."""
        self.side.opening_failed(self, event)
        if event.login_refused:
            self._tell_login_refused(event.user, event.client_id)
        self._close()

    def _opening_complete(self, event) -> None:
        """The opening is complete: stop reading, keep the bytes to replay, route."""
        self._stop_timer()
        self.state = _ROUTING
        self.transport.pauseProducing()
        self.buffer = bytearray(event.replay)
        principal = self.side.login(self, event)
        if principal is ANSWERED:
            return
        self._route(event.client_id, principal)

    # -- routing -----------------------------------------------------------------------
    def _route(self, client_id, principal) -> None:
        try:
            d = self.gateway.router.route(
                client_id=client_id,
                sni_host=tls_sni_host(self.transport),
                source_address=self.peer,
                username=principal.user,
                roles=sorted(principal.roles),
            )
        except Exception:
            d = defer.fail()
        self.pending = d
        d.addCallbacks(self._routed, self._route_failed, callbackArgs=(client_id, principal.user))

    # -- serving the decision ------------------------------------------------------------
    def _routed(self, decision, client_id, user) -> None:
        self.pending = None
        if self.state is _CLOSED:
            return
        self.decision = decision
        gateway = self.gateway
        router = gateway.router.name
        result = decision.result
        target = result.target
        redirect = gateway.redirects(self.protocol_name)
        if result.ok and target is not None and target.local:
            outcome = f"local (this node's broker core, node {target.node_id})"
        elif result.ok and target is not None:
            how = "redirect" if redirect else "forward"
            outcome = f"{how} to target {target_address(target.connector)}, node {target.node_id}"
        elif result.status is RouterStatus.REFUSED_UNAVAILABLE:
            outcome = "refused: not ready (REFUSED_UNAVAILABLE)"
        else:
            outcome = "refused: rejected (REFUSED_USE_ANOTHER)"
        if gateway.events is not None and self.accepted_at is not None:
            self._tell_routed(decision, redirect, client_id, user)
        log.info(
            "router %s: %s connection from %s (%s %r, user %r) on acceptor %s: key %r -> %s [%s%s]",
            router,
            self.protocol_name,
            self.peer,
            self.side.client_id_label,
            client_id,
            user,
            gateway.acceptor_name,
            decision.key,
            outcome,
            decision.reason.value,
            ", cache hit" if decision.cache_hit else "",
        )
        if result.ok and target is not None and target.local:
            self._serve_locally()
        elif result.ok and target is not None and target.connector is not None:
            if redirect:
                self._redirect(target)
            else:
                self._forward(target)
        elif result.ok:
            gateway.count("failed")
            self._refuse(
                RouterStatus.REFUSED_USE_ANOTHER, detail=f"the target {target!r} has no connector to forward to"
            )
        elif result.status is RouterStatus.REFUSED_UNAVAILABLE:
            gateway.count("refused")
            self._refuse(result.status)
        else:
            gateway.count("refused")
            self._refuse(RouterStatus.REFUSED_USE_ANOTHER)

    def _tell_login_refused(self, user, client_id) -> None:
        """The event log's refusal of a connection whose login failed (no routing decision)."""
        if self.gateway.events is not None and self.accepted_at is not None:
            self.gateway.events.login_refused(self.conn_id, router=self.gateway.router.name, user=user, client_id=client_id)

    def _tell_routed(self, decision, redirect: bool, client_id, user) -> None:
        """The event log's ``connection.routed`` for this decision."""
        result = decision.result
        target = result.target
        if result.ok and target is not None and target.local:
            what, name = "local", "local"
        elif result.ok and target is not None and target.connector is not None:
            what = "redirect" if redirect else "forward"
            name = getattr(target.connector, "name", None) or target_address(target.connector)
        else:
            what, name = "refused", None
        reason = decision.reason.value
        if what == "refused":
            reason = f"{result.status.name}: {reason}" if result.status is not None else reason
        router = self.gateway.router
        resolver = getattr(router, "key_resolver", None)
        self.gateway.events.connection_routed(
            self.conn_id,
            router=router.name,
            key_type=resolver.key_type.value if resolver is not None else None,
            key=decision.key_raw,
            transformed_key=decision.key,
            target=name,
            target_node_id=None if target is None else target.node_id,
            decision=what,
            reason=reason,
            cache_hit=decision.cache_hit,
            decision_us=round(decision.elapsed * 1e6, 1),
            user=user,
            client_id=client_id,
        )

    def _redirect(self, target) -> None:
        """The protocol's redirect to the target's connector (Artemis's), then close."""
        connector = target.connector
        self.gateway.count("redirected")
        self.transport.write(self.opening.redirect(self.gateway.router.name, str(connector.host), int(connector.port)))
        self._close()

    def _route_failed(self, failure) -> None:
        self.pending = None
        if self.state is _CLOSED or failure.check(defer.CancelledError):
            return
        log.error(
            "router %s: routing the %s connection from %s failed: %s",
            self.gateway.router.name,
            self.protocol_name,
            self.peer,
            failure.getTraceback(),
        )
        self.gateway.count("failed")
        self._refuse(RouterStatus.REFUSED_UNAVAILABLE)

    def _serve_locally(self) -> None:
        gateway = self.gateway
        local = gateway.local_factory
        if local is None:
            log.info(
                "router %s: the connection from %s is for the local target, but acceptor %s has "
                "no broker core to serve it",
                gateway.router.name,
                self.peer,
                gateway.acceptor_name,
            )
            gateway.count("refused")
            self._refuse(RouterStatus.REFUSED_USE_ANOTHER, detail="this gateway has no local broker core")
            return
        transport = self.transport
        # sniffed once: a multi-protocol acceptor's own factory for the protocol detected here
        factory_for = getattr(local, "factory_for", None)
        serving = (factory_for(self.protocol_name) if factory_for is not None else None) or local
        protocol = serving.buildProtocol(transport.getPeer())
        if protocol is None:  # the local acceptor refused it (connectionsAllowed)
            self._close()
            return
        gateway.count("local")
        events = gateway.events
        if events is not None and self.accepted_at is not None:
            # the broker core tells of the connection from here on, under its own id
            events.connection_closed(
                self.conn_id, started=self.accepted_at, bytes_in=self.received, bytes_out=0,
                reason="handed to the local broker core",
            )
            self.accepted_at = None
        self.state = _LOCAL
        gateway.connections.discard(self)
        buffered, self.buffer = bytes(self.buffer), bytearray()
        seen_by_protocol, buffered = self.side.local_hand_off(self, transport, buffered)
        rebind(transport, protocol)
        protocol.makeConnection(seen_by_protocol)
        transport.resumeProducing()
        if buffered:
            protocol.dataReceived(buffered)

    def _forward(self, target) -> None:
        gateway = self.gateway
        self.state = _CONNECTING
        handshake = self.side.forward_handshake(self)
        try:
            d = connect_and_forward(
                socket_transport(self.transport),
                self.buffer,
                target.connector,
                gateway.reactor,
                timeout=gateway.connect_timeout,
                handshake=handshake,
                relay=gateway.relay,
            )
        except Exception as exc:  # noqa: BLE001 - reported like a failed connect
            d = defer.fail(ForwardConnectError(target_address(target.connector), str(exc)))
        self.pending = d
        d.addCallbacks(
            self._forwarded, self._forward_failed, callbackArgs=(target,), errbackArgs=(target,)
        )

    def _forwarded(self, splice, target) -> None:
        self.pending = None
        gateway = self.gateway
        gateway.count("forwarded")
        self.state = _FORWARDED
        self.splice = splice
        self.buffer = bytearray()
        self.opening = None
        gateway.connections.discard(self)
        gateway.splices.add(splice)
        peer = self.peer
        conn_id, accepted_at, self.accepted_at = self.conn_id, self.accepted_at, None
        opening = self.received

        def closed(result):
            gateway.splices.discard(splice)
            events = gateway.events
            if events is not None and accepted_at is not None:
                # the opening the gateway read was replayed to the target: counted in the splice
                events.connection_closed(
                    conn_id, started=accepted_at,
                    bytes_in=max(splice.bytes_from_client, opening), bytes_out=splice.bytes_from_target,
                    reason=getattr(splice, "relay_reason", None),
                )
            log.debug(
                "router %s: forwarded connection from %s to %s closed (%d bytes in, %d out)",
                gateway.router.name,
                peer,
                splice.target_name,
                splice.bytes_from_client,
                splice.bytes_from_target,
            )
            return result

        splice.closed.addBoth(closed)

    def _forward_failed(self, failure, target) -> None:
        self.pending = None
        if self.state is _CLOSED or failure.check(defer.CancelledError):
            return
        gateway = self.gateway
        router = gateway.router.name
        if failure.check(ForwardHandshakeError):
            exc = failure.value
            log.info(
                "router %s: %s connection from %s: the login on the client's behalf at target %s "
                "failed: %s",
                router,
                self.protocol_name,
                self.peer,
                exc.target,
                exc.reason,
            )
            gateway.count("target-refused")
            self._answer(
                f"Connection router {router}: target {exc.target} refused the connection: {exc.reason}",
                condition=exc.condition or self.side.error_condition,
            )
            return
        if failure.check(ForwardConnectError):
            exc = failure.value
            name, reason = exc.target, exc.reason
        else:
            name, reason = target_address(target.connector), failure.getErrorMessage()
            log.error("router %s: forwarding failed: %s", router, failure.getTraceback())
        log.info(
            "router %s: %s connection from %s: cannot forward to target %s: %s",
            router,
            self.protocol_name,
            self.peer,
            name,
            reason,
        )
        self._target_unreachable(target, reason)
        gateway.count("unreachable")
        self._answer(f"Connection router {router} could not connect to target {name}: {reason}")

    def _target_unreachable(self, target, reason: str) -> None:
        """Mark the target not ready until its next check says otherwise."""
        pool = getattr(self.gateway.router, "pool", None)
        monitor_of = getattr(pool, "monitor_of", None)
        if monitor_of is None:
            return
        monitor = monitor_of(target)
        if monitor is not None:
            monitor.mark_not_ready(f"forwarding failed: {reason}")

    # -- closing -----------------------------------------------------------------------------
    def _answer(self, message: str, *, condition: str | None = None) -> None:
        """End the connection with the protocol's own error (:meth:`Opening.close_with`;
        ``condition`` where the protocol has them, else the side's), then close."""
        if self.state is _CLOSED:
            return
        if condition is None:
            condition = self.side.error_condition
        self._write_and_close(self.opening.close_with(condition, message))

    def _refuse(self, status: RouterStatus, *, detail: str = "") -> None:
        """End the connection with Artemis's refusal for router ``status``
        (:meth:`Opening.refuse`; ``detail`` where the protocol has room), then close."""
        if self.state is _CLOSED:
            return
        self._write_and_close(self.opening.refuse(self.gateway.router.name, status, detail=detail))

    def _write_and_close(self, data: bytes) -> None:
        if data:
            self.transport.write(data)
        self._close()

    def _timed_out(self) -> None:
        """No routing decision within routingTimeout: logged once per source and minute (slowloris)."""
        self.timer = None
        gateway = self.gateway
        if self.state is _SNIFFING:
            gateway.count("timed-out")
            self._offender(
                "routingTimeout",
                "acceptor %s (router %s): %s sent %s within %g s, not enough to tell its protocol",
                describe(bytes(self.buffer)),
                gateway.connect_timeout,
            )
            self._close()
        elif self.state is _OPENING:
            gateway.count("timed-out")
            self._offender(
                "routingTimeout",
                "acceptor %s (router %s): " + self.protocol_name + " connection from %s: "
                + self.side.awaited + " within %g s%s",
                gateway.connect_timeout,
                "",
            )
            self._write_and_close(self.opening.timed_out(gateway.connect_timeout))

    def _too_much(self, data: bytes) -> None:
        """More than routingMaxBytes before the routing decision: closed (with the protocol's answer)."""
        gateway = self.gateway
        gateway.count("too-large")
        self._offender(
            "routingMaxBytes",
            "acceptor %s (router %s): connection from %s sent %d bytes before its opening was complete "
            "(routingMaxBytes=%d); closed",
            self.received,
            gateway.max_buffered,
        )
        opening = self.opening
        if opening is None:  # still sniffing: the protocol's own answer all the same
            name = detect(bytes((self.buffer + data)[:MAX_SNIFF_BYTES]))
            side = gateway.side(name)
            opening = side.opening(self) if side is not None else None
        self._write_and_close(opening.too_large(gateway.max_buffered) if opening is not None else b"")

    def _offender(self, limit: str, message: str, *args) -> None:
        gateway = self.gateway
        gateway.offenders.refused(
            log, limit, self.peer.rpartition(":")[0], message, gateway.acceptor_name, gateway.router.name, self.peer, *args
        )

    def _stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _close(self) -> None:
        self._stop_timer()
        self.state = _CLOSED
        pending, self.pending = self.pending, None
        if pending is not None and not pending.called:
            pending.cancel()
        self.gateway.connections.discard(self)
        self.buffer = bytearray()
        self.backend_login = None
        if self.transport is not None:
            self.transport.loseConnection()

