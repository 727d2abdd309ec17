"""Reactors for testing stores built on the group-commit writer
(:mod:`junction.brokercore.journal.groupcommit`): the journal and the page store.

* :class:`InlineReactor` -- a ``Clock`` whose ``callFromThread`` runs the
  call at once; with ``writer="inline"`` everything is deterministic.
* :class:`ThreadReactor` -- ``callFromThread`` from the writer thread queues
  the call; the test thread runs them, and the calls made with ``callLater(0)``
  (an adaptive writer's batches on the reactor), with
  :meth:`ThreadReactor.pump_until` (with a deadline, never a sleep).
* :func:`settle` -- run delayed calls (inline flushes) until none are left.
"""

from __future__ import annotations

import queue
import time

from twisted.internet.task import Clock


class InlineReactor(Clock):
    """A Clock whose callFromThread runs the call immediately."""

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


class ThreadReactor(Clock):
    """callFromThread from any thread queues; the test thread runs the calls."""

    def __init__(self):
        super().__init__()
        self.queued: queue.Queue = queue.Queue()  # not Clock.calls

    def callFromThread(self, f, *args, **kwargs):
        self.queued.put((f, args, kwargs))

    def pump_until(self, predicate, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("timed out waiting for the writer thread")
            if any(call.getTime() <= self.seconds() for call in self.getDelayedCalls()):
                self.advance(0)  # what the reactor thread would run now
                continue
            try:
                f, args, kwargs = self.queued.get(timeout=remaining)
            except queue.Empty:
                continue
            f(*args, **kwargs)


def settle(reactor: Clock) -> None:
    """Run delayed calls (inline flushes) until none are left."""
    for _ in range(1000):
        if not reactor.getDelayedCalls():
            return
        reactor.advance(0)
    raise AssertionError("delayed calls keep coming")
