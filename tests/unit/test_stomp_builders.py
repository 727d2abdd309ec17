"""The frames a STOMP server (and a client opening a connection) writes (junction.protocols.stomp.builders) and the one fast encoder.

The shortcuts (:func:`encode_plain`, :func:`encode_message`, :func:`receipt_for`)
must write exactly what the codec writes for the same frame, in every version,
and step aside (None, or a Frame) whenever the codec would escape, check or
refuse something.  Hypothesis draws the tricky text.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.errors import LocalProtocolError
from junction.protocols.stomp import Frame, StompCodec
from junction.protocols.stomp.builders import (
    carriable,
    connect_frame,
    connected_frame,
    disconnect_frame,
    encode_message,
    header_text,
    login_refused,
    message_frame,
    message_head,
    receipt_for,
    security_error,
)
from junction.protocols.stomp.codec import encode_plain

VERSIONS = ("1.0", "1.1", "1.2")
_TRICKY = st.text(alphabet=st.sampled_from(["a", "é", ":", "\n", "\r", "\\", "\0", " "]), max_size=6)
_TEXT = st.one_of(st.text(alphabet="abcé -_.", max_size=6), _TRICKY)


def codec(version: str) -> StompCodec:
    c = StompCodec(server=True)
    c.set_version(version)
    return c


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=4), st.sampled_from(VERSIONS), st.binary(max_size=4))
def test_encode_plain_is_the_codecs_path_or_steps_aside(headers, version, body):
    headers = tuple(headers)
    text = "\n".join(map(":".join, headers))
    fast = encode_plain("RECEIPT", text, len(headers), body)
    if fast is None:
        return
    # Only text that needs nothing is taken: every version writes it as it is.
    for v in VERSIONS:
        frame = Frame("RECEIPT", headers, body)
        if b"\0" in body or "content-length" in text:
            continue  # framing the codec adds; callers of encode_plain frame the body themselves
        assert codec(v).send(frame) == fast


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("receipt", ["r-1", "", "a:b", "a\\b", "line\nbreak", "cr\r", "nul\0", "é"])
def test_receipt_for(version, receipt):
    built = receipt_for(receipt)
    frame = Frame("RECEIPT", (("receipt-id", receipt),))
    if isinstance(built, bytes):
        assert built == codec(version).send(frame)
    else:
        assert built == frame


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    sub_id=_TEXT.filter(bool),
    mid=st.one_of(st.just("7"), _TEXT),
    ack=st.one_of(st.none(), st.just("3,7"), _TEXT),
    persistent=st.booleans(),
    priority=st.integers(0, 9),
    redelivered=st.booleans(),
    destination=_TEXT,
    correlation_id=st.one_of(st.none(), _TEXT),
    reply_to=st.one_of(st.none(), _TEXT),
    properties=st.dictionaries(
        st.one_of(_TEXT, st.sampled_from(["JMSType", "content-length"])),
        st.one_of(_TEXT, st.integers(), st.booleans(), st.none(), st.binary(max_size=3)),
        max_size=3,
    ),
    body=st.one_of(st.just(b""), st.binary(max_size=6)),
)
def test_encode_message_is_what_the_codec_writes_of_message_frame(
    version, sub_id, mid, ack, persistent, priority, redelivered, destination, correlation_id, reply_to,
    properties, body,
):
    args = (mid, ack, persistent, priority, 123, 0, redelivered, destination, correlation_id, reply_to,
            properties, body, header_text)
    fast = encode_message(message_head(sub_id), *args)
    frame = message_frame(version, sub_id, *args)
    try:
        slow = codec(version).send(frame)
    except LocalProtocolError:
        assert fast is None
        return
    if fast is not None:
        assert fast == slow


def test_message_frame_leaves_out_what_the_version_cannot_carry():
    frame = message_frame("1.0", "s", "m", None, True, 4, 1, 0, False, "/queue/q", "c\n1", None,
                          {"ok": "x", "bad": "a\nb"}, b"", header_text)
    assert frame.get("correlation-id") is None and frame.get("bad") is None and frame.get("ok") == "x"
    assert carriable("bad", "a\nb", "1.1") and not carriable("bad", "a\nb", "1.0")
    assert not carriable("", "x", "1.2") and not carriable("n", "x\0", "1.2")
    assert not carriable("n", "x\r", "1.1") and carriable("n", "x\r", "1.2")


def test_header_text():
    assert [header_text(v) for v in (True, False, None, b"\xc3\xa9", 5, "s")] == ["true", "false", "", "é", "5", "s"]


def test_texts_are_the_brokers():
    assert login_refused("bob") == (
        "Security Error occurred: User name [bob] or password is invalid",
        "Authentication failed: check login and passcode",
    )
    assert login_refused(None)[0] == "Security Error occurred: User name [None] or password is invalid"
    assert security_error("User bob does not have permission='SEND' on address q") == (
        "Security Error occurred: User bob does not have permission='SEND' on address q"
    )


def test_connected_frame_header_order():
    assert connected_frame("1.1", "s", "J/1", [("x", "y")], "10,20") == Frame(
        "CONNECTED", (("version", "1.1"), ("session", "s"), ("server", "J/1"), ("x", "y"), ("heart-beat", "10,20"))
    )
    assert connected_frame("1.0", "s", "J/1").headers == (("version", "1.0"), ("session", "s"), ("server", "J/1"))


def test_connect_frame_header_order_and_optional_login():
    assert connect_frame("1.0,1.1", "h", "0,0", [("client-id", "c")], "u", "p") == Frame(
        "CONNECT",
        (
            ("accept-version", "1.0,1.1"),
            ("host", "h"),
            ("heart-beat", "0,0"),
            ("client-id", "c"),
            ("login", "u"),
            ("passcode", "p"),
        ),
    )
    assert connect_frame("1.2", "h").headers == (("accept-version", "1.2"), ("host", "h"), ("heart-beat", "0,0"))
    assert connect_frame("1.2", "h", login="u").headers[-1] == ("login", "u")
    assert connect_frame("1.2", "h", login="u", passcode="").headers[-1] == ("passcode", "")


def test_a_client_connect_is_what_a_server_reads():
    wire = StompCodec(server=False).send(connect_frame("1.1", "h:1", "0,0", login="u", passcode="p:w"))
    assert wire == b"CONNECT\naccept-version:1.1\nhost:h:1\nheart-beat:0,0\nlogin:u\npasscode:p:w\n\n\x00"
    (frame,) = StompCodec(server=True).receive_data(wire)
    assert frame.command == "CONNECT" and frame.get("passcode") == "p:w"


def test_disconnect_frame():
    assert disconnect_frame() == Frame("DISCONNECT", ())
    assert disconnect_frame("r-1") == Frame("DISCONNECT", (("receipt", "r-1"),))
    assert StompCodec(server=False).send(disconnect_frame("r-1")) == b"DISCONNECT\nreceipt:r-1\n\n\x00"
