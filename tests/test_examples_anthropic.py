"""The provider examples, run as the user would run them, each variant in its own process:
the real ``anthropic`` SDK against the fake APIs the examples serve on 127.0.0.1.

The SDK is in the ``dev`` extra, so it is imported here unconditionally: without it this
file fails to collect instead of skipping. The counts are read from the outbox files the
examples' tool writes, not from their own verdict. Anything but 127.0.0.1 is routed to a
dead proxy, so a request that would leave the machine fails instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError

from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    JSONValue,
    RunOutcome,
    RunStatus,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    prune_result,
)

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = ROOT / "examples" / "anthropic_sessions.py"
MESSAGES = ROOT / "examples" / "messages_retry.py"
DEAD_PROXY = "http://127.0.0.1:9"


def offline_environment() -> dict[str, str]:
    """This environment with a dummy API key and every proxy variable pointing at a dead
    port, except for 127.0.0.1."""
    environment = dict(os.environ)
    environment["ANTHROPIC_API_KEY"] = "sk-ant-dummy-key-for-the-tests"
    environment.pop("ANTHROPIC_BASE_URL", None)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        environment[name] = environment[name.lower()] = DEAD_PROXY
    environment["NO_PROXY"] = environment["no_proxy"] = "127.0.0.1"
    return environment


def run_example(script: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *arguments],
        capture_output=True,
        text=True,
        check=False,
        env=offline_environment(),
        timeout=180,
    )


def emails_sent(workdir: Path) -> list[str]:
    outbox = workdir / "outbox.txt"
    return outbox.read_text(encoding="utf-8").splitlines() if outbox.exists() else []


def test_the_installed_sdk_is_the_pinned_one() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dev = extras["project"]["optional-dependencies"]["dev"]
    assert f"anthropic=={anthropic.__version__}" in dev
    client = anthropic.AsyncAnthropic(api_key="sk-ant-dummy", base_url="http://127.0.0.1:9")
    assert callable(client.beta.sessions.events.tool_runner)


@pytest.mark.parametrize(
    ("variant", "emails", "hosts", "delivered"),
    [
        (
            "checkpoint",
            1,
            ["checkpoint executed-and-delivered: ran", "checkpoint already-delivered: did not run"],
            "m-1",
        ),
        ("bare", 2, ["no checkpoint: ran send_email"] * 2, "m-2"),
    ],
)
def test_sessions_host_killed_before_its_result_post(
    variant: str, emails: int, hosts: list[str], delivered: str, tmp_path: Path
) -> None:
    run = run_example(SESSIONS, "--variant", variant, "--workdir", str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert emails_sent(tmp_path / variant) == ["ada@example.com"] * emails, run.stdout
    for number, line in enumerate(hosts, start=1):
        assert f"host {number} | {line}" in run.stdout
    assert "host 1 was SIGKILLed while its result POST was held" in run.stdout
    # the session got exactly one result: host 1's stored one, or host 2's new one
    got = re.findall(r"the session got: (.*)", run.stdout)
    assert got == [f'{{"messageId": "{delivered}", "to": "ada@example.com"}}'], run.stdout


@pytest.mark.parametrize(
    ("keying", "emails", "second_attempt"),
    [("app", 1, "delivered-stored-result"), ("provider", 2, "executed-and-delivered")],
)
def test_messages_retried_turn(
    keying: str, emails: int, second_attempt: str, tmp_path: Path
) -> None:
    run = run_example(MESSAGES, "--keying", keying, "--workdir", str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert emails_sent(tmp_path / keying) == ["ada@example.com"] * emails, run.stdout
    assert "attempt 1 | run_once: delivery-failed (ran the tool: True)" in run.stdout
    assert f"attempt 2 | run_once: {second_attempt}" in run.stdout
    # the retried turn's model answer named the call anew
    for attempt, tool_use_id in ((1, "toolu_A"), (2, "toolu_B")):
        asked = f"attempt {attempt} | the model asked for send_email {{'to': 'ada@example.com'}}"
        assert f"{asked} as {tool_use_id}" in run.stdout
    # the SDK's retries are off: two requests per attempt, one tool_result accepted
    assert "server | 4 requests; tool results accepted: 1" in run.stdout


def test_the_examples_exit_nonzero_on_a_wrong_count(tmp_path: Path) -> None:
    """The verdict the examples print is checked too: a wrong count exits 1."""
    script = tmp_path / "messages_retry_wrong.py"
    source = MESSAGES.read_text(encoding="utf-8")
    expected = 'EXPECTED_EMAILS = {"app": 1,'
    assert expected in source
    script.write_text(source.replace(expected, 'EXPECTED_EMAILS = {"app": 2,'))
    run = run_example(script, "--keying", "app", "--workdir", str(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "WRONG e-mail count: {'app': 1}" in run.stderr


def _load_sessions_example() -> Any:
    spec = importlib.util.spec_from_file_location("anthropic_sessions_example", SESSIONS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _records() -> dict[str, Checkpoint]:
    """A record in each state ``answer`` tells apart, driven through the core."""
    at = "2026-01-01T00:00:00Z"
    binding = Binding("ns", "call", "send_email", "1", "sha256:0")
    ready = create_checkpoint(binding, created_at=at)
    executing = claim_execution(ready, attempt_id="a", at=at).next
    done = complete_execution(executing, attempt_id="a", at=at, result={"messageId": "m-1"})
    delivering = claim_delivery(done.next, delivery_id="d", at=at).next
    delivered = complete_delivery(delivering, delivery_id="d", at=at).next
    pruned = prune_result(delivered, at=at).next
    return {
        "executing": executing,
        "delivering": delivering,
        "delivered": delivered,
        "pruned": pruned,
    }


def test_sessions_answer_hands_over_the_stored_result_or_raises_tool_error() -> None:
    """The sessions example's ``answer``, on every outcome run_once can give it: the
    payload handed over in this call first; else the stored payload when the record says
    it was handed over before (delivered, or a delivery whose outcome is unknown); else a
    ToolError naming the status, never the payload, and never a rerun."""
    example = _load_sessions_example()
    records = _records()
    stored = {"messageId": "m-1"}

    def outcome(status: RunStatus, record: str | None) -> RunOutcome:
        return RunOutcome(status, False, records[record] if record is not None else None)

    handed: list[JSONValue] = [{"messageId": "m-2"}]
    assert example.answer(outcome(RunStatus.EXECUTED_AND_DELIVERED, "delivered"), handed) == {
        "messageId": "m-2"
    }
    assert example.answer(outcome(RunStatus.ALREADY_DELIVERED, "delivered"), []) == stored
    assert (
        example.answer(outcome(RunStatus.NEEDS_DELIVERY_RECONCILIATION, "delivering"), []) == stored
    )
    refused = [
        (RunStatus.ALREADY_DELIVERED, "pruned"),
        (RunStatus.NEEDS_EXECUTION_RECONCILIATION, "executing"),
        (RunStatus.LOST_TO_ANOTHER_WORKER, "executing"),
        (RunStatus.STORE_UNAVAILABLE, None),
    ]
    for status, record in refused:
        with pytest.raises(ToolError) as caught:
            example.answer(outcome(status, record), [])
        message = str(caught.value)
        assert f"checkpoint is {status.value}" in message
        assert "m-1" not in message
