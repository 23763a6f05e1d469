"""The harness is shown catching a deliberately broken implementation of each bug class
it claims to catch, within the default example budget, and each shrunk counterexample
is kept below as a readable regression test."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from broken import (
    ActsOnLostClaims,
    ForgetfulStore,
    OverwritingStore,
    RacyStore,
    RerunsOnReconcile,
    RevisionBlindStore,
)
from tool_execution_checkpoint import (
    TABLE,
    Action,
    Checkpoint,
    CheckpointError,
    Decision,
    ErrorCode,
    Execution,
    Status,
    Transition,
    claim_execution,
    decide_checkpoint,
    transitions,
)
from tool_execution_checkpoint.memory import MemoryStore
from tool_execution_checkpoint.table import TransitionRule
from tool_execution_checkpoint.testing import (
    PROFILES,
    Fault,
    ProtocolMachine,
    StoreConformance,
    harness,
    protocol_machine,
)

DEFAULT = PROFILES["default"]


def expiring_claims_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken core with a lease: decide says execute again for an executing record and
    claim_execution takes the claim over."""
    real_decide, real_claim = decide_checkpoint, claim_execution

    def decide(record: Any, binding: Any, **options: Any) -> Decision:
        decision = real_decide(record, binding, **options)
        if decision.status is Status.EXECUTING:
            return Decision(Action.EXECUTE, decision.status, decision.revision, decision.checkpoint)
        return decision

    def claim(record: Checkpoint, *, attempt_id: str, at: str, **options: Any) -> Transition:
        if record.status is Status.EXECUTING:
            taken = dataclasses.replace(
                record, revision=record.revision + 1, execution=Execution(attempt_id, at)
            )
            return Transition(Action.EXECUTE, record.revision, taken)
        return real_claim(record, attempt_id=attempt_id, at=at, **options)

    monkeypatch.setattr(harness, "decide_checkpoint", decide)
    monkeypatch.setattr(harness, "claim_execution", claim)


def unfenced_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken core whose transitions never check the attempt id or delivery id."""

    def guard(name: str, record: Checkpoint, claim_id: str | None = None) -> TransitionRule:
        del claim_id  # the bug: whoever asks may finish the claim
        rule = TABLE.transitions[name]
        if record.status not in rule.sources:
            raise CheckpointError(ErrorCode.INVALID_TRANSITION, "wrong status")
        return rule

    monkeypatch.setattr(transitions, "_guard", guard)


def unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    del monkeypatch


Patch = Callable[[pytest.MonkeyPatch], None]
BROKEN: dict[str, tuple[Callable[[], Any], type[ProtocolMachine], Patch, str]] = {
    "CAS ignores the expected revision": (
        RevisionBlindStore,
        ProtocolMachine,
        unchanged,
        "the store answered True where the model answered False",
    ),
    "create overwrites an existing record": (
        OverwritingStore,
        ProtocolMachine,
        unchanged,
        "the store answered True where the model answered False",
    ),
    "an acknowledged write is lost": (
        ForgetfulStore,
        ProtocolMachine,
        unchanged,
        "the store under test and the model differ",
    ),
    "the host acts on a claim it did not win": (
        MemoryStore,
        ActsOnLostClaims,
        unchanged,
        "the tool ran 2 times",
    ),
    "the host reruns the tool on reconcile": (
        MemoryStore,
        RerunsOnReconcile,
        unchanged,
        "the tool ran 2 times",
    ),
    "the core lets claims expire": (
        MemoryStore,
        ProtocolMachine,
        expiring_claims_core,
        "decide says execute for a record that was claimed",
    ),
    "the core does not check fences": (
        MemoryStore,
        ProtocolMachine,
        unfenced_core,
        "accepted a foreign",
    ),
}


@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_the_harness_catches_it_within_the_default_budget(
    bug: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store, base, core, message = BROKEN[bug]
    machine = protocol_machine(make_store, base=base)
    budget = settings(
        max_examples=DEFAULT.max_examples,
        stateful_step_count=DEFAULT.stateful_step_count,
        phases=[Phase.generate],  # finding it is the claim; the shrunk runs are below
        derandomize=True,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow],
    )
    core(monkeypatch)
    with pytest.raises(AssertionError, match=message):
        run_state_machine_as_test(machine, settings=budget)


def test_the_threaded_stress_catches_a_compare_and_swap_that_is_not_atomic() -> None:
    class RacyConformance(StoreConformance):
        stress_keys = 16

        def make_store(self) -> RacyStore:
            return RacyStore()

    with pytest.raises(AssertionError):
        RacyConformance().test_threaded_stress_runs_each_tool_at_most_once()


# --- the shrunk counterexamples, kept as regression tests ----------------------------------


def play(state: ProtocolMachine, *steps: tuple[str, dict[str, Any]]) -> None:
    """Run rules on ``state`` as Hypothesis does: each step, then the invariants."""
    for name, arguments in steps:
        getattr(state, name)(**arguments)
        state.protocol_holds()  # type: ignore[attr-defined]


def step(worker: int, key: int = 0, fault: Fault = Fault.NONE, send_ok: bool = True) -> Any:
    return ("step", {"worker": worker, "key": key, "fault": fault, "send_ok": send_ok})


def test_regression_create_overwrites() -> None:
    state = protocol_machine(OverwritingStore)()
    play(state, step(0))  # w0 creates the record
    with pytest.raises(AssertionError, match="answered True where the model answered False"):
        play(state, step(1))  # w1's create-if-absent replaces it


def test_regression_cas_ignores_the_revision() -> None:
    state = protocol_machine(RevisionBlindStore)()
    play(state, step(0), step(0))  # w0 creates, loads, computes its claim
    play(state, ("replay_stale_write", {"position": 0}))  # the claim lands
    with pytest.raises(AssertionError, match="answered True where the model answered False"):
        play(state, ("replay_stale_write", {"position": 0}))  # a stale copy lands again


def test_regression_acknowledged_write_lost() -> None:
    state = protocol_machine(ForgetfulStore)()
    play(state, step(0), step(0), step(0), step(0))  # create, load, claim, run the tool
    with pytest.raises(AssertionError, match="the store under test and the model differ"):
        play(state, step(0))  # the completed record is acknowledged, then lost


def test_regression_acting_on_a_lost_claim() -> None:
    state = protocol_machine(MemoryStore, base=ActsOnLostClaims)()
    play(state, step(0), step(0), step(1), step(1))  # both load ready and compute claims
    play(state, step(0), step(0))  # w0 wins its claim and runs the tool
    play(state, step(1))  # w1 loses its claim but goes on anyway
    with pytest.raises(AssertionError, match="the tool ran 2 times"):
        play(state, step(1))


def test_regression_rerunning_on_reconcile() -> None:
    state = protocol_machine(MemoryStore, base=RerunsOnReconcile)()
    play(state, step(0), step(0), step(0), step(0))  # w0 creates, loads, claims, runs
    play(state, step(1), step(1))  # w1 finds it executing and treats it as unanswered
    with pytest.raises(AssertionError, match="the tool ran 2 times"):
        play(state, step(1))


def test_regression_claims_that_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    expiring_claims_core(monkeypatch)
    state = protocol_machine(MemoryStore)()
    play(state, step(0), step(0))  # w0 creates, loads, computes its claim
    with pytest.raises(AssertionError, match="decide says execute for a record that was"):
        play(state, step(0))  # the claim lands, and decide would hand it out again


def test_regression_unfenced_core(monkeypatch: pytest.MonkeyPatch) -> None:
    unfenced_core(monkeypatch)
    state = protocol_machine(MemoryStore)()
    play(state, step(0), step(0), step(0))  # w0 creates, loads, claims
    with pytest.raises(AssertionError, match="complete_execution accepted a foreign"):
        play(state, ("foreign_fence", {"key": 0}))


def test_regression_runs_are_clean_on_the_model_store() -> None:
    state = protocol_machine(MemoryStore)()
    play(state, *(step(0, send_ok=False) for _ in range(8)), *(step(0) for _ in range(8)))
    record = state.model.get(state.truths[0].key)
    assert record is not None
    assert record["status"] == "delivered"
    assert len(state.truths[0].executions) == 1
    assert len(state.truths[0].deliveries) == 1
