"""SQLiteStore: a durable checkpoint store in one SQLite file, standard library only.

docs/stores/sqlite.md describes its design: the transactions, sharing between threads
and processes, the busy loop, the schema.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, Self

from ...records import Checkpoint
from .. import core
from ..core import BrokenRecord, EncodedRecord, Listing, RecordSummary
from .connection import connect, patiently, roll_back
from .errors import (
    SQLiteConfigurationError,
    SQLiteNotAppliedError,
    SQLiteStoreError,
    failure,
    outcome_unknown,
)
from .paths import check_busy_timeout, database_path, url_location
from .sql import (
    BEGIN,
    INSERT,
    SELECT,
    SELECT_WRITTEN,
    UPDATE,
    listing_queries,
    stored_bytes,
    summary,
)

__all__ = ["SQLiteStore", "open_url"]


class SQLiteStore:
    """A :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore` in one SQLite
    file.

    Args:
        path: The database file; created with its tables if it does not exist. Its
            directory must exist and be writable: SQLite keeps ``<path>-wal`` and
            ``<path>-shm`` next to it, and it must be on a local file system (WAL
            needs shared memory). ``":memory:"`` is refused: it is neither durable nor
            shared.
        busy_timeout: How many seconds an operation waits for another connection's
            write lock before raising :class:`SQLiteBusyError` (0 to 3,600).

    The constructor fails fast: it opens the file, switches it to WAL, sets
    ``synchronous=FULL`` and checks, in one write transaction, that the schema is this
    library's and that the file is writable. It raises :class:`SQLiteConfigurationError`
    naming what to fix, :class:`SQLiteBusyError` if the file stayed locked, and
    CheckpointError INVALID_ARGUMENT for a bad ``busy_timeout``.

    Errors. Bad arguments raise CheckpointError (INVALID_ARGUMENT) before anything is
    written. A failed operation raises a :class:`SQLiteStoreError`, and a write that
    raises one was not applied, with one exception: :class:`SQLiteOutcomeUnknownError`
    (an :class:`~tool_execution_checkpoint.stores.OutcomeUnknownError`). It is raised
    exactly when the statement changed its row and then ``COMMIT`` failed leaving the
    connection outside a transaction (``SQLITE_IOERR``, ``SQLITE_FULL``,
    ``SQLITE_NOMEM``, ``SQLITE_CORRUPT`` during the WAL write or its fsync): SQLite
    rolled back in memory, but the commit frame may already be in the WAL, where a
    recovery would find it. A failure at ``BEGIN IMMEDIATE`` or in the statement, and a
    ``COMMIT`` that failed but left the transaction open (``SQLITE_BUSY``, which the store
    then rolls back), are known not to have applied the write. Messages name the file,
    SQLite's error code and what to do; they never hold a key, a record or a payload.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.busy_timeout: Final = check_busy_timeout(busy_timeout)
        self.path: Final = database_path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = connect(self.path, self.busy_timeout)
        # Every operation runs its statements through this one cursor, under the lock:
        # Connection.execute makes a new cursor per statement, which costs more than
        # BEGIN IMMEDIATE or COMMIT themselves.
        self._cursor: sqlite3.Cursor | None = self._db.cursor()

    @classmethod
    def from_url(cls, url: str, *, busy_timeout: float | None = None, create: bool = True) -> Self:
        """Open the store a URL names: ``sqlite:///absolute/path.db`` or
        ``sqlite:relative/path.db`` (relative to the working directory), optionally with
        ``?busy_timeout=SECONDS``. :func:`url_location` says which URLs are taken; it is
        the one parser of sqlite URLs, so ``from_url`` and
        :func:`~tool_execution_checkpoint.open_store` take the same ones.

        Args:
            url: The URL; never shown in a message.
            busy_timeout: Overrides the URL's (default 5 s).
            create: With False, a file that does not exist is refused, never created.

        Raises:
            CheckpointError: INVALID_ARGUMENT, naming no part of the URL, for a URL
                :func:`url_location` refuses, or a bad ``busy_timeout``.
            SQLiteConfigurationError: as the constructor does, and for a missing file
                with ``create=False``.
        """
        path, from_url = url_location(url)
        if not create and not path.is_file():
            raise SQLiteConfigurationError(
                f"no SQLite file at {path}: opening it with create=False never creates one"
            )
        chosen = busy_timeout if busy_timeout is not None else from_url
        return cls(path, busy_timeout=5.0 if chosen is None else chosen)

    # --- the operations --------------------------------------------------------------------

    def _open_cursor(self) -> sqlite3.Cursor:
        """The open connection's cursor (call with the lock held)."""
        if self._cursor is None:
            raise SQLiteNotAppliedError(f"the store on {self.path} is closed")
        return self._cursor

    def _patiently(
        self,
        runner: sqlite3.Connection | sqlite3.Cursor,
        statement: str,
        parameters: Sequence[object] = (),
    ) -> sqlite3.Cursor:
        """Run a statement that takes a lock, waiting up to ``busy_timeout`` seconds
        while the database is busy (see :func:`.connection.patiently`)."""
        return patiently(runner, statement, parameters, self.busy_timeout)

    def _failure(self, error: sqlite3.Error, operation: str) -> SQLiteStoreError:
        """The store error ``error`` means for ``operation`` (see :func:`.errors.failure`)."""
        return failure(error, operation, self.path, self.busy_timeout)

    def _read(self, operation: str, *queries: tuple[str, Sequence[object]]) -> list[list[Any]]:
        """The rows of each read query, run in turn under the lock; a SQLite error is the
        store error it means for ``operation``."""
        with self._lock:
            cursor = self._open_cursor()
            try:
                return [self._patiently(cursor, *query).fetchall() for query in queries]
            except sqlite3.Error as error:
                raise self._failure(error, operation) from error

    def _row(self, operation: str, statement: str, key: str) -> Any:
        """The one row ``statement`` reads for ``key``, or None when there is none."""
        [rows] = self._read(operation, (statement, (key,)))
        return rows[0] if rows else None

    @staticmethod
    def _commit(cursor: sqlite3.Cursor) -> None:
        cursor.execute("COMMIT")

    def _write(self, operation: str, statement: str, parameters: tuple[object, ...]) -> bool:
        """Run ``statement`` alone in a write transaction; True if it changed one row.

        Three statements, BEGIN IMMEDIATE, the write and COMMIT, where one autocommit
        statement would be as atomic: that is what tells a write that failed before its
        row changed (not applied) from a COMMIT that failed (the outcome unknown)."""
        with self._lock:
            cursor = self._open_cursor()
            db = cursor.connection
            if db.in_transaction:  # never inherit a transaction an interrupt left open
                roll_back(db)
            try:
                self._patiently(cursor, BEGIN)
                if cursor.execute(statement, parameters).rowcount != 1:
                    cursor.execute("ROLLBACK")
                    return False
            except sqlite3.Error as error:
                roll_back(db)
                raise self._failure(error, operation) from error
            except BaseException:
                roll_back(db)
                raise
            try:
                self._commit(cursor)
            except sqlite3.Error as error:
                if db.in_transaction:  # the COMMIT did not happen (SQLITE_BUSY)
                    roll_back(db)
                    raise self._failure(error, operation) from error
                raise outcome_unknown(error, operation, self.path) from error
            return True

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted. One ``INSERT ... ON CONFLICT(key) DO NOTHING``; never overwrites."""
        parameters = (key, *_columns(core.encode_create(key, record)))
        return self._write("create_if_absent", INSERT, parameters)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Replace the record under ``key`` with ``record`` if its stored revision is
        still ``expected_revision``; return whether it did. One
        ``UPDATE ... WHERE key = ? AND revision = ?``, committed durably whatever
        ``durable`` says (it is accepted and ignored)."""
        del durable
        columns = _columns(core.encode_swap(key, expected_revision, record))
        return self._write("compare_and_swap", UPDATE, (*columns, key, expected_revision))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return the record stored under ``key``, a fresh
        :class:`~tool_execution_checkpoint.stores.StoredRecord`, or None when no row is
        there.

        Raises CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when the row's
        record is not a valid record, whatever its bytes (not UTF-8, not JSON, too deep,
        not an object, a record that does not validate): see
        :func:`~tool_execution_checkpoint.stores.decode_stored`. The row was written by
        something else than this store; the error names no value."""
        core.check_key(key)
        row = self._row("get", SELECT, key)
        if row is None:
            return None
        return core.decode_stored(stored_bytes(row[0]))

    def clock_us(self) -> int:
        """The time now on the host's clock, in microseconds since the epoch."""
        return time.time_ns() // 1_000

    def written_us(self, key: str) -> int | None:
        """The ``updatedAt`` of the record under ``key`` in microseconds (its indexed
        column, or its record's when that is not an integer); None when no row is there
        or neither reads."""
        core.check_key(key)
        row = self._row("written_us", SELECT_WRITTEN, key)
        if row is None or type(row[0]) is int:
            return None if row is None else int(row[0])
        line = self._listed(key, None, row[1])
        return line.written_us if isinstance(line, RecordSummary) else None

    def list_records(self, listing: Listing) -> list[RecordSummary | BrokenRecord]:
        """The records ``listing`` selects (see
        :meth:`~tool_execution_checkpoint.stores.OperableCheckpointStore.list_records`;
        its time bound on the host's clock, the records' ``updatedAt``). Reads the indexed
        columns, not the records.

        A row whose columns cannot place it (its status column is no status, its
        ``updated_us`` no integer, or another column is not what this store writes) is
        listed by its record's own status and time instead; when that record is not a
        valid record either, it is a :class:`~tool_execution_checkpoint.stores.BrokenRecord`
        in every listing. A row whose columns are sound but whose record is broken is
        listed by its columns: ``get`` then raises INVALID_CHECKPOINT for it.

        Raises CheckpointError INVALID_ARGUMENT for a ``listing`` that is not a
        :class:`~tool_execution_checkpoint.stores.Listing`."""
        listing = core.check_listing(listing)
        wanted = sorted(status.value for status in listing.statuses)
        before, after, limit = listing.written_before_us, listing.after_key, listing.limit
        if not wanted:  # the Listing bounded the rest to what SQLite's integers hold
            return []
        found: list[RecordSummary | BrokenRecord] = []
        while True:
            rows, odd, cut = self._list_page(wanted, before, after, limit)
            for key in sorted(rows.keys() | odd.keys()):
                if cut is not None and key > cut:
                    break
                line = self._listed(key, rows.get(key), odd.get(key))
                if line is not None and listing.admits(line):
                    found.append(line)
                    if len(found) == limit:
                        return found
            if cut is None:
                return found
            after = cut  # a query filled its page: go on after the last key it gave

    def _list_page(
        self, wanted: list[str], before: int | None, after: str | None, limit: int
    ) -> tuple[dict[str, RecordSummary | None], dict[str, object], str | None]:
        """One page of each query: the indexed rows by key (None where a column is not
        what this store writes), the odd rows' records by key, and the last key that
        both pages cover when either is full (None when neither is)."""
        (statement, parameters), (odd_statement, odd_parameters) = listing_queries(
            wanted, before, after, limit
        )
        listed, odd_rows = self._read(
            "list_records", (statement, parameters), (odd_statement, odd_parameters)
        )
        rows = {row[0]: summary(row) for row in listed}
        odd: dict[str, object] = dict(odd_rows)
        full = [page[-1][0] for page in (listed, odd_rows) if len(page) == limit]
        return rows, odd, min(full) if full else None

    def _listed(
        self, key: str, columns: RecordSummary | None, record: object
    ) -> RecordSummary | BrokenRecord | None:
        """The listing line of one row: by its columns when they are sound, else by its
        record (read now if the odd query did not bring it); None if the row is gone."""
        if columns is not None and record is None:
            return columns
        if record is None:
            row = self._row("list_records", SELECT, key)
            if row is None:
                return None
            record = row[0]
        return core.listing_line(key, stored_bytes(record))

    def close(self) -> None:
        """Close the connection. Idempotent; operations afterwards raise
        SQLiteStoreError."""
        with self._lock:
            db, self._db, self._cursor = self._db, None, None
        if db is not None:
            db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


def _columns(encoded: EncodedRecord) -> tuple[object, ...]:
    """The values a write stores beside the key, in the order INSERT and UPDATE name them:
    revision, status, namespace, call id, ``updatedAt``, its microseconds, the record."""
    record, binding = encoded.record, encoded.record.binding
    return (
        record.revision,
        record.status.value,
        binding.namespace,
        binding.call_id,
        record.updated_at,
        encoded.updated_us,
        encoded.text,
    )


def open_url(url: str, *, busy_timeout: float | None = None, create: bool = True) -> SQLiteStore:
    """The opener of ``sqlite:`` URLs for :func:`~tool_execution_checkpoint.open_store`:
    :meth:`SQLiteStore.from_url`, with the same URLs, arguments and errors."""
    return SQLiteStore.from_url(url, busy_timeout=busy_timeout, create=create)
