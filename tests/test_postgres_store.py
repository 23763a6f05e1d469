"""PostgresStore and AsyncPostgresStore against a real PostgreSQL server on loopback.

The server is started once per session by ``postgres_server`` (tests/postgres_server.py);
the tests fail, never skip, when it cannot start. Each store gets a fresh table, so no
two examples share state.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import json
import math
import os
import re
import resource
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import pq, sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from faults import cancelled_while_returning
from postgres_server import (  # noqa: F401
    PostgresServer,
    ServerUnavailableError,
    find_bindir,
    free_port,
    postgres_server,
    postgres_url,
    start_or_fail,
)
from strategies import json_values, timestamps
from tool_execution_checkpoint import (
    AsyncCheckpointStore,
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    Listing,
    MemoryStore,
    OutcomeUnknownError,
    Status,
    StoreError,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
)
from tool_execution_checkpoint.records import StoredRecord
from tool_execution_checkpoint.stores import OperableCheckpointStore, RecordSummary
from tool_execution_checkpoint.stores.opening import open_store as open_any_store
from tool_execution_checkpoint.stores.postgres import (
    LAYOUT_MARKER,
    AsyncPostgresStore,
    PostgresConfigurationError,
    PostgresNotAppliedError,
    PostgresOutcomeUnknownError,
    PostgresStore,
    PostgresStoreError,
    PostgresUnavailableError,
    connections,
    exchanges,
    open_store,
    open_url,
)
from tool_execution_checkpoint.stores.postgres.exchanges import Setup, SetupStep
from tool_execution_checkpoint.stores.postgres.sql import Statements
from tool_execution_checkpoint.testing import (
    OperableStoreConformance,
    SyncStoreAdapter,
    active_profile,
)
from tool_execution_checkpoint.testing.conformance import leaks
from tool_execution_checkpoint.testing.listings import check_whole_listing, selected, timed
from tool_execution_checkpoint.testing.processes import kill_storm
from tool_execution_checkpoint.transitions import Transition
from tool_execution_checkpoint.validation import JSONValue, timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
FAST = 5.0  # seconds: a misconfigured store must say so within this


def fresh_table() -> str:
    return f"t_{uuid.uuid4().hex}"


def binding(call_id: str = "call-1") -> Binding:
    return Binding("pg", call_id, "tool", "1", "sha256:0")


def created_record(call_id: str = "call-1") -> tuple[str, Checkpoint]:
    chosen = binding(call_id)
    return checkpoint_key(chosen), create_checkpoint(chosen, created_at=NOW)


def admin(server: PostgresServer) -> psycopg.Connection[Any]:
    return psycopg.connect(server.admin_url, autocommit=True)


def table_exists(server: PostgresServer, table: str) -> bool:
    with admin(server) as connection:
        row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def row_count(server: PostgresServer, table: str) -> int:
    with admin(server) as connection:
        query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        row = connection.execute(query).fetchone()
    assert row is not None
    return int(row[0])


# --- the conformance suite ----------------------------------------------------------------


# Every harness example sets up a fresh table (and, for an owned pool, connects): the
# budgets are a fraction of the active profile's, so TOOL_CHECKPOINT_HARNESS still scales
# them (default: 75, 50 and 50 examples).
PROFILE_EXAMPLES = active_profile().max_examples


class ClosingAdapter(SyncStoreAdapter):
    """A SyncStoreAdapter whose close may be called twice (the harness closes each
    example's store; the fixture closes whatever is left)."""

    closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            super().close()


class TestPostgresStore(OperableStoreConformance):
    """The whole suite (plain checks, model-based harness with faults, 8 real threads) on
    a store that owns its pool, a fresh table per store."""

    store_clock = True

    harness_examples = max(1, PROFILE_EXAMPLES // 4)
    url: str
    made: list[PostgresStore]

    @pytest.fixture(autouse=True)
    def _server(self, postgres_url: str) -> Iterator[None]:  # noqa: F811
        self.url = postgres_url
        self.made = []
        yield
        for store in self.made:
            store.close()

    def make_store(self) -> PostgresStore:
        store = PostgresStore(self.url, table=fresh_table(), max_size=8)
        self.made.append(store)
        return store

    def write_raw(self, store: PostgresStore, key: str, raw: bytes) -> None:
        """TEXT holds UTF-8 without NUL: the nearest text (U+FFFD for bad bytes), the
        row indexed as delivered at the epoch."""
        text = raw.decode("utf-8", "replace").replace("\x00", "")
        table = sql.Identifier(store._sql.schema, store._sql.table)
        with psycopg.connect(self.url, autocommit=True) as connection:
            statement = sql.SQL(
                "INSERT INTO {} (key, revision, status, updated_us, record)"
                " VALUES (%s, 1, 'delivered', 0, %s)"
                " ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record"
            ).format(table)
            connection.execute(statement, (key, text))


class TestPostgresStoreOnACallersPool(OperableStoreConformance):
    """The suite again on stores sharing a pool the caller owns (close leaves it open)."""

    store_clock = True

    harness_examples = max(1, PROFILE_EXAMPLES // 6)
    pool: ConnectionPool[Any]
    made: list[PostgresStore]

    @pytest.fixture(autouse=True)
    def _server(self, postgres_url: str) -> Iterator[None]:  # noqa: F811
        self.url = postgres_url
        self.pool = ConnectionPool(
            postgres_url, min_size=1, max_size=8, kwargs={"autocommit": True}, open=True
        )
        self.made = []
        yield
        for store in self.made:
            store.close()
        assert not self.pool.closed, "closing a store closed the caller's pool"
        self.pool.close()

    def make_store(self) -> PostgresStore:
        store = PostgresStore(self.pool, table=fresh_table())
        self.made.append(store)
        return store

    def write_raw(self, store: PostgresStore, key: str, raw: bytes) -> None:
        """As the first suite's hook, in this store's table."""
        TestPostgresStore.write_raw(cast(Any, self), store, key, raw)


class TestAsyncPostgresStore(OperableStoreConformance):
    """The suite on AsyncPostgresStore through the adapter (its own loop and thread)."""

    store_clock = True

    harness_examples = max(1, PROFILE_EXAMPLES // 6)
    url: str
    made: list[ClosingAdapter]

    @pytest.fixture(autouse=True)
    def _server(self, postgres_url: str) -> Iterator[None]:  # noqa: F811
        self.url = postgres_url
        self.made = []
        yield
        for adapter in self.made:
            adapter.close()

    def make_store(self) -> ClosingAdapter:
        adapter = ClosingAdapter(AsyncPostgresStore(self.url, table=fresh_table(), max_size=8))
        self.made.append(adapter)
        return adapter

    def write_raw(self, store: AsyncPostgresStore, key: str, raw: bytes) -> None:
        """As the first suite's hook, in the async store's table."""
        TestPostgresStore.write_raw(cast(Any, self), cast(Any, store), key, raw)


def test_the_stores_satisfy_the_protocols(postgres_url: str) -> None:  # noqa: F811
    store = PostgresStore(postgres_url)
    assert isinstance(store, OperableCheckpointStore)
    assert isinstance(AsyncPostgresStore(postgres_url), AsyncCheckpointStore)
    store.close()


def test_a_read_hands_on_the_record_it_validated(postgres_url: str) -> None:  # noqa: F811
    """get returns a StoredRecord: decide takes its record without validating it again."""
    key, created = created_record()
    table = fresh_table()
    with PostgresStore(postgres_url, table=table) as store:
        assert store.create_if_absent(key, created)
        stored = store.get(key)
    assert type(stored) is StoredRecord
    assert decide_checkpoint(stored, binding()).checkpoint is stored.checkpoint == created

    async def read() -> object:
        async with AsyncPostgresStore(postgres_url, table=table) as twin:
            return await twin.get(key)

    read_async = asyncio.run(read())
    assert type(read_async) is StoredRecord
    assert read_async.checkpoint == created


# --- records read back exactly --------------------------------------------------------------

TRICKY: JSONValue = {
    "one": 1.0,
    "negative_zero": -0.0,
    "huge": 1e308,
    "tiny": 5e-324,
    "pi": 3.141592653589793,
    "big_int": 2**70,
    "min_bigint": -(2**63),
    "unicode": "é ✓ 😀 中文 \u2028",
    "nul_and_escapes": '\u0000 " \\ / \n \t',
    "zeta": {"b": 1, "a": [1.0, 1, True, None, "1"]},
    "alpha": [],
    "duplicate_looking": {"k": 1, "K": 2},
}


def _completed_with(store: PostgresStore, payload: JSONValue, call_id: str) -> Checkpoint:
    key, created = created_record(call_id)
    assert store.create_if_absent(key, created)
    claim = claim_execution(created, attempt_id="a", at=NOW)
    assert store.compare_and_swap(key, claim.expected_revision, claim.next)
    done = complete_execution(claim.next, attempt_id="a", at=NOW, result=payload)
    assert store.compare_and_swap(key, done.expected_revision, done.next)
    return done.next


def _same_json(left: Any, right: Any) -> bool:
    """Equal as values, with float/int types and the sign of zero kept (a JSON object is
    any dict: what get returns is a StoredRecord)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(left[k], right[k]) for k in left)
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return left == right and math.copysign(1, left) == math.copysign(1, right)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same_json, left, right))
    return bool(left == right)


def test_tricky_payloads_read_back_exactly(postgres_url: str) -> None:  # noqa: F811
    with PostgresStore(postgres_url, table=fresh_table()) as store:
        record = _completed_with(store, TRICKY, "tricky")
        stored = store.get(checkpoint_key(binding("tricky")))
        assert stored is not None
        assert stored == record.to_dict()
        assert _same_json(stored, record.to_dict())
        # The same text, so key order and float spelling survive as well.
        compact = json.dumps(stored, ensure_ascii=False, separators=(",", ":"))
        assert compact == record.to_json()
        payload = stored["result"]["payload"]
        assert type(payload["one"]) is float
        assert math.copysign(1, payload["negative_zero"]) == -1
        assert payload["huge"] == 1e308
        assert payload["tiny"] == 5e-324
        assert list(payload) == list(TRICKY)  # type: ignore[arg-type]


def test_jsonb_would_not_round_trip_which_is_why_the_record_is_text(
    postgres_url: str,  # noqa: F811
) -> None:
    """The reason for a TEXT column: jsonb normalises numbers, reorders keys and cannot
    hold a NUL character at all, while TEXT keeps the exact JSON text."""
    numbers = {key: value for key, value in TRICKY.items() if key != "nul_and_escapes"}  # type: ignore[union-attr]
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute(
            "SELECT %s::jsonb::text, %s::text", (json.dumps(numbers), json.dumps(TRICKY))
        ).fetchone()
        assert row is not None
        with pytest.raises(psycopg.errors.UntranslatableCharacter):
            connection.execute("SELECT %s::jsonb", (json.dumps(TRICKY),))
    through_jsonb, through_text = (json.loads(text) for text in row)
    assert _same_json(through_text, TRICKY)
    assert not _same_json(through_jsonb, numbers)
    assert type(through_jsonb["huge"]) is int  # 1e308 came back as a 309-digit integer
    assert math.copysign(1, through_jsonb["negative_zero"]) == 1  # the sign of zero is gone
    assert list(through_jsonb) != list(numbers)  # keys reordered (shortest first)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=json_values)
def test_any_payload_reads_back_exactly(postgres_url: str, payload: JSONValue) -> None:  # noqa: F811
    with PostgresStore(postgres_url, table=fresh_table(), max_size=1) as store:
        record = _completed_with(store, payload, "any")
        stored = store.get(checkpoint_key(binding("any")))
        assert _same_json(stored, record.to_dict())
        assert json.dumps(stored, ensure_ascii=False, separators=(",", ":")) == record.to_json()


# --- list_records against MemoryStore ---------------------------------------------------------


def _transitions_to(status: Status, stamp: str, payload: JSONValue) -> list[Callable[..., Any]]:
    attempt, delivery = "attempt-1", "delivery-1"
    claim = [lambda r: claim_execution(r, attempt_id=attempt, at=stamp)]
    complete = [
        *claim,
        lambda r: complete_execution(r, attempt_id=attempt, at=stamp, result=payload),
    ]
    deliver = [*complete, lambda r: claim_delivery(r, delivery_id=delivery, at=stamp)]
    return {
        Status.READY: [],
        Status.EXECUTING: claim,
        Status.RELEASED: [*claim, lambda r: release_execution(r, attempt_id=attempt, at=stamp)],
        Status.UNCERTAIN: [
            *claim,
            lambda r: mark_execution_uncertain(r, attempt_id=attempt, at=stamp, reason="t"),
        ],
        Status.COMPLETED: complete,
        Status.DELIVERING: deliver,
        Status.DELIVERED: [
            *deliver,
            lambda r: release_delivery(r, delivery_id=delivery, at=stamp),
            lambda r: claim_delivery(r, delivery_id=delivery, at=stamp),
            lambda r: complete_delivery(r, delivery_id=delivery, at=stamp),
        ],
    }[status]


# Keys sort by code point in both stores: ASCII, Latin-1, BMP and astral characters mixed.
list_keys = st.lists(
    st.text(st.sampled_from("aAzZ0_-é中😀\uffff~"), min_size=1, max_size=4),
    min_size=1,
    max_size=12,
    unique=True,
)
population = list_keys.flatmap(
    lambda keys: st.tuples(
        st.just(keys),
        st.lists(st.sampled_from(list(Status)), min_size=len(keys), max_size=len(keys)),
        st.lists(timestamps(), min_size=len(keys), max_size=len(keys)),
    )
)


def _populate(
    stores: list[Any], keys: list[str], statuses: list[Status], stamps: list[str]
) -> list[int]:
    moments = []
    for index, (key, status, stamp) in enumerate(zip(keys, statuses, stamps, strict=True)):
        record = create_checkpoint(
            Binding(f"ns-{index}", f"call-{index}", "tool", "1", "f"), created_at=stamp
        )
        for store in stores:
            assert store.create_if_absent(key, record)
        for step in _transitions_to(status, stamp, {"n": index}):
            transition: Transition = step(record)
            for store in stores:
                assert store.compare_and_swap(key, transition.expected_revision, transition.next)
            record = transition.next
        moments.append(timestamp_microseconds(record.updated_at))
    return moments


queries = st.fixed_dictionaries(
    {
        "wanted": st.sets(st.sampled_from(list(Status))),
        "before_choice": st.integers(-1, 12),
        "before_delta": st.sampled_from([-1, 0, 1]),
        "after_choice": st.integers(-2, 12),
        "limit": st.integers(1, 13),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(population=population, query=queries)
def test_list_records_agrees_with_memory_store(
    postgres_url: str,  # noqa: F811
    population: tuple[list[str], list[Status], list[str]],
    query: dict[str, Any],
) -> None:
    wanted: set[Status] = query["wanted"]
    before_choice, before_delta = query["before_choice"], query["before_delta"]
    after_choice, limit = query["after_choice"], query["limit"]
    keys, statuses, stamps = population
    memory = MemoryStore()
    with PostgresStore(postgres_url, table=fresh_table(), max_size=1) as store:
        _populate([memory, store], keys, statuses, stamps)
        # The whole listing is the model's; a bounded one is held to it, by the times the
        # server wrote the rows at (its clock, not the records' stamps).
        reference = check_whole_listing(store, memory)
        moments = [line.written_us for line in reference if isinstance(line, RecordSummary)]
        before = None if before_choice < 0 else moments[before_choice % len(moments)] + before_delta
        after = None
        if after_choice == -2:
            after = "a"  # not a stored key, between others
        elif after_choice >= 0:
            after = keys[after_choice % len(keys)]
        listing = Listing(wanted, written_before_us=before, after_key=after, limit=limit)
        assert timed(store.list_records(listing)) == timed(selected(reference, listing))
        # Paging through everything gives the same pages.
        every = list(Status)
        pages: list[list[Any]] = []
        cursor: str | None = None
        while True:
            listing = Listing(every, after_key=cursor, limit=limit)
            page = store.list_records(listing)
            assert page == memory.list_records(listing)
            if not page:
                break
            pages.append(page)
            cursor = page[-1].key
        assert [summary.key for page in pages for summary in page] == sorted(keys)


def test_async_list_records_agrees_with_memory_store(postgres_url: str) -> None:  # noqa: F811
    keys = ["b", "a", "é", "Z", "😀", "中"]
    statuses = [Status.READY, Status.EXECUTING, Status.COMPLETED, Status.READY] * 2
    stamps = [f"2026-0{month}-01T00:00:00+05:30" for month in range(1, 7)]
    memory = MemoryStore()
    adapter = SyncStoreAdapter(AsyncPostgresStore(postgres_url, table=fresh_table()))
    try:
        _populate([memory, adapter], keys, statuses[: len(keys)], stamps)
        reference = check_whole_listing(adapter, memory)
        moment = sorted(line.written_us for line in reference if isinstance(line, RecordSummary))[2]
        inner = adapter.inner
        assert isinstance(inner, AsyncPostgresStore)
        for wanted in ([Status.READY], [Status.READY, Status.COMPLETED], list(Status), []):
            for before in (None, moment, moment + 1):
                listing = Listing(wanted, written_before_us=before, limit=3)
                got = adapter.run(inner.list_records(listing))
                assert timed(got) == timed(selected(reference, listing))
    finally:
        adapter.close()


def write_row(
    url: str, store: PostgresStore | AsyncPostgresStore, key: str, status: str, text: str
) -> None:
    """A row written behind the store's back: any status column, updated_us 0."""
    table = sql.Identifier(store._sql.schema, store._sql.table)
    with psycopg.connect(url, autocommit=True) as connection:
        statement = sql.SQL(
            "INSERT INTO {} (key, revision, status, updated_us, record) VALUES (%s, 1, %s, 0, %s)"
        ).format(table)
        connection.execute(statement, (key, status, text))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_row_whose_status_column_is_no_status_is_listed_by_its_record(
    postgres_url: str,  # noqa: F811
    kind: str,
) -> None:
    """A status column holding no status once hid the row from every listing. Now it is
    listed by its record's own status (never by its status column) and its updated_us (the
    time of its write), and as a BrokenRecord in every listing when its record is broken
    too; paging goes on past both. The garbage statuses sort below, between and above the
    statuses."""
    inner: PostgresStore | AsyncPostgresStore
    if kind == "sync":
        inner = PostgresStore(postgres_url, table=fresh_table(), max_size=2)
        store: Any = inner
    else:
        inner = AsyncPostgresStore(postgres_url, table=fresh_table(), max_size=2)
        store = SyncStoreAdapter(inner)
    try:
        _, ready = created_record("placed")
        executing = claim_execution(
            create_checkpoint(binding("odd"), created_at=NOW), attempt_id="a", at=NOW
        ).next
        garbage = {
            "k1": ("garbage", ready.to_json()),  # between statuses
            "k2": ("", executing.to_json()),  # below every status
            "k3": ("zzz", "null"),  # above every status, a broken record
            "k4": ("deliverer", ready.to_json()),  # between delivered and delivering
            "k6": ("READY", ready.to_json()),  # only the case differs
        }
        assert store.list_records(Listing([Status.READY])) == []  # sets the table up
        for key, (status, text) in garbage.items():
            write_row(postgres_url, inner, key, status, text)
        assert store.create_if_absent("k5", ready)
        assert store.get("k1") == ready.to_dict()

        def keys(lines: list[Any]) -> list[tuple[str, str]]:
            return [(line.key, type(line).__name__) for line in lines]

        listed = store.list_records(Listing([Status.READY]))
        assert keys(listed) == [
            ("k1", "RecordSummary"),
            ("k3", "BrokenRecord"),
            ("k4", "RecordSummary"),
            ("k5", "RecordSummary"),
            ("k6", "RecordSummary"),
        ]
        assert listed[0] == RecordSummary.of("k1", ready)
        assert listed[1].code is ErrorCode.INVALID_CHECKPOINT
        assert keys(store.list_records(Listing([Status.EXECUTING]))) == [
            ("k2", "RecordSummary"),
            ("k3", "BrokenRecord"),
        ]
        # By the rows' updated_us (0: written behind the store's back at the epoch), not
        # by the records' updatedAt; k5, written by the store, is written now.
        assert keys(store.list_records(Listing(list(Status), written_before_us=0))) == [
            ("k3", "BrokenRecord")
        ]
        assert [
            key for key, _ in keys(store.list_records(Listing(list(Status), written_before_us=1)))
        ] == [
            "k1",
            "k2",
            "k3",
            "k4",
            "k6",
        ]
        for limit in (1, 2, 3):
            pages: list[str] = []
            after: str | None = None
            while page := store.list_records(Listing([Status.READY], after_key=after, limit=limit)):
                assert len(page) <= limit
                pages += [line.key for line in page]
                after = page[-1].key
            assert pages == ["k1", "k3", "k4", "k5", "k6"]
    finally:
        store.close()


# --- names cannot inject SQL --------------------------------------------------------------------

BAD_NAMES: list[object] = [
    "x; DROP TABLE victim",
    'x"; DROP TABLE victim; --',
    "victim--",
    "Victim",
    "1table",
    "",
    " victim",
    "victim\n",
    "a" * 49,
    "tablé",
    "x\x00y",
    "public.victim",
    None,
    42,
]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("field", ["table", "schema"])
def test_names_are_checked_before_any_sql(
    postgres_server: PostgresServer,  # noqa: F811
    name: object,
    field: str,
) -> None:
    if field == "schema" and name == "a" * 49:
        name = "a" * 64  # schemas may be longer than tables
    with admin(postgres_server) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS victim (id int)")
    # An unreachable server: a store that sent anything would fail with StoreError.
    nowhere = f"postgresql://tec_app:pw@127.0.0.1:{free_port()}/tec"
    for target in (postgres_server.url, nowhere):
        with pytest.raises(CheckpointError) as caught:
            PostgresStore(target, **{field: name})  # type: ignore[arg-type]
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == field
        if isinstance(name, str) and name:
            assert name not in str(caught.value)
        with pytest.raises(CheckpointError):
            AsyncPostgresStore(target, **{field: name})  # type: ignore[arg-type]
    assert table_exists(postgres_server, "victim")


def test_reserved_words_are_quoted_not_refused(postgres_url: str) -> None:  # noqa: F811
    key, created = created_record()
    with PostgresStore(postgres_url, table="select") as store:
        assert store.create_if_absent(key, created)
        assert store.get(key) == created.to_dict()
        assert 'CREATE TABLE IF NOT EXISTS "public"."select"' in store.schema_sql()


# --- one round trip per operation ---------------------------------------------------------------


def _trace_lines(pgconn: Any, action: Callable[[], object]) -> list[list[str]]:
    """Run ``action`` with libpq's protocol trace on; return each message as its fields
    (direction F or B, length, type, contents)."""
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            action()
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().decode("utf-8", "replace").splitlines()
    return [fields for fields in (line.split("\t") for line in lines) if fields[0] in "FB"]


def _round_trips(messages: list[list[str]]) -> int:
    """Each Sync (extended protocol) or Query (simple protocol) waits for one reply."""
    return sum(1 for fields in messages if fields[0] == "F" and fields[2] in ("Sync", "Query"))


def _sent(messages: list[list[str]]) -> list[str]:
    return [fields[2] for fields in messages if fields[0] == "F"]


ONE_STATEMENT = ["Parse", "Bind", "Describe", "Execute", "Sync"]
"""An unnamed statement: parsed, bound and run in one round trip."""
PREPARED = ["Bind", "Describe", "Execute", "Sync"]
"""A prepared statement run: one round trip."""
UNPREPARED = {"autocommit": True, "prepare_threshold": None}
"""A caller's pool whose connections never prepare (as behind an older PgBouncer)."""


def test_each_operation_is_one_round_trip_with_no_begin_or_commit(
    postgres_url: str,  # noqa: F811
) -> None:
    pool = ConnectionPool(postgres_url, min_size=1, max_size=1, kwargs=UNPREPARED, open=True)
    pool.wait()
    try:
        store = PostgresStore(pool, table=fresh_table())
        first_key, first = created_record()
        assert store.create_if_absent(first_key, first)  # first use: the table is set up
        claims = []
        for index in range(12):  # past psycopg's prepare threshold (5 uses): never here
            key, created = created_record(f"cas-{index}")
            assert store.create_if_absent(key, created)
            claims.append((key, claim_execution(created, attempt_id="a", at=NOW)))
        connection = pool.getconn()  # the pool's only connection: the store's
        pool.putconn(connection)

        def swap_all() -> None:
            for key, claim in claims:
                assert store.compare_and_swap(key, claim.expected_revision, claim.next)

        messages = _trace_lines(connection.pgconn, swap_all)
        assert _round_trips(messages) == 12
        assert _sent(messages) == ONE_STATEMENT * 12
        parses = [fields[3] for fields in messages if fields[0] == "F" and fields[2] == "Parse"]
        assert all(parse.startswith(' "" "UPDATE ') for parse in parses)  # unnamed statement
        assert all("WHERE key = $4 AND revision = $5" in parse for parse in parses)
        replies = [fields[2] for fields in messages if fields[0] == "B"]
        assert replies.count("ReadyForQuery") == 12
        assert not any("BEGIN" in " ".join(m) or "COMMIT" in " ".join(m) for m in messages)

        key, claim = claims[0]
        for operation in (
            lambda: store.compare_and_swap(key, claim.expected_revision, claim.next),  # loses
            lambda: store.get(key),
            lambda: store.create_if_absent(key, first),  # present: not inserted
            lambda: store.create_if_absent(*created_record("call-new")),
            lambda: store.list_records(Listing([Status.READY], limit=5)),
        ):
            messages = _trace_lines(connection.pgconn, operation)
            assert _round_trips(messages) == 1
            assert _sent(messages) == ONE_STATEMENT
    finally:
        pool.close()


def _per_operation(connection: Any, operations: list[Callable[[], object]]) -> list[list[str]]:
    return [_sent(_trace_lines(connection.pgconn, operation)) for operation in operations]


def _prepared_once(sent: list[list[str]]) -> None:
    """Operations on one statement, on a connection with psycopg's prepare threshold:
    unnamed at first, then one Parse of a named statement in a round trip of its own,
    which runs nothing, and from then on one Bind and Execute each. Every operation
    runs its statement once, and its last message is the Sync it waits on."""
    assert all(ops.count("Execute") == 1 and ops[-1] == "Sync" for ops in sent), sent
    [prepared] = [index for index, ops in enumerate(sent) if ops[:2] == ["Parse", "Sync"]]
    assert 0 < prepared < len(sent) - 1, sent
    assert sent[:prepared] == [ONE_STATEMENT] * prepared, sent
    assert sent[prepared] == ["Parse", "Sync", *PREPARED], sent
    assert sent[prepared + 1 :] == [PREPARED] * (len(sent) - prepared - 1), sent


def test_statements_are_prepared_once_per_connection(postgres_url: str) -> None:  # noqa: F811
    """The store's own pool keeps psycopg's prepare threshold: a statement used often on
    a connection is parsed and planned once, not on every call (one Parse round trip,
    once), and a store on the same server reads and writes the same rows either way."""
    with PostgresStore(postgres_url, table=fresh_table(), min_size=1, max_size=1) as store:
        assert store.get("set-up") is None
        records = [created_record(f"prepared-{index}") for index in range(12)]
        claims = [
            (key, claim_execution(created, attempt_id="a", at=NOW)) for key, created in records
        ]
        connection = store._pool.getconn()
        store._pool.putconn(connection)
        creates = _per_operation(
            connection, [functools.partial(store.create_if_absent, *pair) for pair in records]
        )
        swaps = _per_operation(
            connection,
            [
                functools.partial(store.compare_and_swap, key, claim.expected_revision, claim.next)
                for key, claim in claims
            ],
        )
        _prepared_once(creates)
        _prepared_once(swaps)
        for key, claim in claims:
            assert store.get(key) == claim.next.to_dict()


def _creates_and_swaps(store: PostgresStore, connection: Any, prefix: str) -> list[list[str]]:
    """What ``connection`` sends for 8 creates, then their 8 claims, through ``store``."""
    records = [created_record(f"{prefix}-{index}") for index in range(8)]
    claims = [(key, claim_execution(created, attempt_id="a", at=NOW)) for key, created in records]
    operations: list[Callable[[], object]] = [
        functools.partial(store.create_if_absent, *pair) for pair in records
    ]
    operations += [
        functools.partial(store.compare_and_swap, key, claim.expected_revision, claim.next)
        for key, claim in claims
    ]
    sent = _per_operation(connection, operations)
    for key, claim in claims:
        assert store.get(key) == claim.next.to_dict()
    return sent


def test_prepare_threshold_none_never_prepares_on_any_pool(postgres_url: str) -> None:  # noqa: F811
    """``prepare_threshold=None`` (as behind PgBouncer without prepared statements): on
    the store's own pool, opened through ``open_store``, and on a caller's pool whose
    connections would prepare, every statement stays unnamed; the same caller's pool
    under a store with the default prepares, so it is the option that stops it."""
    url = postgres_url
    with open_any_store(url, prepare_threshold=None, table=fresh_table(), max_size=1) as own:
        assert isinstance(own, PostgresStore)
        assert own.get("set-up") is None
        connection = own._pool.getconn()
        own._pool.putconn(connection)
        assert connection.prepare_threshold is None
        assert _creates_and_swaps(own, connection, "own") == [ONE_STATEMENT] * 16

    preparing = {"autocommit": True}  # psycopg's default threshold, 5
    with ConnectionPool(url, min_size=1, max_size=1, kwargs=preparing, open=True) as pool:
        unprepared = PostgresStore(pool, table=fresh_table(), prepare_threshold=None)
        assert unprepared.get("set-up") is None
        connection = pool.getconn()
        pool.putconn(connection)
        assert connection.prepare_threshold == 5
        assert _creates_and_swaps(unprepared, connection, "callers") == [ONE_STATEMENT] * 16
        default = PostgresStore(pool, table=fresh_table())  # statements new to psycopg
        assert default.get("set-up") is None
        sent = _creates_and_swaps(default, connection, "default")
        _prepared_once(sent[:8])
        _prepared_once(sent[8:])


def test_prepare_threshold_reaches_the_own_pools_connections(
    postgres_url: str,  # noqa: F811
) -> None:
    """0 prepares a statement on its first run: the create's first run is already the
    one Parse of a named statement, and every later run only binds it."""
    with PostgresStore(postgres_url, table=fresh_table(), max_size=1, prepare_threshold=0) as store:
        assert store.get("set-up") is None
        connection = store._pool.getconn()
        store._pool.putconn(connection)
        assert connection.prepare_threshold == 0
        sent = _creates_and_swaps(store, connection, "eager")
        for ops in (sent[0], sent[8]):
            assert ops == ["Parse", "Sync", *PREPARED]
        assert sent[1:8] == sent[9:] == [PREPARED] * 7


@pytest.mark.parametrize("threshold", [True, False, -1, 1.5, "5", 1_000_001])
def test_bad_prepare_thresholds_are_refused_before_anything_is_sent(threshold: object) -> None:
    nowhere = f"postgresql://tec_app:pw@127.0.0.1:{free_port()}/tec"
    makers: list[Callable[..., object]] = [
        PostgresStore,
        AsyncPostgresStore,
        PostgresStore.from_url,
        open_any_store,
    ]
    for make in makers:
        with pytest.raises(CheckpointError) as caught:
            make(nowhere, prepare_threshold=threshold)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == "prepare_threshold"


def test_async_operations_are_one_round_trip_each(postgres_url: str) -> None:  # noqa: F811
    async def scenario() -> list[list[str]]:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            postgres_url, min_size=1, max_size=1, kwargs=UNPREPARED, open=False
        )
        await pool.open(wait=True)
        try:
            store = AsyncPostgresStore(pool, table=fresh_table())
            key, created = created_record()
            assert await store.create_if_absent(key, created)
            claim = claim_execution(created, attempt_id="a", at=NOW)
            connection = await pool.getconn()
            await pool.putconn(connection)
            with tempfile.TemporaryFile() as trace:
                connection.pgconn.trace(trace.fileno())
                connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
                assert await store.compare_and_swap(key, claim.expected_revision, claim.next)
                for _ in range(6):
                    assert not await store.compare_and_swap(
                        key, claim.expected_revision, claim.next
                    )
                assert await store.get(key) == claim.next.to_dict()
                connection.pgconn.untrace()
                trace.seek(0)
                lines = trace.read().decode("utf-8", "replace").splitlines()
            return [fields for fields in (line.split("\t") for line in lines) if fields[0] in "FB"]
        finally:
            await pool.close()

    messages = asyncio.run(scenario())
    assert _round_trips(messages) == 8
    assert _sent(messages) == ONE_STATEMENT * 8


# --- ambiguous commits ----------------------------------------------------------------------------


class CuttingProxy:
    """A loopback TCP proxy to the server. ``cut_next_reply()`` makes it swallow the
    server's next reply on any connection and close that connection: the statement
    reached the server and committed, and the client never hears back."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.cut_done = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, replies: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if replies and data and self.cut.is_set():
                self.cut.clear()
                data = b""  # the reply is lost
                self.cut_done.set()
            if not data:
                for end in (source, target):
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                    end.close()
                return
            try:
                target.sendall(data)
            except OSError:
                return

    def cut_next_reply(self) -> None:
        self.cut_done.clear()
        self.cut.set()

    def close(self) -> None:
        self.listener.close()
        for end in self.sockets:
            end.close()


def test_a_lost_reply_after_commit_is_outcome_unknown_and_reading_back_says_it_landed(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    proxy = CuttingProxy(postgres_server.port)
    table = fresh_table()
    through_proxy = postgres_server.url.replace(f":{postgres_server.port}/", f":{proxy.port}/")
    try:
        with (
            PostgresStore(through_proxy, table=table, min_size=1, max_size=1) as store,
            PostgresStore(postgres_server.url, table=table) as direct,
        ):
            key, created = created_record()
            assert store.create_if_absent(key, created)
            claim = claim_execution(created, attempt_id="mine", at=NOW)
            proxy.cut_next_reply()
            with pytest.raises(PostgresOutcomeUnknownError) as caught:
                store.compare_and_swap(key, claim.expected_revision, claim.next)
            assert isinstance(caught.value, OutcomeUnknownError)
            assert proxy.cut_done.is_set()
            assert "read the record back" in str(caught.value)
            # Reading back resolves it exactly: the stored record is the one written.
            assert direct.get(key) == claim.next.to_dict()
            # A blind retry cannot tell: it loses, because the write landed.
            assert store.compare_and_swap(key, claim.expected_revision, claim.next) is False
            rival = claim_execution(created, attempt_id="rival", at=NOW)
            assert direct.get(key) != rival.next.to_dict()
            # Same for a create whose reply is lost.
            other_key, other = created_record("call-2")
            proxy.cut_next_reply()
            with pytest.raises(OutcomeUnknownError):
                store.create_if_absent(other_key, other)
            assert direct.get(other_key) == other.to_dict()
    finally:
        proxy.close()


def _wait_for_blocked_backend(server: PostgresServer, table: str) -> int:
    """The pid of the backend blocked on a row lock while updating ``table``."""
    deadline = time.monotonic() + FAST
    with admin(server) as connection:
        while time.monotonic() < deadline:
            row = connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f"%{table}%",),
            ).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.01)
    raise AssertionError("the compare-and-swap never blocked on the row lock")


def _terminate(server: PostgresServer, pid: int) -> None:
    with admin(server) as connection:
        connection.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_backend_terminated_mid_swap_is_outcome_unknown_and_reading_back_resolves_it(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    with PostgresStore(postgres_server.url, table=table, max_size=2) as store:
        key, created = created_record()
        assert store.create_if_absent(key, created)
        claim = claim_execution(created, attempt_id="mine", at=NOW)
        outcome: list[BaseException | bool] = []
        with psycopg.connect(postgres_server.admin_url) as locker:
            # Hold the row, so the store's UPDATE is sent and then waits in the server.
            locker.execute(
                sql.SQL("SELECT 1 FROM {} WHERE key = %s FOR UPDATE").format(sql.Identifier(table)),
                (key,),
            )

            def swap() -> None:
                try:
                    outcome.append(store.compare_and_swap(key, 1, claim.next))
                except BaseException as error:
                    outcome.append(error)

            swapper = threading.Thread(target=swap)
            swapper.start()
            _terminate(postgres_server, _wait_for_blocked_backend(postgres_server, table))
            swapper.join(FAST)
            locker.rollback()
        assert len(outcome) == 1, outcome
        assert isinstance(outcome[0], OutcomeUnknownError), outcome
        assert "57P01" in str(outcome[0])  # admin shutdown: named, never guessed
        # Reading back resolves it: the backend died before its commit, so the old record.
        assert store.get(key) == created.to_dict()
        # The store recovers (the dead connection was dropped) and the claim can be retried.
        assert store.compare_and_swap(key, 1, claim.next) is True
        assert store.get(key) == claim.next.to_dict()


def test_async_backend_terminated_mid_swap_is_outcome_unknown(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    key, created = created_record()
    claim = claim_execution(created, attempt_id="mine", at=NOW)

    async def scenario() -> tuple[BaseException | None, Any, Any]:
        async with AsyncPostgresStore(postgres_server.url, table=table, max_size=2) as store:
            assert await store.create_if_absent(key, created)
            locker = await psycopg.AsyncConnection.connect(postgres_server.admin_url)
            await locker.execute(
                sql.SQL("SELECT 1 FROM {} WHERE key = %s FOR UPDATE").format(sql.Identifier(table)),
                (key,),
            )
            swap = asyncio.create_task(store.compare_and_swap(key, 1, claim.next))
            pid = await asyncio.to_thread(_wait_for_blocked_backend, postgres_server, table)
            await asyncio.to_thread(_terminate, postgres_server, pid)
            error = None
            try:
                await asyncio.wait_for(swap, FAST)
            except StoreError as raised:
                error = raised
            await locker.rollback()
            await locker.close()
            after = await store.get(key)
            retried = await store.compare_and_swap(key, 1, claim.next)
            return error, after, retried

    error, after, retried = asyncio.run(scenario())
    assert isinstance(error, OutcomeUnknownError)
    assert after == created.to_dict()
    assert retried is True


def test_a_cancelled_swap_is_outcome_unknown_too(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """A statement cancelled by statement_timeout (SQLSTATE 57014) is reported as an
    unknown outcome: the store does not reason about when a cancel lands relative to a
    commit. Reading back resolves it (here: not applied)."""
    table = fresh_table()
    impatient = postgres_server.url + "?options=-c%20statement_timeout%3D300"
    with PostgresStore(impatient, table=table) as store:
        key, created = created_record()
        assert store.create_if_absent(key, created)
        claim = claim_execution(created, attempt_id="mine", at=NOW)
        with psycopg.connect(postgres_server.admin_url) as locker:
            locker.execute(
                sql.SQL("SELECT 1 FROM {} WHERE key = %s FOR UPDATE").format(sql.Identifier(table)),
                (key,),
            )
            with pytest.raises(OutcomeUnknownError, match="57014"):
                store.compare_and_swap(key, 1, claim.next)
            locker.rollback()
        assert store.get(key) == created.to_dict()
        assert store.compare_and_swap(key, 1, claim.next) is True


def test_a_cancellation_during_the_connections_return_does_not_keep_it_out_of_the_pool(
    postgres_url: str,  # noqa: F811
) -> None:
    """A cancellation that lands while the asyncio store gives its connection back (a
    second one, while the first unwinds) does not stop the return: the pool gets it."""
    key, _created = created_record()

    async def scenario() -> None:
        async with AsyncPostgresStore(postgres_url, table=fresh_table(), max_size=1) as store:
            assert await store.get(key) is None
            returned = await cancelled_while_returning(
                store._pool, "putconn", lambda: store.get(key)
            )
            assert len(returned) == 1
            assert await store.get(key) is None  # the one connection is back

    asyncio.run(scenario())


def test_an_idle_connection_killed_in_the_pool_is_replaced_before_sending(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """A backend that died while its connection sat in the pool is noticed before the
    next statement is sent: the write goes out on a new connection, no unknown outcome."""
    with PostgresStore(postgres_server.url, table=fresh_table(), min_size=1, max_size=1) as store:
        key, created = created_record()
        assert store.create_if_absent(key, created)
        with admin(postgres_server) as connection:
            pids = connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND usename = 'tec_app' AND state = 'idle' AND query LIKE %s",
                ("tool-execution-checkpoint", f"%{store._sql.table}%"),
            ).fetchall()
        assert len(pids) == 1
        _terminate(postgres_server, pids[0][0])
        time.sleep(0.2)  # let the termination notice reach the client's socket
        claim = claim_execution(created, attempt_id="a", at=NOW)
        assert store.compare_and_swap(key, 1, claim.next) is True
        assert store.get(key) == claim.next.to_dict()


def test_an_idle_connection_on_a_descriptor_above_1024_is_judged_by_its_socket() -> None:
    """The pool's liveness check works on any descriptor, not only those select() takes:
    a quiet socket on a high descriptor is alive, one whose peer closed is dead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1600:
        pytest.skip("the descriptor limit is below 1600")
    if soft != resource.RLIM_INFINITY and soft < 1600:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1600, hard))
    ours, peer = socket.socketpair()
    try:
        high = os.dup2(ours.fileno(), 1500)
        connection = SimpleNamespace(
            closed=False, broken=False, pgconn=SimpleNamespace(socket=high)
        )
        pooled = cast(psycopg.Connection[Any], connection)
        assert connections.alive(pooled)
        peer.close()
        assert not connections.alive(pooled)
    finally:
        os.close(1500)
        ours.close()
        peer.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_refused_write_is_a_store_error_that_never_echoes_the_payload(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """A statement the server refuses with an ERROR rolled back: a plain StoreError (not
    an unknown outcome), without the server's DETAIL line, which quotes the row."""
    table = fresh_table()
    secret = "SECRET-PAYLOAD-4711"
    with PostgresStore(postgres_server.url, table=table) as store:
        key, created = created_record()
        assert store.create_if_absent(key, created)
        claim = claim_execution(created, attempt_id="a", at=NOW)
        assert store.compare_and_swap(key, 1, claim.next)
        with admin(postgres_server) as connection:
            # A server error whose DETAIL quotes the whole new row, payload included.
            connection.execute(
                "CREATE FUNCTION refuse_secrets() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN IF NEW.record LIKE '%SECRET%' THEN RAISE check_violation "
                "USING MESSAGE = 'refused by a trigger', DETAIL = NEW.record; END IF; "
                "RETURN NEW; END $$"
            )
            connection.execute(
                sql.SQL(
                    "CREATE TRIGGER refuse BEFORE UPDATE ON {} "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_secrets()"
                ).format(sql.Identifier(table))
            )
        done = complete_execution(claim.next, attempt_id="a", at=NOW, result={"s": secret})
        with pytest.raises(PostgresNotAppliedError) as caught:
            store.compare_and_swap(key, done.expected_revision, done.next)
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert "23514" in str(caught.value)
        assert "not applied" in str(caught.value)
        assert "refused by a trigger" in str(caught.value)
        assert secret not in str(caught.value)
        assert caught.value.__cause__ is None
        assert caught.value.__context__ is None  # not even a suppressed context
        assert store.get(key) == claim.next.to_dict()


def test_a_revoked_privilege_is_a_store_error_naming_the_grant(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    with PostgresStore(postgres_server.url, table=table) as owner:
        key, created = created_record()
        assert owner.create_if_absent(key, created)
    role = f"r_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_role(
        role, grants=f"GRANT SELECT, INSERT, UPDATE ON {table} TO {role}"
    )
    with PostgresStore(url, table=table) as store:
        assert store.get(key) == created.to_dict()  # set up while allowed
        with admin(postgres_server) as connection:
            connection.execute(
                sql.SQL("REVOKE UPDATE ON {} FROM {}").format(
                    sql.Identifier(table), sql.Identifier(role)
                )
            )
        claim = claim_execution(created, attempt_id="a", at=NOW)
        with pytest.raises(PostgresConfigurationError) as caught:
            store.compare_and_swap(key, 1, claim.next)
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert "42501" in str(caught.value)
        assert "grant" in str(caught.value)
        assert store.get(key) == created.to_dict()


# --- bad configuration fails fast, says what to fix, and writes nothing -------------------------


def _fails_fast(
    make: Callable[[], Any],
    *secrets: str,
    again: bool = True,
    kind: type[PostgresStoreError] = PostgresConfigurationError,
) -> StoreError:
    """Build a store and create a record; return the error of ``kind`` it must raise
    within FAST seconds, after checking that the message holds none of ``secrets`` (and,
    with ``again``, that a second operation fails as well: a failed setup is not
    cached)."""
    key, created = created_record("misconfigured")
    start = time.monotonic()
    store = make()
    try:
        with pytest.raises(kind) as caught:
            store.create_if_absent(key, created)
        took = time.monotonic() - start
        if again:
            with pytest.raises(StoreError):
                store.get(key)
    finally:
        store.close()
    assert took < FAST
    assert not isinstance(caught.value, OutcomeUnknownError)  # nothing was sent
    for secret in secrets:
        assert secret not in str(caught.value)
        assert secret not in repr(store)
    assert caught.value.__cause__ is None
    return caught.value


def test_an_unreachable_server_is_a_fast_store_error(postgres_server: PostgresServer) -> None:  # noqa: F811
    port = free_port()
    url = f"postgresql://tec_app:{postgres_server.app_password}@127.0.0.1:{port}/tec"
    error = _fails_fast(
        lambda: PostgresStore(url), postgres_server.app_password, kind=PostgresUnavailableError
    )
    assert f"127.0.0.1:{port}" in str(error)
    assert "connection refused" in str(error)


def test_a_wrong_password_is_a_fast_store_error_that_shows_no_password(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    url = postgres_server.url_with_password(wrong)
    error = _fails_fast(lambda: PostgresStore(url), wrong, postgres_server.app_password)
    assert "authentication failed" in str(error)
    assert "password" in str(error)
    assert "tec_app" in str(error)


def test_a_role_without_table_privileges_is_told_the_grant(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    with PostgresStore(postgres_server.url, table=table) as owner:
        owner.get("anything")  # the owner creates the table
    role = f"r_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_role(role)
    error = _fails_fast(lambda: PostgresStore(url, table=table), url.split(":")[2].split("@")[0])
    assert f"GRANT SELECT, INSERT, UPDATE ON public.{table} TO {role}" in str(error)
    assert row_count(postgres_server, table) == 0


def test_a_role_that_may_not_create_the_missing_table_is_told_so(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    url = postgres_server.create_role(f"r_{uuid.uuid4().hex[:12]}")
    error = _fails_fast(lambda: PostgresStore(url, table=table))
    assert "does not exist" in str(error)
    assert "CREATE" in str(error)
    assert not table_exists(postgres_server, table)
    error = _fails_fast(lambda: PostgresStore(postgres_server.url, table=table, create_table=False))
    assert "create_table=False" in str(error)
    assert not table_exists(postgres_server, table)


def test_the_async_store_fails_fast_too(postgres_server: PostgresServer) -> None:  # noqa: F811
    wrong = "wrong-" + uuid.uuid4().hex
    error = _fails_fast(
        lambda: ClosingAdapter(AsyncPostgresStore(postgres_server.url_with_password(wrong))), wrong
    )
    assert "authentication failed" in str(error)
    role = f"r_{uuid.uuid4().hex[:12]}"
    table = fresh_table()
    with PostgresStore(postgres_server.url, table=table) as owner:
        owner.get("anything")
    url = postgres_server.create_role(role)
    error = _fails_fast(lambda: ClosingAdapter(AsyncPostgresStore(url, table=table)))
    assert "GRANT SELECT, INSERT, UPDATE" in str(error)


def test_a_non_durable_server_is_refused_unless_allowed(postgres_url: str) -> None:  # noqa: F811
    relaxed = postgres_url + "?options=-c%20synchronous_commit%3Doff"
    error = _fails_fast(lambda: PostgresStore(relaxed, table=fresh_table()))
    assert "durable" in str(error)
    assert "synchronous_commit" in str(error)
    key, created = created_record()
    with PostgresStore(relaxed, table=fresh_table(), durable=False) as store:
        assert store.create_if_absent(key, created)


def test_a_foreign_table_of_the_same_name_is_refused(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    table = fresh_table()
    with admin(postgres_server) as connection:
        connection.execute(
            sql.SQL("CREATE TABLE {} (key text primary key, data text)").format(
                sql.Identifier(table)
            )
        )
        connection.execute(sql.SQL("GRANT ALL ON {} TO tec_app").format(sql.Identifier(table)))
    error = _fails_fast(lambda: PostgresStore(postgres_server.url, table=table))
    assert LAYOUT_MARKER in str(error)


def test_a_non_utf8_database_is_refused(postgres_server: PostgresServer) -> None:  # noqa: F811
    database = f"latin_{uuid.uuid4().hex[:8]}"
    with admin(postgres_server) as connection:
        connection.execute(
            sql.SQL(
                "CREATE DATABASE {} OWNER tec_app ENCODING 'LATIN1' TEMPLATE template0 "
                "LOCALE_PROVIDER libc LC_COLLATE 'C' LC_CTYPE 'C'"
            ).format(sql.Identifier(database))
        )
    url = postgres_server.url.rsplit("/", 1)[0] + f"/{database}"
    error = _fails_fast(lambda: PostgresStore(url))
    assert "LATIN1" in str(error)
    assert "UTF8" in str(error)


def test_a_missing_schema_is_named(postgres_url: str) -> None:  # noqa: F811
    error = _fails_fast(lambda: PostgresStore(postgres_url, schema="no_such_schema"))
    assert "no_such_schema does not exist" in str(error)


@pytest.mark.parametrize(
    "conninfo",
    [
        "postgresql://tec_app:sec ret-pw@127.0.0.1:5432/tec",
        "host=127.0.0.1 password secret-pw",
        "postgresql://tec_app:secret-pw@127.0.0.1:5432/tec?sslmode=nonsense sec",
        b"postgresql://tec_app:secret-pw@127.0.0.1/tec",
        None,
    ],
)
def test_a_malformed_connection_string_is_refused_without_echoing_it(conninfo: object) -> None:
    for kind in (PostgresStore, AsyncPostgresStore):
        with pytest.raises(CheckpointError) as caught:
            kind(conninfo)  # type: ignore[arg-type]
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert "secret" not in str(caught.value)
        assert "sec ret" not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"connect_timeout": 0},
        {"connect_timeout": float("nan")},
        {"connect_timeout": True},
        {"min_size": -1},
        {"max_size": 0},
        {"min_size": 3, "max_size": 2},
    ],
)
def test_bad_options_are_refused(postgres_url: str, options: dict[str, Any]) -> None:  # noqa: F811
    with pytest.raises(CheckpointError) as caught:
        PostgresStore(postgres_url, **options)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_a_closed_store_refuses_and_a_callers_pool_stays_open(postgres_url: str) -> None:  # noqa: F811
    key, created = created_record()
    store = PostgresStore(postgres_url, table=fresh_table())
    assert store.create_if_absent(key, created)
    store.close()
    with pytest.raises(PostgresNotAppliedError, match="closed"):
        store.get(key)
    with ConnectionPool(postgres_url, min_size=1, kwargs={"autocommit": True}) as pool:
        borrowed = PostgresStore(pool, table=fresh_table())
        assert borrowed.create_if_absent(key, created)
        borrowed.close()
        with pytest.raises(PostgresNotAppliedError, match="closed"):
            borrowed.get(key)
        with pool.connection() as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_store_closed_during_its_first_use_closes_its_pool(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
) -> None:
    """close() waits for a setup under way (the setup lock), so the pool the setup opens
    is closed, not left open behind a closed store."""
    original = exchanges.setting_up

    def slow(statements: Statements, *, durable: bool, create: bool) -> Setup:
        yield SetupStep(((b"SELECT pg_sleep(0.5)", None),), False)
        return (yield from original(statements, durable=durable, create=create))

    monkeypatch.setattr(exchanges, "setting_up", slow)
    outcomes: list[object] = []
    if driver == "sync":
        store = PostgresStore(postgres_url, table=fresh_table())

        def first_use() -> None:
            try:
                outcomes.append(store.get("k"))
            except PostgresStoreError as error:
                outcomes.append(error)

        thread = threading.Thread(target=first_use)
        thread.start()
        time.sleep(0.2)  # the setup is under way
        store.close()
        thread.join()
        pool_closed = store._pool.closed
    else:

        async def scenario() -> bool:
            store = AsyncPostgresStore(postgres_url, table=fresh_table())
            first = asyncio.create_task(store.get("k"))
            await asyncio.sleep(0.2)  # the setup is under way
            await store.aclose()
            try:
                outcomes.append(await first)
            except PostgresStoreError as error:
                outcomes.append(error)
            return store._pool.closed

        pool_closed = asyncio.run(scenario())
    assert pool_closed
    assert len(outcomes) == 1
    assert outcomes[0] is None or isinstance(outcomes[0], PostgresNotAppliedError)


def test_a_callers_pool_without_autocommit_still_gets_one_statement_per_write(
    postgres_url: str,  # noqa: F811
) -> None:
    with ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as pool:
        store = PostgresStore(pool, table=fresh_table())
        key, created = created_record()
        assert store.create_if_absent(key, created)
        with PostgresStore(postgres_url, table=store._sql.table) as other:
            assert other.get(key) == created.to_dict()  # committed, not left in a transaction


# --- concurrency of first use -------------------------------------------------------------------


def test_many_stores_setting_up_the_same_table_at_once_all_succeed(
    postgres_url: str,  # noqa: F811
) -> None:
    table = fresh_table()
    key, created = created_record()
    stores = [PostgresStore(postgres_url, table=table, max_size=1) for _ in range(8)]
    start = threading.Barrier(len(stores))
    answers: list[bool | BaseException] = []

    def race(store: PostgresStore) -> None:
        start.wait()
        try:
            answers.append(store.create_if_absent(key, created))
        except BaseException as error:
            answers.append(error)

    threads = [threading.Thread(target=race, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert sorted(answers, key=str) == [False] * 7 + [True], answers


def test_open_store_is_a_module_level_factory(postgres_url: str) -> None:  # noqa: F811
    store = open_store(postgres_url)
    try:
        assert isinstance(store, PostgresStore)
        assert repr(store) == "PostgresStore(table=public.tec_checkpoint)"
    finally:
        store.close()


PARSER_SECRET = "pg-parser-secret-3e8a"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{PARSER_SECRET}@db/app?nosuch=1",
        f"postgres://app:{PARSER_SECRET}@[::1/app",
        f"host=db password={PARSER_SECRET} bogus",
    ],
)
def test_one_parser_behind_from_url_open_url_and_open_store(url: str) -> None:
    """Every way of opening a PostgreSQL URL parses it once, with the constructor's
    parser: the same refusal, naming no part of the URL, nothing in its chain."""
    refusals = []
    openers: list[Callable[..., Any]] = [
        PostgresStore.from_url,
        AsyncPostgresStore.from_url,
        open_url,
        open_store,
    ]
    if not url.startswith("host="):  # open_store finds the store by the URL's scheme
        openers.append(open_any_store)
    for opener in openers:
        with pytest.raises(CheckpointError) as caught:
            opener(url)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert leaks(caught.value, PARSER_SECRET) is None
        refusals.append((caught.value.field, str(caught.value)))
    assert len(set(refusals)) == 1, refusals


def test_opening_with_create_false_never_creates_the_table(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """``create=False`` (open_store's, from_url's, open_url's) is ``create_table=False``:
    a missing table is a StoreError saying there is no checkpoint table; nothing is
    created. It once reached no store: the table was made on first use."""
    table = fresh_table()
    url = postgres_server.url
    key, created = created_record("create-false")
    for opener in (PostgresStore.from_url, open_url, open_any_store):
        error = _fails_fast(functools.partial(opener, url, table=table, create=False))
        assert f"no checkpoint table public.{table}" in str(error)
        assert not table_exists(postgres_server, table)

    async def async_store() -> str:
        async with AsyncPostgresStore.from_url(url, table=table, create=False) as store:
            with pytest.raises(StoreError) as caught:
                await store.get(key)
        return str(caught.value)

    assert f"no checkpoint table public.{table}" in asyncio.run(async_store())
    assert not table_exists(postgres_server, table)
    for opener in (PostgresStore.from_url, open_url, open_any_store):
        with pytest.raises(CheckpointError) as refused:
            opener(url, table=table, create=False, create_table=True)
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
        assert refused.value.field == "create_table"
    with open_any_store(url, table=table) as store:  # create=True: made on first use
        assert store.create_if_absent(key, created)
    with open_any_store(url, table=table, create=False) as store:
        assert store.get(key) is not None


# --- real processes, really killed ------------------------------------------------------------


def test_sigkilled_worker_processes_never_run_a_tool_twice(
    postgres_server: PostgresServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Four worker processes share a fresh database through open_store(url) while the
    parent SIGKILLs one every 20 to 200 ms; the recovery pass then checks each record
    against the effects log and finishes what was left mid-flight. A worker needs a few
    hundred milliseconds to start (imports, two connections) and the parent needs time
    to spawn them, so on a loaded machine a storm may kill few workers, or kill most of
    them before they act: storms are repeated (at most four) until at least ten kills
    and six tool runs were seen in all. Every storm's report must be clean."""
    ran = kills = 0
    for storm in range(4):
        database = f"storm_{uuid.uuid4().hex[:8]}"
        with admin(postgres_server) as connection:
            connection.execute(
                sql.SQL("CREATE DATABASE {} OWNER tec_app").format(sql.Identifier(database))
            )
        url = postgres_server.url.rsplit("/", 1)[0] + f"/{database}"
        report = kill_storm(
            "tool_execution_checkpoint.stores.postgres:open_store",
            url,
            directory=tmp_path / f"storm-{storm}",
            workers=4,
            keys=12,
            seconds=4.0,
            seed=7 + storm,
        )
        report.check()
        assert all(len(attempts) <= 1 for attempts in report.executions.values())
        with PostgresStore(url) as store:
            for call in range(12):
                chosen = Binding("storm", f"call-{call}", "tool", "1", "sha256:0")
                stored = store.get(checkpoint_key(chosen))
                if stored is not None:  # recovery finished everything that was claimed
                    assert stored["status"] in ("ready", "delivered")
        ran += sum(map(len, report.executions.values()))
        kills += report.kills
        if ran >= 6 and kills >= 10:
            break
    assert kills >= 10, "the storms hardly killed anything"
    assert ran >= 6, "the workers hardly got to run: the storms proved little"


# --- the test server itself -------------------------------------------------------------------


def test_missing_server_binaries_fail_the_tests_saying_what_to_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(glob, "glob", lambda *_: [])
    monkeypatch.setattr(shutil, "which", lambda *_: None)
    hint = re.escape("run scripts/install-services.sh")
    with pytest.raises(ServerUnavailableError, match=hint):
        find_bindir()
    with pytest.raises(pytest.fail.Exception, match=hint):
        start_or_fail()


# --- a caller's pool that cannot connect ----------------------------------------------------------


def test_a_callers_pool_with_a_wrong_password_is_diagnosed(
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    wrong = "wrong-" + uuid.uuid4().hex
    pool = ConnectionPool(postgres_server.url_with_password(wrong), min_size=1, open=True)
    try:
        error = _fails_fast(lambda: PostgresStore(pool, connect_timeout=1), wrong)
    finally:
        pool.close()
    assert "authentication failed" in str(error)


def test_an_exhausted_callers_pool_is_a_store_error_before_sending(
    postgres_url: str,  # noqa: F811
) -> None:
    with ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as pool:
        store = PostgresStore(pool, table=fresh_table(), connect_timeout=0.5)
        key, created = created_record()
        assert store.create_if_absent(key, created)
        with pool.connection():  # someone else holds the only connection
            claim = claim_execution(created, attempt_id="a", at=NOW)
            with pytest.raises(StoreError) as caught:
                store.compare_and_swap(key, 1, claim.next)
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert "no database connection within 0.5 s" in str(caught.value)
        assert store.get(key) == created.to_dict()


def test_a_server_that_never_answers_times_out_fast() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, then says nothing
    port = silent.getsockname()[1]
    try:
        url = f"postgresql://tec_app:pw-{uuid.uuid4().hex}@127.0.0.1:{port}/tec"
        error = _fails_fast(
            lambda: PostgresStore(url, connect_timeout=2),
            "pw-",
            again=False,
            kind=PostgresUnavailableError,
        )
    finally:
        silent.close()
    assert "timed out" in str(error)


def test_a_callers_pool_with_another_client_encoding_is_refused(
    postgres_url: str,  # noqa: F811
) -> None:
    pool = ConnectionPool(
        postgres_url,
        min_size=1,
        kwargs={"autocommit": True, "client_encoding": "LATIN1"},
        open=False,
    )
    pool.open(wait=True)
    try:
        error = _fails_fast(lambda: PostgresStore(pool, table=fresh_table()))
    finally:
        pool.close()
    assert "client_encoding is LATIN1" in str(error)
    # A store's own pool always talks UTF8, whatever the URL says.
    key, created = _completed_key_and_record()
    with PostgresStore(
        postgres_url + "?client_encoding=LATIN1", table=fresh_table(), max_size=1
    ) as store:
        assert store.create_if_absent(key, created)
        assert store.get(key) == created.to_dict()


def _completed_key_and_record() -> tuple[str, Checkpoint]:
    chosen = Binding("pg", "encoding-✓-中", "tool", "1", "sha256:0")
    return checkpoint_key(chosen), create_checkpoint(chosen, created_at=NOW)
