"""``python -m junction`` is the ``junction`` command."""

import sys

from junction.cli import main

sys.exit(main())
