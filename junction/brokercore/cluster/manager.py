"""The node's cluster: its cluster connections, remote bindings and forwarded messages.

:class:`ClusterManager` is what :class:`~junction.brokercore.server.BrokerServer`
consults when it routes an address that has remote bindings, and what the
bridges (:mod:`.bridge`, outgoing links) and link servers (:mod:`.link_server`,
incoming links) report to.  It keeps:

* the remote bindings every neighbour told us about, one *effective* binding
  per remote queue (the fewest hops);
* one store-and-forward queue per cluster connection and neighbour
  (``$.junction.sf.<cluster>.<node id>``, durable, ANYCAST): a message for
  a remote queue is stored there, in this node's journal, with the list of
  remote queues it is for, until the neighbour confirms it has stored it --
  so nothing acknowledged to a producer is lost when a link or a node fails;
* the incoming links, which it tells about every change of local queues and
  consumers (and of remote bindings within their max-hops budget).

All on the reactor thread; the reactor is injected.
"""

from __future__ import annotations

import json
import logging
import uuid

from junction.brokercore.cluster.bindings import (
    MAX_REMOTE_BINDINGS,
    AddressMatcher,
    RemoteBinding,
    select,
)
from junction.brokercore.cluster.connection import ClusterConnection
from junction.brokercore.cluster.large_forward import store_incoming
from junction.brokercore.cluster.redistribution import Redistribution
from junction.brokercore.queue import QueueDefinition
from junction.config.model import DEFAULT_CLUSTER_PASSWORD, DEFAULT_CLUSTER_USER
from junction.model import errors
from junction.model.message import RoutingType, decode_message

log = logging.getLogger("junction.cluster")

#: name (and address) prefix of store-and-forward queues
SF_PREFIX = "$.junction.sf."
#: Message.native key prefix: the remote queues a stored-and-forwarded copy is for
ROUTE_NATIVE = "cluster.route."
#: address under which duplicate ids of forwarded messages are remembered, + the sender's node id
BRIDGE_DUP_PREFIX = "$.junction.bridge."


def sf_queue_name(cluster: str, node_id: str) -> str:
    return f"{SF_PREFIX}{cluster}.{node_id}"


class ClusterManager:
    """Every cluster connection of one node and the state they share."""

    def __init__(
        self, server, config, *, node_id: str, reactor, connectors: dict | None = None, discovery_groups=None,
        data_directory: str | None = None,
    ):
        self.server = server
        self.config = config
        self.node_id = node_id
        self.name = config.name
        self.reactor = reactor
        self.connectors = connectors if connectors is not None else {c.name: c for c in config.connectors}
        #: name -> DiscoveryGroup, shared with broadcast users (gateway pools)
        self.discovery_groups = discovery_groups if discovery_groups is not None else {}
        #: a fresh id each start: duplicate ids of a node without persistence must not repeat
        self.boot_id = uuid.uuid4().hex[:12]
        self.connections = [ClusterConnection(self, cc) for cc in config.cluster_connections]
        self.redistribution = Redistribution(self)
        #: the master broker's configuration change record, when a cluster connection names one
        self.config_sync = None
        for connection in self.connections:
            master = connection.config.master_broker
            if master is not None and master in self.connectors:
                from junction.brokercore.cluster.master import ConfigurationSync

                self.config_sync = ConfigurationSync(self, connection, self.connectors[master], data_directory or ".")
                break
        self._matchers = [(AddressMatcher(c.config.address), c) for c in self.connections]
        #: (origin, queue) -> {via: RemoteBinding}
        self._remote: dict = {}
        #: (origin, queue) -> the binding routing uses (fewest hops, connected first)
        self.effective: dict = {}
        #: address -> effective bindings on it
        self.by_address: dict = {}
        self._positions: dict = {}
        #: (via node id, protocol binding id) -> (origin, queue)
        self._ids: dict = {}
        #: incoming links (LinkServerProtocol) that completed their handshake
        self.links: set = set()
        #: auto-created local queues that have had a consumer: only those are told to peers
        self.consumed_auto: set = set()
        #: neighbour node id -> the call that drops its temporary queues' bindings (link down)
        self._temporary_expiry: dict = {}
        self.started = False
        #: a graceful stop is moving every message to a peer: links are not taken
        self.scaling_down = False
        self.messages_forwarded = 0
        self.messages_received = 0
        self.messages_redistributed = 0
        self.duplicates_dropped = 0
        self._dropped_bindings_logged = False

    # -- lifecycle --------------------------------------------------------------
    def start(self) -> None:
        self.server.cluster = self
        self.started = True
        if (self.connections or self.config.cluster_credentials_source is not None) and self._default_credentials():
            source = self.config.cluster_credentials_source
            where = f"{self.config.config_path}:{source[1]}: " if source else ""
            log.warning(
                "%sthe cluster user and password are Artemis's defaults (%s / %s): any client that knows "
                "them can join this cluster and read every forwarded message; set <cluster-user> and "
                "<cluster-password> in broker.xml",
                where,
                DEFAULT_CLUSTER_USER,
                DEFAULT_CLUSTER_PASSWORD,
            )
        if self.config_sync is not None:
            self.config_sync.start()
        for connection in self.connections:
            connection.start()

    def stop(self, *, goodbye: str = "node stopping") -> None:
        self.started = False
        self.redistribution.stop()
        for call in self._temporary_expiry.values():
            if call.active():
                call.cancel()
        self._temporary_expiry.clear()
        for connection in self.connections:
            connection.stop()
        for link in list(self.links):
            link.close(goodbye)

    def _default_credentials(self) -> bool:
        return self.config.cluster_user == DEFAULT_CLUSTER_USER or self.config.cluster_password == DEFAULT_CLUSTER_PASSWORD

    def check_credentials(self, user: str, password: str) -> bool:
        import hmac

        return hmac.compare_digest(user.encode(), self.config.cluster_user.encode()) and hmac.compare_digest(
            password.encode(), self.config.cluster_password.encode()
        )

    def connection_named(self, name: str):
        for connection in self.connections:
            if connection.name == name:
                return connection
        return None

    def connection_for(self, address: str):
        """The first cluster connection whose ``address`` matches (Artemis: overlaps are the user's problem)."""
        for matcher, connection in self._matchers:
            if matcher(address):
                return connection
        return None

    # -- routing (called by BrokerServer) -------------------------------------------
    def select(self, address, message, routing_type) -> list:
        """Local queues and store-and-forward queues for a message to ``address``."""
        remote = self.by_address.get(address.name, ())
        connection = self.connection_for(address.name)
        mode = connection.config.message_load_balancing if connection is not None else "OFF"
        positions = self._positions.setdefault(address.name, {})
        preferred = bool(self.server.settings_for(address.name).local_delivery_preferred)
        queues, bindings = select(address, remote, message, routing_type, mode, positions, local_preferred=preferred)
        if bindings:
            self._add_forwards(message, bindings, queues)
        return queues

    def _add_forwards(self, message, bindings, queues: list) -> None:
        routes: dict = {}
        for binding in bindings:
            routes.setdefault((binding.cluster, binding.via), []).append([binding.origin, binding.queue])
        for (cluster, via), route in routes.items():
            sf = self.sf_queue(cluster, via)
            message.native[ROUTE_NATIVE + via] = json.dumps(route).encode()
            if sf not in queues:
                queues.append(sf)

    def serves_anycast(self, address: str) -> bool:
        """Another node has an ANYCAST queue on ``address`` that routing here may send to.

        Then a send here does not auto-create a local queue: the destination
        exists in the cluster (seed 003: a destination is created on the
        producer's home broker only when it does not exist).
        """
        remote = self.by_address.get(address)
        if not remote:
            return False
        connection = self.connection_for(address)
        if connection is None or connection.config.message_load_balancing not in ("STRICT", "ON_DEMAND"):
            return False
        return any(b.routing_type == RoutingType.ANYCAST for b in remote)

    def sf_queue(self, cluster: str, via: str):
        name = sf_queue_name(cluster, via)
        queue = self.server.queues.get(name)
        if queue is None:
            queue = self.server.create_queue(
                QueueDefinition(name=name, address=name, routing_type=RoutingType.ANYCAST, durable=True)
            )
        return queue

    def forward_in(self, message, bindings, tx) -> None:
        """Store ``message`` for ``bindings`` within the storage transaction ``tx`` (redistribution)."""
        queues: list = []
        self._add_forwards(message, bindings, queues)
        self.server.post_office.deliver_to_queues(message, queues, tx=tx)

    # -- remote bindings (reported by bridges) -------------------------------------
    def bindings_replaced(self, cluster: str, via: str, bindings) -> None:
        stale = [key for (v, _id), key in self._ids.items() if v == via]
        for (v, bid) in [k for k in self._ids if k[0] == via]:
            del self._ids[(v, bid)]
        for key in stale:
            self._drop(key, via)
        for binding in bindings:
            self.binding_added(cluster, via, binding)

    def binding_added(self, cluster: str, via: str, binding) -> None:
        if binding.origin == self.node_id:
            return  # our own queue, come back round a ring
        connection = self.connection_named(cluster)
        if connection is None or not AddressMatcher(connection.config.address)(binding.address):
            return
        key = (binding.origin, binding.queue)
        if len(self._ids) >= MAX_REMOTE_BINDINGS and (via, binding.id) not in self._ids:
            if not self._dropped_bindings_logged:
                log.warning("more than %d remote bindings: further ones are ignored", MAX_REMOTE_BINDINGS)
                self._dropped_bindings_logged = True
            return
        try:
            rtype = RoutingType[binding.routing_type]
        except KeyError:
            return
        old_key = self._ids.get((via, binding.id))
        if old_key is not None and old_key != key:
            self._drop(old_key, via)
        self._ids[(via, binding.id)] = key
        remote = RemoteBinding(
            origin=binding.origin,
            via=via,
            address=binding.address,
            queue=binding.queue,
            routing_type=rtype,
            filter_text=binding.filter,
            consumers=binding.consumers,
            consumer_filters=binding.consumer_filters,
            hops=binding.hops + 1,
            durable=binding.durable,
            kind=getattr(binding, "kind", ""),
        )
        remote.cluster = cluster
        remote.connected = connection.bridge_connected(via)
        self._remote.setdefault(key, {})[via] = remote
        self._recompute(key)
        if remote.kind == "admin":
            self._adopt_admin_queue(remote)

    def _adopt_admin_queue(self, remote) -> None:
        """An administrator's queue on another node exists on every node (seed 003)."""
        server = self.server
        if remote.queue in server.queues:
            return
        try:
            server.create_queue(
                QueueDefinition(
                    name=remote.queue,
                    address=remote.address,
                    routing_type=remote.routing_type,
                    filter=remote.filter_text,
                    durable=remote.durable,
                )
            )
        except errors.BrokerError as exc:
            log.warning("cluster: could not create %s, an administrator's queue on node %s: %s", remote.queue, remote.origin, exc)
            return
        log.info("cluster: created queue %s on %s, as on node %s (created there by an administrator)",
                 remote.queue, remote.address, remote.origin)

    def binding_removed(self, via: str, binding_id: str) -> None:
        key = self._ids.pop((via, binding_id), None)
        if key is None:
            return
        remote = self._remote.get(key, {}).get(via)
        self._drop(key, via)
        if remote is not None and remote.kind == "admin" and remote.origin == via:
            self._forget_admin_queue(remote)

    def _forget_admin_queue(self, remote) -> None:
        """An administrator destroyed a queue on its node: it goes on every node (seed 003)."""
        from junction.brokercore.cluster.link_server import queue_kind

        queue = self.server.queues.get(remote.queue)
        if queue is None or queue_kind(queue) != "admin" or queue.address != remote.address:
            return
        if any(not getattr(c, "internal", False) for c in queue.consumers):
            log.warning("cluster: queue %s was destroyed on node %s, but has consumers here: kept", remote.queue, remote.origin)
            return
        self.server.destroy_queue(remote.queue)
        log.info("cluster: destroyed queue %s, as on node %s (destroyed there by an administrator)", remote.queue, remote.origin)

    def consumers_changed_remote(self, via: str, binding_id: str, count: int, filters) -> None:
        key = self._ids.get((via, binding_id))
        if key is None:
            return
        remote = self._remote.get(key, {}).get(via)
        if remote is None:
            return
        remote.set_consumers(count, filters)
        self._recompute(key)

    def bridge_state(self, via: str, connected: bool) -> None:
        """The bridge to ``via`` connected or lost its link: its bindings follow.

        The temporary queues of a node whose link is down go after the cluster
        connection's ``connection-ttl``: their connection is presumed gone with
        its node (seed 003: a client that does not reconnect within the window).
        """
        for key, vias in list(self._remote.items()):
            remote = vias.get(via)
            if remote is not None and remote.connected != connected:
                remote.connected = connected
                self._recompute(key)
        pending = self._temporary_expiry.pop(via, None)
        if pending is not None and pending.active():
            pending.cancel()
        if not connected and self.started:
            window = min((c.config.connection_ttl for c in self.connections), default=60_000)
            self._temporary_expiry[via] = self.reactor.callLater(
                max(window, 0) / 1000.0, self._drop_temporary, via
            )

    def _drop_temporary(self, via: str) -> None:
        self._temporary_expiry.pop(via, None)
        for (v, bid), key in list(self._ids.items()):
            if v != via:
                continue
            remote = self._remote.get(key, {}).get(via)
            if remote is not None and remote.kind == "temporary" and not remote.connected:
                del self._ids[(v, bid)]
                self._drop(key, via)
                log.info("cluster: temporary queue %s of node %s dropped: its link stayed down", remote.queue, remote.origin)

    def forget_neighbour(self, via: str) -> None:
        """The bridge to ``via`` gave up: its bindings go."""
        for k in [k for k in self._ids if k[0] == via]:
            key = self._ids.pop(k)
            self._drop(key, via)

    def _drop(self, key, via) -> None:
        vias = self._remote.get(key)
        if vias is None:
            return
        vias.pop(via, None)
        if not vias:
            del self._remote[key]
        self._recompute(key)

    def _recompute(self, key) -> None:
        vias = self._remote.get(key)
        old = self.effective.get(key)
        new = None
        if vias:
            new = min(vias.values(), key=lambda b: (not b.connected, b.hops, b.via))
        if old is not None:
            lst = self.by_address.get(old.address)
            if lst is not None:
                try:
                    lst.remove(old)
                except ValueError:
                    pass
                if not lst:
                    del self.by_address[old.address]
                    self._positions.pop(old.address, None)
        if new is None:
            self.effective.pop(key, None)
        else:
            self.effective[key] = new
            self.by_address.setdefault(new.address, []).append(new)
        self.server.remote_bindings_changed()
        for link in list(self.links):
            link.refresh(key)
        if self.started:
            for address in {b.address for b in (old, new) if b is not None}:
                self.redistribution.remote_changed(address)

    # -- local changes (reported by BrokerServer) --------------------------------
    def local_queue_changed(self, queue) -> None:
        """A local queue came, went, or its consumers changed: tell the links."""
        if queue.name.startswith(SF_PREFIX):
            return
        if queue.deleted:
            self.consumed_auto.discard(queue.name)
        elif queue.definition.auto_created and any(not getattr(c, "internal", False) for c in queue.consumers):
            self.consumed_auto.add(queue.name)
        key = (self.node_id, queue.name)
        for link in list(self.links):
            link.refresh(key)
        if self.started:
            if queue.deleted:
                self.redistribution.cancel(queue.name)
            else:
                self.redistribution.consider(queue)

    def advertised_keys(self) -> list:
        """Every binding key a link could be told about."""
        keys = [(self.node_id, q.name) for q in self.server.queues.values() if not q.name.startswith(SF_PREFIX)]
        keys.extend(self.effective)
        return keys

    # -- incoming messages (from link servers) ----------------------------------------
    def message_received(self, sender: str, frame, *, behind_stores: bool = False):
        """Store one forwarded message; the Deferred of its journal transaction, or None when already safe.

        Raises :class:`junction.model.errors.BrokerError` when it cannot be
        taken now (the sender keeps it and tries again later).  ``behind_stores``:
        earlier messages of the same link are still being journaled, so this one
        goes through the journal too, to reach its queues after them (in order).
        """
        server = self.server
        post_office = server.post_office
        dup_key = None
        if frame.duplicate_id is not None:
            dup_key = (BRIDGE_DUP_PREFIX + sender, bytes(frame.duplicate_id))
            if dup_key in post_office.duplicates:
                self.duplicates_dropped += 1
                return None
        message = decode_message(frame.body)
        message.message_id = 0
        large_file = store_incoming(server, message)  # an inline large body: a file of this node's
        try:
            return self._store_received(message, frame, dup_key, behind_stores)
        except BaseException:
            if large_file is not None:
                server.large_messages.delete(large_file)
            raise

    def _store_received(self, message, frame, dup_key, behind_stores: bool):
        server = self.server
        post_office = server.post_office
        create = getattr(frame, "create", None)
        if create is not None and create.queue not in server.queues:
            # scale-down: the queue comes along with its messages
            server.create_queue(
                QueueDefinition(
                    name=create.queue,
                    address=create.address,
                    routing_type=RoutingType[create.routing_type],
                    filter=create.filter,
                    durable=create.durable,
                    # as it was on the node scaling down: an auto-created queue stays one
                    auto_created=create.kind == "auto",
                    subscription=create.kind == "subscription",
                )
            )
        for k in [k for k in message.native if k.startswith(ROUTE_NATIVE)]:
            del message.native[k]
        queues: list = []
        forwards: list = []
        for origin, name in frame.route:
            if origin == self.node_id:
                queue = server.queues.get(name)
                if queue is not None and not queue.deleted and queue not in queues:
                    queues.append(queue)
            else:
                binding = self.effective.get((origin, name))
                if binding is not None:
                    forwards.append(binding)
        if forwards:
            self._add_forwards(message, forwards, queues)
        if not queues:
            # The queues it was for are gone: route here as if a client sent it, locally.
            address, queues = post_office.prepare_route(message, routing_type=message.routing_type, local_only=True)
        for queue in queues:
            address = server.addresses.get(queue.address)
            if address is not None and not queue.name.startswith(SF_PREFIX):
                policy = "PAGE" if address.paging else post_office.address_full(address, message.encoded_size())
                if policy in ("FAIL", "BLOCK", "PAGE"):
                    raise errors.AddressFullError(f"address {address.name} is full", address.name)
        self.messages_received += 1
        if not queues:
            if dup_key is not None:
                post_office.remember_id(dup_key[0], dup_key[1])
            post_office._drop_large(message)
            return None
        if not message.durable and not behind_stores:
            # Nothing to wait for: the message is not journaled here (nor was it on the sender);
            # its duplicate id is written without waiting for a sync, like a producer's.
            if dup_key is not None:
                post_office.remember_id(dup_key[0], dup_key[1])
            return post_office.deliver_to_queues(message, queues)
        tx = server.storage.transaction()
        post_office.deliver_to_queues(message, queues, tx=tx)
        if dup_key is not None:
            post_office.remember_id(dup_key[0], dup_key[1], tx=tx)
        return tx.commit(True)

    def scale_down(self, config):
        """Move every message to a peer (graceful stop with scale-down); a Deferred."""
        from junction.brokercore.cluster.scaledown import ScaleDown

        return ScaleDown(self, config).run()

    # -- configuration changes (seed 003's master broker) ----------------------------------
    def guard_change(self, what: str) -> None:
        if self.config_sync is not None:
            self.config_sync.guard(what)

    def changed(self, op: str, queue, kind: str) -> None:
        if self.config_sync is not None:
            from junction.brokercore.cluster.master import entity_of

            self.config_sync.changed(op, entity_of(queue, kind))

    def forwarded(self, count: int = 1) -> None:
        self.messages_forwarded += count

    # -- management -----------------------------------------------------------------
    def status(self) -> dict:
        return {
            "node_id": self.node_id,
            "name": self.name,
            "connections": [c.status() for c in self.connections],
            "incoming_links": sorted(
                ({"node_id": link.peer_node_id, "name": link.peer_name, "remote": link.remote} for link in self.links),
                key=lambda d: d["name"] or "",
            ),
            "remote_bindings": [
                {
                    "address": b.address,
                    "queue": b.queue,
                    "node_id": b.origin,
                    "via": b.via,
                    "routing_type": b.routing_type.name,
                    "filter": b.filter_text,
                    "consumers": b.consumers,
                    "hops": b.hops,
                    "connected": b.connected,
                }
                for b in sorted(self.effective.values(), key=lambda b: (b.address, b.queue, b.origin))
            ],
            "messages_forwarded": self.messages_forwarded,
            "messages_received": self.messages_received,
            "messages_redistributed": self.messages_redistributed,
            "redistributing": self.redistribution.status(),
            "master": self.config_sync.status() if self.config_sync is not None else None,
            "duplicates_dropped": self.duplicates_dropped,
        }


__all__ = ["ClusterManager", "SF_PREFIX", "ROUTE_NATIVE", "sf_queue_name"]
