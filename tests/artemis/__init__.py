"""The real Apache ActiveMQ Artemis, client and broker, for tests and benchmarks.

The reference the CORE protocol is tested against: the same scenario runs with the real
Artemis JMS client against the real Artemis broker and against a Junction node, and the
outcomes are compared (differential testing).

* :mod:`tests.artemis.cache` fetches the client jar and the broker distribution with Maven
  into a cache outside the repository (``python -m tests.artemis fetch`` ahead of time);
* :mod:`tests.artemis.broker`: :class:`ArtemisBroker`, a broker instance in a test's
  directory, on free loopback ports, started, stopped, killed and restarted;
* :mod:`tests.artemis.jms`: :class:`JmsClient`, scenarios (JSON commands) run by the real
  JMS client in ``tests/java/JmsScenario.java``, compiled by the fixtures.

The pytest fixtures are in ``tests/conftest.py`` (``artemis_dist``, ``jms``,
``artemis_factory``, ``artemis``).
"""

from tests.artemis.broker import ArtemisBroker, ArtemisExited
from tests.artemis.cache import ARTEMIS_VERSION, ArtemisDist, ArtemisFetchError, fetch
from tests.artemis.jms import JmsClient, JmsRun, JmsRunError, compile_sources

__all__ = [
    "ARTEMIS_VERSION",
    "ArtemisBroker",
    "ArtemisDist",
    "ArtemisExited",
    "ArtemisFetchError",
    "JmsClient",
    "JmsRun",
    "JmsRunError",
    "compile_sources",
    "fetch",
]
