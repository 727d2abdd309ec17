"""junction.protocols.detect: the first bytes of each protocol, fed whole and byte by byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from junction.protocols.cluster.link import PREAMBLE
from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, UNKNOWN, describe, detect

# A WireFormatInfo as ActiveMQ's client sends it first (size, type 1, magic).
OPENWIRE = b"\x00\x00\x01\x2c\x01ActiveMQ\x00\x00\x00\x0c\x01\x00\x00\x01\x1a"
MQTT = b"\x10\x17\x00\x04MQTT\x04\x02\x00\x3c\x00\x0bclient-id-1"

OPENINGS = [
    (b"AMQP\x03\x01\x00\x00", "AMQP"),
    (b"AMQP\x00\x01\x00\x00\x00\x00\x00\x21", "AMQP"),
    (b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00", "STOMP"),
    (b"STOMP\naccept-version:1.2\n\n\x00", "STOMP"),
    (b"\r\n\nCONNECT\n\n\x00", "STOMP"),
    (b"ARTEMIS\x00\x00\x00\x10", "CORE"),
    (b"HORNETQ\x00", "CORE"),
    (OPENWIRE, "OPENWIRE"),
    (MQTT, "MQTT"),
    (PREAMBLE + b"\x00\x00\x00\x10\x01{}", "CLUSTER"),  # a cluster link: preamble, then HELLO
    (b"JNCL\x02\x00\x00\x00", "CLUSTER"),  # another link version: the link codec refuses it
]


@pytest.mark.parametrize("data,expected", OPENINGS)
def test_whole_opening(data, expected):
    assert detect(data) == expected


@pytest.mark.parametrize("data,expected", OPENINGS)
def test_byte_by_byte_needs_more_until_known(data, expected):
    answers = [detect(data[: i + 1]) for i in range(len(data))]
    first = next(i for i, a in enumerate(answers) if a != NEED_MORE)
    assert answers[first] == expected
    assert all(a == NEED_MORE for a in answers[:first])
    assert first < MAX_SNIFF_BYTES


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
        b"SEND\ndestination:/queue/a\n\n\x00",  # STOMP, but not an opening frame
        b"\x00\x00\x00\x10\x02ActiveMQ",  # OpenWire framing, wrong command type
        b"\x10\x0a\x00\x04ABCD\x04\x02",  # MQTT framing, wrong protocol name
        b"JNCX hello",  # almost the cluster link magic
        b"JX",
        b"jncl hello",  # the magic is case-sensitive
    ],
)
def test_unknown(data):
    assert detect(data) == UNKNOWN


def test_only_eols_need_more_then_unknown():
    assert detect(b"\n" * 3) == NEED_MORE
    assert detect(b"\n" * MAX_SNIFF_BYTES) == UNKNOWN


@given(st.binary(max_size=MAX_SNIFF_BYTES))
def test_any_bytes_get_an_answer(data):
    assert detect(data) in {
        NEED_MORE, UNKNOWN, "AMQP", "STOMP", "CORE", "OPENWIRE", "MQTT", "CLUSTER"
    }


@pytest.mark.parametrize("prefix", [b"J", b"JN", b"JNC"])
def test_cluster_magic_prefix_needs_more(prefix):
    assert detect(prefix) == NEED_MORE


def test_cluster_is_the_link_preamble():
    assert detect(PREAMBLE) == "CLUSTER"
    assert detect(PREAMBLE[:4]) == "CLUSTER"


@given(st.binary(max_size=MAX_SNIFF_BYTES))
def test_cluster_only_for_the_magic(data):
    assert (detect(data) == "CLUSTER") == data.startswith(b"JNCL")


@pytest.mark.parametrize("data,expected", [o for o in OPENINGS if o[1] != "CLUSTER"])
def test_other_openings_unchanged_behind_cluster_bytes(data, expected):
    # The cluster check only claims data starting with J; everything else is as before.
    assert not data.startswith(b"J")
    assert detect(data) == expected


def test_describe_is_bounded():
    text = describe(b"x" * 1000, limit=8)
    assert text.startswith("b'xxxxxxxx'...") and "(1000 bytes)" in text
