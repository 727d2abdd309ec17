"""``--baseline REV`` of the benches (``bench/baseline.py``), without running a benchmark.

Covered: a revision is resolved or refused (a clear message, and exit status
2 from each of the three scripts before anything starts); the export holds
that commit's files, outside the repository, and is removed afterwards, also
when the run fails and when the commit has no ``junction`` package; a
process given the build's environment imports ``junction`` from the
exported tree, ahead of the virtualenv's editable install, and the check
that a node did so tells the two cases apart; the rounds alternate which
build goes first; the comparison pairs each round's two trials and leaves
failed ones out; the routing script's table is parsed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import amqp_throughput, baseline, common, gateway, stomp_throughput

GIT_ID = ["-c", "user.name=bench test", "-c", "user.email=bench@test.invalid"]


def git(repo: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *GIT_ID, *argv], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of two commits: one with a ``junction`` package, then one without."""
    r = tmp_path / "repo"
    (r / "junction").mkdir(parents=True)
    git(r, "init", "-q")
    (r / "junction" / "__init__.py").write_text("MARK = 'exported'\n")
    (r / "junction" / "__main__.py").write_text("")
    (r / "README").write_text("first\n")
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "with junction")
    git(r, "rm", "-q", "-r", "junction")
    git(r, "commit", "-q", "-m", "without junction")
    return r


def exports_dir(tmp_path: Path) -> Path:
    d = tmp_path / "exports"
    d.mkdir(exist_ok=True)
    return d


def test_resolve_gives_the_commit_and_refuses_what_is_not_one(repo):
    head = git(repo, "rev-parse", "HEAD")
    assert baseline.resolve("HEAD", repo) == head
    assert baseline.resolve("HEAD~1", repo) == git(repo, "rev-parse", "HEAD~1")
    for bad in ("no-such-rev", "HEAD~5", "", "--all", "HEAD:README"):
        with pytest.raises(baseline.BaselineError) as e:
            baseline.resolve(bad, repo)
        assert repr(bad) in str(e.value)


def test_the_export_holds_the_commit_and_is_removed_afterwards(repo, tmp_path):
    parent = exports_dir(tmp_path)
    first = baseline.resolve("HEAD~1", repo)
    (repo / "README").write_text("changed in the work tree\n")  # not what is exported
    with baseline.exported(first, repo, parent=str(parent)) as tree:
        assert tree.parent == parent.resolve()
        assert not tree.is_relative_to(repo.resolve())
        assert (tree / "README").read_text() == "first\n"
        assert (tree / "junction" / "__init__.py").read_text() == "MARK = 'exported'\n"
        assert not (tree / ".git").exists()
    assert not tree.exists()
    assert list(parent.iterdir()) == []
    assert not any(name.startswith("baseline tree") for name, _ in common.CLEANUP._actions)


def test_the_export_is_removed_when_the_run_fails(repo, tmp_path):
    parent = exports_dir(tmp_path)
    with pytest.raises(RuntimeError, match="trial failed"):
        with baseline.exported(baseline.resolve("HEAD~1", repo), repo, parent=str(parent)) as tree:
            assert tree.is_dir()
            raise RuntimeError("trial failed")
    assert list(parent.iterdir()) == []


def test_a_commit_without_junction_is_refused_and_leaves_nothing(repo, tmp_path):
    parent = exports_dir(tmp_path)
    with pytest.raises(baseline.BaselineError, match="no junction package"):
        with baseline.exported(baseline.resolve("HEAD", repo), repo, parent=str(parent)):
            pytest.fail("a tree without junction was handed out")
    assert list(parent.iterdir()) == []


def test_no_export_into_the_repository(repo):
    inside = repo / "tmp"
    inside.mkdir()
    with pytest.raises(baseline.BaselineError, match="into the repository"):
        with baseline.exported(baseline.resolve("HEAD~1", repo), repo, parent=str(inside)):
            pytest.fail("exported into the repository")
    assert list(inside.iterdir()) == []


def test_a_node_of_the_build_imports_junction_from_its_tree(repo, tmp_path):
    """The build's PYTHONPATH wins over the virtualenv's editable install of junction,
    and check_imported tells whether a process imported the package from the tree."""
    first = baseline.resolve("HEAD~1", repo)
    with baseline.exported(first, repo, parent=str(exports_dir(tmp_path))) as tree:
        build = baseline.Build(baseline.BASELINE, tree, "test")
        with pytest.raises(common.BenchError, match="did not import junction"):
            build.check_imported()
        out = subprocess.run(
            [sys.executable, "-c", "import junction; print(junction.__file__, junction.MARK)"],
            env=build.environ(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        assert out == [str(tree / "junction" / "__init__.py"), "exported"]
        build.check_imported()  # bytecode now written in the tree


def test_both_builds_nodes_get_their_tree_and_the_same_hash_seed(monkeypatch, tmp_path):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    old = baseline.Build(baseline.BASELINE, tmp_path, "old").env()
    new = baseline.current_build().env()
    assert old["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/elsewhere"
    assert new["PYTHONPATH"] == f"{common.REPO_ROOT}{os.pathsep}/elsewhere"
    assert old["PYTHONHASHSEED"] == new["PYTHONHASHSEED"] == baseline.HASH_SEED
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    assert baseline.current_build().env()["PYTHONHASHSEED"] == "7"


def test_each_script_refuses_a_bad_revision_with_status_2(capsys):
    for script in (stomp_throughput, amqp_throughput, gateway):
        assert script.main(["--baseline", "no-such-rev-anywhere"]) == 2
        err = capsys.readouterr().err
        assert "--baseline 'no-such-rev-anywhere': no such commit in this repository" in err
    assert stomp_throughput.main(["--baseline", "HEAD", "--compare", "activemq"]) == 2
    assert "no --compare" in capsys.readouterr().err
    assert amqp_throughput.main(["--baseline", "HEAD", "--port", "5672"]) == 2
    assert "no --port" in capsys.readouterr().err
    assert stomp_throughput.main(["--baseline", "HEAD", "--rounds", "0"]) == 2
    assert "--rounds must be positive" in capsys.readouterr().err


def test_options_resolve_the_revision_and_scale_the_default_timeout():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=300.0)
    baseline.add_options(parser)
    args = parser.parse_args(["--baseline", "HEAD", "--rounds", "4"])
    assert baseline.options_problem(args, parser) is None
    assert args.baseline_commit == baseline.resolve("HEAD")
    assert args.timeout == 1200.0
    args = parser.parse_args(["--baseline", "HEAD", "--timeout", "50"])
    assert baseline.options_problem(args, parser) is None
    assert args.timeout == 50.0
    args = parser.parse_args([])
    assert baseline.options_problem(args, parser) is None
    assert args.baseline_commit is None and args.timeout == 300.0


def test_rounds_alternate_which_build_goes_first():
    builds = ["b", "c"]
    assert [baseline.order(builds, n) for n in range(4)] == [
        ["b", "c"],
        ["c", "b"],
        ["b", "c"],
        ["c", "b"],
    ]
    assert baseline.order(["only"], 1) == ["only"]


def row(build: str, n: int, rate, **more) -> dict:
    return {"build": build, "round": n, "mode": "m", "msgs_per_s": rate, **more}


def test_the_comparison_pairs_rounds_and_leaves_failures_out():
    rows = [
        row("baseline", 0, 100.0),
        row("current", 0, 110.0),
        row("current", 1, 90.0),
        row("baseline", 1, 100.0),
        row("baseline", 2, 100.0),
        row("current", 2, None, error="boom"),  # its round has no ratio
        row("baseline", 3, 50.0),
        row("current", 3, 60.0),
    ]
    (q,) = baseline.compare(rows, ("mode",), (("msgs_per_s", "msg/s", ",.0f"),))
    assert q["mode"] == "m" and q["metric"] == "msgs_per_s"
    assert q["rounds"] == 3
    assert q["ratio_min"] == pytest.approx(0.9)
    assert q["ratio_median"] == pytest.approx(1.1)
    assert q["ratio_max"] == pytest.approx(1.2)
    assert q["baseline"] == pytest.approx(100.0)  # median of 100, 100, 100, 50
    assert q["current"] == pytest.approx(90.0)  # median of 110, 90, 60


def test_the_routing_table_is_parsed():
    text = """command: python bench/gateway_routing.py --keys 1000 --repeat 1
routing decisions, 1,000 client ids, 10 ready targets, best of 1
router   path         us/decision  decisions/s
hash     cache miss          8.27      120,919
hash     cache hit           3.53      283,286
first    -                   5.20      192,308
ratio hash/ring (cache miss, lower is faster): 0.37
calibration: 1M-iteration Python loop 30 ms CPU
"""
    assert baseline.parse_routing(text) == [
        {"router": "hash", "path": "cache miss", "us": 8.27},
        {"router": "hash", "path": "cache hit", "us": 3.53},
        {"router": "first", "path": "-", "us": 5.2},
    ]


def test_run_interleaves_the_builds_and_prints_both_figures_and_ratios(monkeypatch, capsys):
    """baseline.run with a stand-in script (no node, no client): warm-up then rounds of both
    builds in alternating order, every row tagged, the comparison in the table and the JSON."""
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # run_guarded's handlers stay out
    this = baseline.current_build()

    @contextmanager
    def two_builds(commit):
        assert commit == "c0ffee"
        yield [baseline.Build(baseline.BASELINE, this.root, "old"), this]

    monkeypatch.setattr(baseline, "builds", two_builds)
    calls = []
    rates = {baseline.BASELINE: 100.0, baseline.CURRENT: 104.0}

    @contextmanager
    def junction_target(args, deadline, build):
        yield SimpleNamespace(name=build.name, pid=os.getpid())

    def trial(target, mode, n, args, deadline, tag):
        calls.append((target.name, mode, n, tag))
        return {
            "target": target.name,
            "mode": mode,
            "msgs_per_s": rates[target.name],
            "p50_ms": 1.0,
            "p99_ms": 2.0,
            "broker_cpu_us_per_msg": 10.0,
        }

    printed = []
    script = SimpleNamespace(
        junction_target=junction_target,
        row_key=lambda name, mode: {"target": name, "mode": mode},
        MODE_KEYS=("mode",),
        format_row=lambda r: f"{r['target']} {r.get('msgs_per_s')}",
        print_report=lambda rows, rat, args: printed.append((len(rows), rat, args.json)),
        json_settings=lambda args: {"bench": "stand-in"},
    )
    args = SimpleNamespace(
        baseline="HEAD",
        baseline_commit="c0ffee",
        modes=["m"],
        rounds=3,
        warmup=5,
        messages=50,
        json=True,
        timeout=60.0,
    )
    status = baseline.run(
        args, script, name="stand-in", trial=trial, key_header="mode", key_cells=lambda q: q["mode"]
    )
    assert status == 0
    b, c = baseline.BASELINE, baseline.CURRENT
    assert calls == [
        (b, "m", 5, ".warm"),
        (c, "m", 5, ".warm"),
        (b, "m", 50, ""),
        (c, "m", 50, ""),
        (c, "m", 50, ""),
        (b, "m", 50, ""),
        (b, "m", 50, ""),
        (c, "m", 50, ""),
    ]
    assert printed == [(6, None, False)]  # the script's usual table, without its own JSON
    out = capsys.readouterr().out
    assert "baseline = old" in out
    assert "m  msg/s" in out and "1.040   1.040   1.040  3" in out
    record = json.loads(out.strip().splitlines()[-1])
    assert record["bench"] == "stand-in" and record["rounds"] == 3
    assert [(r["build"], r["round"]) for r in record["results"]] == [
        (b, 0),
        (c, 0),
        (c, 1),
        (b, 1),
        (b, 2),
        (c, 2),
    ]
    (thr,) = [q for q in record["comparison"] if q["metric"] == "msgs_per_s"]
    assert thr["ratio_median"] == pytest.approx(1.04) and thr["rounds"] == 3


def test_the_watch_counts_the_waiting_builds_cpu_not_the_one_under_test():
    """A busy process standing for one build's node: its CPU counts only while the
    other build runs a trial, and then the note warns."""
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen(["sleep", "60"])
    try:
        watch = baseline.TrialWatch({"busy": [spin.pid], "quiet": [idle.pid]})

        def wait_a_while() -> dict:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                time.sleep(0.01)
            return {}

        row = watch.run("busy", wait_a_while)  # the busy one is under test: not idle CPU
        assert row["idle_build_cpu"] == 0.0
        assert "WARNING: the idle build" not in watch.note()
        row = watch.run("quiet", wait_a_while)  # now the busy one waits its turn
        assert row["idle_build_cpu"] > baseline.IDLE_CPU_WARN  # a whole CPU on a quiet machine
        assert watch.share > baseline.IDLE_CPU_WARN
        assert "WARNING: the idle build" in watch.note()
    finally:
        for p in (spin, idle):
            p.kill()
            p.wait()


def test_the_routing_ratio_is_the_ratio_of_each_builds_best_round():
    from bench import gateway_baseline

    def row(build, run, us):
        return {"router": "hash", "path": "cache miss", "us": us, "build": build, "run": run}

    rows = [
        row("baseline", 0, 10.0), row("current", 0, 17.5),  # a slow moment for the current build
        row("current", 1, 9.0), row("baseline", 1, 15.0),  # a slow moment for the baseline
        row("baseline", 2, 11.0), row("current", 2, 9.5),
        {"router": "-", "path": "-", "us": None, "error": "failed", "build": "current", "run": 3},
    ]
    (q,) = gateway_baseline.routing_comparison(rows)
    assert (q["baseline"], q["current"]) == (10.0, 9.0)
    assert q["ratio_median"] == pytest.approx(0.9)
    assert (q["ratio_min"], q["ratio_max"], q["rounds"]) == (pytest.approx(0.6), pytest.approx(1.75), 3)
