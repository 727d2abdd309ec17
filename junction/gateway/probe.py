"""How a pool learns whether a target is fit for connections: the probe interface.

A *probe* looks at one :class:`~junction.routing.targets.Target` and answers,
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

Which protocol a probe speaks is the target's business: a Junction core
answers on any of its acceptors, another broker perhaps only on its STOMP
port.  :mod:`junction.gateway.amqp_probe` and :mod:`junction.gateway.stomp_probe`
speak one protocol each (over the connection machinery of
:mod:`junction.gateway.probe_connection`); :mod:`junction.gateway.multi_probe`
picks between them per target, from the connector's ``probeProtocols=`` or,
without it, by trying AMQP then STOMP.  A probe that finds its peer speaks
something else fails with :class:`NotThisProtocol`, which is what lets the
next protocol be tried.

A target that answers the protocol's opening without saying Junction's node
id, activeness and connection count is another broker: it is ready, with
:func:`stand_in_node_id` for a node id, no connection count, and a ``note``
saying so (:class:`ProbeResult`).

The contract every probe must meet (the fake in the unit tests and the real
one alike) is written as ``TargetProbeContract`` in
``tests/unit/test_gateway_pool.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from twisted.internet import defer
from twisted.python.failure import Failure

__all__ = [
    "PROBE_TIMEOUT",
    "NotThisProtocol",
    "ProbeError",
    "ProbeResult",
    "TargetProbe",
    "another_broker",
    "answer_locally",
    "describe_failure",
    "stand_in_node_id",
]

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
    ``protocol``: the protocol the answer came over (``"AMQP"``, ``"STOMP"``),
    None for an answer that took no connection (the local target).
    ``note``: what the status should say about a target that is ready but
    not quite as expected (another broker: its node id stands in, its count
    is unknown), else None.
    """

    active: bool
    node_id: str | None = None
    connection_count: int | None = None
    protocol: str | None = None
    note: str | None = None


class ProbeError(Exception):
    """A check failed for a reason the probe can name.

    The message names the target and says why; ``reason`` says why alone
    (what the pool's status shows beside the target's name).
    """

    def __init__(self, message: str, *, reason: str | None = None):
        super().__init__(message)
        self.reason = reason if reason is not None else message


class NotThisProtocol(ProbeError):
    """The target does not speak the probe's protocol.

    Raised when the peer closed the connection without a word, answered with
    another protocol's bytes, or stayed silent for the silence limit a
    multi-protocol probe set: the next protocol may be tried.
    """


def stand_in_node_id(connector) -> str:
    """The node id a target that does not say its own is known by: ``tcp://host:port``.

    Derived from the connector's address alone (not its name, which is each
    gateway's own, nor the protocol the answer came over), so it is the same
    on every check, in every gateway whose connector points at that address,
    and in the router's persisted cache.  It cannot be taken for a core's
    node id (those have no ``://``).
    """
    host = str(getattr(connector, "host", None) or "localhost")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{getattr(connector, 'port', '?')}"


def another_broker(connector, protocol: str, product: str | None) -> ProbeResult:
    """The answer of a target that opened ``protocol`` without saying Junction's three things.

    It serves, so it is active; its node id stands in (:func:`stand_in_node_id`);
    its connection count is unknown; the note names what it said it is
    (``product``: its AMQP ``product`` property or STOMP ``server`` header).
    """
    return ProbeResult(
        active=True,
        node_id=stand_in_node_id(connector),
        protocol=protocol,
        note=f"not a Junction core ({product or protocol}): node id from the connector, "
        "connection count unknown",
    )


def answer_locally(local_status) -> defer.Deferred:
    """A local target's answer: ``local_status()`` (a ProbeResult or a Deferred of one), no network."""
    if local_status is None:
        return defer.fail(
            ProbeError("the local target cannot be checked: this probe was given no local_status")
        )
    return defer.maybeDeferred(local_status)


def describe_failure(failure: Failure) -> str:
    """Why a failed check left its target not ready, for the status (without the target's name).

    ``"probe timed out"`` (with what did not come in time, when the probe said
    it), or ``"probe failed: "`` and the probe's reason.
    """
    value = failure.value
    reason = getattr(value, "reason", None)
    if failure.check(defer.TimeoutError):
        return f"probe timed out: {reason}" if reason else "probe timed out"
    return f"probe failed: {reason or failure.getErrorMessage() or failure.type.__name__}"


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
