"""The STOMP readiness probe on a MemoryReactorClock + StringTransport (no sockets, no sleeps).

The target's side is :class:`tests.unit.probe_fixtures.StompOpening`: the
project's STOMP codec answering CONNECT as a Junction core does (the
``junction-*`` headers), as another broker does (none of them), with an
ERROR, with garbage, or not at all.  The probe contract runs here in memory;
``tests/integration/test_gateway_stomp_probe.py`` runs the probe against real
processes.
"""

from __future__ import annotations

import pytest
from twisted.internet import defer, error
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from junction.gateway.probe import (
    NotThisProtocol,
    ProbeError,
    ProbeResult,
    TargetProbe,
    describe_failure,
)
from junction.gateway.probe_connection import CLOSE_LINGER
from junction.gateway.stomp_probe import PROBE_STOMP_LIMITS, StompTargetProbe
from junction.protocols.proxy import ProxyHeaderReader
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX
from tests.unit.probe_fixtures import (
    CLOSE,
    ERROR,
    GARBAGE,
    HANG,
    NO_CONNECT,
    REFUSED,
    SILENT,
    InMemoryContract,
    MemoryWorld,
    StompOpening,
    make_target,
)
from tests.unit.test_gateway_pool import TargetProbeContract, outcome

#: another broker's CONNECTED (ActiveMQ Classic's headers)
CLASSIC = [("session", "ID:host-1234-1"), ("heart-beat", "0,0"), ("server", "ActiveMQ/5.18.3"), ("version", "1.1")]


class TestStompProbeContractInMemory(InMemoryContract, TargetProbeContract):
    def build_probe(self, reactor, local_status):
        return StompTargetProbe(
            username="pool", password="secret", reactor=reactor, local_status=local_status
        )

    def opening(self, *, node_id, active=True, connections=1):
        return StompOpening(node_id=node_id, active=active, connections=connections)


@pytest.fixture
def reactor():
    return MemoryReactorClock()


def probe_and_world(reactor, *, byte_at_a_time=False, **kwargs):
    kwargs.setdefault("username", "pool")
    kwargs.setdefault("password", "secret")
    return StompTargetProbe(reactor=reactor, **kwargs), MemoryWorld(
        reactor, byte_at_a_time=byte_at_a_time
    )


def run(world, d):
    world.pump()
    return outcome(d)


def no_leftovers(probe, reactor) -> bool:
    return probe.outstanding() == [] and [c for c in reactor.getDelayedCalls() if c.active()] == []


def test_is_a_target_probe_and_validates_its_arguments(reactor):
    assert isinstance(StompTargetProbe(reactor=reactor), TargetProbe)
    with pytest.raises(ValueError, match="timeout"):
        StompTargetProbe(reactor=reactor, timeout=0)
    with pytest.raises(ValueError, match="password without a username"):
        StompTargetProbe(reactor=reactor, password="x")


def test_reads_a_junction_core_s_connected_and_subtracts_its_own_connection(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(node_id="n1", connections=7))
    d = probe.check(target)
    host, port, _f, _t, _b = reactor.tcpClients[0]
    assert (host, port) == ("127.0.0.1", target.connector.port)
    assert run(world, d) == ProbeResult(
        active=True, node_id="n1", connection_count=6, protocol="STOMP"
    )
    assert no_leftovers(probe, reactor)


def test_connects_with_the_pool_credentials_and_an_internal_client_id_then_disconnects(reactor):
    probe, world = probe_and_world(reactor)
    cores = []
    target = world.put(make_target(), lambda: cores.append(StompOpening()) or cores[-1])
    run(world, probe.check(target))
    run(world, probe.check(target))
    first, second = cores
    frame = first.connect_frame
    assert frame.command == "CONNECT"
    assert (frame.get("login"), frame.get("passcode")) == ("pool", "secret")
    assert frame.get("accept-version") == "1.0,1.1"
    assert frame.get("host") == "127.0.0.1" and frame.get("heart-beat") == "0,0"
    assert frame.get("client-id").startswith(INTERNAL_CLIENT_ID_PREFIX)
    assert second.connect_frame.get("client-id").startswith(INTERNAL_CLIENT_ID_PREFIX)
    assert frame.get("client-id") != second.connect_frame.get("client-id")
    assert first.disconnected and second.disconnected  # a polite DISCONNECT each time
    assert all(link.lost for link in world.links)


def test_no_login_without_a_username(reactor):
    probe, world = probe_and_world(reactor, username=None, password=None)
    cores = []
    target = world.put(make_target(), lambda: cores.append(StompOpening()) or cores[-1])
    assert run(world, probe.check(target)).active is True
    assert cores[0].connect_frame.get("login") is None
    assert cores[0].connect_frame.get("passcode") is None


class _WireRecorder(StompOpening):
    """A :class:`StompOpening` that keeps every byte the probe wrote to it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.wire = bytearray()

    def receive_data(self, data: bytes) -> None:
        self.wire += data
        super().receive_data(data)


@pytest.mark.parametrize(
    ("credentials", "login"),
    [
        ({"username": "pool", "password": "secret"}, b"login:pool\npasscode:secret\n"),
        ({"username": "pool", "password": None}, b"login:pool\npasscode:\n"),
        ({"username": None, "password": None}, b""),
    ],
)
def test_the_exact_bytes_on_the_wire(reactor, credentials, login):
    """CONNECT then DISCONNECT, byte for byte as the probe has always written them."""
    probe, world = probe_and_world(reactor, **credentials)
    cores = []
    users = {"pool": credentials["password"] or ""}
    target = world.put(make_target(), lambda: cores.append(_WireRecorder(users=users)) or cores[-1])
    assert run(world, probe.check(target)).active is True
    client_id = cores[0].connect_frame.get("client-id")
    assert client_id == f"{INTERNAL_CLIENT_ID_PREFIX}{probe._instance}.1"
    assert bytes(cores[0].wire) == (
        b"CONNECT\naccept-version:1.0,1.1\nhost:127.0.0.1\nheart-beat:0,0\n"
        + b"client-id:" + client_id.encode() + b"\n"
        + login
        + b"\n\x00"
        + b"DISCONNECT\nreceipt:probe-disconnect\n\n\x00"
    )


def test_another_broker_s_connected_is_ready_with_a_stand_in_node_id(reactor):
    """ActiveMQ Classic's CONNECTED has no junction-* headers: ready, node id from the connector."""
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(headers=CLASSIC))
    result = run(world, probe.check(target))
    assert result.active is True and result.protocol == "STOMP"
    assert result.node_id == f"tcp://127.0.0.1:{target.connector.port}"
    assert result.connection_count is None
    assert result.note.startswith("not a Junction core (ActiveMQ/5.18.3)")
    assert "connection count unknown" in result.note
    # stable: the same on the next check
    assert run(world, probe.check(target)).node_id == result.node_id
    assert no_leftovers(probe, reactor)


def test_a_peer_that_never_receipts_the_disconnect_is_answered_within_the_linger(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(
        make_target(), lambda: StompOpening(headers=CLASSIC, reply_to_disconnect=False)
    )
    d = probe.check(target)
    world.pump()
    assert not d.called
    reactor.advance(CLOSE_LINGER)
    assert outcome(d).protocol == "STOMP"  # the answer stands; the connection is dropped
    assert world.links[0].transport.disconnecting
    assert no_leftovers(probe, reactor)


def test_a_refused_login_fails_with_the_error_message(reactor):
    probe, world = probe_and_world(reactor, password="wrong")
    target = world.put(make_target(), lambda: StompOpening())
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(ProbeError)
    assert not result.check(NotThisProtocol)  # it speaks STOMP: nothing else to try
    assert result.value.reason == (
        "STOMP CONNECT refused: Security Error occurred: User name [pool] or password is invalid"
    )
    assert describe_failure(result).startswith("probe failed: STOMP CONNECT refused: Security Error")
    assert no_leftovers(probe, reactor)


def test_an_error_frame_without_a_message_header_says_its_body(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(on_connect=ERROR, error_message="go away"))
    result = run(world, probe.check(target))
    assert result.value.reason == "STOMP CONNECT refused: go away"


@pytest.mark.parametrize(
    "headers, missing",
    [
        ([("junction-node-id", "n")], "junction-active, junction-connections"),
        ([("junction-node-id", ""), ("junction-active", "true"), ("junction-connections", "1")], "junction-node-id"),
        ([("junction-node-id", "n"), ("junction-active", "yes"), ("junction-connections", "1")], "junction-active"),
        ([("junction-node-id", "n"), ("junction-active", "true"), ("junction-connections", "-1")], "junction-connections"),
        ([("junction-node-id", "n"), ("junction-active", "true"), ("junction-connections", "٣")], "junction-connections"),
    ],
)
def test_broken_junction_headers_fail(reactor, headers, missing):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(headers=headers))
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(ProbeError)
    assert f"no valid {missing}" in result.getErrorMessage()


def test_garbage_is_not_stomp(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(on_connect=GARBAGE))
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason.startswith("answered the STOMP CONNECT with 'HTTP/1.1 400 Bad', not STOMP (")
    assert target.name in result.getErrorMessage()
    assert no_leftovers(probe, reactor)


def test_an_amqp_header_is_not_stomp(reactor):
    from tests.unit.probe_fixtures import CoreOpening

    probe, world = probe_and_world(reactor)
    # an AMQP-only acceptor answers anything with its own protocol header
    target = world.put(make_target(), lambda: CoreOpening())
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason == "answered the STOMP CONNECT with an AMQP header, not STOMP"


def test_a_frame_other_than_connected_fails(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(headers=CLASSIC))
    d = probe.check(target)
    world.accept_new()
    link = world.links[0]
    link.protocol.dataReceived(b"MESSAGE\ndestination:/queue/x\n\nhello\0")
    result = outcome(d) if d.called else run(world, d)
    assert isinstance(result, Failure) and "MESSAGE, not CONNECTED" in result.getErrorMessage()
    assert link.transport.disconnecting


def test_a_frame_beyond_the_probe_s_limit_is_not_stomp(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(headers=CLASSIC))
    d = probe.check(target)
    world.accept_new()
    link = world.links[0]
    link.protocol.dataReceived(b"CONNECTED\n" + b"x" * (PROBE_STOMP_LIMITS.max_frame_size + 1))
    result = outcome(d) if d.called else run(world, d)
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert link.transport.disconnecting


def test_a_close_without_a_word_is_not_stomp(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(on_connect=SILENT))
    d = probe.check(target)
    world.pump()
    world.links[0].lose()
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason == "closed the connection without answering the STOMP CONNECT"
    assert no_leftovers(probe, reactor)


def test_fed_one_byte_at_a_time(reactor):
    probe, world = probe_and_world(reactor, byte_at_a_time=True)
    target = world.put(make_target(), lambda: StompOpening(node_id="n1", connections=3))
    assert run(world, probe.check(target)) == ProbeResult(
        active=True, node_id="n1", connection_count=2, protocol="STOMP"
    )


def test_a_silent_target_times_out_and_is_dropped(reactor):
    probe, world = probe_and_world(reactor, timeout=2.0)
    target = world.put(make_target(), lambda: StompOpening(on_connect=SILENT))
    d = probe.check(target)
    world.pump()
    reactor.advance(1.9)
    assert not d.called
    reactor.advance(0.1)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(defer.TimeoutError)
    assert result.value.reason == "no CONNECTED within 2 s (STOMP)"
    assert describe_failure(result) == "probe timed out: no CONNECTED within 2 s (STOMP)"
    assert world.links[0].transport.disconnecting
    world.pump()
    assert no_leftovers(probe, reactor)


def test_silence_limit_says_not_this_protocol(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), lambda: StompOpening(on_connect=SILENT))
    d = probe.check(target, timeout=3.0, silence=0.5)
    world.pump()
    reactor.advance(0.5)
    result = outcome(d)
    assert isinstance(result, Failure) and result.check(NotThisProtocol)
    assert result.value.reason == "no answer to the STOMP CONNECT within 0.5 s"
    assert no_leftovers(probe, reactor)


def test_refused_connection_names_the_address(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), REFUSED)
    result = run(world, probe.check(target))
    assert isinstance(result, Failure) and result.check(error.ConnectionRefusedError)
    assert target.name in result.getErrorMessage()
    assert describe_failure(result) == (
        f"probe failed: connection refused by 127.0.0.1:{target.connector.port}"
    )


def test_a_connect_that_never_completes_times_out(reactor):
    probe, world = probe_and_world(reactor, timeout=1.0)
    target = world.put(make_target(), NO_CONNECT)
    d = probe.check(target)
    world.pump()
    reactor.advance(1.0)
    result = outcome(d)
    assert result.check(defer.TimeoutError)
    assert result.value.reason == f"no connection to 127.0.0.1:{target.connector.port} within 1 s"
    assert reactor.connectors[0].stoppedConnecting


def test_proxy_connectors_get_a_local_header_first(reactor):
    probe, world = probe_and_world(reactor)
    target = make_target(proxyProtocolEnabled="true")
    d = probe.check(target)
    _host, _port, factory, _t, _b = reactor.tcpClients[0]
    from twisted.internet.testing import StringTransport

    protocol = factory.buildProtocol(None)
    transport = StringTransport()
    protocol.makeConnection(transport)
    header = ProxyHeaderReader().receive_data(transport.value())
    assert header.command == "LOCAL" and header.remaining.startswith(b"CONNECT\n")
    d.cancel()
    assert outcome(d).check(defer.CancelledError)
    assert transport.disconnecting


def test_release_fails_a_check_in_flight(reactor):
    probe, world = probe_and_world(reactor)
    target = world.put(make_target(), HANG)
    d = probe.check(target)
    world.pump()
    probe.release(target)
    result = outcome(d)
    assert result.check(ProbeError) and "released" in result.getErrorMessage()
    assert no_leftovers(probe, reactor)


def test_a_pool_monitor_uses_it_and_says_why_a_target_is_not_ready(reactor):
    from junction.gateway.pool import StaticPool

    probe, world = probe_and_world(reactor)
    core = world.put(make_target(), lambda: StompOpening(node_id="n9", connections=3))
    other = world.put(make_target(), lambda: StompOpening(headers=CLASSIC))
    pool = StaticPool([core, other], probe=probe, check_period_ms=1000, clock=reactor)
    pool.start()
    reactor.advance(0)
    world.pump()
    assert core.ready and core.node_id == "n9" and core.connection_count == 2
    assert other.ready and other.node_id.startswith("tcp://") and other.connection_count is None
    status = {s["name"]: s for s in pool.status()}
    assert status[core.name]["probe"] == "STOMP" and status[core.name]["note"] is None
    assert status[other.name]["note"].startswith("not a Junction core (ActiveMQ/5.18.3)")
    world.cores[core.connector.port] = lambda: StompOpening(on_connect=ERROR, error_message="bad login")
    world.cores[other.connector.port] = REFUSED
    reactor.advance(1.0)
    world.pump()
    status = {s["name"]: s for s in pool.status()}
    assert not core.ready and status[core.name]["problem"] == "probe failed: STOMP CONNECT refused: bad login"
    assert not other.ready and status[other.name]["problem"] == (
        f"probe failed: connection refused by 127.0.0.1:{other.connector.port}"
    )
    assert status[other.name]["note"] is None and status[other.name]["probe"] == "STOMP"
    pool.stop()
    assert no_leftovers(probe, reactor)


def test_the_amqp_header_stand_in_modes():
    """The fixture's STOMP-only acceptor answers an AMQP header as each kind of server does."""
    for mode, closes, says in ((ERROR, True, b"ERROR"), (CLOSE, True, b""), (SILENT, False, b"")):
        opening = StompOpening(on_amqp=mode)
        opening.receive_data(b"AMQP\x03\x01\x00\x00")
        assert opening.finished is closes and opening.data_to_send().startswith(says)
