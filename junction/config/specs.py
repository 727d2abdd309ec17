"""What an element of ``broker.xml`` is: the kinds of row in the configuration's tables.

Every table of :mod:`junction.config.schema` maps an element name to one of

- :class:`Value` -- a text element read into a field of the model object
  being built (its default is that field's default in
  :mod:`junction.config.model`: :meth:`Elements.rows` shows both);
- :class:`Section` -- a container read by a method of the loader
  (``acceptors``, ``addresses``, ``address-settings``, ``cluster-connections``
  ...); :class:`Nested` is the same one level down (``<pool>`` inside
  ``<connection-router>``, ``<static-connectors>`` inside
  ``<cluster-connection>``).

and :mod:`junction.config.unimplemented`, the one table of what Junction does
not implement, adds the rest:

- :class:`Ignored` -- a tuning knob of the Java broker with no behavioural
  meaning for Junction (``journal-type``, ``thread-pool-max-size`` ...): its
  value is still type-checked, and it is listed in ``BrokerConfig.ignored`` so
  the node logs it once;
- :class:`DefaultOnly` -- an Artemis behaviour Junction does not implement
  yet: restating Artemis's default is harmless and accepted (and listed in
  ``ignored``); any other value is an error, because Junction would behave
  differently from what the file asks;
- :class:`Unsupported` -- an Artemis feature Junction does not have yet
  (``bridges``, ``diverts``, ``<ha-policy><replication>`` ...): always an
  error, "<x> is not supported by Junction yet".  Never silently ignored;
- :class:`Refused` -- an Artemis feature Junction will not have (JGroups):
  always an error whose message says what to write instead;
- :class:`Warned` -- a setting read into the model but without effect yet: the
  node warns at start (and when a reload brings it in);
- :class:`NoEffect` -- a URL parameter Artemis knows that Junction accepts
  (type-checked) and does not act on: the node warns for each acceptor that
  gives one.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from junction.config.values import Parser

__all__ = [
    "DefaultOnly",
    "Elements",
    "Ignored",
    "Nested",
    "NoEffect",
    "Refused",
    "Section",
    "Unsupported",
    "Value",
    "Warned",
]


@dataclass(frozen=True)
class Value:
    """A text element read into the field ``attr`` of the model object being built."""

    attr: str
    parse: Parser


@dataclass(frozen=True)
class Section:
    """A container element read by the loader method ``method``."""

    method: str


@dataclass(frozen=True)
class Nested:
    """A container inside a container (``<pool>`` in ``<connection-router>``):
    read by the loader method ``method(el, target)``, which stores what it
    builds in ``target``, the values of the element being read."""

    method: str


@dataclass(frozen=True)
class Ignored:
    """A Java-broker tuning knob: type-checked, then listed in ``BrokerConfig.ignored``."""

    parse: Parser
    why: str = "tuning for the Java broker; no effect in Junction"


@dataclass(frozen=True)
class DefaultOnly:
    """Artemis behaviour Junction lacks: accepted only at Artemis's default value."""

    parse: Parser
    default: Any


@dataclass(frozen=True)
class Unsupported:
    """An Artemis feature Junction does not have yet: always an error."""

    hint: str = ""


@dataclass(frozen=True)
class Refused:
    """An Artemis feature Junction will not have: always an error, ``<x>: message``."""

    message: str


@dataclass(frozen=True)
class Warned:
    """A setting the loader reads into the model (it is a :class:`Value` of its
    table) that Junction does not act on yet: a warning at start, with ``why``
    when the reason is more than "not implemented yet"."""

    why: str = ""


@dataclass(frozen=True)
class NoEffect:
    """A URL parameter Junction accepts (checked with ``parse``, free text when
    None) but does not act on: warned per acceptor at start."""

    parse: Parser | None = None


class Elements(dict):
    """An element table: element name -> spec, in document order, bound to the
    model class its :class:`Value` rows fill in (``None`` for a table whose
    values are gathered by hand)."""

    def __init__(self, model: type | None, entries):
        super().__init__(entries)
        self.model = model

    def rows(self):
        """``(element, spec, model field, default)`` for each row: the schema as a
        table of element name -> type, default, field.  Field and default are
        None for rows that are not :class:`Value` (and the default None for a
        field without one)."""
        defaults = {}
        if self.model is not None:
            for f in fields(self.model):
                if f.default is not MISSING:
                    defaults[f.name] = f.default
                elif f.default_factory is not MISSING:
                    defaults[f.name] = f.default_factory()
        for name, spec in self.items():
            if isinstance(spec, Value):
                yield name, spec, spec.attr, defaults.get(spec.attr)
            else:
                yield name, spec, None, None
