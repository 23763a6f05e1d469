"""MemoryStore: a thread-safe in-process store, the model every other store is held to;
AsyncMemoryStore: its asyncio face.

It keeps each record as the JSON text it would persist, so a caller can never share or
mutate a stored record, and ``get`` returns what a real store's read would: a fresh
mapping parsed from that text. One lock makes every operation atomic under real threads.
It is not durable: use it for tests, examples and as the harness's model. Its clock is
the host's: a record was written at its ``updatedAt`` (see
:class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Self

from ..errors import CheckpointError, ErrorCode
from ..records import Checkpoint
from . import core
from .core import BrokenRecord, Listing, RecordSummary
from .threaded import ThreadedStore

__all__ = ["AsyncMemoryStore", "MemoryStore", "open_url"]


class MemoryStore:
    """A :class:`~tool_execution_checkpoint.stores.CheckpointStore` in a dict, under a lock.

    ``clock`` is what :meth:`clock_us` answers: microseconds since the epoch, the host's
    clock by default (a test may pass a fixed time)."""

    def __init__(self, *, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or _host_clock
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._revisions: dict[str, int] = {}

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted."""
        text = core.encode_create(key, record).text
        with self._lock:
            if key in self._texts:
                return False
            self._texts[key] = text
            self._revisions[key] = record.revision
            return True

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return the record stored under ``key``, a fresh
        :class:`~tool_execution_checkpoint.stores.StoredRecord`, or None.

        Raises CheckpointError INVALID_CHECKPOINT when the text kept is not a valid
        record (only a test that writes ``_texts`` itself can make one): see
        :func:`~tool_execution_checkpoint.stores.decode_stored`."""
        core.check_key(key)
        with self._lock:
            text = self._texts.get(key)
        return None if text is None else core.decode_stored(text)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Replace the record under ``key`` with ``record`` if its revision is still
        ``expected_revision``; return whether it did. ``durable`` is accepted and ignored:
        nothing here is flushed anywhere."""
        del durable
        text = core.encode_swap(key, expected_revision, record).text
        with self._lock:
            if self._revisions.get(key) != expected_revision:
                return False
            self._texts[key] = text
            self._revisions[key] = record.revision
            return True

    def clock_us(self) -> int:
        """The time now on the store's clock (the host's, unless ``clock`` was given)."""
        return self._clock()

    def written_us(self, key: str) -> int | None:
        """The ``updatedAt`` of the record under ``key`` in microseconds; None when
        nothing is stored there or the text kept is not a valid record."""
        core.check_key(key)
        with self._lock:
            text = self._texts.get(key)
        line = None if text is None else core.listing_line(key, text)
        return line.written_us if isinstance(line, RecordSummary) else None

    def list_records(self, listing: Listing) -> list[RecordSummary | BrokenRecord]:
        """See :meth:`OperableCheckpointStore.list_records`. The store has no index apart
        from the records, so a text that is not a valid record is a
        :class:`~tool_execution_checkpoint.stores.BrokenRecord` in every listing."""
        listing = core.check_listing(listing)
        with self._lock:
            texts = sorted(self._texts.items())
        found: list[RecordSummary | BrokenRecord] = []
        for key, text in texts:
            if listing.after_key is not None and key <= listing.after_key:
                continue
            line = core.listing_line(key, text)
            if listing.admits(line):
                found.append(line)
                if len(found) == listing.limit:
                    break
        return found

    def close(self) -> None:
        """Nothing to release (the records stay readable): here so that a store opened
        by URL closes like every other."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def keys(self) -> Iterator[str]:
        """The keys stored now, in insertion order (a snapshot)."""
        with self._lock:
            return iter(list(self._texts))

    def __len__(self) -> int:
        with self._lock:
            return len(self._texts)


class AsyncMemoryStore(ThreadedStore[MemoryStore]):
    """The asyncio face of a new :class:`MemoryStore` (its :attr:`store`, made with
    ``clock``): an :class:`~tool_execution_checkpoint.stores.AsyncCheckpointStore` with
    ``clock_us``, ``written_us`` and ``list_records``, whose every operation runs on the
    store's own worker thread, one at a time (see
    :class:`~tool_execution_checkpoint.stores.threaded.ThreadedStore`). After
    :meth:`aclose` the records stay readable, as a closed MemoryStore's do."""

    thread_name_prefix = "tec-memory"

    def __init__(self, *, clock: Callable[[], int] | None = None) -> None:
        super().__init__(MemoryStore(clock=clock))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _host_clock() -> int:
    return time.time_ns() // 1_000


def open_url(url: str) -> MemoryStore:
    """The opener of ``memory:`` URLs for :func:`~tool_execution_checkpoint.open_store`:
    a new, empty store for ``memory:`` (or ``memory://``), with nothing after it.

    Raises:
        CheckpointError: INVALID_ARGUMENT for anything else (the URL is not shown).
    """
    if type(url) is not str or url.lower() not in ("memory:", "memory://"):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "a memory URL is memory: with nothing after it (each one opens a new, empty store)",
            field="url",
        )
    return MemoryStore()
