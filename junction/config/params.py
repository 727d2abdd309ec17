"""Acceptor and connector URL parameters: one table, with their types, defaults and users.

A row of :data:`PARAMS` is a parameter some part of Junction acts on: its
Artemis name, how its value is checked (:mod:`junction.config.values`; None:
free text, kept as written), the value Junction uses when the URL leaves it
out, and which parts act on it -- on an acceptor (:data:`ACCEPTOR_PARTS`) and
on a connector (:data:`CONNECTOR_PARTS`).  A parameter Artemis allows that no
part of Junction acts on is a :class:`~junction.config.specs.NoEffect` row of
:data:`junction.config.unimplemented.UNIMPLEMENTED` (``acceptor-url`` and
``connector-url``) instead; it is still allowed and type-checked.

From the two tables come :data:`ACCEPTOR_PARAMS` and :data:`CONNECTOR_PARAMS`
(what a URL may say: anything else is an error with a suggestion),
:data:`PARAM_TYPES`, and :func:`acceptor_params_with_effect`, the parameters
the node does not warn about for a given acceptor ("parameter X has no effect
in Junction yet").  Values stay the strings given, in ``Acceptor.params`` and
``Connector.params``; :func:`param` reads one with its type and default.

So a new acceptor parameter is one row here plus the code that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from junction.config.specs import NoEffect
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.values import (
    Parser,
    boolean,
    choice,
    integer,
    ip_networks,
    port_number,
    real,
)

__all__ = [
    "ACCEPTOR_PARAMS",
    "ACCEPTOR_PARTS",
    "CONNECTOR_PARAMS",
    "CONNECTOR_PARTS",
    "PARAMS",
    "PARAM_TYPES",
    "Param",
    "acceptor_params_with_effect",
    "param",
]

#: What acts on an acceptor's parameters:
#: ``LISTENER`` every acceptor's listening socket (the node); ``GATEWAY`` an
#: acceptor with ``router=`` (junction.gateway.listener); ``STOMP``/``AMQP``/``CORE``
#: that protocol's broker adapter, when the acceptor serves it; ``TLS`` the
#: TLS listener, when ``sslEnabled=true``; ``PROXY`` the PROXY protocol reader;
#: ``ADMISSION`` the per-source limits.
ACCEPTOR_PARTS = frozenset({"LISTENER", "GATEWAY", "STOMP", "AMQP", "CORE", "OPENWIRE", "TLS", "PROXY", "ADMISSION"})
#: What acts on a connector's parameters: ``FORWARD`` the gateway's (and the
#: cluster's) outgoing connection; ``TLS`` its TLS client; ``PROXY`` the PROXY
#: header the gateway writes; ``PROBE`` a router pool's readiness probe.
CONNECTOR_PARTS = frozenset({"FORWARD", "TLS", "PROXY", "PROBE"})


@dataclass(frozen=True)
class Param:
    """One URL parameter Junction acts on.

    ``default`` is what Junction uses when the URL does not give it; a string
    in angle brackets names the setting it falls back to instead.  ``acceptor``
    and ``connector`` are the parts acting on it on each kind of URL (empty:
    not a parameter of that kind, or one without effect there, listed in
    :data:`~junction.config.unimplemented.UNIMPLEMENTED`).
    """

    name: str
    parse: Parser | None = None
    default: Any = None
    acceptor: frozenset[str] = frozenset()
    connector: frozenset[str] = frozenset()


def _p(name, parse=None, default=None, acceptor="", connector="") -> Param:
    return Param(name, parse, default, frozenset(acceptor.split()), frozenset(connector.split()))


_WHOLE = integer(minus_one=True)  # -1: unlimited / the system's
_NON_NEGATIVE = integer(0)
_POSITIVE = integer(1)
_SERVED = "STOMP AMQP CORE OPENWIRE"  # read by every broker adapter

# fmt: off
#: Every URL parameter some part of Junction acts on (docs/configuration.md, docs/tls.md).
PARAMS: tuple[Param, ...] = (
    # -- the listening socket and the protocols it serves
    _p("protocols",                        None,              "",         "LISTENER " + _SERVED),
    _p("protocol",                         None,              "",         _SERVED),
    _p("backlog",                          _WHOLE,            -1,         "LISTENER"),  # -1: 1024
    _p("router",                           None,              None,       "LISTENER"),
    _p("anycastPrefix",                    None,              None,       _SERVED),
    _p("multicastPrefix",                  None,              None,       _SERVED),
    _p("connectionsAllowed",               _WHOLE,            -1,         _SERVED),
    _p("tcpNoDelay",                       boolean,           True,       _SERVED, "FORWARD"),
    _p("tcpSendBufferSize",                _WHOLE,            -1,         _SERVED, "FORWARD"),
    _p("tcpReceiveBufferSize",             _WHOLE,            -1,         _SERVED, "FORWARD"),
    _p("useEpoll",                         boolean,           True,       _SERVED),  # Twisted's reactor on Linux is epoll already
    # -- the gateway (acceptors with router=)
    _p("routerMode",                       choice("redirect", "forward", "auto"), "auto", "GATEWAY"),
    _p("routingTimeout",                   _NON_NEGATIVE,     "<limits connect-timeout>", "GATEWAY"),
    _p("routingMaxBytes",                  _POSITIVE,         "<the opening and one read>", "GATEWAY"),
    # -- CORE
    _p("clusterConnection",                None,              "<the first cluster connection>", "CORE"),
    # -- STOMP
    _p("stompMaxFramePayloadLength",       _POSITIVE,         "<limits max-frame-size>", "STOMP"),
    _p("heartBeatToConnectionTtlModifier", real(0.0),         2.0,        "STOMP"),
    # -- AMQP
    _p("maxFrameSize",                     _POSITIVE,         128 * 1024, "AMQP"),
    _p("amqpCredits",                      _POSITIVE,         1000,       "AMQP"),
    _p("amqpLowCredits",                   _NON_NEGATIVE,     300,        "AMQP"),
    _p("amqpIdleTimeout",                  _WHOLE,            30_000,     "AMQP"),
    _p("amqpChannelMax",                   _POSITIVE,         65_535,     "AMQP"),
    _p("amqpMaxMessageSize",               _POSITIVE,         "<limits max-frame-size>", "AMQP"),
    _p("saslMechanisms",                   None,              "<PLAIN, and ANONYMOUS when allowed>", "AMQP"),
    _p("amqpTreatRejectAsUnmodifiedDeliveryFailed", boolean,  False,      "AMQP"),
    # -- TLS (docs/tls.md)
    _p("sslEnabled",                       boolean,           False,      "TLS " + _SERVED, "TLS"),
    _p("keyStorePath",                     None,              None,       "TLS", "TLS"),
    _p("keyStorePassword",                 None,              None,       "TLS", "TLS"),
    _p("keyStoreType",                     None,              "<from the file>", "TLS", "TLS"),
    _p("trustStorePath",                   None,              None,       "TLS", "TLS"),
    _p("trustStorePassword",               None,              None,       "TLS", "TLS"),
    _p("trustStoreType",                   None,              "<from the file>", "TLS", "TLS"),
    _p("enabledProtocols",                 None,              "<OpenSSL's>", "TLS", "TLS"),
    _p("enabledCipherSuites",              None,              "<OpenSSL's>", "TLS", "TLS"),
    _p("sniHost",                          None,              None,       "TLS", "TLS"),
    _p("needClientAuth",                   boolean,           False,      "TLS"),
    _p("wantClientAuth",                   boolean,           False,      "TLS"),
    _p("sniRequired",                      boolean,           False,      "TLS"),
    _p("sniKeyStorePaths",                 None,              None,       "TLS"),
    _p("handshake-timeout",                _NON_NEGATIVE,     10,         "TLS"),  # seconds (Artemis)
    _p("handshakesAllowed",                _WHOLE,            -1,         "TLS"),
    _p("verifyHost",                       boolean,           True,       "",    "TLS"),
    _p("trustAll",                         boolean,           False,      "",    "TLS"),
    # -- the PROXY protocol (docs/configuration.md)
    _p("proxyProtocolEnabled",             boolean,           False,      "PROXY", "PROXY"),
    _p("proxyEnabled",                     boolean,           False,      "PROXY", "PROXY"),
    _p("proxyTrustedSources",              ip_networks,       None,       "PROXY"),
    # -- limits per source address (docs/tls.md)
    _p("connectionsAllowedPerAddress",     _WHOLE,            -1,         "ADMISSION"),
    _p("connectionRatePerAddress",         real(0.0),         0,          "ADMISSION"),
    # -- outgoing connections
    _p("connect-timeout-millis",           _NON_NEGATIVE,     10_000,     "",    "FORWARD"),
    _p("localAddress",                     None,              None,       "",    "FORWARD"),
    _p("localPort",                        port_number,       0,          "",    "FORWARD"),
    # the protocols a router pool's readiness probe speaks to the target (docs/configuration.md)
    _p("probeProtocols",                   None,              "AMQP,STOMP", "",  "PROBE"),
)
# fmt: on

_BY_NAME = {p.name: p for p in PARAMS}
_NO_EFFECT_ON_ACCEPTORS: dict[str, NoEffect] = UNIMPLEMENTED["acceptor-url"]
_NO_EFFECT_ON_CONNECTORS: dict[str, NoEffect] = UNIMPLEMENTED["connector-url"]

#: Parameters an ``<acceptor>`` URL may carry: Artemis's
#: ``TransportConstants.ALLOWABLE_ACCEPTOR_KEYS`` plus the protocol managers'
#: own (AMQP, OpenWire, CORE/STOMP prefixes), and Junction's.
ACCEPTOR_PARAMS = frozenset(p.name for p in PARAMS if p.acceptor) | frozenset(_NO_EFFECT_ON_ACCEPTORS)
#: Parameters a ``<connector>`` URL may carry (``ALLOWABLE_CONNECTOR_KEYS``, and Junction's).
CONNECTOR_PARAMS = frozenset(p.name for p in PARAMS if p.connector) | frozenset(_NO_EFFECT_ON_CONNECTORS)


def _types() -> dict[str, Parser]:
    """Parameter -> parser, from both tables (a parameter in both is typed in both, or in neither)."""
    types: dict[str, Parser] = {}
    for rows in (_NO_EFFECT_ON_ACCEPTORS, _NO_EFFECT_ON_CONNECTORS):
        for name, spec in rows.items():
            if name in _BY_NAME and (spec.parse is None) != (_BY_NAME[name].parse is None):
                raise ValueError(f"URL parameter {name} is typed in one table and not the other")
            if spec.parse is not None:
                types[name] = spec.parse
    for p in PARAMS:
        if p.parse is not None:
            types[p.name] = p.parse
    return types


#: Value types of the URL parameters that have one; others are free text.
#: Values are still kept as the strings given in ``Acceptor.params``.
PARAM_TYPES: dict[str, Parser] = _types()


def acceptor_params_with_effect(parts) -> frozenset[str]:
    """The acceptor parameters that some part in ``parts`` (:data:`ACCEPTOR_PARTS`) acts on."""
    parts = frozenset(parts)
    return frozenset(p.name for p in PARAMS if p.acceptor & parts)


def param(params, name: str) -> Any:
    """URL parameter ``name`` of ``params`` with its type, else its default from :data:`PARAMS`.

    For values the loader has checked already (a free-text parameter comes back
    as written).
    """
    row = _BY_NAME[name]
    text = (params or {}).get(name)
    if text is None:
        return row.default
    return row.parse(text) if row.parse is not None else text
