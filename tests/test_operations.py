"""Operator work: listing records by status and age, pruning delivered payloads, reading
one record and settling a stuck call through the table's transitions, never a claim
younger than the minimum age on the store's clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from counting_store import CountingStore, Write
from strategies import _walk
from tool_execution_checkpoint import (
    TABLE,
    Action,
    Binding,
    CheckpointError,
    CheckpointStore,
    ErrorCode,
    Listing,
    MemoryStore,
    RecordSummary,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_execution,
)
from tool_execution_checkpoint.operations import (
    DEFAULT_MIN_AGE_US,
    ClaimTooYoung,
    NoRecord,
    PruneReport,
    Reconciliation,
    ReconciliationRefused,
    RevisionMoved,
    complete_stuck_execution,
    confirm_stuck_delivery,
    mark_stuck_uncertain,
    prune_delivered,
    read_record,
    release_stuck_delivery,
)
from tool_execution_checkpoint.validation import timestamp_microseconds

OLD, NEW, NOW = "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z"
DAY_US = 86_400 * 1_000_000
NOW_US = timestamp_microseconds(NOW)
MINUTE_US = 60 * 1_000_000


def _binding(index: int) -> Binding:
    return Binding("ops", f"call-{index}", "tool", "1", "sha256:0")


def _filled() -> tuple[MemoryStore, dict[str, tuple[Status, str]]]:
    """One record per status per age, stored under its key, in a store whose clock says
    NOW (its records were written at their updatedAt: the host's clock)."""
    store = MemoryStore(clock=lambda: NOW_US)
    placed: dict[str, tuple[Status, str]] = {}
    index = 0
    for status in Status:
        for stamp in (OLD, NEW):
            binding = _binding(index)
            record = _walk(
                create_checkpoint(binding, created_at=stamp), status, {"n": index}, stamp
            )
            key = checkpoint_key(binding)
            assert store.create_if_absent(key, create_checkpoint(binding, created_at=stamp))
            # Test setup: place the walked record as if its transitions had been swapped in.
            store._texts[key] = record.to_json()
            store._revisions[key] = record.revision
            placed[key] = (status, stamp)
            index += 1
    return store, placed


def test_list_records_filters_by_status_and_age_in_key_order() -> None:
    store, placed = _filled()
    cutoff = 1_780_000_000 * 1_000_000  # between OLD and NEW
    rows = store.list_records(
        Listing([Status.EXECUTING, Status.DELIVERING], written_before_us=cutoff)
    )
    expected = sorted(
        key
        for key, (status, stamp) in placed.items()
        if status in (Status.EXECUTING, Status.DELIVERING) and stamp == OLD
    )
    assert [row.key for row in rows] == expected
    assert all(isinstance(row, RecordSummary) and row.updated_at == OLD for row in rows)
    assert all(isinstance(row, RecordSummary) and row.written_us == row.updated_us for row in rows)
    everything = store.list_records(Listing(list(Status)))
    assert [row.key for row in everything] == sorted(placed)


def test_list_records_pages_after_a_key() -> None:
    store, placed = _filled()
    seen: list[str] = []
    listing = Listing(list(Status), limit=5)
    while page := store.list_records(listing):
        assert len(page) <= 5
        seen += [row.key for row in page]
        listing = listing.after(page[-1].key)
    assert seen == sorted(placed)


def test_prune_touches_only_old_delivered_records_and_leaves_tombstones() -> None:
    store, placed = _filled()
    before = {key: store.get(key) for key in placed}
    examined: list[int] = []
    pruned = prune_delivered(  # a day before the store's clock: OLD is older, NEW is not
        store, retention_us=DAY_US, at=NOW, page_size=3, progress=examined.append
    )
    old_delivered = [k for k, (s, t) in placed.items() if s is Status.DELIVERED and t == OLD]
    assert pruned.pruned == len(old_delivered) == 1
    assert pruned.broken == ()
    assert examined == [1]
    for key, (status, _stamp) in placed.items():
        after = store.get(key)
        assert after is not None
        if key in old_delivered:
            assert after["result"]["payload"] is None
            assert after["result"]["prunedAt"] == NOW
            assert after["revision"] == before[key]["revision"] + 1  # type: ignore[index]
        else:
            assert after == before[key], f"{status} was touched"
    assert prune_delivered(store, retention_us=DAY_US, at=NOW) == PruneReport(0)  # none left


def test_a_pruning_swaps_as_durably_as_the_table_declares_prune_result() -> None:
    store = CountingStore()
    _stuck(Status.DELIVERED, store)
    store.writes.clear()
    assert prune_delivered(store, retention_us=0, at=NOW).pruned == 1
    durable = TABLE.transitions["prune_result"].durable
    assert store.writes == [Write("swap", Status.DELIVERED, durable)]
    assert durable is False


def test_a_replayed_call_finds_the_tombstone_never_ready() -> None:
    store, placed = _filled()
    prune_delivered(store, retention_us=0, at=NOW)
    index = next(
        i
        for i in range(len(placed))
        if placed[checkpoint_key(_binding(i))] == (Status.DELIVERED, OLD)
    )
    binding = _binding(index)
    key = checkpoint_key(binding)
    assert store.create_if_absent(key, create_checkpoint(binding, created_at=NOW)) is False
    stored = store.get(key)
    assert stored is not None
    assert decide_checkpoint(stored, binding).action is Action.NONE
    changed = Binding(binding.namespace, binding.call_id, "tool", "2", "sha256:other")
    with pytest.raises(CheckpointError) as caught:
        decide_checkpoint(stored, changed)
    assert caught.value.code is ErrorCode.BINDING_CONFLICT


def test_prune_refuses_a_negative_retention() -> None:
    with pytest.raises(CheckpointError) as caught:
        prune_delivered(MemoryStore(), retention_us=-1, at=NOW)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


# --- reading one record and reconciling a stuck call ---------------------------------------

SECRET = "s3cret-payload-value"
STUCK = _binding(99)
STUCK_KEY = checkpoint_key(STUCK)


def _stuck(status: Status, store: MemoryStore | None = None) -> MemoryStore:
    """A store holding STUCK's record in ``status``, written step by step by CAS."""
    store = MemoryStore() if store is None else store
    place_stuck(store, status)
    return store


def place_stuck(store: CheckpointStore, status: Status) -> None:
    """Write STUCK's record in ``status`` into ``store``, step by step by CAS, as a
    worker (attempt ``dead-attempt``, delivery ``dead-delivery``) that then died."""
    claim = [lambda r: claim_execution(r, attempt_id="dead-attempt", at=OLD)]
    complete = [
        *claim,
        lambda r: complete_execution(r, attempt_id="dead-attempt", at=OLD, result=SECRET),
    ]
    deliver = [*complete, lambda r: claim_delivery(r, delivery_id="dead-delivery", at=OLD)]
    path: dict[Status, list[Callable[[Any], Any]]] = {
        Status.READY: [],
        Status.EXECUTING: claim,
        Status.RELEASED: [
            *claim,
            lambda r: release_execution(r, attempt_id="dead-attempt", at=OLD),
        ],
        Status.UNCERTAIN: [
            *claim,
            lambda r: mark_execution_uncertain(r, attempt_id="dead-attempt", at=OLD, reason="t"),
        ],
        Status.COMPLETED: complete,
        Status.DELIVERING: deliver,
        Status.DELIVERED: [
            *deliver,
            lambda r: complete_delivery(r, delivery_id="dead-delivery", at=OLD),
        ],
    }
    record = create_checkpoint(STUCK, created_at=OLD)
    assert store.create_if_absent(STUCK_KEY, record)
    for step in path[status]:
        expected, record = step(record)[1:]
        assert store.compare_and_swap(STUCK_KEY, expected, record)


Settle = Callable[..., Reconciliation]


class Kind(NamedTuple):
    """One kind of reconciliation: from which status, by which function, with which
    arguments, to which status."""

    source: Status
    settle: Settle
    extra: dict[str, Any]
    target: Status


KINDS = {
    "complete-executing": Kind(
        Status.EXECUTING, complete_stuck_execution, {"result": {"found": 1}}, Status.COMPLETED
    ),
    "complete-uncertain-with-an-error": Kind(
        Status.UNCERTAIN,
        complete_stuck_execution,
        {"result": {"error": {"type": "Unknown"}}},
        Status.COMPLETED,
    ),
    "mark-uncertain": Kind(
        Status.EXECUTING, mark_stuck_uncertain, {"reason": "worker died"}, Status.UNCERTAIN
    ),
    "release": Kind(Status.DELIVERING, release_stuck_delivery, {}, Status.COMPLETED),
    "confirm": Kind(Status.DELIVERING, confirm_stuck_delivery, {}, Status.DELIVERED),
}
each_kind = pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))


@each_kind
def test_each_reconciliation_takes_the_tables_transition_by_cas(kind: Kind) -> None:
    source, settle, extra, target = kind
    store = _stuck(source)
    before = read_record(store, STUCK_KEY)
    assert before.status is source
    done = settle(store, STUCK_KEY, expected_revision=before.revision, at=NOW, **extra)
    assert done.written
    assert done.before == before
    assert done.after.status is target
    assert done.after.revision == before.revision + 1
    assert read_record(store, STUCK_KEY) == done.after
    assert decide_checkpoint(done.after, STUCK).action is TABLE.statuses[target].action
    if "result" in extra:
        assert done.after.result is not None
        assert done.after.result.payload == extra["result"]
    if "reason" in extra:
        assert done.after.execution is not None
        assert done.after.execution.uncertain is not None
        assert done.after.execution.uncertain.reason == "worker died"
    if target is Status.COMPLETED and source is Status.DELIVERING:
        assert done.after.delivery is None  # the next claim sends the same payload
        assert done.after.result == before.result


@each_kind
def test_a_dry_run_shows_the_next_record_and_writes_nothing(kind: Kind) -> None:
    source, settle, extra, target = kind
    store = _stuck(source)
    stored = store.get(STUCK_KEY)
    revision = read_record(store, STUCK_KEY).revision
    done = settle(store, STUCK_KEY, expected_revision=revision, at=NOW, dry_run=True, **extra)
    assert not done.written
    assert done.after.status is target
    assert store.get(STUCK_KEY) == stored


@each_kind
def test_a_moved_revision_is_refused_and_nothing_is_written(kind: Kind) -> None:
    store = _stuck(kind.source)
    stored = store.get(STUCK_KEY)
    revision = read_record(store, STUCK_KEY).revision
    for seen in (revision - 1, revision + 1):
        with pytest.raises(RevisionMoved) as caught:
            kind.settle(store, STUCK_KEY, expected_revision=seen, at=NOW, **kind.extra)
        assert (caught.value.expected, caught.value.stored) == (seen, revision)
        assert store.get(STUCK_KEY) == stored


@each_kind
def test_each_reconciliation_swaps_as_durably_as_the_table_declares(kind: Kind) -> None:
    """A confirmed delivery is the table's non-durable delivered mark; the rest are
    durable."""
    store = CountingStore()
    _stuck(kind.source, store)
    store.writes.clear()
    revision = read_record(store, STUCK_KEY).revision
    done = kind.settle(store, STUCK_KEY, expected_revision=revision, at=NOW, **kind.extra)
    assert store.writes == [Write("swap", kind.target, TABLE.transitions[done.transition].durable)]
    assert store.writes[0].durable is (kind.settle is not confirm_stuck_delivery)


class LosesTheSwap(MemoryStore):
    """Once ``lose`` is set, another writer always gets in between the read and the swap."""

    lose = False

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Any, *, durable: bool = True
    ) -> bool:
        return not self.lose and super().compare_and_swap(
            key, expected_revision, record, durable=durable
        )


@each_kind
def test_a_swap_lost_after_the_read_is_refused_as_moved(kind: Kind) -> None:
    store = LosesTheSwap()
    _stuck(kind.source, store)
    store.lose = True
    revision = read_record(store, STUCK_KEY).revision
    with pytest.raises(RevisionMoved) as caught:
        kind.settle(store, STUCK_KEY, expected_revision=revision, at=NOW, **kind.extra)
    assert (caught.value.expected, caught.value.stored) == (revision, None)


@each_kind
def test_a_reconciliation_from_another_status_is_an_invalid_transition(kind: Kind) -> None:
    for status in Status:
        if status in TABLE.transitions[_transition_of(kind.settle)].sources:
            continue
        store = _stuck(status)
        stored = store.get(STUCK_KEY)
        revision = read_record(store, STUCK_KEY).revision
        with pytest.raises(CheckpointError) as caught:
            kind.settle(store, STUCK_KEY, expected_revision=revision, at=NOW, **kind.extra)
        assert caught.value.code is ErrorCode.INVALID_TRANSITION, status
        assert store.get(STUCK_KEY) == stored


def _transition_of(settle: Settle) -> str:
    return {
        complete_stuck_execution: "complete_execution",
        mark_stuck_uncertain: "mark_execution_uncertain",
        release_stuck_delivery: "release_delivery",
        confirm_stuck_delivery: "complete_delivery",
    }[settle]


@each_kind
def test_no_record_is_its_own_refusal(kind: Kind) -> None:
    with pytest.raises(NoRecord) as caught:
        kind.settle(MemoryStore(), STUCK_KEY, expected_revision=2, at=NOW, **kind.extra)
    assert STUCK_KEY not in str(caught.value)
    with pytest.raises(NoRecord):
        read_record(MemoryStore(), STUCK_KEY)


class Unread(MemoryStore):
    """A store that must not be read."""

    def get(self, key: str) -> Any:
        del key
        raise AssertionError("read before the arguments were checked")


@pytest.mark.parametrize(
    ("settle", "arguments", "code", "field"),
    [
        (complete_stuck_execution, {"result": float("nan")}, ErrorCode.PAYLOAD_NOT_JSON, "payload"),
        (
            complete_stuck_execution,
            {"result": "x" * 70_000},
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            "payload",
        ),
        (
            complete_stuck_execution,
            {"result": 1, "at": "yesterday"},
            ErrorCode.INVALID_ARGUMENT,
            "at",
        ),
        (mark_stuck_uncertain, {"reason": ""}, ErrorCode.INVALID_ARGUMENT, "reason"),
        (
            mark_stuck_uncertain,
            {"reason": "r", "expected_revision": True},
            ErrorCode.INVALID_ARGUMENT,
            "expected_revision",
        ),
        (
            release_stuck_delivery,
            {"expected_revision": 0},
            ErrorCode.INVALID_ARGUMENT,
            "expected_revision",
        ),
        (confirm_stuck_delivery, {"key": ""}, ErrorCode.INVALID_ARGUMENT, "key"),
        (confirm_stuck_delivery, {"min_age_us": -1}, ErrorCode.INVALID_ARGUMENT, "min_age_us"),
        (
            mark_stuck_uncertain,
            {"reason": "r", "min_age_us": 1.5},
            ErrorCode.INVALID_ARGUMENT,
            "min_age_us",
        ),
        (release_stuck_delivery, {"min_age_us": True}, ErrorCode.INVALID_ARGUMENT, "min_age_us"),
    ],
)
def test_bad_arguments_are_refused_before_the_store_is_read(
    settle: Settle, arguments: dict[str, Any], code: ErrorCode, field: str
) -> None:
    given: dict[str, Any] = {"key": STUCK_KEY, "expected_revision": 2, "at": NOW, **arguments}
    key = given.pop("key")
    with pytest.raises(CheckpointError) as caught:
        settle(Unread(), key, **given)
    assert (caught.value.code, caught.value.field) == (code, field)


def test_no_refusal_or_repr_shows_the_payload_or_the_key() -> None:
    store = _stuck(Status.DELIVERING)
    done = confirm_stuck_delivery(store, STUCK_KEY, expected_revision=4, at=NOW, dry_run=True)
    shown = [repr(done), str(done)]
    for error in (
        RevisionMoved(4, 5),
        RevisionMoved(4, None),
        NoRecord(),
        ClaimTooYoung(42_000_000, DEFAULT_MIN_AGE_US),
    ):
        shown += [str(error), repr(error)]
    with pytest.raises(CheckpointError) as caught:
        complete_stuck_execution(store, STUCK_KEY, expected_revision=4, result={SECRET: 1}, at=NOW)
    shown += [str(caught.value), repr(caught.value)]
    for text in shown:
        assert SECRET not in text
        assert STUCK_KEY not in text
        assert STUCK.call_id not in text


# --- the minimum age: never overtake a worker that may still be running ---------------------

CLAIMED_US = timestamp_microseconds(OLD)  # place_stuck writes every step at OLD


def _clocked(status: Status, minutes_later: int) -> MemoryStore:
    """STUCK's record in ``status``, in a store whose clock reads ``minutes_later``
    minutes after the record's last write."""
    store = MemoryStore(clock=lambda: CLAIMED_US + minutes_later * MINUTE_US)
    place_stuck(store, status)
    return store


def test_the_default_minimum_age_is_fifteen_minutes() -> None:
    assert DEFAULT_MIN_AGE_US == 15 * MINUTE_US


@each_kind
def test_a_claim_younger_than_the_minimum_age_is_refused_and_nothing_is_written(
    kind: Kind,
) -> None:
    store = _clocked(kind.source, 5)
    stored = store.get(STUCK_KEY)
    revision = read_record(store, STUCK_KEY).revision
    for dry_run in (False, True):
        with pytest.raises(ClaimTooYoung) as caught:
            kind.settle(
                store, STUCK_KEY, expected_revision=revision, at=NOW, dry_run=dry_run, **kind.extra
            )
        assert (caught.value.age_us, caught.value.min_age_us) == (5 * MINUTE_US, DEFAULT_MIN_AGE_US)
        assert isinstance(caught.value, ReconciliationRefused)
        assert "300 s ago" in str(caught.value)
        assert "minimum age of 900 s" in str(caught.value)
        assert store.get(STUCK_KEY) == stored
    with pytest.raises(ClaimTooYoung):  # a minimum of one's own
        kind.settle(
            store,
            STUCK_KEY,
            expected_revision=revision,
            at=NOW,
            min_age_us=6 * MINUTE_US,
            **kind.extra,
        )


@each_kind
def test_a_claim_older_than_the_minimum_age_is_settled(kind: Kind) -> None:
    store = _clocked(kind.source, 16)
    revision = read_record(store, STUCK_KEY).revision
    done = kind.settle(store, STUCK_KEY, expected_revision=revision, at=NOW, **kind.extra)
    assert done.written
    assert done.after.status is kind.target


@each_kind
def test_a_minimum_age_of_zero_settles_a_young_claim_at_once(kind: Kind) -> None:
    store = _clocked(kind.source, 0)
    revision = read_record(store, STUCK_KEY).revision
    done = kind.settle(
        store, STUCK_KEY, expected_revision=revision, at=NOW, min_age_us=0, **kind.extra
    )
    assert done.written
    assert done.after.status is kind.target


class NotingStore(MemoryStore):
    """A store that notes the time of each write on its own clock, as a server does."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: self.now)
        self.now = NOW_US
        self.noted: dict[str, int] = {}

    def create_if_absent(self, key: str, record: Any) -> bool:
        self.noted.setdefault(key, self.now)
        return super().create_if_absent(key, record)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Any, *, durable: bool = True
    ) -> bool:
        swapped = super().compare_and_swap(key, expected_revision, record, durable=durable)
        if swapped:
            self.noted[key] = self.now
        return swapped

    def written_us(self, key: str) -> int | None:
        return self.noted.get(key)


def test_the_age_is_the_stores_not_the_writers_or_the_operators() -> None:
    """A worker whose clock lags five months claims now: its updatedAt says five months,
    but the store (which notes each write's time on its own clock) says a minute; the
    operator's own ``at``, a year on, changes nothing either."""
    store = NotingStore()
    place_stuck(store, Status.EXECUTING)  # stamped OLD: five months before the store's now
    store.now += MINUTE_US
    with pytest.raises(ClaimTooYoung) as caught:
        mark_stuck_uncertain(
            store, STUCK_KEY, expected_revision=2, reason="gone", at="2027-06-01T00:00:00Z"
        )
    assert caught.value.age_us == MINUTE_US
    store.now += 15 * MINUTE_US
    done = mark_stuck_uncertain(store, STUCK_KEY, expected_revision=2, reason="gone", at=NOW)
    assert done.written


class PlainStore:
    """A CheckpointStore and no more: no clock_us, no written_us."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def create_if_absent(self, key: str, record: Any) -> bool:
        return self.inner.create_if_absent(key, record)

    def get(self, key: str) -> Any:
        return self.inner.get(key)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Any, *, durable: bool = True
    ) -> bool:
        return self.inner.compare_and_swap(key, expected_revision, record, durable=durable)


def test_a_store_without_a_clock_is_measured_by_the_records_time_against_at() -> None:
    store = PlainStore()
    place_stuck(store, Status.DELIVERING)
    with pytest.raises(ClaimTooYoung):
        confirm_stuck_delivery(store, STUCK_KEY, expected_revision=4, at="2026-01-01T00:05:00Z")
    done = confirm_stuck_delivery(store, STUCK_KEY, expected_revision=4, at="2026-01-01T00:15:00Z")
    assert done.written
