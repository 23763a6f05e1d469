"""The anthropic adapter in the SDK's own runners, offline, counting e-mails.

The Messages tool runner (sync, async, ``stream=True``) talks to :class:`Model`, a fake
Messages API behind an ``httpx2.MockTransport``; the retried turn whose result POST fails
also runs against examples/messages_retry.py's server on 127.0.0.1. The Sessions tool
runner talks to examples/anthropic_sessions.py's fake Sessions API on 127.0.0.1; the host
SIGKILLed mid-call and a second host attaching is that example, run by
tests/test_examples_anthropic.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import itertools
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

import httpx2  # noqa: E402
from anthropic.lib.tools import beta_async_tool, beta_tool  # noqa: E402
from opentelemetry import trace  # noqa: E402

from chain_checks import assert_unkeepable_return_types_leave_no_chain  # noqa: E402
from test_examples_anthropic import offline_environment  # noqa: E402
from tool_execution_checkpoint import (  # noqa: E402
    CallNeedsReconciliation,
    CallPolicy,
    ErrorCode,
    Found,
    MemoryStore,
    SQLiteStore,
    StuckCall,
    ToolOutcomeUnknown,
    call_scope,
    tool_call,
)
from tool_execution_checkpoint.adapters.anthropic import (  # noqa: E402
    CallNotNamed,
    checkpointed_tool,
    session_client,
)

ROOT = Path(__file__).resolve().parents[1]
ADA, BOB = {"to": "ada@example.com"}, {"to": "bob@example.com"}


def _example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"{name}_example", ROOT / "examples" / name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MESSAGES = _example("messages_retry.py")
SESSIONS = _example("anthropic_sessions.py")


# --- a fake Messages API --------------------------------------------------------------------


@dataclasses.dataclass
class Model:
    """The Messages API, offline. For each prompt (a request not carrying tool results)
    the model asks for the next calls of ``asks`` under new tool-use ids. A request that
    carries tool results is answered 500 (nothing kept) if its number (0, 1, ...) is in
    ``failing``; else its results are kept and, with ``retries_failures``, the model calls
    again, once, each call whose result was an error; else it ends the turn."""

    asks: list[list[dict[str, Any]]]
    failing: set[int] = dataclasses.field(default_factory=set)
    retries_failures: bool = False
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    posts: int = 0
    retried: bool = False
    ids: Iterator[int] = dataclasses.field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.asks = list(self.asks)  # popped: a parametrized list is shared between tests

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        messages = body["messages"]
        last = messages[-1]["content"]
        results = [b for b in ([] if isinstance(last, str) else last) if b["type"] == "tool_result"]
        if not results:
            return self._reply(body, self._calls(self.asks.pop(0)), "tool_use")
        self.posts += 1
        if self.posts - 1 in self.failing:
            error = {"type": "error", "error": {"type": "api_error", "message": "Internal"}}
            return httpx2.Response(500, json=error)
        self.results.extend(results)
        failed = {r["tool_use_id"] for r in results if r.get("is_error")}
        if self.retries_failures and failed and not self.retried:
            self.retried = True
            asked = [b for b in messages[-2]["content"] if b.get("id") in failed]
            return self._reply(body, self._calls([b["input"] for b in asked]), "tool_use")
        return self._reply(body, [{"type": "text", "text": "Done."}], "end_turn")

    def _calls(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                "type": "tool_use",
                "id": f"toolu_{next(self.ids):02d}",
                "name": "send_email",
                "input": arguments,
            }
            for arguments in inputs
        ]

    @staticmethod
    def _reply(body: dict[str, Any], content: list[dict[str, Any]], stop: str) -> httpx2.Response:
        usage = {"input_tokens": 10, "output_tokens": 10}
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return httpx2.Response(200, json=message)
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}
        ]
        for index, block in enumerate(content):
            if block["type"] == "tool_use":
                arguments = json.dumps(block["input"])
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": arguments}
            else:
                start, delta = (
                    {"type": "text", "text": ""},
                    {"type": "text_delta", "text": block["text"]},
                )
            events += [
                {"type": "content_block_start", "index": index, "content_block": start},
                {"type": "content_block_delta", "index": index, "delta": delta},
                {"type": "content_block_stop", "index": index},
            ]
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    def client(self) -> Any:
        transport = httpx2.MockTransport(self.handle)
        return anthropic.Anthropic(
            api_key="sk-ant-dummy",
            base_url="http://model.invalid",
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        )

    def async_client(self) -> Any:
        transport = httpx2.MockTransport(self.handle)
        return anthropic.AsyncAnthropic(
            api_key="sk-ant-dummy",
            base_url="http://model.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=transport),
        )


def prompt(turn: int) -> list[dict[str, Any]]:
    """The conversation up to turn ``turn``'s prompt (the fake reads only the last)."""
    said: list[dict[str, Any]] = []
    for number in range(7, turn):
        said += [
            {"role": "user", "content": f"Turn {number}."},
            {"role": "assistant", "content": "Done."},
        ]
    return [*said, {"role": "user", "content": f"Turn {turn}: e-mail them that it is paid."}]


def send_email_tool(
    outbox: list[str],
    store: Any = None,
    *,
    is_async: bool = False,
    fail_first: type[Exception] | None = None,
    **options: Any,
) -> Any:
    """``send_email`` as a ``beta_tool``: the e-mail is a line in ``outbox``. Guarded by
    the adapter unless ``store`` is None. ``fail_first`` is raised by the first call:
    after the e-mail for ToolOutcomeUnknown, before it otherwise."""
    failures = [fail_first] if fail_first else []

    def send(to: str) -> str:
        if failures and failures[0] is not ToolOutcomeUnknown:
            raise failures.pop()("the provider timed out")
        outbox.append(to)
        if failures:
            raise failures.pop()("the provider timed out after the e-mail")
        return f"m-{len(outbox)}"

    def send_email(to: str, body: str = "Your invoice is paid.") -> str:  # noqa: ARG001
        """Send an e-mail."""
        return send(to)

    async def send_email_async(to: str, body: str = "Your invoice is paid.") -> str:  # noqa: ARG001
        """Send an e-mail."""
        return send(to)

    guard = checkpointed_tool(store, name="send_email", **options) if store is not None else None
    if is_async:
        return beta_async_tool(
            guard(send_email_async) if guard else send_email_async, name="send_email"
        )
    return beta_tool(guard(send_email) if guard else send_email)


def run_turn(client: Any, tool: Any, turn: int, *, scope: bool = True, **runner: Any) -> int:
    """The host: attempt turn ``turn`` in the SDK's Messages tool runner, inside
    ``call_scope`` named for the turn, until it ends; return the attempts."""
    for attempt in range(1, 4):
        with call_scope(f"conv-42/turn-{turn}") if scope else nullcontext():
            made = client.beta.messages.tool_runner(
                model="claude-sonnet-4-5",
                max_tokens=256,
                tools=[tool],
                messages=prompt(turn),
                thread=False,
                **runner,
            )
            try:
                if runner.get("stream"):
                    for stream in made:
                        for _ in stream:
                            pass
                else:
                    made.until_done()
            except anthropic.APIStatusError:
                continue
            return attempt
    raise AssertionError("the turn never ended")


def answers(model: Model) -> list[str]:
    """The tool results the model accepted, as their text."""
    return [
        r["content"] if isinstance(r["content"], str) else r["content"][0]["text"]
        for r in model.results
    ]


# --- the Messages tool runner ------------------------------------------------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in offline_environment().items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(("guarded", "emails"), [(True, 1), (False, 2)])
@pytest.mark.usefixtures("offline")
def test_a_retried_turn_sends_the_email_once_only_with_the_guard(
    tmp_path: Path, guarded: bool, emails: int
) -> None:
    """examples/messages_retry.py's server: the first result POST fails with 500, the
    retried turn's model asks again under toolu_B."""
    server = MESSAGES.FakeMessages()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    outbox: list[str] = []
    client = anthropic.Anthropic(api_key="sk-ant-dummy", base_url=server.base_url, max_retries=0)
    try:
        with SQLiteStore(tmp_path / "checkpoints.db") as store:
            tool = send_email_tool(outbox, store if guarded else None)
            runner = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 256,
                "tools": [tool],
                "thread": False,
            }
            for _attempt in range(2):
                with call_scope("conv-42/turn-7"):
                    try:
                        made = client.beta.messages.tool_runner(
                            messages=[MESSAGES.PROMPT], **runner
                        )
                        made.until_done()
                    except anthropic.APIStatusError:
                        continue
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert outbox == ["ada@example.com"] * emails
    (accepted,) = server.results
    assert accepted["tool_use_id"] == "toolu_B"
    assert accepted["content"] == f"m-{emails}"  # the stored result, or a second e-mail's


@pytest.mark.parametrize(
    ("asks", "emails", "delivered"),
    [
        ([[ADA], [ADA]], ["ada@example.com"], ["m-1"]),  # new tool-use ids on the retry
        ([[ADA, BOB], [BOB, ADA]], ["ada@example.com", "bob@example.com"], ["m-2", "m-1"]),
        ([[ADA, ADA], [ADA, ADA]], ["ada@example.com"] * 2, ["m-1", "m-2"]),
    ],
    ids=["new-ids", "reordered", "identical-twice"],
)
@pytest.mark.parametrize("stream", [None, "stream", "stream-eagerly"])
def test_a_retried_turn_gets_each_intended_effect_once(
    asks: list[list[dict[str, Any]]], emails: list[str], delivered: list[str], stream: str | None
) -> None:
    """The first attempt's result POST fails; the retried turn's model asks again, under
    new tool-use ids, in the order given, and would call again what it is told failed."""
    model = Model(asks, failing={0}, retries_failures=True)
    outbox: list[str] = []
    options = {"stream": True, "run_tools_eagerly": stream == "stream-eagerly"} if stream else {}
    tool = send_email_tool(outbox, MemoryStore())
    assert run_turn(model.client(), tool, 7, **options) == 2
    assert outbox == emails
    assert answers(model) == delivered


@pytest.mark.parametrize(("intent", "emails"), [(("to",), 1), (None, 2)])
def test_a_reworded_argument_outside_the_intent_is_the_same_call(
    intent: tuple[str, ...] | None, emails: int
) -> None:
    reworded = [[{**ADA, "body": "Paid."}], [{**ADA, "body": "Your invoice is paid now."}]]
    model = Model(reworded, failing={0})
    outbox: list[str] = []
    run_turn(model.client(), send_email_tool(outbox, MemoryStore(), intent=intent), 7)
    assert outbox == ["ada@example.com"] * emails


def test_identical_intents_in_two_turns_are_two_calls() -> None:
    model = Model([[ADA], [ADA], [ADA]], failing={1})
    outbox: list[str] = []
    client, tool = model.client(), send_email_tool(outbox, MemoryStore())
    assert run_turn(client, tool, 7) == 1
    assert run_turn(client, tool, 8) == 2  # its first result POST fails
    assert outbox == ["ada@example.com"] * 2
    assert answers(model) == ["m-1", "m-2"]


def test_a_refused_call_the_model_retries_runs_nothing_and_fails_the_hosts_turn() -> None:
    """The first call's e-mail goes out and the tool cannot tell (ToolOutcomeUnknown): the
    record is uncertain. The model is told so and retries anyway, under a new id."""
    model = Model([[ADA]], retries_failures=True)
    outbox: list[str] = []
    tool = send_email_tool(outbox, MemoryStore(), fail_first=ToolOutcomeUnknown)
    with pytest.raises(CallNeedsReconciliation):
        run_turn(model.client(), tool, 7)
    assert outbox == ["ada@example.com"]
    assert model.retried
    assert [r["is_error"] for r in model.results] == [True, True]
    for said in answers(model):
        assert said.startswith(
            "The tool call was not answered (needs-execution-reconciliation). Do not call"
        )
        for value in ("ada@", "toolu", "conv-42", "timed out"):
            assert value not in said


def test_a_transient_error_before_the_effect_is_not_stored_and_the_retry_runs() -> None:
    model = Model([[ADA]], retries_failures=True)
    outbox: list[str] = []
    tool = send_email_tool(outbox, MemoryStore(), fail_first=TimeoutError, not_run=(TimeoutError,))
    assert run_turn(model.client(), tool, 7) == 1
    assert outbox == ["ada@example.com"]
    assert [r.get("is_error", False) for r in model.results] == [True, False]
    assert answers(model)[1] == "m-1"


def test_a_call_nothing_names_fails_the_hosts_turn_and_the_model_is_told_nothing() -> None:
    model = Model([[ADA]])
    outbox: list[str] = []
    with pytest.raises(CallNotNamed) as caught:
        run_turn(model.client(), send_email_tool(outbox, MemoryStore()), 7, scope=False)
    assert outbox == []
    assert model.results == []
    assert caught.value.error.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.error.field == "call_id"
    assert "call_scope" in str(caught.value)
    assert caught.value.__context__ is None
    assert caught.value.__cause__ is None


def test_the_async_runner_takes_the_same_path() -> None:
    async def turn(model: Model, tool: Any, *, scope: bool = True) -> None:
        for _attempt in range(2):
            with call_scope("conv-42/turn-7") if scope else nullcontext():
                runner = model.async_client().beta.messages.tool_runner(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    tools=[tool],
                    messages=prompt(7),
                    thread=False,
                )
                try:
                    await runner.until_done()
                except anthropic.APIStatusError:
                    continue
                return

    model = Model([[ADA, BOB], [BOB, ADA]], failing={0})
    outbox: list[str] = []
    asyncio.run(turn(model, send_email_tool(outbox, MemoryStore(), is_async=True)))
    assert outbox == ["ada@example.com", "bob@example.com"]
    assert answers(model) == ["m-2", "m-1"]
    model = Model([[ADA]])
    outbox.clear()
    with pytest.raises(CallNotNamed):
        asyncio.run(turn(model, send_email_tool(outbox, MemoryStore(), is_async=True), scope=False))
    assert outbox == []
    assert model.results == []


def test_an_explicit_call_id_is_used_outside_the_runners() -> None:
    outbox: list[str] = []
    send_email = send_email_tool(outbox, MemoryStore())
    with pytest.raises(CallNotNamed):
        send_email.call(ADA)
    with tool_call("app-call-1"):
        assert send_email.call(ADA) == send_email.call(ADA) == "m-1"
        with pytest.raises(anthropic.lib.tools.ToolError) as refused:  # another binding
            send_email.call(BOB)
    assert str(refused.value).startswith("The tool call was refused (BINDING_CONFLICT).")
    assert refused.value.__context__ is None
    assert refused.value.__cause__ is None
    assert outbox == ["ada@example.com"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_policy_given_to_the_decorator_reaches_the_call(is_async: bool) -> None:
    """``policy=`` carries a reconcile hook (or a write budget) to the call: the hook finds
    the e-mail the first attempt sent and left unknown, and the next attempt of the same
    call gets what it found; nothing is sent again."""
    outbox: list[str] = []
    asked: list[StuckCall] = []

    def find(stuck: StuckCall) -> Found:
        asked.append(stuck)
        return Found("m-found")

    send_email = send_email_tool(
        outbox,
        MemoryStore(),
        is_async=is_async,
        fail_first=ToolOutcomeUnknown,
        policy=CallPolicy(reconcile=find),
    )

    def call() -> Any:
        answer = send_email.call(ADA)
        return asyncio.run(answer) if is_async else answer

    with tool_call("app-call-1"):
        with pytest.raises(anthropic.lib.tools.ToolError) as refused:
            call()
        assert call() == "m-found"
    assert "needs-execution-reconciliation" in str(refused.value)
    assert outbox == ["ada@example.com"]
    assert len(asked) == 1


def test_a_return_type_the_guard_cannot_keep_is_refused_naming_it_nowhere_in_the_chain() -> None:
    assert_unkeepable_return_types_leave_no_chain(checkpointed_tool(MemoryStore()))


# --- the Sessions tool runner ------------------------------------------------------------


def call_ids(store: MemoryStore) -> list[str]:
    keys = list(store.keys())
    records = [store.get(key) for key in keys]
    return sorted(str(record["binding"]["callId"]) for record in records if record is not None)


def run_session(
    turns: list[list[tuple[str, dict[str, Any]]]],
    tool: Any,
    *,
    through: Callable[[Any], Any] = session_client,
    around: Callable[[], Any] = nullcontext,
) -> list[dict[str, Any]]:
    """One host in the SDK's Sessions tool runner against the example's fake session,
    until the session's last turn ends; return the results the session got."""
    server = SESSIONS.FakeSessions(turns, hold_first_post=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def host() -> None:
        client = anthropic.AsyncAnthropic(
            api_key="sk-ant-dummy", base_url=server.base_url, max_retries=0
        )
        try:
            with around():
                runner = through(client).beta.sessions.events.tool_runner(
                    SESSIONS.SESSION_ID, tools=[tool], max_idle=0.3
                )
                async for _call in runner:
                    pass
        finally:
            await client.close()

    try:
        asyncio.run(host())
    finally:
        server.close()
    return list(server.results)


SAME_TURN = [[("sevt_A", ADA), ("sevt_B", ADA)]]
TWO_TURNS = [[("sevt_A", ADA)], [("sevt_B", ADA)]]


@pytest.mark.parametrize("turns", [SAME_TURN, TWO_TURNS], ids=["same-turn", "two-turns"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync-tool", "async-tool"])
@pytest.mark.usefixtures("offline")
def test_sessions_two_identical_calls_in_one_thread_are_two_calls(
    turns: list[list[tuple[str, dict[str, Any]]]], is_async: bool
) -> None:
    """Also the pin on the SDK's shape: the event id reaches the guard through the span
    of the tool run; were it lost, the call would be refused (CallNotNamed)."""
    store = MemoryStore()
    outbox: list[str] = []
    results = run_session(turns, send_email_tool(outbox, store, is_async=is_async))
    assert outbox == ["ada@example.com"] * 2
    assert [r["content"][0]["text"] for r in results] == ["m-1", "m-2"]
    assert call_ids(store) == [f"{SESSIONS.SESSION_ID}/sevt_A", f"{SESSIONS.SESSION_ID}/sevt_B"]


@pytest.mark.usefixtures("offline")
def test_sessions_a_runner_not_made_from_session_client_refuses_before_anything_runs() -> None:
    outbox: list[str] = []
    with pytest.raises(BaseExceptionGroup) as caught:
        run_session(SAME_TURN, send_email_tool(outbox, MemoryStore()), through=lambda c: c)
    (refusal,) = caught.value.exceptions
    assert isinstance(refusal, CallNotNamed)
    assert "session_client" in str(refusal)
    assert outbox == []


@pytest.mark.parametrize(
    ("around", "emails", "named"),
    [
        (lambda: tool_call("app-call-1"), 1, ["app-call-1"]),
        (lambda: call_scope("app-turn-1"), 2, ["app-turn-1/send_email/", "app-turn-1/send_email/"]),
    ],
    ids=["tool_call", "call_scope"],
)
@pytest.mark.usefixtures("offline")
def test_sessions_an_explicit_block_wins_over_the_session_event(
    around: Callable[[], Any], emails: int, named: list[str]
) -> None:
    store = MemoryStore()
    outbox: list[str] = []
    run_session(SAME_TURN, send_email_tool(outbox, store), around=around)
    assert outbox == ["ada@example.com"] * emails
    ids = call_ids(store)
    assert len(ids) == len(named)
    assert all(call_id.startswith(prefix) for call_id, prefix in zip(ids, named, strict=True))


class Recorder(trace.TracerProvider):
    """An application's tracer provider: it records the names of the spans started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def get_tracer(self, *_args: Any, **_kwargs: Any) -> trace.Tracer:
        recorder = self

        class Tracer(trace.NoOpTracer):
            def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
                recorder.names.append(name)
                return super().start_span(name, *args, **kwargs)

        return Tracer()


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("traces", [True, False])
def test_sessions_the_client_keeps_the_applications_telemetry(traces: bool) -> None:
    """The application's spans go where they went, and none when its traces were off."""
    recorder = Recorder()
    outbox: list[str] = []

    def through(client: Any) -> Any:
        return session_client(
            client.with_options(open_telemetry={"tracer_provider": recorder, "traces": traces})
        )

    run_session(SAME_TURN, send_email_tool(outbox, MemoryStore()), through=through)
    assert outbox == ["ada@example.com"] * 2
    tool_runs = [name for name in recorder.names if name.endswith("_tool_use send_email")]
    assert tool_runs == (["anthropic.custom_tool_use send_email"] * 2 if traces else [])
    assert bool(recorder.names) is traces
