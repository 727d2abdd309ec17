"""Broadcast groups and discovery groups: UDP multicast announcements of a node's connectors.

Artemis's ``BroadcastGroupImpl`` / ``DiscoveryGroup`` over UDP, on a Twisted
reactor, with Junction's own datagram
(:mod:`junction.protocols.cluster.broadcast`):

* :class:`BroadcastGroup` -- one per ``<broadcast-group>``.  :meth:`~BroadcastGroup.start`
  opens a UDP socket on ``local-bind-address:local-bind-port`` (``-1``: an
  anonymous port; no address: every interface), sends multicast out of
  ``local-bind-address`` when given, with TTL :data:`MULTICAST_TTL` and
  loopback on (so nodes on the same host hear each other), and sends one
  announcement at once and then one every ``broadcast-period`` ms, its
  sequence number one more each time.  A failed send is counted and logged
  (at most once every :data:`LOG_INTERVAL` seconds) and the loop goes on.
* :class:`DiscoveryGroup` -- one per ``<discovery-group>``.
  :meth:`~DiscoveryGroup.start` listens on ``group-port`` with the address
  reused (several listeners on one host all receive; on Linux the socket is
  bound to the group address, as Artemis does, so it hears that group only),
  joins ``group-address`` on ``local-bind-address`` (default: the kernel's
  choice) and keeps one :class:`Entry` per announcing node id, at most
  :data:`MAX_ENTRIES`.  An entry not refreshed for ``refresh-timeout`` ms is
  removed, by one timer set for the oldest entry's deadline (no timer per
  datagram).  Listeners get ``(event, entry)`` with event ``"added"``,
  ``"updated"`` (the node's connectors or name changed) or ``"removed"``.

A datagram that does not decode is counted (``malformed``) and logged at
most once per :data:`LOG_INTERVAL` per source host.  An announcement of the
group's own node id is the node's own broadcast coming back (loopback) and is
ignored -- unless it names a connector that is not one of the node's own
(:meth:`DiscoveryGroup.set_local_connectors`): then another process runs with
the same node id (a copied data directory), and the group calls its
duplicate-node listeners with ``(announcement, source)`` for every such
datagram, keeps the last one in ``duplicate_node`` and logs a warning at most
once per :data:`LOG_INTERVAL`.  Without local connectors (``None``, the
default) a duplicate node id cannot be told from the node's own broadcast,
and every own-id announcement is ignored.

Connector parameters whose name contains ``password`` (``keyStorePassword``,
``trustStorePassword`` ...) are never broadcast: the datagram is plain text on
the network.  A node connecting to a discovered connector supplies its own.

Only IPv4 multicast groups are supported.  Everything runs on the reactor
given as ``reactor`` (the global one when None, imported only then); every
timer is a ``reactor.callLater`` and ``stop()`` leaves none behind.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from twisted.internet import defer
from twisted.internet.protocol import DatagramProtocol

from junction.protocols.cluster.broadcast import (
    MAX_SEQUENCE,
    AnnouncedConnector,
    Announcement,
    decode_announcement,
    encode_announcement,
)
from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "MULTICAST_TTL",
    "MAX_ENTRIES",
    "LOG_INTERVAL",
    "RECEIVE_BUFFER_BYTES",
    "SECRET_PARAM_WORDS",
    "EVENTS",
    "Entry",
    "BroadcastGroup",
    "DiscoveryGroup",
    "announced_connector",
]

log = logging.getLogger("junction.cluster.discovery")

#: IP_MULTICAST_TTL of a broadcast group's datagrams: 1 keeps them on the local subnet.
MULTICAST_TTL = 1
#: The most nodes a discovery group remembers; announcements of further nodes are dropped.
MAX_ENTRIES = 1024
#: Seconds between two log lines about the same kind of trouble (and source).
LOG_INTERVAL = 60.0
#: The receive buffer of a discovery group's socket: a whole datagram of the largest size.
RECEIVE_BUFFER_BYTES = 65_535
#: A connector parameter whose name holds one of these (any case) is not broadcast.
SECRET_PARAM_WORDS = ("password",)
#: The events a discovery group's listeners receive.
EVENTS = ("added", "updated", "removed")
#: Twisted's clock is a float: an entry this close to its deadline counts as expired.
_EPSILON = 1e-6
#: log keys remembered at most by one rate limiter (oldest forgotten)
_MAX_LOG_KEYS = 1024
#: Bind a discovery socket to the group address (Linux only: elsewhere that bind fails).
_BIND_TO_GROUP = sys.platform.startswith("linux")


def _reactor_or_global(reactor):
    if reactor is not None:
        return reactor
    from twisted.internet import reactor as global_reactor

    return global_reactor


def _check_group(kind: str, name: str, address: str, port: int) -> None:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"{kind} {name!r}: group-address {address!r} is not an IP address") from None
    if ip.version != 4 or not ip.is_multicast or str(ip) == "224.0.0.0":
        raise ValueError(
            f"{kind} {name!r}: group-address {address!r} is not an IPv4 multicast address "
            "(224.0.0.1 to 239.255.255.255)"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"{kind} {name!r}: group-port {port!r} is not a port number (1-65535)")


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_PARAM_WORDS)


def announced_connector(connector) -> AnnouncedConnector:
    """The :class:`AnnouncedConnector` for a config ``Connector`` (or an AnnouncedConnector, as is).

    Values become strings; parameters named like a password are left out.
    """
    if isinstance(connector, AnnouncedConnector):
        return connector
    params = {
        str(k): "true" if v is True else "false" if v is False else str(v)
        for k, v in (connector.params or {}).items()
        if not _is_secret(str(k))
    }
    return AnnouncedConnector(connector.name, connector.host, connector.port, params)


def _connector_status(c: AnnouncedConnector) -> dict:
    return {"name": c.name, "host": c.host, "port": c.port, "params": c.params_dict()}


class _RateLimitedLog:
    """Logs one message per key at most once every ``interval`` seconds of ``clock``.

    The next message logged for a key says how many were held back since.
    """

    def __init__(self, clock, interval: float = LOG_INTERVAL, capacity: int = _MAX_LOG_KEYS):
        self.clock = clock
        self.interval = interval
        self.capacity = capacity
        self._last: OrderedDict = OrderedDict()  # key -> [time logged, held back since]

    def __call__(self, level: int, key, message: str, *args, exc_info=None) -> bool:
        now = self.clock.seconds()
        entry = self._last.get(key)
        if entry is not None and now - entry[0] < self.interval:
            entry[1] += 1
            return False
        held_back = entry[1] if entry is not None else 0
        self._last[key] = [now, 0]
        self._last.move_to_end(key)
        while len(self._last) > self.capacity:
            self._last.popitem(last=False)
        if held_back:
            message += " (%d more like this not logged since the last report)"
            args = (*args, held_back)
        log.log(level, message, *args, exc_info=exc_info)
        return True


# --------------------------------------------------------------------------- broadcast group


class _SenderProtocol(DatagramProtocol):
    """A broadcast group's socket only sends; anything it receives is dropped."""

    noisy = False

    def datagramReceived(self, datagram, addr) -> None:  # noqa: N802 (Twisted's name)
        pass


class BroadcastGroup:
    """Sends this node's connectors to a UDP multicast group every ``broadcast_period`` ms.

    ``connectors`` are config ``Connector``s (or AnnouncedConnectors): when
    ``config.connector_refs`` names some, those are announced in that order
    (each must be among ``connectors``, else ``ValueError``); when it is
    empty, every one given is.  ``sent`` counts datagrams handed to the
    kernel, ``send_errors`` the sends that failed, ``sequence`` is the last
    sequence number used.
    """

    def __init__(self, config, connectors: Iterable, node_id: str, node_name: str, reactor=None):
        _check_group("broadcast group", config.name, config.group_address, config.group_port)
        period = config.broadcast_period
        if isinstance(period, bool) or not isinstance(period, (int, float)) or not period > 0:
            raise ValueError(
                f"broadcast group {config.name!r}: broadcast-period must be more than 0 ms, got {period!r}"
            )
        bind_port = config.local_bind_port
        if isinstance(bind_port, bool) or not isinstance(bind_port, int) or not -1 <= bind_port < 65536:
            raise ValueError(
                f"broadcast group {config.name!r}: local-bind-port {bind_port!r} is not -1 or a port number"
            )
        self.config = config
        self.node_id = node_id
        self.node_name = node_name
        self.connectors: tuple[AnnouncedConnector, ...] = self._select(config, list(connectors))
        # the largest datagram this group can send: refuse it now, not at every period
        encode_announcement(Announcement(node_id, node_name, MAX_SEQUENCE, self.connectors))
        self._reactor = _reactor_or_global(reactor)
        self._log = _RateLimitedLog(self._reactor)
        self._port = None
        self._timer = None
        self._running = False
        self.sequence = 0
        self.sent = 0
        self.send_errors = 0

    @staticmethod
    def _select(config, connectors: list) -> tuple[AnnouncedConnector, ...]:
        if not config.connector_refs:
            chosen = connectors
        else:
            by_name = {c.name: c for c in connectors}
            missing = [ref for ref in config.connector_refs if ref not in by_name]
            if missing:
                raise ValueError(
                    f"broadcast group {config.name!r}: no connector named {', '.join(map(repr, missing))}"
                )
            chosen = [by_name[ref] for ref in config.connector_refs]
        return tuple(announced_connector(c) for c in chosen)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> defer.Deferred:
        """Open the socket and start announcing.

        A socket that cannot be opened raises at once (``CannotListenError``);
        the Deferred fires once the outgoing interface is set and the first
        announcement was sent, or fails (the group is stopped) if the
        interface could not be set.
        """
        if self._running:
            raise RuntimeError(f"broadcast group {self.name!r} is already started")
        config = self.config
        bind_port = 0 if config.local_bind_port == -1 else config.local_bind_port
        port = self._reactor.listenMulticast(
            bind_port, _SenderProtocol(), interface=config.local_bind_address or "", listenMultiple=False
        )
        self._port = port
        self._running = True
        self.sequence = 0
        try:
            port.setTTL(MULTICAST_TTL)
            port.setLoopbackMode(1)
            if config.local_bind_address:
                d = port.setOutgoingInterface(config.local_bind_address)
            else:
                d = defer.succeed(None)
        except Exception:
            self.stop()
            raise

        def ready(_):
            if self._running and self._port is port:
                self._announce()

        def failed(failure):
            log.error(
                "broadcast group %r: could not send from %s: %s",
                self.name,
                config.local_bind_address,
                failure.getErrorMessage(),
            )
            if self._port is port:
                self.stop()
            return failure

        return d.addCallbacks(ready, failed)

    def _announce(self) -> None:
        self._timer = None
        if not self._running:
            return
        self.sequence += 1
        datagram = encode_announcement(
            Announcement(self.node_id, self.node_name, self.sequence, self.connectors)
        )
        try:
            self._port.write(datagram, (self.config.group_address, self.config.group_port))
        except Exception as e:  # OSError, MessageLengthError, ...: try again next period
            self.send_errors += 1
            self._log(
                logging.WARNING,
                "send",
                "broadcast group %r: could not send to %s:%d: %s",
                self.name,
                self.config.group_address,
                self.config.group_port,
                e,
            )
        else:
            self.sent += 1
        self._timer = self._reactor.callLater(self.config.broadcast_period / 1000.0, self._announce)

    def stop(self) -> defer.Deferred | None:
        """Stop announcing and close the socket; a Deferred firing when it is closed, or None."""
        self._running = False
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        port, self._port = self._port, None
        if port is None:
            return None
        return port.stopListening()

    def status(self) -> dict:
        config = self.config
        bound = None
        if self._port is not None:
            try:
                bound = self._port.getHost().port
            except Exception:  # a socket gone or a test transport
                bound = None
        return {
            "name": self.name,
            "group": config.group_address,
            "port": config.group_port,
            "local_bind_address": config.local_bind_address,
            "local_bind_port": bound if bound is not None else config.local_bind_port,
            "broadcast_period": config.broadcast_period,
            "running": self._running,
            "node_id": self.node_id,
            "node_name": self.node_name,
            "connectors": [_connector_status(c) for c in self.connectors],
            "sequence": self.sequence,
            "sent": self.sent,
            "send_errors": self.send_errors,
        }


# --------------------------------------------------------------------------- discovery group


@dataclass(frozen=True)
class Entry:
    """What a discovery group knows of one node: its last announcement, when, and from where.

    ``last_seen`` is in the reactor's seconds; ``source`` is the datagram's
    ``(host, port)``.  A new Entry replaces the old one at every datagram.
    """

    announcement: Announcement
    last_seen: float
    source: tuple[str, int]

    @property
    def node_id(self) -> str:
        return self.announcement.node_id

    @property
    def name(self) -> str:
        return self.announcement.name

    @property
    def connectors(self) -> tuple[AnnouncedConnector, ...]:
        return self.announcement.connectors


class _ReceiverProtocol(DatagramProtocol):
    noisy = False

    def __init__(self, group: DiscoveryGroup):
        self.group = group

    def datagramReceived(self, datagram, addr) -> None:  # noqa: N802 (Twisted's name)
        self.group.datagram_received(datagram, addr)


class DiscoveryGroup:
    """Listens to a UDP multicast group and keeps one :class:`Entry` per announcing node.

    ``entries`` maps node id to Entry.  Counters: ``received`` (datagrams),
    ``malformed``, ``own`` (this node's own announcements, ignored),
    ``duplicates`` (own node id from a foreign connector), ``dropped``
    (new nodes beyond :data:`MAX_ENTRIES`).  ``local_connectors``: see
    :meth:`set_local_connectors`.
    """

    def __init__(self, config, node_id: str, reactor=None, *, local_connectors: Iterable | None = None):
        _check_group("discovery group", config.name, config.group_address, config.group_port)
        refresh, initial = config.refresh_timeout, config.initial_wait_timeout
        if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or not refresh > 0:
            raise ValueError(
                f"discovery group {config.name!r}: refresh-timeout must be more than 0 ms, got {refresh!r}"
            )
        if isinstance(initial, bool) or not isinstance(initial, (int, float)) or not initial >= 0:
            raise ValueError(
                f"discovery group {config.name!r}: initial-wait-timeout must be 0 ms or more, got {initial!r}"
            )
        self.config = config
        self.node_id = node_id
        self._reactor = _reactor_or_global(reactor)
        self._log = _RateLimitedLog(self._reactor)
        #: the address the listening socket binds (the group's on Linux, else every interface)
        self.bind_address = config.group_address if _BIND_TO_GROUP else ""
        self.entries: dict[str, Entry] = {}
        self._listeners: list[Callable[[str, Entry], object]] = []
        self._duplicate_listeners: list[Callable[[Announcement, tuple], object]] = []
        self._waiters: list[defer.Deferred] = []
        self._local: frozenset[tuple[str, int]] | None = None
        self.set_local_connectors(local_connectors)
        self._port = None
        self._running = False
        self._started_at: float | None = None
        self._initial_call = None
        self._initial_over = False
        self._expiry_call = None
        #: the last ``(announcement, source)`` that announced this node's id from a foreign connector
        self.duplicate_node: tuple[Announcement, tuple[str, int]] | None = None
        self.received = 0
        self.malformed = 0
        self.own = 0
        self.duplicates = 0
        self.dropped = 0

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def running(self) -> bool:
        return self._running

    def set_local_connectors(self, connectors: Iterable | None) -> None:
        """The connectors this node announces (in all its broadcast groups), or None if unknown.

        An announcement of this node's id naming a ``(host, port)`` that is not
        among them comes from another process with the same node id.
        """
        if connectors is None:
            self._local = None
        else:
            self._local = frozenset((c.host, c.port) for c in map(announced_connector, connectors))

    # -- listeners

    def add_listener(self, fn: Callable[[str, Entry], object]) -> None:
        """Call ``fn(event, entry)`` on ``"added"``, ``"updated"`` and ``"removed"``."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[str, Entry], object]) -> None:
        self._listeners.remove(fn)

    def add_duplicate_node_listener(self, fn: Callable[[Announcement, tuple], object]) -> None:
        """Call ``fn(announcement, source)`` whenever another process announces this node's id."""
        self._duplicate_listeners.append(fn)

    def remove_duplicate_node_listener(self, fn: Callable[[Announcement, tuple], object]) -> None:
        self._duplicate_listeners.remove(fn)

    def _call(self, what: str, fn, *args) -> None:
        try:
            fn(*args)
        except Exception:
            self._log(
                logging.ERROR,
                ("listener", what),
                "discovery group %r: a %s listener failed",
                self.name,
                what,
                exc_info=True,
            )

    def _notify(self, event: str, entry: Entry) -> None:
        for fn in list(self._listeners):
            self._call(event, fn, event, entry)

    # -- lifecycle

    def start(self) -> defer.Deferred:
        """Listen on the group port and join the group.

        A port that cannot be opened raises at once (``CannotListenError``);
        the Deferred fires once the group is joined, or fails (the group is
        stopped) if it cannot be.
        """
        if self._running:
            raise RuntimeError(f"discovery group {self.name!r} is already started")
        config = self.config
        port = self._reactor.listenMulticast(
            config.group_port,
            _ReceiverProtocol(self),
            interface=self.bind_address,
            maxPacketSize=RECEIVE_BUFFER_BYTES,
            listenMultiple=True,
        )
        self._port = port
        self._running = True
        self._started_at = self._reactor.seconds()
        self._initial_over = False
        self._initial_call = self._reactor.callLater(
            config.initial_wait_timeout / 1000.0, self._initial_wait_over
        )
        try:
            d = port.joinGroup(config.group_address, config.local_bind_address or "0.0.0.0")
        except Exception:
            self.stop()
            raise

        def failed(failure):
            log.error(
                "discovery group %r: could not join %s on %s: %s",
                self.name,
                config.group_address,
                config.local_bind_address or "the default interface",
                failure.getErrorMessage(),
            )
            if self._port is port:
                self.stop()
            return failure

        return d.addCallbacks(lambda _: None, failed)

    def stop(self) -> defer.Deferred | None:
        """Leave the group, close the port, cancel the timers; entries are cleared without events.

        Deferreds from :meth:`wait_initial` still waiting fire with the
        entries as they were.  Returns a Deferred firing when the port is
        closed, or None.
        """
        self._running = False
        for attr in ("_initial_call", "_expiry_call"):
            call = getattr(self, attr)
            if call is not None and call.active():
                call.cancel()
            setattr(self, attr, None)
        self._release_waiters()
        self.entries.clear()
        port, self._port = self._port, None
        if port is None:
            return None
        try:
            d = port.leaveGroup(self.config.group_address, self.config.local_bind_address or "0.0.0.0")
        except Exception:  # closing the socket leaves the group anyway
            d = defer.succeed(None)
        d.addErrback(lambda _failure: None)
        d.addCallback(lambda _: port.stopListening())
        return d

    # -- the initial wait

    def wait_initial(self) -> defer.Deferred:
        """A Deferred firing with the list of entries ``initial_wait_timeout`` ms after :meth:`start`.

        At once when that time has passed already (or the group was stopped
        after it had); before :meth:`start`, it waits for the start.
        Cancelling it just stops waiting.
        """
        if self._initial_over:
            return defer.succeed(list(self.entries.values()))

        def cancel(d: defer.Deferred) -> None:
            if d in self._waiters:
                self._waiters.remove(d)

        d: defer.Deferred = defer.Deferred(cancel)
        self._waiters.append(d)
        return d

    def _initial_wait_over(self) -> None:
        self._initial_call = None
        self._initial_over = True
        self._release_waiters()

    def _release_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for d in waiters:
            d.callback(list(self.entries.values()))

    # -- datagrams

    def datagram_received(self, datagram: bytes, source: tuple[str, int]) -> None:
        """One datagram from ``source`` (``(host, port)``)."""
        if not self._running:
            return
        self.received += 1
        try:
            announcement = decode_announcement(datagram)
        except RemoteProtocolError as e:
            self.malformed += 1
            self._log(
                logging.WARNING,
                ("malformed", source[0]),
                "discovery group %r: ignored a datagram from %s:%s: %s",
                self.name,
                source[0],
                source[1],
                e,
            )
            return
        if announcement.node_id == self.node_id:
            self._own_node_id(announcement, source)
            return
        now = self._reactor.seconds()
        old = self.entries.get(announcement.node_id)
        entry = Entry(announcement, now, tuple(source))
        if old is None:
            if len(self.entries) >= MAX_ENTRIES:
                self.dropped += 1
                self._log(
                    logging.WARNING,
                    "full",
                    "discovery group %r: knows %d nodes already, the most it keeps; "
                    "ignored node %r announced from %s:%s",
                    self.name,
                    MAX_ENTRIES,
                    announcement.node_id,
                    source[0],
                    source[1],
                )
                return
            self.entries[announcement.node_id] = entry
            self._schedule_expiry()
            self._notify("added", entry)
            return
        self.entries[announcement.node_id] = entry
        if old.connectors != announcement.connectors or old.name != announcement.name:
            self._notify("updated", entry)

    def _own_node_id(self, announcement: Announcement, source: tuple[str, int]) -> None:
        if self._local is None or all((c.host, c.port) in self._local for c in announcement.connectors):
            self.own += 1
            return
        self.duplicates += 1
        self.duplicate_node = (announcement, tuple(source))
        self._log(
            logging.WARNING,
            "duplicate",
            "discovery group %r: another node announces this node's id %r from %s:%s with "
            "connectors %s; is a copy of this node's data directory running?",
            self.name,
            self.node_id,
            source[0],
            source[1],
            ", ".join(f"{c.host}:{c.port}" for c in announcement.connectors),
        )
        for fn in list(self._duplicate_listeners):
            self._call("duplicate-node", fn, announcement, tuple(source))

    # -- expiry

    def _schedule_expiry(self) -> None:
        if self._expiry_call is not None or not self.entries or not self._running:
            return
        timeout = self.config.refresh_timeout / 1000.0
        oldest = min(e.last_seen for e in self.entries.values())
        # a hair early rather than an ulp late: _expire counts an entry this close as expired
        delay = max(0.0, oldest + timeout - self._reactor.seconds() - _EPSILON)
        self._expiry_call = self._reactor.callLater(delay, self._expire)

    def _expire(self) -> None:
        self._expiry_call = None
        now = self._reactor.seconds()
        timeout = self.config.refresh_timeout / 1000.0
        expired = [e for e in self.entries.values() if now - e.last_seen >= timeout - _EPSILON]
        for entry in expired:
            del self.entries[entry.node_id]
        for entry in expired:
            log.info(
                "discovery group %r: node %r (%s) not heard for %d ms, removed",
                self.name,
                entry.node_id,
                entry.name,
                self.config.refresh_timeout,
            )
            self._notify("removed", entry)
        self._schedule_expiry()

    # -- management

    def status(self) -> dict:
        config = self.config
        now = self._reactor.seconds()
        duplicate = None
        if self.duplicate_node is not None:
            announcement, source = self.duplicate_node
            duplicate = {
                "source": f"{source[0]}:{source[1]}",
                "connectors": [_connector_status(c) for c in announcement.connectors],
            }
        return {
            "name": self.name,
            "group": config.group_address,
            "port": config.group_port,
            "local_bind_address": config.local_bind_address,
            "refresh_timeout": config.refresh_timeout,
            "initial_wait_timeout": config.initial_wait_timeout,
            "running": self._running,
            "node_id": self.node_id,
            "entries": [
                {
                    "node_id": e.node_id,
                    "name": e.name,
                    "connectors": [_connector_status(c) for c in e.connectors],
                    "sequence": e.announcement.sequence,
                    "source": f"{e.source[0]}:{e.source[1]}",
                    "age_ms": max(0, round((now - e.last_seen) * 1000)),
                }
                for e in self.entries.values()
            ],
            "received": self.received,
            "malformed": self.malformed,
            "own": self.own,
            "duplicates": self.duplicates,
            "duplicate_node": duplicate,
            "dropped": self.dropped,
        }

