"""MemoryStore and AsyncMemoryStore pass the whole conformance suite: plain checks,
harness, threads, and the garbage checks (a test writes its text table directly); and
the async store's own surface, the thread bridge it is built on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tool_execution_checkpoint import (
    AsyncCheckpointStore,
    Binding,
    Checkpoint,
    Listing,
    Status,
    checkpoint_key,
    create_checkpoint,
)
from tool_execution_checkpoint.stores import OperableCheckpointStore
from tool_execution_checkpoint.stores.memory import AsyncMemoryStore, MemoryStore
from tool_execution_checkpoint.stores.threaded import ThreadedStore
from tool_execution_checkpoint.testing import OperableStoreConformance, active_profile

NOW = "2026-01-01T00:00:00Z"
BINDING = Binding("ns", "call-1", "tool", "1", "sha256:0")
KEY = checkpoint_key(BINDING)


class TestMemoryStore(OperableStoreConformance):
    store_clock = False

    def make_store(self) -> MemoryStore:
        return MemoryStore()

    def write_raw(self, store: MemoryStore, key: str, raw: bytes) -> None:
        """The store keeps text: bytes that are not UTF-8 become lone surrogates."""
        store._texts[key] = raw.decode("utf-8", "surrogateescape")
        store._revisions[key] = 1


class TestAsyncMemoryStore(OperableStoreConformance):
    """The async store through the suite's adapter; a quarter of the profile's examples,
    since it runs the same MemoryStore underneath."""

    store_clock = False

    harness_examples = active_profile().max_examples // 4

    @pytest.fixture(autouse=True)
    def _closing(self) -> Iterator[None]:
        self.opened: list[AsyncMemoryStore] = []
        yield
        for store in self.opened:
            asyncio.run(store.aclose())

    def make_store(self) -> AsyncMemoryStore:
        store = AsyncMemoryStore()
        self.opened.append(store)
        return store

    def write_raw(self, store: AsyncMemoryStore, key: str, raw: bytes) -> None:
        """As the sync suite's hook, in the memory store this one runs."""
        TestMemoryStore.write_raw(self, store.store, key, raw)  # type: ignore[arg-type]


def test_the_async_store_satisfies_the_protocol_and_wraps_a_memory_store() -> None:
    store = AsyncMemoryStore(clock=lambda: 42)
    assert isinstance(store, AsyncCheckpointStore)
    assert isinstance(store.store, MemoryStore)
    assert isinstance(store.store, OperableCheckpointStore)
    assert asyncio.run(store.clock_us()) == 42
    assert repr(store) == "AsyncMemoryStore()"
    asyncio.run(store.aclose())


def test_the_async_store_runs_each_operation_on_its_own_worker_thread() -> None:
    threads: list[str] = []

    def clock() -> int:
        threads.append(threading.current_thread().name)
        return 1

    async def scenario() -> None:
        async with AsyncMemoryStore(clock=clock) as store:
            await asyncio.gather(*(store.clock_us() for _ in range(5)))

    asyncio.run(scenario())
    assert len(threads) == 5
    assert len(set(threads)) == 1
    assert threads[0].startswith("tec-memory")
    assert threads[0] != threading.current_thread().name


def test_a_closed_async_store_answers_as_a_closed_memory_store_does() -> None:
    """After aclose the worker thread is gone and the store is closed; a closed
    MemoryStore keeps its records readable, and so does its async face."""
    created = create_checkpoint(BINDING, created_at=NOW)

    async def scenario() -> None:
        async with AsyncMemoryStore(clock=lambda: 7) as store:
            assert await store.create_if_absent(KEY, created) is True
        assert store._executor._shutdown
        assert await store.get(KEY) == created.to_dict()
        assert await store.written_us(KEY) == store.store.written_us(KEY)
        [summary] = await store.list_records(Listing([Status.READY]))
        assert summary.key == KEY
        assert await store.clock_us() == 7
        await store.aclose()  # idempotent

    asyncio.run(scenario())


class HeldMemoryStore(MemoryStore):
    """A MemoryStore whose writes start, then wait for ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.started.set()
        assert self.release.wait(10)
        return super().create_if_absent(key, record)


def test_a_cancelled_write_that_started_runs_to_the_end() -> None:
    """Cancelling the awaiting task does not stop a write already on the worker thread:
    the caller does not learn its outcome, and the record is there to read back."""

    async def scenario() -> None:
        held = HeldMemoryStore()
        async with ThreadedStore(held) as store:
            write = asyncio.ensure_future(
                store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=NOW))
            )
            assert await asyncio.to_thread(held.started.wait, 10)
            write.cancel()
            with pytest.raises(asyncio.CancelledError):
                await write
            held.release.set()
            assert await store.get(KEY) == create_checkpoint(BINDING, created_at=NOW).to_dict()

    asyncio.run(scenario())


class LoggingMemoryStore(MemoryStore):
    """A MemoryStore that logs each read and its close with the thread that ran it and
    whether the store was closed then; a read of ``"slow"`` starts, then waits for
    ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, bool]] = []
        self.closed = False
        self.started = threading.Event()
        self.release = threading.Event()

    def get(self, key: str) -> dict[str, object] | None:
        self.log.append((key, threading.current_thread().name, self.closed))
        if key == "slow":
            self.started.set()
            assert self.release.wait(10)
        return None

    def close(self) -> None:
        self.log.append(("close", threading.current_thread().name, self.closed))
        self.closed = True

    async def busy_bridge(self) -> tuple[ThreadedStore[LoggingMemoryStore], asyncio.Future[Any]]:
        """A bridge over this store, and its slow read, started on the worker."""
        store = ThreadedStore(self)
        slow = asyncio.ensure_future(store.get("slow"))
        assert await asyncio.to_thread(self.started.wait, 10)
        return store, slow

    def run_off(self, thread: str) -> list[str]:
        """What ran, in order, after checking that none of it ran on ``thread``."""
        assert all(ran_on != thread for _, ran_on, _ in self.log)
        return [entry[0] for entry in self.log]


def test_a_cancelled_close_still_closes_the_store_and_nothing_runs_on_the_loop() -> None:
    """aclose cancelled while an earlier operation runs: the close still happens on the
    worker, a second aclose waits for that same close, and a later operation meets the
    closed store off the event loop's thread."""
    inner = LoggingMemoryStore()

    async def scenario() -> None:
        store, slow = await inner.busy_bridge()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.aclose(), 0.05)
        inner.release.set()
        await store.aclose()
        assert inner.closed
        assert await slow is None
        assert await store.get("after") is None

    asyncio.run(scenario())
    assert inner.run_off(threading.current_thread().name) == ["slow", "close", "after"]
    assert inner.log[-1][2] is True


def test_an_operation_called_while_the_close_waits_queues_behind_it() -> None:
    """An operation called after aclose started, while an earlier one runs, runs after
    the close on the worker thread and meets the closed store."""
    inner = LoggingMemoryStore()

    async def scenario() -> None:
        store, slow = await inner.busy_bridge()
        closing = asyncio.ensure_future(store.aclose())
        await asyncio.sleep(0)
        during = asyncio.ensure_future(store.get("during"))
        await asyncio.sleep(0.05)
        inner.release.set()
        await asyncio.gather(slow, closing, during)

    asyncio.run(scenario())
    assert inner.run_off(threading.current_thread().name) == ["slow", "close", "during"]
    assert inner.log[-1] == ("during", inner.log[1][1], True)
