"""read_events (paths, checks, warnings, schema), write_table, progress and the HTML report."""

from __future__ import annotations

import io
import json
import os

import pytest

from junction.events import schema
from junction.events.schema import Event, encode
from junction.pipeline.common import (
    EVENT_SCHEMA,
    PipelineError,
    Progress,
    read_events,
    write_table,
)
from junction.pipeline.report import Report, format_value


def _line(kind, ts, **fields):
    return encode(Event(kind, ts, "core1", "id-1", fields))


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A directory tree: good events in nested *.jsonl, junk lines, an unknown kind, a non-jsonl file."""
    root = tmp_path_factory.mktemp("mixed")
    _write(str(root / "a" / "events-core1-1.jsonl"), [
        _line("message.sent", 1.5, message_id="id-1/1", queues=["q1", "q2"], size=10, durable=True, group_seq=3),
        "not json at all",
        _line("connection.closed", 2.0, conn="7", bytes_in=5, duration_ms=1.25),
        json.dumps({"v": 1, "kind": "message.teleported", "ts": 3.0, "node": "core1", "node_id": "id-1"}),
    ])
    _write(str(root / "b" / "c" / "events-core2-1.jsonl"), [
        _line("message.acknowledged", 4.0, message_id="id-1/1", queue="q1"),
        '{"v": 1, "kind": "message.delivered"}',  # no ts: not an event
    ])
    _write(str(root / "notes.txt"), [_line("message.expired", 9.0, message_id="x/1", queue="q")])
    return str(root)


def test_a_directory_is_read_recursively_with_the_explicit_schema(spark, mixed, capsys):
    df = read_events(spark, mixed)
    assert df.schema == EVENT_SCHEMA
    assert [f.name for f in df.schema.fields] == list(schema.ALL_FIELDS)
    rows = sorted(df.collect(), key=lambda r: r["ts"])
    # the .txt file is not an event file; junk, the unknown kind and the ts-less line are left out
    assert [(r["kind"], r["ts"]) for r in rows] == [
        ("message.sent", 1.5), ("connection.closed", 2.0), ("message.acknowledged", 4.0),
    ]
    sent = rows[0]
    assert (sent["queues"], sent["size"], sent["durable"], sent["group_seq"], sent["v"]) == (["q1", "q2"], 10, True, 3, 1)
    assert rows[1]["duration_ms"] == 1.25 and rows[1]["bytes_in"] == 5
    err = capsys.readouterr().err
    assert f"junction analyze: warning: 2 lines in {mixed} are not events" in err
    assert f"junction analyze: warning: 1 events of unknown kinds (message.teleported) in {mixed}; ignored" in err


def test_kinds_keep_only_those_and_a_file_or_glob_is_read_as_given(spark, mixed):
    acks = read_events(spark, mixed, ["message.acknowledged"]).collect()
    assert [(r["kind"], r["queue"]) for r in acks] == [("message.acknowledged", "q1")]
    one_file = read_events(spark, os.path.join(mixed, "notes.txt"))  # a file is read whatever its name
    assert [r["kind"] for r in one_file.collect()] == ["message.expired"]
    globbed = read_events(spark, os.path.join(mixed, "*", "events-*.jsonl"), ["message.sent", "connection.closed"])
    assert sorted(r["kind"] for r in globbed.collect()) == ["connection.closed", "message.sent"]


def test_missing_path_empty_input_and_absent_kinds_are_pipeline_errors(spark, mixed, tmp_path):
    with pytest.raises(PipelineError, match=r"^no such path: /nonexistent/events$"):
        read_events(spark, "/nonexistent/events")
    with pytest.raises(PipelineError, match=r"^no such path: .*/nothing-\*\.jsonl$"):
        read_events(spark, str(tmp_path / "nothing-*.jsonl"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PipelineError, match=f"^no events in {empty}$"):
        read_events(spark, str(empty))
    blank = tmp_path / "blank"
    _write(str(blank / "events-x.jsonl"), ["", "garbage"])
    with pytest.raises(PipelineError, match=f"^no events in {blank}$"):
        read_events(spark, str(blank))
    with pytest.raises(PipelineError, match=f"^no events of kinds topology.link_up, message.expired in {mixed}$"):
        read_events(spark, mixed, ["topology.link_up", "message.expired"])
    with pytest.raises(PipelineError, match="^unknown event kinds message.teleported$"):
        read_events(spark, mixed, ["message.teleported"])


def test_events_of_a_newer_schema_version_are_refused(spark, tmp_path):
    newer = dict(json.loads(_line("message.sent", 1.0, message_id="a/1")), v=schema.SCHEMA_VERSION + 1)
    _write(str(tmp_path / "events-new.jsonl"), [_line("message.sent", 0.5, message_id="a/0"), json.dumps(newer)])
    with pytest.raises(PipelineError) as info:
        read_events(spark, str(tmp_path))
    assert str(info.value) == (
        f"events of schema version {schema.SCHEMA_VERSION + 1} in {tmp_path} are newer than this "
        f"pipeline's ({schema.SCHEMA_VERSION}): upgrade junction"
    )


def test_write_table_overwrites_parquet(spark, tmp_path):
    out = str(tmp_path / "out")
    path = write_table(spark.createDataFrame([(1, "a")], "n long, s string"), out, "t")
    assert path == os.path.join(out, "t")
    write_table(spark.createDataFrame([(2, "b"), (3, "c")], "n long, s string"), out, "t")
    assert sorted(tuple(r) for r in spark.read.parquet(path).collect()) == [(2, "b"), (3, "c")]


def test_progress_phases_and_quiet(spark, monkeypatch):
    stream = io.StringIO()
    shown = Progress(spark, "audit", stream=stream)
    shown.phase("reading events")
    assert stream.getvalue() == "[audit] reading events\n"
    monkeypatch.setenv("JUNCTION_PROGRESS", "0")
    quiet = io.StringIO()
    Progress(spark, "audit", stream=quiet).phase("nothing")
    assert quiet.getvalue() == ""


def test_report_is_one_escaped_self_contained_file(tmp_path):
    import matplotlib.pyplot as plt

    report = Report("Audit <1>", "events: /x")
    report.metric("sent", 1234567).metric("ratio", 0.123456).metric("none", None)
    report.section("Lost", "first paragraph\n\nsecond & last")
    report.table("rows", ["a", "b"], [["<script>", 1234.5], [True, [1, 2]]], note="n<ote")
    report.table("nothing", ["a"], [])
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    report.plot("a plot", fig)
    path = report.write(str(tmp_path / "sub" / "r.html"))
    text = open(path, encoding="utf-8").read()
    assert "<script>" not in text and "&lt;script&gt;" in text and "Audit &lt;1&gt;" in text
    assert "1,234,567" in text and "0.1235" in text and "1,234.5" in text and "n&lt;ote" in text
    assert '<p class="empty">none</p>' in text and "second &amp; last" in text
    assert text.count("data:image/png;base64,") == 1
    assert "http://" not in text and "https://" not in text and "<script" not in text
    assert plt.get_fignums() == []  # the figure was closed
    assert [format_value(v) for v in (None, True, 3, 2.0, float("nan"), "x", [1, "b"])] == [
        "-", "yes", "3", "2", "-", "x", "1, b",
    ]
