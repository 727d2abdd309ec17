"""Acceptor and connector URLs: ``tcp://host:port?key=value;key2=value2``, and ``protocols=``.

:func:`parse_transport_url` reads one URL; which parameters it may carry and
their types are the tables of :mod:`junction.config.params`.
:func:`parse_protocols` reads an acceptor's ``protocols=``,
:func:`parse_probe_protocols` a connector's ``probeProtocols=``.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote_plus

from junction.config import model
from junction.config.params import ACCEPTOR_PARAMS, CONNECTOR_PARAMS, PARAM_TYPES
from junction.config.suggest import suggest
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.values import integer
from junction.protocols.registry import BUILT_IN, protocol_table

__all__ = [
    "DEFAULT_PORT",
    "PROTOCOLS",
    "UNSUPPORTED_PROTOCOLS",
    "WILDCARD_HOSTS",
    "ParsedURL",
    "parse_probe_protocols",
    "parse_protocols",
    "parse_transport_url",
]

#: Protocols an acceptor may name in ``protocols=``: Artemis's that Junction serves or will
#: serve (the protocol table says which have an adapter in this build: CORE, AMQP and STOMP),
#: plus Junction's CLUSTER (an acceptor for cluster links only).
PROTOCOLS = ("CORE", "AMQP", "STOMP", "OPENWIRE", "CLUSTER")
#: Protocols Artemis knows that Junction refuses.
UNSUPPORTED_PROTOCOLS = tuple(UNIMPLEMENTED["protocols"])

#: Port Artemis uses when a URL gives none (``TransportConstants.DEFAULT_PORT``).
DEFAULT_PORT = 61616
#: Hosts that listen on every interface (two listeners on one port clash with them).
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "*", "[::]"})


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
    if scheme in UNIMPLEMENTED["transport"]:
        return None, [UNIMPLEMENTED["transport"][scheme].message]
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
            errors.append(f"unknown {kind} parameter {key!r}{suggest(key, allowed)}")
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
                f"{suggest(name, model.PROBE_PROTOCOLS)}"
            )
    return tuple(out), errors


def parse_protocols(text: str) -> tuple[frozenset[str], list[str]]:
    """``protocols=`` value: a comma list, upper-cased; unknown or unsupported names are errors.

    Known: :data:`PROTOCOLS` and the protocols registered through the protocol table's
    entry-point group (:mod:`junction.protocols.registry`).
    """
    names = [p.strip().upper() for p in text.split(",") if p.strip()]
    # beside the built-ins, the protocols registered in the protocol table's entry-point group
    registered = frozenset(entry.name for entry in protocol_table()) - frozenset(e.name for e in BUILT_IN)
    errors = []
    if not names:
        errors.append("protocols= is empty; name at least one of " + ", ".join(PROTOCOLS))
    for name in names:
        if name in UNSUPPORTED_PROTOCOLS:
            errors.append(
                f"protocol {name} {UNIMPLEMENTED['protocols'][name].message} (it serves {', '.join(PROTOCOLS)})"
            )
        elif name not in PROTOCOLS and name not in registered:
            errors.append(
                f"unknown protocol {name!r}{suggest(name, PROTOCOLS + UNSUPPORTED_PROTOCOLS)}"
            )
    return frozenset(n for n in names if n in PROTOCOLS or n in registered), errors

