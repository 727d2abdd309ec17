"""The gateway's side of an AMQP client's opening (junction.protocols.amqp.opening).

The client is proton's own engine (``proton.Transport()`` in client mode with
SASL PLAIN or ANONYMOUS, a ``Connection`` with a container id and a
hostname), so what :class:`AmqpOpening` reads is what a real client writes,
and what it writes -- the SASL answers, the redirect, the refusals, the
error closes -- is decoded by the reference implementation, not by our
codec.  The bytes kept for replay are pushed into a fresh proton *server*
transport (the engine a broker core runs behind its SaslServer) to show
they open a connection exactly as the client meant.  Hand-made frames use
proton's codec (``proton.Data``).  Hypothesis checks that chunking never
changes the result and that hostile bytes only ever give OpeningFailed.
"""

from __future__ import annotations

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Collector, Condition, Data, Described, Endpoint, Event, symbol, ulong

from junction.protocols.amqp.opening import (
    CONNECTION_ESTABLISHMENT_FAILED,
    MAX_OPENING_BYTES,
    MIN_OPENING_BYTES,
    TRANSITIONS,
    AmqpOpening,
    OpeningComplete,
    OpeningFailed,
    OpeningInput,
    OpeningState,
    Passthrough,
)
from junction.protocols.amqp.sasl import AMQP_HEADER, SASL_HEADER, SaslCredentials
from junction.protocols.errors import LocalProtocolError
from junction.routing.targets import RouterStatus

REMOTE_ACTIVE = Endpoint.REMOTE_ACTIVE
REMOTE_CLOSED = Endpoint.REMOTE_CLOSED

USERS = {"alice": "s3cret", "bob": "hunter2"}

ESTABLISHMENT_FAILED = {symbol("amqp:connection-establishment-failed"): True}


class Authenticator:
    """PLAIN checks USERS; ANONYMOUS passes.  Records every call."""

    def __init__(self):
        self.calls: list[SaslCredentials] = []

    def __call__(self, creds: SaslCredentials):
        self.calls.append(creds)
        if creds.mechanism == "PLAIN":
            return f"user:{creds.username}" if USERS.get(creds.username) == creds.password else None
        if creds.mechanism == "ANONYMOUS":
            return "anonymous"
        return None


# -- proton's client engine -----------------------------------------------------------


class ProtonClient:
    """A proton client engine (no reactor): bytes out with :meth:`take`, in with :meth:`push`.

    ``mechs`` None: no SASL layer (the client starts with the AMQP header).
    """

    def __init__(
        self,
        *,
        mechs: str | None = "PLAIN",
        user: str | None = "alice",
        password: str | None = "s3cret",
        container: str = "app-1",
        hostname: str | None = "broker.example",
        open: bool = True,
        properties: dict | None = None,
    ):
        self.transport = proton.Transport()  # client mode
        if mechs is not None:
            sasl = self.transport.sasl()
            sasl.allowed_mechs(mechs)
            sasl.allow_insecure_mechs = True  # PLAIN without TLS
        self.conn = proton.Connection()
        self.conn.container = container
        if hostname is not None:
            self.conn.hostname = hostname
        if user is not None:
            self.conn.user = user
            self.conn.password = password
        if properties:
            self.conn.properties = properties
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport.bind(self.conn)
        if open:
            self.conn.open()

    def take(self) -> bytes:
        """What the engine has to write (everything, across its output buffers)."""
        out = b""
        while (pending := self.transport.pending()) > 0:
            out += bytes(self.transport.peek(pending))
            self.transport.pop(pending)
        return out

    def push(self, data: bytes) -> None:
        while data:
            capacity = self.transport.capacity()
            assert capacity > 0, f"client engine cannot take {len(data)} more bytes"
            self.transport.push(data[:capacity])
            data = data[capacity:]

    def event_types(self) -> list:
        out = []
        while (ev := self.collector.peek()) is not None:
            out.append(ev.type)
            self.collector.pop()
        return out

    @property
    def remote_condition(self) -> Condition | None:
        return self.conn.remote_condition


def chunks(data: bytes, size: int | None):
    if size is None:
        yield data
        return
    for i in range(0, len(data), size):
        yield data[i : i + size]


def run_opening(client: ProtonClient, opening: AmqpOpening, chunk: int | None = None) -> list:
    """Move bytes between the client engine and the opening until both are quiet."""
    events: list = []
    for _ in range(100):
        data = client.take()
        answer = b""
        for piece in chunks(data, chunk):
            events += opening.receive_data(piece)
            answer += opening.data_to_send()
        if answer:
            client.push(answer)
        if not data and not answer:
            return events
    raise AssertionError("the opening never went quiet")


def one(events: list, kind: type):
    assert len(events) == 1 and isinstance(events[0], kind), events
    return events[0]


def proton_encode(value) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def frame(body: bytes, channel: int = 0, ftype: int = 0, doff: int = 2) -> bytes:
    ext = b"\x00" * (doff * 4 - 8)
    return (8 + len(ext) + len(body)).to_bytes(4, "big") + bytes((doff, ftype)) + channel.to_bytes(2, "big") + ext + body


def performative(code, fields: list, channel: int = 0) -> bytes:
    return frame(proton_encode(Described(code, fields)), channel)


def sasl_anonymous() -> bytes:
    """A client's SASL exchange by hand: the SASL header and a sasl-init for ANONYMOUS."""
    return SASL_HEADER + frame(proton_encode(Described(ulong(0x41), [symbol("ANONYMOUS")])), ftype=1)


def past_sasl(**kw) -> AmqpOpening:
    """An opening whose (hand-made ANONYMOUS) SASL exchange is over."""
    opening = AmqpOpening(Authenticator(), **kw)
    assert opening.receive_data(sasl_anonymous()) == []
    assert opening.state is OpeningState.AWAIT_HEADER
    opening.data_to_send()
    return opening


def decode_answer(data: bytes) -> ProtonClient:
    """Push what the gateway wrote after SASL into a fresh no-SASL proton client."""
    client = ProtonClient(mechs=None, user=None)
    client.take()  # its own header and open: irrelevant here
    client.push(data)
    return client


def server_engine():
    """A proton server engine as a broker core runs it behind its SaslServer."""
    transport = proton.Transport(proton.Transport.SERVER)
    conn = proton.Connection()
    collector = Collector()
    conn.collect(collector)
    transport.bind(conn)
    return transport, conn, collector


def drain(transport) -> bytes:
    out = b""
    while (pending := transport.pending()) > 0:
        out += bytes(transport.peek(pending))
        transport.pop(pending)
    return out


# -- the opening ----------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_plain_opening_gives_container_id_and_credentials(chunk):
    auth = Authenticator()
    opening = AmqpOpening(auth)
    client = ProtonClient(container="my-app", hostname="tenant-7.example")
    done = one(run_opening(client, opening, chunk), OpeningComplete)
    assert done.container_id == "my-app"
    assert done.hostname == "tenant-7.example"
    assert done.mechanism == "PLAIN"
    assert done.principal == "user:alice"
    assert (done.username, done.password, done.authzid) == ("alice", "s3cret", None)
    assert done.after_sasl.startswith(AMQP_HEADER)
    assert opening.state is OpeningState.COMPLETE
    assert [c.username for c in auth.calls] == ["alice"]
    # The client is past SASL and has the gateway's AMQP header; it waits
    # for an Open, which the gateway leaves to whoever serves the connection.
    assert client.transport.condition is None
    assert not client.conn.state & REMOTE_ACTIVE
    assert opening.data_to_send() == b""
    # The password never shows in a repr, nor is it kept by the opening.
    assert "s3cret" not in repr(done)
    assert opening.buffered == 0


def test_anonymous_opening_has_no_credentials():
    opening = AmqpOpening(Authenticator())
    done = one(run_opening(ProtonClient(mechs="ANONYMOUS", user=None), opening), OpeningComplete)
    assert done.container_id == "app-1"
    assert done.mechanism == "ANONYMOUS"
    assert done.principal == "anonymous"
    assert (done.username, done.password) == (None, None)


def test_no_sasl_client_when_allowed():
    opening = AmqpOpening(Authenticator(), allow_no_sasl=True)
    client = ProtonClient(mechs=None, user=None, container="bare")
    done = one(run_opening(client, opening), OpeningComplete)
    assert (done.container_id, done.mechanism, done.principal) == ("bare", None, None)
    assert done.after_sasl.startswith(AMQP_HEADER)


def test_no_sasl_client_when_sasl_is_required():
    opening = AmqpOpening(Authenticator())
    client = ProtonClient(mechs=None, user=None)
    failed = one(run_opening(client, opening), OpeningFailed)
    assert failed.condition == "amqp:unauthorized-access"
    assert opening.state is OpeningState.FAILED
    assert client.transport.condition is not None  # got the SASL header: not its protocol
    assert not client.conn.state & REMOTE_ACTIVE


def test_wrong_password_fails_in_sasl():
    opening = AmqpOpening(Authenticator())
    client = ProtonClient(password="wrong")
    failed = one(run_opening(client, opening), OpeningFailed)
    assert failed.condition == "amqp:unauthorized-access"
    assert "alice" in failed.reason
    assert client.transport.condition is not None  # proton saw sasl-outcome auth
    assert not client.conn.state & REMOTE_ACTIVE
    assert opening.receive_data(b"more") == []  # ignored from now on


def test_authenticator_error_is_a_system_failure():
    def boom(creds):
        raise RuntimeError("user store down")

    failed = one(run_opening(ProtonClient(), AmqpOpening(boom)), OpeningFailed)
    assert failed.condition == "amqp:internal-error"


def test_after_sasl_replays_into_a_fresh_server_engine():
    """The bytes kept for replay open a proton server exactly as the client meant."""
    opening = AmqpOpening(Authenticator())
    client = ProtonClient(container="replayed", hostname="vhost-a")
    # The client pipelines a session and a link behind its Open.
    ssn = client.conn.session()
    ssn.open()
    snd = ssn.sender("s1")
    snd.target.address = "orders"
    snd.open()
    done = one(run_opening(client, opening), OpeningComplete)
    # Exactly what the client engine wrote after SASL: replaying it through a
    # second identical client engine would give the same bytes.
    transport, conn, collector = server_engine()
    transport.push(done.after_sasl)
    types = []
    while (ev := collector.peek()) is not None:
        types.append(ev.type)
        collector.pop()
    assert Event.CONNECTION_REMOTE_OPEN in types
    assert Event.SESSION_REMOTE_OPEN in types and Event.LINK_REMOTE_OPEN in types
    assert conn.remote_container == "replayed"
    assert conn.remote_hostname == "vhost-a"
    assert transport.condition is None
    # The backend's answer (its AMQP header and Open, its begin and attach)
    # completes the client's open.
    conn.container = "backend-core"
    conn.open()
    conn.session_head(Endpoint.REMOTE_ACTIVE | Endpoint.LOCAL_UNINIT).open()
    link = conn.link_head(Endpoint.REMOTE_ACTIVE | Endpoint.LOCAL_UNINIT)
    link.target.address = link.remote_target.address
    link.open()
    answer = drain(transport)
    # The client has the gateway's AMQP header already: the backend's is the gateway's to drop.
    assert answer.startswith(AMQP_HEADER)
    client.push(answer[8:])
    assert client.transport.condition is None
    assert client.conn.state & REMOTE_ACTIVE
    assert client.conn.remote_container == "backend-core"
    assert ssn.state & REMOTE_ACTIVE and snd.state & REMOTE_ACTIVE


def test_after_sasl_keeps_every_byte_of_a_pipelined_read_exactly():
    opening = past_sasl()
    opening_bytes = AMQP_HEADER + performative(ulong(0x10), ["c1", "h1"])
    tail = performative(ulong(0x11), [None, 0, 100, 100]) + b"\x00\x01\x02"  # begin + junk
    done = one(opening.receive_data(opening_bytes + tail), OpeningComplete)
    assert done.after_sasl == opening_bytes + tail
    # Later reads are not the opening's business: handed back untouched.
    assert opening.receive_data(b"later") == [Passthrough(b"later")]


def test_open_with_a_symbolic_descriptor_and_empty_frames_before_it():
    opening = past_sasl()
    data = (
        AMQP_HEADER
        + frame(b"")  # an empty (heartbeat) frame
        + frame(b"", doff=3)  # with an extended header
        + performative(symbol("amqp:open:list"), ["sym-client", None])
    )
    done = one(opening.receive_data(data), OpeningComplete)
    assert (done.container_id, done.hostname) == ("sym-client", None)
    assert done.after_sasl == data


# -- the protocol headers are answered at once ----------------------------------------


def sasl_plain(user: str = "alice", password: str = "s3cret") -> bytes:
    """A sasl-init frame for PLAIN, by hand."""
    response = f"\0{user}\0{password}".encode()
    return frame(proton_encode(Described(ulong(0x41), [symbol("PLAIN"), response])), ftype=1)


def byte_by_byte(opening: AmqpOpening, data: bytes) -> list[tuple[int, bytes, list]]:
    """Feed ``data`` one octet at a time: (offset, bytes queued, events) where anything happened."""
    seen = []
    for i in range(len(data)):
        events = opening.receive_data(data[i : i + 1])
        out = opening.data_to_send()
        if out or events:
            seen.append((i, out, events))
    return seen


OPEN_FRAME = performative(ulong(0x10), ["waiting-client", "h"])


def test_each_header_is_answered_as_soon_as_its_last_octet_arrives():
    """SASL header -> ours + mechanisms; sasl-init -> outcome; AMQP header -> ours; Open -> event."""
    opening = AmqpOpening(Authenticator())
    init = sasl_plain()
    stream = SASL_HEADER + init + AMQP_HEADER + OPEN_FRAME
    sasl, outcome, header, opened = byte_by_byte(opening, stream)
    assert sasl[:2] == (7, SASL_HEADER + sasl[1][8:]) and sasl[1][8 + 8 : 8 + 11] == b"\x00S@"
    assert outcome[0] == 8 + len(init) - 1 and outcome[1][8:11] == b"\x00SD"  # sasl-outcome ok
    assert header[:2] == (8 + len(init) + 7, AMQP_HEADER)  # before the first octet of the Open
    assert opened[:2] == (len(stream) - 1, b"")  # nothing more of the gateway's own
    assert sasl[2] == outcome[2] == header[2] == []
    done = one(opened[2], OpeningComplete)
    assert done.after_sasl == AMQP_HEADER + OPEN_FRAME


def test_the_amqp_header_goes_out_before_the_open_is_sent():
    """A client that waits for the server's header before its Open is answered, not left hanging."""
    opening = past_sasl()
    assert opening.receive_data(AMQP_HEADER[:7]) == [] and opening.data_to_send() == b""
    assert opening.receive_data(AMQP_HEADER[7:]) == []
    assert opening.data_to_send() == AMQP_HEADER
    assert opening.state is OpeningState.AWAIT_OPEN
    # an empty frame (a heartbeat), then the Open: no second header
    assert opening.receive_data(frame(b"")) == []
    assert opening.data_to_send() == b""
    one(opening.receive_data(OPEN_FRAME), OpeningComplete)
    assert opening.data_to_send() == b""


def test_a_client_without_sasl_gets_the_amqp_header_at_once():
    opening = AmqpOpening(Authenticator(), allow_no_sasl=True)
    seen = byte_by_byte(opening, AMQP_HEADER + OPEN_FRAME)
    assert [(at, out) for at, out, _events in seen] == [(7, AMQP_HEADER), (len(AMQP_HEADER + OPEN_FRAME) - 1, b"")]
    one(seen[-1][2], OpeningComplete)


def test_a_client_without_sasl_where_sasl_is_required_gets_the_sasl_header_only():
    opening = AmqpOpening(Authenticator())
    seen = byte_by_byte(opening, AMQP_HEADER + OPEN_FRAME)
    (at, out, events), = seen
    assert at == 7 and out == SASL_HEADER  # part 2.2: the header we support, then close
    one(events, OpeningFailed)


def test_a_proton_client_that_waits_for_the_header_before_its_open():
    """proton sends its Open only once asked to: it gets our header first, and the Open after."""
    opening = AmqpOpening(Authenticator())
    client = ProtonClient(open=False)
    answers = b""
    while data := client.take():  # proton waits for each answer before the next step
        assert opening.receive_data(data) == []
        answer = opening.data_to_send()
        answers += answer
        client.push(answer)
    assert opening.state is OpeningState.AWAIT_OPEN
    assert answers.endswith(AMQP_HEADER)  # the client's AMQP header was answered
    assert client.transport.condition is None
    client.conn.open()
    done = one(run_opening(client, opening), OpeningComplete)
    assert done.after_sasl.startswith(AMQP_HEADER)


@pytest.mark.parametrize(
    "answer",
    [
        lambda o: o.redirect("r", "h", 5672),
        lambda o: o.refuse("r", "REFUSED_UNAVAILABLE"),
        lambda o: o.close_with("amqp:connection:forced", "target down"),
    ],
    ids=["redirect", "refuse", "close_with"],
)
@pytest.mark.parametrize("when", ["before-open", "after-open"])
def test_our_amqp_header_is_never_written_twice(answer, when):
    opening = past_sasl()
    written = b""
    data = AMQP_HEADER + (OPEN_FRAME if when == "after-open" else b"")
    for i in range(len(data)):
        opening.receive_data(data[i : i + 1])
        written += opening.data_to_send()
    assert written == AMQP_HEADER  # at the client's header, before any answer
    answered = answer(opening)
    assert AMQP_HEADER not in answered and answered[8:11] == b"\x00S\x10"  # the Open comes first
    written += answered
    client = decode_answer(written)  # one header, an Open and a Close: proton is content
    assert client.transport.condition is None and client.conn.state & REMOTE_CLOSED
    # a bad first frame after the header: Open + Close, still one header
    opening = past_sasl()
    assert opening.receive_data(AMQP_HEADER) == []
    out = opening.data_to_send()
    one(opening.receive_data(performative(ulong(0x11), [None, 0, 10, 10])), OpeningFailed)
    out += opening.data_to_send()
    assert out.count(AMQP_HEADER) == 1 and decode_answer(out).remote_condition.name == "amqp:not-allowed"


# -- redirect and refusals ------------------------------------------------------------


def completed(**client_kw) -> tuple[ProtonClient, AmqpOpening]:
    opening = AmqpOpening(Authenticator(), container_id="gw-1")
    client = ProtonClient(**client_kw)
    one(run_opening(client, opening), OpeningComplete)
    client.event_types()
    return client, opening


def assert_open_then_close(client: ProtonClient) -> None:
    assert client.transport.condition is None, client.transport.condition
    types = client.event_types()
    assert Event.CONNECTION_REMOTE_OPEN in types and Event.CONNECTION_REMOTE_CLOSE in types
    assert types.index(Event.CONNECTION_REMOTE_OPEN) < types.index(Event.CONNECTION_REMOTE_CLOSE)
    assert client.conn.state & REMOTE_CLOSED
    assert client.conn.remote_container == "gw-1"
    assert client.conn.remote_properties == ESTABLISHMENT_FAILED


@pytest.mark.parametrize("chunk", [None, 1])
def test_redirect_is_artemis_open_then_close(chunk):
    client, opening = completed()
    data = opening.redirect("tenant-router", "core-2.example", 5673)
    assert AMQP_HEADER not in data  # the client had ours when it sent its header
    for piece in chunks(data, chunk):
        client.push(piece)
    assert_open_then_close(client)
    condition = client.remote_condition
    assert condition.name == "amqp:connection:redirect"
    assert condition.description == (
        "Connection router tenant-router redirected this connection to core-2.example:5673"
    )
    assert condition.info == {symbol("network-host"): "core-2.example", symbol("port"): 5673}
    port = condition.info[symbol("port")]
    assert type(port) is proton.int32  # an AMQP int, as Artemis's Integer
    assert opening.state is OpeningState.ANSWERED
    with pytest.raises(LocalProtocolError):
        opening.refuse("tenant-router", "REFUSED_UNAVAILABLE")  # only once


@pytest.mark.parametrize(
    ("status", "description"),
    [
        ("REFUSED_UNAVAILABLE", "Connection router r1 is not ready"),
        ("REFUSED_USE_ANOTHER", "Connection router r1 rejected this connection"),
        (RouterStatus.REFUSED_UNAVAILABLE, "Connection router r1 is not ready"),
        (RouterStatus.REFUSED_USE_ANOTHER, "Connection router r1 rejected this connection"),
    ],
)
def test_refusals_are_artemis_open_then_forced_close(status, description):
    client, opening = completed()
    client.push(opening.refuse("r1", status))
    assert_open_then_close(client)
    condition = client.remote_condition
    assert (condition.name, condition.description) == ("amqp:connection:forced", description)
    assert condition.info is None


def test_refuse_rejects_an_unknown_status():
    _client, opening = completed()
    with pytest.raises(ValueError):
        opening.refuse("r1", RouterStatus.OK)
    with pytest.raises(ValueError):
        opening.redirect("r1", "h", 70000)


def test_close_with_any_condition_and_before_the_open():
    # After SASL but before the client's AMQP header: our header comes first.
    opening = past_sasl()
    data = opening.close_with("amqp:unauthorized-access", "backend refused alice")
    assert data.startswith(AMQP_HEADER)
    client = decode_answer(data)
    assert client.remote_condition.name == "amqp:unauthorized-access"
    assert client.remote_condition.description == "backend refused alice"
    assert client.conn.remote_properties == ESTABLISHMENT_FAILED
    # Anything still queued (the SASL outcome) is written first.
    opening = AmqpOpening(Authenticator())
    opening.receive_data(sasl_anonymous())
    data = opening.refuse("r", "REFUSED_UNAVAILABLE")
    assert data.startswith(SASL_HEADER) and AMQP_HEADER in data


def test_answers_are_refused_before_sasl_is_over_and_after_a_failure():
    opening = AmqpOpening(Authenticator())
    with pytest.raises(LocalProtocolError):
        opening.redirect("r", "h", 1)
    opening.receive_data(b"HTTP/1.1")
    assert opening.state is OpeningState.FAILED
    with pytest.raises(LocalProtocolError):
        opening.refuse("r", "REFUSED_UNAVAILABLE")


# -- hostile input --------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x01\x02\x00", b"AMQP\x02\x01\x00\x00", b"AMQP\x03\x01\x00\x00\x00\x00\x00\x01"],
)
def test_garbage_before_or_in_sasl_fails_without_raising(garbage):
    opening = AmqpOpening(Authenticator())
    failed = one(opening.receive_data(garbage), OpeningFailed)
    assert failed.condition in ("amqp:connection:framing-error", "amqp:decode-error")
    assert opening.data_to_send().startswith(SASL_HEADER)  # the header we support
    assert opening.state is OpeningState.FAILED


@pytest.mark.parametrize("header", [SASL_HEADER, b"AMQP\x00\x01\x00\x01", b"HTTP/1.1", b"AMQX"])
def test_wrong_amqp_header_after_sasl_is_answered_with_ours(header):
    opening = past_sasl()
    failed = one(opening.receive_data(header), OpeningFailed)
    assert failed.condition == "amqp:connection:framing-error"
    assert opening.data_to_send() == AMQP_HEADER  # part 2.2: our header, then close


@pytest.mark.parametrize(
    ("first", "condition", "text"),
    [
        (performative(ulong(0x11), [None, 0, 10, 10]), "amqp:not-allowed", "got begin"),
        (performative(ulong(0x18), []), "amqp:not-allowed", "got close"),
        (performative(ulong(0x77), ["x"]), "amqp:not-allowed", "unknown performative"),
        (performative(ulong(0x10), []), "amqp:decode-error", "container-id is missing"),
        (performative(ulong(0x10), [5]), "amqp:decode-error", "container-id is a int"),
        (performative(ulong(0x10), ["c", 7]), "amqp:decode-error", "hostname is a int"),
        (frame(proton_encode(Described(ulong(0x10), ["c"])) + b"\x40"), "amqp:decode-error", "after the open"),
        (frame(proton_encode(Described(ulong(0x10), "c"))), "amqp:decode-error", "not a described list"),
        (frame(proton_encode("just a string")), "amqp:decode-error", "not a performative"),
        (frame(b"\xc0\xff\x01"), "amqp:decode-error", "malformed"),
        (frame(b"\x00S\x10", ftype=1), "amqp:connection:framing-error", "SASL frame"),
        (frame(b"\x00S\x10", ftype=9), "amqp:connection:framing-error", "frame type 9"),
        (b"\x00\x00\x00\x04", "amqp:connection:framing-error", "below the minimum"),
        (b"\x00\x00\x00\x10\x01", "amqp:connection:framing-error", "data offset 1"),
        (b"\x00\x00\x00\x10\x05", "amqp:connection:framing-error", "data offset 5"),
    ],
)
def test_a_bad_first_frame_gets_open_and_close_with_the_condition(first, condition, text):
    opening = past_sasl()
    # Byte by byte must find the same error as all at once.
    whole = opening.receive_data(AMQP_HEADER + first)
    answer = opening.data_to_send()
    failed = one(whole, OpeningFailed)
    assert failed.condition == condition
    assert text in failed.reason, failed.reason
    client = decode_answer(answer)
    assert client.transport.condition is None
    assert client.remote_condition.name == condition
    assert client.remote_condition.description == failed.reason
    assert client.conn.remote_properties == ESTABLISHMENT_FAILED
    slow = past_sasl()
    events = []
    for i in range(len(AMQP_HEADER + first)):
        events += slow.receive_data((AMQP_HEADER + first)[i : i + 1])
    assert events == whole
    assert slow.data_to_send() == answer


def test_an_open_beyond_the_limit_fails_as_soon_as_its_size_arrives():
    limit = MIN_OPENING_BYTES
    fits = ProtonClient(mechs=None, user=None, container="c" * 300)
    done = one(run_opening(fits, AmqpOpening(Authenticator(), allow_no_sasl=True, max_bytes=limit)), OpeningComplete)
    assert len(done.after_sasl) <= limit
    big = ProtonClient(mechs=None, user=None, container="c" * 600)
    opening = AmqpOpening(Authenticator(), allow_no_sasl=True, max_bytes=limit)
    data = big.take()
    assert len(data) > limit
    failed = one(opening.receive_data(data[:12]), OpeningFailed)  # header + the size octets
    assert failed.condition == "amqp:connection:framing-error"
    assert f"limit of {limit} octets" in failed.reason
    big.push(opening.data_to_send())
    assert big.remote_condition.name == "amqp:connection:framing-error"
    assert opening.buffered == 0


def test_open_of_exactly_the_limit_fits():
    def opening_of(n: int) -> bytes:
        return AMQP_HEADER + performative(ulong(0x10), ["x" * n])

    n = next(n for n in range(1, 600) if len(opening_of(n)) == MIN_OPENING_BYTES)
    opening = past_sasl(max_bytes=MIN_OPENING_BYTES)
    one(opening.receive_data(opening_of(n)), OpeningComplete)
    opening = past_sasl(max_bytes=MIN_OPENING_BYTES)
    failed = one(opening.receive_data(opening_of(n + 1)), OpeningFailed)
    assert "opening limit" in failed.reason


def test_limits_are_checked():
    with pytest.raises(ValueError):
        AmqpOpening(Authenticator(), max_bytes=MIN_OPENING_BYTES - 1)
    with pytest.raises(ValueError):
        AmqpOpening(Authenticator(), mechanisms=("GSSAPI",))
    assert AmqpOpening(Authenticator()).max_bytes == MAX_OPENING_BYTES


def test_transition_table_covers_every_state():
    states = {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values())
    assert states == set(OpeningState)
    # Terminal states only absorb data; ANSWER is possible only after SASL.
    for terminal in (OpeningState.ANSWERED, OpeningState.FAILED):
        assert {i for s, i in TRANSITIONS if s is terminal} == {OpeningInput.DATA}
    assert (OpeningState.SASL, OpeningInput.ANSWER) not in TRANSITIONS


# -- chunking and fuzz ----------------------------------------------------------------


def client_stream(**kw) -> tuple[bytes, bytes]:
    """A real client's whole opening as bytes (before SASL, after SASL), via a reference run."""
    opening = AmqpOpening(Authenticator())
    client = ProtonClient(**kw)
    sent = b""
    for _ in range(20):
        data = client.take()
        sent += data
        opening.receive_data(data)
        answer = opening.data_to_send()
        if answer:
            client.push(answer)
        if not data and not answer:
            break
    return sent, opening


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def feed(data_chunks: list[bytes], **kw) -> tuple[list, bytes, AmqpOpening]:
    opening = AmqpOpening(Authenticator(), **kw)
    events: list = []
    out = b""
    for piece in data_chunks:
        events += opening.receive_data(piece)
        out += opening.data_to_send()
    return events, out, opening


STREAM, _ = client_stream(container="fuzz-app")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_chunking_never_changes_the_result(cuts):
    whole_events, whole_out, _ = feed([STREAM])
    events, out, _ = feed(cut(STREAM, cuts))
    assert events == whole_events
    assert out == whole_out
    done = one(events, OpeningComplete)
    assert done.container_id == "fuzz-app" and done.password == "s3cret"


@st.composite
def mutated(draw):
    """A real client's stream with bytes flipped, dropped or inserted, or plain noise."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    data = bytearray(STREAM)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        pos = draw(st.integers(min_value=0, max_value=len(data)))
        op = draw(st.sampled_from(["flip", "drop", "insert"]))
        if op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(min_value=0, max_value=255))
        elif op == "drop":
            del data[pos : pos + draw(st.integers(min_value=1, max_value=8))]
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=8), st.booleans())
def test_fuzz_hostile_bytes_only_ever_give_opening_failed(data, cuts, allow_no_sasl):
    events, _out, opening = feed(cut(data, cuts), allow_no_sasl=allow_no_sasl, max_bytes=MIN_OPENING_BYTES)
    kinds = [type(e) for e in events]
    assert kinds in ([], [OpeningFailed], [OpeningComplete]) or (
        kinds[0] is OpeningComplete and set(kinds[1:]) <= {Passthrough}
    ), events
    if kinds == [OpeningFailed]:
        assert opening.state is OpeningState.FAILED
        assert events[0].condition and events[0].condition.startswith("amqp:")
    assert opening.buffered <= MIN_OPENING_BYTES + 65536 + 8
    # Whatever the cut, the same outcome (and the same bytes handed on).
    whole_events, whole_out, _ = feed([data], allow_no_sasl=allow_no_sasl, max_bytes=MIN_OPENING_BYTES)
    assert normalized(events) == normalized(whole_events)
    assert _out == whole_out


def normalized(events: list) -> list:
    """Events with a completed opening's after_sasl and later passthroughs joined.

    Where the Open ends inside a read, the rest of that read goes with it in
    after_sasl; later reads come back as Passthrough: only the concatenation
    is independent of how the stream was cut.  A failure's reason may quote
    the bytes seen so far (a bad protocol header); its condition, and the
    bytes written to the client, may not vary.
    """
    if events and isinstance(events[0], OpeningFailed):
        return [("failed", events[0].condition)] + events[1:]
    if not events or not isinstance(events[0], OpeningComplete):
        return events
    done = events[0]
    rest = b"".join(e.data for e in events[1:])
    return [(done.container_id, done.hostname, done.mechanism, done.username, done.after_sasl + rest)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.lists(st.integers(min_value=0, max_value=1000), max_size=6))
def test_fuzz_after_sasl_never_raises(data, cuts):
    opening = past_sasl()
    events = []
    for piece in cut(AMQP_HEADER + data, cuts):
        events += opening.receive_data(piece)
    assert all(isinstance(e, (OpeningFailed, OpeningComplete, Passthrough)) for e in events)
    out = opening.data_to_send()
    if opening.state is OpeningState.FAILED and out != AMQP_HEADER:
        client = decode_answer(out)
        assert client.transport.condition is None
        assert client.remote_condition.name == opening.failure.condition


def test_constants():
    assert CONNECTION_ESTABLISHMENT_FAILED == "amqp:connection-establishment-failed"
