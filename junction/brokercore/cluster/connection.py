"""One ``<cluster-connection>``: which peers it links to, and its bridges.

Peers come from ``static-connectors`` or a ``discovery-group-ref``.  Unless
``allow-direct-connections-only`` is set, the members a peer reports in its
topology and the nodes that link to this one are linked to as well, so a
symmetric cluster forms from any one connector per node (Artemis's "the
servers will be discovered via one of these connectors").  With it set, only
the listed connectors are linked: the way to build chains.
"""

from __future__ import annotations

import dataclasses
import logging

from junction.brokercore.cluster.bridge import Bridge

log = logging.getLogger("junction.cluster")


class ClusterConnection:
    def __init__(self, manager, config):
        self.manager = manager
        self.config = config
        self.name = config.name
        self.own_connector = manager.connectors.get(config.connector_ref)
        #: (host, port) -> Bridge, every target tried
        self.bridges: dict = {}
        #: node id -> the open Bridge to it
        self.by_node: dict = {}
        self._discovery = None
        self.started = False
        #: called with {node id: connector} of the linked peers whenever it changes (gateway pools)
        self._member_listeners: list = []

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        self.started = True
        for name in self.config.static_connectors:
            connector = self.manager.connectors.get(name)
            if connector is not None:
                self.add_target(connector, learned_from="static")
        if self.config.discovery_group:
            group = self.manager.discovery_groups.get(self.config.discovery_group)
            if group is None:
                log.error("cluster connection %s: discovery group %s is not running", self.name, self.config.discovery_group)
            else:
                self._discovery = group
                group.add_listener(self._discovered)
                for entry in list(group.entries.values()):
                    self._discovered("added", entry)

    def stop(self) -> None:
        self.started = False
        if self._discovery is not None:
            remove = getattr(self._discovery, "remove_listener", None)
            if remove is not None:
                remove(self._discovered)
        for bridge in list(self.bridges.values()):
            bridge.stop()

    # -- targets -------------------------------------------------------------------
    def _is_self(self, host: str, port: int) -> bool:
        own = self.own_connector
        return own is not None and own.host == host and int(own.port) == int(port)

    def add_target(self, connector, *, node_id: str | None = None, learned_from: str) -> None:
        if not self.started:
            return
        key = (connector.host, int(connector.port))
        if self._is_self(*key) or node_id == self.manager.node_id:
            return
        if node_id is not None and node_id in self.by_node:
            return
        existing = self.bridges.get(key)
        if existing is not None and existing.state not in ("failed", "stopped", "duplicate"):
            return
        bridge = Bridge(self, connector, node_id=node_id, learned_from=learned_from)
        self.bridges[key] = bridge
        bridge.start()

    def _learned_connector(self, host: str, port: int):
        """A connector for a peer found by topology or discovery: this connection's transport settings."""
        base = self.own_connector
        if base is None:
            from junction.config.model import Connector

            return Connector(name=f"{host}:{port}", scheme="tcp", host=host, port=int(port))
        return dataclasses.replace(base, name=f"{host}:{port}", host=host, port=int(port))

    def _discovered(self, event: str, entry) -> None:
        announcement = entry.announcement
        if announcement.node_id == self.manager.node_id or not announcement.connectors:
            return
        first = announcement.connectors[0]
        if event in ("added", "updated"):
            self.add_target(self._learned_connector(first.host, first.port), node_id=announcement.node_id, learned_from="discovery")
        elif event == "removed":
            bridge = self.bridges.get((first.host, int(first.port)))
            if bridge is not None and not bridge.connected:
                bridge.stop("no longer announced")
                self.bridges.pop((first.host, int(first.port)), None)

    def members_learned(self, nodes, source_bridge) -> None:
        """A peer's TOPOLOGY: note the connector the peer names itself by; link to the members
        not linked yet (unless direct connections only)."""
        for member in nodes:
            if member.node_id == source_bridge.node_id and member.host and member.port:
                own = (member.host, int(member.port))
                if own != source_bridge.peer_connector:
                    source_bridge.peer_connector = own
                    if self.by_node.get(source_bridge.node_id) is source_bridge:
                        self._members_changed()
        if self.config.allow_direct_connections_only:
            return
        for member in nodes:
            if member.node_id == self.manager.node_id or not member.host or not member.port:
                continue
            self.add_target(self._learned_connector(member.host, member.port), node_id=member.node_id, learned_from="topology")

    def member_announced(self, node_id: str, host: str, port: int) -> None:
        """A node linked to us: link back, as the cluster is symmetric unless direct connections only."""
        if self.config.allow_direct_connections_only or not host or not port:
            return
        self.add_target(self._learned_connector(host, port), node_id=node_id, learned_from="announced")

    # -- bridge callbacks ---------------------------------------------------------------
    def bridge_opened(self, bridge) -> bool:
        current = self.by_node.get(bridge.node_id)
        if current is not None and current is not bridge and current.connected:
            return False
        self.by_node[bridge.node_id] = bridge
        for link in list(self.manager.links):
            link.send_topology()
        self._members_changed()
        return True

    def bridge_closed(self, bridge) -> None:
        if self.by_node.get(bridge.node_id) is bridge:
            del self.by_node[bridge.node_id]
            self._members_changed()

    def add_member_listener(self, fn) -> None:
        """``fn({node id: connector})`` now and whenever the linked peers change."""
        self._member_listeners.append(fn)
        fn(self.linked_members())

    def remove_member_listener(self, fn) -> None:
        """``fn`` is told no more changes."""
        if fn in self._member_listeners:
            self._member_listeners.remove(fn)

    def linked_members(self) -> dict:
        # (by_node holds the bridges whose peer welcomed them, until their link is lost)
        return {node_id: bridge.connector for node_id, bridge in self.by_node.items()}

    def announced_members(self) -> dict:
        """Node id -> (connector, scale-down group) of each linked peer, as the peer names
        itself: the connector its own cluster connection names (``connector-ref``, told in its
        TOPOLOGY), with this node's connector's name and parameters when that one reaches the
        same host and port, as a connector found by topology otherwise; the connector this node
        reaches it by until the peer has told it."""
        out = {}
        for node_id, bridge in self.by_node.items():
            connector = bridge.connector
            own = bridge.peer_connector
            if own is not None and own != (connector.host, int(connector.port)):
                connector = self._learned_connector(*own)
            out[node_id] = (connector, bridge.peer_scale_down_group)
        return out

    def _members_changed(self) -> None:
        members = self.linked_members()
        for fn in list(self._member_listeners):
            try:
                fn(members)
            except Exception:
                log.exception("cluster connection %s: a member listener failed", self.name)

    def bridge_gave_up(self, bridge) -> None:
        self.bridge_closed(bridge)

    def bridge_connected(self, node_id: str) -> bool:
        bridge = self.by_node.get(node_id)
        return bridge is not None and bridge.connected

    def members(self) -> list:
        """(node id, name, host, port) of this node and every peer it is linked to."""
        out = []
        own = self.own_connector
        if own is not None:
            out.append((self.manager.node_id, self.manager.name, own.host, int(own.port)))
        for node_id, bridge in self.by_node.items():
            out.append((node_id, bridge.peer_name or "", bridge.connector.host, int(bridge.connector.port)))
        return out

    def status(self) -> dict:
        cfg = self.config
        return {
            "name": self.name,
            "address": cfg.address,
            "message_load_balancing": cfg.message_load_balancing,
            "max_hops": cfg.max_hops,
            "discovery_group": cfg.discovery_group,
            "static_connectors": list(cfg.static_connectors),
            "bridges": [b.status() for b in sorted(self.bridges.values(), key=lambda b: b.target_name)],
        }


__all__ = ["ClusterConnection"]
