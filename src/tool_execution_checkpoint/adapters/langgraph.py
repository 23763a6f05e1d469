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

import contextlib
import dataclasses
import warnings
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypedDict, cast

from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.prebuilt.tool_node import AsyncToolCallWrapper, ToolCallRequest, ToolCallWrapper
from langgraph.types import Command, Send

from ..errors import CheckpointError, ErrorCode
from ..guard import CallNotAnswered, ToolGuard, ToolRaisedEarlier
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


def _refused(detail: str, field: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field=field)


def _thread_of(request: ToolCallRequest) -> str:
    runtime = request.runtime
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    if thread is None:
        config = getattr(runtime, "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or str(thread) == "":
        raise _refused(
            "is missing: compile the graph with a checkpointer and run it with "
            'config={"configurable": {"thread_id": ...}}',
            "thread_id",
        )
    return str(thread)


def _messages_of(state: Any, messages_key: str) -> Sequence[Any]:
    if isinstance(state, list):
        return state
    found = state.get(messages_key) if isinstance(state, Mapping) else None
    if found is None and not isinstance(state, Mapping):
        found = getattr(state, messages_key, None)
    return found if isinstance(found, list | tuple) else ()


def thread_call_id(request: ToolCallRequest, *, messages_key: str = "messages") -> str:
    """The call id of one tool call: ``"<n>:<thread id>:<m>:<AIMessage id>:<tool call
    id>"`` (``n`` and ``m`` the lengths of the ids after them), the ``AIMessage`` being
    the last one in ``request.state[messages_key]`` that holds the tool call.

    Raises:
        CheckpointError: INVALID_ARGUMENT when the run has no thread id, the tool call has
            no id, no message of the state holds it, that message has no id, the tool
            call id repeats within it, or another message of the state has its id.
    """
    thread = _thread_of(request)
    call = request.tool_call.get("id")
    if not call:
        raise _refused("is missing from the model's tool call", "call_id")
    messages = _messages_of(request.state, messages_key)
    holder = next(
        (
            message
            for message in reversed(messages)
            if isinstance(message, AIMessage)
            and any(each.get("id") == call for each in message.tool_calls)
        ),
        None,
    )
    if holder is None or not holder.id:
        raise _refused(
            "has no AIMessage with an id holding it in the state: run the ToolNode on "
            "the graph's messages, or pass call_id=",
            "call_id",
        )
    if sum(each.get("id") == call for each in holder.tool_calls) > 1:
        raise _refused("repeats within the model's message: pass call_id=", "call_id")
    if sum(isinstance(m, AIMessage) and m.id == holder.id for m in messages) > 1:
        raise _refused("is held by a message whose id another message has", "call_id")
    return f"{len(thread)}:{thread}:{len(holder.id)}:{holder.id}:{call}"


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

_ANSWERS = (CallNotAnswered, ToolRaisedEarlier, CheckpointError)
"""The guard's own answers: a refusal, or a replay of a tool's stored exception."""


_BUBBLING: dict[type[BaseException], type[BaseException]] = {}


def _bubbling(kind: type[BaseException]) -> type[BaseException]:
    """``kind`` that is also a ``GraphBubbleUp``, which ``ToolNode`` always re-raises."""
    made = _BUBBLING.get(kind)
    if made is None:
        namespace = {"__module__": __name__, "__qualname__": kind.__qualname__}
        made = _BUBBLING.setdefault(kind, type(kind.__name__, (kind, GraphBubbleUp), namespace))
    return made


def _to_host(answer: BaseException) -> None:
    """Make the guard's answer a ``GraphBubbleUp``, so that it fails the run (a subclass
    whose layout forbids it is left as it is)."""
    if not isinstance(answer, GraphBubbleUp):
        with contextlib.suppress(TypeError):
            answer.__class__ = _bubbling(type(answer))


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

    store: CheckpointStore | AsyncCheckpointStore
    namespace: str = "default"
    revision: str | Mapping[str, str] = "1"
    tools: Collection[str] | None = None
    call_id: Callable[[ToolCallRequest], str] = thread_call_id
    intent: Mapping[str, Collection[str]] = dataclasses.field(default_factory=dict)
    not_run: Mapping[str, tuple[type[BaseException], ...]] = dataclasses.field(default_factory=dict)
    interrupt_first: Collection[str] = ()
    wait_seconds: float = 0.0
    poll_seconds: float = 0.1
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes

    def _guard(self, request: ToolCallRequest) -> ToolGuard:
        name = request.tool_call["name"]
        revision = self.revision if isinstance(self.revision, str) else self.revision.get(name, "1")
        not_run = (*DEFAULT_NOT_RUN, *self.not_run.get(name, ()))
        if name in self.interrupt_first:
            not_run = (*not_run, GraphInterrupt)
        intent = self.intent.get(name)
        if intent is not None and request.tool and set(intent) - set(request.tool.args):
            raise _refused("names an argument the tool does not have", "intent")
        return ToolGuard(
            self.store,
            tool_name=name,
            namespace=self.namespace,
            revision=revision,
            codec=_ToolResultCodec(),
            pass_through=(GraphBubbleUp,),
            not_run=not_run,
            wait_seconds=self.wait_seconds,
            poll_seconds=self.poll_seconds,
            max_payload_bytes=self.max_payload_bytes,
            intent=None if intent is None else frozenset(intent),
        )

    def _guarded(self, request: ToolCallRequest) -> bool:
        return self.tools is None or request.tool_call["name"] in self.tools

    def wrap_tool_call(
        self, request: ToolCallRequest, execute: Execute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(wrap_tool_call=...)``: run the call at most once (sync store).

        Raises:
            CallNotAnswered, ToolRaisedEarlier, CheckpointError: the guard's answers (see
                the module docstring), as ``GraphBubbleUp`` subclasses of themselves.
        """
        if not self._guarded(request):
            return execute(request)
        try:
            return self._guard(request).call(
                self.call_id(request),
                request.tool_call["args"],
                lambda: execute(request),
                authoritative=True,
            )
        except _ANSWERS as answer:
            _to_host(answer)
            raise

    async def awrap_tool_call(
        self, request: ToolCallRequest, execute: AsyncExecute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(awrap_tool_call=...)``: run the call at most once (any store);
        raises as :meth:`wrap_tool_call`."""
        if not self._guarded(request):
            return await execute(request)
        try:
            return await self._guard(request).call_async(
                self.call_id(request),
                request.tool_call["args"],
                lambda: execute(request),
                authoritative=True,
            )
        except _ANSWERS as answer:
            _to_host(answer)
            raise


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
