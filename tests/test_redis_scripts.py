"""RedisStore's write scripts (issue 36): a script that does not return 1 has changed
nothing, whichever key it touches holds a foreign value, now that the writes are ordered
so that the first command that can fail comes before any write (one TYPE check where two
indexes are written); and records that earlier versions wrote (their scripts, verbatim,
in earlier_redis_scripts.py) are read, listed and swapped by this one, and the other way
round, as in a rolling upgrade."""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import tool_execution_checkpoint as tec
from earlier_redis_scripts import CREATE, SHAS, SWAP, earlier_create, earlier_swap
from redis_server import redis_url, server_for  # noqa: F401
from tool_execution_checkpoint import Checkpoint, Status
from tool_execution_checkpoint.stores.redis import RedisCommandError, RedisStore
from tool_execution_checkpoint.testing.listings import check_whole_listing

NOW = "2026-01-01T00:00:00Z"
SECRET = "a-payload-that-must-not-appear"


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:  # noqa: F811
    client = server_for(redis_url).client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def store(admin: redis.Redis) -> Iterator[RedisStore]:
    with RedisStore(admin, prefix=f"t-{uuid.uuid4().hex}:") as opened:
        yield opened


def _binding(key: str) -> tec.Binding:
    return tec.Binding("redis-scripts", key, "tool", "1", "sha256:0")


def _claimed(key: str) -> tuple[Checkpoint, Checkpoint]:
    """A ready record and its claim (executing, revision 2)."""
    created = tec.create_checkpoint(_binding(key), created_at=NOW)
    return created, tec.claim_execution(created, attempt_id="a-1", at=NOW).next


def _next_revision(record: Checkpoint) -> Checkpoint:
    """``record`` at the next revision, its status kept (the store checks the revision,
    not the path)."""
    raw = record.to_dict()
    raw["revision"] = record.revision + 1
    return Checkpoint.from_dict(raw)


def _snapshot(admin: redis.Redis, prefix: str) -> dict[bytes, tuple[bytes, Any]]:
    """Every key under ``prefix``, its type and its whole content."""
    client: Any = admin
    readers: dict[bytes, Callable[[bytes], Any]] = {
        b"hash": client.hgetall,
        b"zset": lambda name: client.zrange(name, 0, -1, withscores=True),
        b"string": client.get,
        b"list": lambda name: client.lrange(name, 0, -1),
    }
    found: dict[bytes, tuple[bytes, Any]] = {}
    for name in client.scan_iter(match=f"{prefix}*"):
        kind = client.type(name)
        found[name] = (kind, readers[kind](name))
    return found


def _indexed(admin: redis.Redis, prefix: str) -> dict[str, set[Status]]:
    """Under which statuses' indexes each key sits."""
    client: Any = admin
    found: dict[str, set[Status]] = {}
    for status in Status:
        for member in client.zrange(f"{prefix}idx:{status.value}", 0, -1):
            found.setdefault(member.decode(), set()).add(status)
    return found


FOREIGN: dict[str, Callable[[redis.Redis, str], object]] = {
    "string": lambda admin, name: admin.set(name, SECRET),
    "list": lambda admin, name: admin.rpush(name, SECRET),
    "hash": lambda admin, name: admin.hset(name, "field", SECRET),
}


@pytest.mark.parametrize("foreign", sorted(FOREIGN))
@pytest.mark.parametrize(
    "case",
    [
        "create: its status's index",
        "swap to another status: the new status's index",
        "swap to another status: the old status's index",
        "swap keeping its status: its index",
    ],
)
def test_a_foreign_value_at_an_index_a_write_touches_fails_it_and_changes_nothing(
    admin: redis.Redis, store: RedisStore, case: str, foreign: str
) -> None:
    created, claim = _claimed("k")
    write: Callable[[], bool]
    if case.startswith("create"):
        index, write = Status.READY, functools.partial(store.create_if_absent, "k", created)
    else:
        assert store.create_if_absent("k", created)
        assert store.compare_and_swap("k", 1, claim)
        kept = "keeping" in case
        after = _next_revision(claim) if kept else _completed(claim)
        index = Status.EXECUTING if kept or "old" in case else after.status
        write = functools.partial(store.compare_and_swap, "k", 2, after)
    admin.delete(f"{store.prefix}idx:{index.value}")  # what writing a foreign value does
    FOREIGN[foreign](admin, f"{store.prefix}idx:{index.value}")
    before = _snapshot(admin, store.prefix)
    with pytest.raises(RedisCommandError) as refused:
        write()
    assert refused.value.code == "WRONGTYPE"
    assert SECRET not in str(refused.value)
    assert _snapshot(admin, store.prefix) == before


def test_the_earlier_scripts_kept_here_are_the_ones_earlier_versions_ran() -> None:
    for name, text in (("create", CREATE), ("swap", SWAP)):
        assert hashlib.sha1(text.encode()).hexdigest() == SHAS[name]


class Database:
    """One prefix written by this store and by an earlier version's scripts, side by
    side, and a MemoryStore given the same writes."""

    def __init__(self, admin: redis.Redis, store: RedisStore) -> None:
        self.admin, self.store, self.prefix = admin, store, store.prefix
        self.model = tec.MemoryStore()
        self.records: dict[str, Checkpoint] = {}

    def write(self, key: str, record: Checkpoint, *, earlier: bool) -> None:
        """Write ``record`` under ``key`` (created, or swapped from the last record
        written there) with an earlier version's scripts or this store; it must land."""
        current = self.records.get(key)
        if current is None:
            landed = (
                earlier_create(self.admin, self.prefix, key, record)
                if earlier
                else self.store.create_if_absent(key, record)
            )
            assert self.model.create_if_absent(key, record)
        else:
            revision = current.revision
            landed = (
                earlier_swap(self.admin, self.prefix, key, revision, record)
                if earlier
                else self.store.compare_and_swap(key, revision, record)
            )
            assert self.model.compare_and_swap(key, revision, record)
        assert landed
        self.records[key] = record

    def check(self) -> None:
        """Every record reads back as written, the listing of every record is the
        model's (and agrees with written_us), and each key sits in its status's index
        only."""
        for key, record in self.records.items():
            assert self.store.get(key) == record.to_dict()
        check_whole_listing(self.store, self.model)
        indexed = {key: {record.status} for key, record in self.records.items()}
        assert _indexed(self.admin, self.prefix) == indexed


def test_records_an_earlier_version_wrote_are_read_listed_and_swapped_by_this_one(
    admin: redis.Redis, store: RedisStore
) -> None:
    """A database an earlier version wrote (hashes with an ``updated_us`` field, the same
    indexes), then this version and an earlier one writing to it side by side, as in a
    rolling upgrade."""
    database, prefix = Database(admin, store), store.prefix
    records = database.records
    for number in range(4):  # an earlier version: ready, executing, delivering, uncertain
        key = f"k{number}"
        created, claim = _claimed(key)
        database.write(key, created, earlier=True)
        if number >= 1:
            database.write(key, claim, earlier=True)
        if number == 2:
            database.write(key, _completed(claim), earlier=True)
            database.write(key, _delivering(records[key]), earlier=True)
        if number == 3:
            uncertain = tec.mark_execution_uncertain(claim, attempt_id="a-1", at=NOW, reason="t")
            database.write(key, uncertain.next, earlier=True)
    database.check()
    assert all(admin.hexists(f"{prefix}rec:{key}", "updated_us") for key in records)

    # This version moves each record on, between the indexes an earlier version filled.
    claim = tec.claim_execution(records["k0"], attempt_id="a-1", at=NOW).next
    database.write("k0", claim, earlier=False)
    database.write("k1", _completed(records["k1"]), earlier=False)
    database.write("k2", _delivered(records["k2"]), earlier=False)
    database.write("k3", _next_revision(records["k3"]), earlier=False)
    database.write("k4", _claimed("k4")[0], earlier=False)
    database.check()
    assert not admin.hexists(f"{prefix}rec:k4", "updated_us")  # nothing reads it

    # An earlier version still running moves records this version wrote, and back.
    database.write("k0", _completed(records["k0"]), earlier=True)
    database.write("k0", _delivering(records["k0"]), earlier=False)
    database.write("k4", _claimed("k4")[1], earlier=True)
    database.check()

    # A stale revision, or a create where a record is, is refused by both: nothing changes.
    before = _snapshot(admin, prefix)
    stale = records["k1"]  # written already: its revision is no longer the one expected
    assert not earlier_swap(admin, prefix, "k1", stale.revision - 1, stale)
    assert not store.compare_and_swap("k1", stale.revision - 1, stale)
    again = _claimed("k1")[0]
    assert not earlier_create(admin, prefix, "k1", again)
    assert not store.create_if_absent("k1", again)
    assert _snapshot(admin, prefix) == before


def _completed(claim: Checkpoint) -> Checkpoint:
    return tec.complete_execution(claim, attempt_id="a-1", at=NOW, result={"n": 1}).next


def _delivering(completed: Checkpoint) -> Checkpoint:
    return tec.claim_delivery(completed, delivery_id="d-1", at=NOW).next


def _delivered(delivering: Checkpoint) -> Checkpoint:
    return tec.complete_delivery(delivering, delivery_id="d-1", at=NOW).next
