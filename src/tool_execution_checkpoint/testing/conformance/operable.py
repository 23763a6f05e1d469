"""OperableStoreConformance: the conformance suite for a store an operator lists, prunes
and ages records on (see :mod:`tool_execution_checkpoint.testing.conformance`)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import ClassVar

from hypothesis import example, given
from hypothesis import strategies as st

from ...errors import CheckpointError, ErrorCode
from ...operations import PruneReport, prune_delivered
from ...records import Binding, Checkpoint
from ...stores.core import (
    CheckpointStore,
    Listing,
    OperableCheckpointStore,
    RecordSummary,
    checkpoint_key,
)
from ...stores.memory import MemoryStore
from ...table import Action, Status
from ...transitions import (
    create_checkpoint,
    decide_checkpoint,
)
from ..contract import records_in_every_state
from ..edges import (
    STATUS_FILTERS,
    prefix_sharing_keys,
)
from ..listings import (
    Line,
    check_paging,
    check_store_clock,
    check_whole_listing,
    clock_past,
    drive,
    selected,
    timed,
    written_bounds,
    written_times,
)
from .garbage import GARBAGE_SECRET, leaks
from .suite import StoreConformance, property_check

__all__ = ["OperableStoreConformance"]

_NOT_OPERABLE = "the store has no list_records, clock_us or written_us"
_GAP_US = 200_000
"""How far a store's clock moves on between two groups of records told apart by age."""


def _put(store: CheckpointStore, key: str, chain: list[Checkpoint]) -> None:
    """Write a record's revisions under ``key``: create the first, swap in the rest."""
    assert store.create_if_absent(key, chain[0]), "create_if_absent refused a new key"
    for before, after in itertools.pairwise(chain):
        assert store.compare_and_swap(key, before.revision, after), (
            f"a compare_and_swap to {after.status.value} from the stored revision lost"
        )


class OperableStoreConformance(StoreConformance):
    """StoreConformance plus the operator's listing and pruning, and ages on the store's
    clock, for stores that offer ``list_records``, ``clock_us`` and ``written_us`` (every
    store of this package does)."""

    OLD: ClassVar[str] = "2026-01-01T00:00:00Z"
    NEW: ClassVar[str] = "2026-06-01T00:00:00Z"
    store_clock: ClassVar[bool | None] = None
    """True for a store with a clock of its own (a database server's) that notes the
    time of every write on it; False for a store that takes each record's ``updatedAt``
    (its writers share its host's clock); None to accept either, the checks finding out
    which and holding the store to it."""
    _operable: ClassVar[bool] = True

    def _operable_store(self) -> OperableCheckpointStore:
        store = self._store()
        assert isinstance(store, OperableCheckpointStore), _NOT_OPERABLE
        return store

    def test_every_listing_filter_pages_like_the_model(self) -> None:
        """Records in every status (pruned tombstones too) at four times, under keys
        sharing long prefixes: the whole listing must be the model's; every one of the
        64 status filters with every time bound (none, and one microsecond before, on
        and after four of the times the store wrote records at) is paged through and each
        page must be the expected page (see
        :func:`~tool_execution_checkpoint.testing.contract.check_paging`); the whole
        listing is paged with every page size from 1 to one past the record count."""
        store, model = self._operable_store(), MemoryStore()
        keys = itertools.chain.from_iterable(prefix_sharing_keys((32, 40, 64, 128, 200, 254, 255)))
        made = records_in_every_state(keys, lambda n: self._binding(f"listed-{n}-\U0001f600"))
        for key, chain in made:
            _put(store, key, chain)
            _put(model, key, chain)
        reference = check_whole_listing(store, model)
        bounds = written_bounds(reference)
        sizes = (1, 2, 3, 5, 8, 1_000)
        for number, (statuses, before) in enumerate(itertools.product(STATUS_FILTERS, bounds)):
            check_paging(store, reference, statuses, before, sizes[number % len(sizes)])
        for limit in range(1, len(made) + 2):
            check_paging(store, reference, list(Status), None, limit)

    def test_any_listing_query_answers_like_the_model(self) -> None:
        """Property-based: for generated listings (any statuses; time bounds at, around
        and far past the times the store wrote the records at, negative and past 64 bits,
        which a :class:`~tool_execution_checkpoint.stores.Listing` bounds; cursors that
        are stored keys, a character off one, or any other key; limits from 1 to past 64
        bits), the store answers exactly as the model's whole listing says it must (see
        :func:`~tool_execution_checkpoint.testing.listings.selected`): the same page,
        never a refusal. (Bad arguments are refused by ``Listing`` itself, before any
        store is asked.)"""
        store, model, bindings, _, _ = self._filled()
        reference = check_whole_listing(store, model)
        keys = sorted(checkpoint_key(binding) for binding in bindings)
        times = [line.written_us for line in reference if isinstance(line, RecordSummary)]
        bounds = st.one_of(
            st.none(),
            st.sampled_from([t + d for t in (min(times), max(times)) for d in (-1, 0, 1)]),
            st.sampled_from(times),
            st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**30]),
            st.integers(),
        )
        cursors = st.one_of(
            st.none(),
            st.sampled_from(keys),
            st.sampled_from(keys).map(lambda key: key[:-1]),
            st.sampled_from(keys).map(lambda key: key + " "),  # the first key past it
            st.sampled_from(keys).map(lambda key: key[:-1] + chr(ord(key[-1]) + 1)),
            st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=256),
            st.just("\U0010ffff" * 3),
        )
        statuses = st.lists(st.sampled_from([*Status, "executing"]), max_size=8)
        limits = st.one_of(
            st.integers(1, 2 * len(keys)), st.sampled_from([10**6, 2**63 - 1, 2**63, 2**64])
        )

        def answer(listing: Listing) -> object:
            try:
                return timed(store.list_records(listing))
            except CheckpointError as error:
                return (error.code, error.field)

        @property_check(60)
        # The edges a store's own integer types meet, always tried besides the generated.
        @example(list(Status), 2**63 - 1, None, 1_000)
        @example(list(Status), 2**63, None, 1_000)
        @example(list(Status), 2**64, None, 1_000)
        @example(list(Status), -(2**63), None, 1_000)
        @example(list(Status), -(2**63) - 1, None, 1_000)
        @example(list(Status), None, None, 2**63 - 1)
        @example(list(Status), None, None, 2**64)
        @given(statuses, bounds, cursors, limits)
        def check(chosen: list[Status], before: int | None, after: str | None, limit: int) -> None:
            listing = Listing(chosen, written_before_us=before, after_key=after, limit=limit)
            got, wanted = answer(listing), timed(selected(reference, listing))
            assert got == wanted, f"list_records answered {got!r}, the model {wanted!r}"

        check()

    def test_list_records_refuses_what_is_not_a_listing(self) -> None:
        """``list_records`` takes a :class:`~tool_execution_checkpoint.stores.Listing`
        only: None, the statuses alone (the arguments of old), a mapping of a Listing's
        fields and a look-alike object with a Listing's attributes (every status, no
        bound, a cursor holding a secret, a limit of 0) are each refused with
        CheckpointError INVALID_ARGUMENT naming ``listing``, showing none of them."""
        store = self._operable_store()
        drive(store, self._binding("listed-once"), Status.READY, self.OLD)
        fields = {
            "statuses": frozenset(Status),
            "written_before_us": None,
            "after_key": GARBAGE_SECRET,
            "limit": 0,
        }
        for wrong in (SimpleNamespace(**fields), fields, list(Status), None):
            what = type(wrong).__name__
            try:
                store.list_records(wrong)  # type: ignore[arg-type]
            except CheckpointError as error:
                assert (error.code, error.field) == (ErrorCode.INVALID_ARGUMENT, "listing"), (
                    f"a {what} for a Listing was refused as {error.code}"
                )
                where = leaks(error, GARBAGE_SECRET)
                assert where is None, f"the refusal shows what was passed, in {where}"
            except Exception as error:
                raise AssertionError(
                    f"a {what} for a Listing raised {type(error).__name__}, not CheckpointError"
                ) from None
            else:
                raise AssertionError(f"list_records took a {what} that is not a Listing")

    def _filled(self) -> tuple[OperableCheckpointStore, MemoryStore, list[Binding], int, int]:
        """A record in every status stamped OLD, then (once the store's clock has moved
        on by a fifth of a second past their writes) one in every status stamped NEW, in
        the store and in the model; return them, the bindings and a time between the two
        groups' writes on the store's clock and on the model's: the OLD group is the
        older one on any store's clock."""
        store, model = self._operable_store(), MemoryStore()
        bindings: list[Binding] = []
        for stamp in (self.OLD, self.NEW):
            if bindings:
                clock_past(store, max(written_times(store, bindings)) + _GAP_US)
            for status in Status:
                binding = self._binding(f"call-{len(bindings):02d}-é")
                for target in (store, model):
                    drive(target, binding, status, stamp)
                bindings.append(binding)
        half = len(bindings) // 2

        def between(target: OperableCheckpointStore) -> int:
            older, newer = (
                written_times(target, bindings[:half]),
                written_times(target, bindings[half:]),
            )
            return (max(older) + min(newer)) // 2

        return store, model, bindings, between(store), between(model)

    def test_list_records_matches_the_model(self) -> None:
        store, model, _, between, model_between = self._filled()
        queries: list[tuple[list[Status], int | None, int | None]] = [
            (list(Status), None, None),
            ([Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING], between, model_between),
            ([Status.DELIVERED], None, None),
            ([], None, None),
        ]
        for statuses, before, model_before in queries:
            expected = model.list_records(Listing(statuses, written_before_us=model_before))
            assert store.list_records(Listing(statuses, written_before_us=before)) == expected
        pages: list[Line] = []
        listing = Listing(list(Status), limit=3)
        while page := store.list_records(listing):
            assert len(page) <= 3
            pages += page
            listing = listing.after(page[-1].key)
        assert pages == model.list_records(Listing(list(Status)))

    def test_prune_drops_only_old_delivered_payloads_and_keeps_tombstones(self) -> None:
        """A retention that ends between the OLD and the NEW group on the store's clock
        prunes the OLD delivered record alone, as it does on the model; every tombstone
        still answers a replay."""
        store, model, bindings, between, model_between = self._filled()
        before = {checkpoint_key(b): store.get(checkpoint_key(b)) for b in bindings}
        # prune_delivered pages until a page is empty: check that listing first, so a
        # cursor that repeats its last key fails here instead of looping.
        check_paging(store, check_whole_listing(store, model), [Status.DELIVERED], None, 500)
        at = "2026-06-02T00:00:00Z"
        model_retention = model.clock_us() - model_between
        pruned = prune_delivered(store, retention_us=store.clock_us() - between, at=at)
        assert pruned == prune_delivered(model, retention_us=model_retention, at=at)
        assert pruned == PruneReport(pruned=1, broken=())
        for binding in bindings:
            key = checkpoint_key(binding)
            after = store.get(key)
            assert after == model.get(key)
            assert after is not None
            if after != before[key]:
                assert after["status"] == "delivered"
                assert after["result"]["payload"] is None
                assert decide_checkpoint(after, binding).action is Action.NONE
                replay = create_checkpoint(binding, created_at="2026-06-03T00:00:00Z")
                assert store.create_if_absent(key, replay) is False

    def test_ages_are_measured_on_the_stores_clock(self) -> None:
        """Writers whose clocks are off (30 days behind, 2 hours ahead): a store with a
        clock of its own lists their records at when it wrote them, not at their
        ``updatedAt``, so neither listings of old records nor pruning take them for older
        or younger than they are; ``store_clock`` says which kind the store must be (see
        :func:`~tool_execution_checkpoint.testing.listings.check_store_clock`)."""
        check_store_clock(self._operable_store(), self._binding, self.store_clock)

    def test_listings_and_pruning_go_on_past_garbage(self) -> None:
        """Garbage that ``write_raw`` stores among delivered records never stops or
        breaks a listing or ``prune_delivered``: every page size lists every key once, in
        key order (a garbage key as a BrokenRecord, or by the store's sound index
        columns), the valid records exactly as the model lists them; pruning drops every
        old payload and reports the garbage keys, in key order, as broken."""
        write_raw = self._raw_writer()
        store, model = self._operable_store(), MemoryStore()
        bindings = [self._binding(f"around-garbage-{n}") for n in range(4)]
        for binding in bindings:
            drive(store, binding, Status.DELIVERED, self.OLD)
            drive(model, binding, Status.DELIVERED, self.OLD)
        secret = GARBAGE_SECRET.encode()
        garbage = [b"null", b"\xff" + secret, b'["' + secret + b'"]', b"[" * 100_000, secret]
        broken = sorted(checkpoint_key(self._binding(f"garbage-{n}")) for n in range(5))
        for key, raw in zip(broken, garbage, strict=True):
            write_raw(self._made(store), key, raw)
        good = [checkpoint_key(binding) for binding in bindings]
        every = Listing(list(Status))
        for limit in (1, 2, 3, 1_000):
            listed: list[Line] = []
            listing = Listing(list(Status), limit=limit)
            for _ in range(len(good) + len(broken) + 1):  # a repeating cursor cannot loop
                page = store.list_records(listing)
                if not page:
                    break
                assert len(page) <= limit, f"a page of {limit} held {len(page)} lines"
                listed += page
                listing = listing.after(page[-1].key)
            assert [row.key for row in listed] == sorted(good + broken), (
                f"pages of {limit} did not list every key once, in key order"
            )
            assert [row for row in listed if row.key in good] == model.list_records(every)
            for row in listed:
                assert isinstance(row, RecordSummary) or row.key in broken
                assert GARBAGE_SECRET not in repr(row), "a listing line shows the garbage"
        delivered = {row.key for row in store.list_records(Listing([Status.DELIVERED]))}
        assert set(broken) <= delivered, "write_raw must index garbage as delivered"
        report = prune_delivered(store, retention_us=0, at=self.NEW, page_size=2)
        expected = prune_delivered(model, retention_us=0, at=self.NEW, page_size=2)
        assert report.pruned == expected.pruned == len(bindings)
        assert report.broken == tuple(broken), "pruning did not report every broken record"
        for key in good:
            assert store.get(key) == model.get(key)
