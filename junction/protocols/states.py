"""The members of the sans-IO state tables: states, inputs and actions.

Every state machine in ``protocols/`` is a table, ``(state, input) -> ...``,
looked up on each event.  :class:`TableEnum` is the enum its members are made
of.  A plain :class:`enum.Enum` member hashes by its name through a Python
method (``Enum.__hash__``), so each lookup of a ``(state, input)`` pair costs
two Python calls; members are singletons compared by identity, so a
:class:`TableEnum` member hashes by identity instead, in C, and a lookup
costs none.  Equality, ordering, pickling and the members' values are
unchanged.
"""

from __future__ import annotations

import enum

__all__ = ["TableEnum"]


class TableEnum(enum.Enum):
    """An :class:`enum.Enum` whose members hash by identity (see the module doc)."""

    __hash__ = object.__hash__
