"""Key stores and trust stores: the files ``keyStorePath`` and ``trustStorePath`` name.

Artemis reads Java key stores; Junction reads the two formats OpenSSL and
Java share: ``PKCS12`` (one password-protected file) and ``PEM`` (a private
key and its certificate chain in one file, or CA certificates for a trust
store).  ``JKS`` and ``JCEKS`` cannot be read here and are reported with the
``keytool`` command that converts them.  When no type is given the type is
detected from the file's first bytes, so a ``keyStoreType`` left at Artemis's
default (``JKS``) still works for a PKCS12 file.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

__all__ = ["KeyStore", "StoreError", "STORE_TYPES", "detect_type", "load_key_store", "load_trust_store"]

#: the store types Junction reads
STORE_TYPES = ("PKCS12", "PEM")
#: a store file larger than this is refused (a store holds a few certificates)
MAX_STORE_BYTES = 1024 * 1024

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


class StoreError(ValueError):
    """A store that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class KeyStore:
    """A private key with the certificate that goes with it and the chain above it."""

    key: object
    certificate: x509.Certificate
    chain: tuple[x509.Certificate, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """DNS names the certificate is for (subject alternative names, else the common name)."""
        try:
            ext = self.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            return tuple(ext.value.get_values_for_type(x509.DNSName))
        except x509.ExtensionNotFound:
            return tuple(a.value for a in self.certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME))


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_STORE_BYTES + 1)
    except OSError as exc:
        raise StoreError(f"{what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_STORE_BYTES:
        raise StoreError(f"{what} {path}: larger than {MAX_STORE_BYTES} bytes; not a key or trust store")
    if not data:
        raise StoreError(f"{what} {path}: the file is empty")
    return data


def detect_type(data: bytes) -> str:
    """``PEM``, ``PKCS12``, ``JKS`` or ``JCEKS`` from a store's first bytes."""
    if data[:4] == _JKS_MAGIC:
        return "JKS"
    if data[:4] == _JCEKS_MAGIC:
        return "JCEKS"
    if b"-----BEGIN" in data[:4096]:
        return "PEM"
    return "PKCS12"


def _effective_type(data: bytes, declared: str | None, path: str, what: str) -> str:
    found = detect_type(data)
    if found in ("JKS", "JCEKS"):
        raise StoreError(
            f"{what} {path}: a {found} key store, which Junction cannot read; convert it with "
            f"'keytool -importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12' "
            "and set the type to PKCS12"
        )
    declared = (declared or "").upper() or None
    if declared in (None, "JKS", "JCEKS"):
        return found  # Artemis's default type: read what the file is
    if declared not in STORE_TYPES:
        raise StoreError(f"{what} {path}: type {declared} is not supported (use one of {', '.join(STORE_TYPES)})")
    if declared != found:
        raise StoreError(f"{what} {path}: declared {declared} but the file is {found}")
    return declared


def _password(password: str | None) -> bytes | None:
    return password.encode() if password else None


def load_key_store(path: str, store_type: str | None = None, password: str | None = None) -> KeyStore:
    """The key and certificate chain in *path* (``keyStorePath``)."""
    what = "key store"
    data = _read(path, what)
    kind = _effective_type(data, store_type, path, what)
    if kind == "PKCS12":
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, _password(password))
        except ValueError as exc:
            raise StoreError(f"{what} {path}: cannot open the PKCS12 file (wrong password?): {exc}") from None
        if key is None or cert is None:
            raise StoreError(f"{what} {path}: the PKCS12 file holds no private key with its certificate")
        return KeyStore(key, cert, tuple(extra or ()))
    try:
        key = serialization.load_pem_private_key(data, _password(password))
    except TypeError:
        raise StoreError(f"{what} {path}: the private key is encrypted; set keyStorePassword") from None
    except ValueError as exc:
        raise StoreError(f"{what} {path}: no readable private key in the PEM file ({exc})") from None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise StoreError(f"{what} {path}: no certificate in the PEM file") from None
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    for i, cert in enumerate(certs):
        if cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == public:
            return KeyStore(key, cert, tuple(certs[:i] + certs[i + 1 :]))
    raise StoreError(f"{what} {path}: no certificate in the file matches its private key")


def load_trust_store(path: str, store_type: str | None = None, password: str | None = None) -> tuple[x509.Certificate, ...]:
    """The CA certificates in *path* (``trustStorePath``)."""
    what = "trust store"
    data = _read(path, what)
    kind = _effective_type(data, store_type, path, what)
    if kind == "PKCS12":
        try:
            p12 = pkcs12.load_pkcs12(data, _password(password))
        except ValueError as exc:
            raise StoreError(f"{what} {path}: cannot open the PKCS12 file (wrong password?): {exc}") from None
        certs = [c.certificate for c in p12.additional_certs]
        if p12.cert is not None:
            certs.insert(0, p12.cert.certificate)
    else:
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            certs = []
    if not certs:
        raise StoreError(f"{what} {path}: no certificate in the file")
    return tuple(certs)
