"""Tests for the sans-IO AMQP 1.0 SASL server (junction.protocols.amqp.sasl).

The real proton client engine drives the conversations that matter (PLAIN,
ANONYMOUS, EXTERNAL, bad password, no SASL at all), and proton's own codec
(``proton.Data``) encodes the hand-made frames and decodes ours, so a bug
shared by our encoder and decoder cannot hide.  Hypothesis checks that
chunking never changes the events and that hostile bytes only ever produce
RemoteProtocolError.
"""

from __future__ import annotations

import logging

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import SASL, Data, Described, Endpoint, symbol, ulong

from junction.protocols.amqp.sasl import (
    AMQP_HEADER,
    MAX_SASL_FRAME_SIZE,
    SASL_HEADER,
    TLS_HEADER,
    TRANSITIONS,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslCode,
    SaslCredentials,
    SaslFailed,
    SaslInput,
    SaslRequired,
    SaslServer,
    SaslState,
)
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

USERS = {"u": "p", "alice": "s3cret"}
BAD_USER_U = "PLAIN authentication failed for user 'u'"


class Authenticator:
    """Records every call; PLAIN checks USERS, ANONYMOUS and EXTERNAL always pass."""

    def __init__(self, result=None, exc=None):
        self.calls: list[SaslCredentials] = []
        self.result = result
        self.exc = exc

    def __call__(self, creds: SaslCredentials):
        self.calls.append(creds)
        if self.exc is not None:
            raise self.exc
        if self.result is not None:
            return self.result
        if creds.mechanism == "PLAIN":
            if USERS.get(creds.username) == creds.password:
                return f"user:{creds.username}"
            return None
        return f"{creds.mechanism.lower()}:guest"


def server(mechanisms=("PLAIN", "ANONYMOUS"), auth=None, **kwargs):
    auth = auth if auth is not None else Authenticator()
    return SaslServer(mechanisms, auth, **kwargs), auth


# -- wire helpers (proton's codec, not ours) -------------------------------------


def encode(value) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def decode(body: bytes):
    data = Data()
    data.decode(body)
    data.rewind()
    data.next()
    return data.get_object()


def frame(body: bytes, doff: int = 2, ftype: int = 1, channel: int = 0) -> bytes:
    ext = b"\xee" * (doff * 4 - 8)
    size = 8 + len(ext) + len(body)
    return size.to_bytes(4, "big") + bytes((doff, ftype)) + channel.to_bytes(2, "big") + ext + body


def init_body(mechanism="PLAIN", response=b"\0u\0p", hostname=None, descriptor=None) -> bytes:
    fields = [symbol(mechanism), response, hostname]
    return encode(Described(descriptor if descriptor is not None else ulong(0x41), fields))


def init_frame(*args, **kwargs) -> bytes:
    return frame(init_body(*args, **kwargs))


def split_frames(data: bytes) -> list[tuple[int, object]]:
    """Our output after the SASL header, as (frame type, decoded body) pairs."""
    frames = []
    while data:
        size = int.from_bytes(data[:4], "big")
        frames.append((data[5], decode(data[data[4] * 4 : size])))
        data = data[size:]
    return frames


def outcome_code(out: bytes) -> int:
    ((ftype, body),) = split_frames(out)
    assert ftype == 1
    assert body.descriptor == 0x44
    return int(body.value[0])


# An AMQP open frame, as a client would pipeline it after the AMQP header.
OPEN = frame(encode(Described(ulong(0x10), [symbol("c1")])), ftype=0)


# -- the proton client ---------------------------------------------------------


def proton_client(mechs: str | None, user="u", password="p"):
    transport = proton.Transport()  # client mode
    if mechs is not None:
        sasl = transport.sasl()
        sasl.allowed_mechs(mechs)
        sasl.allow_insecure_mechs = True  # PLAIN without TLS: proton refuses it otherwise
    conn = proton.Connection()
    if mechs is not None:  # proton starts SASL by itself when a user is set
        conn.user = user
        conn.password = password
    conn.hostname = "broker.example"
    transport.bind(conn)
    conn.open()
    return transport, conn


def take(transport: proton.Transport) -> bytes:
    pending = transport.pending()
    if pending <= 0:
        return b""
    out = bytes(transport.peek(pending))
    transport.pop(len(out))
    return out


def give(transport: proton.Transport, data: bytes, chunk: int | None = None) -> None:
    """Push ``data`` into a proton transport; a failed exchange makes proton raise."""
    pieces = [data] if chunk is None else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    try:
        for piece in pieces:
            if transport.capacity() < 0:
                return
            transport.push(piece)
    except proton.TransportException:
        pass


def pump(srv: SaslServer, client: proton.Transport, chunk: int | None = None):
    """Move bytes both ways until neither side has more; return (events, engine bytes).

    ``engine bytes`` are what the server passed on for the AMQP engine.  Once
    the server has FAILED and its output is written, the connection is closed
    under the client, as the adapter would.
    """
    events = []
    for _ in range(100):
        moved = False
        data = take(client)
        if data:
            moved = True
            pieces = [data] if chunk is None else [
                data[i : i + chunk] for i in range(0, len(data), chunk)
            ]
            for piece in pieces:
                events += srv.receive_data(piece)
        out = srv.data_to_send()
        if out:
            moved = True
            give(client, out, chunk)
        if not moved:
            break
    if srv.state is SaslState.FAILED:
        client.close_tail()
    return events, engine_bytes(events)


def engine_bytes(events) -> bytes:
    parts = []
    for event in events:
        if isinstance(event, (SaslAuthenticated, NoSasl)):
            parts.append(event.remaining)
        elif isinstance(event, Passthrough):
            parts.append(event.data)
    return b"".join(parts)


def normalise(events):
    """Events with the engine's bytes merged: chunking may split them differently."""
    result = []
    for event in events:
        if isinstance(event, SaslAuthenticated):
            event = SaslAuthenticated(event.mechanism, event.principal, event.hostname, b"")
        elif isinstance(event, NoSasl):
            event = NoSasl(b"")
        elif isinstance(event, Passthrough):
            continue
        result.append(event)
    return result, engine_bytes(events)


def open_engine(engine_in: bytes, client: proton.Transport) -> proton.Connection:
    """Feed ``engine_in`` to a proton server engine, as the adapter does after SASL.

    Returns the server-side connection; the client gets the engine's answer.
    """
    engine = proton.Transport(proton.Transport.SERVER)
    conn = proton.Connection()
    engine.bind(conn)
    engine.push(engine_in)
    conn.open()
    give(client, take(engine))
    return conn


# -- conversations with the proton client ------------------------------------------


def test_plain_with_proton_client():
    srv, auth = server()
    client, conn = proton_client("PLAIN")
    events, engine_in = pump(srv, client)

    assert len(auth.calls) == 1
    creds = auth.calls[0]
    assert creds == SaslCredentials("PLAIN", "u", "p", None, None, b"\0u\0p")
    assert creds.initial_response == b"\0u\0p"
    assert client.sasl().outcome == SASL.OK
    assert srv.state is SaslState.DONE
    assert isinstance(events[0], SaslAuthenticated)
    assert events[0].mechanism == "PLAIN"
    assert events[0].principal == "user:u"
    assert all(isinstance(e, Passthrough) for e in events[1:])
    # The client's AMQP layer follows authentication: header, then open.
    assert engine_in.startswith(AMQP_HEADER)
    assert len(engine_in) > len(AMQP_HEADER)

    # And the engine, fed those bytes, completes the AMQP open both ways.
    engine_conn = open_engine(engine_in, client)
    assert engine_conn.state & Endpoint.REMOTE_ACTIVE
    assert conn.state & Endpoint.REMOTE_ACTIVE


def test_anonymous_with_proton_client():
    srv, auth = server()
    client, _ = proton_client("ANONYMOUS")
    events, engine_in = pump(srv, client)

    creds = auth.calls[0]
    assert creds.mechanism == "ANONYMOUS"
    assert creds.username is None and creds.password is None
    assert isinstance(creds.initial_response, bytes)  # the trace string, as sent
    assert client.sasl().outcome == SASL.OK
    assert events[0] == SaslAuthenticated("ANONYMOUS", "anonymous:guest", None, events[0].remaining)
    assert engine_in.startswith(AMQP_HEADER)


def test_external_with_proton_client():
    srv, auth = server(("EXTERNAL", "PLAIN"))
    client, _ = proton_client("EXTERNAL")
    events, engine_in = pump(srv, client)

    creds = auth.calls[0]
    assert creds.mechanism == "EXTERNAL"
    assert creds.username is None and creds.password is None
    assert client.sasl().outcome == SASL.OK
    assert isinstance(events[0], SaslAuthenticated)
    assert engine_in.startswith(AMQP_HEADER)


def test_bad_password_with_proton_client():
    srv, auth = server()
    client, _ = proton_client("PLAIN", password="wrong")
    events, engine_in = pump(srv, client)

    assert auth.calls[0].password == "wrong"
    assert events == [SaslFailed(BAD_USER_U, "PLAIN", SaslCode.AUTH)]
    assert srv.state is SaslState.FAILED
    assert engine_in == b""
    assert client.sasl().outcome == SASL.AUTH
    assert client.condition is not None
    assert client.condition.name == "amqp:unauthorized-access"


def test_hostname_defaults_to_server_argument():
    srv, auth = server(hostname="sni.example")
    client, _ = proton_client("PLAIN")
    events, _ = pump(srv, client)
    assert auth.calls[0].hostname == "sni.example"
    assert events[0].hostname == "sni.example"


def test_proton_client_without_sasl_refused():
    srv, _ = server()
    client, _ = proton_client(None)
    data = take(client)
    assert data.startswith(AMQP_HEADER)
    assert srv.receive_data(data) == [SaslRequired()]
    assert srv.state is SaslState.FAILED
    assert srv.data_to_send() == SASL_HEADER
    assert srv.receive_data(b"more") == []  # ignored from now on
    assert srv.data_to_send() == b""


def test_proton_client_without_sasl_allowed():
    srv, _ = server(allow_no_sasl=True)
    client, conn = proton_client(None)
    data = take(client)
    events = srv.receive_data(data)
    assert events == [NoSasl(data)]
    assert srv.state is SaslState.DONE
    assert srv.data_to_send() == b""
    assert srv.receive_data(b"xyz") == [Passthrough(b"xyz")]
    engine_conn = open_engine(data, client)
    assert engine_conn.state & Endpoint.REMOTE_ACTIVE
    assert conn.state & Endpoint.REMOTE_ACTIVE


@pytest.mark.parametrize("mechs", ["PLAIN", "ANONYMOUS", "EXTERNAL"])
def test_proton_conversation_one_byte_at_a_time(mechs):
    whole_srv, _ = server(("EXTERNAL", "PLAIN", "ANONYMOUS"))
    whole, _ = pump(whole_srv, proton_client(mechs)[0])
    bytewise_srv, _ = server(("EXTERNAL", "PLAIN", "ANONYMOUS"))
    bytewise, _ = pump(bytewise_srv, proton_client(mechs)[0], chunk=1)
    assert normalise(bytewise) == normalise(whole)
    assert bytewise_srv.state is whole_srv.state is SaslState.DONE


def test_bad_password_one_byte_at_a_time():
    whole, _ = pump(server()[0], proton_client("PLAIN", password="x")[0])
    client, _ = proton_client("PLAIN", password="x")
    bytewise, _ = pump(server()[0], client, chunk=1)
    assert bytewise == whole
    assert client.condition.name == "amqp:unauthorized-access"


# -- hand-made conversations ---------------------------------------------------------


def conversation(mechanism="PLAIN", response=b"\0u\0p", hostname=None) -> bytes:
    return SASL_HEADER + init_frame(mechanism, response, hostname) + AMQP_HEADER + OPEN


def test_pipelined_bytes_are_remaining():
    srv, _ = server()
    events = srv.receive_data(conversation(hostname="vhost"))
    assert events == [SaslAuthenticated("PLAIN", "user:u", "vhost", AMQP_HEADER + OPEN)]
    out = srv.data_to_send()
    assert out.startswith(SASL_HEADER)
    frames = split_frames(out[8:])
    assert [body.descriptor for _, body in frames] == [0x40, 0x44]
    assert list(frames[0][1].value[0]) == ["PLAIN", "ANONYMOUS"]
    assert int(frames[1][1].value[0]) == 0
    assert srv.receive_data(b"later") == [Passthrough(b"later")]
    assert srv.receive_data(b"") == []


def test_mechanisms_frame_keeps_order():
    srv, _ = server(("EXTERNAL", "PLAIN"))
    srv.receive_data(SASL_HEADER)
    out = srv.data_to_send()
    ((ftype, body),) = split_frames(out[8:])
    assert ftype == 1 and body.descriptor == 0x40
    assert list(body.value[0]) == ["EXTERNAL", "PLAIN"]
    assert srv.state is SaslState.AWAIT_INIT


@pytest.mark.parametrize(
    "data",
    [
        conversation(),
        conversation("ANONYMOUS", b"trace@example"),
        conversation("PLAIN", b"\0u\0nope"),
        conversation("CRAM-MD5", None),
        SASL_HEADER + init_frame("PLAIN") + b"\x00\x00\x00",
    ],
)
def test_one_byte_at_a_time_gives_same_events(data):
    whole_srv, _ = server()
    whole = whole_srv.receive_data(data)
    bytewise_srv, _ = server()
    bytewise = []
    for i in range(len(data)):
        bytewise += bytewise_srv.receive_data(data[i : i + 1])
    assert normalise(bytewise) == normalise(whole)
    assert bytewise_srv.state is whole_srv.state
    assert bytewise_srv.data_to_send() == whole_srv.data_to_send()


@given(
    data=st.sampled_from(
        [
            conversation(),
            conversation("ANONYMOUS", None, "h"),
            conversation("PLAIN", b"bad"),
            AMQP_HEADER + OPEN,
        ]
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=20),
    allow=st.booleans(),
)
def test_chunking_never_changes_events(data, cuts, allow):
    whole_srv, _ = server(allow_no_sasl=allow)
    whole = whole_srv.receive_data(data)
    srv, _ = server(allow_no_sasl=allow)
    events = []
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        events += srv.receive_data(data[start:end])
    assert normalise(events) == normalise(whole)
    assert srv.data_to_send() == whole_srv.data_to_send()


def test_plain_with_authzid_and_hostname():
    srv, auth = server()
    events = srv.receive_data(SASL_HEADER + init_frame("PLAIN", b"admin\0alice\0s3cret", "vh"))
    response = b"admin\0alice\0s3cret"
    assert auth.calls == [SaslCredentials("PLAIN", "alice", "s3cret", "admin", "vh", response)]
    assert events == [SaslAuthenticated("PLAIN", "user:alice", "vh", b"")]
    assert "s3cret" not in repr(auth.calls[0])


@pytest.mark.parametrize(
    "response",
    [None, b"", b"u\0p", b"\0\0p", b"\0u\0p\0", b"\0\xffu\0p", b"\0u\0\xfe"],
)
def test_malformed_plain_response_is_an_auth_failure(response):
    srv, auth = server()
    events = srv.receive_data(SASL_HEADER + init_frame("PLAIN", response))
    assert events == [SaslFailed("malformed PLAIN initial response", "PLAIN", SaslCode.AUTH)]
    assert auth.calls == []
    assert srv.state is SaslState.FAILED
    frames = split_frames(srv.data_to_send()[len(SASL_HEADER) :])
    assert [body.descriptor for _, body in frames] == [0x40, 0x44]
    assert int(frames[1][1].value[0]) == SaslCode.AUTH


def test_mechanism_not_offered():
    srv, auth = server(("ANONYMOUS",))
    events = srv.receive_data(SASL_HEADER + init_frame("PLAIN"))
    assert events == [SaslFailed("mechanism 'PLAIN' was not offered (offered: ANONYMOUS)", "PLAIN")]
    assert auth.calls == []
    srv2, _ = server(("ANONYMOUS",))
    srv2.receive_data(SASL_HEADER)
    srv2.data_to_send()
    srv2.receive_data(init_frame("PLAIN"))
    assert outcome_code(srv2.data_to_send()) == SaslCode.AUTH


def test_authenticator_exception_is_sys_failure(caplog):
    srv, _ = server(auth=Authenticator(exc=RuntimeError("directory down")))
    srv.receive_data(SASL_HEADER)
    srv.data_to_send()
    with caplog.at_level(logging.ERROR, logger="junction.amqp"):
        events = srv.receive_data(init_frame("PLAIN"))
    assert events == [SaslFailed("authenticator error: RuntimeError", "PLAIN", SaslCode.SYS)]
    assert outcome_code(srv.data_to_send()) == SaslCode.SYS
    assert "directory down" in caplog.text
    assert "'p'" not in caplog.text  # the password is not logged
    assert srv.state is SaslState.FAILED


@pytest.mark.parametrize("refusal", [None, False, ""])
def test_falsy_principal_is_a_failure(refusal):
    srv = SaslServer(["ANONYMOUS"], lambda creds: refusal)
    srv.receive_data(SASL_HEADER)
    srv.data_to_send()
    events = srv.receive_data(init_frame("ANONYMOUS", b"x"))
    assert events == [SaslFailed("ANONYMOUS authentication failed", "ANONYMOUS")]
    assert outcome_code(srv.data_to_send()) == SaslCode.AUTH
    assert srv.state is SaslState.FAILED


def test_anonymous_without_trace():
    srv, auth = server()
    events = srv.receive_data(SASL_HEADER + init_frame("ANONYMOUS", None))
    assert events == [SaslAuthenticated("ANONYMOUS", "anonymous:guest", None, b"")]
    assert auth.calls == [SaslCredentials("ANONYMOUS", None, None, None, None, None)]


def test_long_fields_use_32_bit_encodings():
    password = "p" * 300
    USERS["long"] = password
    try:
        srv, auth = server()
        response = b"\0long\0" + password.encode()
        fields = (
            b"\xb3\x00\x00\x00\x05PLAIN"  # sym32
            + b"\xb0" + len(response).to_bytes(4, "big") + response  # vbin32
            + b"\xb1\x00\x00\x00\x01h"  # str32
        )
        size = (4 + len(fields)).to_bytes(4, "big")
        body = b"\x00\x53\x41\xd0" + size + (3).to_bytes(4, "big") + fields  # list32
        data = SASL_HEADER + frame(body)
        assert srv.receive_data(data) == [SaslAuthenticated("PLAIN", "user:long", "h", b"")]
        assert auth.calls[0].password == password
    finally:
        del USERS["long"]


def test_long_names_are_clipped_in_reasons():
    srv, _ = server()
    events = srv.receive_data(SASL_HEADER + init_frame("PLAIN", b"\0" + b"u" * 5000 + b"\0p"))
    assert len(events[0].reason) < 150
    srv, _ = server()
    events = srv.receive_data(SASL_HEADER + init_frame("X" * 5000, None))
    assert len(events[0].reason) < 150


def test_external_authzid_not_utf8():
    srv, auth = server(("EXTERNAL",))
    events = srv.receive_data(SASL_HEADER + init_frame("EXTERNAL", b"\xff"))
    assert events == [SaslFailed("EXTERNAL authorization identity is not UTF-8", "EXTERNAL")]
    assert auth.calls == []


def test_missing_transition_is_a_local_error():
    srv, _ = server()
    with pytest.raises(LocalProtocolError, match="no transition from AWAIT_HEADER on DATA"):
        srv._transition(SaslInput.DATA)


def test_external_authzid():
    srv, auth = server(("EXTERNAL",))
    srv.receive_data(SASL_HEADER + init_frame("EXTERNAL", b"admin"))
    assert auth.calls == [SaslCredentials("EXTERNAL", None, None, "admin", None, b"admin")]


@pytest.mark.parametrize(
    "body",
    [
        # symbol descriptor instead of the numeric one
        init_body(descriptor=symbol("amqp:sasl-init:list")),
        # ulong (8-octet) descriptor, list8, extra unknown fields
        b"\x00\x80"
        + (0x41).to_bytes(8, "big")
        + encode([symbol("PLAIN"), b"\0u\0p", "h", 7, [1, "x"]]),
    ],
)
def test_accepted_encodings(body):
    srv, _ = server()
    events = srv.receive_data(SASL_HEADER + frame(body))
    assert [type(e) for e in events] == [SaslAuthenticated]


def test_larger_doff_is_honoured():
    srv, _ = server()
    events = srv.receive_data(SASL_HEADER + frame(init_body(), doff=5, channel=7))
    assert [type(e) for e in events] == [SaslAuthenticated]


def test_frame_of_exactly_max_size_is_accepted_and_buffer_bounded():
    limit = 600
    srv, _ = server(max_frame_size=limit)
    # pad with an unknown trailing field to reach exactly `limit` octets
    fields = [symbol("PLAIN"), b"\0u\0p", None]
    pad = 0
    while True:
        body = encode(Described(ulong(0x41), fields + [b"x" * pad]))
        if 8 + len(body) >= limit:
            break
        pad += 1
    assert 8 + len(body) == limit
    data = SASL_HEADER + frame(body)
    events = []
    for i in range(0, len(data), 7):
        events += srv.receive_data(data[i : i + 7])
        assert srv.buffered <= limit + 8
    assert [type(e) for e in events] == [SaslAuthenticated]


# -- protocol errors -----------------------------------------------------------------


def expect_error(srv: SaslServer, data: bytes, match: str | None = None):
    with pytest.raises(RemoteProtocolError, match=match) as info:
        srv.receive_data(data)
    assert srv.state is SaslState.FAILED
    assert srv.error is info.value
    assert srv.receive_data(b"more") == []  # ignored once failed
    return info.value


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x00\x01\x02\x03\x04\x05\x06\x07", r"expected an AMQP protocol header, got b'\\x00"),
        (b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n", "got b'GET / HTTP/1.1.*HTTP"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS handshake"),
        (TLS_HEADER, "protocol id 2 version 1.0.0 .TLS"),
        (b"AMQP\x01\x01\x00\x00", "protocol id 1 version 1.0.0"),
        (b"AMQP\x03\x01\x00\x01", "protocol id 3 version 1.0.1"),
        (b"AMQP\x00\x00\x09\x01", "protocol id 0 version 0.9.1"),
        (b"A" * 100, r"got b'AMQ|got b'AA"),
    ],
)
def test_bad_protocol_header(data, match):
    srv, _ = server(allow_no_sasl=True)
    err = expect_error(srv, data, match)
    assert len(str(err)) < 200  # what arrived is shown, bounded
    assert srv.data_to_send() == SASL_HEADER  # the header we support, then close


def test_bad_header_detected_early_one_byte_at_a_time():
    srv, _ = server()
    assert srv.receive_data(b"A") == []
    assert srv.receive_data(b"M") == []
    expect_error(srv, b"X", "got b'AMX'")
    assert srv.data_to_send() == SASL_HEADER


def sasl_started(**kwargs) -> SaslServer:
    srv, _ = server(**kwargs)
    srv.receive_data(SASL_HEADER)
    srv.data_to_send()
    return srv


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ((MAX_SASL_FRAME_SIZE + 1).to_bytes(4, "big"), "exceeds the limit of 65536"),
        (b"AMQP", "exceeds the limit"),  # a second header is no frame
        ((7).to_bytes(4, "big"), "below the minimum of 8"),
        ((0).to_bytes(4, "big"), "below the minimum of 8"),
        ((16).to_bytes(4, "big") + b"\x01", "invalid data offset 1"),
        ((16).to_bytes(4, "big") + b"\x05", "invalid data offset 5"),
        (frame(init_body(), ftype=0), "got an AMQP frame"),
        (frame(init_body(), ftype=7), "got frame type 7"),
        (frame(b""), "empty body"),
        (frame(b"\x45"), "not a described type"),
        (frame(encode([symbol("PLAIN")])), "not a described type"),
        (frame(b"\x00\x53\x41\xa1\x01x"), "not a described list"),
        (frame(b"\x00\xa1\x01x\x45"), "descriptor of type str"),
        (frame(b"\x00\x44\x45"), "unknown descriptor"),  # ulong0
        (frame(encode(Described(ulong(0x43), [b"\0u\0p"]))), "unexpected sasl-response"),
        (frame(encode(Described(ulong(0x44), [0]))), "unexpected sasl-outcome"),
        (frame(encode(Described(ulong(0x40), [symbol("PLAIN")]))), "unexpected sasl-mechanisms"),
        (frame(encode(Described(ulong(0x10), [symbol("c")]))), "unknown descriptor"),
        (frame(encode(Described(symbol("amqp:open:list"), []))), "unknown descriptor"),
        (frame(b"\x00\x53\x41\x45"), "no mechanism"),
        (frame(encode(Described(ulong(0x41), [None, b"x"]))), "no mechanism"),
        (frame(encode(Described(ulong(0x41), ["PLAIN"]))), "mechanism is a str, not a Symbol"),
        (frame(encode(Described(ulong(0x41), [symbol("P"), "str"]))), "initial-response"),
        (frame(encode(Described(ulong(0x41), [symbol("P"), None, b"h"]))), "hostname"),
        (frame(encode(Described(ulong(0x41), [symbol("P"), None, symbol("h")]))), "hostname"),
        (frame(init_body() + b"\x40"), "1 octets after its value"),
    ],
)
def test_bad_frames(data, match):
    srv = sasl_started()
    expect_error(srv, data, match)
    assert srv.data_to_send() == b""


def nested_lists(depth: int) -> bytes:
    value = b"\x45"
    for _ in range(depth):
        value = b"\xd0" + (len(value) + 4).to_bytes(4, "big") + (1).to_bytes(4, "big") + value
    return value


# Encodings the type codec refuses (its messages are its own business).
@pytest.mark.parametrize(
    "body",
    [
        b"\x00",
        b"\x00\x53",
        b"\x00\x53\x41",
        b"\x00\x80\x00\x00\x00\x00",
        b"\x00\xa3\x0aamqp:sasl",
        b"\x00\x53\x41\xc0\x02\x01\x00",
        b"\x00\x53\x41\xc0\x03\x01\xb0\x00",
        b"\x00\x53\x41\xd0\x00\x00",
        b"\x00\x53\x41\xc0\x04\x01\xa3\x01\xff",  # symbol not ASCII
        b"\x00\x53\x41\xc0\x08\x03\xa3\x01P\x40\xa1\x01\xff",  # string not UTF-8
        b"\x00\x53\x41\xc0\x02\x05\x40",  # count larger than the list
        b"\x00\x53\x41\xc0\x03\x00\x40\x40",  # count smaller than the list
        b"\x00\x53\x41\xc0\x09\x01\xa3",  # size beyond the body
        b"\x00\x53\x41\xc0\x03\x01\x20\x00",  # no such type code
        b"\x00\x53\x41\xc0\x05\x01\x00\x00\x40\x40",
        b"\x00\x53\x41\xc0\x00\x00",
        b"\x00\x53\x41" + nested_lists(200),  # nested too deeply
    ],
)
def test_malformed_encodings(body):
    srv = sasl_started()
    err = expect_error(srv, frame(body))
    assert err.code == "amqp:decode-error"
    assert srv.data_to_send() == b""


def test_oversize_frame_names_configured_limit():
    srv = sasl_started(max_frame_size=512)
    expect_error(srv, (513).to_bytes(4, "big"), "exceeds the limit of 512 octets")


def test_oversize_frame_refused_before_its_body_arrives():
    srv = sasl_started()
    size = (MAX_SASL_FRAME_SIZE + 1).to_bytes(4, "big")
    assert srv.receive_data(size[:3]) == []
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        srv.receive_data(size[3:])  # the size is complete: no need to wait for the body
    assert srv.buffered == 0


def test_truncated_init_bodies():
    body = init_body("PLAIN", b"\0u\0p", "host")
    for cut in range(len(body)):
        srv = sasl_started()
        with pytest.raises(RemoteProtocolError):
            srv.receive_data(frame(body[:cut]))


def test_incomplete_frame_waits():
    srv = sasl_started()
    data = init_frame()
    assert srv.receive_data(data[:-1]) == []
    assert srv.state is SaslState.AWAIT_INIT
    assert srv.buffered == len(data) - 1
    assert [type(e) for e in srv.receive_data(data[-1:])] == [SaslAuthenticated]


def test_bad_frame_in_same_read_as_header():
    srv, _ = server()
    expect_error(srv, SASL_HEADER + frame(b""), "empty body")
    # the header exchange happened before the error: its answer is queued
    assert srv.data_to_send().startswith(SASL_HEADER)


# -- hostile input: only RemoteProtocolError, ever ----------------------------------

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def feed_expecting_only_protocol_errors(srv: SaslServer, pieces) -> None:
    for piece in pieces:
        try:
            srv.receive_data(piece)
        except RemoteProtocolError:
            assert srv.state is SaslState.FAILED
            return
        assert srv.state in (SaslState.AWAIT_INIT, SaslState.DONE, SaslState.FAILED)
        assert srv.buffered <= srv.max_frame_size + 8


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=5))
def test_fuzz_after_sasl_header(pieces):
    srv, _ = server()
    srv.receive_data(SASL_HEADER)
    feed_expecting_only_protocol_errors(srv, pieces)


@FUZZ
@given(st.binary(max_size=400), st.integers(min_value=2, max_value=4), st.integers(0, 255))
def test_fuzz_frame_bodies(body, doff, ftype):
    srv, _ = server(("PLAIN", "ANONYMOUS", "EXTERNAL"))
    srv.receive_data(SASL_HEADER)
    feed_expecting_only_protocol_errors(srv, [frame(body, doff=doff, ftype=ftype | (ftype == 0))])


_VALID = init_body("PLAIN", b"\0u\0p", "host")


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), min_size=1, max_size=4
    ),
    st.integers(0, len(_VALID)),
)
def test_fuzz_mutated_init(mutations, cut):
    body = bytearray(_VALID)
    for pos, value in mutations:
        body[pos] = value
    srv, _ = server(("PLAIN", "ANONYMOUS", "EXTERNAL"))
    srv.receive_data(SASL_HEADER)
    feed_expecting_only_protocol_errors(srv, [frame(bytes(body[:cut] if cut else body))])


@FUZZ
@given(st.binary(max_size=40))
def test_fuzz_before_header(data):
    srv, _ = server(allow_no_sasl=True)
    try:
        srv.receive_data(data)
    except RemoteProtocolError:
        assert srv.state is SaslState.FAILED
        assert srv.data_to_send() == SASL_HEADER


# -- the transition table: every (state, input) pair ------------------------------


def reach(state: SaslState, **kwargs) -> SaslServer:
    srv, _ = server(**kwargs)
    if state is SaslState.AWAIT_INIT:
        srv.receive_data(SASL_HEADER)
    elif state is SaslState.DONE:
        srv.receive_data(conversation())
    elif state is SaslState.FAILED:
        srv.receive_data(SASL_HEADER + init_frame("PLAIN", b"\0u\0bad"))
    srv.data_to_send()
    assert srv.state is state
    return srv


# (state, input) -> (server kwargs, bytes fed, expected events or exception type)
SCENARIOS = {
    (SaslState.AWAIT_HEADER, SaslInput.PARTIAL): ({}, b"AMQP\x03", []),
    (SaslState.AWAIT_HEADER, SaslInput.SASL_HEADER): ({}, SASL_HEADER, []),
    (SaslState.AWAIT_HEADER, SaslInput.AMQP_HEADER_ALLOWED): (
        {"allow_no_sasl": True}, AMQP_HEADER + OPEN, [NoSasl(AMQP_HEADER + OPEN)]
    ),
    (SaslState.AWAIT_HEADER, SaslInput.AMQP_HEADER_REFUSED): ({}, AMQP_HEADER, [SaslRequired()]),
    (SaslState.AWAIT_HEADER, SaslInput.BAD_HEADER): ({}, TLS_HEADER, RemoteProtocolError),
    (SaslState.AWAIT_INIT, SaslInput.PARTIAL): ({}, init_frame()[:10], []),
    (SaslState.AWAIT_INIT, SaslInput.INIT_ACCEPTED): (
        {}, init_frame() + b"x", [SaslAuthenticated("PLAIN", "user:u", None, b"x")]
    ),
    (SaslState.AWAIT_INIT, SaslInput.INIT_REJECTED): (
        {}, init_frame("PLAIN", b"\0u\0x"), [SaslFailed(BAD_USER_U, "PLAIN")]
    ),
    (SaslState.AWAIT_INIT, SaslInput.BAD_FRAME): ({}, frame(b"", ftype=0), RemoteProtocolError),
    (SaslState.DONE, SaslInput.DATA): ({}, SASL_HEADER + OPEN, [Passthrough(SASL_HEADER + OPEN)]),
    (SaslState.FAILED, SaslInput.DATA): ({}, init_frame(), []),
}


def test_scenarios_cover_the_transition_table():
    assert set(SCENARIOS) == set(TRANSITIONS)


@pytest.mark.parametrize(("state", "kind"), list(TRANSITIONS), ids=lambda v: v.name)
def test_transition(state, kind):
    kwargs, data, expected = SCENARIOS[state, kind]
    srv = reach(state, **kwargs)
    if expected is RemoteProtocolError:
        with pytest.raises(RemoteProtocolError):
            srv.receive_data(data)
    else:
        assert srv.receive_data(data) == expected
    assert srv.state is TRANSITIONS[state, kind]
    out = srv.data_to_send()
    if kind is SaslInput.SASL_HEADER:
        assert out.startswith(SASL_HEADER) and split_frames(out[8:])[0][1].descriptor == 0x40
    elif kind in (SaslInput.INIT_ACCEPTED, SaslInput.INIT_REJECTED):
        assert outcome_code(out) == (0 if kind is SaslInput.INIT_ACCEPTED else 1)
    elif kind in (SaslInput.BAD_HEADER, SaslInput.AMQP_HEADER_REFUSED):
        assert out == SASL_HEADER
    else:
        assert out == b""


# -- construction ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanisms", "kwargs"),
    [
        ((), {}),
        ("PLAIN", {}),
        (("PLAIN", "CRAM-MD5"), {}),
        (("PLAIN", "PLAIN"), {}),
        (("PLAIN",), {"max_frame_size": 511}),
        (("PLAIN",), {"max_frame_size": 2**32}),
        (("PLAIN",), {"max_frame_size": 1000.0}),
    ],
)
def test_bad_construction(mechanisms, kwargs):
    with pytest.raises(ValueError):
        SaslServer(mechanisms, Authenticator(), **kwargs)


def test_initial_state():
    srv, _ = server()
    assert srv.state is SaslState.AWAIT_HEADER
    assert srv.mechanisms == ("PLAIN", "ANONYMOUS")
    assert srv.error is None
    assert srv.data_to_send() == b""
    assert srv.receive_data(b"") == []
