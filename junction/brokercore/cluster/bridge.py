"""A cluster connection's bridge: the outgoing link to one peer node.

The bridge connects to the peer's acceptor (TLS when its connector says
``sslEnabled``), introduces this node (cluster credentials, max-hops), then:

* learns the peer's bindings, consumers and topology and hands them to the
  :class:`~junction.brokercore.cluster.manager.ClusterManager`;
* consumes the store-and-forward queue for that peer and sends each message
  with its route, deleting it only when the peer acknowledges it stored it.
  A message in flight when the link fails goes back to the head of the queue
  (its delivery count untouched) and is sent again on the next link, with the
  same duplicate id, so the peer drops it if it had already stored it;
* pings every ``check-period`` and gives the link up when nothing arrives for
  ``connection-ttl``; reconnects after ``retry-interval`` (times
  ``retry-interval-multiplier`` per attempt, at most ``max-retry-interval``),
  ``initial-connect-attempts`` / ``reconnect-attempts`` times (-1: forever).

The wire protocol is :mod:`junction.protocols.cluster.link`.
"""

from __future__ import annotations

import json
import logging

from twisted.internet import error as tx_error
from twisted.internet.protocol import ClientFactory, Protocol

from junction.brokercore.cluster import large_forward
from junction.brokercore.events import carry_trace
from junction.brokercore.large_messages import NATIVE_KEY as LARGE_KEY
from junction.brokercore.queue import Consumer
from junction.brokercore.storage import quiet_failure
from junction.model.message import encode_message
from junction.protocols.cluster import link as wire
from junction.protocols.errors import ProtocolError

log = logging.getLogger("junction.cluster")

#: messages a bridge sends before the peer must acknowledge some (besides confirmation-window-size bytes)
MAX_UNACKED_MESSAGES = 10_000
#: the largest encoded message a bridge forwards (the link's frame limit, less its routing header)
MAX_FORWARDED_BYTES = wire.MAX_FRAME_BYTES - wire.MAX_MESSAGE_HEADER_BYTES - 64
#: seconds to establish the TCP connection
CONNECT_TIMEOUT_S = 10.0

ROUTE_NATIVE = "cluster.route."
#: (see junction.brokercore.cluster.scaledown) the queue a message must create on the peer
CREATE_NATIVE = "cluster.create"


class _LinkClient(Protocol):
    """The Twisted side of one link attempt; the :class:`Bridge` outlives it."""

    def __init__(self, bridge: "Bridge"):
        self.bridge = bridge
        self.conn = wire.LinkConnection(wire.Role.CLIENT)
        self.lost = False

    def connectionMade(self):
        self.bridge.link_made(self)

    def send(self, event) -> None:
        if self.lost or self.conn.closed:
            return
        try:
            data = self.conn.send(event)
        except ProtocolError as exc:
            log.error("cluster link to %s: %s", self.bridge.target_name, exc)
            self.transport.abortConnection()
            return
        self.transport.write(data)

    def dataReceived(self, data: bytes):
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            log.warning("cluster link to %s: the peer broke the protocol: %s", self.bridge.target_name, exc)
            self.transport.write(self.conn.abort(exc))
            self.transport.loseConnection()
            return
        for event in events:
            if self.lost:
                return
            self.bridge.event(self, event)
        if self.conn.closed and not self.lost:
            self.transport.loseConnection()

    def connectionLost(self, reason=None):
        self.lost = True
        self.bridge.link_lost(self, reason)


class _Factory(ClientFactory):
    def __init__(self, bridge: "Bridge"):
        self.bridge = bridge

    def buildProtocol(self, addr):
        protocol = _LinkClient(self.bridge)
        protocol.factory = self
        return protocol

    def clientConnectionFailed(self, connector, reason):
        self.bridge.connect_failed(reason)


class Bridge:
    """The link from one cluster connection to one peer (found by connector, discovery or topology)."""

    def __init__(self, connection, connector, *, node_id: str | None = None, learned_from: str = "static"):
        self.connection = connection
        self.manager = connection.manager
        self.config = connection.config
        self.reactor = connection.manager.reactor
        self.connector = connector
        #: the peer's node id once known (from discovery/topology, or its WELCOME)
        self.node_id = node_id
        self.peer_name = None
        #: the peer's ``<scale-down><group-name>`` (from its WELCOME)
        self.peer_scale_down_group = None
        #: (host, port) of the connector the peer names itself by (from its TOPOLOGY)
        self.peer_connector: tuple[str, int] | None = None
        #: the peer's link protocol version (from its WELCOME)
        self.peer_version = (1, 0)
        self.learned_from = learned_from
        self.state = "new"
        self.problem = None
        self.protocol: _LinkClient | None = None
        self._connector = None
        self._retry_call = None
        self._ping_call = None
        self._attempts = 0
        self._ever_connected = False
        self._last_heard = 0.0
        self.sf_queue = None
        self.consumer: Consumer | None = None
        self._seq = 0
        self._unacked: dict = {}
        #: seq -> when it was sent (call-timeout: how long an acknowledgement may take)
        self._sent_at: dict = {}
        #: seq -> bytes of a large message's content charged to the window beyond its ref's size
        self._extra: dict = {}
        self._nacked_calls: set = set()
        self.messages_sent = 0
        self.messages_acknowledged = 0
        self.stopped = False

    @property
    def target_name(self) -> str:
        return f"{self.connector.host}:{self.connector.port}" + (f" ({self.peer_name})" if self.peer_name else "")

    @property
    def connected(self) -> bool:
        return self.state == "open"

    # -- connecting -------------------------------------------------------------
    def start(self) -> None:
        self.stopped = False
        self._connect()

    def _connect(self) -> None:
        self._retry_call = None
        if self.stopped:
            return
        self.state = "connecting"
        self._attempts += 1
        factory = _Factory(self)
        connecting = factory
        tls = getattr(self.connector, "tls", None)
        if tls is not None:
            from junction.tls.client import wrap_client_factory

            try:
                connecting = wrap_client_factory(factory, tls, self.connector.host, reactor=self.reactor)
            except Exception as exc:
                self._failed(f"TLS: {exc}")
                return
        try:
            self._connector = self.reactor.connectTCP(
                self.connector.host, int(self.connector.port), connecting, timeout=CONNECT_TIMEOUT_S
            )
        except Exception as exc:
            self._failed(str(exc) or type(exc).__name__)

    def connect_failed(self, reason) -> None:
        self._failed(reason.getErrorMessage() if hasattr(reason, "getErrorMessage") else str(reason))

    def _failed(self, problem: str) -> None:
        self.problem = problem
        if self.stopped:
            self.state = "stopped"
            return
        limit = self.config.reconnect_attempts if self._ever_connected else self.config.initial_connect_attempts
        if limit >= 0 and self._attempts > limit:
            self.state = "failed"
            log.warning(
                "cluster connection %s: gave up on %s after %d attempts: %s",
                self.connection.name, self.target_name, self._attempts, problem,
            )
            if self.node_id is not None:
                self.manager.forget_neighbour(self.node_id)
            self.connection.bridge_gave_up(self)
            return
        self.state = "retrying"
        delay = self.config.retry_interval * (self.config.retry_interval_multiplier ** max(0, self._attempts - 1))
        delay = min(delay, self.config.max_retry_interval) / 1000.0
        if self._attempts == 1 or self._attempts % 20 == 0:
            log.info(
                "cluster connection %s: cannot link to %s (%s); retrying every %.1f s",
                self.connection.name, self.target_name, problem, delay,
            )
        self._retry_call = self.reactor.callLater(delay, self._connect)

    def stop(self, reason: str = "node stopping") -> None:
        self.stopped = True
        for call in (self._retry_call, self._ping_call, *self._nacked_calls):
            if call is not None and call.active():
                call.cancel()
        self._retry_call = self._ping_call = None
        self._nacked_calls.clear()
        if self.protocol is not None and not self.protocol.lost:
            self.protocol.send(wire.Goodbye(reason=reason))
            self.protocol.transport.loseConnection()
        elif self._connector is not None and self.state == "connecting":
            try:
                self._connector.stopConnecting()
            except tx_error.NotConnectingError:
                pass
        self.state = "stopped"

    # -- the link -----------------------------------------------------------------
    def link_made(self, protocol: _LinkClient) -> None:
        if self.stopped:
            protocol.transport.loseConnection()
            return
        self.protocol = protocol
        self.state = "handshake"
        self._last_heard = self.reactor.seconds()
        own = self.connection.own_connector
        protocol.send(
            wire.Hello(
                node_id=self.manager.node_id,
                name=self.manager.name,
                cluster=self.connection.name,
                user=self.manager.config.cluster_user,
                password=self.manager.config.cluster_password,
                max_hops=self.config.max_hops,
                host=own.host if own is not None else "",
                port=int(own.port) if own is not None else 0,
            )
        )
        self._schedule_ping()

    def event(self, protocol: _LinkClient, event) -> None:
        self._last_heard = self.reactor.seconds()
        kind = type(event)
        if kind is wire.Welcome:
            self._welcomed(protocol, event)
        elif kind is wire.Refused:
            self.problem = f"refused ({event.code}): {event.reason}"
            if event.code == "duplicate-node-id":
                # nothing a retry can fix: one of the two nodes runs on a copied data directory
                self.state = "refused"
                self.stopped = True
            if self._ever_connected or self._attempts <= 1 or self.state == "refused":
                log.error(
                    "cluster connection %s: %s refused the link: %s", self.connection.name, self.target_name, event.reason
                )
        elif kind is wire.Ack:
            self._acked(event.seqs)
        elif kind is wire.Nack:
            self._nacked(event.seq, event.reason)
        elif kind is wire.Bindings:
            self.manager.bindings_replaced(self.connection.name, self.node_id, event.bindings)
        elif kind is wire.BindingAdded:
            self.manager.binding_added(self.connection.name, self.node_id, event.binding)
        elif kind is wire.BindingRemoved:
            self.manager.binding_removed(self.node_id, event.id)
        elif kind is wire.Consumers:
            self.manager.consumers_changed_remote(self.node_id, event.id, event.count, event.filters)
        elif kind is wire.Topology:
            self.connection.members_learned(event.nodes, self)
        elif kind is wire.Ping:
            protocol.send(wire.Pong())
        elif kind is wire.Record:
            sync = self.manager.config_sync
            if sync is not None:
                sync.record_received([_entry_dict(e) for e in event.entries], event.full)
        elif kind is wire.ChangeResult:
            sync = self.manager.config_sync
            if sync is not None:
                sync.change_result(event.seq, event.ok, event.reason)
        elif kind is wire.Goodbye:
            self.problem = f"the peer closed the link: {event.reason}"

    def _welcomed(self, protocol, event) -> None:
        if event.node_id == self.manager.node_id:
            self.problem = (
                f"the peer at {self.connector.host}:{self.connector.port} has this node's own id {event.node_id}: "
                "one of the two data directories is a copy; give each node its own (delete the copy's "
                "journal directory)"
            )
            log.error("cluster connection %s: refusing to join: %s", self.connection.name, self.problem)
            self.state = "refused"
            self.stopped = True
            protocol.send(wire.Goodbye(reason="duplicate node id"))
            protocol.transport.loseConnection()
            return
        if self.node_id is not None and self.node_id != event.node_id and self.learned_from != "static":
            log.info("cluster connection %s: %s is now node %s", self.connection.name, self.target_name, event.node_id)
        self.node_id = event.node_id
        self.peer_name = event.name
        self.peer_scale_down_group = event.scale_down_group
        try:
            self.peer_version = tuple(int(part) for part in event.version.split(".", 1))
        except ValueError:
            self.peer_version = (1, 0)
        if not self.connection.bridge_opened(self):
            # another bridge already links this node (found twice: connector and topology)
            self.stop("already linked")
            self.state = "duplicate"
            return
        self.state = "open"
        self.problem = None
        self._ever_connected = True
        self._attempts = 0
        log.info("cluster connection %s: linked to %s (node %s)", self.connection.name, self.target_name, event.node_id)
        self.manager.bridge_state(self.node_id, True)
        events = self.manager.server.events
        if events is not None:
            events.link_up(self.connection.name, self.node_id, self.target_name, "out")
        self._attach_consumer()
        if self.manager.config_sync is not None:
            self.manager.config_sync.link_opened(self)

    def send_change(self, seq: int, op: str, entity: dict) -> None:
        """Ask the peer (the master broker) to record a configuration change."""
        if self.protocol is None or self.state != "open" or self.peer_version < (1, 2):
            return
        self.protocol.send(wire.Change(seq=seq, op=op, entity=entity_binding(entity, self.manager.node_id)))

    def _attach_consumer(self) -> None:
        self.sf_queue = self.manager.sf_queue(self.connection.name, self.node_id)
        # bytes sent and not yet confirmed: confirmation-window-size, and producer-window-size
        # when set (Artemis's flow control over the bridge); -1 leaves a window out
        windows = [w for w in (self.config.confirmation_window_size, self.config.producer_window_size) if w > 0]
        self.consumer = Consumer(
            self.sf_queue,
            self._deliver,
            credit_messages=MAX_UNACKED_MESSAGES,
            credit_bytes=min(windows) if windows else None,
        )
        self.sf_queue.add_consumer(self.consumer)

    def _deliver(self, ref) -> None:
        protocol = self.protocol
        message = ref.message
        raw = message.native.get(ROUTE_NATIVE + self.node_id)
        route = ()
        if raw:
            route = tuple((o, q) for o, q in json.loads(raw))
        create = None
        raw = message.native.get(CREATE_NATIVE)
        if raw:
            queue = json.loads(raw)
            create = wire.Binding(
                id=f"{self.manager.node_id}/{queue['name']}", address=queue["address"], queue=queue["name"],
                routing_type=queue["routing_type"], filter=queue["filter"], consumers=0, consumer_filters=None,
                hops=0, origin=self.manager.node_id, durable=queue["durable"], kind=queue.get("kind", ""),
            )
        carry_trace(message, self.manager.node_id)
        out = message.copy()
        out.native = {k: v for k, v in message.native.items() if not k.startswith("cluster.")}
        large = LARGE_KEY in out.native
        body = None
        try:
            if large:
                # the body only this node's file holds goes inline (see large_forward)
                room = MAX_FORWARDED_BYTES - len(encode_message(out))
                large_forward.inline_body(
                    self.manager.server, message, out, room=room, peer_version=self.peer_version
                )
            body = encode_message(out)
            size = len(body)
        except large_forward.TooLarge as exc:
            size = exc.size
        except OSError as exc:
            log.error(
                "cluster connection %s: the large message %s's file cannot be read (%s); dead-lettered",
                self.connection.name, message.message_id, exc,
            )
            self._dead_letter(ref)
            return
        if body is None or size > MAX_FORWARDED_BYTES:
            # It can never cross: dead-letter it rather than jam the link (it would head every retry).
            self._dead_letter(ref)
            log.warning(
                "cluster connection %s: a %smessage of %d bytes cannot be forwarded to %s (the link's limit is %d); "
                "dead-lettered", self.connection.name, "large " if large else "", size, self.target_name,
                MAX_FORWARDED_BYTES,
            )
            return
        self._seq += 1
        seq = self._seq
        self._unacked[seq] = ref
        extra = len(body) - ref.size
        if large and extra > 0 and self.consumer.credit_bytes is not None:
            # the content read from the file counts against the window like any body
            self.consumer.credit_bytes -= extra
            self._extra[seq] = extra
        self._sent_at[seq] = self.reactor.seconds()
        dup = None
        if self.config.use_duplicate_detection:
            incarnation = "" if self.manager.server.storage.persistent else self.manager.boot_id + ":"
            dup = f"{self.manager.node_id}:{incarnation}{message.message_id}".encode()
        self.messages_sent += 1
        protocol.send(wire.MessageFrame(seq=seq, route=route, duplicate_id=dup, body=body, create=create))

    def _dead_letter(self, ref) -> None:
        consumer = self.consumer
        consumer.credit_messages += 1
        if consumer.credit_bytes is not None:
            consumer.credit_bytes += ref.size
        self.sf_queue.reject(ref)

    def _acked(self, seqs) -> None:
        queue = self.sf_queue
        for seq in seqs:
            ref = self._unacked.pop(seq, None)
            self._sent_at.pop(seq, None)
            if ref is None:
                continue
            self.messages_acknowledged += 1
            self.manager.forwarded()
            events = self.manager.server.message_events
            if events is not None:
                events.forwarded(ref.message, self.node_id)
            stored = queue.acknowledge(ref)
            if stored is not None:
                quiet_failure(stored)
            extra = self._extra.pop(seq, 0)
            if self.consumer is not None:
                self.consumer.add_credit(1, ref.size + extra)

    def _nacked(self, seq: int, reason: str) -> None:
        self._sent_at.pop(seq, None)
        extra = self._extra.pop(seq, 0)
        ref = self._unacked.pop(seq, None)
        if ref is None:
            return
        if self.messages_sent < 10 or seq % 1000 == 0:
            log.info("cluster connection %s: %s could not take a message yet: %s", self.connection.name, self.target_name, reason)
        consumer = self.consumer

        def back():
            self._nacked_calls.discard(call)
            if ref.consumer is not None:
                self.sf_queue.cancel(ref, redelivered=False, delay=False)
            if consumer is not None:
                consumer.add_credit(1, ref.size + extra)

        call = self.reactor.callLater(max(self.config.retry_interval, 100) / 1000.0, back)
        self._nacked_calls.add(call)

    def _schedule_ping(self) -> None:
        period = self.config.check_period
        if period <= 0:
            return
        self._ping_call = self.reactor.callLater(period / 1000.0, self._ping)

    def _ping(self) -> None:
        self._ping_call = None
        protocol = self.protocol
        if protocol is None or protocol.lost:
            return
        ttl = self.config.connection_ttl
        if ttl > 0 and self.reactor.seconds() - self._last_heard > ttl / 1000.0:
            log.warning(
                "cluster connection %s: nothing from %s for %d ms (connection-ttl): dropping the link",
                self.connection.name, self.target_name, ttl,
            )
            protocol.transport.abortConnection()
            return
        timeout = self.config.call_timeout
        if timeout > 0 and self._sent_at:
            oldest = next(iter(self._sent_at.values()))
            if self.reactor.seconds() - oldest > timeout / 1000.0:
                log.warning(
                    "cluster connection %s: %s has not confirmed a message for %d ms (call-timeout): "
                    "dropping the link; unconfirmed messages are sent again on the next one",
                    self.connection.name, self.target_name, timeout,
                )
                protocol.transport.abortConnection()
                return
        protocol.send(wire.Ping())
        self._schedule_ping()

    def link_lost(self, protocol: _LinkClient, reason) -> None:
        if protocol is not self.protocol:
            return
        self.protocol = None
        if self._ping_call is not None and self._ping_call.active():
            self._ping_call.cancel()
        self._ping_call = None
        was_open = self.state == "open"
        self._detach_consumer()
        if was_open:
            self.connection.bridge_closed(self)
            self.manager.bridge_state(self.node_id, False)
            log.info("cluster connection %s: link to %s lost", self.connection.name, self.target_name)
            events = self.manager.server.events
            if events is not None:
                why = self.problem or (reason.getErrorMessage() if reason is not None else "connection lost")
                events.link_down(self.connection.name, self.node_id, self.target_name, "out", why)
        if self.state in ("refused", "duplicate") or self.stopped:
            if self.state not in ("refused", "duplicate"):
                self.state = "stopped"
            return
        self._failed(self.problem or (reason.getErrorMessage() if reason is not None else "connection lost"))

    def _detach_consumer(self) -> None:
        consumer, self.consumer = self.consumer, None
        for call in list(self._nacked_calls):
            if call.active():
                call.cancel()
        self._nacked_calls.clear()
        queue = self.sf_queue
        if consumer is None or queue is None:
            return
        # In-flight messages go back unchanged (not a redelivery: the peer may not have seen them).
        for seq in sorted(self._unacked, reverse=True):
            ref = self._unacked[seq]
            if ref.consumer is not None:
                queue.cancel(ref, redelivered=False, delay=False)
        self._unacked.clear()
        self._sent_at.clear()
        self._extra.clear()
        queue.remove_consumer(consumer)

    def status(self) -> dict:
        return {
            "target": f"{self.connector.host}:{self.connector.port}",
            "node_id": self.node_id,
            "name": self.peer_name,
            "state": self.state,
            "problem": self.problem,
            "found_by": self.learned_from,
            "messages_sent": self.messages_sent,
            "messages_acknowledged": self.messages_acknowledged,
            "unacknowledged": len(self._unacked),
            "waiting": self.sf_queue.message_count - len(self._unacked) if self.sf_queue is not None else 0,
        }


def entity_binding(entity: dict, origin: str):
    """A configuration change record entity as the link protocol's Binding."""
    return wire.Binding(
        id=f"{entity.get('kind', '')}/{entity['queue']}", address=entity["address"], queue=entity["queue"],
        routing_type=entity["routing_type"], filter=entity.get("filter"), consumers=0, consumer_filters=None,
        hops=0, origin=origin, durable=bool(entity.get("durable", True)), kind=entity.get("kind", ""),
    )


def binding_entity(binding) -> dict:
    return {
        "queue": binding.queue, "address": binding.address, "routing_type": binding.routing_type,
        "filter": binding.filter, "durable": binding.durable, "kind": binding.kind,
    }


def _entry_dict(entry) -> dict:
    return {"seq": entry.seq, "op": entry.op, "entity": binding_entity(entry.entity)}


__all__ = ["Bridge", "MAX_UNACKED_MESSAGES", "entity_binding", "binding_entity"]
