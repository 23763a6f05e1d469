"""LangGraph: guard the tool calls of a ``ToolNode`` so each runs at most once.

One line, on the node that runs the tools::

    tools = ToolNode([send_email], **checkpoint_tool_calls(SQLiteStore("calls.db")))

:func:`checkpoint_tool_calls` gives the two interceptors ``ToolNode`` takes
(``wrap_tool_call`` for ``invoke``/``stream``, ``awrap_tool_call`` for ``ainvoke``/
``astream``). Each tool call the node makes goes through a
:class:`~tool_execution_checkpoint.ToolGuard`: the first attempt runs the tool
(``execute``) and stores the ``ToolMessage`` or ``Command`` it produced; every later
attempt of the same call hands back the stored one without running anything. Why this
survives each resume LangGraph documents, with the facts from its sources:
``docs/frameworks.md``.

- **The call id** is :func:`thread_call_id` (thread, ``AIMessage`` and tool call ids),
  authoritative: an enclosing :func:`~tool_execution_checkpoint.tool_call` or
  ``call_scope`` does not rename it. It is refused (``CheckpointError``
  INVALID_ARGUMENT, nothing runs) as :func:`thread_call_id` says. A ``ToolNode`` with
  another ``messages_key`` takes ``call_id=functools.partial(thread_call_id,
  messages_key=...)``. Run a host that may be killed with ``durability="sync"``: a model
  step that was not saved runs again, and its new response is a new call.
- **The fingerprint** is of ``request.tool_call["args"]`` (nothing ``ToolNode`` injects),
  or of those named in ``intent={"send_email": ("to",)}``. The binding's tool name is
  the tool call's name; ``revision`` is one string or a mapping by tool name (absent:
  ``"1"``). ``tools=`` names the tools to guard; the others run as without it.
- **The stored result** is what ``execute`` returned: a ``ToolMessage``, a ``Command`` or
  a list of them (:func:`tool_result_codec`). One that does not fit is not stored: the
  record is marked uncertain and the call raises
  :class:`~tool_execution_checkpoint.CallNeedsReconciliation`.
- **Control flow.** Every ``GraphBubbleUp`` the tool raises (``interrupt()``) passes
  through after the execution is marked uncertain; the resume raises
  ``CallNeedsReconciliation``. A tool named in ``interrupt_first`` interrupts before any
  effect: its ``GraphInterrupt`` releases the claim and the resume runs it.
- **Errors.** An exception named in ``not_run={"lookup": (TimeoutError,)}`` releases the
  claim and propagates: the next attempt runs the tool. Any other exception that
  propagates is stored by type; a replay raises
  :class:`~tool_execution_checkpoint.ToolRaisedEarlier`. An error ``ToolMessage`` that
  ``ToolNode`` makes inside ``execute`` is the stored result. The guard's own answers
  (:class:`~tool_execution_checkpoint.CallNotAnswered`, ``ToolRaisedEarlier``,
  ``CheckpointError``) are raised as subclasses that are also ``GraphBubbleUp``: they fail
  the run for the host (``except CallInFlight`` catches one) and never reach the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import TypedDict

from langgraph.prebuilt.tool_node import AsyncToolCallWrapper, ToolCallRequest, ToolCallWrapper

from ..runner import CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore
from ..table import TABLE
from .langgraph_base import thread_call_id, tool_result_codec
from .langgraph_calls import ToolCallInterceptor
from .langgraph_calls_async import AsyncToolCallInterceptor

__all__ = [
    "ToolCallCheckpoint",
    "ToolNodeWrappers",
    "checkpoint_tool_calls",
    "thread_call_id",
    "tool_result_codec",
]


class ToolNodeWrappers(TypedDict):
    """The keyword arguments of ``ToolNode`` that :func:`checkpoint_tool_calls` fills."""

    wrap_tool_call: ToolCallWrapper
    awrap_tool_call: AsyncToolCallWrapper


@dataclasses.dataclass(frozen=True)
class ToolCallCheckpoint(ToolCallInterceptor, AsyncToolCallInterceptor):
    """The ``ToolNode`` interceptors: :meth:`wrap_tool_call` and :meth:`awrap_tool_call`.

    Attributes:
        store: Where the checkpoints live. A sync store serves both interceptors; an async
            store only :meth:`awrap_tool_call` (run the graph with ``ainvoke``).
        namespace: The bindings' namespace.
        revision: The tools' revision, one for all or by tool name (absent names: "1").
        tools: The names of the tools to guard; None guards every tool. The others run
            as they would without the interceptor.
        call_id: The call id of a request (default :func:`thread_call_id`).
        intent: By tool name, the arguments that identify the effect (absent: all).
        not_run: By tool name, the exceptions the tool raises before any effect: the
            claim is released and the next attempt runs the tool (the policy's, by
            default ``ToolDidNotRun``, always are).
        interrupt_first: The names of the tools that call ``interrupt()`` before any
            effect: their ``GraphInterrupt`` releases the claim, so the resume runs them.
        wait_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        poll_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        max_payload_bytes: See :class:`~tool_execution_checkpoint.ToolGuard`.
        policy: The call options as one :class:`~tool_execution_checkpoint.CallPolicy`
            (``write_budget``, ``reconcile``, ...), or None; the three above are its
            fields (see :class:`~tool_execution_checkpoint.ToolGuard`). ``GraphBubbleUp``
            is added to its ``pass_through``, and each tool's ``not_run`` to its
            ``not_run``. A ``reconcile`` hook's ``Found`` and ``NotThere`` carry a
            ``ToolMessage``, a ``Command`` or a list of them.
    """


def checkpoint_tool_calls(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    namespace: str = "default",
    revision: str | Mapping[str, str] = "1",
    tools: Collection[str] | None = None,
    call_id: Callable[[ToolCallRequest], str] = thread_call_id,
    intent: Mapping[str, Collection[str]] | None = None,
    not_run: Mapping[str, tuple[type[BaseException], ...]] | None = None,
    interrupt_first: Collection[str] = (),
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.1,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    policy: CallPolicy | None = None,
) -> ToolNodeWrappers:
    """``ToolNode(tools, **checkpoint_tool_calls(store))``: both interceptors of a
    :class:`ToolCallCheckpoint` with these settings (see its attributes)."""
    guard = ToolCallCheckpoint(
        store,
        namespace=namespace,
        revision=revision,
        tools=tools,
        call_id=call_id,
        intent=intent or {},
        not_run=not_run or {},
        interrupt_first=interrupt_first,
        wait_seconds=wait_seconds,
        poll_seconds=poll_seconds,
        max_payload_bytes=max_payload_bytes,
        policy=policy,
    )
    return ToolNodeWrappers(
        wrap_tool_call=guard.wrap_tool_call, awrap_tool_call=guard.awrap_tool_call
    )
