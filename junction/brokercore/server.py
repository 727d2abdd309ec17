"""The broker node: addresses, queues, routing, persistence and recovery.

:class:`BrokerServer` is Artemis's ``ActiveMQServer`` + ``PostOffice`` in one
place: it owns the address and queue registry, routes each message to the
queues bound to its address (ANYCAST: one queue, round-robin; MULTICAST: every
queue whose filter matches; wildcard addresses included), enforces address
settings (auto-create, limits and the address-full policy, dead-letter and
expiry addresses, duplicate detection) and drives the journal through
:mod:`junction.brokercore.storage`.  Protocol sessions talk to it only through
:class:`junction.brokercore.session.ServerSession`.

Everything runs on the reactor thread; the reactor is injected.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from twisted.internet import defer

from junction.brokercore.events import carry_trace
from junction.brokercore.paging import PagePosition, PageStore, find_paged_addresses
from junction.brokercore.queue import MessageRef, Queue, QueueDefinition
from junction.brokercore.storage import JournalStorage, NullStorage, queue_record, quiet_failure
from junction.brokercore.wildcard import SettingsRepository, WildcardSyntax, address_matches
from junction.config.model import ADDRESS_SETTINGS_DEFAULTS, BrokerConfig
from junction.model import errors
from junction.model.filter import FilterError, parse_filter
from junction.model.message import (
    ACTUAL_EXPIRY,
    ORIGINAL_ADDRESS,
    ORIGINAL_QUEUE,
    Message,
    RoutingType,
    decode_message,
    encode_message,
)

log = logging.getLogger("junction.broker")

#: Enum members as module constants: an ``Enum.MEMBER`` lookup costs a
#: descriptor call per use in Python 3.11, and routing does a few per message.
_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST

#: How often waiting messages are checked for expiry (Artemis
#: ``message-expiry-scan-period`` default).
EXPIRY_SCAN_PERIOD_S = 30.0
#: Producers waiting on one full address under the BLOCK policy before new
#: sends fail instead (each protocol session also bounds its own pending sends).
MAX_BLOCKED_SENDS_PER_ADDRESS = 100_000
#: Wildcard-address match results remembered per concrete address.
WILDCARD_CACHE_SIZE = 10_000
#: With message events on, the newest bytes of the journal whose settlements a start reports
#: (``message.settled``): a crash loses the event log's last moments (under a second), and
#: this covers many seconds of a busy node's journal records.
SETTLED_TAIL_BYTES = 16 * 1024 * 1024
#: Paged messages moved back into memory per depage pass (records / bytes).
DEPAGE_BATCH_RECORDS = 500
DEPAGE_BATCH_BYTES = 1024 * 1024

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


@dataclass(eq=False)
class Address:
    """An address with the routing types it supports and the queues bound to it."""

    name: str
    routing_types: set
    auto_created: bool = False
    record_id: int = 0
    queues: dict = field(default_factory=dict)  # name -> Queue
    #: bytes of messages routed here and not yet acknowledged (address limit)
    size: int = 0
    messages: int = 0
    blocked: list = field(default_factory=list)  # Deferreds waiting for space
    anycast_rr: int = 0
    routed_total: int = 0
    wildcard: bool = False
    #: resolved address settings, cached; cleared when the settings change
    settings: object = None
    #: page files of this address (address-full-policy PAGE), once it paged
    page_store: object = None
    page_cursor_record: int = 0
    depaging: bool = False
    depage_scheduled: bool = False
    paged_total: int = 0

    @property
    def paging(self) -> bool:
        """Messages wait in page files: new ones must page too, to keep order."""
        return self.page_store is not None and self.page_store.paging

    def anycast_queues(self):
        return [q for q in self.queues.values() if q.routing_type == _ANYCAST]

    def has_anycast_queue(self) -> bool:
        for q in self.queues.values():
            if q.definition.routing_type == _ANYCAST:
                return True
        return False

    def multicast_queues(self):
        return [q for q in self.queues.values() if q.routing_type == _MULTICAST]


@dataclass
class RouteResult:
    """What became of one sent message (for the sender and for tests)."""

    queues: list
    duplicate: bool = False
    dropped: bool = False
    confirmed: defer.Deferred | None = None


class DuplicateIDCache:
    """The last ``id-cache-size`` (address, duplicate id) pairs seen.

    Artemis keeps one cache per address; one bounded cache for the node keeps
    memory bounded however many addresses exist (documented difference).
    """

    def __init__(self, size: int):
        self.size = size
        self._ids: OrderedDict = OrderedDict()  # (address, id) -> record id

    def __contains__(self, key) -> bool:
        return key in self._ids

    def add(self, key, record_id):
        """Remember ``key``; return the record id of an id that fell out, if any."""
        self._ids[key] = record_id
        if len(self._ids) > self.size:
            _, evicted = self._ids.popitem(last=False)
            return evicted
        return None

    def __len__(self) -> int:
        return len(self._ids)


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
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._queues_by_id: dict[int, Queue] = {}
        self._durable_refs: dict[int, int] = {}
        #: (message id, address) -> queue references holding it (address limits)
        self._address_refs: dict[tuple, int] = {}
        self._wildcard_cache: OrderedDict = OrderedDict()
        #: (address name, routing type asked for) -> (Address, Queue) for a
        #: plain point-to-point route: one unfiltered ANYCAST queue and no
        #: wildcard address matching.  Emptied by every change to addresses
        #: and queues (see _topology_changed); used by prepare_route.
        self._anycast_routes: dict = {}
        self.duplicates = DuplicateIDCache(config.id_cache_size)
        #: the node's :class:`junction.brokercore.cluster.manager.ClusterManager`, when it has cluster connections
        self.cluster = None
        #: the node's :class:`junction.brokercore.events.BrokerEvents` (None: no event log);
        #: ``message_events`` is its ``messages`` (None unless message events are on)
        self.events = None
        self.message_events = None
        self.sessions: set = set()
        self.started = False
        self._expiry_call = None
        self.start_time = time.time()
        self.messages_routed = 0
        self.messages_dropped = 0
        self.messages_duplicate = 0
        self.messages_dead_lettered = 0
        self.messages_expired = 0

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """Recover from the journal, deploy configured addresses, start timers."""
        events = self.message_events
        recovered = self.storage.load(settled_tail_bytes=0 if events is None else SETTLED_TAIL_BYTES)
        self.storage.start()
        self._recover(recovered)
        self._recover_pages(recovered.page_cursors)
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
        stores = [a.page_store.stop() for a in self.addresses.values() if a.page_store is not None]
        d = defer.DeferredList(stores, consumeErrors=True) if stores else defer.succeed(None)
        return d.addCallback(lambda _: self.storage.stop())

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
            )
            if defn.address not in self.addresses:
                self._add_address(defn.address, {defn.routing_type}, auto_created=True, persist=False)
            queue = self._install_queue(defn, queue_id)
            by_id[queue_id] = queue
        restored = 0
        for item in recovered.messages:
            message = item.message
            count = 0
            for queue_id, delivery_count in item.refs.items():
                queue = by_id.get(queue_id)
                if queue is None:
                    continue
                ref = MessageRef(message, queue, delivery_count=delivery_count, persisted=True)
                self._account(queue, ref, +1)
                queue.add(ref)
                count += 1
            if count:
                self._durable_refs[message.message_id] = count
                restored += 1
        for record_id, address, dup_id in recovered.duplicates:
            evicted = self.duplicates.add((address, bytes(dup_id)), record_id)
            if evicted is not None:
                self.storage.delete_duplicate(evicted)
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

    # -- scheduling helpers used by queues ------------------------------------------
    def call_soon(self, fn) -> None:
        self.reactor.callLater(0, fn)

    def schedule(self, delay_s: float, fn):
        return self.reactor.callLater(delay_s, fn)

    def now_ms(self) -> int:
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
        self._topology_changed()
        # new limits (a configuration reload) may leave room: release BLOCKed sends, depage
        for address in self.addresses.values():
            if address.blocked and self.address_full(address, 0) is None:
                waiting, address.blocked = address.blocked, []
                for d in waiting:
                    d.callback(None)
            if address.page_store is not None:
                self._schedule_depage(address)

    # -- addresses and queues --------------------------------------------------------
    def _topology_changed(self) -> None:
        """An address or queue came, went or changed: forget cached routes."""
        self._anycast_routes.clear()

    def _add_address(self, name, routing_types, *, auto_created, persist) -> Address:
        address = Address(name=name, routing_types=set(routing_types), auto_created=auto_created)
        address.wildcard = self.wildcard_routing and self._has_wildcard(name)
        if persist:
            address.record_id = self.storage.store_address(name, routing_types, auto_created)
        self.addresses[name] = address
        self._wildcard_cache.clear()
        self._topology_changed()
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
            self._topology_changed()
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
            self._topology_changed()
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
        self._topology_changed()
        address.routing_types.discard(routing_type)
        self._wildcard_cache.clear()
        if address.record_id:
            self.storage.delete_address(address.record_id)
            address.record_id = self.storage.store_address(name, address.routing_types, address.auto_created)
        return []

    def delete_address(self, name: str) -> None:
        address = self.addresses.pop(name, None)
        if address is None:
            return
        self._topology_changed()
        for queue in list(address.queues.values()):
            self.destroy_queue(queue.name)
        if address.record_id:
            self.storage.delete_address(address.record_id)
        self._wildcard_cache.clear()

    def create_queue(self, defn: QueueDefinition) -> Queue:
        """Create a queue (and its address if missing); an existing name is an error."""
        if defn.name in self.queues:
            raise errors.QueueExistsError(f"queue {defn.name} already exists")
        if defn.address not in self.addresses:
            self._add_address(defn.address, {defn.routing_type}, auto_created=defn.auto_created, persist=True)
        address = self.addresses[defn.address]
        if defn.routing_type not in address.routing_types:
            self._topology_changed()
            address.routing_types.add(defn.routing_type)
        queue_id = self.storage.next_id()
        queue = self._install_queue(defn, queue_id)
        if defn.durable and not defn.temporary:
            self.storage.store_queue(queue_id, defn)
        return queue

    def _install_queue(self, defn: QueueDefinition, queue_id: int) -> Queue:
        flt = None
        if defn.filter:
            try:
                flt = parse_filter(defn.filter)
            except FilterError as exc:
                raise errors.InvalidFilterError(f"queue {defn.name}: invalid filter {defn.filter!r}: {exc}") from exc
        queue = Queue(defn, self, queue_id=queue_id, filter=flt)
        self._topology_changed()
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
        self._topology_changed()
        self._queues_by_id.pop(queue.id, None)
        for consumer in list(queue.consumers):
            queue.remove_consumer(consumer)
        for ref in queue.drain():
            quiet_failure(self._settle(ref))
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

    # -- routing ----------------------------------------------------------------------
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

    def _wildcard_targets(self, name: str) -> list:
        cached = self._wildcard_cache.get(name)
        if cached is not None:
            return cached
        targets = [
            a for a in self.addresses.values() if a.wildcard and a.name != name and address_matches(a.name, name, self.syntax)
        ]
        self._wildcard_cache[name] = targets
        if len(self._wildcard_cache) > WILDCARD_CACHE_SIZE:
            self._wildcard_cache.popitem(last=False)
        return targets

    def select_queues(
        self, address: Address, message: Message, routing_type: RoutingType | None, *, local_only: bool = False
    ) -> list:
        """Queues a message sent to ``address`` goes to (Artemis ``BindingsImpl``).

        When the cluster knows remote queues on the address, the cluster
        connection's load balancing picks among local and remote ones (a
        remote pick is the store-and-forward queue towards its node), unless
        ``local_only``.
        """
        chosen = []
        addresses = (address,)
        if self.wildcard_routing and not address.wildcard:
            targets = self._wildcard_targets(address.name)
            if targets:
                addresses = (address, *targets)
        cluster = self.cluster
        if cluster is not None and not local_only and address.name in cluster.by_address:
            chosen = cluster.select(address, message, routing_type)
            if len(addresses) == 1:
                return chosen
            addresses = addresses[1:]
        if routing_type == _ANYCAST and len(addresses) == 1 and addresses[0] is address and len(address.queues) == 1:
            # One address with one queue (a plain point-to-point queue): the
            # general loop below, without its lists.
            for queue in address.queues.values():
                if queue.definition.routing_type == _ANYCAST and (
                    queue.filter is None or queue.filter.matches(message)
                ):
                    address.anycast_rr = 0  # (anycast_rr + 1) % 1
                    chosen.append(queue)
            return chosen
        for addr in addresses:
            if routing_type in (None, _MULTICAST):
                for queue in addr.queues.values():
                    if queue.routing_type == _MULTICAST and (
                        queue.filter is None or queue.filter.matches(message)
                    ):
                        chosen.append(queue)
            if routing_type in (None, _ANYCAST):
                candidates = [
                    q
                    for q in addr.queues.values()
                    if q.routing_type == _ANYCAST and (q.filter is None or q.filter.matches(message))
                ]
                if candidates:
                    addr.anycast_rr = (addr.anycast_rr + 1) % len(candidates)
                    chosen.append(candidates[addr.anycast_rr])
        return chosen

    def prepare_route(self, message: Message, *, routing_type=None, auto_create=True, local_only=False):
        """Resolve the address, auto-create queues and pick the target queues.

        Returns ``(address, queues)``; raises for a missing address when it
        cannot be auto-created.  Nothing is stored yet.
        """
        name = message.address
        rtype = routing_type if routing_type is not None else message.routing_type
        route = self._anycast_routes.get((name, rtype))
        if route is not None:
            address, queue = route
            if self.addresses.get(name) is address and not queue.deleted:
                # What the steps below would do again: nothing to create, one queue.
                address.anycast_rr = 0
                return address, [queue]
        asked = rtype
        fqqn_queue = None
        if "::" in name:
            name, fqqn_queue = name.split("::", 1)
            message.address = name
        address = self.resolve_address(name, rtype, auto_create=auto_create)
        if address is None:
            raise errors.NonExistentAddressError(f"address {name} does not exist and auto-create-addresses is false")
        if fqqn_queue is not None:
            queue = address.queues.get(fqqn_queue)
            if queue is None:
                raise errors.NonExistentQueueError(f"queue {fqqn_queue} does not exist on address {name}")
            return address, [queue]
        if rtype is None and len(address.routing_types) == 1:
            rtype = next(iter(address.routing_types))
        if rtype == _ANYCAST and not address.has_anycast_queue():
            settings = self.settings_for(name)
            if settings.auto_create_queues and auto_create and not (
                self.cluster is not None and not local_only and self.cluster.serves_anycast(name)
            ):
                self.create_queue(
                    QueueDefinition(
                        name=name,
                        address=name,
                        routing_type=RoutingType.ANYCAST,
                        durable=True,
                        auto_created=True,
                        max_consumers=settings.default_max_consumers,
                        purge_on_no_consumers=settings.default_purge_on_no_consumers,
                    )
                )
        queues = self.select_queues(address, message, rtype, local_only=local_only)
        if (
            not local_only
            and (self.cluster is None or name not in self.cluster.by_address)
            and rtype == _ANYCAST
            and len(queues) == 1
            and len(address.queues) == 1
            and queues[0].filter is None
            and (address.wildcard or not self.wildcard_routing or not self._wildcard_targets(name))
        ):
            # One unfiltered queue and no wildcard address to consider: every
            # message sent this way takes this route until the topology changes.
            self._anycast_routes[(name, asked)] = (address, queues[0])
        return address, queues

    def check_duplicate(self, address_name: str, message: Message) -> bool:
        """True when the message's duplicate id was already seen on this address."""
        dup = message.duplicate_id
        return dup is not None and (address_name, dup) in self.duplicates

    def remember_duplicate(self, address_name: str, message: Message) -> None:
        dup = message.duplicate_id
        if dup is None:
            return
        key = (address_name, dup)
        if key in self.duplicates:
            return
        record_id = self.storage.store_duplicate(address_name, dup) if self.config.persist_id_cache else 0
        evicted = self.duplicates.add(key, record_id)
        if evicted:
            self.storage.delete_duplicate(evicted)

    def remember_id(self, address_name: str, dup_id: bytes, tx=None) -> None:
        """Remember a duplicate id under ``address_name`` (in ``tx`` when given, so it
        commits with the message it guards)."""
        key = (address_name, dup_id)
        if key in self.duplicates:
            return
        record_id = 0
        if self.config.persist_id_cache:
            record_id = tx.store_duplicate(address_name, dup_id) if tx is not None else self.storage.store_duplicate(address_name, dup_id)
        evicted = self.duplicates.add(key, record_id)
        if evicted:
            self.storage.delete_duplicate(evicted)

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
        self._topology_changed()

    def consumers_changed(self, queue: Queue) -> None:
        """A consumer came or went on ``queue`` (the cluster tells its peers)."""
        if self.cluster is not None:
            self.cluster.local_queue_changed(queue)

    def address_full(self, address: Address, size: int) -> str | None:
        """The address-full policy to apply if ``size`` more bytes would exceed the limit."""
        settings = self.settings_for(address.name)
        limit = settings.max_size_bytes
        if limit >= 0 and address.size + size > limit and address.size > 0:
            return settings.address_full_policy
        max_messages = settings.max_size_messages
        if max_messages is not None and max_messages >= 0 and address.messages >= max_messages:
            return settings.address_full_policy
        return None

    def wait_for_space(self, address: Address) -> defer.Deferred:
        """A Deferred that fires when a BLOCKed address has room again."""
        if len(address.blocked) >= MAX_BLOCKED_SENDS_PER_ADDRESS:
            return defer.fail(errors.AddressFullError(f"address {address.name} is full and too many producers wait"))
        d = defer.Deferred()
        address.blocked.append(d)
        return d

    def deliver_to_queues(self, message: Message, queues: list, *, sync: bool | None = None, tx=None):
        """Assign an id, store the message if durable, and add it to the queues.

        Returns a Deferred that fires when the message is safe (journal synced
        for a durable message on a durable queue), or None if nothing waits.
        With ``tx`` the journal records go into that storage transaction and
        the caller commits.
        """
        if not message.timestamp:
            message.timestamp = int(time.time() * 1000)
        settings = self.settings_for(message.address)
        if message.expiration or settings.expiry_delay > 0 or settings.max_expiry_delay > 0:
            # (else _effective_expiration leaves "never" as it is)
            message.expiration = _effective_expiration(message.expiration, self.now_ms(), settings)
        storage = self.storage
        message.message_id = storage.next_id()
        self.messages_routed += 1
        durable_ids = []
        if message.durable and storage.persistent:
            durable_ids = [q.id for q in queues if q.definition.durable and not q.definition.temporary]
        confirmed = None
        if durable_ids:
            if storage.failed:
                raise errors.StorageFailedError(f"the journal failed ({storage.failed}); durable sends are refused")
            if tx is not None:
                tx.store_message(message, durable_ids)
            else:
                if sync is None:
                    sync = self.config.journal_sync_non_transactional
                confirmed = storage.store_message(message, durable_ids, sync)
            self._durable_refs[message.message_id] = len(durable_ids)
        if tx is not None:
            # Invisible until the transaction's commit is durable.
            tx.after_commit.append(lambda: self._add_refs(message, queues, bool(durable_ids)))
        else:
            self._add_refs(message, queues, bool(durable_ids))
        return confirmed

    def _add_refs(self, message: Message, queues: list, stored: bool) -> None:
        size = message.encoded_size()
        for queue in queues:
            if queue.deleted:
                if stored and queue.durable and not queue.definition.temporary:
                    # Deleted while a transaction held the message: release its record.
                    quiet_failure(self._settle(MessageRef(message, queue, persisted=True, size=size), account=False))
                continue
            persisted = stored and queue.definition.durable and not queue.definition.temporary
            ref = MessageRef(message, queue, 0, None, persisted, size)
            self._account_added(queue, ref)
            queue.add(ref)

    def route_internal(self, message: Message, *, routing_type=None) -> None:
        """Route a message the broker itself produces (dead letter, expiry)."""
        try:
            address, queues = self.prepare_route(message, routing_type=routing_type)
        except errors.BrokerError as exc:
            log.warning("could not route internal message to %s: %s", message.address, exc)
            return
        if queues:
            self.deliver_to_queues(message, queues, sync=False)

    def _account_added(self, queue: Queue, ref: MessageRef) -> None:
        """``_account(queue, ref, +1)``, for the routing hot path."""
        address = self.addresses.get(queue.definition.address)
        if address is None:
            return
        key = (ref.message.message_id, address.name)
        address_refs = self._address_refs
        holders = address_refs.get(key, 0) + 1
        address_refs[key] = holders
        address.routed_total += 1
        if holders == 1:
            address.size += ref.size
            address.messages += 1

    def _account(self, queue: Queue, ref: MessageRef, sign: int) -> None:
        """Count a message towards its address's limits once, however many
        queues of the address hold it (Artemis counts per address)."""
        address = self.addresses.get(queue.definition.address)
        if address is None:
            return
        key = (ref.message.message_id, address.name)
        holders = self._address_refs.get(key, 0) + sign
        if holders > 0:
            self._address_refs[key] = holders
        else:
            self._address_refs.pop(key, None)
        if sign > 0:
            address.routed_total += 1
            if holders == 1:
                address.size += ref.size
                address.messages += 1
        elif holders <= 0:
            address.size -= ref.size
            address.messages -= 1
            if address.page_store is not None:
                self._schedule_depage(address)
            if address.blocked and self.address_full(address, 0) is None:
                waiting, address.blocked = address.blocked, []
                for d in waiting:
                    d.callback(None)

    # -- paging (address-full-policy PAGE) ------------------------------------------------
    @property
    def paging_directory(self) -> str:
        directory = self.config.paging_directory
        if os.path.isabs(directory):
            return directory
        return os.path.normpath(os.path.join(self.config.base_dir or ".", directory))

    def _open_page_store(self, address: Address, cursor: PagePosition | None = None) -> PageStore:
        settings = self.settings_for(address.name)
        store = PageStore(
            self.paging_directory,
            address.name,
            page_size_bytes=settings.page_size_bytes,
            reactor=self.reactor,
            sync=self.storage.persistent and self.config.journal_sync_non_transactional,
        )
        store.load(cursor)
        store.start()
        address.page_store = store
        return store

    def page_message(self, address: Address, message: Message, queues: list) -> defer.Deferred:
        """Append a message for ``queues`` to the address's page files.

        Fires once it is on disk (synced for a durable message), which is
        when a producer may be told it is safe.
        """
        now = self.now_ms()
        if not message.timestamp:
            message.timestamp = int(time.time() * 1000)
        message.expiration = _effective_expiration(message.expiration, now, self.settings_for(address.name))
        message.message_id = self.storage.next_id()
        self.messages_routed += 1
        carry_trace(message, self.node_id)  # depaging gives it another number
        store = address.page_store
        if store is None:
            store = self._open_page_store(address)
            log.info("address %s is full: paging to %s", address.name, store.path)
        payload = b"".join(
            [_U32.pack(len(queues))] + [_U64.pack(q.id) for q in queues] + [encode_message(message)]
        )
        sync = message.durable and self.storage.persistent and self.config.journal_sync_non_transactional
        address.paged_total += 1
        return store.append(payload, sync=sync).addCallback(lambda _: None)

    def _schedule_depage(self, address: Address) -> None:
        if address.page_store is None or address.depaging or address.depage_scheduled:
            return
        address.depage_scheduled = True
        self.call_soon(lambda: self._depage(address))

    def _depage(self, address: Address) -> None:
        """Move paged messages into memory while the address has room.

        The messages' journal records and the new page cursor are written in
        one journal transaction, so after a crash each paged message is
        either still in the page files (cursor before it) or in the journal
        (cursor past it), never both and never neither.
        """
        address.depage_scheduled = False
        store = address.page_store
        if store is None or address.depaging or self.addresses.get(address.name) is not address:
            return
        if not store.paging or store.failed or self.address_full(address, 0) is not None:
            return
        settings = self.settings_for(address.name)
        budget = DEPAGE_BATCH_BYTES
        if settings.max_size_bytes >= 0:
            budget = max(1, min(budget, settings.max_size_bytes - address.size))
        records = store.read(DEPAGE_BATCH_RECORDS, budget)
        if not records:
            return
        tx = self.storage.transaction()
        batch = []
        for _position, payload in records:
            count = _U32.unpack_from(payload, 0)[0]
            ids = [_U64.unpack_from(payload, 4 + 8 * i)[0] for i in range(count)]
            message = decode_message(payload[4 + 8 * count :])
            queues = [q for q in (self._queues_by_id.get(i) for i in ids) if q is not None and not q.deleted]
            if not queues:
                continue
            durable_ids = []
            if message.durable and self.storage.persistent:
                durable_ids = [q.id for q in queues if q.durable and not q.definition.temporary]
            if durable_ids:
                tx.store_message(message, durable_ids)
                self._durable_refs[message.message_id] = len(durable_ids)
            batch.append((message, queues, bool(durable_ids)))
        last = records[-1][0]
        address.page_cursor_record = tx.set_page_cursor(address.name, last.to_bytes(), address.page_cursor_record)
        address.depaging = True

        def done(_):
            address.depaging = False
            store.consumed(last)
            for message, queues, stored in batch:
                self._add_refs(message, queues, stored)
            if store.paging:
                self._schedule_depage(address)

        def failed(failure):
            address.depaging = False
            for message, _queues, _stored in batch:
                self._durable_refs.pop(message.message_id, None)
            store.rewind()
            log.error("depaging %s failed: %s", address.name, failure.getErrorMessage())

        tx.commit(True).addCallbacks(done, failed)

    def _recover_pages(self, cursors: dict) -> None:
        directory = self.paging_directory
        if not self.storage.persistent:
            # Without a journal there is no cursor: old page files mean nothing.
            if os.path.isdir(directory):
                shutil.rmtree(directory, ignore_errors=True)
            return
        for name in find_paged_addresses(directory):
            record_id, position = cursors.get(name, (0, None))
            cursor = PagePosition.from_bytes(position) if position else None
            address = self.addresses.get(name)
            if address is None:
                address = self._add_address(name, {RoutingType.ANYCAST}, auto_created=True, persist=True)
            store = self._open_page_store(address, cursor)
            address.page_cursor_record = record_id
            if store.paging:
                log.info("address %s: %d paged messages waiting", name, store.pending_count)
                self._schedule_depage(address)

    # -- settlement (called by queues) ---------------------------------------------------
    def _settle(self, ref: MessageRef, tx=None, account: bool = True):
        """Release a reference; returns the ack's storage Deferred if one was written."""
        if account:
            self._account(ref.queue, ref, -1)
        if not ref.persisted:
            return None
        mid = ref.message.message_id
        remaining = self._durable_refs.get(mid, 1) - 1
        if remaining <= 0:
            self._durable_refs.pop(mid, None)
        else:
            self._durable_refs[mid] = remaining
        if tx is not None:
            tx.ack(mid, ref.queue.id, remaining)
            return None
        return self.storage.ack(mid, ref.queue.id, remaining, sync=False)

    #: ``acknowledge_ref(ref, tx=None)``: a queue's consumer is done with ``ref``
    acknowledge_ref = _settle

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
            copy.properties[ORIGINAL_ADDRESS] = ref.message.address
            copy.properties[ORIGINAL_QUEUE] = ref.queue.name
            if settings.auto_create_dead_letter_resources:
                self._ensure_resource_queue(dla, settings.dead_letter_queue_prefix, settings.dead_letter_queue_suffix, ref)
            self.route_internal(copy, routing_type=None)
            log.info("message %s on %s sent to dead-letter address %s (%s)", ref.message.message_id, ref.queue.name, dla, reason)
        else:
            log.warning(
                "message %s on %s dropped after %s: no dead-letter-address configured",
                ref.message.message_id,
                ref.queue.name,
                reason,
            )
        quiet_failure(self._settle(ref))

    def expire(self, ref: MessageRef) -> None:
        settings = self.queue_settings(ref.queue)
        self.messages_expired += 1
        if self.message_events is not None:
            self.message_events.expired(ref)
        target = settings.expiry_address
        if target:
            carry_trace(ref.message, self.node_id)
            copy = ref.message.copy(address=target, message_id=0, expiration=0)
            copy.properties[ORIGINAL_ADDRESS] = ref.message.address
            copy.properties[ORIGINAL_QUEUE] = ref.queue.name
            copy.properties[ACTUAL_EXPIRY] = self.now_ms()
            if settings.auto_create_expiry_resources:
                self._ensure_resource_queue(target, settings.expiry_queue_prefix, settings.expiry_queue_suffix, ref)
            self.route_internal(copy)
        quiet_failure(self._settle(ref))

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
                quiet_failure(self._settle(ref))
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
            "uptime_s": round(time.time() - self.start_time, 3),
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
            "duplicate_ids": len(self.duplicates),
            "pid": os.getpid(),
        }


def _effective_expiration(expiration: int, now: int, settings) -> int:
    """Artemis's expiry-delay, min-expiry-delay and max-expiry-delay rules."""
    if not expiration:
        if settings.expiry_delay > 0:
            return now + settings.expiry_delay
        if settings.max_expiry_delay > 0:
            return now + settings.max_expiry_delay
        return 0
    if settings.min_expiry_delay > 0 and expiration < now + settings.min_expiry_delay:
        return now + settings.min_expiry_delay
    if settings.max_expiry_delay > 0 and expiration > now + settings.max_expiry_delay:
        return now + settings.max_expiry_delay
    return expiration


def _version() -> str:
    from junction import __version__

    return __version__


__all__ = ["BrokerServer", "Address", "RouteResult", "DuplicateIDCache", "queue_record"]
