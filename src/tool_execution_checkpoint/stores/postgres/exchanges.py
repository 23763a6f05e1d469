"""The exchanges: each operation's statements and judgments, written once and sans I/O.

Every operation, and the setup at first use, is a generator that yields the requests it
needs sent and is sent back each one's answer; it decides everything itself (what to
send next, what the answers mean). A driver (:mod:`.store_async`, and :mod:`.store`
generated from it) owns only the I/O: connections, autocommit, transactions, and
turning psycopg's errors into the store's (:mod:`.errors`).
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ...records import Checkpoint
from .. import core
from ..core import BrokenRecord, Listing, RecordSummary
from .errors import PostgresConfigurationError
from .sql import LAYOUT, LAYOUT_MARKER, STATUSES, Statements

__all__ = [
    "READY",
    "Answer",
    "Exchange",
    "Inspection",
    "Ready",
    "Setup",
    "SetupStep",
    "Statement",
    "clocking",
    "creating",
    "getting",
    "judge",
    "listing",
    "setting_up",
    "swapping",
    "written",
]

Operation = Literal["create", "get", "compare-and-swap", "list", "clock read", "write-time read"]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of an operation, sent on one pooled connection in one round trip;
    answered with its row count and, for a read, its rows (none for a write)."""

    operation: Operation
    query: bytes
    params: tuple[Any, ...]

    @property
    def write(self) -> bool:
        """Whether the statement writes (its outcome may be unknown if it fails)."""
        return self.operation in ("create", "compare-and-swap")


class Ready:
    """The request to set the table up if that has not been done; answered with the
    statuses in the server's order (read at setup)."""


READY = Ready()


@dataclass(frozen=True, slots=True)
class SetupStep:
    """Statements of the setup, sent in order on the setup's one connection, in one
    transaction when ``transaction``; answered with the last one's rows."""

    statements: tuple[tuple[bytes, tuple[Any, ...] | None], ...]
    transaction: bool


Answer = tuple[int, list[Any]] | list[str]
"""A statement's (row count, rows), or the server's order of the statuses for READY."""
Exchange = Generator[Statement | Ready, Answer, _T]
Setup = Generator[SetupStep, list[Any], list[str]]
"""The setup's steps; it returns the statuses in the server's order."""


def _sent(statement: Statement) -> Exchange[tuple[int, list[Any]]]:
    answer = yield statement
    assert isinstance(answer, tuple)
    return answer


def _ready() -> Exchange[list[str]]:
    order = yield READY
    assert isinstance(order, list)
    return order


# --- the operations ------------------------------------------------------------------------


def creating(statements: Statements, key: str, record: Checkpoint) -> Exchange[bool]:
    """``create_if_absent``: one INSERT ... ON CONFLICT DO NOTHING; whether it inserted."""
    encoded = core.encode_create(key, record)
    params = (key, encoded.record.revision, encoded.record.status.value, encoded.text)
    count, _ = yield from _sent(Statement("create", statements.insert, params))
    return count == 1


def getting(statements: Statements, key: str) -> Exchange[Mapping[str, Any] | None]:
    """``get``: one SELECT; the decoded record, or None only for no row."""
    core.check_key(key)
    _, rows = yield from _sent(Statement("get", statements.select, (key,)))
    return core.decode_stored(rows[0][0]) if rows else None


def swapping(
    statements: Statements, key: str, expected_revision: int, record: Checkpoint, *, relax: bool
) -> Exchange[bool]:
    """``compare_and_swap``: one UPDATE ... WHERE key AND revision (the relaxed one, which
    commits asynchronously, when ``relax``: a non-durable swap on a store that relaxes
    them); whether it swapped."""
    encoded = core.encode_swap(key, expected_revision, record)
    record = encoded.record
    query = statements.update_relaxed if relax else statements.update
    params = (record.revision, record.status.value, encoded.text, key, expected_revision)
    count, _ = yield from _sent(Statement("compare-and-swap", query, params))
    return count == 1


def clocking(statements: Statements) -> Exchange[int]:
    """``clock_us``: one SELECT of the server's time in microseconds since the epoch."""
    _, rows = yield from _sent(Statement("clock read", statements.clock, ()))
    return int(rows[0][0])


def written(statements: Statements, key: str) -> Exchange[int | None]:
    """``written_us``: one SELECT of the row's ``updated_us``; None for no row."""
    core.check_key(key)
    _, rows = yield from _sent(Statement("write-time read", statements.written, (key,)))
    return int(rows[0][0]) if rows else None


def listing(
    statements: Statements, wanted: Listing
) -> Exchange[list[RecordSummary | BrokenRecord]]:
    """``list_records``: one SELECT per page (another only when a page of rows the
    listing skips filled it), after the setup has read the server's order of statuses."""
    checked = core.check_listing(wanted)
    if not checked.statuses:
        return []
    order = yield from _ready()
    found: list[RecordSummary | BrokenRecord] = []
    after = checked.after_key
    while True:
        remaining = checked.limit - len(found)
        query, params = _list_query(statements, order, checked, after, remaining)
        _, rows = yield from _sent(Statement("list", query, params))
        lines, cut = _page(rows, checked, remaining)
        found += lines[:remaining]
        if cut is None or len(found) == checked.limit:
            return found
        after = cut


def _list_query(
    statements: Statements,
    order: Sequence[str],
    listing: Listing,
    after_key: str | None,
    limit: int,
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
            lines.append(core.listing_line(key, text, written_us=written_us))
            continue
        text, written_us = odd[key]
        line = core.listing_line(key, text, written_us=written_us)
        if listing.admits(line):
            lines.append(line)
    return lines, cut


# --- the setup -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inspection:
    """What the setup's inspecting statement read: one row of
    :attr:`~.sql.Statements.inspect`, in its order."""

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
    def of(cls, row: Sequence[Any]) -> Inspection:
        return cls(*row)


def setting_up(statements: Statements, *, durable: bool, create: bool) -> Setup:
    """Check the server and the table, creating the table if it is missing and ``create``;
    return the statuses in the server's order. Raises PostgresConfigurationError saying
    what to fix (see :func:`judge`)."""
    inspect = (statements.inspect, (STATUSES, statements.schema, statements.qualified_text))
    lock = (statements.lock, (statements.lock_id,))
    inspection = Inspection.of((yield SetupStep((inspect,), False))[0])
    if _maybe_being_created(inspection):
        inspection = Inspection.of((yield SetupStep((lock, inspect), True))[0])
    if judge(inspection, statements, durable=durable, create=create):
        creation: list[tuple[bytes, tuple[Any, ...] | None]] = [lock]
        creation += [(statement, None) for statement in statements.ddl_bytes]
        yield SetupStep(tuple(creation), True)
        created = Inspection.of((yield SetupStep((inspect,), False))[0])
        judge(created, statements, durable=durable, create=False)
    return list(inspection.status_order)


def _maybe_being_created(inspection: Inspection) -> bool:
    """Whether a table that looks unmarked may be another store's creation, committing now.

    One statement's catalog lookup (``to_regclass``) can see a table whose creation committed
    after the statement's snapshot was taken, while ``obj_description`` reads with that snapshot
    and misses the comment committed with it. Such a table is judged again after taking the
    creation lock, which its creator holds until it commits."""
    return inspection.table_exists and inspection.marker != LAYOUT_MARKER


def judge(inspection: Inspection, statements: Statements, *, durable: bool, create: bool) -> bool:
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
        return _may_create(inspection, statements, create=create)
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


def _may_create(inspection: Inspection, statements: Statements, *, create: bool) -> bool:
    """True for a missing table the store may create; else the error saying what to do."""
    target = f"{statements.schema}.{statements.table}"
    if not create:
        raise PostgresConfigurationError(
            f"there is no checkpoint table {target}: it does not exist, and with "
            f"create_table=False (create=False) it is never created; name the table "
            f"that holds the records (schema, table), or create it with the DDL of "
            f"schema_sql()"
        )
    if not inspection.schema_create:
        raise PostgresConfigurationError(
            f"the table {target} does not exist and the role {inspection.role} may not "
            f"create it (no CREATE on the schema {statements.schema}): run the DDL of "
            f"schema_sql() as the schema's owner, or GRANT CREATE ON SCHEMA "
            f"{statements.schema} TO {inspection.role}"
        )
    return True
