"""Certificate login (Artemis's TextFileCertificateLoginModule files) and SecurityManager.login."""

from __future__ import annotations

import pytest

from junction.brokercore.security import SecurityManager
from junction.config.certusers import CertificateUsers, normalise_dn
from junction.config.properties import PropertiesError


class _NoUsers:
    def authenticate(self, user, password):
        return user == "app" and password == "secret"

    def roles_of(self, user):
        return frozenset({"app"}) if user == "app" else frozenset()


@pytest.fixture
def cert_users(tmp_path):
    users = tmp_path / "cert-users.properties"
    users.write_text(
        "# Artemis's format\n"
        "system=CN=system,O=Progress,C=US\n"
        "hosts=/CN=host\\\\d+\\\\.acme\\\\.com,O=Acme,C=UK/\n"
    )
    roles = tmp_path / "cert-roles.properties"
    roles.write_text("admins=system\nmachines=hosts\n")
    return CertificateUsers.load(users, roles)


def test_exact_dn_and_regexp_entries(cert_users):
    assert cert_users.user_for("CN=system,O=Progress,C=US") == "system"
    assert cert_users.user_for("cn=system, o=Progress , C=US") == "system"  # names and spaces normalised
    assert cert_users.user_for("CN=System,O=Progress,C=US") is None  # values are compared exactly
    assert cert_users.user_for("CN=host42.acme.com,O=Acme,C=UK") == "hosts"
    assert cert_users.user_for("CN=host42.acme.com,O=Acme,C=UK,X=y") is None  # the regexp matches whole
    assert cert_users.roles_of("system") == {"admins"}
    assert cert_users.roles_of("hosts") == {"machines"}


def test_an_invalid_regexp_names_file_and_line(tmp_path):
    users = tmp_path / "u.properties"
    users.write_text("ok=CN=a\nbad=/CN=(/\n")
    with pytest.raises(PropertiesError) as err:
        CertificateUsers.load(users, None)
    assert err.value.line == 2 and "invalid DN regexp" in str(err.value)


def test_normalise_keeps_escaped_commas():
    assert normalise_dn(r"cn=a\, b , o=x") == r"CN=a\, b,O=x"


def test_login_by_certificate_then_password(cert_users):
    security = SecurityManager(_NoUsers(), (), certificate_users=cert_users)
    by_cert = security.login(None, None, "CN=system,O=Progress,C=US")
    assert by_cert.user == "system" and by_cert.roles == {"admins"}
    # a user name given wins: the password is checked, not the certificate
    assert security.login("app", "secret", "CN=system,O=Progress,C=US").user == "app"
    assert security.login("app", "wrong", "CN=system,O=Progress,C=US") is None
    # an unknown certificate falls back to the anonymous rules (none configured: refused)
    assert security.login(None, None, "CN=stranger") is None
    assert security.authenticate_certificate(None) is None
    assert security.authenticate_certificate("CN=stranger") is None
    # no certificate login configured: certificates are ignored
    plain = SecurityManager(_NoUsers(), ())
    assert plain.login(None, None, "CN=system,O=Progress,C=US") is None
    # security off: anything goes, the mapped user when there is one
    off = SecurityManager(_NoUsers(), (), enabled=False, certificate_users=cert_users)
    assert off.authenticate_certificate("CN=system,O=Progress,C=US").user == "system"
    assert off.authenticate_certificate(None).user is None
