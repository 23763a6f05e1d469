"""What the values a host logs or prints show: never a call id, a namespace or a payload."""

from __future__ import annotations

import pytest

from tool_execution_checkpoint import (
    Binding,
    CallInFlight,
    Found,
    MemoryStore,
    NotThere,
    StuckCall,
    checkpoint_key,
    create_claimed,
)
from tool_execution_checkpoint.runner import RunStatus, run_once

SECRET_CALL = "user-42@example.com/turn-1"
SECRET_NAMESPACE = "tenant-acme-SECRET"
BINDING = Binding(SECRET_NAMESPACE, SECRET_CALL, "charge_card", "1", "sha256:00")


def shows_nothing_secret(*values: object) -> None:
    for value in values:
        for text in (repr(value), str(value)):
            assert SECRET_CALL not in text
            assert SECRET_NAMESPACE not in text


def test_a_binding_shows_the_lengths_of_its_namespace_and_call_id() -> None:
    assert repr(BINDING) == (
        "Binding(namespace=<18 chars>, call_id=<26 chars>, tool_name='charge_card', "
        "tool_revision='1', input_fingerprint='sha256:00')"
    )


def test_records_outcomes_stuck_calls_and_refusals_show_no_identifier() -> None:
    store = MemoryStore()
    claimed = create_claimed(BINDING, attempt_id="worker.1", at="2026-12-07T00:00:00Z").next
    assert store.create_if_absent(checkpoint_key(BINDING), claimed)
    seen: list[StuckCall] = []

    def hook(stuck: StuckCall) -> None:
        seen.append(stuck)

    outcome = run_once(store, BINDING, lambda: None, lambda _: None, reconcile=hook)
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    shows_nothing_secret(claimed, outcome, *seen, CallInFlight(outcome))
    with pytest.raises(CallInFlight) as refused:
        raise CallInFlight(outcome)
    shows_nothing_secret(refused.value, refused.value.outcome)


def test_a_hooks_answer_shows_no_payload() -> None:
    assert repr(Found({"card": SECRET_CALL})) == "Found(<payload>)"
    assert repr(NotThere({"card": SECRET_CALL})) == "NotThere(<payload>)"
