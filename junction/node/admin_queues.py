"""An administrator's queues (``POST``/``DELETE /api/queues``): Artemis's createQueue and destroyQueue.

In a cluster the queue exists on every node, and a master broker records the
change (:mod:`junction.brokercore.cluster.master`).
"""

from __future__ import annotations

from junction.node.service import log

__all__ = ["create_admin_queue", "delete_admin_queue"]


def create_admin_queue(node, name: str, *, address: str, routing_type: str, filter=None, durable=True) -> dict:
    """Artemis's createQueue: an administrator's queue (in a cluster: on every node, recorded by the master)."""
    from junction.brokercore.queue import QueueDefinition
    from junction.model import errors
    from junction.model.message import RoutingType

    server = node.server
    if name in server.queues:
        raise errors.QueueExistsError(f"queue {name} already exists")
    server.guard_cluster_change(f"create queue {name}")
    queue = server.create_queue(
        QueueDefinition(
            name=name, address=address, routing_type=RoutingType[routing_type], filter=filter or None, durable=durable
        )
    )
    server.cluster_changed("create", queue, "admin")
    log.info("queue %s created on %s (%s) by the management API", name, address, routing_type)
    return {"name": name, "address": address, "routing_type": routing_type, "filter": filter, "durable": durable}


def delete_admin_queue(node, name: str) -> None:
    """Artemis's destroyQueue (in a cluster: everywhere, recorded by the master)."""
    from junction.brokercore.cluster.link_server import queue_kind
    from junction.model import errors

    server = node.server
    queue = server.queues.get(name)
    if queue is None or name.startswith("$.junction."):
        raise errors.NonExistentQueueError(f"queue {name} does not exist")
    kind = queue_kind(queue)
    if kind in ("admin", "subscription"):
        server.guard_cluster_change(f"destroy queue {name}")
    server.destroy_queue(name)
    if kind in ("admin", "subscription"):
        server.cluster_changed("delete", queue, kind)
    log.info("queue %s destroyed by the management API", name)
