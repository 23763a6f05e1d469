"""Hypothesis strategies shared by the tests: identifiers, timestamps, JSON values, and
valid records in every status, reached by walking the transition table from ready."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hypothesis import strategies as st

from tool_execution_checkpoint import (
    TABLE,
    Binding,
    Checkpoint,
    JSONValue,
    Status,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
)

LIMITS = TABLE.limits

# Printable characters without control characters or surrogates: valid in identifiers.
identifier_chars = st.characters(codec="utf-8", exclude_categories=["Cc"])
identifiers = st.text(identifier_chars, min_size=1, max_size=LIMITS.max_identifier_chars)
short_identifiers = st.text(identifier_chars, min_size=1, max_size=12)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """RFC 3339 timestamps in the profile spec/ describes."""
    moment = draw(st.datetimes(min_value=datetime(1, 1, 1)))
    text = f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%S")
    fraction = draw(st.none() | st.text("0123456789", min_size=1, max_size=9))
    if fraction is not None:
        text += "." + fraction
    offset = draw(st.sampled_from(["Z", "+00:00", "-05:30", "+14:00", "+23:59", "-00:00"]))
    return text + offset


bindings = st.builds(
    Binding,
    namespace=short_identifiers,
    call_id=short_identifiers,
    tool_name=short_identifiers,
    tool_revision=short_identifiers,
    input_fingerprint=short_identifiers,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8"))
)
json_values: st.SearchStrategy[JSONValue] = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)


def _walk(record: Checkpoint, status: Status, payload: JSONValue, stamp: str) -> Checkpoint:
    """Drive ``record`` (ready) to ``status`` through the table's transitions."""
    attempt, delivery = "attempt-1", "delivery-1"
    path: dict[Status, list[Any]] = {
        Status.READY: [],
        Status.EXECUTING: [lambda r: claim_execution(r, attempt_id=attempt, at=stamp)],
        Status.RELEASED: [
            lambda r: claim_execution(r, attempt_id=attempt, at=stamp),
            lambda r: release_execution(r, attempt_id=attempt, at=stamp),
        ],
        Status.UNCERTAIN: [
            lambda r: claim_execution(r, attempt_id=attempt, at=stamp),
            lambda r: mark_execution_uncertain(r, attempt_id=attempt, at=stamp, reason="timeout"),
        ],
        Status.COMPLETED: [
            lambda r: claim_execution(r, attempt_id=attempt, at=stamp),
            lambda r: complete_execution(r, attempt_id=attempt, at=stamp, result=payload),
        ],
    }
    path[Status.DELIVERING] = [
        *path[Status.COMPLETED],
        lambda r: claim_delivery(r, delivery_id=delivery, at=stamp),
    ]
    path[Status.DELIVERED] = [
        *path[Status.DELIVERING],
        lambda r: release_delivery(r, delivery_id=delivery, at=stamp),
        lambda r: claim_delivery(r, delivery_id=delivery, at=stamp),
        lambda r: complete_delivery(r, delivery_id=delivery, at=stamp),
    ]
    for step in path[status]:
        record = step(record).next
    assert record.status is status
    return record


@st.composite
def checkpoints(draw: st.DrawFn, status: Status | None = None) -> Checkpoint:
    """A valid record in ``status`` (any status when None)."""
    chosen = draw(st.sampled_from(list(Status))) if status is None else status
    record = create_checkpoint(draw(bindings), created_at=draw(timestamps()))
    return _walk(record, chosen, draw(json_values), draw(timestamps()))
