"""The command line: the demo, the table, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tool_execution_checkpoint import (
    TABLE,
    Binding,
    SQLiteStore,
    checkpoint_key,
    claim_execution,
    cli,
    create_checkpoint,
    run_once,
)
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


def _filled_store(path: Path) -> str:
    """A SQLite store with one delivered and one executing record; returns its URL."""
    store = SQLiteStore(path)
    delivered = Binding("cli", "call-delivered", "tool", "1", "sha256:0")
    sent: list[object] = []
    run_once(store, delivered, lambda: {"ok": True}, sent.append)
    stuck = Binding("cli", "call-stuck", "tool", "1", "sha256:0")
    record = create_checkpoint(stuck, created_at="2026-01-01T00:00:00Z")
    store.create_if_absent(checkpoint_key(stuck), record)
    claim = claim_execution(record, attempt_id="gone", at="2026-01-01T00:00:01Z")
    store.compare_and_swap(checkpoint_key(stuck), claim.expected_revision, claim.next)
    store.close()
    return f"sqlite://{path}"


def test_inspect_reads_a_file_and_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    key = checkpoint_key(Binding("cli", "call-stuck", "tool", "1", "sha256:0"))
    assert cli.main(["inspect", "--url", url, "--key", key]) == 0
    out = capsys.readouterr().out
    assert "valid: status=executing revision=2 decide=reconcile-execution" in out
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schemaVersion": 1, "revision": 0}), encoding="utf-8")
    assert cli.main(["inspect", str(broken)]) == 3
    assert "invalid: INVALID_CHECKPOINT" in capsys.readouterr().out


def test_list_finds_stuck_claims_and_prune_keeps_tombstones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _filled_store(tmp_path / "s.db")
    arguments = ["list", url, "--status", "executing", "--older-than", "60", "--format", "json"]
    assert cli.main(arguments) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["call_id"] for row in rows] == ["call-stuck"]
    assert cli.main(["prune", url, "--retention", "0"]) == 0
    assert "pruned 1 delivered payloads" in capsys.readouterr().out
    assert cli.main(["list", url]) == 0
    table = capsys.readouterr().out
    assert "call-delivered" in table
    assert "call-stuck" in table


def test_bad_store_urls_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "ftp://example/x"]) == 2
    assert "store URL" in capsys.readouterr().err
    assert cli.main(["list", "sqlite:///no/such/dir/x.db"]) == 4


def test_check_store_passes_a_good_store_and_fails_a_broken_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    factory = "tool_execution_checkpoint.memory:MemoryStore"
    assert cli.main(["check-store", factory, "--examples", "20"]) == 0
    assert "the store passed every check" in capsys.readouterr().out
    assert cli.main(["check-store", "broken:RevisionBlindStore", "--examples", "100"]) == 5
    report = capsys.readouterr().out
    assert "FAIL  compare_and_swap_with_a_stale_revision_fails_and_changes_nothing" in report
    assert "FAIL  protocol_harness" in report
    assert cli.main(["check-store", "no_such_module:factory"]) == 2
