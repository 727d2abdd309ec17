"""Fakes for gateway unit tests: a readiness probe answering from state a test sets,
and :class:`Wire`, a TCP-like in-memory transport.

:class:`FakeProbe` runs the probe contract (``TargetProbeContract`` in
``test_gateway_pool.py``), so the router and pool tests that use it rely on
behaviour the real probe must also have.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from junction.gateway.pool import ProbeResult
from junction.routing.targets import Target


@dataclasses.dataclass
class FakeCore:
    """The broker core behind one target, as the fake probe sees it."""

    node_id: str | None
    connectable: bool = False
    active: bool = False
    connection_count: int | None = None
    #: accept the connection but never answer
    hang: bool = False
    #: the probe itself blows up (a bug in it)
    explode: bool = False
    #: answer this instead of a ProbeResult
    garbage: object = None


class FakeProbe:
    """A readiness probe answering from :class:`FakeCore` state the test sets.

    Unknown targets get a core with the defaults given here (Artemis's
    ``MockTargetFactory`` makes targets neither connectable nor ready), and
    the target's own node id if it has one, else ``node-<n>``.
    """

    def __init__(self, *, connectable=False, active=False, connection_count=None):
        self.defaults = {
            "connectable": connectable,
            "active": active,
            "connection_count": connection_count,
        }
        self.cores: dict[Target, FakeCore] = {}
        self.executions: Counter = Counter()
        self.pending: list[defer.Deferred] = []
        self.released: list[Target] = []
        self.cancelled: list[Target] = []
        self.connected: set[Target] = set()
        self._ids = 0

    def core(self, target: Target) -> FakeCore:
        core = self.cores.get(target)
        if core is None:
            if target.node_id is None:
                self._ids += 1
                node_id = f"node-{self._ids}"
            else:
                node_id = target.node_id
            core = self.cores[target] = FakeCore(node_id=node_id, **self.defaults)
        return core

    def check(self, target):
        self.executions[target] += 1
        core = self.core(target)
        if core.explode:
            raise RuntimeError("probe bug")
        if not core.connectable:
            self.connected.discard(target)
            return defer.fail(ConnectionRefusedError(f"{target.name}: connection refused"))
        self.connected.add(target)
        if core.hang:
            d = defer.Deferred(lambda _d: self.cancelled.append(target))
            self.pending.append(d)
            return d
        if core.garbage is not None:
            return defer.succeed(core.garbage)
        return defer.succeed(
            ProbeResult(
                active=core.active, node_id=core.node_id, connection_count=core.connection_count
            )
        )

    def release(self, target) -> None:
        self.released.append(target)
        self.connected.discard(target)

    def set_all(self, targets, **changes) -> None:
        for target in targets:
            for name, value in changes.items():
                setattr(self.core(target), name, value)




class Wire(StringTransport):
    """A TCP-like in-memory transport for the gateway's listener and splice tests.

    Beyond ``StringTransport`` it can half-close (``loseWriteConnection``
    sets ``write_shut``), and it keeps a write buffer that pauses its streaming
    producer once it holds more than ``bufferSize`` bytes and resumes it when
    :meth:`drain` empties it, as Twisted's ``abstract.FileDescriptor`` does.
    ``protocol`` is the protocol reading it, as on a TCP transport.
    """

    def __init__(self, host: str = "10.0.0.5", port: int = 40000):
        super().__init__(peerAddress=IPv4Address("TCP", host, port))
        self.bufferSize = 65536
        self.write_shut = False
        self.pending = 0
        self.producer_paused = False
        self.protocol = None

    def write(self, data):
        super().write(data)
        self.pending += len(data)
        if self.producer is not None and self.streaming and self.pending > self.bufferSize:
            self.producer_paused = True
            self.producer.pauseProducing()

    def drain(self) -> bytes:
        """The peer read everything: empty the buffer, resume a paused producer."""
        data = self.value()
        self.clear()
        self.pending = 0
        if self.producer is not None and self.producer_paused:
            self.producer_paused = False
            self.producer.resumeProducing()
        return data

    def loseWriteConnection(self):
        self.write_shut = True
