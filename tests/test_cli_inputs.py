"""The command line's inputs are bounded and every refusal is in the taxonomy: a huge
duration, deep JSON, a file without end, a NUL in a path, a connection string given where
a URL goes; each is a usage error or an invalid record, never a traceback, and none of them
is echoed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tool_execution_checkpoint import CheckpointError, ErrorCode, SQLiteStore, cli
from tool_execution_checkpoint.stores.sqlite import SQLiteConfigurationError

SECRET = "hunter2-5ec7e7"


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    SQLiteStore(tmp_path / "calls.db").close()
    return f"sqlite:{tmp_path / 'calls.db'}"


def test_a_connection_string_where_a_url_goes_is_never_echoed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in (["list"], ["show"], ["prune", "--retention", "7d"]):
        target = f"host=db.internal user=ops password={SECRET}"
        arguments = [*command, target] + (["KEY"] if command == ["show"] else [])
        assert cli.main(arguments) == cli.Exit.USAGE
        printed = capsys.readouterr()
        assert SECRET not in printed.err + printed.out
        assert "db.internal" not in printed.err + printed.out


@pytest.mark.parametrize("text", ["9" * 400, "9" * 40 + "d", "1000001d", "1e999"])
def test_a_duration_past_the_longest_is_a_usage_error(
    text: str, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for arguments in (
        ["list", store_url, "--older-than", text],
        ["prune", store_url, "--retention", text],
    ):
        with pytest.raises(SystemExit) as caught:
            cli.main(arguments)
        assert caught.value.code == cli.Exit.USAGE
        assert "at most 1000000d" in capsys.readouterr().err


def test_the_longest_duration_is_taken(store_url: str) -> None:
    assert cli.duration("1000000d") == cli.MAX_DURATION_SECONDS
    assert cli.main(["list", store_url, "--older-than", "1000000d"]) == cli.Exit.OK


def test_deeply_nested_json_is_an_invalid_record_or_a_usage_error(
    tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    assert cli.main(["inspect", str(deep)]) == cli.Exit.INVALID_RECORD
    assert "nested too deep" in capsys.readouterr().out
    arguments = ["reconcile", store_url, "k", "--revision", "1", "--complete", str(deep)]
    assert cli.main(arguments) == cli.Exit.USAGE


def test_a_file_without_end_is_refused_after_the_bound(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    endless = "/dev/zero"
    assert cli.main(["inspect", endless]) == cli.Exit.USAGE
    assert f"more than {cli.MAX_INPUT_BYTES} bytes" in capsys.readouterr().err
    arguments = ["reconcile", store_url, "k", "--revision", "1", "--complete", endless]
    assert cli.main(arguments) == cli.Exit.USAGE


def test_a_file_at_the_bound_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    padded = tmp_path / "padded.json"
    body = json.dumps({"not": "a record"})
    padded.write_text(body + " " * (cli.MAX_INPUT_BYTES - len(body)), encoding="utf-8")
    assert cli.main(["inspect", str(padded)]) == cli.Exit.INVALID_RECORD  # read and judged
    assert "invalid" in capsys.readouterr().out


def test_a_nul_in_a_sqlite_path_or_url_is_refused_in_the_taxonomy(tmp_path: Path) -> None:
    with pytest.raises(SQLiteConfigurationError):
        SQLiteStore(str(tmp_path / "a\x00b.db"))
    with pytest.raises(CheckpointError) as caught:
        SQLiteStore.from_url(f"sqlite:{tmp_path}/a%00b.db")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert cli.main(["list", f"sqlite:{tmp_path}/a%00b.db"]) == cli.Exit.USAGE
