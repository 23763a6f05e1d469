"""run_once: the whole host protocol in one call, under failures and races."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from test_store import AsyncMemoryStore
from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    OutcomeUnknownError,
    Status,
    StoreError,
    checkpoint_key,
)
from tool_execution_checkpoint.runner import RunOutcome, RunStatus, run_once, run_once_async

BINDING = Binding("runner", "call-1", "send_email", "1", "sha256:00")
SECRET = "SECRET-a1b2c3"


class Tool:
    """A tool whose effect is counted."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.runs = 0
        self.result = {"messageId": "m-1", "note": SECRET} if result is None else result
        self.error = error

    def __call__(self) -> Any:
        self.runs += 1
        if self.error is not None:
            raise self.error
        return self.result


class Inbox:
    """Where deliveries go; fails the first ``failures`` sends."""

    def __init__(self, failures: int = 0) -> None:
        self.received: list[Any] = []
        self.failures = failures

    def __call__(self, payload: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionRefusedError("the provider refused the connection")
        self.received.append(payload)


class FlakyStore(MemoryStore):
    """Fails chosen compare-and-swaps: ``before`` ones raise without applying, ``after``
    ones apply and then raise (the reply is lost)."""

    def __init__(self, before: set[int] = frozenset(), after: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__()
        self.before, self.after, self.swaps = set(before), set(after), 0

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        self.swaps += 1
        if self.swaps in self.before:
            raise StoreError("injected: not applied")
        won = super().compare_and_swap(key, expected_revision, record)
        if self.swaps in self.after:
            raise OutcomeUnknownError("injected: applied, reply lost")
        return won


def test_runs_the_tool_once_and_delivers_its_exact_result() -> None:
    store, tool, inbox = MemoryStore(), Tool(), Inbox()
    first = run_once(store, BINDING, tool, inbox)
    assert (first.status, first.ran_tool) == (RunStatus.EXECUTED_AND_DELIVERED, True)
    assert first.record is not None
    assert first.record.status is Status.DELIVERED
    again = run_once(store, BINDING, tool, inbox)
    assert (again.status, again.ran_tool) == (RunStatus.ALREADY_DELIVERED, False)
    assert tool.runs == 1
    assert inbox.received == [tool.result]


def test_a_failed_delivery_is_retried_from_storage_without_running_the_tool() -> None:
    store, tool, inbox = MemoryStore(), Tool(), Inbox(failures=1)
    assert run_once(store, BINDING, tool, inbox).status is RunStatus.DELIVERY_FAILED
    stored = store.get(checkpoint_key(BINDING))
    assert stored is not None
    assert stored["status"] == "completed"
    recovered = run_once(store, BINDING, tool, inbox)
    assert (recovered.status, recovered.ran_tool) == (RunStatus.DELIVERED_STORED_RESULT, False)
    assert tool.runs == 1
    assert inbox.received == [tool.result]


def test_a_tool_that_raises_delivers_an_error_payload_without_its_message() -> None:
    store, inbox = MemoryStore(), Inbox()
    tool = Tool(error=ValueError(SECRET))
    assert run_once(store, BINDING, tool, inbox).status is RunStatus.EXECUTED_AND_DELIVERED
    assert inbox.received == [{"error": {"type": "ValueError"}}]
    shaped = run_once(
        MemoryStore(), BINDING, tool, inbox, on_tool_error=lambda e: {"failed": type(e).__name__}
    )
    assert shaped.status is RunStatus.EXECUTED_AND_DELIVERED
    assert inbox.received[-1] == {"failed": "ValueError"}


@pytest.mark.parametrize(
    ("result", "code"),
    [({1, 2}, ErrorCode.PAYLOAD_NOT_JSON), ("x" * 70_000, ErrorCode.PAYLOAD_LIMIT_EXCEEDED)],
)
def test_a_result_that_cannot_be_stored_ends_uncertain_never_rerun(
    result: Any, code: ErrorCode
) -> None:
    store, tool, inbox = MemoryStore(), Tool(result=result), Inbox()
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    stored = store.get(checkpoint_key(BINDING))
    assert stored is not None
    assert stored["status"] == "uncertain"
    assert code.value in stored["execution"]["uncertain"]["reason"]
    assert run_once(store, BINDING, tool, inbox).status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert tool.runs == 1
    assert inbox.received == []


@pytest.mark.parametrize("swap", [1, 2, 3, 4])
def test_a_write_whose_reply_is_lost_is_resolved_by_reading_back(swap: int) -> None:
    store, tool, inbox = FlakyStore(after={swap}), Tool(), Inbox()
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert tool.runs == 1
    assert inbox.received == [tool.result]


@pytest.mark.parametrize("swap", [1, 2, 3])
def test_a_write_that_did_not_land_is_decided_again(swap: int) -> None:
    store, tool, inbox = FlakyStore(before={swap}), Tool(), Inbox()
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert tool.runs == 1
    assert inbox.received == [tool.result]


def test_a_failed_record_of_a_sent_delivery_needs_delivery_reconciliation() -> None:
    store, tool, inbox = FlakyStore(before={4, 5, 6, 7, 8}), Tool(), Inbox()
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert inbox.received == [tool.result]
    assert run_once(store, BINDING, tool, inbox).status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert tool.runs == 1


def test_a_claimed_record_is_never_run_again() -> None:
    store, tool, inbox = MemoryStore(), Tool(), Inbox()

    def crash() -> Any:
        raise SystemExit("the host died while the tool ran")

    with pytest.raises(SystemExit):
        run_once(store, BINDING, crash, inbox)
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert tool.runs == 0


def test_a_changed_binding_is_a_conflict_and_runs_nothing() -> None:
    store, tool, inbox = MemoryStore(), Tool(), Inbox()
    run_once(store, BINDING, tool, inbox)
    changed = Binding("runner", "call-1", "send_email", "2", "sha256:00")
    with pytest.raises(CheckpointError) as caught:
        run_once(store, changed, tool, inbox)
    assert caught.value.code is ErrorCode.BINDING_CONFLICT
    assert tool.runs == 1


def test_concurrent_hosts_run_the_tool_once() -> None:
    store, inbox = MemoryStore(), Inbox()
    runs: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)
    outcomes: list[tuple[RunStatus, bool]] = []

    def tool() -> Mapping[str, str]:
        with lock:
            runs.append(threading.current_thread().name)
        return {"ok": "yes"}

    def host() -> None:
        start.wait()
        outcome = run_once(store, BINDING, tool, inbox)
        with lock:
            outcomes.append((outcome.status, outcome.ran_tool))

    threads = [threading.Thread(target=host) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(runs) == 1
    assert [ran for _, ran in outcomes].count(True) == 1
    assert inbox.received == [{"ok": "yes"}]  # the delivery claim lets one host send
    delivered = {RunStatus.EXECUTED_AND_DELIVERED, RunStatus.DELIVERED_STORED_RESULT}
    assert sum(status in delivered for status, _ in outcomes) == 1
    # A host that loads while another is mid-flight sees its claim: it may be live.
    assert {status for status, _ in outcomes} <= delivered | {
        RunStatus.ALREADY_DELIVERED,
        RunStatus.LOST_TO_ANOTHER_WORKER,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
    }


def test_logs_name_the_call_and_status_never_the_payload(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tool_execution_checkpoint"):
        run_once(MemoryStore(), BINDING, Tool(), Inbox())
    assert "call_id=call-1" in caplog.text
    assert "status=delivered" in caplog.text
    assert SECRET not in caplog.text


def test_the_async_twin_follows_the_same_protocol() -> None:
    store = AsyncMemoryStore()
    runs: list[int] = []
    sent: list[Any] = []

    async def tool() -> Mapping[str, int]:
        runs.append(1)
        return {"n": len(runs)}

    async def refuse(payload: Any) -> None:
        del payload
        raise ConnectionRefusedError("down")

    async def accept(payload: Any) -> None:
        sent.append(payload)

    async def scenario() -> list[RunOutcome]:
        first = await run_once_async(store, BINDING, tool, refuse)
        crowd = await asyncio.gather(
            *(run_once_async(store, BINDING, tool, accept) for _ in range(8))
        )
        return [first, *crowd]

    first, *crowd = asyncio.run(scenario())
    assert (first.status, first.ran_tool) == (RunStatus.DELIVERY_FAILED, True)
    assert runs == [1]
    assert sent == [{"n": 1}]
    statuses = [outcome.status for outcome in crowd]
    assert statuses.count(RunStatus.DELIVERED_STORED_RESULT) == 1
    assert not any(outcome.ran_tool for outcome in crowd)


class CountingStore(MemoryStore):
    """A MemoryStore that counts its operations by name."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.calls.append("create")
        return super().create_if_absent(key, record)

    def get(self, key: str) -> Mapping[str, Any] | None:
        self.calls.append("get")
        return super().get(key)

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        self.calls.append("swap")
        return super().compare_and_swap(key, expected_revision, record)


def test_a_fresh_call_reads_nothing_it_wrote_itself() -> None:
    """After its own create or swap landed, the runner knows the stored record: a fresh
    call is one create and four swaps, no read (each read is a round trip on a server)."""
    store = CountingStore()
    outcome = run_once(store, BINDING, Tool(), Inbox())
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert store.calls == ["create", "swap", "swap", "swap", "swap"]
    store.calls.clear()
    again = run_once(store, BINDING, Tool(), Inbox())
    assert again.status is RunStatus.ALREADY_DELIVERED
    assert store.calls == ["create", "get"]  # the create lost: read what is stored
