"""Message redistribution: moving messages off a queue nobody here consumes.

When a local queue has no consumers and a queue of the same routing name on
another node has consumers that want its messages, the queue's
``redistribution-delay`` (address settings, milliseconds: -1 never, 0 at once)
starts; when it ends and the queue still has no consumer, a
:class:`Redistributor` joins the queue as an internal consumer and hands each
message some remote node wants to the store-and-forward queue towards it, in
one journal transaction with the local acknowledgement (so a crash leaves the
message on exactly one side).  A local consumer arriving cancels the delay
or stops the redistributor.  Grouped messages stay (their group is pinned
here), as do messages no remote consumer wants.

Only cluster connections with ``message-load-balancing`` ``ON_DEMAND`` or
``OFF_WITH_REDISTRIBUTION`` redistribute (Artemis's rule).
"""

from __future__ import annotations

import logging

from junction.brokercore.cluster.bindings import redistribution_target
from junction.brokercore.events import carry_trace
from junction.brokercore.queue import Consumer
from junction.brokercore.storage import quiet_failure

log = logging.getLogger("junction.cluster")

REDISTRIBUTING_MODES = ("ON_DEMAND", "OFF_WITH_REDISTRIBUTION")


class _Wants:
    """A filter-like object: the queue scans with selectors and asks :meth:`Redistributor.accepts`."""

    match_all = False
    text = "<redistribution>"

    def __init__(self, redistributor):
        self.redistributor = redistributor

    def matches(self, message) -> bool:
        return self.redistributor.wants(message)


class Redistributor(Consumer):
    """An internal consumer of a local queue that forwards messages to remote consumers."""

    #: not a client: left out of consumer counts told to peers and of local-consumer checks
    internal = True

    def __init__(self, manager, queue):
        super().__init__(queue, self._take)
        self.manager = manager
        self.filter = _Wants(self)
        self.moved = 0

    def _target(self, message):
        address = self.manager.server.addresses.get(self.queue.address)
        if address is None:
            return None
        remote = self.manager.by_address.get(address.name, ())
        return redistribution_target(address, remote, message, self.queue)

    def wants(self, message) -> bool:
        if message.group_id is not None:
            return False
        return self._target(message) is not None

    def _take(self, ref) -> None:
        manager = self.manager
        server = manager.server
        target = self._target(ref.message)
        if target is None:  # (the bindings changed since the scan)
            self.queue.cancel(ref, redelivered=False, delay=False)
            return
        carry_trace(ref.message, server.node_id)
        copy = ref.message.copy(message_id=0)
        for key in [k for k in copy.native if k.startswith("cluster.route.")]:
            del copy.native[key]
        tx = server.storage.transaction()
        manager.forward_in(copy, [target], tx)
        stored = self.queue.acknowledge(ref, tx=tx)
        if stored is not None:
            quiet_failure(stored)
        quiet_failure(tx.commit(True))
        self.moved += 1
        manager.messages_redistributed += 1
        if server.message_events is not None:
            server.message_events.redistributed(ref.message, self.queue.name, target.origin)


class Redistribution:
    """Starts and stops redistributors as local and remote consumers come and go."""

    def __init__(self, manager):
        self.manager = manager
        #: queue name -> pending delayed call
        self._pending: dict = {}
        #: queue name -> Redistributor
        self.active: dict = {}
        #: a redistributor is being removed (its consumer change is ours, not news)
        self._removing = False

    def _enabled_for(self, queue):
        server = self.manager.server
        if queue.name.startswith("$.junction.sf.") or queue.deleted:
            return None
        connection = self.manager.connection_for(queue.address)
        if connection is None or connection.config.message_load_balancing not in REDISTRIBUTING_MODES:
            return None
        delay = server.settings_for(queue.address).redistribution_delay
        if delay is None or delay < 0:
            return None
        return delay

    @staticmethod
    def _has_client_consumers(queue) -> bool:
        return any(not getattr(c, "internal", False) for c in queue.consumers)

    def consider(self, queue) -> None:
        """Local consumers of ``queue`` changed (or remote ones on its routing name)."""
        if self._removing:
            return
        if self._has_client_consumers(queue):
            self.cancel(queue.name)
            return
        delay = self._enabled_for(queue)
        if delay is None or not self._remote_consumers_for(queue):
            # (a redistributor with nowhere to send would rescan the queue for nothing)
            self.cancel(queue.name)
            return
        active = self.active.get(queue.name)
        if active is not None:
            queue.deliver_soon()  # remote consumers changed: look again
            return
        if queue.name in self._pending:
            return
        if delay == 0:
            self._start(queue)
        else:
            self._pending[queue.name] = self.manager.reactor.callLater(delay / 1000.0, self._start, queue)

    def _remote_consumers_for(self, queue) -> bool:
        rtype = queue.routing_type
        name = queue.address if rtype.name == "ANYCAST" else queue.name
        for binding in self.manager.by_address.get(queue.address, ()):
            if binding.routing_type == rtype and binding.routing_name == name and binding.consumers > 0:
                return True
        return False

    def _start(self, queue) -> None:
        self._pending.pop(queue.name, None)
        if queue.deleted or self._has_client_consumers(queue) or queue.name in self.active:
            return
        redistributor = Redistributor(self.manager, queue)
        self.active[queue.name] = redistributor
        queue.add_consumer(redistributor)

    def cancel(self, name: str) -> None:
        call = self._pending.pop(name, None)
        if call is not None and call.active():
            call.cancel()
        redistributor = self.active.pop(name, None)
        if redistributor is not None and not redistributor.closed:
            self._removing = True
            try:
                redistributor.queue.remove_consumer(redistributor)
            finally:
                self._removing = False

    def remote_changed(self, address: str) -> None:
        """Remote bindings on ``address`` changed: local queues there may redistribute now."""
        server_address = self.manager.server.addresses.get(address)
        if server_address is None:
            return
        for queue in list(server_address.queues.values()):
            self.consider(queue)

    def stop(self) -> None:
        for name in list(self._pending) + list(self.active):
            self.cancel(name)

    def status(self) -> list:
        return [{"queue": name, "moved": r.moved} for name, r in sorted(self.active.items())]


__all__ = ["Redistribution", "Redistributor", "REDISTRIBUTING_MODES"]
