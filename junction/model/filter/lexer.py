"""The filter lexer: text to tokens (literals, identifiers, keywords, operators), comments skipped.

Numbers are scanned as Artemis reads them (``42L``, hex ``0x2A``, octal
``052``, decimals with exponents); identifiers are Java identifiers; a
problem is a :class:`~.errors.FilterError` with its column.
"""

from __future__ import annotations

import unicodedata

from junction.model.filter.errors import FilterError

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
