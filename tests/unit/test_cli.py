"""The ``junction`` command line: user management, config errors, version."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from junction import cli
from junction.config.properties import UserStore

ETC = Path(__file__).resolve().parents[2] / "etc"


@pytest.fixture
def etc(tmp_path):
    target = tmp_path / "etc"
    shutil.copytree(ETC, target, ignore=shutil.ignore_patterns("data"))
    return target


def run(*argv) -> int:
    return cli.main(list(argv))


def test_user_add_list_update_and_remove(etc, capsys):
    config = str(etc / "broker.xml")
    assert run("user", "add", "bob", "--password", "s3cret", "--role", "amq,ops", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert store.authenticate("bob", "s3cret")
    assert not store.authenticate("bob", "wrong")
    assert store.roles_of("bob") == frozenset({"amq", "ops"})
    # the password is stored hashed, never as given
    assert "s3cret" not in (etc / "artemis-users.properties").read_text()

    assert run("user", "add", "bob", "--password", "n3w", "--role", "amq", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert store.authenticate("bob", "n3w") and not store.authenticate("bob", "s3cret")
    assert store.roles_of("bob") == frozenset({"amq"})

    capsys.readouterr()
    assert run("user", "list", "--config", config) == 0
    listing = capsys.readouterr().out.splitlines()
    assert "bob\tamq" in listing and "admin\tamq" in listing

    assert run("user", "rm", "bob", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert "bob" not in store.users


def test_user_rm_of_an_unknown_user_is_a_clear_error(etc, capsys):
    assert run("user", "rm", "nobody", "--config", str(etc / "broker.xml")) == 1
    assert "no user 'nobody'" in capsys.readouterr().err


def test_invalid_config_reports_every_error_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "broker.xml"
    bad.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">\n'
        "<persistence-enabled>maybe</persistence-enabled>\n"
        "<jornal-directory>x</jornal-directory>\n"
        "</core></configuration>\n"
    )
    with pytest.raises(SystemExit) as exc:
        run("run", "--config", str(bad))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and f"{bad}:3:" in err
    assert "journal-directory" in err  # the did-you-mean suggestion


def test_version(capsys):
    assert run("version") == 0
    assert capsys.readouterr().out.startswith("junction ")
