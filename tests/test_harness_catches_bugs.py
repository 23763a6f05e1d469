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

from broken import ForgetfulStore, OverwritingStore, RacyStore, RevisionBlindStore
from broken_hosts import (
    ActsOnLostClaims,
    ReleasesAfterAnEffect,
    ReleasesUnknownDeliveries,
    ReportsOwnClaimAsLost,
    RerunsOnReconcile,
)
from tool_execution_checkpoint import (
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
)
from tool_execution_checkpoint.runner import HostProtocol, machine
from tool_execution_checkpoint.stores.memory import MemoryStore
from tool_execution_checkpoint.table import ComposedRule, TransitionRule
from tool_execution_checkpoint.testing import (
    PROFILES,
    Fault,
    ProtocolMachine,
    SendAnswer,
    StoreConformance,
    ToolAnswer,
    invariants,
    protocol_machine,
)
from tool_execution_checkpoint.transitions import postconditions, steps

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

    monkeypatch.setattr(invariants, "decide_checkpoint", decide)
    monkeypatch.setattr(machine, "claim_execution", claim)


def unfenced_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken core whose transitions never check the attempt id or delivery id."""

    def guard(
        name: str, record: Checkpoint, claim_id: str | None = None
    ) -> TransitionRule | ComposedRule:
        del claim_id  # the bug: whoever asks may finish the claim
        rule = postconditions.RULES[name]
        if record.status not in rule.sources:
            raise CheckpointError(ErrorCode.INVALID_TRANSITION, "wrong status")
        return rule

    monkeypatch.setattr(steps, "_guard", guard)


def unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    del monkeypatch


Patch = Callable[[pytest.MonkeyPatch], None]
BROKEN: dict[str, tuple[Callable[[], Any], type[HostProtocol], Patch, str]] = {
    "CAS ignores the expected revision": (
        RevisionBlindStore,
        HostProtocol,
        unchanged,
        "the store answered True where the model answered False",
    ),
    "create overwrites an existing record": (
        OverwritingStore,
        HostProtocol,
        unchanged,
        "the store answered True where the model answered False",
    ),
    "an acknowledged write is lost": (
        ForgetfulStore,
        HostProtocol,
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
    "the host releases a claim after the tool acted": (
        MemoryStore,
        ReleasesAfterAnEffect,
        unchanged,
        "an execution whose tool ran was released",
    ),
    "the host reports its own landed claim as another worker's": (
        MemoryStore,
        ReportsOwnClaimAsLost,
        unchanged,
        "reported its own claim as another worker's",
    ),
    "the core lets claims expire": (
        MemoryStore,
        HostProtocol,
        expiring_claims_core,
        "decide says execute for a record that was claimed",
    ),
    "the core does not check fences": (
        MemoryStore,
        HostProtocol,
        unfenced_core,
        "let a foreign id finish the claim",
    ),
}


NEEDS_THOROUGH = {"the host reports its own landed claim as another worker's"}
"""Bugs the default budget finds in only some runs (this one: a claim's create whose reply
is lost, then its read-back failing, on the first call of a key; measured in 8 of 24
seeds at the default budget), so the claim is made for the thorough budget, which stops
at the first finding."""


@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_the_harness_catches_it_within_the_default_budget(
    bug: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store, host, core, message = BROKEN[bug]
    machine = protocol_machine(make_store, protocol=host)
    profile = PROFILES["thorough"] if bug in NEEDS_THOROUGH else DEFAULT
    budget = settings(
        max_examples=profile.max_examples,
        stateful_step_count=profile.stateful_step_count,
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


def step(
    worker: int,
    key: int = 0,
    fault: Fault = Fault.NONE,
    tool: ToolAnswer = ToolAnswer.RETURNS,
    send: SendAnswer = SendAnswer.SENT,
) -> Any:
    """One request of ``worker``'s call (a fresh call's are: create the record claimed, run
    the tool, store the result with its delivery claim, send, record the delivery)."""
    return ("step", {"worker": worker, "key": key, "fault": fault, "tool": tool, "send": send})


def test_regression_create_overwrites() -> None:
    state = protocol_machine(OverwritingStore)()
    play(state, step(0))  # w0 creates the record
    with pytest.raises(AssertionError, match="answered True where the model answered False"):
        play(state, step(1))  # w1's create-if-absent replaces it


def test_regression_cas_ignores_the_revision() -> None:
    state = protocol_machine(RevisionBlindStore)()
    play(state, step(0), step(0))  # w0 creates the record claimed, runs, computes its result
    play(state, ("replay_stale_write", {"position": 0}))  # the result lands
    with pytest.raises(AssertionError, match="answered True where the model answered False"):
        play(state, ("replay_stale_write", {"position": 0}))  # a stale copy lands again


def test_regression_acknowledged_write_lost() -> None:
    state = protocol_machine(ForgetfulStore)()
    play(state, step(0), step(0))  # create claimed, run the tool
    with pytest.raises(AssertionError, match="the store under test and the model differ"):
        play(state, step(0))  # the result with its delivery claim is acknowledged, then lost


def test_regression_acting_on_a_lost_claim() -> None:
    state = protocol_machine(MemoryStore, protocol=ActsOnLostClaims)()
    play(state, step(0), step(1))  # w0 creates claimed; w1's create loses, it goes on anyway
    play(state, step(0))  # w0 runs the tool
    with pytest.raises(AssertionError, match="the tool ran 2 times"):
        play(state, step(1))  # so does w1


def test_regression_rerunning_on_reconcile() -> None:
    state = protocol_machine(MemoryStore, protocol=RerunsOnReconcile)()
    play(state, step(0), step(0))  # w0 creates claimed, runs
    play(state, step(1), step(1))  # w1 finds it executing and treats it as unanswered
    with pytest.raises(AssertionError, match="the tool ran 2 times"):
        play(state, step(1))


def test_regression_releasing_a_delivery_of_unknown_outcome() -> None:
    state = protocol_machine(MemoryStore, protocol=ReleasesUnknownDeliveries)()
    play(state, *(step(0) for _ in range(3)))  # create claimed, run, store + claim delivery
    play(state, step(0, send=SendAnswer.UNKNOWN_ARRIVED), step(0))  # it arrived; released
    play(state, step(0), step(0), step(0))  # a new call: creates, reads, claims delivery
    with pytest.raises(AssertionError, match="the payload arrived 2 times"):
        play(state, step(0))


def test_regression_releasing_after_an_effect() -> None:
    state = protocol_machine(MemoryStore, protocol=ReleasesAfterAnEffect)()
    play(state, step(0))  # w0 creates the record claimed
    with pytest.raises(AssertionError, match="an execution whose tool ran was released"):
        play(state, step(0, tool=ToolAnswer.RAISES), step(0))  # it acted, raised, released


def test_a_tool_that_did_not_run_is_released_and_runs_on_the_next_call() -> None:
    state = protocol_machine(MemoryStore)()
    play(state, step(0), step(0, tool=ToolAnswer.NOT_RUN), step(0))  # released
    truth = state.truths[0]
    assert truth.executions == []
    assert not truth.claimed
    play(state, *(step(0) for _ in range(7)))  # a new call: create, read, claim, run, ...
    assert len(truth.executions) == 1
    state.check_protocol()


def test_regression_reporting_an_own_claim_as_lost() -> None:
    state = protocol_machine(MemoryStore, protocol=ReportsOwnClaimAsLost)()
    play(state, step(0, fault=Fault.WRITE_AMBIGUOUS))  # the claimed create lands, reply lost
    play(state, step(0, fault=Fault.READ_FAILS))  # the read-back fails: "not landed"
    with pytest.raises(AssertionError, match="reported its own claim as another worker's"):
        play(state, step(0))  # it reads its own claim and calls it another worker's


def test_regression_claims_that_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    expiring_claims_core(monkeypatch)
    state = protocol_machine(MemoryStore)()
    with pytest.raises(AssertionError, match="decide says execute for a record that was"):
        play(state, step(0))  # the claimed create lands, and decide would hand it out again


def test_regression_unfenced_core(monkeypatch: pytest.MonkeyPatch) -> None:
    unfenced_core(monkeypatch)
    state = protocol_machine(MemoryStore)()
    play(state, step(0))  # w0 creates the record claimed
    with pytest.raises(AssertionError, match="complete_execution let a foreign id"):
        play(state, ("foreign_fence", {"key": 0}))


def test_regression_runs_are_clean_on_the_model_store() -> None:
    state = protocol_machine(MemoryStore)()
    refused = step(0, send=SendAnswer.REFUSED)
    play(state, *(refused for _ in range(8)), *(step(0) for _ in range(8)))
    record = state.model.get(state.truths[0].key)
    assert record is not None
    assert record["status"] == "delivered"
    assert len(state.truths[0].executions) == 1
    assert len(state.truths[0].deliveries) == 1
