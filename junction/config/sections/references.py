"""References between sections (connectors, discovery groups), checked once the whole file is read."""

from __future__ import annotations

from junction.config.sections.base import ElementReader
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.xmlsource import Element

#: the error for a password written ENC(...) (a router pool's, the cluster's)
MASKED_PASSWORD = UNIMPLEMENTED["password"]["ENC(...)"].message


class References(ElementReader):
    """Names one section gives of another's items (connectors, discovery groups,
    cluster connections), gathered in ``self.connector_refs``,
    ``self.discovery_refs`` and ``self.cluster_refs`` and checked against what
    the whole file defines (:mod:`junction.config.crosschecks`)."""

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

