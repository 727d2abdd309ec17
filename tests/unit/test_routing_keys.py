"""Routing keys: Artemis's KeyResolverTest cases, the key types, and properties."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address, IPv6Address

from junction.routing.keys import (
    DEFAULT_KEY_TYPE,
    NULL_KEY,
    KeyResolver,
    KeyType,
    source_ip_key,
)

# -- Artemis KeyResolverTest ---------------------------------------------------


def test_client_id_key():
    assert KeyResolver(KeyType.CLIENT_ID, None).resolve(client_id="TEST") == "TEST"


def test_key_filter_takes_the_whole_match():
    assert KeyResolver(KeyType.CLIENT_ID, "^.{4}").resolve(client_id="TEST1234") == "TEST"


def test_key_filter_without_match_gives_null():
    assert KeyResolver(KeyType.CLIENT_ID, "ARTEMIS").resolve(client_id="TEST1234") == NULL_KEY


@pytest.mark.parametrize("key_type", list(KeyType))
def test_missing_value_gives_null(key_type):
    assert KeyResolver(key_type, None).resolve() == NULL_KEY
    assert KeyResolver(key_type, "^.{4}").resolve() == NULL_KEY


def test_source_ip_key():
    resolver = KeyResolver(KeyType.SOURCE_IP, None)
    assert resolver.resolve(source_address="10.0.0.1:12345") == "10.0.0.1"
    assert resolver.resolve(source_address="/10.0.0.1:12345") == "10.0.0.1"


def test_source_ip_key_with_filter():
    resolver = KeyResolver(KeyType.SOURCE_IP, "^[^.]+")
    assert resolver.resolve(source_address="10.0.0.1:12345") == "10"


def test_role_name_with_filter():
    resolver = KeyResolver(KeyType.ROLE_NAME, "B")
    assert resolver.resolve(roles=["A"]) == NULL_KEY
    assert resolver.resolve(roles=["A", "B"]) == "B"


def test_role_name_without_filter_is_the_first_role():
    assert KeyResolver(KeyType.ROLE_NAME, None).resolve(roles=["A", "B"]) == "A"


# -- beyond the Artemis cases ---------------------------------------------------


def test_default_key_type_is_source_ip():
    assert DEFAULT_KEY_TYPE is KeyType.SOURCE_IP
    assert KeyResolver().key_type is KeyType.SOURCE_IP


def test_key_type_parses_names():
    assert KeyResolver("USER_NAME").key_type is KeyType.USER_NAME
    assert KeyType["SNI_HOST"] is KeyType("SNI_HOST")
    with pytest.raises(ValueError):
        KeyResolver("HOST_NAME")


def test_each_key_type_reads_its_own_value():
    values = dict(
        client_id="cid",
        sni_host="broker.example.com",
        source_address="/192.168.1.2:40000",
        username="admin",
        roles=("amq", "guests"),
    )
    expected = {
        KeyType.CLIENT_ID: "cid",
        KeyType.SNI_HOST: "broker.example.com",
        KeyType.SOURCE_IP: "192.168.1.2",
        KeyType.USER_NAME: "admin",
        KeyType.ROLE_NAME: "amq",
    }
    for key_type, key in expected.items():
        assert KeyResolver(key_type).resolve(**values) == key


def test_no_roles_gives_null():
    assert KeyResolver(KeyType.ROLE_NAME).resolve(roles=()) == NULL_KEY
    assert KeyResolver(KeyType.ROLE_NAME).resolve(roles=None) == NULL_KEY
    assert KeyResolver(KeyType.ROLE_NAME, "B").resolve(roles=()) == NULL_KEY


def test_role_filter_applies_once_so_look_behind_strips_a_prefix():
    # ElasticQueueTest: ROLE_NAME with key filter (?<=^EQ_).*
    resolver = KeyResolver(KeyType.ROLE_NAME, "(?<=^EQ_).*")
    assert resolver.resolve(roles=["amq", "EQ_orders", "EQ_other"]) == "orders"
    assert resolver.resolve(roles=["amq"]) == NULL_KEY


def test_role_name_first_matching_role_in_order():
    resolver = KeyResolver(KeyType.ROLE_NAME, "^b")
    assert resolver.resolve(roles=["a", "bz", "by"]) == "b"
    assert KeyResolver(KeyType.ROLE_NAME, "^b.*").resolve(roles=["a", "bz", "by"]) == "bz"


def test_filter_is_search_not_match_and_ignores_capture_groups():
    resolver = KeyResolver(KeyType.CLIENT_ID, "(ab)c")
    assert resolver.resolve(client_id="xxabcyy") == "abc"


def test_blank_filter_is_no_filter():
    for blank in ("", "   ", None):
        resolver = KeyResolver(KeyType.CLIENT_ID, blank)
        assert resolver.key_filter is None
        assert resolver.resolve(client_id="TEST") == "TEST"


def test_filter_can_change_at_run_time():
    resolver = KeyResolver(KeyType.CLIENT_ID, "^.{2}")
    assert resolver.resolve(client_id="ABCD") == "AB"
    resolver.key_filter = "^.{3}"
    assert resolver.key_filter == "^.{3}"
    assert resolver.resolve(client_id="ABCD") == "ABC"
    resolver.key_filter = ""
    assert resolver.key_filter is None
    assert resolver.resolve(client_id="ABCD") == "ABCD"


def test_invalid_filter_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"invalid key filter '\(unclosed'"):
        KeyResolver(KeyType.CLIENT_ID, "(unclosed")
    resolver = KeyResolver(KeyType.CLIENT_ID, "^A")
    with pytest.raises(ValueError):
        resolver.key_filter = "[z-a]"
    assert resolver.key_filter == "^A"  # unchanged


def test_empty_value_is_a_key_not_null():
    assert KeyResolver(KeyType.CLIENT_ID).resolve(client_id="") == ""
    assert KeyResolver(KeyType.CLIENT_ID, "^.{3}").resolve(client_id="") == NULL_KEY


@pytest.mark.parametrize(
    "address, key",
    [
        ("10.0.0.1:12345", "10.0.0.1"),
        ("/10.0.0.1:12345", "10.0.0.1"),
        ("10.0.0.1", "10.0.0.1"),
        ("/10.0.0.1", "10.0.0.1"),
        ("[::1]:5672", "::1"),
        ("/[::1]:5672", "::1"),
        ("[fe80::1%eth0]:5672", "fe80::1%eth0"),
        ("[::1]", "::1"),
        ("/0:0:0:0:0:0:0:1:5672", "0:0:0:0:0:0:0:1"),  # Java's unbracketed spelling
        ("", ""),
    ],
)
def test_source_ip_parsing(address, key):
    assert source_ip_key(address) == key


def test_source_ip_from_twisted_addresses():
    resolver = KeyResolver(KeyType.SOURCE_IP)
    assert resolver.resolve(source_address=IPv4Address("TCP", "127.0.0.1", 5000)) == "127.0.0.1"
    assert resolver.resolve(source_address=IPv6Address("TCP", "::1", 5000)) == "::1"


# -- properties -----------------------------------------------------------------

_texts = st.one_of(st.none(), st.text())
_filters = st.sampled_from([None, "", "^.{3}", "B", "(?<=^EQ_).*", "[0-9]+", "^$", "x|y"])


@given(
    key_type=st.sampled_from(list(KeyType)),
    key_filter=_filters,
    client_id=_texts,
    sni_host=_texts,
    source_address=st.one_of(st.none(), st.text()),
    username=_texts,
    roles=st.one_of(st.none(), st.lists(st.text(), max_size=5)),
)
def test_resolve_never_raises_and_returns_a_string(
    key_type, key_filter, client_id, sni_host, source_address, username, roles
):
    key = KeyResolver(key_type, key_filter).resolve(
        client_id=client_id,
        sni_host=sni_host,
        source_address=source_address,
        username=username,
        roles=roles,
    )
    assert isinstance(key, str)


@given(ip=st.ip_addresses(v=4), port=st.integers(0, 65535), slash=st.booleans())
def test_source_ip_v4_with_port(ip, port, slash):
    address = f"{'/' if slash else ''}{ip}:{port}"
    assert source_ip_key(address) == str(ip)


@given(ip=st.ip_addresses(v=6), port=st.integers(0, 65535), slash=st.booleans())
def test_source_ip_v6_bracketed_with_port(ip, port, slash):
    address = f"{'/' if slash else ''}[{ip}]:{port}"
    key = source_ip_key(address)
    assert key == str(ip)
    assert ipaddress.ip_address(key) == ip


@given(ip=st.ip_addresses(v=6), port=st.integers(0, 65535))
def test_source_ip_v6_java_spelling(ip, port):
    # Java's InetSocketAddress: "/" + eight hex groups without leading zeros + ":" + port
    java = ":".join(format(int(group, 16), "x") for group in ip.exploded.split(":"))
    assert ipaddress.ip_address(source_ip_key(f"/{java}:{port}")) == ip
