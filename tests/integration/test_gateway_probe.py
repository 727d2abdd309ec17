"""The AMQP readiness probe against real ``junction run`` broker cores.

``TargetProbeContract`` (``tests/unit/test_gateway_pool.py``) runs here on real
processes: a serving target is a broker core (security on, a pool user) whose
persisted node id the test chose, holding exactly the client connections the
contract asks for; an unreachable target is a closed port; a hanging target is
a plain TCP server socket that accepts and never answers; the local target is
answered by the probe's ``local_status`` callable.

The contract's passive target (a core that answers but is not active) has no
real counterpart yet: the broker core has no passive HA backup, and the
contract requires a target (it has no "None to skip" hook for it).  It is
served by :class:`~tests.unit.probe_fixtures.CoreOpening` over TCP -- the
project's SASL server and a proton server engine saying
``junction:active=false`` -- so the probe's side is still checked on a real
socket; the broker is not touched.  Replace it with a real backup when HA
arrives.

The probe is Twisted code; the tests are plain synchronous pytest.  A private
reactor (a new ``EPollReactor`` instance, not the global one, so nothing else
in the test process is affected and it can be stopped) runs in a thread for
the whole module; tests call into it with ``blockingCallFromThread``.
:class:`ThreadedProbe` lets the contract's ``probe.check(target)`` run on
that thread while handing the test a Deferred it may cancel.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pytest
import stomp
from proton import Endpoint
from proton.utils import BlockingConnection
from twisted.internet import defer, task
from twisted.internet.threads import blockingCallFromThread
from twisted.python.failure import Failure

from junction.config.model import Connector
from junction.gateway.amqp_probe import AmqpTargetProbe, ProbeError
from junction.gateway.pool import StaticPool
from junction.gateway.probe import PROBE_TIMEOUT, ProbeResult
from junction.routing.targets import Target
from tests.harness import LOOPBACK, BrokerProcess, free_port, wait_for
from tests.unit.probe_fixtures import CoreOpening, CoreOpeningFactory
from tests.unit.test_gateway_pool import TargetProbeContract, outcome

pytestmark = pytest.mark.timeout(120)

POOL_USER, POOL_PASSWORD = "pool", "pool-secret"
APP_USER, APP_PASSWORD = "app", "app-secret"
USERS = {POOL_USER: (POOL_PASSWORD, "pool"), APP_USER: (APP_PASSWORD, "app")}
#: seconds any one expected thing may take
TIMEOUT = 10.0


# --------------------------------------------------------------------------- the reactor thread


class ReactorThread:
    """A private reactor running in a daemon thread, started once and stopped once."""

    def __init__(self) -> None:
        from twisted.internet.epollreactor import EPollReactor

        self.reactor = EPollReactor()
        self.thread = threading.Thread(
            target=self.reactor.run,
            kwargs={"installSignalHandlers": False},
            name="probe-reactor",
            daemon=True,
        )

    def start(self) -> ReactorThread:
        self.thread.start()
        self.call(lambda: None)  # returns once the reactor runs
        return self

    def call(self, f, *args, **kwargs):
        """Run ``f`` on the reactor thread; its result (a Deferred's too), or its exception raised here."""
        return blockingCallFromThread(self.reactor, f, *args, **kwargs)

    def settle(self) -> None:
        """Let the reactor finish what is already due (a dropped connection's end, for one)."""
        self.call(task.deferLater, self.reactor, 0.05, lambda: None)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.reactor.callFromThread(self.reactor.stop)
            self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the probe reactor did not stop"


class _Pending:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.result = None
        self.real: defer.Deferred | None = None
        self.cancelled = False


class ThreadedProbe:
    """A probe living on the reactor thread, called from the test thread.

    ``check()`` starts the real check on the reactor thread and returns a
    Deferred of the test thread's own; :meth:`wait` fires it with the real
    outcome.  Cancelling it cancels the real one (on the reactor thread) and
    fails it with CancelledError at once, as a Deferred's cancel does.
    """

    def __init__(self, real: AmqpTargetProbe, rt: ReactorThread) -> None:
        self.real = real
        self.rt = rt
        self._pending: dict = {}

    def check(self, target) -> defer.Deferred:
        pending = _Pending()

        def settle(result):
            pending.result = result
            pending.event.set()  # the Failure is handed over: not unhandled here

        def start():
            if not pending.cancelled:
                pending.real = self.real.check(target)
                pending.real.addBoth(settle)

        def cancel_real():
            if pending.real is not None:
                pending.real.cancel()

        def cancel(_proxy):
            pending.cancelled = True
            self.rt.reactor.callFromThread(cancel_real)

        self.rt.call(start)
        proxy = defer.Deferred(cancel)
        self._pending[proxy] = pending
        return proxy

    def release(self, target) -> None:
        self.rt.call(self.real.release, target)

    def wait(self, proxy: defer.Deferred, timeout: float = PROBE_TIMEOUT + TIMEOUT):
        pending = self._pending.pop(proxy)
        if not proxy.called:
            assert pending.event.wait(timeout), f"the probe's check did not end within {timeout} s"
            if isinstance(pending.result, Failure):
                proxy.errback(pending.result)
            else:
                proxy.callback(pending.result)
        return outcome(proxy)

    def outstanding(self) -> list:
        return self.rt.call(self.real.outstanding)


# --------------------------------------------------------------------------- the world


class HangingServer:
    """A plain TCP server socket: accepts connections and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="hanging-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted.append(conn)

    def open_connections(self) -> list[socket.socket]:
        """Accepted connections whose peer has not closed them (each read without blocking)."""
        still = []
        with self._lock:
            conns = list(self.accepted)
        for conn in conns:
            if conn.fileno() < 0:
                continue
            try:
                conn.setblocking(False)
                data = conn.recv(4096)
                while data:  # the probe's protocol header: not an answer, not an end
                    data = conn.recv(4096)
            except BlockingIOError:
                still.append(conn)  # nothing to read and no EOF: still open
                continue
            except OSError:
                pass  # reset: closed
            conn.close()
        return still

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._thread.join(TIMEOUT)
        with self._lock:
            for conn in self.accepted:
                conn.close()


class World:
    """Module-wide: the reactor thread, broker cores by node id, stand-ins, client connections."""

    def __init__(self, tmp_path_factory, rt: ReactorThread) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.rt = rt
        self.cores: dict[str, BrokerProcess] = {}
        self.listeners: list = []
        self.hanging = HangingServer()
        self.clients: list = []

    def core(self, node_id: str) -> BrokerProcess:
        """The running broker core with this node id (started on first use, its node id seeded)."""
        broker = self.cores.get(node_id)
        if broker is None:
            name = f"core-{node_id}"
            broker = BrokerProcess(
                self.tmp_path_factory.mktemp(name),
                name=name,
                security=True,
                users=USERS,
                persistence=False,
            )
            journal = broker.dir / "data" / "journal"
            journal.mkdir(parents=True, exist_ok=True)
            (journal / "node.id").write_text(node_id + "\n", encoding="utf-8")
            self.cores[node_id] = broker
            broker.start()
        return broker

    @staticmethod
    def target(broker: BrokerProcess) -> Target:
        return Target(
            connector=Connector(
                name=broker.name, scheme="tcp", host=broker.host, port=broker.amqp_port
            )
        )

    def stand_in(self, **opening) -> Target:
        """A CoreOpening served over TCP on the reactor thread."""
        factory = CoreOpeningFactory(
            lambda: CoreOpening(users={POOL_USER: POOL_PASSWORD}, **opening)
        )
        port = self.rt.call(self.rt.reactor.listenTCP, 0, factory, interface=LOOPBACK)
        self.listeners.append(port)
        return Target(
            connector=Connector(
                name="stand-in", scheme="tcp", host=LOOPBACK, port=port.getHost().port
            )
        )

    # -- clients holding connections to a core

    def amqp_client(self, broker: BrokerProcess, *, session: bool) -> BlockingConnection:
        c = BlockingConnection(
            broker.amqp_url,
            timeout=TIMEOUT,
            user=APP_USER,
            password=APP_PASSWORD,
            allowed_mechs="PLAIN",
            container_id=f"client-{uuid.uuid4().hex[:8]}",
        )
        self.clients.append(c)
        if session:
            ssn = c.conn.session()
            ssn.open()
            c.wait(lambda: bool(ssn.state & Endpoint.REMOTE_ACTIVE), msg="session begin")
        return c

    def stomp_client(self, broker: BrokerProcess):
        c = stomp.Connection12([broker.stomp_address], reconnect_attempts_max=1)
        c.connect(APP_USER, APP_PASSWORD, wait=True)
        self.clients.append(c)
        return c

    def close_clients(self) -> None:
        while self.clients:
            c = self.clients.pop()
            try:
                if isinstance(c, BlockingConnection):
                    c.close()
                else:
                    c.disconnect()
            except Exception:  # already gone
                pass

    def close(self) -> None:
        self.close_clients()
        for port in self.listeners:
            self.rt.call(port.stopListening)
        self.hanging.close()
        for broker in self.cores.values():
            broker.stop()


def session_connections(broker: BrokerProcess) -> int:
    """Client connections holding a session, as the management API lists them."""
    return len(broker.status()["connections"])


@pytest.fixture(scope="module")
def rt() -> Iterator[ReactorThread]:
    thread = ReactorThread().start()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory, rt) -> Iterator[World]:
    w = World(tmp_path_factory, rt)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture(autouse=True)
def _core_logs(request: pytest.FixtureRequest) -> None:
    """Attach the module's broker log tails to a failure (see tests/conftest.py)."""
    if "world" in request.fixturenames or hasattr(request.cls or object, "world"):
        w = request.getfixturevalue("world")
        request.node._junction_brokers = list(w.cores.values())


@pytest.fixture
def probe(world) -> Iterator[AmqpTargetProbe]:
    """A probe with the pool's credentials, on the reactor thread (call it through ``world.rt``)."""
    p = AmqpTargetProbe(username=POOL_USER, password=POOL_PASSWORD, reactor=world.rt.reactor)
    yield p
    for pending in world.rt.call(p.outstanding):
        world.rt.call(p.release, pending.target)


def check(world: World, probe: AmqpTargetProbe, target: Target) -> ProbeResult:
    return world.rt.call(probe.check, target)


def count_of(world: World, probe: AmqpTargetProbe, broker: BrokerProcess) -> int:
    return check(world, probe, World.target(broker)).connection_count


# --------------------------------------------------------------------------- the contract


class TestAmqpProbeContractOnRealCores(TargetProbeContract):
    world: World

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def _bind_world(cls, world):
        # class scope: bound before setup_method (which calls make_probe)
        cls.world = world

    def make_probe(self):
        self.local_node = None
        real = AmqpTargetProbe(
            username=POOL_USER,
            password=POOL_PASSWORD,
            reactor=self.world.rt.reactor,
            local_status=lambda: ProbeResult(
                active=True, node_id=self.local_node, connection_count=0
            ),
        )
        return ThreadedProbe(real, self.world.rt)

    def teardown_method(self, method=None):
        self.world.close_clients()

    def serving_target(self, node_id, connection_count):
        broker = self.world.core(node_id)
        for _ in range(connection_count):
            self.world.amqp_client(broker, session=True)
        wait_for(
            lambda: session_connections(broker) == connection_count,
            TIMEOUT,
            what=f"{broker.name} to hold {connection_count} client connections",
        )
        return World.target(broker)

    def passive_target(self, node_id):
        # no passive broker core exists yet: a stand-in on the wire (see the module docstring)
        return self.world.stand_in(node_id=node_id, active=False, connections=1)

    def unreachable_target(self):
        return Target(
            connector=Connector(name="closed", scheme="tcp", host=LOOPBACK, port=free_port())
        )

    def hanging_target(self):
        return Target(
            connector=Connector(
                name="hanging", scheme="tcp", host=LOOPBACK, port=self.world.hanging.port
            )
        )

    def local_target(self, node_id):
        self.local_node = node_id
        return Target(local=True, node_id=node_id)

    def resolve(self, d):
        return self.probe.wait(d)

    def leftovers(self):
        self.world.rt.settle()
        left = self.probe.outstanding()
        left += [c for c in self.world.rt.call(self.world.rt.reactor.getDelayedCalls) if c.active()]
        try:
            wait_for(
                lambda: not self.world.hanging.open_connections(),
                TIMEOUT,
                what="dropped connections",
            )
        except TimeoutError:
            left += self.world.hanging.open_connections()
        return left


# --------------------------------------------------------------------------- beyond the contract


def test_wrong_pool_password_fails_the_check(world):
    broker = world.core("node-a")
    wrong = AmqpTargetProbe(username=POOL_USER, password="wrong", reactor=world.rt.reactor)
    with pytest.raises(ProbeError, match="unauthorized-access"):
        check(world, wrong, World.target(broker))
    unknown = AmqpTargetProbe(username="mallory", password=POOL_PASSWORD, reactor=world.rt.reactor)
    with pytest.raises(ProbeError, match="unauthorized-access"):
        check(world, unknown, World.target(broker))
    assert world.rt.call(wrong.outstanding) == [] and world.rt.call(unknown.outstanding) == []


def test_anonymous_probe_where_the_core_allows_anonymous(world):
    broker = world.core("node-a")  # anonymous-user guest
    anonymous = AmqpTargetProbe(reactor=world.rt.reactor)
    result = check(world, anonymous, World.target(broker))
    assert result.active is True and result.node_id == "node-a"


def test_connection_count_reflects_other_clients_of_every_kind(world, probe):
    broker = world.core("node-a")
    world.close_clients()
    wait_for(lambda: count_of(world, probe, broker) == 0, TIMEOUT, what="no client connections")

    # an AMQP connection that has opened no session yet counts
    world.amqp_client(broker, session=False)
    assert count_of(world, probe, broker) == 1
    # so does one with a session, and a STOMP connection
    world.amqp_client(broker, session=True)
    world.stomp_client(broker)
    assert count_of(world, probe, broker) == 3

    world.close_clients()
    wait_for(
        lambda: count_of(world, probe, broker) == 0, TIMEOUT, what="the clients' connections gone"
    )


def test_the_probe_s_own_connection_does_not_count(world, probe):
    broker = world.core("node-a")
    world.close_clients()
    wait_for(lambda: count_of(world, probe, broker) == 0, TIMEOUT, what="no client connections")
    # back to back: each check's connection is gone before the next one counts
    assert [count_of(world, probe, broker) for _ in range(5)] == [0] * 5
    world.amqp_client(broker, session=False)
    assert [count_of(world, probe, broker) for _ in range(3)] == [1] * 3


def test_hanging_target_times_out_and_the_connection_is_dropped(world):
    quick = AmqpTargetProbe(
        username=POOL_USER, password=POOL_PASSWORD, reactor=world.rt.reactor, timeout=0.5
    )
    target = Target(
        connector=Connector(name="hanging", scheme="tcp", host=LOOPBACK, port=world.hanging.port)
    )
    with pytest.raises(defer.TimeoutError, match="no open within 0.5 s"):
        check(world, quick, target)
    assert world.rt.call(quick.outstanding) == []
    wait_for(
        lambda: not world.hanging.open_connections(), TIMEOUT, what="the hanging connection dropped"
    )


def test_closed_port_is_refused(world, probe):
    from twisted.internet.error import ConnectionRefusedError

    target = Target(
        connector=Connector(name="closed", scheme="tcp", host=LOOPBACK, port=free_port())
    )
    with pytest.raises(ConnectionRefusedError, match="closed"):
        check(world, probe, target)


def test_a_static_pool_monitors_real_cores(world, probe):
    """The probe behind a StaticPool: node ids learnt, ready, counts; a stopped core is not ready."""
    a = world.core("node-a")
    c = world.core("node-c")
    world.close_clients()
    targets = [World.target(a), World.target(c)]
    pool = world.rt.call(
        lambda: StaticPool(targets, probe=probe, check_period_ms=100, clock=world.rt.reactor)
    )
    world.rt.call(pool.start)
    try:
        wait_for(
            lambda: world.rt.call(lambda: all(t.ready for t in targets)),
            TIMEOUT,
            what="both targets ready",
        )
        assert [t.node_id for t in targets] == ["node-a", "node-c"]
        world.amqp_client(c, session=False)
        wait_for(
            lambda: world.rt.call(lambda: [t.connection_count for t in targets]) == [0, 1],
            TIMEOUT,
            what="counts [0, 1]",
        )
        c.stop()
        wait_for(
            lambda: world.rt.call(lambda: not targets[1].ready),
            TIMEOUT,
            what="the stopped core not ready",
        )
        assert world.rt.call(lambda: targets[0].ready)
        world.close_clients()
        c.start()
        wait_for(
            lambda: world.rt.call(lambda: targets[1].ready),
            TIMEOUT,
            what="the restarted core ready again",
        )
        assert targets[1].node_id == "node-c"
    finally:
        world.rt.call(pool.stop)
    assert world.rt.call(probe.outstanding) == []


@pytest.mark.parametrize(
    ("port_of", "failure"), [("stomp_port", ProbeError), ("mgmt_port", defer.TimeoutError)]
)
def test_a_port_that_does_not_speak_amqp_fails(world, port_of, failure):
    """The core's STOMP acceptor drops the AMQP header; its HTTP API waits for a request line."""
    broker = world.core("node-a")
    quick = AmqpTargetProbe(
        username=POOL_USER, password=POOL_PASSWORD, reactor=world.rt.reactor, timeout=1.0
    )
    port = getattr(broker, port_of)
    target = Target(connector=Connector(name=port_of, scheme="tcp", host=LOOPBACK, port=port))
    with pytest.raises(failure, match=port_of):
        check(world, quick, target)
    assert world.rt.call(quick.outstanding) == []
