"""Reading one element of ``broker.xml`` by its table: the generic part of every section.

:class:`ElementReader` holds what every section reader shares: reporting an
error with its file and line, checking that an element is a leaf or a
container, dispatching the children of a container through one of the tables
of :mod:`junction.config.schema`, and handling each kind of row
(:mod:`junction.config.specs`).  The sections (:mod:`junction.config.sections`)
are mixins of it; :class:`junction.config.loader._Loader` puts them together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from junction.config.errors import ConfigError
from junction.config.specs import (
    DefaultOnly,
    Ignored,
    Nested,
    Refused,
    Section,
    Unsupported,
    Value,
)
from junction.config.suggest import suggest, suggest_element
from junction.config.values import Parser, show
from junction.config.xmlsource import ACCEPTED_NAMESPACES, Element


class ElementReader:
    """One load of one file: the errors found and the elements ignored so far.

    ``values`` collects the :class:`~junction.config.model.BrokerConfig`
    fields read; each section mixin adds the lists it builds.
    """

    def __init__(self, file: str, base_dir: str, env: Mapping[str, str]):
        self.file = file
        self.base_dir = base_dir
        self.env = env
        self.errors: list[ConfigError] = []
        self.ignored: list[tuple[str, int, str]] = []
        self.tainted: set[int] = set()  # id() of elements with an unresolved ${VAR}
        self.values: dict[str, Any] = {}

    # -- reporting -----------------------------------------------------------------
    def error(self, el: Element | None, message: str, line: int | None = None) -> None:
        self.errors.append(
            ConfigError(
                el.file if el is not None else self.file,
                line if line is not None else (el.line if el is not None else 0),
                message,
            )
        )

    def parse_value(self, el: Element, parse: Parser, text: str, label: str):
        """Run ``parse``; on failure report ``label: message`` and return None."""
        try:
            return parse(text)
        except ValueError as e:
            self.error(el, f"{label}: {e}")
            return None

    def _ok(self, el: Element) -> bool:
        return id(el) not in self.tainted

    # -- generic element handling -----------------------------------------------------
    def _check_namespace(self, el: Element) -> bool:
        if el.ns not in ACCEPTED_NAMESPACES:
            self.error(el, f"element <{el.tag}> in namespace {el.ns!r} is not part of a broker.xml")
            return False
        return True

    def _leaf(self, el: Element) -> bool:
        """Check that ``el`` holds only text: no children, no attributes."""
        ok = True
        for child in el.children:
            self.error(child, f"<{el.tag}> takes a value, not a child element <{child.tag}>")
            ok = False
        for attr in el.attrib:
            self.error(el, f"<{el.tag}> has no attribute {attr!r}")
            ok = False
        return ok

    def _container(self, el: Element, allowed_attrs=()) -> None:
        """Check that a container has no text of its own and only ``allowed_attrs``."""
        if el.text.strip():
            self.error(el, f"<{el.tag}> takes child elements, not text ({el.text.strip()[:40]!r})")
        for attr in el.attrib:
            if attr not in allowed_attrs:
                hint = suggest(attr, allowed_attrs)
                self.error(el, f"<{el.tag}> has no attribute {attr!r}{hint}")

    def _unknown(self, el: Element, parent: str, candidates) -> None:
        self.error(
            el, f"unknown element <{el.tag}> in <{parent}>{suggest_element(el.tag, candidates)}"
        )

    def _unsupported(self, el: Element, spec: Unsupported) -> None:
        self.error(
            el,
            f"<{el.tag}> is not supported by Junction yet" + (f" {spec.hint}" if spec.hint else ""),
        )

    def _scalar(self, el: Element, spec, target: dict, context: str = "") -> None:
        """Handle a leaf element per ``spec`` (Value/Ignored/DefaultOnly/Unsupported)."""
        if isinstance(spec, Unsupported):
            self._unsupported(el, spec)
            return
        if isinstance(spec, Refused):
            self.error(el, f"<{el.tag}>: {spec.message}")
            return
        if not self._leaf(el) or not self._ok(el):
            return
        label = f"<{el.tag}>"
        value = self.parse_value(el, spec.parse, el.text, label)
        if value is None:
            return
        where = f" in {context}" if context else ""
        if isinstance(spec, Value):
            target[spec.attr] = value
        elif isinstance(spec, Ignored):
            self.ignored.append((el.tag, el.line, f"{el.tag}={el.value}{where}: {spec.why}"))
        elif isinstance(spec, DefaultOnly):
            if value == spec.default:
                self.ignored.append(
                    (
                        el.tag,
                        el.line,
                        f"{el.tag}={el.value}{where}: the Artemis default, which is how Junction behaves",
                    )
                )
            else:
                self.error(
                    el,
                    f"<{el.tag}> is not supported by Junction yet (only its Artemis default"
                    f" {show(spec.default)} is accepted, got {el.value!r})",
                )

    def _children(
        self, el: Element, table: Mapping, target: dict, context: str, *, extra=()
    ) -> list[Element]:
        """Dispatch the children of ``el`` through ``table``; return those named in ``extra``.

        Each table element may appear once; a repeat is an error naming the
        first occurrence.
        """
        seen: dict[str, Element] = {}
        rest = []
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag in extra:
                rest.append(child)
                continue
            spec = table.get(child.tag)
            if spec is None:
                self._unknown(child, el.tag, list(table) + list(extra))
                continue
            if child.tag in seen:
                self.error(
                    child,
                    f"<{child.tag}> is given twice in <{el.tag}> (first at line {seen[child.tag].line})",
                )
                continue
            seen[child.tag] = child
            if isinstance(spec, Section):
                getattr(self, spec.method)(child)
            elif isinstance(spec, Nested):
                getattr(self, spec.method)(child, target)
            else:
                self._scalar(child, spec, target, context)
        return rest

    def _path(self, p: str) -> str:
        return os.path.normpath(p if os.path.isabs(p) else os.path.join(self.base_dir, p))

