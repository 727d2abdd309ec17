"""The errors of a configuration: each with its file and line, all of them at once.

:class:`ConfigErrors` is what :func:`junction.config.loader.load_config` raises:
every problem found in a file, in document order, each a :class:`ConfigError`
(DESIGN.md principle 8; buildbot's ``ConfigErrors``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ConfigError", "ConfigErrors"]


class ConfigError(NamedTuple):
    """One problem in a configuration file: where, and what."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class ConfigErrors(Exception):
    """Every problem found in a configuration, in document order.

    ``str()`` gives one ``file:line: message`` line per error, ready to print.
    """

    def __init__(self, errors):
        self.errors: list[ConfigError] = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def __len__(self) -> int:
        return len(self.errors)

    def __iter__(self):
        return iter(self.errors)

