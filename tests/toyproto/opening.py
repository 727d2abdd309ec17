"""TOY's opening reader for the gateway (sans-IO): the ``TOY LOGIN`` line.

``TOY LOGIN <user> <password> <client-id>\\n`` is the whole opening.  The
reader calls ``authenticate(user, password)`` (the gateway's security
manager) and completes with the client id and principal, the line kept to be
replayed to whoever serves the connection.  Every answer is one line,
``TOY ERROR <text>\\n``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import Complete, Failed, Opening, refusal_description

#: the longest opening line, in octets (a longer one is refused)
MAX_LINE = 1024


class State(enum.Enum):
    READING = "reading"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class ToyComplete(Complete):
    client_id: str | None
    principal: object
    user: str | None
    replay: bytes


@dataclass(frozen=True)
class ToyFailed(Failed):
    reason: str
    condition: str | None = None
    login_refused: bool = False
    user: str | None = None
    client_id: str | None = None


def error_line(text: str) -> bytes:
    return f"TOY ERROR {text}\n".encode()


class ToyOpening(Opening):
    def __init__(self, authenticate, *, max_line: int = MAX_LINE):
        self._authenticate = authenticate
        self._max_line = max_line
        self._buffer = bytearray()
        self._out = bytearray()
        self._state = State.READING
        self._failure = None

    @property
    def state(self):
        return self._state

    @property
    def failure(self):
        return self._failure

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def receive_data(self, data: bytes) -> list:
        if self._state is not State.READING:
            return []
        self._buffer += data
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > self._max_line:
                return [self._fail(f"opening line longer than {self._max_line} octets")]
            return []
        line = bytes(self._buffer[:end]).decode("utf-8", "replace").split()
        if len(line) != 5 or line[:2] != ["TOY", "LOGIN"]:
            return [self._fail("expected TOY LOGIN <user> <password> <client-id>")]
        user, password, client_id = line[2:]
        principal = self._authenticate(user, password)
        if principal is None:
            return [self._fail("login refused", login_refused=True, user=user, client_id=client_id)]
        self._state = State.COMPLETE
        replay, self._buffer = bytes(self._buffer), bytearray()
        return [ToyComplete(client_id, principal, user, replay)]

    def _fail(self, reason: str, **details) -> ToyFailed:
        self._state = State.FAILED
        self._out += error_line(reason)
        self._failure = ToyFailed(reason, **details)
        return self._failure

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out

    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        return error_line(refusal_description(router_name, status))

    def close_with(self, condition, description=None, info=None) -> bytes:
        return error_line(description or condition or "connection refused")

    def redirect(self, router_name: str, host: str, port: int) -> bytes:
        raise LocalProtocolError("TOY has no redirect: forward the connection instead")
