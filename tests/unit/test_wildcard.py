"""Wildcard routing and hierarchical settings, checked against Artemis's docs and tests.

Cases come from apache/activemq-artemis docs/user-manual/wildcard-syntax.adoc,
wildcard-routing.adoc, address-settings.adoc and the behaviour its
``RepositoryTest`` documents for ``HierarchicalObjectRepository``.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.brokercore.wildcard import (
    DEFAULT_SYNTAX,
    PATTERN_CACHE_SIZE,
    BoundedLRU,
    InvalidMatchError,
    ResolvedAddressSettings,
    SettingsRepository,
    WildcardSyntax,
    address_matches,
    compile_pattern,
    specificity_key,
)
from junction.config.model import (
    ADDRESS_SETTINGS_DEFAULTS,
    AddressSettings,
    SecuritySetting,
    WildcardAddresses,
)
from junction.model.message import RoutingType

# --------------------------------------------------------------------------
# syntax
# --------------------------------------------------------------------------


def test_syntax_from_config():
    syntax = WildcardSyntax.from_config(
        WildcardAddresses(delimiter="/", any_words="!", single_word="+")
    )
    assert syntax == WildcardSyntax("/", "!", "+")
    assert WildcardSyntax.from_config(WildcardAddresses()) == DEFAULT_SYNTAX


@pytest.mark.parametrize(
    "kwargs",
    [dict(delimiter=""), dict(delimiter=".."), dict(any_words="*"), dict(single_word=".")],
)
def test_syntax_rejects_bad_characters(kwargs):
    with pytest.raises(ValueError):
        WildcardSyntax(**kwargs)


# --------------------------------------------------------------------------
# routing (wildcard-syntax.adoc)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    ["news.europe", "news.europe.sport", "news.europe.politics", "news.europe.politics.regional"],
)
def test_doc_any_words_matches(address):
    assert address_matches("news.europe.#", address)


@pytest.mark.parametrize("address", ["news.usa", "news.usa.sport", "entertainment"])
def test_doc_any_words_does_not_match(address):
    assert not address_matches("news.europe.#", address)


@pytest.mark.parametrize(
    "pattern,address,expected",
    [
        ("news.*", "news.europe", True),
        ("news.*", "news.usa", True),
        ("news.*", "news.europe.sport", False),
        ("news.*", "news.usa.sport", False),
        ("news.*", "news.europe.politics.regional", False),
        ("news.*", "news", False),
        ("news.*.sport", "news.europe.sport", True),
        ("news.*.sport", "news.usa.sport", True),
        ("news.*.sport", "news.europe.politics", False),
    ],
)
def test_doc_single_word(pattern, address, expected):
    assert address_matches(pattern, address) is expected


@pytest.mark.parametrize("address", ["news", "news.usa", "news.usa.sport"])
def test_wildcard_routing_doc_hierarchy(address):
    # wildcard-routing.adoc: a queue on news.# receives news.usa, news.usa.sport
    assert address_matches("news.#", address)


@pytest.mark.parametrize(
    "pattern,address,expected",
    [
        ("#", "anything.at.all", True),
        ("#", "x", True),
        ("#.sport", "sport", True),  # zero words before
        ("#.sport", "news.europe.sport", True),
        ("#.sport", "news.europe.sports", False),
        ("a.#.b", "a.b", True),  # zero words in the middle
        ("a.#.b", "a.x.y.b", True),
        ("a.#.b", "a.x.y.c", False),
        ("#.b.c", "b.x.b.c", True),  # needs backtracking past the first "b"
        ("a.#.#.b", "a.b", True),
        ("a.*.#", "a", False),  # "*" needs one word
        ("a.*.#", "a.b", True),
        ("news.#", "newsroom", False),  # words, not prefixes
        ("news#", "news", False),  # "news#" is a literal word in routing
        ("news#", "news#", True),
        ("news.europe", "news.europe", True),
        ("news.europe", "news.europe.sport", False),
        ("news.#", "news.#", True),  # a pattern always matches itself
    ],
)
def test_routing_edge_cases(pattern, address, expected):
    assert address_matches(pattern, address) is expected


CUSTOM = WildcardSyntax(delimiter="/", any_words="!", single_word="+")


@pytest.mark.parametrize(
    "pattern,address,expected",
    [
        ("news/europe/!", "news/europe", True),
        ("news/europe/!", "news/europe/sport/x", True),
        ("news/+/sport", "news/usa/sport", True),
        ("news/+/sport", "news/usa/x/sport", False),
        ("news/!", "news/a/b", True),
        # with "/" as delimiter, "." is an ordinary character ...
        ("news/!", "news/a.b", True),
        ("news.!", "news.europe", False),
        # ... and "#", "*" are literal words
        ("news/#", "news/a", False),
        ("news/*", "news/a", False),
        ("news/*", "news/*", True),
    ],
)
def test_custom_syntax(pattern, address, expected):
    assert address_matches(pattern, address, CUSTOM) is expected


def test_pattern_cache_is_bounded():
    compile_pattern.cache_clear()
    for i in range(PATTERN_CACHE_SIZE + 50):
        compile_pattern(f"p.{i}.#")
    assert compile_pattern.cache_info().currsize == PATTERN_CACHE_SIZE
    assert compile_pattern("p.x.#") is compile_pattern("p.x.#")


def test_many_any_words_is_not_exponential():
    pattern = ".".join(["#", "a"] * 12) + ".#.b"
    address = ".".join(["a"] * 400)
    assert not address_matches(pattern, address)


# Hypothesis: agree with a plain recursive word-list matcher.


def reference_match(pattern: str, address: str, syntax: WildcardSyntax = DEFAULT_SYNTAX) -> bool:
    def rec(p: list[str], a: list[str]) -> bool:
        if not p:
            return not a
        head = p[0]
        if head == syntax.any_words:
            return any(rec(p[1:], a[i:]) for i in range(len(a) + 1))
        if not a:
            return False
        if head == syntax.single_word or head == a[0]:
            return rec(p[1:], a[1:])
        return False

    return pattern == address or rec(
        pattern.split(syntax.delimiter), address.split(syntax.delimiter)
    )


WORDS = st.sampled_from(["a", "b", "c", "", "ab"])
PATTERN_WORDS = st.one_of(WORDS, st.sampled_from(["#", "*", "#", "*"]))


@settings(max_examples=600, deadline=None)
@given(st.lists(PATTERN_WORDS, min_size=1, max_size=7), st.lists(WORDS, min_size=1, max_size=8))
def test_matches_reference(pattern_words, address_words):
    pattern = ".".join(pattern_words)
    address = ".".join(address_words)
    assert address_matches(pattern, address) is reference_match(pattern, address)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["x", "y", "/", "!", "+", "x.y"]), min_size=1, max_size=6),
    st.lists(st.sampled_from(["x", "y", "", "x.y"]), min_size=1, max_size=7),
)
def test_matches_reference_custom_syntax(pattern_words, address_words):
    syntax = WildcardSyntax("/", "!", "+")
    pattern = "/".join(pattern_words)
    address = "/".join(address_words)
    assert address_matches(pattern, address, syntax) is reference_match(pattern, address, syntax)


# --------------------------------------------------------------------------
# settings matching and precedence (HierarchicalObjectRepository)
# --------------------------------------------------------------------------


def S(match: str, **kw) -> AddressSettings:
    return AddressSettings(match=match, **kw)


def best(repo: SettingsRepository, address: str) -> str | None:
    item = repo.match(address)
    return None if item is None else item.match


def repo_of(*matches: str, syntax: WildcardSyntax = DEFAULT_SYNTAX) -> SettingsRepository:
    return SettingsRepository([S(m) for m in matches], syntax)


def test_precedence_chain_from_brief():
    # exact > a.b.* > a.b.# > a.# > #
    repo = repo_of("#", "a.#", "a.b.#", "a.b.*", "a.b.c")
    assert [s.match for s in repo.matches("a.b.c")] == ["a.b.c", "a.b.*", "a.b.#", "a.#", "#"]
    assert [s.match for s in repo.matches("a.b.x")] == ["a.b.*", "a.b.#", "a.#", "#"]
    assert [s.match for s in repo.matches("a.b")] == ["a.b.#", "a.#", "#"]
    assert [s.match for s in repo.matches("z")] == ["#"]


def test_artemis_matching_docs():
    for delim in (".", "_", "/"):
        syntax = WildcardSyntax(delimiter=delim)

        def d(text: str, delim: str = delim) -> str:
            return text.replace(".", delim)

        repo = repo_of(d("a.b.#"), d("a.b.d.#"), "#", syntax=syntax)
        assert best(repo, d("a.b")) == d("a.b.#")
        assert best(repo, d("a.b.c")) == d("a.b.#")
        assert best(repo, d("a.b.d.lll")) == d("a.b.d.#")
        assert best(repo, d("z.z.z.z.z")) == "#"
        assert best(repo, d("a.babc")) == "#"
        assert best(repo, d("a.b.dabc")) == d("a.b.#")
        assert best(repo, d("a.b.d")) == d("a.b.d.#")


def test_artemis_multiple_matches_order():
    repo = repo_of(
        "a.b.c.d.e.f", "a.b.c.d.e.*", "a.*.*.*.*.*", "*.b.c.d.*.f", "*.b.*.d.*.f", "a.b.c.d.e.#"
    )
    assert best(repo, "a.b.c.d.e.f") == "a.b.c.d.e.f"
    assert best(repo, "a.b.c.d.e.x") == "a.b.c.d.e.*"
    assert best(repo, "a.b.x.d.x.f") == "a.*.*.*.*.*"
    assert best(repo, "x.b.c.d.e.f") == "*.b.c.d.*.f"
    assert best(repo, "x.b.x.d.e.f") == "*.b.*.d.*.f"
    assert best(repo, "a.b.c.d.e.f.g") == "a.b.c.d.e.#"


def test_artemis_multiple_wildcards():
    repo = repo_of(
        "#",
        "a",
        "a.#",
        "a.*",
        "a.b.c",
        "a.*.c",
        "a.d.c",
        "a.b.#",
        "a.b",
        "a.b.c.#",
        "a.b.c.d",
        "a.*.*.d",
        "a.*.d.#",
    )
    expected = {
        "a": "a",
        "a.b": "a.b",
        "a.x": "a.*",
        "a.b.x": "a.b.#",
        "a.b.c": "a.b.c",
        "a.d.c": "a.d.c",
        "a.x.c": "a.*.c",
        "a.b.c.d": "a.b.c.d",
        "a.x.c.d": "a.*.*.d",
        "a.b.x.d": "a.*.*.d",
        "a.d.x.d": "a.*.*.d",
        "a.d.d.g": "a.*.d.#",  # longer "#" match beats a.# (Artemis compares length)
        "zzzz.z.z.z.d.r.g.f.sd.s.fsdfd.fsdfs": "#",
    }
    for address, match in expected.items():
        assert best(repo, address) == match, address


def test_artemis_merge_order():
    repo = repo_of("#", "a.#", "b.#", "a.b.#", "b.c.#", "a.b.c.#", "a.b.*.d", "a.b.c.*")
    assert [s.match for s in repo.matches("a.b.c.d")] == [
        "a.b.c.*",
        "a.b.*.d",
        "a.b.c.#",
        "a.b.#",
        "a.#",
        "#",
    ]
    assert [s.match for s in repo.matches("a.b.c")] == ["a.b.c.#", "a.b.#", "a.#", "#"]
    assert [s.match for s in repo.matches("z")] == ["#"]


def test_single_word_beats_any_words_even_when_shorter():
    # foo.* (no "#") is more specific than foo.0.# for foo.0 (Artemis merge idempotence test)
    repo = repo_of("foo.*", "foo.0.#")
    assert [s.match for s in repo.matches("foo.0")] == ["foo.*", "foo.0.#"]


def test_any_words_length_rule():
    # Artemis orders "#" matches by string length only: a.*.*.# beats a.b.#
    repo = repo_of("a.b.#", "a.*.*.#")
    assert best(repo, "a.b.c.d") == "a.*.*.#"


def test_specificity_key_tie_is_deterministic():
    keys = sorted(["a.*.#", "a.b.#"], key=specificity_key)
    assert keys == ["a.b.#", "a.*.#"]


def test_settings_match_semantics():
    repo = repo_of("news.#", "q.*", "orders*")
    assert best(repo, "news") == "news.#"
    assert best(repo, "news.a.b") == "news.#"
    assert best(repo, "newsroom") is None
    assert best(repo, "q.x") == "q.*"
    assert best(repo, "q.") is None  # "*" needs a non-empty word in settings matches
    assert best(repo, "q.x.y") is None
    assert best(repo, "ordersEU") == "orders*"  # Artemis replaces every "*" character
    assert best(repo, "orders") is None


def test_exact_match_is_not_a_pattern():
    repo = repo_of("a.b")
    assert best(repo, "a.b") == "a.b"
    assert best(repo, "a.b.c") is None
    assert repo.contains_exact("a.b")
    assert not repo.contains_exact("a.*")


@pytest.mark.parametrize("match", ["a.#.b", "#.a", "##"])
def test_any_words_must_be_last(match):
    with pytest.raises(InvalidMatchError, match="AMQ229071"):
        repo_of(match)


def test_regex_metacharacters_are_literal():
    repo = repo_of("a+b.#", "x(y).*")
    assert best(repo, "a+b.c") == "a+b.#"
    assert best(repo, "aab.c") is None
    assert best(repo, "x(y).z") == "x(y).*"


# --------------------------------------------------------------------------
# merging address settings
# --------------------------------------------------------------------------


def test_resolved_fields_mirror_address_settings():
    setting_fields = {f.name for f in dataclasses.fields(AddressSettings)} - {"match", "source"}
    resolved_fields = {f.name for f in dataclasses.fields(ResolvedAddressSettings)} - {"matched"}
    assert setting_fields == resolved_fields
    assert setting_fields == set(ADDRESS_SETTINGS_DEFAULTS)


def test_defaults_when_nothing_matches():
    r = SettingsRepository([]).resolve("anything")
    assert r.max_delivery_attempts == 10
    assert r.dead_letter_address is None
    assert r.address_full_policy == "PAGE"
    assert r.default_address_routing_type is RoutingType.MULTICAST
    assert r.max_redelivery_delay == 0  # redelivery_delay (0) * 10
    assert r.matched == ()


def test_merge_layers_field_by_field():
    repo = SettingsRepository(
        [
            S(
                "#",
                dead_letter_address="DLA",
                expiry_address="ExpiryQueue",
                max_delivery_attempts=10,
            ),
            S("orders.#", max_delivery_attempts=3, redelivery_delay=500),
        ]
    )
    r = repo.resolve("orders.x")
    assert r.dead_letter_address == "DLA"
    assert r.expiry_address == "ExpiryQueue"
    assert r.max_delivery_attempts == 3
    assert r.redelivery_delay == 500
    assert r.max_redelivery_delay == 5000  # derived from the merged redelivery delay
    assert r.matched == ("orders.#", "#")
    other = repo.resolve("invoices")
    assert other.max_delivery_attempts == 10 and other.dead_letter_address == "DLA"


def test_merge_most_specific_wins_and_false_is_a_value():
    repo = SettingsRepository(
        [
            S("#", auto_create_queues=True, max_size_bytes=100),
            S("a.#", auto_create_queues=False),
            S("a.b", max_size_bytes=5, max_redelivery_delay=7),
        ]
    )
    r = repo.resolve("a.b")
    assert r.auto_create_queues is False
    assert r.max_size_bytes == 5
    assert r.max_redelivery_delay == 7


def test_artemis_address_settings_merge_idempotence():
    repo = SettingsRepository(
        [
            S("foo.*", max_redelivery_delay=10000),
            S("foo.0.#", max_redelivery_delay=20000, max_expiry_delay=20000),
            S("foo.1.#", max_redelivery_delay=30000, max_expiry_delay=30000),
        ]
    )
    for _ in range(2):
        assert repo.resolve("foo.x").max_redelivery_delay == 10000
        assert repo.resolve("foo.x").max_expiry_delay == -1
        assert repo.resolve("foo.0").max_redelivery_delay == 10000
        assert repo.resolve("foo.0").max_expiry_delay == 20000
        assert repo.resolve("foo.1").max_expiry_delay == 30000


def test_resolve_fqqn_uses_address():
    repo = SettingsRepository([S("orders", max_delivery_attempts=2)])
    assert repo.resolve("orders::q1").max_delivery_attempts == 2


def test_resolved_is_frozen():
    r = SettingsRepository([]).resolve("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.max_delivery_attempts = 1  # type: ignore[misc]


def test_cache_invalidated_on_change():
    repo = SettingsRepository([S("#", max_delivery_attempts=4)])
    assert repo.resolve("a.b").max_delivery_attempts == 4
    calls = []
    repo.add_listener(lambda: calls.append(1))
    repo.add(S("a.#", max_delivery_attempts=5))
    assert repo.resolve("a.b").max_delivery_attempts == 5
    repo.add(S("a.#", max_delivery_attempts=6))  # same match replaces
    assert repo.resolve("a.b").max_delivery_attempts == 6
    assert repo.remove("a.#")
    assert not repo.remove("a.#")
    assert repo.resolve("a.b").max_delivery_attempts == 4
    repo.replace([S("a.b", max_delivery_attempts=9)])
    assert repo.resolve("a.b").max_delivery_attempts == 9
    assert repo.resolve("a.c").max_delivery_attempts == 10
    assert len(calls) == 4


def test_failed_replace_keeps_old_settings():
    repo = SettingsRepository([S("#", max_delivery_attempts=4)])
    with pytest.raises(InvalidMatchError):
        repo.replace([S("a.#.b")])
    assert repo.resolve("x").max_delivery_attempts == 4


def test_settings_cache_is_bounded():
    repo = SettingsRepository([S("#", max_delivery_attempts=4)], cache_size=8)
    for i in range(100):
        repo.resolve(f"addr.{i}")
    assert len(repo._resolve_cache) == 8
    assert len(repo._match_cache) == 8
    assert repo.resolve("addr.99") is repo.resolve("addr.99")


def test_security_settings_in_repository():
    repo = SettingsRepository(
        [
            SecuritySetting("globalqueues.europe.#", {"send": frozenset({"admin"})}),
            SecuritySetting("globalqueues.europe.orders.#", {"consume": frozenset({"eu"})}),
        ]
    )
    assert repo.match("globalqueues.europe.orders.plastics").match == "globalqueues.europe.orders.#"
    assert repo.match("globalqueues.europe.x").match == "globalqueues.europe.#"
    assert repo.match("elsewhere") is None


def test_bounded_lru():
    lru = BoundedLRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # a is now most recent
    lru.put("c", 3)
    assert "b" not in lru and "a" in lru and "c" in lru
    off = BoundedLRU(0)
    off.put("a", 1)
    assert len(off) == 0
    with pytest.raises(ValueError):
        BoundedLRU(-1)
