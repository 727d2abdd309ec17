"""The synthetic log's restarts: each core's ``node.started``, and what it recovers at each.

Each core restarts at the times :func:`~junction.pipeline.synth.generate`
spreads over the log; the first chunk writes the ``node.started`` lines, and
every chunk writes a ``message.recovered`` line for each message reference a
core held across one of its restarts.  A message that a restart finds
unacknowledged and does not recover is lost: the planting of losses asks
:meth:`Restarts.next_after` when that is.
"""

from __future__ import annotations

from junction.events.schema import SCHEMA_VERSION

__all__ = ["Restarts"]


class Restarts:
    """The cores' restarts as one chunk sees them, and the lines they cause.

    ``restarts``: ``[core, epoch us]`` pairs in order; ``files`` and
    ``node_part`` (the ``"node"``/``"node_id"`` fields) are per core; the
    chunk's ``counts`` are updated in place.  ``started``: write the
    ``node.started`` lines (the first chunk does).
    """

    def __init__(self, world, restarts, files, node_part: list[str], counts: dict, started: bool):
        self.files = files
        self.node_part = node_part
        self.counts = counts
        #: per core, its restart times in order
        self.at: list[list[int]] = [[] for _ in world.cores]
        for core, at_us in restarts:
            self.at[core].append(at_us)
            if started:
                kept = ",".join(sorted(q.jname for a in world.addresses for q in a.queues if q.core == core))
                files[core].lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"node.started","ts":{at_us / 1000.0!r},{node_part[core]},'
                    f'"recovered":null,"settled":null,"persistent":true,"queues":[{kept}],"paged":[]}}'
                )
                counts["node.started"] += 1

    def next_after(self, core: int, after_us: int):
        """The first restart of ``core`` after ``after_us``, or None."""
        for at_us in self.at[core]:
            if at_us > after_us:
                return at_us
        return None

    def held(self, core, q, mid, address, from_us, until_us, delivered_at=()):
        """``message.recovered`` of a reference held from ``from_us`` to ``until_us`` (None:
        for ever) at each restart of its core in between."""
        for at_us in self.at[core]:
            if from_us < at_us and (until_us is None or at_us < until_us):
                count = sum(1 for d in delivered_at if d < at_us)
                self.files[core].lines.append(
                    f'{{"v":{SCHEMA_VERSION},"kind":"message.recovered","ts":{at_us / 1000.0!r},{self.node_part[core]},'
                    f'"message_id":"{mid}","duplicate_id":null,"address":{address.jname},"queue":{q.jname},'
                    f'"durable":true,"delivery_count":{count}}}'
                )
                self.counts["message.recovered"] += 1
