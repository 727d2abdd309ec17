"""Junction's own ``<junction>`` element, and ``<wildcard-addresses>``."""

from __future__ import annotations

from junction.config.schema import JUNCTION_ELEMENTS, WILDCARD_ELEMENTS
from junction.config.sections.base import ElementReader
from junction.config.suggest import suggest
from junction.config.xmlsource import Element


class JunctionSection(ElementReader):
    """Reads ``<wildcard-addresses>`` into ``self.wildcard`` and ``<junction>``
    into ``self.values``, ``self.limits`` and ``self.events`` (its lines in
    ``self.junction_lines``)."""

    # -- wildcard-addresses -------------------------------------------------------------
    def _wildcard_addresses(self, el: Element) -> None:
        self._container(el)
        self._children(el, WILDCARD_ELEMENTS, self.wildcard, "<wildcard-addresses>")
        chars = {
            k: self.wildcard[k]
            for k in ("delimiter", "any_words", "single_word")
            if k in self.wildcard
        }
        merged = {"delimiter": ".", "any_words": "#", "single_word": "*", **chars}
        if len(set(merged.values())) != 3:
            self.error(
                el,
                "<wildcard-addresses>: delimiter, any-words and single-word must be three different characters, got "
                + ", ".join(f"{k.replace('_', '-')}={v!r}" for k, v in merged.items()),
            )

    # -- <junction> ---------------------------------------------------------------------
    def _junction(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            attrs = JUNCTION_ELEMENTS.get(child.tag)
            if attrs is None:
                self._unknown(child, "junction", JUNCTION_ELEMENTS)
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in <junction> (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            self.junction_lines[child.tag] = child.line
            if child.tag == "events":
                self.events = {}
            if child.text.strip() or child.children:
                self.error(
                    child,
                    f'<{child.tag}> takes attributes only, e.g. <{child.tag} {next(iter(attrs))}="..."/>',
                )
            if not self._ok(child):
                continue
            target = {"limits": self.limits, "events": self.events}.get(child.tag, self.values)
            for attr, text in child.attrib.items():
                spec = attrs.get(attr)
                if spec is None:
                    self.error(
                        child, f"<{child.tag}> has no attribute {attr!r}{suggest(attr, attrs)}"
                    )
                    continue
                field, parse = spec
                v = self.parse_value(child, parse, text, f"<{child.tag} {attr}>")
                if v is not None:
                    target[field] = v

