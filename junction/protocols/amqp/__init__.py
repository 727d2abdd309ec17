"""AMQP 1.0, sans-IO: bytes in, values out; values in, bytes out.

:mod:`.types` is the type-system codec (spec part 1), :mod:`.message` the
message-section codec (spec part 3 section 3.2).  Neither imports Twisted,
sockets or proton, so they are usable, and testable, without any I/O.
"""
