"""Artemis wildcard addresses: routing matches and hierarchical settings.

Artemis uses one syntax in two places with slightly different rules, and this
module keeps them apart on purpose:

* **Routing** (:func:`address_matches`): a queue bound to ``news.#`` receives
  messages sent to ``news``, ``news.europe`` and ``news.europe.sport``.  An
  address is a list of *words* split on the delimiter; ``#`` as a whole word
  matches zero or more words, anywhere in the pattern, and ``*`` as a whole
  word matches exactly one word.  A word such as ``a#`` is literal.  This is
  what Artemis's ``WildcardAddressManager`` (the ``AddressPartNode`` trie)
  computes.  Words are split literally, so ``a..b`` has three words, the
  middle one empty.

* **Settings** (:class:`SettingsRepository`): the ``match`` of an
  ``<address-setting>`` or ``<security-setting>`` follows Artemis's
  ``HierarchicalObjectRepository`` / ``Match``: ``#`` may only be the *last*
  character (``a.#.b`` is rejected, Artemis AMQ229071); ``#`` alone matches
  every address; ``x.#`` matches ``x`` and anything starting ``x.``; ``*``
  matches one non-empty word (Artemis substitutes every ``*`` character, so
  ``orders*`` also matches ``ordersEU``; we keep that).  A match without a
  wildcard character is an *exact* match, looked up by equality only.

Precedence among settings matches (most specific first) is Artemis's
``HierarchicalObjectRepository.MatchComparator``; see
:func:`specificity_key` for the exact rule.

Everything here runs on the reactor thread, so the caches take no locks.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, Hashable, TypeVar

from junction.config.address_settings import ResolvedAddressSettings
from junction.config.model import (
    ADDRESS_SETTINGS_DEFAULTS,
    AddressSettings,
    WildcardAddresses,
)

__all__ = [
    "WildcardSyntax",
    "DEFAULT_SYNTAX",
    "CompiledPattern",
    "compile_pattern",
    "address_matches",
    "PATTERN_CACHE_SIZE",
    "SETTINGS_CACHE_SIZE",
    "FQQN_SEPARATOR",
    "split_fqqn",
    "specificity_key",
    "InvalidMatchError",
    "BoundedLRU",
    "ResolvedAddressSettings",
    "SettingsRepository",
]

#: How many compiled routing patterns :func:`compile_pattern` keeps (LRU).
#: A broker has one pattern per wildcard binding, so this covers thousands of
#: wildcard subscriptions before recompiling.
PATTERN_CACHE_SIZE = 4096

#: How many addresses a :class:`SettingsRepository` remembers the resolution
#: of (LRU, per cache).  Artemis's own cache is unbounded; ours is bounded so a
#: client creating endless distinct addresses cannot grow memory without end.
SETTINGS_CACHE_SIZE = 10_000

#: Separator of a fully qualified queue name, ``address::queue`` (Artemis's
#: ``CompositeAddress.SEPARATOR``; fixed, not part of the wildcard syntax).
FQQN_SEPARATOR = "::"


def split_fqqn(name: str) -> tuple[str, str | None]:
    """Split ``address::queue`` into ``(address, queue)``; ``queue`` is None if absent."""
    address, sep, queue = name.partition(FQQN_SEPARATOR)
    return (address, queue) if sep else (name, None)


@dataclass(frozen=True)
class WildcardSyntax:
    """The three characters of Artemis's wildcard syntax (``<wildcard-addresses>``).

    Each is a single character, as in Artemis (``WildcardConfiguration`` holds
    ``char``s), and they must differ from each other.  Hashable so compiled
    patterns can be cached per syntax.
    """

    delimiter: str = "."
    any_words: str = "#"
    single_word: str = "*"

    def __post_init__(self) -> None:
        chars = (self.delimiter, self.any_words, self.single_word)
        for name, value in zip(("delimiter", "any_words", "single_word"), chars, strict=True):
            if not isinstance(value, str) or len(value) != 1:
                raise ValueError(f"wildcard {name} must be one character, got {value!r}")
        if len(set(chars)) != 3:
            raise ValueError(f"wildcard characters must differ, got {chars!r}")

    @classmethod
    def from_config(cls, config: WildcardAddresses) -> "WildcardSyntax":
        """The syntax a ``broker.xml`` ``<wildcard-addresses>`` block describes.

        ``enabled``/``routing_enabled`` are not part of the syntax: the router
        decides whether to route by wildcard at all.
        """
        return cls(config.delimiter, config.any_words, config.single_word)

    def is_wild(self, text: str) -> bool:
        """Whether ``text`` contains a wildcard character (Artemis ``isWild``).

        Artemis also honours a backslash escape here; Junction does not.
        """
        return self.any_words in text or self.single_word in text


DEFAULT_SYNTAX = WildcardSyntax()


# --------------------------------------------------------------------------
# Routing matches
# --------------------------------------------------------------------------

_ONE = object()  # token: exactly one word
_ANY = object()  # token: zero or more words


class CompiledPattern:
    """A routing pattern compiled once for fast repeated :meth:`matches` calls.

    Patterns without ``#``, or whose only ``#`` is the last word (the common
    ``news.#``), become one anchored regular expression whose segments cannot
    overlap, so matching is linear.  Other ``#`` patterns use a word-level
    glob match that backtracks only to the last ``#`` seen: O(pattern words x
    address words) at worst, never exponential, whatever the address.
    """

    __slots__ = ("pattern", "syntax", "_regex", "_tokens", "_always")

    def __init__(self, pattern: str, syntax: WildcardSyntax = DEFAULT_SYNTAX):
        self.pattern = pattern
        self.syntax = syntax
        self._regex: re.Pattern[str] | None = None
        self._tokens: tuple[Any, ...] = ()
        self._always = False

        tokens: list[Any] = []
        for word in pattern.split(syntax.delimiter):
            if word == syntax.any_words:
                if tokens and tokens[-1] is _ANY:
                    continue  # "#.#" means the same as "#"
                tokens.append(_ANY)
            elif word == syntax.single_word:
                tokens.append(_ONE)
            else:
                tokens.append(word)

        any_count = sum(1 for t in tokens if t is _ANY)
        if tokens == [_ANY]:
            self._always = True
        elif any_count == 0 or (any_count == 1 and tokens[-1] is _ANY):
            self._regex = self._to_regex(tokens, syntax.delimiter)
        else:
            self._tokens = tuple(tokens)

    @staticmethod
    def _to_regex(tokens: list[Any], delimiter: str) -> re.Pattern[str]:
        delim = re.escape(delimiter)
        tail = tokens[-1] is _ANY
        body = tokens[:-1] if tail else tokens
        parts = [f"[^{delim}]*" if t is _ONE else re.escape(t) for t in body]
        text = delim.join(parts)
        if tail:
            # zero more words, or a delimiter then anything (any number of words)
            text += f"(?:{delim}.*)?"
        return re.compile(text, re.DOTALL)

    def matches(self, address: str) -> bool:
        """Whether a message sent to ``address`` is routed to this pattern."""
        if self._always or address == self.pattern:
            return True
        if self._regex is not None:
            return self._regex.fullmatch(address) is not None
        return _glob_words(self._tokens, address.split(self.syntax.delimiter))

    def __repr__(self) -> str:
        return f"CompiledPattern({self.pattern!r})"


def _glob_words(tokens: tuple[Any, ...], words: list[str]) -> bool:
    """Glob-match word lists: ``_ANY`` = any run of words, ``_ONE`` = one word.

    The classic two-pointer algorithm: on a mismatch, retry from the most
    recent ``_ANY`` with it absorbing one more word.  Retrying only the last
    ``_ANY`` is enough because an earlier one can never need to absorb more.
    """
    ti = wi = 0
    star_ti = -1
    star_wi = 0
    n_tokens = len(tokens)
    n_words = len(words)
    while wi < n_words:
        if ti < n_tokens:
            token = tokens[ti]
            if token is _ANY:
                star_ti, star_wi = ti, wi
                ti += 1
                continue
            if token is _ONE or token == words[wi]:
                ti += 1
                wi += 1
                continue
        if star_ti < 0:
            return False
        star_wi += 1
        ti, wi = star_ti + 1, star_wi
    while ti < n_tokens and tokens[ti] is _ANY:
        ti += 1
    return ti == n_tokens


@lru_cache(maxsize=PATTERN_CACHE_SIZE)
def compile_pattern(pattern: str, syntax: WildcardSyntax = DEFAULT_SYNTAX) -> CompiledPattern:
    """Compile (and cache, LRU of :data:`PATTERN_CACHE_SIZE`) a routing pattern."""
    return CompiledPattern(pattern, syntax)


def address_matches(pattern: str, address: str, syntax: WildcardSyntax = DEFAULT_SYNTAX) -> bool:
    """Whether a message sent to ``address`` reaches a binding on ``pattern``.

    Artemis wildcard *routing*: ``#`` (whole word) matches zero or more words,
    ``*`` (whole word) exactly one; any other word must be equal.  A pattern
    equal to the address always matches.
    """
    return compile_pattern(pattern, syntax).matches(address)


# --------------------------------------------------------------------------
# Settings matches (HierarchicalObjectRepository)
# --------------------------------------------------------------------------


class InvalidMatchError(ValueError):
    """A settings ``match`` Artemis would refuse (AMQ229071, ``#`` not last)."""


def _compile_settings_match(match: str, syntax: WildcardSyntax) -> Callable[[str], bool]:
    """Compile a wildcard settings match as Artemis's ``Match`` does.

    ``#`` alone matches everything; a trailing ``#`` (with or without the
    delimiter before it) means "this prefix, or this prefix, a delimiter and
    anything"; every ``*`` character stands for one non-empty run of
    non-delimiter characters.  Other characters are literal (Artemis passes
    regex metacharacters other than ``.`` and ``$`` through unescaped, a bug
    we do not reproduce).
    """
    if match == syntax.any_words:
        return lambda address: True
    body = match
    tail = False
    if body.endswith(syntax.any_words):
        tail = True
        body = body[:-1]
        if body.endswith(syntax.delimiter):
            body = body[:-1]
    delim = re.escape(syntax.delimiter)
    one_word = f"[^{delim}]+"
    text = one_word.join(re.escape(piece) for piece in body.split(syntax.single_word))
    if tail:
        text += f"(?:{delim}.+)?"
    regex = re.compile(text, re.DOTALL)
    return lambda address: regex.fullmatch(address) is not None


def specificity_key(match: str, syntax: WildcardSyntax = DEFAULT_SYNTAX) -> tuple:
    """Sort key putting the *most specific* settings match first.

    Artemis's order (``HierarchicalObjectRepository.getMatches`` and its
    ``MatchComparator``), most specific first:

    1. the exact match (no wildcard character);
    2. matches with ``*`` but no ``#``, compared word by word: at the first
       word where one has ``*`` and the other a literal, the literal wins
       (so ``a.b.*`` beats ``a.*.c``, and ``a.*.c`` beats ``*.b.c``);
    3. matches containing ``#``: the *longer match string* wins, so
       ``a.b.#`` beats ``a.#`` and ``#`` alone is the least specific of all.
       This is a length comparison of the whole string, as in Artemis:
       ``a.*.*.#`` (7 characters) beats ``a.b.#`` (5).

    Where Artemis's comparator says "equal" (two ``#`` matches of the same
    length), Artemis's order depends on hash iteration; we break the tie
    deterministically by rule 2's word comparison, then by the string.
    """
    words = tuple(w == syntax.single_word for w in match.split(syntax.delimiter))
    if syntax.any_words in match:
        return (2, -len(match), words, match)
    if syntax.single_word in match:
        return (1, words, len(match), match)
    return (0, match)


class BoundedLRU:
    """A dict with a size bound that forgets its least recently used entry.

    ``maxsize`` 0 disables caching (as Artemis's ``*-cache-size`` of 0 does).
    """

    __slots__ = ("maxsize", "_data")

    _MISSING = object()

    def __init__(self, maxsize: int):
        if maxsize < 0:
            raise ValueError("maxsize must be >= 0")
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        value = self._data.get(key, self._MISSING)
        if value is self._MISSING:
            return default
        self._data.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        if self.maxsize == 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data


#: The AddressSettings fields that carry a setting (not ``match``/``source``).
_SETTING_FIELDS = tuple(
    f.name for f in dataclasses.fields(AddressSettings) if f.name not in ("match", "source")
)

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("match", "item", "key", "test")

    def __init__(self, match: str, item: T, key: tuple, test: Callable[[str], bool] | None):
        self.match = match
        self.item = item
        self.key = key
        self.test = test


class SettingsRepository(Generic[T]):
    """Settings keyed by ``match`` strings, looked up by address (Artemis semantics).

    ``items`` are objects with a ``match`` attribute:
    :class:`~junction.config.model.AddressSettings` or
    :class:`~junction.config.model.SecuritySetting`.  Two items with the same
    match: the later replaces the earlier, as re-adding a match does in
    Artemis.

    * :meth:`matches` -- every item whose match applies, most specific first
      (order of :func:`specificity_key`).
    * :meth:`match` -- the most specific item only.  Security settings use
      this: Artemis does *not* inherit permissions from less specific
      ``<security-setting>`` blocks ("settings are not inherited",
      security.adoc), because its role sets are not ``Mergeable``.
    * :meth:`resolve` -- address settings merged field by field (Artemis's
      ``AddressSettings.mergeCopy``), then ``defaults``.

    Results are cached per address (:data:`SETTINGS_CACHE_SIZE`, LRU) and the
    caches are emptied by every change (:meth:`add`, :meth:`remove`,
    :meth:`replace`), which also calls the listeners so dependants (the
    security manager's decision cache) can drop theirs.
    """

    def __init__(
        self,
        items: Iterable[T] = (),
        syntax: WildcardSyntax = DEFAULT_SYNTAX,
        defaults: Mapping[str, Any] = ADDRESS_SETTINGS_DEFAULTS,
        *,
        cache_size: int = SETTINGS_CACHE_SIZE,
    ):
        self.syntax = syntax
        self.defaults = dict(defaults)
        self._exact: dict[str, _Entry[T]] = {}
        self._wild: dict[str, _Entry[T]] = {}
        self._match_cache = BoundedLRU(cache_size)
        self._resolve_cache = BoundedLRU(cache_size)
        self._listeners: list[Callable[[], None]] = []
        for item in items:
            self._put(item)

    # -- changes ----------------------------------------------------------

    def _put(self, item: T) -> None:
        match = item.match  # type: ignore[attr-defined]
        if not isinstance(match, str):
            raise InvalidMatchError(f"match must be a string, got {match!r}")
        any_at = match.find(self.syntax.any_words)
        if any_at != -1 and any_at != len(match) - 1:
            raise InvalidMatchError(
                f"AMQ229071: {self.syntax.any_words} can only be at end of match: {match!r}"
            )
        key = specificity_key(match, self.syntax)
        if self.syntax.is_wild(match):
            self._exact.pop(match, None)
            self._wild[match] = _Entry(
                match, item, key, _compile_settings_match(match, self.syntax)
            )
        else:
            self._wild.pop(match, None)
            self._exact[match] = _Entry(match, item, key, None)

    def _changed(self) -> None:
        self._match_cache.clear()
        self._resolve_cache.clear()
        for listener in list(self._listeners):
            listener()

    def add(self, item: T) -> None:
        """Add (or replace, by its ``match``) one item."""
        self._put(item)
        self._changed()

    def remove(self, match: str) -> bool:
        """Remove the item with this exact ``match`` string; whether there was one."""
        found = self._exact.pop(match, None) or self._wild.pop(match, None)
        if found is not None:
            self._changed()
        return found is not None

    def replace(self, items: Iterable[T]) -> None:
        """Swap in a whole new set of items (a configuration reload)."""
        old_exact, old_wild = self._exact, self._wild
        self._exact, self._wild = {}, {}
        try:
            for item in items:
                self._put(item)
        except Exception:
            self._exact, self._wild = old_exact, old_wild
            raise
        self._changed()

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every change (Artemis repository listeners)."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    # -- lookups ----------------------------------------------------------

    def items(self) -> list[T]:
        """Every item, in no particular order."""
        return [e.item for e in (*self._exact.values(), *self._wild.values())]

    def __len__(self) -> int:
        return len(self._exact) + len(self._wild)

    def contains_exact(self, match: str) -> bool:
        """Whether an exact (wildcard-free) match equal to ``match`` exists.

        The FQQN security check uses this: Artemis consults an ``address::queue``
        setting only when one exists *exactly* (no wildcard FQQN matches).
        """
        return match in self._exact

    def matches(self, address: str) -> tuple[T, ...]:
        """Every item whose match applies to ``address``, most specific first."""
        cached = self._match_cache.get(address)
        if cached is not None:
            return cached
        found: list[_Entry[T]] = []
        exact = self._exact.get(address)
        if exact is not None:
            found.append(exact)
        wild = [e for e in self._wild.values() if e.test(address)]  # type: ignore[misc]
        wild.sort(key=lambda e: e.key)
        found.extend(wild)
        result = tuple(e.item for e in found)
        self._match_cache.put(address, result)
        return result

    def match(self, address: str) -> T | None:
        """The most specific item for ``address``, or None if nothing matches."""
        found = self.matches(address)
        return found[0] if found else None

    def resolve(self, address: str) -> ResolvedAddressSettings:
        """The effective address settings of ``address``, merged Artemis-style.

        For each field the most specific match that sets it (not ``None``)
        wins; fields no match sets take ``defaults``.  An FQQN
        ``address::queue`` resolves as its address, as Artemis's address
        settings do.
        """
        address = split_fqqn(address)[0]
        cached = self._resolve_cache.get(address)
        if cached is not None:
            return cached
        layers = self.matches(address)
        values: dict[str, Any] = {}
        for name in _SETTING_FIELDS:
            for layer in layers:
                value = getattr(layer, name, None)
                if value is not None:
                    values[name] = value
                    break
            else:
                if name not in self.defaults:
                    raise KeyError(f"no default for address setting {name!r}")
                values[name] = self.defaults[name]
        if values["max_redelivery_delay"] is None:
            values["max_redelivery_delay"] = values["redelivery_delay"] * 10
        resolved = ResolvedAddressSettings(
            **values,
            matched=tuple(layer.match for layer in layers),  # type: ignore[attr-defined]
        )
        self._resolve_cache.put(address, resolved)
        return resolved
