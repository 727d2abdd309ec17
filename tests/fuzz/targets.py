"""The fuzz targets: name -> the harness module (its ``fuzz_*`` function and ``seeds()``).

Each decoder a remote peer can reach is one target; docs/fuzzing.md says what
each harness asserts.  Kept free of ``junction`` imports so that the runner
can instrument the project's modules before a harness imports them.
"""

from __future__ import annotations

import importlib

#: target name -> (module, harness function)
TARGETS: dict[str, tuple[str, str]] = {
    "stomp": ("tests.fuzz.harness_stomp", "fuzz_stomp"),
    "stomp-opening": ("tests.fuzz.harness_stomp_session", "fuzz_opening"),
    "stomp-connection": ("tests.fuzz.harness_stomp_session", "fuzz_connection"),
    "amqp-types": ("tests.fuzz.harness_amqp", "fuzz_types"),
    "amqp-message": ("tests.fuzz.harness_amqp", "fuzz_message"),
    "sasl-server": ("tests.fuzz.harness_sasl", "fuzz_sasl_server"),
    "sasl-client": ("tests.fuzz.harness_sasl", "fuzz_sasl_client"),
    "amqp-opening": ("tests.fuzz.harness_sasl", "fuzz_opening"),
    "gateway-opening": ("tests.fuzz.harness_gateway", "fuzz_gateway"),
    "proxy": ("tests.fuzz.harness_proxy", "fuzz_proxy"),
    "cluster-link": ("tests.fuzz.harness_cluster", "fuzz_link"),
    "cluster-broadcast": ("tests.fuzz.harness_cluster", "fuzz_broadcast"),
    "amqp-server": ("tests.fuzz.harness_amqp_server", "fuzz_amqp_server"),
    "core": ("tests.fuzz.harness_core", "fuzz_core"),
    "core-server": ("tests.fuzz.harness_core_server", "fuzz_core_server"),
    "core-opening": ("tests.fuzz.harness_core_opening", "fuzz_opening"),
    "openwire": ("tests.fuzz.harness_openwire", "fuzz_codec"),
    "openwire-connection": ("tests.fuzz.harness_openwire", "fuzz_connection"),
    "openwire-opening": ("tests.fuzz.harness_openwire", "fuzz_opening"),
}


def load(name: str):
    """(harness, seeds) of target ``name``: imports its module (and so ``junction``)."""
    module_name, function = TARGETS[name]
    module = importlib.import_module(module_name)
    seeds = getattr(module, "seeds_" + function.removeprefix("fuzz_"), None) or module.seeds
    return getattr(module, function), seeds
