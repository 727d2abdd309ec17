"""Sans-IO: the cluster topology a clustered node announces to its CORE clients.

A client subscribes with SUBSCRIBE_TOPOLOGY(_V2) on channel 0 and waits for a
CLUSTER_TOPOLOGY with ``last`` set before it creates a session (core.md
section 3).  A node that is not clustered answers with itself alone, no
connectors (:func:`.responses.topology`).  A clustered node -- one whose
acceptor serves a cluster connection, as every TCP acceptor of an Artemis
node with a cluster connection does (``ClusterManager.getDefaultConnection``)
-- announces every member of the cluster and then keeps the client up to
date, as Artemis's ``CoreProtocolManager`` does through its
``ClusterTopologyListener``:

* at the subscription, one member-up packet per member, ``last`` set on the
  final one (``Topology.sendTopology``);
* when a member joins, or its connector changes, a member-up packet for it,
  ``last`` unset (``Topology.sendMemberUp`` tells listeners ``last=false``);
* when a member leaves, the exit form: CLUSTER_TOPOLOGY_V2 with ``exit`` set,
  the node id and the event id -- the V2 type even to a client that reads V4
  -- or the V1 exit to a client older than 122.

A member-up packet takes the newest form the client's version reads: V4 from
131 (with the server's version, which the client adopts), V3 from 125, V2
from 122, V1 before (``ChannelImpl.supports``).  A member's pair is its
primary connector -- the connector its cluster connection names
(``connector-ref``), which is how each member announces itself -- and no
backup (Junction's nodes have no backups in the topology).

Event ids: the client keys members by node id, ignores an up older than the
member's last departure and a departure older than the member's last up
(``Topology.updateMember``/``removeMember``).  Artemis stamps both with the
clock in ms; :class:`Membership` does too, and keeps each node's ids
strictly increasing should the clock step back, so a member that leaves and
comes back is always taken back.

:class:`Membership` holds the members (at most ``limit``,
:data:`MAX_TOPOLOGY_MEMBERS`) and turns each new view of the cluster into
:class:`MemberUp` and :class:`MemberDown` changes; :func:`announcement` and
:func:`change_packets` put them into packets for one client's version.  No
clock here: the caller passes the time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from junction.protocols.core.opening import netty_connector
from junction.protocols.core.packets import (
    ClusterTopology,
    ClusterTopologyV2,
    ClusterTopologyV3,
    ClusterTopologyV4,
)
from junction.protocols.core.values import TransportConfiguration
from junction.protocols.core.versions import (
    CLIENT_ID_VERSION,
    CURRENT_VERSION,
    DISCONNECT_V2_VERSION,
    TOPOLOGY_V2_VERSION,
)

__all__ = [
    "MAX_TOPOLOGY_MEMBERS",
    "MemberDown",
    "MemberUp",
    "Membership",
    "TopologyMember",
    "announced_connector",
    "announcement",
    "change_packets",
    "member_down",
    "member_up",
]

#: The members one node's topology holds (this node included); a member beyond
#: it is not announced (:attr:`Membership.left_out` counts them).  Artemis has
#: no such bound; a cluster this large is far past any Junction deployment, and
#: the bound keeps the topology, and the burst every subscriber gets, finite.
MAX_TOPOLOGY_MEMBERS = 1000
#: CLUSTER_TOPOLOGY_V3 (the scale-down group): from the version that reads it,
#: which is DISCONNECT_V2's (``ChannelImpl.supports``: both 125).
TOPOLOGY_V3_VERSION = DISCONNECT_V2_VERSION


@dataclass(frozen=True, slots=True)
class TopologyMember:
    """One member as a client is told it (Artemis ``TopologyMemberImpl``)."""

    node_id: str
    #: the member's own connector (its cluster connection's ``connector-ref``)
    primary: TransportConfiguration | None
    backup: TransportConfiguration | None = None
    #: when this view of the member was made (ms), the client's order of events
    unique_event_id: int = 0
    backup_group_name: str | None = None
    scale_down_group_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberUp:
    """A member joined, or what is known of it changed."""

    member: TopologyMember


@dataclass(frozen=True, slots=True)
class MemberDown:
    """A member left the cluster."""

    node_id: str
    unique_event_id: int


class Membership:
    """The members of one node's cluster, with the event ids their clients are told.

    :meth:`update` takes the whole current view (members without event ids,
    this node among them) and returns what changed, each change stamped.
    Members keep the order they joined in; at most ``limit`` are held.
    """

    __slots__ = ("_members", "_last_ids", "_limit", "left_out")

    def __init__(self, limit: int = MAX_TOPOLOGY_MEMBERS):
        if limit < 1:
            raise ValueError("a topology holds at least its own node")
        self._limit = limit
        self._members: dict[str, TopologyMember] = {}
        #: node id -> the last event id it was given (kept after it left: a return is newer)
        self._last_ids: dict[str, int] = {}
        #: members of the last view that were not held, for the limit
        self.left_out = 0

    @property
    def members(self) -> Mapping[str, TopologyMember]:
        """Node id -> member, in the order they joined."""
        return MappingProxyType(self._members)

    def update(self, view: Iterable[TopologyMember], now_ms: int) -> tuple[MemberUp | MemberDown, ...]:
        """Make ``view`` the members; the changes, departures first, then arrivals and changes."""
        wanted: dict[str, TopologyMember] = {}
        left_out = 0
        for member in view:
            if member.node_id in wanted:
                continue
            if len(wanted) >= self._limit:
                left_out += 1
                continue
            wanted[member.node_id] = dataclasses.replace(member, unique_event_id=0)
        self.left_out = left_out
        changes: list[MemberUp | MemberDown] = []
        for node_id in [n for n in self._members if n not in wanted]:
            del self._members[node_id]
            changes.append(MemberDown(node_id, self._stamp(node_id, now_ms)))
        for node_id, member in wanted.items():
            held = self._members.get(node_id)
            if held is not None and dataclasses.replace(held, unique_event_id=0) == member:
                continue
            stamped = dataclasses.replace(member, unique_event_id=self._stamp(node_id, now_ms))
            self._members[node_id] = stamped
            changes.append(MemberUp(stamped))
        self._forget_departed()
        return tuple(changes)

    def _stamp(self, node_id: str, now_ms: int) -> int:
        """The next event id of ``node_id``: the time, or one more than its last if that is later."""
        last = self._last_ids.get(node_id)
        stamp = int(now_ms) if last is None or now_ms > last else last + 1
        self._last_ids.pop(node_id, None)
        self._last_ids[node_id] = stamp  # most recent last: the oldest departures go first
        return stamp

    def _forget_departed(self) -> None:
        """Keep the ids of departed nodes bounded too (the oldest forgotten first)."""
        excess = len(self._last_ids) - 2 * self._limit
        if excess <= 0:
            return
        for node_id in [n for n in self._last_ids if n not in self._members][:excess]:
            del self._last_ids[node_id]


def announced_connector(name: str, host: str, port: int, params: Mapping | None = None) -> TransportConfiguration:
    """A TCP connector as a client is told it (a topology member, a redirect's target).

    Artemis's: its name, the Netty connector factory, ``host`` and ``port`` as
    the Strings its URI parser gives, then the URL's other parameters as
    Strings, in the URL's order.  Parameters whose name contains ``password``
    are left out (Artemis sends them whole): a client has no use for a
    node's key-store password.
    """
    rest = tuple(
        (str(key), str(value))
        for key, value in (params or {}).items()
        if key not in ("host", "port") and "password" not in str(key).lower()
    )
    return netty_connector(str(host), int(port), str(name), rest)


def member_up(version: int | None, member: TopologyMember, last: bool) -> ClusterTopology:
    """A member-up packet in the newest form ``version`` reads."""
    v = version or 0
    pair = (member.primary, member.backup)
    if v >= CLIENT_ID_VERSION:
        return ClusterTopologyV4(
            False, member.node_id, *pair, last, member.unique_event_id,
            member.backup_group_name, member.scale_down_group_name, CURRENT_VERSION,
        )  # fmt: skip
    if v >= TOPOLOGY_V3_VERSION:
        return ClusterTopologyV3(
            False, member.node_id, *pair, last, member.unique_event_id,
            member.backup_group_name, member.scale_down_group_name,
        )  # fmt: skip
    if v >= TOPOLOGY_V2_VERSION:
        return ClusterTopologyV2(False, member.node_id, *pair, last, member.unique_event_id, member.backup_group_name)
    return ClusterTopology(False, member.node_id, *pair, last)


def member_down(version: int | None, node_id: str, unique_event_id: int) -> ClusterTopology:
    """A departure: CLUSTER_TOPOLOGY_V2 with ``exit`` set (for every client from 122, V4
    readers included, as Artemis sends it), the V1 exit before."""
    if (version or 0) >= TOPOLOGY_V2_VERSION:
        return ClusterTopologyV2(True, node_id, unique_event_id=unique_event_id)
    return ClusterTopology(True, node_id)


def announcement(version: int | None, members: Iterable[TopologyMember]) -> list[ClusterTopology]:
    """What a new subscriber gets: every member, ``last`` on the final one."""
    held = list(members)
    return [member_up(version, m, i == len(held) - 1) for i, m in enumerate(held)]


def change_packets(version: int | None, changes: Iterable[MemberUp | MemberDown]) -> list[ClusterTopology]:
    """The packets telling a subscriber ``changes`` (an up's ``last`` unset, as Artemis's)."""
    out: list[ClusterTopology] = []
    for change in changes:
        if change.__class__ is MemberDown:
            out.append(member_down(version, change.node_id, change.unique_event_id))
        else:
            out.append(member_up(version, change.member, False))
    return out
