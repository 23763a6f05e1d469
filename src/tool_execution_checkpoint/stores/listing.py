"""An operator's listing: the query ``list_records`` takes (:class:`Listing`), checked and
bounded once, and the lines it answers (:class:`RecordSummary`, :class:`BrokenRecord`).
Re-exported by :mod:`~tool_execution_checkpoint.stores.core`, whose
``OperableCheckpointStore`` lists them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError, ErrorCode
from ..records import Checkpoint
from ..table import Status
from ..validation import check_identifier, timestamp_microseconds

__all__ = [
    "BrokenRecord",
    "Listing",
    "RecordSummary",
    "check_listing",
]


@dataclass(frozen=True, slots=True)
class BrokenRecord:
    """One line of an operator's listing for a key whose stored value is not a valid
    record: reading it (``get``) raises CheckpointError ``code``. Listings show it in key
    order instead of stopping at it or dropping it, so paging by the last key goes on past
    it and an operator sees it; repairing or deleting it is the operator's work.

    ``reason`` is the refusal's message: it names a field and a rule, never a value."""

    key: str
    code: ErrorCode
    reason: str

    @classmethod
    def of(cls, key: str, error: CheckpointError) -> BrokenRecord:
        """The listing line of ``key``, whose stored value ``error`` refused."""
        return cls(key=key, code=error.code, reason=str(error))


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """One line of an operator's listing: where a record is and when the store last wrote it.

    ``updated_at`` is the record's own ``updatedAt``, from its writer's clock, and
    ``updated_us`` the same as microseconds since the Unix epoch (see
    :func:`~tool_execution_checkpoint.validation.timestamp_microseconds`). ``written_us``
    is when the store last wrote the record, in microseconds on the store's clock (see
    :class:`OperableCheckpointStore`): what listings filter on, and what an age is
    measured from. It is left out of comparisons: two stores holding the same record
    wrote it at different times."""

    key: str
    namespace: str
    call_id: str
    status: Status
    revision: int
    updated_at: str
    updated_us: int
    written_us: int = dataclasses.field(compare=False)

    @classmethod
    def of(cls, key: str, record: Checkpoint, *, written_us: int | None = None) -> RecordSummary:
        """The summary of ``record`` stored under ``key``, last written at ``written_us``
        on the store's clock (None: at the record's own ``updatedAt``, for a store whose
        clock is its writers' own host's)."""
        updated_us = timestamp_microseconds(record.updated_at)
        return cls(
            key=key,
            namespace=record.binding.namespace,
            call_id=record.binding.call_id,
            status=record.status,
            revision=record.revision,
            updated_at=record.updated_at,
            updated_us=updated_us,
            written_us=updated_us if written_us is None else written_us,
        )


_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


@dataclass(frozen=True, slots=True, init=False)
class Listing:
    """What ``list_records`` lists, checked and bounded once, when it is made: the records
    in any of ``statuses`` last written before ``written_before_us`` on the store's clock
    (microseconds since the epoch, as :meth:`OperableCheckpointStore.clock_us` tells
    them; None for any time), in key order after ``after_key`` (None: from the first), at
    most ``limit`` of them. ``Listing(statuses, *, written_before_us=None,
    after_key=None, limit=1_000)`` makes one; :meth:`after` makes the next page's.

    ``statuses`` is any collection of Status values (their texts, as ``"ready"``, too),
    kept as a frozenset.

    Bounds. Any int is a valid ``written_before_us`` and any int of at least 1 a valid
    ``limit``, on every store: the answer is the same whatever a store indexes with.
    Every record's time fits a signed 64-bit integer of microseconds (years 1 to 9999),
    so a bound above ``2**63 - 1`` is kept as None (every record is earlier), one below
    ``-(2**63)`` as ``-(2**63)`` (no record is earlier; broken records are still listed),
    and a ``limit`` above ``2**63 - 1`` as ``2**63 - 1``: a store is given only values
    its 64-bit indexes hold.

    Raises:
        CheckpointError: INVALID_ARGUMENT for ``statuses`` that is a str or not a
            collection of Status values, a ``written_before_us`` that is not an int
            (a bool included) or None, an ``after_key`` that is not a valid key or None,
            or a ``limit`` that is not an int (a bool included) of at least 1. The
            message names the argument, never its value.
    """

    statuses: frozenset[Status]
    written_before_us: int | None
    after_key: str | None
    limit: int

    def __init__(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> None:
        if isinstance(statuses, str | bytes) or not isinstance(statuses, Collection):
            raise _refused("statuses", "must be a collection of Status")
        wanted = _statuses(statuses)
        if wanted is None:  # raised here, outside the except: no context quotes the value
            raise _refused("statuses", "must hold only Status values")
        if written_before_us is not None and type(written_before_us) is not int:
            raise _refused("written_before_us", "must be an int or None")
        if after_key is not None:
            check_identifier(after_key, "after_key", ErrorCode.INVALID_ARGUMENT)
        if type(limit) is not int or limit < 1:
            raise _refused("limit", "must be an int of at least 1")
        if written_before_us is not None:
            written_before_us = (
                None if written_before_us > _INT64_MAX else max(written_before_us, _INT64_MIN)
            )
        object.__setattr__(self, "statuses", wanted)
        object.__setattr__(self, "written_before_us", written_before_us)
        object.__setattr__(self, "after_key", after_key)
        object.__setattr__(self, "limit", min(limit, _INT64_MAX))

    def after(self, key: str) -> Listing:
        """This listing's next page: the same listing after ``key`` (the last key of the
        page before). Raises what the constructor raises for a bad ``after_key``."""
        return Listing(
            self.statuses,
            written_before_us=self.written_before_us,
            after_key=key,
            limit=self.limit,
        )

    def admits(self, line: RecordSummary | BrokenRecord) -> bool:
        """Whether a line of a key past ``after_key`` belongs in this listing: a
        :class:`BrokenRecord` always (it is listed wherever a store cannot place it), a
        :class:`RecordSummary` when its status is one of ``statuses`` and it was written
        before ``written_before_us``."""
        if isinstance(line, BrokenRecord):
            return True
        before = self.written_before_us
        return line.status in self.statuses and (before is None or line.written_us < before)


def _refused(field: str, detail: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field=field)


def _statuses(statuses: Collection[Any]) -> frozenset[Status] | None:
    try:
        return frozenset(Status(status) for status in statuses)
    except (TypeError, ValueError):
        return None


def check_listing(listing: object) -> Listing:
    """Check the argument of ``list_records``: a :class:`Listing`, whose fields were
    checked when it was made and are not checked again. Every store calls this first.

    Raises:
        CheckpointError: INVALID_ARGUMENT (field ``listing``) for anything else.
    """
    if not isinstance(listing, Listing):
        raise _refused("listing", "must be a Listing")
    return listing
