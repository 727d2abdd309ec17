"""``probeProtocols=`` on a connector: validated with file and line, read in order; and how
``junction status`` shows a pool's targets (the probe's protocol, why one is not ready)."""

from __future__ import annotations

import pytest

from junction.cli.status_table import format_status
from junction.config.loader import ConfigErrors, parse_config
from junction.config.model import Connector
from junction.config.urls import parse_probe_protocols
from junction.gateway.probe import stand_in_node_id


def _config(connectors: str):
    text = (
        '<configuration xmlns="urn:activemq">\n<core xmlns="urn:activemq:core">\n<connectors>\n'
        + connectors
        + "\n</connectors>\n</core>\n</configuration>\n"
    )
    return parse_config(text, file="b.xml", env={})


def test_probe_protocols_are_read_in_the_order_given():
    config = _config(
        '<connector name="a">tcp://127.0.0.1:1?probeProtocols=stomp, AMQP</connector>\n'
        '<connector name="b">tcp://127.0.0.1:2?probeProtocols=STOMP</connector>\n'
        '<connector name="c">tcp://127.0.0.1:3</connector>'
    )
    assert [c.probe_protocols for c in config.connectors] == [("STOMP", "AMQP"), ("STOMP",), ()]


def test_bad_probe_protocols_are_errors_with_file_and_line():
    with pytest.raises(ConfigErrors) as info:
        _config(
            '<connector name="a">tcp://127.0.0.1:1?probeProtocols=CORE</connector>\n'
            '<connector name="b">tcp://127.0.0.1:2?probeProtocols=STOMP,stomp</connector>\n'
            '<connector name="c">tcp://127.0.0.1:3?probeProtocols=STOM</connector>\n'
            '<connector name="d">tcp://127.0.0.1:4?probeProtocols=,</connector>\n'
            '<connector name="e">tcp://127.0.0.1:5?probeProtocols=MQTT</connector>'
        )
    assert [(e.file, e.line, e.message) for e in info.value.errors] == [
        ("b.xml", 4, "connector 'a': probeProtocols= names CORE: the readiness probe speaks AMQP and STOMP only"),
        ("b.xml", 5, "connector 'b': probeProtocols= names STOMP twice"),
        ("b.xml", 6, "connector 'c': probeProtocols= names an unknown protocol 'STOM'; did you mean 'STOMP'?"),
        ("b.xml", 7, "connector 'd': probeProtocols= is empty; name AMQP and STOMP, or one of them"),
        ("b.xml", 8, "connector 'e': probeProtocols= names MQTT: the readiness probe speaks AMQP and STOMP only"),
    ]


def test_probe_protocols_is_not_an_acceptor_parameter():
    text = (
        '<configuration xmlns="urn:activemq">\n<core xmlns="urn:activemq:core">\n<acceptors>\n'
        '<acceptor name="a">tcp://127.0.0.1:1?probeProtocols=STOMP</acceptor>\n'
        "</acceptors>\n</core>\n</configuration>\n"
    )
    with pytest.raises(ConfigErrors, match="unknown acceptor parameter 'probeProtocols'"):
        parse_config(text, file="b.xml", env={})


def test_an_announced_connector_is_read_leniently():
    announced = Connector("n", "tcp", "10.0.0.1", 61616, {"probeProtocols": "core,Stomp,stomp"})
    assert announced.probe_protocols == ("STOMP",)
    assert parse_probe_protocols("amqp")[0] == ("AMQP",)


def test_the_stand_in_node_id_is_the_connector_address():
    assert stand_in_node_id(Connector("x", "tcp", "10.0.0.9", 61613)) == "tcp://10.0.0.9:61613"
    assert stand_in_node_id(Connector("y", "tcp", "::1", 61613)) == "tcp://[::1]:61613"
    # the connector's name is each gateway's own: it does not count
    assert stand_in_node_id(Connector("other", "tcp", "10.0.0.9", 61613, {"probeProtocols": "STOMP"})) == (
        "tcp://10.0.0.9:61613"
    )


def test_junction_status_shows_the_probe_and_why_a_target_is_not_ready():
    target = {"local": False, "connection_count": None, "note": None, "problem": None}
    status = {
        "routers": {
            "r": {
                "targets": [
                    {**target, "name": "up", "node_id": "n-1", "ready": True, "probe": "STOMP", "connection_count": 4},
                    {**target, "name": "down", "node_id": None, "ready": False, "probe": None,
                     "problem": "probe failed: connection refused by 127.0.0.1:61617"},
                    {**target, "name": "coil", "node_id": "tcp://127.0.0.1:61613", "ready": True, "probe": "STOMP",
                     "note": "not a Junction core (coilmq/1.1.0): node id from the connector, connection count unknown"},
                    # a note is for ready targets only; a stale one is not shown beside a problem
                    {**target, "name": "gone", "node_id": "tcp://127.0.0.1:1", "ready": False, "probe": "STOMP",
                     "note": "stale", "problem": "probe timed out"},
                ]
            }
        }
    }
    lines = format_status(status).splitlines()
    start = lines.index("Router targets (4)")
    header, up, down, coil, gone = lines[start + 1 : start + 6]
    assert header.split() == [
        "ROUTER", "TARGET", "NODE", "ID", "READY", "PROBE", "CONNECTIONS", "LOCAL", "PROBLEM", "/", "NOTE"
    ]
    assert up.split() == ["r", "up", "n-1", "yes", "STOMP", "4"]
    assert down.split()[:5] == ["r", "down", "-", "no", "-"]
    assert down.endswith("probe failed: connection refused by 127.0.0.1:61617")
    assert coil.split()[:6] == ["r", "coil", "tcp://127.0.0.1:61613", "yes", "STOMP", "-"]
    assert coil.endswith("not a Junction core (coilmq/1.1.0): node id from the connector, connection count unknown")
    assert gone.endswith("probe timed out") and "stale" not in gone
    # the columns line up: every row's problem or note starts under the header's
    column = header.index("PROBLEM / NOTE")
    assert down[column:].startswith("probe failed") and coil[column:].startswith("not a Junction core")
