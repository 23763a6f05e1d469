"""Relaxed writes on PostgreSQL, proven with the server's own counters.

A compare-and-swap the host calls non-durable (``durable=False``, as the table declares a
delivery's completion and a payload's pruning) commits with ``synchronous_commit`` off for
its own transaction, unless the store was made with ``synchronous_delivered=True``; every
other write waits for the WAL flush.

The counter is ``pg_stat_wal.wal_sync`` (PostgreSQL 14+): the WAL fsyncs of every process
of the server, backends and the WAL writer alike. Swaps sent one after another from one
connection share no fsync: each durable commit is inserted after the previous one was
acknowledged, and is acknowledged only after an fsync that started after it was inserted,
so N durable swaps add at least N. A relaxed swap waits for no fsync: the WAL writer
flushes the WAL behind it at most once per ``wal_writer_delay`` (200 ms), so N relaxed
swaps in a row add a handful. These tests run on a server of their own, so that no other
test's backend reports its counters into theirs, and each measurement makes the store's
backend report its pending counters first (``pg_stat_force_next_flush``, PostgreSQL 15+,
acted on before the backend's next ReadyForQuery).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg import pq, sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from postgres_server import PostgresServer, start_or_fail
from test_postgres_store import (
    NOW,
    ONE_STATEMENT,
    _round_trips,
    _sent,
    _trace_lines,
    admin,
    created_record,
    fresh_table,
)
from tool_execution_checkpoint import (
    Checkpoint,
    CheckpointError,
    ErrorCode,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    prune_result,
    release_delivery,
)
from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore, open_url
from tool_execution_checkpoint.stores.postgres.exchanges import Statement, swapping
from tool_execution_checkpoint.table import TABLE
from tool_execution_checkpoint.testing.conformance import leaks
from tool_execution_checkpoint.transitions import Transition

N = 50
"""Swaps per measurement."""
HANDFUL = N // 5
"""The most WAL fsyncs that N relaxed swaps in a row may add (the WAL writer's rounds)."""
RELAX = "set_config('synchronous_commit', 'off', true)"

Swap = tuple[str, Transition]

DURABLE = {
    name: TABLE.transitions[step].durable
    for name, step in (
        ("claim", "claim_delivery"),
        ("complete", "complete_delivery"),
        ("prune", "prune_result"),
    )
}
"""Each measured kind of swap's durability, as the table declares it and a host passes it."""


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[PostgresServer]:
    """A durable server for this module alone: nothing else reports WAL counters to it."""
    server = start_or_fail()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Flushes:
    """What pg_stat_wal counted during a measurement."""

    syncs: int
    writes: int


def _wal_counters(server: PostgresServer) -> tuple[int, int]:
    with admin(server) as connection:
        row = connection.execute("SELECT wal_sync, wal_write FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _report(pool: ConnectionPool[Any]) -> None:
    """Make the pool's one connection's backend report its pending counters now."""
    with pool.connection() as connection:
        connection.execute("SELECT pg_stat_force_next_flush()")


async def _areport(pool: AsyncConnectionPool[Any]) -> None:
    async with pool.connection() as connection:
        await connection.execute("SELECT pg_stat_force_next_flush()")


def _difference(before: tuple[int, int], after: tuple[int, int]) -> Flushes:
    return Flushes(syncs=after[0] - before[0], writes=after[1] - before[1])


def _flushes(
    server: PostgresServer, pool: ConnectionPool[Any], writes: Callable[[], None]
) -> Flushes:
    _report(pool)  # what the setup wrote is counted before, not during
    before = _wal_counters(server)
    writes()
    _report(pool)
    return _difference(before, _wal_counters(server))


async def _aflushes(
    server: PostgresServer, pool: AsyncConnectionPool[Any], writes: Callable[[], Awaitable[None]]
) -> Flushes:
    await _areport(pool)
    before = _wal_counters(server)
    await writes()
    await _areport(pool)
    return _difference(before, _wal_counters(server))


def _kwargs(prepared: bool) -> dict[str, Any]:
    """A connection's options: psycopg's own prepare threshold (as the store's own pool
    has), or never preparing, so that every Parse message shows its statement."""
    return {"autocommit": True} if prepared else {"autocommit": True, "prepare_threshold": None}


def _one_connection(server: PostgresServer, *, prepared: bool = True) -> ConnectionPool[Any]:
    pool = ConnectionPool(server.url, min_size=1, max_size=1, kwargs=_kwargs(prepared), open=False)
    pool.open(wait=True)
    return pool


async def _one_async_connection(
    server: PostgresServer, *, prepared: bool = True
) -> AsyncConnectionPool[Any]:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        server.url, min_size=1, max_size=1, kwargs=_kwargs(prepared), open=False
    )
    await pool.open(wait=True)
    return pool


def _completed(call_id: str) -> tuple[str, Checkpoint, list[Transition]]:
    """A key, its new record and the durable swaps that take that record to completed."""
    key, created = created_record(call_id)
    claim = claim_execution(created, attempt_id="a", at=NOW)
    done = complete_execution(claim.next, attempt_id="a", at=NOW, result={"n": call_id})
    return key, created, [claim, done]


def _set_up(store: PostgresStore, call_id: str) -> tuple[str, Checkpoint]:
    key, created, steps = _completed(call_id)
    assert store.create_if_absent(key, created)
    for step in steps:
        assert store.compare_and_swap(key, step.expected_revision, step.next)
    return key, steps[-1].next


async def _aset_up(store: AsyncPostgresStore, call_id: str) -> tuple[str, Checkpoint]:
    key, created, steps = _completed(call_id)
    assert await store.create_if_absent(key, created)
    for step in steps:
        assert await store.compare_and_swap(key, step.expected_revision, step.next)
    return key, steps[-1].next


def _claims(records: list[tuple[str, Checkpoint]]) -> list[Swap]:
    return [(key, claim_delivery(record, delivery_id="d", at=NOW)) for key, record in records]


def _completions(claims: list[Swap]) -> list[Swap]:
    return [(key, complete_delivery(t.next, delivery_id="d", at=NOW)) for key, t in claims]


def _prunes(completions: list[Swap]) -> list[Swap]:
    return [(key, prune_result(t.next, at=NOW)) for key, t in completions]


def _swapper(store: PostgresStore, swaps: list[Swap], *, durable: bool) -> Callable[[], None]:
    def swap_all() -> None:
        for key, step in swaps:
            assert store.compare_and_swap(key, step.expected_revision, step.next, durable=durable)

    return swap_all


def _aswapper(
    store: AsyncPostgresStore, swaps: list[Swap], *, durable: bool
) -> Callable[[], Awaitable[None]]:
    async def swap_all() -> None:
        for key, step in swaps:
            swap = store.compare_and_swap(key, step.expected_revision, step.next, durable=durable)
            assert await swap

    return swap_all


def _measure_sync(
    server: PostgresServer, *, synchronous_delivered: bool, durable: bool | None = None
) -> dict[str, Flushes]:
    """The fsyncs of N delivery claims, then N completions, then N prunes, in a row, each
    swap as durable as the table declares it (or as ``durable`` says, for all)."""
    pool = _one_connection(server)
    try:
        store = PostgresStore(
            pool, table=fresh_table(), synchronous_delivered=synchronous_delivered
        )
        records = [_set_up(store, f"call-{index}") for index in range(N)]
        claims = _claims(records)
        completions = _completions(claims)
        prunes = _prunes(completions)
        measured = {
            name: _flushes(server, pool, _swapper(store, swaps, durable=_durable(name, durable)))
            for name, swaps in (("claim", claims), ("complete", completions), ("prune", prunes))
        }
        for key, transition in prunes:  # each swap landed, exactly as written
            assert store.get(key) == transition.next.to_dict()
        return measured
    finally:
        pool.close()


def _durable(name: str, durable: bool | None) -> bool:
    return DURABLE[name] if durable is None else durable


def _measure_async(
    server: PostgresServer, *, synchronous_delivered: bool, durable: bool | None = None
) -> dict[str, Flushes]:
    async def scenario() -> dict[str, Flushes]:
        pool = await _one_async_connection(server)
        try:
            store = AsyncPostgresStore(
                pool, table=fresh_table(), synchronous_delivered=synchronous_delivered
            )
            records = [await _aset_up(store, f"call-{index}") for index in range(N)]
            claims = _claims(records)
            completions = _completions(claims)
            prunes = _prunes(completions)
            measured = {}
            for name, swaps in (("claim", claims), ("complete", completions), ("prune", prunes)):
                swap_all = _aswapper(store, swaps, durable=_durable(name, durable))
                measured[name] = await _aflushes(server, pool, swap_all)
            for key, transition in prunes:
                assert await store.get(key) == transition.next.to_dict()
            return measured
        finally:
            await pool.close()

    return asyncio.run(scenario())


MEASURES = {"sync": _measure_sync, "async": _measure_async}


def test_the_server_is_durable_and_counts_wal_fsyncs(quiet_server: PostgresServer) -> None:
    with admin(quiet_server) as connection:
        settings = dict(
            connection.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'wal_sync_method', 'server_version_num')"
            ).fetchall()
        )
    assert settings["fsync"] == "on"
    assert settings["synchronous_commit"] == "on"
    assert settings["wal_sync_method"] in ("fdatasync", "fsync", "fsync_writethrough")
    assert int(settings["server_version_num"]) >= 150000  # pg_stat_force_next_flush


def test_the_delivered_mark_and_the_pruning_are_the_only_non_durable_writes() -> None:
    """What a host tells the store to relax is the table's: the delivered mark and the
    pruning, today; every composed step is durable."""
    relaxed = {name for name, rule in TABLE.transitions.items() if not rule.durable}
    assert relaxed == {"complete_delivery", "prune_result"}
    assert DURABLE == {"claim": True, "complete": False, "prune": False}
    assert all(step.durable for step in TABLE.composed.values())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_swap_is_relaxed_by_its_durability_not_by_its_status(
    quiet_server: PostgresServer, kind: str
) -> None:
    """A delivered mark the host calls durable (the hand-back step lands in delivered
    durably) waits for the flush; a claim it called non-durable would not."""
    relaxed_claims = MEASURES[kind](quiet_server, synchronous_delivered=False, durable=False)
    assert relaxed_claims["claim"].syncs <= HANDFUL, relaxed_claims
    durable_marks = MEASURES[kind](quiet_server, synchronous_delivered=False, durable=True)
    assert durable_marks["complete"].syncs >= N, durable_marks


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_delivered_mark_does_not_wait_for_a_wal_flush_and_a_claim_does(
    quiet_server: PostgresServer, kind: str
) -> None:
    measured = MEASURES[kind](quiet_server, synchronous_delivered=False)
    print(f"{kind}, {N} swaps each, synchronous_delivered=False: {measured}")
    assert measured["claim"].syncs >= N, measured  # durable: one fsync each, at least
    assert measured["complete"].syncs <= HANDFUL, measured  # the WAL writer's, no more
    assert measured["prune"].syncs <= HANDFUL, measured


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_synchronous_delivered_makes_every_write_wait_for_the_flush(
    quiet_server: PostgresServer, kind: str
) -> None:
    measured = MEASURES[kind](quiet_server, synchronous_delivered=True)
    print(f"{kind}, {N} swaps each, synchronous_delivered=True: {measured}")
    for name in ("claim", "complete", "prune"):
        assert measured[name].syncs >= N, measured


def test_the_relaxed_setting_ends_with_its_transaction(quiet_server: PostgresServer) -> None:
    """A relaxed swap, then a durable write, over and over on the same connection: every
    durable write still waits for an fsync of its own, and the connection's setting is the
    server's after each relaxed swap."""
    pool = _one_connection(quiet_server)
    try:
        store = PostgresStore(pool, table=fresh_table())
        records = [_set_up(store, f"call-{index}") for index in range(N)]
        claims = _claims(records)
        _swapper(store, claims, durable=True)()
        completions = _completions(claims)
        fresh = [created_record(f"new-{index}") for index in range(N)]

        def alternate() -> None:
            for (key, done), (new_key, created) in zip(completions, fresh, strict=True):
                assert store.compare_and_swap(key, done.expected_revision, done.next, durable=False)
                assert store.create_if_absent(new_key, created)

        measured = _flushes(quiet_server, pool, alternate)
        print(f"{N} relaxed swaps, each followed by a durable create: {measured}")
        assert measured.syncs >= N, measured
        assert measured.syncs <= N + HANDFUL, measured

        with pool.connection() as connection:
            row = connection.execute("SHOW synchronous_commit").fetchone()
        assert row == ("on",)
    finally:
        pool.close()


def test_async_relaxed_setting_ends_with_its_transaction(quiet_server: PostgresServer) -> None:
    async def scenario() -> tuple[Flushes, tuple[Any, ...] | None]:
        pool = await _one_async_connection(quiet_server)
        try:
            store = AsyncPostgresStore(pool, table=fresh_table())
            records = [await _aset_up(store, f"call-{index}") for index in range(N)]
            claims = _claims(records)
            await _aswapper(store, claims, durable=True)()
            completions = _completions(claims)
            fresh = [created_record(f"new-{index}") for index in range(N)]

            async def alternate() -> None:
                for (key, done), (new_key, created) in zip(completions, fresh, strict=True):
                    swap = store.compare_and_swap(
                        key, done.expected_revision, done.next, durable=False
                    )
                    assert await swap
                    assert await store.create_if_absent(new_key, created)

            measured = await _aflushes(quiet_server, pool, alternate)
            async with pool.connection() as connection:
                cursor = await connection.execute("SHOW synchronous_commit")
                return measured, await cursor.fetchone()
        finally:
            await pool.close()

    measured, setting = asyncio.run(scenario())
    print(f"async, {N} relaxed swaps, each followed by a durable create: {measured}")
    assert N <= measured.syncs <= N + HANDFUL, measured
    assert setting == ("on",)


# --- still one statement, one round trip, and a correct compare-and-swap -----------------


def _answer(answers: list[bool], write: Callable[[], bool]) -> None:
    answers.append(write())


def _traced_parses(server: PostgresServer, *, synchronous_delivered: bool) -> dict[str, str]:
    """The Parse message of each write, checked to be one statement in one round trip."""
    pool = _one_connection(server, prepared=False)
    try:
        store = PostgresStore(
            pool, table=fresh_table(), synchronous_delivered=synchronous_delivered
        )
        key, completed = _set_up(store, "traced")
        claim = claim_delivery(completed, delivery_id="d", at=NOW)
        done = complete_delivery(claim.next, delivery_id="d", at=NOW)
        pruned = prune_result(done.next, at=NOW)
        writes: list[tuple[str, Callable[[], bool], bool]] = [
            ("create", lambda: store.create_if_absent(*created_record("another")), True),
            (
                "claim",
                lambda: store.compare_and_swap(key, claim.expected_revision, claim.next),
                True,
            ),
            (
                "complete",
                lambda: store.compare_and_swap(
                    key, done.expected_revision, done.next, durable=False
                ),
                True,
            ),
            (
                "prune",
                lambda: store.compare_and_swap(
                    key, pruned.expected_revision, pruned.next, durable=False
                ),
                True,
            ),
            (
                "stale",
                lambda: store.compare_and_swap(
                    key, done.expected_revision, done.next, durable=False
                ),
                False,
            ),
        ]
        connection = pool.getconn()
        pool.putconn(connection)
        parses = {}
        for name, write, wins in writes:
            answers: list[bool] = []
            messages = _trace_lines(connection.pgconn, functools.partial(_answer, answers, write))
            assert answers == [wins], name
            assert _round_trips(messages) == 1
            assert _sent(messages) == ONE_STATEMENT
            [parse] = [m[3] for m in messages if m[0] == "F" and m[2] == "Parse"]
            assert parse.startswith(' "" ')  # unnamed: this pool never prepares
            assert "BEGIN" not in parse
            assert "COMMIT" not in parse
            parses[name] = parse
        assert store.get(key) == pruned.next.to_dict()
        return parses
    finally:
        pool.close()


@pytest.mark.parametrize("synchronous_delivered", [False, True])
def test_a_relaxed_swap_is_one_statement_in_one_round_trip(
    quiet_server: PostgresServer, synchronous_delivered: bool
) -> None:
    """A swap called non-durable carries the setting in its UPDATE itself; every other
    write is the plain statement, and with synchronous_delivered=True the non-durable
    swaps are too."""
    parses = _traced_parses(quiet_server, synchronous_delivered=synchronous_delivered)
    relaxed = {name for name, parse in parses.items() if RELAX in parse}
    assert relaxed == (set() if synchronous_delivered else {"complete", "prune", "stale"})
    for name in ("claim", "complete", "prune"):
        assert parses[name].startswith(' "" "UPDATE ')
        assert "WHERE key = $4 AND revision = $5" in parses[name]


def test_a_relaxed_swap_is_still_a_compare_and_swap(quiet_server: PostgresServer) -> None:
    with PostgresStore(quiet_server.url, table=fresh_table(), max_size=2) as store:
        key, completed = _set_up(store, "cas")
        claim = claim_delivery(completed, delivery_id="d", at=NOW)
        assert store.compare_and_swap(key, claim.expected_revision, claim.next)
        done = complete_delivery(claim.next, delivery_id="d", at=NOW)
        # Another writer moved the record on: the relaxed swap from the old revision loses.
        released = release_delivery(claim.next, delivery_id="d", at=NOW)
        with PostgresStore(quiet_server.url, table=store._sql.table, max_size=1) as other:
            assert other.compare_and_swap(key, released.expected_revision, released.next)
        assert not store.compare_and_swap(key, done.expected_revision, done.next, durable=False)
        assert store.get(key) == released.next.to_dict()
        # Claimed again, it wins once, reads back exactly, and loses from then on.
        again = claim_delivery(released.next, delivery_id="e", at=NOW)
        assert store.compare_and_swap(key, again.expected_revision, again.next)
        done = complete_delivery(again.next, delivery_id="e", at=NOW)
        assert store.compare_and_swap(key, done.expected_revision, done.next, durable=False)
        assert store.get(key) == done.next.to_dict()
        assert not store.compare_and_swap(key, done.expected_revision, done.next, durable=False)
        pruned = prune_result(done.next, at=NOW)
        assert store.compare_and_swap(key, pruned.expected_revision, pruned.next, durable=False)
        assert not store.compare_and_swap(key, pruned.expected_revision, pruned.next, durable=False)
        assert store.get(key) == pruned.next.to_dict()
        # No row under a key: nothing swapped, nothing made.
        absent, _ = created_record("absent")
        assert not store.compare_and_swap(absent, done.expected_revision, done.next, durable=False)
        assert store.get(absent) is None
        with admin(quiet_server) as connection:
            query = sql.SQL("SELECT revision, status FROM {} WHERE key = %s")
            row = connection.execute(
                query.format(sql.Identifier(store._sql.table)), (key,)
            ).fetchone()
        assert row == (pruned.next.revision, "delivered")


def test_an_async_relaxed_swap_is_still_a_compare_and_swap(
    quiet_server: PostgresServer,
) -> None:
    async def scenario() -> None:
        async with AsyncPostgresStore(quiet_server.url, table=fresh_table()) as store:
            key, completed = await _aset_up(store, "cas")
            claim = claim_delivery(completed, delivery_id="d", at=NOW)
            assert await store.compare_and_swap(key, claim.expected_revision, claim.next)
            done = complete_delivery(claim.next, delivery_id="d", at=NOW)
            assert await store.compare_and_swap(
                key, done.expected_revision, done.next, durable=False
            )
            assert not await store.compare_and_swap(
                key, done.expected_revision, done.next, durable=False
            )
            assert await store.get(key) == done.next.to_dict()
            pruned = prune_result(done.next, at=NOW)
            assert await store.compare_and_swap(
                key, pruned.expected_revision, pruned.next, durable=False
            )
            assert await store.get(key) == pruned.next.to_dict()

    asyncio.run(scenario())


def test_the_async_store_sends_the_same_statements(quiet_server: PostgresServer) -> None:
    """The asyncio store's delivery claim and completion are the sync store's statements,
    byte for byte, in one round trip each."""
    table = fresh_table()

    def swaps(record: Checkpoint) -> list[tuple[Transition, bool]]:
        """The delivery claim (durable) and its completion (not), as a host sends them."""
        claim = claim_delivery(record, delivery_id="d", at=NOW)
        done = complete_delivery(claim.next, delivery_id="d", at=NOW)
        return [(claim, DURABLE["claim"]), (done, DURABLE["complete"])]

    async def scenario() -> list[list[str]]:
        pool = await _one_async_connection(quiet_server, prepared=False)
        try:
            store = AsyncPostgresStore(pool, table=table)
            key, completed = await _aset_up(store, "async")
            connection = await pool.getconn()
            await pool.putconn(connection)
            with tempfile.TemporaryFile() as trace:
                connection.pgconn.trace(trace.fileno())
                connection.pgconn.set_trace_flags(
                    pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE
                )
                for step, durable in swaps(completed):
                    swap = store.compare_and_swap(
                        key, step.expected_revision, step.next, durable=durable
                    )
                    assert await swap
                connection.pgconn.untrace()
                trace.seek(0)
                lines = trace.read().decode("utf-8", "replace").splitlines()
            return [fields for fields in (line.split("\t") for line in lines) if fields[0] in "FB"]
        finally:
            await pool.close()

    async_messages = asyncio.run(scenario())
    pool = _one_connection(quiet_server, prepared=False)
    try:
        store = PostgresStore(pool, table=table)
        key, completed = _set_up(store, "sync")
        connection = pool.getconn()
        pool.putconn(connection)

        def swap_both() -> None:
            for step, durable in swaps(completed):
                swap = store.compare_and_swap
                assert swap(key, step.expected_revision, step.next, durable=durable)

        sync_messages = _trace_lines(connection.pgconn, swap_both)
    finally:
        pool.close()
    for messages in (async_messages, sync_messages):
        assert _round_trips(messages) == 2
        assert _sent(messages) == ONE_STATEMENT * 2

    def parses(messages: list[list[str]]) -> list[str]:
        return [fields[3] for fields in messages if fields[0] == "F" and fields[2] == "Parse"]

    assert parses(async_messages) == parses(sync_messages)
    claim_parse, done_parse = parses(sync_messages)
    assert RELAX not in claim_parse
    assert RELAX in done_parse


# --- the option ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [PostgresStore, AsyncPostgresStore])
def test_the_option_defaults_to_relaxed_delivered_marks(kind: type[Any]) -> None:
    parameter = inspect.signature(kind).parameters["synchronous_delivered"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is False


BAD_VALUE = "bad-value-7f3c"


@pytest.mark.parametrize("value", [BAD_VALUE, 1, 0, None, "true", b"on"])
def test_a_bad_value_is_refused_naming_the_option_not_the_value(
    quiet_server: PostgresServer, value: Any
) -> None:
    password = quiet_server.app_password
    openers: list[Callable[..., Any]] = [
        lambda: PostgresStore(quiet_server.url, synchronous_delivered=value),
        lambda: AsyncPostgresStore(quiet_server.url, synchronous_delivered=value),
        lambda: PostgresStore.from_url(quiet_server.url, synchronous_delivered=value),
        lambda: AsyncPostgresStore.from_url(quiet_server.url, synchronous_delivered=value),
        lambda: open_url(quiet_server.url, synchronous_delivered=value),
    ]
    for opener in openers:
        with pytest.raises(CheckpointError) as caught:
            opener()
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == "synchronous_delivered"
        assert leaks(caught.value, password) is None
        assert leaks(caught.value, BAD_VALUE) is None


def test_from_url_and_open_url_take_the_option(quiet_server: PostgresServer) -> None:
    for synchronous_delivered in (False, True):
        for opened in (
            PostgresStore.from_url(quiet_server.url, synchronous_delivered=synchronous_delivered),
            open_url(quiet_server.url, synchronous_delivered=synchronous_delivered),
        ):
            with opened as store:
                assert (RELAX.encode() in _swap_query(store)) is not synchronous_delivered
        async_store = AsyncPostgresStore.from_url(
            quiet_server.url, synchronous_delivered=synchronous_delivered
        )
        assert (RELAX.encode() in _swap_query(async_store)) is not synchronous_delivered


def _swap_query(store: PostgresStore | AsyncPostgresStore) -> bytes:
    """The statement a compare-and-swap would send (its exchange's first request)."""
    request = next(swapping(store._sql, *_relaxed_swap(), relax=store._relax))
    assert isinstance(request, Statement)
    return request.query


def _relaxed_swap() -> tuple[str, int, Checkpoint]:
    key, _, steps = _completed("option")
    claim = claim_delivery(steps[-1].next, delivery_id="d", at=NOW)
    done = complete_delivery(claim.next, delivery_id="d", at=NOW)
    return key, done.expected_revision, done.next
