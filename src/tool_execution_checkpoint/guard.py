"""Guard a tool in one line: :func:`checkpointed`, for tools whose result the framework
hands to the model.

Inside an agent framework the host does not send the result itself: the tool returns it
and the framework delivers it. :func:`checkpointed` wraps the tool so that it runs at
most once per call id, through the same host protocol as :func:`~.runner.run_once`:
claim, run, store the exact result, then hand it back. The delivery phase is the
hand-back: ``delivered`` means the result was returned to the framework, not that the
model received it. Handing back has no effect outside the process, so a replay of the
same call id hands back the stored result again, whatever phase the record is in, and
never runs the tool.

What a call returns or raises:

- The tool ran in this call: what it returned (the live value), or what it raised,
  re-raised after its type was stored. Also when the store could not keep it within the
  write budget: the effect happened, so the framework gets it; the record is left for
  reconciliation and an ERROR line names its key.
- The tool ran in this call but an operator stored a result first: that stored result,
  the call's one answer (the outcome's reason says it was overtaken).
- A result is stored: the stored result, rebuilt by the :class:`ResultCodec` (the same
  type as the tool's return annotation); a stored error raises :class:`ToolRaisedEarlier`.
- No result to hand back: :class:`CallInFlight` (an attempt holds the claim: it may still
  be running, or its worker died), :class:`CallNeedsReconciliation` (the outcome is
  unknown: an operator settles it), :class:`CallResultPruned`, or
  :class:`CallStoreUnavailable`. Each carries the :class:`~.runner.RunOutcome`.
- The tool stopped before any effect (it raised one of ``not_run``, by default
  :class:`~.runner.ToolDidNotRun`): the exception, after the claim was released; the
  next call of the call id runs the tool.
- A stored record of another binding (the same call id with other arguments, tool or
  revision): :class:`~.errors.CheckpointError` BINDING_CONFLICT, never a cache hit.

The stored payload is an envelope: ``{"returned": <the encoded result>}`` or
``{"raised": {"type": "<exception type>"}}`` (an exception's message may hold secrets
and is not stored). An operator completing a stuck call writes the same shape.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, cast

from .codecs import JSONCodec, ResultCodec, rebuilt, result_codec, return_annotation
from .errors import CheckpointError, ErrorCode
from .fingerprint import arguments_fingerprint
from .identity import Claim, Intent, claim_identity, running_call
from .records import Binding
from .runner import (
    DEFAULT_NOT_RUN,
    DEFAULT_NOT_SENT,
    WRITE_BUDGET,
    Found,
    NotThere,
    ReconcileHook,
    RunOutcome,
    RunStatus,
    StuckCall,
    ToolOutcomeUnknown,
    run_once,
    run_once_async,
)
from .stores.core import AsyncCheckpointStore, CheckpointStore
from .table import TABLE, Status
from .validation import JSONValue

__all__ = [
    "CallInFlight",
    "CallNeedsReconciliation",
    "CallNotAnswered",
    "CallResultPruned",
    "CallStoreUnavailable",
    "ToolGuard",
    "ToolRaisedEarlier",
    "checkpointed",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

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


# --- the guard -----------------------------------------------------------------------------

_RETURNED = "returned"
_RAISED = "raised"


def _error_envelope(error: Exception) -> JSONValue:
    return {_RAISED: {"type": type(error).__name__}}


@dataclasses.dataclass(frozen=True)
class ToolGuard:
    """One tool's guard: what :func:`checkpointed` builds, and what an adapter that
    intercepts a framework's tool calls uses directly.

    Attributes:
        store: Where the checkpoints live.
        tool_name: The binding's tool name.
        namespace: The binding's namespace.
        revision: The binding's tool revision: change it when a stored result no longer
            fits the tool.
        codec: How the result is stored and rebuilt.
        pass_through: The tool's exceptions that are the framework's control flow: the
            execution is marked uncertain and the exception re-raised.
        not_run: The tool's exceptions that mean it stopped before any effect (a
            framework's interrupt or approval request raised before the tool acts;
            default :class:`~.runner.ToolDidNotRun`): the claim is released and the
            exception re-raised, so the next call of the same call id runs the tool.
        wait_seconds: How long a call that finds another attempt executing waits for it.
        poll_seconds: How often it reads while it waits.
        max_payload_bytes: The payload limit of each record.
        intent: The names of the arguments that identify the effect, as Powertools
            selects its key: a call whose other arguments differ (a reworded e-mail body)
            is the same call. None: every argument.
        write_budget: How long the result's write is retried once the tool has run (see
            :func:`~.runner.run_once`).
        reconcile: A hook asked about a call whose claim another attempt holds (see
            :func:`~.runner.run_once`); its :class:`~.runner.Found` and
            :class:`~.runner.NotThere` carry a value of the tool's return type, stored
            and handed back as the tool's result. A plain function, also for async tools.
    """

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

    def call(
        self,
        call_id: str | None,
        arguments: Mapping[str, object],
        tool: Callable[[], T],
        *,
        authoritative: bool = False,
    ) -> T:
        """Run ``tool`` at most once for this call and return its result (see the module
        docstring for what is returned and raised). ``call_id`` is the framework's id of
        the call, or None; :func:`~.identity.claim_identity` says which id is used (with
        ``authoritative``, always ``call_id``). An async store is refused: use
        :meth:`call_async` (in a framework, its async entry point)."""
        if inspect.iscoroutinefunction(getattr(self.store, "compare_and_swap", None)):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is async: a sync call cannot await it (use the async entry point)",
                field="store",
            )
        intent = self.intent_of(arguments)
        claim = claim_identity(intent, call_id, authoritative=authoritative)
        with _holding(claim, intent) as live:
            outcome = run_once(
                cast(CheckpointStore, self.store),
                self._binding(claim.call_id, intent),
                functools.partial(live.run, tool, self.codec, self.namespace, claim.call_id),
                _hand_back,
                **self._options(),
            )
            return cast(T, self._answer(outcome, live))

    async def call_async(
        self,
        call_id: str | None,
        arguments: Mapping[str, object],
        tool: Callable[[], Awaitable[T]],
        *,
        authoritative: bool = False,
    ) -> T:
        """The asyncio twin of :meth:`call`: ``tool()`` is awaited."""
        intent = self.intent_of(arguments)
        claim = claim_identity(intent, call_id, authoritative=authoritative)
        with _holding(claim, intent) as live:
            outcome = await run_once_async(
                self.store,
                self._binding(claim.call_id, intent),
                functools.partial(live.run_async, tool, self.codec, self.namespace, claim.call_id),
                _hand_back,
                **self._options(),
            )
            return cast(T, self._answer(outcome, live))

    def _options(self) -> dict[str, Any]:
        return {
            "on_tool_error": _error_envelope,
            "not_sent": DEFAULT_NOT_SENT,
            "pass_through": self.pass_through,
            "not_run": self.not_run,
            "wait_seconds": self.wait_seconds,
            "poll_seconds": self.poll_seconds,
            "max_payload_bytes": self.max_payload_bytes,
            "write_budget": self.write_budget,
            "reconcile": None if self.reconcile is None else self._reconcile,
        }

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

    def _answer(self, outcome: RunOutcome, live: _Live) -> Any:
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
        payload = outcome.payload
        if isinstance(payload, dict) and len(payload) == 1:
            if _RETURNED in payload:
                return rebuilt(self.codec, payload[_RETURNED])
            raised = payload.get(_RAISED)
            if isinstance(raised, dict) and isinstance(raised.get("type"), str):
                raise ToolRaisedEarlier(cast(str, raised["type"]))
        raise CheckpointError(
            ErrorCode.INVALID_CHECKPOINT,
            'is not {"returned": ...} or {"raised": {"type": ...}}',
            field="result.payload",
        )


def _hand_back(payload: JSONValue) -> None:
    """The framework delivers: the hand-back itself is the return from the guard."""


class _Live:
    """What the tool did in this call: its live value, or the exception it raised;
    whether that is a result the runner was given to store (not an unknown outcome); and
    whether the call was answered (a result handed back, live or stored)."""

    __slots__ = ("answered", "error", "produced", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: Exception | None = None
        self.produced = False
        self.answered = False

    def run(
        self, tool: Callable[[], Any], codec: ResultCodec[Any], namespace: str, call_id: str
    ) -> JSONValue:
        try:
            with running_call(namespace, call_id):
                self.value = tool()
        except ToolOutcomeUnknown:
            raise
        except Exception as error:
            self.error, self.produced = error, True
            raise
        return self._envelope(codec)

    async def run_async(
        self,
        tool: Callable[[], Awaitable[Any]],
        codec: ResultCodec[Any],
        namespace: str,
        call_id: str,
    ) -> JSONValue:
        try:
            with running_call(namespace, call_id):
                self.value = await tool()
        except ToolOutcomeUnknown:
            raise
        except Exception as error:
            self.error, self.produced = error, True
            raise
        return self._envelope(codec)

    def _envelope(self, codec: ResultCodec[Any]) -> JSONValue:
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
def _holding(claim: Claim, intent: Intent) -> Iterator[_Live]:
    """Hold the call's identity while it runs: a call that was not answered gives its
    occurrence back, and a refusal (CallNotAnswered, CheckpointError) is kept by the
    enclosing :func:`~.identity.call_scope`."""
    live = _Live()
    try:
        yield live
    except (CallNotAnswered, CheckpointError) as refusal:
        claim.release(intent, refusal)
        raise
    except BaseException:
        if not live.answered:
            claim.release(intent, None)
        raise


# --- the decorator -------------------------------------------------------------------------


def refuse_generator(tool: Callable[..., Any]) -> None:
    """Refuse a generator or async generator function as a tool: calling one runs none of
    its body, so the guard would store an iterator that is not the result.

    Raises:
        CheckpointError: INVALID_ARGUMENT on the field ``tool``.
    """
    if inspect.isgeneratorfunction(tool) or inspect.isasyncgenfunction(tool):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is a generator function, whose body runs only when it is iterated: "
            "return the result (a list of the items, say) instead",
            field="tool",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Snapshot:
    """A copy of a parameter's default taken when the tool was decorated."""

    value: object


def _declared_defaults(
    signature: inspect.Signature, left_out: frozenset[str]
) -> dict[str, _Snapshot]:
    """A deep copy of each mutable default, taken now: a call that uses the default is
    fingerprinted with it as declared, whatever the tool has done to the object since.
    A default that cannot be copied is fingerprinted as it is at the call."""
    snapshots: dict[str, _Snapshot] = {}
    for name, parameter in signature.parameters.items():
        default = parameter.default
        if name in left_out or default is inspect.Parameter.empty:
            continue
        if default is None or isinstance(default, str | bytes | int | float):
            continue  # immutable
        try:
            snapshots[name] = _Snapshot(copy.deepcopy(default))
        except Exception:  # an object deepcopy refuses: fingerprinted live
            continue
    return snapshots


def checkpointed(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    namespace: str = "default",
    name: str | None = None,
    revision: str = "1",
    call_id: Callable[[inspect.BoundArguments], str | None] | None = None,
    intent: Collection[str] | None = None,
    exclude: Collection[str] = (),
    codec: ResultCodec[Any] | None = None,
    pass_through: tuple[type[BaseException], ...] = (),
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.1,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    write_budget: float = WRITE_BUDGET,
    reconcile: ReconcileHook | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Guard a tool so that it runs at most once per call id::

        @checkpointed(store)
        def send_email(to: str, body: str) -> Receipt: ...

        with tool_call(tool_use.id):
            receipt = send_email(**tool_use.input)

    The wrapper has the tool's signature (frameworks read its schema from it) and is async
    when the tool is. Its binding is this call's id (see :mod:`~.identity`), the tool's
    ``name`` and ``revision``, and the fingerprint of the bound arguments named in
    ``intent`` (default: all but those in ``exclude``, a framework's context object), each
    default as it was declared (a default the tool has since mutated counts as declared).
    The module docstring lists what a call returns and raises.

    Args:
        store: A sync or async store (an async store needs an async tool).
        namespace: The binding's namespace.
        name: The binding's tool name (default: the function's ``__name__``).
        revision: The binding's tool revision.
        call_id: Reads the framework's call id from the bound arguments (a framework's
            context, say), or None; an enclosing :func:`~.identity.tool_call` or
            :func:`~.identity.call_scope`
            wins over it.
        intent: The parameters that identify the effect (see :class:`ToolGuard`); by
            default all of them.
        exclude: Parameters left out of the fingerprint.
        codec: How the result is stored and rebuilt (default: :func:`result_codec` of the
            return annotation).
        pass_through: See :class:`ToolGuard`.
        not_run: See :class:`ToolGuard`.
        wait_seconds: See :class:`ToolGuard`.
        poll_seconds: See :class:`ToolGuard`.
        max_payload_bytes: See :class:`ToolGuard`.
        write_budget: See :class:`ToolGuard`.
        reconcile: See :class:`ToolGuard`.

    Raises:
        CheckpointError: INVALID_ARGUMENT, when decorating, for a generator function, an
            ``exclude`` or ``intent`` name that is not a parameter or an async store with
            a sync tool;
            when calling, for a call with no call id; PAYLOAD_NOT_JSON for an argument the
            fingerprint cannot encode (:func:`~.fingerprint.canonical`), before it runs.
    """

    def decorate(tool: Callable[P, R]) -> Callable[P, R]:
        refuse_generator(tool)
        signature = inspect.signature(tool)
        for names, field in ((exclude, "exclude"), (intent or (), "intent")):
            unknown = set(names) - set(signature.parameters)
            if unknown:
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"names {len(unknown)} parameter(s) the tool does not have",
                    field=field,
                )
        is_async = inspect.iscoroutinefunction(tool)
        if not is_async and inspect.iscoroutinefunction(getattr(store, "compare_and_swap", None)):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is async and the tool is not: guard an async tool, or use a sync store",
                field="store",
            )
        guard = ToolGuard(
            store,
            tool_name=name or tool.__name__,
            namespace=namespace,
            revision=revision,
            codec=codec or result_codec(return_annotation(tool)),
            pass_through=pass_through,
            not_run=not_run,
            wait_seconds=wait_seconds,
            poll_seconds=poll_seconds,
            max_payload_bytes=max_payload_bytes,
            intent=None if intent is None else frozenset(intent),
            write_budget=write_budget,
            reconcile=reconcile,
        )
        left_out = frozenset(exclude)
        declared = _declared_defaults(signature, left_out)

        def bind(
            args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[str | None, dict[str, object]]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            identity = call_id(bound) if call_id is not None else None
            arguments: dict[str, object] = {}
            for key, given in bound.arguments.items():
                if key in left_out:
                    continue
                snapshot = declared.get(key)
                if snapshot is not None and given is signature.parameters[key].default:
                    arguments[key] = snapshot.value  # the default, as declared
                else:
                    arguments[key] = given
            return identity, arguments

        if is_async:
            run_async = cast(Callable[..., Awaitable[Any]], tool)

            @functools.wraps(tool)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                identity, arguments = bind(args, kwargs)
                return await guard.call_async(
                    identity, arguments, functools.partial(run_async, *args, **kwargs)
                )

            guarded_async.__checkpoint_guard__ = guard  # type: ignore[attr-defined]
            return cast(Callable[P, R], guarded_async)

        @functools.wraps(tool)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            identity, arguments = bind(args, kwargs)
            return guard.call(identity, arguments, functools.partial(tool, *args, **kwargs))

        guarded.__checkpoint_guard__ = guard  # type: ignore[attr-defined]
        return cast(Callable[P, R], guarded)

    return decorate
