"""AMQP SASL, both sides, and the gateway's AMQP opening reader.

``sasl-server`` -- :class:`~junction.protocols.amqp.sasl.SaslServer` (a broker
core's and the gateway's SASL layer) fed what a client sends.
``sasl-client`` -- :class:`~junction.protocols.amqp.sasl_client.SaslClient`
(the gateway logging in on a client's behalf) fed what a target sends back.
``amqp-opening`` -- :class:`~junction.protocols.amqp.opening.AmqpOpening` (the
gateway's reader of SASL and the Open) fed what a client sends.

Contract, each of them:

* the SASL layers raise only :class:`RemoteProtocolError` with an AMQP
  condition, and are FAILED after it; ``AmqpOpening`` never raises for what
  the client sent (a failure is an :class:`OpeningFailed` event);
* ``buffered`` stays within the named limit (a SASL frame: ``max_frame_size +
  8``; the opening: ``max_bytes``);
* the events, the state and what is queued for the peer do not depend on how
  the stream was cut (bytes handed on, ``remaining``/``after_sasl`` and later
  :class:`Passthrough`, are compared joined);
* what is queued is well-formed AMQP and, on a failure, ends with the
  protocol's answer: a sasl-outcome carrying the failure's code, our protocol
  header, or a Close whose condition is the failure's.
"""

from __future__ import annotations

import logging

from junction.protocols.amqp.opening import (
    MIN_OPENING_BYTES,
    AmqpOpening,
    OpeningComplete,
    OpeningFailed,
    encode_open,
)
from junction.protocols.amqp.sasl import (
    _SASL_INIT,
    AMQP_HEADER,
    SASL_HEADER,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslFailed,
    SaslRequired,
    SaslServer,
    SaslState,
    _encode_frame,
)
from junction.protocols.amqp.sasl_client import (
    SaslClient,
    SaslClientDone,
    SaslClientFailed,
    SaslClientState,
)
from junction.protocols.amqp.types import Symbol
from junction.protocols.errors import RemoteProtocolError
from tests.fuzz.common import (
    CLOSE,
    SASL_OUTCOME,
    Input,
    amqp_output,
    close_condition,
    cuts,
    same,
    sasl_outcome_code,
)

logging.getLogger("junction").setLevel(logging.CRITICAL)  # the authenticator error path logs

CONDITIONS = frozenset({"amqp:connection:framing-error", "amqp:decode-error", "amqp:not-allowed"})
MECHANISM_SETS = (("PLAIN", "ANONYMOUS"), ("PLAIN",), ("EXTERNAL", "PLAIN", "ANONYMOUS"), ("ANONYMOUS",))
FRAME_SIZES = (512, 65536)


def authenticate(credentials):
    """Accepts admin/admin, ANONYMOUS and EXTERNAL; blows up for user ``boom`` (outcome sys)."""
    if credentials.username == "boom":
        raise RuntimeError("authenticator bug")
    if credentials.mechanism == "PLAIN":
        return "admin" if (credentials.username, credentials.password) == ("admin", "admin") else None
    return credentials.mechanism.lower()


def _check_answer(out: bytes, failed_code=None, header_only=False, condition=None) -> None:
    items = amqp_output(out)
    if failed_code is not None:
        assert items and items[-1][:2] == (1, SASL_OUTCOME), items
        assert sasl_outcome_code(items[-1][2]) == failed_code, items
    if header_only:
        assert items and items[-1] == "header:3", items
    if condition is not None:
        last = items[-1] if items else None
        # SASL has no error frame: a malformed SASL frame is answered by closing (as
        # proton does); after SASL the answer is a Close with the failure's condition
        if isinstance(last, tuple) and last[1] == CLOSE:
            assert close_condition(last[2]) == condition, (items, condition)


# -- sasl-server ------------------------------------------------------------------------


def _server_stream(chunks, mechanisms, allow_no_sasl, frame_size):
    server = SaslServer(mechanisms, authenticate, allow_no_sasl=allow_no_sasl, max_frame_size=frame_size)
    events: list = []
    after = b""
    out = b""
    error = None
    for chunk in chunks:
        try:
            got = server.receive_data(chunk)
        except RemoteProtocolError as exc:
            assert exc.code in CONDITIONS, exc.code
            assert server.state is SaslState.FAILED
            error = exc.code
            got = []
        assert server.buffered <= frame_size + 8, server.buffered
        out += server.data_to_send()
        for event in got:
            if isinstance(event, (SaslAuthenticated, NoSasl)):
                after += event.remaining
                event = type(event).__name__, getattr(event, "mechanism", None), getattr(event, "principal", None)
            elif isinstance(event, Passthrough):
                after += event.data
                continue
            elif isinstance(event, SaslFailed):
                _check_answer(out, failed_code=event.code)
                event = "failed", event.mechanism, event.code  # the reason is for the log
            elif isinstance(event, SaslRequired):
                _check_answer(out, header_only=True)
            events.append(event)
        if error is not None:
            break
    amqp_output(out)
    return events, after, out, error, server.state


def fuzz_sasl_server(data: bytes) -> None:
    inp = Input(data, 4)
    mechanisms = inp.knob(0, MECHANISM_SETS)
    allow_no_sasl = inp.knob(1, (False, True))
    frame_size = inp.knob(2, FRAME_SIZES)
    results = {
        name: _server_stream(chunks, mechanisms, allow_no_sasl, frame_size)
        for name, chunks in cuts(inp.stream, inp.knobs[3])
    }
    same(results, "SASL server events")


def _init(mechanism, response=None, hostname=None) -> bytes:
    fields = [Symbol(mechanism), response, hostname]
    while fields[-1] is None:
        fields.pop()
    return _encode_frame(_SASL_INIT, fields)


def client_opening(container="app-1", mechanism="PLAIN", response=b"\0admin\0admin") -> bytes:
    return SASL_HEADER + _init(mechanism, response, "localhost") + AMQP_HEADER + encode_open(container)


def seeds_sasl_server() -> list[bytes]:
    streams = [
        client_opening(),
        client_opening(mechanism="ANONYMOUS", response=b"trace"),
        client_opening(mechanism="EXTERNAL", response=b"authz"),
        client_opening(response=b"\0admin\0wrong"),
        client_opening(response=b"\0boom\0x"),
        SASL_HEADER + _init("CRAM-MD5"),
        AMQP_HEADER + encode_open("no-sasl"),
        b"AMQP\x02\x01\x00\x00",
    ]
    return [bytes((m, a, f, 5)) + s for s in streams for m, a, f in ((0, 0, 1), (2, 1, 0))]


# -- sasl-client ------------------------------------------------------------------------

CLIENT_LOGINS = (
    ("PLAIN", {"username": "admin", "password": "admin"}),
    ("ANONYMOUS", {}),
    ("EXTERNAL", {"authzid": "cn=x"}),
    (None, {}),
)


def _client_stream(chunks, mechanism, kwargs):
    client = SaslClient(mechanism, hostname="localhost", **kwargs)
    client.initial_bytes()
    events: list = []
    after = b""
    error = None
    for chunk in chunks:
        try:
            got = client.receive_data(chunk)
        except RemoteProtocolError as exc:
            assert exc.code in CONDITIONS, exc.code
            assert client.state is SaslClientState.FAILED
            error = exc.code
            break
        assert client.buffered <= client._max_frame_size + 8, client.buffered
        for event in got:
            if isinstance(event, SaslClientDone):
                after += event.remaining
                event = "done"
            elif isinstance(event, Passthrough):
                after += event.data
                continue
            else:
                assert isinstance(event, SaslClientFailed), event
                event = "failed", event.code  # the reason is for the log
            events.append(event)
    return events, after, error, client.state, client.offered


def fuzz_sasl_client(data: bytes) -> None:
    inp = Input(data, 2)
    mechanism, kwargs = inp.knob(0, CLIENT_LOGINS)
    results = {
        name: _client_stream(chunks, mechanism, kwargs)
        for name, chunks in cuts(inp.stream, inp.knobs[1])
    }
    same(results, "SASL client events")


def seeds_sasl_client() -> list[bytes]:
    out = []
    for index, (mechanism, kwargs) in enumerate(CLIENT_LOGINS):
        client = SaslClient(mechanism, hostname="localhost", **kwargs)
        sent = client.initial_bytes()
        for password in ("admin", "nope"):
            if mechanism is None:
                out.append(bytes((index, 3)) + AMQP_HEADER + encode_open("core"))
                out.append(bytes((index, 3)) + SASL_HEADER)
                break
            server = SaslServer(("PLAIN", "ANONYMOUS", "EXTERNAL"),
                                lambda c, p=password: c.mechanism != "PLAIN" or c.password == p)
            server.receive_data(sent)
            out.append(bytes((index, 9)) + server.data_to_send() + AMQP_HEADER + encode_open("core"))
    return out


# -- amqp-opening -----------------------------------------------------------------------


def _opening_stream(chunks, mechanisms, allow_no_sasl, max_bytes):
    opening = AmqpOpening(authenticate, mechanisms=mechanisms, allow_no_sasl=allow_no_sasl,
                          max_bytes=max_bytes, max_sasl_frame_size=512)
    events: list = []
    after = b""
    out = b""
    for chunk in chunks:
        got = opening.receive_data(chunk)  # never raises
        out += opening.data_to_send()
        if opening.state.name not in ("COMPLETE", "ANSWERED"):
            assert opening.buffered <= max(max_bytes, 512 + 8), (opening.buffered, opening.state)
        for event in got:
            if isinstance(event, OpeningComplete):
                after += event.after_sasl
                event = (event.container_id, event.hostname, event.mechanism, event.principal,
                         event.username, event.password, event.authzid, event.sasl_hostname)
            elif isinstance(event, Passthrough):
                after += event.data
                continue
            else:
                assert isinstance(event, OpeningFailed), event
                assert isinstance(event.condition, str) and event.condition.startswith("amqp:"), event
                _check_answer(out, condition=event.condition)
                event = "failed", event.condition  # the reason is for the log
            events.append(event)
    amqp_output(out)
    return events, after, out, opening.state


def fuzz_opening(data: bytes) -> None:
    inp = Input(data, 4)
    mechanisms = inp.knob(0, MECHANISM_SETS)
    allow_no_sasl = inp.knob(1, (False, True))
    max_bytes = inp.knob(2, (MIN_OPENING_BYTES, 65536))
    results = {
        name: _opening_stream(chunks, mechanisms, allow_no_sasl, max_bytes)
        for name, chunks in cuts(inp.stream, inp.knobs[3])
    }
    same(results, "AMQP opening events")


def seeds_opening() -> list[bytes]:
    from junction.protocols.amqp.types import Described, Scalar, encode

    open_full = encode(Described(Scalar("ulong", 0x10), ["app", "vhost", Scalar("uint", 65536),
                                                          Scalar("ushort", 100), Scalar("uint", 30000)]))
    open_frame = (8 + len(open_full)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + open_full
    streams = seeds_sasl_server()
    streams += [
        bytes((0, 0, 1, 3)) + SASL_HEADER + _init("PLAIN", b"\0admin\0admin") + AMQP_HEADER + open_frame
        + b"\x00\x00\x00\x08\x02\x00\x00\x00",
        bytes((0, 1, 1, 3)) + AMQP_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00" + open_frame,
    ]
    return streams
