"""Operators and live workers: one answer per call.

An operator who acts on a claim whose worker is still running the tool (the CLI refuses a
claim younger than its minimum age unless told otherwise; these operators were told) never
makes a call answer twice: the owning attempt stores its exact result over an uncertain
mark, and a result an operator stored first is the one every caller gets, the live caller
included, whose outcome says it was overtaken.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    Listing,
    MemoryStore,
    Status,
    checkpoint_key,
    checkpointed,
    complete_delivery,
    complete_execution,
    mark_execution_uncertain,
    tool_call,
)
from tool_execution_checkpoint.runner import (
    CONFIRMED_NOT_SENT,
    OVERTAKEN,
    RunStatus,
    ToolOutcomeUnknown,
    run_once,
    run_once_async,
)

BINDING = Binding("operators", "call-1", "charge_card", "1", "sha256:00")
KEY = checkpoint_key(BINDING)
AT = "2026-12-07T00:00:00Z"
LIVE = {"receipt": "live-1"}
OPERATORS = {"receipt": "found-by-the-operator"}


def _stored(store: MemoryStore, key: str = KEY) -> Checkpoint:
    raw = store.get(key)
    assert raw is not None
    return Checkpoint.from_dict(raw)


def operator_marks_uncertain(store: MemoryStore, key: str = KEY) -> None:
    record = _stored(store, key)
    assert record.execution is not None
    step = mark_execution_uncertain(
        record, attempt_id=record.execution.attempt_id, at=AT, reason="operator: worker stuck?"
    )
    assert store.compare_and_swap(key, step.expected_revision, step.next)


def operator_completes(store: MemoryStore, payload: Any, key: str = KEY) -> None:
    record = _stored(store, key)
    assert record.execution is not None
    step = complete_execution(record, attempt_id=record.execution.attempt_id, at=AT, result=payload)
    assert store.compare_and_swap(key, step.expected_revision, step.next)


def _executing_key(store: MemoryStore) -> str:
    """The key of the one record executing (a guarded call's key is its own digest)."""
    (row,) = store.list_records(Listing([Status.EXECUTING]))
    return row.key


def _run(driver: str, store: MemoryStore, tool: Any, inbox: list[Any]) -> Any:
    if driver == "sync":
        return run_once(store, BINDING, tool, inbox.append)

    async def tool_async() -> Any:
        return tool()

    return asyncio.run(run_once_async(store, BINDING, tool_async, inbox.append))


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_the_owning_attempt_stores_its_exact_result_over_an_uncertain_mark(driver: str) -> None:
    store, inbox, runs = MemoryStore(), list[Any](), list[int]()

    def tool() -> Any:
        runs.append(1)
        operator_marks_uncertain(store)  # while the tool runs
        return LIVE

    outcome = _run(driver, store, tool, inbox)
    assert (outcome.status, outcome.reason) == (RunStatus.EXECUTED_AND_DELIVERED, None)
    assert outcome.unstored is None
    assert outcome.payload == LIVE
    assert inbox == [LIVE]
    record = _stored(store)
    assert record.status is Status.DELIVERED
    assert record.execution is not None
    assert record.execution.uncertain is not None  # the mark stays on the record
    assert runs == [1]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_result_an_operator_stored_first_is_the_one_answer(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    store, inbox, runs = MemoryStore(), list[Any](), list[int]()

    def tool() -> Any:
        runs.append(1)
        operator_completes(store, OPERATORS)
        return LIVE

    with caplog.at_level(logging.ERROR, logger="tool_execution_checkpoint"):
        outcome = _run(driver, store, tool, inbox)
    assert (outcome.status, outcome.reason) == (RunStatus.EXECUTED_AND_DELIVERED, OVERTAKEN)
    assert outcome.payload == OPERATORS
    assert outcome.unstored is not None
    assert outcome.unstored.payload == LIVE
    assert inbox == [OPERATORS]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert KEY in errors[0]
    assert "live-1" not in errors[0]
    assert runs == [1]


def test_the_guard_hands_the_live_caller_and_every_replay_the_operators_result() -> None:
    store = MemoryStore()
    runs: list[str] = []

    @checkpointed(store, namespace="ops")
    def charge(card: str) -> dict[str, str]:
        runs.append(card)
        key = _executing_key(store)
        operator_completes(store, {"returned": OPERATORS}, key)
        return LIVE

    with tool_call("c-1"):
        first = charge("4242")
    with tool_call("c-1"):
        replay = charge("4242")
    assert first == replay == OPERATORS
    assert runs == ["4242"]


def test_the_guard_keeps_the_live_result_over_an_uncertain_mark() -> None:
    store = MemoryStore()
    runs: list[str] = []

    @checkpointed(store, namespace="ops")
    def charge(card: str) -> dict[str, str]:
        runs.append(card)
        operator_marks_uncertain(store, _executing_key(store))
        return LIVE

    with tool_call("c-1"):
        first = charge("4242")
    with tool_call("c-1"):
        replay = charge("4242")
    assert first == replay == LIVE
    assert runs == ["4242"]


def test_a_confirmed_delivery_whose_send_is_then_refused_is_named_with_its_payload() -> None:
    store = MemoryStore()

    def refuse_after_the_operator_confirmed(payload: Any) -> None:
        assert payload == LIVE
        record = _stored(store)
        assert record.delivery is not None
        step = complete_delivery(record, delivery_id=record.delivery.delivery_id, at=AT)
        assert store.compare_and_swap(KEY, step.expected_revision, step.next)
        raise ConnectionRefusedError("the provider refused the connection")

    outcome = run_once(store, BINDING, lambda: LIVE, refuse_after_the_operator_confirmed)
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
        CONFIRMED_NOT_SENT,
    )
    assert outcome.payload == LIVE  # the host can send it itself
    assert _stored(store).status is Status.DELIVERED


def test_the_guard_hands_an_unknown_outcomes_caller_the_operators_result() -> None:
    store = MemoryStore()
    runs: list[str] = []

    @checkpointed(store, namespace="ops")
    def charge(card: str) -> int:
        runs.append(card)
        operator_completes(store, {"returned": 5}, _executing_key(store))
        raise ToolOutcomeUnknown("the gateway timed out")

    with tool_call("c-1"):
        first = charge("4242")
    with tool_call("c-1"):
        replay = charge("4242")
    assert first == replay == 5
    assert runs == ["4242"]
