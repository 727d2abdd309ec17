"""Connection-router policies: which ready target a key goes to.

A policy (Artemis ``routing/policies``, ``reference/artemis-routing.md``
section 2) has two jobs:

* :meth:`Policy.transform_key` may rewrite the key before the router looks at
  its local-target filter and cache (only CONSISTENT_HASH_MODULO does);
* :meth:`Policy.select` picks one of the pool's ready targets for a key, or
  None (the router then refuses with ``REFUSED_UNAVAILABLE``).

Both are pure functions of their arguments and the policy's configuration,
apart from the round-robin position of ROUND_ROBIN and LEAST_CONNECTIONS.
No I/O, no clock, no reactor.

Built-in policies
=================

``FIRST_ELEMENT``
    The first target in the pool's order.
``ROUND_ROBIN``
    Each call the next target, from one position shared by all keys that
    starts at a random place (``pos %= len; pick targets[pos]; pos += 1``).
``LEAST_CONNECTIONS``
    Round robin among the targets with the fewest client connections, as
    the pool's probe last counted them (:attr:`Target.connection_count`).
    An unknown count ranks last (as ``sys.maxsize``); a count below the
    property ``CONNECTION_COUNT_THRESHOLD`` (default 0) counts as 0, so
    lightly loaded targets are shared round-robin instead of the emptiest
    one taking every new connection.
``CONSISTENT_HASH_MODULO``
    Turns the key into ``str((fnv1a_32(key) & 0x7fffffff) % MODULO)``, a
    shard number, and never selects a target itself: it is meant for a
    router with a ``local-target-filter`` such as ``NULL|0`` and no pool, so
    each node keeps its own shard and refuses the others.  A missing or
    non-positive ``MODULO`` leaves the key unchanged.
``CONSISTENT_HASH``
    The same key always goes to the same target while the set of targets
    does not change, and a change moves as few keys as possible.  Two
    schemes, chosen by the property ``HASH``:

    ``HASH=MURMUR3`` (the default; Junction's, better than Artemis's)
        Rendezvous (highest-random-weight) hashing: every target scores the
        key with ``murmur3_32(key, seed=murmur3_32(identity))`` and the
        highest score wins (ties, which need a 32-bit collision, go to the
        greatest identity).  A target's identity is its node id, or its
        connector name while the node id is unknown.  Because a key's winner
        depends only on the scores, and every target's score depends only on
        the key and that target: keys spread evenly over the targets (a
        multinomial spread: 100,000 keys over 10 targets load the busiest
        about 1.02x the mean); removing a target moves only the keys it had;
        adding one moves only the keys it wins, 1/(n+1) of them; and any two
        gateways that see the same node ids pick the same target whatever
        order their pools list them in.
    ``HASH=FNV1A`` (Artemis's exact ring)
        One point per target at ``fnv1a_32(node id)``, compared as signed
        32-bit integers; a key goes to the target with the greatest point not
        above ``fnv1a_32(key)``, wrapping to the lowest point.  With no
        virtual nodes the arcs are very uneven (similar node ids such as
        ``node-a``/``node-b``/``node-c`` sit side by side, so node-a and
        node-c take about half the keys each and node-b almost none; 10
        random node ids gave the busiest 3.4x its share), which is why it is
        not the default.  Use it when
        Junction routers must agree with Artemis brokers' CONSISTENT_HASH
        routers on the same keys.  Two targets whose points collide keep the
        later one in pool order, as Artemis's ``TreeMap.put`` does.

MurmurHash3 comes from the ``mmh3`` package (a C extension) when it is
installed, which ``setup.cfg`` requires; a pure-Python MurmurHash3 x86_32
that gives the same values stands in otherwise, so routers with and without
the extension agree.

Registry
========

:func:`create_policy` makes a policy from its ``<policy name>`` and
``<property key value>`` elements.  The built-in names always mean the
built-ins.  Other names are looked up in the entry-point group
``junction.policies`` (:data:`ENTRY_POINT_GROUP`): the entry point's name is
the policy name, and its object is a :class:`Policy` subclass or any callable
that takes the properties dict and returns a :class:`Policy`.  For example,
in a plugin's ``setup.cfg``::

    [options.entry_points]
    junction.policies =
        TENANT_PIN = my_plugin.policies:TenantPinPolicy

(Artemis registers extra policies through a ServiceLoader ``PolicyFactory``
named after the class; entry points are the Python way to do the same.)
"""

from __future__ import annotations

import bisect
import random
import struct
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata

from junction.routing.targets import Target

try:  # the C extension, when installed (setup.cfg requires it)
    import mmh3 as _mmh3
except ImportError:  # pragma: no cover - exercised only without mmh3
    _mmh3 = None

__all__ = [
    "CONNECTION_COUNT_THRESHOLD",
    "ENTRY_POINT_GROUP",
    "HASH",
    "HASH_FNV1A",
    "HASH_MURMUR3",
    "MODULO",
    "ConsistentHashModuloPolicy",
    "ConsistentHashPolicy",
    "FirstElementPolicy",
    "LeastConnectionsPolicy",
    "Policy",
    "PolicyLoadError",
    "PolicyPropertyError",
    "RoundRobinPolicy",
    "UnknownPolicyError",
    "create_policy",
    "fnv1a_32",
    "murmur3_32",
    "policy_names",
    "target_identity",
]

#: The entry-point group user policies register in.
ENTRY_POINT_GROUP = "junction.policies"

#: LEAST_CONNECTIONS: connection counts below this count as 0 (Artemis's
#: property name, case-sensitive; default 0: every count is taken as it is).
CONNECTION_COUNT_THRESHOLD = "CONNECTION_COUNT_THRESHOLD"
#: CONSISTENT_HASH_MODULO: the number of shards (Artemis's property name).
MODULO = "MODULO"
#: CONSISTENT_HASH: the hashing scheme, :data:`HASH_MURMUR3` (default) or
#: :data:`HASH_FNV1A`.  A Junction property; Artemis has only the ring.
HASH = "HASH"
HASH_MURMUR3 = "MURMUR3"
HASH_FNV1A = "FNV1A"

_FNV_OFFSET_BASIS = 0x811C9DC5
_FNV_PRIME = 0x01000193
_MASK32 = 0xFFFFFFFF
_INT32_MAX = 0x7FFFFFFF

#: ROUND_ROBIN's start position is drawn from [0, this) (Java's int range).
_ROUND_ROBIN_START_RANGE = 1 << 31


# -- hash functions ------------------------------------------------------------


def fnv1a_32(text: str) -> int:
    """Artemis's ``getHash``: 32-bit FNV-1a over Java chars, as a signed int.

    Java iterates the UTF-16 code units of the string, so a character
    outside the BMP contributes its two surrogates; encoding UTF-16-BE and
    reading 2-byte units reproduces that (``surrogatepass`` keeps a lone
    surrogate, which a Java string can hold, as the unit it is).
    ``fnv1a_32("a") == -468965076`` (``0xe40c292c``).
    """
    h = _FNV_OFFSET_BASIS
    data = text.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = ((h ^ unit) * _FNV_PRIME) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def _murmur3_32_py(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 (Austin Appleby's public-domain algorithm), unsigned."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    length = len(data)
    whole = length - (length & 3)
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * c1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * c2) & _MASK32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK32
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[whole:]
    if tail:
        k = 0
        for i in range(len(tail) - 1, -1, -1):
            k = (k << 8) | tail[i]
        k = (k * c1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * c2) & _MASK32
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


if _mmh3 is not None:

    def murmur3_32(data: bytes, seed: int = 0) -> int:
        """MurmurHash3 x86_32 of ``data`` with ``seed``, as an unsigned 32-bit int."""
        return _mmh3.hash(data, seed & _MASK32, signed=False)

else:  # pragma: no cover - exercised only without mmh3
    murmur3_32 = _murmur3_32_py


def _utf8(text: str) -> bytes:
    # surrogatepass: a client id may carry a lone surrogate; hash it, never fail
    return text.encode("utf-8", "surrogatepass")


def target_identity(target: Target) -> str:
    """What consistent hashing knows a target by: its node id, else its name."""
    return target.node_id if target.node_id is not None else target.name


# -- errors --------------------------------------------------------------------


class UnknownPolicyError(LookupError):
    """No built-in policy and no ``junction.policies`` entry point has this name."""

    def __init__(self, name: str, known: Sequence[str]):
        super().__init__(
            f"unknown connection-router policy {name!r}; known policies: {', '.join(known)}"
        )
        self.name = name
        self.known = list(known)


class PolicyLoadError(RuntimeError):
    """A ``junction.policies`` entry point failed to load or to make a Policy."""


class PolicyPropertyError(ValueError):
    """A policy ``<property>`` has a value the policy cannot use."""


def _int_property(properties: Mapping[str, str], key: str, default: int, policy: str) -> int:
    value = properties.get(key)
    if value is None:
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        raise PolicyPropertyError(
            f"policy {policy} property {key} must be an integer, not {value!r}"
        ) from None


# -- policies ------------------------------------------------------------------


class Policy:
    """A connection-router policy.  Subclasses override :meth:`select`.

    ``properties`` are the policy's ``<property key value>`` elements.  The
    registry sets :attr:`name` to the name the policy was created under.
    """

    #: the ``<policy name="...">`` this class implements
    name: str = ""

    def __init__(self, properties: Mapping[str, str] | None = None):
        self.properties: dict[str, str] = dict(properties or {})

    def transform_key(self, key: str) -> str:
        """The key the router uses from here on (local filter, cache, select)."""
        return key

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        """One of ``targets`` (the pool's ready targets, in its order) for ``key``, or None."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.properties}>"


class FirstElementPolicy(Policy):
    """FIRST_ELEMENT: the first target."""

    name = "FIRST_ELEMENT"

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        return targets[0] if targets else None


class RoundRobinPolicy(Policy):
    """ROUND_ROBIN: one position shared by every key, from a random start.

    ``rng`` (a :class:`random.Random`) draws the start; tests pass a seeded one.
    """

    name = "ROUND_ROBIN"

    def __init__(self, properties: Mapping[str, str] | None = None, *, rng=None):
        super().__init__(properties)
        self._pos = (rng or random).randrange(_ROUND_ROBIN_START_RANGE)

    def _next(self, targets: Sequence[Target]) -> Target:
        pos = self._pos % len(targets)
        self._pos = pos + 1
        return targets[pos]

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        return self._next(targets) if targets else None


class LeastConnectionsPolicy(RoundRobinPolicy):
    """LEAST_CONNECTIONS: round robin among the least connected targets."""

    name = "LEAST_CONNECTIONS"

    def __init__(self, properties: Mapping[str, str] | None = None, *, rng=None):
        super().__init__(properties, rng=rng)
        self.threshold = _int_property(self.properties, CONNECTION_COUNT_THRESHOLD, 0, self.name)

    def _count(self, target: Target) -> int:
        count = target.connection_count
        if count is None:
            return sys.maxsize
        return 0 if count < self.threshold else count

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        if not targets:
            return None
        counts = [self._count(t) for t in targets]
        lowest = min(counts)
        group = [t for t, c in zip(targets, counts, strict=True) if c == lowest]
        return self._next(group)


class ConsistentHashModuloPolicy(Policy):
    """CONSISTENT_HASH_MODULO: the key becomes its shard number; selects nothing.

    ``hash_function`` (default :func:`fnv1a_32`, Artemis's) may be replaced
    in tests; whatever signed value it returns, the shard is in
    ``[0, MODULO)``.
    """

    name = "CONSISTENT_HASH_MODULO"

    def __init__(
        self,
        properties: Mapping[str, str] | None = None,
        *,
        hash_function: Callable[[str], int] = fnv1a_32,
    ):
        super().__init__(properties)
        self.modulo = _int_property(self.properties, MODULO, 0, self.name)
        self._hash = hash_function

    def transform_key(self, key: str) -> str:
        if self.modulo <= 0:
            return key
        return str((self._hash(key) & _INT32_MAX) % self.modulo)

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        return None


class ConsistentHashPolicy(Policy):
    """CONSISTENT_HASH: rendezvous hashing, or Artemis's FNV-1a ring with ``HASH=FNV1A``."""

    name = "CONSISTENT_HASH"

    def __init__(self, properties: Mapping[str, str] | None = None):
        super().__init__(properties)
        scheme = str(self.properties.get(HASH, HASH_MURMUR3)).strip().upper()
        if scheme not in (HASH_MURMUR3, HASH_FNV1A):
            raise PolicyPropertyError(
                f"policy {self.name} property {HASH} must be {HASH_MURMUR3} or "
                f"{HASH_FNV1A}, not {self.properties.get(HASH)!r}"
            )
        self.scheme = scheme
        #: identity -> murmur3 seed; node ids are few and long-lived, and an
        #: entry is a few dozen bytes, but keep it bounded all the same
        self._seeds: dict[str, int] = {}

    def select(self, targets: Sequence[Target], key: str) -> Target | None:
        if not targets:
            return None
        if self.scheme == HASH_FNV1A:
            return self._select_ring(targets, key)
        return self._select_rendezvous(targets, key)

    def _seed(self, identity: str) -> int:
        seed = self._seeds.get(identity)
        if seed is None:
            if len(self._seeds) >= _MAX_SEED_CACHE:
                self._seeds.clear()
            seed = self._seeds[identity] = murmur3_32(_utf8(identity))
        return seed

    def _select_rendezvous(self, targets: Sequence[Target], key: str) -> Target:
        # the hot path of CONSISTENT_HASH: one murmur3 per target, memoized seeds
        data = _utf8(key)
        seeds = self._seeds
        hash32 = murmur3_32
        best = None
        best_score = -1
        best_identity = ""
        for target in targets:
            identity = target.node_id
            if identity is None:
                identity = target.name
            seed = seeds.get(identity)
            if seed is None:
                seed = self._seed(identity)
            score = hash32(data, seed)
            if score > best_score or (score == best_score and identity > best_identity):
                best, best_score, best_identity = target, score, identity
        return best

    @staticmethod
    def _select_ring(targets: Sequence[Target], key: str) -> Target:
        ring: dict[int, Target] = {}
        for target in targets:  # a colliding point: the later target wins
            ring[fnv1a_32(target_identity(target))] = target
        points = sorted(ring)
        index = bisect.bisect_right(points, fnv1a_32(key)) - 1
        return ring[points[index if index >= 0 else 0]]


#: Bound of CONSISTENT_HASH's identity -> seed memo (cleared when full).
_MAX_SEED_CACHE = 4096


# -- registry ------------------------------------------------------------------

_BUILTINS: dict[str, Callable[[dict], Policy]] = {
    cls.name: cls
    for cls in (
        FirstElementPolicy,
        RoundRobinPolicy,
        ConsistentHashPolicy,
        LeastConnectionsPolicy,
        ConsistentHashModuloPolicy,
    )
}


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def policy_names() -> list[str]:
    """Every policy name :func:`create_policy` accepts: built-ins, then plugins (sorted)."""
    names = list(_BUILTINS)
    names.extend(sorted(n for n in _entry_points() if n not in _BUILTINS))
    return names


def create_policy(
    name: str, properties: Mapping[str, str] | Iterable[tuple[str, str]] | None = None
) -> Policy:
    """A new policy named ``name`` with these ``<property>`` values.

    ``properties`` is a mapping or a sequence of ``(key, value)`` pairs (the
    config model's ``PolicyConfig.properties``); keys are case-sensitive.

    Raises :class:`UnknownPolicyError` (a LookupError) for an unknown name,
    :class:`PolicyPropertyError` for an unusable property value and
    :class:`PolicyLoadError` when a plugin's entry point fails.
    """
    props = dict(properties or {})
    factory = _BUILTINS.get(name)
    if factory is not None:
        return factory(props)
    entry_point = _entry_points().get(name)
    if entry_point is None:
        raise UnknownPolicyError(name, policy_names())
    try:
        factory = entry_point.load()
    except Exception as exc:
        raise PolicyLoadError(
            f"policy {name!r}: cannot load entry point {entry_point.value!r}: {exc}"
        ) from exc
    policy = factory(props)
    if not isinstance(policy, Policy):
        raise PolicyLoadError(
            f"policy {name!r}: entry point {entry_point.value!r} made {policy!r}, not a Policy"
        )
    policy.name = name
    return policy
