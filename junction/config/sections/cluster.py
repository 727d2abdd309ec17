"""The cluster sections: broadcast and discovery groups, cluster connections,
the cluster credentials and ``<ha-policy>`` scale-down."""

from __future__ import annotations

from typing import Any

from junction.config import model
from junction.config.schema import (
    BROADCAST_GROUP_ELEMENTS,
    CLUSTER_CONNECTION_ELEMENTS,
    DISCOVERY_GROUP_ELEMENTS,
    HA_POLICY_ELEMENTS,
    PRIMARY_ONLY_ELEMENTS,
    SCALE_DOWN_ELEMENTS,
)
from junction.config.sections.references import MASKED_PASSWORD, References
from junction.config.specs import Unsupported
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.values import Parser, any_text, boolean, text_value
from junction.config.xmlsource import Element


class ClusterSections(References):
    """Reads ``<broadcast-groups>``, ``<discovery-groups>`` and
    ``<cluster-connections>`` into lists of the same names, ``<cluster-user>``
    and ``<cluster-password>`` into ``self.values``, and ``<ha-policy>``'s
    scale-down into ``self.values["scale_down"]``."""

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
            refused = UNIMPLEMENTED["cluster-connections"].get(child.tag)
            if refused is not None:
                self.error(child, refused.message)
                continue
            if child.tag != "cluster-connection":
                self._unknown(
                    child, "cluster-connections", ["cluster-connection", *UNIMPLEMENTED["cluster-connections"]]
                )
                continue
            refused_attributes = UNIMPLEMENTED["cluster-connection@"]
            for attr, refused in refused_attributes.items():
                if attr in child.attrib:
                    self.error(child, refused.message)
            self._container(child, ("name", *refused_attributes))
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
            self.error(el, f"<{el.tag}>: {MASKED_PASSWORD}")
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

