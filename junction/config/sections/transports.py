"""``<acceptors>`` and ``<connectors>``: named URLs (:mod:`junction.config.urls`)."""

from __future__ import annotations

from junction.config import model
from junction.config.sections.base import ElementReader
from junction.config.suggest import suggest
from junction.config.urls import parse_probe_protocols, parse_protocols, parse_transport_url
from junction.config.xmlsource import Element
from junction.tls.client import check_client_tls, parse_client_tls
from junction.tls.server import check_server_tls, parse_server_tls


class Transports(ElementReader):
    """Reads ``<acceptors>`` into ``self.acceptors`` and ``<connectors>`` into ``self.connectors``."""

    def _named_list(self, el: Element, child_tag: str) -> list[tuple[Element, str]]:
        self._container(el)
        out = []
        for child in el.children:
            if not self._check_namespace(child):
                continue
            if child.tag != child_tag:
                self._unknown(child, el.tag, [child_tag])
                continue
            for ch in child.children:
                self.error(ch, f"<{child_tag}> takes a URL, not a child element <{ch.tag}>")
            for attr in child.attrib:
                if attr != "name":
                    self.error(
                        child, f"<{child_tag}> has no attribute {attr!r}{suggest(attr, ['name'])}"
                    )
            name = child.attrib.get("name", "").strip()
            if not name:
                self.error(child, f"<{child_tag}> needs a name attribute")
                continue
            if not child.value:
                self.error(child, f"{child_tag} {name!r} has no URL")
                continue
            out.append((child, name))
        return out

    def _acceptors(self, el: Element) -> None:
        for child, name in self._named_list(el, "acceptor"):
            if not self._ok(child):
                continue
            url, problems = parse_transport_url(child.value, "acceptor")
            for p in problems:
                self.error(child, f"acceptor {name!r}: {p}")
            if url is None:
                continue
            protocols: frozenset[str] = frozenset()
            ptext = url.params.get("protocols", url.params.get("protocol"))
            if ptext is not None:
                protocols, perrs = parse_protocols(ptext)
                for p in perrs:
                    self.error(child, f"acceptor {name!r}: {p}")
            router = url.params.get("router")
            if router is not None and not router:
                self.error(child, f"acceptor {name!r}: router= is empty")
                router = None
            tls, tls_problems = parse_server_tls(url.params, self._path)
            if tls is not None:
                tls_problems = check_server_tls(tls)
            for p in tls_problems:
                self.error(child, f"acceptor {name!r}: {p}")
            self._proxy_params(child, f"acceptor {name!r}", url.params, acceptor=True)
            self.acceptors.append(
                model.Acceptor(
                    name=name,
                    scheme=url.scheme,
                    host=url.host,
                    port=url.port,
                    protocols=protocols,
                    params=dict(url.params),
                    anycast_prefix=url.params.get("anycastPrefix"),
                    multicast_prefix=url.params.get("multicastPrefix"),
                    tls=tls,
                    router=router,
                    source=child.source,
                )
            )

    def _connectors(self, el: Element) -> None:
        for child, name in self._named_list(el, "connector"):
            if not self._ok(child):
                continue
            url, problems = parse_transport_url(child.value, "connector")
            for p in problems:
                self.error(child, f"connector {name!r}: {p}")
            if url is None:
                continue
            self._proxy_params(child, f"connector {name!r}", url.params, acceptor=False)
            probe_text = url.params.get(model.PROBE_PROTOCOLS_PARAM)
            if probe_text is not None:
                for p in parse_probe_protocols(probe_text)[1]:
                    self.error(child, f"connector {name!r}: {p}")
            tls, tls_problems = parse_client_tls(url.params, self._path)
            if tls is not None:
                tls_problems = check_client_tls(tls)
            for p in tls_problems:
                self.error(child, f"connector {name!r}: {p}")
            self.connectors.append(
                model.Connector(
                    name, url.scheme, url.host, url.port, dict(url.params), source=child.source, tls=tls
                )
            )

    def _proxy_params(self, child, what: str, params: dict, *, acceptor: bool) -> None:
        """PROXY protocol parameters that only make sense together (values are checked already)."""
        given = [k for k in ("proxyProtocolEnabled", "proxyEnabled") if k in params]
        if len(given) == 2:
            self.error(
                child,
                f"{what}: give proxyProtocolEnabled or its alias proxyEnabled, not both",
            )
        if acceptor and "proxyTrustedSources" in params:
            enabled = any(str(params[k]).strip().lower() == "true" for k in given)
            if not enabled:
                self.error(
                    child,
                    f"{what}: proxyTrustedSources has no effect without proxyProtocolEnabled=true",
                )

