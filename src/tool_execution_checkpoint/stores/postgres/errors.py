"""The store's errors, and the one place that turns psycopg's and libpq's errors into them.

Each error is in one category of :class:`~tool_execution_checkpoint.stores.StoreError`,
decided by one question: was the write applied? Messages name the host, port,
database, role and table, never the password, a payload or a server DETAIL line (which
may quote values).
"""

from __future__ import annotations

import psycopg

from .. import core
from .connections import Target

__all__ = [
    "PostgresConfigurationError",
    "PostgresNotAppliedError",
    "PostgresOutcomeUnknownError",
    "PostgresStoreError",
    "PostgresUnavailableError",
    "closed_error",
    "connect_failure",
    "operation_failure",
    "setup_failure",
]


class PostgresStoreError(core.StoreError):
    """A PostgreSQL store operation failed: the base of the store's errors, each of which
    is also in one category of :class:`~tool_execution_checkpoint.stores.StoreError`.
    Messages name the host, port, database, role and table, never the password, a
    payload or a server DETAIL line."""


class PostgresNotAppliedError(PostgresStoreError, core.StoreNotAppliedError):
    """The server refused the statement with an ERROR, which rolled its transaction
    back, or the store is closed: nothing was applied."""


class PostgresUnavailableError(PostgresStoreError, core.StoreUnavailableError):
    """No connection could be had in time (the server is down, refuses connections, has
    no free slots, or the pool is exhausted), or a read lost its connection: nothing was
    applied; retry later."""


class PostgresConfigurationError(PostgresStoreError, core.StoreConfigurationError):
    """The server, database, role or table cannot be used as configured: credentials,
    a missing database, role, schema or table, an encoding other than UTF8, a server
    that is not durable, a missing privilege. Nothing was applied; the message says what
    to fix."""


class PostgresOutcomeUnknownError(PostgresStoreError, core.OutcomeUnknownError):
    """A write was sent and its outcome is unknown: the connection dropped, the backend
    was terminated or the statement cancelled before its answer. Read the record back:
    it is either the old record or exactly the one written."""


def closed_error() -> PostgresNotAppliedError:
    """The error of an operation on a closed store."""
    return PostgresNotAppliedError("the store is closed")


_CONNECT_REASONS: tuple[tuple[type[PostgresStoreError], tuple[tuple[str, ...], ...], str], ...] = (
    (
        PostgresConfigurationError,
        (("authentication failed",),),
        "authentication failed: check the role name and password in the URL",
    ),
    (
        PostgresConfigurationError,
        (("no password supplied",), ("password is required",)),
        "the server wants a password and none was given: add it to the URL",
    ),
    (
        PostgresConfigurationError,
        (("no pg_hba.conf entry",),),
        "pg_hba.conf has no entry for this client, role and database: ask the DBA",
    ),
    (
        PostgresConfigurationError,
        (("database", "does not exist"),),
        "the database does not exist: create it or fix the database name",
    ),
    (
        PostgresConfigurationError,
        (("role", "does not exist"),),
        "the role does not exist: create it or fix the role name",
    ),
    (
        PostgresConfigurationError,
        (("could not translate host name",), ("name or service not known",)),
        "the host name does not resolve: fix the host",
    ),
    (
        PostgresConfigurationError,
        (("invalid", "port"), ("invalid", "option")),
        "a connection option is invalid (for example the port): fix the URL",
    ),
    (
        PostgresUnavailableError,
        (("connection refused",),),
        "connection refused: check that the server runs and the host and port",
    ),
    (
        PostgresUnavailableError,
        (("timeout",), ("timed out",)),
        "connecting timed out: check the host, port and firewall",
    ),
    (
        PostgresUnavailableError,
        (("too many",), ("remaining connection slots",)),
        "the server has no free connection slots: lower max_size or raise them",
    ),
)
"""What a failed connection's libpq message means, first match wins: the error class,
the words that say it (any of the alternatives, all words of one), and what to fix."""


def connect_failure(error: BaseException, target: Target | None) -> PostgresStoreError:
    """The error saying why a connection could not be made and what to fix, by the first
    of :data:`_CONNECT_REASONS` that libpq's message matches; for none,
    PostgresUnavailableError with the message's first line, its password blanked. (A
    string that does not parse never gets here: libpq's text could quote it.)"""
    where = target.describe() if target is not None else "PostgreSQL"
    text = str(error)
    lowered = text.lower()
    for kind, alternatives, reason in _CONNECT_REASONS:
        if any(all(word in lowered for word in words) for words in alternatives):
            return kind(f"cannot connect to {where}: {reason}")
    first = text.splitlines()[0] if text else type(error).__name__
    password = target.password() if target is not None else None
    if password:
        first = first.replace(password, "***")
    return PostgresUnavailableError(f"cannot connect to {where}: {type(error).__name__}: {first}")


def _server_refusal(error: psycopg.Error) -> str:
    """Class name, SQLSTATE and the server's primary message, never its DETAIL line (which
    may quote a value)."""
    primary = error.diag.message_primary if error.sqlstate else None
    text = primary or (str(error).splitlines() or [""])[0] or "no message"
    return f"{type(error).__name__}, SQLSTATE {error.sqlstate or 'none'}: {text}"


def _definitely_not_applied(error: psycopg.Error) -> bool:
    """Whether a write that raised ``error`` after it was sent surely was not applied: the
    server answered with an ERROR (not FATAL or PANIC), which in autocommit rolls back the
    statement's transaction, and not a cancellation or shutdown (class 57) or connection
    exception (class 08), whose timing relative to the commit is unknown."""
    sqlstate = error.sqlstate
    if not sqlstate or sqlstate[:2] in ("08", "57"):
        return False
    return error.diag.severity_nonlocalized == "ERROR"


def operation_failure(error: psycopg.Error, operation: str, *, write: bool) -> PostgresStoreError:
    """The error for an operation (named ``operation`` in the message) that failed after
    its statement was sent: PostgresOutcomeUnknownError for a write not surely refused,
    else not applied, unavailable, or configuration for a missing privilege or table."""
    described = _server_refusal(error)
    refused = _definitely_not_applied(error)
    if write and not refused:
        return PostgresOutcomeUnknownError(
            f"the {operation} was sent but its outcome is unknown ({described}): read the "
            f"record back; it is either the old record or exactly the one written"
        )
    kind: type[PostgresStoreError] = (
        PostgresNotAppliedError if refused else PostgresUnavailableError
    )
    hint = ""
    if error.sqlstate == "42501":
        hint = ": grant SELECT, INSERT and UPDATE on the table to the store's role"
        kind = PostgresConfigurationError
    elif error.sqlstate == "42P01":
        hint = ": the table is gone; recreate it with the DDL of schema_sql()"
        kind = PostgresConfigurationError
    applied = "; it was not applied" if write else ""
    return kind(f"the {operation} failed ({described}){hint}{applied}")


def setup_failure(error: psycopg.Error, table: str) -> PostgresNotAppliedError:
    """The error of a setup statement (checking or creating ``table``) that failed."""
    return PostgresNotAppliedError(
        f"setting up the table {table} failed ({_server_refusal(error)}); nothing was written"
    )
