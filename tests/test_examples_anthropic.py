"""The provider examples, run as the user would run them, each variant in its own process:
the real ``anthropic`` SDK against the fake APIs the examples serve on 127.0.0.1.

The SDK is in the ``dev`` extra, so it is imported here unconditionally: without it this
file fails to collect instead of skipping. The counts are read from the outbox files the
examples' tool writes, not from their own verdict. Anything but 127.0.0.1 is routed to a
dead proxy, so a request that would leave the machine fails instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import anthropic
import pytest

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
            ["checkpoint: ran send_email", "runner: send_email call"],
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
    ran = re.findall(r"host (\d) \| (?:no )?checkpoint: ran send_email", run.stdout)
    assert ran == [str(number) for number in range(1, emails + 1)], run.stdout
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
