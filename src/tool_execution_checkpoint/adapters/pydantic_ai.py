"""pydantic-ai: one capability guards the tools of an agent (extra ``pydantic-ai``).

::

    from tool_execution_checkpoint.adapters.pydantic_ai import Checkpointed

    agent = Agent(model, tools=[send_email, lookup], capabilities=[
        Checkpointed(store, tools={"send_email"}),  # guard the effect, not the read
    ])

:class:`Checkpointed` wraps each leaf toolset of the run (function tools, MCP servers, ...)
in a :class:`CheckpointedToolset`, whose ``call_tool`` runs the guarded tools through a
:class:`~tool_execution_checkpoint.ToolGuard`; a tool outside ``tools=`` runs as if the
capability were absent. A toolset can be guarded alone:
``Agent(model, toolsets=[CheckpointedToolset(toolset, store=store)])``. Why each choice,
with the facts from ``pydantic-ai-slim`` 2.68.0: ``docs/frameworks.md``.

**The call id** is :func:`default_call_id`, ``<conversation id>/<response timestamp>/<tool
call id>``: the model response that made the call, the same when a resume from the stored
messages or with ``deferred_tool_results`` runs its calls again. A turn run again from
its start asks the model again, and its new response is a new call: wrap the turn and its
re-run in :func:`~tool_execution_checkpoint.call_scope` named for the turn. An enclosing
``tool_call`` or ``call_scope`` wins over ``call_id``.

**Intent.** The fingerprint is :func:`~tool_execution_checkpoint.fingerprint.
arguments_fingerprint` of the validated arguments (a ``SecretStr`` by the digest of its
value), or of those ``intent=`` names for the tool; the ``RunContext`` is never among them.

**Control flow.** ``CallDeferred``, ``ApprovalRequired`` and ``SkipToolExecution``
(:data:`NOT_RUN`), and the ``not_run=`` exceptions, say the tool stopped before any
effect: the claim is released and the exception re-raised, so the next run of the call
runs the tool (a transient error of a read, such as ``TimeoutError``, belongs there).
``ModelRetry`` and ``ToolFailed`` (:data:`CONTROL_FLOW`) may follow an effect: the
execution is marked uncertain and they pass through; the model's next call is a new
call. Any other exception of the tool is stored as its type and re-raised; a replay
raises :class:`~tool_execution_checkpoint.ToolRaisedEarlier`.

**Refusals end the run.** :class:`~tool_execution_checkpoint.CallNotAnswered` and
:class:`~tool_execution_checkpoint.CheckpointError` (a BINDING_CONFLICT, say) reach the
host; when a capability's ``on_tool_execute_error`` turns one into a tool result,
:class:`Checkpointed` raises it before the next model request and at the end of the
run, so the model is never asked to retry it.

**Results.** A function tool's result is stored by :func:`~tool_execution_checkpoint.
result_codec` of its return annotation, so a replay hands pydantic-ai the type the
function returned; other tools' results (MCP) are stored as JSON.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Collection, Mapping
from datetime import UTC
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    SkipToolExecution,
    ToolFailed,
)
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_ai.toolsets.function import FunctionToolsetTool

from ..codecs import ResultCodec, result_codec
from ..errors import CheckpointError, ErrorCode
from ..guard import ToolGuard
from ..guard_base import GUARD_REFUSALS, framework_policy
from ..runner import CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore

__all__ = ["CONTROL_FLOW", "NOT_RUN", "Checkpointed", "CheckpointedToolset", "default_call_id"]

NOT_RUN: tuple[type[BaseException], ...] = (CallDeferred, ApprovalRequired, SkipToolExecution)
"""The exceptions by which a tool says it is not run now (deferred, awaiting approval,
skipped): the claim is released and they are re-raised, so the resume runs the tool."""

CONTROL_FLOW: tuple[type[BaseException], ...] = (ModelRetry, ToolFailed)
"""The exceptions a tool raises to steer pydantic-ai after it may have acted: passed
through after the execution is marked uncertain, never stored."""

CallIdHook = Callable[[RunContext[Any]], str | None]
"""Gives the framework id of the call ``ctx`` runs, or None (then an enclosing
``tool_call`` or ``call_scope`` must name it)."""


def _refused(reason: str) -> CheckpointError:
    return CheckpointError(
        ErrorCode.INVALID_ARGUMENT, f"{reason}: pass call_id= to name the call", field="call_id"
    )


def _stamp(response: ModelResponse) -> str:
    """The response's timestamp to the microsecond (in UTC when it has an offset)."""
    moment = response.timestamp
    if moment.tzinfo is not None:
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


def default_call_id(ctx: RunContext[Any]) -> str:
    """``<conversation id>/<response timestamp>/<tool call id>`` of the call ``ctx`` runs
    (see the module docstring).

    Raises:
        CheckpointError: INVALID_ARGUMENT when ``ctx`` names no conversation or tool call,
            when no model response in ``ctx.messages`` holds the call, or when the
            response holding it cannot be told apart (it holds the id twice, or an
            earlier response holding the id has the same timestamp).
    """
    if ctx.conversation_id is None or ctx.tool_call_id is None:
        raise _refused("is missing: the RunContext names no conversation or tool call")
    holders: list[tuple[ModelResponse, int]] = []  # the responses holding the id, and how often
    for message in ctx.messages:
        if isinstance(message, ModelResponse):
            count = sum(
                1
                for part in message.parts
                if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id
            )
            if count:
                holders.append((message, count))
    if not holders:
        raise _refused("is unknown: no model response in the run's messages made this call")
    response, count = holders[-1]  # pydantic-ai runs the calls of the latest response
    stamp = _stamp(response)
    if count > 1 or any(_stamp(other) == stamp for other, _ in holders[:-1]):
        raise _refused("is ambiguous: two calls of the conversation share this tool call id")
    return f"{ctx.conversation_id}/{stamp}/{ctx.tool_call_id}"


def _codec(toolset: AbstractToolset[Any], name: str, tool: ToolsetTool[Any]) -> ResultCodec[Any]:
    """The result codec of a function tool's return annotation; JSON for any other tool."""
    if not isinstance(toolset, FunctionToolset) or not isinstance(tool, FunctionToolsetTool):
        return result_codec(Any)
    function_tool = toolset.tools.get(tool.original_name or name)
    if function_tool is None:
        return result_codec(Any)
    try:
        annotation = typing.get_type_hints(function_tool.function).get("return", Any)
    except Exception:  # an unresolvable annotation: the result is stored as JSON
        annotation = Any
    return result_codec(annotation)


def _names(value: object, field: str) -> frozenset[str]:
    """A collection of names as a frozenset; a bare string is refused (it would be read
    as its characters)."""
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "is not a collection of names", field=field
        )
    if not all(isinstance(name, str) for name in value):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "holds a name that is not a str", field=field
        )
    return frozenset(value)


def _intents(intent: Mapping[str, Collection[str]]) -> dict[str, frozenset[str]]:
    if not isinstance(intent, Mapping):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "is not a mapping of tool names", field="intent"
        )
    return {str(tool): _names(names, "intent") for tool, names in intent.items()}


class _Refusals:
    """The refusals of one run's guarded calls, kept so that a refusal a capability turned
    into a tool result still ends the run."""

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def raise_first(self) -> None:
        if self.errors:
            raise self.errors[0]


@dataclasses.dataclass
class CheckpointedToolset(WrapperToolset[Any]):
    """A toolset whose guarded tools run at most once per call.

    Attributes:
        store: Where the checkpoints live.
        namespace: The bindings' namespace.
        revision: The bindings' tool revision (change it when stored results no longer
            fit the tools).
        tools: The names of the tools to guard (the names their toolset holds them
            under, before any prefix); None guards every tool. Other tools run unguarded.
        call_id: Gives the framework id of a call from its ``RunContext`` (default
            :func:`default_call_id`); an enclosing ``tool_call`` or ``call_scope`` wins.
        intent: Per tool name, the arguments that identify its effect (default: all).
        not_run: More exceptions raised before any effect (a read's ``TimeoutError``):
            never stored, the next run of the call runs the tool. Added to :data:`NOT_RUN`.
        options: More :class:`~tool_execution_checkpoint.ToolGuard` fields
            (``wait_seconds``, ``poll_seconds``, ``max_payload_bytes``).
        policy: The call options as one :class:`~tool_execution_checkpoint.CallPolicy`
            (``write_budget``, ``reconcile``, ...), or None; ``options`` are its fields
            (see :class:`~tool_execution_checkpoint.ToolGuard`). :data:`CONTROL_FLOW` is
            added to its ``pass_through``, and :data:`NOT_RUN` with ``not_run`` to its
            ``not_run`` (with no policy, those two alone are the tool's not-run
            exceptions).
        refusals: Where :class:`Checkpointed` collects the run's refusals (None alone).

    Raises:
        CheckpointError: INVALID_ARGUMENT, when built, for ``tools`` or ``intent`` that is
            not names; at a call, for an ``intent`` name the tool's parameters lack, and
            as :meth:`~tool_execution_checkpoint.ToolGuard.call_async` (before the tool runs
            for a call with no id or arguments the fingerprint cannot encode).
    """

    store: CheckpointStore | AsyncCheckpointStore = dataclasses.field(kw_only=True)
    namespace: str = dataclasses.field(default="pydantic-ai", kw_only=True)
    revision: str = dataclasses.field(default="1", kw_only=True)
    tools: Collection[str] | None = dataclasses.field(default=None, kw_only=True)
    call_id: CallIdHook = dataclasses.field(default=default_call_id, kw_only=True)
    intent: Mapping[str, Collection[str]] = dataclasses.field(default_factory=dict, kw_only=True)
    not_run: tuple[type[BaseException], ...] = dataclasses.field(default=(), kw_only=True)
    options: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)
    policy: CallPolicy | None = dataclasses.field(default=None, kw_only=True)
    refusals: _Refusals | None = dataclasses.field(default=None, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        self._guarded = None if self.tools is None else _names(self.tools, "tools")
        self._intents = _intents(self.intent)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        own_name = (
            tool.original_name
            if isinstance(tool, FunctionToolsetTool) and tool.original_name
            else name
        )
        if self._guarded is not None and own_name not in self._guarded:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        try:
            return await self._guarded_call(own_name, name, tool_args, ctx, tool)
        except GUARD_REFUSALS as refusal:
            if self.refusals is not None:
                self.refusals.errors.append(refusal)
            raise

    async def _guarded_call(
        self,
        own_name: str,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        intent = self._intents.get(own_name)
        if intent is not None:
            parameters = tool.tool_def.parameters_json_schema.get("properties", {})
            if not intent <= set(parameters):
                raise CheckpointError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"names {len(intent - set(parameters))} argument(s) the tool does not take",
                    field="intent",
                )
        not_run = (*NOT_RUN, *self.not_run)
        policy = framework_policy(
            self.policy, control_flow=CONTROL_FLOW, before_effect=not_run, **self.options
        )
        if self.policy is None:  # NOT_RUN and not_run alone, as without a policy before
            policy = dataclasses.replace(policy, not_run=not_run)
        guard = ToolGuard(
            self.store,
            tool_name=own_name,
            namespace=self.namespace,
            revision=self.revision,
            codec=_codec(self.wrapped, name, tool),
            intent=intent,
            policy=policy,
        )
        return await guard.call_async(
            self.call_id(ctx),
            tool_args,
            lambda: self.wrapped.call_tool(name, tool_args, ctx, tool),
        )


@dataclasses.dataclass
class Checkpointed(AbstractCapability[Any]):
    """Guard the agent's tools (all, or those named in ``tools``): each leaf toolset of a
    run is wrapped in a :class:`CheckpointedToolset` with these fields (output tools are
    not tools the model's calls run). A refusal of a guarded call ends the run even when
    another capability turned it into a tool result: it is raised before the next model
    request, or when the run ends."""

    store: CheckpointStore | AsyncCheckpointStore
    namespace: str = "pydantic-ai"
    revision: str = "1"
    tools: Collection[str] | None = None
    call_id: CallIdHook = default_call_id
    intent: Mapping[str, Collection[str]] = dataclasses.field(default_factory=dict)
    not_run: tuple[type[BaseException], ...] = ()
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    policy: CallPolicy | None = None

    def __post_init__(self) -> None:
        if self.tools is not None:
            _names(self.tools, "tools")
        _intents(self.intent)
        self._refusals = _Refusals()

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        del ctx
        return dataclasses.replace(self)  # a fresh _Refusals for the run

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        def guard(leaf: AbstractToolset[Any]) -> AbstractToolset[Any]:
            return CheckpointedToolset(
                leaf,
                store=self.store,
                namespace=self.namespace,
                revision=self.revision,
                tools=self.tools,
                call_id=self.call_id,
                intent=self.intent,
                not_run=self.not_run,
                options=self.options,
                policy=self.policy,
                refusals=self._refusals,
            )

        return toolset.visit_and_replace(guard)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        del ctx
        self._refusals.raise_first()
        return request_context

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        del ctx
        self._refusals.raise_first()
        return result
