"""The checks across sections, once the whole file is read: names, ports, references.

Each check is a function of the loader that has read every section (its
lists of acceptors, connectors, routers ..., the references one section made
to another, its ``error`` and ``ignored``); :data:`CROSS_CHECKS` runs them in
order.  Differences from Artemis, on purpose (Artemis is lax where a typo
silently changes behaviour): a second acceptor on the same host and port, a
second item of the same name or a queue name used twice is an error, not
"last one wins"; a reference to a connector, discovery group, cluster
connection or router that nothing defines is an error (Artemis logs a warning
and leaves the item out, or fails later).
"""

from __future__ import annotations

from junction.config import model
from junction.config.suggest import suggest
from junction.config.urls import WILDCARD_HOSTS

__all__ = ["CROSS_CHECKS", "cross_check"]


def _first_by_name(items) -> dict:
    first: dict = {}
    for item in items:
        first.setdefault(item.name, item)
    return first


def _unique(r, items, what: str) -> None:
    """Each of ``items`` (with ``name`` and ``source``) named once."""
    names: dict = {}
    for item in items:
        if item.name in names:
            r.error(
                None,
                f"a second {what} named {item.name!r} (the first is at line {names[item.name].source[1]})",
                item.source[1],
            )
        else:
            names[item.name] = item


def unique_acceptors(r) -> None:
    _unique(r, r.acceptors, "acceptor")


def _norm_host(host: str) -> str:
    h = host.strip().lower()
    return "127.0.0.1" if h == "localhost" else h


def ports_in_use_once(r) -> None:
    """No two listeners (the management API, the acceptors) on one host and port."""
    bound: list[tuple[str, int, str, int]] = []  # host, port, what, line
    mport = r.values.get("management_port", model.BrokerConfig.management_port)
    if mport:
        mhost = r.values.get("management_host", model.BrokerConfig.management_host)
        what = (
            "the management API"
            if "management" in r.junction_lines
            else ("the management API (by default; move it with <junction><management port=...>)")
        )
        bound.append((_norm_host(mhost), mport, what, r.junction_lines.get("management", 0)))
    for a in r.acceptors:
        if a.port:
            bound.append((_norm_host(a.host), a.port, f"acceptor {a.name!r}", a.source[1]))
    for i, (host, port, what, line) in enumerate(bound):
        for h2, p2, w2, l2 in bound[:i]:
            if port == p2 and (host == h2 or host in WILDCARD_HOSTS or h2 in WILDCARD_HOSTS):
                at = f" (line {l2})" if l2 else ""
                r.error(None, f"{what} listens on {host}:{port}, which {w2}{at} already uses", line)
                break


def unique_connectors(r) -> None:
    _unique(r, r.connectors, "connector")


def routers_defined(r) -> None:
    """Each acceptor's ``router=`` names a ``<connection-router>``."""
    routers = [router.name for router in r.routers]
    for a in r.acceptors:
        if a.router is not None and a.router not in routers:
            r.error(
                None,
                f"acceptor {a.name!r} names router {a.router!r}, but no <connection-routers> defines it"
                + suggest(a.router, routers),
                a.source[1],
            )


def _defined(r, refs, names, what: str, section: str) -> None:
    """Each ``(who, name, element)`` of ``refs`` names one of ``names`` (a ``what`` of ``<section>``)."""
    for who, name, ref in refs:
        if name not in names:
            r.error(ref, f"{who} names {what} {name!r}, but no <{section}> defines it" + suggest(name, names))


def connectors_defined(r) -> None:
    """Each ``<connector-ref>`` (pools, groups, cluster connections, scale-down) names a ``<connector>``."""
    _defined(r, r.connector_refs, _first_by_name(r.connectors), "connector", "connectors")


def discovery_groups_defined(r) -> None:
    _defined(r, r.discovery_refs, [g.name for g in r.discovery_groups], "discovery group", "discovery-groups")


def cluster_connections_defined(r) -> None:
    clusters = [c.name for c in r.cluster_connections]
    _defined(r, r.cluster_refs, clusters, "cluster connection", "cluster-connections")


def scale_down_has_peers(r) -> None:
    """An enabled scale-down has a way to find peers."""
    sd = r.values.get("scale_down")
    if (
        sd is not None
        and sd.enabled
        and sd.discovery_group is None
        and not sd.connectors
        and sd.cluster_name is None
        and not r.cluster_connections
        and r._scale_down_el is not None
        and not any(
            c.tag in ("discovery-group-ref", "connectors", "cluster-name")
            for c in r._scale_down_el.children
        )
    ):
        r.error(
            r._scale_down_el,
            "scale-down has no peers to move messages to: give <discovery-group-ref> or"
            " <connectors>, or define a <cluster-connection> whose peers it can use"
            " (or set <enabled>false</enabled>)",
        )


def unique_addresses_and_queues(r) -> None:
    """Address names once; queue names once across every address."""
    addr_seen: dict[str, model.AddressConfig] = {}
    queue_seen: dict[str, model.QueueConfig] = {}
    for ad in r.addresses:
        if ad.name in addr_seen:
            r.error(
                None,
                f"a second address named {ad.name!r} (the first is at line {addr_seen[ad.name].source[1]})",
                ad.source[1],
            )
        else:
            addr_seen[ad.name] = ad
        for q in ad.queues:
            if q.name in queue_seen:
                r.error(
                    None,
                    f"a second queue named {q.name!r} (the first is at line {queue_seen[q.name].source[1]}); queue names are unique across addresses",
                    q.source[1],
                )
            else:
                queue_seen[q.name] = q


def anonymous_user_without_security(r) -> None:
    """``anonymous-user`` with security off changes nothing: listed as ignored."""
    anon = r.values.get("anonymous_user")
    if anon is not None and not r.values.get("security_enabled", True):
        r.ignored.append(
            (
                "anonymous-user",
                r.junction_lines.get("security", 0),
                "security-enabled is false, so every connection is allowed anyway",
            )
        )


#: Every check across sections, in the order they run (errors on one line keep this order).
CROSS_CHECKS = (
    unique_acceptors,
    ports_in_use_once,
    unique_connectors,
    routers_defined,
    connectors_defined,
    discovery_groups_defined,
    cluster_connections_defined,
    scale_down_has_peers,
    unique_addresses_and_queues,
    anonymous_user_without_security,
)


def cross_check(r) -> None:
    """Run :data:`CROSS_CHECKS` over the loader ``r``."""
    for check in CROSS_CHECKS:
        check(r)
