"""PostgresStore and AsyncPostgresStore: checkpoint stores in a PostgreSQL table.

Install with the ``postgres`` extra (psycopg 3 and psycopg_pool)::

    pip install 'tool-execution-checkpoint[postgres]'

One row per key in a table (``public.tec_checkpoint`` by default) holding the record's
exact JSON text; the store's clock is the server's (``statement_timestamp()``). The
contract (see :mod:`tool_execution_checkpoint.stores`): ``create_if_absent`` is one
``INSERT ... ON CONFLICT DO NOTHING`` and ``compare_and_swap`` one ``UPDATE ... WHERE key
AND revision``, each one round trip in autocommit. A reported success is committed; a
write that fails after it was sent raises :class:`PostgresOutcomeUnknownError` (read the
record back: it is the old record or exactly the one written), any other failure another
:class:`PostgresStoreError`: not applied. Bad arguments raise
:class:`~tool_execution_checkpoint.errors.CheckpointError` before any SQL is sent. The
layout, the statements, durability and the design are in ``docs/stores/postgres.md``.

The modules: :mod:`.sql` (names, options, statements), :mod:`.connections`, :mod:`.errors`,
:mod:`.exchanges` (each operation sans I/O), :mod:`.store_async` (the written asyncio
store) and :mod:`.store` (the sync store, generated from it).
"""

from __future__ import annotations

from typing import Any

from .errors import (
    PostgresConfigurationError,
    PostgresNotAppliedError,
    PostgresOutcomeUnknownError,
    PostgresStoreError,
    PostgresUnavailableError,
)
from .sql import LAYOUT, LAYOUT_MARKER
from .store import PostgresStore, open_store
from .store_async import AsyncPostgresStore, open_async_store

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


def open_url(url: str, *, create: bool = True, **options: Any) -> PostgresStore:
    """The opener of ``postgresql://`` and ``postgres://`` URLs for
    :func:`tool_execution_checkpoint.open_store`: :meth:`PostgresStore.from_url`, with
    the same URLs, errors and options (``create``, and the constructor's ``schema``,
    ``table``, ``connect_timeout``, ``min_size``, ``max_size``, ``create_table``,
    ``durable``, ``synchronous_delivered``, ``prepare_threshold``). Nothing is sent
    before the first operation."""
    return PostgresStore.from_url(url, create=create, **options)
