"""The routers' configuration of a plan: ``local-target-filter`` regexes and ``<connection-router>`` XML.

A broker's filter matches exactly its keys (literal, common prefixes
factored out), or with ``--form modulo`` its shard numbers; the catch-all
broker's matches every key no other broker lists.  The syntax is common to
Python's re and Java's regex, so the gateway and Artemis read it alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from xml.sax.saxutils import escape as xml_escape

from junction.pipeline.gravity_limits import DEFAULT_ROUTER_NAME
from junction.routing.keys import NULL_KEY
from junction.routing.policies import MODULO

__all__ = ["catch_all_regex", "filter_regex", "modulo_filter_regex", "router_snippet"]


def _trie_alternatives(keys: Iterable[str]) -> list[str]:
    """Alternatives matching exactly ``keys``, common prefixes factored out (re.escape'd).

    ``["ab", "ac", "b"]`` -> ``["a(?:b|c)", "b"]``.  Built without recursion
    (keys may be long).  The syntax is common to Python's re and Java's regex.
    """
    end = ""  # a child key no character can be: marks the end of a key
    root: dict = {}
    for key in keys:
        node = root
        for ch in key:
            node = node.setdefault(ch, {})
        node[end] = True
    order: list[dict] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(child for ch, child in node.items() if ch != end)
    done: dict[int, str] = {}
    for node in reversed(order[1:]):  # children before their parents; the root is below
        alternatives = [re.escape(ch) + done[id(child)] for ch, child in sorted(node.items()) if ch != end]
        if not alternatives:
            pattern = ""
        elif end in node:
            pattern = "(?:" + "|".join(alternatives) + ")?"
        elif len(alternatives) == 1:
            pattern = alternatives[0]
        else:
            pattern = "(?:" + "|".join(alternatives) + ")"
        done[id(node)] = pattern
    # the empty key, when it is one, is an empty alternative
    return ([""] if end in root else []) + [
        re.escape(ch) + done[id(child)] for ch, child in sorted(root.items()) if ch != end
    ]


def filter_regex(keys: Iterable[str]) -> str | None:
    """An anchored ``local-target-filter`` matching exactly ``keys`` (None for no keys).

    Keys are literal (re.escape'd); the router matches the whole key
    (``re.fullmatch``, Java's ``matches()``), the anchors say so to a reader.
    """
    keys = sorted(set(keys))
    if not keys:
        return None
    return "^(?:" + "|".join(_trie_alternatives(keys)) + ")$"


def catch_all_regex(other_keys: Iterable[str]) -> str:
    """A filter matching every key except ``other_keys`` (the catch-all broker's).

    A negative lookahead (Python and Java alike): keys no plan knows -- new
    users, or ones without traffic in the log -- stay on this broker instead
    of being refused by every broker.  (A key ending in a line terminator
    right after another broker's key is matched by neither; keys do not.)
    """
    others = sorted(set(other_keys))
    if not others:
        return "(?s)^.*$"
    return "(?s)^(?!(?:" + "|".join(_trie_alternatives(others)) + ")$).*$"


def modulo_filter_regex(shards: Iterable[str]) -> str | None:
    """``^(?:0|3|7)$``: the shard numbers (and ``NULL``) a broker keeps, in numeric order."""
    shards = set(shards)
    if not shards:
        return None
    ordered = ([NULL_KEY] if NULL_KEY in shards else []) + sorted(
        (s for s in shards if s != NULL_KEY), key=int
    )
    return "^(?:" + "|".join(ordered) + ")$"


def _comment(text: str) -> str:
    return "<!-- " + text.replace("--", "- -") + " -->"


def router_snippet(
    broker: str,
    key_type: str,
    local_filter: str | None,
    *,
    router_name: str = DEFAULT_ROUTER_NAME,
    modulo: int | None = None,
    comment: str | None = None,
) -> str:
    """The ``<connection-router>`` element of one broker's configuration.

    No pool: a key the local-target filter does not match is refused with
    "use another", and the client tries the next broker until its own answers
    (the Artemis "data gravity" pattern).  With ``modulo`` the router has a
    CONSISTENT_HASH_MODULO policy, so the filter sees shard numbers.
    """
    lines = [_comment(comment or f"{broker}: the connection router of this broker")]
    lines.append(f'<connection-router name="{xml_escape(router_name, {chr(34): "&quot;"})}">')
    lines.append(f"  <key-type>{key_type}</key-type>")
    if local_filter is None:
        lines.append("  " + _comment("no keys: every connection is refused (use another broker)"))
    else:
        lines.append(f"  <local-target-filter>{xml_escape(local_filter)}</local-target-filter>")
    if modulo is not None:
        lines.append('  <policy name="CONSISTENT_HASH_MODULO">')
        lines.append(f'    <property key="{MODULO}" value="{modulo}"/>')
        lines.append("  </policy>")
    lines.append("</connection-router>")
    return "\n".join(lines)

