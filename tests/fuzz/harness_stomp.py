"""STOMP: the codec's frames, both sides, every version (junction/protocols/stomp/).

Knobs: the negotiated version (none yet, 1.0, 1.1, 1.2), the side (server or
client), the limits (the defaults, or small ones the fuzzer can reach) and
the cutting seed.  Contract (the codec's docstring):

* only :class:`RemoteProtocolError` escapes ``receive_data``; after one, the
  codec raises the same error again;
* :attr:`StompCodec.buffered` never exceeds ``max_frame_size``;
* the events, and whether the stream is refused, do not depend on how it was
  cut into reads;
* every frame it decoded, sent again by the codec of that version, decodes to
  the same frame (the escaping of ``frames.py`` round-trips), unless ``send``
  refuses it with :class:`LocalProtocolError` (what the wire cannot carry).
"""

from __future__ import annotations

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.stomp import Frame, StompCodec, StompLimits
from tests.fuzz.common import Input, cuts, same

VERSIONS = (None, "1.0", "1.1", "1.2")
#: small enough that the fuzzer meets every limit within a few hundred bytes
SMALL = StompLimits(max_frame_size=300, max_header_count=6, max_header_length=48, max_command_length=12)
LIMITS = (StompLimits(), SMALL)
KNOBS = 4


def _codec(version, server, limits) -> StompCodec:
    codec = StompCodec(limits, server=server)
    if version is not None:
        codec.set_version(version)
    return codec


def decode_stream(chunks, version, server, limits):
    """(events, refused?) for ``chunks`` fed in turn; checks the buffer bound and the dead codec."""
    codec = _codec(version, server, limits)
    events: list = []
    for chunk in chunks:
        try:
            events += codec.receive_data(chunk)
        except RemoteProtocolError as exc:
            events += exc.events
            assert codec.buffered == 0
            try:
                codec.receive_data(b"x")
            except RemoteProtocolError as again:
                assert again is exc and again.events == []
            else:
                raise AssertionError("a dead codec accepted more bytes")
            return events, True
        assert codec.buffered <= limits.max_frame_size, (codec.buffered, limits)
    return events, False


def _without_length(frame: Frame):
    return frame.command, tuple(h for h in frame.headers if h[0] != "content-length"), frame.body


def round_trip(frame: Frame, version, server) -> None:
    """A decoded frame, sent by our codec and read back by the peer's, is the same frame."""
    sender = _codec(version, not server, StompLimits())
    try:
        data = sender.send(frame)
    except LocalProtocolError:
        return
    back = _codec(version, server, StompLimits()).receive_data(data)
    assert len(back) == 1 and isinstance(back[0], Frame), (frame, data, back)
    assert _without_length(back[0]) == _without_length(frame), (frame, data, back[0])


def fuzz_stomp(data: bytes) -> None:
    inp = Input(data, KNOBS)
    version = inp.knob(0, VERSIONS)
    server = inp.knob(1, (True, False))
    limits = inp.knob(2, LIMITS)
    results = {
        name: decode_stream(chunks, version, server, limits)
        for name, chunks in cuts(inp.stream, inp.knobs[3])
    }
    same(results, "STOMP events")
    for event in results["whole"][0]:
        if isinstance(event, Frame):
            round_trip(event, version, server)


def seeds() -> list[bytes]:
    """Valid streams, written by the codec itself, one per version and side."""
    out = []
    for vi, version in enumerate(VERSIONS):
        client = _codec(version, False, StompLimits())
        server = _codec(version, True, StompLimits())
        frames = [
            client.send(Frame("CONNECT", (("accept-version", "1.0,1.1,1.2"), ("host", "/"),
                                          ("login", "admin"), ("passcode", "admin"),
                                          ("heart-beat", "1000,1000")))),
            client.send(Frame("SEND", (("destination", "/queue/a"), ("receipt", "r1"),
                                       ("weird", "a:b\\c" if version in ("1.1", "1.2") else "ab")),
                              b"hello"), content_length=True),
            client.send(Frame("SUBSCRIBE", (("id", "1"), ("destination", "/topic/t"), ("ack", "client")))),
            client.send(Frame("SEND", (("destination", "/queue/b"),), b"bin\0ary")),
            b"\n\r\n",
            client.send(Frame("ACK", (("id", "m-1"),))),
            client.send(Frame("DISCONNECT", (("receipt", "bye"),))),
        ]
        replies = [
            server.send(Frame("CONNECTED", (("version", version or "1.0"), ("heart-beat", "0,0")))),
            server.send(Frame("MESSAGE", (("subscription", "1"), ("message-id", "ID:1"),
                                          ("destination", "/topic/t")), b"payload")),
            server.send(Frame("RECEIPT", (("receipt-id", "r1"),))),
            server.send(Frame("ERROR", (("message", "bad"),), b"detail")),
        ]
        for side, stream in ((0, b"".join(frames)), (1, b"".join(replies))):
            out.append(bytes((vi, side, 0, 7)) + stream)
            out.append(bytes((vi, side, 1, 3)) + stream)
    out.append(bytes((3, 0, 0, 1)) + b"CONNECT\r\nlogin:x\r\n\r\n\0SEND\r\ndestination:q\r\n\r\nx\0\r\n")
    return out
