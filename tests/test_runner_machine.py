"""The host protocol's step machine, driven request by request: the invariants every state
keeps, its exact budgets of reads and resends, and whose claim a call reports.

`tests/test_runner.py` drives the machine through ``run_once``; here a test answers each
request itself (from a real MemoryStore, with chosen answers replaced), so it can pin
what a driver never shows: how many requests a bound allows and the state between them.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from counting_store import CountingStore, Write
from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    MemoryStore,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    create_claimed,
    mark_execution_uncertain,
    release_execution,
)
from tool_execution_checkpoint.runner import (
    DURABLE,
    MARK_POSTED,
    OVERTAKEN,
    POSTED,
    RETRIES,
    ROUNDS,
    CallState,
    Create,
    Deliver,
    Found,
    Get,
    HostProtocol,
    Phase,
    Posted,
    Raised,
    Reconcile,
    Returned,
    RunOutcome,
    RunStatus,
    RunTool,
    Sleep,
    StoreFault,
    Swap,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    hand_back,
    held_retries,
    pause_before,
    run_once,
    run_once_async,
)
from tool_execution_checkpoint.runner.calls import store_operation
from tool_execution_checkpoint.table import TABLE, Action, ComposedRule, TransitionRule

BINDING = Binding("runner", "call-1", "send_email", "1", "sha256:00")
KEY = checkpoint_key(BINDING)
TOKEN = "a" * 32
OTHER = "b" * 32
AT = "2026-12-03T00:00:00Z"

SWAPS = {
    Phase.CLAIM,
    Phase.STORE,
    Phase.MARK,
    Phase.GIVE_UP,
    Phase.CLAIM_DELIVERY,
    Phase.FINISH,
    Phase.RELEASE,
    Phase.SETTLE,
}
REQUEST_OF: dict[Phase, type] = {
    Phase.CREATE: Create,
    Phase.RESTORE: Create,
    Phase.RECONCILE: Reconcile,
    Phase.LOAD: Get,
    Phase.CONFIRM: Get,
    Phase.WAIT: Sleep,
    Phase.PAUSE: Sleep,
    Phase.RUN: RunTool,
    Phase.SEND: Deliver,
    Phase.DONE: RunOutcome,
} | dict.fromkeys(SWAPS, Swap)


def _durability(target: Status, grant: Action) -> bool:
    """The table's durability of the steps that land in ``target`` granting ``grant``
    (they agree: each swap the machine makes is one of them)."""
    steps: list[TransitionRule | ComposedRule] = [*TABLE.transitions.values()]
    steps += TABLE.composed.values()
    kinds = {step.durable for step in steps if (step.target, step.grants) == (target, grant)}
    assert len(kinds) == 1, (target, grant)
    return kinds.pop()


def check_state(request: object, state: CallState, retries: int = RETRIES) -> None:
    """What every state of the machine keeps, whatever the answers were."""
    assert isinstance(request, REQUEST_OF[state.phase]), (state.phase, request)
    if isinstance(request, Swap):  # it tells the store the table's durability of its step
        step = request.transition
        assert request.durable is _durability(step.next.status, step.action), state.phase
    reading_back = state.phase in {Phase.CONFIRM, Phase.PAUSE}
    awaits_write = reading_back or state.phase in SWAPS | {Phase.CREATE, Phase.RESTORE}
    assert (state.pending is not None) == awaits_write, state.phase
    assert (state.writing is not None) == reading_back, state.phase
    assert state.writing in SWAPS | {Phase.CREATE, Phase.RESTORE, None}
    assert 0 <= state.retries <= retries
    assert type(state.reraise) is bool
    if isinstance(request, RunOutcome):
        assert state.reason == request.reason
        assert state.ran == request.ran_tool


Answer = Callable[[MemoryStore, object], Any]


@dataclass
class Script:
    """Answers each request from a real MemoryStore, except the ones numbered in
    ``replies`` (1 = the first request), whose function answers instead."""

    replies: dict[int, Answer] = field(default_factory=dict)
    store: MemoryStore = field(default_factory=MemoryStore)
    tool: Callable[[], Any] = lambda: Returned({"messageId": "m-1"})
    sent: Callable[[], Any] = lambda: None
    requests: list[object] = field(default_factory=list)

    def honest(self, request: object) -> Any:
        if isinstance(request, Create | Get | Swap):
            return store_operation(self.store, KEY, request)  # as both drivers send it
        if isinstance(request, RunTool):
            return self.tool()
        if isinstance(request, Deliver):
            return self.sent()
        assert isinstance(request, Sleep)
        return None

    def run(self, protocol: HostProtocol | None = None, token: str = TOKEN) -> RunOutcome:
        protocol = protocol or HostProtocol(BINDING, write_budget=0)
        bound = held_retries(protocol.policy.write_budget)
        request: Any
        request, state = protocol.start(token)
        check_state(request, state, bound)
        while not isinstance(request, RunOutcome):
            self.requests.append(request)
            reply = self.replies.get(len(self.requests))
            if reply is None or not isinstance(request, Create | Get | Swap):
                answer = self.honest(request)  # only the store's answers are replaced
            else:
                answer = reply(self.store, request)
            request, state = protocol.step(state, answer)
            check_state(request, state, bound)
        self.state = state
        return request

    @property
    def kinds(self) -> str:
        """The requests made, one letter each: Create, Get, Swap, Tool, Deliver, Sleep."""
        letters = {Create: "C", Get: "G", Swap: "S", RunTool: "T", Deliver: "D", Sleep: "Z"}
        return "".join(letters[type(request)] for request in self.requests)


def fault(store: MemoryStore, request: object) -> Any:
    """The store did not answer, and nothing was applied."""
    del store, request
    return StoreFault()


def lost_reply(store: MemoryStore, request: object) -> Any:
    """The write was applied, and its reply was lost (a read: it failed)."""
    if isinstance(request, Swap):
        step = request.transition
        store.compare_and_swap(KEY, step.expected_revision, step.next)
    elif isinstance(request, Create):
        store.create_if_absent(KEY, request.record)
    return StoreFault()


def refused(store: MemoryStore, request: object) -> Any:
    """The write did not land and nothing changed (a read: it found no record)."""
    del store
    return None if isinstance(request, Get) else False


def answers(value: Any) -> Answer:
    def answer(store: MemoryStore, request: object) -> Any:
        del store, request
        return value

    return answer


def first(*moves: Callable[[Checkpoint], Any], then: Answer) -> Answer:
    """Another party moves the stored record (each ``move`` makes the next transition of
    the current record) before the request is answered by ``then``."""

    def answer(store: MemoryStore, request: object) -> Any:
        for move in moves:
            current = Checkpoint.from_dict(store.get(KEY) or {})
            step = move(current)
            assert store.compare_and_swap(KEY, step.expected_revision, step.next)
        return then(store, request)

    return answer


def read(store: MemoryStore, request: object) -> Any:
    del request
    return store.get(KEY)


def constant(value: object) -> Callable[[], Any]:
    return lambda: value


def other_creates(then: Answer) -> Answer:
    """Another worker's create of its claimed record lands first; ``then`` answers."""

    def answer(store: MemoryStore, request: object) -> Any:
        theirs = create_claimed(BINDING, attempt_id=f"{OTHER}.1", at=AT)
        assert store.create_if_absent(KEY, theirs.next)
        return then(store, request)

    return answer


def completed_by_other() -> MemoryStore:
    """A store holding the record another worker completed (the tool ran there)."""
    store = MemoryStore()
    theirs = create_claimed(BINDING, attempt_id=f"{OTHER}.1", at=AT).next
    done = complete_execution(theirs, attempt_id=f"{OTHER}.1", at=AT, result={"by": "other"})
    assert store.create_if_absent(KEY, theirs)
    assert store.compare_and_swap(KEY, done.expected_revision, done.next)
    return store


def other_claims(record: Checkpoint) -> Any:
    return claim_execution(record, attempt_id=f"{OTHER}.1", at=AT)


def other_claims_delivery(record: Checkpoint) -> Any:
    return claim_delivery(record, delivery_id=f"{OTHER}.1", at=AT)


def operator_marks(record: Checkpoint) -> Any:
    assert record.execution is not None
    return mark_execution_uncertain(
        record, attempt_id=record.execution.attempt_id, at=AT, reason="operator"
    )


def operator_completes(record: Checkpoint) -> Any:
    assert record.execution is not None
    return complete_execution(
        record, attempt_id=record.execution.attempt_id, at=AT, result={"by": "operator"}
    )


# --- every state keeps the invariants -----------------------------------------------------

REPLIES: dict[str, Answer] = {"fault": fault, "lost reply": lost_reply, "refused": refused}


TOOL_ANSWERS = [
    Returned({"messageId": "m-1"}),
    Raised(ValueError("refused")),
    Raised(ToolOutcomeUnknown("timed out")),
    Raised(ToolDidNotRun()),
    Raised(KeyboardInterrupt()),
]
SEND_ANSWERS = [None, Raised(ConnectionRefusedError()), Raised(TimeoutError())]


def faults_of_one_call() -> Iterator[dict[int, Answer]]:
    """The store's answer to each of the first 12 requests replaced by a fault, a lost
    reply or a refusal, alone; and the store down from each request on."""
    yield {}
    for n in range(1, 13):
        yield from ({n: reply} for reply in REPLIES.values())
        yield dict.fromkeys(range(n, 40), fault)


def pairs_of_faults() -> Iterator[dict[int, Answer]]:
    singles = [(n, reply) for n in range(1, 13) for reply in REPLIES.values()]
    for (n, a), (m, b) in itertools.combinations(singles, 2):
        if n != m:
            yield {n: a, m: b}


def test_every_state_keeps_the_machines_invariants_under_faults() -> None:
    outcomes = set()
    for tool, sent, replies in itertools.product(TOOL_ANSWERS, SEND_ANSWERS, faults_of_one_call()):
        script = Script(replies=replies, tool=constant(tool), sent=constant(sent))
        outcomes.add(script.run().status)
        # then a second call recovers from whatever the first one left
        waits = HostProtocol(BINDING, wait_seconds=0.1, poll_seconds=0.1, write_budget=0)
        outcomes.add(Script(store=script.store).run(waits, token=OTHER).status)
    for replies in pairs_of_faults():
        outcomes.add(Script(replies=replies).run().status)
    assert {
        RunStatus.EXECUTED_AND_DELIVERED,
        RunStatus.DELIVERY_FAILED,
        RunStatus.STORE_UNAVAILABLE,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
        RunStatus.RELEASED,
        RunStatus.DELIVERED_STORED_RESULT,
        RunStatus.ALREADY_DELIVERED,
    } <= outcomes


def test_the_invariant_check_catches_a_state_that_keeps_a_stale_write() -> None:
    class KeepsItsClaim(HostProtocol):
        def claim_landed(self, state: CallState) -> Any:
            request, after = super().claim_landed(state)
            return request, after._replace(pending=state.pending)

    with pytest.raises(AssertionError):
        Script().run(KeepsItsClaim(BINDING))


# --- the budgets, exactly -----------------------------------------------------------------


@pytest.mark.parametrize(("polls", "gets"), [(0, ROUNDS), (2, ROUNDS + 2)])
def test_a_store_that_never_answers_a_read_is_read_once_per_round(polls: int, gets: int) -> None:
    replies: dict[int, Answer] = {1: refused} | dict.fromkeys(range(2, 20), fault)
    protocol = HostProtocol(BINDING, wait_seconds=polls / 10, poll_seconds=0.1, write_budget=0)
    script = Script(replies=replies)
    outcome = script.run(protocol)
    assert (outcome.status, outcome.reason) == (
        RunStatus.STORE_UNAVAILABLE,
        "the store did not answer",
    )
    assert script.kinds == "C" + "G" * gets


def test_a_create_of_unknown_outcome_is_read_back_retries_times() -> None:
    script = Script(replies=dict.fromkeys(range(1, 20), fault))
    outcome = script.run(HostProtocol(BINDING, wait_seconds=0.2, poll_seconds=0.1, write_budget=0))
    assert (outcome.status, outcome.reason) == (
        RunStatus.STORE_UNAVAILABLE,
        "could not tell whether the claim landed",
    )
    assert script.kinds == "C" + "G" * RETRIES
    assert not outcome.ran_tool


@pytest.mark.parametrize(("polls", "creates"), [(0, ROUNDS), (2, ROUNDS + 2)])
def test_a_record_that_never_appears_is_created_once_per_round(polls: int, creates: int) -> None:
    script = Script(replies={n: answers(n % 2 == 0 and None) for n in range(1, 20)})
    protocol = HostProtocol(BINDING, wait_seconds=polls / 10, poll_seconds=0.1, write_budget=0)
    outcome = script.run(protocol)
    assert (outcome.status, outcome.reason) == (
        RunStatus.STORE_UNAVAILABLE,
        "no record could be made",
    )
    assert script.kinds == "CG" * creates
    assert outcome.record is None


def test_a_record_that_keeps_moving_is_decided_once_per_round() -> None:
    ready = create_checkpoint(BINDING, created_at=AT)
    replies: dict[int, Answer] = {1: answers(False)}
    replies |= {n: answers(ready.to_dict()) for n in range(2, 20, 2)}
    replies |= dict.fromkeys(range(3, 20, 2), refused)
    script = Script(replies=replies)
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.STORE_UNAVAILABLE,
        "the record kept moving",
    )
    assert script.kinds == "CG" + "SG" * ROUNDS
    claims = [request.transition.next for request in script.requests if isinstance(request, Swap)]
    assert [c.execution.attempt_id for c in claims if c.execution] == [
        f"{TOKEN}.{n}"
        for n in range(2, ROUNDS + 2)  # .1 was the create's claim
    ]


def test_a_write_of_unknown_outcome_is_read_back_retries_times() -> None:
    script = Script(replies=dict.fromkeys(range(3, 20), fault))
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the tool ran but its result could not be stored",
    )
    assert script.kinds == "CT" + "S" + "G" * RETRIES


def test_a_write_read_back_unchanged_is_resent_retries_times() -> None:
    script = Script(replies=dict.fromkeys(range(3, 20, 2), refused))
    outcome = script.run()
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert script.kinds == "CT" + "SG" * RETRIES + "S"


def test_each_write_starts_its_read_backs_afresh() -> None:
    # the claim's reply is lost and its first read-back fails: the result's write still
    # gets every read-back
    replies: dict[int, Answer] = {1: lost_reply, 2: fault}
    replies |= dict.fromkeys(range(5, 20), fault)
    script = Script(replies=replies)
    outcome = script.run()
    assert outcome.reason == "the tool ran but its result could not be stored"
    assert script.kinds == "CGGT" + "S" + "G" * RETRIES


# --- whose claim a call reports -------------------------------------------------------------


def test_a_claim_another_worker_won_is_lost_to_it() -> None:
    store = MemoryStore()
    assert store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=AT))  # ready
    script = Script(store=store)
    script.replies = {3: first(other_claims, then=refused)}
    outcome = script.run()
    assert outcome.status is RunStatus.LOST_TO_ANOTHER_WORKER
    assert not outcome.ran_tool
    assert outcome.record is not None
    assert outcome.record.execution is not None
    assert outcome.record.execution.attempt_id == f"{OTHER}.1"
    assert script.kinds == "CGSG"


def test_a_create_another_workers_create_beat_decides_on_what_is_stored() -> None:
    """A refused create says only that a record was stored first, as for a call that
    comes late: the call waits for the claim or answers reconcile, never runs."""
    script = Script(replies={1: other_creates(then=refused)})
    outcome = script.run()
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert not outcome.ran_tool
    assert script.kinds == "CG"
    waits = Script(replies={1: other_creates(then=refused)})
    waited = waits.run(HostProtocol(BINDING, wait_seconds=0.1, poll_seconds=0.1, write_budget=0))
    assert waited.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert waits.kinds == "CGZG"


def test_a_create_of_unknown_outcome_read_back_as_anothers_claim_is_lost_to_it() -> None:
    script = Script(replies={1: other_creates(then=fault)})
    outcome = script.run()
    assert outcome.status is RunStatus.LOST_TO_ANOTHER_WORKER
    assert not outcome.ran_tool
    assert script.kinds == "CG"


def test_a_claim_read_back_as_absent_reads_again_and_finds_the_winner() -> None:
    script = Script()
    script.replies = {1: other_creates(then=fault), 2: answers(None)}
    outcome = script.run()
    assert outcome.status is RunStatus.LOST_TO_ANOTHER_WORKER
    assert script.kinds == "CGG"


def test_an_own_claim_an_operator_moved_is_not_another_workers() -> None:
    script = Script()
    script.replies = {
        1: lost_reply,
        2: first(operator_marks, then=read),
    }
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "operator",
    )
    assert not outcome.ran_tool


def test_a_call_an_operator_marked_uncertain_while_its_tool_ran_stores_its_result() -> None:
    script = Script()
    script.replies = {3: first(operator_marks, then=refused)}
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (RunStatus.EXECUTED_AND_DELIVERED, None)
    assert outcome.ran_tool
    assert outcome.unstored is None
    assert outcome.payload == {"messageId": "m-1"}
    assert outcome.record is not None
    assert outcome.record.execution is not None
    assert outcome.record.execution.uncertain is not None
    # stored over the mark it read back, under the same attempt id, with a new delivery id
    assert script.kinds == "CTSGSDS"


def test_a_delivery_another_worker_claimed_after_the_tool_ran_is_lost_to_it() -> None:
    # an operator completed the execution while the tool ran, and another worker
    # claimed its delivery, before this call's result and delivery claim were written
    script = Script()
    script.replies = {3: first(operator_completes, other_claims_delivery, then=refused)}
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (RunStatus.LOST_TO_ANOTHER_WORKER, OVERTAKEN)
    assert outcome.ran_tool
    assert outcome.unstored is not None
    assert outcome.unstored.payload == {"messageId": "m-1"}
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERING
    assert script.kinds == "CTSG"


def test_a_delivery_claim_read_back_unchanged_is_claimed_again_with_a_new_id() -> None:
    script = Script(store=completed_by_other())
    script.replies = {3: refused}
    outcome = script.run()
    assert outcome.status is RunStatus.DELIVERED_STORED_RESULT
    assert outcome.payload == {"by": "other"}
    assert script.kinds == "CGSGSDS"
    assert outcome.record is not None
    assert outcome.record.delivery is not None
    assert outcome.record.delivery.delivery_id == f"{TOKEN}.3"  # .1 the create, .2 refused


def test_an_operator_completion_of_a_lost_claim_is_delivered_by_the_call() -> None:
    script = Script()
    script.replies = {
        1: lost_reply,
        2: first(operator_completes, then=read),
    }
    outcome = script.run()
    assert outcome.status is RunStatus.DELIVERED_STORED_RESULT
    assert outcome.payload == {"by": "operator"}


def test_a_delivery_claimed_after_the_composed_write_did_not_land_takes_a_fresh_id() -> None:
    # an operator completed the execution under this call's attempt id while the tool
    # ran: the result-and-delivery-claim swap is refused, and the call delivers the
    # operator's result under its next claim id (.1 the create, .2 the refused claim)
    script = Script()
    script.replies = {3: first(operator_completes, then=refused)}
    outcome = script.run()
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.payload == {"by": "operator"}
    assert script.kinds == "CTSGSDS"
    refused_claim = script.requests[2]
    assert isinstance(refused_claim, Swap)
    assert refused_claim.transition.next.delivery is not None
    assert refused_claim.transition.next.delivery.delivery_id == f"{TOKEN}.2"
    assert outcome.record is not None
    assert outcome.record.delivery is not None
    assert outcome.record.delivery.delivery_id == f"{TOKEN}.3"


def test_a_release_an_operator_overtook_reports_the_operators_record_and_why() -> None:
    script = Script(tool=lambda: Raised(ToolDidNotRun()))
    script.replies = {3: first(operator_marks, then=refused)}
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the record moved under this call's release",
    )
    assert outcome.record is not None
    assert outcome.record.status is Status.UNCERTAIN
    assert script.state.reraise


def test_holds_is_a_going_calls_own_claim() -> None:
    protocol = HostProtocol(BINDING)
    ready = create_checkpoint(BINDING, created_at=AT)
    mine = claim_execution(ready, attempt_id=f"{TOKEN}.1", at=AT).next
    theirs = claim_execution(ready, attempt_id=f"{OTHER}.1", at=AT).next
    result = complete_execution(mine, attempt_id=f"{TOKEN}.1", at=AT, result=1).next
    delivering = claim_delivery(result, delivery_id=f"{OTHER}.2", at=AT).next
    _, state = protocol.start(TOKEN)
    assert state.holds(mine)
    assert state.holds(result)
    assert not state.holds(theirs)
    assert not state.holds(ready)
    assert not state.holds(delivering)
    assert not CallState(Phase.DONE, TOKEN).holds(mine)


# --- what a driver re-raises and stores ----------------------------------------------------


def test_an_unstorable_error_payload_is_uncertain_and_not_re_raised() -> None:
    def tool() -> Any:
        raise ValueError("refused")

    outcome = run_once(
        MemoryStore(), BINDING, tool, print, on_tool_error=lambda _error: float("nan")
    )
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the tool's result could not be stored: PAYLOAD_NOT_JSON",
    )


def test_a_cancelled_send_is_re_raised_and_left_delivering() -> None:
    store = MemoryStore()

    def deliver(_payload: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_once(store, BINDING, lambda: {"ok": 1}, deliver)
    assert (store.get(KEY) or {})["status"] == "delivering"

    async def cancelled(_payload: Any) -> None:
        raise asyncio.CancelledError

    other = MemoryStore()
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run_once_async(other, BINDING, lambda: {"ok": 1}, cancelled))
    assert (other.get(KEY) or {})["status"] == "delivering"


def test_a_failed_send_of_unknown_outcome_is_not_re_raised() -> None:
    def deliver(_payload: Any) -> None:
        raise TimeoutError

    outcome = run_once(MemoryStore(), BINDING, lambda: {"ok": 1}, deliver)
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
        "the send's outcome is unknown: TimeoutError",
    )


def test_an_unknown_outcome_keeps_its_reason_as_its_message() -> None:
    error = ToolOutcomeUnknown("the gateway timed out")
    assert (str(error), error.reason) == ("the gateway timed out", "the gateway timed out")


def test_an_unstorable_unknown_outcome_reason_is_replaced_by_a_fixed_one() -> None:
    def tool() -> Any:
        raise ToolOutcomeUnknown("x" * 100_000)

    done = run_once(MemoryStore(), BINDING, tool, print)
    assert done.reason == "the tool said its outcome is unknown (its reason could not be stored)"


# --- a payload limit above the default --------------------------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_raised_payload_limit_holds_for_every_record_of_the_call(driver: str) -> None:
    store = MemoryStore()
    big = {"body": "x" * 100_000}
    limit = 200_000
    failures = iter([True, False, False])

    def deliver(payload: Any) -> None:
        assert payload == big
        if next(failures):
            raise ConnectionRefusedError

    def call() -> RunOutcome:
        if driver == "sync":
            return run_once(store, BINDING, lambda: big, deliver, max_payload_bytes=limit)
        return asyncio.run(
            run_once_async(store, BINDING, lambda: big, deliver, max_payload_bytes=limit)
        )

    assert call().status is RunStatus.DELIVERY_FAILED
    again = call()
    assert again.status is RunStatus.DELIVERED_STORED_RESULT
    assert again.payload == big


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_both_drivers_take_the_calls_token_from_new_id(driver: str) -> None:
    store, token = MemoryStore(), "c" * 32
    if driver == "sync":
        outcome = run_once(store, BINDING, lambda: 1, print, new_id=lambda: token)
    else:
        outcome = asyncio.run(
            run_once_async(store, BINDING, lambda: 1, print, new_id=lambda: token)
        )
    assert outcome.record is not None
    assert outcome.record.execution is not None
    assert outcome.record.execution.attempt_id == f"{token}.1"


# --- operators, the reconcile hook and a lost record: the ids and the one answer ---------------


def operator_confirms(record: Checkpoint) -> Any:
    assert record.delivery is not None
    return complete_delivery(record, delivery_id=record.delivery.delivery_id, at=AT)


def test_a_result_that_landed_before_an_operator_moved_it_on_is_not_called_unstored() -> None:
    # the result's write lands, its reply is lost, and an operator confirms the delivery
    # before the read-back: the stored result is this call's own, so it is not overtaken
    script = Script()
    script.replies = {3: lost_reply, 4: first(operator_confirms, then=read)}
    outcome = script.run()
    assert (outcome.status, outcome.reason, outcome.unstored) == (
        RunStatus.ALREADY_DELIVERED,
        None,
        None,
    )
    assert outcome.payload == {"messageId": "m-1"}


def test_a_result_stored_over_an_uncertain_mark_is_resent_under_the_same_delivery_id() -> None:
    script = Script()
    script.replies = {3: first(operator_marks, then=refused), 5: fault}
    outcome = script.run()
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    swaps = [request.transition.next for request in script.requests if isinstance(request, Swap)]
    deliveries = [
        s.delivery.delivery_id for s in swaps if s.delivery and not s.delivery.delivered_at
    ]
    assert deliveries == [f"{TOKEN}.2", f"{TOKEN}.3", f"{TOKEN}.3"]  # the resend keeps its id


def stuck(store: MemoryStore | None = None) -> MemoryStore:
    store = store or MemoryStore()
    assert store.create_if_absent(KEY, create_claimed(BINDING, attempt_id="dead.1", at=AT).next)
    return store


def test_a_settle_another_worker_beat_is_followed_by_a_claim_with_a_new_id() -> None:
    def other_settles(record: Checkpoint) -> Any:
        return complete_execution(record, attempt_id="dead.1", at=AT, result={"by": "other"})

    script = Script(store=stuck())
    script.replies = {4: first(other_settles, then=refused)}
    protocol = HostProtocol(BINDING, write_budget=0, reconciles=True)
    request: Any
    request, state = protocol.start(TOKEN)
    while not isinstance(request, RunOutcome):
        script.requests.append(request)
        if isinstance(request, Reconcile):
            answer: Any = Found({"by": "hook"})
        else:
            reply = script.replies.get(len(script.requests))
            answer = reply(script.store, request) if reply else script.honest(request)
        request, state = protocol.step(state, answer)
    assert request.status is RunStatus.DELIVERED_STORED_RESULT
    assert request.payload == {"by": "other"}
    ids = [
        r.transition.next.delivery.delivery_id
        for r in script.requests
        if isinstance(r, Swap) and r.transition.next.delivery is not None
    ]
    assert ids[:2] == [f"{TOKEN}.2", f"{TOKEN}.3"]  # the settle's id is not reused


def _drive(protocol: HostProtocol, replies: Callable[[Any], Any]) -> tuple[RunOutcome, str]:
    """Run a call answering each request with ``replies(request)``; return the outcome and
    the requests' letters."""
    letters = {Create: "C", Get: "G", Swap: "S", RunTool: "T", Deliver: "D", Sleep: "Z"}
    request: Any
    request, state = protocol.start(TOKEN)
    kinds = ""
    while not isinstance(request, RunOutcome):
        kinds += letters.get(type(request), "?")
        assert len(kinds) < 500, "the call never ended"
        request, state = protocol.step(state, replies(request))
        check_state(request, state, held_retries(protocol.policy.write_budget))
    return request, kinds


def test_a_call_whose_lost_record_comes_back_released_never_runs_the_tool_again() -> None:
    theirs = create_claimed(BINDING, attempt_id=f"{OTHER}.1", at=AT).next
    released = release_execution(theirs, attempt_id=f"{OTHER}.1", at=AT).next
    script = iter([True, Returned({"n": 1}), StoreFault(), None, False, released.to_dict()])
    outcome, kinds = _drive(HostProtocol(BINDING, write_budget=0), lambda _: next(script))
    assert kinds.count("T") == 1
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the record vanished after the tool ran",
    )
    assert outcome.unstored is not None
    assert outcome.unstored.payload == {"n": 1}


def test_a_record_that_keeps_vanishing_ends_the_call_within_its_rounds() -> None:
    def replies(request: Any) -> Any:
        if isinstance(request, RunTool):
            return Returned({"n": 1})
        if isinstance(request, Create):
            return True  # the create and every restore land
        return StoreFault() if isinstance(request, Swap) else None  # and vanish again

    outcome, kinds = _drive(HostProtocol(BINDING, write_budget=0), replies)
    assert kinds.count("T") == 1
    assert kinds.count("C") <= ROUNDS + 1
    assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
    assert outcome.unstored is not None


def reference_held_retries(budget: float) -> int:
    """held_retries, written as the plain loop it stands for."""
    retries, waited = 1, 0.0
    while waited < budget:
        retries += 1
        waited += pause_before(retries)
    return retries


@pytest.mark.parametrize("budget", [0.01, 0.05, 0.1, 0.35, 1.55, 1.56, 5.0, 30.0, 100.3, 2500.0])
def test_the_budgets_count_is_the_plain_loops(budget: float) -> None:
    assert held_retries(budget) == reference_held_retries(budget)


def test_the_largest_budget_pauses_one_second_at_most_and_never_overflows() -> None:
    assert held_retries(1e6) == 6 + math.ceil(1e6 - 1.55)
    assert pause_before(10**6) == 1.0
    protocol = HostProtocol(BINDING, write_budget=1e6, monotonic=lambda: 0.0)
    request: Any
    request, state = protocol.start(TOKEN)
    request, state = protocol.step(state, True)
    request, state = protocol.step(state, Returned({"n": 1}))
    pauses = []
    for _ in range(2000):  # a long outage: the pauses stay at one second
        answer = None if isinstance(request, Sleep) else StoreFault()
        if isinstance(request, Sleep):
            pauses.append(request.seconds)
        request, state = protocol.step(state, answer)
    assert max(pauses) == 1.0


def test_an_uncertain_mark_an_operator_made_first_keeps_the_tools_reason() -> None:
    # the tool reports its outcome unknown; an operator marked the claim uncertain first
    unknown = Raised(ToolOutcomeUnknown("the gateway timed out"))
    script = Script(tool=constant(unknown))
    script.replies = {3: first(operator_marks, then=refused)}
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the gateway timed out",
    )
    assert outcome.record is not None
    assert outcome.record.status is Status.UNCERTAIN
    assert outcome.record.execution is not None
    assert outcome.record.execution.uncertain is not None
    assert outcome.record.execution.uncertain.reason == "operator"  # the stored one


def test_a_mark_whose_record_vanished_needs_reconciliation() -> None:
    unknown = Raised(ToolOutcomeUnknown("the gateway timed out"))
    script = Script(tool=constant(unknown))
    script.replies = {3: refused, 4: refused}  # the mark is refused, the read finds nothing
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "the gateway timed out",
    )
    assert outcome.record is not None
    assert outcome.record.status is Status.EXECUTING  # the last record this call knew


def test_a_release_whose_record_vanished_needs_delivery_reconciliation() -> None:
    script = Script(sent=constant(Raised(ConnectionRefusedError())))
    script.replies = {5: refused, 6: refused}  # the release is refused, the read finds nothing
    outcome = script.run()
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
        "the record moved under this call's delivery",
    )
    assert script.kinds == "CTSDSG"


def test_the_hook_is_asked_once_even_when_its_settle_is_refused() -> None:
    asked: list[object] = []

    def replies(request: Any) -> Any:
        if isinstance(request, Create):
            return False  # a record is stored: the dead worker's claim
        if isinstance(request, Get):
            stuck = create_claimed(BINDING, attempt_id="dead.1", at=AT).next
            return (stuck if not asked else operator_marks(stuck).next).to_dict()
        if isinstance(request, Reconcile):
            asked.append(request)
            return Found({"by": "hook"})
        return False  # the settle is refused: the owner marked its claim uncertain first

    protocol = HostProtocol(BINDING, write_budget=0, reconciles=True)
    outcome, _ = _drive(protocol, replies)
    assert len(asked) == 1
    assert outcome.status is RunStatus.LOST_TO_ANOTHER_WORKER  # its settle lost to the owner


def test_the_hook_is_never_asked_about_the_calls_own_claim() -> None:
    # this call's claim lands, its reply is lost, and an operator marks it uncertain before
    # the read-back: the claim is this call's own, so nobody is asked to settle it
    store = MemoryStore()
    assert store.create_if_absent(KEY, create_checkpoint(BINDING, created_at=AT))
    script = Script(store=store)
    script.replies = {3: lost_reply, 4: first(operator_marks, then=read)}
    protocol = HostProtocol(BINDING, write_budget=0, reconciles=True)
    outcome = script.run(protocol)
    assert not any(isinstance(request, Reconcile) for request in script.requests)
    assert (outcome.status, outcome.reason) == (
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        "operator",
    )
    assert not outcome.ran_tool


def test_each_write_tells_the_store_the_durability_the_table_declares_for_its_step() -> None:
    """The result with its delivery claim is durable; the delivered mark is not, and says
    so with the write (a store cannot tell it by its status: the hand-back step lands in
    delivered durably)."""
    store = CountingStore()
    outcome = run_once(store, BINDING, lambda: {"ok": 1}, lambda _payload: None)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert store.writes == [
        Write("create", Status.EXECUTING, True),
        Write("swap", Status.DELIVERING, TABLE.composed["complete_and_claim_delivery"].durable),
        Write("swap", Status.DELIVERED, TABLE.transitions["complete_delivery"].durable),
    ]
    assert [write.durable for write in store.writes] == [True, True, False]


HANDS_BACK = HostProtocol(BINDING, write_budget=0, hands_back=True)


def test_every_state_of_a_host_that_hands_back_keeps_the_invariants_under_faults() -> None:
    outcomes = set()
    for tool, replies in itertools.product(TOOL_ANSWERS, faults_of_one_call()):
        script = Script(replies=replies, tool=constant(tool))
        outcomes.add(script.run(HANDS_BACK).status)
        assert "D" not in script.kinds  # nothing is sent: the result is stored delivered
        outcomes.add(Script(store=script.store).run(HANDS_BACK, token=OTHER).status)
    for replies in pairs_of_faults():
        outcomes.add(Script(replies=replies).run(HANDS_BACK).status)
    assert {
        RunStatus.EXECUTED_AND_DELIVERED,
        RunStatus.STORE_UNAVAILABLE,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.RELEASED,
        RunStatus.ALREADY_DELIVERED,
    } <= outcomes


def test_a_host_that_hands_back_stores_its_result_delivered_in_one_swap() -> None:
    script = Script()
    outcome = script.run(HANDS_BACK)
    assert script.kinds == "CTS"
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERED
    assert outcome.payload == {"messageId": "m-1"}
    [swap] = [request for request in script.requests if isinstance(request, Swap)]
    assert swap.transition.action is Action.HAND_BACK
    assert swap.durable is True
    assert script.store.get(KEY) == outcome.record.to_dict()
    again = Script(store=script.store)
    replay = again.run(HANDS_BACK, token=OTHER)
    assert (again.kinds, replay.status, replay.payload) == (
        "CG",
        RunStatus.ALREADY_DELIVERED,
        {"messageId": "m-1"},
    )


def test_a_host_that_hands_back_claims_and_marks_a_completed_record_it_finds() -> None:
    """An operator's completion is handed back through the separate delivery claim and
    mark: the hand-back step only stores a result."""
    script = Script(store=completed_by_other())
    outcome = script.run(HANDS_BACK)
    assert script.kinds == "CGSDS"
    assert outcome.status is RunStatus.DELIVERED_STORED_RESULT
    assert outcome.payload == {"by": "other"}


def test_a_host_that_hands_back_settles_a_found_effect_in_one_swap() -> None:
    store = MemoryStore()
    theirs = create_claimed(BINDING, attempt_id=f"{OTHER}.1", at=AT).next
    assert store.create_if_absent(KEY, theirs)
    protocol = HostProtocol(BINDING, write_budget=0, hands_back=True, reconciles=True)
    request: Any
    request, state = protocol.start(TOKEN)
    answers = iter([False, store.get(KEY), Found({"found": 1})])
    while isinstance(request, Create | Get | Reconcile):
        request, state = protocol.step(state, next(answers))
    assert isinstance(request, Swap)
    assert request.transition.action is Action.HAND_BACK
    assert store.compare_and_swap(
        KEY, request.transition.expected_revision, request.transition.next
    )
    outcome, _ = protocol.step(state, True)
    assert isinstance(outcome, RunOutcome)
    assert (outcome.status, outcome.reason) == (
        RunStatus.DELIVERED_STORED_RESULT,
        "reconciled: found",
    )
    assert outcome.payload == {"found": 1}


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_run_once_hands_back_in_two_writes_given_hand_back(driver: str) -> None:
    store = CountingStore()
    if driver == "sync":
        outcome = run_once(store, BINDING, lambda: {"ok": 1}, hand_back)
    else:
        outcome = asyncio.run(run_once_async(store, BINDING, lambda: {"ok": 1}, hand_back))
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.payload == {"ok": 1}
    assert store.writes == [
        Write("create", Status.EXECUTING, True),
        Write("swap", Status.DELIVERED, True),
    ]


# --- the delivered mark sent unanswered ----------------------------------------------------


def posted(store: MemoryStore, request: object) -> Any:
    """The write was sent unanswered and landed."""
    lost_reply(store, request)
    return Posted()


def posted_and_lost(store: MemoryStore, request: object) -> Any:
    """The write was sent unanswered and lost."""
    del store, request
    return Posted()


@pytest.mark.parametrize("answer", [posted, posted_and_lost])
def test_a_posted_mark_ends_on_the_delivering_record_it_knows(answer: Answer) -> None:
    script = Script(replies={5: answer})
    outcome = script.run()
    assert script.kinds == "CTSDS"
    final = script.requests[-1]
    assert isinstance(final, Swap)
    assert not final.durable  # only a non-durable write may be posted
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason == MARK_POSTED
    assert outcome.record is not None
    assert outcome.record.status is Status.DELIVERING
    assert outcome.record.revision == final.transition.expected_revision
    stored = script.store.get(KEY)
    assert stored is not None
    assert stored["status"] == ("delivered" if answer is posted else "delivering")


def test_a_durable_write_answered_posted_is_read_back_not_trusted() -> None:
    script = Script(replies={3: posted_and_lost})  # the result's write, durable
    outcome = script.run()
    assert script.kinds.startswith("CTSG")  # read back, then resent
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    assert outcome.reason is None


def test_every_posted_phase_writes_only_non_durable_steps() -> None:
    assert POSTED  # the delivered mark
    assert not any(DURABLE[phase] for phase in POSTED)


def test_the_call_state_is_replaced_field_by_field_as_a_named_tuple_would() -> None:
    state = CallState(Phase.CREATE, "token")
    changed: Any = state._replace(phase=Phase.LOAD, rounds=3, reason="why")
    assert type(changed) is CallState
    assert changed == (Phase.LOAD, "token", *state[2:8], 3, *state[9:11], "why", *state[12:])
    assert state == CallState(Phase.CREATE, "token")  # the original is kept
    loose: Any = changed
    assert loose._replace() == changed
    for name, value in zip(CallState._fields, changed, strict=True):
        assert getattr(loose._replace(**{name: value}), name) == value
    loose = state
    with pytest.raises(ValueError, match="unexpected field names"):
        loose._replace(phases=Phase.LOAD)
