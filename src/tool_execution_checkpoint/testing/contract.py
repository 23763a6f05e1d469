"""The store contract checked directly, value by value, against the model store.

The protocol harness drives a store the way hosts do; this module checks the promises a
store makes on its own, at the edges where real adapters break:

- **Exact round trips.** Every record read back is compared with the record written by
  its canonical JSON text (:func:`canonical_json`; the values and comparisons are in
  :mod:`.edges`), which tells ``-0.0`` from ``0.0``,
  ``1`` from ``1.0`` and ``true`` from ``1``, and a float from the same float kept in
  single precision. The values written include floats that need all 17 significant
  digits, ``-0.0``, integers beyond 2**53 and 2**63, characters outside the Basic
  Multilingual Plane (4 bytes in UTF-8), and payloads whose compact UTF-8 encoding is
  the configured payload ceiling to the byte (:data:`EDGE_FLOATS`, :data:`EDGE_INTS`,
  :data:`EDGE_STRINGS`, :func:`ceiling_payload`).
- **Keys kept whole.** Keys of up to 256 characters that share long prefixes (up to 255
  characters) must name different records (:func:`prefix_sharing_keys`).
- **Listings as a property.** A listing of every record with no time bound must be the
  model's (:func:`check_whole_listing`); ``list_records`` paged with every page size
  from 1 up, with time bounds on, before and after the times the store wrote the
  records at (on its own clock: :func:`written_bounds`), must return, page by page,
  exactly what that listing says it must: each page the expected page (so no short or
  empty page while matches remain), no record twice, the union the whole answer
  (:func:`check_paging`).
- **Tombstones survive.** Records are taken to delivered and pruned often; after every
  step every record, a pruned tombstone included, must still read back exactly.

:func:`contract_machine` returns a Hypothesis state machine doing all of this with random
keys, payloads, transitions, listings and prunes, a :class:`MemoryStore` as the model;
:class:`~tool_execution_checkpoint.testing.StoreConformance` runs it, and the
deterministic sweeps, for every store it vets. Failure messages name the operation, the
record field and the kind of difference, never a key, identifier or payload value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .. import transitions
from ..operations import prune_delivered
from ..records import Binding, Checkpoint
from ..stores.core import CheckpointStore, OperableCheckpointStore, RecordSummary
from ..stores.memory import MemoryStore
from ..table import Status
from ..transitions import Transition
from .edges import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    EDGE_FLOATS,
    EDGE_INTS,
    EDGE_STRINGS,
    STAMPS,
    STATUS_FILTERS,
    canonical_json,
    ceiling_payload,
    difference,
    edge_payloads,
    expect_same,
    identifiers,
    json_values,
    key_sets,
    payloads,
    prefix_sharing_keys,
)
from .listings import (
    Line,
    check_paging,
    check_whole_listing,
    selected,
    steps_to,
    timed,
    written_bounds,
)

__all__ = [
    "EDGE_FLOATS",
    "EDGE_INTS",
    "EDGE_STRINGS",
    "STAMPS",
    "STATUS_FILTERS",
    "ContractMachine",
    "canonical_json",
    "ceiling_payload",
    "check_paging",
    "check_whole_listing",
    "contract_machine",
    "difference",
    "edge_payloads",
    "json_values",
    "prefix_sharing_keys",
    "records_in_every_state",
    "selected",
    "timed",
    "written_bounds",
]


# --- the state machine ----------------------------------------------------------------


class ContractMachine(RuleBasedStateMachine):
    """Drives a store directly, operation by operation, with a :class:`MemoryStore` as
    the model: creates, every transition of the table (completions with edge and
    ceiling-sized payloads), stale writes, replays of creates and, for an operable
    store, listings paged from 1 up and prunes. Every answer must be the model's; after
    every step every record must read back exactly as the model holds it (a pruned
    tombstone included). Use :func:`contract_machine` to make one for a store."""

    make_store: ClassVar[Callable[[], CheckpointStore]]
    operable: ClassVar[bool] = False
    ceiling: ClassVar[int] = DEFAULT_MAX_PAYLOAD_BYTES

    def __init__(self) -> None:
        super().__init__()
        self.real = type(self).make_store()
        self.model = MemoryStore()
        self.keys: list[str] = []
        self.bindings: list[Binding] = []
        self.history: list[list[Checkpoint]] = []
        self.turn = 0

    def teardown(self) -> None:
        """Close the example's store."""
        close = getattr(self.real, "close", None)
        if callable(close):
            close()

    @initialize(keys=key_sets(), call_ids=st.lists(identifiers, min_size=5, max_size=5))
    def choose_keys(self, keys: list[str], call_ids: list[str]) -> None:
        """The example's keys, and a binding (with edge identifiers) for each."""
        self.keys = keys
        self.bindings = [
            Binding("contract-\U0001f600", call_ids[index], "tool-é", "1", "sha256:0")
            for index in range(len(keys))
        ]
        self.history = [[] for _ in keys]

    def _index(self, number: int) -> int:
        return number % len(self.keys)

    def _load(self, index: int) -> Checkpoint | None:
        raw = self.model.get(self.keys[index])
        return None if raw is None else Checkpoint.from_dict(raw, max_payload_bytes=self.ceiling)

    def _write(self, index: int, what: str, write: Callable[[CheckpointStore], bool]) -> bool:
        expected = write(self.model)
        answered = write(self.real)
        if answered is not expected:
            raise AssertionError(
                f"{what}: the store answered {answered} where the model answered {expected}"
            )
        key = self.keys[index]
        expect_same(self.model.get(key), self.real.get(key), f"after {what}")
        return expected

    @rule(number=st.integers(0, 4), stamp=st.sampled_from(STAMPS))
    def create(self, number: int, stamp: str) -> None:
        """create_if_absent, on an empty key or over a stored record (must not overwrite)."""
        index = self._index(number)
        record = transitions.create_checkpoint(self.bindings[index], created_at=stamp)
        key = self.keys[index]
        if self._write(
            index, "create_if_absent", lambda store: store.create_if_absent(key, record)
        ):
            self.history[index].append(record)

    @rule(
        number=st.integers(0, 4),
        choice=st.integers(0, 3),
        stamp=st.sampled_from(STAMPS),
        claim_id=identifiers,
        payload=st.data(),
    )
    def advance(
        self, number: int, choice: int, stamp: str, claim_id: str, payload: st.DataObject
    ) -> None:
        """Take a stored record one transition further, written by compare-and-swap."""
        index = self._index(number)
        record = self._load(index)
        if record is None:
            return
        step = self._next(record, choice, stamp, claim_id, payload)
        if step is None:
            return
        key = self.keys[index]
        name = f"compare_and_swap to {step.next.status.value}"
        if self._write(
            index,
            name,
            lambda store: store.compare_and_swap(key, step.expected_revision, step.next),
        ):
            self.history[index].append(step.next)

    def _next(
        self, record: Checkpoint, choice: int, at: str, claim_id: str, data: st.DataObject
    ) -> Transition | None:
        ceiling = self.ceiling
        status = record.status
        if status in (Status.READY, Status.RELEASED):
            return transitions.claim_execution(record, attempt_id=claim_id, at=at)
        if status in (Status.EXECUTING, Status.UNCERTAIN):
            assert record.execution is not None
            owner = record.execution.attempt_id
            if status is Status.EXECUTING and choice == 0:
                reason = "timed out \U0001f600 " + claim_id
                return transitions.mark_execution_uncertain(
                    record, attempt_id=owner, at=at, reason=reason
                )
            payload = data.draw(payloads(ceiling), label="payload")
            return transitions.complete_execution(
                record, attempt_id=owner, at=at, result=payload, max_payload_bytes=ceiling
            )
        if status is Status.COMPLETED:
            return transitions.claim_delivery(
                record, delivery_id=claim_id, at=at, max_payload_bytes=ceiling
            )
        if status is Status.DELIVERING:
            assert record.delivery is not None
            owner = record.delivery.delivery_id
            finish = transitions.release_delivery if choice == 0 else transitions.complete_delivery
            return finish(record, delivery_id=owner, at=at, max_payload_bytes=ceiling)
        assert record.result is not None
        if record.result.pruned_at is None:
            return transitions.prune_result(record, at=at, max_payload_bytes=ceiling)
        return None

    @rule(number=st.integers(0, 4), stamp=st.sampled_from(STAMPS), payload=st.data())
    def deliver_and_prune(self, number: int, stamp: str, payload: st.DataObject) -> None:
        """Take a record all the way to a pruned tombstone (creating it if need be),
        one compare-and-swap per transition, each answer and read checked: pruning is
        driven often, not left to the odds of random steps."""
        index = self._index(number)
        if self._load(index) is None:
            self.create(number, stamp)
        for _ in range(8):
            record = self._load(index)
            if record is None or (
                record.status is Status.DELIVERED
                and record.result is not None
                and record.result.pruned_at is not None
            ):
                return
            self.advance(number, 1, stamp, "finisher-\U0001f600", payload)

    @rule(number=st.integers(0, 4), back=st.integers(1, 8))
    def stale_write(self, number: int, back: int) -> None:
        """Write again a record that was already superseded: both stores must refuse."""
        index = self._index(number)
        history = self.history[index]
        if len(history) < 3:
            return
        position = max(1, len(history) - 1 - back)
        old, successor = history[position - 1], history[position]
        key = self.keys[index]
        self._write(
            index,
            "a stale compare_and_swap",
            lambda store: store.compare_and_swap(key, old.revision, successor),
        )

    def _reference(self) -> list[Line]:
        assert isinstance(self.real, OperableCheckpointStore)
        return check_whole_listing(self.real, self.model)

    @precondition(lambda self: self.operable)
    @rule(
        statuses=st.sets(st.sampled_from(Status)),
        bound=st.integers(0, 12),
        limit=st.integers(2, 7),
    )
    def listing(self, statuses: set[Status], bound: int, limit: int) -> None:
        """Page through a listing with pages of 1 and of ``limit``, with a time bound
        around a time a record was written at; every page must be the expected one."""
        assert isinstance(self.real, OperableCheckpointStore)
        reference = self._reference()
        bounds = written_bounds(reference)
        for size in (1, limit):
            check_paging(self.real, reference, statuses, bounds[bound % len(bounds)], size)

    @precondition(lambda self: self.operable)
    @rule(retention=st.sampled_from([0, 1, 86_400_000_000]), at=st.sampled_from(STAMPS))
    def prune(self, retention: int, at: str) -> None:
        """prune_delivered on the store prunes exactly the delivered records written more
        than ``retention`` ago on its clock (a record that sat on the edge while it ran
        either way), keeping tombstones; the model is pruned alike."""
        assert isinstance(self.real, OperableCheckpointStore)
        reference = self._reference()
        # prune_delivered pages by the last key until a page is empty: first check the
        # listing it will make, so a broken cursor fails here instead of looping.
        check_paging(self.real, reference, [Status.DELIVERED], None, 500)
        start = self.real.clock_us() - retention
        report = prune_delivered(self.real, retention_us=retention, at=at)
        end = self.real.clock_us() - retention
        pruned = 0
        for line in reference:
            if not isinstance(line, RecordSummary) or line.status is not Status.DELIVERED:
                continue
            index = self.keys.index(line.key)
            held = self._load(index)
            assert held is not None and held.result is not None
            read = self.real.get(line.key)
            if read is None:
                raise AssertionError("prune_delivered lost the record (a tombstone)")
            now_pruned = (read.get("result") or {}).get("prunedAt") == at
            if held.result.pruned_at is not None or not now_pruned:
                if held.result.pruned_at is None and line.written_us < start:
                    raise AssertionError("prune_delivered left a record older than retention")
                continue
            if line.written_us >= end:
                raise AssertionError("prune_delivered pruned a record younger than retention")
            step = transitions.prune_result(held, at=at, max_payload_bytes=self.ceiling)
            assert self.model.compare_and_swap(line.key, step.expected_revision, step.next)
            self.history[index].append(step.next)
            pruned += 1
        if report.pruned != pruned or report.broken:
            raise AssertionError(
                f"prune_delivered reported {report} where {pruned} records were pruned"
            )

    @invariant()
    def every_record_reads_back_exactly(self) -> None:
        """Every key reads back as the model holds it; a lost tombstone is named so."""
        for index, key in enumerate(self.keys):
            held = self.model.get(key)
            read = self.real.get(key)
            if held is not None and held["status"] == Status.DELIVERED.value and read is None:
                raise AssertionError(f"key #{index}: a delivered record (a tombstone) was lost")
            expect_same(held, read, f"key #{index}")

    @invariant()
    def a_listing_pages_like_the_model(self) -> None:
        """For an operable store, after every step the whole listing is the model's and
        one more listing pages as it must, its status filter, time bound and page size
        (1 to 3) taken in turn from all of them."""
        if not self.operable or not self.keys:
            return
        assert isinstance(self.real, OperableCheckpointStore)
        self.turn += 1
        reference = self._reference()
        statuses = STATUS_FILTERS[(self.turn * 37) % len(STATUS_FILTERS)]
        bounds = written_bounds(reference)
        before = bounds[self.turn % len(bounds)]
        check_paging(self.real, reference, statuses, before, 1 + self.turn % 3)


def contract_machine(
    make_store: Callable[[], CheckpointStore],
    *,
    operable: bool = False,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> type[ContractMachine]:
    """Return a :class:`ContractMachine` class for ``make_store`` (called once per
    example; returns a fresh, empty store). ``operable`` adds listings and prunes (the
    store must offer ``list_records``); ``max_payload_bytes`` is the payload ceiling
    the hosts use, the size the largest payloads are written at."""
    factory, flag, limit = make_store, operable, max_payload_bytes

    class Machine(ContractMachine):
        make_store = staticmethod(factory)
        operable = flag
        ceiling = limit

    Machine.__name__ = Machine.__qualname__ = "StoreContractMachine"
    return Machine


def records_in_every_state(
    keys: Iterator[str], binding: Callable[[int], Binding]
) -> list[tuple[str, list[Checkpoint]]]:
    """Records in every status, pruned tombstones included, each last updated at every
    stamp of :data:`STAMPS`, under keys taken from ``keys``: each as the list of its
    revisions, from the created record through the table's transitions, so a store
    receives it the only way the contract allows (create, then compare-and-swap)."""
    made = []
    number = 0
    for stamp in STAMPS:
        for status in (*Status, "pruned"):
            chain = [transitions.create_checkpoint(binding(number), created_at=stamp)]
            for step in steps_to(status):
                chain.append(step(chain[-1], stamp).next)
            made.append((next(keys), chain))
            number += 1
    return made
