"""Helpers around proton's engine (``proton.Transport``), shared by every AMQP endpoint we run.

proton is the sans-IO codec of AMQP here: bytes go in with ``push`` and come
out with ``pending``/``peek``/``pop``.  Both the broker core's server
connections and the gateway's probe connections move its output the same
way, so that loop lives here once.
"""

from __future__ import annotations

__all__ = ["drain_output"]


def drain_output(transport, write) -> int:
    """Hand everything the engine has to send to ``write``; return the final ``pending()``.

    proton hands out at most one output buffer at a time, so this goes on
    until it is empty.  A negative result means the engine's head is closed
    (the last bytes were a close frame): the caller drops the socket.
    """
    pending = transport.pending()
    while pending > 0:
        write(bytes(transport.peek(pending)))
        transport.pop(pending)
        pending = transport.pending()
    return pending
