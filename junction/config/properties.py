"""Artemis users and roles files: ``artemis-users.properties`` and ``artemis-roles.properties``.

These are the files Artemis's ``PropertiesLoginModule`` reads, in the same
formats, so an Artemis instance's files work unchanged and files written here
work in Artemis:

* users: ``user = password``.  A password wrapped in ``ENC(...)`` is a
  one-way hash from Artemis's ``DefaultSensitiveStringCodec`` (PBKDF2 with
  HMAC-SHA1): ``ENC(<iterations>:<salt hex>:<hash hex>)``, upper-case hex, a
  32-byte random salt, a 64-byte key and 1024 iterations (masking-passwords.adoc,
  security.adoc "PropertiesLoginModule").  Any other value is a plain-text
  password, which Artemis also accepts.
* roles: ``role = user1,user2``.  A value written ``/regex/`` matches user
  names by regular expression, as Artemis's ``ReloadableProperties`` does.
  Unlike Artemis, user names in the list are trimmed, so ``a, b`` means
  ``a`` and ``b`` rather than ``a`` and `` b``.

Both are Java ``.properties`` files (``java.util.Properties.load``): ``#``
and ``!`` start comment lines, the key ends at the first unescaped ``=``,
``:`` or blank, a line ending in an odd number of backslashes continues on
the next one, and ``\\t \\n \\r \\f \\uXXXX`` escapes are understood.  Files
are read as ISO-8859-1, as Java's ``Properties.load(InputStream)`` does, and
written with ``\\uXXXX`` escapes for anything outside printable ASCII.

Editing (:func:`add_user`, :func:`remove_user`, :func:`set_password`) keeps
comments, blank lines and the order and spelling of untouched entries, and
writes each file atomically (a temporary file in the same folder, fsynced,
then renamed over the original).

Hash cost: Artemis reads the iteration count from each stored hash, so a
higher count stays Artemis-compatible; the default is Artemis's own 1024
because :meth:`UserStore.authenticate` runs on the reactor thread and a
costlier hash would stall every connection during login.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "PropertiesError",
    "UserStore",
    "hash_password",
    "verify_password",
    "is_hashed",
    "parse_properties",
    "read_properties",
    "add_user",
    "remove_user",
    "set_password",
    "list_users",
    "HASH_ITERATIONS",
    "HASH_SALT_BYTES",
    "HASH_KEY_BYTES",
]

#: Artemis ``DefaultSensitiveStringCodec`` one-way defaults (PBKDF2WithHmacSHA1).
HASH_ITERATIONS = 1024
HASH_SALT_BYTES = 32
HASH_KEY_BYTES = 64
#: Upper bound on the iteration count accepted from a stored hash, so a
#: hostile or corrupt users file cannot make one login take minutes.
MAX_HASH_ITERATIONS = 10_000_000

_ENCODING = "latin-1"  # java.util.Properties.load(InputStream)
_WS = " \t\f"


class PropertiesError(ValueError):
    """A users or roles file cannot be used; ``file``/``line`` say where."""

    def __init__(self, file: str, line: int, message: str):
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


# --------------------------------------------------------------------------
# Password hashing (Artemis DefaultSensitiveStringCodec, algorithm=one-way)


def is_hashed(stored: str) -> bool:
    """True when ``stored`` uses the ``ENC(...)`` syntax (``PasswordMaskingUtil.isEncMasked``)."""
    return stored.startswith("ENC(") and stored.endswith(")")


def hash_password(
    password: str, *, iterations: int = HASH_ITERATIONS, salt: bytes | None = None
) -> str:
    """``ENC(iterations:SALTHEX:HASHHEX)`` for ``password``, as ``artemis user add`` writes it."""
    if salt is None:
        salt = secrets.token_bytes(HASH_SALT_BYTES)
    key = hashlib.pbkdf2_hmac("sha1", password.encode("utf-8"), salt, iterations, HASH_KEY_BYTES)
    return f"ENC({iterations}:{salt.hex().upper()}:{key.hex().upper()})"


def _parse_hash(stored: str) -> tuple[int, bytes, bytes]:
    """Split ``ENC(i:salt:hash)``; ValueError when it is not a one-way hash."""
    body = stored[4:-1]
    parts = body.split(":")
    if len(parts) != 3:
        raise ValueError("ENC(...) password is not a one-way hash ENC(iterations:salt:hash)")
    try:
        iterations = int(parts[0])
        salt = bytes.fromhex(parts[1])
        digest = bytes.fromhex(parts[2])
    except ValueError:
        raise ValueError(
            "ENC(...) password has a malformed iteration count, salt or hash"
        ) from None
    if not 1 <= iterations <= MAX_HASH_ITERATIONS or not digest:
        raise ValueError(
            f"ENC(...) password has an unusable iteration count or hash ({iterations})"
        )
    return iterations, salt, digest


# A fixed hash checked for unknown users so their logins cost the same time.
_DUMMY = hash_password("junction-dummy", salt=b"\0" * HASH_SALT_BYTES)


def verify_password(password: str, stored: str) -> bool:
    """Check ``password`` against a stored value: an ``ENC(...)`` hash or plain text.

    Constant-time comparison either way.  A malformed hash never matches.
    """
    if is_hashed(stored):
        try:
            iterations, salt, digest = _parse_hash(stored)
        except ValueError:
            return False
        computed = hashlib.pbkdf2_hmac(
            "sha1", password.encode("utf-8"), salt, iterations, len(digest)
        )
        return hmac.compare_digest(computed, digest)
    return hmac.compare_digest(password.encode("utf-8"), stored.encode("utf-8"))


# --------------------------------------------------------------------------
# Java properties syntax


@dataclass
class _Entry:
    """One logical line of a properties file: its raw natural lines and, unless
    it is a comment or blank, its key and value."""

    raw: list[str]  # natural lines, each with its line terminator
    line: int  # 1-based number of the first natural line
    key: str | None = None
    value: str | None = None


def _split_natural_lines(text: str) -> list[str]:
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)


def _ends_with_odd_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str) -> str:
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break  # a lone trailing backslash is dropped, as in Java
        c = s[i]
        i += 1
        if c == "u":
            hexpart = s[i : i + 4]
            if len(hexpart) == 4 and all(h in "0123456789abcdefABCDEF" for h in hexpart):
                out.append(chr(int(hexpart, 16)))
                i += 4
            else:
                raise ValueError("malformed \\uXXXX escape")
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
    # join UTF-16 surrogate pairs that \u escapes produce for non-BMP characters
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _split_key_value(logical: str) -> tuple[str, str]:
    """Split a logical line (continuations already joined) into raw key and raw value."""
    s = logical.lstrip(_WS)
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = s[:i]
    rest = s[i:].lstrip(_WS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WS)
    return key, rest


def _parse_entries(text: str) -> list[_Entry]:
    lines = _split_natural_lines(text)
    entries: list[_Entry] = []
    i = 0
    while i < len(lines):
        first = lines[i]
        start = i
        body = first.rstrip("\r\n")
        stripped = body.lstrip(_WS)
        if not stripped or stripped[0] in "#!":
            entries.append(_Entry([first], i + 1))
            i += 1
            continue
        parts = [stripped]
        raw = [first]
        while _ends_with_odd_backslashes(parts[-1]) and i + 1 < len(lines):
            parts[-1] = parts[-1][:-1]
            i += 1
            raw.append(lines[i])
            parts.append(lines[i].rstrip("\r\n").lstrip(_WS))
        if _ends_with_odd_backslashes(parts[-1]):
            parts[-1] = parts[-1][:-1]
        key, value = _split_key_value("".join(parts))
        try:
            entries.append(_Entry(raw, start + 1, _unescape(key), _unescape(value)))
        except ValueError as e:
            raise PropertiesError("", start + 1, str(e)) from None
        i += 1
    return entries


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """``(key, value, line)`` for every property in ``text``, in file order (Java syntax)."""
    return [(e.key, e.value, e.line) for e in _parse_entries(text) if e.key is not None]


def _read_text(path: str) -> str:
    with open(path, encoding=_ENCODING, newline="") as fh:
        return fh.read()


def _read_entries(path: str, *, missing_ok: bool) -> list[_Entry]:
    try:
        text = _read_text(path)
    except FileNotFoundError:
        if missing_ok:
            return []
        raise
    try:
        return _parse_entries(text)
    except PropertiesError as e:
        raise PropertiesError(path, e.line, e.message) from None


def read_properties(path: str) -> dict[str, str]:
    """The properties in ``path`` as a dict (a later duplicate key wins, as in Java)."""
    return {e.key: e.value for e in _read_entries(path, missing_ok=False) if e.key is not None}


def _escape(s: str, *, key: bool) -> str:
    """Java properties escaping: keys escape blanks and ``= : # !``; values only a
    leading blank.  Control and non-ASCII characters become ``\\uXXXX`` (UTF-16)."""
    out = []
    for idx, c in enumerate(s):
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif c in _CONTROL_ESCAPES:
            out.append(_CONTROL_ESCAPES[c])
        elif c == " " and (key or idx == 0):
            out.append("\\ ")
        elif key and c in "=:#!":
            out.append("\\" + c)
        elif o < 0x20 or o > 0x7E:
            data = c.encode("utf-16-be")
            for j in range(0, len(data), 2):
                out.append("\\u%04X" % int.from_bytes(data[j : j + 2], "big"))
        else:
            out.append(c)
    return "".join(out)


_CONTROL_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _format(key: str, value: str, newline: str) -> str:
    return f"{_escape(key, key=True)} = {_escape(value, key=False)}{newline}"


def _newline_of(entries: list[_Entry]) -> str:
    for e in entries:
        for r in e.raw:
            if r.endswith("\r\n"):
                return "\r\n"
            if r.endswith("\n"):
                return "\n"
            if r.endswith("\r"):
                return "\r"
    return "\n"


def _render(entries: list[_Entry]) -> str:
    return "".join("".join(e.raw) for e in entries)


def _write_atomic(path: str, text: str, *, default_mode: int = 0o600) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = default_mode
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding=_ENCODING, newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _ensure_trailing_newline(entries: list[_Entry], nl: str) -> None:
    if entries and not entries[-1].raw[-1].endswith(("\n", "\r")):
        entries[-1].raw[-1] += nl


def _set(entries: list[_Entry], key: str, value: str) -> None:
    """Set ``key``: rewrite its (last) entry in place, or append a new one."""
    nl = _newline_of(entries)
    for e in reversed(entries):
        if e.key == key:
            e.raw = [_format(key, value, nl)]
            e.value = value
            return
    _ensure_trailing_newline(entries, nl)
    entries.append(_Entry([_format(key, value, nl)], 0, key, value))


def _delete(entries: list[_Entry], key: str) -> bool:
    before = len(entries)
    entries[:] = [e for e in entries if e.key != key]
    return len(entries) != before


# --------------------------------------------------------------------------
# Users and roles


def _is_regexp(value: str) -> bool:
    return len(value) > 1 and value.startswith("/") and value.endswith("/")


def _split_users(value: str) -> list[str]:
    return [u.strip() for u in value.split(",") if u.strip()]


class UserStore:
    """The users and roles of one node, loaded from the two properties files.

    Immutable once loaded; reload by calling :meth:`load` again
    (:class:`junction.config.reloading.ReloadingUserStore` does, when the files change).
    """

    def __init__(
        self,
        users: dict[str, str],
        roles: dict[str, frozenset[str]],
        role_patterns: dict[str, re.Pattern],
    ):
        self._users = dict(users)
        self._roles = dict(roles)
        self._patterns = dict(role_patterns)

    @classmethod
    def load(cls, users_path: str | os.PathLike, roles_path: str | os.PathLike) -> UserStore:
        """Read both files.  A missing roles file means no roles.

        Raises :class:`PropertiesError` (with file and line) for a malformed
        ``ENC(...)`` hash, a bad ``\\u`` escape or an invalid role regexp, and
        :class:`FileNotFoundError` when the users file is missing.
        """
        users_file, roles_file = os.fspath(users_path), os.fspath(roles_path)
        users: dict[str, str] = {}
        for e in _read_entries(users_file, missing_ok=False):
            if e.key is None:
                continue
            if is_hashed(e.value):
                try:
                    _parse_hash(e.value)
                except ValueError as err:
                    raise PropertiesError(users_file, e.line, f"user {e.key!r}: {err}") from None
            elif e.value.startswith("ENC("):
                # Artemis would take this for a plain-text password; it is a hash cut
                # short (a file read while it was being written, or a bad paste)
                raise PropertiesError(
                    users_file, e.line, f"user {e.key!r}: ENC(... password has no closing parenthesis"
                )
            users[e.key] = e.value
        roles: dict[str, set[str]] = {}
        patterns: dict[str, re.Pattern] = {}
        for e in _read_entries(roles_file, missing_ok=True):
            if e.key is None:
                continue
            if _is_regexp(e.value):
                try:
                    patterns[e.key] = re.compile(e.value[1:-1])
                except re.error as err:
                    raise PropertiesError(
                        roles_file, e.line, f"role {e.key!r}: invalid regexp: {err}"
                    ) from None
                continue
            roles.setdefault(e.key, set()).update(_split_users(e.value))
        return cls(users, {r: frozenset(u) for r, u in roles.items()}, patterns)

    def __eq__(self, other) -> bool:
        """Same users, passwords and roles (a reload compares the new files with the old)."""
        if not isinstance(other, UserStore):
            return NotImplemented
        return (self._users, self._roles, self._patterns) == (other._users, other._roles, other._patterns)

    __hash__ = None  # mutable contents in spirit: not a dict key

    @property
    def users(self) -> frozenset[str]:
        return frozenset(self._users)

    def authenticate(self, user: str, password: str) -> bool:
        """True when ``user`` exists and ``password`` matches (hashed or plain text).

        Takes about as long for an unknown user as for a wrong password.
        """
        stored = self._users.get(user)
        if stored is None:
            verify_password(password, _DUMMY)
            return False
        return verify_password(password, stored)

    def roles_of(self, user: str) -> frozenset[str]:
        """Every role listing ``user`` or whose ``/regexp/`` matches it."""
        found = {role for role, members in self._roles.items() if user in members}
        found.update(role for role, pat in self._patterns.items() if pat.fullmatch(user))
        return frozenset(found)


def list_users(
    users_path: str | os.PathLike, roles_path: str | os.PathLike
) -> list[tuple[str, frozenset[str]]]:
    """``(user, roles)`` for every user, in users-file order."""
    store = UserStore.load(users_path, roles_path)
    order = [
        e.key for e in _read_entries(os.fspath(users_path), missing_ok=False) if e.key is not None
    ]
    return [(u, store.roles_of(u)) for u in dict.fromkeys(order)]


def _check_name(what: str, name: str) -> None:
    if not name or name != name.strip():
        raise ValueError(
            f"{what} name {name!r} must be non-empty with no leading or trailing blanks"
        )
    if what == "user" and "," in name:
        raise ValueError(
            f"user name {name!r} must not contain a comma (roles files list users with commas)"
        )


def _add_to_roles(rentries: list[_Entry], user: str, roles: list[str]) -> None:
    """Put ``user`` in each of ``roles`` (a missing role is appended; ``/regexp/`` roles are left alone)."""
    for role in roles:
        current = None
        for e in reversed(rentries):
            if e.key == role:
                current = e.value
                break
        if current is not None and _is_regexp(current):
            continue  # a /regexp/ role is not a list; leave it alone
        members = _split_users(current or "")
        if user not in members:
            members.append(user)
        _set(rentries, role, ",".join(members))


def _remove_from_roles(rentries: list[_Entry], user: str, keep: Iterable[str] = ()) -> tuple[list[_Entry], bool]:
    """``rentries`` with ``user`` taken out of every role but ``keep``; a role left empty goes.

    Returns the new entries and whether anything changed.
    """
    keep = set(keep)
    changed = False
    nl = _newline_of(rentries)
    kept = []
    for e in rentries:
        if e.key is not None and e.key not in keep and not _is_regexp(e.value):
            members = _split_users(e.value)
            if user in members:
                changed = True
                members = [m for m in members if m != user]
                if not members:
                    continue
                e.raw = [_format(e.key, ",".join(members), nl)]
                e.value = ",".join(members)
        kept.append(e)
    return kept, changed


def add_user(
    users_path: str | os.PathLike,
    roles_path: str | os.PathLike,
    user: str,
    password: str,
    roles: Iterable[str] = (),
    *,
    plaintext: bool = False,
    iterations: int = HASH_ITERATIONS,
    replace: bool = False,
) -> None:
    """Add ``user`` with ``password`` (hashed unless ``plaintext``) and ``roles``.

    Creates either file when missing.  When the user exists: ValueError, or
    with ``replace`` the user gets the new password and exactly ``roles``, its
    line keeping its place.  Each file is written once (roles first), so a
    node reloading the files in between never finds the user missing or
    without its roles.
    """
    _check_name("user", user)
    roles = list(dict.fromkeys(roles))
    for r in roles:
        _check_name("role", r)
    users_file, roles_file = os.fspath(users_path), os.fspath(roles_path)
    uentries = _read_entries(users_file, missing_ok=True)
    exists = any(e.key == user for e in uentries)
    if exists and not replace:
        raise ValueError(f"user {user!r} already exists in {users_file}")
    stored = password if plaintext else hash_password(password, iterations=iterations)
    rentries = _read_entries(roles_file, missing_ok=True)
    before = _render(rentries)
    if exists:
        rentries = _remove_from_roles(rentries, user, keep=roles)[0]
    _add_to_roles(rentries, user, roles)
    _set(uentries, user, stored)
    if _render(rentries) != before:
        _write_atomic(roles_file, _render(rentries), default_mode=0o644)
    _write_atomic(users_file, _render(uentries))


def set_password(
    users_path: str | os.PathLike,
    user: str,
    password: str,
    *,
    plaintext: bool = False,
    iterations: int = HASH_ITERATIONS,
) -> None:
    """Replace the password of an existing ``user`` (KeyError when there is none)."""
    users_file = os.fspath(users_path)
    uentries = _read_entries(users_file, missing_ok=False)
    if not any(e.key == user for e in uentries):
        raise KeyError(user)
    _set(uentries, user, password if plaintext else hash_password(password, iterations=iterations))
    _write_atomic(users_file, _render(uentries))


def remove_user(users_path: str | os.PathLike, roles_path: str | os.PathLike, user: str) -> None:
    """Remove ``user`` and take it out of every role; a role left empty is removed.

    KeyError when the user does not exist.
    """
    users_file, roles_file = os.fspath(users_path), os.fspath(roles_path)
    uentries = _read_entries(users_file, missing_ok=False)
    if not _delete(uentries, user):
        raise KeyError(user)
    kept, changed = _remove_from_roles(_read_entries(roles_file, missing_ok=True), user)
    _write_atomic(users_file, _render(uentries))
    if changed:
        _write_atomic(roles_file, _render(kept), default_mode=0o644)
