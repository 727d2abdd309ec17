"""The cluster link and the UDP announcement (junction/protocols/cluster/).

``cluster-link`` -- :class:`~junction.protocols.cluster.link.LinkConnection`
fed what a peer sends, in four positions: a server before the preamble, a
server whose link is open, a client awaiting WELCOME, a client whose link is
open.  Contract:

* only :class:`RemoteProtocolError` escapes, its code one the module
  documents; after it the connection raises the same error, and
  :meth:`~LinkConnection.abort` gives the closing frame the tables allow;
* the buffer never holds a complete frame, nor more of a frame than its
  type's limit allows (the length is judged from the 5-byte header);
* the events, and whether the stream is refused, do not depend on how it was
  cut into reads;
* every event received encodes again to a frame that decodes to the same
  event (what is accepted can be sent).

``cluster-broadcast`` -- :func:`~junction.protocols.cluster.broadcast.decode_announcement`
of a datagram: only :class:`RemoteProtocolError` with a documented code
escapes, and an announcement read re-encodes to a datagram that reads back
the same.
"""

from __future__ import annotations

from junction.protocols.cluster import broadcast, link
from junction.protocols.cluster.link import (
    PREAMBLE_BYTES,
    LinkConnection,
    LinkState,
    Role,
    encode_frame,
)
from junction.protocols.cluster.link import connection as link_connection
from junction.protocols.errors import RemoteProtocolError
from tests.fuzz.common import Input, cuts, same

LINK_CODES = frozenset({"not-a-cluster-link", "version", "unknown-frame", "frame-too-large",
                        "unexpected-frame", "malformed"})
BROADCAST_CODES = frozenset({"too-large", "bad-magic", "unsupported-version", "bad-encoding",
                             "bad-json", "bad-field"})

HELLO = link.Hello(node_id="node-a", name="alpha", cluster="c", user="u", password="p",
                   max_hops=1, host="127.0.0.1", port=61616)
WELCOME = link.Welcome(node_id="node-b", name="beta")
BINDING = link.Binding(id="b-1", address="orders", queue="orders", routing_type="ANYCAST", filter=None,
                       consumers=2, consumer_filters=("x > 1",), hops=0, origin="node-b", durable=True)
#: (role, bring the link OPEN first)
POSITIONS = ((Role.SERVER, False), (Role.SERVER, True), (Role.CLIENT, False), (Role.CLIENT, True))


def _connection(role, opened) -> LinkConnection:
    conn = LinkConnection(role)
    if role is Role.CLIENT:
        conn.send(HELLO)
        if opened:
            conn.receive_data(encode_frame(WELCOME))
    elif opened:
        conn.receive_data(link.PREAMBLE + encode_frame(HELLO))
        conn.send(WELCOME)
    return conn


def _check_buffer(conn: LinkConnection) -> None:
    held = bytes(conn._buffer)
    if conn.state is LinkState.AWAITING_PREAMBLE:
        assert len(held) < PREAMBLE_BYTES, held
        return
    if len(held) >= 5:
        length = int.from_bytes(held[:4], "big")
        assert len(held) < 4 + length, "a complete frame was left in the buffer"
        assert length <= link_connection._limit(held[4]), (length, held[4])


def _round_trip(event) -> None:
    if type(event) is link.Refused and event.code not in link.REFUSED_CODES:
        return  # a later version's code: read, never sent
    data = encode_frame(event)
    frame_type = link_connection._FRAME_OF[type(event)]
    buf = bytearray(data)
    again = link_connection._DECODERS[frame_type](frame_type, buf, 5, len(buf))
    assert again == event, (event, again)


def _link_stream(chunks, role, opened):
    conn = _connection(role, opened)
    events: list = []
    for chunk in chunks:
        try:
            events += conn.receive_data(chunk)
        except RemoteProtocolError as exc:
            assert exc.code in LINK_CODES, exc.code
            events += exc.events
            try:
                conn.receive_data(b"\0")
            except RemoteProtocolError as again:
                assert again is exc
            else:
                raise AssertionError("a broken link accepted more bytes") from None
            conn.abort(exc)
            assert conn.closed
            return events, exc.code
        _check_buffer(conn)
    return events, None


def fuzz_link(data: bytes) -> None:
    inp = Input(data, 2)
    role, opened = inp.knob(0, POSITIONS)
    results = {
        name: _link_stream(chunks, role, opened) for name, chunks in cuts(inp.stream, inp.knobs[1])
    }
    same(results, "cluster link events")
    for event in results["whole"][0]:
        _round_trip(event)


def seeds_link() -> list[bytes]:
    change = link.Change(seq=1, op="create", entity=BINDING)
    to_server = [
        encode_frame(link.MessageFrame(seq=7, route=(("node-b", "orders"),), duplicate_id=b"\0d", body=b"x")),
        encode_frame(link.MessageFrame(seq=8, route=(), duplicate_id=None, body=b"", create=BINDING)),
        encode_frame(link.Ping()), encode_frame(link.Pong()), encode_frame(change),
        encode_frame(link.Goodbye("bye")),
    ]
    to_client = [
        encode_frame(link.Bindings((BINDING,))), encode_frame(link.BindingAdded(BINDING)),
        encode_frame(link.BindingRemoved("b-1")), encode_frame(link.Consumers("b-1", 3, ("a = 1",))),
        encode_frame(link.Topology((link.Member("node-b", "beta", "h", 1),))),
        encode_frame(link.Ack((1, 2, 3))), encode_frame(link.Nack(7, "full")),
        encode_frame(link.ChangeResult(seq=1, ok=True, reason="")),
        encode_frame(link.Record(entries=(link.RecordEntry(seq=4, op="delete", entity=BINDING),), full=True)),
        encode_frame(link.Ping()), encode_frame(link.Goodbye("bye")),
    ]
    return [
        bytes((0, 3)) + link.PREAMBLE + encode_frame(HELLO) + encode_frame(link.Goodbye("stop")),
        bytes((1, 5)) + b"".join(to_server),
        bytes((2, 7)) + encode_frame(WELCOME) + b"".join(to_client[:-1]),
        bytes((2, 7)) + encode_frame(link.Refused("auth", "bad password")),
        bytes((3, 9)) + b"".join(to_client),
    ]


def fuzz_broadcast(data: bytes) -> None:
    try:
        announcement = broadcast.decode_announcement(data)
    except RemoteProtocolError as exc:
        assert exc.code in BROADCAST_CODES, exc.code
        return
    again = broadcast.decode_announcement(broadcast.encode_announcement(announcement))
    assert again == announcement, (announcement, again)


def seeds_broadcast() -> list[bytes]:
    connector = broadcast.AnnouncedConnector("netty", "127.0.0.1", 61616, {"sslEnabled": "true"})
    return [
        broadcast.encode_announcement(broadcast.Announcement("node-1", "alpha", 7, (connector,))),
        broadcast.encode_announcement(broadcast.Announcement("node-2", "", 0)),
        broadcast.MAGIC + b"\x01" + b'{"node_id":"n","name":"x","sequence":1,"connectors":[{"name":"a",'
        b'"host":"h","port":1}],"later":true}',
    ]
