"""What one call knows (:class:`CallState`), the phases it passes through (:class:`Phase`),
and the machine's tables: which handler takes each phase's answer, and what a write's
phase does once the write landed, did not land, or stayed unknown."""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping
from typing import NamedTuple, TypeAlias

from ..records import Checkpoint, Result
from ..table import TABLE, ComposedRule, TransitionRule
from ..transitions import Transition
from .vocabulary import Request, RunOutcome

__all__ = [
    "DURABLE",
    "FIRST_PAUSE",
    "HANDLERS",
    "LANDED",
    "LONGEST_PAUSE",
    "NOT_LANDED",
    "POSTED",
    "RESENDABLE",
    "RETRIES",
    "ROUNDS",
    "UNSETTLED",
    "WRITES",
    "CallState",
    "Phase",
    "Step",
    "claim_id",
    "held_retries",
    "pause_before",
]

ROUNDS = 4
"""How many times one call decides (or finds no record, or cannot read) before it
answers store-unavailable."""

RETRIES = 3
"""How many times one call resends or reads back a write whose outcome it does not know,
when it has no write budget (a claim's write always; a held write with ``write_budget=0``)."""

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

    # A member is its only instance: identity's hash is the tables' key (docs/runner.md).
    __hash__ = object.__hash__


class CallState(NamedTuple):
    """Everything one call knows, as a hashable value; a new one per step.

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


_FIELD_AT = {name: at for at, name in enumerate(CallState._fields)}
_new_state = tuple.__new__


def _replaced(state: CallState, /, **changes: object) -> CallState:
    """``state`` with the fields ``changes`` names set: what a named tuple's own
    ``_replace`` returns, made in place of it (it goes through ``_make`` and pops every
    field, twice the cost, and the machine replaces the state at each step).

    Raises:
        ValueError: for a name that is not a field, as ``_replace`` does.
    """
    values: list[object] = list(state)
    for name, value in changes.items():
        at = _FIELD_AT.get(name)
        if at is None:
            raise ValueError(f"Got unexpected field names: {[name]!r}")
        values[at] = value
    return _new_state(CallState, values)


CallState._replace = _replaced  # type: ignore[assignment,method-assign]


def claim_id(record: Checkpoint) -> str | None:
    """The id of the latest claim ``record`` carries: its delivery id, else its attempt
    id, else None."""
    if record.delivery is not None:
        return record.delivery.delivery_id
    return record.execution.attempt_id if record.execution is not None else None


Step: TypeAlias = tuple[Request | RunOutcome, CallState]


READING_BACK = frozenset({Phase.CONFIRM, Phase.PAUSE})
"""The phases of a write being read back (``writing`` names the write)."""

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

POSTED: Mapping[Phase, str] = {Phase.FINISH: "mark_posted"}
"""What a non-durable write's phase does once its driver sent it unanswered
(:class:`~.vocabulary.Posted`); any other write answered Posted is read back."""

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

WRITES: Mapping[Phase, tuple[str, ...]] = {
    Phase.CLAIM: ("claim_execution",),
    Phase.STORE: ("complete_and_claim_delivery", "complete_and_deliver"),
    Phase.SETTLE: ("complete_and_claim_delivery", "complete_and_deliver"),
    Phase.MARK: ("mark_execution_uncertain",),
    Phase.GIVE_UP: ("release_execution",),
    Phase.CLAIM_DELIVERY: ("claim_delivery",),
    Phase.FINISH: ("complete_delivery",),
    Phase.RELEASE: ("release_delivery",),
}
"""The table's steps (transitions and composed steps) each swapping phase writes."""

_STEPS: Mapping[str, TransitionRule | ComposedRule] = {**TABLE.transitions, **TABLE.composed}

DURABLE: Mapping[Phase, bool] = {
    phase: any(_STEPS[name].durable for name in names) for phase, names in WRITES.items()
}
"""Whether a phase's swap is durable, as the table declares the steps it writes (durable
when any of them is): what its :class:`~.vocabulary.Swap` tells the store."""
