"""Smoke test of bench/openwire_throughput.py: ``--quick`` runs every mode on all three targets.

Not a measurement: it proves the load generator (tests/java/openwire/OpenWireBench.java, the
real Classic client), the three targets' start-up (a Junction node, ActiveMQ Classic, Artemis)
and the report run through, and that every message of every trial arrived (a trial that loses
one fails in OpenWireBench and the script raises).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import REPO_ROOT

MODES = ("sync-persistent", "async-persistent", "non-persistent")
TARGETS = ("junction", "classic", "artemis")


def test_quick_run_reports_every_mode_on_every_target(artemis_dist):
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "openwire_throughput.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for target in TARGETS:
        for mode in MODES:
            row = result["results"][target][mode]
            assert row["msgs_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0, (target, mode, row)
            assert row["broker_cpu_us_per_msg"] is not None and row["client_cpu_us_per_msg"] > 0
    assert set(result["ratios"]) == {"classic", "artemis"}
    assert all(set(r) == set(MODES) for r in result["ratios"].values())
    assert "journal-type" in result["notes"]["artemis"]
