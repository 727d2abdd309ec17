"""``junction user add | passwd | rm | list``: edit the users and roles files the nodes read.

Which files, in this order:

1. ``--config BROKER_XML``: the files that config names (``<junction><security
   users-file roles-file>``, beside it by default).
2. ``--etc FOLDER``: the files every node config (``*.xml``) of that appliance
   folder names; they must all name the same two files.
3. Neither: the appliance ``junction up`` runs by default, ``etc/appliance``
   under the current folder, when it has node configs; else ``etc/broker.xml``,
   the node ``junction run`` runs by default.  Anything else is an error that
   says where it looked and how to choose.

Every command says which users file it used and whether a node that reads it
is running (an ``flock`` on its journal directory's lock file, as
``/proc/locks`` shows).  Running nodes read the files again when they change
(:mod:`junction.config.reloading`): a new or changed user can log in at once,
a removed one is refused from its next login, and no restart is needed.
Files are written atomically (:mod:`junction.config.properties`), so a node
never reads half a file written here.
"""

from __future__ import annotations

import getpass
import glob
import os
import sys
from dataclasses import dataclass, field

# where junction up and junction run look by default (relative to the current folder)
from junction.cli.defaults import DEFAULT_APPLIANCE_DIR, DEFAULT_CONFIG

__all__ = ["UserFiles", "UserFilesError", "lock_holder", "resolve", "run"]


class UserFilesError(Exception):
    """No users file could be chosen; the message says why and how to choose one."""


@dataclass
class UserFiles:
    """The users and roles files a command edits, why those, and the node configs that read them."""

    users: str
    roles: str
    why: str
    configs: list = field(default_factory=list)


def _load(path: str):
    from junction.config.loader import ConfigErrors, load_config

    try:
        return load_config(path)
    except ConfigErrors as exc:
        raise UserFilesError(f"{path} is not valid:\n{exc}") from None


def _from_config(path: str, why: str) -> UserFiles:
    if not os.path.isfile(path):
        raise UserFilesError(f"no config file at {path}")
    config = _load(path)
    return UserFiles(config.users_file, config.roles_file, why, [config])


def _from_appliance(folder: str, why: str) -> UserFiles:
    paths = sorted(glob.glob(os.path.join(folder, "*.xml")))
    if not paths:
        raise UserFilesError(f"{folder}: no node configs (*.xml) in this folder")
    configs = [_load(path) for path in paths]
    pairs = {(c.users_file, c.roles_file) for c in configs}
    if len(pairs) != 1:
        named = "; ".join(f"{c.name}: {c.users_file}, {c.roles_file}" for c in configs)
        raise UserFilesError(
            f"the nodes in {folder} do not share one users file ({named}); choose one with --config NODE.xml"
        )
    (users, roles), = pairs
    names = ", ".join(c.name for c in configs)
    return UserFiles(users, roles, f"{why}: {names}", configs)


def resolve(config: str | None = None, etc: str | None = None) -> UserFiles:
    """The users files to edit (see the module docstring); :class:`UserFilesError` when none."""
    if config is not None:
        return _from_config(config, f"named by {config}")
    if etc is not None:
        return _from_appliance(etc, f"shared by the nodes in {etc}")
    if glob.glob(os.path.join(DEFAULT_APPLIANCE_DIR, "*.xml")):
        return _from_appliance(
            DEFAULT_APPLIANCE_DIR, f"shared by the nodes in {DEFAULT_APPLIANCE_DIR}, junction up's default"
        )
    if os.path.isfile(DEFAULT_CONFIG):
        return _from_config(DEFAULT_CONFIG, f"named by {DEFAULT_CONFIG}, junction run's default")
    raise UserFilesError(
        f"which users file? Neither {DEFAULT_APPLIANCE_DIR}{os.sep}*.xml (the appliance junction up runs) nor "
        f"{DEFAULT_CONFIG} (the node junction run runs) is in {os.getcwd()}: run this where you run "
        "junction up, or give --etc APPLIANCE_FOLDER or --config BROKER_XML"
    )


def lock_holder(path: str) -> int | None:
    """The pid holding an ``flock`` on ``path`` per ``/proc/locks`` (Linux), or None."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9978318 0 EOF"; waiters have a "->" after the number
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        where = parts[5].split(":")
        if len(where) == 3 and where[2].isdigit() and int(where[2]) == inode and parts[4].isdigit():
            return int(parts[4])
    return None


def running_nodes(files: UserFiles) -> list[tuple[str, int]]:
    """``(node name, pid)`` of each node that reads ``files`` and runs now (it holds its journal lock)."""
    from junction.node import LOCK_FILE

    running = []
    for config in files.configs:
        journal = config.journal_directory
        if not os.path.isabs(journal):
            journal = os.path.join(config.base_dir or ".", journal)
        pid = lock_holder(os.path.join(journal, LOCK_FILE))
        if pid is not None:
            running.append((config.name, pid))
    return running


def _effect(files: UserFiles) -> str:
    running = running_nodes(files)
    if running:
        nodes = ", ".join(f"{name} (pid {pid})" for name, pid in running)
        return f"running nodes that read it, {nodes}, take the change at their next login: no restart needed"
    return "no node that reads it is running: the change applies when one starts"


def run(args) -> int:
    """The ``junction user`` command (``args`` from :func:`junction.cli.build_parser`)."""
    from junction.config import properties

    try:
        files = resolve(getattr(args, "config", None), getattr(args, "etc", None))
    except UserFilesError as exc:
        print(f"junction: {exc}", file=sys.stderr)
        return 2
    try:
        return _command(args, properties, files)
    except (ValueError, KeyError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        print(f"junction: {message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # our reader went away, not the users file: junction.cli.main handles it
    except OSError as exc:
        print(f"junction: {exc.filename or files.users}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _password(args) -> str:
    if args.password is not None:
        return args.password
    return getpass.getpass(f"password for {args.name}: ")


def _exists(properties, files: UserFiles, name: str) -> bool:
    return any(user == name for user, _ in properties.list_users(files.users, files.roles))


def _command(args, properties, files: UserFiles) -> int:
    users, roles_file = files.users, files.roles
    where = f"{users} ({files.why})"
    if args.user_command == "list":
        print(f"junction: users in {where}", file=sys.stderr)
        for name, roles in properties.list_users(users, roles_file):
            print(f"{name}\t{','.join(sorted(roles))}")
        return 0
    if args.user_command == "add":
        roles = [r for r in (args.role or "").split(",") if r]
        password = _password(args)
        verb = "updated in" if os.path.exists(users) and _exists(properties, files, args.name) else "added to"
        properties.add_user(users, roles_file, args.name, password, roles, replace=True)
        print(f"user {args.name} {verb} {where} with roles {','.join(roles) or '(none)'}")
    elif args.user_command == "passwd":
        if not _exists(properties, files, args.name):
            raise ValueError(f"no user {args.name!r} in {users}")
        properties.set_password(users, args.name, _password(args))
        print(f"password of user {args.name} changed in {where}")
    else:  # rm
        if not _exists(properties, files, args.name):
            raise ValueError(f"no user {args.name!r} in {users}")
        properties.remove_user(users, roles_file, args.name)
        print(f"user {args.name} removed from {where}")
    print(_effect(files))
    return 0
