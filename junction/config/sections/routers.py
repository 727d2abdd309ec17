"""``<connection-routers>``: keys, policies, caches and pools."""

from __future__ import annotations

from typing import Any

from junction.config import model
from junction.config.schema import (
    CACHE_ELEMENTS,
    POLICY_PROPERTY_TYPES,
    POOL_ELEMENTS,
    REQUIRED_POLICY_PROPERTIES,
    ROUTER_ELEMENTS,
    registered_policies,
)
from junction.config.sections.references import MASKED_PASSWORD, References
from junction.config.suggest import suggest
from junction.config.xmlsource import Element


class ConnectionRouters(References):
    """Reads ``<connection-routers>`` into ``self.routers``."""

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
            hint = suggest(name, self._known_policies(), upper=True)
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
                        p, f"<property> has no attribute {attr!r}{suggest(attr, ['key', 'value'])}"
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
                    hint = suggest(key, allowed, upper=True)
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
                        p, POLICY_PROPERTY_TYPES[key], value, f"policy {name} property {key}"
                    )
                    if parsed is None:
                        continue
                    value = str(parsed)
            properties.append((key, value))
        if allowed is not None:
            for key in REQUIRED_POLICY_PROPERTIES.get(name, ()):
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
                    self.error(child, f"<password>: {MASKED_PASSWORD}")
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

