"""The raw side of stores.py and peers.py: a call's writes with none of the library.

``raw_lifecycle`` makes the writes ``run_once`` makes for a call (the record created
already claimed, the result stored with its delivery claim, the delivered mark) as plain
dict records encoded with ``json.dumps``, and sends them through a :class:`Raw`: each
store's own statements with none of its code. It is a copy of the protocol's writes on
purpose: it is the baseline that shows what the library adds to them.

The statements are the stores' own, taken from them, not copied: SQLiteStore's SQL
texts, the statements a PostgresStore renders for its table, RedisStore's Lua scripts.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast

import redis
from psycopg_pool import ConnectionPool

from tool_execution_checkpoint import SQLiteStore
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.stores.redis import SCRIPTS
from tool_execution_checkpoint.stores.sqlite.sql import INSERT, SELECT, UPDATE
from tool_execution_checkpoint.table import Status

__all__ = [
    "Raw",
    "RawMemory",
    "RawPostgres",
    "RawRedis",
    "RawSQLite",
    "raw_binding",
    "raw_lifecycle",
]


class Raw(Protocol):
    """The storage statements, taking plain dict records and their JSON text."""

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool: ...

    def select(self, key: str) -> dict[str, Any] | None: ...

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool: ...


def _loaded(text: str | bytes | None) -> dict[str, Any] | None:
    return None if text is None else cast(dict[str, Any], json.loads(text))


class RawMemory:
    """What MemoryStore keeps: JSON texts and revisions in dicts, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.texts: dict[str, str] = {}
        self.revisions: dict[str, int] = {}

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        del updated_us
        with self.lock:
            if key in self.texts:
                return False
            self.texts[key] = text
            self.revisions[key] = record["revision"]
            return True

    def select(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            return _loaded(self.texts.get(key))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        del updated_us
        with self.lock:
            if self.revisions.get(key) != expected:
                return False
            self.texts[key] = text
            self.revisions[key] = record["revision"]
            return True


class RawSQLite:
    """SQLiteStore's statements through sqlite3, one connection under a lock (as the
    store has), on a file with the store's schema and its pragmas (WAL, synchronous=FULL):
    BEGIN IMMEDIATE, one INSERT or UPDATE, COMMIT."""

    def __init__(self, path: Path) -> None:
        SQLiteStore(path).close()  # the same schema
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")

    def _write(self, statement: str, parameters: tuple[object, ...]) -> bool:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            if self.db.execute(statement, parameters).rowcount != 1:
                self.db.execute("ROLLBACK")
                return False
            self.db.execute("COMMIT")
            return True

    @staticmethod
    def _columns(record: dict[str, Any], text: str, updated_us: int) -> tuple[object, ...]:
        binding = record["binding"]
        return (
            record["revision"],
            record["status"],
            binding["namespace"],
            binding["callId"],
            record["updatedAt"],
            updated_us,
            text,
        )

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        return self._write(INSERT, (key, *self._columns(record, text, updated_us)))

    def select(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            row = self.db.execute(SELECT, (key,)).fetchone()
        return None if row is None else _loaded(row[0])

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        columns = self._columns(record, text, updated_us)
        return self._write(UPDATE, (*columns, key, expected))

    def close(self) -> None:
        self.db.close()


class RawPostgres:
    """PostgresStore's statements for ``table`` (rendered by a store on that table, which
    also makes the table) through ``pool``, autocommit; the delivered mark is the relaxed
    UPDATE (synchronous_commit off for its transaction), as the store's default is. The
    server stamps ``updated_us``, as it does for the store."""

    def __init__(self, pool: ConnectionPool[Any], url: str, table: str) -> None:
        with PostgresStore(url, table=table) as setup:
            setup.get("set-up")  # the table, made by the store's DDL on first use
            statements = setup._sql
        self.pool = pool
        self.insert_sql, self.select_sql = statements.insert, statements.select
        self.update_sql, self.relaxed_sql = statements.update, statements.update_relaxed

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        del updated_us
        params = (key, record["revision"], record["status"], text)
        with self.pool.connection() as connection:
            return bool(connection.execute(self.insert_sql, params).rowcount == 1)

    def select(self, key: str) -> dict[str, Any] | None:
        with self.pool.connection() as connection:
            row = connection.execute(self.select_sql, (key,)).fetchone()
        return None if row is None else _loaded(row[0])

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        del updated_us
        params = (record["revision"], record["status"], text, key, expected)
        query = self.relaxed_sql if record["status"] == "delivered" else self.update_sql
        with self.pool.connection() as connection:
            return bool(connection.execute(query, params).rowcount == 1)


class RawRedis:
    """RedisStore's Lua scripts (EVALSHA through redis-py's ``register_script``) and
    HGET through plain redis-py, on the store's single-node layout under ``prefix``
    (``{prefix}rec:{key}``, ``{prefix}idx:{status}``); the delivered mark is the relaxed
    swap (kept out of the AOF), as the store's default is."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.create = client.register_script(SCRIPTS["create"])
        self.swap = client.register_script(SCRIPTS["swap"])
        self.swap_relaxed = client.register_script(SCRIPTS["swap_relaxed"])
        self.indexes = {status: f"{prefix}idx:{status.value}" for status in Status}

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        del updated_us
        args = [record["revision"], record["status"], text, key]
        keys = [self.prefix + "rec:" + key, self.indexes[Status(record["status"])]]
        return bool(self.create(keys=keys, args=args))

    def select(self, key: str) -> dict[str, Any] | None:
        return _loaded(cast(bytes | None, self.client.hget(self.prefix + "rec:" + key, "record")))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        del updated_us
        args: list[str | int] = [expected, record["revision"], record["status"], text, key]
        keys = [self.prefix + "rec:" + key, *self.indexes.values()]
        swap = self.swap_relaxed if record["status"] == "delivered" else self.swap
        return bool(swap(keys=keys, args=args))


# --- one call's writes ------------------------------------------------------------------


def _now() -> tuple[str, int]:
    """The time as stored text and as microseconds since the epoch."""
    moment = datetime.now(UTC)
    return moment.isoformat(), int(moment.timestamp() * 1_000_000)


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def raw_binding(call_id: str) -> dict[str, str]:
    """The persisted binding of ``Binding("bench", call_id, "tool", "1", "sha256:0")``,
    the library side's binding, as the raw side writes it."""
    return {
        "namespace": "bench",
        "callId": call_id,
        "toolName": "tool",
        "toolRevision": "1",
        "inputFingerprint": "sha256:0",
    }


def _record(binding: dict[str, str], at: str) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "revision": 1,
        "status": "ready",
        "binding": binding,
        "createdAt": at,
        "updatedAt": at,
        "execution": None,
        "result": None,
        "delivery": None,
    }


def raw_lifecycle(
    raw: Raw,
    key: str,
    *,
    binding: dict[str, str],
    me: str,
    tool: Callable[[], Any],
    deliver: Callable[[Any], None],
    mark: bool = True,
) -> bool:
    """One call's writes as the runner makes them, with dict records and none of the
    library: create the record already claimed, run the tool, store the result with its
    delivery claim, deliver, mark it delivered (unless not ``mark``: the lower bound of a
    call that does not wait for its delivered mark, which peers.py times). False when
    another worker created the record first; like the runner, a landed write needs no
    read, and a lost one reads what the winner left (here: to check it and stop)."""
    at, us = _now()
    execution = {"attemptId": me, "claimedAt": at, "uncertain": None}
    claim = {**_record(binding, at), "status": "executing", "execution": execution}
    if not raw.insert(key, claim, _dumps(claim), us):
        return _lost(raw, key, binding)
    payload = tool()
    at, us = _now()
    result = {"payload": payload, "completedAt": at, "prunedAt": None}
    delivery = {"deliveryId": me, "claimedAt": at, "deliveredAt": None}
    delivering = {**claim, "revision": 2, "status": "delivering", "updatedAt": at}
    delivering |= {"result": result, "delivery": delivery}
    if not raw.update(key, 1, delivering, _dumps(delivering), us):
        raise AssertionError("the owner lost its completion")
    deliver(payload)
    if not mark:
        return True
    at, us = _now()
    delivered = {**delivering, "revision": 3, "status": "delivered", "updatedAt": at}
    delivered["delivery"] = {**delivery, "deliveredAt": at}
    if not raw.update(key, 2, delivered, _dumps(delivered), us):
        raise AssertionError("the owner lost its delivery")
    return True


def _lost(raw: Raw, key: str, binding: dict[str, str]) -> bool:
    """After a lost write: read what the winner stored, as the runner does, and stop."""
    stored = raw.select(key)
    if stored is None or stored["binding"] != binding:
        raise AssertionError("the record is not there")
    return False
