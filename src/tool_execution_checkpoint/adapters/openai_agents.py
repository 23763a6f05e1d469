"""The OpenAI Agents SDK: guard a ``function_tool`` (extra ``openai-agents``).

::

    @function_tool
    @checkpointed_tool(store)
    def send_email(to: str) -> Receipt: ...

**The scope is the model's tool call id** (``ToolContext.tool_call_id``), unless an
enclosing :func:`~tool_execution_checkpoint.call_scope` or
:func:`~tool_execution_checkpoint.tool_call` names the call (:mod:`~..identity`). Facts
from ``openai-agents`` 0.24.0, and what each of its failure paths does to that id:

- A function tool runs as ``on_invoke_tool(ctx, input)`` with ``ctx`` a ``ToolContext``
  whose ``tool_call_id`` is the ``call_id`` of the model's ``ResponseFunctionToolCall``
  and whose ``tool_call`` is that item (``agents/tool.py``, ``agents/tool_context.py``,
  ``agents/run_internal/tool_execution.py``).
- **A ``RunState`` resume** (``result.to_state()``, ``to_string``/``from_string``, then
  ``Runner.run(agent, state)`` or ``Runner.run_streamed``) runs the calls of the stored
  model response: the same ids (``agents/run_state.py``). A host that died after the
  tool ran and resumes from the state it saved before (an approval pause) is handed the
  stored result; the tool does not run again. Parallel calls keep their ids in any order.
- **A run started again from the conversation** (a ``Session`` such as ``SQLiteSession``,
  a server-managed ``conversation_id``/``previous_response_id``, or the input list) asks
  the model again, and the model gives new ids. A ``Session`` stores the run's input
  when the run starts and the turn's items after the turn
  (``agents/run_internal/session_persistence.py``): a host killed after the tool's effect
  and before that has a session without the call, and its next run is a new call that
  runs the tool again. **The adapter cannot match it: wrap the turn in**
  ``with call_scope("conv-42/turn-7"):``, a name the host keeps for the turn (its inbound
  message id, say). Inside it the call is the turn, the intent and its occurrence, so the
  re-asked model's call of the same intent is the same call; ``intent=`` keeps a reworded
  argument out of the intent. With ``Runner.run_streamed``, read the stream inside it.
- **Ids that repeat.** In one run the SDK itself drops a call whose id and arguments
  repeat a completed call's, and fails the run (``ModelBehaviorError``) for other
  arguments (``agents/run_internal/tool_planning.py``): the tool is not invoked. Across
  runs nothing checks: a model behind the Chat Completions, LiteLLM or any-llm path may
  give ``call_0`` in every response. Such a call carries the SDK's placeholder item id
  ``FAKE_RESPONSES_ID`` ("providers that assign no item ID",
  ``agents/run_internal/session_persistence.py``; set in ``agents/models/
  chatcmpl_converter.py``, ``chatcmpl_stream_handler.py``, ``agents/extensions/models/
  litellm_model.py``, ``any_llm_model.py``): its id names no call for sure, so
  outside a ``call_scope`` or ``tool_call`` it is refused (CheckpointError
  INVALID_ARGUMENT) before anything runs. A Responses-API server that repeats ids is not
  detected: use ``call_scope`` there too.

The SDK passes the context only to a function whose first parameter is annotated
``RunContextWrapper`` or ``ToolContext`` (``agents/function_schema.py``). A tool with such
a parameter gets it as before, left out of the fingerprint; a tool without one is given
a wrapper whose first parameter is a ``ToolContext`` the SDK fills in and the model
never sees (the SDK leaves it out of the JSON schema). Called outside a run, the call is
named by an enclosing ``tool_call`` or ``call_scope``; with none it is refused
(CheckpointError INVALID_ARGUMENT) before anything runs.

**A refusal never becomes a rerun.** The SDK turns any ``Exception`` of a tool into text
for the model through the tool's ``failure_error_function``, by default "An error
occurred while running the tool. Please try again." (``default_tool_error_function``,
``agents/tool.py``), which invites a retry under a new id: a new call that runs the tool.
So in a run the adapter does not raise a refusal
(:class:`~tool_execution_checkpoint.CallNotAnswered`, a ``CheckpointError`` such as
BINDING_CONFLICT): it returns :func:`refusal_text` as the tool's output, whatever
``failure_error_function`` is, and logs a WARNING (no id, argument or payload). In a
``call_scope`` the model's retry anyway is the same call, refused again, and leaving the
block raises the refusal to the host. Outside one, a model that retries despite the
text makes a new call: the guarantee needs ``call_scope``. (A tool declared with
``output_type`` or programmatic callers fails the SDK's output check on that text, which
the SDK then words as an error: use ``call_scope``.)

A tool's own exception is stored as its type and re-raised, and a replay raises
:class:`~tool_execution_checkpoint.ToolRaisedEarlier`: the SDK words either for the model
(``failure_error_function=checkpoint_error_text`` says it was not run again), or with
``failure_error_function=None`` fails the run with its ``UserError`` whose ``__cause__``
is the exception (``agents/run_internal/tool_execution.py``).
One raised before any effect (a timeout of a read, say) belongs in ``not_run=``: never
stored, the next call of the id runs the tool. A ``timeout`` on the tool cancels it: the
execution is marked uncertain (nothing runs it again; an operator settles it).

Sync tools run in a worker thread (``asyncio.to_thread``, which copies the context, so
an enclosing ``call_scope`` holds there), so a sync tool needs a sync store; an async
tool takes a sync or an async store.
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
from ..runner import DEFAULT_NOT_RUN
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
