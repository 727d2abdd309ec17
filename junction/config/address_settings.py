"""The address settings: one table, from which everything about them is built.

Each row of :data:`ADDRESS_SETTINGS` is one child element of
``<address-setting>``: its Artemis name, how its text is read
(:mod:`junction.config.values`), Artemis's default (``AddressSettings.java``)
and the Python type of the value.  From the table come

* :class:`AddressSettings` -- one ``<address-setting match="..">`` as read
  (every field None when the element was absent, so several matches merge
  field by field, as Artemis's ``AddressSettings.mergeCopy``);
* :data:`ADDRESS_SETTINGS_DEFAULTS` -- the Artemis default of every field;
* :class:`ResolvedAddressSettings` -- the effective settings of one address,
  every field filled in (:meth:`junction.brokercore.wildcard.SettingsRepository.resolve`);
* the :class:`~junction.config.specs.Value` rows of
  :data:`junction.config.schema.ADDRESS_SETTING_ELEMENTS`.

So a new address setting is one row here plus the code that acts on it
(``server.settings_for(address).<field>``); an Artemis setting Junction reads
but does not act on yet also has a :class:`~junction.config.specs.Warned` row
in :data:`junction.config.unimplemented.UNIMPLEMENTED`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any

from junction.config.values import (
    JAVA_INT,
    Parser,
    any_text,
    boolean,
    choice,
    integer,
    real,
    routing_type,
    size,
    text_value,
)
from junction.model.message import RoutingType

__all__ = [
    "ADDRESS_FULL_POLICIES",
    "ADDRESS_SETTINGS",
    "ADDRESS_SETTINGS_DEFAULTS",
    "AddressSettings",
    "ResolvedAddressSettings",
    "Setting",
]

ADDRESS_FULL_POLICIES = ("BLOCK", "FAIL", "DROP", "PAGE")


@dataclass(frozen=True)
class Setting:
    """One child element of ``<address-setting>``.

    ``field`` is the model field (by default the element's name with
    underscores); two elements may fill the same field (a deprecated
    spelling), and then give the same default.  ``type`` is the value's type
    once resolved; a None ``default`` makes the resolved field optional.
    """

    element: str
    parse: Parser
    default: Any
    type: type
    field: str = ""

    @property
    def name(self) -> str:
        return self.field or self.element.replace("-", "_")


_TIME = integer(0, minus_one=True, long=True)  # milliseconds, -1: none
_S = Setting

# fmt: off
#: Every address setting Junction reads, in Artemis's documentation order.
ADDRESS_SETTINGS: tuple[Setting, ...] = (
    #  element                                 parse                                    default            type
    _S("dead-letter-address",                  text_value,                              None,              str),
    _S("auto-create-dead-letter-resources",    boolean,                                 False,             bool),
    _S("dead-letter-queue-prefix",             any_text,                                "DLQ.",            str),
    _S("dead-letter-queue-suffix",             any_text,                                "",                str),
    _S("expiry-address",                       text_value,                              None,              str),
    _S("auto-create-expiry-resources",         boolean,                                 False,             bool),
    _S("expiry-queue-prefix",                  any_text,                                "EXP.",            str),
    _S("expiry-queue-suffix",                  any_text,                                "",                str),
    _S("expiry-delay",                         _TIME,                                   -1,                int),
    _S("min-expiry-delay",                     _TIME,                                   -1,                int),
    _S("max-expiry-delay",                     _TIME,                                   -1,                int),
    _S("max-delivery-attempts",                integer(0, minus_one=True),              10,                int),
    _S("redelivery-delay",                     integer(0, long=True),                   0,                 int),
    _S("redelivery-delay-multiplier",          real(0.0),                               1.0,               float),
    _S("redelivery-collision-avoidance-factor", real(0.0, 1.0),                         0.0,               float),
    # None: Artemis's getter computes redelivery-delay * 10 of the resolved redelivery delay
    _S("max-redelivery-delay",                 integer(0, long=True),                   None,              int),
    _S("max-size-bytes",                       size(0, minus_one=True),                 -1,                int),
    _S("max-size-messages",                    integer(0, minus_one=True, long=True),   -1,                int),
    _S("page-size-bytes",                      size(1, JAVA_INT[1]),                    10 * 1024 * 1024,  int),
    _S("page-max-cache-size",                  integer(0),                              5,                 int),
    _S("address-full-policy",                  choice(*ADDRESS_FULL_POLICIES),          "PAGE",            str),
    _S("message-counter-history-day-limit",    integer(0),                              0,                 int),
    _S("last-value-queue",                     boolean,                                 False,             bool),  # deprecated spelling
    _S("default-last-value-queue",             boolean,                                 False,             bool, "last_value_queue"),
    _S("default-last-value-key",               text_value,                              None,              str),
    _S("default-non-destructive",              boolean,                                 False,             bool),
    _S("default-exclusive-queue",              boolean,                                 False,             bool),
    _S("default-max-consumers",                integer(0, minus_one=True),              -1,                int),
    _S("default-purge-on-no-consumers",        boolean,                                 False,             bool),
    _S("default-consumer-window-size",         integer(0, minus_one=True),              1024 * 1024,       int),
    _S("redistribution-delay",                 _TIME,                                   -1,                int),
    # Junction's (Sun Message Queue's localDeliveryPreferred): in a cluster, a message goes to a
    # remote consumer only when no local consumer can take it
    _S("local-delivery-preferred",             boolean,                                 False,             bool),
    _S("send-to-dla-on-no-route",              boolean,                                 False,             bool),
    _S("slow-consumer-threshold",              integer(1, minus_one=True, long=True),   -1,                int),
    _S("slow-consumer-policy",                 choice("KILL", "NOTIFY"),                "NOTIFY",          str),
    _S("slow-consumer-check-period",           integer(1, long=True),                   5,                 int),
    _S("auto-create-queues",                   boolean,                                 True,              bool),
    _S("auto-delete-queues",                   boolean,                                 True,              bool),
    _S("auto-delete-created-queues",           boolean,                                 False,             bool),
    _S("auto-delete-queues-delay",             integer(0, long=True),                   0,                 int),
    _S("auto-delete-queues-message-count",     integer(0, minus_one=True, long=True),   0,                 int),
    _S("auto-create-addresses",                boolean,                                 True,              bool),
    _S("auto-delete-addresses",                boolean,                                 True,              bool),
    _S("auto-delete-addresses-delay",          integer(0, long=True),                   0,                 int),
    _S("default-address-routing-type",         routing_type,                            RoutingType.MULTICAST, RoutingType),
    _S("default-queue-routing-type",           routing_type,                            RoutingType.MULTICAST, RoutingType),
    _S("default-group-rebalance",              boolean,                                 False,             bool),
    _S("default-group-rebalance-pause-dispatch", boolean,                               False,             bool),
    _S("default-group-buckets",                integer(0, minus_one=True),              -1,                int),
    _S("default-group-first-key",              text_value,                              None,              str),
    _S("default-ring-size",                    integer(0, minus_one=True, long=True),   -1,                int),
    _S("enable-metrics",                       boolean,                                 True,              bool),
    _S("management-browse-page-size",          integer(1),                              200,               int),
    # what a configuration reload does with a queue / an address that is no longer in
    # <addresses>: OFF keeps it, FORCE removes it and its messages
    _S("config-delete-queues",                 choice("OFF", "FORCE"),                  "OFF",             str),
    _S("config-delete-addresses",              choice("OFF", "FORCE"),                  "OFF",             str),
)
# fmt: on


def _fields() -> dict[str, Setting]:
    """Model field -> its (first) row; rows sharing a field must agree on default and type."""
    out: dict[str, Setting] = {}
    for row in ADDRESS_SETTINGS:
        first = out.setdefault(row.name, row)
        if (first.default, first.type) != (row.default, row.type):
            raise ValueError(f"address settings {first.element} and {row.element} fill {row.name} differently")
    return out


_FIELDS = _fields()

#: Artemis defaults for every AddressSettings field (AddressSettings.java).
ADDRESS_SETTINGS_DEFAULTS: dict[str, Any] = {name: row.default for name, row in _FIELDS.items()}

AddressSettings = make_dataclass(
    "AddressSettings",
    [("match", str)]
    + [(name, f"{row.type.__name__} | None", field(default=None)) for name, row in _FIELDS.items()]
    + [("source", "tuple[str, int]", field(default=("", 0)))],
    frozen=True,
)
AddressSettings.__module__ = __name__
AddressSettings.__doc__ = """One ``<address-setting match="..">``.

Every field is ``None`` when the element was absent, so settings from
several matches can be merged (more specific match wins, field by field)
as Artemis does; :data:`ADDRESS_SETTINGS_DEFAULTS` fills in the Artemis
defaults.  The fields are the rows of :data:`ADDRESS_SETTINGS`.
"""


def _resolved_type(name: str, row: Setting) -> str:
    if row.default is None and name != "max_redelivery_delay":
        return f"{row.type.__name__} | None"
    return row.type.__name__


ResolvedAddressSettings = make_dataclass(
    "ResolvedAddressSettings",
    [(name, _resolved_type(name, row)) for name, row in _FIELDS.items()]
    + [("matched", "tuple[str, ...]", field(default=()))],
    frozen=True,
)
ResolvedAddressSettings.__module__ = __name__
ResolvedAddressSettings.__doc__ = """The effective address settings of one address, every field filled in.

Same fields as :class:`AddressSettings` (minus ``match``/``source``), merged
from every matching ``<address-setting>`` (most specific first) and then
:data:`ADDRESS_SETTINGS_DEFAULTS`.  Only fields whose Artemis default is
"none" (the dead-letter and expiry addresses, the last-value and group-first
keys) can be ``None``.  ``max_redelivery_delay`` defaults to
``redelivery_delay * 10`` of the *resolved* redelivery delay, as Artemis's
getter computes it.  ``matched`` lists the match strings that contributed,
most specific first.
"""
