"""Load and validate a ``broker.xml`` (Artemis dialect) into :class:`~junction.config.model.BrokerConfig`.

The whole file is checked before anything starts and *every* problem is
reported at once, each with ``file:line`` (DESIGN.md principle 8; buildbot's
``ConfigErrors``, crossbar's ``checkconfig``).  :func:`load_config` either
returns a complete, frozen :class:`BrokerConfig` or raises
:class:`ConfigErrors`.

What an element means is data, in the tables below, not code:

* :data:`CORE_ELEMENTS` -- every child of ``<core>`` that Artemis's
  ``artemis-configuration.xsd`` knows, plus Junction's ``<junction>``.  Each
  entry is one of

  - :class:`Value` -- a text element read into a :class:`BrokerConfig` field;
  - :class:`Section` -- a container read by a method of the loader
    (``acceptors``, ``addresses``, ``address-settings``,
    ``cluster-connections`` ...); :class:`Nested` is the same one level down
    (``<pool>`` inside ``<connection-router>``, ``<static-connectors>``
    inside ``<cluster-connection>``);
  - :class:`Ignored` -- a tuning knob of the Java broker with no behavioural
    meaning for Junction (``journal-type``, ``thread-pool-max-size``,
    ``critical-analyzer`` ...).  Its value is still type-checked, and it is
    listed in :attr:`BrokerConfig.ignored` so the node logs it once;
  - :class:`DefaultOnly` -- an Artemis behaviour Junction does not implement
    yet.  Restating Artemis's default is harmless and accepted (and listed in
    ``ignored``); any other value is an error, because Junction would behave
    differently from what the file asks;
  - :class:`Unsupported` -- an Artemis feature Junction does not have yet
    (``bridges``, ``diverts``, ``federations``, ``<ha-policy><replication>``
    ...): always an error, "<x> is not supported by Junction yet".  Never
    silently ignored;
  - :class:`Refused` -- an Artemis feature Junction will not have (JGroups):
    always an error whose message says what to write instead.

* :data:`ADDRESS_SETTING_ELEMENTS`, :data:`QUEUE_ATTRIBUTES`,
  :data:`WILDCARD_ELEMENTS`, :data:`JUNCTION_ELEMENTS`,
  :data:`ROUTER_ELEMENTS`, :data:`CACHE_ELEMENTS`, :data:`POOL_ELEMENTS` --
  the same for the inside of ``<address-setting>``, ``<queue>``,
  ``<wildcard-addresses>``, ``<junction>``, ``<connection-router>`` and its
  ``<cache>`` and ``<pool>``.
* :data:`BROADCAST_GROUP_ELEMENTS`, :data:`DISCOVERY_GROUP_ELEMENTS`,
  :data:`CLUSTER_CONNECTION_ELEMENTS`, :data:`HA_POLICY_ELEMENTS`,
  :data:`PRIMARY_ONLY_ELEMENTS`, :data:`SCALE_DOWN_ELEMENTS` -- the same for
  the cluster sections: ``<broadcast-group>``, ``<discovery-group>``,
  ``<cluster-connection>``, ``<ha-policy>``, its ``<primary-only>`` (or
  ``<live-only>``) and their ``<scale-down>``.
* :data:`ACCEPTOR_PARAMS`, :data:`CONNECTOR_PARAMS`, :data:`PARAM_TYPES`,
  :data:`PROTOCOLS` -- what an acceptor/connector URL may say.

An element name that is in no table is rejected with a "did you mean"
suggestion (:mod:`difflib`), as are unknown attributes and URL parameters.

Differences from Artemis, on purpose (Artemis is lax where a typo silently
changes behaviour):

* ``${VAR}`` with no default and no such environment variable is an error
  (Artemis substitutes an empty string).  Artemis reads Java system
  properties first and then the environment; Junction reads the environment.
* Booleans must be ``true`` or ``false`` (any case).  Artemis's
  ``Boolean.parseBoolean`` reads every other word, ``1`` and ``yes``
  included, as false.
* A second ``<address-setting>``/``<security-setting>`` with the same
  ``match``, a second acceptor on the same host and port, a URL parameter
  given twice, or a queue name used twice is an error, not "last one wins".
* ``artemis-roles.properties`` user lists are trimmed (see
  :mod:`junction.config.properties`).
* Connection routers: a ``<connector-ref>`` naming no ``<connector>`` is an
  error (Artemis logs a warning and leaves the target out); a pool with more
  than one source of targets is an error (Artemis uses the first of
  cluster-connection, discovery-group-ref, static-connectors); unknown or
  mistyped properties of the built-in policies are errors (Artemis ignores
  them, or fails with a NumberFormatException), and ``MODULO`` must be > 0
  (Artemis leaves keys unchanged for 0 or less).
* Clusters: a ``<cluster-connection>`` must give exactly one of
  ``<discovery-group-ref>`` and ``<static-connectors>``.  The xsd lets both
  be left out, but Junction needs a cluster connection to say how it finds
  its peers; giving both is an error too (Artemis uses the discovery group
  and ignores the connectors).  ``forward-when-no-consumers`` together with
  ``message-load-balancing`` is an error (Artemis lets the deprecated element
  win).  A ``<connector-ref>``, ``discovery-group-name`` or scale-down
  ``cluster-name`` that names nothing is an error (Artemis logs a warning and
  skips the cluster connection, or fails later).  Broadcast and discovery
  groups need ``group-address`` -- a literal IPv4 or IPv6 multicast address,
  not a host name -- and ``group-port`` (the xsd makes them optional for
  JGroups, which Junction refuses), and a broadcast group at least one
  ``connector-ref``.  ``cluster-connection-uri`` and masked ``ENC(...)``
  cluster passwords are refused.  On the lax side, ``local-bind-port`` 0
  and ``initial-wait-timeout`` 0 are accepted (Artemis wants -1 or > 0, and
  > 0).  Scale-down's ``cluster-name`` is Junction's (the xsd's
  ``scale-down`` has no such element; it stands for the
  ``scale-down-clustername`` of Artemis's ``ScaleDownConfiguration``), and
  an enabled scale-down with no way to find peers (no
  ``discovery-group-ref``, no ``connectors``, no cluster connection) is an
  error.

Junction's own element, ``<junction>`` inside ``<core>`` (Artemis's xsd does
not know it, so a file that uses it is Junction-only)::

    <junction>
       <!-- management HTTP API (default 127.0.0.1:8161, Artemis's console port) -->
       <management host="127.0.0.1" port="8161"/>
       <!-- users and roles files, relative to this file; anonymous connections
            run as anonymous-user and are refused when it is not set -->
       <security users-file="artemis-users.properties"
                 roles-file="artemis-roles.properties"
                 anonymous-user="guest"/>
       <!-- per-connection protocol limits (sizes take 10MiB/64KiB notation) -->
       <limits max-frame-size="10MiB" max-header-count="1000"
               max-header-length="64KiB" max-pending-frames="1000"
               connect-timeout="10000"/>
       <!-- the event log (off unless given): JSON Lines for `junction analyze` -->
       <events directory="data/events" connection="true" message="true"
               topology="true" message-sample-rate="1.0" max-file-size="64MiB"
               max-file-age="3600000" max-files="100"/>
    </junction>
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any, NamedTuple
from urllib.parse import unquote_plus

from junction.config import model
from junction.config.xmlsource import (
    ACCEPTED_NAMESPACES,
    Element,
    XMLSourceError,
    find_core,
    parse_bytes,
    parse_file,
)
from junction.model.message import RoutingType
from junction.tls.client import check_client_tls, parse_client_tls
from junction.tls.server import check_server_tls, parse_server_tls

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "load_config",
    "load_user_store",
    "parse_config",
    "parse_byte_size",
    "parse_transport_url",
    "substitute",
    "CORE_ELEMENTS",
    "ADDRESS_SETTING_ELEMENTS",
    "QUEUE_ATTRIBUTES",
    "WILDCARD_ELEMENTS",
    "JUNCTION_ELEMENTS",
    "ROUTER_ELEMENTS",
    "CACHE_ELEMENTS",
    "POOL_ELEMENTS",
    "BROADCAST_GROUP_ELEMENTS",
    "DISCOVERY_GROUP_ELEMENTS",
    "CLUSTER_CONNECTION_ELEMENTS",
    "HA_POLICY_ELEMENTS",
    "PRIMARY_ONLY_ELEMENTS",
    "SCALE_DOWN_ELEMENTS",
    "registered_policies",
    "ACCEPTOR_PARAMS",
    "CONNECTOR_PARAMS",
    "PARAM_TYPES",
    "PROTOCOLS",
    "UNSUPPORTED_PROTOCOLS",
]


# --------------------------------------------------------------------------
# Errors


class ConfigError(NamedTuple):
    """One problem in a configuration file: where, and what."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class ConfigErrors(Exception):
    """Every problem found in a configuration, in document order.

    ``str()`` gives one ``file:line: message`` line per error, ready to print.
    """

    def __init__(self, errors):
        self.errors: list[ConfigError] = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def __iter__(self):
        return iter(self.errors)


# --------------------------------------------------------------------------
# Value parsers.  Each takes the (stripped) text and returns the value or
# raises ValueError with a message that does not repeat the element name.

Parser = Callable[[str], Any]

_INT_RE = re.compile(r"[+-]?\d+\Z")
_JAVA_INT = (-(2**31), 2**31 - 1)
_JAVA_LONG = (-(2**63), 2**63 - 1)


def boolean(text: str) -> bool:
    """``true``/``false``, any case (see the module docstring for why not more)."""
    low = text.strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _check_range(value, text, lo, hi, minus_one):
    """``value`` if within ``[lo, hi]`` (or -1 with ``minus_one``), else ValueError."""
    if minus_one and value == -1:
        return value
    if lo is not None and value < lo:
        low = "greater than 0" if lo == 1 else f"at least {lo}"
        raise ValueError(f"must be {'-1 or ' if minus_one else ''}{low}, got {text.strip()!r}")
    if hi is not None and value > hi:
        raise ValueError(f"must be at most {hi}, got {text.strip()!r}")
    return value


def integer(
    lo: int | None = None, hi: int | None = None, *, minus_one: bool = False, long: bool = False
) -> Parser:
    """A whole number (Java ``int``, or ``long`` with ``long=True``) in ``[lo, hi]``.

    ``minus_one`` also allows -1, Artemis's usual "disabled"/"unlimited".
    """
    jlo, jhi = _JAVA_LONG if long else _JAVA_INT

    def parse(text: str) -> int:
        t = text.strip()
        if not _INT_RE.match(t):
            raise ValueError(f"expected a whole number, got {text!r}")
        v = int(t)
        if not jlo <= v <= jhi:
            raise ValueError(f"{t} is out of range for a Java {'long' if long else 'int'}")
        return _check_range(v, t, lo, hi, minus_one)

    return parse


_BYTES_RE = re.compile(r"\s*(-?\d+)\s*(?:([kmg])(i?))?(b?)\s*\Z", re.IGNORECASE)
_BYTE_FACTORS = {None: 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_byte_size(text: str) -> int:
    """Artemis byte notation (``ByteUtil.convertTextBytes``): ``1048576``,
    ``1024K``, ``10M``, ``10MB``, ``10MiB``, ``1GiB``, ``64kb`` ...

    Case-insensitive; ``K``/``M``/``G`` (with optional ``i`` and ``B``) are
    powers of 1024 as in Artemis -- ``10MB`` is 10485760 bytes, not 10**7.
    A plain ``-1`` is allowed here (many sizes use it for "no limit"); callers
    decide which ranges make sense.
    """
    m = _BYTES_RE.match(text)
    if not m:
        raise ValueError(
            f"expected a size in bytes such as 1048576, 512K, 10M or 1GiB, got {text!r}"
        )
    number, unit, _i, _b = m.groups()
    if number.startswith("-") and unit:
        raise ValueError(f"a negative size takes no unit, got {text!r}")
    return int(number) * _BYTE_FACTORS[unit.lower() if unit else None]


def size(lo: int | None = 0, hi: int | None = _JAVA_LONG[1], *, minus_one: bool = False) -> Parser:
    """A byte size in Artemis notation within ``[lo, hi]`` (see :func:`parse_byte_size`)."""

    def parse(text: str) -> int:
        v = parse_byte_size(text)
        return _check_range(v, text, lo, hi, minus_one)

    return parse


def real(lo: float | None = None, hi: float | None = None, *, above: float | None = None) -> Parser:
    """A decimal number (Java ``double``) in ``[lo, hi]``, and greater than ``above`` if given."""

    def parse(text: str) -> float:
        try:
            v = float(text.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
        if not math.isfinite(v):
            raise ValueError(f"expected a finite number, got {text!r}")
        if above is not None and not v > above:
            raise ValueError(f"must be greater than {above:g}, got {text.strip()!r}")
        return _check_range(v, text, lo, hi, False)

    return parse


def choice(*values: str) -> Parser:
    """One of ``values``, any case; returns the canonical spelling."""
    canon = {v.upper(): v for v in values}

    def parse(text: str) -> str:
        t = text.strip()
        if t.upper() in canon:
            return canon[t.upper()]
        raise ValueError(
            f"expected one of {', '.join(values)}, got {text!r}{_suggest(t, values, upper=True)}"
        )

    return parse


def ip_networks(text: str) -> tuple:
    """A comma list of IP addresses or CIDR networks, IPv4 or IPv6 (``proxyTrustedSources``).

    Returns the :class:`ipaddress.IPv4Network`/``IPv6Network`` objects; an
    empty list is an error (leave the parameter out to trust any source).
    """
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError("expected a comma list of IP addresses or CIDR networks, got nothing")
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"{item!r} is not an IP address or CIDR network (such as 10.0.0.0/8 or fd00::/8)"
            ) from None
    return tuple(networks)


_IPV4_MULTICAST_BASE = ipaddress.IPv4Address("224.0.0.0")


def multicast_address(text: str) -> str:
    """A literal UDP multicast address (broadcast and discovery groups' ``group-address``).

    IPv4 224.0.0.1 to 239.255.255.255 (224.0.0.0 is reserved); IPv6 groups
    (ff00::/8) are refused until discovery supports them.  Returned stripped, as written.  Host names are refused: a
    group address that resolves differently on two nodes splits the cluster.
    """
    t = text.strip()
    try:
        addr = ipaddress.ip_address(t)
    except ValueError:
        raise ValueError(
            "expected a multicast IP address (IPv4 224.0.0.1 to 239.255.255.255, or IPv6"
            f" ff00::/8) such as 231.7.7.7, got {text!r}"
        ) from None
    if not addr.is_multicast or addr == _IPV4_MULTICAST_BASE:
        raise ValueError(
            f"{t} is not a multicast address; use one in 224.0.0.1 to 239.255.255.255"
            " (IPv4) or ff00::/8 (IPv6), such as 231.7.7.7"
        )
    if addr.version == 6:
        raise ValueError(
            f"{t} is an IPv6 multicast group, which Junction's broadcast and discovery groups do not"
            " support yet; use an IPv4 group in 224.0.0.1 to 239.255.255.255, such as 231.7.7.7"
        )
    return t


def routing_type(text: str) -> RoutingType:
    """``ANYCAST`` or ``MULTICAST`` (any case)."""
    return RoutingType[choice("ANYCAST", "MULTICAST")(text)]


def string(nonempty: bool = True) -> Parser:
    """Any text, stripped (Artemis trims element text); optionally not empty."""

    def parse(text: str) -> str:
        t = text.strip()
        if nonempty and not t:
            raise ValueError("must not be empty")
        return t

    return parse


def character(text: str) -> str:
    """Exactly one character (the wildcard-syntax delimiters)."""
    t = text.strip()
    if len(t) != 1:
        raise ValueError(f"must be a single character, got {text!r}")
    return t


def power_of_two(text: str) -> int:
    v = integer(1)(text)
    if v & (v - 1):
        raise ValueError(f"must be a power of two, got {text!r}")
    return v


#: Java regex syntax that Python's re rejects, with what to write instead.
_JAVA_REGEX_HINTS = (
    (
        re.compile(r"\\[pP](?:\{|[A-Za-z])"),
        r"\p{...}/\P{...} character classes are Java regex syntax that Python's re"
        r" does not have; spell the class out, e.g. [A-Za-z] for \p{Alpha}",
    ),
    (
        re.compile(r"\\Q"),
        r"\Q...\E quoting is Java regex syntax; escape each special character instead",
    ),
    (
        re.compile(r"\(\?<[A-Za-z]"),
        "(?<name>...) named groups are Java regex syntax; Python writes (?P<name>...)",
    ),
    (
        re.compile(r"\\[hRXGz]"),
        r"\h, \R, \X, \G and \z are Java regex escapes that Python's re lacks (for \z write \Z)",
    ),
)


def _java_class_syntax(pattern: str) -> str | None:
    """Java character-class syntax Python's re reads differently, if ``pattern`` uses it.

    In Java an unescaped ``[`` inside a class opens a nested class (a union)
    and ``&&`` is an intersection; Python's re reads both as literal
    characters, so the pattern compiles but matches something else.
    """
    i, n, in_set, first = 0, len(pattern), False, 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if not in_set:
            if c == "[":
                in_set = True
                i += 1
                if pattern.startswith("^", i):
                    i += 1
                first = i
                continue
        elif c == "[":
            return f"a nested class at position {i} ([..[..]..], a union in Java)"
        elif pattern.startswith("&&", i):
            return f"&& at position {i} (a class intersection in Java)"
        elif c == "]" and i > first:
            in_set = False
        i += 1
    return None


def regex(text: str) -> str | None:
    r"""A regular expression (key filters), checked to compile with Python's :mod:`re`.

    Blank means "no filter" (None), as in Artemis.  Artemis compiles these
    with ``java.util.regex``; when a pattern fails in Python because of Java-only
    syntax (``\p{Lu}``, ``\Q..\E``, ``(?<name>..)`` ...) the error says so.
    Nested classes and class intersections (``[a-z&&[^x]]``) compile in Python
    but mean something else there, so they are refused too.  Possessive
    quantifiers (``a*+``) and atomic groups (``(?>..)``) mean the same in both.
    """
    t = text.strip()
    if not t:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # reported below, in Java terms
            re.compile(t)
    except re.error as e:
        hints = [hint for pattern, hint in _JAVA_REGEX_HINTS if pattern.search(t)]
        raise ValueError(
            f"not a valid regular expression: {e}" + "".join(f"; {h}" for h in hints)
        ) from None
    java = _java_class_syntax(t)
    if java:
        raise ValueError(
            f"this regular expression uses {java}, which Python's re reads as literal"
            " characters; write the character class out in full"
        )
    return t


text_value = string(nonempty=True)
any_text = string(nonempty=False)
port_number = integer(0, 65535)


def _close(name: str, candidates, *, upper: bool = False) -> list[str]:
    """The candidates closest to ``name`` (difflib), best first; only those
    nearly as close as the best, so a clear winner is suggested alone."""
    pool = list(dict.fromkeys(candidates))
    key = (lambda c: c.upper()) if upper else (lambda c: c)
    scored = []
    for c in pool:
        ratio = difflib.SequenceMatcher(None, key(name), key(c)).ratio()
        if ratio >= 0.6:
            scored.append((ratio, c))
    scored.sort(key=lambda rc: -rc[0])
    if not scored:
        return []
    best = scored[0][0]
    return [c for r, c in scored[:3] if r >= best - 0.05]


def _suggest(name: str, candidates, *, upper: bool = False) -> str:
    match = _close(name, candidates, upper=upper)
    if not match:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in match) + "?"


def _suggest_element(name: str, candidates) -> str:
    pool = list(dict.fromkeys(candidates))
    match = _close(name, pool)
    if match:
        return "; did you mean " + " or ".join(f"<{m}>" for m in match) + "?"
    if len(pool) <= 3:
        return "; expected " + " or ".join(f"<{m}>" for m in pool)
    return ""


# --------------------------------------------------------------------------
# Element specifications (the tables are data; see the module docstring).


@dataclass(frozen=True)
class Value:
    """A text element read into the field ``attr`` of the model object being built."""

    attr: str
    parse: Parser


@dataclass(frozen=True)
class Section:
    """A container element read by the loader method ``method``."""

    method: str


@dataclass(frozen=True)
class Nested:
    """A container inside a container (``<pool>`` in ``<connection-router>``):
    read by the loader method ``method(el, target)``, which stores what it
    builds in ``target``, the values of the element being read."""

    method: str


@dataclass(frozen=True)
class Ignored:
    """A Java-broker tuning knob: type-checked, then listed in ``BrokerConfig.ignored``."""

    parse: Parser
    why: str = "tuning for the Java broker; no effect in Junction"


@dataclass(frozen=True)
class DefaultOnly:
    """Artemis behaviour Junction lacks: accepted only at Artemis's default value."""

    parse: Parser
    default: Any


@dataclass(frozen=True)
class Unsupported:
    """An Artemis feature Junction does not have yet: always an error."""

    hint: str = ""


@dataclass(frozen=True)
class Refused:
    """An Artemis feature Junction will not have: always an error, ``<x>: message``."""

    message: str


_JVM = "tuning for the Java broker (threads, JMX, JVM memory); no effect in Junction"
_JOURNAL = "tuning for Artemis's journal implementation; Junction's journal sizes itself"
_MONITOR = "monitoring of the Java broker; Junction has its own management API and metrics"
_PAGING = "paging read-ahead tuning for the Java broker; no effect in Junction"
_MQTT = "MQTT is not supported by Junction, so this MQTT setting has no effect"
_MIRROR = "AMQP mirroring is not supported by Junction, so this setting has no effect"

#: Every element Artemis's xsd allows in ``<core>`` (plus a few older ones
#: Artemis still parses), and ``<junction>``.  See the module docstring.
CORE_ELEMENTS: dict[str, Value | Section | Ignored | DefaultOnly | Unsupported] = {
    # -- read into BrokerConfig ------------------------------------------------------
    "name": Value("name", text_value),
    "persistence-enabled": Value("persistence_enabled", boolean),
    "journal-directory": Value("journal_directory", text_value),
    "bindings-directory": Value("bindings_directory", text_value),
    "paging-directory": Value("paging_directory", text_value),
    "large-messages-directory": Value("large_messages_directory", text_value),
    "journal-file-size": Value("journal_file_size", size(1, _JAVA_INT[1])),
    "journal-sync-transactional": Value("journal_sync_transactional", boolean),
    "journal-sync-non-transactional": Value("journal_sync_non_transactional", boolean),
    "journal-buffer-timeout": Value("journal_buffer_timeout", integer(0)),
    "id-cache-size": Value("id_cache_size", integer(0)),
    "persist-id-cache": Value("persist_id_cache", boolean),
    "security-enabled": Value("security_enabled", boolean),
    "security-invalidation-interval": Value("security_invalidation_interval", integer(0, long=True)),
    "authentication-cache-size": Value("authentication_cache_size", integer(0, long=True)),
    "authorization-cache-size": Value("authorization_cache_size", integer(0, long=True)),
    "wild-card-routing-enabled": Value("wildcard_routing_enabled", boolean),
    "acceptors": Section("_acceptors"),
    "connectors": Section("_connectors"),
    "addresses": Section("_addresses"),
    "address-settings": Section("_address_settings"),
    "security-settings": Section("_security_settings"),
    "wildcard-addresses": Section("_wildcard_addresses"),
    "connection-routers": Section("_connection_routers"),
    "broadcast-groups": Section("_broadcast_groups"),
    "discovery-groups": Section("_discovery_groups"),
    "cluster-connections": Section("_cluster_connections"),
    "cluster-user": Section("_cluster_user"),
    "cluster-password": Section("_cluster_password"),
    "ha-policy": Section("_ha_policy"),
    "junction": Section("_junction"),
    # -- tuning knobs: accepted, type-checked, listed in BrokerConfig.ignored --------
    "journal-type": Ignored(choice("ASYNCIO", "NIO", "MAPPED"), _JOURNAL),
    "journal-datasync": Ignored(boolean, _JOURNAL),
    "journal-min-files": Ignored(integer(1), _JOURNAL),
    "journal-pool-files": Ignored(integer(1, minus_one=True), _JOURNAL),
    "journal-compact-percentage": Ignored(integer(0, 100), _JOURNAL),
    "journal-compact-min-files": Ignored(integer(0), _JOURNAL),
    "journal-max-io": Ignored(integer(1), _JOURNAL),
    "journal-buffer-size": Ignored(size(1, _JAVA_INT[1]), _JOURNAL),
    "journal-device-block-size": Ignored(integer(0, minus_one=True), _JOURNAL),
    "journal-file-open-timeout": Ignored(integer(1), _JOURNAL),
    "journal-max-attic-files": Ignored(integer(), _JOURNAL),
    "journal-lock-acquisition-timeout": Ignored(integer(1, minus_one=True, long=True), _JOURNAL),
    "log-journal-write-rate": Ignored(boolean, _JOURNAL),
    "large-message-sync": Ignored(boolean, _JOURNAL),
    "create-journal-dir": Ignored(boolean, "Junction always creates its directories"),
    "create-bindings-dir": Ignored(boolean, "Junction always creates its directories"),
    "node-manager-lock-directory": Ignored(
        any_text, "used by Artemis's shared-store HA, which Junction does not support yet"
    ),
    "purge-page-folders": Ignored(boolean, _PAGING),
    "page-max-concurrent-io": Ignored(integer(1, minus_one=True), _PAGING),
    "read-whole-page": Ignored(boolean, _PAGING),
    "page-sync-timeout": Ignored(integer(0), _JOURNAL),
    "thread-pool-max-size": Ignored(integer(1, minus_one=True), _JVM),
    "scheduled-thread-pool-max-size": Ignored(integer(1), _JVM),
    "graceful-shutdown-enabled": Ignored(
        boolean, "Junction always closes connections cleanly at shutdown"
    ),
    "graceful-shutdown-timeout": Ignored(
        integer(0, minus_one=True, long=True),
        "Junction always closes connections cleanly at shutdown",
    ),
    "async-connection-execution-enabled": Ignored(boolean, _JVM),
    "jmx-management-enabled": Ignored(boolean, "Junction has no JMX; see its management HTTP API"),
    "jmx-domain": Ignored(text_value, "Junction has no JMX; see its management HTTP API"),
    "jmx-use-broker-name": Ignored(boolean, "Junction has no JMX; see its management HTTP API"),
    "log-delegate-factory-class-name": Ignored(any_text, _JVM),
    "management-address": Ignored(
        text_value, "Junction's management is its HTTP API, not a management address"
    ),
    "management-notification-address": Ignored(
        text_value, "Junction's management is its HTTP API, not a notification address"
    ),
    "message-counter-enabled": Ignored(boolean, _MONITOR),
    "message-counter-sample-period": Ignored(integer(1, long=True), _MONITOR),
    "message-counter-max-day-history": Ignored(integer(1), _MONITOR),
    "critical-analyzer": Ignored(boolean, _JVM),
    "critical-analyzer-timeout": Ignored(integer(0, long=True), _JVM),
    "critical-analyzer-check-period": Ignored(integer(0, long=True), _JVM),
    "critical-analyzer-policy": Ignored(choice("LOG", "HALT", "SHUTDOWN"), _JVM),
    "server-dump-interval": Ignored(integer(1, minus_one=True, long=True), _JVM),
    "memory-warning-threshold": Ignored(integer(0, 100), _JVM),
    "memory-measure-interval": Ignored(integer(1, minus_one=True, long=True), _JVM),
    "global-max-size": Ignored(
        size(1, minus_one=True),
        "Junction limits memory per address (address-settings max-size-bytes)",
    ),
    "global-max-size-percent-of-jvm-max-memory": Ignored(integer(1), _JVM),
    "global-max-messages": Ignored(
        integer(1, minus_one=True, long=True),
        "Junction limits memory per address (address-settings max-size-messages)",
    ),
    "max-disk-usage": Ignored(
        integer(0, 100, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
    ),
    "min-disk-free": Ignored(
        size(1, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
    ),
    "disk-scan-period": Ignored(
        integer(1, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
    ),
    "connection-ttl-check-interval": Ignored(integer(1, long=True), _JVM),
    "configuration-file-refresh-period": Value(
        "configuration_file_refresh_period", integer(1, minus_one=True, long=True)
    ),
    "transaction-timeout-scan-period": Ignored(integer(1, long=True), _JVM),
    "message-expiry-scan-period": Ignored(integer(1, minus_one=True, long=True), _JVM),
    "message-expiry-thread-priority": Ignored(integer(0, 9), _JVM),
    "address-queue-scan-period": Ignored(integer(1, minus_one=True, long=True), _JVM),
    "max-redelivery-records": Ignored(integer(0, minus_one=True), _JOURNAL),
    "populate-validated-user": Ignored(
        boolean, "Junction does not add _AMQ_VALIDATED_USER to messages yet"
    ),
    "reject-empty-validated-user": Ignored(
        boolean, "Junction does not add _AMQ_VALIDATED_USER to messages yet"
    ),
    "internal-naming-prefix": Ignored(any_text, "Junction names its internal queues itself"),
    "suppress-session-notifications": Ignored(boolean, _MONITOR),
    "mqtt-session-scan-interval": Ignored(integer(1, long=True), _MQTT),
    "mqtt-session-state-persistence-timeout": Ignored(integer(1, long=True), _MQTT),
    "mqtt-subscription-persistence-enabled": Ignored(boolean, _MQTT),
    "mirror-ack-manager-queue-attempts": Ignored(integer(1), _MIRROR),
    "mirror-ack-manager-page-attempts": Ignored(integer(1), _MIRROR),
    "mirror-ack-manager-retry-delay": Ignored(integer(1), _MIRROR),
    "mirror-ack-manager-warn-unacked": Ignored(boolean, _MIRROR),
    "mirror-page-transaction": Ignored(boolean, _MIRROR),
    "network-check-period": Ignored(
        integer(1, long=True),
        "only used with network-check-list, which Junction does not support yet",
    ),
    "network-check-timeout": Ignored(
        integer(1), "only used with network-check-list, which Junction does not support yet"
    ),
    "network-check-NIC": Ignored(
        any_text, "only used with network-check-list, which Junction does not support yet"
    ),
    "network-check-ping-command": Ignored(
        any_text, "only used with network-check-list, which Junction does not support yet"
    ),
    "network-check-ping6-command": Ignored(
        any_text, "only used with network-check-list, which Junction does not support yet"
    ),
    # -- Artemis behaviour Junction lacks: fine at the default, an error otherwise ----
    "resolve-protocols": DefaultOnly(boolean, True),
    "amqp-use-core-subscription-naming": DefaultOnly(boolean, False),
    "persist-delivery-count-before-delivery": DefaultOnly(boolean, False),
    "connection-ttl-override": DefaultOnly(integer(1, minus_one=True, long=True), -1),
    "transaction-timeout": DefaultOnly(integer(1, long=True), 300000),
    "temporary-queue-namespace": DefaultOnly(any_text, ""),
    "uuid-namespace": DefaultOnly(any_text, ""),
    "literal-match-markers": DefaultOnly(any_text, ""),
    "view-permission-method-match-pattern": DefaultOnly(any_text, ""),
    "management-message-rbac": DefaultOnly(boolean, False),
    "management-rbac-prefix": DefaultOnly(text_value, "mops"),
    "mask-password": DefaultOnly(boolean, False),
    "password-codec": DefaultOnly(
        text_value, "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec"
    ),
    "network-check-list": DefaultOnly(any_text, ""),
    "network-check-URL-list": DefaultOnly(any_text, ""),
    # -- Artemis features Junction does not have yet ---------------------------------
    "grouping-handler": Unsupported(),
    "bridges": Unsupported(),
    "diverts": Unsupported(),
    "federations": Unsupported(),
    "broker-connections": Unsupported(),
    "queues": Unsupported("(deprecated in Artemis; declare queues under <addresses>)"),
    "jgroups-file": Unsupported(),
    "store": Unsupported("(Junction keeps its journal in files; no JDBC store)"),
    "journal-retention-directory": Unsupported(),
    "broker-plugins": Unsupported(),
    "metrics-plugin": Unsupported(),
    "metrics": Unsupported(),
    "resource-limit-settings": Unsupported(),
    "connector-services": Unsupported(),
    "remoting-interceptors": Unsupported(),
    "remoting-incoming-interceptors": Unsupported(),
    "remoting-outgoing-interceptors": Unsupported(),
    "system-property-prefix": Unsupported("(use ${VAR} references to the environment instead)"),
}

#: Children of ``<address-setting>``: Artemis element name -> spec.  ``Value``
#: attrs are :class:`~junction.config.model.AddressSettings` fields.
ADDRESS_SETTING_ELEMENTS: dict[str, Value | Ignored | DefaultOnly | Unsupported] = {
    "dead-letter-address": Value("dead_letter_address", text_value),
    "auto-create-dead-letter-resources": Value("auto_create_dead_letter_resources", boolean),
    "dead-letter-queue-prefix": Value("dead_letter_queue_prefix", any_text),
    "dead-letter-queue-suffix": Value("dead_letter_queue_suffix", any_text),
    "expiry-address": Value("expiry_address", text_value),
    "auto-create-expiry-resources": Value("auto_create_expiry_resources", boolean),
    "expiry-queue-prefix": Value("expiry_queue_prefix", any_text),
    "expiry-queue-suffix": Value("expiry_queue_suffix", any_text),
    "expiry-delay": Value("expiry_delay", integer(0, minus_one=True, long=True)),
    "min-expiry-delay": Value("min_expiry_delay", integer(0, minus_one=True, long=True)),
    "max-expiry-delay": Value("max_expiry_delay", integer(0, minus_one=True, long=True)),
    "max-delivery-attempts": Value("max_delivery_attempts", integer(0, minus_one=True)),
    "redelivery-delay": Value("redelivery_delay", integer(0, long=True)),
    "redelivery-delay-multiplier": Value("redelivery_delay_multiplier", real(0.0)),
    "redelivery-collision-avoidance-factor": Value(
        "redelivery_collision_avoidance_factor", real(0.0, 1.0)
    ),
    "max-redelivery-delay": Value("max_redelivery_delay", integer(0, long=True)),
    "max-size-bytes": Value("max_size_bytes", size(0, minus_one=True)),
    "max-size-messages": Value("max_size_messages", integer(0, minus_one=True, long=True)),
    "page-size-bytes": Value("page_size_bytes", size(1, _JAVA_INT[1])),
    "page-max-cache-size": Value("page_max_cache_size", integer(0)),
    "address-full-policy": Value("address_full_policy", choice(*model.ADDRESS_FULL_POLICIES)),
    "message-counter-history-day-limit": Value("message_counter_history_day_limit", integer(0)),
    "last-value-queue": Value("last_value_queue", boolean),  # deprecated spelling
    "default-last-value-queue": Value("last_value_queue", boolean),
    "default-last-value-key": Value("default_last_value_key", text_value),
    "default-non-destructive": Value("default_non_destructive", boolean),
    "default-exclusive-queue": Value("default_exclusive_queue", boolean),
    "default-max-consumers": Value("default_max_consumers", integer(0, minus_one=True)),
    "default-purge-on-no-consumers": Value("default_purge_on_no_consumers", boolean),
    "default-consumer-window-size": Value(
        "default_consumer_window_size", integer(0, minus_one=True)
    ),
    "redistribution-delay": Value("redistribution_delay", integer(0, minus_one=True, long=True)),
    # Junction's (Sun Message Queue's localDeliveryPreferred): in a cluster, a message goes to a
    # remote consumer only when no local consumer can take it
    "local-delivery-preferred": Value("local_delivery_preferred", boolean),
    "send-to-dla-on-no-route": Value("send_to_dla_on_no_route", boolean),
    "slow-consumer-threshold": Value(
        "slow_consumer_threshold", integer(1, minus_one=True, long=True)
    ),
    "slow-consumer-policy": Value("slow_consumer_policy", choice("KILL", "NOTIFY")),
    "slow-consumer-check-period": Value("slow_consumer_check_period", integer(1, long=True)),
    "auto-create-queues": Value("auto_create_queues", boolean),
    "auto-delete-queues": Value("auto_delete_queues", boolean),
    "auto-delete-created-queues": Value("auto_delete_created_queues", boolean),
    "auto-delete-queues-delay": Value("auto_delete_queues_delay", integer(0, long=True)),
    "auto-delete-queues-message-count": Value(
        "auto_delete_queues_message_count", integer(0, minus_one=True, long=True)
    ),
    "auto-create-addresses": Value("auto_create_addresses", boolean),
    "auto-delete-addresses": Value("auto_delete_addresses", boolean),
    "auto-delete-addresses-delay": Value("auto_delete_addresses_delay", integer(0, long=True)),
    "default-address-routing-type": Value("default_address_routing_type", routing_type),
    "default-queue-routing-type": Value("default_queue_routing_type", routing_type),
    "default-group-rebalance": Value("default_group_rebalance", boolean),
    "default-group-buckets": Value("default_group_buckets", integer(0, minus_one=True)),
    "default-group-first-key": Value("default_group_first_key", text_value),
    "default-ring-size": Value("default_ring_size", integer(0, minus_one=True, long=True)),
    "enable-metrics": Value("enable_metrics", boolean),
    "management-browse-page-size": Value("management_browse_page_size", integer(1)),
    # tuning
    "max-read-page-messages": Ignored(integer(1, minus_one=True), _PAGING),
    "max-read-page-bytes": Ignored(size(1, _JAVA_INT[1], minus_one=True), _PAGING),
    "prefetch-page-messages": Ignored(integer(1, minus_one=True), _PAGING),
    "prefetch-page-bytes": Ignored(size(1, _JAVA_INT[1], minus_one=True), _PAGING),
    "initial-queue-buffer-size": Ignored(power_of_two, _JVM),
    "management-message-attribute-size-limit": Ignored(integer(minus_one=True), _MONITOR),
    "auto-create-jms-queues": Ignored(boolean, "deprecated in Artemis (use auto-create-queues)"),
    "auto-delete-jms-queues": Ignored(boolean, "deprecated in Artemis (use auto-delete-queues)"),
    "auto-create-jms-topics": Ignored(boolean, "deprecated in Artemis (use auto-create-addresses)"),
    "auto-delete-jms-topics": Ignored(boolean, "deprecated in Artemis (use auto-delete-addresses)"),
    "page-full-policy": Ignored(
        choice("DROP", "FAIL"),
        "only applies with page-limit-bytes/page-limit-messages, which Junction does not support yet",
    ),
    # Artemis behaviour Junction lacks
    "no-expiry": DefaultOnly(boolean, False),
    "max-size-bytes-reject-threshold": DefaultOnly(size(0, minus_one=True), -1),
    "page-limit-bytes": DefaultOnly(size(1, minus_one=True), -1),
    "page-limit-messages": DefaultOnly(integer(1, minus_one=True, long=True), -1),
    "disk-full-policy": DefaultOnly(choice("DROP", "FAIL", "BLOCK"), "BLOCK"),
    "default-group-rebalance-pause-dispatch": DefaultOnly(boolean, False),
    "default-consumers-before-dispatch": DefaultOnly(integer(0), 0),
    "default-delay-before-dispatch": DefaultOnly(integer(0, minus_one=True, long=True), -1),
    "slow-consumer-threshold-measurement-unit": DefaultOnly(
        choice(
            "MESSAGES_PER_SECOND", "MESSAGES_PER_MINUTE", "MESSAGES_PER_HOUR", "MESSAGES_PER_DAY"
        ),
        "MESSAGES_PER_SECOND",
    ),
    "auto-delete-queues-skip-usage-check": DefaultOnly(boolean, False),
    "auto-delete-addresses-skip-usage-check": DefaultOnly(boolean, False),
    "config-delete-queues": Value("config_delete_queues", choice("OFF", "FORCE")),
    "config-delete-addresses": Value("config_delete_addresses", choice("OFF", "FORCE")),
    "config-delete-diverts": DefaultOnly(choice("OFF", "FORCE"), "OFF"),
    "retroactive-message-count": DefaultOnly(integer(0, long=True), 0),
    "enable-ingress-timestamp": DefaultOnly(boolean, False),
    "id-cache-size": Unsupported(
        "(per-address duplicate-ID caches; Junction uses the node's <id-cache-size>)"
    ),
}

#: Attributes of ``<queue>`` (inside ``<anycast>``/``<multicast>``).  ``Value``
#: attrs are :class:`~junction.config.model.QueueConfig` fields.
QUEUE_ATTRIBUTES: dict[str, Value | DefaultOnly | Unsupported] = {
    "max-consumers": Value("max_consumers", integer(0, minus_one=True)),
    "purge-on-no-consumers": Value("purge_on_no_consumers", boolean),
    "exclusive": Value("exclusive", boolean),
    "last-value": Value("last_value", boolean),
    "last-value-key": Value("last_value_key", text_value),
    "non-destructive": Value("non_destructive", boolean),
    "group-rebalance": Value("group_rebalance", boolean),
    "group-buckets": Value("group_buckets", integer(0, minus_one=True)),
    "group-first-key": Value("group_first_key", text_value),
    "ring-size": Value("ring_size", integer(0, minus_one=True, long=True)),
    "group-rebalance-pause-dispatch": DefaultOnly(boolean, False),
    "consumers-before-dispatch": DefaultOnly(integer(0), 0),
    "delay-before-dispatch": DefaultOnly(integer(0, minus_one=True, long=True), -1),
    "enabled": DefaultOnly(boolean, True),
}

#: Child elements of ``<queue>``.
QUEUE_ELEMENTS = ("filter", "durable", "user")

#: Children of ``<wildcard-addresses>`` -> :class:`~junction.config.model.WildcardAddresses` fields.
WILDCARD_ELEMENTS: dict[str, Value] = {
    "routing-enabled": Value("routing_enabled", boolean),
    "enabled": Value("routing_enabled", boolean),  # deprecated spelling of routing-enabled
    "delimiter": Value("delimiter", character),
    "any-words": Value("any_words", character),
    "single-word": Value("single_word", character),
}

#: Children of ``<junction>`` and their attributes: attribute -> (BrokerConfig
#: or Limits field, parser).  ``limits`` fields go to :class:`~junction.config.model.Limits`.
JUNCTION_ELEMENTS: dict[str, dict[str, tuple[str, Parser]]] = {
    "management": {
        "host": ("management_host", text_value),
        "port": ("management_port", port_number),
    },
    "security": {
        "users-file": ("users_file", text_value),
        "roles-file": ("roles_file", text_value),
        "anonymous-user": ("anonymous_user", text_value),
        "cert-users-file": ("cert_users_file", text_value),
        "cert-roles-file": ("cert_roles_file", text_value),
    },
    "limits": {
        "max-frame-size": ("max_frame_size", size(1, _JAVA_INT[1])),
        "max-header-count": ("max_header_count", integer(1)),
        "max-header-length": ("max_header_length", size(1, _JAVA_INT[1])),
        "max-pending-frames": ("max_pending_frames", integer(1)),
        "connect-timeout": ("connect_timeout", integer(1)),
    },
    "events": {
        "directory": ("directory", string()),
        "connection": ("connection", boolean),
        "message": ("message", boolean),
        "topology": ("topology", boolean),
        "message-sample-rate": ("message_sample_rate", real(0.0, 1.0)),
        "max-file-size": ("max_file_size", size(4096, _JAVA_LONG[1])),
        "max-file-age": ("max_file_age", integer(1000)),
        "max-files": ("max_files", integer(1)),
        "max-spool-size": ("max_spool_size", size(1024 * 1024, _JAVA_LONG[1])),
    },
}

# -- connection routers ----------------------------------------------------------------

#: Children of ``<connection-router>`` (artemis-configuration.xsd
#: ``connectionRouterType``); ``Value`` attrs are
#: :class:`~junction.config.model.ConnectionRouterConfig` fields.  ``cache``,
#: ``policy`` and ``pool`` are containers read by the loader.  The xsd's
#: sequence is ``maxOccurs="unbounded"``, so the order of the children is free;
#: each may appear once.
ROUTER_ELEMENTS: dict[str, Value | Nested | Unsupported] = {
    "key-type": Value("key_type", choice(*model.KEY_TYPES)),
    "key-filter": Value("key_filter", regex),
    "local-target-filter": Value("local_target_filter", regex),
    "cache": Nested("_router_cache"),
    "policy": Nested("_router_policy"),
    "pool": Nested("_router_pool"),
    "key-transformer": Unsupported(
        "(Artemis ignores it too: it is in artemis-configuration.xsd, but no Artemis"
        " version reads it; keys are transformed by the policy, e.g. CONSISTENT_HASH_MODULO)"
    ),
}

#: Children of a router's ``<cache>`` -> :class:`~junction.config.model.CacheConfig`
#: fields.  Artemis reads ``timeout`` as an ``int`` >= 0 (the xsd's default of
#: -1 is not what the broker uses: its default is 0 = never expire).
CACHE_ELEMENTS: dict[str, Value] = {
    "persisted": Value("persisted", boolean),
    "timeout": Value("timeout", integer(0)),
}

#: Children of a router's ``<pool>`` -> :class:`~junction.config.model.PoolConfig`
#: fields (Artemis ``parsePoolConfiguration``: ``int`` values, check-period
#: > 0, quorum-size > 0, quorum-timeout >= 0).  ``static-connectors`` and
#: ``discovery-group-ref`` are containers read by the loader.
POOL_ELEMENTS: dict[str, Value | Nested] = {
    "username": Value("username", text_value),
    "password": Value("password", any_text),
    "check-period": Value("check_period", integer(1)),
    "quorum-size": Value("quorum_size", integer(1)),
    "quorum-timeout": Value("quorum_timeout", integer(0)),
    "local-target-enabled": Value("local_target_enabled", boolean),
    "cluster-connection": Nested("_pool_cluster_connection"),
    "static-connectors": Nested("_pool_static_connectors"),
    "discovery-group-ref": Nested("_pool_discovery_group_ref"),
}

#: Checks of the built-in policies' known properties (values stay strings).
_POLICY_PROPERTY_TYPES: dict[str, Parser] = {
    "MODULO": integer(1),
    "CONNECTION_COUNT_THRESHOLD": integer(0),
    "HASH": choice(*model.HASH_FUNCTIONS),
}

#: Properties a built-in policy cannot do without (Artemis's
#: CONSISTENT_HASH_MODULO fails to deploy without MODULO).
_REQUIRED_POLICY_PROPERTIES: dict[str, tuple[str, ...]] = {
    "CONSISTENT_HASH_MODULO": ("MODULO",),
}


# -- clusters -----------------------------------------------------------------------

_JGROUPS = Refused(
    "JGroups is not supported by Junction; give group-address and group-port (UDP multicast),"
    " or use static-connectors"
)

#: Children of ``<broadcast-group>`` (xsd ``broadcastGroupType``) ->
#: :class:`~junction.config.model.BroadcastGroupConfig` fields.  Artemis
#: reads them in any order.  ``connector-ref`` is not here: it repeats (one
#: per connector to announce) and is read by the loader into ``connector_refs``.
BROADCAST_GROUP_ELEMENTS: dict[str, Value | Refused] = {
    "local-bind-address": Value("local_bind_address", text_value),
    "local-bind-port": Value("local_bind_port", integer(0, 65535, minus_one=True)),
    "group-address": Value("group_address", multicast_address),
    "group-port": Value("group_port", integer(1, 65535)),
    "broadcast-period": Value("broadcast_period", integer(1, long=True)),
    "jgroups-file": _JGROUPS,
    "jgroups-channel": _JGROUPS,
    "jgroups-properties": _JGROUPS,
}

#: Children of ``<discovery-group>`` (xsd ``discoveryGroupType``) ->
#: :class:`~junction.config.model.DiscoveryGroupConfig` fields.
#: ``initial-wait-timeout`` may be 0 (Artemis: > 0).
DISCOVERY_GROUP_ELEMENTS: dict[str, Value | Ignored | Refused] = {
    "local-bind-address": Value("local_bind_address", text_value),
    "group-address": Value("group_address", multicast_address),
    "group-port": Value("group_port", integer(1, 65535)),
    "refresh-timeout": Value("refresh_timeout", integer(1, long=True)),
    "initial-wait-timeout": Value("initial_wait_timeout", integer(0, long=True)),
    "local-bind-port": Ignored(
        integer(0, 65535, minus_one=True),
        "a discovery group listens on its group-port; Artemis does not use local-bind-port"
        " for discovery either",
    ),
    "jgroups-file": _JGROUPS,
    "jgroups-channel": _JGROUPS,
    "jgroups-properties": _JGROUPS,
}

#: Children of ``<cluster-connection>`` (xsd ``cluster-connectionType``, an
#: ``xsd:all``: any order, each once) -> :class:`~junction.config.model.ClusterConnectionConfig`
#: fields.  Ranges are Artemis's (``FileConfigurationParser``); sizes take
#: byte notation.  ``connector-ref``, ``forward-when-no-consumers``,
#: ``discovery-group-ref`` and ``static-connectors`` are read by the loader.
CLUSTER_CONNECTION_ELEMENTS: dict[str, Value | Nested | Ignored] = {
    "address": Value("address", any_text),
    "connector-ref": Nested("_cluster_connector_ref"),
    # Junction's (Sun Message Queue's imq.cluster.masterbroker): the connector of the node that
    # keeps the cluster's configuration change record
    "master-broker": Nested("_cluster_master_broker"),
    "check-period": Value("check_period", integer(1, long=True)),
    "connection-ttl": Value("connection_ttl", integer(1, long=True)),
    "min-large-message-size": Value("min_large_message_size", size(1, _JAVA_INT[1])),
    "call-timeout": Value("call_timeout", integer(1, long=True)),
    "call-failover-timeout": Value("call_failover_timeout", integer(1, minus_one=True, long=True)),
    "retry-interval": Value("retry_interval", integer(1, long=True)),
    "retry-interval-multiplier": Value("retry_interval_multiplier", real(above=0.0)),
    "max-retry-interval": Value("max_retry_interval", integer(1, long=True)),
    "initial-connect-attempts": Value("initial_connect_attempts", integer(0, minus_one=True)),
    "reconnect-attempts": Value("reconnect_attempts", integer(0, minus_one=True)),
    "use-duplicate-detection": Value("use_duplicate_detection", boolean),
    "message-load-balancing": Value(
        "message_load_balancing", choice(*model.MESSAGE_LOAD_BALANCING)
    ),
    "forward-when-no-consumers": Nested("_cluster_forward_when_no_consumers"),
    "max-hops": Value("max_hops", integer(0)),
    "confirmation-window-size": Value("confirmation_window_size", size(1, _JAVA_INT[1])),
    "producer-window-size": Value("producer_window_size", size(1, _JAVA_INT[1], minus_one=True)),
    "notification-interval": Value("notification_interval", integer(1, long=True)),
    "notification-attempts": Value("notification_attempts", integer(1)),
    "discovery-group-ref": Nested("_cluster_discovery_group_ref"),
    "static-connectors": Nested("_cluster_static_connectors"),
    "client-id": Ignored(
        text_value,
        "names the connection on the remote Java broker (for its management); no effect in Junction",
    ),
    "scale-down-connector": Ignored(
        text_value,
        "Artemis does not use it either; scale-down peers are set in <ha-policy><primary-only><scale-down>",
    ),
    "topology-scanner-attempts": Ignored(
        integer(0, minus_one=True),
        "tuning of the Java broker's topology scan; no effect in Junction",
    ),
}

#: Children of ``<ha-policy>`` (an xsd choice: one of them).  ``live-only``
#: is Artemis's deprecated name for ``primary-only``.
HA_POLICY_ELEMENTS: dict[str, Nested | Unsupported] = {
    "primary-only": Nested("_ha_primary_only"),
    "live-only": Nested("_ha_primary_only"),
    "replication": Unsupported(),
    "shared-store": Unsupported(),
}

#: Children of ``<primary-only>``/``<live-only>``.
PRIMARY_ONLY_ELEMENTS: dict[str, Nested] = {
    "scale-down": Nested("_scale_down"),
}

#: Children of ``<scale-down>`` (xsd ``scaleDownType``, plus Junction's
#: ``cluster-name``) -> :class:`~junction.config.model.ScaleDownConfig` fields.
#: ``discovery-group-ref`` and ``connectors`` are an xsd choice: at most one.
SCALE_DOWN_ELEMENTS: dict[str, Value | Nested] = {
    "enabled": Value("enabled", boolean),
    "group-name": Value("group_name", text_value),
    "cluster-name": Nested("_scale_down_cluster_name"),
    "discovery-group-ref": Nested("_scale_down_discovery_group_ref"),
    "connectors": Nested("_scale_down_connectors"),
    "commit-interval": Value("commit_interval", integer(1, minus_one=True)),
}

#: What masked passwords get (Artemis's ``ENC(...)``, decoded with its password codec).
_MASKED_PASSWORD = (
    "masked passwords (ENC(...)) are not supported by Junction yet"
    " (Artemis decodes them with its password codec); write the password in"
    " clear text or take it from the environment with ${VAR}"
)


def registered_policies() -> tuple[str, ...]:
    """Names of the policies plug-ins register in the ``junction.policies`` entry-point group.

    Only the names are read (nothing is imported), so checking a config never
    runs plug-in code.  A plug-in package declares, for example::

        [options.entry_points]
        junction.policies =
            STICKY_TENANT = mypkg.policies:StickyTenantPolicy
    """
    return tuple(
        sorted({ep.name for ep in metadata.entry_points(group=model.POLICY_ENTRY_POINT_GROUP)})
    )


# -- transport URLs ------------------------------------------------------------------

#: Protocols an acceptor may name in ``protocols=`` and Junction serves.
#: Artemis's protocols, plus Junction's CLUSTER (an acceptor for cluster links only).
PROTOCOLS = ("CORE", "AMQP", "STOMP", "OPENWIRE", "CLUSTER")
#: Protocols Artemis knows that Junction refuses.
UNSUPPORTED_PROTOCOLS = ("MQTT", "HORNETQ")

# fmt: off
_TRANSPORT_COMMON = frozenset(
    {
        # Netty TCP (configuring-transports.adoc "Configuring Netty TCP")
        "tcpNoDelay", "tcpSendBufferSize", "tcpReceiveBufferSize", "writeBufferLowWaterMark",
        "writeBufferHighWaterMark", "batchDelay", "nioRemotingThreads", "remotingThreads", "useNio",
        "useEpoll", "useKQueue", "handshake-timeout", "httpUpgradeEnabled",
        # TLS ("Configuring Netty SSL")
        "sslEnabled", "keyStorePath", "keyStorePassword", "keyStoreType", "keyStoreProvider",
        "keyStoreAlias", "trustStorePath", "trustStorePassword", "trustStoreType",
        "trustStoreProvider", "enabledCipherSuites", "enabledProtocols", "verifyHost", "sslProvider",
        "sniHost", "crlPath", "trustManagerFactoryPlugin",
        # password masking switches Artemis allows on every URL
        "activemq.usemaskedpassword", "activemq.passwordcodec",
    }
)

#: Parameters an ``<acceptor>`` URL may carry: Artemis's
#: ``TransportConstants.ALLOWABLE_ACCEPTOR_KEYS`` plus the protocol managers'
#: own (AMQP, OpenWire, CORE/STOMP prefixes), and Junction's ``router``.
ACCEPTOR_PARAMS = _TRANSPORT_COMMON | frozenset(
    {
        "protocols", "protocol", "router", "anycastPrefix", "multicastPrefix", "securityDomain",
        "connectionsAllowed", "autoStart", "backlog", "directDeliver", "clusterConnection",
        "needClientAuth", "wantClientAuth", "sslAutoReload", "proxyProtocolEnabled", "useInvm",
        "connectionTtl", "connectionTtlMin", "connectionTtlMax", "heartBeatToConnectionTtlModifier",
        "quietPeriod", "shutdownTimeout", "httpResponseTime", "httpServerScanPeriod",
        "webSocketMaxFramePayloadLength", "webSocketEncoderType",
        # STOMP
        "stompEnableMessageId", "stomp-enable-message-id", "stompMinLargeMessageSize",
        "stomp-min-large-message-size", "stompMaxFramePayloadLength", "stompConsumerCredits",
        "stompConsumerWindowSize", "disableStompServerHeader",
        # AMQP (ProtonProtocolManager)
        "amqpCredits", "amqpLowCredits", "amqpMinLargeMessageSize", "amqpDuplicateDetection",
        "amqpIdleTimeout", "amqpLinkQuiesceTimeout", "amqpTreatRejectAsUnmodifiedDeliveryFailed",
        "amqpUseModifiedForTransientDeliveryErrors", "amqpDrainOnTransientDeliveryErrors",
        "maxFrameSize", "initialRemoteMaxFrameSize", "saslMechanisms", "saslLoginConfigScope",
        "pubSubPrefix", "ackManagerFlushTimeout", "mirrorMaxPendingAcks",
        # AMQP limits of Junction's own (documented in docs/configuration.md)
        "amqpChannelMax", "amqpMaxMessageSize",
        # the gateway's per-acceptor mode (Junction's; docs/configuration.md)
        "routerMode",
        # PROXY protocol: Artemis's proxyProtocolEnabled (above), Junction's alias
        # proxyEnabled and Junction's proxyTrustedSources (docs/configuration.md)
        "proxyEnabled", "proxyTrustedSources",
        # TLS at the edge: Junction's sniRequired and sniKeyStorePaths (docs/tls.md)
        "sniRequired", "sniKeyStorePaths", "handshakesAllowed",
        # abuse limits per source address and before the routing decision (docs/tls.md)
        "connectionsAllowedPerAddress", "connectionRatePerAddress", "routingTimeout", "routingMaxBytes",
        # OpenWire (OpenWireProtocolManager)
        "supportAdvisory", "suppressInternalManagementObjects", "actorThresholdBytes", "brokerName",
        "maxInactivityDuration", "maxInactivityDurationInitalDelay", "openWireDestinationCacheSize",
        "openwireMaxPacketChunkSize", "openwireUseDuplicateDetectionOnFailover",
        "rebalanceClusterClients", "updateClusterClients", "updateClusterClientsOnRemove",
        "useKeepAlive", "virtualTopicConsumerLruCacheMax", "virtualTopicConsumerWildcards",
    }
)

#: Parameters a ``<connector>`` URL may carry (``ALLOWABLE_CONNECTOR_KEYS``).
CONNECTOR_PARAMS = _TRANSPORT_COMMON | frozenset(
    {
        "localAddress", "localPort", "connect-timeout-millis", "activemqServerName", "httpEnabled",
        "httpClientIdleTime", "httpClientIdleScanPeriod", "httpRequiresSessionId",
        "httpUpgradeEndpoint", "servletPath", "useServlet", "trustAll", "forceSSLParameters",
        "useDefaultSslContext", "useGlobalWorkerPool", "useNioGlobalWorkerPool", "socksEnabled",
        "socksHost", "socksPort", "socksVersion", "socksUsername", "socksPassword", "socksRemoteDNS",
        # Junction's: the gateway writes a PROXY v2 header on connections it forwards
        # through this connector (docs/configuration.md)
        "proxyProtocolEnabled", "proxyEnabled",
        # Junction's: the protocols a router pool's readiness probe speaks to the
        # target behind this connector (docs/configuration.md)
        model.PROBE_PROTOCOLS_PARAM,
    }
)

_B = boolean
_I = integer(minus_one=True)
_N = integer(0)  # non-negative
_P = integer(1)  # positive
#: Value types of the URL parameters that have one; others are free text.
#: Values are still kept as the strings given in ``Acceptor.params``.
PARAM_TYPES: dict[str, Parser] = {
    **dict.fromkeys(
        [
            "sslEnabled", "tcpNoDelay", "useEpoll", "useKQueue", "useNio", "useInvm", "needClientAuth",
            "wantClientAuth", "verifyHost", "httpUpgradeEnabled", "autoStart", "directDeliver",
            "proxyProtocolEnabled", "proxyEnabled", "sslAutoReload", "stompEnableMessageId", "stomp-enable-message-id",
            "disableStompServerHeader", "amqpDuplicateDetection", "supportAdvisory",
            "suppressInternalManagementObjects", "useKeepAlive", "trustAll", "forceSSLParameters",
            "useDefaultSslContext", "httpEnabled", "httpRequiresSessionId", "socksEnabled",
            "socksRemoteDNS", "useServlet", "useGlobalWorkerPool", "useNioGlobalWorkerPool",
            "amqpTreatRejectAsUnmodifiedDeliveryFailed", "amqpUseModifiedForTransientDeliveryErrors",
            "amqpDrainOnTransientDeliveryErrors", "rebalanceClusterClients", "sniRequired", "updateClusterClients",
            "updateClusterClientsOnRemove", "openwireUseDuplicateDetectionOnFailover",
            "activemq.usemaskedpassword",
        ],
        _B,
    ),
    **dict.fromkeys(
        [
            "tcpSendBufferSize", "tcpReceiveBufferSize", "connectionsAllowed", "amqpMinLargeMessageSize",
            "stompMinLargeMessageSize", "stomp-min-large-message-size", "stompConsumerWindowSize",
            "maxInactivityDuration", "maxInactivityDurationInitalDelay", "remotingThreads",
            "nioRemotingThreads", "backlog", "connectionTtl", "connectionTtlMin", "connectionTtlMax",
            "amqpIdleTimeout", "connectionsAllowedPerAddress", "handshakesAllowed",
        ],
        _I,
    ),
    **dict.fromkeys(
        [
            "handshake-timeout", "batchDelay", "writeBufferLowWaterMark", "writeBufferHighWaterMark",
            "amqpLowCredits", "quietPeriod", "shutdownTimeout", "connect-timeout-millis",
            "stompConsumerCredits", "openWireDestinationCacheSize", "actorThresholdBytes", "routingTimeout",
        ],
        _N,
    ),
    **dict.fromkeys(
        [
            "stompMaxFramePayloadLength", "webSocketMaxFramePayloadLength", "amqpCredits", "maxFrameSize",
            "initialRemoteMaxFrameSize", "openwireMaxPacketChunkSize", "virtualTopicConsumerLruCacheMax",
            "amqpChannelMax", "amqpMaxMessageSize", "routingMaxBytes",
        ],
        _P,
    ),
    "connectionRatePerAddress": real(0.0),
    "heartBeatToConnectionTtlModifier": real(0.0),
    "localPort": port_number,
    "socksPort": port_number,
    "socksVersion": choice("4", "5"),
    "routerMode": choice("redirect", "forward", "auto"),
    "proxyTrustedSources": ip_networks,
}

# fmt: on

#: Port Artemis uses when a URL gives none (``TransportConstants.DEFAULT_PORT``).
DEFAULT_PORT = 61616
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "*", "[::]"})


class ParsedURL(NamedTuple):
    scheme: str
    host: str
    port: int
    params: dict[str, str]


_URL_RE = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://([^?]*)(?:\?(.*))?\Z", re.DOTALL)


def parse_transport_url(text: str, kind: str = "acceptor") -> tuple[ParsedURL | None, list[str]]:
    """Parse an Artemis transport URL, ``tcp://host:port?key=value;key2=value2``.

    Parameters are separated by ``;`` or ``&`` (Artemis's ``URISupport``
    splits on both) and URL-decoded.  ``kind`` is ``"acceptor"`` or
    ``"connector"`` and picks the allowed parameter names
    (:data:`ACCEPTOR_PARAMS`/:data:`CONNECTOR_PARAMS`); typed ones are checked
    against :data:`PARAM_TYPES`.  A missing port is Artemis's 61616; port 0
    ("any free port") is allowed for acceptors only.

    Returns ``(url, errors)``: every problem is collected, ``url`` is None
    only when the URL cannot be read at all.
    """
    errors: list[str] = []
    m = _URL_RE.match(text)
    if not m:
        return None, [f"expected a URL such as tcp://127.0.0.1:61616, got {text.strip()!r}"]
    scheme, authority, query = m.group(1).lower(), m.group(2).strip(), m.group(3)
    if scheme == "vm":
        return None, [
            "in-VM transports (vm://) are not supported by Junction yet; use tcp://host:port"
        ]
    if scheme != "tcp":
        return None, [f"unknown transport {scheme!r} in {text.strip()!r}; Junction speaks tcp://"]
    host, port = authority, DEFAULT_PORT
    v6 = re.fullmatch(r"\[([^\]]*)\](?::(.*))?", authority)
    if v6:
        host, port_text = v6.group(1), v6.group(2)
    elif authority.count(":") == 1:
        host, port_text = authority.split(":")
    elif ":" in authority:
        return None, [
            f"IPv6 addresses must be in brackets, as in tcp://[::1]:61616; got {authority!r}"
        ]
    else:
        port_text = None
    if "," in host or "(" in host:
        return None, [f"a {kind} takes one host, not a list: {authority!r}"]
    host = host or "localhost"
    if port_text is not None:
        lo = 0 if kind == "acceptor" else 1
        try:
            port = integer(lo, 65535)(port_text)
        except ValueError as e:
            errors.append(f"port: {e}")
            port = 0
    params: dict[str, str] = {}
    allowed = ACCEPTOR_PARAMS if kind == "acceptor" else CONNECTOR_PARAMS
    for raw in re.split(r"[&;]", query or ""):
        if not raw.strip():
            continue
        if "=" not in raw:
            errors.append(f"parameter {raw.strip()!r} has no value (write {raw.strip()}=value)")
            continue
        key, value = raw.split("=", 1)
        key, value = unquote_plus(key).strip(), unquote_plus(value).strip()
        if key in ("host", "port"):
            errors.append(
                f"give the {key} in the URL (tcp://host:port), not as the parameter {key}="
            )
            continue
        if key not in allowed:
            errors.append(f"unknown {kind} parameter {key!r}{_suggest(key, allowed)}")
            continue
        if key in params:
            errors.append(f"parameter {key!r} is given twice")
            continue
        parser = PARAM_TYPES.get(key)
        if parser is not None:
            try:
                parser(value)
            except ValueError as e:
                errors.append(f"parameter {key}: {e}")
        params[key] = value
    return ParsedURL(scheme, host, port, params), errors


def parse_probe_protocols(text: str) -> tuple[tuple[str, ...], list[str]]:
    """A connector's ``probeProtocols=``: a comma list of AMQP and STOMP, in the order to try.

    Names are case-insensitive; an empty list, an unknown name, a protocol the
    probe does not speak (CORE, OPENWIRE) and a repeat are errors.
    """
    names = [p.strip().upper() for p in text.split(",") if p.strip()]
    errors = []
    speaks = " and ".join(model.PROBE_PROTOCOLS)
    if not names:
        errors.append(f"probeProtocols= is empty; name {speaks}, or one of them")
    out: list[str] = []
    for name in names:
        if name in out:
            errors.append(f"probeProtocols= names {name} twice")
        elif name in model.PROBE_PROTOCOLS:
            out.append(name)
        elif name in PROTOCOLS or name in UNSUPPORTED_PROTOCOLS:
            errors.append(
                f"probeProtocols= names {name}: the readiness probe speaks {speaks} only"
            )
        else:
            errors.append(
                f"probeProtocols= names an unknown protocol {name!r}"
                f"{_suggest(name, model.PROBE_PROTOCOLS)}"
            )
    return tuple(out), errors


def parse_protocols(text: str) -> tuple[frozenset[str], list[str]]:
    """``protocols=`` value: a comma list, upper-cased; unknown or unsupported names are errors."""
    names = [p.strip().upper() for p in text.split(",") if p.strip()]
    errors = []
    if not names:
        errors.append("protocols= is empty; name at least one of " + ", ".join(PROTOCOLS))
    for name in names:
        if name in UNSUPPORTED_PROTOCOLS:
            errors.append(
                f"protocol {name} is not supported by Junction (it serves {', '.join(PROTOCOLS)})"
            )
        elif name not in PROTOCOLS:
            errors.append(
                f"unknown protocol {name!r}{_suggest(name, PROTOCOLS + UNSUPPORTED_PROTOCOLS)}"
            )
    return frozenset(n for n in names if n in PROTOCOLS), errors


# --------------------------------------------------------------------------
# ${VAR} substitution

_REF_RE = re.compile(r"\$\{([^}]*)\}")


def substitute(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Replace ``${VAR}`` and ``${VAR:default}`` in ``text`` from ``env``.

    As Artemis's ``XMLUtil.replaceSystemPropsInString``: the name and the
    default are trimmed and the default is everything after the first ``:``
    (so ``${URL:tcp://h:1}`` defaults to ``tcp://h:1``).  Unlike Artemis, a
    reference with no default to an unset variable is reported (returned in
    the error list) instead of becoming an empty string, and values are not
    substituted again.
    """
    problems: list[str] = []

    def repl(m: re.Match) -> str:
        body = m.group(1)
        name, sep, default = body.partition(":")
        name = name.strip()
        if not name:
            problems.append(f"empty variable reference {m.group(0)!r}")
            return m.group(0)
        if name in env:
            return env[name]
        if sep:
            return default.strip()
        problems.append(
            f"environment variable {name!r} is not set and ${{{body}}} gives no default"
        )
        return m.group(0)

    out = _REF_RE.sub(repl, text)
    rest = _REF_RE.sub("", text)
    if "${" in rest:
        problems.append("unterminated ${...} reference")
    return out, problems


# --------------------------------------------------------------------------
# The loader


def load_config(
    path: str | os.PathLike, *, env: Mapping[str, str] | None = None
) -> model.BrokerConfig:
    """Read, validate and return the configuration in ``path`` (a broker.xml).

    ``env`` is where ``${VAR}`` references are looked up (default
    :data:`os.environ`).  Relative directories and file names in the config
    resolve against the folder of ``path``.  Raises :class:`ConfigErrors`
    listing every problem found.
    """
    file = os.fspath(path)
    try:
        root = parse_file(file)
    except XMLSourceError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    base_dir = os.path.dirname(os.path.abspath(file))
    return _Loader(file, base_dir, os.environ if env is None else env).load(root)


def parse_config(
    text: str | bytes,
    *,
    file: str = "<string>",
    base_dir: str = ".",
    env: Mapping[str, str] | None = None,
) -> model.BrokerConfig:
    """:func:`load_config` for a document in memory (tests, generated configs)."""
    try:
        root = parse_bytes(text.encode("utf-8") if isinstance(text, str) else text, file)
    except XMLSourceError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    return _Loader(file, os.path.abspath(base_dir), os.environ if env is None else env).load(root)


def load_certificate_users(cfg: model.BrokerConfig):
    """The certificate users a config names (``<junction><security cert-users-file>``), or None.

    Problems are :class:`ConfigErrors` with file and line, as for :func:`load_user_store`.
    """
    if not cfg.cert_users_file:
        return None
    from junction.config.certusers import CertificateUsers
    from junction.config.properties import PropertiesError

    try:
        return CertificateUsers.load(cfg.cert_users_file, cfg.cert_roles_file)
    except PropertiesError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    except OSError as e:
        raise ConfigErrors(
            [ConfigError(e.filename or cfg.cert_users_file, 0, f"cannot read the certificate users file: {e.strerror or e}")]
        ) from None


def load_user_store(cfg: model.BrokerConfig):
    """Load the users and roles files a config names, as a :class:`~junction.config.properties.UserStore`.

    Kept apart from :func:`load_config` so a config can be checked (and
    tested) without its users file; a node with ``security-enabled`` calls
    this at start-up, before listening.  Problems are :class:`ConfigErrors`
    with file and line: a missing or unreadable users file, a malformed
    ``ENC(...)`` hash, or an ``anonymous-user`` that is not in the users file.
    """
    from junction.config.properties import PropertiesError, UserStore

    try:
        store = UserStore.load(cfg.users_file, cfg.roles_file)
    except PropertiesError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    except OSError as e:
        raise ConfigErrors(
            [
                ConfigError(
                    e.filename or cfg.users_file,
                    0,
                    f"cannot read the users file: {e.strerror or e}",
                )
            ]
        ) from None
    if cfg.anonymous_user is not None and cfg.anonymous_user not in store.users:
        raise ConfigErrors(
            [
                ConfigError(
                    cfg.config_path,
                    0,
                    f"anonymous-user {cfg.anonymous_user!r} is not a user in {cfg.users_file}",
                )
            ]
        )
    return store


class _Loader:
    """One load: collects errors and ignored elements while building the model."""

    def __init__(self, file: str, base_dir: str, env: Mapping[str, str]):
        self.file = file
        self.base_dir = base_dir
        self.env = env
        self.errors: list[ConfigError] = []
        self.ignored: list[tuple[str, int, str]] = []
        self.tainted: set[int] = set()  # id() of elements with an unresolved ${VAR}
        self.values: dict[str, Any] = {}
        self.limits: dict[str, Any] = {}
        #: ``<junction><events>`` attributes; None while the element is absent
        self.events: dict[str, Any] | None = None
        self.acceptors: list[model.Acceptor] = []
        self.connectors: list[model.Connector] = []
        self.addresses: list[model.AddressConfig] = []
        self.address_settings: list[model.AddressSettings] = []
        self.security_settings: list[model.SecuritySetting] = []
        self.wildcard: dict[str, Any] = {}
        self.junction_lines: dict[str, int] = {}
        self.routers: list[model.ConnectionRouterConfig] = []
        self.broadcast_groups: list[model.BroadcastGroupConfig] = []
        self.discovery_groups: list[model.DiscoveryGroupConfig] = []
        self.cluster_connections: list[model.ClusterConnectionConfig] = []
        #: References checked once the whole file is read, as (who refers,
        #: name, referring element): connectors (router pools, broadcast
        #: groups, cluster connections, scale-down), discovery groups and
        #: cluster connections (scale-down's cluster-name).
        self.connector_refs: list[tuple[str, str, Element]] = []
        self.discovery_refs: list[tuple[str, str, Element]] = []
        self.cluster_refs: list[tuple[str, str, Element]] = []
        self._scale_down_el: Element | None = None
        self._router = ""  # the router being read, for messages
        self._cluster = ""  # the cluster connection being read, for messages
        self._policies: tuple[str, ...] | None = None

    # -- reporting -----------------------------------------------------------------
    def error(self, el: Element | None, message: str, line: int | None = None) -> None:
        self.errors.append(
            ConfigError(
                el.file if el is not None else self.file,
                line if line is not None else (el.line if el is not None else 0),
                message,
            )
        )

    def parse_value(self, el: Element, parse: Parser, text: str, label: str):
        """Run ``parse``; on failure report ``label: message`` and return None."""
        try:
            return parse(text)
        except ValueError as e:
            self.error(el, f"{label}: {e}")
            return None

    # -- driver --------------------------------------------------------------------
    def load(self, root: Element) -> model.BrokerConfig:
        self._substitute(root)
        core, problems = find_core(root)
        for el, msg in problems:
            self.error(el, msg)
        if core is not None:
            self._core(core)
        self._cross_checks()
        if self.errors:
            self.errors.sort(key=lambda e: (e.file, e.line))
            raise ConfigErrors(self.errors)
        return self._build()

    def _substitute(self, root: Element) -> None:
        for el in root.iter():
            if "${" in el.text:
                el.text, problems = substitute(el.text, self.env)
                for p in problems:
                    self.error(el, f"<{el.tag}>: {p}")
                if problems:
                    self.tainted.add(id(el))
            for key, val in list(el.attrib.items()):
                if "${" in val:
                    el.attrib[key], problems = substitute(val, self.env)
                    for p in problems:
                        self.error(el, f"<{el.tag} {key}=...>: {p}")
                    if problems:
                        self.tainted.add(id(el))

    def _ok(self, el: Element) -> bool:
        return id(el) not in self.tainted

    # -- generic element handling -----------------------------------------------------
    def _check_namespace(self, el: Element) -> bool:
        if el.ns not in ACCEPTED_NAMESPACES:
            self.error(el, f"element <{el.tag}> in namespace {el.ns!r} is not part of a broker.xml")
            return False
        return True

    def _leaf(self, el: Element) -> bool:
        """Check that ``el`` holds only text: no children, no attributes."""
        ok = True
        for child in el.children:
            self.error(child, f"<{el.tag}> takes a value, not a child element <{child.tag}>")
            ok = False
        for attr in el.attrib:
            self.error(el, f"<{el.tag}> has no attribute {attr!r}")
            ok = False
        return ok

    def _container(self, el: Element, allowed_attrs=()) -> None:
        """Check that a container has no text of its own and only ``allowed_attrs``."""
        if el.text.strip():
            self.error(el, f"<{el.tag}> takes child elements, not text ({el.text.strip()[:40]!r})")
        for attr in el.attrib:
            if attr not in allowed_attrs:
                hint = _suggest(attr, allowed_attrs)
                self.error(el, f"<{el.tag}> has no attribute {attr!r}{hint}")

    def _unknown(self, el: Element, parent: str, candidates) -> None:
        self.error(
            el, f"unknown element <{el.tag}> in <{parent}>{_suggest_element(el.tag, candidates)}"
        )

    def _unsupported(self, el: Element, spec: Unsupported) -> None:
        self.error(
            el,
            f"<{el.tag}> is not supported by Junction yet" + (f" {spec.hint}" if spec.hint else ""),
        )

    def _scalar(self, el: Element, spec, target: dict, context: str = "") -> None:
        """Handle a leaf element per ``spec`` (Value/Ignored/DefaultOnly/Unsupported)."""
        if isinstance(spec, Unsupported):
            self._unsupported(el, spec)
            return
        if isinstance(spec, Refused):
            self.error(el, f"<{el.tag}>: {spec.message}")
            return
        if not self._leaf(el) or not self._ok(el):
            return
        label = f"<{el.tag}>"
        value = self.parse_value(el, spec.parse, el.text, label)
        if value is None:
            return
        where = f" in {context}" if context else ""
        if isinstance(spec, Value):
            target[spec.attr] = value
        elif isinstance(spec, Ignored):
            self.ignored.append((el.tag, el.line, f"{el.tag}={el.value}{where}: {spec.why}"))
        elif isinstance(spec, DefaultOnly):
            if value == spec.default:
                self.ignored.append(
                    (
                        el.tag,
                        el.line,
                        f"{el.tag}={el.value}{where}: the Artemis default, which is how Junction behaves",
                    )
                )
            else:
                self.error(
                    el,
                    f"<{el.tag}> is not supported by Junction yet (only its Artemis default"
                    f" {_show(spec.default)} is accepted, got {el.value!r})",
                )

    def _children(
        self, el: Element, table: Mapping, target: dict, context: str, *, extra=()
    ) -> list[Element]:
        """Dispatch the children of ``el`` through ``table``; return those named in ``extra``.

        Each table element may appear once; a repeat is an error naming the
        first occurrence.
        """
        seen: dict[str, Element] = {}
        rest = []
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag in extra:
                rest.append(child)
                continue
            spec = table.get(child.tag)
            if spec is None:
                self._unknown(child, el.tag, list(table) + list(extra))
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in <{el.tag}> (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            if isinstance(spec, Section):
                getattr(self, spec.method)(child)
            elif isinstance(spec, Nested):
                getattr(self, spec.method)(child, target)
            else:
                self._scalar(child, spec, target, context)
        return rest

    # -- <core> ----------------------------------------------------------------------
    def _core(self, core: Element) -> None:
        self._container(core)
        self._children(core, CORE_ELEMENTS, self.values, "")

    # -- acceptors / connectors -----------------------------------------------------
    def _named_list(self, el: Element, child_tag: str) -> list[tuple[Element, str]]:
        self._container(el)
        out = []
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != child_tag:
                self._unknown(child, el.tag, [child_tag])
                continue
            for ch in child.children:
                self.error(ch, f"<{child_tag}> takes a URL, not a child element <{ch.tag}>")
            for attr in child.attrib:
                if attr != "name":
                    self.error(
                        child, f"<{child_tag}> has no attribute {attr!r}{_suggest(attr, ['name'])}"
                    )
            name = child.attrib.get("name", "").strip()
            if not name:
                self.error(child, f"<{child_tag}> needs a name attribute")
                continue
            if not child.value:
                self.error(child, f"{child_tag} {name!r} has no URL")
                continue
            out.append((child, name))
        return out

    def _acceptors(self, el: Element) -> None:
        for child, name in self._named_list(el, "acceptor"):
            if not self._ok(child):
                continue
            url, problems = parse_transport_url(child.value, "acceptor")
            for p in problems:
                self.error(child, f"acceptor {name!r}: {p}")
            if url is None:
                continue
            protocols: frozenset[str] = frozenset()
            ptext = url.params.get("protocols", url.params.get("protocol"))
            if ptext is not None:
                protocols, perrs = parse_protocols(ptext)
                for p in perrs:
                    self.error(child, f"acceptor {name!r}: {p}")
            router = url.params.get("router")
            if router is not None and not router:
                self.error(child, f"acceptor {name!r}: router= is empty")
                router = None
            tls, tls_problems = parse_server_tls(url.params, self._path)
            if tls is not None:
                tls_problems = check_server_tls(tls)
            for p in tls_problems:
                self.error(child, f"acceptor {name!r}: {p}")
            self._proxy_params(child, f"acceptor {name!r}", url.params, acceptor=True)
            self.acceptors.append(
                model.Acceptor(
                    name=name,
                    scheme=url.scheme,
                    host=url.host,
                    port=url.port,
                    protocols=protocols,
                    params=dict(url.params),
                    anycast_prefix=url.params.get("anycastPrefix"),
                    multicast_prefix=url.params.get("multicastPrefix"),
                    tls=tls,
                    router=router,
                    source=child.source,
                )
            )

    def _connectors(self, el: Element) -> None:
        for child, name in self._named_list(el, "connector"):
            if not self._ok(child):
                continue
            url, problems = parse_transport_url(child.value, "connector")
            for p in problems:
                self.error(child, f"connector {name!r}: {p}")
            if url is None:
                continue
            self._proxy_params(child, f"connector {name!r}", url.params, acceptor=False)
            probe_text = url.params.get(model.PROBE_PROTOCOLS_PARAM)
            if probe_text is not None:
                for p in parse_probe_protocols(probe_text)[1]:
                    self.error(child, f"connector {name!r}: {p}")
            tls, tls_problems = parse_client_tls(url.params, self._path)
            if tls is not None:
                tls_problems = check_client_tls(tls)
            for p in tls_problems:
                self.error(child, f"connector {name!r}: {p}")
            self.connectors.append(
                model.Connector(
                    name, url.scheme, url.host, url.port, dict(url.params), source=child.source, tls=tls
                )
            )

    def _proxy_params(self, child, what: str, params: dict, *, acceptor: bool) -> None:
        """PROXY protocol parameters that only make sense together (values are checked already)."""
        given = [k for k in ("proxyProtocolEnabled", "proxyEnabled") if k in params]
        if len(given) == 2:
            self.error(
                child,
                f"{what}: give proxyProtocolEnabled or its alias proxyEnabled, not both",
            )
        if acceptor and "proxyTrustedSources" in params:
            enabled = any(str(params[k]).strip().lower() == "true" for k in given)
            if not enabled:
                self.error(
                    child,
                    f"{what}: proxyTrustedSources has no effect without proxyProtocolEnabled=true",
                )

    # -- addresses ----------------------------------------------------------------------
    def _addresses(self, el: Element) -> None:
        self._container(el)
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != "address":
                self._unknown(child, "addresses", ["address"])
                continue
            self._address(child)

    def _address(self, el: Element) -> None:
        self._container(el, ("name",))
        name = el.attrib.get("name", "").strip()
        if not name:
            self.error(el, "<address> needs a name attribute")
            return
        routing: set[RoutingType] = set()
        queues: list[model.QueueConfig] = []
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag not in ("anycast", "multicast"):
                self._unknown(child, "address", ["anycast", "multicast"])
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in address {name!r} (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            rt = RoutingType[child.tag.upper()]
            routing.add(rt)
            self._container(child)
            for q in child.children:
                if not self._check_namespace(q):
                    continue
                if q.tag != "queue":
                    self._unknown(q, child.tag, ["queue"])
                    continue
                qc = self._queue(q, rt)
                if qc is not None:
                    queues.append(qc)
        if not routing:
            self.error(
                el, f"address {name!r} has no routing type: give it <anycast> and/or <multicast>"
            )
        self.addresses.append(
            model.AddressConfig(name, frozenset(routing), tuple(queues), source=el.source)
        )

    def _queue(self, el: Element, rt: RoutingType) -> model.QueueConfig | None:
        name = el.attrib.get("name", "").strip()
        if not name:
            self.error(el, "<queue> needs a name attribute")
            return None
        fields: dict[str, Any] = {}
        given = []
        ok = self._ok(el)
        for attr, text in el.attrib.items():
            if attr == "name":
                continue
            spec = QUEUE_ATTRIBUTES.get(attr)
            if spec is None:
                self.error(
                    el,
                    f"<queue> has no attribute {attr!r}{_suggest(attr, list(QUEUE_ATTRIBUTES) + ['name'])}",
                )
                continue
            if isinstance(spec, Unsupported):
                self.error(el, f"queue attribute {attr!r} is not supported by Junction yet")
                continue
            if not ok:
                continue
            value = self.parse_value(el, spec.parse, text, f"queue {name!r} attribute {attr}")
            if value is None:
                continue
            if isinstance(spec, Value):
                fields[spec.attr] = value
                given.append(attr)
            elif value == spec.default:
                self.ignored.append(
                    (
                        f"queue@{attr}",
                        el.line,
                        f"{attr}={text.strip()} on queue {name!r}: the Artemis default, which is how Junction behaves",
                    )
                )
            else:
                self.error(
                    el,
                    f"queue attribute {attr!r} is not supported by Junction yet (only its Artemis default {_show(spec.default)} is accepted, got {text.strip()!r})",
                )
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag not in QUEUE_ELEMENTS:
                self._unknown(child, "queue", QUEUE_ELEMENTS)
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in queue {name!r} (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            if not self._ok(child):
                continue
            if child.tag == "filter":
                for ch in child.children:
                    self.error(
                        ch, f"<filter> takes a string attribute, not a child element <{ch.tag}>"
                    )
                for attr in child.attrib:
                    if attr != "string":
                        self.error(
                            child, f"<filter> has no attribute {attr!r}{_suggest(attr, ['string'])}"
                        )
                if child.text.strip():
                    self.error(
                        child, 'write the filter as <filter string="..."/>, not as element text'
                    )
                if "string" not in child.attrib:
                    self.error(
                        child,
                        "<filter> needs a string attribute: <filter string=\"color = 'red'\"/>",
                    )
                else:
                    fields["filter"] = child.attrib["string"]
                    problem = _filter_problem(child.attrib["string"])
                    if problem:
                        self.error(child, f"invalid queue filter: {problem}")
            elif child.tag == "durable":
                if self._leaf(child):
                    v = self.parse_value(child, boolean, child.text, "<durable>")
                    if v is not None:
                        fields["durable"] = v
            elif child.tag == "user":
                if self._leaf(child):
                    v = self.parse_value(child, text_value, child.text, "<user>")
                    if v is not None:
                        fields["user"] = v
        return model.QueueConfig(
            name=name, routing_type=rt, source=el.source, given=frozenset(given), **fields
        )

    # -- address-settings ---------------------------------------------------------------
    def _address_settings(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != "address-setting":
                self._unknown(child, "address-settings", ["address-setting"])
                continue
            self._container(child, ("match",))
            match = child.attrib.get("match")
            if match is None or not match.strip():
                self.error(
                    child,
                    "<address-setting> needs a match attribute (an address or wildcard such as #)",
                )
                continue
            match = match.strip()
            if match in seen:
                self.error(
                    child,
                    f"a second <address-setting match={match!r}> (the first is at line {seen[match].line}); merge them",
                )
                continue
            seen[match] = child
            values: dict[str, Any] = {}
            self._children(
                child, ADDRESS_SETTING_ELEMENTS, values, f"<address-setting match={match!r}>"
            )
            self.address_settings.append(
                model.AddressSettings(match=match, source=child.source, **values)
            )

    # -- security-settings --------------------------------------------------------------
    _PERMISSION_ALIASES = {
        "createTempQueue": "createNonDurableQueue",
        "deleteTempQueue": "deleteNonDurableQueue",
    }

    def _security_settings(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag in ("security-setting-plugin", "role-mapping"):
                self._unsupported(child, Unsupported())
                continue
            if child.tag != "security-setting":
                self._unknown(
                    child,
                    "security-settings",
                    ["security-setting", "security-setting-plugin", "role-mapping"],
                )
                continue
            self._container(child, ("match",))
            match = (child.attrib.get("match") or "").strip()
            if not match:
                self.error(
                    child,
                    "<security-setting> needs a match attribute (an address or wildcard such as #)",
                )
                continue
            if match in seen:
                self.error(
                    child,
                    f"a second <security-setting match={match!r}> (the first is at line {seen[match].line}); merge them",
                )
                continue
            seen[match] = child
            perms: dict[str, set[str]] = {}
            for p in child.children:
                if not self._check_namespace(p):
                    continue
                if p.tag != "permission":
                    self._unknown(p, "security-setting", ["permission"])
                    continue
                for ch in p.children:
                    self.error(ch, f"<permission> takes attributes, not a child element <{ch.tag}>")
                for attr in p.attrib:
                    if attr not in ("type", "roles"):
                        self.error(
                            p,
                            f"<permission> has no attribute {attr!r}{_suggest(attr, ['type', 'roles'])}",
                        )
                ptype = (p.attrib.get("type") or "").strip()
                roles_text = p.attrib.get("roles")
                if not ptype:
                    self.error(
                        p,
                        "<permission> needs a type attribute: one of "
                        + ", ".join(model.PERMISSION_TYPES),
                    )
                    continue
                ptype = self._PERMISSION_ALIASES.get(ptype, ptype)
                if ptype not in model.PERMISSION_TYPES:
                    self.error(
                        p,
                        f"unknown permission type {ptype!r}{_suggest(ptype, model.PERMISSION_TYPES)}"
                        + (
                            ""
                            if _suggest(ptype, model.PERMISSION_TYPES)
                            else "; expected one of " + ", ".join(model.PERMISSION_TYPES)
                        ),
                    )
                    continue
                if roles_text is None:
                    self.error(
                        p,
                        f"<permission type={ptype!r}> needs a roles attribute (comma-separated role names)",
                    )
                    continue
                roles = {r.strip() for r in roles_text.split(",") if r.strip()}
                if not roles:
                    self.error(p, f"<permission type={ptype!r}> names no roles")
                    continue
                perms.setdefault(ptype, set()).update(roles)
            self.security_settings.append(
                model.SecuritySetting(
                    match, {k: frozenset(v) for k, v in perms.items()}, source=child.source
                )
            )

    # -- wildcard-addresses -------------------------------------------------------------
    def _wildcard_addresses(self, el: Element) -> None:
        self._container(el)
        self._children(el, WILDCARD_ELEMENTS, self.wildcard, "<wildcard-addresses>")
        chars = {
            k: self.wildcard[k]
            for k in ("delimiter", "any_words", "single_word")
            if k in self.wildcard
        }
        merged = {"delimiter": ".", "any_words": "#", "single_word": "*", **chars}
        if len(set(merged.values())) != 3:
            self.error(
                el,
                "<wildcard-addresses>: delimiter, any-words and single-word must be three different characters, got "
                + ", ".join(f"{k.replace('_', '-')}={v!r}" for k, v in merged.items()),
            )

    # -- <junction> ---------------------------------------------------------------------
    def _junction(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            attrs = JUNCTION_ELEMENTS.get(child.tag)
            if attrs is None:
                self._unknown(child, "junction", JUNCTION_ELEMENTS)
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in <junction> (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            self.junction_lines[child.tag] = child.line
            if child.tag == "events":
                self.events = {}
            if child.text.strip() or child.children:
                self.error(
                    child,
                    f'<{child.tag}> takes attributes only, e.g. <{child.tag} {next(iter(attrs))}="..."/>',
                )
            if not self._ok(child):
                continue
            target = {"limits": self.limits, "events": self.events}.get(child.tag, self.values)
            for attr, text in child.attrib.items():
                spec = attrs.get(attr)
                if spec is None:
                    self.error(
                        child, f"<{child.tag}> has no attribute {attr!r}{_suggest(attr, attrs)}"
                    )
                    continue
                field, parse = spec
                v = self.parse_value(child, parse, text, f"<{child.tag} {attr}>")
                if v is not None:
                    target[field] = v

    # -- connection-routers -----------------------------------------------------------
    def _connection_routers(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != "connection-router":
                self._unknown(child, "connection-routers", ["connection-router"])
                continue
            self._container(child, ("name",))
            name = (child.attrib.get("name") or "").strip()
            if not name:
                self.error(
                    child,
                    "<connection-router> needs a name attribute (an acceptor uses it with router=)",
                )
                continue
            first = seen.get(name)
            if first is not None:
                self.error(
                    child,
                    f"a second connection router named {name!r} (the first is at line {first.line})",
                )
            else:
                seen[name] = child
            self._router = name
            values: dict[str, Any] = {}
            self._children(child, ROUTER_ELEMENTS, values, f"connection router {name!r}")
            if first is None:
                self.routers.append(
                    model.ConnectionRouterConfig(name=name, source=child.source, **values)
                )

    def _router_cache(self, el: Element, target: dict) -> None:
        self._container(el)
        values: dict[str, Any] = {}
        self._children(
            el, CACHE_ELEMENTS, values, f"the cache of connection router {self._router!r}"
        )
        target["cache"] = model.CacheConfig(source=el.source, **values)

    def _known_policies(self) -> tuple[str, ...]:
        if self._policies is None:
            extra = tuple(p for p in registered_policies() if p not in model.BUILTIN_POLICIES)
            self._policies = model.BUILTIN_POLICIES + extra
        return self._policies

    def _router_policy(self, el: Element, target: dict) -> None:
        router = self._router
        self._container(el, ("name",))
        name = (el.attrib.get("name") or "").strip()
        if not name:
            self.error(
                el,
                "<policy> needs a name attribute: one of "
                + ", ".join(model.BUILTIN_POLICIES)
                + f", or a policy registered in the entry-point group {model.POLICY_ENTRY_POINT_GROUP}",
            )
        elif self._ok(el) and name not in self._known_policies():
            hint = _suggest(name, self._known_policies(), upper=True)
            self.error(
                el,
                f"unknown policy {name!r} in connection router {router!r}"
                + (
                    hint
                    or "; expected one of "
                    + ", ".join(model.BUILTIN_POLICIES)
                    + f", or a policy registered in the Python entry-point group {model.POLICY_ENTRY_POINT_GROUP}"
                ),
            )
        allowed = model.POLICY_PROPERTIES.get(name)  # None: a plug-in policy checks its own
        properties: list[tuple[str, str]] = []
        seen: dict[str, Element] = {}
        for p in el.children:
            if not self._check_namespace(p):
                continue
            if p.tag != "property":
                self._unknown(p, "policy", ["property"])
                continue
            for ch in p.children:
                self.error(
                    ch, f"<property> takes key and value attributes, not a child element <{ch.tag}>"
                )
            if p.text.strip():
                self.error(
                    p, '<property> takes attributes, not text: <property key="..." value="..."/>'
                )
            for attr in p.attrib:
                if attr not in ("key", "value"):
                    self.error(
                        p, f"<property> has no attribute {attr!r}{_suggest(attr, ['key', 'value'])}"
                    )
            key = (p.attrib.get("key") or "").strip()
            value = p.attrib.get("value")
            if not key:
                self.error(p, '<property> needs a key attribute: <property key="..." value="..."/>')
                continue
            if value is None:
                self.error(p, f'<property key="{key}"> needs a value attribute')
                continue
            if key in seen:
                self.error(
                    p,
                    f"property {key!r} is given twice in policy {name} (first at line {seen[key].line})",
                )
                continue
            seen[key] = p
            if allowed is not None and self._ok(el):
                if key not in allowed:
                    hint = _suggest(key, allowed, upper=True)
                    if not hint:
                        hint = (
                            f" (it takes {', '.join(allowed)})" if allowed else " (it takes none)"
                        )
                    self.error(
                        p,
                        f"policy {name} of connection router {router!r} has no property {key!r}{hint}",
                    )
                    continue
                if self._ok(p):
                    parsed = self.parse_value(
                        p, _POLICY_PROPERTY_TYPES[key], value, f"policy {name} property {key}"
                    )
                    if parsed is None:
                        continue
                    value = str(parsed)
            properties.append((key, value))
        if allowed is not None:
            for key in _REQUIRED_POLICY_PROPERTIES.get(name, ()):
                if key not in seen:
                    self.error(
                        el,
                        f'policy {name} of connection router {router!r} needs <property key="{key}" value="..."/>'
                        " (Artemis fails to deploy it without one)",
                    )
        if name:
            target["policy"] = model.PolicyConfig(name, tuple(properties), source=el.source)

    _POOL_SOURCES = ("cluster-connection", "discovery-group-ref", "static-connectors")

    def _router_pool(self, el: Element, target: dict) -> None:
        router = self._router
        self._container(el)
        values: dict[str, Any] = {}
        self._children(el, POOL_ELEMENTS, values, f"the pool of connection router {router!r}")
        for child in el.children:
            if child.tag == "password" and self._ok(child) and not child.children:
                pw = child.value
                if pw.startswith("ENC(") and pw.endswith(")"):
                    self.error(child, f"<password>: {_MASKED_PASSWORD}")
                break
        # Artemis's order (ConnectionRouterManager.deployPool): the first one set wins there.
        given = [tag for tag in self._POOL_SOURCES if any(c.tag == tag for c in el.children)]
        if not given:
            self.error(
                el,
                f"pool of connection router {router!r} has no targets: give <static-connectors>,"
                ' <discovery-group-ref> or <cluster-connection> (Artemis: "Pool configuration not valid")',
            )
        elif len(given) > 1:
            self.error(
                el,
                f"pool of connection router {router!r} gives "
                + ", ".join(f"<{t}>" for t in given[:-1])
                + f" and <{given[-1]}>"
                + f": give exactly one source of targets (Artemis would use <{given[0]}> and ignore the rest)",
            )
        target["pool"] = model.PoolConfig(source=el.source, **values)

    def _pool_cluster_connection(self, el: Element, target: dict) -> None:
        """The pool's targets are the members of this cluster connection's topology."""
        if not self._leaf(el):
            return
        if not el.value:
            self.error(el, "<cluster-connection> is empty; give the name of a cluster connection")
            return
        target["cluster_connection"] = el.value
        self.cluster_refs.append((f"the pool of connection router {self._router!r}", el.value, el))

    def _pool_discovery_group_ref(self, el: Element, target: dict) -> None:
        """The pool's targets are the nodes this discovery group hears."""
        self._discovery_group_ref(el, target, f"the pool of connection router {self._router!r}")

    def _pool_static_connectors(self, el: Element, target: dict) -> None:
        self._container(el)
        target["static_connectors"] = self._connector_list(
            el, f"pool of connection router {self._router!r}", "target"
        )

    # -- connector and discovery-group references (shared by routers and clusters) ------
    def _connector_list(self, el: Element, who: str, each: str) -> tuple[str, ...]:
        """The ``<connector-ref>`` children of a list element (``<static-connectors>``,
        scale-down's ``<connectors>``): at least one, none twice; the names are
        checked against ``<connectors>`` at the end, as ``who``'s."""
        refs = []
        for c in el.children:
            if not self._check_namespace(c):
                continue
            if c.tag != "connector-ref":
                self._unknown(c, el.tag, ["connector-ref"])
                continue
            refs.append(c)
        if not refs:
            self.error(
                el,
                f"<{el.tag}> names no connectors; add a <connector-ref>name</connector-ref>"
                f" for each {each}",
            )
        return self._connector_refs(el.tag, refs, who)

    def _connector_refs(self, parent: str, refs: list[Element], who: str) -> tuple[str, ...]:
        """Read ``<connector-ref>`` elements of ``parent``: each a name, none twice."""
        names: list[str] = []
        seen: dict[str, Element] = {}
        for c in refs:
            if not self._leaf(c) or not self._ok(c):
                continue
            name = c.value
            if not name:
                self.error(c, "<connector-ref> is empty; give the name of a <connector>")
                continue
            if name in seen:
                self.error(
                    c,
                    f"connector {name!r} is listed twice in <{parent}> (first at line {seen[name].line})",
                )
                continue
            seen[name] = c
            names.append(name)
            self.connector_refs.append((who, name, c))
        return tuple(names)

    def _discovery_group_ref(self, el: Element, target: dict, who: str) -> None:
        """``<discovery-group-ref discovery-group-name=".."/>``: the name goes to
        ``target["discovery_group"]`` and is checked against ``<discovery-groups>`` at the end."""
        self._container(el, ("discovery-group-name",))
        for ch in el.children:
            self.error(
                ch, f"<discovery-group-ref> takes an attribute, not a child element <{ch.tag}>"
            )
        group = (el.attrib.get("discovery-group-name") or "").strip()
        if not group:
            self.error(el, "<discovery-group-ref> needs a discovery-group-name attribute")
            return
        if not self._ok(el):
            return
        target["discovery_group"] = group
        self.discovery_refs.append((who, group, el))

    def _named(
        self, child: Element, seen: dict[str, Element], what: str
    ) -> tuple[str, bool] | None:
        """The ``name`` attribute of a list item (a group, a cluster connection) and
        whether it is the first of that name; None (reported) when it has none."""
        name = (child.attrib.get("name") or "").strip()
        if not name:
            self.error(child, f"<{child.tag}> needs a name attribute")
            return None
        first = seen.get(name)
        if first is not None:
            self.error(child, f"a second {what} named {name!r} (the first is at line {first.line})")
            return name, False
        seen[name] = child
        return name, True

    # -- broadcast-groups / discovery-groups ---------------------------------------------
    _JGROUPS_ELEMENTS = ("jgroups-file", "jgroups-channel", "jgroups-properties")

    def _group_endpoint(self, el: Element, what: str) -> None:
        """A UDP group needs its address and port, unless JGroups was asked for (refused already)."""
        tags = {c.tag for c in el.children}
        if tags & set(self._JGROUPS_ELEMENTS):
            return
        if "group-address" not in tags:
            self.error(
                el, f"{what} needs a <group-address> (a UDP multicast address such as 231.7.7.7)"
            )
        if "group-port" not in tags:
            self.error(el, f"{what} needs a <group-port> (the UDP port of the multicast group)")

    def _named_groups(self, el: Element, tag: str, kind: str):
        """Each ``<tag name="..">`` child of a ``<broadcast-groups>``/``<discovery-groups>``:
        ``(child, name, new)``, unknown children and bad names reported."""
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != tag:
                self._unknown(child, el.tag, [tag])
                continue
            self._container(child, ("name",))
            named = self._named(child, seen, kind)
            if named is not None:
                yield child, named[0], named[1]

    def _broadcast_groups(self, el: Element) -> None:
        for child, name, new in self._named_groups(el, "broadcast-group", "broadcast group"):
            what = f"broadcast group {name!r}"
            values: dict[str, Any] = {}
            refs = self._children(
                child, BROADCAST_GROUP_ELEMENTS, values, what, extra=("connector-ref",)
            )
            connectors = self._connector_refs(child.tag, refs, what)
            if not refs:
                self.error(
                    child,
                    f"{what} names no connectors; add a <connector-ref>name</connector-ref> for"
                    " each connector its peers may use to reach this node",
                )
            self._group_endpoint(child, what)
            if new and "group_address" in values and "group_port" in values:
                self.broadcast_groups.append(
                    model.BroadcastGroupConfig(
                        name=name, connector_refs=connectors, source=child.source, **values
                    )
                )

    def _discovery_groups(self, el: Element) -> None:
        for child, name, new in self._named_groups(el, "discovery-group", "discovery group"):
            what = f"discovery group {name!r}"
            values: dict[str, Any] = {}
            self._children(child, DISCOVERY_GROUP_ELEMENTS, values, what)
            self._group_endpoint(child, what)
            if new and "group_address" in values and "group_port" in values:
                self.discovery_groups.append(
                    model.DiscoveryGroupConfig(name=name, source=child.source, **values)
                )

    # -- cluster-connections --------------------------------------------------------------
    def _cluster_connections(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag == "cluster-connection-uri":
                self.error(
                    child,
                    "cluster-connection-uri is not supported by Junction; write a <cluster-connection>",
                )
                continue
            if child.tag != "cluster-connection":
                self._unknown(
                    child, "cluster-connections", ["cluster-connection", "cluster-connection-uri"]
                )
                continue
            if "uri" in child.attrib:
                self.error(
                    child,
                    "the uri attribute of <cluster-connection> is not supported by Junction;"
                    " write its settings as child elements",
                )
            self._container(child, ("name", "uri"))
            named = self._named(child, seen, "cluster connection")
            if named is None:
                continue
            name, new = named
            self._cluster = name
            what = f"cluster connection {name!r}"
            values: dict[str, Any] = {}
            self._children(child, CLUSTER_CONNECTION_ELEMENTS, values, what)
            tags = {c.tag for c in child.children}
            forward = values.pop("_forward_when_no_consumers", None)
            if forward is not None:
                value, fel = forward
                if "message-load-balancing" in tags:
                    self.error(
                        fel,
                        f"{what} gives both <forward-when-no-consumers> (deprecated) and"
                        " <message-load-balancing>: keep <message-load-balancing> only (Artemis"
                        " would use forward-when-no-consumers and ignore message-load-balancing)",
                    )
                else:
                    values["message_load_balancing"] = "STRICT" if value else "ON_DEMAND"
            if "connector-ref" not in tags:
                self.error(
                    child,
                    f"{what} needs a <connector-ref> naming the <connector> its peers use to"
                    " reach this node",
                )
            peers = [t for t in ("discovery-group-ref", "static-connectors") if t in tags]
            if not peers:
                self.error(
                    child,
                    f"{what} has no peers: give <static-connectors> or"
                    ' <discovery-group-ref discovery-group-name="..."/> (artemis-configuration.xsd'
                    " lets both be left out, but Junction needs a cluster connection to say how"
                    " it finds its peers)",
                )
            elif len(peers) > 1:
                self.error(
                    child,
                    f"{what} gives both <discovery-group-ref> and <static-connectors>: give"
                    " exactly one (Artemis would use <discovery-group-ref> and ignore"
                    " <static-connectors>)",
                )
            if new and "connector_ref" in values:
                self.cluster_connections.append(
                    model.ClusterConnectionConfig(name=name, source=child.source, **values)
                )

    def _cluster_connector_ref(self, el: Element, target: dict) -> None:
        if not self._leaf(el) or not self._ok(el):
            return
        if not el.value:
            self.error(el, "<connector-ref> is empty; give the name of a <connector>")
            return
        target["connector_ref"] = el.value
        self.connector_refs.append((f"cluster connection {self._cluster!r}", el.value, el))

    def _cluster_master_broker(self, el: Element, target: dict) -> None:
        if not self._leaf(el) or not self._ok(el):
            return
        if not el.value:
            self.error(el, "<master-broker> is empty; give the name of the master broker's <connector>")
            return
        target["master_broker"] = el.value
        self.connector_refs.append((f"the master broker of cluster connection {self._cluster!r}", el.value, el))

    def _cluster_forward_when_no_consumers(self, el: Element, target: dict) -> None:
        if not self._leaf(el) or not self._ok(el):
            return
        value = self.parse_value(el, boolean, el.text, f"<{el.tag}>")
        if value is not None:
            target["_forward_when_no_consumers"] = (value, el)

    def _cluster_discovery_group_ref(self, el: Element, target: dict) -> None:
        self._discovery_group_ref(el, target, f"cluster connection {self._cluster!r}")

    def _cluster_static_connectors(self, el: Element, target: dict) -> None:
        self._container(el, ("allow-direct-connections-only",))
        direct = el.attrib.get("allow-direct-connections-only")
        if direct is not None and self._ok(el):
            value = self.parse_value(
                el, boolean, direct, "<static-connectors allow-direct-connections-only>"
            )
            if value is not None:
                target["allow_direct_connections_only"] = value
        target["static_connectors"] = self._connector_list(
            el, f"cluster connection {self._cluster!r}", "peer"
        )

    # -- cluster-user / cluster-password --------------------------------------------------
    def _cluster_user(self, el: Element) -> None:
        self._cluster_credential(el, "cluster_user", text_value)

    def _cluster_password(self, el: Element) -> None:
        self._cluster_credential(el, "cluster_password", any_text)

    def _cluster_credential(self, el: Element, attr: str, parse: Parser) -> None:
        self.values.setdefault("cluster_credentials_source", el.source)
        if not self._leaf(el) or not self._ok(el):
            return
        value = self.parse_value(el, parse, el.text, f"<{el.tag}>")
        if value is None:
            return
        if attr == "cluster_password" and value.startswith("ENC("):
            self.error(el, f"<{el.tag}>: {_MASKED_PASSWORD}")
            return
        self.values[attr] = value

    # -- ha-policy ------------------------------------------------------------------------
    def _ha_policy(self, el: Element) -> None:
        self._container(el)
        policy: Element | None = None
        target: dict[str, Any] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            spec = HA_POLICY_ELEMENTS.get(child.tag)
            if spec is None:
                self._unknown(child, "ha-policy", HA_POLICY_ELEMENTS)
                continue
            if isinstance(spec, Unsupported):
                self.error(
                    child,
                    f"<ha-policy><{child.tag}> is not supported by Junction yet"
                    + (f" {spec.hint}" if spec.hint else ""),
                )
                continue
            if policy is not None:
                self.error(
                    child,
                    f"<ha-policy> takes one policy; <{child.tag}> comes after <{policy.tag}>"
                    f" (line {policy.line})",
                )
                continue
            policy = child
            getattr(self, spec.method)(child, target)
        if "scale_down" in target:
            self.values["scale_down"] = target["scale_down"]

    def _ha_primary_only(self, el: Element, target: dict) -> None:
        self._container(el)
        self._children(el, PRIMARY_ONLY_ELEMENTS, target, f"<ha-policy><{el.tag}>")

    def _scale_down(self, el: Element, target: dict) -> None:
        self._container(el)
        values: dict[str, Any] = {}
        self._children(el, SCALE_DOWN_ELEMENTS, values, "<scale-down>")
        tags = {c.tag for c in el.children}
        if {"discovery-group-ref", "connectors"} <= tags:
            self.error(
                el,
                "<scale-down> gives both <discovery-group-ref> and <connectors>: give one"
                " (artemis-configuration.xsd allows one or the other)",
            )
        self._scale_down_el = el
        target["scale_down"] = model.ScaleDownConfig(source=el.source, **values)

    def _scale_down_cluster_name(self, el: Element, target: dict) -> None:
        if not self._leaf(el) or not self._ok(el):
            return
        value = self.parse_value(el, text_value, el.text, f"<{el.tag}>")
        if value is not None:
            target["cluster_name"] = value
            self.cluster_refs.append(("scale-down", value, el))

    def _scale_down_discovery_group_ref(self, el: Element, target: dict) -> None:
        self._discovery_group_ref(el, target, "scale-down")

    def _scale_down_connectors(self, el: Element, target: dict) -> None:
        self._container(el)
        target["connectors"] = self._connector_list(el, "scale-down", "peer")

    # -- whole-config checks -------------------------------------------------------------
    def _cross_checks(self) -> None:
        names: dict[str, model.Acceptor] = {}
        for a in self.acceptors:
            if a.name in names:
                self.error(
                    None,
                    f"a second acceptor named {a.name!r} (the first is at line {names[a.name].source[1]})",
                    a.source[1],
                )
            else:
                names[a.name] = a
        bound: list[tuple[str, int, str, int]] = []  # host, port, what, line
        mport = self.values.get("management_port", model.BrokerConfig.management_port)
        if mport:
            mhost = self.values.get("management_host", model.BrokerConfig.management_host)
            what = (
                "the management API"
                if "management" in self.junction_lines
                else (
                    "the management API (by default; move it with <junction><management port=...>)"
                )
            )
            bound.append((_norm_host(mhost), mport, what, self.junction_lines.get("management", 0)))
        for a in self.acceptors:
            if a.port:
                bound.append((_norm_host(a.host), a.port, f"acceptor {a.name!r}", a.source[1]))
        for i, (host, port, what, line) in enumerate(bound):
            for h2, p2, w2, l2 in bound[:i]:
                if port == p2 and (host == h2 or host in _WILDCARD_HOSTS or h2 in _WILDCARD_HOSTS):
                    at = f" (line {l2})" if l2 else ""
                    self.error(
                        None, f"{what} listens on {host}:{port}, which {w2}{at} already uses", line
                    )
                    break
        cnames: dict[str, model.Connector] = {}
        for c in self.connectors:
            if c.name in cnames:
                self.error(
                    None,
                    f"a second connector named {c.name!r} (the first is at line {cnames[c.name].source[1]})",
                    c.source[1],
                )
            else:
                cnames[c.name] = c
        routers = [r.name for r in self.routers]
        for a in self.acceptors:
            if a.router is not None and a.router not in routers:
                self.error(
                    None,
                    f"acceptor {a.name!r} names router {a.router!r}, but no <connection-routers> defines it"
                    + _suggest(a.router, routers),
                    a.source[1],
                )
        for who, connector, ref in self.connector_refs:
            if connector not in cnames:
                self.error(
                    ref,
                    f"{who} names connector {connector!r}, but no <connectors> defines it"
                    + _suggest(connector, cnames),
                )
        groups = [g.name for g in self.discovery_groups]
        for who, group, ref in self.discovery_refs:
            if group not in groups:
                self.error(
                    ref,
                    f"{who} names discovery group {group!r}, but no <discovery-groups> defines it"
                    + _suggest(group, groups),
                )
        clusters = [c.name for c in self.cluster_connections]
        for who, cluster, ref in self.cluster_refs:
            if cluster not in clusters:
                self.error(
                    ref,
                    f"{who} names cluster connection {cluster!r}, but no <cluster-connections>"
                    " defines it" + _suggest(cluster, clusters),
                )
        sd = self.values.get("scale_down")
        if (
            sd is not None
            and sd.enabled
            and sd.discovery_group is None
            and not sd.connectors
            and sd.cluster_name is None
            and not self.cluster_connections
            and self._scale_down_el is not None
            and not any(
                c.tag in ("discovery-group-ref", "connectors", "cluster-name")
                for c in self._scale_down_el.children
            )
        ):
            self.error(
                self._scale_down_el,
                "scale-down has no peers to move messages to: give <discovery-group-ref> or"
                " <connectors>, or define a <cluster-connection> whose peers it can use"
                " (or set <enabled>false</enabled>)",
            )
        addr_seen: dict[str, model.AddressConfig] = {}
        queue_seen: dict[str, model.QueueConfig] = {}
        for ad in self.addresses:
            if ad.name in addr_seen:
                self.error(
                    None,
                    f"a second address named {ad.name!r} (the first is at line {addr_seen[ad.name].source[1]})",
                    ad.source[1],
                )
            else:
                addr_seen[ad.name] = ad
            for q in ad.queues:
                if q.name in queue_seen:
                    self.error(
                        None,
                        f"a second queue named {q.name!r} (the first is at line {queue_seen[q.name].source[1]}); queue names are unique across addresses",
                        q.source[1],
                    )
                else:
                    queue_seen[q.name] = q
        anon = self.values.get("anonymous_user")
        if anon is not None and not self.values.get("security_enabled", True):
            self.ignored.append(
                (
                    "anonymous-user",
                    self.junction_lines.get("security", 0),
                    "security-enabled is false, so every connection is allowed anyway",
                )
            )

    # -- building the model ----------------------------------------------------------------
    def _path(self, p: str) -> str:
        return os.path.normpath(p if os.path.isabs(p) else os.path.join(self.base_dir, p))

    def _build(self) -> model.BrokerConfig:
        v = dict(self.values)
        defaults = model.BrokerConfig()
        for key in (
            "journal_directory",
            "bindings_directory",
            "paging_directory",
            "large_messages_directory",
            "users_file",
            "roles_file",
        ):
            v[key] = self._path(v.get(key, getattr(defaults, key)))
        for key in ("cert_users_file", "cert_roles_file"):
            if v.get(key):
                v[key] = self._path(v[key])
        wild = dict(self.wildcard)
        if "wildcard_routing_enabled" in v:
            top = v.pop("wildcard_routing_enabled")
            wild.setdefault("routing_enabled", top)
        if "routing_enabled" in wild:
            wild["enabled"] = wild["routing_enabled"]
        return replace(
            defaults,
            **v,
            acceptors=tuple(self.acceptors),
            connectors=tuple(self.connectors),
            connection_routers=tuple(self.routers),
            broadcast_groups=tuple(self.broadcast_groups),
            discovery_groups=tuple(self.discovery_groups),
            cluster_connections=tuple(self.cluster_connections),
            addresses=tuple(self.addresses),
            address_settings=tuple(self.address_settings),
            security_settings=tuple(self.security_settings),
            wildcard_addresses=model.WildcardAddresses(**wild),
            limits=model.Limits(**self.limits),
            events=None if self.events is None else model.EventsConfig(**self.events),
            config_path=os.path.abspath(self.file) if not self.file.startswith("<") else self.file,
            base_dir=self.base_dir,
            ignored=tuple(self.ignored),
        )


def _filter_problem(text: str) -> str | None:
    """Why a filter expression would not parse (checked with the broker's own parser)."""
    from junction.model.filter import FilterError, parse_filter

    try:
        parse_filter(text)
    except FilterError as exc:
        return str(exc)
    return None


def _norm_host(host: str) -> str:
    h = host.strip().lower()
    return "127.0.0.1" if h == "localhost" else h


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "(empty)"
    return str(value)
