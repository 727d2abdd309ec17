"""The gateway's side of a STOMP client's opening (junction.protocols.stomp.opening).

What a client sends is written by the project's codec in client mode (as the
broker core tests' clients are) and by hand where the point is the bytes;
everything :class:`StompOpening` writes is read back with a client codec.
Every stream is fed whole and one byte at a time (and Hypothesis cuts it
anywhere): the outcome never depends on how it was cut.  The reader's table
is exercised row by row, and the common interface (``protocols/opening.py``)
is checked for both STOMP and AMQP readers.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import Complete, Failed, Opening, Passthrough
from junction.protocols.stomp import Frame, StompCodec, StompLimits
from junction.protocols.stomp.opening import (
    OPENING_SLACK,
    TRANSITIONS,
    OpeningComplete,
    OpeningFailed,
    OpeningInput,
    OpeningState,
    StompCredentials,
    StompOpening,
)

USERS = {"alice": "s3cret"}

CONNECT = (
    b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:broker.example\nlogin:alice\npasscode:s3cret\n"
    b"client-id:app-1\nreceipt:c-1\n\n\0"
)


class Authenticator:
    """Checks USERS; records every call."""

    def __init__(self):
        self.calls: list[StompCredentials] = []

    def __call__(self, credentials: StompCredentials):
        self.calls.append(credentials)
        if USERS.get(credentials.login) == credentials.passcode:
            return f"user:{credentials.login}"
        return None


def feed(chunks, **kw):
    """(events, what was written, the opening, the authenticator) for ``chunks`` in turn."""
    auth = Authenticator()
    opening = StompOpening(auth, **kw)
    events: list = []
    out = b""
    for chunk in chunks:
        events += opening.receive_data(chunk)
        out += opening.data_to_send()
    return events, out, opening, auth


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def frames(data: bytes) -> list[Frame]:
    return [e for e in StompCodec(server=False).receive_data(data) if isinstance(e, Frame)]


def one(events, cls):
    assert len(events) == 1 and isinstance(events[0], cls), events
    return events[0]


def summary(events):
    """Events without the human-readable parts that may depend on the cut."""
    out = []
    for e in events:
        if isinstance(e, OpeningComplete):
            out.append(("complete", e.client_id, e.login, e.host, e.principal, e.replay))
        elif isinstance(e, OpeningFailed):
            out.append(("failed", e.login_refused, e.user, e.client_id))
        else:
            out.append(("passthrough", e.data))
    return out


# -- a CONNECT -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_connect_completes_with_the_routing_inputs_and_every_byte_to_replay(cut):
    stream = b"\n\r\n" + CONNECT  # heart-beat EOLs first are read past, and replayed
    events, out, opening, auth = feed([stream] if cut == "whole" else bytewise(stream))
    done = one(events, OpeningComplete)
    assert (done.client_id, done.login, done.user, done.host, done.principal) == (
        "app-1", "alice", "alice", "broker.example", "user:alice"
    )
    assert done.replay == stream
    assert out == b""  # nothing is answered: CONNECTED comes from the backend
    assert auth.calls == [StompCredentials("alice", "s3cret")]
    assert opening.state is OpeningState.COMPLETE and opening.buffered == 0


def test_the_stomp_command_is_an_opening_too():
    stream = b"STOMP\naccept-version:1.2\nhost:h\nlogin:alice\npasscode:s3cret\n\n\0"
    done = one(feed([stream])[0], OpeningComplete)
    assert done.client_id is None and done.login == "alice" and done.replay == stream


def test_bytes_behind_the_connect_in_its_read_are_replayed_later_ones_pass_through():
    behind = b"SEND\ndestination:/queue/a\n\nhello\0GARB"
    events, _out, opening, _auth = feed([CONNECT + behind, b"more"])
    done, later = events
    assert isinstance(done, OpeningComplete) and done.replay == CONNECT + behind
    assert later == Passthrough(b"more")
    assert opening.receive_data(b"") == []


def test_a_connect_followed_by_malformed_bytes_in_the_same_read_still_completes():
    done = one(feed([CONNECT + b"\x00\x00bad frame\n\n"])[0], OpeningComplete)
    assert done.replay.startswith(CONNECT)


def test_no_security_login_is_what_authenticate_returns():
    opening = StompOpening(lambda credentials: ("anonymous", credentials))
    done = one(opening.receive_data(b"CONNECT\n\n\0"), OpeningComplete)
    assert done.principal == ("anonymous", StompCredentials(None, None)) and done.login is None


def test_credentials_never_show_the_passcode():
    assert "s3cret" not in repr(StompCredentials("alice", "s3cret"))
    done = one(feed([CONNECT])[0], OpeningComplete)
    assert "s3cret" not in repr(done).replace(repr(done.replay), "")


# -- refusals at the opening -------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_a_bad_login_gets_the_brokers_security_error(cut):
    stream = CONNECT.replace(b"s3cret", b"wrong")
    events, out, opening, _auth = feed([stream] if cut == "whole" else bytewise(stream))
    failed = one(events, OpeningFailed)
    assert failed.login_refused and failed.user == "alice" and failed.client_id == "app-1"
    assert failed.condition is None
    assert failed.reason == "Security Error occurred: User name [alice] or password is invalid"
    assert frames(out) == [
        Frame(
            "ERROR",
            (("message", "Security Error occurred: User name [alice] or password is invalid"),
             ("receipt-id", "c-1"), ("content-type", "text/plain")),
            b"Authentication failed: check login and passcode",
        )
    ]
    assert opening.state is OpeningState.FAILED and opening.failure is failed
    assert opening.receive_data(b"CONNECT\n\n\0") == [] and opening.data_to_send() == b""


@pytest.mark.parametrize("cut", ["whole", "bytewise"])
def test_a_first_frame_other_than_connect_is_refused(cut):
    stream = b"\nSEND\ndestination:/queue/a\nreceipt:s-1\n\nx\0"
    events, out, opening, auth = feed([stream] if cut == "whole" else bytewise(stream))
    failed = one(events, OpeningFailed)
    assert not failed.login_refused and failed.user is None
    text = "SEND before CONNECT: the first frame must be CONNECT or STOMP"
    assert failed.reason == text
    assert frames(out) == [
        Frame("ERROR", (("message", text), ("receipt-id", "s-1"), ("content-type", "text/plain")), text.encode())
    ]
    assert auth.calls == [] and opening.state is OpeningState.FAILED


def test_a_servers_frame_first_is_refused():
    failed = one(feed([b"CONNECTED\n\n\0"])[0], OpeningFailed)
    assert failed.reason == "CONNECTED before CONNECT: the first frame must be CONNECT or STOMP"


def test_malformed_bytes_are_refused_with_the_codecs_reason():
    events, out, _opening, _auth = feed([b"CONNECT\nlogin\n\n\0"])
    failed = one(events, OpeningFailed)
    assert failed.reason.startswith("malformed frame: ") and "no colon" in failed.reason
    (error,) = frames(out)
    assert error.get("message") == failed.reason and error.get("receipt-id") is None


def test_a_frame_beyond_the_codecs_limit_is_malformed():
    limits = StompLimits(max_frame_size=200)
    events, out, opening, _auth = feed([b"CONNECT\nlogin:" + b"a" * 300], limits=limits)
    assert one(events, OpeningFailed).reason.startswith("malformed frame: ")
    assert opening.buffered == 0


def test_more_than_max_bytes_before_the_connect_is_complete_is_refused_however_cut():
    limit = 200
    stream = b"\n" * 150 + CONNECT
    assert len(CONNECT) < limit < len(stream)
    text = f"more than {limit} bytes before the CONNECT frame was complete"
    for chunks in ([stream], bytewise(stream), [stream[:199], stream[199:]]):
        events, out, opening, _auth = feed(chunks, max_bytes=limit)
        assert one(events, OpeningFailed).reason == text
        assert frames(out)[0].get("message") == text
        assert opening.buffered == 0
    # A CONNECT that ends exactly at the limit fits, whatever follows it in the read.
    exact = b"\n" * (limit - len(CONNECT)) + CONNECT
    for chunks in ([exact + b"SEND\n\n\0"], bytewise(exact)):
        one(feed(chunks, max_bytes=limit)[0][:1], OpeningComplete)


def test_a_receipt_the_codec_cannot_write_back_gets_a_plain_error():
    # CR LF line ends: "c-1\r" + CR LF leaves a value ending in CR, which an
    # unescaped frame cannot carry.
    stream = b"CONNECT\r\nlogin:alice\r\npasscode:wrong\r\nreceipt:c-1\r\r\n\r\n\0"
    events, out, _opening, _auth = feed([stream])
    assert one(events, OpeningFailed).login_refused
    assert frames(out) == [
        Frame("ERROR", (("message", "connection refused"),), b"Authentication failed: check login and passcode")
    ]


# -- answers once the router has decided -------------------------------------------------------------


def completed() -> StompOpening:
    opening = StompOpening(Authenticator())
    one(opening.receive_data(CONNECT), OpeningComplete)
    return opening


@pytest.mark.parametrize(
    ("status", "text"),
    [
        ("REFUSED_UNAVAILABLE", "Connection router r1 is not ready"),
        ("REFUSED_USE_ANOTHER", "Connection router r1 rejected this connection"),
    ],
)
def test_refusals_are_artemis_texts_with_the_connects_receipt(status, text):
    opening = completed()
    assert frames(opening.refuse("r1", status)) == [
        Frame("ERROR", (("message", text), ("receipt-id", "c-1"), ("content-type", "text/plain")), text.encode())
    ]
    assert opening.state is OpeningState.ANSWERED
    with pytest.raises(LocalProtocolError):
        opening.refuse("r1", status)  # only once


def test_a_refusal_with_details_has_them_as_body():
    (error,) = frames(completed().refuse("r1", "REFUSED_USE_ANOTHER", detail="no local broker core"))
    assert error.body == b"no local broker core"


def test_refuse_knows_only_the_refusing_statuses():
    with pytest.raises(ValueError):
        completed().refuse("r1", "OK")


def test_close_with_writes_the_description():
    text = "Connection router r1 could not connect to target t (h:1): refused"
    (error,) = frames(completed().close_with("amqp:connection:forced", text, {"x": 1}))
    assert error == Frame(
        "ERROR", (("message", text), ("receipt-id", "c-1"), ("content-type", "text/plain")), text.encode()
    )


def test_timed_out_and_too_large_before_the_connect():
    opening = StompOpening(Authenticator())
    assert opening.receive_data(b"CONNECT\nlogin:al") == []
    (error,) = frames(opening.timed_out(10))
    assert error.get("message") == "no CONNECT frame within 10 s" and error.get("receipt-id") is None
    assert opening.state is OpeningState.ANSWERED and opening.buffered == 0
    (error,) = frames(StompOpening(Authenticator()).too_large(4096))
    assert error.get("message") == "more than 4096 bytes before the CONNECT frame was complete"


def test_timed_out_after_the_connect_says_nothing():
    opening = completed()
    assert opening.timed_out(0.5) == b"" and opening.state is OpeningState.COMPLETE


def test_stomp_has_no_redirect():
    opening = completed()
    assert not opening.redirects
    with pytest.raises(LocalProtocolError):
        opening.redirect("r1", "h", 1)


def test_no_answer_after_a_failure():
    opening = StompOpening(Authenticator())
    one(opening.receive_data(b"SEND\n\n\0"), OpeningFailed)
    for answer in (lambda: opening.refuse("r", "REFUSED_UNAVAILABLE"), lambda: opening.close_with(None, "x"),
                   lambda: opening.too_large(1), lambda: opening.timed_out(1)):
        with pytest.raises(LocalProtocolError):
            answer()


def test_limits_are_checked():
    with pytest.raises(ValueError):
        StompOpening(Authenticator(), max_bytes=0)
    assert StompOpening(Authenticator()).max_bytes == StompLimits().max_frame_size + OPENING_SLACK
    assert StompOpening(Authenticator(), limits=StompLimits(max_frame_size=1000)).max_bytes == 1000 + OPENING_SLACK


# -- the table, row by row ---------------------------------------------------------------------------


def _await():
    return StompOpening(Authenticator())


def _answered():
    opening = _await()
    opening.close_with(None, "bye")
    return opening


def _failed():
    opening = _await()
    opening.receive_data(b"SEND\n\n\0")
    return opening


#: (state, input) -> (how to get there and apply it, the state it must end in)
SCENARIOS = {
    (OpeningState.AWAIT_CONNECT, OpeningInput.PARTIAL): (lambda: _await().receive_data(b"\nCONN"), OpeningState.AWAIT_CONNECT),
    (OpeningState.AWAIT_CONNECT, OpeningInput.CONNECT): (lambda: _await().receive_data(CONNECT), OpeningState.COMPLETE),
    (OpeningState.AWAIT_CONNECT, OpeningInput.LOGIN_REFUSED): (
        lambda: _await().receive_data(CONNECT.replace(b"s3cret", b"x")), OpeningState.FAILED
    ),
    (OpeningState.AWAIT_CONNECT, OpeningInput.BAD_FRAME): (lambda: _await().receive_data(b"ACK\n\n\0"), OpeningState.FAILED),
    (OpeningState.AWAIT_CONNECT, OpeningInput.ANSWER): (lambda: _await().timed_out(3), OpeningState.ANSWERED),
    (OpeningState.COMPLETE, OpeningInput.DATA): (lambda: completed().receive_data(b"x"), OpeningState.COMPLETE),
    (OpeningState.COMPLETE, OpeningInput.ANSWER): (
        lambda: completed().refuse("r", "REFUSED_UNAVAILABLE"), OpeningState.ANSWERED
    ),
    (OpeningState.ANSWERED, OpeningInput.DATA): (lambda: _answered().receive_data(CONNECT), OpeningState.ANSWERED),
    (OpeningState.FAILED, OpeningInput.DATA): (lambda: _failed().receive_data(CONNECT), OpeningState.FAILED),
}


def test_scenarios_cover_the_table():
    assert set(SCENARIOS) == set(TRANSITIONS)
    assert {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values()) == set(OpeningState)
    for terminal in (OpeningState.ANSWERED, OpeningState.FAILED):
        assert {i for s, i in TRANSITIONS if s is terminal} == {OpeningInput.DATA}


@pytest.mark.parametrize("row", list(SCENARIOS), ids=lambda r: f"{r[0].name}-{r[1].name}")
def test_each_row(row, monkeypatch):
    run, want = SCENARIOS[row]
    seen = []
    real = StompOpening._transition

    def spy(self, kind):
        seen.append((self.state, kind))
        real(self, kind)

    monkeypatch.setattr(StompOpening, "_transition", spy)
    run()
    assert seen[-1] == row
    assert TRANSITIONS[row] is want


# -- the common interface ----------------------------------------------------------------------------


def test_both_readers_have_the_common_interface():
    from junction.protocols.amqp.opening import AmqpOpening
    from junction.protocols.amqp.opening import OpeningComplete as AmqpComplete
    from junction.protocols.amqp.opening import OpeningFailed as AmqpFailed

    for reader in (StompOpening(Authenticator()), AmqpOpening(lambda c: None)):
        assert isinstance(reader, Opening)
    assert AmqpOpening.redirects and not StompOpening.redirects
    assert issubclass(OpeningComplete, Complete) and issubclass(AmqpComplete, Complete)
    assert issubclass(OpeningFailed, Failed) and issubclass(AmqpFailed, Failed)
    amqp_done = AmqpComplete("c", None, "PLAIN", "p", "u", "pw", b"replay")
    assert (amqp_done.client_id, amqp_done.replay, amqp_done.user) == ("c", b"replay", "u")
    refused = AmqpFailed("bad password", "amqp:unauthorized-access")
    assert refused.login_refused and refused.user is None and refused.client_id is None
    assert not AmqpFailed("bad frame", "amqp:decode-error").login_refused


# -- any cut, any bytes --------------------------------------------------------------------------------


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


STREAM = b"\r\n\n" + CONNECT + b"SEND\ndestination:/queue/a\n\nx\0"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_chunking_never_changes_the_outcome(cuts):
    whole = summary(feed([STREAM])[0])
    got = feed(cut(STREAM, cuts))[0]
    # the reads after the CONNECT's come back as Passthrough: join them to compare
    done, rest = got[0], b"".join(e.data for e in got[1:])
    assert summary([done])[0][:5] == whole[0][:5]
    assert done.replay + rest == STREAM


@st.composite
def hostile(draw):
    """A good stream with bytes flipped, dropped or inserted, or plain noise."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray(STREAM)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        pos = draw(st.integers(min_value=0, max_value=len(data)))
        op = draw(st.sampled_from(["flip", "drop", "insert"]))
        if op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(min_value=0, max_value=255))
        elif op == "drop":
            del data[pos:pos + draw(st.integers(min_value=1, max_value=8))]
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


SMALL = StompLimits(max_frame_size=150, max_header_count=8, max_header_length=60, max_command_length=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_hostile_bytes_only_ever_give_failed_or_complete(data, cuts):
    events, out, opening, _auth = feed(cut(data, cuts), limits=SMALL, max_bytes=200)
    kinds = [type(e) for e in events]
    assert kinds in ([], [OpeningFailed]) or (kinds[0] is OpeningComplete and set(kinds[1:]) <= {Passthrough})
    if opening.state is OpeningState.AWAIT_CONNECT:
        assert opening.buffered <= 200 and out == b""
    if kinds == [OpeningFailed]:
        written = frames(out)
        assert [f.command for f in written] == ["ERROR"]
    whole_events, whole_out, whole_opening, _ = feed([data], limits=SMALL, max_bytes=200)
    assert whole_opening.state is opening.state
    assert [type(e) for e in whole_events][:1] == kinds[:1]
    if kinds[:1] == [OpeningComplete]:
        assert summary(whole_events[:1])[0][:5] == summary(events[:1])[0][:5]
    if kinds == [OpeningFailed]:
        assert whole_events[0].login_refused == events[0].login_refused
        assert [f.get("receipt-id") for f in frames(whole_out)] == [f.get("receipt-id") for f in frames(out)]
