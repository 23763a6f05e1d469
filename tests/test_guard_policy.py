"""The guard's call options as one CallPolicy: checkpointed and ToolGuard build the policy
once, when the guard is built, and every call runs under it; the option keywords are its
fields, and a keyword that contradicts a policy given with it is refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from test_write_budget import RESULT, GoesAway
from tool_execution_checkpoint import (
    CallNeedsReconciliation,
    CallPolicy,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    Status,
    StuckCall,
    ToolGuard,
    ToolOutcomeUnknown,
    checkpointed,
    current_idempotency_key,
    tool_call,
)


def test_a_policys_reconcile_hook_settles_the_call_a_dead_attempt_left_unknown() -> None:
    runs: list[str] = []
    asked: list[StuckCall] = []
    keys: list[str] = []

    def find_charge(stuck: StuckCall) -> Found | None:
        asked.append(stuck)
        return Found({"receipt": "rcpt-found"}) if stuck.idempotency_key in keys else None

    @checkpointed(MemoryStore(), name="charge", policy=CallPolicy(reconcile=find_charge))
    def charge(card: str) -> dict[str, str]:
        runs.append(card)
        keys.append(current_idempotency_key())
        raise ToolOutcomeUnknown("the processor timed out after taking the charge")

    with tool_call("c-1"), pytest.raises(CallNeedsReconciliation):
        charge("4242")  # its own claim: the hook is not asked
    with tool_call("c-1"):
        assert charge("4242") == {"receipt": "rcpt-found"}
        assert charge("4242") == {"receipt": "rcpt-found"}
    assert runs == ["4242"]
    assert len(asked) == 1


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_policys_write_budget_and_logger_reach_the_call(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The budget spent on a store that went away: the framework gets the live result, and
    the ERROR line goes to the policy's logger (no guard keyword carries a logger)."""
    store = GoesAway(Status.EXECUTING, 60.0)
    logger = logging.getLogger("tool_execution_checkpoint.test.guard_policy")
    policy = CallPolicy(write_budget=0.2, logger=logger)
    runs: list[str] = []

    def charge(card: str) -> dict[str, Any]:
        runs.append(card)
        return dict(RESULT)

    async def charge_async(card: str) -> dict[str, Any]:
        return charge(card)

    with caplog.at_level(logging.ERROR), tool_call("c-1"):
        if driver == "sync":
            value = checkpointed(store, name="charge", policy=policy)(charge)("4242")
        else:
            guarded = checkpointed(store, name="charge", policy=policy)(charge_async)
            value = asyncio.run(guarded("4242"))
    assert value == RESULT
    assert runs == ["4242"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.name for r in errors] == [logger.name]
    assert "could not be stored" in errors[0].getMessage()


def test_the_guards_options_hold_what_its_calls_run_with() -> None:
    def hook(stuck: StuckCall) -> None:
        del stuck

    policy = CallPolicy(write_budget=5, wait_seconds=2, reconcile=hook, not_run=(KeyError,))
    guard = ToolGuard(MemoryStore(), "charge", policy=policy)
    assert (guard.write_budget, guard.wait_seconds, guard.reconcile) == (5.0, 2.0, hook)
    assert guard.not_run == (KeyError,)
    assert guard.policy is policy
    same = ToolGuard(MemoryStore(), "charge", write_budget=5, policy=policy)  # agrees
    assert same.write_budget == 5.0
    plain = ToolGuard(MemoryStore(), "charge", poll_seconds=0.5)
    assert (plain.poll_seconds, plain.write_budget, plain.policy) == (0.5, 30.0, None)


def test_an_option_that_contradicts_the_policy_or_a_bad_one_is_refused_when_built() -> None:
    store = MemoryStore()

    def tool() -> str:
        return "done"

    given = CallPolicy(wait_seconds=1)
    refused: list[tuple[Callable[[], object], str]] = [
        (lambda: ToolGuard(store, "t", write_budget=1, policy=CallPolicy()), "write_budget"),
        (lambda: checkpointed(store, wait_seconds=3, policy=given)(tool), "wait_seconds"),
        (lambda: ToolGuard(store, "t", wait_seconds=-1), "wait_seconds"),
        (lambda: ToolGuard(store, "t", policy=CallPolicy(on_tool_error=repr)), "on_tool_error"),
        (lambda: ToolGuard(store, "t", policy=object()), "policy"),  # type: ignore[arg-type]
    ]
    for build, field in refused:
        with pytest.raises(CheckpointError) as caught:
            build()
        assert caught.value.code is ErrorCode.INVALID_ARGUMENT
        assert caught.value.field == field
