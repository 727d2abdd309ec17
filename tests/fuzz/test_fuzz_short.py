"""CI's short fuzz pass: every target, a fixed number of inputs from a fixed seed.

Each target runs under atheris (libFuzzer, coverage-guided) in its own
process, from its seeds, for ``RUNS[target]`` inputs with ``-seed=1``, so the
pass is the same on every machine and takes a few seconds a target.  A crash
(an exception the harness's contract does not allow, a failed assertion), a
hang past ``-timeout`` or memory past ``-rss_limit_mb`` fails the test with
the fuzzer's report.  Where atheris has no wheel (it has them for CPython on
x86-64 Linux) the same harnesses run on seeded random mutations of their
seeds instead (``python -m tests.fuzz mutate``).  The long runs and their
figures are in docs/fuzzing.md.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
HAVE_ATHERIS = importlib.util.find_spec("atheris") is not None

#: inputs per target: each pass well under 20 s on a busy 2-CPU machine
RUNS = {
    "stomp": 3000,
    "stomp-opening": 3000,
    "stomp-connection": 2000,
    "amqp-types": 20000,
    "amqp-message": 20000,
    "sasl-server": 4000,
    "sasl-client": 6000,
    "amqp-opening": 3000,
    "gateway-opening": 800,
    "proxy": 4000,
    "cluster-link": 1000,
    "cluster-broadcast": 20000,
    "amqp-server": 500,
    "core": 3000,
    "core-server": 500,
    "core-opening": 3000,
    "openwire": 3000,
    "openwire-connection": 2000,
    "openwire-opening": 3000,
}


def test_every_target_has_a_short_pass():
    assert set(RUNS) == set(TARGETS)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_short_fixed_seed_pass(target, tmp_path):
    runs = RUNS[target]
    if HAVE_ATHERIS:
        cmd = [
            sys.executable, "-m", "tests.fuzz", "run", target, f"-runs={runs}", "-seed=1",
            "-timeout=10", "-rss_limit_mb=1024", "-max_len=1024", f"-artifact_prefix={tmp_path}/",
            str(tmp_path / "corpus"),
        ]
        done = f"Done {runs} runs"
    else:
        cmd = [sys.executable, "-m", "tests.fuzz", "mutate", target, f"--runs={runs // 4}", "--seed=1"]
        done = "Done "
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and done in output, (
        f"fuzz target {target} failed (exit {proc.returncode}):\n{output[-6000:]}"
    )
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))
