"""Browse-only consumers (JMS ``QueueBrowser``) with the real Artemis JMS client, against the
real Artemis broker and, the same scenario, against a Junction node: a browser shows the
queue's messages in order, its selector picks among them, and the messages stay for the
queue's consumers."""

from __future__ import annotations

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.integration.test_artemis_peer import bodies, new_name
from tests.integration.test_core_jms import _Target

pytestmark = pytest.mark.timeout(60)

COLOURS = ["red", "blue", "red", "green", "red"]


def browse_leaves_messages(broker, jms: JmsClient, connect: dict) -> None:
    queue = new_name("browse")
    sends = [
        {"op": "send", "queue": queue, "body": f"{colour} {n}", "properties": {"colour": colour, "n": n}}
        for n, colour in enumerate(COLOURS)
    ]
    results = jms.run(
        [
            connect,
            *sends,
            {"op": "browse", "queue": queue},
            {"op": "browse", "queue": queue, "selector": "colour = 'red' AND n > 0"},
            {"op": "browse", "queue": queue},
            {"op": "send", "queue": queue, "body": "marker"},
            {"op": "receive", "queue": queue, "count": 10, "until": "marker"},
        ]
    )
    everything = [f"{c} {n}" for n, c in enumerate(COLOURS)]
    first, chosen, again = results[6], results[7], results[8]
    assert bodies(first) == everything
    assert bodies(chosen) == ["red 2", "red 4"]
    assert bodies(again) == everything  # browsing took nothing
    got = results[10]["messages"]
    assert bodies(results[10]) == [*everything, "marker"]  # all still there for a consumer
    assert [m["id"] for m in got[:5]] == [m["id"] for m in first["messages"]]
    assert [m["redelivered"] for m in got] == [False] * 6  # browsing is not a delivery


def test_artemis_browse(artemis, jms: JmsClient):
    browse_leaves_messages(artemis, jms, {"op": "connect", "url": artemis.url, "user": "admin", "password": "admin"})


def test_junction_browse(tmp_path, jms: JmsClient):
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path),
        name="browse",
        extra_acceptors_xml=harness.core_acceptor(port),
    ).start()
    try:
        target = _Target(port)
        browse_leaves_messages(target, jms, {"op": "connect", "url": target.url})
    finally:
        code = node.stop()
    assert code == 0
