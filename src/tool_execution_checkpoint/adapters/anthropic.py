"""The anthropic SDK: guard the functions its tool runners call (extra ``anthropic``).

::

    @beta_tool
    @checkpointed_tool(store)
    def send_email(to: str) -> Receipt: ...

Both runners call a tool with its input only, never with the tool-use id, so the call
id comes from what the application owns, read when the tool is called:

- **Inside the Sessions tool runner** (``client.beta.sessions.events.tool_runner``) the
  runner sets the session and thread it serves (``current_session_thread``); the call id is
  ``<session>/<thread>/<tool>/<fingerprint of the input>``. A host that dies and attaches
  again is dispatched the same unanswered call in the same session, so it finds the
  checkpoint. Within one session thread a second identical call of a tool is answered from
  the first one's checkpoint; a tool that may legitimately repeat an identical call there
  needs :func:`messages_turn` or :func:`~tool_execution_checkpoint.tool_call` around it.
- **With the Messages API** (``client.beta.messages.tool_runner`` or a hand-written loop),
  a retried turn gets new tool-use ids from the model, so the application names the turn
  before its first attempt: inside ``with messages_turn("conv-42/turn-7"):`` the call id
  is ``<turn>/<tool>/<n>``, the n-th call of that tool in the block, in the order the
  runner runs them. A retry of the turn that calls the tool with other arguments is a
  BINDING_CONFLICT, never a second e-mail.
- Otherwise the id of an enclosing :func:`~tool_execution_checkpoint.tool_call` block;
  with none, the call is refused (CheckpointError INVALID_ARGUMENT) before anything runs.

The runners post an exception's text as an error result: a call that cannot be answered
(:class:`~tool_execution_checkpoint.CallNotAnswered` and its subclasses) reaches the model
as an error naming the checkpoint's status, never a payload.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from anthropic.lib.tools._tool_dispatch import current_session_thread

from ..errors import CheckpointError, ErrorCode
from ..fingerprint import fingerprint
from ..guard import checkpointed, to_json
from ..identity import current_call_id
from ..stores.core import AsyncCheckpointStore, CheckpointStore

__all__ = ["checkpointed_tool", "messages_turn"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass
class _Turn:
    turn_id: str
    calls: dict[str, int] = dataclasses.field(default_factory=dict)

    def next_call_id(self, tool_name: str) -> str:
        number = self.calls.get(tool_name, 0) + 1
        self.calls[tool_name] = number
        return f"{self.turn_id}/{tool_name}/{number}"


_TURN: ContextVar[_Turn | None] = ContextVar("tool_execution_checkpoint.turn", default=None)


@contextmanager
def messages_turn(turn_id: str) -> Iterator[None]:
    """Name the turn whose tool calls are made inside the block, the same on every retry
    of the turn (the application's conversation and turn number, say)."""
    token = _TURN.set(_Turn(turn_id))
    try:
        yield
    finally:
        _TURN.reset(token)


def _call_id(tool_name: str, bound: inspect.BoundArguments) -> str:
    thread = current_session_thread.get()
    if thread is not None:
        session_id, thread_id = thread.id
        digest = fingerprint(to_json(dict(bound.arguments)))
        return f"{session_id}/{thread_id or 'primary'}/{tool_name}/{digest}"
    turn = _TURN.get()
    if turn is not None:
        return turn.next_call_id(tool_name)
    identity = current_call_id()
    if identity is None:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is missing: run the tool in the Sessions tool runner, inside "
            "`with messages_turn(turn_id):`, or inside `with tool_call(call_id):`",
            field="call_id",
        )
    return identity


def checkpointed_tool(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    name: str | None = None,
    namespace: str = "anthropic",
    revision: str = "1",
    **options: Any,
) -> Callable[[F], F]:
    """:func:`~tool_execution_checkpoint.checkpointed`, with the call id read as the module
    docstring says. Put it under ``@beta_tool`` (or ``@beta_async_tool``) and give it the
    same ``name`` if you give ``beta_tool`` one. ``options`` are checkpointed's."""

    def decorate(tool: F) -> F:
        tool_name = name or tool.__name__
        guard = checkpointed(
            store,
            namespace=namespace,
            name=tool_name,
            revision=revision,
            call_id=lambda bound: _call_id(tool_name, bound),
            **options,
        )
        return cast(F, guard(tool))

    return decorate
