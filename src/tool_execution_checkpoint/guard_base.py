"""The half of :class:`~.guard.ToolGuard` that does no I/O: what a call that cannot be
answered raises, the stored envelope, what the tool did in one call, and the guard's
fields with the answer it derives from an outcome. ``guard_calls_async`` (written) and
``guard_calls`` (generated from it) add the calls themselves."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from .codecs import JSONCodec, ResultCodec, rebuilt
from .errors import CheckpointError, ErrorCode
from .fingerprint import arguments_fingerprint
from .identity import Claim, Intent
from .records import Binding
from .runner import (
    DEFAULT_NOT_RUN,
    WRITE_BUDGET,
    CallPolicy,
    Found,
    HandBack,
    NotThere,
    ReconcileHook,
    RunOutcome,
    RunStatus,
    StuckCall,
    ToolOutcomeUnknown,
    call_policy,
    default_error_payload,
)
from .stores.core import AsyncCheckpointStore, CheckpointStore
from .table import TABLE, Status
from .validation import JSONValue

T = TypeVar("T")

Tool = Callable[[], T]
"""A tool bound to its arguments, run by a sync call."""

AsyncTool = Callable[[], Awaitable[T]]
"""A tool bound to its arguments, awaited by an async call."""

# --- what a call that cannot be answered raises --------------------------------------------


class CallNotAnswered(Exception):
    """The guarded call has no result to hand back. ``outcome`` says why; ``reason`` is
    the outcome's reason (never a payload)."""

    def __init__(self, outcome: RunOutcome) -> None:
        detail = f" ({outcome.reason})" if outcome.reason else ""
        super().__init__(f"the tool call was not answered: {outcome.status.value}{detail}")
        self.outcome = outcome
        self.reason = outcome.reason


class CallInFlight(CallNotAnswered):
    """An attempt holds the execution claim: its worker may still be running the tool or
    may have died. Call again later (or pass ``wait_seconds``); if its worker is known to be
    gone, an operator settles the record (``reconcile --mark-uncertain``)."""


class CallNeedsReconciliation(CallNotAnswered):
    """Whether the tool's effect happened is unknown (the record is uncertain, or the
    result could not be stored). Nothing runs the tool again; an operator settles it."""


class CallResultPruned(CallNotAnswered):
    """The call was delivered and its stored result has since been pruned."""


class CallStoreUnavailable(CallNotAnswered):
    """The store failed too often to finish; the record says what remains and nothing is
    done twice when the call is made again."""


class ToolRaisedEarlier(Exception):
    """The tool raised when this call first ran it; that exception's type was stored.

    Attributes:
        error_type: The exception's type name.
    """

    def __init__(self, error_type: str) -> None:
        super().__init__(f"the tool raised {error_type} when this call first ran it")
        self.error_type = error_type


GUARD_REFUSALS = (CallNotAnswered, CheckpointError)
"""What the guard raises when it refuses a call: nothing to hand back, or a call it will
not run (a binding conflict, a call with no id, bad arguments)."""

GUARD_ANSWERS = (*GUARD_REFUSALS, ToolRaisedEarlier)
"""What the guard raises of its own: a refusal, or a replay of a tool's stored exception."""

# --- the envelope and what the tool did ----------------------------------------------------

_RETURNED = "returned"
_RAISED = "raised"


def _error_envelope(error: Exception) -> JSONValue:
    return {_RAISED: {"type": type(error).__name__}}


def sync_store(store: CheckpointStore | AsyncCheckpointStore) -> CheckpointStore:
    """``store``, which a sync call can use.

    Raises:
        CheckpointError: INVALID_ARGUMENT on the field ``store`` for an async store.
    """
    if inspect.iscoroutinefunction(getattr(store, "compare_and_swap", None)):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is async: a sync call cannot await it (use the async entry point)",
            field="store",
        )
    return cast(CheckpointStore, store)


class Live:
    """What the tool did in this call: its live value, or the exception it raised;
    whether that is a result the runner was given to store (not an unknown outcome); and
    whether the call was answered (a result handed back, live or stored)."""

    __slots__ = ("answered", "error", "produced", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: Exception | None = None
        self.produced = False
        self.answered = False

    def envelope(self, codec: ResultCodec[Any]) -> JSONValue:
        """The stored form of the tool's value.

        Raises:
            ToolOutcomeUnknown: the codec refused the value (naming the error's type only).
        """
        failed: str | None = None
        try:
            encoded = codec.encode(self.value)
        except Exception as error:  # the effect happened; its result cannot be kept
            failed = type(error).__name__
        if failed is not None:
            # Raised outside the except: the encoder's error (a lone surrogate's
            # UnicodeEncodeError, pydantic's error) holds the result, so it is no context.
            raise ToolOutcomeUnknown(f"the result could not be encoded as JSON: {failed}")
        self.produced = True
        return {_RETURNED: encoded}


@contextmanager
def holding(claim: Claim, intent: Intent) -> Iterator[Live]:
    """Hold the call's identity while it runs: a call that was not answered gives its
    occurrence back, and a refusal (:data:`GUARD_REFUSALS`) is kept by the enclosing
    :func:`~.identity.call_scope`."""
    live = Live()
    try:
        yield live
    except GUARD_REFUSALS as refusal:
        claim.release(intent, refusal)
        raise
    except BaseException:
        if not live.answered:
            claim.release(intent, None)
        raise


# --- the call's policy ---------------------------------------------------------------------

_DEFAULTS: dict[str, Any] = {
    spec.name: spec.default for spec in dataclasses.fields(CallPolicy) if spec.init
}

_OPTIONS = (
    "pass_through",
    "not_run",
    "wait_seconds",
    "poll_seconds",
    "max_payload_bytes",
    "write_budget",
    "reconcile",
)
"""The fields of a guard that are :class:`~.runner.CallPolicy`'s."""


def policy_with(policy: CallPolicy | None, **options: Any) -> CallPolicy:
    """``policy`` (or the default one) with ``options``, fields of
    :class:`~.runner.CallPolicy`: an option left at the policy's default takes the policy's
    value; one set to another value must hold the policy's own, as a keyword given to
    :func:`~.runner.run_once` with a policy must.

    Raises:
        CheckpointError: as :func:`~.runner.call_policy` (an option that conflicts with
            the policy, a policy that is not a CallPolicy, an option CallPolicy refuses).
        TypeError: for a name that is not an option.
    """
    given = {
        name: value
        for name, value in options.items()
        if name not in _DEFAULTS or value != _DEFAULTS[name]
    }
    return call_policy(policy, given)


def framework_policy(
    policy: CallPolicy | None,
    *,
    control_flow: tuple[type[BaseException], ...] = (),
    before_effect: tuple[type[BaseException], ...] = (),
    **options: Any,
) -> CallPolicy:
    """The policy an adapter's guard runs under: :func:`policy_with` of ``policy`` and
    ``options``, with the framework's ``control_flow`` exceptions added to its
    ``pass_through`` and its ``before_effect`` ones to its ``not_run``."""
    given = policy_with(policy, **options)
    return dataclasses.replace(
        given,
        pass_through=(*given.pass_through, *control_flow),
        not_run=(*given.not_run, *before_effect),
    )


# --- the guard's fields and its answers ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GuardBase:
    """The fields of :class:`~.guard.ToolGuard` (documented there) and what it derives from
    them without I/O: the policy its calls run under (built once, when the guard is),
    a call's binding, and the answer to an outcome."""

    store: CheckpointStore | AsyncCheckpointStore
    tool_name: str
    namespace: str = "default"
    revision: str = "1"
    codec: ResultCodec[Any] = dataclasses.field(default_factory=JSONCodec)
    pass_through: tuple[type[BaseException], ...] = ()
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN
    wait_seconds: float = 0.0
    poll_seconds: float = 0.1
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes
    intent: frozenset[str] | None = None
    write_budget: float = WRITE_BUDGET
    reconcile: ReconcileHook | None = None
    policy: CallPolicy | None = None
    _run_policy: CallPolicy = dataclasses.field(init=False, repr=False, compare=False)
    hand_back: HandBack = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        policy = policy_with(self.policy, **{name: getattr(self, name) for name in _OPTIONS})
        if policy.on_tool_error is not default_error_payload:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is the guard's own: it stores the type of the tool's exception",
                field="on_tool_error",
            )
        for name in _OPTIONS:  # each option as the call runs with it
            object.__setattr__(self, name, getattr(policy, name))
        hook = None if policy.reconcile is None else self._reconcile
        run = dataclasses.replace(policy, on_tool_error=_error_envelope, reconcile=hook)
        object.__setattr__(self, "_run_policy", run)
        object.__setattr__(self, "hand_back", HandBack(self.readable))

    def intent_of(self, arguments: Mapping[str, object]) -> Intent:
        """The intent of one call: this tool, its revision and the :func:`~.fingerprint.
        arguments_fingerprint` of the arguments that identify the effect (those named
        in ``intent``, or all of them).

        Raises:
            CheckpointError: as :func:`~.fingerprint.canonical`, before anything runs.
        """
        chosen = arguments
        if self.intent is not None:
            chosen = {name: value for name, value in arguments.items() if name in self.intent}
        return Intent(self.tool_name, self.revision, arguments_fingerprint(chosen))

    def binding(self, call_id: str, arguments: Mapping[str, object]) -> Binding:
        """The binding of one call under ``call_id``: this tool and its intent."""
        return self._binding(call_id, self.intent_of(arguments))

    def _binding(self, call_id: str, intent: Intent) -> Binding:
        return Binding(
            namespace=self.namespace,
            call_id=call_id,
            tool_name=intent.tool_name,
            tool_revision=intent.revision,
            input_fingerprint=intent.fingerprint,
        )

    def _reconcile(self, stuck: StuckCall) -> Found | NotThere | None:
        """The hook's answer, its value stored as the tool's result would be."""
        assert self.reconcile is not None
        answer = self.reconcile(stuck)
        if inspect.iscoroutine(answer):
            answer.close()
            raise TypeError("the guard's reconcile hook must be a plain function")
        if isinstance(answer, Found | NotThere):
            return type(answer)({_RETURNED: self.codec.encode(answer.payload)})
        return answer

    def _answer(self, outcome: RunOutcome, live: Live) -> Any:
        unstored = outcome.unstored is not None  # this call's result, not known stored
        live.answered = outcome.has_payload or unstored
        stored_is_ours = outcome.ran_tool and live.produced and not unstored
        if outcome.has_payload and not stored_is_ours:
            return self._stored(outcome)  # the call's one answer, stored by another
        if outcome.has_payload or unstored:  # this call's result, stored or not
            if live.error is not None:
                raise live.error
            return live.value
        record = outcome.record
        if outcome.status is RunStatus.STORE_UNAVAILABLE:
            raise CallStoreUnavailable(outcome)
        if record is not None and record.status is Status.EXECUTING:
            raise CallInFlight(outcome)
        if record is not None and record.status is Status.DELIVERED:
            raise CallResultPruned(outcome)
        raise CallNeedsReconciliation(outcome)

    def _stored(self, outcome: RunOutcome) -> Any:
        return self._read(outcome.payload)

    def readable(self, payload: JSONValue) -> bool:
        """Whether a stored ``payload`` is an answer this guard can give (checked before a
        payload found stored is handed back and recorded delivered)."""
        try:
            self._read(payload)
        except ToolRaisedEarlier:
            return True
        except CheckpointError:
            return False
        return True

    def _read(self, payload: JSONValue) -> Any:
        """The answer a stored payload gives: the value ``{"returned": VALUE}`` rebuilds
        as; ToolRaisedEarlier for ``{"raised": {"type": TYPE}}`` or the runner's and the
        operators' error payload, ``{"error": {"type": TYPE}}``."""
        if isinstance(payload, dict) and len(payload) == 1:
            if _RETURNED in payload:
                return rebuilt(self.codec, payload[_RETURNED])
            raised = payload.get(_RAISED, payload.get("error"))
            if isinstance(raised, dict) and isinstance(raised.get("type"), str):
                raise ToolRaisedEarlier(cast(str, raised["type"]))
        raise CheckpointError(
            ErrorCode.INVALID_CHECKPOINT,
            'is not {"returned": ...}, {"raised": {"type": ...}} or {"error": {"type": ...}}: '
            "the record is left completed for an operator",
            field="result.payload",
        )
