"""A node started by ``junction run`` tunes its garbage collector, unless told not to."""

from __future__ import annotations

from junction.collector import ENV, THRESHOLDS


def test_a_running_node_has_frozen_its_start_and_raised_the_thresholds(broker_factory):
    node = broker_factory("gc", env={ENV: None}).start()  # whatever the test run has set
    status = node.status()["collector"]
    assert status["thresholds"] == list(THRESHOLDS)
    assert status["frozen"] > 10_000  # modules, config, listeners: what the started node holds
    assert len(status["collections"]) == 3
    watched = status["watched"]  # timed since start: the collections the node ran since
    assert len(watched["pause_s"]) == len(watched["longest_pause_ms"]) == 3


def test_junction_gc_default_leaves_cpythons_collector(broker_factory):
    node = broker_factory("gc-default", env={ENV: "default"}).start()
    status = node.status()["collector"]
    assert status["thresholds"] != list(THRESHOLDS)
    assert status["frozen"] == 0
    assert "watched" in status  # the pauses are still timed, to compare
