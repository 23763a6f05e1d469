"""Operator work over a store: pruning (:mod:`.pruning`), reading one record, and
settling stuck calls.

These functions use only the store contract (``list_records``, ``get``,
``compare_and_swap`` and the store's clock) and the table's transitions, so every store
prunes and reconciles alike and no store can do what the protocol forbids.

Reconciliation is for a call that waits for a person: a record whose decide action is
``reconcile-execution`` (executing or uncertain) or ``reconcile-delivery`` (delivering).
Each of :func:`complete_stuck_execution`, :func:`mark_stuck_uncertain`,
:func:`release_stuck_delivery` and :func:`confirm_stuck_delivery` is one of the table's
transitions, taken on behalf of the claim's owner (the stored attempt id or delivery id
is passed, since the owner is gone) and written by compare-and-swap from the revision
the operator saw. Nothing is written when that revision moved, and ``dry_run=True``
returns the record that would be written without writing it.

**Live workers.** Each of them refuses (:class:`ClaimTooYoung`) a record last written
less than ``min_age_us`` ago, on the store's clock (see
:class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`; a store without one
is measured by the record's ``updatedAt`` against ``at``): the worker holding the claim
may still be running, and settling the call under it would overtake it. The default,
:data:`DEFAULT_MIN_AGE_US`, is 15 minutes: far longer than a tool call or a delivery
usually takes, longer than the timeouts agent frameworks give a tool, and short enough
that every call in the stuck-call report (``list --older-than 1h``) can be settled. Pass
``min_age_us=0`` to act at once on a claim whose worker is known to be gone. The age is
the last write's, so a record just marked uncertain waits again (or takes 0).

**Errors.** Every reconciliation checks its arguments before it reads the store, and
raises, writing nothing:

- :class:`RevisionMoved` when the record is not, or no longer, at ``expected_revision``;
  :class:`NoRecord` when nothing is stored under the key; :class:`ClaimTooYoung` when the
  record was last written less than ``min_age_us`` ago (not even a dry run proceeds);
- :class:`~tool_execution_checkpoint.CheckpointError`: INVALID_ARGUMENT for a bad key,
  revision, ``at``, ``min_age_us`` or argument of its own; INVALID_TRANSITION from a
  status the table's transition does not leave from; every error of :func:`read_record`
  for a broken stored record;
- the store's errors (after a write, read the record back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import CheckpointError, ErrorCode
from .pruning import PruneReport, prune_delivered
from .records import Checkpoint, Result
from .stores.core import CheckpointStore, OperableCheckpointStore, check_key
from .table import TABLE, Fence
from .transitions import (
    Timestamp,
    Transition,
    complete_delivery,
    complete_execution,
    mark_execution_uncertain,
    release_delivery,
)
from .validation import check_reason, timestamp_argument, timestamp_microseconds

__all__ = [
    "DEFAULT_MIN_AGE_US",
    "ClaimTooYoung",
    "NoRecord",
    "PruneReport",
    "Reconciliation",
    "ReconciliationRefused",
    "RevisionMoved",
    "complete_stuck_execution",
    "confirm_stuck_delivery",
    "mark_stuck_uncertain",
    "prune_delivered",
    "read_record",
    "record_age_us",
    "release_stuck_delivery",
]

_CEILING = TABLE.limits.ceiling_max_payload_bytes
_DEFAULT_LIMIT = TABLE.limits.default_max_payload_bytes

DEFAULT_MIN_AGE_US = 15 * 60 * 1_000_000
"""How long ago a record must have been last written, on the store's clock, before a
reconciliation acts on it unless told otherwise: 15 minutes (see the module docstring)."""


# --- reading and reconciling one record ---------------------------------------------------


class ReconciliationRefused(Exception):
    """A reconciliation found nothing it may change, and wrote nothing. The message
    names no key, identifier or payload."""


class NoRecord(ReconciliationRefused):
    """Nothing is stored under the key."""

    def __init__(self) -> None:
        super().__init__("no record under that key")


class RevisionMoved(ReconciliationRefused):
    """The record is no longer at the revision the operator saw: another worker or
    operator changed it. Read it again and decide again.

    Attributes:
        expected: The revision the operator passed.
        stored: The revision found, or None when the compare-and-swap lost after the
            read (the record changed in between).
    """

    def __init__(self, expected: int, stored: int | None) -> None:
        self.expected = expected
        self.stored = stored
        found = "changed while it was written" if stored is None else f"is at {stored}"
        super().__init__(f"the record moved: expected revision {expected}, it {found}")


class ClaimTooYoung(ReconciliationRefused):
    """The record was last written less than the minimum age ago, on the store's clock:
    the worker holding its claim may still be running. Wait, or pass a smaller minimum
    age (0 to act at once) when that worker is known to be gone.

    Attributes:
        age_us: How long ago the record was last written, in microseconds.
        min_age_us: The minimum age asked for.
    """

    def __init__(self, age_us: int, min_age_us: int) -> None:
        self.age_us = age_us
        self.min_age_us = min_age_us
        super().__init__(
            f"the record was last written {max(age_us, 0) // 1_000_000} s ago, less than the "
            f"minimum age of {min_age_us // 1_000_000} s: its worker may still be running "
            f"(wait, or pass a smaller minimum age: 0 acts at once)"
        )


@dataclass(frozen=True, slots=True, repr=False)
class Reconciliation:
    """What a reconciliation did (or, for a dry run, would do).

    Attributes:
        transition: The table's transition taken, for example ``complete_execution``.
        before: The record as it was read, at the operator's revision.
        after: The next record, at that revision + 1.
        written: Whether ``after`` was stored (False for a dry run).
    """

    transition: str
    before: Checkpoint
    after: Checkpoint
    written: bool

    def __repr__(self) -> str:
        """The transition, statuses and revisions only: no identifier, no payload."""
        return (
            f"Reconciliation({self.transition}: {self.before.status} at revision "
            f"{self.before.revision} -> {self.after.status} at revision "
            f"{self.after.revision}, written={self.written})"
        )


def read_record(store: CheckpointStore, key: str) -> Checkpoint:
    """The validated record stored under ``key`` (read with the largest payload limit).

    Raises:
        NoRecord: Nothing is stored under ``key``.
        CheckpointError: INVALID_ARGUMENT for a bad key; INVALID_CHECKPOINT,
            UNSUPPORTED_SCHEMA, PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED for a stored
            record that does not validate.
    """
    raw = store.get(check_key(key))
    if raw is None:
        raise NoRecord()
    return Checkpoint.from_dict(raw, max_payload_bytes=_CEILING)


def _revision(value: object) -> int:
    if type(value) is not int or value < TABLE.initial_revision:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be an int of at least {TABLE.initial_revision}",
            field="expected_revision",
        )
    return value


def _min_age(value: object) -> int:
    if type(value) is not int or value < 0:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be a non-negative int", field="min_age_us"
        )
    return value


def record_age_us(store: CheckpointStore, key: str, record: Checkpoint, *, at: str) -> int:
    """How long ago ``record``, read under ``key``, was last written, in microseconds:
    ``store.clock_us() - store.written_us(key)`` when the store is operable and keeps a
    time for the key, else the record's ``updatedAt`` against ``at``."""
    if isinstance(store, OperableCheckpointStore):
        now = store.clock_us()
        written = store.written_us(key)
        if written is not None:
            return now - written
    return timestamp_microseconds(at) - timestamp_microseconds(record.updated_at)


def _owner(record: Checkpoint, fence: Fence) -> dict[str, str]:
    """The stored claim id that ``fence`` checks, as the transition's keyword argument:
    the operator acts on behalf of the claim's owner."""
    if fence is Fence.ATTEMPT_ID:
        assert record.execution is not None  # executing and uncertain records hold it
        return {"attempt_id": record.execution.attempt_id}
    assert record.delivery is not None  # a delivering record holds it
    return {"delivery_id": record.delivery.delivery_id}


_TAKES: dict[str, Callable[..., Transition]] = {
    "complete_execution": complete_execution,
    "mark_execution_uncertain": mark_execution_uncertain,
    "release_delivery": release_delivery,
    "complete_delivery": complete_delivery,
}
"""The table's transitions an operator may take, by name."""


def _settle(
    store: CheckpointStore,
    key: str,
    name: str,
    *,
    expected_revision: int,
    at: Timestamp,
    dry_run: bool,
    min_age_us: int,
    **given: object,
) -> Reconciliation:
    """Read the record, refuse it unless it is at ``expected_revision``, in a status the
    table's transition ``name`` leaves from and last written at least ``min_age_us`` ago,
    take the transition with the stored claim id and ``given`` (its other arguments,
    checked by the caller) and, unless ``dry_run``, write it by compare-and-swap, as
    durable as the table declares ``name``."""
    when = timestamp_argument(at, "at")
    expected = _revision(expected_revision)
    least = _min_age(min_age_us)
    check_key(key)
    before = read_record(store, key)
    if before.revision != expected:
        raise RevisionMoved(expected, before.revision)
    rule = TABLE.transitions[name]
    if before.status not in rule.sources:
        raise CheckpointError(
            ErrorCode.INVALID_TRANSITION,
            f"{name} leaves from {', '.join(rule.sources)}, not from {before.status}",
            field="status",
        )
    if least > 0 and (age := record_age_us(store, key, before, at=when)) < least:
        raise ClaimTooYoung(age, least)
    arguments = {"max_payload_bytes": _CEILING, **given, **_owner(before, rule.fence)}
    transition = _TAKES[name](before, at=when, **arguments)
    if not dry_run and not store.compare_and_swap(
        key, transition.expected_revision, transition.next, durable=rule.durable
    ):
        raise RevisionMoved(expected, None)
    return Reconciliation(name, before, transition.next, not dry_run)


def complete_stuck_execution(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    result: object,
    at: Timestamp,
    dry_run: bool = False,
    min_age_us: int = DEFAULT_MIN_AGE_US,
    max_payload_bytes: int = _DEFAULT_LIMIT,
) -> Reconciliation:
    """Complete an executing or uncertain record with ``result``: the exact JSON payload
    to deliver, either the tool's result found in its own system or an error payload
    (for example ``{"error": {"type": "Unknown"}}``) when the outcome cannot be found.
    The tool is never run; the next delivery claim sends ``result``. A bad ``result``
    (PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED, field ``payload``) or
    ``max_payload_bytes`` is refused before the store is read; the other errors are
    every reconciliation's (see the module docstring).
    """
    when = timestamp_argument(at, "at")
    Result(result, completed_at=when, max_payload_bytes=max_payload_bytes)  # checks only
    return _settle(
        store,
        key,
        "complete_execution",
        expected_revision=expected_revision,
        at=when,
        dry_run=dry_run,
        min_age_us=min_age_us,
        result=result,
        max_payload_bytes=max_payload_bytes,
    )


def mark_stuck_uncertain(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    reason: str,
    at: Timestamp,
    dry_run: bool = False,
    min_age_us: int = DEFAULT_MIN_AGE_US,
) -> Reconciliation:
    """Mark an executing record uncertain, with ``reason`` (1 to 1,024 characters, no
    control characters, no secrets; refused before the store is read): its worker is
    known dead and whether the tool's effect happened is not known yet. The record still
    waits for reconciliation. Errors: every reconciliation's (see the module docstring).
    """
    why = check_reason(reason, "reason", ErrorCode.INVALID_ARGUMENT)
    return _settle(
        store,
        key,
        "mark_execution_uncertain",
        expected_revision=expected_revision,
        at=at,
        dry_run=dry_run,
        min_age_us=min_age_us,
        reason=why,
    )


def release_stuck_delivery(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    at: Timestamp,
    dry_run: bool = False,
    min_age_us: int = DEFAULT_MIN_AGE_US,
) -> Reconciliation:
    """Release a delivering record whose send is known not to have reached the provider
    (its history does not show the result): back to completed, so the next delivery
    claim sends the same stored payload. Errors: every reconciliation's (see the module
    docstring).
    """
    return _settle(
        store,
        key,
        "release_delivery",
        expected_revision=expected_revision,
        at=at,
        dry_run=dry_run,
        min_age_us=min_age_us,
    )


def confirm_stuck_delivery(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    at: Timestamp,
    dry_run: bool = False,
    min_age_us: int = DEFAULT_MIN_AGE_US,
) -> Reconciliation:
    """Confirm a delivering record whose result the provider's history shows as
    received: delivered, nothing is sent again. Errors: every reconciliation's (see the
    module docstring).
    """
    return _settle(
        store,
        key,
        "complete_delivery",
        expected_revision=expected_revision,
        at=at,
        dry_run=dry_run,
        min_age_us=min_age_us,
    )
