"""``/api/queues/NAME/groups``: a queue's message groups (Artemis's ``QueueControl``
``listGroupsAsJSON``, ``resetGroup``, ``resetAllGroups``).

``GET /api/queues/NAME/groups`` lists which consumer owns each group (at most
:data:`MAX_LISTED_GROUPS`, ``truncated`` when there are more); ``DELETE
/api/queues/NAME/groups`` forgets every group's owner and ``DELETE
/api/queues/NAME/groups/GROUP`` one group's (percent-encode a ``/`` in a group id),
so the group's next message picks an owner anew.  A reset needs ``manage``, as
every change through the API.  See docs/management.md and docs/grouping.md.
"""

from __future__ import annotations

from junction.management.http import authorize_change, respond

__all__ = ["MAX_LISTED_GROUPS", "render_groups"]

#: the most groups one listing returns (a queue's group table is unbounded with group-buckets -1)
MAX_LISTED_GROUPS = 10_000


def render_groups(request, node, name: str, rest: list[str]) -> bytes:
    """Answer ``GET``/``DELETE`` on ``/api/queues/<name>/groups[/<group>]`` (``rest`` is what
    follows ``groups``)."""
    server = getattr(node, "server", None)
    queue = server.queues.get(name) if server is not None else None
    if queue is None or name.startswith("$.junction.") or len(rest) > 1:
        return respond(request, 404, {"error": f"queue {name} does not exist"})
    groups = queue.groups
    if request.method == b"DELETE":
        denied = authorize_change(request, node)
        if denied is not None:
            return denied
        group = rest[0] if rest else None
        if groups is not None:
            groups.reset(group)
            queue.deliver_soon()  # a message waiting on the old owner may go now
        return respond(request, 200, {"queue": name, "reset": group if group is not None else "all"})
    if request.method not in (b"GET", b"HEAD"):
        request.setHeader(b"Allow", b"GET, HEAD, DELETE")
        return respond(request, 405, {"error": "GET or DELETE"})
    owners = groups.table.to_map() if groups is not None else {}
    if rest:
        owners = {rest[0]: owners[rest[0]]} if rest[0] in owners else {}
    listed = sorted(owners.items())[:MAX_LISTED_GROUPS]
    return respond(
        request,
        200,
        {
            "queue": name,
            "grouping": groups is not None,
            "group_buckets": (getattr(groups.table, "buckets", -1) if groups is not None else 0),
            "group_count": len(groups.table) if groups is not None else 0,
            "groups": [{"group": g, "consumer": c.id} for g, c in listed],
            "truncated": len(owners) > len(listed),
        },
    )
