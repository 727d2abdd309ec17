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
``artemis_factory``, ``artemis``, ``artemis_module``).  A differential test runs one scenario
against both, changing only the URL::

    def scenario(url):
        return [{"op": "connect", "url": url, "user": "admin", "password": "admin"},
                {"op": "send", "queue": "orders", "body": "o{i}", "count": 3},
                {"op": "receive", "queue": "orders", "count": 3}]

    on_artemis = jms.run(scenario(artemis.url))                       # tcp://127.0.0.1:<port>
    on_junction = jms.run(scenario(f"tcp://127.0.0.1:{core_port}"))   # a Junction CORE acceptor
    assert outcome(on_junction) == outcome(on_artemis)  # bodies, types, properties, not IDs
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
