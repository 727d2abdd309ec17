"""STOMP beyond the codec: the gateway's opening reader and the connection's state table.

``stomp-opening`` feeds :meth:`StompOpening.receive_data` (junction/protocols/stomp/opening.py).
Knobs: the limits (the defaults, or small ones the fuzzer can reach), ``max_bytes``
(the default, or 200), whether the login is accepted, and the cutting seed.
Contract (the module's docstring):

* ``receive_data`` never raises;
* until the CONNECT is complete, ``buffered`` never exceeds ``max_bytes``;
* a failure has its ERROR queued, and only that: what was written parses, with a
  client codec, as one ERROR frame; nothing is written otherwise;
* the outcome (complete with the same routing inputs and, joined with what passed
  through after it, the same bytes to replay; or failed the same way, with the same
  ``receipt-id``) does not depend on how the stream was cut into reads.

``stomp-connection`` drives :class:`StompConnection` (junction/protocols/stomp/connection.py)
as a broker core's adapter does, with the codec in front: every frame goes to
``receive``; a CONNECT is negotiated and accepted (or its login refused, by a knob,
or its version refused), and the frames that came behind it in the same read are
read again under the negotiated version (``StompCodec.reread``); a rejection, a bad
heart-beat or malformed bytes end the connection with ``error``.  Knobs: the versions the server speaks, the login
verdict, the limits, the cutting seed.  Contract:

* only :class:`StompError` (a RemoteProtocolError) escapes ``receive`` and ``accept``;
* after an ERROR the state is CLOSED and nothing more is handled or written; after
  DISCONNECT nothing more is handled;
* a command is handled only while CONNECTED (DISCONNECT moves to DISCONNECTING), and
  NACK never in STOMP 1.0;
* every frame the server writes is encoded by the codec of the negotiated version
  (or refused by it with LocalProtocolError: a header the version cannot carry) and
  decodes, with a client codec of that version, to the same frame;
* what happens does not depend on how the stream was cut into reads.
"""

from __future__ import annotations

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.stomp import HeartBeat, StompCodec, StompLimits
from junction.protocols.stomp.builders import login_refused
from junction.protocols.stomp.connection import Action, ConnectionState, StompConnection, StompError
from junction.protocols.stomp.opening import (
    OpeningComplete,
    OpeningFailed,
    OpeningState,
    Passthrough,
    StompOpening,
)
from tests.fuzz.common import Input, cuts, same

#: small enough that the fuzzer meets every limit within a few hundred bytes
SMALL = StompLimits(max_frame_size=300, max_header_count=6, max_header_length=48, max_command_length=12)
LIMITS = (StompLimits(), SMALL)
SERVER_VERSIONS = (("1.0", "1.1", "1.2"), ("1.0",), ("1.1", "1.2"))


def _client_frames(data: bytes, version: str | None = None):
    codec = StompCodec(server=False)
    if version is not None:
        codec.set_version(version)
    return [e for e in codec.receive_data(data) if not isinstance(e, HeartBeat)]


# -- stomp-opening ---------------------------------------------------------------------------------


def _opening_stream(chunks, limits, max_bytes, accept):
    opening = StompOpening(lambda c: ("principal", c.login) if accept else None, limits=limits, max_bytes=max_bytes)
    outcome = None
    passed = b""
    out = b""
    for chunk in chunks:
        events = opening.receive_data(chunk)  # never raises
        written = opening.data_to_send()
        out += written
        if opening.state is OpeningState.AWAIT_CONNECT:
            assert opening.buffered <= opening.max_bytes, (opening.buffered, opening.max_bytes)
            assert not written
        for event in events:
            if isinstance(event, OpeningComplete):
                assert outcome is None
                assert event.principal == ("principal", event.login)
                outcome = ["complete", event.client_id, event.login, event.host, event.replay]
            elif isinstance(event, Passthrough):
                assert outcome is not None and outcome[0] == "complete"
                passed += event.data
            else:
                assert isinstance(event, OpeningFailed) and outcome is None, event
                assert not (event.login_refused and accept), event
                (error,) = _client_frames(out)
                assert error.command == "ERROR", error
                outcome = ["failed", event.login_refused, event.user, event.client_id, error.get("receipt-id")]
    if outcome is not None and outcome[0] == "complete":
        outcome[-1] += passed  # the bytes to replay, however they were handed over
    return outcome, opening.state


def fuzz_opening(data: bytes) -> None:
    inp = Input(data, 4)
    limits = inp.knob(0, LIMITS)
    max_bytes = inp.knob(1, (None, 200))
    accept = inp.knob(2, (True, False))
    results = {
        name: _opening_stream(chunks, limits, max_bytes, accept) for name, chunks in cuts(inp.stream, inp.knobs[3])
    }
    same(results, "STOMP opening outcome")


def seeds_opening() -> list[bytes]:
    streams = [
        b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\npasscode:secret\nclient-id:app-1\nreceipt:r\n\n\0",
        b"\r\n\nSTOMP\r\naccept-version:1.1\r\nlogin:alice\r\n\r\n\0SEND\r\ndestination:q\r\n\r\nx\0",
        b"SEND\ndestination:/queue/a\nreceipt:s\n\nx\0",
        b"CONNECT\ncontent-length:3\n\nabc\0GARBAGE\0",
        b"CONNECT\nlogin\n\n\0",
        b"\n" * 190 + b"CONNECT\n\n\0",
    ]
    return [bytes((i % 2, i % 2, i % 3 == 0, 7)) + s for i, s in enumerate(streams)]


# -- stomp-connection --------------------------------------------------------------------------------


def _written(frame, codec: StompCodec):
    """A written frame, checked to encode and decode back (or to be refused by the codec)."""
    try:
        data = codec.send(frame)
    except LocalProtocolError:
        return (frame.command, "unwritable")
    (back,) = _client_frames(data, codec.version)
    assert back.command == frame.command and back.body == frame.body, (frame, back)
    assert [h for h in back.headers if h[0] != "content-length"] == [
        h for h in frame.headers if h[0] != "content-length"
    ], (frame, back)
    return (frame.command, frame.get("message"))


def _connection_stream(chunks, versions, accept, limits):
    codec = StompCodec(limits, server=True)
    conn = StompConnection(codec, versions=versions)
    log: list = []
    disconnected = False

    def error(message, receipt=None):
        frame = conn.error(message, receipt=receipt)
        if frame is not None:
            log.append(_written(frame, codec))
        assert conn.state is ConnectionState.CLOSED

    for chunk in chunks:
        if conn.state is ConnectionState.CLOSED:
            break
        malformed = None
        try:
            events = codec.receive_data(chunk)
        except RemoteProtocolError as exc:
            events = getattr(exc, "events", None) or []
            malformed = exc
        reread = False
        for event in events:
            before = conn.state
            try:
                if reread and not isinstance(event, HeartBeat):
                    event = codec.reread(event)
                action = conn.receive(event)
                if action is Action.CONNECT:
                    offer = conn.negotiate(event)
                    if offer.version is None:
                        log.append(_written(conn.refuse_version(), codec))
                    elif not accept:
                        error(login_refused(offer.login)[0], offer.receipt)
                    else:
                        accepted = conn.accept("s-1", "Junction/fuzz")
                        log.append(_written(accepted.frame, codec))
                        reread = True  # what came behind the CONNECT was parsed before the version
                elif action is Action.HANDLE:
                    assert before is ConnectionState.CONNECTED and not disconnected, (before, event)
                    assert not (event.command == "NACK" and conn.version == "1.0")
                    assert (conn.state is ConnectionState.DISCONNECTING) == (event.command == "DISCONNECT")
                    disconnected = event.command == "DISCONNECT"
                    log.append(("handled", event.command))
                else:
                    assert action is Action.IGNORE, action
                    assert isinstance(event, HeartBeat) or before in (
                        ConnectionState.DISCONNECTING, ConnectionState.CLOSED
                    ), (before, event)
            except StompError as exc:
                error(str(exc), event.get("receipt") if not isinstance(event, HeartBeat) else None)
            except RemoteProtocolError:  # reread: an escape the version does not define
                error("malformed frame")
        if malformed is not None:
            error("malformed frame")
    return log, conn.state


def fuzz_connection(data: bytes) -> None:
    inp = Input(data, 4)
    versions = inp.knob(0, SERVER_VERSIONS)
    accept = inp.knob(1, (True, False))
    limits = inp.knob(2, LIMITS)
    results = {
        name: _connection_stream(chunks, versions, accept, limits) for name, chunks in cuts(inp.stream, inp.knobs[3])
    }
    same(results, "STOMP connection")


def seeds_connection() -> list[bytes]:
    session = b"".join(
        [
            b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\nlogin:a\npasscode:b\nheart-beat:100,200\n\n\0",
            b"SEND\ndestination:/queue/a\nreceipt:r1\n\nhello\0",
            b"SUBSCRIBE\nid:1\ndestination:/queue/a\nack:client\n\n\0",
            b"\n",
            b"ACK\nid:1\n\n\0NACK\nid:2\n\n\0BEGIN\ntransaction:t\n\n\0COMMIT\ntransaction:t\n\n\0",
            b"FROB\n\n\0",
        ]
    )
    out = [
        bytes((0, 0, 0, 7)) + session,
        bytes((1, 0, 0, 3)) + session,
        bytes((0, 0, 0, 5)) + session.replace(b"FROB\n\n\0", b"DISCONNECT\nreceipt:bye\n\n\0SEND\n\n\0"),
        bytes((0, 1, 0, 1)) + session,
        bytes((2, 0, 1, 2)) + b"CONNECT\naccept-version:1.0\n\n\0",
        bytes((0, 0, 0, 9)) + b"SEND\ndestination:q\n\nx\0CONNECT\n\n\0",
        bytes((0, 0, 1, 4)) + b"STOMP\naccept-version:1.2\nheart-beat:soon\n\n\0",
        bytes((0, 0, 0, 6)) + b"CONNECT\n\n\0CONNECT\n\n\0",
        bytes((1, 0, 0, 8)) + b"CONNECT\nreceipt:c\r\r\n\r\n\0",
    ]
    return out
