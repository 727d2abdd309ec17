"""The node's event log (``<junction><events>``), shared by the gateway and the broker core.

Started once the broker core exists and before it starts (its message events
read the core's storage, and recovery already writes events); stopped last but
the data directory, once everything that writes events has stopped: the writer
thread writes what is queued and closes the file.
"""

from __future__ import annotations

from junction.brokercore.events import MessageEvents
from junction.events.node import NodeEvents
from junction.events.writer import EventLog
from junction.node.service import NodeService, log

__all__ = ["EventsService"]


class EventsService(NodeService):
    """``node.event_log`` (:class:`EventLog`) and ``node.events`` (:class:`NodeEvents`); both None when off."""

    name = "events"

    def startService(self):
        super().startService()
        node = self.node
        cfg = node.config.events
        if cfg is None:
            return
        node.event_log = EventLog(
            node._path(cfg.directory),
            node.name,
            node.node_id,
            categories=cfg.categories,
            sample_rate=cfg.message_sample_rate,
            max_file_bytes=cfg.max_file_size,
            max_file_age_s=cfg.max_file_age / 1000.0,
            max_files=cfg.max_files,
            max_spool_bytes=cfg.max_spool_size,
        )
        node.event_log.start()
        node.events = NodeEvents(node.event_log, node.node_id)
        node.server.events = node.events
        if node.event_log.enabled("message.sent"):
            node.server.message_events = MessageEvents(node.event_log, node.node_id, node.server.storage)
        log.info(
            "event log: %s (%s; message sample rate %g)",
            node.event_log.directory, ", ".join(cfg.categories) or "no categories", cfg.message_sample_rate,
        )

    def stopService(self):
        super().stopService()
        node = self.node
        if node.event_log is not None:
            # the writer thread writes what is queued and closes the file (a blocking join,
            # bounded by one batch's write, once everything else has stopped)
            node.event_log.stop()
            node.event_log = None
