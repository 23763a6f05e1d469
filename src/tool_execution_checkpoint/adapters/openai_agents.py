"""The OpenAI Agents SDK: guard a ``function_tool`` (extra ``openai-agents``).

::

    @function_tool
    @checkpointed_tool(store)
    def send_email(to: str) -> Receipt: ...

**The call id is the model's tool call id** (``ToolContext.tool_call_id``). Facts from
``openai-agents`` 0.24.0: a function tool is invoked as ``on_invoke_tool(ctx, input)``
with ``ctx`` a ``ToolContext`` whose ``tool_call_id`` is the ``call_id`` of the model's
``ResponseFunctionToolCall`` (``agents/tool.py``, ``_on_invoke_tool_impl``). A paused run
is resumed from a ``RunState`` (``result.to_state()``, ``to_string``/``to_json`` and
``RunState.from_string``/``from_json``, then ``Runner.run(agent, state)``): the state
keeps the model responses and the last processed response, so the tool calls it runs on
the resume are the same calls with the same ``call_id`` (``agents/run_state.py``). A
host that dies after the tool ran and resumes from the state it saved before (the usual
human-in-the-loop approval pause) therefore finds the checkpoint and the framework is
handed the stored result; the tool does not run again. A run started again from the
conversation instead (a new ``Runner.run`` with the same input or session) asks the model
again and gets new call ids: that is a new call, not a resume.

The SDK passes the context only to a function whose first parameter is annotated
``RunContextWrapper`` or ``ToolContext`` (``agents/function_schema.py``). A tool with such
a parameter gets it as before, and that parameter is left out of the fingerprint. A tool
without one is given a wrapper whose first parameter is a ``ToolContext`` the SDK fills
in; the wrapper calls the tool without it. The parameter is invisible to the model (the
SDK leaves the context out of the JSON schema). Called outside a run, the call id is the
enclosing :func:`~tool_execution_checkpoint.tool_call` block's; with none, the call is
refused (CheckpointError INVALID_ARGUMENT) before anything runs.

**Control flow.** A function tool has no exception of the SDK to raise for control flow:
the SDK turns any ``Exception`` from the tool into a text for the model through the
tool's ``failure_error_function``. So nothing passes through by default: a tool's
exception is stored as its type and re-raised, and a replay raises
:class:`~tool_execution_checkpoint.ToolRaisedEarlier` without running the tool. The SDK's
default text for any of them is a fixed "An error occurred while running the tool.
Please try again." (``default_tool_error_function``), which invites the model to call the
tool again under a new call id, a new call the checkpoint does not stop. For a call the
checkpoint cannot answer (:class:`~tool_execution_checkpoint.CallNotAnswered`: another
attempt holds it, or its outcome is unknown) pass
``function_tool(failure_error_function=checkpoint_error_text)``: the model is told the
call's status and not to retry it (no payload, argument or id is in the text). A
``timeout`` on the tool cancels it: the cancellation marks the execution uncertain
(nothing runs it again; an operator settles it).

Sync tools run in a worker thread (``asyncio.to_thread``, which copies the context), so a
sync tool needs a sync store; an async tool takes a sync or an async store.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from agents.run_context import RunContextWrapper
from agents.tool import default_tool_error_function
from agents.tool_context import ToolContext

from ..errors import CheckpointError, ErrorCode
from ..guard import CallNotAnswered, ToolRaisedEarlier, checkpointed
from ..identity import current_call_id
from ..stores.core import AsyncCheckpointStore, CheckpointStore

__all__ = ["checkpoint_error_text", "checkpointed_tool"]

R = TypeVar("R")

_CONTEXT = "_checkpoint_tool_context"
"""The name of the context parameter given to a tool that does not take one."""

_CALLER_CONTEXT: ContextVar[object] = ContextVar(
    "tool_execution_checkpoint.openai_agents.context", default=None
)
"""The context the SDK passed to that parameter, read while the guard binds the call."""


def _takes_context(tool: Callable[..., Any]) -> str | None:
    """The tool's first parameter when the SDK passes it the context (the same test as
    ``agents.function_schema``), or None."""
    parameters = list(inspect.signature(tool).parameters.values())
    if not parameters:
        return None
    first = parameters[0]
    hint = typing.get_type_hints(tool).get(first.name, first.annotation)
    origin = typing.get_origin(hint) or hint
    if origin is RunContextWrapper or origin is ToolContext:
        return first.name
    return None


def _call_id(context: object) -> str:
    if isinstance(context, ToolContext):
        return context.tool_call_id
    identity = current_call_id()
    if identity is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is missing: run the tool in an agent run (its ToolContext names the call) or "
            "inside `with tool_call(call_id):`",
            field="call_id",
        )
    return identity


def checkpointed_tool(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    name: str | None = None,
    namespace: str = "openai-agents",
    revision: str = "1",
    **options: Any,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """:func:`~tool_execution_checkpoint.checkpointed` with the call id read from the
    SDK's ``ToolContext``, as the module docstring says. Put it under ``@function_tool``
    and give it the same ``name`` if you give ``function_tool`` a ``name_override``.
    ``options`` are checkpointed's (``exclude`` adds to the context parameter).

    The function it returns takes the SDK's context first: the tool's own context
    parameter, or one added for a tool without it (so it is typed ``Callable[..., R]``)."""

    def decorate(tool: Callable[..., R]) -> Callable[..., R]:
        tool_name = name or tool.__name__
        exclude = tuple(options.pop("exclude", ()))
        context_parameter = _takes_context(tool)
        if context_parameter is not None:
            parameter = context_parameter
            guard = checkpointed(
                store,
                namespace=namespace,
                name=tool_name,
                revision=revision,
                call_id=lambda bound: _call_id(bound.arguments[parameter]),
                exclude=(parameter, *exclude),
                **options,
            )
            return guard(tool)
        guarded: Callable[..., Any] = checkpointed(
            store,
            namespace=namespace,
            name=tool_name,
            revision=revision,
            call_id=lambda _bound: _call_id(_CALLER_CONTEXT.get()),
            exclude=exclude,
            **options,
        )(tool)
        return cast(Callable[..., R], _with_context_parameter(tool, guarded))

    return decorate


def _with_context_parameter(tool: Callable[..., Any], guarded: Callable[..., Any]) -> Any:
    """``guarded`` behind a first parameter the SDK fills with the ToolContext."""
    signature = inspect.signature(tool)
    context = inspect.Parameter(
        _CONTEXT, inspect.Parameter.POSITIONAL_ONLY, annotation=ToolContext[Any]
    )
    if inspect.iscoroutinefunction(tool):
        run_async = cast(Callable[..., Awaitable[Any]], guarded)

        @functools.wraps(tool)
        async def wrapper_async(ctx: object, /, *args: Any, **kwargs: Any) -> Any:
            token = _CALLER_CONTEXT.set(ctx)
            try:
                return await run_async(*args, **kwargs)
            finally:
                _CALLER_CONTEXT.reset(token)

        wrapper: Callable[..., Any] = wrapper_async
    else:

        @functools.wraps(tool)
        def wrapper_sync(ctx: object, /, *args: Any, **kwargs: Any) -> Any:
            token = _CALLER_CONTEXT.set(ctx)
            try:
                return guarded(*args, **kwargs)
            finally:
                _CALLER_CONTEXT.reset(token)

        wrapper = wrapper_sync
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[context, *signature.parameters.values()]
    )
    wrapper.__annotations__ = {_CONTEXT: ToolContext[Any], **tool.__annotations__}
    return wrapper


def checkpoint_error_text(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """A ``failure_error_function`` for a guarded tool: what the checkpoint says, for a call
    it cannot answer or an error stored earlier; the SDK's default text otherwise."""
    if isinstance(error, CallNotAnswered):
        return f"{error}. This tool call must not be retried: an operator settles it."
    if isinstance(error, ToolRaisedEarlier):
        return f"{error}. It was not run again."
    return default_tool_error_function(ctx, error)
