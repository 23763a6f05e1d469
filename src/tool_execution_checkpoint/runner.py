"""run_once: the host protocol done right in one call, on any store.

It creates the checkpoint if absent, decides, claims, runs the tool only after its claim's
compare-and-swap was confirmed, stores the exact result, claims the delivery, delivers the
stored payload and records the outcome. Every write whose outcome is unknown is resolved by
reading the record back (the next record carries this call's own attempt or delivery id,
so the read is exact); a write that did not land sends the call back to decide. Nothing
is ever done on an unconfirmed swap.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import CheckpointError
from .records import Binding, Checkpoint
from .store import CheckpointStore, StoreError, checkpoint_key
from .table import TABLE, Action
from .transitions import (
    Transition,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
)
from .validation import JSONValue

__all__ = ["RunOutcome", "RunStatus", "default_error_payload", "run_once"]

LOGGER = logging.getLogger("tool_execution_checkpoint")
_ROUNDS = 4


class RunStatus(enum.StrEnum):
    """What :func:`run_once` did."""

    EXECUTED_AND_DELIVERED = "executed-and-delivered"
    """The tool ran here, its result was stored and delivered."""
    DELIVERED_STORED_RESULT = "delivered-stored-result"
    """A result stored earlier was delivered; the tool did not run."""
    ALREADY_DELIVERED = "already-delivered"
    """Nothing was left to do."""
    DELIVERY_FAILED = "delivery-failed"
    """The send failed and the claim was released: a later call delivers the same
    stored payload without running the tool."""
    NEEDS_EXECUTION_RECONCILIATION = "needs-execution-reconciliation"
    """The record is executing or uncertain: another worker may still be running the
    tool, or it died; only once it is known to be gone may someone find out whether the
    effect happened and complete the record. Nothing will run the tool again."""
    NEEDS_DELIVERY_RECONCILIATION = "needs-delivery-reconciliation"
    """A delivery is claimed and its outcome unknown: another worker may be sending, or
    this call sent but could not record it."""
    LOST_TO_ANOTHER_WORKER = "lost-to-another-worker"
    """Another worker claimed the execution or the delivery first."""
    STORE_UNAVAILABLE = "store-unavailable"
    """The store failed too often to finish; call again later (the record says what
    remains, and nothing is done twice)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """The result of :func:`run_once`: its status, whether the tool ran in this call, and
    the last record this call saw (None if it could not read one)."""

    status: RunStatus
    ran_tool: bool
    record: Checkpoint | None


def default_error_payload(error: Exception) -> JSONValue:
    """The payload stored and delivered when the tool raises: the exception's type only
    (its message may hold secrets). Pass ``on_tool_error`` to choose another shape."""
    return {"error": {"type": type(error).__name__}}


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Call:
    store: CheckpointStore
    binding: Binding
    key: str
    clock: Callable[[], str]
    new_id: Callable[[], str]
    limit: int
    logger: logging.Logger

    def log(self, event: str, record: Checkpoint | None) -> None:
        status = record.status.value if record is not None else "absent"
        revision = record.revision if record is not None else 0
        self.logger.info(
            "%s call_id=%s status=%s revision=%d", event, self.binding.call_id, status, revision
        )

    def load(self) -> Checkpoint | None:
        try:
            raw = self.store.get(self.key)
        except StoreError:
            return None
        if raw is None:
            return None
        return decide_checkpoint(raw, self.binding, max_payload_bytes=self.limit).checkpoint

    def swap(self, transition: Transition) -> bool:
        """Write ``transition.next``; True only once it is known to have landed."""
        try:
            return self.store.compare_and_swap(
                self.key, transition.expected_revision, transition.next
            )
        except StoreError:
            try:
                stored = self.store.get(self.key)
            except StoreError:
                return False
            return stored is not None and dict(stored) == transition.next.to_dict()


def run_once(
    store: CheckpointStore,
    binding: Binding,
    tool: Callable[[], Any],
    deliver: Callable[[JSONValue], None],
    *,
    key: str | None = None,
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload,
    clock: Callable[[], str] = _now,
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    logger: logging.Logger = LOGGER,
) -> RunOutcome:
    """Run ``tool`` at most once for ``binding`` and deliver its exact result.

    ``tool()`` is called only after this call's claim was confirmed. If it raises, the
    payload ``on_tool_error(exception)`` is stored and delivered like a success. A result
    that is not plain JSON or is over ``max_payload_bytes`` marks the execution uncertain
    (the reason names the error code), never a rerun. ``deliver(payload)`` sends the
    stored payload; if it raises, the delivery claim is released and the exception is not
    re-raised (the outcome says DELIVERY_FAILED). Logs carry the call id, status and
    revision, never a payload.

    Raises:
        CheckpointError: BINDING_CONFLICT when the stored record belongs to another
            binding, and any error of the stored record's validation.
    """
    call = _Call(
        store, binding, key or checkpoint_key(binding), clock, new_id, max_payload_bytes, logger
    )
    with contextlib.suppress(StoreError):  # reading back tells what is there
        store.create_if_absent(call.key, create_checkpoint(binding, created_at=clock()))
    ran = lost = False
    record: Checkpoint | None = None
    for _ in range(_ROUNDS):
        record = call.load()
        if record is None:
            continue
        action = TABLE.statuses[record.status].action
        call.log("decided " + action.value, record)
        if action is Action.EXECUTE:
            claim = claim_execution(
                record, attempt_id=call.new_id(), at=clock(), max_payload_bytes=call.limit
            )
            if not call.swap(claim):
                lost = True
                continue  # not landed: decide again (another worker may have won)
            ran = True
            outcome = _execute(call, claim, tool, on_tool_error)
            if outcome is not None:
                return RunOutcome(outcome, ran, claim.next)
            continue
        if action is Action.DELIVER:
            delivered = _deliver(call, record, deliver, ran)
            if delivered is not None:
                return delivered
            lost = True
            continue  # the delivery claim did not land: decide again
        if action is Action.NONE:
            return RunOutcome(RunStatus.ALREADY_DELIVERED, ran, record)
        if lost or ran:  # another worker holds the claim this call did not win
            return RunOutcome(RunStatus.LOST_TO_ANOTHER_WORKER, ran, record)
        if action is Action.RECONCILE_EXECUTION:
            return RunOutcome(RunStatus.NEEDS_EXECUTION_RECONCILIATION, ran, record)
        return RunOutcome(RunStatus.NEEDS_DELIVERY_RECONCILIATION, ran, record)
    return RunOutcome(RunStatus.STORE_UNAVAILABLE, ran, record)


def _execute(
    call: _Call,
    claim: Transition,
    tool: Callable[[], Any],
    on_tool_error: Callable[[Exception], JSONValue],
) -> RunStatus | None:
    """Run the tool once and store its result; None means "decide again" (stored)."""
    attempt = claim.next.execution.attempt_id if claim.next.execution else ""
    call.log("running the tool", claim.next)
    try:
        result: Any = tool()
    except Exception as error:  # the tool's failure is a result to deliver
        result = on_tool_error(error)
    try:
        done = complete_execution(
            claim.next,
            attempt_id=attempt,
            at=call.clock(),
            result=result,
            max_payload_bytes=call.limit,
        )
    except CheckpointError as error:
        reason = f"the tool's result could not be stored: {error.code}"
        doubt = mark_execution_uncertain(
            claim.next, attempt_id=attempt, at=call.clock(), reason=reason
        )
        call.swap(doubt)
        call.log("result refused; marked uncertain", doubt.next)
        return RunStatus.NEEDS_EXECUTION_RECONCILIATION
    for _ in range(_ROUNDS):
        if call.swap(done):
            call.log("stored the result", done.next)
            return None
    call.log("could not store the result", claim.next)
    return RunStatus.NEEDS_EXECUTION_RECONCILIATION


def _deliver(
    call: _Call, record: Checkpoint, deliver: Callable[[JSONValue], None], ran: bool
) -> RunOutcome | None:
    """Claim the delivery, send, record the outcome; None when the claim did not land."""
    delivery_id = call.new_id()
    claim = claim_delivery(
        record, delivery_id=delivery_id, at=call.clock(), max_payload_bytes=call.limit
    )
    if not call.swap(claim):
        return None
    assert claim.next.result is not None
    try:
        deliver(claim.next.result.payload)
    except Exception:  # a known failure to send: release, a later call delivers again
        release = release_delivery(
            claim.next, delivery_id=delivery_id, at=call.clock(), max_payload_bytes=call.limit
        )
        released = call.swap(release)
        call.log("delivery failed; released" if released else "delivery failed", claim.next)
        status = RunStatus.DELIVERY_FAILED if released else RunStatus.NEEDS_DELIVERY_RECONCILIATION
        return RunOutcome(status, ran, release.next if released else claim.next)
    finish = complete_delivery(
        claim.next, delivery_id=delivery_id, at=call.clock(), max_payload_bytes=call.limit
    )
    if not call.swap(finish):
        call.log("delivered, but could not record it", claim.next)
        return RunOutcome(RunStatus.NEEDS_DELIVERY_RECONCILIATION, ran, claim.next)
    call.log("delivered", finish.next)
    status = RunStatus.EXECUTED_AND_DELIVERED if ran else RunStatus.DELIVERED_STORED_RESULT
    return RunOutcome(status, ran, finish.next)
