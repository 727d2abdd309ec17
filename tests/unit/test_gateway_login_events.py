"""A gateway's failed logins reach its event log as refusals (reason ``unauthenticated``).

The gateway refuses a STOMP CONNECT or an AMQP SASL login it cannot authenticate
before any routing; the routing report counts refusals from ``connection.routed``,
so the refusal is logged as one: decision ``refused``, no key, no target.
"""

from __future__ import annotations

from junction.events.node import UNAUTHENTICATED, NodeEvents
from tests.unit.test_gateway_listener import AMQP, amqp_client, connect_frame, gateways, pump

__all__ = ["gateways"]  # (the fixture, used below)


class _Log:
    """An event log that keeps what it is given."""

    def __init__(self):
        self.events: list = []

    def enabled(self, kind) -> bool:
        return True

    def emit(self, kind, **fields) -> None:
        self.events.append((kind, fields))


def _watched(g) -> _Log:
    log = _Log()
    g.factory.events = NodeEvents(log, "gw-node")
    return log


def test_a_stomp_login_that_fails_is_logged_as_a_refusal(gateways):  # noqa: F811 - the fixture
    g = gateways()
    log = _watched(g)
    g.ready("c1")
    c = g.client()
    c.send(connect_frame(login="alice", passcode="wrong", **{"client-id": "app-1"}))
    c.error()
    routed = [fields for kind, fields in log.events if kind == "connection.routed"]
    assert len(routed) == 1
    assert {k: routed[0][k] for k in ("router", "decision", "reason", "user", "client_id")} == {
        "router": g.factory.router.name, "decision": "refused", "reason": UNAUTHENTICATED, "user": "alice",
        "client_id": "app-1",
    }
    assert routed[0]["conn"] == next(f["conn"] for k, f in log.events if k == "connection.accepted")


def test_an_amqp_login_that_fails_is_logged_as_a_refusal(gateways):  # noqa: F811 - the fixture
    g = gateways(protocols=AMQP)
    log = _watched(g)
    g.ready("c1")
    engine = amqp_client(password="wrong")
    c = g.client()
    pump(engine, c)
    assert c.closed
    routed = [fields for kind, fields in log.events if kind == "connection.routed"]
    assert [(f["decision"], f["reason"]) for f in routed] == [("refused", UNAUTHENTICATED)]
