"""The garbage collector's settings for a node process (``junction run``).

A running node allocates container objects at a high rate (frames, messages,
references, Deferreds, event entries), nearly all freed by reference counting
as soon as they are done with.  CPython's default thresholds (700, 10, 10)
still start a young collection every 700 net allocations, and every tenth of
those also walks the middle generation, which on a busy node holds every
message waiting in a queue or for its journal sync.  Those walks find next to
nothing to free, yet they took about 7% of a durable node's CPU (12% with the
event log on) and each full one stopped it for 40-50 ms (docs/performance.md,
"Garbage collector").

So, once the node has started:

* :func:`tune` collects once and freezes what survives (the modules, config,
  listeners, recovered journal state: long-lived by construction) into the
  permanent generation, which no later collection walks;
* the thresholds become :data:`THRESHOLDS`.  The collector still runs, still
  frees reference cycles, only less often.  The price is bounded: at most
  :data:`YOUNG_LIMIT` unreachable cyclic objects wait in the young generation
  between collections (a few megabytes at worst), and the full collection
  keeps CPython's own guard (it runs only when the long-lived generation has
  grown by a quarter since the last one).

Setting ``JUNCTION_GC=default`` in the environment leaves the collector as
CPython has it (to compare, or to rule the tuning out when chasing memory).
Either way :func:`watch` times every collection from then on, and
:func:`status` (the node's ``/api/status`` ``collector``) shows the pauses.
"""

from __future__ import annotations

import gc
import os
import time

__all__ = ["ENV", "THRESHOLDS", "YOUNG_LIMIT", "status", "tune", "watch"]

#: young-generation allocations between collections (CPython's default: 700)
YOUNG_LIMIT = 20_000
#: gc.set_threshold's three values: young collections between middle ones, middle between full ones
THRESHOLDS = (YOUNG_LIMIT, 20, 20)
#: the environment variable that turns the tuning off (value ``default``)
ENV = "JUNCTION_GC"


def tune(environ=None) -> bool:
    """Freeze what the started node holds and raise the thresholds; False when turned off."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV, "").strip().lower() == "default":
        return False
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return True


class Pauses:
    """A ``gc.callbacks`` entry: the time each generation's collections took, in total and at most.

    A collection holds the GIL from start to stop, so the two calls of one
    collection are never interleaved with another's.
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self._started = 0.0
        self.collections = [0, 0, 0]
        self.total_s = [0.0, 0.0, 0.0]
        self.longest_s = [0.0, 0.0, 0.0]

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = self.clock()
            return
        took = self.clock() - self._started
        generation = info["generation"]
        self.collections[generation] += 1
        self.total_s[generation] += took
        if took > self.longest_s[generation]:
            self.longest_s[generation] = took


#: the process's Pauses once :func:`watch` ran
_pauses: Pauses | None = None


def watch() -> Pauses:
    """Time every collection from now on (once per process; the same Pauses after)."""
    global _pauses
    if _pauses is None:
        _pauses = Pauses()
        gc.callbacks.append(_pauses)
    return _pauses


def status() -> dict:
    """The collector as the node's status shows it.

    ``thresholds`` and ``frozen`` as :mod:`gc` has them, ``collections`` per
    generation since the process began; once :func:`watch` ran, the
    collections since then with their time in total and the longest one.
    """
    out = {
        "thresholds": list(gc.get_threshold()),
        "frozen": gc.get_freeze_count(),
        "collections": [generation["collections"] for generation in gc.get_stats()],
    }
    if _pauses is not None:
        out["watched"] = {
            "collections": list(_pauses.collections),
            "pause_s": [round(s, 6) for s in _pauses.total_s],
            "longest_pause_ms": [round(s * 1000.0, 3) for s in _pauses.longest_s],
        }
    return out
