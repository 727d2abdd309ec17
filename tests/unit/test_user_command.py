"""``junction user``: which users file it edits without ``--config``, ``passwd``, and what it says.

The files are copies of the shipped ``etc/`` (``etc/broker.xml`` and the
appliance in ``etc/appliance``) in ``tmp_path``, which is the current folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from junction import cli
from junction.cli.user import UserFilesError, lock_holder, resolve, running_nodes
from junction.config.properties import UserStore
from junction.node import LOCK_FILE

ETC = Path(__file__).resolve().parents[2] / "etc"


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A folder laid out as the checkout: ``etc/broker.xml`` and ``etc/appliance/``; the current folder."""
    shutil.copytree(ETC, tmp_path / "etc", ignore=shutil.ignore_patterns("data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*argv) -> int:
    return cli.main(list(argv))


def appliance_users(checkout) -> UserStore:
    folder = checkout / "etc" / "appliance"
    return UserStore.load(folder / "artemis-users.properties", folder / "artemis-roles.properties")


def test_without_config_the_appliance_junction_up_runs_is_edited(checkout, capsys):
    assert run("user", "add", "bob", "--password", "b0b", "--role", "amq") == 0
    out = capsys.readouterr().out
    users = checkout / "etc" / "appliance" / "artemis-users.properties"
    assert out.startswith(
        f"user bob added to {os.path.abspath(users)} (shared by the nodes in etc/appliance, junction up's default: "
        "core1, core2, core3, gateway) with roles amq\n"
    )
    assert "no node that reads it is running: the change applies when one starts" in out
    assert appliance_users(checkout).authenticate("bob", "b0b")
    # etc/broker.xml's own users file is untouched
    assert "bob" not in UserStore.load(checkout / "etc" / "artemis-users.properties", checkout / "etc" / "x").users


def test_without_an_appliance_the_node_junction_run_runs_is_edited(checkout, capsys):
    shutil.rmtree(checkout / "etc" / "appliance")
    assert run("user", "list") == 0
    captured = capsys.readouterr()
    assert "admin\tamq" in captured.out
    assert f"users in {os.path.abspath('etc/artemis-users.properties')} (named by etc/broker.xml" in captured.err


def test_with_neither_it_says_where_it_looked_and_what_to_give(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run("user", "add", "bob", "--password", "x") == 2
    err = capsys.readouterr().err
    assert "Neither etc/appliance/*.xml (the appliance junction up runs) nor etc/broker.xml" in err
    assert f"is in {tmp_path}" in err and "--etc APPLIANCE_FOLDER or --config BROKER_XML" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_etc_names_an_appliance_and_its_nodes_must_share_one_users_file(checkout, capsys):
    folder = checkout / "other"
    shutil.copytree(checkout / "etc" / "appliance", folder)
    assert resolve(etc=str(folder)).users == str(folder / "artemis-users.properties")
    core2 = folder / "core2.xml"
    core2.write_text(core2.read_text().replace('users-file="artemis-users.properties"', 'users-file="mine.properties"'))
    with pytest.raises(UserFilesError, match="do not share one users file .*core2: .*mine.properties"):
        resolve(etc=str(folder))
    assert run("user", "list", "--etc", str(folder)) == 2


def test_passwd_changes_the_password_and_keeps_the_roles(checkout, capsys):
    assert run("user", "add", "bob", "--password", "b0b", "--role", "amq,dev") == 0
    assert run("user", "passwd", "bob", "--password", "n3w") == 0
    assert "password of user bob changed in" in capsys.readouterr().out
    store = appliance_users(checkout)
    assert store.authenticate("bob", "n3w") and not store.authenticate("bob", "b0b")
    assert store.roles_of("bob") == {"amq", "dev"}
    assert run("user", "passwd", "nobody", "--password", "x") == 1
    assert "no user 'nobody'" in capsys.readouterr().err


def test_add_of_an_existing_user_rewrites_its_line_in_place(checkout):
    users = checkout / "etc" / "appliance" / "artemis-users.properties"
    order = lambda: [  # noqa: E731
        line.split(" = ")[0] for line in users.read_text().splitlines() if " = " in line and line[0] != "#"
    ]
    assert run("user", "add", "bob", "--password", "b0b", "--role", "amq") == 0
    assert run("user", "add", "carl", "--password", "c") == 0
    assert run("user", "add", "bob", "--password", "n3w", "--role", "dev") == 0
    assert order() == ["admin", "probe", "bob", "carl"]
    store = appliance_users(checkout)
    assert store.authenticate("bob", "n3w") and store.roles_of("bob") == {"dev"}
    assert store.roles_of("admin") == {"amq"}


def test_it_names_the_running_nodes_that_read_the_file(checkout, capsys):
    files = resolve()
    core1 = next(c for c in files.configs if c.name == "core1")
    journal = checkout / "etc" / "appliance" / core1.journal_directory
    journal.mkdir(parents=True)
    fd = os.open(journal / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        assert lock_holder(str(journal / LOCK_FILE)) is None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running node holds it
        assert lock_holder(str(journal / LOCK_FILE)) == os.getpid()
        assert running_nodes(files) == [("core1", os.getpid())]
        assert run("user", "rm", "admin") == 0
        out = capsys.readouterr().out
        assert f"running nodes that read it, core1 (pid {os.getpid()}), take the change at their next login" in out
    finally:
        os.close(fd)
