"""ThreadedStore: the asyncio face of a synchronous store, on a worker thread of its own.

:class:`~.sqlite.AsyncSQLiteStore` and :class:`~.memory.AsyncMemoryStore` are this bridge
over :class:`~.sqlite.SQLiteStore` and :class:`~.memory.MemoryStore`: a store whose
driver only blocks gets its async face here, not from a second copy of its code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, ClassVar, Generic, ParamSpec, Self, TypeVar

from ..records import Checkpoint
from .core import BrokenRecord, ClosableStore, Listing, RecordSummary

__all__ = ["ThreadedStore"]

StoreT = TypeVar("StoreT", bound=ClosableStore)
_P = ParamSpec("_P")
_T = TypeVar("_T")


class ThreadedStore(Generic[StoreT]):
    """An :class:`~tool_execution_checkpoint.stores.AsyncCheckpointStore` with
    ``clock_us``, ``written_us`` and ``list_records``, over the synchronous store
    :attr:`store`: each method awaits the store's method of the same name, with the same
    arguments, answers and errors.

    Every operation runs on the bridge's own worker thread, one at a time in the order
    they were called, so the event loop never waits on the store's locks or I/O.

    :meth:`aclose` closes the store on that thread after the operations called before
    it; cancelling it does not stop the close, and a second call waits for the same
    close. An operation called after :meth:`aclose` runs after the close, off the event
    loop's thread (on the worker, or once it is gone on the loop's default executor),
    and answers or raises as the closed store does: a closed
    :class:`~.sqlite.SQLiteStore` raises its closed error without I/O, a closed
    :class:`~.memory.MemoryStore` still answers.

    Cancelling a task that awaits an operation does not stop an operation that started:
    it runs to the end on the worker thread (one still waiting for the thread may run or
    not), and the cancelled caller does not learn its outcome. Treat a cancelled write as
    an unknown outcome: read the record back.
    """

    thread_name_prefix: ClassVar[str] = "tec-store"
    """The name of the worker thread (with a number after it)."""

    store: StoreT
    """The synchronous store the worker thread calls."""

    def __init__(self, store: StoreT) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=self.thread_name_prefix
        )
        self._closing: concurrent.futures.Future[None] | None = None

    @classmethod
    def _wrapping(cls, store: StoreT) -> Self:
        """A bridge of this class over ``store``, made without the class's constructor
        (for a subclass's other openers)."""
        bridge = cls.__new__(cls)
        ThreadedStore.__init__(bridge, store)
        return bridge

    @classmethod
    async def _opened_on_a_thread(cls, opener: Callable[[], StoreT]) -> Self:
        """A bridge over the store ``opener`` opens on a thread, so the event loop does
        not wait for it."""
        return cls._wrapping(await asyncio.to_thread(opener))

    async def _run(self, method: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        call = functools.partial(method, *args, **kwargs)
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, call)
        except RuntimeError:  # the close is done and the worker gone: the store is closed
            future = loop.run_in_executor(None, call)
        return await future

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`CheckpointStore.create_if_absent`."""
        return await self._run(self.store.create_if_absent, key, record)

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`CheckpointStore.get`."""
        return await self._run(self.store.get, key)

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """See :meth:`CheckpointStore.compare_and_swap`."""
        swap = self.store.compare_and_swap
        return await self._run(swap, key, expected_revision, record, durable=durable)

    async def clock_us(self) -> int:
        """See :meth:`OperableCheckpointStore.clock_us`."""
        return await self._run(self.store.clock_us)

    async def written_us(self, key: str) -> int | None:
        """See :meth:`OperableCheckpointStore.written_us`."""
        return await self._run(self.store.written_us, key)

    async def list_records(self, listing: Listing) -> Sequence[RecordSummary | BrokenRecord]:
        """See :meth:`OperableCheckpointStore.list_records`."""
        return await self._run(self.store.list_records, listing)

    async def aclose(self) -> None:
        """Close the store on the worker thread after the operations called before.
        Idempotent; cancelling the caller does not stop the close."""
        if self._closing is None:
            self._closing = self._executor.submit(self.store.close)
            # Run by the worker as the close ends: an operation queued before this runs
            # there too, one called after it goes to the default executor.
            self._closing.add_done_callback(lambda _: self._executor.shutdown(wait=False))
        await asyncio.shield(asyncio.wrap_future(self._closing))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"
