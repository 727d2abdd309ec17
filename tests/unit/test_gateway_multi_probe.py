"""The multi-protocol readiness probe in memory: which protocol each target is asked in.

Targets are the stand-ins of :mod:`tests.unit.probe_fixtures`: a Junction core
serving AMQP and STOMP (:class:`PolyglotOpening`), and STOMP-only servers that
answer an AMQP header as each kind does -- a Junction core's STOMP acceptor
(an ERROR frame), CoilMQ or Artemis (a close), a server waiting for a line end
(nothing).  Each test counts the connections a target saw and what was said on
them, so "STOMP only, after the first check" is checked, not assumed.
"""

from __future__ import annotations

import pytest
from twisted.internet import defer, error
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from junction.gateway.amqp_probe import AmqpTargetProbe
from junction.gateway.multi_probe import (
    DEFAULT_PROBE_PROTOCOLS,
    PROTOCOL_SILENCE,
    MultiProtocolProbe,
    build_readiness_probe,
)
from junction.gateway.pool import StaticPool
from junction.gateway.probe import (
    PROBE_TIMEOUT,
    NotThisProtocol,
    ProbeError,
    ProbeResult,
    TargetProbe,
)
from junction.gateway.stomp_probe import StompTargetProbe
from junction.routing.targets import Target
from tests.unit.probe_fixtures import (
    CLOSE,
    ERROR,
    REFUSED,
    SILENT,
    CoreOpening,
    InMemoryContract,
    MemoryWorld,
    PolyglotOpening,
    StompOpening,
    make_target,
    run_until,
)
from tests.unit.test_gateway_pool import TargetProbeContract, outcome

CLASSIC = [("server", "ActiveMQ/5.18.3"), ("version", "1.1")]


def multi(reactor, **kwargs) -> MultiProtocolProbe:
    return build_readiness_probe(
        username="pool",
        password="secret",
        reactor=reactor,
        local_status=kwargs.pop("local_status", None),
        **kwargs,
    )


class Served:
    """A port's stand-in factory that records every opening it made."""

    def __init__(self, make):
        self.make = make
        self.openings: list = []

    def __call__(self):
        opening = self.make()
        self.openings.append(opening)
        return opening

    def protocols_seen(self) -> list[str]:
        """Per connection: AMQP or STOMP, by the first bytes the stand-in got."""
        seen = []
        for opening in self.openings:
            if isinstance(opening, PolyglotOpening):
                seen.append("AMQP" if opening.chosen is opening.amqp else "STOMP")
            elif isinstance(opening, StompOpening):
                seen.append("AMQP" if opening._seen.startswith(b"AMQP") else "STOMP")
            else:
                seen.append("AMQP")
        return seen


def junction_core(node_id="n1", connections=1):
    return Served(
        lambda: PolyglotOpening(
            amqp=CoreOpening(node_id=node_id, connections=connections),
            stomp=StompOpening(node_id=node_id, connections=connections),
        )
    )


def stomp_only(on_amqp=ERROR, **kwargs):
    return Served(lambda: StompOpening(on_amqp=on_amqp, **kwargs))


@pytest.fixture
def reactor():
    return MemoryReactorClock()


@pytest.fixture
def world(reactor):
    return MemoryWorld(reactor)


resolve = run_until


def run_for(world, reactor, seconds: float, step: float = 0.1) -> None:
    """Pump and advance the clock for ``seconds``."""
    world.pump()
    for _ in range(round(seconds / step)):
        reactor.advance(step)
        world.pump()


def no_leftovers(probe, reactor, world) -> bool:
    return (
        probe.outstanding() == []
        and [c for c in reactor.getDelayedCalls() if c.active()] == []
        and world.live_links() == []
    )


class TestMultiProbeContractInMemory(InMemoryContract, TargetProbeContract):
    def build_probe(self, reactor, local_status):
        return multi(reactor, local_status=local_status)

    def opening(self, *, node_id, active=True, connections=1):
        if not active:  # a passive core serving STOMP only: found after the fallback
            return StompOpening(node_id=node_id, active=False, connections=connections, on_amqp=CLOSE)
        return PolyglotOpening(
            amqp=CoreOpening(node_id=node_id, connections=connections),
            stomp=StompOpening(node_id=node_id, connections=connections),
        )


def test_builds_amqp_and_stomp_probes_with_the_pool_credentials(reactor):
    probe = multi(reactor)
    assert isinstance(probe, TargetProbe)
    assert probe.default_order == DEFAULT_PROBE_PROTOCOLS == ("AMQP", "STOMP")
    assert isinstance(probe.probes["AMQP"], AmqpTargetProbe)
    assert isinstance(probe.probes["STOMP"], StompTargetProbe)
    assert all(p.username == "pool" and p._password == "secret" for p in probe.probes.values())
    with pytest.raises(ValueError):
        MultiProtocolProbe({}, reactor=reactor)
    with pytest.raises(ValueError):
        MultiProtocolProbe({"STOMP": probe.probes["STOMP"]}, default_order=("AMQP",), reactor=reactor)


def test_a_core_serving_both_is_asked_in_amqp(reactor, world):
    probe = multi(reactor)
    served = junction_core("n1", connections=3)
    target = world.put(make_target(), served)
    assert resolve(world, reactor, probe.check(target)) == ProbeResult(
        active=True, node_id="n1", connection_count=2, protocol="AMQP"
    )
    assert served.protocols_seen() == ["AMQP"]
    assert probe.answered_by(target) == "AMQP"


@pytest.mark.parametrize(
    "on_amqp, within",
    [
        (ERROR, 0.0),  # a Junction core's STOMP acceptor: an ERROR frame at once
        (CLOSE, 0.0),  # CoilMQ, Artemis: the connection closed at once
        (SILENT, PROTOCOL_SILENCE),  # waits for a line end: the silence limit says
    ],
)
def test_a_stomp_only_target_is_asked_in_stomp_after_amqp_finds_nothing(reactor, world, on_amqp, within):
    probe = multi(reactor)
    served = stomp_only(on_amqp=on_amqp, node_id="s1", connections=5)
    target = world.put(make_target(), served)
    start = reactor.seconds()
    result = resolve(world, reactor, probe.check(target), step=0.05)
    assert result == ProbeResult(active=True, node_id="s1", connection_count=4, protocol="STOMP")
    assert reactor.seconds() - start == pytest.approx(within, abs=0.06)
    assert served.protocols_seen() == ["AMQP", "STOMP"]
    # remembered: the next checks go straight to STOMP
    for _ in range(2):
        assert resolve(world, reactor, probe.check(target)).node_id == "s1"
    assert served.protocols_seen() == ["AMQP", "STOMP", "STOMP", "STOMP"]
    assert no_leftovers(probe, reactor, world)


def test_another_broker_s_stomp_port_is_ready_in_a_pool(reactor, world):
    """ActiveMQ Classic's STOMP port (silent on an AMQP header, CONNECTED without junction headers)."""
    probe = multi(reactor)
    target = world.put(make_target(), stomp_only(on_amqp=SILENT, headers=CLASSIC))
    pool = StaticPool([target], probe=probe, check_period_ms=5000, clock=reactor)
    pool.start()
    run_for(world, reactor, PROBE_TIMEOUT)  # one check's worth of time: less than the pool's timeout
    assert target.ready, pool.status()
    assert target.node_id == f"tcp://127.0.0.1:{target.connector.port}"
    (status,) = pool.status()
    assert status["probe"] == "STOMP" and status["problem"] is None
    assert status["note"].startswith("not a Junction core (ActiveMQ/5.18.3)")
    pool.stop()
    assert no_leftovers(probe, reactor, world)


def test_probe_protocols_stomp_never_sends_an_amqp_header(reactor, world):
    probe = multi(reactor)
    served = stomp_only(on_amqp=SILENT, node_id="s1")
    target = world.put(make_target(probeProtocols="STOMP"), served)
    result = resolve(world, reactor, probe.check(target))
    assert result.protocol == "STOMP" and reactor.seconds() == 0
    assert served.protocols_seen() == ["STOMP"]


def test_probe_protocols_in_the_order_given(reactor, world):
    probe = multi(reactor)
    served = junction_core("n1")
    target = world.put(make_target(probeProtocols="stomp,amqp"), served)
    assert resolve(world, reactor, probe.check(target)).protocol == "STOMP"
    assert served.protocols_seen() == ["STOMP"]


def test_probe_protocols_amqp_alone_does_not_fall_back(reactor, world):
    probe = multi(reactor)
    served = stomp_only(on_amqp=ERROR)
    target = world.put(make_target(probeProtocols="AMQP"), served)
    result = resolve(world, reactor, probe.check(target))
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason == "answered the AMQP header with a STOMP ERROR frame, not AMQP"
    assert served.protocols_seen() == ["AMQP"]


def test_a_refused_connection_is_the_answer_no_fallback(reactor, world):
    probe = multi(reactor)
    target = world.put(make_target(), REFUSED)
    result = resolve(world, reactor, probe.check(target))
    assert isinstance(result, Failure) and result.check(error.ConnectionRefusedError)
    assert result.value.reason == f"connection refused by 127.0.0.1:{target.connector.port}"
    assert len(reactor.tcpClients) == 1  # STOMP was not tried


def test_a_refused_stomp_login_after_the_fallback_says_both(reactor, world):
    probe = multi(reactor, )
    target = world.put(make_target(), stomp_only(on_amqp=ERROR, users={"pool": "other"}))
    result = resolve(world, reactor, probe.check(target))
    assert isinstance(result, Failure) and result.check(ProbeError)
    assert result.value.reason == (
        "STOMP CONNECT refused: Security Error occurred: User name [pool] or password is invalid "
        "(after AMQP: answered the AMQP header with a STOMP ERROR frame, not AMQP)"
    )


def test_a_target_speaking_neither_says_what_each_found(reactor, world):
    probe = multi(reactor)
    served = Served(lambda: StompOpening(on_amqp=CLOSE, on_connect=SILENT))
    target = world.put(make_target(), served)

    # a server that closes on anything: STOMP's CONNECT is met with a close too
    class Closer(StompOpening):
        def receive_data(self, data):
            self.finished = True

    world.cores[target.connector.port] = lambda: Closer()
    result = resolve(world, reactor, probe.check(target))
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason == (
        "closed the connection without answering the STOMP CONNECT "
        "(after AMQP: closed the connection without answering the AMQP header)"
    )


def test_a_remembered_protocol_the_target_no_longer_speaks_falls_back(reactor, world):
    probe = multi(reactor)
    target = world.put(make_target(), stomp_only(on_amqp=CLOSE, node_id="s1"))
    assert resolve(world, reactor, probe.check(target)).protocol == "STOMP"
    # the port now serves AMQP only: STOMP (remembered, first) meets an AMQP header
    amqp = Served(lambda: CoreOpening(node_id="a1"))
    world.cores[target.connector.port] = amqp
    result = resolve(world, reactor, probe.check(target))
    assert result.protocol == "AMQP" and result.node_id == "a1"
    assert probe.answered_by(target) == "AMQP"


def test_the_attempts_share_one_deadline(reactor, world):
    """AMQP silent for its share, then a silent STOMP: one timeout for the whole check."""
    probe = multi(reactor)
    target = world.put(make_target(), stomp_only(on_amqp=SILENT, on_connect=SILENT))
    d = probe.check(target)
    world.pump()
    reactor.advance(PROTOCOL_SILENCE)
    world.pump()
    assert not d.called and len(world.links) == 2  # STOMP is being tried
    reactor.advance(PROBE_TIMEOUT - PROTOCOL_SILENCE - 0.01)
    assert not d.called
    reactor.advance(0.01)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(defer.TimeoutError)
    assert result.value.reason.startswith(
        f"no CONNECTED within {PROBE_TIMEOUT - PROTOCOL_SILENCE:g} s (STOMP) (after AMQP: no answer"
    )
    world.pump()
    assert no_leftovers(probe, reactor, world)


def test_cancel_during_the_fallback_drops_everything(reactor, world):
    probe = multi(reactor)
    target = world.put(make_target(), stomp_only(on_amqp=ERROR, on_connect=SILENT))
    d = probe.check(target)
    world.pump()
    assert not d.called and len(world.links) == 2
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    world.pump()
    assert no_leftovers(probe, reactor, world)


def test_release_forgets_the_remembered_protocol(reactor, world):
    probe = multi(reactor)
    target = world.put(make_target(), stomp_only(on_amqp=CLOSE))
    resolve(world, reactor, probe.check(target))
    assert probe.order_for(target) == ("STOMP", "AMQP")
    probe.release(target)
    assert probe.answered_by(target) is None and probe.order_for(target) == ("AMQP", "STOMP")


def test_a_connector_announced_with_unknown_probe_protocols_uses_the_default(reactor):
    probe = multi(reactor)
    assert probe.order_for(make_target(probeProtocols="CORE")) == ("AMQP", "STOMP")


def test_local_target(reactor):
    probe = multi(reactor, local_status=lambda: ProbeResult(active=True, node_id="me"))
    assert outcome(probe.check(Target(local=True))).node_id == "me"
    assert reactor.tcpClients == []
    assert outcome(multi(reactor).check(Target(local=True))).check(ProbeError)
