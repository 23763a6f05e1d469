"""The engine of the transitions: their vocabulary, the loader, the table's guard and the
builder of the next record, and the functions that create, decide and validate a record
(see :mod:`tool_execution_checkpoint.transitions`)."""

from __future__ import annotations

from typing import Any

import icontract

from ..errors import CheckpointError, ErrorCode
from ..records import (
    Binding,
    Checkpoint,
    Delivery,
    Execution,
    Result,
    checked_checkpoint,
    first_part,
    mask_of_parts,
    present_mask,
    within_payload_limit,
)
from ..table import TABLE, ComposedRule, Fence, TransitionRule
from ..validation import check_max_payload_bytes, timestamp_argument
from .postconditions import (
    CONTRACTS_ENABLED,
    RULES,
    _a_right_new_record,
    _decides_right,
    _decision_violation,
)
from .values import Decision, RecordLike, Timestamp, Transition

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "Decision",
    "RecordLike",
    "Timestamp",
    "Transition",
    "create_checkpoint",
    "decide_checkpoint",
    "validate_checkpoint",
]

DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes

_REQUIRES_NULL = {name: mask_of_parts(rule.requires_null) for name, rule in RULES.items()}
_MAX_REVISION = TABLE.limits.max_revision
_CEILING = TABLE.limits.ceiling_max_payload_bytes
_new_tuple = tuple.__new__
_KEPT: Any = object()
"""The default of a part :func:`_advance` keeps as the record holds it."""


# --- the engine -------------------------------------------------------------------------


def _load(record: object, max_payload_bytes: int) -> Checkpoint:
    """Validate a record, as a Checkpoint or as a raw mapping, under a payload limit.

    A Checkpoint is valid by construction, and a
    :class:`~tool_execution_checkpoint.records.StoredRecord` was validated when its store
    read it, so only their payload's size is checked against this call's limit; any other
    mapping is validated in full."""
    if type(record) is Checkpoint and type(max_payload_bytes) is int:  # the common case:
        result = record.result  # a record under a limit that is in range and that it fits
        if 0 < max_payload_bytes <= _CEILING and (
            result is None or result.payload_bytes <= max_payload_bytes
        ):
            return record
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
    rule = RULES[name]
    if record.status not in rule.sources:
        raise CheckpointError(
            ErrorCode.INVALID_TRANSITION,
            f"{name} leaves from {', '.join(rule.sources)}, not from {record.status}",
            field="status",
        )
    requires_null = _REQUIRES_NULL[name]
    blocked = requires_null and (
        present_mask(record.execution, record.result, record.delivery) & requires_null
    )
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
    execution: Execution | None = _KEPT,
    result: Result | None = _KEPT,
    delivery: Delivery | None = _KEPT,
) -> Transition:
    """Build the next record: the rule's target status, revision + 1, ``at`` as updatedAt,
    the binding and creation time kept, the parts a transition sets or clears (None) as
    given, and the others kept. Only the shape is checked: every part comes checked."""
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
        execution=record.execution if execution is _KEPT else execution,
        result=record.result if result is _KEPT else result,
        delivery=record.delivery if delivery is _KEPT else delivery,
    )
    # Built as a tuple: a NamedTuple's own __new__ is a Python function.
    return _new_tuple(Transition, (rule.grants, revision, following))


# --- create and decide ------------------------------------------------------------------


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
