"""StoreConformance: one base class turns a store factory into a pytest test class.

::

    from tool_execution_checkpoint.testing import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self):
            return MyStore(...)          # a fresh, empty store; sync or async

The class runs the plain checks of the storage contract, the exact round trips at the
edges (17-digit floats, -0.0, integers beyond 2**53 and 2**63, characters outside the
BMP, payloads at the payload ceiling to the byte, keys sharing prefixes of up to 255
characters), the store-contract state machine of
:mod:`tool_execution_checkpoint.testing.contract`, the model-based protocol harness and a
threaded stress check; :class:`OperableStoreConformance` adds listings checked against
the model for every status filter, time bound and page size, pruning, and ages on the
store's clock (writers with skewed clocks; see :mod:`.listings`). Knobs are class
attributes: ``harness_workers``, ``harness_keys``, ``harness_examples``,
``harness_steps``, ``harness_faults``, ``contract_examples``, ``contract_steps``,
``payload_ceiling_bytes``, ``stress_threads``, ``stress_keys`` and, for an operable
store, ``store_clock``. The example budgets
also follow the settings profile chosen by the ``TOOL_CHECKPOINT_HARNESS`` environment
variable (see :mod:`tool_execution_checkpoint.testing.profiles`).

Garbage in storage. A subclass that defines ``write_raw(self, store, key, raw)`` (write
the bytes ``raw`` as the stored record under ``key`` in the store's own storage,
bypassing the store, replacing whatever is there; a store whose storage cannot hold some
bytes, such as PostgreSQL's TEXT, stores the nearest text it can) also gets the garbage
checks: every garbage value (not UTF-8, not JSON, too deep, a huge integer, a JSON array,
string, number or ``null``, a record with a field broken, a truncated record) read back
by ``get`` is CheckpointError INVALID_CHECKPOINT (UNSUPPORTED_SCHEMA for another schema
version) or a StoreError, never a value and never another exception, and no message,
repr, attribute, ``__cause__`` or ``__context__`` in the chain holds the stored text;
listings and ``prune_delivered`` go on past it. Where storage indexes records apart from
their text (a status and a time column), ``write_raw`` indexes the garbage as a record
delivered at the Unix epoch, so that listings of delivered records and pruning meet it.
Without ``write_raw`` these checks are skipped (``unittest.SkipTest``).
"""

from __future__ import annotations

import itertools
import json
import unittest
from collections.abc import Callable
from typing import Any, ClassVar, cast

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from ..errors import CheckpointError, ErrorCode
from ..operations import PruneReport, prune_delivered
from ..records import Binding, Checkpoint, Execution, Result
from ..stores.core import (
    BrokenRecord,
    CheckpointStore,
    OperableCheckpointStore,
    RecordSummary,
    StoreError,
    check_listing,
    checkpoint_key,
)
from ..stores.memory import MemoryStore
from ..table import Action, Status
from ..transitions import (
    claim_delivery,
    claim_execution,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from .adapters import as_sync_store
from .contract import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    STATUS_FILTERS,
    canonical_json,
    ceiling_payload,
    contract_machine,
    difference,
    edge_payloads,
    prefix_sharing_keys,
    records_in_every_state,
)
from .faults import Fault, FaultyStore
from .harness import ProtocolMachine, protocol_machine
from .listings import (
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
from .profiles import active_profile
from .stress import threaded_stress

__all__ = [
    "GARBAGE_EXAMPLES",
    "GARBAGE_SECRET",
    "OperableStoreConformance",
    "StoreConformance",
    "garbage_values",
    "leaks",
    "read_back_landed",
]

GARBAGE_SECRET = "s3cr3t-garbage-7f1c"
"""A marker every generated garbage value holds, that no error may show."""

NOW = "2026-01-01T00:00:00Z"
_NOT_OPERABLE = "the store has no list_records, clock_us or written_us"
_GAP_US = 200_000
"""How far a store's clock moves on between two groups of records told apart by age."""


def read_back_landed(store: CheckpointStore, key: str, attempt_next: Any) -> bool:
    """After a write whose outcome is unknown, read the record back and tell whether
    the write landed: the stored record equals the one that was written (it carries the
    writer's own fence, so no other writer can have produced it)."""
    stored = store.get(key)
    return stored is not None and dict(stored) == attempt_next.to_dict()


def _valid_record_text() -> str:
    """A completed record's text, built with the record constructors alone: it is made
    when the module is imported, which must not run the transitions (the explorer's
    mutants break them, and import this package)."""
    binding = Binding("conformance", f"call-{GARBAGE_SECRET}", "tool", "1", "sha256:0")
    done = Checkpoint(
        revision=3,
        status=Status.COMPLETED,
        binding=binding,
        created_at=NOW,
        updated_at=NOW,
        execution=Execution("a", NOW),
        result=Result([GARBAGE_SECRET], completed_at=NOW),
    )
    return done.to_json()


def _broken_record(field: str, value: object) -> bytes:
    """A valid record's JSON with one top-level field replaced by ``value``."""
    record = json.loads(_valid_record_text())
    record[field] = value
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_FIELDS = st.sampled_from(
    [
        "schemaVersion",
        "revision",
        "status",
        "binding",
        "createdAt",
        "updatedAt",
        "execution",
        "result",
        "delivery",
    ]
)


_SECRET_BYTES = GARBAGE_SECRET.encode()
_TEXT = _valid_record_text().encode()

GARBAGE_EXAMPLES: tuple[bytes, ...] = (
    b"null",
    b"[" * 100_000 + _SECRET_BYTES + b"]" * 100_000,  # deeper than the parser goes
    b'{"a":' * 50_000 + b'"' + _SECRET_BYTES + b'"' + b"}" * 50_000,
    b"[" + b"9" * 5_000 + b', "' + _SECRET_BYTES + b'"]',  # past the digit limit
    b'["' + _SECRET_BYTES + b'"]',
    b'"' + _SECRET_BYTES + b'"',
    b"12345" + _SECRET_BYTES,
    _TEXT.replace(b'"status":"completed"', b'"status":"' + _SECRET_BYTES + b'"'),
    _TEXT.replace(b'"schemaVersion":1', b'"schemaVersion":1,"' + _SECRET_BYTES + b'":1'),
    _TEXT[:-1] + b',"extra":"' + _SECRET_BYTES + b'"}',
    _broken_record("result", {"payload": _SECRET_BYTES.decode(), "completedAt": NOW}),
    _TEXT.replace(b'["' + _SECRET_BYTES + b'"]', b'["' + _SECRET_BYTES + b'\\ud800"]'),
    _TEXT.replace(b'["' + _SECRET_BYTES + b'"]', b'["' + _SECRET_BYTES + b'", NaN]'),
)
"""The fixed garbage values: each one is read back in every run of the check."""


def garbage_values() -> st.SearchStrategy[bytes]:
    """Stored values that are not valid records, each holding :data:`GARBAGE_SECRET`."""
    secret = GARBAGE_SECRET.encode()
    text = _valid_record_text().encode()
    return st.one_of(
        st.binary(max_size=64).map(lambda raw: raw + secret),  # mostly not JSON
        st.binary(min_size=1, max_size=16).map(lambda raw: secret + b"\xff\xfe" + raw),
        st.integers(1, len(text) - 1).map(lambda cut: text[:cut]),  # a torn write
        st.sampled_from(GARBAGE_EXAMPLES),
        st.tuples(_FIELDS, _JSON_VALUES).map(
            lambda pair: _broken_record(pair[0], [GARBAGE_SECRET, pair[1]])
        ),
    )


def leaks(error: BaseException, secret: str = GARBAGE_SECRET) -> str | None:
    """Where ``secret`` shows in ``error``'s chain (message, repr, args, attributes,
    ``__cause__`` and ``__context__``, suppressed or not), or None if nowhere."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        name = type(current).__name__
        shown = {"str": str(current), "repr": repr(current)}
        shown |= {f"args[{i}]": repr(arg) for i, arg in enumerate(current.args)}
        shown |= {f".{key}": repr(value) for key, value in vars(current).items()}
        for where, text in shown.items():
            if secret in text:
                return f"{name} {where}"
        pending += [link for link in (current.__cause__, current.__context__) if link]
    return None


def _check_refusal(error: BaseException) -> None:
    """A garbage read must be refused as INVALID_CHECKPOINT or UNSUPPORTED_SCHEMA, or be
    a StoreError; the chain must not hold the garbage's text."""
    if isinstance(error, CheckpointError):
        allowed = (ErrorCode.INVALID_CHECKPOINT, ErrorCode.UNSUPPORTED_SCHEMA)
        assert error.code in allowed, f"garbage read back as {error.code}"
    elif not isinstance(error, StoreError):
        raise AssertionError(
            f"garbage read back raised {type(error).__name__}, not CheckpointError"
        ) from None
    where = leaks(error)
    assert where is None, f"the error of a garbage read shows the stored text in its {where}"


class StoreConformance:
    """Base class of a pytest test class vetting a store. Subclass it and define
    ``make_store(self)`` returning a fresh, empty store (a CheckpointStore, or an
    AsyncCheckpointStore which is adapted)."""

    harness_workers: ClassVar[int] = 4
    harness_keys: ClassVar[int] = 2
    harness_examples: ClassVar[int | None] = None
    harness_steps: ClassVar[int | None] = None
    harness_faults: ClassVar[bool] = True
    harness_base: ClassVar[type[ProtocolMachine]] = ProtocolMachine
    contract_examples: ClassVar[int | None] = None
    contract_steps: ClassVar[int | None] = None
    payload_ceiling_bytes: ClassVar[int] = DEFAULT_MAX_PAYLOAD_BYTES
    """The ``max_payload_bytes`` your hosts use: the round trips write payloads of
    exactly this many bytes (and a few under), so a store must keep records this large
    whole."""
    stress_threads: ClassVar[int] = 8
    stress_keys: ClassVar[int] = 64
    _operable: ClassVar[bool] = False

    def make_store(self) -> Any:
        """Return a fresh, empty store. Subclasses must define this."""
        raise NotImplementedError("define make_store(self) in the subclass")

    def _raw_writer(self) -> Callable[[Any, str, bytes], None]:
        """The subclass's optional hook ``def write_raw(self, store, key, raw: bytes)``:
        write ``raw`` as the stored record under ``key`` in ``store``'s own storage
        (``store`` is what ``make_store`` returned), replacing whatever is there. The
        garbage checks run only when it is defined (see the module docstring)."""
        writer = getattr(self, "write_raw", None)
        if writer is None:
            raise unittest.SkipTest("the test class defines no write_raw(store, key, raw)")
        return writer  # type: ignore[no-any-return]

    def _made(self, store: CheckpointStore) -> Any:
        """What make_store returned for ``store`` (an async store under its adapter)."""
        return getattr(store, "inner", store)

    def test_garbage_read_back_is_refused_without_showing_it(self) -> None:
        """Every garbage value ``write_raw`` stores, ``get`` refuses with CheckpointError
        INVALID_CHECKPOINT (UNSUPPORTED_SCHEMA) or a StoreError, whose chain holds none
        of it; a valid record stored next to it still reads back."""
        write_raw = self._raw_writer()
        store = self._store()
        binding = self._binding("neighbour")
        neighbour = create_checkpoint(binding, created_at=NOW)
        store.create_if_absent(checkpoint_key(binding), neighbour)
        numbers = itertools.count()

        @settings(
            max_examples=40,
            deadline=None,
            database=None,
            report_multiple_bugs=False,  # one AssertionError, the first bug found
            suppress_health_check=list(HealthCheck),
        )
        @given(garbage_values())
        def check(raw: bytes) -> None:
            key = checkpoint_key(self._binding(f"garbage-{next(numbers)}"))
            write_raw(self._made(store), key, raw)
            try:
                value = store.get(key)
            except Exception as error:  # every refusal is judged, not just the expected
                _check_refusal(error)
            else:
                raise AssertionError(
                    f"garbage read back as {type(value).__name__}, not CheckpointError"
                )

        for raw in GARBAGE_EXAMPLES:  # each fixed value in every run, then generated ones
            check.hypothesis.inner_test(raw)  # type: ignore[attr-defined]
        check()
        assert store.get(checkpoint_key(binding)) == neighbour.to_dict()

    def _store(self) -> CheckpointStore:
        store = as_sync_store(self.make_store())
        self.__dict__.setdefault("_opened", []).append(store)
        return store

    def teardown_method(self) -> None:
        """Close every store a test opened (pytest calls this after each test)."""
        for store in self.__dict__.pop("_opened", []):
            close = getattr(store, "close", None)
            if callable(close):
                close()

    @staticmethod
    def _binding(call_id: str = "call-1") -> Binding:
        return Binding("conformance", call_id, "tool", "1", "sha256:0")

    # --- the plain checks of the contract ------------------------------------------------

    def test_get_of_a_missing_key_is_none(self) -> None:
        assert self._store().get(checkpoint_key(self._binding())) is None

    def test_create_if_absent_inserts_once_and_never_overwrites(self) -> None:
        store = self._store()
        first = create_checkpoint(self._binding(), created_at=NOW)
        other = create_checkpoint(self._binding("call-2"), created_at="2026-06-01T00:00:00Z")
        key = checkpoint_key(self._binding())
        assert store.create_if_absent(key, first) is True
        assert store.create_if_absent(key, other) is False
        assert store.get(key) == first.to_dict()

    def test_stored_record_reads_back_exactly(self) -> None:
        store = self._store()
        binding = self._binding()
        key = checkpoint_key(binding)
        store.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
        stored = store.get(key)
        assert stored is not None
        claim = claim_execution(stored, attempt_id="attempt-é-✓", at=NOW)
        assert store.compare_and_swap(key, claim.expected_revision, claim.next) is True
        assert store.get(key) == claim.next.to_dict()
        assert decide_checkpoint(store.get(key) or {}, binding).status is Status.EXECUTING

    def test_compare_and_swap_with_a_stale_revision_fails_and_changes_nothing(self) -> None:
        store = self._store()
        binding = self._binding()
        key = checkpoint_key(binding)
        created = create_checkpoint(binding, created_at=NOW)
        store.create_if_absent(key, created)
        first = claim_execution(created, attempt_id="attempt-1", at=NOW)
        second = claim_execution(created, attempt_id="attempt-2", at=NOW)
        assert store.compare_and_swap(key, first.expected_revision, first.next) is True
        assert store.compare_and_swap(key, second.expected_revision, second.next) is False
        assert store.get(key) == first.next.to_dict()

    def test_compare_and_swap_on_a_missing_key_fails(self) -> None:
        store = self._store()
        binding = self._binding()
        claim = claim_execution(create_checkpoint(binding, created_at=NOW), attempt_id="a", at=NOW)
        key = checkpoint_key(binding)
        assert store.compare_and_swap(key, claim.expected_revision, claim.next) is False
        assert store.get(key) is None

    def test_a_lost_then_retried_ambiguous_write_is_detected_by_reading_back(self) -> None:
        store = FaultyStore(self._store())
        binding = self._binding()
        key = checkpoint_key(binding)
        created = create_checkpoint(binding, created_at=NOW)
        store.create_if_absent(key, created)
        claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
        store.arm(Fault.WRITE_AMBIGUOUS)
        try:
            store.compare_and_swap(key, claim.expected_revision, claim.next)
        except Exception:  # any error leaves the outcome unknown
            pass
        else:
            raise AssertionError("the armed fault did not fire")
        # A blind retry cannot tell: the write landed, so the retry loses.
        assert store.compare_and_swap(key, claim.expected_revision, claim.next) is False
        assert read_back_landed(store, key, claim.next) is True
        rival = claim_execution(created, attempt_id="attempt-2", at=NOW)
        assert read_back_landed(store, key, rival.next) is False

    def test_writes_refuse_records_that_did_not_come_out_of_a_transition(self) -> None:
        store = self._store()
        binding = self._binding()
        key = checkpoint_key(binding)
        created = create_checkpoint(binding, created_at=NOW)
        claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
        writes: list[Callable[[], bool]] = [
            lambda: store.create_if_absent(key, claim.next),
            lambda: store.compare_and_swap(key, claim.expected_revision + 1, claim.next),
            lambda: store.create_if_absent(key, created.to_dict()),  # type: ignore[arg-type]
            lambda: store.create_if_absent("", created),
        ]
        for write in writes:
            try:
                write()
            except CheckpointError as error:
                assert error.code is ErrorCode.INVALID_ARGUMENT
            else:
                raise AssertionError("the store accepted a record it must refuse")
        assert store.get(key) is None

    def test_refusals_never_show_what_was_passed(self) -> None:
        """Property-based: bad arguments that hold a generated secret (a key with a
        control character, a lone surrogate or past 256 characters; a key that is bytes;
        a record whose revision does not fit, holding the secret in its binding, attempt
        id and payload; a listing with the secret as a status or a cursor) are refused
        with CheckpointError INVALID_ARGUMENT, whose message, repr, attributes and chain
        (causes and contexts, suppressed or not) hold none of it, and nothing is stored."""
        store = self._store()
        operable = self._operable  # a listing is part of the contract only then
        secrets_ = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8).map(
            lambda text: f"s3cret-{text}"
        )
        shapes = st.sampled_from(["control", "surrogate", "long", "bytes"])

        def bad_key(secret: str, shape: str) -> object:
            return {
                "control": f"{secret}\x00",
                "surrogate": f"{secret}\ud800",
                "long": secret * (257 // len(secret) + 1),
                "bytes": secret.encode(),
            }[shape]

        @settings(
            max_examples=40,
            deadline=None,
            database=None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(secrets_, shapes, st.integers(0, 5))
        def check(secret: str, shape: str, operation: int) -> None:
            binding = Binding("conformance", secret, "tool", "1", "sha256:0")
            key = checkpoint_key(binding)
            created = create_checkpoint(binding, created_at=NOW)
            claim = claim_execution(created, attempt_id=secret, at=NOW).next
            done = complete_execution(claim, attempt_id=secret, result={secret: secret}, at=NOW)
            wrong = bad_key(secret, shape)
            calls: list[Callable[[], object]] = [
                lambda: store.create_if_absent(wrong, created),  # type: ignore[arg-type]
                lambda: store.get(wrong),  # type: ignore[arg-type]
                lambda: store.compare_and_swap(wrong, 1, claim),  # type: ignore[arg-type]
                lambda: store.create_if_absent(key, done.next),
                lambda: store.compare_and_swap(key, done.expected_revision + 1, done.next),
            ]
            if operable:
                listing = cast(OperableCheckpointStore, store)
                calls.append(lambda: listing.list_records([secret], after_key=wrong))  # type: ignore[list-item,arg-type]
            else:
                calls.append(calls[1])
            try:
                calls[operation]()
            except CheckpointError as error:
                assert error.code is ErrorCode.INVALID_ARGUMENT, f"refused as {error.code}"
                where = leaks(error, secret)
                assert where is None, f"a refusal shows what was passed, in {where}"
            else:
                raise AssertionError("the store took an argument it must refuse")
            assert store.get(key) is None, "a refused write stored something"

        check()

    # --- exact round trips at the edges ---------------------------------------------------

    def _completed(self, store: CheckpointStore, binding: Binding, payload: object) -> str:
        """Create, claim and complete ``binding``'s record with ``payload``; check that
        every write was acknowledged and the record reads back exactly; return its key."""
        key = checkpoint_key(binding)
        ceiling = self.payload_ceiling_bytes
        record = create_checkpoint(binding, created_at=NOW)
        assert store.create_if_absent(key, record), "create_if_absent refused a new key"
        claim = claim_execution(record, attempt_id="attempt-\U0001f600", at=NOW)
        done = complete_execution(
            claim.next,
            attempt_id="attempt-\U0001f600",
            at=NOW,
            result=payload,
            max_payload_bytes=ceiling,
        )
        for step in (claim, done):
            assert store.compare_and_swap(key, step.expected_revision, step.next), (
                f"a compare_and_swap to {step.next.status.value} from the stored revision lost"
            )
        _reads_back(store, key, done.next, "a completed record")
        decision = decide_checkpoint(store.get(key) or {}, binding, max_payload_bytes=ceiling)
        assert decision.checkpoint.result is not None
        assert decision.checkpoint.result.payload_json == done.next.result.payload_json, (  # type: ignore[union-attr]
            "the payload decided from the stored record is not the one written"
        )
        return key

    def test_edge_values_read_back_exactly(self) -> None:
        """17-digit floats, -0.0, integers beyond 2**53 and 2**63, strings outside the
        BMP, each as a payload alone and all nested together, with identifiers outside
        the BMP: each record reads back as the same JSON text it was written as."""
        store = self._store()
        for number, payload in enumerate(edge_payloads()):
            self._completed(store, self._binding(f"edge-{number}-\U0001f600\U0010ffff"), payload)

    def test_payloads_at_the_ceiling_read_back_whole(self) -> None:
        """Payloads of exactly ``payload_ceiling_bytes`` (and 1 and 3 bytes under) in
        characters of 1 to 4 UTF-8 bytes read back whole, also after a delivery claim."""
        store = self._store()
        ceiling = self.payload_ceiling_bytes
        for width in (4, 3, 2, 1):
            for size in sorted({max(12, ceiling - slack) for slack in (0, 1, 3)}, reverse=True):
                binding = self._binding(f"ceiling-{width}-{size}")
                key = self._completed(store, binding, ceiling_payload(size, width))
                raw = store.get(key)
                assert raw is not None
                record = Checkpoint.from_dict(raw, max_payload_bytes=ceiling)
                claim = claim_delivery(record, delivery_id="d", at=NOW, max_payload_bytes=ceiling)
                assert store.compare_and_swap(key, claim.expected_revision, claim.next)
                _reads_back(store, key, claim.next, "a delivering record at the ceiling")

    def test_keys_sharing_long_prefixes_name_different_records(self) -> None:
        """Keys of up to 256 characters sharing prefixes of 8 to 255 characters (and
        differing after it by ASCII, U+FFFF or a character outside the BMP) each name
        a record of their own: creating one never finds another, writing one never
        changes another."""
        store = self._store()
        for group, keys in enumerate(prefix_sharing_keys()):
            written: dict[str, Checkpoint] = {}
            for number, key in enumerate(keys):
                record = create_checkpoint(
                    self._binding(f"prefix-{group}-{number}"), created_at=NOW
                )
                assert store.create_if_absent(key, record), (
                    f"create_if_absent found a record under a new key of group {group} "
                    "(keys sharing a long prefix share a record)"
                )
                written[key] = record
            first = keys[0]
            claim = claim_execution(written[first], attempt_id="a", at=NOW)
            assert store.compare_and_swap(first, claim.expected_revision, claim.next)
            written[first] = claim.next
            for key, record in written.items():
                _reads_back(store, key, record, f"a key of prefix group {group}")

    def test_store_contract_machine(self) -> None:
        """The store-contract state machine (see
        :mod:`tool_execution_checkpoint.testing.contract`): random keys sharing
        prefixes, edge payloads, every transition, stale writes and, for an operable
        store, listings and prunes, each answer and read compared with the model."""
        profile = active_profile()
        machine = contract_machine(
            self._store, operable=self._operable, max_payload_bytes=self.payload_ceiling_bytes
        )
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=self.contract_examples or profile.contract_examples,
                stateful_step_count=self.contract_steps or profile.contract_steps,
                deadline=None,
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
            ),
        )

    # --- the model-based harness and real threads ------------------------------------------

    def test_protocol_harness(self) -> None:
        profile = active_profile()
        machine = protocol_machine(
            self._store,
            workers=self.harness_workers,
            keys=self.harness_keys,
            faults=self.harness_faults,
            base=self.harness_base,
        )
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=self.harness_examples or profile.max_examples,
                stateful_step_count=self.harness_steps or profile.stateful_step_count,
                deadline=None,
                report_multiple_bugs=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )

    def test_threaded_stress_runs_each_tool_at_most_once(self) -> None:
        report = threaded_stress(self._store(), threads=self.stress_threads, keys=self.stress_keys)
        assert max(report.executions.values()) == 1, "a tool ran more than once"
        assert len(report.executions) == self.stress_keys
        assert max(report.deliveries.values()) == 1


def _reads_back(store: CheckpointStore, key: str, record: Checkpoint, what: str) -> None:
    """Raise AssertionError unless ``key`` reads back as exactly ``record``'s JSON."""
    read = store.get(key)
    assert read is not None, f"{what}: the store lost the record (it reads back as none)"
    written = json.loads(record.to_json())
    if canonical_json(read) != canonical_json(written):
        found = difference(written, read)
        raise AssertionError(f"{what}: the record read back differs from the one written: {found}")


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
        """Property-based: for generated arguments (any statuses, wrong ones too; time
        bounds at, around and far past the times the store wrote the records at,
        negative, past 64 bits or not integers; cursors that are stored keys, a character
        off one, any text or not text; limits from negative to large), the store answers
        exactly as the model's whole listing says it must (see
        :func:`~tool_execution_checkpoint.testing.contract.selected`): the same page, or
        the same CheckpointError code and field as ``check_listing``."""
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
            st.sampled_from([1.5, "1", True, float("nan")]),
        )
        cursors = st.one_of(
            st.none(),
            st.sampled_from(keys),
            st.sampled_from(keys).map(lambda key: key[:-1]),
            st.sampled_from(keys).map(lambda key: key + "\x00"),
            st.sampled_from(keys).map(lambda key: key[:-1] + chr(ord(key[-1]) + 1)),
            st.text(max_size=300),
            st.sampled_from(["", "\U0010ffff" * 3, "\ud800", 7]),
        )
        statuses = st.lists(
            st.one_of(st.sampled_from(list(Status)), st.sampled_from(["executing", "nope", 0])),
            max_size=8,
        )
        limits = st.one_of(
            st.integers(-2, 2 * len(keys)), st.sampled_from([10**6, 2**63, 2.0, "3", None])
        )

        def answer(query: dict[str, Any]) -> object:
            try:
                return timed(store.list_records(**query))
            except CheckpointError as error:
                return (error.code, error.field)

        def expected(query: dict[str, Any]) -> object:
            try:
                listing = check_listing(
                    query["statuses"],
                    query["written_before_us"],
                    query["after_key"],
                    query.get("limit", 1_000),
                )
            except CheckpointError as error:
                return (error.code, error.field)
            return timed(selected(reference, listing))

        @settings(
            max_examples=60,
            deadline=None,
            database=None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
        )
        # The edges a store's own integer types meet, always tried besides the generated.
        @example(list(Status), 2**63, None, None)
        @example(list(Status), 2**64, None, None)
        @example(list(Status), -(2**63) - 1, None, None)
        @example(list(Status), None, None, 0)
        @example(list(Status), None, None, -1)
        @given(statuses, bounds, cursors, limits)
        def check(chosen: list[Any], before: Any, after: Any, limit: Any) -> None:
            query = {"statuses": chosen, "written_before_us": before, "after_key": after}
            if limit is not None:
                query["limit"] = limit
            got, wanted = answer(query), expected(query)
            assert got == wanted, f"list_records answered {got!r}, the model {wanted!r}"

        check()

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
            expected = model.list_records(statuses, written_before_us=model_before)
            assert store.list_records(statuses, written_before_us=before) == expected
        pages: list[RecordSummary | BrokenRecord] = []
        after = None
        while page := store.list_records(list(Status), after_key=after, limit=3):
            assert len(page) <= 3
            pages += page
            after = page[-1].key
        assert pages == model.list_records(list(Status))

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
        for limit in (1, 2, 3, 1_000):
            listed: list[RecordSummary | BrokenRecord] = []
            after: str | None = None
            for _ in range(len(good) + len(broken) + 1):  # a repeating cursor cannot loop
                page = store.list_records(list(Status), after_key=after, limit=limit)
                if not page:
                    break
                assert len(page) <= limit, f"a page of {limit} held {len(page)} lines"
                listed += page
                after = page[-1].key
            assert [row.key for row in listed] == sorted(good + broken), (
                f"pages of {limit} did not list every key once, in key order"
            )
            assert [row for row in listed if row.key in good] == model.list_records(list(Status))
            for row in listed:
                assert isinstance(row, RecordSummary) or row.key in broken
                assert GARBAGE_SECRET not in repr(row), "a listing line shows the garbage"
        delivered = {row.key for row in store.list_records([Status.DELIVERED])}
        assert set(broken) <= delivered, "write_raw must index garbage as delivered"
        report = prune_delivered(store, retention_us=0, at=self.NEW, page_size=2)
        expected = prune_delivered(model, retention_us=0, at=self.NEW, page_size=2)
        assert report.pruned == expected.pruned == len(bindings)
        assert report.broken == tuple(broken), "pruning did not report every broken record"
        for key in good:
            assert store.get(key) == model.get(key)
