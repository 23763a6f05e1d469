"""Pruning: dropping the payloads of delivered records once a retention window has
passed on the store's clock, each record kept as a tombstone (also exported by
:mod:`tool_execution_checkpoint.operations`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import CheckpointError, ErrorCode
from .records import Checkpoint
from .stores.core import BrokenRecord, CheckpointStore, Listing, OperableCheckpointStore
from .table import TABLE, Status
from .transitions import Timestamp, prune_result
from .validation import timestamp_argument

__all__ = ["PruneReport", "prune_delivered"]

_CEILING = TABLE.limits.ceiling_max_payload_bytes
_DURABLE = TABLE.transitions["prune_result"].durable
"""Whether a pruning's swap is durable, as the table declares prune_result."""


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
    """Drop the payloads of delivered records last written more than ``retention_us``
    microseconds ago on the store's clock (before ``store.clock_us() - retention_us``,
    read once at the start), whatever their writers' clocks put in them; ``at`` is the
    time written as their ``prunedAt``. Report how many were pruned and which records
    could not be read.

    Each is pruned with the table's ``prune_result`` transition and a compare-and-swap
    (as durable as the table declares it),
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
    cutoff = store.clock_us() - retention_us
    pruned = examined = 0
    broken: list[str] = []
    listing = Listing([Status.DELIVERED], written_before_us=cutoff, limit=page_size)
    while True:
        rows = store.list_records(listing)
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
            if store.compare_and_swap(row.key, step.expected_revision, step.next, durable=_DURABLE):
                pruned += 1
        examined += len(rows)
        if progress is not None:
            progress(examined)
        listing = listing.after(rows[-1].key)
