"""``POST /api/queues`` and ``DELETE /api/queues/NAME``: an administrator's queues.

Artemis's ``createQueue`` / ``destroyQueue`` management operations as REST.  A
queue made this way is an administrator's destination: in a cluster it is
created on every node, and with a master broker its creation and destruction
are recorded in the configuration change record -- and refused (503) while
the master is unreachable.  Like every change through the API, it needs, when
security is on, HTTP Basic credentials of a user with ``manage`` on
``activemq.management`` (401/403 otherwise).

``POST /api/queues`` takes a JSON object: ``name`` (required), ``address``
(default: the name), ``routing_type`` (``ANYCAST``, the default, or
``MULTICAST``), ``filter`` and ``durable`` (default true).  Answers 201 with
the queue, 400 for a bad request, 409 when the queue exists, 503 when the
cluster's master broker is unreachable.  ``DELETE /api/queues/NAME`` answers
200, 404 when there is no such queue, 503 as above.  A queue's message groups are
under ``/api/queues/NAME/groups`` (:mod:`junction.management.queue_groups`).
"""

from __future__ import annotations

import json

from twisted.web.resource import Resource

from junction.management.http import authorize_change, respond
from junction.management.queue_groups import render_groups
from junction.model import errors

#: the largest request body read
MAX_BODY_BYTES = 64 * 1024


class QueuesResource(Resource):
    def __init__(self, node):
        super().__init__()
        self.node = node

    def getChild(self, path, request):
        if path == b"" and not request.postpath:
            return self
        return _QueueResource(self.node, path.decode("utf-8", "replace"))

    def render_GET(self, request):
        status = self.node.status()
        return respond(request, 200, status.get("queues", []))

    def render_POST(self, request):
        denied = authorize_change(request, self.node)
        if denied is not None:
            return denied
        body = request.content.read(MAX_BODY_BYTES + 1) if request.content is not None else b""
        if len(body) > MAX_BODY_BYTES:
            return respond(request, 413, {"error": f"the request body is over {MAX_BODY_BYTES} bytes"})
        try:
            spec = json.loads(body or b"{}")
        except ValueError as exc:
            return respond(request, 400, {"error": f"the request body is not JSON: {exc}"})
        problem = _check_spec(spec)
        if problem:
            return respond(request, 400, {"error": problem})
        try:
            created = self.node.create_admin_queue(
                spec["name"],
                address=spec.get("address") or spec["name"],
                routing_type=(spec.get("routing_type") or "ANYCAST").upper(),
                filter=spec.get("filter"),
                durable=spec.get("durable", True),
            )
        except errors.QueueExistsError as exc:
            return respond(request, 409, {"error": str(exc)})
        except errors.ClusterConfigurationUnavailableError as exc:
            return respond(request, 503, {"error": str(exc)})
        except errors.BrokerError as exc:
            return respond(request, 400, {"error": str(exc)})
        return respond(request, 201, created)


def _check_spec(spec) -> str | None:
    if not isinstance(spec, dict):
        return "the request body must be a JSON object"
    unknown = set(spec) - {"name", "address", "routing_type", "filter", "durable"}
    if unknown:
        return f"unknown keys {sorted(unknown)}: a queue has name, address, routing_type, filter, durable"
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        return "name is required (a non-empty string)"
    for key in ("address", "filter"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            return f"{key} must be a string"
    if (spec.get("routing_type") or "ANYCAST").upper() not in ("ANYCAST", "MULTICAST"):
        return "routing_type must be ANYCAST or MULTICAST"
    if not isinstance(spec.get("durable", True), bool):
        return "durable must be true or false"
    return None


class _QueueResource(Resource):
    isLeaf = True

    def __init__(self, node, name: str):
        super().__init__()
        self.node = node
        self.name = name

    def render(self, request):
        rest = [segment.decode("utf-8", "replace") for segment in request.postpath]
        if rest and rest[0] == "groups":
            return render_groups(request, self.node, self.name, rest[1:])
        if rest and rest != [""]:
            return respond(request, 404, {"error": f"no such resource under queue {self.name}"})
        return super().render(request)

    def render_DELETE(self, request):
        denied = authorize_change(request, self.node)
        if denied is not None:
            return denied
        try:
            self.node.delete_admin_queue(self.name)
        except errors.NonExistentQueueError as exc:
            return respond(request, 404, {"error": str(exc)})
        except errors.ClusterConfigurationUnavailableError as exc:
            return respond(request, 503, {"error": str(exc)})
        return respond(request, 200, {"deleted": self.name})

    def render_GET(self, request):
        for queue in self.node.status().get("queues", []):
            if queue["name"] == self.name:
                return respond(request, 200, queue)
        return respond(request, 404, {"error": f"queue {self.name} does not exist"})
