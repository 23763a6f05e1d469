"""A LangGraph host for the adapter's tests: a ``StateGraph`` whose model node is a fake
chat model and whose tools node is a ``ToolNode``, and the host process of the SIGKILL
test (``python langgraph_host.py <workdir> <bare|guarded> <crash|resume>``).

The crash phase runs two turns of one thread whose model numbers its calls per response
(``call_0`` in both) and is SIGKILLed after the second turn's e-mail, before the tools
node finishes; the resume phase is a second process that resumes the thread from the
``SqliteSaver`` file with ``invoke(None)`` and prints the final messages as JSON.
"""

from __future__ import annotations

import asyncio
import copy
import json
import operator
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, NotRequired, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import RetryPolicy, Send, interrupt

from tool_execution_checkpoint import SQLiteStore, ToolOutcomeUnknown, current_idempotency_key
from tool_execution_checkpoint.adapters.langgraph import ToolCallCheckpoint

Execute = Callable[[ToolCallRequest], Any]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[Any]]
CONFIG: Any = {"configurable": {"thread_id": "thread-1"}}


class State(MessagesState):
    receipts: Annotated[list[str], operator.add]
    note: NotRequired[str]


class HostDied(Exception):
    """Raised in the tools node after the tool returned: the host's crash, in process."""


def ask(
    tool_name: str, call_id: str = "call_1", message_id: str | None = None, **args: Any
) -> AIMessage:
    """The model's turn that calls one tool."""
    return calls((tool_name, call_id, args), message_id=message_id)


def calls(*wanted: tuple[str, str, dict[str, Any]], message_id: str | None = None) -> AIMessage:
    """The model's turn that calls these tools (name, tool call id, arguments) at once."""
    tool_calls: Any = [
        {"name": name, "args": args, "id": call_id, "type": "tool_call"}
        for name, call_id, args in wanted
    ]
    return AIMessage(content="", tool_calls=tool_calls, id=message_id)


def model(*turns: AIMessage | str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(turns))


class RetryingModel(BaseChatModel):
    """A model that calls ``send_email`` for each user message and calls it again, under a
    new tool call id, whenever a tool message says the call failed (at most 3 times)."""

    @property
    def _llm_type(self) -> str:
        return "retrying-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any
    ) -> ChatResult:
        del stop, run_manager
        failed = sum(isinstance(m, ToolMessage) and m.status == "error" for m in messages)
        last = messages[-1]
        retry = isinstance(last, ToolMessage) and last.status == "error" and failed <= 3
        if isinstance(last, HumanMessage) or retry:
            reply = ask("send_email", f"call_{len(messages)}", to="ada", body="paid")
        else:
            reply = AIMessage(content="Done.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def each_call_sent(state: Any) -> Any:
    """Route every tool call of the last message to its own ``tools`` task (``Send``)."""
    return [Send("tools", [call]) for call in state["messages"][-1].tool_calls] or END


def build(
    tools: list[Any],
    chat: BaseChatModel,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    route: Callable[[Any], Any] = tools_condition,
    retry: RetryPolicy | None = None,
    **tool_node: Any,
) -> Any:
    """Model node, tools node, and LangGraph's own edges between them."""

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools, **tool_node), retry_policy=retry)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def invoke(graph: Any, how: str, *arguments: Any) -> Any:
    """``graph.invoke(*arguments)``, or ``ainvoke`` in an event loop."""
    return asyncio.run(graph.ainvoke(*arguments)) if how == "ainvoke" else graph.invoke(*arguments)


def write(outbox: Path, to: str, body: str) -> str:
    """Send the e-mail: a line in the outbox, with the downstream key when guarded."""
    try:
        key = current_idempotency_key()
    except Exception:  # run unguarded
        key = "-"
    with outbox.open("a") as lines:
        lines.write(f"{to}: {body} {key}\n")
    return f"sent to {to} ({len(outbox.read_text().splitlines())})"


def unknown_outcome(outbox: Path, to: str, body: str) -> str:
    """Send the e-mail, then learn nothing of its delivery: ``ToolOutcomeUnknown``."""
    write(outbox, to, body)
    raise ToolOutcomeUnknown("the provider timed out after accepting it")


def outbox_tool(outbox: Path, send: Callable[[Path, str, str], str] = write) -> Any:
    """``send_email``, which sends through ``send``."""

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return send(outbox, to, body)

    return send_email


def approval_tool(outbox: Path, started: list[str]) -> Any:
    """``send_email`` that asks a human (``interrupt()``) before it sends."""

    @tool
    def send_email(to: str) -> str:
        """Send an e-mail once a human approves."""
        started.append(to)
        answer = interrupt("approve?")
        with outbox.open("a") as written:
            written.write(f"{to}: {answer}\n")
        return "sent"

    return send_email


def request_in(state: Any) -> ToolCallRequest:
    """The request of tool call ``call_1`` in thread ``t`` whose state is ``state``."""
    runtime = SimpleNamespace(execution_info=None, config={"configurable": {"thread_id": "t"}})
    call: Any = {"name": "send_email", "args": {}, "id": "call_1", "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=cast(Any, runtime))


def lines(outbox: Path) -> list[str]:
    return outbox.read_text().splitlines() if outbox.exists() else []


def sent(outbox: Path, to: str | None = None) -> int:
    return sum(to is None or line.startswith(f"{to}:") for line in lines(outbox))


def crashing(
    guard: Callable[[ToolCallRequest, Execute], Any] | None, seen: list[Any], at: int = 1
) -> Callable[[ToolCallRequest, Execute], Any]:
    """A wrap_tool_call that runs the call (through ``guard`` when given), keeps what the
    node got back, and dies once, after the ``at``-th call's tool returned."""

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        result = guard(request, execute) if guard is not None else execute(request)
        seen.append(copy.deepcopy(result))  # the state's reducer gives the message an id
        if len(seen) == at:
            raise HostDied
        return result

    return wrap


def acrashing(
    guard: Callable[[ToolCallRequest, AsyncExecute], Awaitable[Any]] | None, at: int
) -> Callable[[ToolCallRequest, AsyncExecute], Awaitable[Any]]:
    """The ``awrap_tool_call`` twin of :func:`crashing`."""
    made: list[object] = []

    async def wrap(request: ToolCallRequest, execute: AsyncExecute) -> Any:
        result = await (guard(request, execute) if guard is not None else execute(request))
        made.append(result)
        if len(made) == at:
            raise HostDied
        return result

    return wrap


def two_turns(graph: Any, invoke: Callable[..., Any] | None = None) -> Iterator[Any]:
    """The thread's two user turns, each asking for the same e-mail."""
    run = invoke or graph.invoke
    for text in ("Tell Ada", "Tell Ada again"):
        yield run({"messages": [HumanMessage(text)]}, CONFIG, durability="sync")


def repeating_ids(**args: Any) -> list[AIMessage | str]:
    """Two turns of a model that numbers its calls per response: ``call_0`` twice (two
    messages: the model gives each response its own id)."""
    args = args or {"to": "ada", "body": "paid"}
    return [
        ask("send_email", "call_0", **args),
        "Done.",
        ask("send_email", "call_0", **args),
        "Done.",
    ]


def run_host(workdir: Path, mode: str, phase: str) -> subprocess.CompletedProcess[str]:
    """Run this file as a host process (see the module docstring)."""
    environment = {"PYTHONPATH": os.pathsep.join(sys.path), "LANGSMITH_TRACING": "false"}
    command = [sys.executable, __file__, str(workdir), mode, phase]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=environment, check=False
    )


def main(workdir: Path, mode: str, phase: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415 - the extra's

    saver = SqliteSaver(sqlite3.connect(workdir / "graph.db", check_same_thread=False))
    guard = ToolCallCheckpoint(SQLiteStore(workdir / "calls.db"))
    made: list[str] = []

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        result = guard.wrap_tool_call(request, execute) if mode == "guarded" else execute(request)
        made.append(str(request.tool_call["id"]))
        if phase == "crash" and len(made) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    turns = repeating_ids() if phase == "crash" else ["Done."]
    graph = build([outbox_tool(workdir / "outbox")], model(*turns), saver, wrap_tool_call=wrap)
    if phase == "crash":
        for _ in two_turns(graph):
            pass
        return
    state = graph.invoke(None, CONFIG, durability="sync")
    print(json.dumps([[type(m).__name__, m.content] for m in state["messages"]]))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
