"""CallPolicy: a call's options, checked once, as run_once, run_once_async and the machine
take them."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from typing import Any

import pytest

import tool_execution_checkpoint as tec
from tool_execution_checkpoint import (
    Binding,
    CallPolicy,
    CheckpointError,
    ErrorCode,
    HostProtocol,
    MemoryStore,
    RunOutcome,
    RunStatus,
    StuckCall,
    checkpoint_key,
    create_claimed,
    run_once,
    run_once_async,
)
from tool_execution_checkpoint.runner import PolicyOptions, call_policy

SECRET = "sk-live-SECRET-token"
BINDING = Binding("tenant", "call-1", "send_email", "1", "sha256:00")


class Tool:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> dict[str, Any]:
        self.runs += 1
        return {"sent": True}


def drive(driver: str, store: MemoryStore, tool: Tool, **arguments: Any) -> RunOutcome:
    if driver == "sync":
        return run_once(store, BINDING, tool, lambda _: None, **arguments)
    return asyncio.run(run_once_async(store, BINDING, tool, lambda _: None, **arguments))


def test_the_keywords_are_the_policys_fields() -> None:
    given = {spec.name for spec in dataclasses.fields(CallPolicy) if spec.init}
    assert set(PolicyOptions.__annotations__) == given
    assert tec.CallPolicy is CallPolicy
    assert "CallPolicy" in tec.__all__


class Failing(Tool):
    def __call__(self) -> dict[str, Any]:
        super().__call__()
        raise RuntimeError(SECRET)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_policy_drives_a_call_as_its_keywords_do(driver: str) -> None:
    policy = CallPolicy(on_tool_error=lambda error: {"failed": type(error).__name__})
    by_policy, by_keyword = MemoryStore(), MemoryStore()
    outcome = drive(driver, by_policy, Failing(), policy=policy)
    keyworded = drive(driver, by_keyword, Failing(), on_tool_error=policy.on_tool_error)
    assert outcome.status is keyworded.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.payload == keyworded.payload == {"failed": "RuntimeError"}
    assert outcome.reason == keyworded.reason == "the tool raised RuntimeError"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_keyword_given_with_a_policy_must_agree_with_it(driver: str) -> None:
    policy = CallPolicy(write_budget=5)
    store, tool = MemoryStore(), Tool()
    with pytest.raises(CheckpointError) as refused:
        drive(driver, store, tool, policy=policy, write_budget=6)
    assert str(refused.value) == (
        "INVALID_ARGUMENT: write_budget: conflicts with the policy given: set it in the policy"
    )
    assert (len(store), tool.runs) == (0, 0)
    agreeing = drive(driver, store, tool, policy=policy, write_budget=5.0, not_run=policy.not_run)
    assert agreeing.status is RunStatus.EXECUTED_AND_DELIVERED


def test_a_policy_that_is_not_one_and_an_unknown_keyword_are_refused() -> None:
    with pytest.raises(CheckpointError) as refused:
        call_policy({"write_budget": 1}, {})  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.field) == (ErrorCode.INVALID_ARGUMENT, "policy")
    with pytest.raises(TypeError, match="'polls' is not a call option"):
        call_policy(None, {"polls": 2})
    with pytest.raises(TypeError, match="'retries' is not a call option"):
        call_policy(CallPolicy(), {"retries": 2})


BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"not_sent": ConnectionRefusedError}, "not_sent: must be a tuple of exception types"),
    ({"pass_through": ("KeyboardInterrupt",)}, "pass_through: must be a tuple of exception types"),
    ({"not_run": (int,)}, "not_run: must be a tuple of exception types"),
    ({"poll_seconds": -0.5}, "poll_seconds: must be a number of seconds from 0 to 1e6"),
    ({"write_budget": 1e7}, "write_budget: must be a number of seconds from 0 to 1e6"),
    ({"on_tool_error": "error"}, "on_tool_error: must be callable"),
    ({"reconcile": 0}, "reconcile: must be callable"),
    ({"clock": None}, "clock: must be callable"),
    ({"monotonic": 1.0}, "monotonic: must be callable"),
    ({"new_id": "token"}, "new_id: must be callable"),
    ({"logger": "tool_execution_checkpoint"}, "logger: must have isEnabledFor, debug and error"),
    ({"max_payload_bytes": 0}, "max_payload_bytes: must be an int from 1 to 10485760"),
    ({"max_payload_bytes": 1.5}, "max_payload_bytes: must be an int from 1 to 10485760"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_a_bad_option_is_refused_when_the_policy_is_built(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(CheckpointError) as refused:
        CallPolicy(**options)
    assert str(refused.value) == f"INVALID_ARGUMENT: {message}"


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_a_bad_option_is_refused_before_anything_runs(
    driver: str, options: dict[str, Any], message: str
) -> None:
    store, tool = MemoryStore(), Tool()
    with pytest.raises(CheckpointError) as refused:
        drive(driver, store, tool, **options)
    assert str(refused.value) == f"INVALID_ARGUMENT: {message}"
    assert (len(store), tool.runs) == (0, 0)


def test_exception_lists_are_kept_as_tuples_and_seconds_as_floats() -> None:
    policy = CallPolicy(not_sent=[ValueError], wait_seconds=1, poll_seconds=1)  # type: ignore[arg-type]
    assert policy.not_sent == (ValueError,)
    assert (policy.wait_seconds, policy.poll_seconds) == (1.0, 1.0)
    assert type(policy.wait_seconds) is float


@pytest.mark.parametrize(
    ("wait", "poll", "polls"), [(0, 0.1, 0), (0.1, 0.1, 1), (0.2, 0.1, 2), (0.25, 0.1, 3)]
)
def test_the_number_of_polls_is_the_wait_over_the_poll_rounded_up(
    wait: float, poll: float, polls: int
) -> None:
    policy = CallPolicy(wait_seconds=wait, poll_seconds=poll)
    assert policy.polls == polls
    assert dataclasses.replace(policy, wait_seconds=0).polls == 0


def test_the_machine_takes_a_policy_or_its_keywords_and_asks_a_hook_only_if_there_is_one() -> None:
    def hook(stuck: StuckCall) -> None:
        del stuck

    policy = CallPolicy(write_budget=0, reconcile=hook)
    assert HostProtocol(BINDING, policy).reconciles
    assert not HostProtocol(BINDING, write_budget=0).reconciles
    assert HostProtocol(BINDING, write_budget=0, reconciles=True).reconciles
    assert not HostProtocol(BINDING, policy, reconciles=False).reconciles
    assert HostProtocol(BINDING, write_budget=0).policy == CallPolicy(write_budget=0)
    with pytest.raises(CheckpointError) as refused:
        HostProtocol(BINDING, policy, write_budget=1)
    assert refused.value.field == "write_budget"


def test_a_policys_repr_shows_its_numbers_and_types_never_what_a_hook_holds() -> None:
    def lookup(stuck: StuckCall, token: str) -> None:
        del stuck, token

    policy = CallPolicy(
        reconcile=functools.partial(lookup, token=SECRET),
        clock=functools.partial(str, SECRET),
        logger=logging.getLogger(f"tenant.{SECRET}"),
        pass_through=(KeyboardInterrupt,),
        wait_seconds=2,
    )
    shown = repr(policy)
    assert SECRET not in shown
    assert SECRET not in repr(HostProtocol(BINDING, policy))
    assert shown == (
        "CallPolicy(on_tool_error=<default>, not_sent=(DeliveryNotSent, "
        "ConnectionRefusedError), pass_through=(KeyboardInterrupt,), not_run=(ToolDidNotRun,), "
        "wait_seconds=2.0, poll_seconds=0.1, write_budget=30.0, reconcile=<given>, "
        "clock=<given>, monotonic=<default>, new_id=<default>, max_payload_bytes=65536, "
        "logger=<given>)"
    )


def test_a_policy_is_frozen_and_shared_between_calls() -> None:
    policy = CallPolicy(write_budget=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.write_budget = 1  # type: ignore[misc]
    store = MemoryStore()
    claimed = create_claimed(BINDING, attempt_id="other.1", at="2026-01-01T00:00:00Z").next
    assert store.create_if_absent(checkpoint_key(BINDING), claimed)
    for _ in range(2):
        outcome = run_once(store, BINDING, Tool(), lambda _: None, policy=policy)
        assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert hash(policy) == hash(CallPolicy(write_budget=0))
