"""The broadcast datagram (``junction.protocols.cluster.broadcast``): round trips, malformed input, limits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from junction.protocols.cluster.broadcast import (
    HEADER_BYTES,
    MAGIC,
    MAX_CONNECTORS,
    MAX_DATAGRAM_BYTES,
    MAX_SEQUENCE,
    VERSION,
    AnnouncedConnector,
    Announcement,
    decode_announcement,
    encode_announcement,
)
from junction.protocols.errors import RemoteProtocolError

HEADER = MAGIC + bytes([VERSION])


def connector(name="netty", host="10.0.0.1", port=61616, params=None) -> AnnouncedConnector:
    return AnnouncedConnector(name, host, port, params or {})


def announcement(**kw) -> Announcement:
    fields = {"node_id": "node-1", "name": "broker1", "sequence": 1, "connectors": (connector(),)}
    fields.update(kw)
    return Announcement(**fields)


def body(**overrides) -> dict:
    obj = {
        "node_id": "node-1",
        "name": "broker1",
        "sequence": 3,
        "connectors": [{"name": "netty", "host": "10.0.0.1", "port": 61616, "params": {"a": "b"}}],
    }
    obj.update(overrides)
    return obj


def datagram(obj, header: bytes = HEADER) -> bytes:
    return header + json.dumps(obj).encode("utf-8")


def with_connector(**overrides) -> bytes:
    c = {"name": "netty", "host": "10.0.0.1", "port": 61616, "params": {}}
    c.update(overrides)
    return datagram(body(connectors=[c]))


def refused(data, code: str | None = None) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_announcement(data)
    if code is not None:
        assert info.value.code == code, str(info.value)
    return info.value


# --------------------------------------------------------------------------- round trips


def test_round_trip():
    a = announcement(
        sequence=42,
        connectors=(
            connector("netty", "10.0.0.1", 61616, {"sslEnabled": "true", "tcpNoDelay": "false"}),
            connector("amqp", "broker1.example", 5672),
        ),
    )
    data = encode_announcement(a)
    assert data.startswith(b"JNCB\x01")
    assert decode_announcement(data) == a


def test_layout_is_magic_version_then_json_object():
    a = announcement(connectors=(connector(params={"k": "v"}),))
    data = encode_announcement(a)
    assert data[:4] == b"JNCB" and data[4] == 1
    assert json.loads(data[5:].decode("utf-8")) == {
        "node_id": "node-1",
        "name": "broker1",
        "sequence": 1,
        "connectors": [{"name": "netty", "host": "10.0.0.1", "port": 61616, "params": {"k": "v"}}],
    }


def test_round_trip_no_connectors_and_empty_name():
    a = announcement(name="", connectors=())
    assert decode_announcement(encode_announcement(a)) == a


def test_round_trip_non_ascii():
    a = announcement(
        node_id="nœud-ü", name="brøker ✓", connectors=(connector("ç", "hôte.example", 1, {"clé": "valeur ✓"}),)
    )
    assert decode_announcement(encode_announcement(a)) == a


def test_decode_accepts_bytearray_and_memoryview():
    data = encode_announcement(announcement())
    assert decode_announcement(bytearray(data)) == announcement()
    assert decode_announcement(memoryview(data)) == announcement()


def test_params_mapping_and_pairs_are_the_same_and_hashable():
    a = connector(params={"b": "2", "a": "1"})
    b = connector(params=[("a", "1"), ("b", "2")])
    assert a == b and hash(a) == hash(b)
    assert a.params == (("a", "1"), ("b", "2"))
    assert a.params_dict() == {"a": "1", "b": "2"}
    assert hash(announcement(connectors=[a])) == hash(announcement(connectors=(b,)))
    assert isinstance(announcement(connectors=[a]).connectors, tuple)


def test_dataclasses_are_frozen():
    a = announcement()
    with pytest.raises(AttributeError):
        a.sequence = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.connectors[0].port = 1  # type: ignore[misc]


def test_unknown_keys_are_ignored():
    obj = body(future="x", extra={"nested": [1, 2]})
    obj["connectors"][0]["weight"] = 7
    a = decode_announcement(datagram(obj))
    assert a == Announcement("node-1", "broker1", 3, (connector(params={"a": "b"}),))


def test_connector_params_may_be_omitted():
    obj = body(connectors=[{"name": "netty", "host": "h", "port": 1}])
    assert decode_announcement(datagram(obj)).connectors == (AnnouncedConnector("netty", "h", 1),)


_text = st.text(min_size=1, max_size=20)


@given(
    node_id=_text,
    name=st.text(max_size=20),
    sequence=st.integers(0, MAX_SEQUENCE),
    connectors=st.lists(
        st.builds(
            AnnouncedConnector,
            name=_text,
            host=_text,
            port=st.integers(1, 65535),
            params=st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4),
        ),
        max_size=5,
    ),
)
def test_round_trip_property(node_id, name, sequence, connectors):
    a = Announcement(node_id, name, sequence, tuple(connectors))
    assert decode_announcement(encode_announcement(a)) == a


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_remote_protocol_error(data):
    for candidate in (data, HEADER + data):
        try:
            decode_announcement(candidate)
        except RemoteProtocolError:
            pass


# --------------------------------------------------------------------------- malformed datagrams


@pytest.mark.parametrize("data", [b"", b"J", b"JNCB", b"XXXX\x01{}", b"jncb\x01{}", b"{\"node_id\": 1}"])
def test_bad_magic_or_too_short(data):
    refused(data, "bad-magic")


@pytest.mark.parametrize("version", [0, 2, 255])
def test_other_versions_are_refused_clearly(version):
    e = refused(datagram(body(), MAGIC + bytes([version])), "unsupported-version")
    assert f"version {version}" in str(e) and "1" in str(e)


@pytest.mark.parametrize(
    "payload",
    [b"\xff\xfe", b"{\"node_id\": \"\xc3\x28\"}", b"\xed\xa0\x80"],
    ids=["invalid-start-byte", "invalid-continuation", "surrogate"],
)
def test_body_not_utf8(payload):
    refused(HEADER + payload, "bad-encoding")


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"{",
        b"{}}",
        b"not json",
        b'{"node_id": "a", "node_id": "b", "name": "", "sequence": 1, "connectors": []}',
        b'{"node_id": "a", "name": "", "sequence": NaN, "connectors": []}',
        b'{"node_id": "a", "name": "", "sequence": Infinity, "connectors": []}',
        b"[" * 30_000 + b"]" * 30_000,
    ],
    ids=["empty", "unterminated", "trailing", "text", "duplicate-key", "nan", "infinity", "deep"],
)
def test_body_not_json(payload):
    refused(HEADER + payload, "bad-json")


@pytest.mark.parametrize("top", [[], "x", 1, None, True])
def test_body_not_an_object(top):
    refused(datagram(top), "bad-field")


@pytest.mark.parametrize("key", ["node_id", "name", "sequence", "connectors"])
def test_missing_key(key):
    obj = body()
    del obj[key]
    e = refused(datagram(obj), "bad-field")
    assert key in str(e)


@pytest.mark.parametrize(
    "overrides",
    [
        {"node_id": 1},
        {"node_id": None},
        {"node_id": ""},
        {"node_id": ["a"]},
        {"name": 1},
        {"name": None},
        {"sequence": "1"},
        {"sequence": 1.0},
        {"sequence": True},
        {"sequence": -1},
        {"sequence": MAX_SEQUENCE + 1},
        {"sequence": None},
        {"connectors": {}},
        {"connectors": "netty"},
        {"connectors": None},
        {"connectors": ["netty"]},
        {"connectors": [None]},
        {"connectors": [[]]},
    ],
)
def test_bad_top_level_fields(overrides):
    refused(datagram(body(**overrides)), "bad-field")


@pytest.mark.parametrize("key", ["name", "host", "port"])
def test_connector_missing_key(key):
    c = {"name": "netty", "host": "h", "port": 1, "params": {}}
    del c[key]
    e = refused(datagram(body(connectors=[c])), "bad-field")
    assert key in str(e) and "connector 0" in str(e)


@pytest.mark.parametrize(
    "overrides",
    [
        {"name": 1},
        {"name": ""},
        {"host": None},
        {"host": ""},
        {"port": "61616"},
        {"port": 61616.0},
        {"port": True},
        {"port": 0},
        {"port": -1},
        {"port": 65536},
        {"params": []},
        {"params": "a=b"},
        {"params": None},
        {"params": {"a": 1}},
        {"params": {"a": None}},
        {"params": {"a": True}},
        {"params": {"a": {"b": "c"}}},
    ],
)
def test_bad_connector_fields(overrides):
    refused(with_connector(**overrides), "bad-field")


def test_duplicate_param_key_in_json_is_refused():
    payload = (
        b'{"node_id":"n","name":"","sequence":1,"connectors":'
        b'[{"name":"c","host":"h","port":1,"params":{"a":"1","a":"2"}}]}'
    )
    refused(HEADER + payload, "bad-json")


def test_truncated_datagram_is_refused():
    data = encode_announcement(announcement())
    for cut in range(HEADER_BYTES, len(data)):
        refused(data[:cut])


def test_errors_are_remote_protocol_errors_with_clear_text():
    e = refused(b"GARBAGE!")
    assert "broadcast datagram" in str(e) and "magic" in str(e)


# --------------------------------------------------------------------------- limits


def test_max_connectors_round_trip():
    a = announcement(connectors=tuple(connector(f"c{i}", "h", 1000 + i) for i in range(MAX_CONNECTORS)))
    assert decode_announcement(encode_announcement(a)) == a


def test_more_than_max_connectors_cannot_be_built():
    with pytest.raises(ValueError, match=str(MAX_CONNECTORS)):
        announcement(connectors=tuple(connector(f"c{i}") for i in range(MAX_CONNECTORS + 1)))


def test_more_than_max_connectors_is_refused_on_decode():
    c = {"name": "c", "host": "h", "port": 1, "params": {}}
    e = refused(datagram(body(connectors=[c] * (MAX_CONNECTORS + 1))), "bad-field")
    assert str(MAX_CONNECTORS) in str(e)


def _sized_announcement(target_size: int) -> Announcement:
    """An announcement whose datagram is exactly ``target_size`` bytes."""
    base = len(encode_announcement(announcement(name="")))
    return announcement(name="x" * (target_size - base))


def test_datagram_of_exactly_the_limit_round_trips():
    a = _sized_announcement(MAX_DATAGRAM_BYTES)
    data = encode_announcement(a)
    assert len(data) == MAX_DATAGRAM_BYTES
    assert decode_announcement(data) == a


def test_encode_beyond_the_limit_raises_value_error():
    with pytest.raises(ValueError, match=str(MAX_DATAGRAM_BYTES)):
        encode_announcement(_sized_announcement(MAX_DATAGRAM_BYTES + 1))


def test_encode_counts_utf8_bytes_not_characters():
    base = len(encode_announcement(announcement(name="")))
    n = (MAX_DATAGRAM_BYTES - base) // 2 + 1  # "é" is two bytes
    with pytest.raises(ValueError):
        encode_announcement(announcement(name="é" * n))
    encode_announcement(announcement(name="é" * (n - 1)))


def test_decode_beyond_the_limit_is_refused_before_parsing():
    refused(HEADER + b" " * (MAX_DATAGRAM_BYTES - HEADER_BYTES + 1), "too-large")
    # even a well-formed one
    data = datagram(body(name="x" * MAX_DATAGRAM_BYTES))
    refused(data, "too-large")


# --------------------------------------------------------------------------- building


@pytest.mark.parametrize(
    "kw, error",
    [
        ({"node_id": ""}, ValueError),
        ({"node_id": None}, TypeError),
        ({"name": None}, TypeError),
        ({"sequence": -1}, ValueError),
        ({"sequence": MAX_SEQUENCE + 1}, ValueError),
        ({"sequence": True}, TypeError),
        ({"sequence": 1.5}, TypeError),
        ({"connectors": "netty"}, TypeError),
        ({"connectors": ({"name": "c"},)}, TypeError),
    ],
)
def test_announcement_validates_fields(kw, error):
    with pytest.raises(error):
        announcement(**kw)


@pytest.mark.parametrize(
    "args, error",
    [
        (("", "h", 1), ValueError),
        (("c", "", 1), ValueError),
        (("c", "h", 0), ValueError),
        (("c", "h", 65536), ValueError),
        (("c", "h", "1"), TypeError),
        (("c", "h", True), TypeError),
        (("c", "h", 1, {"a": 1}), TypeError),
        (("c", "h", 1, {1: "a"}), TypeError),
        (("c", "h", 1, [("a", "1"), ("a", "2")]), ValueError),
        (("c", "h", 1, ["ab"]), TypeError),
    ],
)
def test_connector_validates_fields(args, error):
    with pytest.raises(error):
        AnnouncedConnector(*args)


def test_lone_surrogates_are_refused():
    with pytest.raises(ValueError):
        announcement(name="\ud800")
    with pytest.raises(ValueError):
        connector(params={"a": "\udfff"})


def test_encode_refuses_other_objects():
    with pytest.raises(TypeError):
        encode_announcement({"node_id": "n"})  # type: ignore[arg-type]
