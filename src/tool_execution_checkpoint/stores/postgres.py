"""PostgresStore and AsyncPostgresStore: checkpoint stores in a PostgreSQL table.

Install with the ``postgres`` extra (psycopg 3 and psycopg_pool)::

    pip install 'tool-execution-checkpoint[postgres]'

One row per key, in a table (``public.tec_checkpoint`` by default)::

    key        TEXT COLLATE "C" PRIMARY KEY   -- the checkpoint key
    revision   BIGINT NOT NULL                -- the record's revision, the CAS guard
    status     TEXT   NOT NULL                -- the record's status, for operators
    updated_us BIGINT NOT NULL                -- when the server wrote the row (see below)
    record     TEXT   NOT NULL                -- the record's exact JSON text

with an index on ``(status, updated_us)`` for :meth:`PostgresStore.list_records`. The
store's clock is the server's: every write sets ``updated_us`` to
``statement_timestamp()`` in microseconds since the epoch, whatever the writer's clock
put in the record's ``updatedAt``, and listings and :meth:`PostgresStore.clock_us` read
the same clock. Rows written by earlier versions of this library hold their record's
``updatedAt`` there instead (the layout is the same): they are aged by it until their
next write. The
record is kept as TEXT, not JSONB: ``get`` must return exactly the mapping that was
written, and JSONB normalises numbers (``1e308`` comes back as a 309-digit integer,
``-0.0`` as ``0.0``) and drops duplicate keys. The key is compared in the "C" collation so
that key order is Python's code-point order, as in :class:`~.memory.MemoryStore`.

The contract (see :mod:`tool_execution_checkpoint.stores`):

- ``create_if_absent`` is one ``INSERT ... ON CONFLICT (key) DO NOTHING``; it inserted
  exactly when the row count is 1.
- ``compare_and_swap`` is one ``UPDATE ... WHERE key = $1 AND revision = $2``; it swapped
  exactly when the row count is 1. PostgreSQL re-checks the WHERE clause against the
  newest row version under concurrent updates (READ COMMITTED), so two CASes from the
  same revision never both win.
- Every operation is one round trip: autocommit (no BEGIN/COMMIT), no connection check
  on checkout. Statements follow psycopg's ``prepare_threshold`` (its default, 5, on
  the store's own pool): a statement run often on a connection is prepared there once,
  in one Parse round trip that runs nothing, and is then only bound and run, so the
  server does not parse and plan it on every call. Behind a transaction-mode pooler
  that cannot keep prepared statements (PgBouncer before 1.21 or with
  ``max_prepared_statements = 0``; psycopg asks for PgBouncer 1.22 and libpq 17 to
  deallocate through it), pass ``prepare_threshold=None``: no statement the store
  sends is ever prepared, on its own pool or on a caller's. Durability is the server's:
  a reported success has been committed, and with ``synchronous_commit`` on (the
  default, checked at first use) it has been flushed to the WAL. The one exception, by
  default, is a swap that marks a record delivered (a status of
  ``TABLE.relaxed_statuses``): it commits asynchronously, in the same one statement;
  see ``synchronous_delivered`` on :class:`PostgresStore` for the loss window and why
  it is safe.
- **Ambiguous commits.** When a write fails after it was sent (the connection dropped,
  the backend was terminated, the server crashed or the statement was cancelled), it may
  or may not have been applied: the store raises
  :class:`PostgresOutcomeUnknownError` and never guesses or
  retries. Read the record back: it is either the old record or exactly the one written.
  A write that PostgreSQL refused with an ERROR (its transaction rolled back), or that
  failed before it was sent, raises another :class:`PostgresStoreError` (not applied,
  unavailable, or, for a missing privilege or table, configuration): it was not applied.

The table is created on first use (``CREATE TABLE IF NOT EXISTS``, serialised with an
advisory lock, marked as layout 1 with a table comment). First use also checks the
configuration and fails fast, with a :class:`PostgresConfigurationError` (or, when the
server cannot be reached, :class:`PostgresUnavailableError`) saying what to fix: the server
must be reachable within ``connect_timeout`` seconds, the credentials right, the database
UTF8, the server durable, the schema usable and the role allowed to SELECT, INSERT and
UPDATE the table (and CREATE in the schema if the table is missing). Messages name the
host, port, database, role and table, never the password, a payload or a server DETAIL
line (which may quote values). Bad arguments, table names included, raise
:class:`~tool_execution_checkpoint.errors.CheckpointError` before any SQL is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import math
import re
import select
import threading
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar, cast

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from ..errors import CheckpointError, ErrorCode
from ..records import Checkpoint
from ..table import TABLE, Status
from ..validation import check_flag
from .core import (
    BrokenRecord,
    Listing,
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
    "LAYOUT",
    "LAYOUT_MARKER",
    "AsyncPostgresStore",
    "PostgresConfigurationError",
    "PostgresNotAppliedError",
    "PostgresOutcomeUnknownError",
    "PostgresStore",
    "PostgresStoreError",
    "PostgresUnavailableError",
    "open_async_store",
    "open_store",
    "open_url",
]

LAYOUT = 1
"""The table layout this module reads and writes."""
LAYOUT_MARKER = f"tool-execution-checkpoint store, layout {LAYOUT}"
"""The table comment that marks a table as a checkpoint table of :data:`LAYOUT`."""

_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CEILING = TABLE.limits.ceiling_max_payload_bytes
_APPLICATION_NAME = "tool-execution-checkpoint"
_STATUSES = sorted(status.value for status in Status)

_RELAX = " AND set_config('synchronous_commit', 'off', true) = 'off'"
"""The condition that makes a compare-and-swap commit asynchronously (see _Sql)."""

_Operation = Literal["create", "get", "compare-and-swap", "list", "clock read", "write-time read"]
_NOW_US = "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"
"""The server's time now in microseconds since the epoch: what every write stores."""
_T = TypeVar("_T")


# --- the exchanges: each operation's statements and judgments, written once --------------
#
# Every operation, and the setup at first use, is a generator that yields the requests it
# needs sent and is sent back each one's answer; it decides everything itself (what to
# send next, what the answers mean). PostgresStore drives it with psycopg's blocking
# calls and AsyncPostgresStore with its coroutines: the two drivers own only the I/O
# (connections, autocommit, transactions, turning psycopg's errors into the store's).


@dataclass(frozen=True, slots=True)
class _Statement:
    """One statement of an operation, sent on one pooled connection in one round trip;
    answered with its row count for a write, or its rows for a read."""

    operation: _Operation
    query: bytes
    params: tuple[Any, ...]

    @property
    def write(self) -> bool:
        """Whether the statement writes (its outcome may be unknown if it fails)."""
        return self.operation in ("create", "compare-and-swap")


class _Ready:
    """The request to set the table up if that has not been done; answered with None."""


_READY = _Ready()


@dataclass(frozen=True, slots=True)
class _SetupStep:
    """Statements of the setup, sent in order on the setup's one connection, in one
    transaction when ``transaction``; answered with the last one's rows."""

    statements: tuple[tuple[bytes, tuple[Any, ...] | None], ...]
    transaction: bool


_Answer = tuple[int, list[Any]] | None
_Exchange = Generator[_Statement | _Ready, _Answer, _T]
_Setup = Generator[_SetupStep, list[Any], None]


# --- errors ----------------------------------------------------------------------------


class PostgresStoreError(StoreError):
    """A PostgreSQL store operation failed: the base of the store's errors, each of which
    is also in one category of :class:`~tool_execution_checkpoint.stores.StoreError`.
    Messages name the host, port, database, role and table, never the password, a
    payload or a server DETAIL line."""


class PostgresNotAppliedError(PostgresStoreError, StoreNotAppliedError):
    """The server refused the statement with an ERROR, which rolled its transaction
    back, or the store is closed: nothing was applied."""


class PostgresUnavailableError(PostgresStoreError, StoreUnavailableError):
    """No connection could be had in time (the server is down, refuses connections, has
    no free slots, or the pool is exhausted), or a read lost its connection: nothing was
    applied; retry later."""


class PostgresConfigurationError(PostgresStoreError, StoreConfigurationError):
    """The server, database, role or table cannot be used as configured: credentials,
    a missing database, role, schema or table, an encoding other than UTF8, a server
    that is not durable, a missing privilege. Nothing was applied; the message says what
    to fix."""


class PostgresOutcomeUnknownError(PostgresStoreError, OutcomeUnknownError):
    """A write was sent and its outcome is unknown: the connection dropped, the backend
    was terminated or the statement cancelled before its answer. Read the record back:
    it is either the old record or exactly the one written."""


# --- names, configuration and statements -------------------------------------------------


def _check_name(value: object, pattern: re.Pattern[str], field: str, limit: int) -> str:
    if type(value) is not str or pattern.fullmatch(value) is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be a lowercase SQL identifier: a letter or underscore, then letters, "
            f"digits or underscores, at most {limit} characters",
            field=field,
            limit=limit,
        )
    return value


def _check_timeout(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and 0 < seconds <= 600:
            return seconds
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "must be a number of seconds above 0 and at most 600",
        field="connect_timeout",
        limit=600,
    )


def _check_sizes(min_size: object, max_size: object) -> tuple[int, int]:
    if type(min_size) is not int or not 0 <= min_size <= 1_000:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be an int from 0 to 1000", field="min_size"
        )
    if type(max_size) is not int or not max(1, min_size) <= max_size <= 1_000:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be an int from max(1, min_size) to 1000",
            field="max_size",
        )
    return min_size, max_size


@dataclass(frozen=True)
class _Target:
    """Where to connect, parsed once; ``describe`` names it without the password."""

    conninfo: str
    fields: Mapping[str, str]

    @classmethod
    def parse(cls, conninfo: object) -> _Target:
        if type(conninfo) is not str:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must be a PostgreSQL URL or key=value string, or a psycopg_pool pool",
                field="conninfo_or_pool",
            )
        try:
            fields: dict[str, Any] | None = conninfo_to_dict(conninfo)
        except psycopg.Error:  # its message quotes the string, password included
            fields = None
        if fields is None:  # raised outside the except: no context holds the string
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is not a valid PostgreSQL URL or key=value string (not shown: it may hold "
                "a password)",
                field="conninfo_or_pool",
            )
        return cls(conninfo, {key: str(value) for key, value in fields.items()})

    def describe(self) -> str:
        host = self.fields.get("host") or self.fields.get("hostaddr") or "the default host"
        port = self.fields.get("port") or "5432"
        database = self.fields.get("dbname") or "the default database"
        user = self.fields.get("user") or "the default role"
        return f"PostgreSQL at {host}:{port} (database {database}, role {user})"

    def password(self) -> str | None:
        return self.fields.get("password") or None


def _check_prepare_threshold(value: object) -> int | None:
    if value is None or (type(value) is int and 0 <= value <= 1_000_000):
        return value
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "must be None (never prepare) or an int from 0 to 1000000",
        field="prepare_threshold",
    )


def _connect_kwargs(
    target: _Target, timeout: float, prepare_threshold: int | None
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "client_encoding": "UTF8",
        "prepare_threshold": prepare_threshold,
    }
    if "connect_timeout" not in target.fields:
        # libpq counts whole seconds and treats anything below 2 as 2.
        kwargs["connect_timeout"] = str(max(2, math.ceil(timeout)))
    if "application_name" not in target.fields:
        kwargs["application_name"] = _APPLICATION_NAME
    return kwargs


def _connect_failure(error: BaseException, target: _Target | None) -> PostgresStoreError:
    """The error saying why a connection could not be made and what to fix; the raw
    libpq text is shown only with the password blanked, and never for a string that does
    not parse (libpq may quote it)."""
    where = target.describe() if target is not None else "PostgreSQL"
    text = str(error)
    lowered = text.lower()
    kind: type[PostgresStoreError] = PostgresConfigurationError
    if "password authentication failed" in lowered or "authentication failed" in lowered:
        reason = "authentication failed: check the role name and password in the URL"
    elif "no password supplied" in lowered or "password is required" in lowered:
        reason = "the server wants a password and none was given: add it to the URL"
    elif "no pg_hba.conf entry" in lowered:
        reason = "pg_hba.conf has no entry for this client, role and database: ask the DBA"
    elif "database" in lowered and "does not exist" in lowered:
        reason = "the database does not exist: create it or fix the database name"
    elif "role" in lowered and "does not exist" in lowered:
        reason = "the role does not exist: create it or fix the role name"
    elif "could not translate host name" in lowered or "name or service not known" in lowered:
        reason = "the host name does not resolve: fix the host"
    elif "invalid" in lowered and ("port" in lowered or "option" in lowered):
        reason = "a connection option is invalid (for example the port): fix the URL"
    else:
        kind = PostgresUnavailableError
        if "connection refused" in lowered:
            reason = "connection refused: check that the server runs and the host and port"
        elif "timeout" in lowered or "timed out" in lowered:
            reason = "connecting timed out: check the host, port and firewall"
        elif "too many" in lowered or "remaining connection slots" in lowered:
            reason = "the server has no free connection slots: lower max_size or raise them"
        else:
            first = text.splitlines()[0] if text else type(error).__name__
            password = target.password() if target is not None else None
            if password:
                first = first.replace(password, "***")
            reason = f"{type(error).__name__}: {first}"
    return kind(f"cannot connect to {where}: {reason}")


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


def _alive(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection still looks usable, checked locally: nothing may
    be readable on its socket (a terminated backend leaves an error message and EOF)."""
    if connection.closed or connection.broken:
        return False
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


def _idle(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    return (
        not connection.closed
        and connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )


class _Sql:
    """The store's statements for one table, rendered once to bytes."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema = schema
        self.table = table
        self.qualified_text = f'"{schema}"."{table}"'
        qualified = sql.Identifier(schema, table)
        index = sql.Identifier(f"{table}_status_updated")

        def render(query: sql.Composable) -> bytes:
            return query.as_string().encode()

        self.insert = render(
            sql.SQL(
                "INSERT INTO {} (key, revision, status, updated_us, record) "
                f"VALUES (%s, %s, %s, {_NOW_US}, %s) ON CONFLICT (key) DO NOTHING"
            ).format(qualified)
        )
        update = (
            f"UPDATE {{}} SET revision = %s, status = %s, updated_us = {_NOW_US}, record = %s "
            "WHERE key = %s AND revision = %s"
        )
        self.update = render(sql.SQL(update).format(qualified))
        # A relaxed swap is the same UPDATE with one more condition, always true, that
        # turns synchronous_commit off for the statement's own transaction (is_local:
        # until it ends, as SET LOCAL). It is evaluated for the row before the row is
        # updated, so whenever the swap writes, its commit is asynchronous; when it finds
        # no row at the revision, nothing is written and nothing is committed.
        self.update_relaxed = render(sql.SQL(update + _RELAX).format(qualified))
        self.select = render(sql.SQL("SELECT record FROM {} WHERE key = %s").format(qualified))
        self.clock = render(sql.SQL(f"SELECT {_NOW_US}"))
        self.written = render(sql.SQL("SELECT updated_us FROM {} WHERE key = %s").format(qualified))
        # A listing is one statement of two parts: the rows the (status, updated_us)
        # columns place, and the rows whose status column is no status (listed by their
        # record). The second part is one range of the index per gap between the
        # statuses, in the server's own order of them (read at setup): cheap when, as
        # usual, no such row exists.
        gaps = " OR ".join(
            [
                "status < %s",
                *("(status > %s AND status < %s)" for _ in _STATUSES[1:]),
                "status > %s",
            ]
        )
        self.lists: dict[tuple[bool, bool], bytes] = {}
        for before in (False, True):
            for after in (False, True):
                conditions = [sql.SQL("status = ANY(%s)")]
                if before:
                    conditions.append(sql.SQL("updated_us < %s"))
                odd = [sql.SQL(f"({gaps})")]
                if after:
                    conditions.append(sql.SQL("key > %s"))
                    odd.append(sql.SQL("key > %s"))
                self.lists[before, after] = render(
                    sql.SQL(
                        "(SELECT key, record, true, updated_us FROM {table} WHERE {placed}"
                        " ORDER BY key LIMIT %s) UNION ALL (SELECT key, record, false,"
                        " updated_us FROM {table}"
                        " WHERE {odd} ORDER BY key LIMIT %s)"
                    ).format(
                        table=qualified,
                        placed=sql.SQL(" AND ").join(conditions),
                        odd=sql.SQL(" AND ").join(odd),
                    )
                )
        self.lock = render(sql.SQL("SELECT pg_advisory_xact_lock(%s)"))
        digest = hashlib.sha256(f"{_APPLICATION_NAME}:{self.qualified_text}".encode()).digest()
        self.lock_id = int.from_bytes(digest[:8], "big", signed=True)
        self.ddl = [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                'key TEXT COLLATE "C" PRIMARY KEY, '
                "revision BIGINT NOT NULL CHECK (revision > 0), "
                "status TEXT NOT NULL, "
                "updated_us BIGINT NOT NULL, "
                "record TEXT NOT NULL)"
            ).format(qualified),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (status, updated_us)").format(
                index, qualified
            ),
            sql.SQL("COMMENT ON TABLE {} IS {}").format(qualified, sql.Literal(LAYOUT_MARKER)),
        ]
        self.ddl_bytes = [render(statement) for statement in self.ddl]
        self.inspect = render(
            sql.SQL(
                "SELECT current_setting('server_encoding'), current_setting('client_encoding'), "
                "current_setting('synchronous_commit'), current_setting('fsync'), "
                "current_user, n.oid IS NOT NULL, "
                "has_schema_privilege(n.oid, 'USAGE'), has_schema_privilege(n.oid, 'CREATE'), "
                "c.oid IS NOT NULL, obj_description(c.oid, 'pg_class'), "
                "has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'), "
                "has_table_privilege(c.oid, 'UPDATE'), "
                "(SELECT array_agg(s ORDER BY s) FROM unnest(%s::text[]) AS s) "
                "FROM (SELECT to_regnamespace(%s)::oid AS oid) AS n "
                "LEFT JOIN LATERAL (SELECT CASE WHEN has_schema_privilege(n.oid, 'USAGE') "
                "THEN to_regclass(%s)::oid END AS oid) AS c ON true"
            )
        )

    def schema_sql(self) -> str:
        """The DDL, as one script a DBA can run (or put in a migration)."""
        return ";\n".join(statement.as_string() for statement in self.ddl) + ";\n"


@dataclass(frozen=True)
class _Inspection:
    encoding: str
    client_encoding: str
    synchronous_commit: str
    fsync: str
    role: str
    schema_exists: bool
    schema_usage: bool | None
    schema_create: bool | None
    table_exists: bool
    marker: str | None
    can_select: bool | None
    can_insert: bool | None
    can_update: bool | None
    status_order: list[str]
    """The statuses in the server's order of text (the status column's collation)."""

    @classmethod
    def of(cls, row: Sequence[Any]) -> _Inspection:
        return cls(*row)


def _maybe_being_created(inspection: _Inspection) -> bool:
    """Whether a table that looks unmarked may be another store's creation, committing now.

    One statement's catalog lookup (``to_regclass``) can see a table whose creation committed
    after the statement's snapshot was taken, while ``obj_description`` reads with that snapshot
    and misses the comment committed with it. Such a table is judged again after taking the
    creation lock, which its creator holds until it commits."""
    return inspection.table_exists and inspection.marker != LAYOUT_MARKER


def _judge(inspection: _Inspection, statements: _Sql, *, durable: bool, create: bool) -> bool:
    """Raise a PostgresConfigurationError saying what to fix, or return whether the
    table must be created."""
    target = f"{statements.schema}.{statements.table}"
    role = inspection.role
    if inspection.encoding != "UTF8":
        raise PostgresConfigurationError(
            f"the database's encoding is {inspection.encoding}: the store needs a UTF8 "
            f"database (CREATE DATABASE ... ENCODING 'UTF8')"
        )
    if inspection.client_encoding != "UTF8":
        raise PostgresConfigurationError(
            f"the connection's client_encoding is {inspection.client_encoding}: the store "
            f"needs UTF8 (drop client_encoding from the URL, PGCLIENTENCODING or the role's "
            f"settings)"
        )
    if durable and (inspection.synchronous_commit == "off" or inspection.fsync == "off"):
        raise PostgresConfigurationError(
            "the server is not durable (synchronous_commit or fsync is off), so an "
            "acknowledged write could be lost in a crash: turn them on, or pass "
            "durable=False to accept that"
        )
    if not inspection.schema_exists:
        raise PostgresConfigurationError(
            f"the schema {statements.schema} does not exist: create it, or pass schema= "
            f"naming an existing one"
        )
    if not inspection.schema_usage:
        raise PostgresConfigurationError(
            f"the role {role} lacks USAGE on the schema {statements.schema}: "
            f"GRANT USAGE ON SCHEMA {statements.schema} TO {role}"
        )
    if not inspection.table_exists:
        if not create:
            raise PostgresConfigurationError(
                f"there is no checkpoint table {target}: it does not exist, and with "
                f"create_table=False (create=False) it is never created; name the table "
                f"that holds the records (schema, table), or create it with the DDL of "
                f"schema_sql()"
            )
        if not inspection.schema_create:
            raise PostgresConfigurationError(
                f"the table {target} does not exist and the role {role} may not create it "
                f"(no CREATE on the schema {statements.schema}): run the DDL of "
                f"schema_sql() as the schema's owner, or GRANT CREATE ON SCHEMA "
                f"{statements.schema} TO {role}"
            )
        return True
    if inspection.marker != LAYOUT_MARKER:
        raise PostgresConfigurationError(
            f"the table {target} exists but is not marked as a checkpoint table of layout "
            f"{LAYOUT} (its comment is not {LAYOUT_MARKER!r}): pass another table name, or "
            f"create it with the DDL of schema_sql()"
        )
    missing = [
        name
        for name, granted in (
            ("SELECT", inspection.can_select),
            ("INSERT", inspection.can_insert),
            ("UPDATE", inspection.can_update),
        )
        if not granted
    ]
    if missing:
        raise PostgresConfigurationError(
            f"the role {role} lacks {', '.join(missing)} on the table {target}: "
            f"GRANT SELECT, INSERT, UPDATE ON {target} TO {role}"
        )
    return False


def _list_query(
    statements: _Sql, order: Sequence[str], listing: Listing, after_key: str | None, limit: int
) -> tuple[bytes, tuple[Any, ...]]:
    """The statement and parameters of one page of a listing: at most ``limit`` rows of
    each part, after ``after_key``. ``order`` is the statuses in the server's order."""
    before = listing.written_before_us
    params: list[Any] = [sorted(status.value for status in listing.statuses)]
    if before is not None:
        params.append(before)
    if after_key is not None:
        params.append(after_key)
    params.append(limit)
    params += [order[0], *itertools.chain.from_iterable(itertools.pairwise(order)), order[-1]]
    if after_key is not None:
        params.append(after_key)
    params.append(limit)
    query = statements.lists[before is not None, after_key is not None]
    return query, tuple(params)


def _page(
    rows: Sequence[tuple[str, str, bool, int]], listing: Listing, limit: int
) -> tuple[list[RecordSummary | BrokenRecord], str | None]:
    """The listing lines of one page's rows, in key order, and the last key that both
    parts cover when either part is full (None when neither is: nothing is left).

    A row that its status and updated_us columns place is listed by its record (a
    BrokenRecord when that is not valid). A row whose status column is no status is
    listed by its record's own status and its updated_us, and as a BrokenRecord in every
    listing when its record is not valid; it is never hidden."""
    placed = {key: (text, us) for key, text, indexed, us in rows if indexed}
    odd = {key: (text, us) for key, text, indexed, us in rows if not indexed}
    full = [max(part) for part in (placed, odd) if len(part) >= limit]
    cut = min(full) if full else None
    lines: list[RecordSummary | BrokenRecord] = []
    for key in sorted(placed.keys() | odd.keys()):
        if cut is not None and key > cut:
            break
        if key in placed:
            text, written_us = placed[key]
            lines.append(listing_line(key, text, written_us=written_us))
            continue
        text, written_us = odd[key]
        line = listing_line(key, text, written_us=written_us)
        if isinstance(line, BrokenRecord) or listing.admits(line):
            lines.append(line)
    return lines, cut


def _decoded(rows: Sequence[tuple[str]]) -> Mapping[str, Any] | None:
    """What ``get`` returns for the rows its SELECT read: None only for no row."""
    return decode_stored(rows[0][0]) if rows else None


def _create_params(key: str, record: Checkpoint) -> tuple[Any, ...]:
    encoded = encode_create(key, record)
    return (key, encoded.record.revision, encoded.record.status.value, encoded.text)


def _swap_statement(
    statements: _Sql, key: str, expected_revision: int, record: Checkpoint, *, relax: bool
) -> tuple[bytes, tuple[Any, ...]]:
    """The UPDATE of a compare-and-swap and its parameters: the relaxed one when ``relax``
    and the record's status is one that only non-durable transitions land in."""
    encoded = encode_swap(key, expected_revision, record)
    record = encoded.record
    relaxed = relax and record.status in TABLE.relaxed_statuses
    params = (record.revision, record.status.value, encoded.text, key, expected_revision)
    return (statements.update_relaxed if relaxed else statements.update), params


def _operation_failure(
    error: psycopg.Error, operation: _Operation, *, write: bool
) -> PostgresStoreError:
    """The error for an operation that failed after its statement was sent."""
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


def _closed_error() -> PostgresNotAppliedError:
    return PostgresNotAppliedError("the store is closed")


_PoolT = TypeVar("_PoolT", ConnectionPool[Any], AsyncConnectionPool[Any])


# --- the synchronous store ---------------------------------------------------------------


class _PostgresStoreBase(Generic[_PoolT]):
    """What both stores take and check when they are built, and what they show: the
    constructor, :meth:`from_url`, :meth:`schema_sql` and the repr. Nothing is sent."""

    _POOL: ClassVar[type[Any]]
    """The pool class: ConnectionPool or AsyncConnectionPool."""

    def __init__(
        self,
        conninfo_or_pool: str | _PoolT,
        *,
        table: str = "tec_checkpoint",
        schema: str = "public",
        connect_timeout: float = 5.0,
        min_size: int = 1,
        max_size: int = 10,
        create_table: bool = True,
        durable: bool = True,
        synchronous_delivered: bool = False,
        prepare_threshold: int | None = 5,
    ) -> None:
        self._sql = _Sql(
            _check_name(schema, _SCHEMA_NAME, "schema", 63),
            _check_name(table, _TABLE_NAME, "table", 48),
        )
        self._timeout = _check_timeout(connect_timeout)
        min_size, max_size = _check_sizes(min_size, max_size)
        self._create_table = bool(create_table)
        self._durable = bool(durable)
        self._relax = not check_flag(synchronous_delivered, "synchronous_delivered")
        threshold = _check_prepare_threshold(prepare_threshold)
        self._threshold = threshold
        self._prepare: bool | None = None if threshold is not None else False
        """Passed as every statement's ``prepare``: None lets the connection's threshold
        decide; False (with ``prepare_threshold=None``) never prepares, on any pool."""
        self._ready = False
        self._closed = False
        self._order: list[str] = _STATUSES  # the server's order, read at setup
        self._pool: _PoolT
        if isinstance(conninfo_or_pool, self._POOL):
            self._pool = conninfo_or_pool
            self._owns_pool = False
            pool_conninfo = conninfo_or_pool.conninfo
            self._target = _Target.parse(pool_conninfo) if type(pool_conninfo) is str else None
            self._attempts = (conninfo_or_pool.max_size or 1) + 1
        else:
            self._target = _Target.parse(conninfo_or_pool)
            self._owns_pool = True
            self._pool = self._POOL(
                self._target.conninfo,
                kwargs=_connect_kwargs(self._target, self._timeout, threshold),
                min_size=min_size,
                max_size=max_size,
                open=False,
                timeout=self._timeout,
                name=_APPLICATION_NAME,
            )
            self._attempts = max_size + 1
        self._make_setup_lock()

    def _make_setup_lock(self) -> None:
        """Make the lock that guards setting up the table and closing, if the store's
        kind needs one now (the asyncio store makes its own on first use)."""

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, **options: Any) -> Self:
        """A store owning a pool on ``url`` (``postgresql://user:password@host:port/db``
        or a libpq key=value string, parsed by the constructor: the one parser of
        PostgreSQL URLs, behind :func:`open_url` and so
        :func:`~tool_execution_checkpoint.open_store` too); ``options`` are the
        constructor's keyword arguments.

        ``create=False`` is ``create_table=False``: a missing table is a
        PostgresConfigurationError saying there is no checkpoint table, never created
        (passing ``create_table=True`` with it is refused). Nothing is sent before the
        first operation.

        Raises:
            CheckpointError: INVALID_ARGUMENT as the constructor raises it, naming no
                part of the URL, and for ``create_table=True`` with ``create=False``.
        """
        if not create:
            if options.get("create_table", False):
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT,
                    "cannot be True when opening with create=False",
                    field="create_table",
                )
            options["create_table"] = False
        return cls(url, **options)

    def _creating(self, key: str, record: Checkpoint) -> _Exchange[bool]:
        params = _create_params(key, record)
        answer = yield _Statement("create", self._sql.insert, params)
        assert answer is not None
        return answer[0] == 1

    def _getting(self, key: str) -> _Exchange[Mapping[str, Any] | None]:
        check_key(key)
        answer = yield _Statement("get", self._sql.select, (key,))
        assert answer is not None
        return _decoded(answer[1])

    def _swapping(self, key: str, expected_revision: int, record: Checkpoint) -> _Exchange[bool]:
        query, params = _swap_statement(
            self._sql, key, expected_revision, record, relax=self._relax
        )
        answer = yield _Statement("compare-and-swap", query, params)
        assert answer is not None
        return answer[0] == 1

    def _clocking(self) -> _Exchange[int]:
        answer = yield _Statement("clock read", self._sql.clock, ())
        assert answer is not None
        return int(answer[1][0][0])

    def _written(self, key: str) -> _Exchange[int | None]:
        check_key(key)
        answer = yield _Statement("write-time read", self._sql.written, (key,))
        assert answer is not None
        return int(answer[1][0][0]) if answer[1] else None

    def _listing(
        self,
        statuses: Collection[Status],
        written_before_us: int | None,
        after_key: str | None,
        limit: int,
    ) -> _Exchange[list[RecordSummary | BrokenRecord]]:
        listing = check_listing(statuses, written_before_us, after_key, limit)
        if not listing.statuses:
            return []
        yield _READY  # the server's order of the statuses is read at setup
        found: list[RecordSummary | BrokenRecord] = []
        after = listing.after_key
        while True:
            remaining = listing.limit - len(found)
            query, params = _list_query(self._sql, self._order, listing, after, remaining)
            answer = yield _Statement("list", query, params)
            assert answer is not None
            lines, cut = _page(answer[1], listing, remaining)
            found += lines[:remaining]
            if cut is None or len(found) == listing.limit:
                return found
            after = cut

    def _setting_up(self) -> _Setup:
        """Check the server and the table, creating the table if it is missing and the
        store may; raises PostgresConfigurationError saying what to fix."""
        inspect = (self._sql.inspect, (_STATUSES, self._sql.schema, self._sql.qualified_text))
        lock = (self._sql.lock, (self._sql.lock_id,))
        inspection = _Inspection.of((yield _SetupStep((inspect,), False))[0])
        if _maybe_being_created(inspection):
            inspection = _Inspection.of((yield _SetupStep((lock, inspect), True))[0])
        create = _judge(inspection, self._sql, durable=self._durable, create=self._create_table)
        self._order = list(inspection.status_order)
        if create:
            creation: list[tuple[bytes, tuple[Any, ...] | None]] = [lock]
            creation += [(statement, None) for statement in self._sql.ddl_bytes]
            yield _SetupStep(tuple(creation), True)
            created = _Inspection.of((yield _SetupStep((inspect,), False))[0])
            _judge(created, self._sql, durable=self._durable, create=False)

    def _setup_failure(self, error: psycopg.Error) -> PostgresNotAppliedError:
        return PostgresNotAppliedError(
            f"setting up the table {self._sql.schema}.{self._sql.table} failed "
            f"({_server_refusal(error)}); nothing was written"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self._sql.schema}.{self._sql.table})"

    def schema_sql(self) -> str:
        """The DDL that first use runs when the table is missing, for a DBA to run."""
        return self._sql.schema_sql()


class PostgresStore(_PostgresStoreBase[ConnectionPool[Any]]):
    """An :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore` in a PostgreSQL
    table, over a psycopg_pool :class:`~psycopg_pool.ConnectionPool`. Thread-safe.

    Args:
        conninfo_or_pool: A ``postgresql://`` URL or libpq key=value string (the store
            makes and owns a pool, closed by :meth:`close`), or a ``ConnectionPool`` the
            caller owns (:meth:`close` leaves it open; borrowed connections are switched to
            autocommit while the store uses them).
        table: The table's name: lowercase letters, digits and underscores, at most 48
            characters, starting with a letter or underscore.
        schema: The schema holding the table (it must exist): the same rules, at most 63
            characters.
        connect_timeout: Seconds to wait for a connection, from the server or the pool.
        min_size, max_size: The owned pool's size.
        create_table: Create the table on first use if it is missing (needs CREATE on the
            schema). With False, a missing table is a
            PostgresConfigurationError.
        durable: Refuse a server with ``synchronous_commit`` or ``fsync`` off (the
            default). Pass False only for tests and throwaway data.
        synchronous_delivered: With False (the default), a ``compare_and_swap`` whose
            record's status is in ``TABLE.relaxed_statuses`` (today delivered, which only
            complete_delivery and prune_result land in) commits asynchronously: the server
            acknowledges it before its WAL is flushed; every other write waits for the
            flush as the server's ``synchronous_commit`` says. With True, every write
            waits. It must be a bool (from :meth:`from_url` and :func:`open_url` too, as
            a keyword option: the URL's query is libpq's).
        prepare_threshold: psycopg's setting: after how many runs on one connection a
            statement is prepared there (5, psycopg's default; 0 prepares it on its first
            run). It is each connection's setting on the store's own pool; on a caller's
            pool an int leaves the pool's own connections' setting in force. None never
            prepares, on any pool: no statement the store sends is named, as a
            transaction-mode pooler without prepared statements needs. A keyword option
            of :meth:`from_url` and :func:`open_url` too.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a bad argument, before anything is sent.

    **Delivered marks are acknowledged before they are flushed** (unless
    ``synchronous_delivered=True``). Such a swap is still one UPDATE in one round trip:
    its WHERE clause also evaluates ``set_config('synchronous_commit', 'off', true)``,
    which, like SET LOCAL, holds only until the statement's own transaction ends, and
    PostgreSQL decides a transaction's commit mode by the setting in effect when it
    commits. The connection goes back to the pool with the server's setting, so no other
    write is relaxed by it. The compare-and-swap is unchanged: it swaps exactly when the
    row is at the expected revision, and ``get`` reads back exactly the record written.

    *What may be lost.* PostgreSQL documents the risk window of an asynchronous commit
    as at most three times ``wal_writer_delay`` (200 ms by default, so about 0.6 s): a
    server crash, an OS crash or an immediate-mode shutdown within that time after the
    acknowledgement may lose the write (a synchronous standby is not waited for either).
    The database then recovers as if that transaction had rolled back: nothing is
    corrupted, and the record is the one before it. WAL is flushed in order, up to a
    position, and replayed in commit order, so any later durable commit on the server
    flushes every earlier relaxed one with it: a lost write is never followed by a kept
    one, and no hole is left.

    *Why the default is safe.* No guarantee depends on the delivered mark: the table
    marks complete_delivery and prune_result non-durable, and refuses that for any
    transition that grants an action or leaves a status answered with execute. A lost
    completion leaves the record delivering, which the protocol answers with
    reconcile-delivery (never execute), and a host that hands results back to its
    framework answers it from the stored payload, as it does delivered; a lost prune
    leaves the record delivered with its payload, to be pruned again. Pass True where
    something outside the protocol reads the delivered mark and must never see it
    regress.
    """

    _POOL = ConnectionPool

    def _make_setup_lock(self) -> None:
        self._setup_lock = threading.Lock()

    # --- connections ----------------------------------------------------------------------

    def _connect_directly(self) -> psycopg.Connection[Any]:
        assert self._target is not None
        try:
            return psycopg.connect(
                self._target.conninfo,
                **_connect_kwargs(self._target, self._timeout, self._threshold),
            )
        except psycopg.Error as error:
            failure = _connect_failure(error, self._target)
        raise failure  # outside the except: libpq's message is not kept as the context

    def _diagnose(self, error: BaseException) -> PostgresStoreError:
        """Why no pooled connection came: try one direct connection for the reason."""
        if self._target is not None:
            try:
                self._connect_directly().close()
            except PostgresStoreError as reason:
                return reason
        return PostgresUnavailableError(
            f"no database connection within {self._timeout:g} s ({type(error).__name__}): "
            f"the pool is exhausted or the server is unreachable"
        )

    def _acquire(self) -> psycopg.Connection[Any]:
        """A live pooled connection; a PostgresStoreError (nothing was sent) if there is none."""
        deadline = monotonic() + self._timeout
        for _ in range(self._attempts):
            problem: BaseException | None = None
            try:
                connection: psycopg.Connection[Any] = self._pool.getconn(
                    timeout=max(deadline - monotonic(), 0.001)
                )
            except (PoolClosed, PoolTimeout, psycopg.Error) as error:
                problem = error
            # Raised outside the except, so that no context holds the pool's error.
            if isinstance(problem, PoolClosed):
                raise _closed_error()
            if problem is not None:
                raise self._diagnose(problem)
            if _alive(connection):
                return connection
            connection.close()
            self._pool.putconn(connection)
        raise PostgresUnavailableError("every pooled connection tried was dead; nothing was sent")

    def _release(self, connection: psycopg.Connection[Any]) -> None:
        self._pool.putconn(connection)

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._setup_lock:
            if self._closed:
                raise _closed_error()
            if self._ready:
                return
            if self._owns_pool:
                with self._connect_directly() as connection:
                    self._set_up(connection)
                self._pool.open(wait=False)
            else:
                connection = self._acquire()
                borrowed_without_autocommit = not connection.autocommit
                try:
                    if borrowed_without_autocommit:
                        connection.autocommit = True
                    self._set_up(connection)
                finally:
                    if borrowed_without_autocommit and _idle(connection):
                        connection.autocommit = False
                    self._release(connection)
            self._ready = True

    def _set_up(self, connection: psycopg.Connection[Any]) -> None:
        setup = self._setting_up()
        try:
            step = next(setup)
            while True:
                with connection.transaction() if step.transaction else contextlib.nullcontext():
                    for query, params in step.statements:
                        cursor = connection.execute(query, params, prepare=self._prepare)
                rows = cursor.fetchall() if cursor.description is not None else []
                step = setup.send(rows)
        except StopIteration:
            return
        except psycopg.Error as error:
            failure = self._setup_failure(error)
        raise failure  # outside the except: the server's error (its DETAIL may quote a
        # value) is not kept as the context

    # --- the operations ---------------------------------------------------------------------

    def _run(self, exchange: _Exchange[_T]) -> _T:
        """Drive an operation's exchange to its result."""
        try:
            request = next(exchange)
            while True:
                request = exchange.send(self._send(request))
        except StopIteration as done:
            return cast(_T, done.value)

    def _send(self, request: _Statement | _Ready) -> _Answer:
        if isinstance(request, _Ready):
            self._ensure_ready()
            return None
        return self._execute(request)

    def _execute(self, statement: _Statement) -> tuple[int, list[Any]]:
        """Send one statement on one pooled connection: one round trip. Return the row
        count of a write, or the rows of a read."""
        if self._closed:
            raise _closed_error()
        self._ensure_ready()
        connection = self._acquire()
        borrowed_without_autocommit = not connection.autocommit
        try:
            if borrowed_without_autocommit:  # a caller's pool: local switch, no round trip
                connection.autocommit = True
            cursor = connection.execute(statement.query, statement.params, prepare=self._prepare)
            return cursor.rowcount, [] if statement.write else cursor.fetchall()
        except psycopg.Error as error:
            failure = _operation_failure(error, statement.operation, write=statement.write)
        finally:
            if borrowed_without_autocommit and _idle(connection):
                connection.autocommit = False
            self._release(connection)
        raise failure  # outside the except: the server's error is not kept as the context

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if no row is there (one INSERT ... ON CONFLICT
        DO NOTHING); return whether it inserted.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a bad key or a record not at revision 1.
            PostgresOutcomeUnknownError: the INSERT was sent and its outcome is unknown.
            PostgresStoreError: any other: it failed and was not applied.
        """
        return self._run(self._creating(key, record))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return a fresh mapping of the record stored under ``key`` (exactly the JSON
        that was written), or None when no row is there.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a bad key; INVALID_CHECKPOINT (or
                UNSUPPORTED_SCHEMA) when the row's record is not a valid record: not
                JSON, too deep, an integer past the digit limit, not an object (``null``
                included), or an object that does not validate (see
                :func:`~tool_execution_checkpoint.stores.decode_stored`).
            PostgresStoreError: the read failed.
        """
        return self._run(self._getting(key))

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """Replace the row under ``key`` with ``record`` if its revision is still
        ``expected_revision`` (one UPDATE ... WHERE key AND revision); return whether it
        did. A ``record`` in a status of ``TABLE.relaxed_statuses`` (delivered) commits
        asynchronously unless the store was made with ``synchronous_delivered=True``.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a bad key, or a record whose revision is
                not ``expected_revision + 1``.
            PostgresOutcomeUnknownError: the UPDATE was sent and its outcome is unknown:
                read back.
            PostgresStoreError: any other: it failed and was not applied.
        """
        return self._run(self._swapping(key, expected_revision, record))

    def clock_us(self) -> int:
        """The server's time now (``statement_timestamp()``), in microseconds since the
        epoch: the clock of every write's ``updated_us``. One SELECT."""
        return self._run(self._clocking())

    def written_us(self, key: str) -> int | None:
        """When the server last wrote the row under ``key`` (its ``updated_us``), or None
        when no row is there. One SELECT."""
        return self._run(self._written(key))

    def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """Records in any of ``statuses`` last written before ``written_before_us`` on
        the server's clock (microseconds since the epoch, as :meth:`clock_us`; None for
        any time), in key order (code points), starting after ``after_key``, at most
        ``limit`` of them. Page by passing the last key back. Filters on the ``status``
        and ``updated_us`` columns.

        Raises:
            CheckpointError: INVALID_ARGUMENT for bad arguments (see
                :func:`~tool_execution_checkpoint.stores.check_listing`, which also
                bounds them as every store does).
            PostgresStoreError: the read failed.

        A stored record that is not valid is listed as a
        :class:`~tool_execution_checkpoint.stores.BrokenRecord` where its status and
        updated_us columns place it; a row whose status column is no status is listed by
        its record's own status instead (a BrokenRecord in every listing when
        that record is not valid either). Neither stops nor hides anything. One round
        trip per page (another only when a page of rows the listing skips filled it).
        """
        return self._run(self._listing(statuses, written_before_us, after_key, limit))

    def close(self) -> None:
        """Close the pool if the store made it; later operations raise PostgresNotAppliedError."""
        with self._setup_lock:
            self._closed = True
        if self._owns_pool:
            self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_url(url: str, *, create: bool = True, **options: Any) -> PostgresStore:
    """The opener of ``postgresql://`` and ``postgres://`` URLs for
    :func:`tool_execution_checkpoint.open_store`: :meth:`PostgresStore.from_url`, with
    the same URLs, errors and options (``create``, and the constructor's ``schema``,
    ``table``, ``connect_timeout``, ``min_size``, ``max_size``, ``create_table``,
    ``durable``, ``synchronous_delivered``, ``prepare_threshold``). Nothing is sent
    before the first operation."""
    return PostgresStore.from_url(url, create=create, **options)


def open_store(url: str) -> PostgresStore:
    """``PostgresStore.from_url(url)``: a factory by module path (``module:callable``) for
    tools that build a store in another process."""
    return PostgresStore.from_url(url)


# --- the asyncio store -------------------------------------------------------------------


class AsyncPostgresStore(_PostgresStoreBase[AsyncConnectionPool[Any]]):
    """The asyncio twin of :class:`PostgresStore`, over psycopg_pool's
    :class:`~psycopg_pool.AsyncConnectionPool`, with the same arguments, contract and
    errors. Its operations are coroutines; close it with :meth:`aclose`. Use it from one
    event loop: the one its first operation runs on (its pool lives there).

    ``synchronous_delivered`` is :class:`PostgresStore`'s, with the same statements:
    with False (the default), a swap that marks a record delivered (a status of
    ``TABLE.relaxed_statuses``) commits asynchronously, in its one UPDATE, and may be
    lost in a server or OS crash within about three times ``wal_writer_delay`` after it
    was acknowledged (WAL is flushed in order, so a later durable commit flushes it
    too). That is safe because no guarantee depends on the delivered mark: losing it
    leaves delivering, which the protocol answers with reconcile-delivery, and a host
    that hands results back answers from the stored payload. With True, every write
    waits for the flush."""

    _POOL = AsyncConnectionPool
    _setup_lock: asyncio.Lock | None = None  # made on first use, in the store's loop

    # --- connections ----------------------------------------------------------------------

    async def _connect_directly(self) -> psycopg.AsyncConnection[Any]:
        assert self._target is not None
        try:
            return await psycopg.AsyncConnection.connect(
                self._target.conninfo,
                **_connect_kwargs(self._target, self._timeout, self._threshold),
            )
        except psycopg.Error as error:
            failure = _connect_failure(error, self._target)
        raise failure  # outside the except: libpq's message is not kept as the context

    async def _diagnose(self, error: BaseException) -> PostgresStoreError:
        if self._target is not None:
            try:
                await (await self._connect_directly()).close()
            except PostgresStoreError as reason:
                return reason
        return PostgresUnavailableError(
            f"no database connection within {self._timeout:g} s ({type(error).__name__}): "
            f"the pool is exhausted or the server is unreachable"
        )

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        deadline = monotonic() + self._timeout
        for _ in range(self._attempts):
            problem: BaseException | None = None
            try:
                connection: psycopg.AsyncConnection[Any] = await self._pool.getconn(
                    timeout=max(deadline - monotonic(), 0.001)
                )
            except (PoolClosed, PoolTimeout, psycopg.Error) as error:
                problem = error
            # Raised outside the except, so that no context holds the pool's error.
            if isinstance(problem, PoolClosed):
                raise _closed_error()
            if problem is not None:
                raise await self._diagnose(problem)
            if _alive(connection):
                return connection
            await connection.close()
            await self._pool.putconn(connection)
        raise PostgresUnavailableError("every pooled connection tried was dead; nothing was sent")

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if self._closed:
                raise _closed_error()
            if self._ready:
                return
            if self._owns_pool:
                async with await self._connect_directly() as connection:
                    await self._set_up(connection)
                await self._pool.open(wait=False)
            else:
                connection = await self._acquire()
                borrowed_without_autocommit = not connection.autocommit
                try:
                    if borrowed_without_autocommit:
                        await connection.set_autocommit(True)
                    await self._set_up(connection)
                finally:
                    if borrowed_without_autocommit and _idle(connection):
                        await connection.set_autocommit(False)
                    await self._pool.putconn(connection)
            self._ready = True

    async def _set_up(self, connection: psycopg.AsyncConnection[Any]) -> None:
        setup = self._setting_up()
        try:
            step = next(setup)
            while True:
                async with (
                    connection.transaction() if step.transaction else contextlib.nullcontext()
                ):
                    for query, params in step.statements:
                        cursor = await connection.execute(query, params, prepare=self._prepare)
                rows = await cursor.fetchall() if cursor.description is not None else []
                step = setup.send(rows)
        except StopIteration:
            return
        except psycopg.Error as error:
            failure = self._setup_failure(error)
        raise failure  # outside the except: the server's error is not kept as the context

    # --- the operations ---------------------------------------------------------------------

    async def _run(self, exchange: _Exchange[_T]) -> _T:
        """See :meth:`PostgresStore._run`."""
        try:
            request = next(exchange)
            while True:
                request = exchange.send(await self._send(request))
        except StopIteration as done:
            return cast(_T, done.value)

    async def _send(self, request: _Statement | _Ready) -> _Answer:
        if isinstance(request, _Ready):
            await self._ensure_ready()
            return None
        return await self._execute(request)

    async def _execute(self, statement: _Statement) -> tuple[int, list[Any]]:
        """See :meth:`PostgresStore._execute`."""
        if self._closed:
            raise _closed_error()
        await self._ensure_ready()
        connection = await self._acquire()
        borrowed_without_autocommit = not connection.autocommit
        try:
            if borrowed_without_autocommit:  # a caller's pool: local switch, no round trip
                await connection.set_autocommit(True)
            cursor = await connection.execute(
                statement.query, statement.params, prepare=self._prepare
            )
            return cursor.rowcount, [] if statement.write else await cursor.fetchall()
        except psycopg.Error as error:
            failure = _operation_failure(error, statement.operation, write=statement.write)
        finally:
            if borrowed_without_autocommit and _idle(connection):
                await connection.set_autocommit(False)
            await self._pool.putconn(connection)
        raise failure  # outside the except: the server's error is not kept as the context

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`PostgresStore.create_if_absent`."""
        return await self._run(self._creating(key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`PostgresStore.get`."""
        return await self._run(self._getting(key))

    async def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """See :meth:`PostgresStore.compare_and_swap`."""
        return await self._run(self._swapping(key, expected_revision, record))

    async def clock_us(self) -> int:
        """See :meth:`PostgresStore.clock_us`."""
        return await self._run(self._clocking())

    async def written_us(self, key: str) -> int | None:
        """See :meth:`PostgresStore.written_us`."""
        return await self._run(self._written(key))

    async def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """See :meth:`PostgresStore.list_records`."""
        return await self._run(self._listing(statuses, written_before_us, after_key, limit))

    async def aclose(self) -> None:
        """Close the pool if the store made it; later operations raise PostgresNotAppliedError."""
        self._closed = True
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> AsyncPostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def open_async_store(url: str) -> AsyncPostgresStore:
    """``AsyncPostgresStore.from_url(url)``, by module path."""
    return AsyncPostgresStore.from_url(url)
