"""The invariants of a world of workers: what must hold whatever workers, crashes, stale
replays, faults and operators did to one checkpoint.

The model-based harness (:mod:`.harness`) and the exhaustive explorer
(``proofs/explore.py``) keep, each in its own way, what happened outside the store: every
run of the tool and the payload it produced, every delivery that arrived, whether the
record was claimed, and the call's one answer (the first result stored). They check it
here, with the same rules and the same messages:

- the tool ran at most once;
- every delivery carried the call's one answer, which is the payload the single execution
  produced (or the operator's "did not run" payload), and nothing arrived twice;
- the stored payload is that answer until a delivered one is pruned, and only a delivered
  one is pruned;
- decide never answers execute once the record was claimed, unless the claim was released
  by an attempt whose tool did not run (:func:`note_landed` refuses any other release);
- the stored record validates and survives a round trip through its persisted form;

and of a finished call (:func:`check_outcome`), and of the fences (:func:`check_fences`).
With operators racing live workers (``racing``), a payload may be the operator's instead of
the execution's and a delivery the operator released may arrive twice; one answer per call
holds either way. A broken rule raises :class:`Violation`, naming the rule, never a payload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from .. import transitions
from ..errors import CheckpointError, ErrorCode
from ..records import Binding, Checkpoint
from ..runner import CallState, RunOutcome, RunStatus, claim_id
from ..table import TABLE, Action, ComposedRule, Fence, Status, TransitionRule
from ..transitions import Transition, decide_checkpoint, validate_checkpoint

__all__ = [
    "Violation",
    "World",
    "check_fences",
    "check_outcome",
    "check_world",
    "note_landed",
    "produced",
]

INTRUDER = "intruder"
"""The attempt id and delivery id of a worker that holds no claim."""


class Violation(AssertionError):
    """A broken invariant of a world of workers."""


class World(Protocol):
    """What happened outside the store for one checkpoint."""

    @property
    def executions(self) -> Sequence[tuple[str, str]]:
        """Each run of the tool: its attempt id and the compact JSON payload it produced."""
        ...

    @property
    def deliveries(self) -> Sequence[tuple[str, str]]:
        """Each delivery that arrived: its delivery id and the payload text it carried."""
        ...

    @property
    def claimed(self) -> bool:
        """Whether the record is claimed: an execution's claim landed and was not
        released since."""
        ...

    @property
    def reconciled(self) -> str | None:
        """The payload text an operator stored for an execution that did not run."""
        ...

    @property
    def answer(self) -> str | None:
        """The call's one answer: the payload text of the first result stored."""
        ...

    @property
    def racing(self) -> bool:
        """Whether operators also act on claims whose worker is still going."""
        ...


def produced(world: World) -> str | None:
    """The payload the world produced: the single execution's, or the operator's."""
    return world.executions[0][1] if world.executions else world.reconciled


def note_landed(
    world: World, before: Checkpoint | None, written: Checkpoint
) -> tuple[bool, str | None]:
    """What ``written`` landing over ``before`` makes of the world: whether the record is
    claimed, and the call's one answer.

    Raises:
        Violation: the write released an execution whose tool ran.
    """
    claimed = world.claimed or written.status is Status.EXECUTING
    if written.status is Status.RELEASED:
        assert before is not None and before.execution is not None  # only executing releases
        owner = before.execution.attempt_id
        if any(attempt == owner for attempt, _ in world.executions):
            raise Violation("an execution whose tool ran was released")
        claimed = False
    answer = world.answer
    if answer is None and written.result is not None:
        answer = written.result.payload_json  # the call's one answer, from now on
    return claimed, answer


def check_world(world: World, stored: Checkpoint | None, binding: Binding) -> None:
    """Raise :class:`Violation` if the world and the record stored for ``binding`` (None:
    no record) break an invariant (see the module docstring)."""
    runs = len(world.executions)
    if runs > 1:
        raise Violation(f"the tool ran {runs} times for {binding.call_id}")
    for _, delivered in world.deliveries:
        if delivered != world.answer:
            raise Violation("a delivery carried another payload than the call's one answer")
    if not world.racing and world.answer is not None and world.answer != produced(world):
        raise Violation("the stored payload is not the one the execution produced")
    arrived = len(world.deliveries)
    if not world.racing and arrived > 1:
        raise Violation(f"the payload arrived {arrived} times for {binding.call_id}")
    if stored is None:
        return
    if Checkpoint.from_dict(stored.to_dict()) != stored or not validate_checkpoint(stored):
        raise Violation("the stored record does not survive its persisted form")
    if world.claimed and decide_checkpoint(stored, binding).action is Action.EXECUTE:
        raise Violation("decide says execute for a record that was claimed")
    result = stored.result
    if result is not None and result.pruned_at is None and result.payload_json != world.answer:
        raise Violation("the stored payload changed: the call has two answers")
    if (
        result is not None
        and result.pruned_at is not None
        and stored.status is not (Status.DELIVERED)
    ):
        raise Violation("a payload was pruned before delivery")


def check_outcome(
    world: World, call: CallState, outcome: RunOutcome, stored: Checkpoint | None = None
) -> None:
    """Raise :class:`Violation` if what a finished call reports is not true; given the
    record ``stored`` now, also if the outcome's record is newer than it (a write that
    never landed, reported as known)."""
    if call.pending is not None or call.writing is not None:
        raise Violation("a finished call still holds a write in flight")
    record = outcome.record
    if record is not None and stored is not None and record.revision > stored.revision:
        raise Violation("an outcome reported a record the store never held")
    lost = outcome.status is RunStatus.LOST_TO_ANOTHER_WORKER
    if lost and record is not None and call.owns(claim_id(record)):
        raise Violation("a call reported its own claim as another worker's")
    result = record.result if record is not None else None
    if outcome.has_payload and result is not None and result.payload_json != world.answer:
        raise Violation("an outcome carried another payload than the call's one answer")
    if outcome.unstored is not None:
        mine = [text for attempt, text in world.executions if call.owns(attempt)]
        if mine != [outcome.unstored.payload_json]:
            raise Violation("an outcome's unstored result is not what its tool produced")


def check_fences(stored: Checkpoint, at: str) -> None:
    """Raise :class:`Violation` unless every fenced transition and composed step the table
    allows from the stored status refuses a foreign attempt id or delivery id with
    FENCE_CONFLICT."""
    rules: list[TransitionRule | ComposedRule] = [*TABLE.transitions.values()]
    for rule in [*rules, *TABLE.composed.values()]:
        if stored.status not in rule.sources or rule.fence is Fence.NONE:
            continue
        function: Callable[..., Transition] = getattr(transitions, rule.name)
        arguments: dict[str, object] = {"at": at}
        if rule.name in TABLE.composed:  # it stores a result and claims its delivery
            arguments["delivery_id"] = INTRUDER
        arguments["attempt_id" if rule.fence is Fence.ATTEMPT_ID else "delivery_id"] = INTRUDER
        if rule.name == "complete_execution" or rule.name in TABLE.composed:
            arguments["result"] = 0
        if rule.name == "mark_execution_uncertain":
            arguments["reason"] = INTRUDER
        try:
            function(stored, **arguments)
        except CheckpointError as error:
            if error.code is not ErrorCode.FENCE_CONFLICT:
                raise Violation(f"{rule.name} refused an intruder with {error.code}") from None
        else:
            raise Violation(f"{rule.name} let a foreign id finish the claim")
