"""Admission limits at an acceptor: connections per source address, and their rate.

An internet-facing acceptor must not let one source crowd out the others.
:class:`AdmissionFactory` wraps an acceptor's listening factory (outermost,
so it sees the socket's real peer) and refuses a new connection -- the
socket is closed before anything is read -- when its source address

* already has ``connectionsAllowedPerAddress`` connections open, or
* opened more than ``connectionRatePerAddress`` connections in the last
  second (a token bucket per address, burst equal to the rate).

Artemis's ``connectionsAllowed`` (all sources together) is kept by the
protocol factories as before.  Each refusal is counted per limit
(``/metrics``: ``junction_acceptor_refused_total{acceptor,limit}``) and
logged at most once per source and limit every :data:`LOG_INTERVAL`
seconds, with how many were refused meanwhile, so a flood cannot flood the
log.  The per-address tables are bounded (:data:`MAX_TRACKED_ADDRESSES`).

A connection the gateway hands to its relay engine stays counted until the
relayed pair ends.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from twisted.protocols.policies import ProtocolWrapper, WrappingFactory

__all__ = [
    "AdmissionFactory",
    "LOG_INTERVAL",
    "MAX_TRACKED_ADDRESSES",
    "OffenderLog",
    "wrap_admission",
]

log = logging.getLogger("junction.admission")

#: seconds between two log lines about the same source and limit
LOG_INTERVAL = 60.0
#: source addresses whose rate buckets and log times are remembered at most (oldest forgotten)
MAX_TRACKED_ADDRESSES = 100_000


class OffenderLog:
    """Logs a refusal at most once per (limit, source) every ``interval`` seconds."""

    def __init__(self, clock, interval: float = LOG_INTERVAL, capacity: int = MAX_TRACKED_ADDRESSES):
        self.clock = clock
        self.interval = interval
        self.capacity = capacity
        self._last: OrderedDict = OrderedDict()  # (limit, source) -> [time logged, suppressed since]

    def refused(self, logger: logging.Logger, limit: str, source: str, message: str, *args) -> None:
        now = self.clock.seconds()
        key = (limit, source)
        entry = self._last.get(key)
        if entry is not None and now - entry[0] < self.interval:
            entry[1] += 1
            return
        suppressed = entry[1] if entry is not None else 0
        self._last[key] = [now, 0]
        self._last.move_to_end(key)
        while len(self._last) > self.capacity:
            self._last.popitem(last=False)
        if suppressed:
            message += " (and %d more refused since the last report)"
            args = (*args, suppressed)
        logger.warning(message, *args)


class _Bucket:
    __slots__ = ("tokens", "stamp")

    def __init__(self, tokens: float, stamp: float):
        self.tokens = tokens
        self.stamp = stamp


def _nothing() -> None:
    pass


class _Admitted(ProtocolWrapper):
    """Counts its source's connection until it ends (or, relayed, until the relay ends)."""

    #: bytes pass through unchanged: the gateway writes to (and relays) the socket beneath
    #: (junction.edge.sockets.socket_transport)
    transparent = True

    def connectionLost(self, reason):
        relayed = getattr(self.transport, "_shouldShutdown", True) is False
        splice = getattr(self.wrappedProtocol, "splice", None)
        if relayed and splice is not None and not splice.closed.called:
            # the relay engine carries the connection on: it counts until the relayed pair ends
            release, self.factory_release = self.factory_release, _nothing
            splice.closed.addBoth(lambda result: (release(), result)[1])
        ProtocolWrapper.connectionLost(self, reason)

    def factory_release(self) -> None:  # replaced per connection in AdmissionFactory.buildProtocol
        pass


class AdmissionFactory(WrappingFactory):
    """Per-source connection and rate limits in front of ``wrapped`` (see the module docstring)."""

    protocol = _Admitted

    def __init__(self, wrapped, *, reactor, acceptor_name: str, per_address: int = -1, rate: float = 0.0):
        super().__init__(wrapped)
        self.reactor = reactor
        self.acceptor_name = acceptor_name
        self.per_address = per_address
        self.rate = rate
        self.open_by_address: dict[str, int] = {}
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self.offenders = OffenderLog(reactor)
        #: refusals by limit name
        self.refused: dict[str, int] = {}

    def buildProtocol(self, addr):
        source = str(getattr(addr, "host", addr))
        if self.per_address >= 0 and self.open_by_address.get(source, 0) >= self.per_address:
            return self._refuse(
                "connectionsAllowedPerAddress",
                source,
                "acceptor %s: connection from %s refused: connectionsAllowedPerAddress=%d reached",
                self.acceptor_name,
                source,
                self.per_address,
            )
        if self.rate > 0 and not self._take_token(source):
            return self._refuse(
                "connectionRatePerAddress",
                source,
                "acceptor %s: connection from %s refused: more than connectionRatePerAddress=%g new connections per second",
                self.acceptor_name,
                source,
                self.rate,
            )
        # the factory beneath may refuse too (a TLS acceptor at handshakesAllowed, a protocol at
        # connectionsAllowed): then there is nothing to wrap and nothing to count
        inner = self.wrappedFactory.buildProtocol(addr)
        if inner is None:
            return None
        protocol = self.protocol(self, inner)
        self.open_by_address[source] = self.open_by_address.get(source, 0) + 1
        released = []

        def release() -> None:
            if released:
                return
            released.append(True)
            left = self.open_by_address.get(source, 1) - 1
            if left > 0:
                self.open_by_address[source] = left
            else:
                self.open_by_address.pop(source, None)

        protocol.factory_release = release
        return protocol

    def unregisterProtocol(self, protocol) -> None:
        release = getattr(protocol, "factory_release", None)
        if release is not None:
            release()
        super().unregisterProtocol(protocol)

    def _take_token(self, source: str) -> bool:
        now = self.reactor.seconds()
        bucket = self._buckets.get(source)
        if bucket is None:
            bucket = self._buckets[source] = _Bucket(max(1.0, self.rate), now)
            while len(self._buckets) > MAX_TRACKED_ADDRESSES:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(source)
            bucket.tokens = min(max(1.0, self.rate), bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _refuse(self, limit: str, source: str, message: str, *args):
        self.refused[limit] = self.refused.get(limit, 0) + 1
        self.offenders.refused(log, limit, source, message, *args)
        return None

    def status(self) -> dict:
        return {
            "per_address": self.per_address,
            "rate_per_address": self.rate,
            "sources": len(self.open_by_address),
            "refused": dict(self.refused),
        }


def wrap_admission(factory, acceptor, *, reactor):
    """*factory* behind an :class:`AdmissionFactory` when the acceptor sets a per-address limit."""
    params = getattr(acceptor, "params", None) or {}
    per_address = int(params.get("connectionsAllowedPerAddress", -1))
    rate = float(params.get("connectionRatePerAddress", 0) or 0)
    if per_address < 0 and rate <= 0:
        return factory
    return AdmissionFactory(
        factory, reactor=reactor, acceptor_name=getattr(acceptor, "name", "?"), per_address=per_address, rate=rate
    )
