"""Routing keys: which value of a connection a connection router routes on.

A connection router (Artemis ``<connection-router>``) routes each connection
on one *key*, taken from what the gateway learned during the handshake:

=============  ===========================================================
``CLIENT_ID``  the client id (CORE session client id, AMQP Open
               container-id, OpenWire ``ConnectionInfo.clientId``)
``SNI_HOST``   the TLS SNI host name the client asked for
``SOURCE_IP``  the client's IP address (the default, as in Artemis)
``USER_NAME``  the authenticated user name (else the one the client sent)
``ROLE_NAME``  one of the authenticated user's roles
=============  ===========================================================

:class:`KeyResolver` follows Artemis's ``KeyResolver.resolve``
(``reference/artemis-routing.md`` section 1):

* a missing value (None) is the key :data:`NULL_KEY` (``"NULL"``);
* with a *key filter* (a regular expression, ``<key-filter>``), the key is
  the **whole match** (group 0) of the first place the filter is found in the
  value -- ``re.search``, Java's ``Matcher.find()``; capture groups are not
  extracted, so a prefix is stripped with a look-behind such as
  ``(?<=^EQ_).*``.  No match gives ``"NULL"``.  A blank filter is no filter;
* ``SOURCE_IP`` strips a leading ``/`` (Java's ``InetSocketAddress``
  spelling) and cuts everything from the **last** ``:`` (the port):
  ``10.0.0.1:12345`` -> ``10.0.0.1``.  Beyond Artemis, a bracketed IPv6
  address loses its brackets too: ``[::1]:5672`` -> ``::1`` (Artemis would
  keep ``[::1]``), so one IPv6 client gets the same key however its address
  was spelt.  An unbracketed value is cut at its last ``:`` exactly as
  Artemis does, which is right for Java's ``/0:0:0:0:0:0:0:1:5672`` but would
  eat the last group of a bare IPv6 address given *without* a port -- pass
  ``host:port`` / ``[v6]:port`` strings, or a Twisted address object (one
  with a ``host`` attribute), whose ``host`` is used as it is;
* ``ROLE_NAME`` without a filter is the first role; with one, it is the match
  in the first role where the filter is found (the filter is applied once),
  ``"NULL"`` when no role matches or there are no roles.  Roles are an
  ordered sequence: "first" is the order the security layer gave them in.

Filters are Python regular expressions.  They accept the Java patterns
routing configurations use in practice (anchors, classes, look-behind,
``.{n}``); Java-only syntax such as ``\\p{Lu}`` is rejected when the filter
is set, as a :class:`ValueError`.

Pure: no I/O, no clock.  :meth:`KeyResolver.resolve` never raises.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

__all__ = [
    "DEFAULT_KEY_TYPE",
    "INTERNAL_CLIENT_ID_PREFIX",
    "NULL_KEY",
    "KeyResolver",
    "KeyType",
    "compile_filter",
    "SettableFilter",
    "source_ip_key",
]

#: The key of a connection that lacks the value the key type names, or whose
#: value the key filter does not match (Artemis ``NULL_KEY_VALUE``).  A real
#: value may also be the string "NULL"; Artemis does not tell them apart
#: either (a ``local-target-filter`` of ``NULL|...`` relies on it).
NULL_KEY = "NULL"

#: Client ids of the routers' own probe sessions (Artemis ``CLIENT_ID_PREFIX``);
#: such a connection always stays local.
INTERNAL_CLIENT_ID_PREFIX = "$.artemis.internal.router.client."


class KeyType(enum.Enum):
    """Artemis's ``KeyType``: which connection value is the routing key.

    Values equal names, so ``KeyType("CLIENT_ID")`` and
    ``KeyType["CLIENT_ID"]`` both parse the ``<key-type>`` element.
    """

    CLIENT_ID = "CLIENT_ID"
    SNI_HOST = "SNI_HOST"
    SOURCE_IP = "SOURCE_IP"
    USER_NAME = "USER_NAME"
    ROLE_NAME = "ROLE_NAME"


#: Artemis's default ``<key-type>``.
DEFAULT_KEY_TYPE = KeyType.SOURCE_IP


def compile_filter(pattern: str | None, what: str = "filter") -> re.Pattern | None:
    """Compile a key or local-target filter; None or a blank string is no filter.

    An invalid expression raises :class:`ValueError` naming ``what`` and the
    pattern (config validation and the management setters report it).
    """
    if pattern is None or not pattern.strip():
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid {what} {pattern!r}: {exc}") from exc


def source_ip_key(address) -> str:
    """The ``SOURCE_IP`` key of a remote address (see the module docstring).

    ``address`` is a string (``"/10.0.0.1:12345"``, ``"10.0.0.1:12345"``,
    ``"[::1]:5672"``) or an object with a ``host`` attribute (Twisted's
    ``IPv4Address``/``IPv6Address``), whose host is taken as it is; any
    other object is parsed as its ``str()``.
    """
    if not isinstance(address, str):
        host = getattr(address, "host", None)
        if host is not None:
            return str(host)
        address = str(address)
    if address.startswith("/"):
        address = address[1:]
    if address.startswith("["):
        end = address.find("]")
        if end > 0:
            return address[1:end]
    colon = address.rfind(":")
    if colon >= 0:
        address = address[:colon]
    return address


class SettableFilter:
    """A filter expression the management API may replace at run time.

    ``text`` reads back what was set (None when cleared with "" or None);
    ``pattern`` is the compiled expression.  An invalid expression raises
    ValueError and leaves the old one in place.
    """

    __slots__ = ("what", "text", "pattern")

    def __init__(self, what: str, text: str | None = None):
        self.what = what
        self.text: str | None = None
        self.pattern: re.Pattern | None = None
        self.set(text)

    def set(self, text: str | None) -> None:
        compiled = compile_filter(text, self.what)
        self.pattern = compiled
        self.text = None if compiled is None else text


class KeyResolver:
    """Turns a connection's handshake values into its routing key.

    ``key_type``: a :class:`KeyType` (or its name); ``key_filter``: a regular
    expression or None.  The filter can be changed at run time through the
    :attr:`key_filter` property (the management API's ``TargetKeyFilter``).
    """

    def __init__(self, key_type: KeyType | str = DEFAULT_KEY_TYPE, key_filter: str | None = None):
        self.key_type = KeyType(key_type)
        self._filter = SettableFilter("key filter", key_filter)

    @property
    def key_filter(self) -> str | None:
        """The key filter's text; None when there is none (also after setting "")."""
        return self._filter.text

    @key_filter.setter
    def key_filter(self, pattern: str | None) -> None:
        self._filter.set(pattern)

    def resolve(
        self,
        *,
        client_id: str | None = None,
        sni_host: str | None = None,
        source_address=None,
        username: str | None = None,
        roles: Sequence[str] | None = (),
    ) -> str:
        """The routing key of a connection with these values.  Never raises."""
        kind = self.key_type
        pattern = self._filter.pattern
        if kind is KeyType.ROLE_NAME:
            return self._role_key(roles or (), pattern)
        if kind is KeyType.CLIENT_ID:
            value = client_id
        elif kind is KeyType.USER_NAME:
            value = username
        elif kind is KeyType.SNI_HOST:
            value = sni_host
        else:
            value = None if source_address is None else source_ip_key(source_address)
        if value is None:
            return NULL_KEY
        if pattern is None:
            return value
        match = pattern.search(value)
        return NULL_KEY if match is None else match.group()

    @staticmethod
    def _role_key(roles: Sequence[str], pattern: re.Pattern | None) -> str:
        if pattern is None:
            for role in roles:
                return role
            return NULL_KEY
        for role in roles:
            match = pattern.search(role)
            if match is not None:
                return match.group()
        return NULL_KEY

    def __repr__(self) -> str:
        return f"<KeyResolver {self.key_type.value} filter={self._filter.text!r}>"
