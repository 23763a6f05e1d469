"""Operator work over a store: pruning, reading one record, and settling stuck calls.

These functions use only the store contract (``list_records``, ``get`` and
``compare_and_swap``) and the table's transitions, so every store prunes and reconciles
alike and no store can do what the protocol forbids.

Reconciliation is for a call that waits for a person: a record whose decide action is
``reconcile-execution`` (executing or uncertain) or ``reconcile-delivery`` (delivering).
Each of :func:`complete_stuck_execution`, :func:`mark_stuck_uncertain`,
:func:`release_stuck_delivery` and :func:`confirm_stuck_delivery` is one of the table's
transitions, taken on behalf of the claim's owner (the stored attempt id or delivery id
is passed, since the owner is gone) and written by compare-and-swap from the revision
the operator saw. Nothing is written when that revision moved, and ``dry_run=True``
returns the record that would be written without writing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import CheckpointError, ErrorCode
from .records import Checkpoint, Result
from .stores.core import BrokenRecord, CheckpointStore, OperableCheckpointStore, check_key
from .table import TABLE, Status
from .transitions import (
    Timestamp,
    Transition,
    complete_delivery,
    complete_execution,
    mark_execution_uncertain,
    prune_result,
    release_delivery,
)
from .validation import check_reason, timestamp_argument, timestamp_microseconds

__all__ = [
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
    "release_stuck_delivery",
]

_CEILING = TABLE.limits.ceiling_max_payload_bytes
_DEFAULT_LIMIT = TABLE.limits.default_max_payload_bytes


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What :func:`prune_delivered` did.

    Attributes:
        pruned: How many delivered payloads were dropped.
        broken: The keys, in key order, of the listed records that could not be read
            (their stored value is not a valid record: ``get`` raises CheckpointError for
            them). They were left as they are and the pruning went on past them; repair
            or delete them by hand. Keys are digests, not identifiers' values.
    """

    pruned: int
    broken: tuple[str, ...] = ()


def _readable(store: CheckpointStore, key: str) -> Checkpoint | BrokenRecord | None:
    """The record under ``key``; None if it is gone; a BrokenRecord if it does not read.
    Only CheckpointError is caught: a store failure still stops the pruning."""
    try:
        raw = store.get(key)
        return None if raw is None else Checkpoint.from_dict(raw, max_payload_bytes=_CEILING)
    except CheckpointError as error:
        return BrokenRecord.of(key, error)


def prune_delivered(
    store: OperableCheckpointStore,
    *,
    retention_us: int,
    at: Timestamp,
    page_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> PruneReport:
    """Drop the payloads of delivered records last updated more than ``retention_us``
    microseconds before ``at``; report how many were pruned and which records could not
    be read.

    Each is pruned with the table's ``prune_result`` transition and a compare-and-swap,
    so only delivered records are touched and each stays as a tombstone: a replayed call
    id still finds it delivered (or BINDING_CONFLICT), never ready. A record that changed
    meanwhile loses its swap and is left alone. A record whose stored value is not a valid
    record (listed as a :class:`~tool_execution_checkpoint.stores.BrokenRecord`, or whose
    ``get`` raises CheckpointError) is left alone too, its key reported in
    :attr:`PruneReport.broken`: the pruning never stops at it. ``progress`` is called with
    the number of records examined so far, once per page.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a bad ``at`` or a negative retention.
        StoreError: The store failed; what was pruned before stays pruned.
    """
    when = timestamp_argument(at, "at")
    if type(retention_us) is not int or retention_us < 0:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be a non-negative int", field="retention_us"
        )
    cutoff = timestamp_microseconds(when) - retention_us
    pruned = examined = 0
    broken: list[str] = []
    after: str | None = None
    while True:
        rows = store.list_records(
            [Status.DELIVERED], updated_before_us=cutoff, after_key=after, limit=page_size
        )
        if not rows:
            return PruneReport(pruned, tuple(broken))
        for row in rows:
            record = row if isinstance(row, BrokenRecord) else _readable(store, row.key)
            if isinstance(record, BrokenRecord):
                broken.append(row.key)
                continue
            if record is None or record.status is not Status.DELIVERED or record.result is None:
                continue
            if record.result.pruned_at is not None:
                continue
            step = prune_result(record, at=when, max_payload_bytes=_CEILING)
            if store.compare_and_swap(row.key, step.expected_revision, step.next):
                pruned += 1
        examined += len(rows)
        if progress is not None:
            progress(examined)
        after = rows[-1].key


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


def _settle(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    dry_run: bool,
    name: str,
    step: Callable[[Checkpoint], Transition],
) -> Reconciliation:
    """Read the record, refuse it unless it is at ``expected_revision`` and in a status
    the table's transition ``name`` leaves from, take the transition with ``step`` and,
    unless ``dry_run``, write it by compare-and-swap."""
    expected = _revision(expected_revision)
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
    transition = step(before)
    if not dry_run and not store.compare_and_swap(
        key, transition.expected_revision, transition.next
    ):
        raise RevisionMoved(expected, None)
    return Reconciliation(name, before, transition.next, not dry_run)


def _attempt_id(record: Checkpoint) -> str:
    assert record.execution is not None  # executing and uncertain records hold it
    return record.execution.attempt_id


def _delivery_id(record: Checkpoint) -> str:
    assert record.delivery is not None  # a delivering record holds it
    return record.delivery.delivery_id


def complete_stuck_execution(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    result: object,
    at: Timestamp,
    dry_run: bool = False,
    max_payload_bytes: int = _DEFAULT_LIMIT,
) -> Reconciliation:
    """Complete an executing or uncertain record with ``result``: the exact JSON payload
    to deliver, either the tool's result found in its own system or an error payload
    (for example ``{"error": {"type": "Unknown"}}``) when the outcome cannot be found.
    The stored attempt id finishes the claim on behalf of its dead owner; the tool is
    never run. The next delivery claim sends ``result``.

    Raises:
        RevisionMoved: The record is not, or no longer, at ``expected_revision``.
        NoRecord: Nothing is stored under ``key``.
        CheckpointError: PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED for a bad ``result``
            (checked before the store is read; field ``payload``); INVALID_ARGUMENT for
            a bad key, revision, ``at`` or ``max_payload_bytes``; INVALID_TRANSITION
            from a status other than executing or uncertain; every error of
            :func:`read_record` for a broken stored record.
        StoreError: The store failed; after a write, read the record back.
    """
    when = timestamp_argument(at, "at")
    Result(result, completed_at=when, max_payload_bytes=max_payload_bytes)  # checks only
    return _settle(
        store,
        key,
        expected_revision=expected_revision,
        dry_run=dry_run,
        name="complete_execution",
        step=lambda record: complete_execution(
            record,
            attempt_id=_attempt_id(record),
            at=when,
            result=result,
            max_payload_bytes=max_payload_bytes,
        ),
    )


def mark_stuck_uncertain(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    reason: str,
    at: Timestamp,
    dry_run: bool = False,
) -> Reconciliation:
    """Mark an executing record uncertain, with ``reason`` (1 to 1,024 characters, no
    control characters, no secrets): its worker is known dead and whether the tool's
    effect happened is not known yet. The record still waits for reconciliation.

    Raises:
        RevisionMoved, NoRecord: As for :func:`complete_stuck_execution`.
        CheckpointError: INVALID_ARGUMENT for a bad key, revision, ``reason`` or ``at``
            (checked before the store is read); INVALID_TRANSITION from a status other
            than executing; every error of :func:`read_record`.
        StoreError: The store failed; after a write, read the record back.
    """
    when = timestamp_argument(at, "at")
    why = check_reason(reason, "reason", ErrorCode.INVALID_ARGUMENT)
    return _settle(
        store,
        key,
        expected_revision=expected_revision,
        dry_run=dry_run,
        name="mark_execution_uncertain",
        step=lambda record: mark_execution_uncertain(
            record, attempt_id=_attempt_id(record), at=when, reason=why, max_payload_bytes=_CEILING
        ),
    )


def release_stuck_delivery(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    at: Timestamp,
    dry_run: bool = False,
) -> Reconciliation:
    """Release a delivering record whose send is known not to have reached the provider
    (its history does not show the result): back to completed, so the next delivery
    claim sends the same stored payload.

    Raises:
        RevisionMoved, NoRecord: As for :func:`complete_stuck_execution`.
        CheckpointError: INVALID_ARGUMENT for a bad key, revision or ``at``;
            INVALID_TRANSITION from a status other than delivering; every error of
            :func:`read_record`.
        StoreError: The store failed; after a write, read the record back.
    """
    when = timestamp_argument(at, "at")
    return _settle(
        store,
        key,
        expected_revision=expected_revision,
        dry_run=dry_run,
        name="release_delivery",
        step=lambda record: release_delivery(
            record, delivery_id=_delivery_id(record), at=when, max_payload_bytes=_CEILING
        ),
    )


def confirm_stuck_delivery(
    store: CheckpointStore,
    key: str,
    *,
    expected_revision: int,
    at: Timestamp,
    dry_run: bool = False,
) -> Reconciliation:
    """Confirm a delivering record whose result the provider's history shows as
    received: delivered, nothing is sent again.

    Raises:
        RevisionMoved, NoRecord: As for :func:`complete_stuck_execution`.
        CheckpointError: INVALID_ARGUMENT for a bad key, revision or ``at``;
            INVALID_TRANSITION from a status other than delivering; every error of
            :func:`read_record`.
        StoreError: The store failed; after a write, read the record back.
    """
    when = timestamp_argument(at, "at")
    return _settle(
        store,
        key,
        expected_revision=expected_revision,
        dry_run=dry_run,
        name="complete_delivery",
        step=lambda record: complete_delivery(
            record, delivery_id=_delivery_id(record), at=when, max_payload_bytes=_CEILING
        ),
    )
