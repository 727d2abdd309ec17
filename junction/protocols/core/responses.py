"""What a CORE server answers, in the form each client version reads.

A server writes the newest form of a packet that the connection's version
(the client's, adopted by :class:`~junction.protocols.core.connection.CoreConnection`)
supports, exactly as Artemis's ``ChannelImpl.supports`` chooses:

=======================  ==========================================================
answer                   form by version
=======================  ==========================================================
NULL_RESPONSE            with the request's correlation id from 130 (-1 for requests
                         that carry none), bare before
EXCEPTION                with the request's correlation id when the request carries
                         one (SESS_SEND 130+, SESS_COMMIT 132+), plain otherwise
SESS_QUEUEQUERY_RESP     V3 from 129, V2 from 126, V1 before
SESS_BINDINGQUERY_RESP   V5 from 135, V4 from 129, V3 from 127, V2 from 126, V1 before
CLUSTER_TOPOLOGY         V4 from 131, V2 from 122, V1 before (a node that is not
                         clustered announces itself alone: no V3)
DISCONNECT               V3 from 131, V2 from 125, V1 before
=======================  ==========================================================

The queue and binding queries take their facts as :class:`QueueInfo` and
:class:`BindingInfo`, plain values the broker fills in; what a form does not
carry is left out.  Everything here is pure: no clock (a topology's event id
is the caller's), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from junction.protocols.core.packet_types import CONNECTION_CHANNEL
from junction.protocols.core.packets import (
    ClusterTopology,
    ClusterTopologyV2,
    ClusterTopologyV4,
    CreateSessionResponse,
    Disconnect,
    DisconnectReason,
    DisconnectV2,
    DisconnectV3,
    ExceptionMessage,
    NullResponse,
    Packet,
    SessBindingQueryResponse,
    SessBindingQueryResponseV2,
    SessBindingQueryResponseV3,
    SessBindingQueryResponseV4,
    SessBindingQueryResponseV5,
    SessQueueQueryResponse,
    SessQueueQueryResponseV2,
    SessQueueQueryResponseV3,
)
from junction.protocols.core.packets.queues import RoutingType
from junction.protocols.core.versions import (
    ADDRESSING_CHANGE_VERSION,
    ASYNC_RESPONSE_CHANGE_VERSION,
    BINDING_QUERY_V3_VERSION,
    BINDING_QUERY_V5_VERSION,
    CLIENT_ID_VERSION,
    CURRENT_VERSION,
    DISCONNECT_V2_VERSION,
    QUERY_V2_VERSION,
    TOPOLOGY_V2_VERSION,
)

__all__ = [
    "NO_CORRELATION",
    "BindingInfo",
    "QueueInfo",
    "binding_query_response",
    "create_session_response",
    "disconnect",
    "exception",
    "null_response",
    "queue_query_response",
    "topology",
]

#: The correlation id of a request that carries none: what the client waits for then.
NO_CORRELATION = -1
#: Artemis's ``default-consumer-window-size``: what a client uses when it sets no window.
DEFAULT_CONSUMER_WINDOW_SIZE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue as SESS_QUEUEQUERY_RESP tells it (Artemis ``QueueQueryResult``).

    ``routing_type`` is the wire byte (:class:`RoutingType`).  The defaults
    are Artemis's for a queue created without the attribute; the three
    ``auto_create_queues``, ``default_consumer_window_size`` and the
    ``exists`` flag come from the address settings and the registry.
    """

    name: str
    address: str
    exists: bool = True
    durable: bool = True
    temporary: bool = False
    consumer_count: int = 0
    message_count: int = 0
    filter_string: str | None = None
    routing_type: int = RoutingType.ANYCAST
    auto_create_queues: bool = True
    auto_created: bool = False
    purge_on_no_consumers: bool = False
    max_consumers: int = -1
    exclusive: bool = False
    last_value: bool = False
    default_consumer_window_size: int = DEFAULT_CONSUMER_WINDOW_SIZE
    last_value_key: str | None = None
    non_destructive: bool = False
    consumers_before_dispatch: int = 0
    delay_before_dispatch: int = -1
    group_rebalance: bool = False
    group_buckets: int = -1
    auto_delete: bool = False
    auto_delete_delay: int = 0
    auto_delete_message_count: int = 0
    group_first_key: str | None = None
    ring_size: int = -1
    enabled: bool = True
    group_rebalance_pause_dispatch: bool = False
    configuration_managed: bool = False


@dataclass(frozen=True, slots=True)
class BindingInfo:
    """An address as SESS_BINDINGQUERY_RESP tells it (Artemis ``BindingQueryResult``).

    ``queue_names`` are the queues bound to it; the ``default_*`` fields are
    its address settings' queue defaults.
    """

    exists: bool
    queue_names: tuple[str, ...] = ()
    auto_create_queues: bool = True
    auto_create_addresses: bool = True
    default_purge_on_no_consumers: bool = False
    default_max_consumers: int = -1
    default_exclusive: bool = False
    default_last_value: bool = False
    default_last_value_key: str | None = None
    default_non_destructive: bool = False
    default_consumers_before_dispatch: int = 0
    default_delay_before_dispatch: int = -1
    supports_multicast: bool = False
    supports_anycast: bool = False


def null_response(version: int | None, channel_id: int, correlation_id: int | None = None) -> NullResponse:
    """"Done", on the request's channel: with its correlation id (or -1) from version 130."""
    if version is not None and version >= ASYNC_RESPONSE_CHANGE_VERSION:
        return NullResponse(NO_CORRELATION if correlation_id is None else correlation_id, channel_id=channel_id)
    return NullResponse(channel_id=channel_id)


def exception(code: int, message: str | None, channel_id: int, correlation_id: int | None = None) -> ExceptionMessage:
    """An EXCEPTION: with ``correlation_id`` when the request carried one (the V2 form), else plain."""
    return ExceptionMessage(int(code), message, correlation_id, channel_id=channel_id)


def create_session_response() -> CreateSessionResponse:
    """The session is open: this server's version, which the client adopts."""
    return CreateSessionResponse(CURRENT_VERSION)


def queue_query_response(version: int | None, channel_id: int, info: QueueInfo) -> SessQueueQueryResponse:
    """SESS_QUEUEQUERY_RESP in the newest form ``version`` reads (also the answer to a
    SESS_CREATECONSUMER that requires one)."""
    base = (
        info.exists,
        info.durable,
        info.temporary,
        info.consumer_count,
        info.message_count,
        info.filter_string,
        info.address,
        info.name,
    )
    v = version or 0
    if v >= ADDRESSING_CHANGE_VERSION:
        return SessQueueQueryResponseV3(
            *base,
            info.auto_create_queues,
            info.auto_created,
            info.purge_on_no_consumers,
            info.routing_type,
            info.max_consumers,
            info.exclusive,
            info.last_value,
            info.default_consumer_window_size,
            info.last_value_key,
            info.non_destructive,
            info.consumers_before_dispatch,
            info.delay_before_dispatch,
            info.group_rebalance,
            info.group_buckets,
            info.auto_delete,
            info.auto_delete_delay,
            info.auto_delete_message_count,
            info.group_first_key,
            info.ring_size,
            info.enabled,
            info.group_rebalance_pause_dispatch,
            info.configuration_managed,
            channel_id=channel_id,
        )
    if v >= QUERY_V2_VERSION:
        return SessQueueQueryResponseV2(*base, info.auto_create_queues, channel_id=channel_id)
    return SessQueueQueryResponse(*base, channel_id=channel_id)


def binding_query_response(version: int | None, channel_id: int, info: BindingInfo) -> SessBindingQueryResponse:
    """SESS_BINDINGQUERY_RESP in the newest form ``version`` reads."""
    v = version or 0
    names = tuple(info.queue_names)
    if v < QUERY_V2_VERSION:
        return SessBindingQueryResponse(info.exists, names, channel_id=channel_id)
    if v < BINDING_QUERY_V3_VERSION:
        return SessBindingQueryResponseV2(info.exists, names, info.auto_create_queues, channel_id=channel_id)
    if v < ADDRESSING_CHANGE_VERSION:
        return SessBindingQueryResponseV3(
            info.exists, names, info.auto_create_queues, info.auto_create_addresses, channel_id=channel_id
        )
    v4 = (
        info.exists,
        names,
        info.auto_create_queues,
        info.auto_create_addresses,
        info.default_purge_on_no_consumers,
        info.default_max_consumers,
        info.default_exclusive,
        info.default_last_value,
        info.default_last_value_key,
        info.default_non_destructive,
        info.default_consumers_before_dispatch,
        info.default_delay_before_dispatch,
    )
    if v < BINDING_QUERY_V5_VERSION:
        return SessBindingQueryResponseV4(*v4, channel_id=channel_id)
    return SessBindingQueryResponseV5(*v4, info.supports_multicast, info.supports_anycast, channel_id=channel_id)


def topology(version: int | None, node_id: str, unique_event_id: int) -> ClusterTopology:
    """The single announcement of a node that is not clustered: itself, with no connectors
    (the client uses the connector it came through), ``last`` set, so a client's wait for
    the topology ends (Artemis's ``CoreProtocolManager``, core.md section 3)."""
    v = version or 0
    if v >= CLIENT_ID_VERSION:
        return ClusterTopologyV4(False, node_id, None, None, True, unique_event_id, None, None, CURRENT_VERSION)
    if v >= TOPOLOGY_V2_VERSION:
        return ClusterTopologyV2(False, node_id, None, None, True, unique_event_id, None)
    return ClusterTopology(False, node_id, None, None, True)


def disconnect(version: int | None, node_id: str | None, reason: int = DisconnectReason.SHUT_DOWN) -> Packet:
    """The server ends the connection (``RemotingConnectionImpl.disconnect``): the newest
    DISCONNECT ``version`` reads, on the connection channel."""
    v = version or 0
    if v >= CLIENT_ID_VERSION:
        return DisconnectV3(node_id, reason, None, None, channel_id=CONNECTION_CHANNEL)
    if v >= DISCONNECT_V2_VERSION:
        return DisconnectV2(node_id, None, channel_id=CONNECTION_CHANNEL)
    return Disconnect(node_id, channel_id=CONNECTION_CHANNEL)
