"""Authentication and authorization, following Artemis's security.adoc."""

from __future__ import annotations

import pytest

from junction.brokercore.security import (
    CHECK_TYPE_NAMES,
    Principal,
    SecurityError,
    SecurityManager,
)
from junction.brokercore.wildcard import SettingsRepository, WildcardSyntax
from junction.config.model import PERMISSION_TYPES, SecuritySetting


class FakeUserStore:
    """Stands in for junction.config.properties.UserStore."""

    def __init__(self, users: dict[str, tuple[str, set[str]]]):
        self.users = users
        self.auth_calls = 0

    def authenticate(self, user: str, password: str) -> bool:
        self.auth_calls += 1
        return user in self.users and self.users[user][0] == password

    def roles_of(self, user: str) -> frozenset:
        return frozenset(self.users.get(user, ("", set()))[1])


USERS = FakeUserStore(
    {
        "admin": ("secret", {"admin"}),
        "eve": ("pw", {"europe-users"}),
        "guest": ("", {"guest"}),
        "nobody": ("x", set()),
    }
)


def perms(**kw) -> dict:
    return {k: frozenset(v) for k, v in kw.items()}


# security.adoc's example blocks
DOC_SETTINGS = [
    SecuritySetting(
        "globalqueues.europe.#",
        perms(
            createDurableQueue={"admin"},
            deleteDurableQueue={"admin"},
            createNonDurableQueue={"admin", "guest", "europe-users"},
            deleteNonDurableQueue={"admin", "guest", "europe-users"},
            send={"admin", "europe-users"},
            consume={"admin", "europe-users"},
        ),
    ),
    SecuritySetting(
        "globalqueues.europe.orders.#", perms(send={"europe-users"}, consume={"europe-users"})
    ),
]


def manager(settings=DOC_SETTINGS, **kw) -> SecurityManager:
    return SecurityManager(USERS, settings, WildcardSyntax(), **kw)


def P(user: str) -> Principal:
    return Principal(user, USERS.roles_of(user))


# --------------------------------------------------------------------------
# authentication
# --------------------------------------------------------------------------


def test_authenticate_good_and_bad_password():
    sm = manager()
    assert sm.authenticate("admin", "secret") == Principal("admin", frozenset({"admin"}))
    assert sm.authenticate("admin", "wrong") is None
    assert sm.authenticate("ghost", "secret") is None
    assert sm.authenticate("admin", None) is None


def test_anonymous_refused_without_anonymous_user():
    sm = manager()
    assert sm.authenticate(None, None) is None
    assert sm.authenticate("", "") is None


def test_anonymous_becomes_anonymous_user():
    sm = manager(anonymous_user="guest")
    assert sm.authenticate(None, None) == Principal("guest", frozenset({"guest"}))
    assert sm.authenticate("", None) == Principal("guest", frozenset({"guest"}))
    # a wrong password is still refused, not downgraded to the anonymous user
    assert sm.authenticate("admin", "wrong") is None


def test_security_disabled_accepts_everyone():
    sm = manager(enabled=False)
    assert sm.authenticate("admin", "wrong") == Principal("admin", frozenset())
    assert sm.authenticate("whoever", None) == Principal("whoever", frozenset())
    assert sm.authenticate(None, None) == Principal(None, frozenset())


# --------------------------------------------------------------------------
# authorization
# --------------------------------------------------------------------------


def test_doc_example_permissions():
    sm = manager()
    sm.check(P("admin"), "createDurableQueue", "globalqueues.europe.x")
    sm.check(P("eve"), "send", "globalqueues.europe.x")
    sm.check(P("guest"), "createNonDurableQueue", "globalqueues.europe.x")
    with pytest.raises(SecurityError):
        sm.check(P("guest"), "send", "globalqueues.europe.x")
    with pytest.raises(SecurityError):
        sm.check(P("eve"), "createDurableQueue", "globalqueues.europe.x")


def test_most_specific_wins_without_inheritance():
    # security.adoc: for globalqueues.europe.orders.plastics the only permissions
    # are send and consume for europe-users; nothing is inherited.
    sm = manager()
    addr = "globalqueues.europe.orders.plastics"
    sm.check(P("eve"), "send", addr)
    sm.check(P("eve"), "consume", addr)
    with pytest.raises(SecurityError):
        sm.check(P("admin"), "send", addr)
    with pytest.raises(SecurityError):
        sm.check(P("eve"), "createNonDurableQueue", addr)
    with pytest.raises(SecurityError):
        sm.check(P("admin"), "createDurableQueue", addr)


def test_no_matching_setting_denies():
    sm = manager()
    with pytest.raises(SecurityError):
        sm.check(P("admin"), "send", "elsewhere")


def test_precedence_exact_over_wildcards():
    settings = [
        SecuritySetting("#", perms(send={"r0"})),
        SecuritySetting("a.#", perms(send={"r1"})),
        SecuritySetting("a.b.#", perms(send={"r2"})),
        SecuritySetting("a.b.*", perms(send={"r3"})),
        SecuritySetting("a.b.c", perms(send={"r4"})),
    ]
    sm = manager(settings)
    expectations = {"a.b.c": "r4", "a.b.x": "r3", "a.b": "r2", "a.x": "r1", "z": "r0"}
    for address, role in expectations.items():
        assert sm.allowed_roles("send", address) == {role}, address
        sm.check(Principal("u", frozenset({role})), "send", address)
        with pytest.raises(SecurityError):
            sm.check(
                Principal("u", frozenset({"r0", "r1", "r2", "r3", "r4"} - {role})), "send", address
            )


def test_error_message_is_artemis():
    sm = manager([SecuritySetting("orders", perms(consume={"admin"}))])
    with pytest.raises(SecurityError) as info:
        sm.check(P("admin"), "send", "orders")
    assert (
        str(info.value)
        == "AMQ229032: User: admin does not have permission='SEND' on address orders"
    )
    assert info.value.code == "AMQ229032"
    assert (info.value.user, info.value.permission, info.value.address) == (
        "admin",
        "send",
        "orders",
    )
    with pytest.raises(SecurityError) as info:
        sm.check(P("eve"), "consume", "orders", "q1")
    assert str(info.value) == (
        "AMQ229213: User: eve does not have permission='CONSUME' for queue q1 on address orders"
    )
    assert info.value.code == "AMQ229213"


def test_fqqn_fine_grained():
    # security.adoc "fine-grained security using a fully qualified queue name"
    settings = [
        SecuritySetting("foo", perms(send={"fooRole"}, consume={"fooRole"})),
        SecuritySetting("foo::q1", perms(consume={"q1Role"}, send={"q1Role"})),
        SecuritySetting("foo::q2", perms(consume={"q2Role"})),
    ]
    sm = manager(settings)
    q1 = Principal("a", frozenset({"q1Role"}))
    q2 = Principal("b", frozenset({"q2Role"}))
    foo = Principal("c", frozenset({"fooRole"}))
    sm.check(q1, "consume", "foo", "q1")
    sm.check(q2, "consume", "foo", "q2")
    with pytest.raises(SecurityError):
        sm.check(q1, "consume", "foo", "q2")
    with pytest.raises(SecurityError):
        sm.check(foo, "consume", "foo", "q1")  # the FQQN setting replaces the address's
    # a queue without its own FQQN setting falls back to the address
    sm.check(foo, "consume", "foo", "q3")
    # sending to the address as a whole only needs the address permission
    sm.check(foo, "send", "foo")
    with pytest.raises(SecurityError):
        sm.check(q1, "send", "foo")
    # the FQQN may also be given as the address
    sm.check(q1, "send", "foo::q1")
    with pytest.raises(SecurityError) as info:
        sm.check(foo, "send", "foo::q1")
    assert info.value.queue == "q1" and info.value.address == "foo"


def test_fqqn_wildcards_do_not_apply():
    settings = [
        SecuritySetting("foo.#", perms(consume={"addr"})),
        SecuritySetting("foo.*::q1", perms(consume={"fq"})),
    ]
    sm = manager(settings)
    sm.check(Principal("u", frozenset({"addr"})), "consume", "foo.bar", "q1")
    with pytest.raises(SecurityError):
        sm.check(Principal("u", frozenset({"fq"})), "consume", "foo.bar", "q1")


def test_disabled_never_raises():
    sm = manager(enabled=False)
    sm.check(None, "send", "anything")
    sm.check(Principal(None), "deleteAddress", "x", "q")


def test_unauthenticated_principal_refused():
    sm = manager()
    with pytest.raises(SecurityError, match="User: None"):
        sm.check(None, "send", "globalqueues.europe.x")


def test_unknown_permission_is_a_bug():
    with pytest.raises(ValueError):
        manager().check(P("admin"), "publish", "x")


def test_permission_names_cover_config():
    assert set(CHECK_TYPE_NAMES) == set(PERMISSION_TYPES)
    assert CHECK_TYPE_NAMES["createNonDurableQueue"] == "CREATE_NON_DURABLE_QUEUE"


def test_custom_syntax():
    sm = SecurityManager(
        USERS, [SecuritySetting("news/!", perms(send={"r"}))], WildcardSyntax("/", "!", "+")
    )
    sm.check(Principal("u", frozenset({"r"})), "send", "news/europe/sport")
    with pytest.raises(SecurityError):
        sm.check(Principal("u", frozenset({"r"})), "send", "sports/news")


def test_decision_cache_bounded_and_invalidated():
    repo = SettingsRepository([SecuritySetting("#", perms(send={"r"}))])
    sm = SecurityManager(USERS, repo, WildcardSyntax(), cache_size=5)
    who = Principal("u", frozenset({"r"}))
    for i in range(50):
        sm.check(who, "send", f"a.{i}")
    assert sm.cache_size == 5
    # a settings change clears cached decisions
    repo.add(SecuritySetting("a.#", perms(send={"other"})))
    assert sm.cache_size == 0
    with pytest.raises(SecurityError):
        sm.check(who, "send", "a.1")
    # denials are cached too, and still raise from the cache
    with pytest.raises(SecurityError):
        sm.check(who, "send", "a.1")
    repo.remove("a.#")
    sm.check(who, "send", "a.1")


def test_cache_keyed_by_roles_not_user():
    sm = manager()
    sm.check(Principal("x", frozenset({"admin"})), "send", "globalqueues.europe.a")
    with pytest.raises(SecurityError):
        sm.check(Principal("x", frozenset({"guest"})), "send", "globalqueues.europe.a")


def test_is_allowed():
    sm = manager()
    assert sm.is_allowed(P("eve"), "send", "globalqueues.europe.a")
    assert not sm.is_allowed(P("nobody"), "send", "globalqueues.europe.a")


# -- the authentication cache (Artemis's authentication-cache-size, security-invalidation-interval)
class _Clock:
    def __init__(self):
        self.now = 100.0

    def seconds(self):
        return self.now


def test_a_successful_login_is_remembered_for_the_invalidation_interval():
    store = FakeUserStore({"admin": ("secret", {"admin"})})
    clock = _Clock()
    sm = SecurityManager(store, DOC_SETTINGS, WildcardSyntax(), invalidation_interval=10.0, clock=clock)
    assert sm.authenticate("admin", "secret") == Principal("admin", frozenset({"admin"}))
    assert store.auth_calls == 1
    clock.now += 9.9
    assert sm.authenticate("admin", "secret").user == "admin"
    assert store.auth_calls == 1  # from the cache
    assert sm.authenticate("admin", "wrong") is None  # another password is checked, and refused
    assert sm.authenticate("admin", "wrong") is None
    assert store.auth_calls == 3  # failures are never cached
    clock.now += 0.2  # the interval has passed: checked again
    assert sm.authenticate("admin", "secret").user == "admin"
    assert store.auth_calls == 4


def test_a_changed_password_takes_effect_once_the_cache_is_invalidated():
    store = FakeUserStore({"admin": ("secret", {"admin"})})
    sm = SecurityManager(store, DOC_SETTINGS, WildcardSyntax(), clock=_Clock())
    assert sm.authenticate("admin", "secret") is not None
    store.users["admin"] = ("new", {"admin"})
    sm.invalidate()
    assert sm.authenticate("admin", "secret") is None
    assert sm.authenticate("admin", "new") is not None


def test_the_login_cache_is_bounded_and_can_be_turned_off():
    users = {f"u{i}": ("pw", set()) for i in range(5)}
    store = FakeUserStore(users)
    sm = SecurityManager(store, DOC_SETTINGS, WildcardSyntax(), authentication_cache_size=2, clock=_Clock())
    for name in users:
        sm.authenticate(name, "pw")
    assert len(sm._logins) == 2
    assert all(b"pw" not in repr(key).encode() for key in sm._logins._data)  # no password kept
    off = SecurityManager(store, DOC_SETTINGS, WildcardSyntax(), invalidation_interval=0, clock=_Clock())
    calls = store.auth_calls
    off.authenticate("u1", "pw")
    off.authenticate("u1", "pw")
    assert store.auth_calls == calls + 2
