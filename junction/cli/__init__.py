"""The ``junction`` command line: the commands (:mod:`.commands`) and what they print.

``main`` is the ``junction`` console script's entry point (``junction.cli:main``).
"""

from junction.cli.commands import main

__all__ = ["main"]
