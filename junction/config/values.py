"""Values and units of ``broker.xml``: booleans, whole numbers, sizes, durations, enums.

Each parser takes the text of an element or attribute and returns the value,
or raises :class:`ValueError` with a message that does not repeat the
element's name (the caller adds ``<element>:`` in front).  Units are
Artemis's: sizes in bytes with ``K``/``M``/``G`` (powers of 1024, with or
without ``i`` and ``B``); durations are whole milliseconds (nanoseconds for
``journal-buffer-timeout``), checked against the Java ``int`` or ``long`` the
Java broker reads them into.

Differences from Artemis, on purpose: booleans must be ``true`` or ``false``
(any case) -- Artemis's ``Boolean.parseBoolean`` reads every other word,
``1`` and ``yes`` included, as false.
"""

from __future__ import annotations

import ipaddress
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

from junction.config.suggest import suggest
from junction.model.message import RoutingType

__all__ = [
    "JAVA_INT",
    "JAVA_LONG",
    "Parser",
    "any_text",
    "boolean",
    "character",
    "choice",
    "integer",
    "ip_networks",
    "multicast_address",
    "parse_byte_size",
    "port_number",
    "power_of_two",
    "real",
    "regex",
    "routing_type",
    "show",
    "size",
    "string",
    "text_value",
]

Parser = Callable[[str], Any]

_INT_RE = re.compile(r"[+-]?\d+\Z")
JAVA_INT = (-(2**31), 2**31 - 1)
JAVA_LONG = (-(2**63), 2**63 - 1)


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
    jlo, jhi = JAVA_LONG if long else JAVA_INT

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


def size(lo: int | None = 0, hi: int | None = JAVA_LONG[1], *, minus_one: bool = False) -> Parser:
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
            f"expected one of {', '.join(values)}, got {text!r}{suggest(t, values, upper=True)}"
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


def show(value: Any) -> str:
    """A value as the file would spell it (``true``, ``(empty)``), for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "":
        return "(empty)"
    return str(value)
