"""Scheduled delivery and consumer priority through the gateway: the same as on the core.

The scenarios of :mod:`tests.integration.test_scheduled_priority` (compared there with real
Artemis) run against a core directly and through a forwarding gateway (``protocols=STOMP,AMQP``,
``routerMode=forward``): the STOMP headers, the AMQP annotations, the source address's
``?consumer-priority=N`` and the attach's ``priority`` property pass through unchanged, so the
outcomes must be the same.
"""

from __future__ import annotations

import pytest

from tests.integration import test_scheduled_priority as sched
from tests.integration.test_core_cross_protocol import _Target
from tests.integration.test_gateway_amqp import amqp_gateway
from tests.integration.test_gateway_stomp import make_core, new_id, wait_ready

pytestmark = pytest.mark.timeout(120)


def _target(name: str, address: tuple[str, int]) -> _Target:
    """One address for STOMP and AMQP, with the gateway world's user and a routing key."""
    host, port = address
    target = _Target(name, 0, port, port)
    target.host = host
    target.user, target.password, target.client_id = "app", "app-secret", new_id("sched")
    return target


def test_scheduling_and_priority_through_the_gateway(broker_factory):
    core1 = make_core(broker_factory, "core1").start()
    gateway = amqp_gateway(broker_factory, [core1], "forward")
    wait_ready(gateway, core1=True)
    direct = _target("direct", ("127.0.0.1", core1.gateway_in_port))
    routed = _target("routed", gateway.routed_address)
    seen = {}
    for target in (direct, routed):
        seen[target.name] = {
            "stomp": sched.stomp_scheduled(target),
            "amqp": sched.amqp_scheduled(target),
            "priority": {case: sched.amqp_priority(target, case) for case in ("address", "link-int", "link-wins")},
        }
    assert seen["routed"] == seen["direct"]
    assert {k for k, v in seen["routed"]["stomp"]["order"].items() if v == "held"} == {"delay", "time", "time-wins"}
    assert {k for k, v in seen["routed"]["amqp"]["held"].items() if v == "held"} == {
        "delay", "int32-delay", "time", "time-wins",
    }
    for outcome in seen["routed"]["priority"].values():
        assert outcome["high"] == [0, 1, 2] and outcome["low"] == [3, 4, 5, 6, 7, 8, 9]
