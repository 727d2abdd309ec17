"""OpenWire: the codec, the connection's table behind it, and the gateway's opening reader.

``openwire`` feeds :meth:`OpenWireCodec.receive_data`; knobs: our offer
(loose or tight, the marshalling cache off or on: the real client's
WireFormatInfo at the start of a stream settles on it), the limits (the
defaults, or a ``max_frame_size`` the fuzzer can reach) and the cutting seed.
Contract (the codec's docstring):

* only :class:`OpenWireProtocolError` escapes ``receive_data``; after one,
  the codec raises the same error again, with no events, and still writes
  the answer (an ExceptionResponse or ConnectionError) that reads back;
* :attr:`OpenWireCodec.buffered` never exceeds ``max_frame_size + 4``, nor
  holds a complete frame;
* the events, and whether the stream is refused and with which error, do
  not depend on how it was cut into reads;
* every command read is written back (cache off, in the settled encoding)
  into bytes that read back to the same bytes.

``openwire-connection`` runs each command through :class:`OpenWireConnection`
too: only :class:`OpenWireProtocolError` escapes ``receive`` (a rejection),
and every answer it gives (a Response, an error reply, an echo) encodes.

``openwire-opening`` feeds :meth:`OpenWireOpening.receive_data`; knobs: the
login accepted or not, ``max_bytes`` (the default or 300), the last word, and
the cutting seed.  It never raises; ``buffered`` stays within ``max_bytes``;
what it writes reads back with a client codec; the outcome does not depend
on the cut; a complete opening's replay is the stream up to the ConnectionInfo
(and what passed through after it) byte for byte.
"""

from __future__ import annotations

from dataclasses import replace

from junction.protocols.opening import Passthrough
from junction.protocols.openwire.codec import (
    Negotiated,
    OpenWireCodec,
    OpenWireLimits,
    decode_frame,
    encode_frame,
)
from junction.protocols.openwire.connection import Action, OpenWireConnection
from junction.protocols.openwire.errors import OpenWireProtocolError
from junction.protocols.openwire.opening import (
    OpeningComplete,
    OpeningFailed,
    OpenWireOpening,
    first_frame_size,
)
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT, WireFormat, WireFormatInfo
from tests.fuzz.common import Input, cuts, same
from tests.unit.openwire_frames import REAL_FRAMES

#: our offers, in the order of the real frames' modes
MODES = ("loose-nocache", "tight-nocache", "loose-cache", "tight-cache")
OFFERS = tuple(WireFormat(tight_encoding=m.startswith("tight"), cache_enabled=m.endswith("-cache"), cache_size=0)
               for m in MODES)
#: small enough that the fuzzer meets the frame limit within a few hundred bytes
SMALL = OpenWireLimits(max_frame_size=300)
LIMITS = (OpenWireLimits(), SMALL)
KNOBS = 3


def decode_stream(chunks, offer: WireFormat, limits: OpenWireLimits, connection: bool):
    """(events, refusal) for ``chunks`` fed in turn; checks the bounds and the dead codec."""
    codec = OpenWireCodec(offer, limits)
    conn = OpenWireConnection() if connection else None
    events: list = []
    for chunk in chunks:
        try:
            got = codec.receive_data(chunk)
        except OpenWireProtocolError as exc:
            events += exc.events
            assert codec.buffered == 0
            try:
                codec.receive_data(b"\x00")
            except OpenWireProtocolError as again:
                assert again is exc and again.events == []
            else:
                raise AssertionError("a dead codec accepted more bytes") from None
            if codec.wire_format is not None:
                answer = OpenWireConnection().error_reply(exc)
                assert decode_frame(codec.send(answer), _plain(codec.wire_format)) == answer
            if conn is not None:
                _drive(conn, codec, exc.events)
            return events, (type(exc).__name__, str(exc))
        events += got
        if conn is not None:
            _drive(conn, codec, got)
        held = codec._frames.held()
        assert len(held) <= limits.max_frame_size + 4, (len(held), limits)
        if len(held) >= 4:
            assert len(held) < 4 + int.from_bytes(held[:4], "big"), "a complete frame was left held"
    return events, None


def _plain(fmt: WireFormat) -> WireFormat:
    """``fmt`` without the cache (for reading one frame alone)."""
    return WireFormat(tight_encoding=fmt.tight_encoding, stack_trace=fmt.stack_trace)


def _drive(conn: OpenWireConnection, codec: OpenWireCodec, events) -> None:
    for event in events:
        try:
            step = conn.receive(event)
        except OpenWireProtocolError as exc:
            codec.send(conn.error_reply(exc))
            continue
        if step.action is Action.ECHO:
            codec.send(conn.keep_alive_echo())
        answer = conn.response(event)
        if answer is not None and codec.wire_format is not None:
            codec.send(answer)


def round_trip(command, fmt: WireFormat) -> None:
    plain = _plain(fmt)
    data = encode_frame(command, plain)
    assert encode_frame(decode_frame(data, plain), plain) == data, command


def _fuzz(data: bytes, connection: bool) -> None:
    inp = Input(data, KNOBS)
    offer = inp.knob(0, OFFERS)
    limits = inp.knob(1, LIMITS)
    results = {name: decode_stream(chunks, offer, limits, connection)
               for name, chunks in cuts(inp.stream, inp.knobs[2])}
    same(results, "OpenWire events")
    events = results["whole"][0]
    settled = next((e.settled for e in events if isinstance(e, Negotiated)), None)
    for event in events:
        if not isinstance(event, Negotiated):
            round_trip(event, settled or WireFormat(tight_encoding=False, stack_trace=False))


def fuzz_codec(data: bytes) -> None:
    _fuzz(data, connection=False)


def fuzz_connection(data: bytes) -> None:
    _fuzz(data, connection=True)


# -- the opening ---------------------------------------------------------------------------------

MAX_BYTES = (None, 300)
LAST_WORDS = ("refuse", "redirect", "close_with", "timed_out", "too_large")
OPENING_KNOBS = 4


def _open(chunks, accept: bool, max_bytes, last: str):
    kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
    opening = OpenWireOpening(lambda c: "p" if accept else None, **kwargs)
    events: list = []
    written = bytearray()
    for chunk in chunks:
        events += opening.receive_data(chunk)
        written += opening.data_to_send()
        if opening.state.name == "AWAIT_CONNECTION":
            assert opening.buffered <= opening.max_bytes
    if not any(isinstance(e, OpeningFailed) for e in events):
        if last == "refuse":
            written += opening.refuse("r", "REFUSED_UNAVAILABLE")
        elif last == "redirect":
            written += opening.redirect("r", "127.0.0.1", 61617)
        elif last == "close_with":
            written += opening.close_with("java.io.IOException", "bye")
        elif last == "timed_out":
            written += opening.timed_out(10)
        else:
            written += opening.too_large(300)
    # What the gateway wrote is well-formed for the client (which offered what the stream's
    # WireFormatInfo offered: the settled format, when there is one).
    if written:
        settled = opening._codec.wire_format
        assert settled is not None, "the gateway wrote before the wire format was settled"
        client = OpenWireCodec(settled)
        [negotiated, *answers] = client.receive_data(bytes(written))
        # the frame size aside: the gateway advertises its backend's, not its own read limit
        assert isinstance(negotiated, Negotiated)
        assert replace(negotiated.settled, max_frame_size=0) == replace(settled, max_frame_size=0)
    outcome = []
    passed = b""
    for e in events:
        if isinstance(e, OpeningComplete):
            outcome.append(("complete", e.client_id, e.username, e.fault_tolerant))
            passed = e.replay
        elif isinstance(e, Passthrough):
            passed += e.data
        elif isinstance(e, OpeningFailed):
            outcome.append(("failed", e.condition, e.login_refused))
    return outcome, passed


def fuzz_opening(data: bytes) -> None:
    inp = Input(data, OPENING_KNOBS)
    accept = inp.knob(0, (True, False))
    max_bytes = inp.knob(1, MAX_BYTES)
    last = inp.knob(2, LAST_WORDS)
    results = {name: _open(chunks, accept, max_bytes, last) for name, chunks in cuts(inp.stream, inp.knobs[3])}
    same(results, "OpenWire opening outcome")
    outcome, passed = results["whole"]
    if outcome and outcome[0][0] == "complete":
        # the client's WireFormatInfo is replayed as the client settled it, the rest as sent
        head = first_frame_size(passed)
        assert passed[head:] == inp.stream[first_frame_size(inp.stream):], "the replay is not the stream"
        assert isinstance(decode_frame(passed[:head]), WireFormatInfo), "the replay does not start with an offer"


# -- seeds -------------------------------------------------------------------------------------------


def _stream(mode: str) -> bytes:
    wfi = next(bytes.fromhex(h) for m, n, h in REAL_FRAMES if n == "WFI")
    return wfi + b"".join(bytes.fromhex(h) for m, n, h in REAL_FRAMES if m == mode and n != "WFI")


def seeds() -> list[bytes]:
    """The real 5.17.2 client's frames, each mode with the offer that settles on it."""
    out = [bytes((i, 0, 7)) + _stream(mode) for i, mode in enumerate(MODES)]
    out.append(bytes((1, 1, 3)) + _stream("tight-nocache"))
    out.append(bytes((0, 0, 1)) + OpenWireCodec(SERVER_WIRE_FORMAT).initiate())
    return out


def seeds_opening() -> list[bytes]:
    wfi = next(bytes.fromhex(h) for m, n, h in REAL_FRAMES if n == "WFI")
    info = next(bytes.fromhex(h) for m, n, h in REAL_FRAMES if (m, n) == ("tight-nocache", "ConnectionInfo"))
    session = next(bytes.fromhex(h) for m, n, h in REAL_FRAMES if (m, n) == ("tight-nocache", "SessionInfo"))
    return [bytes((a, 0, w, 5)) + wfi + info + session for a in (0, 1) for w in range(len(LAST_WORDS))] + [
        bytes((0, 1, 0, 3)) + wfi + session,
    ]


seeds_connection = seeds
