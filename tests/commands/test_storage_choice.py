"""`--storage`: the store a spec names, where the approvals live, what is refused by name."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.storage.sqlite import SqliteStore
from steerable_bridge.commands.errors import ConfigError
from steerable_bridge.commands.storage_choice import (
    add_storage_option,
    approvals_path,
    build_store,
    check_storage,
    default_storage,
    state_dir,
)


def test_memory_and_a_file_path_name_their_stores(tmp_path: Path) -> None:
    assert isinstance(build_store("memory"), MemoryStore)
    assert isinstance(build_store(str(tmp_path / "s.db")), SqliteStore)
    check_storage("memory")  # nothing to check, nothing raised


def test_another_url_scheme_is_refused_by_name_not_taken_for_a_path() -> None:
    with pytest.raises(ConfigError, match=r"--storage mysql://\.\.\. is not a store"):
        build_store("mysql://u@h/db")
    with pytest.raises(ConfigError, match="mysql"):
        check_storage("mysql://u@h/db")


def test_a_directory_is_refused_with_a_file_path_to_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory; give a file path"):
        build_store(str(tmp_path))
    with pytest.raises(ConfigError, match="is a directory"):
        check_storage(str(tmp_path))


def test_approvals_live_beside_a_sqlite_store_in_the_state_folder_for_postgres_nowhere_for_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert approvals_path("memory") is None
    assert approvals_path(str(tmp_path / "s.db")) == str(tmp_path / "approvals.json")
    assert approvals_path("postgresql://u@h/db") == os.path.join(state_dir(), "approvals.json")
    assert state_dir() == str(tmp_path / "state" / "steerable-bridge")


def test_the_default_store_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEERABLE_STORAGE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_storage() == str(tmp_path / "steerable-bridge" / "sessions.db")
    monkeypatch.setenv("STEERABLE_STORAGE", "memory")
    assert default_storage() == "memory"
    parser = argparse.ArgumentParser()
    add_storage_option(parser)
    assert parser.parse_args([]).storage == "memory"
