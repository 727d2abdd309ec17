"""The bytes of an incomplete frame, held between reads, for the sans-IO codecs.

A codec whose frames carry their size (CORE, OpenWire) parses what arrived
with a function of its own, ``parse(buf, events) -> consumed``: it appends
the events of the whole frames at the start of ``buf`` and returns how many
bytes they took, leaving a partial frame for the next read.
:class:`FrameBuffer` does the rest, the same for every such codec: it joins
the held bytes and the new ones (without a copy when nothing is held), keeps
what ``parse`` left, and when ``parse`` raises the codec's protocol error it
hangs the events completed before it on the error (``events``), forgets the
held bytes and raises that same error on every later read (``events`` empty).

Bound: ``parse`` refuses a size over its limit as soon as the size's bytes
are in, so what is held never exceeds one frame of the largest allowed size
and its prefix.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["FrameBuffer"]


class FrameBuffer:
    """One connection's held bytes and the error that ended its stream (None while it runs)."""

    __slots__ = ("_held", "error")

    def __init__(self) -> None:
        self._held = bytearray()
        self.error: Exception | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._held)

    def held(self) -> bytes:
        """A copy of the bytes held (for checks of the bound)."""
        return bytes(self._held)

    def feed(self, data: bytes, parse: Callable[[bytes | bytearray, list], int], error_type: type) -> list:
        """The events ``data`` completes (see the module docstring); raises ``error_type``."""
        error = self.error
        if error is not None:
            error.events = []
            raise error
        held = self._held
        if held:
            held += data
            buf = held
        else:
            buf = data
        events: list = []
        try:
            pos = parse(buf, events)
        except error_type as exc:
            exc.events = events
            self.error = exc
            self._held = bytearray()
            raise
        if held:
            del held[:pos]
        elif pos < len(buf):
            self._held = bytearray(buf[pos:])
        return events
