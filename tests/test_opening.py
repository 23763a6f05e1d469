"""open_store(url): each scheme opens the store that registered it; options are checked
against what that store takes; the optional stores are imported only when asked for; no
error shows the URL or keeps it in its chain."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from postgres_server import postgres_server, postgres_url  # noqa: F401
from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    StoreError,
    checkpoint_key,
    create_checkpoint,
    open_store,
    register_store,
)
from tool_execution_checkpoint.stores.opening import (
    _SCHEMES,
    StoreScheme,
    is_store_url,
    store_options,
    url_scheme,
)
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.testing.conformance import leaks

SECRET = "opening-secret-5d1c"
NOW = "2026-01-01T00:00:00Z"
BINDING = Binding("opening", "call-1", "tool", "1", "sha256:0")


def _round_trip(store: Any) -> None:
    key = checkpoint_key(BINDING)
    assert store.create_if_absent(key, create_checkpoint(BINDING, created_at=NOW))
    assert store.get(key)["status"] == "ready"


def _refused(url: str, **options: Any) -> CheckpointError:
    with pytest.raises(CheckpointError) as caught:
        open_store(url, **options)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert leaks(caught.value, SECRET) is None
    return caught.value


def test_memory_urls_open_a_new_empty_store_each_time() -> None:
    first, second = open_store("memory:"), open_store("memory://")
    assert isinstance(first, MemoryStore)
    assert first is not second
    _round_trip(first)
    assert isinstance(second, MemoryStore)
    assert len(second) == 0
    first.close()  # a no-op, so that every opened store closes alike
    assert _refused(f"memory:{SECRET}").field == "url"


def test_sqlite_urls_absolute_relative_and_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a b.db"
    with open_store(f"sqlite://{tmp_path}/a%20b.db?busy_timeout=2") as store:
        assert isinstance(store, SQLiteStore)
        assert store.path == path
        assert store.busy_timeout == 2.0
        _round_trip(store)
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:a%20b.db", busy_timeout=7, create=False) as store:
        assert isinstance(store, SQLiteStore)
        assert store.path == path
        assert store.busy_timeout == 7.0
    with open_store("SQLITE:./a b.db") as store:
        assert isinstance(store, SQLiteStore)
        assert store.busy_timeout == 5.0


def test_create_false_refuses_a_missing_sqlite_file_and_makes_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite://{tmp_path}/missing.db", create=False)
    assert "no SQLite file" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "field"),
    [
        (f"sqlite://{SECRET}/x.db", "url"),
        ("sqlite:///:memory:", "url"),
        ("sqlite:", "url"),
        (f"sqlite:///tmp/x.db#{SECRET}", "url"),
        (f"sqlite:///tmp/x.db?{SECRET}=1", "url"),
        ("sqlite:///tmp/x.db?busy_timeout=1&busy_timeout=2", "url"),
        (f"sqlite:///tmp/x.db?busy_timeout={SECRET}", "busy_timeout"),
    ],
)
def test_a_bad_sqlite_url_is_invalid_argument_naming_no_part_of_it(url: str, field: str) -> None:
    assert _refused(url).field == field


def test_an_option_the_store_does_not_take_is_refused_before_anything_is_opened(
    tmp_path: Path,
) -> None:
    error = _refused(f"sqlite://{tmp_path}/x.db", table="t")
    assert error.field == "table"
    assert "busy_timeout" in str(error)
    assert list(tmp_path.iterdir()) == []
    assert _refused("memory:", prefix="p:").field == "prefix"
    assert _refused("postgresql://127.0.0.1:9/x", prefix="p:").field == "prefix"
    assert _refused("redis://127.0.0.1:9/0", table="t").field == "table"


@pytest.mark.parametrize(
    "url",
    [
        f"ftp://user:{SECRET}@example/x",
        f"mysql://user:{SECRET}@example/x",
        f"/var/lib/{SECRET}.db",
        f"{SECRET}.db",
        "",
    ],
)
def test_an_unknown_scheme_is_invalid_argument_naming_no_url_value(url: str) -> None:
    error = _refused(url)
    assert error.field == "url"
    assert "sqlite:///absolute/path" in str(error)
    assert error.__context__ is None


def test_postgres_urls_open_a_postgres_store_with_its_options(
    postgres_url: str,  # noqa: F811
) -> None:
    table = f"t_{uuid.uuid4().hex}"
    for scheme in ("postgresql", "postgres"):
        url = scheme + postgres_url[postgres_url.index(":") :]
        with open_store(url, table=table, max_size=1) as store:
            assert isinstance(store, PostgresStore)
            assert table in repr(store)
            if scheme == "postgresql":
                _round_trip(store)
            else:
                assert store.get(checkpoint_key(BINDING)) is not None
    assert store_options(postgres_url) is not None
    assert "schema" in (store_options(postgres_url) or ())
    for waits in (True, False):
        with open_store(postgres_url, table=table, synchronous_delivered=waits) as store:
            assert isinstance(store, PostgresStore)
            assert store._relax is not waits


def test_redis_urls_open_a_redis_store_and_a_bad_one_keeps_no_password() -> None:
    for url in ("redis://127.0.0.1:9/0", "rediss://127.0.0.1:9/0", "unix:///tmp/redis.sock"):
        store = open_store(url, prefix="opening:")
        assert isinstance(store, RedisStore)
        assert store.prefix == "opening:"
        store.close()
    for bad in (
        f"redis://:{SECRET}@127.0.0.1:not-a-port/0",
        f"rediss://:{SECRET}@127.0.0.1:99999999/0",
    ):
        error = _refused(bad)
        assert error.field == "url"
        assert error.__context__ is None


def test_a_registered_scheme_opens_with_its_opener() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def opener(url: str, **options: Any) -> MemoryStore:
        seen.append((url, options))
        return MemoryStore()

    try:
        register_store("Test-Any", opener)
        assert isinstance(open_store("test-any://x", anything=1), MemoryStore)
        assert seen == [("test-any://x", {"anything": 1})]  # no create: it did not ask
        register_store("test-path", "tool_execution_checkpoint.stores.memory:open_url", options=())
        assert _refused("test-path:", anything=1).field == "anything"
        register_store(
            "test-create",
            opener,
            options=("create",),
        )
        open_store("test-create:", create=False)
        assert seen[-1] == ("test-create:", {"create": False})
    finally:
        for scheme in ("test-any", "test-path", "test-create"):
            _SCHEMES.pop(scheme, None)
    for scheme, opener_given in (("1bad", opener), ("ok", "no-colon"), ("a b", opener)):
        with pytest.raises(CheckpointError) as caught:
            register_store(scheme, opener_given)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_each_built_in_store_s_options_are_read_off_its_opener() -> None:
    """What each built-in scheme takes is its opener's keyword-only parameters (and, for
    PostgreSQL, whose opener passes ``**options`` on, PostgresStore's): the lists the
    table once wrote by hand."""
    assert store_options("memory:") == frozenset()
    assert store_options("sqlite:x.db") == frozenset({"busy_timeout", "create"})
    postgres = {"create", "synchronous_delivered", "schema", "table", "connect_timeout"}
    postgres |= {"min_size", "max_size", "create_table", "durable", "prepare_threshold"}
    for url in ("postgresql://h/d", "postgres://h/d"):
        assert store_options(url) == frozenset(postgres)
    redis_options = {"prefix", "socket_timeout", "connect_timeout", "synchronous_delivered"}
    for url in ("redis://h", "rediss://h", "unix:///s", "redis+cluster://h", "rediss+cluster://h"):
        assert store_options(url) == frozenset(redis_options)
    assert all(entry.options is None and entry.options_from for entry in _SCHEMES.values())
    assert "create" not in str(_refused("sqlite:x.db", table="t"))  # the store's own only


def signature_opener(url: str, *, region: str = "", create: bool = True, **rest: Any) -> Any:
    del url, region, create, rest
    return MemoryStore()


class SignatureTarget:
    def __init__(self, where: str, *, zone: str = "", retries: int = 1) -> None:
        del where, zone, retries


def test_options_follow_an_opener_s_keywords_to_what_it_passes_them_to() -> None:
    here = f"{__name__}:"
    try:
        for scheme, options_from, takes in (
            ("test-sig-any", (f"{here}signature_opener",), None),
            (
                "test-sig-on",
                (f"{here}signature_opener", f"{here}SignatureTarget"),
                frozenset({"region", "create", "zone", "retries"}),
            ),
        ):
            _SCHEMES[scheme] = StoreScheme(f"{here}signature_opener", options_from=options_from)
            assert store_options(f"{scheme}:") == takes
        assert isinstance(open_store("test-sig-on:", zone="z", create=False), MemoryStore)
        error = _refused("test-sig-on:", where="w")
        assert error.field == "where"
        assert "create" not in str(error)
        assert "region, retries, zone" in str(error)
        open_store("test-sig-any:", anything=1).close()
    finally:
        for scheme in ("test-sig-any", "test-sig-on"):
            _SCHEMES.pop(scheme, None)


def test_is_store_url() -> None:
    assert is_store_url("sqlite:relative/path")
    assert is_store_url("REDIS+cluster://h")
    assert not is_store_url("tests.broken:nothing")
    assert not is_store_url("/absolute/path")
    assert not is_store_url(42)


def test_url_scheme() -> None:
    assert url_scheme("sqlite:relative/path") == "sqlite"
    assert url_scheme("PostgreSQL://x") == "postgresql"
    assert url_scheme("/absolute/path") is None
    assert url_scheme("file.db") is None
    assert url_scheme(42) is None


def test_the_core_opens_stores_without_psycopg_or_redis_installed(tmp_path: Path) -> None:
    """Block the drivers' imports: memory and sqlite still open, and postgresql or redis
    URLs are refused naming the extra to install, also with an option (their options
    are read off openers that cannot be imported) and when only their options are
    asked for."""
    script = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "redis"):
            raise ImportError(name)
        return None
sys.meta_path.insert(0, Block())
from tool_execution_checkpoint import CheckpointError, open_store
open_store("memory:")
open_store("sqlite://{tmp_path}/core.db").close()
from tool_execution_checkpoint.stores.opening import is_store_url, store_options
for url, extra in (("postgresql://u:{SECRET}@h/d", "postgres"), ("redis://:{SECRET}@h/0", "redis")):
    assert is_store_url(url)
    attempts = (lambda: open_store(url), lambda: open_store(url, x=1), lambda: store_options(url))
    for attempt in attempts:
        try:
            attempt()
        except CheckpointError as error:
            assert f"install the {{extra}} extra" in str(error), str(error)
            assert "{SECRET}" not in str(error) and error.__context__ is None
        else:
            raise AssertionError(url)
assert not {{"psycopg", "redis"}} & set(sys.modules), sorted(sys.modules)
print("ok")
"""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=False
    )
    assert run.stdout.strip() == "ok", run.stdout + run.stderr
