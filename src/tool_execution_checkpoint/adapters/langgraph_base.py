"""The LangGraph adapter's parts that do no I/O: the call id of a tool call, how a
``ToolNode``'s result is stored, the guard's answers made ``GraphBubbleUp``, and the
interceptors' fields with the guard of each request. ``langgraph_calls_async`` (written)
and ``langgraph_calls`` (generated from it) add the interceptors."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, cast

from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send

from ..errors import CheckpointError, ErrorCode
from ..guard import ToolGuard
from ..guard_base import framework_policy
from ..runner import CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore
from ..table import TABLE
from ..validation import JSONValue

Execute = Callable[[ToolCallRequest], ToolMessage | Command[Any]]
"""``ToolNode``'s ``execute`` as a sync interceptor gets it."""

AsyncExecute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
"""``ToolNode``'s ``execute`` as an async interceptor gets it."""


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


# --- the guard's answers, and the guard of each request ------------------------------------

_BUBBLING: dict[type[BaseException], type[BaseException]] = {}


def _bubbling(kind: type[BaseException]) -> type[BaseException]:
    """``kind`` that is also a ``GraphBubbleUp``, which ``ToolNode`` always re-raises."""
    made = _BUBBLING.get(kind)
    if made is None:
        namespace = {"__module__": __name__, "__qualname__": kind.__qualname__}
        made = _BUBBLING.setdefault(kind, type(kind.__name__, (kind, GraphBubbleUp), namespace))
    return made


def to_host(answer: BaseException) -> None:
    """Make the guard's answer a ``GraphBubbleUp``, so that it fails the run (a subclass
    whose layout forbids it is left as it is)."""
    if not isinstance(answer, GraphBubbleUp):
        with contextlib.suppress(TypeError):
            answer.__class__ = _bubbling(type(answer))


@dataclasses.dataclass(frozen=True)
class ToolCallGuards:
    """The fields of :class:`~.langgraph.ToolCallCheckpoint` (documented there) and the
    guard of each request."""

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
    policy: CallPolicy | None = None

    def _guard(self, request: ToolCallRequest) -> ToolGuard:
        name = request.tool_call["name"]
        revision = self.revision if isinstance(self.revision, str) else self.revision.get(name, "1")
        not_run = self.not_run.get(name, ())
        if name in self.interrupt_first:
            not_run = (*not_run, GraphInterrupt)
        intent = self.intent.get(name)
        if intent is not None and request.tool and set(intent) - set(request.tool.args):
            raise _refused("names an argument the tool does not have", "intent")
        policy = framework_policy(
            self.policy,
            control_flow=(GraphBubbleUp,),
            before_effect=not_run,
            wait_seconds=self.wait_seconds,
            poll_seconds=self.poll_seconds,
            max_payload_bytes=self.max_payload_bytes,
        )
        return ToolGuard(
            self.store,
            tool_name=name,
            namespace=self.namespace,
            revision=revision,
            codec=_ToolResultCodec(),
            intent=None if intent is None else frozenset(intent),
            policy=policy,
        )

    def _guarded(self, request: ToolCallRequest) -> bool:
        return self.tools is None or request.tool_call["name"] in self.tools
