"""The store: the exchanges of :mod:`.exchanges` driven over psycopg's connections and
pool. It is written for asyncio in :mod:`.store_async`; :mod:`.store` is generated from
it by tools/async_to_sync.py."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from time import monotonic
from typing import Any, Self, TypeVar, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from ...errors import CheckpointError, ErrorCode
from ...records import Checkpoint
from ...validation import check_flag
from ..core import BrokenRecord, Listing, RecordSummary
from . import exchanges
from .connections import Target, alive, connect_kwargs, idle
from .errors import (
    PostgresStoreError,
    PostgresUnavailableError,
    closed_error,
    connect_failure,
    operation_failure,
    setup_failure,
)
from .exchanges import Answer, Exchange, Ready, Statement
from .sql import (
    APPLICATION_NAME,
    SCHEMA_NAME,
    STATUSES,
    TABLE_NAME,
    Statements,
    check_name,
    check_prepare_threshold,
    check_sizes,
    check_timeout,
)

if True:  # ASYNC
    import asyncio
else:
    import threading

__all__ = ["AsyncPostgresStore", "open_async_store"]

_T = TypeVar("_T")


class AsyncPostgresStore:
    """A checkpoint store in a PostgreSQL table, over a psycopg_pool
    ``AsyncConnectionPool``: an
    :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`, whose operations
    are coroutines in the asyncio store. The synchronous store is safe to share between
    threads; the asyncio store is not: it belongs to one event loop, the one its first
    operation runs on (its pool and lock live there). The layout, the statements and the
    durability of each write are described in ``docs/stores/postgres.md``.

    Args:
        conninfo_or_pool: A ``postgresql://`` URL or libpq key=value string (the store
            makes and owns a pool, closed by :meth:`aclose`), or a pool
            (``AsyncConnectionPool``) the caller owns (:meth:`aclose` leaves it open;
            borrowed connections are switched to autocommit while the store uses them).
        table: The table's name: lowercase letters, digits and underscores, at most 48
            characters, starting with a letter or underscore.
        schema: The schema holding the table (it must exist): the same rules, at most 63
            characters.
        connect_timeout: Seconds to wait for a connection, from the server or the pool.
        min_size, max_size: The owned pool's size.
        create_table: Create the table on first use if it is missing (needs CREATE on the
            schema). With False, a missing table is a PostgresConfigurationError.
        durable: Refuse a server with ``synchronous_commit`` or ``fsync`` off (the
            default). Pass False only for tests and throwaway data.
        synchronous_delivered: With False (the default), a ``compare_and_swap`` given
            ``durable=False`` (the host's delivered mark and an operator's pruning, the
            writes the table declares non-durable) commits asynchronously: the server
            acknowledges it before its WAL is flushed, and a crash soon after may lose it
            (leaving the record as it was before); every other write waits for the flush
            as the server's ``synchronous_commit`` says. With True, every write waits. It
            must be a bool (from :meth:`from_url` and :func:`open_url` too, as a keyword
            option: the URL's query is libpq's).
        prepare_threshold: psycopg's setting: after how many runs on one connection a
            statement is prepared there (5, psycopg's default; 0 prepares it on its first
            run). It is each connection's setting on the store's own pool; on a caller's
            pool an int leaves the pool's own connections' setting in force. None never
            prepares, on any pool: no statement the store sends is named, as a
            transaction-mode pooler without prepared statements needs. A keyword option
            of :meth:`from_url` and :func:`open_url` too.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a bad argument, before anything is sent.
    """

    def __init__(
        self,
        conninfo_or_pool: str | AsyncConnectionPool[Any],
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
        self._sql = Statements(
            check_name(schema, SCHEMA_NAME, "schema", 63),
            check_name(table, TABLE_NAME, "table", 48),
        )
        self._timeout = check_timeout(connect_timeout)
        min_size, max_size = check_sizes(min_size, max_size)
        self._create_table = bool(create_table)
        self._durable = bool(durable)
        self._relax = not check_flag(synchronous_delivered, "synchronous_delivered")
        threshold = check_prepare_threshold(prepare_threshold)
        self._threshold = threshold
        self._prepare: bool | None = None if threshold is not None else False
        """Passed as every statement's ``prepare``: None lets the connection's threshold
        decide; False (with ``prepare_threshold=None``) never prepares, on any pool."""
        self._ready = False
        self._closed = False
        self._order: list[str] = STATUSES  # the server's order, read at setup
        self._pool: AsyncConnectionPool[Any]
        if isinstance(conninfo_or_pool, AsyncConnectionPool):
            self._pool = conninfo_or_pool
            self._owns_pool = False
            pool_conninfo = conninfo_or_pool.conninfo
            self._target = Target.parse(pool_conninfo) if type(pool_conninfo) is str else None
            self._attempts = (conninfo_or_pool.max_size or 1) + 1
        else:
            self._target = Target.parse(conninfo_or_pool)
            self._owns_pool = True
            self._pool = AsyncConnectionPool(
                self._target.conninfo,
                kwargs=connect_kwargs(self._target, self._timeout, threshold),
                min_size=min_size,
                max_size=max_size,
                open=False,
                timeout=self._timeout,
                name=APPLICATION_NAME,
            )
            self._attempts = max_size + 1
        # Held while the table is set up and while the store is marked closed.
        if True:  # ASYNC
            self._setup_lock = asyncio.Lock()
        else:
            self._setup_lock = threading.Lock()

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self._sql.schema}.{self._sql.table})"

    def schema_sql(self) -> str:
        """The DDL that first use runs when the table is missing, for a DBA to run."""
        return self._sql.schema_sql()

    # --- connections ----------------------------------------------------------------------

    async def _connect_directly(self) -> psycopg.AsyncConnection[Any]:
        assert self._target is not None
        try:
            return await psycopg.AsyncConnection.connect(
                self._target.conninfo,
                **connect_kwargs(self._target, self._timeout, self._threshold),
            )
        except psycopg.Error as error:
            failure = connect_failure(error, self._target)
        raise failure  # outside the except: libpq's message is not kept as the context

    async def _diagnose(self, error: BaseException) -> PostgresStoreError:
        """Why no pooled connection came: try one direct connection for the reason."""
        if self._target is not None:
            try:
                connection = await self._connect_directly()
                await connection.close()
            except PostgresStoreError as reason:
                return reason
        return PostgresUnavailableError(
            f"no database connection within {self._timeout:g} s ({type(error).__name__}): "
            f"the pool is exhausted or the server is unreachable"
        )

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        """A live pooled connection; a PostgresStoreError (nothing was sent) if there is none."""
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
                raise closed_error()
            if problem is not None:
                raise await self._diagnose(problem)
            if alive(connection):
                return connection
            try:
                await connection.close()
            finally:
                await self._put_back(connection)
        raise PostgresUnavailableError("every pooled connection tried was dead; nothing was sent")

    async def _put_back(
        self, connection: psycopg.AsyncConnection[Any], borrowed_without_autocommit: bool = False
    ) -> None:
        """Return ``connection`` to the pool, switched back out of autocommit if it was
        borrowed without it and is idle. In the asyncio store a cancellation of the caller
        (a second one, while the first unwinds) does not stop the return."""
        if True:  # ASYNC
            await asyncio.shield(self._returned(connection, borrowed_without_autocommit))
        else:
            self._returned(connection, borrowed_without_autocommit)

    async def _returned(
        self, connection: psycopg.AsyncConnection[Any], borrowed_without_autocommit: bool
    ) -> None:
        try:
            if borrowed_without_autocommit and idle(connection):
                await connection.set_autocommit(False)
        finally:
            await self._pool.putconn(connection)

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        async with self._setup_lock:
            if self._closed:
                raise closed_error()
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
                    await self._put_back(connection, borrowed_without_autocommit)
            self._ready = True

    async def _set_up(self, connection: psycopg.AsyncConnection[Any]) -> None:
        setup = exchanges.setting_up(self._sql, durable=self._durable, create=self._create_table)
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
        except StopIteration as done:
            self._order = done.value
            return
        except psycopg.Error as error:
            failure = setup_failure(error, f"{self._sql.schema}.{self._sql.table}")
        raise failure  # outside the except: the server's error (its DETAIL may quote a
        # value) is not kept as the context

    # --- the operations ---------------------------------------------------------------------

    async def _run(self, exchange: Exchange[_T]) -> _T:
        """Drive an operation's exchange to its result."""
        try:
            request = next(exchange)
            while True:
                request = exchange.send(await self._send(request))
        except StopIteration as done:
            return cast(_T, done.value)

    async def _send(self, request: Statement | Ready) -> Answer:
        if isinstance(request, Ready):
            await self._ensure_ready()
            return self._order
        return await self._execute(request)

    async def _execute(self, statement: Statement) -> tuple[int, list[Any]]:
        """Send one statement on one pooled connection: one round trip. Return the row
        count of a write, or the rows of a read."""
        if self._closed:
            raise closed_error()
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
            failure = operation_failure(error, statement.operation, write=statement.write)
        finally:
            await self._put_back(connection, borrowed_without_autocommit)
        raise failure  # outside the except: the server's error is not kept as the context

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if no row is there (one INSERT ... ON CONFLICT
        DO NOTHING); return whether it inserted.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a bad key or a record not at revision 1.
            PostgresOutcomeUnknownError: the INSERT was sent and its outcome is unknown.
            PostgresStoreError: any other: it failed and was not applied.
        """
        return await self._run(exchanges.creating(self._sql, key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
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
        return await self._run(exchanges.getting(self._sql, key))

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Replace the row under ``key`` with ``record`` if its revision is still
        ``expected_revision`` (one UPDATE ... WHERE key AND revision); return whether it
        did. A swap given ``durable=False`` commits asynchronously unless the store was
        made with ``synchronous_delivered=True``.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a bad key, or a record whose revision is
                not ``expected_revision + 1``.
            PostgresOutcomeUnknownError: the UPDATE was sent and its outcome is unknown:
                read back.
            PostgresStoreError: any other: it failed and was not applied.
        """
        relax = self._relax and not durable
        swap = exchanges.swapping(self._sql, key, expected_revision, record, relax=relax)
        return await self._run(swap)

    async def clock_us(self) -> int:
        """The server's time now (``statement_timestamp()``), in microseconds since the
        epoch: the clock of every write's ``updated_us``. One SELECT."""
        return await self._run(exchanges.clocking(self._sql))

    async def written_us(self, key: str) -> int | None:
        """When the server last wrote the row under ``key`` (its ``updated_us``), or None
        when no row is there. One SELECT."""
        return await self._run(exchanges.written(self._sql, key))

    async def list_records(self, listing: Listing) -> list[RecordSummary | BrokenRecord]:
        """The records ``listing`` selects (see
        :meth:`~tool_execution_checkpoint.stores.OperableCheckpointStore.list_records`;
        its time bound on the server's clock, as :meth:`clock_us`), in key order (code
        points). Filters on the ``status`` and ``updated_us`` columns.

        Raises:
            CheckpointError: INVALID_ARGUMENT for a ``listing`` that is not a
                :class:`~tool_execution_checkpoint.stores.Listing`.
            PostgresStoreError: the read failed.

        A stored record that is not valid is listed as a
        :class:`~tool_execution_checkpoint.stores.BrokenRecord` where its status and
        updated_us columns place it; a row whose status column is no status is listed by
        its record's own status instead (a BrokenRecord in every listing when
        that record is not valid either). Neither stops nor hides anything. One round
        trip per page (another only when a page of rows the listing skips filled it).
        """
        return await self._run(exchanges.listing(self._sql, listing))

    async def aclose(self) -> None:
        """Close the pool if the store made it; later operations raise PostgresNotAppliedError.
        A setup under way finishes first."""
        async with self._setup_lock:
            self._closed = True
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def open_async_store(url: str) -> AsyncPostgresStore:
    """``AsyncPostgresStore.from_url(url)``: a factory by module path (``module:callable``)
    for tools that build a store in another process."""
    return AsyncPostgresStore.from_url(url)
