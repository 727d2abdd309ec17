"""``/api/tls``: the certificates each TLS acceptor serves, and ``POST /api/tls/reload``.

A reload reads every TLS acceptor's and connector's stores again
(``Node.reload_tls``, also run on ``SIGHUP``): new connections get the new
certificates, open ones keep theirs.  Like a router change it needs, when
security is on, HTTP Basic credentials of a user with ``manage`` on
``activemq.management`` (401/403 otherwise).
"""

from __future__ import annotations

import logging

from twisted.web.resource import Resource

from junction.management.http import authorize_change, respond

log = logging.getLogger("junction.management")


class TLSResource(Resource):
    """``GET /api/tls``: each TLS acceptor's certificates and handshake counters."""

    def __init__(self, node):
        super().__init__()
        self.node = node
        self.putChild(b"reload", TLSReloadResource(node))

    def getChild(self, path, request):
        if path == b"" and not request.postpath:
            return self
        return super().getChild(path, request)

    def render_GET(self, request):
        factories = getattr(self.node, "tls_factories", {}) or {}
        return respond(request, 200, {name: f.status() for name, f in sorted(factories.items())})


class TLSReloadResource(Resource):
    """``POST /api/tls/reload``: reload certificates (see the module docstring)."""

    isLeaf = True

    def __init__(self, node):
        super().__init__()
        self.node = node

    def render_POST(self, request):
        denied = authorize_change(request, self.node)
        if denied is not None:
            return denied
        result = self.node.reload_tls()
        return respond(request, 200 if not result["failed"] else 500, result)

    def render_GET(self, request):
        request.setHeader(b"Allow", b"POST")
        return respond(request, 405, {"error": "use POST to reload the TLS certificates"})
