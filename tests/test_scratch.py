"""Scratch space: each store's own, found by its URL's scheme; fresh stores made and every
space removed, also when a store fails to open after its room was made. check-store's
runs on each real store are in test_cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteConfigurationError,
    checkpoint_key,
    create_checkpoint,
    register_store,
)
from tool_execution_checkpoint.stores.opening import _SCHEMES
from tool_execution_checkpoint.testing.scratch import ScratchSpace, scratch_space
from tool_execution_checkpoint.testing.scratch.postgres import PostgresScratch
from tool_execution_checkpoint.testing.scratch.redis import RedisScratch
from tool_execution_checkpoint.testing.scratch.sqlite import SQLiteScratch

BINDING = Binding("scratch", "call-1", "tool", "1", "sha256:0")


def _refused(url: str, **options: Any) -> CheckpointError:
    with pytest.raises(CheckpointError) as caught:
        scratch_space(url, **options)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    return caught.value


def test_each_store_s_scheme_finds_its_own_scratch_space(tmp_path: Path) -> None:
    assert type(scratch_space(f"sqlite://{tmp_path}/s.db")) is SQLiteScratch
    for url in ("postgresql://u@h/db", "postgres://u@h/db"):
        assert type(scratch_space(url)) is PostgresScratch
    assert scratch_space("postgresql://u@h/db", schema="ops").location(1)[1]["schema"] == "ops"
    for url in ("redis://h:6379/0", "rediss://h:6379/0", "unix:///run/redis.sock"):
        assert type(scratch_space(url)) is RedisScratch
    assert type(scratch_space("redis+cluster://h:7000")) is RedisScratch


def test_urls_without_a_scratch_space_are_refused_without_showing_them() -> None:
    for url in ("memory:", "nosuch://user:pw-7a1@h/x"):
        assert "pw-7a1" not in str(_refused(url))


def test_sqlite_stores_are_fresh_files_in_one_new_directory_removed_at_the_end(
    tmp_path: Path,
) -> None:
    (tmp_path / "s.db").write_bytes(b"not opened")
    scratch = scratch_space(f"sqlite://{tmp_path}/s.db?busy_timeout=2")
    first, second = scratch.make_store(), scratch.make_store()
    key = checkpoint_key(BINDING)
    assert first.create_if_absent(
        key, create_checkpoint(BINDING, created_at="2026-01-01T00:00:00Z")
    )
    assert second.get(key) is None  # a space of its own
    (made,) = [path for path in tmp_path.iterdir() if path.name.startswith(".tec-check-")]
    assert sorted(path.name for path in made.glob("*.db")) == ["check-1.db", "check-2.db"]
    assert scratch.location(2)[0].endswith("/check-2.db?busy_timeout=2")
    assert scratch.remove().startswith(f"deleted the directory {made}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s.db"]
    assert (tmp_path / "s.db").read_bytes() == b"not opened"


def test_a_room_made_is_removed_even_when_no_store_opened_in_it(tmp_path: Path) -> None:
    class Unopenable(SQLiteScratch):
        def location(self, number: int) -> tuple[str, dict[str, Any]]:
            return f"nosuch:{number}", {}

    scratch = Unopenable(f"sqlite://{tmp_path}/s.db")
    with pytest.raises(CheckpointError):
        scratch.make_store()
    assert len(list(tmp_path.iterdir())) == 1  # the directory was made
    assert scratch.remove().startswith("deleted the directory")
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_cannot_take_a_new_one_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    scratch = scratch_space(f"sqlite://{tmp_path}/missing/s.db")
    with pytest.raises(SQLiteConfigurationError, match="must exist and be writable"):
        scratch.make_store()
    assert scratch.remove() == "nothing to remove"


def test_a_registered_store_brings_its_own_scratch_space() -> None:
    made: list[MemoryStore] = []

    class Tenants(ScratchSpace):
        def describe(self) -> str:
            return "a new tenant per check"

        def location(self, number: int) -> tuple[str, dict[str, Any]]:
            return f"test-tenant://{self.run}-{number}", {}

        def _remove(self) -> str:
            return f"dropped {len(self.stores)} tenants"

    def opener(url: str) -> MemoryStore:
        assert url.startswith("test-tenant://")
        made.append(MemoryStore())
        return made[-1]

    try:
        register_store("test-tenant", opener, options=(), scratch=Tenants)
        scratch = scratch_space("test-tenant://main")
        assert scratch.make_store() is made[0]
        assert scratch.make_store() is made[1]
        assert scratch.remove() == "dropped 2 tenants"
        register_store("test-tenant", opener, options=())
        _refused("test-tenant://main")
    finally:
        _SCHEMES.pop("test-tenant", None)
