"""Certificate login: Artemis's ``TextFileCertificateLoginModule`` files.

A client that presented a verified TLS certificate is the user whose entry
in the *certificate users file* matches the certificate's subject DN::

    system=CN=system,O=Progress,C=US
    hosts=/CN=host\\\\d+\\\\.acme\\\\.com,O=Acme,C=UK/

``user=DN`` compares the DN in its RFC 2253 string form (most specific
attribute first, as Java prints it; attribute names are compared ignoring
case and spaces around ``,`` and ``=`` are ignored); ``user=/regex/``
matches the whole DN string.  Roles come from the *certificate roles file*,
in the format of ``artemis-roles.properties``.  In ``broker.xml``::

    <junction><security cert-users-file="cert-users.properties"
                        cert-roles-file="cert-roles.properties"/></junction>
"""

from __future__ import annotations

import os
import re

from junction.config.properties import PropertiesError, UserStore, _read_entries

__all__ = ["CertificateUsers", "normalise_dn"]

_SPLIT = re.compile(r"(?<!\\),")


def normalise_dn(dn: str) -> str:
    """A DN string with attribute names upper-cased and spaces around separators removed."""
    parts = []
    for rdn in _SPLIT.split(dn.strip()):
        kind, sep, value = rdn.partition("=")
        parts.append(f"{kind.strip().upper()}{sep}{value.strip()}" if sep else rdn.strip())
    return ",".join(parts)


class CertificateUsers:
    """Subject DN -> user, and user -> roles (see the module docstring)."""

    def __init__(self, exact: dict[str, str], patterns: list[tuple[str, re.Pattern]], roles: UserStore):
        self._exact = exact
        self._patterns = patterns
        self._roles = roles

    @classmethod
    def load(cls, users_path: str | os.PathLike, roles_path: str | os.PathLike | None) -> CertificateUsers:
        """Read both files; a missing roles file means no roles.

        Raises :class:`PropertiesError` (file and line) for an invalid regular
        expression, :class:`OSError` when the users file cannot be read.
        """
        users_file = os.fspath(users_path)
        exact: dict[str, str] = {}
        patterns: list[tuple[str, re.Pattern]] = []
        for e in _read_entries(users_file, missing_ok=False):
            if e.key is None:
                continue
            value = e.value.strip()
            if len(value) >= 2 and value.startswith("/") and value.endswith("/"):
                try:
                    patterns.append((e.key, re.compile(value[1:-1])))
                except re.error as err:
                    raise PropertiesError(users_file, e.line, f"user {e.key!r}: invalid DN regexp: {err}") from None
            else:
                exact[normalise_dn(value)] = e.key
        roles = UserStore.load(users_file, os.fspath(roles_path)) if roles_path else UserStore({}, {}, {})
        return cls(exact, patterns, roles)

    def __eq__(self, other) -> bool:
        if not isinstance(other, CertificateUsers):
            return NotImplemented
        return (self._exact, self._patterns, self._roles) == (other._exact, other._patterns, other._roles)

    __hash__ = None

    def user_for(self, subject: str) -> str | None:
        """The user a certificate with this subject DN logs in as, or None."""
        user = self._exact.get(normalise_dn(subject))
        if user is not None:
            return user
        for name, pattern in self._patterns:
            if pattern.fullmatch(subject):
                return name
        return None

    def roles_of(self, user: str) -> frozenset:
        return self._roles.roles_of(user)
