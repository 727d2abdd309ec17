"""What Junction does not implement of Artemis's configuration: the one table.

:data:`UNIMPLEMENTED` lists, by where the name appears in ``broker.xml``,
every Artemis element, attribute, URL parameter, protocol and transport that
Junction accepts without acting on it or refuses.  Each row says what happens
(:mod:`junction.config.specs`):

* accepted and logged at start: :class:`Ignored` (tuning for the Java broker,
  type-checked) and :class:`DefaultOnly` at Artemis's default;
* accepted and warned at start: :class:`Warned` (read into the model, no
  effect yet) and :class:`NoEffect` (URL parameters an acceptor gives that
  nothing in Junction acts on);
* refused, with the whole configuration's other errors: :class:`Unsupported`
  ("not supported by Junction yet"), :class:`DefaultOnly` at any other value,
  and :class:`Refused` (not planned; the message says what to write instead).

The element tables of :mod:`junction.config.schema` and the URL parameters of
:mod:`junction.config.params` take their not-implemented rows from here, and
:func:`warnings` writes the start-up warnings of the :class:`Warned` rows, so
implementing something is: move its row out of this table (into the schema
as a :class:`Value`, or into the parameter table with what acts on it), then
act on it.  For rows the section code reads itself rather than as a leaf
element (``cluster-connection-uri``, masked passwords, ``vm://``, protocols)
:attr:`Refused.message` is the whole error text.
"""

from __future__ import annotations

from junction.config.specs import (
    DefaultOnly,
    Ignored,
    NoEffect,
    Refused,
    Unsupported,
    Warned,
)
from junction.config.values import (
    JAVA_INT,
    any_text,
    boolean,
    choice,
    integer,
    port_number,
    power_of_two,
    size,
    text_value,
)

__all__ = ["UNIMPLEMENTED", "unimplemented", "warnings"]

_JVM = "tuning for the Java broker (threads, JMX, JVM memory); no effect in Junction"
_JOURNAL = "tuning for Artemis's journal implementation; Junction's journal sizes itself"
_MONITOR = "monitoring of the Java broker; Junction has its own management API and metrics"
_PAGING = "paging read-ahead tuning for the Java broker; no effect in Junction"
_WHOLE = integer(minus_one=True)
_NON_NEGATIVE = integer(0)
_POSITIVE = integer(1)
_MQTT = "MQTT is not supported by Junction, so this MQTT setting has no effect"
_MIRROR = "AMQP mirroring is not supported by Junction, so this setting has no effect"
_JGROUPS = Refused(
    "JGroups is not supported by Junction; give group-address and group-port (UDP multicast),"
    " or use static-connectors"
)
#: What masked passwords get (Artemis's ``ENC(...)``, decoded with its password codec).
_MASKED_PASSWORD = (
    "masked passwords (ENC(...)) are not supported by Junction yet"
    " (Artemis decodes them with its password codec); write the password in"
    " clear text or take it from the environment with ${VAR}"
)
#: Why a cluster connection's large-message and failover settings do nothing.
_CLUSTER_LINKS = "its links carry a message of up to 64 MiB whole, and nodes have no failover yet"

# fmt: off
#: where in broker.xml -> name -> what Junction does with it (see the module docstring)
UNIMPLEMENTED: dict[str, dict] = {
    # -- children of <core> ---------------------------------------------------------------
    "core": {
        # -- tuning knobs: accepted, type-checked, listed in BrokerConfig.ignored --------
        "journal-type": Ignored(choice("ASYNCIO", "NIO", "MAPPED"), _JOURNAL),
        "journal-datasync": Ignored(boolean, _JOURNAL),
        "journal-min-files": Ignored(integer(1), _JOURNAL),
        "journal-pool-files": Ignored(integer(1, minus_one=True), _JOURNAL),
        "journal-compact-percentage": Ignored(integer(0, 100), _JOURNAL),
        "journal-compact-min-files": Ignored(integer(0), _JOURNAL),
        "journal-max-io": Ignored(integer(1), _JOURNAL),
        "journal-buffer-size": Ignored(size(1, JAVA_INT[1]), _JOURNAL),
        "journal-device-block-size": Ignored(integer(0, minus_one=True), _JOURNAL),
        "journal-file-open-timeout": Ignored(integer(1), _JOURNAL),
        "journal-max-attic-files": Ignored(integer(), _JOURNAL),
        "journal-lock-acquisition-timeout": Ignored(integer(1, minus_one=True, long=True), _JOURNAL),
        "log-journal-write-rate": Ignored(boolean, _JOURNAL),
        "large-message-sync": Ignored(boolean, _JOURNAL),
        "create-journal-dir": Ignored(boolean, "Junction always creates its directories"),
        "create-bindings-dir": Ignored(boolean, "Junction always creates its directories"),
        "node-manager-lock-directory": Ignored(
            any_text, "used by Artemis's shared-store HA, which Junction does not support yet"
        ),
        "purge-page-folders": Ignored(boolean, _PAGING),
        "page-max-concurrent-io": Ignored(integer(1, minus_one=True), _PAGING),
        "read-whole-page": Ignored(boolean, _PAGING),
        "page-sync-timeout": Ignored(integer(0), _JOURNAL),
        "thread-pool-max-size": Ignored(integer(1, minus_one=True), _JVM),
        "scheduled-thread-pool-max-size": Ignored(integer(1), _JVM),
        "graceful-shutdown-enabled": Ignored(
            boolean, "Junction always closes connections cleanly at shutdown"
        ),
        "graceful-shutdown-timeout": Ignored(
            integer(0, minus_one=True, long=True),
            "Junction always closes connections cleanly at shutdown",
        ),
        "async-connection-execution-enabled": Ignored(boolean, _JVM),
        "jmx-management-enabled": Ignored(boolean, "Junction has no JMX; see its management HTTP API"),
        "jmx-domain": Ignored(text_value, "Junction has no JMX; see its management HTTP API"),
        "jmx-use-broker-name": Ignored(boolean, "Junction has no JMX; see its management HTTP API"),
        "log-delegate-factory-class-name": Ignored(any_text, _JVM),
        "management-address": Ignored(
            text_value, "Junction's management is its HTTP API, not a management address"
        ),
        "management-notification-address": Ignored(
            text_value, "Junction's management is its HTTP API, not a notification address"
        ),
        "message-counter-enabled": Ignored(boolean, _MONITOR),
        "message-counter-sample-period": Ignored(integer(1, long=True), _MONITOR),
        "message-counter-max-day-history": Ignored(integer(1), _MONITOR),
        "critical-analyzer": Ignored(boolean, _JVM),
        "critical-analyzer-timeout": Ignored(integer(0, long=True), _JVM),
        "critical-analyzer-check-period": Ignored(integer(0, long=True), _JVM),
        "critical-analyzer-policy": Ignored(choice("LOG", "HALT", "SHUTDOWN"), _JVM),
        "server-dump-interval": Ignored(integer(1, minus_one=True, long=True), _JVM),
        "memory-warning-threshold": Ignored(integer(0, 100), _JVM),
        "memory-measure-interval": Ignored(integer(1, minus_one=True, long=True), _JVM),
        "global-max-size": Ignored(
            size(1, minus_one=True),
            "Junction limits memory per address (address-settings max-size-bytes)",
        ),
        "global-max-size-percent-of-jvm-max-memory": Ignored(integer(1), _JVM),
        "global-max-messages": Ignored(
            integer(1, minus_one=True, long=True),
            "Junction limits memory per address (address-settings max-size-messages)",
        ),
        "max-disk-usage": Ignored(
            integer(0, 100, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
        ),
        "min-disk-free": Ignored(
            size(1, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
        ),
        "disk-scan-period": Ignored(
            integer(1, minus_one=True), "disk monitoring of the Java broker; no effect in Junction"
        ),
        "connection-ttl-check-interval": Ignored(integer(1, long=True), _JVM),
        "transaction-timeout-scan-period": Ignored(integer(1, long=True), _JVM),
        "message-expiry-scan-period": Ignored(integer(1, minus_one=True, long=True), _JVM),
        "message-expiry-thread-priority": Ignored(integer(0, 9), _JVM),
        "address-queue-scan-period": Ignored(integer(1, minus_one=True, long=True), _JVM),
        "max-redelivery-records": Ignored(integer(0, minus_one=True), _JOURNAL),
        "populate-validated-user": Ignored(
            boolean, "Junction does not add _AMQ_VALIDATED_USER to messages yet"
        ),
        "reject-empty-validated-user": Ignored(
            boolean, "Junction does not add _AMQ_VALIDATED_USER to messages yet"
        ),
        "internal-naming-prefix": Ignored(any_text, "Junction names its internal queues itself"),
        "suppress-session-notifications": Ignored(boolean, _MONITOR),
        "mqtt-session-scan-interval": Ignored(integer(1, long=True), _MQTT),
        "mqtt-session-state-persistence-timeout": Ignored(integer(1, long=True), _MQTT),
        "mqtt-subscription-persistence-enabled": Ignored(boolean, _MQTT),
        "mirror-ack-manager-queue-attempts": Ignored(integer(1), _MIRROR),
        "mirror-ack-manager-page-attempts": Ignored(integer(1), _MIRROR),
        "mirror-ack-manager-retry-delay": Ignored(integer(1), _MIRROR),
        "mirror-ack-manager-warn-unacked": Ignored(boolean, _MIRROR),
        "mirror-page-transaction": Ignored(boolean, _MIRROR),
        "network-check-period": Ignored(
            integer(1, long=True),
            "only used with network-check-list, which Junction does not support yet",
        ),
        "network-check-timeout": Ignored(
            integer(1), "only used with network-check-list, which Junction does not support yet"
        ),
        "network-check-NIC": Ignored(
            any_text, "only used with network-check-list, which Junction does not support yet"
        ),
        "network-check-ping-command": Ignored(
            any_text, "only used with network-check-list, which Junction does not support yet"
        ),
        "network-check-ping6-command": Ignored(
            any_text, "only used with network-check-list, which Junction does not support yet"
        ),
        # -- Artemis behaviour Junction lacks: fine at the default, an error otherwise ----
        "resolve-protocols": DefaultOnly(boolean, True),
        "amqp-use-core-subscription-naming": DefaultOnly(boolean, False),
        "persist-delivery-count-before-delivery": DefaultOnly(boolean, False),
        "connection-ttl-override": DefaultOnly(integer(1, minus_one=True, long=True), -1),
        "transaction-timeout": DefaultOnly(integer(1, long=True), 300000),
        "temporary-queue-namespace": DefaultOnly(any_text, ""),
        "uuid-namespace": DefaultOnly(any_text, ""),
        "literal-match-markers": DefaultOnly(any_text, ""),
        "view-permission-method-match-pattern": DefaultOnly(any_text, ""),
        "management-message-rbac": DefaultOnly(boolean, False),
        "management-rbac-prefix": DefaultOnly(text_value, "mops"),
        "mask-password": DefaultOnly(boolean, False),
        "password-codec": DefaultOnly(
            text_value, "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec"
        ),
        "network-check-list": DefaultOnly(any_text, ""),
        "network-check-URL-list": DefaultOnly(any_text, ""),
        # -- Artemis features Junction does not have yet ---------------------------------
        "grouping-handler": Unsupported(),
        "bridges": Unsupported(),
        "diverts": Unsupported(),
        "federations": Unsupported(),
        "broker-connections": Unsupported(),
        "queues": Unsupported("(deprecated in Artemis; declare queues under <addresses>)"),
        "jgroups-file": Unsupported(),
        "store": Unsupported("(Junction keeps its journal in files; no JDBC store)"),
        "journal-retention-directory": Unsupported(),
        "broker-plugins": Unsupported(),
        "metrics-plugin": Unsupported(),
        "metrics": Unsupported(),
        "resource-limit-settings": Unsupported(),
        "connector-services": Unsupported(),
        "remoting-interceptors": Unsupported(),
        "remoting-incoming-interceptors": Unsupported(),
        "remoting-outgoing-interceptors": Unsupported(),
        "system-property-prefix": Unsupported("(use ${VAR} references to the environment instead)"),
    },
    # -- children of <address-setting> ----------------------------------------------------
    "address-setting": {
        # tuning
        "max-read-page-messages": Ignored(integer(1, minus_one=True), _PAGING),
        "max-read-page-bytes": Ignored(size(1, JAVA_INT[1], minus_one=True), _PAGING),
        "prefetch-page-messages": Ignored(integer(1, minus_one=True), _PAGING),
        "prefetch-page-bytes": Ignored(size(1, JAVA_INT[1], minus_one=True), _PAGING),
        "initial-queue-buffer-size": Ignored(power_of_two, _JVM),
        "management-message-attribute-size-limit": Ignored(integer(minus_one=True), _MONITOR),
        "auto-create-jms-queues": Ignored(boolean, "deprecated in Artemis (use auto-create-queues)"),
        "auto-delete-jms-queues": Ignored(boolean, "deprecated in Artemis (use auto-delete-queues)"),
        "auto-create-jms-topics": Ignored(boolean, "deprecated in Artemis (use auto-create-addresses)"),
        "auto-delete-jms-topics": Ignored(boolean, "deprecated in Artemis (use auto-delete-addresses)"),
        "page-full-policy": Ignored(
            choice("DROP", "FAIL"),
            "only applies with page-limit-bytes/page-limit-messages, which Junction does not support yet",
        ),
        # Artemis behaviour Junction lacks
        "no-expiry": DefaultOnly(boolean, False),
        "max-size-bytes-reject-threshold": DefaultOnly(size(0, minus_one=True), -1),
        "page-limit-bytes": DefaultOnly(size(1, minus_one=True), -1),
        "page-limit-messages": DefaultOnly(integer(1, minus_one=True, long=True), -1),
        "disk-full-policy": DefaultOnly(choice("DROP", "FAIL", "BLOCK"), "BLOCK"),
        "default-consumers-before-dispatch": DefaultOnly(integer(0), 0),
        "default-delay-before-dispatch": DefaultOnly(integer(0, minus_one=True, long=True), -1),
        "slow-consumer-threshold-measurement-unit": DefaultOnly(
            choice(
                "MESSAGES_PER_SECOND", "MESSAGES_PER_MINUTE", "MESSAGES_PER_HOUR", "MESSAGES_PER_DAY"
            ),
            "MESSAGES_PER_SECOND",
        ),
        "auto-delete-queues-skip-usage-check": DefaultOnly(boolean, False),
        "auto-delete-addresses-skip-usage-check": DefaultOnly(boolean, False),
        "config-delete-diverts": DefaultOnly(choice("OFF", "FORCE"), "OFF"),
        "retroactive-message-count": DefaultOnly(integer(0, long=True), 0),
        "enable-ingress-timestamp": DefaultOnly(boolean, False),
        "id-cache-size": Unsupported(
            "(per-address duplicate-ID caches; Junction uses the node's <id-cache-size>)"
        ),
        # read into the model, without effect yet: warned at start
        "redelivery-collision-avoidance-factor": Warned(),
        "page-max-cache-size": Warned(),
        "last-value-queue": Warned(),
        "default-last-value-key": Warned(),
        "default-non-destructive": Warned(),
        "default-consumer-window-size": Warned(),
        "slow-consumer-threshold": Warned(),
        "slow-consumer-policy": Warned(),
        "slow-consumer-check-period": Warned(),
        "auto-delete-created-queues": Warned(),
        "default-ring-size": Warned(),
    },
    # -- attributes of <queue> ------------------------------------------------------------
    "queue": {
        "consumers-before-dispatch": DefaultOnly(integer(0), 0),
        "delay-before-dispatch": DefaultOnly(integer(0, minus_one=True, long=True), -1),
        "enabled": DefaultOnly(boolean, True),
        # read into the model, without effect yet: warned at start
        "last-value": Warned(),
        "last-value-key": Warned(),
        "non-destructive": Warned(),
        "ring-size": Warned(),
    },
    # -- children of <security-settings> ------------------------------------------------
    "security-settings": {
        "security-setting-plugin": Unsupported(),
        "role-mapping": Unsupported(),
    },
    # -- children of <connection-router> ------------------------------------------------
    "connection-router": {
        "key-transformer": Unsupported(
            "(Artemis ignores it too: it is in artemis-configuration.xsd, but no Artemis"
            " version reads it; keys are transformed by the policy, e.g. CONSISTENT_HASH_MODULO)"
        ),
    },
    # -- the cluster sections -----------------------------------------------------------
    "broadcast-group": {
        "jgroups-file": _JGROUPS,
        "jgroups-channel": _JGROUPS,
        "jgroups-properties": _JGROUPS,
    },
    "discovery-group": {
        "local-bind-port": Ignored(
            integer(0, 65535, minus_one=True),
            "a discovery group listens on its group-port; Artemis does not use local-bind-port"
            " for discovery either",
        ),
        "jgroups-file": _JGROUPS,
        "jgroups-channel": _JGROUPS,
        "jgroups-properties": _JGROUPS,
        # read into the model, without effect: warned at start when not Artemis's default
        "initial-wait-timeout": Warned("cluster connections and pools act on each broadcast as it comes"),
    },
    "cluster-connections": {
        "cluster-connection-uri": Refused(
            "cluster-connection-uri is not supported by Junction; write a <cluster-connection>"
        ),
    },
    "cluster-connection": {
        "client-id": Ignored(
            text_value,
            "names the connection on the remote Java broker (for its management); no effect in Junction",
        ),
        "scale-down-connector": Ignored(
            text_value,
            "Artemis does not use it either; scale-down peers are set in <ha-policy><primary-only><scale-down>",
        ),
        "topology-scanner-attempts": Ignored(
            integer(0, minus_one=True),
            "tuning of the Java broker's topology scan; no effect in Junction",
        ),
        # read into the model, without effect: warned at start when not Artemis's default
        "min-large-message-size": Warned(_CLUSTER_LINKS),
        "call-failover-timeout": Warned(_CLUSTER_LINKS),
    },
    # attributes of <cluster-connection>
    "cluster-connection@": {
        "uri": Refused(
            "the uri attribute of <cluster-connection> is not supported by Junction;"
            " write its settings as child elements"
        ),
    },
    "ha-policy": {
        "replication": Unsupported(),
        "shared-store": Unsupported(),
    },
    "scale-down": {
        # read into the model, without effect yet: warned at start when given
        "discovery-group-ref": Warned(
            "scale-down uses the peers of a cluster connection (cluster-name, else the first)"
        ),
    },
    # -- values ---------------------------------------------------------------------------
    # a password (cluster-password, a router pool's <password>) written ENC(...)
    "password": {
        "ENC(...)": Refused(_MASKED_PASSWORD),
    },
    # -- acceptor and connector URLs ---------------------------------------------------------
    # the scheme of a URL
    "transport": {
        "vm": Refused("in-VM transports (vm://) are not supported by Junction yet; use tcp://host:port"),
    },
    # names in protocols= (Artemis knows them; Junction refuses them)
    "protocols": {
        "MQTT": Refused("is not supported by Junction"),
        "HORNETQ": Refused("is not supported by Junction"),
    },
    # acceptor parameters Artemis allows that nothing in Junction acts on (warned per acceptor)
    "acceptor-url": {
        "ackManagerFlushTimeout": NoEffect(),
        "activemq.passwordcodec": NoEffect(),
        "activemq.usemaskedpassword": NoEffect(boolean),
        "actorThresholdBytes": NoEffect(_NON_NEGATIVE),
        "amqpDrainOnTransientDeliveryErrors": NoEffect(boolean),
        "amqpDuplicateDetection": NoEffect(boolean),
        "amqpLinkQuiesceTimeout": NoEffect(),
        "amqpMinLargeMessageSize": NoEffect(_WHOLE),
        "amqpUseModifiedForTransientDeliveryErrors": NoEffect(boolean),
        "autoStart": NoEffect(boolean),
        "batchDelay": NoEffect(_NON_NEGATIVE),
        "brokerName": NoEffect(),
        "connectionTtl": NoEffect(_WHOLE),
        "connectionTtlMax": NoEffect(_WHOLE),
        "connectionTtlMin": NoEffect(_WHOLE),
        "crlPath": NoEffect(),
        "directDeliver": NoEffect(boolean),
        "disableStompServerHeader": NoEffect(boolean),
        "httpResponseTime": NoEffect(),
        "httpServerScanPeriod": NoEffect(),
        "httpUpgradeEnabled": NoEffect(boolean),
        "initialRemoteMaxFrameSize": NoEffect(_POSITIVE),
        "keyStoreAlias": NoEffect(),
        "keyStoreProvider": NoEffect(),
        "maxInactivityDuration": NoEffect(_WHOLE),
        "maxInactivityDurationInitalDelay": NoEffect(_WHOLE),
        "mirrorMaxPendingAcks": NoEffect(),
        "nioRemotingThreads": NoEffect(_WHOLE),
        "openWireDestinationCacheSize": NoEffect(_NON_NEGATIVE),
        "openwireMaxPacketChunkSize": NoEffect(_POSITIVE),
        "openwireUseDuplicateDetectionOnFailover": NoEffect(boolean),
        "pubSubPrefix": NoEffect(),
        "quietPeriod": NoEffect(_NON_NEGATIVE),
        "rebalanceClusterClients": NoEffect(boolean),
        "remotingThreads": NoEffect(_WHOLE),
        "saslLoginConfigScope": NoEffect(),
        "securityDomain": NoEffect(),
        "shutdownTimeout": NoEffect(_NON_NEGATIVE),
        "sslAutoReload": NoEffect(boolean),
        "sslProvider": NoEffect(),
        "stomp-enable-message-id": NoEffect(boolean),
        "stomp-min-large-message-size": NoEffect(_WHOLE),
        "stompConsumerCredits": NoEffect(_NON_NEGATIVE),
        "stompConsumerWindowSize": NoEffect(_WHOLE),
        "stompEnableMessageId": NoEffect(boolean),
        "stompMinLargeMessageSize": NoEffect(_WHOLE),
        "supportAdvisory": NoEffect(boolean),
        "suppressInternalManagementObjects": NoEffect(boolean),
        "trustManagerFactoryPlugin": NoEffect(),
        "trustStoreProvider": NoEffect(),
        "updateClusterClients": NoEffect(boolean),
        "updateClusterClientsOnRemove": NoEffect(boolean),
        "useInvm": NoEffect(boolean),
        "useKeepAlive": NoEffect(boolean),
        "useKQueue": NoEffect(boolean),
        "useNio": NoEffect(boolean),
        "verifyHost": NoEffect(boolean),
        "virtualTopicConsumerLruCacheMax": NoEffect(_POSITIVE),
        "virtualTopicConsumerWildcards": NoEffect(),
        "webSocketEncoderType": NoEffect(),
        "webSocketMaxFramePayloadLength": NoEffect(_POSITIVE),
        "writeBufferHighWaterMark": NoEffect(_NON_NEGATIVE),
        "writeBufferLowWaterMark": NoEffect(_NON_NEGATIVE),
    },
    # connector parameters Artemis allows that nothing in Junction acts on
    "connector-url": {
        "activemq.passwordcodec": NoEffect(),
        "activemq.usemaskedpassword": NoEffect(boolean),
        "activemqServerName": NoEffect(),
        "batchDelay": NoEffect(_NON_NEGATIVE),
        "crlPath": NoEffect(),
        "forceSSLParameters": NoEffect(boolean),
        "handshake-timeout": NoEffect(_NON_NEGATIVE),
        "httpClientIdleScanPeriod": NoEffect(),
        "httpClientIdleTime": NoEffect(),
        "httpEnabled": NoEffect(boolean),
        "httpRequiresSessionId": NoEffect(boolean),
        "httpUpgradeEnabled": NoEffect(boolean),
        "httpUpgradeEndpoint": NoEffect(),
        "keyStoreAlias": NoEffect(),
        "keyStoreProvider": NoEffect(),
        "nioRemotingThreads": NoEffect(_WHOLE),
        "remotingThreads": NoEffect(_WHOLE),
        "servletPath": NoEffect(),
        "socksEnabled": NoEffect(boolean),
        "socksHost": NoEffect(),
        "socksPassword": NoEffect(),
        "socksPort": NoEffect(port_number),
        "socksRemoteDNS": NoEffect(boolean),
        "socksUsername": NoEffect(),
        "socksVersion": NoEffect(choice("4", "5")),
        "sslProvider": NoEffect(),
        "trustManagerFactoryPlugin": NoEffect(),
        "trustStoreProvider": NoEffect(),
        "useDefaultSslContext": NoEffect(boolean),
        "useEpoll": NoEffect(boolean),
        "useGlobalWorkerPool": NoEffect(boolean),
        "useKQueue": NoEffect(boolean),
        "useNio": NoEffect(boolean),
        "useNioGlobalWorkerPool": NoEffect(boolean),
        "useServlet": NoEffect(boolean),
        "writeBufferHighWaterMark": NoEffect(_NON_NEGATIVE),
        "writeBufferLowWaterMark": NoEffect(_NON_NEGATIVE),
    },
}
# fmt: on


def unimplemented(where: str, *kinds: type) -> dict:
    """The rows of :data:`UNIMPLEMENTED` for ``where``, in order; only those of
    the spec classes ``kinds`` when given."""
    rows = UNIMPLEMENTED.get(where, {})
    if not kinds:
        return dict(rows)
    return {name: spec for name, spec in rows.items() if isinstance(spec, kinds)}


def _field(name: str) -> str:
    return name.replace("-", "_")


def _away_from_default(items, where: str, what: str) -> list[str]:
    """Warnings for the :class:`Warned` rows of ``where`` that ``items`` set away from the model's default."""
    problems = []
    warned = unimplemented(where, Warned)
    for item in items:
        defaults = type(item).__dataclass_fields__
        for name, spec in warned.items():
            if getattr(item, _field(name)) != defaults[_field(name)].default:
                problems.append(
                    f"{item.source[0]}:{item.source[1]}: {what} {item.name!r}: <{name}> "
                    f"has no effect in Junction ({spec.why})"
                )
    return problems


def warnings(config) -> list[str]:
    """The start-up warnings of the :class:`Warned` rows a ``config`` sets, as
    ``file:line: what``: address settings and queue attributes given, cluster
    settings away from Artemis's default, scale-down's discovery group."""
    problems = []
    warned = unimplemented("address-setting", Warned)
    for item in config.address_settings:
        for name in warned:
            if getattr(item, _field(name), None) is not None:
                file, line = item.source
                problems.append(
                    f"{file}:{line}: address-setting {item.match!r}: <{name}> "
                    "is not implemented by Junction yet and has no effect"
                )
    warned = unimplemented("queue", Warned)
    for address in config.addresses:
        for queue in address.queues:
            for name in warned:
                if getattr(queue, _field(name), None) not in (None, False):
                    file, line = queue.source
                    problems.append(
                        f"{file}:{line}: queue {queue.name!r}: {name} "
                        "is not implemented by Junction yet and has no effect"
                    )
    problems += _away_from_default(config.cluster_connections, "cluster-connection", "cluster connection")
    problems += _away_from_default(config.discovery_groups, "discovery-group", "discovery group")
    sd = config.scale_down
    if sd is not None:
        for name, spec in unimplemented("scale-down", Warned).items():
            field = "discovery_group" if name == "discovery-group-ref" else _field(name)
            if getattr(sd, field) is not None:
                problems.append(
                    f"{sd.source[0]}:{sd.source[1]}: scale-down <{name}> has no effect in Junction yet: "
                    f"{spec.why}"
                )
    return problems
