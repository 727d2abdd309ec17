"""junction.protocols.cluster.link: the cluster link codec and its state machine.

Hand-written bytes pin the wire layout (so a bug shared by encoder and decoder
cannot hide in a round trip); the state tables are checked exhaustively, every
(role, state, event) triple generated from the tables and from SAMPLES, which
must hold every event type; Hypothesis covers arbitrary events and arbitrary
cuts of the byte stream.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.cluster import link
from junction.protocols.cluster.link import (
    EVENT_TYPES,
    INITIAL_STATES,
    MAX_ACK_SEQS,
    MAX_CONTROL_BYTES,
    MAX_COUNT,
    MAX_FRAME_BYTES,
    MAX_MESSAGE_HEADER_BYTES,
    MAX_SEQ,
    PREAMBLE,
    RECEIVE_TRANSITIONS,
    REFUSED_CODES,
    ROUTING_TYPES,
    SEND_TRANSITIONS,
    VERSION,
    Ack,
    Binding,
    BindingAdded,
    BindingRemoved,
    Bindings,
    Consumers,
    FrameType,
    Goodbye,
    Hello,
    LinkConnection,
    LinkState,
    Member,
    MessageFrame,
    Nack,
    Ping,
    Pong,
    Refused,
    Role,
    Topology,
    Welcome,
    decode_binding,
    encode_binding,
    encode_frame,
)
from junction.protocols.cluster.link import fields as link_fields
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

CLIENT, SERVER = Role.CLIENT, Role.SERVER

HELLO = Hello(
    node_id="node-a", name="alpha", cluster="my-cluster", user="cluster-user",
    password="s3cret", max_hops=1, host="10.0.0.1", port=61616,
)
WELCOME = Welcome(node_id="node-b", name="beta")
BINDING = Binding(
    id="b-1", address="orders", queue="orders", routing_type="ANYCAST", filter=None,
    consumers=2, consumer_filters=None, hops=0, origin="node-b", durable=True,
)
BINDING_2 = Binding(
    id="b-2", address="news", queue="news.sub-ü", routing_type="MULTICAST",
    filter="colour = 'red'", consumers=1, consumer_filters=("x > 1",), hops=1,
    origin="node-c", durable=False,
)
MEMBERS = (
    Member("node-b", "beta", "10.0.0.2", 61616),
    Member("node-c", "", "host-c", 1),
    Member("node-d", "delta", "", 0),  # no connector
)

# At least one of each event; the first of each type is its SAMPLE.
SAMPLES = [
    HELLO,
    WELCOME,
    Refused("auth", "bad cluster password"),
    Bindings((BINDING, BINDING_2)),
    Bindings(()),
    BindingAdded(BINDING_2),
    BindingRemoved("b-1"),
    Consumers("b-1", 3, None),
    Consumers("b-2", 2, ("a = 1", "")),
    Topology(MEMBERS),
    MessageFrame(seq=7, route=(("node-b", "orders"),), duplicate_id=b"\x00dup\xff", body=b"\x01\x02"),
    MessageFrame(seq=MAX_SEQ, route=(("node-b", "a"), ("node-c", "b")), duplicate_id=None, body=b""),
    MessageFrame(seq=0, route=(), duplicate_id=None, body=b"routed by the server"),
    Ack((7,)),
    Ack((1, 2, MAX_SEQ)),
    Nack(7, "address orders is full"),
    Nack(0, ""),
    Ping(),
    Pong(),
    link.Change(seq=1, op="create", entity=BINDING),
    link.ChangeResult(seq=1, ok=False, reason="the master refused"),
    link.Record(entries=(link.RecordEntry(seq=4, op="delete", entity=BINDING_2),), full=True),
    link.Record(entries=(), full=False),
    Goodbye("shutting down"),  # (last: nothing follows it on a stream)
]
SAMPLE = {}
for _event in SAMPLES:
    SAMPLE.setdefault(type(_event), _event)

SERVER_OPEN = [e for e in SAMPLES if type(e) in SEND_TRANSITIONS[SERVER][LinkState.OPEN]]
CLIENT_OPEN = [e for e in SAMPLES if type(e) in SEND_TRANSITIONS[CLIENT][LinkState.OPEN]]


def states_of(role):
    """Every state the tables mention for ``role``."""
    states = {INITIAL_STATES[role]}
    for table in (SEND_TRANSITIONS, RECEIVE_TRANSITIONS):
        for state, moves in table[role].items():
            states.add(state)
            states.update(moves.values())
    return sorted(states, key=lambda s: list(LinkState).index(s))


def _moves(role, state):
    """(action, argument, next state) for every way out of ``state``."""
    for cls, nxt in SEND_TRANSITIONS[role].get(state, {}).items():
        yield "send", SAMPLE[cls], nxt
    for cls, nxt in RECEIVE_TRANSITIONS[role].get(state, {}).items():
        yield "receive", encode_frame(SAMPLE[cls]), nxt
    if role is SERVER and state is LinkState.AWAITING_PREAMBLE:
        yield "receive", PREAMBLE, LinkState.AWAITING_HELLO


def path_to(role, target):
    """The shortest list of actions that takes a new ``role`` connection to ``target``."""
    start = INITIAL_STATES[role]
    paths = {start: []}
    todo = deque([start])
    while todo:
        state = todo.popleft()
        for action, arg, nxt in _moves(role, state):
            if nxt not in paths:
                paths[nxt] = paths[state] + [(action, arg)]
                todo.append(nxt)
    return paths[target]


def reach(role, state):
    conn = LinkConnection(role)
    for action, arg in path_to(role, state):
        if action == "send":
            conn.send(arg)
        else:
            conn.receive_data(arg)
    assert conn.state is state
    return conn


def open_pair():
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    assert server.receive_data(client.send(HELLO)) == [HELLO]
    assert client.receive_data(server.send(WELCOME)) == [WELCOME]
    assert client.state is server.state is LinkState.OPEN
    return client, server


def frame(frame_type, payload):
    return struct.pack(">IB", len(payload) + 1, frame_type) + payload


def remote_error(conn, data, code):
    with pytest.raises(RemoteProtocolError) as info:
        conn.receive_data(data)
    assert info.value.code == code, str(info.value)
    return info.value


def bytewise(conn, data):
    events = []
    for i in range(len(data)):
        events += conn.receive_data(data[i:i + 1])
    return events


# -- the tables and the samples ---------------------------------------------------------


def test_samples_cover_every_event_type():
    assert set(SAMPLE) == set(EVENT_TYPES)


def test_one_event_type_per_frame_type():
    assert len(EVENT_TYPES) == len(FrameType) == len(set(EVENT_TYPES))
    for event_type, frame_type in zip(EVENT_TYPES, FrameType, strict=True):
        assert encode_frame(SAMPLE[event_type])[4] == frame_type


def test_field_table_matches_the_dataclasses():
    for cls, spec in link_fields._FIELDS.items():
        assert tuple(name for name, _ in spec) == tuple(f.name for f in dataclasses.fields(cls))
    assert set(link_fields._FIELDS) == set(EVENT_TYPES) | {Binding, Member, link.RecordEntry}


@pytest.mark.parametrize("role", [CLIENT, SERVER])
def test_what_one_side_receives_is_what_the_other_sends(role):
    peer = SERVER if role is CLIENT else CLIENT
    received = {cls for moves in RECEIVE_TRANSITIONS[role].values() for cls in moves}
    sent = {cls for moves in SEND_TRANSITIONS[peer].values() for cls in moves}
    assert received == sent


def test_every_state_of_the_tables_is_reachable():
    for role in Role:
        for state in states_of(role):
            reach(role, state)


TRIPLES = [
    (role, state, cls) for role in Role for state in states_of(role) for cls in EVENT_TYPES
]


def _id(triple):
    role, state, cls = triple
    return f"{role.value}-{state.value}-{cls.__name__}"


@pytest.mark.parametrize("role,state,cls", TRIPLES, ids=map(_id, TRIPLES))
def test_send_table(role, state, cls):
    conn = reach(role, state)
    allowed = SEND_TRANSITIONS[role].get(state, {})
    if state is LinkState.CLOSED:
        with pytest.raises(LocalProtocolError) as info:
            conn.send(SAMPLE[cls])
        assert info.value.code == "closed"
    elif cls in allowed:
        data = conn.send(SAMPLE[cls])
        assert data.endswith(encode_frame(SAMPLE[cls]))
        assert conn.state is allowed[cls]
        assert conn.closed == (allowed[cls] is LinkState.CLOSED)
    else:
        with pytest.raises(LocalProtocolError) as info:
            conn.send(SAMPLE[cls])
        assert info.value.code == "not-allowed"
        assert cls.__name__ in str(info.value) and state.value in str(info.value)
        assert conn.state is state


@pytest.mark.parametrize("role,state,cls", TRIPLES, ids=map(_id, TRIPLES))
def test_receive_table(role, state, cls):
    conn = reach(role, state)
    allowed = RECEIVE_TRANSITIONS[role].get(state, {})
    data = encode_frame(SAMPLE[cls])
    if state is LinkState.CLOSED:
        assert conn.receive_data(data) == []
        assert conn.state is LinkState.CLOSED
    elif state is LinkState.AWAITING_PREAMBLE:
        remote_error(conn, data[:1], "not-a-cluster-link")
    elif cls in allowed:
        assert conn.receive_data(data) == [SAMPLE[cls]]
        assert conn.state is allowed[cls]
    else:
        # Refused as soon as the 5-byte header is in, before any payload is held.
        error = remote_error(conn, data[:5], "unexpected-frame")
        assert FrameType(data[4]).name in str(error) and state.value in str(error)


# -- talking ----------------------------------------------------------------------


def test_pair_talks_through_every_event():
    client, server = open_pair()
    for event in SERVER_OPEN:
        if type(event) is not Goodbye:
            assert client.receive_data(server.send(event)) == [event]
    for event in CLIENT_OPEN:
        if type(event) is not Goodbye:
            assert server.receive_data(client.send(event)) == [event]
    assert server.receive_data(client.send(Goodbye("bye"))) == [Goodbye("bye")]
    assert client.closed and server.closed


def test_refused_handshake():
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    server.receive_data(client.send(HELLO))
    refused = Refused("duplicate-node-id", "node-a is already connected")
    assert client.receive_data(server.send(refused)) == [refused]
    assert client.closed and server.closed


def test_client_may_give_up_while_awaiting_welcome():
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    server.receive_data(client.send(HELLO))
    assert server.receive_data(client.send(Goodbye("stopping"))) == [Goodbye("stopping")]
    assert server.closed


def test_preamble_goes_with_the_first_hello_only():
    assert PREAMBLE == b"JNCL\x01\x03\x00\x00" and VERSION == (1, 3)
    data = LinkConnection(CLIENT).send(HELLO)
    assert data.startswith(PREAMBLE) and data[len(PREAMBLE):] == encode_frame(HELLO)
    client, _ = open_pair()
    assert client.send(Ping()) == encode_frame(Ping())


def _client_stream():
    return PREAMBLE + b"".join(encode_frame(e) for e in [HELLO]), [HELLO]


def _server_stream():
    events = [WELCOME] + SERVER_OPEN
    return b"".join(encode_frame(e) for e in events), events


def test_every_frame_one_byte_at_a_time():
    data, events = _server_stream()
    client = reach(CLIENT, LinkState.AWAITING_WELCOME)
    assert bytewise(client, data) == events
    assert client.closed

    server = LinkConnection(SERVER)
    stream = [HELLO]
    data = PREAMBLE + encode_frame(HELLO)
    assert bytewise(server, data) == stream
    server.send(WELCOME)
    data = b"".join(encode_frame(e) for e in CLIENT_OPEN)
    assert bytewise(server, data) == CLIENT_OPEN
    assert server.closed


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_splits_give_the_same_events(data):
    stream, events = _server_stream()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=30)))
    client = reach(CLIENT, LinkState.AWAITING_WELCOME)
    got = []
    for start, end in zip([0] + cuts, cuts + [len(stream)], strict=True):
        got += client.receive_data(stream[start:end])
    assert got == events

    stream = PREAMBLE + encode_frame(HELLO)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    server = LinkConnection(SERVER)
    got = []
    for start, end in zip([0] + cuts, cuts + [len(stream)], strict=True):
        got += server.receive_data(stream[start:end])
    assert got == [HELLO] and server.state is LinkState.HELLO_RECEIVED


# -- arbitrary events round-trip --------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_counts = st.integers(0, MAX_COUNT)
_seqs = st.integers(0, MAX_SEQ)
_ports = st.integers(0, 65535)
_filters = st.none() | st.lists(_text, max_size=3).map(tuple)
_bindings = st.builds(
    Binding, id=_names, address=_names, queue=_names, routing_type=st.sampled_from(ROUTING_TYPES),
    filter=st.none() | _text, consumers=_counts, consumer_filters=_filters, hops=_counts,
    origin=_names, durable=st.booleans(),
)
_members = st.builds(Member, node_id=_names, name=_text, host=_names, port=_ports)
_server_events = st.one_of(
    st.builds(Bindings, st.lists(_bindings, max_size=4, unique_by=lambda b: b.id).map(tuple)),
    st.builds(BindingAdded, _bindings),
    st.builds(BindingRemoved, _names),
    st.builds(Consumers, _names, _counts, _filters),
    st.builds(Topology, st.lists(_members, max_size=4, unique_by=lambda m: m.node_id).map(tuple)),
    st.builds(Ack, st.lists(_seqs, max_size=5).map(tuple)),
    st.builds(Nack, _seqs, _text),
    st.just(Ping()),
    st.just(Pong()),
)
_client_events = st.one_of(
    st.builds(
        MessageFrame, _seqs, st.lists(st.tuples(_names, _names), max_size=4).map(tuple),
        st.none() | st.binary(max_size=20), st.binary(max_size=64),
    ),
    st.just(Ping()),
    st.just(Pong()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_server_events, max_size=5))
def test_arbitrary_server_events_round_trip(events):
    client, server = open_pair()
    assert client.receive_data(b"".join(server.send(e) for e in events)) == events


@settings(max_examples=300, deadline=None)
@given(st.lists(_client_events, max_size=5))
def test_arbitrary_client_events_round_trip(events):
    client, server = open_pair()
    assert server.receive_data(b"".join(client.send(e) for e in events)) == events


@settings(max_examples=200, deadline=None)
@given(
    st.builds(Hello, _names, _text, _names, _text, _text, _counts, _text, _ports),
    st.sampled_from(sorted(REFUSED_CODES)),
    _text,
)
def test_arbitrary_handshakes_round_trip(hello, code, reason):
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    assert server.receive_data(client.send(hello)) == [hello]
    assert client.receive_data(server.send(Refused(code, reason))) == [Refused(code, reason)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([CLIENT, SERVER]))
def test_garbage_only_ever_raises_remote_protocol_error(data, role):
    conn = reach(role, LinkState.OPEN)
    try:
        conn.receive_data(data)
    except RemoteProtocolError:
        pass


# -- hand-written bytes --------------------------------------------------------------------


def test_wire_layout_of_binary_frames():
    assert encode_frame(Ping()) == b"\x00\x00\x00\x01\x0c"
    assert encode_frame(Pong()) == b"\x00\x00\x00\x01\x0d"
    assert encode_frame(Ack((1, 2))) == (
        b"\x00\x00\x00\x15\x0a" b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x00\x00\x00\x00\x01" b"\x00\x00\x00\x00\x00\x00\x00\x02"
    )
    assert encode_frame(Nack(3, "full")) == (
        b"\x00\x00\x00\x0d\x0b" b"\x00\x00\x00\x00\x00\x00\x00\x03" b"full"
    )
    header = b'{"route":[["n","q"]],"dup":"AAE="}'
    assert encode_frame(MessageFrame(5, (("n", "q"),), b"\x00\x01", b"BODY")) == (
        struct.pack(">IB", 1 + 8 + 4 + len(header) + 4, 9)
        + b"\x00\x00\x00\x00\x00\x00\x00\x05" + struct.pack(">I", len(header)) + header + b"BODY"
    )


def test_json_frames_use_the_field_names():
    data = encode_frame(HELLO)
    assert data[4] == FrameType.HELLO
    assert json.loads(data[5:]) == {
        "node_id": "node-a", "name": "alpha", "cluster": "my-cluster", "user": "cluster-user",
        "password": "s3cret", "max_hops": 1, "host": "10.0.0.1", "port": 61616,
    }
    assert json.loads(encode_frame(Topology(MEMBERS[:1]))[5:]) == {
        "nodes": [{"node_id": "node-b", "name": "beta", "host": "10.0.0.2", "port": 61616}]
    }


def test_hand_written_json_is_read_and_unknown_keys_ignored():
    client, _ = open_pair()
    payload = (
        b'{ "future": [1, {"x": null}], "filters": ["a", "b"], "count": 2,\n "id": "b-9" }'
    )
    assert client.receive_data(frame(FrameType.CONSUMERS, payload)) == [
        Consumers("b-9", 2, ("a", "b"))
    ]
    message = b'{"dup": null, "route": [["n", "q"]], "extra": 1}'
    _, server = open_pair()
    data = frame(FrameType.MESSAGE, struct.pack(">QI", 1, len(message)) + message + b"x")
    assert server.receive_data(data) == [MessageFrame(1, (("n", "q"),), None, b"x")]


def test_binding_json_helpers():
    for binding in (BINDING, BINDING_2):
        obj = encode_binding(binding)
        assert decode_binding(json.loads(json.dumps(obj))) == binding
    with pytest.raises(RemoteProtocolError) as info:
        decode_binding({**encode_binding(BINDING), "durable": 1})
    assert "durable" in str(info.value) and info.value.code == "malformed"
    with pytest.raises(LocalProtocolError):
        encode_binding(dataclasses.replace(BINDING, routing_type="TOPIC"))


def test_password_is_not_in_repr_nor_in_errors():
    assert "s3cret" not in repr(HELLO)
    with pytest.raises(LocalProtocolError) as info:
        LinkConnection(CLIENT).send(dataclasses.replace(HELLO, password=12345))
    assert "'password'" in str(info.value) and "12345" not in str(info.value)
    obj = json.loads(encode_frame(HELLO)[5:])
    server = LinkConnection(SERVER)
    data = PREAMBLE + frame(FrameType.HELLO, json.dumps({**obj, "password": 98765}).encode())
    error = remote_error(server, data, "malformed")
    assert "'password'" in str(error) and "98765" not in str(error)


# -- malformed input ---------------------------------------------------------------------

_BINDING_JSON = json.dumps(encode_binding(BINDING))


@pytest.mark.parametrize(
    "frame_type,payload,named",
    [
        (FrameType.BINDINGS, b"{not json", "BINDINGS"),
        (FrameType.BINDINGS, b"[]", "JSON object"),
        (FrameType.BINDINGS, b'"bindings"', "JSON object"),
        (FrameType.BINDING_REMOVED, b'{"id": "\xff"}', "UTF-8"),
        (FrameType.BINDING_REMOVED, b"{}", "'id'"),
        (FrameType.BINDING_REMOVED, b'{"id": ""}', "'id'"),
        (FrameType.BINDING_REMOVED, b'{"id": "\\ud800"}', "'id'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": "3", "filters": null}', "'count'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": true, "filters": null}', "'count'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": 1.0, "filters": null}', "'count'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": -1, "filters": null}', "'count'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": NaN, "filters": null}', "NaN"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": 1, "filters": [1]}', "'filters[0]'"),
        (FrameType.CONSUMERS, b'{"id": "b", "count": 1}', "'filters'"),
        (FrameType.BINDINGS, b'{"bindings": {}}', "'bindings'"),
        (FrameType.BINDINGS, b'{"bindings": [1]}', "'bindings[0]'"),
        (FrameType.BINDINGS, b'{"bindings": [' + _BINDING_JSON.replace('"hops": 0', '"hops": -1').encode() + b"]}", "'bindings[0].hops'"),
        (FrameType.BINDINGS, b'{"bindings": [' + _BINDING_JSON.replace('"ANYCAST"', '"TOPIC"').encode() + b"]}", "'bindings[0].routing_type'"),
        (FrameType.BINDINGS, b'{"bindings": [' + _BINDING_JSON.replace('"durable": true', '"durable": 1').encode() + b"]}", "'bindings[0].durable'"),
        (FrameType.BINDINGS, b'{"bindings": [' + _BINDING_JSON.replace(', "origin": "node-b"', "").encode() + b"]}", "'bindings[0].origin'"),
        (FrameType.BINDINGS, ('{"bindings": [%s, %s]}' % (_BINDING_JSON, _BINDING_JSON)).encode(), "'bindings[1].id'"),
        (FrameType.BINDING_ADDED, b'{"binding": null}', "'binding'"),
        (FrameType.TOPOLOGY, b'{"nodes": [{"node_id": "n", "name": "", "host": "h", "port": -1}]}', "'nodes[0].port'"),
        (FrameType.TOPOLOGY, b'{"nodes": [{"node_id": "n", "name": "", "host": null, "port": 1}]}', "'nodes[0].host'"),
        (FrameType.TOPOLOGY, b'{"nodes": [{"node_id": "", "name": "", "host": "h", "port": 1}]}', "'nodes[0].node_id'"),
        (FrameType.TOPOLOGY, b'{"nodes": [{"node_id": "n", "name": "", "host": "h", "port": 65536}]}', "'nodes[0].port'"),
        (FrameType.BINDINGS, b"[" * 100_000 + b"]" * 100_000, "JSON"),
        (FrameType.ACK, b"\x00\x00\x00\x02" + b"\x00" * 8, "ACK"),
        (FrameType.ACK, b"\x00\x00", "ACK"),
        (FrameType.NACK, b"\x00" * 7, "NACK"),
        (FrameType.NACK, b"\x00" * 8 + b"\xc3", "UTF-8"),
        (FrameType.PING, b"x", "PING"),
        (FrameType.PONG, b"x", "PONG"),
        (FrameType.GOODBYE, b'{"reason": 1}', "'reason'"),
    ],
)
def test_malformed_frames_to_the_client(frame_type, payload, named):
    client, _ = open_pair()
    error = remote_error(client, frame(frame_type, payload), "malformed")
    assert named in str(error)
    assert frame_type.name in str(error) or named == "UTF-8"


def _message(header: bytes, header_length=None, body=b"") -> bytes:
    length = len(header) if header_length is None else header_length
    return frame(FrameType.MESSAGE, struct.pack(">QI", 1, length) + header + body)


@pytest.mark.parametrize(
    "data,named",
    [
        (frame(FrameType.MESSAGE, b"\x00" * 11), "fixed part"),
        (_message(b"{}", header_length=3), "overruns"),
        (_message(b"[]"), "JSON object"),
        (_message(b'{"dup": null}'), "'route'"),
        (_message(b'{"route": [["n", "q"]]}'), "'dup'"),
        (_message(b'{"route": {}, "dup": null}'), "'route'"),
        (_message(b'{"route": [["n"]], "dup": null}'), "'route[0]'"),
        (_message(b'{"route": [["n", ""]], "dup": null}'), "'route[0][1]'"),
        (_message(b'{"route": [["n", "q"]], "dup": "***"}'), "'dup'"),
        (_message(b'{"route": [["n", "q"]], "dup": 12}'), "'dup'"),
        (_message(b'{"route": [["n", "q"]], "dup": "\xe2\x82"}'), "UTF-8"),
        (frame(FrameType.BINDINGS, b'{"bindings": []}'), "BINDINGS"),  # a server frame
    ],
)
def test_malformed_frames_to_the_server(data, named):
    _, server = open_pair()
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(data)
    assert named in str(info.value)
    assert info.value.code in ("malformed", "unexpected-frame")


def test_message_routing_header_limit():
    _, server = open_pair()
    data = struct.pack(">IBQI", 1 + 12, FrameType.MESSAGE, 1, MAX_MESSAGE_HEADER_BYTES + 1)
    remote_error(server, data, "frame-too-large")


@pytest.mark.parametrize("type_byte", [0, 18, 255])
def test_unknown_frame_type(type_byte):
    client, _ = open_pair()
    error = remote_error(client, struct.pack(">IB", 1, type_byte), "unknown-frame")
    assert str(type_byte) in str(error)


def test_zero_length_frame():
    client, _ = open_pair()
    remote_error(client, b"\x00\x00\x00\x00", "malformed")


# -- limits -------------------------------------------------------------------------------


def test_oversize_message_refused_from_the_header_alone():
    _, server = open_pair()
    header = struct.pack(">IB", MAX_FRAME_BYTES + 1, FrameType.MESSAGE)
    remote_error(server, header[:4], "frame-too-large")  # the length alone is enough
    _, server = open_pair()
    assert server.receive_data(struct.pack(">IB", MAX_FRAME_BYTES, FrameType.MESSAGE)) == []
    assert server.buffered == 5


@pytest.mark.parametrize("frame_type", [FrameType.PING, FrameType.GOODBYE])
def test_oversize_control_frame_refused_from_the_header_alone(frame_type):
    _, server = open_pair()
    error = remote_error(
        server, struct.pack(">IB", MAX_CONTROL_BYTES + 1, frame_type), "frame-too-large"
    )
    assert frame_type.name in str(error)
    assert server.buffered == 0


def test_oversize_control_frame_to_the_client():
    client, _ = open_pair()
    remote_error(client, struct.pack(">IB", MAX_CONTROL_BYTES + 1, FrameType.BINDINGS),
                 "frame-too-large")


def test_largest_ack_fits_and_one_more_does_not():
    client, server = open_pair()
    ack = Ack(tuple(range(MAX_ACK_SEQS)))
    data = server.send(ack)
    assert len(data) - 4 <= MAX_CONTROL_BYTES
    assert client.receive_data(data) == [ack]
    with pytest.raises(LocalProtocolError) as info:
        server.send(Ack(tuple(range(MAX_ACK_SEQS + 1))))
    assert info.value.code == "frame-too-large"


def test_oversize_message_not_sent():
    client, _ = open_pair()
    with pytest.raises(LocalProtocolError) as info:
        client.send(MessageFrame(1, (("n", "q"),), None, bytes(MAX_FRAME_BYTES)))
    assert info.value.code == "frame-too-large"
    assert client.state is LinkState.OPEN


# -- the preamble ---------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"X", b"JX", b"JNCX", b"AMQP\x00\x01\x00\x00", b"jncl\x01\x00\x00\x00"])
def test_wrong_magic(data):
    remote_error(LinkConnection(SERVER), data, "not-a-cluster-link")


@pytest.mark.parametrize("major", [0, 2, 255])
def test_other_major_version_refused_at_its_byte(major):
    server = LinkConnection(SERVER)
    assert server.receive_data(b"JNCL") == []
    error = remote_error(server, bytes([major]), "version")
    assert str(major) in str(error)
    # The adapter answers with Refused("version"), which the client reads.
    data = server.abort(error)
    assert server.closed
    client = reach(CLIENT, LinkState.AWAITING_WELCOME)
    [refused] = client.receive_data(data)
    assert refused.code == "version" and client.closed


def test_send_refused_directly_after_a_bad_preamble():
    server = LinkConnection(SERVER)
    remote_error(server, b"JNCL\x02", "version")
    data = server.send(Refused("version", "this node speaks 1.0"))
    assert data == encode_frame(Refused("version", "this node speaks 1.0")) and server.closed


def test_other_minor_version_and_reserved_bytes_accepted():
    server = LinkConnection(SERVER)
    assert server.receive_data(b"JNCL\x01\x07\xff\xff" + encode_frame(HELLO)) == [HELLO]
    assert server.peer_version == (1, 7)
    assert server.state is LinkState.HELLO_RECEIVED


def test_preamble_and_frames_in_one_read():
    server = LinkConnection(SERVER)
    assert server.receive_data(PREAMBLE) == [] and server.state is LinkState.AWAITING_HELLO
    assert server.peer_version == VERSION


# -- errors, close ----------------------------------------------------------------------------


def test_events_before_an_error_ride_on_it_and_the_error_sticks():
    client, _ = open_pair()
    with pytest.raises(RemoteProtocolError) as info:
        client.receive_data(encode_frame(Ping()) + encode_frame(Ack((1,))) + b"\x00\x00\x00\x01\xee")
    assert info.value.events == [Ping(), Ack((1,))]
    with pytest.raises(RemoteProtocolError) as again:
        client.receive_data(encode_frame(Ping()))
    assert again.value is info.value and again.value.events == []
    with pytest.raises(LocalProtocolError) as local:
        client.send(Ping())
    assert local.value.code == "not-allowed"
    assert client.send(Goodbye("protocol error")) == encode_frame(Goodbye("protocol error"))
    assert client.closed and client.receive_data(b"anything") == []


def test_abort_picks_the_closing_frame():
    error = RemoteProtocolError("bad", code="malformed")
    assert LinkConnection(CLIENT).abort(error) == b""
    assert reach(CLIENT, LinkState.AWAITING_WELCOME).abort(error) == encode_frame(Goodbye("bad"))
    assert reach(SERVER, LinkState.AWAITING_HELLO).abort(error) == encode_frame(Refused("protocol", "bad"))
    assert reach(SERVER, LinkState.OPEN).abort(error) == encode_frame(Goodbye("bad"))
    closed = reach(SERVER, LinkState.CLOSED)
    assert closed.abort(error) == b"" and closed.closed


def test_bytes_after_goodbye_are_ignored():
    client, _ = open_pair()
    data = encode_frame(Goodbye("bye")) + encode_frame(Ping()) + b"garbage"
    assert client.receive_data(data) == [Goodbye("bye")]
    assert client.closed and client.buffered == 0
    assert client.receive_data(b"\xff" * 10) == []


def test_receive_after_own_goodbye_ignored_and_send_refused():
    client, server = open_pair()
    client.send(Goodbye("stopping"))
    assert client.receive_data(server.send(Ack((1,)))) == []
    with pytest.raises(LocalProtocolError) as info:
        client.send(Ping())
    assert info.value.code == "closed"


# -- invalid events on send ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "event,field_name",
    [
        (dataclasses.replace(HELLO, port="61616"), "port"),
        (dataclasses.replace(HELLO, port=65536), "port"),
        (dataclasses.replace(HELLO, host=None), "host"),
        (dataclasses.replace(HELLO, max_hops=-1), "max_hops"),
        (dataclasses.replace(HELLO, max_hops=True), "max_hops"),
        (dataclasses.replace(HELLO, node_id=""), "node_id"),
        (dataclasses.replace(HELLO, password=None), "password"),
        (dataclasses.replace(HELLO, user="\ud800"), "user"),
    ],
)
def test_invalid_hello_not_sent(event, field_name):
    client = LinkConnection(CLIENT)
    with pytest.raises(LocalProtocolError) as info:
        client.send(event)
    assert info.value.code == "invalid-event" and repr(field_name) in str(info.value)
    assert client.state is LinkState.IDLE


@pytest.mark.parametrize(
    "event,field_name",
    [
        (Bindings([BINDING]), "bindings"),
        (Bindings((BINDING, BINDING)), "bindings[1].id"),
        (Bindings((dataclasses.replace(BINDING, routing_type="TOPIC"),)), "bindings[0].routing_type"),
        (Bindings((dataclasses.replace(BINDING, consumer_filters=["a"]),)), "bindings[0].consumer_filters"),
        (BindingAdded(MEMBERS[0]), "binding"),
        (Consumers("b", 1, ("a", 2)), "filters[1]"),
        (Topology((MEMBERS[0], MEMBERS[0])), "nodes[1].node_id"),
        (Ack((-1,)), "seqs[0]"),
        (Ack((MAX_SEQ + 1,)), "seqs[0]"),
        (Nack(1, b"reason"), "reason"),
    ],
)
def test_invalid_server_events_not_sent(event, field_name):
    _, server = open_pair()
    with pytest.raises(LocalProtocolError) as info:
        server.send(event)
    assert info.value.code == "invalid-event" and repr(field_name) in str(info.value)


@pytest.mark.parametrize(
    "event,field_name",
    [
        (MessageFrame(1, [("n", "q")], None, b""), "route"),
        (MessageFrame(1, (("n", "q", "x"),), None, b""), "route[0]"),
        (MessageFrame(1, (("n", "q"),), "dup", b""), "duplicate_id"),
        (MessageFrame(1, (("n", "q"),), None, bytearray(b"x")), "body"),
    ],
)
def test_invalid_messages_not_sent(event, field_name):
    client, _ = open_pair()
    with pytest.raises(LocalProtocolError) as info:
        client.send(event)
    assert info.value.code == "invalid-event" and repr(field_name) in str(info.value)


def test_unknown_refused_code_and_non_events_not_sent():
    server = reach(SERVER, LinkState.HELLO_RECEIVED)
    with pytest.raises(LocalProtocolError) as info:
        server.send(Refused("nope", ""))
    assert info.value.code == "invalid-event"
    with pytest.raises(LocalProtocolError) as info:
        server.send("WELCOME")
    assert info.value.code == "invalid-event"
    assert server.state is LinkState.HELLO_RECEIVED


def test_unknown_refused_code_is_accepted_on_receipt():
    client = reach(CLIENT, LinkState.AWAITING_WELCOME)
    data = frame(FrameType.REFUSED, b'{"code": "from-the-future", "reason": "r"}')
    assert client.receive_data(data) == [Refused("from-the-future", "r")]


def test_roles_by_name():
    assert LinkConnection("CLIENT").role is CLIENT
    assert LinkConnection("SERVER").state is LinkState.AWAITING_PREAMBLE
    with pytest.raises(ValueError):
        LinkConnection("PEER")


# -- version 1.1 additions: fields an older peer leaves out ---------------------------


def test_welcome_scale_down_group_round_trips_and_defaults_when_absent():
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    server.receive_data(client.send(HELLO))
    welcome = link.Welcome(node_id="n-server", name="b", scale_down_group="east")
    assert client.receive_data(server.send(welcome)) == [welcome]
    # a 1.0 server's WELCOME has no scale_down_group key
    client, server = LinkConnection(CLIENT), LinkConnection(SERVER)
    server.receive_data(client.send(HELLO))
    old = frame(link.FrameType.WELCOME, json.dumps({"node_id": "n-server", "name": "b"}).encode())
    assert client.receive_data(old) == [link.Welcome(node_id="n-server", name="b", scale_down_group=None)]


def test_message_create_round_trips_and_a_1_0_header_has_none():
    client, server = open_pair()
    queue = link.Binding(
        id="n1/orders", address="orders", queue="orders", routing_type="ANYCAST", filter="a > 1",
        consumers=0, consumer_filters=None, hops=0, origin="n1", durable=True,
    )
    event = link.MessageFrame(seq=7, route=(("n2", "orders"),), duplicate_id=b"d", body=b"xyz", create=queue)
    assert bytewise(server, client.send(event)) == [event]
    header = json.dumps({"route": [["n2", "orders"]], "dup": None}).encode()
    old = frame(link.FrameType.MESSAGE, struct.pack(">QI", 8, len(header)) + header + b"body")
    [received] = server.receive_data(old)
    assert received.create is None and received.body == b"body"


def test_a_malformed_create_is_a_remote_error():
    _client, server = open_pair()
    header = json.dumps({"route": [], "dup": None, "create": {"id": "x"}}).encode()
    remote_error(server, frame(link.FrameType.MESSAGE, struct.pack(">QI", 1, len(header)) + header), "malformed")


def test_binding_kind_round_trips_and_is_empty_from_a_1_0_peer():
    client, server = open_pair()
    binding = link.Binding(
        id="n/t", address="t", queue="t", routing_type="ANYCAST", filter=None, consumers=1,
        consumer_filters=None, hops=0, origin="n", durable=False, kind="temporary",
    )
    assert client.receive_data(server.send(link.BindingAdded(binding=binding))) == [link.BindingAdded(binding=binding)]
    old = {k: v for k, v in link.encode_binding(binding).items() if k != "kind"}
    [event] = client.receive_data(frame(link.FrameType.BINDING_ADDED, json.dumps({"binding": old}).encode()))
    assert event.binding.kind == ""
