"""Address and queue packets: creation, deletion, and the queue and binding queries.

Routing types are the raw byte (0 MULTICAST, 1 ANYCAST, -1 none; Artemis reads
any other value as none).  The queue attributes appended release after
release (exclusive, last-value, ring size ...) are optional tails: Artemis
reads each group only if bytes remain, and writes every one of them with a
present-flag (``BufferHelper``), so a server always writes them all.
"""

from __future__ import annotations

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.packets.base import (
    BOOL,
    BYTE,
    INT,
    LONG,
    NULLABLE_SIMPLE_STRING,
    OPT_BOOL,
    OPT_INT,
    OPT_LONG,
    SIMPLE_STRING,
    Kind,
    Packet,
    packet,
    wire,
)

__all__ = [
    "CreateAddress",
    "CreateQueue",
    "CreateQueueV2",
    "CreateSharedQueue",
    "CreateSharedQueueV2",
    "DeleteQueue",
    "RoutingType",
    "SessBindingQuery",
    "SessBindingQueryResponse",
    "SessBindingQueryResponseV2",
    "SessBindingQueryResponseV3",
    "SessBindingQueryResponseV4",
    "SessBindingQueryResponseV5",
    "SessQueueQuery",
    "SessQueueQueryResponse",
    "SessQueueQueryResponseV2",
    "SessQueueQueryResponseV3",
]


class RoutingType:
    """The routing-type byte (``RoutingType.getType``)."""

    NONE = -1
    MULTICAST = 0
    ANYCAST = 1


def _read_names(r: Reader) -> tuple[str, ...]:
    count = r.read_count(4, "queue name")
    return tuple(r.read_simple_string() for _ in range(count))


def _write_names(w: Writer, names: tuple[str, ...]) -> None:
    w.write_int(len(names))
    for name in names:
        w.write_simple_string(name)


def _read_routing_types(r: Reader) -> tuple[int, ...]:
    count = r.read_count(1, "routing type")
    return tuple(r.read_byte() for _ in range(count))


def _write_routing_types(w: Writer, types: tuple[int, ...]) -> None:
    w.write_int(len(types))
    for kind in types:
        w.write_byte(kind)


#: ``int32 n`` + n SimpleStrings.
NAMES = Kind(_read_names, _write_names)
#: ``int32 n`` + n routing-type bytes.
ROUTING_TYPES = Kind(_read_routing_types, _write_routing_types)


@packet(PacketType.CREATE_QUEUE, "client")
class CreateQueue(Packet):
    """Create a queue (clients before 2.0)."""

    address: str = wire(SIMPLE_STRING)
    queue_name: str = wire(SIMPLE_STRING)
    filter_string: str | None = wire(NULLABLE_SIMPLE_STRING)
    durable: bool = wire(BOOL)
    temporary: bool = wire(BOOL)
    requires_response: bool = wire(BOOL)


@packet(PacketType.CREATE_QUEUE_V2, "client")
class CreateQueueV2(CreateQueue):
    """Create a queue with its routing type and attributes (what the JMS client sends)."""

    auto_created: bool = wire(BOOL)
    routing_type: int = wire(BYTE)
    max_consumers: int = wire(INT)
    purge_on_no_consumers: bool = wire(BOOL)
    exclusive: bool | None = wire(OPT_BOOL, tail=True)
    last_value: bool | None = wire(OPT_BOOL, default=None)
    last_value_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    non_destructive: bool | None = wire(OPT_BOOL, default=None)
    consumers_before_dispatch: int | None = wire(OPT_INT, default=None)
    delay_before_dispatch: int | None = wire(OPT_LONG, default=None)
    group_rebalance: bool | None = wire(OPT_BOOL, default=None)
    group_buckets: int | None = wire(OPT_INT, default=None)
    auto_delete: bool | None = wire(OPT_BOOL, default=None)
    auto_delete_delay: int | None = wire(OPT_LONG, default=None)
    auto_delete_message_count: int | None = wire(OPT_LONG, default=None)
    group_first_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    ring_size: int | None = wire(OPT_LONG, tail=True)
    enabled: bool | None = wire(OPT_BOOL, tail=True)
    group_rebalance_pause_dispatch: bool | None = wire(OPT_BOOL, tail=True)


@packet(PacketType.CREATE_SHARED_QUEUE, "client")
class CreateSharedQueue(Packet):
    """Create a shared subscription queue (clients before 2.0)."""

    address: str = wire(SIMPLE_STRING)
    queue_name: str = wire(SIMPLE_STRING)
    filter_string: str | None = wire(NULLABLE_SIMPLE_STRING)
    durable: bool = wire(BOOL)
    requires_response: bool = wire(BOOL)


@packet(PacketType.CREATE_SHARED_QUEUE_V2, "client")
class CreateSharedQueueV2(Packet):
    """Create a shared subscription queue, with its routing type and attributes."""

    address: str = wire(SIMPLE_STRING)
    queue_name: str = wire(SIMPLE_STRING)
    filter_string: str | None = wire(NULLABLE_SIMPLE_STRING)
    durable: bool = wire(BOOL)
    routing_type: int = wire(BYTE)
    requires_response: bool = wire(BOOL)
    max_consumers: int | None = wire(OPT_INT, tail=True)
    purge_on_no_consumers: bool | None = wire(OPT_BOOL, default=None)
    exclusive: bool | None = wire(OPT_BOOL, default=None)
    last_value: bool | None = wire(OPT_BOOL, default=None)
    last_value_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    non_destructive: bool | None = wire(OPT_BOOL, default=None)
    consumers_before_dispatch: int | None = wire(OPT_INT, default=None)
    delay_before_dispatch: int | None = wire(OPT_LONG, default=None)
    group_rebalance: bool | None = wire(OPT_BOOL, default=None)
    group_buckets: int | None = wire(OPT_INT, default=None)
    auto_delete: bool | None = wire(OPT_BOOL, default=None)
    auto_delete_delay: int | None = wire(OPT_LONG, default=None)
    auto_delete_message_count: int | None = wire(OPT_LONG, default=None)
    group_first_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    ring_size: int | None = wire(OPT_LONG, tail=True)
    enabled: bool | None = wire(OPT_BOOL, tail=True)
    group_rebalance_pause_dispatch: bool | None = wire(OPT_BOOL, tail=True)


@packet(PacketType.CREATE_ADDRESS, "client")
class CreateAddress(Packet):
    """Create an address with the routing types it supports."""

    address: str = wire(SIMPLE_STRING)
    routing_types: tuple[int, ...] = wire(ROUTING_TYPES)
    requires_response: bool = wire(BOOL)
    auto_created: bool = wire(BOOL)


@packet(PacketType.DELETE_QUEUE, "client")
class DeleteQueue(Packet):
    queue_name: str = wire(SIMPLE_STRING)


@packet(PacketType.SESS_QUEUEQUERY, "client")
class SessQueueQuery(Packet):
    queue_name: str = wire(SIMPLE_STRING)


@packet(PacketType.SESS_QUEUEQUERY_RESP, "server")
class SessQueueQueryResponse(Packet):
    """What a queue is (clients before version 122 get this form)."""

    exists: bool = wire(BOOL)
    durable: bool = wire(BOOL)
    temporary: bool = wire(BOOL)
    consumer_count: int = wire(INT)
    message_count: int = wire(LONG)
    filter_string: str | None = wire(NULLABLE_SIMPLE_STRING)
    address: str | None = wire(NULLABLE_SIMPLE_STRING)
    name: str | None = wire(NULLABLE_SIMPLE_STRING)


@packet(PacketType.SESS_QUEUEQUERY_RESP_V2, "server")
class SessQueueQueryResponseV2(SessQueueQueryResponse):
    auto_create_queues: bool = wire(BOOL)


@packet(PacketType.SESS_QUEUEQUERY_RESP_V3, "server")
class SessQueueQueryResponseV3(SessQueueQueryResponseV2):
    """The queue's attributes too (129+); ``default_consumer_window_size`` is the
    address setting the client uses when its own window is not set."""

    auto_created: bool = wire(BOOL)
    purge_on_no_consumers: bool = wire(BOOL)
    routing_type: int = wire(BYTE)
    max_consumers: int = wire(INT)
    exclusive: bool | None = wire(OPT_BOOL, tail=True)
    last_value: bool | None = wire(OPT_BOOL, default=None)
    default_consumer_window_size: int | None = wire(OPT_INT, tail=True)
    last_value_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    non_destructive: bool | None = wire(OPT_BOOL, default=None)
    consumers_before_dispatch: int | None = wire(OPT_INT, default=None)
    delay_before_dispatch: int | None = wire(OPT_LONG, default=None)
    group_rebalance: bool | None = wire(OPT_BOOL, default=None)
    group_buckets: int | None = wire(OPT_INT, default=None)
    auto_delete: bool | None = wire(OPT_BOOL, default=None)
    auto_delete_delay: int | None = wire(OPT_LONG, default=None)
    auto_delete_message_count: int | None = wire(OPT_LONG, default=None)
    group_first_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    ring_size: int | None = wire(OPT_LONG, tail=True)
    enabled: bool | None = wire(OPT_BOOL, tail=True)
    group_rebalance_pause_dispatch: bool | None = wire(OPT_BOOL, tail=True)
    configuration_managed: bool | None = wire(OPT_BOOL, tail=True)


@packet(PacketType.SESS_BINDINGQUERY, "client")
class SessBindingQuery(Packet):
    address: str = wire(SIMPLE_STRING)


@packet(PacketType.SESS_BINDINGQUERY_RESP, "server")
class SessBindingQueryResponse(Packet):
    """Whether an address exists and the queues bound to it."""

    exists: bool = wire(BOOL)
    queue_names: tuple[str, ...] = wire(NAMES)


@packet(PacketType.SESS_BINDINGQUERY_RESP_V2, "server")
class SessBindingQueryResponseV2(SessBindingQueryResponse):
    auto_create_queues: bool = wire(BOOL)


@packet(PacketType.SESS_BINDINGQUERY_RESP_V3, "server")
class SessBindingQueryResponseV3(SessBindingQueryResponseV2):
    auto_create_addresses: bool = wire(BOOL)


@packet(PacketType.SESS_BINDINGQUERY_RESP_V4, "server")
class SessBindingQueryResponseV4(SessBindingQueryResponseV3):
    """The address settings' queue defaults too."""

    default_purge_on_no_consumers: bool = wire(BOOL)
    default_max_consumers: int = wire(INT)
    default_exclusive: bool | None = wire(OPT_BOOL, tail=True)
    default_last_value: bool | None = wire(OPT_BOOL, default=None)
    default_last_value_key: str | None = wire(NULLABLE_SIMPLE_STRING, tail=True)
    default_non_destructive: bool | None = wire(OPT_BOOL, default=None)
    default_consumers_before_dispatch: int | None = wire(OPT_INT, default=None)
    default_delay_before_dispatch: int | None = wire(OPT_LONG, default=None)


@packet(PacketType.SESS_BINDINGQUERY_RESP_V5, "server")
class SessBindingQueryResponseV5(SessBindingQueryResponseV4):
    """Which routing types the address supports (135+)."""

    supports_multicast: bool | None = wire(BOOL, tail=True)
    supports_anycast: bool | None = wire(BOOL, default=None)
