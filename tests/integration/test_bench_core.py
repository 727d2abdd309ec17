"""Smoke test of bench/core_throughput.py: ``--quick`` runs every mode on both targets.

Not a measurement: it proves the benchmark's load generator (tests/java/CoreBench.java), both
targets' start-up and the report run through, and that every message of every trial arrived
(a trial that loses one fails in CoreBench and the script raises).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import REPO_ROOT

MODES = ("durable-blocking", "durable-async", "non-durable")


def test_quick_run_reports_every_mode_on_both_targets(artemis_dist, jms_classes):
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "core_throughput.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for target in ("junction", "artemis"):
        for mode in MODES:
            row = result["results"][target][mode]
            assert row["msgs_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0, (target, mode, row)
            assert row["broker_cpu_us_per_msg"] is not None
    assert set(result["ratios"]) == set(MODES)
    assert "journal-type" in result["durability"]["artemis"]
