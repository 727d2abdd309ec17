"""``${VAR}`` and ``${VAR:default}`` in ``broker.xml``, from the environment.

Artemis reads Java system properties first and then the environment; Junction
reads the environment.  Unlike Artemis, a reference with no default to an
unset variable is an error (Artemis substitutes an empty string).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["substitute"]

_REF_RE = re.compile(r"\$\{([^}]*)\}")


def substitute(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Replace ``${VAR}`` and ``${VAR:default}`` in ``text`` from ``env``.

    As Artemis's ``XMLUtil.replaceSystemPropsInString``: the name and the
    default are trimmed and the default is everything after the first ``:``
    (so ``${URL:tcp://h:1}`` defaults to ``tcp://h:1``).  Unlike Artemis, a
    reference with no default to an unset variable is reported (returned in
    the error list) instead of becoming an empty string, and values are not
    substituted again.
    """
    problems: list[str] = []

    def repl(m: re.Match) -> str:
        body = m.group(1)
        name, sep, default = body.partition(":")
        name = name.strip()
        if not name:
            problems.append(f"empty variable reference {m.group(0)!r}")
            return m.group(0)
        if name in env:
            return env[name]
        if sep:
            return default.strip()
        problems.append(
            f"environment variable {name!r} is not set and ${{{body}}} gives no default"
        )
        return m.group(0)

    out = _REF_RE.sub(repl, text)
    rest = _REF_RE.sub("", text)
    if "${" in rest:
        problems.append("unterminated ${...} reference")
    return out, problems

