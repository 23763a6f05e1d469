"""pydantic-ai: one capability guards every tool of an agent (extra ``pydantic-ai``).

::

    agent = Agent(model, tools=[send_email], capabilities=[Checkpointed(store)])

:class:`Checkpointed` wraps each leaf toolset of the run (its function tools, MCP
servers, ...) in a :class:`CheckpointedToolset`, whose ``call_tool`` runs the tool through
a :class:`~tool_execution_checkpoint.ToolGuard`. A toolset can also be guarded alone:
``Agent(model, toolsets=[CheckpointedToolset(toolset, store)])``.

**The call id is ``<conversation id>/<tool call id>``**. Facts from ``pydantic-ai-slim``
2.68.0 (``pydantic_ai/_run_context.py``, ``agent/__init__.py``):
``RunContext.tool_call_id`` is the id of the model's ``ToolCallPart``, kept in the
message history; ``RunContext.conversation_id`` is the run's ``conversation_id``
argument or else the most recent one on ``message_history``, so it too is the same when
a run is resumed from its stored messages. A host resumes by running the agent again
with the messages it stored (``all_messages_json()`` / ``ModelMessagesTypeAdapter``),
with ``deferred_tool_results`` after a deferral or approval; the tool calls of the last
response then run under the same ids and find the checkpoint. The conversation id scopes
the tool call id, which some models and providers number per response (``call_0``), so
two conversations never share a record. An approval resume calls the tool again under
the same id with ``tool_call_approved`` set: the unapproved attempt raised
``ApprovalRequired``, which released its claim, so the approved call runs the tool.

**The fingerprint** is that of the validated arguments as pydantic dumps them to JSON
(``to_jsonable_python``); the ``RunContext`` is never among them.

**Control flow.** The exceptions pydantic-ai treats as control flow (``tool_manager.py``)
pass through unchanged. ``CallDeferred``, ``ApprovalRequired`` and ``SkipToolExecution``
(:data:`NOT_RUN`) say the tool is not run now, so the guard releases the claim before
re-raising: the resume with ``deferred_tool_results`` runs the tool under the same id.
A tool must raise them before it acts. ``ModelRetry`` and ``ToolFailed``
(:data:`CONTROL_FLOW`) may come after an effect, so that execution is marked uncertain:
after a ``ModelRetry`` the model makes a new call (a new tool call id), and a resume of
the very call finds it uncertain and raises
:class:`~tool_execution_checkpoint.CallNeedsReconciliation`. Any other exception of the
tool is stored as its type and re-raised; like it, a replay's
:class:`~tool_execution_checkpoint.ToolRaisedEarlier` and a call the checkpoint cannot
answer (:class:`~tool_execution_checkpoint.CallNotAnswered`) end the run with that
exception, as pydantic-ai does with any tool error that is not ``ModelRetry``.

**Results.** A function tool's result is stored by :func:`~tool_execution_checkpoint.
result_codec` of its return annotation (read from the toolset's ``Tool.function``), so a
replay hands pydantic-ai the same type the function returned; other tools' results (MCP)
are stored as JSON.
"""

from __future__ import annotations

import dataclasses
import typing
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
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
from pydantic_ai.toolsets.function import FunctionToolsetTool
from pydantic_core import to_jsonable_python

from ..errors import CheckpointError, ErrorCode
from ..guard import ResultCodec, ToolGuard, result_codec
from ..stores.core import AsyncCheckpointStore, CheckpointStore

__all__ = ["CONTROL_FLOW", "NOT_RUN", "Checkpointed", "CheckpointedToolset", "call_id"]

NOT_RUN: tuple[type[BaseException], ...] = (CallDeferred, ApprovalRequired, SkipToolExecution)
"""The exceptions by which a tool says it is not run now (deferred, awaiting approval,
skipped): the claim is released and they are re-raised, so the resume runs the tool."""

CONTROL_FLOW: tuple[type[BaseException], ...] = (ModelRetry, ToolFailed)
"""The exceptions a tool raises to steer pydantic-ai after it may have acted: passed
through after the execution is marked uncertain, never stored."""


def call_id(ctx: RunContext[Any]) -> str:
    """The call id of the tool call ``ctx`` is running (see the module docstring)."""
    if ctx.conversation_id is None or ctx.tool_call_id is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is missing: the RunContext names no conversation or tool call",
            field="call_id",
        )
    return f"{ctx.conversation_id}/{ctx.tool_call_id}"


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


@dataclasses.dataclass
class CheckpointedToolset(WrapperToolset[Any]):
    """A toolset whose every tool call runs at most once per call id.

    Attributes:
        store: Where the checkpoints live.
        namespace: The bindings' namespace.
        revision: The bindings' tool revision (change it when stored results no longer
            fit the tools).
        options: More :class:`~tool_execution_checkpoint.ToolGuard` fields
            (``wait_seconds``, ``poll_seconds``, ``max_payload_bytes``).
    """

    store: CheckpointStore | AsyncCheckpointStore = dataclasses.field(kw_only=True)
    namespace: str = dataclasses.field(default="pydantic-ai", kw_only=True)
    revision: str = dataclasses.field(default="1", kw_only=True)
    options: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        guard = ToolGuard(
            self.store,
            tool_name=tool.original_name
            if isinstance(tool, FunctionToolsetTool) and tool.original_name
            else name,
            namespace=self.namespace,
            revision=self.revision,
            codec=_codec(self.wrapped, name, tool),
            pass_through=CONTROL_FLOW,
            not_run=NOT_RUN,
            **self.options,
        )
        arguments = to_jsonable_python(tool_args)
        return await guard.call_async(
            call_id(ctx), arguments, lambda: self.wrapped.call_tool(name, tool_args, ctx, tool)
        )


@dataclasses.dataclass
class Checkpointed(AbstractCapability[Any]):
    """Guard every tool of the agent: each leaf toolset of a run is wrapped in a
    :class:`CheckpointedToolset` (output tools are not tools the model's calls run)."""

    store: CheckpointStore | AsyncCheckpointStore
    namespace: str = "pydantic-ai"
    revision: str = "1"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        def guard(leaf: AbstractToolset[Any]) -> AbstractToolset[Any]:
            return CheckpointedToolset(
                leaf,
                store=self.store,
                namespace=self.namespace,
                revision=self.revision,
                options=self.options,
            )

        return toolset.visit_and_replace(guard)
