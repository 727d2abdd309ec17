"""The gateway as a SASL client of a backend (junction.protocols.amqp.sasl_client).

The backends are the real things: the broker core's
:class:`~junction.protocols.amqp.sasl.SaslServer`, proton's own server SASL
layer, and a whole in-memory broker core (:class:`AmqpProtocol` on a
StringTransport, as in ``test_amqp_server.py``).  The last shows the whole
AMQP forward in memory: a proton client authenticates with the gateway
(:class:`AmqpOpening`), the gateway redoes SASL with the broker on the
client's behalf (:class:`SaslClient`), replays the client's bytes after SASL,
and the client's engine completes its open against the broker -- which sees
the client's container id and user -- then sends and receives through the
splice.  Hostile backends only ever give RemoteProtocolError.
"""

from __future__ import annotations

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Delivery, Described, Message, symbol, ulong
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from junction.brokercore.amqp_server import AmqpFactory
from junction.protocols.amqp.opening import AmqpOpening, OpeningComplete
from junction.protocols.amqp.sasl import (
    AMQP_HEADER,
    SASL_HEADER,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslCode,
    SaslFailed,
    SaslServer,
)
from junction.protocols.amqp.sasl_client import (
    TRANSITIONS,
    SaslClient,
    SaslClientDone,
    SaslClientFailed,
    SaslClientInput,
    SaslClientState,
)
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from tests.unit.stomp_fixtures import Broker, SecuritySetting
from tests.unit.test_amqp_opening import (
    Authenticator,
    ProtonClient,
    drain,
    frame,
    one,
    proton_encode,
    run_opening,
)
from tests.unit.test_amqp_server import amqp_acceptor

REMOTE_ACTIVE = proton.Endpoint.REMOTE_ACTIVE
REMOTE_CLOSED = proton.Endpoint.REMOTE_CLOSED

BACKEND_USERS = {"alice": "s3cret"}


def backend_auth(creds):
    if creds.mechanism == "PLAIN":
        return creds.username if BACKEND_USERS.get(creds.username) == creds.password else None
    return "anonymous" if creds.mechanism == "ANONYMOUS" else None


def sasl_frame(code: int, fields: list) -> bytes:
    return frame(proton_encode(Described(ulong(code), fields)), ftype=1)


MECHANISMS = sasl_frame(
    0x40, [proton.Array(proton.UNDESCRIBED, proton.Data.SYMBOL, symbol("PLAIN"), symbol("ANONYMOUS"))]
)


def outcome(code: int) -> bytes:
    return sasl_frame(0x44, [proton.ubyte(code)])


def exchange(client: SaslClient, server: SaslServer, chunk: int | None = None):
    """Run the SASL exchange between the two, byte by byte if ``chunk`` is 1."""
    server_events = server.receive_data(client.initial_bytes())
    answer = server.data_to_send()
    events: list = []
    if chunk is None:
        events += client.receive_data(answer)
    else:
        for i in range(0, len(answer), chunk):
            events += client.receive_data(answer[i : i + chunk])
    return server_events, events


# -- against the broker core's SaslServer ----------------------------------------------


@pytest.mark.parametrize("chunk", [None, 1])
def test_plain_against_the_sasl_server(chunk):
    client = SaslClient("PLAIN", username="alice", password="s3cret", authzid="ops", hostname="h1")
    assert not client.ready
    server = SaslServer(("PLAIN", "ANONYMOUS"), backend_auth)
    server_events, events = exchange(client, server, chunk)
    auth = one(server_events, SaslAuthenticated)
    assert (auth.mechanism, auth.principal, auth.hostname) == ("PLAIN", "alice", "h1")
    # the outcome is in: the client's opening may go; done once the backend's header is in
    assert events == []
    assert client.ready and client.state is SaslClientState.AWAIT_AMQP_HEADER
    assert client.offered == ("PLAIN", "ANONYMOUS")
    assert one(client.receive_data(AMQP_HEADER), SaslClientDone).remaining == b""
    assert client.state is SaslClientState.DONE
    assert client.receive_data(b"AMQP") == [Passthrough(b"AMQP")]


def test_authzid_and_credentials_reach_the_authenticator():
    seen = []
    server = SaslServer(("PLAIN",), lambda c: seen.append(c) or "ok")
    exchange(SaslClient("PLAIN", username="alice", password="pw", authzid="bob"), server)
    (creds,) = seen
    assert (creds.username, creds.password, creds.authzid) == ("alice", "pw", "bob")


def test_anonymous_against_the_sasl_server():
    server = SaslServer(("PLAIN", "ANONYMOUS"), backend_auth)
    client = SaslClient("ANONYMOUS")
    server_events, events = exchange(client, server)
    assert one(server_events, SaslAuthenticated).mechanism == "ANONYMOUS"
    assert events == [] and client.ready
    one(client.receive_data(AMQP_HEADER), SaslClientDone)


def test_wrong_password_is_a_failed_outcome():
    client = SaslClient("PLAIN", username="alice", password="nope")
    server_events, events = exchange(client, SaslServer(("PLAIN",), backend_auth))
    one(server_events, SaslFailed)
    failed = one(events, SaslClientFailed)
    assert failed.code is SaslCode.AUTH
    assert "alice" in failed.reason and "auth (1)" in failed.reason
    assert client.state is SaslClientState.FAILED and not client.ready
    assert client.receive_data(b"anything") == []


def test_mechanism_not_offered_fails_before_the_outcome():
    client = SaslClient("ANONYMOUS")
    _server_events, events = exchange(client, SaslServer(("PLAIN",), backend_auth))
    failed = one(events, SaslClientFailed)
    assert failed.code is None
    assert "offers PLAIN, not ANONYMOUS" in failed.reason
    assert client.offered == ("PLAIN",)


def test_the_backends_amqp_header_is_consumed_and_what_follows_handed_back():
    client = SaslClient("ANONYMOUS")
    client.initial_bytes()
    events = client.receive_data(SASL_HEADER + MECHANISMS + outcome(0) + AMQP_HEADER + b"\x00\x00")
    assert one(events, SaslClientDone).remaining == b"\x00\x00"


OPEN = frame(proton_encode(Described(ulong(0x10), ["backend"])))


@pytest.mark.parametrize("mechanism", ["ANONYMOUS", None])
def test_the_backends_amqp_header_split_across_reads_is_consumed_exactly(mechanism):
    """Byte by byte, or with the Open in the same read: the header never reaches the client."""
    before = SASL_HEADER + MECHANISMS + outcome(0) if mechanism else b""
    stream = before + AMQP_HEADER + OPEN + b"more"
    h = len(before)
    byte_by_byte = list(range(1, len(stream)))
    for cuts in (byte_by_byte, [h + 3], [h + 8], [h + 3, h + 11], [h - 1, h + 7], []):
        cuts = [c for c in cuts if c > 0]
        client = SaslClient(mechanism)
        client.initial_bytes()
        events: list = []
        for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            events += client.receive_data(stream[a:b])
        done = [e for e in events if isinstance(e, SaslClientDone)]
        assert len(done) == 1 and isinstance(events[0], SaslClientDone), (cuts, events)
        passed = done[0].remaining + b"".join(e.data for e in events if isinstance(e, Passthrough))
        assert passed == OPEN + b"more", cuts
        assert client.state is SaslClientState.DONE


OTHER_HEADERS = [
    (b"AMQP\x00\x02\x00\x00", "with AMQP protocol id 0 version 2.0.0 (it does not speak AMQP 1.0)"),
    (b"AMQP\x00\x01\x00\x01", "with AMQP protocol id 0 version 1.0.1"),
    (b"HTTP/1.1 400", "with b'H"),  # refused at its first octet
]


@pytest.mark.parametrize(
    ("mechanism", "header", "text"),
    [("PLAIN", h, t) for h, t in OTHER_HEADERS]
    + [("PLAIN", SASL_HEADER, "with the SASL header again, after its sasl-outcome")]
    # without SASL, the SASL header is the backend requiring it: SaslClientFailed (tested above)
    + [(None, h, t) for h, t in OTHER_HEADERS],
)
def test_another_header_after_the_outcome_is_a_clear_protocol_error(mechanism, header, text):
    for chunk in (None, 1):
        client = SaslClient(mechanism, **({"username": "a", "password": "b"} if mechanism else {}))
        client.initial_bytes()
        if mechanism:
            assert client.receive_data(SASL_HEADER + MECHANISMS + outcome(0)) == []
        assert client.ready
        with pytest.raises(RemoteProtocolError) as info:
            for piece in ([header] if chunk is None else [header[i : i + 1] for i in range(len(header))]):
                client.receive_data(piece)
        assert text in str(info.value), info.value
        assert str(info.value).startswith("the backend answered the AMQP 1.0 header (AMQP 0 1.0.0) with")
        assert info.value.code == "amqp:connection:framing-error"
        assert client.state is SaslClientState.FAILED and not client.ready


def test_an_unknown_outcome_code_is_kept_as_a_number():
    client = SaslClient("ANONYMOUS")
    failed = one(client.receive_data(SASL_HEADER + MECHANISMS + outcome(9)), SaslClientFailed)
    assert failed.code == 9 and type(failed.code) is int


def test_a_backend_without_sasl():
    client = SaslClient("PLAIN", username="a", password="b")
    failed = one(client.receive_data(AMQP_HEADER + b"\x00\x00\x00\x10"), SaslClientFailed)
    assert failed.code is None and "does not speak SASL" in failed.reason


def test_no_sasl_passes_everything_through():
    client = SaslClient(None)
    assert client.initial_bytes() == b""
    assert client.ready  # the client's opening goes out at once
    assert client.receive_data(b"AMQ") == []
    # the backend's header is consumed (the client has the gateway's)
    assert client.receive_data(b"P\x00\x01\x00\x00\x00\x00") == [SaslClientDone(b"\x00\x00")]
    assert client.receive_data(b"more") == [Passthrough(b"more")]


def test_no_sasl_against_a_backend_that_requires_it():
    server = SaslServer(("PLAIN",), backend_auth)
    client = SaslClient(None)
    server.receive_data(AMQP_HEADER + b"open...")
    failed = one(client.receive_data(server.data_to_send()), SaslClientFailed)
    assert failed.code is None and "requires SASL" in failed.reason


def test_no_sasl_against_a_backend_that_allows_it():
    server = SaslServer(("PLAIN",), backend_auth, allow_no_sasl=True)
    assert isinstance(one(server.receive_data(AMQP_HEADER), NoSasl), NoSasl)


def test_initial_bytes_are_handed_out_once():
    client = SaslClient("PLAIN", username="alice", password="s3cret")
    assert "s3cret" not in repr(client)
    data = client.initial_bytes()
    assert data.startswith(SASL_HEADER)
    with pytest.raises(LocalProtocolError):
        client.initial_bytes()


@pytest.mark.parametrize(
    ("mechanism", "kw"),
    [
        ("GSSAPI", {}),
        ("PLAIN", {}),
        ("PLAIN", {"username": "", "password": "x"}),
        ("PLAIN", {"username": "a\0b", "password": "x"}),
        ("PLAIN", {"username": "a", "password": "x", "max_frame_size": 100}),
    ],
)
def test_bad_arguments(mechanism, kw):
    with pytest.raises(ValueError):
        SaslClient(mechanism, **kw)


def test_transition_table_covers_every_state():
    states = {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values())
    assert states == set(SaslClientState)
    for terminal in (SaslClientState.DONE, SaslClientState.FAILED):
        assert {i for s, i in TRANSITIONS if s is terminal} == {SaslClientInput.DATA}


# -- against proton's own server SASL -------------------------------------------------


def test_anonymous_against_protons_server_sasl():
    transport = proton.Transport(proton.Transport.SERVER)
    transport.sasl().allowed_mechs("ANONYMOUS")
    conn = proton.Connection()
    transport.bind(conn)
    client = SaslClient("ANONYMOUS", hostname="proton-host")
    transport.push(client.initial_bytes())
    assert client.receive_data(drain(transport)) == [] and client.ready
    assert transport.sasl().outcome == proton.SASL.OK
    # What a client sends after SASL now opens proton's connection; its
    # header is consumed, its Open handed back.
    app = ProtonClient(mechs=None, user=None, container="via-proton")
    transport.push(app.take())
    assert conn.remote_container == "via-proton"
    conn.container = "proton-backend"
    conn.open()
    remaining = one(client.receive_data(drain(transport)), SaslClientDone).remaining
    assert not remaining.startswith(b"AMQP") and AMQP_HEADER not in remaining
    app.push(AMQP_HEADER + remaining)  # the gateway's header, then the backend's Open
    assert app.transport.condition is None and app.conn.remote_container == "proton-backend"
    plain = proton.Transport(proton.Transport.SERVER)
    plain.sasl()  # the wheel's server offers no PLAIN
    plain.bind(proton.Connection())
    client = SaslClient("PLAIN", username="a", password="b")
    plain.push(client.initial_bytes())
    assert one(client.receive_data(drain(plain)), SaslClientFailed).code is None


# -- hostile backends -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"HTTP/1.1 400", "expected an AMQP protocol header"),
        (b"AMQP\x02\x01\x00\x00", "protocol id 2"),
        (SASL_HEADER + b"\x00\x00\x00\x04", "below the minimum"),
        (SASL_HEADER + b"\x00\x01\x00\x01", "exceeds the limit"),
        (SASL_HEADER + b"\x00\x00\x00\x10\x01", "data offset"),
        (SASL_HEADER + b"\x00\x00\x00\x10\x02\x00", "frame type 0"),
        (SASL_HEADER + outcome(0), "expected sasl-mechanisms"),
        (SASL_HEADER + sasl_frame(0x40, []), "no symbol or array"),
        (SASL_HEADER + sasl_frame(0x40, [7]), "no symbol or array"),
        (SASL_HEADER + sasl_frame(0x40, [[symbol("PLAIN")]]), "no symbol or array"),  # a list
        (SASL_HEADER + MECHANISMS + MECHANISMS, "expected sasl-outcome"),
        (SASL_HEADER + MECHANISMS + sasl_frame(0x42, [b"?"]), "sasl-challenge"),
        (SASL_HEADER + MECHANISMS + sasl_frame(0x44, []), "no ubyte code"),
        (SASL_HEADER + MECHANISMS + sasl_frame(0x44, ["ok"]), "no ubyte code"),
        (SASL_HEADER + frame(b"\x00S@", ftype=1), "decode"),
        (SASL_HEADER + frame(b"", ftype=1), "empty body"),
    ],
)
def test_garbage_from_the_backend_is_a_remote_protocol_error(data, text):
    for chunk in (len(data), 1):
        client = SaslClient("ANONYMOUS")
        with pytest.raises(RemoteProtocolError) as info:
            for i in range(0, len(data), chunk):
                client.receive_data(data[i : i + chunk])
        assert text in str(info.value) or text in (info.value.code or ""), info.value
        assert info.value.code and info.value.code.startswith("amqp:")
        assert client.state is SaslClientState.FAILED and client.error is info.value
        assert client.receive_data(b"x") == []


def test_the_single_mechanism_symbol_form_is_understood():
    client = SaslClient("PLAIN", username="a", password="b")
    events = client.receive_data(SASL_HEADER + sasl_frame(0x40, [symbol("PLAIN")]) + outcome(0))
    assert events == [] and client.ready


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=120).map(lambda b: SASL_HEADER + b),
        st.binary(max_size=80).map(lambda b: SASL_HEADER + MECHANISMS + b),
    ),
    st.lists(st.integers(min_value=1, max_value=50), max_size=6),
    st.sampled_from([None, "PLAIN", "ANONYMOUS"]),
)
def test_fuzz_only_events_or_remote_protocol_errors(data, sizes, mechanism):
    kw = {"username": "u", "password": "p"} if mechanism == "PLAIN" else {}
    results = []
    for cuts in ([len(data) or 1], sizes or [1]):
        client = SaslClient(mechanism, **kw)
        client.initial_bytes()
        events: list = []
        error = None
        pos = 0
        i = 0
        try:
            while pos < len(data):
                size = cuts[i % len(cuts)]
                events += client.receive_data(data[pos : pos + size])
                pos += size
                i += 1
        except RemoteProtocolError as exc:
            error = exc.code
        assert all(isinstance(e, (SaslClientDone, SaslClientFailed, Passthrough)) for e in events)
        assert client.buffered <= 65536 + 8
        joined = [e for e in events if not isinstance(e, Passthrough)]
        passed = b"".join(
            e.remaining if isinstance(e, SaslClientDone) else e.data
            for e in events
            if isinstance(e, (SaslClientDone, Passthrough))
        )
        results.append((joined and type(joined[0]), error, passed))
    assert results[0] == results[1]  # how the stream was cut changes nothing


# -- the whole forward in memory --------------------------------------------------------


USERS = {"alice": ("s3cret", {"app"})}
_APP = frozenset({"app"})
SECURITY = [
    SecuritySetting(
        match="#",
        permissions={
            p: _APP
            for p in ("send", "consume", "createAddress", "createDurableQueue", "createNonDurableQueue",
                      "deleteDurableQueue", "deleteNonDurableQueue")
        },
    )
]


class Backend:
    """A broker core's AMQP connection in memory: an AmqpProtocol on a StringTransport."""

    def __init__(self, broker: Broker):
        self.broker = broker
        factory = AmqpFactory(broker.server, acceptor=amqp_acceptor(), limits=broker.limits, reactor=broker.clock)
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 41234))
        self.protocol = factory.buildProtocol(self.transport.getPeer())
        self.protocol.makeConnection(self.transport)

    def write(self, data: bytes) -> None:
        """The gateway writes to the backend."""
        if data:
            self.protocol.dataReceived(data)
        self.broker.run()

    def read(self) -> bytes:
        """What the backend wrote to the gateway."""
        out = self.transport.value()
        self.transport.clear()
        return out


def forward(client: ProtonClient, broker: Broker, *, pipeline: bool = False):
    """The gateway's part: opening, SASL redone with the backend, replay, splice."""
    opening = AmqpOpening(Authenticator())
    done = one(run_opening(client, opening), OpeningComplete)
    backend = Backend(broker)
    sasl = SaslClient(
        done.mechanism,
        username=done.username,
        password=done.password,
        authzid=done.authzid,
        hostname=done.sasl_hostname,
    )
    backend.write(sasl.initial_bytes())
    written = False
    if pipeline or sasl.ready:  # optimistic: the opening right behind the sasl-init
        backend.write(done.after_sasl)
        written = True
    events = []
    while not events:
        data = backend.read()
        assert data, "the backend went quiet during SASL"
        events = sasl.receive_data(data)
        if not events and sasl.ready and not written:  # the outcome is in: the opening may go
            backend.write(done.after_sasl)
            written = True
    event = one(events, (SaslClientDone, SaslClientFailed))
    if isinstance(event, SaslClientFailed):
        client.push(opening.close_with("amqp:unauthorized-access", event.reason))
        return done, backend, event
    # the client has the gateway's AMQP header; the backend's was consumed
    assert not event.remaining.startswith(b"AMQP")
    client.push(event.remaining)
    splice(client, backend)
    return done, backend, event


def splice(client: ProtonClient, backend: Backend) -> None:
    """Relay both ways, without parsing, until both sides are quiet."""
    for _ in range(1000):
        up = client.take()
        backend.write(up)
        down = backend.read()
        if down:
            client.push(down)
        if not up and not down:
            return
    raise AssertionError("the splice never went quiet")


def exchange_a_message(client: ProtonClient, backend: Backend, address: str = "orders") -> None:
    ssn = client.conn.session()
    ssn.open()
    snd = ssn.sender("s")
    snd.target.address = address
    snd.open()
    rcv = ssn.receiver("r")
    rcv.source.address = address
    rcv.open()
    rcv.flow(10)
    splice(client, backend)
    assert snd.state & REMOTE_ACTIVE and rcv.state & REMOTE_ACTIVE
    dlv = snd.delivery(b"t1")
    snd.send(Message(body="through the gateway").encode())
    snd.advance()
    splice(client, backend)
    assert dlv.remote_state == Delivery.ACCEPTED
    got = rcv.current
    assert got is not None and got.readable and not got.partial
    message = Message()
    message.decode(rcv.recv(got.pending))
    assert message.body == "through the gateway"


@pytest.mark.parametrize("pipeline", [False, True])
def test_forwarded_plain_opening_completes_against_the_broker_core(pipeline):
    broker = Broker(users=USERS, security_settings=SECURITY)
    client = ProtonClient(container="forwarded-app", user="alice", password="s3cret")
    done, backend, event = forward(client, broker, pipeline=pipeline)
    # the backend's Open came right behind its header, which the gateway kept
    assert event.remaining.startswith(b"\x00\x00") and b"\x00S\x10" in event.remaining
    assert client.transport.condition is None
    assert client.conn.state & REMOTE_ACTIVE
    assert client.remote_condition is None
    assert client.conn.remote_container and client.conn.remote_container != "junction-gateway"
    info = backend.protocol.info
    assert info.client_id == "forwarded-app"
    exchange_a_message(client, backend)
    (session,) = broker.server.sessions
    assert session.user == "alice"  # the broker authenticated the client's own login
    client.conn.close()
    splice(client, backend)
    assert client.conn.state & REMOTE_CLOSED and client.remote_condition is None
    assert backend.transport.disconnecting


def test_forwarded_anonymous_opening_without_security():
    broker = Broker()
    client = ProtonClient(mechs="ANONYMOUS", user=None, container="anon-app")
    _done, backend, _event = forward(client, broker)
    assert client.conn.state & REMOTE_ACTIVE
    assert backend.protocol.info.client_id == "anon-app"
    exchange_a_message(client, backend, "anon-q")


def test_forwarded_opening_of_a_client_without_sasl():
    broker = Broker()  # security off: the core lets a client skip SASL
    client = ProtonClient(mechs=None, user=None, container="bare-app")
    opening = AmqpOpening(Authenticator(), allow_no_sasl=True)
    done = one(run_opening(client, opening), OpeningComplete)
    backend = Backend(broker)
    sasl = SaslClient(done.mechanism)
    backend.write(sasl.initial_bytes())
    assert sasl.ready
    backend.write(done.after_sasl)
    event = one(sasl.receive_data(backend.read()), SaslClientDone)
    assert b"\x00S\x10" in event.remaining and AMQP_HEADER not in event.remaining  # the Open alone
    client.push(event.remaining)
    splice(client, backend)
    assert client.conn.state & REMOTE_ACTIVE
    assert backend.protocol.info.client_id == "bare-app"


def test_backend_refusing_the_forwarded_login_closes_the_client_with_an_error():
    # The gateway accepts alice (its own users file), the core does not know her.
    broker = Broker(users={"bob": ("pw", {"app"})}, security_settings=SECURITY)
    client = ProtonClient(container="app", user="alice", password="s3cret")
    _done, backend, event = forward(client, broker)
    assert isinstance(event, SaslClientFailed) and event.code is SaslCode.AUTH
    assert backend.transport.disconnecting  # the core dropped the connection
    assert client.transport.condition is None
    assert client.conn.state & REMOTE_CLOSED
    assert client.remote_condition.name == "amqp:unauthorized-access"
    assert not broker.server.sessions
