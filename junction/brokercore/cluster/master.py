"""The master broker: who records configuration changes, and how nodes follow the record.

A cluster connection may name a ``<master-broker>`` (Junction's; Sun Message
Queue's ``imq.cluster.masterbroker``): the connector of the one node that keeps
the configuration change record (:mod:`.changes`).  Then:

* creating or destroying an administrator's destination or a durable
  subscription on any node needs the master: on the master it is recorded at
  once; on another node it is refused while the node has no link to the
  master, else done and sent to the master (CHANGE) to record;
* the master tells every node linked to it of each recorded change (RECORD),
  and each applies it (creates the queue, or destroys it);
* a node that links to the master gets the whole record (a full RECORD) and
  catches up on what it missed, then sends the master its own entities the
  record lacks (made while the master had not yet recorded them).

Message delivery never waits for the master.
"""

from __future__ import annotations

import functools
import logging
import socket

from junction.brokercore.cluster.changes import ChangeRecord, ChangeRecordFull
from junction.brokercore.queue import QueueDefinition
from junction.model import errors
from junction.model.message import RoutingType

log = logging.getLogger("junction.cluster")

#: kinds of entity the record keeps (Binding.kind)
RECORDED_KINDS = ("admin", "subscription")
#: changes a node keeps sending to the master until it answers
MAX_PENDING_CHANGES = 10_000


def same_endpoint(a, b) -> bool:
    """Two connectors reach the same host and port (``localhost`` and ``127.0.0.1`` alike)."""
    if int(a.port) != int(b.port):
        return False
    return a.host == b.host or bool(_addresses(a.host) & _addresses(b.host))


@functools.lru_cache(maxsize=256)
def _addresses(host: str) -> frozenset:
    """The addresses a connector's host names (looked up once per host)."""
    try:
        return frozenset(info[4][0] for info in socket.getaddrinfo(host, None))
    except OSError:
        return frozenset({host})


def entity_of(queue, kind: str) -> dict:
    defn = queue.definition
    return {
        "queue": queue.name,
        "address": queue.address,
        "routing_type": queue.routing_type.name,
        "filter": defn.filter,
        "durable": defn.durable,
        "kind": kind,
    }


class ConfigurationSync:
    def __init__(self, manager, connection, master_connector, directory: str):
        self.manager = manager
        self.connection = connection
        self.master = master_connector
        own = connection.own_connector
        self.is_master = own is not None and same_endpoint(own, master_connector)
        self.record = None
        if self.is_master:
            self.record = ChangeRecord(directory)
            self.record.load()
        self._seq = 0
        #: seq -> (op, entity) sent to the master and not yet answered
        self.pending: dict = {}
        #: entities named by the RECORD frames since the link to the master opened
        self._seen: set = set()
        self.changes_applied = 0

    def start(self) -> None:
        """On the master: follow its own record, then record its own entities the record lacks."""
        if not self.is_master:
            return
        entries = self.record.all()
        for entry in entries:
            self.apply(entry, source="the change record")
        self._send_unrecorded({(e["entity"].get("kind", ""), e["entity"]["queue"]) for e in entries})

    @property
    def master_address(self) -> str:
        return f"{self.master.host}:{self.master.port}"

    def master_bridge(self):
        for bridge in self.connection.by_node.values():
            if bridge.connected and same_endpoint(bridge.connector, self.master):
                return bridge
        return None

    def available(self) -> bool:
        if self.is_master:
            return True
        bridge = self.master_bridge()
        return bridge is not None and bridge.peer_version >= (1, 2)

    def guard(self, what: str) -> None:
        """Raise unless a configuration change can be recorded now."""
        if not self.available():
            raise errors.ClusterConfigurationUnavailableError(
                f"cannot {what}: the cluster's master broker ({self.master_address}) is unreachable, so "
                "destinations and durable subscriptions cannot change until it returns "
                "(sending and receiving are unaffected)"
            )

    # -- a change made here ------------------------------------------------------------
    def changed(self, op: str, entity: dict) -> None:
        if self.is_master:
            self._record_and_tell(op, entity)
            return
        if len(self.pending) >= MAX_PENDING_CHANGES:
            log.error("cluster: %d configuration changes wait for the master; %s %s is not sent",
                      len(self.pending), op, entity["queue"])
            return
        self._seq += 1
        self.pending[self._seq] = (op, entity)
        bridge = self.master_bridge()
        if bridge is not None:
            bridge.send_change(self._seq, op, entity)

    def _record_and_tell(self, op: str, entity: dict):
        try:
            entry = self.record.record(op, entity)
        except (OSError, ChangeRecordFull) as exc:
            log.error("cluster: could not record %s %s %s: %s", op, entity.get("kind"), entity["queue"], exc)
            return None, str(exc)
        log.info("cluster: recorded change %d: %s %s %s", entry["seq"], op, entity.get("kind"), entity["queue"])
        for link in list(self.manager.links):
            link.send_record([entry], full=False)
        return entry, ""

    # -- the master's side ---------------------------------------------------------------
    def change_requested(self, sender: str, op: str, entity: dict) -> tuple[bool, str]:
        """A node asks the master to record a change (CHANGE); the answer for CHANGE_RESULT."""
        if not self.is_master:
            return False, f"this node is not the cluster's master broker ({self.master_address} is)"
        if entity.get("kind") not in RECORDED_KINDS:
            return False, f"kind {entity.get('kind')!r} is not recorded"
        entry, problem = self._record_and_tell(op, entity)
        if entry is None:
            return False, problem
        self.apply(entry, source=f"node {sender}")
        return True, ""

    def full_record(self) -> list:
        return self.record.all() if self.record is not None else []

    # -- a node's side -------------------------------------------------------------------
    def link_opened(self, bridge) -> None:
        """The bridge to the master opened: (re)send what it has not answered."""
        if self.is_master or bridge is not self.master_bridge():
            return
        self._seen = set()
        for seq, (op, entity) in sorted(self.pending.items()):
            bridge.send_change(seq, op, entity)

    def change_result(self, seq: int, ok: bool, reason: str) -> None:
        change = self.pending.pop(seq, None)
        if change is not None and not ok:
            log.error("cluster: the master broker did not record %s %s: %s", change[0], change[1]["queue"], reason)

    def record_received(self, entries, full: bool) -> None:
        for entry in entries:
            self._seen.add((entry["entity"].get("kind", ""), entry["entity"]["queue"]))
            self.apply(entry, source="the master broker's record")
        if full:
            self._send_unrecorded(self._seen)

    def _send_unrecorded(self, known: set) -> None:
        """Entities this node has that the full record does not know: tell the master."""
        from junction.brokercore.cluster.link_server import queue_kind

        for queue in list(self.manager.server.queues.values()):
            kind = queue_kind(queue)
            if kind in RECORDED_KINDS and not queue.name.startswith("$.") and (kind, queue.name) not in known:
                self.changed("create", entity_of(queue, kind))

    def apply(self, entry: dict, *, source: str) -> None:
        """Make this node agree with one record entry."""
        from junction.brokercore.cluster.link_server import queue_kind

        server = self.manager.server
        entity = entry["entity"]
        name, kind = entity["queue"], entity.get("kind", "")
        queue = server.queues.get(name)
        if entry["op"] == "delete":
            if queue is None or queue_kind(queue) != kind:
                return
            if any(not getattr(c, "internal", False) for c in queue.consumers):
                log.warning("cluster: %s %s was destroyed per %s, but has consumers here: kept", kind, name, source)
                return
            server.destroy_queue(name)
            self.changes_applied += 1
            log.info("cluster: destroyed %s %s per %s", kind, name, source)
            return
        if queue is not None:
            return
        if kind == "subscription":
            # A durable subscription lives on its subscriber's node; copies elsewhere would share
            # its messages as one group.  The record keeps it so its removal reaches every node.
            return
        try:
            server.create_queue(
                QueueDefinition(
                    name=name,
                    address=entity["address"],
                    routing_type=RoutingType[entity["routing_type"]],
                    filter=entity.get("filter"),
                    durable=bool(entity.get("durable", True)),
                    subscription=kind == "subscription",
                )
            )
        except errors.BrokerError as exc:
            log.warning("cluster: could not create %s %s per %s: %s", kind, name, source, exc)
            return
        self.changes_applied += 1
        log.info("cluster: created %s %s per %s", kind, name, source)

    def status(self) -> dict:
        return {
            "master_broker": self.master_address,
            "is_master": self.is_master,
            "available": self.available(),
            "record_entries": len(self.record.entries) if self.record is not None else None,
            "pending_changes": len(self.pending),
            "changes_applied": self.changes_applied,
        }


__all__ = ["ConfigurationSync", "entity_of", "RECORDED_KINDS"]
