"""The model-based harness: simulated workers, crashes, stale replays, operators and store
faults against the store under test and a model store, side by side.

:func:`protocol_machine` returns a Hypothesis ``RuleBasedStateMachine`` class. Its workers
follow the host protocol of the README one store operation per step (create if absent,
load and decide, CAS the claim, run the tool, CAS the result, CAS the delivery claim,
send, CAS the outcome), and Hypothesis interleaves the steps of different workers
arbitrarily. What a worker does after loading is read off the transition table: the
decided action picks the transition, and the operator may only use the table's fenced
transitions out of a claimed status.

Every write goes to the store under test through a :class:`FaultyStore` and, when it
really reached the store, to a :class:`MemoryStore` model as well; the two must answer
alike. After every step the invariants check the outside world the workers touched: the
tool ran at most once per checkpoint, the stored payload is the one that execution
produced, every delivery carried exactly it, decide never says execute once a record was
claimed, every stored record is valid (and matches spec/record.schema.json), and the
store under test holds what the model holds.
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from jsonschema import Draft202012Validator

from ..errors import CheckpointError, ErrorCode
from ..memory import MemoryStore
from ..records import Binding, Checkpoint
from ..store import CheckpointStore, StoreError, checkpoint_key
from ..table import TABLE, Action, Fence, Status, spec_file
from ..transitions import (
    Transition,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    prune_result,
    release_delivery,
)
from ..validation import JSONValue
from .faults import Fault, FaultyStore

__all__ = ["Outcome", "ProtocolMachine", "Step", "protocol_machine", "record_schema_validator"]

NOW = "2026-01-01T00:00:00Z"
RECONCILED_NOT_RUN: JSONValue = {"error": "reconciled: the tool did not run"}


def record_schema_validator() -> Draft202012Validator:
    """A validator for spec/record.schema.json, with format checks."""
    schema = json.loads(spec_file("record.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


class Step(enum.Enum):
    """Where a simulated worker is in the host protocol: what its next step does."""

    IDLE = "create the record if absent"
    LOAD = "load and decide"
    CLAIM = "CAS the execution claim"
    RUN = "run the tool"
    COMPLETE = "CAS the completed record"
    RECHECK = "read back an unconfirmed completion"
    CLAIM_DELIVERY = "CAS the delivery claim"
    SEND = "send the stored payload"
    FINISH = "CAS the delivery outcome"
    RECHECK_DELIVERY = "read back an unconfirmed delivery outcome"
    DONE = "done; start over"


class Outcome(enum.Enum):
    """What a worker knows of its write."""

    WON = "won"
    LOST = "lost"
    UNKNOWN = "unknown"


@dataclass
class Worker:
    """A simulated host process: only what it holds in memory, lost when it crashes."""

    name: str
    key: int = 0
    step: Step = Step.IDLE
    record: Checkpoint | None = None
    pending: Transition | None = None
    attempt_id: str | None = None
    delivery_id: str | None = None
    payload: Any = None
    sent: bool = False


@dataclass
class Truth:
    """What really happened outside the store for one checkpoint."""

    binding: Binding
    key: str
    executions: list[tuple[str, str]] = field(default_factory=list)
    deliveries: list[tuple[str, str]] = field(default_factory=list)
    claimed: bool = False
    reconciled_payload: str | None = None
    last_valid: dict[str, Any] | None = None


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ProtocolMachine(RuleBasedStateMachine):
    """The harness's state and steps. Use :func:`protocol_machine` to get a runnable
    subclass; override :meth:`may_act` or :meth:`on_reconcile_execution` to model a
    broken host."""

    make_store: ClassVar[Callable[[], CheckpointStore]]
    worker_count: ClassVar[int] = 4
    key_count: ClassVar[int] = 2
    _validator: ClassVar[Draft202012Validator | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.real = type(self).make_store()
        self.store = FaultyStore(self.real)
        self.model = MemoryStore()
        self.truths = []
        for index in range(self.key_count):
            binding = Binding("harness", f"call-{index}", "tool", "1", f"sha256:{index}")
            self.truths.append(Truth(binding, checkpoint_key(binding)))
        self.workers = [Worker(f"w{index}") for index in range(self.worker_count)]
        self.history: list[tuple[int, Transition]] = []
        self.ids = itertools.count(1)
        if ProtocolMachine._validator is None:
            ProtocolMachine._validator = record_schema_validator()

    def teardown(self) -> None:
        close = getattr(self.real, "close", None)
        if callable(close):
            close()

    # --- hooks a broken host overrides ------------------------------------------------

    def may_act(self, outcome: Outcome) -> bool:
        """Whether a worker acts on a claim write with this outcome: only if it won."""
        return outcome is Outcome.WON

    def on_reconcile_execution(self, worker: Worker) -> None:
        """A worker that loads a record needing execution reconciliation leaves it to
        the operator."""
        worker.step = Step.DONE

    # --- store access, kept in step with the model -------------------------------------

    def _write(self, key_index: int, transition: Transition | None, fault: Fault) -> Outcome:
        """Write a transition's next record (or create the record when ``transition`` is
        None) to the store under test, then to the model if it reached the store."""
        truth = self.truths[key_index]
        self.store.arm(fault)
        if transition is None:
            created = create_checkpoint(truth.binding, created_at=NOW)

            def apply(store: CheckpointStore) -> bool:
                return store.create_if_absent(truth.key, created)
        else:
            step = transition

            def apply(store: CheckpointStore) -> bool:
                return store.compare_and_swap(truth.key, step.expected_revision, step.next)

        try:
            answer: bool | None = apply(self.store)
        except StoreError:
            answer = None
        finally:
            self.store.arm(Fault.NONE)
        applied = self.store.last_write_result
        self.store.last_write_result = None
        if applied is not None:
            expected = apply(self.model)
            assert applied == expected, (
                f"the store answered {applied} where the model answered {expected}"
            )
            if applied and transition is not None and transition.next.status is Status.EXECUTING:
                truth.claimed = True
        if answer is None:
            return Outcome.UNKNOWN
        return Outcome.WON if answer else Outcome.LOST

    def _read(self, key_index: int, fault: Fault) -> Checkpoint | None:
        self.store.arm(fault)
        try:
            raw = self.store.get(self.truths[key_index].key)
        except StoreError:
            return None
        finally:
            self.store.arm(Fault.NONE)
        if raw is None:
            return None
        return Checkpoint.from_dict(raw)

    # --- one step of one worker ---------------------------------------------------------

    def worker_step(self, index: int, key_index: int, fault: Fault, send_ok: bool) -> None:
        """Advance worker ``index`` by one store operation or one outside action."""
        worker = self.workers[index]
        if worker.step in (Step.IDLE, Step.DONE):
            worker.key = key_index
            self._write(worker.key, None, fault)
            worker.step = Step.LOAD
            return
        handler = getattr(self, f"_on_{worker.step.name.lower()}")
        handler(worker, fault, send_ok)

    def _on_load(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        record = self._read(worker.key, fault)
        if record is None:
            return
        truth = self.truths[worker.key]
        decision = decide_checkpoint(record, truth.binding)
        assert not (truth.claimed and decision.action is Action.EXECUTE), (
            "decide says execute for a record that was claimed"
        )
        worker.record = record
        if decision.action is Action.EXECUTE:
            worker.attempt_id = f"attempt-{next(self.ids)}"
            worker.pending = claim_execution(record, attempt_id=worker.attempt_id, at=NOW)
            self.history.append((worker.key, worker.pending))
            worker.step = Step.CLAIM
        elif decision.action is Action.DELIVER:
            worker.delivery_id = f"delivery-{next(self.ids)}"
            worker.pending = claim_delivery(record, delivery_id=worker.delivery_id, at=NOW)
            self.history.append((worker.key, worker.pending))
            worker.step = Step.CLAIM_DELIVERY
        elif decision.action is Action.RECONCILE_EXECUTION:
            self.on_reconcile_execution(worker)
        else:
            worker.step = Step.DONE

    def _write_claim(self, worker: Worker, fault: Fault, granted: Step) -> None:
        """CAS the worker's claim; go on to ``granted`` only if the host may act on it."""
        assert worker.pending is not None
        outcome = self._write(worker.key, worker.pending, fault)
        if self.may_act(outcome):
            worker.record = worker.pending.next
            worker.step = granted
        else:
            worker.step = Step.LOAD

    def _on_claim(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        self._write_claim(worker, fault, Step.RUN)

    def _on_run(self, worker: Worker, _fault: Fault, _send_ok: bool) -> None:
        assert worker.record is not None and worker.attempt_id is not None
        worker.payload = {"key": worker.key, "by": worker.attempt_id, "n": next(self.ids)}
        self.truths[worker.key].executions.append((worker.attempt_id, _compact(worker.payload)))
        worker.pending = complete_execution(
            worker.record, attempt_id=worker.attempt_id, at=NOW, result=worker.payload
        )
        self.history.append((worker.key, worker.pending))
        worker.step = Step.COMPLETE

    def _on_complete(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        assert worker.pending is not None
        outcome = self._write(worker.key, worker.pending, fault)
        worker.step = Step.LOAD if outcome is Outcome.WON else Step.RECHECK

    def _on_recheck(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        record = self._read(worker.key, fault)
        if record is None:
            return
        owned = record.execution is not None and record.execution.attempt_id == worker.attempt_id
        if owned and record.status in (Status.EXECUTING, Status.UNCERTAIN):
            assert worker.attempt_id is not None
            worker.pending = complete_execution(
                record, attempt_id=worker.attempt_id, at=NOW, result=worker.payload
            )
            worker.step = Step.COMPLETE
        else:
            worker.step = Step.LOAD

    def _on_claim_delivery(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        self._write_claim(worker, fault, Step.SEND)

    def _on_send(self, worker: Worker, _fault: Fault, send_ok: bool) -> None:
        record, delivery_id = worker.record, worker.delivery_id
        assert record is not None and record.result is not None and delivery_id is not None
        worker.sent = send_ok
        if send_ok:
            self.truths[worker.key].deliveries.append((delivery_id, record.result.payload_json))
        self._prepare_finish(worker, record)

    def _prepare_finish(self, worker: Worker, record: Checkpoint) -> None:
        assert worker.delivery_id is not None
        finish = complete_delivery if worker.sent else release_delivery
        worker.pending = finish(record, delivery_id=worker.delivery_id, at=NOW)
        self.history.append((worker.key, worker.pending))
        worker.step = Step.FINISH

    def _on_finish(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        assert worker.pending is not None
        outcome = self._write(worker.key, worker.pending, fault)
        worker.step = Step.DONE if outcome is Outcome.WON else Step.RECHECK_DELIVERY

    def _on_recheck_delivery(self, worker: Worker, fault: Fault, _send_ok: bool) -> None:
        record = self._read(worker.key, fault)
        if record is None:
            return
        owned = record.delivery is not None and record.delivery.delivery_id == worker.delivery_id
        if owned and record.status is Status.DELIVERING:
            self._prepare_finish(worker, record)
        else:
            worker.step = Step.LOAD

    # --- the other actors ---------------------------------------------------------------

    def crash(self, index: int) -> None:
        """Worker ``index`` dies and restarts with nothing in memory."""
        self.workers[index] = Worker(self.workers[index].name)

    def replay(self, position: int) -> None:
        """A stale worker writes a transition computed earlier, with its old revision."""
        if not self.history:
            return
        key_index, transition = self.history[position % len(self.history)]
        self._write(key_index, transition, Fault.NONE)

    def intrude(self, key_index: int) -> None:
        """A foreign attempt or delivery id tries every fenced transition the table
        allows from the stored status: each must be refused with FENCE_CONFLICT."""
        record = self._read(key_index, Fault.NONE)
        if record is None:
            return
        arguments: dict[str, Any] = {"at": NOW}
        for fenced in TABLE.transitions.values():
            if record.status not in fenced.sources or fenced.fence is Fence.NONE:
                continue
            extra: dict[str, object] = {"result": 0} if fenced.name == "complete_execution" else {}
            if fenced.name == "mark_execution_uncertain":
                extra = {"reason": "intruder"}
            fence = "attempt_id" if fenced.fence is Fence.ATTEMPT_ID else "delivery_id"
            function = globals()[fenced.name]
            try:
                function(record, **arguments, **extra, **{fence: "intruder"})
            except CheckpointError as error:
                assert error.code is ErrorCode.FENCE_CONFLICT, error
            else:
                raise AssertionError(f"{fenced.name} accepted a foreign {fence}")

    def _claim_is_live(self, key_index: int, record: Checkpoint) -> bool:
        for worker in self.workers:
            if worker.key != key_index:
                continue
            if (
                record.execution is not None
                and worker.attempt_id == record.execution.attempt_id
                and worker.step in (Step.RUN, Step.COMPLETE, Step.RECHECK)
            ):
                return True
            if (
                record.delivery is not None
                and worker.delivery_id == record.delivery.delivery_id
                and worker.step in (Step.SEND, Step.FINISH, Step.RECHECK_DELIVERY)
            ):
                return True
        return False

    def reconcile(self, key_index: int, mark_uncertain_first: bool) -> None:
        """An operator resolves a claimed record whose owner is gone, using only the
        table's fenced transitions out of its status and what really happened."""
        record = self._read(key_index, Fault.NONE)
        if record is None or TABLE.statuses[record.status].action not in (
            Action.RECONCILE_EXECUTION,
            Action.RECONCILE_DELIVERY,
        ):
            return
        if self._claim_is_live(key_index, record):
            return
        allowed = {
            rule.name
            for rule in TABLE.transitions.values()
            if record.status in rule.sources and rule.fence is not Fence.NONE
        }
        truth = self.truths[key_index]
        transition: Transition
        if record.delivery is not None:
            owner = record.delivery.delivery_id
            sent = any(delivery_id == owner for delivery_id, _ in truth.deliveries)
            finish = complete_delivery if sent else release_delivery
            assert finish.__name__ in allowed
            transition = finish(record, delivery_id=owner, at=NOW)
        else:
            assert record.execution is not None
            owner = record.execution.attempt_id
            if mark_uncertain_first and record.status is Status.EXECUTING:
                assert "mark_execution_uncertain" in allowed
                transition = mark_execution_uncertain(
                    record, attempt_id=owner, at=NOW, reason="operator: the worker is gone"
                )
                if self._write(key_index, transition, Fault.NONE) is not Outcome.WON:
                    return
                record = transition.next
            ran = [payload for attempt, payload in truth.executions if attempt == owner]
            payload: JSONValue = json.loads(ran[0]) if ran else RECONCILED_NOT_RUN
            if not ran:
                truth.reconciled_payload = _compact(RECONCILED_NOT_RUN)
            assert "complete_execution" in allowed
            transition = complete_execution(record, attempt_id=owner, at=NOW, result=payload)
        self._write(key_index, transition, Fault.NONE)

    def prune(self, key_index: int) -> None:
        """An operator prunes the payload of a delivered record (the table's prune_result)."""
        record = self._read(key_index, Fault.NONE)
        if record is None or record.status is not Status.DELIVERED:
            return
        if record.result is not None and record.result.pruned_at is None:
            self._write(key_index, prune_result(record, at=NOW), Fault.NONE)

    # --- invariants ---------------------------------------------------------------------

    def check_protocol(self) -> None:
        """Everything that must hold after every step; raises AssertionError if not."""
        validator = ProtocolMachine._validator
        assert validator is not None
        for truth in self.truths:
            assert len(truth.executions) <= 1, (
                f"the tool ran {len(truth.executions)} times for {truth.binding.call_id}"
            )
            stored = self.real.get(truth.key)
            modelled = self.model.get(truth.key)
            assert stored == modelled, "the store under test and the model differ"
            if stored is None:
                continue
            if stored != truth.last_valid:
                validator.validate(dict(stored))
                truth.last_valid = dict(stored)
            record = Checkpoint.from_dict(stored)
            decision = decide_checkpoint(record, truth.binding)
            assert not (truth.claimed and decision.action is Action.EXECUTE), (
                "decide says execute for a record that was claimed"
            )
            produced = truth.executions[0][1] if truth.executions else truth.reconciled_payload
            if record.result is not None and record.result.pruned_at is None:
                assert record.result.payload_json == produced, (
                    "the stored payload is not the one the execution produced"
                )
            elif record.result is not None:
                assert record.status is Status.DELIVERED, "a payload was pruned before delivery"
            for _, delivered in truth.deliveries:
                assert delivered == produced, (
                    "a delivery carried another payload than the stored one"
                )


def protocol_machine(
    make_store: Callable[[], CheckpointStore],
    *,
    workers: int = 4,
    keys: int = 2,
    faults: bool = True,
    base: type[ProtocolMachine] = ProtocolMachine,
) -> type[ProtocolMachine]:
    """Return a state-machine class that runs the harness against ``make_store()``.

    Args:
        make_store: Called once per example; returns a fresh, empty store.
        workers: How many simulated workers interleave.
        keys: How many checkpoints they share.
        faults: Whether store operations may fail (before a write, ambiguously after it,
            or on a read).
        base: A subclass of :class:`ProtocolMachine` whose hooks model a broken host.
    """
    worker = st.integers(min_value=0, max_value=workers - 1)
    key = st.integers(min_value=0, max_value=keys - 1)
    # Seven steps in ten run clean, so workers get far; shrinking moves towards Fault.NONE.
    clean_weighted = (Fault.NONE,) * 7 + tuple(fault for fault in Fault if fault is not Fault.NONE)
    fault = st.sampled_from(clean_weighted) if faults else st.just(Fault.NONE)
    factory = make_store

    class Machine(base):  # type: ignore[valid-type,misc]
        make_store = staticmethod(factory)
        worker_count = workers
        key_count = keys

        @rule(worker=worker, key=key, fault=fault, send_ok=st.booleans())
        def step(self, worker: int, key: int, fault: Fault, send_ok: bool) -> None:
            self.worker_step(worker, key, fault, send_ok)

        @rule(worker=worker)
        def crash_worker(self, worker: int) -> None:
            self.crash(worker)

        @rule(position=st.integers(min_value=0, max_value=63))
        def replay_stale_write(self, position: int) -> None:
            self.replay(position)

        @rule(key=key)
        def foreign_fence(self, key: int) -> None:
            self.intrude(key)

        @rule(key=key, mark_uncertain_first=st.booleans())
        def operator_reconciles(self, key: int, mark_uncertain_first: bool) -> None:
            self.reconcile(key, mark_uncertain_first)

        @rule(key=key)
        def operator_prunes(self, key: int) -> None:
            self.prune(key)

        @invariant()
        def protocol_holds(self) -> None:
            self.check_protocol()

    Machine.__name__ = Machine.__qualname__ = f"{base.__name__}Harness"
    return Machine
