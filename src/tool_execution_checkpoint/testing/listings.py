"""Listings and ages checked against the store itself: a store's whole listing (checked
against the model) is the reference every bounded listing is held to, and time bounds
are taken from the times the store wrote the records at, on its own clock, since a store
with a clock of its own lists records by when it wrote them, not by their ``updatedAt``
(see :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta

from .. import transitions
from ..operations import PruneReport, prune_delivered
from ..records import Binding, Checkpoint
from ..stores.core import (
    BrokenRecord,
    CheckpointStore,
    Listing,
    OperableCheckpointStore,
    RecordSummary,
    checkpoint_key,
)
from ..table import Status
from ..transitions import Transition
from ..validation import timestamp_microseconds

__all__ = [
    "Line",
    "check_paging",
    "check_store_clock",
    "check_whole_listing",
    "clock_past",
    "drive",
    "selected",
    "steps_to",
    "timed",
    "written_bounds",
    "written_times",
]

SLACK_US = 60_000_000
"""How far after its last clock reading a store with a clock of its own may say it wrote
a record: a cluster's masters' clocks may differ a little."""

Line = RecordSummary | BrokenRecord
"""A line of a listing."""


def timed(lines: Sequence[Line]) -> list[tuple[Line, int | None]]:
    """Lines with their ``written_us``, which their equality leaves out."""
    return [(line, line.written_us if isinstance(line, RecordSummary) else None) for line in lines]


def check_whole_listing(
    store: OperableCheckpointStore, model: OperableCheckpointStore
) -> list[Line]:
    """The store's listing of every record, every status and no time bound, which must be
    the model's (its ``written_us`` aside: the store's own clock) and agree with
    ``store.written_us`` for every record; return it, the reference that
    :func:`check_paging` and :func:`selected` hold bounded listings to.

    Raises:
        AssertionError: the listing is not the model's, or a record's ``written_us`` is
            not what ``store.written_us`` says.
    """
    every = Listing(list(Status), limit=1_000_000)
    lines, expected = list(store.list_records(every)), list(model.list_records(every))
    if lines != expected:
        missing = len({line.key for line in expected} - {line.key for line in lines})
        raise AssertionError(
            f"list_records of every record lacks {missing} records the model lists"
            if missing
            else "list_records of every record differs from the model's"
        )
    for index, line in enumerate(lines):
        if isinstance(line, RecordSummary) and store.written_us(line.key) != line.written_us:
            raise AssertionError(
                f"line #{index}: written_us says another time than the listing's written_us"
            )
    return lines


def selected(reference: Sequence[Line], listing: Listing) -> list[Line]:
    """What ``list_records`` must answer for ``listing`` on a store whose every record
    ``reference`` lists (see :func:`check_whole_listing`): in key order, after the cursor,
    the records in the statuses written before the bound, broken ones always, at most
    ``limit``."""
    chosen = [
        line
        for line in sorted(reference, key=lambda line: line.key)
        if (listing.after_key is None or line.key > listing.after_key) and listing.admits(line)
    ]
    return chosen[: listing.limit]


def written_bounds(reference: Sequence[Line], count: int = 4) -> tuple[int | None, ...]:
    """Time bounds for listings: none, and one microsecond before, on and after each of
    up to ``count`` of the times the reference's records were written at (the earliest,
    the latest and some between)."""
    times = sorted({line.written_us for line in reference if isinstance(line, RecordSummary)})
    if len(times) > count:
        times = [times[(len(times) - 1) * index // (count - 1)] for index in range(count)]
    return (None, *sorted({moment + delta for moment in times for delta in (-1, 0, 1)}))


def check_paging(
    store: OperableCheckpointStore,
    reference: Sequence[Line],
    statuses: Collection[Status],
    before: int | None,
    limit: int,
) -> list[Line]:
    """Page through ``store.list_records(Listing(statuses, written_before_us=before,
    limit=limit))``, asking for each next page after the last key (``listing.after``), and
    check every page against what :func:`selected` says the page must be, given
    ``reference`` (the store's whole listing, :func:`check_whole_listing`); return the
    records listed.

    Raises:
        AssertionError: a page differs from the expected one (too long, short or empty
            while matches remain, another order, other rows or other times), a record is
            listed twice, or the pages' union is not the whole answer.
    """
    what = f"list_records with {len(statuses)} statuses, a time bound of {before}, pages of {limit}"
    expected = selected(reference, Listing(statuses, written_before_us=before, limit=1_000_000))
    seen: list[Line] = []
    keys: set[str] = set()
    listing = Listing(statuses, written_before_us=before, limit=limit)
    for _ in range(len(expected) + 2):
        page = store.list_records(listing)
        wanted = selected(reference, listing)
        if any(row.key in keys for row in page):
            raise AssertionError(f"{what}: a record was listed on two pages")
        if len(page) > limit:
            raise AssertionError(f"{what}: a page held {len(page)} records")
        if timed(page) != timed(wanted):
            if len(page) < len(wanted):
                raise AssertionError(
                    f"{what}: a page held {len(page)} records while {len(wanted)} matched"
                )
            raise AssertionError(f"{what}: a page differs from the expected one")
        if not page:
            break
        seen += page
        keys.update(row.key for row in page)
        listing = listing.after(page[-1].key)
    if timed(seen) != timed(expected):
        raise AssertionError(f"{what}: the pages together are not the whole answer")
    return seen


Step = Callable[[Checkpoint, str], Transition]
"""One of the table's transitions, taken at a given time with owned ids ``a`` and ``d``."""


def steps_to(target: Status | str) -> list[Step]:
    """The shortest way from a created record to ``target``, a status or ``"pruned"`` (a
    delivered record whose payload was pruned): the transitions, in order."""

    def claim(r: Checkpoint, at: str) -> Transition:
        return transitions.claim_execution(r, attempt_id="a", at=at)

    def uncertain(r: Checkpoint, at: str) -> Transition:
        return transitions.mark_execution_uncertain(r, attempt_id="a", at=at, reason="timed out")

    def complete(r: Checkpoint, at: str) -> Transition:
        return transitions.complete_execution(r, attempt_id="a", at=at, result={"n": 2**63})

    def release(r: Checkpoint, at: str) -> Transition:
        return transitions.release_execution(r, attempt_id="a", at=at)

    def deliver(r: Checkpoint, at: str) -> Transition:
        return transitions.claim_delivery(r, delivery_id="d", at=at)

    def delivered(r: Checkpoint, at: str) -> Transition:
        return transitions.complete_delivery(r, delivery_id="d", at=at)

    def prune(r: Checkpoint, at: str) -> Transition:
        return transitions.prune_result(r, at=at)

    paths: dict[Status | str, list[Step]] = {
        Status.READY: [],
        Status.EXECUTING: [claim],
        Status.RELEASED: [claim, release],
        Status.UNCERTAIN: [claim, uncertain],
        Status.COMPLETED: [claim, complete],
        Status.DELIVERING: [claim, complete, deliver],
        Status.DELIVERED: [claim, complete, deliver, delivered],
        "pruned": [claim, complete, deliver, delivered, prune],
    }
    return paths[target]


def drive(store: CheckpointStore, binding: Binding, target: Status, at: str) -> None:
    """Create the record for ``binding`` and move it to ``target`` through the table's
    transitions (:func:`steps_to`), each written by CAS."""
    key = checkpoint_key(binding)
    record = transitions.create_checkpoint(binding, created_at=at)
    assert store.create_if_absent(key, record)
    for step in steps_to(target):
        transition = step(record, at)
        assert store.compare_and_swap(key, transition.expected_revision, transition.next)
        record = transition.next


def written_times(store: OperableCheckpointStore, bindings: Sequence[Binding]) -> list[int]:
    """When the store wrote the bindings' records, on its clock."""
    times = [store.written_us(checkpoint_key(binding)) for binding in bindings]
    found = [moment for moment in times if moment is not None]
    assert len(found) == len(times), "written_us found no time for a stored record"
    return found


def clock_past(store: OperableCheckpointStore, moment: int) -> None:
    """Poll the store's clock until it is past ``moment`` (five seconds at most)."""
    for _ in range(500):
        if store.clock_us() > moment:
            return
        time.sleep(0.01)
    raise AssertionError("the store's clock did not move on")


def check_store_clock(
    store: OperableCheckpointStore, binding: Callable[[str], Binding], store_clock: bool | None
) -> None:
    """Writers whose clocks are off, one 30 days behind and one 2 hours ahead, each write
    an executing and a delivered record (``binding`` names them). A store with a clock of
    its own must list them at when it wrote them (within :data:`SLACK_US` of its clock's
    readings around the writes): a listing of the records written an hour ago or more
    shows none of them, and pruning delivered records a week old prunes none. A store on
    its writers' clock must list each at its ``updatedAt``. Either way ``written_us``
    says what the listing says, and None for a key with no record. ``store_clock`` says
    which kind the store must be (None: either, found out here).

    Raises:
        AssertionError: naming what was measured on the wrong clock.
    """
    start = store.clock_us()
    now = datetime.now(UTC)
    stamped: dict[str, int] = {}
    for name, skew in (("behind", timedelta(days=-30)), ("ahead", timedelta(hours=2))):
        stamp = (now + skew).isoformat()
        for status in (Status.EXECUTING, Status.DELIVERED):
            made = binding(f"skewed-{name}-{status.value}")
            drive(store, made, status, stamp)
            stamped[checkpoint_key(made)] = timestamp_microseconds(stamp)
    end = store.clock_us()
    lines = {
        line.key: line.written_us
        for line in store.list_records(Listing(list(Status)))
        if isinstance(line, RecordSummary)
    }
    own = all(start <= lines[key] <= end + SLACK_US for key in stamped)
    theirs = all(lines[key] == stamped[key] for key in stamped)
    kind = own if store_clock is None else store_clock
    if kind and not own:
        raise AssertionError("a record is listed at a time its store did not write it at")
    if not kind and not theirs:
        raise AssertionError("a record is listed at another time than its updatedAt")
    for key in stamped:
        assert store.written_us(key) == lines[key], "written_us differs from the listing"
    assert store.written_us(checkpoint_key(binding("never-written"))) is None
    hour_ago = store.clock_us() - 3_600_000_000
    every_old = Listing(list(Status), written_before_us=hour_ago)
    listed = {line.key for line in store.list_records(every_old)}
    old = {key for key in stamped if not kind and stamped[key] < hour_ago}
    assert listed & stamped.keys() == old, "a listing of hour-old records is not by its clock"
    report = prune_delivered(store, retention_us=7 * 86_400_000_000, at=now.isoformat())
    assert report == PruneReport(pruned=0 if kind else 1), "pruning is not by the store's clock"
