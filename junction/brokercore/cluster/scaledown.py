"""Scale-down: on a graceful stop, hand every message to a peer and leave nothing behind.

With ``<ha-policy><primary-only><scale-down>`` enabled, a node that is told to
stop (SIGTERM, ``junction`` stop) closes its client sessions, so everything
in flight goes back to its queue, then moves each queue's messages -- durable
or not, highest priority first and in queue order -- to one peer: to the back
of the queue of the same name there, created if the peer has none.  The
store-and-forward machinery carries them (a message leaves this node's
journal only when the peer has stored it; a resend after a cut link is
dropped by its duplicate id), so a crash half-way loses nothing either.

The peer is one this node is linked to over the cluster connection named by
``cluster-name`` (else the first), narrowed to ``connectors`` when given, and
to peers whose ``group-name`` is this node's when it has one.  Messages still
waiting for other peers are left to their own bridges.  If no peer can be
found, or the peers do not confirm within :data:`SCALE_DOWN_TIMEOUT_S`, the
node says so and stops anyway: durable messages stay in its journal.
"""

from __future__ import annotations

import json
import logging

from twisted.internet import defer

from junction.brokercore.cluster.link_server import queue_kind
from junction.brokercore.events import carry_trace
from junction.brokercore.storage import quiet_failure

log = logging.getLogger("junction.cluster")

#: seconds a stopping node waits for its scale-down peer to confirm every message
SCALE_DOWN_TIMEOUT_S = 60.0
#: seconds a stopping node waits for a scale-down peer to be linked at all (one may be reconnecting)
SCALE_DOWN_PEER_WAIT_S = 5.0
#: messages moved per journal transaction (``commit-interval`` -1: Artemis commits per queue)
DEFAULT_COMMIT_INTERVAL = 1000
#: Message.native key: the queue a scaled-down message goes to on the peer (created there if missing)
CREATE_NATIVE = "cluster.create"
#: how often the stopping node looks whether its peer confirmed everything
POLL_INTERVAL_S = 0.05


class ScaleDown:
    def __init__(self, manager, config):
        self.manager = manager
        self.config = config
        self.reactor = manager.reactor
        self.moved = 0

    # -- choosing the peer ----------------------------------------------------------
    def _connection(self):
        manager = self.manager
        if self.config.cluster_name:
            return manager.connection_named(self.config.cluster_name)
        return manager.connections[0] if manager.connections else None

    def _candidates(self) -> list:
        connection = self._connection()
        if connection is None:
            return []
        allowed = None
        if self.config.connectors:
            allowed = set()
            for name in self.config.connectors:
                connector = self.manager.connectors.get(name)
                if connector is not None:
                    allowed.add((connector.host, int(connector.port)))
        group = self.config.group_name
        found = []
        for bridge in connection.by_node.values():
            if not bridge.connected:
                continue
            if allowed is not None and (bridge.connector.host, int(bridge.connector.port)) not in allowed:
                continue
            if group and bridge.peer_scale_down_group != group:
                continue
            found.append(bridge)
        return sorted(found, key=lambda b: b.node_id)

    # -- running ----------------------------------------------------------------------
    @defer.inlineCallbacks
    def run(self):
        """Move every message to a peer; fires when they confirmed (or the node gave up)."""
        manager = self.manager
        server = manager.server
        manager.redistribution.stop()
        # no more messages from peers (they keep them for another node), nor from clients
        manager.scaling_down = True
        for link in list(manager.links):
            link.close("scaling down")
        for session in list(server.sessions):
            session.close()
        if not any(_movable(q) and q.waiting_count for q in server.queues.values()):
            log.info("scale-down: no messages to move")
            return
        peer_deadline = self.reactor.seconds() + SCALE_DOWN_PEER_WAIT_S
        bridge = None
        while bridge is None:
            candidates = self._candidates()
            if candidates:
                bridge = candidates[0]
                break
            if self.reactor.seconds() >= peer_deadline:
                log.error(
                    "scale-down: no peer to take this node's messages (group %s); stopping without "
                    "moving them -- durable messages stay in the journal",
                    self.config.group_name or "any",
                )
                return
            yield _sleep(self.reactor, POLL_INTERVAL_S)
        deadline = self.reactor.seconds() + SCALE_DOWN_TIMEOUT_S
        target = bridge.node_id
        log.info("scale-down: moving every message to %s (node %s)", bridge.peer_name, target)
        sf = manager.sf_queue(bridge.connection.name, target)
        interval = self.config.commit_interval if self.config.commit_interval > 0 else DEFAULT_COMMIT_INTERVAL
        pending = []
        for queue in list(server.queues.values()):
            if not _movable(queue):
                continue
            refs = list(queue.waiting())
            if not refs:
                continue
            create = json.dumps({
                "name": queue.name,
                "address": queue.address,
                "routing_type": queue.routing_type.name,
                "filter": queue.definition.filter,
                "durable": queue.durable,
                "kind": queue_kind(queue),
            }).encode()
            route = json.dumps([[target, queue.name]]).encode()
            queue.drain()
            for start in range(0, len(refs), interval):
                tx = server.storage.transaction()
                for ref in refs[start:start + interval]:
                    carry_trace(ref.message, server.node_id)
                    copy = ref.message.copy(message_id=0)
                    copy.native = {k: v for k, v in copy.native.items() if not k.startswith("cluster.")}
                    copy.native["cluster.route." + target] = route
                    copy.native[CREATE_NATIVE] = create
                    server.post_office.deliver_to_queues(copy, [sf], tx=tx)
                    ref.consumer = None
                    stored = queue.acknowledge(ref, tx=tx)
                    if stored is not None:
                        quiet_failure(stored)
                    self.moved += 1
                pending.append(tx.commit(True))
        if pending:
            yield defer.DeferredList(pending, consumeErrors=True)
        log.info("scale-down: %d messages handed to %s; waiting for it to confirm them", self.moved, bridge.peer_name)
        while sf.message_count:
            if self.reactor.seconds() >= deadline:
                log.error(
                    "scale-down: %s did not confirm %d messages within %g s; they stay in this node's journal",
                    bridge.peer_name, sf.message_count, SCALE_DOWN_TIMEOUT_S,
                )
                return
            yield _sleep(self.reactor, POLL_INTERVAL_S)
        log.info("scale-down: %s confirmed all %d messages", bridge.peer_name, self.moved)


def _movable(queue) -> bool:
    """A client queue (not store-and-forward, not a temporary queue of a closed connection)."""
    return not (queue.name.startswith("$.junction.sf.") or queue.deleted or queue.definition.temporary)


def _sleep(reactor, seconds: float) -> defer.Deferred:
    d = defer.Deferred()
    reactor.callLater(seconds, d.callback, None)
    return d


__all__ = ["ScaleDown", "SCALE_DOWN_TIMEOUT_S", "CREATE_NATIVE"]
