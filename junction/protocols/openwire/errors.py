"""The errors of the OpenWire codec and connection, and the Java exception each is answered with.

Every error about what the peer sent is an :class:`OpenWireProtocolError` (a
:class:`~junction.protocols.errors.RemoteProtocolError`).  It carries
``java_class``: the exception class the real client rebuilds from an
ExceptionResponse or ConnectionError (``Class.forName(name)`` with a
``(String)`` constructor, openwire.md section 7), so the adapter answers
``ExceptionResponse{throwable(java_class, str(error))}`` for a command that
asked for a response, a ``ConnectionError`` otherwise, and closes the
connection when :attr:`OpenWireProtocolError.fatal` is set.

===========================  ===========================================  ==============================
error                        what the peer did                            answered with (fatal?)
===========================  ===========================================  ==============================
:class:`UnknownType`         a type byte the codec does not read          java.io.IOException (yes)
:class:`MalformedCommand`    a truncated body, trailing bytes, a bad      java.io.IOException (yes)
                             string, a structure of the wrong type, a
                             cache index never filled, nesting too deep
:class:`FrameTooLarge`       a size prefix over ``max_frame_size``        org.apache.activemq.
                                                                          MaxFrameSizeExceededException
                                                                          (yes)
:class:`NegotiationFailed`   a WireFormatInfo with a bad magic or a       java.io.IOException (yes)
                             version this codec does not speak
===========================  ===========================================  ==============================

The connection's own errors (:mod:`.connection`) subclass it the same way.
"""

from __future__ import annotations

from junction.protocols.errors import RemoteProtocolError
from junction.protocols.openwire.command_types import type_name

__all__ = [
    "FrameTooLarge",
    "MalformedCommand",
    "NegotiationFailed",
    "OpenWireProtocolError",
    "UnknownType",
]


class OpenWireProtocolError(RemoteProtocolError):
    """The peer broke OpenWire: answer with ``java_class`` and the message; close if ``fatal``.

    ``code`` (the base class's) is the error class's name.  ``events`` (set
    by the codec) holds what was decoded before the offending bytes; the
    connection sets ``command`` to the command it refused, when there is one.
    """

    java_class: str = "java.io.IOException"
    fatal: bool = True

    def __init__(self, message: str, command: object = None):
        super().__init__(message, type(self).__name__)
        self.command = command
        self.events: list = []


class UnknownType(OpenWireProtocolError):
    """A command or nested structure whose type byte the codec does not read."""

    def __init__(self, type_byte: int, where: str = "frame"):
        super().__init__(f"{where}: {type_name(type_byte)} is not a type this server reads")
        self.type_byte = type_byte


class MalformedCommand(OpenWireProtocolError):
    """A frame that does not parse as the command its type byte names."""


class FrameTooLarge(OpenWireProtocolError):
    """A size prefix above the frame limit, refused before the body is awaited."""

    java_class = "org.apache.activemq.MaxFrameSizeExceededException"


class NegotiationFailed(OpenWireProtocolError):
    """A WireFormatInfo this server cannot settle on (magic, version)."""
