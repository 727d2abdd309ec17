"""A node is Twisted services under one parent, started and stopped in the orders of its tables.

The node runs on a MemoryReactorClock (``listenTCP`` is recorded, nothing
binds).  Each service's start and stop are wrapped to record when they run, so
the tests see the order the parent imposes, and that a stop waits for the one
before it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os

import pytest
from twisted.application.service import IService, MultiService
from twisted.internet import defer
from twisted.internet.testing import MemoryReactorClock

from junction.config.loader import parse_config
from junction.node import LOCK_FILE, Node
from junction.node.parent import START_ORDER, STOP_ORDER

CONFIG = """<configuration xmlns="urn:activemq">
<core xmlns="urn:activemq:core">
  <persistence-enabled>false</persistence-enabled>
  <security-enabled>false</security-enabled>
  <journal-directory>data/journal</journal-directory>
  <acceptors>
    <acceptor name="stomp">tcp://127.0.0.1:0?protocols=STOMP;stompMaxFramePayloadLength=100;amqpCredits=5;batchDelay=1</acceptor>
    <acceptor name="amqp">tcp://127.0.0.1:0?protocols=AMQP;stompMaxFramePayloadLength=100;handshakesAllowed=3</acceptor>
  </acceptors>
</core>
</configuration>
"""


@pytest.fixture
def node(tmp_path):
    config = parse_config(CONFIG, file=str(tmp_path / "broker.xml"), base_dir=str(tmp_path), env={})
    config = dataclasses.replace(config, management_port=0)
    node = Node(config, reactor=MemoryReactorClock())
    yield node
    if node.running:
        node.stop()


def record(node, calls: list, *, hold: dict | None = None) -> None:
    """Wrap each service's phases to append ``(phase, name)`` to ``calls``; a stop named in
    ``hold`` returns that Deferred once it has run."""
    for service in node:
        for phase in ("privilegedStartService", "startService", "stopService"):
            original = getattr(service, phase)

            def wrapped(original=original, phase=phase, name=service.name):
                calls.append((phase, name))
                result = original()
                if phase == "stopService" and hold and name in hold:
                    held = hold[name]
                    return defer.maybeDeferred(lambda: result).addCallback(lambda _: held)
                return result

            setattr(service, phase, wrapped)


def test_a_node_is_one_parent_service_with_a_child_per_part(node):
    assert isinstance(node, MultiService) and IService.providedBy(node)
    names = [service.name for service in node]
    assert names == ["data", "events", "broker", "cluster", "routers", "listeners", "links", "management", "reload"]
    assert [type(service) for service in node] == list(START_ORDER)
    assert sorted(STOP_ORDER) == sorted(names)
    assert all(service.parent is node and IService.providedBy(service) for service in node)


def test_start_order_the_data_and_the_broker_core_first_then_each_part(node):
    calls: list = []
    record(node, calls)
    node.start()
    names = [service.name for service in node]
    assert calls == [("privilegedStartService", n) for n in names] + [("startService", n) for n in names]
    assert node.running and all(service.running for service in node)
    # the privileged phase made what the others use before anything started
    assert node.server.started and node.node_id
    assert set(node.listeners) == {"stomp", "amqp"}
    assert node.management_port is not None


def test_stop_order_listeners_first_the_data_directory_last(node):
    node.start()
    calls: list = []
    record(node, calls)
    d = node.stop()
    assert d.called
    assert calls == [("stopService", name) for name in STOP_ORDER]
    assert STOP_ORDER[:3] == ("reload", "listeners", "management")
    assert STOP_ORDER[-3:] == ("broker", "events", "data")
    assert not node.running and not any(service.running for service in node)
    assert node.listeners == {} and node.management_port is None


def test_each_stop_waits_for_the_one_before(node):
    node.start()
    gate = defer.Deferred()
    calls: list = []
    record(node, calls, hold={"listeners": gate})
    d = node.stop()
    assert calls == [("stopService", "reload"), ("stopService", "listeners")]
    assert not d.called  # the broker core, the event log and the lock wait for the listeners
    gate.callback(None)
    assert d.called
    assert calls == [("stopService", name) for name in STOP_ORDER]


def test_a_failed_journal_at_stop_is_kept_and_said_and_the_rest_still_stops(node, tmp_path, caplog):
    node.start()
    node.server.stop = lambda: defer.fail(OSError("journal fsync failed"))
    with caplog.at_level(logging.INFO, logger="junction.node"):
        d = node.stop()
    assert d.called
    assert node.stop_failure == "journal fsync failed"
    assert f"node {node.name} stopped, not cleanly: journal fsync failed" in caplog.text
    # the data directory was unlocked after it: another process may lock it now
    fd = os.open(tmp_path / "data" / "journal" / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_acceptor_parameters_without_effect_are_warned_per_acceptor(node, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="junction.node"):
        node.start()
    said = [r.getMessage() for r in caplog.records if "has no effect in Junction yet" in r.getMessage()]
    where = str(tmp_path / "broker.xml")
    assert said == [
        f"{where}:7: acceptor stomp: parameter amqpCredits has no effect in Junction yet",
        f"{where}:7: acceptor stomp: parameter batchDelay has no effect in Junction yet",
        f"{where}:8: acceptor amqp: parameter handshakesAllowed has no effect in Junction yet",
        f"{where}:8: acceptor amqp: parameter stompMaxFramePayloadLength has no effect in Junction yet",
    ]
