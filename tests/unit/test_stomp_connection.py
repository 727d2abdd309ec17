"""The STOMP connection's state table (junction.protocols.stomp.connection).

Every state is reached through the public API and every input applied to it,
in every version; what happens is compared with the rules written out here
independently of :data:`TRANSITIONS` (``expected``), so a wrong row of the
table -- or a row missing, or one too many -- fails a test.  Negotiation
(versions, heart-beats) and the replies (CONNECTED, ERROR) are checked
against the exact headers and texts the broker has always written.
"""

from __future__ import annotations

import pytest

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.stomp import HEARTBEAT, Frame, StompCodec
from junction.protocols.stomp.connection import (
    REJECTIONS,
    TRANSITIONS,
    Accepted,
    Action,
    ConnectionInput,
    ConnectionState,
    HeartBeats,
    StompConnection,
    StompError,
    negotiate_heart_beat,
    negotiate_version,
)

S = ConnectionState
I = ConnectionInput  # noqa: E741 - the table's own shorthand
A = Action

VERSIONS = ("1.0", "1.1", "1.2")
SESSION_COMMANDS = ("SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT")
FRAME_INPUTS = {
    I.CONNECT: "CONNECT",
    I.STOMP: "STOMP",
    **{I[c]: c for c in SESSION_COMMANDS},
    I.DISCONNECT: "DISCONNECT",
    I.OTHER: "FROB",
}
TIMEOUT = 7.5


# -- the rules, written out independently of the table ---------------------------------------------


def expected(state: S, kind: I, version: str):
    """What the rules say: ("move", next, action) | ("reject", text) | ("misuse",)."""
    command = FRAME_INPUTS.get(kind)
    live = state is not S.CLOSED
    if kind is I.ERROR:
        return ("move", S.CLOSED, A.WRITE) if live else ("move", S.CLOSED, A.IGNORE)
    if kind is I.CLOSE:
        return ("move", S.CLOSED, A.CLOSE) if live else ("move", S.CLOSED, A.IGNORE)
    if kind is I.ACCEPT:
        return ("move", S.CONNECTED, A.WRITE) if state is S.CONNECTING else ("misuse",)
    if state is S.CLOSED:
        return ("move", S.CLOSED, A.IGNORE)
    if state is S.AWAIT_CONNECT:
        if kind in (I.CONNECT, I.STOMP):
            return ("move", S.CONNECTING, A.CONNECT)
        if kind is I.HEARTBEAT:
            return ("move", state, A.IGNORE)
        if kind is I.CONNECT_TIMEOUT:
            return ("reject", f"no CONNECT frame within {TIMEOUT:g} s")
        return ("reject", f"{command} before CONNECT: the first frame must be CONNECT or STOMP")
    if state is S.CONNECTING:
        if kind is I.CONNECT_TIMEOUT:
            return ("move", state, A.IGNORE)
        return ("misuse",)  # the adapter decides about the CONNECT before it reads on
    if state is S.CONNECTED:
        if kind in (I.HEARTBEAT, I.CONNECT_TIMEOUT):
            return ("move", state, A.IGNORE)
        if kind in (I.CONNECT, I.STOMP):
            return ("reject", "already connected: CONNECT may only be sent once")
        if kind is I.OTHER:
            return ("reject", f"Unknown STOMP command {command}")
        if kind is I.DISCONNECT:
            return ("move", S.DISCONNECTING, A.HANDLE)
        if command == "NACK" and version == "1.0":
            return ("reject", "NACK is not part of STOMP 1.0")
        return ("move", state, A.HANDLE)
    assert state is S.DISCONNECTING
    return ("move", state, A.IGNORE)


# -- reaching states and applying inputs ---------------------------------------------------------------

CONNECT = Frame("CONNECT", (("accept-version", "1.0,1.1,1.2"), ("host", "/"), ("heart-beat", "100,200")))


def connect_frame(version: str) -> Frame:
    return Frame("CONNECT", (("accept-version", version), ("host", "/"), ("login", "u"), ("passcode", "p")))


def reach(state: S, version: str = "1.2") -> StompConnection:
    conn = StompConnection()
    if state is S.AWAIT_CONNECT:
        return conn
    frame = connect_frame(version)
    assert conn.receive(frame) is A.CONNECT
    conn.negotiate(frame)
    if state is S.CONNECTING:
        pass
    elif state is S.CONNECTED:
        conn.accept("s-1", "Junction/test")
    elif state is S.DISCONNECTING:
        conn.accept("s-1", "Junction/test")
        assert conn.receive(Frame("DISCONNECT")) is A.HANDLE
    elif state is S.CLOSED:
        conn.error("bye")
    assert conn.state is state
    return conn


def apply(conn: StompConnection, kind: I):
    """Apply ``kind`` through the method that stands for it; (action, written frame or None)."""
    if kind in FRAME_INPUTS:
        return conn.receive(Frame(FRAME_INPUTS[kind])), None
    if kind is I.HEARTBEAT:
        return conn.receive(HEARTBEAT), None
    if kind is I.CONNECT_TIMEOUT:
        return conn.timeout(TIMEOUT), None
    if kind is I.ACCEPT:
        accepted = conn.accept("s-1", "Junction/test")
        return A.WRITE, accepted.frame
    if kind is I.ERROR:
        frame = conn.error("boom")
        return (A.WRITE if frame is not None else A.IGNORE), frame
    assert kind is I.CLOSE
    return conn.close(), None


CASES = [(state, kind, version) for state in S for kind in I for version in VERSIONS]


@pytest.mark.parametrize(
    ("state", "kind", "version"), CASES, ids=[f"{s.name}-{k.name}-{v}" for s, k, v in CASES]
)
def test_every_state_and_input(state, kind, version):
    conn = reach(state, version)
    want = expected(state, kind, version)
    if want[0] == "misuse":
        with pytest.raises(LocalProtocolError):
            apply(conn, kind)
        assert conn.state is state
        return
    if want[0] == "reject":
        with pytest.raises(StompError) as info:
            apply(conn, kind)
        assert str(info.value) == want[1]
        assert isinstance(info.value, RemoteProtocolError)
        assert conn.state is state  # the ERROR the adapter writes next closes it
        error = conn.error(str(info.value))
        assert error is not None and error.get("message") == want[1]
        assert conn.state is S.CLOSED
        return
    _, nxt, action = want
    got, written = apply(conn, kind)
    assert (conn.state, got) == (nxt, action)
    if kind is I.ERROR:
        assert (written is not None) == (action is A.WRITE)
    if kind is I.ACCEPT:
        assert written.command == "CONNECTED"


def test_the_table_has_no_row_the_rules_do_not_know():
    # Rows for inputs the rules call a misuse would make a bug pass silently.
    for (state, kind), _row in TRANSITIONS.items():
        assert expected(state, kind, "1.2")[0] != "misuse", (state, kind)
    # Rejections keep the state; only ERROR and CLOSE reach CLOSED.
    for (state, kind), (nxt, action) in TRANSITIONS.items():
        if action in REJECTIONS:
            assert nxt is state, (state, kind)
        if nxt is S.CLOSED and state is not S.CLOSED:
            assert kind in (I.ERROR, I.CLOSE), (state, kind)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("state", list(S))
def test_commands_handled_in_place(state, version):
    conn = reach(state, version)
    want = {
        FRAME_INPUTS[kind]
        for kind in FRAME_INPUTS
        if expected(state, kind, version) == ("move", state, A.HANDLE)
    }
    assert conn.handled_in_place() == want
    if state is S.CONNECTED:
        assert ("NACK" in want) == (version != "1.0") and "DISCONNECT" not in want


def test_every_frame_command_of_the_client_is_an_input():
    from junction.protocols.stomp import CLIENT_COMMANDS

    assert {c for c in FRAME_INPUTS.values() if c != "FROB"} == set(CLIENT_COMMANDS)
    # A server's command, sent by a client, is just another unknown command.
    conn = reach(S.CONNECTED)
    with pytest.raises(StompError, match="Unknown STOMP command MESSAGE"):
        conn.receive(Frame("MESSAGE"))


# -- negotiation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (None, "1.0"),
        ("", "1.0"),
        ("1.0", "1.0"),
        ("1.1", "1.1"),
        ("1.0,1.1,1.2", "1.2"),
        ("1.2, 1.1", "1.2"),
        (" 1.1 ,2.0", "1.1"),
        ("2.0", None),
        ("1.3,0.9", None),
    ],
)
def test_version_negotiation(offered, chosen):
    assert negotiate_version(offered) == chosen


def test_versions_the_server_speaks_limit_the_choice():
    assert negotiate_version("1.0,1.1,1.2", ("1.0", "1.1")) == "1.1"
    with pytest.raises(ValueError):
        StompConnection(versions=("1.3",))
    with pytest.raises(ValueError):
        StompConnection(versions=())


@pytest.mark.parametrize(
    ("value", "beats"),
    [(None, (0, 0)), ("", (0, 0)), ("0,0", (0, 0)), ("100,200", (200, 100)), (" 5 , 0 ", (0, 5))],
)
def test_heart_beat_negotiation(value, beats):
    got = negotiate_heart_beat(value)
    assert (got.send_ms, got.recv_ms) == beats
    assert got.header == f"{beats[0]},{beats[1]}"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("soon", "heart-beat header must be two integers 'cx,cy', not 'soon'"),
        ("1,2,3", "heart-beat header must be two integers 'cx,cy', not '1,2,3'"),
        ("-1,5", "heart-beat values must not be negative: '-1,5'"),
    ],
)
def test_bad_heart_beat(value, text):
    with pytest.raises(StompError) as info:
        negotiate_heart_beat(value)
    assert str(info.value) == text


def test_negotiate_reads_the_connect():
    conn = StompConnection()
    frame = Frame(
        "STOMP",
        (("accept-version", "1.1"), ("login", "alice"), ("passcode", "s3cret"), ("client-id", "app"),
         ("host", "vh"), ("receipt", "r1"), ("heart-beat", "1,2")),
    )
    assert conn.receive(frame) is A.CONNECT
    offer = conn.negotiate(frame)
    assert (offer.version, offer.login, offer.passcode, offer.client_id, offer.host, offer.receipt,
            offer.heart_beat) == ("1.1", "alice", "s3cret", "app", "vh", "r1", "1,2")
    assert "s3cret" not in repr(offer) and "***" in repr(offer)
    with pytest.raises(LocalProtocolError):
        StompConnection().negotiate(frame)  # no CONNECT received yet


@pytest.mark.parametrize("version", VERSIONS)
def test_accept_gives_connected_and_sets_the_codec_version(version):
    codec = StompCodec()
    conn = StompConnection(codec)
    frame = Frame("CONNECT", (("accept-version", version), ("heart-beat", "100,200")))
    conn.receive(frame)
    conn.negotiate(frame)
    assert codec.version is None
    accepted = conn.accept("node-1", "Junction/9", [("junction-active", "true")])
    assert isinstance(accepted, Accepted)
    assert codec.version == version and conn.version == version
    headers = [("version", version), ("session", "node-1"), ("server", "Junction/9"), ("junction-active", "true")]
    if version == "1.0":
        assert accepted.heart_beats is None  # 1.0 has no heart-beating
    else:
        assert accepted.heart_beats == HeartBeats(send_ms=200, recv_ms=100)
        headers.append(("heart-beat", "200,100"))
    assert accepted.frame == Frame("CONNECTED", tuple(headers))
    assert conn.state is S.CONNECTED


def test_accept_refuses_a_bad_heart_beat_after_setting_the_version():
    codec = StompCodec()
    conn = StompConnection(codec)
    frame = Frame("CONNECT", (("accept-version", "1.2"), ("heart-beat", "soon")))
    conn.receive(frame)
    conn.negotiate(frame)
    with pytest.raises(StompError, match="heart-beat"):
        conn.accept("s", "srv")
    assert conn.state is S.CONNECTING and codec.version == "1.2"
    assert conn.error("heart-beat header ...") is not None and conn.state is S.CLOSED


def test_a_10_connect_ignores_the_heart_beat_header():
    conn = StompConnection()
    frame = Frame("CONNECT", (("heart-beat", "soon"),))
    conn.receive(frame)
    conn.negotiate(frame)
    assert conn.accept("s", "srv").heart_beats is None


def test_accept_needs_a_negotiated_version():
    conn = StompConnection()
    frame = Frame("CONNECT", (("accept-version", "2.0"),))
    conn.receive(frame)
    with pytest.raises(LocalProtocolError):
        conn.accept("s", "srv")  # not negotiated
    assert conn.negotiate(frame).version is None
    with pytest.raises(LocalProtocolError):
        conn.accept("s", "srv")  # nothing in common
    assert conn.refuse_version() == Frame(
        "ERROR",
        (("version", "1.0,1.1,1.2"), ("content-type", "text/plain"),
         ("message", "Supported protocol versions are 1.0,1.1,1.2")),
        b"Supported protocol versions are 1.0,1.1,1.2\n",
    )
    assert conn.state is S.CLOSED
    assert conn.refuse_version() is None  # closed: nothing more is written


def test_the_passcode_is_not_kept():
    conn = StompConnection()
    frame = connect_frame("1.2")
    conn.receive(frame)
    conn.negotiate(frame)
    conn.accept("s", "srv")
    assert conn._offer is None


# -- the ERROR -------------------------------------------------------------------------------------


def test_error_frame_is_the_brokers():
    conn = StompConnection()
    assert conn.error("bad\nthing", detail="the details", receipt="r-9") == Frame(
        "ERROR",
        (("message", "bad thing"), ("receipt-id", "r-9"), ("content-type", "text/plain")),
        b"the details",
    )
    assert conn.error("again") is None  # closed: nothing more


def test_error_message_header_is_cut_the_body_is_whole():
    conn = StompConnection()
    text = "x" * 1500
    frame = conn.error(text)
    assert frame.get("message") == "x" * 1000 and frame.body == text.encode()
    assert frame.get("receipt-id") is None


def test_a_connect_timeout_after_the_connect_is_ignored():
    conn = reach(S.CONNECTED)
    assert conn.timeout(10) is A.IGNORE and conn.state is S.CONNECTED


# -- reread: frames parsed before the version was set (what came behind the CONNECT) ---------------


def _codec(version: str) -> StompCodec:
    c = StompCodec()
    c.set_version(version)
    return c


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_reread_gives_what_parsing_under_the_version_gives(version):
    wire = b"SEND\ndestination:/queue/a\nk\\cey:a\\cb\\\\\nn:plain\n\nbody\0"
    before = StompCodec().receive_data(wire)[0]  # pre-CONNECT: nothing unescaped
    after = _codec(version)
    assert after.reread(before) == _codec(version).receive_data(wire)[0]
    if version == "1.0":
        assert after.reread(before) is before


def test_reread_leaves_connect_and_plain_frames_alone():
    c = _codec("1.2")
    connect = Frame("CONNECT", (("login", "a\\cb"),))
    plain = Frame("SEND", (("a", "b"),), b"x")
    assert c.reread(connect) is connect and c.reread(plain) is plain
    assert StompCodec().reread(Frame("SEND", (("a", "b\\c"),))) == Frame("SEND", (("a", "b\\c"),))


@pytest.mark.parametrize(("version", "value"), [("1.1", "a\\rb"), ("1.2", "a\\tb"), ("1.2", "trailing\\")])
def test_reread_refuses_what_the_version_does_not_define(version, value):
    frame = Frame("SEND", (("k", value),))
    with pytest.raises(RemoteProtocolError) as reread:
        _codec(version).reread(frame)
    with pytest.raises(RemoteProtocolError) as parsed:
        _codec(version).receive_data(b"SEND\nk:" + value.encode() + b"\n\n\0")
    assert str(reread.value) == str(parsed.value)
