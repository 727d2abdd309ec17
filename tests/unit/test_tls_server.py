"""junction.tls: stores, parameters and SNI choice, with real OpenSSL handshakes in memory."""

from __future__ import annotations

import os

import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from OpenSSL import SSL
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock

from junction.edge.tls import TLSAcceptorFactory
from junction.tls.server import (
    check_server_tls,
    iana_to_openssl,
    parse_server_tls,
    refusal,
    sni_host,
)
from junction.tls.stores import StoreError, detect_type, load_key_store, load_trust_store


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    other = trustme.CA()
    files = {}

    def write(name, blob):
        path = os.path.join(d, name)
        blob.write_to_path(path)
        files[name] = path

    write("default.pem", ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem)
    write("east.pem", ca.issue_cert("east.example.test").private_key_and_cert_chain_pem)
    write("wild.pem", ca.issue_cert("*.west.example.test").private_key_and_cert_chain_pem)
    write("ca.pem", ca.cert_pem)
    write("client.pem", ca.issue_cert("app@example.test").private_key_and_cert_chain_pem)
    write("stranger.pem", other.issue_cert("app@example.test").private_key_and_cert_chain_pem)
    leaf = ca.issue_cert("localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())
    p12 = pkcs12.serialize_key_and_certificates(
        b"srv", key, cert, None, serialization.BestAvailableEncryption(b"s3cret")
    )
    files["server.p12"] = os.path.join(d, "server.p12")
    with open(files["server.p12"], "wb") as f:
        f.write(p12)
    files["store.jks"] = os.path.join(d, "store.jks")
    with open(files["store.jks"], "wb") as f:
        f.write(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    files["ca"] = ca
    return files


def server_tls(pki, **params):
    base = {"sslEnabled": "true", "keyStorePath": pki["default.pem"]}
    base.update(params)
    tls, problems = parse_server_tls(base, lambda p: p)
    assert problems == []
    assert check_server_tls(tls) == []
    return tls.build()


def handshake(contexts, *, sni=None, client_pem=None, ca_pem=None):
    """A real handshake over memory BIOs; (server conn, client conn, error or None)."""
    server = contexts.connection()
    server.set_accept_state()
    cctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    if client_pem:
        cctx.use_certificate_chain_file(client_pem)
        cctx.use_privatekey_file(client_pem)
    if ca_pem:
        cctx.load_verify_locations(ca_pem)
        cctx.set_verify(SSL.VERIFY_PEER, lambda *a: a[-1])
    client = SSL.Connection(cctx, None)
    client.set_connect_state()
    if sni:
        client.set_tlsext_host_name(sni.encode())
    error = None
    for _ in range(20):
        for a, b in ((client, server), (server, client)):
            try:
                a.do_handshake()
            except SSL.WantReadError:
                pass
            except SSL.Error as exc:
                error = exc
            try:
                data = a.bio_read(65536)
            except SSL.WantReadError:
                data = b""
            if data:
                b.bio_write(data)
        if error is not None:
            break
        try:
            server.do_handshake()
            client.do_handshake()
            # TLS 1.3: the server sees a client certificate problem after the client finished
            client.send(b"x")
            server.bio_write(client.bio_read(65536))
            server.recv(1)
            return server, client, None
        except SSL.WantReadError:
            continue
        except SSL.Error as exc:
            error = exc
            break
    return server, client, error


def peer_names(client) -> list[str]:
    cert = client.get_peer_certificate().to_cryptography()
    from cryptography import x509

    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def test_stores_pem_pkcs12_and_refusals(pki):
    assert load_key_store(pki["default.pem"]).names == ("localhost",)
    assert load_key_store(pki["server.p12"], "PKCS12", "s3cret").names == ("localhost",)
    assert load_key_store(pki["server.p12"], "JKS", "s3cret").names == ("localhost",)  # Artemis's default type
    assert len(load_trust_store(pki["ca.pem"])) == 1
    with pytest.raises(StoreError, match="wrong password"):
        load_key_store(pki["server.p12"], "PKCS12", "nope")
    with pytest.raises(StoreError, match="JKS key store.*keytool"):
        load_key_store(pki["store.jks"])
    with pytest.raises(StoreError, match="No such file"):
        load_key_store(pki["default.pem"] + ".missing")
    with pytest.raises(StoreError, match="declared PKCS12 but the file is PEM"):
        load_key_store(pki["default.pem"], "PKCS12")
    with pytest.raises(StoreError, match="no readable private key"):
        load_key_store(pki["ca.pem"])
    assert detect_type(b"\xce\xce\xce\xce....") == "JCEKS"


def test_parameters_report_every_problem_at_once():
    tls, problems = parse_server_tls(
        {
            "sslEnabled": "true",
            "needClientAuth": "yes",
            "wantClientAuth": "true",
            "enabledProtocols": "TLSv1.2,SSLv3",
            "sniHost": "(",
            "sniKeyStorePaths": "nocolon",
            "handshake-timeout": "-1",
            "enabledCipherSuites": "NOT_A_CIPHER",
        },
        lambda p: p,
    )
    assert tls is None
    text = "\n".join(problems)
    for expected in (
        "needs keyStorePath",
        "needClientAuth='yes' must be true or false",
        "wantClientAuth=true needs trustStorePath",
        "unknown protocol 'SSLv3'",
        "sniHost='(' is not a regular expression",
        "'nocolon' is not HOST:FILE",
        "handshake-timeout='-1' must be a number of seconds",
        "enabledCipherSuites: none of",
    ):
        assert expected in text
    assert parse_server_tls({"sslEnabled": "false", "keyStorePath": "x"}, lambda p: p) == (None, [])


def test_iana_cipher_names():
    assert iana_to_openssl("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert iana_to_openssl("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert iana_to_openssl("TLS_RSA_WITH_AES_128_CBC_SHA") == "AES128-SHA"
    assert iana_to_openssl("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"


def test_sni_chooses_the_certificate(pki):
    contexts = server_tls(pki, sniKeyStorePaths=f"east.example.test:{pki['east.pem']},*.west.example.test:{pki['wild.pem']}")
    server, client, error = handshake(contexts, sni="EAST.example.test", ca_pem=pki["ca.pem"])
    assert error is None
    assert peer_names(client) == ["east.example.test"]
    assert sni_host(server) == "east.example.test"
    _, client, error = handshake(contexts, sni="a.west.example.test", ca_pem=pki["ca.pem"])
    assert error is None and peer_names(client) == ["*.west.example.test"]
    server, client, error = handshake(contexts, sni="other.example.test")
    assert error is None and peer_names(client) == ["localhost"]
    server, client, error = handshake(contexts)
    assert error is None and sni_host(server) is None and peer_names(client) == ["localhost"]


def test_sni_required_and_sni_host(pki):
    contexts = server_tls(pki, sniRequired="true", sniHost=r"east\.example\.test")
    server, _, error = handshake(contexts)
    assert error is not None
    assert refusal(server) == "the client sent no SNI host name (sniRequired=true)"
    server, _, error = handshake(contexts, sni="west.example.test")
    assert error is not None and "does not match sniHost" in refusal(server)
    server, _, error = handshake(contexts, sni="East.Example.Test")
    assert error is None and refusal(server) is None
    # Artemis: sniHost alone accepts a client that sends no name
    contexts = server_tls(pki, sniHost=r"east\.example\.test")
    assert handshake(contexts)[2] is None


def test_client_certificates(pki):
    need = server_tls(pki, needClientAuth="true", trustStorePath=pki["ca.pem"])
    assert handshake(need, client_pem=pki["client.pem"])[2] is None
    assert handshake(need)[2] is not None
    assert handshake(need, client_pem=pki["stranger.pem"])[2] is not None
    want = server_tls(pki, wantClientAuth="true", trustStorePath=pki["ca.pem"])
    assert handshake(want)[2] is None
    server, _, error = handshake(want, client_pem=pki["client.pem"])
    assert error is None and server.get_peer_certificate() is not None


def test_tls_1_2_minimum_by_default(pki):
    contexts = server_tls(pki)
    server = contexts.connection()
    server.set_accept_state()
    cctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    cctx.set_min_proto_version(SSL.TLS1_VERSION)
    cctx.set_max_proto_version(SSL.TLS1_1_VERSION)
    cctx.set_cipher_list(b"DEFAULT:@SECLEVEL=0")
    client = SSL.Connection(cctx, None)
    client.set_connect_state()
    with pytest.raises(SSL.WantReadError):
        client.do_handshake()
    server.bio_write(client.bio_read(65536))
    with pytest.raises(SSL.Error):
        server.do_handshake()


def test_the_tls_acceptor_refuses_what_the_factory_beneath_refuses(pki):
    """A protocol factory at connectionsAllowed answers None: TLS must not wrap that in a protocol.

    A wrapper around ``None`` failed in ``makeConnection``, which dropped the
    rest of the listener's accept batch too.
    """

    class Full(Factory):
        def buildProtocol(self, addr):
            return None

    peer = IPv4Address("TCP", "192.0.2.1", 40000)
    factory = TLSAcceptorFactory(server_tls(pki), Full(), reactor=Clock(), acceptor_name="edge")
    assert factory.buildProtocol(peer) is None
    factory = TLSAcceptorFactory(server_tls(pki), Factory.forProtocol(Protocol), reactor=Clock())
    assert factory.buildProtocol(peer).wrappedProtocol is not None
