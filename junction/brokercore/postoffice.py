"""The post office: where every message goes, decided in one place.

Artemis's ``PostOffice``.  A session hands a message over once
(:meth:`PostOffice.send`, or :meth:`PostOffice.route_transaction` at a
commit) and the post office does the rest:

* **routing** -- the address (auto-created per address-settings), the queues
  bound to it (ANYCAST: one, round-robin; MULTICAST: every queue whose filter
  matches; wildcard addresses and the cluster's remote queues included);
* **duplicate detection** -- ``_AMQ_DUPL_ID`` against the node's id cache
  (``id-cache-size``, ``persist-id-cache``);
* **the address-full policy** -- ``max-size-bytes``/``max-size-messages``
  reached: PAGE to the address's page files, BLOCK the producer until there
  is room, DROP the message or FAIL the send;
* **delivery** -- an id, the timestamp and expiry rules, the journal record of
  a durable message, the references on the queues, and the accounting that
  keeps the address limits, released again as the references settle.

The registry of addresses and queues is the server's
(:class:`junction.brokercore.server.BrokerServer`); the post office reads it
and asks the server to create what a message's route auto-creates.  Time
comes from the server's injected clock.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from functools import partial

from twisted.internet import defer

from junction.brokercore.events import carry_trace, put_after
from junction.brokercore.large_lifecycle import LargeRefs
from junction.brokercore.large_messages import NATIVE_KEY as LARGE_KEY
from junction.brokercore.pager import PagingManager
from junction.brokercore.queue import MessageRef, Queue
from junction.brokercore.storage import quiet_failure
from junction.brokercore.wildcard import address_matches
from junction.model import errors
from junction.model.message import DUPLICATE_ID, Message, RoutingType

__all__ = ["PostOffice", "DuplicateIDCache", "effective_expiration"]

log = logging.getLogger("junction.broker")

#: Enum members as module constants: an ``Enum.MEMBER`` lookup costs a
#: descriptor call per use in Python 3.11, and routing does a few per message.
_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST

#: Producers waiting on one full address under the BLOCK policy before new
#: sends fail instead (each protocol session also bounds its own pending sends).
MAX_BLOCKED_SENDS_PER_ADDRESS = 100_000
#: Wildcard-address match results remembered per concrete address.
WILDCARD_CACHE_SIZE = 10_000


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


class PostOffice:
    """Routing, duplicate detection, the address-full policy and delivery of one node."""

    def __init__(self, server):
        self.server = server
        # The registry and the settings, read on every message: bound once.
        self.addresses = server.addresses
        self.settings = server.settings
        self.settings_for = server.settings_for
        self.now_ms = server.now_ms
        self._seconds = server.reactor.seconds
        self.storage = server.storage
        self.config = server.config
        self.syntax = server.syntax
        self.wildcard_routing = server.wildcard_routing
        self.duplicates = DuplicateIDCache(server.config.id_cache_size)
        self.pager = PagingManager(server, self)
        #: message id -> durable queue references holding its journal record
        self.durable_refs: dict[int, int] = {}
        #: references per large-message file: the file goes with the last
        self.large_refs = LargeRefs(server)
        #: (message id, address) -> queue references holding it (address limits)
        self._address_refs: dict[tuple, int] = {}
        self._wildcard_cache: OrderedDict = OrderedDict()
        #: (address name, routing type asked for) -> (Address, Queue) for a
        #: plain point-to-point route: one unfiltered ANYCAST queue and no
        #: wildcard address matching.  Emptied by every change to addresses
        #: and queues (see topology_changed); used by prepare_route.
        self._anycast_routes: dict = {}
        self.messages_routed = 0
        self.messages_dropped = 0
        self.messages_duplicate = 0

    # -- what sessions hand over --------------------------------------------------------
    def send(self, message: Message, routing_type: RoutingType | None, sender) -> defer.Deferred | None:
        """Route (or page, or hold) one message ``sender`` sends outside a transaction.

        Returns the Deferred that fires once the message is safe (synced if
        durable), or None when it already is (nothing stored, not durable,
        dropped, a duplicate).  Routing errors and the FAIL policy raise a
        :class:`junction.model.errors.BrokerError`.  Under BLOCK the send
        waits for space and runs again then; ``sender.hold_later_sends(d)`` is told
        of the Deferred, so the session keeps its later sends behind it.
        """
        address, queues = self.prepare_route(message, routing_type=routing_type)
        if DUPLICATE_ID in message.properties and self.check_duplicate(address.name, message):
            self.messages_duplicate += 1
            log.info("duplicate message %r on %s ignored", message.duplicate_id, address.name)
            self._drop_large(message)
            return None
        policy = "PAGE" if address.paging else self.address_full(address, message.encoded_size())
        if policy is None:
            return self.route(message, sender, address, queues)
        if policy == "PAGE":
            self.remember_duplicate(address.name, message)
            if not queues:
                return self.route(message, sender, address, queues)
            events = self.server.message_events
            paged = self._page(address, message, queues)
            # after _page, which gives the message its id (and trace id)
            entry = None if events is None else events.sent_entry(message, queues, sender)
            if entry is not None:
                paged.addCallback(put_after, events.put, entry)
            return paged
        if policy == "FAIL":
            settings = self.settings_for(address.name)
            raise errors.AddressFullError(
                f"address {address.name} is full ({address.size} of max-size-bytes "
                f"{settings.max_size_bytes}, {address.messages} of max-size-messages "
                f"{settings.max_size_messages}; address-full-policy FAIL)",
                address.name,
            )
        if policy == "DROP":
            self.messages_dropped += 1
            self._drop_large(message)
            return None
        # BLOCK: hold this producer until the address has room, then try again.
        waiting = self.wait_for_space(address)
        result = defer.Deferred()

        def retry(_):
            inner = defer.maybeDeferred(self.send, message, routing_type, sender)
            inner.chainDeferred(result)

        waiting.addCallbacks(retry, result.errback)
        sender.hold_later_sends(result)
        return result

    def route_transaction(self, sends: list, sender, storage_tx) -> None:
        """Route a transaction's ``(message, routing type)`` sends into ``storage_tx``.

        All or nothing: every destination is resolved before anything is
        routed, so a send that cannot be routed (it raises) leaves the queues
        untouched.  The messages reach their queues when ``storage_tx`` commits.
        """
        routes = [
            (message, *self.prepare_route(message, routing_type=routing_type)) for message, routing_type in sends
        ]
        for message, address, queues in routes:
            if self.check_duplicate(address.name, message):
                self.messages_duplicate += 1
                self._drop_large(message)
                continue
            self.route(message, sender, address, queues, storage_tx)

    def route(self, message: Message, sender, address, queues: list, storage_tx=None):
        """Deliver one routed message: the Deferred of its journal record, or None if nothing waits."""
        if DUPLICATE_ID in message.properties:
            self.remember_duplicate(address.name, message)
        if not queues:
            settings = self.settings.resolve(address.name)
            if settings.send_to_dla_on_no_route and settings.dead_letter_address:
                self.route_internal(message.copy(address=settings.dead_letter_address))
            else:
                self.messages_dropped += 1
                self._drop_large(message)
            return None
        confirmed = self.deliver_to_queues(message, queues, tx=storage_tx)
        events = self.server.message_events
        if events is not None:
            # stamped now, written once the producer may be told: after the commit, or the journal sync
            entry = events.sent_entry(message, queues, sender)
            if entry is None:
                pass
            elif storage_tx is not None:
                storage_tx.after_commit.append(partial(events.put, entry))
            elif confirmed is None:
                events.put(entry)
            else:
                events.put_when_stored(entry, confirmed)
        return confirmed

    def route_internal(self, message: Message, *, routing_type=None) -> None:
        """Route a message the broker itself produces (dead letter, expiry)."""
        try:
            address, queues = self.prepare_route(message, routing_type=routing_type)
        except errors.BrokerError as exc:
            log.warning("could not route internal message to %s: %s", message.address, exc)
            return
        if queues:
            self.deliver_to_queues(message, queues, sync=False)

    # -- routing ----------------------------------------------------------------------------
    def topology_changed(self) -> None:
        """An address or queue came, went or changed: forget cached routes."""
        self._anycast_routes.clear()

    def addresses_changed(self) -> None:
        """An address came, went or lost a routing type: forget wildcard matches."""
        self._wildcard_cache.clear()

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
        self, address, message: Message, routing_type: RoutingType | None, *, local_only: bool = False
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
        cluster = self.server.cluster
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
        server = self.server
        asked = rtype
        fqqn_queue = None
        if "::" in name:
            name, fqqn_queue = name.split("::", 1)
            message.address = name
        address = server.resolve_address(name, rtype, auto_create=auto_create)
        if address is None:
            raise errors.NonExistentAddressError(f"address {name} does not exist and auto-create-addresses is false")
        if fqqn_queue is not None:
            queue = address.queues.get(fqqn_queue)
            if queue is None:
                raise errors.NonExistentQueueError(f"queue {fqqn_queue} does not exist on address {name}")
            return address, [queue]
        if rtype is None and len(address.routing_types) == 1:
            rtype = next(iter(address.routing_types))
        cluster = server.cluster
        if rtype == _ANYCAST and not address.has_anycast_queue():
            settings = self.settings_for(name)
            if settings.auto_create_queues and auto_create and not (
                cluster is not None and not local_only and cluster.serves_anycast(name)
            ):
                server.create_auto_queue(name, settings)
        queues = self.select_queues(address, message, rtype, local_only=local_only)
        if (
            not local_only
            and (cluster is None or name not in cluster.by_address)
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

    # -- duplicate detection ------------------------------------------------------------------
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

    # -- the address-full policy ---------------------------------------------------------------
    def address_full(self, address, size: int) -> str | None:
        """The address-full policy to apply if ``size`` more bytes would exceed the limit."""
        settings = self.settings_for(address.name)
        limit = settings.max_size_bytes
        if limit >= 0 and address.size + size > limit and address.size > 0:
            return settings.address_full_policy
        max_messages = settings.max_size_messages
        if max_messages is not None and max_messages >= 0 and address.messages >= max_messages:
            return settings.address_full_policy
        return None

    def wait_for_space(self, address) -> defer.Deferred:
        """A Deferred that fires when a BLOCKed address has room again."""
        if len(address.blocked) >= MAX_BLOCKED_SENDS_PER_ADDRESS:
            return defer.fail(errors.AddressFullError(f"address {address.name} is full and too many producers wait"))
        d = defer.Deferred()
        address.blocked.append(d)
        return d

    def release_blocked(self, address) -> None:
        """Let the producers a BLOCKed address holds go, if it has room now."""
        if address.blocked and self.address_full(address, 0) is None:
            waiting, address.blocked = address.blocked, []
            for d in waiting:
                d.callback(None)

    def _page(self, address, message: Message, queues: list) -> defer.Deferred:
        """Give ``message`` what routing gives it, then append it to the address's page files."""
        now = self.now_ms()
        if not message.timestamp:
            message.timestamp = now
        message.expiration = effective_expiration(message.expiration, now, self.settings_for(address.name))
        message.message_id = self.storage.next_id()
        self.messages_routed += 1
        carry_trace(message, self.server.node_id)  # depaging gives it another number
        return self.pager.page_message(address, message, queues)

    # -- delivery ---------------------------------------------------------------------------------
    def deliver_to_queues(self, message: Message, queues: list, *, sync: bool | None = None, tx=None):
        """Assign an id, store the message if durable, and add it to the queues.

        Returns a Deferred that fires when the message is safe (journal synced
        for a durable message on a durable queue), or None if nothing waits.
        With ``tx`` the journal records go into that storage transaction and
        the caller commits.
        """
        if not message.timestamp:
            message.timestamp = int(self._seconds() * 1000)  # now_ms(), inline on the hot path
        settings = self.settings_for(message.address)
        if message.expiration or settings.expiry_delay > 0 or settings.max_expiry_delay > 0:
            # (else effective_expiration leaves "never" as it is)
            message.expiration = effective_expiration(message.expiration, self.now_ms(), settings)
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
            self.durable_refs[message.message_id] = len(durable_ids)
        if tx is not None:
            # Invisible until the transaction's commit is durable.
            tx.after_commit.append(lambda: self.add_refs(message, queues, bool(durable_ids)))
        else:
            self.add_refs(message, queues, bool(durable_ids))
        return confirmed

    def _drop_large(self, message: Message) -> None:
        """``message`` goes nowhere (no route, DROP, a duplicate): a large one's file goes too."""
        if message.native and LARGE_KEY in message.native:
            self.large_refs.dropped(message)

    def add_refs(self, message: Message, queues: list, stored: bool) -> None:
        """Put ``message`` on ``queues`` (``stored``: its journal record names the durable ones)."""
        size = message.encoded_size()
        large = LARGE_KEY in message.native if message.native else False
        for queue in queues:
            if queue.deleted:
                if stored and queue.durable and not queue.definition.temporary:
                    # Deleted while a transaction held the message: release its record.
                    if large:
                        self.large_refs.added(message)
                    quiet_failure(self.settle(MessageRef(message, queue, persisted=True, size=size), account=False))
                continue
            persisted = stored and queue.definition.durable and not queue.definition.temporary
            ref = MessageRef(message, queue, 0, None, persisted, size)
            self._account_added(queue, ref)
            if large:
                self.large_refs.added(message)
            queue.add(ref)
        if large:
            self._drop_large(message)  # on no queue after all: its file goes

    def restore(self, message: Message, refs: list) -> bool:
        """Put a message the journal recovered back on its queues: ``refs`` are
        ``(queue, delivery count)``; False when none of its queues is left."""
        count = 0
        for queue, delivery_count in refs:
            ref = MessageRef(message, queue, delivery_count=delivery_count, persisted=True)
            self.account(queue, ref, +1)
            queue.add(ref)
            count += 1
        if count and message.native and LARGE_KEY in message.native:
            self.large_refs.added(message, count)
        if count:
            self.durable_refs[message.message_id] = count
        return bool(count)

    def restore_duplicates(self, duplicates) -> None:
        """The duplicate ids the journal recovered: ``(record id, address, id)``."""
        for record_id, address, dup_id in duplicates:
            evicted = self.duplicates.add((address, bytes(dup_id)), record_id)
            if evicted is not None:
                self.storage.delete_duplicate(evicted)

    # -- settlement and the address limits ----------------------------------------------------------
    def settle(self, ref: MessageRef, tx=None, account: bool = True):
        """Release a reference; returns the ack's storage Deferred if one was written."""
        if account:
            self.account(ref.queue, ref, -1)
        native = ref.message.native
        large = LARGE_KEY in native if native else False
        if not ref.persisted:
            if large:
                self.large_refs.settled(ref.message)
            return None
        mid = ref.message.message_id
        remaining = self.durable_refs.get(mid, 1) - 1
        if remaining <= 0:
            self.durable_refs.pop(mid, None)
        else:
            self.durable_refs[mid] = remaining
        if tx is not None:
            tx.ack(mid, ref.queue.id, remaining)
            if large:
                self.large_refs.settled(ref.message, tx=tx)
            return None
        d = self.storage.ack(mid, ref.queue.id, remaining, sync=False)
        if large:
            self.large_refs.settled(ref.message, stored=d)
        return d

    def _account_added(self, queue: Queue, ref: MessageRef) -> None:
        """``account(queue, ref, +1)``, for the routing hot path."""
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

    def account(self, queue: Queue, ref: MessageRef, sign: int) -> None:
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
                self.pager.schedule_depage(address)
            if address.blocked:
                self.release_blocked(address)


def effective_expiration(expiration: int, now: int, settings) -> int:
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
