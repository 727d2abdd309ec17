"""Where ``junction run`` and ``junction up`` look when not told (relative to the current folder).

``junction user`` looks in the same places to find the users file the nodes
read, so the defaults live here, apart from the commands that use them.
"""

from __future__ import annotations

import os

__all__ = ["DEFAULT_APPLIANCE_DIR", "DEFAULT_CONFIG"]

#: the node config ``junction run`` runs
DEFAULT_CONFIG = os.path.join("etc", "broker.xml")
#: the appliance folder ``junction up`` runs (every ``*.xml`` in it is a node)
DEFAULT_APPLIANCE_DIR = os.path.join("etc", "appliance")
