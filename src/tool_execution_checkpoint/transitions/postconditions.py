"""The transitions' promises, as icontract postconditions (see
:mod:`tool_execution_checkpoint.transitions`).

Each transition promises that its input is unchanged, that its next record validates at
one past the input's revision, that it leaves from, lands in and grants what the table
says, that no transition leaves a claim for ready and only an executing record is
released, that the binding, the creation time and a completed payload never change; a
composed step promises that its next record is exactly the one its parts make, one after
the other. decide promises the status's action from the table, execute only for ready and
released. These checks catch bugs in this library; they never signal a caller's mistake.

They run only when the environment sets ``TOOL_CHECKPOINT_CONTRACTS=1`` (and Python does
not run with ``-O``), read once at import: :data:`CONTRACTS_ENABLED`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import icontract

from ..errors import CheckpointError
from ..records import Binding, Checkpoint
from ..table import EXECUTABLE, TABLE, Action, ComposedRule, Status, TransitionRule

if TYPE_CHECKING:
    from .values import Decision, Timestamp, Transition

__all__ = ["CONTRACTS_ENABLED"]

CONTRACTS_ENABLED: bool = __debug__ and os.environ.get("TOOL_CHECKPOINT_CONTRACTS") == "1"
"""Whether the icontract postconditions run (read once, at import): only when the
environment sets TOOL_CHECKPOINT_CONTRACTS=1."""

RULES: Mapping[str, TransitionRule | ComposedRule] = {**TABLE.transitions, **TABLE.composed}
"""The table's transitions and composed steps, by name."""

_CLAIMED = frozenset({Status.EXECUTING, Status.UNCERTAIN})


class _Parts:
    """The steps a composed step is checked against: ``steps`` sets them once they are
    defined (it imports this module first, so this module cannot import them)."""

    create_checkpoint: Callable[..., Checkpoint]
    claim_execution: Callable[..., Transition]
    complete_execution: Callable[..., Transition]
    claim_delivery: Callable[..., Transition]
    complete_delivery: Callable[..., Transition]


PARTS = _Parts()


# --- the transitions ------------------------------------------------------------------------


def _as_checkpoint(record: object) -> Checkpoint | None:
    """The input as a Checkpoint, or None when it is not a valid record.

    Used by the contracts, so it must never raise: an invalid input makes the function
    raise CheckpointError before any postcondition is evaluated."""
    if type(record) is Checkpoint:
        return record
    try:
        return Checkpoint.from_dict(
            record, max_payload_bytes=TABLE.limits.ceiling_max_payload_bytes
        )
    except CheckpointError:
        return None


def _unchanged(before: Checkpoint, record: object) -> bool:
    """The input still reads as the record it was before the call. A Checkpoint is
    immutable; a mapping is read again, so any change to it shows."""
    after = _as_checkpoint(record)
    return after is before or after == before


def _conforms(checkpoint: Checkpoint, since: Checkpoint | None = None) -> bool:
    """The record is a Checkpoint that the validating constructors would accept: every
    field and part checked again (but the parts it shares with ``since``), and the parts
    exactly what its status needs."""
    if type(checkpoint) is not Checkpoint:
        return False
    try:
        checkpoint.recheck(since)
    except CheckpointError:
        return False
    return True


def _leaves_claim_for_ready(before: Checkpoint, after: Checkpoint) -> bool:
    return before.status in _CLAIMED and after.status is Status.READY


def _releases_other_than_executing(before: Checkpoint, after: Checkpoint) -> bool:
    return after.status is Status.RELEASED and before.status is not Status.EXECUTING


def _payload_kept(before: Checkpoint, after: Checkpoint) -> bool:
    """A stored result stays as it is, except that a delivered one may be pruned: its
    payload dropped, its completion time kept."""
    old = before.result
    if old is None or after.result is old or after.result == old:
        return True
    return (
        before.status is Status.DELIVERED
        and old.pruned_at is None
        and after.result is not None
        and after.result.pruned_at is not None
        and after.result.completed_at == old.completed_at
    )


_F = TypeVar("_F", bound="Callable[..., Transition]")


def _broken_promise(
    name: str, before: Checkpoint | None, record: object, transition: Transition
) -> str | None:
    """The first promise of transition ``name`` that ``transition`` breaks, or None.

    ``before`` is the input read before the call (None when it was not a valid record,
    which cannot happen once the call returned), ``record`` the input after the call."""
    following = transition.next
    if before is None:  # pragma: no mutate block (unreachable: such a call raised already)
        return "the input is a valid record"
    if not _unchanged(before, record):
        return "the input record is unchanged"
    if not _conforms(following, before):
        return "next validates"
    if not (
        transition.expected_revision == before.revision
        and following.revision == transition.expected_revision + 1
    ):
        return "expected_revision is the input's revision and next is one past it"
    if _leaves_claim_for_ready(before, following):
        return "no transition leaves executing or uncertain for ready"
    if _releases_other_than_executing(before, following):
        return "only an executing record is released"
    if (following.binding is not before.binding and following.binding != before.binding) or (
        following.created_at != before.created_at
    ):
        return "the binding and creation time never change"
    if not _payload_kept(before, following):
        return "a completed payload never changes"
    rule = RULES[name]
    if not (
        before.status in rule.sources
        and following.status is rule.target
        and transition.action is rule.grants
    ):
        return f"{name} leaves from, lands in and grants what the table says"
    return None


def _transition_contracts(name: str) -> Callable[[_F], _F]:
    """The postcondition every transition promises, for the table's transition ``name``:
    one icontract condition over all the promises, so that a call pays icontract's
    per-condition cost once; a violation names the first promise broken."""

    def keeps_every_promise(OLD: Any, record: object, result: Transition) -> bool:
        return _broken_promise(name, OLD.record, record, result) is None

    def violation(OLD: Any, record: object, result: Transition) -> icontract.ViolationError:
        broken = _broken_promise(name, OLD.record, record, result)
        return icontract.ViolationError(f"{name} broke a promise: {broken}")

    enabled = CONTRACTS_ENABLED
    # The snapshot is named after _as_checkpoint's argument: OLD.record. A violation's
    # message comes from ``violation``, so the condition needs no description.
    snapshot = icontract.snapshot(_as_checkpoint, enabled=enabled)
    ensure = icontract.ensure(keeps_every_promise, error=violation, enabled=enabled)

    def decorate(function: _F) -> _F:
        return snapshot(ensure(function))

    return decorate


def _same_but_revision(made: Checkpoint, parts: Checkpoint) -> bool:
    """``made`` is the record ``parts`` made, but for the revision: a composed step is one
    write, so its record is one past the stored revision however many parts it has."""
    return (
        made.status is parts.status
        and made.binding == parts.binding
        and made.created_at == parts.created_at
        and made.updated_at == parts.updated_at
        and made.execution == parts.execution
        and made.result == parts.result
        and made.delivery == parts.delivery
    )


def _broken_creation(binding: Binding, transition: Transition, parts: Transition) -> str | None:
    """The first promise of create_claimed that ``transition`` breaks, or None;
    ``parts`` is what its parts make (create_checkpoint, then claim_execution)."""
    rule = TABLE.composed["create_claimed"]
    following = transition.next
    if not _conforms(following):
        return "next validates"
    if not (transition.expected_revision == 0 and following.revision == TABLE.initial_revision):
        return "a created record is at the initial revision, over no record"
    if following.binding is not binding:
        return "the record is the binding's"
    if following.status is not rule.target or transition.action is not rule.grants:
        return "create_claimed lands in and grants what the table says"
    if not _same_but_revision(following, parts.next):
        return "next is the record its parts make"
    return None


def _broken_composition(
    OLD: Any, name: str, record: object, arguments: Mapping[str, Any], result: Transition
) -> str | None:
    """The first promise of the composed step ``name`` over a record (one that stores a
    result and claims its delivery) that ``result`` breaks, or None: every promise of a
    transition, and its next record is exactly the one its parts make with the same
    keyword ``arguments``."""
    promise = _broken_promise(name, OLD.record, record, result)
    if promise is not None:
        return promise
    parts = _completed_by_parts(name, OLD.record, arguments)
    if not _same_but_revision(result.next, parts.next):
        return "next is the record its parts make"
    return None


# icontract hands a condition the call's keyword arguments as ``_KWARGS``: the composed
# step takes all but its name and ``record`` by keyword.


def _made_by_its_parts(
    OLD: Any, name: str, record: object, _KWARGS: Mapping[str, Any], result: Transition
) -> bool:
    return _broken_composition(OLD, name, record, _KWARGS, result) is None


def _composition_violation(
    OLD: Any, name: str, record: object, _KWARGS: Mapping[str, Any], result: Transition
) -> icontract.ViolationError:
    broken = _broken_composition(OLD, name, record, _KWARGS, result)
    return icontract.ViolationError(f"{name} broke a promise: {broken}")


# --- create and decide ------------------------------------------------------------------


def _a_right_new_record(binding: Binding, result: Checkpoint) -> bool:
    return (
        _conforms(result)
        and result.binding is binding
        and result.status is TABLE.initial_status
        and result.revision == TABLE.initial_revision
    )


def _wrong_decision(decision: Decision) -> str | None:
    """The first promise of decide that ``decision`` breaks, or None."""
    if decision.action is Action.EXECUTE and decision.status not in EXECUTABLE:
        return "decide answers execute for ready and released only"
    if decision.action is not TABLE.statuses[decision.status].action:
        return "decide answers the status's action from the table"
    return None


def _decides_right(result: Decision) -> bool:
    return _wrong_decision(result) is None


def _decision_violation(result: Decision) -> icontract.ViolationError:
    return icontract.ViolationError(f"decide broke a promise: {_wrong_decision(result)}")


# --- the composed steps -----------------------------------------------------------------


def _created_claimed_by_parts(binding: Binding, attempt_id: str, at: Timestamp) -> Transition:
    created = PARTS.create_checkpoint(binding, created_at=at)
    return PARTS.claim_execution(created, attempt_id=attempt_id, at=at)


def _creates_by_its_parts(
    binding: Binding, attempt_id: str, at: Timestamp, result: Transition
) -> bool:
    return (
        _broken_creation(binding, result, _created_claimed_by_parts(binding, attempt_id, at))
        is None
    )


def _creation_violation(
    binding: Binding, attempt_id: str, at: Timestamp, result: Transition
) -> icontract.ViolationError:
    parts = _created_claimed_by_parts(binding, attempt_id, at)
    return icontract.ViolationError(
        f"create_claimed broke a promise: {_broken_creation(binding, result, parts)}"
    )


def _completed_by_parts(name: str, before: Checkpoint, arguments: Mapping[str, Any]) -> Transition:
    """What the table's parts of the composed step ``name`` over a record make of
    ``before``, one after the other, with the step's keyword ``arguments`` (the parts are
    complete_execution, claim_delivery and, for the hand-back step, complete_delivery)."""
    at, ceiling = arguments["at"], arguments["max_payload_bytes"]
    claim = {"delivery_id": arguments["delivery_id"]}
    completion = {"attempt_id": arguments["attempt_id"], "result": arguments["payload"]}
    given = {"complete_execution": completion, "claim_delivery": claim, "complete_delivery": claim}
    record, step = before, None
    for part in TABLE.composed[name].parts:
        function: Callable[..., Transition] = getattr(PARTS, part)
        step = function(record, at=at, max_payload_bytes=ceiling, **given[part])
        record = step.next
    assert step is not None  # a composed step has two parts or more
    return step
