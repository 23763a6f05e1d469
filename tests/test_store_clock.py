"""Ages by the store's clock (issue 34). A record's updatedAt comes from its writer's
clock, which may be hours or days off; PostgreSQL and Redis (one server or a cluster)
note the time of every write on their own clock, and ``list --older-than``, ``prune
--retention``, the ages the command line prints and reconcile's minimum age measure on
it. SQLite and MemoryStore, on one host, keep that host's clock: the records' updatedAt.

Each test writes as a worker whose clock is off (2 hours ahead or 30 days behind), lets
time pass on the store's clock by moving the time the store noted for the write back by
as much (what waiting would do), and runs the command line. On 9247c2b these fail:
listings and pruning compared the writer's updatedAt with the operator's clock (an hour
later, the claim of a worker 2 hours ahead was still not an hour old; a delivered record
of a host 30 days behind was pruned at once), show and list printed the writer's age,
and reconcile acted on a claim however young.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from postgres_server import postgres_server, postgres_url  # noqa: F401
from redis_server import redis_cluster_url, redis_url  # noqa: F401
from tool_execution_checkpoint import (
    Binding,
    Listing,
    SQLiteStore,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    cli,
    complete_delivery,
    complete_execution,
    create_checkpoint,
)
from tool_execution_checkpoint.records import Checkpoint
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.transitions import Transition
from tool_execution_checkpoint.validation import timestamp_microseconds as _us

HOUR = 3_600
DAY = 86_400
KINDS = ["postgres", "redis", "redis-cluster"]


@dataclass
class Target:
    """A store of one kind, its URL and options for the command line, and a way to let
    time pass on its clock for one record."""

    store: Any
    url: str
    where: list[str]
    backdate: Callable[[str, Status, int], None]
    """Move the time the store noted for the key's last write back by so many seconds."""


def _postgres(url: str) -> Iterator[Target]:
    table = f"t_{uuid.uuid4().hex}"
    store = PostgresStore(url, table=table, max_size=2)

    def backdate(key: str, status: Status, seconds: int) -> None:
        del status
        statement = sql.SQL("UPDATE {} SET updated_us = updated_us - %s WHERE key = %s")
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(statement.format(sql.Identifier(table)), (seconds * 1_000_000, key))

    yield Target(store, url, ["--table", table], backdate)
    store.close()


def _redis(url: str) -> Iterator[Target]:
    prefix = f"clock-{uuid.uuid4().hex}:"
    store = RedisStore.from_url(url, prefix=prefix)

    def backdate(key: str, status: Status, seconds: int) -> None:
        index = store._layout.index_key(key, status)
        store.client.zincrby(index, -seconds * 1_000_000, key)

    yield Target(store, url, ["--prefix", prefix], backdate)
    store.close()


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "postgres":
        yield from _postgres(request.getfixturevalue("postgres_url"))
    elif request.param == "redis":
        yield from _redis(request.getfixturevalue("redis_url"))
    else:
        yield from _redis(request.getfixturevalue("redis_cluster_url"))


def _binding(name: str) -> Binding:
    return Binding("clock", f"{name}-{uuid.uuid4().hex}", "send_email", "1", "sha256:0")


def _stamp(skew: timedelta) -> str:
    """Now on a writer's clock that is ``skew`` off."""
    return (datetime.now(UTC) + skew).isoformat()


def _claim(store: Any, name: str, skew: timedelta) -> tuple[str, Checkpoint]:
    """A worker whose clock is ``skew`` off creates and claims a call, then dies."""
    binding, at = _binding(name), _stamp(skew)
    key, record = checkpoint_key(binding), create_checkpoint(binding, created_at=at)
    assert store.create_if_absent(key, record)
    claim = claim_execution(record, attempt_id="dead-attempt", at=at)
    assert store.compare_and_swap(key, claim.expected_revision, claim.next)
    return key, claim.next


def _deliver(store: Any, name: str, skew: timedelta) -> str:
    """A host whose clock is ``skew`` off runs a call and delivers its result."""
    key, record = _claim(store, name, skew)
    at = _stamp(skew)
    steps: list[Callable[[Checkpoint], Transition]] = [
        lambda r: complete_execution(r, attempt_id="dead-attempt", at=at, result={"id": 7}),
        lambda r: claim_delivery(r, delivery_id="d", at=at),
        lambda r: complete_delivery(r, delivery_id="d", at=at),
    ]
    for step in steps:
        transition = step(record)
        assert store.compare_and_swap(key, transition.expected_revision, transition.next)
        record = transition.next
    return key


def _json(capsys: pytest.CaptureFixture[str], arguments: list[str]) -> Any:
    assert cli.main(arguments) == 0
    return json.loads(capsys.readouterr().out)


def test_the_claim_of_a_worker_two_hours_ahead_is_listed_an_hour_later(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list --older-than 1h`` shows the stuck claim once it is an hour old on the
    store's clock, with that age; its writer's clock said it was claimed in the future."""
    key, _ = _claim(target.store, "ahead", timedelta(hours=2))
    stuck = ["list", target.url, "--status", "executing", "--older-than", "1h", "--format", "json"]
    assert _json(capsys, [*stuck, *target.where]) == []  # claimed just now
    target.backdate(key, Status.EXECUTING, HOUR + 60)  # an hour and a minute later
    rows = _json(capsys, [*stuck, *target.where])
    assert [row["key"] for row in rows] == [key]
    assert HOUR + 60 <= rows[0]["age_seconds"] < HOUR + 120
    shown = _json(capsys, ["show", target.url, key, "--format", "json", *target.where])
    assert HOUR + 60 <= shown["ageSeconds"] < HOUR + 120


def test_the_delivered_record_of_a_host_thirty_days_behind_is_kept_for_the_retention(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prune --retention 7d`` keeps the payload of a record delivered just now, however
    old its host's clock made it look, and drops it once it is 7 days old on the store's
    clock."""
    key = _deliver(target.store, "behind", timedelta(days=-30))
    prune = ["prune", target.url, "--retention", "7d", *target.where]
    assert cli.main(prune) == 0
    kept = target.store.get(key)
    assert kept is not None
    assert kept["result"]["payload"] == {"id": 7}, "a payload delivered just now was pruned"
    target.backdate(key, Status.DELIVERED, 8 * DAY)
    assert cli.main(prune) == 0
    pruned = target.store.get(key)
    assert pruned is not None
    assert pruned["status"] == "delivered"
    assert pruned["result"]["payload"] is None
    capsys.readouterr()


def test_reconcile_refuses_a_claim_younger_than_the_minimum_age_on_the_stores_clock(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker 30 days behind claims just now: by its clock the claim is a month old,
    by the store's a second. ``reconcile`` refuses it (exit 9, nothing written, dry run
    too) until ``--min-age 0`` says the worker is known to be gone."""
    key, claim = _claim(target.store, "young", timedelta(days=-30))
    reconcile = ["reconcile", target.url, key, "--revision", "2", *target.where]
    for dry_run in ([], ["--dry-run"]):
        code = cli.main([*reconcile, "--mark-uncertain", "worker died", *dry_run])
        assert code == 9, "a claim a second old on the store's clock was reconciled"
        assert code == cli.Exit.TOO_YOUNG
        error = capsys.readouterr().err
        assert "minimum age of 900 s" in error
        assert key not in error
        assert claim.binding.call_id not in error
    assert target.store.get(key) == claim.to_dict()
    assert cli.main([*reconcile, "--mark-uncertain", "worker died", "--min-age", "0"]) == 0
    stored = target.store.get(key)
    assert stored is not None
    assert stored["status"] == "uncertain"
    capsys.readouterr()


def test_reconcile_settles_a_claim_older_than_the_minimum_age_on_the_stores_clock(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker 2 hours ahead claims: by its clock the claim is younger than nothing at
    all; 16 minutes later on the store's clock, reconcile settles it by default, and a
    minimum age of one's own (an hour) still refuses it."""
    key, _ = _claim(target.store, "old", timedelta(hours=2))
    target.backdate(key, Status.EXECUTING, 16 * 60)
    reconcile = ["reconcile", target.url, key, "--revision", "2", *target.where]
    assert cli.main([*reconcile, "--complete-error", "Unknown", "--min-age", "1h"]) == 9
    assert cli.main([*reconcile, "--complete-error", "Unknown"]) == 0
    stored = target.store.get(key)
    assert stored is not None
    assert stored["status"] == "completed"
    capsys.readouterr()


# --- upgrades: what an earlier version wrote ---------------------------------------------


def test_a_postgres_row_of_an_earlier_version_is_aged_by_its_stamp_until_written_again(
    postgres_url: str,  # noqa: F811
) -> None:
    """The table's layout is unchanged: an earlier version stored the record's updatedAt
    in updated_us, and the store reads that row as written then (nothing to migrate).
    The next write notes the server's time."""
    table = f"t_{uuid.uuid4().hex}"
    with PostgresStore(postgres_url, table=table) as store:
        assert store.list_records(Listing([Status.READY])) == []  # the table is made
        binding = _binding("earlier")
        key, record = (
            checkpoint_key(binding),
            create_checkpoint(binding, created_at=_stamp(-timedelta(days=3))),
        )
        stamped = record.updated_at
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(  # what 9247c2b's create_if_absent sent
                sql.SQL(
                    "INSERT INTO {} (key, revision, status, updated_us, record) "
                    "VALUES (%s, %s, %s, %s, %s)"
                ).format(sql.Identifier(table)),
                (key, 1, "ready", _us(stamped), record.to_json()),
            )
        assert store.written_us(key) == _us(stamped)
        two_days_ago = store.clock_us() - 2 * DAY * 1_000_000
        assert [
            line.key
            for line in store.list_records(Listing([Status.READY], written_before_us=two_days_ago))
        ] == [key]
        claim = claim_execution(record, attempt_id="a", at=stamped)
        before = store.clock_us()
        assert store.compare_and_swap(key, 1, claim.next)
        written = store.written_us(key)
        assert written is not None
        assert before <= written <= store.clock_us()


def test_a_redis_key_of_an_earlier_version_is_aged_by_its_stamp_until_written_again(
    redis_url: str,  # noqa: F811
) -> None:
    """The keyspace's layout is unchanged: an earlier version scored the index by the
    record's updatedAt, and the store reads that score as the time of the write. The
    next write scores the key with the server's TIME."""
    prefix = f"clock-{uuid.uuid4().hex}:"
    with RedisStore.from_url(redis_url, prefix=prefix) as store:
        binding = _binding("earlier")
        key, record = (
            checkpoint_key(binding),
            create_checkpoint(binding, created_at=_stamp(-timedelta(days=3))),
        )
        stamped = _us(record.updated_at)
        client = store.client
        client.hset(  # what 9247c2b's create script wrote
            f"{prefix}rec:{key}",
            mapping={
                "revision": "1",
                "status": "ready",
                "updated_us": str(stamped),
                "record": record.to_json(),
            },
        )
        client.zadd(f"{prefix}idx:ready", {key: stamped})
        assert store.written_us(key) == stamped
        two_days_ago = store.clock_us() - 2 * DAY * 1_000_000
        assert [
            line.key
            for line in store.list_records(Listing([Status.READY], written_before_us=two_days_ago))
        ] == [key]
        claim = claim_execution(record, attempt_id="a", at=record.updated_at)
        before = store.clock_us()
        assert store.compare_and_swap(key, 1, claim.next)
        written = store.written_us(key)
        assert written is not None
        assert before <= written <= store.clock_us()
        assert store.list_records(Listing([Status.EXECUTING], written_before_us=two_days_ago)) == []


# --- one host: SQLite keeps the host's clock ---------------------------------------------


def test_sqlite_ages_records_by_their_updated_at_on_the_hosts_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every process writing a SQLite file shares its host's clock, so the store takes
    each record's updatedAt as the time of its write, and its clock is that host's."""
    store = SQLiteStore(tmp_path / "one-host.db")
    key, claim = _claim(store, "one-host", timedelta(hours=-2))
    assert store.written_us(key) == _us(claim.updated_at)
    store.close()
    url = f"sqlite://{tmp_path / 'one-host.db'}"
    rows = _json(capsys, ["list", url, "--older-than", "1h", "--format", "json"])
    assert [row["key"] for row in rows] == [key]
    assert 2 * HOUR <= rows[0]["age_seconds"] < 2 * HOUR + 60


def test_a_cluster_store_s_clock_is_its_earliest_masters(redis_cluster_url: str) -> None:  # noqa: F811
    """On a cluster each record's time is its own master's; the store's clock is the
    earliest master's, so no record is taken for older than its own master makes it."""
    with RedisStore.from_url(redis_cluster_url, prefix=f"clock-{uuid.uuid4().hex}:") as store:
        before = store.clock_us()
        key, _ = _claim(store, "sharded", timedelta(0))
        written = store.written_us(key)
        assert written is not None
        assert before <= written <= store.clock_us() + 1_000_000
        now = store.clock_us()
        assert store.cluster
        cluster: Any = store.client  # a RedisCluster, whose get_primaries is untyped
        times = [cluster.get_redis_connection(node).time() for node in cluster.get_primaries()]
        assert len(times) == 3
        assert now <= min(seconds * 1_000_000 + micros for seconds, micros in times)
