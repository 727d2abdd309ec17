"""The protocol table: every protocol Junction sniffs, reads or serves, in one place.

Each protocol is one :class:`ProtocolEntry`: its name (as written in an
acceptor's ``protocols=``), its signature (the detector
:func:`junction.protocols.detect.detect` tries, in the table's order), and,
where the protocol is served, the gateway's opening reader for it and the
broker core's adapter.  Everything above this floor is named by a dotted path
(``module:attribute``) and imported only when used, so the table itself
stays sans-IO and below every package that uses it.

The built-in protocols are :data:`BUILT_IN` (the package also registers each
in its own entry points, so an installed Junction lists them as any other
distribution would; the default table makes a bare checkout work the same).
More come from the entry-point group :data:`ENTRY_POINT_GROUP`
(``junction.protocols``): each entry point
names a :class:`ProtocolEntry` (or a callable returning one); an entry with a
built-in's name replaces it, a new name is added after the built-ins (its
signature tried last).  :func:`protocol_table` reads them once.

A detector takes every byte received so far and answers :data:`MATCH`,
:data:`NEED_MORE` (a signature could still start here) or None (not this
protocol); the first entry answering MATCH or NEED_MORE decides.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib import metadata

__all__ = [
    "AMQP",
    "BUILT_IN",
    "CLUSTER",
    "CORE",
    "ENTRY_POINT_GROUP",
    "MATCH",
    "MQTT",
    "NEED_MORE",
    "OPENWIRE",
    "STOMP",
    "ProtocolEntry",
    "frame_size_params",
    "load",
    "protocol",
    "protocol_table",
    "redirecting",
    "routed",
    "served",
]

log = logging.getLogger("junction.protocols")

#: the entry-point group other packages register protocols in
ENTRY_POINT_GROUP = "junction.protocols"

#: a detector's verdicts (None: not this protocol)
MATCH = "match"
NEED_MORE = "need-more"


def load(path: str):
    """The object at dotted ``path`` (``package.module:attribute``), imported now."""
    module, _, attribute = path.partition(":")
    found = importlib.import_module(module)
    for part in filter(None, attribute.split(".")):
        found = getattr(found, part)
    return found


@dataclass(frozen=True)
class ProtocolEntry:
    """One protocol of the table.

    * ``name`` -- as in ``protocols=`` and in the logs (``STOMP``, ``AMQP``...).
    * ``detector`` -- dotted path of ``f(data: bytes) -> MATCH | NEED_MORE | None``.
    * ``gateway`` -- dotted path of the gateway's side of the protocol: a class
      taking the :class:`~junction.gateway.listener.GatewayFactory` that makes
      the opening reader (:class:`~junction.protocols.opening.Opening`) per
      connection and any backend hand-off (see :mod:`junction.gateway.side`).
      None: sniffed, not routed.
    * ``redirects`` -- whether the opening reader has a native redirect
      (``routerMode=auto`` redirects these, forwards the others).
    * ``adapter`` -- dotted path of the broker core's factory, called as
      ``factory(server, acceptor=, limits=, reactor=)``.  None: not served.
    * ``acceptor_part`` -- the part of ``junction.config.params`` whose
      acceptor parameters the adapter acts on (None: the name when served).
    * ``frame_size_param`` -- the acceptor parameter that bounds a frame of
      the protocol's opening on a gateway listener (STOMP's
      ``stompMaxFramePayloadLength``); None: ``<limits max-frame-size>``.
      The listener's ``routingMaxBytes`` default is sized from the largest.
    """

    name: str
    detector: str
    gateway: str | None = None
    redirects: bool = False
    adapter: str | None = None
    acceptor_part: str | None = None
    frame_size_param: str | None = None

    def detect(self, data: bytes):
        """This protocol's verdict on ``data``."""
        return load(self.detector)(data)

    @property
    def part(self) -> str | None:
        """The acceptor-parameter part the adapter acts on (None when not served)."""
        if self.acceptor_part is not None:
            return self.acceptor_part
        return self.name if self.adapter is not None else None


_SIGNATURES = "junction.protocols.signatures"

#: The built-in protocols, in the order their signatures are tried.  CLUSTER
#: first: no other signature starts with ``J``, and without it a lone ``J``
#: would be unknown before the rest of the magic arrived.
BUILT_IN: tuple[ProtocolEntry, ...] = (
    ProtocolEntry("CLUSTER", f"{_SIGNATURES}:cluster"),
    ProtocolEntry(
        "AMQP",
        f"{_SIGNATURES}:amqp",
        gateway="junction.gateway.amqp_backend:AmqpSide",
        redirects=True,
        adapter="junction.brokercore.amqp_server:AmqpFactory",
    ),
    ProtocolEntry(
        "STOMP",
        f"{_SIGNATURES}:stomp",
        gateway="junction.gateway.stomp_side:StompSide",
        adapter="junction.brokercore.stomp_server:StompFactory",
        frame_size_param="stompMaxFramePayloadLength",
    ),
    ProtocolEntry(
        "CORE",
        f"{_SIGNATURES}:core",
        gateway="junction.gateway.core_side:CoreSide",
        redirects=True,
        adapter="junction.brokercore.core_server:CoreFactory",
    ),
    ProtocolEntry("MQTT", f"{_SIGNATURES}:mqtt"),
    ProtocolEntry(
        "OPENWIRE",
        f"{_SIGNATURES}:openwire",
        gateway="junction.gateway.openwire_side:OpenWireSide",
        redirects=True,
        adapter="junction.brokercore.openwire_server:OpenWireFactory",
    ),
)

#: each built-in row by its name (what the package's own entry points name)
CLUSTER, AMQP, STOMP, CORE, MQTT, OPENWIRE = BUILT_IN

_table: tuple[ProtocolEntry, ...] | None = None


def _registered() -> list[ProtocolEntry]:
    """The entries of the entry-point group (a broken one is logged and left out)."""
    found = []
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry = point.load()
            if callable(entry) and not isinstance(entry, ProtocolEntry):
                entry = entry()
        except Exception:  # noqa: BLE001 - one broken plug-in does not stop the node
            log.exception("protocol entry point %s (%s) cannot be loaded", point.name, point.value)
            continue
        if not isinstance(entry, ProtocolEntry):
            log.error("protocol entry point %s (%s) is not a ProtocolEntry", point.name, point.value)
            continue
        found.append(entry)
    return found


def protocol_table(*, reload: bool = False) -> tuple[ProtocolEntry, ...]:
    """The built-ins with the registered entries merged over them, in detection order."""
    global _table
    if _table is None or reload:
        entries = {entry.name: entry for entry in BUILT_IN}
        for entry in _registered():
            entries[entry.name] = entry
        _table = tuple(entries.values())
    return _table


def protocol(name: str) -> ProtocolEntry | None:
    """The entry for protocol ``name``, or None."""
    for entry in protocol_table():
        if entry.name == name:
            return entry
    return None


def served() -> frozenset[str]:
    """Protocols the broker core serves (entries with an adapter)."""
    return frozenset(e.name for e in protocol_table() if e.adapter is not None)


def routed() -> frozenset[str]:
    """Protocols the gateway reads and routes (entries with a gateway side)."""
    return frozenset(e.name for e in protocol_table() if e.gateway is not None)


def redirecting() -> frozenset[str]:
    """Routed protocols with a native redirect."""
    return frozenset(e.name for e in protocol_table() if e.gateway is not None and e.redirects)


def frame_size_params() -> tuple[str, ...]:
    """The acceptor parameters bounding an opening's frame, one per protocol that names one."""
    return tuple(e.frame_size_param for e in protocol_table() if e.frame_size_param is not None)
