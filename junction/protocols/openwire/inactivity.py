"""Sans-IO: KeepAliveInfo and the inactivity monitor of one OpenWire connection.

The negotiated ``MaxInactivityDuration`` (the smaller of the two offers, 0
disabling it) bounds how long either end may stay silent (openwire.md
section 2).  The client's ``InactivityMonitor`` sends a KeepAliveInfo when it
has written nothing for a third of it, and fails the connection when nothing
at all arrived for the whole of it; so the server must write something at
least that often, and may end a connection that stopped talking.  This
monitor does both, as Artemis's ``OpenWireConnection`` does:

* **keep-alive** -- when nothing was sent for half the duration,
  :meth:`InactivityMonitor.poll` returns :class:`SendKeepAlive` (write a
  KeepAliveInfo with ``response_required`` false);
* **read check** -- from ``MaxInactivityDurationInitalDelay`` after the
  negotiation on, nothing received for a whole duration returns
  :class:`InactivityTimeout` (close the connection; a client that is alive
  sends a KeepAliveInfo at least every two thirds of it).

No clock here: the caller passes ``now`` (seconds, any monotonic origin) to
every call, calls :meth:`~InactivityMonitor.poll` at
:meth:`~InactivityMonitor.next_deadline`, and tells the monitor when bytes
arrived (:meth:`~InactivityMonitor.received`) and left
(:meth:`~InactivityMonitor.sent`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InactivityMonitor", "InactivityTimeout", "SendKeepAlive"]


@dataclass(frozen=True, slots=True)
class SendKeepAlive:
    """Nothing was written for ``idle`` seconds: write a KeepAliveInfo."""

    idle: float


@dataclass(frozen=True, slots=True)
class InactivityTimeout:
    """Nothing arrived for ``idle`` seconds, over ``limit``: close the connection."""

    idle: float
    limit: float

    def message(self) -> str:
        """The reason, in the words of the client's own monitor."""
        return f"Channel was inactive for too (>{int(self.limit * 1000)}) long"


class InactivityMonitor:
    """Keep-alives and the read check for one connection, on the caller's clock.

    ``max_inactivity_ms`` and ``initial_delay_ms`` are the negotiated
    ``MaxInactivityDuration`` and ``MaxInactivityDurationInitalDelay``;
    ``now`` is when the wire format was settled.
    """

    __slots__ = ("_limit", "_write_every", "_checks_from", "_last_in", "_last_out", "_timed_out")

    def __init__(self, max_inactivity_ms: int, initial_delay_ms: int, now: float) -> None:
        self._limit = max(0, max_inactivity_ms) / 1000.0
        self._write_every = self._limit / 2
        self._checks_from = now + max(0, initial_delay_ms) / 1000.0
        self._last_in = now
        self._last_out = now
        self._timed_out = False

    @property
    def enabled(self) -> bool:
        """False when either end offered no duration: nothing is checked or sent."""
        return self._limit > 0

    @property
    def limit(self) -> float:
        """The read limit, in seconds (0: disabled)."""
        return self._limit

    def received(self, now: float) -> None:
        """Bytes arrived from the peer (any command counts, not only KeepAliveInfo)."""
        if now > self._last_in:
            self._last_in = now

    def sent(self, now: float) -> None:
        """Bytes went out to the peer."""
        if now > self._last_out:
            self._last_out = now

    def _read_deadline(self) -> float:
        return max(self._last_in, self._checks_from) + self._limit

    def next_deadline(self) -> float | None:
        """When :meth:`poll` has something to say at the earliest (None: never)."""
        if not self.enabled or self._timed_out:
            return None
        return min(self._last_out + self._write_every, self._read_deadline())

    def poll(self, now: float) -> list:
        """What is due at ``now``: :class:`InactivityTimeout` (once), :class:`SendKeepAlive`."""
        if not self.enabled or self._timed_out:
            return []
        if now >= self._read_deadline():
            self._timed_out = True
            return [InactivityTimeout(now - self._last_in, self._limit)]
        due = []
        if now - self._last_out >= self._write_every:
            due.append(SendKeepAlive(now - self._last_out))
            self._last_out = now
        return due
