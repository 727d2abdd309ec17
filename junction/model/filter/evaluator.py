"""What a parsed filter runs for every message: value kinds and operators.

Each function here builds one closure of the tree the parser makes; routing
calls the tree for every message and every filtered queue, so each closure
does only what its node needs.  The semantics are JMS 2.0's (see the package
doc): three-valued logic, numbers with numbers, strings and booleans only
with ``=`` and ``<>``, NULL and unlike types UNKNOWN or FALSE.
"""

from __future__ import annotations

import math
import operator
from typing import Callable

from junction.model.filter.tree import _constant_fn, _Eval, _Node

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

