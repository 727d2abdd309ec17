"""``junction analyze ...`` as a user runs it: output, exit statuses 0/1/2, error lines.

The Spark runs call junction's main() in this process, on the tests' shared Spark session
(tests/pipeline/sparkkit.py: a JVM started per run would cost ~20 s of CPU before the first
line of the audit, and took over 80 s in a full run on two busy CPUs), which main() uses and
leaves running.  ``junction analyze audit`` as a process of its own, with its own Spark, is
run by tests/integration/test_appliance_analytics.py.  The exit-2 errors found before Spark
starts, and synth, are subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from junction.cli import main as junction_main
from junction.events import schema
from junction.events.schema import Event, encode
from tests.pipeline.test_audit import HAND_SUMMARY, hand_log

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env():
    return dict(os.environ, JUNCTION_PROGRESS="0", PYTHONPATH=ROOT)


def _cmd(*args):
    return [sys.executable, "-m", "junction", "analyze", *args]


def _write(folder, lines):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "events-core-a-20250101T000000-0001.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return folder


def _clean_log():
    lines = []
    for n in range(1, 4):
        base = 1000.0 * n
        lines.append(encode(Event("message.sent", base, "core-a", "node-a",
                                  {"message_id": f"node-a/{n}", "address": "a1", "queues": ["q1"]})))
        lines.append(encode(Event("message.delivered", base + 5, "core-a", "node-a",
                                  {"message_id": f"node-a/{n}", "address": "a1", "queue": "q1", "delivery_count": 1})))
        lines.append(encode(Event("message.acknowledged", base + 9, "core-a", "node-a",
                                  {"message_id": f"node-a/{n}", "address": "a1", "queue": "q1"})))
    return lines


def test_a_clean_log_exits_0_with_a_human_summary(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUNCTION_PROGRESS", "0")
    events = _write(str(tmp_path / "clean"), _clean_log())
    out = str(tmp_path / "out")
    assert junction_main(["analyze", "audit", "--events", events, "--out", out]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"audit: {events}"
    assert "  sent                 3" in lines and "  lost                 0" in lines
    assert f"report: {os.path.join(out, 'audit.html')}" in lines
    assert "  in flight            0" in lines
    assert "tables: audit_messages, duplicated, in_flight, latency_by_address, lost, out_of_order, unexpected" in lines
    assert spark.range(1).count() == 1  # the session it borrowed is still running


def test_newer_events_exit_2_with_one_line(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JUNCTION_PROGRESS", "0")
    newer_line = json.loads(_clean_log()[0])
    newer_line["v"] = schema.SCHEMA_VERSION + 1
    events = _write(str(tmp_path / "newer"), _clean_log() + [json.dumps(newer_line)])
    assert junction_main(["analyze", "audit", "--events", events, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"junction analyze: error: events of schema version {schema.SCHEMA_VERSION + 1} in {events} are newer "
        f"than this pipeline's ({schema.SCHEMA_VERSION}): upgrade junction\n"
    )


def _run(*args, timeout=60):
    proc = subprocess.run(_cmd(*args), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def test_missing_path_and_empty_input_exit_2_before_spark_starts(tmp_path):
    code, out, err = _run("audit", "--events", "/nonexistent/logs", "--out", str(tmp_path / "o"))
    assert (code, out, err) == (2, "", "junction analyze: error: no such path: /nonexistent/logs\n")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("not an event file\n")
    code, out, err = _run("audit", "--events", str(empty), "--out", str(tmp_path / "o"))
    assert (code, out, err) == (2, "", f"junction analyze: error: no events in {empty}\n")


def test_options_are_checked(tmp_path):
    code, _out, err = _run("audit", "--out", str(tmp_path))
    assert code == 2 and "the following arguments are required: --events" in err
    code, _out, err = _run("audit", "--events", str(tmp_path), "--out", str(tmp_path), "--examples", "soon")
    assert code == 2 and "--examples: invalid int value: 'soon'" in err


def _without_pyspark(argv):
    """Run junction's main(argv) in a Python where importing pyspark fails."""
    code = f"import sys; sys.modules['pyspark'] = None\nfrom junction.cli import main\nsys.exit(main({argv!r}))\n"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)


def test_without_pyspark_the_jobs_say_how_to_install_it(tmp_path):
    proc = _without_pyspark(["analyze", "audit", "--events", str(tmp_path), "--out", str(tmp_path)])
    assert proc.returncode == 2
    assert proc.stderr == (
        "junction analyze: error: the analyze jobs need pyspark, which is not installed: pip install 'junction[spark]'\n"
    )
    # the rest of junction, synth included, does not need it
    proc = _without_pyspark(["version"])
    assert proc.returncode == 0 and proc.stdout.startswith("junction ")
    proc = _without_pyspark(["analyze", "synth", "--events", "200", "--out", str(tmp_path / "s"), "--workers", "1"])
    assert proc.returncode == 0, proc.stderr


def test_synth_writes_a_log_and_its_truth(tmp_path):
    out = str(tmp_path / "log")
    code, stdout, err = _run("synth", "--events", "3000", "--out", out, "--seed", "5", "--keys", "30",
                             "--tenants", "3", "--loss", "0.01", "--workers", "1", "--json")
    assert code == 0, err
    result = json.loads(stdout)
    with open(os.path.join(out, "truth.json"), encoding="utf-8") as f:
        truth = json.load(f)
    assert result["truth"] == os.path.join(out, "truth.json")
    assert result["summary"]["events"] == truth["events"] and result["summary"]["lost"] == len(truth["lost"])
    assert len(truth["tenants"]) == 3 and truth["seed"] == 5 and truth["params"]["loss"] == 0.01
    assert sorted(f for f in os.listdir(out) if f.endswith(".jsonl")) == truth["files"]
    code, stdout, err = _run("synth", "--events", "0", "--out", out)
    assert (code, stdout, err) == (2, "", "junction analyze: error: events must be at least 1\n")


def test_lost_messages_exit_1_with_the_summary_as_json(spark, tmp_path, capsys, monkeypatch):
    """``junction analyze audit --json`` of the hand log: lost and unexpected messages, exit 1."""
    monkeypatch.setenv("JUNCTION_PROGRESS", "0")
    a, b = hand_log()
    events = _write(str(tmp_path / "hand"), a + b)
    out = str(tmp_path / "out")
    code = junction_main(["analyze", "audit", "--events", events, "--out", out, "--json"])
    stdout, stderr = capsys.readouterr()
    assert code == 1, stderr
    result = json.loads(stdout)
    assert result["job"] == "audit" and result["exit_code"] == 1
    s = result["summary"]
    # a/16 and a/17 lost at node-a's restart; a/3 (t.s3) and a/8 (owed by node-b) in flight
    assert (s["sent"], s["lost"], s["in_flight"], s["unexpected"], s["duplicated"], s["out_of_order"]) == (19, 2, 2, 1, 1, 2)
    assert s == HAND_SUMMARY  # every figure, as test_audit.py works them out
    assert result["report"] == os.path.join(out, "audit.html") and os.path.isfile(result["report"])
    assert result["tables"] == {name: os.path.join(out, name) for name in
                                ("audit_messages", "lost", "in_flight", "duplicated", "unexpected", "out_of_order",
                                 "latency_by_address")}
    assert "Traceback" not in stderr
