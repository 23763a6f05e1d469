"""The store contract checked directly, value by value, against the model store.

The protocol harness drives a store the way hosts do; this module checks the promises a
store makes on its own, at the edges where real adapters break:

- **Exact round trips.** Every record read back is compared with the record written by
  its canonical JSON text (:func:`canonical_json`), which tells ``-0.0`` from ``0.0``,
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

import functools
import json
import math
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import combinations
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..operations import prune_delivered
from ..records import Binding, Checkpoint
from ..stores.core import CheckpointStore, OperableCheckpointStore, RecordSummary
from ..stores.memory import MemoryStore
from ..table import TABLE, Status
from ..transitions import (
    Transition,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    mark_execution_uncertain,
    prune_result,
    release_delivery,
    release_execution,
)
from .listings import (
    Line,
    check_paging,
    check_whole_listing,
    selected,
    timed,
    written_bounds,
)

__all__ = [
    "EDGE_FLOATS",
    "EDGE_INTS",
    "EDGE_STRINGS",
    "STAMPS",
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

DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes
MAX_KEY_CHARS = TABLE.limits.max_identifier_chars

EDGE_FLOATS: tuple[float, ...] = (
    0.1 + 0.2,  # 0.30000000000000004: 17 significant digits
    1 / 3,
    2 / 3,
    math.pi,
    123456789.12345679,
    9007199254740993.0 - 1,  # 2**53 as a float
    1e16 + 2,
    5e-324,  # the smallest subnormal
    2.2250738585072014e-308,  # the smallest normal
    1.7976931348623157e308,  # the largest finite
    1e21,
    1e-7,
    -0.0,
    0.0,
    1.0,
    -1.5,
    16777217.0,  # 2**24 + 1: not representable in single precision
    0.1,
)
"""Floats a store must keep exactly: 17-digit values, subnormals, the extremes, ``-0.0``
and values single precision cannot hold."""

EDGE_INTS: tuple[int, ...] = (
    0,
    -1,
    2**31,
    -(2**31) - 1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    2**64 + 1,
    10**30 + 1,
    -(10**100) - 7,
)
"""Integers a store must keep exactly: beyond a double's 2**53 and beyond 64 bits."""

EDGE_STRINGS: tuple[str, ...] = (
    "",
    "é",
    "€",
    "\uffff",
    "\U00010000",  # the first character outside the BMP
    "\U0001f600",  # an emoji: 4 bytes in UTF-8, a surrogate pair in UTF-16
    "\U0001f469\u200d\U0001f4bb",  # a joined emoji sequence
    "\U0010ffff",  # the last code point
    "\U0001d518\U0001d52b\U0001d526",  # mathematical letters outside the BMP
    "a\u0000b",  # NUL inside a string
    '"\\/\b\f\n\r\t',
    "\u2028\u2029",
    "\ud7ff\ue000",
)
"""Strings a store must keep exactly, characters outside the BMP above all (a column
that holds only 3-byte UTF-8 drops or mangles them)."""

STAMPS: tuple[str, ...] = (
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.000001Z",
    "2026-03-01T12:00:00+02:00",
    "2026-06-01T00:00:00Z",
)
"""The times records are stamped with (their ``updatedAt``). A store on its writers'
host's clock lists them by these; a store with a clock of its own by when it wrote them."""

STATUS_FILTERS: tuple[frozenset[Status], ...] = tuple(
    frozenset(chosen) for size in range(len(Status) + 1) for chosen in combinations(Status, size)
)
"""Every subset of the statuses, the empty one included."""


# --- comparing exactly ------------------------------------------------------------------


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def canonical_json(value: object) -> str:
    """The JSON text of ``value`` with object members sorted: two values have the same
    text exactly when they are the same JSON value of the same Python types, so ``-0.0``
    differs from ``0.0``, ``1`` from ``1.0`` and ``True`` from ``1`` (``==`` hides all
    three). A value JSON cannot hold (NaN, a non-str member name) still gets a text, one
    no written record has."""
    try:
        return json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return "\x00not JSON: " + type(value).__name__


def _kind(written: object, read: object) -> str:
    if type(written) is not type(read):
        return f"a {type(written).__name__} came back as a {type(read).__name__}"
    if isinstance(written, float) and isinstance(read, float):
        if written == read:
            return "a float came back with another sign (-0.0 and 0.0)"
        single = struct.unpack("f", struct.pack("f", written))[0] if abs(written) < 3e38 else None
        if single is not None and read == single:
            return "a float came back in single precision"
        return "a float came back with another value"
    if isinstance(written, int):
        return "an integer came back with another value (digits lost)"
    if isinstance(written, str) and isinstance(read, str):
        if any(ord(char) > 0xFFFF for char in written) and not any(
            ord(char) > 0xFFFF for char in read
        ):
            return "a string lost its characters outside the BMP"
        if written.startswith(read):
            return "a string came back truncated"
        return "a string came back changed"
    return "a value came back changed"


def difference(written: object, read: object, path: str = "record") -> str | None:
    """Where and how ``read`` differs from ``written``, or None when they are the same
    JSON value of the same types (see :func:`canonical_json`). The answer names record
    fields and the kind of difference, never a value: inside a payload it gives the
    path as ``payload`` plus array positions and ``{…}`` for object members."""
    if canonical_json(written) == canonical_json(read):
        return None
    inside = path.startswith("record.result.payload")
    if isinstance(written, Mapping) and isinstance(read, Mapping):
        if set(written) != set(read):
            return f"{path}: the object's members differ"
        for name in written:
            below = f"{path}{'.{…}' if inside else '.' + str(name)}"
            found = difference(written[name], read[name], below)
            if found is not None:
                return found
    if isinstance(written, list) and isinstance(read, list):
        if len(written) != len(read):
            return f"{path}: the array came back with {len(read)} items, not {len(written)}"
        for index, (left, right) in enumerate(zip(written, read, strict=True)):
            found = difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
    return f"{path}: {_kind(written, read)}"


def _expect_same(written: Mapping[str, Any] | None, read: object, what: str) -> None:
    if written is None:
        if read is not None:
            raise AssertionError(f"{what}: the store holds a record where the model holds none")
        return
    if read is None:
        raise AssertionError(f"{what}: the store lost the record (it reads back as none)")
    found = difference(written, read)
    if found is not None:
        raise AssertionError(f"{what}: the record read back differs from the one written: {found}")


# --- values and keys at the edges ---------------------------------------------------------


def edge_payloads() -> list[object]:
    """Every edge value alone as a payload, then all of them in one nested payload (with
    member names outside the BMP)."""
    scalars: list[object] = [*EDGE_FLOATS, *EDGE_INTS, *EDGE_STRINGS, True, False, None]
    nested = {
        "floats": list(EDGE_FLOATS),
        "ints": list(EDGE_INTS),
        "strings": list(EDGE_STRINGS),
        "\U0001f600": {"\U0010ffff": [[-0.0, 2**63], {"": 0.1 + 0.2}]},
        "mixed": [1, 1.0, True, 0, -0.0, 0.0, False, None, "1"],
    }
    return [*scalars, nested, [nested, nested]]


_WIDTHS = {1: "a", 2: "é", 3: "€", 4: "\U0001f600"}


def ceiling_payload(size: int, width: int = 4) -> dict[str, str]:
    """A payload whose compact UTF-8 JSON encoding (the size the payload limit counts)
    is exactly ``size`` bytes (at least 12): one string of ``width``-byte characters
    (1 to 4; 4 is outside the BMP), padded with ASCII to the byte."""
    overhead = len('{"s":""}')
    room = size - overhead
    if room < 4 or width not in _WIDTHS:
        raise ValueError("a ceiling payload needs a size of at least 12 and a width of 1 to 4")
    count = room // width
    return {"s": _WIDTHS[width] * count + "a" * (room - count * width)}


def prefix_sharing_keys(
    lengths: Sequence[int] = (8, 32, 63, 64, 65, 128, 200, 254, 255),
) -> list[list[str]]:
    """Groups of valid keys, each group sharing a prefix of one of ``lengths`` characters
    and differing after it, the longest 256 characters long: a store that keeps only a
    prefix of the key makes two keys of a group share a record."""
    groups = []
    for length in lengths:
        if not 1 <= length < MAX_KEY_CHARS:
            raise ValueError(f"a shared prefix must have 1 to {MAX_KEY_CHARS - 1} characters")
        prefix = ("tec-key-" * (length // 8 + 1))[:length]
        groups.append([prefix + "a", prefix + "b", prefix + "\U0001f600", prefix + "\uffff"])
        if length <= MAX_KEY_CHARS - 2:
            groups[-1].append(prefix + "a" + "z")
    return groups


_ID_CHARS = st.sampled_from(
    [
        "a",
        "Z",
        "0",
        "-",
        ":",
        "/",
        " ",
        "é",
        "€",
        "\uffff",
        "\U00010000",
        "\U0001f600",
        "\U0010ffff",
    ]
)
identifiers = st.text(_ID_CHARS, min_size=1, max_size=12)
"""Identifiers (call ids, attempt ids, delivery ids) with characters outside the BMP."""


@functools.cache
def json_values(max_leaves: int = 12) -> st.SearchStrategy[object]:
    """JSON values built from the edge scalars and arbitrary ones: every float
    Hypothesis finds (``-0.0`` and subnormals included, NaN and infinities excluded),
    integers of up to 130 bits, strings of any characters JSON text can hold."""
    scalars = st.one_of(
        st.sampled_from(EDGE_FLOATS),
        st.sampled_from(EDGE_INTS),
        st.sampled_from(EDGE_STRINGS),
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(min_value=-(2**130), max_value=2**130),
        st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
        st.booleans(),
        st.none(),
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(_ID_CHARS, max_size=4), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


@functools.cache
def payloads(ceiling: int) -> st.SearchStrategy[object]:
    """Payloads for completions: JSON values at the edges, and now and then one whose
    encoding is the payload ceiling to the byte or a few bytes under it."""
    near = st.builds(
        ceiling_payload,
        st.integers(min_value=max(12, ceiling - 3), max_value=ceiling),
        st.sampled_from(sorted(_WIDTHS)),
    )
    edges = st.sampled_from(edge_payloads())
    if ceiling < 12:
        return st.one_of(json_values(), edges)
    return st.one_of(json_values(), edges, near)


@st.composite
def key_sets(draw: st.DrawFn) -> list[str]:
    """Two to five distinct valid keys, sharing a prefix of 0 to 255 characters."""
    length = draw(
        st.sampled_from([0, 1, 16, 63, 64, 128, 200, 250, 254, 255, 255, 255])
        | st.integers(min_value=0, max_value=MAX_KEY_CHARS - 1)
    )
    prefix = draw(st.text(_ID_CHARS, min_size=length, max_size=length))
    room = MAX_KEY_CHARS - length
    tails = draw(
        st.lists(
            st.text(_ID_CHARS, min_size=0 if prefix else 1, max_size=min(room, 4)),
            min_size=2,
            max_size=5,
            unique=True,
        )
    )
    return [prefix + tail for tail in tails]


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
        _expect_same(self.model.get(key), self.real.get(key), f"after {what}")
        return expected

    @rule(number=st.integers(0, 4), stamp=st.sampled_from(STAMPS))
    def create(self, number: int, stamp: str) -> None:
        """create_if_absent, on an empty key or over a stored record (must not overwrite)."""
        index = self._index(number)
        record = create_checkpoint(self.bindings[index], created_at=stamp)
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
            return claim_execution(record, attempt_id=claim_id, at=at)
        if status in (Status.EXECUTING, Status.UNCERTAIN):
            assert record.execution is not None
            owner = record.execution.attempt_id
            if status is Status.EXECUTING and choice == 0:
                reason = "timed out \U0001f600 " + claim_id
                return mark_execution_uncertain(record, attempt_id=owner, at=at, reason=reason)
            payload = data.draw(payloads(ceiling), label="payload")
            return complete_execution(
                record, attempt_id=owner, at=at, result=payload, max_payload_bytes=ceiling
            )
        if status is Status.COMPLETED:
            return claim_delivery(record, delivery_id=claim_id, at=at, max_payload_bytes=ceiling)
        if status is Status.DELIVERING:
            assert record.delivery is not None
            owner = record.delivery.delivery_id
            finish = release_delivery if choice == 0 else complete_delivery
            return finish(record, delivery_id=owner, at=at, max_payload_bytes=ceiling)
        assert record.result is not None
        if record.result.pruned_at is None:
            return prune_result(record, at=at, max_payload_bytes=ceiling)
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
            step = prune_result(held, at=at, max_payload_bytes=self.ceiling)
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
            _expect_same(held, read, f"key #{index}")

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
            chain = [create_checkpoint(binding(number), created_at=stamp)]
            for step in _path_to(status):
                chain.append(step(chain[-1], stamp).next)
            made.append((next(keys), chain))
            number += 1
    return made


def _path_to(target: Status | str) -> list[Callable[[Checkpoint, str], Transition]]:
    def claim(r: Checkpoint, at: str) -> Transition:
        return claim_execution(r, attempt_id="a", at=at)

    def uncertain(r: Checkpoint, at: str) -> Transition:
        return mark_execution_uncertain(r, attempt_id="a", at=at, reason="timed out")

    def complete(r: Checkpoint, at: str) -> Transition:
        return complete_execution(r, attempt_id="a", at=at, result={"n": 2**63})

    def release(r: Checkpoint, at: str) -> Transition:
        return release_execution(r, attempt_id="a", at=at)

    def deliver(r: Checkpoint, at: str) -> Transition:
        return claim_delivery(r, delivery_id="d", at=at)

    def delivered(r: Checkpoint, at: str) -> Transition:
        return complete_delivery(r, delivery_id="d", at=at)

    def prune(r: Checkpoint, at: str) -> Transition:
        return prune_result(r, at=at)

    paths: dict[Status | str, list[Callable[[Checkpoint, str], Transition]]] = {
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
