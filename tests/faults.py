"""Outages of a real store on loopback, for tests/test_fault_suite.py.

Each outage is begun from inside a call (by the tool, or by ``deliver``) and returns only
once the store is really away; it ends by itself a set time later, on a thread:

- :class:`RedisRestart`: redis-server is stopped (SIGTERM: it flushes its append-only
  file, which the test servers fsync on every write) and, ``down_for`` seconds later,
  started again with the very same command line (port, directory, password), so every
  acknowledged durable write is still there.
- :class:`PostgresRestart`: ``pg_ctl stop -m fast`` (every backend is terminated), then
  ``pg_ctl restart`` with the options the server was started with.
- :class:`PostgresKill`: the server stays up, but every write the store sends is killed:
  a superuser holds ``LOCK TABLE ... IN SHARE MODE`` (reads pass, INSERT and UPDATE
  wait) and terminates (``pg_terminate_backend``) each backend of the store's role that
  waits on a lock; at the end it rolls back, and writes pass again.
- :func:`cancelled_while_returning`: an asyncio store's operation cancelled while its
  pool takes the connection back (a second cancellation, as the first unwinds).
- :class:`SQLiteLock`: a second connection holds ``BEGIN IMMEDIATE`` (the write lock; in
  WAL mode reads pass) for ``hold_for`` seconds, then commits.

:class:`SpyStore` and :class:`AsyncSpyStore` wrap a store and count the StoreErrors it
raised, by operation and by the status of the record a swap writes, so a test can show
that the outage hit the write it meant to hit.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg import sql

from postgres_server import PostgresServer, find_bindir
from redis_server import RedisServer, stop_redis_server
from tool_execution_checkpoint import Checkpoint, StoreError

__all__ = [
    "AsyncSpyStore",
    "Outage",
    "PostgresKill",
    "PostgresRestart",
    "RedisRestart",
    "SQLiteLock",
    "SpyStore",
    "cancelled_while_returning",
]


OVER_WITHIN = 30.0
"""How long a test waits, at most, for an outage to be over."""


class Outage:
    """A store taken away by :meth:`begin` and given back by a thread of its own."""

    def __init__(self) -> None:
        self._over = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.begun_at = 0.0
        self.ended_at = 0.0

    def begin(self) -> None:
        """Take the store away; return once it is away. The outage ends by itself."""
        assert self._thread is None, "an outage is begun once"
        self.begun_at = time.monotonic()
        self._take_away()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._give_back()
        except BaseException as error:  # reported by wait_over
            self.failure = error
        finally:
            self.ended_at = time.monotonic()
            self._over.set()

    def wait_over(self, timeout: float = OVER_WITHIN) -> None:
        """Block until the store serves again; raise what went wrong giving it back."""
        if self._thread is None:
            return
        assert self._over.wait(timeout), f"{type(self).__name__} did not end in {timeout} s"
        self._thread.join(timeout)
        if self.failure is not None:
            raise AssertionError(f"{type(self).__name__} failed") from self.failure

    @property
    def seconds(self) -> float:
        """How long the store was away (once over)."""
        return self.ended_at - self.begun_at

    def _take_away(self) -> None:
        raise NotImplementedError

    def _give_back(self) -> None:
        raise NotImplementedError


class RedisRestart(Outage):
    """Stop ``server`` now; start it again, same command line, ``down_for`` s later. With
    ``keep_data=False`` its append-only files are removed while it is down: it comes back
    empty, as a failover to a replica that never got the last writes would."""

    def __init__(self, server: RedisServer, down_for: float, *, keep_data: bool = True) -> None:
        super().__init__()
        self.server = server
        self.down_for = down_for
        self.keep_data = keep_data

    def _take_away(self) -> None:
        stop_redis_server(self.server)
        if not self.keep_data:
            shutil.rmtree(self.server.directory / "appendonlydir")

    def _give_back(self) -> None:
        time.sleep(self.down_for)  # the outage itself, not a wait for something
        self.server.process = subprocess.Popen(
            self.server.process.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + OVER_WITHIN
        while time.monotonic() < deadline:
            assert self.server.process.poll() is None, "redis-server did not come back"
            client = self.server.client(socket_timeout=1.0)
            try:
                if client.ping():
                    return
            except redis.RedisError:  # refused, or still loading its data
                time.sleep(0.01)
            finally:
                client.close()
        raise AssertionError("redis-server did not answer after its restart")


def _pg_ctl(server: PostgresServer, *arguments: str) -> None:
    assert server.directory is not None
    data = server.directory / "data"
    server._run(
        str(find_bindir() / "pg_ctl"), "-D", str(data), *arguments
    )  # its pg_ctl, as postgres when root


class PostgresRestart(Outage):
    """``pg_ctl stop -m fast`` now; ``pg_ctl restart`` (its recorded options) later."""

    def __init__(self, server: PostgresServer, down_for: float) -> None:
        super().__init__()
        self.server = server
        self.down_for = down_for

    def _take_away(self) -> None:
        _pg_ctl(self.server, "-m", "fast", "-w", "stop")

    def _give_back(self) -> None:
        time.sleep(self.down_for)  # the outage itself
        assert self.server.directory is not None
        log = str(self.server.directory / "server.log")
        # Not running, restart starts it with the options of postmaster.opts; -w waits
        # until it accepts connections.
        _pg_ctl(self.server, "-l", log, "-w", "restart")


class PostgresKill(Outage):
    """Kill every write of ``role`` on ``table`` for ``hold_for`` seconds."""

    def __init__(
        self, server: PostgresServer, table: str, hold_for: float, role: str = "tec_app"
    ) -> None:
        super().__init__()
        self.server = server
        self.table = table
        self.hold_for = hold_for
        self.role = role
        self.killed = 0
        self._holder: psycopg.Connection[Any] | None = None

    def _take_away(self) -> None:
        holder = psycopg.connect(self.server.admin_url)
        holder.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(sql.Identifier(self.table)))
        self._holder = holder

    def _give_back(self) -> None:
        holder = self._holder
        assert holder is not None
        try:
            with psycopg.connect(self.server.admin_url, autocommit=True) as killer:
                deadline = time.monotonic() + self.hold_for
                while time.monotonic() < deadline:
                    rows = killer.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE usename = %s AND wait_event_type = 'Lock'",
                        (self.role,),
                    ).fetchall()
                    self.killed += sum(1 for (done,) in rows if done)
                    time.sleep(0.005)  # the next look at pg_stat_activity
        finally:
            holder.rollback()
            holder.close()


class SQLiteLock(Outage):
    """A second connection holds the write lock of ``path`` for ``hold_for`` seconds."""

    def __init__(self, path: Path, hold_for: float) -> None:
        super().__init__()
        self.path = path
        self.hold_for = hold_for
        self._holder: sqlite3.Connection | None = None

    def _take_away(self) -> None:
        holder = sqlite3.connect(
            self.path, isolation_level=None, timeout=OVER_WITHIN, check_same_thread=False
        )
        holder.execute("BEGIN IMMEDIATE")
        self._holder = holder

    def _give_back(self) -> None:
        holder = self._holder
        assert holder is not None
        try:
            time.sleep(self.hold_for)  # the outage itself
            holder.execute("COMMIT")
        finally:
            holder.close()


# --- counting the store's failures -----------------------------------------------------------


def _what(operation: str, args: tuple[Any, ...]) -> str:
    """``create``, ``get``, or ``swap:<status written>``."""
    if operation == "compare_and_swap":
        record = args[-1]
        assert isinstance(record, Checkpoint)
        return f"swap:{record.status.value}"
    return "create" if operation == "create_if_absent" else "get"


class SpyStore:
    """A sync store's three operations, with each StoreError counted in ``failed``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed: Counter[str] = Counter()

    def _call(self, operation: str, *args: Any, **options: Any) -> Any:
        try:
            return getattr(self.inner, operation)(*args, **options)
        except StoreError:
            self.failed[_what(operation, args)] += 1
            raise

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        answer: bool = self._call("create_if_absent", key, record)
        return answer

    def get(self, key: str) -> Mapping[str, Any] | None:
        answer: Mapping[str, Any] | None = self._call("get", key)
        return answer

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        answer: bool = self._call(
            "compare_and_swap", key, expected_revision, record, durable=durable
        )
        return answer


class AsyncSpyStore:
    """An async store's three operations, with each StoreError counted in ``failed``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed: Counter[str] = Counter()

    async def _call(self, operation: str, *args: Any, **options: Any) -> Any:
        method: Callable[..., Awaitable[Any]] = getattr(self.inner, operation)
        try:
            return await method(*args, **options)
        except StoreError:
            self.failed[_what(operation, args)] += 1
            raise

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        answer: bool = await self._call("create_if_absent", key, record)
        return answer

    async def get(self, key: str) -> Mapping[str, Any] | None:
        answer: Mapping[str, Any] | None = await self._call("get", key)
        return answer

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        answer: bool = await self._call(
            "compare_and_swap", key, expected_revision, record, durable=durable
        )
        return answer


async def cancelled_while_returning(
    pool: Any, method: str, operation: Callable[[], Awaitable[object]]
) -> list[object]:
    """Run ``operation`` with ``pool``'s connection return (its method ``method``) held,
    cancel the operation's task while the return is held, then let the return go on.
    Return the connections the pool took back (waiting up to a second for a return that
    goes on after the cancellation)."""
    original = getattr(pool, method)
    returned: list[object] = []
    returning, gate = asyncio.Event(), asyncio.Event()

    async def held(connection: object) -> None:
        returning.set()
        await gate.wait()
        await original(connection)
        returned.append(connection)

    setattr(pool, method, held)
    try:
        task = asyncio.ensure_future(operation())
        await returning.wait()
        task.cancel()
        await asyncio.sleep(0.01)
        gate.set()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the operation was not cancelled")
        for _ in range(100):
            if returned:
                break
            await asyncio.sleep(0.01)
    finally:
        setattr(pool, method, original)
    return returned
