"""SQLiteStore's errors, and the one translation of an ``sqlite3`` error into them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .. import core

__all__ = [
    "BUSY",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteNotAppliedError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStoreError",
    "error_name",
    "failure",
    "outcome_unknown",
    "primary_code",
]

# SQLite's primary result codes (the low byte of an extended code).
BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT = 5, 6, 8, 10, 11
_FULL, _CANTOPEN, _NOTADB, _PERM, _AUTH = 13, 14, 26, 3, 23

_READS = frozenset({"get", "list_records", "written_us"})


class SQLiteStoreError(core.StoreError):
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


class SQLiteNotAppliedError(SQLiteStoreError, core.StoreNotAppliedError):
    """An operation failed and changed nothing, for a reason neither of configuration
    nor of a lock: a corrupt database, a full disk, an I/O error before the COMMIT, a
    closed store, or another SQLite failure. The message names it and what to do."""


class SQLiteConfigurationError(SQLiteStoreError, core.StoreConfigurationError):
    """The database cannot be used as configured: a path that names no usable file (or
    holds a NUL character), a directory that does not exist, a file that is not an SQLite
    database, a file this process may not write, a schema version this library does not
    know, or (opening with ``create=False``) a file that does not exist. The message names
    what to fix; retrying does not help. A URL that cannot be parsed is CheckpointError
    INVALID_ARGUMENT instead (see :func:`~.paths.url_location`)."""


class SQLiteBusyError(SQLiteStoreError, core.StoreUnavailableError):
    """The database stayed locked for the whole busy timeout: another connection or
    process held its write lock. The operation was not applied; retry it later, or raise
    ``busy_timeout``."""


class SQLiteOutcomeUnknownError(SQLiteStoreError, core.OutcomeUnknownError):
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


def error_name(error: sqlite3.Error) -> str | None:
    """SQLite's extended result code name of ``error`` (``"SQLITE_BUSY"``), if it has one."""
    name = getattr(error, "sqlite_errorname", None)
    return name if isinstance(name, str) else None


def primary_code(error: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``error`` (the low byte of its extended code)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def failure(
    error: sqlite3.Error, operation: str, path: Path, busy_timeout: float
) -> SQLiteStoreError:
    """The store error ``error`` means for ``operation`` (``"open"``, a read or a write)
    on the file at ``path``, its message saying what to do. Only SQLite's own message is
    kept, never a statement's parameters."""
    name = error_name(error)
    code = primary_code(error)
    if operation == "open":
        what = "the store was not opened"
    elif operation in _READS:
        what = f"{operation} failed"
    else:
        what = f"{operation} was not applied"
    cause = f"{error} ({name})" if name else str(error)
    if code in (BUSY, _LOCKED):
        return SQLiteBusyError(
            f"database {path} is locked after {busy_timeout:g} s busy timeout:"
            f" another connection or process holds its write lock; {what}. Retry"
            " later, or raise busy_timeout",
            sqlite_errorname=name,
        )
    if code == _READONLY:
        return SQLiteConfigurationError(
            f"cannot write {path}: it is read-only for this process ({cause});"
            f" {what}. Give this process write access to the file, its directory and"
            " its -wal and -shm files",
            sqlite_errorname=name,
        )
    if code in (_CANTOPEN, _PERM, _AUTH):
        return SQLiteConfigurationError(
            f"cannot open {path}: {cause}; check that the file and its directory"
            " exist and that this process may read and write them",
            sqlite_errorname=name,
        )
    if code == _NOTADB:
        return SQLiteConfigurationError(
            f"cannot use {path}: it is not an SQLite database ({cause}); give the"
            " path of a new file or of an existing checkpoint database",
            sqlite_errorname=name,
        )
    if code == _CORRUPT:
        return SQLiteNotAppliedError(
            f"database {path} is corrupt ({cause}); {what}. Stop the processes"
            " using it, run PRAGMA integrity_check and restore it from a backup",
            sqlite_errorname=name,
        )
    if code == _FULL:
        return SQLiteNotAppliedError(
            f"the disk holding {path} is full ({cause}); {what}. Free space, then retry",
            sqlite_errorname=name,
        )
    if code == _IOERR:
        return SQLiteNotAppliedError(
            f"disk I/O error on {path} ({cause}); {what}. Check the disk and the file system",
            sqlite_errorname=name,
        )
    return SQLiteNotAppliedError(f"SQLite failed on {path}: {cause}; {what}", sqlite_errorname=name)


def outcome_unknown(error: sqlite3.Error, operation: str, path: Path) -> SQLiteOutcomeUnknownError:
    """The error of a write whose COMMIT failed after SQLite ended the transaction."""
    name = error_name(error)
    return SQLiteOutcomeUnknownError(
        f"the COMMIT of {operation} on {path} failed ({error}"
        f"{f', {name}' if name else ''}) after the write may have reached the"
        " WAL: it may or may not be applied. Read the record back and decide"
        " again",
        sqlite_errorname=name,
    )
