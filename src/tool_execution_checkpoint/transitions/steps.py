"""The table's transitions over a stored record, and its composed steps (see
:mod:`tool_execution_checkpoint.transitions`): each runs one prologue, :func:`_begin`,
then builds the parts of the next record that the table says it sets."""

from __future__ import annotations

from typing import Any, NamedTuple

import icontract

from ..errors import CheckpointError, ErrorCode
from ..records import (
    Binding,
    Checkpoint,
    checked_checkpoint,
    checked_delivery,
    checked_execution,
    checked_result,
    checked_uncertainty,
)
from ..table import TABLE, ComposedRule, Fence, TransitionRule
from ..validation import check_identifier, check_reason, timestamp_argument
from .engine import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    RecordLike,
    Timestamp,
    Transition,
    _advance,
    _guard,
    _load,
    create_checkpoint,
)
from .postconditions import (
    CONTRACTS_ENABLED,
    PARTS,
    RULES,
    _as_checkpoint,
    _composition_violation,
    _creates_by_its_parts,
    _creation_violation,
    _made_by_its_parts,
    _transition_contracts,
)

__all__ = [
    "claim_delivery",
    "claim_execution",
    "complete_and_claim_delivery",
    "complete_and_deliver",
    "complete_delivery",
    "complete_execution",
    "create_claimed",
    "mark_execution_uncertain",
    "prune_result",
    "release_delivery",
    "release_execution",
]

_ABSENT: Any = object()
_ARGUMENT = ErrorCode.INVALID_ARGUMENT
_FENCED_BY = {
    name: {Fence.ATTEMPT_ID: "attempt_id", Fence.DELIVERY_ID: "delivery_id"}.get(rule.fence, "")
    for name, rule in RULES.items()
}
"""The argument whose id each rule's fence checks ("" for an unfenced rule)."""
_new_tuple = tuple.__new__


# --- the prologue -----------------------------------------------------------------------


class _Begun(NamedTuple):
    """A transition's checked arguments: the rule that may leave from the record, the
    record, the time, and the ids and reason it was given ("" for those it takes none
    of)."""

    rule: TransitionRule | ComposedRule
    record: Checkpoint
    at: str
    attempt_id: str
    delivery_id: str
    reason: str


def _begin(
    name: str,
    record: object,
    at: object,
    max_payload_bytes: int,
    *,
    attempt_id: object = _ABSENT,
    delivery_id: object = _ABSENT,
    reason: object = _ABSENT,
) -> _Begun:
    """The prologue of every transition over a record, in this order: validate the record
    under the payload limit; check the attempt id, the delivery id, the time and the reason
    the transition takes; guard the table's rule ``name`` with the id its fence names.

    Raises:
        CheckpointError: every error of :func:`validate_checkpoint`; INVALID_ARGUMENT for
            a bad argument; INVALID_TRANSITION and FENCE_CONFLICT (see :func:`_guard`).
    """
    checkpoint = _load(record, max_payload_bytes)
    attempt = "" if attempt_id is _ABSENT else check_identifier(attempt_id, "attempt_id", _ARGUMENT)
    delivery = (
        "" if delivery_id is _ABSENT else check_identifier(delivery_id, "delivery_id", _ARGUMENT)
    )
    when = timestamp_argument(at, "at")
    why = "" if reason is _ABSENT else check_reason(reason, "reason", _ARGUMENT)
    fenced_by = _FENCED_BY[name]
    claim = attempt if fenced_by == "attempt_id" else delivery if fenced_by else None
    rule = _guard(name, checkpoint, claim)
    # Built as a tuple: a NamedTuple's own __new__ is a Python function (1 us a call).
    return _new_tuple(_Begun, (rule, checkpoint, when, attempt, delivery, why))


# --- the transitions --------------------------------------------------------------------


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
    begun = _begin("claim_execution", record, at, max_payload_bytes, attempt_id=attempt_id)
    return _advance(
        begun.rule, begun.record, begun.at, execution=checked_execution(begun.attempt_id, begun.at)
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
    begun = _begin("complete_execution", record, at, max_payload_bytes, attempt_id=attempt_id)
    stored = checked_result(payload, begun.at, max_payload_bytes)
    return _advance(begun.rule, begun.record, begun.at, result=stored)


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
    begun = _begin(
        "mark_execution_uncertain",
        record,
        at,
        max_payload_bytes,
        attempt_id=attempt_id,
        reason=reason,
    )
    claimed = begun.record.execution
    assert claimed is not None  # the table's shape for executing requires it
    uncertainty = checked_uncertainty(begun.reason, begun.at)
    execution = checked_execution(claimed.attempt_id, claimed.claimed_at, uncertainty)
    return _advance(begun.rule, begun.record, begun.at, execution=execution)


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
    begun = _begin("release_execution", record, at, max_payload_bytes, attempt_id=attempt_id)
    return _advance(begun.rule, begun.record, begun.at, execution=None)


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
    begun = _begin("claim_delivery", record, at, max_payload_bytes, delivery_id=delivery_id)
    return _advance(
        begun.rule, begun.record, begun.at, delivery=checked_delivery(begun.delivery_id, begun.at)
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
    begun = _begin("release_delivery", record, at, max_payload_bytes, delivery_id=delivery_id)
    return _advance(begun.rule, begun.record, begun.at, delivery=None)


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
    begun = _begin("complete_delivery", record, at, max_payload_bytes, delivery_id=delivery_id)
    claimed = begun.record.delivery
    assert claimed is not None  # the table's shape for delivering requires it
    return _advance(
        begun.rule,
        begun.record,
        begun.at,
        delivery=checked_delivery(claimed.delivery_id, claimed.claimed_at, begun.at),
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
    begun = _begin("prune_result", record, at, max_payload_bytes)
    kept = begun.record.result
    assert kept is not None  # the table's shape for delivered requires it
    return _advance(begun.rule, begun.record, begun.at, result=kept.pruned(begun.at))


# --- the composed steps -----------------------------------------------------------------


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
    return _stores_and_claims(
        "complete_and_claim_delivery",
        record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=result,
        max_payload_bytes=max_payload_bytes,
    )


def complete_and_deliver(
    record: RecordLike,
    *,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    result: object,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Transition:
    """executing or uncertain -> delivered in one swap, for a host whose delivery is the
    hand-back: store ``result`` (the exact JSON payload, as :func:`complete_execution`
    stores it), claim its delivery for ``delivery_id`` and record it delivered, all at
    ``at``. Only the owning attempt may. A won swap grants ``hand-back``: return
    ``next.result.payload`` to the framework, which delivers it; never send it (a host
    that sends the result itself uses :func:`complete_and_claim_delivery`).

    Raises:
        CheckpointError: as :func:`complete_and_claim_delivery`.
    """
    step = "complete_and_deliver"
    return _stores_and_claims(
        step,
        record,
        attempt_id=attempt_id,
        delivery_id=delivery_id,
        at=at,
        payload=result,
        max_payload_bytes=max_payload_bytes,
    )


@icontract.snapshot(_as_checkpoint, enabled=CONTRACTS_ENABLED)
@icontract.ensure(_made_by_its_parts, error=_composition_violation, enabled=CONTRACTS_ENABLED)
def _stores_and_claims(
    name: str,
    record: RecordLike,
    *,
    attempt_id: str,
    delivery_id: str,
    at: Timestamp,
    payload: object,
    max_payload_bytes: int,
) -> Transition:
    """The composed step ``name`` over a record: store ``payload`` and claim its delivery
    for ``delivery_id``, and, in the hand-back step, record it delivered."""
    begun = _begin(
        name, record, at, max_payload_bytes, attempt_id=attempt_id, delivery_id=delivery_id
    )
    stored = checked_result(payload, begun.at, max_payload_bytes)
    delivered = begun.at if TABLE.composed[name].hand_back else None
    delivery = checked_delivery(begun.delivery_id, begun.at, delivered)
    return _advance(begun.rule, begun.record, begun.at, result=stored, delivery=delivery)


PARTS.create_checkpoint = create_checkpoint
PARTS.claim_execution = claim_execution
PARTS.complete_execution = complete_execution
PARTS.claim_delivery = claim_delivery
PARTS.complete_delivery = complete_delivery
