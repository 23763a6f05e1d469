"""Listing arguments and bounds are the same on every store: a ``Listing`` checks and
bounds them once, when it is made, so Memory, SQLite, PostgreSQL and Redis, sync and
async, answer the same listing the same way, and every store refuses what is not a
``Listing`` the same way. The times bounds are compared with are each store's own (a
server's clock for PostgreSQL and Redis, the records' updatedAt for Memory and SQLite):
every store lists what its whole listing, the model's, says it must for each bound.

``list_records(updated_before_us=2**63)`` once returned every record on Memory and SQLite
and raised on PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from postgres_server import postgres_server, postgres_url  # noqa: F401
from redis_server import redis_url  # noqa: F401
from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    Status,
    checkpoint_key,
    claim_execution,
    create_checkpoint,
)
from tool_execution_checkpoint.stores import Listing, RecordSummary
from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore
from tool_execution_checkpoint.stores.sqlite import AsyncSQLiteStore, SQLiteStore
from tool_execution_checkpoint.testing import SyncStoreAdapter
from tool_execution_checkpoint.testing.listings import check_whole_listing, selected, timed

TIMES = ["0001-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"]
KINDS = ["memory", "sqlite", "async-sqlite", "postgres", "async-postgres", "redis", "async-redis"]


@pytest.fixture
def make(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Any]]:
    """Open a fresh, empty store of a kind (closed at the end)."""
    opened: list[Any] = []

    def open_kind(kind: str) -> Any:
        store: Any
        if kind == "memory":
            return MemoryStore()
        if kind == "sqlite":
            store = SQLiteStore(tmp_path / f"{uuid.uuid4().hex}.db")
        elif kind == "async-sqlite":
            store = SyncStoreAdapter(AsyncSQLiteStore(tmp_path / f"{uuid.uuid4().hex}.db"))
        elif kind.endswith("redis"):
            url, prefix = request.getfixturevalue("redis_url"), f"bounds-{uuid.uuid4().hex}:"
            if kind == "redis":
                store = RedisStore.from_url(url, prefix=prefix)
            else:
                store = SyncStoreAdapter(AsyncRedisStore.from_url(url, prefix=prefix))
        else:
            url = request.getfixturevalue("postgres_url")
            table = f"t_{uuid.uuid4().hex}"
            if kind == "postgres":
                store = PostgresStore(url, table=table, max_size=1)
            else:
                store = SyncStoreAdapter(AsyncPostgresStore(url, table=table, max_size=1))
        opened.append(store)
        return store

    yield open_kind
    for store in opened:
        store.close()


def _populate(store: Any) -> None:
    """A ready record at the earliest time a record can have, an executing one now, a
    ready one at the latest."""
    for index, at in enumerate(TIMES):
        binding = Binding("bounds", f"call-{index}", "tool", "1", "sha256:0")
        key, record = checkpoint_key(binding), create_checkpoint(binding, created_at=at)
        assert store.create_if_absent(key, record)
        if index == 1:
            claim = claim_execution(record, attempt_id="a", at=at)
            assert store.compare_and_swap(key, claim.expected_revision, claim.next)


def _accepted(earliest: int, latest: int) -> list[dict[str, Any]]:
    """Bounds past 64 bits either way, and on and beside the earliest and the latest time
    a record was written at."""
    return [
        {"written_before_us": 2**63},
        {"written_before_us": 2**63 - 1},
        {"written_before_us": 2**200},
        {"written_before_us": -(2**63)},
        {"written_before_us": -(2**63) - 1},
        {"written_before_us": -(2**200)},
        {"written_before_us": earliest},
        {"written_before_us": earliest + 1},
        {"written_before_us": latest},
        {"written_before_us": latest + 1},
        {"written_before_us": 0},
        {"limit": 2**63 - 1},
        {"limit": 2**63},
        {"limit": 2**200},
        {"limit": 1},
        {"limit": 2, "written_before_us": 2**64},
    ]


ALL_OF_THEM: dict[str, Any] = {"written_before_us": 2**63, "limit": 2**64}


@pytest.mark.parametrize("kind", KINDS)
def test_every_store_answers_every_bound_as_the_memory_store(
    make: Callable[[str], Any], kind: str
) -> None:
    model, store = MemoryStore(), make(kind)
    _populate(model)
    _populate(store)
    reference = check_whole_listing(store, model)
    times = sorted(line.written_us for line in reference if isinstance(line, RecordSummary))
    earliest, latest = times[0], times[-1]
    every: tuple[Any, ...] = (
        [],
        [Status.READY],
        ["ready", "executing"],  # the statuses' values are statuses too
        {Status.READY: 1, Status.EXECUTING: 2},  # any collection
        list(Status),
    )
    for statuses in every:
        for arguments in _accepted(earliest, latest):
            listing = Listing(statuses, **arguments)
            expected = timed(selected(reference, listing))
            assert timed(store.list_records(listing)) == expected, arguments
    # What the bounds mean: past the top, every record; below the bottom, none.
    assert len(store.list_records(Listing(list(Status), **ALL_OF_THEM))) == 3
    assert store.list_records(Listing(list(Status), written_before_us=-(2**64))) == []
    assert len(store.list_records(Listing(list(Status), written_before_us=latest + 1))) == 3
    assert len(store.list_records(Listing(list(Status), written_before_us=latest))) == 2
    assert store.list_records(Listing(list(Status), written_before_us=earliest)) == []


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"statuses": "ready"}, "statuses"),
    ({"statuses": ["ready", "bogus-status-value"]}, "statuses"),
    ({"statuses": 7}, "statuses"),
    ({"statuses": (status for status in [Status.READY])}, "statuses"),  # not a collection
    ({"statuses": b"ready"}, "statuses"),
    ({"statuses": None}, "statuses"),
    ({"statuses": [Status.READY, 0]}, "statuses"),
    ({"written_before_us": 1.5}, "written_before_us"),
    ({"written_before_us": True}, "written_before_us"),
    ({"written_before_us": "123456789"}, "written_before_us"),
    ({"written_before_us": float("inf")}, "written_before_us"),
    ({"limit": 0}, "limit"),
    ({"limit": -1}, "limit"),
    ({"limit": -(2**64)}, "limit"),
    ({"limit": True}, "limit"),
    ({"limit": 2.0}, "limit"),
    ({"after_key": ""}, "after_key"),
    ({"after_key": 3}, "after_key"),
    ({"after_key": b"k"}, "after_key"),
    ({"after_key": "\ud800"}, "after_key"),
    ({"after_key": "a\x00secret-after-key"}, "after_key"),
    ({"after_key": "s" * 257}, "after_key"),
]


def test_a_listing_bounds_what_no_store_could_index() -> None:
    """Bounds past 64 bits are kept as what they mean: every record, no sound record, the
    largest page; any other int is kept as it is."""
    assert Listing([], written_before_us=2**63).written_before_us is None
    assert Listing([], written_before_us=2**63 - 1).written_before_us == 2**63 - 1
    assert Listing([], written_before_us=-(2**63)).written_before_us == -(2**63)
    assert Listing([], written_before_us=-(2**200)).written_before_us == -(2**63)
    assert Listing([], limit=2**63).limit == Listing([], limit=2**200).limit == 2**63 - 1
    assert Listing([], limit=2**63 - 1).limit == 2**63 - 1
    assert Listing(["ready", Status.READY]).statuses == frozenset({Status.READY})  # type: ignore[list-item]
    assert Listing({Status.READY: 1}) == Listing([Status.READY])
    assert Listing([]) == Listing([], written_before_us=None, after_key=None, limit=1_000)


def test_a_next_page_is_the_same_listing_after_a_key() -> None:
    first = Listing([Status.READY], written_before_us=2**64, limit=2)
    second = first.after("tec1-b")
    assert second == Listing([Status.READY], after_key="tec1-b", limit=2)
    assert second.after("tec1-c").after_key == "tec1-c"
    with pytest.raises(CheckpointError) as caught:
        first.after("a\x00secret-after-key")
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_ARGUMENT, "after_key")
    assert "secret-after-key" not in str(caught.value)


def test_a_listing_cannot_be_changed() -> None:
    listing = Listing([Status.READY])
    with pytest.raises(AttributeError):
        listing.limit = 0  # type: ignore[misc]
    assert listing.limit == 1_000


@pytest.mark.parametrize(("change", "field"), REFUSED)
def test_a_listing_refuses_each_bad_argument_naming_no_value(
    change: dict[str, Any], field: str
) -> None:
    arguments: dict[str, Any] = {"statuses": [Status.READY], **change}
    statuses = arguments.pop("statuses")
    with pytest.raises(CheckpointError) as caught:
        Listing(statuses, **arguments)
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_ARGUMENT, field)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    text = f"{caught.value} {caught.value!r}"
    for value in ("bogus-status-value", "secret-after-key", "123456789"):
        assert value not in text


NOT_LISTINGS: list[object] = [
    None,
    [Status.READY],
    {"statuses": frozenset(Status), "written_before_us": None, "after_key": None, "limit": 0},
    (frozenset(Status), None, None, 1),
]


@pytest.mark.parametrize("kind", KINDS)
def test_every_store_refuses_what_is_not_a_listing(make: Callable[[str], Any], kind: str) -> None:
    store = make(kind)
    _populate(store)
    for wrong in NOT_LISTINGS:
        with pytest.raises(CheckpointError) as caught:
            store.list_records(wrong)
        assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_ARGUMENT, "listing")
