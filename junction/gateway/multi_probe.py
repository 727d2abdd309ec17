"""A pool's readiness probe over the protocol each target serves.

Artemis's pools probe their targets over CORE, which every Artemis acceptor
serves by default.  A Junction pool's targets may serve AMQP, STOMP or both
(a core's acceptor with ``protocols=STOMP``, another broker's STOMP port), so
:class:`MultiProtocolProbe` holds one probe per protocol
(:class:`~junction.gateway.amqp_probe.AmqpTargetProbe`,
:class:`~junction.gateway.stomp_probe.StompTargetProbe`) and, for each
target, tries them in an order:

* the connector's ``probeProtocols=`` (``AMQP``, ``STOMP`` or both, in the
  order given; :attr:`junction.config.model.Connector.probe_protocols`), or,
  without it, :data:`DEFAULT_PROBE_PROTOCOLS`: AMQP, then STOMP;
* the protocol that answered the target's last successful check goes first
  (remembered per target until the target is released), so a STOMP-only
  target is not sent an AMQP header every check-period once it is known.

The next protocol is tried only when the previous one found the target does
not speak it (:class:`~junction.gateway.probe.NotThisProtocol`: the peer
closed without a word, answered with another protocol's bytes, or said
nothing for :data:`PROTOCOL_SILENCE` seconds -- a server that waits for a
line end, as some STOMP servers do on an AMQP header).  Any other failure (a
refused connection, a refused login, a timeout) is the target's answer: the
pool reports it.  A failure after a fallback says what each protocol found,
so the status tells a target that speaks neither protocol from one that is
down.

All attempts of one check share one deadline, ``timeout`` (the pool's
:data:`~junction.gateway.probe.PROBE_TIMEOUT`, 3 s): each attempt gets what is
left, and one with another protocol after it gets at most
:data:`PROTOCOL_SILENCE` (and at most half of what is left) to say its first
byte.  Cancelling the check cancels the attempt in flight.

The local target is answered by ``local_status``, without the network.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

from twisted.internet import defer
from twisted.python.failure import Failure

from junction.gateway.probe import PROBE_TIMEOUT, NotThisProtocol, ProbeResult, answer_locally

__all__ = [
    "DEFAULT_PROBE_PROTOCOLS",
    "PROTOCOL_SILENCE",
    "MultiProtocolProbe",
    "build_readiness_probe",
]

log = logging.getLogger("junction.gateway.probe")

#: The order protocols are tried in when a connector has no ``probeProtocols=``.
DEFAULT_PROBE_PROTOCOLS = ("AMQP", "STOMP")
#: Seconds an attempt that has another protocol after it waits for the
#: target's first byte before taking it for a peer that speaks something else.
#: A server answers a protocol header or a CONNECT frame at once; 1 s leaves
#: 2 s of the 3 s check to the next protocol.
PROTOCOL_SILENCE = 1.0


def build_readiness_probe(
    *, username=None, password=None, reactor=None, local_status=None, timeout=PROBE_TIMEOUT
) -> MultiProtocolProbe:
    """The probe a node gives each pool: AMQP and STOMP with the pool's credentials."""
    from junction.gateway.amqp_probe import AmqpTargetProbe
    from junction.gateway.stomp_probe import StompTargetProbe

    probes = {
        cls.protocol: cls(username=username, password=password, reactor=reactor, timeout=timeout)
        for cls in (AmqpTargetProbe, StompTargetProbe)
    }
    return MultiProtocolProbe(probes, reactor=reactor, timeout=timeout, local_status=local_status)


class MultiProtocolProbe:
    """Checks each target over the protocols it serves (see the module docstring).

    ``probes`` maps a protocol name (as ``probeProtocols=`` spells it) to a
    probe whose ``check(target, timeout=, silence=)`` speaks it
    (:class:`~junction.gateway.probe_connection.ConnectionProbe`).
    ``default_order``: the order without ``probeProtocols=``.
    """

    def __init__(
        self,
        probes: Mapping[str, object],
        *,
        default_order: tuple[str, ...] = DEFAULT_PROBE_PROTOCOLS,
        reactor=None,
        timeout: float = PROBE_TIMEOUT,
        silence: float = PROTOCOL_SILENCE,
        local_status: Callable[[], ProbeResult] | None = None,
    ):
        if not probes:
            raise ValueError("a multi-protocol probe needs at least one probe")
        if not timeout > 0:
            raise ValueError(f"timeout must be greater than 0 s, got {timeout!r}")
        order = tuple(p for p in default_order if p in probes)
        if not order:
            raise ValueError(f"none of {default_order} has a probe (probes for {sorted(probes)})")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.probes = dict(probes)
        self.default_order = order
        self.reactor = reactor
        self.timeout = timeout
        self.silence = silence
        self.local_status = local_status
        #: target -> the protocol of its last answer (dropped on release)
        self._answered: dict = {}

    def __repr__(self) -> str:
        return f"<MultiProtocolProbe {','.join(self.default_order)}>"

    # -- TargetProbe ---------------------------------------------------------------------

    def order_for(self, target) -> tuple[str, ...]:
        """The protocols a check of ``target`` tries, in order."""
        connector = getattr(target, "connector", None)
        configured = tuple(
            p for p in (getattr(connector, "probe_protocols", None) or ()) if p in self.probes
        )
        order = configured or self.default_order
        last = self._answered.get(target)
        if last in order and order[0] != last:
            order = (last,) + tuple(p for p in order if p != last)
        return order

    def answered_by(self, target) -> str | None:
        """The protocol the target's last successful check spoke (None: none yet)."""
        return self._answered.get(target)

    def check(self, target) -> defer.Deferred:
        if getattr(target, "local", False):
            return answer_locally(self.local_status)
        return _Run(self, target, self.order_for(target)).deferred

    def release(self, target) -> None:
        self._answered.pop(target, None)
        for probe in self.probes.values():
            probe.release(target)

    def outstanding(self, target=None) -> list:
        return [c for probe in self.probes.values() for c in probe.outstanding(target)]


class _Run:
    """One check of one target: the attempts, one protocol after the other, under one deadline."""

    def __init__(self, multi: MultiProtocolProbe, target, order: tuple[str, ...]):
        self.multi = multi
        self.target = target
        self.order = order
        self.index = 0
        #: (protocol, reason) of the attempts that found the target does not speak it
        self.tried: list[tuple[str, str]] = []
        self.current: defer.Deferred | None = None
        self.cancelled = False
        self.deadline = multi.reactor.seconds() + multi.timeout
        self.deferred = defer.Deferred(self._cancel)
        self._attempt()

    def _attempt(self) -> None:
        protocol = self.order[self.index]
        remaining = self.deadline - self.multi.reactor.seconds()
        if remaining <= 0:
            problem = defer.TimeoutError(f"{self.target.name}: no time left to try {protocol}")
            problem.reason = f"no time left to try {protocol}"
            self._fail(Failure(problem))
            return
        silence = None
        if self.index < len(self.order) - 1:
            silence = min(self.multi.silence, remaining / 2)
        try:
            d = self.multi.probes[protocol].check(self.target, timeout=remaining, silence=silence)
        except Exception:
            d = defer.fail()
        self.current = d
        d.addCallbacks(self._answered, self._failed, callbackArgs=(protocol,), errbackArgs=(protocol,))

    def _answered(self, result, protocol: str) -> None:
        self.current = None
        if self.cancelled or self.deferred.called:
            return
        if isinstance(result, ProbeResult):
            self.multi._answered[self.target] = protocol
            if result.protocol is None:
                result = dataclasses.replace(result, protocol=protocol)
        self.deferred.callback(result)

    def _failed(self, failure: Failure, protocol: str) -> None:
        self.current = None
        if self.cancelled or self.deferred.called:
            return
        if failure.check(NotThisProtocol) and self.index < len(self.order) - 1:
            reason = getattr(failure.value, "reason", None) or failure.getErrorMessage()
            log.debug("%r: %s: %s; trying %s", self.target, protocol, reason, self.order[self.index + 1])
            self.tried.append((protocol, reason))
            self.index += 1
            self._attempt()
            return
        self._fail(failure)

    def _fail(self, failure: Failure) -> None:
        if self.tried:
            value = failure.value
            earlier = "; ".join(f"{p}: {r}" for p, r in self.tried)
            reason = getattr(value, "reason", None) or failure.getErrorMessage()
            try:
                value.reason = f"{reason} (after {earlier})"
            except AttributeError:  # an exception that takes no attributes: keep it as it is
                pass
        self.deferred.errback(failure)

    def _cancel(self, _d) -> None:
        self.cancelled = True
        current, self.current = self.current, None
        if current is not None:
            current.cancel()
