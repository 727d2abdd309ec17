"""Certificates for the TLS tests, made with ``trustme`` and written as files.

:func:`make_certs` writes, into one directory, everything the TLS acceptor
tests need: a trusted CA (``ca.pem``, the PEM trust store a client or a
``trustStorePath`` uses), server keystores (private key + certificate chain in
one PEM file, Artemis's ``keyStoreType=PEM``), client certificates issued by
that CA and by a second CA nobody trusts, a PKCS12 keystore with a password,
and a file that looks like a Java KeyStore (JKS magic ``0xFEEDFEED``), which
Junction cannot read.

Client-side helpers build :class:`ssl.SSLContext` objects that trust the CA
(optionally presenting a client certificate), so tests state exactly what is
verified: the server certificate against the CA, and the host name only when
asked for.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from types import SimpleNamespace

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

#: the SNI names the tests use; ``*.example.test`` never resolves, tests map it to 127.0.0.1
EAST = "east.example.test"
WEST = "west.example.test"
#: the PKCS12 keystore's password
P12_PASSWORD = "p12-secret"
#: the client certificates' identity (an e-mail SAN, as ``ca.issue_cert("app@example.test")``)
CLIENT_IDENTITY = "app@example.test"


def write_pkcs12(
    cert: trustme.LeafCert, path: Path, password: str, name: bytes = b"server"
) -> None:
    """``cert``'s key and chain as a password-protected PKCS12 file."""
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    chain = [x509.load_pem_x509_certificate(b.bytes()) for b in cert.cert_chain_pems]
    data = pkcs12.serialize_key_and_certificates(
        name,
        key,
        chain[0],
        chain[1:] or None,
        serialization.BestAvailableEncryption(password.encode()),
    )
    path.write_bytes(data)


def make_certs(directory: Path) -> SimpleNamespace:
    """Write the certificate files into ``directory``; their absolute paths (and the CAs).

    Fields (all :class:`~pathlib.Path`, absolute):

    ``ca``            the trusted CA certificate (PEM trust store)
    ``server``        keystore for ``localhost``, ``127.0.0.1``, east and west (all SANs)
    ``server_p12``    the same key and chain as PKCS12, password :data:`P12_PASSWORD`
    ``default``       keystore for ``localhost`` and ``127.0.0.1`` only (the SNI default)
    ``east``          keystore for ``east.example.test`` only
    ``west``          keystore for ``west.example.test`` only
    ``client``        a client key + chain issued by the trusted CA
    ``rogue_client``  a client key + chain issued by another CA
    ``rogue_ca``      that other CA's certificate (a trust store that does not trust ``server``)
    ``jks``           a file starting with the JKS magic bytes
    """
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Junction test CA")
    rogue = trustme.CA(organization_name="Someone else's CA")
    files = SimpleNamespace(trusted_ca=ca, untrusted_ca=rogue, dir=directory)

    def write(name: str, blob) -> Path:
        path = directory / name
        blob.write_to_path(str(path))
        return path

    files.ca = write("ca.pem", ca.cert_pem)
    files.rogue_ca = write("rogue-ca.pem", rogue.cert_pem)
    server = ca.issue_cert("localhost", "127.0.0.1", EAST, WEST, common_name="junction-all")
    files.server = write("server.pem", server.private_key_and_cert_chain_pem)
    files.server_p12 = directory / "server.p12"
    write_pkcs12(server, files.server_p12, P12_PASSWORD)
    files.default = write(
        "default.pem",
        ca.issue_cert(
            "localhost", "127.0.0.1", common_name="junction-default"
        ).private_key_and_cert_chain_pem,
    )
    files.east = write(
        "east.pem", ca.issue_cert(EAST, common_name="junction-east").private_key_and_cert_chain_pem
    )
    files.west = write(
        "west.pem", ca.issue_cert(WEST, common_name="junction-west").private_key_and_cert_chain_pem
    )
    files.client = write(
        "client.pem", ca.issue_cert(CLIENT_IDENTITY).private_key_and_cert_chain_pem
    )
    files.rogue_client = write(
        "rogue-client.pem", rogue.issue_cert(CLIENT_IDENTITY).private_key_and_cert_chain_pem
    )
    files.jks = directory / "server.jks"
    # a JKS header: magic, version 2, one entry; the rest is not a valid keystore anyway
    files.jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02\x00\x00\x00\x01" + b"\x00" * 64)
    return files


def client_context(
    ca: Path | None,
    *,
    check_hostname: bool = False,
    client_cert: Path | None = None,
    minimum: ssl.TLSVersion | None = None,
    maximum: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    """A client context verifying the server against ``ca`` (``None``: no verification).

    ``client_cert`` is a PEM file holding a key and its chain, presented when
    the server asks for a certificate.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cafile=str(ca))
        ctx.check_hostname = check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
    if client_cert is not None:
        ctx.load_cert_chain(str(client_cert))
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    return ctx


def peer_names(sock: ssl.SSLSocket) -> tuple[str, list[str]]:
    """(subject common name, DNS/IP SANs) of the certificate the server presented.

    Needs a verifying context (``getpeercert()`` is empty without verification).
    """
    cert = sock.getpeercert()
    cn = next((v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"), "")
    sans = [v for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    return cn, sans
