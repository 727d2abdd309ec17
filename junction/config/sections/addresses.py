"""``<addresses>`` (their routing types and queues) and ``<address-settings>``."""

from __future__ import annotations

from typing import Any

from junction.config import model
from junction.config.schema import ADDRESS_SETTING_ELEMENTS, QUEUE_ATTRIBUTES, QUEUE_ELEMENTS
from junction.config.sections.base import ElementReader
from junction.config.specs import Unsupported, Value
from junction.config.suggest import suggest
from junction.config.values import boolean, show, text_value
from junction.config.xmlsource import Element
from junction.model.message import RoutingType


class Addresses(ElementReader):
    """Reads ``<addresses>`` into ``self.addresses`` and ``<address-settings>``
    into ``self.address_settings``."""

    # -- addresses ----------------------------------------------------------------------
    def _addresses(self, el: Element) -> None:
        self._container(el)
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != "address":
                self._unknown(child, "addresses", ["address"])
                continue
            self._address(child)

    def _address(self, el: Element) -> None:
        self._container(el, ("name",))
        name = el.attrib.get("name", "").strip()
        if not name:
            self.error(el, "<address> needs a name attribute")
            return
        routing: set[RoutingType] = set()
        queues: list[model.QueueConfig] = []
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag not in ("anycast", "multicast"):
                self._unknown(child, "address", ["anycast", "multicast"])
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in address {name!r} (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            rt = RoutingType[child.tag.upper()]
            routing.add(rt)
            self._container(child)
            for q in child.children:
                if not self._check_namespace(q):
                    continue
                if q.tag != "queue":
                    self._unknown(q, child.tag, ["queue"])
                    continue
                qc = self._queue(q, rt)
                if qc is not None:
                    queues.append(qc)
        if not routing:
            self.error(
                el, f"address {name!r} has no routing type: give it <anycast> and/or <multicast>"
            )
        self.addresses.append(
            model.AddressConfig(name, frozenset(routing), tuple(queues), source=el.source)
        )

    def _queue(self, el: Element, rt: RoutingType) -> model.QueueConfig | None:
        name = el.attrib.get("name", "").strip()
        if not name:
            self.error(el, "<queue> needs a name attribute")
            return None
        fields: dict[str, Any] = {}
        given = []
        ok = self._ok(el)
        for attr, text in el.attrib.items():
            if attr == "name":
                continue
            spec = QUEUE_ATTRIBUTES.get(attr)
            if spec is None:
                self.error(
                    el,
                    f"<queue> has no attribute {attr!r}{suggest(attr, list(QUEUE_ATTRIBUTES) + ['name'])}",
                )
                continue
            if isinstance(spec, Unsupported):
                self.error(el, f"queue attribute {attr!r} is not supported by Junction yet")
                continue
            if not ok:
                continue
            value = self.parse_value(el, spec.parse, text, f"queue {name!r} attribute {attr}")
            if value is None:
                continue
            if isinstance(spec, Value):
                fields[spec.attr] = value
                given.append(attr)
            elif value == spec.default:
                self.ignored.append(
                    (
                        f"queue@{attr}",
                        el.line,
                        f"{attr}={text.strip()} on queue {name!r}: the Artemis default, which is how Junction behaves",
                    )
                )
            else:
                self.error(
                    el,
                    f"queue attribute {attr!r} is not supported by Junction yet (only its Artemis default {show(spec.default)} is accepted, got {text.strip()!r})",
                )
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag not in QUEUE_ELEMENTS:
                self._unknown(child, "queue", QUEUE_ELEMENTS)
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in queue {name!r} (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            if not self._ok(child):
                continue
            if child.tag == "filter":
                for ch in child.children:
                    self.error(
                        ch, f"<filter> takes a string attribute, not a child element <{ch.tag}>"
                    )
                for attr in child.attrib:
                    if attr != "string":
                        self.error(
                            child, f"<filter> has no attribute {attr!r}{suggest(attr, ['string'])}"
                        )
                if child.text.strip():
                    self.error(
                        child, 'write the filter as <filter string="..."/>, not as element text'
                    )
                if "string" not in child.attrib:
                    self.error(
                        child,
                        "<filter> needs a string attribute: <filter string=\"color = 'red'\"/>",
                    )
                else:
                    fields["filter"] = child.attrib["string"]
                    problem = _filter_problem(child.attrib["string"])
                    if problem:
                        self.error(child, f"invalid queue filter: {problem}")
            elif child.tag == "durable":
                if self._leaf(child):
                    v = self.parse_value(child, boolean, child.text, "<durable>")
                    if v is not None:
                        fields["durable"] = v
            elif child.tag == "user":
                if self._leaf(child):
                    v = self.parse_value(child, text_value, child.text, "<user>")
                    if v is not None:
                        fields["user"] = v
        return model.QueueConfig(
            name=name, routing_type=rt, source=el.source, given=frozenset(given), **fields
        )

    # -- address-settings ---------------------------------------------------------------
    def _address_settings(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != "address-setting":
                self._unknown(child, "address-settings", ["address-setting"])
                continue
            self._container(child, ("match",))
            match = child.attrib.get("match")
            if match is None or not match.strip():
                self.error(
                    child,
                    "<address-setting> needs a match attribute (an address or wildcard such as #)",
                )
                continue
            match = match.strip()
            if match in seen:
                self.error(
                    child,
                    f"a second <address-setting match={match!r}> (the first is at line {seen[match].line}); merge them",
                )
                continue
            seen[match] = child
            values: dict[str, Any] = {}
            self._children(
                child, ADDRESS_SETTING_ELEMENTS, values, f"<address-setting match={match!r}>"
            )
            self.address_settings.append(
                model.AddressSettings(match=match, source=child.source, **values)
            )


def _filter_problem(text: str) -> str | None:
    """Why a filter expression would not parse (checked with the broker's own parser)."""
    from junction.model.filter import FilterError, parse_filter

    try:
        parse_filter(text)
    except FilterError as exc:
        return str(exc)
    return None
