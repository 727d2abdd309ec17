"""The real ActiveMQ Classic, clients and broker, for the OpenWire tests.

The reference OpenWire is tested against: the same scenario runs with the real Classic JMS
clients (Debian's 5.17 and the 6.x from Maven Central) against the real Classic broker
(Debian's ``activemq``) and the real Artemis broker (which accepts OpenWire), and later,
unchanged, against a Junction node; the outcomes are compared (differential testing).

* :mod:`tests.classic.cache`: the two clients' jars (``python -m tests.classic fetch`` fetches
  the 6.x one ahead of time);
* :mod:`tests.classic.client`: :class:`OpenWireClient`, scenarios (JSON commands) run by
  ``tests/java/openwire/OpenWireScenario.java``, compiled by the fixtures for each client;
* :mod:`tests.classic.broker`: :class:`ClassicBroker`, a Classic broker in a test's directory,
  on free loopback ports, started, stopped, killed and restarted.

The pytest fixtures are in ``tests/conftest.py`` (``openwire_client``, ``classic_factory``,
``classic``, ``classic_module``); the scenarios, as functions of a target, in
``tests/integration/test_openwire_peers.py``.
"""

from tests.classic.broker import ClassicBroker, ClassicExited
from tests.classic.cache import (
    CLIENT6_VERSION,
    CLIENTS,
    ClientUnavailable,
    OpenWireClientJars,
    client_jars,
)
from tests.classic.client import OpenWireClient, compile_scenario

__all__ = [
    "CLIENT6_VERSION",
    "CLIENTS",
    "ClassicBroker",
    "ClassicExited",
    "ClientUnavailable",
    "OpenWireClient",
    "OpenWireClientJars",
    "client_jars",
    "compile_scenario",
]
