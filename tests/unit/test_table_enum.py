"""The members of every sans-IO state table hash by identity (junction/protocols/states.py).

A table lookup ``TRANSITIONS[state, input]`` runs on every event of every
connection; a plain ``enum.Enum`` member hashes through a Python method, so
each lookup cost two Python calls.  These tests fail if a table's states or
inputs are made of plain enums again, or if identity hashing changed what a
member is.
"""

from __future__ import annotations

import enum
import pickle
from collections.abc import Mapping

import pytest

from junction.protocols.amqp import opening as amqp_opening
from junction.protocols.amqp import sasl, sasl_client
from junction.protocols.cluster.link import states as link_states
from junction.protocols.states import TableEnum
from junction.protocols.stomp import connection as stomp_connection
from junction.protocols.stomp import opening as stomp_opening

TABLES = {
    "amqp opening": amqp_opening.TRANSITIONS,
    "amqp sasl": sasl.TRANSITIONS,
    "amqp sasl client": sasl_client.TRANSITIONS,
    "cluster link (send)": link_states.SEND_TRANSITIONS,
    "cluster link (receive)": link_states.RECEIVE_TRANSITIONS,
    "stomp opening": stomp_opening.TRANSITIONS,
    "stomp connection": stomp_connection.TRANSITIONS,
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_key_of_a_state_table_hashes_by_identity(name):
    members = set()
    tables = [TABLES[name]]
    while tables:  # the cluster link's tables nest: role -> state -> frame type
        table = tables.pop()
        for key, value in table.items():
            parts = key if isinstance(key, tuple) else (key,)
            members.update(p for p in parts if isinstance(p, enum.Enum))
            if isinstance(value, Mapping):
                tables.append(value)
    assert members, f"{name}: no enum members in the table's keys"
    for member in members:
        assert isinstance(member, TableEnum), f"{name}: {member!r} is a plain enum"
        assert hash(member) == object.__hash__(member)


def test_a_table_enum_member_is_still_an_enum_member():
    state = stomp_connection.ConnectionState.CONNECTED
    assert stomp_connection.ConnectionState("CONNECTED") is state
    assert stomp_connection.ConnectionState["CONNECTED"] is state
    assert state == state and state != stomp_connection.ConnectionState.CLOSED
    assert pickle.loads(pickle.dumps(state)) is state
    assert {state: 1}[stomp_connection.ConnectionState.CONNECTED] == 1


def test_a_plain_enum_would_fail_the_identity_check():
    class Plain(enum.Enum):
        A = "A"

    class Table(TableEnum):
        A = "A"

    assert hash(Plain.A) == hash("A")  # the name's hash, through Enum.__hash__
    assert hash(Table.A) == object.__hash__(Table.A)
