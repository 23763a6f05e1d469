"""SQLiteStore and AsyncSQLiteStore: the conformance suite, operators' listings against
MemoryStore, the schema version, the pragmas, every documented error, and real processes
that contend for the same keys or are killed with SIGKILL in the middle of a commit."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import checkpoints, identifier_chars, timestamps
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
    checkpoint_key,
    claim_execution,
    complete_execution,
    create_checkpoint,
    open_store,
)
from tool_execution_checkpoint.stores import OperableCheckpointStore, RecordSummary
from tool_execution_checkpoint.stores.core import _checked_us
from tool_execution_checkpoint.stores.sqlite import (
    SCHEMA_VERSION,
    AsyncSQLiteStore,
    SQLiteBusyError,
    SQLiteConfigurationError,
    SQLiteOutcomeUnknownError,
    SQLiteStore,
    SQLiteStoreError,
    open_url,
)
from tool_execution_checkpoint.testing import (
    OperableStoreConformance,
    active_profile,
    read_back_landed,
)
from tool_execution_checkpoint.testing.listings import timed
from tool_execution_checkpoint.testing.processes import kill_storm
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
SECRET = "s3cret-payload-value"
BINDING = Binding("ns", "call-1", "tool", "1", "sha256:0")
KEY = checkpoint_key(BINDING)


def _raw(path: Path) -> sqlite3.Connection:
    """A plain connection to the store's file, as another program would open it."""
    return sqlite3.connect(path, isolation_level=None)


# --- the conformance suite, sync and async -----------------------------------------------


class TestSQLiteStore(OperableStoreConformance):
    """Each store is on a new file in the test's directory, closed after the test. Every
    write waits for an fsync, so the harness runs half the profile's examples (150 by
    default; TOOL_CHECKPOINT_HARNESS=thorough runs 2,500)."""

    store_clock = False

    harness_examples = active_profile().max_examples // 2

    @pytest.fixture(autouse=True)
    def _files(self, tmp_path: Path) -> Iterator[None]:
        self.directory = tmp_path
        self.numbers = itertools.count()
        self.opened: list[SQLiteStore] = []
        yield
        for store in self.opened:
            store.close()

    def make_store(self) -> SQLiteStore:
        store = SQLiteStore(self.directory / f"store-{next(self.numbers)}.db")
        self.opened.append(store)
        return store

    def write_raw(self, store: SQLiteStore, key: str, raw: bytes) -> None:
        """The bytes as the TEXT of the record column (not UTF-8 included), the row
        indexed as delivered at the epoch."""
        with _raw(store.path) as db:
            db.execute(
                "INSERT OR REPLACE INTO tec_checkpoint VALUES"
                " (?, 1, 'delivered', 'ns', 'call', '1970-01-01T00:00:00Z', 0, CAST(? AS TEXT))",
                (key, raw),
            )


class TestAsyncSQLiteStore(OperableStoreConformance):
    """The async store through the suite's adapter, on a new file per store; a quarter of
    the profile's examples, since it runs the same SQLiteStore underneath."""

    store_clock = False

    harness_examples = active_profile().max_examples // 4

    @pytest.fixture(autouse=True)
    def _files(self, tmp_path: Path) -> Iterator[None]:
        self.directory = tmp_path
        self.numbers = itertools.count()
        self.opened: list[AsyncSQLiteStore] = []
        yield
        for store in self.opened:
            asyncio.run(store.aclose())

    def make_store(self) -> AsyncSQLiteStore:
        store = AsyncSQLiteStore(self.directory / f"store-{next(self.numbers)}.db")
        self.opened.append(store)
        return store

    def write_raw(self, store: AsyncSQLiteStore, key: str, raw: bytes) -> None:
        """As the sync suite's hook, in the file of the store this one runs."""
        TestSQLiteStore.write_raw(cast(Any, self), store.store, key, raw)


def test_the_stores_satisfy_the_protocols(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        assert isinstance(store, OperableCheckpointStore)
    async_store = AsyncSQLiteStore(tmp_path / "b.db")
    assert isinstance(async_store, AsyncCheckpointStore)
    asyncio.run(async_store.aclose())


# --- operators' listings, with MemoryStore as the model ------------------------------------

list_keys = st.text(identifier_chars, min_size=1, max_size=4)
stored_records = st.lists(
    st.tuples(list_keys, checkpoints()), max_size=10, unique_by=lambda pair: pair[0]
)


@st.composite
def queries(draw: st.DrawFn, keys: list[str], times: list[int]) -> Listing:
    """Listings aimed at the stored keys and times, or beside them."""
    near = [*times, *(moment + 1 for moment in times), *(moment - 1 for moment in times)]
    before = st.none() | st.integers(-(2**70), 2**70)
    if near:
        before = before | st.sampled_from(near)
    after = st.none() | list_keys
    if keys:
        after = after | st.sampled_from(keys)
    return Listing(
        draw(st.sets(st.sampled_from(list(Status)))),
        written_before_us=draw(before),
        after_key=draw(after),
        limit=draw(st.integers(1, 12)),
    )


def _both(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[str, Checkpoint]]
) -> tuple[SQLiteStore, MemoryStore]:
    store = SQLiteStore(tmp_path_factory.mktemp("listing") / "store.db")
    model = MemoryStore()
    for key, record in records:
        store.create_if_absent(key, create_checkpoint(record.binding, created_at=NOW))
        model.create_if_absent(key, create_checkpoint(record.binding, created_at=NOW))
        if record.revision > 1:  # jump straight to the drawn record, as a CAS from 1
            stored = record.to_dict() | {"revision": 2}
            jumped = Checkpoint.from_dict(stored, max_payload_bytes=10_485_760)
            assert store.compare_and_swap(key, 1, jumped)
            assert model.compare_and_swap(key, 1, jumped)
    return store, model


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=stored_records, data=st.data())
def test_list_records_answers_like_the_model(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[str, Checkpoint]], data: Any
) -> None:
    store, model = _both(tmp_path_factory, records)
    try:
        keys = [key for key, _ in records]
        times = [
            summary.updated_us
            for summary in model.list_records(Listing(list(Status)))
            if isinstance(summary, RecordSummary)
        ]
        for _ in range(4):
            query = data.draw(queries(keys, times))
            got, expected = store.list_records(query), model.list_records(query)
            assert timed(got) == timed(expected), query  # written_us too: the updatedAt
    finally:
        store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=stored_records, page=st.integers(1, 4))
def test_paging_by_the_last_key_lists_every_record_once_in_key_order(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[str, Checkpoint]], page: int
) -> None:
    store, model = _both(tmp_path_factory, records)
    try:
        pages: list[list[str]] = []
        after: str | None = None
        while listed := store.list_records(Listing(list(Status), after_key=after, limit=page)):
            assert len(listed) <= page
            pages.append([summary.key for summary in listed])
            after = listed[-1].key
        flat = [key for keys in pages for key in keys]
        assert flat == sorted(key for key, _ in records)  # code point order, as in Python
        assert store.list_records(Listing(list(Status))) == model.list_records(
            Listing(list(Status))
        )
    finally:
        store.close()


def test_list_records_reads_the_columns_not_the_records(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SQLiteStore(path) as store:
        store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))
        with _raw(path) as raw:
            raw.execute("UPDATE tec_checkpoint SET record = 'not json'")
        [summary] = store.list_records(Listing([Status.READY]))
        assert isinstance(summary, RecordSummary)  # the columns are sound: listed by them
        assert (summary.key, summary.namespace, summary.call_id) == (KEY, "ns", "call-1")
        assert (summary.revision, summary.updated_at) == (1, NOW)
        assert summary.updated_us == 1_767_225_600_000_000
        with pytest.raises(CheckpointError) as caught:
            store.get(KEY)
        assert caught.value.code is ErrorCode.INVALID_CHECKPOINT
        assert "not json" not in str(caught.value)


def test_list_records_accepts_status_values_as_str(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "store.db") as store:
        store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))
        assert [summary.key for summary in store.list_records(Listing(["ready"]))] == [KEY]  # type: ignore[list-item]
        assert store.list_records(Listing([])) == []


# --- schema, reopening, pragmas ------------------------------------------------------------


def test_reopening_a_file_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    created = create_checkpoint(BINDING, created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
    with SQLiteStore(path) as store:
        assert store.create_if_absent(KEY, created)
        assert store.compare_and_swap(KEY, 1, claim.next)
    with SQLiteStore(path) as again:
        assert again.get(KEY) == claim.next.to_dict()
        assert again.create_if_absent(KEY, created) is False
        [summary] = again.list_records(Listing(list(Status)))
        assert isinstance(summary, RecordSummary)
        assert summary.status is Status.EXECUTING
    with _raw(path) as raw:
        rows = raw.execute("SELECT name, value FROM tec_meta").fetchall()
    assert rows == [("schema_version", SCHEMA_VERSION)]


def test_a_newer_schema_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SQLiteStore(path).close()
    with _raw(path) as raw:
        raw.execute("UPDATE tec_meta SET value = 2 WHERE name = 'schema_version'")
    with pytest.raises(SQLiteConfigurationError) as caught:
        SQLiteStore(path)
    message = str(caught.value)
    assert "schema version 2 is newer than this library's (1)" in message
    assert "upgrade tool-execution-checkpoint" in message
    with _raw(path) as raw:
        assert raw.execute("SELECT value FROM tec_meta").fetchall() == [(2,)]


@pytest.mark.parametrize("version", [0, "1", None])
def test_an_unknown_schema_version_is_refused(tmp_path: Path, version: object) -> None:
    path = tmp_path / "store.db"
    SQLiteStore(path).close()
    with _raw(path) as raw:
        raw.execute("UPDATE tec_meta SET value = ?", (version,))
    with pytest.raises(SQLiteConfigurationError, match="unknown schema version"):
        SQLiteStore(path)


def test_a_foreign_table_of_the_same_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with _raw(path) as raw:
        raw.execute("CREATE TABLE tec_checkpoint (key TEXT)")
    with pytest.raises(SQLiteConfigurationError, match="not made by this library"):
        SQLiteStore(path)


def test_wal_mode_durable_commits_and_the_busy_timeout_are_set(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SQLiteStore(path, busy_timeout=0.25) as store:
        db = store._db  # the store's own connection: synchronous is per connection
        assert db is not None
        assert db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert store.busy_timeout == 0.25
        assert db.execute("PRAGMA busy_timeout").fetchone() == (0,)  # the store waits itself
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        with _raw(path) as raw:  # WAL is a property of the file
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            index = raw.execute("PRAGMA index_info(tec_checkpoint_status_updated)").fetchall()
        assert [column for _, _, column in index] == ["status", "updated_us"]


@settings(max_examples=200, deadline=None)
@given(moment=timestamps())
def test_the_indexed_time_is_timestamp_microseconds_of_the_records_time(moment: str) -> None:
    """The row codec computes updated_us without checking the record's text again (the record
    checked it): the same number timestamp_microseconds gives, for every profile text."""
    assert _checked_us(moment) == timestamp_microseconds(moment)


def test_the_columns_written_are_the_records_own(tmp_path: Path) -> None:
    created = create_checkpoint(BINDING, created_at="2026-01-01T01:00:00.123456789+01:00")
    claim = claim_execution(created, attempt_id="attempt-1", at="2026-01-02T00:00:00Z").next
    with SQLiteStore(tmp_path / "store.db") as store:
        assert store.create_if_absent(KEY, created)
        written = [_row(store.path)]
        assert store.compare_and_swap(KEY, 1, claim)
        written.append(_row(store.path))
    for row, record in zip(written, (created, claim), strict=True):
        assert row == (
            KEY,
            record.revision,
            record.status.value,
            "ns",
            "call-1",
            record.updated_at,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
        )


def _row(path: Path) -> tuple[object, ...]:
    with _raw(path) as db:
        [row] = db.execute(
            "SELECT key, revision, status, namespace, call_id, updated_at, updated_us, record"
            " FROM tec_checkpoint"
        ).fetchall()
    return cast(tuple[object, ...], row)


def test_arguments_are_checked_on_every_call_with_the_same_key(tmp_path: Path) -> None:
    """The store skips checking a key object it accepted before, never the rest: a bad
    record, revision or key after good calls with the same key object is still refused,
    and nothing is written."""
    created = create_checkpoint(BINDING, created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=NOW).next
    with SQLiteStore(tmp_path / "store.db") as store:
        assert store.create_if_absent(KEY, created)
        assert store.get(KEY) == created.to_dict()
        refused: list[tuple[Any, tuple[Any, ...], str]] = [
            (store.create_if_absent, (KEY, created.to_dict()), "record"),
            (store.create_if_absent, (KEY, claim), "record.revision"),
            (store.compare_and_swap, (KEY, 1, claim.to_dict()), "record"),
            (store.compare_and_swap, (KEY, 2, claim), "expected_revision"),
            (store.compare_and_swap, (KEY, True, claim), "expected_revision"),
            (store.compare_and_swap, (KEY, 1.0, claim), "expected_revision"),
            (store.compare_and_swap, ("", 1, claim), "key"),
            (store.create_if_absent, ("bad\x00key", created), "key"),
            (store.get, ("x" * 257,), "key"),
            (store.compare_and_swap, (KEY, 1, claim), ""),  # the same key object again
        ]
        for operation, arguments, field in refused:
            if not field:
                assert operation(*arguments) is True
                continue
            with pytest.raises(CheckpointError) as caught:
                operation(*arguments)
            assert caught.value.code is ErrorCode.INVALID_ARGUMENT, (arguments, field)
            assert caught.value.field == field
            assert store.get(KEY) == created.to_dict()  # nothing was written
        assert store.get(KEY) == claim.to_dict()
        with _raw(store.path) as db:
            assert db.execute("SELECT count(*) FROM tec_checkpoint").fetchone() == (1,)


# --- errors ----------------------------------------------------------------------------------


def test_a_locked_database_fails_after_the_busy_timeout_and_applies_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    created = create_checkpoint(BINDING, created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
    done = complete_execution(claim.next, attempt_id="attempt-1", at=NOW, result=SECRET)
    with SQLiteStore(path, busy_timeout=0.2) as store:
        store.create_if_absent(KEY, created)
        store.compare_and_swap(KEY, 1, claim.next)
        locker = _raw(path)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            start = time.monotonic()
            with pytest.raises(SQLiteBusyError) as caught:
                store.compare_and_swap(KEY, 2, done.next)
            waited = time.monotonic() - start
            assert store.get(KEY) == claim.next.to_dict()  # WAL readers are not blocked
            with pytest.raises(SQLiteBusyError, match="the store was not opened"):
                SQLiteStore(path, busy_timeout=0.05)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert 0.15 <= waited < 5.0
        message = str(caught.value)
        assert f"database {path} is locked after 0.2 s busy timeout" in message
        assert "another connection or process holds its write lock" in message
        assert "compare_and_swap was not applied" in message
        assert SECRET not in message
        assert KEY not in message
        assert caught.value.sqlite_errorname == "SQLITE_BUSY"
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert store.compare_and_swap(KEY, 2, done.next) is True


def test_a_missing_directory_fails_fast_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SQLiteConfigurationError) as caught:
        SQLiteStore(tmp_path / "nowhere" / "store.db")
    assert f"the directory {tmp_path / 'nowhere'} does not exist; create it" in str(caught.value)
    assert not (tmp_path / "nowhere").exists()


def test_a_directory_is_not_a_database_file(tmp_path: Path) -> None:
    with pytest.raises(SQLiteConfigurationError, match="is a directory; give the path of a"):
        SQLiteStore(tmp_path)


def test_a_file_that_is_not_a_database_fails_fast_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    content = b"these are somebody's notes, not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(SQLiteConfigurationError) as caught:
        SQLiteStore(path)
    assert f"cannot use {path}: it is not an SQLite database" in str(caught.value)
    assert caught.value.sqlite_errorname == "SQLITE_NOTADB"
    assert path.read_bytes() == content
    assert sorted(tmp_path.iterdir()) == [path]


READ_ONLY_OPEN = """
import os, sys
from tool_execution_checkpoint.stores.sqlite import SQLiteStore, SQLiteStoreError
if os.geteuid() == 0:  # root writes any file: become nobody to meet a read-only file
    os.setgid(65534)
    os.setuid(65534)
try:
    SQLiteStore(sys.argv[1])
except SQLiteStoreError as error:
    print(type(error).__name__, error.sqlite_errorname, error, sep="\\n")
else:
    print("opened")
"""


def test_a_read_only_file_fails_fast_naming_the_fix() -> None:
    # Not under pytest's tmp_path, which user nobody may not enter.
    directory = Path(tempfile.mkdtemp(prefix="tec-read-only-"))
    try:
        directory.chmod(0o777)
        path = directory / "store.db"
        with SQLiteStore(path) as store:
            store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))
        path.chmod(0o444)
        result = subprocess.run(
            [sys.executable, "-c", READ_ONLY_OPEN, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        kind, name, message = result.stdout.strip().split("\n")
        assert kind == "SQLiteConfigurationError", result.stdout
        assert name.startswith("SQLITE_READONLY")
        assert f"cannot write {path}: it is read-only for this process" in message
        assert "Give this process write access to the file, its directory" in message
    finally:
        shutil.rmtree(directory)


@pytest.mark.parametrize("path", [":memory:", ""])
def test_an_in_memory_database_is_refused(path: str) -> None:
    with pytest.raises(SQLiteConfigurationError, match="use MemoryStore for tests"):
        SQLiteStore(path)


def test_bad_arguments_raise_invalid_argument(tmp_path: Path) -> None:
    for timeout in (-1, float("nan"), float("inf"), True, "5", 3_601):
        with pytest.raises(CheckpointError) as caught:
            SQLiteStore(tmp_path / "store.db", busy_timeout=timeout)  # type: ignore[arg-type]
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == "busy_timeout"
    with pytest.raises(SQLiteConfigurationError, match=r"str or os\.PathLike"):
        SQLiteStore(42)  # type: ignore[arg-type]
    assert not (tmp_path / "store.db").exists()


def test_from_url_opens_an_absolute_path_and_reads_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "a dir"
    path.mkdir()
    url = f"sqlite://{path.as_posix().replace(' ', '%20')}/store.db?busy_timeout=0.2"
    with SQLiteStore.from_url(url) as store:
        assert store.path == path / "store.db"
        assert store.busy_timeout == 0.2
        assert store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))
    with SQLiteStore.from_url(url, busy_timeout=1) as store:
        assert store.busy_timeout == 1.0
        assert store.get(KEY) is not None


def test_from_url_opens_a_relative_path_as_the_command_line_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One parser of sqlite URLs: from_url once refused ``sqlite:relative/path``, which
    open_store and the command line take."""
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite:sub/store.db", "sqlite:./sub/store.db?busy_timeout=0.5"):
        with SQLiteStore.from_url(url) as store:
            assert store.path == tmp_path / "sub" / "store.db"
        with open_store(url) as opened:
            assert cast(SQLiteStore, opened).path == store.path
            assert cast(SQLiteStore, opened).busy_timeout == store.busy_timeout


def test_from_url_with_create_false_refuses_a_missing_file_and_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(SQLiteConfigurationError, match="no SQLite file"):
        SQLiteStore.from_url(f"sqlite://{missing}", create=False)
    assert not missing.exists()
    SQLiteStore.from_url(f"sqlite://{missing}").close()
    SQLiteStore.from_url(f"sqlite://{missing}", create=False).close()


@pytest.mark.parametrize(
    ("url", "says", "field"),
    [
        ("sqlite:///:memory:", "use MemoryStore", "url"),
        ("sqlite:///:memory:?busy_timeout=1", "use MemoryStore", "url"),
        ("sqlite://:memory:", "no host", "url"),
        ("sqlite://host/store.db", "no host", "url"),
        ("sqlite:", "names a local file", "url"),
        ("sqlite:///", "names a local file", "url"),
        ("postgresql:///store.db", "starts with sqlite:", "url"),
        ("sqlite:///tmp/store.db?mode=ro", "one query parameter, busy_timeout", "url"),
        ("sqlite:///tmp/store.db?busy_timeout=1&busy_timeout=2", "one query parameter", "url"),
        ("sqlite:///tmp/store.db#x", "no fragment", "url"),
        ("sqlite:///tmp/store.db?busy_timeout=soon", "number of seconds", "busy_timeout"),
    ],
)
def test_from_url_and_open_store_refuse_the_same_urls_alike(
    url: str, says: str, field: str
) -> None:
    """One parser behind both: the same refusal, CheckpointError INVALID_ARGUMENT naming
    the rule and no part of the URL (from_url once raised SQLiteConfigurationError)."""
    refusals = []
    openers: list[Any] = [SQLiteStore.from_url, AsyncSQLiteStore.from_url, open_url]
    if url.startswith("sqlite:"):  # open_store opens another scheme's store
        openers.append(open_store)
    for opener in openers:
        with pytest.raises(CheckpointError, match=says) as caught:
            opener(url)
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == field
        refusals.append(str(caught.value))
    assert len(set(refusals)) == 1, refusals


def test_a_closed_store_refuses_operations(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    store.close()
    store.close()
    with pytest.raises(SQLiteStoreError, match="is closed"):
        store.get(KEY)
    with pytest.raises(SQLiteStoreError, match="is closed"):
        store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))


def _commit_error(name: str, code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("simulated failure")
    error.sqlite_errorname = name
    error.sqlite_errorcode = code
    return error


@pytest.mark.parametrize("landed", [True, False])
def test_a_commit_that_fails_after_sqlite_ended_the_transaction_is_an_unknown_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    """SQLITE_IOERR at COMMIT: SQLite ends the transaction, and the commit frame may or
    may not be in the WAL. Reading back is the only way to tell, and it does tell."""
    created = create_checkpoint(BINDING, created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
    with SQLiteStore(tmp_path / "store.db") as store:
        store.create_if_absent(KEY, created)

        def commit(cursor: sqlite3.Cursor) -> None:
            cursor.execute("COMMIT" if landed else "ROLLBACK")
            raise _commit_error("SQLITE_IOERR_FSYNC", 10 | (4 << 8))

        monkeypatch.setattr(store, "_commit", commit)
        with pytest.raises(SQLiteOutcomeUnknownError) as caught:
            store.compare_and_swap(KEY, 1, claim.next)
        assert isinstance(caught.value, OutcomeUnknownError)
        assert caught.value.sqlite_errorname == "SQLITE_IOERR_FSYNC"
        assert "may or may not be applied. Read the record back" in str(caught.value)
        assert read_back_landed(store, KEY, claim.next) is landed


def test_a_commit_that_fails_leaving_the_transaction_open_was_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_BUSY at COMMIT leaves the transaction open: nothing was committed; the store
    rolls it back and says so, and the next write goes through."""
    created = create_checkpoint(BINDING, created_at=NOW)
    claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
    with SQLiteStore(tmp_path / "store.db", busy_timeout=0.1) as store:
        store.create_if_absent(KEY, created)

        def commit(_cursor: sqlite3.Cursor) -> None:
            raise _commit_error("SQLITE_BUSY", 5)

        monkeypatch.setattr(store, "_commit", commit)
        with pytest.raises(SQLiteBusyError) as caught:
            store.compare_and_swap(KEY, 1, claim.next)
        assert not isinstance(caught.value, OutcomeUnknownError)
        assert store.get(KEY) == created.to_dict()
        monkeypatch.undo()
        assert store.compare_and_swap(KEY, 1, claim.next) is True


# --- the async store's own surface -----------------------------------------------------------


def test_the_async_store_lists_closes_and_opens_without_blocking(tmp_path: Path) -> None:
    async def scenario() -> None:
        created = create_checkpoint(BINDING, created_at=NOW)
        async with await AsyncSQLiteStore.open(tmp_path / "store.db") as store:
            assert await store.create_if_absent(KEY, created) is True
            assert await store.get(KEY) == created.to_dict()
            [summary] = await store.list_records(Listing([Status.READY], limit=5))
            assert summary.key == KEY
            with pytest.raises(CheckpointError):
                await store.list_records("ready")  # type: ignore[arg-type]
        with pytest.raises(SQLiteStoreError, match="is closed"):
            await store.get(KEY)
        await store.aclose()  # idempotent
        again = AsyncSQLiteStore.from_url(f"sqlite://{tmp_path}/store.db?busy_timeout=0.5")
        assert again.store.busy_timeout == 0.5
        assert await again.get(KEY) == created.to_dict()
        await again.aclose()

    asyncio.run(scenario())


# --- real processes --------------------------------------------------------------------------

CLAIMER = """
import random, sys, time
from pathlib import Path
from tool_execution_checkpoint import (
    Action, Binding, checkpoint_key, claim_execution, complete_execution,
    create_checkpoint, decide_checkpoint,
)
from tool_execution_checkpoint.stores.sqlite import SQLiteStore

path, name, keys, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
at = "2026-01-01T00:00:00Z"
store = SQLiteStore(path, busy_timeout=30)
claims = []
for call in range(keys):  # both processes create and load every record before claiming
    binding = Binding("race", f"call-{call}", "tool", "1", "sha256:0")
    key = checkpoint_key(binding)
    store.create_if_absent(key, create_checkpoint(binding, created_at=at))
    decision = decide_checkpoint(store.get(key), binding)
    assert decision.action is Action.EXECUTE
    claims.append((call, key, claim_execution(decision.checkpoint, attempt_id=name, at=at)))
print("loaded", flush=True)
while not go.exists():
    time.sleep(0.001)
rng = random.Random(name)
rng.shuffle(claims)
for call, key, claim in claims:
    time.sleep(rng.uniform(0, 0.001))  # let the other process in: SQLite's busy wait is unfair
    if not store.compare_and_swap(key, claim.expected_revision, claim.next):
        print("lost", call, flush=True)
        continue
    print("ran", call, flush=True)  # the tool's one execution
    done = complete_execution(claim.next, attempt_id=name, at=at, result=call)
    assert store.compare_and_swap(key, done.expected_revision, done.next)
store.close()
"""


def test_two_processes_hammering_the_same_keys_run_each_tool_once(tmp_path: Path) -> None:
    path, go, keys = tmp_path / "store.db", tmp_path / "go", 300
    SQLiteStore(path).close()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(path), name, str(keys), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == "loaded\n"
    go.touch()  # both now hold a claim on every key at revision 1: one CAS each may win
    ran: Counter[int] = Counter()
    lost: Counter[int] = Counter()
    owners: dict[int, str] = {}
    for name, worker in zip(("p1", "p2"), workers, strict=True):
        output, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        for line in output.splitlines():
            kind, call = line.split()
            (ran if kind == "ran" else lost)[int(call)] += 1
            if kind == "ran":
                owners[int(call)] = name
    assert ran == Counter(range(keys)), "a tool ran twice, or never"
    assert lost == Counter(range(keys)), "a claim was lost twice, or never"
    assert len(set(owners.values())) == 2, "one process won every claim: no real race"
    with SQLiteStore(path) as store:
        for number, owner in owners.items():
            binding = Binding("race", f"call-{number}", "tool", "1", "sha256:0")
            stored = store.get(checkpoint_key(binding))
            assert stored is not None
            assert stored["execution"]["attemptId"] == owner
            assert stored["status"] == "completed"


WRITER = """
import os, sys
from tool_execution_checkpoint import (
    Binding, Checkpoint, Status, checkpoint_key, claim_delivery, claim_execution,
    complete_execution, create_checkpoint, release_delivery,
)
from tool_execution_checkpoint.stores.sqlite import SQLiteStore

path, log_path, keys = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SQLiteStore(path, busy_timeout=30)
log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
at = "2026-01-01T00:00:00Z"
payload = {"text": "x" * 1024}

def note(kind, call, revision):
    os.write(log, f"{kind} {call} {revision}\\n".encode())

def step(record):
    if record.status is Status.READY:
        return claim_execution(record, attempt_id="attempt", at=at)
    if record.status is Status.EXECUTING:
        return complete_execution(record, attempt_id="attempt", at=at, result=payload)
    if record.status is Status.COMPLETED:
        return claim_delivery(record, delivery_id=f"d{record.revision}", at=at)
    return release_delivery(record, delivery_id=record.delivery.delivery_id, at=at)

records = {}
for call in range(keys):
    binding = Binding("kill", f"call-{call}", "tool", "1", "sha256:0")
    key = checkpoint_key(binding)
    stored = store.get(key)
    if stored is None:
        created = create_checkpoint(binding, created_at=at)
        note("about", call, 1)
        assert store.create_if_absent(key, created)
        note("done", call, 1)
        stored = created.to_dict()
    records[call] = (key, Checkpoint.from_dict(stored))
while True:
    for call, (key, record) in records.items():
        transition = step(record)
        note("about", call, transition.next.revision)
        assert store.compare_and_swap(key, transition.expected_revision, transition.next)
        note("done", call, transition.next.revision)
        records[call] = (key, transition.next)
"""


def _committed_or_committing(log: Path, keys: int) -> tuple[list[set[int]], bool]:
    """Per call, the revisions its record may be at: the last one the writers confirmed
    and the one a killed writer was committing. Also whether a write was in flight."""
    last_done = [0] * keys
    pending: list[int | None] = [None] * keys
    in_flight = False
    for line in log.read_text().splitlines():
        kind, call, revision = line.split()
        if kind == "about":
            pending[int(call)] = int(revision)
        else:
            last_done[int(call)], pending[int(call)] = int(revision), None
        in_flight = kind == "about"
    allowed = [
        {done} | ({todo} if todo else set()) for done, todo in zip(last_done, pending, strict=True)
    ]
    return allowed, in_flight


def test_a_process_killed_mid_commit_leaves_every_record_at_its_old_or_new_revision(
    tmp_path: Path,
) -> None:
    path, log, keys = tmp_path / "store.db", tmp_path / "writes.log", 6
    rng = random.Random(7)
    killed_in_flight = 0
    revisions_seen = 0
    for _ in range(20):
        before = log.stat().st_size if log.exists() else 0
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(log), str(keys)])
        deadline = time.monotonic() + 30
        while (log.stat().st_size if log.exists() else 0) < before + 200:
            assert writer.poll() is None, "the writer died by itself"
            assert time.monotonic() < deadline, "the writer wrote nothing"
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        writer.send_signal(signal.SIGKILL)
        assert writer.wait() == -signal.SIGKILL
        allowed, in_flight = _committed_or_committing(log, keys)
        killed_in_flight += in_flight
        with _raw(path) as raw:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            rows = raw.execute("SELECT key, revision, status, record FROM tec_checkpoint")
            stored = {key: (revision, status, text) for key, revision, status, text in rows}
        raw.close()
        for call in range(keys):
            key = checkpoint_key(Binding("kill", f"call-{call}", "tool", "1", "sha256:0"))
            if key not in stored:
                assert 0 in allowed[call], "a confirmed create was lost"
                continue
            revision, status, text = stored[key]
            record = Checkpoint.from_dict(json.loads(text))
            assert (record.revision, record.status.value) == (revision, status)
            assert revision in allowed[call], (call, revision, allowed[call])
            revisions_seen += revision
    assert killed_in_flight >= 10, "too few kills landed while a write was in flight"
    assert revisions_seen > 20 * keys


def test_the_kill_storm_finds_sqlite_store_keeping_every_promise(tmp_path: Path) -> None:
    """On a loaded machine a worker may take longer to start than the storm lets it
    live, and a storm kills workers that never did anything: storms run (each one
    checked) until together they killed and executed enough to have tested something,
    at most five."""
    kills, executions, statuses = 0, 0, set()
    for seed in range(5):
        report = kill_storm(
            "tool_execution_checkpoint.stores.sqlite:SQLiteStore",
            str(tmp_path / f"store-{seed}.db"),
            directory=tmp_path / f"storm-{seed}",
            keys=400,
            seconds=3.0,
            seed=seed,
        )
        report.check()
        kills += report.kills
        executions += sum(map(len, report.executions.values()))
        statuses |= set(report.statuses.values())
        if kills >= 10 and executions >= 10 and statuses - {"delivered"}:
            break
    assert kills >= 10
    assert executions >= 10, "the workers were killed before they ran any tool"
    assert statuses - {"delivered"}, "nothing was left mid-flight"


def test_a_row_whose_columns_cannot_place_it_is_listed_by_its_record(tmp_path: Path) -> None:
    """A status column that is no status, or an updated_us that is no integer, once hid
    the row from every listing. Now it is listed by its record's own status and time, and
    as a BrokenRecord in every listing when its record is broken too; paging by the last
    key goes on past both."""
    path = tmp_path / "store.db"
    with SQLiteStore(path) as store:
        good = create_checkpoint(BINDING, created_at=NOW)
        rows = [
            ("k1", "garbage", 1, good.to_json()),  # sound record, garbage status
            ("k2", "ready", "not a time", good.to_json()),  # sound record, garbage time
            ("k3", b"\xff", 1, "null"),  # both broken
        ]
        with _raw(path) as raw:
            for key, status, updated_us, record in rows:
                raw.execute(
                    "INSERT INTO tec_checkpoint VALUES (?, 1, ?, 'ns', 'c', ?, ?, ?)",
                    (key, status, NOW, updated_us, record),
                )
        ready = store.list_records(Listing([Status.READY]))
        assert [(line.key, type(line).__name__) for line in ready] == [
            ("k1", "RecordSummary"),
            ("k2", "RecordSummary"),
            ("k3", "BrokenRecord"),
        ]
        assert ready[0] == RecordSummary.of("k1", good)
        delivered = store.list_records(Listing([Status.DELIVERED], written_before_us=2**62))
        assert [line.key for line in delivered] == ["k3"]
        pages, after = [], None
        while page := store.list_records(Listing(list(Status), after_key=after, limit=1)):
            pages += [line.key for line in page]
            after = page[-1].key
        assert pages == ["k1", "k2", "k3"]
