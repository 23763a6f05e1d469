"""The LangGraph adapter, in LangGraph's own loop: a ``StateGraph`` whose model node is
langchain-core's ``GenericFakeChatModel`` and whose tools node is a ``ToolNode`` guarded
by ``checkpoint_tool_calls``, persisted by LangGraph's SQLite or in-memory checkpointer.

The host dies after the tool's effect and before the tools node finishes (a real process
SIGKILLed, or an exception raised in the node), then the thread is resumed the way
LangGraph resumes (``invoke(None, config)`` with the same thread id): the outbox counts
two e-mails without the guard and one with it.

This file is also the child process of the SIGKILL test (``python <this file> ...``).
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.language_models.fake_chat_models import (
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, ToolRuntime, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send, interrupt

from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    CallNeedsReconciliation,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    Status,
)
from tool_execution_checkpoint.adapters.langgraph import (
    ToolCallCheckpoint,
    checkpoint_tool_calls,
    thread_call_id,
    tool_result_codec,
)

Execute = Callable[[ToolCallRequest], Any]
AsyncExecute = Callable[[ToolCallRequest], Awaitable[Any]]


class State(MessagesState):
    receipts: Annotated[list[str], operator.add]
    note: NotRequired[str]


class HostDied(Exception):
    """Raised in the tools node after the tool returned: the host's crash, in process."""


def ask(tool_name: str, call_id: str = "call_1", **args: Any) -> AIMessage:
    """The model's turn that calls one tool."""
    return AIMessage(
        content="",
        tool_calls=[{"name": tool_name, "args": args, "id": call_id, "type": "tool_call"}],
    )


def model(*turns: AIMessage | str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(turns))


def build(
    tools: list[Any],
    chat: GenericFakeChatModel,
    checkpointer: BaseCheckpointSaver[Any] | None,
    **tool_node: Any,
) -> Any:
    """Model node, tools node, and LangGraph's own edges between them."""

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools, **tool_node))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def outbox_tool(outbox: Path) -> Any:
    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        with outbox.open("a") as lines:
            lines.write(f"{to}: {body}\n")
        return f"sent to {to} ({len(outbox.read_text().splitlines())})"

    return send_email


def sent(outbox: Path) -> int:
    return len(outbox.read_text().splitlines()) if outbox.exists() else 0


def crashing(
    guard: Callable[[ToolCallRequest, Execute], Any] | None, seen: list[Any]
) -> Callable[[ToolCallRequest, Execute], Any]:
    """A wrap_tool_call that runs the call (through ``guard`` when given), keeps what the
    node got back, and dies once after the first attempt's tool returned."""

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        result = guard(request, execute) if guard is not None else execute(request)
        seen.append(copy.deepcopy(result))  # the state's reducer gives the message an id
        if len(seen) == 1:
            raise HostDied
        return result

    return wrap


CONFIG: Any = {"configurable": {"thread_id": "thread-1"}}


# --- the host killed mid-step: a real process, SIGKILLed -----------------------------------


def child(workdir: Path, mode: str, phase: str) -> None:
    """One host process: ``crash`` starts the thread and is SIGKILLed after the tool's
    effect, before the tools node finishes; ``resume`` resumes the thread and prints the
    final messages as JSON."""
    from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415

    saver = SqliteSaver(sqlite3.connect(workdir / "graph.db", check_same_thread=False))
    guard = ToolCallCheckpoint(SQLiteStore(workdir / "calls.db"))

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        result = guard.wrap_tool_call(request, execute) if mode == "guarded" else execute(request)
        if phase == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    final = AIMessage(content="Done.")
    turns = (ask("send_email", to="ada", body="paid"), final) if phase == "crash" else (final,)
    graph = build([outbox_tool(workdir / "outbox")], model(*turns), saver, wrap_tool_call=wrap)
    if phase == "crash":
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG, durability="sync")
        return
    state = graph.invoke(None, CONFIG, durability="sync")
    print(json.dumps([[type(m).__name__, m.content] for m in state["messages"]]))


def run_child(workdir: Path, mode: str, phase: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("LANGSMITH")
    }
    environment["LANGSMITH_TRACING"] = "false"
    return subprocess.run(
        [sys.executable, __file__, str(workdir), mode, phase],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )


@pytest.mark.parametrize(("mode", "emails"), [("bare", 2), ("guarded", 1)])
def test_a_host_sigkilled_after_the_effect_and_resumed_sends_once_with_the_guard(
    tmp_path: Path, mode: str, emails: int
) -> None:
    crashed = run_child(tmp_path, mode, "crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert sent(tmp_path / "outbox") == 1

    resumed = run_child(tmp_path, mode, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sent(tmp_path / "outbox") == emails
    messages = json.loads(resumed.stdout)
    # The resume ran the tools node from the saved AIMessage, then the model's last turn.
    assert [kind for kind, _ in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert messages[2][1] == f"sent to ada ({emails})"


# --- the host's crash as an exception in the node, sync and async --------------------------


@pytest.mark.parametrize(("guarded", "emails"), [(False, 2), (True, 1)])
def test_a_sync_node_failing_after_the_tool_and_resumed_sends_once_with_the_guard(
    tmp_path: Path, guarded: bool, emails: int
) -> None:
    outbox = tmp_path / "outbox"
    seen: list[Any] = []
    guard = ToolCallCheckpoint(MemoryStore()).wrap_tool_call if guarded else None
    chat = model(ask("send_email", to="ada", body="paid"), "Done.")
    graph = build(
        [outbox_tool(outbox)], chat, InMemorySaver(), wrap_tool_call=crashing(guard, seen)
    )

    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG, durability="sync")
    state = graph.invoke(None, CONFIG, durability="sync")

    assert sent(outbox) == emails
    assert len(seen) == 2
    assert state["messages"][2].content == seen[1].content
    if guarded:  # the replay is the ToolMessage the first attempt produced
        assert isinstance(seen[1], ToolMessage)
        assert seen[1] == seen[0]
        assert seen[1].content == "sent to ada (1)"
        assert seen[1].tool_call_id == "call_1"


@pytest.mark.parametrize(("guarded", "emails"), [(False, 2), (True, 1)])
def test_an_async_tool_in_an_async_run_failing_after_the_tool_sends_once_with_the_guard(
    tmp_path: Path, guarded: bool, emails: int
) -> None:
    outbox = tmp_path / "outbox"

    @tool
    async def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        await asyncio.sleep(0)
        with outbox.open("a") as lines:
            lines.write(f"{to}: {body}\n")
        return f"sent to {to} ({sent(outbox)})"

    async def scenario() -> tuple[Any, list[Any]]:
        store = await AsyncSQLiteStore.open(tmp_path / "calls.db")
        guard = ToolCallCheckpoint(store)
        seen: list[Any] = []

        async def wrap(request: ToolCallRequest, execute: AsyncExecute) -> Any:
            if guarded:
                result = await guard.awrap_tool_call(request, execute)
            else:
                result = await execute(request)
            seen.append(result)
            if len(seen) == 1:
                raise HostDied
            return result

        chat = model(ask("send_email", to="ada", body="paid"), "Done.")
        graph = build([send_email], chat, InMemorySaver(), awrap_tool_call=wrap)
        with pytest.raises(HostDied):
            await graph.ainvoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG, durability="sync")
        return await graph.ainvoke(None, CONFIG, durability="sync"), seen

    state, seen = asyncio.run(scenario())
    assert sent(outbox) == emails
    assert state["messages"][2].content == seen[1].content
    assert seen[1].content == f"sent to ada ({emails})"


def test_a_command_result_is_replayed_as_the_same_command(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    runs: list[str] = []

    @tool
    def book(room: str, runtime: ToolRuntime) -> Command[Any]:
        """Book a room."""
        runs.append(room)
        with outbox.open("a") as lines:
            lines.write(f"{room}\n")
        message = ToolMessage(
            content=f"booked {room}", tool_call_id=runtime.tool_call_id, artifact={"n": 1}
        )
        return Command(update={"messages": [message], "receipts": [f"r-{room}"]})

    seen: list[Any] = []
    guard = ToolCallCheckpoint(MemoryStore())
    graph = build(
        [book],
        model(ask("book", room="blue"), "Booked."),
        InMemorySaver(),
        wrap_tool_call=crashing(guard.wrap_tool_call, seen),
    )
    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Book")]}, CONFIG, durability="sync")
    state = graph.invoke(None, CONFIG, durability="sync")

    assert runs == ["blue"]
    assert isinstance(seen[1], Command)
    assert seen[1] == seen[0]
    assert state["receipts"] == ["r-blue"]
    assert state["messages"][2].content == "booked blue"
    assert state["messages"][2].artifact == {"n": 1}


# --- identity: injected objects, other arguments, no thread --------------------------------


def test_injected_state_and_tool_runtime_are_not_in_the_fingerprint(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    notes: list[str] = []

    @tool
    def send_email(
        to: str, state: Annotated[dict[str, Any], InjectedState], runtime: ToolRuntime
    ) -> str:
        """Send an e-mail."""
        notes.append(state.get("note", ""))
        with outbox.open("a") as lines:
            lines.write(f"{to}\n")
        return f"sent to {to} for {runtime.tool_call_id}"

    requests: list[ToolCallRequest] = []
    seen: list[Any] = []
    guard = ToolCallCheckpoint(MemoryStore()).wrap_tool_call

    def probe(request: ToolCallRequest, execute: Execute) -> Any:
        requests.append(request)
        return guard(request, execute)

    graph = build(
        [send_email],
        model(ask("send_email", to="ada"), "Done."),
        InMemorySaver(),
        wrap_tool_call=crashing(probe, seen),
    )
    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Tell Ada")], "note": "first"}, CONFIG)
    # The state moves on before the resume: a new checkpoint, a new task, another state.
    graph.update_state(CONFIG, {"note": "second"})
    state = graph.invoke(None, CONFIG)

    assert notes == ["first"]
    assert sent(outbox) == 1
    assert [r.state["note"] for r in requests] == ["first", "second"]
    assert requests[0].runtime is not requests[1].runtime
    info = [r.runtime.execution_info for r in requests]
    assert info[0] is not None
    assert info[1] is not None
    assert info[0].task_id != info[1].task_id
    assert state["messages"][2].content == "sent to ada for call_1"


def test_the_same_tool_call_id_with_other_arguments_is_a_binding_conflict(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    graph = build(
        [outbox_tool(outbox)],
        model(
            ask("send_email", to="ada", body="paid"),
            "Done.",
            ask("send_email", to="eve", body="paid"),  # a model whose ids repeat
        ),
        InMemorySaver(),
        **checkpoint_tool_calls(MemoryStore()),
    )
    graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    with pytest.raises(CheckpointError) as raised:
        graph.invoke({"messages": [HumanMessage("Tell Eve")]}, CONFIG)

    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert sent(outbox) == 1
    assert "eve" not in str(raised.value)
    assert "call_1" not in str(raised.value)


def test_another_thread_with_the_same_tool_call_id_runs_its_own_call(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    store = MemoryStore()
    for thread in ("a", "b"):
        graph = build(
            [outbox_tool(outbox)],
            model(ask("send_email", to="ada", body="paid"), "Done."),
            InMemorySaver(),
            **checkpoint_tool_calls(store),
        )
        graph.invoke(
            {"messages": [HumanMessage("Tell Ada")]}, {"configurable": {"thread_id": thread}}
        )
    assert sent(outbox) == 2


def test_a_graph_without_a_checkpointer_is_refused_before_the_tool_runs(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    graph = build(
        [outbox_tool(outbox)],
        model(ask("send_email", to="ada", body="paid"), "Done."),
        None,
        **checkpoint_tool_calls(MemoryStore()),
    )
    with pytest.raises(CheckpointError) as raised:
        graph.invoke({"messages": [HumanMessage("Tell Ada")]})
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert sent(outbox) == 0


def test_the_call_id_is_the_thread_id_and_the_tool_call_id() -> None:
    ids: list[str] = []

    def recorded(request: ToolCallRequest) -> str:
        ids.append(thread_call_id(request))
        return ids[-1]

    guard = ToolCallCheckpoint(MemoryStore(), call_id=recorded)

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    graph = build(
        [noop],
        model(ask("noop", "toolu_9"), "Done."),
        InMemorySaver(),
        wrap_tool_call=guard.wrap_tool_call,
    )
    graph.invoke({"messages": [HumanMessage("Go")]}, {"configurable": {"thread_id": "a:b"}})
    assert ids == ["3:a:b:toolu_9"]


def test_tools_left_out_run_unguarded(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    seen: list[Any] = []
    guard = ToolCallCheckpoint(MemoryStore(), tools=["another_tool"]).wrap_tool_call
    graph = build(
        [outbox_tool(outbox)],
        model(ask("send_email", to="ada", body="paid"), "Done."),
        InMemorySaver(),
        wrap_tool_call=crashing(guard, seen),
    )
    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG, durability="sync")
    graph.invoke(None, CONFIG, durability="sync")
    assert sent(outbox) == 2


def test_an_async_store_in_a_sync_run_is_refused(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    store = AsyncSQLiteStore(tmp_path / "calls.db")
    graph = build(
        [outbox_tool(outbox)],
        model(ask("send_email", to="ada", body="paid"), "Done."),
        InMemorySaver(),
        **checkpoint_tool_calls(store),
    )
    with pytest.raises(CheckpointError) as raised:
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert sent(outbox) == 0


# --- interrupt(): framework control flow --------------------------------------------------


@pytest.mark.parametrize("guarded", [False, True])
def test_an_interrupt_passes_through_and_its_resume_is_not_run_again(
    tmp_path: Path, guarded: bool
) -> None:
    outbox = tmp_path / "outbox"
    started: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an e-mail once a human approves."""
        started.append(to)
        answer = interrupt("approve?")
        with outbox.open("a") as lines:
            lines.write(f"{to} {answer}\n")
        return "sent"

    wrappers: Any = checkpoint_tool_calls(MemoryStore()) if guarded else {}
    graph = build(
        [send_email], model(ask("send_email", to="ada"), "Done."), InMemorySaver(), **wrappers
    )
    first = graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    assert first["__interrupt__"][0].value == "approve?"
    assert started == ["ada"]

    if not guarded:  # LangGraph runs the tool again from the top, and the effect happens
        graph.invoke(Command(resume="yes"), CONFIG)
        assert started == ["ada", "ada"]
        assert sent(outbox) == 1
        return
    with pytest.raises(CallNeedsReconciliation) as raised:
        graph.invoke(Command(resume="yes"), CONFIG)
    record = raised.value.outcome.record
    assert record is not None
    assert record.status is Status.UNCERTAIN
    assert started == ["ada"]
    assert sent(outbox) == 0


# --- the stored result's codec -------------------------------------------------------------


def test_the_codec_rebuilds_commands_sends_and_lists() -> None:
    codec = tool_result_codec()
    message = ToolMessage(content=[{"type": "text", "text": "hi"}], tool_call_id="c", name="t")
    results: list[Any] = [
        message,
        Command(update=[("messages", [message]), ("receipts", ["x"])], goto="agent"),
        Command(graph=Command.PARENT, goto=[Send("worker", {"task": 1, "m": message})]),
        Command(resume={"ok": True}, update={"lc": 1, "type": "not_implemented"}),
        [message, Command(update={"messages": [message]})],
    ]
    for result in results:
        payload = json.loads(json.dumps(codec.encode(result)))
        assert codec.decode(payload) == result


def test_the_codec_refuses_what_langchain_cannot_serialize() -> None:
    codec = tool_result_codec()
    unstorable: list[Any] = [
        ToolMessage(content="x", tool_call_id="c", artifact=object()),
        Command(goto=Send("worker", {}, timeout=1.0)),
        Command(update={"note": {"lc": 1, "kept": object()}}),  # dumpd leaves it as it is
        "a bare string",
    ]
    for result in unstorable:
        with pytest.raises(CheckpointError) as raised:
            codec.encode(result)
        assert raised.value.code is ErrorCode.PAYLOAD_NOT_JSON
        assert "object at" not in str(raised.value)


def test_the_codec_rebuilds_messages_and_nothing_else() -> None:
    codec = tool_result_codec()
    prompt: dict[str, Any] = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "prompts", "prompt", "PromptTemplate"],
        "kwargs": {"template": "{x}", "input_variables": ["x"]},
    }
    with pytest.raises(Exception):  # noqa: B017, PT011 - langchain-core's own refusal
        codec.decode({"message": prompt})
    with pytest.raises(CheckpointError) as raised:
        codec.decode({"something": "else"})
    assert raised.value.code is ErrorCode.INVALID_CHECKPOINT


if __name__ == "__main__":
    child(Path(sys.argv[1]), sys.argv[2], sys.argv[3])


def test_a_tool_that_interrupts_before_acting_runs_once_on_the_resume(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    started: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an e-mail once a human approves."""
        started.append(to)
        answer = interrupt("approve?")
        with outbox.open("a") as lines:
            lines.write(f"{to} {answer}\n")
        return "sent"

    store = MemoryStore()
    wrappers: Any = checkpoint_tool_calls(store, interrupt_first=("send_email",))
    graph = build(
        [send_email], model(ask("send_email", to="ada"), "Done."), InMemorySaver(), **wrappers
    )
    first = graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    assert first["__interrupt__"][0].value == "approve?"
    (key,) = store.keys()
    assert (store.get(key) or {})["status"] == "released"
    graph.invoke(Command(resume="yes"), CONFIG)
    assert started == ["ada", "ada"]  # LangGraph reruns the tool from its top
    assert sent(outbox) == 1
    graph.invoke(Command(resume="yes"), CONFIG)  # nothing left to resume: no second e-mail
    assert sent(outbox) == 1
