"""The protocol's key invariants as functions CrossHair checks symbolically.

Each function takes plain symbolic inputs (which status, which transition, which ids and
values), runs the real core, and returns True when the invariant holds; its icontract
postcondition ``result`` is what CrossHair tries to falsify. The properties restate the
promises of the core's own icontract postconditions, which are switched off while
CrossHair runs (TOOL_CHECKPOINT_CONTRACTS=0): CrossHair skips a path on which a callee's
postcondition fails, so with them on it would miss the very bugs they guard against.
Inputs that the core refuses as bad input (a CheckpointError whose code
the invariant allows) make the property hold vacuously: they are checked elsewhere.

Records in each status are built once, on first use, by walking the transition table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import icontract

import tool_execution_checkpoint as tec
from tool_execution_checkpoint.table import (
    EXECUTABLE,
    TABLE,
    Action,
    ComposedRule,
    Fence,
    Status,
    TransitionRule,
)

AT = "2026-01-01T00:00:00Z"
BINDING = tec.Binding("proofs", "call-1", "tool", "1", "sha256:0")
STATUSES = tuple(TABLE.statuses)
RULES: dict[str, TransitionRule | ComposedRule] = {**TABLE.transitions, **TABLE.composed}
TRANSITIONS = (*TABLE.transitions, *(n for n, step in TABLE.composed.items() if not step.creates))
"""Every transition over a record: the table's, then its composed steps that do not create."""
COMPLETING = tuple(n for n, step in TABLE.composed.items() if not step.creates)
"""The composed steps over a record: each stores a result and claims its delivery
(complete_and_claim_delivery, and the hand-back step complete_and_deliver)."""
BINDING_FIELDS = tuple(tec.Binding.JSON_NAMES)
CLAIMED = (Status.EXECUTING, Status.UNCERTAIN)


def _arguments(name: str, claim_id: str, reason: str) -> dict[str, Any]:
    rule = RULES[name]
    arguments: dict[str, Any] = {"at": AT}
    if rule.fence is Fence.ATTEMPT_ID or name == "claim_execution":
        arguments["attempt_id"] = claim_id
    elif rule.fence is Fence.DELIVERY_ID or name == "claim_delivery":
        arguments["delivery_id"] = claim_id
    if name in COMPLETING:
        arguments["delivery_id"] = "fresh-delivery-id"
    if name in ("complete_execution", *COMPLETING):
        arguments["result"] = {"ok": True}
    if name == "mark_execution_uncertain":
        arguments["reason"] = reason
    return arguments


def _owner(record: tec.Checkpoint, name: str) -> str:
    fence = RULES[name].fence
    if fence is Fence.ATTEMPT_ID and record.execution is not None:
        return record.execution.attempt_id
    if fence is Fence.DELIVERY_ID and record.delivery is not None:
        return record.delivery.delivery_id
    return "fresh-id"


@functools.cache
def records() -> dict[Status, tec.Checkpoint]:
    """A record in every status, reached breadth-first through the table (built on first
    use, so that a core broken at this step fails inside the analysis, as a finding)."""
    found = {TABLE.initial_status: tec.create_checkpoint(BINDING, created_at=AT)}
    frontier = list(found.values())
    while frontier:
        record = frontier.pop(0)
        for name, rule in TABLE.transitions.items():
            if record.status in rule.sources and rule.target not in found:
                function = getattr(tec, name)
                following = function(record, **_arguments(name, _owner(record, name), "r")).next
                found[following.status] = following
                frontier.append(following)
    return found


def _record(status_index: int, use_mapping: bool) -> Any:
    record = records()[STATUSES[status_index]]
    return record.to_dict() if use_mapping else record


def _transition(name: str, record: Any, claim_id: str, reason: str) -> tec.Transition:
    function = getattr(tec, name)
    transition: tec.Transition = function(record, **_arguments(name, claim_id, reason))
    return transition


@icontract.require(lambda status_index: 0 <= status_index < len(STATUSES))
@icontract.ensure(lambda result: result)
def decide_answers_execute_only_for_ready_or_released(status_index: int, use_mapping: bool) -> bool:
    """decide_checkpoint never returns execute for a status other than ready and released."""
    decision = tec.decide_checkpoint(_record(status_index, use_mapping), BINDING)
    return decision.action is not Action.EXECUTE or decision.status in EXECUTABLE


@icontract.require(lambda status_index: 0 <= status_index < len(CLAIMED))
@icontract.require(lambda transition_index: 0 <= transition_index < len(TRANSITIONS))
@icontract.ensure(lambda result: result)
def no_claim_is_rearmed_but_by_its_owners_release(
    status_index: int, transition_index: int, claim_id: str, as_owner: bool, reason: str
) -> bool:
    """No transition from executing or uncertain lands in ready, whoever calls it; only
    the claim's own attempt id takes executing to released, and uncertain never is."""
    name = TRANSITIONS[transition_index]
    record = records()[CLAIMED[status_index]]
    who = _owner(record, name) if as_owner else claim_id
    try:
        following = _transition(name, record, who, reason).next
    except tec.CheckpointError:
        return True
    if following.status is Status.RELEASED:
        return (
            record.status is Status.EXECUTING
            and record.execution is not None
            and who == record.execution.attempt_id
        )
    return following.status is not Status.READY


@icontract.require(lambda status_index: 0 <= status_index < len(STATUSES))
@icontract.require(lambda transition_index: 0 <= transition_index < len(TRANSITIONS))
@icontract.ensure(lambda result: result)
def next_validates_one_revision_on(
    status_index: int,
    transition_index: int,
    *,
    claim_id: str,
    as_owner: bool,
    reason: str,
    use_mapping: bool,
) -> bool:
    """A transition's next record validates, survives its persisted form, lands where the
    table says, and is exactly one revision past the input."""
    name = TRANSITIONS[transition_index]
    checkpoint = records()[STATUSES[status_index]]
    who = _owner(checkpoint, name) if as_owner else claim_id
    try:
        transition = _transition(name, _record(status_index, use_mapping), who, reason)
    except tec.CheckpointError as error:
        # A refusal is fine; producing an invalid record from a valid one never is.
        return error.code is not tec.ErrorCode.INVALID_CHECKPOINT
    following = transition.next
    return (
        tec.validate_checkpoint(following.to_dict())
        and tec.Checkpoint.from_dict(following.to_dict()) == following
        and transition.expected_revision == checkpoint.revision
        and following.revision == checkpoint.revision + 1
        and following.status is RULES[name].target
    )


@icontract.require(lambda status_index: 0 <= status_index < len(STATUSES))
@icontract.require(lambda transition_index: 0 <= transition_index < len(TRANSITIONS))
@icontract.ensure(lambda result: result)
def foreign_ids_never_finish_a_claim(
    status_index: int, transition_index: int, intruder: str, reason: str
) -> bool:
    """A fenced transition called with any id but the stored one is refused, and with a
    valid foreign id it is refused as FENCE_CONFLICT (or INVALID_TRANSITION when the
    status is wrong for it)."""
    name = TRANSITIONS[transition_index]
    rule = RULES[name]
    record = records()[STATUSES[status_index]]
    if rule.fence is Fence.NONE or intruder == _owner(record, name):
        return True
    try:
        _transition(name, record, intruder, reason)
    except tec.CheckpointError as error:
        return error.code in (
            tec.ErrorCode.FENCE_CONFLICT,
            tec.ErrorCode.INVALID_TRANSITION,
            tec.ErrorCode.INVALID_ARGUMENT,
        ) and (
            error.code is not tec.ErrorCode.INVALID_TRANSITION or record.status not in rule.sources
        )
    return False


@icontract.require(lambda status_index: 0 <= status_index < len(STATUSES))
@icontract.require(lambda field_index: 0 <= field_index < len(BINDING_FIELDS))
@icontract.ensure(lambda result: result)
def a_changed_binding_field_conflicts(status_index: int, field_index: int, value: str) -> bool:
    """A binding that differs from the stored one in any one field is BINDING_CONFLICT."""
    field = BINDING_FIELDS[field_index]
    if getattr(BINDING, field) == value:
        return True
    fields = {name: getattr(BINDING, name) for name in BINDING_FIELDS}
    fields[field] = value
    try:
        changed = tec.Binding(**fields)
    except tec.CheckpointError:
        return True  # not a valid identifier: no binding to compare
    try:
        tec.decide_checkpoint(records()[STATUSES[status_index]], changed)
    except tec.CheckpointError as error:
        return error.code is tec.ErrorCode.BINDING_CONFLICT
    return False


def _same_but_revision(made: tec.Checkpoint, parts: tec.Checkpoint) -> bool:
    return made.to_dict() | {"revision": 0} == parts.to_dict() | {"revision": 0}


def _made_by_parts(
    name: str, record: tec.Checkpoint, attempt_id: str, delivery_id: str, payload: Any
) -> tec.Transition:
    """What the table's parts of the composed step ``name`` make of ``record``, one after
    the other (raising what the first part to refuse raises)."""
    given: dict[str, dict[str, Any]] = {
        "complete_execution": {"attempt_id": attempt_id, "result": payload},
        "claim_delivery": {"delivery_id": delivery_id},
        "complete_delivery": {"delivery_id": delivery_id},
    }
    step = None
    for part in TABLE.composed[name].parts:
        function: Callable[..., tec.Transition] = getattr(tec, part)
        step = function(record, at=AT, **given[part])
        record = step.next
    assert step is not None
    return step


@icontract.require(lambda status_index: 0 <= status_index < len(STATUSES))
@icontract.require(lambda step_index: 0 <= step_index < len(COMPLETING))
@icontract.ensure(lambda result: result)
def a_composed_step_is_its_parts_in_one_write(
    status_index: int,
    step_index: int,
    *,
    attempt_id: str,
    delivery_id: str,
    as_owner: bool,
    value: int,
) -> bool:
    """A composed step refuses every record its table row does not leave from, and
    whatever its parts refuse; otherwise its next record is the one its parts make one
    after the other, one revision past the stored one (a record created claimed at the
    initial revision, over no record), granting the last part's action (hand-back for a
    hand-back step)."""
    name = COMPLETING[step_index]
    rule = TABLE.composed[name]
    record = records()[STATUSES[status_index]]
    owner = record.execution.attempt_id if record.execution is not None else attempt_id
    who = owner if as_owner else attempt_id
    payload = {"n": value}
    leaves = record.status in rule.sources
    refusal = None
    try:
        step = getattr(tec, name)(
            record, attempt_id=who, delivery_id=delivery_id, at=AT, result=payload
        )
    except tec.CheckpointError as error:
        step, refusal = None, error.code
    try:
        parts = _made_by_parts(name, record, who, delivery_id, payload)
    except tec.CheckpointError:
        parts = None
    if not leaves:  # refused, by its status unless an argument was bad first
        delivered_right = refusal in (
            tec.ErrorCode.INVALID_TRANSITION,
            tec.ErrorCode.INVALID_ARGUMENT,
        )
    elif step is None or parts is None:
        delivered_right = step is None and parts is None
    else:
        grant = Action.HAND_BACK if rule.hand_back else parts.action
        delivered_right = (
            _same_but_revision(step.next, parts.next)
            and step.expected_revision == record.revision
            and step.next.revision == record.revision + 1
            and step.action is grant
        )
    try:
        created = tec.create_claimed(BINDING, attempt_id=attempt_id, at=AT)
    except tec.CheckpointError:
        return delivered_right
    ready = tec.create_checkpoint(BINDING, created_at=AT)
    claim = tec.claim_execution(ready, attempt_id=attempt_id, at=AT)
    return (
        delivered_right
        and _same_but_revision(created.next, claim.next)
        and created.expected_revision == 0
        and created.next.revision == TABLE.initial_revision
        and created.action is claim.action
    )


PROPERTIES = (
    decide_answers_execute_only_for_ready_or_released,
    no_claim_is_rearmed_but_by_its_owners_release,
    next_validates_one_revision_on,
    foreign_ids_never_finish_a_claim,
    a_changed_binding_field_conflicts,
    a_composed_step_is_its_parts_in_one_write,
)
