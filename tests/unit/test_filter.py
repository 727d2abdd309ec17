"""Tests for the Artemis filter-expression / JMS selector language.

Besides example tables per operator, Hypothesis checks generated comparison
expressions against a small reference evaluator written independently of the
parser, and feeds arbitrary text to the parser to check it only ever fails
with :class:`FilterError`.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from junction.model.filter import (
    HEADER_IDENTIFIERS,
    MATCH_ALL,
    MAX_FILTER_LENGTH,
    MAX_NESTING_DEPTH,
    Filter,
    FilterError,
    parse_filter,
)
from junction.model.message import Message, Typed

T, F, U = True, False, None


def msg(**props) -> Message:
    return Message("orders", properties=props)


def ev(text: str, **props):
    """The three-valued result of ``text`` against a message with ``props``."""
    return parse_filter(text).evaluate(msg(**props))


def matches(text: str, **props) -> bool:
    return parse_filter(text).matches(msg(**props))


def error_of(text: str) -> FilterError:
    with pytest.raises(FilterError) as info:
        parse_filter(text)
    return info.value


# -- blank filters and the Filter object -------------------------------------


@pytest.mark.parametrize("text", [None, "", "   ", "\n\t "])
def test_blank_filter_matches_everything(text):
    f = parse_filter(text)
    assert f is MATCH_ALL
    assert f.match_all
    assert f.matches(msg())
    assert f.matches(msg(anything=1))


def test_filter_object_basics():
    f = parse_filter("  color = 'red'  ")
    assert isinstance(f, Filter)
    assert not f.match_all
    assert f.text == "color = 'red'"
    assert str(f) == "color = 'red'"
    assert repr(f) == "Filter(\"color = 'red'\")"
    assert f == parse_filter("color = 'red'")
    assert hash(f) == hash(parse_filter("color = 'red'"))
    assert f != parse_filter("color = 'blue'")
    assert f.matches(msg(color="red"))
    assert not f.matches(msg(color="blue"))
    assert f.evaluate(msg()) is None


def test_filter_error_is_value_error_with_column():
    err = error_of("a = = 1")
    assert isinstance(err, ValueError)
    assert err.column == 5
    assert err.reason.startswith("expected a value")
    assert "column 5" in str(err)
    assert str(err) == "expected a value but found '=' at column 5"
    assert err.text == "a = = 1"


def test_non_string_filter_is_rejected():
    with pytest.raises(FilterError):
        parse_filter(42)  # type: ignore[arg-type]


# -- literals --------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal, value",
    [
        ("0", 0),
        ("42", 42),
        ("42L", 42),
        ("42l", 42),
        ("0x2A", 42),
        ("0X2a", 42),
        ("0xffL", 255),
        ("052", 42),
        ("00", 0),
        ("0L", 0),
        ("9223372036854775807", 2**63 - 1),
        ("123456789012345678901234567890", 123456789012345678901234567890),
        ("1.5", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1E3", 1000.0),
        ("1e3", 1000.0),
        ("1E+3", 1000.0),
        ("2.5e-3", 0.0025),
        (".5E1", 5.0),
        ("5.E1", 50.0),
        ("007.5", 7.5),
    ],
)
def test_numeric_literals(literal, value):
    assert ev(f"x = {literal}", x=value) is True
    assert ev(f"{literal} = x", x=value) is True
    assert ev(f"x <> {literal}", x=value) is False


def test_negative_literals_are_unary_minus():
    assert ev("x = -5", x=-5) is True
    assert ev("x = -0x10", x=-16) is True
    assert ev("x = -1.5e2", x=-150.0) is True
    assert ev("x = - 5", x=-5) is True


@pytest.mark.parametrize(
    "literal, value",
    [
        ("'hello'", "hello"),
        ("''", ""),
        ("'it''s'", "it's"),
        ("''''", "'"),
        ("'a''''b'", "a''b"),
        ("'with \"double\" quotes'", 'with "double" quotes'),
        ("'AND OR NOT'", "AND OR NOT"),
        ("'-- not a comment'", "-- not a comment"),
        ("'line\nbreak'", "line\nbreak"),
        ("'ünïcødé ✓'", "ünïcødé ✓"),
    ],
)
def test_string_literals(literal, value):
    assert ev(f"s = {literal}", s=value) is True
    assert ev(f"s = {literal}", s=value + "x") is False


@pytest.mark.parametrize("text", ["TRUE", "true", "True", "tRuE"])
def test_true_literal_any_case(text):
    assert ev(text) is True
    assert ev(f"b = {text}", b=True) is True
    assert ev(f"b = {text}", b=False) is False


@pytest.mark.parametrize("text", ["FALSE", "false", "False"])
def test_false_literal_any_case(text):
    assert ev(text) is False
    assert ev(f"b = {text}", b=False) is True


def test_null_literal():
    assert ev("NULL") is None
    assert ev("null IS NULL") is True
    assert ev("NULL + 1 IS NULL") is True
    assert ev("NOT NULL") is None


# -- identifiers -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "_a", "$a", "a$b_c9", "A1", "café", "日本", "x_Y_z"])
def test_identifiers_read_properties(name):
    assert ev(f"{name} = 1", **{name: 1}) is True


def test_property_names_are_case_sensitive():
    assert ev("Color = 'red'", color="red") is None
    assert ev("color = 'red'", color="red") is True


def test_hyphenated_names_are_subtraction():
    # Artemis needs the hyphenated_props: prefix for these; plain JMS reads
    # foo-bar as foo minus bar.
    assert ev("foo-bar = 0", **{"foo-bar": 0}) is None
    assert ev("foo-bar = 3", foo=5, bar=2) is True


def test_typed_property_values_are_unwrapped():
    assert ev("i = 5", i=Typed("int", 5)) is True
    assert ev("l > 4", l=Typed("long", 5)) is True
    assert ev("d < 2.6", d=Typed("double", 2.5)) is True
    assert ev("c = 'x'", c=Typed("char", "x")) is True


def test_none_property_is_null():
    assert ev("p IS NULL", p=None) is True
    assert ev("p = 1", p=None) is None


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 and b = 2",
        "a = 1 AnD b = 2",
        "a = 3 or b = 2",
        "not a = 3",
        "a between 0 and 5",
        "s like 'x%'",
        "s like 'x!%' escape '!' or a = 1",
        "s in ('xy')",
        "n is null",
        "n Is Not Null or a = 1",
        "a not between 5 and 9",
        "s not like 'z%'",
        "s not in ('z')",
    ],
)
def test_keywords_are_case_insensitive(text):
    assert ev(text, a=1, b=2, s="xy") is True


# -- header identifiers --------------------------------------------------------------


def header_message() -> Message:
    return Message(
        "orders.eu",
        body=b"12345",
        durable=True,
        priority=7,
        expiration=1_700_000_000_000,
        timestamp=1_600_000_000_000,
        user_id="user-1",
        correlation_id="corr-9",
        properties={
            "AMQPriority": 1,  # headers win over same-named properties
            "JMSMessageID": "ID:abc",
            "JMSType": "order",
            "_AMQ_GROUP_ID": "g1",
        },
    )


@pytest.mark.parametrize(
    "text",
    [
        "AMQPriority = 7",
        "JMSPriority = 7",
        "AMQPriority > 4 AND AMQPriority BETWEEN 5 AND 9",
        "AMQExpiration = 1700000000000",
        "JMSExpiration = 1700000000000",
        "AMQTimestamp = 1600000000000",
        "JMSTimestamp < 1600000000001",
        "AMQDurable = 'DURABLE'",
        "JMSDeliveryMode = 'PERSISTENT'",
        "AMQUserID = 'user-1'",
        "AMQUserId = 'user-1'",
        "AMQAddress = 'orders.eu'",
        "AMQAddress LIKE 'orders.%'",
        "AMQGroupID = 'g1'",
        "JMSCorrelationID = 'corr-9'",
        "JMSMessageID = 'ID:abc'",
        "JMSType = 'order'",
        "AMQSize > 0",
    ],
)
def test_header_identifiers(text):
    assert parse_filter(text).evaluate(header_message()) is True


def test_amq_size_is_encoded_size():
    m = header_message()
    assert parse_filter(f"AMQSize = {m.encoded_size()}").matches(m)


def test_non_durable_headers():
    m = Message("q", durable=False)
    assert parse_filter("AMQDurable = 'NON_DURABLE'").matches(m)
    assert parse_filter("JMSDeliveryMode = 'NON_PERSISTENT'").matches(m)


def test_absent_optional_headers_are_null():
    m = Message("q")
    for name in ("AMQUserID", "JMSCorrelationID", "JMSMessageID", "JMSType", "AMQGroupID"):
        assert parse_filter(f"{name} IS NULL").matches(m), name


def test_a_jms_clients_correlation_id_property_is_its_correlation_id():
    assert parse_filter("JMSCorrelationID = 'c'").matches(msg(JMSCorrelationID="c"))
    assert parse_filter("JMSCorrelationID IS NULL").matches(msg(JMSCorrelationID=b"c"))  # bytes: no text
    m = Message("q", properties={"JMSCorrelationID": "p"}, correlation_id="f")
    assert parse_filter("JMSCorrelationID = 'f'").matches(m)  # the field first


def test_header_identifier_table_is_complete():
    assert {
        "AMQPriority",
        "AMQExpiration",
        "AMQDurable",
        "AMQTimestamp",
        "AMQSize",
        "AMQUserID",
        "AMQUserId",
        "AMQAddress",
        "JMSPriority",
        "JMSTimestamp",
        "JMSExpiration",
        "JMSDeliveryMode",
        "JMSCorrelationID",
    } <= set(HEADER_IDENTIFIERS)


# -- comparisons ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("n = 5", T),
        ("n = 6", F),
        ("n <> 5", F),
        ("n <> 6", T),
        ("n < 6", T),
        ("n < 5", F),
        ("n <= 5", T),
        ("n <= 4", F),
        ("n > 4", T),
        ("n > 5", F),
        ("n >= 5", T),
        ("n >= 6", F),
        ("5 = n", T),
        ("6 > n", T),
        ("4 >= n", F),
        ("n = 5.0", T),
        ("n < 5.5", T),
        ("f = 2.5", T),
        ("f > 2", T),
        ("f < n", T),
        ("n = m", F),
        ("n < m", T),
        ("s = 'abc'", T),
        ("s <> 'abc'", F),
        ("s <> 'abd'", T),
        ("s = t", F),
        ("s <> t", T),
        ("b = TRUE", T),
        ("b <> FALSE", T),
        ("b = c", F),
        ("b <> c", T),
        ("(n > 1) = TRUE", T),
        ("(n > 1) = b", T),
        ("1 = 1", T),
        ("1 <> 1", F),
        ("'a' = 'a'", T),
    ],
)
def test_comparison_operators(text, expected):
    props = dict(n=5, m=7, f=2.5, s="abc", t="abd", b=True, c=False)
    assert ev(text, **props) is expected


@pytest.mark.parametrize(
    "text",
    [
        "s = 1",
        "s <> 1",
        "s > 1",
        "s < 1",
        "s >= 1",
        "s <= 1",
        "s BETWEEN 1 AND 20",
        "s NOT BETWEEN 1 AND 2",
        "n = '5'",
        "n <> '5'",
        "b = 1",
        "b <> 1",
        "one = TRUE",
        "n = s",
        "n < s",
        "b > n",
        "raw = 'x'",
        "raw <> 'x'",
        "raw = raw",
    ],
)
def test_unlike_types_compare_false_not_error(text):
    # JMS 3.8.1.2: comparing non-like types is false, whatever the operator.
    props = dict(s="12", n=5, b=True, one=1, raw=b"x")
    assert ev(text, **props) is False
    assert ev(f"NOT ({text})", **props) is True


def test_booleans_are_not_numbers():
    assert ev("b + 1 = 2", b=True) is None
    assert ev("b > 0", b=True) is False
    assert ev("n = TRUE", n=1) is False


def test_nan_is_unequal_to_everything():
    assert ev("x = x", x=math.nan) is False
    assert ev("x < 1 OR x >= 1", x=math.nan) is False
    assert ev("0 / 0 = 0 / 0") is False


# -- arithmetic --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2 + 3 * 4 = 14",
        "(2 + 3) * 4 = 20",
        "2 * 3 + 4 = 10",
        "10 - 4 - 3 = 3",
        "10 - (4 - 3) = 9",
        "8 / 4 / 2 = 1",
        "8 / (4 / 2) = 4",
        "7 / 2 = 3.5",
        "-7 / 2 = -3.5",
        "7 % 3 = 1",
        "-7 % 3 = -1",
        "7.5 % 2 = 1.5",
        "-2 * 3 = -6",
        "- -3 = 3",
        "-(2 + 3) = -5",
        "+5 = 5",
        "1 + 2 * 3 - 4 / 2 = 5",
        "2 * -3 = -6",
        "1 + 0.5 = 1.5",
        "0.1 + 0.2 > 0.3",
        "1 / 0 > 1000000000",
        "-1 / 0 < -1000000000",
        "n * 2 = 10",
        "n + f = 7.5",
        "-n = -5",
        "n - m * 2 = -9",
        "(n + m) / 2 = 6",
        "n+1=6",
        "n*n-1=24",
        "999999999999999999999 + 1 = 1000000000000000000000",
    ],
)
def test_arithmetic(text):
    assert ev(text, n=5, m=7, f=2.5) is True


@pytest.mark.parametrize(
    "text",
    [
        "x + 1 = 1",
        "1 + x = 1",
        "x * 2 = 0",
        "x / 2 = 0",
        "x - 2 = 0",
        "x % 2 = 0",
        "-x = 0",
        "+x = 0",
        "s + 1 = 1",
        "-s = 0",
        "big * 1.5 > 0",
        "big / 3 > 0",
        "1.5 + big > 0",
    ],
)
def test_arithmetic_with_null_or_non_numbers_is_unknown(text):
    assert ev(text, s="1", big=10**400) is None
    assert ev(f"NOT ({text})", s="1", big=10**400) is None


def test_arithmetic_is_folded_and_unary_minus_binds_tightest():
    assert ev("-2 * -2 = 4") is True
    assert ev("2 - -2 = 4") is True
    assert ev("1 - 1 - 1 = -1") is True


# -- three-valued logic ------------------------------------------------------------

_VALUES = {"t": T, "f": F, "u": U}


@pytest.mark.parametrize(
    "left, right, expected",
    [
        ("t", "t", T),
        ("t", "f", F),
        ("t", "u", U),
        ("f", "t", F),
        ("f", "f", F),
        ("f", "u", F),
        ("u", "t", U),
        ("u", "f", F),
        ("u", "u", U),
    ],
)
def test_and_truth_table(left, right, expected):
    props = {"t": True, "f": False}  # "u" is missing: NULL
    assert ev(f"{left} AND {right}", **props) is expected
    # And the same with comparisons producing the truth values.
    cmp = {"t": "n = 1", "f": "n = 2", "u": "missing = 1"}
    assert ev(f"{cmp[left]} AND {cmp[right]}", n=1) is expected
    assert matches(f"{left} AND {right}", **props) is (expected is True)


@pytest.mark.parametrize(
    "left, right, expected",
    [
        ("t", "t", T),
        ("t", "f", T),
        ("t", "u", T),
        ("f", "t", T),
        ("f", "f", F),
        ("f", "u", U),
        ("u", "t", T),
        ("u", "f", U),
        ("u", "u", U),
    ],
)
def test_or_truth_table(left, right, expected):
    props = {"t": True, "f": False}
    assert ev(f"{left} OR {right}", **props) is expected
    cmp = {"t": "n = 1", "f": "n = 2", "u": "missing = 1"}
    assert ev(f"{cmp[left]} OR {cmp[right]}", n=1) is expected


@pytest.mark.parametrize("operand, expected", [("t", F), ("f", T), ("u", U)])
def test_not_truth_table(operand, expected):
    assert ev(f"NOT {operand}", t=True, f=False) is expected
    assert ev(f"NOT NOT {operand}", t=True, f=False) is (None if expected is None else not expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("t AND t AND t AND t", T),
        ("t AND t AND u AND t", U),
        ("t AND u AND f AND t", F),
        ("f OR f OR f OR f", F),
        ("f OR u OR f OR f", U),
        ("f OR u OR t OR f", T),
        ("(t OR f) AND (u OR t)", T),
        ("(f OR u) AND t", U),
        ("NOT (u AND f)", T),
        ("NOT (u OR t)", F),
        ("NOT (u OR f)", U),
    ],
)
def test_long_and_or_chains(text, expected):
    assert ev(text, t=True, f=False) is expected


def test_and_binds_tighter_than_or():
    assert ev("t OR t AND f", t=True, f=False) is True
    assert ev("(t OR t) AND f", t=True, f=False) is False
    assert ev("f AND t OR t", t=True, f=False) is True


@pytest.mark.parametrize(
    "predicate",
    [
        "x = 0",
        "x <> 0",
        "x < 0",
        "x > 0",
        "x <= 0",
        "x >= 0",
        "x = 'a'",
        "x = y",
        "0 = x",
        "x LIKE 'a%'",
        "x NOT LIKE 'a%'",
        "x IN ('a')",
        "x NOT IN ('a')",
        "x BETWEEN 1 AND 2",
        "x NOT BETWEEN 1 AND 2",
        "x = TRUE",
        "x",
    ],
)
@pytest.mark.parametrize("props", [{}, {"x": None, "y": None}, {"y": 0}])
def test_null_operands_are_unknown(predicate, props):
    assert ev(predicate, **props) is None
    assert ev(f"NOT ({predicate})", **props) is None
    assert not matches(predicate, **props)
    assert not matches(f"NOT ({predicate})", **props)


@pytest.mark.parametrize(
    "text, props, expected",
    [
        ("x IS NULL", {}, T),
        ("x IS NULL", {"x": None}, T),
        ("x IS NULL", {"x": 0}, F),
        ("x IS NULL", {"x": ""}, F),
        ("x IS NULL", {"x": False}, F),
        ("x IS NOT NULL", {}, F),
        ("x IS NOT NULL", {"x": 0}, T),
        ("NOT x IS NULL", {"x": 0}, T),
        ("x + 1 IS NULL", {}, T),
        ("(x = 1) IS NULL", {}, T),
        ("(x = 1) IS NULL", {"x": 2}, F),
        ("x IS NULL AND y IS NOT NULL", {"y": 1}, T),
    ],
)
def test_is_null(text, props, expected):
    assert ev(text, **props) is expected


@pytest.mark.parametrize(
    "value, expected",
    [(True, T), (False, F), (None, U), (1, U), ("true", U), (Typed("int", 1), U)],
)
def test_property_used_as_condition_must_be_boolean(value, expected):
    assert ev("flag", flag=value) is expected
    assert ev("flag AND TRUE", flag=value) is expected


# -- NOT precedence ------------------------------------------------------------------


def test_not_binds_looser_than_comparison():
    # JMS/SQL precedence: NOT (a = 1), not (NOT a) = 1.
    assert ev("NOT a = 1", a=2) is True
    assert ev("NOT a = 1", a=1) is False
    assert ev("NOT a = 1 AND b = 2", a=2, b=2) is True
    assert ev("NOT a = 1 AND b = 2", a=1, b=2) is False
    assert ev("NOT a LIKE 'x%'", a="yz") is True
    assert ev("NOT a BETWEEN 1 AND 3", a=4) is True
    assert ev("NOT a + 1 > 2", a=1) is True


def test_not_binds_tighter_than_and_or():
    assert ev("NOT f AND f", f=False) is False
    assert ev("NOT t OR t", t=True) is True


# -- LIKE --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, value, expected",
    [
        ("abc", "abc", T),
        ("abc", "abcd", F),
        ("abc", "ABC", F),
        ("a%", "a", T),
        ("a%", "abc", T),
        ("a%", "ba", F),
        ("%c", "abc", T),
        ("%c", "abcd", F),
        ("%b%", "abc", T),
        ("%b%", "b", T),
        ("%b%", "ac", F),
        ("%", "", T),
        ("%", "anything", T),
        ("%%", "", T),
        ("", "", T),
        ("", "a", F),
        ("_", "a", T),
        ("_", "", F),
        ("_", "ab", F),
        ("a_c", "abc", T),
        ("a_c", "ac", F),
        ("a__", "abc", T),
        ("_%_", "ab", T),
        ("_%_", "a", F),
        ("a%b%c", "abc", T),
        ("a%b%c", "aXbYc", T),
        ("a%b%c", "acb", F),
        ("a%b%c", "abcbc", T),
        ("%ab%ab%", "abab", T),
        ("%ab%ab%", "aba", F),
        ("%a_c%", "xxabcxx", T),
        ("%a_c%", "xxacxx", F),
        ("%a_c", "aXcaYc", T),
        ("a%a", "a", F),
        ("a%a", "aa", T),
        ("_b%b_", "abba", T),
        ("_b%b_", "aba", F),
        ("_b%b_", "abxba", T),
        ("_b%b_", "abxxa", F),
        ("line_break", "line\nbreak", T),
        ("multi%line", "multi\n\nline", T),
        ("ünï%", "ünïcødé", T),
        ("it''s%", "it's here", T),
    ],
)
def test_like(pattern, value, expected):
    text = f"s LIKE '{pattern}'"
    assert ev(text, s=value) is expected
    assert ev(f"s NOT LIKE '{pattern}'", s=value) is (not expected)


@pytest.mark.parametrize(
    "pattern, matching, non_matching",
    [
        ("a.b%", "a.bc", "axbc"),
        ("a.b", "a.b", "aXb"),
        ("a*", "a*", "aaa"),
        ("a+b", "a+b", "aab"),
        ("a?", "a?", "a"),
        ("[ab]", "[ab]", "a"),
        ("(a|b)", "(a|b)", "a"),
        ("^a$", "^a$", "a"),
        ("a{2}", "a{2}", "aa"),
        ("\\d", "\\d", "1"),
        ("back\\slash%", "back\\slash!", "backslash"),
        ("%.%", "x.y", "xy"),
        ("_.__", "a.bc", "abcd"),
        ("$%", "$1", "1"),
        ("a\\%", "a\\xyz", "a%"),
    ],
)
def test_like_treats_regex_characters_literally(pattern, matching, non_matching):
    f = parse_filter(f"s LIKE '{pattern}'")
    assert f.matches(msg(s=matching))
    assert not f.matches(msg(s=non_matching))


@pytest.mark.parametrize(
    "text, value, expected",
    [
        (r"s LIKE '100\%' ESCAPE '\'", "100%", T),
        (r"s LIKE '100\%' ESCAPE '\'", "1000", F),
        (r"s LIKE '\_%' ESCAPE '\'", "_abc", T),
        (r"s LIKE '\_%' ESCAPE '\'", "xabc", F),
        (r"s LIKE 'a\\b' ESCAPE '\'", "a\\b", T),
        (r"s LIKE '%\%%' ESCAPE '\'", "50% off", T),
        (r"s LIKE '%\%%' ESCAPE '\'", "50 off", F),
        ("s LIKE '!%!_!!' ESCAPE '!'", "%_!", T),
        ("s LIKE '!%!_!!' ESCAPE '!'", "x_!", F),
        ("s LIKE '!a' ESCAPE '!'", "a", T),  # escaping a plain character
        ("s LIKE 'a%%b' ESCAPE '%'", "a%b", T),  # the escape may be a wildcard
        ("s LIKE 'a%%b' ESCAPE '%'", "axb", F),
        ("s LIKE 'x''_' ESCAPE ''''", "x_", T),
        ("s LIKE 'x''_' ESCAPE ''''", "xy", F),
        ("s NOT LIKE '100!%' ESCAPE '!'", "100%", F),
        ("s NOT LIKE '100!%' ESCAPE '!'", "1000", T),
        ("s LIKE 'ab._%' ESCAPE '.'", "ab_x", T),
        ("s LIKE 'ab._%' ESCAPE '.'", "abXx", F),
    ],
)
def test_like_escape(text, value, expected):
    assert ev(text, s=value) is expected


@pytest.mark.parametrize("value", [1, 1.5, True, b"abc", Typed("int", 3)])
def test_like_on_non_string_is_unknown(value):
    assert ev("s LIKE '%'", s=value) is None
    assert ev("s NOT LIKE '%'", s=value) is None


def test_like_applies_to_expressions():
    assert ev("AMQAddress LIKE 'ord%'") is True  # header identifier
    assert ev("'abc' LIKE 'a%'") is True


def test_like_hostile_pattern_is_fast():
    pattern = "%a" * 40 + "%b"
    f = parse_filter(f"s LIKE '{pattern}'")
    subject = "a" * 20_000
    # A backtracking matcher would not finish; pytest-timeout bounds the test.
    assert not f.matches(msg(s=subject))
    assert f.matches(msg(s=subject + "b"))
    g = parse_filter("s LIKE '" + "%a_" * 40 + "%b'")
    assert not g.matches(msg(s=subject))


# -- IN ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value, expected",
    [
        ("s IN ('a')", "a", T),
        ("s IN ('a', 'b', 'c')", "b", T),
        ("s IN ('a', 'b', 'c')", "d", F),
        ("s IN ('a','b','c')", "c", T),
        ("s IN ('it''s')", "it's", T),
        ("s IN ('')", "", T),
        ("s IN ('A')", "a", F),
        ("s NOT IN ('a', 'b')", "c", T),
        ("s NOT IN ('a', 'b')", "a", F),
        ("s IN ('a', 'b') AND s NOT IN ('b')", "a", T),
        ("NOT s IN ('a')", "b", T),
    ],
)
def test_in(text, value, expected):
    assert ev(text, s=value) is expected


@pytest.mark.parametrize("value", [1, 2.0, True, b"a"])
def test_in_on_non_string_is_unknown(value):
    assert ev("s IN ('1', 'a', 'TRUE', 'true', '2.0')", s=value) is None
    assert ev("s NOT IN ('x')", s=value) is None


def test_in_with_many_values():
    values = ", ".join(f"'v{i}'" for i in range(500))
    f = parse_filter(f"s IN ({values})")
    assert f.matches(msg(s="v499"))
    assert not f.matches(msg(s="v500"))


# -- BETWEEN -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value, expected",
    [
        ("n BETWEEN 1 AND 3", 1, T),
        ("n BETWEEN 1 AND 3", 2, T),
        ("n BETWEEN 1 AND 3", 3, T),
        ("n BETWEEN 1 AND 3", 0, F),
        ("n BETWEEN 1 AND 3", 4, F),
        ("n BETWEEN 3 AND 1", 2, F),
        ("n BETWEEN 1.5 AND 2.5", 2, T),
        ("n BETWEEN 1.5 AND 2.5", 2.5, T),
        ("n BETWEEN 1.5 AND 2.5", 2.6, F),
        ("n BETWEEN -3 AND -1", -2, T),
        ("n BETWEEN 1 + 1 AND 2 * 3", 6, T),
        ("n BETWEEN 1 + 1 AND 2 * 3", 1, F),
        ("n NOT BETWEEN 1 AND 3", 0, T),
        ("n NOT BETWEEN 1 AND 3", 4, T),
        ("n NOT BETWEEN 1 AND 3", 1, F),
        ("n NOT BETWEEN 1 AND 3", 3, F),
        ("n BETWEEN 1 AND 3 AND n <> 2", 2, F),
        ("n BETWEEN 1 AND 3 AND n <> 2", 3, T),
        ("n BETWEEN 1 AND 3 OR n BETWEEN 10 AND 20", 15, T),
        ("NOT n BETWEEN 1 AND 3", 5, T),
        ("n - 1 BETWEEN 0 AND 0", 1, T),
    ],
)
def test_between(text, value, expected):
    assert ev(text, n=value) is expected


def test_between_with_property_bounds_and_nulls():
    assert ev("n BETWEEN lo AND hi", n=5, lo=1, hi=9) is True
    assert ev("n BETWEEN lo AND hi", n=5, hi=9) is None
    assert ev("n BETWEEN lo AND hi", n=10, hi=9) is False  # UNKNOWN AND FALSE
    assert ev("n NOT BETWEEN lo AND hi", n=10, hi=9) is True  # UNKNOWN OR TRUE
    assert ev("n NOT BETWEEN lo AND hi", n=5, hi=9) is None


# -- comments and whitespace -----------------------------------------------------------


def test_comments_and_whitespace():
    assert ev("a = 1 -- trailing comment", a=1) is True
    assert ev("a = 1 -- comment\nAND b = 2", a=1, b=2) is True
    assert ev("a = 1 -- comment\r\nAND b = 3", a=1, b=2) is False
    assert ev("a /* inline */ = /* another */ 1", a=1) is True
    assert ev("a\t=\r\n1\f", a=1) is True


# -- parse errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, column, fragment",
    [
        ("a =", 4, "unexpected end of filter"),
        ("a = 1 b", 7, "unexpected identifier b"),
        ("= 1", 1, "expected a value"),
        ("(a = 1", 7, "expected ')'"),
        ("a = 1)", 6, "unexpected ')'"),
        ("a = 'abc", 5, "unterminated string literal"),
        ('a = "abc"', 5, "single quotes"),
        ("a == 1", 3, "use = or <>"),
        ("a != 1", 3, "use = or <>"),
        ("a = 1 & b = 2", 7, "unexpected character '&'"),
        ("a = 1 AND", 10, "unexpected end of filter"),
        ("a = 1 OR OR b", 10, "expected a value but found 'OR'"),
        ("a = NULL", 5, "use IS NULL"),
        ("NULL <> a", 1, "use IS NULL"),
        ("a < NULL", 5, "cannot compare with NULL"),
        ("a < 'x'", 5, "string can only be compared with = and <>"),
        ("'x' >= a", 1, "string can only be compared"),
        ("a > TRUE", 5, "boolean can only be compared"),
        ("a BETWEEN 'a' AND 'z'", 11, "string can only be compared"),
        ("a < b < c", 3, "boolean can only be compared"),  # (a < b) is the boolean
        ("a + 'x' = 1", 5, "'+' needs numbers"),
        ("-'x' = 1", 2, "needs numbers"),
        ("TRUE * 2 = 2", 1, "'*' needs numbers"),
        ("1 AND a", 1, "AND needs a condition"),
        ("a OR 'x'", 6, "OR needs a condition"),
        ("NOT 5", 5, "NOT needs a condition"),
        ("a + 1", 3, "a filter needs a condition"),
        ("'abc'", 1, "a filter needs a condition"),
        ("a = NOT b", 5, "NOT must be in parentheses"),
        ("a NOT b", 7, "expected LIKE, BETWEEN or IN after NOT"),
        ("a IS 1", 6, "expected NULL after IS"),
        ("a IS NOT 1", 10, "expected NULL after IS NOT"),
        ("a LIKE b", 8, "expected a string pattern after LIKE"),
        ("a LIKE 'x' ESCAPE 1", 19, "expected a string after ESCAPE"),
        ("a LIKE 'x' ESCAPE '!!'", 19, "ESCAPE must be a single character"),
        ("a LIKE 'x' ESCAPE ''", 19, "ESCAPE must be a single character"),
        ("a LIKE 'x!' ESCAPE '!'", 8, "ends with its ESCAPE character"),
        ("a IN 'x'", 6, "expected '(' after IN"),
        ("a IN ()", 7, "expected a string literal in the IN list"),
        ("a IN (1, 2)", 7, "expected a string literal in the IN list"),
        ("a IN ('x' 'y')", 11, "expected ')' or ','"),
        ("a IN ('x',)", 11, "expected a string literal"),
        ("a BETWEEN 1 OR 2", 13, "expected AND in BETWEEN"),
        ("a BETWEEN 1", 12, "expected AND in BETWEEN"),
        ("a = 09", 5, "invalid octal literal 09"),
        ("a = 0x", 5, "hexadecimal literal needs digits"),
        ("a = 0xZ1", 5, "hexadecimal literal needs digits"),
        ("a = 1e", 6, "exponent needs digits"),
        ("a = 1.5L", 5, "invalid number '1.5L'"),
        ("a = 12abc", 5, "invalid number '12abc'"),
        ("a = 1.2.3", 5, "invalid number '1.2.3'"),
        ("a = 0x1G", 5, "invalid number '0x1G'"),
        ("a = 1 /* open", 7, "unterminated /* comment"),
        ("a = ?", 5, "unexpected character '?'"),
        ("a.b = 1", 2, "unexpected character '.'"),
        ("a = 1 AND\n  b ^ 2", 15, "unexpected character '^'"),
        ("a = " + "1" * 5000, 5, "integer literal is too long"),
        ("XPATH '//a'", 1, "XPATH filters are not supported"),
        ("a = 1 OR XQUERY '//a'", 10, "XQUERY filters are not supported"),
        ("convert_string_expressions:age > 18", 1, "'convert_string_expressions:'"),
        ("  hyphenated_props:foo-bar = 0", 3, "'hyphenated_props:'"),
    ],
)
def test_parse_errors(text, column, fragment):
    err = error_of(text)
    assert fragment in str(err), str(err)
    assert err.column == column, str(err)


def test_keywords_cannot_be_identifiers():
    for word in ("and", "OR", "Not", "between", "like", "escape", "in", "is", "null"):
        with pytest.raises(FilterError):
            parse_filter(f"{word} = 1")


# -- limits ----------------------------------------------------------------------------


def test_maximum_length():
    clause = "a = 1 OR "
    text = clause * ((MAX_FILTER_LENGTH - 5) // len(clause)) + "a = 2"
    assert len(text) <= MAX_FILTER_LENGTH
    f = parse_filter(text)  # a long flat OR is fine: AND/OR chains are flattened
    assert f.matches(msg(a=2))
    assert not f.matches(msg(a=3))
    err = error_of("a = 1" + " " * MAX_FILTER_LENGTH)
    assert "maximum" in str(err)
    assert err.column == MAX_FILTER_LENGTH + 1


def test_long_and_chain_evaluates_without_recursion():
    text = " AND ".join(f"p{i} = {i}" for i in range(650))
    props = {f"p{i}": i for i in range(650)}
    assert len(text) <= MAX_FILTER_LENGTH
    assert ev(text, **props) is True
    props["p649"] = -1
    assert ev(text, **props) is False


@pytest.mark.parametrize(
    "build",
    [
        lambda n: "(" * n + "a" + ")" * n,
        lambda n: "NOT " * n + "a",
        lambda n: "- " * n + "a = 1",
        lambda n: "(" * n + "a = 1" + ")" * n,
        lambda n: "(a = " * n + "1" + ")" * n,
    ],
    ids=["parentheses", "not", "unary-minus", "paren-comparison", "right-nesting"],
)
def test_nesting_limit(build):
    parse_filter(build(MAX_NESTING_DEPTH - 5))
    err = error_of(build(MAX_NESTING_DEPTH + 1))
    assert "nested more than" in str(err)
    # Far beyond the limit is still a FilterError, never a RecursionError.
    text = build(1500)
    assert len(text) <= MAX_FILTER_LENGTH
    err = error_of(text)
    assert "nested more than" in str(err)


def test_operator_chain_depth_limit():
    parse_filter(" + ".join(["a"] * (MAX_NESTING_DEPTH - 5)) + " = 1")
    err = error_of(" + ".join(["a"] * (MAX_NESTING_DEPTH + 5)) + " = 1")
    assert "nested more than" in str(err)
    err = error_of("a" + " = TRUE" * (MAX_NESTING_DEPTH + 5))
    assert "nested more than" in str(err)


def test_alternating_and_or_nesting_is_limited():
    text = "a = 1"
    for i in range(MAX_NESTING_DEPTH + 5):
        text = f"(b{i} = 1 {'AND' if i % 2 else 'OR'} {text})"
    assert "nested more than" in str(error_of(text))


# -- performance smoke -------------------------------------------------------------------


def test_constant_subexpressions_do_not_touch_the_message():
    # Folded at parse time, so a None message is never dereferenced.
    assert parse_filter("1 + 2 * 3 = 7 AND 'a' = 'a'").matches(None)  # type: ignore[arg-type]


# -- property-based: generated comparisons against a reference evaluator ---------------

_NAMES = ["a", "b", "c"]
_NUMERIC_OPS = ["=", "<>", "<", ">", "<=", ">="]
_EQUALITY_OPS = ["=", "<>"]
_STRING_TEXT = st.text(alphabet="ab'%_ xé", max_size=4)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_INTS = st.integers(min_value=-(2**70), max_value=2**70)


def _ref_kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def _ref_compare(op: str, a, b) -> bool:
    return {
        "=": a == b,
        "<>": a != b,
        "<": a < b,
        ">": a > b,
        "<=": a <= b,
        ">=": a >= b,
    }[op]


def _ref_eval(tree, props):
    """JMS semantics, spelled out directly from the specification."""
    tag = tree[0]
    if tag == "cmp":
        _, name, op, literal, _text = tree
        value = props.get(name)
        if isinstance(value, Typed):
            value = value.value
        if value is None:
            return None
        if _ref_kind(value) != _ref_kind(literal):
            return False
        return _ref_compare(op, value, literal)
    if tag == "not":
        inner = _ref_eval(tree[1], props)
        return None if inner is None else not inner
    left, right = _ref_eval(tree[1], props), _ref_eval(tree[2], props)
    if tag == "and":
        if left is False or right is False:
            return False
        return True if (left is True and right is True) else None
    if left is True or right is True:
        return True
    return False if (left is False and right is False) else None


def _render(tree) -> str:
    tag = tree[0]
    if tag == "cmp":
        return tree[4]
    if tag == "not":
        return f"NOT ({_render(tree[1])})"
    return f"({_render(tree[1])}) {tag.upper()} ({_render(tree[2])})"


def _int_text(draw, value: int) -> str:
    if value >= 0:
        style = draw(st.sampled_from(["dec", "hex", "oct", "long"]))
        if style == "hex":
            return hex(value)
        if style == "oct" and value > 0:
            return "0" + format(value, "o")
        if style == "long" and value > 0:
            return f"{value}L"
        return str(value)
    return "-" + _int_text(draw, -value)


@st.composite
def _comparisons(draw):
    name = draw(st.sampled_from(_NAMES))
    literal = draw(st.one_of(_INTS, _FINITE, _STRING_TEXT, st.booleans()))
    if isinstance(literal, bool):
        op = draw(st.sampled_from(_EQUALITY_OPS))
        text = "TRUE" if literal else draw(st.sampled_from(["FALSE", "false"]))
    elif isinstance(literal, str):
        op = draw(st.sampled_from(_EQUALITY_OPS))
        text = "'" + literal.replace("'", "''") + "'"
    elif isinstance(literal, int):
        op = draw(st.sampled_from(_NUMERIC_OPS))
        text = _int_text(draw, literal)
    else:
        op = draw(st.sampled_from(_NUMERIC_OPS))
        text = repr(literal)
    if draw(st.booleans()):
        rendered = f"{name} {op} {text}"
    else:  # literal first: mirror the operator
        mirrored = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        rendered = f"{text} {mirrored} {name}"
    return ("cmp", name, op, literal, rendered)


_TREES = st.recursive(
    _comparisons(),
    lambda children: st.one_of(
        st.tuples(st.just("not"), children),
        st.tuples(st.just("and"), children, children),
        st.tuples(st.just("or"), children, children),
    ),
    max_leaves=8,
)

_PROPERTY_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    _INTS,
    _FINITE,
    _STRING_TEXT,
    st.integers(-100, 100).map(lambda i: Typed("int", i)),
    _FINITE.map(lambda f: Typed("double", f)),
    st.sampled_from([0, 1, -1, 0.0, 1.0, "", "a", True, False]),
)
_PROPERTY_MAPS = st.dictionaries(st.sampled_from(_NAMES), _PROPERTY_VALUES)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(tree=_TREES, props=_PROPERTY_MAPS)
def test_generated_comparisons_match_reference(tree, props):
    text = _render(tree)
    expected = _ref_eval(tree, props)
    f = parse_filter(text)
    assert f.evaluate(msg(**props)) is expected, text
    assert f.matches(msg(**props)) is (expected is True)


# -- property-based: the parser only ever raises FilterError ----------------------------

_FRAGMENTS = [
    "a", "b", "$x", "_y", "AMQPriority", "JMSType", "AMQSize", "AMQDurable",
    "1", "0", "07", "09", "0x1f", "1L", "1.5", ".5", "5.", "1e3", "1e", "9" * 30,
    "'s'", "''", "'it''s'", "'%_'", "'", "\"",
    "=", "<>", "<", ">", "<=", ">=", "+", "-", "*", "/", "%", "(", ")", ",", "!=",
    "AND", "OR", "NOT", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "NULL", "TRUE",
    "FALSE", "XPATH", "--", "/*", "*/", "\n", ".", "é", "\x00",
]  # fmt: skip


def _check_parse(text: str) -> None:
    try:
        f = parse_filter(text)
    except FilterError as err:
        assert err.column is None or 1 <= err.column <= max(len(text), MAX_FILTER_LENGTH) + 1
        return
    # Whatever parsed must evaluate without raising, to a three-valued result.
    m = Message(
        "q",
        properties={"a": 1, "b": "s", "$x": None, "_y": True, "JMSType": 2.5, "z": b"raw"},
    )
    assert f.evaluate(m) in (True, False, None)
    assert f.matches(m) in (True, False)


@settings(max_examples=400)
@given(st.text(max_size=80))
def test_random_text_only_raises_filter_error(text):
    _check_parse(text)


@settings(max_examples=600)
@given(
    st.lists(st.sampled_from(_FRAGMENTS), max_size=25),
    st.sampled_from([" ", ""]),
)
def test_random_token_soup_only_raises_filter_error(fragments, separator):
    _check_parse(separator.join(fragments))


@settings(max_examples=200)
@given(tree=_TREES)
def test_generated_filters_round_trip_through_not(tree):
    # NOT flips TRUE and FALSE and keeps UNKNOWN, for any message.
    text = _render(tree)
    props = {"a": 1, "b": "a", "c": None}
    value = parse_filter(text).evaluate(msg(**props))
    negated = parse_filter(f"NOT ({text})").evaluate(msg(**props))
    assert negated is (None if value is None else not value)
