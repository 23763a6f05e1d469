"""The command line: the demo, the table, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tool_execution_checkpoint import TABLE, cli
from tool_execution_checkpoint.rendering import render_markdown, render_mermaid
from tool_execution_checkpoint.runner import RunOutcome, RunStatus


def test_the_demo_runs_the_tool_once_and_recovers(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tool_execution_checkpoint",
            "demo",
            "--path",
            str(tmp_path / "d.db"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "delivery-failed" in run.stdout
    assert "delivered-stored-result" in run.stdout
    assert "e-mails sent: 1; results delivered: 1" in run.stdout


def test_the_demo_fails_when_the_tool_runs_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def naive(store: Any, binding: Any, tool: Any, deliver: Any) -> RunOutcome:
        del store, binding, deliver
        tool()  # reruns on every reconnect: the bug this library exists for
        return RunOutcome(RunStatus.EXECUTED_AND_DELIVERED, True, None)

    monkeypatch.setattr(cli, "run_once", naive)
    assert cli.main(["demo", "--path", str(tmp_path / "d.db")]) == 1
    assert "ran more than once" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("form", "expected"),
    [("markdown", render_markdown(TABLE)), ("mermaid", render_mermaid(TABLE))],
)
def test_spec_prints_the_rendered_table(
    form: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["spec", "--format", form]) == 0
    assert capsys.readouterr().out == expected


def test_spec_as_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["spec", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert list(table["statuses"]) == [str(status) for status in TABLE.statuses]
    assert table["transitions"]["claim_execution"]["grants"] == "execute"
    assert cli.main(["spec"]) == 0
    text = capsys.readouterr().out
    for name in TABLE.transitions:
        assert name in text


def test_bad_usage_exits_2() -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["nonsense"])
    assert caught.value.code == 2
