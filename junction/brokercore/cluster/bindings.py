"""Remote bindings and the clustered routing decision.

A *remote binding* is a queue on another node, as a peer told us about it: its
address, name, routing type, filter, consumer count and consumer filters, and
how many cluster hops away it is.  Routing an address that has remote
bindings follows Artemis's ``BindingsImpl``: the queues and remote bindings
of an address fall into groups by *routing name* (ANYCAST queues share the
address's group; a MULTICAST queue is its own group, shared with same-named
queues on other nodes), one member of each group gets the message, picked
round-robin by the cluster connection's ``message-load-balancing`` mode:

* ``STRICT``: every matching member in turn, consumers or not;
* ``ON_DEMAND``: in turn among members with a matching consumer; when none
  has one, the local queue (or the first match) keeps it;
* ``OFF`` and ``OFF_WITH_REDISTRIBUTION``: remote members are never chosen
  for a message's first routing (the seed's "never forwarded").  Artemis's
  code still sends MULTICAST messages across under OFF; Junction follows the
  documented meaning (see docs/architecture.md).

A group with a single member takes the message whatever its consumers (a
remote durable subscription gets every message, as a local one would).

Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from junction.model.filter import FilterError, parse_filter
from junction.model.message import RoutingType

_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST

#: remote bindings one node keeps (all peers together); notifications beyond are dropped and logged
MAX_REMOTE_BINDINGS = 100_000


class AddressMatcher:
    """A cluster connection's ``address``: comma-separated prefixes, ``!`` excludes.

    Empty matches every address; exclusions win over inclusions; no
    wildcards (Artemis's rules).
    """

    def __init__(self, spec: str):
        self.spec = spec
        parts = [p.strip() for p in (spec or "").split(",") if p.strip()]
        self.include = tuple(p for p in parts if not p.startswith("!"))
        self.exclude = tuple(p[1:] for p in parts if p.startswith("!"))

    def __call__(self, address: str) -> bool:
        if any(address.startswith(p) for p in self.exclude):
            return False
        if not self.include:
            return True
        return any(address.startswith(p) for p in self.include)


def _parse(text):
    if not text:
        return None
    try:
        return parse_filter(text)
    except FilterError:
        return False  # a filter we cannot read matches nothing


@dataclass(eq=False)
class RemoteBinding:
    """A queue on node ``origin``, reached through the neighbour ``via``."""

    origin: str
    via: str
    address: str
    queue: str
    routing_type: RoutingType
    filter_text: str | None
    consumers: int
    consumer_filters: tuple | None
    #: hops from this node (1: on the neighbour itself)
    hops: int
    durable: bool = True
    filter: object = field(default=None, repr=False)
    parsed_consumer_filters: tuple | None = field(default=None, repr=False)
    #: whether the bridge to ``via`` is connected (Artemis ``isConnected``)
    connected: bool = True
    #: the cluster connection whose bridge learned it
    cluster: str = ""
    #: how the queue came to be on its node: admin, auto, temporary, subscription ("" unknown)
    kind: str = ""

    def __post_init__(self):
        self.filter = _parse(self.filter_text)
        self.set_consumers(self.consumers, self.consumer_filters)

    @property
    def key(self) -> tuple:
        return (self.origin, self.queue)

    @property
    def routing_name(self) -> str:
        return self.address if self.routing_type == _ANYCAST else self.queue

    def set_consumers(self, count: int, filters) -> None:
        self.consumers = count
        self.consumer_filters = None if filters is None else tuple(filters)
        if filters is None:
            self.parsed_consumer_filters = None
        else:
            self.parsed_consumer_filters = tuple(f for f in (_parse(t) for t in filters) if f is not None)

    def accepts(self, message) -> bool:
        """The binding's own (queue) filter lets the message in."""
        flt = self.filter
        if flt is None:
            return True
        return flt is not False and flt.matches(message)

    def has_matching_consumer(self, message) -> bool:
        """Artemis ``RemoteQueueBinding.isHighAcceptPriority``."""
        if self.consumers <= 0:
            return False
        filters = self.parsed_consumer_filters
        if filters is None or not filters:
            return True
        return any(f is not False and f.matches(message) for f in filters)


class _Local:
    """A local queue as a group member."""

    __slots__ = ("queue",)
    connected = True

    def __init__(self, queue):
        self.queue = queue

    def accepts(self, message) -> bool:
        flt = self.queue.filter
        return flt is None or flt.matches(message)

    def has_matching_consumer(self, message) -> bool:
        for consumer in self.queue.consumers:
            if getattr(consumer, "internal", False):
                continue  # a redistributor is not a consumer here
            if consumer.filter is None or consumer.filter.matches(message):
                return True
        return False


def _members(address, remote: list, routing_type) -> dict:
    """routing name -> [members] for one address, local queues first."""
    groups: dict = {}
    for queue in address.queues.values():
        rtype = queue.routing_type
        if routing_type is not None and rtype != routing_type:
            continue
        name = address.name if rtype == _ANYCAST else queue.name
        groups.setdefault((rtype, name), []).append(_Local(queue))
    for binding in remote:
        if routing_type is not None and binding.routing_type != routing_type:
            continue
        groups.setdefault((binding.routing_type, binding.routing_name), []).append(binding)
    return groups


def select(address, remote: list, message, routing_type, mode: str, positions: dict, *, local_preferred: bool = False):
    """The local queues and remote bindings a message goes to.

    ``positions`` keeps each group's round-robin position between calls (the
    caller owns it, one per address).  With ``local_preferred`` (the address
    setting ``local-delivery-preferred``) a group whose local queue has a
    consumer for the message keeps it here.  Returns ``(queues, bindings)``.
    """
    queues, bindings = [], []
    strict = mode == "STRICT"
    on_demand = mode == "ON_DEMAND"
    remote_allowed = mode in ("STRICT", "ON_DEMAND")
    for key, members in _members(address, remote, routing_type).items():
        if local_preferred:
            local = next(
                (m for m in members if m.__class__ is _Local and m.accepts(message) and m.has_matching_consumer(message)),
                None,
            )
            if local is not None:
                queues.append(local.queue)
                continue
        count = len(members)
        start = positions.get(key, 0)
        if start >= count:
            start = 0
        chosen = None
        low = -1
        position = start
        for _ in range(count):
            member = members[position]
            is_local = member.__class__ is _Local
            if (is_local or remote_allowed) and member.accepts(message):
                if count == 1 or (member.connected and (strict or member.has_matching_consumer(message))):
                    chosen = position
                    break
                if low == -1 or (on_demand and is_local):
                    low = position
            position = (position + 1) % count
        if chosen is None:
            chosen = low
        if chosen == -1 or chosen is None:
            continue
        positions[key] = (chosen + 1) % count
        member = members[chosen]
        if member.__class__ is _Local:
            queues.append(member.queue)
        else:
            bindings.append(member)
    return queues, bindings


def redistribution_target(address, remote: list, message, origin_queue):
    """A remote binding that should take a message its local queue cannot deliver.

    Artemis ``BindingsImpl.redistribute``: a member of the queue's group other
    than the queue itself, with a matching consumer, whose filter lets the
    message in.  None when there is none.
    """
    rtype = origin_queue.routing_type
    name = address.name if rtype == _ANYCAST else origin_queue.name
    for binding in remote:
        if binding.routing_type != rtype or binding.routing_name != name:
            continue
        if binding.connected and binding.accepts(message) and binding.has_matching_consumer(message):
            return binding
    return None


__all__ = ["AddressMatcher", "RemoteBinding", "select", "redistribution_target", "MAX_REMOTE_BINDINGS"]
