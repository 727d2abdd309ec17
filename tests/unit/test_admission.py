"""Admission limits: per-address connections and rate, the offender log, relayed connections."""

from __future__ import annotations

import logging

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from junction.edge.admission import AdmissionFactory, OffenderLog, wrap_admission
from junction.edge.sockets import replace_receiver, socket_transport


def addr(host: str, port: int = 40000) -> IPv4Address:
    return IPv4Address("TCP", host, port)


class Inner(Protocol):
    lost = False

    def connectionLost(self, reason=None):
        self.lost = True


def make(per_address=-1, rate=0.0):
    clock = Clock()
    factory = AdmissionFactory(
        Factory.forProtocol(Inner),
        reactor=clock,
        acceptor_name="edge",
        per_address=per_address,
        rate=rate,
    )
    return clock, factory


def connect(factory, host):
    protocol = factory.buildProtocol(addr(host))
    if protocol is not None:
        transport = StringTransport()
        transport.protocol = protocol  # as a Twisted TCP transport has it
        protocol.makeConnection(transport)
    return protocol


def test_connections_per_address_are_counted_until_they_end():
    _, factory = make(per_address=2)
    a, b = connect(factory, "192.0.2.1"), connect(factory, "192.0.2.1")
    assert a and b and connect(factory, "192.0.2.1") is None
    assert connect(factory, "192.0.2.2") is not None  # another source is not affected
    a.connectionLost(None)
    assert a.wrappedProtocol is None and factory.open_by_address["192.0.2.1"] == 1
    assert connect(factory, "192.0.2.1") is not None
    assert factory.refused == {"connectionsAllowedPerAddress": 1}


def test_a_connection_the_factory_beneath_refuses_is_refused_and_not_counted():
    """A TLS acceptor at handshakesAllowed refuses in its own buildProtocol: no wrapper around nothing.

    A wrapper around ``None`` failed in ``makeConnection``, which also dropped
    the rest of the listener's accept batch, and its source stayed counted
    for good.
    """

    class Busy(Factory):
        def buildProtocol(self, addr):
            return None

    factory = AdmissionFactory(Busy(), reactor=Clock(), acceptor_name="edge", per_address=1)
    assert factory.buildProtocol(addr("192.0.2.1")) is None
    assert factory.open_by_address == {} and factory.protocols == {}
    assert factory.refused == {}  # the factory beneath counts its own refusals


def test_rate_per_address_is_a_token_bucket():
    clock, factory = make(rate=5)
    accepted = [connect(factory, "192.0.2.1") is not None for _ in range(8)]
    assert accepted == [True] * 5 + [False] * 3  # a burst of 5
    clock.advance(0.4)  # two tokens back
    assert [connect(factory, "192.0.2.1") is not None for _ in range(3)] == [True, True, False]
    assert connect(factory, "192.0.2.9") is not None


def test_a_relayed_connection_counts_until_its_splice_ends():
    _, factory = make(per_address=1)
    protocol = connect(factory, "192.0.2.1")

    class Side(Protocol):
        def __init__(self):
            self.splice = type("S", (), {"closed": defer.Deferred()})()

    side = Side()
    beneath = socket_transport(protocol.wrappedProtocol.transport)  # what the gateway forwards
    assert beneath is protocol.transport
    replace_receiver(beneath, side)  # the splice's rebind: the innermost protocol, wrapper kept
    assert protocol.wrappedProtocol is side and protocol.transport.protocol is protocol
    protocol.transport._shouldShutdown = False  # what the relay engine's adoption does
    protocol.connectionLost(None)
    assert factory.open_by_address == {"192.0.2.1": 1}
    assert connect(factory, "192.0.2.1") is None
    side.splice.closed.callback(None)
    assert factory.open_by_address == {}
    assert connect(factory, "192.0.2.1") is not None


def test_the_offender_log_reports_once_per_interval_with_the_count(caplog):
    clock = Clock()
    offenders = OffenderLog(clock, interval=60)
    logger = logging.getLogger("test.offenders")
    with caplog.at_level(logging.WARNING, logger="test.offenders"):
        for _ in range(5):
            offenders.refused(logger, "rate", "192.0.2.1", "refused %s", "192.0.2.1")
        offenders.refused(logger, "rate", "192.0.2.2", "refused %s", "192.0.2.2")
        clock.advance(61)
        offenders.refused(logger, "rate", "192.0.2.1", "refused %s", "192.0.2.1")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused 192.0.2.1",
        "refused 192.0.2.2",
        "refused 192.0.2.1 (and 4 more refused since the last report)",
    ]


def test_no_limits_no_wrapper():
    acceptor = type("A", (), {"params": {}, "name": "x"})()
    inner = Factory.forProtocol(Inner)
    assert wrap_admission(inner, acceptor, reactor=Clock()) is inner
