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

When a test fails (in setup or in the test body), the log tail of every
broker it used is attached to the failure report as a section named
``broker NAME log``; the full logs stay in the broker's directory under
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

from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

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
        for b in getattr(item, _BROKERS_ATTR, ()):
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
