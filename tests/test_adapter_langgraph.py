"""The LangGraph adapter in LangGraph's own loop (the graph, its fake models and the host
process are in ``langgraph_host.py``): the host dies after the tool's effect and before
the tools node finishes (SIGKILLed, or an exception in the node), the thread is resumed
each way LangGraph resumes, and the outbox counts one e-mail per intended e-mail,
including with a model whose tool call ids repeat across turns.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import signal
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import pytest

pytest.importorskip("langgraph.prebuilt")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import InjectedState, ToolRuntime, tools_condition
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, RetryPolicy, Send

from langgraph_host import (
    CONFIG,
    Execute,
    HostDied,
    RetryingModel,
    acrashing,
    approval_tool,
    ask,
    build,
    calls,
    crashing,
    each_call_sent,
    invoke,
    lines,
    model,
    outbox_tool,
    repeating_ids,
    request_in,
    run_host,
    sent,
    two_turns,
    unknown_outcome,
    write,
)
from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    CallInFlight,
    CallNeedsReconciliation,
    CallPolicy,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    Status,
    StuckCall,
    ToolGuard,
    ToolRaisedEarlier,
    call_scope,
    current_idempotency_key,
    tool_call,
)
from tool_execution_checkpoint.adapters.langgraph import (
    ToolCallCheckpoint,
    checkpoint_tool_calls,
    thread_call_id,
    tool_result_codec,
)

# --- the host killed mid-step: a real process, SIGKILLed, resumed by a second one ----------


@pytest.mark.parametrize(("mode", "emails"), [("bare", 3), ("guarded", 2)])
def test_a_host_sigkilled_in_the_second_turn_is_resumed_by_another_process(
    tmp_path: Path, mode: str, emails: int
) -> None:
    crashed = run_host(tmp_path, mode, "crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert sent(tmp_path / "outbox") == 2  # one per turn: the ids repeat, the calls do not

    resumed = run_host(tmp_path, mode, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sent(tmp_path / "outbox") == emails
    messages = json.loads(resumed.stdout)
    kinds = ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert [kind for kind, _ in messages] == kinds * 2
    assert [messages[2][1], messages[6][1]] == ["sent to ada (1)", f"sent to ada ({emails})"]


def test_the_langgraph_extra_carries_the_sqlite_checkpointer_as_installed() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["langgraph"]
    version = importlib.metadata.version("langgraph-checkpoint-sqlite")
    assert f"langgraph-checkpoint-sqlite=={version}" in extra


# --- turns of one thread whose tool call ids repeat ----------------------------------------


@pytest.mark.parametrize("second", [{"to": "ada", "body": "paid"}, {"to": "eve", "body": "due"}])
def test_tool_call_ids_repeating_across_turns_are_separate_calls(
    tmp_path: Path, second: dict[str, str]
) -> None:
    outbox = tmp_path / "outbox"
    turns = [*repeating_ids()[:2], ask("send_email", "call_0", **second), "Done."]
    store = MemoryStore()
    graph = build(
        [outbox_tool(outbox)], model(*turns), InMemorySaver(), **checkpoint_tool_calls(store)
    )
    *_, state = two_turns(graph)

    assert sent(outbox) == 2
    assert state["messages"][6].content == f"sent to {second['to']} (2)"
    keys = [line.split()[-1] for line in lines(outbox)]
    assert len(set(keys)) == 2
    assert len(list(store.keys())) == 2


@pytest.mark.parametrize(("guarded", "emails"), [(False, 3), (True, 2)])
@pytest.mark.parametrize("resume", ["invoke(None)", "RetryPolicy"])
def test_the_second_turn_failing_after_its_effect_is_resumed_once(
    tmp_path: Path, guarded: bool, emails: int, resume: str
) -> None:
    outbox = tmp_path / "outbox"
    guard = ToolCallCheckpoint(MemoryStore()).wrap_tool_call if guarded else None
    seen: list[Any] = []
    retry: RetryPolicy | None = RetryPolicy(retry_on=HostDied, initial_interval=0.01)
    retry = None if resume == "invoke(None)" else retry
    graph = build(
        [outbox_tool(outbox)],
        model(*repeating_ids()),
        InMemorySaver(),
        retry=retry,
        wrap_tool_call=crashing(guard, seen, at=2),
    )
    turns = two_turns(graph)
    next(turns)
    if retry is None:
        with pytest.raises(HostDied):
            next(turns)
        state = graph.invoke(None, CONFIG, durability="sync")
    else:
        state = next(turns)

    assert sent(outbox) == emails
    assert state["messages"][6].content == f"sent to ada ({emails})"
    if guarded:  # the replay is the ToolMessage the crashed attempt produced
        assert isinstance(seen[2], ToolMessage)
        assert seen[2] == seen[1]


@pytest.mark.parametrize(("guarded", "emails"), [(False, 3), (True, 2)])
def test_async_turns_streamed_and_resumed_with_ainvoke_send_once_each(
    tmp_path: Path, guarded: bool, emails: int
) -> None:
    outbox = tmp_path / "outbox"

    async def scenario() -> Any:
        guard = ToolCallCheckpoint(await AsyncSQLiteStore.open(tmp_path / "calls.db"))
        wrap = acrashing(guard.awrap_tool_call if guarded else None, at=2)
        chat = model(*repeating_ids())
        graph = build([outbox_tool(outbox)], chat, InMemorySaver(), awrap_tool_call=wrap)
        async for _ in graph.astream({"messages": [HumanMessage("Tell Ada")]}, CONFIG):
            pass
        with pytest.raises(HostDied):
            async for _ in graph.astream({"messages": [HumanMessage("Again")]}, CONFIG):
                pass
        return await graph.ainvoke(None, CONFIG)

    state = asyncio.run(scenario())
    assert sent(outbox) == emails
    assert state["messages"][6].content == f"sent to ada ({emails})"


def test_an_interrupt_first_tool_in_two_turns_sends_once_per_turn(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    started: list[str] = []
    send_email = approval_tool(outbox, started)

    store = MemoryStore()
    wrappers: Any = checkpoint_tool_calls(store, interrupt_first=("send_email",))
    chat = model(*repeating_ids(to="ada"))
    graph = build([send_email], chat, InMemorySaver(), **wrappers)
    for text in ("Tell Ada", "Tell Ada again"):
        first = graph.invoke({"messages": [HumanMessage(text)]}, CONFIG)
        assert first["__interrupt__"][0].value == "approve?"
        assert {(store.get(key) or {})["status"] for key in list(store.keys())} >= {"released"}
        graph.invoke(Command(resume="yes"), CONFIG)
        graph.invoke(Command(resume="yes"), CONFIG)  # nothing left to resume: no new e-mail
    assert started == ["ada"] * 4  # LangGraph reruns the tool from its top
    assert sent(outbox) == 2


@pytest.mark.parametrize("route", ["one ToolNode task", "a Send per call"])
@pytest.mark.parametrize("recipients", [("ada", "bob"), ("ada", "ada")])
def test_parallel_calls_failing_mid_step_and_resumed_send_once_each(
    tmp_path: Path, route: str, recipients: tuple[str, str]
) -> None:
    outbox = tmp_path / "outbox"
    seen: list[Any] = []
    both = calls(
        *[("send_email", f"call_{n}", {"to": to, "body": "-"}) for n, to in enumerate(recipients)]
    )
    graph = build(
        [outbox_tool(outbox)],
        model(both, "Done."),
        InMemorySaver(),
        route=each_call_sent if route == "a Send per call" else tools_condition,
        wrap_tool_call=crashing(ToolCallCheckpoint(MemoryStore()).wrap_tool_call, seen),
    )
    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Tell them")]}, CONFIG, durability="sync")
    state = graph.invoke(None, CONFIG, durability="sync")

    assert sent(outbox) == 2
    assert all(sent(outbox, to) == recipients.count(to) for to in recipients)
    replies = sorted(m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage))
    assert replies == ["call_0", "call_1"]


# --- a refusal never becomes a rerun --------------------------------------------------------


REFUSALS = [
    ("left unknown by an earlier attempt", None),
    ("left unknown by an earlier attempt", True),
    ("held by an earlier attempt", None),
    ("held by an earlier attempt", True),
    ("left unknown by this attempt", (ValueError,)),  # handle_tool_errors leaves it out
]


@pytest.mark.parametrize(("refusal", "handle_tool_errors"), REFUSALS)
def test_a_refusal_fails_the_run_and_the_model_never_retries_it(
    tmp_path: Path, refusal: str, handle_tool_errors: Any
) -> None:
    outbox = tmp_path / "outbox"
    store = MemoryStore()
    guarded = ToolCallCheckpoint(store).wrap_tool_call
    earlier = ToolGuard(store, tool_name="send_email")  # an attempt of a host now dead

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        if "earlier" not in refusal or request.tool_call["id"] != "call_1":
            return guarded(request, execute)
        call_id, arguments = thread_call_id(request), request.tool_call["args"]
        if "unknown" in refusal:  # it sent, and left the outcome unknown
            with pytest.raises(CallNeedsReconciliation):
                earlier.call(call_id, arguments, lambda: unknown_outcome(outbox, "ada", "paid"))
            return guarded(request, execute)

        def still_running() -> Any:  # it sent, and holds the claim while this call comes
            write(outbox, "ada", "paid")
            return guarded(request, execute)

        return earlier.call(call_id, arguments, still_running)

    tools = [outbox_tool(outbox, unknown_outcome if "this" in refusal else write)]
    options: Any = {} if handle_tool_errors is None else {"handle_tool_errors": handle_tool_errors}
    graph = build(tools, RetryingModel(), InMemorySaver(), wrap_tool_call=wrap, **options)
    expected = CallInFlight if "held" in refusal else CallNeedsReconciliation
    with pytest.raises(expected) as raised:
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)

    assert isinstance(raised.value, GraphBubbleUp)
    assert sent(outbox) == 1
    messages = graph.get_state(CONFIG).values["messages"]
    assert not any(isinstance(m, ToolMessage) for m in messages)  # the model never read it


# --- not_run: a transient error before any effect, and intent -------------------------------


@pytest.mark.parametrize("resume", ["RetryPolicy", "invoke(None)", "not named"])
def test_a_read_that_timed_out_runs_again_when_its_timeout_is_not_run(resume: str) -> None:
    keys: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look up the weather."""
        keys.append(current_idempotency_key())
        if len(keys) == 1:
            raise TimeoutError
        return f"sunny in {city}"

    not_run: Any = {} if resume == "not named" else {"lookup": (TimeoutError,)}
    retry: RetryPolicy | None = RetryPolicy(retry_on=TimeoutError, initial_interval=0.01)
    retry = retry if resume == "RetryPolicy" else None
    graph = build(
        [lookup],
        model(ask("lookup", city="Oslo"), "Done."),
        InMemorySaver(),
        retry=retry,
        **checkpoint_tool_calls(MemoryStore(), not_run=not_run),
    )
    if retry is not None:
        state = graph.invoke({"messages": [HumanMessage("Weather?")]}, CONFIG)
    else:
        with pytest.raises(TimeoutError):
            graph.invoke({"messages": [HumanMessage("Weather?")]}, CONFIG)
        if resume == "not named":  # stored: every resume raises, nothing runs it again
            with pytest.raises(ToolRaisedEarlier):
                graph.invoke(None, CONFIG)
            assert len(keys) == 1
            return
        state = graph.invoke(None, CONFIG)
    assert state["messages"][2].content == "sunny in Oslo"
    assert keys[0] == keys[1]  # the same call: the same downstream key


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_policy_given_to_the_interceptors_reaches_the_call(tmp_path: Path, run: str) -> None:
    """``policy=`` carries what no keyword of checkpoint_tool_calls does (a reconcile hook,
    a write budget): its hook finds the e-mail the first attempt sent and left unknown, and
    the resume hands the model the message it found; nothing is sent again."""
    outbox = tmp_path / "outbox"
    asked: list[StuckCall] = []

    def find(stuck: StuckCall) -> Found:
        asked.append(stuck)
        return Found(ToolMessage("sent to ada (found)", tool_call_id="call_1", name="send_email"))

    graph = build(
        [outbox_tool(outbox, unknown_outcome)],
        model(ask("send_email", to="ada", body="paid"), "Done."),
        InMemorySaver(),
        **checkpoint_tool_calls(MemoryStore(), policy=CallPolicy(reconcile=find)),
    )
    with pytest.raises(CallNeedsReconciliation):
        invoke(graph, run, {"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    state = invoke(graph, run, None, CONFIG)

    assert state["messages"][2].content == "sent to ada (found)"
    assert sent(outbox) == 1
    assert len(asked) == 1


@pytest.mark.parametrize("intent", [None, ("to",), ("to", "subject")])
def test_an_edited_tool_call_is_the_same_call_when_its_intent_is_kept(
    tmp_path: Path, intent: tuple[str, ...] | None
) -> None:
    outbox = tmp_path / "outbox"
    seen: list[Any] = []
    chosen = {} if intent is None else {"send_email": intent}
    guard = ToolCallCheckpoint(MemoryStore(), intent=chosen).wrap_tool_call
    turn = ask("send_email", "call_1", "m-1", to="ada", body="paid")
    graph = build(
        [outbox_tool(outbox)],
        model(turn, "Done."),
        InMemorySaver(),
        wrap_tool_call=crashing(guard, seen),
    )
    if intent == ("to", "subject"):  # a name that is no argument of the tool
        with pytest.raises(CheckpointError) as refused:
            graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
        assert sent(outbox) == 0
        return
    with pytest.raises(HostDied):
        graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    edited = ask("send_email", "call_1", "m-1", to="ada", body="paid, thanks")
    graph.update_state(CONFIG, {"messages": [edited]}, as_node="agent")
    if intent is None:
        with pytest.raises(CheckpointError) as raised:
            graph.invoke(None, CONFIG)
        assert raised.value.code is ErrorCode.BINDING_CONFLICT
    else:
        assert graph.invoke(None, CONFIG)["messages"][2].content == "sent to ada (1)"
    assert sent(outbox) == 1


# --- one turn: the result handed back, what is fingerprinted, the call id ------------------


def test_a_command_result_is_replayed_as_the_same_command() -> None:
    runs: list[str] = []

    @tool
    def book(room: str, runtime: ToolRuntime) -> Command[Any]:
        """Book a room."""
        runs.append(room)
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


def test_injected_state_is_not_fingerprinted_and_update_state_keeps_the_call(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"
    notes: list[str] = []

    @tool
    def send_email(
        to: str, state: Annotated[dict[str, Any], InjectedState], runtime: ToolRuntime
    ) -> str:
        """Send an e-mail."""
        notes.append(state.get("note", ""))
        with outbox.open("a") as written:
            written.write(f"{to}:\n")
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
    tasks = [getattr(r.runtime.execution_info, "task_id", None) for r in requests]
    assert None not in tasks
    assert tasks[0] != tasks[1]  # so the task id cannot be the scope
    assert state["messages"][2].content == "sent to ada for call_1"


def test_the_call_id_is_the_thread_the_message_and_the_tool_call(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    store = MemoryStore()
    ids: list[str] = []

    def recorded(request: ToolCallRequest) -> str:
        ids.append(thread_call_id(request))
        return ids[-1]

    for thread in ("a:b", "b"):
        turn = ask("send_email", "call_1", "msg:1", to="ada", body="paid")
        wrappers = checkpoint_tool_calls(store, call_id=recorded)
        graph = build([outbox_tool(outbox)], model(turn, "Done."), InMemorySaver(), **wrappers)
        graph.invoke({"messages": [HumanMessage("Go")]}, {"configurable": {"thread_id": thread}})
    assert ids == ["3:a:b:5:msg:1:call_1", "1:b:5:msg:1:call_1"]
    assert sent(outbox) == 2  # another thread with the same ids runs its own call


def test_the_call_id_is_refused_where_it_could_merge_two_calls() -> None:
    holder = ask("send_email", "call_1", "m-1")
    expected = "1:t:3:m-1:call_1"
    assert thread_call_id(request_in({"messages": [HumanMessage("x"), holder]})) == expected
    assert thread_call_id(request_in([holder])) == expected
    chat = SimpleNamespace(chat=[holder])
    assert thread_call_id(request_in(chat), messages_key="chat") == expected
    refused: list[Any] = [
        {"messages": []},  # no message holds the call (bare tool calls)
        {"messages": [ask("send_email", "call_1")]},  # the message has no id
        {"messages": [calls(*[("send_email", "call_1", {})] * 2, message_id="m-1")]},
        {"messages": [ask("send_email", "call_0", "m-1"), AIMessage("x", id="m-1"), holder]},
    ]
    for state in refused:
        with pytest.raises(CheckpointError) as raised:
            thread_call_id(request_in(state))
        assert raised.value.code is ErrorCode.INVALID_ARGUMENT
        assert "m-1" not in str(raised.value)
        assert "call_1" not in str(raised.value)


REFUSED = [
    ("no checkpointer", "invoke"),
    ("async store", "invoke"),  # an async store in a sync run
    ("id twice in a message", "ainvoke"),  # two calls would share one id
]


@pytest.mark.parametrize(("case", "run"), REFUSED)
def test_a_call_the_guard_cannot_name_or_store_is_refused_before_it_runs(
    tmp_path: Path, case: str, run: str
) -> None:
    outbox = tmp_path / "outbox"
    store: Any = AsyncSQLiteStore(tmp_path / "c.db") if case == "async store" else MemoryStore()
    turn = ask("send_email", to="ada", body="paid")
    if case == "id twice in a message":
        turn = calls(*[("send_email", "call_0", {"to": "ada", "body": "paid"})] * 2)
    saver = None if case == "no checkpointer" else InMemorySaver()
    graph = build([outbox_tool(outbox)], model(turn), saver, **checkpoint_tool_calls(store))
    with pytest.raises(CheckpointError) as raised:
        invoke(graph, run, {"messages": [HumanMessage("Tell Ada")]}, saver and CONFIG)
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert isinstance(raised.value, GraphBubbleUp)  # whatever handle_tool_errors says
    assert sent(outbox) == 0


@pytest.mark.parametrize("enclosing", [tool_call, call_scope])
def test_an_enclosing_tool_call_or_call_scope_does_not_rename_the_graphs_calls(
    tmp_path: Path, enclosing: Callable[[str], Any]
) -> None:
    outbox = tmp_path / "outbox"
    guard = ToolCallCheckpoint(MemoryStore()).wrap_tool_call
    seen: list[Any] = []
    chat = model(*repeating_ids())
    graph = build(
        [outbox_tool(outbox)], chat, InMemorySaver(), wrap_tool_call=crashing(guard, seen, at=2)
    )
    with pytest.raises(HostDied), enclosing("conv-1"):  # one name around two turns
        for _ in two_turns(graph):
            pass
    with enclosing("conv-1"):  # the resume: a scope would number its calls from 1 again
        state = graph.invoke(None, CONFIG, durability="sync")
    assert sent(outbox) == 2
    assert state["messages"][6].content == "sent to ada (2)"


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


# --- interrupt(): framework control flow --------------------------------------------------


def test_an_interrupt_passes_through_and_its_resume_is_not_run_again(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    started: list[str] = []
    chat = model(ask("send_email", to="ada"), "Done.")
    wrappers: Any = checkpoint_tool_calls(MemoryStore())
    graph = build([approval_tool(outbox, started)], chat, InMemorySaver(), **wrappers)
    first = graph.invoke({"messages": [HumanMessage("Tell Ada")]}, CONFIG)
    assert first["__interrupt__"][0].value == "approve?"

    # Without the guard LangGraph reruns the tool from its top, and the effect happens.
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
