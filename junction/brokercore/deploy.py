"""What ``<addresses>`` declares, put into a running broker core: at start and at each reload.

:func:`deploy_addresses` creates the declared addresses and queues that do
not exist (start-up and every configuration reload, as Artemis's
``deployAddressesFromConfiguration``).  :func:`undeploy_addresses` removes
what a reloaded configuration no longer declares, as Artemis's
``undeployAddressesAndQueueNotInConfiguration``, under the address settings'
deletion policies:

* ``config-delete-addresses`` ``FORCE``: an address that is not in the file,
  was not auto-created and is not one of Junction's internal ones
  (``$.junction.``) is removed with its queues and their messages.  As in
  Artemis this includes addresses created through the management API.
* ``config-delete-queues`` ``FORCE``: a queue the previous configuration
  declared on an address and the new one does not is removed with its
  messages.  (Artemis marks such queues "configuration managed" in its
  journal; Junction takes the running configuration's ``<addresses>``.)
* ``OFF`` (the default for both): nothing is removed, and the log says what
  was kept, so an operator can remove it through the management API.

An existing declared queue takes, at start and at each reload, the attributes
Artemis's ``updateQueue`` changes in place that Junction can change in place
(:data:`UPDATED_ATTRIBUTES`: ``exclusive``, ``max-consumers`` -- kept when
more consumers are attached than the new value allows, as Artemis refuses it
-- ``purge-on-no-consumers`` and the grouping attributes); its definition is
stored again.  The others (filter, routing type, user, ring size, last-value,
non-destructive) keep their values, and :func:`changed_queues` reports the
difference.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from junction.brokercore.message_groups import GroupSettings
from junction.brokercore.queue import QueueDefinition
from junction.model import errors

__all__ = ["INTERNAL_PREFIX", "changed_queues", "deploy_addresses", "undeploy_addresses"]

log = logging.getLogger("junction.reload")

#: Junction's own addresses and queues (cluster store-and-forward ...): never undeployed
INTERNAL_PREFIX = "$.junction."


def _types(routing_types) -> str:
    return ",".join(sorted(t.name for t in routing_types))


def _where(item) -> str:
    return f"{item.source[0]}:{item.source[1]}"


def deploy_addresses(server, addresses, *, exact: bool = False) -> tuple[list[str], list[str]]:
    """Create the declared addresses and queues that are missing on ``server``.

    An existing declared address gains the routing types it lacks; an existing
    queue takes the attributes of :data:`UPDATED_ATTRIBUTES` that changed.  With ``exact`` (a reload, as Artemis's
    ``addOrUpdateAddressInfo``) a routing type the address no longer declares
    is removed too, unless a queue of that type is still bound.  Returns
    ``(done, problems)``: what was deployed (for the log) and ``file:line:``
    lines for what could not be.
    """
    done: list[str] = []
    problems: list[str] = []
    for addr in addresses:
        declared = set(addr.routing_types)
        existed = addr.name in server.addresses
        _address, added = server.declare_address(addr.name, declared)
        if not existed:
            done.append(f"address {addr.name} supporting {_types(declared)}")
        elif added:
            done.append(f"address {addr.name} now supporting {_types(added)} too")
        for qc in addr.queues:
            existing = server.queues.get(qc.name)
            if existing is not None:
                if existing.address != addr.name:
                    problems.append(
                        f"{_where(qc)}: queue {qc.name} exists on address {existing.address}, "
                        f"not {addr.name}; left there"
                    )
                else:
                    _update_queue(server, existing, qc, done, problems)
                continue
            defn = QueueDefinition(
                name=qc.name,
                address=addr.name,
                routing_type=qc.routing_type,
                filter=qc.filter,
                durable=qc.durable,
                max_consumers=qc.max_consumers,
                purge_on_no_consumers=qc.purge_on_no_consumers,
                # absent, Artemis's default-exclusive-queue of the address
                exclusive=_declared_exclusive(server, qc, addr.name),
                user=qc.user,
                groups=group_settings(qc),
            )
            try:
                server.create_queue(defn)
            except errors.BrokerError as exc:
                problems.append(f"{_where(qc)}: queue {qc.name}: {exc}")
                continue
            done.append(f"{qc.routing_type.name} queue {qc.name} on address {addr.name}")
        if exact:
            for routing_type in sorted(set(server.addresses[addr.name].routing_types) - declared, key=lambda t: t.name):
                bound = server.remove_routing_type(addr.name, routing_type)
                if bound:
                    problems.append(
                        f"{_where(addr)}: address {addr.name} keeps {routing_type.name}: "
                        f"queue {', '.join(bound)} uses it"
                    )
                else:
                    done.append(f"address {addr.name} no longer supporting {routing_type.name}")
    return done, problems


def _declared_exclusive(server, qc, address: str) -> bool:
    """A ``<queue>``'s ``exclusive``; absent, Artemis's default-exclusive-queue of the address."""
    if "exclusive" in qc.given:
        return qc.exclusive
    return server.settings.resolve(address).default_exclusive_queue


def _update_queue(server, queue, qc, done: list, problems: list) -> None:
    """An existing declared queue takes the attributes Artemis updates in place
    (:data:`UPDATED_ATTRIBUTES`); the definition is stored again if the queue is durable."""
    old = queue.definition
    new = replace(
        old,
        exclusive=_declared_exclusive(server, qc, old.address),
        max_consumers=qc.max_consumers,
        purge_on_no_consumers=qc.purge_on_no_consumers,
        groups=group_settings(qc),
    )
    if new == old:
        return
    if new.max_consumers != -1 and len(queue.consumers) > new.max_consumers:
        problems.append(
            f"{_where(qc)}: queue {qc.name} keeps max-consumers {old.max_consumers}: "
            f"{len(queue.consumers)} consumers are attached, more than {new.max_consumers}"
        )
        new = replace(new, max_consumers=old.max_consumers)
        if new == old:
            return
    queue.reconfigure(new)
    if new.durable and not new.temporary:
        server.storage.update_queue(queue.id, new)
    changes = [
        f"{name} {getattr(new, field)!r}"
        for field, name in UPDATED_ATTRIBUTES.items()
        if getattr(new, field) != getattr(old, field)
    ]
    done.append(f"changes to queue {qc.name}: {', '.join(changes)}")


#: QueueDefinition fields a deploy updates on an existing queue, with their element names
#: (Artemis's ``updateQueue`` also takes filter, routing type, user, ring size,
#: non-destructive and the dispatch delays; Junction keeps those until the queue is remade).
UPDATED_ATTRIBUTES = {
    "exclusive": "exclusive",
    "max_consumers": "max-consumers",
    "purge_on_no_consumers": "purge-on-no-consumers",
    "groups": "grouping",
}


def group_settings(qc) -> GroupSettings | None:
    """The grouping attributes a ``<queue>`` gives (None: all from its address settings)."""
    settings = GroupSettings(
        buckets=qc.group_buckets, rebalance=qc.group_rebalance,
        rebalance_pause_dispatch=qc.group_rebalance_pause_dispatch, first_key=qc.group_first_key,
    )
    return settings if settings.to_record() else None


def undeploy_addresses(server, old_addresses, new_addresses) -> tuple[list[str], list[str]]:
    """Remove what ``new_addresses`` no longer declares, per the deletion policies (module docstring).

    ``old_addresses`` is the running configuration's ``<addresses>``.  Returns
    ``(done, kept)``: what was removed, and what stays because its policy is
    ``OFF`` (both for the log).
    """
    declared = {a.name for a in new_addresses}
    new_queues = {(q.name, a.name) for a in new_addresses for q in a.queues}
    old_queues = {(q.name, a.name) for a in old_addresses for q in a.queues}
    old_names = {a.name for a in old_addresses}
    done: list[str] = []
    kept: list[str] = []
    for name in sorted(server.addresses):
        address = server.addresses.get(name)
        if address is None or name.startswith(INTERNAL_PREFIX):
            continue
        settings = server.settings_for(name)
        if name not in declared and not address.auto_created:
            if settings.config_delete_addresses == "FORCE":
                for queue in sorted(address.queues):
                    server.destroy_queue(queue)
                    done.append(f"queue {queue}")
                server.delete_address(name)
                done.append(f"address {name}")
                continue
            if name in old_names:
                kept.append(f"address {name} (config-delete-addresses OFF)")
        for queue in sorted(address.queues):
            if (queue, name) not in old_queues or (queue, name) in new_queues:
                continue
            if settings.config_delete_queues == "FORCE":
                server.destroy_queue(queue)
                done.append(f"queue {queue}")
            else:
                kept.append(f"queue {queue} (config-delete-queues OFF)")
    return done, kept


def changed_queues(server, old_addresses, new_addresses) -> list[str]:
    """Declared queues that exist and whose declaration changed: not applied (see the module docstring)."""
    before = {(q.name, a.name): q for a in old_addresses for q in a.queues}
    changed = []
    for addr in new_addresses:
        for qc in addr.queues:
            old = before.get((qc.name, addr.name))
            if old is None or qc.name not in server.queues:
                continue
            if _declaration(old) != _declaration(qc):
                changed.append(
                    f"{_where(qc)}: queue {qc.name} changed; the existing queue keeps its filter, routing type, "
                    "user, ring size, last-value and non-destructive attributes "
                    "(remove it through the management API and the next reload creates it anew)"
                )
    return changed


def _declaration(qc) -> tuple:
    """What of a ``<queue>`` an existing queue does not take at run time (the rest: UPDATED_ATTRIBUTES)."""
    return (
        qc.routing_type, qc.filter, qc.durable, qc.user, qc.last_value, qc.last_value_key,
        qc.non_destructive, qc.ring_size,
    )
