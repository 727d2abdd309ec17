"""``<security-settings>``: permissions per address match."""

from __future__ import annotations

from junction.config import model
from junction.config.sections.base import ElementReader
from junction.config.suggest import suggest
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.xmlsource import Element


class SecuritySettings(ElementReader):
    """Reads ``<security-settings>`` into ``self.security_settings``."""

    #: Artemis's older permission names and the ones they stand for
    _PERMISSION_ALIASES = {
        "createTempQueue": "createNonDurableQueue",
        "deleteTempQueue": "deleteNonDurableQueue",
    }

    def _security_settings(self, el: Element) -> None:
        self._container(el)
        seen: dict[str, Element] = {}
        for child in el.children:
            if not self._check_namespace(child):
                continue
            unsupported = UNIMPLEMENTED["security-settings"].get(child.tag)
            if unsupported is not None:
                self._unsupported(child, unsupported)
                continue
            if child.tag != "security-setting":
                self._unknown(
                    child,
                    "security-settings",
                    ["security-setting", *UNIMPLEMENTED["security-settings"]],
                )
                continue
            self._container(child, ("match",))
            match = (child.attrib.get("match") or "").strip()
            if not match:
                self.error(
                    child,
                    "<security-setting> needs a match attribute (an address or wildcard such as #)",
                )
                continue
            if match in seen:
                self.error(
                    child,
                    f"a second <security-setting match={match!r}> (the first is at line {seen[match].line}); merge them",
                )
                continue
            seen[match] = child
            perms: dict[str, set[str]] = {}
            for p in child.children:
                if not self._check_namespace(p):
                    continue
                if p.tag != "permission":
                    self._unknown(p, "security-setting", ["permission"])
                    continue
                for ch in p.children:
                    self.error(ch, f"<permission> takes attributes, not a child element <{ch.tag}>")
                for attr in p.attrib:
                    if attr not in ("type", "roles"):
                        self.error(
                            p,
                            f"<permission> has no attribute {attr!r}{suggest(attr, ['type', 'roles'])}",
                        )
                ptype = (p.attrib.get("type") or "").strip()
                roles_text = p.attrib.get("roles")
                if not ptype:
                    self.error(
                        p,
                        "<permission> needs a type attribute: one of "
                        + ", ".join(model.PERMISSION_TYPES),
                    )
                    continue
                ptype = self._PERMISSION_ALIASES.get(ptype, ptype)
                if ptype not in model.PERMISSION_TYPES:
                    self.error(
                        p,
                        f"unknown permission type {ptype!r}{suggest(ptype, model.PERMISSION_TYPES)}"
                        + (
                            ""
                            if suggest(ptype, model.PERMISSION_TYPES)
                            else "; expected one of " + ", ".join(model.PERMISSION_TYPES)
                        ),
                    )
                    continue
                if roles_text is None:
                    self.error(
                        p,
                        f"<permission type={ptype!r}> needs a roles attribute (comma-separated role names)",
                    )
                    continue
                roles = {r.strip() for r in roles_text.split(",") if r.strip()}
                if not roles:
                    self.error(p, f"<permission type={ptype!r}> names no roles")
                    continue
                perms.setdefault(ptype, set()).update(roles)
            self.security_settings.append(
                model.SecuritySetting(
                    match, {k: frozenset(v) for k, v in perms.items()}, source=child.source
                )
            )

