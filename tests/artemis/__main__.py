"""``python -m tests.artemis fetch``: fill the cache ahead of time (for offline test runs).

Fetches the Artemis client jar and broker distribution (see :mod:`tests.artemis.cache`) and
compiles ``tests/java``; prints where they are.  Idempotent: a full cache costs nothing.
"""

from __future__ import annotations

import argparse
import sys

from tests.artemis.cache import ARTEMIS_VERSION, ArtemisFetchError, artemis_cache, fetch
from tests.artemis.jms import compile_sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.artemis", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["fetch"])
    parser.add_argument("--version", default=ARTEMIS_VERSION, help="Artemis release (%(default)s)")
    args = parser.parse_args(argv)
    try:
        dist = fetch(args.version)
        classes = compile_sources(dist)
    except (ArtemisFetchError, RuntimeError) as e:
        print(f"artemis: {e}", file=sys.stderr)
        return 1
    print(f"cache:   {artemis_cache()}")
    print(f"client:  {dist.client_jar}")
    print(f"broker:  {dist.home}")
    print(f"classes: {classes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
