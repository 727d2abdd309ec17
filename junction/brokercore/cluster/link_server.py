"""The serving side of a cluster link: a peer's bridge connected to one of our acceptors.

It checks the peer (cluster credentials, a node id that is not ours and not
already linked from elsewhere), then tells it which queues this node has --
and, within the peer's ``max-hops``, which remote queues this node can reach
-- with their consumers, keeps it told as they change, and stores the
messages it forwards, acknowledging each once it is safe here.

The wire protocol is :mod:`junction.protocols.cluster.link`.
"""

from __future__ import annotations

import logging

from twisted.internet.protocol import Factory, Protocol

from junction.model import errors
from junction.protocols.cluster import link as wire
from junction.protocols.errors import ProtocolError

log = logging.getLogger("junction.cluster")

#: forwarded messages being stored at once per link before the link stops reading
MAX_PENDING_STORES = 10_000
#: JSON bytes of bindings or record entries put in one BINDINGS or RECORD frame (half the
#: protocol's control-frame limit, so a frame's own keys always fit); the rest follow in more frames
CHUNK_BYTES = 512 * 1024
#: a refused peer retries every few hundred milliseconds: say why once per this many seconds
REFUSAL_LOG_INTERVAL_S = 60.0
#: (peer, refusal code) -> when it was last logged
_REFUSALS_LOGGED: dict = {}


class LinkServerProtocol(Protocol):
    def __init__(self, manager, *, acceptor_name: str = "", reactor=None):
        self.manager = manager
        self.acceptor_name = acceptor_name
        self.reactor = reactor if reactor is not None else manager.reactor
        self.conn = wire.LinkConnection(wire.Role.SERVER)
        self.peer_node_id = None
        self.peer_name = None
        self.peer_host = None
        self.peer_port = 0
        self.max_hops = 1
        self.cluster = None
        #: binding id -> wire.Binding told to the peer
        self.advertised: dict = {}
        self._acks: list = []
        self._ack_call = None
        #: the repeats of TOPOLOGY after the link opens (notification-interval/-attempts)
        self._notify_call = None
        self._pending = 0
        self._paused = False
        self.lost = False
        self.open = False

    @property
    def remote(self) -> str:
        peer = self.transport.getPeer() if self.transport is not None else None
        return f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"

    # -- plumbing -------------------------------------------------------------------
    def send(self, event) -> None:
        if self.lost or self.conn.closed:
            return
        try:
            data = self.conn.send(event)
        except ProtocolError as exc:
            log.error("cluster link from %s: %s", self.remote, exc)
            self.transport.abortConnection()
            return
        self.transport.write(data)

    def dataReceived(self, data: bytes):
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            log.warning("cluster link from %s: the peer broke the protocol: %s", self.remote, exc)
            # Refused before the handshake ends, Goodbye after: the peer learns why
            self.transport.write(self.conn.abort(exc))
            self.transport.loseConnection()
            return
        with self.manager.server.batch_writes():  # one journal batch per read, as every adapter
            for event in events:
                if self.lost:
                    return
                self._event(event)
        if self.conn.closed and not self.lost:
            self.transport.loseConnection()

    def connectionLost(self, reason=None):
        self.lost = True
        for call in (self._ack_call, self._notify_call):
            if call is not None and call.active():
                call.cancel()
        self._ack_call = self._notify_call = None
        if self.open:
            self.manager.links.discard(self)
            log.info("cluster link from %s (%s) closed", self.peer_name, self.remote)
            events = self.manager.server.events
            if events is not None:
                why = reason.getErrorMessage() if reason is not None and hasattr(reason, "getErrorMessage") else None
                events.link_down(self.cluster, self.peer_node_id, self.peer_name, "in", why)

    def close(self, reason: str) -> None:
        if not self.lost:
            self.send(wire.Goodbye(reason=reason))
            self.transport.loseConnection()

    # -- events -------------------------------------------------------------------
    def _event(self, event) -> None:
        kind = type(event)
        if kind is wire.Hello:
            self._hello(event)
        elif kind is wire.MessageFrame:
            self._message(event)
        elif kind is wire.Ping:
            self.send(wire.Pong())
        elif kind is wire.Change:
            self._change(event)
        elif kind is wire.Goodbye:
            pass

    def _refuse(self, code: str, reason: str, peer: str = "") -> None:
        now = self.reactor.seconds()
        key = (peer or self.remote.rsplit(":", 1)[0], code)
        last = _REFUSALS_LOGGED.get(key)
        if last is None or now - last >= REFUSAL_LOG_INTERVAL_S:
            if len(_REFUSALS_LOGGED) >= 10_000:
                _REFUSALS_LOGGED.clear()
            _REFUSALS_LOGGED[key] = now
            log.warning("cluster link from %s refused: %s", self.remote, reason)
        self.send(wire.Refused(code=code, reason=reason))
        self.transport.loseConnection()

    def _hello(self, hello) -> None:
        manager = self.manager
        if not manager.started or manager.scaling_down:
            self._refuse("shutting-down", f"node {manager.name} is not clustering (stopping or starting)")
            return
        if not manager.check_credentials(hello.user, hello.password):
            self._refuse("auth", f"wrong cluster user or password from node {hello.name} ({hello.node_id})", hello.node_id)
            return
        if hello.node_id == manager.node_id:
            self._refuse(
                "duplicate-node-id",
                f"node {hello.name} at {self.remote} has this node's own id {hello.node_id}; one of the two "
                "data directories is a copy -- give each node its own",
            )
            return
        for link in manager.links:
            if link.peer_node_id == hello.node_id and link.cluster == hello.cluster and (
                link.peer_host, link.peer_port) != (hello.host, hello.port):
                self._refuse(
                    "duplicate-node-id",
                    f"node id {hello.node_id} is already linked from {link.peer_host}:{link.peer_port} "
                    f"({link.peer_name}); {hello.name} at {hello.host}:{hello.port} has the same id: "
                    "a copied data directory",
                )
                return
        connection = manager.connection_named(hello.cluster) or (manager.connections[0] if manager.connections else None)
        self.cluster = hello.cluster
        self.peer_node_id = hello.node_id
        self.peer_name = hello.name
        self.peer_host = hello.host
        self.peer_port = hello.port
        self.max_hops = max(0, hello.max_hops)
        scale_down = manager.config.scale_down
        self.send(wire.Welcome(
            node_id=manager.node_id, name=manager.name,
            scale_down_group=scale_down.group_name if scale_down is not None else None,
            version="%d.%d" % wire.VERSION,
        ))
        self.open = True
        manager.links.add(self)
        if manager.server.events is not None:
            manager.server.events.link_up(self.cluster, self.peer_node_id, self.peer_name, "in")
        log.info("cluster link from %s (node %s, %s) open", hello.name, hello.node_id, self.remote)
        self._send_all()
        self.send_topology()
        sync = manager.config_sync
        if sync is not None and sync.is_master:
            self.send_record(sync.full_record(), full=True)
        if connection is not None:
            connection.member_announced(hello.node_id, hello.host, hello.port)
            self._announce_again(connection.config.notification_interval, connection.config.notification_attempts - 1)

    def _announce_again(self, interval_ms: int, remaining: int) -> None:
        """Artemis's notification-interval/-attempts: the topology is told again a few times."""
        if remaining <= 0 or interval_ms <= 0:
            return

        def again():
            self._notify_call = None
            if self.lost or not self.open:
                return
            self.send_topology()
            self._announce_again(interval_ms, remaining - 1)

        self._notify_call = self.reactor.callLater(interval_ms / 1000.0, again)

    # -- bindings -------------------------------------------------------------------
    def _binding_for(self, key):
        """The binding the peer should know for ``key`` now, or None."""
        manager = self.manager
        origin, name = key
        if origin == manager.node_id:
            queue = manager.server.queues.get(name)
            if queue is None or queue.deleted:
                return None
            kind = queue_kind(queue)
            if kind == "auto" and name not in manager.consumed_auto:
                return None  # an auto-created queue is known to the cluster once a consumer asks for it
            consumers = [c for c in queue.consumers if not getattr(c, "internal", False)]
            filters = []
            for consumer in consumers:
                flt = consumer.filter
                if flt is None or getattr(flt, "match_all", False):
                    filters = None
                    break
                filters.append(flt.text)
            return wire.Binding(
                id=f"{origin}/{name}",
                address=queue.address,
                queue=name,
                routing_type=queue.routing_type.name,
                filter=queue.definition.filter,
                consumers=len(consumers),
                consumer_filters=None if filters is None else tuple(filters),
                hops=0,
                origin=origin,
                durable=queue.durable,
                kind=kind,
            )
        remote = manager.effective.get(key)
        if remote is None or remote.hops >= self.max_hops:
            return None
        if remote.origin == self.peer_node_id or remote.via == self.peer_node_id:
            return None
        return wire.Binding(
            id=f"{origin}/{name}",
            address=remote.address,
            queue=remote.queue,
            routing_type=remote.routing_type.name,
            filter=remote.filter_text,
            consumers=remote.consumers,
            consumer_filters=remote.consumer_filters,
            hops=remote.hops,
            origin=origin,
            durable=remote.durable,
            kind=remote.kind,
        )

    def _send_all(self) -> None:
        bindings = []
        self.advertised.clear()
        for key in self.manager.advertised_keys():
            binding = self._binding_for(key)
            if binding is not None and binding.id not in self.advertised:
                self.advertised[binding.id] = binding
                bindings.append(binding)
        # One BINDINGS frame replaces what the peer knew; the rest follow one by one, so a
        # node with many queues (or long filters) never needs a frame over MAX_CONTROL_BYTES.
        chunks = _chunks(bindings, lambda b: wire.encode_binding(b))
        self.send(wire.Bindings(bindings=tuple(chunks[0] if chunks else ())))
        for chunk in chunks[1:]:
            for binding in chunk:
                self.send(wire.BindingAdded(binding=binding))

    def refresh(self, key) -> None:
        """Tell the peer what changed about ``key`` (added, removed or consumers)."""
        if not self.open or self.lost:
            return
        binding = self._binding_for(key)
        bid = f"{key[0]}/{key[1]}"
        old = self.advertised.get(bid)
        if binding is None:
            if old is not None:
                del self.advertised[bid]
                self.send(wire.BindingRemoved(id=bid))
            return
        if old is None:
            self.advertised[bid] = binding
            self.send(wire.BindingAdded(binding=binding))
            return
        if old == binding:
            return
        self.advertised[bid] = binding
        if (old.consumers, old.consumer_filters) != (binding.consumers, binding.consumer_filters) and old == _with_consumers(
            binding, old.consumers, old.consumer_filters
        ):
            self.send(wire.Consumers(id=bid, count=binding.consumers, filters=binding.consumer_filters))
        else:
            self.send(wire.BindingAdded(binding=binding))

    def send_record(self, entries, *, full: bool) -> None:
        """Configuration change record entries (this node is the master broker), to a 1.2 peer."""
        if not self.open or self.lost or (self.conn.peer_version or (1, 0)) < (1, 2):
            return
        from junction.brokercore.cluster.bridge import entity_binding

        records = [
            wire.RecordEntry(seq=e["seq"], op=e["op"], entity=entity_binding(e["entity"], self.manager.node_id))
            for e in entries
        ]
        chunks = _chunks(records, lambda r: wire.encode_binding(r.entity)) or [[]]
        # a full record in several frames: only the last says full (the peer then looks back at all)
        for i, chunk in enumerate(chunks):
            self.send(wire.Record(entries=tuple(chunk), full=full and i == len(chunks) - 1))

    def _change(self, change) -> None:
        from junction.brokercore.cluster.bridge import binding_entity

        sync = self.manager.config_sync
        if sync is None:
            ok, reason = False, f"node {self.manager.name} has no master broker configured"
        else:
            ok, reason = sync.change_requested(self.peer_node_id, change.op, binding_entity(change.entity))
        self.send(wire.ChangeResult(seq=change.seq, ok=ok, reason=reason))

    def send_topology(self) -> None:
        if not self.open or self.lost:
            return
        members = {}
        for connection in self.manager.connections:
            for node_id, name, host, port in connection.members():
                members.setdefault(node_id, wire.Member(node_id=node_id, name=name, host=host, port=port))
        self.send(wire.Topology(nodes=tuple(members.values())))

    # -- messages ---------------------------------------------------------------------
    def _message(self, frame) -> None:
        try:
            stored = self.manager.message_received(self.peer_node_id, frame, behind_stores=self._pending > 0)
        except errors.BrokerError as exc:
            self.send(wire.Nack(seq=frame.seq, reason=str(exc)))
            return
        except Exception as exc:  # a message this node cannot decode or route
            log.error("cluster link from %s: message %d could not be stored: %s", self.peer_name, frame.seq, exc)
            self.send(wire.Nack(seq=frame.seq, reason=f"cannot store: {exc}"))
            return
        if stored is None:
            self._ack(frame.seq)
            return
        self._pending += 1
        if self._pending >= MAX_PENDING_STORES and not self._paused:
            self._paused = True
            self.transport.pauseProducing()
        seq = frame.seq

        def done(_):
            self._stored()
            self._ack(seq)

        def failed(failure):
            self._stored()
            self.send(wire.Nack(seq=seq, reason=f"storage failed: {failure.getErrorMessage()}"))

        stored.addCallbacks(done, failed)

    def _stored(self) -> None:
        self._pending -= 1
        if self._paused and self._pending < MAX_PENDING_STORES // 2 and not self.lost:
            self._paused = False
            self.transport.resumeProducing()

    def _ack(self, seq: int) -> None:
        self._acks.append(seq)
        if self._ack_call is None:
            self._ack_call = self.reactor.callLater(0, self._flush_acks)

    def _flush_acks(self) -> None:
        self._ack_call = None
        acks, self._acks = self._acks, []
        for start in range(0, len(acks), wire.MAX_ACK_SEQS):
            self.send(wire.Ack(seqs=tuple(acks[start:start + wire.MAX_ACK_SEQS])))


def _chunks(items: list, as_json) -> list:
    """``items`` cut into runs whose JSON stays under :data:`CHUNK_BYTES` each."""
    import json

    chunks, current, size = [], [], 0
    for item in items:
        cost = len(json.dumps(as_json(item))) + 64
        if current and size + cost > CHUNK_BYTES:
            chunks.append(current)
            current, size = [], 0
        current.append(item)
        size += cost
    if current:
        chunks.append(current)
    return chunks


def queue_kind(queue) -> str:
    """How a local queue came to be, as cluster peers are told (seed 003's destination kinds)."""
    defn = queue.definition
    if defn.temporary:
        return "temporary"
    if defn.subscription:
        return "subscription"
    if defn.auto_created:
        return "auto"
    return "admin"


def _with_consumers(binding, count, filters):
    import dataclasses

    return dataclasses.replace(binding, consumers=count, consumer_filters=filters)


class LinkServerFactory(Factory):
    """The CLUSTER protocol of an acceptor (recognised by the link preamble)."""

    def __init__(self, manager, *, acceptor=None, reactor=None, **_ignored):
        self.manager = manager
        self.acceptor = acceptor
        self.reactor = reactor

    def buildProtocol(self, addr):
        protocol = LinkServerProtocol(
            self.manager, acceptor_name=getattr(self.acceptor, "name", ""), reactor=self.reactor
        )
        protocol.factory = self
        return protocol


__all__ = ["LinkServerProtocol", "LinkServerFactory", "MAX_PENDING_STORES"]
