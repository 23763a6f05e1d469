"""The pydantic-ai adapter in the agent's own loop (``FunctionModel``, offline), counting
e-mails. Hosts store ``all_messages_json()`` or the messages after each ``agent.iter`` step
and resume from them with no new prompt (``deferred_tool_results`` after an approval); a
host that died after a step ran its tools resumes from the response whose calls ran, and
pydantic-ai runs them again: the bare tool sends again, the guarded one hands back."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

import pydantic
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability, Hooks, ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from tool_execution_checkpoint import (
    CallNeedsReconciliation,
    CallPolicy,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    SQLiteStore,
    StuckCall,
    ToolOutcomeUnknown,
    ToolRaisedEarlier,
    call_scope,
)
from tool_execution_checkpoint.adapters.pydantic_ai import Checkpointed, default_call_id
from tool_execution_checkpoint.testing.conformance import leaks

Call = tuple[str, dict[str, Any], str]  # tool name, arguments, tool call id


class Receipt(pydantic.BaseModel):
    message_id: str
    recipients: list[str]


class Outbox:
    """The tool's effect: the e-mails sent (parallel calls run in threads)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.lock = threading.Lock()

    def send(self, to: str) -> Receipt:
        with self.lock:
            self.sent.append(to)
            return Receipt(message_id=f"m-{len(self.sent)}", recipients=[to])

    def lines(self) -> list[str]:
        return list(self.sent)


class ScriptedModel:
    """A FunctionModel's function and stream function: each request gets the script's next
    response (its tool calls), or "done" for an empty one or past the script's end. Records
    what the tool calls returned, the calls pydantic-ai asked it to retry, and how many
    requests it got.
    ``stamp`` gives every response that timestamp (a model that stamps them itself)."""

    def __init__(self, responses: list[list[Call]], stamp: datetime | None = None) -> None:
        self.responses = list(responses)
        self.stamp = stamp
        self.returned: list[object] = []
        self.retried: list[str] = []
        self.requests = 0

    def _next(self, messages: list[ModelMessage]) -> list[Call] | None:
        self.requests += 1
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart) and part.outcome == "retried":
                self.retried.append(part.tool_call_id)
            elif isinstance(part, ToolReturnPart):
                self.returned.append(part.content)
        return self.responses.pop(0) if self.responses else None

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        calls = self._next(messages)
        if not calls:
            return ModelResponse(parts=[TextPart("done")])
        parts = [ToolCallPart(name, args, tool_call_id=id_) for name, args, id_ in calls]
        return ModelResponse(parts=parts, timestamp=self.stamp or datetime.now(UTC))

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        del info
        calls = self._next(messages)
        if not calls:
            yield "done"
            return
        yield {
            i: DeltaToolCall(name, json.dumps(args), tool_call_id=id_)
            for i, (name, args, id_) in enumerate(calls)
        }


def _send(to: str, id_: str = "call_0") -> Call:
    return ("send_email", {"to": to}, id_)


def _mailer(
    model: ScriptedModel,
    outbox: Outbox,
    capabilities: list[AbstractCapability[Any]],
    *,
    approval: bool = False,
) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        FunctionModel(model, stream_function=model.stream),
        output_type=[str, DeferredToolRequests] if approval else str,
        capabilities=capabilities,
    )

    @agent.tool_plain(requires_approval=approval)
    def send_email(to: str) -> Receipt:
        return outbox.send(to)

    return agent


def _agent(model: ScriptedModel, *capabilities: AbstractCapability[Any]) -> Agent[None, str]:
    return Agent(FunctionModel(model), capabilities=list(capabilities))


def _host(agent: Agent[Any, Any], prompt: str | None, stored: bytes | None, **kw: Any) -> Any:
    """A host that stores the messages after each step of ``agent.iter``. Returns what it
    stored last and the run's output, or the exception the run raised, or None when it
    died (``die``) after a step ran the tools and before it stored that step."""

    die = kw.pop("die", False)

    async def go() -> tuple[bytes | None, Any]:
        saved = stored
        history = None if stored is None else ModelMessagesTypeAdapter.validate_json(stored)
        try:
            async with agent.iter(prompt, message_history=history, **kw) as run:
                ran_tools = False
                async for node in run:
                    if die and ran_tools:
                        return saved, None
                    saved = ModelMessagesTypeAdapter.dump_json(run.all_messages())
                    ran_tools = Agent.is_call_tools_node(node)
                assert run.result is not None
                return saved, run.result.output
        except Exception as error:
            return saved, error

    return asyncio.run(go())


# --- approval and deferral: pause, approve, die after the tool, resume ----------------------


def _die(_: RunContext[Any], /, **__: Any) -> Any:
    raise ConnectionResetError("the host died after the tool, before the step ended")


Runner = Callable[..., Coroutine[Any, Any, tuple[Any, bytes]]]


async def _run(agent: Agent[None, Any], **kwargs: Any) -> tuple[Any, bytes]:
    done = await agent.run(**kwargs)
    return done.output, done.all_messages_json()


async def _run_stream(agent: Agent[None, Any], **kwargs: Any) -> tuple[Any, bytes]:
    async with agent.run_stream(**kwargs) as result:
        output = await result.get_output()
    return output, result.all_messages_json()


def _crash_and_resume(work: Path, guarded: bool, runner: Runner) -> tuple[list[str], ScriptedModel]:
    outbox = Outbox()
    guard: list[AbstractCapability[Any]] = (
        [Checkpointed(SQLiteStore(work / "c.sqlite"))] if guarded else []
    )
    # Both turns' responses call the tool under the same id, as some models do.
    model = ScriptedModel([[_send("bob@x.org", "toolu_01")], [], [_send("ada@x.org", "toolu_01")]])
    agent = _mailer(model, outbox, guard, approval=True)
    dying = _mailer(model, outbox, [*guard, Hooks(after_tool_execute=_die)], approval=True)

    def step(on: Agent[None, Any], stored: bytes | None, paused: Any = None, **kw: Any) -> Any:
        if stored is not None:
            kw["message_history"] = ModelMessagesTypeAdapter.validate_json(stored)
        if paused is not None:
            approvals: dict[str, Any] = {call.tool_call_id: True for call in paused.approvals}
            kw["deferred_tool_results"] = DeferredToolResults(approvals=approvals)
        return asyncio.run(runner(on, **kw))

    paused, stored = step(agent, None, user_prompt="Tell Bob.")
    done, stored = step(agent, stored, paused)
    assert done == "done"
    paused, stored = step(agent, stored, user_prompt="Tell Ada.")
    with pytest.raises(ConnectionResetError):
        step(dying, stored, paused)
    assert outbox.lines() == ["bob@x.org", "ada@x.org"]  # the e-mail went out before the failure
    model.returned.clear()
    assert step(agent, stored, paused)[0] == "done"
    return outbox.lines(), model


@pytest.mark.parametrize("runner", [_run, _run_stream], ids=["run", "run_stream"])
def test_an_approved_call_resumed_after_the_host_died_past_the_tool_sends_once(
    tmp_path: Path, runner: Runner
) -> None:
    """Fails on e2bca2b: the approved call of the second turn had the first turn's id
    (BINDING_CONFLICT instead of the e-mail)."""
    (tmp_path / "bare").mkdir()
    (tmp_path / "guarded").mkdir()

    bare, bare_model = _crash_and_resume(tmp_path / "bare", False, runner)
    guarded, guarded_model = _crash_and_resume(tmp_path / "guarded", True, runner)

    assert bare == ["bob@x.org", "ada@x.org", "ada@x.org"]  # the resume ran the call again
    assert guarded == ["bob@x.org", "ada@x.org"]
    assert bare_model.returned == [Receipt(message_id="m-3", recipients=["ada@x.org"])]
    assert guarded_model.returned == [Receipt(message_id="m-2", recipients=["ada@x.org"])]


# --- which call is which: responses, turns, batches ------------------------------------------


@pytest.mark.parametrize("second", ["ada@x.org", "bob@x.org"])
@pytest.mark.parametrize("trimmed", [False, True], ids=["whole-history", "trimmed-history"])
def test_tool_call_ids_repeating_across_responses_are_one_effect_each(
    second: str, trimmed: bool
) -> None:
    """Fails on e2bca2b: the later calls got the first call's receipt and sent nothing (the
    same arguments), or failed with BINDING_CONFLICT (other arguments). A history processor
    that keeps two messages puts the responses of a turn at one position in the history."""
    outbox = Outbox()
    # Turn 1: one response. Turn 2: two responses in a row. Every call is "call_0".
    # Then a turn of another conversation.
    script = [[_send("ada@x.org")], [], [_send(second)], [_send(second)], [], [_send(second)], []]
    model = ScriptedModel(script)
    keep_last = [ProcessHistory(lambda messages: messages[-2:])] if trimmed else []
    agent = _mailer(model, outbox, [Checkpointed(MemoryStore()), *keep_last])

    stored, first = _host(agent, "Tell Ada.", None, conversation_id="conv-1")
    _, second_turn = _host(agent, "Tell them twice.", stored)
    _, other = _host(agent, "Tell them.", None, conversation_id="conv-2")

    assert (first, second_turn, other) == ("done", "done", "done")
    assert outbox.lines() == ["ada@x.org", second, second, second]
    receipts = [r.message_id for r in model.returned if isinstance(r, Receipt)]
    assert receipts == ["m-1", "m-2", "m-3", "m-4"]


@pytest.mark.parametrize("guarded", [False, True], ids=["bare", "guarded"])
def test_a_batch_resumed_after_the_host_died_runs_each_call_once(
    tmp_path: Path, guarded: bool
) -> None:
    """A response of three parallel calls, two of them the same intent, in a conversation
    whose earlier turn used the same ids. The host stores each step; it dies after the
    batch ran and resumes from the response. Fails on e2bca2b: the batch's "call_0" got
    the first turn's receipt and sent nothing."""
    outbox = Outbox()
    batch = [
        _send("ada@x.org", "call_0"),
        _send("ada@x.org", "call_1"),
        _send("bob@x.org", "call_2"),
    ]
    model = ScriptedModel([[_send("ada@x.org")], [], batch, []])
    guard = [Checkpointed(SQLiteStore(tmp_path / "c.sqlite"))] if guarded else []
    agent = _mailer(model, outbox, list(guard))

    stored, output = _host(agent, "Tell Ada.", None)
    assert output == "done"
    stored, output = _host(agent, "Tell Ada twice, and Bob.", stored, die=True)
    assert output is None
    assert sorted(outbox.lines()) == ["ada@x.org"] * 3 + ["bob@x.org"]
    model.returned.clear()

    _, output = _host(agent, None, stored)

    assert output == "done"
    assert sorted(outbox.lines()[4:]) == (
        [] if guarded else ["ada@x.org", "ada@x.org", "bob@x.org"]
    )
    ids = sorted(r.message_id for r in model.returned if isinstance(r, Receipt))
    assert ids == (["m-2", "m-3", "m-4"] if guarded else ["m-5", "m-6", "m-7"])


def test_responses_that_carry_one_timestamp_are_refused_not_merged() -> None:
    """A model that stamps its responses itself: the second turn's call cannot be told from
    the first's, so it is refused before it runs, naming no id."""
    outbox = Outbox()
    stamp = datetime(2025, 1, 1, tzinfo=UTC)
    model = ScriptedModel(
        [[_send("ada@x.org", "call_zq7")], [], [_send("ada@x.org", "call_zq7")]], stamp
    )
    agent = _mailer(model, outbox, [Checkpointed(MemoryStore())])

    stored, _ = _host(agent, "go", None, conversation_id="conv-zq7")
    _, error = _host(agent, "again", stored)

    assert isinstance(error, CheckpointError)
    assert error.code is ErrorCode.INVALID_ARGUMENT
    assert leaks(error, "zq7") is None
    assert outbox.lines() == ["ada@x.org"]


# --- the intent: validated arguments, secrets, intent=, call_id= ---------------------------


def _payments(
    model: ScriptedModel, charged: list[str], capability: Checkpointed
) -> Agent[None, str]:
    agent = _agent(model, capability)

    @agent.tool_plain
    def charge(card: pydantic.SecretStr, cents: int, memo: str = "") -> str:
        del memo
        charged.append(card.get_secret_value())
        return f"charged {cents}"

    return agent


def _charge(card: str, memo: str = "") -> list[Call]:
    return [("charge", {"card": card, "cents": 500, "memo": memo}, "call_0")]


def test_secret_arguments_that_differ_are_two_calls_and_equal_ones_one() -> None:
    """The host names each order's turn (call_scope, so that a retried turn is the same
    call); two cards under one order are two charges. Fails on e2bca2b (no call_scope
    there; its fingerprint saw both cards as "**********")."""
    charged: list[str] = []
    model = ScriptedModel(
        [_charge("4111-zq7"), [], _charge("5500-zq7"), [], _charge("5500-zq7"), []]
    )
    agent = _payments(model, charged, Checkpointed(MemoryStore()))

    for _ in range(3):
        with call_scope("order-7"):
            assert agent.run_sync("Charge the order.").output == "done"

    assert charged == ["4111-zq7", "5500-zq7"]


def test_a_call_id_hook_names_the_call_and_a_conflict_shows_no_secret() -> None:
    """``call_id=`` gives the framework id; another card under the same id is refused."""
    charged: list[str] = []
    model = ScriptedModel([_charge("4111-zq7"), [], _charge("4111-zq7"), [], _charge("5500-zq7")])
    agent = _payments(
        model, charged, Checkpointed(MemoryStore(), call_id=lambda ctx: f"order-{ctx.prompt}")
    )

    assert agent.run_sync("7").output == "done"
    assert agent.run_sync("7").output == "done"  # the same order again: handed back
    with pytest.raises(CheckpointError) as raised:
        agent.run_sync("7")

    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert leaks(raised.value, "zq7") is None
    assert charged == ["4111-zq7"]
    assert model.returned == ["charged 500", "charged 500"]


def test_intent_names_the_arguments_that_identify_the_effect() -> None:
    """A retried turn whose model rewords the memo is the same charge."""
    charged: list[str] = []
    model = ScriptedModel([_charge("4111", "thanks"), [], _charge("4111", "many thanks"), []])
    capability = Checkpointed(MemoryStore(), intent={"charge": ["card", "cents"]})
    agent = _payments(model, charged, capability)

    for _ in range(2):
        with call_scope("order-7"):
            agent.run_sync("Charge the order.")

    assert charged == ["4111"]


def test_tools_and_intent_that_are_not_names_are_refused_before_anything_runs() -> None:
    for bad in ({"tools": "charge"}, {"intent": {"charge": "card"}}, {"intent": ["charge"]}):
        with pytest.raises(CheckpointError) as raised:
            Checkpointed(MemoryStore(), **bad)
        assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    charged: list[str] = []
    agent = _payments(
        ScriptedModel([_charge("4111")]),
        charged,
        Checkpointed(MemoryStore(), intent={"charge": ["pan"]}),
    )
    with pytest.raises(CheckpointError) as raised:
        agent.run_sync("go")
    assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, "intent")
    assert charged == []


# --- guard the effect, not the read: a transient error of a lookup --------------------------


@pytest.mark.parametrize(
    "options",
    [{}, {"tools": {"send_email"}}, {"not_run": (TimeoutError,)}],
    ids=["every-tool-guarded", "read-not-guarded", "timeout-not-run"],
)
def test_a_transient_error_of_a_read(options: dict[str, Any]) -> None:
    """The lookup times out once; the host resumes from the stored response. Guarded with
    every error stored, every resume fails for good; not guarding the read, or declaring its
    timeout ``not_run``, lets the resume run it again. Fails on e2bca2b (neither option)."""
    outbox, lookups = Outbox(), []
    lookup_call = ("lookup", {"name": "Ada"}, "call_0")
    model = ScriptedModel([[lookup_call], [_send("ada@x.org", "call_1")], []])
    agent = _mailer(model, outbox, [Checkpointed(MemoryStore(), **options)])

    @agent.tool_plain
    def lookup(name: str) -> str:
        lookups.append(name)
        if len(lookups) == 1:
            raise TimeoutError("the directory did not answer")
        return "ada@x.org"

    stored, error = _host(agent, "Write to Ada.", None)
    assert isinstance(error, TimeoutError)
    _, output = _host(agent, None, stored)

    if options:
        assert output == "done"
        assert (lookups, outbox.lines()) == (["Ada", "Ada"], ["ada@x.org"])
    else:
        assert isinstance(output, ToolRaisedEarlier)
        _, again = _host(agent, None, stored)
        assert isinstance(again, ToolRaisedEarlier)
        assert (lookups, outbox.lines()) == (["Ada"], [])


# --- a refusal ends the run; it never reaches the model as a failure to retry ---------------


class RetryingModel(ScriptedModel):
    """Retries, under a new tool call id, every call whose result says it failed."""

    def _next(self, messages: list[ModelMessage]) -> list[Call] | None:
        calls = super()._next(messages)
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart) and str(part.content).startswith("failed"):
                return [_send("bob@x.org", f"retry_{self.requests}")]
        return calls


def _to_the_model(_: RunContext[Any], /, *, error: Exception, **__: Any) -> Any:
    return f"failed: {type(error).__name__}"  # every tool error becomes a result


@pytest.mark.parametrize("swallowed", [False, True], ids=["propagated", "turned-into-a-result"])
def test_a_binding_conflict_ends_the_run_for_the_host(swallowed: bool) -> None:
    outbox = Outbox()
    model = RetryingModel([[_send("ada@x.org")], [], [_send("bob@x.org")]])
    guard = Checkpointed(MemoryStore(), call_id=lambda _: "order-7")
    agent = _mailer(
        model, outbox, [guard, *([Hooks(tool_execute_error=_to_the_model)] if swallowed else [])]
    )
    assert agent.run_sync("Tell Ada.").output == "done"
    requests = model.requests

    with pytest.raises(CheckpointError) as raised:
        agent.run_sync("Tell Bob.")

    assert raised.value.code is ErrorCode.BINDING_CONFLICT
    assert model.requests == requests + 1  # the model was not asked again
    assert outbox.lines() == ["ada@x.org"]


def test_an_uncertain_call_resumed_raises_for_the_host_and_sends_nothing() -> None:
    """The tool sent, then asked the model to retry (the execution is marked uncertain);
    the host died before storing the step. The resume of that call refuses."""
    outbox = Outbox()
    model = ScriptedModel([[_send("ada@x.org")], []])
    agent = _agent(model, Checkpointed(MemoryStore()))

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        outbox.send(to)
        raise ModelRetry("say it again")

    stored, output = _host(agent, "Tell Ada.", None, die=True)
    assert output is None
    requests = model.requests
    _, error = _host(agent, None, stored)

    assert isinstance(error, CallNeedsReconciliation)
    assert model.requests == requests
    assert outbox.lines() == ["ada@x.org"]


def test_a_policy_given_to_the_capability_reaches_the_call() -> None:
    """``policy=`` carries a reconcile hook (or a write budget) to the call: the hook finds
    the e-mail the first run sent and left unknown, and the resume from the stored messages
    hands the model the receipt it found; nothing is sent again."""
    outbox = Outbox()
    found = Receipt(message_id="m-found", recipients=["ada@x.org"])
    asked: list[StuckCall] = []

    def find(stuck: StuckCall) -> Found:
        asked.append(stuck)
        return Found(found)

    model = ScriptedModel([[_send("ada@x.org")], []])
    agent = _agent(model, Checkpointed(MemoryStore(), policy=CallPolicy(reconcile=find)))

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        outbox.send(to)
        raise ToolOutcomeUnknown("the provider timed out after accepting it")

    stored, error = _host(agent, "Tell Ada.", None)
    assert isinstance(error, CallNeedsReconciliation)
    _, output = _host(agent, None, stored)

    assert output == "done"
    assert model.returned[-1] == found
    assert outbox.lines() == ["ada@x.org"]
    assert len(asked) == 1


# --- async tools, the RunContext, ModelRetry, a result that cannot be stored ---------------


def test_an_async_tool_with_its_run_context_runs_once_and_the_context_is_no_argument(
    tmp_path: Path,
) -> None:
    """The resume runs with other deps: the call is the same (the RunContext is not
    fingerprinted), so the tool does not run again."""
    outbox, seen = Outbox(), []
    model = ScriptedModel([[_send("ada@x.org")], []])
    agent: Agent[str, str] = Agent(
        FunctionModel(model),
        deps_type=str,
        capabilities=[Checkpointed(SQLiteStore(tmp_path / "c"))],
    )

    @agent.tool
    async def send_email(ctx: RunContext[str], to: str) -> Receipt:
        seen.append(ctx.deps)
        await asyncio.sleep(0)
        return outbox.send(to)

    stored, _ = _host(agent, "go", None, die=True, deps="request-1")
    _, output = _host(agent, None, stored, deps="request-2")

    assert output == "done"
    assert seen == ["request-1"]
    assert model.returned == [Receipt(message_id="m-1", recipients=["ada@x.org"])]


def test_model_retry_passes_through_and_the_model_calls_again() -> None:
    outbox = Outbox()
    model = ScriptedModel([[_send("ada", "t1")], [_send("ada@x.org", "t2")], []])
    agent = _agent(model, Checkpointed(MemoryStore()))

    @agent.tool_plain
    def send_email(to: str) -> Receipt:
        if "@" not in to:
            raise ModelRetry("give a whole address")
        return outbox.send(to)

    assert agent.run_sync("go").output == "done"

    assert model.retried == ["t1"]  # pydantic-ai asked the model to redo the first call
    assert model.returned == [Receipt(message_id="m-1", recipients=["ada@x.org"])]
    assert outbox.lines() == ["ada@x.org"]


class OpaqueChainSecret5d1c:
    """A return type pydantic cannot store; its name must show nowhere in the chain."""


@pytest.mark.filterwarnings("ignore:Could not generate return schema:UserWarning")
def test_a_tool_whose_result_cannot_be_stored_is_refused_naming_no_type_in_the_chain() -> None:
    """The refusal was raised inside the ``except``: pydantic's error, naming the type,
    stayed as its ``__context__``. The tool never runs."""
    runs: list[str] = []
    model = ScriptedModel([[("lookup", {}, "t1")]])
    agent = _agent(model, Checkpointed(MemoryStore()))

    @agent.tool_plain
    def lookup() -> OpaqueChainSecret5d1c:
        runs.append("lookup")
        return OpaqueChainSecret5d1c()

    with pytest.raises(CheckpointError) as raised:
        agent.run_sync("go")

    assert raised.value.code is ErrorCode.INVALID_ARGUMENT
    assert "pydantic cannot store" in str(raised.value)
    assert leaks(raised.value, OpaqueChainSecret5d1c.__name__) is None
    assert (raised.value.__context__, raised.value.__cause__) == (None, None)
    assert runs == []


def test_the_default_call_id_refuses_a_call_it_cannot_place() -> None:
    """Outside a response of the run's messages, or with no conversation, no id is made up."""
    response: ModelMessage = ModelResponse(
        parts=[ToolCallPart("send_email", {}, tool_call_id="call_zq7")]
    )
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), conversation_id="c-1")
    ctx.tool_call_id, ctx.messages = "call_zq7", [response]
    assert default_call_id(ctx).endswith("Z/call_zq7")
    for ctx.tool_call_id, ctx.messages in (("call_zq8", [response]), (None, [response])):
        with pytest.raises(CheckpointError) as raised:
            default_call_id(ctx)
        assert (raised.value.code, raised.value.field) == (ErrorCode.INVALID_ARGUMENT, "call_id")
        assert leaks(raised.value, "zq") is None
