"""Artemis's texts for the CORE exceptions a server answers a client with.

An EXCEPTION packet carries a code (:class:`~.errors.ExceptionType`) and a
message; Artemis's messages are its message bundle's, ``AMQ<id>: <text>``,
and the real client shows them to the application (JMS wraps them).  These
are the ones a CORE server writes while a connection is opened and routed
(``ActiveMQPacketHandler.handleCreateSession``, ``ActiveMQRoutingHandler``),
word for word, so the gateway and the broker core refuse a client as Artemis
does:

==============================  ====  =================================================
function                        code  when
==============================  ====  =================================================
:func:`incompatible_versions`   108   CREATESESSION of a version outside the compatible
                                      list; also a routed client older than 2.18 (131)
:func:`unable_to_validate_user` 105   a login the security manager refuses
:func:`router_not_ready`        222   the router has no target (``REFUSED_UNAVAILABLE``)
:func:`router_rejected`         119   the key is not the router's (``REFUSED_USE_ANOTHER``)
:func:`router_redirected`       222   after the DISCONNECT_V3 of a redirect
==============================  ====  =================================================

:func:`connector_text` is ``TransportConfiguration.toString()``, which the
redirect's text names the target by.
"""

from __future__ import annotations

from junction.protocols.core.values import TransportConfiguration

__all__ = [
    "connector_text",
    "incompatible_versions",
    "router_not_ready",
    "router_redirected",
    "router_rejected",
    "unable_to_validate_user",
]


def incompatible_versions() -> str:
    """AMQ229033, with INCOMPATIBLE_CLIENT_SERVER_VERSIONS (108)."""
    return "AMQ229033: Server and client versions incompatible"


def unable_to_validate_user(remote_address: str | None, user: str | None, certificate_subject: str | None) -> str:
    """AMQ229031, with SECURITY_EXCEPTION (105): a refused login.

    ``remote_address`` is the client's as Java prints a socket address
    (``/127.0.0.1:54321``); ``certificate_subject`` the subject DN of its
    verified certificate, ``unavailable`` without one.  A missing user or
    address is ``null``, as Java prints it.
    """
    address = "null" if remote_address is None else remote_address
    subject = "unavailable" if certificate_subject is None else certificate_subject
    return (
        f"AMQ229031: Unable to validate user from {address}. Username: {'null' if user is None else user}; "
        f"SSL certificate subject DN: {subject}"
    )


def router_not_ready(router: str) -> str:
    """AMQ229238, with ROUTING_EXCEPTION (222): ``REFUSED_UNAVAILABLE``."""
    return f"AMQ229238: Connection router {router} not ready"


def router_rejected(router: str) -> str:
    """AMQ229240, with REMOTE_DISCONNECT (119): ``REFUSED_USE_ANOTHER``."""
    return f"AMQ229240: Connection router {router} rejected the connection"


def router_redirected(router: str, connector: TransportConfiguration) -> str:
    """AMQ229237, with ROUTING_EXCEPTION (222): answers the CREATESESSION of a redirected client."""
    return f"AMQ229237: Connection router {router} redirected the connection to {connector_text(connector)}"


def _wildcards(text: str) -> str:
    return text.replace(".", "-")


def _java(value) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(getattr(value, "value", value))


def connector_text(connector: TransportConfiguration) -> str:
    """``TransportConfiguration.toString()``: name, factory and ``?k=v&..``, dots as dashes.

    ``TransportConfiguration(name=c1, factory=org-apache-...-NettyConnectorFactory)?host=h&port=1``
    (no space before the ``?``, nothing after the ``)`` without parameters);
    a parameter whose name contains ``password`` shows ``****``.
    """
    pairs = "&".join(
        f"{_wildcards(key)}={'****' if 'password' in key.lower() else _wildcards(_java(value))}"
        for key, value in connector.params
    )
    return (
        f"TransportConfiguration(name={connector.name}, factory={_wildcards(connector.factory_class_name)})"
        + (f"?{pairs}" if pairs else "")
    )
