"""The model-based harness: simulated workers, crashes, stale replays, operators and store
faults against the store under test and a model store, side by side.

:func:`protocol_machine` returns a Hypothesis ``RuleBasedStateMachine`` class whose
workers run the runner's own step machine one request per step, interleaved arbitrarily
(docs/harness.md describes the steps and the actors). Every write goes to the store under
test through a :class:`FaultyStore` and, when it really reached the store, to a
:class:`MemoryStore` model as well; the two must answer alike. After every step the store
under test must hold what the model holds, every stored record must match
spec/record.schema.json, and the invariants of a world of workers (:mod:`.invariants`,
the explorer's own) must hold; a broken one raises AssertionError naming it.
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

from ..records import Binding, Checkpoint
from ..runner import (
    CallState,
    Create,
    Deliver,
    Get,
    HostProtocol,
    Raised,
    Request,
    Returned,
    RunOutcome,
    RunTool,
    Sleep,
    StoreFault,
    Swap,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    default_error_payload,
)
from ..stores.core import CheckpointStore, StoreError, checkpoint_key
from ..stores.memory import MemoryStore
from ..table import TABLE, Action, Fence, Status, spec_file
from ..transitions import (
    Transition,
    complete_delivery,
    complete_execution,
    mark_execution_uncertain,
    prune_result,
    release_delivery,
)
from ..validation import JSONValue
from .faults import Fault, FaultyStore
from .invariants import check_fences, check_outcome, check_world, note_landed

__all__ = [
    "ProtocolMachine",
    "SendAnswer",
    "ToolAnswer",
    "Worker",
    "protocol_machine",
    "record_schema_validator",
]

NOW = "2026-01-01T00:00:00Z"


def _frozen() -> float:
    """The monotonic clock of every host the harness runs: it does not move, so a held
    write's read-backs end at the write budget's count (three, two after a pause)."""
    return 0.0


RECONCILED_NOT_RUN: JSONValue = {"error": "reconciled: the tool did not run"}


def record_schema_validator() -> Draft202012Validator:
    """A validator for spec/record.schema.json, with format checks."""
    schema = json.loads(spec_file("record.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


class ToolAnswer(enum.Enum):
    """How a simulated tool call ends."""

    RETURNS = "returns a result"
    RAISES = "raises a handler error"
    UNKNOWN = "raises ToolOutcomeUnknown (its effect may have happened)"
    CANCELLED = "is cancelled (its effect may have happened)"
    NOT_RUN = "raises ToolDidNotRun (it stopped before any effect)"


class SendAnswer(enum.Enum):
    """How a simulated delivery ends."""

    SENT = "sent"
    REFUSED = "refused: known not sent"
    UNKNOWN_ARRIVED = "times out, but it arrived"
    UNKNOWN_LOST = "times out, and it did not arrive"


@dataclass
class Worker:
    """A simulated host process: the call it is running (the runner's own state and its
    next request), lost when it crashes."""

    name: str
    key: int = 0
    state: CallState | None = None
    request: Request | None = None
    outcomes: list[RunOutcome] = field(default_factory=list)


@dataclass
class Truth:
    """What really happened outside the store for one checkpoint (an
    :class:`~.invariants.World`; operators never race live workers here)."""

    binding: Binding
    key: str
    executions: list[tuple[str, str]] = field(default_factory=list)
    deliveries: list[tuple[str, str]] = field(default_factory=list)
    claimed: bool = False
    reconciled: str | None = None
    answer: str | None = None
    racing: bool = False
    last_valid: dict[str, Any] | None = None


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ProtocolMachine(RuleBasedStateMachine):
    """The harness's state and steps. Use :func:`protocol_machine` to get a runnable
    subclass; pass a :class:`~tool_execution_checkpoint.runner.HostProtocol` subclass
    as ``protocol`` to model a broken host."""

    make_store: ClassVar[Callable[[], CheckpointStore]]
    protocol: ClassVar[type[HostProtocol]] = HostProtocol
    worker_count: ClassVar[int] = 4
    key_count: ClassVar[int] = 2
    _validator: ClassVar[Draft202012Validator | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.real = type(self).make_store()
        self.store = FaultyStore(self.real)
        self.model = MemoryStore()
        self.truths = []
        self.protocols = []
        for index in range(self.key_count):
            binding = Binding("harness", f"call-{index}", "tool", "1", f"sha256:{index}")
            self.truths.append(Truth(binding, checkpoint_key(binding)))
            self.protocols.append(
                type(self).protocol(binding, clock=lambda: NOW, write_budget=0.1, monotonic=_frozen)
            )
        self.workers = [Worker(f"w{index}") for index in range(self.worker_count)]
        self.history: list[tuple[int, Transition]] = []
        self.ids = itertools.count(1)
        if ProtocolMachine._validator is None:
            ProtocolMachine._validator = record_schema_validator()

    def teardown(self) -> None:
        close = getattr(self.real, "close", None)
        if callable(close):
            close()

    # --- store access, kept in step with the model -------------------------------------

    def _write(self, key_index: int, transition: Transition, fault: Fault) -> Any:
        """Write a transition's next record (created if absent when it is from revision 0,
        no record) to the store under test, then to the model if it reached the store;
        return the runner's answer (True, False or StoreFault)."""
        truth = self.truths[key_index]
        self.store.arm(fault)
        step = transition

        def apply(store: CheckpointStore) -> bool:
            if step.expected_revision == 0:
                return store.create_if_absent(truth.key, step.next)
            return store.compare_and_swap(truth.key, step.expected_revision, step.next)

        before = self.model.get(truth.key)
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
            if applied:
                replaced = None if before is None else Checkpoint.from_dict(before)
                truth.claimed, truth.answer = note_landed(truth, replaced, transition.next)
        return StoreFault() if answer is None else answer

    def _read_raw(self, key_index: int, fault: Fault) -> Any:
        self.store.arm(fault)
        try:
            return self.store.get(self.truths[key_index].key)
        except StoreError:
            return StoreFault()
        finally:
            self.store.arm(Fault.NONE)

    def _read(self, key_index: int, fault: Fault) -> Checkpoint | None:
        raw = self._read_raw(key_index, fault)
        if raw is None or isinstance(raw, StoreFault):
            return None
        return Checkpoint.from_dict(raw)

    # --- one step of one worker ---------------------------------------------------------

    def worker_step(
        self, index: int, key_index: int, fault: Fault, tool: ToolAnswer, send: SendAnswer
    ) -> None:
        """Perform worker ``index``'s next request (starting a call on ``key_index`` if it
        is idle) and hand the answer to the runner's protocol."""
        worker = self.workers[index]
        if worker.request is None or worker.state is None:
            worker.key = key_index
            token = f"{worker.name}-{next(self.ids)}"
            worker.request, worker.state = self.protocols[key_index].start(token)
        request, state = worker.request, worker.state
        answer = self._answer(worker, request, state, fault=fault, tool=tool, send=send)
        following, state = self.protocols[worker.key].step(state, answer)
        if isinstance(following, RunOutcome):
            self._check_outcome(worker, state, following)
            worker.request, worker.state = None, None
        else:
            if isinstance(following, Swap):  # computed now: a stale copy may land later
                self.history.append((worker.key, following.transition))
            worker.request, worker.state = following, state

    def _answer(
        self,
        worker: Worker,
        request: Request,
        state: CallState,
        *,
        fault: Fault,
        tool: ToolAnswer,
        send: SendAnswer,
    ) -> Any:
        truth = self.truths[worker.key]
        if isinstance(request, Create):
            assert state.pending is not None  # a create is the call's pending write
            return self._write(worker.key, state.pending, fault)
        if isinstance(request, Swap):
            return self._write(worker.key, request.transition, fault)
        if isinstance(request, Get):
            return self._read_raw(worker.key, fault)
        if isinstance(request, Sleep):
            return None
        record = state.record
        assert record is not None and record.execution is not None
        if isinstance(request, RunTool):
            if tool is ToolAnswer.NOT_RUN:
                return Raised(ToolDidNotRun())
            attempt = record.execution.attempt_id
            payload: JSONValue = {"key": worker.key, "by": attempt, "n": next(self.ids)}
            if tool is ToolAnswer.RAISES:
                payload = default_error_payload(ValueError())
            truth.executions.append((attempt, _compact(payload)))
            if tool is ToolAnswer.RETURNS:
                return Returned(payload)
            if tool is ToolAnswer.RAISES:
                return Raised(ValueError("a handler error"))
            if tool is ToolAnswer.UNKNOWN:
                return Raised(ToolOutcomeUnknown("harness: the tool timed out"))
            return Raised(KeyboardInterrupt())
        assert isinstance(request, Deliver) and record.delivery is not None
        if send in (SendAnswer.SENT, SendAnswer.UNKNOWN_ARRIVED):
            truth.deliveries.append((record.delivery.delivery_id, request.result.payload_json))
        if send is SendAnswer.SENT:
            return None
        if send is SendAnswer.REFUSED:
            return Raised(ConnectionRefusedError())
        return Raised(TimeoutError())

    def _check_outcome(self, worker: Worker, state: CallState, outcome: RunOutcome) -> None:
        """What a finished call reports must be true."""
        worker.outcomes.append(outcome)
        check_outcome(self.truths[worker.key], state, outcome)

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
        if record is not None:
            check_fences(record, NOW)

    def _claim_is_live(self, key_index: int, record: Checkpoint) -> bool:
        return any(
            worker.key == key_index and worker.state is not None and worker.state.holds(record)
            for worker in self.workers
        )

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
            # The operator asks the provider's history, so it confirms what arrived and
            # releases only what did not.
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
                if self._write(key_index, transition, Fault.NONE) is not True:
                    return
                record = transition.next
            ran = [payload for attempt, payload in truth.executions if attempt == owner]
            payload: JSONValue = json.loads(ran[0]) if ran else RECONCILED_NOT_RUN
            if not ran:
                truth.reconciled = _compact(RECONCILED_NOT_RUN)
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
            stored = self.real.get(truth.key)
            modelled = self.model.get(truth.key)
            assert stored == modelled, "the store under test and the model differ"
            if stored is not None and stored != truth.last_valid:
                validator.validate(dict(stored))
                truth.last_valid = dict(stored)
            record = None if stored is None else Checkpoint.from_dict(stored)
            check_world(truth, record, truth.binding)


def protocol_machine(
    make_store: Callable[[], CheckpointStore],
    *,
    workers: int = 4,
    keys: int = 2,
    faults: bool = True,
    base: type[ProtocolMachine] = ProtocolMachine,
    protocol: type[HostProtocol] = HostProtocol,
) -> type[ProtocolMachine]:
    """Return a state-machine class that runs the harness against ``make_store()``.

    Args:
        make_store: Called once per example; returns a fresh, empty store.
        workers: How many simulated workers interleave.
        keys: How many checkpoints they share.
        faults: Whether store operations may fail (before a write, ambiguously after it,
            or on a read).
        base: A subclass of :class:`ProtocolMachine` (its state and actors).
        protocol: The host protocol the workers run: the runner's own, or a subclass
            that models a broken host.
    """
    worker = st.integers(min_value=0, max_value=workers - 1)
    key = st.integers(min_value=0, max_value=keys - 1)
    # Seven steps in ten run clean, so workers get far; shrinking moves towards Fault.NONE.
    clean_weighted = (Fault.NONE,) * 7 + tuple(fault for fault in Fault if fault is not Fault.NONE)
    fault = st.sampled_from(clean_weighted) if faults else st.just(Fault.NONE)
    factory = make_store
    # Most tools return and most sends arrive, so calls get far; shrinking goes there too.
    rare = (ToolAnswer.RAISES, ToolAnswer.UNKNOWN, ToolAnswer.CANCELLED) * 2
    tools = st.sampled_from((ToolAnswer.RETURNS,) * 10 + rare + (ToolAnswer.NOT_RUN,))
    sends = st.sampled_from((SendAnswer.SENT,) * 4 + tuple(SendAnswer)[1:])

    host = protocol

    class Machine(base):  # type: ignore[valid-type,misc]
        make_store = staticmethod(factory)
        protocol = host
        worker_count = workers
        key_count = keys

        @rule(worker=worker, key=key, fault=fault, tool=tools, send=sends)
        def step(
            self, worker: int, key: int, fault: Fault, tool: ToolAnswer, send: SendAnswer
        ) -> None:
            self.worker_step(worker, key, fault, tool, send)

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
