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
import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    TextContent,
)
from pydantic import BaseModel

from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
)
from tool_execution_checkpoint.adapters.mcp import (
    CONTEXT_PARAMETER,
    IDEMPOTENCY_KEY,
    checkpointed_tool,
)
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
            with pytest.raises(MCPError) as raised:
                await client.call_tool("send_email", {"to": "eve", "body": "x"}, meta=key())
        assert raised.value.code == INVALID_PARAMS
        assert raised.value.data == {"code": "BINDING_CONFLICT"}
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


def test_a_call_in_flight_is_refused_and_may_be_sent_again_later(tmp_path: Path) -> None:
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
            with pytest.raises(MCPError) as raised:
                await client.call_tool("send_email", {"to": "ada"}, meta=key())
            release.set()
            result = await first
            later = await client.call_tool("send_email", {"to": "ada"}, meta=key())
        assert raised.value.code == INTERNAL_ERROR
        assert raised.value.data == {
            "status": "needs-execution-reconciliation",
            "retrySameKey": True,
        }
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
        assert again.value.data == {
            "status": "needs-execution-reconciliation",
            "retrySameKey": False,
        }

    run(scenario)
    assert runs == ["ada"]


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

    cases: list[tuple[Any, Callable[..., Any], str]] = [
        (checkpointed_tool(MemoryStore()), asks, "tool"),
        (checkpointed_tool(AsyncSQLiteStore(tmp_path / "a.db")), sync_tool, "store"),
        (checkpointed_tool(MemoryStore(), exclude=("nope",)), sync_tool, "exclude"),
        (checkpointed_tool(MemoryStore()), clashes, "tool"),
    ]
    for decorate, tool, field in cases:
        with pytest.raises(CheckpointError) as raised:
            decorate(tool)
        assert raised.value.code is ErrorCode.INVALID_ARGUMENT
        assert raised.value.field == field


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
        {"status": "needs-execution-reconciliation", "retrySameKey": False},
        {"code": "BINDING_CONFLICT"},
    ]
    for error in answers:
        assert leaks(error, CHAIN_KEY) is None, error
        assert (error.__context__, error.__cause__) == (None, None), error


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
