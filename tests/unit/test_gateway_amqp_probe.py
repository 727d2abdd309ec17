"""The AMQP readiness probe on a MemoryReactorClock + StringTransport (no sockets, no sleeps).

The broker core's side is :class:`tests.unit.probe_fixtures.CoreOpening`: the
project's SASL server and a proton server engine answering the Open with the
Junction properties (or not).  The probe contract
(``TargetProbeContract``) runs here in memory; ``tests/integration/
test_gateway_probe.py`` runs it again against real ``junction run`` processes.
"""

from __future__ import annotations

import dataclasses

import pytest
from twisted.internet import defer, error
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from junction.config.model import Connector
from junction.gateway.amqp_probe import AmqpTargetProbe, ProbeError
from junction.gateway.probe import ProbeResult, TargetProbe
from junction.protocols.proxy import encode_v2_local
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX
from junction.routing.targets import Target
from tests.unit.probe_fixtures import (
    HANG,
    NO_CONNECT,
    REFUSE,
    REFUSED,
    SILENT,
    CoreOpening,
    InMemoryContract,
    MemoryWorld,
    make_target,
)
from tests.unit.test_gateway_pool import TargetProbeContract, outcome


class TestAmqpProbeContractInMemory(InMemoryContract, TargetProbeContract):
    def build_probe(self, reactor, local_status):
        return AmqpTargetProbe(
            username="pool", password="secret", reactor=reactor, local_status=local_status
        )

    def opening(self, *, node_id, active=True, connections=1):
        return CoreOpening(node_id=node_id, active=active, connections=connections)


# -- the probe against the stand-in core ------------------------------------------------


@pytest.fixture
def reactor():
    return MemoryReactorClock()


def probe_and_world(reactor, *, byte_at_a_time=False, **kwargs):
    kwargs.setdefault("username", "pool")
    kwargs.setdefault("password", "secret")
    return AmqpTargetProbe(reactor=reactor, **kwargs), MemoryWorld(
        reactor, byte_at_a_time=byte_at_a_time
    )


def run(world, d):
    world.pump()
    return outcome(d)


def test_is_a_target_probe_and_validates_its_arguments(reactor):
    assert isinstance(AmqpTargetProbe(reactor=reactor), TargetProbe)
    with pytest.raises(ValueError, match="timeout"):
        AmqpTargetProbe(reactor=reactor, timeout=0)
    with pytest.raises(ValueError, match="password without a username"):
        AmqpTargetProbe(reactor=reactor, password="x")


def test_reads_the_open_properties_and_subtracts_its_own_connection(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(node_id="n1", connections=7))
    d = probe.check(target)
    host, port, _f, _t, _b = reactor.tcpClients[0]
    assert (host, port) == ("127.0.0.1", target.connector.port)
    assert run(world, d) == ProbeResult(active=True, node_id="n1", connection_count=6, protocol="AMQP")
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_sends_the_pool_credentials_and_an_internal_container_id(reactor):
    probe, world = probe_and_world(reactor)
    cores = []
    target = world.put(make_target(), lambda: cores.append(CoreOpening()) or cores[-1])
    run(world, probe.check(target))
    run(world, probe.check(target))
    first, second = cores
    assert first.credentials.mechanism == "PLAIN"
    assert (first.credentials.username, first.credentials.password) == ("pool", "secret")
    assert first.remote_container.startswith(INTERNAL_CLIENT_ID_PREFIX)
    assert second.remote_container.startswith(INTERNAL_CLIENT_ID_PREFIX)
    assert first.remote_container != second.remote_container
    assert first.remote_hostname == "127.0.0.1"


def test_anonymous_without_a_username(reactor):
    probe, world = probe_and_world(reactor, username=None, password=None)
    cores = []
    target = world.put(make_target(), lambda: cores.append(CoreOpening()) or cores[-1])
    assert run(world, probe.check(target)).active is True
    assert cores[0].credentials.mechanism == "ANONYMOUS"


def test_wrong_password_fails_with_unauthorized_access(reactor):
    probe, world = probe_and_world(reactor, password="wrong")
    target = world.put(make_target(), lambda: CoreOpening())
    result = run(world, probe.check(target))
    assert isinstance(result, Failure)
    assert result.check(ProbeError)
    assert "unauthorized-access" in result.getErrorMessage()
    assert probe.outstanding() == []


def test_an_open_without_the_junction_properties_is_another_broker_and_ready(reactor):
    """Another AMQP broker answers: active, its node id stands in from the connector, count unknown."""
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(properties={"product": "SomeBroker"}))
    result = run(world, probe.check(target))
    assert result.active is True and result.protocol == "AMQP"
    assert result.node_id == f"tcp://127.0.0.1:{target.connector.port}"
    assert result.connection_count is None
    assert "not a Junction core (SomeBroker)" in result.note
    # the same on every check
    assert run(world, probe.check(target)).node_id == result.node_id


def test_an_open_with_some_junction_properties_broken_fails(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(
        make_target(), lambda: CoreOpening(properties={"junction:node-id": "n", "product": "X"})
    )
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(ProbeError)
    message = result.getErrorMessage()
    assert "not a valid Junction broker core open" in message
    for name in ("junction:active", "junction:connections"):
        assert name in message


@pytest.mark.parametrize(
    "properties",
    [
        {"junction:node-id": "n", "junction:active": "yes", "junction:connections": 1},
        {"junction:node-id": "n", "junction:active": True, "junction:connections": True},
        {"junction:node-id": "", "junction:active": True, "junction:connections": 1},
        {"junction:node-id": "n", "junction:active": True},
    ],
)
def test_properties_of_the_wrong_type_fail(reactor, properties):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(properties=properties))
    assert isinstance(run(world, probe.check(target)), Failure)


def test_a_refusing_close_fails_with_its_condition(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(
        make_target(),
        lambda: CoreOpening(
            on_open=REFUSE, close_condition=("amqp:connection:forced", "router r is not ready")
        ),
    )
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(ProbeError)
    assert "amqp:connection:forced" in result.getErrorMessage()
    assert "router r is not ready" in result.getErrorMessage()


def test_closes_politely_and_answers_once_the_connection_is_gone(reactor):
    probe, world = probe_and_world(reactor)
    cores = []
    target = world.put(make_target(), lambda: cores.append(CoreOpening(node_id="n1")) or cores[-1])
    d = probe.check(target)
    world.accept_new()
    link = world.links[0]
    # step by hand: bytes go back and forth until the core has seen our Close
    for _ in range(10):
        out = link.transport.value()
        link.transport.clear()
        link.core.receive_data(out)
        back = link.core.data_to_send()
        if back:
            link.protocol.dataReceived(back)
        if link.core.client_closed:
            break
    assert link.core.client_closed, "the probe closed the connection with a Close frame"
    assert not d.called, "the answer waits for the connection to end"
    world.pump()
    assert link.lost
    assert outcome(d).node_id == "n1"


def test_fed_one_byte_at_a_time(reactor):
    probe, world = probe_and_world(reactor, byte_at_a_time=True)
    target = world.put(make_target(), lambda: CoreOpening(node_id="n1", connections=3))
    assert run(world, probe.check(target)) == ProbeResult(
        active=True, node_id="n1", connection_count=2, protocol="AMQP"
    )


def test_passive_core_answers_not_active(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(node_id="b", active=False, connections=1))
    assert run(world, probe.check(target)) == ProbeResult(
        active=False, node_id="b", connection_count=0, protocol="AMQP"
    )


def test_a_count_that_leaves_out_the_probe_is_not_negative(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(connections=0))
    assert run(world, probe.check(target)).connection_count == 0


def test_refused_connection_fails_naming_the_target(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), REFUSED)
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(error.ConnectionRefusedError)
    assert target.name in result.getErrorMessage()
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_a_silent_core_times_out_and_is_dropped(reactor):
    probe, world = probe_and_world(reactor, timeout=2.0)
    target = world.put(make_target(), lambda: CoreOpening(on_open=SILENT))
    d = probe.check(target)
    world.pump()
    assert not d.called
    reactor.advance(1.9)
    assert not d.called
    reactor.advance(0.1)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(defer.TimeoutError)
    assert "no open within 2 s" in result.getErrorMessage()
    assert world.links[0].transport.disconnecting  # aborted
    world.pump()
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_a_connect_that_never_completes_times_out(reactor):
    probe, world = probe_and_world(reactor, timeout=1.0)
    target = world.put(make_target(), NO_CONNECT)
    d = probe.check(target)
    world.pump()
    reactor.advance(1.0)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(defer.TimeoutError)
    assert "no connection within" in result.getErrorMessage()
    assert reactor.connectors[0].stoppedConnecting
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_answered_but_the_close_never_finishes(reactor):
    probe, world = probe_and_world(reactor, timeout=1.0)
    target = world.put(make_target(), lambda: CoreOpening(node_id="n1", reply_to_close=False))
    d = probe.check(target)
    world.pump()
    assert not d.called
    reactor.advance(1.0)
    assert outcome(d).node_id == "n1"  # the answer stands; the connection is dropped
    assert world.links[0].transport.disconnecting
    assert reactor.getDelayedCalls() == []


def test_cancel_while_connecting_stops_the_attempt(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), NO_CONNECT)
    d = probe.check(target)
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    assert reactor.connectors[0].stoppedConnecting
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_cancel_while_connected_aborts_the_connection(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), HANG)
    d = probe.check(target)
    world.pump()
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    assert world.links[0].transport.disconnecting
    world.pump()  # the connection ends later: nothing fires twice
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_release_fails_a_check_in_flight_and_drops_it(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), HANG)
    other = world.put(make_target(), HANG)
    d = probe.check(target)
    d_other = probe.check(other)
    world.pump()
    probe.release(target)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(ProbeError)
    assert "released" in result.getErrorMessage()
    assert world.links[0].transport.disconnecting
    assert not d_other.called and probe.outstanding() == probe.outstanding(other)
    probe.release(other)
    probe.release(other)
    assert outcome(d_other).check(ProbeError)
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_local_target_is_answered_by_local_status_without_the_network(reactor):
    calls = []

    def status():
        calls.append(1)
        return ProbeResult(active=True, node_id="me", connection_count=4)

    probe = AmqpTargetProbe(reactor=reactor, local_status=status)
    result = outcome(probe.check(Target(local=True, node_id="me")))
    assert result == ProbeResult(active=True, node_id="me", connection_count=4)
    assert calls == [1] and reactor.tcpClients == []


def test_local_target_without_local_status_fails(reactor):
    probe = AmqpTargetProbe(reactor=reactor)
    result = outcome(probe.check(Target(local=True)))
    assert isinstance(result, Failure) and "local_status" in result.getErrorMessage()


def test_local_status_that_raises_fails_the_check(reactor):
    def status():
        raise RuntimeError("core stopped")

    probe = AmqpTargetProbe(reactor=reactor, local_status=status)
    result = outcome(probe.check(Target(local=True)))
    assert isinstance(result, Failure) and result.check(RuntimeError)


def test_a_tls_connector_is_probed_over_tls(reactor):
    """The connector's TLS settings wrap the probe's connection; a PROXY LOCAL header precedes TLS."""
    from junction.tls.client import ClientTLS, _ClientTLSFactory

    target = make_target(proxyProtocolEnabled="true")
    target = Target(connector=dataclasses.replace(target.connector, tls=ClientTLS(trust_all=True)))
    probe = AmqpTargetProbe(reactor=reactor)
    probe.check(target)
    (host, port, factory, _timeout, _bind) = reactor.tcpClients[0]
    assert isinstance(factory, _ClientTLSFactory)
    assert factory.prefix == encode_v2_local()
    probe.release(target)


def test_a_target_without_connector_fails(reactor):
    probe = AmqpTargetProbe(reactor=reactor)
    assert isinstance(outcome(probe.check(Target())), Failure)


def test_a_pool_monitor_uses_it(reactor):
    """The probe in a real TargetMonitor: ready, node id learnt, count stored."""
    from junction.gateway.pool import StaticPool

    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: CoreOpening(node_id="n9", connections=3))
    pool = StaticPool([target], probe=probe, check_period_ms=1000, clock=reactor)
    pool.start()
    reactor.advance(0)
    world.pump()
    assert target.ready and target.node_id == "n9" and target.connection_count == 2
    world.cores[target.connector.port] = REFUSED
    reactor.advance(1.0)
    world.pump()
    assert not target.ready and target.connection_count is None
    pool.stop()
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []


def test_a_connector_without_a_valid_port_fails(reactor):
    probe = AmqpTargetProbe(reactor=reactor)
    target = Target(connector=Connector(name="bad", scheme="tcp", host="h", port="x"))  # type: ignore[arg-type]
    result = outcome(probe.check(target))
    assert isinstance(result, Failure) and "no valid port" in result.getErrorMessage()
    assert probe.outstanding() == [] and reactor.getDelayedCalls() == []
