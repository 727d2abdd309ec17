"""The filter parser: tokens to a tree of closures, type-checked and constant-folded.

Precedence climbing over :mod:`.lexer`'s tokens; an identifier becomes the
getter of a header (:data:`HEADER_IDENTIFIERS`) or of a property, each
operator's closure comes from :mod:`.evaluator` (or :mod:`.like` for LIKE),
and the result is the one function :class:`~.expression.Filter` calls per
message.
"""

from __future__ import annotations

from junction.model.filter.errors import FilterError
from junction.model.filter.evaluator import (
    _and,
    _arithmetic,
    _as_condition,
    _compare,
    _is_null,
    _negate,
    _not,
    _or,
    _string_predicate,
    _unary_plus,
)
from junction.model.filter.lexer import _quote, _Token, _tokenize
from junction.model.filter.like import _compile_like
from junction.model.filter.tree import (
    _K_ANY,
    _K_BOOL,
    _K_NULL,
    _K_NUM,
    _K_STR,
    _constant,
    _constant_fn,
    _Eval,
    _Node,
)
from junction.model.message import Message, Typed

__all__ = ["HEADER_IDENTIFIERS", "MAX_NESTING_DEPTH"]

#: Deepest expression nesting accepted (parentheses, ``NOT``, unary minus,
#: operator chains other than ``AND``/``OR``).
MAX_NESTING_DEPTH = 100


# -- header identifiers ------------------------------------------------------


def _durable(m: Message) -> str:
    return "DURABLE" if m.durable else "NON_DURABLE"


def _delivery_mode(m: Message) -> str:
    return "PERSISTENT" if m.durable else "NON_PERSISTENT"


def _correlation_id(m: Message):
    """A STOMP or AMQP producer's correlation id, else a JMS (CORE) client's, which that
    client keeps in the ``JMSCorrelationID`` property."""
    if m.correlation_id is not None:
        return m.correlation_id
    value = m.properties.get("JMSCorrelationID")
    return value if value.__class__ is str else None


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
    "JMSCorrelationID": _correlation_id,
}


def _property(name: str) -> _Eval:
    def get(m: Message):
        value = m.properties.get(name)
        if value.__class__ is Typed:
            return value.value
        return value

    return get


# -- grammar ---------------------------------------------------------------

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

