"""LangGraph: guard the tool calls of a ``ToolNode`` so each runs at most once.

One line, on the node that runs the tools::

    tools = ToolNode([send_email], **checkpoint_tool_calls(SQLiteStore("calls.db")))

:func:`checkpoint_tool_calls` gives the two interceptors ``ToolNode`` takes
(``wrap_tool_call`` for ``invoke``/``stream``, ``awrap_tool_call`` for ``ainvoke``/
``astream``). Each tool call the node makes goes through a
:class:`~tool_execution_checkpoint.ToolGuard`: the first attempt runs the tool
(``execute``) and stores the ``ToolMessage`` or ``Command`` it produced; every later
attempt of the same call hands back the stored one without running anything. Facts below
are from langgraph 1.2.22, langgraph-prebuilt 1.1.3 and langchain-core 1.8.3.

**The call id** (:func:`thread_call_id`) is the thread id, the id of the ``AIMessage``
that holds the tool call, and the tool call's id. The scope is the model's message, a
turn: a model that numbers its calls per response (``call_0`` in every turn) gets a new
call each turn. Why it survives: a chat model gives each response an id
(``lc_run--<uuid>``, ``langchain_core/language_models/chat_models.py``) and
``add_messages`` gives one to any message without one (``langgraph/graph/message.py``);
the message, id included, is saved in the thread's checkpoint after the model's step.
Every resume LangGraph documents runs the tools node from that saved message:
``graph.invoke(None, config)`` after a crash (in another process too, from a
``SqliteSaver`` file), a node ``RetryPolicy`` (the same task, ``langgraph/pregel/
_retry.py``), ``Command(resume=...)`` after an interrupt, and ``update_state`` before a
resume. The task id (``execution_info.task_id``) is not used: it is a hash of the
checkpoint the step starts from (``langgraph/pregel/_algo.py``), so ``update_state`` or
a fork changes it. What is not a resume: a host killed before the model's step was saved
(``durability="exit"``, or ``"async"`` when the save had not landed) runs the model again,
and a new response is a new call; run a host that may be killed with
``durability="sync"``. A replay from an earlier checkpoint (time travel) re-makes the
same calls and is handed their stored results. The call is refused
(``CheckpointError`` INVALID_ARGUMENT, nothing runs) rather than merged with another when
the run has no thread id (no checkpointer), the state holds no ``AIMessage`` with the
tool call (a ``ToolNode`` fed bare tool calls), that message has no id, or the tool call
id repeats within it, or another message of the state has the same id. A ``ToolNode``
with another ``messages_key`` takes ``call_id=functools.partial(thread_call_id,
messages_key=...)``.

The adapter's id is authoritative (``ToolGuard.call(..., authoritative=True)``): an
enclosing :func:`~tool_execution_checkpoint.tool_call` or ``call_scope`` block does not
rename the graph's calls. One name around ``graph.invoke`` would cover every call of the
run, and a scope's occurrence numbers are not reproduced by a resume, which re-makes only
the calls of the unfinished step. Inside a running tool,
:func:`~tool_execution_checkpoint.current_idempotency_key` gives the key for the API the
tool calls.

**The fingerprint** is of ``request.tool_call["args"]``, the arguments as the model sent
them, or of those named in ``intent={"send_email": ("to",)}``. ``ToolNode`` injects
``InjectedState``, ``InjectedStore``, the config and ``ToolRuntime`` only when ``execute``
runs, after this interceptor, so none of them is in it. The binding's tool name is the
tool call's name; ``revision`` is one string or a mapping by tool name (absent: ``"1"``).
``tools=`` names the tools to guard (the effects); the others run as without it.

**The stored result** is what ``execute`` returned: a ``ToolMessage``, a ``Command`` or a
list of them. Messages are kept in LangChain's serialization (``dumpd``) and rebuilt with
``load(..., allowed_objects="messages")``. A ``Command`` is kept field by field: ``graph``,
``update`` (a mapping or ``(key, value)`` pairs of JSON and messages), ``resume`` and
``goto`` (node names, and ``Send(node, arg)`` without a timeout). A result that does not
fit cannot be stored after the tool ran: the record is marked uncertain and the call
raises :class:`~tool_execution_checkpoint.CallNeedsReconciliation`.

**Control flow.** ``interrupt()`` in a tool raises ``GraphInterrupt``, a ``GraphBubbleUp``
(so does a subgraph run as a tool when interrupted or sending a ``Command`` to its
parent). Every ``GraphBubbleUp`` passes through after the execution is marked uncertain,
and the resume raises ``CallNeedsReconciliation`` (an operator settles it with
``tool-checkpoint reconcile``). A tool named in ``interrupt_first`` calls ``interrupt()``
before any effect: its ``GraphInterrupt`` releases the claim and the resume runs it once
(LangGraph reruns a tool from its top).

**Errors.** An exception the tool raises before any effect (a read's ``TimeoutError``)
named in ``not_run={"lookup": (TimeoutError,)}`` releases the claim and propagates: the
next ``invoke(None)`` or ``RetryPolicy`` attempt runs the tool again. Any other exception
that propagates is stored by type; a replay raises
:class:`~tool_execution_checkpoint.ToolRaisedEarlier`. An exception ``ToolNode`` turns into
an error ``ToolMessage`` inside ``execute`` (``handle_tool_errors=True``, or types it
names) never reaches the guard: the message is the stored result. That includes a
``not_run`` type (harmless: the model reads the error) and
:class:`~tool_execution_checkpoint.ToolOutcomeUnknown`, which the model would then retry
under a new tool call id: a tool that may raise it needs ``handle_tool_errors`` to leave
it out (the default, or a tuple of the types the model may read).
The guard's own answers (:class:`~tool_execution_checkpoint.CallNotAnswered`,
``ToolRaisedEarlier``, ``CheckpointError``) are re-raised as subclasses that are also
LangGraph's ``GraphBubbleUp``: ``ToolNode`` re-raises those whatever ``handle_tool_errors``
says (``_run_one``/``_arun_one``, ``langgraph/prebuilt/tool_node.py``), no ``RetryPolicy``
retries them, and LangGraph raises them from ``invoke`` (``langgraph/pregel/_runner.py``).
So a refusal fails the run for the host (``except CallInFlight`` catches it) and never
reaches the model as a tool error it could retry under a new tool call id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import TypedDict

from langgraph.prebuilt.tool_node import AsyncToolCallWrapper, ToolCallRequest, ToolCallWrapper

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
            claim is released and the next attempt runs the tool (``ToolDidNotRun``
            always is one).
        interrupt_first: The names of the tools that call ``interrupt()`` before any
            effect: their ``GraphInterrupt`` releases the claim, so the resume runs them.
        wait_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        poll_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        max_payload_bytes: See :class:`~tool_execution_checkpoint.ToolGuard`.
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
    )
    return ToolNodeWrappers(
        wrap_tool_call=guard.wrap_tool_call, awrap_tool_call=guard.awrap_tool_call
    )
