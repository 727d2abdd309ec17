"""The validated configuration of one node, as parsed from ``broker.xml``.

These frozen dataclasses are what the rest of Junction reads; nothing outside
``junction.config`` looks at XML.  Names, defaults and units are Artemis's
(``artemis-configuration.xsd``); durations are milliseconds and sizes bytes,
as in Artemis.  ``source`` fields carry ``(file, line)`` so later checks (for
example a router naming an unknown connector) can still report where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from junction.config.address_settings import (  # noqa: F401 - the model's address settings
    ADDRESS_FULL_POLICIES,
    ADDRESS_SETTINGS_DEFAULTS,
    AddressSettings,
)
from junction.model.message import RoutingType

Source = tuple[str, int]

#: Artemis permission types, in the order of the documentation.
PERMISSION_TYPES = (
    "send",
    "consume",
    "createAddress",
    "deleteAddress",
    "createDurableQueue",
    "deleteDurableQueue",
    "createNonDurableQueue",
    "deleteNonDurableQueue",
    "manage",
    "browse",
    "view",
    "edit",
)

#: Protocols a gateway pool's readiness probe can speak, as a connector's
#: ``probeProtocols=`` names them (Junction's; Artemis's pools probe over CORE).
PROBE_PROTOCOLS = ("AMQP", "STOMP")
#: The connector URL parameter that chooses them.
PROBE_PROTOCOLS_PARAM = "probeProtocols"


@dataclass(frozen=True)
class Acceptor:
    """One ``<acceptor name="..">tcp://host:port?params</acceptor>``.

    ``protocols`` is the upper-cased set from ``protocols=`` (empty means all
    the node supports).  ``params`` keeps every URL parameter as given, so a
    protocol adapter can read its own (``stompMaxFramePayloadLength``,
    ``heartBeatToConnectionTtlModifier`` ...); ``router`` is the connection
    router name when the acceptor is a gateway listener.
    """

    name: str
    scheme: str
    host: str
    port: int
    protocols: frozenset[str] = frozenset()
    params: dict = field(default_factory=dict)
    anycast_prefix: str | None = None
    multicast_prefix: str | None = None
    #: TLS settings when ``sslEnabled=true`` (:class:`junction.tls.server.ServerTLS`)
    tls: Any = None
    router: str | None = None
    source: Source = ("", 0)


@dataclass(frozen=True)
class Connector:
    """One ``<connector name="..">tcp://host:port?params</connector>``."""

    name: str
    scheme: str
    host: str
    port: int
    params: dict = field(default_factory=dict)
    source: Source = ("", 0)
    #: TLS settings when ``sslEnabled=true`` (:class:`junction.tls.client.ClientTLS`)
    tls: Any = None

    @property
    def probe_protocols(self) -> tuple[str, ...]:
        """``probeProtocols=``: the protocols a pool's readiness probe tries on this
        connector, in order (upper-cased, known ones, no repeats); ``()`` when not
        given (the probe's default order).  The loader rejects bad values in the
        file; a connector announced by another node is read the same, leniently."""
        text = (self.params or {}).get(PROBE_PROTOCOLS_PARAM)
        if not text:
            return ()
        names = []
        for name in str(text).split(","):
            name = name.strip().upper()
            if name in PROBE_PROTOCOLS and name not in names:
                names.append(name)
        return tuple(names)


@dataclass(frozen=True)
class QueueConfig:
    """A ``<queue>`` inside an ``<anycast>`` or ``<multicast>`` of an address."""

    name: str
    routing_type: RoutingType
    filter: str | None = None
    durable: bool = True
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    exclusive: bool = False
    user: str | None = None
    source: Source = ("", 0)
    #: The ``<queue>`` attributes the XML actually gave.  In Artemis an absent
    #: attribute means "take the matching address-settings default"
    #: (``default-max-consumers``, ``default-exclusive-queue``,
    #: ``default-purge-on-no-consumers`` ...), so a broker core that wants
    #: Artemis's exact behaviour applies the settings to the fields not named here.
    given: frozenset[str] = frozenset()
    #: Per-queue overrides of address settings; ``None`` = inherit from the
    #: matching ``<address-setting>`` (``last-value``/``last-value-key`` ->
    #: ``last_value_queue``/``default_last_value_key``, ``non-destructive``,
    #: ``group-rebalance``, ``group-rebalance-pause-dispatch``, ``group-buckets``,
    #: ``group-first-key``, ``ring-size``).
    last_value: bool | None = None
    last_value_key: str | None = None
    non_destructive: bool | None = None
    group_rebalance: bool | None = None
    group_buckets: int | None = None
    group_first_key: str | None = None
    ring_size: int | None = None
    group_rebalance_pause_dispatch: bool | None = None


@dataclass(frozen=True)
class AddressConfig:
    """An ``<address name="..">`` with the routing types it supports and its queues."""

    name: str
    routing_types: frozenset[RoutingType]
    queues: tuple[QueueConfig, ...] = ()
    source: Source = ("", 0)


@dataclass(frozen=True)
class SecuritySetting:
    """One ``<security-setting match="..">``: permission type -> role names."""

    match: str
    permissions: dict = field(default_factory=dict)  # str -> frozenset[str]
    source: Source = ("", 0)


@dataclass(frozen=True)
class WildcardAddresses:
    """``<wildcard-addresses>``: the characters of Artemis's wildcard syntax."""

    enabled: bool = True
    routing_enabled: bool = True
    delimiter: str = "."
    any_words: str = "#"
    single_word: str = "*"


@dataclass(frozen=True)
class Limits:
    """Per-connection protocol limits (Junction's own; see docs/configuration.md).

    Set in ``broker.xml`` under ``<junction><limits>``; an acceptor's
    ``stompMaxFramePayloadLength`` overrides the frame size for that acceptor.
    """

    max_frame_size: int = 10 * 1024 * 1024
    max_header_count: int = 1000
    max_header_length: int = 64 * 1024
    max_pending_frames: int = 1000
    connect_timeout: int = 10_000  # ms allowed before CONNECT


@dataclass(frozen=True)
class EventsConfig:
    """The node's event log (Junction's ``<junction><events>``; see docs/analytics.md).

    Present in ``broker.xml`` means on.  ``connection``, ``message`` and
    ``topology`` switch those categories of events; ``message_sample_rate``
    (0..1) keeps that share of messages, chosen by message id so that a kept
    message has all its events.  Files rotate at ``max_file_size`` bytes or
    ``max_file_age`` milliseconds; the oldest beyond ``max_files`` are deleted.
    ``max_spool_size`` bounds the bytes of events spooled for the node's event
    writer process and not yet written as lines (beyond, events are dropped).
    """

    directory: str = "data/events"
    connection: bool = True
    message: bool = True
    topology: bool = True
    message_sample_rate: float = 1.0
    max_file_size: int = 64 * 1024 * 1024
    max_file_age: int = 3_600_000
    max_files: int = 100
    max_spool_size: int = 1024 * 1024 * 1024

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(c for c in ("connection", "message", "topology") if getattr(self, c))


#: Artemis's connection-router key types (``KeyType``), in the xsd's order.
KEY_TYPES = ("CLIENT_ID", "SNI_HOST", "SOURCE_IP", "USER_NAME", "ROLE_NAME")

#: The policies Artemis ships (``PolicyFactoryResolver``).  More can be added
#: through the Python entry-point group :data:`POLICY_ENTRY_POINT_GROUP`.
BUILTIN_POLICIES = (
    "FIRST_ELEMENT",
    "ROUND_ROBIN",
    "CONSISTENT_HASH",
    "LEAST_CONNECTIONS",
    "CONSISTENT_HASH_MODULO",
)

#: Entry-point group where plug-in policies register (name = policy name).
POLICY_ENTRY_POINT_GROUP = "junction.policies"

#: The ``<property key=..>`` names each built-in policy takes.  ``HASH`` is
#: Junction's own (Artemis's CONSISTENT_HASH has no properties).
POLICY_PROPERTIES: dict[str, tuple[str, ...]] = {
    "FIRST_ELEMENT": (),
    "ROUND_ROBIN": (),
    "CONSISTENT_HASH": ("HASH",),
    "LEAST_CONNECTIONS": ("CONNECTION_COUNT_THRESHOLD",),
    "CONSISTENT_HASH_MODULO": ("MODULO",),
}

#: Values of CONSISTENT_HASH's ``HASH`` property.  ``MURMUR3`` (the default):
#: rendezvous (highest-random-weight) hashing of key and target node id with
#: MurmurHash3 -- even balance, and only the keys of a removed target move.
#: ``FNV1A``: Artemis's exact ring (one FNV-1a 32-bit point per node id,
#: greatest point <= hash(key), wrapping), for compatibility with Artemis
#: routers that must pick the same target for the same key.
HASH_FUNCTIONS = ("MURMUR3", "FNV1A")
DEFAULT_HASH = "MURMUR3"


@dataclass(frozen=True)
class PolicyConfig:
    """A router's ``<policy name="..">`` with its ``<property key=.. value=..>`` children.

    ``name`` is a built-in policy (:data:`BUILTIN_POLICIES`) or one registered
    in the ``junction.policies`` entry-point group.  ``properties`` keeps the
    ``(key, value)`` pairs in document order, values as strings (a policy
    parses its own); the loader has already checked the known ones (``MODULO``
    and ``CONNECTION_COUNT_THRESHOLD`` integers, ``HASH`` one of
    :data:`HASH_FUNCTIONS`, stored upper-case).  Defaults are not filled in:
    use :meth:`get`.
    """

    name: str
    properties: tuple[tuple[str, str], ...] = ()
    source: Source = ("", 0)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of property ``key`` (case-sensitive, as in Artemis), or ``default``."""
        for k, v in self.properties:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class CacheConfig:
    """A router's ``<cache>``: remembers key -> target node id.

    ``persisted``: keep the entries in the journal across restarts.
    ``timeout``: milliseconds an entry may stay unused before it is dropped
    (an idle timeout, Artemis's ``expireAfterAccess``); 0 = never.
    """

    persisted: bool = False
    timeout: int = 0
    source: Source = ("", 0)


@dataclass(frozen=True)
class PoolConfig:
    """A router's ``<pool>``: the targets a policy chooses from.

    ``username``/``password`` log in to the targets (to probe them); the
    password is left out of ``repr()``.
    ``check_period`` (ms, > 0): how often each target is probed.
    ``quorum_size`` (> 0): how many targets must be ready before the pool
    offers any; ``quorum_timeout`` (ms, >= 0): how long a routing decision
    waits for that quorum.  ``local_target_enabled``: the node's own broker
    core is a target too.  Exactly one source of targets is set:
    ``static_connectors`` (names of ``<connectors>``), ``discovery_group`` or
    ``cluster_connection`` (the last two are rejected by the loader until
    clustering exists).
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)  # kept out of logs
    check_period: int = 5000
    quorum_size: int = 1
    quorum_timeout: int = 3000
    local_target_enabled: bool = False
    static_connectors: tuple[str, ...] = ()
    discovery_group: str | None = None
    cluster_connection: str | None = None
    source: Source = ("", 0)


@dataclass(frozen=True)
class ConnectionRouterConfig:
    """One ``<connection-router name="..">`` (Artemis's ``ConnectionRouterConfiguration``).

    ``key_type`` (:data:`KEY_TYPES`, default ``SOURCE_IP``) says which
    property of a connection is its key.  ``key_filter`` is a regular
    expression whose first match (a search, group 0) becomes the key, or the
    key ``NULL`` when it does not match.  ``local_target_filter`` is a regular
    expression that must match the whole (filtered, policy-transformed) key
    for the connection to stay on the local broker core.  Both are checked to
    compile with Python's :mod:`re`.  Without ``policy`` or ``pool`` every
    connection whose key is not local is refused, as in Artemis.
    """

    name: str
    key_type: str = "SOURCE_IP"
    key_filter: str | None = None
    local_target_filter: str | None = None
    policy: PolicyConfig | None = None
    cache: CacheConfig | None = None
    pool: PoolConfig | None = None
    source: Source = ("", 0)


#: Artemis's default cluster credentials; a node that keeps them warns at every start.
DEFAULT_CLUSTER_USER = "ACTIVEMQ.CLUSTER.ADMIN.USER"
DEFAULT_CLUSTER_PASSWORD = "CHANGE ME!!"

MESSAGE_LOAD_BALANCING = ("OFF", "STRICT", "ON_DEMAND", "OFF_WITH_REDISTRIBUTION")


@dataclass(frozen=True)
class BroadcastGroupConfig:
    """One ``<broadcast-group name="..">`` (UDP only; JGroups is refused by the loader).

    Every ``broadcast_period`` milliseconds the node sends the connectors named by
    ``connector_refs`` to ``group_address:group_port``.
    """

    name: str
    group_address: str
    group_port: int
    local_bind_address: str | None = None
    #: -1: an anonymous port (Artemis's default)
    local_bind_port: int = -1
    broadcast_period: int = 2000
    connector_refs: tuple[str, ...] = ()
    source: Source = ("", 0)


@dataclass(frozen=True)
class DiscoveryGroupConfig:
    """One ``<discovery-group name="..">``: listens on a UDP group for broadcasts.

    An entry not refreshed for ``refresh_timeout`` milliseconds is dropped.
    ``initial_wait_timeout`` is how long a user of the group (a cluster
    connection, a gateway pool) waits for the first broadcasts before acting.
    """

    name: str
    group_address: str
    group_port: int
    local_bind_address: str | None = None
    refresh_timeout: int = 10_000
    initial_wait_timeout: int = 10_000
    source: Source = ("", 0)


@dataclass(frozen=True)
class ClusterConnectionConfig:
    """One ``<cluster-connection name="..">`` with Artemis's names, defaults and units (ms, bytes).

    ``address`` is Artemis's prefix list: comma-separated prefixes, ``!`` to
    exclude, empty for every address.  Exactly one of ``discovery_group`` and
    ``static_connectors`` says how peers are found.
    """

    name: str
    connector_ref: str
    address: str = ""
    check_period: int = 30_000
    connection_ttl: int = 60_000
    min_large_message_size: int = 102_400
    call_timeout: int = 30_000
    call_failover_timeout: int = -1
    retry_interval: int = 500
    retry_interval_multiplier: float = 1.0
    max_retry_interval: int = 2000
    initial_connect_attempts: int = -1
    reconnect_attempts: int = -1
    use_duplicate_detection: bool = True
    message_load_balancing: str = "ON_DEMAND"
    max_hops: int = 1
    confirmation_window_size: int = 1_048_576
    producer_window_size: int = -1
    notification_interval: int = 1000
    notification_attempts: int = 2
    discovery_group: str | None = None
    static_connectors: tuple[str, ...] = ()
    allow_direct_connections_only: bool = False
    #: Junction's: the connector of the master broker, which keeps the configuration change
    #: record of administrators' destinations and durable subscriptions (seed 003)
    master_broker: str | None = None
    source: Source = ("", 0)


@dataclass(frozen=True)
class ScaleDownConfig:
    """``<ha-policy><primary-only|live-only><scale-down>``: move every message to a peer on a graceful stop.

    ``group_name`` limits the peers to nodes with the same scale-down group;
    ``cluster_name`` picks the cluster connection whose peers are used when
    several exist (the seed's ``scale-down-clustername``); peers come from
    ``discovery_group`` or ``connectors`` when given, else from the cluster.
    """

    enabled: bool = True
    group_name: str | None = None
    cluster_name: str | None = None
    discovery_group: str | None = None
    connectors: tuple[str, ...] = ()
    commit_interval: int = -1
    source: Source = ("", 0)


@dataclass(frozen=True)
class BrokerConfig:
    """Everything one ``broker.xml`` describes for one node."""

    name: str = "localhost"
    persistence_enabled: bool = True
    journal_directory: str = "data/journal"
    bindings_directory: str = "data/bindings"
    paging_directory: str = "data/paging"
    large_messages_directory: str = "data/largemessages"  # sic: Artemis's default has no dash
    journal_file_size: int = 10 * 1024 * 1024
    journal_sync_transactional: bool = True
    journal_sync_non_transactional: bool = True
    #: nanoseconds, as Artemis; how long the journal waits to batch an fsync
    journal_buffer_timeout: int = 500_000
    id_cache_size: int = 20_000
    persist_id_cache: bool = True
    security_enabled: bool = True
    #: successful logins remembered (user, password hash), as Artemis's authentication cache
    authentication_cache_size: int = 1000
    #: permission decisions remembered
    authorization_cache_size: int = 1000
    #: milliseconds a remembered login stays valid (Artemis's security-invalidation-interval)
    security_invalidation_interval: int = 10_000
    #: milliseconds between checks of broker.xml (and the users and roles files) for
    #: changes to apply at run time; -1: never (Artemis's default is 5000)
    configuration_file_refresh_period: int = 5000
    acceptors: tuple[Acceptor, ...] = ()
    connectors: tuple[Connector, ...] = ()
    #: ``<connection-routers>``; an acceptor's ``router=`` names one of them.
    connection_routers: tuple[ConnectionRouterConfig, ...] = ()
    addresses: tuple[AddressConfig, ...] = ()
    address_settings: tuple[AddressSettings, ...] = ()
    security_settings: tuple[SecuritySetting, ...] = ()
    wildcard_addresses: WildcardAddresses = WildcardAddresses()
    limits: Limits = Limits()
    #: ``<junction><events>``: the event log, off (None) unless configured
    events: EventsConfig | None = None
    #: management HTTP API (Junction's ``<junction><management>``); Artemis's
    #: console listens on 8161, so the API does too by default.
    management_host: str = "127.0.0.1"
    management_port: int = 8161
    #: files beside broker.xml, as Artemis's login.config would name them
    users_file: str = "artemis-users.properties"
    roles_file: str = "artemis-roles.properties"
    #: certificate login (Artemis's TextFileCertificateLoginModule files), when set
    cert_users_file: str | None = None
    cert_roles_file: str | None = None
    #: the user anonymous connections run as when security allows it
    anonymous_user: str | None = None
    broadcast_groups: tuple[BroadcastGroupConfig, ...] = ()
    discovery_groups: tuple[DiscoveryGroupConfig, ...] = ()
    cluster_connections: tuple[ClusterConnectionConfig, ...] = ()
    cluster_user: str = DEFAULT_CLUSTER_USER
    cluster_password: str = field(default=DEFAULT_CLUSTER_PASSWORD, repr=False)
    #: where ``cluster-user``/``cluster-password`` were set (None: the defaults)
    cluster_credentials_source: Source | None = None
    #: ``<ha-policy>`` scale-down, when configured
    scale_down: ScaleDownConfig | None = None
    #: the file the config was read from; relative paths resolve against its folder
    config_path: str = ""
    base_dir: str = "."
    #: Elements accepted but without effect in Junction, as
    #: ``(element, line, reason)``: Java/JVM tuning knobs (``journal-type``,
    #: ``thread-pool-max-size`` ...) and Artemis settings given at their default
    #: value.  The node logs each once at start-up so nothing is silently ignored.
    ignored: tuple[tuple[str, int, str], ...] = ()
