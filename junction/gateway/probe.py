"""How a pool learns whether a target is fit for connections: the probe interface.

A *probe* looks at one :class:`~junction.gateway.targets.Target` and answers,
asynchronously, with a :class:`ProbeResult`.  It plays the part of Artemis's
``Target.connect()`` + ``checkReadiness()`` (``getAttribute("broker",
"Active")`` and, on first connect, ``"NodeID"``) and of its ``TargetProbe``\\ s
(LEAST_CONNECTIONS's ``broker.ConnectionCount``), merged into one answer so a
single management round trip can serve them all.

The :class:`~junction.gateway.pool.TargetMonitor` runs the probes every
check-period, bounds each call by :data:`PROBE_TIMEOUT` on the injected
clock, and turns the answers into ``target.ready`` / ``target.node_id`` /
``target.connection_count``.  The probe itself needs no clock of its own for
that; a probe that cannot reach its target should fail its Deferred (errback)
promptly rather than rely on the timeout.

A probe that connects to a target through a connector with
``proxyProtocolEnabled=true`` must open its connection with a PROXY
protocol v2 ``LOCAL`` header (:func:`junction.protocols.proxy.encode_v2_local`),
as a load balancer's health check does: the core's acceptor then accepts it
and keeps the probe's own address (:mod:`junction.gateway.amqp_probe` does).

The contract every probe must meet (the fake in the unit tests and the real
one alike) is written as ``TargetProbeContract`` in
``tests/unit/test_gateway_pool.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["PROBE_TIMEOUT", "ProbeResult", "TargetProbe"]

#: Seconds one probe call may take before the target is marked not ready:
#: Artemis's 3000 ms timeout on the management ``getAttribute`` requests
#: (``broker.NodeID``, ``broker.Active``, ``broker.ConnectionCount``).
PROBE_TIMEOUT = 3.0


@dataclass(frozen=True)
class ProbeResult:
    """What one probe call learnt about a target.

    ``active``: the core answered and is serving clients (Artemis's
    ``broker.Active``; a passive backup answers ``False``).  An auxiliary
    probe that has no say on activeness answers ``True``; ``False`` from any
    probe makes the target not ready.
    ``node_id``: the core's node id (``broker.NodeID``), or None if this probe
    does not read it.
    ``connection_count``: the core's current client connections
    (``broker.ConnectionCount``), or None if this probe does not read it.
    """

    active: bool
    node_id: str | None = None
    connection_count: int | None = None


@runtime_checkable
class TargetProbe(Protocol):
    """Checks targets for a pool.

    ``check(target)`` returns a Deferred firing with a :class:`ProbeResult`,
    or failing when the target cannot be reached or asked (refused
    connection, lost connection, authentication failure, error reply).  The
    caller may cancel the Deferred (on timeout or when the pool stops); the
    probe must then drop whatever that call still had pending.  The probe may
    keep a connection per target between calls (Artemis does); it must
    reconnect by itself on the next ``check`` after losing it.

    ``release(target)`` drops anything the probe holds for the target (its
    connection, its session).  It is called when the target leaves the pool
    or the pool stops; it must be idempotent and accept a target never checked.
    """

    def check(self, target):
        """A Deferred firing with the target's :class:`ProbeResult`."""

    def release(self, target) -> None:
        """Forget (disconnect) whatever is held for ``target``."""
