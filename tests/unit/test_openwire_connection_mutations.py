"""Every mutation of the OpenWire connection's table fails tests/unit/test_openwire_connection.py.

Each row a command can reach is deleted, sent to every other state, given
every other action; with each such table in place the connection tests are
run (in this process: the module's functions are called directly), and each
mutated table must make one of them fail.  Rows no command can reach (an ack
for a registered consumer before any connection is registered, ...) are
left out: the table fills them so that a lookup never fails, and the
state-and-input tests check that nothing classifies as them.
"""

from __future__ import annotations

import types

import pytest

import tests.unit.test_openwire_connection as rules
from junction.protocols.openwire import connection


def _install(monkeypatch, table: dict) -> None:
    proxy = types.MappingProxyType(table)
    monkeypatch.setattr(connection, "TRANSITIONS", proxy)
    monkeypatch.setattr(rules, "TRANSITIONS", proxy)


def _table_tests_pass(first=None) -> bool:
    """Whether every connection test passes; ``first``, the mutated row's own case, is tried first
    (it fails for most mutations, which spares the rest)."""
    try:
        if first is not None:
            rules.test_every_state_and_input(*first)
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
        if rules.expected(*key)[0] == "unreachable":
            continue
        yield key, f"{key} deleted", {k: v for k, v in table.items() if k != key}
        for other in states:
            if other is not nxt:
                yield key, f"{key} -> {other.name}", {**table, key: (other, action)}
        for other in actions:
            if other is not action:
                yield key, f"{key} does {other.name}", {**table, key: (nxt, other)}


def test_the_real_table_passes_and_every_mutation_fails(monkeypatch):
    original = dict(connection.TRANSITIONS)
    _install(monkeypatch, dict(original))
    assert _table_tests_pass()
    survivors = []
    count = 0
    for key, name, table in _mutations(original):
        count += 1
        _install(monkeypatch, table)
        if _table_tests_pass(first=key):
            survivors.append(name)
    assert count > 2000
    assert survivors == []
