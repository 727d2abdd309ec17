"""Artemis filter expressions (JMS message selectors).

Queues in ``broker.xml``, diverts, bridges and STOMP ``selector`` headers all
use the same small SQL-92 subset.  :func:`parse_filter` parses a filter once
into a tree of closures; :meth:`Filter.matches` then runs that tree against a
:class:`~junction.model.message.Message`.  Routing calls ``matches`` for
every message and every filtered queue, so the parsed form does the work
(operator dispatch, type checks of literals, LIKE pattern compilation) up
front and each closure does only what its node needs.

Blank filters: ``parse_filter(None)``, ``parse_filter("")`` and a filter of
only whitespace return :data:`MATCH_ALL`, whose ``matches`` is always true.
Callers may test ``filter.match_all`` to skip the call altogether.

Language
--------
* Literals: ``'strings'`` (``''`` is a quote), integers (``42``, ``42L``,
  hex ``0x2A``, octal ``052``), decimals (``1.5``, ``.5``, ``5.``, ``1E3``,
  ``2.5e-3``), ``TRUE``, ``FALSE``, ``NULL``.
* Identifiers: Java identifiers (letters, digits, ``_`` and ``$``, not
  starting with a digit).  ``foo-bar`` is ``foo - bar``, not a property name.
  Header identifiers (see :data:`HEADER_IDENTIFIERS`) read message headers;
  any other identifier reads the property of that name (case-sensitive).
* Operators, loosest first: ``OR``; ``AND``; ``NOT``; ``=``, ``<>``,
  ``IS [NOT] NULL``; ``<``, ``>``, ``<=``, ``>=``, ``[NOT] LIKE``,
  ``[NOT] BETWEEN``, ``[NOT] IN``; binary ``+ -``; ``* / %``; unary ``+ -``.
  Keywords are case-insensitive.  ``--`` starts a comment to the end of the
  line and ``/* ... */`` is a comment, as in Artemis.

Semantics (JMS 2.0, section 3.8.1)
----------------------------------
* A missing property, or one whose value is ``None``, is NULL.  Comparisons
  and arithmetic with NULL are UNKNOWN (``None``); ``AND``/``OR``/``NOT``
  follow SQL three-valued logic; a message matches only when the whole
  filter is TRUE.
* Numbers compare with numbers (integers and decimals promote freely);
  strings and booleans only with ``=`` and ``<>``.  Comparing unlike types
  (a string property with a number, say) is FALSE, not an error, and that
  holds for ``<>`` and ``NOT BETWEEN`` too (the JMS rule; Artemis's ``<>``
  is ``NOT =`` and so is TRUE there).  ``LIKE`` and ``IN`` on a non-string
  value are UNKNOWN, as Artemis does for ``IN``.
* A property used directly as a condition (``WHERE flag``) must hold a
  boolean; any other value is UNKNOWN.
* ``/`` always divides as floating point and ``%`` is the floating-point
  remainder, as in Artemis; dividing by zero gives infinity or NaN as Java
  does, and NaN is unequal to everything (IEEE).  Integer arithmetic does
  not wrap at 32 or 64 bits.  Arithmetic on a non-number is UNKNOWN.

Deliberate differences from Artemis's parser: ``NOT`` binds looser than the
comparisons, as SQL and the JMS specification say (Artemis parses
``NOT a = 1`` as ``(NOT a) = 1``); ``+`` does not concatenate strings.
Not supported: ``XPATH``/``XQUERY`` body filters and the
``convert_string_expressions:`` and ``hyphenated_props:`` prefixes; they are
rejected with a :class:`FilterError` saying so.

Limits: a filter longer than :data:`MAX_FILTER_LENGTH` characters or nested
deeper than :data:`MAX_NESTING_DEPTH` levels is rejected, so a hostile
selector cannot exhaust the stack or the CPU.  ``AND``/``OR`` chains are
flattened, so ``a = 1 OR a = 2 OR ...`` is one level however long it is.
Constant sub-expressions (``2 * 3``, ``-5``) are folded at parse time.

:meth:`Filter.evaluate` returns the three-valued result (``None`` for
UNKNOWN) for diagnostics and tests; routing uses :meth:`Filter.matches`.
"""

from __future__ import annotations

import math
import operator
import re
import unicodedata
from typing import Any, Callable

from junction.model.message import Message, Typed

__all__ = [
    "Filter",
    "FilterError",
    "MATCH_ALL",
    "MAX_FILTER_LENGTH",
    "MAX_NESTING_DEPTH",
    "HEADER_IDENTIFIERS",
    "parse_filter",
]

#: Longest filter text accepted, in characters.
MAX_FILTER_LENGTH = 10_000
#: Deepest expression nesting accepted (parentheses, ``NOT``, unary minus,
#: operator chains other than ``AND``/``OR``).
MAX_NESTING_DEPTH = 100

_Eval = Callable[[Message], Any]


class FilterError(ValueError):
    """A filter expression is invalid.

    ``column`` is the 1-based character position of the problem in ``text``
    (``None`` when the problem has no position); ``reason`` is the message
    without the position.  The message does not repeat the filter text:
    callers usually quote it themselves.
    """

    def __init__(self, reason: str, text: str = "", position: int | None = None):
        self.reason = reason
        self.text = text
        self.column = None if position is None else position + 1
        if self.column is None:
            message = reason
        else:
            message = f"{reason} at column {self.column}"
        super().__init__(message)


# -- header identifiers ------------------------------------------------------


def _durable(m: Message) -> str:
    return "DURABLE" if m.durable else "NON_DURABLE"


def _delivery_mode(m: Message) -> str:
    return "PERSISTENT" if m.durable else "NON_PERSISTENT"


#: Identifiers that read message headers rather than properties, with what
#: they read.  They take precedence over a property of the same name.
#: ``JMSMessageID`` and ``JMSType`` are plain properties of those names.
HEADER_IDENTIFIERS: dict[str, _Eval] = {
    "AMQPriority": lambda m: m.priority,
    "AMQExpiration": lambda m: m.expiration,
    "AMQDurable": _durable,
    "AMQTimestamp": lambda m: m.timestamp,
    "AMQSize": lambda m: m.encoded_size(),
    "AMQUserID": lambda m: m.user_id,
    "AMQUserId": lambda m: m.user_id,
    "AMQAddress": lambda m: m.address,
    "AMQGroupID": lambda m: m.group_id,
    "JMSPriority": lambda m: m.priority,
    "JMSTimestamp": lambda m: m.timestamp,
    "JMSExpiration": lambda m: m.expiration,
    "JMSDeliveryMode": _delivery_mode,
    "JMSCorrelationID": lambda m: m.correlation_id,
}


def _property(name: str) -> _Eval:
    def get(m: Message):
        value = m.properties.get(name)
        if value.__class__ is Typed:
            return value.value
        return value

    return get


# -- runtime value kinds -----------------------------------------------------
#
# Python's bool is an int, but JMS booleans are not numbers, so values are
# classified by exact class first (fast) and by isinstance only for subclasses.

_NUM, _STR, _BOOL, _OTHER = 1, 2, 3, 4
_KINDS = {int: _NUM, float: _NUM, str: _STR, bool: _BOOL}
_kind_of_class = _KINDS.get


def _slow_kind(value) -> int:
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, (int, float)):
        return _NUM
    if isinstance(value, str):
        return _STR
    return _OTHER


def _kind(value) -> int:
    return _kind_of_class(value.__class__) or _slow_kind(value)


# -- tokens ------------------------------------------------------------------

_KEYWORDS = frozenset(
    [
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "LIKE",
        "ESCAPE",
        "IN",
        "IS",
        "TRUE",
        "FALSE",
        "NULL",
        "XPATH",
        "XQUERY",
    ]
)
_WHITESPACE = " \t\n\r\f"
_DIGITS = "0123456789"
_HEX_DIGITS = "0123456789abcdefABCDEF"
_SYMBOLS = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",")
_START_CATEGORIES = frozenset(["Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"])
_PART_CATEGORIES = _START_CATEGORIES | {"Nd", "Mn", "Mc"}
_UNSUPPORTED_PREFIXES = ("convert_string_expressions:", "hyphenated_props:")


def _is_ident_start(c: str) -> bool:
    """``Character.isJavaIdentifierStart`` for the characters that matter."""
    if c.isascii():
        return c.isalpha() or c == "_" or c == "$"
    return unicodedata.category(c) in _START_CATEGORIES


def _is_ident_part(c: str) -> bool:
    if c.isascii():
        return c.isalnum() or c == "_" or c == "$"
    return unicodedata.category(c) in _PART_CATEGORIES


class _Token:
    """``kind`` is ``ID``, ``NUM``, ``STR``, ``EOF``, a keyword or a symbol."""

    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind: str, value, pos: int):
        self.kind = kind
        self.value = value
        self.pos = pos

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of filter"
        if self.kind == "ID":
            return f"identifier {self.value}"
        if self.kind == "NUM":
            return f"number {self.value!r}"
        if self.kind == "STR":
            return f"string {_quote(self.value)}"
        return repr(self.value)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    append = tokens.append
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
        elif c == "'":
            start = i
            parts = []
            i += 1
            while True:
                j = text.find("'", i)
                if j < 0:
                    raise FilterError("unterminated string literal", text, start)
                parts.append(text[i:j])
                if j + 1 < n and text[j + 1] == "'":
                    parts.append("'")
                    i = j + 2
                else:
                    i = j + 1
                    break
            append(_Token("STR", "".join(parts), start))
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            value, end = _scan_number(text, i)
            append(_Token("NUM", value, i))
            i = end
        elif _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_part(text[j]):
                j += 1
            word = text[i:j]
            upper = word.upper()
            if upper in _KEYWORDS:
                append(_Token(upper, word, i))
            else:
                append(_Token("ID", word, i))
            i = j
        elif text.startswith("--", i):
            j = text.find("\n", i)
            k = text.find("\r", i)
            ends = [x for x in (j, k) if x >= 0]
            i = min(ends) + 1 if ends else n
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise FilterError("unterminated /* comment", text, i)
            i = j + 2
        elif text.startswith(("!=", "=="), i):
            raise FilterError(f"unknown operator {text[i : i + 2]!r} (use = or <>)", text, i)
        else:
            for symbol in _SYMBOLS:
                if text.startswith(symbol, i):
                    append(_Token(symbol, symbol, i))
                    i += len(symbol)
                    break
            else:
                if c == '"':
                    raise FilterError(
                        "unexpected '\"' (string literals use single quotes)", text, i
                    )
                raise FilterError(f"unexpected character {c!r}", text, i)
    append(_Token("EOF", None, n))
    return tokens


def _scan_number(text: str, i: int) -> tuple[int | float, int]:
    """Scan the numeric literal at ``text[i]``; return its value and end."""
    n = len(text)
    start = i
    if text.startswith(("0x", "0X"), i):
        j = i + 2
        while j < n and text[j] in _HEX_DIGITS:
            j += 1
        if j == i + 2:
            raise FilterError("hexadecimal literal needs digits after 0x", text, start)
        value = int(text[i + 2 : j], 16)
        if j < n and text[j] in "lL":
            j += 1
        return value, _number_end(text, start, j)
    j = i
    while j < n and text[j] in _DIGITS:
        j += 1
    digits_end = j
    is_float = False
    if j < n and text[j] == ".":
        is_float = True
        j += 1
        while j < n and text[j] in _DIGITS:
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k >= n or text[k] not in _DIGITS:
            raise FilterError("exponent needs digits", text, j)
        while k < n and text[k] in _DIGITS:
            k += 1
        is_float = True
        j = k
    if is_float:
        return float(text[start:j]), _number_end(text, start, j)
    digits = text[start:digits_end]
    if j < n and text[j] in "lL":
        j += 1
    end = _number_end(text, start, j)
    if len(digits) > 1 and digits[0] == "0":
        if any(d in "89" for d in digits):
            raise FilterError(f"invalid octal literal {digits}", text, start)
        return int(digits, 8), end
    try:
        return int(digits), end
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise FilterError("integer literal is too long", text, start) from None


def _number_end(text: str, start: int, j: int) -> int:
    if j < len(text) and (text[j] == "." or _is_ident_part(text[j])):
        k = j + 1
        while k < len(text) and (text[k] == "." or _is_ident_part(text[k])):
            k += 1
        raise FilterError(f"invalid number {text[start:k]!r}", text, start)
    return j


# -- parse tree --------------------------------------------------------------
#
# Static kinds let the parser reject what can never work (``1 AND x``,
# ``'a' < b``, ``x = NULL``) with a position, as Artemis's parser does.

_K_BOOL, _K_NUM, _K_STR, _K_NULL, _K_ANY = "boolean", "number", "string", "NULL", "any"


class _Node:
    """One parsed sub-expression.

    ``fn(message)`` computes its value (``None`` is NULL/UNKNOWN); ``kind`` is
    its static type; ``const``/``is_const`` hold the value of constant
    sub-expressions so operators can specialise on them; ``parts`` holds the
    operands of a flattened AND/OR (``op``).
    """

    __slots__ = ("kind", "fn", "pos", "depth", "is_const", "const", "op", "parts")

    def __init__(self, kind: str, fn: _Eval, pos: int, depth: int = 1):
        self.kind = kind
        self.fn = fn
        self.pos = pos
        self.depth = depth
        self.is_const = False
        self.const = None
        self.op = None
        self.parts = None


def _constant_fn(value) -> _Eval:
    return lambda m: value


def _constant(kind: str, value, pos: int) -> _Node:
    node = _Node(kind, _constant_fn(value), pos)
    node.is_const = True
    node.const = value
    return node


# -- operators ---------------------------------------------------------------


def _as_condition(fn: _Eval) -> _Eval:
    """A property used as a condition: booleans pass, anything else is UNKNOWN."""

    def cond(m):
        v = fn(m)
        return v if (v is True or v is False) else None

    return cond


def _not(fn: _Eval) -> _Eval:
    def f(m):
        v = fn(m)
        return None if v is None else not v

    return f


def _connective(fns: list[_Eval], decisive: bool) -> _Eval:
    """AND (``decisive=False``) or OR (``decisive=True``) in SQL three-valued logic.

    One operand equal to ``decisive`` settles the result; otherwise any
    UNKNOWN (None) operand makes it UNKNOWN.
    """
    other = not decisive
    if len(fns) == 2:
        a, b = fns

        def pair(m):
            x = a(m)
            if x is decisive:
                return decisive
            y = b(m)
            if y is decisive:
                return decisive
            return other if (x is other and y is other) else None

        return pair
    fns = tuple(fns)

    def many(m):
        unknown = False
        for g in fns:
            v = g(m)
            if v is decisive:
                return decisive
            if v is None:
                unknown = True
        return None if unknown else other

    return many


def _and(fns: list[_Eval]) -> _Eval:
    return _connective(fns, False)


def _or(fns: list[_Eval]) -> _Eval:
    return _connective(fns, True)


_ORDER_OPS = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}


def _compare(op: str, left: _Node, right: _Node) -> _Eval:
    """``left op right`` for the six comparison operators."""
    if left.is_const and not right.is_const:
        left, right, op = right, left, _MIRROR[op]
    lf = left.fn
    if right.is_const:
        c = right.const
        if c is None:
            return _constant_fn(None)
        kc = _kind(c)
        if op == "=":

            def eq_const(m):
                v = lf(m)
                if v is None:
                    return None
                return (_kind_of_class(v.__class__) or _slow_kind(v)) == kc and v == c

            return eq_const
        if op == "<>":

            def ne_const(m):
                v = lf(m)
                if v is None:
                    return None
                return (_kind_of_class(v.__class__) or _slow_kind(v)) == kc and v != c

            return ne_const
        cmp = _ORDER_OPS[op]

        def order_const(m):
            v = lf(m)
            if v is None:
                return None
            return (_kind_of_class(v.__class__) or _slow_kind(v)) == _NUM and cmp(v, c)

        return order_const
    rf = right.fn
    if op == "=":

        def eq(m):
            a = lf(m)
            if a is None:
                return None
            b = rf(m)
            if b is None:
                return None
            ka = _kind(a)
            return ka == _kind(b) and ka != _OTHER and a == b

        return eq
    if op == "<>":

        def ne(m):
            a = lf(m)
            if a is None:
                return None
            b = rf(m)
            if b is None:
                return None
            ka = _kind(a)
            return ka == _kind(b) and ka != _OTHER and a != b

        return ne
    cmp = _ORDER_OPS[op]

    def order(m):
        a = lf(m)
        if a is None:
            return None
        b = rf(m)
        if b is None:
            return None
        return _kind(a) == _NUM and _kind(b) == _NUM and cmp(a, b)

    return order


def _java_divide(a, b):
    if b == 0:
        if a != a or a == 0:
            return math.nan
        negative = (a < 0) != (math.copysign(1.0, b) < 0)
        return -math.inf if negative else math.inf
    return a / b


def _java_remainder(a, b):
    if b == 0:
        return math.nan
    try:
        return math.fmod(a, b)
    except ValueError:  # fmod(inf, x)
        return math.nan


_ARITHMETIC = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _java_divide,
    "%": _java_remainder,
}


def _arithmetic(op: str, left: _Eval, right: _Eval) -> _Eval:
    fn = _ARITHMETIC[op]

    def arith(m):
        a = left(m)
        if a is None:
            return None
        b = right(m)
        if b is None:
            return None
        if _kind(a) != _NUM or _kind(b) != _NUM:
            return None
        try:
            return fn(a, b)
        except ArithmeticError:  # an int too large for a float
            return None

    return arith


def _negate(fn: _Eval) -> _Eval:
    def neg(m):
        v = fn(m)
        if v is None or _kind(v) != _NUM:
            return None
        return -v

    return neg


def _unary_plus(fn: _Eval) -> _Eval:
    def plus(m):
        v = fn(m)
        if v is None or _kind(v) != _NUM:
            return None
        return v

    return plus


def _is_null(fn: _Eval, negated: bool) -> _Eval:
    if negated:
        return lambda m: fn(m) is not None
    return lambda m: fn(m) is None


def _string_predicate(fn: _Eval, test: Callable[[str], bool], negated: bool) -> _Eval:
    """LIKE/IN: NULL and non-strings are UNKNOWN, strings are ``test``-ed."""
    if negated:

        def not_test(m):
            v = fn(m)
            if v.__class__ is str or isinstance(v, str):
                return not test(v)
            return None

        return not_test

    def check(m):
        v = fn(m)
        if v.__class__ is str or isinstance(v, str):
            return test(v)
        return None

    return check


# -- LIKE --------------------------------------------------------------------

_ANY_RUN = object()  # '%'
_ANY_ONE = object()  # '_'


class _Segment:
    """A run of a LIKE pattern between ``%`` wildcards: fixed length, so it is
    matched with ``str`` methods or a quantifier-free regex (no backtracking)."""

    __slots__ = ("length", "literal", "regex")

    def __init__(self, items: list):
        self.length = len(items)
        if any(item is _ANY_ONE for item in items):
            self.literal = None
            source = "".join("." if item is _ANY_ONE else re.escape(item) for item in items)
            self.regex = re.compile(source, re.DOTALL)
        else:
            self.literal = "".join(items)
            self.regex = None

    def match_at(self, s: str, pos: int) -> bool:
        if self.literal is not None:
            return s.startswith(self.literal, pos)
        return self.regex.match(s, pos) is not None

    def find(self, s: str, start: int, end: int) -> int:
        if self.literal is not None:
            return s.find(self.literal, start, end)
        found = self.regex.search(s, start, end)
        return -1 if found is None else found.start()


def _compile_like(pattern: str, escape: str | None, text: str, pos: int) -> Callable[[str], bool]:
    """A matcher for a LIKE pattern.

    The pattern is split at ``%`` into fixed-length segments; the first must
    match at the start, the last at the end, and the middle ones are found
    leftmost-first in order, which is exact for ``%``-only wildcards and
    linear-ish in the input (unlike a backtracking ``.*`` regex, which a
    pattern such as ``'%a%a%a%a%b'`` can make exponential).
    """
    items: list = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            i += 1
            if i >= len(pattern):
                raise FilterError("LIKE pattern ends with its ESCAPE character", text, pos)
            items.append(pattern[i])
        elif c == "%":
            if not items or items[-1] is not _ANY_RUN:
                items.append(_ANY_RUN)
        elif c == "_":
            items.append(_ANY_ONE)
        else:
            items.append(c)
        i += 1
    runs: list[list] = [[]]
    for item in items:
        if item is _ANY_RUN:
            runs.append([])
        else:
            runs[-1].append(item)
    segments = [_Segment(run) for run in runs]
    if len(segments) == 1:
        only = segments[0]
        if only.literal is not None:
            literal = only.literal
            return lambda s: s == literal
        length = only.length
        regex = only.regex
        return lambda s: len(s) == length and regex.match(s) is not None
    first, middle, last = segments[0], segments[1:-1], segments[-1]
    middle = [seg for seg in middle if seg.length]
    min_length = first.length + last.length + sum(seg.length for seg in middle)
    if not middle and first.literal is not None and last.literal is not None:
        prefix, suffix = first.literal, last.literal

        def affix(s: str) -> bool:
            return len(s) >= min_length and s.startswith(prefix) and s.endswith(suffix)

        return affix

    def like(s: str) -> bool:
        n = len(s)
        if n < min_length or not first.match_at(s, 0):
            return False
        end = n - last.length
        if not last.match_at(s, end):
            return False
        at = first.length
        for seg in middle:
            found = seg.find(s, at, end)
            if found < 0:
                return False
            at = found + seg.length
        return True

    return like


# -- parser ------------------------------------------------------------------

# Binding power of binary/postfix operators (higher binds tighter).  Prefix NOT
# sits at 3, between AND and the comparisons; unary +/- at 8.
_P_OR, _P_AND, _P_NOT, _P_EQ, _P_REL, _P_ADD, _P_MUL, _P_UNARY = range(1, 9)
_BINARY_POWER = {
    "OR": _P_OR,
    "AND": _P_AND,
    "=": _P_EQ,
    "<>": _P_EQ,
    "IS": _P_EQ,
    "<": _P_REL,
    ">": _P_REL,
    "<=": _P_REL,
    ">=": _P_REL,
    "LIKE": _P_REL,
    "BETWEEN": _P_REL,
    "IN": _P_REL,
    "NOT": _P_REL,  # NOT LIKE / NOT BETWEEN / NOT IN
    "+": _P_ADD,
    "-": _P_ADD,
    "*": _P_MUL,
    "/": _P_MUL,
    "%": _P_MUL,
}


class _Parser:
    """Precedence-climbing parser producing :class:`_Node` trees.

    Recursion happens only for parentheses and prefix operators, and is
    bounded by :data:`MAX_NESTING_DEPTH`, so the Python stack stays shallow.
    """

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.nesting = 0

    # -- helpers -------------------------------------------------------------
    def error(self, reason: str, pos: int) -> FilterError:
        return FilterError(reason, self.text, pos)

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "EOF":
            self.index += 1
        return token

    def expect(self, kind: str, what: str) -> _Token:
        token = self.peek()
        if token.kind != kind:
            raise self.error(f"expected {what} but found {token.describe()}", token.pos)
        return self.advance()

    def node(self, kind: str, fn: _Eval, pos: int, *children: _Node) -> _Node:
        depth = 1 + max((child.depth for child in children), default=0)
        if depth > MAX_NESTING_DEPTH:
            raise self.error(f"filter is nested more than {MAX_NESTING_DEPTH} levels deep", pos)
        result = _Node(kind, fn, pos, depth)
        if children and all(child.is_const for child in children):
            # Fold constant sub-expressions: evaluate once, never per message.
            result.is_const = True
            result.const = fn(None)
            result.fn = _constant_fn(result.const)
        return result

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING_DEPTH:
            raise self.error(f"filter is nested more than {MAX_NESTING_DEPTH} levels deep", pos)

    # -- type checks ---------------------------------------------------------
    def condition(self, node: _Node, context: str) -> _Eval:
        if node.kind == _K_ANY:
            return _as_condition(node.fn)
        if node.kind in (_K_BOOL, _K_NULL):
            return node.fn
        raise self.error(f"{context} needs a condition but got a {node.kind} expression", node.pos)

    def numeric(self, node: _Node, op: str) -> None:
        if node.kind in (_K_STR, _K_BOOL):
            raise self.error(f"'{op}' needs numbers but got a {node.kind} expression", node.pos)

    def comparable(self, node: _Node, op: str) -> None:
        if node.kind == _K_NULL:
            hint = " (use IS NULL / IS NOT NULL)" if op in ("=", "<>") else ""
            raise self.error(f"cannot compare with NULL using '{op}'{hint}", node.pos)
        if op not in ("=", "<>") and node.kind in (_K_STR, _K_BOOL):
            raise self.error(
                f"a {node.kind} can only be compared with = and <>, not '{op}'", node.pos
            )

    # -- grammar -------------------------------------------------------------
    def parse(self) -> _Eval:
        token = self.peek()
        if token.kind in ("XPATH", "XQUERY"):
            raise self.error(f"{token.kind} filters are not supported", token.pos)
        tree = self.expression(_P_OR)
        token = self.peek()
        if token.kind != "EOF":
            raise self.error(f"unexpected {token.describe()}", token.pos)
        return self.condition(tree, "a filter")

    def expression(self, min_power: int) -> _Node:
        left = self.prefix(min_power)
        while True:
            token = self.peek()
            power = _BINARY_POWER.get(token.kind)
            if power is None or power < min_power:
                return left
            if token.kind in ("OR", "AND"):
                left = self.logical(left, token.kind, power)
            elif token.kind == "IS":
                left = self.is_null(left)
            elif token.kind in ("=", "<>", "<", ">", "<=", ">="):
                self.advance()
                right = self.expression(power + 1)
                self.comparable(left, token.kind)
                self.comparable(right, token.kind)
                fn = _compare(token.kind, left, right)
                left = self.node(_K_BOOL, fn, token.pos, left, right)
            elif token.kind in ("+", "-", "*", "/", "%"):
                self.advance()
                right = self.expression(power + 1)
                self.numeric(left, token.kind)
                self.numeric(right, token.kind)
                fn = _arithmetic(token.kind, left.fn, right.fn)
                left = self.node(_K_NUM, fn, token.pos, left, right)
            else:  # [NOT] LIKE / BETWEEN / IN
                left = self.predicate(left)

    def logical(self, left: _Node, op: str, power: int) -> _Node:
        operands: list[_Node] = [left]
        while self.peek().kind == op:
            self.advance()
            operands.append(self.expression(power + 1))
        pos = operands[1].pos if len(operands) > 1 else left.pos
        fns: list[_Eval] = []
        depth = 0
        for operand in operands:
            if operand.op == op:  # (a OR b) OR c: one flat OR, no extra level
                fns.extend(operand.parts)
                depth = max(depth, operand.depth)
            else:
                fns.append(self.condition(operand, op))
                depth = max(depth, operand.depth + 1)
        if depth > MAX_NESTING_DEPTH:
            raise self.error(f"filter is nested more than {MAX_NESTING_DEPTH} levels deep", pos)
        fn = _and(fns) if op == "AND" else _or(fns)
        node = _Node(_K_BOOL, fn, pos, depth)
        node.op = op
        node.parts = fns
        return node

    def is_null(self, left: _Node) -> _Node:
        token = self.advance()  # IS
        negated = False
        if self.peek().kind == "NOT":
            self.advance()
            negated = True
        self.expect("NULL", "NULL after IS" + (" NOT" if negated else ""))
        return self.node(_K_BOOL, _is_null(left.fn, negated), token.pos, left)

    def predicate(self, left: _Node) -> _Node:
        token = self.advance()
        negated = token.kind == "NOT"
        if negated:
            token = self.advance()
            if token.kind not in ("LIKE", "BETWEEN", "IN"):
                raise self.error(
                    f"expected LIKE, BETWEEN or IN after NOT but found {token.describe()}",
                    token.pos,
                )
        if token.kind == "LIKE":
            pattern = self.expect("STR", "a string pattern after LIKE")
            escape = None
            if self.peek().kind == "ESCAPE":
                self.advance()
                escape_token = self.expect("STR", "a string after ESCAPE")
                escape = escape_token.value
                if len(escape) != 1:
                    raise self.error(
                        f"ESCAPE must be a single character, got {_quote(escape)}",
                        escape_token.pos,
                    )
            test = _compile_like(pattern.value, escape, self.text, pattern.pos)
            return self.node(_K_BOOL, _string_predicate(left.fn, test, negated), token.pos, left)
        if token.kind == "IN":
            self.expect("(", "'(' after IN")
            values = [self.expect("STR", "a string literal in the IN list").value]
            while self.peek().kind == ",":
                self.advance()
                values.append(self.expect("STR", "a string literal in the IN list").value)
            self.expect(")", "')' or ',' in the IN list")
            choices = frozenset(values)
            fn = _string_predicate(left.fn, choices.__contains__, negated)
            return self.node(_K_BOOL, fn, token.pos, left)
        # BETWEEN low AND high  ==  left >= low AND left <= high;
        # NOT BETWEEN           ==  left < low OR left > high (as Artemis).
        low = self.expression(_P_ADD)
        self.expect("AND", "AND in BETWEEN")
        high = self.expression(_P_ADD)
        for operand in (left, low, high):
            self.comparable(operand, "BETWEEN")
        if negated:
            fn = _or([_compare("<", left, low), _compare(">", left, high)])
        else:
            fn = _and([_compare(">=", left, low), _compare("<=", left, high)])
        return self.node(_K_BOOL, fn, token.pos, left, low, high)

    def prefix(self, min_power: int) -> _Node:
        token = self.advance()
        kind = token.kind
        if kind == "ID":
            getter = HEADER_IDENTIFIERS.get(token.value) or _property(token.value)
            return _Node(_K_ANY, getter, token.pos)
        if kind == "NUM":
            return _constant(_K_NUM, token.value, token.pos)
        if kind == "STR":
            return _constant(_K_STR, token.value, token.pos)
        if kind == "TRUE":
            return _constant(_K_BOOL, True, token.pos)
        if kind == "FALSE":
            return _constant(_K_BOOL, False, token.pos)
        if kind == "NULL":
            return _constant(_K_NULL, None, token.pos)
        if kind == "(":
            self.enter(token.pos)
            inner = self.expression(_P_OR)
            self.expect(")", "')'")
            self.nesting -= 1
            if inner.op is not None:  # keep AND/OR flattening across parentheses
                return inner
            node = _Node(inner.kind, inner.fn, token.pos, inner.depth)
            node.is_const, node.const = inner.is_const, inner.const
            return node
        if kind == "NOT":
            if min_power > _P_NOT:
                raise self.error("NOT must be in parentheses here", token.pos)
            self.enter(token.pos)
            operand = self.expression(_P_NOT)
            self.nesting -= 1
            fn = _not(self.condition(operand, "NOT"))
            return self.node(_K_BOOL, fn, token.pos, operand)
        if kind in ("-", "+"):
            self.enter(token.pos)
            operand = self.expression(_P_UNARY)
            self.nesting -= 1
            self.numeric(operand, "unary " + kind)
            fn = _negate(operand.fn) if kind == "-" else _unary_plus(operand.fn)
            return self.node(_K_NUM, fn, token.pos, operand)
        if kind in ("XPATH", "XQUERY"):
            raise self.error(f"{kind} filters are not supported", token.pos)
        if kind == "EOF":
            raise self.error("unexpected end of filter", token.pos)
        raise self.error(f"expected a value but found {token.describe()}", token.pos)


# -- public API ----------------------------------------------------------------


class Filter:
    """A parsed filter expression; immutable and safe to share.

    Two filters are equal when their texts are (after stripping whitespace
    at either end), which lets configuration reloads spot unchanged filters.
    """

    __slots__ = ("text", "_fn", "match_all")

    def __init__(self, text: str, fn: _Eval, match_all: bool = False):
        self.text = text
        self._fn = fn
        #: True for the blank filter: every message matches.
        self.match_all = match_all

    def matches(self, message: Message) -> bool:
        """Whether ``message`` passes the filter (the expression is TRUE)."""
        return self._fn(message) is True

    def evaluate(self, message: Message) -> bool | None:
        """The three-valued result: True, False, or None for UNKNOWN."""
        return self._fn(message)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Filter):
            return NotImplemented
        return self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Filter({self.text!r})"

    def __str__(self) -> str:
        return self.text


#: The blank filter; ``parse_filter("")`` and ``parse_filter(None)`` return it.
MATCH_ALL = Filter("", lambda message: True, match_all=True)


def parse_filter(text: str | None) -> Filter:
    """Parse an Artemis filter expression / JMS selector.

    Returns :data:`MATCH_ALL` for ``None`` or blank text.  Raises
    :class:`FilterError` (a ``ValueError``) with the column of the problem for
    anything invalid, including filters over :data:`MAX_FILTER_LENGTH`
    characters or :data:`MAX_NESTING_DEPTH` levels.
    """
    if text is None:
        return MATCH_ALL
    if not isinstance(text, str):
        raise FilterError(f"a filter must be a string, not {type(text).__name__}")
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterError(
            f"filter is {len(text)} characters long; the maximum is {MAX_FILTER_LENGTH}",
            "",
            MAX_FILTER_LENGTH,
        )
    stripped = text.strip()
    if not stripped:
        return MATCH_ALL
    for prefix in _UNSUPPORTED_PREFIXES:
        if stripped.lower().startswith(prefix):
            raise FilterError(
                f"the Artemis '{prefix}' filter prefix is not supported",
                text,
                text.index(stripped[0]),
            )
    return Filter(stripped, _Parser(text).parse())
