"""The openai-agents adapter in the SDK's own ``Runner`` (offline, tracing off), driven by its
``ScriptedModel`` or by its ``OpenAIChatCompletionsModel`` over a mock transport; every test
counts e-mails. In the kill tests a host is SIGKILLed in ``on_tool_end`` (after the e-mail,
before the SDK stores the output) and a second host resumes from the saved ``RunState`` or
asks the model again with a ``Session``: this file is that host (``python it PHASE WORK MODE``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import httpx2
import pydantic
from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunState,
    SQLiteSession,
    UserError,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from chain_checks import assert_unkeepable_return_types_leave_no_chain
from tool_execution_checkpoint import (
    CallInFlight,
    CallPolicy,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    SQLiteStore,
    StuckCall,
    ToolGuard,
    ToolOutcomeUnknown,
    ToolRaisedEarlier,
    call_scope,
    tool_call,
)
from tool_execution_checkpoint.adapters.openai_agents import (
    checkpoint_error_text,
    checkpointed_tool,
)

set_tracing_disabled(True)
OFFLINE = RunConfig(tracing_disabled=True)
ADA, BOB = "ada@example.com", "bob@example.com"
NOT_AGAIN = "must not be retried"


class Receipt(pydantic.BaseModel):
    message_id: str
    recipients: list[str]


class Outbox:
    """The tool's effect: one line per e-mail sent."""

    LOCK = threading.Lock()  # parallel calls run in worker threads

    def __init__(self, path: Path) -> None:
        self.path = path

    def send(self, to: str) -> Receipt:
        with self.LOCK, self.path.open("a", encoding="utf-8") as handle:
            handle.write(to + "\n")
            handle.flush()
            return Receipt(message_id=f"m-{self.count()}", recipients=[to])

    def lines(self) -> list[str]:
        return self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []

    def count(self) -> int:
        return len(self.lines())


def _email_tool(outbox: Outbox, store: SQLiteStore | None, **options: Any) -> FunctionTool:
    def send_email(to: str) -> Receipt:
        """Send an e-mail to ``to``."""
        return outbox.send(to)

    return function_tool(
        send_email if store is None else checkpointed_tool(store)(send_email), **options
    )


def _outputs(model: ScriptedModel) -> list[str]:
    """The function_call_output items the model was sent, each once, in order."""
    items = model.last_call.input if model.last_call is not None else []
    return [str(i["output"]) for i in items if i.get("type") == "function_call_output"]


async def _drive(agent: Agent[Any], given: Any, *, streamed: bool = False, **options: Any) -> Any:
    """One run of ``agent``, ``Runner.run`` or ``Runner.run_streamed`` read to its end."""
    if not streamed:
        return await Runner.run(agent, given, run_config=OFFLINE, **options)
    result = Runner.run_streamed(agent, given, run_config=OFFLINE, **options)
    async for _ in result.stream_events():
        pass
    return result


def _run(model: Any, tool: FunctionTool, given: Any = "go", **options: Any) -> Any:
    return asyncio.run(_drive(Agent(name="a", model=model, tools=[tool]), given, **options))


def _calls(*calls: tuple[str, str | dict[str, Any]], tool: str = "send_email") -> list[Any]:
    """One model response asking for ``tool`` under each (call id, arguments or ``to``)."""
    return [
        function_call(tool, {"to": given} if isinstance(given, str) else given, call_id=call_id)
        for call_id, given in calls
    ]


def _then_done(*calls: tuple[str, str | dict[str, Any]], tool: str = "send_email") -> ScriptedModel:
    return ScriptedModel([_calls(*calls, tool=tool), [assistant_message("Done.")]])


def _retrying(first: list[Any], *, obeys: bool, retries: int = 2) -> ScriptedModel:
    """A model that asks for ``first``, then calls again, under a new id, every call it is
    told failed (unless, when it ``obeys``, it is told not to retry), ``retries`` times."""
    answered: set[str] = set()
    left = [retries]

    def respond(call: ModelCall) -> list[Any]:
        items = [item for item in call.input if isinstance(item, dict)]
        asked = {item["call_id"]: item for item in items if item.get("type") == "function_call"}
        again = []
        for item in items:
            if item.get("type") != "function_call_output" or item["call_id"] in answered:
                continue
            answered.add(item["call_id"])
            output = str(item["output"]).lower()
            failed = any(word in output for word in ("error", "not answered", "conflict"))
            if failed and left[0] > 0 and not (obeys and NOT_AGAIN in output):
                left[0] -= 1
                ask = asked[item["call_id"]]
                again.append(function_call(ask["name"], ask["arguments"], call_id=f"r-{left[0]}"))
        return again or [assistant_message("Done.")]

    return ScriptedModel([first, *[ModelStep.respond(respond) for _ in range(retries + 1)]])


# --- the host of the kill tests -------------------------------------------------------------


class _DieAfterTheTool(RunHooks[Any]):
    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        del context, agent, tool, result
        os.kill(os.getpid(), signal.SIGKILL)


async def _host(phase: str, work: Path, mode: str) -> None:
    outbox = Outbox(work / "outbox.txt")
    store = None if mode == "bare" else SQLiteStore(work / "checkpoints.sqlite")
    saved, ask = work / "state.json", "Tell Ada her invoice is paid."
    dies = phase.endswith("die")
    hooks = _DieAfterTheTool() if dies else RunHooks[Any]()
    if phase.startswith("session"):  # a turn of a Session conversation, asked again
        model = _then_done(("call_A1" if dies else "call_B1", ADA))
        agent = Agent(name="mailer", model=model, tools=[_email_tool(outbox, store)])
        session = SQLiteSession("conv-42", work / "session.sqlite")
        with call_scope("conv-42/turn-7") if mode == "scoped" else nullcontext():
            result = await _drive(agent, ask, session=session, hooks=hooks)
    else:  # paused for approval, saved; approved and resumed from the saved state
        model = (
            _then_done(("call_A1", ADA)) if dies else ScriptedModel([[assistant_message("Done.")]])
        )
        agent = Agent(
            name="mailer", model=model, tools=[_email_tool(outbox, store, needs_approval=True)]
        )
        if dies:
            paused = await _drive(agent, ask)
            saved.write_text(paused.to_state().to_string(), encoding="utf-8")
        state = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
        state.approve(state.get_interruptions()[0])
        result = await _drive(agent, state, hooks=hooks)
    report = {"final": result.final_output, "outputs": _outputs(model)}
    (work / "report.json").write_text(json.dumps(report), encoding="utf-8")


def _run_host(phase: str, work: Path, mode: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    environment["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    return subprocess.run(
        [sys.executable, __file__, phase, str(work), mode],
        capture_output=True, text=True, timeout=60, env=environment, check=False,
    )  # fmt: skip


def _kill_and_resume(work: Path, mode: str, first: str, then: str) -> tuple[int, dict[str, Any]]:
    work.mkdir()
    died = _run_host(first, work, mode)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert Outbox(work / "outbox.txt").count() == 1  # the e-mail went out before the kill
    resumed = _run_host(then, work, mode)
    assert resumed.returncode == 0, resumed.stderr
    return Outbox(work / "outbox.txt").count(), json.loads((work / "report.json").read_text())


FIRST = str(Receipt(message_id="m-1", recipients=[ADA]))  # the SDK hands the model str()


def test_a_host_killed_after_the_tool_resumes_its_run_state_once(tmp_path: Path) -> None:
    bare, bare_report = _kill_and_resume(tmp_path / "bare", "bare", "state-die", "state-again")
    guarded, report = _kill_and_resume(tmp_path / "guarded", "guarded", "state-die", "state-again")

    assert (bare, guarded) == (2, 1)
    assert report["final"] == bare_report["final"] == "Done."
    assert report["outputs"] == [FIRST]  # the receipt of the e-mail that was sent


@pytest.mark.parametrize(("mode", "emails"), [("scoped", 1), ("guarded", 2)])
def test_a_session_turn_asked_again_after_the_host_died_is_one_call_in_its_call_scope(
    tmp_path: Path, mode: str, emails: int
) -> None:
    count, report = _kill_and_resume(tmp_path / mode, mode, "session-die", "session-again")

    # The model asked again gives a new call id: only the turn's call_scope matches it.
    assert count == emails  # guarded without call_scope: the documented limit
    assert report["final"] == "Done."
    if mode == "scoped":
        assert report["outputs"] == [FIRST]


# --- the SDK's loop: resumes, repeats, parallel and identical calls --------------------------


def test_a_call_id_the_runner_replays_runs_the_tool_once_sync_and_async(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    store = SQLiteStore(tmp_path / "c.sqlite")

    @function_tool(name_override="send_email")
    @checkpointed_tool(store, name="send_email")
    async def send_email_async(to: str) -> Receipt:
        await asyncio.sleep(0)
        return outbox.send(to)

    for tool in (_email_tool(outbox, store), send_email_async):
        for _ in range(2):
            model = _then_done(("call_S", ADA))
            _run(model, tool)
            assert _outputs(model) == [FIRST]
    assert outbox.count() == 1
    schema = _email_tool(outbox, store).params_json_schema  # no context parameter in it
    assert schema == _email_tool(outbox, None).params_json_schema


@pytest.mark.parametrize("streamed", [False, True])
def test_parallel_calls_resumed_twice_from_one_run_state_run_once_each(
    tmp_path: Path, streamed: bool
) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"), needs_approval=True)
    agent = Agent(name="a", model=_then_done(("call_A", ADA), ("call_B", BOB)), tools=[tool])

    async def resume(saved: str) -> Any:
        agent.model = ScriptedModel([[assistant_message("Done.")]])
        state = await RunState.from_string(agent, saved)
        for interruption in state.get_interruptions():
            state.approve(interruption)
        return await _drive(agent, state, streamed=streamed)

    async def main() -> list[Any]:
        saved = (await Runner.run(agent, "go", run_config=OFFLINE)).to_state().to_string()
        # The second resume is the host that died after the first one's e-mails.
        return [await resume(saved), await resume(saved)]

    first, again = asyncio.run(main())

    assert sorted(outbox.lines()) == [ADA, BOB]
    assert first.final_output == again.final_output == "Done."


@pytest.mark.parametrize("streamed", [False, True])
def test_identical_calls_are_two_and_a_turn_asked_again_reordered_is_the_same_calls(
    tmp_path: Path, streamed: bool
) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"))

    def turn(model: ScriptedModel, scope: str | None = None) -> list[str]:
        with call_scope(scope) if scope else nullcontext():  # the stream is read inside it
            asyncio.run(_drive(Agent(name="a", model=model, tools=[tool]), "go", streamed=streamed))
        return _outputs(model)

    # Two identical calls in one response: two ids, or in a scope two occurrences.
    turn(_then_done(("call_1", ADA), ("call_2", ADA)))
    first = turn(_then_done(("a1", ADA), ("b1", BOB), ("a2", ADA)), "conv-42/turn-7")
    again = turn(_then_done(("b9", BOB), ("a8", ADA), ("a9", ADA)), "conv-42/turn-7")

    assert sorted(outbox.lines()) == [ADA, ADA, ADA, ADA, BOB]
    assert sorted(again) == sorted(first)
    assert len(set(first)) == 3


def _chat_model(replies: list[str]) -> OpenAIChatCompletionsModel:
    """The SDK's Chat Completions model over a mock transport: each request is answered by
    the next reply, a call of send_email(ada) under the id ``call_0`` or a text."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        del request
        reply = replies.pop(0)
        function = {"name": "send_email", "arguments": json.dumps({"to": ADA})}
        calls = [{"id": "call_0", "type": "function", "function": function}]
        message: dict[str, Any] = {"role": "assistant", "content": reply, "tool_calls": None}
        if reply == "call_0":
            message.update(content=None, tool_calls=calls)
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx2.Response(200, json={**body, "choices": [choice]})

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = AsyncOpenAI(api_key="-", base_url="http://model.invalid/v1", http_client=http)
    return OpenAIChatCompletionsModel(model="m", openai_client=client)


def test_call_ids_that_repeat_across_turns_are_refused_by_default_and_one_per_turn_in_scope(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"))
    session = SQLiteSession("conv-42", tmp_path / "session.sqlite")

    def turn(number: int, scoped: bool) -> list[str]:
        with call_scope(f"conv-42/turn-{number}") if scoped else nullcontext():
            result = _run(_chat_model(["call_0", "Done."]), tool, "Tell Ada.", session=session)
        return [
            str(item.output) for item in result.new_items if item.type == "tool_call_output_item"
        ]

    # By default: call_0 of turn 2 would be call_0 of turn 1, so neither is taken as named.
    refused = turn(1, scoped=False) + turn(2, scoped=False)
    assert outbox.count() == 0
    assert (
        refused
        == ["This tool call was not run: the host cannot tell it apart. Do not retry it."] * 2
    )
    assert "call_0" not in caplog.text
    assert "example.com" not in caplog.text

    outputs = turn(3, scoped=True) + turn(4, scoped=True) + turn(4, scoped=True)  # 4 retried
    assert outbox.lines() == [ADA, ADA]
    assert outputs[1:] == [str(Receipt(message_id="m-2", recipients=[ADA]))] * 2


# --- a refusal never becomes a rerun --------------------------------------------------------


@contextmanager
def _another_worker_sending(path: Path, outbox: Outbox, scope: str | None) -> Iterator[None]:
    """Another worker (a thread, its own store) holds the claim of send_email(ada), under
    the id ``call_F`` or in ``scope``, and sends once the block is done."""
    inside, done = threading.Event(), threading.Event()

    def body() -> Receipt:
        inside.set()
        done.wait(30)
        return outbox.send(ADA)

    def work() -> None:
        guard = ToolGuard(SQLiteStore(path), tool_name="send_email", namespace="openai-agents")
        with call_scope(scope) if scope else nullcontext():
            guard.call(None if scope else "call_F", {"to": ADA}, body)

    worker = threading.Thread(target=work)
    worker.start()
    assert inside.wait(30)
    try:
        yield
    finally:
        done.set()
        worker.join(30)


def test_a_call_in_flight_is_answered_not_to_retry_and_the_retrying_model_sends_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"))  # the SDK's default text
    model = _retrying(_calls(("call_F", ADA)), obeys=True)

    with _another_worker_sending(tmp_path / "c.sqlite", outbox, scope=None):
        _run(model, tool)

    [output] = _outputs(model)  # told, not asked to try again: no retry
    assert "needs-execution-reconciliation" in output
    assert NOT_AGAIN in output
    assert outbox.count() == 1
    assert "refused" in caplog.text
    for shown in (output, caplog.text):
        assert "call_F" not in shown
        assert "example.com" not in shown


def test_a_binding_conflict_is_answered_not_to_retry_and_nothing_runs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.sqlite")
    outbox = Outbox(tmp_path / "out.txt")
    ToolGuard(store, tool_name="send_email", namespace="openai-agents").call(
        "call_X", {"to": BOB}, lambda: "m-0"
    )
    model = _retrying(_calls(("call_X", ADA)), obeys=True)

    _run(model, _email_tool(outbox, store))

    [output] = _outputs(model)
    assert output.startswith("BINDING_CONFLICT")
    assert NOT_AGAIN in output
    assert outbox.count() == 0


def test_in_a_scope_a_retry_despite_the_text_is_the_same_refused_call(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"))
    model = _retrying(_calls(("call_B1", ADA)), obeys=False)  # retries whatever it is told

    with (
        _another_worker_sending(tmp_path / "c.sqlite", outbox, scope="conv-42/turn-7"),
        pytest.raises(CallInFlight),  # the host's turn fails on leaving its call_scope
        call_scope("conv-42/turn-7"),
    ):
        _run(model, tool)

    outputs = _outputs(model)
    assert len(outputs) == 3
    assert all(NOT_AGAIN in output for output in outputs)
    assert outbox.count() == 1


# --- guard the effect: intent= and not_run= -------------------------------------------------


def test_intent_keeps_a_reworded_argument_of_a_turn_asked_again_one_call(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")

    @function_tool
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"), intent=("to",))
    def send_email(to: str, body: str) -> Receipt:
        del body  # worded anew by the model asked again: not part of the intent
        return outbox.send(to)

    for call_id, body in (("call_A1", "Paid."), ("call_B1", "Your invoice is paid.")):
        with call_scope("conv-42/turn-7"):
            _run(_then_done((call_id, {"to": ADA, "body": body})), send_email)

    assert outbox.count() == 1


@pytest.mark.parametrize(("not_run", "emails"), [((TimeoutError,), 1), ((), 0)])
def test_a_timeout_before_the_effect_in_not_run_lets_the_resume_send(
    tmp_path: Path, not_run: tuple[type[BaseException], ...], emails: int
) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    lookups: list[str] = []

    @function_tool(needs_approval=True, failure_error_function=None)  # errors fail the run
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"), not_run=not_run)
    def send_email(to: str) -> Receipt:
        lookups.append(to)
        if len(lookups) == 1:
            raise TimeoutError("the address book was slow")  # before the e-mail
        return outbox.send(to)

    agent = Agent(name="a", model=_then_done(("call_T", ADA)), tools=[send_email])

    async def resume(saved: str) -> Any:
        agent.model = ScriptedModel([[assistant_message("Done.")]])
        state = await RunState.from_string(agent, saved)
        state.approve(state.get_interruptions()[0])
        return await Runner.run(agent, state, run_config=OFFLINE)

    saved = asyncio.run(Runner.run(agent, "go", run_config=OFFLINE)).to_state().to_string()
    with pytest.raises(UserError) as failed:  # the SDK's error, from the tool's
        asyncio.run(resume(saved))
    assert isinstance(failed.value.__cause__, TimeoutError)
    if emails:
        assert asyncio.run(resume(saved)).final_output == "Done."
    else:  # stored as the call's result: every resume is stuck
        with pytest.raises(UserError) as stuck:
            asyncio.run(resume(saved))
        assert isinstance(stuck.value.__cause__, ToolRaisedEarlier)
    assert outbox.count() == emails


# --- the decorated function, its schema and its errors --------------------------------------


def test_a_stored_error_is_not_run_again_and_the_model_is_told_its_type(tmp_path: Path) -> None:
    attempts: list[str] = []

    @function_tool(failure_error_function=checkpoint_error_text)
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"))
    def charge(amount_cents: int) -> str:
        attempts.append(f"charge {amount_cents}")
        raise TimeoutError("card network slow for card 4242")

    outputs = []
    for _ in range(2):
        model = _then_done(("call_E", {"amount_cents": 500}), tool="charge")
        _run(model, charge)
        outputs += _outputs(model)

    assert attempts == ["charge 500"]
    assert outputs == [
        "An error occurred while running the tool. Please try again.",
        "the tool raised TimeoutError when this call first ran it. It was not run again.",
    ]


def _context(call_id: str, context: object = None) -> ToolContext[Any]:
    return ToolContext(context, tool_name="send_email", tool_call_id=call_id, tool_arguments="{}")


def test_a_replay_returns_the_same_typed_value_and_a_conflict_is_refused(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")

    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    live = send_email(_context("call_T"), ADA)
    replayed = send_email(_context("call_T"), to=ADA)
    assert type(live) is type(replayed) is Receipt
    assert live == replayed
    # In a run the conflict is the model's answer; outside one, the CheckpointError.
    answered = send_email(_context("call_T"), BOB)
    assert isinstance(answered, str)
    assert answered.startswith("BINDING_CONFLICT")
    assert "bob" not in answered
    with pytest.raises(CheckpointError) as raised, tool_call("call_T"):
        send_email(RunContextWrapper(None), BOB)
    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert "example.com" not in str(raised.value)
    assert "call_T" not in str(raised.value)
    assert outbox.count() == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_policy_given_to_the_decorator_reaches_the_call(tmp_path: Path, is_async: bool) -> None:
    """``policy=`` carries a reconcile hook (or a write budget) to the call: the hook finds
    the e-mail the first attempt sent and left unknown, and the model's next attempt of the
    same call gets the receipt it found; nothing is sent again."""
    outbox = Outbox(tmp_path / "out.txt")
    found = Receipt(message_id="m-found", recipients=[ADA])
    asked: list[StuckCall] = []

    def find(stuck: StuckCall) -> Found:
        asked.append(stuck)
        return Found(found)

    def send_email(to: str) -> Receipt:
        outbox.send(to)
        raise ToolOutcomeUnknown("the provider timed out after accepting it")

    async def send_email_async(to: str) -> Receipt:
        return send_email(to)

    guard = checkpointed_tool(MemoryStore(), name="send_email", policy=CallPolicy(reconcile=find))
    guarded = guard(send_email_async if is_async else send_email)

    def call() -> Any:
        answer: Any = guarded(_context("call_U"), ADA)
        return asyncio.run(answer) if is_async else answer

    first = call()  # in a run, a refusal is the model's text
    assert "needs-execution-reconciliation" in first
    assert call() == found
    assert outbox.count() == 1
    assert len(asked) == 1


def test_a_context_parameter_of_the_tool_is_kept_and_left_out_of_the_fingerprint(
    tmp_path: Path,
) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    seen: list[tuple[str, object]] = []

    @function_tool
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"))
    def send_email(ctx: ToolContext[dict[str, str]], to: str) -> Receipt:
        seen.append((ctx.tool_call_id, ctx.context))
        return outbox.send(to)

    for user in ("u-1", "u-2"):  # another context: the same call
        model = _then_done(("call_K", ADA))
        _run(model, send_email, context={"user": user})
        assert _outputs(model) == [FIRST]

    assert seen == [("call_K", {"user": "u-1"})]
    assert "ctx" not in send_email.params_json_schema["properties"]


def test_outside_a_run_the_call_is_named_by_a_tool_call_or_call_scope_block(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")

    @checkpointed_tool(MemoryStore())
    def send_email(ctx: RunContextWrapper[None], to: str) -> Receipt:
        del ctx
        return outbox.send(to)

    with pytest.raises(CheckpointError) as raised:
        send_email(RunContextWrapper(None), ADA)
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert outbox.count() == 0

    with tool_call("conversation-7/step-2"):
        send_email(RunContextWrapper(None), ADA)
        send_email(RunContextWrapper(None), ADA)
    with call_scope("conversation-7/turn-3"):
        send_email(RunContextWrapper(None), ADA)
    assert outbox.count() == 2


def test_a_return_type_the_guard_cannot_keep_is_refused_naming_it_nowhere_in_the_chain() -> None:
    assert_unkeepable_return_types_leave_no_chain(checkpointed_tool(MemoryStore()))


if __name__ == "__main__":
    asyncio.run(_host(sys.argv[1], Path(sys.argv[2]), sys.argv[3]))
