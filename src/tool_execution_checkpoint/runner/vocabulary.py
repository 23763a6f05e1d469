"""The runner's vocabulary: how a call ends (:class:`RunStatus`, :class:`RunOutcome`), the
exceptions a tool or a delivery raises to say what happened, and the requests the machine
makes and the answers a driver gives it."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from ..records import Binding, Checkpoint, Result
from ..table import Status
from ..transitions import Transition
from ..validation import JSONValue

__all__ = [
    "CONFIRMED_NOT_SENT",
    "DEFAULT_NOT_RUN",
    "DEFAULT_NOT_SENT",
    "MARK_POSTED",
    "OVERTAKEN",
    "VANISHED",
    "AsyncReconcileHook",
    "Create",
    "Deliver",
    "DeliveryNotSent",
    "Found",
    "Get",
    "HandBack",
    "NotThere",
    "Posted",
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
    "default_error_payload",
    "hand_back",
]

OVERTAKEN = "overtaken: another result was stored for this call while its tool ran"
"""The reason of a call whose result was not stored because another was stored first (an
operator's, or another worker's after the store lost the record)."""

VANISHED = "the record vanished after the tool ran"
"""The reason of a call whose record the store lost (a failover to a replica that never had
it) after its tool ran: it is created again, claimed by the same attempt, and the result
stored over it; this is the reason when that could not be done."""

MARK_POSTED = "the delivered mark was sent without waiting for the store's answer"
"""The reason of a delivered call whose last write, the non-durable delivered mark, its
store sent without waiting for an answer (:meth:`~.stores.core.PostingStore.post_compare_and_swap`):
the outcome's record is the delivering one this call knows landed. A mark that is lost
leaves the record delivering, whose recovery answer is reconcile-delivery."""

CONFIRMED_NOT_SENT = "an operator confirmed this delivery, but its send was refused"
"""The reason of a call whose refused send an operator had already confirmed: the record
says delivered, the payload did not arrive (the outcome carries it)."""


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


class HandBack:
    """The ``deliver`` of a host whose delivery is the hand-back: the framework delivers
    the result the call returns (docs/spec.md, "When the framework delivers").
    :data:`hand_back` is the plain one; ``HandBack(readable)`` also checks a payload
    stored earlier before it is handed back. Given one, :func:`~.drive.run_once` and
    :func:`~.drive_async.run_once_async` store the result and record it delivered in one
    write (``complete_and_deliver``), and the outcome carries the stored payload for the
    host to return. Never pass one where the host itself sends the result.

    Called only for a record found completed (its payload stored by another call, a
    reconcile hook or an operator), before it is recorded delivered: a payload
    ``readable`` refuses raises :class:`DeliveryNotSent`, so the delivery claim is
    released and the record stays completed, never delivered with an answer the host
    cannot give."""

    __slots__ = ("readable",)

    def __init__(self, readable: Callable[[JSONValue], bool] | None = None) -> None:
        self.readable = readable

    def __call__(self, payload: JSONValue) -> None:
        if self.readable is not None and not self.readable(payload):
            raise DeliveryNotSent

    def __repr__(self) -> str:
        return "hand_back" if self.readable is None else "HandBack(<check>)"


hand_back: Final = HandBack()
"""The plain hand-back (see :class:`HandBack`): it hands back any stored payload."""


def default_error_payload(error: Exception) -> JSONValue:
    """The payload stored and delivered when the tool raises: the exception's type only
    (its message may hold secrets). Pass ``on_tool_error`` to choose another shape."""
    return {"error": {"type": type(error).__name__}}


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
    """Compare-and-swap ``transition``, telling the store whether it is ``durable`` (as
    the table declares the step it writes: a store may acknowledge a non-durable swap
    before it is flushed, and a driver may send one without waiting for its answer).
    Answer: True, False, StoreFault, or Posted for a non-durable swap sent unanswered."""

    transition: Transition
    durable: bool


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
class Posted:
    """A non-durable swap was sent without waiting for the store's answer: it may land
    later or be lost, as a store crash may lose an acknowledged non-durable write."""


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
