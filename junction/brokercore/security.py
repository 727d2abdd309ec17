"""Authentication and role-based authorization, as Artemis's ``SecurityStoreImpl``.

A connection authenticates once (:meth:`SecurityManager.authenticate`) and
gets a :class:`Principal`; every operation on an address is then checked
(:meth:`SecurityManager.check`) against the ``<security-setting>`` blocks of
``broker.xml``:

* the *most specific* matching block applies whole; permissions are not
  inherited from less specific blocks (security.adoc, "settings are not
  inherited"), so a narrower block can deny by leaving a permission out;
* an address no block matches grants nothing (Artemis's default is an empty
  role set);
* when a queue is named and a block matches the FQQN ``address::queue``
  *exactly*, that block is used instead of the address's (security.adoc,
  "fine-grained security using a fully qualified queue name"; wildcards do
  not apply to FQQNs);
* a permission is granted when the user has any of the roles the block lists
  for it.

With security disabled (``<security-enabled>false``) every login is accepted
and :meth:`SecurityManager.check` never raises.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from junction.brokercore.wildcard import (
    DEFAULT_SYNTAX,
    FQQN_SEPARATOR,
    BoundedLRU,
    SettingsRepository,
    WildcardSyntax,
    split_fqqn,
)
from junction.config.model import PERMISSION_TYPES, SecuritySetting

__all__ = [
    "AUTHORIZATION_CACHE_SIZE",
    "CHECK_TYPE_NAMES",
    "Principal",
    "SecurityError",
    "SecurityManager",
    "UserStore",
]

#: How many authorization decisions are remembered (LRU).  Artemis's
#: ``authorization-cache-size`` defaults to 1000 as well.
AUTHORIZATION_CACHE_SIZE = 1000
#: successful logins remembered at most (Artemis's authentication-cache-size default)
AUTHENTICATION_CACHE_SIZE = 1000
#: seconds a remembered login stays valid (Artemis's security-invalidation-interval, 10000 ms)
SECURITY_INVALIDATION_INTERVAL = 10.0

#: Artemis's ``CheckType`` name of each permission type, as its error
#: messages print it (``permission='SEND'``).
CHECK_TYPE_NAMES = {
    "send": "SEND",
    "consume": "CONSUME",
    "createAddress": "CREATE_ADDRESS",
    "deleteAddress": "DELETE_ADDRESS",
    "createDurableQueue": "CREATE_DURABLE_QUEUE",
    "deleteDurableQueue": "DELETE_DURABLE_QUEUE",
    "createNonDurableQueue": "CREATE_NON_DURABLE_QUEUE",
    "deleteNonDurableQueue": "DELETE_NON_DURABLE_QUEUE",
    "manage": "MANAGE",
    "browse": "BROWSE",
    "view": "VIEW",
    "edit": "EDIT",
}


class UserStore(Protocol):
    """What the security manager needs from the user/role files."""

    def authenticate(self, user: str, password: str) -> bool: ...

    def roles_of(self, user: str) -> frozenset: ...


@dataclass(frozen=True)
class Principal:
    """An authenticated connection's identity: user name (None if anonymous
    with security disabled) and role names."""

    user: str | None
    roles: frozenset[str] = frozenset()


class SecurityError(Exception):
    """A user lacks a permission (Artemis ``ActiveMQSecurityException``).

    The message is Artemis's: AMQ229032 for an address, AMQ229213 when a
    queue was named.  ``code`` is that Artemis id, for protocol adapters that
    map it to their own error (STOMP ERROR, AMQP ``unauthorized-access``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "AMQ229032",
        user: str | None = None,
        permission: str | None = None,
        address: str | None = None,
        queue: str | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.user = user
        self.permission = permission
        self.address = address
        self.queue = queue


class SecurityManager:
    """Authenticates logins and checks permissions for one broker node.

    ``security_settings`` is either the node's ``SecuritySetting`` tuple or an
    existing :class:`SettingsRepository` of them (changes to it, such as a
    configuration reload, clear this manager's decision cache).  Decisions
    are cached per (roles, permission, address, queue), at most
    ``cache_size`` of them (LRU); a decision depends only on those and the
    settings, so a user whose roles change simply misses the cache.

    Successful logins are cached too, as Artemis's authentication cache
    does: checking a hashed password (PBKDF2, 1024 rounds, Artemis's
    ``ENC()`` format) costs milliseconds, and a gateway and the core it
    forwards to would pay it on every connection.  At most
    ``authentication_cache_size`` logins (LRU) are kept for
    ``invalidation_interval`` seconds each (Artemis's
    ``security-invalidation-interval``); the key is the user name and an
    HMAC of the password under a key drawn at start, so the cache never
    holds a password.  Failed logins are never cached, and
    :meth:`invalidate` forgets everything.
    """

    def __init__(
        self,
        user_store: UserStore,
        security_settings: Iterable[SecuritySetting] | SettingsRepository[SecuritySetting],
        syntax: WildcardSyntax = DEFAULT_SYNTAX,
        enabled: bool = True,
        anonymous_user: str | None = None,
        *,
        cache_size: int = AUTHORIZATION_CACHE_SIZE,
        authentication_cache_size: int = AUTHENTICATION_CACHE_SIZE,
        invalidation_interval: float = SECURITY_INVALIDATION_INTERVAL,
        clock=None,
        certificate_users=None,
    ):
        self.user_store = user_store
        #: certificate login (:class:`junction.config.certusers.CertificateUsers`), or None
        self.certificate_users = certificate_users
        self._logins = BoundedLRU(authentication_cache_size if invalidation_interval > 0 else 0)
        self._login_key = os.urandom(32)
        self._invalidation_interval = invalidation_interval
        self._now = clock.seconds if clock is not None else time.monotonic
        self.enabled = enabled
        self.anonymous_user = anonymous_user
        if isinstance(security_settings, SettingsRepository):
            self.settings: SettingsRepository[SecuritySetting] = security_settings
        else:
            self.settings = SettingsRepository(security_settings, syntax)
        self._decisions = BoundedLRU(cache_size)
        #: bumped whenever cached decisions become invalid, so that callers
        #: that remember grants (a session's sends) know to ask again
        self.generation = 0
        self.settings.add_listener(self.invalidate)

    # -- authentication ---------------------------------------------------

    def refresh_users(self) -> bool:
        """Read the users, roles and certificate-user files again if they changed.

        A store that reloads (:class:`junction.config.reloading.ReloadingUserStore`)
        has a ``refresh()``; others are left as they are.  Called at every login,
        as Artemis's properties login module with ``reload=true`` checks at every
        login, and by the node's periodic configuration check.  When a file
        changed, every remembered login is forgotten, so a removed user or a
        changed password is refused from the next login on; sessions already
        open stay, as in Artemis.  Cost when nothing changed: a ``stat`` per file.
        """
        changed = False
        for store in (self.user_store, self.certificate_users):
            refresh = getattr(store, "refresh", None)
            if refresh is not None and refresh():
                changed = True
        if changed:
            self._logins.clear()
        return changed

    def authenticate(self, user: str | None, password: str | None) -> Principal | None:
        """The principal for a login, or None if the login must be refused.

        * Security disabled: always accepted, as the user given (None for no
          login) with no roles -- Artemis does not validate anything then.
        * Security enabled, no login (None or empty user name): accepted only
          when ``anonymous_user`` is configured, as that user with its roles
          (Artemis's guest login module).
        * Otherwise the user store must accept the password (a missing
          password is tried as empty); a wrong one gives None.
        """
        if not user:
            user = None
        if not self.enabled:
            return Principal(user, frozenset())
        self.refresh_users()
        if user is None:
            if self.anonymous_user is None:
                return None
            return Principal(
                self.anonymous_user, frozenset(self.user_store.roles_of(self.anonymous_user))
            )
        password = "" if password is None else password
        key = (user, hmac.new(self._login_key, password.encode("utf-8", "surrogatepass"), "sha256").digest())
        now = self._now()
        valid_until = self._logins.get(key)
        if valid_until is None or now >= valid_until:
            if not self.user_store.authenticate(user, password):
                return None
            self._logins.put(key, now + self._invalidation_interval)
        return Principal(user, frozenset(self.user_store.roles_of(user)))

    def authenticate_certificate(self, subject: str | None) -> Principal | None:
        """The principal of a client that presented a verified certificate with this subject DN.

        Artemis's ``TextFileCertificateLoginModule``: the certificate users
        file maps the DN to a user, the certificate roles file gives its
        roles.  None when there is no certificate, no certificate login, or
        no entry for the DN.  With security disabled any certificate (or
        none) is accepted, as the mapped user when there is one.
        """
        user = None
        if subject is not None and self.certificate_users is not None:
            if self.enabled:
                self.refresh_users()
            user = self.certificate_users.user_for(subject)
        if not self.enabled:
            return Principal(user, frozenset())
        if user is None:
            return None
        return Principal(user, frozenset(self.certificate_users.roles_of(user)))

    def login(self, user: str | None, password: str | None, certificate_subject: str | None = None) -> Principal | None:
        """A connection's login: by certificate when it gave no user name and its certificate maps to
        a user, else by user name and password (:meth:`authenticate`, anonymous included)."""
        if not user and certificate_subject is not None and self.certificate_users is not None:
            principal = self.authenticate_certificate(certificate_subject)
            if principal is not None:
                return principal
        return self.authenticate(user, password)

    # -- authorization ----------------------------------------------------

    def invalidate(self) -> None:
        """Forget every cached decision and login (settings, users or roles changed)."""
        self._decisions.clear()
        self._logins.clear()
        self.generation += 1

    def allowed_roles(
        self, permission: str, address: str, queue: str | None = None
    ) -> frozenset[str]:
        """The roles granted ``permission`` on ``address`` (and ``queue``, if named)."""
        setting = None
        if queue is not None:
            fqqn = f"{address}{FQQN_SEPARATOR}{queue}"
            if self.settings.contains_exact(fqqn):
                setting = self.settings.match(fqqn)
        if setting is None:
            setting = self.settings.match(address)
        if setting is None:
            return frozenset()
        return frozenset(setting.permissions.get(permission, ()))

    def is_allowed(
        self, principal: Principal | None, permission: str, address: str, queue: str | None = None
    ) -> bool:
        """Like :meth:`check` but answers instead of raising."""
        try:
            self.check(principal, permission, address, queue)
        except SecurityError:
            return False
        return True

    def check(
        self, principal: Principal | None, permission: str, address: str, queue: str | None = None
    ) -> None:
        """Raise :class:`SecurityError` unless ``principal`` may do ``permission``.

        ``permission`` is one of :data:`~junction.config.model.PERMISSION_TYPES`
        (anything else is a programming error: ``ValueError``).  ``address``
        may be an FQQN ``address::queue``; its queue part then counts as
        ``queue`` unless one is given, as Artemis splits composite addresses.
        A ``None`` principal (never authenticated) is refused.
        """
        if permission not in PERMISSION_TYPES:
            raise ValueError(f"unknown permission type {permission!r}")
        if not self.enabled:
            return
        address, fq_queue = split_fqqn(address)
        if queue is None:
            queue = fq_queue
        else:
            queue = split_fqqn(queue)[1] or queue
        roles = principal.roles if principal is not None else frozenset()
        key = (roles, permission, address, queue)
        granted = self._decisions.get(key)
        if granted is None:
            granted = principal is not None and not roles.isdisjoint(
                self.allowed_roles(permission, address, queue)
            )
            if principal is not None:
                self._decisions.put(key, granted)
        if granted:
            return
        user = principal.user if principal is not None else None
        check_type = CHECK_TYPE_NAMES[permission]
        if queue is None:
            code = "AMQ229032"
            message = (
                f"{code}: User: {user} does not have permission='{check_type}' on address {address}"
            )
        else:
            code = "AMQ229213"
            message = (
                f"{code}: User: {user} does not have permission='{check_type}' "
                f"for queue {queue} on address {address}"
            )
        raise SecurityError(
            message, code=code, user=user, permission=permission, address=address, queue=queue
        )

    @property
    def cache_size(self) -> int:
        """How many decisions are cached now (for tests and management)."""
        return len(self._decisions)
