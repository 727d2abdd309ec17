"""Sans-IO: what every protocol's opening reader gives the gateway.

A gateway listener routes a connection on what its client says first: who it
is (a login the gateway checks itself, so USER_NAME and ROLE_NAME keys cannot
be spoofed) and its client id.  Each protocol reads that much with its own
*opening reader* -- :class:`~junction.protocols.amqp.opening.AmqpOpening`
(SASL and the Open), :class:`~junction.protocols.stomp.opening.StompOpening`
(the CONNECT frame) -- and every reader has the interface of :class:`Opening`,
so the listener drives them all the same way::

    events = opening.receive_data(data)     # bytes in, never raises for them
    transport.write(opening.data_to_send()) # what the protocol answers at once
    for event in events:
        Failed    -> the answer is queued (written above): close
        Complete  -> route on event.client_id / event.principal; replay
                     event.replay to whoever serves the connection
        Passthrough -> bytes fed after Complete (the listener should have
                     stopped feeding): the backend's

and once the router has decided, it asks the reader for the protocol's own
words: :meth:`Opening.refuse` (Artemis's refusal for a router status),
:meth:`Opening.redirect` (where the protocol has a redirect:
:attr:`Opening.redirects`), :meth:`Opening.close_with` (any other error),
:meth:`Opening.timed_out` and :meth:`Opening.too_large` (the client took too
long, or sent too much, before its opening was complete).  Each returns the
bytes to write before closing.

The events of every reader derive from :class:`Complete` and :class:`Failed`
(empty bases, so a listener can tell them apart without knowing the
protocol), and carry:

* :class:`Complete` -- ``client_id`` (str or None), ``principal`` (what the
  reader's ``authenticate`` callback returned; None where the protocol let
  the client skip its login), ``user`` (the login name the client presented,
  for the logs), ``replay`` (the bytes to write to the backend, exactly as
  received).
* :class:`Failed` -- ``reason`` (for the log), ``condition`` (the protocol's
  error condition, or None where it has none), ``login_refused`` (the
  client's login was refused), ``user`` and ``client_id`` (what the client
  presented, where the protocol says it before the login is checked; else
  None).

The router's refusal texts are Artemis's (``ConnectionRouter``), the same in
every protocol: :func:`not_ready_description`, :func:`rejected_description`,
:func:`redirect_description`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from junction.protocols.errors import LocalProtocolError

__all__ = [
    "REFUSED_UNAVAILABLE",
    "REFUSED_USE_ANOTHER",
    "Complete",
    "Failed",
    "Opening",
    "Passthrough",
    "not_ready_description",
    "redirect_description",
    "refusal_description",
    "rejected_description",
]

#: Router statuses :meth:`Opening.refuse` understands (the names of
#: ``RouterStatus``; its members are accepted too).
REFUSED_UNAVAILABLE = "REFUSED_UNAVAILABLE"
REFUSED_USE_ANOTHER = "REFUSED_USE_ANOTHER"


def redirect_description(router: str, host: str, port: int) -> str:
    """Artemis's description of a redirect."""
    return f"Connection router {router} redirected this connection to {host}:{port}"


def not_ready_description(router: str) -> str:
    """Artemis's description of a ``REFUSED_UNAVAILABLE`` refusal."""
    return f"Connection router {router} is not ready"


def rejected_description(router: str) -> str:
    """Artemis's description of a ``REFUSED_USE_ANOTHER`` refusal."""
    return f"Connection router {router} rejected this connection"


def refusal_description(router: str, status: object) -> str:
    """Artemis's text for ``status`` (a name or a ``RouterStatus`` member); ValueError otherwise."""
    name = getattr(status, "name", status)
    if name == REFUSED_UNAVAILABLE:
        return not_ready_description(router)
    if name == REFUSED_USE_ANOTHER:
        return rejected_description(router)
    raise ValueError(f"status must be {REFUSED_UNAVAILABLE} or {REFUSED_USE_ANOTHER}, not {status!r}")


class Complete:
    """Base of the event saying an opening is complete (fields: see the module doc)."""

    __slots__ = ()


class Failed:
    """Base of the event saying an opening failed and its answer is queued (see the module doc)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Passthrough:
    """Bytes received once the opening (or the SASL layer) was over: they belong to the backend."""

    data: bytes


class Opening(abc.ABC):
    """The interface of a protocol's opening reader (see the module doc).

    Sans-IO: no sockets, no clock.  ``receive_data`` never raises for what the
    client sent; :class:`~junction.protocols.errors.LocalProtocolError` means
    the caller asked for something the state does not allow (an answer after
    a failure, or twice).
    """

    __slots__ = ()

    #: Whether :meth:`redirect` is available (the protocol has a native redirect).
    redirects: ClassVar[bool] = False

    # A reader keeps ``self._state``, ``self._failure`` and ``self._max_bytes``; these three
    # read them the same way for every protocol.

    @property
    def state(self) -> object:
        """Where the opening stands (the reader's own state enum)."""
        return self._state

    @property
    def failure(self) -> Failed | None:
        """The failure, once a :class:`Failed` event was returned."""
        return self._failure

    @property
    def max_bytes(self) -> int:
        """The reader's limit on the octets it holds until the opening is decided."""
        return self._max_bytes

    @property
    @abc.abstractmethod
    def buffered(self) -> int:
        """Octets held until the opening is decided (bounded by the reader's named limit)."""

    @abc.abstractmethod
    def receive_data(self, data: bytes) -> list:
        """Feed bytes from the client; return the events they complete."""

    #: the reader's state table, (state, input) -> next state, and the protocol's name for
    #: :meth:`_transition`'s error; a reader keeps ``self._state`` and queues its answers in
    #: ``self._out`` (a bytearray)
    TRANSITIONS: ClassVar[Mapping] = {}
    PROTOCOL: ClassVar[str] = "?"

    def _transition(self, kind) -> None:
        """Move ``self._state`` along :attr:`TRANSITIONS` on input ``kind``; a pair the table
        lacks is our own misuse (:class:`LocalProtocolError`)."""
        try:
            self._state = self.TRANSITIONS[self._state, kind]
        except KeyError:
            raise LocalProtocolError(
                f"{self.PROTOCOL} opening has no transition from {self._state.name} on {kind.name}"
            ) from None

    def data_to_send(self) -> bytes:
        """Take the bytes queued for the client (empty when there are none)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    @abc.abstractmethod
    def refuse(self, router_name: str, status: object, *, detail: str = "") -> bytes:
        """Artemis's refusal for router ``status`` in the protocol's terms; write it, then close.

        ``detail`` is a longer explanation, written where the protocol has room
        for one.
        """

    @abc.abstractmethod
    def close_with(
        self, condition: str | None, description: str | None = None, info: Mapping | None = None
    ) -> bytes:
        """End the connection with an error (``condition`` where the protocol has them)."""

    @abc.abstractmethod
    def redirect(self, router_name: str, host: str, port: int) -> bytes:
        """The protocol's redirect to ``host:port`` (only where :attr:`redirects`)."""

    def timed_out(self, seconds: float) -> bytes:
        """The answer to a client whose opening was not complete within ``seconds``.

        Empty where the protocol has nothing to say (the connection is just
        closed), as here by default.
        """
        return b""

    def too_large(self, limit: int) -> bytes:
        """The answer to a client that sent more than ``limit`` octets before its opening was
        complete; empty (just close) by default."""
        return b""
