"""Tests of create, decide and the six transitions, driven by the transition table.

Every expectation about which status a transition leaves from, where it lands, which
fence it checks, what it sets or clears and what it grants is read off
:data:`tool_execution_checkpoint.TABLE`; nothing here is a second copy of the table.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import icontract
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tool_execution_checkpoint as tec
from strategies import (
    bindings,
    checkpoints,
    identifiers,
    json_values,
    short_identifiers,
    timestamps,
)
from tool_execution_checkpoint import (
    TABLE,
    Action,
    Binding,
    Checkpoint,
    CheckpointError,
    Decision,
    ErrorCode,
    JSONValue,
    RecordLike,
    Result,
    Status,
    Transition,
    create_checkpoint,
    decide_checkpoint,
    validate_checkpoint,
)
from tool_execution_checkpoint import transitions as transitions_module
from tool_execution_checkpoint.records import checked_execution, mask_of_parts
from tool_execution_checkpoint.table import (
    EXECUTABLE,
    NULLABLE_PARTS,
    RECORD_FIELDS,
    Fence,
    TransitionRule,
)
from tool_execution_checkpoint.transitions import engine, postconditions, steps

# --- helpers derived from the table and the public signatures -----------------------------

TRANSITION_NAMES: tuple[str, ...] = tuple(TABLE.transitions)
STATUSES: tuple[Status, ...] = tuple(Status)
LIMITS = TABLE.limits
ROOT = Path(__file__).resolve().parents[1]

AT = "2024-05-06T07:08:09Z"
LATER = "2024-05-06T08:00:00.123+02:00"
BINDING = Binding(
    namespace="NS-VALUE-q7",
    call_id="CALLID-VALUE-k2",
    tool_name="TOOLNAME-VALUE-m5",
    tool_revision="TOOLREV-VALUE-z9",
    input_fingerprint="FINGERPRINT-VALUE-w4",
)
PAYLOAD: JSONValue = {"ok": True, "items": [1, 2.5, "é", None, {"nested": []}], "n": -(2**60)}
REASON = "timed out waiting for the tool"
FOREIGN = "someone-else"

# Top-level fields every transition writes besides what its rule sets or clears.
BOOKKEEPING = frozenset({"revision", "status", "updatedAt"})


def function_of(name: str) -> Callable[..., Transition]:
    """The public function implementing the table's transition ``name``."""
    function = getattr(tec, name)
    assert callable(function)
    return function  # type: ignore[no-any-return]


def parameters_of(name: str) -> tuple[str, ...]:
    return tuple(inspect.signature(function_of(name)).parameters)


def claim_argument(name: str) -> str | None:
    """The keyword through which ``name`` takes its attempt id or delivery id (None for a
    transition that takes no claim id)."""
    ids = [parameter for parameter in parameters_of(name) if parameter.endswith("_id")]
    assert len(ids) <= 1, ids
    return ids[0] if ids else None


def snake(camel: str) -> str:
    return "".join(f"_{char.lower()}" if char.isupper() else char for char in camel)


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten a persisted record onto camelCase dotted paths. A nullable part that is
    null counts as absent; the fields a transition may set are leaves (so a payload is one
    value, whatever its shape)."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if item is None and path in NULLABLE_PARTS:
            continue
        if isinstance(item, dict) and path not in RECORD_FIELDS:
            flat.update(flatten(item, f"{path}."))
        else:
            flat[path] = item
    return flat


def owner_of(record: Checkpoint, rule: TransitionRule) -> str | None:
    """The stored claim id that ``rule``'s fence asks for, or None (unfenced, or no claim)."""
    if rule.fence is Fence.NONE:
        return None
    for path, value in flatten(record.to_dict()).items():
        if path.rsplit(".", 1)[-1] == rule.fence.value:
            assert isinstance(value, str)
            return value
    return None


def arguments(
    name: str,
    *,
    claim_id: str,
    at: str | datetime = AT,
    payload: JSONValue = PAYLOAD,
    reason: str = REASON,
) -> dict[str, Any]:
    """Keyword arguments for transition ``name`` (only those its signature takes)."""
    kwargs: dict[str, Any] = {"at": at}
    argument = claim_argument(name)
    if argument is not None:
        kwargs[argument] = claim_id
    parameters = parameters_of(name)
    if "result" in parameters:
        kwargs["result"] = payload
    if "reason" in parameters:
        kwargs["reason"] = reason
    return kwargs


def call(name: str, record: RecordLike, **overrides: Any) -> Transition:
    """Call transition ``name`` on ``record``: the owning id by default, else a fresh one."""
    checkpoint = record if isinstance(record, Checkpoint) else Checkpoint.from_dict(record)
    owner = owner_of(checkpoint, TABLE.transitions[name])
    default_id = owner if owner is not None else f"{claim_argument(name) or 'claim'}-owner"
    kwargs = arguments(name, claim_id=overrides.pop("claim_id", default_id))
    kwargs.update(overrides)
    return function_of(name)(record, **kwargs)


def expected_code(record: Checkpoint, name: str, claim_id: str) -> ErrorCode | None:
    """What the table says ``name`` does with ``claim_id`` on ``record``: None is success."""
    rule = TABLE.transitions[name]
    if record.status not in rule.sources or rule.requires_null & record.present_parts():
        return ErrorCode.INVALID_TRANSITION
    if rule.fence is not Fence.NONE and owner_of(record, rule) != claim_id:
        return ErrorCode.FENCE_CONFLICT
    return None


def shortest_paths() -> dict[Status, tuple[str, ...]]:
    """For each status, the shortest sequence of the table's transitions from a new record."""
    paths: dict[Status, tuple[str, ...]] = {TABLE.initial_status: ()}
    frontier = [TABLE.initial_status]
    while frontier:
        status = frontier.pop(0)
        for name, rule in TABLE.transitions.items():
            if status in rule.sources and rule.target not in paths:
                paths[rule.target] = (*paths[status], name)
                frontier.append(rule.target)
    return paths


PATHS = shortest_paths()


@st.composite
def records(draw: st.DrawFn, status: Status | None = None) -> Checkpoint:
    """A valid record in ``status`` (any when None), walked from create along the table's
    shortest path. Unlike strategies.checkpoints(), which uses fixed claim ids and one
    timestamp, every claim id, timestamp and reason here is drawn."""
    chosen = draw(st.sampled_from(STATUSES)) if status is None else status
    record = create_checkpoint(draw(bindings), created_at=draw(timestamps()))
    payload = draw(json_values)
    for name in PATHS[chosen]:
        rule = TABLE.transitions[name]
        owner = owner_of(record, rule)
        claim_id = owner if owner is not None else draw(identifiers)
        kwargs = arguments(
            name,
            claim_id=claim_id,
            at=draw(timestamps()),
            payload=payload,
            reason=draw(short_identifiers),
        )
        record = function_of(name)(record, **kwargs).next
    assert record.status is chosen
    return record


def reach_every_status() -> dict[Status, Checkpoint]:
    """Walk the table breadth-first from a new record; keep the first record per status."""
    start = create_checkpoint(BINDING, created_at=AT)
    found = {start.status: start}
    frontier = [start]
    while frontier:
        record = frontier.pop(0)
        for name, rule in TABLE.transitions.items():
            if record.status in rule.sources:
                following = call(name, record).next
                if following.status not in found:
                    found[following.status] = following
                    frontier.append(following)
    return found


RECORDS: dict[Status, Checkpoint] = reach_every_status()

SOURCE_PAIRS = [
    (name, source) for name, rule in TABLE.transitions.items() for source in rule.sources
]
FENCED = [name for name, rule in TABLE.transitions.items() if rule.fence is not Fence.NONE]
FORMS = ("instance", "dict")


def in_form(record: Checkpoint, form: str) -> RecordLike:
    return record if form == "instance" else record.to_dict()


def snapshot(raw: RecordLike) -> object:
    """A copy of a record to compare it with later. A Checkpoint is compared through its
    persisted form (copy.deepcopy cannot copy one that holds a Result: see the bug test)."""
    return raw.to_dict() if isinstance(raw, Checkpoint) else copy.deepcopy(raw)


def assert_raises_code(
    code: ErrorCode, function: Callable[..., object], *args: Any, **kwargs: Any
) -> CheckpointError:
    with pytest.raises(CheckpointError) as caught:
        function(*args, **kwargs)
    assert caught.value.code is code, caught.value
    assert not isinstance(caught.value, icontract.ViolationError)
    return caught.value


# --- the table helpers themselves ---------------------------------------------------------


def test_every_status_is_reachable_from_create() -> None:
    assert set(RECORDS) == set(Status)
    for status, record in RECORDS.items():
        assert record.status is status
        assert validate_checkpoint(record) is True


@pytest.mark.parametrize("name", TRANSITION_NAMES)
def test_each_table_transition_has_a_public_function_with_the_fenced_argument(name: str) -> None:
    rule = TABLE.transitions[name]
    assert name in tec.__all__
    assert parameters_of(name)[:1] == ("record",)
    if rule.fence is not Fence.NONE:
        assert claim_argument(name) == snake(rule.fence.value)


def test_flatten_treats_null_parts_as_absent_and_payload_as_a_leaf() -> None:
    flat = flatten(RECORDS[Status.COMPLETED].to_dict())
    assert flat["result.payload"] == PAYLOAD
    assert "delivery" not in flat
    assert not any(path.startswith("delivery") for path in flat)
    assert flat["binding.callId"] == BINDING.call_id


# --- 1. create_checkpoint -----------------------------------------------------------------


@settings(max_examples=30)
@given(binding=bindings, created=timestamps())
def test_create_checkpoint_starts_ready_at_the_initial_revision(
    binding: Binding, created: str
) -> None:
    record = create_checkpoint(binding, created_at=created)
    assert record.status is TABLE.initial_status is Status.READY
    assert record.revision == TABLE.initial_revision == 1
    assert record.created_at == record.updated_at == created
    assert record.binding == binding
    assert record.execution is None
    assert record.result is None
    assert record.delivery is None
    assert validate_checkpoint(record.to_dict()) is True
    assert Checkpoint.from_dict(record.to_dict()) == record


@pytest.mark.parametrize(
    ("moment", "stored"),
    [
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "2024-01-02T03:04:05+00:00"),
        (
            datetime(2024, 1, 2, 3, 4, 5, 600, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
            "2024-01-02T03:04:05.000600-05:30",
        ),
    ],
)
def test_create_checkpoint_accepts_an_aware_datetime(moment: datetime, stored: str) -> None:
    record = create_checkpoint(BINDING, created_at=moment)
    assert record.created_at == record.updated_at == stored
    assert validate_checkpoint(record.to_dict()) is True


@pytest.mark.parametrize(
    "binding",
    [
        None,
        "binding",
        BINDING.__class__.__name__,
        {
            "namespace": "n",
            "callId": "c",
            "toolName": "t",
            "toolRevision": "r",
            "inputFingerprint": "f",
        },
        ("n", "c", "t", "r", "f"),
    ],
)
def test_create_checkpoint_refuses_a_non_binding(binding: object) -> None:
    error = assert_raises_code(
        ErrorCode.INVALID_ARGUMENT, create_checkpoint, binding, created_at=AT
    )
    assert error.field == "binding"


def test_a_year_before_1000_is_written_with_four_digits() -> None:
    early = datetime(999, 1, 2, tzinfo=UTC)
    assert create_checkpoint(BINDING, created_at=early).created_at == "0999-01-02T00:00:00+00:00"
    assert create_checkpoint(BINDING, created_at="0001-01-01T00:00:00Z").revision == 1
    assert_raises_code(
        ErrorCode.INVALID_ARGUMENT, create_checkpoint, BINDING, created_at="999-01-02T00:00:00Z"
    )


@pytest.mark.parametrize(
    "created_at", [datetime(2024, 1, 1), "2024-01-01", "2024-01-01T00:00:00", 0, None]
)
def test_create_checkpoint_refuses_a_bad_created_at(created_at: object) -> None:
    error = assert_raises_code(
        ErrorCode.INVALID_ARGUMENT, create_checkpoint, BINDING, created_at=created_at
    )
    assert error.field == "created_at"


# --- 1. decide_checkpoint -----------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("status", STATUSES)
def test_decide_answers_the_status_action_from_the_table(status: Status, form: str) -> None:
    record = RECORDS[status]
    decision = decide_checkpoint(in_form(record, form), BINDING)
    assert isinstance(decision, Decision)
    assert decision.action is TABLE.statuses[status].action
    assert decision.status is status
    assert decision.revision == record.revision
    assert decision.checkpoint == record
    assert (decision.action is Action.EXECUTE) == (status in EXECUTABLE)


@settings(max_examples=40, deadline=None)
@given(record=checkpoints() | records())
def test_decide_on_generated_records(record: Checkpoint) -> None:
    decision = decide_checkpoint(record.to_dict(), record.binding)
    assert decision.action is TABLE.statuses[record.status].action
    assert decision.checkpoint == record
    assert decision.revision == record.revision
    assert decision.action is not Action.EXECUTE or record.status in EXECUTABLE


BINDING_FIELDS = tuple(field.name for field in dataclasses.fields(Binding))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("field", BINDING_FIELDS)
def test_decide_refuses_a_binding_that_differs_in_one_field(
    field: str, status: Status, form: str
) -> None:
    other_value = f"OTHER-{field.upper()}-VALUE"
    other = dataclasses.replace(BINDING, **{field: other_value})
    error = assert_raises_code(
        ErrorCode.BINDING_CONFLICT, decide_checkpoint, in_form(RECORDS[status], form), other
    )
    message = str(error)
    assert error.field == "binding"
    assert field in message
    for unrelated in BINDING_FIELDS:
        if unrelated != field:
            assert unrelated not in message
    assert other_value not in message
    assert getattr(BINDING, field) not in message


def test_decide_names_every_differing_binding_field_and_no_value() -> None:
    other = Binding(*(f"OTHER-{name}" for name in BINDING_FIELDS))
    error = assert_raises_code(
        ErrorCode.BINDING_CONFLICT, decide_checkpoint, RECORDS[Status.COMPLETED], other
    )
    for name in BINDING_FIELDS:
        assert name in str(error)
        assert getattr(BINDING, name) not in str(error)
        assert getattr(other, name) not in str(error)


@pytest.mark.parametrize(
    "binding", [None, BINDING.__class__, dataclasses.asdict(BINDING), tuple(BINDING_FIELDS)]
)
def test_decide_refuses_a_non_binding(binding: object) -> None:
    error = assert_raises_code(
        ErrorCode.INVALID_ARGUMENT, decide_checkpoint, RECORDS[Status.READY].to_dict(), binding
    )
    assert error.field == "binding"


# --- 1. each transition on its own --------------------------------------------------------


def test_claim_execution() -> None:
    rule = TABLE.transitions["claim_execution"]
    record = RECORDS[Status.READY]
    moment = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    transition = tec.claim_execution(record, attempt_id="attempt-X", at=moment)
    following = transition.next
    assert transition.action is rule.grants
    assert transition.expected_revision == record.revision
    assert following.status is rule.target
    assert following.execution is not None
    assert following.execution.attempt_id == "attempt-X"
    assert following.execution.claimed_at == following.updated_at == moment.isoformat()
    assert following.execution.uncertain is None
    assert following.result is None
    assert following.delivery is None
    # Two workers racing on the same revision both get a claim; only the CAS decides.
    rival = tec.claim_execution(record, attempt_id="attempt-Y", at=AT)
    assert rival.expected_revision == transition.expected_revision
    assert rival.next.execution is not None
    assert rival.next.execution.attempt_id == "attempt-Y"
    # The claimed record no longer answers execute and cannot be claimed again.
    assert decide_checkpoint(following, BINDING).action is not Action.EXECUTE
    assert_raises_code(
        ErrorCode.INVALID_TRANSITION, tec.claim_execution, following, attempt_id="z", at=AT
    )


@pytest.mark.parametrize("source", TABLE.transitions["complete_execution"].sources)
def test_complete_execution(source: Status) -> None:
    rule = TABLE.transitions["complete_execution"]
    record = RECORDS[source]
    assert record.execution is not None
    transition = tec.complete_execution(
        record, attempt_id=record.execution.attempt_id, at=LATER, result=PAYLOAD
    )
    following = transition.next
    assert transition.action is rule.grants
    assert following.status is rule.target
    assert following.result is not None
    assert following.result.payload == PAYLOAD
    assert following.result.payload_json == json.dumps(
        PAYLOAD, ensure_ascii=False, separators=(",", ":")
    )
    assert following.result.completed_at == following.updated_at == LATER
    assert following.execution == record.execution
    assert following.delivery is None
    assert decide_checkpoint(following, BINDING).action is TABLE.statuses[rule.target].action


def test_complete_execution_stores_a_copy_of_the_payload() -> None:
    record = RECORDS[Status.EXECUTING]
    assert record.execution is not None
    payload: list[JSONValue] = [1, {"x": [2]}]
    following = tec.complete_execution(
        record, attempt_id=record.execution.attempt_id, at=AT, result=payload
    ).next
    inner = payload[1]
    assert isinstance(inner, dict)
    inner["x"] = "changed"
    payload.append("more")
    assert following.result is not None
    assert following.result.payload == [1, {"x": [2]}]
    returned = following.result.payload
    assert isinstance(returned, list)
    returned.clear()
    assert following.result.payload == [1, {"x": [2]}]


def test_mark_execution_uncertain() -> None:
    rule = TABLE.transitions["mark_execution_uncertain"]
    (source,) = rule.sources
    record = RECORDS[source]
    assert record.execution is not None
    transition = tec.mark_execution_uncertain(
        record, attempt_id=record.execution.attempt_id, at=LATER, reason=REASON
    )
    following = transition.next
    assert transition.action is rule.grants
    assert following.status is rule.target
    assert following.execution is not None
    assert following.execution.attempt_id == record.execution.attempt_id
    assert following.execution.claimed_at == record.execution.claimed_at
    assert following.execution.uncertain is not None
    assert following.execution.uncertain.reason == REASON
    assert following.execution.uncertain.at == following.updated_at == LATER
    assert following.result is None
    assert following.delivery is None
    assert decide_checkpoint(following, BINDING).action is TABLE.statuses[rule.target].action


def test_claim_delivery() -> None:
    rule = TABLE.transitions["claim_delivery"]
    (source,) = rule.sources
    record = RECORDS[source]
    transition = tec.claim_delivery(record, delivery_id="delivery-X", at=LATER)
    following = transition.next
    assert transition.action is rule.grants
    assert following.status is rule.target
    assert following.delivery is not None
    assert following.delivery.delivery_id == "delivery-X"
    assert following.delivery.claimed_at == following.updated_at == LATER
    assert following.delivery.delivered_at is None
    assert following.result == record.result
    assert following.execution == record.execution


def test_release_delivery() -> None:
    rule = TABLE.transitions["release_delivery"]
    (source,) = rule.sources
    record = RECORDS[source]
    assert record.delivery is not None
    transition = tec.release_delivery(record, delivery_id=record.delivery.delivery_id, at=LATER)
    following = transition.next
    assert transition.action is rule.grants
    assert following.status is rule.target
    assert following.delivery is None
    assert following.result == record.result
    assert following.execution == record.execution
    assert following.updated_at == LATER


def test_complete_delivery() -> None:
    rule = TABLE.transitions["complete_delivery"]
    (source,) = rule.sources
    record = RECORDS[source]
    assert record.delivery is not None
    transition = tec.complete_delivery(record, delivery_id=record.delivery.delivery_id, at=LATER)
    following = transition.next
    assert transition.action is rule.grants
    assert following.status is rule.target
    assert following.delivery is not None
    assert following.delivery.delivery_id == record.delivery.delivery_id
    assert following.delivery.claimed_at == record.delivery.claimed_at
    assert following.delivery.delivered_at == following.updated_at == LATER
    assert following.result == record.result
    assert following.execution == record.execution
    assert decide_checkpoint(following, BINDING).action is TABLE.statuses[rule.target].action
    for name in TRANSITION_NAMES:
        if following.status not in TABLE.transitions[name].sources:
            assert_raises_code(ErrorCode.INVALID_TRANSITION, call, name, following)


# --- 2. every status against every transition ---------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", TRANSITION_NAMES)
@pytest.mark.parametrize("status", STATUSES)
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(data=st.data(), at=timestamps())
def test_every_status_against_every_transition(
    status: Status, name: str, form: str, data: st.DataObject, at: str
) -> None:
    rule = TABLE.transitions[name]
    record = data.draw(checkpoints(status), label="record")
    owner = owner_of(record, rule)
    claim_id = owner if owner is not None else data.draw(identifiers, label="fresh id")
    raw = in_form(record, form)
    before = snapshot(raw)
    kwargs = arguments(name, claim_id=claim_id, at=at)

    if status in rule.sources:
        transition = function_of(name)(raw, **kwargs)
        assert transition.action is rule.grants
        assert transition.expected_revision == record.revision
        assert transition.next.revision == record.revision + 1
        assert transition.next.status is rule.target
        assert transition.next.binding == record.binding
        assert transition.next.created_at == record.created_at
        assert transition.next.updated_at == at
        assert validate_checkpoint(transition.next.to_dict()) is True
    else:
        error = assert_raises_code(ErrorCode.INVALID_TRANSITION, function_of(name), raw, **kwargs)
        assert error.field == "status"
    assert snapshot(raw) == before


@pytest.mark.parametrize(
    ("status", "name"),
    [
        pytest.param(status, name, id=f"{name}-from-{status}")
        for status in STATUSES
        for name in TRANSITION_NAMES
        if status not in TABLE.transitions[name].sources
    ],
)
def test_a_wrong_status_wins_over_a_foreign_fence(status: Status, name: str) -> None:
    assert_raises_code(ErrorCode.INVALID_TRANSITION, call, name, RECORDS[status], claim_id=FOREIGN)


def test_exactly_the_table_edges_succeed() -> None:
    edges = set()
    for status, record in RECORDS.items():
        for name in TRANSITION_NAMES:
            if status not in TABLE.transitions[name].sources:
                assert_raises_code(ErrorCode.INVALID_TRANSITION, call, name, record)
            else:
                edges.add((status, name, call(name, record).next.status))
    assert edges == {
        (source, name, rule.target)
        for name, rule in TABLE.transitions.items()
        for source in rule.sources
    }


# --- 3. the fields a transition writes are exactly the table's ----------------------------


def same(left: object, right: object) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


@pytest.mark.parametrize("name", TRANSITION_NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    at=timestamps(),
    payload=json_values,
    reason=st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), min_size=1),
)
def test_a_transition_changes_exactly_what_the_table_says(
    name: str, data: st.DataObject, at: str, payload: JSONValue, reason: str
) -> None:
    rule = TABLE.transitions[name]
    record = data.draw(st.sampled_from(rule.sources).flatmap(records), label="record")
    owner = owner_of(record, rule)
    claim_id = owner if owner is not None else data.draw(identifiers, label="fresh id")
    kwargs = arguments(name, claim_id=claim_id, at=at, payload=payload, reason=reason)
    before = flatten(record.to_dict())
    after_dict = function_of(name)(record.to_dict(), **kwargs).next.to_dict()
    after = flatten(after_dict)

    changed = {
        path
        for path in before.keys() | after.keys()
        if path not in before or path not in after or not same(before[path], after[path])
    }
    assert after["revision"] == before["revision"] + 1
    assert after["status"] == rule.target.value
    assert after["updatedAt"] == at  # may equal the old updatedAt: clocks are not ordered
    rest = changed - BOOKKEEPING

    def cleared(path: str) -> bool:
        return any(path == part or path.startswith(f"{part}.") for part in rule.clears)

    # Nothing changes but what the table sets; a set field may keep its value only when
    # the value it is set to is the one it had (a null payload pruned to null).
    assert {path for path in rest if not cleared(path)} <= set(rule.sets)
    for path in rest:
        if cleared(path):
            assert path in before
            assert path not in after
    for part in rule.clears:
        value: Any = after_dict
        for key in part.split("."):
            value = value[key]
        assert value is None
    for path in rule.sets:
        assert path in after
        leaf = path.rsplit(".", 1)[-1]
        if leaf.endswith("At") or leaf == "at":
            assert after[path] == at
        elif leaf.endswith("Id"):
            assert after[path] == claim_id
        elif leaf == "payload" and "result" in kwargs:
            assert same(after[path], payload)
        elif leaf == "payload":
            assert after[path] is None  # a transition without a result drops the payload
        elif leaf == "reason":
            assert after[path] == reason


# --- 4. fences ----------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", FENCED)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_foreign_claim_id_is_a_fence_conflict(name: str, form: str, data: st.DataObject) -> None:
    rule = TABLE.transitions[name]
    record = data.draw(st.sampled_from(rule.sources).flatmap(records), label="record")
    owner = owner_of(record, rule)
    assert owner is not None
    foreign = data.draw(identifiers.filter(lambda candidate: candidate != owner), label="foreign")
    raw = in_form(record, form)
    before = snapshot(raw)
    error = assert_raises_code(ErrorCode.FENCE_CONFLICT, call, name, raw, claim_id=foreign)
    assert error.field == claim_argument(name)
    # The message never echoes an id: neither the foreign one nor the stored owner.
    marker = f"FOREIGN-ID-{data.draw(short_identifiers, label='marker')}"
    error = assert_raises_code(ErrorCode.FENCE_CONFLICT, call, name, raw, claim_id=marker)
    assert marker not in str(error)
    assert snapshot(raw) == before
    # The owner can still finish it.
    transition = call(name, raw, claim_id=owner)
    assert transition.next.status is rule.target
    assert snapshot(raw) == before


@pytest.mark.parametrize("name", FENCED)
def test_a_fence_is_exact_not_a_prefix_or_case_match(name: str) -> None:
    rule = TABLE.transitions[name]
    record = RECORDS[rule.sources[0]]
    owner = owner_of(record, rule)
    assert owner is not None
    for near in (owner.upper(), owner + " ", owner[:-1], " " + owner, owner + owner):
        assert_raises_code(ErrorCode.FENCE_CONFLICT, call, name, record, claim_id=near)


def test_uncertain_is_completed_by_its_attempt_only() -> None:
    claimed = tec.claim_execution(RECORDS[Status.READY], attempt_id="attempt-1", at=AT).next
    uncertain = tec.mark_execution_uncertain(
        claimed, attempt_id="attempt-1", at=AT, reason=REASON
    ).next
    assert uncertain.status is TABLE.transitions["mark_execution_uncertain"].target
    assert_raises_code(
        ErrorCode.FENCE_CONFLICT,
        tec.complete_execution,
        uncertain,
        attempt_id="attempt-2",
        at=AT,
        result=PAYLOAD,
    )
    assert_raises_code(
        ErrorCode.FENCE_CONFLICT,
        tec.mark_execution_uncertain,
        claimed,
        attempt_id="attempt-2",
        at=AT,
        reason=REASON,
    )
    done = tec.complete_execution(uncertain, attempt_id="attempt-1", at=LATER, result=PAYLOAD)
    assert done.next.status is TABLE.transitions["complete_execution"].target
    assert done.next.execution == uncertain.execution  # the uncertainty stays on record
    assert done.next.result is not None
    assert done.next.result.payload == PAYLOAD


@settings(max_examples=30, deadline=None)
@given(payload=json_values)
def test_release_then_redeliver_keeps_the_exact_payload(payload: JSONValue) -> None:
    claimed = tec.claim_execution(RECORDS[Status.READY], attempt_id="attempt-1", at=AT).next
    completed = tec.complete_execution(claimed, attempt_id="attempt-1", at=AT, result=payload).next
    assert completed.result is not None
    original = completed.result.payload_json
    first = tec.claim_delivery(completed, delivery_id="delivery-1", at=AT).next
    released = tec.release_delivery(first.to_dict(), delivery_id="delivery-1", at=AT).next
    assert released.status is TABLE.transitions["release_delivery"].target
    assert released.result is not None
    assert released.result.payload_json == original
    # The released claim is gone: its id can neither finish nor release a delivery.
    for name in ("complete_delivery", "release_delivery"):
        assert_raises_code(
            ErrorCode.INVALID_TRANSITION, call, name, released, claim_id="delivery-1"
        )
    second = tec.claim_delivery(released.to_dict(), delivery_id="delivery-2", at=LATER)
    assert second.action is TABLE.transitions["claim_delivery"].grants
    # The old id does not own the new claim.
    for name in ("complete_delivery", "release_delivery"):
        assert_raises_code(ErrorCode.FENCE_CONFLICT, call, name, second.next, claim_id="delivery-1")
    delivered = tec.complete_delivery(second.next, delivery_id="delivery-2", at=LATER).next
    assert delivered.status is TABLE.transitions["complete_delivery"].target
    for record in (second.next, delivered, Checkpoint.from_dict(delivered.to_dict())):
        assert record.result is not None
        assert record.result.payload_json == original
        assert record.result == completed.result


# --- 5. safety over random sequences ------------------------------------------------------

ID_POOL = ("id-1", "id-2")


def executions_counted(
    transition: Transition, record: Checkpoint, claim_id: str, owner: str | None
) -> int:
    """+1 for a granted execute, -1 for a release (only from executing, only by the
    claim's owner: that execution had no effect), else 0."""
    if transition.action is Action.EXECUTE:
        return 1
    if transition.next.status is Status.RELEASED:
        assert record.status is Status.EXECUTING
        assert claim_id == owner
        return -1
    return 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), binding=bindings, created=timestamps())
def test_random_sequences_keep_the_safety_properties(
    data: st.DataObject, binding: Binding, created: str
) -> None:
    record = create_checkpoint(binding, created_at=created)
    left_ready = False
    stored_payload: str | None = None
    executes_granted = 0
    steps = data.draw(st.integers(min_value=0, max_value=30), label="steps")
    for _ in range(steps):
        decision = decide_checkpoint(record, binding)
        assert decision.action is TABLE.statuses[record.status].action
        assert decision.action is not Action.EXECUTE or record.status in EXECUTABLE

        name = data.draw(st.sampled_from(TRANSITION_NAMES), label="transition")
        rule = TABLE.transitions[name]
        owner = owner_of(record, rule)
        id_choices = st.sampled_from(ID_POOL) | short_identifiers
        if owner is not None:
            id_choices = st.just(owner) | id_choices
        claim_id = data.draw(id_choices, label="claim id")
        kwargs = arguments(
            name,
            claim_id=claim_id,
            at=data.draw(timestamps(), label="at"),
            payload=data.draw(json_values, label="payload") if name == "complete_execution" else 0,
            reason=data.draw(short_identifiers, label="reason"),
        )
        raw = in_form(record, data.draw(st.sampled_from(FORMS), label="form"))
        before = snapshot(raw)
        expected = expected_code(record, name, claim_id)
        if expected is not None:
            assert_raises_code(expected, function_of(name), raw, **kwargs)
            assert snapshot(raw) == before
            continue
        transition = function_of(name)(raw, **kwargs)
        assert snapshot(raw) == before
        following = transition.next
        assert transition.action is rule.grants
        assert transition.expected_revision == record.revision
        assert following.revision == record.revision + 1
        assert following.status is rule.target
        assert validate_checkpoint(following) is True
        assert validate_checkpoint(following.to_dict()) is True
        assert Checkpoint.from_dict(following.to_dict()) == following
        assert Checkpoint.from_json(following.to_json()) == following
        executes_granted += executions_counted(transition, record, claim_id, owner)
        record = following

        left_ready = left_ready or record.status is not Status.READY
        assert not (left_ready and record.status is Status.READY)
        if stored_payload is not None:
            assert record.result is not None
            if record.result.pruned_at is None:
                assert record.result.payload_json == stored_payload
            else:  # only a delivered payload is ever dropped, and only to null
                assert record.status is Status.DELIVERED
                assert record.result.payload_json == "null"
        elif record.result is not None:
            stored_payload = record.result.payload_json
    assert executes_granted <= 1  # one execution with an effect, at most
    assert decide_checkpoint(record, binding).action is TABLE.statuses[record.status].action


# --- 6. argument errors -------------------------------------------------------------------

TOO_LONG_ID = "x" * (LIMITS.max_identifier_chars + 1)
BAD_IDS: list[object] = ["", TOO_LONG_ID, "a\x00b", "a\x7fb", "a\x85b", "a\ud800", 7, None, b"id"]
BAD_ATS: list[object] = [
    "",
    "2024-01-01",
    "2024-01-01T00:00:00",
    "2024-01-01t00:00:00z",
    "2024-01-01 00:00:00Z",
    "2024-02-30T00:00:00Z",
    "2024-01-01T00:00:60Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T00:00:00+24:00",
    "2024-01-01T00:00:00.1234567890Z",
    datetime(2024, 1, 1),
    1_700_000_000,
    None,
]
BAD_REASONS: list[object] = ["", "r" * (LIMITS.max_reason_chars + 1), "line\nbreak", 3, None]
BAD_LIMITS: list[object] = [0, -1, LIMITS.ceiling_max_payload_bytes + 1, True, 1.5, "100", None]


def bad_argument_cases() -> list[Any]:
    cases = []
    for name in TRANSITION_NAMES:
        parameters = parameters_of(name)
        bad = {
            claim_argument(name): BAD_IDS,
            "at": BAD_ATS,
            "reason": BAD_REASONS,
            "max_payload_bytes": BAD_LIMITS,
        }
        for parameter, values in bad.items():
            if parameter not in parameters:
                continue
            for index, value in enumerate(values):
                cases.append(pytest.param(name, parameter, value, id=f"{name}-{parameter}-{index}"))
    return cases


@pytest.mark.parametrize(("name", "parameter", "value"), bad_argument_cases())
def test_a_bad_argument_is_invalid_argument_naming_it(
    name: str, parameter: str, value: object
) -> None:
    record = RECORDS[TABLE.transitions[name].sources[0]]
    raw = record.to_dict()
    before = copy.deepcopy(raw)
    for target in (raw, record):
        error = assert_raises_code(
            ErrorCode.INVALID_ARGUMENT, call, name, target, **{parameter: value}
        )
        assert error.field == parameter
    assert raw == before


NOT_JSON: list[object] = [
    (1, 2),
    {1, 2},
    b"bytes",
    float("nan"),
    float("inf"),
    -float("inf"),
    {1: "one"},
    {"k": [1, (2,)]},
    "\ud800",
    {"k": ["\udfff"]},
    datetime(2024, 1, 1, tzinfo=UTC),
    Status.READY,
    Decimal("1.5"),
    object(),
]


@pytest.mark.parametrize("source", TABLE.transitions["complete_execution"].sources)
@pytest.mark.parametrize("payload", NOT_JSON, ids=[type(v).__name__ for v in NOT_JSON])
def test_complete_execution_refuses_a_payload_that_is_not_json(
    payload: object, source: Status
) -> None:
    raw = RECORDS[source].to_dict()
    before = copy.deepcopy(raw)
    assert_raises_code(ErrorCode.PAYLOAD_NOT_JSON, call, "complete_execution", raw, result=payload)
    assert raw == before


def nested(depth: int) -> JSONValue:
    value: JSONValue = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("payload", "limit", "accepted"),
    [
        pytest.param("x" * 8, 10, True, id="exactly-the-limit"),
        pytest.param("x" * 9, 10, False, id="one-byte-over"),
        pytest.param("é" * 4, 10, True, id="multibyte-exactly"),
        pytest.param("é" * 5, 10, False, id="multibyte-over"),
        pytest.param("x" * (LIMITS.default_max_payload_bytes - 2), None, True, id="default"),
        pytest.param("x" * (LIMITS.default_max_payload_bytes - 1), None, False, id="default+1"),
        pytest.param(nested(LIMITS.max_depth), None, True, id="max-depth"),
        pytest.param(nested(LIMITS.max_depth + 1), None, False, id="too-deep"),
        pytest.param([0] * (LIMITS.max_values - 1), None, True, id="max-values"),
        pytest.param([0] * LIMITS.max_values, None, False, id="too-many-values"),
    ],
)
def test_complete_execution_payload_limits(
    payload: JSONValue, limit: int | None, accepted: bool
) -> None:
    raw = RECORDS[Status.EXECUTING].to_dict()
    before = copy.deepcopy(raw)
    extra: dict[str, Any] = {"result": payload}
    if limit is not None:
        extra["max_payload_bytes"] = limit
    if accepted:
        following = call("complete_execution", raw, **extra).next
        assert following.result is not None
        assert same(following.result.payload, payload)
        # A record completed under a limit validates under that limit.
        assert (
            validate_checkpoint(
                following.to_dict(), **({} if limit is None else {"max_payload_bytes": limit})
            )
            is True
        )
    else:
        assert_raises_code(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED, call, "complete_execution", raw, **extra
        )
    assert raw == before


@pytest.mark.parametrize("name", TRANSITION_NAMES)
def test_a_stored_payload_over_the_passed_limit_is_refused(name: str) -> None:
    # Only records that hold a payload are affected; the limit applies to what is stored.
    for status, record in RECORDS.items():
        if record.result is None or status not in TABLE.transitions[name].sources:
            continue
        small = record.result.payload_bytes - 1
        for raw in (record, record.to_dict()):
            error = assert_raises_code(
                ErrorCode.PAYLOAD_LIMIT_EXCEEDED, call, name, raw, max_payload_bytes=small
            )
            assert (error.field, error.detail, error.limit) == (
                "result.payload",
                f"encodes to more than {small} bytes",
                small,
            )
        assert call(name, record, max_payload_bytes=record.result.payload_bytes).next


def test_the_revision_ceiling_is_refused_not_wrapped() -> None:
    top = dataclasses.replace(RECORDS[Status.READY], revision=LIMITS.max_revision)
    raw = top.to_dict()
    before = copy.deepcopy(raw)
    error = assert_raises_code(
        ErrorCode.INVALID_TRANSITION, tec.claim_execution, raw, attempt_id="attempt-1", at=AT
    )
    assert (error.field, error.detail, error.limit) == (
        "revision",
        "the record has reached the largest revision",
        LIMITS.max_revision,
    )
    assert raw == before
    below = dataclasses.replace(top, revision=LIMITS.max_revision - 1)
    assert tec.claim_execution(below, attempt_id="a", at=AT).next.revision == LIMITS.max_revision


# --- 7. contracts -------------------------------------------------------------------------


def test_contracts_are_enabled_in_tests() -> None:
    assert transitions_module.CONTRACTS_ENABLED is True


def assert_postcondition_fails(
    function: Callable[..., object], *args: Any, promise: str | None = None, **kwargs: Any
) -> None:
    """The call must be refused by a postcondition (icontract.ViolationError), never
    return and never look like a caller's mistake (a CheckpointError); with ``promise``,
    the violation must name it as the promise broken."""
    with pytest.raises(icontract.ViolationError) as caught:
        function(*args, **kwargs)
    assert not isinstance(caught.value, CheckpointError)
    if promise is not None:
        assert str(caught.value) == f"{args[0]} broke a promise: {promise}"


AdvanceFunction = Callable[..., Transition]


def broken_advance(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[Transition, Checkpoint, str], Transition]
) -> None:
    original: AdvanceFunction = engine._advance

    def advance(rule: TransitionRule, record: Checkpoint, at: str, **parts: Any) -> Transition:
        return change(original(rule, record, at, **parts), record, at)

    monkeypatch.setattr(steps, "_advance", advance)


def skip_a_revision(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    following = dataclasses.replace(transition.next, revision=transition.next.revision + 1)
    return transition._replace(next=following)


def wrong_expected_revision(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    return transition._replace(expected_revision=transition.expected_revision + 1)


def both_revisions_off(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    following = dataclasses.replace(transition.next, revision=transition.next.revision + 1)
    return Transition(transition.action, transition.expected_revision + 1, following)


def other_binding(transition: Transition, record: Checkpoint, _at: str) -> Transition:
    binding = dataclasses.replace(record.binding, call_id=record.binding.call_id + "-other")
    return transition._replace(next=dataclasses.replace(transition.next, binding=binding))


def other_created_at(transition: Transition, _record: Checkpoint, at: str) -> Transition:
    moved = "1999-12-31T23:59:59Z" if at != "1999-12-31T23:59:59Z" else AT
    return transition._replace(next=dataclasses.replace(transition.next, created_at=moved))


def back_to_ready(transition: Transition, record: Checkpoint, at: str) -> Transition:
    ready = Checkpoint(
        revision=record.revision + 1,
        status=Status.READY,
        binding=record.binding,
        created_at=record.created_at,
        updated_at=at,
    )
    return transition._replace(next=ready)


def tampered_payload(transition: Transition, _record: Checkpoint, at: str) -> Transition:
    result = Result({"tampered": True}, completed_at=at)
    return transition._replace(next=dataclasses.replace(transition.next, result=result))


def dropped_payload(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    following = transition.next
    object.__setattr__(following, "result", None)  # bypass the frozen dataclass's check
    return transition


def all_sources() -> list[Any]:
    return [pytest.param(name, source, id=f"{name}-from-{source}") for name, source in SOURCE_PAIRS]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "change",
    [
        skip_a_revision,
        wrong_expected_revision,
        both_revisions_off,
        other_binding,
        other_created_at,
        back_to_ready,
    ],
)
@pytest.mark.parametrize(("name", "source"), all_sources())
def test_postconditions_catch_a_broken_advance_in_every_transition(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    source: Status,
    change: Callable[[Transition, Checkpoint, str], Transition],
    form: str,
) -> None:
    raw = in_form(RECORDS[source], form)
    assert call(name, raw).next.status is TABLE.transitions[name].target  # control
    broken_advance(monkeypatch, change)
    assert_postcondition_fails(call, name, raw)


EXECUTION_CLAIMED = sorted(
    {
        source
        for rule in TABLE.transitions.values()
        if rule.fence is Fence.ATTEMPT_ID
        for source in rule.sources
    }
)
PAYLOAD_HOLDING = sorted(
    status for status, rule in TABLE.statuses.items() if "result" in rule.required
)


@pytest.mark.parametrize(
    ("name", "source"),
    [param for param in all_sources() if param.values[1] in EXECUTION_CLAIMED],
)
def test_postconditions_catch_a_claimed_execution_sent_back_to_ready(
    monkeypatch: pytest.MonkeyPatch, name: str, source: Status
) -> None:
    assert EXECUTION_CLAIMED
    broken_advance(monkeypatch, back_to_ready)
    assert_postcondition_fails(call, name, RECORDS[source])


@pytest.mark.parametrize("change", [tampered_payload, dropped_payload])
@pytest.mark.parametrize(
    ("name", "source"),
    [param for param in all_sources() if param.values[1] in PAYLOAD_HOLDING],
)
def test_postconditions_catch_a_changed_or_dropped_payload(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    source: Status,
    change: Callable[[Transition, Checkpoint, str], Transition],
) -> None:
    assert PAYLOAD_HOLDING
    broken_advance(monkeypatch, change)
    assert_postcondition_fails(call, name, RECORDS[source].to_dict())


@pytest.mark.parametrize(("name", "source"), all_sources())
def test_postconditions_catch_a_mutated_input(
    monkeypatch: pytest.MonkeyPatch, name: str, source: Status
) -> None:
    original = engine._load

    def load(record: object, max_payload_bytes: int) -> Checkpoint:
        checkpoint: Checkpoint = original(record, max_payload_bytes)
        if isinstance(record, dict):
            record["updatedAt"] = "1999-12-31T23:59:59Z"
        return checkpoint

    monkeypatch.setattr(steps, "_load", load)
    assert_postcondition_fails(
        call, name, RECORDS[source].to_dict(), promise="the input record is unchanged"
    )


def test_violated_transition_postcondition_raises_violation_error_not_value_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: the transitions' postconditions were once lambdas built outside
    decorator syntax, and a violation surfaced as a plain ValueError (icontract could not
    render it), which a host catching CheckpointError's base would take for a refused
    input. A violated postcondition must raise icontract.ViolationError."""
    variants: list[tuple[str, Status, Callable[[Transition, Checkpoint, str], Transition]]] = [
        ("claim_execution", Status.READY, skip_a_revision),
        ("claim_execution", Status.READY, other_binding),
        ("complete_execution", Status.EXECUTING, back_to_ready),
        ("claim_delivery", Status.COMPLETED, tampered_payload),
    ]
    outcomes: dict[str, str] = {}
    for name, source, change in variants:
        with monkeypatch.context() as patch:
            original: AdvanceFunction = engine._advance

            def advance(
                rule: TransitionRule,
                record: Checkpoint,
                at: str,
                change: Callable[[Transition, Checkpoint, str], Transition] = change,
                original: AdvanceFunction = original,
                **parts: Any,
            ) -> Transition:
                return change(original(rule, record, at, **parts), record, at)

            patch.setattr(steps, "_advance", advance)
            try:
                call(name, RECORDS[source])
            except Exception as error:  # report every variant's outcome at once
                outcomes[f"{name}/{change.__name__}"] = type(error).__name__
            else:
                outcomes[f"{name}/{change.__name__}"] = "returned"
    assert outcomes == dict.fromkeys(outcomes, "ViolationError")


def granting_execute(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    return transition._replace(action=Action.EXECUTE)


def next_as_a_dict(transition: Transition, _record: Checkpoint, _at: str) -> Transition:
    return transition._replace(next=transition.next.to_dict())  # type: ignore[arg-type]


def released_instead(transition: Transition, record: Checkpoint, _at: str) -> Transition:
    released = RECORDS[Status.RELEASED].to_dict() | {"revision": record.revision + 1}
    return transition._replace(next=Checkpoint.from_dict(released))


REVISION_PROMISE = "expected_revision is the input's revision and next is one past it"
BINDING_PROMISE = "the binding and creation time never change"


@pytest.mark.parametrize(
    ("name", "source", "change", "promise"),
    [
        ("claim_execution", Status.READY, skip_a_revision, REVISION_PROMISE),
        ("claim_execution", Status.READY, wrong_expected_revision, REVISION_PROMISE),
        ("claim_execution", Status.READY, both_revisions_off, REVISION_PROMISE),
        ("claim_execution", Status.READY, other_binding, BINDING_PROMISE),
        ("claim_execution", Status.READY, other_created_at, BINDING_PROMISE),
        (
            "complete_execution",
            Status.EXECUTING,
            back_to_ready,
            "no transition leaves executing or uncertain for ready",
        ),
        ("claim_delivery", Status.COMPLETED, tampered_payload, "a completed payload never changes"),
        (
            "complete_execution",
            Status.UNCERTAIN,
            released_instead,
            "only an executing record is released",
        ),
        ("complete_delivery", Status.DELIVERING, dropped_payload, "next validates"),
        ("claim_execution", Status.READY, next_as_a_dict, "next validates"),
        (
            "claim_delivery",
            Status.COMPLETED,
            granting_execute,
            "claim_delivery leaves from, lands in and grants what the table says",
        ),
        (
            "complete_delivery",
            Status.DELIVERING,
            granting_execute,
            "complete_delivery leaves from, lands in and grants what the table says",
        ),
    ],
)
def test_a_violation_names_the_first_promise_broken(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    source: Status,
    change: Callable[[Transition, Checkpoint, str], Transition],
    promise: str,
) -> None:
    broken_advance(monkeypatch, change)
    assert_postcondition_fails(call, name, RECORDS[source], promise=promise)


def test_a_transition_that_keeps_its_promises_breaks_none() -> None:
    record = RECORDS[Status.READY]
    transition = call("claim_execution", record)
    for name in ("claim_execution",):
        assert postconditions._broken_promise(name, record, record, transition) is None
    # The same transition read as another one's breaks that one's table promise only.
    assert postconditions._broken_promise("claim_delivery", record, record, transition) == (
        "claim_delivery leaves from, lands in and grants what the table says"
    )


def table_where(status: Status, action: Action) -> Any:
    statuses = dict(TABLE.statuses)
    statuses[status] = dataclasses.replace(statuses[status], action=action)
    return dataclasses.replace(TABLE, statuses=MappingProxyType(statuses))


@pytest.mark.parametrize("status", [status for status in STATUSES if status not in EXECUTABLE])
def test_decide_postcondition_catches_a_table_that_says_execute(
    monkeypatch: pytest.MonkeyPatch, status: Status
) -> None:
    monkeypatch.setattr(engine, "TABLE", table_where(status, Action.EXECUTE))
    decide_checkpoint(RECORDS[Status.READY], BINDING)  # ready still decides fine
    with pytest.raises(icontract.ViolationError) as caught:
        decide_checkpoint(RECORDS[status], BINDING)
    assert str(caught.value) == (
        "decide broke a promise: decide answers execute for ready and released only"
    )
    with pytest.raises(icontract.ViolationError):
        decide_checkpoint(RECORDS[status].to_dict(), BINDING)


@pytest.mark.parametrize("status", STATUSES)
def test_decide_postcondition_catches_an_answer_that_is_not_the_table(
    monkeypatch: pytest.MonkeyPatch, status: Status
) -> None:
    # A broken decide that answers another status's action (never execute, so only the
    # "answers the status's action from the table" postcondition can catch it).
    others = [
        rule.action
        for rule in TABLE.statuses.values()
        if rule.action not in (TABLE.statuses[status].action, Action.EXECUTE)
    ]

    def wrong_decision(**fields: Any) -> Decision:
        return Decision(**{**fields, "action": others[0]})

    decide_checkpoint(RECORDS[status], BINDING)  # control
    monkeypatch.setattr(engine, "Decision", wrong_decision)
    with pytest.raises(icontract.ViolationError) as caught:
        decide_checkpoint(RECORDS[status], BINDING)
    assert str(caught.value) == (
        "decide broke a promise: decide answers the status's action from the table"
    )


@pytest.mark.parametrize(
    ("name", "overrides", "code"),
    [
        ("claim_execution", {"claim_id": ""}, ErrorCode.INVALID_ARGUMENT),
        ("claim_execution", {"at": datetime(2024, 1, 1)}, ErrorCode.INVALID_ARGUMENT),
        ("complete_execution", {"claim_id": FOREIGN}, ErrorCode.FENCE_CONFLICT),
        ("complete_execution", {"result": float("nan")}, ErrorCode.PAYLOAD_NOT_JSON),
        ("complete_delivery", {"claim_id": FOREIGN}, ErrorCode.FENCE_CONFLICT),
        ("claim_delivery", {"max_payload_bytes": 0}, ErrorCode.INVALID_ARGUMENT),
    ],
)
def test_bad_input_is_a_checkpoint_error_not_a_contract_violation(
    name: str, overrides: dict[str, Any], code: ErrorCode
) -> None:
    record = RECORDS[TABLE.transitions[name].sources[0]]
    error = assert_raises_code(code, call, name, record.to_dict(), **overrides)
    assert isinstance(error, ValueError)


CONTRACTS_OFF_PROBE = """
import dataclasses, json
from datetime import datetime
import tool_execution_checkpoint as tec
from tool_execution_checkpoint.transitions import steps as tr

b = tec.Binding("ns", "call", "tool", "rev", "fp")
ready = tec.create_checkpoint(b, created_at="2024-01-01T00:00:00Z")
executing = tec.claim_execution(ready, attempt_id="a-1", at="2024-01-01T00:00:00Z").next
at = "2024-01-01T00:00:00Z"
probes = {
    "empty attempt": lambda: tec.claim_execution(ready, attempt_id="", at=at),
    "naive at": lambda: tec.claim_execution(ready, attempt_id="a", at=datetime(2024, 1, 1)),
    "bad reason": lambda: tec.mark_execution_uncertain(
        executing.to_dict(), attempt_id="a-1", at=at, reason=""),
    "bad limit": lambda: tec.claim_delivery(ready, delivery_id="d", at=at, max_payload_bytes=0),
    "foreign": lambda: tec.complete_execution(executing, attempt_id="a-2", at=at, result=1),
    "wrong status": lambda: tec.claim_execution(executing, attempt_id="a", at=at),
    "nan": lambda: tec.complete_execution(executing, attempt_id="a-1", at=at, result=float("nan")),
    "binding": lambda: tec.decide_checkpoint(ready, dataclasses.replace(b, call_id="other")),
}
out = {"enabled": tr.CONTRACTS_ENABLED, "errors": {}}
for label, probe in probes.items():
    try:
        probe()
    except tec.CheckpointError as error:
        out["errors"][label] = [error.code.value, error.field, type(error).__name__]
    else:
        out["errors"][label] = None
original = tr._advance
def broken(rule, record, when, **parts):
    t = original(rule, record, when, **parts)
    return t._replace(next=dataclasses.replace(t.next, revision=t.next.revision + 1))
tr._advance = broken
out["unchecked_revision"] = tec.claim_execution(ready, attempt_id="a", at=at).next.revision
print(json.dumps(out))
"""


def run_probe(contracts: str | None) -> dict[str, Any]:
    """Run the probe in a fresh interpreter with TOOL_CHECKPOINT_CONTRACTS set to
    ``contracts`` (unset for None: the default, contracts off)."""
    env = {**os.environ, "TOOL_CHECKPOINT_CONTRACTS": contracts or ""}
    if contracts is None:
        del env["TOOL_CHECKPOINT_CONTRACTS"]
    env.pop("PYTHONOPTIMIZE", None)
    completed = subprocess.run(
        [sys.executable, "-c", CONTRACTS_OFF_PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    if contracts != "1":
        assert completed.returncode == 0, completed.stderr
        result: dict[str, Any] = json.loads(completed.stdout)
        return result
    # With contracts on, the broken _advance at the end must be caught by icontract.
    assert completed.returncode != 0
    assert "icontract" in completed.stderr
    assert "CheckpointError" not in completed.stderr
    return {}


def test_contracts_are_off_by_default_and_on_only_when_asked() -> None:
    for setting in (None, "0", "", "yes"):
        probe = run_probe(setting)
        assert probe["enabled"] is False, setting
        assert probe["unchecked_revision"] == TABLE.initial_revision + 2
    run_probe("1")  # raises unless icontract caught the broken engine


def test_contracts_off_in_a_subprocess_keeps_the_same_errors() -> None:
    off = run_probe("0")
    assert off["enabled"] is False
    errors = off["errors"]
    assert errors["empty attempt"] == ["INVALID_ARGUMENT", "attempt_id", "CheckpointError"]
    assert errors["naive at"] == ["INVALID_ARGUMENT", "at", "CheckpointError"]
    assert errors["bad reason"] == ["INVALID_ARGUMENT", "reason", "CheckpointError"]
    assert errors["bad limit"] == ["INVALID_ARGUMENT", "max_payload_bytes", "CheckpointError"]
    assert errors["foreign"] == ["FENCE_CONFLICT", "attempt_id", "CheckpointError"]
    assert errors["wrong status"] == ["INVALID_TRANSITION", "status", "CheckpointError"]
    assert errors["nan"][0] == "PAYLOAD_NOT_JSON"
    assert errors["binding"] == ["BINDING_CONFLICT", "binding", "CheckpointError"]
    # Contracts really are off: a broken engine is not caught.
    assert off["unchecked_revision"] == TABLE.initial_revision + 2

    # The same probes in this process (contracts on) give the same errors.
    namespace: dict[str, Any] = {"__name__": "probe"}
    script = CONTRACTS_OFF_PROBE.split("original = tr._advance", maxsplit=1)[0]
    exec(compile(script, "<probe>", "exec"), namespace)
    assert namespace["out"]["enabled"] is True
    assert namespace["out"]["errors"] == errors
    run_probe("1")


# --- 8. purity ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "source"), all_sources())
def test_a_successful_transition_leaves_its_input_unchanged_and_is_deterministic(
    name: str, source: Status
) -> None:
    record = RECORDS[source]
    raw = record.to_dict()
    before = copy.deepcopy(raw)
    first = call(name, raw)
    assert raw == before
    second = call(name, raw)
    assert raw == before
    assert first == second
    assert first.next.to_dict() == second.next.to_dict()
    from_instance = call(name, record)
    assert from_instance == first
    assert record == Checkpoint.from_dict(before)


@pytest.mark.parametrize("name", TRANSITION_NAMES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), at=timestamps())
def test_purity_on_generated_records(name: str, data: st.DataObject, at: str) -> None:
    rule = TABLE.transitions[name]
    record = data.draw(st.sampled_from(rule.sources).flatmap(records), label="record")
    raw = record.to_dict()
    before = copy.deepcopy(raw)
    first = call(name, raw, at=at)
    second = call(name, raw, at=at)
    assert raw == before
    assert first == second
    assert call(name, record, at=at) == first


def test_transitions_accept_a_read_only_mapping_record() -> None:
    """RecordLike is ``Checkpoint | Mapping[str, Any]``: a read-only mapping is a record
    too, and the contracts must not need to copy it (a MappingProxyType cannot be
    deep-copied; an earlier snapshot did that and raised TypeError)."""
    outcomes: dict[str, str] = {}
    for name, source in SOURCE_PAIRS:
        raw = RECORDS[source].to_dict()
        read_only = MappingProxyType(raw)
        assert validate_checkpoint(read_only) is True
        assert decide_checkpoint(read_only, BINDING).checkpoint == RECORDS[source]
        try:
            transition = call(name, read_only)
        except Exception as error:  # report every outcome at once
            outcomes[f"{name} from {source}"] = f"{type(error).__name__}: {error}"
        else:
            assert transition == call(name, raw)
    assert outcomes == {}


COPIERS: dict[str, Callable[[Any], Any]] = {
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "pickle": lambda value: pickle.loads(pickle.dumps(value)),
}


def test_a_checkpoint_holding_a_result_can_be_copied_and_pickled() -> None:
    """BUG (records.Result): a Checkpoint is an immutable value, but one that holds a
    Result (completed, delivering, delivered) cannot be deep-copied or pickled, and a
    Result cannot even be shallow-copied: copy and pickle rebuild the object and restore
    its __slots__ with setattr, which Result.__setattr__ refuses ("AttributeError: Result
    is immutable; cannot set completed_at"). Records without a result copy fine."""
    outcomes: dict[str, str] = {}
    for status, record in RECORDS.items():
        targets: dict[str, object] = {"checkpoint": record}
        if record.result is not None:
            targets["result"] = record.result
        for what, value in targets.items():
            for how, copier in COPIERS.items():
                try:
                    copied = copier(value)
                except Exception as error:  # report every outcome at once
                    outcomes[f"{how}({what} in {status})"] = f"{type(error).__name__}: {error}"
                else:
                    assert copied == value
    assert outcomes == {}


def test_transition_contracts_built_at_test_time_guard_a_function() -> None:
    """The contract factory runs at import for the library's own transitions; built here
    again, it must pass a transition that keeps its promises and name the one broken."""
    record = RECORDS[Status.READY]
    good = tec.claim_execution(record, attempt_id="a-1", at=AT)
    replies = {"good": good, "skipping": good._replace(expected_revision=0)}

    def transition(record: RecordLike, *, reply: str) -> Transition:
        del record  # the reply is fixed; the contracts read the record
        return replies[reply]

    guarded = postconditions._transition_contracts("claim_execution")(transition)
    assert guarded(record, reply="good") is good
    assert guarded(record.to_dict(), reply="good") is good
    with pytest.raises(icontract.ViolationError) as caught:
        guarded(record, reply="skipping")
    assert str(caught.value) == f"claim_execution broke a promise: {REVISION_PROMISE}"
    as_delivery = postconditions._transition_contracts("claim_delivery")(transition)
    with pytest.raises(icontract.ViolationError) as caught:
        as_delivery(record, reply="good")
    assert str(caught.value) == (
        "claim_delivery broke a promise:"
        " claim_delivery leaves from, lands in and grants what the table says"
    )


def test_transition_contracts_built_while_disabled_check_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The factory reads CONTRACTS_ENABLED when it runs: built with contracts off, a
    transition that breaks every promise passes unchecked (as under ``python -O``)."""
    record = RECORDS[Status.READY]
    broken = tec.claim_execution(record, attempt_id="a-1", at=AT)._replace(expected_revision=0)

    def transition(record: RecordLike) -> Transition:
        del record
        return broken

    monkeypatch.setattr(postconditions, "CONTRACTS_ENABLED", False)
    unchecked = postconditions._transition_contracts("claim_execution")(transition)
    assert unchecked(record) is broken
    monkeypatch.setattr(postconditions, "CONTRACTS_ENABLED", True)
    checked = postconditions._transition_contracts("claim_execution")(transition)
    with pytest.raises(icontract.ViolationError):
        checked(record)


def test_create_checkpoint_refuses_what_is_not_a_binding() -> None:
    with pytest.raises(CheckpointError) as caught:
        tec.create_checkpoint(("ns", "call"), created_at=AT)  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_ARGUMENT,
        "binding",
        "must be a Binding",
    )


def test_next_validates_means_every_field_not_only_the_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records are built from parts checked one by one; if a check ever lets a bad value
    through (here: a timestamp check that accepts anything), the contracts refuse the
    record before a host could store one that no reader accepts."""
    record = RECORDS[Status.READY]
    for module in (engine, steps):
        monkeypatch.setattr(module, "timestamp_argument", lambda *_arguments: "x")
    with pytest.raises(icontract.ViolationError) as caught:
        tec.claim_execution(record, attempt_id="a-1", at=AT)
    assert str(caught.value) == "claim_execution broke a promise: next validates"
    with pytest.raises(icontract.ViolationError, match="a new record validates"):
        tec.create_checkpoint(BINDING, created_at=AT)


def test_a_pruned_result_is_not_pruned_again() -> None:
    delivered = RECORDS[Status.DELIVERED]
    pruned = tec.prune_result(delivered, at=AT).next
    assert pruned.result is not None
    assert pruned.result.pruned_at == AT
    with pytest.raises(CheckpointError) as caught:
        tec.prune_result(pruned, at=AT)
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_TRANSITION,
        "result.prunedAt",
        "prune_result needs it null",
    )


def test_a_transition_from_the_wrong_status_says_where_it_leaves_from() -> None:
    with pytest.raises(CheckpointError) as caught:
        tec.complete_execution(RECORDS[Status.READY], attempt_id="a-1", at=AT, result=1)
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_TRANSITION,
        "status",
        "complete_execution leaves from executing, uncertain, not from ready",
    )


def test_a_naive_datetime_is_refused_by_name() -> None:
    with pytest.raises(CheckpointError) as caught:
        tec.claim_execution(RECORDS[Status.READY], attempt_id="a", at=datetime(2024, 1, 1))
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_ARGUMENT,
        "at",
        "a datetime must be timezone-aware",
    )


@pytest.mark.parametrize("part", ["execution", "result", "delivery", "delivery.deliveredAt"])
def test_the_guard_refuses_any_part_a_rule_requires_null(
    monkeypatch: pytest.MonkeyPatch, part: str
) -> None:
    """The shipped table requires only result.prunedAt null (for prune_result); the guard
    must honour whatever part the table names."""
    requires = {
        **engine._REQUIRES_NULL,
        "prune_result": mask_of_parts(frozenset({part})),
    }
    monkeypatch.setattr(engine, "_REQUIRES_NULL", requires)
    with pytest.raises(CheckpointError) as caught:
        tec.prune_result(RECORDS[Status.DELIVERED], at=AT)
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_TRANSITION,
        part,
        "prune_result needs it null",
    )


def test_next_validates_checks_what_the_transition_made_not_what_it_kept() -> None:
    """The input was validated when it was loaded; the contract re-checks only the parts a
    transition builds. Here the kept execution is corrupted behind the constructors' back
    (only a bug could do that): claim_delivery keeps it and passes, while a corrupted part
    the transition builds is caught (see the test above)."""
    completed = RECORDS[Status.COMPLETED]
    assert completed.execution is not None
    execution = copy.copy(completed.execution)
    object.__setattr__(execution, "attempt_id", "")
    corrupted = dataclasses.replace(completed, execution=execution)
    claimed = tec.claim_delivery(corrupted, delivery_id="d-1", at=AT).next
    assert claimed.execution is execution


# --- the composed steps ---------------------------------------------------------------------


def _parts_make(
    record: Checkpoint, delivery_id: str, payload: object, at: str, *, hand_back: bool = False
) -> Checkpoint:
    """What complete_execution then claim_delivery make of ``record`` (then
    complete_delivery, with ``hand_back``)."""
    assert record.execution is not None
    attempt = record.execution.attempt_id
    done = tec.complete_execution(record, attempt_id=attempt, at=at, result=payload)
    claimed = tec.claim_delivery(done.next, delivery_id=delivery_id, at=at).next
    if not hand_back:
        return claimed
    return tec.complete_delivery(claimed, delivery_id=delivery_id, at=at).next


def _but_revision(record: Checkpoint) -> dict[str, Any]:
    return record.to_dict() | {"revision": None}


COMPLETING = ("complete_and_claim_delivery", "complete_and_deliver")
"""The composed steps that store a result and claim its delivery in one swap."""


def test_every_composed_step_is_a_public_function_that_keeps_the_table() -> None:
    assert set(TABLE.composed) == {"create_claimed", *COMPLETING}
    created = tec.create_claimed(BINDING, attempt_id="attempt-1", at=AT)
    made = {"create_claimed": created}
    for name in COMPLETING:
        made[name] = getattr(tec, name)(
            created.next, attempt_id="attempt-1", delivery_id="delivery-1", at=LATER, result=[1]
        )
    for name, step in made.items():
        rule = TABLE.composed[name]
        assert getattr(tec, name) is getattr(transitions_module, name)
        assert name in tec.__all__
        assert (step.action, step.next.status) == (rule.grants, rule.target)
        assert rule.durable
        assert rule.hand_back is (name == "complete_and_deliver")
    assert made["complete_and_deliver"].action is Action.HAND_BACK
    assert made["complete_and_deliver"].next.status is Status.DELIVERED
    for name in COMPLETING:
        assert TABLE.composed[name].fence is Fence.ATTEMPT_ID


@given(binding=bindings, attempt=identifiers, at=timestamps())
def test_create_claimed_is_create_then_claim_in_one_write(
    binding: Binding, attempt: str, at: str
) -> None:
    created = tec.create_claimed(binding, attempt_id=attempt, at=at)
    ready = create_checkpoint(binding, created_at=at)
    claim = tec.claim_execution(ready, attempt_id=attempt, at=at)
    assert created.action is Action.EXECUTE is claim.action
    assert (created.expected_revision, created.next.revision) == (0, TABLE.initial_revision)
    assert _but_revision(created.next) == _but_revision(claim.next)
    assert Checkpoint.from_dict(created.next.to_dict()) == created.next
    assert decide_checkpoint(created.next, binding).action is Action.RECONCILE_EXECUTION


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"binding": {"callId": "c"}}, "binding"),
        ({"attempt_id": ""}, "attempt_id"),
        ({"attempt_id": "a\x00b"}, "attempt_id"),
        ({"at": "yesterday"}, "at"),
        ({"at": datetime(2024, 5, 6)}, "at"),  # a naive datetime is refused
    ],
)
def test_create_claimed_refuses_bad_arguments_by_name(
    arguments: dict[str, Any], field: str
) -> None:
    call_arguments: dict[str, Any] = {"binding": BINDING, "attempt_id": "attempt-1", "at": AT}
    call_arguments |= arguments
    binding = call_arguments.pop("binding")
    error = assert_raises_code(
        ErrorCode.INVALID_ARGUMENT, tec.create_claimed, binding, **call_arguments
    )
    assert error.field == field
    assert "a\x00b" not in str(error)
    assert "yesterday" not in str(error)


@pytest.mark.parametrize("name", COMPLETING)
@given(
    record=records(Status.EXECUTING),
    delivery=identifiers,
    payload=json_values,
    at=timestamps(),
    form=st.sampled_from(FORMS),
)
def test_a_completing_step_is_its_parts_in_one_write(
    name: str, *, record: Checkpoint, delivery: str, payload: JSONValue, at: str, form: str
) -> None:
    """complete_and_claim_delivery is complete_execution then claim_delivery;
    complete_and_deliver is those, then complete_delivery, granting hand-back."""
    assert record.execution is not None
    hand_back = name == "complete_and_deliver"
    raw = in_form(record, form)
    before = snapshot(raw)
    step = getattr(tec, name)(
        raw, attempt_id=record.execution.attempt_id, delivery_id=delivery, at=at, result=payload
    )
    assert snapshot(raw) == before
    assert step.action is (Action.HAND_BACK if hand_back else Action.DELIVER)
    assert (step.expected_revision, step.next.revision) == (record.revision, record.revision + 1)
    made = _parts_make(record, delivery, payload, at, hand_back=hand_back)
    assert _but_revision(step.next) == _but_revision(made)
    assert step.next.result is not None
    assert step.next.result.payload == payload
    answer = decide_checkpoint(step.next, record.binding).action
    assert answer is (Action.NONE if hand_back else Action.RECONCILE_DELIVERY)


COMPLETES_FROM = (Status.EXECUTING, Status.UNCERTAIN)


@pytest.mark.parametrize("name", COMPLETING)
@pytest.mark.parametrize("status", [s for s in STATUSES if s not in COMPLETES_FROM])
def test_a_completing_step_leaves_from_executing_or_uncertain_only(
    status: Status, name: str
) -> None:
    record = RECORDS[status]
    owner = record.execution.attempt_id if record.execution is not None else "attempt-1"
    error = assert_raises_code(
        ErrorCode.INVALID_TRANSITION,
        getattr(tec, name),
        record,
        attempt_id=owner,
        delivery_id="delivery-1",
        at=AT,
        result=1,
    )
    assert error.field == "status"


@pytest.mark.parametrize("name", COMPLETING)
@pytest.mark.parametrize("status", COMPLETES_FROM)
def test_the_owning_attempt_stores_its_exact_result_from_executing_or_uncertain(
    status: Status, name: str
) -> None:
    record = RECORDS[status]
    assert record.execution is not None
    step = getattr(tec, name)(
        record, attempt_id=record.execution.attempt_id, delivery_id="delivery-1", at=AT, result=7
    )
    assert step.next.status is TABLE.composed[name].target
    assert step.next.result is not None
    assert step.next.result.payload == 7
    assert step.next.execution == record.execution  # the uncertainty stays on the record


@pytest.mark.parametrize("name", COMPLETING)
def test_a_completing_step_is_fenced_by_the_attempt_id(name: str) -> None:
    executing = RECORDS[Status.EXECUTING]
    assert executing.execution is not None
    for intruder in ("intruder", executing.execution.attempt_id + "x"):
        error = assert_raises_code(
            ErrorCode.FENCE_CONFLICT,
            getattr(tec, name),
            executing,
            attempt_id=intruder,
            delivery_id="delivery-1",
            at=AT,
            result=1,
        )
        assert error.field == "attempt_id"
        assert intruder not in str(error)


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        ({"delivery_id": ""}, ErrorCode.INVALID_ARGUMENT, "delivery_id"),
        ({"attempt_id": "x" * 257}, ErrorCode.INVALID_ARGUMENT, "attempt_id"),
        ({"at": "now"}, ErrorCode.INVALID_ARGUMENT, "at"),
        ({"result": float("nan")}, ErrorCode.PAYLOAD_NOT_JSON, "payload"),
        ({"result": "x" * 70_000}, ErrorCode.PAYLOAD_LIMIT_EXCEEDED, "payload"),
        ({"max_payload_bytes": 0}, ErrorCode.INVALID_ARGUMENT, "max_payload_bytes"),
    ],
)
@pytest.mark.parametrize("name", COMPLETING)
def test_a_completing_step_refuses_what_its_parts_refuse(
    arguments: dict[str, Any], code: ErrorCode, field: str, name: str
) -> None:
    executing = RECORDS[Status.EXECUTING]
    assert executing.execution is not None
    call_arguments: dict[str, Any] = {
        "attempt_id": executing.execution.attempt_id,
        "delivery_id": "delivery-1",
        "at": AT,
        "result": {"ok": True},
    }
    error = assert_raises_code(code, getattr(tec, name), executing, **(call_arguments | arguments))
    assert error.field == field


def _guarded_delivery_claim(
    change: Callable[[Transition], Transition], step: str = "complete_and_claim_delivery"
) -> Callable[..., Any]:
    """The composed step ``name``'s own body, its result changed by ``change``, under the
    same snapshot and postcondition."""
    body = steps._stores_and_claims.__wrapped__  # type: ignore[attr-defined]

    def broken(name: str, record: RecordLike, **arguments: Any) -> Transition:
        return change(body(name, record, **arguments))

    ensure = icontract.ensure(
        postconditions._made_by_its_parts, error=postconditions._composition_violation
    )
    guarded = icontract.snapshot(postconditions._as_checkpoint)(ensure(broken))

    def called(record: RecordLike, **arguments: Any) -> Transition:
        made: Transition = guarded(step, record, **arguments)
        return made

    return called


def _body_arguments(record: Checkpoint, payload: JSONValue) -> dict[str, Any]:
    """The keywords of a composed step's body for the owner of ``record``'s claim."""
    assert record.execution is not None
    return {
        "attempt_id": record.execution.attempt_id,
        "delivery_id": "delivery-1",
        "at": AT,
        "payload": payload,
        "max_payload_bytes": LIMITS.default_max_payload_bytes,
    }


def _claimed_late(made: Transition) -> Transition:
    delivery = made.next.delivery
    assert delivery is not None
    late = dataclasses.replace(delivery, claimed_at="2030-01-01T00:00:00Z")
    return made._replace(next=dataclasses.replace(made.next, delivery=late))


def test_the_composed_postcondition_catches_a_record_its_parts_do_not_make() -> None:
    """A delivery claimed at another time than the result passes every promise of a
    single transition; only the comparison with the parts catches it."""
    executing = RECORDS[Status.EXECUTING]
    arguments = _body_arguments(executing, 1)
    assert _guarded_delivery_claim(lambda made: made)(executing, **arguments)  # control
    with pytest.raises(icontract.ViolationError) as caught:
        _guarded_delivery_claim(_claimed_late)(executing, **arguments)
    assert str(caught.value) == (
        "complete_and_claim_delivery broke a promise: next is the record its parts make"
    )
    with pytest.raises(icontract.ViolationError) as caught:
        _guarded_delivery_claim(skip_a_revision_of)(executing, **arguments)
    assert str(caught.value) == (
        "complete_and_claim_delivery broke a promise: expected_revision is the input's"
        " revision and next is one past it"
    )


def _stores_none(made: Transition) -> Transition:
    """The body stores null where it was given a payload."""
    stored = made.next.result
    assert stored is not None
    emptied = Result(None, completed_at=stored.completed_at)
    return made._replace(next=dataclasses.replace(made.next, result=emptied))


@pytest.mark.parametrize("name", COMPLETING)
def test_the_composed_violation_names_a_payload_the_body_dropped(name: str) -> None:
    executing = RECORDS[Status.EXECUTING]
    arguments = _body_arguments(executing, {"sent": True})
    assert _guarded_delivery_claim(lambda made: made, name)(executing, **arguments)  # control
    with pytest.raises(icontract.ViolationError) as caught:
        _guarded_delivery_claim(_stores_none, name)(executing, **arguments)
    assert str(caught.value) == f"{name} broke a promise: next is the record its parts make"


def _not_delivered(made: Transition) -> Transition:
    """The hand-back step's body leaves the delivery claimed but not delivered."""
    delivery = made.next.delivery
    assert delivery is not None
    claimed = dataclasses.replace(delivery, delivered_at=None)
    following = dataclasses.replace(made.next, status=Status.DELIVERING, delivery=claimed)
    return made._replace(next=following)


def test_the_hand_back_postcondition_catches_a_step_that_stops_at_its_claim() -> None:
    executing = RECORDS[Status.EXECUTING]
    arguments = _body_arguments(executing, 1)
    with pytest.raises(icontract.ViolationError) as caught:
        _guarded_delivery_claim(_not_delivered, "complete_and_deliver")(executing, **arguments)
    assert str(caught.value) == (
        "complete_and_deliver broke a promise: complete_and_deliver leaves from, lands in and"
        " grants what the table says"
    )


def skip_a_revision_of(made: Transition) -> Transition:
    return made._replace(next=dataclasses.replace(made.next, revision=made.next.revision + 1))


def _guarded_creation(change: Callable[[Checkpoint], Checkpoint]) -> Callable[..., Transition]:
    body = steps.create_claimed.__wrapped__  # type: ignore[attr-defined]

    def broken(binding: Binding, *, attempt_id: str, at: str) -> Transition:
        made: Transition = body(binding, attempt_id=attempt_id, at=at)
        return made._replace(next=change(made.next))

    return icontract.ensure(
        postconditions._creates_by_its_parts, error=postconditions._creation_violation
    )(broken)


@pytest.mark.parametrize(
    ("change", "promise"),
    [
        (lambda record: record, None),
        (
            lambda record: dataclasses.replace(
                record, execution=checked_execution("", record.created_at)
            ),
            "next validates",
        ),
        (
            lambda record: dataclasses.replace(record, revision=2),
            "a created record is at the initial revision, over no record",
        ),
        (
            lambda record: dataclasses.replace(record, updated_at="2030-01-01T00:00:00Z"),
            "next is the record its parts make",
        ),
        (
            lambda record: dataclasses.replace(record, status=Status.READY, execution=None),
            "create_claimed lands in and grants what the table says",
        ),
        (
            lambda record: dataclasses.replace(
                record, binding=dataclasses.replace(BINDING, call_id="other")
            ),
            "the record is the binding's",
        ),
    ],
)
def test_the_creation_postcondition_catches_a_broken_create_claimed(
    change: Callable[[Checkpoint], Checkpoint], promise: str | None
) -> None:
    guarded = _guarded_creation(change)
    if promise is None:  # the control: the body unchanged keeps every promise
        assert guarded(BINDING, attempt_id="attempt-1", at=AT).next.revision == 1
        return
    with pytest.raises(icontract.ViolationError) as caught:
        guarded(BINDING, attempt_id="attempt-1", at=AT)
    assert str(caught.value) == f"create_claimed broke a promise: {promise}"
