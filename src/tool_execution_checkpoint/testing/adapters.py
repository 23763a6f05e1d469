"""Run an asyncio store where the harness needs a synchronous one."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from ..records import Checkpoint
from ..stores.core import (
    AsyncCheckpointStore,
    BrokenRecord,
    CheckpointStore,
    Listing,
    RecordSummary,
)

__all__ = ["SyncStoreAdapter", "as_sync_store"]

_T = TypeVar("_T")


class SyncStoreAdapter:
    """A :class:`CheckpointStore` over an :class:`AsyncCheckpointStore`.

    The async store lives on an event loop of its own, in a daemon thread; every call is
    sent there and waited for, so the adapter is safe to call from many threads at once.
    ``close()`` closes the async store (if it has ``close`` or ``aclose``) and the loop.
    """

    def __init__(self, store: AsyncCheckpointStore | Awaitable[AsyncCheckpointStore]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        if inspect.isawaitable(store):
            store = self.run(_awaited(store))
        self.inner: AsyncCheckpointStore = store

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coroutine`` on the adapter's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`CheckpointStore.create_if_absent`."""
        return self.run(self.inner.create_if_absent(key, record))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`CheckpointStore.get`."""
        return self.run(self.inner.get(key))

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """See :meth:`CheckpointStore.compare_and_swap`."""
        swap = self.inner.compare_and_swap(key, expected_revision, record, durable=durable)
        return self.run(swap)

    def _operation(self, name: str) -> Any:
        """The async store's ``name`` (an operator's operation it must offer too)."""
        operation = getattr(self.inner, name, None)
        if operation is None:
            raise TypeError(f"the async store has no {name}")
        return operation

    def clock_us(self) -> int:
        """See :meth:`OperableCheckpointStore.clock_us`."""
        now: int = self.run(self._operation("clock_us")())
        return now

    def written_us(self, key: str) -> int | None:
        """See :meth:`OperableCheckpointStore.written_us`."""
        written: int | None = self.run(self._operation("written_us")(key))
        return written

    def list_records(self, listing: Listing) -> Sequence[RecordSummary | BrokenRecord]:
        """See :meth:`OperableCheckpointStore.list_records` (the async store must offer
        ``list_records`` too)."""
        found: Sequence[RecordSummary | BrokenRecord] = self.run(
            self._operation("list_records")(listing)
        )
        return found

    def close(self) -> None:
        """Close the async store, then stop the loop. Closing twice does nothing."""
        if self._loop.is_closed():
            return
        for name in ("aclose", "close"):
            method = getattr(self.inner, name, None)
            if callable(method):
                outcome = method()
                if inspect.isawaitable(outcome):
                    self.run(_awaited(outcome))
                break
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


def as_sync_store(store: object) -> CheckpointStore:
    """Return ``store`` if it is synchronous, else a :class:`SyncStoreAdapter` over it.

    ``store`` may also be an awaitable that yields an async store (an async factory's
    coroutine)."""
    if inspect.isawaitable(store):
        return SyncStoreAdapter(store)
    if isinstance(store, AsyncCheckpointStore) and inspect.iscoroutinefunction(store.get):
        return SyncStoreAdapter(store)
    if not isinstance(store, CheckpointStore):
        raise TypeError("make_store() must return a CheckpointStore or AsyncCheckpointStore")
    return store
