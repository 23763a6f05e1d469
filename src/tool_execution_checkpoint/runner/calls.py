"""What both drivers share: one call's place in the machine (:class:`Call`), the checks of
the parts a host hands them, and how a store request is sent. Internal to the runner."""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Final, TypeGuard, cast

from ..errors import CheckpointError, ErrorCode
from ..identity import idempotency_key_of
from ..records import Checkpoint
from ..stores.core import AsyncCheckpointStore, CheckpointStore, checkpoint_key
from ..table import Status
from ..telemetry import CallTrace, StoreOperation, call_started
from .machine import HostProtocol
from .state import RESENDABLE, CallState, Phase
from .vocabulary import (
    Create,
    Deliver,
    DeliveryNotSent,
    Found,
    Get,
    NotThere,
    Raised,
    Request,
    Returned,
    RunOutcome,
    RunStatus,
    RunTool,
    StoreFault,
    StuckCall,
    Swap,
    ToolDidNotRun,
    ToolOutcomeUnknown,
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


_SETTLES: Final = RESENDABLE | {Phase.RESTORE, Phase.CONFIRM, Phase.PAUSE}
"""The phases whose request settles what a call holds: a write over its own claim, the
record restored under its own attempt, and the read-backs of a write and their pauses."""

_HELD: Final = _SETTLES | {Phase.RUN, Phase.SEND}
"""The phases a call that stops settling leaves something of its own in: a claim that
landed for a tool not run or a payload not sent, or a write not settled."""

_LEFT: Final = frozenset(
    {
        RunStatus.STORE_UNAVAILABLE,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
    }
)
"""The outcomes that leave the record to reconcile (a caller told of them acts on them)."""


@dataclass(slots=True)
class Call:
    """One call's place in the machine, as both drivers keep it: the next request (or
    the outcome), the state, what the tool or the delivery raised last, whether a
    cancellation was settled (:meth:`interrupted`), and its span (:mod:`~.telemetry`;
    None without OpenTelemetry)."""

    protocol: HostProtocol
    key: str
    request: Request | RunOutcome
    state: CallState
    logger: logging.Logger
    caught: BaseException | None = None
    settled: bool = False
    trace: CallTrace | None = None

    @classmethod
    def start(cls, protocol: HostProtocol, key: str | None, store: object) -> Call:
        """Start a call on a fresh token from the policy's ``new_id`` (and its span, on
        ``store``, the one the host passed)."""
        policy = protocol.policy
        request, state = protocol.start(policy.new_id())
        key = key or checkpoint_key(protocol.binding)
        trace = call_started(protocol.binding, key, store)
        return cls(protocol, key, request, state, policy.logger, trace=trace)

    def watch(self, request: Request, *, post: bool) -> StoreOperation | None:
        """The span of the store operation ``request`` starting now, sent unanswered when
        ``post`` (None without OpenTelemetry): the driver ends it with the answer."""
        if self.trace is None:
            return None
        assert isinstance(request, Create | Get | Swap)  # the driver's store requests
        name = "post" if post else _OPERATIONS[type(request)]
        return self.trace.operation(name, request)

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
            self._unstored(self.request)
        trace, self.trace = self.trace, None  # its span ends once
        if trace is not None:
            trace.finished(self.request)
        if self.state.reraise and self.caught is not None:
            raise self.caught
        return self.request

    def _unstored(self, outcome: RunOutcome) -> None:
        self.logger.error("%s: key=%s", outcome.reason, self.key)

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

    def interrupted(self) -> bool:
        """A cancellation interrupted the last request, a store operation or a pause:
        whether the call holds a claim or a write to settle before the cancellation
        propagates (:meth:`settling` then gives the requests). An interrupted write may
        have landed: the machine is told that its outcome is unknown, and reads it back."""
        if isinstance(self.request, Create | Swap):
            self.answer(StoreFault())
        self.settled = self.state.phase in _SETTLES
        return self.settled

    def settling(self) -> Request | None:
        """The next request that settles what the call holds after a cancellation; None
        once it holds nothing (a claim of its own that did not land is not tried again)
        or the call is finished. Nothing runs or is sent after a cancellation: a claim
        that landed for the tool is answered as a tool that did not run
        (:class:`ToolDidNotRun`) and a delivery claim as a payload not sent
        (:class:`DeliveryNotSent`): the machine always releases either."""
        while True:
            request = self.request
            if isinstance(request, RunTool):
                self.answer(Raised(ToolDidNotRun()))
            elif isinstance(request, Deliver):
                self.answer(Raised(DeliveryNotSent()))
            elif isinstance(request, RunOutcome) or self.state.phase not in _SETTLES:
                return None
            else:
                return request

    def abandoned(self) -> None:
        """The driver is leaving before the call's outcome (cancelled, or an error it does
        not answer): say at ERROR what it leaves that no outcome reports: the tool's
        result not stored, or a claim of this call to reconcile. Called in the driver's
        ``except``: the error it leaves with ends the call's span."""
        request, state = self.request, self.state
        trace, self.trace = self.trace, None  # its span ends once
        if trace is not None:
            trace.abandoned(sys.exception(), state.ran)
        if isinstance(request, RunOutcome) and request.unstored is not None:
            self._unstored(request)
        elif Phase.STORE in (state.phase, state.writing) or state.unstored is not None:
            self.logger.error(
                "the tool ran but its result was not stored before the call ended: "
                "key=%s is left executing for reconciliation",
                self.key,
            )
        elif self._leaves_claim():
            self.logger.error(
                "the call ended without settling a claim it may hold: "
                "key=%s is left for reconciliation",
                self.key,
            )

    def _leaves_claim(self) -> bool:
        request, state = self.request, self.state
        if isinstance(request, RunOutcome):  # settled to an end: as its outcome says
            record = request.record
            doubt = record is not None and record.status is Status.UNCERTAIN  # marked
            return request.status in _LEFT and not doubt
        if self.settled:  # stopped at a claim it could not release, or while settling
            return state.phase in _HELD
        return state.pending is not None  # a write of unknown outcome


_OPERATIONS: Final = {Create: "create", Get: "get", Swap: "swap"}
"""Each store request's operation name, as the telemetry records it."""

CALLS: Final = (RunTool, Deliver)
"""The requests a driver answers by calling the tool or ``deliver``."""

_NEVER_AWAITABLE: Final = frozenset({type(None), bool, int, float, str, list, dict})
"""Exact types whose values are never awaitable (a subclass may be: it is asked)."""


def awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable(value)``; a value of a type in ``_NEVER_AWAITABLE`` is not
    awaitable without asking."""
    return type(value) not in _NEVER_AWAITABLE and inspect.isawaitable(value)


_STORE_METHODS = ("create_if_absent", "get", "compare_and_swap")


def check_parts(store: object, tool: object, deliver: object) -> None:
    """Refuse a store without the store methods or whose ``compare_and_swap`` takes no
    ``durable`` keyword (a store written for the contract before it had one, which would
    fail only after the tool ran), or a tool or deliver that cannot be called, before
    anything is stored."""
    for method in _STORE_METHODS:
        if not callable(getattr(store, method, None)):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must have create_if_absent, get and compare_and_swap",
                field="store",
            )
    swap = cast(Any, store).compare_and_swap
    if not _takes_durable(getattr(swap, "__func__", swap)):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "its compare_and_swap must take the keyword durable (the store contract)",
            field="store",
        )
    for name, part in (("tool", tool), ("deliver", deliver)):
        if not callable(part):
            raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be callable", field=name)


def _reads_durable(swap: Callable[..., Any]) -> bool:
    """Whether ``swap`` (a store's compare_and_swap, its function where it is a method)
    takes the keyword ``durable``; True where its signature cannot be read."""
    try:
        parameters = inspect.signature(swap).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == "durable" and p.kind is not p.POSITIONAL_ONLY)
        for p in parameters
    )


_read_once = functools.lru_cache(maxsize=256)(_reads_durable)


def _takes_durable(swap: Callable[..., Any]) -> bool:
    """:func:`_reads_durable`, read once per function (an unhashable callable each time)."""
    try:
        return _read_once(swap)
    except TypeError:
        return _reads_durable(swap)


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


def blocking(store: Any) -> bool:
    """Whether ``store`` is a sync store (its ``compare_and_swap`` is not a coroutine
    function, as :func:`refuse_async` asks): one that run_once takes."""
    return not _is_async(store.compare_and_swap)


def refuse_async(
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


def hook_answer(value: object) -> Any:
    """What the reconcile hook returned, as the machine's answer (an awaitable a sync
    driver cannot await is closed)."""
    if value is None or isinstance(value, Found | NotThere):
        return value
    close = getattr(value, "close", None) if awaitable(value) else None
    if callable(close):
        close()
    return Raised(TypeError("the reconcile hook returned neither Found, NotThere nor None"))


def sync_answer(request: RunTool | Deliver, value: object) -> Any:
    """What a sync tool or deliver returned. An awaitable (from an async callable that
    the up-front check could not see) is closed when it can be: the tool's marks the
    execution uncertain; deliver's is not sent only when it is a coroutine that had not
    started (closed, it never runs), and a send of unknown outcome otherwise (a task or
    a future already scheduled may send)."""
    if not awaitable(value):
        return Returned(value) if isinstance(request, RunTool) else None
    unstarted = inspect.iscoroutine(value) and (
        inspect.getcoroutinestate(value) == inspect.CORO_CREATED
    )
    close = getattr(value, "close", None)
    if callable(close):
        close()
    if isinstance(request, RunTool):
        return Raised(ToolOutcomeUnknown("the tool returned an awaitable run_once cannot await"))
    if unstarted:
        return Raised(DeliveryNotSent())
    return Raised(TypeError("deliver returned an awaitable run_once cannot await"))


def store_operation(
    store: CheckpointStore | AsyncCheckpointStore, key: str, request: Request, *, post: bool = False
) -> Any:
    """Send a store request: what the store returns (an awaitable from an async store).
    With ``post`` (see :func:`posts`) a swap goes through ``post_compare_and_swap``."""
    if isinstance(request, Create):
        return store.create_if_absent(key, request.record)
    if isinstance(request, Get):
        return store.get(key)
    assert isinstance(request, Swap)
    step = request.transition
    if post:
        send = store.post_compare_and_swap  # type: ignore[union-attr]
        return send(key, step.expected_revision, step.next)
    return store.compare_and_swap(key, step.expected_revision, step.next, durable=request.durable)


def posts(store: object, request: Request) -> bool:
    """Whether ``request`` is a non-durable swap that ``store`` can send without waiting
    for its answer (:class:`~.stores.core.PostingStore`): its answer, None, is
    :class:`~.vocabulary.Posted` then."""
    return (
        isinstance(request, Swap)
        and not request.durable
        and callable(getattr(store, "post_compare_and_swap", None))
    )
