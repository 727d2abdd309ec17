"""CORE JMS map/stream/object bodies <-> AMQP values (junction.brokercore.jms_bodies)."""

from __future__ import annotations

import pytest

from junction.brokercore import jms_bodies
from junction.protocols.amqp.types import Scalar as AmqpScalar
from junction.protocols.core.values import Scalar

VALUES = [
    "text é",
    "long text that is over nine characters",
    True,
    None,
    2**40,
    2.5,
    b"\x00\xff",
    Scalar("int", -7),
    Scalar("byte", -3),
    Scalar("short", 300),
    Scalar("float", 1.5),
    Scalar("char", "x"),
]


def test_stream_round_trips_every_type():
    assert jms_bodies.core_stream(jms_bodies.stream_body(VALUES)) == VALUES


def test_map_round_trips_every_type():
    entries = {f"k{i}": v for i, v in enumerate(VALUES)}
    assert jms_bodies.core_map(jms_bodies.map_body(entries)) == entries


def test_amqp_widths_become_core_widths():
    got = jms_bodies.core_stream(
        jms_bodies.stream_body(
            [AmqpScalar("int", 5), AmqpScalar("ubyte", 200), AmqpScalar("uint", 9)]
        )
    )
    assert got == [Scalar("int", 5), Scalar("short", 200), 9]
    assert jms_bodies.amqp_value(Scalar("int", 5)) == AmqpScalar("int", 5)


def test_object_body_is_length_prefixed():
    body = jms_bodies.object_body(b"\xac\xed\x00\x05")
    assert body == b"\x00\x00\x00\x04\xac\xed\x00\x05"
    assert jms_bodies.core_object(body) == b"\xac\xed\x00\x05"


@pytest.mark.parametrize("bad", [b"\x00\x00", b"\x00\x00\x00\x09abc"])
def test_a_malformed_object_body_is_not_converted(bad):
    with pytest.raises(jms_bodies.NotConvertible):
        jms_bodies.core_object(bad)


def test_a_malformed_stream_body_is_not_converted():
    with pytest.raises(jms_bodies.NotConvertible):
        jms_bodies.core_stream(b"\x63")
    with pytest.raises(jms_bodies.NotConvertible):
        jms_bodies.core_stream(b"\x06\x00")  # an int cut short
