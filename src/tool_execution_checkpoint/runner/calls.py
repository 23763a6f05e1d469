"""What both drivers share: one call's place in the machine (:class:`Call`), the checks of
the parts a host hands them, and how a store request is sent. Internal to the runner."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Final, TypeGuard

from ..errors import CheckpointError, ErrorCode
from ..identity import idempotency_key_of
from ..records import Checkpoint
from ..stores.core import AsyncCheckpointStore, CheckpointStore, checkpoint_key
from .machine import HostProtocol
from .state import CallState, Phase
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
    RunTool,
    StuckCall,
    Swap,
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


@dataclass(slots=True)
class Call:
    """One call's place in the machine, as both drivers keep it: the next request (or
    the outcome), the state, and what the tool or the delivery raised last."""

    protocol: HostProtocol
    key: str
    request: Request | RunOutcome
    state: CallState
    logger: logging.Logger
    caught: BaseException | None = None

    @classmethod
    def start(cls, protocol: HostProtocol, key: str | None) -> Call:
        """Start a call on a fresh token from the policy's ``new_id``."""
        policy = protocol.policy
        request, state = protocol.start(policy.new_id())
        key = key or checkpoint_key(protocol.binding)
        return cls(protocol, key, request, state, policy.logger)

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
    """What a sync tool or deliver returned; an awaitable (an async callable that the
    up-front check could not see) did not run: refused as not run or not sent."""
    if awaitable(value):
        close = getattr(value, "close", None)
        if callable(close):
            close()
        if isinstance(request, RunTool):
            return Raised(
                ToolOutcomeUnknown("the tool returned an awaitable run_once cannot await")
            )
        return Raised(DeliveryNotSent())
    return Returned(value) if isinstance(request, RunTool) else None


def store_operation(
    store: CheckpointStore | AsyncCheckpointStore, key: str, request: Request
) -> Any:
    """Send a store request: what the store returns (an awaitable from an async store)."""
    if isinstance(request, Create):
        return store.create_if_absent(key, request.record)
    if isinstance(request, Get):
        return store.get(key)
    assert isinstance(request, Swap)
    step = request.transition
    return store.compare_and_swap(key, step.expected_revision, step.next, durable=request.durable)
