"""Users, roles and certificate-user files that are read again when they change.

Artemis's ``PropertiesLoginModule`` with ``reload=true`` (what ``artemis
create`` writes into ``login.config``) checks the modification time of
``artemis-users.properties`` and ``artemis-roles.properties`` at each login
and reads them again when they changed; its configuration reload also checks
them every ``configuration-file-refresh-period``.  Junction does the same:

* :meth:`ReloadingFiles.refresh` costs one ``stat`` per file when nothing
  changed (:class:`~junction.config.filewatch.FileWatch`); the files are read
  and parsed only when a stamp changed.  The security manager calls it at
  every login and the node's configuration reloader at every refresh period.
* Connections already authenticated keep their session, as in Artemis; new
  logins see the new users at once.  (Artemis keeps a login cached for
  ``security-invalidation-interval`` even after its user was removed; the
  security manager here forgets its cached logins when the files change.)
* **Invalid files keep the previous users.**  A file caught half-written,
  deleted and not yet written again, or with a mistake (a malformed
  ``ENC(...)`` hash, a bad ``\\u`` escape or regexp, an ``anonymous-user``
  that is not in it) is refused whole: the users loaded before stay in force,
  the problem is logged at ERROR with ``file:line`` once, and shown in the
  node's status until the files are fixed.  A users file that has no users
  at all while the previous one had some is refused the same way: it is far
  more likely a file truncated for rewriting than a wish to lock everyone out.

No Twisted and no timers here: callers decide when to check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from junction.config.filewatch import FileWatch
from junction.config.loader import ConfigErrors, load_certificate_users, load_user_store

__all__ = [
    "ReloadingCertificateUsers",
    "ReloadingFiles",
    "ReloadingUserStore",
    "watch_certificate_users",
    "watch_user_store",
]

log = logging.getLogger("junction.reload")

T = TypeVar("T")


class ReloadingFiles(Generic[T]):
    """A value loaded from a few files, loaded again when they change (see the module docstring).

    ``load()`` reads the files and returns the value, or raises
    :class:`~junction.config.loader.ConfigErrors`; ``check(new, old)`` may
    return more problems that make ``new`` unusable.  ``current`` is the value
    already loaded at start, if any: it is kept until the files are first
    checked, and replaced then only if they now say something else.
    """

    def __init__(
        self,
        what: str,
        paths: Iterable[str],
        load: Callable[[], T],
        *,
        current: T | None = None,
        check: Callable[[T, T | None], list[str]] | None = None,
        wall_ns: Callable[[], int] = time.time_ns,
    ):
        self.what = what
        self._load = load
        self._check = check
        self._wall_ns = wall_ns
        self.watch = FileWatch(paths, wall_ns=wall_ns)
        if current is None:
            taken = self.watch.stamps()
            current = load()  # a problem at start stops the node, as before
            self.watch.read(taken)
        #: the value in force
        self.current: T = current
        self.loaded_at = wall_ns() / 1e9
        #: times the files were read again and said something new; times they could not be used
        self.reloads = 0
        self.failures = 0
        #: the problems of the last attempt that failed (``file:line: message``), None once fixed
        self.error: list[str] | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return self.watch.paths

    def refresh(self) -> bool:
        """Read the files again if they changed; True when the value in force was replaced."""
        if not self.watch.changed():
            return False
        taken = self.watch.stamps()
        try:
            value = self._load()
            problems = self._check(value, self.current) if self._check is not None else []
        except ConfigErrors as exc:
            problems = [str(e) for e in exc.errors]
        # the files as read, used or not: while they stay as they are, a check costs a stat
        self.watch.read(taken)
        if problems:
            self._failed(problems)
            return False
        if self.error is not None:
            log.info("%s fixed: %s", self.what, ", ".join(self.paths))
        self.error = None
        if value == self.current:
            return False
        self.current = value
        self.loaded_at = self._wall_ns() / 1e9
        self.reloads += 1
        log.info("%s reloaded: %s", self.what, self._describe(value))
        return True

    def _failed(self, problems: list[str]) -> None:
        if problems != self.error:  # said once per distinct problem, not at every login
            self.failures += 1
            log.error(
                "%s changed but cannot be used; keeping %s loaded before:",
                self.what, self._describe(self.current),
            )
            for problem in problems:
                log.error("  %s", problem)
        self.error = problems

    def _describe(self, value: T) -> str:
        return ", ".join(self.paths)

    def status(self) -> dict:
        """For the node's ``/api/status``: the files, when they were loaded, reloads and problems."""
        return {
            "files": list(self.paths),
            "loaded_at": round(self.loaded_at, 3),
            "reloads": self.reloads,
            "failures": self.failures,
            "error": self.error,
        }


class ReloadingUserStore(ReloadingFiles):
    """The users and roles files as a user store (``authenticate``, ``roles_of``, ``users``)."""

    def authenticate(self, user: str, password: str) -> bool:
        return self.current.authenticate(user, password)

    def roles_of(self, user: str) -> frozenset:
        return self.current.roles_of(user)

    @property
    def users(self) -> frozenset:
        return self.current.users

    def _describe(self, value) -> str:
        count = len(value.users)
        return f"{count} user{'' if count == 1 else 's'} from {', '.join(self.paths)}"

    def status(self) -> dict:
        status = super().status()
        status["users"] = len(self.current.users)
        return status


class ReloadingCertificateUsers(ReloadingFiles):
    """The certificate users and roles files (``user_for``, ``roles_of``)."""

    def user_for(self, subject: str) -> str | None:
        return self.current.user_for(subject)

    def roles_of(self, user: str) -> frozenset:
        return self.current.roles_of(user)


def _users_check(new, old) -> list[str]:
    """An empty users file replacing a non-empty one is refused (see the module docstring)."""
    if old is not None and not new.users and old.users:
        return [
            "the users file has no users (a file being written?); to remove the last user, "
            "remove it and restart the node"
        ]
    return []


def watch_user_store(config, current=None, *, wall_ns: Callable[[], int] = time.time_ns) -> ReloadingUserStore:
    """The users and roles files ``config`` names, read again when they change."""
    what = "users and roles files"
    return ReloadingUserStore(
        what,
        (config.users_file, config.roles_file),
        lambda: load_user_store(config),
        current=current,
        check=_users_check,
        wall_ns=wall_ns,
    )


def watch_certificate_users(config, current=None, *, wall_ns: Callable[[], int] = time.time_ns):
    """The certificate users and roles files ``config`` names (None when it names none)."""
    if not config.cert_users_file:
        return None
    paths = [config.cert_users_file] + ([config.cert_roles_file] if config.cert_roles_file else [])
    return ReloadingCertificateUsers(
        "certificate users and roles files",
        paths,
        lambda: load_certificate_users(config),
        current=current,
        wall_ns=wall_ns,
    )
