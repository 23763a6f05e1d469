"""The host protocol as a step machine without I/O: :class:`HostProtocol`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from ..errors import CheckpointError, ErrorCode
from ..records import Binding, Checkpoint, Result
from ..table import TABLE, Action, Status
from ..transitions import (
    Transition,
    claim_delivery,
    claim_execution,
    complete_and_claim_delivery,
    complete_and_deliver,
    complete_delivery,
    create_claimed,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
)
from .policy import CallPolicy, PolicyOptions, call_policy
from .state import (
    DURABLE,
    HANDLERS,
    LANDED,
    NOT_LANDED,
    POSTED,
    READING_BACK,
    RESENDABLE,
    RETRIES,
    ROUNDS,
    UNSETTLED,
    CallState,
    Phase,
    Step,
    claim_id,
    held_retries,
    pause_before,
)
from .vocabulary import (
    CONFIRMED_NOT_SENT,
    MARK_POSTED,
    OVERTAKEN,
    VANISHED,
    Create,
    Deliver,
    Found,
    Get,
    NotThere,
    Posted,
    Raised,
    Reconcile,
    Request,
    Returned,
    RunOutcome,
    RunStatus,
    RunTool,
    Sleep,
    StoreFault,
    Swap,
    ToolOutcomeUnknown,
)

__all__ = [
    "HostProtocol",
]

_UNSTORABLE = frozenset({ErrorCode.PAYLOAD_NOT_JSON, ErrorCode.PAYLOAD_LIMIT_EXCEEDED})
"""The refusals of a result that mark the execution uncertain instead of being raised."""


@dataclass(frozen=True, slots=True, init=False)
class HostProtocol:
    """The host protocol for one binding, without I/O: ``HostProtocol(binding, policy)``,
    or ``HostProtocol(binding, **options)`` with :class:`CallPolicy`'s fields by keyword
    (see :func:`call_policy`).

    Attributes:
        binding: The call's binding.
        policy: The call's options (the machine reads all but ``new_id`` and ``logger``,
            and not ``reconcile`` itself: the driver asks it).
        reconciles: Whether a call that finds an execution claim it does not hold asks
            the host's reconcile hook (a Reconcile request) before it answers
            needs-execution-reconciliation (default: whether the policy has a hook).
        hands_back: Whether the host's delivery is the hand-back (its driver was given
            a :class:`~.vocabulary.HandBack` as ``deliver``): a result is stored and recorded
            delivered in one swap, ``complete_and_deliver``, and the outcome carries the
            stored payload to hand back; nothing is sent. A record found completed is
            still claimed, handed back (a Deliver request) and marked delivered.

    Raises:
        CheckpointError: INVALID_ARGUMENT on the field ``binding`` for a binding that is
            not a :class:`Binding`; any of :func:`call_policy`'s.
    """

    binding: Binding
    policy: CallPolicy
    reconciles: bool
    hands_back: bool

    def __init__(
        self,
        binding: Binding,
        policy: CallPolicy | None = None,
        *,
        reconciles: bool | None = None,
        hands_back: bool = False,
        **options: Unpack[PolicyOptions],
    ) -> None:
        if not isinstance(binding, Binding):
            raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
        policy = call_policy(policy, options)
        if reconciles is None:
            reconciles = policy.reconcile is not None
        object.__setattr__(self, "binding", binding)
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "reconciles", reconciles)
        object.__setattr__(self, "hands_back", bool(hands_back))

    def start(self, token: str) -> tuple[Request, CallState]:
        """The first request of a call whose claim ids start with ``token``. (The phase
        given here is a placeholder: start_over sets it.)"""
        return self.start_over(CallState(Phase.CREATE, token))  # pragma: no mutate (reset)

    def step(self, state: CallState, answer: Any) -> Step:
        """Take the answer to the state's last request; return what to do next.

        Raises:
            CheckpointError: BINDING_CONFLICT when the stored record belongs to another
                binding, and any error of the stored record's validation.
        """
        handler: Callable[[CallState, Any], Step] = getattr(self, HANDLERS[state.phase])
        return handler(state, answer)

    # --- reading and deciding ---------------------------------------------------------

    def after_create(self, state: CallState, answer: Any) -> Step:
        if answer is True:  # the record this call created, claimed: run the tool
            return self.claim_landed(state)
        if isinstance(answer, StoreFault):  # it may have landed: read it back
            return self.confirm(state)
        return self.load(state._replace(pending=None))  # a record was stored: decide on it

    def load(self, state: CallState) -> Step:
        """Read the record, unless this call has used up its rounds."""
        if state.rounds >= ROUNDS + self.policy.polls:
            return self.finish(state, RunStatus.STORE_UNAVAILABLE, "the store did not answer")
        return Get(), state._replace(phase=Phase.LOAD)

    def after_load(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, StoreFault):
            return self.load(state._replace(rounds=state.rounds + 1))
        if answer is None and state.ran:  # never run again: restore the record, or say so
            if state.unstored is not None:
                return self.restore(state._replace(rounds=state.rounds + 1))
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        if answer is None:  # nothing stored: create it (again)
            if state.rounds + 1 >= ROUNDS + self.policy.polls:
                return self.finish(state, RunStatus.STORE_UNAVAILABLE, "no record could be made")
            return self.start_over(state._replace(rounds=state.rounds + 1))
        return self.decide(state, self.read(answer))

    def start_over(self, state: CallState) -> tuple[Create, CallState]:
        """Create the record already claimed by a new claim id, if absent."""
        creation = create_claimed(self.binding, attempt_id=state.claim_id(), at=self.policy.clock())
        state = state._replace(phase=Phase.CREATE, pending=creation, claims=state.claims + 1)
        return Create(creation.next), state

    def read(self, answer: Any) -> Checkpoint:
        """The record a read returned, validated and checked against the binding."""
        return decide_checkpoint(
            answer, self.binding, max_payload_bytes=self.policy.max_payload_bytes
        ).checkpoint

    def decide(self, state: CallState, record: Checkpoint) -> Step:
        """What the record says to do next."""
        policy = self.policy
        state = state._replace(record=record, rounds=state.rounds + 1)
        if state.rounds > ROUNDS + policy.polls:
            return self.finish(state, RunStatus.STORE_UNAVAILABLE, "the record kept moving")
        action = TABLE.statuses[record.status].action
        if action is Action.EXECUTE and state.ran:  # never run twice: say what is kept
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        if action is Action.EXECUTE:
            claim = claim_execution(
                record,
                attempt_id=state.claim_id(),
                at=policy.clock(),
                max_payload_bytes=policy.max_payload_bytes,  # pragma: no mutate (no payload yet)
            )
            return self.write(state._replace(claims=state.claims + 1), Phase.CLAIM, claim)
        if action is Action.DELIVER:
            claim = claim_delivery(
                record,
                delivery_id=state.claim_id(),
                at=policy.clock(),
                max_payload_bytes=policy.max_payload_bytes,
            )
            return self.write(state._replace(claims=state.claims + 1), Phase.CLAIM_DELIVERY, claim)
        if action is Action.NONE:
            return self.finish(state, RunStatus.ALREADY_DELIVERED)
        if record.status is Status.EXECUTING and not state.ran and state.polls < policy.polls:
            waiting = state._replace(phase=Phase.WAIT, polls=state.polls + 1)
            return Sleep(policy.poll_seconds), waiting
        if (state.lost or state.ran) and not state.owns(claim_id(record)):
            # another worker holds a claim this call did not win
            return self.finish(state, RunStatus.LOST_TO_ANOTHER_WORKER)
        if action is Action.RECONCILE_DELIVERY:
            return self.finish(state, RunStatus.NEEDS_DELIVERY_RECONCILIATION)
        execution = record.execution
        assert execution is not None  # executing and uncertain records carry their execution
        if self.reconciles and not state.asked and not state.owns(execution.attempt_id):
            return Reconcile(record), state._replace(phase=Phase.RECONCILE, asked=True)
        reason = execution.uncertain.reason if execution.uncertain is not None else None
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, reason)

    def after_reconcile(self, state: CallState, answer: Any) -> Step:
        """Store what the hook found (or its declared answer for no effect) for the
        claim's own attempt, with this call's delivery claim; or leave the record."""
        record = state.record
        assert record is not None
        if isinstance(answer, Found | NotThere):
            try:
                settle = self.completion(state, record, answer.payload)
            except CheckpointError as error:
                if error.code not in _UNSTORABLE:
                    raise
                why = f"the reconcile hook's result could not be stored: {error.code.value}"
                return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, why)
            verdict = "found" if isinstance(answer, Found) else "not there"
            state = state._replace(claims=state.claims + 1, reason=f"reconciled: {verdict}")
            return self.write(state, Phase.SETTLE, settle)
        why = "the reconcile hook could not tell"
        if isinstance(answer, Raised):
            why = f"the reconcile hook raised {type(answer.error).__name__}"
            state = state._replace(reraise=not isinstance(answer.error, Exception))
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, why)

    def after_wait(self, state: CallState, answer: Any) -> Step:
        del answer
        return self.load(state)

    # --- writing ------------------------------------------------------------------------

    def write(
        self, state: CallState, phase: Phase, transition: Transition, *, resend: bool = False
    ) -> Step:
        """Swap ``transition``; its answer goes to ``phase``'s handler. A resend keeps the
        write's count of resends and read-backs; any other write starts it afresh."""
        swap = Swap(transition, DURABLE[phase])
        if resend:
            return swap, state._replace(phase=phase, pending=transition)
        state = state._replace(phase=phase, pending=transition, retries=0, deadline=None)
        return swap, state

    def confirm(self, state: CallState) -> Step:
        """Read back the pending write, unless this call has read back too often: a claim
        :data:`RETRIES` times at once, a held write until the write budget is spent."""
        writing = state.writing if state.phase in READING_BACK else state.phase
        assert writing is not None
        retry = state.retries + 1
        held = writing in RESENDABLE and self.policy.write_budget > 0
        if not held:
            if retry > RETRIES:
                return self._then(UNSETTLED, writing)(state._replace(phase=writing))  # finishes
            return Get(), state._replace(phase=Phase.CONFIRM, writing=writing, retries=retry)
        now = self.policy.monotonic()
        deadline = now + self.policy.write_budget if state.deadline is None else state.deadline
        if retry > held_retries(self.policy.write_budget) or (retry > 1 and now >= deadline):
            return self._then(UNSETTLED, writing)(state._replace(phase=writing))  # finishes
        state = state._replace(writing=writing, retries=retry, deadline=deadline)
        if retry == 1:
            return Get(), state._replace(phase=Phase.CONFIRM)
        pause = min(pause_before(retry), deadline - now)
        return Sleep(pause), state._replace(phase=Phase.PAUSE)

    def after_pause(self, state: CallState, answer: Any) -> Step:
        del answer
        return Get(), state._replace(phase=Phase.CONFIRM)

    def _then(self, table: Mapping[Phase, str], phase: Phase) -> Callable[..., Step]:
        method: Callable[..., Step] = getattr(self, table[phase])
        return method

    def after_confirm(self, state: CallState, answer: Any) -> Step:
        assert state.pending is not None
        assert state.writing is not None
        writing = state._replace(writing=None)  # each handler below sets its own phase
        if isinstance(answer, StoreFault):
            return self.confirm(state)
        stored = None if answer is None else self.read(answer)
        if stored == state.pending.next:
            return self._then(LANDED, state.writing)(writing)
        if stored is not None and stored == state.record and state.writing in RESENDABLE:
            # still the record it was written over: the write did not land; send it again,
            # unless the write budget is spent
            if state.deadline is not None and self.policy.monotonic() >= state.deadline:
                return self._then(UNSETTLED, state.writing)(writing._replace(phase=state.writing))
            return self.write(writing, state.writing, state.pending, resend=True)
        return self._then(NOT_LANDED, state.writing)(writing, stored)

    def after_write(self, state: CallState, answer: Any) -> Step:
        if answer is True:
            return self._then(LANDED, state.phase)(state)
        if isinstance(answer, Posted) and state.phase in POSTED:
            return self._then(POSTED, state.phase)(state)
        # Unknown, or not landed: the record says what happened (a stale copy of this
        # very write may have landed first, and a lost claim needs the record anyway).
        return self.confirm(state)

    # --- the execution ------------------------------------------------------------------

    def claim_landed(self, state: CallState) -> Step:
        assert state.pending is not None
        record = state.pending.next
        return RunTool(), state._replace(phase=Phase.RUN, record=record, pending=None, ran=True)

    def claim_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """The claim (of the execution or of the delivery) is not what the record holds:
        decide on the record read back, or read it, as a call whose claim did not land.
        Never acted on: a record read back unchanged is claimed afresh, and one that moved
        is another worker's only if the claim it carries now is not this call's (decide
        asks whose it is, so a claim of this call that landed and moved on since, which
        only an operator does, is judged by what it became)."""
        state = state._replace(pending=None, lost=True)
        return self.decide(state, stored) if stored is not None else self.load(state)

    def claim_unsettled(self, state: CallState) -> Step:
        return self.finish(
            state, RunStatus.STORE_UNAVAILABLE, "could not tell whether the claim landed"
        )

    def after_run(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, Returned):
            return self.store_result(state, answer.value, None)
        assert isinstance(answer, Raised)
        error = answer.error
        name = type(error).__name__
        if isinstance(error, ToolOutcomeUnknown):
            return self.mark(state, error.reason)
        if isinstance(error, self.policy.stopped_before_effect):
            return self.give_up(state, f"not run: {name}")
        if isinstance(error, self.policy.pass_through):
            return self.mark(state, f"passed through: {name}", reraise=True)
        if not isinstance(error, Exception):
            return self.mark(state, "cancelled", reraise=True)
        return self.store_result(state, self.policy.on_tool_error(error), f"the tool raised {name}")

    def store_result(self, state: CallState, result: Any, reason: str | None) -> Step:
        record = state.record
        assert record is not None
        try:
            done = self.completion(state, record, result)
        except CheckpointError as error:
            if error.code not in _UNSTORABLE:
                raise  # not the result's fault: a broken record or core is never hidden
            why = f"the tool's result could not be stored: {error.code.value}"
            return self.mark(state, why)
        state = state._replace(reason=reason, claims=state.claims + 1)
        return self.write(state, Phase.STORE, done)

    def completion(self, state: CallState, record: Checkpoint, result: object) -> Transition:
        """``record``'s execution completed with ``result`` for its own attempt, and its
        delivery claimed with this call's next claim id (and recorded delivered, for a
        host that hands back).

        Raises:
            CheckpointError: as :func:`~.transitions.complete_and_claim_delivery`.
        """
        assert record.execution is not None
        step = complete_and_deliver if self.hands_back else complete_and_claim_delivery
        return step(
            record,
            attempt_id=record.execution.attempt_id,
            delivery_id=state.claim_id(),
            at=self.policy.clock(),
            result=result,
            max_payload_bytes=self.policy.max_payload_bytes,
        )

    def mark(self, state: CallState, reason: str, *, reraise: bool = False) -> Step:
        record = state.record
        assert record is not None
        assert record.execution is not None
        attempt, at = record.execution.attempt_id, self.policy.clock()
        try:
            doubt = mark_execution_uncertain(record, attempt_id=attempt, at=at, reason=reason)
        except CheckpointError:  # the tool's own reason was not a valid reason
            reason = "the tool said its outcome is unknown (its reason could not be stored)"
            doubt = mark_execution_uncertain(record, attempt_id=attempt, at=at, reason=reason)
        return self.write(state._replace(reason=reason, reraise=reraise), Phase.MARK, doubt)

    def give_up(self, state: CallState, reason: str) -> Step:
        """The tool stopped before any effect: release the claim, then re-raise."""
        record = state.record
        assert record is not None
        assert record.execution is not None
        attempt, at = record.execution.attempt_id, self.policy.clock()
        release = release_execution(record, attempt_id=attempt, at=at)
        return self.write(state._replace(reason=reason, reraise=True), Phase.GIVE_UP, release)

    def gave_up(self, state: CallState) -> Step:
        return self.finish_written(state, RunStatus.RELEASED)

    def give_up_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        why = "the record moved under this call's release"
        return self.finish_on(state, stored, RunStatus.NEEDS_EXECUTION_RECONCILIATION, why)

    def give_up_unsettled(self, state: CallState) -> Step:
        return self.finish(
            state,
            RunStatus.NEEDS_EXECUTION_RECONCILIATION,
            "the tool did not run, but its release could not be recorded",
        )

    def store_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a claim this call holds. Marked uncertain while the tool
        ran, the claim is still this attempt's: its exact result is stored over the mark.
        Otherwise the call goes by what the operator did, and a result it stored instead
        of this call's is the one answer: this call's is kept as ``unstored``."""
        assert state.pending is not None
        ours = state.pending.next.result
        assert ours is not None
        execution = stored.execution if stored is not None else None
        if (
            stored is not None
            and stored.status is Status.UNCERTAIN
            and execution is not None
            and state.owns(execution.attempt_id)
        ):
            done = self.completion(state, stored, ours.payload)
            state = state._replace(record=stored, claims=state.claims + 1)
            return self.write(state, Phase.STORE, done)
        theirs = stored.result if stored is not None else None
        kept = theirs is not None and theirs.payload_json == ours.payload_json
        if stored is None:
            rounds = state.rounds + 1
            return self.restore(state._replace(pending=None, unstored=ours, rounds=rounds))
        if not kept:
            state = state._replace(unstored=ours, reason=OVERTAKEN)
        return self.decide(state._replace(pending=None), stored)

    def restore(self, state: CallState) -> Step:
        """The record vanished after the tool ran: create it again, claimed by this call's
        attempt, so that the result (``unstored``) is stored over it. Never run again."""
        record = state.record
        assert record is not None
        assert record.execution is not None
        if state.rounds >= ROUNDS + self.policy.polls:
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        attempt = record.execution.attempt_id
        creation = create_claimed(self.binding, attempt_id=attempt, at=self.policy.clock())
        state = state._replace(phase=Phase.RESTORE, pending=creation, reason=VANISHED)
        return Create(creation.next), state._replace(retries=0, deadline=None)

    def restored(self, state: CallState) -> Step:
        assert state.pending is not None
        assert state.unstored is not None
        result = state.unstored.payload
        state = state._replace(record=state.pending.next, pending=None, unstored=None)
        return self.store_result(state, result, None)

    def restore_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        state = state._replace(pending=None, rounds=state.rounds + 1)
        if stored is None:
            return self.restore(state)
        return self.decide(state._replace(lost=True), stored)  # another's record took its place

    def restore_unsettled(self, state: CallState) -> Step:
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)

    def store_unsettled(self, state: CallState) -> Step:
        assert state.pending is not None
        return self.finish(
            state,
            RunStatus.NEEDS_EXECUTION_RECONCILIATION,
            "the tool ran but its result could not be stored",
            unstored=state.pending.next.result,
        )

    def marked(self, state: CallState) -> Step:
        return self.finish_written(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION)

    def mark_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a claim this call holds: a result it stored is the
        call's one answer, delivered; otherwise the record waits for reconciliation."""
        if stored is not None and stored.result is not None:
            return self.decide(state._replace(pending=None), stored)
        return self.finish_on(state, stored, RunStatus.NEEDS_EXECUTION_RECONCILIATION, state.reason)

    def mark_unsettled(self, state: CallState) -> Step:
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, state.reason)

    # --- the delivery -------------------------------------------------------------------

    def delivery_claimed(self, state: CallState) -> Step:
        assert state.pending is not None
        if state.pending.action is Action.HAND_BACK:  # delivered in the same write
            return self.delivered(state)
        record = state.pending.next
        assert record.result is not None
        return Deliver(record.result), state._replace(phase=Phase.SEND, record=record, pending=None)

    delivery_not_landed = claim_not_landed

    def after_send(self, state: CallState, answer: Any) -> Step:
        record = state.record
        assert record is not None
        assert record.delivery is not None
        delivery_id, at = record.delivery.delivery_id, self.policy.clock()
        limit = self.policy.max_payload_bytes
        if answer is None:
            finish = complete_delivery(
                record, delivery_id=delivery_id, at=at, max_payload_bytes=limit
            )
            return self.write(state, Phase.FINISH, finish)
        assert isinstance(answer, Raised)
        error = answer.error
        name = type(error).__name__
        if isinstance(error, self.policy.known_not_sent):
            release = release_delivery(
                record, delivery_id=delivery_id, at=at, max_payload_bytes=limit
            )
            return self.write(state._replace(reason=f"not sent: {name}"), Phase.RELEASE, release)
        state = state._replace(reraise=not isinstance(error, Exception))
        return self.finish(
            state, RunStatus.NEEDS_DELIVERY_RECONCILIATION, f"the send's outcome is unknown: {name}"
        )

    def delivered(self, state: CallState) -> Step:
        return self.finish_written(state, self.delivered_status(state))

    def mark_posted(self, state: CallState) -> Step:
        """The delivered mark was sent unanswered: end on the delivering record."""
        return self.finish(state, self.delivered_status(state), MARK_POSTED)

    def delivered_status(self, state: CallState) -> RunStatus:
        return RunStatus.EXECUTED_AND_DELIVERED if state.ran else RunStatus.DELIVERED_STORED_RESULT

    def released(self, state: CallState) -> Step:
        return self.finish_written(state, RunStatus.DELIVERY_FAILED)

    def finish_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        why = "the record moved under this call's delivery"
        return self.finish_on(state, stored, RunStatus.NEEDS_DELIVERY_RECONCILIATION, why)

    def release_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a delivery claim this call holds. One that confirmed a
        send this call then found refused is named: the payload did not arrive, and the
        outcome still carries it for the host to resend."""
        if stored is None or stored.status is not Status.DELIVERED:
            return self.finish_not_landed(state, stored)
        return self.finish_on(
            state, stored, RunStatus.NEEDS_DELIVERY_RECONCILIATION, CONFIRMED_NOT_SENT
        )

    def finish_unsettled(self, state: CallState) -> Step:
        sent = state.phase is Phase.FINISH
        why = "sent, but it could not be recorded" if sent else "not sent, and not released"
        return self.finish(state, RunStatus.NEEDS_DELIVERY_RECONCILIATION, why)

    # --- the end ------------------------------------------------------------------------

    def finish(
        self,
        state: CallState,
        status: RunStatus,
        reason: str | None = None,
        *,
        unstored: Result | None = None,
    ) -> Step:
        """End the call: nothing is left pending (so a finished state is one value)."""
        unstored = unstored or state.unstored
        if reason is None and unstored is not None:
            reason = state.reason  # OVERTAKEN or VANISHED, set where the result was refused
        outcome = RunOutcome(status, state.ran, state.record, reason, unstored)
        return outcome, state._replace(phase=Phase.DONE, reason=reason, pending=None, writing=None)

    def finish_written(self, state: CallState, status: RunStatus) -> Step:
        """End the call on the record its pending write made (known to have landed), with
        the reason the state carries."""
        assert state.pending is not None
        return self.finish(state._replace(record=state.pending.next), status, state.reason)

    def finish_on(
        self, state: CallState, stored: Checkpoint | None, status: RunStatus, reason: str | None
    ) -> Step:
        """End the call on the record read back (or the last one known, if none was)."""
        if stored is not None:
            state = state._replace(record=stored)
        return self.finish(state, status, reason)

    def after_done(self, state: CallState, answer: Any) -> Step:
        del state, answer
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "the call is finished", field="state")
