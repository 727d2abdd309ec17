"""What every management endpoint shares: JSON answers, and the check before a change.

:func:`respond` sets the status and JSON headers of an answer and returns its
body; :func:`authorize_change` is the one rule for the calls that change
something (router filters, queues, TLS reloads): with security enabled they
need HTTP Basic credentials of a user with ``manage`` on
:data:`MANAGEMENT_ADDRESS`.
"""

from __future__ import annotations

import enum
import json
import logging

__all__ = ["JSON_CONTENT_TYPE", "MANAGEMENT_ADDRESS", "REALM", "authorize_change", "encode_json", "respond"]

log = logging.getLogger("junction.management")

JSON_CONTENT_TYPE = b"application/json"
#: The address whose ``manage`` permission (``<security-settings>``) allows
#: changing a router over HTTP: Artemis's default ``management-address``.
MANAGEMENT_ADDRESS = "activemq.management"
REALM = "junction"


def _json_default(value):
    """Make the odd non-JSON value in a status dict serialisable instead of failing."""
    if isinstance(value, (set, frozenset)):
        # Enum members by name here too: json writes an IntEnum as its number.
        return sorted((v.name if isinstance(v, enum.Enum) else v for v in value), key=str)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def encode_json(payload) -> bytes:
    """*payload* as the API's JSON: indented, one trailing newline, odd values made text."""
    return json.dumps(payload, default=_json_default, indent=2, sort_keys=False).encode("utf-8") + b"\n"


def respond(request, code: int, payload) -> bytes:
    """Set status and JSON headers on *request* and return the encoded body."""
    request.setResponseCode(code)
    request.setHeader(b"Content-Type", JSON_CONTENT_TYPE)
    request.setHeader(b"Cache-Control", b"no-store")
    return encode_json(payload)


def _security(node):
    server = getattr(node, "server", None)
    return getattr(server, "security", None) if server is not None else getattr(node, "security", None)


def authorize_change(request, node) -> bytes | None:
    """None when the request may change a router, else the error answer already set up.

    Reading is open (the API listens on loopback unless configured
    otherwise); a change -- a filter set over REST or a Jolokia ``write`` --
    changes where clients go, so with security enabled it needs HTTP Basic
    credentials of a user from the users file whose roles have the
    ``manage`` permission on :data:`MANAGEMENT_ADDRESS`, as Artemis's
    management operations need ``manage`` on its management address.
    401 asks for credentials, 403 says the user may not.
    """
    security = _security(node)
    if security is None or not getattr(security, "enabled", False):
        return None
    user = request.getUser()
    user = user.decode("utf-8", "replace") if isinstance(user, bytes) else user
    password = request.getPassword()
    password = password.decode("utf-8", "replace") if isinstance(password, bytes) else password
    principal = security.authenticate(user, password) if user else None
    if principal is None:
        request.setHeader(b"WWW-Authenticate", f'Basic realm="{REALM}"'.encode())
        return respond(request, 401, {"error": "changing a connection router needs a user with the "
                                               f"manage permission on {MANAGEMENT_ADDRESS} (HTTP Basic)"})
    if not security.is_allowed(principal, "manage", MANAGEMENT_ADDRESS):
        log.warning("management API: user %s may not change connection routers (no manage permission on %s)",
                    principal.user, MANAGEMENT_ADDRESS)
        return respond(request, 403, {"error": f"user {principal.user} does not have the manage permission "
                                               f"on {MANAGEMENT_ADDRESS}"})
    log.info("management API: %s %s by user %s", request.method.decode(), request.uri.decode("utf-8", "replace"),
             principal.user)
    return None
