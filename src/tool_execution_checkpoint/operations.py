"""Operator work over any store that can list its records.

These functions use only the store contract (``list_records``, ``get`` and
``compare_and_swap``) and the table's transitions, so every store prunes alike and no
store can prune what the protocol forbids.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import CheckpointError, ErrorCode
from .records import Checkpoint
from .store import OperableCheckpointStore
from .table import TABLE, Status
from .transitions import Timestamp, prune_result
from .validation import timestamp_argument, timestamp_microseconds

__all__ = ["prune_delivered"]

_CEILING = TABLE.limits.ceiling_max_payload_bytes


def prune_delivered(
    store: OperableCheckpointStore,
    *,
    retention_us: int,
    at: Timestamp,
    page_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Drop the payloads of delivered records last updated more than ``retention_us``
    microseconds before ``at``; return how many were pruned.

    Each is pruned with the table's ``prune_result`` transition and a compare-and-swap,
    so only delivered records are touched and each stays as a tombstone: a replayed call
    id still finds it delivered (or BINDING_CONFLICT), never ready. A record that changed
    meanwhile loses its swap and is left alone. ``progress`` is called with the number
    of records examined so far, once per page.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a bad ``at`` or a negative retention.
    """
    when = timestamp_argument(at, "at")
    if type(retention_us) is not int or retention_us < 0:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be a non-negative int", field="retention_us"
        )
    cutoff = timestamp_microseconds(when) - retention_us
    pruned = examined = 0
    after: str | None = None
    while True:
        rows = store.list_records(
            [Status.DELIVERED], updated_before_us=cutoff, after_key=after, limit=page_size
        )
        if not rows:
            return pruned
        for row in rows:
            raw = store.get(row.key)
            if raw is None:
                continue
            record = Checkpoint.from_dict(raw, max_payload_bytes=_CEILING)
            if record.status is not Status.DELIVERED or record.result is None:
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
