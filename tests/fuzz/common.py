"""What the harnesses share: cutting a stream into reads, and reading AMQP output.

A harness input is ``config bytes + stream``: :class:`Input` takes the first
bytes as knobs (protocol version, side, limits) and the rest as the bytes a
peer sends.  :func:`cuts` gives the three ways every harness feeds a stream
(whole, one byte at a time, uneven pieces chosen by the input), so a decoder
that promises "where an error is detected never depends on how the stream
was cut into reads" is held to it.
"""

from __future__ import annotations

from collections.abc import Iterator


class Input:
    """The fuzzer's bytes as ``knobs`` (the first ``n`` bytes, zero-padded) and ``stream``."""

    __slots__ = ("knobs", "stream")

    def __init__(self, data: bytes, n: int):
        head = data[:n]
        self.knobs = head + bytes(n - len(head))
        self.stream = data[n:]

    def knob(self, index: int, choices):
        """One of ``choices``, picked by knob ``index``."""
        return choices[self.knobs[index] % len(choices)]


def pieces(stream: bytes, seed: int) -> list[bytes]:
    """``stream`` cut into uneven pieces (sizes 1..13 and a few long ones), led by ``seed``."""
    out = []
    pos = 0
    step = seed or 1
    while pos < len(stream):
        step = (step * 37 + 11) % 251
        size = 1 + step % 13 if step % 5 else 64 + step
        out.append(stream[pos:pos + size])
        pos += size
    return out


def cuts(stream: bytes, seed: int) -> Iterator[tuple[str, list[bytes]]]:
    """The three ways a stream is fed: whole, one byte at a time, and uneven pieces."""
    yield "whole", [stream] if stream else []
    yield "bytewise", [stream[i:i + 1] for i in range(len(stream))]
    yield "pieces", pieces(stream, seed)


def same(results: dict[str, object], what: str) -> None:
    """Assert every way of cutting the stream gave the same result."""
    first, *others = results.values()
    for value in others:
        assert value == first, (
            f"{what} depends on how the stream was cut into reads:\n"
            + "\n".join(f"  {n}: {v!r}"[:2000] for n, v in results.items())
        )


# -- AMQP output ---------------------------------------------------------------------------

#: the protocol headers an AMQP peer may write (AMQP, TLS, SASL; version 1.0.0)
AMQP_HEADERS = (b"AMQP\x00\x01\x00\x00", b"AMQP\x02\x01\x00\x00", b"AMQP\x03\x01\x00\x00")

SASL_OUTCOME = 0x44
SASL_MECHANISMS = 0x40
OPEN = 0x10
CLOSE = 0x18


def amqp_output(data: bytes, *, echoes: bool = False) -> list[object]:
    """What an AMQP server wrote: ``"header:<id>"`` strings and ``(type, code, fields)`` frames.

    Parsed with the project's type decoder; asserts the bytes are well formed
    (a server must never write garbage, even while refusing garbage).
    ``echoes``: a frame body may hold a string that is not UTF-8, when it echoes
    what the client sent (a broker core answers an attach with the client's
    own terminus, copied by proton, which does not check UTF-8); the framing
    is still checked, and such a frame is ``(type, "echo", [])``.
    """
    from junction.protocols.amqp.types import DecodeError, Described, Scalar, decode

    out: list[object] = []
    pos = 0
    while pos < len(data):
        if data[pos:pos + 4] == b"AMQP":
            header = data[pos:pos + 8]
            assert header in AMQP_HEADERS, f"the server wrote a bad protocol header {header!r}"
            out.append(f"header:{header[4]}")
            pos += 8
            continue
        assert len(data) - pos >= 8, f"the server wrote a truncated frame header {data[pos:]!r}"
        size = int.from_bytes(data[pos:pos + 4], "big")
        doff, ftype = data[pos + 4], data[pos + 5]
        assert 8 <= size <= len(data) - pos, f"the server wrote a frame of size {size} at {pos}"
        assert 2 <= doff and doff * 4 <= size, f"the server wrote a frame with data offset {doff}"
        body = data[pos + doff * 4:pos + size]
        pos += size
        if not body:
            out.append((ftype, None, []))  # an empty frame: a heart-beat
            continue
        try:
            value, end = decode(body)
        except DecodeError as exc:
            if echoes and "not valid UTF-8" in str(exc):
                out.append((ftype, "echo", []))
                continue
            raise
        assert isinstance(value, Described), f"the server wrote a frame body {value!r}"
        code = value.descriptor.value if isinstance(value.descriptor, Scalar) else value.descriptor
        out.append((ftype, code, value.value if isinstance(value.value, list) else []))
        del end
    return out


def close_condition(fields: list) -> str | None:
    """The error condition of a Close (or Detach/End) performative's fields, or None."""
    from junction.protocols.amqp.types import Described

    error = fields[0] if fields else None
    if error is None:
        return None
    assert isinstance(error, Described), f"a close whose error is {error!r}"
    condition = error.value[0] if error.value else None
    assert isinstance(condition, str) and condition, f"an error without a condition: {error!r}"
    return condition


def sasl_outcome_code(fields: list) -> int:
    """The code of a sasl-outcome performative."""
    from junction.protocols.amqp.types import Scalar

    code = fields[0]
    return code.value if isinstance(code, Scalar) else code
