"""The synthetic event log's model in numbers: every rate, chance, latency, size and limit, named once.

The world (:mod:`junction.pipeline.synth_world`), the gateway's connections
(:mod:`junction.pipeline.synth_gateway`), the cores' restarts
(:mod:`junction.pipeline.synth_restarts`) and the messages of a chunk
(:mod:`junction.pipeline.synth_chunk`) take their numbers from here; how the
log is cut into chunks, when it starts and how often the cores restart are
:func:`~junction.pipeline.synth.generate`'s own.
"""

from __future__ import annotations

#: file sequence numbers reserved per chunk, so names never collide
SEQ_PER_CHUNK = 1_000
#: lines gathered per node before one write (looked at every FLUSH_CHECK_MESSAGES messages)
FLUSH_LINES = 20_000
FLUSH_CHECK_MESSAGES = 1_000
#: the rate of messages swings by RATE_SWING around its mean over RATE_PERIOD_S
RATE_SWING = 0.5
RATE_PERIOD_S = 1_800.0
#: user activity skew: weight 1 / rank ** ZIPF_EXPONENT
ZIPF_EXPONENT = 1.1
#: share of addresses that are topic-like (MULTICAST with several subscription queues)
TOPIC_FRACTION = 0.25
#: subscription queues of a topic-like address: between these, inclusive
TOPIC_SUBSCRIPTIONS = (2, 3)
#: share of addresses whose messages are grouped
GROUPED_FRACTION = 0.2
#: share of groups whose messages carry group_seq (the others are ranked by sent time)
GROUP_SEQ_FRACTION = 0.7
#: a held-back group delivery is late by this many microseconds (uniform between)
REORDER_DELAY_US = (2_000_000, 6_000_000)
#: deliveries of a message before it is dead-lettered
MAX_DELIVERY_ATTEMPTS = 3
#: chance that a delivery is retried once before its acknowledgement (not a fault)
REDELIVERY_P = 0.003
#: chance that a local anycast message is redistributed to another core
REDISTRIBUTE_P = 0.002
#: chance that a lost message was delivered (never acknowledged) before it was lost
LOST_DELIVERED_P = 0.3
#: messages per producer connection, on average (then the connection closes and reopens)
MESSAGES_PER_CONNECTION = 300
#: chance that a connection attempt is refused (then retried at once)
REFUSAL_P = 0.02
#: refusal reasons (the router's decision reasons) and their weights
REFUSAL_REASONS = (("unavailable", 0.85), ("no-pool", 0.15))
#: chance that a routing decision found its key in the router's cache after the first
CACHE_HIT_P = 0.9
#: chance that a routing decision waited for the pool's quorum (10 to 210 times slower)
QUORUM_WAIT_P = 0.01
#: chance that a connection ends with an error rather than a clean close
CONNECTION_LOST_P = 0.02
#: connection ids reserved per chunk on each node (ids stay unique within a node)
CONN_IDS_PER_CHUNK = 10_000_000
#: protocols of client connections and their weights; CORE clients are redirected
PROTOCOLS = (("amqp", 0.5), ("core", 0.2), ("openwire", 0.15), ("stomp", 0.15))
#: latency model (microseconds): a floor plus a Pareto tail of this shape
DELIVERY_FLOOR_US = 300
DELIVERY_SCALE_US = 1_500
ACK_FLOOR_US = 100
ACK_SCALE_US = 800
FORWARD_US = 400
LATENCY_TAIL_ALPHA = 1.6
LATENCY_CAP_US = 30_000_000
#: message sizes: SIZE_BYTES[0] plus up to SIZE_BYTES[1] bytes; LARGE_P of them up to LARGE_BYTES more
SIZE_BYTES = (120, 400)
LARGE_P = 0.02
LARGE_BYTES = 60_000
#: ``queues`` of a message expire this long after it was sent (microseconds)
EXPIRY_US = 60_000_000
#: lines a client connection writes on the gateway (accepted, routed, closed)
CONNECTION_EVENTS_PER_CONNECTION = 3
#: no unexpected message is planted this long (microseconds) before a restart of the core
#: its id names: the audit would take its missing sent event for one the crash took
UNEXPECTED_CLEAR_US = 15_000_000
