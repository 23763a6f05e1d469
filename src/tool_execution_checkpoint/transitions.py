"""Create, decide and transition: pure functions whose guards are read off the table.

Each function takes a record, either a :class:`~tool_execution_checkpoint.Checkpoint` or
the mapping loaded from storage, validates it once, and returns a value; nothing is read
or written anywhere. A :class:`~tool_execution_checkpoint.records.StoredRecord` (the
mapping a store of this package reads) was validated when it was read: only its payload's
size is checked against the call's limit. A transition returns a :class:`Transition` ``(action,
expected_revision, next)``: the host writes ``next`` with its store's atomic
compare-and-swap from ``expected_revision`` and does ``action`` only if that swap won.

Which statuses a transition leaves from, where it lands, which fence it checks and what
it grants all come from :data:`~tool_execution_checkpoint.table.TABLE`. The functions
here only build the parts of the next record that the table says the transition sets.
The table's composed steps (:func:`create_claimed`, :func:`complete_and_claim_delivery`)
are one write each: their postcondition checks that the next record is exactly the one
their parts make, one after the other, at one past the stored revision.

The icontract postconditions state what this module promises and catch bugs in it; they
never signal a caller's mistake (bad input raises :class:`CheckpointError` whether
contracts are on or off). They are off unless the environment sets
``TOOL_CHECKPOINT_CONTRACTS=1`` (and Python does not run with ``-O``): they check this
library's own code, which the test suite, the explorer and the mutation run exercise with
them on, and they cost a production call more than the rest of the core does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias, TypeVar

import icontract

from .errors import CheckpointError, ErrorCode
from .records import (
    Binding,
    Checkpoint,
    Delivery,
    Execution,
    Result,
    checked_checkpoint,
    checked_delivery,
    checked_execution,
    checked_result,
    checked_uncertainty,
    first_part,
    mask_of_parts,
    present_mask,
    within_payload_limit,
)
from .table import EXECUTABLE, TABLE, Action, ComposedRule, Fence, Status, TransitionRule
from .validation import (
    check_identifier,
    check_max_payload_bytes,
    check_reason,
    timestamp_argument,
)

__all__ = [
    "CONTRACTS_ENABLED",
    "Decision",
    "RecordLike",
    "Transition",
    "claim_delivery",
    "claim_execution",
    "complete_and_claim_delivery",
    "complete_delivery",
    "complete_execution",
    "create_checkpoint",
    "create_claimed",
    "decide_checkpoint",
    "mark_execution_uncertain",
    "prune_result",
    "release_delivery",
    "release_execution",
    "validate_checkpoint",
]

RecordLike: TypeAlias = Checkpoint | Mapping[str, Any]
"""A record as a :class:`Checkpoint` or as the mapping loaded from storage (a
:class:`~tool_execution_checkpoint.records.StoredRecord` from this package's stores)."""

Timestamp: TypeAlias = str | datetime
"""An RFC 3339 str, or a timezone-aware datetime."""

DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes

CONTRACTS_ENABLED: bool = __debug__ and os.environ.get("TOOL_CHECKPOINT_CONTRACTS") == "1"
"""Whether the icontract postconditions run (read once, at import): only when the
environment sets TOOL_CHECKPOINT_CONTRACTS=1."""

_CLAIMED = frozenset({Status.EXECUTING, Status.UNCERTAIN})
_RULES: Mapping[str, TransitionRule | ComposedRule] = {**TABLE.transitions, **TABLE.composed}
_REQUIRES_NULL = {name: mask_of_parts(rule.requires_null) for name, rule in _RULES.items()}
_MAX_REVISION = TABLE.limits.max_revision


class Decision(NamedTuple):
    """What a loaded record says to do for a binding: ``(action, status, revision,
    checkpoint)``.

    Attributes:
        action: The recovery action of the record's status (``execute`` only for ready).
        status: The record's status.
        revision: The record's revision: the expected revision of the next transition.
        checkpoint: The validated record, to pass on to the next transition.
    """

    action: Action
    status: Status
    revision: int
    checkpoint: Checkpoint


class Transition(NamedTuple):
    """The result of a transition, ``(action, expected_revision, next)``: act on it only
    after the store's compare-and-swap from ``expected_revision`` to ``next`` succeeded.

    Attributes:
        action: What a won swap grants: ``execute`` after claim_execution, ``deliver``
            after claim_delivery, ``none`` after the others.
        expected_revision: The revision the stored record must still have.
        next: The record to store, at ``expected_revision + 1``.
    """

    action: Action
    expected_revision: int
    next: Checkpoint


# --- contracts --------------------------------------------------------------------------


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


_F = TypeVar("_F", bound=Callable[..., Transition])


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
    rule = _RULES[name]
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


def _broken_delivery_claim(
    *,
    OLD: Any,
    record: object,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
    result: Transition,
) -> str | None:
    """The first promise of complete_and_claim_delivery that ``result`` breaks, or None:
    every promise of a transition, and its next record is exactly the one its parts make
    (complete_execution, then claim_delivery, with the same arguments)."""
    name = "complete_and_claim_delivery"
    promise = _broken_promise(name, OLD.record, record, result)
    if promise is not None:
        return promise
    parts = _completed_and_claimed_by_parts(
        OLD.record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=payload,
        max_payload_bytes=max_payload_bytes,
    )
    if not _same_but_revision(result.next, parts.next):
        return "next is the record its parts make"
    return None


def _claims_delivery_by_its_parts(
    *,
    OLD: Any,
    record: object,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
    result: Transition,
) -> bool:
    broken = _broken_delivery_claim(
        OLD=OLD,
        record=record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=payload,
        max_payload_bytes=max_payload_bytes,
        result=result,
    )
    return broken is None


def _delivery_claim_violation(
    *,
    OLD: Any,
    record: object,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
    result: Transition,
) -> icontract.ViolationError:
    broken = _broken_delivery_claim(
        OLD=OLD,
        record=record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=payload,
        max_payload_bytes=max_payload_bytes,
        result=result,
    )
    return icontract.ViolationError(f"complete_and_claim_delivery broke a promise: {broken}")


# --- the engine -------------------------------------------------------------------------


def _load(record: object, max_payload_bytes: int) -> Checkpoint:
    """Validate a record, as a Checkpoint or as a raw mapping, under a payload limit.

    A Checkpoint is valid by construction, and a
    :class:`~tool_execution_checkpoint.records.StoredRecord` was validated when its store
    read it, so only their payload's size is checked against this call's limit; any other
    mapping is validated in full."""
    limit = check_max_payload_bytes(max_payload_bytes)
    if type(record) is Checkpoint:
        return within_payload_limit(record, limit)
    return Checkpoint.from_dict(record, max_payload_bytes=limit)


def _guard(
    name: str, record: Checkpoint, claim_id: str | None = None
) -> TransitionRule | ComposedRule:
    """Return the table's rule for ``name`` if it may leave from ``record`` for this caller.

    Raises:
        CheckpointError: INVALID_TRANSITION when the record's status is not one the rule
            leaves from or the record holds a part the rule requires null; FENCE_CONFLICT
            when the rule is fenced and ``claim_id`` is not the
            stored attempt id or delivery id.
    """
    rule = _RULES[name]
    if record.status not in rule.sources:
        raise CheckpointError(
            ErrorCode.INVALID_TRANSITION,
            f"{name} leaves from {', '.join(rule.sources)}, not from {record.status}",
            field="status",
        )
    blocked = present_mask(record.execution, record.result, record.delivery) & _REQUIRES_NULL[name]
    if blocked:
        raise CheckpointError(
            ErrorCode.INVALID_TRANSITION, f"{name} needs it null", field=first_part(blocked)
        )
    # The loader lets a fenced transition leave only statuses that require the part
    # holding the owner, and the record's shape was checked when it was built.
    if rule.fence is Fence.ATTEMPT_ID:
        assert record.execution is not None
        owner, argument = record.execution.attempt_id, "attempt_id"
    elif rule.fence is Fence.DELIVERY_ID:
        assert record.delivery is not None
        owner, argument = record.delivery.delivery_id, "delivery_id"
    else:
        return rule
    if owner != claim_id:
        raise CheckpointError(
            ErrorCode.FENCE_CONFLICT, f"does not own the claim that {name} finishes", field=argument
        )
    return rule


def _advance(
    rule: TransitionRule | ComposedRule,
    record: Checkpoint,
    at: str,
    *,
    execution: Execution | None,
    result: Result | None,
    delivery: Delivery | None,
) -> Transition:
    """Build the next record: the rule's target status, revision + 1, ``at`` as updatedAt,
    the binding and creation time kept, and the given parts (each transition passes the
    parts it keeps and the ones it sets or clears). Only the shape is checked: every part
    comes checked."""
    if record.revision >= _MAX_REVISION:
        raise CheckpointError(
            ErrorCode.INVALID_TRANSITION,
            "the record has reached the largest revision",
            field="revision",
            limit=_MAX_REVISION,
        )
    revision = record.revision
    following = checked_checkpoint(
        revision + 1,
        rule.target,
        record.binding,
        record.created_at,
        at,
        execution=execution,
        result=result,
        delivery=delivery,
    )
    return Transition(rule.grants, revision, following)


# --- the public functions ---------------------------------------------------------------


def _a_right_new_record(binding: Binding, result: Checkpoint) -> bool:
    return (
        _conforms(result)
        and result.binding is binding
        and result.status is TABLE.initial_status
        and result.revision == TABLE.initial_revision
    )


@icontract.ensure(
    _a_right_new_record,
    "a new record validates, and is the binding's, in the initial status and revision",
    enabled=CONTRACTS_ENABLED,
)
def create_checkpoint(binding: Binding, *, created_at: Timestamp) -> Checkpoint:
    """Return a new record for ``binding``: status ready, revision 1.

    Store it with create-if-absent. If a record already exists under its key, load that
    one and decide on it instead: never overwrite.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a binding that is not a Binding or a bad
            ``created_at``.
    """
    if type(binding) is not Binding:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
    at = timestamp_argument(created_at, "created_at")
    return checked_checkpoint(TABLE.initial_revision, TABLE.initial_status, binding, at, at)


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


@icontract.ensure(
    _decides_right,
    "decide answers execute for ready only, and the status's action from the table",
    error=_decision_violation,
    enabled=CONTRACTS_ENABLED,
)
def decide_checkpoint(
    record: RecordLike,
    binding: Binding,
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Decision:
    """Validate a stored record and say what to do for ``binding``.

    Raises:
        CheckpointError: BINDING_CONFLICT when the record's binding differs from
            ``binding`` in any field (the error names the fields, not their values);
            INVALID_ARGUMENT for a ``binding`` that is not a Binding; and every error of
            :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    if type(binding) is not Binding:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
    if checkpoint.binding is not binding and checkpoint.binding != binding:
        differing = checkpoint.binding.differing_fields(binding)
        raise CheckpointError(
            ErrorCode.BINDING_CONFLICT,
            f"the stored record was made for another binding (differs in {', '.join(differing)})",
            field="binding",
        )
    return Decision(
        action=TABLE.statuses[checkpoint.status].action,
        status=checkpoint.status,
        revision=checkpoint.revision,
        checkpoint=checkpoint,
    )


@_transition_contracts("claim_execution")
def claim_execution(
    record: RecordLike,
    *,
    attempt_id: str,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """ready or released -> executing, owned by ``attempt_id``. A won swap grants
    ``execute``: run the tool once. A lost swap means another worker claimed it: reload
    and decide.

    Raises:
        CheckpointError: INVALID_TRANSITION from any status but ready and released;
            INVALID_ARGUMENT
            for a bad ``attempt_id`` or ``at``; every error of :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("claim_execution", checkpoint)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checked_execution(attempt, when),
        result=checkpoint.result,
        delivery=checkpoint.delivery,
    )


def complete_execution(
    record: RecordLike,
    *,
    attempt_id: str,
    at: Timestamp,
    result: object,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """executing or uncertain -> completed, storing ``result``: the exact JSON payload to
    deliver, whether the tool succeeded or its handler failed. ``result`` is typed
    ``object`` because it is checked at run time: anything but plain JSON
    (:data:`JSONValue`) within the limits is refused. Only the owning attempt
    may complete, also after reconciling an uncertain execution.

    Raises:
        CheckpointError: INVALID_TRANSITION from other statuses; FENCE_CONFLICT for a
            foreign ``attempt_id``; PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED for a bad
            ``result``; INVALID_ARGUMENT for a bad ``attempt_id``, ``at`` or
            ``max_payload_bytes``; every error of :func:`validate_checkpoint`.
    """
    # icontract reserves the argument name ``result`` for a postcondition's return value,
    # so the contracts sit on a twin that names the payload ``payload``.
    return _complete_execution(
        record, attempt_id=attempt_id, at=at, payload=result, max_payload_bytes=max_payload_bytes
    )


@_transition_contracts("complete_execution")
def _complete_execution(
    record: RecordLike,
    *,
    attempt_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
) -> Transition:
    checkpoint = _load(record, max_payload_bytes)
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("complete_execution", checkpoint, attempt)
    stored = checked_result(payload, when, max_payload_bytes)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=stored,
        delivery=checkpoint.delivery,
    )


@_transition_contracts("mark_execution_uncertain")
def mark_execution_uncertain(
    record: RecordLike,
    *,
    attempt_id: str,
    at: Timestamp,
    reason: str,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """executing -> uncertain: the owning attempt cannot tell whether the tool's effect
    happened. ``reason`` (1 to 1,024 characters, no control characters) is kept for the
    operator who reconciles; it must not hold secrets.

    Raises:
        CheckpointError: INVALID_TRANSITION from other statuses; FENCE_CONFLICT for a
            foreign ``attempt_id``; INVALID_ARGUMENT for a bad ``attempt_id``, ``at`` or
            ``reason``; every error of :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    why = check_reason(reason, "reason", ErrorCode.INVALID_ARGUMENT)
    rule = _guard("mark_execution_uncertain", checkpoint, attempt)
    assert checkpoint.execution is not None  # the table's shape for executing requires it
    execution = checked_execution(
        checkpoint.execution.attempt_id,
        checkpoint.execution.claimed_at,
        checked_uncertainty(why, when),
    )
    return _advance(
        rule,
        checkpoint,
        when,
        execution=execution,
        result=checkpoint.result,
        delivery=checkpoint.delivery,
    )


@_transition_contracts("release_execution")
def release_execution(
    record: RecordLike,
    *,
    attempt_id: str,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """executing -> released: the owning attempt knows the tool had no effect (it stopped
    before acting); the next claim runs it. Never for a tool that may have acted: mark
    that one uncertain.

    Raises:
        CheckpointError: INVALID_TRANSITION from other statuses; FENCE_CONFLICT for a
            foreign ``attempt_id``; INVALID_ARGUMENT for a bad ``attempt_id`` or ``at``;
            every error of :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("release_execution", checkpoint, attempt)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=None,
        result=checkpoint.result,
        delivery=checkpoint.delivery,
    )


@_transition_contracts("claim_delivery")
def claim_delivery(
    record: RecordLike,
    *,
    delivery_id: str,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """completed -> delivering, owned by ``delivery_id``. A won swap grants ``deliver``:
    send ``next.result.payload``, then release or complete the delivery.

    Raises:
        CheckpointError: INVALID_TRANSITION from any status but completed;
            INVALID_ARGUMENT for a bad ``delivery_id`` or ``at``; every error of
            :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    delivery = check_identifier(delivery_id, "delivery_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("claim_delivery", checkpoint)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=checkpoint.result,
        delivery=checked_delivery(delivery, when),
    )


@_transition_contracts("release_delivery")
def release_delivery(
    record: RecordLike,
    *,
    delivery_id: str,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """delivering -> completed after a send that is known to have failed; a later
    delivery claim sends the same stored payload again.

    Raises:
        CheckpointError: INVALID_TRANSITION from other statuses; FENCE_CONFLICT for a
            foreign ``delivery_id``; INVALID_ARGUMENT for a bad ``delivery_id`` or ``at``;
            every error of :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    delivery = check_identifier(delivery_id, "delivery_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("release_delivery", checkpoint, delivery)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=checkpoint.result,
        delivery=None,
    )


@_transition_contracts("complete_delivery")
def complete_delivery(
    record: RecordLike,
    *,
    delivery_id: str,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """delivering -> delivered once the send is confirmed.

    Raises:
        CheckpointError: INVALID_TRANSITION from other statuses; FENCE_CONFLICT for a
            foreign ``delivery_id``; INVALID_ARGUMENT for a bad ``delivery_id`` or ``at``;
            every error of :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    delivery_arg = check_identifier(delivery_id, "delivery_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("complete_delivery", checkpoint, delivery_arg)
    assert checkpoint.delivery is not None  # the table's shape for delivering requires it
    delivery = checked_delivery(
        checkpoint.delivery.delivery_id, checkpoint.delivery.claimed_at, when
    )
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=checkpoint.result,
        delivery=delivery,
    )


@_transition_contracts("prune_result")
def prune_result(
    record: RecordLike,
    *,
    at: Timestamp,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """delivered -> delivered with the payload dropped: ``result.payload`` becomes null
    and ``result.prunedAt`` is ``at``. Use it after a retention window to reclaim space;
    the record stays as a tombstone, so a replayed call finds delivered, never ready.

    Raises:
        CheckpointError: INVALID_TRANSITION from any status but delivered, or when the
            payload is already pruned (the table requires result.prunedAt null);
            INVALID_ARGUMENT for a bad ``at``; every error of
            :func:`validate_checkpoint`.
    """
    checkpoint = _load(record, max_payload_bytes)
    when = timestamp_argument(at, "at")
    rule = _guard("prune_result", checkpoint)
    assert checkpoint.result is not None  # the table's shape for delivered requires it
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=checkpoint.result.pruned(when),
        delivery=checkpoint.delivery,
    )


# --- the composed steps -----------------------------------------------------------------


def _created_claimed_by_parts(binding: Binding, attempt_id: str, at: Timestamp) -> Transition:
    created = create_checkpoint(binding, created_at=at)
    return claim_execution(created, attempt_id=attempt_id, at=at)


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


@icontract.ensure(_creates_by_its_parts, error=_creation_violation, enabled=CONTRACTS_ENABLED)
def create_claimed(binding: Binding, *, attempt_id: str, at: Timestamp) -> Transition:
    """A new record for ``binding``, already claimed by ``attempt_id``: status executing,
    at the initial revision, created and claimed at ``at``. Store it with create-if-absent
    (``expected_revision`` is 0: no record); a create that stored it grants ``execute``:
    run the tool once. A create that finds a record stored never overwrites it: load that
    one and decide on it instead.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a binding that is not a Binding, a bad
            ``attempt_id`` or a bad ``at``.
    """
    if type(binding) is not Binding:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = TABLE.composed["create_claimed"]
    following = checked_checkpoint(
        TABLE.initial_revision,
        rule.target,
        binding,
        when,
        when,
        execution=checked_execution(attempt, when),
    )
    return Transition(rule.grants, 0, following)


def _completed_and_claimed_by_parts(
    before: Checkpoint,
    *,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
) -> Transition:
    done = complete_execution(
        before, attempt_id=attempt_id, at=at, result=payload, max_payload_bytes=max_payload_bytes
    )
    return claim_delivery(
        done.next, delivery_id=delivery_id, at=at, max_payload_bytes=max_payload_bytes
    )


def complete_and_claim_delivery(
    record: RecordLike,
    *,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    result: object,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """executing or uncertain -> delivering in one swap: store ``result`` (the exact JSON
    payload, as :func:`complete_execution` stores it) and claim its delivery for
    ``delivery_id``. Only the owning attempt may. A won swap grants ``deliver``: send
    ``next.result.payload``, then release or complete the delivery.

    Raises:
        CheckpointError: INVALID_TRANSITION from any other status; FENCE_CONFLICT
            for a foreign ``attempt_id``; PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED for a
            bad ``result``; INVALID_ARGUMENT for a bad ``attempt_id``, ``delivery_id``,
            ``at`` or ``max_payload_bytes``; every error of :func:`validate_checkpoint`.
    """
    return _complete_and_claim_delivery(
        record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=result,
        max_payload_bytes=max_payload_bytes,
    )


@icontract.snapshot(_as_checkpoint, enabled=CONTRACTS_ENABLED)
@icontract.ensure(
    _claims_delivery_by_its_parts, error=_delivery_claim_violation, enabled=CONTRACTS_ENABLED
)
def _complete_and_claim_delivery(
    record: RecordLike,
    *,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
) -> Transition:
    checkpoint = _load(record, max_payload_bytes)
    attempt = check_identifier(attempt_id, "attempt_id", ErrorCode.INVALID_ARGUMENT)
    delivery = check_identifier(delivery_id, "delivery_id", ErrorCode.INVALID_ARGUMENT)
    when = timestamp_argument(at, "at")
    rule = _guard("complete_and_claim_delivery", checkpoint, attempt)
    stored = checked_result(payload, when, max_payload_bytes)
    return _advance(
        rule,
        checkpoint,
        when,
        execution=checkpoint.execution,
        result=stored,
        delivery=checked_delivery(delivery, when),
    )


def validate_checkpoint(
    record: RecordLike, *, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> bool:
    """Return True if ``record`` is a valid schema-version-1 record under the payload limit.

    Raises:
        CheckpointError: UNSUPPORTED_SCHEMA for another integer schemaVersion;
            INVALID_CHECKPOINT for a structurally broken record; PAYLOAD_NOT_JSON or
            PAYLOAD_LIMIT_EXCEEDED for a stored payload that breaks a payload rule or
            ``max_payload_bytes``; INVALID_ARGUMENT for a bad ``max_payload_bytes``.
    """
    _load(record, max_payload_bytes)
    return True
