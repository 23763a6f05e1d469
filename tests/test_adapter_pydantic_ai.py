"""The pydantic-ai adapter, in the agent's own run loop driven by pydantic-ai's
``FunctionModel`` (nothing leaves the machine).

The effect count: a run pauses on the tool's approval and the host stores its messages
(``all_messages_json``); the approved run sends the e-mail and then fails before the step
ends (a capability's ``after_tool_execute`` raises, as a host dying there would leave
it); the host resumes as pydantic-ai resumes, from the stored messages with the same
``DeferredToolResults``, and the tool call comes back under the same conversation and tool
call ids: the bare tool sends a second e-mail, the guarded one hands back the stored
receipt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

import pydantic
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
)
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from tool_execution_checkpoint import CheckpointError, ErrorCode, MemoryStore, SQLiteStore
from tool_execution_checkpoint.adapters.pydantic_ai import Checkpointed
from tool_execution_checkpoint.testing.conformance import leaks


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


class ScriptedModel:
    """A FunctionModel's function: at each user prompt, and after each retry, asks for the
    script's next tool call; after a tool's result, answers "done". Records what the tool
    calls returned to it, and the ids of the calls pydantic-ai asked it to retry."""

    def __init__(self, calls: list[tuple[str, dict[str, Any], str]]) -> None:
        self.calls = list(calls)
        self.returned: list[object] = []
        self.retried: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        ask = False
        for part in messages[-1].parts:
            if isinstance(part, UserPromptPart):
                ask = True
            elif isinstance(part, ToolReturnPart) and part.outcome == "retried":
                self.retried.append(part.tool_call_id)
                ask = True
            elif isinstance(part, ToolReturnPart):
                self.returned.append(part.content)
        if ask and self.calls:
            name, arguments, tool_call_id = self.calls.pop(0)
            return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=tool_call_id)])
        return ModelResponse(parts=[TextPart("done")])


class _HostDiesAfterTheTool(AbstractCapability[Any]):
    """Fails the step after the tool returned, before pydantic-ai records its result."""

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        result: Any,
    ) -> Any:
        del ctx, call, tool_def, args, result
        raise ConnectionResetError("the host died before the step ended")


def _mailer(
    model: ScriptedModel, outbox: Outbox, capabilities: list[AbstractCapability[Any]]
) -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(model),
        output_type=[str, DeferredToolRequests],
        capabilities=capabilities,
    )

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    return agent


def _crash_and_resume(work: Path, guarded: bool) -> tuple[int, ScriptedModel]:
    outbox = Outbox(work / "outbox.txt")
    guard: list[AbstractCapability[Any]] = (
        [Checkpointed(SQLiteStore(work / "c.sqlite"))] if guarded else []
    )
    first = ScriptedModel([("send_email", {"to": "ada@example.com"}, "toolu_01")])
    paused = asyncio.run(_mailer(first, outbox, guard).run("Tell Ada her invoice is paid."))
    assert isinstance(paused.output, DeferredToolRequests)
    stored = paused.all_messages_json()  # what the host keeps between runs
    approvals = DeferredToolResults(
        approvals={c.tool_call_id: True for c in paused.output.approvals}
    )

    dying = _mailer(ScriptedModel([]), outbox, [*guard, _HostDiesAfterTheTool()])
    with pytest.raises(ConnectionResetError):
        asyncio.run(
            dying.run(
                message_history=ModelMessagesTypeAdapter.validate_json(stored),
                deferred_tool_results=approvals,
            )
        )
    assert outbox.count() == 1  # the e-mail went out before the failure

    resumed_model = ScriptedModel([])
    resumed = asyncio.run(
        _mailer(resumed_model, outbox, guard).run(
            message_history=ModelMessagesTypeAdapter.validate_json(stored),
            deferred_tool_results=approvals,
        )
    )
    assert resumed.output == "done"
    return outbox.count(), resumed_model


def test_a_resumed_run_after_a_failure_past_the_tool_does_not_send_again(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    (tmp_path / "guarded").mkdir()

    bare_count, bare_model = _crash_and_resume(tmp_path / "bare", guarded=False)
    guarded_count, guarded_model = _crash_and_resume(tmp_path / "guarded", guarded=True)

    assert bare_count == 2  # the resume ran the approved call a second time
    assert guarded_count == 1
    assert bare_model.returned == [Receipt(message_id="m-2", recipients=["ada@example.com"])]
    assert guarded_model.returned == [Receipt(message_id="m-1", recipients=["ada@example.com"])]


# --- runs that replay a call: the same conversation and tool call ids -----------------------


def _run(agent: Agent[Any, str], conversation: str, deps: Any = None) -> str:
    return asyncio.run(agent.run("go", conversation_id=conversation, deps=deps)).output


def _agent(model: ScriptedModel, store: Any, deps_type: type[Any] = str) -> Agent[Any, str]:
    return Agent(FunctionModel(model), deps_type=deps_type, capabilities=[Checkpointed(store)])


def test_a_replay_hands_back_the_same_typed_value_the_bare_tool_returned(tmp_path: Path) -> None:
    outbox, bare_outbox = Outbox(tmp_path / "out.txt"), Outbox(tmp_path / "bare.txt")
    model = ScriptedModel([("send_email", {"to": "ada@example.com"}, "t1")] * 2)
    agent = _agent(model, MemoryStore())

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    _run(agent, "conv-1")
    _run(agent, "conv-1")

    expected = bare_outbox.send("ada@example.com")
    assert outbox.count() == 1
    [live, replayed] = model.returned
    assert type(live) is type(replayed) is Receipt
    assert live == replayed == expected


def test_an_async_tool_runs_once_per_call(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    model = ScriptedModel([("send_email", {"to": "ada@example.com"}, "t1")] * 2)
    agent = _agent(model, SQLiteStore(tmp_path / "c.sqlite"))

    @agent.tool
    async def send_email(ctx: RunContext[str], to: str) -> Receipt:
        assert ctx.tool_call_id == "t1"
        await asyncio.sleep(0)
        return outbox.send(to)

    _run(agent, "conv-1")
    _run(agent, "conv-1")

    assert outbox.count() == 1
    assert model.returned[0] == model.returned[1]


def test_the_same_call_with_other_arguments_is_a_binding_conflict(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    model = ScriptedModel(
        [("send_email", {"to": "ada@example.com"}, "t1"), ("send_email", {"to": "eve@x.org"}, "t1")]
    )
    agent = _agent(model, MemoryStore())

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    _run(agent, "conv-1")
    with pytest.raises(CheckpointError) as raised:
        _run(agent, "conv-1")

    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert "x.org" not in str(raised.value)
    assert "conv-1" not in str(raised.value)
    assert outbox.count() == 1


def test_the_run_context_is_left_out_of_the_fingerprint(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    seen: list[str] = []
    model = ScriptedModel([("send_email", {"to": "ada@example.com"}, "t1")] * 2)
    agent = _agent(model, MemoryStore())

    @agent.tool
    def send_email(ctx: RunContext[str], to: str) -> Receipt:
        seen.append(ctx.deps)
        return outbox.send(to)

    _run(agent, "conv-1", deps="request-1")
    _run(agent, "conv-1", deps="request-2")

    assert seen == ["request-1"]
    assert outbox.count() == 1


def test_the_same_tool_call_id_in_another_conversation_is_another_call(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    model = ScriptedModel([("send_email", {"to": "ada@example.com"}, "call_0")] * 2)
    agent = _agent(model, MemoryStore())

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    _run(agent, "conv-1")
    _run(agent, "conv-2")

    assert outbox.count() == 2
    assert [r.message_id for r in model.returned if isinstance(r, Receipt)] == ["m-1", "m-2"]


def test_model_retry_passes_through_and_the_model_calls_again(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "out.txt")
    model = ScriptedModel(
        [("send_email", {"to": "ada"}, "t1"), ("send_email", {"to": "ada@example.com"}, "t2")]
    )
    agent = _agent(model, SQLiteStore(tmp_path / "c.sqlite"))

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        if "@" not in to:
            raise ModelRetry("give a whole address")
        return outbox.send(to)

    assert _run(agent, "conv-1") == "done"

    assert model.retried == ["t1"]  # pydantic-ai asked the model to redo the first call
    assert model.returned == [Receipt(message_id="m-1", recipients=["ada@example.com"])]
    assert outbox.count() == 1


class OpaqueChainSecret5d1c:
    """A return type pydantic cannot store; its name must show nowhere in the chain."""


@pytest.mark.filterwarnings("ignore:Could not generate return schema:UserWarning")
def test_a_tool_whose_result_cannot_be_stored_is_refused_naming_no_type_in_the_chain() -> None:
    """The refusal was raised inside the ``except``: pydantic's error, naming the type,
    stayed as its ``__context__``. The tool never runs."""
    runs: list[str] = []
    agent = _agent(ScriptedModel([("lookup", {}, "t1")]), MemoryStore())

    @agent.tool_plain
    def lookup() -> OpaqueChainSecret5d1c:
        runs.append("lookup")
        return OpaqueChainSecret5d1c()

    with pytest.raises(CheckpointError) as raised:
        _run(agent, "conv-1")

    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert "pydantic cannot store" in str(raised.value)
    assert leaks(raised.value, OpaqueChainSecret5d1c.__name__) is None
    assert (raised.value.__context__, raised.value.__cause__) == (None, None)
    assert runs == []
