"""A cancellation that lands on the store, not on the tool: once the tool has run, the
result's write (its read-backs and resends within the write budget) or the uncertain mark
finishes before the cancellation propagates; a claim that landed before the tool ran is
read back and released. Also the async driver's own rules for the parts a host hands it:
a sync store runs on a thread bridge, and an awaitable a sync ``deliver`` returns is a
send of unknown outcome unless it is a coroutine that never started."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio
import pytest

from test_store import AsyncMemoryStore
from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    Status,
    StoreError,
    checkpoint_key,
)
from tool_execution_checkpoint.runner import (
    CallPolicy,
    DeliveryNotSent,
    RunStatus,
    ToolDidNotRun,
    run_once,
    run_once_async,
)
from tool_execution_checkpoint.stores.threaded import ThreadedStore

BINDING = Binding("cancel", "call-SECRET-4", "charge_card", "1", "sha256:00")
KEY = checkpoint_key(BINDING)
RESULT = {"receipt": "rcpt-SECRET-77"}
LOGGER = "tool_execution_checkpoint"


class Tool:
    """A tool whose runs are counted."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> Any:
        self.runs += 1
        return dict(RESULT)


class SlowSwaps(AsyncMemoryStore):
    """An asyncio store over a MemoryStore whose swaps to ``status`` wait ``seconds``
    before they apply (a cancellation in the wait stops them, as a server-side cancel
    would); every other operation suspends once."""

    def __init__(self, status: Status, seconds: float) -> None:
        super().__init__()
        self.status, self.seconds = status, seconds

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        await asyncio.sleep(self.seconds if record.status is self.status else 0)
        return self.inner.compare_and_swap(key, expected_revision, record, durable=durable)


class SlowCreate(MemoryStore):
    """A store whose first create applies, then takes ``seconds`` to answer."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds, self.creates = seconds, 0

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        created = super().create_if_absent(key, record)
        self.creates += 1
        if self.creates == 1:
            time.sleep(self.seconds)
        return created


class Interrupted(MemoryStore):
    """A store whose first write of a record in ``status`` is interrupted by Ctrl-C:
    before it applies, or after (the reply lost)."""

    def __init__(self, status: Status, *, applied: bool) -> None:
        super().__init__()
        self.status, self.applied, self.interrupted = status, applied, False

    def _interrupt(self, record: Checkpoint, write: Callable[[], bool]) -> bool:
        if record.status is not self.status or self.interrupted:
            return write()
        self.interrupted = True
        if self.applied:
            write()
        raise KeyboardInterrupt

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        write = functools.partial(MemoryStore.create_if_absent, self, key, record)
        return self._interrupt(record, write)

    def compare_and_swap(
        self, key: str, revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        write = functools.partial(
            MemoryStore.compare_and_swap, self, key, revision, record, durable=durable
        )
        return self._interrupt(record, write)


def _status(store: Any) -> str:
    memory = store.inner if isinstance(store, SlowSwaps) else store
    return str((memory.get(KEY) or {})["status"])


def _timed_out(call: Coroutine[Any, Any, Any], seconds: float) -> None:
    """Run ``call`` under ``asyncio.timeout(seconds)``, which must fire."""

    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(seconds):
                await call

    asyncio.run(scenario())


def _moved_on(call: Coroutine[Any, Any, Any], seconds: float) -> None:
    """Run ``call`` under ``anyio.move_on_after(seconds)``, which must fire."""

    async def scenario() -> None:
        with anyio.move_on_after(seconds) as scope:
            await call
        assert scope.cancelled_caught

    asyncio.run(scenario())


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# --- H2: a cancellation on the result's write ---------------------------------------------


def test_a_timeout_on_the_result_write_still_stores_the_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, tool, sent = SlowSwaps(Status.DELIVERING, 0.2), Tool(), list[Any]()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        _timed_out(run_once_async(store, BINDING, tool, sent.append), 0.1)
    assert _errors(caplog) == []
    assert sent == []  # nothing is sent after the cancellation
    assert _status(store) == Status.COMPLETED.value  # stored, its delivery released
    later = asyncio.run(run_once_async(store, BINDING, tool, sent.append))
    assert (later.status, later.ran_tool) == (RunStatus.DELIVERED_STORED_RESULT, False)
    assert sent == [RESULT]
    assert tool.runs == 1


def test_anyio_cancelling_every_await_still_marks_a_cancelled_tool_uncertain() -> None:
    store = AsyncMemoryStore()  # each operation suspends once: each is cancelled again

    async def slow() -> dict[str, str]:
        await asyncio.sleep(60)
        return {"never": "stored"}

    _moved_on(run_once_async(store, BINDING, slow, lambda _: None), 0.05)
    stored = Checkpoint.from_dict(store.inner.get(KEY) or {})
    assert stored.status is Status.UNCERTAIN
    assert stored.execution is not None
    assert stored.execution.uncertain is not None
    assert stored.execution.uncertain.reason == "cancelled"


def test_anyio_cancelling_the_result_write_still_stores_the_result() -> None:
    store, tool = SlowSwaps(Status.DELIVERING, 0.2), Tool()
    _moved_on(run_once_async(store, BINDING, tool, lambda _: None), 0.1)
    assert _status(store) == Status.COMPLETED.value
    assert tool.runs == 1


class GoneAtTheResult(SlowSwaps):
    """An asyncio store that goes away for good at the result's write: that swap waits
    ``seconds``, then it and every later operation fail."""

    gone = False

    async def get(self, key: str) -> Mapping[str, Any] | None:
        if self.gone:
            raise StoreError("injected: the server is gone")
        return await super().get(key)

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        if record.status is self.status or self.gone:
            self.gone = True
            await asyncio.sleep(self.seconds)
            raise StoreError("injected: the server is gone")
        return await super().compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_cancelled_result_write_is_resent_within_the_budget_then_propagates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, tool = GoneAtTheResult(Status.DELIVERING, 0.2), Tool()
    call = run_once_async(store, BINDING, tool, lambda _: None, write_budget=0.5)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        started = time.monotonic()
        _timed_out(call, 0.1)
        ended = time.monotonic()
    assert 0.5 <= ended - started < 2.0  # read back and resent until the budget was spent
    assert _errors(caplog) == [f"the tool ran but its result could not be stored: key={KEY}"]
    assert _status(store) == Status.EXECUTING.value
    assert tool.runs == 1


@pytest.mark.parametrize("applied", [False, True], ids=["before", "after"])
def test_ctrl_c_on_the_result_write_still_stores_the_result(applied: bool) -> None:
    store, tool, sent = Interrupted(Status.DELIVERING, applied=applied), Tool(), list[Any]()
    with pytest.raises(KeyboardInterrupt):
        run_once(store, BINDING, tool, sent.append)
    assert _status(store) == Status.COMPLETED.value
    later = run_once(store, BINDING, tool, sent.append)
    assert (later.status, later.ran_tool) == (RunStatus.DELIVERED_STORED_RESULT, False)
    assert (sent, tool.runs) == ([RESULT], 1)


# --- H2: a cancellation on the claim, before the tool ran ---------------------------------


def test_a_timeout_on_a_claim_that_landed_releases_it(caplog: pytest.LogCaptureFixture) -> None:
    store, tool, sent = SlowCreate(0.3), Tool(), list[Any]()
    bridge = ThreadedStore(store)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        _timed_out(run_once_async(bridge, BINDING, tool, sent.append), 0.1)
    assert tool.runs == 0
    assert _errors(caplog) == []
    assert _status(store) == Status.RELEASED.value
    later = asyncio.run(run_once_async(bridge, BINDING, tool, sent.append, wait_seconds=1))
    assert (later.status, later.ran_tool) == (RunStatus.EXECUTED_AND_DELIVERED, True)
    assert (sent, tool.runs) == ([RESULT], 1)


class Declared(Exception):
    """The host's own not-run exception."""


def test_a_claim_that_landed_is_released_whatever_not_run_declares(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ToolDidNotRun always releases: a host's own ``not_run`` list that leaves it out
    does not leave a claim for a tool that never ran."""
    store, tool = SlowCreate(0.3), Tool()
    call = run_once_async(ThreadedStore(store), BINDING, tool, lambda _: None, not_run=(Declared,))
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        _timed_out(call, 0.1)
    assert tool.runs == 0
    assert _errors(caplog) == []
    assert _status(store) == Status.RELEASED.value


def test_a_tool_raising_tool_did_not_run_is_released_whatever_not_run_declares() -> None:
    store = MemoryStore()

    def tool() -> object:
        raise ToolDidNotRun

    with pytest.raises(ToolDidNotRun):
        run_once(store, BINDING, tool, lambda _: None, not_run=(Declared,))
    assert _status(store) == Status.RELEASED.value
    assert CallPolicy(not_run=(Declared,)).stopped_before_effect == (ToolDidNotRun, Declared)
    assert CallPolicy().stopped_before_effect == (ToolDidNotRun,)


def test_a_delivery_claim_held_at_a_cancellation_is_released_whatever_not_sent_declares(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """DeliveryNotSent always releases: a host's own ``not_sent`` list that leaves it out
    does not leave a delivery claim for a payload never sent."""
    store, tool, sent = SlowSwaps(Status.DELIVERING, 0.2), Tool(), list[Any]()
    call = run_once_async(store, BINDING, tool, sent.append, not_sent=(Declared,))
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        _timed_out(call, 0.1)
    assert _errors(caplog) == []
    assert sent == []
    assert _status(store) == Status.COMPLETED.value  # stored, its delivery released


def test_a_send_raising_delivery_not_sent_is_released_whatever_not_sent_declares() -> None:
    store = MemoryStore()

    def deliver(payload: object) -> None:
        del payload
        raise DeliveryNotSent

    outcome = run_once(store, BINDING, Tool(), deliver, not_sent=(Declared,))
    assert outcome.status is RunStatus.DELIVERY_FAILED
    assert _status(store) == Status.COMPLETED.value
    assert CallPolicy(not_sent=(Declared,)).known_not_sent == (DeliveryNotSent, Declared)
    assert CallPolicy().known_not_sent == CallPolicy().not_sent


@pytest.mark.parametrize("applied", [False, True], ids=["before", "after"])
def test_ctrl_c_on_the_create_claim_leaves_nothing_claimed(applied: bool) -> None:
    store, tool, sent = Interrupted(Status.EXECUTING, applied=applied), Tool(), list[Any]()
    with pytest.raises(KeyboardInterrupt):
        run_once(store, BINDING, tool, sent.append)
    assert tool.runs == 0
    expected = Status.RELEASED.value if applied else None  # released, or never created
    assert (store.get(KEY) or {}).get("status") == expected
    later = run_once(store, BINDING, tool, sent.append)
    assert (later.status, later.ran_tool) == (RunStatus.EXECUTED_AND_DELIVERED, True)
    assert (sent, tool.runs) == ([RESULT], 1)


class Once:
    """Suspends its awaiter once, with no event loop."""

    def __await__(self) -> Any:
        yield


class SuspendingCreate(MemoryStore):
    """An asyncio store over a MemoryStore whose create suspends once."""

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:  # type: ignore[override]
        await Once()
        return super().create_if_absent(key, record)

    async def get(self, key: str) -> Mapping[str, Any] | None:  # type: ignore[override]
        return super().get(key)

    async def compare_and_swap(  # type: ignore[override]
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        return super().compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_call_closed_in_a_write_leaves_without_settling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    call = run_once_async(SuspendingCreate(), BINDING, Tool(), lambda _: None)
    call.send(None)  # suspended in the create
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        call.close()  # GeneratorExit: nothing may be awaited, so nothing is settled
    errors = _errors(caplog)
    assert len(errors) == 1
    assert errors[0].startswith("the call ended without settling a claim it may hold")


# --- M3: a sync store on the async path runs on a thread bridge ---------------------------


class SlowMemory(MemoryStore):
    """A sync store whose swaps block for ``seconds``, and which notes the threads that
    called it."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds, self.threads = seconds, set[str]()

    def get(self, key: str) -> Mapping[str, Any] | None:
        self.threads.add(threading.current_thread().name)
        return super().get(key)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self.threads.add(threading.current_thread().name)
        time.sleep(self.seconds)
        return super().compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_sync_store_on_the_async_driver_never_blocks_the_event_loop() -> None:
    store = SlowMemory(0.3)

    async def scenario() -> float:
        longest, last, done = 0.0, time.monotonic(), False

        async def heartbeat() -> None:
            nonlocal longest, last
            while not done:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                longest, last = max(longest, now - last), now

        beating = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)  # the heartbeat starts first
        outcome = await run_once_async(store, BINDING, Tool(), lambda _: None)
        again = await run_once_async(store, BINDING, Tool(), lambda _: None)
        done = True
        await beating
        assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
        assert again.status is RunStatus.ALREADY_DELIVERED
        return longest

    assert asyncio.run(scenario()) < 0.2
    assert threading.main_thread().name not in store.threads
    assert len(store.threads) == 1  # one bridge per store, for every call


class Slotted:
    """A sync store that cannot be weakly referenced."""

    __slots__ = ("memory",)

    def __init__(self) -> None:
        self.memory = MemoryStore()

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        return self.memory.create_if_absent(key, record)

    def get(self, key: str) -> Mapping[str, Any] | None:
        return self.memory.get(key)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        return self.memory.compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_sync_store_the_driver_cannot_bridge_is_refused_before_anything_runs() -> None:
    store, tool = Slotted(), Tool()
    with pytest.raises(CheckpointError) as raised:
        asyncio.run(run_once_async(store, BINDING, tool, lambda _: None))
    assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, "store")
    assert (tool.runs, store.memory.get(KEY)) == (0, None)


def test_the_bridge_of_a_sync_store_does_not_keep_the_store_alive() -> None:
    store = MemoryStore()
    asyncio.run(run_once_async(store, BINDING, Tool(), lambda _: None))
    alive = weakref.ref(store)
    del store
    gc.collect()
    assert alive() is None
