"""The floors of ``junction/`` hold: import-linter's contracts (``.importlinter``) pass.

The contracts are the floors of docs/architecture.md: each package imports
only the floors below it, the broker core and the gateway never import each
other, ``protocols`` nothing of ours, each protocol's package stands alone,
the pure floors use no Twisted, the pipeline only the event schema and
routing, no package's modules import each other in a circle, and the broker
core's CORE, STOMP and AMQP adapters import nothing of each other.  The second
test shows each contract catches what it is for: one wrong-way import, written
into a copy of the tree, breaks the contract named, while the copy without it
keeps them all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".importlinter"

#: lint-imports in this interpreter (its console script may not be on PATH)
LINT_IMPORTS = (sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()")


def lint_imports(where: Path, *contracts: str) -> subprocess.CompletedProcess:
    """``lint-imports`` over the ``junction`` package in *where* (its cwd, first on sys.path)."""
    argv = [*LINT_IMPORTS, "--no-cache", "--no-logo", str(CONFIG)]
    for contract in contracts:
        argv += ["--contract", contract]
    env = dict(os.environ, PYTHONPATH=str(where))
    return subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=50)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, f"import contracts broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout, result.stdout


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory):
    """A copy of the ``junction`` package, to write wrong-way imports into."""
    where = tmp_path_factory.mktemp("floors")
    shutil.copytree(ROOT / "junction", where / "junction", ignore=shutil.ignore_patterns("__pycache__"))
    kept = lint_imports(where)  # the copy as it is keeps every contract: what breaks below is the import
    assert kept.returncode == 0, f"the copy breaks the contracts already:\n{kept.stdout}\n{kept.stderr}"
    return where


#: (contract, the module written into, the import it gains, the import named in the report)
WRONG_WAY = [
    # a floor importing one above it: the model reaching up into the broker core
    ("floors", "junction/model/errors.py", "from junction.brokercore import server", "junction.brokercore.server"),
    # two packages of one floor: the broker core and the gateway
    ("broker-gateway", "junction/brokercore/deploy.py", "from junction.gateway import router", "junction.gateway.router"),
    # a codec reaching out of protocols/
    ("protocols", "junction/protocols/detect.py", "from junction.model import message", "junction.model.message"),
    # one protocol's package borrowing from another's
    ("one-package-per-protocol", "junction/protocols/stomp/frames.py", "from junction.protocols.amqp import types",
     "junction.protocols.amqp.types"),
    # Twisted in a pure floor
    ("sans-io", "junction/routing/keys.py", "from twisted.internet import defer", "twisted"),
    # the pipeline reaching into the gateway again
    ("pipeline", "junction/pipeline/report.py", "from junction.gateway import build", "junction.gateway.build"),
    # a circle inside one package: the tables importing the board that imports them
    ("no-cycles", "junction/cli/tables.py", "from junction.cli import board", ".tables -> .board"),
    # one protocol adapter of the broker core borrowing from another's
    ("adapter-stomp", "junction/brokercore/stomp_subscriptions.py", "from junction.brokercore import core_large",
     "junction.brokercore.core_large"),
    ("adapter-amqp", "junction/brokercore/amqp_links.py", "from junction.brokercore import stomp_acks",
     "junction.brokercore.stomp_acks"),
    ("adapter-core", "junction/brokercore/core_sessions.py", "from junction.brokercore import amqp_links",
     "junction.brokercore.amqp_links"),
]


@pytest.mark.parametrize(("contract", "module", "statement", "named"), WRONG_WAY, ids=[w[0] for w in WRONG_WAY])
def test_a_wrong_way_import_breaks_its_contract(tree_copy, contract, module, statement, named):
    path = tree_copy / module
    original = path.read_text()
    path.write_text(original + f"\n{statement}  # noqa: E402,F401\n")
    try:
        result = lint_imports(tree_copy, contract)
    finally:
        path.write_text(original)
    assert result.returncode == 1, f"{contract} kept a wrong-way import:\n{result.stdout}\n{result.stderr}"
    assert "BROKEN" in result.stdout and named in result.stdout, result.stdout
