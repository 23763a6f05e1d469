"""The reconcile hook: a stuck call settles itself through the table's own transitions.

A call that finds an execution claimed by another attempt (its worker died, or it was
marked uncertain) asks the host's hook once. Found: the effect's result is stored for the
claim's attempt and delivered. NotThere: the host's declared answer is stored and
delivered; the tool never runs again. None, or an exception: left for operators.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from test_runner import Closable
from tool_execution_checkpoint import (
    Binding,
    CallNotAnswered,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    NotThere,
    Status,
    StuckCall,
    checkpoint_key,
    checkpointed,
    create_claimed,
    current_idempotency_key,
    mark_execution_uncertain,
    tool_call,
)
from tool_execution_checkpoint.identity import idempotency_key_of
from tool_execution_checkpoint.runner import RunStatus, run_once, run_once_async

BINDING = Binding("hook", "call-7", "charge_card", "1", "sha256:00")
KEY = checkpoint_key(BINDING)
AT = "2026-12-07T00:00:00Z"
RECEIPT: dict[str, Any] = {"receipt": "rcpt-9"}


def stuck_store(*, uncertain: bool = False) -> MemoryStore:
    """A store holding the call claimed by a worker that died (or marked it uncertain)."""
    store = MemoryStore()
    claimed = create_claimed(BINDING, attempt_id="dead-worker.1", at=AT).next
    assert store.create_if_absent(KEY, claimed)
    if uncertain:
        step = mark_execution_uncertain(
            claimed, attempt_id="dead-worker.1", at=AT, reason="timed out"
        )
        assert store.compare_and_swap(KEY, step.expected_revision, step.next)
    return store


class Hook:
    def __init__(self, answer: Any = None, error: BaseException | None = None) -> None:
        self.answer, self.error = answer, error
        self.asked: list[StuckCall] = []

    def __call__(self, stuck: StuckCall) -> Any:
        self.asked.append(stuck)
        if self.error is not None:
            raise self.error
        return self.answer


def never_run() -> Any:
    raise AssertionError("the tool ran again")


def stored(store: MemoryStore) -> Checkpoint:
    raw = store.get(KEY)
    assert raw is not None
    return Checkpoint.from_dict(raw)


@pytest.mark.parametrize("uncertain", [False, True])
def test_found_stores_and_delivers_the_effects_result(uncertain: bool) -> None:
    store, hook, inbox = stuck_store(uncertain=uncertain), Hook(Found(RECEIPT)), list[Any]()
    outcome = run_once(store, BINDING, never_run, inbox.append, reconcile=hook)
    assert (outcome.status, outcome.reason) == (
        RunStatus.DELIVERED_STORED_RESULT,
        "reconciled: found",
    )
    assert inbox == [RECEIPT]
    record = stored(store)
    assert record.status is Status.DELIVERED
    assert record.execution is not None
    assert record.execution.attempt_id == "dead-worker.1"  # settled for the claim's attempt
    (asked,) = hook.asked
    assert asked.key == KEY
    assert asked.binding == BINDING
    assert asked.status is (Status.UNCERTAIN if uncertain else Status.EXECUTING)
    assert asked.claimed_at == AT
    assert asked.uncertain_reason == ("timed out" if uncertain else None)
    assert asked.idempotency_key == idempotency_key_of(BINDING.namespace, BINDING.call_id)
    assert BINDING.call_id not in asked.idempotency_key


def test_not_there_delivers_the_declared_answer_and_never_reruns() -> None:
    declared: dict[str, Any] = {"error": "not done: the charge was not found; ask again to retry"}
    store, inbox = stuck_store(), list[Any]()
    outcome = run_once(store, BINDING, never_run, inbox.append, reconcile=Hook(NotThere(declared)))
    assert (outcome.status, outcome.reason) == (
        RunStatus.DELIVERED_STORED_RESULT,
        "reconciled: not there",
    )
    assert inbox == [declared]
    again = run_once(store, BINDING, never_run, inbox.append, reconcile=Hook(Found(RECEIPT)))
    assert again.status is RunStatus.ALREADY_DELIVERED  # one answer: the hook is not asked
    assert inbox == [declared]


@pytest.mark.parametrize(
    ("make_hook", "reason"),
    [
        (lambda: Hook(None), "the reconcile hook could not tell"),
        (
            lambda: Hook(error=ValueError("SECRET lookup failed")),
            "the reconcile hook raised ValueError",
        ),
        (lambda: Hook({"receipt": "a bare dict"}), "the reconcile hook raised TypeError"),
    ],
)
def test_a_hook_that_cannot_tell_leaves_the_record_for_operators(
    make_hook: Callable[[], Hook], reason: str
) -> None:
    hook = make_hook()
    store, inbox = stuck_store(), list[Any]()
    before = store.get(KEY)
    outcome = run_once(store, BINDING, never_run, inbox.append, reconcile=hook)
    assert (outcome.status, outcome.reason) == (RunStatus.NEEDS_EXECUTION_RECONCILIATION, reason)
    assert store.get(KEY) == before
    assert inbox == []
    assert len(hook.asked) == 1


def test_a_cancelled_hook_propagates_and_leaves_the_record() -> None:
    store = stuck_store()
    before = store.get(KEY)
    with pytest.raises(KeyboardInterrupt):
        run_once(
            store, BINDING, never_run, lambda _: None, reconcile=Hook(error=KeyboardInterrupt())
        )
    assert store.get(KEY) == before


def test_an_async_hook_settles_an_async_call() -> None:
    store, inbox = stuck_store(), list[Any]()

    async def hook(stuck: StuckCall) -> Found:
        assert stuck.status is Status.EXECUTING
        await asyncio.sleep(0)
        return Found(RECEIPT)

    async def tool() -> Any:
        never_run()

    outcome = asyncio.run(run_once_async(store, BINDING, tool, inbox.append, reconcile=hook))
    assert outcome.status is RunStatus.DELIVERED_STORED_RESULT
    assert inbox == [RECEIPT]


def test_an_async_hook_that_raises_leaves_the_record_for_operators() -> None:
    store = stuck_store()
    before = store.get(KEY)

    async def hook(stuck: StuckCall) -> Found:
        raise LookupError(f"the provider has no charge {stuck.idempotency_key}")

    async def tool() -> Any:
        never_run()

    outcome = asyncio.run(run_once_async(store, BINDING, tool, lambda _: None, reconcile=hook))
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the reconcile hook raised LookupError",
    )
    assert store.get(KEY) == before


def test_a_found_payload_that_cannot_be_stored_is_left_for_operators() -> None:
    store = stuck_store()
    before = store.get(KEY)
    hook = Hook(Found({"receipt": {1, 2}}))  # a set is not JSON
    outcome = run_once(store, BINDING, never_run, lambda _: None, reconcile=hook)
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the reconcile hook's result could not be stored: PAYLOAD_NOT_JSON",
    )
    assert store.get(KEY) == before


def test_run_once_refuses_an_async_hook_before_anything_runs() -> None:
    async def hook(stuck: StuckCall) -> None:
        del stuck

    store = stuck_store()
    with pytest.raises(CheckpointError) as refused:
        run_once(store, BINDING, never_run, lambda _: None, reconcile=hook)
    assert (refused.value.code, refused.value.field) == (ErrorCode.INVALID_ARGUMENT, "reconcile")


def test_an_awaitable_a_sync_hook_returns_is_closed_and_cannot_tell() -> None:
    pending = Closable()
    store = stuck_store()
    hook: Any = lambda _: pending  # noqa: E731 (a sync function returning an awaitable)
    outcome = run_once(store, BINDING, never_run, lambda _: None, reconcile=hook)
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the reconcile hook raised TypeError",
    )
    assert pending.closed


def test_without_a_hook_a_stuck_call_needs_reconciliation_as_before() -> None:
    outcome = run_once(stuck_store(), BINDING, never_run, lambda _: None)
    assert (outcome.status, outcome.reason) == (RunStatus.NEEDS_EXECUTION_RECONCILIATION, None)


# --- the guard -----------------------------------------------------------------------------


def test_the_guard_settles_a_dead_workers_call_with_what_the_hook_found() -> None:
    store = MemoryStore()
    runs: list[str] = []
    asked: list[StuckCall] = []
    keys: list[str] = []

    def find_charge(stuck: StuckCall) -> Found | None:
        asked.append(stuck)
        return Found({"receipt": "rcpt-found"}) if stuck.idempotency_key in keys else None

    def charge(card: str) -> dict[str, str]:
        runs.append(card)
        keys.append(current_idempotency_key())
        raise SystemExit("the worker dies after the charge went through")

    guarded = checkpointed(store, name="charge", reconcile=find_charge)(charge)
    with tool_call("c-1"), pytest.raises(SystemExit):
        guarded("4242")
    with tool_call("c-1"):
        assert guarded("4242") == {"receipt": "rcpt-found"}
    with tool_call("c-1"):
        assert guarded("4242") == {"receipt": "rcpt-found"}  # a replay: the one answer
    assert runs == ["4242"]
    assert len(asked) == 1


def test_the_guards_hook_that_cannot_tell_refuses_the_call() -> None:
    store = MemoryStore()

    def charge(card: str) -> dict[str, str]:
        raise SystemExit(f"the worker dies charging {len(card)} digits")

    guarded = checkpointed(store, name="charge", reconcile=lambda _: None)(charge)
    with tool_call("c-1"), pytest.raises(SystemExit):
        guarded("4242")
    with tool_call("c-1"), pytest.raises(CallNotAnswered) as refused:
        guarded("4242")
    assert refused.value.reason == "the reconcile hook could not tell"
