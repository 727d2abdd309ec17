"""Shared pytest fixtures: real broker processes (see ``tests/harness.py``).

``broker``
    A started :class:`~tests.harness.BrokerProcess` named ``broker`` in the
    test's ``tmp_path`` (security off, persistence on, free ports), stopped
    at teardown.

``broker_factory``
    ``broker_factory(name="b1", **BrokerProcess_kwargs)`` returns a
    constructed, *not yet started* BrokerProcess in ``tmp_path`` (call
    ``.start()``; chaining works).  Every broker it made is stopped at
    teardown, whatever state the test left it in.

The real Artemis, client and broker (:mod:`tests.artemis`; fetched into a cache
outside the repository on first use):

``artemis_dist``
    The fetched release (session): client jar, unpacked broker distribution.
``jms``
    A :class:`~tests.artemis.JmsClient` running scenarios with the real JMS
    client (``tests/java`` compiled once per change); runs left going are
    killed at teardown.
``artemis_factory``
    ``artemis_factory(name="artemis", **ArtemisBroker_kwargs)``: a constructed,
    *not yet started* :class:`~tests.artemis.ArtemisBroker` in ``tmp_path``
    (``.start()`` chains).  At teardown each is stopped, and the test fails if
    one died by itself or did not stop orderly.
``artemis``
    A started ArtemisBroker with the defaults (user ``admin``/``admin``,
    login required, the main acceptor only).
``artemis_module``
    The same, one per test module (Artemis takes seconds to start), made with
    the module's ``ARTEMIS_OPTIONS`` dict of ArtemisBroker arguments if it
    has one: tests sharing it use queue and topic names of their own.

The real ActiveMQ Classic, clients and broker (:mod:`tests.classic`; Debian's
packages, and the 6.x client fetched into the cache on first use):

``openwire_client``
    A :class:`~tests.classic.OpenWireClient`, parametrized over the two real
    clients (ids ``5.17``: Debian's, javax.jms; ``6``: activemq-client 6.x,
    jakarta.jms); the scenario program compiled once per client and change.
``classic_factory``, ``classic``, ``classic_module``
    As the Artemis ones, for :class:`~tests.classic.ClassicBroker` (the
    module's ``CLASSIC_OPTIONS``): stopped at teardown, the test failing if
    one died by itself or did not stop orderly.

When a test fails (in setup or in the test body), the log tail of every
broker it used (Junction's and Artemis's) is attached to the failure report as a
section named ``broker NAME log``; the full logs stay in the broker's directory under
``tmp_path``.  Cleanup is layered: fixture finalizers stop the brokers, the
harness's ``atexit`` hook catches anything a crashed session left, and the
child's parent-death signal covers a test process killed outright.

Hypothesis runs every property here without its per-example deadline
(200 ms by default) and without the health check that fails a test whose
examples are slow to generate (:data:`HYPOTHESIS_PROFILE`): no property here
is about time, and on a loaded two-CPU machine any example can stall for
longer than that (a filter example of well under a millisecond took 451 ms
in a full run).  A test that sets its own ``deadline`` still gets it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import harness
from tests.artemis import ArtemisBroker, ArtemisDist, JmsClient, compile_sources, fetch
from tests.artemis.broker import ORDERLY_EXIT
from tests.childproc import ChildProcess
from tests.classic import CLIENTS, ClassicBroker, OpenWireClient, client_jars, compile_scenario
from tests.harness import BrokerProcess

#: the Hypothesis settings every test starts from (see the module docstring)
HYPOTHESIS_PROFILE = "junction"
settings.register_profile(
    HYPOTHESIS_PROFILE, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(HYPOTHESIS_PROFILE)

_BROKERS_ATTR = "_junction_brokers"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """On a failed setup or call, attach each broker's log tail to the report."""
    outcome = yield
    report = outcome.get_result()
    if report.when in ("setup", "call") and report.failed:
        brokers = list(getattr(item, _BROKERS_ATTR, ()))
        funcargs = getattr(item, "funcargs", {})
        brokers += [
            b for b in funcargs.values() if isinstance(b, (ArtemisBroker, ClassicBroker)) and b not in brokers
        ]
        for b in brokers:
            try:
                tail = b.log_tail(60)
            except OSError as e:
                tail = f"(could not read logs: {e})"
            report.sections.append((f"broker {b.name} log ({b.dir})", tail))


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest, tmp_path
) -> Iterator[Callable[..., BrokerProcess]]:
    made: list[BrokerProcess] = []
    setattr(request.node, _BROKERS_ATTR, made)

    def make(name: str = "broker", **kwargs) -> BrokerProcess:
        if any(b.name == name for b in made):
            raise ValueError(f"broker_factory: a broker named {name!r} already exists")
        b = BrokerProcess(tmp_path, name=name, **kwargs)
        made.append(b)
        return b

    yield make
    errors = []
    for b in reversed(made):
        try:
            b.stop()
        except Exception as e:  # keep stopping the others
            errors.append(f"{b.name}: {e!r}")
    if errors:
        pytest.fail("could not stop broker(s): " + "; ".join(errors), pytrace=False)


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory("broker").start()


# -- Spark ----------------------------------------------------------------------------------
# One SparkSession per test process, shared by every test that runs Spark in-process (see
# tests/pipeline/sparkkit.py): started on first use, stopped when the process's tests end.


@pytest.fixture(scope="session")
def spark_soon():
    """The shared SparkSession's future: its JVM starts in the background (it takes seconds)
    while the test does other work; ``spark_soon.result()`` waits for it."""
    from tests.pipeline.sparkkit import SHARED

    yield SHARED.soon()
    SHARED.stop()


@pytest.fixture(scope="session")
def spark(spark_soon):
    """The shared SparkSession, started (see ``spark_soon``), active in the tests' thread."""
    from tests.pipeline.sparkkit import START_TIMEOUT_S, make_active

    session = spark_soon.result(timeout=START_TIMEOUT_S)
    make_active(session)
    return session


# -- the real Artemis -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def artemis_dist() -> ArtemisDist:
    """The Artemis client jar and broker distribution, fetched into the cache if needed."""
    return fetch()


@pytest.fixture(scope="session")
def jms_classes(artemis_dist: ArtemisDist):
    """tests/java compiled against the client jar (in the cache, once per change)."""
    return compile_sources(artemis_dist)


@pytest.fixture
def jms(artemis_dist: ArtemisDist, jms_classes, tmp_path) -> Iterator[JmsClient]:
    client = JmsClient(artemis_dist, jms_classes, tmp_path / "jms")
    yield client
    client.close()


def _stop_peers(brokers: list[ArtemisBroker] | list[ClassicBroker]) -> list[str]:
    """Stop each broker; what went wrong: one that died by itself, or did not stop orderly."""
    errors = []
    for b in reversed(brokers):
        died = b.died
        if died is not None:
            errors.append(f"{b.name} exited by itself with status {died}")
        try:
            was_running = b.running
            rc = b.stop()
            if was_running and rc not in ORDERLY_EXIT:
                errors.append(f"{b.name} did not stop orderly (status {rc})")
        except Exception as e:  # keep stopping the others
            errors.append(f"{b.name}: {e!r}")
    return errors


def _peer_factory(request: pytest.FixtureRequest, what: str, construct: Callable[..., ChildProcess]):
    """The make() of a peer broker factory fixture and the list of what it made; each broker
    is also listed on the test item for the failure report's log tails."""
    made: list = []
    brokers = getattr(request.node, _BROKERS_ATTR, None)
    if brokers is None:
        brokers = []
        setattr(request.node, _BROKERS_ATTR, brokers)

    def make(name: str, **kwargs):
        if any(b.name == name for b in made):
            raise ValueError(f"{what}: a broker named {name!r} already exists")
        b = construct(name, **kwargs)
        made.append(b)
        brokers.append(b)
        return b

    return make, made


@pytest.fixture
def artemis_factory(
    request: pytest.FixtureRequest, artemis_dist: ArtemisDist, tmp_path
) -> Iterator[Callable[..., ArtemisBroker]]:
    make, made = _peer_factory(
        request, "artemis_factory", lambda name, **kw: ArtemisBroker(artemis_dist, tmp_path, name, **kw)
    )

    def make_artemis(name: str = "artemis", **kwargs) -> ArtemisBroker:
        return make(name, **kwargs)

    yield make_artemis
    errors = _stop_peers(made)
    if errors:
        pytest.fail("Artemis broker(s): " + "; ".join(errors), pytrace=False)


@pytest.fixture
def artemis(artemis_factory: Callable[..., ArtemisBroker]) -> ArtemisBroker:
    return artemis_factory().start()


@pytest.fixture(scope="module")
def artemis_module(
    request: pytest.FixtureRequest, artemis_dist: ArtemisDist, tmp_path_factory
) -> Iterator[ArtemisBroker]:
    options = getattr(request.module, "ARTEMIS_OPTIONS", {})
    b = ArtemisBroker(artemis_dist, tmp_path_factory.mktemp("artemis"), "artemis", **options)
    yield b.start()
    errors = _stop_peers([b])
    if errors:
        pytest.fail("Artemis broker: " + "; ".join(errors), pytrace=False)


# -- the real ActiveMQ Classic --------------------------------------------------------------


@pytest.fixture(scope="session")
def openwire_clients() -> Callable[..., OpenWireClient]:
    """``make(name, workdir)``: an OpenWireClient of the client ``name`` (compiled once)."""
    compiled: dict[str, tuple] = {}

    def make(name: str, workdir) -> OpenWireClient:
        if name not in compiled:
            jars = client_jars(name)
            compiled[name] = (jars, compile_scenario(jars))
        jars, classes = compiled[name]
        return OpenWireClient(jars, classes, workdir)

    return make


@pytest.fixture(params=sorted(CLIENTS))
def openwire_client(request: pytest.FixtureRequest, openwire_clients, tmp_path) -> Iterator[OpenWireClient]:
    client = openwire_clients(request.param, tmp_path / f"openwire-{request.param}")
    yield client
    client.close()


@pytest.fixture
def classic_factory(request: pytest.FixtureRequest, tmp_path) -> Iterator[Callable[..., ClassicBroker]]:
    make, made = _peer_factory(request, "classic_factory", lambda name, **kw: ClassicBroker(tmp_path, name, **kw))

    def make_classic(name: str = "classic", **kwargs) -> ClassicBroker:
        return make(name, **kwargs)

    yield make_classic
    errors = _stop_peers(made)
    if errors:
        pytest.fail("Classic broker(s): " + "; ".join(errors), pytrace=False)


@pytest.fixture
def classic(classic_factory: Callable[..., ClassicBroker]) -> ClassicBroker:
    return classic_factory().start()


@pytest.fixture(scope="module")
def classic_module(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[ClassicBroker]:
    options = getattr(request.module, "CLASSIC_OPTIONS", {})
    b = ClassicBroker(tmp_path_factory.mktemp("classic"), "classic", **options)
    yield b.start()
    errors = _stop_peers([b])
    if errors:
        pytest.fail("Classic broker: " + "; ".join(errors), pytrace=False)


def pytest_unconfigure(config):
    """The run's port claims (tests/harness.claim_port) go with the run: the controller (or the
    only process) removes their directory; a worker leaves it to the controller."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(harness._claims_dir(), ignore_errors=True)
