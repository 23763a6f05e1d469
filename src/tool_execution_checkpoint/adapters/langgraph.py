"""LangGraph: guard the tool calls of a ``ToolNode`` so each runs at most once.

One line, on the node that runs the tools::

    tools = ToolNode([send_email], **checkpoint_tool_calls(SQLiteStore("calls.db")))

:func:`checkpoint_tool_calls` gives the two interceptors that ``ToolNode`` takes
(``wrap_tool_call`` for ``invoke``/``stream``, ``awrap_tool_call`` for ``ainvoke``/
``astream``; langgraph-prebuilt 1.1). Each tool call the node makes goes through a
:class:`~tool_execution_checkpoint.ToolGuard`: the first attempt runs the tool (``execute``)
and stores the ``ToolMessage`` or ``Command`` it produced; every later attempt of the same
call hands back the stored one without running anything.

**The call id** is the thread id and the model's tool call id,
``"<len(thread_id)>:<thread_id>:<tool_call id>"`` (:func:`thread_call_id`). Both survive a
resume: the thread id is what the application passes again
(``config={"configurable": {"thread_id": ...}}``; the node reads it from
``request.runtime.execution_info.thread_id``, else from that config), and the tool call id
is read from the ``AIMessage`` that the model node wrote into the thread's checkpoint.
LangGraph saves a checkpoint after each superstep and a finished task's writes as it
finishes; a host that dies while the tools node runs is resumed with
``graph.invoke(None, config)`` (or ``Command(resume=...)``), which runs the tools node again
from the saved ``AIMessage``: the same tool call ids, so the guard answers from its store.
A node ``RetryPolicy`` re-runs the node in the same way. A graph with no checkpointer has
no thread id and nothing to resume from: the call is refused (``CheckpointError``
INVALID_ARGUMENT), the tool is not run. The model's tool call ids must be unique within a
thread, as OpenAI's (``call_...``) and Anthropic's (``toolu_...``) are; for a model whose
ids repeat across turns pass ``call_id=`` a function of the request, for instance one that
adds ``request.runtime.execution_info.task_id`` (a hash of the checkpoint the step starts
from, so it too survives a resume from that checkpoint).

**The fingerprint** is of ``request.tool_call["args"]``, the arguments as the model sent
them. ``ToolNode`` injects ``InjectedState``, ``InjectedStore``, the ``RunnableConfig``
and ``ToolRuntime`` only when ``execute`` runs, after this interceptor, so none of them is
in the fingerprint: a resume whose state has moved on still finds the stored result. The
binding's tool name is the tool call's name; ``revision`` is one string for every tool or
a mapping from tool name to revision (absent names get ``"1"``).

**The stored result** is what ``execute`` returned: a ``ToolMessage``, a ``Command`` or a
list of them (a tool that returns several). Messages are kept in LangChain's own
serialization (``langchain_core.load.dumpd``) and rebuilt with ``load(...,
allowed_objects="messages")``, so a replay builds message classes and nothing else. A
``Command`` is kept field by field: ``graph``, ``update`` (a mapping or ``(key, value)``
pairs of JSON and messages), ``resume`` and ``goto`` (node names, and ``Send(node, arg)``
without a timeout). A result that does not fit (an artifact or state value LangChain
cannot serialize, a ``Send`` with a timeout) cannot be stored after the tool ran: the
record is marked uncertain and the call raises
:class:`~tool_execution_checkpoint.CallNeedsReconciliation`.

**Control flow.** An ``interrupt()`` in a tool raises ``GraphInterrupt``, a
``GraphBubbleUp``; so does a subgraph run as a tool when it is interrupted or sends a
``Command`` to its parent. The interceptor passes every ``GraphBubbleUp`` through
(``pass_through``) after marking the execution uncertain: the guard cannot know what the
tool did before it stopped. LangGraph then saves the interrupt and ``invoke`` returns with
``"__interrupt__"``. A resume (``Command(resume=...)``) runs the tool call again; the guard
finds the uncertain record and raises ``CallNeedsReconciliation`` instead of running the
tool a second time, so the run fails until an operator settles the record
(``tool-checkpoint reconcile``: ``--complete`` with the ``{"returned": ...}`` the node should
deliver, as this module stores it). A tool that asks a human before any effect is named in
``interrupt_first=("send_email",)``: its ``GraphInterrupt`` then releases the claim (the
record becomes ``released``), and the resume runs the tool, once. Name only tools whose
every ``interrupt()`` comes before they act: LangGraph reruns the tool from its top.

**Errors.** A tool's exception that ``ToolNode`` turns into an error ``ToolMessage``
(``handle_tool_errors``) is a result like any other and is stored. One it lets propagate
is stored by type and re-raised; a replay raises
:class:`~tool_execution_checkpoint.ToolRaisedEarlier`. The guard's own answers
(:class:`~tool_execution_checkpoint.CallNotAnswered` and its subclasses,
``CheckpointError``) propagate and fail the run under ``ToolNode``'s default error
handling. Setting ``handle_tool_errors=True`` (or a string) turns them into an error
``ToolMessage`` that the model reads, and a model told "in flight" may call the tool
again under a new tool call id: keep the default, or handle ``CallNotAnswered`` yourself.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TypedDict, cast

from langchain_core.load import dumpd, load
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.prebuilt.tool_node import AsyncToolCallWrapper, ToolCallRequest, ToolCallWrapper
from langgraph.types import Command, Send

from ..errors import CheckpointError, ErrorCode
from ..guard import ToolGuard
from ..runner import DEFAULT_NOT_RUN
from ..stores.core import AsyncCheckpointStore, CheckpointStore
from ..table import TABLE
from ..validation import JSONValue

__all__ = [
    "ToolCallCheckpoint",
    "ToolNodeWrappers",
    "checkpoint_tool_calls",
    "thread_call_id",
    "tool_result_codec",
]

Execute = Callable[[ToolCallRequest], ToolMessage | Command[Any]]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


class ToolNodeWrappers(TypedDict):
    """The keyword arguments of ``ToolNode`` that :func:`checkpoint_tool_calls` fills."""

    wrap_tool_call: ToolCallWrapper
    awrap_tool_call: AsyncToolCallWrapper


def thread_call_id(request: ToolCallRequest) -> str:
    """The call id of one tool call: ``"<len(thread_id)>:<thread_id>:<tool_call id>"``
    (the length keeps a thread id holding ``:`` from meeting another's).

    Raises:
        CheckpointError: INVALID_ARGUMENT when the run has no thread id (no checkpointer)
            or the tool call has no id.
    """
    runtime = request.runtime
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        config = getattr(runtime, "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or str(thread) == "":
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "is missing: compile the graph with a checkpointer and run it with "
            'config={"configurable": {"thread_id": ...}}',
            field="thread_id",
        )
    tool_call_id = request.tool_call.get("id")
    if not tool_call_id:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "is missing from the model's tool call", field="call_id"
        )
    thread_text = str(thread)
    return f"{len(thread_text)}:{thread_text}:{tool_call_id}"


# --- how a ToolNode's result is stored -----------------------------------------------------


def _not_storable(what: str) -> CheckpointError:
    return CheckpointError(ErrorCode.PAYLOAD_NOT_JSON, what, field="result")


def _checked(value: object, *, escaped: bool = False) -> JSONValue:
    """What ``dumpd`` gave, as plain JSON, or refused. ``dumpd`` writes an object it
    cannot serialize as a ``not_implemented`` stub (holding the object's repr), and leaves
    the inside of a user's dict that has an ``"lc"`` key as it was (escaped as
    ``{"__lc_escaped__": ...}``): a stub outside such a dict, or anything but JSON inside
    one, is refused, never stored."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_checked(item, escaped=escaped) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        if not escaped and value.get("lc") == 1 and value.get("type") == "not_implemented":
            raise _not_storable("holds an object LangChain cannot serialize")
        inside = escaped or set(value) == {"__lc_escaped__"}
        return {key: _checked(item, escaped=inside) for key, item in value.items()}
    raise _not_storable(f"holds a {type(value).__name__}")


def _dump(value: object) -> JSONValue:
    return _checked(dumpd(value))


def _load(payload: JSONValue) -> Any:
    with warnings.catch_warnings():  # `load` is marked beta in langchain-core 1.x
        warnings.simplefilter("ignore")
        return load(payload, allowed_objects="messages")


def _encode_goto(goto: object) -> JSONValue:
    if isinstance(goto, str):
        return {"node": goto}
    if isinstance(goto, Send):
        if goto.timeout is not None:
            raise _not_storable("holds a Send with a timeout")
        return {"send": goto.node, "arg": _dump(goto.arg)}
    if isinstance(goto, tuple | list):
        items: list[JSONValue] = [_encode_goto(item) for item in goto]
        return {"tuple": items} if isinstance(goto, tuple) else {"list": items}
    raise _not_storable(f"has a goto of type {type(goto).__name__}")


def _decode_goto(payload: JSONValue) -> Any:
    if not isinstance(payload, dict):
        raise _broken()
    if "node" in payload:
        return payload["node"]
    if "send" in payload:
        return Send(cast(str, payload["send"]), _load(payload.get("arg")))
    if "tuple" in payload:
        return tuple(_decode_goto(item) for item in cast(list[JSONValue], payload["tuple"]))
    return [_decode_goto(item) for item in cast(list[JSONValue], payload.get("list"))]


def _is_pairs(update: object) -> bool:
    return isinstance(update, list | tuple) and all(
        isinstance(item, tuple) and len(item) == 2 for item in update
    )


def _encode(value: object) -> JSONValue:
    if isinstance(value, ToolMessage):
        return {"message": _dump(value)}
    if isinstance(value, Command):
        update: JSONValue
        if _is_pairs(value.update):
            pairs = cast(list[tuple[str, object]], list(cast(list[Any], value.update)))
            update = {"pairs": [[key, _dump(item)] for key, item in pairs]}
        else:
            update = {"value": _dump(value.update)}
        return {
            "command": {
                "graph": value.graph,
                "update": update,
                "resume": _dump(value.resume),
                "goto": _encode_goto(value.goto),
            }
        }
    if isinstance(value, list):
        return {"list": [_encode(item) for item in value]}
    raise _not_storable(f"is a {type(value).__name__}, not a ToolMessage or a Command")


def _broken() -> CheckpointError:
    return CheckpointError(
        ErrorCode.INVALID_CHECKPOINT,
        "is not a ToolMessage, a Command or a list of them as this adapter stores them",
        field="result.payload",
    )


def _decode(payload: JSONValue) -> Any:
    if not isinstance(payload, dict) or len(payload) != 1:
        raise _broken()
    if "message" in payload:
        message = _load(payload["message"])
        if not isinstance(message, ToolMessage):
            raise _broken()
        return message
    if "list" in payload and isinstance(payload["list"], list):
        return [_decode(item) for item in payload["list"]]
    command = payload.get("command")
    if not isinstance(command, dict):
        raise _broken()
    update = command.get("update")
    if isinstance(update, dict) and "pairs" in update:
        pairs = cast(list[list[JSONValue]], update["pairs"])
        rebuilt: Any = [(cast(str, key), _load(item)) for key, item in pairs]
    elif isinstance(update, dict):
        rebuilt = _load(update.get("value"))
    else:
        raise _broken()
    return Command(
        graph=cast(str | None, command.get("graph")),
        update=rebuilt,
        resume=_load(command.get("resume")),
        goto=_decode_goto(command.get("goto")),
    )


class _ToolResultCodec:
    """A ``ToolNode`` result: a ``ToolMessage``, a ``Command`` or a list of them."""

    def encode(self, value: Any) -> JSONValue:
        return _encode(value)

    def decode(self, payload: JSONValue) -> Any:
        return _decode(payload)


def tool_result_codec() -> _ToolResultCodec:
    """The codec the interceptors store ``ToolNode`` results with (see the module
    docstring)."""
    return _ToolResultCodec()


# --- the interceptors ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToolCallCheckpoint:
    """The ``ToolNode`` interceptors: :meth:`wrap_tool_call` and :meth:`awrap_tool_call`.

    Attributes:
        store: Where the checkpoints live. A sync store serves both interceptors; an async
            store only :meth:`awrap_tool_call` (run the graph with ``ainvoke``).
        namespace: The bindings' namespace.
        revision: The tools' revision, one for all or by tool name (absent names: "1").
        tools: The names of the tools to guard; None guards every tool. The others run
            as they would without the interceptor.
        call_id: The call id of a request (default :func:`thread_call_id`).
        interrupt_first: The names of the tools that call ``interrupt()`` before any
            effect: their ``GraphInterrupt`` releases the claim, so the resume runs them.
        wait_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        poll_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        max_payload_bytes: See :class:`~tool_execution_checkpoint.ToolGuard`.
    """

    store: CheckpointStore | AsyncCheckpointStore
    namespace: str = "default"
    revision: str | Mapping[str, str] = "1"
    tools: Collection[str] | None = None
    call_id: Callable[[ToolCallRequest], str] = thread_call_id
    interrupt_first: Collection[str] = ()
    wait_seconds: float = 0.0
    poll_seconds: float = 0.1
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes

    def _guard(self, name: str) -> ToolGuard:
        revision = self.revision if isinstance(self.revision, str) else self.revision.get(name, "1")
        return ToolGuard(
            self.store,
            tool_name=name,
            namespace=self.namespace,
            revision=revision,
            codec=_ToolResultCodec(),
            pass_through=(GraphBubbleUp,),
            not_run=(*DEFAULT_NOT_RUN, GraphInterrupt)
            if name in self.interrupt_first
            else DEFAULT_NOT_RUN,
            wait_seconds=self.wait_seconds,
            poll_seconds=self.poll_seconds,
            max_payload_bytes=self.max_payload_bytes,
        )

    def _guarded(self, request: ToolCallRequest) -> bool:
        return self.tools is None or request.tool_call["name"] in self.tools

    def wrap_tool_call(
        self, request: ToolCallRequest, execute: Execute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(wrap_tool_call=...)``: run the call at most once (sync store)."""
        if not self._guarded(request):
            return execute(request)
        call = request.tool_call
        return self._guard(call["name"]).call(
            self.call_id(request), call["args"], lambda: execute(request)
        )

    async def awrap_tool_call(
        self, request: ToolCallRequest, execute: AsyncExecute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(awrap_tool_call=...)``: run the call at most once (any store)."""
        if not self._guarded(request):
            return await execute(request)
        call = request.tool_call
        return await self._guard(call["name"]).call_async(
            self.call_id(request), call["args"], lambda: execute(request)
        )


def checkpoint_tool_calls(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    namespace: str = "default",
    revision: str | Mapping[str, str] = "1",
    tools: Collection[str] | None = None,
    call_id: Callable[[ToolCallRequest], str] = thread_call_id,
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
        interrupt_first=interrupt_first,
        wait_seconds=wait_seconds,
        poll_seconds=poll_seconds,
        max_payload_bytes=max_payload_bytes,
    )
    return ToolNodeWrappers(
        wrap_tool_call=guard.wrap_tool_call, awrap_tool_call=guard.awrap_tool_call
    )
