"""junction.collector: the garbage collector's settings for a node process."""

from __future__ import annotations

import gc
import weakref

import pytest

from junction import collector


@pytest.fixture
def restore_gc():
    """Leave the test process's collector as it found it."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_freezes_what_exists_and_raises_the_thresholds(restore_gc):
    survivor = [[] for _ in range(10)]  # lists: tracked by gc, alive through the freeze
    assert collector.tune({}) is True
    assert gc.get_threshold() == collector.THRESHOLDS
    frozen = gc.get_freeze_count()
    assert frozen >= len(survivor)
    status = collector.status()
    assert status["thresholds"] == list(collector.THRESHOLDS)
    # frozen objects freed by reference counting leave the count: it only shrinks from here
    assert len(survivor) <= status["frozen"] <= frozen
    assert len(status["collections"]) == 3


def test_the_environment_can_keep_cpythons_settings(restore_gc):
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    assert collector.tune({collector.ENV: " Default "}) is False
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_other_values_of_the_variable_still_tune(restore_gc):
    assert collector.tune({collector.ENV: "tuned"}) is True
    assert gc.get_threshold() == collector.THRESHOLDS


def test_cycles_are_still_collected_after_tuning(restore_gc):
    collector.tune({})

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_pauses_add_up_each_generations_collections():
    ticks = iter([1.0, 1.5, 2.0, 2.1, 3.0, 3.2])
    pauses = collector.Pauses(clock=lambda: next(ticks))
    pauses("start", {"generation": 2})
    pauses("stop", {"generation": 2})
    pauses("start", {"generation": 0})
    pauses("stop", {"generation": 0})
    pauses("start", {"generation": 0})
    pauses("stop", {"generation": 0})
    assert pauses.collections == [2, 0, 1]
    assert pauses.total_s == pytest.approx([0.3, 0.0, 0.5])
    assert pauses.longest_s == pytest.approx([0.2, 0.0, 0.5])


def test_watch_times_real_collections_once_per_process():
    pauses = collector.watch()
    try:
        assert collector.watch() is pauses
        assert gc.callbacks.count(pauses) == 1
        before = pauses.collections[2]
        gc.collect()
        assert pauses.collections[2] == before + 1
        watched = collector.status()["watched"]
        assert watched["collections"][2] == before + 1
        assert watched["longest_pause_ms"][2] > 0.0
    finally:
        gc.callbacks.remove(pauses)
        collector._pauses = None
