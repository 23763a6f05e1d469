"""The host protocol, written once: a sans-I/O step machine and the drivers that run it.

:class:`HostProtocol` is the whole of what a host does for one tool call, as data in,
data out. Its :meth:`~HostProtocol.start` and :meth:`~HostProtocol.step` map ``(state,
answer)`` to ``(request, next state)``: each request is one thing to do (create the
record, read it, swap it, run the tool, deliver, sleep) and the driver sends back what
happened. The state, :class:`CallState`, is an explicit, hashable value: the call's
phase, the last record it knows to be stored, the write in flight and its counters.
Which handler takes an answer is read off :data:`HANDLERS`, one entry per phase.

:func:`run_once` and :func:`run_once_async` drive it on a real store; the harness in
:mod:`tool_execution_checkpoint.testing` drives it one request per rule, and
``proofs/explore.py`` drives it exhaustively. No other copy of the host's decisions
exists.

The rules it follows:

- The tool runs only after this call's execution claim is known to have landed. A write
  whose reply was lost is resolved by reading the record back: the next record carries
  this call's own attempt or delivery id, so equality with it is exact.
- A tool that raises :class:`ToolOutcomeUnknown`, is cancelled (any ``BaseException``
  that is not an ``Exception``: ``asyncio.CancelledError``, ``KeyboardInterrupt``) or
  raises one of the host's ``pass_through`` types marks the execution uncertain; the
  cancellation and the pass-through exception are re-raised after the mark. Any other
  exception is a handler error: ``on_tool_error(error)`` is stored and delivered.
- A tool that raises one of the host's ``not_run`` types (by default
  :class:`ToolDidNotRun`) stopped before any effect: the claim is released, the
  exception re-raised, and the next call runs the tool.
- A delivery is released for a later resend only when the send is known not to have
  happened: ``deliver`` raised one of ``not_sent`` (by default :class:`DeliveryNotSent`
  and ``ConnectionRefusedError``). Any other exception leaves the record delivering and
  the call answers ``needs-delivery-reconciliation``.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Final, NamedTuple, TypeAlias, TypeGuard

from .errors import CheckpointError, ErrorCode
from .identity import idempotency_key_of
from .records import Binding, Checkpoint, Result
from .stores.core import AsyncCheckpointStore, CheckpointStore, StoreError, checkpoint_key
from .table import TABLE, Action, Status
from .transitions import (
    Transition,
    claim_delivery,
    claim_execution,
    complete_and_claim_delivery,
    complete_delivery,
    create_claimed,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    release_execution,
)
from .validation import JSONValue

__all__ = [
    "DEFAULT_NOT_RUN",
    "DEFAULT_NOT_SENT",
    "FIRST_PAUSE",
    "HANDLERS",
    "LONGEST_PAUSE",
    "OVERTAKEN",
    "RETRIES",
    "WRITE_BUDGET",
    "AsyncReconcileHook",
    "CallState",
    "Create",
    "Deliver",
    "DeliveryNotSent",
    "Found",
    "Get",
    "HostProtocol",
    "NotThere",
    "Phase",
    "Raised",
    "Reconcile",
    "ReconcileHook",
    "Request",
    "Returned",
    "RunOutcome",
    "RunStatus",
    "RunTool",
    "Sleep",
    "StoreFault",
    "StuckCall",
    "Swap",
    "ToolDidNotRun",
    "ToolOutcomeUnknown",
    "claim_id",
    "default_error_payload",
    "held_retries",
    "pause_before",
    "run_once",
    "run_once_async",
]

LOGGER = logging.getLogger("tool_execution_checkpoint")

ROUNDS = 4
"""How many times one call decides (or finds no record, or cannot read) before it
answers store-unavailable."""

RETRIES = 3
"""How many times one call resends or reads back a write whose outcome it does not know,
when it has no write budget (a claim's write always; a held write with ``write_budget=0``)."""

WRITE_BUDGET = 30.0
"""The default write budget, in seconds: how long a write over a claim the call holds (the
result, an uncertain mark, a release, the delivered mark) keeps being read back and resent
after its first failure. Long enough for a server restart or a failover of a few seconds."""

OVERTAKEN = "overtaken: another result was stored for this call while its tool ran"
"""The reason of a call whose result was not stored because another was stored first (an
operator's, or another worker's after the store lost the record)."""

VANISHED = "the record vanished after the tool ran"
"""The reason of a call whose record the store lost (a failover to a replica that never had
it) after its tool ran: it is created again, claimed by the same attempt, and the result
stored over it; this is the reason when that could not be done."""

CONFIRMED_NOT_SENT = "an operator confirmed this delivery, but its send was refused"
"""The reason of a call whose refused send an operator had already confirmed: the record
says delivered, the payload did not arrive (the outcome carries it)."""

MAX_SECONDS = 1e6
"""The longest wait, poll or write budget a call accepts, in seconds."""

FIRST_PAUSE = 0.05
"""The pause before the second read-back of a held write; each pause doubles, up to
:data:`LONGEST_PAUSE`."""

LONGEST_PAUSE = 1.0
"""The longest pause between two read-backs of a held write."""


def pause_before(retry: int) -> float:
    """The pause before read-back number ``retry`` (the first, 1, comes at once)."""
    return 0.0 if retry <= 1 else min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** min(retry - 2, 16))


@functools.cache
def held_retries(budget: float) -> int:
    """How many read-backs of a held write fit in ``budget`` seconds of pauses: the
    machine's own bound, so a call ends even on a clock that does not move."""
    if budget <= 0:
        return RETRIES
    retries, waited = 1, 0.0
    while waited < budget and pause_before(retries + 1) < LONGEST_PAUSE:
        retries += 1
        waited += pause_before(retries)
    if waited < budget:  # then one longest pause each
        retries += math.ceil((budget - waited) / LONGEST_PAUSE)
    return retries


class RunStatus(enum.StrEnum):
    """How a call ended."""

    EXECUTED_AND_DELIVERED = "executed-and-delivered"
    """The tool ran here, and the call's stored result was delivered: its own, or, when
    :attr:`RunOutcome.unstored` is set, the one stored for the call first."""
    DELIVERED_STORED_RESULT = "delivered-stored-result"
    """A result stored earlier was delivered; the tool did not run."""
    ALREADY_DELIVERED = "already-delivered"
    """Nothing was left to do."""
    DELIVERY_FAILED = "delivery-failed"
    """The send is known not to have happened and the claim was released: a later call
    delivers the same stored payload without running the tool."""
    RELEASED = "released"
    """The tool stopped before any effect (it raised one of ``not_run``) and this call
    gave its claim up: the next call runs the tool. The exception was re-raised."""
    NEEDS_EXECUTION_RECONCILIATION = "needs-execution-reconciliation"
    """The record is executing or uncertain: another worker may still be running the
    tool, or it died, or this call could not tell or store what the tool did. Only once
    the owner is known to be gone may someone find out whether the effect happened and
    complete the record. Nothing will run the tool again."""
    NEEDS_DELIVERY_RECONCILIATION = "needs-delivery-reconciliation"
    """A delivery is claimed and its outcome unknown: another worker may be sending, or
    this call's send may or may not have arrived, or it arrived and could not be
    recorded."""
    LOST_TO_ANOTHER_WORKER = "lost-to-another-worker"
    """Another worker's claim landed where this call's did not."""
    STORE_UNAVAILABLE = "store-unavailable"
    """The store failed too often to finish; call again later (the record says what
    remains, and nothing is done twice)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one call ended.

    Attributes:
        status: What happened.
        ran_tool: Whether the tool was called in this call.
        record: The last record this call wrote (and knows landed) or read; None if it
            knows of none.
        reason: Why, where the status alone does not say it: the tool error's type, the
            error code of a result that could not be stored, the uncertainty's reason,
            the type of a send's failure. Never a payload or an exception's message.
        unstored: The result the tool produced in this call when it is not known to be
            the stored one: its write's outcome was still unknown when the write budget
            was spent (status needs-execution-reconciliation), another result was
            stored first (reason :data:`OVERTAKEN`; the stored one is the call's one
            answer), or the store lost the record and it could not be restored (reason
            :data:`VANISHED`). The effect happened, and this is what it returned. None
            otherwise.
    """

    status: RunStatus
    ran_tool: bool
    record: Checkpoint | None
    reason: str | None = None
    unstored: Result | None = None

    @property
    def has_payload(self) -> bool:
        """Whether :attr:`record` holds a stored, unpruned result to hand back."""
        record = self.record
        return record is not None and record.result is not None and record.result.pruned_at is None

    @property
    def payload(self) -> JSONValue:
        """The stored result's exact payload (see :attr:`has_payload`; None otherwise)."""
        record = self.record
        if record is None or record.result is None or record.result.pruned_at is not None:
            return None
        return record.result.payload


class ToolOutcomeUnknown(Exception):
    """Raised by a tool that cannot tell whether its effect happened (a timeout after
    the request left, say). The execution is marked uncertain with ``reason``; nothing
    is stored as a result and nothing runs the tool again.

    Args:
        reason: Why, for the operator: 1 to 1,024 characters, no control characters
            (another reason is stored in its place otherwise). Never a secret.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ToolDidNotRun(Exception):
    """Raised by a tool that stopped before it had any effect (it asks for approval, say,
    before it acts). The claim is released and the exception re-raised; the next call of
    the same binding runs the tool. Never raise it after the tool may have acted: raise
    :class:`ToolOutcomeUnknown` then."""


class DeliveryNotSent(Exception):
    """Raised by ``deliver`` when the send is known not to have happened (the request
    was refused before it left). The delivery claim is released for a later resend."""


DEFAULT_NOT_SENT: tuple[type[BaseException], ...] = (DeliveryNotSent, ConnectionRefusedError)
"""The exceptions from ``deliver`` that mean "not sent" unless the host passes others."""

DEFAULT_NOT_RUN: tuple[type[BaseException], ...] = (ToolDidNotRun,)
"""The exceptions from the tool that mean "stopped before any effect" unless the host
passes others."""


def default_error_payload(error: Exception) -> JSONValue:
    """The payload stored and delivered when the tool raises: the exception's type only
    (its message may hold secrets). Pass ``on_tool_error`` to choose another shape."""
    return {"error": {"type": type(error).__name__}}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _new_id() -> str:
    """A fresh call token: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


# --- requests and answers ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    """Create ``record`` if no record is stored. Answer: True, False or StoreFault."""

    record: Checkpoint


@dataclass(frozen=True, slots=True)
class Get:
    """Read the stored record. Answer: the record (a Checkpoint or the raw mapping), None,
    or StoreFault."""


@dataclass(frozen=True, slots=True)
class Swap:
    """Compare-and-swap ``transition``. Answer: True, False or StoreFault."""

    transition: Transition


@dataclass(frozen=True, slots=True)
class RunTool:
    """Run the tool. Answer: Returned or Raised."""


@dataclass(frozen=True, slots=True)
class Deliver:
    """Send ``result.payload``. Answer: None once sent, or Raised."""

    result: Result


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` before reading again. Answer: None."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Ask the host's reconcile hook about ``record``, a claim this call does not hold.
    Answer: Found, NotThere, None (cannot tell) or Raised."""

    record: Checkpoint


Request: TypeAlias = Create | Get | Swap | RunTool | Deliver | Sleep | Reconcile


@dataclass(frozen=True, slots=True)
class StoreFault:
    """The store raised StoreError: a write may or may not have been applied."""


@dataclass(frozen=True, slots=True)
class Returned:
    """The tool returned ``value``."""

    value: Any


@dataclass(frozen=True, slots=True, repr=False)
class Found:
    """The reconcile hook found the effect: ``payload`` (a JSON value) is its result,
    stored and delivered as the call's one answer."""

    payload: object

    def __repr__(self) -> str:
        return "Found(<payload>)"


@dataclass(frozen=True, slots=True, repr=False)
class NotThere:
    """The reconcile hook found no effect: ``payload`` (a JSON value) is the host's
    declared answer for a call that did not happen (stored and delivered; the tool is
    never run again)."""

    payload: object

    def __repr__(self) -> str:
        return "NotThere(<payload>)"


@dataclass(frozen=True, slots=True)
class StuckCall:
    """What a reconcile hook is given: a call whose execution another attempt claimed
    (executing or uncertain), found by this call.

    Attributes:
        key: The store key.
        binding: The call's binding.
        status: executing or uncertain.
        claimed_at: When the claim was made, on its writer's clock: a hook that must not
            act on a claim whose worker may still be running checks its age.
        uncertain_reason: The uncertain mark's reason, or None.
        idempotency_key: The call's downstream key (what
            :func:`~.identity.current_idempotency_key` gave the tool): look the effect up
            by it.
    """

    key: str
    binding: Binding
    status: Status
    claimed_at: str
    uncertain_reason: str | None
    idempotency_key: str


ReconcileHook: TypeAlias = Callable[[StuckCall], "Found | NotThere | None"]
"""Looks a stuck call's effect up outside: Found, NotThere, or None (cannot tell)."""

AsyncReconcileHook: TypeAlias = Callable[
    [StuckCall], "Awaitable[Found | NotThere | None] | Found | NotThere | None"
]
"""The same, for :func:`run_once_async`: it may be async."""


@dataclass(frozen=True, slots=True)
class Raised:
    """The tool or the delivery raised ``error``."""

    error: BaseException


# --- the state ---------------------------------------------------------------------------


class Phase(enum.Enum):
    """What the call's last request was, so what its answer means."""

    CREATE = "create the record claimed, if absent"
    LOAD = "read the record"
    WAIT = "wait for a call in flight"
    CLAIM = "swap the execution claim"
    RUN = "run the tool"
    STORE = "swap the result and the delivery claim"
    MARK = "swap the execution uncertain"
    GIVE_UP = "swap the execution released"
    CLAIM_DELIVERY = "swap the delivery claim"
    SEND = "send the stored payload"
    FINISH = "swap the delivery done"
    RELEASE = "swap the delivery released"
    CONFIRM = "read back a write of unknown outcome"
    RECONCILE = "ask the reconcile hook about a claim this call does not hold"
    RESTORE = "create again, claimed by this call, a record that vanished after the tool ran"
    SETTLE = "swap the hook's result and the delivery claim"
    PAUSE = "wait before reading a held write back again"
    DONE = "finished"

    # Each step looks its phase up in the tables below: a member is its only instance,
    # so identity's hash (in C) does what Enum's (in Python, by name) does, faster.
    __hash__ = object.__hash__


class CallState(NamedTuple):
    """Everything one call knows, as a hashable value (a named tuple: the runner makes
    one per step, and a tuple is cheaper to make than a frozen dataclass).

    Attributes:
        phase: What the last request was.
        token: The call's random token; its claim ids are ``token.N``.
        record: The last record this call knows to be stored (it wrote it and saw it
            land, or read it).
        pending: The write whose answer the call awaits: set in CREATE, in the phases
            that swap, and in CONFIRM (the write being read back); None in every other.
        writing: The phase of the write being read back: set in CONFIRM and PAUSE only.
        claims: How many claim ids this call has made.
        ran: Whether the tool was called.
        lost: Whether a claim of this call did not land.
        rounds: Decisions, absent records and failed reads so far.
        retries: Resends and read-backs of the current write so far.
        polls: Waits for a call in flight so far.
        reason: The reason the outcome will carry.
        reraise: Whether the driver re-raises what the tool or the delivery raised.
        deadline: When a held write's read-backs stop (on the protocol's monotonic
            clock), set at its first failure; None before.
        unstored: The tool's result, once an operator stored another in its place.
        asked: Whether the reconcile hook was asked.
    """

    phase: Phase
    token: str
    record: Checkpoint | None = None
    pending: Transition | None = None
    writing: Phase | None = None
    claims: int = 0
    ran: bool = False
    lost: bool = False
    rounds: int = 0
    retries: int = 0
    polls: int = 0
    reason: str | None = None
    reraise: bool = False
    deadline: float | None = None
    unstored: Result | None = None
    asked: bool = False

    def claim_id(self) -> str:
        """The id of the claim this call makes next."""
        return f"{self.token}.{self.claims + 1}"

    def owns(self, claim_id: str | None) -> bool:
        """Whether ``claim_id`` is one this call made."""
        return claim_id is not None and claim_id.startswith(self.token + ".")

    def holds(self, record: Checkpoint) -> bool:
        """Whether this call is still going and made the claim ``record`` carries (so the
        tool may be running, or a send may be under way, on its behalf)."""
        return self.phase is not Phase.DONE and self.owns(claim_id(record))


def claim_id(record: Checkpoint) -> str | None:
    """The id of the latest claim ``record`` carries: its delivery id, else its attempt
    id, else None."""
    if record.delivery is not None:
        return record.delivery.delivery_id
    return record.execution.attempt_id if record.execution is not None else None


Step: TypeAlias = tuple[Request | RunOutcome, CallState]


# --- the machine -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostProtocol:
    """The host protocol for one binding, without I/O.

    Attributes:
        binding: The call's binding.
        on_tool_error: The payload stored when the tool raises a handler error.
        not_sent: Exceptions from ``deliver`` that mean the send did not happen.
        pass_through: Exceptions from the tool that are the framework's control flow,
            not a result: the execution is marked uncertain and they are re-raised.
        not_run: Exceptions from the tool that mean it stopped before any effect: the
            claim is released and they are re-raised (checked before ``pass_through``).
        clock: Now, as an RFC 3339 string.
        max_payload_bytes: The payload limit used for every record.
        polls: How many times a call that finds the record executing under another
            attempt waits and reads again (0: it answers at once).
        poll_seconds: How long each wait is.
        write_budget: How long, in seconds from its first failure, a write over a claim
            this call holds is read back and resent, with a pause before each read-back
            after the first (:func:`pause_before`); 0: read back :data:`RETRIES` times
            at once.
        monotonic: The clock the write budget is measured on.
        reconciles: Whether a call that finds an execution claim it does not hold asks
            the host's reconcile hook (a Reconcile request) before it answers
            needs-execution-reconciliation.
    """

    binding: Binding
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload
    not_sent: tuple[type[BaseException], ...] = DEFAULT_NOT_SENT
    pass_through: tuple[type[BaseException], ...] = ()
    clock: Callable[[], str] = _now
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes
    polls: int = 0
    poll_seconds: float = 0.0
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN
    write_budget: float = WRITE_BUDGET
    monotonic: Callable[[], float] = time.monotonic
    reconciles: bool = False

    def start(self, token: str) -> tuple[Request, CallState]:
        """The first request of a call whose claim ids start with ``token``. (The phase
        given here is a placeholder: start_over sets it.)"""
        return self.start_over(CallState(Phase.CREATE, token))  # pragma: no mutate (reset)

    def step(self, state: CallState, answer: Any) -> Step:
        """Take the answer to the state's last request; return what to do next.

        Raises:
            CheckpointError: BINDING_CONFLICT when the stored record belongs to another
                binding, and any error of the stored record's validation.
        """
        handler: Callable[[CallState, Any], Step] = getattr(self, HANDLERS[state.phase])
        return handler(state, answer)

    # --- reading and deciding ---------------------------------------------------------

    def after_create(self, state: CallState, answer: Any) -> Step:
        if answer is True:  # the record this call created, claimed: run the tool
            return self.claim_landed(state)
        if isinstance(answer, StoreFault):  # it may have landed: read it back
            return self.confirm(state)
        return self.load(state._replace(pending=None))  # a record was stored: decide on it

    def load(self, state: CallState) -> Step:
        """Read the record, unless this call has used up its rounds."""
        if state.rounds >= ROUNDS + self.polls:
            return self.finish(state, RunStatus.STORE_UNAVAILABLE, "the store did not answer")
        return Get(), state._replace(phase=Phase.LOAD)

    def after_load(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, StoreFault):
            return self.load(state._replace(rounds=state.rounds + 1))
        if answer is None and state.ran:  # never run again: restore the record, or say so
            if state.unstored is not None:
                return self.restore(state._replace(rounds=state.rounds + 1))
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        if answer is None:  # nothing stored: create it (again)
            if state.rounds + 1 >= ROUNDS + self.polls:
                return self.finish(state, RunStatus.STORE_UNAVAILABLE, "no record could be made")
            return self.start_over(state._replace(rounds=state.rounds + 1))
        return self.decide(state, self.read(answer))

    def start_over(self, state: CallState) -> tuple[Create, CallState]:
        """Create the record already claimed by a new claim id, if absent."""
        creation = create_claimed(self.binding, attempt_id=state.claim_id(), at=self.clock())
        state = state._replace(phase=Phase.CREATE, pending=creation, claims=state.claims + 1)
        return Create(creation.next), state

    def read(self, answer: Any) -> Checkpoint:
        """The record a read returned, validated and checked against the binding."""
        return decide_checkpoint(
            answer, self.binding, max_payload_bytes=self.max_payload_bytes
        ).checkpoint

    def decide(self, state: CallState, record: Checkpoint) -> Step:
        """What the record says to do next."""
        state = state._replace(record=record, rounds=state.rounds + 1)
        if state.rounds > ROUNDS + self.polls:
            return self.finish(state, RunStatus.STORE_UNAVAILABLE, "the record kept moving")
        action = TABLE.statuses[record.status].action
        if action is Action.EXECUTE and state.ran:  # never run twice: say what is kept
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        if action is Action.EXECUTE:
            claim = claim_execution(
                record,
                attempt_id=state.claim_id(),
                at=self.clock(),
                max_payload_bytes=self.max_payload_bytes,  # pragma: no mutate (no payload yet)
            )
            return self.write(state._replace(claims=state.claims + 1), Phase.CLAIM, claim)
        if action is Action.DELIVER:
            claim = claim_delivery(
                record,
                delivery_id=state.claim_id(),
                at=self.clock(),
                max_payload_bytes=self.max_payload_bytes,
            )
            return self.write(state._replace(claims=state.claims + 1), Phase.CLAIM_DELIVERY, claim)
        if action is Action.NONE:
            return self.finish(state, RunStatus.ALREADY_DELIVERED)
        if record.status is Status.EXECUTING and not state.ran and state.polls < self.polls:
            return Sleep(self.poll_seconds), state._replace(phase=Phase.WAIT, polls=state.polls + 1)
        if (state.lost or state.ran) and not state.owns(claim_id(record)):
            # another worker holds a claim this call did not win
            return self.finish(state, RunStatus.LOST_TO_ANOTHER_WORKER)
        if action is Action.RECONCILE_DELIVERY:
            return self.finish(state, RunStatus.NEEDS_DELIVERY_RECONCILIATION)
        execution = record.execution
        assert execution is not None  # executing and uncertain records carry their execution
        if self.reconciles and not state.asked and not state.owns(execution.attempt_id):
            return Reconcile(record), state._replace(phase=Phase.RECONCILE, asked=True)
        reason = execution.uncertain.reason if execution.uncertain is not None else None
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, reason)

    def after_reconcile(self, state: CallState, answer: Any) -> Step:
        """Store what the hook found (or its declared answer for no effect) for the
        claim's own attempt, with this call's delivery claim; or leave the record."""
        record = state.record
        assert record is not None
        assert record.execution is not None
        if isinstance(answer, Found | NotThere):
            try:
                settle = complete_and_claim_delivery(
                    record,
                    attempt_id=record.execution.attempt_id,
                    delivery_id=state.claim_id(),
                    at=self.clock(),
                    result=answer.payload,
                    max_payload_bytes=self.max_payload_bytes,
                )
            except CheckpointError as error:
                if error.code not in _UNSTORABLE:
                    raise
                why = f"the reconcile hook's result could not be stored: {error.code.value}"
                return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, why)
            verdict = "found" if isinstance(answer, Found) else "not there"
            state = state._replace(claims=state.claims + 1, reason=f"reconciled: {verdict}")
            return self.write(state, Phase.SETTLE, settle)
        why = "the reconcile hook could not tell"
        if isinstance(answer, Raised):
            why = f"the reconcile hook raised {type(answer.error).__name__}"
            state = state._replace(reraise=not isinstance(answer.error, Exception))
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, why)

    def after_wait(self, state: CallState, answer: Any) -> Step:
        del answer
        return self.load(state)

    # --- writing ------------------------------------------------------------------------

    def write(
        self, state: CallState, phase: Phase, transition: Transition, *, resend: bool = False
    ) -> Step:
        """Swap ``transition``; its answer goes to ``phase``'s handler. A resend keeps the
        write's count of resends and read-backs; any other write starts it afresh."""
        if resend:
            return Swap(transition), state._replace(phase=phase, pending=transition)
        state = state._replace(phase=phase, pending=transition, retries=0, deadline=None)
        return Swap(transition), state

    def confirm(self, state: CallState) -> Step:
        """Read back the pending write, unless this call has read back too often: a claim
        :data:`RETRIES` times at once, a held write until the write budget is spent."""
        writing = state.writing if state.phase in _READING_BACK else state.phase
        assert writing is not None
        retry = state.retries + 1
        held = writing in RESENDABLE and self.write_budget > 0
        if not held:
            if retry > RETRIES:
                return self._then(UNSETTLED, writing)(state._replace(phase=writing))  # finishes
            return Get(), state._replace(phase=Phase.CONFIRM, writing=writing, retries=retry)
        now = self.monotonic()
        deadline = now + self.write_budget if state.deadline is None else state.deadline
        if retry > held_retries(self.write_budget) or (retry > 1 and now >= deadline):
            return self._then(UNSETTLED, writing)(state._replace(phase=writing))  # finishes
        state = state._replace(writing=writing, retries=retry, deadline=deadline)
        if retry == 1:
            return Get(), state._replace(phase=Phase.CONFIRM)
        pause = min(pause_before(retry), deadline - now)
        return Sleep(pause), state._replace(phase=Phase.PAUSE)

    def after_pause(self, state: CallState, answer: Any) -> Step:
        del answer
        return Get(), state._replace(phase=Phase.CONFIRM)

    def _then(self, table: Mapping[Phase, str], phase: Phase) -> Callable[..., Step]:
        method: Callable[..., Step] = getattr(self, table[phase])
        return method

    def after_confirm(self, state: CallState, answer: Any) -> Step:
        assert state.pending is not None
        assert state.writing is not None
        writing = state._replace(writing=None)  # each handler below sets its own phase
        if isinstance(answer, StoreFault):
            return self.confirm(state)
        stored = None if answer is None else self.read(answer)
        if stored == state.pending.next:
            return self._then(LANDED, state.writing)(writing)
        if stored is not None and stored == state.record and state.writing in RESENDABLE:
            # still the record it was written over: the write did not land; send it again,
            # unless the write budget is spent
            if state.deadline is not None and self.monotonic() >= state.deadline:
                return self._then(UNSETTLED, state.writing)(writing._replace(phase=state.writing))
            return self.write(writing, state.writing, state.pending, resend=True)
        return self._then(NOT_LANDED, state.writing)(writing, stored)

    def after_write(self, state: CallState, answer: Any) -> Step:
        if answer is True:
            return self._then(LANDED, state.phase)(state)
        # Unknown, or not landed: the record says what happened (a stale copy of this
        # very write may have landed first, and a lost claim needs the record anyway).
        return self.confirm(state)

    # --- the execution ------------------------------------------------------------------

    def claim_landed(self, state: CallState) -> Step:
        assert state.pending is not None
        record = state.pending.next
        return RunTool(), state._replace(phase=Phase.RUN, record=record, pending=None, ran=True)

    def claim_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """The claim (of the execution or of the delivery) is not what the record holds:
        decide on the record read back, or read it, as a call whose claim did not land.
        Never acted on: a record read back unchanged is claimed afresh, and one that moved
        is another worker's only if the claim it carries now is not this call's (decide
        asks whose it is, so a claim of this call that landed and moved on since, which
        only an operator does, is judged by what it became)."""
        state = state._replace(pending=None, lost=True)
        return self.decide(state, stored) if stored is not None else self.load(state)

    def claim_unsettled(self, state: CallState) -> Step:
        return self.finish(
            state, RunStatus.STORE_UNAVAILABLE, "could not tell whether the claim landed"
        )

    def after_run(self, state: CallState, answer: Any) -> Step:
        if isinstance(answer, Returned):
            return self.store_result(state, answer.value, None)
        assert isinstance(answer, Raised)
        error = answer.error
        name = type(error).__name__
        if isinstance(error, ToolOutcomeUnknown):
            return self.mark(state, error.reason)
        if isinstance(error, self.not_run):
            return self.give_up(state, f"not run: {name}")
        if isinstance(error, self.pass_through):
            return self.mark(state, f"passed through: {name}", reraise=True)
        if not isinstance(error, Exception):
            return self.mark(state, "cancelled", reraise=True)
        return self.store_result(state, self.on_tool_error(error), f"the tool raised {name}")

    def store_result(self, state: CallState, result: Any, reason: str | None) -> Step:
        record = state.record
        assert record is not None
        assert record.execution is not None
        try:
            done = complete_and_claim_delivery(
                record,
                attempt_id=record.execution.attempt_id,
                delivery_id=state.claim_id(),
                at=self.clock(),
                result=result,
                max_payload_bytes=self.max_payload_bytes,
            )
        except CheckpointError as error:
            if error.code not in _UNSTORABLE:
                raise  # not the result's fault: a broken record or core is never hidden
            why = f"the tool's result could not be stored: {error.code.value}"
            return self.mark(state, why)
        state = state._replace(reason=reason, claims=state.claims + 1)
        return self.write(state, Phase.STORE, done)

    def mark(self, state: CallState, reason: str, *, reraise: bool = False) -> Step:
        record = state.record
        assert record is not None
        assert record.execution is not None
        attempt, at = record.execution.attempt_id, self.clock()
        try:
            doubt = mark_execution_uncertain(record, attempt_id=attempt, at=at, reason=reason)
        except CheckpointError:  # the tool's own reason was not a valid reason
            reason = "the tool said its outcome is unknown (its reason could not be stored)"
            doubt = mark_execution_uncertain(record, attempt_id=attempt, at=at, reason=reason)
        return self.write(state._replace(reason=reason, reraise=reraise), Phase.MARK, doubt)

    def give_up(self, state: CallState, reason: str) -> Step:
        """The tool stopped before any effect: release the claim, then re-raise."""
        record = state.record
        assert record is not None
        assert record.execution is not None
        release = release_execution(record, attempt_id=record.execution.attempt_id, at=self.clock())
        return self.write(state._replace(reason=reason, reraise=True), Phase.GIVE_UP, release)

    def gave_up(self, state: CallState) -> Step:
        assert state.pending is not None
        state = state._replace(record=state.pending.next)
        return self.finish(state, RunStatus.RELEASED, state.reason)

    def give_up_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        if stored is not None:
            state = state._replace(record=stored)
        return self.finish(
            state,
            RunStatus.NEEDS_EXECUTION_RECONCILIATION,
            "the record moved under this call's release",
        )

    def give_up_unsettled(self, state: CallState) -> Step:
        return self.finish(
            state,
            RunStatus.NEEDS_EXECUTION_RECONCILIATION,
            "the tool did not run, but its release could not be recorded",
        )

    def store_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a claim this call holds. Marked uncertain while the tool
        ran, the claim is still this attempt's: its exact result is stored over the mark.
        Otherwise the call goes by what the operator did, and a result it stored instead
        of this call's is the one answer: this call's is kept as ``unstored``."""
        assert state.pending is not None
        ours = state.pending.next.result
        assert ours is not None
        execution = stored.execution if stored is not None else None
        if (
            stored is not None
            and stored.status is Status.UNCERTAIN
            and execution is not None
            and state.owns(execution.attempt_id)
        ):
            done = complete_and_claim_delivery(
                stored,
                attempt_id=execution.attempt_id,
                delivery_id=state.claim_id(),
                at=self.clock(),
                result=ours.payload,
                max_payload_bytes=self.max_payload_bytes,
            )
            state = state._replace(record=stored, claims=state.claims + 1)
            return self.write(state, Phase.STORE, done)
        theirs = stored.result if stored is not None else None
        kept = theirs is not None and theirs.payload_json == ours.payload_json
        if stored is None:
            rounds = state.rounds + 1
            return self.restore(state._replace(pending=None, unstored=ours, rounds=rounds))
        if not kept:
            state = state._replace(unstored=ours, reason=OVERTAKEN)
        return self.decide(state._replace(pending=None), stored)

    def restore(self, state: CallState) -> Step:
        """The record vanished after the tool ran: create it again, claimed by this call's
        attempt, so that the result (``unstored``) is stored over it. Never run again."""
        record = state.record
        assert record is not None
        assert record.execution is not None
        if state.rounds >= ROUNDS + self.polls:
            return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)
        attempt = record.execution.attempt_id
        creation = create_claimed(self.binding, attempt_id=attempt, at=self.clock())
        state = state._replace(phase=Phase.RESTORE, pending=creation, reason=VANISHED)
        return Create(creation.next), state._replace(retries=0, deadline=None)

    def restored(self, state: CallState) -> Step:
        assert state.pending is not None
        assert state.unstored is not None
        result = state.unstored.payload
        state = state._replace(record=state.pending.next, pending=None, unstored=None)
        return self.store_result(state, result, None)

    def restore_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        state = state._replace(pending=None, rounds=state.rounds + 1)
        if stored is None:
            return self.restore(state)
        return self.decide(state._replace(lost=True), stored)  # another's record took its place

    def restore_unsettled(self, state: CallState) -> Step:
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, VANISHED)

    def store_unsettled(self, state: CallState) -> Step:
        assert state.pending is not None
        return self.finish(
            state,
            RunStatus.NEEDS_EXECUTION_RECONCILIATION,
            "the tool ran but its result could not be stored",
            unstored=state.pending.next.result,
        )

    def marked(self, state: CallState) -> Step:
        assert state.pending is not None
        state = state._replace(record=state.pending.next)
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, state.reason)

    def mark_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a claim this call holds: a result it stored is the
        call's one answer, delivered; otherwise the record waits for reconciliation."""
        if stored is not None and stored.result is not None:
            return self.decide(state._replace(pending=None), stored)
        if stored is not None:
            state = state._replace(record=stored)
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, state.reason)

    def mark_unsettled(self, state: CallState) -> Step:
        return self.finish(state, RunStatus.NEEDS_EXECUTION_RECONCILIATION, state.reason)

    # --- the delivery -------------------------------------------------------------------

    def delivery_claimed(self, state: CallState) -> Step:
        assert state.pending is not None
        record = state.pending.next
        assert record.result is not None
        return Deliver(record.result), state._replace(phase=Phase.SEND, record=record, pending=None)

    delivery_not_landed = claim_not_landed

    def after_send(self, state: CallState, answer: Any) -> Step:
        record = state.record
        assert record is not None
        assert record.delivery is not None
        delivery_id, at = record.delivery.delivery_id, self.clock()
        limit = self.max_payload_bytes
        if answer is None:
            finish = complete_delivery(
                record, delivery_id=delivery_id, at=at, max_payload_bytes=limit
            )
            return self.write(state, Phase.FINISH, finish)
        assert isinstance(answer, Raised)
        error = answer.error
        name = type(error).__name__
        if isinstance(error, self.not_sent):
            release = release_delivery(
                record, delivery_id=delivery_id, at=at, max_payload_bytes=limit
            )
            return self.write(state._replace(reason=f"not sent: {name}"), Phase.RELEASE, release)
        state = state._replace(reraise=not isinstance(error, Exception))
        return self.finish(
            state, RunStatus.NEEDS_DELIVERY_RECONCILIATION, f"the send's outcome is unknown: {name}"
        )

    def delivered(self, state: CallState) -> Step:
        assert state.pending is not None
        state = state._replace(record=state.pending.next)
        done = RunStatus.EXECUTED_AND_DELIVERED if state.ran else RunStatus.DELIVERED_STORED_RESULT
        return self.finish(state, done, state.reason)

    def released(self, state: CallState) -> Step:
        assert state.pending is not None
        state = state._replace(record=state.pending.next)
        return self.finish(state, RunStatus.DELIVERY_FAILED, state.reason)

    def finish_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        if stored is not None:
            state = state._replace(record=stored)
        return self.finish(
            state,
            RunStatus.NEEDS_DELIVERY_RECONCILIATION,
            "the record moved under this call's delivery",
        )

    def release_not_landed(self, state: CallState, stored: Checkpoint | None) -> Step:
        """Only an operator moves a delivery claim this call holds. One that confirmed a
        send this call then found refused is named: the payload did not arrive, and the
        outcome still carries it for the host to resend."""
        if stored is None or stored.status is not Status.DELIVERED:
            return self.finish_not_landed(state, stored)
        state = state._replace(record=stored)
        return self.finish(state, RunStatus.NEEDS_DELIVERY_RECONCILIATION, CONFIRMED_NOT_SENT)

    def finish_unsettled(self, state: CallState) -> Step:
        sent = state.phase is Phase.FINISH
        why = "sent, but it could not be recorded" if sent else "not sent, and not released"
        return self.finish(state, RunStatus.NEEDS_DELIVERY_RECONCILIATION, why)

    # --- the end ------------------------------------------------------------------------

    def finish(
        self,
        state: CallState,
        status: RunStatus,
        reason: str | None = None,
        *,
        unstored: Result | None = None,
    ) -> Step:
        """End the call: nothing is left pending (so a finished state is one value)."""
        unstored = unstored or state.unstored
        if reason is None and unstored is not None:
            reason = state.reason  # OVERTAKEN or VANISHED, set where the result was refused
        outcome = RunOutcome(status, state.ran, state.record, reason, unstored)
        return outcome, state._replace(phase=Phase.DONE, reason=reason, pending=None, writing=None)

    def after_done(self, state: CallState, answer: Any) -> Step:
        del state, answer
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "the call is finished", field="state")


_READING_BACK = frozenset({Phase.CONFIRM, Phase.PAUSE})
"""The phases of a write being read back (``writing`` names the write)."""

_UNSTORABLE = frozenset({ErrorCode.PAYLOAD_NOT_JSON, ErrorCode.PAYLOAD_LIMIT_EXCEEDED})
"""The refusals of a result that mark the execution uncertain instead of being raised."""


HANDLERS: Mapping[Phase, str] = {
    Phase.CREATE: "after_create",
    Phase.LOAD: "after_load",
    Phase.WAIT: "after_wait",
    Phase.CLAIM: "after_write",
    Phase.RUN: "after_run",
    Phase.STORE: "after_write",
    Phase.MARK: "after_write",
    Phase.GIVE_UP: "after_write",
    Phase.CLAIM_DELIVERY: "after_write",
    Phase.SEND: "after_send",
    Phase.FINISH: "after_write",
    Phase.RELEASE: "after_write",
    Phase.CONFIRM: "after_confirm",
    Phase.PAUSE: "after_pause",
    Phase.RECONCILE: "after_reconcile",
    Phase.RESTORE: "after_write",
    Phase.SETTLE: "after_write",
    Phase.DONE: "after_done",
}
"""Which method takes the answer to a phase's request (by name, so that a subclass
modelling a broken host overrides one step)."""

LANDED: Mapping[Phase, str] = {
    Phase.CREATE: "claim_landed",
    Phase.CLAIM: "claim_landed",
    Phase.STORE: "delivery_claimed",
    Phase.MARK: "marked",
    Phase.GIVE_UP: "gave_up",
    Phase.CLAIM_DELIVERY: "delivery_claimed",
    Phase.SETTLE: "delivery_claimed",
    Phase.RESTORE: "restored",
    Phase.FINISH: "delivered",
    Phase.RELEASE: "released",
}
"""What a write's phase does once the write is known to have landed."""

NOT_LANDED: Mapping[Phase, str] = {
    Phase.CREATE: "claim_not_landed",
    Phase.CLAIM: "claim_not_landed",
    Phase.STORE: "store_not_landed",
    Phase.MARK: "mark_not_landed",
    Phase.GIVE_UP: "give_up_not_landed",
    Phase.CLAIM_DELIVERY: "delivery_not_landed",
    Phase.SETTLE: "delivery_not_landed",
    Phase.RESTORE: "restore_not_landed",
    Phase.FINISH: "finish_not_landed",
    Phase.RELEASE: "release_not_landed",
}
"""What a write's phase does once the write is known not to have landed (with the
record read back, when it was read back)."""

UNSETTLED: Mapping[Phase, str] = {
    Phase.CREATE: "claim_unsettled",
    Phase.CLAIM: "claim_unsettled",
    Phase.STORE: "store_unsettled",
    Phase.MARK: "mark_unsettled",
    Phase.GIVE_UP: "give_up_unsettled",
    Phase.CLAIM_DELIVERY: "claim_unsettled",
    Phase.SETTLE: "claim_unsettled",
    Phase.RESTORE: "restore_unsettled",
    Phase.FINISH: "finish_unsettled",
    Phase.RELEASE: "finish_unsettled",
}
"""What a write's phase does when its outcome stays unknown after every read-back."""

RESENDABLE = frozenset({Phase.STORE, Phase.MARK, Phase.GIVE_UP, Phase.FINISH, Phase.RELEASE})
"""Writes over a claim this call holds: read back unchanged, they are sent again (a
claim read back unchanged was lost to nobody, but is decided afresh instead)."""


# --- the drivers -------------------------------------------------------------------------


def _protocol(
    binding: Binding,
    *,
    on_tool_error: Callable[[Exception], JSONValue],
    not_sent: tuple[type[BaseException], ...],
    pass_through: tuple[type[BaseException], ...],
    not_run: tuple[type[BaseException], ...],
    clock: Callable[[], str],
    max_payload_bytes: int,
    wait_seconds: float,
    poll_seconds: float,
    write_budget: float,
    reconciles: bool,
) -> HostProtocol:
    if not isinstance(binding, Binding):
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
    seconds_options = (
        ("wait_seconds", wait_seconds),
        ("poll_seconds", poll_seconds),
        ("write_budget", write_budget),
    )
    for name, seconds in seconds_options:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds <= MAX_SECONDS
        ):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT, "must be a number of seconds from 0 to 1e6", field=name
            )
    if wait_seconds and not poll_seconds:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be > 0 when wait_seconds is", field="poll_seconds"
        )
    polls = int(-(-wait_seconds // poll_seconds)) if wait_seconds else 0
    return HostProtocol(
        binding,
        on_tool_error,
        tuple(not_sent),
        tuple(pass_through),
        clock,
        max_payload_bytes,
        polls,
        float(poll_seconds),
        tuple(not_run),
        float(write_budget),
        reconciles=reconciles,
    )


def _log(logger: logging.Logger, key: str, state: CallState) -> None:
    """One DEBUG line per step: the phase, the store key (a digest, never the call id's value),
    the status and revision of the record known; never a payload."""
    if not logger.isEnabledFor(logging.DEBUG):
        return  # the same check logger.debug makes, before its arguments are built
    record = state.record
    logger.debug(
        "%s key=%s status=%s revision=%d",
        state.phase.value,
        key,
        record.status.value if record is not None else "absent",
        record.revision if record is not None else 0,
    )


@dataclass(slots=True)
class _Call:
    """One call's place in the machine, as both drivers keep it: the next request (or
    the outcome), the state, and what the tool or the delivery raised last."""

    protocol: HostProtocol
    key: str
    request: Request | RunOutcome
    state: CallState
    logger: logging.Logger
    caught: BaseException | None = None

    @classmethod
    def start(
        cls, protocol: HostProtocol, key: str | None, token: str, logger: logging.Logger
    ) -> _Call:
        request, state = protocol.start(token)
        return cls(protocol, key or checkpoint_key(protocol.binding), request, state, logger)

    def answer(self, answer: Any) -> None:
        """Hand the answer to the last request to the machine."""
        self.request, self.state = self.protocol.step(self.state, answer)
        _log(self.logger, self.key, self.state)

    def raised(self, error: BaseException) -> None:
        """The tool or the delivery raised ``error``."""
        self.caught = error
        self.answer(Raised(error))

    def outcome(self) -> RunOutcome:
        """The finished call's outcome; re-raises what the machine says to re-raise."""
        assert isinstance(self.request, RunOutcome)
        if self.request.unstored is not None:
            self.logger.error(
                "%s: key=%s",
                self.request.reason,
                self.key,
            )
        if self.state.reraise and self.caught is not None:
            raise self.caught
        return self.request

    def stuck(self, record: Checkpoint) -> StuckCall:
        """What the reconcile hook is told about ``record``."""
        execution = record.execution
        assert execution is not None
        binding = self.protocol.binding
        return StuckCall(
            self.key,
            binding,
            record.status,
            execution.claimed_at,
            execution.uncertain.reason if execution.uncertain is not None else None,
            idempotency_key_of(binding.namespace, binding.call_id),
        )

    def abandoned(self) -> None:
        """The driver is leaving mid-call (cancelled, or a read it could not take): say so
        at ERROR if what it leaves unstored is the tool's result."""
        state = self.state
        if Phase.STORE in (state.phase, state.writing) or state.unstored is not None:
            self.logger.error(
                "the tool ran but its result was not stored before the call ended: "
                "key=%s is left executing for reconciliation",
                self.key,
            )


_CALLS: Final = (RunTool, Deliver)
"""The requests a driver answers by calling the tool or ``deliver``."""

_NEVER_AWAITABLE: Final = frozenset({type(None), bool, int, float, str, list, dict})
"""Exact types whose values are never awaitable (a subclass may be: it is asked)."""


def _awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable(value)``, answered at once for the plain values stores and
    tools return most."""
    return type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value)


_STORE_METHODS = ("create_if_absent", "get", "compare_and_swap")


def _check_parts(store: object, tool: object, deliver: object) -> None:
    """Refuse a store without the store methods, or a tool or deliver that cannot be
    called, before anything is stored."""
    for method in _STORE_METHODS:
        if not callable(getattr(store, method, None)):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must have create_if_absent, get and compare_and_swap",
                field="store",
            )
    for name, part in (("tool", tool), ("deliver", deliver)):
        if not callable(part):
            raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be callable", field=name)


_PLAIN_CALLABLES: Final = (MethodType, BuiltinFunctionType)
"""Callables whose ``__call__`` is always their type's own (a method-wrapper, never a
coroutine function): a bound method looks ``__call__`` up on its type, not on its
function, and a builtin has no attributes of its own."""


def _is_async(part: Any) -> bool:
    """Whether ``part`` or its ``__call__`` is a coroutine function. A plain function's
    or method's ``__call__`` is its type's own, so only ``part`` itself is asked, unless a
    function was given a ``__call__`` of its own."""
    if inspect.iscoroutinefunction(part):
        return True
    if isinstance(part, _PLAIN_CALLABLES) or (
        type(part) is FunctionType and "__call__" not in part.__dict__
    ):
        return False
    return inspect.iscoroutinefunction(part.__call__)


def _refuse_async(
    store: Any, tool: Callable[..., Any], deliver: Callable[..., Any], reconcile: object
) -> None:
    """run_once cannot await: refuse async parts before anything runs."""
    parts: list[tuple[str, object]] = [
        ("store", store.compare_and_swap),
        ("tool", tool),
        ("deliver", deliver),
    ]
    if reconcile is not None:
        parts.append(("reconcile", reconcile))
    for name, part in parts:
        if _is_async(part):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is async: run_once cannot await it (use run_once_async)",
                field=name,
            )


def run_once(
    store: CheckpointStore,
    binding: Binding,
    tool: Callable[[], Any],
    deliver: Callable[[JSONValue], object],
    *,
    key: str | None = None,
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload,
    not_sent: tuple[type[BaseException], ...] = DEFAULT_NOT_SENT,
    pass_through: tuple[type[BaseException], ...] = (),
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.1,
    write_budget: float = WRITE_BUDGET,
    reconcile: ReconcileHook | None = None,
    clock: Callable[[], str] = _now,
    new_id: Callable[[], str] = _new_id,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    logger: logging.Logger = LOGGER,
) -> RunOutcome:
    """Run ``tool`` at most once for ``binding`` and deliver its exact stored result.

    ``tool()`` is called only after this call's claim was confirmed. What it returns is
    stored and ``deliver(payload)`` sends it; the outcome says what happened (see
    :class:`RunStatus`) and carries the stored payload for every status that has one.
    The module docstring lists what the tool's and the delivery's exceptions do.

    Args:
        store: A synchronous store (an async one is refused).
        binding: The call's binding.
        tool: Called with no arguments, at most once.
        deliver: Called with the stored payload. Raising one of ``not_sent`` releases the
            claim for a later resend; any other exception leaves the delivery to
            reconcile.
        key: The store key (default: :func:`checkpoint_key` of the binding).
        on_tool_error: The payload stored and delivered when the tool raises a handler
            error (default: the exception's type only).
        not_sent: The exceptions from ``deliver`` that mean the send did not happen.
        pass_through: The tool's exceptions that are the framework's control flow: the
            execution is marked uncertain with reason ``passed through: <type>`` and the
            exception is re-raised.
        not_run: The tool's exceptions that mean it stopped before any effect (default
            :class:`ToolDidNotRun`): the claim is released (``released``, reason ``not run:
            <type>``) and the exception re-raised; the next call runs the tool. Declare
            only exceptions raised before the tool may have acted.
        wait_seconds: How long a call that finds another attempt executing waits for it
            to finish, reading every ``poll_seconds`` (default 0: answer at once).
        poll_seconds: See ``wait_seconds``.
        write_budget: Seconds, from its first failure, that a write over a claim this
            call holds (the result, an uncertain mark, a release, the delivered mark)
            keeps being read back and resent, pausing 0.05 s doubling to 1 s between
            read-backs (default 30). Once it is spent on the result, the record is left
            executing, the outcome is needs-execution-reconciliation with the result in
            :attr:`RunOutcome.unstored`, and one ERROR line names the store key.
        reconcile: Asked, once per call, about an execution claim the call finds held by
            another attempt (executing or uncertain, left by this host or another),
            with a :class:`StuckCall`. It looks the effect up outside (by
            ``idempotency_key``) and answers :class:`Found` (its payload is stored for
            the claim's attempt and delivered: reason ``reconciled: found``),
            :class:`NotThere` (the host's declared payload for a call that did not
            happen, stored and delivered the same way: the tool never runs again), or
            None: cannot tell (needs-execution-reconciliation, left for operators; so is
            an exception from it, and a payload that cannot be stored). Only a hook that
            knows the claim's worker is gone may answer: a live worker's result is then
            not the stored one (its outcome says overtaken). Sync (run_once refuses an
            async one).
        clock: Now, as an RFC 3339 string.
        new_id: A fresh random token per call; claim ids are ``token.N``.
        max_payload_bytes: The payload limit for every record of this call.
        logger: Gets the phase, the store key, status and revision, never a payload or
            the call id.

    Raises:
        CheckpointError: BINDING_CONFLICT when the stored record belongs to another
            binding; INVALID_ARGUMENT for an async store, tool, deliver or reconcile, a store
            without the store methods, a tool or deliver that is not callable, or a bad
            option; any error of the stored record's validation.
        BaseException: A cancellation or a ``pass_through`` exception from the tool,
            after the execution was marked uncertain; a ``not_run`` exception, after the
            claim was released; a cancellation of ``deliver``.
    """
    _check_parts(store, tool, deliver)
    _refuse_async(store, tool, deliver, reconcile)
    call = _Call.start(
        _protocol(
            binding,
            on_tool_error=on_tool_error,
            not_sent=not_sent,
            pass_through=pass_through,
            not_run=not_run,
            clock=clock,
            max_payload_bytes=max_payload_bytes,
            wait_seconds=wait_seconds,
            poll_seconds=poll_seconds,
            write_budget=write_budget,
            reconciles=reconcile is not None,
        ),
        key,
        new_id(),
        logger,
    )
    try:
        _drive(call, store, tool, deliver, reconcile)
    except BaseException:
        call.abandoned()
        raise
    return call.outcome()


def _drive(
    call: _Call,
    store: CheckpointStore,
    tool: Callable[[], Any],
    deliver: Callable[[JSONValue], object],
    reconcile: ReconcileHook | None,
) -> None:
    """Answer the call's requests until it has an outcome."""
    while not isinstance(request := call.request, RunOutcome):
        if isinstance(request, Reconcile):
            assert reconcile is not None  # asked only when there is a hook
            try:
                found = reconcile(call.stuck(request.record))
            except BaseException as error:  # every end of the hook is an answer
                call.raised(error)
            else:
                call.answer(_hook_answer(found))
        elif isinstance(request, _CALLS):
            try:
                value = tool() if isinstance(request, RunTool) else deliver(request.result.payload)
            except BaseException as error:  # every end of the tool or the send is an answer
                call.raised(error)
            else:
                call.answer(_sync_answer(request, value))
        elif isinstance(request, Sleep):
            time.sleep(request.seconds)
            call.answer(None)
        else:
            try:
                answer = _store_operation(store, call.key, request)
            except StoreError:
                answer = StoreFault()
            call.answer(answer)


def _hook_answer(value: object) -> Any:
    """What the reconcile hook returned, as the machine's answer (an awaitable a sync
    driver cannot await is closed)."""
    if value is None or isinstance(value, Found | NotThere):
        return value
    close = getattr(value, "close", None) if _awaitable(value) else None
    if callable(close):
        close()
    return Raised(TypeError("the reconcile hook returned neither Found, NotThere nor None"))


def _sync_answer(request: RunTool | Deliver, value: object) -> Any:
    """What a sync tool or deliver returned; an awaitable (an async callable that the
    up-front check could not see) did not run: refused as not run or not sent."""
    if _awaitable(value):
        close = getattr(value, "close", None)
        if callable(close):
            close()
        if isinstance(request, RunTool):
            return Raised(
                ToolOutcomeUnknown("the tool returned an awaitable run_once cannot await")
            )
        return Raised(DeliveryNotSent())
    return Returned(value) if isinstance(request, RunTool) else None


def _store_operation(
    store: CheckpointStore | AsyncCheckpointStore, key: str, request: Request
) -> Any:
    """Send a store request: what the store returns (an awaitable from an async store)."""
    if isinstance(request, Create):
        return store.create_if_absent(key, request.record)
    if isinstance(request, Get):
        return store.get(key)
    assert isinstance(request, Swap)
    step = request.transition
    return store.compare_and_swap(key, step.expected_revision, step.next)


async def run_once_async(
    store: AsyncCheckpointStore | CheckpointStore,
    binding: Binding,
    tool: Callable[[], Awaitable[Any] | Any],
    deliver: Callable[[JSONValue], Awaitable[object] | object],
    *,
    key: str | None = None,
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload,
    not_sent: tuple[type[BaseException], ...] = DEFAULT_NOT_SENT,
    pass_through: tuple[type[BaseException], ...] = (),
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.1,
    write_budget: float = WRITE_BUDGET,
    reconcile: AsyncReconcileHook | None = None,
    clock: Callable[[], str] = _now,
    new_id: Callable[[], str] = _new_id,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    logger: logging.Logger = LOGGER,
) -> RunOutcome:
    """The asyncio driver of the same protocol, with the same arguments and outcomes as
    :func:`run_once`. The store, ``tool`` and ``deliver`` may each be async or sync: what
    they return is awaited when it is awaitable. A cancellation while the tool runs marks
    the execution uncertain (reason ``cancelled``) while the store still answers, then
    propagates."""
    _check_parts(store, tool, deliver)
    call = _Call.start(
        _protocol(
            binding,
            on_tool_error=on_tool_error,
            not_sent=not_sent,
            pass_through=pass_through,
            not_run=not_run,
            clock=clock,
            max_payload_bytes=max_payload_bytes,
            wait_seconds=wait_seconds,
            poll_seconds=poll_seconds,
            write_budget=write_budget,
            reconciles=reconcile is not None,
        ),
        key,
        new_id(),
        logger,
    )
    try:
        await _drive_async(call, store, tool, deliver, reconcile)
    except BaseException:
        call.abandoned()
        raise
    return call.outcome()


async def _drive_async(
    call: _Call,
    store: AsyncCheckpointStore | CheckpointStore,
    tool: Callable[[], Awaitable[Any] | Any],
    deliver: Callable[[JSONValue], Awaitable[object] | object],
    reconcile: AsyncReconcileHook | None,
) -> None:
    """Answer the call's requests until it has an outcome, awaiting what is awaitable."""
    while not isinstance(request := call.request, RunOutcome):
        if isinstance(request, Reconcile):
            assert reconcile is not None  # asked only when there is a hook
            try:
                found = reconcile(call.stuck(request.record))
                if _awaitable(found):
                    found = await found
            except BaseException as error:  # every end of the hook is an answer
                call.raised(error)
            else:
                call.answer(_hook_answer(found))
        elif isinstance(request, _CALLS):
            try:
                value = tool() if isinstance(request, RunTool) else deliver(request.result.payload)
                if _awaitable(value):
                    value = await value
            except BaseException as error:  # every end of the tool or the send is an answer
                call.raised(error)
            else:
                call.answer(Returned(value) if isinstance(request, RunTool) else None)
        elif isinstance(request, Sleep):
            await asyncio.sleep(request.seconds)
            call.answer(None)
        else:
            try:
                answer = _store_operation(store, call.key, request)
                if _awaitable(answer):
                    answer = await answer
            except StoreError:
                answer = StoreFault()
            call.answer(answer)
