"""Connection-router policies: Artemis's policy tests, hashing, distribution, registry."""

from __future__ import annotations

import random
from collections import Counter
from importlib import metadata
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from junction.routing import policies
from junction.routing.policies import (
    ENTRY_POINT_GROUP,
    ConsistentHashModuloPolicy,
    ConsistentHashPolicy,
    FirstElementPolicy,
    LeastConnectionsPolicy,
    Policy,
    PolicyLoadError,
    PolicyPropertyError,
    RoundRobinPolicy,
    UnknownPolicyError,
    create_policy,
    fnv1a_32,
    murmur3_32,
    policy_names,
    target_identity,
)
from junction.routing.targets import Target

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def make_targets(n: int, prefix: str = "node") -> list[Target]:
    return [
        Target(connector=SimpleNamespace(name=f"c{i}"), node_id=f"{prefix}-{i}", ready=True)
        for i in range(n)
    ]


def all_policies():
    """One of each policy that selects targets (the modulo policy never does)."""
    return [
        FirstElementPolicy(),
        RoundRobinPolicy(rng=random.Random(1)),
        LeastConnectionsPolicy(rng=random.Random(1)),
        ConsistentHashPolicy(),
        ConsistentHashPolicy({"HASH": "FNV1A"}),
    ]


# -- hash functions --------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("a", -468965076),  # 0xe40c292c as a signed int
        ("AAA", -1233065086),
        ("BBB", -1653294843),
        ("admin", 885536276),
        ("test", -1345293851),
        ("node-a", 79934867),
        ("node-b", 96712486),
        ("node-c", 113490105),
        ("", -2128831035),  # the offset basis, signed
    ],
)
def test_fnv1a_matches_artemis(text, value):
    assert fnv1a_32(text) == value


def test_fnv1a_of_a_is_0xe40c292c():
    assert fnv1a_32("a") & 0xFFFFFFFF == 0xE40C292C


def test_fnv1a_iterates_utf16_code_units_like_java():
    # U+1F600 is the surrogate pair D83D DE00 in a Java string
    def by_units(units):
        h = 0x811C9DC5
        for unit in units:
            h = ((h ^ unit) * 0x01000193) & 0xFFFFFFFF
        return h - (1 << 32) if h >= 1 << 31 else h

    assert fnv1a_32("\U0001f600") == by_units([0xD83D, 0xDE00])
    assert fnv1a_32("é") == by_units([0xE9])
    assert fnv1a_32("\ud800") == by_units([0xD800])  # a lone surrogate hashes too


@given(st.text())
def test_fnv1a_is_a_signed_32_bit_int(text):
    assert INT_MIN <= fnv1a_32(text) <= INT_MAX


@pytest.mark.parametrize(
    "data, seed, value",
    [
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"hello", 0, 0x248BFA47),
        (b"Hello, world!", 1234, 0xFAF6CDB3),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
        (b"\x21\x43\x65", 0, 0x7E4A8634),
        (b"\x21\x43", 0, 0xA0F7B07A),
        (b"\x21", 0, 0x72661CF4),
    ],
)
def test_murmur3_known_values(data, seed, value):
    assert murmur3_32(data, seed) == value
    assert policies._murmur3_32_py(data, seed) == value


@given(st.binary(max_size=64), st.integers(0, 2**32 - 1))
def test_pure_python_murmur3_equals_the_extension(data, seed):
    assert policies._murmur3_32_py(data, seed) == murmur3_32(data, seed)


# -- PolicyTestBase -------------------------------------------------------------------


@pytest.mark.parametrize("policy", all_policies(), ids=lambda p: f"{p.name}{p.properties}")
def test_no_targets_selects_none(policy):
    assert policy.select([], "test") is None


@pytest.mark.parametrize("policy", all_policies(), ids=lambda p: f"{p.name}{p.properties}")
def test_one_target_is_selected(policy):
    target = make_targets(1)[0]
    for key in ("test", "NULL", ""):
        assert policy.select([target], key) is target


@pytest.mark.parametrize("policy", all_policies(), ids=lambda p: f"{p.name}{p.properties}")
def test_transform_is_identity_except_modulo(policy):
    assert policy.transform_key("test") == "test"


# -- FIRST_ELEMENT ----------------------------------------------------------------------


def test_first_element():
    targets = make_targets(10)
    policy = FirstElementPolicy()
    for key in ("a", "b", "NULL"):
        assert policy.select(targets, key) is targets[0]


# -- ROUND_ROBIN ------------------------------------------------------------------------


def test_round_robin_ten_calls_ten_targets():
    targets = make_targets(10)
    policy = RoundRobinPolicy()
    chosen = [policy.select(targets, "test") for _ in range(10)]
    assert len({id(t) for t in chosen}) == 10


def test_round_robin_starts_at_a_random_place_and_goes_in_order():
    targets = make_targets(10)
    starts = set()
    for seed in range(20):
        policy = RoundRobinPolicy(rng=random.Random(seed))
        first = targets.index(policy.select(targets, "k"))
        second = targets.index(policy.select(targets, "k"))
        assert second == (first + 1) % 10
        starts.add(first)
    assert len(starts) > 1


def test_round_robin_position_is_shared_and_survives_a_shrinking_pool():
    targets = make_targets(4)
    policy = RoundRobinPolicy(rng=random.Random(0))
    policy._pos = 3
    assert policy.select(targets, "a") is targets[3]
    assert policy.select(targets, "b") is targets[0]  # another key, same position
    policy._pos = 7
    assert policy.select(targets[:2], "a") is targets[1]  # 7 % 2


# -- LEAST_CONNECTIONS -----------------------------------------------------------------


def _spread(policy, targets, calls=100):
    return {targets.index(policy.select(targets, "k")) for _ in range(calls)}


def test_least_connections_artemis_cases():
    targets = make_targets(10)
    policy = LeastConnectionsPolicy(rng=random.Random(7))
    # 1. no counts known: every target in turn
    assert _spread(policy, targets) == set(range(10))
    # 2. every count 3: still every target
    for t in targets:
        t.connection_count = 3
    assert _spread(policy, targets) == set(range(10))
    # 3. target 0 has 2: only target 0
    targets[0].connection_count = 2
    assert _spread(policy, targets) == {0}
    # 4. targets 1 and 2 have 1: only those two, in turn
    targets[1].connection_count = 1
    targets[2].connection_count = 1
    assert _spread(policy, targets) == {1, 2}


def test_least_connections_unknown_count_ranks_last():
    targets = make_targets(3)
    targets[1].connection_count = 10_000
    policy = LeastConnectionsPolicy(rng=random.Random(0))
    assert _spread(policy, targets) == {1}


def test_least_connections_threshold():
    targets = make_targets(4)
    for t, count in zip(targets, [5, 29, 30, 31], strict=True):
        t.connection_count = count
    policy = create_policy("LEAST_CONNECTIONS", {"CONNECTION_COUNT_THRESHOLD": "30"})
    assert policy.threshold == 30
    assert _spread(policy, targets) == {0, 1}  # 5 and 29 both count as 0
    plain = LeastConnectionsPolicy(rng=random.Random(0))
    assert _spread(plain, targets) == {0}


def test_least_connections_bad_threshold():
    with pytest.raises(PolicyPropertyError, match="CONNECTION_COUNT_THRESHOLD"):
        create_policy("LEAST_CONNECTIONS", {"CONNECTION_COUNT_THRESHOLD": "many"})


# -- CONSISTENT_HASH_MODULO -----------------------------------------------------------


def test_modulo_without_modulo_leaves_keys():
    policy = ConsistentHashModuloPolicy()
    assert policy.transform_key("NULL") == "NULL"
    assert policy.transform_key("AA") == "AA"
    for bad in ("0", "-3"):
        assert ConsistentHashModuloPolicy({"MODULO": bad}).transform_key("AA") == "AA"


def test_modulo_two():
    policy = create_policy("CONSISTENT_HASH_MODULO", {"MODULO": "2"})
    aaa, bbb = policy.transform_key("AAA"), policy.transform_key("BBB")
    assert aaa != bbb
    assert 0 <= int(aaa) < 2 and 0 <= int(bbb) < 2
    assert (aaa, bbb, policy.transform_key("admin")) == ("0", "1", "0")


@pytest.mark.parametrize("forced", [-1, INT_MIN, INT_MAX, 0])
@pytest.mark.parametrize("modulo", [1, 2, 3, 7, INT_MAX])
def test_modulo_never_negative(forced, modulo):
    policy = ConsistentHashModuloPolicy({"MODULO": str(modulo)}, hash_function=lambda _: forced)
    shard = int(policy.transform_key("anything"))
    assert 0 <= shard < modulo


def test_modulo_selects_nothing():
    policy = ConsistentHashModuloPolicy({"MODULO": "2"})
    assert policy.select(make_targets(3), "0") is None
    assert policy.select([], "0") is None


def test_modulo_property_is_case_sensitive_and_checked():
    assert ConsistentHashModuloPolicy({"modulo": "2"}).transform_key("AAA") == "AAA"
    with pytest.raises(PolicyPropertyError, match="MODULO"):
        ConsistentHashModuloPolicy({"MODULO": "two"})


# -- CONSISTENT_HASH: Artemis cases ----------------------------------------------------


@pytest.mark.parametrize("props", [{}, {"HASH": "FNV1A"}, {"HASH": "murmur3"}])
def test_consistent_hash_same_key_same_target_and_moves_when_removed(props):
    targets = make_targets(10)
    policy = create_policy("CONSISTENT_HASH", props)
    chosen = policy.select(targets, "test")
    for _ in range(5):
        assert policy.select(targets, "test") is chosen
    remaining = [t for t in targets if t is not chosen]
    other = policy.select(remaining, "test")
    assert other is not None and other is not chosen


def test_fnv1a_ring_reproduces_the_worked_example():
    targets = [Target(node_id=n, ready=True) for n in ("node-a", "node-b", "node-c")]
    policy = ConsistentHashPolicy({"HASH": "FNV1A"})
    assert policy.select(targets, "admin").node_id == "node-c"  # floor of 885536276
    assert policy.select(targets, "test").node_id == "node-a"  # below every point: wraps
    assert policy.select(list(reversed(targets)), "admin").node_id == "node-c"
    # a key between node-a's and node-b's points
    key = next(k for k in map(str, range(10**6)) if 79934867 <= fnv1a_32(k) < 96712486)
    assert policy.select(targets, key).node_id == "node-a"


def test_fnv1a_ring_colliding_points_keep_the_later_target():
    first = Target(node_id="x", ready=True)
    second = Target(node_id="x", ready=True)
    policy = ConsistentHashPolicy({"HASH": "FNV1A"})
    assert policy.select([first, second], "k") is second


def test_bad_hash_property():
    with pytest.raises(PolicyPropertyError, match="HASH"):
        ConsistentHashPolicy({"HASH": "MD5"})


def test_identity_is_node_id_else_connector_name():
    assert target_identity(Target(connector=SimpleNamespace(name="c1"), node_id="n1")) == "n1"
    assert target_identity(Target(connector=SimpleNamespace(name="c1"))) == "c1"
    assert target_identity(Target(local=True)) == "local"
    unnamed = [Target(connector=SimpleNamespace(name=f"c{i}"), ready=True) for i in range(5)]
    policy = ConsistentHashPolicy()
    chosen = policy.select(unnamed, "user-1")
    renewed = [Target(connector=SimpleNamespace(name=f"c{i}"), ready=True) for i in range(5)]
    assert policy.select(renewed, "user-1").name == chosen.name


def test_lone_surrogate_key_is_hashed():
    policy = ConsistentHashPolicy()
    assert policy.select(make_targets(3), "a\udc80b") is not None


# -- CONSISTENT_HASH (rendezvous): distribution and movement ----------------------------

N_KEYS = 100_000
N_TARGETS = 10


@pytest.fixture(scope="module")
def spread():
    """100,000 seeded random keys over 10 targets: (keys, targets, node id per key)."""
    rng = random.Random(20240601)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(N_KEYS)]
    targets = [Target(node_id=f"{rng.getrandbits(128):032x}", ready=True) for _ in range(N_TARGETS)]
    policy = ConsistentHashPolicy()
    chosen = [policy.select(targets, k).node_id for k in keys]
    return keys, targets, chosen


def test_rendezvous_balance(spread):
    keys, targets, chosen = spread
    counts = Counter(chosen)
    mean = N_KEYS / N_TARGETS
    assert set(counts) == {t.node_id for t in targets}
    assert max(counts.values()) <= 1.10 * mean
    assert min(counts.values()) >= 0.90 * mean


def test_rendezvous_removal_moves_only_the_removed_targets_keys(spread):
    keys, targets, chosen = spread
    gone = targets[3]
    remaining = [t for t in targets if t is not gone]
    policy = ConsistentHashPolicy()
    for key, before in zip(keys, chosen, strict=True):
        after = policy.select(remaining, key).node_id
        if before != gone.node_id:
            assert after == before


def test_rendezvous_addition_moves_few_keys_and_only_to_the_new_target(spread):
    keys, targets, chosen = spread
    new = Target(node_id="a-new-node", ready=True)
    policy = ConsistentHashPolicy()
    moved = 0
    for key, before in zip(keys, chosen, strict=True):
        after = policy.select(targets + [new], key).node_id
        if after != before:
            assert after == new.node_id
            moved += 1
    assert moved <= N_KEYS * (1 / (N_TARGETS + 1) + 0.02)
    assert moved > 0


def test_two_gateways_agree_whatever_the_pool_order(spread):
    keys, targets, chosen = spread
    rng = random.Random(5)
    other = [Target(node_id=t.node_id, ready=True) for t in targets]  # another gateway's pool
    rng.shuffle(other)
    policy = ConsistentHashPolicy()  # and its own policy object
    for key, before in zip(keys[:5000], chosen, strict=False):
        assert policy.select(other, key).node_id == before


@given(
    key=st.text(),
    ids=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=8, unique=True),
    seed=st.integers(0, 1000),
)
def test_rendezvous_is_order_independent(key, ids, seed):
    policy = ConsistentHashPolicy()
    targets = [Target(node_id=i) for i in ids]
    shuffled = list(targets)
    random.Random(seed).shuffle(shuffled)
    assert policy.select(targets, key) is policy.select(shuffled, key)


# -- registry -----------------------------------------------------------------------------


class PinPolicy(Policy):
    """A user policy: always the target whose node id is the PIN property."""

    def select(self, targets, key):
        pin = self.properties.get("PIN")
        return next((t for t in targets if t.node_id == pin), None)


def make_reverse_policy(properties):
    """A factory entry point."""
    policy = FirstElementPolicy(properties)
    policy.transform_key = lambda key: key[::-1]
    return policy


def not_a_policy(properties):
    return "nope"


@pytest.fixture
def plugins(monkeypatch):
    """Fake ``junction.policies`` entry points (a real EntryPoint, loading from this module)."""
    here = __name__
    eps = [
        metadata.EntryPoint("PIN", f"{here}:PinPolicy", ENTRY_POINT_GROUP),
        metadata.EntryPoint("REVERSE", f"{here}:make_reverse_policy", ENTRY_POINT_GROUP),
        metadata.EntryPoint("BROKEN", f"{here}:missing_attribute", ENTRY_POINT_GROUP),
        metadata.EntryPoint("WRONG", f"{here}:not_a_policy", ENTRY_POINT_GROUP),
        metadata.EntryPoint("ROUND_ROBIN", f"{here}:PinPolicy", ENTRY_POINT_GROUP),
    ]

    def entry_points(*, group):
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(policies.metadata, "entry_points", entry_points)
    return eps


def test_builtin_names():
    assert policy_names()[:5] == [
        "FIRST_ELEMENT",
        "ROUND_ROBIN",
        "CONSISTENT_HASH",
        "LEAST_CONNECTIONS",
        "CONSISTENT_HASH_MODULO",
    ]
    for name in policy_names()[:5]:
        policy = create_policy(name, {})
        assert isinstance(policy, Policy)
        assert policy.name == name


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(UnknownPolicyError) as info:
        create_policy("NEW", {})
    assert isinstance(info.value, LookupError)
    assert "'NEW'" in str(info.value)
    assert "FIRST_ELEMENT" in str(info.value) and "CONSISTENT_HASH_MODULO" in str(info.value)


def test_names_are_case_sensitive():
    with pytest.raises(UnknownPolicyError):
        create_policy("round_robin", {})


def test_user_policy_class_through_an_entry_point(plugins):
    assert policy_names()[5:] == ["BROKEN", "PIN", "REVERSE", "WRONG"]
    policy = create_policy("PIN", {"PIN": "node-2"})
    assert isinstance(policy, PinPolicy)
    assert policy.name == "PIN"
    targets = make_targets(4)
    assert policy.select(targets, "anything") is targets[2]


def test_user_policy_factory_through_an_entry_point(plugins):
    policy = create_policy("REVERSE", {"X": "1"})
    assert policy.name == "REVERSE"
    assert policy.properties == {"X": "1"}
    assert policy.transform_key("abc") == "cba"


def test_user_policy_errors(plugins):
    with pytest.raises(PolicyLoadError, match="BROKEN"):
        create_policy("BROKEN", {})
    with pytest.raises(PolicyLoadError, match="not a Policy"):
        create_policy("WRONG", {})
    with pytest.raises(UnknownPolicyError, match="PIN"):
        create_policy("NOPE", {})


def test_a_plugin_cannot_replace_a_builtin(plugins):
    assert isinstance(create_policy("ROUND_ROBIN", {}), RoundRobinPolicy)
    assert policy_names().count("ROUND_ROBIN") == 1


def test_properties_may_be_key_value_pairs():
    # the config model keeps <property> elements as (key, value) pairs in document order
    policy = create_policy("CONSISTENT_HASH_MODULO", (("MODULO", "2"),))
    assert policy.properties == {"MODULO": "2"}
    assert policy.transform_key("BBB") == "1"
