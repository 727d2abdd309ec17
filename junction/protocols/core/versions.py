"""CORE wire versions: what Artemis calls a connection's "channel version".

A client names its version in SUBSCRIBE_TOPOLOGY_V2 and in CREATESESSION; the
server adopts it for the connection (or answers EXCEPTION 108
INCOMPATIBLE_CLIENT_SERVER_VERSIONS to one outside :data:`COMPATIBLE_VERSIONS`)
and names its own in CLUSTER_TOPOLOGY_V4 and CREATESESSION_RESP, which the
client adopts.  Packet variants are chosen by that version; the thresholds
below are Artemis's ``PacketImpl`` constants.  The codec reads every variant
from its length alone (each newer variant appends fields), so only a writer
needs these: which form to send to a client of a given version.
"""

from __future__ import annotations

__all__ = [
    "ACCEPTED_VERSIONS",
    "ADDRESSING_CHANGE_VERSION",
    "ASYNC_RESPONSE_CHANGE_VERSION",
    "CLIENT_ID_VERSION",
    "COMMIT_V2_VERSION",
    "COMPATIBLE_VERSIONS",
    "CONSUMER_PRIORITY_VERSION",
    "CURRENT_VERSION",
    "PRODUCER_METRICS_VERSION",
    "BINDING_QUERY_V3_VERSION",
    "BINDING_QUERY_V5_VERSION",
    "DISCONNECT_V2_VERSION",
    "QUERY_V2_VERSION",
    "TOPOLOGY_V2_VERSION",
]

#: The version this codec speaks: Artemis's ``incrementingVersion`` from 2.37.0 on.
CURRENT_VERSION = 136

#: Client versions a server accepts (``activemq.version.compatibleVersionList``:
#: 121 to 136; older clients get EXCEPTION 108).
COMPATIBLE_VERSIONS = frozenset(range(121, 137))

#: From 122: CLUSTER_TOPOLOGY_V2 (an event id and the backup group).
TOPOLOGY_V2_VERSION = 122
#: From 125: DISCONNECT_V2 and CLUSTER_TOPOLOGY_V3 (the scale-down target and group).
DISCONNECT_V2_VERSION = 125
#: From 126: SESS_QUEUEQUERY_RESP_V2 and SESS_BINDINGQUERY_RESP_V2 (auto-create-queues).
QUERY_V2_VERSION = 126
#: From 127: SESS_BINDINGQUERY_RESP_V3 (auto-create-addresses).
BINDING_QUERY_V3_VERSION = 127
#: Below this, messages use the 1.x layout (``SessionSendMessage_1X``); not read here.
ADDRESSING_CHANGE_VERSION = 129
#: Client versions this package's server side serves: the compatible ones whose messages
#: it reads (from :data:`ADDRESSING_CHANGE_VERSION`, Artemis 2.0.0, on: Artemis 1.x
#: clients, 121 to 128, lay messages out in the 1.x form, and get EXCEPTION 108 instead).
ACCEPTED_VERSIONS = frozenset(v for v in COMPATIBLE_VERSIONS if v >= ADDRESSING_CHANGE_VERSION)
#: From 2.7.0: NULL_RESPONSE and EXCEPTION carry the request's correlation id,
#: SESS_SEND carries one (``SessionSendMessage_V2``).
ASYNC_RESPONSE_CHANGE_VERSION = 130
#: From 2.7.0: SESS_CREATECONSUMER carries the consumer's priority.
CONSUMER_PRIORITY_VERSION = 130
#: From 2.18.0: CREATESESSION_V2 (client id), DISCONNECT_V3, CLUSTER_TOPOLOGY_V4.
CLIENT_ID_VERSION = 131
#: From 2.21.0: SESS_COMMIT carries a correlation id.
COMMIT_V2_VERSION = 132
#: From 2.28.0: SESS_SEND and SESS_SEND_CONTINUATION carry the producer's id.
PRODUCER_METRICS_VERSION = 134
#: From 2.29.0: SESS_BINDINGQUERY_RESP_V5.
BINDING_QUERY_V5_VERSION = 135
