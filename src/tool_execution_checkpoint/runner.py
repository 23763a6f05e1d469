"""run_once and run_once_async: the host protocol done right in one call, on any store.

It creates the checkpoint if absent, decides, claims, runs the tool only after its claim's
compare-and-swap was confirmed, stores the exact result, claims the delivery, delivers the
stored payload and records the outcome. Every write whose outcome is unknown is resolved by
reading the record back (the next record carries this call's own attempt or delivery id,
so the read is exact); a write that did not land sends the call back to decide. Nothing
is ever done on an unconfirmed swap.

The protocol is written once, without I/O, as a generator of requests; ``run_once`` and
``run_once_async`` only perform them.
"""

from __future__ import annotations

import enum
import logging
import secrets
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import CheckpointError
from .records import Binding, Checkpoint
from .store import AsyncCheckpointStore, CheckpointStore, StoreError, checkpoint_key
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

__all__ = ["RunOutcome", "RunStatus", "default_error_payload", "run_once", "run_once_async"]

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


def _new_id() -> str:
    """A fresh claim id: 128 random bits as 32 hex digits."""
    return secrets.token_hex(16)


# --- the protocol, without I/O ---------------------------------------------------------
#
# _protocol is a generator: it yields what it needs done (a store operation, the tool
# call, the delivery) and is sent the answer; a driver does the I/O, synchronously
# (run_once) or with asyncio (run_once_async). Store failures come back as the exception.


@dataclass(frozen=True, slots=True)
class _Create:
    record: Checkpoint


@dataclass(frozen=True, slots=True)
class _Get:
    pass


@dataclass(frozen=True, slots=True)
class _Swap:
    transition: Transition


@dataclass(frozen=True, slots=True)
class _RunTool:
    pass


@dataclass(frozen=True, slots=True)
class _Deliver:
    payload: JSONValue


_Request = _Create | _Get | _Swap | _RunTool | _Deliver
_Protocol = Generator[_Request, Any, RunOutcome]


@dataclass(frozen=True, slots=True)
class _Options:
    binding: Binding
    on_tool_error: Callable[[Exception], JSONValue]
    clock: Callable[[], str]
    new_id: Callable[[], str]
    limit: int
    logger: logging.Logger

    def log(self, event: str, record: Checkpoint | None) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        status = record.status.value if record is not None else "absent"
        revision = record.revision if record is not None else 0
        self.logger.info(
            "%s call_id=%s status=%s revision=%d",
            event,
            self.binding.call_id,
            status,
            revision,
        )


def _load(options: _Options) -> Generator[_Request, Any, Checkpoint | None]:
    raw = yield _Get()
    if raw is None or isinstance(raw, StoreError):
        return None
    return decide_checkpoint(raw, options.binding, max_payload_bytes=options.limit).checkpoint


def _swap(transition: Transition) -> Generator[_Request, Any, bool]:
    """Write ``transition.next``; True only once it is known to have landed (an unknown
    outcome is resolved by reading back: the record carries this call's own fence)."""
    answer = yield _Swap(transition)
    if not isinstance(answer, StoreError):
        return bool(answer)
    stored = yield _Get()
    return (
        stored is not None
        and not isinstance(stored, StoreError)
        and (dict(stored) == transition.next.to_dict())
    )


def _protocol(options: _Options) -> _Protocol:
    created = create_checkpoint(options.binding, created_at=options.clock())
    inserted = yield _Create(created)
    # The record this call knows to be stored, so it need not read it back: the one it
    # created, or the one its last swap landed. A stale guess only costs a lost CAS.
    known: Checkpoint | None = created if inserted is True else None
    ran = lost = False
    record: Checkpoint | None = None
    for _ in range(_ROUNDS):
        record = known if known is not None else (yield from _load(options))
        known = None
        if record is None:
            continue
        action = TABLE.statuses[record.status].action
        options.log("decided " + action, record)
        if action is Action.EXECUTE:
            claim = claim_execution(
                record,
                attempt_id=options.new_id(),
                at=options.clock(),
                max_payload_bytes=options.limit,
            )
            if not (yield from _swap(claim)):
                lost = True
                continue  # not landed: decide again (another worker may have won)
            ran = True
            stored = yield from _execute(options, claim)
            if not isinstance(stored, Checkpoint):
                return RunOutcome(stored, ran, claim.next)
            known = stored
            continue
        if action is Action.DELIVER:
            delivered = yield from _deliver(options, record, ran)
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
    options: _Options, claim: Transition
) -> Generator[_Request, Any, Checkpoint | RunStatus]:
    """Run the tool once and store its result: the stored record, or how the call ends."""
    assert claim.next.execution is not None
    attempt = claim.next.execution.attempt_id
    options.log("running the tool", claim.next)
    result = yield _RunTool()
    if isinstance(result, _ToolFailed):
        result = options.on_tool_error(result.error)
    try:
        done = complete_execution(
            claim.next,
            attempt_id=attempt,
            at=options.clock(),
            result=result,
            max_payload_bytes=options.limit,
        )
    except CheckpointError as error:
        reason = f"the tool's result could not be stored: {error.code}"
        doubt = mark_execution_uncertain(
            claim.next, attempt_id=attempt, at=options.clock(), reason=reason
        )
        yield from _swap(doubt)
        options.log("result refused; marked uncertain", doubt.next)
        return RunStatus.NEEDS_EXECUTION_RECONCILIATION
    for _ in range(_ROUNDS):
        if (yield from _swap(done)):
            options.log("stored the result", done.next)
            return done.next
    options.log("could not store the result", claim.next)
    return RunStatus.NEEDS_EXECUTION_RECONCILIATION


def _deliver(
    options: _Options, record: Checkpoint, ran: bool
) -> Generator[_Request, Any, RunOutcome | None]:
    """Claim the delivery, send, record the outcome; None when the claim did not land."""
    delivery_id = options.new_id()
    claim = claim_delivery(
        record, delivery_id=delivery_id, at=options.clock(), max_payload_bytes=options.limit
    )
    if not (yield from _swap(claim)):
        return None
    assert claim.next.result is not None
    sent = yield _Deliver(claim.next.result.payload)
    if isinstance(sent, _ToolFailed):  # a known failure to send: release, deliver later
        release = release_delivery(
            claim.next, delivery_id=delivery_id, at=options.clock(), max_payload_bytes=options.limit
        )
        released = yield from _swap(release)
        options.log("delivery failed; released" if released else "delivery failed", claim.next)
        if released:
            return RunOutcome(RunStatus.DELIVERY_FAILED, ran, release.next)
        return RunOutcome(RunStatus.NEEDS_DELIVERY_RECONCILIATION, ran, claim.next)
    finish = complete_delivery(
        claim.next, delivery_id=delivery_id, at=options.clock(), max_payload_bytes=options.limit
    )
    if not (yield from _swap(finish)):
        options.log("delivered, but could not record it", claim.next)
        return RunOutcome(RunStatus.NEEDS_DELIVERY_RECONCILIATION, ran, claim.next)
    options.log("delivered", finish.next)
    status = RunStatus.EXECUTED_AND_DELIVERED if ran else RunStatus.DELIVERED_STORED_RESULT
    return RunOutcome(status, ran, finish.next)


@dataclass(frozen=True, slots=True)
class _ToolFailed:
    """What a driver sends back when the tool or the delivery raised."""

    error: Exception


# --- the drivers -------------------------------------------------------------------------


def run_once(
    store: CheckpointStore,
    binding: Binding,
    tool: Callable[[], Any],
    deliver: Callable[[JSONValue], None],
    *,
    key: str | None = None,
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload,
    clock: Callable[[], str] = _now,
    new_id: Callable[[], str] = _new_id,
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
    options = _Options(binding, on_tool_error, clock, new_id, max_payload_bytes, logger)
    where = key or checkpoint_key(binding)
    protocol = _protocol(options)
    answer: Any = None
    try:
        while True:
            request = protocol.send(answer)
            answer = _perform(store, where, request, tool, deliver)
    except StopIteration as finished:
        outcome: RunOutcome = finished.value
        return outcome


def _perform(
    store: CheckpointStore,
    key: str,
    request: _Request,
    tool: Callable[[], Any],
    deliver: Callable[[JSONValue], None],
) -> Any:
    try:
        if isinstance(request, _Create):
            return store.create_if_absent(key, request.record)
        if isinstance(request, _Get):
            return store.get(key)
        if isinstance(request, _Swap):
            step = request.transition
            return store.compare_and_swap(key, step.expected_revision, step.next)
    except StoreError as error:
        return error
    try:
        return tool() if isinstance(request, _RunTool) else deliver(request.payload)
    except Exception as error:  # the tool's or the delivery's failure is an answer
        return _ToolFailed(error)


async def run_once_async(
    store: AsyncCheckpointStore,
    binding: Binding,
    tool: Callable[[], Awaitable[Any]],
    deliver: Callable[[JSONValue], Awaitable[None]],
    *,
    key: str | None = None,
    on_tool_error: Callable[[Exception], JSONValue] = default_error_payload,
    clock: Callable[[], str] = _now,
    new_id: Callable[[], str] = _new_id,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    logger: logging.Logger = LOGGER,
) -> RunOutcome:
    """The asyncio twin of :func:`run_once`: the same protocol, the same outcomes, on an
    :class:`AsyncCheckpointStore` with an async ``tool`` and ``deliver``."""
    options = _Options(binding, on_tool_error, clock, new_id, max_payload_bytes, logger)
    where = key or checkpoint_key(binding)
    protocol = _protocol(options)
    answer: Any = None
    try:
        while True:
            request = protocol.send(answer)
            answer = await _perform_async(store, where, request, tool, deliver)
    except StopIteration as finished:
        outcome: RunOutcome = finished.value
        return outcome


async def _perform_async(
    store: AsyncCheckpointStore,
    key: str,
    request: _Request,
    tool: Callable[[], Awaitable[Any]],
    deliver: Callable[[JSONValue], Awaitable[None]],
) -> Any:
    try:
        if isinstance(request, _Create):
            return await store.create_if_absent(key, request.record)
        if isinstance(request, _Get):
            return await store.get(key)
        if isinstance(request, _Swap):
            step = request.transition
            return await store.compare_and_swap(key, step.expected_revision, step.next)
    except StoreError as error:
        return error
    try:
        if isinstance(request, _RunTool):
            return await tool()
        return await deliver(request.payload)
    except Exception as error:  # the tool's or the delivery's failure is an answer
        return _ToolFailed(error)
