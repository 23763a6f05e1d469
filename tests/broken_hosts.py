"""Deliberately broken hosts: each a runner protocol with one seeded bug, which the
harness (tests/test_harness_catches_bugs.py) and the explorer (tests/test_proofs.py) must
catch."""

from __future__ import annotations

from typing import Any

from tool_execution_checkpoint import Binding, Checkpoint, Status
from tool_execution_checkpoint.runner import (
    CallState,
    Found,
    HostProtocol,
    Phase,
    RunStatus,
    RunTool,
    Step,
    StoreFault,
)


class ActsOnLostClaims(HostProtocol):
    """Runs the tool (or sends) whatever its claim's create or swap answered."""

    def after_create(self, state: CallState, answer: Any) -> Step:
        del answer  # the bug: a record stored first does not matter either
        return self.claim_landed(state)

    def claim_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        del stored  # the bug: it does not matter whether the claim landed
        return self.claim_landed(state)

    def delivery_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        del stored
        return self.delivery_claimed(state)


class TrustsPostedMarks(HostProtocol):
    """Takes a delivered mark sent unanswered for one known to have landed, and reports
    the delivered record it may never have become."""

    def mark_posted(self, state: CallState) -> Step:
        return self.delivered(state)


class RerunsOnReconcile(HostProtocol):
    """A naive host that sees an executing record as unanswered and runs the tool again,
    completing under the stored attempt id."""

    def decide(self, state: CallState, record: Checkpoint) -> Step:
        if record.status is Status.EXECUTING and not state.ran:
            return RunTool(), state._replace(phase=Phase.RUN, record=record, ran=True)
        return super().decide(state, record)


class ReleasesUnknownDeliveries(HostProtocol):
    """Releases the delivery whatever the send raised, a timeout included: a send that
    arrived is sent again."""

    def __init__(self, binding: Binding, **options: Any) -> None:
        super().__init__(binding, **options, not_sent=(BaseException,))


class ReportsOwnClaimAsLost(HostProtocol):
    """The runner before the step machine: it takes a read-back that failed for a claim
    that did not land, and a call whose claim did not seem to land reports a claimed
    record as another worker's without asking whose claim it carries."""

    def decide(self, state: CallState, record: Checkpoint) -> Step:
        claimed = record.status in (Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING)
        if state.lost and claimed:
            return self.finish(state._replace(record=record), RunStatus.LOST_TO_ANOTHER_WORKER)
        return super().decide(state, record)

    def after_confirm(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, StoreFault) and state.writing in (Phase.CREATE, Phase.CLAIM):
            return self.claim_not_landed(state._replace(phase=state.writing, writing=None), None)
        return super().after_confirm(state, answer)


class ReleasesAfterAnEffect(HostProtocol):
    """Declares every exception of the tool "not run", a handler error raised after the
    tool acted included: the claim is released and the next call runs the tool again."""

    def __init__(self, binding: Binding, **options: Any) -> None:
        super().__init__(binding, **options, not_run=(Exception,))


class SendsItsOwnOvertakenResult(HostProtocol):
    """Sends its own result when an operator stored another first: a call with two
    answers (only an operator racing a live worker shows it)."""

    def store_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        del stored  # the bug: its own result's write is taken as landed
        return self.delivery_claimed(state)


class RerunsUnlessFound(HostProtocol):
    """Runs the tool again when the reconcile hook does not find the effect (a silent
    rerun, where the hook only said it could not tell, or that nothing was found)."""

    def after_reconcile(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, Found):
            return super().after_reconcile(state, answer)
        return RunTool(), state._replace(phase=Phase.RUN, ran=True)  # the bug
