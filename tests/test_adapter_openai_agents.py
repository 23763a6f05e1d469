"""The openai-agents adapter, in the SDK's own ``Runner`` driven by its ``ScriptedModel``
(nothing leaves the machine; tracing is off).

The effect count: a host pauses a run on the tool's approval and saves the ``RunState``,
approves and resumes it, and is SIGKILLed right after the tool sent its e-mail (in the
run's ``on_tool_end`` hook, before the SDK hands the output to the model). A second host
resumes from the saved state, as the SDK resumes, and the tool call comes back with the
same call id: the bare tool sends a second e-mail, the guarded one hands back the stored
receipt. This file is also that host's script (``python this_file.py ...``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import pydantic
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunState,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from chain_checks import assert_unkeepable_return_types_leave_no_chain
from tool_execution_checkpoint import (
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    ToolGuard,
    tool_call,
)
from tool_execution_checkpoint.adapters.openai_agents import (
    checkpoint_error_text,
    checkpointed_tool,
)

set_tracing_disabled(True)
OFFLINE = RunConfig(tracing_disabled=True)


class Receipt(pydantic.BaseModel):
    message_id: str
    recipients: list[str]


class Outbox:
    """The tool's effect: one line per e-mail sent."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def send(self, to: str) -> Receipt:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(to + "\n")
        return Receipt(message_id=f"m-{self.count()}", recipients=[to])

    def count(self) -> int:
        return len(self.path.read_text(encoding="utf-8").splitlines()) if self.path.exists() else 0


def _email_tool(outbox: Outbox, store: SQLiteStore | None, *, needs_approval: bool) -> FunctionTool:
    def send_email(to: str) -> Receipt:
        """Send an e-mail.

        Args:
            to: The recipient.
        """
        return outbox.send(to)

    tool = send_email if store is None else checkpointed_tool(store)(send_email)
    return function_tool(tool, needs_approval=needs_approval)


def _tool_outputs(model: ScriptedModel) -> list[str]:
    """The function_call_output items the model was sent, in order."""
    outputs: list[str] = []
    for call in model.calls:
        items = call.input if isinstance(call.input, list) else []
        outputs.extend(
            str(item["output"])
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        )
    return outputs


# --- the host of the effect-counting test ---------------------------------------------------


class _DieAfterTheTool(RunHooks[Any]):
    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        del context, agent, tool, result
        os.kill(os.getpid(), signal.SIGKILL)


async def _host(phase: str, work: Path, guarded: bool) -> None:
    outbox = Outbox(work / "outbox.txt")
    store = SQLiteStore(work / "checkpoints.sqlite") if guarded else None
    tool = _email_tool(outbox, store, needs_approval=True)
    saved = work / "state.json"
    if phase == "pause-then-die":
        model = ScriptedModel(
            [[function_call("send_email", {"to": "ada@example.com"}, call_id="call_A1")]]
        )
        agent = Agent(name="mailer", model=model, tools=[tool])
        paused = await Runner.run(agent, "Tell Ada her invoice is paid.", run_config=OFFLINE)
        saved.write_text(paused.to_state().to_string(), encoding="utf-8")
        state = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
        state.approve(state.get_interruptions()[0])
        await Runner.run(agent, state, hooks=_DieAfterTheTool(), run_config=OFFLINE)
        raise AssertionError("the host was to be killed after the tool")
    model = ScriptedModel([[assistant_message("Done.")]])
    agent = Agent(name="mailer", model=model, tools=[tool])
    state = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
    state.approve(state.get_interruptions()[0])
    result = await Runner.run(agent, state, run_config=OFFLINE)
    report = {"final": result.final_output, "outputs": _tool_outputs(model)}
    (work / "report.json").write_text(json.dumps(report), encoding="utf-8")


def _run_host(phase: str, work: Path, guarded: bool) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    environment["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    return subprocess.run(
        [sys.executable, __file__, phase, str(work), "guarded" if guarded else "bare"],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        check=False,
    )


def _kill_and_resume(work: Path, guarded: bool) -> tuple[int, dict[str, Any]]:
    died = _run_host("pause-then-die", work, guarded)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert Outbox(work / "outbox.txt").count() == 1  # the e-mail went out before the kill
    resumed = _run_host("resume", work, guarded)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads((work / "report.json").read_text(encoding="utf-8"))
    return Outbox(work / "outbox.txt").count(), report


def test_a_host_killed_after_the_tool_resumes_from_its_state_without_a_second_email(
    tmp_path: Path,
) -> None:
    bare, guarded = tmp_path / "bare", tmp_path / "guarded"
    bare.mkdir()
    guarded.mkdir()

    bare_count, bare_report = _kill_and_resume(bare, guarded=False)
    guarded_count, guarded_report = _kill_and_resume(guarded, guarded=True)

    assert bare_count == 2  # the resume ran the tool call a second time
    assert guarded_count == 1
    assert guarded_report["final"] == bare_report["final"] == "Done."
    # The model is handed the receipt of the e-mail that was sent, not a new one.
    # (the SDK hands the model str() of the returned model).
    assert guarded_report["outputs"] == [
        str(Receipt(message_id="m-1", recipients=["ada@example.com"]))
    ]
    assert bare_report["outputs"] == [
        str(Receipt(message_id="m-2", recipients=["ada@example.com"]))
    ]


# --- in-process: the SDK's loop replaying a call id -----------------------------------------


def _run(agent_tool: FunctionTool, call_id: str, arguments: dict[str, Any]) -> list[str]:
    """One run whose model asks for this tool call: the outputs the model was sent."""
    model = ScriptedModel(
        [[function_call(agent_tool.name, arguments, call_id=call_id)], [assistant_message("ok")]]
    )
    agent = Agent(name="a", model=model, tools=[agent_tool])
    asyncio.run(Runner.run(agent, "go", run_config=OFFLINE))
    return _tool_outputs(model)


def _run_twice(agent_tool: FunctionTool, call_id: str, arguments: dict[str, Any]) -> list[str]:
    """Two runs whose model asks for the same tool call id (a resumed call): the outputs
    the model was sent."""
    return [output for _ in range(2) for output in _run(agent_tool, call_id, arguments)]


def test_a_sync_tool_runs_once_per_call_id_in_the_runner(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    tool = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"), needs_approval=False)

    first, second = _run_twice(tool, "call_S", {"to": "ada@example.com"})

    assert outbox.count() == 1
    assert first == second


def test_an_async_tool_runs_once_per_call_id_in_the_runner(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")

    @function_tool
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"))
    async def send_email(to: str) -> Receipt:
        await asyncio.sleep(0)
        return outbox.send(to)

    first, second = _run_twice(send_email, "call_As", {"to": "ada@example.com"})

    assert outbox.count() == 1
    assert first == second


def test_the_model_sees_the_same_tool_schema_as_for_the_bare_tool(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.txt")
    bare = _email_tool(outbox, None, needs_approval=False)
    guarded = _email_tool(outbox, SQLiteStore(tmp_path / "c.sqlite"), needs_approval=False)

    assert guarded.params_json_schema == bare.params_json_schema
    assert guarded.description == bare.description == "Send an e-mail."
    assert "_checkpoint_tool_context" not in json.dumps(guarded.params_json_schema)


def test_a_stored_error_is_not_run_again_and_the_model_is_told_its_type(tmp_path: Path) -> None:
    attempts: list[str] = []

    @function_tool(failure_error_function=checkpoint_error_text)
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"))
    def charge(amount_cents: int) -> str:
        attempts.append(f"charge {amount_cents}")
        raise TimeoutError("card network slow for card 4242")

    first, second = _run_twice(charge, "call_E", {"amount_cents": 500})

    assert attempts == ["charge 500"]
    assert first == "An error occurred while running the tool. Please try again."
    assert (
        second == "the tool raised TimeoutError when this call first ran it. It was not run again."
    )


def test_a_call_in_flight_is_not_run_and_the_model_is_told_not_to_retry(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.sqlite")
    outbox = Outbox(tmp_path / "out.txt")
    tool = function_tool(
        checkpointed_tool(store)(outbox.send),
        name_override="send",
        failure_error_function=checkpoint_error_text,
    )
    holder = ToolGuard(store, tool_name="send", namespace="openai-agents")

    def hold_the_claim() -> Receipt:  # another attempt, still running when the call comes
        [output] = _run(tool, "call_F", {"to": "ada@example.com"})
        assert "needs-execution-reconciliation" in output
        assert "must not be retried" in output
        assert "ada" not in output
        assert "call_F" not in output
        return Receipt(message_id="m-0", recipients=[])

    holder.call("call_F", {"to": "ada@example.com"}, hold_the_claim)

    assert outbox.count() == 0


# --- the decorated function called with the SDK's ToolContext -------------------------------


def _context(call_id: str, context: object = None) -> ToolContext[Any]:
    return ToolContext(context, tool_name="send_email", tool_call_id=call_id, tool_arguments="{}")


def test_a_replay_returns_the_same_typed_value_the_bare_tool_returned(tmp_path: Path) -> None:
    bare_outbox, outbox = Outbox(tmp_path / "bare.txt"), Outbox(tmp_path / "out.txt")

    def bare(to: str) -> Receipt:
        return bare_outbox.send(to)

    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    expected = bare("ada@example.com")
    live = send_email(_context("call_T"), "ada@example.com")
    replayed = send_email(_context("call_T"), to="ada@example.com")

    assert type(live) is type(replayed) is type(expected) is Receipt
    assert live == replayed == expected
    assert outbox.count() == 1


def test_the_same_call_id_with_other_arguments_is_a_binding_conflict(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")

    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    send_email(_context("call_C"), "ada@example.com")
    with pytest.raises(CheckpointError) as raised:
        send_email(_context("call_C"), "eve@example.com")

    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert "example.com" not in str(raised.value)
    assert "call_C" not in str(raised.value)
    assert outbox.count() == 1


def test_a_context_parameter_of_the_tool_is_left_out_of_the_fingerprint(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    seen: list[object] = []

    @checkpointed_tool(MemoryStore())
    def send_email(ctx: RunContextWrapper[dict[str, str]], to: str) -> Receipt:
        seen.append(ctx.context)
        return outbox.send(to)

    first = send_email(_context("call_X", {"user": "u-1"}), "ada@example.com")
    again = send_email(_context("call_X", {"user": "u-2", "request": "r-9"}), "ada@example.com")

    assert first == again
    assert seen == [{"user": "u-1"}]
    assert outbox.count() == 1


def test_a_tool_with_its_own_context_parameter_keeps_it_in_the_runner(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    seen: list[str] = []

    @function_tool
    @checkpointed_tool(SQLiteStore(tmp_path / "c.sqlite"))
    def send_email(ctx: ToolContext[Any], to: str) -> Receipt:
        seen.append(ctx.tool_call_id)
        return outbox.send(to)

    first, second = _run_twice(send_email, "call_K", {"to": "ada@example.com"})

    assert seen == ["call_K"]
    assert first == second
    assert "ctx" not in send_email.params_json_schema["properties"]


def test_outside_a_run_the_call_id_comes_from_a_tool_call_block(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")

    @checkpointed_tool(MemoryStore())
    def send_email(ctx: RunContextWrapper[None], to: str) -> Receipt:
        assert ctx.context is None
        return outbox.send(to)

    with pytest.raises(CheckpointError) as raised:
        send_email(RunContextWrapper(None), "ada@example.com")
    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert outbox.count() == 0

    with tool_call("conversation-7/step-2"):
        send_email(RunContextWrapper(None), "ada@example.com")
        send_email(RunContextWrapper(None), "ada@example.com")
    assert outbox.count() == 1


if __name__ == "__main__":
    asyncio.run(_host(sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "guarded"))


def test_a_return_type_the_guard_cannot_keep_is_refused_naming_it_nowhere_in_the_chain() -> None:
    assert_unkeepable_return_types_leave_no_chain(checkpointed_tool(MemoryStore()))
