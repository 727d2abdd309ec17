"""The parse tree of a filter: :class:`_Node`, one sub-expression and the closure that computes it.

Static kinds let the parser reject what can never work (``1 AND x``,
``'a' < b``, ``x = NULL``) with a position, as Artemis's parser does.
Constant nodes carry their value, so operators can specialise on them and the
parser can fold them.
"""

from __future__ import annotations

from typing import Any, Callable

from junction.model.message import Message

#: What every node computes: the value of its sub-expression for a message.
_Eval = Callable[[Message], Any]

#: The static kinds of a node.
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
