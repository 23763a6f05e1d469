"""Guard a tool in one line: :func:`checkpointed`, for tools whose result the framework
hands to the model.

Inside an agent framework the host does not send the result itself: the tool returns it
and the framework delivers it. :func:`checkpointed` wraps the tool so that it runs at
most once per call id, through the same host protocol as :func:`~.runner.run_once` with
a :class:`~.runner.HandBack` as its delivery (it reads a payload found stored before
handing it back): two writes, the claim (``create_claimed``) before the tool runs and
the exact result recorded delivered in one swap (``complete_and_deliver``), then the
hand-back. ``delivered`` means the result was
returned to the framework, not that the model received it. Handing back has no effect
outside the process, so a replay of the same call id hands back the stored result again,
whatever phase the record is in, and never runs the tool.

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

The call options are one :class:`~.runner.CallPolicy`, built once per guard (see
:class:`ToolGuard`). Why the guard answers as it does, and how its I/O is written once for
asyncio with the sync side generated: ``docs/guard.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Collection
from typing import Any, ParamSpec, TypeVar, cast

from .codecs import ResultCodec, result_codec, return_annotation
from .errors import CheckpointError, ErrorCode
from .guard_base import (
    CallInFlight,
    CallNeedsReconciliation,
    CallNotAnswered,
    CallResultPruned,
    CallStoreUnavailable,
    ToolRaisedEarlier,
)
from .guard_calls import GuardCalls, guarded_function
from .guard_calls_async import AsyncGuardCalls, guarded_function_async
from .runner import DEFAULT_NOT_RUN, WRITE_BUDGET, CallPolicy, ReconcileHook
from .stores.core import AsyncCheckpointStore, CheckpointStore
from .table import TABLE

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

# --- the guard -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToolGuard(GuardCalls, AsyncGuardCalls):
    """One tool's guard: what :func:`checkpointed` builds, and what an adapter that
    intercepts a framework's tool calls uses directly. :meth:`call` runs a sync tool
    (with a sync store), :meth:`call_async` awaits an async one (with either store).

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
        policy: The call options as one :class:`~.runner.CallPolicy` (its ``clock``,
            ``logger``, ... too), or None. The option fields above are its fields: one
            left at its default takes the policy's value, one set otherwise must hold
            the policy's own; once the guard is built, each holds the value its calls
            run with. The guard stores its own envelope, so the policy's
            ``on_tool_error`` stays the default.

    Raises:
        CheckpointError: INVALID_ARGUMENT, when built, for an option the policy refuses
            (see :class:`~.runner.CallPolicy`), an option field that conflicts with
            ``policy``, or a policy with its own ``on_tool_error``.
    """


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
    policy: CallPolicy | None = None,
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
        policy: The call options as one :class:`~.runner.CallPolicy`, built once and
            shared by the tool's calls (see :class:`ToolGuard`).

    Raises:
        CheckpointError: INVALID_ARGUMENT, when decorating, for a generator function, an
            ``exclude`` or ``intent`` name that is not a parameter, an async store with
            a sync tool, or options :class:`ToolGuard` refuses;
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
            policy=policy,
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

        wrap = guarded_function_async if is_async else guarded_function
        return cast(Callable[P, R], wrap(guard, tool, bind))

    return decorate
