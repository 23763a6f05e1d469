"""The OpenAI Agents SDK: guard a ``function_tool`` (extra ``openai-agents``).

::

    @function_tool
    @checkpointed_tool(store)
    def send_email(to: str) -> Receipt: ...

Why each choice, with the facts from ``openai-agents`` 0.24.0: ``docs/frameworks.md``.

**The call id** is the model's tool call id (``ToolContext.tool_call_id``), unless an
enclosing :func:`~tool_execution_checkpoint.call_scope` or
:func:`~tool_execution_checkpoint.tool_call` names the call (:mod:`~..identity`). A
``RunState`` resume runs the stored response's calls under the same ids and is handed
their stored results. A run started again from the conversation (a ``Session``, a
server-managed conversation, the input list) asks the model again and gets new ids:
wrap the turn in ``with call_scope("conv-42/turn-7"):``, a name the host keeps for the
turn, and read a ``Runner.run_streamed`` stream inside it. A call under the SDK's
placeholder item id (``FAKE_RESPONSES_ID``, from providers that assign no item id), or
called outside a run, is named only by an enclosing ``tool_call`` or ``call_scope``; with
none it is refused (CheckpointError INVALID_ARGUMENT) before anything runs.

**The context.** A tool whose first parameter is annotated ``RunContextWrapper`` or
``ToolContext`` gets it as before, left out of the fingerprint; a tool without one is
given a wrapper whose first parameter is a ``ToolContext`` the SDK fills in and the
model never sees.

**Refusals.** In a run (a ``ToolContext`` passed) a refusal
(:class:`~tool_execution_checkpoint.CallNotAnswered`, a ``CheckpointError`` such as
BINDING_CONFLICT) is not raised: the tool's output is :func:`refusal_text`, whatever
``failure_error_function`` is, and a WARNING is logged (no id, argument or payload). In a
``call_scope`` the model's retry is the same call, refused again, and leaving the block
raises the refusal to the host; outside one, a model that retries despite the text makes
a new call, so the guarantee needs ``call_scope``.

**Errors.** A tool's own exception is stored as its type and re-raised; a replay raises
:class:`~tool_execution_checkpoint.ToolRaisedEarlier` (worded for the model by
``failure_error_function=checkpoint_error_text``). One raised before any effect (a
read's timeout) belongs in ``not_run=``: never stored, the next call of the id runs the
tool. A ``timeout`` on the tool cancels it: the execution is marked uncertain (an
operator settles it). A sync tool needs a sync store; an async tool takes either.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable, Collection
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.run_context import RunContextWrapper
from agents.tool import default_tool_error_function
from agents.tool_context import ToolContext

from ..errors import CheckpointError, ErrorCode
from ..guard import CallNotAnswered, ToolRaisedEarlier, checkpointed
from ..guard_base import GUARD_REFUSALS
from ..runner import DEFAULT_NOT_RUN, CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore
from .openai_agents_calls import in_run
from .openai_agents_calls_async import in_run_async

__all__ = ["checkpoint_error_text", "checkpointed_tool", "refusal_text"]

R = TypeVar("R")

LOGGER = logging.getLogger("tool_execution_checkpoint.adapters.openai_agents")

_CONTEXT = "_checkpoint_tool_context"
"""The name of the context parameter given to a tool that does not take one."""

_CALLER_CONTEXT: ContextVar[object] = ContextVar(
    "tool_execution_checkpoint.openai_agents.context", default=None
)
"""The context the SDK passed to the tool, read while the guard names the call."""


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


def _framework_call_id(context: object) -> str | None:
    """The SDK's id of the call: the ToolContext's ``tool_call_id``; None outside a run, or
    for a call of a provider path whose ids may repeat (the SDK's placeholder item id), so
    that only a ``tool_call`` or ``call_scope`` block names it."""
    if not isinstance(context, ToolContext):
        return None
    call = context.tool_call
    if call is not None and call.id == FAKE_RESPONSES_ID:
        return None
    return context.tool_call_id


def refusal_text(refusal: Exception) -> str:
    """What the model is told of a call the checkpoint refused: the refusal (its status or
    code and field, never a payload, argument or id) and that it must not be retried."""
    if (
        isinstance(refusal, CheckpointError)
        and refusal.code is ErrorCode.INVALID_ARGUMENT
        and refusal.field == "call_id"
    ):
        return "This tool call was not run: the host cannot tell it apart. Do not retry it."
    return f"{refusal}. This tool call must not be retried: an operator settles it."


def _answer(refusal: Exception, context: ToolContext[Any]) -> str:
    kind = (
        refusal.code.value
        if isinstance(refusal, CheckpointError)
        else cast(CallNotAnswered, refusal).outcome.status.value
    )
    LOGGER.warning(
        "a call of tool %s was refused (%s); the model was told not to retry it",
        context.tool_name,
        kind,
    )
    return refusal_text(refusal)


def checkpointed_tool(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    name: str | None = None,
    namespace: str = "openai-agents",
    revision: str = "1",
    intent: Collection[str] | None = None,
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN,
    exclude: Collection[str] = (),
    policy: CallPolicy | None = None,
    **options: Any,
) -> Callable[[Callable[..., R]], Callable[..., R | str]]:
    """:func:`~tool_execution_checkpoint.checkpointed` with the call named as the module
    docstring says. Put it under ``@function_tool`` and give it the same ``name`` if you
    give ``function_tool`` a ``name_override``.

    Args:
        store: A sync or async store (an async store needs an async tool).
        name: The binding's tool name (default: the function's ``__name__``).
        namespace: The binding's namespace.
        revision: The binding's tool revision.
        intent: The parameters that identify the effect (default: all of them).
        not_run: Exceptions the tool raises before any effect (default ``ToolDidNotRun``):
            never stored, the claim released.
        exclude: Parameters left out of the fingerprint (the context parameter always is).
        policy: The call options as one :class:`~tool_execution_checkpoint.CallPolicy`
            (``write_budget``, ``reconcile``, ...), as checkpointed takes it.
        options: The rest of checkpointed's options (``codec``, ``pass_through``, ...).

    The function it returns takes the SDK's context first: the tool's own context
    parameter, or one added for a tool without it (so it is typed ``Callable[..., R | str]``).
    In a run (a ``ToolContext`` passed) it returns :func:`refusal_text`, a ``str``, for a
    refusal; otherwise it returns and raises as checkpointed's.

    Raises:
        CheckpointError: As checkpointed, when decorating (INVALID_ARGUMENT for an
            ``intent`` or ``exclude`` name that is not a parameter).
    """

    def decorate(tool: Callable[..., R]) -> Callable[..., R | str]:
        parameter = _takes_context(tool)
        left_out = tuple(exclude) if parameter is None else (parameter, *exclude)
        guarded: Callable[..., Any] = checkpointed(
            store,
            namespace=namespace,
            name=name or tool.__name__,
            revision=revision,
            call_id=lambda _bound: _framework_call_id(_CALLER_CONTEXT.get()),
            intent=intent,
            not_run=not_run,
            exclude=left_out,
            policy=policy,
            **options,
        )(tool)
        return cast(Callable[..., R | str], _in_run(tool, guarded, parameter))

    return decorate


def _in_run(tool: Callable[..., Any], guarded: Callable[..., Any], parameter: str | None) -> Any:
    """``guarded`` behind the context the SDK passes: the tool's own first parameter
    (``parameter``), or one added in front of its parameters. The context names the call
    and turns a refusal in a run into :func:`refusal_text`."""

    def split(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, tuple[Any, ...]]:
        if parameter is None:
            return (args[0] if args else None), args[1:]
        return (args[0] if args else kwargs.get(parameter)), args

    make = in_run_async if inspect.iscoroutinefunction(tool) else in_run
    wrapper = make(tool, guarded, split, _CALLER_CONTEXT, _answer)
    wrapper.__checkpoint_guard__ = guarded.__checkpoint_guard__  # type: ignore[attr-defined]
    if parameter is None:
        signature = inspect.signature(tool)
        context = inspect.Parameter(
            _CONTEXT, inspect.Parameter.POSITIONAL_ONLY, annotation=ToolContext[Any]
        )
        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[context, *signature.parameters.values()]
        )
        wrapper.__annotations__ = {_CONTEXT: ToolContext[Any], **tool.__annotations__}
    return wrapper


def checkpoint_error_text(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """A ``failure_error_function`` for a guarded tool: for an error stored earlier, that
    it was not run again; for a refusal, :func:`refusal_text`; the SDK's default text
    otherwise."""
    if isinstance(error, GUARD_REFUSALS):
        return refusal_text(error)
    if isinstance(error, ToolRaisedEarlier):
        return f"{error}. It was not run again."
    return default_tool_error_function(ctx, error)
