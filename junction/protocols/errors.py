"""Protocol errors shared by every sans-IO codec (the h11 convention).

``RemoteProtocolError`` means the peer broke the protocol: the adapter answers
with the protocol's own error (STOMP ERROR frame, AMQP close condition, ...)
and closes that one connection.  ``LocalProtocolError`` means our own code
tried to do something the protocol forbids: a bug, never the peer's fault.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base class; ``code`` is the wire's own error code or condition, if any."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol does not allow."""
