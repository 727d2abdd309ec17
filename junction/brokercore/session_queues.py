"""What a session may do to addresses and queues, and learn of them.

:class:`SessionQueues` is mixed into
:class:`junction.brokercore.session.ServerSession`: temporary queues (AMQP's
dynamic nodes), queues and addresses a client creates and deletes by name
(CORE's CREATE_QUEUE, CREATE_SHARED_QUEUE, CREATE_ADDRESS, DELETE_QUEUE), and
the queries (:meth:`~SessionQueues.address_query`,
:meth:`~SessionQueues.queue_query`, :meth:`~SessionQueues.binding_query`,
:meth:`~SessionQueues.settings_for`).  Every change is authorised here
against ``security-settings`` (Artemis's ``ServerSessionImpl.createQueue``,
``createAddress``, ``deleteQueue``), and the errors carry Artemis's texts.
Queries create nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from junction.brokercore.message_groups import GroupSettings, resolve_group_settings
from junction.brokercore.queue import QueueDefinition
from junction.model import errors
from junction.model.message import RoutingType

__all__ = ["AddressQuery", "BindingQuery", "QueueQuery", "SessionQueues"]


@dataclass(frozen=True)
class AddressQuery:
    """What a session may learn of an address (Artemis ``AddressQueryResult``)."""

    name: str
    routing_types: frozenset
    auto_created: bool


@dataclass(frozen=True)
class QueueQuery:
    """What a session may learn of a queue (Artemis ``QueueQueryResult``)."""

    name: str
    address: str
    routing_type: RoutingType
    filter: str | None
    durable: bool
    temporary: bool
    consumer_count: int
    message_count: int
    auto_created: bool = False
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    exclusive: bool = False
    #: the queue's grouping settings, every field filled (see message_groups)
    groups: GroupSettings = GroupSettings(-1, False, False, None)


@dataclass(frozen=True)
class BindingQuery:
    """What a session may learn of an address and the queues bound to it (Artemis
    ``BindingQueryResult``): ``exists`` is False for an address not created yet."""

    address: str
    exists: bool
    queue_names: tuple[str, ...]
    routing_types: frozenset


class SessionQueues:
    """Addresses and queues, for :class:`~junction.brokercore.session.ServerSession` (see the module doc)."""

    __slots__ = ()

    # -- temporary queues ---------------------------------------------------------------
    def create_temporary_queue(self, name: str, routing_type: RoutingType) -> None:
        """A temporary queue on its own address, gone with this session (or :meth:`delete_temporary_queue`)."""
        self.check("createNonDurableQueue", name, name)
        self.server.create_queue(
            QueueDefinition(name=name, address=name, routing_type=routing_type, durable=False, temporary=True)
        )
        self.temporary_queues.add(name)

    def delete_temporary_queue(self, name: str) -> None:
        self.temporary_queues.discard(name)
        self.server.destroy_queue(name)

    # -- a client's queues and addresses ---------------------------------------------------
    def create_queue(
        self,
        name: str,
        address: str,
        routing_type: RoutingType,
        *,
        filter: str | None = None,
        durable: bool = True,
        temporary: bool = False,
        max_consumers: int = -1,
        purge_on_no_consumers: bool = False,
        exclusive: bool = False,
        auto_created: bool = False,
        groups: GroupSettings | None = None,
    ) -> None:
        """Create queue ``name`` on ``address`` (CORE's CREATE_QUEUE).

        The address is created (or given ``routing_type``) as
        ``auto-create-addresses`` allows; a temporary queue goes with this
        session.  Raises ``SecurityError``,
        :class:`~junction.model.errors.QueueExistsError` (AMQ229019),
        :class:`~junction.model.errors.NonExistentAddressError` (AMQ229203),
        :class:`~junction.model.errors.InvalidRoutingTypeError` or
        :class:`~junction.model.errors.InvalidFilterError`.
        """
        durable = durable and not temporary
        self.check("createDurableQueue" if durable else "createNonDurableQueue", address, name)
        server = self.server
        existing = server.find_queue(name)
        if existing is not None:
            raise errors.QueueExistsError(f"AMQ229019: Queue {name} already exists on address {existing.address}")
        known = server.addresses.get(address)
        if known is None or routing_type not in known.routing_types:
            if not server.settings_for(address).auto_create_addresses:
                if known is None:
                    raise errors.NonExistentAddressError(f"AMQ229203: Address Does Not Exist: {address}")
                raise errors.InvalidRoutingTypeError(
                    f"address {address} does not support routing type {routing_type.name}"
                )
            self.check("createAddress", address)
        server.create_queue(
            QueueDefinition(
                name=name,
                address=address,
                routing_type=routing_type,
                filter=filter or None,
                durable=durable,
                max_consumers=max_consumers,
                purge_on_no_consumers=purge_on_no_consumers,
                exclusive=exclusive,
                auto_created=auto_created,
                temporary=temporary,
                user=self.user,
                groups=groups,
            )
        )
        if temporary:
            self.temporary_queues.add(name)

    def create_address(self, name: str, routing_types, *, auto_created: bool = False) -> None:
        """Create address ``name``, or give it the routing types it lacks (CORE's CREATE_ADDRESS)."""
        self.check("createAddress", name)
        self.server.create_address(name, set(routing_types), auto_created=auto_created)

    def delete_queue(self, name: str) -> None:
        """Delete queue ``name`` and its messages (CORE's DELETE_QUEUE); not while it has consumers."""
        queue = self.server.find_queue(name)
        if queue is None:
            raise errors.NonExistentQueueError(f"AMQ229017: Queue {name} does not exist")
        durable = queue.durable and not queue.definition.temporary
        self.check("deleteDurableQueue" if durable else "deleteNonDurableQueue", queue.address, name)
        if queue.consumers:
            raise errors.BrokerError(f"AMQ229025: Cannot delete queue {name} on binding {name} - it has consumers")
        self.temporary_queues.discard(name)
        self.server.destroy_queue(name)

    def check_producer(self, address: str) -> None:
        """A producer may send to ``address`` (an AMQP sending link's target).

        Raises ``SecurityError``, or
        :class:`junction.model.errors.NonExistentAddressError` when the
        address does not exist and address-settings do not auto-create it.
        """
        self.check("send", address)
        server = self.server
        if address not in server.addresses and "::" not in address:
            settings = server.settings.resolve(address)
            if not settings.auto_create_addresses:
                raise errors.NonExistentAddressError(
                    f"address {address} does not exist and auto-create-addresses is false"
                )
            self.check("createAddress", address)

    # -- queries ------------------------------------------------------------------------------
    def address_query(self, name: str) -> AddressQuery | None:
        """The address ``name``, or None when it does not exist (nothing is created)."""
        address = self.server.addresses.get(name)
        if address is None:
            return None
        return AddressQuery(address.name, frozenset(address.routing_types), address.auto_created)

    def queue_query(self, name: str) -> QueueQuery | None:
        """The queue ``name``, or None when it does not exist (nothing is created)."""
        queue = self.server.find_queue(name)
        if queue is None:
            return None
        defn = queue.definition
        return QueueQuery(
            queue.name,
            queue.address,
            queue.routing_type,
            defn.filter,
            queue.durable,
            defn.temporary,
            len(queue.consumers),
            queue.message_count,
            defn.auto_created,
            defn.max_consumers,
            defn.purge_on_no_consumers,
            defn.exclusive,
            resolve_group_settings(defn.groups, self.server.queue_settings(queue)),
        )

    def binding_query(self, name: str) -> BindingQuery:
        """Address ``name`` and the names of the queues bound to it (nothing is created)."""
        address = self.server.addresses.get(name)
        if address is None:
            return BindingQuery(name, False, (), frozenset())
        return BindingQuery(name, True, tuple(address.queues), frozenset(address.routing_types))

    def settings_for(self, name: str):
        """The effective address settings of ``name`` (read only: what a protocol tells its
        clients of an address, such as CORE's ``default-consumer-window-size``)."""
        return self.server.settings_for(name)
