"""run_once: the whole host protocol in one call, under failures and races."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping
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
    claim_execution,
    complete_execution,
    create_checkpoint,
    mark_execution_uncertain,
    release_delivery,
)
from tool_execution_checkpoint.runner import (
    DeliveryNotSent,
    HostProtocol,
    Raised,
    Returned,
    RunOutcome,
    RunStatus,
    StoreFault,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    run_once,
    run_once_async,
)

BINDING = Binding("runner", "call-1", "send_email", "1", "sha256:00")
SECRET = "SECRET-a1b2c3"
AT = "2026-12-03T00:00:00Z"


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

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self.swaps += 1
        if self.swaps in self.before:
            raise StoreError("injected: not applied")
        won = super().compare_and_swap(key, expected_revision, record, durable=durable)
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


@pytest.mark.parametrize("swap", [1, 2])
def test_a_write_that_did_not_land_is_decided_again(swap: int) -> None:
    store, tool, inbox = FlakyStore(before={swap}), Tool(), Inbox()
    outcome = run_once(store, BINDING, tool, inbox)
    assert store.swaps == 3  # the failed swap was sent again
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert tool.runs == 1
    assert inbox.received == [tool.result]


def test_a_failed_record_of_a_sent_delivery_needs_delivery_reconciliation() -> None:
    store, tool, inbox = FlakyStore(before={2, 3, 4, 5, 6}), Tool(), Inbox()
    outcome = run_once(store, BINDING, tool, inbox, write_budget=0)
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


def test_logs_name_the_key_and_status_never_the_payload_or_the_call_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="tool_execution_checkpoint"):
        run_once(MemoryStore(), BINDING, Tool(), Inbox())
    assert f"key={checkpoint_key(BINDING)}" in caplog.text
    assert BINDING.call_id not in caplog.text
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

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self.calls.append("swap")
        return super().compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_fresh_call_reads_nothing_it_wrote_itself() -> None:
    """After its own create or swap landed, the runner knows the stored record: a fresh
    call is one create (already claimed) and two swaps (the result with its delivery claim,
    then the delivery done), no read (each read is a round trip on a server)."""
    store = CountingStore()
    outcome = run_once(store, BINDING, Tool(), Inbox())
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert store.calls == ["create", "swap", "swap"]
    store.calls.clear()
    again = run_once(store, BINDING, Tool(), Inbox())
    assert again.status is RunStatus.ALREADY_DELIVERED
    assert store.calls == ["create", "get"]  # the create lost: read what is stored


# --- outcomes that fit real hosts --------------------------------------------------------


def test_a_send_of_unknown_outcome_leaves_the_delivery_to_reconcile() -> None:
    store, tool = MemoryStore(), Tool()

    def times_out(payload: Any) -> None:
        del payload
        raise TimeoutError(SECRET)

    first = run_once(store, BINDING, tool, times_out)
    assert first.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert first.reason == "the send's outcome is unknown: TimeoutError"
    assert first.record is not None
    assert first.record.status is Status.DELIVERING
    assert first.payload == tool.result  # the stored payload, to hand back
    inbox = Inbox()
    again = run_once(store, BINDING, tool, inbox)
    assert again.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION  # never resent blindly
    assert inbox.received == []
    assert tool.runs == 1


def test_only_a_declared_not_sent_exception_releases_the_delivery() -> None:
    store, tool, inbox = MemoryStore(), Tool(), Inbox()

    def refused(payload: Any) -> None:
        del payload
        raise LookupError("the provider said no")

    first = run_once(store, BINDING, tool, refused, not_sent=(LookupError,))
    assert (first.status, first.reason) == (RunStatus.DELIVERY_FAILED, "not sent: LookupError")
    assert first.record is not None
    assert first.record.status is Status.COMPLETED

    def not_sent(payload: Any) -> None:
        del payload
        raise DeliveryNotSent

    assert run_once(store, BINDING, tool, not_sent).status is RunStatus.DELIVERY_FAILED
    assert run_once(store, BINDING, tool, inbox).status is RunStatus.DELIVERED_STORED_RESULT
    assert inbox.received == [tool.result]


def test_a_tool_that_reports_its_outcome_unknown_is_uncertain_never_rerun() -> None:
    store, inbox = MemoryStore(), Inbox()
    tool = Tool(error=ToolOutcomeUnknown("the gateway timed out"))
    first = run_once(store, BINDING, tool, inbox)
    assert first.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert first.reason == "the gateway timed out"
    assert first.record is not None
    assert first.record.status is Status.UNCERTAIN
    assert first.record.revision == 2  # the record it wrote, not the claim before it
    assert not first.has_payload
    again = run_once(store, BINDING, Tool(), inbox)
    assert again.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert again.reason == "the gateway timed out"
    assert tool.runs == 1
    assert inbox.received == []


def test_an_invalid_unknown_outcome_reason_is_replaced_not_stored_as_a_result() -> None:
    store = MemoryStore()
    outcome = run_once(store, BINDING, Tool(error=ToolOutcomeUnknown("")), Inbox())
    assert outcome.record is not None
    assert outcome.record.status is Status.UNCERTAIN
    assert outcome.reason is not None
    assert "could not be stored" in outcome.reason


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SystemExit(3)])
def test_a_cancelled_tool_is_marked_uncertain_then_the_cancellation_propagates(
    error: BaseException,
) -> None:
    store = MemoryStore()
    with pytest.raises(type(error)):
        run_once(store, BINDING, Tool(error=error), Inbox())  # type: ignore[arg-type]
    stored = Checkpoint.from_dict(store.get(checkpoint_key(BINDING)) or {})
    assert stored.status is Status.UNCERTAIN
    assert stored.execution is not None
    assert stored.execution.uncertain is not None
    assert stored.execution.uncertain.reason == "cancelled"


def test_an_async_tool_cancelled_by_a_timeout_is_marked_uncertain() -> None:
    store = AsyncMemoryStore()
    started = asyncio.Event()

    async def slow() -> dict[str, str]:
        started.set()
        await asyncio.sleep(60)
        return {"never": "stored"}

    async def deliver(payload: Any) -> None:
        del payload

    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await run_once_async(store, BINDING, slow, deliver)

    asyncio.run(scenario())
    assert started.is_set()
    raw = asyncio.run(store.get(checkpoint_key(BINDING)))
    stored = Checkpoint.from_dict(raw or {})
    assert stored.status is Status.UNCERTAIN
    assert stored.execution is not None
    assert stored.execution.uncertain is not None
    assert stored.execution.uncertain.reason == "cancelled"


class Retry(Exception):
    """A framework's control flow (pydantic-ai's ModelRetry, say)."""


def test_a_pass_through_exception_is_not_stored_as_the_result() -> None:
    store, inbox = MemoryStore(), Inbox()
    with pytest.raises(Retry):
        run_once(store, BINDING, Tool(error=Retry()), inbox, pass_through=(Retry,))
    stored = Checkpoint.from_dict(store.get(checkpoint_key(BINDING)) or {})
    assert stored.status is Status.UNCERTAIN
    assert stored.result is None
    assert stored.execution is not None
    assert stored.execution.uncertain is not None
    assert stored.execution.uncertain.reason == "passed through: Retry"
    assert inbox.received == []


def test_a_handler_error_carries_its_type_as_the_reason_and_the_payload() -> None:
    outcome = run_once(MemoryStore(), BINDING, Tool(error=ValueError(SECRET)), Inbox())
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason == "the tool raised ValueError"
    assert outcome.payload == {"error": {"type": "ValueError"}}
    assert SECRET not in repr(outcome)


def test_an_unstorable_result_names_its_error_code() -> None:
    outcome = run_once(MemoryStore(), BINDING, Tool(result={1, 2}), Inbox())
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.reason == "the tool's result could not be stored: PAYLOAD_NOT_JSON"
    assert outcome.record is not None
    assert outcome.record.status is Status.UNCERTAIN


def test_a_delivered_outcome_carries_the_stored_payload() -> None:
    store, tool = MemoryStore(), Tool()
    first = run_once(store, BINDING, tool, Inbox())
    assert (first.has_payload, first.payload) == (True, tool.result)
    again = run_once(store, BINDING, tool, Inbox())
    assert again.status is RunStatus.ALREADY_DELIVERED
    assert (again.has_payload, again.payload) == (True, tool.result)


async def _async_tool() -> int:
    return 1


async def _async_deliver(payload: Any) -> None:
    del payload


@pytest.mark.parametrize("part", ["store", "tool", "deliver"])
def test_run_once_refuses_async_parts_before_anything_runs(part: str) -> None:
    store: Any = AsyncMemoryStore() if part == "store" else MemoryStore()
    tool: Any = _async_tool if part == "tool" else Tool()
    deliver: Any = _async_deliver if part == "deliver" else Inbox()
    with pytest.raises(CheckpointError) as raised:
        run_once(store, BINDING, tool, deliver)
    assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, part)
    if part != "store":
        assert store.get(checkpoint_key(BINDING)) is None  # nothing was written


def test_run_once_async_takes_sync_tools_and_deliveries_too() -> None:
    store, tool, inbox = AsyncMemoryStore(), Tool(), Inbox()
    outcome = asyncio.run(run_once_async(store, BINDING, tool, inbox))
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert (tool.runs, inbox.received) == (1, [tool.result])


class ReadFailsOnce(MemoryStore):
    """The claim (the create of the claimed record) lands but its reply is lost, and the
    first read-back fails too."""

    def __init__(self) -> None:
        super().__init__()
        self.creates = self.reads = 0

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.creates += 1
        created = super().create_if_absent(key, record)
        if self.creates == 1:
            raise OutcomeUnknownError("injected: applied, reply lost")
        return created

    def get(self, key: str) -> Mapping[str, Any] | None:
        self.reads += 1
        if self.reads == 1:
            raise StoreError("injected: read failed")
        return super().get(key)


def test_an_own_claim_whose_reply_was_lost_is_read_back_again_and_run() -> None:
    tool = Tool()
    outcome = run_once(ReadFailsOnce(), BINDING, tool, Inbox())
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert tool.runs == 1


class NeverReadable(ReadFailsOnce):
    def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise StoreError("injected: read failed")


def test_an_own_claim_that_cannot_be_read_back_is_store_unavailable_not_lost() -> None:
    tool = Tool()
    outcome = run_once(NeverReadable(), BINDING, tool, Inbox())
    assert outcome.status is RunStatus.STORE_UNAVAILABLE
    assert outcome.reason == "could not tell whether the claim landed"
    assert tool.runs == 0


def test_a_duplicate_waits_for_a_call_in_flight_when_asked() -> None:
    store, inbox = MemoryStore(), Inbox()
    release, claimed = threading.Event(), threading.Event()

    def slow_tool() -> dict[str, str]:
        claimed.set()
        release.wait(10)
        return {"ok": "done"}

    first = threading.Thread(target=run_once, args=(store, BINDING, slow_tool, inbox))
    first.start()
    claimed.wait(10)
    impatient = run_once(store, BINDING, Tool(), Inbox())
    assert impatient.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION  # off by default
    timer = threading.Timer(0.05, release.set)
    timer.start()
    waited = run_once(store, BINDING, Tool(), Inbox(), wait_seconds=10, poll_seconds=0.01)
    first.join()
    assert waited.status is not RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert waited.has_payload
    assert waited.payload == {"ok": "done"}
    assert not waited.ran_tool


@pytest.mark.parametrize(
    ("option", "value"), [("wait_seconds", -1), ("poll_seconds", "1"), ("wait_seconds", True)]
)
def test_bad_wait_options_are_refused(option: str, value: Any) -> None:
    with pytest.raises(CheckpointError) as raised:
        run_once(MemoryStore(), BINDING, Tool(), Inbox(), **{option: value})
    assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, option)


# --- the edges of the machine and its drivers --------------------------------------------


def test_a_call_token_is_128_random_bits_and_claims_count_from_it() -> None:
    records = [run_once(MemoryStore(), BINDING, Tool(), Inbox()).record for _ in range(2)]
    tokens = set()
    for record in records:
        assert record is not None
        assert record.execution is not None
        assert record.delivery is not None
        token, _, number = record.execution.attempt_id.partition(".")
        assert re.fullmatch("[0-9a-f]{32}", token)
        assert number == "1"
        assert record.delivery.delivery_id == f"{token}.2"
        tokens.add(token)
    assert len(tokens) == 2


class OperatorFirst(MemoryStore):
    """Before the swap to ``status`` an operator settles the record its own way, so the
    call's swap does not land."""

    def __init__(self, status: Status, settle: Any) -> None:
        super().__init__()
        self.status, self.settle = status, settle

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        if record.status is self.status and self.settle is not None:
            current = Checkpoint.from_dict(self.get(key) or {})
            step, self.settle = self.settle(current), None
            assert super().compare_and_swap(key, step.expected_revision, step.next)
        return super().compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_mark_that_an_operator_overtook_delivers_the_operators_result() -> None:
    def complete(current: Checkpoint) -> Any:
        assert current.execution is not None
        return complete_execution(
            current, attempt_id=current.execution.attempt_id, at=AT, result={"found": True}
        )

    store, inbox = OperatorFirst(Status.UNCERTAIN, complete), Inbox()
    outcome = run_once(store, BINDING, Tool(error=ToolOutcomeUnknown("timed out")), inbox)
    assert (outcome.status, outcome.reason) == (RunStatus.EXECUTED_AND_DELIVERED, "timed out")
    assert outcome.unstored is None  # the tool gave no result to keep
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERED
    assert outcome.payload == {"found": True}
    assert inbox.received == [{"found": True}]  # the call's one answer


def test_a_delivered_mark_that_an_operator_overtook_reports_the_operators_record() -> None:
    def release(current: Checkpoint) -> Any:
        assert current.delivery is not None
        return release_delivery(current, delivery_id=current.delivery.delivery_id, at=AT)

    inbox = Inbox()
    outcome = run_once(OperatorFirst(Status.DELIVERED, release), BINDING, Tool(), inbox)
    assert outcome.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert outcome.reason == "the record moved under this call's delivery"
    assert outcome.record is not None
    assert outcome.record.status is Status.COMPLETED
    assert len(inbox.received) == 1


class SwapsFailFrom(MemoryStore):
    """Every swap from ``before`` to ``after`` fails, and so does every read after the
    first such swap."""

    def __init__(self, before: Status, after: Status) -> None:
        super().__init__()
        self.before, self.after, self.failing = before, after, False

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        current = self.get(key) or {}
        if current.get("status") == self.before.value and record.status is self.after:
            self.failing = True
            raise StoreError("injected")
        return super().compare_and_swap(key, expected_revision, record, durable=durable)

    def get(self, key: str) -> Mapping[str, Any] | None:
        if self.failing:
            raise StoreError("injected")
        return super().get(key)


def test_a_delivery_that_cannot_be_recorded_says_whether_it_was_sent() -> None:
    stuck = SwapsFailFrom(Status.DELIVERING, Status.DELIVERED)
    sent = run_once(stuck, BINDING, Tool(), Inbox(), write_budget=0.1)
    assert sent.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert sent.reason == "sent, but it could not be recorded"
    store = SwapsFailFrom(Status.DELIVERING, Status.COMPLETED)
    not_sent = run_once(store, BINDING, Tool(), Inbox(failures=1), write_budget=0.1)
    assert not_sent.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert not_sent.reason == "not sent, and not released"


BAD_ARGUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"binding": "call-1"}, "INVALID_ARGUMENT: binding: must be a Binding"),
    ({"tool": None}, "INVALID_ARGUMENT: tool: must be callable"),
    ({"deliver": "inbox"}, "INVALID_ARGUMENT: deliver: must be callable"),
    (
        {"wait_seconds": -1},
        "INVALID_ARGUMENT: wait_seconds: must be a number of seconds from 0 to 1e6",
    ),
    (
        {"write_budget": float("inf")},
        "INVALID_ARGUMENT: write_budget: must be a number of seconds from 0 to 1e6",
    ),
    (
        {"write_budget": float("nan")},
        "INVALID_ARGUMENT: write_budget: must be a number of seconds from 0 to 1e6",
    ),
    (
        {"wait_seconds": 1, "poll_seconds": 0},
        "INVALID_ARGUMENT: poll_seconds: must be > 0 when wait_seconds is",
    ),
]


def call_driver(driver: str, store: MemoryStore, changes: dict[str, Any]) -> RunOutcome:
    """run_once or run_once_async on BINDING, with ``changes`` to its arguments."""
    arguments: dict[str, Any] = {"binding": BINDING, "tool": Tool(), "deliver": Inbox()}
    arguments |= changes
    parts = [arguments.pop(name) for name in ("binding", "tool", "deliver")]
    if driver == "sync":
        return run_once(store, *parts, **arguments)
    return asyncio.run(run_once_async(store, *parts, **arguments))


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(("changes", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused_with_their_field_and_message(
    driver: str, changes: dict[str, Any], message: str
) -> None:
    store = MemoryStore()
    with pytest.raises(CheckpointError) as raised:
        call_driver(driver, store, changes)
    assert str(raised.value) == message
    assert len(store) == 0


class AsyncCallable:
    async def __call__(self) -> None:
        return None


def test_run_once_refuses_an_async_callable_object_with_its_message() -> None:
    with pytest.raises(CheckpointError) as raised:
        run_once(MemoryStore(), BINDING, AsyncCallable(), Inbox())
    assert str(raised.value) == (
        "INVALID_ARGUMENT: tool: is async: run_once cannot await it (use run_once_async)"
    )


class Effects:
    """Tools and deliveries of every shape, async and sync, whose runs are counted."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.sent: list[Any] = []

    async def tool(self) -> Any:
        self.runs.append("tool")
        return {"messageId": "m-1"}

    async def deliver(self, payload: Any) -> None:
        self.sent.append(payload)

    def sync_tool(self) -> Any:
        self.runs.append("tool")
        return {"messageId": "m-1"}

    def sync_deliver(self, payload: Any) -> None:
        self.sent.append(payload)


class SyncTool:
    def __init__(self, effects: Effects) -> None:
        self.effects = effects

    def __call__(self) -> Any:
        return self.effects.sync_tool()


class AsyncTool:
    def __init__(self, effects: Effects) -> None:
        self.effects = effects

    async def __call__(self) -> Any:
        return await self.effects.tool()


class AsyncDeliver:
    def __init__(self, effects: Effects) -> None:
        self.effects = effects

    async def __call__(self, payload: Any) -> None:
        await self.effects.deliver(payload)


async def run_with(effects: Effects, name: str) -> Any:
    """A module-level coroutine function, for functools.partial."""
    assert name == "the tool"
    return await effects.tool()


async def deliver_with(effects: Effects, payload: Any) -> None:
    await effects.deliver(payload)


def own_call(function: Any, call: Any) -> Any:
    """``function`` with an attribute ``__call__`` of its own (calling it still runs
    ``function``, but run_once refuses it as it always has)."""
    function.__call__ = call
    return function


ASYNC_TOOLS: dict[str, Callable[[Effects], Any]] = {
    "coroutine function": lambda effects: effects.tool,
    "partial of a coroutine function": lambda effects: functools.partial(
        run_with, effects, "the tool"
    ),
    "object with an async __call__": AsyncTool,
    "partial of a bound coroutine method": lambda effects: functools.partial(effects.tool),
}
ASYNC_DELIVERIES: dict[str, Callable[[Effects], Any]] = {
    "coroutine function": lambda effects: effects.deliver,
    "partial of a coroutine function": lambda effects: functools.partial(deliver_with, effects),
    "object with an async __call__": AsyncDeliver,
}
SYNC_TOOLS: dict[str, Callable[[Effects], Any]] = {
    "bound method": lambda effects: effects.sync_tool,
    "lambda": lambda effects: lambda: effects.sync_tool(),  # noqa: PLW0108 - a plain function
    "partial": lambda effects: functools.partial(effects.sync_tool),
    "callable object": SyncTool,
}
SYNC_DELIVERIES: dict[str, Callable[[Effects], Any]] = {
    "bound method": lambda effects: effects.sync_deliver,
    "builtin method": lambda effects: effects.sent.append,
    "lambda": lambda effects: lambda payload: effects.sync_deliver(payload),  # noqa: PLW0108
    "partial": lambda effects: functools.partial(effects.sync_deliver),
}


@pytest.mark.parametrize("shape", sorted(ASYNC_TOOLS))
def test_run_once_refuses_an_async_tool_of_any_shape(shape: str) -> None:
    effects, store = Effects(), MemoryStore()
    with pytest.raises(CheckpointError) as raised:
        run_once(store, BINDING, ASYNC_TOOLS[shape](effects), effects.sync_deliver)
    assert str(raised.value) == (
        "INVALID_ARGUMENT: tool: is async: run_once cannot await it (use run_once_async)"
    )
    assert (effects.runs, len(store)) == ([], 0)


@pytest.mark.parametrize("shape", sorted(ASYNC_DELIVERIES))
def test_run_once_refuses_an_async_deliver_of_any_shape(shape: str) -> None:
    effects, store = Effects(), MemoryStore()
    with pytest.raises(CheckpointError) as raised:
        run_once(store, BINDING, effects.sync_tool, ASYNC_DELIVERIES[shape](effects))
    assert str(raised.value) == (
        "INVALID_ARGUMENT: deliver: is async: run_once cannot await it (use run_once_async)"
    )
    assert (effects.runs, len(store)) == ([], 0)


def test_run_once_refuses_an_async_store_and_a_function_with_an_async_call_of_its_own() -> None:
    effects = Effects()
    store: Any = AsyncMemoryStore()
    with pytest.raises(CheckpointError) as raised:
        run_once(store, BINDING, effects.sync_tool, effects.sync_deliver)
    assert str(raised.value) == (
        "INVALID_ARGUMENT: store: is async: run_once cannot await it (use run_once_async)"
    )
    tool = own_call(lambda: effects.sync_tool(), effects.tool)  # noqa: PLW0108
    with pytest.raises(CheckpointError) as raised:
        run_once(MemoryStore(), BINDING, tool, effects.sync_deliver)
    assert str(raised.value).startswith("INVALID_ARGUMENT: tool: is async")
    assert effects.runs == []


@pytest.mark.parametrize("tool_shape", sorted(SYNC_TOOLS))
@pytest.mark.parametrize("deliver_shape", sorted(SYNC_DELIVERIES))
def test_run_once_runs_sync_parts_of_any_shape(tool_shape: str, deliver_shape: str) -> None:
    effects = Effects()
    tool = SYNC_TOOLS[tool_shape](effects)
    outcome = run_once(MemoryStore(), BINDING, tool, SYNC_DELIVERIES[deliver_shape](effects))
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert effects.sent == [outcome.payload]
    assert effects.runs == ["tool"]


@pytest.mark.parametrize(
    ("tool_shape", "deliver_shape"),
    [(tool, deliver) for tool in sorted(ASYNC_TOOLS) for deliver in sorted(ASYNC_DELIVERIES)],
)
def test_run_once_async_awaits_async_parts_of_any_shape(
    tool_shape: str, deliver_shape: str
) -> None:
    effects = Effects()
    tool, deliver = ASYNC_TOOLS[tool_shape](effects), ASYNC_DELIVERIES[deliver_shape](effects)
    for store in (MemoryStore(), AsyncMemoryStore()):
        effects.runs.clear()
        effects.sent.clear()
        outcome = asyncio.run(run_once_async(store, BINDING, tool, deliver))
        assert (outcome.status, outcome.ran_tool) == (RunStatus.EXECUTED_AND_DELIVERED, True)
        assert effects.runs == ["tool"]
        assert effects.sent == [{"messageId": "m-1"}] == [outcome.payload]


class AwaitableDict(dict[str, Any]):
    """A plain-looking value that is awaitable: a subclass of a type never awaitable."""

    def __await__(self) -> Any:
        yield from asyncio.sleep(0).__await__()
        return {"awaited": True}


def test_an_awaitable_subclass_of_a_plain_value_is_awaited_or_refused() -> None:
    outcome = asyncio.run(run_once_async(MemoryStore(), BINDING, AwaitableDict, Inbox()))
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.payload == {"awaited": True}
    outcome = run_once(MemoryStore(), BINDING, lambda: AwaitableDict(), Inbox())  # noqa: PLW0108
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.reason == "the tool returned an awaitable run_once cannot await"


def test_a_logger_above_debug_gets_no_record_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="tool_execution_checkpoint"):
        quiet = run_once(MemoryStore(), BINDING, Tool(), Inbox())
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="tool_execution_checkpoint"):
        loud = run_once(MemoryStore(), BINDING, Tool(), Inbox())
    assert len(caplog.records) == 5
    assert {record.levelno for record in caplog.records} == {logging.DEBUG}
    assert (quiet.status, quiet.payload) == (loud.status, loud.payload)


def test_an_awaitable_from_a_sync_tool_is_closed_and_marks_the_call_uncertain() -> None:
    async def effect() -> None:
        raise AssertionError("never awaited")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unclosed coroutine would warn
        outcome = run_once(MemoryStore(), BINDING, lambda: effect(), Inbox())  # noqa: PLW0108 - a sync callable returning a coroutine
        assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
        assert outcome.reason == "the tool returned an awaitable run_once cannot await"
        gc.collect()


def test_an_awaitable_from_a_sync_deliver_is_closed_and_not_sent() -> None:
    async def send(payload: Any) -> None:
        del payload
        raise AssertionError("never awaited")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = run_once(MemoryStore(), BINDING, Tool(), lambda payload: send(payload))  # noqa: PLW0108
        assert outcome.status is RunStatus.DELIVERY_FAILED
        assert outcome.reason == "not sent: DeliveryNotSent"
        gc.collect()


def test_a_scheduled_send_a_sync_deliver_returns_is_of_unknown_outcome() -> None:
    store, tool = MemoryStore(), Tool()
    sends: list[Any] = []

    async def send(payload: Any) -> None:
        sends.append(payload)

    async def scenario() -> Any:
        loop = asyncio.get_running_loop()
        outcome = run_once(store, BINDING, tool, lambda payload: loop.create_task(send(payload)))
        await asyncio.sleep(0)  # the task sends
        return outcome

    outcome = asyncio.run(scenario())
    assert sends == [tool.result]
    assert outcome.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    stored = store.get(checkpoint_key(BINDING)) or {}
    assert stored["status"] == Status.DELIVERING.value  # never released for a resend
    later = run_once(store, BINDING, tool, sends.append)
    assert later.status is RunStatus.NEEDS_DELIVERY_RECONCILIATION
    assert sends == [tool.result]


def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the runner's sleeps instead of sleeping."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def held_claim() -> MemoryStore:
    """A store whose record of BINDING another attempt holds, executing."""
    store = MemoryStore()
    ready = create_checkpoint(BINDING, created_at=AT)
    claim = claim_execution(ready, attempt_id="other.1", at=AT)
    assert store.create_if_absent(checkpoint_key(BINDING), ready)
    assert store.compare_and_swap(checkpoint_key(BINDING), claim.expected_revision, claim.next)
    return store


def test_by_default_a_call_in_flight_is_answered_without_sleeping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept = sleeps(monkeypatch)
    assert run_once(held_claim(), BINDING, Tool(), Inbox()).status is (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION
    )
    assert slept == []


def test_a_wait_is_rounded_up_to_whole_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = sleeps(monkeypatch)
    run_once(held_claim(), BINDING, Tool(), Inbox(), wait_seconds=0.25)
    assert slept == [0.1, 0.1, 0.1]
    slept.clear()
    run_once(held_claim(), BINDING, Tool(), Inbox(), wait_seconds=1, poll_seconds=1)
    assert slept == [1.0]
    assert all(type(seconds) is float for seconds in slept)


def test_the_async_driver_waits_with_asyncio_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    outcome = asyncio.run(run_once_async(held_claim(), BINDING, Tool(), Inbox(), wait_seconds=0.2))
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert slept == [0.1, 0.1]


class DownAsync(AsyncMemoryStore):
    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        del key, record
        raise StoreError("injected")

    async def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise StoreError("injected")


def test_the_async_driver_answers_store_unavailable_when_the_store_is_down() -> None:
    tool = Tool()
    outcome = asyncio.run(run_once_async(DownAsync(), BINDING, tool, Inbox()))
    assert outcome.status is RunStatus.STORE_UNAVAILABLE
    assert outcome.record is None
    assert tool.runs == 0


def test_the_async_driver_stores_the_hosts_error_payload() -> None:
    inbox = Inbox()
    asyncio.run(
        run_once_async(
            MemoryStore(),
            BINDING,
            Tool(error=KeyError(SECRET)),
            inbox,
            on_tool_error=lambda error: {"failed": type(error).__name__},
        )
    )
    assert inbox.received == [{"failed": "KeyError"}]


def test_the_log_names_each_step_and_an_absent_record(caplog: pytest.LogCaptureFixture) -> None:
    key = checkpoint_key(BINDING)
    with caplog.at_level(logging.DEBUG, logger="tool_execution_checkpoint"):
        run_once(MemoryStore(), BINDING, Tool(), Inbox())
        run_once(Down(), BINDING, Tool(), Inbox())
    lines = [record.getMessage() for record in caplog.records]
    assert lines[:2] == [
        f"run the tool key={key} status=executing revision=1",
        f"swap the result and the delivery claim key={key} status=executing revision=1",
    ]
    assert lines[4] == f"finished key={key} status=delivered revision=3"
    assert lines[5] == f"read back a write of unknown outcome key={key} status=absent revision=0"


class Down(MemoryStore):
    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        del key, record
        raise StoreError("injected")

    def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise StoreError("injected")


def test_a_finished_call_takes_no_more_answers_and_holds_no_write() -> None:
    protocol = HostProtocol(BINDING)
    request: Any
    request, state = protocol.start("a" * 32)
    answers = iter([True, Returned({"ok": 1}), True, None, True])
    while not isinstance(request, RunOutcome):
        request, state = protocol.step(state, next(answers))
    assert request.status is RunStatus.EXECUTED_AND_DELIVERED
    assert state.pending is None
    with pytest.raises(CheckpointError) as raised:
        protocol.step(state, True)
    assert str(raised.value) == "INVALID_ARGUMENT: state: the call is finished"


class Closable:
    """An awaitable that records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    def __await__(self) -> Any:
        raise AssertionError("never awaited")
        yield  # pragma: no cover - makes this a generator

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("part", ["tool", "deliver"])
def test_an_awaitable_that_run_once_cannot_await_is_closed(part: str) -> None:
    awaitable = Closable()
    tool: Any = (lambda: awaitable) if part == "tool" else Tool()
    deliver: Any = (lambda _payload: awaitable) if part == "deliver" else Inbox()
    run_once(MemoryStore(), BINDING, tool, deliver)
    assert awaitable.closed


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_record_is_kept_under_the_key_the_host_passes(driver: str) -> None:
    store = MemoryStore()
    outcome = call_driver(driver, store, {"key": "my-key"})
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert list(store.keys()) == ["my-key"]


def test_a_store_without_the_store_methods_is_refused() -> None:
    with pytest.raises(CheckpointError) as raised:
        run_once(object(), BINDING, Tool(), Inbox())  # type: ignore[arg-type]
    assert str(raised.value) == (
        "INVALID_ARGUMENT: store: must have create_if_absent, get and compare_and_swap"
    )


class PreDurableStore(MemoryStore):
    """A store written for the contract before compare_and_swap took ``durable``."""

    def compare_and_swap(  # type: ignore[override]
        self, key: str, expected_revision: int, record: Checkpoint
    ) -> bool:
        return super().compare_and_swap(key, expected_revision, record)


class KeywordsStore(MemoryStore):
    """A store whose compare_and_swap takes any keyword: it takes ``durable``."""

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, **options: bool
    ) -> bool:
        return super().compare_and_swap(key, expected_revision, record, **options)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_store_whose_swap_takes_no_durable_is_refused_before_the_tool_runs(
    driver: str,
) -> None:
    store, tool = PreDurableStore(), Tool()
    with pytest.raises(CheckpointError) as raised:
        call_driver(driver, store, {"tool": tool})
    assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, "store")
    assert "durable" in str(raised.value)
    assert tool.runs == 0
    assert list(store.keys()) == []
    outcome = call_driver(driver, KeywordsStore(), {})
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED


def test_no_wait_takes_any_poll_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = sleeps(monkeypatch)
    outcome = run_once(held_claim(), BINDING, Tool(), Inbox(), wait_seconds=0, poll_seconds=0)
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert slept == []


def test_by_default_the_async_driver_answers_a_call_in_flight_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    asyncio.run(run_once_async(held_claim(), BINDING, Tool(), Inbox()))
    assert slept == []


class FaultyReadsAsync(AsyncMemoryStore):
    """Writes land; every read fails."""

    async def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise StoreError("injected")


class FaultyReads(MemoryStore):
    def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise StoreError("injected")


def test_both_drivers_answer_a_failing_read_alike() -> None:
    sync_store, async_store = FaultyReads(), FaultyReadsAsync()
    for store in (sync_store, async_store.inner):
        ready = create_checkpoint(BINDING, created_at=AT)
        assert store.create_if_absent(checkpoint_key(BINDING), ready)
    sync = run_once(sync_store, BINDING, Tool(), Inbox())
    asynchronous = asyncio.run(run_once_async(async_store, BINDING, Tool(), Inbox()))
    assert (sync.status, sync.reason, sync.ran_tool) == (
        asynchronous.status,
        asynchronous.reason,
        asynchronous.ran_tool,
    )
    assert sync.status is RunStatus.STORE_UNAVAILABLE


# --- a tool that stopped before any effect -------------------------------------------------


class Approval(Exception):
    """A framework's request for approval, raised before the tool acts."""


def test_a_tool_that_did_not_run_releases_its_claim_and_the_next_call_runs_it() -> None:
    store, inbox = MemoryStore(), Inbox()
    with pytest.raises(ToolDidNotRun):
        run_once(store, BINDING, Tool(error=ToolDidNotRun()), inbox)
    stored = store.get(checkpoint_key(BINDING))
    assert stored is not None
    assert stored["status"] == "released"
    assert stored["execution"] is None
    tool = Tool()
    outcome = run_once(store, BINDING, tool, inbox)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert tool.runs == 1
    assert inbox.received == [tool.result]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_declared_not_run_exception_is_re_raised_after_the_release(driver: str) -> None:
    store = MemoryStore()
    with pytest.raises(Approval):
        call_driver(driver, store, {"tool": Tool(error=Approval()), "not_run": (Approval,)})
    assert (store.get(checkpoint_key(BINDING)) or {})["status"] == "released"


def test_not_run_is_checked_before_pass_through() -> None:
    store = MemoryStore()
    with pytest.raises(Approval):
        run_once(
            store,
            BINDING,
            Tool(error=Approval()),
            Inbox(),
            not_run=(Approval,),
            pass_through=(Approval,),
        )
    assert (store.get(checkpoint_key(BINDING)) or {})["status"] == "released"


def test_the_machine_reports_a_release_with_its_reason() -> None:
    protocol = HostProtocol(BINDING)
    request: Any
    request, state = protocol.start("a" * 32)
    answers = iter([True, Raised(ToolDidNotRun()), True])
    while not isinstance(request, RunOutcome):
        request, state = protocol.step(state, next(answers))
    assert (request.status, request.reason, request.ran_tool) == (
        RunStatus.RELEASED,
        "not run: ToolDidNotRun",
        True,
    )
    assert request.record is not None
    assert request.record.status is Status.RELEASED
    assert state.reraise


def test_a_release_that_cannot_be_recorded_needs_reconciliation() -> None:
    store = SwapsFailFrom(Status.EXECUTING, Status.RELEASED)
    with pytest.raises(ToolDidNotRun):
        run_once(store, BINDING, Tool(error=ToolDidNotRun()), Inbox(), write_budget=0.1)
    store.failing = False
    assert (store.get(checkpoint_key(BINDING)) or {})["status"] == "executing"
    outcome = HostProtocol(BINDING, write_budget=0)
    request: Any
    request, state = outcome.start("b" * 32)
    answers = iter([True, Raised(ToolDidNotRun()), StoreFault(), StoreFault()] + [StoreFault()] * 6)
    while not isinstance(request, RunOutcome):
        request, state = outcome.step(state, next(answers))
    assert request.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert request.reason == "the tool did not run, but its release could not be recorded"


def test_a_release_an_operator_overtook_reports_the_operators_record() -> None:
    def uncertain(current: Checkpoint) -> Any:
        assert current.execution is not None
        return mark_execution_uncertain(
            current, attempt_id=current.execution.attempt_id, at=AT, reason="operator"
        )

    store = OperatorFirst(Status.RELEASED, uncertain)
    with pytest.raises(ToolDidNotRun):
        run_once(store, BINDING, Tool(error=ToolDidNotRun()), Inbox())
    assert (store.get(checkpoint_key(BINDING)) or {})["status"] == "uncertain"


class BareAwaitable:
    """An awaitable with no close method (not a coroutine)."""

    def __await__(self) -> Any:
        raise AssertionError("never awaited")
        yield  # pragma: no cover - makes this a generator


def test_an_awaitable_without_close_is_refused_as_not_run() -> None:
    outcome = run_once(MemoryStore(), BINDING, lambda: BareAwaitable(), Inbox())  # noqa: PLW0108
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.reason == "the tool returned an awaitable run_once cannot await"


def test_a_result_or_a_mark_that_cannot_be_recorded_says_so() -> None:
    failing = SwapsFailFrom(Status.EXECUTING, Status.DELIVERING)
    stuck = run_once(failing, BINDING, Tool(), Inbox(), write_budget=0.1)
    assert stuck.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert stuck.reason == "the tool ran but its result could not be stored"
    unknown = Tool(error=ToolOutcomeUnknown("the gateway timed out"))
    failing = SwapsFailFrom(Status.EXECUTING, Status.UNCERTAIN)
    doubt = run_once(failing, BINDING, unknown, Inbox(), write_budget=0.1)
    assert doubt.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert doubt.reason == "the gateway timed out"


# --- a store that posts the delivered mark ---------------------------------------------------


class PostingMemoryStore(MemoryStore):
    """Posts a non-durable swap: applies it (or drops it, ``lose``) and answers None; the
    first ``failures`` posts raise a store error after applying nothing."""

    def __init__(self, *, lose: bool = False, failures: int = 0) -> None:
        super().__init__()
        self.lose, self.failures, self.posts = lose, failures, 0

    def post_compare_and_swap(self, key: str, revision: int, record: Checkpoint) -> None:
        self.posts += 1
        if self.failures:
            self.failures -= 1
            raise OutcomeUnknownError("the connection dropped while sending")
        if not self.lose:
            self.compare_and_swap(key, revision, record, durable=False)


class AsyncPostingMemoryStore(AsyncMemoryStore):
    def __init__(self, inner: PostingMemoryStore) -> None:
        super().__init__()
        self.inner = self.posting = inner

    async def post_compare_and_swap(self, key: str, revision: int, record: Checkpoint) -> None:
        await asyncio.sleep(0)
        self.posting.post_compare_and_swap(key, revision, record)


POSTED_BINDING = Binding("runner", "posted", "send_email", "1", "sha256:00")


def _stored_status(store: MemoryStore) -> str:
    stored = store.get(checkpoint_key(POSTED_BINDING))
    assert stored is not None
    return str(stored["status"])


def _posting_run(store: PostingMemoryStore, driver: str) -> RunOutcome:
    binding = POSTED_BINDING
    if driver == "sync":
        return run_once(store, binding, lambda: "r", lambda _payload: None, write_budget=0)

    async def main() -> RunOutcome:
        posting = AsyncPostingMemoryStore(store)
        return await run_once_async(posting, binding, lambda: "r", _sent, write_budget=0)

    return asyncio.run(main())


async def _sent(payload: object) -> None:
    del payload


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("lose", [False, True], ids=["lands", "lost"])
def test_a_posting_store_gets_the_mark_posted(driver: str, lose: bool) -> None:
    store = PostingMemoryStore(lose=lose)
    outcome = _posting_run(store, driver)
    assert store.posts == 1
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason == "the delivered mark was sent without waiting for the store's answer"
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERING
    assert _stored_status(store) == ("delivering" if lose else "delivered")
    again = _posting_run(store, driver)
    assert again.status is (
        RunStatus.NEEDS_DELIVERY_RECONCILIATION if lose else RunStatus.ALREADY_DELIVERED
    )
    assert not again.ran_tool


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_post_that_fails_is_read_back_and_sent_again(driver: str) -> None:
    store = PostingMemoryStore(failures=1)
    outcome = _posting_run(store, driver)
    assert store.posts == 2  # read back unchanged, then posted again
    assert outcome.reason == "the delivered mark was sent without waiting for the store's answer"
    assert _stored_status(store) == "delivered"
