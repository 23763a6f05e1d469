"""StoreConformance: the checks of the storage contract any store must pass (see
:mod:`tool_execution_checkpoint.testing.conformance`)."""

from __future__ import annotations

import itertools
import json
import unittest
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, ClassVar, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from ...errors import CheckpointError, ErrorCode
from ...records import Binding, Checkpoint
from ...stores.core import (
    CheckpointStore,
    OperableCheckpointStore,
    checkpoint_key,
)
from ...table import Status
from ...transitions import (
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from ..adapters import as_sync_store
from ..contract import contract_machine
from ..edges import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    canonical_json,
    ceiling_payload,
    difference,
    edge_payloads,
    prefix_sharing_keys,
)
from ..faults import Fault, FaultyStore
from ..harness import ProtocolMachine, protocol_machine
from ..profiles import active_profile
from ..stress import threaded_stress
from .garbage import GARBAGE_EXAMPLES, check_refusal, garbage_values, leaks

__all__ = ["StoreConformance", "read_back_landed"]

NOW = "2026-01-01T00:00:00Z"


def property_check(examples: int) -> settings:
    """The settings of a property check run inside one of the suite's tests: ``examples``
    examples, no deadline, no example database, every health check off, and only the
    first bug reported (one AssertionError)."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


def read_back_landed(store: CheckpointStore, key: str, attempt_next: Any) -> bool:
    """After a write whose outcome is unknown, read the record back and tell whether
    the write landed: the stored record equals the one that was written (it carries the
    writer's own fence, so no other writer can have produced it)."""
    stored = store.get(key)
    return stored is not None and dict(stored) == attempt_next.to_dict()


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

        @property_check(40)
        @given(garbage_values())
        def check(raw: bytes) -> None:
            key = checkpoint_key(self._binding(f"garbage-{next(numbers)}"))
            write_raw(self._made(store), key, raw)
            try:
                value = store.get(key)
            except Exception as error:  # every refusal is judged, not just the expected
                check_refusal(error)
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

    def test_a_swap_the_host_calls_non_durable_is_still_a_compare_and_swap(self) -> None:
        """``durable=False`` (the delivered mark) only lets the store report the swap
        before it is flushed: it lands from the stored revision and reads back exactly,
        it loses from any other and changes nothing, and it makes nothing where no record
        is."""
        store = self._store()
        binding = self._binding()
        key = checkpoint_key(binding)
        created = create_checkpoint(binding, created_at=NOW)
        claim = claim_execution(created, attempt_id="attempt-1", at=NOW)
        done = complete_execution(claim.next, attempt_id="attempt-1", at=NOW, result=[1])
        delivery = claim_delivery(done.next, delivery_id="delivery-1", at=NOW)
        mark = complete_delivery(delivery.next, delivery_id="delivery-1", at=NOW)
        absent = checkpoint_key(self._binding("call-2"))
        missing = store.compare_and_swap(absent, mark.expected_revision, mark.next, durable=False)
        assert missing is False
        assert store.get(absent) is None
        store.create_if_absent(key, created)
        for step in (claim, done, delivery):
            assert store.compare_and_swap(key, step.expected_revision, step.next) is True
        swap = store.compare_and_swap
        assert swap(key, delivery.expected_revision, delivery.next, durable=False) is False
        assert store.get(key) == delivery.next.to_dict()
        assert swap(key, mark.expected_revision, mark.next, durable=False) is True
        assert store.get(key) == mark.next.to_dict()
        assert swap(key, mark.expected_revision, mark.next, durable=False) is False
        assert store.get(key) == mark.next.to_dict()

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
        id and payload; a listing that is not a Listing, with the secret as a status and
        a cursor) are refused with CheckpointError INVALID_ARGUMENT, whose message, repr,
        attributes and chain (causes and contexts, suppressed or not) hold none of it, and
        nothing is stored."""
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

        @property_check(40)
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
                look_alike = SimpleNamespace(statuses=[secret], after_key=wrong, limit=1)
                calls.append(lambda: listing.list_records(look_alike))  # type: ignore[arg-type]
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
        _run_machine(
            machine,
            self.contract_examples or profile.contract_examples,
            self.contract_steps or profile.contract_steps,
            list(HealthCheck),
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
        _run_machine(
            machine,
            self.harness_examples or profile.max_examples,
            self.harness_steps or profile.stateful_step_count,
            [HealthCheck.too_slow, HealthCheck.filter_too_much],
        )

    def test_threaded_stress_runs_each_tool_at_most_once(self) -> None:
        report = threaded_stress(self._store(), threads=self.stress_threads, keys=self.stress_keys)
        assert max(report.executions.values()) == 1, "a tool ran more than once"
        assert len(report.executions) == self.stress_keys
        assert max(report.deliveries.values()) == 1


def _run_machine(
    machine: type[RuleBasedStateMachine], examples: int, steps: int, suppress: list[HealthCheck]
) -> None:
    """Run a state machine as a test, with no deadline and the first bug reported."""
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            report_multiple_bugs=False,
            suppress_health_check=suppress,
        ),
    )


def _reads_back(store: CheckpointStore, key: str, record: Checkpoint, what: str) -> None:
    """Raise AssertionError unless ``key`` reads back as exactly ``record``'s JSON."""
    read = store.get(key)
    assert read is not None, f"{what}: the store lost the record (it reads back as none)"
    written = json.loads(record.to_json())
    if canonical_json(read) != canonical_json(written):
        found = difference(written, read)
        raise AssertionError(f"{what}: the record read back differs from the one written: {found}")
