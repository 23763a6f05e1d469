"""AsyncSQLiteStore: SQLiteStore's asyncio face, through the one thread bridge."""

from __future__ import annotations

import functools
import os
from typing import Self

from ..threaded import ThreadedStore
from .store import SQLiteStore

__all__ = ["AsyncSQLiteStore"]


class AsyncSQLiteStore(ThreadedStore[SQLiteStore]):
    """The asyncio twin of :class:`SQLiteStore` (an
    :class:`~tool_execution_checkpoint.stores.AsyncCheckpointStore` with
    ``list_records``), with the same arguments, contract and errors.

    Every operation runs on the store's own worker thread, one at a time, so the event
    loop never waits on SQLite's locks or fsyncs; no dependency beyond the standard
    library. The constructor opens the file on the calling thread (it may wait up to
    ``busy_timeout``); ``await AsyncSQLiteStore.open(path)`` opens it on a thread instead.
    After :meth:`aclose`, operations raise :class:`SQLiteNotAppliedError`, as the closed
    :class:`SQLiteStore` does.

    Cancelling a task that awaits a write does not stop a write that started: it runs to
    the end on the worker thread (one still waiting for the thread may run or not), and
    the cancelled caller does not learn its outcome. Treat it as an unknown outcome: read
    the record back.
    """

    thread_name_prefix = "tec-sqlite"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        super().__init__(SQLiteStore(path, busy_timeout=busy_timeout))

    @classmethod
    async def open(cls, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> Self:
        """Open the store on a thread, so the event loop does not wait for the file."""
        opener = functools.partial(SQLiteStore, path, busy_timeout=busy_timeout)
        return await cls._opened_on_a_thread(opener)

    @classmethod
    def from_url(cls, url: str, *, busy_timeout: float | None = None, create: bool = True) -> Self:
        """See :meth:`SQLiteStore.from_url`."""
        return cls._wrapping(SQLiteStore.from_url(url, busy_timeout=busy_timeout, create=create))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.store.path)!r})"
