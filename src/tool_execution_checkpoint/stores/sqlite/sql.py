"""SQLiteStore's tables and statements, and what the rows they read mean.

Every statement the store sends is here, as text; the benchmarks' raw side sends the
same texts (``INSERT``, ``SELECT``, ``UPDATE``) with none of the store's code.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from ...table import Status
from ..core import RecordSummary

__all__ = [
    "BEGIN",
    "INSERT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SELECT",
    "SELECT_WRITTEN",
    "UPDATE",
    "listing_queries",
    "stored_bytes",
    "summary",
]

SCHEMA_VERSION: Final = 1
"""The version of the tables this module writes, kept in ``tec_meta``."""

INT64_MAX: Final = 2**63 - 1

SCHEMA = (
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
INSERT = (
    "INSERT INTO tec_checkpoint"
    " (key, revision, status, namespace, call_id, updated_at, updated_us, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
)
UPDATE = (
    "UPDATE tec_checkpoint SET revision = ?, status = ?, namespace = ?, call_id = ?,"
    " updated_at = ?, updated_us = ?, record = ? WHERE key = ? AND revision = ?"
)
# Text columns are read as blobs and decoded here: SQLite's own decoding of a column that
# is not UTF-8 raises an error whose message quotes the row's text.
SELECT = "SELECT CAST(record AS BLOB) FROM tec_checkpoint WHERE key = ?"
SELECT_WRITTEN = "SELECT updated_us, CAST(record AS BLOB) FROM tec_checkpoint WHERE key = ?"
BEGIN = "BEGIN IMMEDIATE"

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
    *((status, INT64_MAX) for status in _KNOWN),
)

Query = tuple[str, list[object]]
"""A statement and its parameters."""


def listing_queries(
    wanted: Sequence[str], before: int | None, after: str | None, limit: int
) -> tuple[Query, Query]:
    """The two queries of a page of a listing: the rows of the ``wanted`` statuses (in
    order) written before ``before`` by their indexed columns, and the odd rows (whose
    columns cannot place them) with their records; both after the key ``after``, in key
    order, at most ``limit`` rows each."""
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
    return (statement, parameters), (odd_statement, odd_parameters)


def stored_bytes(value: object) -> bytes:
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


def summary(row: Sequence[object]) -> RecordSummary | None:
    """The summary a row of a listing's first query gives, or None when a column is not
    what this store writes (the row is then listed by its record)."""
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
