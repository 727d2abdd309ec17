"""``<configuration-file-refresh-period>``: what a running node takes from an edited broker.xml.

Every refresh period (Artemis's default 5000 ms; ``-1`` turns it off) the
node's :class:`ConfigReloader` checks its users, roles and certificate-user
files (:meth:`~junction.brokercore.security.SecurityManager.refresh_users`)
and the ``stat`` stamp of its broker.xml
(:class:`~junction.config.filewatch.FileWatch`).  When broker.xml changed,
the whole file is loaded and validated again, as at start:

* **Invalid**: nothing changes.  Every error is logged at ERROR with
  ``file:line`` (Artemis's AMQ224069 "Change detected in broker configuration
  file, but reload failed"), and the node's status says so until a valid file
  is saved.
* **Valid**: what Artemis reloads at run time is applied, in its order, each
  part logged as Artemis does ("reloading configuration: security settings"):

  - ``<security-settings>`` replaced: new logins and every next operation of
    the connections already open are checked against the new settings;
  - ``<address-settings>`` replaced: they apply at once (limits, dead-letter
    and expiry addresses, redelivery, auto-create and auto-delete ...);
    sends blocked by a limit that is now higher go through;
  - ``<addresses>``: declared addresses and queues that are missing are
    created and routing types added or removed; what the file no longer
    declares is removed only under the ``config-delete-addresses`` /
    ``config-delete-queues`` ``FORCE`` policies
    (:mod:`junction.brokercore.deploy`).

  Every other change (acceptors, connectors, connection routers, cluster,
  journal, ``<junction>`` ...) is kept for the next start: the log and the
  status name the parts that need a restart.

Artemis also reloads diverts, bridges and acceptors; Junction has no diverts
or bridges, and its acceptors change at a restart.  The checks run on the
reactor through the injected clock; one check costs a ``stat`` per file when
nothing changed.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

from junction.brokercore.deploy import changed_queues, deploy_addresses, undeploy_addresses
from junction.config.filewatch import FileWatch
from junction.config.loader import ConfigErrors, load_config

__all__ = ["MIN_REFRESH_PERIOD_MS", "RELOADED_PARTS", "ConfigReloader", "restart_needed"]

log = logging.getLogger("junction.reload")

#: The shortest refresh period used: a smaller ``configuration-file-refresh-period``
#: is raised to this (a check is a few ``stat`` calls on the reactor thread).
MIN_REFRESH_PERIOD_MS = 100

#: BrokerConfig fields a reload applies, with the element names the log uses.
RELOADED_PARTS = {
    "security_settings": "security settings",
    "address_settings": "address settings",
    "addresses": "addresses",
}
#: fields that are never "changed" for a restart: where the file is, what was logged at
#: start, and the refresh period (applied at once)
_NOT_COMPARED = frozenset({"config_path", "base_dir", "ignored", "configuration_file_refresh_period"})
_LOCATION = re.compile(r"^.*?:\d+: ")


def _comparable(value):
    """``value`` with every ``source`` (file, line) left out, so moving lines is no change."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,) + tuple(
            (f.name, _comparable(getattr(value, f.name)))
            for f in dataclasses.fields(value)
            if f.name != "source"
        )
    if isinstance(value, dict):
        return tuple(sorted(((k, _comparable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_comparable(v) for v in value)
    return value


def _by_key(items, key: str) -> dict:
    """A reloaded list keyed by match or name: its order does not matter."""
    return {getattr(item, key): _comparable(item) for item in items}


def restart_needed(old, new) -> list[str]:
    """The parts of ``new`` that differ from the running ``old`` and take effect only at a restart."""
    changed = []
    for f in dataclasses.fields(old):
        name = f.name
        if name in RELOADED_PARTS or name in _NOT_COMPARED:
            continue
        a, b = getattr(old, name), getattr(new, name)
        if name.endswith("_source"):
            a, b = a is not None, b is not None
        if _comparable(a) != _comparable(b):
            changed.append(name.replace("_", "-"))
    return changed


def _changed_parts(old, new) -> list[str]:
    keys = {"security_settings": "match", "address_settings": "match", "addresses": "name"}
    return [
        part for part, key in keys.items()
        if _by_key(getattr(old, part), key) != _by_key(getattr(new, part), key)
    ]


class ConfigReloader:
    """Checks a node's broker.xml and users files every refresh period and applies changes.

    ``config`` is the running configuration; ``server`` the node's
    :class:`~junction.brokercore.server.BrokerServer` (its ``security`` the
    :class:`~junction.brokercore.security.SecurityManager`).  After a reload
    that changed anything, ``on_applied(config)`` gets the new running
    configuration: the old one with the reloaded parts of the file.
    ``warnings(config)`` lists settings a config gives that have no effect
    (the node logs those of a reloaded file that were not there before).
    """

    def __init__(
        self,
        config,
        server,
        *,
        reactor,
        on_applied: Callable | None = None,
        warnings: Callable | None = None,
        wall: Callable[[], float] | None = None,
    ):
        self.config = config
        self.server = server
        self.security = server.security
        self.reactor = reactor
        self.on_applied = on_applied
        self.warnings = warnings
        #: epoch seconds for the status's "at" (the injected reactor's clock unless given)
        self._wall = wall if wall is not None else reactor.seconds
        self.path = config.config_path
        # not marked as read: the first check loads the file once and finds it unchanged
        # unless it was edited between the node's start and that check
        self.watch = FileWatch([self.path]) if self.path else None
        self.period_ms = config.configuration_file_refresh_period
        self._loop = None
        self.checks = 0
        self.reloads = 0
        self.failures = 0
        #: the last reload: when, its result and what it did or could not do
        self.last: dict | None = None
        #: the parts the file changes that the node applies only at a restart
        self.restart_needed: list[str] = []
        #: the errors of the file on disk (``file:line: message``), None when it is valid
        self.errors: list[str] | None = None

    # -- the timer -----------------------------------------------------------------
    def start(self) -> None:
        """Check every refresh period (nothing when it is ``-1``)."""
        from twisted.internet.task import LoopingCall

        if self.period_ms <= 0 or self._loop is not None:
            return
        period = max(self.period_ms, MIN_REFRESH_PERIOD_MS)
        if period != self.period_ms:
            log.info(
                "configuration-file-refresh-period %d ms raised to %d ms (MIN_REFRESH_PERIOD_MS)",
                self.period_ms, period,
            )
        self._loop = LoopingCall(self._tick)
        self._loop.clock = self.reactor
        self._loop.start(period / 1000.0, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _tick(self) -> None:
        try:
            self.check()
        except Exception:  # the timer must survive whatever one check meets
            log.exception("configuration check failed")

    # -- one check ---------------------------------------------------------------------
    def check(self) -> bool:
        """Refresh the users files and reload broker.xml if it changed; whether it was reloaded."""
        self.checks += 1
        if self.security is not None and self.security.enabled:
            self.security.refresh_users()
        if self.watch is None or not self.watch.changed():
            return False
        self.reload()
        return True

    def reload(self) -> dict | None:
        """Load broker.xml and apply what can be applied at run time; the result (also :attr:`last`).

        None when the file says what the node runs (the first check finds the
        file the node started with, unless it was edited while the node
        recovered its journal; comments and moved lines are no change).
        """
        taken = self.watch.stamps()
        try:
            new = load_config(self.path)
        except ConfigErrors as exc:
            self.watch.read(taken)
            return self._failed([str(e) for e in exc.errors])
        self.watch.read(taken)
        if self.errors is not None:
            log.info("configuration file %s is valid again", self.path)
        self.errors = None
        parts = _changed_parts(self.config, new)
        restart = restart_needed(self.config, new)
        period_changed = new.configuration_file_refresh_period != self.period_ms
        if not (parts or restart or period_changed or restart != self.restart_needed):
            # the file the node runs (comments, moved lines, a touch, a racy stamp read again)
            log.debug("configuration file %s: no change", self.path)
            return None
        log.info("configuration file %s changed: reloading", self.path)
        done, problems = self._apply(new, parts)
        self.restart_needed = restart
        if restart:
            log.warning(
                "%s: changes to %s take effect at the next restart of the node",
                self.path, ", ".join(restart),
            )
        result = "applied" if parts else ("restart needed" if restart else "nothing to apply")
        self.last = {
            "at": round(self._wall(), 3),
            "result": result,
            "applied": [RELOADED_PARTS[p] for p in parts],
            "done": done,
            "problems": problems,
            "restart_needed": restart,
        }
        return self.last

    def _failed(self, errors: list[str]) -> dict:
        if errors != self.errors:
            self.failures += 1
            log.error(
                "configuration file %s changed, but it is not valid: the running configuration is kept "
                "(%d error%s):", self.path, len(errors), "" if len(errors) == 1 else "s",
            )
            for error in errors:
                log.error("  %s", error)
        self.errors = errors
        self.last = {"at": round(self._wall(), 3), "result": "failed", "errors": errors}
        return self.last

    def _apply(self, new, parts: list[str]) -> tuple[list[str], list[str]]:
        """Apply the changed reloadable ``parts`` of ``new``, in Artemis's order."""
        old = self.config
        server = self.server
        done: list[str] = []
        problems: list[str] = []
        if "security_settings" in parts:
            log.info("reloading configuration: security settings")
            if self.security is not None:
                self.security.settings.replace(new.security_settings)
        if "address_settings" in parts:
            log.info("reloading configuration: address settings")
            server.settings.replace(new.address_settings)
        if old.addresses or new.addresses:
            # at every reload, as Artemis: declared addresses and queues removed through the
            # management API since come back.  After the settings: their deletion policies apply.
            log.info("reloading configuration: addresses")
            removed, kept = undeploy_addresses(server, old.addresses, new.addresses)
            for what in removed:
                log.info("undeploying %s", what)
            for what in kept:
                log.info("kept %s: no longer in %s", what, self.path)
            deployed, problems = deploy_addresses(server, new.addresses, exact=True)
            for what in deployed:
                log.info("deploying %s", what)
            problems += changed_queues(server, old.addresses, new.addresses)
            for problem in problems:
                log.warning("%s", problem)
            done = [f"removed {w}" for w in removed] + [f"deployed {w}" for w in deployed]
        if self.warnings is not None:
            before = {_LOCATION.sub("", w) for w in self.warnings(old)}
            for warning in self.warnings(new):
                if _LOCATION.sub("", warning) not in before:
                    log.warning("%s", warning)
        if new.configuration_file_refresh_period != self.period_ms:
            log.info(
                "configuration-file-refresh-period: %d ms (was %d ms)",
                new.configuration_file_refresh_period, self.period_ms,
            )
            self.stop()
            self.period_ms = new.configuration_file_refresh_period
            self.start()
        self.config = dataclasses.replace(
            old,
            security_settings=new.security_settings,
            address_settings=new.address_settings,
            addresses=new.addresses,
            configuration_file_refresh_period=new.configuration_file_refresh_period,
        )
        if parts:
            self.reloads += 1
        if self.on_applied is not None:
            self.on_applied(self.config)
        return done, problems

    def status(self) -> dict:
        """For ``/api/status``: the refresh period, counters, the last reload, errors and what needs a restart."""
        status = {
            "config": self.path,
            "refresh_period_ms": self.period_ms,
            "checks": self.checks,
            "reloads": self.reloads,
            "failures": self.failures,
            "state": "failed" if self.errors else ("restart needed" if self.restart_needed else "ok"),
            "errors": self.errors,
            "restart_needed": self.restart_needed,
            "last": self.last,
        }
        security = self.security
        if security is not None:
            for key, store in (("users", security.user_store), ("certificate_users", security.certificate_users)):
                describe = getattr(store, "status", None)
                if describe is not None:
                    status[key] = describe()
        return status
