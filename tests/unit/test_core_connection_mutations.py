"""Every mutation of the CORE connection's table fails tests/unit/test_core_connection.py.

Each row is deleted, sent to every other state, given every other action, and
a row is added for every pair the table leaves out; with each such table in
place the connection tests are run (in this process: the module's functions
are called directly), and each mutated table must make one of them fail.
This is what makes the table's tests honest: a row they do not pin down
would survive here.
"""

from __future__ import annotations

import types

import pytest

import tests.unit.test_core_connection as rules
from junction.protocols.core import connection


def _install(monkeypatch, table: dict) -> None:
    proxy = types.MappingProxyType(table)
    monkeypatch.setattr(connection, "TRANSITIONS", proxy)
    monkeypatch.setattr(rules, "TRANSITIONS", proxy)


def _table_tests_pass() -> bool:
    try:
        for state, kind in rules.CASES:
            rules.test_every_state_and_input(state, kind)
        for name in dir(rules):
            test = getattr(rules, name)
            if name.startswith("test_") and callable(test) and test.__code__.co_argcount == 0:
                test()
    except (Exception, pytest.fail.Exception):
        return False
    return True


def _mutations(table: dict):
    states, actions = list(connection.ConnectionState), list(connection.Action)
    for key, (nxt, action) in table.items():
        yield f"{key} deleted", {k: v for k, v in table.items() if k != key}
        for other in states:
            if other is not nxt:
                yield f"{key} -> {other.name}", {**table, key: (other, action)}
        for other in actions:
            if other is not action:
                yield f"{key} does {other.name}", {**table, key: (nxt, other)}
    for state in states:
        for kind in connection.ConnectionInput:
            if (state, kind) not in table:
                yield f"{(state, kind)} added", {**table, (state, kind): (state, connection.Action.IGNORE)}


def test_the_real_table_passes_and_every_mutation_fails(monkeypatch):
    original = dict(connection.TRANSITIONS)
    _install(monkeypatch, dict(original))
    assert _table_tests_pass()
    survivors = []
    count = 0
    for name, table in _mutations(original):
        count += 1
        _install(monkeypatch, table)
        if _table_tests_pass():
            survivors.append(name)
    assert count > 600
    assert survivors == []
