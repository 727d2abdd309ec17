"""Load and validate a ``broker.xml`` (Artemis dialect) into :class:`~junction.config.model.BrokerConfig`.

The whole file is checked before anything starts and *every* problem is
reported at once, each with ``file:line`` (DESIGN.md principle 8; buildbot's
``ConfigErrors``, crossbar's ``checkconfig``).  :func:`load_config` either
returns a complete, frozen :class:`BrokerConfig` or raises
:class:`ConfigErrors`.

What an element means is data, in tables, not code.  The configuration is
read by concern, one module each:

* :mod:`junction.config.values` -- values and units (sizes, durations,
  booleans, enums);
* :mod:`junction.config.schema` -- the elements of each section and the model
  field each fills (its default is the model's); the address settings are
  their own table, :mod:`junction.config.address_settings`;
* :mod:`junction.config.params` and :mod:`junction.config.urls` -- acceptor
  and connector URLs, and the table of their parameters;
* :mod:`junction.config.unimplemented` -- the one table of what Junction does
  not implement (accepted and logged, accepted and warned, or refused);
* :mod:`junction.config.sections` -- one reader per section (core, addresses,
  address-settings, security-settings, cluster, routers, Junction's own), put
  together here as :class:`_Loader`;
* :mod:`junction.config.crosschecks` -- the checks across sections;
* :mod:`junction.config.substitute` -- ``${VAR}`` references.

An element name that is in no table is rejected with a "did you mean"
suggestion (:mod:`difflib`), as are unknown attributes and URL parameters.

Differences from Artemis, on purpose (Artemis is lax where a typo silently
changes behaviour):

* ``${VAR}`` with no default and no such environment variable is an error
  (Artemis substitutes an empty string).  Artemis reads Java system
  properties first and then the environment; Junction reads the environment.
* Booleans must be ``true`` or ``false`` (any case).  Artemis's
  ``Boolean.parseBoolean`` reads every other word, ``1`` and ``yes``
  included, as false.
* A second ``<address-setting>``/``<security-setting>`` with the same
  ``match``, a second acceptor on the same host and port, a URL parameter
  given twice, or a queue name used twice is an error, not "last one wins".
* ``artemis-roles.properties`` user lists are trimmed (see
  :mod:`junction.config.properties`).
* Connection routers: a ``<connector-ref>`` naming no ``<connector>`` is an
  error (Artemis logs a warning and leaves the target out); a pool with more
  than one source of targets is an error (Artemis uses the first of
  cluster-connection, discovery-group-ref, static-connectors); unknown or
  mistyped properties of the built-in policies are errors (Artemis ignores
  them, or fails with a NumberFormatException), and ``MODULO`` must be > 0
  (Artemis leaves keys unchanged for 0 or less).
* Clusters: a ``<cluster-connection>`` must give exactly one of
  ``<discovery-group-ref>`` and ``<static-connectors>``.  The xsd lets both
  be left out, but Junction needs a cluster connection to say how it finds
  its peers; giving both is an error too (Artemis uses the discovery group
  and ignores the connectors).  ``forward-when-no-consumers`` together with
  ``message-load-balancing`` is an error (Artemis lets the deprecated element
  win).  A ``<connector-ref>``, ``discovery-group-name`` or scale-down
  ``cluster-name`` that names nothing is an error (Artemis logs a warning and
  skips the cluster connection, or fails later).  Broadcast and discovery
  groups need ``group-address`` -- a literal IPv4 or IPv6 multicast address,
  not a host name -- and ``group-port`` (the xsd makes them optional for
  JGroups, which Junction refuses), and a broadcast group at least one
  ``connector-ref``.  ``cluster-connection-uri`` and masked ``ENC(...)``
  cluster passwords are refused.  On the lax side, ``local-bind-port`` 0
  and ``initial-wait-timeout`` 0 are accepted (Artemis wants -1 or > 0, and
  > 0).  Scale-down's ``cluster-name`` is Junction's (the xsd's
  ``scale-down`` has no such element; it stands for the
  ``scale-down-clustername`` of Artemis's ``ScaleDownConfiguration``), and
  an enabled scale-down with no way to find peers (no
  ``discovery-group-ref``, no ``connectors``, no cluster connection) is an
  error.

Junction's own element, ``<junction>`` inside ``<core>`` (Artemis's xsd does
not know it, so a file that uses it is Junction-only)::

    <junction>
       <!-- management HTTP API (default 127.0.0.1:8161, Artemis's console port) -->
       <management host="127.0.0.1" port="8161"/>
       <!-- users and roles files, relative to this file; anonymous connections
            run as anonymous-user and are refused when it is not set -->
       <security users-file="artemis-users.properties"
                 roles-file="artemis-roles.properties"
                 anonymous-user="guest"/>
       <!-- per-connection protocol limits (sizes take 10MiB/64KiB notation) -->
       <limits max-frame-size="10MiB" max-header-count="1000"
               max-header-length="64KiB" max-pending-frames="1000"
               connect-timeout="10000"/>
       <!-- the event log (off unless given): JSON Lines for `junction analyze` -->
       <events directory="data/events" connection="true" message="true"
               topology="true" message-sample-rate="1.0" max-file-size="64MiB"
               max-file-age="3600000" max-files="100"/>
    </junction>
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from junction.config import model
from junction.config.crosschecks import cross_check
from junction.config.errors import ConfigError, ConfigErrors
from junction.config.schema import CORE_ELEMENTS
from junction.config.sections.addresses import Addresses
from junction.config.sections.cluster import ClusterSections
from junction.config.sections.junction import JunctionSection
from junction.config.sections.routers import ConnectionRouters
from junction.config.sections.security import SecuritySettings
from junction.config.sections.transports import Transports
from junction.config.substitute import substitute
from junction.config.xmlsource import Element, XMLSourceError, find_core, parse_bytes, parse_file

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "load_certificate_users",
    "load_config",
    "load_user_store",
    "parse_config",
]


def load_config(
    path: str | os.PathLike, *, env: Mapping[str, str] | None = None
) -> model.BrokerConfig:
    """Read, validate and return the configuration in ``path`` (a broker.xml).

    ``env`` is where ``${VAR}`` references are looked up (default
    :data:`os.environ`).  Relative directories and file names in the config
    resolve against the folder of ``path``.  Raises :class:`ConfigErrors`
    listing every problem found.
    """
    file = os.fspath(path)
    try:
        root = parse_file(file)
    except XMLSourceError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    base_dir = os.path.dirname(os.path.abspath(file))
    return _Loader(file, base_dir, os.environ if env is None else env).load(root)


def parse_config(
    text: str | bytes,
    *,
    file: str = "<string>",
    base_dir: str = ".",
    env: Mapping[str, str] | None = None,
) -> model.BrokerConfig:
    """:func:`load_config` for a document in memory (tests, generated configs)."""
    try:
        root = parse_bytes(text.encode("utf-8") if isinstance(text, str) else text, file)
    except XMLSourceError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    return _Loader(file, os.path.abspath(base_dir), os.environ if env is None else env).load(root)


def load_certificate_users(cfg: model.BrokerConfig):
    """The certificate users a config names (``<junction><security cert-users-file>``), or None.

    Problems are :class:`ConfigErrors` with file and line, as for :func:`load_user_store`.
    """
    if not cfg.cert_users_file:
        return None
    from junction.config.certusers import CertificateUsers
    from junction.config.properties import PropertiesError

    try:
        return CertificateUsers.load(cfg.cert_users_file, cfg.cert_roles_file)
    except PropertiesError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    except OSError as e:
        raise ConfigErrors(
            [ConfigError(e.filename or cfg.cert_users_file, 0, f"cannot read the certificate users file: {e.strerror or e}")]
        ) from None


def load_user_store(cfg: model.BrokerConfig):
    """Load the users and roles files a config names, as a :class:`~junction.config.properties.UserStore`.

    Kept apart from :func:`load_config` so a config can be checked (and
    tested) without its users file; a node with ``security-enabled`` calls
    this at start-up, before listening.  Problems are :class:`ConfigErrors`
    with file and line: a missing or unreadable users file, a malformed
    ``ENC(...)`` hash, or an ``anonymous-user`` that is not in the users file.
    """
    from junction.config.properties import PropertiesError, UserStore

    try:
        store = UserStore.load(cfg.users_file, cfg.roles_file)
    except PropertiesError as e:
        raise ConfigErrors([ConfigError(e.file, e.line, e.message)]) from None
    except OSError as e:
        raise ConfigErrors(
            [
                ConfigError(
                    e.filename or cfg.users_file,
                    0,
                    f"cannot read the users file: {e.strerror or e}",
                )
            ]
        ) from None
    if cfg.anonymous_user is not None and cfg.anonymous_user not in store.users:
        raise ConfigErrors(
            [
                ConfigError(
                    cfg.config_path,
                    0,
                    f"anonymous-user {cfg.anonymous_user!r} is not a user in {cfg.users_file}",
                )
            ]
        )
    return store


class _Loader(Transports, Addresses, SecuritySettings, JunctionSection, ConnectionRouters, ClusterSections):
    """One load: collects errors and ignored elements while building the model.

    Each section's reader is a mixin (:mod:`junction.config.sections`); this
    class holds what they build, drives them from ``<core>`` through
    :data:`~junction.config.schema.CORE_ELEMENTS`, runs the cross-checks and
    builds the :class:`~junction.config.model.BrokerConfig`.
    """

    def __init__(self, file: str, base_dir: str, env: Mapping[str, str]):
        super().__init__(file, base_dir, env)
        self.limits: dict[str, Any] = {}
        #: ``<junction><events>`` attributes; None while the element is absent
        self.events: dict[str, Any] | None = None
        self.acceptors: list[model.Acceptor] = []
        self.connectors: list[model.Connector] = []
        self.addresses: list[model.AddressConfig] = []
        self.address_settings: list[model.AddressSettings] = []
        self.security_settings: list[model.SecuritySetting] = []
        self.wildcard: dict[str, Any] = {}
        self.junction_lines: dict[str, int] = {}
        self.routers: list[model.ConnectionRouterConfig] = []
        self.broadcast_groups: list[model.BroadcastGroupConfig] = []
        self.discovery_groups: list[model.DiscoveryGroupConfig] = []
        self.cluster_connections: list[model.ClusterConnectionConfig] = []
        #: References checked once the whole file is read, as (who refers,
        #: name, referring element): connectors (router pools, broadcast
        #: groups, cluster connections, scale-down), discovery groups and
        #: cluster connections (scale-down's cluster-name).
        self.connector_refs: list[tuple[str, str, Element]] = []
        self.discovery_refs: list[tuple[str, str, Element]] = []
        self.cluster_refs: list[tuple[str, str, Element]] = []
        self._scale_down_el: Element | None = None
        self._router = ""  # the router being read, for messages
        self._cluster = ""  # the cluster connection being read, for messages
        self._policies: tuple[str, ...] | None = None

    # -- driver --------------------------------------------------------------------
    def load(self, root: Element) -> model.BrokerConfig:
        self._substitute(root)
        core, problems = find_core(root)
        for el, msg in problems:
            self.error(el, msg)
        if core is not None:
            self._core(core)
        cross_check(self)
        if self.errors:
            self.errors.sort(key=lambda e: (e.file, e.line))
            raise ConfigErrors(self.errors)
        return self._build()

    def _substitute(self, root: Element) -> None:
        for el in root.iter():
            if "${" in el.text:
                el.text, problems = substitute(el.text, self.env)
                for p in problems:
                    self.error(el, f"<{el.tag}>: {p}")
                if problems:
                    self.tainted.add(id(el))
            for key, val in list(el.attrib.items()):
                if "${" in val:
                    el.attrib[key], problems = substitute(val, self.env)
                    for p in problems:
                        self.error(el, f"<{el.tag} {key}=...>: {p}")
                    if problems:
                        self.tainted.add(id(el))

    # -- <core> ----------------------------------------------------------------------
    def _core(self, core: Element) -> None:
        self._container(core)
        self._children(core, CORE_ELEMENTS, self.values, "")

    # -- building the model ----------------------------------------------------------------
    def _build(self) -> model.BrokerConfig:
        v = dict(self.values)
        defaults = model.BrokerConfig()
        for key in (
            "journal_directory",
            "bindings_directory",
            "paging_directory",
            "large_messages_directory",
            "users_file",
            "roles_file",
        ):
            v[key] = self._path(v.get(key, getattr(defaults, key)))
        for key in ("cert_users_file", "cert_roles_file"):
            if v.get(key):
                v[key] = self._path(v[key])
        wild = dict(self.wildcard)
        if "wildcard_routing_enabled" in v:
            top = v.pop("wildcard_routing_enabled")
            wild.setdefault("routing_enabled", top)
        if "routing_enabled" in wild:
            wild["enabled"] = wild["routing_enabled"]
        return replace(
            defaults,
            **v,
            acceptors=tuple(self.acceptors),
            connectors=tuple(self.connectors),
            connection_routers=tuple(self.routers),
            broadcast_groups=tuple(self.broadcast_groups),
            discovery_groups=tuple(self.discovery_groups),
            cluster_connections=tuple(self.cluster_connections),
            addresses=tuple(self.addresses),
            address_settings=tuple(self.address_settings),
            security_settings=tuple(self.security_settings),
            wildcard_addresses=model.WildcardAddresses(**wild),
            limits=model.Limits(**self.limits),
            events=None if self.events is None else model.EventsConfig(**self.events),
            config_path=os.path.abspath(self.file) if not self.file.startswith("<") else self.file,
            base_dir=self.base_dir,
            ignored=tuple(self.ignored),
        )

