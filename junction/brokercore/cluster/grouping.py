"""Sans-IO: the cluster's grouping handlers, LOCAL and REMOTE, as Artemis decides with them.

With message grouping across a cluster, one node (the LOCAL handler) decides, for each group
of each queue name, which node's queue takes the group's messages; every other node (a REMOTE
handler) asks it, caches the answers and routes by them.  This module is the decision state
and its rules only (Artemis ``LocalGroupingHandler``, ``RemoteGroupingHandler``,
``GroupHandlingAbstract``; ``shared/reference/grouping.md`` sections 3-6): no I/O, no reactor.
Each call returns what the caller must do as effects (frozen dataclasses below): persist or
forget a decision in the LOCAL node's journal, send a proposal, a response or an unproposal
over the cluster links, tell a local queue to drop a group's pin.  Time comes in as
milliseconds from the caller's clock.

Names, as Artemis forms them (section 3):

* the *full group id* of group ``g`` on queue ``q`` is ``g.q`` (:func:`full_group_id`): one
  decision per group and queue name across the cluster;
* a queue's *cluster name* is its name followed by its node's id (:func:`cluster_name`);
* a :class:`Proposal` names a full group id and the cluster name the proposer would route
  to; the :class:`Response` repeats both and, if the group was already bound elsewhere,
  names that binding as ``alternative``: the chosen binding is :attr:`Response.chosen`.

The LOCAL handler's first proposal for a group wins and is persisted before it is answered
(:class:`Persist`, synced: Artemis's GROUP_RECORD); a later one gets the existing binding as
the alternative.  A binding's ``time_used`` is touched by every use; with ``group_timeout``
(ms, -1 never) the reaper (:meth:`LocalGroupingHandler.reap`) forgets the bindings unused for
longer and unproposes them.  A queue whose binding goes away (:meth:`binding_removed`) takes
its groups with it.  After a restart the handler reloads its decisions
(:meth:`LocalGroupingHandler.load`) and says which bindings it still waits to see
(:attr:`LocalGroupingHandler.awaiting`): the node starts its acceptors only once they are all
there or the handler's ``timeout`` passed, as Artemis's ``awaitBindings``.

A REMOTE handler answers from its cache; on a miss it sends a :class:`SendProposal` and
keeps the proposal pending (one per group: a second miss of the same group sends nothing
more) until a response arrives (:meth:`RemoteGroupingHandler.proposed`) or ``timeout`` ms
pass (:meth:`RemoteGroupingHandler.expire`).  While the LOCAL node cannot be reached it keeps
routing the groups it knows, and holds new ones for up to ``timeout`` (then the caller
reports the failure): a group is never decided by two nodes.  With ``group_timeout`` a
cached answer is refreshed by a new proposal when it is used more than that long after the
answer or the last refresh, which touches the LOCAL binding (so a REMOTE node's group
timeout should be at most half the LOCAL one).

Limits: :data:`MAX_PENDING` proposals may wait on a REMOTE node at once (a send past it is
refused at once, not queued); the LOCAL table has no limit of its own beyond the reaper, as in
Artemis (one entry per group and queue name in use).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_PENDING",
    "Proposal",
    "Response",
    "GroupBinding",
    "Persist",
    "Forget",
    "SendProposal",
    "SendResponse",
    "SendUnproposal",
    "Unproposed",
    "LocalGroupingHandler",
    "RemoteGroupingHandler",
    "TooManyPending",
    "full_group_id",
    "cluster_name",
    "split_full_group_id",
]

#: Proposals a REMOTE handler keeps waiting for an answer at once.
MAX_PENDING = 10_000


def full_group_id(group_id: str, queue_name: str) -> str:
    """The cluster-wide id of ``group_id`` on queues named ``queue_name`` (``g.q``)."""
    return f"{group_id}.{queue_name}"


def split_full_group_id(full_id: str, queue_name: str) -> str | None:
    """The group id of ``full_id`` if it belongs to queues named ``queue_name``, else None."""
    suffix = "." + queue_name
    return full_id[: -len(suffix)] if full_id.endswith(suffix) else None


def cluster_name(queue_name: str, node_id: str) -> str:
    """A queue's cluster name: its name followed by its node's id, as Artemis forms it."""
    return queue_name + node_id


@dataclass(frozen=True, slots=True)
class Proposal:
    """Route full group ``group_id`` to ``cluster_name`` (None: only ask what is decided)."""

    group_id: str
    cluster_name: str | None


@dataclass(frozen=True, slots=True)
class Response:
    """The decision for ``group_id``: ``alternative`` if it was bound elsewhere already."""

    group_id: str
    cluster_name: str
    alternative: str | None = None

    @property
    def chosen(self) -> str:
        """The cluster name the group's messages go to."""
        return self.alternative if self.alternative is not None else self.cluster_name


@dataclass(slots=True)
class GroupBinding:
    """One decision of the LOCAL handler: its journal id once persisted, when last used."""

    group_id: str
    cluster_name: str
    time_used: int
    record_id: int | None = None


# -- effects ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Persist:
    """LOCAL: store this decision (synced) before the response goes out."""

    group_id: str
    cluster_name: str


@dataclass(frozen=True, slots=True)
class Forget:
    """LOCAL: delete these decisions' records (one transaction)."""

    bindings: tuple[GroupBinding, ...]


@dataclass(frozen=True, slots=True)
class SendProposal:
    proposal: Proposal


@dataclass(frozen=True, slots=True)
class SendResponse:
    response: Response


@dataclass(frozen=True, slots=True)
class SendUnproposal:
    group_id: str
    cluster_name: str


@dataclass(frozen=True, slots=True)
class Unproposed:
    """The local queue of ``cluster_name`` drops the pin of full group ``group_id``."""

    group_id: str
    cluster_name: str


class TooManyPending(Exception):
    """A REMOTE handler already waits for :data:`MAX_PENDING` answers."""


# -- LOCAL -------------------------------------------------------------------------------------------


class LocalGroupingHandler:
    """The one node that decides (see the module doc)."""

    TYPE = "LOCAL"

    def __init__(self, *, timeout: int = 5000, group_timeout: int = -1):
        self.timeout = timeout
        self.group_timeout = group_timeout
        self._by_group: dict[str, GroupBinding] = {}
        self._by_cluster: dict[str, dict[str, GroupBinding]] = {}
        #: cluster names named by reloaded decisions whose binding has not been seen yet
        self.awaiting: set[str] = set()

    # the decisions
    def propose(self, proposal: Proposal, now: int) -> tuple[Response | None, list]:
        """Decide (or look up, for a proposal without a cluster name); the effects."""
        existing = self._by_group.get(proposal.group_id)
        if proposal.cluster_name is None:
            if existing is None:
                return None, []
            existing.time_used = now
            return Response(existing.group_id, existing.cluster_name), []
        if existing is not None:
            existing.time_used = now
            return Response(proposal.group_id, proposal.cluster_name, existing.cluster_name), []
        self._add(GroupBinding(proposal.group_id, proposal.cluster_name, now))
        return Response(proposal.group_id, proposal.cluster_name), [Persist(proposal.group_id, proposal.cluster_name)]

    def receive(self, proposal: Proposal, now: int) -> tuple[Response | None, list]:
        """A proposal from another node: decided as :meth:`propose`, and the answer sent."""
        response, effects = self.propose(proposal, now)
        if response is not None:
            effects.append(SendResponse(response))
        return response, effects

    def get_proposal(self, group_id: str, now: int, touch: bool = True) -> Response | None:
        binding = self._by_group.get(group_id)
        if binding is None:
            return None
        if touch:
            binding.time_used = now
        return Response(binding.group_id, binding.cluster_name)

    def persisted(self, group_id: str, record_id: int) -> None:
        """The journal gave the decision of ``group_id`` this record id."""
        binding = self._by_group.get(group_id)
        if binding is not None:
            binding.record_id = record_id

    # what undoes them
    def remove(self, group_id: str, cluster_name: str) -> list:
        """Forget one decision (a binding that was not there after all); the effects."""
        binding = self._by_group.get(group_id)
        if binding is None or binding.cluster_name != cluster_name:
            return []
        return self._forget_all([binding])

    def binding_removed(self, cluster_name: str) -> list:
        """A queue went away: its groups go with it."""
        bindings = list(self._by_cluster.get(cluster_name, {}).values())
        return self._forget_all(bindings)

    def binding_added(self, cluster_name: str) -> None:
        self.awaiting.discard(cluster_name)

    def reap(self, now: int) -> list:
        """Forget the decisions unused for longer than ``group_timeout`` (none if -1)."""
        if self.group_timeout <= 0:
            return []
        limit = now - self.group_timeout
        return self._forget_all([b for b in self._by_group.values() if b.time_used < limit])

    # start-up
    def load(self, bindings, now: int) -> None:
        """The decisions of the journal; each one's binding is awaited (:attr:`awaiting`)."""
        for group_id, name, record_id in bindings:
            self._add(GroupBinding(group_id, name, now, record_id))
            self.awaiting.add(name)

    @property
    def groups(self) -> dict[str, str]:
        """Full group id -> cluster name, for management."""
        return {g: b.cluster_name for g, b in self._by_group.items()}

    def _add(self, binding: GroupBinding) -> None:
        self._by_group[binding.group_id] = binding
        self._by_cluster.setdefault(binding.cluster_name, {})[binding.group_id] = binding

    def _drop(self, binding: GroupBinding) -> None:
        del self._by_group[binding.group_id]
        of_cluster = self._by_cluster[binding.cluster_name]
        del of_cluster[binding.group_id]
        if not of_cluster:
            del self._by_cluster[binding.cluster_name]

    def _forget_all(self, bindings: list[GroupBinding]) -> list:
        if not bindings:
            return []
        effects: list = [Forget(tuple(bindings))]
        for binding in bindings:
            self._drop(binding)
            effects.append(Unproposed(binding.group_id, binding.cluster_name))
            effects.append(SendUnproposal(binding.group_id, binding.cluster_name))
        return effects


# -- REMOTE ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Cached:
    response: Response
    time_used: int


@dataclass(slots=True)
class _Pending:
    proposal: Proposal
    deadline: int


class RemoteGroupingHandler:
    """A node that asks the LOCAL one (see the module doc)."""

    TYPE = "REMOTE"

    def __init__(self, *, timeout: int = 5000, group_timeout: int = -1):
        self.timeout = timeout
        self.group_timeout = group_timeout
        self._cache: dict[str, _Cached] = {}
        self._pending: dict[str, _Pending] = {}

    def propose(self, proposal: Proposal, now: int) -> tuple[Response | None, list]:
        """The cached decision (refreshed past ``group_timeout``), or None and, unless this
        group is asked for already, the proposal to send; wait for :meth:`proposed`."""
        cached = self._cache.get(proposal.group_id)
        if cached is not None:
            return cached.response, self._check_timeout(cached, now)
        if proposal.group_id in self._pending:
            return None, []
        if len(self._pending) >= MAX_PENDING:
            raise TooManyPending(f"{MAX_PENDING} grouping proposals already wait for an answer")
        self._pending[proposal.group_id] = _Pending(proposal, now + self.timeout)
        return None, [SendProposal(proposal)]

    def get_proposal(self, group_id: str, now: int, touch: bool = True) -> tuple[Response | None, list]:
        """The cached decision and, with ``touch``, the refresh it may be due."""
        cached = self._cache.get(group_id)
        if cached is None:
            return None, []
        return cached.response, self._check_timeout(cached, now) if touch else []

    def proposed(self, response: Response, now: int) -> bool:
        """A decision arrived (for this node's proposal or another's); True if one waited."""
        self._cache[response.group_id] = _Cached(response, now)
        return self._pending.pop(response.group_id, None) is not None

    def expire(self, now: int) -> list[Proposal]:
        """The proposals that waited ``timeout`` without an answer (no longer pending)."""
        late = [g for g, p in self._pending.items() if p.deadline <= now]
        return [self._pending.pop(g).proposal for g in late]

    def remove(self, group_id: str, cluster_name: str) -> list:
        """An unproposal arrived: forget the cached decision; the local queue drops its pin."""
        cached = self._cache.get(group_id)
        if cached is None or cached.response.chosen != cluster_name:
            return []
        del self._cache[group_id]
        return [Unproposed(group_id, cluster_name)]

    def binding_removed(self, cluster_name: str) -> None:
        for group_id in [g for g, c in self._cache.items() if c.response.chosen == cluster_name]:
            del self._cache[group_id]

    def resend_pending(self, now: int) -> list:
        """After the links were reset: every pending proposal again, with a fresh deadline."""
        effects = []
        for pending in self._pending.values():
            pending.deadline = now + self.timeout
            effects.append(SendProposal(pending.proposal))
        return effects

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _check_timeout(self, cached: _Cached, now: int) -> list:
        """Past ``group_timeout`` since the answer or the last refresh: propose again, which
        touches the LOCAL decision (its clock is not touched by mere use, as in Artemis)."""
        if self.group_timeout > 0 and cached.time_used + self.group_timeout < now:
            cached.time_used = now
            return [SendProposal(Proposal(cached.response.group_id, cached.response.cluster_name))]
        return []
