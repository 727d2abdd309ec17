"""The schema of ``broker.xml``: element name -> what it is, section by section.

What an element means is data, in the tables below, not code.  Each table maps
the children of one element to a spec of :mod:`junction.config.specs`: a
:class:`~junction.config.specs.Value` read into a field of the model class
the table is bound to (:class:`~junction.config.specs.Elements`; the field's
default is Artemis's, in :mod:`junction.config.model`), or a
:class:`~junction.config.specs.Section`/:class:`~junction.config.specs.Nested`
read by the loader.  The rows of what Junction does not implement (tuning
knobs, features it lacks) come from :data:`junction.config.unimplemented.UNIMPLEMENTED`,
and the address settings from :data:`junction.config.address_settings.ADDRESS_SETTINGS`.

* :data:`CORE_ELEMENTS` -- every child of ``<core>`` that Artemis's
  ``artemis-configuration.xsd`` knows (plus a few older ones Artemis still
  parses), and Junction's ``<junction>``;
* :data:`ADDRESS_SETTING_ELEMENTS`, :data:`QUEUE_ATTRIBUTES`,
  :data:`WILDCARD_ELEMENTS`, :data:`JUNCTION_ELEMENTS`,
  :data:`ROUTER_ELEMENTS`, :data:`CACHE_ELEMENTS`, :data:`POOL_ELEMENTS` --
  the inside of ``<address-setting>``, ``<queue>``, ``<wildcard-addresses>``,
  ``<junction>``, ``<connection-router>`` and its ``<cache>`` and ``<pool>``;
* :data:`BROADCAST_GROUP_ELEMENTS`, :data:`DISCOVERY_GROUP_ELEMENTS`,
  :data:`CLUSTER_CONNECTION_ELEMENTS`, :data:`HA_POLICY_ELEMENTS`,
  :data:`PRIMARY_ONLY_ELEMENTS`, :data:`SCALE_DOWN_ELEMENTS` -- the cluster
  sections: ``<broadcast-group>``, ``<discovery-group>``,
  ``<cluster-connection>``, ``<ha-policy>``, its ``<primary-only>`` (or
  ``<live-only>``) and their ``<scale-down>``.

An element name that is in no table is rejected with a "did you mean"
suggestion (:mod:`junction.config.suggest`).
"""

from __future__ import annotations

from importlib import metadata

from junction.config import model
from junction.config.address_settings import ADDRESS_SETTINGS
from junction.config.specs import Elements, Nested, Section, Value, Warned
from junction.config.unimplemented import UNIMPLEMENTED
from junction.config.values import (
    JAVA_INT,
    JAVA_LONG,
    Parser,
    any_text,
    boolean,
    character,
    choice,
    integer,
    multicast_address,
    port_number,
    real,
    regex,
    size,
    string,
    text_value,
)

__all__ = [
    "ADDRESS_SETTING_ELEMENTS",
    "BROADCAST_GROUP_ELEMENTS",
    "CACHE_ELEMENTS",
    "CLUSTER_CONNECTION_ELEMENTS",
    "CORE_ELEMENTS",
    "DISCOVERY_GROUP_ELEMENTS",
    "HA_POLICY_ELEMENTS",
    "JUNCTION_ELEMENTS",
    "POLICY_PROPERTY_TYPES",
    "POOL_ELEMENTS",
    "PRIMARY_ONLY_ELEMENTS",
    "QUEUE_ATTRIBUTES",
    "QUEUE_ELEMENTS",
    "REQUIRED_POLICY_PROPERTIES",
    "ROUTER_ELEMENTS",
    "SCALE_DOWN_ELEMENTS",
    "WILDCARD_ELEMENTS",
    "registered_policies",
]


def _table(model_class: type | None, where: str, implemented: dict) -> Elements:
    """``implemented`` followed by the not-implemented rows of ``where`` that
    decide how an element is read (the :class:`Warned` ones are model values
    already, in ``implemented``)."""
    rows = dict(implemented)
    for name, spec in UNIMPLEMENTED.get(where, {}).items():
        if not isinstance(spec, Warned):
            rows[name] = spec
    return Elements(model_class, rows)


#: Every element Artemis's xsd allows in ``<core>`` (plus a few older ones
#: Artemis still parses), and ``<junction>``.
CORE_ELEMENTS = _table(
    model.BrokerConfig,
    "core",
    {
        # -- read into BrokerConfig ------------------------------------------------------
        "name": Value("name", text_value),
        "persistence-enabled": Value("persistence_enabled", boolean),
        "journal-directory": Value("journal_directory", text_value),
        "bindings-directory": Value("bindings_directory", text_value),
        "paging-directory": Value("paging_directory", text_value),
        "large-messages-directory": Value("large_messages_directory", text_value),
        "journal-file-size": Value("journal_file_size", size(1, JAVA_INT[1])),
        "journal-sync-transactional": Value("journal_sync_transactional", boolean),
        "journal-sync-non-transactional": Value("journal_sync_non_transactional", boolean),
        "journal-buffer-timeout": Value("journal_buffer_timeout", integer(0)),
        "id-cache-size": Value("id_cache_size", integer(0)),
        "persist-id-cache": Value("persist_id_cache", boolean),
        "security-enabled": Value("security_enabled", boolean),
        "security-invalidation-interval": Value("security_invalidation_interval", integer(0, long=True)),
        "authentication-cache-size": Value("authentication_cache_size", integer(0, long=True)),
        "authorization-cache-size": Value("authorization_cache_size", integer(0, long=True)),
        "wild-card-routing-enabled": Value("wildcard_routing_enabled", boolean),
        "configuration-file-refresh-period": Value(
            "configuration_file_refresh_period", integer(1, minus_one=True, long=True)
        ),
        "acceptors": Section("_acceptors"),
        "connectors": Section("_connectors"),
        "addresses": Section("_addresses"),
        "address-settings": Section("_address_settings"),
        "security-settings": Section("_security_settings"),
        "wildcard-addresses": Section("_wildcard_addresses"),
        "connection-routers": Section("_connection_routers"),
        "broadcast-groups": Section("_broadcast_groups"),
        "discovery-groups": Section("_discovery_groups"),
        "cluster-connections": Section("_cluster_connections"),
        "cluster-user": Section("_cluster_user"),
        "cluster-password": Section("_cluster_password"),
        "ha-policy": Section("_ha_policy"),
        "junction": Section("_junction"),
    },
)

#: Children of ``<address-setting>``: :data:`~junction.config.address_settings.ADDRESS_SETTINGS`,
#: then what Junction does not implement.
ADDRESS_SETTING_ELEMENTS = _table(
    model.AddressSettings,
    "address-setting",
    {row.element: Value(row.name, row.parse) for row in ADDRESS_SETTINGS},
)

#: Attributes of ``<queue>`` (inside ``<anycast>``/``<multicast>``).  ``Value``
#: attrs are :class:`~junction.config.model.QueueConfig` fields.
QUEUE_ATTRIBUTES = _table(
    model.QueueConfig,
    "queue",
    {
        "max-consumers": Value("max_consumers", integer(0, minus_one=True)),
        "purge-on-no-consumers": Value("purge_on_no_consumers", boolean),
        "exclusive": Value("exclusive", boolean),
        "last-value": Value("last_value", boolean),
        "last-value-key": Value("last_value_key", text_value),
        "non-destructive": Value("non_destructive", boolean),
        "group-rebalance": Value("group_rebalance", boolean),
        "group-rebalance-pause-dispatch": Value("group_rebalance_pause_dispatch", boolean),
        "group-buckets": Value("group_buckets", integer(0, minus_one=True)),
        "group-first-key": Value("group_first_key", text_value),
        "ring-size": Value("ring_size", integer(0, minus_one=True, long=True)),
    },
)

#: Child elements of ``<queue>``.
QUEUE_ELEMENTS = ("filter", "durable", "user")

#: Children of ``<wildcard-addresses>`` -> :class:`~junction.config.model.WildcardAddresses` fields.
WILDCARD_ELEMENTS = Elements(
    model.WildcardAddresses,
    {
        "routing-enabled": Value("routing_enabled", boolean),
        "enabled": Value("routing_enabled", boolean),  # deprecated spelling of routing-enabled
        "delimiter": Value("delimiter", character),
        "any-words": Value("any_words", character),
        "single-word": Value("single_word", character),
    },
)

#: Children of ``<junction>`` and their attributes: attribute -> (BrokerConfig
#: or Limits field, parser).  ``limits`` fields go to :class:`~junction.config.model.Limits`.
JUNCTION_ELEMENTS: dict[str, dict[str, tuple[str, Parser]]] = {
    "management": {
        "host": ("management_host", text_value),
        "port": ("management_port", port_number),
    },
    "security": {
        "users-file": ("users_file", text_value),
        "roles-file": ("roles_file", text_value),
        "anonymous-user": ("anonymous_user", text_value),
        "cert-users-file": ("cert_users_file", text_value),
        "cert-roles-file": ("cert_roles_file", text_value),
    },
    "limits": {
        "max-frame-size": ("max_frame_size", size(1, JAVA_INT[1])),
        "max-header-count": ("max_header_count", integer(1)),
        "max-header-length": ("max_header_length", size(1, JAVA_INT[1])),
        "max-pending-frames": ("max_pending_frames", integer(1)),
        "connect-timeout": ("connect_timeout", integer(1)),
    },
    "events": {
        "directory": ("directory", string()),
        "connection": ("connection", boolean),
        "message": ("message", boolean),
        "topology": ("topology", boolean),
        "message-sample-rate": ("message_sample_rate", real(0.0, 1.0)),
        "max-file-size": ("max_file_size", size(4096, JAVA_LONG[1])),
        "max-file-age": ("max_file_age", integer(1000)),
        "max-files": ("max_files", integer(1)),
        "max-spool-size": ("max_spool_size", size(1024 * 1024, JAVA_LONG[1])),
    },
}

# -- connection routers ----------------------------------------------------------------

#: Children of ``<connection-router>`` (artemis-configuration.xsd
#: ``connectionRouterType``); ``Value`` attrs are
#: :class:`~junction.config.model.ConnectionRouterConfig` fields.  ``cache``,
#: ``policy`` and ``pool`` are containers read by the loader.  The xsd's
#: sequence is ``maxOccurs="unbounded"``, so the order of the children is free;
#: each may appear once.
ROUTER_ELEMENTS = _table(
    model.ConnectionRouterConfig,
    "connection-router",
    {
        "key-type": Value("key_type", choice(*model.KEY_TYPES)),
        "key-filter": Value("key_filter", regex),
        "local-target-filter": Value("local_target_filter", regex),
        "cache": Nested("_router_cache"),
        "policy": Nested("_router_policy"),
        "pool": Nested("_router_pool"),
    },
)

#: Children of a router's ``<cache>`` -> :class:`~junction.config.model.CacheConfig`
#: fields.  Artemis reads ``timeout`` as an ``int`` >= 0 (the xsd's default of
#: -1 is not what the broker uses: its default is 0 = never expire).
CACHE_ELEMENTS = Elements(
    model.CacheConfig,
    {
        "persisted": Value("persisted", boolean),
        "timeout": Value("timeout", integer(0)),
    },
)

#: Children of a router's ``<pool>`` -> :class:`~junction.config.model.PoolConfig`
#: fields (Artemis ``parsePoolConfiguration``: ``int`` values, check-period
#: > 0, quorum-size > 0, quorum-timeout >= 0).  ``static-connectors`` and
#: ``discovery-group-ref`` are containers read by the loader.
POOL_ELEMENTS = Elements(
    model.PoolConfig,
    {
        "username": Value("username", text_value),
        "password": Value("password", any_text),
        "check-period": Value("check_period", integer(1)),
        "quorum-size": Value("quorum_size", integer(1)),
        "quorum-timeout": Value("quorum_timeout", integer(0)),
        "local-target-enabled": Value("local_target_enabled", boolean),
        "cluster-connection": Nested("_pool_cluster_connection"),
        "static-connectors": Nested("_pool_static_connectors"),
        "discovery-group-ref": Nested("_pool_discovery_group_ref"),
    },
)

#: Checks of the built-in policies' known properties (values stay strings).
POLICY_PROPERTY_TYPES: dict[str, Parser] = {
    "MODULO": integer(1),
    "CONNECTION_COUNT_THRESHOLD": integer(0),
    "HASH": choice(*model.HASH_FUNCTIONS),
}

#: Properties a built-in policy cannot do without (Artemis's
#: CONSISTENT_HASH_MODULO fails to deploy without MODULO).
REQUIRED_POLICY_PROPERTIES: dict[str, tuple[str, ...]] = {
    "CONSISTENT_HASH_MODULO": ("MODULO",),
}


# -- clusters -----------------------------------------------------------------------

#: Children of ``<broadcast-group>`` (xsd ``broadcastGroupType``) ->
#: :class:`~junction.config.model.BroadcastGroupConfig` fields.  Artemis
#: reads them in any order.  ``connector-ref`` is not here: it repeats (one
#: per connector to announce) and is read by the loader into ``connector_refs``.
BROADCAST_GROUP_ELEMENTS = _table(
    model.BroadcastGroupConfig,
    "broadcast-group",
    {
        "local-bind-address": Value("local_bind_address", text_value),
        "local-bind-port": Value("local_bind_port", integer(0, 65535, minus_one=True)),
        "group-address": Value("group_address", multicast_address),
        "group-port": Value("group_port", integer(1, 65535)),
        "broadcast-period": Value("broadcast_period", integer(1, long=True)),
    },
)

#: Children of ``<discovery-group>`` (xsd ``discoveryGroupType``) ->
#: :class:`~junction.config.model.DiscoveryGroupConfig` fields.
#: ``initial-wait-timeout`` may be 0 (Artemis: > 0).
DISCOVERY_GROUP_ELEMENTS = _table(
    model.DiscoveryGroupConfig,
    "discovery-group",
    {
        "local-bind-address": Value("local_bind_address", text_value),
        "group-address": Value("group_address", multicast_address),
        "group-port": Value("group_port", integer(1, 65535)),
        "refresh-timeout": Value("refresh_timeout", integer(1, long=True)),
        "initial-wait-timeout": Value("initial_wait_timeout", integer(0, long=True)),
    },
)

#: Children of ``<cluster-connection>`` (xsd ``cluster-connectionType``, an
#: ``xsd:all``: any order, each once) -> :class:`~junction.config.model.ClusterConnectionConfig`
#: fields.  Ranges are Artemis's (``FileConfigurationParser``); sizes take
#: byte notation.  ``connector-ref``, ``forward-when-no-consumers``,
#: ``discovery-group-ref`` and ``static-connectors`` are read by the loader.
CLUSTER_CONNECTION_ELEMENTS = _table(
    model.ClusterConnectionConfig,
    "cluster-connection",
    {
        "address": Value("address", any_text),
        "connector-ref": Nested("_cluster_connector_ref"),
        # Junction's (Sun Message Queue's imq.cluster.masterbroker): the connector of the node that
        # keeps the cluster's configuration change record
        "master-broker": Nested("_cluster_master_broker"),
        "check-period": Value("check_period", integer(1, long=True)),
        "connection-ttl": Value("connection_ttl", integer(1, long=True)),
        "min-large-message-size": Value("min_large_message_size", size(1, JAVA_INT[1])),
        "call-timeout": Value("call_timeout", integer(1, long=True)),
        "call-failover-timeout": Value("call_failover_timeout", integer(1, minus_one=True, long=True)),
        "retry-interval": Value("retry_interval", integer(1, long=True)),
        "retry-interval-multiplier": Value("retry_interval_multiplier", real(above=0.0)),
        "max-retry-interval": Value("max_retry_interval", integer(1, long=True)),
        "initial-connect-attempts": Value("initial_connect_attempts", integer(0, minus_one=True)),
        "reconnect-attempts": Value("reconnect_attempts", integer(0, minus_one=True)),
        "use-duplicate-detection": Value("use_duplicate_detection", boolean),
        "message-load-balancing": Value(
            "message_load_balancing", choice(*model.MESSAGE_LOAD_BALANCING)
        ),
        "forward-when-no-consumers": Nested("_cluster_forward_when_no_consumers"),
        "max-hops": Value("max_hops", integer(0)),
        "confirmation-window-size": Value("confirmation_window_size", size(1, JAVA_INT[1])),
        "producer-window-size": Value("producer_window_size", size(1, JAVA_INT[1], minus_one=True)),
        "notification-interval": Value("notification_interval", integer(1, long=True)),
        "notification-attempts": Value("notification_attempts", integer(1)),
        "discovery-group-ref": Nested("_cluster_discovery_group_ref"),
        "static-connectors": Nested("_cluster_static_connectors"),
    },
)

#: Children of ``<ha-policy>`` (an xsd choice: one of them).  ``live-only``
#: is Artemis's deprecated name for ``primary-only``.
HA_POLICY_ELEMENTS = _table(
    None,
    "ha-policy",
    {
        "primary-only": Nested("_ha_primary_only"),
        "live-only": Nested("_ha_primary_only"),
    },
)

#: Children of ``<primary-only>``/``<live-only>``.
PRIMARY_ONLY_ELEMENTS = Elements(None, {"scale-down": Nested("_scale_down")})

#: Children of ``<scale-down>`` (xsd ``scaleDownType``, plus Junction's
#: ``cluster-name``) -> :class:`~junction.config.model.ScaleDownConfig` fields.
#: ``discovery-group-ref`` and ``connectors`` are an xsd choice: at most one.
SCALE_DOWN_ELEMENTS = Elements(
    model.ScaleDownConfig,
    {
        "enabled": Value("enabled", boolean),
        "group-name": Value("group_name", text_value),
        "cluster-name": Nested("_scale_down_cluster_name"),
        "discovery-group-ref": Nested("_scale_down_discovery_group_ref"),
        "connectors": Nested("_scale_down_connectors"),
        "commit-interval": Value("commit_interval", integer(1, minus_one=True)),
    },
)


def registered_policies() -> tuple[str, ...]:
    """Names of the policies plug-ins register in the ``junction.policies`` entry-point group.

    Only the names are read (nothing is imported), so checking a config never
    runs plug-in code.  A plug-in package declares, for example::

        [options.entry_points]
        junction.policies =
            STICKY_TENANT = mypkg.policies:StickyTenantPolicy
    """
    return tuple(
        sorted({ep.name for ep in metadata.entry_points(group=model.POLICY_ENTRY_POINT_GROUP)})
    )

