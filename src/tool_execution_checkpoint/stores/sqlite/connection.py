"""SQLiteStore's connection: opening a file as the store's database (WAL, durable
commits, the schema checked or created), and running a statement while the file is
locked by another connection."""

from __future__ import annotations

import contextlib
import random
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import BUSY, SQLiteConfigurationError, failure, primary_code
from .sql import SCHEMA, SCHEMA_VERSION

__all__ = ["connect", "patiently", "roll_back"]


def patiently(
    runner: sqlite3.Connection | sqlite3.Cursor,
    statement: str,
    parameters: Sequence[object],
    busy_timeout: float,
) -> sqlite3.Cursor:
    """Run a statement that takes a lock (BEGIN IMMEDIATE, a read, the WAL switch),
    trying again while the database is busy, for up to ``busy_timeout`` seconds, after
    0.1 to 2 ms each time (SQLite's own busy handler backs off to 100 ms and starves a
    waiting process while others keep writing).

    Raises:
        sqlite3.Error: the statement's own error, or ``SQLITE_BUSY`` once the timeout is
            over.
    """
    deadline: float | None = None
    pause = 0.0001
    while True:
        try:
            return runner.execute(statement, parameters)
        except sqlite3.OperationalError as error:
            if primary_code(error) != BUSY:
                raise
            now = time.monotonic()
            deadline = now + busy_timeout if deadline is None else deadline
            if now >= deadline:
                raise
            time.sleep(min(pause * (0.5 + random.random()), deadline - now))
            pause = min(pause * 2, 0.002)


def roll_back(db: sqlite3.Connection) -> None:
    """End the transaction ``db`` is in, if any, never raising."""
    if db.in_transaction:
        # When even ROLLBACK fails, SQLite ends the transaction itself.
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """An autocommit connection to the store's database at ``path``, usable from any
    thread: in WAL mode with ``synchronous=FULL``, its schema this library's (created
    if the file has none) and the file writable, all checked in one write transaction.

    Raises:
        SQLiteConfigurationError: naming what to fix (see :func:`.errors.failure`), and
            for a schema this library did not make or does not know.
        SQLiteBusyError: the file stayed locked for ``busy_timeout`` seconds.
    """
    try:
        # timeout=0: SQLite's own busy handler is off; patiently() waits instead.
        db = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as error:
        raise failure(error, "open", path, busy_timeout) from error
    try:
        _configure(db, path, busy_timeout)
    except BaseException:
        db.close()
        raise
    return db


def _configure(db: sqlite3.Connection, path: Path, busy_timeout: float) -> None:
    """Switch to WAL, make commits durable, then check the schema and that the file is
    writable in one write transaction (creating the tables the first time)."""
    try:
        (mode,) = patiently(db, "PRAGMA journal_mode=WAL", (), busy_timeout).fetchone()
        if str(mode).lower() != "wal":
            raise SQLiteConfigurationError(
                f"cannot use {path}: SQLite refused WAL mode (journal_mode is"
                f" {mode}); give this process write access to the file and put it on a"
                " local file system with shared memory"
            )
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA fullfsync=ON")  # macOS: fsync reaches the platter
        patiently(db, "BEGIN IMMEDIATE", (), busy_timeout)
        db.execute("CREATE TABLE IF NOT EXISTS tec_meta (name TEXT PRIMARY KEY, value)")
        # A write that changes no row: fails now, not at the first CAS, when the
        # file, its directory or its -wal/-shm files are read-only for this process.
        db.execute("UPDATE tec_meta SET value = value WHERE name = ''")
        row = db.execute("SELECT value FROM tec_meta WHERE name = 'schema_version'").fetchone()
        if row is None:
            _create_schema(db, path)
        elif row[0] != SCHEMA_VERSION:
            db.execute("ROLLBACK")
            raise SQLiteConfigurationError(_version_problem(path, row[0]))
        db.execute("COMMIT")
    except sqlite3.Error as error:
        raise failure(error, "open", path, busy_timeout) from error


def _create_schema(db: sqlite3.Connection, path: Path) -> None:
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'tec_checkpoint'").fetchone()
    if exists is not None:
        db.execute("ROLLBACK")
        raise SQLiteConfigurationError(
            f"cannot use {path}: it holds a tec_checkpoint table but no schema"
            " version in tec_meta; it was not made by this library: give the store a"
            " file of its own"
        )
    for statement in SCHEMA:
        db.execute(statement)
    db.execute("INSERT INTO tec_meta (name, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,))


def _version_problem(path: Path, found: object) -> str:
    if type(found) is int and found > SCHEMA_VERSION:
        return (
            f"cannot use {path}: its schema version {found} is newer than this"
            f" library's ({SCHEMA_VERSION}); upgrade tool-execution-checkpoint in every"
            " process that opens it, and do not downgrade the file"
        )
    return (
        f"cannot use {path}: tec_meta holds an unknown schema version (this"
        f" library writes {SCHEMA_VERSION}); restore the file from a backup or give the"
        " store a new file"
    )
