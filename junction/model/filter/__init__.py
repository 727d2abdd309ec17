"""Artemis filter expressions (JMS message selectors).

Queues in ``broker.xml``, diverts, bridges and STOMP ``selector`` headers all
use the same small SQL-92 subset.  :func:`parse_filter` parses a filter once
into a tree of closures; :meth:`Filter.matches` then runs that tree against a
:class:`~junction.model.message.Message`.  Routing calls ``matches`` for
every message and every filtered queue, so the parsed form does the work
(operator dispatch, type checks of literals, LIKE pattern compilation) up
front and each closure does only what its node needs.

Blank filters: ``parse_filter(None)``, ``parse_filter("")`` and a filter of
only whitespace return :data:`MATCH_ALL`, whose ``matches`` is always true.
Callers may test ``filter.match_all`` to skip the call altogether.

Language
--------
* Literals: ``'strings'`` (``''`` is a quote), integers (``42``, ``42L``,
  hex ``0x2A``, octal ``052``), decimals (``1.5``, ``.5``, ``5.``, ``1E3``,
  ``2.5e-3``), ``TRUE``, ``FALSE``, ``NULL``.
* Identifiers: Java identifiers (letters, digits, ``_`` and ``$``, not
  starting with a digit).  ``foo-bar`` is ``foo - bar``, not a property name.
  Header identifiers (see :data:`HEADER_IDENTIFIERS`) read message headers;
  any other identifier reads the property of that name (case-sensitive).
* Operators, loosest first: ``OR``; ``AND``; ``NOT``; ``=``, ``<>``,
  ``IS [NOT] NULL``; ``<``, ``>``, ``<=``, ``>=``, ``[NOT] LIKE``,
  ``[NOT] BETWEEN``, ``[NOT] IN``; binary ``+ -``; ``* / %``; unary ``+ -``.
  Keywords are case-insensitive.  ``--`` starts a comment to the end of the
  line and ``/* ... */`` is a comment, as in Artemis.

Semantics (JMS 2.0, section 3.8.1)
----------------------------------
* A missing property, or one whose value is ``None``, is NULL.  Comparisons
  and arithmetic with NULL are UNKNOWN (``None``); ``AND``/``OR``/``NOT``
  follow SQL three-valued logic; a message matches only when the whole
  filter is TRUE.
* Numbers compare with numbers (integers and decimals promote freely);
  strings and booleans only with ``=`` and ``<>``.  Comparing unlike types
  (a string property with a number, say) is FALSE, not an error, and that
  holds for ``<>`` and ``NOT BETWEEN`` too (the JMS rule; Artemis's ``<>``
  is ``NOT =`` and so is TRUE there).  ``LIKE`` and ``IN`` on a non-string
  value are UNKNOWN, as Artemis does for ``IN``.
* A property used directly as a condition (``WHERE flag``) must hold a
  boolean; any other value is UNKNOWN.
* ``/`` always divides as floating point and ``%`` is the floating-point
  remainder, as in Artemis; dividing by zero gives infinity or NaN as Java
  does, and NaN is unequal to everything (IEEE).  Integer arithmetic does
  not wrap at 32 or 64 bits.  Arithmetic on a non-number is UNKNOWN.

Deliberate differences from Artemis's parser: ``NOT`` binds looser than the
comparisons, as SQL and the JMS specification say (Artemis parses
``NOT a = 1`` as ``(NOT a) = 1``); ``+`` does not concatenate strings.
Not supported: ``XPATH``/``XQUERY`` body filters and the
``convert_string_expressions:`` and ``hyphenated_props:`` prefixes; they are
rejected with a :class:`FilterError` saying so.

Limits: a filter longer than :data:`MAX_FILTER_LENGTH` characters or nested
deeper than :data:`MAX_NESTING_DEPTH` levels is rejected, so a hostile
selector cannot exhaust the stack or the CPU.  ``AND``/``OR`` chains are
flattened, so ``a = 1 OR a = 2 OR ...`` is one level however long it is.
Constant sub-expressions (``2 * 3``, ``-5``) are folded at parse time.

:meth:`Filter.evaluate` returns the three-valued result (``None`` for
UNKNOWN) for diagnostics and tests; routing uses :meth:`Filter.matches`.

Modules, in the order a filter goes through them: :mod:`.lexer` (text to
tokens), :mod:`.parser` (tokens to a tree of closures, type-checked and
constant-folded; :mod:`.tree` is its node, :mod:`.like` compiles LIKE
patterns), :mod:`.evaluator` (the closures run per message: value kinds,
operators in three-valued logic), :mod:`.expression`
(:class:`Filter` and :func:`parse_filter`); :mod:`.errors` holds
:class:`FilterError`.  The names below are the package's public face.
"""

from __future__ import annotations

from junction.model.filter.errors import FilterError
from junction.model.filter.expression import MATCH_ALL, MAX_FILTER_LENGTH, Filter, parse_filter
from junction.model.filter.parser import HEADER_IDENTIFIERS, MAX_NESTING_DEPTH

__all__ = [
    "Filter",
    "FilterError",
    "MATCH_ALL",
    "MAX_FILTER_LENGTH",
    "MAX_NESTING_DEPTH",
    "HEADER_IDENTIFIERS",
    "parse_filter",
]
