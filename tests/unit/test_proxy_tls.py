"""The client's TLS in PROXY v2 TLVs: written by the gateway, believed only from trusted sources."""

from __future__ import annotations

import struct

from twisted.internet.testing import StringTransport

from junction.edge.acceptor import ProxiedTransport
from junction.edge.tls import peer_subject, tls_sni_host
from junction.protocols.proxy import (
    PP2_CLIENT_CERT_CONN,
    PP2_CLIENT_SSL,
    PP2_TYPE_JUNCTION_SUBJECT,
    PP2_TYPE_SSL,
    ProxyHeaderReader,
    client_tls,
    encode_v2,
    tls_tlvs,
)

SUBJECT = "CN=app-client,O=trustme"


def header_with(tlvs):
    return ProxyHeaderReader().receive_data(encode_v2(("192.0.2.7", 4000), ("127.0.0.1", 61616), tlvs=tlvs))


def test_round_trip_of_sni_version_and_subject():
    header = header_with(tls_tlvs(sni="East.example.test", version="TLSv1.3", subject=SUBJECT, cn="app-client"))
    info = client_tls(header)
    assert (info.sni, info.version, info.subject) == ("east.example.test", "TLSv1.3", SUBJECT)
    ssl = dict(header.tlvs)[PP2_TYPE_SSL]
    assert ssl[0] == PP2_CLIENT_SSL | PP2_CLIENT_CERT_CONN and ssl[1:5] == b"\0\0\0\0"


def test_no_certificate_and_no_tls():
    info = client_tls(header_with(tls_tlvs(sni=None, version="TLSv1.2", subject=None, cn=None)))
    assert info.subject is None and info.sni is None and info.version == "TLSv1.2"
    assert client_tls(header_with(())) is None


def test_a_subject_is_not_believed_unless_the_proxy_verified_it():
    # verify field non-zero: the proxy says the certificate did not verify
    tlvs = ((PP2_TYPE_SSL, bytes((PP2_CLIENT_SSL | PP2_CLIENT_CERT_CONN,)) + struct.pack("!I", 1)),
            (PP2_TYPE_JUNCTION_SUBJECT, SUBJECT.encode()))
    assert client_tls(header_with(tlvs)).subject is None
    # no certificate flag
    tlvs = ((PP2_TYPE_SSL, bytes((PP2_CLIENT_SSL,)) + struct.pack("!I", 0)), (PP2_TYPE_JUNCTION_SUBJECT, SUBJECT.encode()))
    assert client_tls(header_with(tlvs)).subject is None


def test_only_a_trusted_proxy_can_log_a_client_in():
    header = header_with(tls_tlvs(sni="east.example.test", version="TLSv1.3", subject=SUBJECT, cn=None))
    trusted = ProxiedTransport(StringTransport(), header, trusted=True)
    assert peer_subject(trusted) == SUBJECT and tls_sni_host(trusted) == "east.example.test"
    anyone = ProxiedTransport(StringTransport(), header, trusted=False)
    assert peer_subject(anyone) is None and tls_sni_host(anyone) is None
    assert peer_subject(StringTransport()) is None
