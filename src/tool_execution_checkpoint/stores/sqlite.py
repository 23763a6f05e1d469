"""SQLiteStore: a durable checkpoint store in one SQLite file, standard library only.

::

    from tool_execution_checkpoint.stores.sqlite import SQLiteStore

    store = SQLiteStore("/var/lib/agent/checkpoints.db")   # or SQLiteStore.from_url(...)

Each operation is one statement in its own transaction: create-if-absent is one
``INSERT ... ON CONFLICT(key) DO NOTHING`` and the compare-and-swap one
``UPDATE ... WHERE key = ? AND revision = ?``, each between ``BEGIN IMMEDIATE`` and
``COMMIT`` and judged by its row count; nothing is read and then written. The file is in
WAL mode with ``synchronous=FULL``, so a write that returned True was fsynced to the WAL
before it returned and survives a crash of the process or of the machine.

Sharing. Many threads may share one store: it holds one connection and a lock, so its
operations run one at a time (SQLite runs one write at a time anyway). Measured with 1 and
8 threads, one locked connection was as fast as a connection per thread with an
in-process write lock, and faster and steadier than a connection per thread left to
SQLite's busy handler, which sleeps in steps of up to 100 ms when writers collide
(``benchmarks/store_sqlite.py`` measures the chosen design). Many processes on one
machine may open the same file, each with its own store: SQLite's file locks serialise
their writes and a writer that finds the file locked waits up to ``busy_timeout``
seconds, trying again every 0.1 to 2 ms (SQLite's own busy handler backs off to 100 ms
between tries and starves a waiting process while others keep writing). WAL needs
shared memory, so the file must be on a local file system, not a network share. Do not
carry a store across ``fork()``: open it in the child.

Its clock is the host's: a record was written at its ``updatedAt``, which every process
on the one machine stamps with the same clock (see
:class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`).

The schema is created on first use and versioned in ``tec_meta``; a file whose schema is
newer than this library's is refused, never rewritten. Tables are prefixed ``tec_``; give
the store a file of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import CheckpointError, ErrorCode
from ..records import Checkpoint
from ..table import Status
from .core import (
    BrokenRecord,
    OutcomeUnknownError,
    RecordSummary,
    StoreConfigurationError,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    check_key,
    check_listing,
    decode_stored,
    encode_create,
    encode_swap,
    listing_line,
)

__all__ = [
    "SCHEMA_VERSION",
    "AsyncSQLiteStore",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteNotAppliedError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStore",
    "SQLiteStoreError",
    "open_url",
    "url_location",
]

SCHEMA_VERSION: Final = 1
"""The version of the tables this module writes, kept in ``tec_meta``."""

_MAX_BUSY_TIMEOUT = 3_600.0
_INT64_MAX = 2**63 - 1

# SQLite's primary result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT = 5, 6, 8, 10, 11
_FULL, _CANTOPEN, _NOTADB, _PERM, _AUTH = 13, 14, 26, 3, 23

_SCHEMA = (
    """CREATE TABLE tec_checkpoint (
        key TEXT PRIMARY KEY NOT NULL,
        revision INTEGER NOT NULL CHECK (revision >= 1),
        status TEXT NOT NULL,
        namespace TEXT NOT NULL,
        call_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_us INTEGER NOT NULL,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX tec_checkpoint_status_updated ON tec_checkpoint (status, updated_us)",
)
_INSERT = (
    "INSERT INTO tec_checkpoint"
    " (key, revision, status, namespace, call_id, updated_at, updated_us, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
)
_UPDATE = (
    "UPDATE tec_checkpoint SET revision = ?, status = ?, namespace = ?, call_id = ?,"
    " updated_at = ?, updated_us = ?, record = ? WHERE key = ? AND revision = ?"
)
# Text columns are read as blobs and decoded here: SQLite's own decoding of a column that
# is not UTF-8 raises an error whose message quotes the row's text.
_SELECT = "SELECT CAST(record AS BLOB) FROM tec_checkpoint WHERE key = ?"
_LIST = (
    "SELECT key, CAST(namespace AS BLOB), CAST(call_id AS BLOB), status, revision,"
    " CAST(updated_at AS BLOB), updated_us"
    " FROM tec_checkpoint WHERE status IN ({statuses}){before}{after} ORDER BY key LIMIT ?"
)
_KNOWN = sorted(status.value for status in Status)
# The rows whose status column is no status, or whose updated_us is not an integer (text
# and blobs sort after every integer): listed by their record, since the indexed columns
# cannot place them. One range of the (status, updated_us) index per term, joined by
# UNION ALL (SQLite does not use the index for the same terms joined by OR); "+key" keeps
# the planner off the key's index, which would scan every row after the key.
_ODD_TERMS = (
    "status < ?",
    *("status > ? AND status < ?" for _ in _KNOWN[1:]),
    "status > ?",
    *("status = ? AND updated_us > ?" for _ in _KNOWN),
)
_ODD = (
    " UNION ALL ".join(
        f"SELECT key, CAST(record AS BLOB) FROM tec_checkpoint WHERE {term}{{after}}"
        for term in _ODD_TERMS
    )
    + " ORDER BY key LIMIT ?"
)
_ODD_BOUNDS: tuple[tuple[object, ...], ...] = (
    (_KNOWN[0],),
    *itertools.pairwise(_KNOWN),
    (_KNOWN[-1],),
    *((status, _INT64_MAX) for status in _KNOWN),
)
_SELECT_RECORD = "SELECT CAST(record AS BLOB) FROM tec_checkpoint WHERE key = ?"
_SELECT_WRITTEN = "SELECT updated_us, CAST(record AS BLOB) FROM tec_checkpoint WHERE key = ?"
_BEGIN = "BEGIN IMMEDIATE"

_READS = frozenset({"get", "list_records", "written_us"})

_T = TypeVar("_T")


class SQLiteStoreError(StoreError):
    """An SQLite operation failed: the base of the store's errors, each of which is also
    in one category of :class:`~tool_execution_checkpoint.stores.StoreError`. A write
    that raises one that is not :class:`SQLiteOutcomeUnknownError` failed before its
    COMMIT and was not applied.

    Attributes:
        sqlite_errorname: SQLite's extended result code name (``"SQLITE_BUSY"``), or None
            when the failure did not come from SQLite.
    """

    sqlite_errorname: str | None

    def __init__(self, message: str, *, sqlite_errorname: str | None = None) -> None:
        super().__init__(message)
        self.sqlite_errorname = sqlite_errorname


class SQLiteNotAppliedError(SQLiteStoreError, StoreNotAppliedError):
    """An operation failed and changed nothing, for a reason neither of configuration
    nor of a lock: a corrupt database, a full disk, an I/O error before the COMMIT, a
    closed store, or another SQLite failure. The message names it and what to do."""


class SQLiteConfigurationError(SQLiteStoreError, StoreConfigurationError):
    """The database cannot be used as configured: a path that names no usable file (or
    holds a NUL character), a directory that does not exist, a file that is not an SQLite
    database, a file this process may not write, a schema version this library does not
    know, or (opening with ``create=False``) a file that does not exist. The message names
    what to fix; retrying does not help. A URL that cannot be parsed is CheckpointError
    INVALID_ARGUMENT instead (see :func:`url_location`)."""


class SQLiteBusyError(SQLiteStoreError, StoreUnavailableError):
    """The database stayed locked for the whole busy timeout: another connection or
    process held its write lock. The operation was not applied; retry it later, or raise
    ``busy_timeout``."""


class SQLiteOutcomeUnknownError(SQLiteStoreError, OutcomeUnknownError):
    """The COMMIT of a write failed and SQLite ended the transaction: the write may or
    may not be durable. Read the record back and decide again.

    Which failures are these, exactly: the statement ran and changed its row, then
    ``COMMIT`` raised and left the connection outside a transaction. That happens with
    ``SQLITE_IOERR`` (a failed write or fsync of the WAL), ``SQLITE_FULL``,
    ``SQLITE_NOMEM`` and ``SQLITE_CORRUPT``, after which SQLite rolls back its in-memory
    state; but the commit frame may already be in the WAL file, and a later recovery of
    that file then finds the write committed. Every other failure is known not to have
    applied the write and raises another :class:`SQLiteStoreError`: one before the
    statement changed its row (at ``BEGIN IMMEDIATE`` or in the statement), and a
    ``COMMIT`` that failed but left the transaction open (``SQLITE_BUSY``), which the
    store rolls back.
    """


def _error_name(error: sqlite3.Error) -> str | None:
    name = getattr(error, "sqlite_errorname", None)
    return name if isinstance(name, str) else None


def _primary_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _check_busy_timeout(value: object) -> float:
    """Seconds from 0 to 3,600 (NaN and infinities fail the comparison)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        value = math.nan
    if not 0 <= value <= _MAX_BUSY_TIMEOUT:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be a number of seconds from 0 to {_MAX_BUSY_TIMEOUT:g}",
            field="busy_timeout",
            limit=int(_MAX_BUSY_TIMEOUT),
        )
    return float(value)


def _unencodable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (no file system path can)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _database_path(path: object) -> Path:
    """The absolute path of the database file, refusing what names no durable file."""
    if not isinstance(path, str | os.PathLike):
        raise SQLiteConfigurationError("the database path must be a str or os.PathLike")
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raise SQLiteConfigurationError("the database path must be text, not bytes")
    if "\x00" in raw or _unencodable(raw):
        raise SQLiteConfigurationError(
            "the database path holds a NUL character or a lone surrogate"
        )
    if raw in ("", ":memory:") or raw.startswith("file::memory:"):
        raise SQLiteConfigurationError(
            "an in-memory SQLite database is neither durable nor shared between"
            " connections and processes: give the path of a database file, or use"
            " MemoryStore for tests"
        )
    absolute = Path(os.path.abspath(raw))
    if absolute.is_dir():
        raise SQLiteConfigurationError(
            f"cannot open {absolute}: it is a directory; give the path of a database file inside it"
        )
    if not absolute.parent.is_dir():
        raise SQLiteConfigurationError(
            f"cannot open {absolute}: the directory {absolute.parent} does not exist;"
            " create it first (the store creates only the file)"
        )
    return absolute


class SQLiteStore:
    """A :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore` in one SQLite
    file.

    Args:
        path: The database file; created with its tables if it does not exist. Its
            directory must exist and be writable: SQLite keeps ``<path>-wal`` and
            ``<path>-shm`` next to it. ``":memory:"`` is refused (see the module
            docstring).
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
        self.busy_timeout: Final = _check_busy_timeout(busy_timeout)
        self.path: Final = _database_path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = self._open()
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

    # --- opening ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            # timeout=0: SQLite's own busy handler is off; _patiently() waits instead.
            db = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise self._failure(error, "open") from error
        try:
            self._configure(db)
        except BaseException:
            db.close()
            raise
        return db

    def _configure(self, db: sqlite3.Connection) -> None:
        """Switch to WAL, make commits durable, then check the schema and that the file
        is writable in one write transaction (creating the tables the first time)."""
        try:
            (mode,) = self._patiently(db, "PRAGMA journal_mode=WAL").fetchone()
            if str(mode).lower() != "wal":
                raise SQLiteConfigurationError(
                    f"cannot use {self.path}: SQLite refused WAL mode (journal_mode is"
                    f" {mode}); give this process write access to the file and put it on a"
                    " local file system with shared memory"
                )
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA fullfsync=ON")  # macOS: fsync reaches the platter
            self._patiently(db, "BEGIN IMMEDIATE")
            db.execute("CREATE TABLE IF NOT EXISTS tec_meta (name TEXT PRIMARY KEY, value)")
            # A write that changes no row: fails now, not at the first CAS, when the
            # file, its directory or its -wal/-shm files are read-only for this process.
            db.execute("UPDATE tec_meta SET value = value WHERE name = ''")
            row = db.execute("SELECT value FROM tec_meta WHERE name = 'schema_version'").fetchone()
            if row is None:
                self._create_schema(db)
            elif row[0] != SCHEMA_VERSION:
                db.execute("ROLLBACK")
                raise SQLiteConfigurationError(self._version_problem(row[0]))
            db.execute("COMMIT")
        except sqlite3.Error as error:
            raise self._failure(error, "open") from error

    def _create_schema(self, db: sqlite3.Connection) -> None:
        exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'tec_checkpoint'").fetchone()
        if exists is not None:
            db.execute("ROLLBACK")
            raise SQLiteConfigurationError(
                f"cannot use {self.path}: it holds a tec_checkpoint table but no schema"
                " version in tec_meta; it was not made by this library: give the store a"
                " file of its own"
            )
        for statement in _SCHEMA:
            db.execute(statement)
        db.execute(
            "INSERT INTO tec_meta (name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
        )

    def _version_problem(self, found: object) -> str:
        if type(found) is int and found > SCHEMA_VERSION:
            return (
                f"cannot use {self.path}: its schema version {found} is newer than this"
                f" library's ({SCHEMA_VERSION}); upgrade tool-execution-checkpoint in every"
                " process that opens it, and do not downgrade the file"
            )
        return (
            f"cannot use {self.path}: tec_meta holds an unknown schema version (this"
            f" library writes {SCHEMA_VERSION}); restore the file from a backup or give the"
            " store a new file"
        )

    # --- errors ----------------------------------------------------------------------------

    def _failure(self, error: sqlite3.Error, operation: str) -> SQLiteStoreError:
        """Translate an sqlite3 error into a store error whose message says what to do.
        Only SQLite's own message is kept, never a statement's parameters."""
        name = _error_name(error)
        code = _primary_code(error)
        if operation == "open":
            what = "the store was not opened"
        elif operation in _READS:
            what = f"{operation} failed"
        else:
            what = f"{operation} was not applied"
        cause = f"{error} ({name})" if name else str(error)
        if code in (_BUSY, _LOCKED):
            return SQLiteBusyError(
                f"database {self.path} is locked after {self.busy_timeout:g} s busy timeout:"
                f" another connection or process holds its write lock; {what}. Retry"
                " later, or raise busy_timeout",
                sqlite_errorname=name,
            )
        if code == _READONLY:
            return SQLiteConfigurationError(
                f"cannot write {self.path}: it is read-only for this process ({cause});"
                f" {what}. Give this process write access to the file, its directory and"
                " its -wal and -shm files",
                sqlite_errorname=name,
            )
        if code in (_CANTOPEN, _PERM, _AUTH):
            return SQLiteConfigurationError(
                f"cannot open {self.path}: {cause}; check that the file and its directory"
                " exist and that this process may read and write them",
                sqlite_errorname=name,
            )
        if code == _NOTADB:
            return SQLiteConfigurationError(
                f"cannot use {self.path}: it is not an SQLite database ({cause}); give the"
                " path of a new file or of an existing checkpoint database",
                sqlite_errorname=name,
            )
        if code == _CORRUPT:
            return SQLiteNotAppliedError(
                f"database {self.path} is corrupt ({cause}); {what}. Stop the processes"
                " using it, run PRAGMA integrity_check and restore it from a backup",
                sqlite_errorname=name,
            )
        if code == _FULL:
            return SQLiteNotAppliedError(
                f"the disk holding {self.path} is full ({cause}); {what}. Free space, then retry",
                sqlite_errorname=name,
            )
        if code == _IOERR:
            return SQLiteNotAppliedError(
                f"disk I/O error on {self.path} ({cause}); {what}. Check the disk and the"
                " file system",
                sqlite_errorname=name,
            )
        return SQLiteNotAppliedError(
            f"SQLite failed on {self.path}: {cause}; {what}", sqlite_errorname=name
        )

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
        """Run a statement that takes a lock (BEGIN IMMEDIATE, a read, the WAL switch),
        retrying while the database is busy, for up to ``busy_timeout`` seconds.

        SQLite's own busy handler sleeps 1, 2, 5, ... up to 100 ms between tries, so a
        process that waits while others keep writing is starved: measured, one of four
        writing processes got no write through in two seconds. This loop tries again
        after 0.1 to 2 ms, so waiting writers get their turn."""
        deadline: float | None = None
        pause = 0.0001
        while True:
            try:
                return runner.execute(statement, parameters)
            except sqlite3.OperationalError as error:
                if _primary_code(error) != _BUSY:
                    raise
                now = time.monotonic()
                deadline = now + self.busy_timeout if deadline is None else deadline
                if now >= deadline:
                    raise
                time.sleep(min(pause * (0.5 + random.random()), deadline - now))
                pause = min(pause * 2, 0.002)

    @staticmethod
    def _roll_back(db: sqlite3.Connection) -> None:
        if db.in_transaction:
            # When even ROLLBACK fails, SQLite ends the transaction itself.
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")

    @staticmethod
    def _commit(cursor: sqlite3.Cursor) -> None:
        cursor.execute("COMMIT")

    def _write(self, operation: str, statement: str, parameters: tuple[object, ...]) -> bool:
        """Run ``statement`` alone in a write transaction; True if it changed one row.

        Three statements, BEGIN IMMEDIATE, the write and COMMIT, where one autocommit
        statement would be as atomic: that is what tells a write that failed before its
        row changed (not applied) from a COMMIT that failed (the outcome unknown). They
        cost no more than the one statement, measured (the fsync at COMMIT is the same)."""
        with self._lock:
            cursor = self._open_cursor()
            db = cursor.connection
            if db.in_transaction:  # never inherit a transaction an interrupt left open
                self._roll_back(db)
            try:
                self._patiently(cursor, _BEGIN)
                if cursor.execute(statement, parameters).rowcount != 1:
                    cursor.execute("ROLLBACK")
                    return False
            except sqlite3.Error as error:
                self._roll_back(db)
                raise self._failure(error, operation) from error
            except BaseException:
                self._roll_back(db)
                raise
            try:
                self._commit(cursor)
            except sqlite3.Error as error:
                if db.in_transaction:  # the COMMIT did not happen (SQLITE_BUSY)
                    self._roll_back(db)
                    raise self._failure(error, operation) from error
                name = _error_name(error)
                raise SQLiteOutcomeUnknownError(
                    f"the COMMIT of {operation} on {self.path} failed ({error}"
                    f"{f', {name}' if name else ''}) after the write may have reached the"
                    " WAL: it may or may not be applied. Read the record back and decide"
                    " again",
                    sqlite_errorname=name,
                ) from error
            return True

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted. One ``INSERT ... ON CONFLICT(key) DO NOTHING``; never overwrites."""
        encoded = encode_create(key, record)
        record, binding = encoded.record, encoded.record.binding
        parameters = (
            key,
            record.revision,
            record.status.value,
            binding.namespace,
            binding.call_id,
            record.updated_at,
            encoded.updated_us,
            encoded.text,
        )
        return self._write("create_if_absent", _INSERT, parameters)

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """Replace the record under ``key`` with ``record`` if its stored revision is
        still ``expected_revision``; return whether it did. One
        ``UPDATE ... WHERE key = ? AND revision = ?``."""
        encoded = encode_swap(key, expected_revision, record)
        record, binding = encoded.record, encoded.record.binding
        parameters = (
            record.revision,
            record.status.value,
            binding.namespace,
            binding.call_id,
            record.updated_at,
            encoded.updated_us,
            encoded.text,
            key,
            expected_revision,
        )
        return self._write("compare_and_swap", _UPDATE, parameters)

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return the record stored under ``key``, a fresh
        :class:`~tool_execution_checkpoint.stores.StoredRecord`, or None when no row is
        there.

        Raises CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when the row's
        record is not a valid record, whatever its bytes (not UTF-8, not JSON, too deep,
        not an object, a record that does not validate): see
        :func:`~tool_execution_checkpoint.stores.decode_stored`. The row was written by
        something else than this store; the error names no value."""
        check_key(key)
        with self._lock:
            cursor = self._open_cursor()
            try:
                row = self._patiently(cursor, _SELECT, (key,)).fetchone()
            except sqlite3.Error as error:
                raise self._failure(error, "get") from error
        if row is None:
            return None
        return decode_stored(_stored_bytes(row[0]))

    def clock_us(self) -> int:
        """The time now on the host's clock, in microseconds since the epoch."""
        return time.time_ns() // 1_000

    def written_us(self, key: str) -> int | None:
        """The ``updatedAt`` of the record under ``key`` in microseconds (its indexed
        column, or its record's when that is not an integer); None when no row is there
        or neither reads."""
        check_key(key)
        with self._lock:
            cursor = self._open_cursor()
            try:
                row = self._patiently(cursor, _SELECT_WRITTEN, (key,)).fetchone()
            except sqlite3.Error as error:
                raise self._failure(error, "written_us") from error
        if row is None or type(row[0]) is int:
            return None if row is None else int(row[0])
        line = self._listed(key, None, row[1])
        return line.written_us if isinstance(line, RecordSummary) else None

    def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """Records in any of ``statuses`` last written before ``written_before_us``
        (microseconds since the epoch on the host's clock, the records' ``updatedAt``;
        None for any time), in key order, starting after ``after_key``, at most ``limit``
        (at least 1) of them. Page by passing the last key back. Reads the indexed
        columns, not the records.

        A row whose columns cannot place it (its status column is no status, its
        ``updated_us`` no integer, or another column is not what this store writes) is
        listed by its record's own status and time instead; when that record is not a
        valid record either, it is a :class:`~tool_execution_checkpoint.stores.BrokenRecord`
        in every listing. A row whose columns are sound but whose record is broken is
        listed by its columns: ``get`` then raises INVALID_CHECKPOINT for it.

        Raises CheckpointError INVALID_ARGUMENT for a ``statuses`` that is a str or holds
        something that is not a status, a ``limit`` below 1, or an argument of the wrong
        type."""
        listing = check_listing(statuses, written_before_us, after_key, limit)
        wanted = sorted(status.value for status in listing.statuses)
        before, after, limit = listing.written_before_us, listing.after_key, listing.limit
        if not wanted:  # check_listing bounded the rest to what SQLite's integers hold
            return []
        found: list[RecordSummary | BrokenRecord] = []
        while True:
            rows, odd, cut = self._list_page(wanted, before, after, limit)
            for key in sorted(rows.keys() | odd.keys()):
                if cut is not None and key > cut:
                    break
                line = self._listed(key, rows.get(key), odd.get(key))
                if isinstance(line, BrokenRecord) or (line is not None and listing.admits(line)):
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
        parameters: list[object] = [*wanted]
        if before is not None:
            parameters.append(before)
        if after is not None:
            parameters.append(after)
        parameters.append(limit)
        statement = _LIST.format(
            statuses=", ".join("?" * len(wanted)),
            before="" if before is None else " AND updated_us < ?",
            after="" if after is None else " AND key > ?",
        )
        odd_statement = _ODD.format(after="" if after is None else " AND +key > ?")
        odd_parameters: list[object] = []
        for bounds in _ODD_BOUNDS:
            odd_parameters += [*bounds, after] if after is not None else bounds
        odd_parameters.append(limit)
        with self._lock:
            cursor = self._open_cursor()
            try:
                listed = self._patiently(cursor, statement, parameters).fetchall()
                odd_rows = self._patiently(cursor, odd_statement, odd_parameters).fetchall()
            except sqlite3.Error as error:
                raise self._failure(error, "list_records") from error
        rows = {row[0]: _summary(row) for row in listed}
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
            with self._lock:
                cursor = self._open_cursor()
                try:
                    row = self._patiently(cursor, _SELECT_RECORD, (key,)).fetchone()
                except sqlite3.Error as error:
                    raise self._failure(error, "list_records") from error
            if row is None:
                return None
            record = row[0]
        return listing_line(key, _stored_bytes(record))

    def close(self) -> None:
        """Close the connection. Idempotent; operations afterwards raise
        SQLiteStoreError."""
        with self._lock:
            db, self._db, self._cursor = self._db, None, None
        if db is not None:
            db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


def _stored_bytes(value: object) -> bytes:
    """A column read with CAST(... AS BLOB): bytes (b"" for anything else, which no
    decoder accepts)."""
    return value if isinstance(value, bytes) else b""


def _column_text(value: object) -> str | None:
    if not isinstance(value, bytes):
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _summary(row: Sequence[object]) -> RecordSummary | None:
    """The summary a row of _LIST gives, or None when a column is not what this store
    writes (the row is then listed by its record)."""
    key, namespace, call_id, status, revision, updated_at, updated_us = row
    texts = (_column_text(namespace), _column_text(call_id), _column_text(updated_at))
    if (
        None in texts
        or type(revision) is not int
        or revision < 1
        or type(updated_us) is not int
        or status not in _KNOWN
        or not isinstance(key, str)
    ):
        return None
    namespace_text, call_id_text, updated_at_text = texts
    assert namespace_text is not None  # checked above
    assert call_id_text is not None
    assert updated_at_text is not None
    return RecordSummary(
        key=key,
        namespace=namespace_text,
        call_id=call_id_text,
        status=Status(status),
        revision=revision,
        updated_at=updated_at_text,
        updated_us=updated_us,
        written_us=updated_us,
    )


class AsyncSQLiteStore:
    """The asyncio twin of :class:`SQLiteStore` (an
    :class:`~tool_execution_checkpoint.stores.AsyncCheckpointStore` with
    ``list_records``), with the same arguments, contract and errors.

    Every operation runs on the store's own worker thread, one at a time, so the event
    loop never waits on SQLite's locks or fsyncs; no dependency beyond the standard
    library. The constructor opens the file on the calling thread (it may wait up to
    ``busy_timeout``); ``await AsyncSQLiteStore.open(path)`` opens it on a thread instead.

    Cancelling a task that awaits a write does not stop the write: it runs to the end on
    the worker thread and the cancelled caller does not learn its outcome. Treat it as an
    unknown outcome: read the record back.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self._adopt(SQLiteStore(path, busy_timeout=busy_timeout))

    store: SQLiteStore
    """The synchronous store the worker thread calls."""

    def _adopt(self, store: SQLiteStore) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tec-sqlite")
        self._closed = False

    @classmethod
    async def open(cls, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> Self:
        """Open the store on a thread, so the event loop does not wait for the file."""
        store = await asyncio.to_thread(SQLiteStore, path, busy_timeout=busy_timeout)
        instance = cls.__new__(cls)
        instance._adopt(store)
        return instance

    @classmethod
    def from_url(cls, url: str, *, busy_timeout: float | None = None, create: bool = True) -> Self:
        """See :meth:`SQLiteStore.from_url`."""
        instance = cls.__new__(cls)
        instance._adopt(SQLiteStore.from_url(url, busy_timeout=busy_timeout, create=create))
        return instance

    async def _run(self, call: Callable[[], _T]) -> _T:
        if self._closed:
            raise SQLiteNotAppliedError(f"the store on {self.store.path} is closed")
        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        except RuntimeError:  # the executor was shut down meanwhile
            raise SQLiteNotAppliedError(f"the store on {self.store.path} is closed") from None
        return await future

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`SQLiteStore.create_if_absent`."""
        return await self._run(functools.partial(self.store.create_if_absent, key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`SQLiteStore.get`."""
        return await self._run(functools.partial(self.store.get, key))

    async def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """See :meth:`SQLiteStore.compare_and_swap`."""
        swap = functools.partial(self.store.compare_and_swap, key, expected_revision, record)
        return await self._run(swap)

    async def clock_us(self) -> int:
        """See :meth:`SQLiteStore.clock_us`."""
        return self.store.clock_us()

    async def written_us(self, key: str) -> int | None:
        """See :meth:`SQLiteStore.written_us`."""
        return await self._run(functools.partial(self.store.written_us, key))

    async def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """See :meth:`SQLiteStore.list_records`."""
        listing = functools.partial(
            self.store.list_records,
            statuses,
            written_before_us=written_before_us,
            after_key=after_key,
            limit=limit,
        )
        return await self._run(listing)

    async def aclose(self) -> None:
        """Close the store after the operations already started. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self.store.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.store.path)!r})"


def _url_refusal(detail: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field="url")


def url_location(url: str) -> tuple[Path, float | None]:
    """The absolute path of the file a sqlite URL names, and its ``busy_timeout``: the
    one parser of sqlite URLs, behind :meth:`SQLiteStore.from_url`, :func:`open_url`
    (so :func:`~tool_execution_checkpoint.open_store`) and the command line.

    The URL is ``sqlite:///absolute/path`` or ``sqlite:relative/path`` (relative to the
    working directory), percent-decoded, optionally with ``?busy_timeout=SECONDS``.
    Nothing is opened.

    Raises:
        CheckpointError: INVALID_ARGUMENT, naming no part of the URL, for a URL with a
            host (``sqlite://name``), a fragment, no path or ``:memory:``, a NUL in the
            path, a query other
            than one ``busy_timeout``, or a busy_timeout that is not a number.
    """
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme.lower() != "sqlite":
        raise _url_refusal("a sqlite URL starts with sqlite: (sqlite:///absolute/path)")
    path = unquote(parts.path)
    if parts.netloc:
        raise _url_refusal(
            "a sqlite URL names no host: write sqlite:///absolute/path, or "
            "sqlite:relative/path for a file under the working directory"
        )
    if "\x00" in path:
        raise _url_refusal("a sqlite URL's path holds a NUL character (%00)")
    if path.strip("/") == ":memory:":
        raise _url_refusal(
            "an in-memory SQLite database is neither durable nor shared between "
            "connections and processes: name a database file, or use MemoryStore "
            "(memory:) for tests"
        )
    if parts.fragment or path.strip("/") == "":
        raise _url_refusal(
            "a sqlite URL names a local file: sqlite:///absolute/path or "
            "sqlite:relative/path (no fragment)"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    if [name for name, _ in query] not in ([], ["busy_timeout"]):
        raise _url_refusal("a sqlite URL accepts one query parameter, busy_timeout=SECONDS")
    seconds: float | None = None
    for _, value in query:
        try:
            seconds = float(value)
        except ValueError:  # its message quotes the URL's text: not kept as a context
            seconds = math.nan
    if seconds is not None and math.isnan(seconds):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be a number of seconds", field="busy_timeout"
        )
    return Path(path).absolute(), seconds


def open_url(url: str, *, busy_timeout: float | None = None, create: bool = True) -> SQLiteStore:
    """The opener of ``sqlite:`` URLs for :func:`~tool_execution_checkpoint.open_store`:
    :meth:`SQLiteStore.from_url`, with the same URLs, arguments and errors."""
    return SQLiteStore.from_url(url, busy_timeout=busy_timeout, create=create)
