"""Line templates (junction/events/templates.py) write exactly the lines the builders write."""

from __future__ import annotations

import itertools

import orjson
import pytest

from junction.events import templates as templates_module
from junction.events.sink import (
    ACKNOWLEDGED,
    DELIVERED,
    DELIVERED_AND_ACKNOWLEDGED,
    LAYOUTS,
    SENT,
    EventSink,
    entry_builder,
)
from junction.events.templates import LineTemplates

NODE_ID = 'id-"%s\\1'  # needs escaping, and holds a % that must stay a %

ODD = ['q"%d%%', "caf\u00e9 \u2028", "back\\slash", "%r", "tab\there"]
CONTEXTS = [("12", "alice", None), ("1%", 'u"', "c\u00e9")]
CONSUMER_CONTEXTS = [("bench", "3", "13", None, None), ('q"1', "%b", "7", "bob", "c-%d")]


def builder_lines(entry) -> bytes:
    """The lines of ``entry`` as the builders and orjson write them."""
    kinds, layout = LAYOUTS[entry[0]]
    return b"\n".join(orjson.dumps(entry_builder(kind, "core1", NODE_ID, layout)(entry)) for kind in kinds)


def templates_of(entry_kind) -> LineTemplates:
    kinds, layout = LAYOUTS[entry_kind]
    return LineTemplates(tuple(entry_builder(kind, "core1", NODE_ID, layout) for kind in kinds), layout, NODE_ID)


def sent_entries():
    for n, (address, context, dup, group, seq) in enumerate(
        itertools.product(ODD[:3], CONTEXTS, [None, "d-1"], [None, 'g"1'], [None, 7])
    ):
        for queues in (address, (address, "other"), ()):
            for size in (0, 300, 2**40):
                yield (SENT, 1795412274.2821584 + n, 10**6 + n, None, dup, address, queues, size, n % 2 == 0,
                       group, seq, "ANYCAST", context)


def delivery_entries(kind):
    for n, (address, context, dup) in enumerate(itertools.product(ODD, CONSUMER_CONTEXTS, [None, "d%s"])):
        for count in (0, 1, 5):
            values = (n, None, dup, address, count, context) if kind != ACKNOWLEDGED else (n, None, dup, address, context)
            yield (kind, 1795412274.0 + n / 7, *values)


@pytest.mark.parametrize("entry_kind", [SENT, DELIVERED, ACKNOWLEDGED, DELIVERED_AND_ACKNOWLEDGED])
def test_template_lines_are_the_builders_lines_byte_for_byte(entry_kind):
    entries = list(sent_entries() if entry_kind == SENT else delivery_entries(entry_kind))
    made = templates_of(entry_kind)
    for entry in entries + entries:  # the second time round every one comes from its template
        assert made.lines(entry) == builder_lines(entry), entry
    assert made._templates and all(made._templates.values())  # every one had a template


def test_an_entry_with_a_carried_trace_id_has_no_template():
    made = templates_of(DELIVERED)
    entry = (DELIVERED, 1.5, 7, "other-node/3", None, "a", 1, CONSUMER_CONTEXTS[0])
    assert made.lines(entry) is None and made.lines(entry) is None
    assert made.lines((DELIVERED, 1.5, 7, None, None, "a", 1, CONSUMER_CONTEXTS[0])) is not None


def test_values_of_another_type_are_not_cut_to_fit_a_template():
    made = templates_of(DELIVERED)
    entry = (DELIVERED, 1.5, 7, None, None, "a", 1, CONSUMER_CONTEXTS[0])
    assert made.lines(entry) is not None
    assert made.lines((DELIVERED, 1.5, 7, None, None, "a", 1.75, CONSUMER_CONTEXTS[0])) is None  # not "1"
    assert made.lines((DELIVERED, 1.5, "7", None, None, "a", 1, CONSUMER_CONTEXTS[0])) is None
    assert made.lines((DELIVERED, "1.5", 7, None, None, "a", 1, CONSUMER_CONTEXTS[0])) is None
    assert made.lines((DELIVERED, 1.5, 7, None, None, ["a"], 1, CONSUMER_CONTEXTS[0])) is None  # not hashable


def test_the_templates_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(templates_module, "MAX_TEMPLATES", 5)
    made = templates_of(DELIVERED)
    for n in range(23):
        entry = (DELIVERED, 1.5, n, None, None, f"address-{n}", 1, CONSUMER_CONTEXTS[0])
        assert made.lines(entry) == builder_lines(entry)
        assert len(made._templates) <= 5


def test_the_sink_writes_what_the_builders_write_whichever_way_it_makes_a_line(tmp_path):
    """Templated, builder-made (carried trace id, a float count) and plain entries, in order."""
    entries = [
        (SENT, 2.0, 1, None, None, "a", "a", 10, True, None, None, "ANYCAST", CONTEXTS[0]),
        (DELIVERED_AND_ACKNOWLEDGED, 2.5, 1, None, None, "a", 1, CONSUMER_CONTEXTS[1]),
        (SENT, 3.0, 2, "n0/9", None, "a", "a", 10, True, None, None, "ANYCAST", CONTEXTS[0]),
        ("connection.closed", 3500.0, "c1", 1, 2, 3.5, "bye"),
        (DELIVERED_AND_ACKNOWLEDGED, 4.0, 2, None, None, "a", 2.5, CONSUMER_CONTEXTS[1]),
        (DELIVERED_AND_ACKNOWLEDGED, 4.5, 3, None, None, "a", 1, CONSUMER_CONTEXTS[1]),
    ]
    sink = EventSink(str(tmp_path), "core1", NODE_ID, max_file_bytes=1 << 20, max_file_age_s=60, max_files=3)
    data = bytes(sink.encode(entries))
    plain = entry_builder("connection.closed", "core1", NODE_ID)(entries[3])
    expected = [builder_lines(e) for e in entries[:3]] + [orjson.dumps(plain)] + [builder_lines(e) for e in entries[4:]]
    assert data == b"\n".join(expected) + b"\n"
    assert b'"delivery_count":2.5' in data
