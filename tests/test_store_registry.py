"""The store registry (spec 002): its TOML file, `mnemo stores add|list|remove`, and how store
names resolve to folders for every profile."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.config import Settings
from mnemo.engine import registry
from mnemo.errors import Conflict, InvalidInput, NotFound, StorageError


@pytest.fixture
def mnemo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith("MNEMO_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env = {"MNEMO_HOME": str(tmp_path / "home"), "MNEMO_CONFIG_DIR": str(tmp_path / "config")}

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), env=env)

    return invoke


# -- the file ------------------------------------------------------------------------------
def test_without_a_registry_file_only_default_is_known(settings: Settings):
    assert not settings.registry_file.exists()
    assert settings.stores() == {"default": settings.home / "stores" / "default"}


def test_the_registry_lives_in_the_config_dir_which_the_environment_sets(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MNEMO_CONFIG_DIR", str(tmp_path / "elsewhere"))
    assert Settings().registry_file == tmp_path / "elsewhere" / "stores.toml"


def test_a_registered_store_is_written_as_toml_that_the_standard_library_reads(settings: Settings, tmp_path: Path):
    odd = tmp_path / 'quote " back \\ slash' / "ünïcode"
    folder = registry.add(settings.registry_file, settings.home, "work", odd)
    assert folder == odd.resolve()
    data = tomllib.loads(settings.registry_file.read_text(encoding="utf-8"))
    assert data == {"stores": {"work": str(odd.resolve())}}
    assert settings.stores()["work"] == odd.resolve()
    assert not odd.exists()  # made on the store's first write, not on registration


def test_a_relative_or_home_relative_folder_is_registered_absolute(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    assert registry.add(settings.registry_file, settings.home, "here", Path("mem/here")) == tmp_path / "mem" / "here"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert registry.add(settings.registry_file, settings.home, "mine", Path("~/mem")) == tmp_path / "user" / "mem"


@pytest.mark.parametrize("name", ["", "has space", "-leading-dash", "_under", "dot.ted", "slash/ed", "é", "x" * 65])
def test_a_bad_store_name_is_refused(settings: Settings, tmp_path: Path, name: str):
    with pytest.raises(InvalidInput):
        registry.add(settings.registry_file, settings.home, name, tmp_path / "s")
    assert not settings.registry_file.exists()


def test_names_of_letters_digits_dashes_and_underscores_up_to_64_characters_are_accepted(
    settings: Settings, tmp_path: Path
):
    for name in ("a", "Work_2", "9-lives", "x" * 64):
        registry.add(settings.registry_file, settings.home, name, tmp_path / name)
    assert set(settings.stores()) == {"default", "a", "Work_2", "9-lives", "x" * 64}


def test_a_name_already_registered_or_default_is_refused(settings: Settings, tmp_path: Path):
    registry.add(settings.registry_file, settings.home, "work", tmp_path / "work")
    with pytest.raises(Conflict, match="already registered"):
        registry.add(settings.registry_file, settings.home, "work", tmp_path / "other")
    with pytest.raises(Conflict, match="already registered"):
        registry.add(settings.registry_file, settings.home, "default", tmp_path / "other")
    assert settings.stores()["work"] == tmp_path / "work"


def test_a_folder_already_registered_under_another_name_is_refused(settings: Settings, tmp_path: Path):
    registry.add(settings.registry_file, settings.home, "work", tmp_path / "work")
    with pytest.raises(Conflict, match="'work'"):
        registry.add(settings.registry_file, settings.home, "job", tmp_path / "work")
    with pytest.raises(Conflict, match="'default'"):
        registry.add(settings.registry_file, settings.home, "again", settings.home / "stores" / "default")


def test_a_file_is_not_a_store_folder(settings: Settings, tmp_path: Path):
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(InvalidInput, match="is a file"):
        registry.add(settings.registry_file, settings.home, "bad", tmp_path / "file.txt")


def test_removing_unregisters_and_keeps_the_files(settings: Settings, tmp_path: Path):
    registry.add(settings.registry_file, settings.home, "work", tmp_path / "work")
    service = open_service(settings, "work")
    service.store("a memory that must survive unregistering")
    service.storage.close()

    assert registry.remove(settings.registry_file, "work") == tmp_path / "work"
    assert "work" not in settings.stores()
    assert (tmp_path / "work" / "memory.db").is_file()


def test_removing_an_unknown_store_or_default_is_refused(settings: Settings):
    with pytest.raises(NotFound):
        registry.remove(settings.registry_file, "never")
    with pytest.raises(InvalidInput, match="cannot be removed"):
        registry.remove(settings.registry_file, "default")


@pytest.mark.parametrize("text", ["[stores\nbroken", "stores = 3", "[stores]\nwork = 3"])
def test_a_damaged_registry_is_a_clear_storage_error(settings: Settings, text: str):
    settings.registry_file.parent.mkdir(parents=True)
    settings.registry_file.write_text(text)
    with pytest.raises(StorageError, match="registry"):
        settings.stores()


# -- store names resolve through it --------------------------------------------------------
def test_a_registered_name_resolves_to_its_folder_and_an_unknown_one_is_an_error_naming_the_known(
    settings: Settings, tmp_path: Path
):
    registry.add(settings.registry_file, settings.home, "work", tmp_path / "work")
    assert settings.store_folder("work") == tmp_path / "work"
    assert settings.store_folder() == settings.home / "stores" / "default"
    with pytest.raises(NotFound, match="known stores: default, work") as refused:
        settings.store_folder("wrok")
    assert refused.value.details == {"store": "wrok", "known": ["default", "work"]}
    assert not (settings.home / "stores" / "wrok").exists()


def test_creating_a_store_on_purpose_registers_it_under_the_home_stores_folder(settings: Settings):
    assert settings.store_folder("scratch", create=True) == settings.home / "stores" / "scratch"
    assert settings.stores()["scratch"] == settings.home / "stores" / "scratch"
    assert settings.store_folder("scratch", create=True) == settings.home / "stores" / "scratch"  # known now


@pytest.mark.parametrize("name", ["../../x", "..", ".", "a/b", "/tmp/x", "a\\b", "x" * 65])
def test_a_store_name_that_could_name_a_path_is_refused_everywhere_before_any_folder_is_made(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mnemo, name: str
):
    with pytest.raises(InvalidInput, match="invalid store name"):
        settings.store_folder(name, create=True)
    with pytest.raises(InvalidInput, match="invalid store name"):
        open_service(settings, name, create=True)
    monkeypatch.setenv("MNEMO_STORE", name)
    with pytest.raises(InvalidInput, match="invalid store name"):
        Settings(home=settings.home).store_folder()
    refused = mnemo("--store", name, "list")
    assert refused.exit_code == 1
    assert "invalid store name" in refused.stderr
    assert not list(tmp_path.rglob("memory.db"))
    assert not (tmp_path / "x").exists()


def test_a_mistyped_store_is_refused_by_every_command_and_creates_nothing(mnemo, tmp_path: Path):
    for command in (["list"], ["add", "a memory"], ["recall", "a"], ["stats"], ["show", "some-id"], ["reindex"]):
        refused = mnemo("--store", "nosuch", *command)
        assert refused.exit_code == 1, command
        assert "no store named 'nosuch'; known stores: default" in refused.stderr, command
    assert not (tmp_path / "home" / "stores" / "nosuch").exists()
    created = mnemo("stores", "add", "nosuch")
    assert created.exit_code == 0, created.output
    assert mnemo("--store", "nosuch", "add", "now it exists").exit_code == 0
    listed = {s["name"]: s["path"] for s in json.loads(mnemo("stores", "list", "--json").stdout)["stores"]}
    assert listed["nosuch"] == str(tmp_path / "home" / "stores" / "nosuch")


def test_a_service_opened_by_name_uses_the_registered_folder(settings: Settings, tmp_path: Path):
    registry.add(settings.registry_file, settings.home, "work", tmp_path / "work")
    service = open_service(settings, "work")
    try:
        assert service.storage.name == "work"
        service.store("stored in the registered folder")
    finally:
        service.storage.close()
    assert (tmp_path / "work" / "memory.db").is_file()
    assert not (settings.home / "stores" / "work").exists()


# -- the command line ----------------------------------------------------------------------
def test_mnemo_stores_add_list_remove(mnemo, tmp_path: Path):
    added = mnemo("stores", "add", "work", "memories/work")
    assert added.exit_code == 0, added.output
    assert f"registered store work at {tmp_path / 'memories' / 'work'}" in added.stdout

    listed = mnemo("stores", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == {
        "stores": [
            {"name": "default", "path": str(tmp_path / "home" / "stores" / "default"), "exists": False},
            {"name": "work", "path": str(tmp_path / "memories" / "work"), "exists": False},
        ]
    }
    table = mnemo("stores", "list")
    assert "work" in table.stdout and "not created yet" in table.stdout

    removed = mnemo("stores", "remove", "work")
    assert removed.exit_code == 0, removed.output
    assert "unregistered store work" in removed.stdout
    assert [s["name"] for s in json.loads(mnemo("stores", "list", "--json").stdout)["stores"]] == ["default"]


def test_mnemo_stores_reports_bad_and_duplicate_names_as_one_line_errors(mnemo):
    assert mnemo("stores", "add", "work", "w").exit_code == 0
    for args, message in [
        (("stores", "add", "work", "w2"), "already registered"),
        (("stores", "add", "bad name", "w3"), "invalid store name"),
        (("stores", "remove", "nothing"), "no store named 'nothing'"),
        (("stores", "remove", "default"), "cannot be removed"),
    ]:
        result = mnemo(*args)
        assert result.exit_code == 1, result.output
        assert message in result.stderr
        assert "Traceback" not in result.output


def test_mnemo_with_store_name_uses_the_registered_folder(mnemo, tmp_path: Path):
    assert mnemo("stores", "add", "work", "w").exit_code == 0
    added = mnemo("--store", "work", "add", "Stored in the work folder", "--json")
    assert added.exit_code == 0, added.output
    assert (tmp_path / "w" / "memory.db").is_file()
    listed = json.loads(mnemo("list", "--store", "work", "--json").stdout)
    assert [m["content"] for m in listed["memories"]] == ["Stored in the work folder"]


@pytest.fixture
def platform_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No MNEMO_HOME or MNEMO_CONFIG_DIR: the platform's folders, put under tmp_path (XDG, as on Linux)."""
    for name in list(os.environ):
        if name.startswith("MNEMO_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "platform-config"))
    return tmp_path


def test_a_store_registered_for_one_home_is_not_known_from_another(platform_dirs: Path):
    runner = CliRunner()

    def stores_of(home: str, *args: str) -> Result:
        return runner.invoke(cli, ["stores", *args], env={"MNEMO_HOME": str(platform_dirs / home)})

    assert stores_of("one", "add", "work", str(platform_dirs / "work")).exit_code == 0
    assert (platform_dirs / "one" / "stores.toml").is_file()
    listed = [s["name"] for s in json.loads(stores_of("one", "list", "--json").stdout)["stores"]]
    assert listed == ["default", "work"]
    other = [s["name"] for s in json.loads(stores_of("two", "list", "--json").stdout)["stores"]]
    assert other == ["default"]
    assert not (platform_dirs / "platform-config").exists()


def test_the_default_home_keeps_the_stores_an_older_mnemo_registered_and_no_other_home_sees_them(
    platform_dirs: Path,
):
    older = platform_dirs / "platform-config" / "mnemo" / "stores.toml"
    registry.save(older, {"work": platform_dirs / "work"})
    runner = CliRunner()

    def names(env: dict[str, str]) -> list[str]:
        listed = runner.invoke(cli, ["stores", "list", "--json"], env=env)
        assert listed.exit_code == 0, listed.output
        return [s["name"] for s in json.loads(listed.stdout)["stores"]]

    assert names({}) == ["default", "work"]
    assert names({"MNEMO_HOME": str(platform_dirs / "elsewhere")}) == ["default"]
    added = runner.invoke(cli, ["stores", "add", "notes", str(platform_dirs / "notes")])
    assert added.exit_code == 0, added.output
    assert registry.load(older) == {"work": platform_dirs / "work", "notes": platform_dirs / "notes"}
