"""``python -m tests.classic fetch``: fill the cache ahead of time (for offline test runs).

Fetches the 6.x client (see :mod:`tests.classic.cache`), checks that Debian's 5.17 client is
installed, and compiles the scenario program against each; prints where they are.
Idempotent: a full cache costs nothing.
"""

from __future__ import annotations

import argparse
import sys

from tests.classic.cache import CLIENTS, ClientUnavailable, client_jars
from tests.classic.client import compile_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.classic", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["fetch"])
    parser.parse_args(argv)
    status = 0
    for name in CLIENTS:
        try:
            jars = client_jars(name)
            classes = compile_scenario(jars)
        except (ClientUnavailable, RuntimeError) as e:
            print(f"classic: client {name}: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"client {name} ({jars.version}): {jars.classpath}")
        print(f"  classes: {classes}")
    return status


if __name__ == "__main__":
    sys.exit(main())
