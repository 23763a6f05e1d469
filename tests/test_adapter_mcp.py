"""The MCP adapter: a real MCP client calls a real ``MCPServer`` (mcp 2.x) whose tools are
guarded by ``checkpointed_tool``, over the SDK's in-memory transport or over stdio to a
server process.

The server process is SIGKILLed after the tool's effect, before its response is written;
the client starts a new server process and sends the same call again with the same
idempotency key in ``_meta``: the outbox counts two e-mails without the guard and one
with it.

This file is also the server process of that test (``python <this file> ...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel

from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    CallPolicy,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    Found,
    MemoryStore,
    SQLiteStore,
    StoreError,
    StuckCall,
    ToolOutcomeUnknown,
    prune_result,
)
from tool_execution_checkpoint.adapters.mcp import (
    CONTEXT_PARAMETER,
    IDEMPOTENCY_KEY,
    checkpointed_tool,
)
from tool_execution_checkpoint.identity import call_scope, current_idempotency_key, tool_call
from tool_execution_checkpoint.testing.conformance import leaks


class Receipt(BaseModel):
    to: str
    number: int


def sent(outbox: Path) -> int:
    return len(outbox.read_text().splitlines()) if outbox.exists() else 0


def send(outbox: Path, to: str, *details: str) -> Receipt:
    """The tool's effect: one line in the outbox."""
    with outbox.open("a") as lines:
        lines.write(" ".join((to, *details)) + "\n")
    return Receipt(to=to, number=sent(outbox))


def key(value: str = "6f1c2b8e-key") -> Any:
    return {IDEMPOTENCY_KEY: value}


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def host_call(client: Client, name: str, arguments: dict[str, Any], meta: Any) -> Any:
    """A host that retries what it is told failed: the same key while the refusal says
    ``retrySameKey``; an ``isError`` result goes to the model, whose retry is a new call
    (a new key); any other refusal fails the turn. Returns the result and the refusals."""
    refusals: list[MCPError] = []
    for _ in range(50):
        try:
            result = await client.call_tool(name, arguments, meta=meta)
        except MCPError as error:
            refusals.append(error)
            if not (isinstance(error.data, dict) and error.data.get("retrySameKey")):
                raise
            await asyncio.sleep(0.01)
            continue
        if not result.is_error:
            return result, refusals
        meta = key(f"{meta[IDEMPOTENCY_KEY]}+")
    raise AssertionError("never answered")


# --- the server process, SIGKILLed after the effect ----------------------------------------


def serve(workdir: Path, mode: str, crash: str) -> None:
    """One server process on stdio; with ``crash``, it dies right after the tool returned,
    before the SDK writes the response."""
    server = MCPServer("mail")
    outbox = workdir / "outbox"

    def send_email(to: str, body: str) -> Receipt:
        """Send an e-mail."""
        return send(outbox, to, body)

    tool = checkpointed_tool(SQLiteStore(workdir / "calls.db"))(send_email)
    if mode == "bare":
        tool = send_email

    @functools.wraps(tool)
    def dying(*args: Any, **kwargs: Any) -> Receipt:
        receipt = tool(*args, **kwargs)
        if crash == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return receipt

    server.tool()(dying)
    server.run()


def server_process(workdir: Path, mode: str, crash: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[__file__, str(workdir), mode, crash],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sys.path)},
    )


@pytest.mark.parametrize(("mode", "emails"), [("bare", 2), ("guarded", 1)])
def test_a_server_killed_after_the_effect_and_called_again_with_the_key_sends_once(
    tmp_path: Path, mode: str, emails: int
) -> None:
    async def scenario() -> None:
        arguments = {"to": "ada", "body": "paid"}
        lost: list[MCPError] = []
        async with Client(server_process(tmp_path, mode, "crash")) as client:
            try:
                await client.call_tool("send_email", arguments, meta=key())
            except MCPError as error:  # the server died before it responded
                lost.append(error)
        assert [error.message for error in lost] == ["Connection closed"]
        assert sent(tmp_path / "outbox") == 1

        async with Client(server_process(tmp_path, mode, "live")) as client:
            result = await client.call_tool("send_email", arguments, meta=key())
        assert sent(tmp_path / "outbox") == emails
        assert not result.is_error
        # The guarded retry hands back the first call's receipt, number 1.
        assert result.structured_content == {"to": "ada", "number": emails}

    run(scenario)


# --- in process: a real client and server over the SDK's in-memory transport --------------


def mail_server(
    store: Any, outbox: Path, seen: list[Any] | None = None, async_store: Any = None
) -> MCPServer:
    """``send_email`` (sync, guarded on ``store``) and ``send_later`` (async, with a
    ``Context``, guarded on ``async_store`` or ``store``)."""
    server = MCPServer("mail")

    @checkpointed_tool(store)
    def send_email(to: str, body: str) -> Receipt:
        """Send an e-mail."""
        return send(outbox, to, body)

    @checkpointed_tool(async_store or store)
    async def send_later(to: str, ctx: Context) -> Receipt:
        """Send an e-mail, asynchronously."""
        await ctx.report_progress(1, 2)
        await asyncio.sleep(0)
        return send(outbox, to)

    def probe(tool: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(tool)
        def probed(*args: Any, **kwargs: Any) -> Any:
            value = tool(*args, **kwargs)
            if seen is not None:
                seen.append(value)
            return value

        return probed

    server.tool()(probe(send_email))
    server.tool()(send_later)
    return server


def test_a_retry_with_the_same_key_returns_the_stored_receipt_typed(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    seen: list[Any] = []
    server = mail_server(MemoryStore(), outbox, seen)

    async def scenario() -> None:
        async with Client(server) as client:
            first = await client.call_tool("send_email", {"to": "ada", "body": "x"}, meta=key())
        async with Client(server) as client:  # another session, the same key
            again = await client.call_tool("send_email", {"to": "ada", "body": "x"}, meta=key())
        assert first.structured_content == again.structured_content == {"to": "ada", "number": 1}
        assert first.content == again.content

    run(scenario)
    assert sent(outbox) == 1
    assert [type(value) for value in seen] == [Receipt, Receipt]
    assert seen[0] == seen[1]


def test_an_async_tool_with_a_context_runs_once_and_the_context_is_not_fingerprinted(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"

    async def scenario() -> None:
        store = await AsyncSQLiteStore.open(tmp_path / "calls.db")
        server = mail_server(MemoryStore(), outbox, async_store=store)
        results = []
        for _ in range(2):  # two sessions: another Context, request id and session each time
            async with Client(server) as client:
                results.append(await client.call_tool("send_later", {"to": "ada"}, meta=key()))
        assert results[0].structured_content == results[1].structured_content
        async with Client(server) as client:
            fresh = await client.call_tool("send_later", {"to": "ada"}, meta=key("other-key"))
        assert fresh.structured_content == {"to": "ada", "number": 2}

    run(scenario)
    assert sent(outbox) == 2


def test_the_added_context_parameter_is_not_in_the_input_schema(tmp_path: Path) -> None:
    server = mail_server(MemoryStore(), tmp_path / "outbox")

    async def scenario() -> None:
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools["send_email"].input_schema["properties"]) == {"to", "body"}
        assert set(tools["send_later"].input_schema["properties"]) == {"to"}
        assert CONTEXT_PARAMETER not in str(tools["send_email"].input_schema)
        assert tools["send_email"].output_schema is not None

    run(scenario)


def test_the_same_key_with_other_arguments_is_refused_as_a_binding_conflict(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"
    server = mail_server(MemoryStore(), outbox)

    async def scenario() -> None:
        async with Client(server) as client:
            await client.call_tool("send_email", {"to": "ada", "body": "x"}, meta=key())
            with pytest.raises(MCPError) as raised:  # the host is not told to retry
                await host_call(client, "send_email", {"to": "eve", "body": "x"}, key())
        assert raised.value.code == INVALID_PARAMS
        assert raised.value.data == {"code": "BINDING_CONFLICT", "retrySameKey": False}
        assert "Do not resend it: a new call needs a new key" in raised.value.message
        assert "eve" not in str(raised.value)
        assert "6f1c2b8e" not in str(raised.value)

    run(scenario)
    assert sent(outbox) == 1


def test_a_call_without_a_key_is_refused_before_the_tool_runs(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    server = mail_server(MemoryStore(), outbox)

    async def scenario() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("send_email", {"to": "ada", "body": "x"})
            assert raised.value.code == INVALID_PARAMS
            assert raised.value.data == {"missingMeta": IDEMPOTENCY_KEY}
            with pytest.raises(MCPError) as wrong:
                await client.call_tool(
                    "send_email", {"to": "ada", "body": "x"}, meta=cast(Any, {IDEMPOTENCY_KEY: 7})
                )
            assert wrong.value.code == INVALID_PARAMS

    run(scenario)
    assert sent(outbox) == 0


def test_require_key_false_runs_a_call_without_a_key_unguarded(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(MemoryStore(), require_key=False)
    def send_email(to: str) -> Receipt:
        """Send an e-mail."""
        return send(outbox, to)

    async def scenario() -> None:
        async with Client(server) as client:
            for _ in range(2):
                await client.call_tool("send_email", {"to": "ada"})
            for _ in range(2):
                await client.call_tool("send_email", {"to": "ada"}, meta=key())

    run(scenario)
    assert sent(outbox) == 3


def test_a_tool_error_is_stored_and_a_retry_is_an_error_without_running_it() -> None:
    runs: list[str] = []
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(MemoryStore())
    def charge(amount: int) -> str:
        """Charge a card."""
        runs.append(f"charge {amount}")
        raise ToolError("card declined")

    async def scenario() -> None:
        async with Client(server) as client:
            first = await client.call_tool("charge", {"amount": 5}, meta=key())
            again = await client.call_tool("charge", {"amount": 5}, meta=key())
        assert first.is_error
        assert again.is_error
        assert isinstance(first.content[0], TextContent)
        assert "card declined" in first.content[0].text
        assert isinstance(again.content[0], TextContent)
        assert "raised ToolError when this call first ran it" in again.content[0].text

    run(scenario)
    assert runs == ["charge 5"]


def test_a_call_in_flight_is_worded_as_in_flight_and_the_same_key_later_runs_nothing(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"
    server = MCPServer("mail")

    async def scenario() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        @server.tool()
        @checkpointed_tool(MemoryStore())
        async def send_email(to: str) -> Receipt:
            """Send an e-mail, slowly."""
            started.set()
            await release.wait()
            return send(outbox, to)

        async with Client(server) as client:
            first = asyncio.create_task(client.call_tool("send_email", {"to": "ada"}, meta=key()))
            await started.wait()
            retry = asyncio.create_task(host_call(client, "send_email", {"to": "ada"}, key()))
            await asyncio.sleep(0.05)  # the retry is refused at least once meanwhile
            release.set()
            result = await first
            later, refusals = await retry
        assert refusals
        for refused in refusals:
            assert refused.code == INTERNAL_ERROR
            assert refused.data == {"status": "in-flight", "retrySameKey": True}
            assert "send the same key again later" in refused.message
            assert "reconcil" not in refused.message
        assert result.structured_content == later.structured_content

    run(scenario)
    assert sent(outbox) == 1


def test_an_mcp_error_from_the_tool_passes_through_and_marks_the_call_uncertain() -> None:
    runs: list[str] = []
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> str:
        """Needs the client to do something first."""
        runs.append(to)
        raise MCPError(INVALID_PARAMS, "sign in first")

    async def scenario() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError) as first:
                await client.call_tool("send_email", {"to": "ada"}, meta=key())
            with pytest.raises(MCPError) as again:
                await client.call_tool("send_email", {"to": "ada"}, meta=key())
        assert first.value.message == "sign in first"
        assert again.value.code == INTERNAL_ERROR
        assert again.value.data == {"status": "needs-reconciliation", "retrySameKey": False}
        assert "until an operator settles the record" in again.value.message

    run(scenario)
    assert runs == ["ada"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_policy_given_to_the_decorator_reaches_the_call(tmp_path: Path, is_async: bool) -> None:
    """``policy=`` carries what no keyword of checkpointed_tool does (a reconcile hook, a
    write budget): its hook finds the e-mail the first attempt sent and left unknown, and
    the retry with the same key gets the receipt it found; nothing is sent again."""
    outbox = tmp_path / "outbox"
    asked: list[StuckCall] = []

    def find(stuck: StuckCall) -> Found:
        asked.append(stuck)
        return Found(Receipt(to="ada", number=7))

    def send_email(to: str) -> Receipt:
        send(outbox, to)
        raise ToolOutcomeUnknown("the provider timed out after accepting it")

    async def send_email_async(to: str) -> Receipt:
        return send_email(to)

    server = MCPServer("mail")
    guard = checkpointed_tool(MemoryStore(), name="send_email", policy=CallPolicy(reconcile=find))
    server.tool(name="send_email")(guard(send_email_async if is_async else send_email))

    async def scenario() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError) as first:
                await client.call_tool("send_email", {"to": "ada"}, meta=key())
            again = await client.call_tool("send_email", {"to": "ada"}, meta=key())
        assert first.value.data == {"status": "needs-reconciliation", "retrySameKey": False}
        assert again.structured_content == {"to": "ada", "number": 7}

    run(scenario)
    assert sent(outbox) == 1
    assert len(asked) == 1


def test_excluded_arguments_are_left_out_of_the_fingerprint(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(MemoryStore(), exclude=("trace",))
    def send_email(to: str, trace: str = "") -> Receipt:
        """Send an e-mail."""
        return send(outbox, to, trace)

    async def scenario() -> None:
        async with Client(server) as client:
            await client.call_tool("send_email", {"to": "ada", "trace": "a"}, meta=key())
            await client.call_tool("send_email", {"to": "ada", "trace": "b"}, meta=key())

    run(scenario)
    assert sent(outbox) == 1


def test_decorating_refuses_what_the_guard_cannot_keep(tmp_path: Path) -> None:
    def asks() -> InputRequiredResult | CallToolResult:
        raise NotImplementedError

    def sync_tool(to: str) -> str:
        return to

    def clashes(checkpoint_context: str) -> str:
        return checkpoint_context

    def with_context(to: str, ctx: Context) -> str:
        del ctx
        return to

    cases: list[tuple[Any, Callable[..., Any], str]] = [
        (checkpointed_tool(MemoryStore()), asks, "tool"),
        (checkpointed_tool(AsyncSQLiteStore(tmp_path / "a.db")), sync_tool, "store"),
        (checkpointed_tool(MemoryStore(), exclude=("nope",)), sync_tool, "exclude"),
        (checkpointed_tool(MemoryStore()), clashes, "tool"),
        (checkpointed_tool(MemoryStore(), intent=("nope",)), sync_tool, "intent"),
        (checkpointed_tool(MemoryStore(), intent=()), sync_tool, "intent"),
        (checkpointed_tool(MemoryStore(), intent=("ctx",)), with_context, "intent"),
    ]
    for decorate, tool, field in cases:
        with pytest.raises(CheckpointError) as raised:
            decorate(tool)
        assert raised.value.code is ErrorCode.INVALID_ARGUMENT
        assert raised.value.field == field


# --- identity: the client's key, whatever the server process has around it ----------------


class Transient(Exception):
    """An upstream timeout, raised before the tool's effect."""


def lose_first_response(tool: Callable[..., Any]) -> Callable[..., Any]:
    """``tool``, whose first response is lost after its effect: the client is told the
    connection closed, as when the server dies before writing the response."""
    lost: list[bool] = []

    @functools.wraps(tool)
    def losing(*args: Any, **kwargs: Any) -> Any:
        value = tool(*args, **kwargs)
        if not lost:
            lost.append(True)
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        return value

    return losing


@pytest.mark.parametrize(("intent", "reworded"), [(None, "paid"), (("to",), "Paid, thanks.")])
def test_a_response_lost_after_the_effect_then_the_same_key_again_sends_once(
    tmp_path: Path, intent: tuple[str, ...] | None, reworded: str
) -> None:
    """With ``intent=("to",)`` the retry's model reworded ``body``: the same call."""
    outbox = tmp_path / "outbox"
    server = MCPServer("mail")

    @checkpointed_tool(MemoryStore(), intent=intent)
    def send_email(to: str, body: str) -> Receipt:
        """Send an e-mail."""
        return send(outbox, to, body)

    server.tool()(lose_first_response(send_email))

    async def scenario() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError) as lost:
                await client.call_tool("send_email", {"to": "ada", "body": "paid"}, meta=key())
        assert (lost.value.code, sent(outbox)) == (CONNECTION_CLOSED, 1)
        async with Client(server) as client:  # reconnected, the same key
            again = await client.call_tool(
                "send_email", {"to": "ada", "body": reworded}, meta=key()
            )
            assert again.structured_content == {"to": "ada", "number": 1}
            with pytest.raises(MCPError) as conflict:  # another recipient: never a replay
                await client.call_tool("send_email", {"to": "eve", "body": reworded}, meta=key())
            assert conflict.value.data == {"code": "BINDING_CONFLICT", "retrySameKey": False}
            other = {"to": "ada", "body": reworded}
            fresh = await client.call_tool("send_email", other, meta=key("another-call"))
            assert fresh.structured_content == {"to": "ada", "number": 2}

    run(scenario)
    assert sent(outbox) == 2


@pytest.mark.parametrize(("not_run", "emails"), [((Transient,), 1), (None, 0)])
def test_a_transient_error_before_the_effect_is_not_stored_and_the_same_key_runs_the_tool(
    tmp_path: Path, not_run: tuple[type[Exception], ...] | None, emails: int
) -> None:
    """Without ``not_run`` the timeout is stored as the call's result, for good."""
    outbox = tmp_path / "outbox"
    failures = [Transient()]
    server = MCPServer("mail")
    options: dict[str, Any] = {} if not_run is None else {"not_run": not_run}

    @server.tool()
    @checkpointed_tool(MemoryStore(), **options)
    def send_email(to: str) -> Receipt:
        """Send an e-mail; the upstream times out once, before sending."""
        if failures:
            raise failures.pop()
        return send(outbox, to)

    async def scenario() -> None:
        async with Client(server) as client:
            first = await client.call_tool("send_email", {"to": "ada"}, meta=key())
            again = await client.call_tool("send_email", {"to": "ada"}, meta=key())
        assert first.is_error
        assert again.is_error is (emails == 0)

    run(scenario)
    assert sent(outbox) == emails


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield


STRAY: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "none": nothing,
    "tool_call": lambda: tool_call("stray-server-call"),
    "call_scope": lambda: call_scope("stray-server-turn"),
}
"""A block of the process around the server: the SDK's in-memory transport runs the
server's handler in the client's task, so the host's block is around the tool."""


@pytest.mark.parametrize("stray", sorted(STRAY))
def test_the_client_key_names_the_call_and_its_downstream_key_whatever_the_server_is_in(
    tmp_path: Path, stray: str
) -> None:
    outbox = tmp_path / "outbox"
    downstream: list[str] = []
    failures = [Transient()]
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(MemoryStore(), not_run=(Transient,))
    async def send_email(to: str) -> Receipt:
        """Send an e-mail with the provider's idempotency key."""
        downstream.append(current_idempotency_key())
        if failures:
            raise failures.pop()
        return send(outbox, to)

    async def session(*keys: str) -> list[Any]:
        with STRAY[stray]():
            async with Client(server) as client:
                results = []
                for value in keys:
                    result = await client.call_tool("send_email", {"to": "ada"}, meta=key(value))
                    results.append(result.structured_content)
                return results

    async def scenario() -> None:
        # key-a: the upstream times out, the same key again sends; key-b: another call;
        # key-a once more, in another session: the stored receipt.
        assert await session("key-a", "key-a") == [None, {"to": "ada", "number": 1}]
        assert await session("key-b", "key-a") == [
            {"to": "ada", "number": 2},
            {"to": "ada", "number": 1},
        ]

    run(scenario)
    assert sent(outbox) == 2
    assert len(downstream) == 3
    assert downstream[0] == downstream[1] != downstream[2]
    assert all(k.startswith("tec-") and "key" not in k for k in downstream)


class Down(MemoryStore):
    def create_if_absent(self, key: str, record: Checkpoint) -> bool:  # noqa: ARG002
        raise StoreError("injected: down")

    def get(self, key: str) -> Any:  # noqa: ARG002
        raise StoreError("injected: down")


def test_a_pruned_result_and_a_store_that_is_down_are_worded_for_what_the_client_can_do(
    tmp_path: Path,
) -> None:
    outbox = tmp_path / "outbox"
    recipient = "zq-recipient-77"
    store = MemoryStore()
    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(store)
    def send_email(to: str) -> Receipt:
        """Send an e-mail."""
        return send(outbox, to)

    @server.tool()
    @checkpointed_tool(Down())
    def send_now(to: str) -> Receipt:
        """Send an e-mail through a store that is down."""
        return send(outbox, to)

    async def scenario() -> list[MCPError]:
        refusals = []
        async with Client(server) as client:
            await client.call_tool("send_email", {"to": recipient}, meta=key())
            (record_key,) = store.keys()
            pruned = prune_result(
                Checkpoint.from_dict(store.get(record_key) or {}), at="2099-01-01T00:00:00Z"
            )
            assert store.compare_and_swap(record_key, pruned.expected_revision, pruned.next)
            for name in ("send_email", "send_now"):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, {"to": recipient}, meta=key())
                refusals.append(raised.value)
        return refusals

    refusals = asyncio.run(scenario())
    assert [(refusal.code, refusal.data) for refusal in refusals] == [
        (INTERNAL_ERROR, {"status": "result-pruned", "retrySameKey": False}),
        (INTERNAL_ERROR, {"status": "store-unavailable", "retrySameKey": True}),
    ]
    for refusal in refusals:
        assert leaks(refusal, "6f1c2b8e") is None
        assert leaks(refusal, recipient) is None
    assert sent(outbox) == 1


CHAIN_KEY = "chain-key-4b9e1d"
"""An idempotency key that no exception the server raises may hold, down its chain."""


def _caught(tool: Callable[..., Any], errors: list[BaseException]) -> Callable[..., Any]:
    """``tool`` (a guarded sync or async tool) keeping each exception it raises in
    ``errors`` before the SDK turns it into the client's error."""
    if inspect.iscoroutinefunction(tool):

        @functools.wraps(tool)
        async def caught_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await tool(*args, **kwargs)
            except Exception as error:
                errors.append(error)
                raise

        return caught_async

    @functools.wraps(tool)
    def caught(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except Exception as error:
            errors.append(error)
            raise

    return caught


def test_the_errors_a_client_is_told_hold_no_key_down_their_whole_chain() -> None:
    """An answer raised inside the ``except`` kept the guard's error (its outcome holds
    the record, the key among it) as ``__context__``, suppressed but there for any
    reporter that walks the chain."""
    errors: list[BaseException] = []
    server = MCPServer("mail")
    store = MemoryStore()

    @checkpointed_tool(store)
    def sign_in(to: str) -> str:
        """Needs the client to sign in first: the call is left uncertain."""
        del to
        raise MCPError(INVALID_PARAMS, "sign in first")

    @checkpointed_tool(store)
    async def charge(amount: int) -> str:
        """Charge a card: declined."""
        del amount
        raise ToolError("card declined")

    server.tool()(_caught(sign_in, errors))
    server.tool()(_caught(charge, errors))

    async def scenario() -> None:
        async with Client(server) as client:
            for _ in range(2):  # passed through, then needs reconciliation
                with pytest.raises(MCPError):
                    await client.call_tool("sign_in", {"to": "ada"}, meta=key(CHAIN_KEY))
            with pytest.raises(MCPError):  # the same key with other arguments
                await client.call_tool("sign_in", {"to": "eve"}, meta=key(CHAIN_KEY))
            other = key(CHAIN_KEY + "-2")
            for _ in range(2):  # the tool's error, then ToolRaisedEarlier's answer
                assert (await client.call_tool("charge", {"amount": 5}, meta=other)).is_error

    run(scenario)
    answers = errors[1:3] + errors[4:]
    assert [type(error) for error in answers] == [MCPError, MCPError, ToolError]
    assert [cast(MCPError, error).data for error in answers[:2]] == [
        {"status": "needs-reconciliation", "retrySameKey": False},
        {"code": "BINDING_CONFLICT", "retrySameKey": False},
    ]
    for error in answers:
        assert leaks(error, CHAIN_KEY) is None, error
        assert (error.__context__, error.__cause__) == (None, None), error


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2], sys.argv[3])


def test_a_generator_function_is_refused_when_decorated() -> None:
    def rows(to: str) -> Iterator[str]:
        yield to

    with pytest.raises(CheckpointError) as caught:
        checkpointed_tool(MemoryStore())(rows)
    assert caught.value.field == "tool"
