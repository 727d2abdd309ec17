"""An address of the broker's registry: its routing types, its queues and what fills it.

:class:`Address` is a record the registry (:class:`junction.brokercore.server.BrokerServer`)
keeps per address name; the post office (:mod:`junction.brokercore.postoffice`) reads
its queues to route, and keeps its size and message count for the address limits
(``max-size-bytes``, ``max-size-messages`` and the address-full policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from junction.model.message import RoutingType

__all__ = ["Address"]

#: Enum members as module constants: an ``Enum.MEMBER`` lookup costs a
#: descriptor call per use in Python 3.11.
_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST


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
