"""The cluster link's state machine as tables: who may send or receive what, in which state.

:data:`SEND_TRANSITIONS` and :data:`RECEIVE_TRANSITIONS` map role -> state ->
event class -> next state; an event absent from them is not allowed there.
The package doc draws the outline; these tables are the complete rules, and
:class:`~.connection.LinkConnection` only ever moves along them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from junction.protocols.cluster.link.events import (
    Ack,
    BindingAdded,
    BindingRemoved,
    Bindings,
    Change,
    ChangeResult,
    Consumers,
    Goodbye,
    Hello,
    MessageFrame,
    Nack,
    Ping,
    Pong,
    Record,
    Refused,
    Topology,
    Welcome,
)
from junction.protocols.states import TableEnum

__all__ = [
    "Role",
    "LinkState",
    "SEND_TRANSITIONS",
    "RECEIVE_TRANSITIONS",
    "INITIAL_STATES",
]


class Role(TableEnum):
    """Which end of the link: the bridge that connects, or the acceptor."""

    CLIENT = "CLIENT"
    SERVER = "SERVER"


class LinkState(TableEnum):
    """The combined state of one link connection (see the package docstring)."""

    IDLE = "IDLE"
    AWAITING_WELCOME = "AWAITING_WELCOME"
    AWAITING_PREAMBLE = "AWAITING_PREAMBLE"
    AWAITING_HELLO = "AWAITING_HELLO"
    HELLO_RECEIVED = "HELLO_RECEIVED"
    OPEN = "OPEN"
    CLOSED = "CLOSED"


_C, _S = Role.CLIENT, Role.SERVER
_IDLE, _AWAIT_WELCOME = LinkState.IDLE, LinkState.AWAITING_WELCOME
_AWAIT_PREAMBLE, _AWAIT_HELLO = LinkState.AWAITING_PREAMBLE, LinkState.AWAITING_HELLO
_HELLO_RECEIVED, _OPEN, _CLOSED_STATE = LinkState.HELLO_RECEIVED, LinkState.OPEN, LinkState.CLOSED


def _stay(*classes: type) -> dict[type, LinkState]:
    return {cls: _OPEN for cls in classes}


_CLIENT_OPEN_SENDS = _stay(MessageFrame, Ping, Pong, Change) | {Goodbye: _CLOSED_STATE}
_SERVER_OPEN_SENDS = _stay(
    Bindings, BindingAdded, BindingRemoved, Consumers, Topology, Ack, Nack, Ping, Pong, ChangeResult, Record
) | {Goodbye: _CLOSED_STATE}


def _frozen(table: dict) -> Mapping:
    return MappingProxyType(
        {role: MappingProxyType({s: MappingProxyType(t) for s, t in by_state.items()})
         for role, by_state in table.items()}
    )


#: role -> state -> event class -> next state, for what we send.  Absent: not allowed.
SEND_TRANSITIONS: Mapping[Role, Mapping[LinkState, Mapping[type, LinkState]]] = _frozen({
    _C: {
        _IDLE: {Hello: _AWAIT_WELCOME},
        _AWAIT_WELCOME: {Goodbye: _CLOSED_STATE},
        _OPEN: _CLIENT_OPEN_SENDS,
    },
    _S: {
        _AWAIT_PREAMBLE: {Refused: _CLOSED_STATE},
        _AWAIT_HELLO: {Refused: _CLOSED_STATE},
        _HELLO_RECEIVED: {Welcome: _OPEN, Refused: _CLOSED_STATE},
        _OPEN: _SERVER_OPEN_SENDS,
    },
})

#: role -> state -> event class -> next state, for what we receive (the peer's sends).
RECEIVE_TRANSITIONS: Mapping[Role, Mapping[LinkState, Mapping[type, LinkState]]] = _frozen({
    _C: {
        _AWAIT_WELCOME: {Welcome: _OPEN, Refused: _CLOSED_STATE},
        _OPEN: _SERVER_OPEN_SENDS,
    },
    _S: {
        _AWAIT_HELLO: {Hello: _HELLO_RECEIVED},
        _HELLO_RECEIVED: {Goodbye: _CLOSED_STATE},
        _OPEN: _CLIENT_OPEN_SENDS,
    },
})

#: The state a new connection starts in.
INITIAL_STATES: Mapping[Role, LinkState] = MappingProxyType({_C: _IDLE, _S: _AWAIT_PREAMBLE})
