"""The PROXY protocol header reader, v1 and v2 (junction/protocols/proxy.py).

Contract:

* only :class:`RemoteProtocolError` escapes (the PROXY protocol has no error
  reply: the adapter logs it and closes);
* while the header is incomplete the reader holds fewer than
  :data:`MAX_V1_HEADER` bytes of a v1 line and at most ``max_v2_header`` of a
  v2 header;
* the header read, the bytes after it, and whether the stream is refused do
  not depend on how it was cut into reads;
* a header read re-encodes (:func:`encode_v1` / :func:`encode_v2`) to bytes
  that read back as the same header, and :func:`client_tls` reads its TLVs
  without raising.
"""

from __future__ import annotations

from junction.protocols.errors import RemoteProtocolError
from junction.protocols.proxy import (
    MAX_V1_HEADER,
    MAX_V2_HEADER,
    ProxyHeaderReader,
    client_tls,
    encode_v1,
    encode_v2,
    encode_v2_local,
    tls_tlvs,
)
from tests.fuzz.common import Input, cuts, same

V2_LIMITS = (MAX_V2_HEADER, 64)


def _read(chunks, max_v2):
    reader = ProxyHeaderReader(max_v2_header=max_v2)
    header = None
    after = b""
    for chunk in chunks:
        if header is not None:
            after += chunk
            continue
        try:
            header = reader.receive_data(chunk)
        except RemoteProtocolError:
            return None, b"", True
        if header is None:
            assert len(reader.buffered) < max(MAX_V1_HEADER, max_v2 + 1), len(reader.buffered)
        else:
            after += header.remaining
    if header is not None:
        fields = (header.version, header.command, header.family, header.transport, header.source,
                  header.destination, header.tlvs, header.length)
        return fields, after, False
    return None, b"", False


def _reread(data: bytes):
    header = ProxyHeaderReader().receive_data(data)
    assert header is not None and header.remaining == b"", (data, header)
    return header


def fuzz_proxy(data: bytes) -> None:
    inp = Input(data, 2)
    max_v2 = inp.knob(0, V2_LIMITS)
    results = {name: _read(chunks, max_v2) for name, chunks in cuts(inp.stream, inp.knobs[1])}
    same(results, "PROXY header")
    fields = results["whole"][0]
    if fields is None:
        return
    version, command, family, _transport, source, destination, tlvs, _length = fields
    header = ProxyHeaderReader(max_v2_header=max_v2).receive_data(inp.stream)
    client_tls(header)
    if command == "LOCAL":
        again = _reread(encode_v1() if version == 1 else encode_v2_local(tlvs=tlvs if version == 2 else ()))
        assert again.command == "LOCAL"
    elif family in ("TCP4", "TCP6"):
        if version == 1:
            again = _reread(encode_v1(source, destination))
        else:
            again = _reread(encode_v2(source, destination, tlvs=tlvs))
            assert again.tlvs == tlvs
        assert (again.source, again.destination) == (source, destination), (fields, again)


def seeds() -> list[bytes]:
    tlvs = tls_tlvs(sni="broker.example", version="TLSv1.3", subject="CN=alice,O=x", cn="alice")
    streams = [
        encode_v1(("192.0.2.1", 56324), ("198.51.100.2", 61616)) + b"CONNECT\n\n\0",
        encode_v1(("2001:db8::1", 1), ("::1", 65535)),
        encode_v1(),
        encode_v2(("192.0.2.1", 56324), ("198.51.100.2", 61616)) + b"AMQP\x03\x01\x00\x00",
        encode_v2(("2001:db8::1", 1), ("::ffff:10.0.0.1", 2), tlvs=tlvs),
        encode_v2_local(tlvs=((0x04, b"noop"),)),
        encode_v2(("10.0.0.1", 1), ("10.0.0.2", 2))[:12] + bytes((0x21, 0x31)) + (216).to_bytes(2, "big")
        + b"/tmp/sock".ljust(108, b"\0") + b"/tmp/other".ljust(108, b"\0"),
    ]
    return [bytes((0, 5)) + s for s in streams] + [bytes((1, 2)) + streams[3]]
