"""The store's names, options and statements: everything fixed when a store is built,
checked before any SQL is sent (a bad argument is CheckpointError INVALID_ARGUMENT), and
the statements for one table, rendered once to bytes."""

from __future__ import annotations

import hashlib
import math
import re

from psycopg import sql

from ...errors import CheckpointError, ErrorCode
from ...table import Status

__all__ = [
    "APPLICATION_NAME",
    "LAYOUT",
    "LAYOUT_MARKER",
    "RELAX",
    "SCHEMA_NAME",
    "STATUSES",
    "TABLE_NAME",
    "Statements",
    "check_name",
    "check_prepare_threshold",
    "check_sizes",
    "check_timeout",
]

LAYOUT = 1
"""The table layout this module reads and writes."""
LAYOUT_MARKER = f"tool-execution-checkpoint store, layout {LAYOUT}"
"""The table comment that marks a table as a checkpoint table of :data:`LAYOUT`."""

TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
"""A table name: a lowercase SQL identifier of at most 48 characters (its index's name
adds 15)."""
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A schema name: a lowercase SQL identifier of at most 63 characters."""
APPLICATION_NAME = "tool-execution-checkpoint"
"""The ``application_name`` of the store's connections (unless the URL sets one)."""
STATUSES = sorted(status.value for status in Status)
"""The statuses in code-point order (the server's own order is read at setup)."""

RELAX = " AND set_config('synchronous_commit', 'off', true) = 'off'"
"""The condition that makes a compare-and-swap commit asynchronously (see Statements)."""

_NOW_US = "(extract(epoch FROM statement_timestamp()) * 1000000)::bigint"
"""The server's time now in microseconds since the epoch: what every write stores."""


def check_name(value: object, pattern: re.Pattern[str], field: str, limit: int) -> str:
    """``value`` if ``pattern`` matches all of it; else CheckpointError INVALID_ARGUMENT
    naming ``field`` and ``limit``."""
    if type(value) is not str or pattern.fullmatch(value) is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be a lowercase SQL identifier: a letter or underscore, then letters, "
            f"digits or underscores, at most {limit} characters",
            field=field,
            limit=limit,
        )
    return value


def check_timeout(value: object) -> float:
    """``connect_timeout`` in seconds: a number above 0 and at most 600."""
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


def check_sizes(min_size: object, max_size: object) -> tuple[int, int]:
    """The owned pool's sizes: ints with 0 <= min_size <= 1000 and
    max(1, min_size) <= max_size <= 1000."""
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


def check_prepare_threshold(value: object) -> int | None:
    """psycopg's ``prepare_threshold``: None (never prepare) or an int from 0 to 1000000."""
    if value is None or (type(value) is int and 0 <= value <= 1_000_000):
        return value
    raise CheckpointError(
        ErrorCode.INVALID_ARGUMENT,
        "must be None (never prepare) or an int from 0 to 1000000",
        field="prepare_threshold",
    )


def _render(query: sql.Composable) -> bytes:
    return query.as_string().encode()


class Statements:
    """The store's statements for one table, rendered once to bytes (the names are
    checked by the caller)."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema = schema
        self.table = table
        self.qualified_text = f'"{schema}"."{table}"'
        qualified = sql.Identifier(schema, table)
        self.insert = _render(
            sql.SQL(
                "INSERT INTO {} (key, revision, status, updated_us, record) "
                f"VALUES (%s, %s, %s, {_NOW_US}, %s) ON CONFLICT (key) DO NOTHING"
            ).format(qualified)
        )
        update = (
            f"UPDATE {{}} SET revision = %s, status = %s, updated_us = {_NOW_US}, record = %s "
            "WHERE key = %s AND revision = %s"
        )
        self.update = _render(sql.SQL(update).format(qualified))
        # A relaxed swap is the same UPDATE with one more condition, always true, that
        # turns synchronous_commit off for the statement's own transaction (is_local:
        # until it ends, as SET LOCAL). It is evaluated for the row before the row is
        # updated, so whenever the swap writes, its commit is asynchronous; when it finds
        # no row at the revision, nothing is written and nothing is committed.
        self.update_relaxed = _render(sql.SQL(update + RELAX).format(qualified))
        self.select = _render(sql.SQL("SELECT record FROM {} WHERE key = %s").format(qualified))
        self.clock = _render(sql.SQL(f"SELECT {_NOW_US}"))
        self.written = _render(
            sql.SQL("SELECT updated_us FROM {} WHERE key = %s").format(qualified)
        )
        self.lists = _listing_statements(qualified)
        """The listing statements, by (written before a time?, after a key?)."""
        self.lock = _render(sql.SQL("SELECT pg_advisory_xact_lock(%s)"))
        digest = hashlib.sha256(f"{APPLICATION_NAME}:{self.qualified_text}".encode()).digest()
        self.lock_id = int.from_bytes(digest[:8], "big", signed=True)
        """The advisory lock that serialises creating this table."""
        self.ddl = _ddl(qualified, sql.Identifier(f"{table}_status_updated"))
        self.ddl_bytes = [_render(statement) for statement in self.ddl]
        self.inspect = _render(sql.SQL(_INSPECT))
        """One row: the server's settings, the role, the schema and the table (see
        :class:`~.exchanges.Inspection`), and the statuses in the server's order."""

    def schema_sql(self) -> str:
        """The DDL, as one script a DBA can run (or put in a migration)."""
        return ";\n".join(statement.as_string() for statement in self.ddl) + ";\n"


def _listing_statements(qualified: sql.Identifier) -> dict[tuple[bool, bool], bytes]:
    # A listing is one statement of two parts: the rows the (status, updated_us) columns
    # place, and the rows whose status column is no status (listed by their record). The
    # second part is one range of the index per gap between the statuses, in the server's
    # own order of them (read at setup): cheap when, as usual, no such row exists.
    gaps = " OR ".join(
        [
            "status < %s",
            *("(status > %s AND status < %s)" for _ in STATUSES[1:]),
            "status > %s",
        ]
    )
    lists: dict[tuple[bool, bool], bytes] = {}
    for before in (False, True):
        for after in (False, True):
            conditions = [sql.SQL("status = ANY(%s)")]
            if before:
                conditions.append(sql.SQL("updated_us < %s"))
            odd = [sql.SQL(f"({gaps})")]
            if after:
                conditions.append(sql.SQL("key > %s"))
                odd.append(sql.SQL("key > %s"))
            lists[before, after] = _render(
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
    return lists


def _ddl(qualified: sql.Identifier, index: sql.Identifier) -> list[sql.Composed]:
    return [
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


_INSPECT = (
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
