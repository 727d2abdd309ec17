"""``./run.sh`` and ``./test.sh`` install Junction only when something changed, and quietly.

The scripts run for real (bash) from a copy of the checkout's scripts and packaging files, with
a stand-in virtualenv whose ``python`` records each ``pip install`` and prints what pip and
setuptools print (the editable-install banner) and whose ``junction`` prints its arguments.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-V" ]; then echo "Python 3.11.2"; exit 0; fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  echo "pip install ${*:4}" >> "$(dirname "$0")/../pip.log"
  echo "  BuildBackendWarning: Editable installation." >&2
  echo "  !! Please be careful with folders in your working directory !!" >&2
  exit "${FAKE_PIP_EXIT:-0}"
fi
echo "unexpected: $*" >&2; exit 2
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def checkout(tmp_path):
    """A copy of what run.sh reads, and a stand-in venv in it."""
    root = tmp_path / "junction"
    (root / "scripts").mkdir(parents=True)
    for name in ("run.sh", "test.sh", "setup.cfg", "pyproject.toml", "scripts/venv.sh"):
        shutil.copy(REPO / name, root / name)
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    _executable(venv / "python", FAKE_PYTHON)
    _executable(venv / "junction", '#!/usr/bin/env bash\necho "junction $*"\n')
    return root


def run_sh(root: Path, *args: str, pip_exit: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, FAKE_PIP_EXIT=str(pip_exit))
    env.pop("JUNCTION_VENV", None)
    return subprocess.run(["bash", str(root / "run.sh"), *args], capture_output=True, text=True, env=env, timeout=60)


def pip_calls(root: Path) -> list[str]:
    log = root / ".venv" / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


def test_run_sh_installs_once_and_quietly_then_again_when_the_packaging_changes(checkout):
    first = run_sh(checkout, "--no-status")
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"junction up --etc {checkout}/etc/appliance --no-status\n"
    assert first.stderr == ""  # pip's and setuptools' chatter is not shown
    assert pip_calls(checkout) == [f"pip install -q -e {checkout}"]

    again = run_sh(checkout, "--config", "etc/broker.xml")
    assert (again.returncode, again.stderr) == (0, "")
    assert again.stdout == "junction run --config etc/broker.xml\n"
    assert len(pip_calls(checkout)) == 1  # nothing changed: no install

    with open(checkout / "setup.cfg", "a") as f:
        f.write("\n# a new dependency, say\n")
    assert run_sh(checkout).returncode == 0
    assert len(pip_calls(checkout)) == 2
    assert run_sh(checkout).returncode == 0
    assert len(pip_calls(checkout)) == 2


def test_a_failed_install_shows_pip_s_output_stops_and_is_tried_again(checkout):
    failed = run_sh(checkout, pip_exit=1)
    assert failed.returncode == 1
    assert failed.stdout == ""  # junction was not started
    assert "BuildBackendWarning: Editable installation." in failed.stderr
    assert f"installing {checkout} into {checkout}/.venv failed (exit 1); pip's output is above" in failed.stderr
    assert run_sh(checkout).returncode == 0  # not stamped: installed on the next run
    assert len(pip_calls(checkout)) == 2


def test_an_install_with_extras_counts_for_run_sh_and_a_missing_junction_reinstalls(checkout):
    env = dict(os.environ)
    env.pop("JUNCTION_VENV", None)
    script = f'source "{checkout}/scripts/venv.sh"; install_once "$here[test,spark]"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert pip_calls(checkout) == [f"pip install -q -e {checkout}[test,spark]"]
    assert run_sh(checkout).returncode == 0
    assert len(pip_calls(checkout)) == 1  # the checkout is installed already (with extras)
    (checkout / ".venv" / "bin" / "junction").unlink()  # an install undone behind the stamp's back
    run_sh(checkout)
    assert pip_calls(checkout)[-1] == f"pip install -q -e {checkout}"
