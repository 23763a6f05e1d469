"""The anthropic adapter, in the SDK's own Messages tool runner against a fake Messages
API on 127.0.0.1: the result's POST fails, the host retries the turn, and the model asks
again under a new tool-use id. The Sessions runner, with a host SIGKILLed mid-call, is
examples/anthropic_sessions.py, run by tests/test_examples_anthropic.py."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic.lib.tools import beta_tool  # noqa: E402

from chain_checks import assert_unkeepable_return_types_leave_no_chain  # noqa: E402
from test_examples_anthropic import offline_environment  # noqa: E402
from tool_execution_checkpoint import (  # noqa: E402
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    tool_call,
)
from tool_execution_checkpoint.adapters.anthropic import (  # noqa: E402
    checkpointed_tool,
    messages_turn,
)

ROOT = Path(__file__).resolve().parents[1]
PROMPT = {"role": "user", "content": "E-mail Ada that her invoice is paid."}


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "messages_retry_example", ROOT / "examples" / "messages_retry.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The example's fake Messages API: a fresh tool-use id per prompt, the first tool
    result's POST answered 500 and dropped."""
    for name, value in offline_environment().items():
        monkeypatch.setenv(name, value)
    fake = EXAMPLE.FakeMessages()
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    yield fake
    fake.shutdown()
    fake.server_close()


def run_turn_until_done(base_url: str, tool: Any, turn: Callable[[], Any]) -> int:
    """Attempt the turn in the SDK's tool runner until it ends; return the attempts."""
    client = anthropic.Anthropic(api_key="sk-ant-dummy", base_url=base_url, max_retries=0)
    try:
        for attempt in range(1, 4):
            with turn():
                runner = client.beta.messages.tool_runner(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    tools=[tool],
                    messages=[PROMPT],
                    thread=False,  # the history goes in each request, as the fake expects
                )
                try:
                    runner.until_done()
                except anthropic.APIStatusError:
                    continue
                return attempt
    finally:
        client.close()
    raise AssertionError("the turn never ended")


def sent(outbox: Path) -> list[str]:
    return outbox.read_text(encoding="utf-8").splitlines() if outbox.exists() else []


@pytest.mark.parametrize(("guarded", "emails"), [(True, 1), (False, 2)])
def test_a_retried_turn_sends_the_email_once_only_with_the_guard(
    server: Any, tmp_path: Path, guarded: bool, emails: int
) -> None:
    outbox = tmp_path / "outbox.txt"

    def send_email(to: str) -> str:
        """Send an e-mail."""
        with outbox.open("a", encoding="utf-8") as lines:
            lines.write(f"{to}\n")
        return json.dumps({"messageId": f"m-{len(sent(outbox))}"})

    with SQLiteStore(tmp_path / "checkpoints.db") as store:
        tool = beta_tool(checkpointed_tool(store)(send_email) if guarded else send_email)
        attempts = run_turn_until_done(
            server.base_url, tool, lambda: messages_turn("conv-42/turn-7")
        )
    assert attempts == 2
    assert sent(outbox) == ["ada@example.com"] * emails
    (accepted,) = server.results
    assert accepted["tool_use_id"] == "toolu_B"
    # The retried turn's result is the stored one, or a second e-mail's.
    assert json.loads(accepted["content"]) == {"messageId": f"m-{emails}"}


def test_the_nth_call_of_a_tool_in_a_turn_has_its_own_call_id() -> None:
    runs: list[str] = []

    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> str:
        runs.append(to)
        return to

    for _ in range(2):  # the turn, then its retry
        with messages_turn("conv-1/turn-1"):
            send_email("ada@example.com")
            send_email("bob@example.com")
    assert runs == ["ada@example.com", "bob@example.com"]
    with messages_turn("conv-1/turn-1"), pytest.raises(CheckpointError) as caught:
        send_email("eve@example.com")  # the retry asks for another recipient
    assert caught.value.code is ErrorCode.BINDING_CONFLICT


def test_without_a_turn_session_or_call_id_the_call_is_refused() -> None:
    runs = 0

    @checkpointed_tool(MemoryStore())
    def send_email(to: str) -> str:
        nonlocal runs
        runs += 1
        return to

    with pytest.raises(CheckpointError) as caught:
        send_email("ada@example.com")
    assert caught.value.field == "call_id"
    with tool_call("app-call-1"):
        send_email("ada@example.com")
        send_email("ada@example.com")
    assert runs == 1


def test_a_return_type_the_guard_cannot_keep_is_refused_naming_it_nowhere_in_the_chain() -> None:
    assert_unkeepable_return_types_leave_no_chain(checkpointed_tool(MemoryStore()))
