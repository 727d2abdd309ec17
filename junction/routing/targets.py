"""What a connection router routes to: targets, and the results of a routing decision.

The vocabulary is Artemis's (``core/server/routing``): a *target* is a broker
core a connection may be sent to -- reached through a connector, or the
*local* target (the broker core embedded in this process); a *pool* holds the
targets and knows which are ready; a *policy* picks one for a *key*; the
router's answer is a :class:`RouterResult`.

These types are shared by the router, the pools, the policies and the
management API, so they live apart from all of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Target", "RouterStatus", "RouterResult", "Pool"]


@dataclass(eq=False)
class Target:
    """A broker core a router can send connections to.

    ``connector`` is the :class:`junction.config.model.Connector` that reaches
    it (None for the local target).  ``node_id`` is the core's node id, learned
    by the pool's probe (None until then); two gateways agree on a target by
    its node id.  ``ready``: reachable, active (a passive backup is not ready)
    and every probe passed.  ``connection_count``: the core's current client
    connections as the last probe read them (None: unknown), for
    LEAST_CONNECTIONS.  ``attributes`` holds what probes learn beyond that.
    Identity is the object: a pool keeps one Target per member.
    """

    connector: object | None = None
    node_id: str | None = None
    local: bool = False
    ready: bool = False
    connection_count: int | None = None
    attributes: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The connector's name, or ``local``."""
        if self.local or self.connector is None:
            return "local"
        return getattr(self.connector, "name", "?")

    def __repr__(self) -> str:
        state = "ready" if self.ready else "not ready"
        return f"<Target {self.name} node={self.node_id} {state}>"


class RouterStatus(enum.Enum):
    """Artemis's ``RoutingResult.Status``."""

    OK = "OK"
    #: no target (none ready, quorum not met, or the policy chose none): "not ready"
    REFUSED_UNAVAILABLE = "REFUSED_UNAVAILABLE"
    #: the key is not for this router's targets (no policy or no pool): "rejected this connection"
    REFUSED_USE_ANOTHER = "REFUSED_USE_ANOTHER"


@dataclass(frozen=True)
class RouterResult:
    """A routing decision: the status and, when OK, the target."""

    status: RouterStatus
    target: Target | None = None

    @property
    def ok(self) -> bool:
        return self.status is RouterStatus.OK


class Pool(Protocol):
    """What a router needs from a pool (static, discovery or cluster)."""

    def get_targets(self):
        """A Deferred firing with the ready targets, in the pool's order.

        Fewer than ``quorum-size`` ready: waits (polling every 100 ms) up to
        ``quorum-timeout``, then fires with an empty list.
        """

    def get_ready_target(self, node_id: str) -> Target | None:
        """The ready target with this node id, at once and without the quorum (the cache path)."""
