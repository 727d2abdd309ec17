"""The broker node: its lifecycle and its registry of addresses and queues.

:class:`BrokerServer` is Artemis's ``ActiveMQServer``: it recovers the node
from the journal and deploys the configured addresses, keeps the registry of
addresses and queues (created, auto-created and deleted per address-settings),
resolves address settings, owns the queues' callbacks (settlement, dead
letters, expiry, auto-delete) and stops it all again.  Where a message goes is
the post office's job (:class:`junction.brokercore.postoffice.PostOffice`,
``server.post_office``): routing, duplicate detection, the address-full policy
and delivery.  Protocol adapters talk to neither directly: they open a
:class:`junction.brokercore.session.ServerSession` per connection (see that
module for what else of the server an adapter may use).

Everything runs on the reactor thread; the reactor -- the node's clock -- is injected.
"""

from __future__ import annotations

import logging
import os

from twisted.internet import defer

from junction.brokercore.address import Address
from junction.brokercore.events import carry_trace
from junction.brokercore.large_lifecycle import own_file, remove_orphans
from junction.brokercore.message_groups import GroupSettings
from junction.brokercore.postoffice import PostOffice
from junction.brokercore.queue import MessageRef, Queue, QueueDefinition
from junction.brokercore.storage import (
    NO_BATCH,
    JournalStorage,
    NullStorage,
    WriteBatch,
    quiet_failure,
)
from junction.brokercore.wildcard import SettingsRepository, WildcardSyntax
from junction.config.model import ADDRESS_SETTINGS_DEFAULTS, BrokerConfig
from junction.model import errors
from junction.model.filter import FilterError, parse_filter
from junction.model.message import ACTUAL_EXPIRY, ORIGINAL_ADDRESS, ORIGINAL_QUEUE, RoutingType

log = logging.getLogger("junction.broker")

#: How often waiting messages are checked for expiry (Artemis
#: ``message-expiry-scan-period`` default).
EXPIRY_SCAN_PERIOD_S = 30.0
#: With message events on, the newest bytes of the journal whose settlements a start reports
#: (``message.settled``): a crash loses the event log's last moments (under a second), and
#: this covers many seconds of a busy node's journal records.
SETTLED_TAIL_BYTES = 16 * 1024 * 1024


class BrokerServer:
    """One broker node's core.  Create, :meth:`start`, hand sessions to protocols."""

    def __init__(self, config: BrokerConfig, *, reactor=None, security=None, journal=None, node_id=None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.node_id = node_id or "00000000-0000-0000-0000-000000000000"
        self.syntax = WildcardSyntax(
            delimiter=config.wildcard_addresses.delimiter,
            any_words=config.wildcard_addresses.any_words,
            single_word=config.wildcard_addresses.single_word,
        )
        self.wildcard_routing = config.wildcard_addresses.routing_enabled
        self.settings = SettingsRepository(config.address_settings, self.syntax, ADDRESS_SETTINGS_DEFAULTS)
        self.settings.add_listener(self._settings_changed)
        self.security = security
        if journal is not None:
            self.storage = JournalStorage(journal)
        else:
            self.storage = NullStorage()
        self._write_batch = WriteBatch(self.storage) if self.storage.persistent else NO_BATCH
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._queues_by_id: dict[int, Queue] = {}
        #: the node's :class:`junction.brokercore.cluster.manager.ClusterManager`, when it has cluster connections
        self.cluster = None
        #: the node's :class:`junction.brokercore.events.BrokerEvents` (None: no event log);
        #: ``message_events`` is its ``messages`` (None unless message events are on)
        self.events = None
        self.message_events = None
        self.sessions: set = set()
        self.started = False
        self._expiry_call = None
        self.start_time = reactor.seconds()
        self.messages_dead_lettered = 0
        self.messages_expired = 0
        #: routing, duplicate detection, the address-full policy and delivery
        self.post_office = PostOffice(self)
        self.acknowledge_ref = self.post_office.settle

    # -- what the post office counts (management) -------------------------------------
    @property
    def messages_routed(self) -> int:
        return self.post_office.messages_routed

    @property
    def messages_dropped(self) -> int:
        return self.post_office.messages_dropped

    @property
    def messages_duplicate(self) -> int:
        return self.post_office.messages_duplicate

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """Recover from the journal, deploy configured addresses, start timers."""
        events = self.message_events
        recovered = self.storage.load(settled_tail_bytes=0 if events is None else SETTLED_TAIL_BYTES)
        self.storage.start()
        self._recover(recovered)
        self.post_office.pager.recover(recovered.page_cursors)
        remove_orphans(self, recovered)
        if events is not None:  # what the delivery audit needs to know of this restart
            paged = [name for name, address in self.addresses.items() if address.paging]
            names = {queue_id: queue.name for queue_id, queue in self._queues_by_id.items() if queue.durable}
            events.restarted(recovered, names, persistent=self.storage.persistent, paged=paged)
        self._deploy_configured()
        self.started = True
        self._expiry_call = self.reactor.callLater(EXPIRY_SCAN_PERIOD_S, self._expiry_scan)

    def stop(self) -> defer.Deferred:
        """Stop timers and flush the journal (in-flight syncs finish first)."""
        self.started = False
        if self._expiry_call is not None and self._expiry_call.active():
            self._expiry_call.cancel()
        self._expiry_call = None
        for session in list(self.sessions):
            session.close()
        return self.post_office.pager.stop().addCallback(lambda _: self.storage.stop())

    def _recover(self, recovered) -> None:
        for record_id, info in recovered.addresses.items():
            types = {RoutingType[name] for name in info["routing_types"]}
            address = self._add_address(info["name"], types, auto_created=info["auto_created"], persist=False)
            address.record_id = record_id
        by_id = {}
        for queue_id, info in recovered.queues.items():
            defn = QueueDefinition(
                name=info["name"],
                address=info["address"],
                routing_type=RoutingType[info["routing_type"]],
                filter=info.get("filter"),
                durable=True,
                max_consumers=info.get("max_consumers", -1),
                purge_on_no_consumers=info.get("purge_on_no_consumers", False),
                exclusive=info.get("exclusive", False),
                auto_created=info.get("auto_created", False),
                user=info.get("user"),
                subscription=info.get("subscription", False),
                groups=GroupSettings.from_record(info.get("groups")),
            )
            if defn.address not in self.addresses:
                self._add_address(defn.address, {defn.routing_type}, auto_created=True, persist=False)
            queue = self._install_queue(defn, queue_id)
            by_id[queue_id] = queue
        restored = 0
        for item in recovered.messages:
            refs = [(by_id[queue_id], count) for queue_id, count in item.refs.items() if queue_id in by_id]
            if self.post_office.restore(item.message, refs):
                restored += 1
        self.post_office.restore_duplicates(recovered.duplicates)
        if recovered.prepared:
            from junction.brokercore.xa import restore_prepared

            restore_prepared(self, recovered.prepared, by_id)
        self.recovered_messages = restored
        if restored or recovered.queues:
            log.info(
                "recovered %d queues and %d messages from the journal%s",
                len(recovered.queues),
                restored,
                " (a torn tail was discarded)" if recovered.torn_tail else "",
            )

    def _deploy_configured(self) -> None:
        from junction.brokercore.deploy import deploy_addresses

        for problem in deploy_addresses(self, self.config.addresses)[1]:
            log.warning("%s", problem)

    # -- what protocol adapters use besides their sessions ----------------------------------
    def batch_writes(self) -> WriteBatch:
        """``with server.batch_writes():`` around the handling of one read of protocol input.

        Every protocol adapter brackets each read this way: the journal
        records of all the messages in the read go out in one write and one
        sync (the writer thread is not woken in the middle of the read), and
        nothing is confirmed before it is synced.  Batches nest.
        """
        return self._write_batch

    def connection_ids(self) -> set:
        """The ids of the client connections holding a session (every acceptor, every protocol)."""
        return {s.connection.id for s in self.sessions}

    def connection_count(self) -> int:
        """How many client connections hold a session now (every acceptor, every protocol)."""
        return len(self.connection_ids())

    # -- scheduling helpers used by queues ------------------------------------------
    def call_soon(self, fn) -> None:
        self.reactor.callLater(0, fn)

    def schedule(self, delay_s: float, fn):
        return self.reactor.callLater(delay_s, fn)

    def now_ms(self) -> int:
        """Epoch milliseconds by the node's clock (the injected reactor)."""
        return int(self.reactor.seconds() * 1000)

    def queue_settings(self, queue: Queue):
        return self.settings_for(queue.address)

    def settings_for(self, name: str):
        """Resolved address settings for an address name (cached per address)."""
        address = self.addresses.get(name)
        if address is None:
            return self.settings.resolve(name)
        if address.settings is None:
            address.settings = self.settings.resolve(name)
        return address.settings

    def _settings_changed(self, *args) -> None:
        for address in self.addresses.values():
            address.settings = None
        post_office = self.post_office
        post_office.topology_changed()
        # new limits (a configuration reload) may leave room: release BLOCKed sends, depage
        for address in self.addresses.values():
            post_office.release_blocked(address)
            if address.page_store is not None:
                post_office.pager.schedule_depage(address)

    # -- addresses and queues --------------------------------------------------------
    def _add_address(self, name, routing_types, *, auto_created, persist) -> Address:
        address = Address(name=name, routing_types=set(routing_types), auto_created=auto_created)
        address.wildcard = self.wildcard_routing and self._has_wildcard(name)
        if persist:
            address.record_id = self.storage.store_address(name, routing_types, auto_created)
        self.addresses[name] = address
        self.post_office.addresses_changed()
        self.post_office.topology_changed()
        return address

    def _has_wildcard(self, name: str) -> bool:
        syntax = self.syntax
        words = name.split(syntax.delimiter)
        return any(w in (syntax.any_words, syntax.single_word) for w in words)

    def create_address(self, name: str, routing_types, *, auto_created=False) -> Address:
        address = self.addresses.get(name)
        if address is None:
            return self._add_address(name, set(routing_types), auto_created=auto_created, persist=True)
        missing = set(routing_types) - address.routing_types
        if missing:
            self.post_office.topology_changed()
            address.routing_types |= missing
            if address.record_id:
                self.storage.delete_address(address.record_id)
            address.record_id = self.storage.store_address(name, address.routing_types, address.auto_created)
        return address

    def declare_address(self, name: str, routing_types) -> tuple[Address, set]:
        """An address ``<addresses>`` declares: created (not journaled: the configuration
        brings it back at each start) or given the routing types it lacks, and no longer
        auto-created.  Returns the address and the routing types it gained."""
        address = self.addresses.get(name)
        if address is None:
            return self._add_address(name, set(routing_types), auto_created=False, persist=False), set(routing_types)
        added = set(routing_types) - address.routing_types
        if added:
            self.post_office.topology_changed()
            address.routing_types |= added
        address.auto_created = False
        return address, added

    def remove_routing_type(self, name: str, routing_type) -> list[str]:
        """Take ``routing_type`` off an address unless queues of that type are bound: their names."""
        address = self.addresses.get(name)
        if address is None or routing_type not in address.routing_types:
            return []
        bound = sorted(q.name for q in address.queues.values() if q.routing_type == routing_type)
        if bound:
            return bound
        self.post_office.topology_changed()
        address.routing_types.discard(routing_type)
        self.post_office.addresses_changed()
        if address.record_id:
            self.storage.delete_address(address.record_id)
            address.record_id = self.storage.store_address(name, address.routing_types, address.auto_created)
        return []

    def delete_address(self, name: str) -> None:
        address = self.addresses.pop(name, None)
        if address is None:
            return
        self.post_office.topology_changed()
        for queue in list(address.queues.values()):
            self.destroy_queue(queue.name)
        if address.record_id:
            self.storage.delete_address(address.record_id)
        self.post_office.addresses_changed()

    def create_queue(self, defn: QueueDefinition) -> Queue:
        """Create a queue (and its address if missing); an existing name is an error."""
        if defn.name in self.queues:
            raise errors.QueueExistsError(f"queue {defn.name} already exists")
        if defn.address not in self.addresses:
            self._add_address(defn.address, {defn.routing_type}, auto_created=defn.auto_created, persist=True)
        address = self.addresses[defn.address]
        if defn.routing_type not in address.routing_types:
            self.post_office.topology_changed()
            address.routing_types.add(defn.routing_type)
        queue_id = self.storage.next_id()
        queue = self._install_queue(defn, queue_id)
        if defn.durable and not defn.temporary:
            self.storage.store_queue(queue_id, defn)
        return queue

    def create_auto_queue(self, name: str, settings) -> Queue:
        """The ANYCAST queue ``auto-create-queues`` makes, named as its address."""
        return self.create_queue(
            QueueDefinition(
                name=name,
                address=name,
                routing_type=RoutingType.ANYCAST,
                durable=True,
                auto_created=True,
                max_consumers=settings.default_max_consumers,
                purge_on_no_consumers=settings.default_purge_on_no_consumers,
                exclusive=settings.default_exclusive_queue,
            )
        )

    def _install_queue(self, defn: QueueDefinition, queue_id: int) -> Queue:
        flt = None
        if defn.filter:
            try:
                flt = parse_filter(defn.filter)
            except FilterError as exc:
                raise errors.InvalidFilterError(f"queue {defn.name}: invalid filter {defn.filter!r}: {exc}") from exc
        queue = Queue(defn, self, queue_id=queue_id, filter=flt)
        self.post_office.topology_changed()
        self.queues[defn.name] = queue
        self._queues_by_id[queue_id] = queue
        self.addresses[defn.address].queues[defn.name] = queue
        if self.cluster is not None:
            self.cluster.local_queue_changed(queue)
        return queue

    def destroy_queue(self, name: str) -> None:
        """Delete a queue and every message on it."""
        queue = self.queues.pop(name, None)
        if queue is None:
            return
        self.post_office.topology_changed()
        self._queues_by_id.pop(queue.id, None)
        for consumer in list(queue.consumers):
            queue.remove_consumer(consumer)
        for ref in queue.drain():
            quiet_failure(self.post_office.settle(ref))
        queue.deleted = True
        address = self.addresses.get(queue.address)
        if address is not None:
            address.queues.pop(name, None)
        if queue.durable and not queue.definition.temporary:
            self.storage.delete_queue(queue.id)
        if self.cluster is not None:
            self.cluster.local_queue_changed(queue)
        if address is not None and address.auto_created and not address.queues:
            self._maybe_auto_delete_address(address)

    def _maybe_auto_delete_address(self, address: Address) -> None:
        """Artemis auto-delete-addresses: an auto-created address goes with its last queue."""
        settings = self.settings_for(address.name)
        if not settings.auto_delete_addresses:
            return

        def delete():
            current = self.addresses.get(address.name)
            if current is address and not address.queues:
                self.delete_address(address.name)

        if settings.auto_delete_addresses_delay > 0:
            self.schedule(settings.auto_delete_addresses_delay / 1000.0, delete)
        else:
            delete()

    def find_queue(self, name: str) -> Queue | None:
        return self.queues.get(name)

    def queue_by_id(self, queue_id: int) -> Queue | None:
        return self._queues_by_id.get(queue_id)

    def resolve_address(self, name: str, routing_type: RoutingType | None, *, auto_create: bool = True) -> Address | None:
        """The address a message or consumer names, auto-created per address-settings."""
        address = self.addresses.get(name)
        settings = self.settings_for(name)
        if address is None:
            if not (auto_create and settings.auto_create_addresses):
                return None
            rtype = routing_type if routing_type is not None else settings.default_address_routing_type
            address = self._add_address(name, {rtype}, auto_created=True, persist=True)
        elif routing_type is not None and routing_type not in address.routing_types:
            if not settings.auto_create_addresses:
                raise errors.InvalidRoutingTypeError(
                    f"address {name} does not support routing type {routing_type.name}"
                )
            self.create_address(name, {routing_type})
        return address

    def guard_cluster_change(self, what: str) -> None:
        """Raise when the cluster cannot record a configuration change now (its master broker is away)."""
        if self.cluster is not None:
            self.cluster.guard_change(what)

    def cluster_changed(self, op: str, queue: Queue, kind: str) -> None:
        """An administrator's destination or a durable subscription was created or destroyed here."""
        if self.cluster is not None:
            self.cluster.changed(op, queue, kind)

    def remote_bindings_changed(self) -> None:
        """The cluster's remote bindings changed: cached routes may be wrong now."""
        self.post_office.topology_changed()

    def consumers_changed(self, queue: Queue) -> None:
        """A consumer came or went on ``queue`` (the cluster tells its peers)."""
        if self.cluster is not None:
            self.cluster.local_queue_changed(queue)

    # -- the queues' callbacks (see Queue) ------------------------------------------------
    #: ``acknowledge_ref(ref, tx=None)``: a queue's consumer is done with ``ref``; the ack's
    #: storage Deferred if one was written.  The post office's ``settle``, bound in __init__
    #: (one call less per acknowledgement).
    acknowledge_ref = None

    def update_delivery_count(self, ref: MessageRef) -> None:
        if ref.persisted:
            self.storage.update_delivery_count(ref.message.message_id, ref.queue.id, ref.delivery_count)

    def dead_letter(self, ref: MessageRef, reason: str) -> None:
        """Move a reference to its dead-letter address (or drop it if none)."""
        settings = self.queue_settings(ref.queue)
        self.messages_dead_lettered += 1
        if self.message_events is not None:
            self.message_events.dead_lettered(ref, reason)
        dla = settings.dead_letter_address
        if dla:
            carry_trace(ref.message, self.node_id)
            copy = ref.message.copy(address=dla, message_id=0)
            own_file(self, copy)
            copy.properties[ORIGINAL_ADDRESS] = ref.message.address
            copy.properties[ORIGINAL_QUEUE] = ref.queue.name
            if settings.auto_create_dead_letter_resources:
                self._ensure_resource_queue(dla, settings.dead_letter_queue_prefix, settings.dead_letter_queue_suffix, ref)
            self.post_office.route_internal(copy, routing_type=None)
            log.info("message %s on %s sent to dead-letter address %s (%s)", ref.message.message_id, ref.queue.name, dla, reason)
        else:
            log.warning(
                "message %s on %s dropped after %s: no dead-letter-address configured",
                ref.message.message_id,
                ref.queue.name,
                reason,
            )
        quiet_failure(self.post_office.settle(ref))

    def expire(self, ref: MessageRef) -> None:
        settings = self.queue_settings(ref.queue)
        self.messages_expired += 1
        if self.message_events is not None:
            self.message_events.expired(ref)
        target = settings.expiry_address
        if target:
            carry_trace(ref.message, self.node_id)
            copy = ref.message.copy(address=target, message_id=0, expiration=0)
            own_file(self, copy)
            copy.properties[ORIGINAL_ADDRESS] = ref.message.address
            copy.properties[ORIGINAL_QUEUE] = ref.queue.name
            copy.properties[ACTUAL_EXPIRY] = self.now_ms()
            if settings.auto_create_expiry_resources:
                self._ensure_resource_queue(target, settings.expiry_queue_prefix, settings.expiry_queue_suffix, ref)
            self.post_office.route_internal(copy)
        quiet_failure(self.post_office.settle(ref))

    def _ensure_resource_queue(self, address: str, prefix: str, suffix: str, ref: MessageRef) -> None:
        """Artemis auto-created DLQ/expiry queues: one per original address, filtered."""
        name = f"{prefix}{ref.message.address}{suffix}"
        if name in self.queues:
            return
        self.create_queue(
            QueueDefinition(
                name=name,
                address=address,
                routing_type=RoutingType.MULTICAST,
                filter="{} = '{}'".format(ORIGINAL_ADDRESS, ref.message.address.replace("'", "''")),
                durable=True,
                auto_created=True,
            )
        )

    def queue_emptied(self, queue: Queue) -> None:
        self._maybe_auto_delete(queue)

    def consumers_gone(self, queue: Queue) -> None:
        if queue.definition.purge_on_no_consumers:
            for ref in queue.drain():
                quiet_failure(self.post_office.settle(ref))
        self._maybe_auto_delete(queue)

    def _maybe_auto_delete(self, queue: Queue) -> None:
        defn = queue.definition
        if queue.deleted or queue.consumers or not defn.auto_created or defn.subscription:
            return
        settings = self.settings_for(queue.address)
        if not settings.auto_delete_queues:
            return
        if not self._under_auto_delete_threshold(queue, settings):
            return
        if settings.auto_delete_queues_delay > 0:
            self.schedule(settings.auto_delete_queues_delay / 1000.0, lambda: self._auto_delete_now(queue))
        else:
            self._auto_delete_now(queue)

    @staticmethod
    def _under_auto_delete_threshold(queue: Queue, settings) -> bool:
        """``auto-delete-queues-message-count``: -1 means any count."""
        threshold = settings.auto_delete_queues_message_count
        return threshold < 0 or queue.message_count <= threshold

    def _auto_delete_now(self, queue: Queue) -> None:
        if queue.deleted or queue.consumers:
            return
        if not self._under_auto_delete_threshold(queue, self.settings_for(queue.address)):
            return
        self.destroy_queue(queue.name)

    # -- periodic -----------------------------------------------------------------------
    def _expiry_scan(self) -> None:
        for queue in list(self.queues.values()):
            queue.expire_scan()
        if self.started:
            self._expiry_call = self.reactor.callLater(EXPIRY_SCAN_PERIOD_S, self._expiry_scan)

    # -- management -----------------------------------------------------------------------
    def status(self) -> dict:
        """The node's state for the management API (documented in docs/management.md)."""
        queues = []
        for queue in self.queues.values():
            queues.append(
                {
                    "name": queue.name,
                    "address": queue.address,
                    "routing_type": queue.routing_type.name,
                    "durable": queue.durable,
                    "temporary": queue.definition.temporary,
                    "filter": queue.definition.filter,
                    "message_count": queue.message_count,
                    "delivering_count": queue.in_flight_count,
                    "consumer_count": len(queue.consumers),
                    "messages_added": queue.messages_added,
                    "messages_acknowledged": queue.messages_acknowledged,
                    "messages_expired": queue.messages_expired,
                    "messages_killed": queue.messages_killed,
                    "group_count": len(queue.groups.table) if queue.groups is not None else 0,
                }
            )
        addresses = []
        for address in self.addresses.values():
            addresses.append(
                {
                    "name": address.name,
                    "routing_types": sorted(rt.name for rt in address.routing_types),
                    "auto_created": address.auto_created,
                    "queues": sorted(address.queues),
                    "size_bytes": address.size,
                    "message_count": address.messages,
                    "blocked_producers": len(address.blocked),
                    "paging": address.paging,
                    "paged_messages": address.page_store.pending_count if address.page_store is not None else 0,
                    "paged_total": address.paged_total,
                    "routed_total": address.routed_total,
                }
            )
        return {
            "node_id": self.node_id,
            "name": self.config.name,
            "version": _version(),
            "uptime_s": round(self.reactor.seconds() - self.start_time, 3),
            "persistence_enabled": self.storage.persistent,
            "journal": self.storage.stats() if self.storage.persistent else None,
            "journal_failed": self.storage.failed,
            "addresses": sorted(addresses, key=lambda a: a["name"]),
            "queues": sorted(queues, key=lambda q: q["name"]),
            "sessions": len(self.sessions),
            "messages_routed": self.messages_routed,
            "messages_dropped": self.messages_dropped,
            "messages_duplicate": self.messages_duplicate,
            "messages_dead_lettered": self.messages_dead_lettered,
            "messages_expired": self.messages_expired,
            "duplicate_ids": len(self.post_office.duplicates),
            "pid": os.getpid(),
        }


def _version() -> str:
    from junction import __version__

    return __version__


__all__ = ["BrokerServer"]
