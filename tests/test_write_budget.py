"""The write budget: once the tool ran, a write over the call's own claim outlives a store
blip (read back and resent with pauses until the budget is spent), and when the budget
runs out the result is handed back, never silently dropped.

The real-server outages (Redis and PostgreSQL restarted, a SQLite lock held past its
busy_timeout) are in tests/test_fault_suite.py; here the store is a MemoryStore that
goes away for a while, and the machine is driven on a clock the test moves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tool_execution_checkpoint import (
    Binding,
    CallNotAnswered,
    Checkpoint,
    CheckpointError,
    MemoryStore,
    Status,
    StoreError,
    checkpoint_key,
    checkpointed,
    tool_call,
)
from tool_execution_checkpoint.runner import (
    FIRST_PAUSE,
    LONGEST_PAUSE,
    Get,
    HostProtocol,
    Returned,
    RunOutcome,
    RunStatus,
    RunTool,
    Sleep,
    StoreFault,
    Swap,
    held_retries,
    pause_before,
    run_once,
    run_once_async,
)

BINDING = Binding("budget", "call-secret-7", "charge_card", "1", "sha256:00")
KEY = checkpoint_key(BINDING)
RESULT = {"receipt": "rcpt-SECRET-991", "amount": 1200}


class GoesAway(MemoryStore):
    """A store that goes away (every operation raises StoreError) for ``seconds`` from the
    first write that leaves ``status``, as a server restarted right after the tool ran."""

    def __init__(self, status: Status, seconds: float) -> None:
        super().__init__()
        self.status, self.seconds = status, seconds
        self.until: float | None = None
        self.refused = 0

    def _away(self) -> bool:
        if self.until is not None and time.monotonic() < self.until:
            self.refused += 1
            return True
        return False

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        stored = super().get(key) or {}
        if self.until is None and stored.get("status") == self.status.value:
            self.until = time.monotonic() + self.seconds
        if self._away():
            raise StoreError("injected: the server is restarting")
        return super().compare_and_swap(key, expected_revision, record, durable=durable)

    def get(self, key: str) -> Mapping[str, Any] | None:
        if self._away():
            raise StoreError("injected: the server is restarting")
        return super().get(key)


class Counted:
    """A tool whose effect is counted."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> Any:
        self.runs += 1
        return dict(RESULT)


async def _counted_async(tool: Counted) -> Any:
    return tool()


def _run(driver: str, store: MemoryStore, tool: Counted, inbox: list[Any], **options: Any) -> Any:
    if driver == "sync":
        return run_once(store, BINDING, tool, inbox.append, **options)
    return asyncio.run(
        run_once_async(store, BINDING, lambda: _counted_async(tool), inbox.append, **options)
    )


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("status", [Status.EXECUTING, Status.DELIVERING])
def test_a_store_away_for_half_a_second_after_the_tool_ran_keeps_the_result(
    driver: str, status: Status
) -> None:
    store, tool, inbox = GoesAway(status, 0.5), Counted(), list[Any]()
    outcome = _run(driver, store, tool, inbox)
    assert (outcome.status, outcome.ran_tool) == (RunStatus.EXECUTED_AND_DELIVERED, True)
    assert store.refused > 3  # more than the three read-backs a claim gets
    assert inbox == [RESULT]
    assert outcome.payload == RESULT
    assert tool.runs == 1


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_spent_budget_hands_the_result_back_and_logs_the_key_at_error(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, tool, inbox = GoesAway(Status.EXECUTING, 60.0), Counted(), list[Any]()
    with caplog.at_level(logging.ERROR, logger="tool_execution_checkpoint"):
        started = time.monotonic()
        outcome = _run(driver, store, tool, inbox, write_budget=0.3)
        waited = time.monotonic() - started
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.reason == "the tool ran but its result could not be stored"
    assert outcome.unstored is not None
    assert outcome.unstored.payload == RESULT
    assert not outcome.has_payload  # nothing stored to replay
    assert 0.3 <= waited < 2.0
    assert inbox == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert line == f"the tool ran but its result could not be stored: key={KEY}"
    assert "SECRET" not in line
    assert BINDING.call_id not in line
    store.until = 0.0  # the store is back: the record was left executing, never rerun
    assert (store.get(KEY) or {})["status"] == Status.EXECUTING.value
    again = run_once(store, BINDING, tool, inbox.append)
    assert again.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert again.unstored is None
    assert tool.runs == 1


def test_a_cancelled_pause_still_stores_the_result_once_the_store_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, tool, sent = GoesAway(Status.EXECUTING, 0.5), Counted(), list[Any]()

    async def cancel_while_it_pauses() -> None:
        task = asyncio.create_task(
            run_once_async(store, BINDING, lambda: _counted_async(tool), sent.append)
        )
        while store.refused < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.ERROR, logger="tool_execution_checkpoint"):
        asyncio.run(cancel_while_it_pauses())
    assert [r for r in caplog.records if r.levelno == logging.ERROR] == []
    assert sent == []  # nothing is sent after the cancellation
    assert (store.get(KEY) or {})["status"] == Status.COMPLETED.value  # stored, not sent
    again = run_once(store, BINDING, tool, sent.append)
    assert again.status is RunStatus.DELIVERED_STORED_RESULT
    assert (sent, tool.runs) == ([RESULT], 1)


# --- the machine, on a clock the test moves ------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _to_the_result_write(protocol: HostProtocol) -> tuple[Any, Any]:
    """Start a call, let its claim land and its tool return: the request is the result's
    swap."""
    request: Any
    request, state = protocol.start("t" * 32)
    request, state = protocol.step(state, True)
    assert isinstance(request, RunTool)
    request, state = protocol.step(state, Returned(RESULT))
    assert isinstance(request, Swap)
    return request, state


def test_read_backs_pause_doubling_to_the_longest_pause_until_the_deadline() -> None:
    clock = Clock()
    protocol = HostProtocol(BINDING, write_budget=5.0, monotonic=clock)
    request, state = _to_the_result_write(protocol)
    pauses: list[float] = []
    while not isinstance(request, RunOutcome):
        if isinstance(request, Sleep):
            pauses.append(request.seconds)
            clock.now += request.seconds
        request, state = protocol.step(state, None if isinstance(request, Sleep) else StoreFault())
    expected = [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert pauses[:-1] == pytest.approx(expected)
    assert pauses[-1] == pytest.approx(5.0 - sum(expected))  # the last is cut at the deadline
    assert request.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert request.unstored is not None
    assert request.unstored.payload == RESULT


def test_a_slow_store_spends_the_budget_in_fewer_read_backs() -> None:
    clock = Clock()
    protocol = HostProtocol(BINDING, write_budget=5.0, monotonic=clock)
    request, state = _to_the_result_write(protocol)
    reads = 0
    while not isinstance(request, RunOutcome):
        if isinstance(request, Get):
            reads += 1
            clock.now += 2.0  # each read waits out a two-second connect timeout
        request, state = protocol.step(state, None if isinstance(request, Sleep) else StoreFault())
    assert reads == 3  # at 100, 102.05 and 104.15; the next would start past 105


def test_a_clock_that_does_not_move_still_ends_at_the_budgets_count() -> None:
    protocol = HostProtocol(BINDING, write_budget=5.0, monotonic=lambda: 0.0)
    request, state = _to_the_result_write(protocol)
    reads = 0
    while not isinstance(request, RunOutcome):
        reads += isinstance(request, Get)
        request, state = protocol.step(state, None if isinstance(request, Sleep) else StoreFault())
    assert reads == held_retries(5.0)
    assert sum(pause_before(n) for n in range(1, reads + 1)) >= 5.0


def test_the_longest_budget_is_accepted_and_a_longer_one_refused() -> None:
    store = MemoryStore()
    outcome = run_once(store, BINDING, Counted(), lambda _: None, write_budget=1e6)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    with pytest.raises(CheckpointError):
        run_once(store, BINDING, Counted(), lambda _: None, write_budget=1e6 + 1)


def test_the_pause_schedule() -> None:
    assert pause_before(1) == 0.0
    assert pause_before(2) == FIRST_PAUSE
    assert pause_before(3) == 2 * FIRST_PAUSE
    assert pause_before(40) == LONGEST_PAUSE
    assert held_retries(0) == 3
    assert held_retries(FIRST_PAUSE) == 2


def test_a_claim_is_never_waited_for() -> None:
    # before the tool runs, nothing is held: a claim of unknown outcome gets three
    # read-backs at once, whatever the budget, and the tool does not run
    protocol = HostProtocol(BINDING, write_budget=30.0, monotonic=Clock())
    request: Any
    request, state = protocol.start("t" * 32)
    kinds = ""
    while not isinstance(request, RunOutcome):
        kinds += type(request).__name__[0]
        request, state = protocol.step(state, StoreFault())
    assert kinds == "CGGG"
    assert request.status is RunStatus.STORE_UNAVAILABLE
    assert not request.ran_tool


# --- the guard hands the framework the live result -----------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_the_guard_returns_the_live_result_when_the_budget_is_spent(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = GoesAway(Status.EXECUTING, 60.0)
    runs: list[str] = []

    def charge(card: str) -> dict[str, Any]:
        runs.append(card)
        return dict(RESULT)

    async def charge_async(card: str) -> dict[str, Any]:
        return charge(card)

    with caplog.at_level(logging.ERROR, logger="tool_execution_checkpoint"), tool_call("c-1"):
        if driver == "sync":
            value = checkpointed(store, write_budget=0.2, name="charge")(charge)("4242")
        else:
            value = asyncio.run(
                checkpointed(store, write_budget=0.2, name="charge")(charge_async)("4242")
            )
    assert value == RESULT
    assert runs == ["4242"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "could not be stored" in errors[0]
    store.until = 0.0  # back: a replay is refused (the record waits for reconciliation)
    with tool_call("c-1"), pytest.raises(CallNotAnswered):
        checkpointed(store, write_budget=0.2, name="charge")(charge)("4242")
    assert runs == ["4242"]


# --- a record the store lost after the tool ran --------------------------------------------


class Forgets(MemoryStore):
    """Loses the record at the first write of a result (a failover to a replica that never
    had it), then answers; with ``forget_again`` no record can be created after that."""

    def __init__(self, *, forget_again: bool = False) -> None:
        super().__init__()
        self.forgotten, self.forget_again = 0, forget_again

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        if record.status is Status.DELIVERING and self.forgotten == 0:
            self.forgotten += 1
            self.delete(key)
            raise StoreError("injected: failed over to a replica without the record")
        return super().compare_and_swap(key, expected_revision, record, durable=durable)

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        if self.forgotten and self.forget_again:
            raise StoreError("injected: still failing over")
        return super().create_if_absent(key, record)

    def delete(self, key: str) -> None:
        raw = super().get(key)
        assert raw is not None
        self._texts.pop(key)
        self._revisions.pop(key)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_record_lost_after_the_tool_ran_is_restored_with_its_result(driver: str) -> None:
    store, tool, inbox = Forgets(), Counted(), list[Any]()
    outcome = _run(driver, store, tool, inbox)
    assert (outcome.status, outcome.reason) == (RunStatus.EXECUTED_AND_DELIVERED, None)
    assert outcome.unstored is None
    assert inbox == [RESULT]
    assert tool.runs == 1
    record = Checkpoint.from_dict(store.get(KEY) or {})
    assert record.status is Status.DELIVERED
    assert record.result is not None
    assert record.result.payload == RESULT
    assert record.execution is not None
    assert outcome.record is not None
    assert outcome.record.execution == record.execution  # the same attempt id, restored


def test_a_record_that_cannot_be_restored_hands_the_result_back_and_never_reruns() -> None:
    store, tool, inbox = Forgets(forget_again=True), Counted(), list[Any]()
    outcome = _run("sync", store, tool, inbox, write_budget=0)
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.reason == "the record vanished after the tool ran"
    assert outcome.unstored is not None
    assert outcome.unstored.payload == RESULT
    assert tool.runs == 1
