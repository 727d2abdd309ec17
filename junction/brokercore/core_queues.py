"""A CORE session's queues and addresses: creation, deletion, and the queue and binding queries.

:class:`QueueHandlers` is mixed into
:class:`~junction.brokercore.core_sessions.CoreSession`; its handlers call the
:class:`~junction.brokercore.session.ServerSession` API (which authorises
every change) and answer in the form the client's version reads
(:mod:`junction.protocols.core.responses`).  Behaviour follows Artemis's
``ServerSessionPacketHandler``: CREATE_QUEUE refuses a queue that exists
(QUEUE_EXISTS 101, ``AMQ229019``); CREATE_SHARED_QUEUE creates the queue only
when none of that name is bound to that address with that filter;
SESS_QUEUEQUERY answers for a queue that does not exist too (``exists``
false, the address settings' defaults); SESS_BINDINGQUERY names the queues
bound to the address and the address settings' queue defaults.

Queue attributes Junction's queues do not have yet -- last-value, non-
destructive, ring size, a disabled queue -- are refused with
NOT_IMPLEMENTED (213) when a client asks for them, never silently dropped.
"""

from __future__ import annotations

from junction.brokercore.core_errors import CoreRefused
from junction.brokercore.message_groups import GroupSettings
from junction.model.message import RoutingType
from junction.protocols.core import ExceptionType, encode_packet, responses
from junction.protocols.core import packets as p
from junction.protocols.core.packets.queues import RoutingType as WireRoutingType

__all__ = ["QueueHandlers", "binding_info", "queue_info", "routing_type"]

#: Artemis 1.x's JMS queue prefixes: a CREATE_QUEUE (the old form) on such an address is ANYCAST.
_OLD_QUEUE_PREFIXES = ("jms.queue.", "jms.tempqueue.")


def routing_type(byte: int | None, default: RoutingType) -> RoutingType:
    """The model's routing type of a wire byte (-1, any other value or None: ``default``)."""
    if byte == WireRoutingType.ANYCAST:
        return RoutingType.ANYCAST
    if byte == WireRoutingType.MULTICAST:
        return RoutingType.MULTICAST
    return default


def queue_info(session, name: str) -> responses.QueueInfo:
    """What SESS_QUEUEQUERY tells of queue ``name`` (one that does not exist too)."""
    found = session.queue_query(name)
    if found is None:
        settings = session.settings_for(name)
        return responses.QueueInfo(
            name,
            name,
            exists=False,
            routing_type=int(settings.default_queue_routing_type),
            auto_create_queues=settings.auto_create_queues,
            max_consumers=settings.default_max_consumers,
            purge_on_no_consumers=settings.default_purge_on_no_consumers,
            exclusive=settings.default_exclusive_queue,
            default_consumer_window_size=settings.default_consumer_window_size,
            group_rebalance=settings.default_group_rebalance,
            group_buckets=settings.default_group_buckets,
            group_first_key=settings.default_group_first_key,
            group_rebalance_pause_dispatch=settings.default_group_rebalance_pause_dispatch,
        )
    settings = session.settings_for(found.address)
    return responses.QueueInfo(
        found.name,
        found.address,
        durable=found.durable,
        temporary=found.temporary,
        consumer_count=found.consumer_count,
        message_count=found.message_count,
        filter_string=found.filter,
        routing_type=int(found.routing_type),
        auto_create_queues=settings.auto_create_queues,
        auto_created=found.auto_created,
        purge_on_no_consumers=found.purge_on_no_consumers,
        max_consumers=found.max_consumers,
        exclusive=found.exclusive,
        default_consumer_window_size=settings.default_consumer_window_size,
        group_rebalance=found.groups.rebalance,
        group_buckets=found.groups.buckets,
        group_first_key=found.groups.first_key,
        group_rebalance_pause_dispatch=found.groups.rebalance_pause_dispatch,
    )


def binding_info(session, address: str) -> responses.BindingInfo:
    """What SESS_BINDINGQUERY tells of ``address``."""
    found = session.binding_query(address)
    settings = session.settings_for(address)
    return responses.BindingInfo(
        found.exists,
        found.queue_names,
        auto_create_queues=settings.auto_create_queues,
        auto_create_addresses=settings.auto_create_addresses,
        default_purge_on_no_consumers=settings.default_purge_on_no_consumers,
        default_max_consumers=settings.default_max_consumers,
        default_exclusive=settings.default_exclusive_queue,
        default_last_value=settings.last_value_queue,
        default_last_value_key=settings.default_last_value_key,
        default_non_destructive=settings.default_non_destructive,
        supports_multicast=RoutingType.MULTICAST in found.routing_types,
        supports_anycast=RoutingType.ANYCAST in found.routing_types,
    )


def _refuse_what_queues_lack(request) -> None:
    """NOT_IMPLEMENTED for the queue attributes Junction's queues do not have yet."""
    lacking = []
    if getattr(request, "last_value", None) or getattr(request, "last_value_key", None):
        lacking.append("last-value queues")
    if getattr(request, "non_destructive", None):
        lacking.append("non-destructive queues")
    ring = getattr(request, "ring_size", None)
    if ring is not None and ring >= 0:
        lacking.append("ring queues")
    if getattr(request, "enabled", None) is False:
        lacking.append("disabled queues")
    if lacking:
        raise CoreRefused(ExceptionType.NOT_IMPLEMENTED_EXCEPTION, f"{', '.join(lacking)} are not supported yet")


def _group_settings(request) -> GroupSettings | None:
    """The grouping attributes a CREATE_QUEUE_V2 / CREATE_SHARED_QUEUE_V2 gives (None: none,
    the queue takes its address settings'); see message_groups."""
    given = GroupSettings(
        buckets=request.group_buckets, rebalance=request.group_rebalance,
        rebalance_pause_dispatch=request.group_rebalance_pause_dispatch, first_key=request.group_first_key,
    )
    return given if given.to_record() else None


class QueueHandlers:
    """The queue and address packets of a :class:`~junction.brokercore.core_sessions.CoreSession`."""

    __slots__ = ()

    def _on_create_queue(self, packet) -> None:
        _refuse_what_queues_lack(packet)
        address, prefixed = self.protocol.unprefixed(packet.address)
        name, _ = self.protocol.unprefixed(packet.queue_name)
        if packet.__class__ is p.CreateQueueV2:
            settings = self.session.settings_for(address)
            rtype = prefixed or routing_type(packet.routing_type, settings.default_queue_routing_type)
            exclusive = settings.default_exclusive_queue if packet.exclusive is None else packet.exclusive
            extra = {
                "max_consumers": packet.max_consumers,
                "purge_on_no_consumers": packet.purge_on_no_consumers,
                "exclusive": exclusive,
                "auto_created": packet.auto_created,
                "groups": _group_settings(packet),
            }
        else:
            old = packet.address.startswith(_OLD_QUEUE_PREFIXES)
            rtype = prefixed or (RoutingType.ANYCAST if old else RoutingType.MULTICAST)
            extra = {}
        self.session.create_queue(
            name,
            address,
            rtype,
            filter=packet.filter_string,
            durable=packet.durable,
            temporary=packet.temporary,
            **extra,
        )
        self.confirm(packet, self.null_response(packet) if packet.requires_response else None)

    def _on_create_shared_queue(self, packet) -> None:
        _refuse_what_queues_lack(packet)
        address, prefixed = self.protocol.unprefixed(packet.address)
        name, _ = self.protocol.unprefixed(packet.queue_name)
        session = self.session
        found = session.queue_query(name)
        if not (found is not None and found.address == address and found.filter == packet.filter_string):
            settings = session.settings_for(address)
            if packet.__class__ is p.CreateSharedQueueV2:
                rtype = prefixed or routing_type(packet.routing_type, settings.default_queue_routing_type)
                max_consumers = settings.default_max_consumers if packet.max_consumers is None else packet.max_consumers
                purge = packet.purge_on_no_consumers
                exclusive = packet.exclusive
                groups = _group_settings(packet)
            else:
                rtype, max_consumers, purge, exclusive = prefixed or RoutingType.MULTICAST, -1, None, None
                groups = None
            session.create_queue(
                name,
                address,
                rtype,
                filter=packet.filter_string,
                durable=packet.durable,
                max_consumers=max_consumers,
                purge_on_no_consumers=settings.default_purge_on_no_consumers if purge is None else purge,
                exclusive=settings.default_exclusive_queue if exclusive is None else exclusive,
                groups=groups,
            )
        self.confirm(packet, self.null_response(packet) if packet.requires_response else None)

    def _on_create_address(self, packet: p.CreateAddress) -> None:
        address, _ = self.protocol.unprefixed(packet.address)
        types = {routing_type(byte, None) for byte in packet.routing_types} - {None}
        if not types:
            raise CoreRefused(ExceptionType.ILLEGAL_STATE, f"address {address}: no routing type named")
        self.session.create_address(address, types, auto_created=packet.auto_created)
        self.confirm(packet, self.null_response(packet) if packet.requires_response else None)

    def _on_delete_queue(self, packet: p.DeleteQueue) -> None:
        name, _ = self.protocol.unprefixed(packet.queue_name)
        self.session.delete_queue(name)
        self.confirm(packet, self.null_response(packet))

    def _on_queue_query(self, packet: p.SessQueueQuery) -> None:
        name, _ = self.protocol.unprefixed(packet.queue_name)
        if "::" in name:
            name = name.split("::", 1)[1]
        answer = responses.queue_query_response(self.version, self.channel, queue_info(self.session, name))
        self.confirm(packet, encode_packet(answer))

    def _on_binding_query(self, packet: p.SessBindingQuery) -> None:
        address, _ = self.protocol.unprefixed(packet.address)
        if "::" in address:
            address = address.split("::", 1)[0]
        answer = responses.binding_query_response(self.version, self.channel, binding_info(self.session, address))
        self.confirm(packet, encode_packet(answer))

    HANDLERS = {
        p.CreateQueue: _on_create_queue,
        p.CreateQueueV2: _on_create_queue,
        p.CreateSharedQueue: _on_create_shared_queue,
        p.CreateSharedQueueV2: _on_create_shared_queue,
        p.CreateAddress: _on_create_address,
        p.DeleteQueue: _on_delete_queue,
        p.SessQueueQuery: _on_queue_query,
        p.SessBindingQuery: _on_binding_query,
    }

